//! A catalog's policies and attachments as one document, and the pure rules over it:
//! create, update, drop, attach, detach, and which policies apply to a target. The use
//! cases (`mod.rs`) read the document, apply one rule and swap it by its version.
//!
//! The rules are Polaris's (`PolicyCatalog`):
//! - a policy's name is unique in its namespace (whatever its type); a new one is at
//!   version 0, and an update names the version it read (a 409 otherwise) and bumps it,
//!   unless it changes nothing;
//! - a target (the catalog, a namespace, a table) has at most one policy of each
//!   inheritable type; attaching the same policy again replaces its parameters;
//! - a policy still attached is dropped only with `detach-all`;
//! - what applies to a target: the inheritable policies attached on its path, the
//!   nearest of each type winning, and the non-inheritable ones attached to it directly.
//!
//! Targets are named as Floe's grants name securables: by namespace path and name. A
//! table's attachment also keeps the table's uuid and counts only while the table of that
//! name has it: a table dropped (or replaced by another of the same name) loses its
//! attachments without any write to this document, which a table's drop therefore never
//! waits on.

use serde::{Deserialize, Serialize};

use super::content::PolicyType;
use crate::catalog::error::{CatalogError, CatalogResult, Missing, PolicyRefusal};
use crate::model::Namespace;

/// The document, as stored (`{}` reads as empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicyState {
    #[serde(default)]
    pub policies: Vec<StoredPolicy>,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StoredPolicy {
    /// Keys the attachments: a policy dropped and made again starts with none.
    pub id: String,
    pub namespace: Vec<String>,
    pub name: String,
    pub policy_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub content: String,
    pub version: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// What a policy is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Target {
    Catalog,
    Namespace {
        namespace: Vec<String>,
    },
    Table {
        namespace: Vec<String>,
        name: String,
        /// The table's uuid when the policy was attached.
        uuid: String,
    },
}

impl Target {
    /// The same target, a table's uuid aside (a table's uuid decides whether an
    /// attachment counts, not which target it is).
    fn names_same(&self, other: &Target) -> bool {
        match (self, other) {
            (
                Target::Table {
                    namespace, name, ..
                },
                Target::Table {
                    namespace: n2,
                    name: m2,
                    ..
                },
            ) => namespace == n2 && name == m2,
            (a, b) => a == b,
        }
    }

    /// How Polaris's messages name it: the catalog, then the path joined by dots.
    pub fn describe(&self, catalog: &str) -> String {
        let mut parts = vec![catalog.to_string()];
        match self {
            Target::Catalog => {}
            Target::Namespace { namespace } => parts.extend(namespace.iter().cloned()),
            Target::Table {
                namespace, name, ..
            } => {
                parts.extend(namespace.iter().cloned());
                parts.push(name.clone());
            }
        }
        parts.join(".")
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Attachment {
    pub policy_id: String,
    /// The policy's type, so that the one-per-type rule needs no lookup.
    pub policy_type: String,
    pub target: Target,
    #[serde(default)]
    pub parameters: std::collections::BTreeMap<String, String>,
}

/// A policy that applies to a target, and whether through an ancestor.
#[derive(Debug, Clone, PartialEq)]
pub struct Applicable<'a> {
    pub policy: &'a StoredPolicy,
    pub inherited: bool,
}

fn policy_missing(namespace: &Namespace, name: &str) -> CatalogError {
    CatalogError::not_found(
        Missing::Policy,
        format!("Policy does not exist: {namespace}.{name}"),
    )
}

impl PolicyState {
    pub fn find(&self, namespace: &Namespace, name: &str) -> Option<&StoredPolicy> {
        self.policies
            .iter()
            .find(|p| p.name == name && p.namespace == namespace.levels())
    }

    fn position(&self, namespace: &Namespace, name: &str) -> CatalogResult<usize> {
        self.policies
            .iter()
            .position(|p| p.name == name && p.namespace == namespace.levels())
            .ok_or_else(|| policy_missing(namespace, name))
    }

    pub fn get(&self, namespace: &Namespace, name: &str) -> CatalogResult<&StoredPolicy> {
        self.find(namespace, name)
            .ok_or_else(|| policy_missing(namespace, name))
    }

    /// The policies defined in exactly this namespace, by name, of one type if given.
    pub fn in_namespace(&self, namespace: &Namespace, of_type: Option<&str>) -> Vec<&StoredPolicy> {
        let mut found: Vec<_> = self
            .policies
            .iter()
            .filter(|p| p.namespace == namespace.levels())
            .filter(|p| of_type.is_none_or(|t| p.policy_type == t))
            .collect();
        found.sort_by(|a, b| a.name.cmp(&b.name));
        found
    }

    /// Whether anything of this document keeps the namespace from being dropped: a
    /// policy defined in it.
    pub fn holds_policies(&self, namespace: &Namespace) -> bool {
        self.policies
            .iter()
            .any(|p| p.namespace == namespace.levels())
    }

    /// A namespace's drop takes its attachments with it (a namespace made again later
    /// under the same name starts with none), and those of the tables it held (it is
    /// empty, so they were dropped: their attachments no longer count).
    pub fn forget_namespace(&mut self, namespace: &Namespace) {
        self.attachments.retain(|a| match &a.target {
            Target::Namespace { namespace: n } | Target::Table { namespace: n, .. } => {
                n != namespace.levels()
            }
            Target::Catalog => true,
        });
    }

    pub fn create(&mut self, policy: StoredPolicy) -> CatalogResult<&StoredPolicy> {
        let namespace = Namespace::new(policy.namespace.clone())?;
        if self.find(&namespace, &policy.name).is_some() {
            return Err(CatalogError::AlreadyExists(format!(
                "Policy already exists: {namespace}.{}",
                policy.name
            )));
        }
        self.policies.push(policy);
        Ok(self.policies.last().expect("just pushed"))
    }

    /// Replaces the description and content if the policy is still at
    /// `expected_version`; changes nothing (not even the version) if both are the same.
    pub fn update(
        &mut self,
        namespace: &Namespace,
        name: &str,
        description: Option<String>,
        content: String,
        expected_version: i64,
        now_ms: i64,
    ) -> CatalogResult<&StoredPolicy> {
        let i = self.position(namespace, name)?;
        let policy = &mut self.policies[i];
        if policy.version != expected_version {
            return Err(CatalogError::Policy(
                PolicyRefusal::VersionMismatch,
                format!(
                    "Policy version mismatch. Given version is {expected_version}, current version is {}",
                    policy.version
                ),
            ));
        }
        if policy.description != description || policy.content != content {
            policy.description = description;
            policy.content = content;
            policy.version += 1;
            policy.updated_ms = now_ms;
        }
        Ok(&self.policies[i])
    }

    /// Drops a policy; one still attached only with `detach_all` (its attachments go too).
    /// `counts`: whether an attachment still counts (a table's, while its table lives).
    pub fn drop_policy(
        &mut self,
        namespace: &Namespace,
        name: &str,
        detach_all: bool,
        counts: impl Fn(&Attachment) -> bool,
    ) -> CatalogResult<()> {
        let i = self.position(namespace, name)?;
        let id = self.policies[i].id.clone();
        let attached = self
            .attachments
            .iter()
            .any(|a| a.policy_id == id && counts(a));
        if attached && !detach_all {
            return Err(CatalogError::Policy(
                PolicyRefusal::InUse,
                format!(
                    "Policy {namespace}.{name} is still attached to entities; detach it first, or drop it with detach-all=true"
                ),
            ));
        }
        self.policies.remove(i);
        self.attachments.retain(|a| a.policy_id != id);
        Ok(())
    }

    /// Room for one more attachment under `limit`: when the document is full, those
    /// that no longer count (`counts` false: their table was dropped or made again) are
    /// forgotten first, so attachments to gone tables cannot fill a catalog for good.
    pub fn make_room(
        &mut self,
        limit: usize,
        counts: impl Fn(&Attachment) -> bool,
    ) -> CatalogResult<()> {
        if self.attachments.len() >= limit {
            self.attachments.retain(|a| counts(a));
        }
        if self.attachments.len() >= limit {
            return Err(CatalogError::bad_request(format!(
                "A catalog holds at most {limit} policy attachments"
            )));
        }
        Ok(())
    }

    /// Whether the policy is attached to the target (counting or not): attaching it again
    /// replaces that attachment, and needs no room.
    pub fn attached(
        &self,
        namespace: &Namespace,
        name: &str,
        target: &Target,
    ) -> CatalogResult<bool> {
        let id = &self.get(namespace, name)?.id;
        Ok(self
            .attachments
            .iter()
            .any(|a| &a.policy_id == id && a.target.names_same(target)))
    }

    /// Attaches a policy to a target (replacing the parameters of the same attachment).
    /// `counts` as for [`Self::drop_policy`]: an attachment to a table that is gone does
    /// not block another policy of its type, and is replaced.
    pub fn attach(
        &mut self,
        namespace: &Namespace,
        name: &str,
        target: Target,
        parameters: std::collections::BTreeMap<String, String>,
        catalog: &str,
        counts: impl Fn(&Attachment) -> bool,
    ) -> CatalogResult<()> {
        let policy = self.get(namespace, name)?;
        let (id, policy_type) = (policy.id.clone(), policy.policy_type.clone());
        let inheritable = PolicyType::is_inheritable(&policy_type);
        // What no longer counts on this target goes now.
        self.attachments
            .retain(|a| !a.target.names_same(&target) || counts(a));
        if inheritable {
            let taken = self.attachments.iter().any(|a| {
                a.target.names_same(&target) && a.policy_type == policy_type && a.policy_id != id
            });
            if taken {
                return Err(CatalogError::Policy(
                    PolicyRefusal::MappingExists,
                    format!(
                        "The policy mapping of same type ({policy_type}) for {} already exists",
                        target.describe(catalog)
                    ),
                ));
            }
        }
        self.attachments
            .retain(|a| !(a.target.names_same(&target) && a.policy_id == id));
        self.attachments.push(Attachment {
            policy_id: id,
            policy_type,
            target,
            parameters,
        });
        Ok(())
    }

    /// Detaches a policy from a target: 404 if it is not attached there.
    pub fn detach(
        &mut self,
        namespace: &Namespace,
        name: &str,
        target: &Target,
        catalog: &str,
        counts: impl Fn(&Attachment) -> bool,
    ) -> CatalogResult<()> {
        let id = self.get(namespace, name)?.id.clone();
        let live = |a: &Attachment| a.policy_id == id && a.target.names_same(target) && counts(a);
        let found = self.attachments.iter().any(live);
        self.attachments
            .retain(|a| !(a.policy_id == id && a.target.names_same(target)));
        if !found {
            return Err(CatalogError::not_found(
                Missing::PolicyMapping,
                format!(
                    "Policy {namespace}.{name} is not attached to {}",
                    target.describe(catalog)
                ),
            ));
        }
        Ok(())
    }

    /// The policies that apply to the last of `path` (the catalog first, then each
    /// namespace level from the top, then perhaps a table), of one type if given:
    /// inheritable ones from the whole path, the nearest of each type winning, and
    /// non-inheritable ones attached to the target itself. Sorted by type, then name.
    pub fn applicable(
        &self,
        path: &[Target],
        of_type: Option<&str>,
        counts: impl Fn(&Attachment) -> bool,
    ) -> Vec<Applicable<'_>> {
        let Some((target, ancestors)) = path.split_last() else {
            return Vec::new();
        };
        let attached_to = |t: &Target| -> Vec<&StoredPolicy> {
            self.attachments
                .iter()
                .filter(|a| a.target.names_same(t))
                .filter(|a| of_type.is_none_or(|wanted| a.policy_type == wanted))
                .filter(|a| counts(a))
                .filter_map(|a| self.policies.iter().find(|p| p.id == a.policy_id))
                .collect()
        };
        let inheritable = |p: &StoredPolicy| PolicyType::is_inheritable(&p.policy_type);
        // By type: the nearest inheritable policy so far.
        let mut by_type: std::collections::BTreeMap<&str, Applicable> = Default::default();
        for ancestor in ancestors {
            for policy in attached_to(ancestor).into_iter().filter(|p| inheritable(p)) {
                by_type.insert(
                    &policy.policy_type,
                    Applicable {
                        policy,
                        inherited: true,
                    },
                );
            }
        }
        let mut direct = Vec::new();
        for policy in attached_to(target) {
            let applicable = Applicable {
                policy,
                inherited: false,
            };
            if inheritable(policy) {
                by_type.insert(&policy.policy_type, applicable);
            } else {
                direct.push(applicable);
            }
        }
        let mut all: Vec<_> = by_type.into_values().chain(direct).collect();
        all.sort_by(|a, b| {
            (&a.policy.policy_type, &a.policy.name).cmp(&(&b.policy.policy_type, &b.policy.name))
        });
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const COMPACTION: &str = "system.data-compaction";
    const EXPIRY: &str = "system.snapshot-expiry";

    fn ns(levels: &[&str]) -> Namespace {
        Namespace::new(levels.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    fn policy(namespace: &[&str], name: &str, policy_type: &str) -> StoredPolicy {
        StoredPolicy {
            id: format!("id-{name}"),
            namespace: namespace.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            policy_type: policy_type.into(),
            description: None,
            content: r#"{"enable":true}"#.into(),
            version: 0,
            created_ms: 1,
            updated_ms: 1,
        }
    }

    fn on_ns(levels: &[&str]) -> Target {
        Target::Namespace {
            namespace: levels.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn on_table(levels: &[&str], name: &str, uuid: &str) -> Target {
        Target::Table {
            namespace: levels.iter().map(|s| s.to_string()).collect(),
            name: name.into(),
            uuid: uuid.into(),
        }
    }

    fn all(_: &Attachment) -> bool {
        true
    }

    fn state() -> PolicyState {
        let mut s = PolicyState::default();
        for p in [
            policy(&["ns1"], "p1", COMPACTION),
            policy(&["ns1"], "p2", COMPACTION),
            policy(&["ns1"], "p3", EXPIRY),
        ] {
            s.create(p).unwrap();
        }
        s
    }

    fn attach(s: &mut PolicyState, name: &str, target: Target) -> CatalogResult<()> {
        s.attach(&ns(&["ns1"]), name, target, BTreeMap::new(), "c", all)
    }

    #[test]
    fn a_full_document_makes_room_by_forgetting_attachments_to_gone_tables() {
        let mut s = state();
        attach(&mut s, "p1", on_table(&["ns1"], "t1", "u1")).unwrap();
        attach(&mut s, "p3", on_table(&["ns1"], "t2", "u2")).unwrap();
        attach(&mut s, "p2", on_ns(&["ns1"])).unwrap();
        let before = s.attachments.clone();
        // Below the limit nothing is forgotten, even what no longer counts.
        s.make_room(4, |_| false).unwrap();
        assert_eq!(s.attachments, before);
        // Full, and everything counts: refused, nothing changed.
        let err = s.make_room(3, all).unwrap_err();
        assert!(err.to_string().contains("at most 3"), "{err}");
        assert_eq!(s.attachments, before);
        // Full, and t1 is gone: its attachment goes, the rest stay.
        let t1_gone =
            |a: &Attachment| !matches!(&a.target, Target::Table { name, .. } if name == "t1");
        s.make_room(3, t1_gone).unwrap();
        assert_eq!(s.attachments.len(), 2);
        assert!(s.attachments.iter().all(t1_gone));
    }

    #[test]
    fn a_policy_is_attached_to_a_target_only_by_name() {
        let mut s = state();
        attach(&mut s, "p1", on_table(&["ns1"], "t1", "u1")).unwrap();
        let attached = |s: &PolicyState, name: &str, target: &Target| {
            s.attached(&ns(&["ns1"]), name, target).unwrap()
        };
        // Another uuid under the same name is the same target (attaching replaces it).
        assert!(attached(&s, "p1", &on_table(&["ns1"], "t1", "u9")));
        assert!(!attached(&s, "p2", &on_table(&["ns1"], "t1", "u1")));
        assert!(!attached(&s, "p1", &on_table(&["ns1"], "t2", "u1")));
        assert!(!attached(&s, "p1", &on_ns(&["ns1"])));
        assert!(s.attached(&ns(&["ns1"]), "nope", &on_ns(&["ns1"])).is_err());
    }

    fn names(found: &[Applicable]) -> Vec<(String, bool)> {
        found
            .iter()
            .map(|a| (a.policy.name.clone(), a.inherited))
            .collect()
    }

    #[test]
    fn names_are_unique_per_namespace_and_updates_name_their_version() {
        let mut s = state();
        let again = s.create(policy(&["ns1"], "p1", EXPIRY)).unwrap_err();
        assert!(matches!(again, CatalogError::AlreadyExists(_)), "{again}");
        s.create(policy(&["ns2"], "p1", EXPIRY)).unwrap();
        let p1 = ns(&["ns1"]);
        let stale = s.update(&p1, "p1", None, "{}".into(), 3, 2).unwrap_err();
        assert!(
            matches!(
                stale,
                CatalogError::Policy(PolicyRefusal::VersionMismatch, _)
            ),
            "{stale}"
        );
        let same = s.get(&p1, "p1").unwrap().content.clone();
        assert_eq!(s.update(&p1, "p1", None, same, 0, 2).unwrap().version, 0);
        let changed = s
            .update(&p1, "p1", Some("d".into()), "{}".into(), 0, 2)
            .unwrap();
        assert_eq!((changed.version, changed.updated_ms), (1, 2));
        assert!(s.update(&p1, "nope", None, "{}".into(), 0, 2).is_err());
    }

    #[test]
    fn one_inheritable_policy_of_a_type_per_target() {
        let mut s = state();
        attach(&mut s, "p1", Target::Catalog).unwrap();
        let taken = attach(&mut s, "p2", Target::Catalog).unwrap_err();
        assert!(
            matches!(taken, CatalogError::Policy(PolicyRefusal::MappingExists, _)),
            "{taken}"
        );
        assert!(taken.to_string().contains("(system.data-compaction) for c"));
        // The same policy again replaces its parameters; another type is fine.
        let params = BTreeMap::from([("k".to_string(), "v".to_string())]);
        s.attach(
            &ns(&["ns1"]),
            "p1",
            Target::Catalog,
            params.clone(),
            "c",
            all,
        )
        .unwrap();
        assert_eq!(s.attachments.len(), 1);
        assert_eq!(s.attachments[0].parameters, params);
        attach(&mut s, "p3", Target::Catalog).unwrap();
        attach(&mut s, "p2", on_ns(&["ns2"])).unwrap();
        // A table's attachment that no longer counts does not block its type.
        attach(&mut s, "p1", on_table(&["ns2"], "t", "old")).unwrap();
        s.attach(
            &ns(&["ns1"]),
            "p2",
            on_table(&["ns2"], "t", "new"),
            BTreeMap::new(),
            "c",
            |a| !matches!(&a.target, Target::Table { uuid, .. } if uuid == "old"),
        )
        .unwrap();
    }

    #[test]
    fn nearest_wins_and_only_direct_non_inheritable_ones_apply() {
        let mut s = state();
        attach(&mut s, "p1", Target::Catalog).unwrap();
        attach(&mut s, "p3", on_ns(&["ns2"])).unwrap();
        attach(&mut s, "p2", on_table(&["ns2"], "t", "u")).unwrap();
        let path = [
            Target::Catalog,
            on_ns(&["ns2"]),
            on_table(&["ns2"], "t", "u"),
        ];
        assert_eq!(
            names(&s.applicable(&path, None, all)),
            [("p2".into(), false), ("p3".into(), true)]
        );
        assert_eq!(
            names(&s.applicable(&path[..2], None, all)),
            [("p1".into(), true), ("p3".into(), false)]
        );
        assert_eq!(
            names(&s.applicable(&path[..1], None, all)),
            [("p1".into(), false)]
        );
        assert_eq!(
            names(&s.applicable(&path, Some(EXPIRY), all)),
            [("p3".into(), true)]
        );
        // The table's attachment stops counting once its table is gone: p1 again.
        let gone = |a: &Attachment| !matches!(a.target, Target::Table { .. });
        assert_eq!(
            names(&s.applicable(&path, Some(COMPACTION), gone)),
            [("p1".into(), true)]
        );
    }

    #[test]
    fn drops_and_detaches() {
        let mut s = state();
        let p = ns(&["ns1"]);
        attach(&mut s, "p1", on_ns(&["ns2"])).unwrap();
        let in_use = s.drop_policy(&p, "p1", false, all).unwrap_err();
        assert!(
            matches!(in_use, CatalogError::Policy(PolicyRefusal::InUse, _)),
            "{in_use}"
        );
        let missing = s.detach(&p, "p1", &Target::Catalog, "c", all).unwrap_err();
        assert!(
            matches!(
                missing,
                CatalogError::NotFound {
                    missing: Missing::PolicyMapping,
                    ..
                }
            ),
            "{missing}"
        );
        s.detach(&p, "p1", &on_ns(&["ns2"]), "c", all).unwrap();
        s.drop_policy(&p, "p1", false, all).unwrap();
        attach(&mut s, "p2", on_ns(&["ns2"])).unwrap();
        s.drop_policy(&p, "p2", true, all).unwrap();
        assert!(s.attachments.is_empty());
        assert!(s.drop_policy(&p, "p2", true, all).is_err());
        // A policy whose only attachment is to a table that is gone drops without more.
        attach(&mut s, "p3", on_table(&["ns2"], "t", "u")).unwrap();
        s.drop_policy(&p, "p3", false, |_| false).unwrap();
        assert_eq!(s.holds_policies(&p), !s.in_namespace(&p, None).is_empty());
    }

    #[test]
    fn a_namespace_drop_takes_its_attachments() {
        let mut s = state();
        attach(&mut s, "p1", on_ns(&["ns2"])).unwrap();
        attach(&mut s, "p3", on_ns(&["ns3"])).unwrap();
        attach(&mut s, "p2", on_table(&["ns2"], "t", "u")).unwrap();
        attach(&mut s, "p2", on_table(&["ns2", "inner"], "t", "u")).unwrap();
        s.forget_namespace(&ns(&["ns2"]));
        assert_eq!(s.attachments.len(), 2);
        assert!(s.holds_policies(&ns(&["ns1"])));
        assert!(!s.holds_policies(&ns(&["ns2"])));
        let document = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<PolicyState>(&document).unwrap(), s);
        assert_eq!(
            serde_json::from_str::<PolicyState>("{}").unwrap(),
            PolicyState::default()
        );
    }
}
