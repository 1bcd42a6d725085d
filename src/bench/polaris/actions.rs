//! The Polaris suite's requests: paths, bodies, expected statuses, checks, retries and
//! the names its report gives them.

use std::sync::Arc;

use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Map, Value};

use super::Dataset;
use crate::bench::client::{uri, Req};
use crate::bench::op::{Call, Check, Retry, UuidField};
use crate::bench::target::{Paths, Target};

fn post(path: String, body: &Value) -> Req {
    Req::with_body(
        Method::POST,
        uri(path).expect("encoded path"),
        Bytes::from(body.to_string()),
    )
}

fn get(path: String) -> Req {
    Req::get(uri(path).expect("encoded path"))
}

fn head(path: String) -> Req {
    let mut req = get(path);
    req.method = Method::HEAD;
    req
}

/// `InitialAttribute_i = "i"` for i below `count`.
pub fn initial_properties(count: u64) -> Value {
    let map: Map<String, Value> = (0..count)
        .map(|i| (format!("InitialAttribute_{i}"), json!(i.to_string())))
        .collect();
    Value::Object(map)
}

/// Required int columns `column1 … columnN` (field ids from 1: Iceberg reassigns id 0).
pub fn columns(count: u64) -> Value {
    let fields: Vec<Value> = (1..=count)
        .map(|id| json!({"id": id, "name": format!("column{id}"), "type": "int", "required": true}))
        .collect();
    Value::Array(fields)
}

pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// The requests of one dataset on one target catalog.
pub struct Actions {
    pub dataset: Arc<Dataset>,
    pub paths: Paths,
    management: String,
}

impl Actions {
    /// `management` is the management API's catalogs path ([`Target::management_catalogs`]).
    pub fn new(dataset: Arc<Dataset>, paths: Paths, management: String) -> Actions {
        Actions {
            dataset,
            paths,
            management,
        }
    }

    /// `C_0 … C_{n-1}` as the suite names them; another tree catalog name `X` gives
    /// `X, X_1 … X_{n-1}`, so runs on one server need not collide.
    fn catalog_name(&self, i: u64) -> String {
        match (self.dataset.catalog.as_str(), i) {
            ("C_0", _) => format!("C_{i}"),
            (name, 0) => name.to_string(),
            (name, i) => format!("{name}_{i}"),
        }
    }

    pub fn create_catalog(&self, i: u64) -> Call {
        let name = self.catalog_name(i);
        let location = format!("{}/{name}", self.dataset.base_location);
        let body = Target::create_catalog_body(&name, &location, &self.dataset.storage_config);
        Call::new("Create Catalog", post(self.management.clone(), &body), 201)
    }

    pub fn fetch_catalog(&self, i: u64) -> Call {
        let name = self.catalog_name(i);
        Call::new(
            "Fetch Catalog",
            get(format!("{}/{name}", self.management)),
            200,
        )
        .check(Check::Catalog { name })
    }

    pub fn create_namespace(&self, node: u64) -> Call {
        let levels = self.dataset.namespace(node);
        let body = json!({
            "namespace": levels,
            "properties": initial_properties(self.dataset.namespace_properties),
        });
        Call::new(
            "Create Namespace",
            post(self.paths.namespaces(), &body),
            200,
        )
        .check(Check::Namespace {
            levels,
            initial_properties: None,
        })
        .retry(Retry::POLARIS_CREATE)
    }

    pub fn fetch_child_namespaces(&self, node: u64) -> Call {
        let levels = self.dataset.namespace(node);
        Call::new(
            "Fetch child namespaces",
            get(self.paths.children(&levels)),
            200,
        )
    }

    pub fn check_namespace_exists(&self, node: u64) -> Call {
        let levels = self.dataset.namespace(node);
        Call::new(
            "Check Namespace Exists",
            head(self.paths.namespace(&levels)),
            204,
        )
    }

    pub fn fetch_namespace(&self, node: u64) -> Call {
        let levels = self.dataset.namespace(node);
        let req = get(self.paths.namespace(&levels));
        Call::new("Fetch single namespace", req, 200).check(Check::Namespace {
            levels,
            initial_properties: Some(self.dataset.namespace_properties as usize),
        })
    }

    /// Sets `UpdatedAttribute_<round> = "<round>"`.
    pub fn update_namespace(&self, node: u64, round: u64) -> Call {
        let levels = self.dataset.namespace(node);
        let body = json!({
            "removals": [],
            "updates": { format!("UpdatedAttribute_{round}"): round.to_string() },
        });
        Call::new(
            "Update namespace",
            post(self.paths.namespace_properties(&levels), &body),
            200,
        )
        .retry(Retry::POLARIS)
    }

    pub fn create_table(&self, i: u64) -> Call {
        let table = self.dataset.table(i);
        let levels = self.dataset.namespace(table.namespace);
        let body = json!({
            "name": table.name,
            "stage-create": false,
            "schema": {
                "type": "struct",
                "fields": columns(self.dataset.columns_per_table),
                "identifier-field-ids": [1],
            },
            "properties": initial_properties(self.dataset.table_properties),
        });
        Call::new("Create Table", post(self.paths.tables(&levels), &body), 200)
            .retry(Retry::POLARIS_CREATE)
    }

    pub fn fetch_children_tables(&self, i: u64) -> Call {
        let levels = self.dataset.namespace(self.dataset.table(i).namespace);
        Call::new(
            "Fetch children Tables",
            get(self.paths.tables(&levels)),
            200,
        )
    }

    pub fn check_table_exists(&self, i: u64) -> Call {
        let table = self.dataset.table(i);
        let levels = self.dataset.namespace(table.namespace);
        Call::new(
            "Check Table Exists",
            head(self.paths.table(&levels, &table.name)),
            204,
        )
    }

    pub fn fetch_table(&self, i: u64) -> Call {
        let table = self.dataset.table(i);
        let levels = self.dataset.namespace(table.namespace);
        Call::new(
            "Fetch single Table",
            get(self.paths.table(&levels, &table.name)),
            200,
        )
        .check(Check::Loaded {
            uuid_field: UuidField::Table,
            initial_properties: self.dataset.table_properties as usize,
        })
    }

    /// A blind commit (no requirements) with one `set-properties` update.
    pub fn update_table(&self, i: u64, properties: Value) -> Call {
        let table = self.dataset.table(i);
        let levels = self.dataset.namespace(table.namespace);
        let body = json!({"updates": [{"action": "set-properties", "updates": properties}]});
        Call::new(
            "Update Table",
            post(self.paths.table(&levels, &table.name), &body),
            200,
        )
        .retry(Retry::POLARIS)
    }

    pub fn create_view(&self, i: u64) -> Call {
        let view = self.dataset.view(i);
        let levels = self.dataset.namespace(view.namespace);
        let timestamp = now_ms();
        let body = json!({
            "name": view.name,
            "view-version": {
                "version-id": 1,
                "timestamp-ms": timestamp,
                "schema-id": 0,
                "summary": {
                    "engine-version": "3.5.5",
                    "app-id": format!("gatling-{timestamp}"),
                    "engine-name": "spark",
                    "iceberg-version": "Apache Iceberg 1.7.0",
                },
                // The suite sends the path-encoded namespace as a single level; kept so
                // that bodies match byte for byte in meaning.
                "default-namespace": [Paths::ns(&levels)],
                "representations": [{
                    "type": "sql",
                    "sql": format!("SELECT * FROM {}", view.table.as_deref().unwrap_or_default()),
                    "dialect": "spark",
                }],
            },
            "schema": {
                "type": "struct",
                "schema-id": 0,
                "fields": columns(self.dataset.columns_per_view),
            },
            "properties": initial_properties(self.dataset.view_properties),
        });
        Call::new("Create View", post(self.paths.views(&levels), &body), 200)
            .retry(Retry::POLARIS_CREATE)
    }

    pub fn fetch_children_views(&self, i: u64) -> Call {
        let levels = self.dataset.namespace(self.dataset.view(i).namespace);
        Call::new("Fetch children Views", get(self.paths.views(&levels)), 200)
    }

    pub fn check_view_exists(&self, i: u64) -> Call {
        let view = self.dataset.view(i);
        let levels = self.dataset.namespace(view.namespace);
        Call::new(
            "Check View Exists",
            head(self.paths.view(&levels, &view.name)),
            204,
        )
    }

    pub fn fetch_view(&self, i: u64) -> Call {
        let view = self.dataset.view(i);
        let levels = self.dataset.namespace(view.namespace);
        Call::new(
            "Fetch single View",
            get(self.paths.view(&levels, &view.name)),
            200,
        )
        .check(Check::Loaded {
            uuid_field: UuidField::View,
            initial_properties: self.dataset.view_properties as usize,
        })
    }

    pub fn update_view(&self, i: u64, properties: Value) -> Call {
        let view = self.dataset.view(i);
        let levels = self.dataset.namespace(view.namespace);
        let body = json!({"updates": [{"action": "set-properties", "updates": properties}]});
        Call::new(
            "Update View",
            post(self.paths.view(&levels, &view.name), &body),
            200,
        )
        .retry(Retry::POLARIS)
    }
}

/// `{"NewAttribute_<round>": "NewValue_<round>"}`: the suite's property update.
pub fn new_attribute(round: u64) -> Value {
    json!({ format!("NewAttribute_{round}"): format!("NewValue_{round}") })
}
