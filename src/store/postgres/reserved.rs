//! PostgreSQL's locations held for staged creates ([`Mutation::ReserveLocation`]): a
//! staged create's vended credentials reach its location before any table lives there,
//! so no other table or view may be created in or around it until they expire. A
//! reservation takes the same advisory locks as a create (`objects::overlapping_object`),
//! so the two cannot pass each other between nodes.
//!
//! [`Mutation::ReserveLocation`]: crate::store::Mutation::ReserveLocation

use tokio_postgres::types::Type;

use super::{int8, text, Attempt, Queries};
use crate::model::{CatalogId, Ident};
use crate::store::reservations::{refusing, Claim, Held, Reservation};
use crate::store::{location_prefixes, location_upper_bound, nobody, StoreError};

/// One row per (name, location) held; `location` is canonical (ends in `/`), in the "C"
/// collation that the range lookup needs. Expired rows hold nothing and are deleted by
/// later reservations.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE reserved_locations (
    catalog_id BIGINT NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    location   TEXT COLLATE "C" NOT NULL,
    table_uuid TEXT NOT NULL,
    principal  TEXT NOT NULL,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name, location)
);
CREATE INDEX reserved_by_location ON reserved_locations (location);
CREATE INDEX reserved_by_expiry ON reserved_locations (expires_ms)
"#;

/// `committed`: whether a table of the hold's name has landed through it (the staged
/// create's commit): from then on the hold only guards the location until what was
/// handed out expires, and no longer serves the staged table's `/sign` and
/// `/credentials` (nor is extended), which the table itself does. `staged_ms`: when the
/// staged create took it. Holds from before served nothing: they are marked committed.
pub(super) const COMMITTED_MIGRATION: &str = r#"
ALTER TABLE reserved_locations ADD COLUMN committed BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE reserved_locations ADD COLUMN staged_ms BIGINT NOT NULL DEFAULT 0;
UPDATE reserved_locations SET committed = TRUE
"#;

/// Holds the location after the checks a create makes (under a create's locks), against
/// every object (its own name's too: a table of that name created since the staged
/// create looked would be reachable), and the live reservations.
pub(super) async fn reserve(q: &impl Queries, r: &Reservation, now: i64) -> Attempt<()> {
    // Expired rows go a few at a time, skipping those another transaction is deleting,
    // so that reservations on different nodes do not queue behind one another here.
    q.execute_all_typed(
        "DELETE FROM reserved_locations WHERE ctid IN (
             SELECT ctid FROM reserved_locations WHERE expires_ms <= $1
             LIMIT 100 FOR UPDATE SKIP LOCKED)",
        &[int8(&now)],
    )
    .await?;
    let claim = Claim::Reserve {
        catalog: r.catalog,
        ident: &r.ident,
        principal: &r.principal,
    };
    super::objects::check_free(q, r.catalog, &r.location, &nobody(), &claim, now).await?;
    // Held again under the same uuid: an extension, which a landed hold does not get
    // (it keeps its expiry, its landing and its staging time); under a new uuid: a new
    // staged create (a retry), which starts afresh. SET reads the row as it was.
    q.execute_all_typed(
        "INSERT INTO reserved_locations (catalog_id, namespace, name, location, table_uuid,
             principal, expires_ms, staged_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (catalog_id, namespace, name, location) DO UPDATE SET
             expires_ms = CASE WHEN reserved_locations.committed
                     AND reserved_locations.table_uuid = excluded.table_uuid
                 THEN reserved_locations.expires_ms
                 ELSE GREATEST(reserved_locations.expires_ms, excluded.expires_ms) END,
             committed = reserved_locations.committed
                 AND reserved_locations.table_uuid = excluded.table_uuid,
             staged_ms = CASE WHEN reserved_locations.table_uuid = excluded.table_uuid
                 THEN reserved_locations.staged_ms ELSE excluded.staged_ms END,
             table_uuid = excluded.table_uuid, principal = excluded.principal",
        &[
            int8(&r.catalog.0),
            text(&r.ident.namespace.key()),
            text(&r.ident.name),
            text(&r.location),
            text(&r.table_uuid),
            text(&r.principal),
            int8(&r.expires_ms),
            int8(&r.staged_ms),
        ],
    )
    .await?;
    Ok(())
}

/// `LocationReserved` if a live reservation that contains the canonical `location`, or
/// lies inside it, refuses `claim` (without locks: the caller holds a create's). A write
/// that a hold lets through is the staged create's own commit: the holds of its name are
/// marked as landed.
pub(super) async fn check(
    q: &impl Queries,
    location: &str,
    claim: &Claim<'_>,
    now: i64,
) -> Attempt<()> {
    let candidates = location_prefixes(location);
    let upper = location_upper_bound(location);
    let held: Vec<Held> = q
        .query_all_typed(
            "SELECT catalog_id, namespace, name, table_uuid, principal FROM reserved_locations
             WHERE (location = ANY($1) OR (location >= $2 AND location < $3))
               AND expires_ms > $4",
            &[
                (&candidates, Type::TEXT_ARRAY),
                text(&location),
                text(&upper),
                int8(&now),
            ],
        )
        .await?
        .iter()
        .map(|r| Held {
            catalog: CatalogId(r.get(0)),
            namespace: r.get(1),
            name: r.get(2),
            table_uuid: r.get(3),
            principal: r.get(4),
        })
        .collect();
    if let Some(h) = refusing(&held, claim) {
        return Err(StoreError::LocationReserved {
            location: location.to_string(),
            staged: h.ident(),
        }
        .into());
    }
    // Passed holds are the staged create's own (its name and uuid): it has landed, and
    // so has every hold of its name (an earlier try's, elsewhere or under another uuid).
    if let (Some(h), Claim::Write { .. }) = (held.first(), claim) {
        q.execute_all_typed(
            "UPDATE reserved_locations SET committed = TRUE
             WHERE catalog_id = $1 AND namespace = $2 AND name = $3",
            &[int8(&h.catalog.0), text(&h.namespace), text(&h.name)],
        )
        .await?;
    }
    Ok(())
}

/// The live holds of staged creates under `ident` that have not landed, one per
/// location staged (a primary-key range).
pub(super) async fn staged(
    q: &impl Queries,
    catalog: CatalogId,
    ident: &Ident,
    now: i64,
) -> Attempt<Vec<Reservation>> {
    let rows = q
        .query_all_typed(
            "SELECT location, table_uuid, principal, expires_ms, staged_ms
             FROM reserved_locations
             WHERE catalog_id = $1 AND namespace = $2 AND name = $3
               AND expires_ms > $4 AND NOT committed",
            &[
                int8(&catalog.0),
                text(&ident.namespace.key()),
                text(&ident.name),
                int8(&now),
            ],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Reservation {
            catalog,
            ident: ident.clone(),
            location: r.get(0),
            table_uuid: r.get(1),
            principal: r.get(2),
            expires_ms: r.get(3),
            staged_ms: r.get(4),
        })
        .collect())
}
