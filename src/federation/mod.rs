//! Federation: a catalog served from a remote Iceberg REST catalog (Polaris's EXTERNAL
//! catalogs with a `connectionConfigInfo` of type `ICEBERG_REST`).
//!
//! - [`Connection`]: where the remote is and how Floe signs in to it, as the service admin
//!   gave it when creating the catalog. It is kept in the security document
//!   (`auth::state::SecurityState::federated`), beside the token signing keys, so every
//!   node learns which catalogs are federated as it learns about grants, and the secret
//!   goes wherever those keys go and nowhere else: never into a response, a log line, an
//!   event or an idempotency record.
//! - `remote`: the HTTP client that forwards a request to the remote catalog (its prefix
//!   discovered from the remote's `/v1/config`, its OAuth token fetched and renewed).
//! - `rules`: what Floe checks before forwarding: the privileges each request needs here,
//!   the endpoints it does not forward, and what it removes from the remote's answers
//!   (storage credentials, which the remote scoped for Floe's principal, not the caller).
//!
//! The HTTP side (`http::federated`) decides, per request, whether its catalog is
//! federated, and forwards it instead of serving it from the store.

pub mod remote;
pub mod rules;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Longest `uri` or `tokenUri` accepted.
pub const MAX_URI_BYTES: usize = 2048;
/// Longest secret (client secret, bearer token) accepted.
pub const MAX_SECRET_BYTES: usize = 8192;

/// A remote Iceberg REST catalog and the credentials Floe uses there.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// The remote's REST root: requests go to `{uri}/v1/…`.
    pub uri: String,
    /// The remote's `warehouse` (its catalog name), sent to its `/v1/config`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_catalog_name: Option<String>,
    pub auth: RemoteAuth,
    /// Polaris's free-form connection properties, kept and shown as given.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
}

/// How Floe signs in to the remote catalog.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RemoteAuth {
    /// OAuth2 client credentials, exchanged at `token_uri` (the remote's
    /// `/v1/oauth/tokens` when not given) for a bearer token, renewed before it expires.
    #[serde(rename_all = "camelCase")]
    Oauth {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token_uri: Option<String>,
        client_id: String,
        client_secret: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        scopes: Vec<String>,
    },
    /// A fixed bearer token.
    Bearer { token: String },
    /// No credentials: the remote admits Floe as it is (a network boundary, mTLS at a
    /// proxy).
    Implicit,
}

/// Never prints a secret (a connection may reach a log through `{:?}`).
impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("uri", &self.uri)
            .field("remote_catalog_name", &self.remote_catalog_name)
            .field("auth", &self.auth.kind())
            .finish_non_exhaustive()
    }
}

/// Only the kind: the fields are secrets, or go with one.
impl std::fmt::Debug for RemoteAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind())
    }
}

impl RemoteAuth {
    /// Polaris's `authenticationType`.
    pub fn kind(&self) -> &'static str {
        match self {
            RemoteAuth::Oauth { .. } => "OAUTH",
            RemoteAuth::Bearer { .. } => "BEARER",
            RemoteAuth::Implicit => "IMPLICIT",
        }
    }
}

/// Why a `connectionConfigInfo` was refused (a 400's message).
#[derive(Debug, PartialEq)]
pub struct Invalid(pub String);

fn invalid(message: impl Into<String>) -> Invalid {
    Invalid(message.into())
}

/// A string field of `object`, if present; anything but a string is refused.
fn text<'a>(object: &'a Value, field: &str, within: &str) -> Result<Option<&'a str>, Invalid> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(format!("{within}.{field} must be a string"))),
    }
}

fn required<'a>(object: &'a Value, field: &str, within: &str) -> Result<&'a str, Invalid> {
    match text(object, field, within)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => Err(invalid(format!("{within}.{field} is required"))),
    }
}

/// An absolute http(s) URL without credentials, query or fragment.
fn check_url(url: &str, field: &str) -> Result<(), Invalid> {
    if url.len() > MAX_URI_BYTES {
        return Err(invalid(format!(
            "{field} is longer than {MAX_URI_BYTES} bytes"
        )));
    }
    let parsed = url::Url::parse(url)
        .map_err(|e| invalid(format!("{field} is not an absolute URL ({e}): {url:?}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(invalid(format!(
            "{field} must be an http or https URL with a host, not {url:?}"
        )));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid(format!(
            "{field} must not hold credentials: give them in authenticationParameters"
        )));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid(format!(
            "{field} must not have a query or a fragment: {url:?}"
        )));
    }
    Ok(())
}

fn secret(object: &Value, field: &str) -> Result<String, Invalid> {
    let value = required(object, field, "authenticationParameters")?;
    if value.len() > MAX_SECRET_BYTES {
        return Err(invalid(format!(
            "authenticationParameters.{field} is longer than {MAX_SECRET_BYTES} bytes"
        )));
    }
    Ok(value.to_string())
}

impl Connection {
    /// Parses Polaris's `connectionConfigInfo`. Only `ICEBERG_REST` connections with
    /// `OAUTH`, `BEARER` or `IMPLICIT` authentication can be served here.
    pub fn parse(info: &Value) -> Result<Connection, Invalid> {
        const AT: &str = "connectionConfigInfo";
        if !info.is_object() {
            return Err(invalid(format!("{AT} must be an object")));
        }
        match required(info, "connectionType", AT)? {
            "ICEBERG_REST" => {}
            other @ ("HADOOP" | "HIVE" | "BIGQUERY") => {
                return Err(invalid(format!(
                    "{AT}.connectionType {other} is not supported: Floe federates Iceberg REST catalogs (ICEBERG_REST) only"
                )))
            }
            other => {
                return Err(invalid(format!(
                    "Unknown {AT}.connectionType {other:?}: ICEBERG_REST, HADOOP, HIVE or BIGQUERY"
                )))
            }
        }
        let uri = required(info, "uri", AT)?.trim_end_matches('/').to_string();
        check_url(&uri, "connectionConfigInfo.uri")?;
        let remote_catalog_name = text(info, "remoteCatalogName", AT)?
            .filter(|name| !name.is_empty())
            .map(str::to_string);
        let properties = match info.get("properties") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(p) => serde_json::from_value(p.clone())
                .map_err(|_| invalid(format!("{AT}.properties must map strings to strings")))?,
        };
        let params = info.get("authenticationParameters").ok_or_else(|| {
            invalid(format!(
                "{AT}.authenticationParameters is required (authenticationType OAUTH, BEARER or IMPLICIT)"
            ))
        })?;
        if !params.is_object() {
            return Err(invalid(format!(
                "{AT}.authenticationParameters must be an object"
            )));
        }
        let auth = match required(params, "authenticationType", "authenticationParameters")? {
            "OAUTH" => {
                let token_uri = text(params, "tokenUri", "authenticationParameters")?
                    .filter(|u| !u.is_empty())
                    .map(str::to_string);
                if let Some(token_uri) = &token_uri {
                    check_url(token_uri, "authenticationParameters.tokenUri")?;
                }
                let scopes = match params.get("scopes") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(s) => serde_json::from_value::<Vec<String>>(s.clone()).map_err(|_| {
                        invalid("authenticationParameters.scopes must be a list of strings")
                    })?,
                };
                RemoteAuth::Oauth {
                    token_uri,
                    client_id: required(params, "clientId", "authenticationParameters")?
                        .to_string(),
                    client_secret: secret(params, "clientSecret")?,
                    scopes,
                }
            }
            "BEARER" => RemoteAuth::Bearer {
                token: secret(params, "bearerToken")?,
            },
            "IMPLICIT" => RemoteAuth::Implicit,
            other @ ("SIGV4" | "GCP") => {
                return Err(invalid(format!(
                    "authenticationParameters.authenticationType {other} is not supported: OAUTH, BEARER or IMPLICIT"
                )))
            }
            other => {
                return Err(invalid(format!(
                    "Unknown authenticationParameters.authenticationType {other:?}: OAUTH, BEARER or IMPLICIT"
                )))
            }
        };
        Ok(Connection {
            uri,
            remote_catalog_name,
            auth,
            properties,
        })
    }

    /// Polaris's `connectionConfigInfo` as shown to a reader of the catalog: everything
    /// but the secrets (`clientSecret` and `bearerToken` are input-only).
    pub fn view(&self) -> Value {
        let mut auth = json!({ "authenticationType": self.auth.kind() });
        if let RemoteAuth::Oauth {
            token_uri,
            client_id,
            scopes,
            ..
        } = &self.auth
        {
            auth["clientId"] = json!(client_id);
            if let Some(token_uri) = token_uri {
                auth["tokenUri"] = json!(token_uri);
            }
            if !scopes.is_empty() {
                auth["scopes"] = json!(scopes);
            }
        }
        let mut view = json!({
            "connectionType": "ICEBERG_REST",
            "uri": self.uri,
            "authenticationParameters": auth,
        });
        if let Some(name) = &self.remote_catalog_name {
            view["remoteCatalogName"] = json!(name);
        }
        if !self.properties.is_empty() {
            view["properties"] = json!(self.properties);
        }
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth() -> Value {
        json!({
            "connectionType": "ICEBERG_REST",
            "uri": "http://127.0.0.1:8181/api/catalog/",
            "remoteCatalogName": "lake",
            "authenticationParameters": {
                "authenticationType": "OAUTH",
                "clientId": "id",
                "clientSecret": "s3cret",
                "scopes": ["PRINCIPAL_ROLE:ALL"],
            },
        })
    }

    #[test]
    fn parses_polaris_shapes_and_shows_them_without_secrets() {
        let connection = Connection::parse(&oauth()).unwrap();
        assert_eq!(connection.uri, "http://127.0.0.1:8181/api/catalog");
        assert_eq!(connection.remote_catalog_name.as_deref(), Some("lake"));
        let view = connection.view();
        assert_eq!(view["authenticationParameters"]["clientId"], "id");
        assert_eq!(
            view["authenticationParameters"]["scopes"],
            json!(["PRINCIPAL_ROLE:ALL"])
        );
        assert!(!view.to_string().contains("s3cret"), "{view}");
        assert!(!format!("{connection:?}").contains("s3cret"));
        let bearer = json!({"connectionType": "ICEBERG_REST", "uri": "https://remote.example",
            "authenticationParameters": {"authenticationType": "BEARER", "bearerToken": "tok"}});
        let bearer = Connection::parse(&bearer).unwrap();
        assert_eq!(
            bearer.auth,
            RemoteAuth::Bearer {
                token: "tok".into()
            }
        );
        assert!(!bearer.view().to_string().contains("tok\""));
        // Kept in the security document and read back as it was.
        let stored: Connection =
            serde_json::from_str(&serde_json::to_string(&connection).unwrap()).unwrap();
        assert_eq!(stored, connection);
    }

    #[test]
    fn refuses_what_cannot_be_served() {
        let with = |path: &[&str], value: Value| {
            let mut info = oauth();
            let mut at = &mut info;
            for key in &path[..path.len() - 1] {
                at = &mut at[*key];
            }
            at[path[path.len() - 1]] = value;
            Connection::parse(&info).unwrap_err().0
        };
        assert!(with(&["connectionType"], json!("HIVE")).contains("not supported"));
        assert!(with(&["connectionType"], json!("X")).contains("Unknown"));
        assert!(with(&["uri"], json!("ftp://host")).contains("http or https"));
        assert!(with(&["uri"], json!("not a url")).contains("absolute URL"));
        assert!(with(&["uri"], json!("http://u:p@host")).contains("credentials"));
        assert!(with(&["uri"], json!("http://host?x=1")).contains("query"));
        assert!(with(&["uri"], json!(7)).contains("must be a string"));
        let auth = |field: &str, value: Value| with(&["authenticationParameters", field], value);
        assert!(auth("authenticationType", json!("SIGV4")).contains("not supported"));
        assert!(auth("clientSecret", json!("")).contains("clientSecret is required"));
        assert!(auth("clientSecret", json!("x".repeat(MAX_SECRET_BYTES + 1))).contains("longer"));
        assert!(auth("scopes", json!("one")).contains("list of strings"));
        assert!(auth("tokenUri", json!("nope")).contains("tokenUri"));
        let mut info = oauth();
        info.as_object_mut()
            .unwrap()
            .remove("authenticationParameters");
        assert!(Connection::parse(&info).unwrap_err().0.contains("required"));
        assert!(Connection::parse(&json!([])).is_err());
    }
}
