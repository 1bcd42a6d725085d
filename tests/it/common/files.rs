//! The files of a test server's catalog, wherever its default catalog keeps them: in
//! the server's data directory, or on S3 when `FLOE_TEST_S3_ENDPOINT` is set.
//!
//! With S3 (CI starts SeaweedFS with STS by `scripts/s3-server.sh` and runs the HTTP
//! suites a second time, `tests/http_on_s3.sh`), every test server's default catalog is
//! an S3 catalog with a warehouse of its own under `s3://BUCKET/http-<uuid>`, and the
//! server holds the S3 keys from the process environment (`AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY`), like a deployed one. The tests see the files through
//! [`Files`], which reads the bucket with those keys, so a test that checks "the purge
//! deleted the table's files" or "a refused request wrote nothing" checks the bucket.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use serde_json::{json, Value};

/// The S3 server the tests use, from the environment.
#[derive(Debug, Clone)]
pub struct S3Target {
    pub endpoint: String,
    pub bucket: String,
    access_key: String,
    secret_key: String,
    role_arn: String,
}

/// `Some` when the tests are to keep their tables on S3 (`FLOE_TEST_S3_ENDPOINT`).
pub fn s3_for_test() -> Option<S3Target> {
    let endpoint = std::env::var("FLOE_TEST_S3_ENDPOINT").ok()?;
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("FLOE_TEST_S3_ENDPOINT is set, so {name} must be too (the server's keys)")
        })
    };
    Some(S3Target {
        endpoint,
        bucket: std::env::var("FLOE_TEST_S3_BUCKET").unwrap_or_else(|_| "lake".into()),
        access_key: var("AWS_ACCESS_KEY_ID"),
        secret_key: var("AWS_SECRET_ACCESS_KEY"),
        role_arn: std::env::var("FLOE_TEST_S3_ROLE_ARN")
            .unwrap_or_else(|_| "arn:aws:iam::000000000000:role/FloeVended".into()),
    })
}

impl S3Target {
    /// A fresh root for one test server, `s3://BUCKET/http-<uuid>`.
    pub fn fresh_root(&self, what: &str) -> String {
        format!(
            "s3://{}/{what}-{}",
            self.bucket,
            uuid::Uuid::new_v4().simple()
        )
    }

    /// The `storageConfigInfo` of the catalogs on this server. No allowed locations: each
    /// catalog is confined to its own base location, as on the local file system.
    pub fn storage_config(&self) -> Value {
        json!({
            "storageType": "S3",
            "region": "us-east-1",
            "endpoint": self.endpoint,
            "pathStyleAccess": true,
            "roleArn": self.role_arn,
        })
    }

    fn client(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_bucket_name(&self.bucket)
            .with_region("us-east-1")
            .with_access_key_id(&self.access_key)
            .with_secret_access_key(&self.secret_key)
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .build()
            .expect("an S3 client for the tests")
    }
}

/// Reads and writes the files behind a test server's locations.
#[derive(Clone)]
pub enum Files {
    /// `file:` locations.
    Local,
    /// `s3://` locations in one bucket (`file:` ones still work).
    S3 {
        bucket: String,
        client: Arc<AmazonS3>,
    },
}

impl Files {
    pub fn for_target(s3: Option<&S3Target>) -> Files {
        match s3 {
            None => Files::Local,
            Some(s3) => Files::S3 {
                bucket: s3.bucket.clone(),
                client: Arc::new(s3.client()),
            },
        }
    }

    /// The object key of an `s3://` location in this bucket (`None`: a local location).
    fn key<'a>(&self, location: &'a str) -> Option<(&AmazonS3, &'a str)> {
        let Files::S3 { bucket, client } = self else {
            return None;
        };
        let rest = location.strip_prefix("s3://")?;
        let key = rest
            .strip_prefix(bucket.as_str())
            .and_then(|k| k.strip_prefix('/'))
            .unwrap_or_else(|| panic!("{location} is not in the test bucket {bucket}"));
        Some((client.as_ref(), key))
    }

    /// Whether a file exists at `location`.
    pub async fn is_file(&self, location: &str) -> bool {
        match self.key(location) {
            None => local_path(location).is_file(),
            Some((client, key)) => match client.head(&ObjectPath::from(key)).await {
                Ok(_) => true,
                Err(object_store::Error::NotFound { .. }) => false,
                Err(e) => panic!("HEAD {location}: {e}"),
            },
        }
    }

    /// Every file under a directory location, relative to it and sorted (empty if there
    /// is none).
    pub async fn list(&self, location: &str) -> Vec<String> {
        match self.key(location) {
            None => tree(&local_path(location)),
            Some((client, key)) => {
                let prefix = ObjectPath::from(key.trim_end_matches('/'));
                let objects: Vec<_> = client
                    .list(Some(&prefix))
                    .try_collect()
                    .await
                    .unwrap_or_else(|e| panic!("listing {location}: {e}"));
                let mut names: Vec<String> = objects
                    .into_iter()
                    .filter_map(|o| {
                        o.location
                            .as_ref()
                            .strip_prefix(prefix.as_ref())
                            .map(|n| n.trim_start_matches('/').to_string())
                    })
                    .collect();
                names.sort();
                names
            }
        }
    }

    pub async fn read(&self, location: &str) -> Vec<u8> {
        match self.key(location) {
            None => std::fs::read(local_path(location))
                .unwrap_or_else(|e| panic!("reading {location}: {e}")),
            Some((client, key)) => client
                .get(&ObjectPath::from(key))
                .await
                .unwrap_or_else(|e| panic!("GET {location}: {e}"))
                .bytes()
                .await
                .unwrap_or_else(|e| panic!("GET {location}: {e}"))
                .to_vec(),
        }
    }

    /// Writes a file, as a client (or an intruder) with the keys would.
    pub async fn write(&self, location: &str, contents: impl Into<Vec<u8>>) {
        let contents: Vec<u8> = contents.into();
        match self.key(location) {
            None => {
                let path = local_path(location);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).unwrap();
                }
                std::fs::write(&path, contents).unwrap_or_else(|e| panic!("{location}: {e}"))
            }
            Some((client, key)) => {
                client
                    .put(&ObjectPath::from(key), PutPayload::from(contents))
                    .await
                    .unwrap_or_else(|e| panic!("PUT {location}: {e}"));
            }
        }
    }

    pub async fn copy(&self, from: &str, to: &str) {
        let contents = self.read(from).await;
        self.write(to, contents).await;
    }
}

/// The local path of a `file:` location.
pub fn local_path(location: &str) -> PathBuf {
    let path = location
        .strip_prefix("file://")
        .or_else(|| location.strip_prefix("file:"))
        .unwrap_or(location);
    PathBuf::from(path)
}

/// Every file under a directory, relative and sorted.
pub fn tree(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
