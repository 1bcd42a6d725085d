//! The embedded store's locations held for staged creates ([`Mutation::ReserveLocation`]):
//! a staged create's vended credentials reach its location before any table lives
//! there, so no other table or view may be created in or around it until they expire.
//!
//! [`Mutation::ReserveLocation`]: crate::store::Mutation::ReserveLocation

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::internal;
use crate::model::{CatalogId, Ident, Namespace};
use crate::store::{location_prefixes, location_upper_bound, StoreError, StoreResult};

/// One row per (name, location) held; `location` is canonical (ends in `/`). Expired rows
/// hold nothing and are deleted by the next reservation.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE reserved_locations (
    catalog_id INTEGER NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    location   TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name, location)
) WITHOUT ROWID;
CREATE INDEX reserved_by_location ON reserved_locations (location);
CREATE INDEX reserved_by_expiry ON reserved_locations (expires_ms);
"#;

/// Holds `location` for `ident` until `expires_ms`, after the same checks a create makes
/// (another object's location, a purge's), and another name's live reservation.
pub(super) fn reserve(
    tx: &Transaction,
    catalog: CatalogId,
    ident: &Ident,
    location: &str,
    expires_ms: i64,
    now: i64,
) -> StoreResult<()> {
    tx.prepare_cached("DELETE FROM reserved_locations WHERE expires_ms <= ?1")
        .and_then(|mut s| s.execute([now]))
        .map_err(internal)?;
    let location_owned = || location.to_string();
    if let Some(other) = super::writes::overlapping_object(tx, catalog, location, ident)? {
        let location = location_owned();
        return Err(StoreError::LocationOverlap { location, other });
    }
    if let Some(purging) = super::dropped::purge_overlapping(tx, location)? {
        let location = location_owned();
        return Err(StoreError::LocationPurging { location, purging });
    }
    check_unreserved(tx, catalog, location, ident, now)?;
    tx.prepare_cached(
        "INSERT INTO reserved_locations (catalog_id, namespace, name, location, expires_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT DO UPDATE SET expires_ms = max(expires_ms, excluded.expires_ms)",
    )
    .and_then(|mut s| {
        s.execute(params![
            catalog.0,
            ident.namespace.key(),
            ident.name,
            location,
            expires_ms
        ])
    })
    .map_err(internal)?;
    Ok(())
}

/// `LocationReserved` if a live reservation of another name than `ident` contains the
/// canonical `location` or lies inside it. Index lookups, as for objects
/// (`writes::overlapping_object`).
pub(super) fn check_unreserved(
    conn: &Connection,
    catalog: CatalogId,
    location: &str,
    ident: &Ident,
    now: i64,
) -> StoreResult<()> {
    let not_self = "NOT (catalog_id = ?4 AND namespace = ?2 AND name = ?3) AND expires_ms > ?5";
    let ns_key = ident.namespace.key();
    let row = |r: &rusqlite::Row| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?));
    let mut found: Option<(String, String)> = None;
    {
        let mut ancestor = conn
            .prepare_cached(&format!(
                "SELECT namespace, name FROM reserved_locations WHERE location = ?1 AND {not_self} LIMIT 1"
            ))
            .map_err(internal)?;
        for candidate in location_prefixes(location) {
            found = ancestor
                .query_row(params![candidate, ns_key, ident.name, catalog.0, now], row)
                .optional()
                .map_err(internal)?;
            if found.is_some() {
                break;
            }
        }
    }
    if found.is_none() {
        found = conn
            .prepare_cached(&format!(
                "SELECT namespace, name FROM reserved_locations
                 WHERE location >= ?1 AND location < ?6 AND {not_self} LIMIT 1"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        location,
                        ns_key,
                        ident.name,
                        catalog.0,
                        now,
                        location_upper_bound(location)
                    ],
                    row,
                )
                .optional()
            })
            .map_err(internal)?;
    }
    match found {
        Some((namespace, name)) => Err(StoreError::LocationReserved {
            location: location.to_string(),
            staged: Ident {
                namespace: Namespace::from_key(&namespace),
                name,
            },
        }),
        None => Ok(()),
    }
}
