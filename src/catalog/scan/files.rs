//! The files one scan plan reads (a manifest list, its manifests), through the catalog's
//! own [`FileStore`], lent to iceberg-rust as its `Storage`.
//!
//! Why not iceberg-rust's own I/O: the catalog already has a client for each catalog's
//! storage (local files, S3, GCS, Azure, with the server's keys), and planning must read
//! only what the table may point at. So this storage:
//! - reads only under the table's own locations (its `location`, and `write.metadata.path`
//!   when the catalog allows it): a table whose metadata names any other file gets a 403,
//!   not that file read with the server's keys;
//! - keeps each file it read for the rest of the plan (up to a budget), because a plan
//!   reads the manifests twice: iceberg-rust's scan prunes them, then the encoder walks
//!   them for the whole `DataFile`s the REST answer carries;
//! - remembers the first storage error, so that the client hears "not found" or
//!   "unavailable" rather than iceberg-rust's rewording of it;
//! - writes nothing: every write-side call is refused.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use iceberg::{Error, ErrorKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::storage::{canonical_location, is_within, FileStore, StorageError};

/// Largest manifest list or manifest a plan reads.
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// Bytes of files one plan keeps for its second pass; past it, files are read again.
const KEPT_BYTES: usize = 256 << 20;

/// What one plan has read, shared by the `Storage` clones iceberg-rust makes.
#[derive(Default)]
struct Reads {
    /// Every file read, kept or not.
    read: HashSet<String>,
    kept: HashMap<String, Bytes>,
    kept_bytes: usize,
    /// The first storage error: what the client is told if planning fails.
    first_error: Option<StorageError>,
}

/// A read-only, confined view of one table's files for one plan.
#[derive(Clone)]
pub struct PlanFiles {
    store: Arc<dyn FileStore>,
    /// Canonical locations (`canonical_location`) under which reads are allowed.
    bases: Arc<Vec<String>>,
    reads: Arc<Mutex<Reads>>,
}

impl std::fmt::Debug for PlanFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanFiles")
            .field("bases", &self.bases)
            .finish()
    }
}

impl PlanFiles {
    pub fn new(store: Arc<dyn FileStore>, bases: Vec<String>) -> Self {
        PlanFiles {
            store,
            bases: Arc::new(bases),
            reads: Arc::default(),
        }
    }

    /// An iceberg-rust `FileIO` over these files.
    pub fn file_io(&self) -> FileIO {
        FileIOBuilder::new(Arc::new(PlanFilesFactory(self.clone()))).build()
    }

    /// Whether the plan read this file (iceberg-rust's scan reads no manifest it pruned).
    pub fn was_read(&self, path: &str) -> bool {
        self.reads
            .lock()
            .expect("plan reads poisoned")
            .read
            .contains(path)
    }

    /// Answers reads of `path` with `bytes` for the rest of the plan, whatever storage
    /// holds (an incremental plan's own manifest list, `incremental.rs`).
    pub fn substitute(&self, path: &str, bytes: Bytes) {
        let mut reads = self.reads.lock().expect("plan reads poisoned");
        reads.kept_bytes += bytes.len();
        reads.kept.insert(path.to_owned(), bytes);
    }

    /// The first storage error a read met, if any.
    pub fn take_error(&self) -> Option<StorageError> {
        self.reads
            .lock()
            .expect("plan reads poisoned")
            .first_error
            .take()
    }

    fn fail(&self, error: StorageError) -> Error {
        let message = error.to_string();
        let mut reads = self.reads.lock().expect("plan reads poisoned");
        reads.first_error.get_or_insert(error);
        Error::new(ErrorKind::Unexpected, message)
    }

    async fn read_whole(&self, path: &str) -> iceberg::Result<Bytes> {
        {
            let mut reads = self.reads.lock().expect("plan reads poisoned");
            if let Some(bytes) = reads.kept.get(path).cloned() {
                // A substitute is read here first.
                if !reads.read.contains(path) {
                    reads.read.insert(path.to_owned());
                }
                return Ok(bytes);
            }
        }
        let canonical = canonical_location(path).map_err(|e| self.fail(e))?;
        if !is_within(&canonical, &self.bases) {
            return Err(self.fail(StorageError::InvalidLocation(format!(
                "File {path} is outside the table's locations ({}): the catalog reads no \
                 other files for a table",
                self.bases.join(", ")
            ))));
        }
        let bytes = Bytes::from(
            self.store
                .read(path, MAX_FILE_BYTES)
                .await
                .map_err(|e| self.fail(e))?,
        );
        let mut reads = self.reads.lock().expect("plan reads poisoned");
        reads.read.insert(path.to_owned());
        if reads.kept_bytes + bytes.len() <= KEPT_BYTES {
            reads.kept_bytes += bytes.len();
            reads.kept.insert(path.to_owned(), bytes.clone());
        }
        Ok(bytes)
    }
}

fn read_only(path: &str) -> Error {
    Error::new(
        ErrorKind::FeatureUnsupported,
        format!("Scan planning reads files only; refused to change {path}"),
    )
}

/// A plan's files are never serialized: they hold live clients. typetag wants the
/// impls; they refuse.
impl Serialize for PlanFiles {
    fn serialize<S: Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "a plan's files are not serializable",
        ))
    }
}

impl<'de> Deserialize<'de> for PlanFiles {
    fn deserialize<D: Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom(
            "a plan's files are not deserializable",
        ))
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for PlanFiles {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        Ok(self.read_whole(path).await.is_ok())
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let size = self.read_whole(path).await?.len() as u64;
        Ok(FileMetadata { size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.read_whole(path).await
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(WholeFile(self.read_whole(path).await?)))
    }

    async fn write(&self, path: &str, _: Bytes) -> iceberg::Result<()> {
        Err(read_only(path))
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        Err(read_only(path))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        Err(read_only(path))
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        Err(read_only(path))
    }

    async fn delete_stream(&self, _: BoxStream<'static, String>) -> iceberg::Result<()> {
        Err(read_only("files"))
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_owned()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Err(read_only(path))
    }
}

/// Ranges of a file read whole (manifests are read whole anyway).
struct WholeFile(Bytes);

#[async_trait]
impl FileRead for WholeFile {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        let len = self.0.len() as u64;
        if range.start > range.end || range.end > len {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                format!("Range {range:?} is outside a file of {len} bytes"),
            ));
        }
        Ok(self.0.slice(range.start as usize..range.end as usize))
    }
}

/// Hands iceberg-rust's `FileIO` the plan's files, whatever its configuration.
#[derive(Debug, Serialize, Deserialize)]
struct PlanFilesFactory(PlanFiles);

#[typetag::serde]
impl StorageFactory for PlanFilesFactory {
    fn build(&self, _: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::local::LocalFiles;

    #[tokio::test]
    async fn reads_only_inside_the_table_and_keeps_what_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("t");
        std::fs::create_dir_all(table.join("metadata")).unwrap();
        std::fs::write(table.join("metadata/m.avro"), b"abc").unwrap();
        std::fs::write(dir.path().join("secret"), b"key").unwrap();
        let base = canonical_location(&format!("file://{}", table.display())).unwrap();
        let files = PlanFiles::new(Arc::new(LocalFiles::new(false, false, None)), vec![base]);
        let io = files.file_io();

        let inside = format!("file://{}/metadata/m.avro", table.display());
        assert_eq!(
            &io.new_input(&inside).unwrap().read().await.unwrap()[..],
            b"abc"
        );
        std::fs::remove_file(table.join("metadata/m.avro")).unwrap();
        // The second pass is served from what the first read.
        assert_eq!(
            &io.new_input(&inside).unwrap().read().await.unwrap()[..],
            b"abc"
        );
        assert!(files.take_error().is_none());

        let outside = format!("file://{}/secret", dir.path().display());
        assert!(io.new_input(&outside).unwrap().read().await.is_err());
        assert!(matches!(
            files.take_error(),
            Some(StorageError::InvalidLocation(_))
        ));
        let sneaky = format!("file://{}/../secret", table.display());
        assert!(io.new_input(&sneaky).unwrap().read().await.is_err());
        assert!(files.take_error().is_some());

        let missing = format!("file://{}/metadata/gone.avro", table.display());
        assert!(io.new_input(&missing).unwrap().read().await.is_err());
        assert!(matches!(
            files.take_error(),
            Some(StorageError::NotFound(_))
        ));
        assert!(io.new_output(&inside).is_err());
    }
}
