//! Federated catalogs over HTTP: a catalog whose requests Floe forwards to a remote
//! Iceberg REST catalog (here another Floe server, with authentication on, reached with
//! OAuth client credentials). Changes made through the federated catalog land in the
//! remote; privileges are checked here first, and a refused request reaches nothing;
//! paths reach the remote as they were checked; the connection's secret is never shown;
//! an unreachable remote is a 503, one that refuses Floe's credentials a 502. Runs on the embedded store, and on PostgreSQL when
//! `FLOE_TEST_DATABASE_URL` is set.

use crate::common::*;
use reqwest::Method;
use serde_json::{json, Value};

const CATALOGS: &str = "/api/management/v1/catalogs";
const FED: &str = "/v1/fed";

/// A federated catalog `name` on `local` for the remote's `default` catalog.
fn federated(name: &str, local: &Server, remote_root: &str, auth: Value) -> Value {
    json!({ "catalog": {
        "name": name,
        "type": "EXTERNAL",
        "properties": { "default-base-location": format!("{}/{name}", local.root()) },
        "connectionConfigInfo": {
            "connectionType": "ICEBERG_REST",
            "uri": remote_root,
            "remoteCatalogName": CATALOG,
            "authenticationParameters": auth,
        },
    }})
}

fn oauth() -> Value {
    json!({
        "authenticationType": "OAUTH",
        "clientId": ROOT_ID,
        "clientSecret": ROOT_SECRET,
        "scopes": ["PRINCIPAL_ROLE:ALL"],
    })
}

fn table_path(name: &str) -> String {
    format!("{FED}/namespaces/ns/tables/{name}")
}

#[tokio::test]
async fn a_federated_catalog_serves_its_remote_catalog() {
    let remote = secure_server().await;
    let remote_root = As::new(
        &remote,
        &token(&remote, ROOT_ID, ROOT_SECRET, "catalog").await,
    );
    let local = Server::start().await;
    let created = local
        .post(
            CATALOGS,
            &federated("fed", &local, &remote.url(""), oauth()),
        )
        .await
        .ok(201);
    assert!(!created.body.contains(ROOT_SECRET), "{}", created.body);
    let shown = local.get(&format!("{CATALOGS}/fed")).await.ok(200);
    assert!(!shown.body.contains(ROOT_SECRET), "{}", shown.body);
    let connection = &shown.json()["connectionConfigInfo"];
    assert_eq!(connection["uri"], remote.url(""));
    assert_eq!(connection["remoteCatalogName"], CATALOG);
    assert_eq!(
        connection["authenticationParameters"],
        json!({"authenticationType": "OAUTH", "clientId": ROOT_ID, "scopes": ["PRINCIPAL_ROLE:ALL"]})
    );
    let listed = local.get(CATALOGS).await.ok(200);
    assert!(!listed.body.contains(ROOT_SECRET), "{}", listed.body);

    // Namespaces and tables made through the federated catalog are the remote's.
    local
        .post(&format!("{FED}/namespaces"), &json!({"namespace": ["ns"]}))
        .await
        .ok(200);
    local
        .post(
            &format!("{FED}/namespaces/ns/tables"),
            &json!({"name": "t", "schema": schema()}),
        )
        .await
        .ok(200);
    let there = remote_root
        .get(&table_url(&["ns"], "t"))
        .await
        .ok(200)
        .json();
    let here = local.get(&table_path("t")).await.ok(200);
    assert_eq!(here.json()["metadata-location"], there["metadata-location"]);
    // The remote's ETag comes back, and a matching If-None-Match is its 304.
    let etag = here.header("etag").expect("an ETag");
    let again = local
        .get_with(&table_path("t"), &[("if-none-match", etag.as_str())])
        .await;
    assert_eq!(again.status, 304, "{}", again.body);
    assert_eq!(
        names(
            &local
                .get(&format!("{FED}/namespaces/ns/tables"))
                .await
                .ok(200)
                .json()
        ),
        ["t"]
    );
    // The default catalog here has none of it.
    local.get(&table_url(&["ns"], "t")).await.error_status(404);

    // A commit goes through, with its idempotency key.
    let commit = json!({"updates": [{"action": "set-properties", "updates": {"owner": "fed"}}]});
    let key = "0195f0c5-7d2c-7c6e-9a4c-1f2e3d4c5b6a";
    for _ in 0..2 {
        local
            .call_with(
                Method::POST,
                &table_path("t"),
                Some(&commit),
                &[("idempotency-key", key)],
            )
            .await
            .ok(200);
    }
    let there = remote_root
        .get(&table_url(&["ns"], "t"))
        .await
        .ok(200)
        .json();
    assert_eq!(table_property(&there, "owner").as_deref(), Some("fed"));
    let history = there["metadata"]["metadata-log"].as_array().unwrap().len();
    assert_eq!(history, 1, "the retried commit applied once: {there}");

    // The remote's errors come back as it gave them.
    local
        .get(&table_path("missing"))
        .await
        .error(404, "NoSuchTableException");
    local
        .post(&format!("{FED}/namespaces"), &json!({"namespace": ["ns"]}))
        .await
        .error(409, "AlreadyExistsException");

    // Rename and drop reach the remote too.
    local
        .post(
            &format!("{FED}/tables/rename"),
            &json!({"source": ident(&["ns"], "t"), "destination": ident(&["ns"], "u")}),
        )
        .await
        .ok(204);
    remote_root.get(&table_url(&["ns"], "u")).await.ok(200);
    local.delete(&table_path("u")).await.ok(204);
    remote_root
        .get(&table_url(&["ns"], "u"))
        .await
        .error(404, "NoSuchTableException");

    // The configuration lists what is forwarded and the remote serves, and the remote's
    // idempotency (a retry's replay is the remote's).
    let config = local.get("/v1/config?warehouse=fed").await.ok(200).json();
    assert_eq!(config["overrides"]["prefix"], "fed");
    let endpoints = config["endpoints"].as_array().unwrap();
    assert!(endpoints.contains(&json!("POST /v1/{prefix}/transactions/commit")));
    assert!(!endpoints
        .iter()
        .any(|e| e.as_str().unwrap().contains("/credentials")));
    let remote_config = remote_root.get("/v1/config").await.ok(200).json();
    assert_eq!(
        config["idempotency-key-lifetime"],
        remote_config["idempotency-key-lifetime"]
    );

    // A path is forwarded as it was checked: a backslash or a slash inside a segment
    // stays inside it (here, a table name the remote does not have), never a way to
    // another path on the remote's host. (Dot segments, which this client's URL parser
    // resolves before sending, are refused: unit-tested in http::federated.)
    let escaped = local
        .get(&format!(
            "{FED}/namespaces/ns/tables/x%5C..%5C..%5C..%5Capi%5Cmanagement%5Cv1%5Cprincipals"
        ))
        .await;
    assert!(
        [400, 404].contains(&escaped.status),
        "{}: {}",
        escaped.status,
        escaped.body
    );
    assert!(!escaped.body.contains(ROOT_ID), "{}", escaped.body);

    // Floe's own endpoints are not forwarded: nothing is vended or signed for the
    // remote's tables here, and notifications have nothing to mirror.
    local
        .get(&format!("{}/credentials", table_path("t")))
        .await
        .error(400, "BadRequestException");
    local
        .post(
            &format!("{}/notifications", table_path("t")),
            &json!({"notification-type": "DROP", "payload": {}}),
        )
        .await
        .error_status(400);

    // Dropping the catalog drops its connection; the remote keeps its tables.
    local.delete(&format!("{CATALOGS}/fed")).await.ok(204);
    local
        .get(&format!("{FED}/namespaces"))
        .await
        .error_status(404);
    remote_root.get(&ns_url(&["ns"])).await.ok(200);
}

#[tokio::test]
async fn federated_requests_need_privileges_here() {
    let remote = secure_server().await;
    let remote_root = As::new(
        &remote,
        &token(&remote, ROOT_ID, ROOT_SECRET, "catalog").await,
    );
    remote_root
        .post(&format!("{V1}/namespaces"), &json!({"namespace": ["ns"]}))
        .await
        .ok(200);
    let local = secure_server().await;
    let root = As::new(
        &local,
        &token(&local, ROOT_ID, ROOT_SECRET, "catalog").await,
    );
    root.post(
        CATALOGS,
        &federated("fed", &local, &remote.url(""), oauth()),
    )
    .await
    .ok(201);
    let grant = |privilege: &str| json!({"type": "catalog", "privilege": privilege});
    let (id, secret) = principal_with(
        &root,
        "lister",
        "fed",
        &[
            grant("NAMESPACE_LIST"),
            grant("TABLE_LIST"),
            grant("TABLE_WRITE_PROPERTIES"),
        ],
    )
    .await;
    let lister = As::new(&local, &token(&local, &id, &secret, "catalog").await);
    let listed = lister
        .get(&format!("{FED}/namespaces"))
        .await
        .ok(200)
        .json();
    assert_eq!(listed["namespaces"], json!([["ns"]]));
    lister
        .get(&format!("{FED}/namespaces/ns/tables"))
        .await
        .ok(200);
    // Refused here, so the remote never sees them.
    lister
        .post(
            &format!("{FED}/namespaces"),
            &json!({"namespace": ["other"]}),
        )
        .await
        .error(403, "ForbiddenException");
    lister
        .delete(&format!("{FED}/namespaces/ns"))
        .await
        .error(403, "ForbiddenException");
    let remote_listed = remote_root
        .get(&format!("{V1}/namespaces"))
        .await
        .ok(200)
        .json();
    assert_eq!(remote_listed["namespaces"], json!([["ns"]]));
    // Creating a table by a commit that asserts it is new needs TABLE_CREATE, as here.
    let create = json!({"requirements": [{"type": "assert-create"}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}]});
    lister
        .post(&table_path("new"), &create)
        .await
        .error(403, "ForbiddenException");
    lister
        .post(
            "/v1/fed/transactions/commit",
            &json!({"table-changes": [{"identifier": {"namespace": ["ns"], "name": "new"},
                "requirements": [{"type": "assert-create"}], "updates": []}]}),
        )
        .await
        .error(403, "ForbiddenException");
    remote_root
        .get(&table_url(&["ns"], "new"))
        .await
        .error(404, "NoSuchTableException");
    // Without a token, nothing at all.
    local
        .get(&format!("{FED}/namespaces"))
        .await
        .error(401, "NotAuthorizedException");
    // A malformed commit is refused before its privileges are known.
    root.post(&table_path("t"), &json!({"updates": [{"action": "fly"}]}))
        .await
        .error(400, "BadRequestException");
}

#[tokio::test]
async fn a_remote_that_cannot_serve_is_a_503_or_a_502_and_bad_connections_are_refused() {
    let remote = secure_server().await;
    let local = Server::start().await;
    let before = local.get(CATALOGS).await.ok(200).json();
    let port_one = "http://127.0.0.1:1";
    let bearer = |token: &str| json!({"authenticationType": "BEARER", "bearerToken": token});
    let mut bad = vec![
        federated("x", &local, "ftp://127.0.0.1", oauth()),
        federated(
            "x",
            &local,
            &remote.url(""),
            json!({"authenticationType": "SIGV4"}),
        ),
        federated(
            "x",
            &local,
            &remote.url(""),
            json!({"authenticationType": "OAUTH"}),
        ),
        federated("x", &local, &remote.url(""), bearer("")),
    ];
    let mut internal = federated("x", &local, &remote.url(""), oauth());
    internal["catalog"]["type"] = json!("INTERNAL");
    bad.push(internal);
    let mut hive = federated("x", &local, &remote.url(""), oauth());
    hive["catalog"]["connectionConfigInfo"]["connectionType"] = json!("HIVE");
    bad.push(hive);
    for body in &bad {
        local
            .post(CATALOGS, body)
            .await
            .error(400, "BadRequestException");
    }
    assert_eq!(local.get(CATALOGS).await.ok(200).json(), before);

    // Creates catalog `name` on `url` with `auth`, lists its namespaces and returns the
    // refusal's message, after checking its status and type.
    let refusal =
        |name: &'static str, url: String, auth: Value, status: u16, kind: &'static str| {
            let local = &local;
            async move {
                let body = federated(name, local, &url, auth);
                local.post(CATALOGS, &body).await.ok(201);
                let path = format!("/v1/{name}/namespaces");
                local.get(&path).await.error(status, kind)
            }
        };
    // Nothing listens on port 1: nothing was sent, so a retry is safe (503).
    let message = refusal(
        "gone",
        port_one.into(),
        bearer("t"),
        503,
        "ServiceUnavailableException",
    )
    .await;
    assert!(message.contains("gone"), "{message}");
    // The remote's address stays in the log: only readers of the catalog see it.
    assert!(!message.contains("127.0.0.1"), "{message}");
    // A secret the remote's token endpoint refuses: nothing sent, and no retry will do
    // (502, not 503).
    let mut wrong = oauth();
    wrong["clientSecret"] = json!("not-the-secret");
    let message = refusal("wrong", remote.url(""), wrong, 502, "BadGatewayException").await;
    assert!(message.contains("credentials"), "{message}");
    assert!(!message.contains("not-the-secret"), "{message}");
    // A bearer token the remote refuses: its 401 is not the caller's (502).
    let message = refusal(
        "stale",
        remote.url(""),
        bearer("stale"),
        502,
        "BadGatewayException",
    )
    .await;
    assert!(message.contains("credentials"), "{message}");
    assert!(!message.contains("stale\""), "{message}");
}
