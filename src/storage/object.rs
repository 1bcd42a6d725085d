//! Metadata files on object storage (S3 and S3-compatible stores, GCS, Azure Blob), through
//! the `object_store` crate.
//!
//! Why `object_store` rather than `opendal`: the catalog needs five operations (create-if-
//! absent, read, head, delete, list+batch delete), and `object_store` has each as one call
//! with the semantics spelled out — notably `PutMode::Create`, which is a conditional
//! `If-None-Match: *` put on S3, `ifGenerationMatch=0` on GCS and `If-None-Match: *` on
//! Azure — and shares `reqwest` and `ring` with the rest of the server.
//! iceberg-rust's own I/O (opendal) is not on the request path: the catalog reads and
//! writes metadata JSON only, never data files.
//!
//! Atomic create: a new metadata file is written with a conditional put, so a name is
//! never overwritten, and an object store never shows a partial object. A store that
//! ignores `If-None-Match` would let two writers of the same name both succeed; names are
//! unique per commit (sequence number plus a random UUID), so that only matters for a
//! retry of the same commit, which writes the same bytes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::config::{S3Keys, StorageConfig};
use super::location::{parse_object, ObjectLocation};
use super::{FileStore, StorageError, StorageResult};

/// How many keys one purge deletes per batch request (S3's DeleteObjects limit).
const DELETE_BATCH: usize = 1000;

/// The files of one catalog on an object store: one client per bucket, made on first use.
pub struct ObjectFiles {
    config: StorageConfig,
    stores: Mutex<HashMap<(String, String), Arc<dyn ObjectStore>>>,
}

fn io(e: object_store::Error) -> StorageError {
    StorageError::Unavailable(e.to_string())
}

fn env(storage_name: Option<&str>, suffix: &str) -> Option<String> {
    let name = storage_name?.to_ascii_uppercase();
    std::env::var(format!("FLOE_STORAGE_{name}_{suffix}"))
        .ok()
        .filter(|v| !v.is_empty())
}

/// A named storage whose credentials the environment lacks.
fn missing(storage_name: Option<&str>, suffix: &str) -> StorageError {
    let name = storage_name.unwrap_or_default();
    StorageError::Unavailable(format!(
        "No credentials for storage {name}: set FLOE_STORAGE_{}_{suffix}",
        name.to_ascii_uppercase()
    ))
}

impl ObjectFiles {
    pub fn new(config: StorageConfig) -> Self {
        ObjectFiles {
            config,
            stores: Mutex::new(HashMap::new()),
        }
    }

    fn build(&self, location: &ObjectLocation) -> StorageResult<Arc<dyn ObjectStore>> {
        use object_store::aws::AmazonS3Builder;
        use object_store::azure::MicrosoftAzureBuilder;
        use object_store::gcp::GoogleCloudStorageBuilder;
        let store: Arc<dyn ObjectStore> = match &self.config {
            StorageConfig::S3(s3) => {
                let mut builder = match S3Keys::from_env(s3.storage_name.as_deref()) {
                    Some(keys) => {
                        let b = AmazonS3Builder::new()
                            .with_access_key_id(keys.access_key_id)
                            .with_secret_access_key(keys.secret_access_key);
                        match keys.session_token {
                            Some(token) => b.with_token(token),
                            None => b,
                        }
                    }
                    None if s3.storage_name.is_some() => {
                        return Err(StorageError::Unavailable(format!(
                            "No credentials for storage {}: set FLOE_STORAGE_{}_ACCESS_KEY_ID and _SECRET_ACCESS_KEY",
                            s3.storage_name.as_deref().unwrap_or_default(),
                            s3.storage_name.as_deref().unwrap_or_default().to_ascii_uppercase()
                        )))
                    }
                    // The AWS environment: keys, web identity, instance metadata.
                    None => AmazonS3Builder::from_env(),
                };
                builder = builder
                    .with_bucket_name(&location.bucket)
                    .with_region(&s3.region);
                if let Some(endpoint) = s3.server_endpoint() {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"))
                        .with_virtual_hosted_style_request(!s3.path_style_access);
                }
                Arc::new(builder.build().map_err(io)?)
            }
            StorageConfig::Gcs(gcs) => {
                let mut builder =
                    GoogleCloudStorageBuilder::from_env().with_bucket_name(&location.bucket);
                match env(gcs.storage_name.as_deref(), "SERVICE_ACCOUNT_PATH") {
                    Some(path) => builder = builder.with_service_account_path(path),
                    // A named storage never falls back to the machine's own identity.
                    None if gcs.storage_name.is_some() => {
                        return Err(missing(gcs.storage_name.as_deref(), "SERVICE_ACCOUNT_PATH"))
                    }
                    None => {}
                }
                Arc::new(builder.build().map_err(io)?)
            }
            StorageConfig::Azure(azure) => {
                let name = azure.storage_name.as_deref();
                let mut builder = MicrosoftAzureBuilder::from_env()
                    .with_account(&location.account)
                    .with_container_name(&location.bucket);
                let emulator = env(name, "USE_EMULATOR").is_some_and(|v| v == "true");
                match env(name, "ACCOUNT_KEY") {
                    Some(key) => builder = builder.with_access_key(key),
                    None if name.is_some() && !emulator => {
                        return Err(missing(name, "ACCOUNT_KEY (or _USE_EMULATOR=true)"))
                    }
                    None => {}
                }
                if emulator {
                    builder = builder.with_use_emulator(true);
                }
                Arc::new(builder.build().map_err(io)?)
            }
            StorageConfig::File => {
                return Err(StorageError::InvalidLocation(
                    "a FILE catalog has no object store".into(),
                ))
            }
        };
        Ok(store)
    }

    /// The client for a location's bucket, and the location's key as an object path.
    fn resolve(&self, location: &str) -> StorageResult<(Arc<dyn ObjectStore>, Path)> {
        let parsed = parse_object(location)?;
        if parsed.scheme != self.config.scheme() {
            return Err(StorageError::InvalidLocation(format!(
                "{location} is not on this catalog's {} storage",
                self.config.scheme().as_str()
            )));
        }
        let path = Path::parse(&parsed.key)
            .map_err(|e| StorageError::InvalidLocation(format!("{location}: {e}")))?;
        let key = (parsed.account.clone(), parsed.bucket.clone());
        let mut stores = self.stores.lock().expect("object store map poisoned");
        if let Some(store) = stores.get(&key) {
            return Ok((store.clone(), path));
        }
        let store = self.build(&parsed)?;
        stores.insert(key, store.clone());
        Ok((store, path))
    }
}

fn map_error(location: &str, e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { .. } => StorageError::NotFound(location.to_string()),
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            StorageError::AlreadyExists(location.to_string())
        }
        other => StorageError::Unavailable(format!("{location}: {other}")),
    }
}

#[async_trait]
impl FileStore for ObjectFiles {
    async fn write_new(&self, location: &str, contents: &[u8]) -> StorageResult<()> {
        let (store, path) = self.resolve(location)?;
        let options = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        store
            .put_opts(&path, PutPayload::from(contents.to_vec()), options)
            .await
            .map(|_| ())
            .map_err(|e| map_error(location, e))
    }

    async fn read(&self, location: &str, max_bytes: u64) -> StorageResult<Vec<u8>> {
        let (store, path) = self.resolve(location)?;
        let got = store.get(&path).await.map_err(|e| map_error(location, e))?;
        if got.meta.size > max_bytes {
            return Err(StorageError::TooLarge {
                location: location.to_string(),
                max_bytes,
            });
        }
        let bytes = got.bytes().await.map_err(|e| map_error(location, e))?;
        Ok(bytes.to_vec())
    }

    async fn exists(&self, location: &str) -> StorageResult<bool> {
        let (store, path) = self.resolve(location)?;
        match store.head(&path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(map_error(location, e)),
        }
    }

    async fn delete(&self, location: &str) -> StorageResult<()> {
        let (store, path) = self.resolve(location)?;
        match store.delete(&path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(map_error(location, e)),
        }
    }

    /// Lists the prefix (by whole path segments, so `t` never matches `t2/`) and deletes
    /// in batches of [`DELETE_BATCH`], at most `max_files` objects. Listing again resumes
    /// an interrupted or bounded purge.
    async fn delete_prefix(&self, location: &str, max_files: usize) -> StorageResult<bool> {
        let (store, prefix) = self.resolve(location)?;
        if prefix.as_ref().is_empty() {
            return Err(StorageError::InvalidLocation(format!(
                "Refusing to delete a whole bucket ({location})"
            )));
        }
        let mut listed = store
            .list(Some(&prefix))
            .map_ok(|meta| meta.location)
            .take(max_files)
            .chunks(DELETE_BATCH);
        let mut deleted = 0;
        while let Some(batch) = listed.next().await {
            deleted += batch.len();
            let batch: Vec<Path> = batch
                .into_iter()
                .collect::<Result<_, _>>()
                .map_err(|e| map_error(location, e))?;
            let stream = futures_util::stream::iter(batch.into_iter().map(Ok)).boxed();
            let mut deleted = store.delete_stream(stream);
            while let Some(result) = deleted.next().await {
                match result {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(map_error(location, e)),
                }
            }
        }
        // Stopped at the bound: there may be more (the next call lists again).
        Ok(deleted < max_files)
    }

    fn cheap_exists(&self) -> bool {
        false
    }
}
