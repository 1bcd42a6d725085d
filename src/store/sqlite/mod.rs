//! The embedded store: SQLite in WAL mode (bundled sources, no server to run).
//!
//! One writer connection serialises writes (SQLite allows one writer at a time anyway);
//! reads use a small pool of connections that see the last committed state without
//! blocking the writer. `synchronous=FULL` makes every acknowledged write durable against
//! power loss as well as process death. SQLite's syncs are `fdatasync`s
//! (`HAVE_FDATASYNC`, set for the bundled build in `.cargo/config.toml`), which write
//! what reading the data back needs, the file's size included, but not its timestamps.
//!
//! - `mod.rs`: the reader pool, reads and the `Store` impl.
//! - `connection.rs`: opening the database: the one-process lock, the connections' settings.
//! - `cache.rs`: current table and view pointers kept in memory for loads, valid because
//!   this process is the only writer.
//! - `list_cache.rs`: recent list pages kept in memory on the same terms.
//! - `group.rs`: group commit: concurrent write batches share one transaction and its
//!   fsyncs, each in its own savepoint.
//! - `checkpoint.rs`: WAL checkpoints, mostly on a thread of their own, off the commit path.
//! - `writes.rs`: [`writes::apply`], the one function that applies a `WriteBatch`.
//! - `documents.rs`: metadata documents and namespace properties past 3 KiB kept
//!   packed (lz4; zstd before), read in any form.
//! - `outbox.rs`: change events (appended by `apply`, read back) and relay leases.
//! - `dropped.rs`: dropped tables and views kept for undrop, and purges still to finish.
//! - `journal.rs`: the text of new metadata files not yet synced (`--fsync-journal`).
//! - `schema.rs`: the schema's migrations, and applying them.
//! - `wal_buffer.rs`: the writer's VFS, which writes a commit's WAL frames in one call.
//! - `pcache.rs`: SQLite's page cache without a walk over every page at each commit.

mod cache;
mod checkpoint;
mod connection;
mod documents;
mod dropped;
mod group;
mod journal;
mod list_cache;
mod outbox;
pub mod pcache;
mod reserved;
mod schema;
mod slice;
mod wal_buffer;
mod writes;

pub use journal::JournalMarks;

use cache::Lookup;
use connection::{open_connection, open_writer, Exclusive};
use documents::{Document, PackedText};
use list_cache::{ListKey, ListLookup, Listing};
use schema::{migrate, MIGRATIONS};
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::store::{check_schema, stored_kind, PolicyDocument, SecurityDocument, StoredProperties};
use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::{
    page_of, Applied, CatalogRow, DroppedObject, EventRead, IdempotencyRecord, LockedObjects, Page,
    PageRequest, PendingPurge, Store, StoreError, StoreResult, StoredObject, WriteBatch,
    WriteTicket, CATALOG_COLUMNS,
};
use crate::events::StoredEvent;
use crate::model::{CatalogId, CatalogRecord, Ident, Namespace, ObjectKind};

/// Most idle read connections kept open.
const MAX_IDLE_READERS: usize = 16;

#[derive(Clone)]
pub struct SqliteStore {
    path: Arc<Path>,
    writer: Arc<Mutex<Connection>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    committer: Arc<group::GroupCommitter>,
    /// The database's lock and cache, shared by every store this process opens on it.
    exclusive: Arc<Exclusive>,
}

/// The WAL's frames past which checkpoints start unless set (`--wal-checkpoint-frames`).
pub const DEFAULT_WAL_CHECKPOINT_FRAMES: u32 = checkpoint::START_FRAMES;

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date,
    /// with no metadata cache.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        Self::open_with_cache(path, 0)
    }

    /// As [`SqliteStore::open`], keeping up to `cache_bytes` of table and view metadata in
    /// memory for loads. Fails if another process has the database open.
    pub fn open_with_cache(path: &Path, cache_bytes: usize) -> anyhow::Result<Self> {
        let exclusive = Exclusive::acquire(path, cache_bytes)?;
        let mut conn = open_writer(path)?;
        migrate(&mut conn)?;
        let writer = Arc::new(Mutex::new(conn));
        Ok(SqliteStore {
            path: Arc::from(path),
            committer: Arc::new(group::GroupCommitter::start(
                path,
                writer.clone(),
                exclusive.cache.clone(),
                exclusive.journal.clone(),
            )?),
            writer,
            readers: Arc::new(Mutex::new(Vec::new())),
            exclusive,
        })
    }

    /// Sets the WAL's frames past which checkpoints start, for the stores this process
    /// opens from now on (`checkpoint.rs`; at least 1).
    pub fn set_wal_checkpoint_frames(frames: u32) {
        checkpoint::set_start_frames(frames);
    }

    /// Under load, each group stays open for `window` before it commits, so that more
    /// writes share its COMMIT (`group.rs`); zero, the default, commits at once.
    pub fn set_commit_gather(&self, window: std::time::Duration) {
        self.committer.set_gather(window);
    }

    /// A namespace's properties, from the cache or the database. `for_update`: a cached
    /// copy is handed over (`ObjectCache::take_namespace`), and a read does not fill the
    /// cache, so the caller holds the only copy and may change it in place.
    fn namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
        for_update: bool,
    ) -> StoreResult<Option<Arc<StoredProperties>>> {
        let key = namespace.key();
        let cache = &self.exclusive.cache;
        let lookup = match for_update {
            true => cache.take_namespace(catalog, &key),
            false => cache.get_namespace(catalog, &key),
        };
        let ticket = match lookup {
            Lookup::Hit(properties) => return Ok(Some(properties)),
            Lookup::Miss(ticket) => ticket,
        };
        let (id, text) = self.read(|conn| {
            // One query: no row means no catalog, a NULL means no namespace.
            conn.prepare_cached(
                "SELECT c.id, n.properties FROM catalogs c
                 LEFT JOIN namespaces n ON n.catalog_id = c.id AND n.path = ?2
                 WHERE c.name = ?1",
            )
            .and_then(|mut s| {
                s.query_row(params![catalog, key], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, Option<PackedText>>(1)?))
                })
                .optional()
            })
            .map_err(internal)?
            .ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))
        })?;
        let Some(PackedText(text, packed)) = text else {
            return Ok(None);
        };
        let properties = Arc::new(StoredProperties::from_json(text)?);
        // The next update's swap expects these very bytes (`documents::holds`).
        if let Some(packed) = packed {
            properties.keep_packed(packed);
        }
        if !for_update {
            cache.fill_namespace(ticket, catalog, CatalogId(id), namespace, &properties);
        }
        Ok(Some(properties))
    }

    /// The file journal's marks (`journal.rs`), for the syncer of the files it keeps.
    pub fn file_journal(&self) -> Arc<JournalMarks> {
        self.exclusive.journal.clone()
    }

    /// Hands the journal's entries (location, text), oldest first, to `restore`, which
    /// makes each file hold its text durably; then forgets them. Runs before the server
    /// serves, whether or not the journal is on now (it may have been before a crash).
    pub fn restore_file_journal(
        &self,
        restore: impl FnOnce(&[(String, String)]) -> anyhow::Result<usize>,
    ) -> anyhow::Result<usize> {
        let mut conn = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let (last, entries) = journal::entries(&conn)?;
        if entries.is_empty() {
            return Ok(0);
        }
        let rewritten = restore(&entries)?;
        // Only what was restored (a store still open in this process may add entries).
        let tx = conn.transaction()?;
        tx.execute("DELETE FROM file_journal WHERE seq <= ?1", [last])?;
        tx.commit()?;
        Ok(rewritten)
    }

    /// Runs a read on a pooled connection, on the calling thread. Point reads in WAL mode
    /// take microseconds and never wait for the writer, so handing them to a blocking
    /// thread would cost more (a thread wake-up per request) than it protects.
    ///
    /// All of `f`'s statements run in one read transaction, so they see one snapshot (a
    /// list's parent check and its rows agree). It is also cheaper than a transaction per
    /// statement: each one takes and releases a lock on the WAL index (two `fcntl`s) and,
    /// if anything committed meanwhile, throws the connection's page cache away.
    fn read<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let pooled = self.readers.lock().expect("reader pool poisoned").pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => open_connection(&self.path).map_err(open_failed)?,
        };
        let run = |sql: &str| conn.prepare_cached(sql).and_then(|mut s| s.execute([]));
        run("BEGIN").map_err(internal)?;
        let result = f(&conn);
        // A read-only transaction has nothing to commit; ending it releases the snapshot.
        // A connection that could not end it is dropped, not pooled (closing rolls back).
        if let Err(e) = run("COMMIT") {
            return result.and(Err(internal(e)));
        }
        let mut idle = self.readers.lock().expect("reader pool poisoned");
        if idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
        result
    }

    /// Applies a batch atomically, off the async threads (the commit waits for fsync),
    /// in the next group commit (`group`): all of it or nothing, durable when it returns.
    async fn apply(&self, batch: WriteBatch) -> StoreResult<Applied> {
        self.committer.apply(batch).await
    }

    /// Runs `f` in one IMMEDIATE transaction on the writer, on a blocking thread.
    async fn in_transaction<T: Send + 'static>(
        &self,
        f: impl FnOnce(&rusqlite::Transaction) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
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

/// SQLite's error as the store's: running out of a resource (`exhausted`) is
/// `Unavailable` (503, and SQLite rolled the statement or transaction back), anything
/// else `Internal`.
pub(super) fn internal(error: rusqlite::Error) -> StoreError {
    unavailable(&error, &error).unwrap_or_else(|| StoreError::Internal(error.into()))
}

/// `Unavailable`, saying what ran out and then `message`, if `error` is SQLite running
/// out of a resource (`exhausted`); the one place that message is shaped.
pub(super) fn unavailable(
    error: &rusqlite::Error,
    message: impl std::fmt::Display,
) -> Option<StoreError> {
    exhausted(error).map(|why| StoreError::Unavailable(format!("{why}: {message}")))
}

/// What SQLite ran out of, if that is why it failed: the disk (`SQLITE_FULL`: its VFS got
/// `ENOSPC` or a quota), memory (`SQLITE_NOMEM`), or the files it may open
/// (`SQLITE_CANTOPEN`: the database opened at start, so a reader's connection or the
/// WAL's files failing later is most likely the open-file limit; a data directory
/// deleted under the server gives the same code, and the message names the file). Each
/// is the operator's to fix; none is a fault of the request.
pub(super) fn exhausted(error: &rusqlite::Error) -> Option<&'static str> {
    use rusqlite::ErrorCode;
    match error {
        rusqlite::Error::SqliteFailure(e, _) => match e.code {
            ErrorCode::DiskFull => Some("the embedded store's disk is full"),
            ErrorCode::OutOfMemory => Some("the server is out of memory"),
            ErrorCode::CannotOpen => {
                Some("the embedded store cannot open its files (is the open-file limit, `ulimit -n`, reached?)")
            }
            _ => None,
        },
        _ => None,
    }
}

/// A reader's connection that could not be opened (`open_connection`), as `internal`
/// says, with the file it was opening.
fn open_failed(error: anyhow::Error) -> StoreError {
    let full = format!("{error:#}");
    (error.downcast_ref::<rusqlite::Error>())
        .and_then(|sqlite| unavailable(sqlite, full))
        .unwrap_or(StoreError::Internal(error))
}

pub(super) fn is_unique_violation(error: &rusqlite::Error) -> bool {
    matches!(error, rusqlite::Error::SqliteFailure(e, _)
        if e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            || e.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}

fn catalog_id(conn: &Connection, catalog: &str) -> StoreResult<CatalogId> {
    conn.prepare_cached("SELECT id FROM catalogs WHERE name = ?1")
        .and_then(|mut s| s.query_row([catalog], |r| r.get(0)).optional())
        .map_err(internal)?
        .map(CatalogId)
        .ok_or_else(|| StoreError::CatalogMissing(catalog.to_string()))
}

pub(super) fn require_namespace(
    conn: &Connection,
    catalog: CatalogId,
    namespace: &Namespace,
) -> StoreResult<()> {
    if namespace.is_root() {
        return Ok(());
    }
    let exists = conn
        .prepare_cached("SELECT 1 FROM namespaces WHERE catalog_id = ?1 AND path = ?2")
        .and_then(|mut s| s.exists(params![catalog.0, namespace.key()]))
        .map_err(internal)?;
    if exists {
        Ok(())
    } else {
        Err(StoreError::NamespaceMissing(namespace.clone()))
    }
}

/// SQLite's LIMIT for a page: one more than asked, to learn whether more follow.
fn sql_limit(page: &PageRequest) -> i64 {
    page.limit.map(|l| l as i64 + 1).unwrap_or(-1)
}

pub(super) fn catalog_from_row(row: &rusqlite::Row) -> rusqlite::Result<CatalogRow> {
    Ok(CatalogRow {
        id: row.get(0)?,
        name: row.get(1)?,
        properties: row.get(2)?,
        storage_config: row.get(3)?,
        created_ms: row.get(4)?,
        updated_ms: row.get(5)?,
        version: row.get(6)?,
        catalog_type: row.get(7)?,
    })
}

pub(super) fn stored_object(
    kind: String,
    metadata_location: String,
    metadata: String,
) -> StoreResult<StoredObject> {
    Ok(StoredObject {
        kind: stored_kind(&kind)?,
        metadata_location,
        metadata: metadata.into(),
    })
}

/// The embedded store serves one process, whose per-object commit lock already keeps
/// other writers out: "locking" only reads the current state.
struct SqliteLocked {
    store: SqliteStore,
    current: Vec<Option<StoredObject>>,
}

#[async_trait]
impl LockedObjects for SqliteLocked {
    fn current(&self) -> &[Option<StoredObject>] {
        &self.current
    }

    async fn write(self: Box<Self>, batch: WriteBatch) -> StoreResult<Applied> {
        self.store.apply(batch).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        self.read(|conn| conn.query_row("SELECT 1", [], |_| Ok(())).map_err(internal))
    }

    async fn ready(&self) -> StoreResult<()> {
        let applied: usize = self.read(|conn| {
            conn.query_row("PRAGMA user_version", [], |r| r.get(0))
                .map_err(internal)
        })?;
        check_schema(applied, MIGRATIONS.len())
    }

    fn kind(&self) -> &'static str {
        "embedded"
    }

    async fn write(&self, batch: WriteBatch) -> StoreResult<Applied> {
        self.apply(batch).await
    }

    fn enqueue(&self, batch: WriteBatch) -> Result<WriteTicket, Box<WriteBatch>> {
        Ok(self.committer.enqueue(batch))
    }

    async fn lock_objects(
        &self,
        catalog: CatalogId,
        idents: &[Ident],
    ) -> StoreResult<Box<dyn LockedObjects>> {
        let current = self.read(|conn| {
            idents
                .iter()
                .map(|ident| writes::object_at(conn, catalog, ident))
                .collect::<StoreResult<Vec<_>>>()
        })?;
        Ok(Box::new(SqliteLocked {
            store: self.clone(),
            current,
        }))
    }

    async fn get_catalog(&self, name: &str) -> StoreResult<Option<CatalogRecord>> {
        let ticket = match self.exclusive.cache.get_catalog(name) {
            Lookup::Hit(record) => return Ok(Some(record.as_ref().clone())),
            Lookup::Miss(ticket) => ticket,
        };
        let record = self.read(|conn| {
            let row = conn
                .prepare_cached(&format!(
                    "SELECT {CATALOG_COLUMNS} FROM catalogs WHERE name = ?1"
                ))
                .and_then(|mut s| s.query_row([name], catalog_from_row).optional())
                .map_err(internal)?;
            row.map(CatalogRow::into_record).transpose()
        })?;
        if let Some(record) = &record {
            self.exclusive.cache.fill_catalog(ticket, record);
        }
        Ok(record)
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
            rows.into_iter().map(CatalogRow::into_record).collect()
        })
    }

    async fn get_namespace(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Arc<StoredProperties>>> {
        self.namespace(catalog, namespace, false)
    }

    async fn get_namespace_for_update(
        &self,
        catalog: &str,
        namespace: &Namespace,
    ) -> StoreResult<Option<Arc<StoredProperties>>> {
        self.namespace(catalog, namespace, true)
    }

    async fn list_namespaces(
        &self,
        catalog: &str,
        parent: &Namespace,
        page: &PageRequest,
    ) -> StoreResult<Page<Namespace>> {
        let key = ListKey::new(catalog, parent, Listing::Namespaces, page);
        let ticket = match self.exclusive.cache.lists.get(&key) {
            ListLookup::Hit(page) => return Ok(page),
            ListLookup::Miss(ticket) => ticket,
        };
        let listed = self.read(|conn| {
            let id = catalog_id(conn, catalog)?;
            require_namespace(conn, id, parent)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT path FROM namespaces WHERE catalog_id = ?1 AND parent = ?2 AND name > ?3 ORDER BY name LIMIT ?4",
                )
                .map_err(internal)?;
            let after = page.after.as_deref().unwrap_or_default();
            let items = stmt
                .query_map(params![id.0, parent.key(), after, sql_limit(page)], |r| {
                    r.get::<_, String>(0)
                })
                .map_err(internal)?
                .map(|r| r.map(|path| Namespace::from_key(&path)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(internal)?;
            Ok(page_of(items, page, |ns| ns.last().to_string()))
        })?;
        self.exclusive.cache.lists.fill(ticket, key, &listed);
        Ok(listed)
    }

    async fn load_object(&self, catalog: &str, ident: &Ident) -> StoreResult<Option<StoredObject>> {
        let namespace = ident.namespace.key();
        let ticket = match self.exclusive.cache.get(catalog, &namespace, &ident.name) {
            Lookup::Hit(object) => return Ok(Some(object)),
            Lookup::Miss(ticket) => ticket,
        };
        let (id, object) = self.read(|conn| {
            // One query resolves the catalog and the object: no row means no catalog,
            // a row of NULLs means no object.
            type Row = (i64, Option<String>, Option<String>, Option<Document>);
            let row: Option<Row> = conn
                .prepare_cached(
                    "SELECT c.id, o.kind, o.metadata_location, o.metadata FROM catalogs c
                     LEFT JOIN objects o ON o.catalog_id = c.id AND o.namespace = ?2 AND o.name = ?3
                     WHERE c.name = ?1",
                )
                .and_then(|mut s| {
                    s.query_row(params![catalog, namespace, ident.name], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .optional()
                })
                .map_err(internal)?;
            match row {
                None => Err(StoreError::CatalogMissing(catalog.to_string())),
                Some((id, Some(kind), Some(location), Some(metadata))) => {
                    Ok((id, Some(stored_object(kind, location, metadata.0)?)))
                }
                Some((id, ..)) => Ok((id, None)),
            }
        })?;
        if let Some(object) = &object {
            self.exclusive
                .cache
                .fill(ticket, catalog, id, ident, object);
        }
        Ok(object)
    }

    async fn list_objects(
        &self,
        catalog: &str,
        namespace: &Namespace,
        kind: ObjectKind,
        page: &PageRequest,
    ) -> StoreResult<Page<String>> {
        let key = ListKey::new(catalog, namespace, Listing::Objects(kind), page);
        let ticket = match self.exclusive.cache.lists.get(&key) {
            ListLookup::Hit(page) => return Ok(page),
            ListLookup::Miss(ticket) => ticket,
        };
        let listed = self.read(|conn| {
            let id = catalog_id(conn, catalog)?;
            require_namespace(conn, id, namespace)?;
            let mut stmt = conn
                .prepare_cached(
                    "SELECT name FROM objects WHERE catalog_id = ?1 AND namespace = ?2 AND kind = ?3 AND name > ?4 ORDER BY name LIMIT ?5",
                )
                .map_err(internal)?;
            let after = page.after.as_deref().unwrap_or_default();
            let items = stmt
                .query_map(
                    params![id.0, namespace.key(), kind.as_str(), after, sql_limit(page)],
                    |r| r.get(0),
                )
                .map_err(internal)?
                .collect::<Result<Vec<String>, _>>()
                .map_err(internal)?;
            Ok(page_of(items, page, Clone::clone))
        })?;
        self.exclusive.cache.lists.fill(ticket, key, &listed);
        Ok(listed)
    }

    async fn idempotency_record(
        &self,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT key, fingerprint, outcome, expires_ms FROM idempotency_keys
                 WHERE key = ?1 AND expires_ms >= ?2",
            )
            .and_then(|mut s| {
                s.query_row(params![key, now_ms], |r| {
                    Ok(IdempotencyRecord {
                        key: r.get(0)?,
                        fingerprint: r.get(1)?,
                        outcome: r.get(2)?,
                        expires_ms: r.get(3)?,
                    })
                })
                .optional()
            })
            .map_err(internal)
        })
    }

    async fn purge_expired_idempotency(&self, now_ms: i64) -> StoreResult<u64> {
        let writer = self.writer.clone();
        tokio::task::spawn_blocking(move || {
            let conn = writer.lock().expect("writer poisoned");
            conn.execute(
                "DELETE FROM idempotency_keys WHERE expires_ms < ?1",
                [now_ms],
            )
            .map(|n| n as u64)
            .map_err(internal)
        })
        .await
        .map_err(|e| StoreError::Internal(e.into()))?
    }

    async fn list_dropped(&self, catalog: &str) -> StoreResult<Vec<DroppedObject>> {
        self.read(|conn| dropped::list(conn, catalog_id(conn, catalog)?))
    }

    async fn overlapping_object(
        &self,
        catalog: CatalogId,
        location: &str,
        ident: &Ident,
    ) -> StoreResult<Option<Ident>> {
        self.read(|conn| writes::overlapping_object(conn, catalog, location, ident))
    }

    async fn staged_holds(
        &self,
        catalog: CatalogId,
        ident: &Ident,
        now_ms: i64,
    ) -> StoreResult<Vec<crate::store::reservations::Reservation>> {
        self.read(|conn| reserved::staged(conn, catalog, ident, now_ms))
    }

    async fn get_dropped(&self, id: &str) -> StoreResult<Option<DroppedObject>> {
        self.read(|conn| dropped::get(conn, id))
    }

    async fn expired_dropped(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<DroppedObject>> {
        self.read(|conn| dropped::expired(conn, now_ms, limit))
    }

    async fn due_purges(&self, now_ms: i64, limit: usize) -> StoreResult<Vec<PendingPurge>> {
        self.read(|conn| dropped::due_purges(conn, now_ms, limit))
    }

    async fn read_events(&self, read: &EventRead) -> StoreResult<Vec<StoredEvent>> {
        self.read(|conn| outbox::read(conn, read))
    }

    async fn event_bounds(&self) -> StoreResult<(i64, i64)> {
        self.read(outbox::bounds)
    }

    async fn claim_relay(
        &self,
        name: &str,
        holder: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<Option<i64>> {
        let (name, holder) = (name.to_string(), holder.to_string());
        self.in_transaction(move |tx| outbox::claim(tx, &name, &holder, now_ms, until_ms))
            .await
    }

    async fn confirm_relay(
        &self,
        name: &str,
        holder: &str,
        position: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        let (name, holder) = (name.to_string(), holder.to_string());
        self.in_transaction(move |tx| outbox::confirm(tx, &name, &holder, position, until_ms))
            .await
    }

    async fn purge_events(&self, before_ms: i64) -> StoreResult<u64> {
        self.in_transaction(move |tx| outbox::purge(tx, before_ms))
            .await
    }

    async fn security(&self) -> StoreResult<SecurityDocument> {
        self.read(|conn| {
            let row: Option<(i64, String)> = conn
                .prepare_cached("SELECT version, document FROM security WHERE id = 1")
                .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).optional())
                .map_err(internal)?;
            let (version, document) = row.unwrap_or((0, "{}".into()));
            Ok(SecurityDocument { version, document })
        })
    }

    async fn security_version(&self) -> StoreResult<i64> {
        self.read(|conn| {
            conn.prepare_cached("SELECT version FROM security WHERE id = 1")
                .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
                .map(|v| v.unwrap_or(0))
                .map_err(internal)
        })
    }

    async fn policies(&self, catalog: CatalogId) -> StoreResult<PolicyDocument> {
        self.read(move |conn| {
            let row: Option<(i64, String)> = conn
                .prepare_cached("SELECT version, document FROM policies WHERE catalog_id = ?1")
                .and_then(|mut s| {
                    s.query_row([catalog.0], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(internal)?;
            let (version, document) = row.unwrap_or((0, "{}".into()));
            Ok(PolicyDocument { version, document })
        })
    }

    async fn notification_stamp(
        &self,
        catalog: CatalogId,
        ident: &Ident,
    ) -> StoreResult<Option<i64>> {
        let (ns, name) = (ident.namespace.key(), ident.name.clone());
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT timestamp_ms FROM notification_stamps
                 WHERE catalog_id = ?1 AND namespace = ?2 AND name = ?3",
            )
            .and_then(|mut s| {
                s.query_row(params![catalog.0, ns, name], |r| r.get(0))
                    .optional()
            })
            .map_err(internal)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{checkpoint, open_connection, SqliteStore};
    use rusqlite::params;

    use crate::model::{CatalogId, Ident, Namespace, ObjectKind};
    use crate::store::{Mutation, ObjectWrite, Store, StoreError, WriteBatch};

    const C: CatalogId = CatalogId(7);

    fn table() -> Ident {
        Ident::new(Namespace::root().child("db"), "t".into()).unwrap()
    }

    fn location(n: u32) -> String {
        format!("file:///wh/t/metadata/{n:05}.json")
    }

    /// Table `t`'s version `n` (0 creates it).
    fn version(n: u32) -> ObjectWrite {
        ObjectWrite {
            ident: table(),
            kind: ObjectKind::Table,
            expected_metadata_location: n.checked_sub(1).map(location),
            metadata_location: location(n),
            metadata: format!("{{\"v\":{n}}}"),
            location: "file:///wh/t/".into(),
            check_location: n == 0,
        }
    }

    fn commit(n: u32) -> Mutation {
        Mutation::CommitObjects {
            catalog: C,
            writes: vec![version(n)],
        }
    }

    /// Table `t`'s metadata pointer as the database at `path` holds it.
    fn pointer_of_t(path: &std::path::Path) -> String {
        open_connection(path)
            .unwrap()
            .query_row(
                "SELECT metadata_location FROM objects WHERE name = 't'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    }

    /// The creation of table `name` beside `t`.
    fn other(name: &str) -> Mutation {
        let mut write = version(0);
        write.ident = Ident::new(Namespace::root().child("db"), name.into()).unwrap();
        write.metadata_location = format!("file:///wh/{name}/metadata/00000.json");
        write.location = format!("file:///wh/{name}/");
        Mutation::CommitObjects {
            catalog: C,
            writes: vec![write],
        }
    }

    /// `mutation` with its new metadata files kept by the file journal.
    fn journaled(mutation: Mutation) -> WriteBatch {
        let mut batch = WriteBatch::new(mutation, 0);
        batch.journal_files = true;
        batch
    }

    /// The journal's entries, as a restore is handed them (which forgets them).
    fn restored(store: &SqliteStore) -> Vec<(String, String)> {
        let mut kept = Vec::new();
        store
            .restore_file_journal(|entries| {
                kept = entries.to_vec();
                Ok(0)
            })
            .unwrap();
        kept
    }

    /// Catalog `c` with namespace `db`.
    async fn catalog(store: &SqliteStore) {
        let record = crate::model::CatalogRecord {
            id: C,
            name: "c".into(),
            catalog_type: Default::default(),
            properties: Default::default(),
            storage_config: serde_json::json!({"storageType": "FILE"}),
            connection: None,
            created_ms: 0,
            updated_ms: 0,
            version: 1,
        };
        for mutation in [
            Mutation::CreateCatalog(record),
            Mutation::CreateNamespace {
                catalog: C,
                namespace: Namespace::root().child("db"),
                properties: Default::default(),
            },
        ] {
            store.write(WriteBatch::new(mutation, 0)).await.unwrap();
        }
    }

    /// A store in a new directory (kept while the returned guard lives), with catalog `c`
    /// and its namespace `db`; and the database's path, for a second connection.
    async fn fresh_store() -> (tempfile::TempDir, std::path::PathBuf, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.db");
        let store = SqliteStore::open(&path).unwrap();
        catalog(&store).await;
        (dir, path, store)
    }

    #[tokio::test]
    async fn stores_on_one_database_in_one_process_share_its_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.db");
        let a = SqliteStore::open_with_cache(&path, 1 << 20).unwrap();
        let b = SqliteStore::open_with_cache(&path, 1 << 20).unwrap();
        assert!(std::sync::Arc::ptr_eq(&a.exclusive, &b.exclusive));
        catalog(&a).await;
        a.write(WriteBatch::new(commit(0), 0)).await.unwrap();
        // `a` caches version 0, `b` commits version 1: `a` loads version 1.
        let loaded = a.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata_location, location(0));
        b.write(WriteBatch::new(commit(1), 0)).await.unwrap();
        let loaded = a.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata_location, location(1));
    }

    /// The checkpoint thread's database sync leaves the process's POSIX locks on the
    /// database in place: SQLite holds a shared lock there for as long as a connection is
    /// open, and closing any descriptor of the file would drop it (another process would
    /// then believe itself the last connection, and delete the WAL Floe commits into).
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn background_passes_keep_the_process_lock_on_the_database() {
        use std::os::unix::fs::MetadataExt;
        use std::sync::atomic::Ordering;
        let (_dir, path, store) = fresh_store().await;
        // /proc/locks names a file as MAJOR:MINOR:INODE; the inode is enough here (the
        // device's numbers as the kernel prints them can differ from stat's on overlays).
        let id = format!(":{}", std::fs::metadata(&path).unwrap().ino());
        let pid = std::process::id().to_string();
        let held = || {
            std::fs::read_to_string("/proc/locks")
                .unwrap()
                .lines()
                .any(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    fields.get(1) == Some(&"POSIX")
                        && fields.get(4) == Some(&pid.as_str())
                        && fields.get(5).is_some_and(|file| file.ends_with(&id))
                })
        };
        assert!(held(), "no lock of this process on {id} before any pass");
        store.committer.set_checkpoint_start(20);
        let counts = &store.committer.checkpoints;
        let mut n = 0;
        while counts.background.load(Ordering::Relaxed) < 2 {
            store.write(WriteBatch::new(commit(n), 0)).await.unwrap();
            n += 1;
            assert!(n < 5_000, "no background pass after {n} commits");
        }
        assert!(held(), "the lock on {id} went with a background pass");
    }

    /// Checkpoints run on their thread and as a tail after a group, never inside a
    /// COMMIT, and the WAL still starts over: its frames stay bounded under steady writes.
    #[tokio::test]
    async fn checkpoints_run_off_the_commit_and_the_wal_starts_over() {
        use std::sync::atomic::Ordering;
        let (_dir, path, store) = fresh_store().await;
        store.committer.set_checkpoint_start(20);
        let commits = 400;
        for n in 0..commits {
            store.write(WriteBatch::new(commit(n), 0)).await.unwrap();
        }
        let counts = &store.committer.checkpoints;
        assert!(counts.background.load(Ordering::Relaxed) >= 2);
        assert!(counts.tails.load(Ordering::Relaxed) >= 1);
        assert_eq!(counts.inline.load(Ordering::Relaxed), 0);
        // Each commit appends a few frames (the object's row, its index, the outbox):
        // a WAL never started over would hold well over a thousand.
        // The pragma answers -1 while the checkpoint thread holds the checkpoint lock
        // (its pass may still be running): ask again until it can look.
        let conn = open_connection(&path).unwrap();
        let mut frames: i64 = -1;
        for _ in 0..500 {
            frames = conn
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
                .unwrap();
            if frames >= 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!((0..300).contains(&frames), "{frames} frames in the WAL");
        // Read from the database: the last commit is there, whole.
        let loaded = store.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata_location, location(commits - 1));
        drop(store);
        let reopened = SqliteStore::open(&path).unwrap();
        let loaded = reopened.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata_location, location(commits - 1));
    }

    /// The writer's commits from other threads than the commit thread (relay leases,
    /// purges) start no pass of the checkpoint thread; past the threshold they checkpoint
    /// themselves, so a server with only those writes still starts its WAL over.
    #[tokio::test]
    async fn other_threads_commits_checkpoint_the_wal_themselves() {
        let (_dir, path, store) = fresh_store().await;
        let writer = store.writer.clone();
        let frames = std::thread::spawn(move || {
            let conn = writer.lock().unwrap();
            conn.execute_batch("CREATE TABLE filler (b BLOB)").unwrap();
            // About 257 frames a commit (a MiB of overflow pages): 80 take the WAL past
            // START_FRAMES once.
            let mut most = 0;
            for _ in 0..80 {
                conn.execute("INSERT INTO filler VALUES (zeroblob(1048576))", [])
                    .unwrap();
                most = most.max(checkpoint::wal_frames());
            }
            (most, checkpoint::wal_frames())
        })
        .join()
        .unwrap();
        let (most, last) = frames;
        assert!(
            most >= checkpoint::START_FRAMES,
            "the WAL reached {most} frames"
        );
        assert!(
            last < checkpoint::START_FRAMES,
            "the WAL never started over: {last} frames"
        );
        // Nothing was lost on the way.
        let conn = open_connection(&path).unwrap();
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM filler", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 80);
    }

    #[tokio::test]
    async fn the_file_journal_keeps_texts_until_a_round_covers_them() {
        let (_dir, _, store) = fresh_store().await;
        let marks = store.file_journal();
        for n in 0..3 {
            store.write(journaled(commit(n))).await.unwrap();
        }
        // A refused commit keeps nothing.
        assert!(store.write(journaled(commit(1))).await.is_err());
        assert_eq!(marks.committed(), 3);
        // Rounds covered the first two: the next group deletes them.
        marks.mark_synced(2);
        store.write(journaled(commit(3))).await.unwrap();
        let kept = restored(&store);
        let expected = |n: u32| (location(n), format!("{{\"v\":{n}}}"));
        // Version 2's text was copied when version 3 replaced it in the row; version 3's
        // is still the row's.
        assert_eq!(kept, vec![expected(2), expected(3)]);
        // Restored entries are forgotten.
        assert_eq!(restored(&store), vec![]);
    }

    /// A group is applied without a savepoint per batch first; one whose batch fails is
    /// applied again with them. Either way, the failing batches fail alone, with nothing of
    /// theirs kept, and the others commit with their events.
    #[tokio::test]
    async fn in_a_group_failing_batches_fail_alone_and_the_rest_commits() {
        use crate::events::{ChangeEvent, Operation};
        let (_dir, path, store) = fresh_store().await;
        store.write(WriteBatch::new(commit(0), 0)).await.unwrap();
        let with_event = |mutation: Mutation, entity: &str| {
            let mut batch = WriteBatch::new(mutation, 0);
            batch.events = vec![ChangeEvent {
                catalog_id: C,
                entity: entity.to_string(),
                operation: Operation::UpdateTable,
                time_ms: 0,
                id: format!("{entity}-event"),
                body: "{}".into(),
            }];
            batch
        };
        // With the writer held, the commit thread takes the first batch and waits; the
        // ones queued meanwhile form the next group, in this order.
        let held = store.writer.lock().unwrap();
        let lead = store.committer.enqueue(with_event(other("lead"), "lead"));
        std::thread::sleep(std::time::Duration::from_millis(100));
        let group = [
            store.committer.enqueue(with_event(commit(1), "t1")),
            store.committer.enqueue(with_event(commit(1), "stale")), // t is at 1 by then
            store.committer.enqueue(with_event(other("u"), "u")),
            store.committer.enqueue(with_event(other("u"), "taken")), // u exists by then
            store.committer.enqueue(with_event(commit(2), "t2")),
        ];
        drop(held);
        lead.await.unwrap();
        let mut outcomes = Vec::new();
        for ticket in group {
            outcomes.push(ticket.await);
        }
        assert!(outcomes[0].is_ok() && outcomes[2].is_ok() && outcomes[4].is_ok());
        assert!(
            matches!(outcomes[1], Err(StoreError::Conflict)),
            "{:?}",
            outcomes[1]
        );
        assert!(
            matches!(outcomes[3], Err(StoreError::ObjectExists { .. })),
            "{:?}",
            outcomes[3]
        );
        let conn = open_connection(&path).unwrap();
        let events: Vec<(i64, String)> = conn
            .prepare("SELECT position, entity FROM events ORDER BY position")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let expected = [(1, "lead"), (2, "t1"), (3, "u"), (4, "t2")];
        let expected: Vec<(i64, String)> =
            expected.iter().map(|(p, e)| (*p, e.to_string())).collect();
        assert_eq!(events, expected);
        assert_eq!(pointer_of_t(&path), location(2));
    }

    /// Under load a group stays open for the gather window after applying the batches it
    /// started with: those that arrive meanwhile join it, after them and in order, and
    /// one of them that fails still fails alone (the group then runs again with a
    /// savepoint per batch, the first part included).
    #[tokio::test]
    async fn batches_that_arrive_in_the_gather_window_join_the_open_group() {
        use std::sync::atomic::Ordering;
        use std::time::Duration;
        let (_dir, path, store) = fresh_store().await;
        store.write(WriteBatch::new(commit(0), 0)).await.unwrap();
        store.set_commit_gather(Duration::from_millis(1000));
        // Two batches queued behind a held writer make a group of two: the group after
        // it is taken under load, with the window.
        let held = store.writer.lock().unwrap();
        let lead = store.committer.enqueue(WriteBatch::new(other("a"), 0));
        std::thread::sleep(Duration::from_millis(100));
        let pair = [
            store.committer.enqueue(WriteBatch::new(other("b"), 0)),
            store.committer.enqueue(WriteBatch::new(other("c"), 0)),
        ];
        drop(held);
        lead.await.unwrap();
        for ticket in pair {
            ticket.await.unwrap();
        }
        let groups = || store.committer.groups.load(Ordering::Relaxed);
        let before = groups();
        let first = store.committer.enqueue(WriteBatch::new(commit(1), 0));
        // Inside the window: the group is open (its transaction holds the writer), its
        // first batch applied. Waited for, not assumed after a fixed sleep.
        let opened = std::time::Instant::now();
        while store.writer.try_lock().is_ok() {
            assert!(
                opened.elapsed() < Duration::from_millis(700),
                "the group does not wait with its transaction open"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let late = [
            store.committer.enqueue(WriteBatch::new(commit(1), 0)), // t is at 1 by then
            store.committer.enqueue(WriteBatch::new(commit(2), 0)),
            store.committer.enqueue(WriteBatch::new(other("d"), 0)),
        ];
        first.await.unwrap();
        let mut outcomes = Vec::new();
        for ticket in late {
            outcomes.push(ticket.await);
        }
        assert!(
            matches!(outcomes[0], Err(StoreError::Conflict)),
            "{:?}",
            outcomes[0]
        );
        assert!(outcomes[1].is_ok() && outcomes[2].is_ok(), "{outcomes:?}");
        assert_eq!(
            groups() - before,
            1,
            "the late batches had a group of their own"
        );
        let conn = open_connection(&path).unwrap();
        assert_eq!(pointer_of_t(&path), location(2));
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM objects", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 5, "t, a, b, c and d");
    }

    /// Out of memory or of files to open is a 503 like a full disk, naming what ran
    /// out; other failures stay internal. The codes are SQLite's own (lowering the
    /// open-file limit for real would starve every other test in this process); the
    /// last case is a real `SQLITE_CANTOPEN`, from a reader's connection SQLite could
    /// not open, through the path a read takes.
    #[test]
    fn running_out_of_memory_or_files_is_unavailable() {
        let failure = |code| rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None);
        for (code, why) in [
            (rusqlite::ffi::SQLITE_FULL, "disk is full"),
            (rusqlite::ffi::SQLITE_NOMEM, "out of memory"),
            (rusqlite::ffi::SQLITE_CANTOPEN, "open-file limit"),
        ] {
            match super::internal(failure(code)) {
                StoreError::Unavailable(message) => assert!(message.contains(why), "{message}"),
                other => panic!("{code}: {other:?}"),
            }
        }
        for code in [rusqlite::ffi::SQLITE_IOERR, rusqlite::ffi::SQLITE_CORRUPT] {
            assert!(
                matches!(super::internal(failure(code)), StoreError::Internal(_)),
                "{code}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone").join("catalog.db");
        let error = open_connection(&gone)
            .map_err(super::open_failed)
            .err()
            .unwrap();
        match error {
            StoreError::Unavailable(message) => {
                assert!(message.contains("catalog.db"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    /// A database that cannot grow (SQLite's own `SQLITE_FULL`, here from a page limit as
    /// from a full disk) refuses the write as `Unavailable` (503), keeps nothing of it,
    /// and takes the same write once there is room again.
    #[tokio::test]
    async fn a_full_database_refuses_a_write_as_unavailable_and_keeps_nothing() {
        let (_dir, path, store) = fresh_store().await;
        store.write(WriteBatch::new(commit(0), 0)).await.unwrap();
        // At most `pages` pages, or as many as the database has now (`None`).
        let limit = |pages: Option<i64>| {
            let writer = store.writer.lock().unwrap();
            let pages = pages.unwrap_or_else(|| {
                writer
                    .query_row("PRAGMA page_count", [], |r| r.get(0))
                    .unwrap()
            });
            writer
                .execute_batch(&format!("PRAGMA max_page_count = {pages}"))
                .unwrap();
        };
        // A document of ~400 KB that lz4 cannot shrink much: it needs new pages.
        let big = || {
            let mut write = version(1);
            let noise: String = (0..50_000u64)
                .map(|i| format!("{:08x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32))
                .collect();
            write.metadata = format!("{{\"v\":1,\"noise\":\"{noise}\"}}");
            WriteBatch::new(
                Mutation::CommitObjects {
                    catalog: C,
                    writes: vec![write],
                },
                0,
            )
        };
        limit(None);
        match store.write(big()).await {
            Err(StoreError::Unavailable(message)) => {
                assert!(message.contains("disk is full"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let pointer = || pointer_of_t(&path);
        assert_eq!(pointer(), location(0));
        let loaded = store.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata_location, location(0));
        limit(Some(1_073_741_823));
        store.write(big()).await.unwrap();
        assert_eq!(pointer(), location(1));
    }

    #[tokio::test]
    async fn a_commit_that_keeps_the_location_still_swaps_a_row_holding_another_form_of_it() {
        let (_dir, path, store) = fresh_store().await;
        store.write(WriteBatch::new(commit(0), 0)).await.unwrap();
        store.write(WriteBatch::new(commit(1), 0)).await.unwrap();
        let conn = open_connection(&path).unwrap();
        let row = || -> (String, String) {
            conn.query_row("SELECT metadata_location, location FROM objects", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap()
        };
        assert_eq!(row(), (location(1), "file:///wh/t/".to_string()));
        // The row's location as another version might have written it: the commit (which
        // says the location is unchanged) still swaps, and writes the location it names.
        conn.execute("UPDATE objects SET location = 'file:/wh/t/'", [])
            .unwrap();
        store.write(WriteBatch::new(commit(2), 0)).await.unwrap();
        assert_eq!(row(), (location(2), "file:///wh/t/".to_string()));
        // A stale expectation is still a conflict on either path, and changes nothing.
        for stored_location in ["file:///wh/t/", "file:/wh/t/"] {
            conn.execute("UPDATE objects SET location = ?1", [stored_location])
                .unwrap();
            let stale = store.write(WriteBatch::new(commit(2), 0)).await;
            assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
            assert_eq!(row(), (location(2), stored_location.to_string()));
        }
    }

    #[tokio::test]
    async fn large_documents_are_kept_packed_and_read_back_whole() {
        let (_dir, path, store) = fresh_store().await;
        // A metadata log's worth of locations: text far past a page, and repetitive.
        let document = |n: u32| {
            let log: Vec<String> = (0..100).map(|i| format!("\"{}\"", location(i))).collect();
            format!("{{\"v\":{n},\"metadata-log\":[{}]}}", log.join(","))
        };
        // Version `n` of the table, with that document.
        let commit = |n: u32| {
            let mut write = version(n);
            write.metadata = document(n);
            Mutation::CommitObjects {
                catalog: C,
                writes: vec![write],
            }
        };
        store.write(journaled(commit(0))).await.unwrap();
        let conn = open_connection(&path).unwrap();
        let (kind, stored): (String, i64) = conn
            .query_row(
                "SELECT typeof(metadata), length(metadata) FROM objects",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(kind, "blob");
        assert!(stored * 4 < document(0).len() as i64, "{stored} bytes kept");
        // Read back through the store's own queries (the cache is off): the load, and the
        // commit's compare-and-swap that replaces it.
        let loaded = store.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata, document(0));
        store.write(journaled(commit(1))).await.unwrap();
        // The journal's trigger copied version 0's packed form; a restore unpacks both.
        assert_eq!(
            restored(&store),
            vec![(location(0), document(0)), (location(1), document(1))]
        );
        // A drop hands back the document, and undrop's record keeps it.
        let drop = Mutation::DropObject {
            catalog: C,
            kind: ObjectKind::Table,
            ident: table(),
            expected: location(1),
            retain: None,
        };
        match store.write(WriteBatch::new(drop, 0)).await.unwrap() {
            crate::store::Applied::Dropped(object) => assert_eq!(object.metadata, document(1)),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn large_namespace_properties_are_packed_and_swapped_on_their_text() {
        let (_dir, path, store) = fresh_store().await;
        let db = Namespace::root().child("db");
        let properties = |n: usize| -> crate::model::Properties {
            (0..n)
                .map(|i| (format!("UpdatedAttribute_{i}"), i.to_string()))
                .collect()
        };
        let stored = |n: usize| crate::store::StoredProperties::new(properties(n));
        let update = |from: usize, to: usize| {
            Mutation::update_namespace(C, db.clone(), &stored(from), properties(to))
        };
        store
            .write(WriteBatch::new(update(0, 400), 0))
            .await
            .unwrap();
        let conn = open_connection(&path).unwrap();
        let kept = || -> (String, i64) {
            conn.query_row(
                "SELECT typeof(properties), length(properties) FROM namespaces",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
        };
        let (kind, bytes) = kept();
        assert_eq!(kind, "blob");
        assert!(bytes < 4096, "{bytes} bytes kept");
        // The next swap compares against the packed value's text.
        store
            .write(WriteBatch::new(update(400, 401), 0))
            .await
            .unwrap();
        // A stale expectation is a conflict, and changes nothing.
        let stale = store.write(WriteBatch::new(update(400, 402), 0)).await;
        assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
        let read = store.get_namespace("c", &db).await.unwrap().unwrap();
        assert_eq!(*read, stored(401));
        // A namespace that does not exist is missing, not a conflict.
        let gone = Mutation::update_namespace(
            C,
            Namespace::root().child("gone"),
            &stored(0),
            properties(1),
        );
        let missing = store.write(WriteBatch::new(gone, 0)).await;
        assert!(
            matches!(missing, Err(StoreError::NamespaceMissing(_))),
            "{missing:?}"
        );
    }

    #[tokio::test]
    async fn a_journaled_text_survives_its_row_renamed_or_dropped() {
        let (_dir, _, store) = fresh_store().await;
        store.write(journaled(commit(0))).await.unwrap();
        let renamed = Ident::new(Namespace::root().child("db"), "u".into()).unwrap();
        let rename = Mutation::RenameObject {
            catalog: C,
            kind: ObjectKind::Table,
            from: table(),
            to: renamed.clone(),
            expected: location(0),
        };
        store.write(WriteBatch::new(rename, 0)).await.unwrap();
        // A second table, journaled, then dropped.
        let mut other = version(0);
        other.ident = Ident::new(Namespace::root().child("db"), "o".into()).unwrap();
        other.metadata_location = "file:///wh/o/metadata/00000.json".into();
        other.metadata = "{\"o\":0}".into();
        other.location = "file:///wh/o/".into();
        let commit_other = Mutation::CommitObjects {
            catalog: C,
            writes: vec![other.clone()],
        };
        store.write(journaled(commit_other)).await.unwrap();
        let drop = Mutation::DropObject {
            catalog: C,
            kind: ObjectKind::Table,
            ident: other.ident.clone(),
            expected: other.metadata_location.clone(),
            retain: None,
        };
        store.write(WriteBatch::new(drop, 0)).await.unwrap();
        let kept = restored(&store);
        assert_eq!(
            kept,
            vec![
                (location(0), "{\"v\":0}".to_string()),
                (other.metadata_location, other.metadata),
            ]
        );
    }

    #[tokio::test]
    async fn namespaces_survive_their_rebuild_as_a_rowid_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.db");
        // A database as the release before the rebuild left it, with a namespace whose
        // properties overflow a page and a table in it.
        let before = 9;
        assert!(super::MIGRATIONS[before].contains("namespaces_by_rowid"));
        {
            let conn = open_connection(&path).unwrap();
            for (i, migration) in super::MIGRATIONS[..before].iter().enumerate() {
                conn.execute_batch(migration).unwrap();
                conn.execute_batch(&format!("PRAGMA user_version = {}", i + 1))
                    .unwrap();
            }
            let big = format!("{{\"k\":\"{}\"}}", "v".repeat(20_000));
            conn.execute_batch(&format!(
                "INSERT INTO catalogs VALUES (7, 'c', '{{}}', '{{}}', 0, 0, 1);
                 INSERT INTO namespaces VALUES (7, 'db', '', 'db', '{big}');
                 INSERT INTO objects VALUES (7, 'db', 't', 'table', 'm0', '{{}}', 'file:///wh/t');"
            ))
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let db = Namespace::root().child("db");
        let properties = store.get_namespace("c", &db).await.unwrap().unwrap();
        assert_eq!(properties.get("k").map(String::len), Some(20_000));
        let loaded = store.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(loaded.metadata_location, "m0");
        let conn = open_connection(&path).unwrap();
        // The objects' foreign key still holds against the rebuilt table.
        let orphan = conn.execute(
            "INSERT INTO objects VALUES (7, 'gone', 't', 'table', 'm0', '{}', 'file:///wh/g')",
            [],
        );
        assert!(
            orphan.is_err(),
            "an object outside any namespace was accepted"
        );
        // An existence check reads the key's index alone, never the properties.
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT 1 FROM namespaces WHERE catalog_id = 7 AND path = 'db'",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("COVERING INDEX"), "{plan}");
    }

    #[tokio::test]
    async fn objects_and_their_journal_triggers_survive_the_generic_table_rebuild() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("catalog.db");
        // The migration that rebuilt the table (later ones run after it too).
        let before = super::MIGRATIONS
            .iter()
            .position(|m| m.contains("'generic-table'"))
            .unwrap();
        {
            let conn = open_connection(&path).unwrap();
            for (i, migration) in super::MIGRATIONS[..before].iter().enumerate() {
                conn.execute_batch(migration).unwrap();
                conn.execute_batch(&format!("PRAGMA user_version = {}", i + 1))
                    .unwrap();
            }
            // A table whose metadata file is journaled by reference to its row.
            conn.execute_batch(
                "INSERT INTO catalogs VALUES (7, 'c', '{}', '{}', 0, 0, 1);
                 INSERT INTO namespaces (catalog_id, path, parent, name, properties)
                     VALUES (7, 'db', '', 'db', '{}');
                 INSERT INTO objects VALUES (7, 'db', 't', 'table', 'm0', '{\"v\":0}', 'file:///wh/t/');
                 INSERT INTO file_journal (location, metadata, catalog_id, namespace, name)
                     VALUES ('m0', NULL, 7, 'db', 't');",
            )
            .unwrap();
            let refused = conn.execute(
                "INSERT INTO objects VALUES (7, 'db', 'g', 'generic-table', 'g0', '{}', '')",
                [],
            );
            assert!(refused.is_err(), "the old schema took a generic table");
        }
        let store = SqliteStore::open(&path).unwrap();
        let loaded = store.load_object("c", &table()).await.unwrap().unwrap();
        assert_eq!(
            (loaded.kind, loaded.metadata_location.as_str()),
            (ObjectKind::Table, "m0")
        );
        let conn = open_connection(&path).unwrap();
        conn.execute(
            "INSERT INTO objects VALUES (7, 'db', 'g', 'generic-table', 'g0', '{}', '')",
            [],
        )
        .unwrap();
        // The triggers came back with the table: moving the row on hands its text to
        // the journal entry that named it.
        conn.execute(
            "UPDATE objects SET metadata_location = 'm1' WHERE name = 't'",
            [],
        )
        .unwrap();
        let journaled: Option<String> = conn
            .query_row(
                "SELECT metadata FROM file_journal WHERE location = 'm0'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(journaled.as_deref(), Some("{\"v\":0}"));
        // And the foreign key to the namespaces still holds.
        let orphan = conn.execute(
            "INSERT INTO objects VALUES (7, 'gone', 't', 'table', 'm0', '{}', 'file:///wh/g/')",
            [],
        );
        assert!(
            orphan.is_err(),
            "an object outside any namespace was accepted"
        );
    }

    #[test]
    fn a_savepoint_keeps_its_sub_journal_in_memory() {
        // SQLite names its temporary files `etilqs_*` and unlinks them at once; a spilled
        // sub-journal would show as such an open file of this process.
        let temp_files = || {
            std::fs::read_dir("/proc/self/fd")
                .unwrap()
                .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().contains("etilqs_"))
                .count()
        };
        let dir = tempfile::tempdir().unwrap();
        let mut conn = open_connection(&dir.path().join("q.db")).unwrap();
        conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
            .unwrap();
        for k in 0..100 {
            conn.execute("INSERT INTO t VALUES (?1, zeroblob(4000))", [k])
                .unwrap();
        }
        let tx = conn.transaction().unwrap();
        tx.execute_batch("SAVEPOINT batch").unwrap();
        // About 100 pages that existed before the transaction: far past the 64 KiB a
        // sub-journal keeps in memory by default.
        tx.execute("UPDATE t SET v = zeroblob(4001)", []).unwrap();
        assert_eq!(temp_files(), 0, "the sub-journal spilled to a file");
        tx.execute_batch("RELEASE batch").unwrap();
        tx.commit().unwrap();
    }

    #[test]
    fn a_statement_with_a_bound_limit_is_prepared_once() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_connection(&dir.path().join("q.db")).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (k TEXT PRIMARY KEY); INSERT INTO t VALUES ('a'), ('b');",
        )
        .unwrap();
        for limit in 1..4 {
            let mut stmt = conn
                .prepare_cached("SELECT k FROM t WHERE k > ?1 ORDER BY k LIMIT ?2")
                .unwrap();
            let rows: Vec<String> = stmt
                .query_map(params!["", limit], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(rows.len(), limit.min(2) as usize);
            let reprepared = stmt.get_status(rusqlite::StatementStatus::RePrepare);
            assert_eq!(reprepared, 0, "prepared again after binding limit {limit}");
        }
    }
}
