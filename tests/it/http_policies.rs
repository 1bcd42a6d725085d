//! Polaris's policy API over HTTP: policies, their attachments, what applies where, and
//! how drops of namespaces and tables meet them. Runs on every store like the other
//! HTTP suites.

use crate::common::*;
use serde_json::{json, Value};

const POLARIS: &str = "/api/catalog/polaris/v1/default";

fn policies_url(namespace: &[&str]) -> String {
    format!("{POLARIS}/namespaces/{}/policies", ns(namespace))
}

fn policy_url(namespace: &[&str], name: &str) -> String {
    format!("{}/{name}", policies_url(namespace))
}

fn create_body(name: &str, policy_type: &str) -> Value {
    json!({ "name": name, "type": policy_type, "description": format!("{name}'s"),
        "content": "{\"enable\":true}" })
}

async fn create(s: &Server, name: &str, policy_type: &str) -> Value {
    s.post(&policies_url(&["db"]), &create_body(name, policy_type))
        .await
        .ok(200)
        .json()
}

fn table_like(path: &[&str]) -> Value {
    json!({ "target": { "type": "table-like", "path": path } })
}

fn namespace_target(path: &[&str]) -> Value {
    json!({ "target": { "type": "namespace", "path": path } })
}

fn catalog_target() -> Value {
    json!({ "target": { "type": "catalog" } })
}

/// The names of what applies (with whether inherited), for a namespace (`None`: the
/// catalog) and a table name.
async fn applicable(
    s: &Server,
    namespace: Option<&[&str]>,
    table: Option<&str>,
    policy_type: Option<&str>,
) -> Vec<(String, bool)> {
    let mut query = Vec::new();
    if let Some(namespace) = namespace {
        query.push(format!("namespace={}", ns(namespace)));
    }
    if let Some(table) = table {
        query.push(format!("target-name={table}"));
    }
    if let Some(policy_type) = policy_type {
        query.push(format!("policyType={policy_type}"));
    }
    let body = s
        .get(&format!(
            "{POLARIS}/applicable-policies?{}",
            query.join("&")
        ))
        .await
        .ok(200)
        .json();
    assert!(body["next-page-token"].is_null(), "{body}");
    body["applicable-policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            assert_eq!(p["namespace"], json!(["db"]), "{p}");
            (
                p["name"].as_str().unwrap().to_string(),
                p["inherited"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn named(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(n, i)| (n.to_string(), *i)).collect()
}

#[tokio::test]
async fn policies_are_created_checked_updated_and_listed() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    let created = create(&s, "p1", "system.data-compaction").await;
    assert_eq!(
        created,
        json!({ "policy": { "policy-type": "system.data-compaction", "inheritable": true,
            "name": "p1", "description": "p1's", "content": "{\"enable\":true}", "version": 0 } })
    );
    assert_eq!(
        s.get(&policy_url(&["db"], "p1")).await.ok(200).json(),
        created
    );
    // Also at the root, as Polaris's clients may call it.
    s.get("/polaris/v1/default/namespaces/db/policies/p1")
        .await
        .ok(200);
    create(&s, "p2", "system.snapshot-expiry").await;
    let listed = s.get(&policies_url(&["db"])).await.ok(200).json();
    assert_eq!(
        listed,
        json!({ "identifiers": [{"namespace": ["db"], "name": "p1"},
            {"namespace": ["db"], "name": "p2"}], "next-page-token": null })
    );
    let expiry = s
        .get(&format!(
            "{}?policyType=system.snapshot-expiry",
            policies_url(&["db"])
        ))
        .await
        .ok(200)
        .json();
    assert_eq!(
        expiry["identifiers"],
        json!([{"namespace": ["db"], "name": "p2"}])
    );

    // Refusals, each changing nothing.
    let before = s.get(&policies_url(&["db"])).await.ok(200).json();
    let refused = [
        (
            create_body("p.q", "system.data-compaction"),
            400,
            "BadRequestException",
            "must match",
        ),
        (
            create_body("", "system.data-compaction"),
            400,
            "BadRequestException",
            "must match",
        ),
        (
            create_body("p3", "system.data_compaction"),
            400,
            "BadRequestException",
            "Unknown policy type",
        ),
        (
            create_body("p3", "custom.mine"),
            400,
            "BadRequestException",
            "Unknown policy type",
        ),
        (
            json!({"name": "p3", "type": "system.data-compaction", "content": "{}"}),
            400,
            "InvalidPolicyException",
            "enable",
        ),
        (
            json!({"name": "p3", "type": "system.data-compaction"}),
            400,
            "InvalidPolicyException",
            "Policy is empty",
        ),
        (
            json!({"name": "p3", "type": "system.data-compaction",
                "content": "{\"enable\":true,\"extra\":1}"}),
            400,
            "InvalidPolicyException",
            "extra",
        ),
        (
            json!({"name": "p3", "type": "system.snapshot-expiry",
                "content": "x".repeat(65 * 1024)}),
            400,
            "BadRequestException",
            "at most",
        ),
        (
            json!({"type": "system.data-compaction"}),
            400,
            "BadRequestException",
            "name",
        ),
        (
            create_body("p1", "system.snapshot-expiry"),
            409,
            "AlreadyExistsException",
            "p1",
        ),
    ];
    for (body, status, error_type, says) in refused {
        let message = s
            .post(&policies_url(&["db"]), &body)
            .await
            .error(status, error_type);
        assert!(message.contains(says), "{body}: {message}");
    }
    let message = s
        .post(
            &policies_url(&["nope"]),
            &create_body("p3", "system.data-compaction"),
        )
        .await
        .error(404, "NoSuchNamespaceException");
    assert!(message.contains("nope"), "{message}");
    assert_eq!(s.get(&policies_url(&["db"])).await.ok(200).json(), before);
    s.get(&policy_url(&["db"], "p9"))
        .await
        .error(404, "NoSuchPolicyException");
    s.get(&policies_url(&["nope"]))
        .await
        .error(404, "NoSuchNamespaceException");

    // Updates name the version they were made from.
    let update = |version: Value, content: &str| json!({ "description": "new", "content": content, "current-policy-version": version });
    let url = policy_url(&["db"], "p1");
    let message = s
        .put(&url, &update(json!(3), "{\"enable\":false}"))
        .await
        .error(409, "PolicyVersionMismatchException");
    assert!(message.contains("current version is 0"), "{message}");
    s.put(&url, &update(Value::Null, "{\"enable\":false}"))
        .await
        .error(400, "BadRequestException");
    s.put(&url, &update(json!(0), "{\"enable\":1}"))
        .await
        .error(400, "InvalidPolicyException");
    assert_eq!(s.get(&url).await.ok(200).json(), created);
    let updated = s
        .put(&url, &update(json!(0), "{\"enable\":false}"))
        .await
        .ok(200)
        .json();
    assert_eq!(updated["policy"]["version"], 1);
    assert_eq!(updated["policy"]["description"], "new");
    assert_eq!(updated["policy"]["content"], "{\"enable\":false}");
    // The same again changes nothing, not even the version.
    let again = s
        .put(&url, &update(json!(1), "{\"enable\":false}"))
        .await
        .ok(200)
        .json();
    assert_eq!(again, updated);
    s.put(
        &policy_url(&["db"], "p9"),
        &update(json!(0), "{\"enable\":true}"),
    )
    .await
    .error(404, "NoSuchPolicyException");
}

#[tokio::test]
async fn attachments_apply_down_the_tree_nearest_first() {
    let s = Server::start().await;
    for namespace in [&["db"][..], &["ns2"], &["ns2", "inner"]] {
        s.create_namespace(namespace).await;
    }
    s.create_table(&["ns2"], "t1").await;
    s.create_view(&["ns2"], "v").await;
    create(&s, "p1", "system.data-compaction").await;
    create(&s, "p2", "system.metadata-compaction").await;
    create(&s, "p3", "system.orphan-file-removal").await;
    create(&s, "p4", "system.data-compaction").await;
    let mappings = |name: &str| format!("{}/mappings", policy_url(&["db"], name));

    // Polaris's example: p1 on the catalog, p2 on ns2, p3 on ns2.t1, all made in db.
    s.put(&mappings("p1"), &catalog_target()).await.ok(204);
    // A null path (or parameters) is none; a catalog target needs no path.
    let null_path = json!({"target": {"type": "catalog", "path": null}, "parameters": null});
    s.put(&mappings("p1"), &null_path).await.ok(204);
    s.put(&mappings("p2"), &namespace_target(&["ns2"]))
        .await
        .ok(204);
    let with_parameters = json!({ "target": { "type": "table-like", "path": ["ns2", "t1"] },
        "parameters": { "target-file-size": "512MB" } });
    s.put(&mappings("p3"), &with_parameters).await.ok(204);
    assert_eq!(
        applicable(&s, None, None, None).await,
        named(&[("p1", false)])
    );
    assert_eq!(
        applicable(&s, Some(&["ns2"]), None, None).await,
        named(&[("p1", true), ("p2", false)])
    );
    assert_eq!(
        applicable(&s, Some(&["ns2"]), Some("t1"), None).await,
        named(&[("p1", true), ("p2", true), ("p3", false)])
    );
    assert_eq!(
        applicable(&s, Some(&["ns2", "inner"]), None, None).await,
        named(&[("p1", true), ("p2", true)])
    );
    assert_eq!(
        applicable(
            &s,
            Some(&["ns2"]),
            Some("t1"),
            Some("system.metadata-compaction")
        )
        .await,
        named(&[("p2", true)])
    );
    // An unknown type filters nothing, as in Polaris.
    assert_eq!(applicable(&s, None, None, Some("nope")).await.len(), 1);
    let whole = s
        .get(&format!(
            "{POLARIS}/applicable-policies?namespace=ns2&target-name=t1"
        ))
        .await
        .ok(200)
        .json();
    let p3 = &whole["applicable-policies"][2];
    assert_eq!(p3["policy-type"], "system.orphan-file-removal");
    assert_eq!(p3["content"], "{\"enable\":true}");
    assert_eq!(p3["version"], 0);

    // One policy of a type per target; the nearest one wins below it.
    let message = s
        .put(&mappings("p4"), &catalog_target())
        .await
        .error(409, "PolicyMappingAlreadyExistsException");
    assert!(
        message.contains("(system.data-compaction) for default"),
        "{message}"
    );
    s.put(&mappings("p4"), &namespace_target(&["ns2"]))
        .await
        .ok(204);
    assert_eq!(
        applicable(&s, Some(&["ns2", "inner"]), None, None).await,
        named(&[("p4", true), ("p2", true)])
    );
    // Attaching the same policy again replaces its parameters.
    s.put(&mappings("p3"), &table_like(&["ns2", "t1"]))
        .await
        .ok(204);

    // Targets that are not there, or not Iceberg tables.
    for (body, status, error_type) in [
        (table_like(&["ns2", "v"]), 404, "NoSuchTableException"),
        (table_like(&["ns2", "nope"]), 404, "NoSuchTableException"),
        (namespace_target(&["nope"]), 404, "NoSuchNamespaceException"),
        (
            json!({"target": {"type": "view", "path": ["ns2", "v"]}}),
            400,
            "BadRequestException",
        ),
        (
            json!({"target": {"type": "namespace"}}),
            400,
            "BadRequestException",
        ),
        (
            json!({"target": {"type": "namespace", "path": null}}),
            400,
            "BadRequestException",
        ),
        (
            json!({"target": {"type": "table-like", "path": ["t1"]}}),
            400,
            "BadRequestException",
        ),
        (json!({"parameters": {}}), 400, "BadRequestException"),
    ] {
        s.put(&mappings("p2"), &body)
            .await
            .error(status, error_type);
    }
    s.put(
        &format!("{}/mappings", policy_url(&["db"], "p9")),
        &catalog_target(),
    )
    .await
    .error(404, "NoSuchPolicyException");
    s.get(&format!(
        "{POLARIS}/applicable-policies?namespace=ns2&target-name=v"
    ))
    .await
    .error(404, "NoSuchTableException");
    s.get(&format!("{POLARIS}/applicable-policies?namespace=nope"))
        .await
        .error(404, "NoSuchNamespaceException");

    // Detach: only what is attached.
    s.post(&mappings("p2"), &catalog_target())
        .await
        .error(404, "NoSuchMappingException");
    s.post(&mappings("p4"), &namespace_target(&["ns2"]))
        .await
        .ok(204);
    assert_eq!(
        applicable(&s, Some(&["ns2"]), None, None).await,
        named(&[("p1", true), ("p2", false)])
    );

    // A policy still attached drops only with detach-all.
    let message = s
        .delete(&policy_url(&["db"], "p1"))
        .await
        .error(400, "PolicyInUseException");
    assert!(message.contains("detach-all"), "{message}");
    assert_eq!(
        applicable(&s, None, None, None).await,
        named(&[("p1", false)])
    );
    s.delete(&format!("{}?detach-all=true", policy_url(&["db"], "p1")))
        .await
        .ok(204);
    assert_eq!(applicable(&s, None, None, None).await, named(&[]));
    s.get(&policy_url(&["db"], "p1"))
        .await
        .error(404, "NoSuchPolicyException");
    s.delete(&policy_url(&["db"], "p1"))
        .await
        .error(404, "NoSuchPolicyException");
    s.delete(&format!("{}?detach-all=maybe", policy_url(&["db"], "p2")))
        .await
        .error(400, "BadRequestException");
}

#[tokio::test]
async fn drops_of_namespaces_and_tables_take_their_attachments() {
    let s = Server::start().await;
    s.create_namespace(&["db"]).await;
    s.create_namespace(&["ns2"]).await;
    s.create_table(&["ns2"], "t1").await;
    create(&s, "p1", "system.snapshot-expiry").await;
    create(&s, "p2", "system.data-compaction").await;
    let mappings = |name: &str| format!("{}/mappings", policy_url(&["db"], name));
    s.put(&mappings("p1"), &namespace_target(&["ns2"]))
        .await
        .ok(204);
    s.put(&mappings("p2"), &table_like(&["ns2", "t1"]))
        .await
        .ok(204);

    // A namespace holding policies is not empty.
    let message = s
        .delete(&ns_url(&["db"]))
        .await
        .error(409, "NamespaceNotEmptyException");
    assert!(message.contains("policies"), "{message}");
    s.get(&policy_url(&["db"], "p1")).await.ok(200);

    // A dropped table's attachments no longer count: a new table of its name starts with
    // none, and the policy drops without detach-all.
    s.delete(&table_url(&["ns2"], "t1")).await.ok(204);
    s.create_table(&["ns2"], "t1").await;
    assert_eq!(
        applicable(&s, Some(&["ns2"]), Some("t1"), None).await,
        named(&[("p1", true)])
    );
    s.delete(&policy_url(&["db"], "p2")).await.ok(204);

    // A dropped namespace takes its attachments: made again, it has none.
    s.delete(&table_url(&["ns2"], "t1")).await.ok(204);
    s.delete(&ns_url(&["ns2"])).await.ok(204);
    s.create_namespace(&["ns2"]).await;
    assert_eq!(applicable(&s, Some(&["ns2"]), None, None).await, named(&[]));
    s.delete(&policy_url(&["db"], "p1")).await.ok(204);
    // Now empty, db drops.
    s.delete(&ns_url(&["db"])).await.ok(204);
}
