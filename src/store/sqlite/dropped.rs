//! The embedded store's dropped tables and views: kept for undrop until their retention
//! ends, then forgotten (and purged) by the expirer; and the purges still to finish.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::internal;
use crate::model::{CatalogId, Ident};
use crate::storage::location::canonical_location;
use crate::store::{
    location_prefixes, location_upper_bound, stored_ident, DroppedObject, DroppedRow, PendingPurge,
    Retention, StoreError, StoreResult, StoredObject, DROPPED_COLUMNS, PURGE_COLUMNS,
};

pub(super) const MIGRATION: &str = r#"
CREATE TABLE dropped_objects (
    id                TEXT PRIMARY KEY,
    catalog_id        INTEGER NOT NULL,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL,
    metadata_location TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    location          TEXT NOT NULL,
    purge             INTEGER NOT NULL,
    dropped_ms        INTEGER NOT NULL,
    expires_ms        INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX dropped_by_catalog ON dropped_objects (catalog_id, dropped_ms);
CREATE INDEX dropped_by_expiry ON dropped_objects (expires_ms);
"#;

/// Purges still to finish (`PendingPurge`).
pub(super) const PURGES_MIGRATION: &str = r#"
CREATE TABLE pending_purges (
    id         TEXT PRIMARY KEY,
    catalog_id INTEGER NOT NULL,
    location   TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    attempts   INTEGER NOT NULL,
    next_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX purges_by_due ON pending_purges (next_ms);
"#;

/// Dropped objects by location: a purge looks for those it would reach (`schedule_purge`).
pub(super) const BY_LOCATION_MIGRATION: &str = r#"
CREATE INDEX dropped_by_location ON dropped_objects (location);
"#;

fn from_row(r: &rusqlite::Row) -> rusqlite::Result<DroppedRow> {
    Ok(DroppedRow {
        id: r.get(0)?,
        catalog: r.get(1)?,
        namespace: r.get(2)?,
        name: r.get(3)?,
        kind: r.get(4)?,
        metadata_location: r.get(5)?,
        metadata: r.get::<_, super::documents::Document>(6)?.0,
        location: r.get(7)?,
        purge: r.get(8)?,
        dropped_ms: r.get(9)?,
        expires_ms: r.get(10)?,
    })
}

/// Keeps what a drop removed.
pub(super) fn retain(
    tx: &Transaction,
    catalog: CatalogId,
    ident: &Ident,
    object: &StoredObject,
    location: &str,
    retention: &Retention,
) -> StoreResult<()> {
    tx.execute(
        &format!("INSERT INTO dropped_objects ({DROPPED_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"),
        params![
            retention.id,
            catalog.0,
            ident.namespace.key(),
            ident.name,
            object.kind.as_str(),
            object.metadata_location,
            object.metadata.as_str(),
            location,
            retention.purge,
            retention.dropped_ms,
            retention.expires_ms
        ],
    )
    .map_err(internal)?;
    Ok(())
}

/// Deletes the dropped record (of `catalog` when given) and returns it.
pub(super) fn take(
    tx: &Transaction,
    catalog: Option<CatalogId>,
    id: &str,
) -> StoreResult<DroppedObject> {
    let row = tx
        .query_row(
            &format!("DELETE FROM dropped_objects WHERE id = ?1 AND (?2 IS NULL OR catalog_id = ?2) RETURNING {DROPPED_COLUMNS}"),
            params![id, catalog.map(|c| c.0)],
            from_row,
        )
        .optional()
        .map_err(internal)?;
    row.map(DroppedRow::into_dropped)
        .transpose()?
        .ok_or_else(|| StoreError::DroppedMissing(id.to_string()))
}

pub(super) fn list(conn: &Connection, catalog: CatalogId) -> StoreResult<Vec<DroppedObject>> {
    let rows: Vec<_> = conn
        .prepare_cached(&format!(
            "SELECT {DROPPED_COLUMNS} FROM dropped_objects WHERE catalog_id = ?1 ORDER BY dropped_ms DESC, id DESC"
        ))
        .and_then(|mut s| s.query_map([catalog.0], from_row)?.collect())
        .map_err(internal)?;
    rows.into_iter().map(DroppedRow::into_dropped).collect()
}

pub(super) fn get(conn: &Connection, id: &str) -> StoreResult<Option<DroppedObject>> {
    conn.prepare_cached(&format!(
        "SELECT {DROPPED_COLUMNS} FROM dropped_objects WHERE id = ?1"
    ))
    .and_then(|mut s| s.query_row([id], from_row).optional())
    .map_err(internal)?
    .map(DroppedRow::into_dropped)
    .transpose()
}

pub(super) fn expired(
    conn: &Connection,
    now_ms: i64,
    limit: usize,
) -> StoreResult<Vec<DroppedObject>> {
    let rows: Vec<_> = conn
        .prepare_cached(&format!(
            "SELECT {DROPPED_COLUMNS} FROM dropped_objects WHERE expires_ms < ?1 ORDER BY expires_ms LIMIT ?2"
        ))
        .and_then(|mut s| s.query_map(params![now_ms, limit as i64], from_row)?.collect())
        .map_err(internal)?;
    rows.into_iter().map(DroppedRow::into_dropped).collect()
}

/// Records a purge to carry out once the transaction commits; none where a table or
/// view now lies (a new one at a dropped one's explicit location): its files could not
/// be told from the dropped one's. Nor where another dropped one kept for undrop lies (a
/// table made at a dropped one's location and dropped in turn): its undrop needs its
/// files. A purge skipped so is not tried again (its files may stay; logged).
pub(super) fn schedule_purge(tx: &Transaction, purge: &PendingPurge) -> StoreResult<()> {
    if let Ok(location) = canonical_location(&purge.location) {
        let nobody = crate::store::nobody();
        if let Some(other) =
            super::writes::overlapping_object(tx, purge.catalog, &location, &nobody)?
        {
            tracing::warn!(location = %purge.location, %other, "not purging: a table or view lies there now");
            return Ok(());
        }
        if let Some(other) = kept_overlapping(tx, &location)? {
            tracing::warn!(location = %purge.location, %other, "not purging: a dropped table or view kept for undrop lies there");
            return Ok(());
        }
    }
    tx.prepare_cached(&format!(
        "INSERT INTO pending_purges ({PURGE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            purge.id,
            purge.catalog.0,
            purge.location,
            purge.created_ms,
            purge.attempts,
            purge.next_ms
        ])
    })
    .map_err(internal)?;
    Ok(())
}

/// A dropped object kept for undrop (in any catalog) whose location contains the
/// canonical `location` or lies inside it: as `writes::overlapping_object` for live ones.
fn kept_overlapping(conn: &Connection, location: &str) -> StoreResult<Option<Ident>> {
    let to_ident = |(ns, name): (String, String)| stored_ident(&ns, name);
    let mut at = conn
        .prepare_cached("SELECT namespace, name FROM dropped_objects WHERE location = ?1 LIMIT 1")
        .map_err(internal)?;
    for candidate in location_prefixes(location) {
        let hit = at
            .query_row([candidate], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(internal)?;
        if let Some(hit) = hit {
            return Ok(Some(to_ident(hit)));
        }
    }
    let hit = conn
        .prepare_cached(
            "SELECT namespace, name FROM dropped_objects WHERE location >= ?1 AND location < ?2 LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row(params![location, location_upper_bound(location)], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(internal)?;
    Ok(hit.map(to_ident))
}

/// The purge's record goes, and so do the journal entries of the files it deleted
/// (`journal.rs`): a restore after a crash must not bring them back.
pub(super) fn finish_purge(tx: &Transaction, id: &str) -> StoreResult<()> {
    let location: Option<String> = tx
        .prepare_cached("DELETE FROM pending_purges WHERE id = ?1 RETURNING location")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
        .map_err(internal)?;
    if let Some(location) = location {
        super::journal::forget_under(tx, &location)?;
    }
    Ok(())
}

/// The purge still to finish whose location overlaps the canonical `location`.
pub(super) fn purge_overlapping(conn: &Connection, location: &str) -> StoreResult<Option<String>> {
    let purging: Vec<String> = conn
        .prepare_cached("SELECT location FROM pending_purges")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(internal)?;
    Ok(crate::store::purge_overlapping(location, purging))
}

pub(super) fn defer_purge(
    tx: &Transaction,
    id: &str,
    attempts: i64,
    next_ms: i64,
) -> StoreResult<()> {
    tx.prepare_cached("UPDATE pending_purges SET attempts = ?2, next_ms = ?3 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![id, attempts, next_ms]))
        .map_err(internal)?;
    Ok(())
}

pub(super) fn due_purges(
    conn: &Connection,
    now_ms: i64,
    limit: usize,
) -> StoreResult<Vec<PendingPurge>> {
    conn.prepare_cached(&format!(
        "SELECT {PURGE_COLUMNS} FROM pending_purges WHERE next_ms <= ?1 ORDER BY next_ms, id LIMIT ?2"
    ))
    .and_then(|mut s| {
        s.query_map(params![now_ms, limit as i64], |r| {
            Ok(PendingPurge {
                id: r.get(0)?,
                catalog: CatalogId(r.get(1)?),
                location: r.get(2)?,
                created_ms: r.get(3)?,
                attempts: r.get(4)?,
                next_ms: r.get(5)?,
            })
        })?
        .collect()
    })
    .map_err(internal)
}
