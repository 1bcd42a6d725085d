//! The embedded store: SQLite in WAL mode (bundled sources, no server to run).
//!
//! One writer connection serialises writes (SQLite allows one writer at a time anyway);
//! reads use a small pool of connections that see the last committed state without
//! blocking the writer. `synchronous=FULL` makes every acknowledged write durable against
//! power loss as well as process death.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use async_trait::async_trait;
use rusqlite::{
    params, Connection, OpenFlags, OptionalExtension, Transaction, TransactionBehavior,
};

use super::{
    from_json, page_of, to_json, CatalogRecord, LockedObjects, ObjectKind, ObjectWrite, Page,
    PageRequest, Properties, PropertiesChange, Store, StoreError, StoreResult, StoredObject,
    CATALOG_COLUMNS,
};
use crate::catalog::ident::{Ident, Namespace};

/// Schema migrations, applied in order; `PRAGMA user_version` records how many ran.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE catalogs (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    properties     TEXT NOT NULL,
    storage_config TEXT NOT NULL,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    version        INTEGER NOT NULL
);
CREATE TABLE namespaces (
    catalog_id INTEGER NOT NULL REFERENCES catalogs(id),
    path       TEXT NOT NULL,   -- levels joined by U+001F
    parent     TEXT NOT NULL,   -- the parent's path; '' for top-level namespaces
    name       TEXT NOT NULL,   -- the last level
    properties TEXT NOT NULL,
    PRIMARY KEY (catalog_id, path)
) WITHOUT ROWID;
CREATE UNIQUE INDEX namespaces_children ON namespaces (catalog_id, parent, name);
CREATE TABLE objects (
    catalog_id        INTEGER NOT NULL,
    namespace         TEXT NOT NULL,
    name              TEXT NOT NULL,
    kind              TEXT NOT NULL CHECK (kind IN ('table', 'view')),
    metadata_location TEXT NOT NULL,
    metadata          TEXT NOT NULL,
    location          TEXT NOT NULL,
    PRIMARY KEY (catalog_id, namespace, name),
    FOREIGN KEY (catalog_id, namespace) REFERENCES namespaces (catalog_id, path)
);
CREATE INDEX objects_by_kind ON objects (catalog_id, namespace, kind, name);
CREATE INDEX objects_by_location ON objects (location) WHERE kind = 'table';
CREATE TABLE metrics_reports (
    id          INTEGER PRIMARY KEY,
    catalog_id  INTEGER NOT NULL,
    namespace   TEXT NOT NULL,
    name        TEXT NOT NULL,
    report      TEXT NOT NULL,
    received_ms INTEGER NOT NULL
);
"#,
    // Views join the location-overlap check: purging a table must never delete files of a
    // view placed inside it.
    r#"
DROP INDEX objects_by_location;
CREATE INDEX objects_by_location ON objects (location);
"#,
];

/// Most idle read connections kept open.
const MAX_IDLE_READERS: usize = 16;

#[derive(Clone)]
pub struct SqliteStore {
    path: Arc<Path>,
    writer: Arc<Mutex<Connection>>,
    readers: Arc<Mutex<Vec<Connection>>>,
}

fn open_connection(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("opening {}", path.display()))?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 10000;",
    )?;
    Ok(conn)
}

fn internal(error: rusqlite::Error) -> StoreError {
    StoreError::Internal(error.into())
}

fn is_unique_violation(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(e, _)
        if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let mut conn = open_connection(path)?;
        migrate(&mut conn)?;
        Ok(SqliteStore {
            path: Arc::from(path),
            writer: Arc::new(Mutex::new(conn)),
            readers: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Runs a read on a pooled connection, on the calling thread. Point reads in WAL mode
    /// take microseconds and never wait for the writer, so handing them to a blocking
    /// thread would cost more (a thread wake-up per request) than it protects.
    async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let pooled = self.readers.lock().expect("reader pool poisoned").pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open_connection(&self.path).map_err(StoreError::Internal)?,
        };
        let result = f(&conn);
        let mut idle = self.readers.lock().expect("reader pool poisoned");
        if idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        result
    }

    /// Runs `f` in one IMMEDIATE transaction on the writer; commits only when `f` succeeds.
    async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction) -> StoreResult<T> + Send + 'static,
    {
        let writer = self.writer.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = writer.lock().expect("writer poisoned");
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(internal)?;
            let value = f(&tx)?;
            tx.commit().map_err(internal)?;
            Ok(value)
        })
        .await
        .map_err(|e| StoreError::Internal(e.into()))?
    }
}

fn migrate(conn: &mut Connection) -> anyhow::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
    let applied: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(applied) {
        tx.execute_batch(migration)
            .with_context(|| format!("applying migration {}", i + 1))?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1))?;
    }
    tx.commit()?;
    Ok(())
}

fn catalog_id(conn: &Connection, catalog: &str) -> StoreResult<i64> {
    conn.prepare_cached("SELECT id FROM catalogs WHERE name = ?1")
        .and_then(|mut s| s.query_row([catalog], |r| r.get(0)).optional())
        .map_err(internal)?
        .ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))
}

fn namespace_exists(
    conn: &Connection,
    catalog_id: i64,
    namespace: &Namespace,
) -> StoreResult<bool> {
    if namespace.is_root() {
        return Ok(true);
    }
    conn.prepare_cached("SELECT 1 FROM namespaces WHERE catalog_id = ?1 AND path = ?2")
        .and_then(|mut s| s.exists(params![catalog_id, namespace.key()]))
        .map_err(internal)
}

fn require_namespace(conn: &Connection, catalog_id: i64, namespace: &Namespace) -> StoreResult<()> {
    if namespace_exists(conn, catalog_id, namespace)? {
        Ok(())
    } else {
        Err(StoreError::NamespaceMissing(namespace.clone()))
    }
}

fn object_kind_at(
    conn: &Connection,
    catalog_id: i64,
    ident: &Ident,
) -> StoreResult<Option<ObjectKind>> {
    let kind: Option<String> = conn
        .prepare_cached(
            "SELECT kind FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
        )
        .and_then(|mut s| {
            s.query_row(
                params![catalog_id, ident.namespace.key(), ident.name],
                |r| r.get(0),
            )
            .optional()
        })
        .map_err(internal)?;
    Ok(kind.and_then(|k| ObjectKind::parse(&k)))
}

/// The table or view whose location contains `location`, or lies inside it, if any
/// (other than `ident` itself). Both lookups are index range scans: O(depth · log n), not
/// a scan of every sibling.
fn overlapping_object(
    conn: &Connection,
    catalog_id: i64,
    location: &str,
    ident: &Ident,
) -> StoreResult<Option<Ident>> {
    debug_assert!(location.ends_with('/'));
    let mut candidates: Vec<&str> = location
        .match_indices('/')
        .map(|(i, _)| &location[..=i])
        .collect();
    candidates.dedup();
    let not_self = "NOT (catalog_id = ?4 AND namespace = ?2 AND name = ?3)";
    let mut ancestor = conn
        .prepare_cached(&format!(
            "SELECT namespace, name FROM objects WHERE location = ?1 AND {not_self} LIMIT 1"
        ))
        .map_err(internal)?;
    let ns_key = ident.namespace.key();
    let to_ident = |(ns, name): (String, String)| Ident {
        namespace: Namespace::from_key(&ns),
        name,
    };
    for candidate in candidates {
        let hit: Option<(String, String)> = ancestor
            .query_row(params![candidate, ns_key, ident.name, catalog_id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(internal)?;
        if let Some(hit) = hit {
            return Ok(Some(to_ident(hit)));
        }
    }
    // Strings that start with `location` (which ends in '/') sort in [location, location
    // with its final '/' replaced by '0'), as '0' is the character after '/'.
    let upper = format!("{}0", &location[..location.len() - 1]);
    let hit: Option<(String, String)> = conn
        .prepare_cached(&format!(
            "SELECT namespace, name FROM objects WHERE location >= ?1 AND location < ?5 AND {not_self} LIMIT 1"
        ))
        .and_then(|mut s| {
            s.query_row(params![location, ns_key, ident.name, catalog_id, upper], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
        })
        .map_err(internal)?;
    Ok(hit.map(to_ident))
}

/// SQLite's LIMIT for a page: one more than asked, to learn whether more follow.
fn sql_limit(page: &PageRequest) -> i64 {
    page.limit.map(|l| l as i64 + 1).unwrap_or(-1)
}

fn catalog_from_row(
    row: &rusqlite::Row,
) -> rusqlite::Result<(String, String, String, i64, i64, i64)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn catalog_record(raw: (String, String, String, i64, i64, i64)) -> StoreResult<CatalogRecord> {
    let (name, properties, storage, created_ms, updated_ms, version) = raw;
    Ok(CatalogRecord {
        name,
        properties: from_json(&properties)?,
        storage_config: from_json(&storage)?,
        created_ms,
        updated_ms,
        version,
    })
}

/// The embedded store serves one process, whose per-object commit lock already keeps
/// other writers out: "locking" only reads the current state.
struct SqliteLocked {
    store: SqliteStore,
    catalog: String,
    current: Vec<Option<StoredObject>>,
}

#[async_trait]
impl LockedObjects for SqliteLocked {
    fn current(&self) -> &[Option<StoredObject>] {
        &self.current
    }

    async fn commit(self: Box<Self>, writes: &[ObjectWrite]) -> StoreResult<()> {
        self.store.commit_objects(&self.catalog, writes).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        self.read(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(internal))
            .await
    }

    async fn create_catalog(&self, catalog: &CatalogRecord) -> StoreResult<()> {
        let c = catalog.clone();
        let properties = to_json(&c.properties)?;
        let storage = to_json(&c.storage_config)?;
        self.write(move |tx| {
            tx.execute(
                "INSERT INTO catalogs (name, properties, storage_config, created_ms, updated_ms, version) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![c.name, properties, storage, c.created_ms, c.updated_ms, c.version],
            )
            .map_err(|e| if is_unique_violation(&e) { StoreError::CatalogExists } else { internal(e) })?;
            Ok(())
        })
        .await
    }

    async fn get_catalog(&self, name: &str) -> StoreResult<Option<CatalogRecord>> {
        let name = name.to_string();
        self.read(move |conn| {
            let raw = conn
                .prepare_cached(&format!(
                    "SELECT {CATALOG_COLUMNS} FROM catalogs WHERE name = ?1"
                ))
                .and_then(|mut s| s.query_row([&name], catalog_from_row).optional())
                .map_err(internal)?;
            raw.map(catalog_record).transpose()
        })
        .await
    }

    async fn list_catalogs(&self) -> StoreResult<Vec<CatalogRecord>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {CATALOG_COLUMNS} FROM catalogs ORDER BY name"
                ))
                .map_err(internal)?;
            let rows = stmt
                .query_map([], catalog_from_row)
                .map_err(internal)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(internal)?;
            rows.into_iter().map(catalog_record).collect()
        })
        .await
    }

    async fn update_catalog(
        &self,
        name: &str,
        expected_version: Option<i64>,
        properties: &Properties,
        storage_config: &serde_json::Value,
        now_ms: i64,
    ) -> StoreResult<CatalogRecord> {
        let name = name.to_string();
        let properties = to_json(properties)?;
        let storage = to_json(storage_config)?;
        self.write(move |tx| {
            let version: i64 = tx
                .query_row("SELECT version FROM catalogs WHERE name = ?1", [&name], |r| r.get(0))
                .optional()
                .map_err(internal)?
                .ok_or_else(|| StoreError::CatalogMissing(name.clone()))?;
            if expected_version.is_some_and(|v| v != version) {
                return Err(StoreError::Conflict);
            }
            tx.execute(
                "UPDATE catalogs SET properties = ?2, storage_config = ?3, updated_ms = ?4, version = version + 1 WHERE name = ?1",
                params![name, properties, storage, now_ms],
            )
            .map_err(internal)?;
            let raw = tx
                .query_row(&format!("SELECT {CATALOG_COLUMNS} FROM catalogs WHERE name = ?1"), [&name], catalog_from_row)
                .map_err(internal)?;
            catalog_record(raw)
        })
        .await
    }

    async fn drop_catalog(&self, name: &str) -> StoreResult<()> {
        let name = name.to_string();
        self.write(move |tx| {
            let id = catalog_id(tx, &name)?;
            let has_children = tx
                .prepare_cached("SELECT 1 FROM namespaces WHERE catalog_id = ?1 LIMIT 1")
                .and_then(|mut s| s.exists([id]))
                .map_err(internal)?;
            if has_children {
                return Err(StoreError::CatalogNotEmpty);
            }
            tx.execute("DELETE FROM metrics_reports WHERE catalog_id = ?1", [id])
                .map_err(internal)?;
            tx.execute("DELETE FROM catalogs WHERE id = ?1", [id])
                .map_err(internal)?;
            Ok(())
        })
        .await
    }

    async fn create_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
        properties: &Properties,
    ) -> StoreResult<()> {
        let catalog = catalog.to_string();
        let namespace = namespace.clone();
        let properties = to_json(properties)?;
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            require_namespace(tx, id, &namespace.parent())?;
            tx.prepare_cached(
                "INSERT INTO namespaces (catalog_id, path, parent, name, properties) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![id, namespace.key(), namespace.parent().key(), namespace.last(), properties])
            })
            .map_err(|e| if is_unique_violation(&e) { StoreError::NamespaceExists } else { internal(e) })?;
            Ok(())
        })
        .await
    }

    async fn get_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Properties>> {
        let catalog = catalog.to_string();
        let key = namespace.key();
        self.read(move |conn| {
            let id = catalog_id(conn, &catalog)?;
            let props: Option<String> = conn
                .prepare_cached(
                    "SELECT properties FROM namespaces WHERE catalog_id = ?1 AND path = ?2",
                )
                .and_then(|mut s| s.query_row(params![id, key], |r| r.get(0)).optional())
                .map_err(internal)?;
            props.map(|p| from_json(&p)).transpose()
        })
        .await
    }

    async fn list_namespaces(
        &self,
        catalog: &str,
        parent: &Namespace,
        page: &PageRequest,
    ) -> StoreResult<Page<Namespace>> {
        let catalog = catalog.to_string();
        let parent = parent.clone();
        let page = page.clone();
        self.read(move |conn| {
            let id = catalog_id(conn, &catalog)?;
            require_namespace(conn, id, &parent)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT path FROM namespaces WHERE catalog_id = ?1 AND parent = ?2 AND name > ?3 ORDER BY name LIMIT ?4",
                )
                .map_err(internal)?;
            let after = page.after.clone().unwrap_or_default();
            let items = stmt
                .query_map(params![id, parent.key(), after, sql_limit(&page)], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(internal)?
                .map(|r| r.map(|path| Namespace::from_key(&path)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(internal)?;
            Ok(page_of(items, &page, |ns| ns.last().to_string()))
        })
        .await
    }

    async fn update_namespace_properties(
        &self,
        catalog: &str,
        namespace: &Namespace,
        removals: &[String],
        updates: &Properties,
    ) -> StoreResult<PropertiesChange> {
        let catalog = catalog.to_string();
        let namespace = namespace.clone();
        let removals = removals.to_vec();
        let updates = updates.clone();
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            let current: String = tx
                .query_row(
                    "SELECT properties FROM namespaces WHERE catalog_id = ?1 AND path = ?2",
                    params![id, namespace.key()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(internal)?
                .ok_or_else(|| StoreError::NamespaceMissing(namespace.clone()))?;
            let mut properties: Properties = from_json(&current)?;
            let change = PropertiesChange::apply(&mut properties, &removals, &updates);
            tx.execute(
                "UPDATE namespaces SET properties = ?3 WHERE catalog_id = ?1 AND path = ?2",
                params![id, namespace.key(), to_json(&properties)?],
            )
            .map_err(internal)?;
            Ok(change)
        })
        .await
    }

    async fn drop_namespace(&self, catalog: &str, namespace: &Namespace) -> StoreResult<()> {
        let catalog = catalog.to_string();
        let namespace = namespace.clone();
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            require_namespace(tx, id, &namespace)?;
            let key = namespace.key();
            let has_namespaces = tx
                .prepare_cached(
                    "SELECT 1 FROM namespaces WHERE catalog_id = ?1 AND parent = ?2 LIMIT 1",
                )
                .and_then(|mut s| s.exists(params![id, key]))
                .map_err(internal)?;
            let has_objects = tx
                .prepare_cached(
                    "SELECT 1 FROM objects WHERE catalog_id = ?1 AND namespace = ?2 LIMIT 1",
                )
                .and_then(|mut s| s.exists(params![id, key]))
                .map_err(internal)?;
            if has_namespaces || has_objects {
                return Err(StoreError::NamespaceNotEmpty);
            }
            tx.execute(
                "DELETE FROM namespaces WHERE catalog_id = ?1 AND path = ?2",
                params![id, key],
            )
            .map_err(internal)?;
            Ok(())
        })
        .await
    }

    async fn load_object(&self, catalog: &str, ident: &Ident) -> StoreResult<Option<StoredObject>> {
        let catalog = catalog.to_string();
        let ns = ident.namespace.key();
        let name = ident.name.clone();
        self.read(move |conn| {
            // One query resolves the catalog and the object: no row means no catalog,
            // a row of NULLs means no object.
            let row: Option<(Option<String>, Option<String>, Option<String>)> = conn
                .prepare_cached(
                    "SELECT o.kind, o.metadata_location, o.metadata FROM catalogs c
                     LEFT JOIN objects o ON o.catalog_id = c.id AND o.namespace = ?2 AND o.name = ?3
                     WHERE c.name = ?1",
                )
                .and_then(|mut s| {
                    s.query_row(params![catalog, ns, name], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                    })
                    .optional()
                })
                .map_err(internal)?;
            match row {
                None => Err(StoreError::CatalogMissing(catalog)),
                Some((Some(kind), Some(metadata_location), Some(metadata))) => {
                    Ok(Some(StoredObject {
                        kind: ObjectKind::parse(&kind)
                            .ok_or_else(|| anyhow::anyhow!("unknown object kind {kind}"))?,
                        metadata_location,
                        metadata,
                    }))
                }
                Some(_) => Ok(None),
            }
        })
        .await
    }

    async fn list_objects(
        &self,
        catalog: &str,
        namespace: &Namespace,
        kind: ObjectKind,
        page: &PageRequest,
    ) -> StoreResult<Page<String>> {
        let catalog = catalog.to_string();
        let namespace = namespace.clone();
        let page = page.clone();
        self.read(move |conn| {
            let id = catalog_id(conn, &catalog)?;
            require_namespace(conn, id, &namespace)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT name FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND kind = ?3 AND name > ?4 ORDER BY name LIMIT ?5",
                )
                .map_err(internal)?;
            let after = page.after.clone().unwrap_or_default();
            let items = stmt
                .query_map(params![id, namespace.key(), kind.as_str(), after, sql_limit(&page)], |r| r.get(0))
                .map_err(internal)?
                .collect::<Result<Vec<String>, _>>()
                .map_err(internal)?;
            Ok(page_of(items, &page, Clone::clone))
        })
        .await
    }

    async fn commit_objects(&self, catalog: &str, writes: &[ObjectWrite]) -> StoreResult<()> {
        let catalog = catalog.to_string();
        let writes = writes.to_vec();
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            for w in &writes {
                let ns = w.ident.namespace.key();
                match &w.expected_metadata_location {
                    None => {
                        require_namespace(tx, id, &w.ident.namespace)?;
                        if let Some(kind) = object_kind_at(tx, id, &w.ident)? {
                            return Err(StoreError::ObjectExists { ident: w.ident.clone(), kind });
                        }
                        tx.prepare_cached(
                            "INSERT INTO objects (catalog_id, namespace, name, kind, metadata_location, metadata, location) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        )
                        .and_then(|mut s| {
                            s.execute(params![id, ns, w.ident.name, w.kind.as_str(), w.metadata_location, w.metadata, w.location])
                        })
                        .map_err(internal)?;
                    }
                    Some(expected) => {
                        let updated = tx
                            .prepare_cached(
                                "UPDATE objects SET metadata_location = ?6, metadata = ?7, location = ?8
                                 WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND kind = ?4 AND metadata_location = ?5",
                            )
                            .and_then(|mut s| {
                                s.execute(params![id, ns, w.ident.name, w.kind.as_str(), expected, w.metadata_location, w.metadata, w.location])
                            })
                            .map_err(internal)?;
                        if updated == 0 {
                            return Err(match object_kind_at(tx, id, &w.ident)? {
                                Some(kind) if kind == w.kind => StoreError::Conflict,
                                _ => StoreError::ObjectMissing(w.ident.clone()),
                            });
                        }
                    }
                }
                if w.check_location {
                    if let Some(other) = overlapping_object(tx, id, &w.location, &w.ident)? {
                        return Err(StoreError::LocationOverlap {
                            location: w.location.clone(),
                            other,
                        });
                    }
                }
            }
            Ok(())
        })
        .await
    }

    async fn lock_objects(
        &self,
        catalog: &str,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>> {
        let mut current = Vec::with_capacity(idents.len());
        for ident in idents {
            current.push(self.load_object(catalog, ident).await?);
        }
        Ok(Box::new(SqliteLocked {
            store: self.clone(),
            catalog: catalog.to_string(),
            current,
        }))
    }

    async fn drop_object(
        &self,
        catalog: &str,
        ident: &Ident,
        kind: ObjectKind,
    ) -> StoreResult<StoredObject> {
        let catalog = catalog.to_string();
        let ident = ident.clone();
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            let row: Option<(String, String)> = tx
                .query_row(
                    "DELETE FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3 AND kind = ?4
                     RETURNING metadata_location, metadata",
                    params![id, ident.namespace.key(), ident.name, kind.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(internal)?;
            let (metadata_location, metadata) = row.ok_or(StoreError::ObjectMissing(ident))?;
            Ok(StoredObject { kind, metadata_location, metadata })
        })
        .await
    }

    async fn rename_object(
        &self,
        catalog: &str,
        kind: ObjectKind,
        from: &Ident,
        to: &Ident,
    ) -> StoreResult<()> {
        let catalog = catalog.to_string();
        let from = from.clone();
        let to = to.clone();
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            if object_kind_at(tx, id, &from)? != Some(kind) {
                return Err(StoreError::ObjectMissing(from));
            }
            require_namespace(tx, id, &to.namespace)?;
            if let Some(existing) = object_kind_at(tx, id, &to)? {
                return Err(StoreError::ObjectExists { ident: to, kind: existing });
            }
            tx.execute(
                "UPDATE objects SET namespace = ?4, name = ?5 WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
                params![id, from.namespace.key(), from.name, to.namespace.key(), to.name],
            )
            .map_err(internal)?;
            Ok(())
        })
        .await
    }

    async fn record_metrics(&self, catalog: &str, ident: &Ident, report: &str) -> StoreResult<()> {
        let catalog = catalog.to_string();
        let ident = ident.clone();
        let report = report.to_string();
        let now = chrono::Utc::now().timestamp_millis();
        self.write(move |tx| {
            let id = catalog_id(tx, &catalog)?;
            tx.prepare_cached(
                "INSERT INTO metrics_reports (catalog_id, namespace, name, report, received_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| s.execute(params![id, ident.namespace.key(), ident.name, report, now]))
            .map_err(internal)?;
            Ok(())
        })
        .await
    }
}
