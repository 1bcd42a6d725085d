//! PostgreSQL writes of tables and views: commits (compare-and-swap on one row each,
//! rows taken in one global order), drops, renames, and the location-overlap check with
//! the advisory locks that make it safe between nodes. Called by `writes::apply`.

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use super::{has_code, int8, object_kind_at, text, Attempt, Failure, Queries};
use crate::model::{CatalogId, Ident, ObjectKind};
use crate::store::reservations::Claim;
use crate::store::{
    exists_error, location_prefixes, location_upper_bound, stored_ident, ObjectWrite, StoreError,
    StoredObject, Unchanged,
};

/// A commit's writes, and its checks of what it read but does not write (`unchanged`).
pub(super) async fn commit_objects(
    q: &impl Queries,
    id: CatalogId,
    writes: &[ObjectWrite],
    unchanged: &[Unchanged],
    now: i64,
) -> Attempt<()> {
    // Rows are locked in one global order (as `lock_objects` does), the checked ones
    // (share-locked) among the written ones, so that concurrent multi-table commits over
    // overlapping tables queue instead of deadlocking: two transactions each asserting
    // what the other writes would otherwise each hold its own write's row and wait for
    // the other's, until PostgreSQL's deadlock timeout (a second) broke the tie.
    enum Step<'a> {
        Write(&'a ObjectWrite),
        Check(&'a Unchanged),
    }
    let ident = |step: &Step| match step {
        Step::Write(w) => w.ident.clone(),
        Step::Check(u) => u.ident.clone(),
    };
    let mut ordered: Vec<Step> = writes
        .iter()
        .map(Step::Write)
        .chain(unchanged.iter().map(Step::Check))
        .collect();
    ordered.sort_by_cached_key(ident);
    for step in ordered {
        match step {
            Step::Write(w) => commit_object(q, id, w, now).await?,
            Step::Check(u) => require_unchanged(q, u).await?,
        }
    }
    Ok(())
}

/// `Conflict` unless the object is still as the commit read it. Its row is share-locked
/// until commit: a commit of it on another node that has not committed yet is waited for
/// (then read as it left the row), and one that comes later waits for this transaction.
/// (An object read as absent has no row to lock: checked as of this statement only. The
/// catalog asserts none; a commit fails on a table it does not find or creates it.)
pub(super) async fn require_unchanged(q: &impl Queries, unchanged: &Unchanged) -> Attempt<()> {
    let Unchanged {
        catalog,
        ident,
        metadata_location,
    } = unchanged;
    let found: Option<String> = q
        .query_opt_typed(
            "SELECT metadata_location FROM objects WHERE catalog_id = $1 AND namespace = $2 AND name = $3
             FOR SHARE",
            &[
                int8(&catalog.0),
                text(&ident.namespace.key()),
                text(&ident.name),
            ],
        )
        .await?
        .map(|row| row.get(0));
    match found == *metadata_location {
        true => Ok(()),
        false => Err(StoreError::Conflict.into()),
    }
}

async fn commit_object(q: &impl Queries, id: CatalogId, w: &ObjectWrite, now: i64) -> Attempt<()> {
    let ns = w.ident.namespace.key();
    let kind = w.kind.as_str();
    match &w.expected_metadata_location {
        None => {
            let inserted = q
                .query_all_typed(
                    "INSERT INTO objects (catalog_id, namespace, name, kind, metadata_location, metadata, location)
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING 1",
                    &[
                        int8(&id.0),
                        text(&ns),
                        text(&w.ident.name),
                        text(&kind),
                        text(&w.metadata_location),
                        text(&w.metadata),
                        text(&w.location),
                    ],
                )
                .await;
            match inserted {
                Ok(rows) if rows.is_empty() => {
                    // Taken by a table or view; a retry sees which.
                    let existing = object_kind_at(q, id, &w.ident).await?.unwrap_or(w.kind);
                    return Err(exists_error(w.kind, existing, &w.ident).into());
                }
                Ok(_) => {}
                Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
                    return Err(StoreError::NamespaceMissing(w.ident.namespace.clone()).into())
                }
                Err(e) => return Err(e.into()),
            }
        }
        Some(expected) => {
            let updated = q
                .execute_all_typed(
                    "UPDATE objects SET metadata_location = $6, metadata = $7, location = $8
                     WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND kind = $4
                       AND metadata_location = $5",
                    &[
                        int8(&id.0),
                        text(&ns),
                        text(&w.ident.name),
                        text(&kind),
                        text(expected),
                        text(&w.metadata_location),
                        text(&w.metadata),
                        text(&w.location),
                    ],
                )
                .await?;
            if updated == 0 {
                return Err(match object_kind_at(q, id, &w.ident).await? {
                    Some(kind) if kind == w.kind => StoreError::Conflict,
                    _ => StoreError::ObjectMissing {
                        kind: w.kind,
                        ident: w.ident.clone(),
                    },
                }
                .into());
            }
        }
    }
    if w.check_location {
        let claim = Claim::Write {
            catalog: id,
            ident: &w.ident,
            metadata: &w.metadata,
        };
        check_free(q, id, &w.location, &w.ident, &claim, now).await?;
    }
    Ok(())
}

/// Refuses the canonical `location` where another object's location than `ident`'s,
/// a purge's, or a staged create's that refuses `claim` overlaps it; the locks taken on
/// the way (`overlapping_object`) keep it so until the transaction ends.
pub(super) async fn check_free(
    q: &impl Queries,
    id: CatalogId,
    location: &str,
    ident: &Ident,
    claim: &Claim<'_>,
    now: i64,
) -> Attempt<()> {
    if let Some(other) = overlapping_object(q, id, location, ident).await? {
        let location = location.to_string();
        return Err(StoreError::LocationOverlap { location, other }.into());
    }
    // Under the same locks, which a purge's record takes too (`schedule_purge`).
    if let Some(purging) = purge_overlapping(q, location).await? {
        let location = location.to_string();
        return Err(StoreError::LocationPurging { location, purging }.into());
    }
    super::reserved::check(q, location, claim, now).await
}

/// 64-bit FNV-1a: advisory lock keys for location prefixes. A collision only makes two
/// unrelated creates wait for each other, never lets overlapping ones through.
fn lock_key(location: &str) -> i64 {
    crate::stable_hash::fnv1a(location.bytes()) as i64
}

/// The purge still to finish whose location overlaps the canonical `location`.
async fn purge_overlapping(q: &impl Queries, location: &str) -> Attempt<Option<String>> {
    let purging = q
        .query_all_typed("SELECT location FROM pending_purges", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(crate::store::purge_overlapping(location, purging))
}

/// The object whose location contains `location` or lies inside it (see the SQLite store
/// for the range trick), after taking the advisory locks that make check-then-insert
/// safe between nodes: shared on every ancestor directory, exclusive on the location.
pub(super) async fn overlapping_object(
    q: &impl Queries,
    id: CatalogId,
    location: &str,
    ident: &Ident,
) -> Attempt<Option<Ident>> {
    let candidates = location_prefixes(location);
    let ancestor_keys: Vec<i64> = candidates[..candidates.len() - 1]
        .iter()
        .map(|a| lock_key(a))
        .collect();
    q.query_all_typed(
        "SELECT pg_advisory_xact_lock_shared(k) FROM unnest($1::BIGINT[]) WITH ORDINALITY AS t(k, i) ORDER BY i",
        &[(&ancestor_keys, Type::INT8_ARRAY)],
    )
    .await?;
    q.query_all_typed(
        "SELECT pg_advisory_xact_lock($1)",
        &[int8(&lock_key(location))],
    )
    .await?;
    object_overlapping(q, id, location, &candidates, ident).await
}

/// The object whose location contains `location` or lies inside it, other than `ident`
/// (without the locks: alone, a read at one moment). `candidates`: the location's
/// prefixes (`location_prefixes`), which the caller has for its locks.
pub(super) async fn object_overlapping(
    q: &impl Queries,
    id: CatalogId,
    location: &str,
    candidates: &[&str],
    ident: &Ident,
) -> Attempt<Option<Ident>> {
    let ns = ident.namespace.key();
    let upper = location_upper_bound(location);
    // Planned per call (`query_all_replanned`): only the values tell whether the index
    // or a scan finds the first overlap soonest.
    let row = q
        .query_all_replanned(
            "SELECT namespace, name FROM objects
             WHERE (location = ANY($1) OR (location >= $2 AND location < $3))
               AND NOT (catalog_id = $4 AND namespace = $5 AND name = $6)
             LIMIT 1",
            &[
                (&candidates, Type::TEXT_ARRAY),
                text(&location),
                text(&upper),
                int8(&id.0),
                text(&ns),
                text(&ident.name),
            ],
        )
        .await?
        .into_iter()
        .next();
    Ok(row.map(|r| stored_ident(r.get(0), r.get(1))))
}

pub(super) async fn drop_object(
    q: &impl Queries,
    id: CatalogId,
    kind: ObjectKind,
    ident: &Ident,
    expected: &str,
) -> Attempt<(StoredObject, String)> {
    let ns = ident.namespace.key();
    let row = q
        .query_opt_typed(
            "DELETE FROM objects WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND kind = $4
                 AND metadata_location = $5
             RETURNING metadata_location, metadata, location",
            &[
                int8(&id.0),
                text(&ns),
                text(&ident.name),
                text(&kind.as_str()),
                text(&expected),
            ],
        )
        .await?;
    let Some(row) = row else {
        return Err(match object_kind_at(q, id, ident).await? {
            Some(found) if found == kind => StoreError::Conflict,
            _ => StoreError::ObjectMissing {
                kind,
                ident: ident.clone(),
            },
        }
        .into());
    };
    Ok((
        StoredObject {
            kind,
            metadata_location: row.get(0),
            metadata: row.get::<_, String>(1).into(),
        },
        row.get(2),
    ))
}

pub(super) async fn rename_object(
    q: &impl Queries,
    id: CatalogId,
    kind: ObjectKind,
    from: &Ident,
    to: &Ident,
    expected: &str,
) -> Attempt<()> {
    let missing = || {
        Failure::Store(StoreError::ObjectMissing {
            kind,
            ident: from.clone(),
        })
    };
    let taken = |existing| {
        Failure::Store(StoreError::RenameTargetExists {
            kind,
            existing,
            from: from.clone(),
            to: to.clone(),
        })
    };
    if object_kind_at(q, id, from).await? != Some(kind) {
        return Err(missing());
    }
    if let Some(existing) = object_kind_at(q, id, to).await? {
        return Err(taken(existing));
    }
    let (from_ns, to_ns) = (from.namespace.key(), to.namespace.key());
    let renamed = q
        .execute_all_typed(
            "UPDATE objects SET namespace = $4, name = $5
             WHERE catalog_id = $1 AND namespace = $2 AND name = $3 AND kind = $6
                 AND metadata_location = $7",
            &[
                int8(&id.0),
                text(&from_ns),
                text(&from.name),
                text(&to_ns),
                text(&to.name),
                text(&kind.as_str()),
                text(&expected),
            ],
        )
        .await;
    match renamed {
        // A concurrent create took the name between the check and the update.
        Err(e) if has_code(&e, &SqlState::UNIQUE_VIOLATION) => Err(taken(kind)),
        // The target namespace does not exist (or was dropped meanwhile).
        Err(e) if has_code(&e, &SqlState::FOREIGN_KEY_VIOLATION) => {
            Err(StoreError::NamespaceMissing(to.namespace.clone()).into())
        }
        // It was there a moment ago (checked above in this transaction): it moved.
        Ok(0) => Err(StoreError::Conflict.into()),
        other => other.map(|_| ()).map_err(Failure::Sql),
    }
}
