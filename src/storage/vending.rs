//! Credential vending for S3: short-lived keys from STS `AssumeRole`, narrowed by a
//! session policy to one table's locations, read-only or read-write.
//!
//! The session policy ([`session_policy`]) allows object reads under each location's
//! prefix (and writes, multipart and deletes for read-write), `ListBucket` only with an
//! `s3:prefix` inside the locations, and `GetBucketLocation`. STS intersects it with the
//! role's own policy, so the keys can never do more than both allow; the S3 server
//! enforces it on every request.
//!
//! Credentials are cached per (catalog version, locations, access level) and reused until
//! a quarter of their lifetime (at most five minutes) is left, so that a client always
//! gets keys that outlive a short job; concurrent requests for the same entry wait for
//! one STS call (single flight).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::OnceCell;

use super::config::{S3Keys, S3Storage};
use super::location::ObjectLocation;
use super::{StorageError, StorageResult};
use crate::model::{now_ms, CatalogId};

/// What vended credentials may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccessLevel {
    Read,
    Write,
}

/// Temporary keys, and when they stop working.
#[derive(Clone)]
pub struct TemporaryKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    /// `None` for static keys (the `vendStaticCredentials` opt-in).
    pub expires_at_ms: Option<i64>,
}

/// The ARN partition of a region (`aws`, `aws-cn`, `aws-us-gov`).
fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}

/// The session policy that narrows the role to `locations` at `level`.
pub fn session_policy(region: &str, locations: &[ObjectLocation], level: AccessLevel) -> String {
    let p = partition(region);
    let mut object_actions = vec!["s3:GetObject", "s3:GetObjectVersion"];
    if level == AccessLevel::Write {
        object_actions.extend([
            "s3:PutObject",
            "s3:DeleteObject",
            "s3:AbortMultipartUpload",
            "s3:ListMultipartUploadParts",
        ]);
    }
    let mut statements = Vec::new();
    let objects: Vec<String> = locations
        .iter()
        .map(|l| format!("arn:{p}:s3:::{}/{}/*", l.bucket, l.key))
        .collect();
    statements.push(json!({"Effect": "Allow", "Action": object_actions, "Resource": objects}));
    let mut buckets: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for l in locations {
        let prefixes = buckets.entry(l.bucket.as_str()).or_default();
        // Not the key without its slash: S3 would match a sibling's names too
        // (`orders` lists `orders_pii/…`).
        prefixes.extend([format!("{}/", l.key), format!("{}/*", l.key)]);
    }
    for (bucket, prefixes) in buckets {
        statements.push(json!({
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [format!("arn:{p}:s3:::{bucket}")],
            "Condition": {"StringLike": {"s3:prefix": prefixes}},
        }));
        statements.push(json!({
            "Effect": "Allow",
            "Action": ["s3:GetBucketLocation"],
            "Resource": [format!("arn:{p}:s3:::{bucket}")],
        }));
    }
    json!({"Version": "2012-10-17", "Statement": statements}).to_string()
}

/// The shortest `DurationSeconds` STS accepts.
const MIN_STS_SECONDS: u64 = 900;

/// STS limits a session policy to 2048 characters (packed).
pub const MAX_SESSION_POLICY_CHARS: usize = 2048;

#[derive(Clone, PartialEq, Eq, Hash)]
struct CacheKey {
    catalog: CatalogId,
    version: i64,
    locations: Vec<String>,
    level: AccessLevel,
}

#[derive(Default)]
struct Slot {
    keys: OnceCell<TemporaryKeys>,
}

impl Slot {
    /// Fetched, and too close to expiry to hand out again.
    fn stale(&self, now: i64, refresh_before_ms: i64) -> bool {
        self.keys
            .get()
            .and_then(|k| k.expires_at_ms)
            .is_some_and(|expires| expires - now < refresh_before_ms)
    }
}

/// Largest number of cached credentials; past it, stale entries are swept.
const MAX_CACHED: usize = 10_000;

/// Vends S3 credentials; one per server.
pub struct Vendor {
    lifetime: Duration,
    cache: Mutex<HashMap<CacheKey, Arc<Slot>>>,
    http: aws_sdk_sts::config::SharedHttpClient,
}

impl Vendor {
    pub fn new(lifetime: Duration) -> Self {
        use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
        Vendor {
            lifetime,
            cache: Mutex::default(),
            http: aws_smithy_http_client::Builder::new()
                .tls_provider(Provider::Rustls(CryptoMode::Ring))
                .build_https(),
        }
    }

    fn refresh_before_ms(&self) -> i64 {
        (self.lifetime.as_millis() as i64 / 4).min(5 * 60 * 1000)
    }

    /// Credentials for `locations` at `level`, from the cache or from STS.
    pub async fn s3_credentials(
        &self,
        catalog: (CatalogId, i64),
        s3: &S3Storage,
        locations: &[ObjectLocation],
        level: AccessLevel,
    ) -> StorageResult<TemporaryKeys> {
        let keys = server_keys(s3)?;
        if s3.sts_unavailable {
            // The explicit opt-in for stores without STS: the catalog's own keys.
            return Ok(TemporaryKeys {
                access_key_id: keys.access_key_id,
                secret_access_key: keys.secret_access_key,
                session_token: keys.session_token,
                expires_at_ms: None,
            });
        }
        let key = CacheKey {
            catalog: catalog.0,
            version: catalog.1,
            locations: locations.iter().map(ObjectLocation::canonical).collect(),
            level,
        };
        let slot = {
            let now = now_ms();
            let mut cache = self.cache.lock().expect("credential cache poisoned");
            match cache.get(&key) {
                Some(slot) if !slot.stale(now, self.refresh_before_ms()) => {
                    crate::metrics::record_cache("credentials", true);
                    slot.clone()
                }
                _ => {
                    crate::metrics::record_cache("credentials", false);
                    if cache.len() >= MAX_CACHED {
                        let margin = self.refresh_before_ms();
                        cache.retain(|_, s| s.keys.initialized() && !s.stale(now, margin));
                    }
                    let slot = Arc::new(Slot::default());
                    cache.insert(key, slot.clone());
                    slot
                }
            }
        };
        slot.keys
            .get_or_try_init(|| self.assume_role(s3, keys, locations, level))
            .await
            .cloned()
    }

    async fn assume_role(
        &self,
        s3: &S3Storage,
        keys: S3Keys,
        locations: &[ObjectLocation],
        level: AccessLevel,
    ) -> StorageResult<TemporaryKeys> {
        use aws_sdk_sts::config::{BehaviorVersion, Credentials, Region};
        let policy = session_policy(&s3.region, locations, level);
        if policy.len() > MAX_SESSION_POLICY_CHARS {
            return Err(StorageError::InvalidLocation(format!(
                "The table's locations make a session policy of {} characters; STS allows {MAX_SESSION_POLICY_CHARS}",
                policy.len()
            )));
        }
        let mut config = aws_sdk_sts::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(s3.region.clone()))
            .credentials_provider(Credentials::new(
                keys.access_key_id,
                keys.secret_access_key,
                keys.session_token,
                None,
                "floe",
            ))
            .http_client(self.http.clone());
        if let Some(endpoint) = s3.sts_endpoint() {
            config = config.endpoint_url(endpoint);
        }
        let client = aws_sdk_sts::Client::from_conf(config.build());
        // S3-compatible stores without IAM roles ignore the ARN, but the API requires one.
        let role = s3
            .role_arn
            .clone()
            .unwrap_or_else(|| "arn:aws:iam::000000000000:role/floe".into());
        let mut request = client
            .assume_role()
            .role_arn(role)
            .role_session_name("floe")
            .policy(policy);
        // STS accepts 900 s to 12 h. A shorter lifetime leaves the duration to the STS
        // server's default (a test server's short token duration); the expiry handed to
        // clients is always the one STS reports.
        let seconds = self.lifetime.as_secs();
        if seconds >= MIN_STS_SECONDS {
            request = request.duration_seconds(seconds.min(43_200) as i32);
        }
        if let Some(external_id) = &s3.external_id {
            request = request.external_id(external_id);
        }
        let response = request.send().await.map_err(|e| {
            use aws_sdk_sts::error::ProvideErrorMetadata;
            // The code and message STS sent, or why it could not be reached; not the
            // SDK's whole debug dump.
            let detail = match e.as_service_error() {
                Some(se) => format!(
                    "{}: {}",
                    se.code().unwrap_or("error"),
                    se.message().unwrap_or_default()
                ),
                None => match std::error::Error::source(&e) {
                    Some(source) => format!("{e}: {source}"),
                    None => e.to_string(),
                },
            };
            StorageError::Unavailable(format!("STS AssumeRole failed: {detail}"))
        })?;
        let credentials = response.credentials().ok_or_else(|| {
            StorageError::Unavailable("STS AssumeRole returned no credentials".into())
        })?;
        Ok(TemporaryKeys {
            access_key_id: credentials.access_key_id().to_string(),
            secret_access_key: credentials.secret_access_key().to_string(),
            session_token: Some(credentials.session_token().to_string()),
            expires_at_ms: credentials.expiration().to_millis().ok(),
        })
    }
}

/// The server's own keys for this storage (never sent to clients, except under the
/// static opt-in).
pub fn server_keys(s3: &S3Storage) -> StorageResult<S3Keys> {
    S3Keys::from_env(s3.storage_name.as_deref()).ok_or_else(|| {
        StorageError::Unavailable(match &s3.storage_name {
            Some(name) => format!(
                "The server has no keys for storage {name}: set FLOE_STORAGE_{}_ACCESS_KEY_ID and _SECRET_ACCESS_KEY",
                name.to_ascii_uppercase()
            ),
            None => "The server has no S3 keys: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY".into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::location::parse_object;

    #[test]
    fn policies_scope_objects_and_listing_to_the_locations() {
        let a = parse_object("s3://lake/wh/a").unwrap();
        let read: serde_json::Value = serde_json::from_str(&session_policy(
            "us-east-1",
            std::slice::from_ref(&a),
            AccessLevel::Read,
        ))
        .unwrap();
        let statements = read["Statement"].as_array().unwrap();
        assert_eq!(statements[0]["Resource"][0], "arn:aws:s3:::lake/wh/a/*");
        let actions = statements[0]["Action"].to_string();
        assert!(actions.contains("s3:GetObject") && !actions.contains("s3:PutObject"));
        assert_eq!(
            statements[1]["Condition"]["StringLike"]["s3:prefix"],
            json!(["wh/a/", "wh/a/*"])
        );
        let write = session_policy("cn-north-1", &[a], AccessLevel::Write);
        assert!(write.contains("s3:PutObject") && write.contains("s3:DeleteObject"));
        assert!(write.contains("arn:aws-cn:s3:::lake/wh/a/*"));
        assert!(write.len() < MAX_SESSION_POLICY_CHARS);
    }

    #[test]
    fn stale_slots_are_refreshed_before_expiry() {
        let slot = Slot::default();
        assert!(
            !slot.stale(0, 1000),
            "an unfetched slot is in flight, not stale"
        );
        let _ = slot.keys.set(TemporaryKeys {
            access_key_id: "a".into(),
            secret_access_key: "s".into(),
            session_token: None,
            expires_at_ms: Some(10_000),
        });
        assert!(!slot.stale(8_000, 1_000));
        assert!(slot.stale(9_500, 1_000));
    }
}
