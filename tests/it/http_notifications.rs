//! EXTERNAL catalogs and Polaris's notifications over HTTP: a source catalog's table
//! changes (CREATE, UPDATE, DROP) mirrored in order, REST writes refused, and every bad
//! notification refused without a change. Runs on every store like the other HTTP suites.

use crate::common::*;
use serde_json::{json, Value};

const CATALOGS: &str = "/api/management/v1/catalogs";
const MIRROR: &str = "/v1/mirror";

/// Creates the EXTERNAL catalog `mirror` (its base under the server's root); returns the
/// base location.
async fn mirror(s: &Server) -> String {
    let created = s
        .post(
            CATALOGS,
            &json!({ "catalog": { "type": "EXTERNAL", "name": "mirror", "properties": {} } }),
        )
        .await
        .ok(201)
        .json();
    assert_eq!(created["type"], "EXTERNAL");
    let base = created["properties"]["default-base-location"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(base, format!("{}/mirror", s.root()));
    base
}

/// Writes a metadata file as a source catalog would: a table of the default catalog's,
/// moved to `location`, with `properties` set. Returns the file's location.
async fn source_file(s: &Server, location: &str, version: u32, properties: Value) -> String {
    let name = format!("t{version}");
    if s.get(&ns_url(&["src"])).await.status == 404 {
        s.create_namespace(&["src"]).await;
    }
    s.create_table(&["src"], &name).await;
    let loaded = s.set_table_properties(&["src"], &name, properties).await;
    let mut metadata = loaded["metadata"].clone();
    metadata["location"] = json!(location);
    // One table across versions, as a source's would be.
    metadata["table-uuid"] = json!("0195f0a3-7c44-7a1b-9bd4-3f0a3d1e2c10");
    let file = format!("{location}/metadata/{version:05}-source.metadata.json");
    s.files.write(&file, metadata.to_string()).await;
    file
}

fn notification(kind: &str, timestamp: i64, metadata_location: &str) -> Value {
    json!({ "notification-type": kind, "payload": {
        "table-name": "t", "timestamp": timestamp,
        "table-uuid": "0195f0a3-7c44-7a1b-9bd4-3f0a3d1e2c10",
        "metadata-location": metadata_location,
    } })
}

fn notifications_url(catalog: &str, namespace: &[&str], table: &str) -> String {
    format!(
        "/v1/{catalog}/namespaces/{}/tables/{table}/notifications",
        ns(namespace)
    )
}

async fn pointer(s: &Server, namespace: &[&str], table: &str) -> Option<String> {
    let path = format!("{MIRROR}/namespaces/{}/tables/{table}", ns(namespace));
    let loaded = s.get(&path).await;
    match loaded.status {
        404 => None,
        _ => Some(
            loaded.ok(200).json()["metadata-location"]
                .as_str()
                .unwrap()
                .to_string(),
        ),
    }
}

/// A notification refused as out of order changes nothing: not even the namespaces it
/// would have made for its table.
#[tokio::test]
async fn an_out_of_order_create_makes_no_namespaces() {
    let s = Server::start().await;
    let base = mirror(&s).await;
    let v1 = source_file(&s, &format!("{base}/late/t"), 1, json!({})).await;
    let url = notifications_url("mirror", &["late"], "t");
    // The DROP of a table never seen goes through, and orders what follows.
    s.post(&url, &notification("DROP", 2_000, &v1))
        .await
        .ok(204);
    s.get(&format!("{MIRROR}/namespaces/late"))
        .await
        .error(404, "NoSuchNamespaceException");
    s.post(&url, &notification("CREATE", 1_000, &v1))
        .await
        .error(409, "AlreadyExistsException");
    s.get(&format!("{MIRROR}/namespaces/late"))
        .await
        .error(404, "NoSuchNamespaceException");
    assert_eq!(pointer(&s, &["late"], "t").await, None);
}

#[tokio::test]
async fn notifications_mirror_a_tables_changes_in_order() {
    let s = Server::start().await;
    let base = mirror(&s).await;
    let table = format!("{base}/db/sales/t");
    let v1 = source_file(&s, &table, 1, json!({ "v": "1" })).await;
    let v2 = source_file(&s, &table, 2, json!({ "v": "2" })).await;
    let url = notifications_url("mirror", &["db", "sales"], "t");

    // CREATE makes the table and the namespaces above it.
    s.post(&url, &notification("CREATE", 1_000, &v1))
        .await
        .ok(204);
    let listed = s
        .get(&format!("{MIRROR}/namespaces?parent=db"))
        .await
        .ok(200)
        .json();
    assert_eq!(listed["namespaces"], json!([["db", "sales"]]));
    let loaded = s
        .get(&format!("{MIRROR}/namespaces/db%1Fsales/tables/t"))
        .await
        .ok(200)
        .json();
    assert_eq!(loaded["metadata-location"], v1.as_str());
    assert_eq!(loaded["metadata"]["properties"]["v"], "1");

    // UPDATE moves it on; one not newer than the last admitted is refused.
    s.post(&url, &notification("UPDATE", 2_000, &v2))
        .await
        .ok(204);
    assert_eq!(
        pointer(&s, &["db", "sales"], "t").await.as_deref(),
        Some(v2.as_str())
    );
    for stale in [2_000, 1_500] {
        let message = s
            .post(&url, &notification("UPDATE", stale, &v1))
            .await
            .error(409, "AlreadyExistsException");
        assert!(message.contains("newer timestamp"), "{message}");
    }
    assert_eq!(
        pointer(&s, &["db", "sales"], "t").await.as_deref(),
        Some(v2.as_str())
    );

    // DROP forgets the table, never its files; a late UPDATE cannot bring it back. A DROP
    // older than the last admitted is refused, one as new goes through (as in Polaris).
    s.post(&url, &notification("DROP", 1_999, &v2))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(
        pointer(&s, &["db", "sales"], "t").await.as_deref(),
        Some(v2.as_str())
    );
    s.post(&url, &notification("DROP", 2_000, &v2))
        .await
        .ok(204);
    assert_eq!(pointer(&s, &["db", "sales"], "t").await, None);
    assert!(s.files.is_file(&v2).await, "the source's files stay");
    s.post(&url, &notification("UPDATE", 2_000, &v1))
        .await
        .error(409, "AlreadyExistsException");
    assert_eq!(pointer(&s, &["db", "sales"], "t").await, None);
    s.post(&url, &notification("CREATE", 4_000, &v1))
        .await
        .ok(204);
    assert_eq!(
        pointer(&s, &["db", "sales"], "t").await.as_deref(),
        Some(v1.as_str())
    );

    // A DROP of a table that is not there changes nothing (Polaris answers 204 too); it
    // needs no metadata location.
    let absent = notifications_url("mirror", &["db"], "absent");
    let mut drop = notification("DROP", 1, &v1);
    drop["payload"]
        .as_object_mut()
        .unwrap()
        .remove("metadata-location");
    s.post(&absent, &drop).await.ok(204);
    assert!(names(
        &s.get(&format!("{MIRROR}/namespaces/db/tables"))
            .await
            .ok(200)
            .json()
    )
    .is_empty());
}

#[tokio::test]
async fn an_external_catalogs_tables_and_views_refuse_rest_writes() {
    let s = Server::start().await;
    let base = mirror(&s).await;
    let v1 = source_file(&s, &format!("{base}/db/t"), 1, json!({ "v": "1" })).await;
    s.post(
        &notifications_url("mirror", &["db"], "t"),
        &notification("CREATE", 1, &v1),
    )
    .await
    .ok(204);
    let table = format!("{MIRROR}/namespaces/db/tables/t");
    let before = s.get(&table).await.ok(200).json();

    let schema = json!({ "type": "struct", "schema-id": 0,
        "fields": [{ "id": 1, "name": "id", "type": "long", "required": false }] });
    let refused = [
        (
            "create",
            format!("{MIRROR}/namespaces/db/tables"),
            json!({ "name": "new", "schema": schema }),
        ),
        (
            "stage",
            format!("{MIRROR}/namespaces/db/tables"),
            json!({ "name": "new", "schema": schema, "stage-create": true }),
        ),
        (
            "commit",
            table.clone(),
            json!({ "requirements": [], "updates": [
            { "action": "set-properties", "updates": { "x": "y" } }] }),
        ),
        (
            "register over",
            format!("{MIRROR}/namespaces/db/register"),
            json!({ "name": "t", "metadata-location": v1, "overwrite": true }),
        ),
        (
            "rename",
            format!("{MIRROR}/tables/rename"),
            json!({ "source": ident(&["db"], "t"), "destination": ident(&["db"], "u") }),
        ),
        (
            "view",
            format!("{MIRROR}/namespaces/db/views"),
            json!({
            "name": "v", "schema": schema, "view-version": {
                "version-id": 1, "timestamp-ms": 1, "schema-id": 0, "summary": {},
                "default-namespace": ["db"],
                "representations": [{ "type": "sql", "sql": "select 1", "dialect": "spark" }] } }),
        ),
    ];
    for (what, path, body) in refused {
        let message = s.post(&path, &body).await.error(400, "BadRequestException");
        assert!(message.contains("EXTERNAL"), "{what}: {message}");
    }
    s.delete(&format!("{table}?purgeRequested=true"))
        .await
        .error(400, "BadRequestException");
    assert_eq!(s.get(&table).await.ok(200).json(), before);
    assert_eq!(
        names(
            &s.get(&format!("{MIRROR}/namespaces/db/tables"))
                .await
                .ok(200)
                .json()
        ),
        vec!["t"]
    );
    // A table may be registered, as in Polaris (not over another: that is a 400 above).
    let other = source_file(&s, &format!("{base}/db/other"), 2, json!({})).await;
    s.post(
        &format!("{MIRROR}/namespaces/db/register"),
        &json!({ "name": "other", "metadata-location": other }),
    )
    .await
    .ok(200);
    // Namespaces are the catalog's own, as in Polaris, and a table may be dropped
    // without purge (its files stay: they are the source's).
    s.post(
        &format!("{MIRROR}/namespaces"),
        &json!({ "namespace": ["own"] }),
    )
    .await
    .ok(200);
    s.delete(&table).await.ok(204);
    s.get(&table).await.error(404, "NoSuchTableException");
    assert!(s.files.is_file(&v1).await);
}

#[tokio::test]
async fn bad_notifications_are_refused_and_change_nothing() {
    let s = Server::start().await;
    let base = mirror(&s).await;
    let table = format!("{base}/db/t");
    let v1 = source_file(&s, &table, 1, json!({ "v": "1" })).await;
    let url = notifications_url("mirror", &["db"], "t");

    // Only an EXTERNAL catalog takes them.
    s.create_namespace(&["db"]).await;
    let message = s
        .post(
            &notifications_url("default", &["db"], "t"),
            &notification("CREATE", 1, &v1),
        )
        .await
        .error(400, "BadRequestException");
    assert!(message.contains("INTERNAL"), "{message}");
    assert!(s.list_tables(&["db"]).await.is_empty());

    // Malformed requests.
    for (body, says) in [
        (notification("UNKNOWN", 1, &v1), "notification-type"),
        (json!({ "notification-type": "CREATE" }), "payload"),
        (
            json!({ "notification-type": "CREATE", "payload": {
            "table-name": "t", "table-uuid": "u", "metadata-location": v1 } }),
            "timestamp",
        ),
        (
            json!({ "notification-type": "UPDATE", "payload": {
            "table-name": "t", "table-uuid": "u", "timestamp": 1 } }),
            "metadata-location",
        ),
    ] {
        let message = s.post(&url, &body).await.error(400, "BadRequestException");
        assert!(message.contains(says), "{body}: {message}");
    }

    // Files it may not read, cannot read, or that are not a table's metadata.
    let outside = format!("{}/t/metadata/00001.metadata.json", s.outside());
    s.files.write(&outside, s.files.read(&v1).await).await;
    s.post(&url, &notification("CREATE", 1, &outside))
        .await
        .error(403, "ForbiddenException");
    let missing = format!("{table}/metadata/00009-missing.metadata.json");
    let message = s
        .post(&url, &notification("CREATE", 1, &missing))
        .await
        .error(400, "BadRequestException");
    assert!(message.contains("does not exist"), "{message}");
    let garbage = format!("{table}/metadata/00002-garbage.metadata.json");
    s.files.write(&garbage, "not json").await;
    let message = s
        .post(&url, &notification("CREATE", 1, &garbage))
        .await
        .error(400, "BadRequestException");
    assert!(message.contains("not valid table metadata"), "{message}");
    // A metadata file outside the table's own location.
    let elsewhere = format!("{base}/db/other/metadata/00001.metadata.json");
    s.files.write(&elsewhere, s.files.read(&v1).await).await;
    let message = s
        .post(&url, &notification("CREATE", 1, &elsewhere))
        .await
        .error(400, "BadRequestException");
    assert!(
        message.contains("not inside its table's location"),
        "{message}"
    );

    // VALIDATE checks the location and changes nothing.
    s.post(&url, &notification("VALIDATE", 1, &format!("{base}/db/t")))
        .await
        .ok(204);
    s.post(&url, &notification("VALIDATE", 1, &outside))
        .await
        .error(403, "ForbiddenException");
    let listed = s.get(&format!("{MIRROR}/namespaces")).await.ok(200).json();
    assert_eq!(listed["namespaces"], json!([]), "nothing was made");

    // The first timestamp was never admitted: a valid notification still goes through.
    s.post(&url, &notification("CREATE", 1, &v1)).await.ok(204);
    assert_eq!(
        pointer(&s, &["db"], "t").await.as_deref(),
        Some(v1.as_str())
    );
}

#[tokio::test]
async fn external_catalogs_are_created_as_polaris_creates_them() {
    let s = Server::start().await;
    for (body, says) in [
        (
            json!({ "catalog": { "type": "FOREIGN", "name": "x", "properties": {} } }),
            "Unknown catalog type",
        ),
        (
            json!({ "catalog": { "type": "EXTERNAL", "name": "x", "properties": {},
            "connectionConfigInfo": { "connectionType": "ICEBERG_REST", "uri": "http://127.0.0.1:1/api" } } }),
            "authenticationParameters is required",
        ),
    ] {
        let message = s
            .post(CATALOGS, &body)
            .await
            .error(400, "BadRequestException");
        assert!(message.contains(says), "{message}");
    }
    s.get(&format!("{CATALOGS}/x")).await.error_status(404);
    mirror(&s).await;
    let loaded = s.get(&format!("{CATALOGS}/mirror")).await.ok(200).json();
    assert_eq!(loaded["type"], "EXTERNAL");
    let listed = s.get(CATALOGS).await.ok(200).json();
    let types: Vec<(&str, &str)> = listed["catalogs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap()))
        .collect();
    assert_eq!(types, vec![("default", "INTERNAL"), ("mirror", "EXTERNAL")]);
}
