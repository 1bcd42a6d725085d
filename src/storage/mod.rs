//! Files: where metadata files live, behind the [`FileStore`] trait, and the rules for
//! table and view locations.
//!
//! The catalog never touches a file system or an object store directly: it asks a
//! `FileStore` to write a new file atomically, read one, or delete a table's files. The
//! local file system ([`local::LocalFiles`]) is the first backend; S3, GCS and Azure are
//! further implementations of the same trait, chosen per catalog by [`FileStores`].
//!
//! This layer reports what happened to a file ([`StorageError`]); the catalog decides
//! what that means for the request (a 409, a 400, ...).

pub mod config;
pub mod journal;
pub mod local;
pub mod location;
pub mod object;
#[cfg(target_os = "linux")]
mod present;
pub mod signing;
mod sync_rounds;
pub mod vending;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

pub use config::StorageConfig;
pub use location::{canonical_location, is_within};

use crate::model::{CatalogId, CatalogRecord};

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A new file's name is taken: a new file never replaces one.
    #[error("File {0} already exists")]
    AlreadyExists(String),
    #[error("File {0} does not exist")]
    NotFound(String),
    /// A location this backend cannot address (wrong scheme, relative, `..`, ...).
    #[error("{0}")]
    InvalidLocation(String),
    #[error("File {location} is larger than {max_bytes} bytes")]
    TooLarge { location: String, max_bytes: u64 },
    /// The file system failed; the outcome of a write is unknown.
    #[error("{0:#}")]
    Io(anyhow::Error),
    /// An object store or STS could not be reached or refused the server; the outcome
    /// of a write is unknown.
    #[error("{0}")]
    Unavailable(String),
}

pub type StorageResult<T> = Result<T, StorageError>;

/// Where a catalog keeps its metadata files.
#[async_trait]
pub trait FileStore: Send + Sync + 'static {
    /// Writes a file that must not exist yet and makes it durable before returning, so a
    /// pointer is only ever swapped to a complete file, unless [`FileStore::journals`]
    /// (then the store's journal commits its text with the pointer, and a start after a
    /// crash rewrites it). Never replaces an existing file (`AlreadyExists`), and never
    /// leaves a partial file under the final name, except, with the journal, after a
    /// crash: then under a name no pointer names (as the files of failed commits), the
    /// restore having rewritten every file a pointer names.
    /// Borrows the contents: the local store writes most files from them in place (a
    /// commit's document is tens of KB, copied only where a store needs it owned).
    async fn write_new(&self, location: &str, contents: &[u8]) -> StorageResult<()>;
    /// Reads a whole file of at most `max_bytes`.
    async fn read(&self, location: &str, max_bytes: u64) -> StorageResult<Vec<u8>>;
    async fn exists(&self, location: &str) -> StorageResult<bool>;
    /// Removes one file; a missing file is not an error.
    async fn delete(&self, location: &str) -> StorageResult<()>;
    /// Removes the files under a directory location (a table's purge), at most
    /// `max_files` of them per call; returns whether nothing is left (`false`: call
    /// again). A missing directory is not an error.
    async fn delete_prefix(&self, location: &str, max_files: usize) -> StorageResult<bool>;
    /// Whether checking a file's existence is cheap enough to do on every table load
    /// (a local `stat`), rather than a billed request with network latency.
    fn cheap_exists(&self) -> bool;
    /// Whether `write_new` leaves the file's durability to the store's journal
    /// (`journal.rs`): the commit must then ask the store to keep the text.
    fn journals(&self) -> bool {
        false
    }
}

/// Picks the file store of a catalog from its storage config.
#[derive(Clone)]
pub struct FileStores {
    local: Arc<dyn FileStore>,
    /// Object stores by catalog and catalog version: a changed storage config gets new
    /// clients, and the old ones go when the map is swept.
    objects: Arc<Mutex<CatalogStores>>,
}

/// Object stores keyed by catalog id and version.
type CatalogStores = HashMap<(CatalogId, i64), Arc<dyn FileStore>>;

/// More cached object-store clients than this and the stale ones are dropped.
const MAX_CACHED_CATALOG_STORES: usize = 1024;

impl FileStores {
    /// `fsync`: local metadata files are made durable; `fsync_batch`: in rounds shared
    /// by concurrent writers (`sync_rounds.rs`); `journal`: by a syncer's rounds, the
    /// store's journal keeping them meanwhile (`journal.rs`).
    pub fn new(fsync: bool, fsync_batch: bool, journal: Option<Arc<journal::Syncer>>) -> Self {
        FileStores {
            local: Arc::new(local::LocalFiles::new(fsync, fsync_batch, journal)),
            objects: Arc::default(),
        }
    }

    /// The file store of a catalog: the local file system for FILE storage, else the
    /// catalog's object store.
    pub fn for_catalog(&self, catalog: &CatalogRecord) -> Arc<dyn FileStore> {
        let config = StorageConfig::of(&catalog.storage_config);
        if config == StorageConfig::File {
            return self.local.clone();
        }
        let mut objects = self.objects.lock().expect("file store map poisoned");
        let key = (catalog.id, catalog.version);
        if let Some(store) = objects.get(&key) {
            return store.clone();
        }
        if objects.len() >= MAX_CACHED_CATALOG_STORES {
            objects.clear();
        }
        let store: Arc<dyn FileStore> = Arc::new(object::ObjectFiles::new(config));
        objects.insert(key, store.clone());
        store
    }

    /// The local file system, for `file:` locations.
    pub fn local(&self) -> &dyn FileStore {
        self.local.as_ref()
    }
}

/// Longest directory name made from a name; file systems allow 255 bytes per component,
/// and a table directory adds a 33-byte suffix.
pub const MAX_SEGMENT_BYTES: usize = 128;

/// A name made safe to be one path segment: anything but `[A-Za-z0-9_-]` and non-leading
/// dots is percent-encoded, so names like `..` or `a/b` cannot change the directory tree.
/// Long results are cut and end in a hash of the whole name, so they stay distinct.
pub fn path_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.len() > MAX_SEGMENT_BYTES {
        // The output is ASCII, so any byte index is a char boundary; step back so the
        // cut never splits a %XX escape.
        let mut cut = MAX_SEGMENT_BYTES - 17;
        while out[..cut].rfind('%').is_some_and(|p| p + 3 > cut) {
            cut -= 1;
        }
        let hash = crate::stable_hash::fnv1a(name.bytes());
        out.truncate(cut);
        out.push_str(&format!("~{hash:016x}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_safe() {
        assert_eq!(path_segment("orders_2024-x.y"), "orders_2024-x.y");
        assert_eq!(path_segment(".."), "%2E.");
        assert_eq!(path_segment("a/b"), "a%2Fb");
        assert_eq!(path_segment("%"), "%25");
        let long = path_segment(&"é".repeat(127));
        assert!(long.len() <= MAX_SEGMENT_BYTES, "{}", long.len());
        assert_ne!(long, path_segment(&"é".repeat(126)));
        assert!(path_segment(&"x".repeat(255)).len() <= MAX_SEGMENT_BYTES);
    }
}
