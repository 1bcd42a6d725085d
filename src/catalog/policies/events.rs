//! The change events of policy changes: one per request, keyed by the policy's uuid (so a
//! policy dropped and made again under its name starts a new sequence).
//!
//! What a consumer needs to follow the catalog's policies from the log alone: the policy
//! (identifier, uuid, type, version), what changed (content and description of a create
//! or update; the target and parameters of an attachment) and, for a drop, whether its
//! attachments went with it. Two changes remove attachments without an event of their
//! own, because the event they have already says so: a namespace's drop (every
//! attachment to it or to its tables) and a table's drop (its attachments stop counting:
//! they name the table's uuid).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::rules::{StoredPolicy, Target};
use crate::events::{Draft, Operation};

/// The event of a create or an update: the policy as it now is.
pub(super) fn written(operation: Operation, policy: &StoredPolicy) -> Draft {
    let mut draft = about(operation, policy).with("content", policy.content.clone());
    if let Some(description) = &policy.description {
        draft = draft.with("description", description.clone());
    }
    draft
}

/// The event of a drop.
pub(super) fn dropped(policy: &StoredPolicy, detach_all: bool) -> Draft {
    about(Operation::DropPolicy, policy).with("detach-all", detach_all)
}

/// The event of an attachment (`parameters`) or a detachment (none).
pub(super) fn mapped(
    policy: &StoredPolicy,
    target: &Target,
    parameters: Option<&BTreeMap<String, String>>,
) -> Draft {
    match parameters {
        Some(parameters) => about(Operation::AttachPolicy, policy)
            .with("target", target_json(target))
            .with("parameters", json!(parameters)),
        None => about(Operation::DetachPolicy, policy).with("target", target_json(target)),
    }
}

/// What every policy event carries: the policy's identifier as a table's is written,
/// and its uuid (the per-entity sequence's key).
fn about(operation: Operation, policy: &StoredPolicy) -> Draft {
    Draft::named(operation, &policy.namespace, &policy.name, &policy.id)
        .with("policy-type", policy.policy_type.clone())
        .with("version", policy.version)
}

/// The target as Polaris's requests name it, with the table's uuid for a table.
fn target_json(target: &Target) -> Value {
    match target {
        Target::Catalog => json!({ "type": "catalog" }),
        Target::Namespace { namespace } => json!({ "type": "namespace", "path": namespace }),
        Target::Table {
            namespace,
            name,
            uuid,
        } => {
            let mut path = namespace.clone();
            path.push(name.clone());
            json!({ "type": "table-like", "path": path, "table-uuid": uuid })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> StoredPolicy {
        StoredPolicy {
            id: "0195f0c5-7d2c-7c6e-9a4c-1f2e3d4c5b6a".into(),
            namespace: vec!["a".into(), "b".into()],
            name: "p".into(),
            policy_type: "system.snapshot-expiry".into(),
            description: None,
            content: r#"{"version":"2025-02-03","enable":true}"#.into(),
            version: 3,
            created_ms: 1,
            updated_ms: 2,
        }
    }

    #[test]
    fn events_name_the_policy_and_what_changed() {
        let p = policy();
        let created = written(Operation::CreatePolicy, &p);
        assert_eq!(created.entity, format!("object:{}", p.id));
        assert_eq!(created.subject, "a.b.p");
        assert_eq!(
            Value::Object(created.data),
            json!({
                "identifier": {"namespace": ["a", "b"], "name": "p"},
                "policy-uuid": p.id,
                "policy-type": "system.snapshot-expiry",
                "version": 3,
                "content": p.content,
            })
        );
        let described = StoredPolicy {
            description: Some("d".into()),
            ..policy()
        };
        assert_eq!(
            written(Operation::UpdatePolicy, &described).data["description"],
            "d"
        );
        assert_eq!(dropped(&p, true).data["detach-all"], true);
        let table = Target::Table {
            namespace: vec!["a".into()],
            name: "t".into(),
            uuid: "u".into(),
        };
        let params = BTreeMap::from([("k".to_string(), "v".to_string())]);
        let attached = mapped(&p, &table, Some(&params));
        assert_eq!(attached.operation, Operation::AttachPolicy);
        assert_eq!(
            attached.data["target"],
            json!({"type": "table-like", "path": ["a", "t"], "table-uuid": "u"})
        );
        assert_eq!(attached.data["parameters"], json!({"k": "v"}));
        let detached = mapped(&p, &Target::Catalog, None);
        assert_eq!(detached.operation, Operation::DetachPolicy);
        assert_eq!(detached.data["target"], json!({"type": "catalog"}));
        assert!(!detached.data.contains_key("parameters"));
    }
}
