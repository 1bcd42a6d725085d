//! PostgreSQL's outbox: events appended in the change's transaction, read back in
//! position order, and the relays' leases and confirmed positions.
//!
//! **Why positions are in commit order.** A sequence would hand out numbers in the order
//! transactions *start* appending, and a reader could see position 8 committed while 7
//! is still in flight, resume after 8 and miss 7 forever. Instead the position comes from
//! one counter row (`event_head`), updated as the last statement before COMMIT: its row
//! lock makes each appending transaction wait until the previous one committed, so the
//! committed events are always a prefix of the positions. The price is that appends
//! serialise for one round trip and one WAL flush each; everything before the append
//! (the change itself) still runs concurrently. With `--db-group-commit` a whole group
//! of writes pays that once (`group.rs`).

use tokio_postgres::Row;

use super::{int8, text, Attempt, Queries};
use crate::events::{ChangeEvent, StoredEvent};
use crate::model::CatalogId;
use crate::store::EventRead;

pub(super) const MIGRATION: &str = r#"
CREATE TABLE events (
    position   BIGINT PRIMARY KEY,
    sequence   BIGINT NOT NULL,
    catalog_id BIGINT NOT NULL,
    entity     TEXT NOT NULL,
    operation  TEXT NOT NULL,
    time_ms    BIGINT NOT NULL,
    event_id   TEXT NOT NULL,
    body       TEXT NOT NULL
);
CREATE INDEX events_by_catalog ON events (catalog_id, position);
CREATE TABLE event_head (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    position BIGINT NOT NULL
);
INSERT INTO event_head (id, position) VALUES (1, 0);
CREATE TABLE event_sequences (
    entity   TEXT COLLATE "C" PRIMARY KEY,
    sequence BIGINT NOT NULL
);
CREATE TABLE event_relays (
    name           TEXT PRIMARY KEY,
    holder         TEXT NOT NULL,
    lease_until_ms BIGINT NOT NULL,
    position       BIGINT NOT NULL
)
"#;

/// Appends events, one statement each (the next position, the entity's next sequence
/// number and the row), pipelined: tokio-postgres sends a statement when its future is
/// first polled, and PostgreSQL runs a connection's statements in the order received,
/// so a group's events cost two round trips under the counter's lock instead of one
/// each. The first is awaited alone so that the statement is prepared (and cached)
/// before the rest are sent: an uncached one would first wait for its preparation, and
/// the order of those waits, hence of the positions, would no longer be the batch's.
pub(super) async fn append(q: &impl Queries, events: &[ChangeEvent]) -> Attempt<()> {
    let Some((first, rest)) = events.split_first() else {
        return Ok(());
    };
    append_one(q, first).await?;
    futures_util::future::try_join_all(rest.iter().map(|e| append_one(q, e))).await?;
    Ok(())
}

async fn append_one(q: &impl Queries, e: &ChangeEvent) -> Result<u64, tokio_postgres::Error> {
    let operation = e.operation.as_str();
    q.execute_all_typed(
        "WITH head AS (
             UPDATE event_head SET position = position + 1 WHERE id = 1 RETURNING position
         ), seq AS (
             INSERT INTO event_sequences (entity, sequence) VALUES ($1, 1)
             ON CONFLICT (entity) DO UPDATE SET sequence = event_sequences.sequence + 1
             RETURNING sequence
         )
         INSERT INTO events (position, sequence, catalog_id, entity, operation, time_ms, event_id, body)
         SELECT head.position, seq.sequence, $2, $1, $3, $4, $5, $6 FROM head, seq",
        &[
            text(&e.entity),
            int8(&e.catalog_id.0),
            text(&operation),
            int8(&e.time_ms),
            text(&e.id),
            text(&e.body),
        ],
    )
    .await
}

const EVENT_COLUMNS: &str =
    "position, sequence, catalog_id, entity, operation, time_ms, event_id, body";

fn event_from_row(r: &Row) -> StoredEvent {
    StoredEvent {
        position: r.get(0),
        sequence: r.get(1),
        catalog_id: CatalogId(r.get(2)),
        entity: r.get(3),
        operation: r.get(4),
        time_ms: r.get(5),
        id: r.get(6),
        body: r.get(7),
    }
}

pub(super) async fn read(q: &impl Queries, read: &EventRead) -> Attempt<Vec<StoredEvent>> {
    let limit = read.limit as i64;
    let max_bytes = i64::try_from(read.max_bytes).unwrap_or(i64::MAX).max(1);
    // The byte bound is applied by the server (each row's bytes before it, from the
    // stored length, which needs no detoasting), so rows past it never cross the wire.
    let bounded = |filter: &str| {
        format!(
            "SELECT {EVENT_COLUMNS} FROM (
                 SELECT {EVENT_COLUMNS},
                        SUM(GREATEST(octet_length(body), 1)) OVER (ORDER BY position)
                            - GREATEST(octet_length(body), 1) AS before
                 FROM events WHERE {filter} ORDER BY position LIMIT $2
             ) e WHERE before < $3 ORDER BY position"
        )
    };
    let rows = match read.catalog {
        Some(catalog) => {
            q.query_all_typed(
                &bounded("position > $1 AND catalog_id = $4"),
                &[
                    int8(&read.after),
                    int8(&limit),
                    int8(&max_bytes),
                    int8(&catalog.0),
                ],
            )
            .await?
        }
        None => {
            q.query_all_typed(
                &bounded("position > $1"),
                &[int8(&read.after), int8(&limit), int8(&max_bytes)],
            )
            .await?
        }
    };
    Ok(rows.iter().map(event_from_row).collect())
}

/// (the oldest position kept — one past the last when all were purged —, the last given).
pub(super) async fn bounds(q: &impl Queries) -> Attempt<(i64, i64)> {
    let row = q
        .query_opt_typed(
            "SELECT (SELECT MIN(position) FROM events), position FROM event_head WHERE id = 1",
            &[],
        )
        .await?;
    let (oldest, last): (Option<i64>, i64) = row.map(|r| (r.get(0), r.get(1))).unwrap_or((None, 0));
    Ok((oldest.unwrap_or(last + 1), last))
}

pub(super) async fn claim(
    q: &impl Queries,
    name: &str,
    holder: &str,
    now_ms: i64,
    until_ms: i64,
) -> Attempt<Option<i64>> {
    let row = q
        .query_opt_typed(
            "INSERT INTO event_relays (name, holder, lease_until_ms, position) VALUES ($1, $2, $4, 0)
             ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder,
                 lease_until_ms = EXCLUDED.lease_until_ms
             WHERE event_relays.holder = EXCLUDED.holder OR event_relays.lease_until_ms < $3
             RETURNING position",
            &[text(&name), text(&holder), int8(&now_ms), int8(&until_ms)],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

pub(super) async fn confirm(
    q: &impl Queries,
    name: &str,
    holder: &str,
    position: i64,
    until_ms: i64,
) -> Attempt<bool> {
    let updated = q
        .execute_all_typed(
            "UPDATE event_relays SET position = GREATEST(position, $3), lease_until_ms = $4
             WHERE name = $1 AND holder = $2",
            &[text(&name), text(&holder), int8(&position), int8(&until_ms)],
        )
        .await?;
    Ok(updated == 1)
}

/// Deletes events older than `before_ms` that every relay active since then confirmed.
/// Only a prefix of the log goes: the events before the first one at or after
/// `before_ms`. Times are stamped before commit and need not rise with positions, and a
/// gap would let a pull consumer resuming before it skip the deleted event unawares (a
/// deleted prefix answers it with a 410).
pub(super) async fn purge(q: &impl Queries, before_ms: i64) -> Attempt<u64> {
    Ok(q.execute_all_typed(
        "DELETE FROM events WHERE position < COALESCE(
                 (SELECT position FROM events WHERE time_ms >= $1 ORDER BY position LIMIT 1),
                 (SELECT position FROM event_head WHERE id = 1) + 1)
             AND position <= COALESCE(
                 (SELECT MIN(position) FROM event_relays
                  WHERE lease_until_ms >= $1 AND name NOT LIKE 'expirer:%'),
                 (SELECT position FROM event_head WHERE id = 1))",
        &[int8(&before_ms)],
    )
    .await?)
}
