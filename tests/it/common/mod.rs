//! Shared helpers of the black-box HTTP tests: a real Floe server on a port-0 listener
//! with its own data directory, a thin client, and checks of the spec's error body.
//!
//! Every request goes through [`Server::send`], which fails the test on any 500: a 500
//! is always a server bug.

pub mod auth;
pub mod files;

use std::path::PathBuf;

pub use auth::*;
pub use files::{local_path, tree, Files};

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::sync::watch;

/// The catalog every server bootstraps.
pub const CATALOG: &str = "default";
/// REST prefix of the default catalog.
pub const V1: &str = "/v1/default";

/// With `FLOE_TEST_DATABASE_URL` set, every test server keeps its state in PostgreSQL, in
/// a fresh schema of its own (so tests stay independent and can run in parallel).
pub async fn postgres_for_test() -> Option<floe::store::postgres::PostgresSettings> {
    let url = std::env::var("FLOE_TEST_DATABASE_URL").ok()?;
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to FLOE_TEST_DATABASE_URL");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("create a test schema");
    let separator = if url.contains('?') { '&' } else { '?' };
    let mut settings = floe::store::postgres::PostgresSettings::new(format!(
        "{url}{separator}options=-csearch_path%3D{schema}"
    ));
    // On by default, as `floe serve` runs; the test command runs the HTTP suites once
    // more with FLOE_DB_GROUP_COMMIT=false.
    settings.group_commit = std::env::var("FLOE_DB_GROUP_COMMIT").map_or(true, |v| v != "false");
    Some(settings)
}

/// A running server; shut down when dropped.
pub struct Server {
    pub base: String,
    pub client: reqwest::Client,
    pub dir: tempfile::TempDir,
    /// The files behind the server's locations (the data dir, or S3).
    pub files: Files,
    /// Root of the catalogs created without a base location (`warehouse()`'s parent).
    root: String,
    /// A place outside every catalog's allowed locations.
    outside: String,
    /// The same server (same catalog) with every request routed, its hot lane closed:
    /// for tests that check the lane answers as the router does.
    pub routed: String,
    shutdown: Option<watch::Sender<()>>,
    /// What it was started with (`restart` starts another with it).
    config: floe::server::ServerConfig,
}

impl Server {
    pub async fn start() -> Server {
        Server::start_with(|_| {}).await
    }

    /// Starts a server after `configure` adjusted its config (fsync is off already).
    pub async fn start_with(configure: impl FnOnce(&mut floe::server::ServerConfig)) -> Server {
        // Kept models and written documents checked on every commit, in release builds too.
        floe::catalog::set_self_check(true);
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut config = floe::server::ServerConfig::new(dir.path().join("data"));
        config.fsync = false;
        if let Some(settings) = postgres_for_test().await {
            config.postgres = Some(settings);
        }
        let s3 = files::s3_for_test();
        let (root, outside) = match &s3 {
            Some(s3) => {
                let root = s3.fresh_root("http");
                config.warehouse = Some(root.clone());
                config.default_storage = Some(s3.storage_config());
                (root, s3.fresh_root("outside"))
            }
            None => {
                let data = dir.path().join("data");
                std::fs::create_dir_all(&data).expect("data dir");
                let data = data.canonicalize().expect("data dir exists");
                let outside = dir.path().join("outside");
                std::fs::create_dir_all(&outside).expect("outside dir");
                let outside = outside.canonicalize().expect("outside dir exists");
                (
                    format!("file://{}/warehouse", data.display()),
                    format!("file://{}", outside.display()),
                )
            }
        };
        configure(&mut config);
        let (base, routed, shutdown) = serve(&config).await;
        Server {
            base,
            routed,
            client: reqwest::Client::new(),
            dir,
            files: Files::for_target(s3.as_ref()),
            root,
            outside,
            shutdown: Some(shutdown),
            config,
        }
    }

    /// Stops this server and starts another with the same config and data (the next
    /// start after a crash, when `between` the two the test breaks what a crash breaks).
    pub async fn restart(&mut self, between: impl FnOnce(&Server)) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        between(self);
        let (base, routed, shutdown) = serve(&self.config).await;
        self.base = base;
        self.routed = routed;
        self.shutdown = Some(shutdown);
    }

    /// The stored security model document, read from the store itself (for what no API
    /// shows, such as the grants kept for an undrop).
    pub async fn security_document(&self) -> Value {
        let text: String = match &self.config.postgres {
            Some(settings) => {
                let (client, connection) =
                    tokio_postgres::connect(&settings.url, tokio_postgres::NoTls)
                        .await
                        .expect("connect to the test database");
                tokio::spawn(connection);
                client
                    .query_one("SELECT document FROM security", &[])
                    .await
                    .expect("the security row")
                    .get(0)
            }
            None => rusqlite::Connection::open(self.data_dir().join("catalog.db"))
                .expect("open the embedded store")
                .query_row("SELECT document FROM security", [], |r| r.get(0))
                .expect("the security row"),
        };
        serde_json::from_str(&text).expect("the security document is JSON")
    }

    /// Whether the catalog is in PostgreSQL (`FLOE_TEST_DATABASE_URL`).
    pub fn on_postgres(&self) -> bool {
        self.config.postgres.is_some()
    }

    /// The canonical directory of the data dir (the warehouse lives under it).
    pub fn data_dir(&self) -> PathBuf {
        self.dir
            .path()
            .join("data")
            .canonicalize()
            .expect("data dir exists")
    }

    /// The default catalog's base location, `file:///.../warehouse/default` (or
    /// `s3://BUCKET/http-<uuid>/default`).
    pub fn warehouse(&self) -> String {
        format!("{}/{CATALOG}", self.root)
    }

    /// Where catalogs created without a base location go (`file:///.../warehouse` or
    /// `s3://BUCKET/http-<uuid>`).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Whether the default catalog keeps its files on S3.
    pub fn on_s3(&self) -> bool {
        matches!(self.files, Files::S3 { .. })
    }

    /// A directory of this test outside the catalogs' locations (on the same storage).
    pub fn outside(&self) -> String {
        self.outside.clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request; panics on a 500 (always a bug), with what was asked.
    pub async fn send(&self, what: String, request: reqwest::RequestBuilder) -> Resp {
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{what}: request failed: {e}"));
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        assert_ne!(
            status, 500,
            "{what} answered 500 (a server bug); body: {body}"
        );
        Resp {
            what,
            status,
            headers,
            body,
        }
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        let mut request = self.client.request(method.clone(), self.url(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        let what = match body {
            Some(body) => format!("{method} {path} {body}"),
            None => format!("{method} {path}"),
        };
        self.send(what, request).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }

    pub async fn head(&self, path: &str) -> Resp {
        self.call(Method::HEAD, path, None).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.call(Method::DELETE, path, None).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// POSTs a body as given (for malformed JSON and oversized bodies).
    pub async fn post_raw(&self, path: &str, body: impl Into<String>) -> Resp {
        let body: String = body.into();
        let shown: String = body.chars().take(200).collect();
        let request = self
            .client
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body);
        self.send(format!("POST {path} {shown}"), request).await
    }

    /// Any request with a JSON body and extra headers.
    pub async fn call_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut request = self.client.request(method.clone(), self.url(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let shown = body.map(Value::to_string).unwrap_or_default();
        self.send(format!("{method} {path} {shown} {headers:?}"), request)
            .await
    }

    /// GET with extra headers.
    pub async fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        let mut request = self.client.get(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(format!("GET {path} {headers:?}"), request).await
    }

    // ---- namespaces --------------------------------------------------------------------

    pub async fn create_namespace(&self, levels: &[&str]) -> Value {
        self.create_namespace_with(levels, json!({})).await
    }

    pub async fn create_namespace_with(&self, levels: &[&str], properties: Value) -> Value {
        self.post(
            &format!("{V1}/namespaces"),
            &json!({ "namespace": levels, "properties": properties }),
        )
        .await
        .ok(200)
        .json()
    }

    /// Top-level namespaces (or the children of `parent`), unpaged.
    pub async fn list_namespaces(&self, parent: Option<&[&str]>) -> Vec<Vec<String>> {
        let path = match parent {
            Some(p) => format!("{V1}/namespaces?parent={}", ns(p)),
            None => format!("{V1}/namespaces"),
        };
        let body = self.get(&path).await.ok(200).json();
        serde_json::from_value(body["namespaces"].clone()).expect("namespaces is a list")
    }

    pub async fn namespace_properties(&self, levels: &[&str]) -> Value {
        self.get(&ns_url(levels)).await.ok(200).json()["properties"].clone()
    }

    // ---- tables ------------------------------------------------------------------------

    /// Creates a table with [`schema`]; returns the LoadTableResult.
    pub async fn create_table(&self, namespace: &[&str], name: &str) -> Value {
        self.create_table_with(namespace, json!({ "name": name, "schema": schema() }))
            .await
            .ok(200)
            .json()
    }

    pub async fn create_table_with(&self, namespace: &[&str], body: Value) -> Resp {
        self.post(&tables_url(namespace), &body).await
    }

    pub async fn load_table(&self, namespace: &[&str], name: &str) -> Value {
        self.get(&table_url(namespace, name)).await.ok(200).json()
    }

    pub async fn commit(&self, namespace: &[&str], name: &str, body: Value) -> Resp {
        self.post(&table_url(namespace, name), &body).await
    }

    /// Sets properties on a table with no requirements; returns the CommitTableResponse.
    pub async fn set_table_properties(
        &self,
        namespace: &[&str],
        name: &str,
        updates: Value,
    ) -> Value {
        self.commit(
            namespace,
            name,
            json!({ "updates": [{ "action": "set-properties", "updates": updates }] }),
        )
        .await
        .ok(200)
        .json()
    }

    pub async fn list_tables(&self, namespace: &[&str]) -> Vec<String> {
        names(&self.get(&tables_url(namespace)).await.ok(200).json())
    }

    /// The id of the default catalog's newest dropped table or view (undrop, purge).
    pub async fn newest_dropped_id(&self) -> String {
        let dropped = self
            .get("/api/management/v1/catalogs/default/dropped")
            .await
            .ok(200)
            .json();
        dropped["dropped"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("nothing dropped: {dropped}"))
            .to_string()
    }

    /// The table's metadata location, or `None` when the table does not load.
    pub async fn table_pointer(&self, namespace: &[&str], name: &str) -> Option<String> {
        let r = self.get(&table_url(namespace, name)).await;
        match r.status {
            200 => Some(
                r.json()["metadata-location"]
                    .as_str()
                    .expect("metadata-location")
                    .to_string(),
            ),
            404 => None,
            other => panic!("{}: unexpected {other}: {}", r.what, r.body),
        }
    }

    // ---- views -------------------------------------------------------------------------

    pub async fn create_view(&self, namespace: &[&str], name: &str) -> Value {
        self.post(
            &views_url(namespace),
            &view_body(name, namespace, "SELECT 1"),
        )
        .await
        .ok(200)
        .json()
    }

    pub async fn load_view(&self, namespace: &[&str], name: &str) -> Value {
        self.get(&view_url(namespace, name)).await.ok(200).json()
    }

    pub async fn list_views(&self, namespace: &[&str]) -> Vec<String> {
        names(&self.get(&views_url(namespace)).await.ok(200).json())
    }
}

/// Builds a server from `config` and serves it on a free port, and the same app with its
/// hot lane closed on another; returns their base URLs and what stops both.
async fn serve(config: &floe::server::ServerConfig) -> (String, String, watch::Sender<()>) {
    let app = floe::server::build(config).await.expect("server builds");
    let (shutdown, shutdown_rx) = watch::channel(());
    let mut bases = Vec::new();
    for app in [app.without_lane(), app] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a port");
        bases.push(format!(
            "http://{}",
            listener.local_addr().expect("address")
        ));
        let mut stopped = shutdown_rx.clone();
        tokio::spawn(floe::server::run(listener, app, async move {
            // Sent or dropped: either way, stop.
            let _ = stopped.changed().await;
        }));
    }
    let (base, routed) = (bases.pop().expect("two"), bases.pop().expect("two"));
    (base, routed, shutdown)
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// A response, read in full.
#[derive(Debug)]
pub struct Resp {
    /// The request, for messages.
    pub what: String,
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Resp {
    /// Asserts the status; returns self for chaining.
    #[track_caller]
    pub fn ok(self, status: u16) -> Self {
        assert_eq!(
            self.status, status,
            "{}: expected {status}, got {}; body: {}",
            self.what, self.status, self.body
        );
        self
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("{}: body is not JSON ({e}): {}", self.what, self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().expect("ASCII header").to_string())
    }

    /// Asserts the status and the spec's `ErrorModel` body with the given exception type;
    /// returns the message.
    #[track_caller]
    pub fn error(&self, status: u16, error_type: &str) -> String {
        let message = self.error_status(status);
        let body = self.json();
        assert_eq!(
            body["error"]["type"], error_type,
            "{}: wrong error type; body: {}",
            self.what, self.body
        );
        message
    }

    /// Asserts the status and an `ErrorModel` body of any type; returns the message.
    #[track_caller]
    pub fn error_status(&self, status: u16) -> String {
        assert_eq!(
            self.status, status,
            "{}: expected {status}, got {}; body: {}",
            self.what, self.status, self.body
        );
        let body = self.json();
        let error = body["error"]
            .as_object()
            .unwrap_or_else(|| panic!("{}: no error object in {}", self.what, self.body));
        assert_eq!(
            error.get("code").and_then(Value::as_u64),
            Some(u64::from(status)),
            "{}: error.code must equal the status; body: {}",
            self.what,
            self.body
        );
        assert!(
            error
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.is_empty()),
            "{}: error.type must be a non-empty string; body: {}",
            self.what,
            self.body
        );
        error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_else(|| {
                panic!(
                    "{}: error.message must be a string: {}",
                    self.what, self.body
                )
            })
            .to_string()
    }
}

// ---- paths ------------------------------------------------------------------------------

fn enc(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

/// A namespace as a path segment: levels percent-encoded and joined by `%1F`.
pub fn ns(levels: &[&str]) -> String {
    levels
        .iter()
        .map(|l| enc(l))
        .collect::<Vec<_>>()
        .join("%1F")
}

pub fn ns_url(levels: &[&str]) -> String {
    format!("{V1}/namespaces/{}", ns(levels))
}

pub fn tables_url(namespace: &[&str]) -> String {
    format!("{}/tables", ns_url(namespace))
}

pub fn table_url(namespace: &[&str], name: &str) -> String {
    format!("{}/tables/{}", ns_url(namespace), enc(name))
}

pub fn views_url(namespace: &[&str]) -> String {
    format!("{}/views", ns_url(namespace))
}

pub fn view_url(namespace: &[&str], name: &str) -> String {
    format!("{}/views/{}", ns_url(namespace), enc(name))
}

/// A `TableIdentifier` body.
pub fn ident(namespace: &[&str], name: &str) -> Value {
    json!({ "namespace": namespace, "name": name })
}

/// The names in a ListTablesResponse (`identifiers`).
pub fn names(list: &Value) -> Vec<String> {
    list["identifiers"]
        .as_array()
        .expect("identifiers is a list")
        .iter()
        .map(|i| i["name"].as_str().expect("name").to_string())
        .collect()
}

// ---- bodies -----------------------------------------------------------------------------

pub fn schema() -> Value {
    json!({
        "type": "struct",
        "schema-id": 0,
        "fields": [
            { "id": 1, "name": "id", "required": true, "type": "long" },
            { "id": 2, "name": "data", "required": false, "type": "string" }
        ]
    })
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub fn view_version(version_id: i64, namespace: &[&str], sql: &str) -> Value {
    json!({
        "version-id": version_id,
        "schema-id": 0,
        "timestamp-ms": now_ms(),
        "summary": { "engine-name": "floe-tests" },
        "representations": [{ "type": "sql", "sql": sql, "dialect": "spark" }],
        "default-namespace": namespace,
    })
}

pub fn view_body(name: &str, namespace: &[&str], sql: &str) -> Value {
    json!({
        "name": name,
        "schema": schema(),
        "view-version": view_version(1, namespace, sql),
        "properties": { "comment": "a test view" },
    })
}

impl Server {
    /// The metadata files of a table, from its LoadTableResult (names, sorted).
    pub async fn metadata_files(&self, load: &Value) -> Vec<String> {
        let location = load["metadata"]["location"].as_str().expect("location");
        self.files.list(&format!("{location}/metadata")).await
    }
}

/// What a table's property is, from a LoadTableResult.
pub fn table_property(load: &Value, key: &str) -> Option<String> {
    load["metadata"]["properties"][key]
        .as_str()
        .map(str::to_string)
}

// ---- whole-state snapshots ----------------------------------------------------------------

impl Server {
    /// The default catalog's whole visible state, read through the API: every namespace
    /// with its properties, every table and view with its pointer, and every file in the
    /// data directory except the database's (on S3, every object under the server's
    /// warehouse and outside places too). Compare two snapshots to prove a rejected
    /// request changed nothing.
    pub async fn state(&self) -> Value {
        let mut namespaces = serde_json::Map::new();
        let mut queue: Vec<Vec<String>> = self.list_namespaces(None).await.into_iter().collect();
        while let Some(levels) = queue.pop() {
            let refs: Vec<&str> = levels.iter().map(String::as_str).collect();
            let mut tables = serde_json::Map::new();
            for name in self.list_tables(&refs).await {
                let pointer = self.table_pointer(&refs, &name).await;
                tables.insert(name, json!(pointer));
            }
            let mut views = serde_json::Map::new();
            for name in self.list_views(&refs).await {
                let loaded = self.load_view(&refs, &name).await;
                views.insert(name, loaded["metadata-location"].clone());
            }
            namespaces.insert(
                levels.join("."),
                json!({
                    "properties": self.namespace_properties(&refs).await,
                    "tables": tables,
                    "views": views,
                }),
            );
            queue.extend(self.list_namespaces(Some(&refs)).await);
        }
        let mut files: Vec<String> = tree(&self.data_dir())
            .into_iter()
            .filter(|f| !f.starts_with("catalog.db"))
            .collect();
        if self.on_s3() {
            let root = format!("{}/", self.root);
            for prefix in [&root, &self.outside] {
                let listed = self.files.list(prefix).await;
                files.extend(listed.into_iter().map(|f| format!("{prefix}/{f}")));
            }
        }
        json!({ "namespaces": namespaces, "files": files })
    }

    /// Asserts that the state is still `before`.
    pub async fn assert_unchanged(&self, before: &Value, after_what: &str) {
        let now = self.state().await;
        assert_eq!(&now, before, "state changed after {after_what}");
    }
}
