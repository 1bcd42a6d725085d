//! What Floe checks and changes around a forwarded request; pure, unit-tested below.
//!
//! - [`needed`]: the privileges a request needs in the federated catalog, the same ones
//!   the local routes check (`catalog::namespaces`, `objects`, `tables`, `views`, and
//!   `commit::update_privileges` for commits). Namespaces and tables of a federated
//!   catalog do not exist here, so only grants on the catalog itself can allow them (as
//!   in Polaris, whose federated entities resolve to the catalog).
//! - Endpoints that are Floe's own (vended credentials, signing, notifications) are not
//!   forwarded: the remote's credentials are scoped for Floe's principal there, not for
//!   the caller here.
//! - [`scrub`]: the storage credentials a remote puts in a table's answer are removed
//!   for the same reason.

use axum::http::Method;
use iceberg::{TableRequirement, TableUpdate};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::privileges::{Privilege, Securable};
use crate::catalog::commit::update_privileges;
use crate::model::{Ident, IdentBody, InvalidName, Namespace, Rename};

/// Why a request is not forwarded: a 400 with this message, or a 404.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    BadRequest(String),
    NotFound,
}

/// The privileges a request to a federated catalog needs, each on its securable.
pub type Needs = Vec<(Privilege, Securable)>;

fn bad(message: impl Into<String>) -> Refusal {
    Refusal::BadRequest(message.into())
}

/// A name that breaks the rules is a 400, as on the local routes.
impl From<InvalidName> for Refusal {
    fn from(e: InvalidName) -> Self {
        bad(e.to_string())
    }
}

#[derive(Deserialize)]
struct Commit {
    identifier: Option<IdentBody>,
    #[serde(default)]
    requirements: Vec<TableRequirement>,
    #[serde(default)]
    updates: Vec<TableUpdate>,
}

#[derive(Deserialize)]
struct Transaction {
    #[serde(rename = "table-changes")]
    table_changes: Vec<Commit>,
}

fn parse<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T, Refusal> {
    serde_json::from_slice(body).map_err(|e| bad(format!("Malformed {what}: {e}")))
}

/// A commit's privileges on `table`, as a local commit checks them: its updates', and
/// TABLE_CREATE on the namespace when it asserts the table does not exist yet (the
/// second step of a staged create).
fn commit_needs(table: &Ident, commit: &Commit) -> Needs {
    let target = Securable::table(table);
    let mut needs: Needs = update_privileges(&commit.updates)
        .into_iter()
        .map(|p| (p, target.clone()))
        .collect();
    if commit.requirements.contains(&TableRequirement::NotExist) {
        needs.push((
            Privilege::TABLE_CREATE,
            Securable::namespace(&table.namespace),
        ));
    }
    needs
}

/// The privileges `method` on the path after the catalog's prefix (`segments`,
/// percent-decoded) needs, given the request's body and its `purgeRequested` flag.
pub fn needed(
    method: &Method,
    segments: &[&str],
    purge: bool,
    body: &[u8],
) -> Result<Needs, Refusal> {
    use Privilege as P;
    let m = method.clone();
    let (get, head, post, delete) = (
        m == Method::GET,
        m == Method::HEAD,
        m == Method::POST,
        m == Method::DELETE,
    );
    let read = get || head;
    let at_namespace = |raw: &str| Namespace::parse(raw).map(|n| Securable::namespace(&n));
    let at_table = |raw: &str, name: &str| Ident::parse(raw, name).map(|i| Securable::table(&i));
    let one = |p: Privilege, s: Securable| Ok(vec![(p, s)]);
    match segments {
        ["namespaces"] if get => one(P::NAMESPACE_LIST, Securable::Catalog),
        ["namespaces"] if post => one(P::NAMESPACE_CREATE, Securable::Catalog),
        ["namespaces", ns] if read => one(P::NAMESPACE_READ_PROPERTIES, at_namespace(ns)?),
        ["namespaces", ns] if delete => one(P::NAMESPACE_DROP, at_namespace(ns)?),
        ["namespaces", ns, "properties"] if post => {
            one(P::NAMESPACE_WRITE_PROPERTIES, at_namespace(ns)?)
        }
        ["namespaces", ns, "tables"] if get => one(P::TABLE_LIST, at_namespace(ns)?),
        ["namespaces", ns, "tables"] if post => one(P::TABLE_CREATE, at_namespace(ns)?),
        ["namespaces", ns, "register"] if post => one(P::TABLE_CREATE, at_namespace(ns)?),
        ["namespaces", ns, "tables", t] if read => one(P::TABLE_READ_PROPERTIES, at_table(ns, t)?),
        ["namespaces", ns, "tables", t] if post => {
            let table = Ident::parse(ns, t)?;
            let mut commit: Commit = parse(body, "table commit")?;
            if let Some(named) = commit.identifier.take() {
                if named.into_ident()? != table {
                    return Err(bad("The identifier in the body does not match the path"));
                }
            }
            Ok(commit_needs(&table, &commit))
        }
        ["namespaces", ns, "tables", t] if delete => {
            let mut needs = vec![(P::TABLE_DROP, at_table(ns, t)?)];
            if purge {
                needs.push((P::TABLE_WRITE_DATA, at_table(ns, t)?));
            }
            Ok(needs)
        }
        ["namespaces", ns, "tables", t, "metrics"] if post => {
            one(P::TABLE_READ_DATA, at_table(ns, t)?)
        }
        ["namespaces", ns, "tables", t, "plan"] if post => one(P::TABLE_READ_DATA, at_table(ns, t)?),
        ["namespaces", ns, "tables", t, "plan", _] if get || delete => {
            one(P::TABLE_READ_DATA, at_table(ns, t)?)
        }
        ["namespaces", ns, "tables", t, "tasks"] if post => {
            one(P::TABLE_READ_DATA, at_table(ns, t)?)
        }
        ["namespaces", _, "tables", _, which @ ("credentials" | "sign" | "notifications")] => {
            Err(bad(format!(
                "A federated catalog's tables have no {which} endpoint here: the remote catalog's storage credentials are scoped for Floe, not for its callers; read the data with credentials of your own"
            )))
        }
        ["namespaces", ns, "views"] if get => one(P::VIEW_LIST, at_namespace(ns)?),
        ["namespaces", ns, "views"] if post => one(P::VIEW_CREATE, at_namespace(ns)?),
        ["namespaces", ns, "register-view"] if post => one(P::VIEW_CREATE, at_namespace(ns)?),
        ["namespaces", ns, "views", v] if read => {
            one(P::VIEW_READ_PROPERTIES, Ident::parse(ns, v).map(|i| Securable::view(&i))?)
        }
        ["namespaces", ns, "views", v] if post => {
            one(P::VIEW_WRITE_PROPERTIES, Ident::parse(ns, v).map(|i| Securable::view(&i))?)
        }
        ["namespaces", ns, "views", v] if delete => {
            one(P::VIEW_DROP, Ident::parse(ns, v).map(|i| Securable::view(&i))?)
        }
        [kind @ ("tables" | "views"), "rename"] if post => {
            let rename: Rename = parse(body, "rename")?;
            let from = rename.source.into_ident()?;
            let to = rename.destination.into_ident()?;
            let (drop, create, from) = if *kind == "tables" {
                (P::TABLE_DROP, P::TABLE_CREATE, Securable::table(&from))
            } else {
                (P::VIEW_DROP, P::VIEW_CREATE, Securable::view(&from))
            };
            Ok(vec![
                (drop, from),
                (create, Securable::namespace(&to.namespace)),
            ])
        }
        ["transactions", "commit"] if post => {
            let transaction: Transaction = parse(body, "transaction")?;
            if transaction.table_changes.is_empty() {
                return Err(bad("A transaction needs at least one table change"));
            }
            let mut needs = Vec::new();
            for mut change in transaction.table_changes {
                let table = change
                    .identifier
                    .take()
                    .ok_or_else(|| bad("Every table change in a transaction needs an identifier"))?
                    .into_ident()?;
                needs.extend(commit_needs(&table, &change));
            }
            Ok(needs)
        }
        _ => Err(Refusal::NotFound),
    }
}

/// Whether a `config` key of a remote's table answer grants storage access (a key, a
/// token, a signer, a connection string): such keys are removed before the answer
/// reaches the caller. Wide on purpose: a setting removed by mistake costs a client
/// setting of its own, a credential kept would hand out the remote's access.
fn is_credential(key: &str) -> bool {
    const MARKS: [&str; 11] = [
        "secret",
        "token",
        "access-key",
        "key-id",
        "sas",
        "signer",
        "remote-signing",
        "credential",
        "password",
        "connection-string",
        "private",
    ];
    let key = key.to_ascii_lowercase();
    MARKS.iter().any(|mark| key.contains(mark)) || key.ends_with("key")
}

/// Removes the storage credentials from a remote's JSON answer (`storage-credentials`,
/// and credential keys of `config`); `None` when there was nothing to remove, so that
/// the remote's bytes go out unchanged.
pub fn scrub(body: &[u8]) -> Option<Vec<u8>> {
    let mut answer: Value = serde_json::from_slice(body).ok()?;
    let object = answer.as_object_mut()?;
    let mut removed = object.remove("storage-credentials").is_some();
    if let Some(Value::Object(config)) = object.get_mut("config") {
        let before = config.len();
        config.retain(|key, _| !is_credential(key));
        removed |= config.len() != before;
    }
    removed.then(|| serde_json::to_vec(&answer).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use Privilege as P;

    fn privileges(method: Method, path: &str, body: Value) -> Result<Vec<Privilege>, Refusal> {
        let segments: Vec<&str> = path.split('/').collect();
        let body = serde_json::to_vec(&body).unwrap();
        needed(&method, &segments, false, &body).map(|n| n.into_iter().map(|(p, _)| p).collect())
    }

    #[test]
    fn each_request_needs_what_its_local_route_checks() {
        let none = Value::Null;
        let cases = [
            (Method::GET, "namespaces", P::NAMESPACE_LIST),
            (Method::POST, "namespaces", P::NAMESPACE_CREATE),
            (
                Method::HEAD,
                "namespaces/a\u{1f}b",
                P::NAMESPACE_READ_PROPERTIES,
            ),
            (Method::DELETE, "namespaces/a", P::NAMESPACE_DROP),
            (
                Method::POST,
                "namespaces/a/properties",
                P::NAMESPACE_WRITE_PROPERTIES,
            ),
            (Method::GET, "namespaces/a/tables", P::TABLE_LIST),
            (Method::POST, "namespaces/a/tables", P::TABLE_CREATE),
            (Method::POST, "namespaces/a/register", P::TABLE_CREATE),
            (
                Method::GET,
                "namespaces/a/tables/t",
                P::TABLE_READ_PROPERTIES,
            ),
            (Method::DELETE, "namespaces/a/tables/t", P::TABLE_DROP),
            (
                Method::POST,
                "namespaces/a/tables/t/plan",
                P::TABLE_READ_DATA,
            ),
            (
                Method::GET,
                "namespaces/a/tables/t/plan/p1",
                P::TABLE_READ_DATA,
            ),
            (Method::GET, "namespaces/a/views", P::VIEW_LIST),
            (Method::POST, "namespaces/a/register-view", P::VIEW_CREATE),
            (Method::DELETE, "namespaces/a/views/v", P::VIEW_DROP),
        ];
        for (method, path, privilege) in cases {
            assert_eq!(
                privileges(method.clone(), path, none.clone()),
                Ok(vec![privilege]),
                "{method} {path}"
            );
        }
        let purge = needed(
            &Method::DELETE,
            &["namespaces", "a", "tables", "t"],
            true,
            b"",
        );
        let purge: Vec<Privilege> = purge.unwrap().into_iter().map(|(p, _)| p).collect();
        assert_eq!(purge, [P::TABLE_DROP, P::TABLE_WRITE_DATA]);
    }

    #[test]
    fn commits_need_their_updates_privileges() {
        let props = json!({"updates": [{"action": "set-properties", "updates": {"k": "v"}}]});
        assert_eq!(
            privileges(Method::POST, "namespaces/a/tables/t", props),
            Ok(vec![P::TABLE_SET_PROPERTIES])
        );
        let staged = json!({"requirements": [{"type": "assert-create"}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}]});
        assert_eq!(
            privileges(Method::POST, "namespaces/a/tables/t", staged.clone()),
            Ok(vec![P::TABLE_SET_PROPERTIES, P::TABLE_CREATE])
        );
        let mut staged_change = staged;
        staged_change["identifier"] = json!({"namespace": ["a"], "name": "t"});
        assert_eq!(
            privileges(
                Method::POST,
                "transactions/commit",
                json!({"table-changes": [staged_change]})
            ),
            Ok(vec![P::TABLE_SET_PROPERTIES, P::TABLE_CREATE])
        );
        let empty = json!({"requirements": [], "updates": []});
        assert_eq!(
            privileges(Method::POST, "namespaces/a/tables/t", empty),
            Ok(vec![P::TABLE_WRITE_PROPERTIES])
        );
        let other = json!({"identifier": {"namespace": ["b"], "name": "t"}, "updates": []});
        assert!(matches!(
            privileges(Method::POST, "namespaces/a/tables/t", other),
            Err(Refusal::BadRequest(m)) if m.contains("does not match")
        ));
        let transaction = json!({"table-changes": [
            {"identifier": {"namespace": ["a"], "name": "t"},
             "updates": [{"action": "remove-properties", "removals": ["k"]}]},
        ]});
        assert_eq!(
            privileges(Method::POST, "transactions/commit", transaction),
            Ok(vec![P::TABLE_REMOVE_PROPERTIES])
        );
        let rename = json!({"source": {"namespace": ["a"], "name": "t"},
            "destination": {"namespace": ["b"], "name": "u"}});
        assert_eq!(
            privileges(Method::POST, "tables/rename", rename),
            Ok(vec![P::TABLE_DROP, P::TABLE_CREATE])
        );
        for (path, body) in [
            (
                "namespaces/a/tables/t",
                json!({"updates": [{"action": "fly"}]}),
            ),
            ("transactions/commit", json!({"table-changes": []})),
            (
                "transactions/commit",
                json!({"table-changes": [{"updates": []}]}),
            ),
            ("tables/rename", json!({})),
        ] {
            assert!(
                matches!(
                    privileges(Method::POST, path, body),
                    Err(Refusal::BadRequest(_))
                ),
                "{path}"
            );
        }
    }

    #[test]
    fn floes_own_endpoints_are_not_forwarded() {
        for which in ["credentials", "sign", "notifications"] {
            let path = format!("namespaces/a/tables/t/{which}");
            assert!(matches!(
                privileges(Method::POST, &path, Value::Null),
                Err(Refusal::BadRequest(m)) if m.contains(which)
            ));
        }
        assert_eq!(
            privileges(Method::GET, "events", Value::Null),
            Err(Refusal::NotFound)
        );
        assert_eq!(
            privileges(Method::PUT, "namespaces", Value::Null),
            Err(Refusal::NotFound)
        );
    }

    #[test]
    fn storage_credentials_are_scrubbed_from_answers() {
        let answer = json!({
            "metadata-location": "s3://b/t/m.json",
            "metadata": {"format-version": 2},
            "config": {
                "s3.access-key-id": "AK", "s3.secret-access-key": "SK",
                "s3.session-token": "ST", "s3.endpoint": "http://s3",
                "s3.signer.uri": "http://remote", "adls.sas-token.acct": "sas",
                "gcs.oauth2.token": "g", "client.region": "us-east-1",
                "adls.auth.shared-key.account.key": "k",
                "adls.connection-string.acct": "DefaultEndpointsProtocol=https;AccountKey=k",
            },
            "storage-credentials": [{"prefix": "s3://b", "config": {"s3.secret-access-key": "SK"}}],
        });
        let scrubbed: Value =
            serde_json::from_slice(&scrub(&serde_json::to_vec(&answer).unwrap()).unwrap()).unwrap();
        assert_eq!(
            scrubbed["config"],
            json!({"s3.endpoint": "http://s3", "client.region": "us-east-1"})
        );
        assert!(scrubbed.get("storage-credentials").is_none());
        assert_eq!(scrubbed["metadata-location"], answer["metadata-location"]);
        let clean = json!({"metadata": {}, "config": {"s3.endpoint": "x"}});
        assert_eq!(scrub(&serde_json::to_vec(&clean).unwrap()), None);
        assert_eq!(scrub(b"not json"), None);
    }
}
