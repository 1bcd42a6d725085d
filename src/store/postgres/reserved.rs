//! PostgreSQL's locations held for staged creates ([`Mutation::ReserveLocation`]): a
//! staged create's vended credentials reach its location before any table lives there,
//! so no other table or view may be created in or around it until they expire. A
//! reservation takes the same advisory locks as a create (`objects::overlapping_object`),
//! so the two cannot pass each other between nodes.
//!
//! [`Mutation::ReserveLocation`]: crate::store::Mutation::ReserveLocation

use tokio_postgres::types::Type;

use super::{int8, text, Attempt, Queries};
use crate::model::{CatalogId, Ident, Namespace};
use crate::store::{location_prefixes, location_upper_bound, StoreError};

/// One row per (name, location) held; `location` is canonical (ends in `/`), in the "C"
/// collation that the range lookup needs. Expired rows hold nothing and are deleted by
/// the next reservation.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE reserved_locations (
    catalog_id BIGINT NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    location   TEXT COLLATE "C" NOT NULL,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name, location)
);
CREATE INDEX reserved_by_location ON reserved_locations (location);
CREATE INDEX reserved_by_expiry ON reserved_locations (expires_ms)
"#;

/// Holds `location` for `ident` until `expires_ms`, after the same checks a create makes
/// (another object's location, a purge's; under a create's locks), and another name's
/// live reservation.
pub(super) async fn reserve(
    q: &impl Queries,
    catalog: CatalogId,
    ident: &Ident,
    location: &str,
    expires_ms: i64,
    now: i64,
) -> Attempt<()> {
    q.execute_all_typed(
        "DELETE FROM reserved_locations WHERE expires_ms <= $1",
        &[int8(&now)],
    )
    .await?;
    super::objects::check_free(q, catalog, location, ident, now).await?;
    q.execute_all_typed(
        "INSERT INTO reserved_locations (catalog_id, namespace, name, location, expires_ms)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (catalog_id, namespace, name, location)
         DO UPDATE SET expires_ms = GREATEST(reserved_locations.expires_ms, excluded.expires_ms)",
        &[
            int8(&catalog.0),
            text(&ident.namespace.key()),
            text(&ident.name),
            text(&location),
            int8(&expires_ms),
        ],
    )
    .await?;
    Ok(())
}

/// `LocationReserved` if a live reservation of another name than `ident` contains the
/// canonical `location` or lies inside it (without locks: the caller holds a create's).
pub(super) async fn check_unreserved(
    q: &impl Queries,
    catalog: CatalogId,
    location: &str,
    ident: &Ident,
    now: i64,
) -> Attempt<()> {
    let candidates = location_prefixes(location);
    let upper = location_upper_bound(location);
    let row = q
        .query_all_typed(
            "SELECT namespace, name FROM reserved_locations
             WHERE (location = ANY($1) OR (location >= $2 AND location < $3))
               AND NOT (catalog_id = $4 AND namespace = $5 AND name = $6)
               AND expires_ms > $7
             LIMIT 1",
            &[
                (&candidates, Type::TEXT_ARRAY),
                text(&location),
                text(&upper),
                int8(&catalog.0),
                text(&ident.namespace.key()),
                text(&ident.name),
                int8(&now),
            ],
        )
        .await?
        .into_iter()
        .next();
    match row {
        Some(r) => Err(StoreError::LocationReserved {
            location: location.to_string(),
            staged: Ident {
                namespace: Namespace::from_key(r.get(0)),
                name: r.get(1),
            },
        }
        .into()),
        None => Ok(()),
    }
}
