//! Storage configs: Polaris's `storageConfigInfo`, checked once when a catalog is created
//! or updated, then parsed into [`StorageConfig`] wherever files are touched.
//!
//! Credentials are never part of a storage config. The server's own keys come from its
//! environment: `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`)
//! by default, or, when the config names a server-side storage with `storageName`,
//! `FLOE_STORAGE_<NAME>_ACCESS_KEY_ID` / `..._SECRET_ACCESS_KEY` (see [`S3Keys`]). A
//! config or a catalog property that carries a secret is refused, so that the
//! management API can return configs whole without leaking one.

use serde_json::Value;

use super::location::{scheme_of, Scheme};

/// Why a storage config was refused (always the caller's fault: a 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

type ConfigResult<T> = Result<T, ConfigError>;

fn bad<T>(message: impl Into<String>) -> ConfigResult<T> {
    Err(ConfigError(message.into()))
}

/// A catalog's storage, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageConfig {
    File,
    S3(S3Storage),
    Gcs(GcsStorage),
    Azure(AzureStorage),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct S3Storage {
    /// `us-east-1` when not given.
    pub region: String,
    /// The S3 endpoint clients use (none: AWS).
    pub endpoint: Option<String>,
    /// The endpoint the server uses (default: `endpoint`).
    pub endpoint_internal: Option<String>,
    /// Where the server calls STS (default: the internal endpoint, else AWS).
    pub sts_endpoint: Option<String>,
    pub path_style_access: bool,
    pub role_arn: Option<String>,
    pub external_id: Option<String>,
    /// No STS: credentials are not vended (unless `vend_static_credentials`).
    pub sts_unavailable: bool,
    /// Floe's opt-in for stores without STS: hand clients the catalog's own keys,
    /// unscoped. Off by default; documented in the README as a risk.
    pub vend_static_credentials: bool,
    /// Names the server-side credentials (`FLOE_STORAGE_<NAME>_...`).
    pub storage_name: Option<String>,
    /// `verifiesContentSha256`: whether the store refuses a request whose body does not
    /// match its signed `x-amz-content-sha256` (AWS S3 and MinIO do; SeaweedFS does
    /// not). `None`: assumed for AWS (no endpoint), not for another endpoint.
    pub verifies_content_sha256: Option<bool>,
}

impl S3Storage {
    /// Whether a signature over a request's body binds the store to that body: only
    /// then may a request whose body decides what it touches (DeleteObjects) be signed.
    pub fn binds_signed_bodies(&self) -> bool {
        self.verifies_content_sha256
            .unwrap_or(self.endpoint.is_none())
    }

    /// The endpoint the server itself talks to.
    pub fn server_endpoint(&self) -> Option<&str> {
        self.endpoint_internal
            .as_deref()
            .or(self.endpoint.as_deref())
    }

    pub fn sts_endpoint(&self) -> Option<&str> {
        self.sts_endpoint.as_deref().or(self.server_endpoint())
    }

    /// Whether this catalog can vend credentials at all.
    pub fn can_vend(&self) -> bool {
        !self.sts_unavailable || self.vend_static_credentials
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcsStorage {
    pub service_account: Option<String>,
    pub storage_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AzureStorage {
    pub tenant_id: String,
    pub storage_name: Option<String>,
}

/// Field names that would carry a secret: refused in storage configs and catalog
/// properties alike.
fn looks_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace(['-', '_', '.'], "");
    [
        "secret",
        "password",
        "accesskey",
        "accountkey",
        "sharedkey",
        "privatekey",
        "connectionstring",
        "serviceaccountkey",
        "sessiontoken",
        "sastoken",
        "oauth2token",
    ]
    .iter()
    .any(|s| k.contains(s))
}

/// Refuses catalog properties that carry credentials (`s3.secret-access-key`, ...).
pub fn check_properties(properties: &crate::model::Properties) -> ConfigResult<()> {
    match properties.keys().find(|k| looks_secret(k)) {
        Some(key) => bad(format!(
            "Catalog property {key} looks like a credential; credentials are never stored in a catalog. \
             Give the server its keys in its environment and name them with storageConfigInfo.storageName"
        )),
        None => Ok(()),
    }
}

fn string(config: &Value, field: &str) -> ConfigResult<Option<String>> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => {
            bad(format!("storageConfigInfo.{field} must not be empty"))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => bad(format!("storageConfigInfo.{field} must be a string")),
    }
}

fn flag(config: &Value, field: &str) -> ConfigResult<bool> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => bad(format!("storageConfigInfo.{field} must be true or false")),
    }
}

fn endpoint(config: &Value, field: &str) -> ConfigResult<Option<String>> {
    let Some(value) = string(config, field)? else {
        return Ok(None);
    };
    match url::Url::parse(&value) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            Ok(Some(value.trim_end_matches('/').to_string()))
        }
        _ => bad(format!(
            "storageConfigInfo.{field} must be an http:// or https:// URL, not {value:?}"
        )),
    }
}

fn storage_name(config: &Value) -> ConfigResult<Option<String>> {
    let name = string(config, "storageName")?;
    if let Some(n) = &name {
        if n.len() > 64 || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return bad("storageConfigInfo.storageName must be 1-64 letters, digits or '_'");
        }
    }
    Ok(name)
}

/// The allowed locations listed in a config (not yet canonical).
pub fn allowed_locations(config: &Value) -> ConfigResult<Vec<String>> {
    match config.get("allowedLocations") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                _ => bad("storageConfigInfo.allowedLocations must be an array of strings"),
            })
            .collect(),
        Some(_) => bad("storageConfigInfo.allowedLocations must be an array of strings"),
    }
}

impl StorageConfig {
    /// Parses and checks a `storageConfigInfo` body.
    pub fn parse(config: &Value) -> ConfigResult<StorageConfig> {
        let Some(object) = config.as_object() else {
            return bad("storageConfigInfo must be a JSON object");
        };
        if let Some(key) = object.keys().find(|k| looks_secret(k)) {
            return bad(format!(
                "storageConfigInfo.{key} looks like a credential; credentials are never stored in a catalog. \
                 Give the server its keys in its environment and name them with storageName"
            ));
        }
        let parsed = match config.get("storageType").and_then(Value::as_str) {
            Some("FILE") => StorageConfig::File,
            Some("S3") => {
                let role_arn = string(config, "roleArn")?;
                if role_arn.as_deref().is_some_and(|a| !a.starts_with("arn:")) {
                    return bad("storageConfigInfo.roleArn must be an ARN (arn:...)");
                }
                StorageConfig::S3(S3Storage {
                    region: string(config, "region")?.unwrap_or_else(|| "us-east-1".into()),
                    endpoint: endpoint(config, "endpoint")?,
                    endpoint_internal: endpoint(config, "endpointInternal")?,
                    sts_endpoint: endpoint(config, "stsEndpoint")?,
                    path_style_access: flag(config, "pathStyleAccess")?,
                    role_arn,
                    external_id: string(config, "externalId")?,
                    sts_unavailable: flag(config, "stsUnavailable")?,
                    vend_static_credentials: flag(config, "vendStaticCredentials")?,
                    storage_name: storage_name(config)?,
                    verifies_content_sha256: match config.get("verifiesContentSha256") {
                        None | Some(Value::Null) => None,
                        Some(_) => Some(flag(config, "verifiesContentSha256")?),
                    },
                })
            }
            Some("GCS") => StorageConfig::Gcs(GcsStorage {
                service_account: string(config, "gcsServiceAccount")?,
                storage_name: storage_name(config)?,
            }),
            Some("AZURE") => StorageConfig::Azure(AzureStorage {
                tenant_id: string(config, "tenantId")?.ok_or_else(|| {
                    ConfigError("storageConfigInfo.tenantId is required for AZURE storage".into())
                })?,
                storage_name: storage_name(config)?,
            }),
            Some(other) => {
                return bad(format!(
                    "Unknown storage type {other}; use FILE, S3, GCS or AZURE"
                ))
            }
            None => return bad("storageConfigInfo.storageType is required"),
        };
        if let StorageConfig::S3(s3) = &parsed {
            if s3.vend_static_credentials && !s3.sts_unavailable {
                return bad("storageConfigInfo.vendStaticCredentials needs stsUnavailable: true");
            }
        }
        for location in allowed_locations(config)? {
            parsed.check_scheme(&location)?;
        }
        Ok(parsed)
    }

    /// A stored config, already checked when it was written.
    pub fn of(config: &Value) -> StorageConfig {
        StorageConfig::parse(config).unwrap_or(StorageConfig::File)
    }

    pub fn scheme(&self) -> Scheme {
        match self {
            StorageConfig::File => Scheme::File,
            StorageConfig::S3(_) => Scheme::S3,
            StorageConfig::Gcs(_) => Scheme::Gcs,
            StorageConfig::Azure(_) => Scheme::Azure,
        }
    }

    /// Refuses a location on another kind of store than this config's.
    pub fn check_scheme(&self, location: &str) -> ConfigResult<()> {
        let scheme = scheme_of(location).map_err(|e| ConfigError(e.to_string()))?;
        if scheme == self.scheme() {
            Ok(())
        } else {
            bad(format!(
                "Location {location} is not on {} storage, which this catalog uses",
                self.scheme().as_str()
            ))
        }
    }
}

/// The keys the server uses for S3 and STS.
#[derive(Clone, PartialEq, Eq)]
pub struct S3Keys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Keys {
    // Never print a secret, even in a debug log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Keys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

impl S3Keys {
    /// The server's keys for a storage: `FLOE_STORAGE_<NAME>_ACCESS_KEY_ID` etc. when
    /// named, else `AWS_ACCESS_KEY_ID` etc. `None` when the environment has none.
    pub fn from_env(storage_name: Option<&str>) -> Option<S3Keys> {
        let var = |suffix: &str| {
            let name = match storage_name {
                Some(n) => format!("FLOE_STORAGE_{}_{suffix}", n.to_ascii_uppercase()),
                None => format!("AWS_{suffix}"),
            };
            std::env::var(name).ok().filter(|v| !v.is_empty())
        };
        Some(S3Keys {
            access_key_id: var("ACCESS_KEY_ID")?,
            secret_access_key: var("SECRET_ACCESS_KEY")?,
            session_token: var("SESSION_TOKEN"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn s3_configs_parse_with_defaults() {
        let c = StorageConfig::parse(&json!({
            "storageType": "S3",
            "allowedLocations": ["s3://lake/wh/"],
            "endpoint": "http://127.0.0.1:9000/",
            "pathStyleAccess": true,
            "roleArn": "arn:aws:iam::000000000000:role/x",
        }))
        .unwrap();
        let StorageConfig::S3(s3) = c else { panic!() };
        assert_eq!(s3.region, "us-east-1");
        assert_eq!(s3.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(s3.sts_endpoint(), Some("http://127.0.0.1:9000"));
        assert!(s3.path_style_access && s3.can_vend());
        // Another endpoint is not assumed to check signed bodies; AWS is.
        assert!(!s3.binds_signed_bodies());
        let aws = S3Storage {
            endpoint: None,
            ..s3.clone()
        };
        assert!(aws.binds_signed_bodies());
        let declared = S3Storage {
            verifies_content_sha256: Some(true),
            ..s3
        };
        assert!(declared.binds_signed_bodies());
    }

    #[test]
    fn bad_configs_are_refused() {
        for bad in [
            json!({}),
            json!({"storageType": "HDFS"}),
            json!({"storageType": "S3", "allowedLocations": "s3://x"}),
            json!({"storageType": "S3", "allowedLocations": ["gs://x/"]}),
            json!({"storageType": "S3", "endpoint": "ftp://x"}),
            json!({"storageType": "S3", "roleArn": "role"}),
            json!({"storageType": "S3", "secretAccessKey": "x"}),
            json!({"storageType": "S3", "pathStyleAccess": "yes"}),
            json!({"storageType": "S3", "vendStaticCredentials": true}),
            json!({"storageType": "S3", "verifiesContentSha256": "yes"}),
            json!({"storageType": "S3", "storageName": "a b"}),
            json!({"storageType": "AZURE"}),
            json!({"storageType": "FILE", "allowedLocations": ["s3://x/"]}),
            json!("S3"),
        ] {
            assert!(StorageConfig::parse(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn credential_properties_are_refused() {
        let mut p = crate::model::Properties::new();
        p.insert("s3.endpoint".into(), "x".into());
        assert!(check_properties(&p).is_ok());
        for key in [
            "s3.secret-access-key",
            "s3.access-key-id",
            "adls.sas-token.x",
            "adls.account-key",
            "adls.connection-string",
            "gcs.private-key",
            "gcs.oauth2.token",
        ] {
            let mut p = p.clone();
            p.insert(key.into(), "x".into());
            assert!(check_properties(&p).is_err(), "{key}");
        }
    }
}
