//! The embedded store's locations held for staged creates ([`Mutation::ReserveLocation`]):
//! a staged create's vended credentials reach its location before any table lives
//! there, so no other table or view may be created in or around it until they expire.
//!
//! [`Mutation::ReserveLocation`]: crate::store::Mutation::ReserveLocation

use rusqlite::{params, Connection, Transaction};

use super::internal;
use crate::model::{CatalogId, Ident};
use crate::store::reservations::{refusing, Claim, Held, Reservation};
use crate::store::{location_prefixes, location_upper_bound, nobody, StoreError, StoreResult};

/// One row per (name, location) held; `location` is canonical (ends in `/`). Expired rows
/// hold nothing and are deleted by the next reservation.
pub(super) const MIGRATION: &str = r#"
CREATE TABLE reserved_locations (
    catalog_id INTEGER NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    location   TEXT NOT NULL,
    table_uuid TEXT NOT NULL,
    principal  TEXT NOT NULL,
    expires_ms INTEGER NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name, location)
) WITHOUT ROWID;
CREATE INDEX reserved_by_location ON reserved_locations (location);
CREATE INDEX reserved_by_expiry ON reserved_locations (expires_ms);
"#;

/// `committed`: whether a table of the hold's name has landed through it (the staged
/// create's commit): from then on the hold only guards the location until what was
/// handed out expires, and no longer serves the staged table's `/sign` and
/// `/credentials` (nor is extended), which the table itself does. `staged_ms`: when the
/// staged create took it. Holds from before served nothing: they are marked committed.
pub(super) const COMMITTED_MIGRATION: &str = r#"
ALTER TABLE reserved_locations ADD COLUMN committed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reserved_locations ADD COLUMN staged_ms INTEGER NOT NULL DEFAULT 0;
UPDATE reserved_locations SET committed = 1;
"#;

/// Holds the location after the checks a create makes, against every object (its own
/// name's too: a table of that name created since the staged create looked would be
/// reachable), and the live reservations (`reservations::refusing`).
pub(super) fn reserve(tx: &Transaction, r: &Reservation, now: i64) -> StoreResult<()> {
    tx.prepare_cached("DELETE FROM reserved_locations WHERE expires_ms <= ?1")
        .and_then(|mut s| s.execute([now]))
        .map_err(internal)?;
    let claim = Claim::Reserve {
        catalog: r.catalog,
        ident: &r.ident,
        principal: &r.principal,
    };
    super::writes::check_free(tx, r.catalog, &r.location, &nobody(), &claim, now)?;
    // Held again under the same uuid: an extension, which a landed hold does not get
    // (it keeps its expiry, its landing and its staging time); under a new uuid: a new
    // staged create (a retry), which starts afresh. SET reads the row as it was.
    tx.prepare_cached(
        "INSERT INTO reserved_locations (catalog_id, namespace, name, location, table_uuid,
             principal, expires_ms, staged_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT DO UPDATE SET
             expires_ms = CASE WHEN committed AND table_uuid = excluded.table_uuid
                 THEN expires_ms ELSE max(expires_ms, excluded.expires_ms) END,
             committed = CASE WHEN table_uuid = excluded.table_uuid THEN committed ELSE 0 END,
             staged_ms = CASE WHEN table_uuid = excluded.table_uuid
                 THEN staged_ms ELSE excluded.staged_ms END,
             table_uuid = excluded.table_uuid, principal = excluded.principal",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.catalog.0,
            r.ident.namespace.key(),
            r.ident.name,
            r.location,
            r.table_uuid,
            r.principal,
            r.expires_ms,
            r.staged_ms
        ])
    })
    .map_err(internal)?;
    Ok(())
}

/// `LocationReserved` if a live reservation that contains the canonical `location`, or
/// lies inside it, refuses `claim`. Index lookups, as for objects
/// (`writes::overlapping_object`). A write that a hold lets through is the staged create's
/// own commit: the holds of its name are marked as landed.
pub(super) fn check(conn: &Connection, location: &str, claim: &Claim, now: i64) -> StoreResult<()> {
    const COLUMNS: &str = "catalog_id, namespace, name, table_uuid, principal";
    let row = |r: &rusqlite::Row| {
        Ok(Held {
            catalog: CatalogId(r.get(0)?),
            namespace: r.get(1)?,
            name: r.get(2)?,
            table_uuid: r.get(3)?,
            principal: r.get(4)?,
        })
    };
    let mut held: Vec<Held> = Vec::new();
    let mut at = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM reserved_locations WHERE location = ?1 AND expires_ms > ?2"
        ))
        .map_err(internal)?;
    for candidate in location_prefixes(location) {
        let rows = at
            .query_map(params![candidate, now], row)
            .map_err(internal)?;
        for h in rows {
            held.push(h.map_err(internal)?);
        }
    }
    let mut inside = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM reserved_locations
             WHERE location >= ?1 AND location < ?2 AND expires_ms > ?3"
        ))
        .map_err(internal)?;
    let upper = location_upper_bound(location);
    let rows = inside
        .query_map(params![location, upper, now], row)
        .map_err(internal)?;
    for h in rows {
        held.push(h.map_err(internal)?);
    }
    if let Some(h) = refusing(&held, claim) {
        return Err(StoreError::LocationReserved {
            location: location.to_string(),
            staged: h.ident(),
        });
    }
    // Passed holds are the staged create's own (its name and uuid): it has landed, and
    // so has every hold of its name (an earlier try's, elsewhere or under another uuid).
    if let (Some(h), Claim::Write { .. }) = (held.first(), claim) {
        conn.prepare_cached(
            "UPDATE reserved_locations SET committed = 1
             WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
        )
        .and_then(|mut s| s.execute(params![h.catalog.0, h.namespace, h.name]))
        .map_err(internal)?;
    }
    Ok(())
}

/// The live holds of staged creates under `ident` that have not landed, one per
/// location staged (a primary-key range).
pub(super) fn staged(
    conn: &Connection,
    catalog: CatalogId,
    ident: &Ident,
    now: i64,
) -> StoreResult<Vec<Reservation>> {
    let mut select = conn
        .prepare_cached(
            "SELECT location, table_uuid, principal, expires_ms, staged_ms
             FROM reserved_locations
             WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3
               AND expires_ms > ?4 AND committed = 0",
        )
        .map_err(internal)?;
    let rows = select
        .query_map(
            params![catalog.0, ident.namespace.key(), ident.name, now],
            |r| {
                Ok(Reservation {
                    catalog,
                    ident: ident.clone(),
                    location: r.get(0)?,
                    table_uuid: r.get(1)?,
                    principal: r.get(2)?,
                    expires_ms: r.get(3)?,
                    staged_ms: r.get(4)?,
                })
            },
        )
        .map_err(internal)?;
    rows.map(|r| r.map_err(internal)).collect()
}
