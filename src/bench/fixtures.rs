//! Flat datasets for the single-endpoint tests and the YCSB presets: top-level
//! namespaces holding small tables (a couple of columns, no snapshots). Creation is
//! idempotent, so a second run against the same server reuses what the first made.

use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use serde_json::json;

use super::client::{uri, Req};
use super::load::{indexed, run_closed, Limits};
use super::op::Call;
use super::stats::Results;
use super::target::{Paths, Target};

/// Where a flat dataset's table `i` lives: `<prefix>_<i / per>` / `t_<i>`.
#[derive(Debug, Clone)]
pub struct FlatLayout {
    pub prefix: String,
    pub tables_per_namespace: u64,
}

impl FlatLayout {
    pub fn namespace(&self, k: u64) -> Vec<String> {
        vec![format!("{}_{k}", self.prefix)]
    }

    pub fn table(&self, i: u64) -> (Vec<String>, String) {
        (
            self.namespace(i / self.tables_per_namespace.max(1)),
            format!("t_{i}"),
        )
    }

    /// Namespaces needed for tables `0..tables`.
    pub fn namespaces_for(&self, tables: u64) -> u64 {
        tables.div_ceil(self.tables_per_namespace.max(1))
    }
}

/// A create-table body, with `stage-create` spelled out as Iceberg's Java client sends it
/// (Nessie refuses a body without it).
pub fn table_body(name: &str) -> Bytes {
    let body = json!({
        "name": name,
        "stage-create": false,
        "schema": {
            "type": "struct",
            "schema-id": 0,
            "fields": [
                {"id": 1, "name": "id", "type": "long", "required": true},
                {"id": 2, "name": "data", "type": "string", "required": false},
            ],
        },
    });
    Bytes::from(body.to_string())
}

pub fn create_namespace_call(paths: &Paths, levels: &[String]) -> Call {
    let body = Bytes::from(json!({ "namespace": levels }).to_string());
    let req = Req::with_body(Method::POST, uri(paths.namespaces()).expect("path"), body);
    Call::new("Create Namespace", req, 200)
}

pub fn create_table_call(paths: &Paths, layout: &FlatLayout, i: u64) -> Call {
    let (levels, name) = layout.table(i);
    let req = Req::with_body(
        Method::POST,
        uri(paths.tables(&levels)).expect("path"),
        table_body(&name),
    );
    Call::new("Create Table", req, 200)
}

/// Creates namespaces `from_ns..to_ns` then tables `from..to`, tolerating entities
/// that already exist (409); returns the figures of both steps.
pub async fn populate(
    target: &Target,
    paths: &Paths,
    layout: &FlatLayout,
    tables: std::ops::Range<u64>,
    users: usize,
    cap: Duration,
) -> Results {
    let first_ns = tables.start / layout.tables_per_namespace.max(1);
    let namespaces = first_ns..layout.namespaces_for(tables.end);
    let (p, l) = (paths.clone(), layout.clone());
    let create_ns = indexed(namespaces.end - namespaces.start, move |k| {
        let mut call = create_namespace_call(&p, &l.namespace(namespaces.start + k));
        call.also_ok = &[409];
        call.into()
    });
    let limits = Limits::for_duration(cap);
    let mut results = run_closed(
        target.client.clone(),
        create_ns,
        users,
        limits,
        "setup: namespaces",
    )
    .await;
    let (p, l) = (paths.clone(), layout.clone());
    let start = tables.start;
    let create_tables = indexed(tables.end - tables.start, move |i| {
        let mut call = create_table_call(&p, &l, start + i);
        call.also_ok = &[409];
        call.into()
    });
    let tables = run_closed(
        target.client.clone(),
        create_tables,
        users,
        limits,
        "setup: tables",
    )
    .await;
    results.append(tables);
    results
}

/// The setup's failures, as an error (a benchmark on a half-made dataset misleads).
pub fn ensure_complete(results: &Results, what: &str) -> anyhow::Result<()> {
    let (_, ko) = results.total();
    if ko > 0 {
        let errors: Vec<String> = results
            .requests
            .iter()
            .flat_map(|(n, s)| s.errors.iter().map(move |(k, v)| format!("{n}: {k} ×{v}")))
            .collect();
        anyhow::bail!("{what}: {ko} requests failed ({})", errors.join(", "));
    }
    Ok(())
}
