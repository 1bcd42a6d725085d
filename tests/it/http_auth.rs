//! Authentication and authorization over HTTP: bad tokens are 401, missing privileges
//! 403 with nothing changed, the token endpoint answers abuse with OAuth2 error bodies,
//! a catalog admin cannot reach beyond its catalog, and revocations take effect on the
//! next request. Runs on the embedded store, and on PostgreSQL when
//! `FLOE_TEST_DATABASE_URL` is set.

use std::time::Duration;

use crate::common::*;
use serde_json::{json, Value};

/// A client signed in as a new principal of the catalog `default` holding `grants` (see
/// [`principal_with`]).
async fn signed_in<'a>(root: &As<'a>, name: &str, grants: &[Value]) -> As<'a> {
    let (id, secret) = principal_with(root, name, "default", grants).await;
    As::new(root.s, &token(root.s, &id, &secret, "catalog").await)
}

/// The root principal's client, after it created namespace `db` and table `db.t`.
async fn root_with_table(s: &Server) -> As<'_> {
    let root = As::new(s, &token(s, ROOT_ID, ROOT_SECRET, "catalog").await);
    root.post(&format!("{V1}/namespaces"), &json!({"namespace": ["db"]}))
        .await
        .ok(200);
    root.post(
        &tables_url(&["db"]),
        &json!({"name": "t", "schema": schema()}),
    )
    .await
    .ok(200);
    root
}

fn on_namespace(privilege: &str) -> Value {
    json!({"type": "namespace", "namespace": ["db"], "privilege": privilege})
}

#[tokio::test]
async fn requests_without_a_valid_token_are_401() {
    let s = secure_server().await;
    let path = format!("{V1}/namespaces");
    s.get(&path).await.error(401, "NotAuthorizedException");
    for bad in ["Bearer", "Bearer garbage", "Basic cm9vdDpy", "bearer a.b.c"] {
        s.get_with(&path, &[("authorization", bad)])
            .await
            .error(401, "NotAuthorizedException");
    }
    // alg: none, and a token another server signed (its own key).
    use base64::Engine;
    let b64 = |v: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let none = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(
            r#"{"iss":"floe","sub":"root","exp":9999999999,"iat":0,"jti":"x","client_id":"x","scope":"service_admin"}"#
        )
    );
    let other = secure_server().await;
    let foreign = token(&other, ROOT_ID, ROOT_SECRET, "catalog").await;
    for t in [none, foreign] {
        As::new(&s, &t)
            .get(&path)
            .await
            .error(401, "NotAuthorizedException");
    }
    // Health and the token endpoint need no token.
    s.get("/healthz").await.ok(200);
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    root.get(&path).await.ok(200);
}

#[tokio::test]
async fn expired_tokens_and_deleted_principals_are_401() {
    // Tokens carry whole seconds: one issued late in a second lives up to a second less
    // than the lifetime, so the setup below gets 3 s (1 s made the test flaky on CI).
    let s = secure_server_with(|c| c.auth.token_lifetime = Duration::from_secs(3)).await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    let (id, secret) = principal_with(&root, "temp", "default", &[]).await;
    let temp = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    temp.get("/v1/config").await.ok(200);
    root.delete(&format!("{MGMT}/principals/temp"))
        .await
        .ok(204);
    temp.get("/v1/config")
        .await
        .error(401, "NotAuthorizedException");
    // A principal created again under the name is another: the old tokens stay refused.
    root.post(
        &format!("{MGMT}/principals"),
        &json!({"principal": {"name": "temp"}}),
    )
    .await
    .ok(201);
    temp.get("/v1/config")
        .await
        .error(401, "NotAuthorizedException");
    tokio::time::sleep(Duration::from_millis(3100)).await;
    root.get("/v1/config")
        .await
        .error(401, "NotAuthorizedException");
}

#[tokio::test]
async fn the_token_endpoint_answers_abuse_with_oauth_errors() {
    let s = secure_server().await;
    let oauth = |r: Resp, status: u16, error: &str| {
        assert_eq!(r.status, status, "{}: {}", r.what, r.body);
        let body = r.json();
        assert_eq!(body["error"], error, "{}", r.body);
        assert!(body["error_description"].is_string());
    };
    let creds = |extra: &[(&'static str, &'static str)]| {
        let mut form = vec![("client_id", ROOT_ID), ("client_secret", ROOT_SECRET)];
        form.extend_from_slice(extra);
        form
    };
    oauth(
        token_response(&s, &creds(&[("grant_type", "password")])).await,
        400,
        "unsupported_grant_type",
    );
    oauth(
        token_response(&s, &[("grant_type", "client_credentials")]).await,
        400,
        "invalid_client",
    );
    let huge = "PRINCIPAL_ROLE:x ".repeat(1000);
    let huge: &'static str = Box::leak(huge.into_boxed_str());
    oauth(
        token_response(
            &s,
            &creds(&[("grant_type", "client_credentials"), ("scope", huge)]),
        )
        .await,
        400,
        "invalid_scope",
    );
    oauth(
        token_response(
            &s,
            &creds(&[
                ("grant_type", "client_credentials"),
                ("scope", "PRINCIPAL_ROLE:nobody"),
            ]),
        )
        .await,
        400,
        "invalid_scope",
    );
    oauth(
        token_response(
            &s,
            &[
                ("grant_type", "client_credentials"),
                ("client_id", ROOT_ID),
                ("client_secret", "wrong"),
            ],
        )
        .await,
        401,
        "unauthorized_client",
    );
    let json_body = s
        .post(
            "/v1/oauth/tokens",
            &json!({"grant_type": "client_credentials"}),
        )
        .await;
    oauth(json_body, 400, "invalid_request");
    // HTTP Basic, and a refresh by token exchange.
    let basic = s
        .client
        .post(s.url("/api/catalog/v1/oauth/tokens"))
        .basic_auth(ROOT_ID, Some(ROOT_SECRET))
        .form(&[
            ("grant_type", "client_credentials"),
            ("scope", "PRINCIPAL_ROLE:ALL"),
        ]);
    let first = s.send("basic".into(), basic).await.ok(200).json();
    let subject = first["access_token"].as_str().unwrap();
    let refreshed = exchange(&s, subject).await.ok(200).json();
    As::new(&s, refreshed["access_token"].as_str().unwrap())
        .get("/v1/config")
        .await
        .ok(200);
    oauth(
        token_response(
            &s,
            &[
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:token-exchange",
                ),
                ("subject_token", "not-a-token"),
            ],
        )
        .await,
        400,
        "invalid_grant",
    );
}

#[tokio::test]
async fn roles_by_operation_allowed_and_denied() {
    let s = secure_server().await;
    let root = root_with_table(&s).await;
    root.post(
        &format!("{V1}/namespaces"),
        &json!({"namespace": ["other"]}),
    )
    .await
    .ok(200);
    root.post(
        &tables_url(&["other"]),
        &json!({"name": "t", "schema": schema()}),
    )
    .await
    .ok(200);
    let reader = signed_in(&root, "reader", &[on_namespace("TABLE_READ_DATA")]).await;
    let writer = signed_in(
        &root,
        "writer",
        &[
            on_namespace("TABLE_WRITE_DATA"),
            on_namespace("TABLE_CREATE"),
        ],
    )
    .await;
    let commit = json!({"updates": [{"action": "set-properties", "updates": {"k": "v"}}]});
    let create = json!({"name": "new", "schema": schema()});
    let state = |s: &Server| {
        let (dir, files, warehouse) = (s.data_dir(), s.files.clone(), s.warehouse());
        async move { (tree(&dir), files.list(&warehouse).await) }
    };
    let before = state(&s).await;
    // Reader: loads and lists tables in db; nothing else.
    reader.get(&table_url(&["db"], "t")).await.ok(200);
    reader.get(&tables_url(&["db"])).await.ok(200);
    reader
        .get(&table_url(&["other"], "t"))
        .await
        .error(403, "ForbiddenException");
    reader
        .post(&table_url(&["db"], "t"), &commit)
        .await
        .error(403, "ForbiddenException");
    reader
        .post(&tables_url(&["db"]), &create)
        .await
        .error(403, "ForbiddenException");
    reader
        .delete(&table_url(&["db"], "t"))
        .await
        .error(403, "ForbiddenException");
    reader
        .delete(&ns_url(&["db"]))
        .await
        .error(403, "ForbiddenException");
    reader
        .post(&format!("{V1}/namespaces"), &json!({"namespace": ["x"]}))
        .await
        .error(403, "ForbiddenException");
    // A transaction touching a table the caller may not write is refused whole.
    let txn = json!({"table-changes": [
        {"identifier": {"namespace": ["db"], "name": "t"}, "requirements": [], "updates": commit["updates"]},
        {"identifier": {"namespace": ["other"], "name": "t"}, "requirements": [], "updates": commit["updates"]},
    ]});
    writer
        .post(&format!("{V1}/transactions/commit"), &txn)
        .await
        .error(403, "ForbiddenException");
    assert_eq!(state(&s).await, before, "403s changed nothing");
    // Writer: commits and creates in db.
    writer.post(&table_url(&["db"], "t"), &commit).await.ok(200);
    writer.post(&tables_url(&["db"]), &create).await.ok(200);
    writer
        .post(&table_url(&["other"], "t"), &commit)
        .await
        .error(403, "ForbiddenException");
    writer
        .delete(&table_url(&["db"], "t"))
        .await
        .error(403, "ForbiddenException");
    // Management needs the right roles.
    reader
        .get(&format!("{MGMT}/principals"))
        .await
        .error(403, "ForbiddenException");
    reader
        .post(
            &format!("{MGMT}/catalogs"),
            &json!({"catalog": {"name": "x", "type": "INTERNAL", "properties": {}}}),
        )
        .await
        .error(403, "ForbiddenException");
    let listed = reader.get(&format!("{MGMT}/catalogs")).await.ok(200).json();
    assert_eq!(
        listed["catalogs"].as_array().unwrap().len(),
        1,
        "sees the catalog it has grants in"
    );
}

/// Grants belong to the object, as in Polaris, not to its name: a rename takes them
/// along, a drop takes them away, and nothing created later under a dropped name
/// inherits them (namespaces, tables, views, policies alike); an undrop brings them back.
#[tokio::test]
async fn grants_follow_their_object_through_renames_and_drops() {
    let s = secure_server().await;
    let root = root_with_table(&s).await;
    let table = |name: &str| {
        json!({"type": "table", "namespace": ["db"], "tableName": name,
            "privilege": "TABLE_READ_DATA"})
    };
    let views = views_url(&["db"]);
    let view = view_body("v", &["db"], "select 1");
    root.post(&views, &view).await.ok(200);
    root.post(&format!("{V1}/namespaces"), &json!({"namespace": ["ns2"]}))
        .await
        .ok(200);
    let policies = "/api/catalog/polaris/v1/default/namespaces/db/policies";
    let policy = json!({"name": "p", "type": "system.snapshot-expiry",
        "content": "{\"enable\":true}"});
    root.post(policies, &policy).await.ok(200);
    let reader = signed_in(
        &root,
        "reader",
        &[
            table("t"),
            json!({"type": "view", "namespace": ["db"], "viewName": "v",
                "privilege": "VIEW_READ_PROPERTIES"}),
            json!({"type": "namespace", "namespace": ["ns2"],
                "privilege": "NAMESPACE_READ_PROPERTIES"}),
            json!({"type": "policy", "namespace": ["db"], "policyName": "p",
                "privilege": "POLICY_READ"}),
        ],
    )
    .await;
    let grants_url = format!("{MGMT}/catalogs/default/catalog-roles/reader_role/grants");
    let grants = || async { root.get(&grants_url).await.ok(200).json()["grants"].clone() };
    assert_eq!(grants().await.as_array().unwrap().len(), 4);
    reader.get(&table_url(&["db"], "t")).await.ok(200);
    // A rename takes the grant along; a table made under the old name has none.
    root.post(
        &format!("{V1}/tables/rename"),
        &json!({"source": {"namespace": ["db"], "name": "t"},
            "destination": {"namespace": ["db"], "name": "u"}}),
    )
    .await
    .ok(204);
    reader.get(&table_url(&["db"], "u")).await.ok(200);
    root.post(
        &tables_url(&["db"]),
        &json!({"name": "t", "schema": schema()}),
    )
    .await
    .ok(200);
    reader
        .get(&table_url(&["db"], "t"))
        .await
        .error(403, "ForbiddenException");
    // Drops take them away: the table's, the view's, the namespace's, the policy's.
    root.delete(&table_url(&["db"], "u")).await.ok(204);
    root.delete(&view_url(&["db"], "v")).await.ok(204);
    root.delete(&ns_url(&["ns2"])).await.ok(204);
    root.delete(&format!("{policies}/p")).await.ok(204);
    assert_eq!(
        grants().await,
        json!([]),
        "every grant went with its object"
    );
    // Made again under the same names, none is open to the reader.
    root.post(
        &tables_url(&["db"]),
        &json!({"name": "u", "schema": schema()}),
    )
    .await
    .ok(200);
    root.post(&views, &view).await.ok(200);
    root.post(&format!("{V1}/namespaces"), &json!({"namespace": ["ns2"]}))
        .await
        .ok(200);
    root.post(policies, &policy).await.ok(200);
    let refused = [
        reader.get(&table_url(&["db"], "u")).await,
        reader.get(&view_url(&["db"], "v")).await,
        reader.get(&ns_url(&["ns2"])).await,
        reader.get(&format!("{policies}/p")).await,
    ];
    for r in refused {
        r.error(403, "ForbiddenException");
    }
    // An undrop brings the table and the view back with their grants, under the names
    // they come back as; the names taken since stay closed.
    let dropped = root
        .get(&format!("{MGMT}/catalogs/default/dropped"))
        .await
        .ok(200)
        .json();
    for (name, to) in [("u", "u_old"), ("v", "v_old")] {
        let id = dropped["dropped"]
            .as_array()
            .expect("a list")
            .iter()
            .find(|d| d["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {dropped}"))["id"]
            .as_str()
            .expect("an id")
            .to_string();
        root.post(
            &format!("{MGMT}/catalogs/default/dropped/{id}/undrop"),
            &json!({"namespace": ["db"], "name": to}),
        )
        .await
        .ok(200);
    }
    reader.get(&table_url(&["db"], "u_old")).await.ok(200);
    reader.get(&view_url(&["db"], "v_old")).await.ok(200);
    reader
        .get(&table_url(&["db"], "u"))
        .await
        .error(403, "ForbiddenException");
    assert_eq!(grants().await.as_array().unwrap().len(), 2);
}

/// The grants a drop keeps for its undrop go with its record once its retention is
/// over, even when no later drop comes along to clear them.
#[tokio::test]
async fn kept_grants_go_when_their_drop_expires() {
    let s = secure_server_with(|c| c.drop_retention = Duration::from_secs(1)).await;
    let root = root_with_table(&s).await;
    signed_in(
        &root,
        "reader",
        &[
            json!({"type": "table", "namespace": ["db"], "tableName": "t",
            "privilege": "TABLE_READ_DATA"}),
        ],
    )
    .await;
    let kept = || async {
        s.security_document().await["kept_grants"]
            .as_object()
            .map_or(0, |m| m.len())
    };
    assert_eq!(kept().await, 0);
    root.delete(&table_url(&["db"], "t")).await.ok(204);
    assert_eq!(kept().await, 1, "kept for the undrop");
    // The expirer looks every second (its interval's floor).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let dropped = root
            .get(&format!("{MGMT}/catalogs/default/dropped"))
            .await
            .ok(200)
            .json();
        if dropped["dropped"].as_array().expect("a list").is_empty() && kept().await == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still kept after the drop expired: {} / {dropped}",
            s.security_document().await["kept_grants"]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Past its retention a drop cannot be undropped, even before the expirer forgets it: a
/// later drop has forgotten its kept grants by then, and it would come back without
/// them. It leaves the list at the same moment.
#[tokio::test]
async fn an_expired_drop_is_gone_for_undrop_before_the_expirer_runs() {
    let s = secure_server_with(|c| c.drop_retention = Duration::from_secs(1)).await;
    let root = root_with_table(&s).await;
    root.delete(&table_url(&["db"], "t")).await.ok(204);
    let dropped = root
        .get(&format!("{MGMT}/catalogs/default/dropped"))
        .await
        .ok(200)
        .json();
    let entry = &dropped["dropped"][0];
    let id = entry["id"].as_str().expect("an id").to_string();
    let expires = entry["expires-at-ms"].as_i64().expect("expires-at-ms");
    // Just past it: the expirer (every second) has most likely not run yet.
    let wait = expires + 5 - floe::model::now_ms();
    tokio::time::sleep(Duration::from_millis(wait.max(0) as u64)).await;
    root.post(
        &format!("{MGMT}/catalogs/default/dropped/{id}/undrop"),
        &json!({}),
    )
    .await
    .error(404, "NoSuchTableException");
    root.get(&table_url(&["db"], "t"))
        .await
        .error(404, "NoSuchTableException");
    let dropped = root
        .get(&format!("{MGMT}/catalogs/default/dropped"))
        .await
        .ok(200)
        .json();
    assert_eq!(dropped["dropped"], json!([]));
}

/// A grant racing the drop of its object (a table, or a policy): whichever commits
/// first, no grant outlives the object (the grant is refused, or the drop takes it
/// along).
#[tokio::test]
async fn a_grant_racing_a_drop_never_outlives_the_object() {
    let s = secure_server().await;
    let root = root_with_table(&s).await;
    root.post(
        &format!("{MGMT}/catalogs/default/catalog-roles"),
        &json!({"catalogRole": {"name": "racer"}}),
    )
    .await
    .ok(201);
    let grants_url = format!("{MGMT}/catalogs/default/catalog-roles/racer/grants");
    // The grant and the drop at once: the drop wins, the grant is a 201 or a 404, and no
    // grant is left.
    let race = |grant: &Value, url: &str, what: &str| {
        let (root, grants_url) = (&root, &grants_url);
        let (grant, url, what) = (grant.clone(), url.to_string(), what.to_string());
        async move {
            let (granted, dropped) = tokio::join!(root.put(grants_url, &grant), root.delete(&url));
            dropped.ok(204);
            assert!(
                granted.status == 201 || granted.status == 404,
                "{what}: {}: {}",
                granted.status,
                granted.body
            );
            let held = root.get(grants_url).await.ok(200).json()["grants"].clone();
            assert_eq!(held, json!([]), "{what}: a grant outlived its object");
        }
    };
    for round in 0..40 {
        let name = format!("r{round}");
        root.post(
            &tables_url(&["db"]),
            &json!({"name": name, "schema": schema()}),
        )
        .await
        .ok(200);
        let grant = json!({"grant": {"type": "table", "namespace": ["db"],
            "tableName": name, "privilege": "TABLE_READ_DATA"}});
        race(
            &grant,
            &table_url(&["db"], &name),
            &format!("round {round}: table"),
        )
        .await;
        // A policy, which lives in its catalog's policy document, not in a row.
        let policies = "/api/catalog/polaris/v1/default/namespaces/db/policies";
        let policy = json!({"name": name, "type": "system.snapshot-expiry",
            "content": "{\"enable\": true}"});
        root.post(policies, &policy).await.ok(200);
        let grant = json!({"grant": {"type": "policy", "namespace": ["db"],
            "policyName": name, "privilege": "POLICY_READ"}});
        race(
            &grant,
            &format!("{policies}/{name}"),
            &format!("round {round}: policy"),
        )
        .await;
    }
}

/// Polaris's fine-grained table privileges: a commit needs the privilege of each kind of
/// update it makes, so a role may append without changing the schema, or evolve the
/// schema without appending. A refused commit changes nothing.
#[tokio::test]
async fn a_commit_needs_the_fine_grained_privileges_of_its_updates() {
    let s = secure_server().await;
    let root = root_with_table(&s).await;
    let on_table = |privilege: &str| json!({"type": "table", "namespace": ["db"], "tableName": "t", "privilege": privilege});
    let appender = signed_in(
        &root,
        "appender",
        &[
            on_table("TABLE_READ_PROPERTIES"),
            on_table("TABLE_ADD_SNAPSHOT"),
            on_table("TABLE_SET_SNAPSHOT_REF"),
        ],
    )
    .await;
    let shaper = signed_in(&root, "shaper", &[on_namespace("TABLE_MANAGE_STRUCTURE")]).await;
    let tagger = signed_in(&root, "tagger", &[on_table("TABLE_SET_PROPERTIES")]).await;
    let t = table_url(&["db"], "t");
    let state = |s: &Server| {
        let (dir, files, warehouse) = (s.data_dir(), s.files.clone(), s.warehouse());
        async move { (tree(&dir), files.list(&warehouse).await) }
    };
    let refused = |who: &'static str, body: Value, missing: &'static str| {
        let (s, t, state) = (&s, &t, &state);
        let client = match who {
            "appender" => &appender,
            "shaper" => &shaper,
            _ => &tagger,
        };
        async move {
            let before = state(s).await;
            let message = client.post(t, &body).await.error(403, "ForbiddenException");
            assert!(message.contains(missing), "{who}: {message}");
            assert_eq!(state(s).await, before, "{who}'s 403 changed nothing");
        }
    };
    let snapshot = json!({
        "snapshot-id": 1, "sequence-number": 1, "timestamp-ms": now_ms(),
        "manifest-list": format!("{}/db/t/snap-1.avro", s.warehouse()),
        "summary": {"operation": "append"}, "schema-id": 0,
    });
    let append = json!({"updates": [
        {"action": "add-snapshot", "snapshot": snapshot},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 1},
    ]});
    let evolve = json!({"updates": [
        {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
            {"id": 1, "name": "id", "required": true, "type": "long"},
            {"id": 2, "name": "data", "required": false, "type": "string"},
            {"id": 3, "name": "extra", "required": false, "type": "int"}]}},
        {"action": "set-current-schema", "schema-id": -1},
    ]});
    let set = |k: &str| json!({"updates": [{"action": "set-properties", "updates": {k: "v"}}]});
    let remove = json!({"updates": [{"action": "remove-properties", "removals": ["a"]}]});

    // The appender appends, and nothing else.
    refused("appender", evolve.clone(), "TABLE_ADD_SCHEMA").await;
    refused("appender", set("a"), "TABLE_SET_PROPERTIES").await;
    appender.post(&t, &append).await.ok(200);
    let loaded = appender.get(&t).await.ok(200).json();
    assert_eq!(loaded["metadata"]["current-snapshot-id"], 1);

    // The shaper (TABLE_MANAGE_STRUCTURE on the namespace) changes structure and
    // properties, but does not append, and has no privilege for what Polaris gives none
    // of its own (set-default-spec needs TABLE_WRITE_PROPERTIES).
    let mut second = append.clone();
    second["updates"][0]["snapshot"]["snapshot-id"] = json!(2);
    second["updates"][0]["snapshot"]["parent-snapshot-id"] = json!(1);
    second["updates"][0]["snapshot"]["sequence-number"] = json!(2);
    second["updates"][1]["snapshot-id"] = json!(2);
    refused("shaper", second, "TABLE_ADD_SNAPSHOT").await;
    refused(
        "shaper",
        json!({"updates": [{"action": "set-default-spec", "spec-id": 0}]}),
        "TABLE_WRITE_PROPERTIES",
    )
    .await;
    shaper.post(&t, &evolve).await.ok(200);
    shaper.post(&t, &set("a")).await.ok(200);
    shaper
        .post(
            &t,
            &json!({"updates": [{"action": "remove-snapshot-ref", "ref-name": "nothing"}]}),
        )
        .await
        .ok(200);

    // The tagger sets properties, but does not remove them, alone or in a transaction.
    refused("tagger", remove.clone(), "TABLE_REMOVE_PROPERTIES").await;
    tagger.post(&t, &set("b")).await.ok(200);
    let txn = |updates: &Value| {
        json!({"table-changes": [{"identifier": {"namespace": ["db"], "name": "t"},
            "requirements": [], "updates": updates}]})
    };
    let before = state(&s).await;
    let message = tagger
        .post(
            &format!("{V1}/transactions/commit"),
            &txn(&remove["updates"]),
        )
        .await
        .error(403, "ForbiddenException");
    assert!(message.contains("TABLE_REMOVE_PROPERTIES"), "{message}");
    assert_eq!(
        state(&s).await,
        before,
        "the transaction's 403 changed nothing"
    );
    tagger
        .post(
            &format!("{V1}/transactions/commit"),
            &txn(&set("c")["updates"]),
        )
        .await
        .ok(204);
    let properties = &root.get(&t).await.ok(200).json()["metadata"]["properties"];
    for k in ["a", "b", "c"] {
        assert_eq!(properties[k], "v", "{k}");
    }

    // They are table privileges: a view or a policy does not take them.
    let role_grants = format!("{MGMT}/catalogs/default/catalog-roles/tagger_role/grants");
    let misfit = json!({"grant": {"type": "view", "namespace": ["db"], "viewName": "v",
        "privilege": "TABLE_MANAGE_STRUCTURE"}});
    root.put(&role_grants, &misfit)
        .await
        .error(400, "BadRequestException");
}

#[tokio::test]
async fn scan_plans_need_the_tables_data_privilege() {
    let s = secure_server().await;
    let root = root_with_table(&s).await;
    let grant = |privilege| [on_namespace(privilege)];
    let props = signed_in(&root, "props", &grant("TABLE_READ_PROPERTIES")).await;
    let data = signed_in(&root, "data", &grant("TABLE_READ_DATA")).await;
    let table = table_url(&["db"], "t");
    let plan = format!("{table}/plan");
    // A plan names every data file: loading the table is not enough.
    props.get(&table).await.ok(200);
    props
        .post(&plan, &json!({}))
        .await
        .error(403, "ForbiddenException");
    props
        .post(&format!("{table}/tasks"), &json!({"plan-task": "x"}))
        .await
        .error(403, "ForbiddenException");
    props
        .delete(&format!("{plan}/sync-00000000-0000-0000-0000-000000000000"))
        .await
        .error(403, "ForbiddenException");
    let planned = data.post(&plan, &json!({})).await.ok(200).json();
    assert_eq!(planned["status"], "completed", "{planned}");
}

#[tokio::test]
async fn generic_tables_take_the_table_privileges() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    root.post(&format!("{V1}/namespaces"), &json!({"namespace": ["db"]}))
        .await
        .ok(200);
    let generic = "/api/catalog/polaris/v1/default/namespaces/db/generic-tables";
    let body = json!({"name": "g", "format": "delta"});
    let grants = |privileges: &[&str]| -> Vec<Value> {
        privileges.iter().map(|p| on_namespace(p)).collect()
    };
    let reader_grants = grants(&["TABLE_LIST", "TABLE_READ_PROPERTIES"]);
    let (id, secret) = principal_with(&root, "reader", "default", &reader_grants).await;
    let reader = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    let (id, secret) =
        principal_with(&root, "creator", "default", &grants(&["TABLE_CREATE"])).await;
    let creator = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    // Neither may create without TABLE_CREATE; nothing is created.
    reader
        .post(generic, &body)
        .await
        .error(403, "ForbiddenException");
    creator.post(generic, &body).await.ok(200);
    // Listing needs TABLE_LIST (which TABLE_CREATE implies, as in Polaris), loading
    // TABLE_READ_PROPERTIES, dropping TABLE_DROP.
    assert_eq!(names(&creator.get(generic).await.ok(200).json()), vec!["g"]);
    creator
        .get(&format!("{generic}/g"))
        .await
        .error(403, "ForbiddenException");
    let listed = reader.get(generic).await.ok(200).json();
    assert_eq!(names(&listed), vec!["g"]);
    reader.get(&format!("{generic}/g")).await.ok(200);
    reader
        .delete(&format!("{generic}/g"))
        .await
        .error(403, "ForbiddenException");
    // A table grant may name a generic table, as in Polaris.
    let (id, secret) = principal_with(
        &root,
        "dropper",
        "default",
        &[json!({"type": "table", "namespace": ["db"], "tableName": "g", "privilege": "TABLE_DROP"})],
    )
    .await;
    let dropper = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    dropper.get(generic).await.error(403, "ForbiddenException");
    dropper.delete(&format!("{generic}/g")).await.ok(204);
    reader
        .get(&format!("{generic}/g"))
        .await
        .error(404, "NoSuchTableException");
}

#[tokio::test]
async fn policies_take_polariss_privileges() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    for namespace in ["db", "other"] {
        root.post(
            &format!("{V1}/namespaces"),
            &json!({"namespace": [namespace]}),
        )
        .await
        .ok(200);
    }
    let policies = "/api/catalog/polaris/v1/default/namespaces/db/policies";
    let body =
        json!({"name": "p1", "type": "system.snapshot-expiry", "content": "{\"enable\":true}"});
    let grants = |privileges: &[&str]| -> Vec<Value> {
        privileges.iter().map(|p| on_namespace(p)).collect()
    };
    let (id, secret) =
        principal_with(&root, "author", "default", &grants(&["POLICY_CREATE"])).await;
    let author = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    // A policy grant names a policy that exists.
    let read_p1 = json!({"type": "policy", "namespace": ["db"], "policyName": "p1",
        "privilege": "POLICY_READ"});
    root.put(
        &format!("{MGMT}/catalogs/default/catalog-roles/author_role/grants"),
        &json!({ "grant": read_p1 }),
    )
    .await
    .error(404, "NoSuchPolicyException");
    // POLICY_CREATE on the namespace creates and lists (it implies POLICY_LIST), but
    // neither reads the policy nor attaches it.
    author.post(policies, &body).await.ok(200);
    let listed = author.get(policies).await.ok(200).json();
    assert_eq!(
        listed["identifiers"],
        json!([{"namespace": ["db"], "name": "p1"}])
    );
    author
        .get(&format!("{policies}/p1"))
        .await
        .error(403, "ForbiddenException");
    root.put(
        &format!("{MGMT}/catalogs/default/catalog-roles/author_role/grants"),
        &json!({ "grant": read_p1 }),
    )
    .await
    .ok(201);
    let grants_listed = root
        .get(&format!(
            "{MGMT}/catalogs/default/catalog-roles/author_role/grants"
        ))
        .await
        .ok(200)
        .json();
    assert!(
        grants_listed["grants"]
            .as_array()
            .unwrap()
            .contains(&read_p1),
        "{grants_listed}"
    );
    author.get(&format!("{policies}/p1")).await.ok(200);
    let on_catalog = json!({"target": {"type": "catalog"}});
    author
        .put(&format!("{policies}/p1/mappings"), &on_catalog)
        .await
        .error(403, "ForbiddenException");
    // POLICY_ATTACH is granted on a policy only, as the management API's enums say: on
    // a namespace it is a 400 that changes nothing, as is a privilege of another type.
    let author_grants = format!("{MGMT}/catalogs/default/catalog-roles/author_role/grants");
    let before = root.get(&author_grants).await.ok(200).json();
    for misfit in [
        on_namespace("POLICY_ATTACH"),
        json!({"type": "catalog", "privilege": "TABLE_ATTACH_POLICY"}),
        json!({"type": "table", "namespace": ["db"], "tableName": "t", "privilege": "TABLE_CREATE"}),
        json!({"type": "view", "namespace": ["db"], "viewName": "v", "privilege": "TABLE_READ_DATA"}),
        json!({"type": "policy", "namespace": ["db"], "policyName": "p1", "privilege": "POLICY_CREATE"}),
    ] {
        let refused = root
            .put(&author_grants, &json!({ "grant": misfit }))
            .await
            .error(400, "BadRequestException");
        assert!(refused.contains("cannot be granted on a"), "{refused}");
    }
    assert_eq!(root.get(&author_grants).await.ok(200).json(), before);
    // Attaching needs POLICY_ATTACH on the policy and the target's ATTACH_POLICY.
    let (id, secret) = principal_with(
        &root,
        "attacher",
        "default",
        &[
            json!({"type": "policy", "namespace": ["db"], "policyName": "p1",
                "privilege": "POLICY_ATTACH"}),
            on_namespace("NAMESPACE_ATTACH_POLICY"),
        ],
    )
    .await;
    let attacher = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    attacher
        .put(&format!("{policies}/p1/mappings"), &on_catalog)
        .await
        .error(403, "ForbiddenException");
    let on_db = json!({"target": {"type": "namespace", "path": ["db"]}});
    attacher
        .put(&format!("{policies}/p1/mappings"), &on_db)
        .await
        .ok(204);
    let on_other = json!({"target": {"type": "namespace", "path": ["other"]}});
    attacher
        .put(&format!("{policies}/p1/mappings"), &on_other)
        .await
        .error(403, "ForbiddenException");
    // What applies to a namespace needs its NAMESPACE_READ_PROPERTIES.
    let applicable = "/api/catalog/polaris/v1/default/applicable-policies?namespace=db";
    attacher
        .get(applicable)
        .await
        .error(403, "ForbiddenException");
    let applied = root.get(applicable).await.ok(200).json();
    assert_eq!(applied["applicable-policies"][0]["name"], "p1");
    // Dropping needs POLICY_DROP.
    author
        .delete(&format!("{policies}/p1?detach-all=true"))
        .await
        .error(403, "ForbiddenException");
    root.delete(&format!("{policies}/p1?detach-all=true"))
        .await
        .ok(204);
}

#[tokio::test]
async fn a_catalog_admin_cannot_reach_beyond_its_catalog() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    root.post(
        &format!("{MGMT}/catalogs"),
        &json!({"catalog": {"name": "b", "type": "INTERNAL", "properties": {}}}),
    )
    .await
    .ok(201);
    let (id, secret) = principal_with(
        &root,
        "admin_a",
        "default",
        &[json!({"type": "catalog", "privilege": "CATALOG_MANAGE_ACCESS"})],
    )
    .await;
    let admin = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    // Within its catalog: roles and grants.
    admin
        .post(
            &format!("{MGMT}/catalogs/default/catalog-roles"),
            &json!({"catalogRole": {"name": "analysts"}}),
        )
        .await
        .ok(201);
    admin
        .put(
            &format!("{MGMT}/catalogs/default/catalog-roles/analysts/grants"),
            &json!({"grant": {"type": "catalog", "privilege": "TABLE_READ_DATA"}}),
        )
        .await
        .ok(201);
    // Not in catalog b, not service_admin, not principals or their secrets.
    let forbidden = [
        admin
            .post(
                &format!("{MGMT}/catalogs/b/catalog-roles"),
                &json!({"catalogRole": {"name": "mine"}}),
            )
            .await,
        admin
            .put(
                &format!("{MGMT}/catalogs/b/catalog-roles/catalog_admin/grants"),
                &json!({"grant": {"type": "catalog", "privilege": "CATALOG_MANAGE_CONTENT"}}),
            )
            .await,
        admin
            .put(
                &format!("{MGMT}/principals/admin_a/principal-roles"),
                &json!({"principalRole": {"name": "service_admin"}}),
            )
            .await,
        admin
            .put(
                &format!("{MGMT}/principal-roles/service_admin/catalog-roles/default"),
                &json!({"catalogRole": {"name": "analysts"}}),
            )
            .await,
        admin.get(&format!("{MGMT}/principals")).await,
        admin
            .post(&format!("{MGMT}/principals/root/rotate"), &json!({}))
            .await,
        admin.get(&format!("{MGMT}/catalogs/b/catalog-roles")).await,
    ];
    for r in forbidden {
        r.error(403, "ForbiddenException");
    }
    // Its own catalog's configuration, but no way to learn which other catalogs exist:
    // catalog b (there) and catalog nope (not there) get the same answers.
    let config = admin.get("/v1/config?warehouse=default").await.ok(200);
    assert_eq!(config.json()["overrides"]["prefix"], "default");
    for name in ["b", "nope"] {
        let config = admin
            .get(&format!("/v1/config?warehouse={name}"))
            .await
            .ok(200);
        assert_eq!(config.json()["overrides"]["prefix"], name);
        admin
            .get(&format!("/v1/{name}/namespaces"))
            .await
            .error(403, "ForbiddenException");
    }
    root.get("/v1/config?warehouse=b").await.ok(200);
    root.get("/v1/config?warehouse=nope")
        .await
        .error(404, "NotFoundException");
    // It still cannot read data: managing access is not using it.
    admin
        .get(&tables_url(&["db"]))
        .await
        .error(403, "ForbiddenException");
}

/// A catalog admin may change its catalog's properties, but not where its files lie nor
/// the keys they are reached with: through vended credentials that would reach another
/// catalog's files, or the server's own keys.
#[tokio::test]
async fn a_catalog_admin_cannot_move_its_catalogs_files() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    let admin = signed_in(
        &root,
        "admin_d",
        &[
            json!({"type": "catalog", "privilege": "CATALOG_WRITE_PROPERTIES"}),
            json!({"type": "catalog", "privilege": "CATALOG_READ_PROPERTIES"}),
        ],
    )
    .await;
    let url = format!("{MGMT}/catalogs/default");
    let before = root.get(&url).await.ok(200).json();
    let version = before["entityVersion"].clone();
    let base = before["properties"]["default-base-location"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_string();
    let mut storage = before["storageConfigInfo"].clone();
    let parent = base.rsplit_once('/').unwrap().0;
    storage["allowedLocations"] = json!([format!("{parent}/elsewhere")]);
    for body in [
        json!({ "currentEntityVersion": version, "storageConfigInfo": storage }),
        json!({ "currentEntityVersion": version,
                "properties": { "default-base-location": format!("{parent}/another-catalog") } }),
    ] {
        let r = admin.put(&url, &body).await;
        assert!(r.body.contains("service_admin"), "{}", r.body);
        r.error(403, "ForbiddenException");
    }
    assert_eq!(root.get(&url).await.ok(200).json(), before);
    // A listing shows the storage configuration only to those who may load it.
    let reader = signed_in(
        &root,
        "reader_d",
        &[json!({"type": "catalog", "privilege": "TABLE_READ_DATA"})],
    )
    .await;
    let listed_by = |list: Value| {
        let catalogs = list["catalogs"].as_array().unwrap().clone();
        catalogs
            .into_iter()
            .find(|c| c["name"] == "default")
            .unwrap()
    };
    let seen = listed_by(reader.get(&format!("{MGMT}/catalogs")).await.ok(200).json());
    assert_eq!(
        seen["storageConfigInfo"],
        json!({ "storageType": before["storageConfigInfo"]["storageType"] })
    );
    assert_eq!(
        seen["properties"],
        json!({ "default-base-location": before["properties"]["default-base-location"] })
    );
    reader.get(&url).await.error(403, "ForbiddenException");
    let seen = listed_by(admin.get(&format!("{MGMT}/catalogs")).await.ok(200).json());
    assert_eq!(seen, before);
    // Its properties, the same storage configuration, and a base moved within the
    // allowed locations are its own to change.
    let updated = admin
        .put(
            &url,
            &json!({ "currentEntityVersion": version,
                     "storageConfigInfo": before["storageConfigInfo"],
                     "properties": { "owner": "d", "default-base-location": format!("{base}/moved") } }),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(updated["properties"]["owner"], "d");
    // The service admin may change the storage configuration.
    let mut storage = updated["storageConfigInfo"].clone();
    storage["allowedLocations"] = json!([format!("{base}/more")]);
    root.put(
        &url,
        &json!({ "currentEntityVersion": updated["entityVersion"], "storageConfigInfo": storage }),
    )
    .await
    .ok(200);
}

/// A retried request that made a secret replays its answer without the secret (shown
/// once), and a key is its sender's: another principal sending the same request with it
/// gets a 422, not the answer the first one got.
#[tokio::test]
async fn idempotent_retries_never_show_a_secret_twice_nor_to_another_principal() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    let other = signed_in(
        &root,
        "bystander",
        &[json!({"type": "catalog", "privilege": "CATALOG_READ_PROPERTIES"})],
    )
    .await;
    let key = "0190c1d2-0000-7000-8000-00000000a001";
    let create = json!({"principal": {"name": "etl"}});
    let first = root
        .post_keyed(&format!("{MGMT}/principals"), &create, key)
        .await
        .ok(201)
        .json();
    let secret = first["credentials"]["clientSecret"]
        .as_str()
        .unwrap()
        .to_string();
    let again = root
        .post_keyed(&format!("{MGMT}/principals"), &create, key)
        .await;
    assert_eq!(
        again.header("idempotency-replayed").as_deref(),
        Some("true")
    );
    let again = again.ok(201).json();
    assert_eq!(again["principal"], first["principal"]);
    assert_eq!(
        again["credentials"]["clientId"],
        first["credentials"]["clientId"]
    );
    assert!(
        again["credentials"].get("clientSecret").is_none(),
        "{again}"
    );
    assert!(!again.to_string().contains(&secret));
    other
        .post_keyed(&format!("{MGMT}/principals"), &create, key)
        .await
        .error(422, "UnprocessableEntityException");

    let rotate = format!("{MGMT}/principals/etl/rotate");
    let key = "0190c1d2-0000-7000-8000-00000000a002";
    let rotated = root
        .post_keyed(&rotate, &json!({}), key)
        .await
        .ok(200)
        .json();
    let new_secret = rotated["credentials"]["clientSecret"]
        .as_str()
        .unwrap()
        .to_string();
    let replayed = root.post_keyed(&rotate, &json!({}), key).await.ok(200);
    assert!(!replayed.body.contains(&new_secret), "{}", replayed.body);
    let r = other.post_keyed(&rotate, &json!({}), key).await;
    assert!(!r.body.contains(&new_secret), "{}", r.body);
    r.error(422, "UnprocessableEntityException");
    // The secret the first answer showed is the one that works.
    let id = first["credentials"]["clientId"].as_str().unwrap();
    token(&s, id, &new_secret, "catalog").await;
}

#[tokio::test]
async fn revocations_take_effect_on_the_next_request() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    root.post(&format!("{V1}/namespaces"), &json!({"namespace": ["db"]}))
        .await
        .ok(200);
    let grant = on_namespace("NAMESPACE_READ_PROPERTIES");
    let (id, secret) = principal_with(&root, "p", "default", std::slice::from_ref(&grant)).await;
    let p = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    p.get(&ns_url(&["db"])).await.ok(200);
    root.post(
        &format!("{MGMT}/catalogs/default/catalog-roles/p_role/grants"),
        &json!({"grant": grant}),
    )
    .await
    .ok(204);
    p.get(&ns_url(&["db"]))
        .await
        .error(403, "ForbiddenException");
    root.put(
        &format!("{MGMT}/catalogs/default/catalog-roles/p_role/grants"),
        &json!({"grant": grant}),
    )
    .await
    .ok(201);
    p.get(&ns_url(&["db"])).await.ok(200);
    root.delete(&format!("{MGMT}/principals/p/principal-roles/p_role"))
        .await
        .ok(204);
    p.get(&ns_url(&["db"]))
        .await
        .error(403, "ForbiddenException");
    // A grant listing shows what is granted, and bad grants are 400s.
    let grants = root
        .get(&format!(
            "{MGMT}/catalogs/default/catalog-roles/p_role/grants"
        ))
        .await
        .ok(200)
        .json();
    assert_eq!(grants["grants"], json!([grant]));
    root.put(
        &format!("{MGMT}/catalogs/default/catalog-roles/p_role/grants"),
        &json!({"grant": {"type": "table", "namespace": ["db"], "privilege": "TABLE_READ_DATA"}}),
    )
    .await
    .error(400, "BadRequestException");
    root.put(
        &format!("{MGMT}/catalogs/default/catalog-roles/p_role/grants"),
        &json!({"grant": {"type": "catalog", "privilege": "EAT_TABLES"}}),
    )
    .await
    .error(400, "BadRequestException");
    // A grant names something that exists (404 otherwise, as in Polaris): nothing is
    // granted on a name that a later table could take.
    for (bad, missing) in [
        (
            json!({"type": "namespace", "namespace": ["nope"], "privilege": "NAMESPACE_LIST"}),
            "NoSuchNamespaceException",
        ),
        (
            json!({"type": "table", "namespace": ["db"], "tableName": "nope", "privilege": "TABLE_READ_DATA"}),
            "NoSuchTableException",
        ),
        (
            json!({"type": "view", "namespace": ["db"], "viewName": "nope", "privilege": "VIEW_LIST"}),
            "NoSuchViewException",
        ),
    ] {
        root.put(
            &format!("{MGMT}/catalogs/default/catalog-roles/p_role/grants"),
            &json!({ "grant": bad }),
        )
        .await
        .error(404, missing);
    }
    let after = root
        .get(&format!(
            "{MGMT}/catalogs/default/catalog-roles/p_role/grants"
        ))
        .await
        .ok(200)
        .json();
    assert_eq!(after["grants"], json!([grant]));
}

#[tokio::test]
async fn secrets_rotate_reset_and_tokens_survive_a_restart() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    let (id, old) = principal_with(&root, "svc", "default", &[]).await;
    let listed = root.get(&format!("{MGMT}/principals")).await.ok(200);
    assert!(
        !listed.body.contains(&old),
        "a listing never shows a secret"
    );
    let rotated = root
        .post(&format!("{MGMT}/principals/svc/rotate"), &json!({}))
        .await
        .ok(200)
        .json();
    let new = rotated["credentials"]["clientSecret"]
        .as_str()
        .unwrap()
        .to_string();
    // A token lives as long as the secret it was issued with: the old one is the
    // secondary now, so its tokens still work.
    let with_old = As::new(&s, &token(&s, &id, &old, "catalog").await);
    let with_new = As::new(&s, &token(&s, &id, &new, "catalog").await);
    with_old.get("/v1/config").await.ok(200);
    // A reset makes the credentials itself: one that names its own is refused, and the
    // credentials stay as they were.
    for own in [
        json!({ "clientSecret": "chosen-by-the-caller-0123456789" }),
        json!({ "clientId": id }),
    ] {
        root.post(&format!("{MGMT}/principals/svc/reset"), &own)
            .await
            .error(400, "BadRequestException");
    }
    token(&s, &id, &new, "catalog").await;
    let reset = root
        .post(&format!("{MGMT}/principals/svc/reset"), &json!({}))
        .await
        .ok(200)
        .json();
    let newest = reset["credentials"]["clientSecret"].as_str().unwrap();
    for gone in [&old, &new] {
        let r = token_response(
            &s,
            &[
                ("grant_type", "client_credentials"),
                ("client_id", &id),
                ("client_secret", gone),
            ],
        )
        .await;
        assert_eq!(r.status, 401, "{}", r.body);
    }
    // Nor do the tokens issued with them, nor can they be exchanged for new ones.
    for gone in [&with_old, &with_new] {
        let r = gone.get("/v1/config").await;
        assert!(r.body.contains("no longer valid"), "{}", r.body);
        r.error(401, "NotAuthorizedException");
        let subject = gone.bearer.trim_start_matches("Bearer ");
        let r = exchange(&s, subject).await;
        assert_eq!(r.status, 400, "{}", r.body);
    }
    let fresh = token(&s, &id, newest, "catalog").await;
    // The signing key is in the store: another server over the same data (a restart,
    // or another node) accepts the token. (On PostgreSQL every test has a schema of its
    // own, so this part runs on the embedded store.)
    if std::env::var("FLOE_TEST_DATABASE_URL").is_err() {
        let data_dir = s.data_dir();
        let again = secure_server_with(|c| c.data_dir = data_dir).await;
        As::new(&again, &fresh).get("/v1/config").await.ok(200);
    }
}

#[tokio::test]
async fn entities_update_by_version_and_list_who_holds_a_role() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    let (id, secret) = principal_with(&root, "p", "default", &[]).await;
    let entities = [
        format!("{MGMT}/principals/p"),
        format!("{MGMT}/principal-roles/p_role"),
        format!("{MGMT}/catalogs/default/catalog-roles/p_role"),
    ];
    for url in &entities {
        let before = root.get(url).await.ok(200).json();
        let version = before["entityVersion"].as_i64().unwrap();
        // A stale version is a 409 and changes nothing.
        root.put(
            url,
            &json!({"currentEntityVersion": version + 5, "properties": {"k": "x"}}),
        )
        .await
        .error(409, "CommitFailedException");
        assert_eq!(root.get(url).await.ok(200).json(), before, "{url}");
        // A malformed body is a 400.
        root.put(url, &json!({"properties": {"k": "x"}}))
            .await
            .error_status(400);
        let updated = root
            .put(
                url,
                &json!({"currentEntityVersion": version, "properties": {"k": "v"}}),
            )
            .await
            .ok(200)
            .json();
        assert_eq!(updated["properties"], json!({"k": "v"}), "{url}");
        assert_eq!(updated["entityVersion"], version + 1, "{url}");
        assert_eq!(root.get(url).await.ok(200).json(), updated, "{url}");
    }
    // Whoever is not an admin cannot update anything.
    let p = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    for url in &entities {
        p.put(url, &json!({"currentEntityVersion": 2, "properties": {}}))
            .await
            .error(403, "ForbiddenException");
    }
    let holders = root
        .get(&format!("{MGMT}/principal-roles/p_role/principals"))
        .await
        .ok(200)
        .json();
    assert_eq!(names_of(&holders["principals"]), ["p"]);
    let holders = root
        .get(&format!(
            "{MGMT}/catalogs/default/catalog-roles/p_role/principal-roles"
        ))
        .await
        .ok(200)
        .json();
    assert_eq!(names_of(&holders["roles"]), ["p_role"]);
    root.get(&format!("{MGMT}/principal-roles/nope/principals"))
        .await
        .error_status(404);
    // A catalog role of a catalog that does not exist: the 404 names the catalog.
    for r in [
        root.put(
            &format!("{MGMT}/principal-roles/p_role/catalog-roles/nocat"),
            &json!({"catalogRole": {"name": "p_role"}}),
        )
        .await,
        root.delete(&format!("{MGMT}/catalogs/nocat/catalog-roles/p_role"))
            .await,
    ] {
        assert!(
            r.body.contains("Catalog does not exist: nocat"),
            "{}",
            r.body
        );
        r.error_status(404);
    }
    // Created roles come back in the 201 (Polaris's CLI reads them).
    let created = root
        .post(
            &format!("{MGMT}/principal-roles"),
            &json!({"principalRole": {"name": "fresh", "properties": {"a": "b"}}}),
        )
        .await
        .ok(201)
        .json();
    assert_eq!(created["name"], "fresh");
    assert_eq!(created["entityVersion"], 1);
    // Polaris's policy API: what applies to a catalog needs CATALOG_READ_PROPERTIES; a
    // catalog that does not exist is a 404.
    let policies = "/api/catalog/polaris/v1/default/applicable-policies";
    let none = root.get(policies).await.ok(200).json();
    assert_eq!(none["applicable-policies"], json!([]));
    p.get(policies).await.error(403, "ForbiddenException");
    root.get("/api/catalog/polaris/v1/nope/applicable-policies")
        .await
        .error_status(404);
    p.get(&format!("{MGMT}/principal-roles/p_role/principals"))
        .await
        .error(403, "ForbiddenException");
}

fn names_of(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn rotating_the_signing_key_keeps_issued_tokens_valid() {
    let s = secure_server().await;
    let before = token(&s, ROOT_ID, ROOT_SECRET, "catalog").await;
    let root = As::new(&s, &before);
    let (id, secret) = principal_with(&root, "p", "default", &[]).await;
    let p = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    p.post(&format!("{MGMT}/signing-keys/rotate"), &json!({}))
        .await
        .error(403, "ForbiddenException");
    let rotated = root
        .post(&format!("{MGMT}/signing-keys/rotate"), &json!({}))
        .await
        .ok(200)
        .json();
    let kid = rotated["kid"].as_str().unwrap().to_string();
    assert_eq!(
        rotated["verifying"].as_array().unwrap().len(),
        2,
        "{rotated}"
    );
    // The token signed before still works; a new one is signed with the new key.
    root.get(&format!("{V1}/namespaces")).await.ok(200);
    let after = token(&s, ROOT_ID, ROOT_SECRET, "catalog").await;
    let header = jsonwebtoken::decode_header(&after).unwrap();
    assert_eq!(header.kid.as_deref(), Some(kid.as_str()));
    As::new(&s, &after)
        .get(&format!("{V1}/namespaces"))
        .await
        .ok(200);
    // A leaked key: retired at once, and every token signed so far with it.
    let newest = As::new(&s, &after);
    newest
        .post(
            &format!("{MGMT}/signing-keys/rotate?retirePrevious=maybe"),
            &json!({}),
        )
        .await
        .error(400, "BadRequestException");
    let retired = newest
        .post(
            &format!("{MGMT}/signing-keys/rotate?retirePrevious=true"),
            &json!({}),
        )
        .await
        .ok(200)
        .json();
    assert_eq!(
        retired["verifying"].as_array().unwrap().len(),
        1,
        "{retired}"
    );
    for old in [&root, &p, &newest] {
        old.get(&format!("{V1}/namespaces"))
            .await
            .error(401, "NotAuthorizedException");
    }
    let fresh = token(&s, ROOT_ID, ROOT_SECRET, "catalog").await;
    As::new(&s, &fresh)
        .get(&format!("{V1}/namespaces"))
        .await
        .ok(200);
}

#[tokio::test]
async fn notifications_need_polaris_five_privileges_on_the_catalog() {
    let s = secure_server().await;
    let root = As::new(&s, &token(&s, ROOT_ID, ROOT_SECRET, "catalog").await);
    root.post(
        &format!("{MGMT}/catalogs"),
        &json!({"catalog": {"type": "EXTERNAL", "name": "mirror", "properties": {}}}),
    )
    .await
    .ok(201);
    let privileges = [
        "TABLE_CREATE",
        "TABLE_WRITE_PROPERTIES",
        "TABLE_DROP",
        "NAMESPACE_CREATE",
        "NAMESPACE_DROP",
    ];
    let on_catalog = |privileges: &[&str]| -> Vec<Value> {
        privileges
            .iter()
            .map(|p| json!({"type": "catalog", "privilege": p}))
            .collect()
    };
    let (id, secret) =
        principal_with(&root, "partial", "mirror", &on_catalog(&privileges[..4])).await;
    let partial = As::new(&s, &token(&s, &id, &secret, "catalog").await);
    let (id, secret) = principal_with(&root, "sender", "mirror", &on_catalog(&privileges)).await;
    let sender = As::new(&s, &token(&s, &id, &secret, "catalog").await);

    // A DROP of a table that is not there reads no file: only the privileges decide.
    let url = "/v1/mirror/namespaces/db/tables/t/notifications";
    let drop = |timestamp: i64| {
        json!({"notification-type": "DROP", "payload": {"table-name": "t",
            "timestamp": timestamp, "table-uuid": "u",
            "metadata-location": "file:///nowhere/m.json"}})
    };
    let message = partial
        .post(url, &drop(2))
        .await
        .error(403, "ForbiddenException");
    assert!(message.contains("NAMESPACE_DROP"), "{message}");
    // The refused one admitted nothing: an older timestamp still goes through,
    // and only then is one older than it refused.
    sender.post(url, &drop(1)).await.ok(204);
    sender
        .post(url, &drop(0))
        .await
        .error(409, "AlreadyExistsException");
}
