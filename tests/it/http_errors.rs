//! Black-box tests of Floe's HTTP API, bad input: every rejected request must get a 4xx
//! with the spec's `{"error": {"message", "type", "code"}}` body of the right exception
//! type, and must change nothing (checked against a snapshot of the whole catalog state,
//! metadata files included).

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

/// A server with namespace `db` holding table `t` and view `v`, plus the state snapshot.
async fn populated() -> (Server, Value) {
    let s = Server::start().await;
    s.create_namespace_with(&["db"], json!({ "owner": "ann" }))
        .await;
    s.create_namespace(&["db", "inner"]).await;
    s.create_table(&["db"], "t").await;
    s.create_view(&["db"], "v").await;
    let state = s.state().await;
    (s, state)
}

fn commit_url() -> String {
    table_url(&["db"], "t")
}

// ---- malformed and mis-shaped bodies -------------------------------------------------------

#[tokio::test]
async fn malformed_json_is_a_400() {
    let (s, before) = populated().await;
    let targets = [
        format!("{V1}/namespaces"),
        format!("{}/properties", ns_url(&["db"])),
        tables_url(&["db"]),
        commit_url(),
        format!("{}/metrics", commit_url()),
        format!("{}/register", ns_url(&["db"])),
        format!("{V1}/tables/rename"),
        format!("{V1}/transactions/commit"),
        views_url(&["db"]),
        view_url(&["db"], "v"),
        format!("{V1}/views/rename"),
        format!("{}/register-view", ns_url(&["db"])),
        "/api/management/v1/catalogs".to_string(),
    ];
    for path in &targets {
        for body in ["{not json", "", "{\"namespace\": [\"x\"]", "null x"] {
            s.post_raw(path, body)
                .await
                .error(400, "BadRequestException");
        }
    }
    s.assert_unchanged(&before, "malformed JSON").await;
    assert_eq!(
        s.get("/api/management/v1/catalogs").await.ok(200).json()["catalogs"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn wrongly_shaped_json_is_a_400() {
    let (s, before) = populated().await;
    let cases: Vec<(String, Value)> = vec![
        (format!("{V1}/namespaces"), json!({ "namespace": "x" })),
        (format!("{V1}/namespaces"), json!({ "properties": {} })),
        (
            format!("{V1}/namespaces"),
            json!({ "namespace": ["x"], "properties": { "k": 1 } }),
        ),
        (format!("{V1}/namespaces"), json!(["x"])),
        (
            format!("{}/properties", ns_url(&["db"])),
            json!({ "removals": "owner" }),
        ),
        (tables_url(&["db"]), json!({ "name": "x" })),
        (
            tables_url(&["db"]),
            json!({ "name": "x", "schema": { "type": "struct" } }),
        ),
        (
            tables_url(&["db"]),
            json!({ "name": 5, "schema": schema() }),
        ),
        (
            commit_url(),
            json!({ "updates": { "action": "set-properties" } }),
        ),
        (
            commit_url(),
            json!({ "updates": [{ "action": "set-properties", "updates": ["a"] }] }),
        ),
        (commit_url(), json!({ "requirements": "assert-create" })),
        (
            format!("{V1}/tables/rename"),
            json!({ "source": ident(&["db"], "t") }),
        ),
        (
            format!("{V1}/tables/rename"),
            json!({ "source": "db.t", "destination": "db.u" }),
        ),
        (
            format!("{V1}/transactions/commit"),
            json!({ "table-changes": {} }),
        ),
        (
            format!("{}/register", ns_url(&["db"])),
            json!({ "name": "r" }),
        ),
        (
            views_url(&["db"]),
            json!({ "name": "w", "schema": schema() }),
        ),
        (
            view_url(&["db"], "v"),
            json!({ "updates": [{ "action": "add-view-version" }] }),
        ),
        (
            format!("{}/register-view", ns_url(&["db"])),
            json!({ "metadata-location": "file:///x" }),
        ),
        (
            "/api/management/v1/catalogs".to_string(),
            json!({ "name": "flat" }),
        ),
    ];
    for (path, body) in &cases {
        s.post(path, body).await.error(400, "BadRequestException");
    }
    s.put(
        "/api/management/v1/catalogs/default",
        &json!({ "properties": "x" }),
    )
    .await
    .error(400, "BadRequestException");
    s.assert_unchanged(&before, "wrongly shaped JSON").await;
}

#[tokio::test]
async fn unknown_update_actions_are_a_400() {
    let (s, before) = populated().await;
    for update in [
        json!({ "action": "frobnicate" }),
        json!({ "action": "set-properties-typo", "updates": { "a": "b" } }),
        json!({ "updates": { "a": "b" } }),
    ] {
        // Also when an otherwise valid update comes first.
        let body = json!({ "updates": [
            { "action": "set-properties", "updates": { "a": "b" } },
            update,
        ] });
        s.commit(&["db"], "t", body.clone())
            .await
            .error(400, "BadRequestException");
        s.post(&view_url(&["db"], "v"), &body)
            .await
            .error(400, "BadRequestException");
        s.post(
            &format!("{V1}/transactions/commit"),
            &json!({ "table-changes": [{ "identifier": ident(&["db"], "t"), "updates": body["updates"] }] }),
        )
        .await
        .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "unknown update actions").await;
}

#[tokio::test]
async fn unknown_requirement_types_are_a_400() {
    let (s, before) = populated().await;
    for requirement in [
        json!({ "type": "assert-nonsense" }),
        json!({ "type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000000" }),
        json!({ "current-schema-id": 0 }),
    ] {
        let body = json!({
            "requirements": [requirement],
            "updates": [{ "action": "set-properties", "updates": { "a": "b" } }],
        });
        s.commit(&["db"], "t", body.clone())
            .await
            .error(400, "BadRequestException");
    }
    s.post(
        &view_url(&["db"], "v"),
        &json!({
            "requirements": [{ "type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000" }],
            "updates": [{ "action": "set-properties", "updates": { "a": "b" } }],
        }),
    )
    .await
    .error(400, "BadRequestException");
    s.assert_unchanged(&before, "unknown requirement types")
        .await;
}

// ---- names ---------------------------------------------------------------------------------

#[tokio::test]
async fn empty_namespace_levels_and_names_are_a_400() {
    let (s, before) = populated().await;
    for levels in [json!([]), json!([""]), json!(["db", ""]), json!(["", "db"])] {
        s.post(
            &format!("{V1}/namespaces"),
            &json!({ "namespace": levels, "properties": {} }),
        )
        .await
        .error(400, "BadRequestException");
    }
    for raw in ["db%1F", "%1Fdb", "db%1F%1Finner"] {
        s.get(&format!("{V1}/namespaces/{raw}"))
            .await
            .error(400, "BadRequestException");
        s.delete(&format!("{V1}/namespaces/{raw}"))
            .await
            .error(400, "BadRequestException");
        s.post(
            &format!("{V1}/namespaces/{raw}/tables"),
            &json!({ "name": "x", "schema": schema() }),
        )
        .await
        .error(400, "BadRequestException");
        s.get(&format!("{V1}/namespaces/{raw}/tables/t"))
            .await
            .error(400, "BadRequestException");
    }
    s.get(&format!("{V1}/namespaces?parent=db%1F"))
        .await
        .error(400, "BadRequestException");
    s.create_table_with(&["db"], json!({ "name": "", "schema": schema() }))
        .await
        .error(400, "BadRequestException");
    s.post(&views_url(&["db"]), &view_body("", &["db"], "SELECT 1"))
        .await
        .error(400, "BadRequestException");
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], "") }),
    )
    .await
    .error(400, "BadRequestException");
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&["db"], "t"), "destination": ident(&[], "t2") }),
    )
    .await
    .error(400, "BadRequestException");
    s.assert_unchanged(&before, "empty names").await;
}

#[tokio::test]
async fn control_characters_in_names_are_a_400() {
    let (s, before) = populated().await;
    for bad in [
        "a\tb", "a\nb", "a\u{1}b", "a\u{7f}b", "a\u{1f}b", "a\u{85}b",
    ] {
        s.post(
            &format!("{V1}/namespaces"),
            &json!({ "namespace": [bad], "properties": {} }),
        )
        .await
        .error(400, "BadRequestException");
        s.create_table_with(&["db"], json!({ "name": bad, "schema": schema() }))
            .await
            .error(400, "BadRequestException");
        s.post(&views_url(&["db"]), &view_body(bad, &["db"], "SELECT 1"))
            .await
            .error(400, "BadRequestException");
        s.post(
            &format!("{V1}/views/rename"),
            &json!({ "source": ident(&["db"], "v"), "destination": ident(&["db"], bad) }),
        )
        .await
        .error(400, "BadRequestException");
        s.post(
            &format!("{}/register", ns_url(&["db"])),
            &json!({ "name": bad, "metadata-location": "file:///nowhere.json" }),
        )
        .await
        .error(400, "BadRequestException");
    }
    // In paths, percent-encoded.
    for raw in ["a%09b", "a%0Ab", "a%00b", "a%7Fb"] {
        s.get(&format!("{V1}/namespaces/{raw}"))
            .await
            .error(400, "BadRequestException");
        s.get(&format!("{V1}/namespaces/db/tables/{raw}"))
            .await
            .error(400, "BadRequestException");
        s.post(
            &format!("{V1}/namespaces/db/tables/{raw}"),
            &json!({ "requirements": [{ "type": "assert-create" }],
                     "updates": [{ "action": "add-schema", "schema": schema() }] }),
        )
        .await
        .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "control characters").await;
}

#[tokio::test]
async fn names_over_255_bytes_are_a_400() {
    let (s, before) = populated().await;
    let long = "x".repeat(256);
    let long_multibyte = "é".repeat(128); // 256 bytes, 128 characters
    for bad in [&long, &long_multibyte] {
        s.post(
            &format!("{V1}/namespaces"),
            &json!({ "namespace": [bad], "properties": {} }),
        )
        .await
        .error(400, "BadRequestException");
        s.post(
            &format!("{V1}/namespaces"),
            &json!({ "namespace": ["db", bad], "properties": {} }),
        )
        .await
        .error(400, "BadRequestException");
        s.create_table_with(&["db"], json!({ "name": bad, "schema": schema() }))
            .await
            .error(400, "BadRequestException");
        s.post(&views_url(&["db"]), &view_body(bad, &["db"], "SELECT 1"))
            .await
            .error(400, "BadRequestException");
        s.post(
            &format!("{V1}/tables/rename"),
            &json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], bad) }),
        )
        .await
        .error(400, "BadRequestException");
        s.get(&table_url(&["db"], bad))
            .await
            .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "long names").await;
}

#[tokio::test]
async fn namespaces_deeper_than_32_levels_are_a_400() {
    let s = Server::start().await;
    let levels: Vec<String> = (0..33).map(|i| format!("l{i}")).collect();
    let refs: Vec<&str> = levels.iter().map(String::as_str).collect();
    // 32 levels are fine.
    for depth in 1..=32 {
        s.create_namespace(&refs[..depth]).await;
    }
    s.create_table(&refs[..32], "deep").await;
    let before = s.state().await;

    s.post(
        &format!("{V1}/namespaces"),
        &json!({ "namespace": refs, "properties": {} }),
    )
    .await
    .error(400, "BadRequestException");
    let too_deep: Vec<&str> = (0..40).map(|_| "x").collect();
    s.post(
        &format!("{V1}/namespaces"),
        &json!({ "namespace": too_deep, "properties": {} }),
    )
    .await
    .error(400, "BadRequestException");
    s.get(&ns_url(&refs))
        .await
        .error(400, "BadRequestException");
    s.create_table_with(&refs, json!({ "name": "x", "schema": schema() }))
        .await
        .error(400, "BadRequestException");
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&refs[..32], "deep"), "destination": ident(&refs, "deep") }),
    )
    .await
    .error(400, "BadRequestException");
    s.get(&format!("{V1}/namespaces?parent={}", ns(&refs)))
        .await
        .error(400, "BadRequestException");
    s.assert_unchanged(&before, "too deep namespaces").await;
}

// ---- limits and query parameters ------------------------------------------------------------

#[tokio::test]
async fn bodies_over_the_limit_are_a_413() {
    let s = Server::start_with(|c| c.max_body_bytes = 4096).await;
    s.create_namespace(&["db"]).await;
    s.create_table(&["db"], "t").await; // well under the limit
    let before = s.state().await;
    let big = "x".repeat(8192);
    let cases = [
        (
            format!("{V1}/namespaces"),
            json!({ "namespace": ["big"], "properties": { "blob": big } }),
        ),
        (
            tables_url(&["db"]),
            json!({ "name": "big", "schema": schema(), "properties": { "blob": big } }),
        ),
        (
            commit_url(),
            json!({ "updates": [{ "action": "set-properties", "updates": { "blob": big } }] }),
        ),
        (
            format!("{}/properties", ns_url(&["db"])),
            json!({ "updates": { "blob": big } }),
        ),
        (
            "/api/management/v1/catalogs".to_string(),
            json!({ "catalog": { "name": "big", "properties": { "blob": big } } }),
        ),
    ];
    for (path, body) in &cases {
        s.post(path, body).await.error_status(413);
    }
    // With an Idempotency-Key the body is read whole before the route (to fingerprint
    // it), by a layer that says the limit.
    let (path, body) = &cases[2];
    let key = [("Idempotency-Key", "0190c3a2-7b5e-7c3d-9f00-000000000413")];
    let message = s
        .call_with(Method::POST, path, Some(body), &key)
        .await
        .error(413, "BadRequestException");
    assert!(message.contains("4096 bytes"), "{message}");
    s.assert_unchanged(&before, "oversized bodies").await;
    // Small requests still work afterwards.
    s.set_table_properties(&["db"], "t", json!({ "small": "1" }))
        .await;
}

#[tokio::test]
async fn bad_page_sizes_and_tokens_are_a_400() {
    let (s, before) = populated().await;
    let lists = [
        format!("{V1}/namespaces"),
        tables_url(&["db"]),
        views_url(&["db"]),
        "/api/catalog/polaris/v1/default/namespaces/db/generic-tables".to_string(),
    ];
    for list in &lists {
        for query in [
            "pageSize=0",
            "pageSize=abc",
            "pageSize=-1",
            "pageSize=1.5",
            "pageToken=zz",
            "pageToken=abc",
            "pageToken=ff",
            "pageToken=not-a-token&pageSize=2",
            // A NUL, which no name holds and PostgreSQL refuses in text (it was a 500 there).
            "pageToken=00",
            "pageToken=640074",
        ] {
            s.get(&format!("{list}?{query}"))
                .await
                .error(400, "BadRequestException");
        }
    }
    s.assert_unchanged(&before, "bad page parameters").await;
}

#[tokio::test]
async fn bad_snapshots_mode_is_a_400() {
    let (s, before) = populated().await;
    for mode in ["bogus", "ALLL", "1"] {
        s.get(&format!("{}?snapshots={mode}", commit_url()))
            .await
            .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "bad snapshots mode").await;
}

#[tokio::test]
async fn bad_purge_flag_is_a_400_and_drops_nothing() {
    let (s, before) = populated().await;
    for flag in ["maybe", "yes", "1"] {
        s.delete(&format!("{}?purgeRequested={flag}", commit_url()))
            .await
            .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "bad purge flag").await;
    s.head(&commit_url()).await.ok(204);
}

#[tokio::test]
async fn property_in_both_removals_and_updates_is_a_422() {
    let (s, before) = populated().await;
    let message = s
        .post(
            &format!("{}/properties", ns_url(&["db"])),
            &json!({ "removals": ["owner", "other"], "updates": { "owner": "bob", "new": "1" } }),
        )
        .await
        .error(422, "UnprocessableEntityException");
    assert!(message.contains("owner"), "{message}");
    s.assert_unchanged(&before, "conflicting property update")
        .await;
    assert_eq!(
        s.namespace_properties(&["db"]).await,
        json!({ "owner": "ann" })
    );
}

// ---- locations -----------------------------------------------------------------------------

#[tokio::test]
async fn locations_outside_the_catalog_are_forbidden() {
    let (s, before) = populated().await;
    let outside = format!("{}/t", s.outside());
    let message = s
        .create_table_with(
            &["db"],
            json!({ "name": "x", "schema": schema(), "location": outside }),
        )
        .await
        .error(403, "ForbiddenException");
    assert!(message.contains(&outside), "{message}");
    s.create_table_with(
        &["db"],
        json!({ "name": "x", "schema": schema(), "location": outside, "stage-create": true }),
    )
    .await
    .error(403, "ForbiddenException");
    // A sibling directory whose name merely starts like the base.
    s.create_table_with(
        &["db"],
        json!({ "name": "x", "schema": schema(), "location": format!("{}-evil/x", s.warehouse()) }),
    )
    .await
    .error(403, "ForbiddenException");
    s.post(
        &views_url(&["db"]),
        &json!({
            "name": "w", "schema": schema(), "location": outside,
            "view-version": view_version(1, &["db"], "SELECT 1"),
        }),
    )
    .await
    .error(403, "ForbiddenException");
    // Moving an existing table or view out.
    s.commit(
        &["db"],
        "t",
        json!({ "updates": [{ "action": "set-location", "location": outside }] }),
    )
    .await
    .error(403, "ForbiddenException");
    s.commit(
        &["db"],
        "t",
        json!({ "updates": [{ "action": "set-properties", "updates": { "write.metadata.path": format!("{outside}/md") } }] }),
    )
    .await
    .error(403, "ForbiddenException");
    s.post(
        &view_url(&["db"], "v"),
        &json!({ "updates": [{ "action": "set-location", "location": outside }] }),
    )
    .await
    .error(403, "ForbiddenException");
    // Creating one through a staged-create commit.
    s.commit(
        &["db"],
        "staged",
        json!({
            "requirements": [{ "type": "assert-create" }],
            "updates": [
                { "action": "add-schema", "schema": schema() },
                { "action": "set-location", "location": outside },
            ],
        }),
    )
    .await
    .error(403, "ForbiddenException");
    s.assert_unchanged(&before, "forbidden locations").await;
    assert!(s.files.list(&s.outside()).await.is_empty());
}

#[tokio::test]
async fn locations_with_dot_segments_are_a_400() {
    let (s, before) = populated().await;
    let base = s.warehouse();
    for location in [
        format!("{base}/../escape"),
        format!("{base}/db/../../escape"),
        format!("{base}/./x"),
        format!("{base}/x/.."),
        "relative/path".to_string(),
        "hdfs://nn/x".to_string(),
    ] {
        s.create_table_with(
            &["db"],
            json!({ "name": "x", "schema": schema(), "location": location }),
        )
        .await
        .error(400, "BadRequestException");
        s.commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "set-location", "location": location }] }),
        )
        .await
        .error(400, "BadRequestException");
    }
    // A well-formed location on another store is outside this FILE catalog: a 403.
    s.create_table_with(
        &["db"],
        json!({ "name": "x", "schema": schema(), "location": "s3://bucket/x" }),
    )
    .await
    .error(403, "ForbiddenException");
    s.assert_unchanged(&before, "dot-dot locations").await;
    let parent = s.warehouse().rsplit_once('/').unwrap().0.to_string();
    assert!(s.files.list(&format!("{parent}/escape")).await.is_empty());
}

/// Schemas Floe refuses to keep ([`floe::catalog::schemas`]), each with what it shows.
fn unkeepable_schemas() -> [(&'static str, Value); 4] {
    let field = |ty: Value, extra: Value| {
        let mut f = json!({ "id": 1, "name": "f", "required": false, "type": ty });
        f.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "type": "struct", "schema-id": 0, "fields": [f] })
    };
    // 40 lists inside one another: past the 32 types a schema may nest.
    let mut deep = json!("int");
    for i in 0..40 {
        deep = json!({ "type": "list", "element-id": 100 + i, "element-required": false, "element": deep });
    }
    [
        ("a deep schema", field(deep, json!({}))),
        (
            "a date default past a calendar",
            field(json!("date"), json!({ "initial-default": 2147483647 })),
        ),
        (
            "a list's default holding a date past a calendar",
            field(
                json!({ "type": "list", "element-id": 2, "element-required": false, "element": "date" }),
                json!({ "initial-default": [1, 2147483647] }),
            ),
        ),
        (
            "a timestamptz default before 1970 with a fraction",
            field(
                json!("timestamptz"),
                json!({ "write-default": "1969-12-31T23:59:59.5+00:00" }),
            ),
        ),
    ]
}

/// Whether `body` is Floe's refusal of a schema it cannot keep.
fn refuses_the_schema(body: &str) -> bool {
    body.contains("Schema is nested too deeply") || body.contains("cannot be kept")
}

/// Inputs that iceberg-rust or the file system cannot take, found in review: each was a
/// 500, a dropped connection, or a table that failed every later commit; each is now a
/// 400 that changes nothing.
#[tokio::test]
async fn inputs_the_libraries_or_the_disk_cannot_take_are_a_400() {
    let (s, before) = populated().await;
    let schemas = unkeepable_schemas();
    for (what, schema) in &schemas {
        let r = s
            .create_table_with(&["db"], json!({ "name": "x", "schema": schema }))
            .await;
        assert!(refuses_the_schema(&r.body), "{what}: {}", r.body);
        r.error(400, "BadRequestException");
        s.commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "add-schema", "schema": schema }] }),
        )
        .await
        .error(400, "BadRequestException");
    }
    // A name longer than a local file system holds, under the catalog's own location
    // (an object store takes keys of 1,024 bytes: the suite's run on S3 skips this).
    if s.warehouse().starts_with("file:") {
        let long = format!("{}/db/{}", s.warehouse(), "n".repeat(300));
        s.create_table_with(
            &["db"],
            json!({ "name": "x", "schema": schema(), "location": long }),
        )
        .await
        .error(400, "BadRequestException");
    }
    // A snapshot that is its own parent: every walk of its history would never end.
    let snapshot = json!({
        "snapshot-id": 7, "parent-snapshot-id": 7, "sequence-number": 1,
        "timestamp-ms": now_ms(), "summary": { "operation": "append" }, "schema-id": 0,
        "manifest-list": format!("{}/db/t/metadata/snap-7.avro", s.warehouse()),
    });
    let r = s
        .commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "add-snapshot", "snapshot": snapshot }] }),
        )
        .await;
    assert!(r.body.contains("its own ancestor"), "{}", r.body);
    r.error(400, "BadRequestException");
    // A snapshot from a clock an hour fast: every later commit would log it ahead of its
    // own time, which Iceberg's readers refuse.
    let mut fast = snapshot.clone();
    fast["parent-snapshot-id"] = Value::Null;
    fast["timestamp-ms"] = json!(now_ms() + 3_600_000);
    let r = s
        .commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "add-snapshot", "snapshot": fast }] }),
        )
        .await;
    assert!(r.body.contains("past this catalog's clock"), "{}", r.body);
    r.error(400, "BadRequestException");
    // Transforms of width 0, which divide by zero when a filter is projected through them.
    for transform in ["bucket[0]", "truncate[0]"] {
        let spec = json!({ "action": "add-spec", "spec": { "fields": [
            { "source-id": 1, "field-id": 1000, "name": "p", "transform": transform }] } });
        let order = json!({ "action": "add-sort-order", "sort-order": { "order-id": 1,
            "fields": [{ "source-id": 1, "transform": transform, "direction": "asc",
            "null-order": "nulls-first" }] } });
        for update in [spec, order] {
            let r = s.commit(&["db"], "t", json!({ "updates": [update] })).await;
            assert!(r.body.contains("at least 1"), "{transform}: {}", r.body);
            r.error(400, "BadRequestException");
        }
        let spec = json!({ "fields": [
            { "source-id": 1, "field-id": 1000, "name": "p", "transform": transform }] });
        s.create_table_with(
            &["db"],
            json!({ "name": "x", "schema": schema(), "partition-spec": spec }),
        )
        .await
        .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "inputs the libraries cannot take")
        .await;
}

/// Metadata iceberg-rust would keep but Iceberg's readers (Java's) refuse to load: each is
/// a 400 that changes nothing, so a table never becomes one its engines cannot read.
#[tokio::test]
async fn metadata_iceberg_readers_refuse_is_a_400() {
    let (s, before) = populated().await;
    let add_field = |field: Value| {
        let mut fields = schema()["fields"].clone();
        fields.as_array_mut().unwrap().push(field);
        json!({ "action": "add-schema", "schema": { "type": "struct", "fields": fields } })
    };
    let column = |ty: &str| json!({ "id": 50, "name": "c", "required": false, "type": ty });
    let mut with_default = column("int");
    with_default["initial-default"] = json!(5);
    let snapshot = |id: i64| {
        json!({ "action": "add-snapshot", "snapshot": {
            "snapshot-id": id, "sequence-number": 1, "timestamp-ms": now_ms(),
            "summary": { "operation": "append" }, "schema-id": 0,
            "manifest-list": format!("{}/db/t/metadata/snap-{id}.avro", s.warehouse()) } })
    };
    let branch = |name: &str, extra: Value| {
        let mut update = json!({ "action": "set-snapshot-ref", "ref-name": name,
            "type": "branch", "snapshot-id": 9 });
        update
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        update
    };
    let cases = [
        (vec![add_field(column("decimal(39,2)"))], "from 1 to 38"),
        (
            vec![add_field(column("fixed[99999999999]"))],
            "fixed length",
        ),
        (
            vec![add_field(column("timestamp_ns"))],
            "not supported until v3",
        ),
        (
            vec![add_field(with_default.clone())],
            "not supported until v3",
        ),
        (
            vec![
                snapshot(9),
                branch("b", json!({ "min-snapshots-to-keep": 0 })),
            ],
            "must be greater than 0",
        ),
        (
            vec![snapshot(9), branch("b", json!({ "max-ref-age-ms": -1 }))],
            "must be greater than 0",
        ),
        (
            vec![snapshot(9), branch("", json!({}))],
            "ref-name is empty",
        ),
    ];
    for (updates, wanted) in cases {
        let r = s.commit(&["db"], "t", json!({ "updates": updates })).await;
        assert!(r.body.contains(wanted), "{updates:?}: {}", r.body);
        r.error(400, "BadRequestException");
    }
    // A new v2 table with a nanosecond column is refused as well.
    let mut ns_schema = schema();
    let nanos = json!({ "id": 60, "name": "n", "required": false, "type": "timestamptz_ns" });
    ns_schema["fields"].as_array_mut().unwrap().push(nanos);
    let r = s
        .create_table_with(&["db"], json!({ "name": "x", "schema": ns_schema }))
        .await;
    assert!(r.body.contains("not supported until v3"), "{}", r.body);
    r.error(400, "BadRequestException");
    s.assert_unchanged(&before, "metadata Iceberg's readers refuse")
        .await;

    // In a v3 table all of it is fine, and row ids must stay within a long.
    s.create_table_with(
        &["db"],
        json!({ "name": "v3", "schema": ns_schema, "properties": { "format-version": "3" } }),
    )
    .await
    .ok(200);
    s.commit(
        &["db"],
        "v3",
        json!({ "updates": [add_field(with_default)] }),
    )
    .await
    .ok(200);
    let rows = |first: u64, added: u64| {
        let mut update = snapshot(9);
        update["snapshot"]["manifest-list"] = json!(format!("{}/db/v3/snap-9.avro", s.warehouse()));
        update["snapshot"]["first-row-id"] = json!(first);
        update["snapshot"]["added-rows"] = json!(added);
        json!({ "updates": [update] })
    };
    let before = s.state().await;
    let r = s.commit(&["db"], "v3", rows(0, 1 << 63)).await;
    assert!(r.body.contains("within a long"), "{}", r.body);
    r.error(400, "BadRequestException");
    s.assert_unchanged(&before, "row ids past a long").await;
    s.commit(&["db"], "v3", rows(0, 10)).await.ok(200);
}

/// A default that is not a value of its field's type (`"abc"` for an int) is a 400 on
/// every way in: iceberg-rust's parser drops such a default without an error, and the
/// table would have been kept without it.
#[tokio::test]
async fn a_default_that_is_not_of_its_type_is_a_400() {
    let (s, before) = populated().await;
    let field = |default: Value| json!({ "id": 50, "name": "c", "required": false, "type": "int", "write-default": default });
    let with = |default: Value| {
        let mut fields = schema()["fields"].clone();
        fields.as_array_mut().unwrap().push(field(default));
        json!({ "type": "struct", "fields": fields })
    };
    let r = s
        .commit(
            &["db"],
            "t",
            json!({ "updates": [{ "action": "add-schema", "schema": with(json!("abc")) }] }),
        )
        .await;
    assert!(
        r.body
            .contains("Invalid write-default for field c: \\\"abc\\\" is not a value of type int"),
        "{}",
        r.body
    );
    r.error(400, "BadRequestException");
    let r = s
        .create_table_with(&["db"], json!({ "name": "x", "schema": with(json!(1.5)) }))
        .await;
    assert!(
        r.body.contains("Invalid write-default for field c"),
        "{}",
        r.body
    );
    r.error(400, "BadRequestException");
    let mut view = view_body("v2", &["db"], "SELECT 1");
    view["schema"] = with(json!("abc"));
    let r = s.post(&views_url(&["db"]), &view).await;
    assert!(
        r.body.contains("Invalid write-default for field c"),
        "{}",
        r.body
    );
    r.error(400, "BadRequestException");
    // Values iceberg-rust would turn into others (NaN, a rounded or infinite number) or
    // cannot read at all (a nanosecond instant) are refused too.
    for (ty, default, message) in [
        (
            "decimal(9,2)",
            json!("NaN"),
            "is not a value of type decimal(9, 2)",
        ),
        (
            "decimal(9,2)",
            json!("1.5"),
            "is not a value of type decimal(9, 2)",
        ),
        ("float", json!(1e39), "is not a value of type float"),
        (
            "timestamp_ns",
            json!("2024-01-01T00:00:00.000000001"),
            "not supported yet",
        ),
    ] {
        let mut fields = schema()["fields"].clone();
        let mut field = field(default);
        field["type"] = json!(ty);
        fields.as_array_mut().unwrap().push(field);
        let schema = json!({ "type": "struct", "fields": fields });
        let r = s
            .commit(
                &["db"],
                "t",
                json!({ "updates": [{ "action": "add-schema", "schema": schema }] }),
            )
            .await;
        assert!(r.body.contains(message), "{ty}: {}", r.body);
        r.error(400, "BadRequestException");
    }
    // A body nested past what the default check can read is refused, not let through
    // with its defaults unchecked.
    let mut body = json!({ "name": "x", "schema": with(json!(7)) });
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    body["unknown"] = deep;
    let r = s.create_table_with(&["db"], body).await;
    assert!(
        r.body.contains("cannot be read as plain JSON"),
        "{}",
        r.body
    );
    r.error(400, "BadRequestException");
    // The same default under a key spelled with a JSON escape, which names it all the same.
    let body = json!({ "name": "x", "schema": with(json!("abc")) })
        .to_string()
        .replace("write-default", "write\\u002ddefault");
    let r = s.post_raw(&tables_url(&["db"]), body).await;
    assert!(
        r.body.contains("Invalid write-default for field c"),
        "{}",
        r.body
    );
    r.error(400, "BadRequestException");
    s.assert_unchanged(&before, "a default not of its type")
        .await;

    // A default of the field's type is kept, and read back.
    s.commit(
        &["db"],
        "t",
        json!({ "updates": [{ "action": "add-schema", "schema": with(json!(7)) }] }),
    )
    .await
    .ok(200);
    let loaded = s.load_table(&["db"], "t").await;
    let kept = loaded["metadata"]["schemas"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "c")
        .unwrap()["write-default"]
        .clone();
    assert_eq!(kept, json!(7));
}

/// A namespace's `location` places the tables created in it: it is checked when it is
/// set, as a table's location is (it used to be kept, and every later create there failed).
#[tokio::test]
async fn a_namespace_location_outside_the_catalog_is_refused() {
    let (s, before) = populated().await;
    let inside = format!("{}/elsewhere/db2", s.warehouse());
    // Outside the catalog's locations, and on another kind of storage (the suite also
    // runs on S3).
    let (outside, other) = if s.warehouse().starts_with("file:") {
        ("file:///tmp/outside-the-warehouse", "s3://bucket/x")
    } else {
        ("s3://floe-no-such-bucket/x", "file:///tmp/x")
    };
    for (location, status, kind) in [
        ("relative", 400, "BadRequestException"),
        (outside, 403, "ForbiddenException"),
        (other, 403, "ForbiddenException"),
    ] {
        s.post(
            &format!("{V1}/namespaces"),
            &json!({ "namespace": ["db2"], "properties": { "location": location } }),
        )
        .await
        .error(status, kind);
        s.post(
            &format!("{}/properties", ns_url(&["db"])),
            &json!({ "updates": { "location": location } }),
        )
        .await
        .error(status, kind);
    }
    s.assert_unchanged(&before, "namespace locations outside the catalog")
        .await;
    // Inside the catalog's locations: kept, and a new table goes under it.
    s.post(
        &format!("{}/properties", ns_url(&["db"])),
        &json!({ "updates": { "location": inside } }),
    )
    .await
    .ok(200);
    let created = s.create_table(&["db"], "placed").await;
    let location = created["metadata"]["location"].as_str().unwrap();
    assert!(
        location.starts_with(&format!("{inside}/placed-")),
        "{location}"
    );
}

/// A registered metadata file is kept as Floe writes it, so its schemas are checked as a
/// request's are: a file holding one Floe cannot keep is a 400 (it was a 500, the panic
/// of iceberg-rust's writing a default back, or a table that failed its later reads).
#[tokio::test]
async fn registering_a_file_with_a_schema_floe_cannot_keep_is_a_400() {
    let (s, _) = populated().await;
    let file_of = |loaded: Value| loaded["metadata-location"].as_str().unwrap().to_string();
    let table_file = file_of(s.load_table(&["db"], "t").await);
    let view_file = file_of(s.load_view(&["db"], "v").await);
    let read = |doc: Vec<u8>| serde_json::from_slice::<Value>(&doc).unwrap();
    let table_doc = read(s.files.read(&table_file).await);
    let view_doc = read(s.files.read(&view_file).await);
    let mut files = Vec::new();
    for (n, (what, schema)) in unkeepable_schemas().into_iter().enumerate() {
        let mut table = table_doc.clone();
        table["schemas"] = json!([schema]);
        table["current-schema-id"] = json!(0);
        table["last-column-id"] = json!(200);
        let mut view = view_doc.clone();
        view["schemas"] = json!([schema]);
        for (kind, doc) in [("register", table), ("register-view", view)] {
            let file = format!("{}/db/{kind}-{n}.metadata.json", s.warehouse());
            s.files
                .write(&file, serde_json::to_vec(&doc).unwrap())
                .await;
            files.push((what, kind, file));
        }
    }
    let before = s.state().await;
    for (what, kind, file) in files {
        let r = s
            .post(
                &format!("{}/{kind}", ns_url(&["db"])),
                &json!({ "name": "r", "metadata-location": file }),
            )
            .await;
        assert!(refuses_the_schema(&r.body), "{kind} {what}: {}", r.body);
        r.error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "registering unkeepable schemas")
        .await;
}

#[tokio::test]
async fn a_table_location_inside_another_tables_is_a_400() {
    let (s, _) = populated().await;
    let base = s.warehouse();
    s.create_table_with(
        &["db"],
        json!({ "name": "outer", "schema": schema(), "location": format!("{base}/shared/outer") }),
    )
    .await
    .ok(200);
    let before = s.state().await;
    // Inside outer.
    s.create_table_with(
        &["db"],
        json!({ "name": "nested", "schema": schema(), "location": format!("{base}/shared/outer/nested") }),
    )
    .await
    .error(400, "BadRequestException");
    // Exactly outer's location.
    s.create_table_with(
        &["db"],
        json!({ "name": "same", "schema": schema(), "location": format!("{base}/shared/outer/") }),
    )
    .await
    .error(400, "BadRequestException");
    // Containing outer.
    s.create_table_with(
        &["db"],
        json!({ "name": "around", "schema": schema(), "location": format!("{base}/shared") }),
    )
    .await
    .error(400, "BadRequestException");
    // A staged create writes nothing, but is checked as well: it would be vended
    // credentials for outer's files.
    for location in [
        format!("{base}/shared/outer/staged"),
        format!("{base}/shared"),
    ] {
        let r = s
            .create_table_with(
                &["db"],
                json!({ "name": "staged", "schema": schema(), "location": location, "stage-create": true }),
            )
            .await;
        assert!(
            r.body.contains("overlaps the location of db.outer"),
            "{}",
            r.body
        );
        r.error(400, "BadRequestException");
    }
    // An existing table moved inside outer.
    s.commit(
        &["db"],
        "t",
        json!({ "updates": [{ "action": "set-location", "location": format!("{base}/shared/outer/t") }] }),
    )
    .await
    .error(400, "BadRequestException");
    s.assert_unchanged(&before, "overlapping locations").await;
    // A sibling is fine.
    s.create_table_with(
        &["db"],
        json!({ "name": "sibling", "schema": schema(), "location": format!("{base}/shared/outer2") }),
    )
    .await
    .ok(200);
}

// ---- commits -------------------------------------------------------------------------------

#[tokio::test]
async fn failing_requirements_are_a_409_commit_failed() {
    let (s, before) = populated().await;
    let update = json!([{ "action": "set-properties", "updates": { "a": "b" } }]);
    for requirement in [
        json!({ "type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000" }),
        json!({ "type": "assert-current-schema-id", "current-schema-id": 5 }),
        json!({ "type": "assert-last-assigned-field-id", "last-assigned-field-id": 1 }),
        json!({ "type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 2000 }),
        json!({ "type": "assert-default-spec-id", "default-spec-id": 3 }),
        json!({ "type": "assert-default-sort-order-id", "default-sort-order-id": 3 }),
        json!({ "type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 42 }),
        json!({ "type": "assert-create" }),
    ] {
        let message = s
            .commit(
                &["db"],
                "t",
                json!({ "requirements": [requirement], "updates": update }),
            )
            .await
            .error(409, "CommitFailedException");
        assert!(
            message.starts_with("Requirement failed:"),
            "{requirement}: {message}"
        );
    }
    let view_uuid = s.load_view(&["db"], "v").await["metadata"]["view-uuid"].clone();
    assert!(view_uuid.is_string());
    let message = s
        .post(
            &view_url(&["db"], "v"),
            &json!({
                "requirements": [{ "type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000000" }],
                "updates": update,
            }),
        )
        .await
        .error(409, "CommitFailedException");
    assert!(message.starts_with("Requirement failed:"), "{message}");
    s.assert_unchanged(&before, "failed requirements").await;
}

#[tokio::test]
async fn commits_to_missing_tables_are_a_404() {
    let (s, before) = populated().await;
    let set = json!({ "updates": [{ "action": "set-properties", "updates": { "a": "b" } }] });
    s.commit(&["db"], "missing", set.clone())
        .await
        .error(404, "NoSuchTableException");
    s.commit(&["nowhere"], "t", set.clone())
        .await
        .error(404, "NoSuchTableException");
    // A view is not a table.
    s.commit(&["db"], "v", set.clone())
        .await
        .error(404, "NoSuchTableException");
    s.post(&view_url(&["db"], "missing"), &set)
        .await
        .error(404, "NoSuchViewException");
    s.post(&view_url(&["db"], "t"), &set)
        .await
        .error(404, "NoSuchViewException");
    s.post(
        &format!("{V1}/transactions/commit"),
        &json!({ "table-changes": [
            { "identifier": ident(&["db"], "t"), "updates": set["updates"] },
            { "identifier": ident(&["db"], "missing"), "updates": set["updates"] },
        ] }),
    )
    .await
    .error(404, "NoSuchTableException");
    s.assert_unchanged(&before, "commits to missing tables")
        .await;
}

#[tokio::test]
async fn bad_commit_and_transaction_requests_are_a_400() {
    let (s, before) = populated().await;
    let updates = json!([{ "action": "set-properties", "updates": { "a": "b" } }]);
    // The identifier in the body must match the path.
    s.commit(
        &["db"],
        "t",
        json!({ "identifier": ident(&["db"], "other"), "updates": updates }),
    )
    .await
    .error(400, "BadRequestException");
    s.post(
        &view_url(&["db"], "v"),
        &json!({ "identifier": ident(&["db"], "other"), "updates": updates }),
    )
    .await
    .error(400, "BadRequestException");
    let tx = format!("{V1}/transactions/commit");
    for body in [
        json!({ "table-changes": [] }),
        json!({ "table-changes": [{ "updates": updates }] }),
        json!({ "table-changes": [
            { "identifier": ident(&["db"], "t"), "updates": updates },
            { "identifier": ident(&["db"], "t"), "updates": updates },
        ] }),
    ] {
        s.post(&tx, &body).await.error(400, "BadRequestException");
    }
    // Updates iceberg refuses to apply.
    for update in [
        json!({ "action": "set-current-schema", "schema-id": 99 }),
        json!({ "action": "set-default-spec", "spec-id": 42 }),
        json!({ "action": "upgrade-format-version", "format-version": 1 }),
        json!({ "action": "add-schema", "schema": { "type": "struct", "schema-id": 1, "fields": [
            { "id": 1, "name": "id", "required": true, "type": "long" },
            { "id": 1, "name": "dup", "required": true, "type": "long" },
        ] } }),
    ] {
        s.commit(&["db"], "t", json!({ "updates": [update] }))
            .await
            .error_status(400);
    }
    let created_without_schema = s
        .commit(
            &["db"],
            "new",
            json!({ "requirements": [{ "type": "assert-create" }], "updates": [] }),
        )
        .await;
    created_without_schema.error(400, "BadRequestException");
    s.assert_unchanged(&before, "bad commits").await;
}

// ---- not found and conflicts ---------------------------------------------------------------

#[tokio::test]
async fn loading_a_table_in_a_missing_namespace_is_no_such_table() {
    let (s, before) = populated().await;
    // Spark relies on NoSuchTableException here, not NoSuchNamespaceException.
    s.get(&table_url(&["nowhere"], "t"))
        .await
        .error(404, "NoSuchTableException");
    s.get(&table_url(&["db", "nowhere"], "t"))
        .await
        .error(404, "NoSuchTableException");
    s.get(&format!("{}/credentials", table_url(&["nowhere"], "t")))
        .await
        .error(404, "NoSuchTableException");
    assert_eq!(s.head(&table_url(&["nowhere"], "t")).await.status, 404);
    s.get(&view_url(&["nowhere"], "v"))
        .await
        .error(404, "NoSuchViewException");
    s.assert_unchanged(&before, "loads in missing namespaces")
        .await;
}

#[tokio::test]
async fn creating_in_a_missing_namespace_is_no_such_namespace() {
    let (s, before) = populated().await;
    s.create_table_with(&["nowhere"], json!({ "name": "t", "schema": schema() }))
        .await
        .error(404, "NoSuchNamespaceException");
    s.create_table_with(
        &["nowhere"],
        json!({ "name": "t", "schema": schema(), "stage-create": true }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.post(
        &views_url(&["nowhere"]),
        &view_body("v", &["nowhere"], "SELECT 1"),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.post(
        &format!("{V1}/namespaces"),
        &json!({ "namespace": ["nowhere", "child"], "properties": {} }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.commit(
        &["nowhere"],
        "t",
        json!({
            "requirements": [{ "type": "assert-create" }],
            "updates": [{ "action": "add-schema", "schema": schema() }],
        }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    for list in [tables_url(&["nowhere"]), views_url(&["nowhere"])] {
        s.get(&list).await.error(404, "NoSuchNamespaceException");
    }
    s.get(&format!("{V1}/namespaces?parent=nowhere"))
        .await
        .error(404, "NoSuchNamespaceException");
    s.get(&ns_url(&["nowhere"]))
        .await
        .error(404, "NoSuchNamespaceException");
    s.delete(&ns_url(&["nowhere"]))
        .await
        .error(404, "NoSuchNamespaceException");
    s.post(
        &format!("{}/properties", ns_url(&["nowhere"])),
        &json!({ "updates": { "a": "b" } }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&["db"], "t"), "destination": ident(&["nowhere"], "t") }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.post(
        &format!("{V1}/views/rename"),
        &json!({ "source": ident(&["db"], "v"), "destination": ident(&["nowhere"], "v") }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.assert_unchanged(&before, "creates in missing namespaces")
        .await;
}

#[tokio::test]
async fn missing_objects_and_duplicates() {
    let (s, before) = populated().await;
    s.delete(&table_url(&["db"], "missing"))
        .await
        .error(404, "NoSuchTableException");
    s.delete(&view_url(&["db"], "missing"))
        .await
        .error(404, "NoSuchViewException");
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&["db"], "missing"), "destination": ident(&["db"], "x") }),
    )
    .await
    .error(404, "NoSuchTableException");
    s.post(
        &format!("{V1}/views/rename"),
        &json!({ "source": ident(&["db"], "missing"), "destination": ident(&["db"], "x") }),
    )
    .await
    .error(404, "NoSuchViewException");
    s.post(
        &format!("{V1}/namespaces"),
        &json!({ "namespace": ["db"], "properties": {} }),
    )
    .await
    .error(409, "AlreadyExistsException");
    s.assert_unchanged(&before, "missing objects and a duplicate namespace")
        .await;
    s.create_table_with(&["db"], json!({ "name": "t2", "schema": schema() }))
        .await
        .ok(200);
    let after_t2 = s.state().await;
    s.post(
        &format!("{V1}/tables/rename"),
        &json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], "t2") }),
    )
    .await
    .error(409, "AlreadyExistsException");
    s.assert_unchanged(&after_t2, "rename onto an existing table")
        .await;
    s.delete(&table_url(&["db"], "t2")).await.ok(204);
}

#[tokio::test]
async fn registering_a_bad_metadata_file_is_rejected() {
    let (s, _) = populated().await;
    let junk = format!("{}/junk.json", s.warehouse());
    s.files.write(&junk, "{\"not\": \"metadata\"}").await;
    let before = s.state().await;
    for (path, location) in [
        (format!("{}/register", ns_url(&["db"])), junk.clone()),
        (format!("{}/register-view", ns_url(&["db"])), junk.clone()),
    ] {
        s.post(
            &path,
            &json!({ "name": "r", "metadata-location": location }),
        )
        .await
        .error(400, "BadRequestException");
    }
    for path in [
        format!("{}/register", ns_url(&["db"])),
        format!("{}/register-view", ns_url(&["db"])),
    ] {
        let r = s
            .post(
                &path,
                &json!({ "name": "r", "metadata-location": format!("{}/gone.json", s.warehouse()) }),
            )
            .await;
        assert!(matches!(r.status, 400 | 404), "{}: {}", r.what, r.body);
        r.error_status(r.status);
    }
    // A table's metadata cannot be registered as a view, nor the other way round.
    let table_file = s.load_table(&["db"], "t").await["metadata-location"]
        .as_str()
        .unwrap()
        .to_string();
    let view_file = s.load_view(&["db"], "v").await["metadata-location"]
        .as_str()
        .unwrap()
        .to_string();
    s.post(
        &format!("{}/register-view", ns_url(&["db"])),
        &json!({ "name": "r", "metadata-location": table_file }),
    )
    .await
    .error(400, "BadRequestException");
    s.post(
        &format!("{}/register", ns_url(&["db"])),
        &json!({ "name": "r", "metadata-location": view_file }),
    )
    .await
    .error(400, "BadRequestException");
    // Registering into a missing namespace.
    s.post(
        &format!("{}/register", ns_url(&["nowhere"])),
        &json!({ "name": "r", "metadata-location": table_file }),
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.assert_unchanged(&before, "bad registrations").await;
}

// ---- routing -------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_catalog_prefixes_are_a_404() {
    let (s, before) = populated().await;
    let p = "/v1/no-such-catalog";
    for r in [
        s.get(&format!("{p}/namespaces")).await,
        s.post(
            &format!("{p}/namespaces"),
            &json!({ "namespace": ["x"], "properties": {} }),
        )
        .await,
        s.get(&format!("{p}/namespaces/db")).await,
        s.get(&format!("{p}/namespaces/db/tables")).await,
        s.get(&format!("{p}/namespaces/db/tables/t")).await,
        s.post(
            &format!("{p}/namespaces/db/tables"),
            &json!({ "name": "t", "schema": schema() }),
        )
        .await,
        s.delete(&format!("{p}/namespaces/db/tables/t")).await,
        s.get(&format!("{p}/namespaces/db/views/v")).await,
        s.post(
            &format!("{p}/tables/rename"),
            &json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], "u") }),
        )
        .await,
        s.post(
            &format!("{p}/transactions/commit"),
            &json!({ "table-changes": [{ "identifier": ident(&["db"], "t"), "updates": [] }] }),
        )
        .await,
        s.get("/api/catalog/v1/no-such-catalog/namespaces").await,
    ] {
        r.error_status(404);
    }
    // A NUL in a path, which PostgreSQL refuses in text (a prefix's was a 500 there).
    for path in [
        "/v1/%00/namespaces",
        "/v1/a%00/namespaces/db/tables/t",
        "/v1/default/namespaces/db%00/tables",
        "/api/management/v1/catalogs/%00",
        "/api/management/v1/catalogs/%00/catalog-roles",
        "/api/management/v1/principals/%00",
    ] {
        let r = s.get(path).await;
        assert!(r.body.contains("NUL"), "{path}: {}", r.body);
        r.error(400, "BadRequestException");
    }
    // And a warehouse named with one.
    s.get("/v1/config?warehouse=%00").await.error_status(404);
    s.get(&format!("{p}/namespaces"))
        .await
        .error(404, "NotFoundException");
    s.assert_unchanged(&before, "unknown prefixes").await;
}

#[tokio::test]
async fn unknown_routes_are_a_404_with_an_error_body() {
    let (s, before) = populated().await;
    for path in [
        "/",
        "/nope",
        "/v2/config",
        "/v1/default/nope",
        "/v1/default/namespaces/db/tables/t/nope",
        "/v1/default/namespaces/db/frobs",
        "/api/management/v1/nope",
        "/api/management/v2/catalogs",
    ] {
        s.get(path).await.error(404, "NotFoundException");
        s.post(path, &json!({}))
            .await
            .error(404, "NotFoundException");
    }
    // Known routes with the wrong method.
    let r = s
        .call(reqwest::Method::PUT, &format!("{V1}/namespaces"), None)
        .await;
    r.error_status(405);
    let r = s.delete("/v1/config").await;
    r.error_status(405);
    s.assert_unchanged(&before, "unknown routes").await;
}

#[tokio::test]
async fn registering_a_metadata_file_outside_the_catalog_is_forbidden() {
    let (s, _) = populated().await;
    let table = s.load_table(&["db"], "t").await;
    let inside = table["metadata-location"].as_str().unwrap().to_string();
    s.delete(&table_url(&["db"], "t")).await.ok(204);
    // A copy of a valid metadata file (whose table location is inside the catalog) placed
    // outside the catalog's allowed locations.
    let outside = format!("{}/copy.metadata.json", s.outside());
    s.files.copy(&inside, &outside).await;
    let before = s.state().await;
    s.post(
        &format!("{}/register", ns_url(&["db"])),
        &json!({ "name": "t", "metadata-location": outside }),
    )
    .await
    .error(403, "ForbiddenException");
    s.assert_unchanged(&before, "registering a file outside the catalog")
        .await;
    // The file inside the catalog registers fine.
    s.post(
        &format!("{}/register", ns_url(&["db"])),
        &json!({ "name": "t", "metadata-location": inside }),
    )
    .await
    .ok(200);
}

#[tokio::test]
async fn bad_catalog_definitions_are_a_400() {
    let (s, before) = populated().await;
    let catalogs = "/api/management/v1/catalogs";
    let base = format!("{}/c", s.root());
    // A location on another kind of storage than the catalogs' (FILE or S3).
    let foreign = if s.on_s3() {
        "file:///x"
    } else {
        "s3://bucket/x"
    };
    for catalog in [
        json!({ "name": "a/b", "properties": { "default-base-location": base } }),
        json!({ "name": "", "properties": { "default-base-location": base } }),
        json!({ "name": "system$", "properties": { "default-base-location": base } }),
        json!({ "name": "tab\there", "properties": { "default-base-location": base } }),
        json!({ "name": "ext", "type": "EXTERNAL", "properties": { "default-base-location": base },
                "connectionConfigInfo": { "connectionType": "ICEBERG_REST", "uri": "http://127.0.0.1:1" } }),
        json!({ "name": "odd", "type": "internal", "properties": { "default-base-location": base } }),
        json!({ "name": "dots", "properties": { "default-base-location": format!("{base}/../up") } }),
        json!({ "name": "foreign", "properties": { "default-base-location": foreign } }),
        json!({ "name": "allowed", "properties": { "default-base-location": base },
                "storageConfigInfo": { "storageType": "FILE", "allowedLocations": "file:///x" } }),
        json!({ "name": "allowed2", "properties": { "default-base-location": base },
                "storageConfigInfo": { "storageType": "FILE", "allowedLocations": [5] } }),
        json!({ "name": "allowed3", "properties": { "default-base-location": base },
                "storageConfigInfo": { "storageType": "FILE", "allowedLocations": ["file:///x/../y"] } }),
    ] {
        s.post(catalogs, &json!({ "catalog": catalog }))
            .await
            .error(400, "BadRequestException");
    }
    let listed = s.get(catalogs).await.ok(200).json();
    assert_eq!(listed["catalogs"].as_array().unwrap().len(), 1, "{listed}");
    // Bad updates change nothing either.
    let current = s.get(&format!("{catalogs}/default")).await.ok(200).json();
    for update in [
        json!({ "properties": { "default-base-location": "relative" } }),
        json!({ "storageConfigInfo": { "storageType": "FILE", "allowedLocations": [1] } }),
        json!({ "currentEntityVersion": "one" }),
    ] {
        s.put(&format!("{catalogs}/default"), &update)
            .await
            .error(400, "BadRequestException");
    }
    assert_eq!(
        s.get(&format!("{catalogs}/default")).await.ok(200).json(),
        current
    );
    s.assert_unchanged(&before, "bad catalog definitions").await;
}

#[tokio::test]
async fn registering_a_view_file_outside_the_catalog_is_forbidden() {
    let (s, _) = populated().await;
    let view = s.load_view(&["db"], "v").await;
    let inside = view["metadata-location"].as_str().unwrap().to_string();
    s.delete(&view_url(&["db"], "v")).await.ok(204);
    let outside = format!("{}/copy.metadata.json", s.outside());
    s.files.copy(&inside, &outside).await;
    let before = s.state().await;
    s.post(
        &format!("{}/register-view", ns_url(&["db"])),
        &json!({ "name": "v", "metadata-location": outside }),
    )
    .await
    .error(403, "ForbiddenException");
    s.assert_unchanged(&before, "registering a view file outside the catalog")
        .await;
    s.post(
        &format!("{}/register-view", ns_url(&["db"])),
        &json!({ "name": "v", "metadata-location": inside }),
    )
    .await
    .ok(200);
}
