//! PostgreSQL's dropped tables and views: kept for undrop until their retention ends,
//! then forgotten (and purged) by the expirer; and the purges still to finish.

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Row;

use super::{int8, text, Attempt, Queries};
use crate::model::{CatalogId, Ident};
use crate::storage::location::canonical_location;
use crate::store::{
    location_prefixes, location_upper_bound, stored_ident, DroppedObject, DroppedRow, PendingPurge,
    Retention, StoreError, StoreResult, StoredObject, DROPPED_COLUMNS, PURGE_COLUMNS,
};

pub(super) const MIGRATION: &str = r#"
CREATE TABLE dropped_objects (
    id                TEXT COLLATE "C" PRIMARY KEY,
    catalog_id        BIGINT NOT NULL,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL,
    metadata_location TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    location          TEXT NOT NULL,
    purge             BOOLEAN NOT NULL,
    dropped_ms        BIGINT NOT NULL,
    expires_ms        BIGINT NOT NULL
);
CREATE INDEX dropped_by_catalog ON dropped_objects (catalog_id, dropped_ms);
CREATE INDEX dropped_by_expiry ON dropped_objects (expires_ms)
"#;

/// Dropped objects by location, in byte order: a purge looks for those it would reach
/// (`schedule_purge`).
pub(super) const BY_LOCATION_MIGRATION: &str = r#"
CREATE INDEX dropped_by_location ON dropped_objects ((location COLLATE "C"))
"#;

/// Purges still to finish (`PendingPurge`).
pub(super) const PURGES_MIGRATION: &str = r#"
CREATE TABLE pending_purges (
    id         TEXT COLLATE "C" PRIMARY KEY,
    catalog_id BIGINT NOT NULL,
    location   TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    attempts   BIGINT NOT NULL,
    next_ms    BIGINT NOT NULL
);
CREATE INDEX purges_by_due ON pending_purges (next_ms)
"#;

fn from_row(r: &Row) -> StoreResult<DroppedObject> {
    DroppedRow {
        id: r.get(0),
        catalog: r.get(1),
        namespace: r.get(2),
        name: r.get(3),
        kind: r.get(4),
        metadata_location: r.get(5),
        metadata: r.get(6),
        location: r.get(7),
        purge: r.get(8),
        dropped_ms: r.get(9),
        expires_ms: r.get(10),
    }
    .into_dropped()
}

fn boolean(value: &(dyn ToSql + Sync)) -> (&(dyn ToSql + Sync), Type) {
    (value, Type::BOOL)
}

/// Keeps what a drop removed.
#[allow(clippy::too_many_arguments)] // the dropped row's parts
pub(super) async fn retain(
    q: &impl Queries,
    catalog: CatalogId,
    ident: &Ident,
    object: &StoredObject,
    location: &str,
    retention: &Retention,
) -> Attempt<()> {
    let ns = ident.namespace.key();
    q.execute_all_typed(
        &format!("INSERT INTO dropped_objects ({DROPPED_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"),
        &[
            text(&retention.id),
            int8(&catalog.0),
            text(&ns),
            text(&ident.name),
            text(&object.kind.as_str()),
            text(&object.metadata_location),
            text(&object.metadata.as_str()),
            text(&location),
            boolean(&retention.purge),
            int8(&retention.dropped_ms),
            int8(&retention.expires_ms),
        ],
    )
    .await?;
    Ok(())
}

/// Deletes the dropped record (of `catalog` when given) and returns it.
pub(super) async fn take(
    q: &impl Queries,
    catalog: Option<CatalogId>,
    id: &str,
) -> Attempt<DroppedObject> {
    let catalog = catalog.map(|c| c.0);
    let row = q
        .query_opt_typed(
            &format!("DELETE FROM dropped_objects WHERE id = $1 AND ($2::BIGINT IS NULL OR catalog_id = $2) RETURNING {DROPPED_COLUMNS}"),
            &[text(&id), int8(&catalog)],
        )
        .await?;
    match row {
        Some(row) => Ok(from_row(&row)?),
        None => Err(StoreError::DroppedMissing(id.to_string()).into()),
    }
}

/// A catalog's dropped objects, newest first; `None` when the catalog does not exist.
pub(super) async fn list(q: &impl Queries, catalog: &str) -> Attempt<Option<Vec<DroppedObject>>> {
    let Some(id) = q
        .query_opt_typed("SELECT id FROM catalogs WHERE name = $1", &[text(&catalog)])
        .await?
    else {
        return Ok(None);
    };
    let id: i64 = id.get(0);
    let rows = q
        .query_all_typed(
            &format!(
                "SELECT {DROPPED_COLUMNS} FROM dropped_objects WHERE catalog_id = $1
                 ORDER BY dropped_ms DESC, id DESC"
            ),
            &[int8(&id)],
        )
        .await?;
    let mut out = Vec::new();
    for row in &rows {
        out.push(from_row(row)?);
    }
    Ok(Some(out))
}

pub(super) async fn get(q: &impl Queries, id: &str) -> Attempt<Option<DroppedObject>> {
    let row = q
        .query_opt_typed(
            &format!("SELECT {DROPPED_COLUMNS} FROM dropped_objects WHERE id = $1"),
            &[text(&id)],
        )
        .await?;
    Ok(row.map(|r| from_row(&r)).transpose()?)
}

pub(super) async fn expired(
    q: &impl Queries,
    now_ms: i64,
    limit: usize,
) -> Attempt<Vec<DroppedObject>> {
    let limit = limit as i64;
    let rows = q
        .query_all_typed(
            &format!("SELECT {DROPPED_COLUMNS} FROM dropped_objects WHERE expires_ms < $1 ORDER BY expires_ms LIMIT $2"),
            &[int8(&now_ms), int8(&limit)],
        )
        .await?;
    let mut out = Vec::new();
    for row in &rows {
        out.push(from_row(row)?);
    }
    Ok(out)
}

/// Records a purge to carry out once the transaction commits; none where a table or
/// view now lies (a new one at a dropped one's explicit location): its files could not
/// be told from the dropped one's. The check takes the location's advisory locks, as a
/// create does, so that no create slips in between (it checks for purges under them).
/// Nor where another dropped one kept for undrop lies (a table made at a dropped one's
/// location and dropped in turn): its undrop needs its files. Live objects are looked
/// at first: a drop racing this one moves its object to the kept ones in one
/// transaction, so one of the two reads sees it.
pub(super) async fn schedule_purge(q: &impl Queries, purge: &PendingPurge) -> Attempt<()> {
    if let Ok(location) = canonical_location(&purge.location) {
        let nobody = crate::store::nobody();
        let live = super::objects::overlapping_object(q, purge.catalog, &location, &nobody).await?;
        if let Some(other) = live {
            tracing::warn!(location = %purge.location, %other, "not purging: a table or view lies there now");
            return Ok(());
        }
        if let Some(other) = kept_overlapping(q, &location).await? {
            tracing::warn!(location = %purge.location, %other, "not purging: a dropped table or view kept for undrop lies there");
            return Ok(());
        }
    }
    q.execute_all_typed(
        &format!("INSERT INTO pending_purges ({PURGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)"),
        &[
            text(&purge.id),
            int8(&purge.catalog.0),
            text(&purge.location),
            int8(&purge.created_ms),
            int8(&purge.attempts),
            int8(&purge.next_ms),
        ],
    )
    .await?;
    Ok(())
}

/// A dropped object kept for undrop (in any catalog) whose location contains the
/// canonical `location` or lies inside it (as `objects::object_overlapping` for live
/// ones; byte order, as the index is).
async fn kept_overlapping(q: &impl Queries, location: &str) -> Attempt<Option<Ident>> {
    let candidates = location_prefixes(location);
    let upper = location_upper_bound(location);
    let row = q
        .query_all_replanned(
            r#"SELECT namespace, name FROM dropped_objects
             WHERE location COLLATE "C" = ANY($1)
                OR (location COLLATE "C" >= $2 AND location COLLATE "C" < $3)
             LIMIT 1"#,
            &[
                (&candidates, Type::TEXT_ARRAY),
                text(&location),
                text(&upper),
            ],
        )
        .await?
        .into_iter()
        .next();
    Ok(row.map(|r| stored_ident(r.get(0), r.get(1))))
}

pub(super) async fn finish_purge(q: &impl Queries, id: &str) -> Attempt<()> {
    q.execute_all_typed("DELETE FROM pending_purges WHERE id = $1", &[text(&id)])
        .await?;
    Ok(())
}

pub(super) async fn defer_purge(
    q: &impl Queries,
    id: &str,
    attempts: i64,
    next_ms: i64,
) -> Attempt<()> {
    q.execute_all_typed(
        "UPDATE pending_purges SET attempts = $2, next_ms = $3 WHERE id = $1",
        &[text(&id), int8(&attempts), int8(&next_ms)],
    )
    .await?;
    Ok(())
}

pub(super) async fn due_purges(
    q: &impl Queries,
    now_ms: i64,
    limit: usize,
) -> Attempt<Vec<PendingPurge>> {
    let limit = limit as i64;
    let rows = q
        .query_all_typed(
            &format!("SELECT {PURGE_COLUMNS} FROM pending_purges WHERE next_ms <= $1 ORDER BY next_ms, id LIMIT $2"),
            &[int8(&now_ms), int8(&limit)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| PendingPurge {
            id: r.get(0),
            catalog: CatalogId(r.get(1)),
            location: r.get(2),
            created_ms: r.get(3),
            attempts: r.get(4),
            next_ms: r.get(5),
        })
        .collect())
}
