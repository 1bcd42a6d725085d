//! Black-box tests of Floe's HTTP API, success paths: every endpoint the config lists,
//! the config and health endpoints, Polaris's management API and its `/api/catalog/v1`
//! prefix. Each test starts its own server on a fresh data directory.

use std::collections::BTreeSet;

use crate::common::*;
use serde_json::{json, Value};

/// The endpoints Floe must advertise: every one of them is exercised in this file (scan
/// planning in `http_scan.rs`).
const EXPECTED_ENDPOINTS: &[&str] = &[
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register-view",
    "POST /v1/{prefix}/events",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/generic-tables",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
    "DELETE polaris/v1/{prefix}/namespaces/{namespace}/generic-tables/{generic-table}",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/policies",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/policies",
    "GET polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}",
    "PUT polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}",
    "DELETE polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}",
    "PUT polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}/mappings",
    "POST polaris/v1/{prefix}/namespaces/{namespace}/policies/{policy-name}/mappings",
    "GET polaris/v1/{prefix}/applicable-policies",
];

fn set(values: &Value) -> BTreeSet<String> {
    values
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {values}"))
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect()
}

fn strings(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---- health and config ---------------------------------------------------------------------

#[tokio::test]
async fn healthz_reports_ok() {
    let s = Server::start().await;
    let body = s.get("/healthz").await.ok(200).json();
    assert_eq!(body, json!({ "status": "ok" }));
}

#[tokio::test]
async fn config_names_the_prefix_and_every_endpoint() {
    let s = Server::start().await;
    for path in [
        "/v1/config",
        "/v1/config?warehouse=default",
        "/v1/config?warehouse=",
        "/api/catalog/v1/config",
        "/api/catalog/v1/config?warehouse=default",
    ] {
        let body = s.get(path).await.ok(200).json();
        assert_eq!(body["overrides"]["prefix"], "default", "{path}: {body}");
        assert!(body["defaults"].is_object(), "{path}: {body}");
        let endpoints = body["endpoints"].as_array().expect("endpoints");
        assert_eq!(
            endpoints.len(),
            EXPECTED_ENDPOINTS.len(),
            "no duplicates: {body}"
        );
        assert_eq!(set(&body["endpoints"]), strings(EXPECTED_ENDPOINTS));
    }
    s.get("/v1/config?warehouse=no-such-catalog")
        .await
        .error(404, "NotFoundException");
}

// ---- namespaces ----------------------------------------------------------------------------

#[tokio::test]
async fn namespaces_create_load_exist_list_and_drop() {
    let s = Server::start().await;
    let created = s
        .create_namespace_with(&["sales"], json!({ "owner": "ann" }))
        .await;
    assert_eq!(
        created,
        json!({ "namespace": ["sales"], "properties": { "owner": "ann" } })
    );
    s.create_namespace(&["sales", "eu"]).await;
    s.create_namespace(&["sales", "eu", "fr"]).await;
    s.create_namespace(&["hr"]).await;

    let loaded = s.get(&ns_url(&["sales", "eu"])).await.ok(200).json();
    assert_eq!(loaded["namespace"], json!(["sales", "eu"]));
    assert_eq!(loaded["properties"], json!({}));
    s.head(&ns_url(&["sales", "eu", "fr"])).await.ok(204);
    assert_eq!(s.head(&ns_url(&["sales", "us"])).await.status, 404);

    assert_eq!(
        s.list_namespaces(None).await,
        vec![vec!["hr".to_string()], vec!["sales".to_string()]]
    );
    assert_eq!(
        s.list_namespaces(Some(&["sales"])).await,
        vec![vec!["sales".to_string(), "eu".to_string()]]
    );
    assert_eq!(
        s.list_namespaces(Some(&["sales", "eu"])).await,
        vec![vec![
            "sales".to_string(),
            "eu".to_string(),
            "fr".to_string()
        ]]
    );
    assert!(s.list_namespaces(Some(&["hr"])).await.is_empty());
    // An empty parent means the top level.
    let top = s
        .get(&format!("{V1}/namespaces?parent="))
        .await
        .ok(200)
        .json();
    assert_eq!(top["namespaces"], json!([["hr"], ["sales"]]));

    s.delete(&ns_url(&["sales", "eu", "fr"])).await.ok(204);
    s.get(&ns_url(&["sales", "eu", "fr"]))
        .await
        .error(404, "NoSuchNamespaceException");
    assert_eq!(s.head(&ns_url(&["sales", "eu", "fr"])).await.status, 404);
    assert!(s.list_namespaces(Some(&["sales", "eu"])).await.is_empty());
}

#[tokio::test]
async fn namespace_properties_update_reports_updated_removed_missing() {
    let s = Server::start().await;
    s.create_namespace_with(&["ns"], json!({ "a": "1", "b": "2", "c": "3" }))
        .await;
    let change = s
        .post(
            &format!("{}/properties", ns_url(&["ns"])),
            &json!({ "removals": ["b", "zzz"], "updates": { "a": "10", "d": "4" } }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(set(&change["updated"]), strings(&["a", "d"]), "{change}");
    assert_eq!(set(&change["removed"]), strings(&["b"]), "{change}");
    assert_eq!(set(&change["missing"]), strings(&["zzz"]), "{change}");
    assert_eq!(
        s.namespace_properties(&["ns"]).await,
        json!({ "a": "10", "c": "3", "d": "4" })
    );

    // Only removals, only updates, and neither are all fine.
    let change = s
        .post(
            &format!("{}/properties", ns_url(&["ns"])),
            &json!({ "removals": ["c"] }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(set(&change["removed"]), strings(&["c"]));
    let change = s
        .post(
            &format!("{}/properties", ns_url(&["ns"])),
            &json!({ "updates": { "e": "5" } }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(set(&change["updated"]), strings(&["e"]));
    s.post(&format!("{}/properties", ns_url(&["ns"])), &json!({}))
        .await
        .ok(200);
    assert_eq!(
        s.namespace_properties(&["ns"]).await,
        json!({ "a": "10", "d": "4", "e": "5" })
    );
}

/// Concurrent updates of one namespace's properties all land: none is lost to another's
/// read-modify-write (each swap expects what its request read; a loser reads again). 8
/// writers: each can lose only to the 7 others, within the server's 10 attempts.
#[tokio::test]
async fn concurrent_namespace_property_updates_all_land() {
    let s = Server::start().await;
    s.create_namespace_with(&["ns"], json!({ "base": "0" }))
        .await;
    // Read once, so that the first updates start from the server's cached copy.
    assert_eq!(
        s.namespace_properties(&["ns"]).await,
        json!({ "base": "0" })
    );
    let url = format!("{}/properties", ns_url(&["ns"]));
    let updates = (0..8).map(|i| {
        let (s, url) = (&s, &url);
        async move {
            let change = s
                .post(
                    url,
                    &json!({ "updates": { format!("k{i}"): i.to_string() } }),
                )
                .await
                .ok(200)
                .json();
            assert_eq!(set(&change["updated"]), strings(&[&format!("k{i}")]));
        }
    });
    futures_util::future::join_all(updates).await;
    let mut expected = json!({ "base": "0" });
    for i in 0..8 {
        expected[format!("k{i}")] = json!(i.to_string());
    }
    assert_eq!(s.namespace_properties(&["ns"]).await, expected);
}

#[tokio::test]
async fn dropping_a_non_empty_namespace_conflicts() {
    let s = Server::start().await;
    s.create_namespace(&["with_table"]).await;
    s.create_table(&["with_table"], "t").await;
    s.create_namespace(&["with_child"]).await;
    s.create_namespace(&["with_child", "kid"]).await;
    s.create_namespace(&["with_view"]).await;
    s.create_view(&["with_view"], "v").await;

    for levels in [&["with_table"][..], &["with_child"], &["with_view"]] {
        s.delete(&ns_url(levels))
            .await
            .error(409, "NamespaceNotEmptyException");
        s.head(&ns_url(levels)).await.ok(204);
    }
    assert_eq!(s.list_tables(&["with_table"]).await, vec!["t"]);

    // Emptied, they drop.
    s.delete(&table_url(&["with_table"], "t")).await.ok(204);
    s.delete(&ns_url(&["with_table"])).await.ok(204);
    s.delete(&ns_url(&["with_child", "kid"])).await.ok(204);
    s.delete(&ns_url(&["with_child"])).await.ok(204);
    s.delete(&view_url(&["with_view"], "v")).await.ok(204);
    s.delete(&ns_url(&["with_view"])).await.ok(204);
    assert!(s.list_namespaces(None).await.is_empty());
}

/// Walks a paginated list to its end; returns every page's items.
async fn walk_pages(s: &Server, path: &str, page_size: usize, key: &str) -> Vec<Vec<Value>> {
    let separator = if path.contains('?') { '&' } else { '?' };
    let mut token = String::new();
    let mut pages = Vec::new();
    for _ in 0..100 {
        let body = s
            .get(&format!(
                "{path}{separator}pageSize={page_size}&pageToken={token}"
            ))
            .await
            .ok(200)
            .json();
        let items = body[key].as_array().expect("a list").clone();
        assert!(
            items.len() <= page_size,
            "page larger than pageSize: {body}"
        );
        pages.push(items);
        match &body["next-page-token"] {
            Value::Null => return pages,
            Value::String(next) => {
                assert!(!next.is_empty(), "empty next-page-token: {body}");
                token = next.clone();
            }
            other => panic!("next-page-token must be a string or null: {other}"),
        }
    }
    panic!("pagination of {path} does not end");
}

#[tokio::test]
async fn namespaces_paginate_and_unpaged_lists_return_everything() {
    let s = Server::start().await;
    let mut expected = Vec::new();
    for i in 0..7 {
        let name = format!("ns{i}");
        s.create_namespace(&[&name]).await;
        expected.push(json!([name]));
    }
    s.create_namespace(&["ns3", "child"]).await;

    let pages = walk_pages(&s, &format!("{V1}/namespaces"), 3, "namespaces").await;
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![3, 3, 1]);
    assert_eq!(pages.concat(), expected);

    let pages = walk_pages(&s, &format!("{V1}/namespaces"), 7, "namespaces").await;
    assert_eq!(pages.concat(), expected);

    // No pageToken and no pageSize: everything, with a null (or no) next-page-token.
    let all = s.get(&format!("{V1}/namespaces")).await.ok(200).json();
    assert_eq!(all["namespaces"], Value::Array(expected.clone()));
    assert!(all["next-page-token"].is_null(), "{all}");
    // An empty pageToken alone starts paging with the server's default page size.
    let first = s
        .get(&format!("{V1}/namespaces?pageToken="))
        .await
        .ok(200)
        .json();
    assert_eq!(first["namespaces"], Value::Array(expected));

    let children = walk_pages(
        &s,
        &format!("{V1}/namespaces?parent={}", ns(&["ns3"])),
        1,
        "namespaces",
    )
    .await;
    assert_eq!(children.concat(), vec![json!(["ns3", "child"])]);
}

#[tokio::test]
async fn tables_and_views_paginate() {
    let s = Server::start().await;
    s.create_namespace(&["ns"]).await;
    let mut tables = Vec::new();
    for i in 0..5 {
        let name = format!("t{i}");
        s.create_table(&["ns"], &name).await;
        tables.push(json!({ "namespace": ["ns"], "name": name }));
    }
    let mut views = Vec::new();
    for i in 0..4 {
        let name = format!("v{i}");
        s.create_view(&["ns"], &name).await;
        views.push(json!({ "namespace": ["ns"], "name": name }));
    }

    let pages = walk_pages(&s, &tables_url(&["ns"]), 2, "identifiers").await;
    assert_eq!(
        pages.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2, 2, 1]
    );
    assert_eq!(pages.concat(), tables);
    let pages = walk_pages(&s, &views_url(&["ns"]), 3, "identifiers").await;
    assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 1]);
    assert_eq!(pages.concat(), views);

    let all = s.get(&tables_url(&["ns"])).await.ok(200).json();
    assert_eq!(all["identifiers"], Value::Array(tables));
    assert!(all["next-page-token"].is_null(), "{all}");
    let all = s.get(&views_url(&["ns"])).await.ok(200).json();
    assert_eq!(all["identifiers"], Value::Array(views));
    assert!(all["next-page-token"].is_null(), "{all}");
}

// ---- tables --------------------------------------------------------------------------------

#[tokio::test]
async fn create_load_exist_list_and_credentials_of_a_table() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let created = s
        .create_table_with(
            &["db"],
            json!({
                "name": "orders",
                "schema": schema(),
                "properties": { "owner": "ann", "format-version": "2" },
            }),
        )
        .await
        .ok(200);
    assert!(created.header("etag").is_some(), "create sends an ETag");
    let created = created.json();
    let location = created["metadata"]["location"]
        .as_str()
        .unwrap()
        .to_string();
    let metadata_location = created["metadata-location"].as_str().unwrap().to_string();
    assert!(
        location.starts_with(&format!("{}/db/orders", s.warehouse())),
        "{location} is under the catalog's base location {}",
        s.warehouse()
    );
    assert!(
        metadata_location.starts_with(&format!("{location}/metadata/"))
            && metadata_location.ends_with(".metadata.json"),
        "{metadata_location}"
    );
    assert!(s.files.is_file(&metadata_location).await);
    assert_eq!(created["metadata"]["format-version"], 2);
    assert_eq!(table_property(&created, "owner").as_deref(), Some("ann"));
    assert_eq!(created["metadata"]["current-schema-id"], 0);
    assert_eq!(created["metadata"]["schemas"][0]["fields"][0]["name"], "id");
    assert!(created["metadata"]["table-uuid"].is_string());

    let loaded = s.get(&table_url(&["db"], "orders")).await.ok(200);
    assert!(loaded.header("etag").is_some());
    let loaded = loaded.json();
    assert_eq!(loaded["metadata-location"], metadata_location.as_str());
    assert_eq!(loaded["metadata"], created["metadata"]);
    assert_eq!(loaded["metadata"]["location"], location.as_str());

    s.head(&table_url(&["db"], "orders")).await.ok(204);
    assert_eq!(s.head(&table_url(&["db"], "nope")).await.status, 404);
    assert_eq!(s.list_tables(&["db"]).await, vec!["orders"]);
    assert!(s.list_views(&["db"]).await.is_empty());

    let credentials = s
        .get(&format!("{}/credentials", table_url(&["db"], "orders")))
        .await
        .ok(200)
        .json();
    if s.on_s3() {
        // Vended for the table's own location, with the endpoint to refresh them.
        let vended = credentials["storage-credentials"].as_array().unwrap();
        assert_eq!(vended.len(), 1, "{credentials}");
        assert_eq!(vended[0]["prefix"], location.as_str());
        let config = &vended[0]["config"];
        for key in [
            "s3.access-key-id",
            "s3.secret-access-key",
            "s3.session-token",
        ] {
            assert!(config[key].is_string(), "{key} missing: {credentials}");
        }
        assert!(config["client.refresh-credentials-endpoint"]
            .as_str()
            .is_some_and(|e| e.ends_with("/credentials")));
    } else {
        // The local file system vends nothing.
        assert_eq!(credentials, json!({ "storage-credentials": [] }));
    }

    // A table at a location the client chose, inside the catalog.
    let chosen = format!("{}/custom/place", s.warehouse());
    let custom = s
        .create_table_with(
            &["db"],
            json!({ "name": "placed", "schema": schema(), "location": chosen }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(custom["metadata"]["location"], chosen.as_str());
    assert!(custom["metadata-location"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{chosen}/metadata/")));
}

#[tokio::test]
async fn etags_answer_if_none_match_and_change_with_mode_and_commits() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    let url = table_url(&["db"], "t");

    let all = s.get(&url).await.ok(200);
    let etag_all = all.header("etag").expect("ETag on load");
    assert_eq!(
        s.get(&format!("{url}?snapshots=all")).await.header("etag"),
        Some(etag_all.clone()),
        "snapshots=all is the default"
    );
    let refs = s.get(&format!("{url}?snapshots=refs")).await.ok(200);
    let etag_refs = refs.header("etag").expect("ETag on refs load");
    assert_ne!(etag_all, etag_refs, "the two modes return different bodies");

    let not_modified = s.get_with(&url, &[("if-none-match", &etag_all)]).await;
    assert_eq!(not_modified.status, 304, "{}", not_modified.body);
    assert!(not_modified.body.is_empty());
    s.get_with(
        &format!("{url}?snapshots=refs"),
        &[("if-none-match", &etag_refs)],
    )
    .await
    .ok(304);
    // A tag of the other mode or an unknown tag gets the full body.
    s.get_with(
        &format!("{url}?snapshots=refs"),
        &[("if-none-match", &etag_all)],
    )
    .await
    .ok(200);
    s.get_with(&url, &[("if-none-match", "\"something-else\"")])
        .await
        .ok(200);

    let committed = s
        .commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "set-properties", "updates": { "k": "v" } }] }),
        )
        .await
        .ok(200);
    let etag_commit = committed.header("etag").expect("ETag on commit");
    assert_ne!(etag_commit, etag_all);
    let after = s
        .get_with(&url, &[("if-none-match", &etag_all)])
        .await
        .ok(200);
    assert_eq!(after.header("etag"), Some(etag_commit.clone()));
    assert_eq!(table_property(&after.json(), "k").as_deref(), Some("v"));
    s.get_with(&url, &[("if-none-match", &etag_commit)])
        .await
        .ok(304);
}

fn snapshot(id: i64, parent: Option<i64>, sequence: i64, s: &Server) -> Value {
    let mut snapshot = json!({
        "snapshot-id": id,
        "sequence-number": sequence,
        "timestamp-ms": now_ms(),
        "manifest-list": format!("{}/db/snap-{id}.avro", s.warehouse()),
        "summary": { "operation": "append" },
        "schema-id": 0,
    });
    if let Some(parent) = parent {
        snapshot["parent-snapshot-id"] = json!(parent);
    }
    snapshot
}

#[tokio::test]
async fn snapshots_refs_returns_only_referenced_snapshots() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    s.commit(
        &["db"],
        "t",
        json!({
            "requirements": [{ "type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": null }],
            "updates": [
                { "action": "add-snapshot", "snapshot": snapshot(1, None, 1, &s) },
                { "action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 1, "type": "branch" },
            ],
        }),
    )
    .await
    .ok(200);
    // A second snapshot that no branch or tag points at.
    let committed = s
        .commit(
            &["db"],
            "t",
            json!({
                "requirements": [{ "type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1 }],
                "updates": [{ "action": "add-snapshot", "snapshot": snapshot(2, Some(1), 2, &s) }],
            }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(committed["metadata"]["current-snapshot-id"], 1);

    let ids = |load: &Value| -> Vec<i64> {
        load["metadata"]["snapshots"]
            .as_array()
            .expect("snapshots")
            .iter()
            .map(|s| s["snapshot-id"].as_i64().unwrap())
            .collect()
    };
    let url = table_url(&["db"], "t");
    let all = s.get(&format!("{url}?snapshots=all")).await.ok(200).json();
    assert_eq!(ids(&all), vec![1, 2]);
    let refs = s.get(&format!("{url}?snapshots=refs")).await.ok(200).json();
    assert_eq!(ids(&refs), vec![1]);
    assert_eq!(refs["metadata-location"], all["metadata-location"]);
    assert_eq!(refs["metadata"]["refs"]["main"]["snapshot-id"], 1);
}

#[tokio::test]
async fn commits_apply_updates_and_check_requirements() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let created = s.create_table(&["db"], "t").await;
    let uuid = created["metadata"]["table-uuid"].clone();
    let first = created["metadata-location"].as_str().unwrap().to_string();

    let committed = s
        .commit(
            &["db"],
            "t",
            json!({
                "identifier": ident(&["db"], "t"),
                "requirements": [
                    { "type": "assert-table-uuid", "uuid": uuid },
                    { "type": "assert-current-schema-id", "current-schema-id": 0 },
                    { "type": "assert-last-assigned-field-id", "last-assigned-field-id": 2 },
                    { "type": "assert-default-spec-id", "default-spec-id": 0 },
                    { "type": "assert-default-sort-order-id", "default-sort-order-id": 0 },
                ],
                "updates": [
                    { "action": "set-properties", "updates": { "a": "1", "b": "2" } },
                    { "action": "add-schema", "schema": {
                        "type": "struct", "schema-id": 1, "fields": [
                            { "id": 1, "name": "id", "required": true, "type": "long" },
                            { "id": 2, "name": "data", "required": false, "type": "string" },
                            { "id": 3, "name": "ts", "required": false, "type": "timestamptz" },
                        ] } },
                    { "action": "set-current-schema", "schema-id": -1 },
                ],
            }),
        )
        .await
        .ok(200)
        .json();
    let second = committed["metadata-location"].as_str().unwrap().to_string();
    assert_ne!(first, second);
    assert_eq!(committed["metadata"]["current-schema-id"], 1);
    assert_eq!(committed["metadata"]["last-column-id"], 3);
    assert_eq!(table_property(&committed, "a").as_deref(), Some("1"));
    let log = committed["metadata"]["metadata-log"].as_array().unwrap();
    assert_eq!(
        log.last().unwrap()["metadata-file"],
        first.as_str(),
        "the previous file is logged"
    );
    assert_eq!(s.load_table(&["db"], "t").await, committed);

    let removed = s
        .commit(
            &["db"],
            "t",
            json!({
                "requirements": [{ "type": "assert-current-schema-id", "current-schema-id": 1 }],
                "updates": [{ "action": "remove-properties", "removals": ["a"] }],
            }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(table_property(&removed, "a"), None);
    assert_eq!(table_property(&removed, "b").as_deref(), Some("2"));

    // A commit without updates changes nothing and answers with the current state.
    let unchanged = s
        .commit(
            &["db"],
            "t",
            json!({ "requirements": [{ "type": "assert-table-uuid", "uuid": uuid }], "updates": [] }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(unchanged["metadata-location"], removed["metadata-location"]);

    // Moving the table: later metadata files go to the new location.
    let moved_to = format!("{}/moved/t", s.warehouse());
    let moved = s
        .commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "set-location", "location": moved_to }] }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(moved["metadata"]["location"], moved_to.as_str());
    let file = moved["metadata-location"].as_str().unwrap();
    assert!(file.starts_with(&format!("{moved_to}/metadata/")), "{file}");
    assert!(s.files.is_file(file).await);
    assert_eq!(s.load_table(&["db"], "t").await, moved);
}

/// A commit starts from the model the previous one wrote when the node still holds it,
/// and the self-check (on in these tests) makes sure on every such start that the model
/// equals what the stored document parses to. A format 1 document keeps no refs, so a ref's
/// retention does not survive its parse: these commits must start from the document.
#[tokio::test]
async fn commits_to_a_format_1_table_start_from_its_document() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let body = json!({ "name": "t", "schema": schema(), "properties": { "format-version": "1" } });
    s.create_table_with(&["db"], body).await.ok(200);
    let commit = |updates: Value| s.commit(&["db"], "t", json!({ "updates": updates }));
    commit(json!([
        { "action": "add-snapshot", "snapshot": snapshot(1, None, 0, &s) },
        { "action": "set-snapshot-ref", "ref-name": "main", "snapshot-id": 1, "type": "branch",
          "max-snapshot-age-ms": 86400000 },
    ]))
    .await
    .ok(200);
    commit(json!([{ "action": "set-properties", "updates": { "a": "1" } }]))
        .await
        .ok(200);
    let last = commit(json!([{ "action": "remove-properties", "removals": ["a"] }]))
        .await
        .ok(200)
        .json();
    assert_eq!(last["metadata"]["format-version"], 1);
    assert_eq!(last["metadata"]["current-snapshot-id"], 1);
    assert_eq!(table_property(&last, "a"), None);
    assert_eq!(s.load_table(&["db"], "t").await, last);
}

#[tokio::test]
async fn staged_create_then_commit_with_assert_create() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let staged = s
        .create_table_with(
            &["db"],
            json!({
                "name": "staged",
                "schema": schema(),
                "stage-create": true,
                "properties": { "owner": "ann" },
            }),
        )
        .await
        .ok(200)
        .json();
    assert!(
        staged.get("metadata-location").is_none_or(Value::is_null),
        "a staged table has no metadata file yet: {staged}"
    );
    let location = staged["metadata"]["location"].as_str().unwrap().to_string();
    assert!(location.starts_with(&s.warehouse()), "{location}");
    // Staging creates nothing.
    assert_eq!(s.head(&table_url(&["db"], "staged")).await.status, 404);
    assert!(s.list_tables(&["db"]).await.is_empty());

    // The second step, as the Java client sends it.
    let uuid = staged["metadata"]["table-uuid"].clone();
    let create = json!({
        "identifier": ident(&["db"], "staged"),
        "requirements": [{ "type": "assert-create" }],
        "updates": [
            { "action": "assign-uuid", "uuid": uuid },
            { "action": "upgrade-format-version", "format-version": 2 },
            { "action": "add-schema", "schema": staged["metadata"]["schemas"][0], "last-column-id": 2 },
            { "action": "set-current-schema", "schema-id": -1 },
            { "action": "add-spec", "spec": { "spec-id": 0, "fields": [] } },
            { "action": "set-default-spec", "spec-id": -1 },
            { "action": "add-sort-order", "sort-order": { "order-id": 0, "fields": [] } },
            { "action": "set-default-sort-order", "sort-order-id": -1 },
            { "action": "set-location", "location": location },
            { "action": "set-properties", "updates": { "owner": "ann", "stage": "done" } },
        ],
    });
    let committed = s
        .commit(&["db"], "staged", create.clone())
        .await
        .ok(200)
        .json();
    let metadata_location = committed["metadata-location"]
        .as_str()
        .expect("a created table has a metadata file")
        .to_string();
    assert!(s.files.is_file(&metadata_location).await);
    assert_eq!(committed["metadata"]["table-uuid"], uuid);
    assert_eq!(committed["metadata"]["location"], location.as_str());
    assert_eq!(table_property(&committed, "stage").as_deref(), Some("done"));
    assert_eq!(table_property(&committed, "owner").as_deref(), Some("ann"));

    let loaded = s.load_table(&["db"], "staged").await;
    assert_eq!(loaded["metadata-location"], metadata_location.as_str());
    assert_eq!(s.list_tables(&["db"]).await, vec!["staged"]);

    // Creating it again fails: it exists now.
    let message = s
        .commit(&["db"], "staged", create)
        .await
        .error(409, "CommitFailedException");
    assert!(message.starts_with("Requirement failed:"), "{message}");
    assert_eq!(
        s.table_pointer(&["db"], "staged").await.as_deref(),
        Some(metadata_location.as_str())
    );
}

#[tokio::test]
async fn transaction_commits_two_tables() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let a = s.create_table(&["db"], "a").await;
    let b = s.create_table(&["db"], "b").await;
    s.post(
        &format!("{V1}/transactions/commit"),
        &json!({ "table-changes": [
            {
                "identifier": ident(&["db"], "a"),
                "requirements": [{ "type": "assert-table-uuid", "uuid": a["metadata"]["table-uuid"] }],
                "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
            },
            {
                "identifier": ident(&["db"], "b"),
                "requirements": [{ "type": "assert-table-uuid", "uuid": b["metadata"]["table-uuid"] }],
                "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
            },
        ] }),
    )
    .await
    .ok(204);
    for (name, before) in [("a", &a), ("b", &b)] {
        let now = s.load_table(&["db"], name).await;
        assert_ne!(now["metadata-location"], before["metadata-location"]);
        assert_eq!(table_property(&now, "tx").as_deref(), Some("1"), "{name}");
    }
}

#[tokio::test]
async fn transaction_with_a_failing_requirement_changes_neither_table() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let a = s.create_table(&["db"], "a").await;
    let b = s.create_table(&["db"], "b").await;
    let r = s
        .post(
            &format!("{V1}/transactions/commit"),
            &json!({ "table-changes": [
                {
                    "identifier": ident(&["db"], "a"),
                    "requirements": [{ "type": "assert-table-uuid", "uuid": a["metadata"]["table-uuid"] }],
                    "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
                },
                {
                    "identifier": ident(&["db"], "b"),
                    "requirements": [{ "type": "assert-current-schema-id", "current-schema-id": 7 }],
                    "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
                },
            ] }),
        )
        .await;
    let message = r.error(409, "CommitFailedException");
    assert!(message.starts_with("Requirement failed:"), "{message}");
    for (name, before) in [("a", &a), ("b", &b)] {
        let now = s.load_table(&["db"], name).await;
        assert_eq!(now, *before, "{name} must not change");
        assert_eq!(
            s.metadata_files(&now).await,
            s.metadata_files(before).await,
            "{name}"
        );
    }
}

#[tokio::test]
async fn transaction_creating_a_table_is_atomic_too() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let a = s.create_table(&["db"], "a").await;
    let create_c = json!({
        "identifier": ident(&["db"], "c"),
        "requirements": [{ "type": "assert-create" }],
        "updates": [
            { "action": "add-schema", "schema": schema() },
            { "action": "set-current-schema", "schema-id": -1 },
            { "action": "set-properties", "updates": { "born": "in-tx" } },
        ],
    });
    let r = s
        .post(
            &format!("{V1}/transactions/commit"),
            &json!({ "table-changes": [
                create_c,
                {
                    "identifier": ident(&["db"], "a"),
                    "requirements": [{ "type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000" }],
                    "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
                },
            ] }),
        )
        .await;
    r.error(409, "CommitFailedException");
    assert_eq!(s.head(&table_url(&["db"], "c")).await.status, 404);
    assert_eq!(s.load_table(&["db"], "a").await, a);
    assert_eq!(s.list_tables(&["db"]).await, vec!["a"]);

    // With a's requirement right, both happen.
    s.post(
        &format!("{V1}/transactions/commit"),
        &json!({ "table-changes": [
            create_c,
            {
                "identifier": ident(&["db"], "a"),
                "requirements": [{ "type": "assert-table-uuid", "uuid": a["metadata"]["table-uuid"] }],
                "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
            },
        ] }),
    )
    .await
    .ok(204);
    let c = s.load_table(&["db"], "c").await;
    assert_eq!(table_property(&c, "born").as_deref(), Some("in-tx"));
    assert!(
        s.files
            .is_file(c["metadata-location"].as_str().unwrap())
            .await
    );
    assert_eq!(
        table_property(&s.load_table(&["db"], "a").await, "tx").as_deref(),
        Some("1")
    );
}

#[tokio::test]
async fn transaction_rejected_by_the_store_changes_neither_table() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let a = s.create_table(&["db"], "a").await;
    let b = s.create_table(&["db"], "b").await;
    let a_location = a["metadata"]["location"].as_str().unwrap();
    // b moves inside a's location: only the store's overlap check can see that, after a's
    // change was applied in the same store transaction.
    let r = s
        .post(
            &format!("{V1}/transactions/commit"),
            &json!({ "table-changes": [
                {
                    "identifier": ident(&["db"], "a"),
                    "updates": [{ "action": "set-properties", "updates": { "tx": "1" } }],
                },
                {
                    "identifier": ident(&["db"], "b"),
                    "updates": [{ "action": "set-location", "location": format!("{a_location}/inner") }],
                },
            ] }),
        )
        .await;
    r.error(400, "BadRequestException");
    for (name, before) in [("a", &a), ("b", &b)] {
        let now = s.load_table(&["db"], name).await;
        assert_eq!(now, *before, "{name} must not change");
        assert_eq!(
            s.metadata_files(&now).await,
            s.metadata_files(before).await,
            "{name}"
        );
    }
}

/// A commit in flight is a "tip" the next commit to its table prepares on (`locks.rs`).
/// A transaction that only checks that table (a requirement, no update) must not rely on
/// the tip: if its write then fails, the state the transaction checked never existed.
/// Here the write in flight makes a new schema current and moves its table into another
/// table's location, which only the store refuses; the transaction asserts that schema
/// and changes a second table. Sent together, many times: the transaction must fail
/// every time, as it does when it comes after the refusal, and change nothing.
#[tokio::test]
async fn a_requirement_is_never_met_by_a_write_in_flight_that_then_fails() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "a").await;
    let b = s.create_table(&["db"], "b").await;
    let c = s.create_table(&["db"], "c").await;
    let inside_c = format!("{}/inner", c["metadata"]["location"].as_str().unwrap());
    let mut wider = schema();
    wider["schema-id"] = json!(1);
    wider["fields"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "id": 3, "name": "more", "required": false, "type": "long" }));
    let failing = json!({
        "requirements": [],
        "updates": [
            { "action": "add-schema", "schema": wider },
            { "action": "set-current-schema", "schema-id": -1 },
            { "action": "set-location", "location": inside_c },
        ],
    });
    let transaction = json!({ "table-changes": [
        {
            "identifier": ident(&["db"], "a"),
            "requirements": [{ "type": "assert-current-schema-id", "current-schema-id": 1 }],
            "updates": [],
        },
        {
            "identifier": ident(&["db"], "b"),
            "updates": [{ "action": "set-properties", "updates": { "relied": "on a tip" } }],
        },
    ] });
    let path = format!("{V1}/transactions/commit");
    // The code before the fix let a few rounds in a hundred through here (8 of 10 runs
    // of 40 rounds failed): 400 rounds.
    for _ in 0..400 {
        let (write, tx) = tokio::join!(
            s.commit(&["db"], "a", failing.clone()),
            s.post(&path, &transaction)
        );
        write.error(400, "BadRequestException");
        let message = tx.error(409, "CommitFailedException");
        assert!(message.starts_with("Requirement failed:"), "{message}");
    }
    assert_eq!(s.load_table(&["db"], "b").await, b, "b must not change");
}

#[tokio::test]
async fn rename_table_across_namespaces() {
    let s = Server::start().await;
    s.create_namespace(&["src"]).await;
    s.create_namespace(&["dst"]).await;
    s.create_namespace(&["dst", "deep"]).await;
    let created = s.create_table(&["src"], "t").await;
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&["src"], "t"), "destination": ident(&["dst", "deep"], "t2") }),
    )
    .await
    .ok(204);
    s.get(&table_url(&["src"], "t"))
        .await
        .error(404, "NoSuchTableException");
    let moved = s.load_table(&["dst", "deep"], "t2").await;
    assert_eq!(moved["metadata-location"], created["metadata-location"]);
    assert_eq!(moved["metadata"], created["metadata"]);
    assert!(s.list_tables(&["src"]).await.is_empty());
    assert_eq!(s.list_tables(&["dst", "deep"]).await, vec!["t2"]);
    // The renamed table commits under its new name.
    s.set_table_properties(&["dst", "deep"], "t2", json!({ "after": "rename" }))
        .await;
    // And the old name is free again.
    s.create_table(&["src"], "t").await;
}

#[tokio::test]
async fn register_a_dropped_tables_metadata_file() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    let last = s
        .set_table_properties(&["db"], "t", json!({ "kept": "yes" }))
        .await;
    let metadata_location = last["metadata-location"].as_str().unwrap().to_string();
    s.delete(&table_url(&["db"], "t")).await.ok(204);
    assert!(
        s.files.is_file(&metadata_location).await,
        "drop without purge keeps files"
    );

    let registered = s
        .post(
            &format!("{}/register", ns_url(&["db"])),
            &json!({ "name": "back", "metadata-location": metadata_location }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(registered["metadata-location"], metadata_location.as_str());
    assert_eq!(
        registered["metadata"]["table-uuid"],
        last["metadata"]["table-uuid"]
    );
    let loaded = s.load_table(&["db"], "back").await;
    assert_eq!(loaded["metadata-location"], metadata_location.as_str());
    assert_eq!(table_property(&loaded, "kept").as_deref(), Some("yes"));
    // It commits like any table.
    let next = s
        .set_table_properties(&["db"], "back", json!({ "more": "1" }))
        .await;
    assert_ne!(next["metadata-location"], metadata_location.as_str());

    // The name is taken now; overwrite points it back at the old file.
    s.post(
        &format!("{}/register", ns_url(&["db"])),
        &json!({ "name": "back", "metadata-location": metadata_location }),
    )
    .await
    .error(409, "AlreadyExistsException");
    s.post(
        &format!("{}/register", ns_url(&["db"])),
        &json!({ "name": "back", "metadata-location": metadata_location, "overwrite": true }),
    )
    .await
    .ok(200);
    assert_eq!(
        s.table_pointer(&["db"], "back").await.as_deref(),
        Some(metadata_location.as_str())
    );
}

/// With the drop retention off, a purge is immediate (with it on, the default, files
/// wait for the retention: `tests/e2e/test_undrop.py`).
#[tokio::test]
async fn drop_with_purge_deletes_the_table_directory() {
    let s = Server::start_with(|c| c.drop_retention = std::time::Duration::ZERO).await;
    s.create_namespace(&["db"]).await;
    let kept = s.create_table(&["db"], "kept").await;
    let purged = s.create_table(&["db"], "purged").await;
    s.set_table_properties(&["db"], "purged", json!({ "x": "1" }))
        .await;
    let kept_dir = kept["metadata"]["location"].as_str().unwrap();
    let purged_dir = purged["metadata"]["location"].as_str().unwrap();
    assert!(!s.files.list(purged_dir).await.is_empty());

    s.delete(&format!(
        "{}?purgeRequested=True",
        table_url(&["db"], "purged")
    ))
    .await
    .ok(204);
    assert_eq!(
        s.files.list(purged_dir).await,
        Vec::<String>::new(),
        "{purged_dir} must be gone"
    );
    s.delete(&format!(
        "{}?purgeRequested=false",
        table_url(&["db"], "kept")
    ))
    .await
    .ok(204);
    assert!(
        !s.files.list(kept_dir).await.is_empty(),
        "a drop without purge keeps the files"
    );
    for name in ["kept", "purged"] {
        s.get(&table_url(&["db"], name))
            .await
            .error(404, "NoSuchTableException");
    }
    assert!(s.list_tables(&["db"]).await.is_empty());
}

/// A purge never deletes where a table now lies: a table dropped with purge, its name
/// and explicit location taken again by a new table, then purged, leaves the new
/// table's files alone (they cannot be told from the old one's).
#[tokio::test]
async fn a_purge_leaves_a_new_table_at_the_same_location_alone() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let location = format!("{}/explicit/t", s.warehouse());
    let body = json!({ "name": "t", "schema": schema(), "location": location });
    s.post(&tables_url(&["db"]), &body).await.ok(200);
    s.delete(&format!("{}?purgeRequested=true", table_url(&["db"], "t")))
        .await
        .ok(204);
    let again = s.post(&tables_url(&["db"]), &body).await.ok(200).json();
    let metadata = again["metadata-location"].as_str().expect("a location");
    let id = s.newest_dropped_id().await;
    s.delete(&format!("/api/management/v1/catalogs/default/dropped/{id}"))
        .await
        .ok(204);
    let name = metadata
        .strip_prefix(&format!("{location}/"))
        .unwrap_or_else(|| panic!("{metadata} is inside {location}"));
    assert!(
        s.files.list(&location).await.iter().any(|f| f == name),
        "the new table's metadata file {metadata} must stay"
    );
    assert_eq!(
        s.table_pointer(&["db"], "t").await.as_deref(),
        Some(metadata)
    );
}

/// The other way round: nothing is created where a purge is still deleting files. With
/// one file deleted per round, the purge of a table with several files is still under
/// way after its first round (the expirer runs the rest, once a minute with the default
/// retention), so a create at, inside or around its location is a 400 naming it, and
/// changes nothing; a sibling whose name merely starts alike is fine.
#[tokio::test]
async fn nothing_is_created_where_a_purge_is_still_deleting() {
    let s = Server::start_with(|c| c.purge_batch_files = 1).await;
    s.create_namespace(&["db"]).await;
    let at = |name: &str, location: &str| json!({ "name": name, "schema": schema(), "location": location });
    // The expirer's first pass runs as the server starts; should it lag and finish a
    // purge, the next comes a minute later, so a second table is left under way.
    let mut under_way = None;
    for table in ["t", "t_again"] {
        let location = format!("{}/explicit/{table}", s.warehouse());
        s.post(&tables_url(&["db"]), &at(table, &location))
            .await
            .ok(200);
        for i in 0..3 {
            s.set_table_properties(&["db"], table, json!({ "x": i.to_string() }))
                .await;
        }
        s.delete(&format!(
            "{}?purgeRequested=true",
            table_url(&["db"], table)
        ))
        .await
        .ok(204);
        let id = s.newest_dropped_id().await;
        s.delete(&format!("/api/management/v1/catalogs/default/dropped/{id}"))
            .await
            .ok(204);
        // One round of one file leaves the purge under way.
        if !s.files.list(&location).await.is_empty() {
            under_way = Some((table, location));
            break;
        }
    }
    let (table, location) = under_way.expect("a purge still under way");
    let around = format!("{}/explicit", s.warehouse());
    for (name, refused) in [
        (table, location.clone()),
        ("u", format!("{location}/sub")),
        ("v", around),
    ] {
        let message = s
            .post(&tables_url(&["db"]), &at(name, &refused))
            .await
            .error(400, "BadRequestException");
        assert!(message.contains("being deleted"), "{message}");
        assert!(message.contains(&location), "{message}");
        s.get(&table_url(&["db"], name))
            .await
            .error(404, "NoSuchTableException");
    }
    assert!(s.list_tables(&["db"]).await.is_empty());
    s.post(
        &tables_url(&["db"]),
        &at("sibling", &format!("{location}2")),
    )
    .await
    .ok(200);
}

#[tokio::test]
async fn metrics_reports_are_accepted() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    let url = format!("{}/metrics", table_url(&["db"], "t"));
    let r = s
        .post(
            &url,
            &json!({
                "report-type": "commit-report",
                "table-name": "default.db.t",
                "snapshot-id": 1,
                "sequence-number": 1,
                "operation": "append",
                "metrics": { "total-duration": { "count": 1, "time-unit": "nanoseconds", "total-duration": 10 } },
            }),
        )
        .await
        .ok(204);
    assert!(r.body.is_empty());
    s.post(
        &url,
        &json!({
            "report-type": "scan-report",
            "table-name": "default.db.t",
            "snapshot-id": 1,
            "filter": true,
            "schema-id": 0,
            "projected-field-ids": [1],
            "projected-field-names": ["id"],
            "metrics": {},
        }),
    )
    .await
    .ok(204);
    s.post(&url, &json!({ "report-type": "scan-report" }))
        .await
        .error(400, "BadRequestException");
    s.post(&url, &json!([1, 2]))
        .await
        .error(400, "BadRequestException");
    // A metric that is neither a counter nor a timer of counts is refused, saying which.
    let r = s
        .post(
            &url,
            &json!({
                "report-type": "commit-report", "table-name": "default.db.t", "snapshot-id": 1,
                "sequence-number": 1, "operation": "append",
                "metrics": { "added-data-files": { "unit": "count", "value": -3 } },
            }),
        )
        .await;
    assert!(
        r.body
            .contains("metric added-data-files: value must be an integer of 0 or more"),
        "{}",
        r.body
    );
    r.error(400, "BadRequestException");
    s.post(
        &format!("{}/metrics", table_url(&["db"], "missing")),
        &json!({
            "report-type": "commit-report", "table-name": "x", "snapshot-id": 1,
            "sequence-number": 1, "operation": "append", "metrics": {},
        }),
    )
    .await
    .error(404, "NoSuchTableException");
}

// ---- views ---------------------------------------------------------------------------------

#[tokio::test]
async fn views_create_load_replace_rename_drop_and_register() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_namespace(&["other"]).await;
    let created = s.create_view(&["db"], "v").await;
    let first = created["metadata-location"].as_str().unwrap().to_string();
    assert!(s.files.is_file(&first).await);
    let metadata = &created["metadata"];
    assert_eq!(metadata["current-version-id"], 1);
    assert_eq!(metadata["properties"]["comment"], "a test view");
    assert!(metadata["location"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{}/db/v", s.warehouse())));
    assert_eq!(
        metadata["versions"][0]["representations"][0]["sql"],
        "SELECT 1"
    );
    let uuid = metadata["view-uuid"].clone();
    assert!(uuid.is_string());

    assert_eq!(s.load_view(&["db"], "v").await, created);
    s.head(&view_url(&["db"], "v")).await.ok(204);
    assert_eq!(s.head(&view_url(&["db"], "w")).await.status, 404);
    assert_eq!(s.list_views(&["db"]).await, vec!["v"]);
    assert!(s.list_tables(&["db"]).await.is_empty());

    // Replace: a new version made current.
    let replaced = s
        .post(
            &view_url(&["db"], "v"),
            &json!({
                "identifier": ident(&["db"], "v"),
                "requirements": [{ "type": "assert-view-uuid", "uuid": uuid }],
                "updates": [
                    { "action": "add-view-version", "view-version": view_version(2, &["db"], "SELECT 2") },
                    { "action": "set-current-view-version", "view-version-id": -1 },
                    { "action": "set-properties", "updates": { "replaced": "yes" } },
                ],
            }),
        )
        .await
        .ok(200)
        .json();
    let second = replaced["metadata-location"].as_str().unwrap().to_string();
    assert_ne!(first, second);
    let current = replaced["metadata"]["current-version-id"].as_i64().unwrap();
    let versions = replaced["metadata"]["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 2, "{replaced}");
    let current_version = versions
        .iter()
        .find(|v| v["version-id"] == current)
        .expect("current version is listed");
    assert_eq!(current_version["representations"][0]["sql"], "SELECT 2");
    assert_eq!(replaced["metadata"]["properties"]["replaced"], "yes");
    assert_eq!(s.load_view(&["db"], "v").await, replaced);

    // Rename across namespaces.
    s.post(
        &format!("{V1}/views/rename"),
        &json!({ "source": ident(&["db"], "v"), "destination": ident(&["other"], "v2") }),
    )
    .await
    .ok(204);
    s.get(&view_url(&["db"], "v"))
        .await
        .error(404, "NoSuchViewException");
    let moved = s.load_view(&["other"], "v2").await;
    assert_eq!(moved["metadata-location"], second.as_str());
    assert!(s.list_views(&["db"]).await.is_empty());
    assert_eq!(s.list_views(&["other"]).await, vec!["v2"]);

    // Drop, then register the metadata file again.
    s.delete(&view_url(&["other"], "v2")).await.ok(204);
    s.get(&view_url(&["other"], "v2"))
        .await
        .error(404, "NoSuchViewException");
    assert!(s.list_views(&["other"]).await.is_empty());
    let registered = s
        .post(
            &format!("{}/register-view", ns_url(&["db"])),
            &json!({ "name": "again", "metadata-location": second }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(registered["metadata-location"], second.as_str());
    assert_eq!(registered["metadata"]["view-uuid"], uuid);
    let loaded = s.load_view(&["db"], "again").await;
    assert_eq!(loaded["metadata-location"], second.as_str());
    assert_eq!(loaded["metadata"]["current-version-id"], current);
    s.post(
        &format!("{}/register-view", ns_url(&["db"])),
        &json!({ "name": "again", "metadata-location": second }),
    )
    .await
    .error(409, "AlreadyExistsException");
}

#[tokio::test]
async fn tables_and_views_share_one_name_space() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    s.create_view(&["db"], "v").await;

    let message = s
        .post(&views_url(&["db"]), &view_body("t", &["db"], "SELECT 1"))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "Table with same name already exists: db.t");
    let message = s
        .create_table_with(&["db"], json!({ "name": "v", "schema": schema() }))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "View with same name already exists: db.v");
    let message = s
        .create_table_with(&["db"], json!({ "name": "t", "schema": schema() }))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "Table already exists: db.t");
    let message = s
        .post(&views_url(&["db"]), &view_body("v", &["db"], "SELECT 1"))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "View already exists: db.v");

    let message = s
        .post(
            &format!("{V1}/tables/rename"),
            &json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], "v") }),
        )
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "Cannot rename db.t to db.v. View already exists");
    let message = s
        .post(
            &format!("{V1}/views/rename"),
            &json!({ "source": ident(&["db"], "v"), "destination": ident(&["db"], "t") }),
        )
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "Cannot rename db.v to db.t. Table already exists");

    // A view is not a table and a table is not a view.
    s.get(&table_url(&["db"], "v"))
        .await
        .error(404, "NoSuchTableException");
    s.get(&view_url(&["db"], "t"))
        .await
        .error(404, "NoSuchViewException");
    s.delete(&table_url(&["db"], "v"))
        .await
        .error(404, "NoSuchTableException");
    s.delete(&view_url(&["db"], "t"))
        .await
        .error(404, "NoSuchViewException");
    assert_eq!(s.list_tables(&["db"]).await, vec!["t"]);
    assert_eq!(s.list_views(&["db"]).await, vec!["v"]);
}

// ---- Polaris's generic tables ----------------------------------------------------------------

/// Where Polaris serves generic tables (and its Spark client looks), and the root twin.
const GENERIC: &str = "/api/catalog/polaris/v1/default/namespaces";
const GENERIC_AT_ROOT: &str = "/polaris/v1/default/namespaces";

fn generic_url(namespace: &[&str]) -> String {
    format!("{GENERIC}/{}/generic-tables", ns(namespace))
}

async fn list_generic(s: &Server, namespace: &[&str]) -> Vec<String> {
    let body = s.get(&generic_url(namespace)).await.ok(200).json();
    names(&body)
}

#[tokio::test]
async fn generic_tables_create_load_list_and_drop() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let base = format!("{}/db/delta_t", s.warehouse());
    let body = json!({
        "name": "g", "format": "delta", "base-location": format!("{base}/"),
        "doc": "a Delta table", "properties": {"owner": "ana"}
    });
    let created = s.post(&generic_url(&["db"]), &body).await.ok(200).json();
    let expected = json!({"table": {
        "name": "g", "format": "delta", "base-location": base,
        "doc": "a Delta table", "properties": {"owner": "ana"}
    }});
    assert_eq!(created, expected);
    for path in [
        format!("{}/g", generic_url(&["db"])),
        format!("{GENERIC_AT_ROOT}/db/generic-tables/g"),
    ] {
        assert_eq!(s.get(&path).await.ok(200).json(), expected, "{path}");
    }
    // Without a location or properties: both optional.
    let bare = s
        .post(
            &generic_url(&["db"]),
            &json!({"name": "csv", "format": "csv"}),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(
        bare,
        json!({"table": {"name": "csv", "format": "csv", "properties": {}}})
    );
    assert_eq!(list_generic(&s, &["db"]).await, vec!["csv", "g"]);
    let page = s
        .get(&format!("{}?pageSize=1", generic_url(&["db"])))
        .await
        .ok(200)
        .json();
    assert_eq!(names(&page), vec!["csv"]);
    let token = page["next-page-token"].as_str().expect("a next page");
    let next = s
        .get(&format!(
            "{}?pageSize=1&pageToken={token}",
            generic_url(&["db"])
        ))
        .await
        .ok(200)
        .json();
    assert_eq!(names(&next), vec!["g"]);
    // Iceberg lists do not show them, and a namespace holding one is not empty.
    assert!(s.list_tables(&["db"]).await.is_empty());
    assert!(s.list_views(&["db"]).await.is_empty());
    s.delete(&ns_url(&["db"]))
        .await
        .error(409, "NamespaceNotEmptyException");

    // The change events name them by uuid.
    let events = s
        .post(
            &format!("{V1}/events"),
            &json!({"object-types": ["generic-table"]}),
        )
        .await
        .ok(200)
        .json();
    let events = events["events"].as_array().expect("events").clone();
    assert_eq!(events.len(), 2, "{events:?}");
    let first = &events[0]["operation"];
    assert_eq!(first["operation-type"], "x-floe-create-generic-table");
    assert_eq!(first["format"], "delta");
    assert_eq!(first["base-location"], base);
    let uuid = first["generic-table-uuid"]
        .as_str()
        .expect("uuid")
        .to_string();

    s.delete(&format!("{}/g", generic_url(&["db"])))
        .await
        .ok(204);
    let message = s
        .get(&format!("{}/g", generic_url(&["db"])))
        .await
        .error(404, "NoSuchTableException");
    assert_eq!(message, "Generic table does not exist: db.g");
    s.delete(&format!("{}/g", generic_url(&["db"])))
        .await
        .error(404, "NoSuchTableException");
    assert_eq!(list_generic(&s, &["db"]).await, vec!["csv"]);
    let by_uuid = s
        .post(
            &format!("{V1}/events"),
            &json!({"catalog-objects-by-uuid": [uuid]}),
        )
        .await
        .ok(200)
        .json();
    let ops: Vec<&str> = by_uuid["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["operation"]["operation-type"].as_str().expect("type"))
        .collect();
    assert_eq!(
        ops,
        vec!["x-floe-create-generic-table", "x-floe-drop-generic-table"]
    );
    // Its drop is final: nothing of it waits to be undropped, as a table's drop does.
    s.create_table(&["db"], "t").await;
    s.delete(&table_url(&["db"], "t")).await.ok(204);
    let dropped = s
        .get("/api/management/v1/catalogs/default/dropped")
        .await
        .ok(200)
        .json();
    let dropped: Vec<&str> = dropped["dropped"]
        .as_array()
        .unwrap_or_else(|| panic!("a list: {dropped}"))
        .iter()
        .map(|d| d["name"].as_str().expect("name"))
        .collect();
    assert_eq!(dropped, vec!["t"]);
}

#[tokio::test]
async fn generic_tables_share_the_name_space_of_tables_and_views() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    s.create_view(&["db"], "v").await;
    s.post(
        &generic_url(&["db"]),
        &json!({"name": "g", "format": "delta"}),
    )
    .await
    .ok(200);
    let taken = [
        ("t", "Table with same name already exists: db.t"),
        ("v", "View with same name already exists: db.v"),
        ("g", "Generic table already exists: db.g"),
    ];
    for (name, expected) in taken {
        let message = s
            .post(
                &generic_url(&["db"]),
                &json!({"name": name, "format": "csv"}),
            )
            .await
            .error(409, "AlreadyExistsException");
        assert_eq!(message, expected);
    }
    let message = s
        .create_table_with(&["db"], json!({ "name": "g", "schema": schema() }))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "Generic table with same name already exists: db.g");
    let message = s
        .post(&views_url(&["db"]), &view_body("g", &["db"], "SELECT 1"))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(message, "Generic table with same name already exists: db.g");
    let message = s
        .post(
            &format!("{V1}/tables/rename"),
            &json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], "g") }),
        )
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(
        message,
        "Cannot rename db.t to db.g. Generic table already exists"
    );
    // A generic table is neither a table nor a view, and they are not generic tables.
    s.get(&table_url(&["db"], "g"))
        .await
        .error(404, "NoSuchTableException");
    s.head(&table_url(&["db"], "g")).await.ok(404);
    s.delete(&table_url(&["db"], "g"))
        .await
        .error(404, "NoSuchTableException");
    s.get(&view_url(&["db"], "g"))
        .await
        .error(404, "NoSuchViewException");
    s.commit(&["db"], "g", json!({"requirements": [], "updates": []}))
        .await
        .error(404, "NoSuchTableException");
    for name in ["t", "v"] {
        s.get(&format!("{}/{name}", generic_url(&["db"])))
            .await
            .error(404, "NoSuchTableException");
        s.delete(&format!("{}/{name}", generic_url(&["db"])))
            .await
            .error(404, "NoSuchTableException");
    }
    assert_eq!(s.list_tables(&["db"]).await, vec!["t"]);
    assert_eq!(s.list_views(&["db"]).await, vec!["v"]);
    assert_eq!(list_generic(&s, &["db"]).await, vec!["g"]);
}

#[tokio::test]
async fn bad_generic_tables_are_refused_and_change_nothing() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let table = s.create_table(&["db"], "t").await;
    let table_location = table["metadata"]["location"].as_str().expect("location");
    let url = generic_url(&["db"]);
    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (json!({"name": "g"}), 400, "BadRequestException", "format"),
        (
            json!({"format": "delta"}),
            400,
            "BadRequestException",
            "name",
        ),
        (
            json!({"name": "g", "format": " "}),
            400,
            "BadRequestException",
            "needs a format",
        ),
        (
            json!({"name": "", "format": "delta"}),
            400,
            "BadRequestException",
            "empty",
        ),
        (
            json!({"name": "g", "format": 7}),
            400,
            "BadRequestException",
            "format: invalid type: integer `7`, expected a string",
        ),
        (
            json!({"name": "g", "format": "delta", "properties": {"k": 1}}),
            400,
            "BadRequestException",
            "properties.k: invalid type: integer `1`, expected a string",
        ),
        (
            json!({"name": "g", "format": "delta", "base-location": ""}),
            400,
            "BadRequestException",
            "may not be empty",
        ),
        (
            json!({"name": "g", "format": "x".repeat(257)}),
            400,
            "BadRequestException",
            "at most 256",
        ),
        // Inside a table (its purge would delete the generic table's files) or outside
        // the catalog's allowed locations.
        (
            json!({"name": "g", "format": "delta", "base-location": format!("{table_location}/delta")}),
            400,
            "BadRequestException",
            "overlaps",
        ),
        (
            json!({"name": "g", "format": "delta", "base-location": format!("{}/g", s.outside())}),
            403,
            "ForbiddenException",
            "allowed locations",
        ),
    ];
    for (body, status, error_type, needle) in cases {
        let message = s.post(&url, &body).await.error(status, error_type);
        assert!(message.contains(needle), "{body}: {message}");
    }
    s.post_raw(&url, "{not json")
        .await
        .error(400, "BadRequestException");
    let message = s
        .post(
            &generic_url(&["nope"]),
            &json!({"name": "g", "format": "delta"}),
        )
        .await
        .error(404, "NoSuchNamespaceException");
    assert!(message.contains("nope"), "{message}");
    s.get(&generic_url(&["nope"]))
        .await
        .error(404, "NoSuchNamespaceException");
    s.get(&format!("{}?pageSize=0", url))
        .await
        .error(400, "BadRequestException");
    assert!(list_generic(&s, &["db"]).await.is_empty());
    assert_eq!(s.list_tables(&["db"]).await, vec!["t"]);
    // A table's location stays its own: nothing was created inside it.
    assert_eq!(
        s.load_table(&["db"], "t").await["metadata"]["location"],
        table_location
    );
}

// ---- Polaris management API and prefix ------------------------------------------------------

const CATALOGS: &str = "/api/management/v1/catalogs";

fn catalog_body(s: &Server, name: &str) -> Value {
    json!({ "catalog": {
        "type": "INTERNAL",
        "name": name,
        "properties": { "default-base-location": format!("file://{}/{name}", s.data_dir().display()) },
        "storageConfigInfo": {
            "storageType": "FILE",
            "allowedLocations": [format!("file://{}/extra-{name}", s.data_dir().display())],
        },
    } })
}

#[tokio::test]
async fn management_api_manages_catalogs() {
    let s = Server::start().await;
    let listed = s.get(CATALOGS).await.ok(200).json();
    let names: Vec<&str> = listed["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["default"]);

    let created = s
        .post(CATALOGS, &catalog_body(&s, "sales"))
        .await
        .ok(201)
        .json();
    assert_eq!(created["name"], "sales");
    assert_eq!(created["type"], "INTERNAL");
    assert_eq!(created["storageConfigInfo"]["storageType"], "FILE");
    assert_eq!(created["entityVersion"], 1);
    let base = format!("file://{}/sales", s.data_dir().display());
    assert_eq!(
        created["properties"]["default-base-location"],
        base.as_str()
    );
    s.post(CATALOGS, &catalog_body(&s, "sales"))
        .await
        .error(409, "AlreadyExistsException");

    let loaded = s.get(&format!("{CATALOGS}/sales")).await.ok(200).json();
    assert_eq!(loaded, created);
    let listed = s.get(CATALOGS).await.ok(200).json();
    let mut names: Vec<String> = listed["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, vec!["default", "sales"]);

    // Update with the current version; the base location is kept.
    let updated = s
        .put(
            &format!("{CATALOGS}/sales"),
            &json!({ "currentEntityVersion": 1, "properties": { "team": "blue" } }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(updated["entityVersion"], 2);
    assert_eq!(updated["properties"]["team"], "blue");
    assert_eq!(
        updated["properties"]["default-base-location"],
        base.as_str()
    );
    // A stale version conflicts and changes nothing.
    s.put(
        &format!("{CATALOGS}/sales"),
        &json!({ "currentEntityVersion": 1, "properties": { "team": "red" } }),
    )
    .await
    .error(409, "CommitFailedException");
    let now = s.get(&format!("{CATALOGS}/sales")).await.ok(200).json();
    assert_eq!(now["entityVersion"], 2);
    assert_eq!(now["properties"]["team"], "blue");

    // Unknown catalogs.
    for r in [
        s.get(&format!("{CATALOGS}/nope")).await,
        s.delete(&format!("{CATALOGS}/nope")).await,
        s.put(
            &format!("{CATALOGS}/nope"),
            &json!({ "currentEntityVersion": 1, "properties": {} }),
        )
        .await,
    ] {
        r.error(404, "NotFoundException");
    }

    // A catalog that holds a namespace cannot be deleted.
    s.post(
        "/v1/sales/namespaces",
        &json!({ "namespace": ["n"], "properties": {} }),
    )
    .await
    .ok(200);
    s.delete(&format!("{CATALOGS}/sales"))
        .await
        .error_status(409);
    s.get(&format!("{CATALOGS}/sales")).await.ok(200);
    s.delete(&format!("/v1/sales/namespaces/{}", ns(&["n"])))
        .await
        .ok(204);
    s.delete(&format!("{CATALOGS}/sales")).await.ok(204);
    s.get(&format!("{CATALOGS}/sales"))
        .await
        .error(404, "NotFoundException");
    s.get("/v1/sales/namespaces")
        .await
        .error(404, "NotFoundException");
}

#[tokio::test]
async fn management_api_rejects_bad_storage_types() {
    let s = Server::start().await;
    for storage_type in ["FOO", "S3", ""] {
        let mut body = catalog_body(&s, "bad");
        body["catalog"]["storageConfigInfo"]["storageType"] = json!(storage_type);
        s.post(CATALOGS, &body)
            .await
            .error(400, "BadRequestException");
    }
    let mut body = catalog_body(&s, "bad");
    body["catalog"]["storageConfigInfo"] = json!({ "allowedLocations": [] });
    s.post(CATALOGS, &body)
        .await
        .error(400, "BadRequestException");
    s.get(&format!("{CATALOGS}/bad"))
        .await
        .error(404, "NotFoundException");

    // Nor may an update switch an existing catalog to one.
    s.post(CATALOGS, &catalog_body(&s, "good")).await.ok(201);
    s.put(
        &format!("{CATALOGS}/good"),
        &json!({ "currentEntityVersion": 1, "storageConfigInfo": { "storageType": "GCS" } }),
    )
    .await
    .error(400, "BadRequestException");
    let now = s.get(&format!("{CATALOGS}/good")).await.ok(200).json();
    assert_eq!(now["entityVersion"], 1);
    assert_eq!(now["storageConfigInfo"]["storageType"], "FILE");
}

/// A catalog whose name is not a plain path segment gets its prefix escaped in the
/// config: Iceberg's clients put the prefix into their paths as given, and Java's cannot
/// send a path with a space, nor read `%` as anything but an escape.
#[tokio::test]
async fn a_catalog_name_that_needs_escaping_gets_an_escaped_prefix() {
    let s = Server::start().await;
    let name = "sales lake%1|q";
    let mut body = catalog_body(&s, "escaped");
    body["catalog"]["name"] = json!(name);
    s.post(CATALOGS, &body).await.ok(201);
    let config = s
        .get("/v1/config?warehouse=sales%20lake%251%7Cq")
        .await
        .ok(200)
        .json();
    let prefix = config["overrides"]["prefix"].as_str().unwrap().to_string();
    assert_eq!(prefix, "sales%20lake%251%7Cq");
    // The prefix, used as given, reaches that catalog and no other.
    s.post(
        &format!("/v1/{prefix}/namespaces"),
        &json!({ "namespace": ["n"] }),
    )
    .await
    .ok(200);
    let tables = format!("/v1/{prefix}/namespaces/n/tables");
    s.post(&tables, &json!({ "name": "t", "schema": schema() }))
        .await
        .ok(200);
    s.get(&format!("{tables}/t")).await.ok(200);
    let listed = s
        .get(&format!("/v1/{prefix}/namespaces"))
        .await
        .ok(200)
        .json();
    assert_eq!(listed["namespaces"], json!([["n"]]));
    s.get("/v1/default/namespaces/n")
        .await
        .error(404, "NoSuchNamespaceException");
    // Plain names are unchanged.
    let plain = s.get("/v1/config").await.ok(200).json();
    assert_eq!(plain["overrides"]["prefix"], "default");
}

#[tokio::test]
async fn a_new_catalog_serves_rest_within_its_allowed_locations() {
    let s = Server::start().await;
    s.post(CATALOGS, &catalog_body(&s, "cat2")).await.ok(201);
    let config = s.get("/v1/config?warehouse=cat2").await.ok(200).json();
    assert_eq!(config["overrides"]["prefix"], "cat2");

    s.post(
        "/v1/cat2/namespaces",
        &json!({ "namespace": ["n"], "properties": {} }),
    )
    .await
    .ok(200);
    let tables = format!("/v1/cat2/namespaces/{}/tables", ns(&["n"]));
    let default_placed = s
        .post(&tables, &json!({ "name": "t", "schema": schema() }))
        .await
        .ok(200)
        .json();
    assert!(default_placed["metadata"]["location"]
        .as_str()
        .unwrap()
        .starts_with(&format!("file://{}/cat2/n/t", s.data_dir().display())));
    let extra = format!("file://{}/extra-cat2/t2", s.data_dir().display());
    let placed = s
        .post(
            &tables,
            &json!({ "name": "t2", "schema": schema(), "location": extra }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(placed["metadata"]["location"], extra.as_str());
    // The default catalog does not see them.
    s.get(&ns_url(&["n"]))
        .await
        .error(404, "NoSuchNamespaceException");
    // Outside both allowed locations: forbidden.
    s.post(
        &tables,
        &json!({ "name": "t3", "schema": schema(), "location": format!("{}/t3", s.outside()) }),
    )
    .await
    .error(403, "ForbiddenException");
}

#[tokio::test]
async fn polaris_prefix_serves_the_same_catalog() {
    let s = Server::start().await;
    let p = "/api/catalog/v1/default";
    s.post(
        &format!("{p}/namespaces"),
        &json!({ "namespace": ["pol"], "properties": { "k": "v" } }),
    )
    .await
    .ok(200);
    assert_eq!(s.namespace_properties(&["pol"]).await, json!({ "k": "v" }));
    let listed = s.get(&format!("{p}/namespaces")).await.ok(200).json();
    assert_eq!(listed["namespaces"], json!([["pol"]]));
    s.head(&format!("{p}/namespaces/pol")).await.ok(204);

    let created = s
        .post(
            &format!("{p}/namespaces/pol/tables"),
            &json!({ "name": "t", "schema": schema() }),
        )
        .await
        .ok(200)
        .json();
    let via_v1 = s.load_table(&["pol"], "t").await;
    assert_eq!(via_v1["metadata-location"], created["metadata-location"]);
    let committed = s
        .post(
            &format!("{p}/namespaces/pol/tables/t"),
            &json!({ "updates": [{ "action": "set-properties", "updates": { "via": "polaris" } }] }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(
        s.table_pointer(&["pol"], "t").await.as_deref(),
        committed["metadata-location"].as_str()
    );
    let loaded = s
        .get(&format!("{p}/namespaces/pol/tables/t"))
        .await
        .ok(200)
        .json();
    assert_eq!(table_property(&loaded, "via").as_deref(), Some("polaris"));
    s.post(
        &format!("{p}/namespaces/pol/views"),
        &view_body("v", &["pol"], "SELECT 1"),
    )
    .await
    .ok(200);
    assert_eq!(s.list_views(&["pol"]).await, vec!["v"]);
    s.get(&format!("{p}/namespaces/pol/tables/missing"))
        .await
        .error(404, "NoSuchTableException");
    s.delete(&format!("{p}/namespaces/pol/tables/t"))
        .await
        .ok(204);
    s.delete(&format!("{p}/namespaces/pol/views/v"))
        .await
        .ok(204);
    s.delete(&format!("{p}/namespaces/pol")).await.ok(204);
    assert!(s.list_namespaces(None).await.is_empty());
    s.get("/api/catalog/v1/nope/namespaces")
        .await
        .error(404, "NotFoundException");
}

// ---- limits and concurrency ----------------------------------------------------------------

#[tokio::test]
async fn a_table_name_of_the_maximum_length_works() {
    let s = Server::start().await;
    let long_ns = "n".repeat(255);
    let long_table = "t".repeat(255);
    s.create_namespace(&[&long_ns]).await;
    assert_eq!(s.list_namespaces(None).await, vec![vec![long_ns.clone()]]);
    let created = s.create_table(&[&long_ns], &long_table).await;
    assert_eq!(
        s.table_pointer(&[&long_ns], &long_table).await.as_deref(),
        created["metadata-location"].as_str()
    );
    s.set_table_properties(&[&long_ns], &long_table, json!({ "k": "v" }))
        .await;
    let view = "v".repeat(255);
    s.create_view(&[&long_ns], &view).await;
    assert_eq!(s.list_views(&[&long_ns]).await, vec![view]);
}

#[tokio::test]
async fn a_multibyte_namespace_of_the_maximum_length_works() {
    let s = Server::start().await;
    let multibyte = "é".repeat(127); // 254 bytes
    s.create_namespace(&[&multibyte]).await;
    s.create_table(&[&multibyte], "t").await;
    s.create_view(&[&multibyte], "v").await;
    assert_eq!(s.list_tables(&[&multibyte]).await, vec!["t"]);
    assert_eq!(s.list_views(&[&multibyte]).await, vec!["v"]);
}

#[tokio::test]
async fn special_characters_in_names_round_trip() {
    let s = Server::start().await;
    // ("." and ".." are covered below: as a whole path segment, URL clients resolve them.)
    let names = [
        "a/b",
        "%2F",
        "a.b",
        "...",
        "with space",
        "ünïcödé",
        "日本",
        "a?b#c&d=e",
        "+",
    ];
    for name in names {
        s.create_namespace(&[name]).await;
        s.create_namespace(&[name, name]).await;
        let created = s.create_table(&[name, name], name).await;
        let location = created["metadata"]["location"].as_str().unwrap();
        // The table's directory lies inside the catalog, whatever the name.
        assert!(
            local_path(location).starts_with(local_path(&s.warehouse())),
            "{name:?}: {location}"
        );
        assert!(
            !location.contains("/../") && !location.contains("/./"),
            "{location}"
        );
        assert_eq!(
            s.table_pointer(&[name, name], name).await.as_deref(),
            created["metadata-location"].as_str()
        );
        s.create_view(&[name, name], &format!("v{name}")).await;
        assert_eq!(s.list_tables(&[name, name]).await, vec![name.to_string()]);
        assert_eq!(
            s.list_namespaces(Some(&[name])).await,
            vec![vec![name.to_string(), name.to_string()]]
        );
    }
    let mut expected: Vec<Vec<String>> = names.iter().map(|n| vec![n.to_string()]).collect();
    expected.sort();
    assert_eq!(s.list_namespaces(None).await, expected);
    assert_eq!(
        s.files
            .list(&s.warehouse())
            .await
            .iter()
            .filter(|f| f.ends_with(".metadata.json"))
            .count(),
        names.len() * 2,
        "every table and view wrote exactly one metadata file inside the warehouse"
    );

    // Dot names, inside a two-level namespace (so that no path segment is a dot segment).
    s.create_namespace(&["dots"]).await;
    for dots in [".", ".."] {
        s.create_namespace(&["dots", dots]).await;
        let created = s.create_table(&["dots", dots], dots).await;
        let location = created["metadata"]["location"].as_str().unwrap();
        assert!(
            local_path(location).starts_with(local_path(&s.warehouse())),
            "{dots:?}: {location}"
        );
        assert!(
            !location.contains("/../") && !location.contains("/./"),
            "{location}"
        );
        assert_eq!(s.list_tables(&["dots", dots]).await, vec![dots.to_string()]);
    }
}

#[tokio::test]
async fn purging_a_table_never_deletes_another_objects_files() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let table_location = format!("{}/shared/tbl", s.warehouse());
    s.create_table_with(
        &["db"],
        json!({ "name": "t", "schema": schema(), "location": table_location }),
    )
    .await
    .ok(200);
    // A view placed inside the table's directory: either refused like a table would be,
    // or it must survive the table's purge.
    let mut body = view_body("v", &["db"], "SELECT 1");
    body["location"] = json!(format!("{table_location}/v"));
    let r = s.post(&views_url(&["db"]), &body).await;
    if r.status == 400 {
        r.error(400, "BadRequestException");
        return;
    }
    let view = r.ok(200).json();
    let view_file = view["metadata-location"].as_str().unwrap().to_string();
    s.delete(&format!("{}?purgeRequested=true", table_url(&["db"], "t")))
        .await
        .ok(204);
    assert!(
        s.files.is_file(&view_file).await,
        "purging table db.t deleted the metadata file {view_file} of view db.v"
    );
}

#[tokio::test]
async fn purging_a_table_never_deletes_another_tables_metadata() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let a_location = format!("{}/shared/a", s.warehouse());
    s.create_table_with(
        &["db"],
        json!({ "name": "a", "schema": schema(), "location": a_location }),
    )
    .await
    .ok(200);
    // Table b keeps its metadata files inside a's directory: either refused, or b must
    // survive a's purge.
    let r = s
        .create_table_with(
            &["db"],
            json!({
                "name": "b",
                "schema": schema(),
                "location": format!("{}/shared/b", s.warehouse()),
                "properties": { "write.metadata.path": format!("{a_location}/b-metadata") },
            }),
        )
        .await;
    if r.status == 400 {
        r.error(400, "BadRequestException");
        return;
    }
    let b = r.ok(200).json();
    s.delete(&format!("{}?purgeRequested=true", table_url(&["db"], "a")))
        .await
        .ok(204);
    let b_file = b["metadata-location"].as_str().unwrap();
    assert!(
        s.files.is_file(b_file).await,
        "purging table db.a deleted {b_file}, the metadata file of table db.b"
    );
    s.load_table(&["db"], "b").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_blind_commits_all_succeed() {
    let s = std::sync::Arc::new(Server::start().await);
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "hot").await;
    let mut tasks = Vec::new();
    for task in 0..16 {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                let key = format!("p-{task}-{i}");
                s.commit(
                    &["db"],
                    "hot",
                    json!({ "updates": [{ "action": "set-properties", "updates": { key: "v" } }] }),
                )
                .await
                .ok(200);
            }
        }));
    }
    for task in tasks {
        task.await.expect("a committer task panicked");
    }
    let loaded = s.load_table(&["db"], "hot").await;
    let properties = loaded["metadata"]["properties"].as_object().unwrap();
    for task in 0..16 {
        for i in 0..10 {
            let key = format!("p-{task}-{i}");
            assert_eq!(
                properties.get(&key).and_then(Value::as_str),
                Some("v"),
                "{key} is missing"
            );
        }
    }
    let ours = properties.keys().filter(|k| k.starts_with("p-")).count();
    assert_eq!(ours, 160);
    // One unbroken chain: each commit (pipelined on the embedded store: built on the one
    // before while that was still being made durable) left its own file, in the log.
    // The log keeps the last 100 (Iceberg's write.metadata.previous-versions-max).
    let log = loaded["metadata"]["metadata-log"].as_array().unwrap();
    let mut files: Vec<&str> = log
        .iter()
        .map(|e| e["metadata-file"].as_str().unwrap())
        .collect();
    files.push(loaded["metadata-location"].as_str().unwrap());
    let version = |file: &str| -> u64 {
        let name = file.rsplit('/').next().unwrap();
        name.split('-').next().unwrap().parse().unwrap()
    };
    let versions: Vec<u64> = files.iter().map(|f| version(f)).collect();
    let expected: Vec<u64> = (161 - files.len() as u64..=160).collect();
    assert_eq!(versions, expected, "one file per commit, in order");
    for file in &files {
        assert!(s.files.is_file(file).await, "{file} is missing");
    }
}

/// `--fsync-journal`: a commit leaves its metadata file unsynced and the store keeps the
/// text until a round syncs it. A restart after a crash (files lost with the page cache,
/// or torn) rewrites every such file, superseded versions included, before serving; a
/// purged table's files are not brought back.
#[tokio::test]
async fn journaled_metadata_files_are_restored_after_a_crash() {
    let mut s = Server::start_with(|c| {
        c.fsync = true;
        // No round during the test: every file stays in the journal.
        c.fsync_journal = Some(std::time::Duration::from_secs(3600));
        c.drop_retention = std::time::Duration::ZERO;
    })
    .await;
    if s.on_s3() || s.on_postgres() {
        return; // the journal is the embedded store's, for local files
    }
    let path = |location: &Value| {
        std::path::PathBuf::from(location.as_str().unwrap().strip_prefix("file://").unwrap())
    };
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await;
    let mut versions = Vec::new();
    for i in 0..3 {
        let committed = s
            .set_table_properties(&["db"], "t", json!({"n": i.to_string()}))
            .await;
        versions.push((
            path(&committed["metadata-location"]),
            committed["metadata"].clone(),
        ));
    }
    s.create_table(&["db"], "gone").await;
    let gone = path(&s.load_table(&["db"], "gone").await["metadata-location"]);
    s.delete(&format!(
        "{}?purgeRequested=true",
        table_url(&["db"], "gone")
    ))
    .await
    .ok(204);
    let table_dir = gone.parent().unwrap().parent().unwrap().to_path_buf();
    for _ in 0..100 {
        if !table_dir.exists() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!table_dir.exists(), "the purge did not finish");

    s.restart(|_| {
        // What a power cut may leave: the newest file gone, an older one torn.
        std::fs::remove_file(&versions[2].0).unwrap();
        std::fs::write(&versions[1].0, "{\"format-ver").unwrap();
    })
    .await;
    let loaded = s.load_table(&["db"], "t").await;
    assert_eq!(path(&loaded["metadata-location"]), versions[2].0);
    for (file, metadata) in &versions {
        let on_disk: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        assert_eq!(&on_disk, metadata, "{} not restored", file.display());
    }
    assert!(!table_dir.exists(), "a purged table's files came back");
    // Commits go on from the restored state.
    let committed = s
        .set_table_properties(&["db"], "t", json!({"n": "3"}))
        .await;
    assert_eq!(committed["metadata"]["properties"]["n"], "3");
}

/// Table loads are served by the hot lane, without the router (`http::hot`); the same
/// requests sent to the same catalog with the lane closed must get the same answers:
/// status, body and every header but the per-request ones.
#[tokio::test]
async fn the_hot_lane_answers_loads_as_the_router_does() {
    let s = Server::start().await;
    s.create_namespace(&["a"]).await;
    s.create_namespace(&["a", "b c"]).await;
    s.create_namespace(&["plain"]).await;
    s.create_table(&["a", "b c"], "t x").await;
    s.create_table(&["plain"], "t").await;
    let etag = s
        .get(&table_url(&["plain"], "t"))
        .await
        .ok(200)
        .header("etag")
        .expect("an ETag");
    let loads = [
        (table_url(&["plain"], "t"), vec![]),
        (table_url(&["a", "b c"], "t x"), vec![]),
        (
            format!("{}?snapshots=refs", table_url(&["plain"], "t")),
            vec![],
        ),
        (
            format!("{}?snapshots=bogus", table_url(&["plain"], "t")),
            vec![],
        ),
        (
            table_url(&["plain"], "t"),
            vec![("if-none-match", etag.as_str())],
        ),
        (
            table_url(&["plain"], "t"),
            vec![("if-none-match", "\"other\"")],
        ),
        (
            table_url(&["plain"], "t"),
            vec![("x-iceberg-access-delegation", "vended-credentials")],
        ),
        (table_url(&["plain"], "t"), vec![("x-request-id", "mine")]),
        (table_url(&["plain"], "missing"), vec![]),
        (table_url(&["missing"], "t"), vec![]),
        ("/v1/nope/namespaces/plain/tables/t".to_string(), vec![]),
        ("/v1/oauth/namespaces/plain/tables/t".to_string(), vec![]),
        (
            "/api/catalog/v1/default/namespaces/plain/tables/t".to_string(),
            vec![],
        ),
        (format!("{}/tables/%FF", ns_url(&["plain"])), vec![]),
        (format!("{}/tables/t/", ns_url(&["plain"])), vec![]),
        (
            format!("{}/tables/{}", ns_url(&["plain"]), "x".repeat(300)),
            vec![],
        ),
    ];
    for (path, headers) in &loads {
        let mut answers = Vec::new();
        for base in [&s.base, &s.routed] {
            let mut request = s.client.get(format!("{base}{path}"));
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            answers.push(
                s.send(format!("GET {base}{path} {headers:?}"), request)
                    .await,
            );
        }
        let [lane, routed] = [&answers[0], &answers[1]];
        assert_eq!(lane.status, routed.status, "{path} {headers:?}");
        assert_eq!(lane.body, routed.body, "{path} {headers:?}");
        let kept = |r: &Resp| {
            let mut headers: Vec<(String, String)> = r
                .headers
                .iter()
                .filter(|(name, _)| !["date", "x-request-id"].contains(&name.as_str()))
                .map(|(name, value)| (name.to_string(), value.to_str().unwrap().to_string()))
                .collect();
            headers.sort();
            headers
        };
        assert_eq!(kept(lane), kept(routed), "{path} {headers:?}");
        if headers.iter().any(|(name, _)| *name == "x-request-id") {
            assert_eq!(lane.header("x-request-id").as_deref(), Some("mine"));
            assert_eq!(routed.header("x-request-id").as_deref(), Some("mine"));
        }
    }
}
