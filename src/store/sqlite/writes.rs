//! The embedded store's one write path: [`apply`] runs a `WriteBatch` inside the
//! writer's transaction, its outbox events last (`outbox::append`).

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::documents::{self, Document, Stored};
use super::{
    catalog_from_row, dropped, internal, is_unique_violation, journal, outbox, require_namespace,
    reserved, stored_object,
};
use crate::model::{CatalogId, CatalogRecord, Ident, Namespace, ObjectKind, Properties};
use crate::store::reservations::Claim;
use crate::store::{
    exists_error, location_prefixes, location_upper_bound, properties_json, stored_ident, to_json,
    Applied, CatalogRow, IdempotencyRecord, Mutation, NotificationStamp, ObjectWrite, PolicyWrite,
    Presence, StoreError, StoreResult, StoredObject, Unchanged, WriteBatch, CATALOG_COLUMNS,
};

/// Applies the batch's rows, then its mutation; any error rolls all of it back.
/// `packed`: the new documents' packed forms, or a namespace update's expected
/// properties' when the request had to pack them (`documents::pack_batch`).
pub(super) fn apply(
    tx: &Transaction,
    batch: &WriteBatch,
    packed: &[Option<Vec<u8>>],
) -> StoreResult<Applied> {
    if let Some(record) = &batch.idempotency {
        record_idempotency(tx, record, batch.now_ms)?;
    }
    if let Some((expected, document)) = &batch.security {
        replace_security(tx, *expected, document)?;
    }
    if let Some(policies) = &batch.policies {
        replace_policies(tx, policies)?;
    }
    if let Some(stamp) = &batch.notification {
        swap_notification_stamp(tx, stamp)?;
    }
    let applied = apply_mutation(tx, batch, packed)?;
    if let Some(expected) = batch.security_seen {
        require_security_version(tx, expected)?;
    }
    if let Some(presence) = &batch.present {
        require_present(tx, presence)?;
    }
    for unchanged in &batch.unchanged {
        require_unchanged(tx, unchanged)?;
    }
    if let (true, Mutation::CommitObjects { catalog, writes }) =
        (batch.journal_files, &batch.mutation)
    {
        journal::record(tx, *catalog, writes)?;
    }
    if let Some(purge) = &batch.purge {
        dropped::schedule_purge(tx, purge)?;
    }
    outbox::append(tx, &batch.events)?;
    Ok(applied)
}

/// The batch's `i`th new document (`text`) as it is kept: packed if `pack_batch` packed it.
fn stored<'a>(packed: &'a [Option<Vec<u8>>], i: usize, text: &'a str) -> Stored<'a> {
    match packed.get(i) {
        Some(Some(frame)) => Stored::Packed(frame),
        _ => Stored::Text(text),
    }
}

fn apply_mutation(
    tx: &Transaction,
    batch: &WriteBatch,
    packed: &[Option<Vec<u8>>],
) -> StoreResult<Applied> {
    let now = batch.now_ms;
    match &batch.mutation {
        Mutation::None => {}
        Mutation::CreateCatalog(record) => create_catalog(tx, record)?,
        Mutation::UpdateCatalog {
            expected_version,
            record,
        } => update_catalog(tx, *expected_version, record)?,
        Mutation::DropCatalog { catalog, name } => drop_catalog(tx, *catalog, name)?,
        Mutation::CreateNamespace {
            catalog,
            namespace,
            properties,
        } => create_namespace(tx, *catalog, namespace, properties)?,
        Mutation::UpdateNamespace {
            catalog,
            namespace,
            expected,
            properties,
        } => {
            let new = match properties.packed() {
                Some(bytes) => Stored::Packed(bytes),
                None => Stored::Text(properties.json()),
            };
            // Attached to the properties the request read, or packed by the request.
            let expected_packed = expected
                .packed
                .as_deref()
                .or_else(|| packed.first().and_then(Option::as_deref));
            update_namespace(
                tx,
                *catalog,
                namespace,
                (&expected.json, expected_packed),
                new,
            )?
        }
        Mutation::DropNamespace { catalog, namespace } => drop_namespace(tx, *catalog, namespace)?,
        Mutation::CommitObjects { catalog, writes } => {
            for (i, write) in writes.iter().enumerate() {
                commit_object(tx, *catalog, write, stored(packed, i, &write.metadata), now)?;
            }
        }
        Mutation::DropObject {
            catalog,
            kind,
            ident,
            expected,
            retain,
        } => {
            let (object, location) = drop_object(tx, *catalog, *kind, ident, expected)?;
            if let Some(retention) = retain {
                dropped::retain(tx, *catalog, ident, &object, &location, retention)?;
            }
            return Ok(Applied::Dropped(object));
        }
        Mutation::Undrop { catalog, id, write } => {
            dropped::take(tx, Some(*catalog), id)?;
            commit_object(tx, *catalog, write, stored(packed, 0, &write.metadata), now)?;
        }
        Mutation::ForgetDropped { id } => {
            return dropped::take(tx, None, id).map(Applied::Forgotten);
        }
        Mutation::FinishPurge { id } => dropped::finish_purge(tx, id)?,
        Mutation::DeferPurge {
            id,
            attempts,
            next_ms,
        } => dropped::defer_purge(tx, id, *attempts, *next_ms)?,
        Mutation::RenameObject {
            catalog,
            kind,
            from,
            to,
            expected,
        } => rename_object(tx, *catalog, *kind, from, to, expected)?,
        Mutation::ReserveLocation(reservation) => reserved::reserve(tx, reservation, now)?,
        Mutation::RecordMetrics {
            catalog,
            ident,
            report,
        } => {
            tx.prepare_cached(
                "INSERT INTO metrics_reports (catalog_id, namespace, name, report, received_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| s.execute(params![catalog.0, ident.namespace.key(), ident.name, report, now]))
            .map_err(internal)?;
        }
    }
    Ok(Applied::Done)
}

/// Inserts the key, or takes over an expired record of it; a live one refuses the batch.
fn record_idempotency(tx: &Transaction, record: &IdempotencyRecord, now: i64) -> StoreResult<()> {
    let taken = tx
        .prepare_cached(
            "INSERT INTO idempotency_keys (key, fingerprint, outcome, expires_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (key) DO UPDATE SET fingerprint = excluded.fingerprint,
                 outcome = excluded.outcome, expires_ms = excluded.expires_ms
             WHERE idempotency_keys.expires_ms < ?5",
        )
        .and_then(|mut s| {
            s.execute(params![
                record.key,
                record.fingerprint,
                record.outcome,
                record.expires_ms,
                now
            ])
        })
        .map_err(internal)?;
    if taken == 0 {
        return Err(StoreError::IdempotencyKeyUsed);
    }
    Ok(())
}

/// Swaps the security document if it is still at `expected` (0: none yet).
fn replace_security(tx: &Transaction, expected: i64, document: &str) -> StoreResult<()> {
    let swapped = if expected == 0 {
        tx.execute(
            "INSERT INTO security (id, version, document) VALUES (1, 1, ?1) ON CONFLICT (id) DO NOTHING",
            [document],
        )
    } else {
        tx.execute(
            "UPDATE security SET version = version + 1, document = ?2 WHERE id = 1 AND version = ?1",
            params![expected, document],
        )
    }
    .map_err(internal)?;
    if swapped == 0 {
        return Err(StoreError::Conflict);
    }
    Ok(())
}

/// `Conflict` unless the security document is at `expected` (0: none yet).
fn require_security_version(tx: &Transaction, expected: i64) -> StoreResult<()> {
    let version: Option<i64> = tx
        .prepare_cached("SELECT version FROM security WHERE id = 1")
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(internal)?;
    if version.unwrap_or(0) != expected {
        return Err(StoreError::Conflict);
    }
    Ok(())
}

/// The presence's error unless what it names exists (or, for a policy document, is still
/// at the version given).
fn require_present(tx: &Transaction, presence: &Presence) -> StoreResult<()> {
    match presence {
        Presence::Namespace { catalog, namespace } => require_namespace(tx, *catalog, namespace),
        Presence::Object {
            catalog,
            ident,
            kinds,
        } => match object_kind_at(tx, *catalog, ident)? {
            Some(kind) if kinds.contains(&kind) => Ok(()),
            _ => Err(presence.missing()),
        },
        Presence::Policies { catalog, version } => {
            let found: Option<i64> = tx
                .prepare_cached("SELECT version FROM policies WHERE catalog_id = ?1")
                .and_then(|mut s| s.query_row([catalog.0], |r| r.get(0)).optional())
                .map_err(internal)?;
            if found.unwrap_or(0) == *version {
                Ok(())
            } else {
                Err(presence.missing())
            }
        }
    }
}

/// `Conflict` unless the object is still as the commit read it.
fn require_unchanged(tx: &Transaction, unchanged: &Unchanged) -> StoreResult<()> {
    let Unchanged {
        catalog,
        ident,
        metadata_location,
    } = unchanged;
    let found: Option<String> = tx
        .prepare_cached(
            "SELECT metadata_location FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![catalog.0, ident.namespace.key(), ident.name], |r| r.get(0))
                .optional()
        })
        .map_err(internal)?;
    match found == *metadata_location {
        true => Ok(()),
        false => Err(StoreError::Conflict),
    }
}

/// Sets a table's notification stamp if it is still the one the caller read.
fn swap_notification_stamp(tx: &Transaction, stamp: &NotificationStamp) -> StoreResult<()> {
    let (catalog, ns, name) = (
        stamp.catalog.0,
        stamp.ident.namespace.key(),
        &stamp.ident.name,
    );
    let swapped = match stamp.expected {
        // The catalog's foreign key fails for a catalog dropped meanwhile: a lost race too.
        None => tx.execute(
            "INSERT INTO notification_stamps (catalog_id, namespace, name, timestamp_ms)
             SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM catalogs WHERE id = ?1)
             ON CONFLICT (catalog_id, namespace, name) DO NOTHING",
            params![catalog, ns, name, stamp.timestamp_ms],
        ),
        Some(expected) => tx.execute(
            "UPDATE notification_stamps SET timestamp_ms = ?4
             WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND timestamp_ms = ?5",
            params![catalog, ns, name, stamp.timestamp_ms, expected],
        ),
    }
    .map_err(internal)?;
    if swapped == 0 {
        return Err(StoreError::Conflict);
    }
    Ok(())
}

/// Swaps a catalog's policy document if it is still at its expected version (0: none
/// yet).
fn replace_policies(tx: &Transaction, write: &PolicyWrite) -> StoreResult<()> {
    // A catalog dropped since the caller read it: its document is gone with it (a lost
    // race, which the caller reads again), not a foreign key error.
    let catalog_exists = tx
        .prepare_cached("SELECT 1 FROM catalogs WHERE id = ?1")
        .and_then(|mut s| s.exists([write.catalog.0]))
        .map_err(internal)?;
    if !catalog_exists {
        return Err(StoreError::Conflict);
    }
    let swapped = if write.expected_version == 0 {
        tx.execute(
            "INSERT INTO policies (catalog_id, version, document) VALUES (?1, 1, ?2) ON CONFLICT (catalog_id) DO NOTHING",
            params![write.catalog.0, write.document],
        )
    } else {
        tx.execute(
            "UPDATE policies SET version = version + 1, document = ?3 WHERE catalog_id = ?1 AND version = ?2",
            params![write.catalog.0, write.expected_version, write.document],
        )
    }
    .map_err(internal)?;
    if swapped == 0 {
        return Err(StoreError::Conflict);
    }
    Ok(())
}

fn create_catalog(tx: &Transaction, c: &CatalogRecord) -> StoreResult<()> {
    tx.execute(
        "INSERT INTO catalogs (id, name, properties, storage_config, created_ms, updated_ms, version, catalog_type) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![c.id.0, c.name, to_json(&c.properties)?, to_json(&c.storage_config)?, c.created_ms, c.updated_ms, c.version, c.catalog_type.as_str()],
    )
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::CatalogExists(c.name.clone())
        } else {
            internal(e)
        }
    })?;
    Ok(())
}

fn update_catalog(tx: &Transaction, expected_version: i64, c: &CatalogRecord) -> StoreResult<()> {
    let updated = tx
        .execute(
            "UPDATE catalogs SET properties = ?2, storage_config = ?3, updated_ms = ?4, version = ?5
             WHERE id = ?1 AND version = ?6",
            params![
                c.id.0,
                to_json(&c.properties)?,
                to_json(&c.storage_config)?,
                c.updated_ms,
                c.version,
                expected_version
            ],
        )
        .map_err(internal)?;
    if updated == 0 {
        return Err(match catalog_by_id(tx, c.id)? {
            Some(_) => StoreError::Conflict,
            None => StoreError::CatalogMissing(c.name.clone()),
        });
    }
    Ok(())
}

fn catalog_by_id(conn: &Connection, id: CatalogId) -> StoreResult<Option<CatalogRecord>> {
    conn.query_row(
        &format!("SELECT {CATALOG_COLUMNS} FROM catalogs WHERE id = ?1"),
        [id.0],
        catalog_from_row,
    )
    .optional()
    .map_err(internal)?
    .map(CatalogRow::into_record)
    .transpose()
}

fn drop_catalog(tx: &Transaction, id: CatalogId, name: &str) -> StoreResult<()> {
    let has_children = tx
        .prepare_cached("SELECT 1 FROM namespaces WHERE catalog_id = ?1 LIMIT 1")
        .and_then(|mut s| s.exists([id.0]))
        .map_err(internal)?;
    if has_children {
        return Err(StoreError::CatalogNotEmpty(name.to_string()));
    }
    tx.execute("DELETE FROM metrics_reports WHERE catalog_id = ?1", [id.0])
        .map_err(internal)?;
    tx.execute("DELETE FROM policies WHERE catalog_id = ?1", [id.0])
        .map_err(internal)?;
    tx.execute(
        "DELETE FROM notification_stamps WHERE catalog_id = ?1",
        [id.0],
    )
    .map_err(internal)?;
    if tx
        .execute("DELETE FROM catalogs WHERE id = ?1", [id.0])
        .map_err(internal)?
        == 0
    {
        return Err(StoreError::CatalogMissing(name.to_string()));
    }
    Ok(())
}

fn create_namespace(
    tx: &Transaction,
    id: CatalogId,
    namespace: &Namespace,
    properties: &Properties,
) -> StoreResult<()> {
    require_catalog(tx, id)?;
    require_namespace(tx, id, &namespace.parent())?;
    tx.prepare_cached(
        "INSERT INTO namespaces (catalog_id, path, parent, name, properties) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| {
        s.execute(params![
            id.0,
            namespace.key(),
            namespace.parent().key(),
            namespace.last(),
            properties_json(properties)
        ])
    })
    .map_err(|e| {
        if is_unique_violation(&e) {
            StoreError::NamespaceExists(namespace.clone())
        } else {
            internal(e)
        }
    })?;
    Ok(())
}

/// The embedded store has no row for a catalog's root namespace, so a create under a
/// catalog dropped meanwhile must be refused by hand.
fn require_catalog(tx: &Transaction, id: CatalogId) -> StoreResult<()> {
    let exists = tx
        .prepare_cached("SELECT 1 FROM catalogs WHERE id = ?1")
        .and_then(|mut s| s.exists([id.0]))
        .map_err(internal)?;
    if exists {
        Ok(())
    } else {
        Err(StoreError::CatalogMissing(format!("with id {}", id.0)))
    }
}

/// Swaps the namespace's properties if they are still `expected` (the JSON text the
/// request read, and its packed form if it was packed). The stored value may be packed,
/// so the comparison is `documents::holds`, not SQL's `=`.
fn update_namespace(
    tx: &Transaction,
    id: CatalogId,
    namespace: &Namespace,
    (expected, expected_packed): (&str, Option<&[u8]>),
    properties: Stored,
) -> StoreResult<()> {
    let key = namespace.key();
    let current: Option<bool> = tx
        .prepare_cached("SELECT properties FROM namespaces WHERE catalog_id = ?1 AND path = ?2")
        .and_then(|mut s| {
            s.query_row(params![id.0, key], |r| {
                documents::holds(r.get_ref(0)?, expected, expected_packed).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        0,
                        rusqlite::types::Type::Blob,
                        e.into(),
                    )
                })
            })
            .optional()
        })
        .map_err(internal)?;
    match current {
        None => Err(StoreError::NamespaceMissing(namespace.clone())),
        Some(false) => Err(StoreError::Conflict),
        Some(true) => {
            tx.prepare_cached(
                "UPDATE namespaces SET properties = ?3 WHERE catalog_id = ?1 AND path = ?2",
            )
            .and_then(|mut s| s.execute(params![id.0, key, properties]))
            .map_err(internal)?;
            Ok(())
        }
    }
}

fn drop_namespace(tx: &Transaction, id: CatalogId, namespace: &Namespace) -> StoreResult<()> {
    require_namespace(tx, id, namespace)?;
    let key = namespace.key();
    let has_namespaces = tx
        .prepare_cached("SELECT 1 FROM namespaces WHERE catalog_id = ?1 AND parent = ?2 LIMIT 1")
        .and_then(|mut s| s.exists(params![id.0, key]))
        .map_err(internal)?;
    let has_objects = tx
        .prepare_cached("SELECT 1 FROM objects WHERE catalog_id = ?1 AND namespace = ?2 LIMIT 1")
        .and_then(|mut s| s.exists(params![id.0, key]))
        .map_err(internal)?;
    if has_namespaces || has_objects {
        return Err(StoreError::NamespaceNotEmpty(namespace.clone()));
    }
    tx.execute(
        "DELETE FROM namespaces WHERE catalog_id = ?1 AND path = ?2",
        params![id.0, key],
    )
    .map_err(internal)?;
    // The stamps of its dropped tables: a namespace made again under this name starts anew.
    tx.execute(
        "DELETE FROM notification_stamps WHERE catalog_id = ?1 AND namespace = ?2",
        params![id.0, key],
    )
    .map_err(internal)?;
    Ok(())
}

/// The current pointer of a table or view, by catalog id.
pub(super) fn object_at(
    conn: &Connection,
    id: CatalogId,
    ident: &Ident,
) -> StoreResult<Option<StoredObject>> {
    let row: Option<(String, String, Document)> = conn
        .prepare_cached(
            "SELECT kind, metadata_location, metadata FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![id.0, ident.namespace.key(), ident.name], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()
        })
        .map_err(internal)?;
    row.map(|(kind, location, metadata)| stored_object(kind, location, metadata.0))
        .transpose()
}

fn object_kind_at(
    conn: &Connection,
    id: CatalogId,
    ident: &Ident,
) -> StoreResult<Option<ObjectKind>> {
    let kind: Option<String> = conn
        .prepare_cached(
            "SELECT kind FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
        )
        .and_then(|mut s| {
            s.query_row(params![id.0, ident.namespace.key(), ident.name], |r| {
                r.get(0)
            })
            .optional()
        })
        .map_err(internal)?;
    Ok(kind.and_then(|k| ObjectKind::parse(&k)))
}

/// `document`: `w.metadata` as kept (`documents`).
fn commit_object(
    tx: &Transaction,
    id: CatalogId,
    w: &ObjectWrite,
    document: Stored,
    now: i64,
) -> StoreResult<()> {
    let ns = w.ident.namespace.key();
    match &w.expected_metadata_location {
        None => {
            require_namespace(tx, id, &w.ident.namespace)?;
            if let Some(existing) = object_kind_at(tx, id, &w.ident)? {
                return Err(exists_error(w.kind, existing, &w.ident));
            }
            tx.prepare_cached(
                "INSERT INTO objects (catalog_id, namespace, name, kind, metadata_location, metadata, location) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![id.0, ns, w.ident.name, w.kind.as_str(), w.metadata_location, document, w.location])
            })
            .map_err(internal)?;
        }
        Some(expected) => {
            // A commit that keeps the object's location leaves the column out of the SET:
            // SQLite rewrites an index entry for every indexed column a SET names, changed
            // or not (`objects_by_location`: a delete and an insert per commit). The row's
            // location is part of the match, so a row whose stored form differs (written
            // by another version) is updated by the full statement below instead.
            let swap = |sql: &str| {
                tx.prepare_cached(sql)
                    .and_then(|mut s| {
                        s.execute(params![
                            id.0,
                            ns,
                            w.ident.name,
                            w.kind.as_str(),
                            expected,
                            w.metadata_location,
                            document,
                            w.location
                        ])
                    })
                    .map_err(internal)
            };
            let same_place = if w.check_location {
                0
            } else {
                swap(
                    "UPDATE objects SET metadata_location = ?6, metadata = ?7
                     WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND kind = ?4 AND metadata_location = ?5
                       AND location = ?8",
                )?
            };
            let updated = if same_place > 0 {
                same_place
            } else {
                swap(
                    "UPDATE objects SET metadata_location = ?6, metadata = ?7, location = ?8
                     WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND kind = ?4 AND metadata_location = ?5",
                )?
            };
            if updated == 0 {
                return Err(match object_kind_at(tx, id, &w.ident)? {
                    Some(kind) if kind == w.kind => StoreError::Conflict,
                    _ => StoreError::ObjectMissing {
                        kind: w.kind,
                        ident: w.ident.clone(),
                    },
                });
            }
        }
    }
    if w.check_location {
        let claim = Claim::Write {
            catalog: id,
            ident: &w.ident,
            metadata: &w.metadata,
        };
        check_free(tx, id, &w.location, &w.ident, &claim, now)?;
    }
    Ok(())
}

/// Refuses the canonical `location` where another object's location than `ident`'s, a
/// purge's, or a staged create's that refuses `claim` overlaps it (a create's check, and
/// a staged create's before it holds the location).
pub(super) fn check_free(
    tx: &Transaction,
    id: CatalogId,
    location: &str,
    ident: &Ident,
    claim: &Claim,
    now: i64,
) -> StoreResult<()> {
    if let Some(other) = overlapping_object(tx, id, location, ident)? {
        let location = location.to_string();
        return Err(StoreError::LocationOverlap { location, other });
    }
    if let Some(purging) = dropped::purge_overlapping(tx, location)? {
        let location = location.to_string();
        return Err(StoreError::LocationPurging { location, purging });
    }
    reserved::check(tx, location, claim, now)
}

/// The table or view whose location contains `location`, or lies inside it, if any
/// (other than `ident` itself). Both lookups are index range scans: O(depth · log n), not
/// a scan of every sibling.
pub(super) fn overlapping_object(
    conn: &Connection,
    id: CatalogId,
    location: &str,
    ident: &Ident,
) -> StoreResult<Option<Ident>> {
    let not_self = "NOT (catalog_id = ?4 AND namespace = ?2 AND name = ?3)";
    let mut ancestor = conn
        .prepare_cached(&format!(
            "SELECT namespace, name FROM objects WHERE location = ?1 AND {not_self} LIMIT 1"
        ))
        .map_err(internal)?;
    let ns_key = ident.namespace.key();
    let to_ident = |(ns, name): (String, String)| stored_ident(&ns, name);
    for candidate in location_prefixes(location) {
        let hit: Option<(String, String)> = ancestor
            .query_row(params![candidate, ns_key, ident.name, id.0], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(internal)?;
        if let Some(hit) = hit {
            return Ok(Some(to_ident(hit)));
        }
    }
    let hit: Option<(String, String)> = conn
        .prepare_cached(&format!(
            "SELECT namespace, name FROM objects WHERE location >= ?1 AND location < ?5 AND {not_self} LIMIT 1"
        ))
        .and_then(|mut s| {
            s.query_row(
                params![location, ns_key, ident.name, id.0, location_upper_bound(location)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
        })
        .map_err(internal)?;
    Ok(hit.map(to_ident))
}

fn drop_object(
    tx: &Transaction,
    id: CatalogId,
    kind: ObjectKind,
    ident: &Ident,
    expected: &str,
) -> StoreResult<(StoredObject, String)> {
    let row: Option<(String, Document, String)> = tx
        .query_row(
            "DELETE FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND kind = ?4
                 AND metadata_location = ?5
             RETURNING metadata_location, metadata, location",
            params![id.0, ident.namespace.key(), ident.name, kind.as_str(), expected],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(internal)?;
    let Some((metadata_location, metadata, location)) = row else {
        return Err(match object_kind_at(tx, id, ident)? {
            Some(found) if found == kind => StoreError::Conflict,
            _ => StoreError::ObjectMissing {
                kind,
                ident: ident.clone(),
            },
        });
    };
    Ok((
        StoredObject {
            kind,
            metadata_location,
            metadata: metadata.0.into(),
        },
        location,
    ))
}

fn rename_object(
    tx: &Transaction,
    id: CatalogId,
    kind: ObjectKind,
    from: &Ident,
    to: &Ident,
    expected: &str,
) -> StoreResult<()> {
    if object_kind_at(tx, id, from)? != Some(kind) {
        return Err(StoreError::ObjectMissing {
            kind,
            ident: from.clone(),
        });
    }
    require_namespace(tx, id, &to.namespace)?;
    if let Some(existing) = object_kind_at(tx, id, to)? {
        return Err(StoreError::RenameTargetExists {
            kind,
            existing,
            from: from.clone(),
            to: to.clone(),
        });
    }
    let renamed = tx
        .execute(
            "UPDATE objects SET namespace = ?4, name = ?5
             WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND metadata_location = ?6",
            params![
                id.0,
                from.namespace.key(),
                from.name,
                to.namespace.key(),
                to.name,
                expected
            ],
        )
        .map_err(internal)?;
    if renamed == 0 {
        return Err(StoreError::Conflict);
    }
    Ok(())
}
