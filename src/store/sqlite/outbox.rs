//! The embedded store's outbox: events appended in the writer's transaction, read back
//! in position order, and the relays' leases and confirmed positions.
//!
//! SQLite has one writer, so `AUTOINCREMENT` positions are in commit order; they are
//! never reused, even after retention deleted the newest rows (`sqlite_sequence` keeps
//! the largest ever given).

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::internal;
use crate::events::{ChangeEvent, StoredEvent};
use crate::model::CatalogId;
use crate::store::{EventRead, StoreResult};

pub(super) const MIGRATION: &str = r#"
CREATE TABLE events (
    position   INTEGER PRIMARY KEY AUTOINCREMENT,
    sequence   INTEGER NOT NULL,
    catalog_id INTEGER NOT NULL,
    entity     TEXT NOT NULL,
    operation  TEXT NOT NULL,
    time_ms    INTEGER NOT NULL,
    event_id   TEXT NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX events_by_catalog ON events (catalog_id, position);
CREATE TABLE event_sequences (
    entity   TEXT PRIMARY KEY,
    sequence INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE event_relays (
    name           TEXT PRIMARY KEY,
    holder         TEXT NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    position       INTEGER NOT NULL
);
"#;

/// Appends a batch's events: each takes its entity's next sequence number.
///
/// The sequence is bumped, then read, in two statements: a `RETURNING` clause would do it
/// in one, but SQLite buffers its rows in an ephemeral table it opens (a B-tree, its page
/// cache and their allocations) on every execution. That was a tenth of the commit
/// thread's time in the 50/50 mix, and this runs there, on every write.
pub(super) fn append(tx: &Transaction, events: &[ChangeEvent]) -> StoreResult<()> {
    for e in events {
        tx.prepare_cached(
            "INSERT INTO event_sequences (entity, sequence) VALUES (?1, 1)
             ON CONFLICT (entity) DO UPDATE SET sequence = sequence + 1",
        )
        .and_then(|mut s| s.execute([&e.entity]))
        .map_err(internal)?;
        let sequence: i64 = tx
            .prepare_cached("SELECT sequence FROM event_sequences WHERE entity = ?1")
            .and_then(|mut s| s.query_row([&e.entity], |r| r.get(0)))
            .map_err(internal)?;
        tx.prepare_cached(
            "INSERT INTO events (sequence, catalog_id, entity, operation, time_ms, event_id, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![
                sequence,
                e.catalog_id.0,
                e.entity,
                e.operation.as_str(),
                e.time_ms,
                e.id,
                e.body
            ])
        })
        .map_err(internal)?;
    }
    Ok(())
}

const EVENT_COLUMNS: &str =
    "position, sequence, catalog_id, entity, operation, time_ms, event_id, body";

fn event_from_row(r: &rusqlite::Row) -> rusqlite::Result<StoredEvent> {
    Ok(StoredEvent {
        position: r.get(0)?,
        sequence: r.get(1)?,
        catalog_id: CatalogId(r.get(2)?),
        entity: r.get(3)?,
        operation: r.get(4)?,
        time_ms: r.get(5)?,
        id: r.get(6)?,
        body: r.get(7)?,
    })
}

pub(super) fn read(conn: &Connection, read: &EventRead) -> StoreResult<Vec<StoredEvent>> {
    let limit = read.limit as i64;
    let (sql, catalog) = match read.catalog {
        Some(catalog) => (
            format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE catalog_id = ?3 AND position > ?1
                 ORDER BY position LIMIT ?2"
            ),
            Some(catalog.0),
        ),
        None => (
            format!(
                "SELECT {EVENT_COLUMNS} FROM events WHERE position > ?1 ORDER BY position LIMIT ?2"
            ),
            None,
        ),
    };
    let mut statement = conn.prepare_cached(&sql).map_err(internal)?;
    let mut rows = match catalog {
        Some(catalog) => statement.query(params![read.after, limit, catalog]),
        None => statement.query(params![read.after, limit]),
    }
    .map_err(internal)?;
    // Stepped one row at a time, so that rows past the byte bound are never read.
    let (mut events, mut bytes) = (Vec::new(), 0);
    while bytes < read.max_bytes.max(1) {
        let Some(row) = rows.next().map_err(internal)? else {
            break;
        };
        let event = event_from_row(row).map_err(internal)?;
        bytes += event.body.len().max(1);
        events.push(event);
    }
    Ok(events)
}

/// (the oldest position kept — one past the last when all were purged —, the last given).
pub(super) fn bounds(conn: &Connection) -> StoreResult<(i64, i64)> {
    let last: i64 = conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(internal)?
        .unwrap_or(0);
    let oldest: Option<i64> = conn
        .query_row("SELECT MIN(position) FROM events", [], |r| r.get(0))
        .map_err(internal)?;
    Ok((oldest.unwrap_or(last + 1), last))
}

pub(super) fn claim(
    tx: &Transaction,
    name: &str,
    holder: &str,
    now_ms: i64,
    until_ms: i64,
) -> StoreResult<Option<i64>> {
    tx.query_row(
        "INSERT INTO event_relays (name, holder, lease_until_ms, position) VALUES (?1, ?2, ?4, 0)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder,
             lease_until_ms = excluded.lease_until_ms
         WHERE event_relays.holder = excluded.holder OR event_relays.lease_until_ms < ?3
         RETURNING position",
        params![name, holder, now_ms, until_ms],
        |r| r.get(0),
    )
    .optional()
    .map_err(internal)
}

pub(super) fn confirm(
    tx: &Transaction,
    name: &str,
    holder: &str,
    position: i64,
    until_ms: i64,
) -> StoreResult<bool> {
    let updated = tx
        .execute(
            "UPDATE event_relays SET position = MAX(position, ?3), lease_until_ms = ?4
             WHERE name = ?1 AND holder = ?2",
            params![name, holder, position, until_ms],
        )
        .map_err(internal)?;
    Ok(updated == 1)
}

/// Deletes events older than `before_ms` that every relay active since then confirmed
/// (a relay whose lease lapsed before `before_ms` no longer holds events back).
/// Only a prefix of the log goes: the events before the first one at or after
/// `before_ms`. Times are stamped before commit and need not rise with positions, and a
/// gap would let a pull consumer resuming before it skip the deleted event unawares (a
/// deleted prefix answers it with a 410).
pub(super) fn purge(tx: &Transaction, before_ms: i64) -> StoreResult<u64> {
    let deleted = tx
        .execute(
            "DELETE FROM events WHERE position < COALESCE(
                 (SELECT position FROM events WHERE time_ms >= ?1 ORDER BY position LIMIT 1),
                 (SELECT MAX(position) FROM events) + 1)
             AND position <= COALESCE(
                 (SELECT MIN(position) FROM event_relays
                  WHERE lease_until_ms >= ?1 AND name NOT LIKE 'expirer:%'),
                 (SELECT MAX(position) FROM events))",
            [before_ms],
        )
        .map_err(internal)?;
    Ok(deleted as u64)
}
