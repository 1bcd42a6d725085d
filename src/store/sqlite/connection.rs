//! Opening the database: the one-process lock that makes the caches valid, and the
//! writer's and readers' connections with the settings every one of them runs with.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use rusqlite::{Connection, OpenFlags};

use super::cache::ObjectCache;
use super::checkpoint;
use super::journal::JournalMarks;
use super::wal_buffer;

/// What makes the metadata cache valid: an exclusive lock on `<database>.lock`, held by
/// one process at a time and released when it ends (however it ends), and the one cache
/// of the database in that process. Two servers on one data directory would each trust
/// a cache the other makes stale, so a second process is refused; stores opened on the
/// same database inside one process (a test restarting a server) share the lock and the
/// cache, whose protocol (`cache.rs`) holds for several commit threads.
pub(super) struct Exclusive {
    _lock: std::fs::File,
    pub(super) cache: Arc<ObjectCache>,
    /// The file journal's marks, shared with the storage layer's syncer.
    pub(super) journal: Arc<JournalMarks>,
}

/// The databases this process holds, by their lock file's canonical path.
type Held = Vec<(std::path::PathBuf, std::sync::Weak<Exclusive>)>;
static HELD: Mutex<Held> = Mutex::new(Vec::new());

impl Exclusive {
    pub(super) fn acquire(path: &Path, cache_bytes: usize) -> anyhow::Result<Arc<Exclusive>> {
        let lock_path = path.with_extension("db.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        let key = lock_path
            .canonicalize()
            .with_context(|| format!("resolving {}", lock_path.display()))?;
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        held.retain(|(_, weak)| weak.strong_count() > 0);
        let shared = held
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade());
        if let Some(shared) = shared {
            return Ok(shared);
        }
        let exclusive = Arc::new(Exclusive {
            _lock: lock_exclusively(file, path)?,
            cache: Arc::new(ObjectCache::new(cache_bytes)),
            journal: Arc::default(),
        });
        held.push((key, Arc::downgrade(&exclusive)));
        Ok(exclusive)
    }
}

fn lock_exclusively(file: std::fs::File, path: &Path) -> anyhow::Result<std::fs::File> {
    let lock_path = path.with_extension("db.lock");
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{} is in use by another Floe process (one server per data directory; \
             several nodes share a PostgreSQL database instead)",
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", lock_path.display()))
        }
    }
}

/// A reader's connection (the writer's is `open_writer`).
pub(super) fn open_connection(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open_with_flags(path, open_flags())
        .with_context(|| format!("opening {}", path.display()))?;
    configure(conn)
}

/// The writer's connection: its WAL writes go through `wal_buffer`, a commit's frames in
/// one write instead of two per frame.
pub(super) fn open_writer(path: &Path) -> anyhow::Result<Connection> {
    let vfs = wal_buffer::register()?;
    let conn = Connection::open_with_flags_and_vfs(path, open_flags(), vfs)
        .with_context(|| format!("opening {}", path.display()))?;
    let conn = configure(conn)?;
    // Its checkpoints are the commit thread's to start (`checkpoint.rs`), not COMMIT's
    // (but for its rarer commits from other threads).
    checkpoint::hook_writer(&conn);
    Ok(conn)
}

fn open_flags() -> OpenFlags {
    OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
}

fn configure(conn: Connection) -> anyhow::Result<Connection> {
    // `temp_store = MEMORY`: each batch of a commit group runs in a savepoint, which
    // keeps the original of every page it changes in a sub-journal. In memory, that is a
    // copy; in a temporary file (the default past 64 KiB) it was a `pwrite` per page, 5%
    // of the CPU in a 50/50 mix. It stays small: a RELEASE empties it, batch by batch.
    // No `wal_autocheckpoint`: only the writer commits, and its checkpoints are
    // `checkpoint.rs`'s.
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA temp_store = MEMORY;
         PRAGMA busy_timeout = 10000;",
    )?;
    // Plans must not depend on bound values. Otherwise SQLite marks a statement whose
    // LIMIT is a parameter (the list queries) to be prepared again on every call, and
    // the profile of a mixed load showed lists re-parsed each time.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(conn)
}
