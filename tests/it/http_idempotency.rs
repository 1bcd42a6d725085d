//! `Idempotency-Key`: a client that loses a response and retries gets one effect and the
//! first answer, on this node and on another node of the same catalog.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

const KEY: &str = "idempotency-key";

fn key() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// Sends the same request twice with one key; asserts the second is a replay of the
/// first (same status and body) and returns the first.
async fn twice(s: &Server, method: Method, path: &str, body: Option<&Value>) -> Resp {
    let k = key();
    let first = s.call_with(method.clone(), path, body, &[(KEY, &k)]).await;
    assert!(first.header("idempotency-replayed").is_none());
    let second = s.call_with(method, path, body, &[(KEY, &k)]).await;
    assert_eq!(second.status, first.status, "{}", second.what);
    assert_eq!(second.body, first.body, "{}", second.what);
    assert_eq!(
        second.header("idempotency-replayed").as_deref(),
        Some("true")
    );
    first
}

#[tokio::test]
async fn config_advertises_the_key_lifetime() {
    let s = Server::start().await;
    let config = s.get("/v1/config").await.ok(200).json();
    assert_eq!(config["idempotency-key-lifetime"], "PT30M");
    let s =
        Server::start_with(|c| c.idempotency_lifetime = std::time::Duration::from_secs(7200)).await;
    let config = s.get("/v1/config").await.ok(200).json();
    assert_eq!(config["idempotency-key-lifetime"], "PT2H");
}

#[tokio::test]
async fn retried_mutations_take_effect_once() {
    let s = Server::start().await;
    let body = json!({ "namespace": ["db"], "properties": {"a": "1"} });
    twice(&s, Method::POST, &format!("{V1}/namespaces"), Some(&body))
        .await
        .ok(200);
    assert_eq!(s.list_namespaces(None).await, vec![vec!["db".to_string()]]);

    let create = json!({ "name": "t", "schema": schema() });
    let created = twice(&s, Method::POST, &tables_url(&["db"]), Some(&create))
        .await
        .ok(200)
        .json();
    assert_eq!(s.list_tables(&["db"]).await, ["t"]);
    let first_location = created["metadata-location"].as_str().unwrap().to_string();

    let commit = json!({ "updates": [{ "action": "set-properties", "updates": {"k": "v"} }] });
    let committed = twice(&s, Method::POST, &table_url(&["db"], "t"), Some(&commit))
        .await
        .ok(200)
        .json();
    let location = committed["metadata-location"].as_str().unwrap();
    assert_ne!(location, first_location);
    // One commit, one new metadata file: the table is at the first answer's version.
    assert_eq!(
        s.table_pointer(&["db"], "t").await.as_deref(),
        Some(location)
    );
    let metadata_files = s
        .files
        .list(&s.warehouse())
        .await
        .into_iter()
        .filter(|f| f.ends_with(".metadata.json"))
        .count();
    assert_eq!(metadata_files, 2);

    let update = json!({ "removals": ["a", "nope"], "updates": {"b": "2"} });
    let changed = twice(
        &s,
        Method::POST,
        &format!("{}/properties", ns_url(&["db"])),
        Some(&update),
    )
    .await
    .ok(200)
    .json();
    assert_eq!(changed["removed"], json!(["a"]));
    assert_eq!(changed["missing"], json!(["nope"]));

    s.create_view(&["db"], "v").await;
    let rename = json!({ "source": {"namespace": ["db"], "name": "v"},
                         "destination": {"namespace": ["db"], "name": "w"} });
    twice(
        &s,
        Method::POST,
        &format!("{V1}/views/rename"),
        Some(&rename),
    )
    .await
    .ok(204);
    assert_eq!(s.list_views(&["db"]).await, ["w"]);
    // The retried drop answers 204 again, not 404.
    twice(&s, Method::DELETE, &table_url(&["db"], "t"), None)
        .await
        .ok(204);
    assert!(s.list_tables(&["db"]).await.is_empty());
    // The retried undrop answers what the first did (the name and metadata location it
    // came back under), not an empty 204.
    let id = s.newest_dropped_id().await;
    let undrop = json!({ "namespace": ["db"], "name": "back" });
    let back = twice(
        &s,
        Method::POST,
        &format!("/api/management/v1/catalogs/default/dropped/{id}/undrop"),
        Some(&undrop),
    )
    .await
    .ok(200)
    .json();
    assert_eq!(back["name"], "back");
    assert_eq!(back["metadata-location"], json!(location));
    assert_eq!(s.list_tables(&["db"]).await, ["back"]);

    // Polaris's generic tables: the retried create answers 200 again, not 409.
    let generic = "/api/catalog/polaris/v1/default/namespaces/db/generic-tables";
    let create = json!({ "name": "g", "format": "delta" });
    let created = twice(&s, Method::POST, generic, Some(&create))
        .await
        .ok(200)
        .json();
    assert_eq!(created["table"]["name"], "g");
    twice(&s, Method::DELETE, &format!("{generic}/g"), None)
        .await
        .ok(204);
    s.get(&format!("{generic}/g"))
        .await
        .error(404, "NoSuchTableException");
}

#[tokio::test]
async fn a_final_rejection_is_replayed_too() {
    let s = Server::start().await;
    let k = key();
    let create = json!({ "name": "t", "schema": schema() });
    s.call_with(
        Method::POST,
        &tables_url(&["later"]),
        Some(&create),
        &[(KEY, &k)],
    )
    .await
    .error(404, "NoSuchNamespaceException");
    s.create_namespace(&["later"]).await;
    // The retry gets the first answer; it does not create the table now.
    let retry = s
        .call_with(
            Method::POST,
            &tables_url(&["later"]),
            Some(&create),
            &[(KEY, &k)],
        )
        .await;
    retry.error(404, "NoSuchNamespaceException");
    assert!(s.list_tables(&["later"]).await.is_empty());
}

#[tokio::test]
async fn a_key_reused_for_another_request_is_a_422() {
    let s = Server::start().await;
    let k = key();
    let create = |name: &str| json!({ "namespace": [name] });
    s.call_with(
        Method::POST,
        &format!("{V1}/namespaces"),
        Some(&create("a")),
        &[(KEY, &k)],
    )
    .await
    .ok(200);
    let before = s.state().await;
    s.call_with(
        Method::POST,
        &format!("{V1}/namespaces"),
        Some(&create("b")),
        &[(KEY, &k)],
    )
    .await
    .error(422, "UnprocessableEntityException");
    // The same key however a client writes it (upper case, braces, no hyphens, a URN).
    let simple = k.replace('-', "");
    for spelling in [
        k.to_uppercase(),
        format!("{{{k}}}"),
        simple.clone(),
        format!("urn:uuid:{k}"),
    ] {
        s.call_with(
            Method::POST,
            &format!("{V1}/namespaces"),
            Some(&create("b")),
            &[(KEY, &spelling)],
        )
        .await
        .error(422, "UnprocessableEntityException");
    }
    // And the first request's answer again, under any spelling.
    s.call_with(
        Method::POST,
        &format!("{V1}/namespaces"),
        Some(&create("a")),
        &[(KEY, &simple)],
    )
    .await
    .ok(200);
    s.call_with(Method::DELETE, &ns_url(&["a"]), None, &[(KEY, &k)])
        .await
        .error(422, "UnprocessableEntityException");
    // A method the route does not serve is a 405 before the key is looked at.
    let put = s
        .call_with(Method::PUT, &ns_url(&["a"]), None, &[(KEY, &k)])
        .await;
    assert_eq!(put.status, 405, "{}", put.body);
    s.assert_unchanged(&before, "a reused idempotency key")
        .await;
}

#[tokio::test]
async fn malformed_keys_are_refused() {
    let s = Server::start().await;
    let before = s.state().await;
    for bad in ["not-a-uuid", "", "0190f5e1-0000-7000-8000-00000000000", "é"] {
        let mut request = s.client.post(s.url(&format!("{V1}/namespaces")));
        request = request.json(&json!({ "namespace": ["x"] })).header(
            KEY,
            reqwest::header::HeaderValue::from_bytes(bad.as_bytes()).unwrap(),
        );
        s.send(format!("POST with key {bad:?}"), request)
            .await
            .error(400, "BadRequestException");
    }
    s.assert_unchanged(&before, "malformed idempotency keys")
        .await;
    // Reads ignore the header.
    s.get_with(&format!("{V1}/namespaces"), &[(KEY, "not-a-uuid")])
        .await
        .ok(200);
}

#[tokio::test]
async fn concurrent_requests_with_one_key_take_effect_once() {
    let s = std::sync::Arc::new(Server::start().await);
    s.create_namespace(&["db"]).await;
    let k = key();
    let create = json!({ "name": "t", "schema": schema() });
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (s, k, create) = (s.clone(), k.clone(), create.clone());
        tasks.push(tokio::spawn(async move {
            s.call_with(
                Method::POST,
                &tables_url(&["db"]),
                Some(&create),
                &[(KEY, &k)],
            )
            .await
        }));
    }
    let mut bodies = Vec::new();
    for task in tasks {
        let r = task.await.unwrap().ok(200);
        bodies.push(r.body);
    }
    assert!(bodies.windows(2).all(|w| w[0] == w[1]), "{bodies:?}");
    assert_eq!(s.list_tables(&["db"]).await, ["t"]);
}

/// Two nodes over one PostgreSQL database: a retry that reaches the other node gets the
/// same answer. (The embedded store serves one node; without `FLOE_TEST_DATABASE_URL`
/// this test says it did not run.)
#[tokio::test]
async fn a_retry_on_another_node_gets_the_same_answer() {
    let Some(settings) = postgres_for_test().await else {
        eprintln!("FLOE_TEST_DATABASE_URL not set: two nodes not tested");
        return;
    };
    let a = Server::start_with(|c| c.postgres = Some(settings.clone())).await;
    let b = Server::start_with(|c| c.postgres = Some(settings.clone())).await;
    a.create_namespace(&["db"]).await;
    let k = key();
    let create = json!({ "name": "t", "schema": schema(), "location": format!("{}/shared/t", a.warehouse()) });
    let first = a
        .call_with(
            Method::POST,
            &tables_url(&["db"]),
            Some(&create),
            &[(KEY, &k)],
        )
        .await
        .ok(200);
    let retry = b
        .call_with(
            Method::POST,
            &tables_url(&["db"]),
            Some(&create),
            &[(KEY, &k)],
        )
        .await
        .ok(200);
    assert_eq!(retry.body, first.body);
    assert_eq!(b.list_tables(&["db"]).await, ["t"]);
}
