//! The catalog: every use case of the Iceberg REST and Polaris management APIs, in plain
//! Rust that knows nothing of HTTP. Handlers in `http` parse a request, call one method
//! here and map the result.
//!
//! - `catalogs`: catalogs (Polaris's management API).
//! - `namespaces`, `tables`, `views`: the Iceberg REST resources.
//! - `commit`: pure commit rules over iceberg-rust's metadata builders.
//! - `locations`: where tables and views live, and which locations are allowed.

pub mod catalogs;
pub mod commit;
pub mod error;
pub mod ident;
pub mod locations;
pub mod namespaces;
mod objects;
pub mod pagination;
pub mod tables;
pub mod views;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use tokio::sync::{Mutex, MutexGuard};

use crate::store::Store;
use ident::Ident;

/// Settings of the catalog service, passed in explicitly by `floe serve`.
#[derive(Debug, Clone)]
pub struct CatalogSettings {
    /// Root under which a catalog created without `default-base-location` keeps its files.
    pub warehouse_root: String,
    /// fsync metadata files before swapping pointers (durable against power loss).
    pub fsync: bool,
    /// Attempts of one commit; after the first lost race it waits for a lock instead of
    /// racing, so more than two are rare (e.g. a deadlock between multi-table commits).
    pub max_commit_attempts: u32,
    /// Largest metadata file accepted by register.
    pub max_metadata_file_bytes: u64,
}

impl Default for CatalogSettings {
    fn default() -> Self {
        CatalogSettings {
            warehouse_root: "file:///tmp/floe-warehouse".into(),
            fsync: true,
            max_commit_attempts: 10,
            max_metadata_file_bytes: 64 * 1024 * 1024,
        }
    }
}

pub struct Catalog {
    store: Arc<dyn Store>,
    settings: CatalogSettings,
    commit_locks: CommitLocks,
}

impl Catalog {
    pub fn new(store: Arc<dyn Store>, settings: CatalogSettings) -> Self {
        Catalog {
            store,
            settings,
            commit_locks: CommitLocks::new(),
        }
    }

    pub fn settings(&self) -> &CatalogSettings {
        &self.settings
    }

    /// Whether the store can serve requests now.
    pub async fn is_healthy(&self) -> bool {
        self.store.ping().await.is_ok()
    }
}

/// Serialises commits to the same table or view inside this process, so that concurrent
/// writers queue instead of failing each other's compare-and-swap. Across nodes, the
/// store's compare-and-swap (and a retry) still decides. Striped: a fixed set of mutexes
/// chosen by hash, so memory does not grow with the number of tables.
struct CommitLocks {
    stripes: Vec<Mutex<()>>,
}

const COMMIT_LOCK_STRIPES: usize = 1024;

impl CommitLocks {
    fn new() -> Self {
        CommitLocks {
            stripes: (0..COMMIT_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    fn stripe(catalog: &str, ident: &Ident) -> usize {
        let mut hasher = DefaultHasher::new();
        catalog.hash(&mut hasher);
        ident.hash(&mut hasher);
        (hasher.finish() % COMMIT_LOCK_STRIPES as u64) as usize
    }

    /// Locks the stripes of all idents, in stripe order so that overlapping multi-table
    /// transactions cannot deadlock.
    async fn lock<'a>(
        &'a self,
        catalog: &str,
        idents: impl IntoIterator<Item = &Ident>,
    ) -> Vec<MutexGuard<'a, ()>> {
        let mut stripes: Vec<usize> = idents
            .into_iter()
            .map(|i| Self::stripe(catalog, i))
            .collect();
        stripes.sort_unstable();
        stripes.dedup();
        let mut guards = Vec::with_capacity(stripes.len());
        for stripe in stripes {
            guards.push(self.stripes[stripe].lock().await);
        }
        guards
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}
