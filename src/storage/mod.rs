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

pub mod local;

use std::sync::Arc;

use async_trait::async_trait;

use crate::model::CatalogRecord;

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
    /// The file system or object store failed; the outcome of a write is unknown.
    #[error("{0:#}")]
    Io(anyhow::Error),
}

pub type StorageResult<T> = Result<T, StorageError>;

/// Where a catalog keeps its metadata files.
#[async_trait]
pub trait FileStore: Send + Sync + 'static {
    /// Writes a file that must not exist yet and makes it durable before returning, so a
    /// pointer is only ever swapped to a complete file. Never replaces an existing file
    /// (`AlreadyExists`), and never leaves a partial file under the final name.
    async fn write_new(&self, location: &str, contents: Vec<u8>) -> StorageResult<()>;
    /// Reads a whole file of at most `max_bytes`.
    async fn read(&self, location: &str, max_bytes: u64) -> StorageResult<Vec<u8>>;
    async fn exists(&self, location: &str) -> StorageResult<bool>;
    /// Removes one file; a missing file is not an error.
    async fn delete(&self, location: &str) -> StorageResult<()>;
    /// Removes every file under a directory location (a table's purge); a missing
    /// directory is not an error.
    async fn delete_prefix(&self, location: &str) -> StorageResult<()>;
    /// Whether checking a file's existence is cheap enough to do on every table load
    /// (a local `stat`), rather than a billed request with network latency.
    fn cheap_exists(&self) -> bool;
}

/// Picks the file store of a catalog from its storage config.
#[derive(Clone)]
pub struct FileStores {
    local: Arc<dyn FileStore>,
}

impl FileStores {
    pub fn new(fsync: bool) -> Self {
        FileStores {
            local: Arc::new(local::LocalFiles::new(fsync)),
        }
    }

    /// The file store of a catalog. Only `FILE` storage exists so far, and catalogs with
    /// another storage type are refused when they are created.
    pub fn for_catalog(&self, _catalog: &CatalogRecord) -> &dyn FileStore {
        self.local.as_ref()
    }

    /// The local file system, for `file:` locations.
    pub fn local(&self) -> &dyn FileStore {
        self.local.as_ref()
    }
}

/// Canonical form of a location, with a trailing `/`: `file:///abs/path/`.
/// Rejects other schemes, relative paths and `.`/`..` segments (which could escape a base).
pub fn canonical_location(location: &str) -> StorageResult<String> {
    let path = local::local_path_str(location)?;
    let mut canonical = String::from("file://");
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." {
            return Err(StorageError::InvalidLocation(format!(
                "Location {location} must not contain '.' or '..' segments"
            )));
        }
        canonical.push('/');
        canonical.push_str(segment);
    }
    canonical.push('/');
    Ok(canonical)
}

/// Whether `location` lies inside (or is) one of `bases`; all in canonical form.
pub fn is_within(location: &str, bases: &[String]) -> bool {
    bases.iter().any(|base| location.starts_with(base.as_str()))
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
    fn canonical_forms_agree() {
        let want = "file:///tmp/wh/t/";
        assert_eq!(canonical_location("file:///tmp/wh/t").unwrap(), want);
        assert_eq!(canonical_location("file:/tmp/wh/t/").unwrap(), want);
        assert_eq!(canonical_location("/tmp//wh/t").unwrap(), want);
        assert_eq!(
            canonical_location("file://localhost/tmp/wh/t").unwrap(),
            want
        );
    }

    #[test]
    fn rejects_escapes_and_other_schemes() {
        assert!(canonical_location("file:///tmp/wh/../etc").is_err());
        assert!(canonical_location("s3://bucket/x").is_err());
        assert!(canonical_location("relative/path").is_err());
    }

    #[test]
    fn within_is_by_segment() {
        let bases = vec!["file:///tmp/wh/".to_string()];
        assert!(is_within("file:///tmp/wh/a/", &bases));
        assert!(!is_within("file:///tmp/wh2/a/", &bases));
    }

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
