//! Who may do what: principals (with hashed secrets), principal roles, catalog roles and
//! their grants, and the token signing keys, as one versioned document.
//!
//! The whole model is small (principals and roles number in the hundreds), so it is kept
//! as one JSON document that the store swaps by compare-and-swap on its version, through
//! the same write seam as every other change. Every node caches the parsed document and
//! re-reads it when the version moves, so decisions never wait for the store.
//!
//! Everything here is pure: the changes are functions from one document to the next,
//! unit-tested below; `catalog::access` loads, changes and stores them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::privileges::{allows, Grant, Privilege, Securable};
use super::secrets::SecretHashes;
use crate::model::Properties;

/// The principal role that may do everything (Polaris's `service_admin`).
pub const SERVICE_ADMIN: &str = "service_admin";
/// The catalog role every catalog gets, granted to `service_admin`.
pub const CATALOG_ADMIN: &str = "catalog_admin";
/// The principal created on first start.
pub const ROOT: &str = "root";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SecurityState {
    /// HMAC keys for the tokens Floe issues, newest first. A rotated-out key stays until
    /// the tokens it signed have expired.
    pub signing_keys: Vec<SigningKey>,
    pub principals: BTreeMap<String, PrincipalRecord>,
    pub principal_roles: BTreeMap<String, PrincipalRoleRecord>,
    /// By catalog name, then role name. A dropped catalog's roles are removed in the
    /// same transaction as the catalog, so a catalog created again under the name starts
    /// with none.
    pub catalog_roles: BTreeMap<String, BTreeMap<String, CatalogRoleRecord>>,
    /// The grants a dropped table or view held, by its dropped record's id, for its
    /// undrop to bring back. Each stays until its undrop, or until its retention is over
    /// (the expirer forgets it with its record; a later drop also clears it).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub kept_grants: BTreeMap<String, KeptGrants>,
    /// The federated catalogs, by name: where their remote catalog is and how Floe signs
    /// in there (`federation`). Here, not in the catalog's row, so that every node learns
    /// of one as it learns of grants, and its secret stays with the signing keys.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub federated: BTreeMap<String, crate::federation::Connection>,
}

/// A dropped object's grants, kept for its undrop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptGrants {
    pub catalog: String,
    /// When the dropped record's retention ends.
    pub expires_ms: i64,
    /// (role, the role's `created_ms`, privilege): a role dropped and made again under
    /// its name since is another role, and gets nothing back.
    pub grants: Vec<(String, i64, Privilege)>,
}

/// Where the grants on an object go when it moves or goes ([`SecurityState::grants_follow`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Follow<'a> {
    /// Renamed: they move with it.
    To(&'a Securable),
    /// Dropped for good.
    Gone,
    /// Dropped, recoverable under the dropped record `id` until `expires_ms`: kept for
    /// its undrop.
    Kept { id: &'a str, expires_ms: i64 },
}

/// The parts of a principal or role that an update by version changes: properties,
/// last update time, version.
macro_rules! versioned {
    ($($record:ty),*) => {$(
        impl $record {
            pub fn versioned(&mut self) -> (&mut Properties, &mut i64, &mut i64) {
                (&mut self.properties, &mut self.updated_ms, &mut self.version)
            }
        }
    )*};
}
versioned!(PrincipalRecord, PrincipalRoleRecord, CatalogRoleRecord);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SigningKey {
    pub kid: String,
    /// The HMAC secret, base64. Never leaves the store and the server's memory.
    pub secret: String,
    pub created_ms: i64,
    /// Set when a newer key replaced this one: when the last token it could rightly have
    /// signed expires. Past it the key verifies nothing, whether or not a later rotation
    /// has removed it yet, and no token it signed may claim to expire later (a leaked
    /// key's forgeries die one lifetime after the rotation meant to end them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_after_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrincipalRecord {
    pub name: String,
    /// Random, unique: the `client_id` of OAuth2 client credentials.
    pub client_id: String,
    pub secret: SecretHashes,
    pub properties: Properties,
    pub principal_roles: BTreeSet<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrincipalRoleRecord {
    pub name: String,
    pub properties: Properties,
    /// (catalog name, catalog role name).
    pub catalog_roles: BTreeSet<(String, String)>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogRoleRecord {
    pub name: String,
    pub properties: Properties,
    pub grants: BTreeSet<Grant>,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub version: i64,
}

/// What one request may do: resolved once from the token's principal and roles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Access {
    /// `service_admin` is active: everything is allowed.
    pub service_admin: bool,
    /// The grants of the active roles, by catalog name.
    pub grants: HashMap<String, Vec<Grant>>,
}

impl Access {
    /// Whether `privilege` on `securable` of `catalog` is allowed.
    pub fn allows(&self, catalog: &str, privilege: Privilege, securable: &Securable) -> bool {
        self.service_admin
            || self
                .grants
                .get(catalog)
                .is_some_and(|grants| allows(grants, privilege, securable))
    }

    /// Whether anything at all is granted in `catalog` (lets a principal see it listed).
    pub fn sees_catalog(&self, catalog: &str) -> bool {
        self.service_admin || self.grants.get(catalog).is_some_and(|g| !g.is_empty())
    }
}

impl SecurityState {
    pub fn principal_by_client_id(&self, client_id: &str) -> Option<&PrincipalRecord> {
        self.principals.values().find(|p| p.client_id == client_id)
    }

    /// Puts `key` first: new tokens are signed with it. An older key is retired once its
    /// successor is older than `max_token_lifetime_ms`, when no token it signed can
    /// still be valid; until then tokens it signed keep verifying.
    pub fn rotate_signing_key(&mut self, key: SigningKey, max_token_lifetime_ms: i64) {
        let now = key.created_ms;
        for replaced in &mut self.signing_keys {
            let retired = now.saturating_add(max_token_lifetime_ms);
            replaced.retired_after_ms = Some(
                replaced
                    .retired_after_ms
                    .map_or(retired, |t| t.min(retired)),
            );
        }
        self.signing_keys.insert(0, key);
        let successors: Vec<i64> = self.signing_keys.iter().map(|k| k.created_ms).collect();
        let mut index = 0;
        self.signing_keys.retain(|_| {
            let keep = index == 0 || successors[index - 1] > now - max_token_lifetime_ms;
            index += 1;
            keep
        });
    }

    /// The access of `principal` acting with `roles` (a subset of its principal roles;
    /// roles it no longer holds are ignored, so a revoked role stops working at once).
    pub fn access(&self, principal: &str, roles: &[String]) -> Access {
        let Some(record) = self.principals.get(principal) else {
            return Access::default();
        };
        self.roles_access(roles.iter().filter(|r| record.principal_roles.contains(*r)))
    }

    /// The access that `roles` give together, whoever holds them (an external identity
    /// provider can name roles that are not assigned in the model).
    pub fn roles_access<'a>(&self, roles: impl IntoIterator<Item = &'a String>) -> Access {
        let mut access = Access::default();
        for role in roles {
            if role == SERVICE_ADMIN {
                access.service_admin = true;
            }
            let Some(role) = self.principal_roles.get(role) else {
                continue;
            };
            for (catalog, name) in &role.catalog_roles {
                if let Some(catalog_role) =
                    self.catalog_roles.get(catalog).and_then(|r| r.get(name))
                {
                    access
                        .grants
                        .entry(catalog.clone())
                        .or_default()
                        .extend(catalog_role.grants.iter().cloned());
                }
            }
        }
        access
    }

    /// Gives a new catalog its `catalog_admin` role (CATALOG_MANAGE_ACCESS and
    /// CATALOG_MANAGE_METADATA on the catalog) and grants it to `service_admin`, as
    /// Polaris does.
    pub fn add_catalog(&mut self, catalog: &str, now_ms: i64) {
        let grants = [
            Privilege::CATALOG_MANAGE_ACCESS,
            Privilege::CATALOG_MANAGE_METADATA,
        ]
        .into_iter()
        .map(|privilege| Grant {
            securable: Securable::Catalog,
            privilege,
        })
        .collect();
        self.catalog_roles
            .entry(catalog.to_string())
            .or_default()
            .insert(
                CATALOG_ADMIN.into(),
                CatalogRoleRecord {
                    name: CATALOG_ADMIN.into(),
                    properties: Properties::new(),
                    grants,
                    created_ms: now_ms,
                    updated_ms: now_ms,
                    version: 1,
                },
            );
        if let Some(admin) = self.principal_roles.get_mut(SERVICE_ADMIN) {
            admin
                .catalog_roles
                .insert((catalog.to_string(), CATALOG_ADMIN.into()));
        }
    }

    /// Whether any role of `catalog` holds a grant on `securable`.
    pub fn has_grants_on(&self, catalog: &str, securable: &Securable) -> bool {
        self.catalog_roles.get(catalog).is_some_and(|roles| {
            roles
                .values()
                .any(|role| role.grants.iter().any(|g| &g.securable == securable))
        })
    }

    /// Grants follow the object they are about, as Polaris ties them to the entity: the
    /// grants on `securable` of `catalog` move with a rename, and go with a drop (kept
    /// for its undrop when it is recoverable), so that nothing created later under the
    /// old name inherits them. Each role changed gets a new version. Whether any grant
    /// was there.
    pub fn grants_follow(
        &mut self,
        catalog: &str,
        securable: &Securable,
        follow: Follow,
        now_ms: i64,
    ) -> bool {
        let Some(roles) = self.catalog_roles.get_mut(catalog) else {
            return false;
        };
        let (mut changed, mut kept) = (false, Vec::new());
        for role in roles.values_mut() {
            let on: Vec<Grant> = role
                .grants
                .iter()
                .filter(|g| &g.securable == securable)
                .cloned()
                .collect();
            if on.is_empty() {
                continue;
            }
            for grant in on {
                role.grants.remove(&grant);
                match follow {
                    Follow::To(to) => {
                        role.grants.insert(Grant {
                            securable: to.clone(),
                            privilege: grant.privilege,
                        });
                    }
                    Follow::Gone => {}
                    Follow::Kept { .. } => {
                        kept.push((role.name.clone(), role.created_ms, grant.privilege))
                    }
                }
            }
            role.version += 1;
            role.updated_ms = now_ms;
            changed = true;
        }
        if let Follow::Kept { id, expires_ms } = follow {
            self.forget_expired_grants(now_ms);
            if !kept.is_empty() {
                self.kept_grants.insert(
                    id.to_string(),
                    KeptGrants {
                        catalog: catalog.to_string(),
                        expires_ms,
                        grants: kept,
                    },
                );
            }
        }
        changed
    }

    /// Forgets the grants kept for drops whose retention has ended: their records are
    /// forgotten then, so nothing can give the grants back. Whether any were.
    pub fn forget_expired_grants(&mut self, now_ms: i64) -> bool {
        let before = self.kept_grants.len();
        self.kept_grants.retain(|_, k| k.expires_ms > now_ms);
        self.kept_grants.len() != before
    }

    /// Whether any kept grants are past their retention at `now_ms`.
    pub fn has_expired_grants(&self, now_ms: i64) -> bool {
        self.kept_grants.values().any(|k| k.expires_ms <= now_ms)
    }

    /// Whether grants are kept for the dropped record `id`.
    pub fn keeps_grants_for(&self, id: &str) -> bool {
        self.kept_grants.contains_key(id)
    }

    /// Gives back the grants kept for the dropped record `id` (undropped as `to`) to the
    /// roles that held them, where those roles still exist; the kept entry goes. Each
    /// role changed gets a new version. Whether an entry was kept.
    pub fn restore_grants(&mut self, id: &str, to: &Securable, now_ms: i64) -> bool {
        let Some(kept) = self.kept_grants.remove(id) else {
            return false;
        };
        let Some(roles) = self.catalog_roles.get_mut(&kept.catalog) else {
            return true;
        };
        let mut changed = BTreeSet::new();
        for (name, created_ms, privilege) in kept.grants {
            let Some(role) = roles.get_mut(&name).filter(|r| r.created_ms == created_ms) else {
                continue;
            };
            let grant = Grant {
                securable: to.clone(),
                privilege,
            };
            if role.grants.insert(grant) && changed.insert(name) {
                role.version += 1;
                role.updated_ms = now_ms;
            }
        }
        true
    }

    /// Forgets a dropped catalog's roles and their assignments.
    pub fn remove_catalog(&mut self, catalog: &str) {
        self.catalog_roles.remove(catalog);
        self.federated.remove(catalog);
        self.kept_grants.retain(|_, k| k.catalog != catalog);
        for role in self.principal_roles.values_mut() {
            role.catalog_roles.retain(|(c, _)| c != catalog);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rotated_keys_stay_until_their_tokens_expire() {
        let key = |kid: &str, at: i64| SigningKey {
            kid: kid.into(),
            secret: String::new(),
            created_ms: at,
            retired_after_ms: None,
        };
        let kids = |s: &SecurityState| -> Vec<String> {
            s.signing_keys.iter().map(|k| k.kid.clone()).collect()
        };
        let mut s = SecurityState {
            signing_keys: vec![key("k1", 0)],
            ..Default::default()
        };
        // Tokens live 100 ms at most.
        s.rotate_signing_key(key("k2", 1_000), 100);
        assert_eq!(kids(&s), ["k2", "k1"], "k1's tokens may still be valid");
        s.rotate_signing_key(key("k3", 1_050), 100);
        assert_eq!(kids(&s), ["k3", "k2", "k1"], "k2 took over 50 ms ago");
        s.rotate_signing_key(key("k4", 1_120), 100);
        assert_eq!(
            kids(&s),
            ["k4", "k3", "k2"],
            "k1 retired: k2 took over 120 ms ago"
        );
        s.rotate_signing_key(key("k5", 5_000), 100);
        assert_eq!(kids(&s), ["k5", "k4"]);
        // Each replaced key knows when its last rightful token expires: one lifetime after
        // the first rotation that replaced it.
        let retired = |kid: &str| {
            s.signing_keys
                .iter()
                .find(|k| k.kid == kid)
                .unwrap()
                .retired_after_ms
        };
        assert_eq!(retired("k4"), Some(5_100));
        assert_eq!(retired("k5"), None);
    }

    use super::*;

    fn state() -> SecurityState {
        let mut s = SecurityState::default();
        s.principal_roles.insert(
            SERVICE_ADMIN.into(),
            PrincipalRoleRecord {
                name: SERVICE_ADMIN.into(),
                properties: Properties::new(),
                catalog_roles: BTreeSet::new(),
                created_ms: 0,
                updated_ms: 0,
                version: 1,
            },
        );
        s.principal_roles.insert(
            "readers".into(),
            PrincipalRoleRecord {
                name: "readers".into(),
                properties: Properties::new(),
                catalog_roles: BTreeSet::from([("c7".to_string(), "reader".to_string())]),
                created_ms: 0,
                updated_ms: 0,
                version: 1,
            },
        );
        s.catalog_roles.entry("c7".into()).or_default().insert(
            "reader".into(),
            CatalogRoleRecord {
                name: "reader".into(),
                properties: Properties::new(),
                grants: BTreeSet::from([Grant {
                    securable: Securable::Namespace {
                        namespace: vec!["db".into()],
                    },
                    privilege: Privilege::TABLE_READ_DATA,
                }]),
                created_ms: 0,
                updated_ms: 0,
                version: 1,
            },
        );
        s.principals.insert(
            "alice".into(),
            PrincipalRecord {
                name: "alice".into(),
                client_id: "c1".into(),
                secret: SecretHashes::new("s"),
                properties: Properties::new(),
                principal_roles: BTreeSet::from(["readers".to_string()]),
                created_ms: 0,
                updated_ms: 0,
                version: 1,
            },
        );
        s
    }

    #[test]
    fn access_follows_active_roles_only() {
        let s = state();
        let table = Securable::Table {
            namespace: vec!["db".into()],
            name: "t".into(),
        };
        let alice = s.access("alice", &["readers".into()]);
        assert!(alice.allows("c7", Privilege::TABLE_READ_DATA, &table));
        assert!(!alice.allows("c7", Privilege::TABLE_WRITE_DATA, &table));
        assert!(!alice.allows("c8", Privilege::TABLE_READ_DATA, &table));
        // A role the principal does not hold (or no longer holds) gives nothing.
        let claimed = s.access("alice", &[SERVICE_ADMIN.into()]);
        assert!(!claimed.service_admin);
        assert_eq!(s.access("mallory", &["readers".into()]), Access::default());
    }

    #[test]
    fn new_catalogs_get_a_catalog_admin_for_service_admin() {
        let mut s = state();
        s.add_catalog("c9", 1);
        assert!(s.principal_roles[SERVICE_ADMIN]
            .catalog_roles
            .contains(&("c9".to_string(), CATALOG_ADMIN.to_string())));
        s.remove_catalog("c9");
        assert!(!s.catalog_roles.contains_key("c9"));
        assert!(s.principal_roles[SERVICE_ADMIN].catalog_roles.is_empty());
    }

    #[test]
    fn grants_follow_their_object() {
        let table = |name: &str| Securable::Table {
            namespace: vec!["db".into()],
            name: name.into(),
        };
        let view = Securable::View {
            namespace: vec!["db".into()],
            name: "t".into(),
        };
        let mut s = state();
        let role = s
            .catalog_roles
            .get_mut("c7")
            .unwrap()
            .get_mut("reader")
            .unwrap();
        for privilege in [Privilege::TABLE_READ_DATA, Privilege::TABLE_WRITE_DATA] {
            role.grants.insert(Grant {
                securable: table("t"),
                privilege,
            });
        }
        let readers = |s: &SecurityState| s.catalog_roles["c7"]["reader"].clone();
        let before = readers(&s);
        assert!(s.has_grants_on("c7", &table("t")));
        assert!(
            !s.has_grants_on("c7", &view),
            "a view named t is another object"
        );
        assert!(!s.has_grants_on("c8", &table("t")));
        // A rename moves them, with a new role version.
        assert!(s.grants_follow("c7", &table("t"), Follow::To(&table("u")), 9));
        let moved = readers(&s);
        assert!(!s.has_grants_on("c7", &table("t")));
        assert!(s.has_grants_on("c7", &table("u")));
        assert_eq!(moved.grants.len(), before.grants.len());
        assert_eq!((moved.version, moved.updated_ms), (before.version + 1, 9));
        // A drop removes them; nothing else changes.
        assert!(s.grants_follow("c7", &table("u"), Follow::Gone, 10));
        assert!(!s.has_grants_on("c7", &table("u")));
        assert_eq!(readers(&s).grants.len(), before.grants.len() - 2);
        let unchanged = s.clone();
        assert!(!s.grants_follow("c7", &table("u"), Follow::Gone, 11));
        assert!(!s.grants_follow("c9", &table("t"), Follow::Gone, 11));
        assert_eq!(s, unchanged);
    }

    #[test]
    fn a_recoverable_drop_keeps_its_grants_for_the_undrop() {
        let table = |name: &str| Securable::Table {
            namespace: vec!["db".into()],
            name: name.into(),
        };
        let mut s = state();
        let grant = |securable: Securable, privilege| Grant {
            securable,
            privilege,
        };
        let add = |s: &mut SecurityState, role: &str, created_ms: i64, grants: Vec<Grant>| {
            s.catalog_roles.get_mut("c7").unwrap().insert(
                role.into(),
                CatalogRoleRecord {
                    name: role.into(),
                    properties: Properties::new(),
                    grants: grants.into_iter().collect(),
                    created_ms,
                    updated_ms: 0,
                    version: 1,
                },
            );
        };
        add(
            &mut s,
            "writer",
            5,
            vec![
                grant(table("t"), Privilege::TABLE_WRITE_DATA),
                grant(table("t"), Privilege::TABLE_DROP),
            ],
        );
        add(
            &mut s,
            "gone",
            5,
            vec![grant(table("t"), Privilege::TABLE_READ_DATA)],
        );
        let kept = |id| Follow::Kept {
            id,
            expires_ms: 100,
        };
        assert!(s.grants_follow("c7", &table("t"), kept("d1"), 10));
        assert!(!s.has_grants_on("c7", &table("t")));
        assert!(s.keeps_grants_for("d1"));
        // The role "gone" is dropped and made again: another role, which gets nothing.
        s.catalog_roles.get_mut("c7").unwrap().remove("gone");
        add(&mut s, "gone", 20, vec![]);
        let before = s.catalog_roles["c7"]["writer"].clone();
        assert!(s.restore_grants("d1", &table("u"), 30));
        let writer = &s.catalog_roles["c7"]["writer"];
        assert_eq!(
            writer.grants,
            BTreeSet::from([
                grant(table("u"), Privilege::TABLE_WRITE_DATA),
                grant(table("u"), Privilege::TABLE_DROP),
            ])
        );
        assert_eq!(
            (writer.version, writer.updated_ms),
            (before.version + 1, 30)
        );
        assert!(s.catalog_roles["c7"]["gone"].grants.is_empty());
        assert!(!s.keeps_grants_for("d1"), "given back once");
        assert!(!s.restore_grants("d1", &table("u"), 31));
        // Kept entries go once their retention is over (at the next keeping drop), and
        // with their catalog.
        assert!(s.grants_follow("c7", &table("u"), kept("d2"), 40));
        let later = Follow::Kept {
            id: "d3",
            expires_ms: 300,
        };
        s.catalog_roles
            .get_mut("c7")
            .unwrap()
            .get_mut("writer")
            .unwrap()
            .grants = BTreeSet::from([grant(table("v"), Privilege::TABLE_DROP)]);
        assert!(s.grants_follow("c7", &table("v"), later, 150));
        assert!(!s.keeps_grants_for("d2") && s.keeps_grants_for("d3"));
        s.remove_catalog("c7");
        assert!(s.kept_grants.is_empty());
        // Without grants on it, a drop keeps nothing.
        assert!(!s.grants_follow("c7", &table("w"), kept("d4"), 50));
        assert!(!s.keeps_grants_for("d4"));
    }

    /// The expirer forgets kept grants once their retention is over, whether or not
    /// another drop comes along; those still within it stay.
    #[test]
    fn expired_kept_grants_are_forgotten_on_their_own() {
        let mut s = state();
        for (id, expires_ms) in [("d1", 100), ("d2", 200)] {
            s.kept_grants.insert(
                id.into(),
                KeptGrants {
                    catalog: "c7".into(),
                    expires_ms,
                    grants: vec![("reader".into(), 0, Privilege::TABLE_DROP)],
                },
            );
        }
        assert!(!s.has_expired_grants(99));
        assert!(!s.forget_expired_grants(99), "nothing expired yet");
        assert!(s.has_expired_grants(100));
        assert!(s.forget_expired_grants(100));
        assert!(!s.keeps_grants_for("d1") && s.keeps_grants_for("d2"));
        assert!(!s.has_expired_grants(199));
    }

    #[test]
    fn the_document_round_trips_as_json() {
        let mut s = state();
        s.kept_grants.insert(
            "d1".into(),
            KeptGrants {
                catalog: "c7".into(),
                expires_ms: 9,
                grants: vec![("reader".into(), 0, Privilege::TABLE_DROP)],
            },
        );
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<SecurityState>(&json).unwrap(), s);
    }
}
