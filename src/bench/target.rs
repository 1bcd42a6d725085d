//! The catalog server under test: where its REST API and management API live, which
//! prefix a warehouse maps to, and the paths of namespaces, tables and views.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use bytes::Bytes;
use hyper::Method;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::{json, Value};

use super::auth::{Auth, TokenSource};
use super::client::{self, Client, Req, Response};

pub use crate::model::path_segment as encode;

/// How to reach the server.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// The server's root, `http://host:port`.
    pub url: url::Url,
    /// Where `/v1/...` of the REST API lives under the root: empty for Floe and Iceberg's
    /// reference server, `/api/catalog` for Polaris.
    pub rest_root: String,
    pub auth: Auth,
    pub timeout: Duration,
    /// More nodes serving the same catalog (e.g. Floe nodes over one database): users'
    /// connections are spread round-robin over `url` and these.
    pub nodes: Vec<url::Url>,
}

impl TargetConfig {
    pub fn new(url: url::Url) -> TargetConfig {
        TargetConfig {
            url,
            rest_root: String::new(),
            auth: Auth::None,
            timeout: Duration::from_secs(60),
            nodes: Vec::new(),
        }
    }

    fn root(&self) -> String {
        self.url.path().trim_end_matches('/').to_string()
    }
}

/// A connected target.
pub struct Target {
    pub client: Arc<Client>,
    pub config: TargetConfig,
    pub tokens: Option<Arc<TokenSource>>,
}

impl Target {
    pub async fn connect(config: TargetConfig) -> anyhow::Result<Target> {
        let tokens = TokenSource::start(&config.auth).await?;
        let client =
            Client::connect_to(&config.url, &config.nodes, config.timeout, tokens.clone()).await?;
        Ok(Target {
            client: Arc::new(client),
            config,
            tokens,
        })
    }

    /// One request outside any measurement (setup and discovery).
    pub async fn call(&self, req: &Req) -> anyhow::Result<Response> {
        self.client
            .send_pooled(req)
            .await
            .map_err(|f| anyhow!("{} {}: {}", req.method, req.uri, f.label()))
    }

    pub async fn call_json(
        &self,
        method: Method,
        path: &str,
        body: &Value,
    ) -> anyhow::Result<Response> {
        let req = Req::with_body(method, client::uri(path)?, Bytes::from(body.to_string()));
        self.call(&req).await
    }

    /// The management API's catalogs collection (Polaris's path).
    pub fn management_catalogs(&self) -> String {
        format!("{}/api/management/v1/catalogs", self.config.root())
    }

    /// The REST paths of the catalog a warehouse names, from `GET /v1/config`.
    pub async fn catalog(&self, warehouse: &str) -> anyhow::Result<Paths> {
        let v1 = format!("{}{}/v1", self.config.root(), self.config.rest_root);
        let path = format!("{v1}/config?warehouse={}", encode(warehouse));
        let response = self.call(&Req::get(client::uri(&path)?)).await?;
        if response.status != 200 {
            anyhow::bail!(
                "GET {path} answered {}: {}",
                response.status,
                String::from_utf8_lossy(&response.body)
            );
        }
        let config: Value = serde_json::from_slice(&response.body).context("config is not JSON")?;
        let setting = |key: &str| {
            config["overrides"][key]
                .as_str()
                .or_else(|| config["defaults"][key].as_str())
                .map(str::to_string)
        };
        // The prefix goes into paths as the server spelled it, as Iceberg's Java client
        // puts it (Nessie's `main|warehouse` comes already escaped: `main%7Cwarehouse`).
        let base = match setting("prefix") {
            Some(p) => format!("{v1}/{p}"),
            None => v1,
        };
        Ok(Paths {
            base,
            separator: setting("namespace-separator")
                .map_or_else(|| DEFAULT_SEPARATOR.to_string(), |s| separator_in_path(&s)),
        })
    }

    /// Creates a catalog through the Polaris management API (201 expected).
    pub fn create_catalog_body(name: &str, base_location: &str, storage: &Value) -> Value {
        json!({
            "catalog": {
                "type": "INTERNAL",
                "name": name,
                "properties": { "default-base-location": base_location },
                "storageConfigInfo": storage,
            }
        })
    }
}

/// The spec's default separator of namespace levels in paths.
pub const DEFAULT_SEPARATOR: &str = "%1F";

/// A `namespace-separator` from the config as it goes into paths: servers advertise it
/// encoded (Iceberg's reference server: `%2E`); a raw one is encoded here.
fn separator_in_path(advertised: &str) -> String {
    if advertised.contains('%') {
        advertised.to_string()
    } else {
        utf8_percent_encode(advertised, NON_ALPHANUMERIC).to_string()
    }
}

/// REST paths of one catalog, percent-encoded, namespace levels joined by the server's
/// separator.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `/v1/{prefix}` (or `/v1` for a server without prefixes).
    pub base: String,
    /// Joins namespace levels in paths, already encoded (`%1F` unless the server says).
    pub separator: String,
}

impl Paths {
    /// Paths under `base` with the default separator.
    pub fn new(base: impl Into<String>) -> Paths {
        Paths {
            base: base.into(),
            separator: DEFAULT_SEPARATOR.into(),
        }
    }

    /// Levels encoded and joined by `%1F` (the spec's default).
    pub fn ns(levels: &[String]) -> String {
        Paths::joined(levels, DEFAULT_SEPARATOR)
    }

    fn joined(levels: &[String], separator: &str) -> String {
        levels
            .iter()
            .map(|l| encode(l))
            .collect::<Vec<_>>()
            .join(separator)
    }

    pub fn namespaces(&self) -> String {
        format!("{}/namespaces", self.base)
    }

    pub fn children(&self, parent: &[String]) -> String {
        let parent = Paths::joined(parent, &self.separator);
        format!("{}/namespaces?parent={parent}", self.base)
    }

    pub fn namespace(&self, levels: &[String]) -> String {
        let levels = Paths::joined(levels, &self.separator);
        format!("{}/namespaces/{levels}", self.base)
    }

    pub fn namespace_properties(&self, levels: &[String]) -> String {
        format!("{}/properties", self.namespace(levels))
    }

    pub fn tables(&self, levels: &[String]) -> String {
        format!("{}/tables", self.namespace(levels))
    }

    pub fn table(&self, levels: &[String], name: &str) -> String {
        format!("{}/tables/{}", self.namespace(levels), encode(name))
    }

    pub fn views(&self, levels: &[String]) -> String {
        format!("{}/views", self.namespace(levels))
    }

    pub fn view(&self, levels: &[String], name: &str) -> String {
        format!("{}/views/{}", self.namespace(levels), encode(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_levels_joined_by_unit_separator() {
        let paths = Paths::new("/v1/C_0");
        let levels = vec!["NS_0".to_string(), "a b/c".to_string()];
        assert_eq!(
            paths.namespace(&levels),
            "/v1/C_0/namespaces/NS_0%1Fa%20b%2Fc"
        );
        assert_eq!(
            paths.table(&levels, "T_1"),
            "/v1/C_0/namespaces/NS_0%1Fa%20b%2Fc/tables/T_1"
        );
        assert_eq!(
            paths.children(&levels[..1]),
            "/v1/C_0/namespaces?parent=NS_0"
        );
    }

    #[test]
    fn the_server_s_separator_joins_levels() {
        assert_eq!(separator_in_path("%2E"), "%2E");
        assert_eq!(separator_in_path("."), "%2E");
        let paths = Paths {
            base: "/v1".into(),
            separator: separator_in_path("%2E"),
        };
        let levels = vec!["NS_0".to_string(), "NS_1".to_string()];
        assert_eq!(paths.namespace(&levels), "/v1/namespaces/NS_0%2ENS_1");
        assert_eq!(paths.children(&levels), "/v1/namespaces?parent=NS_0%2ENS_1");
    }
}
