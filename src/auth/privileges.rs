//! Privileges, with Apache Polaris's names and implications, and the pure decision: does
//! a set of grants allow a privilege on a securable?
//!
//! A grant is a privilege on a securable (a catalog, a namespace, a table or a view); it
//! covers that securable and everything under it (a grant on a namespace covers its
//! child namespaces, tables and views). A privilege is also satisfied by the privileges
//! that imply it: `TABLE_WRITE_DATA` implies `TABLE_READ_DATA`, `CATALOG_MANAGE_CONTENT`
//! implies every namespace, table and view privilege, and so on (Polaris's
//! `PolarisAuthorizerImpl` super-privilege table).

use serde::{Deserialize, Serialize};

use crate::model::{Ident, Namespace};

macro_rules! privileges {
    ($($name:ident),* $(,)?) => {
        /// A privilege, spelled as Polaris spells it (`TABLE_READ_DATA`, ...).
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Privilege { $($name),* }

        impl Privilege {
            pub const ALL: &'static [Privilege] = &[$(Privilege::$name),*];

            pub fn as_str(self) -> &'static str {
                match self { $(Privilege::$name => stringify!($name)),* }
            }

            pub fn parse(s: &str) -> Option<Privilege> {
                match s { $(stringify!($name) => Some(Privilege::$name),)* _ => None }
            }
        }
    };
}

privileges!(
    CATALOG_MANAGE_ACCESS,
    CATALOG_MANAGE_CONTENT,
    CATALOG_MANAGE_METADATA,
    CATALOG_READ_PROPERTIES,
    CATALOG_WRITE_PROPERTIES,
    NAMESPACE_CREATE,
    TABLE_CREATE,
    VIEW_CREATE,
    NAMESPACE_DROP,
    TABLE_DROP,
    VIEW_DROP,
    NAMESPACE_LIST,
    TABLE_LIST,
    VIEW_LIST,
    NAMESPACE_READ_PROPERTIES,
    TABLE_READ_PROPERTIES,
    VIEW_READ_PROPERTIES,
    NAMESPACE_WRITE_PROPERTIES,
    TABLE_WRITE_PROPERTIES,
    VIEW_WRITE_PROPERTIES,
    TABLE_READ_DATA,
    TABLE_WRITE_DATA,
    NAMESPACE_FULL_METADATA,
    TABLE_FULL_METADATA,
    VIEW_FULL_METADATA,
    POLICY_CREATE,
    POLICY_READ,
    POLICY_WRITE,
    POLICY_DROP,
    POLICY_LIST,
    POLICY_FULL_METADATA,
    POLICY_ATTACH,
    POLICY_DETACH,
    CATALOG_ATTACH_POLICY,
    CATALOG_DETACH_POLICY,
    NAMESPACE_ATTACH_POLICY,
    NAMESPACE_DETACH_POLICY,
    TABLE_ATTACH_POLICY,
    TABLE_DETACH_POLICY,
    // Polaris's fine-grained table privileges: one per kind of update a commit makes.
    TABLE_ASSIGN_UUID,
    TABLE_UPGRADE_FORMAT_VERSION,
    TABLE_ADD_SCHEMA,
    TABLE_SET_CURRENT_SCHEMA,
    TABLE_ADD_PARTITION_SPEC,
    TABLE_ADD_SORT_ORDER,
    TABLE_SET_DEFAULT_SORT_ORDER,
    TABLE_ADD_SNAPSHOT,
    TABLE_SET_SNAPSHOT_REF,
    TABLE_REMOVE_SNAPSHOTS,
    TABLE_REMOVE_SNAPSHOT_REF,
    TABLE_SET_LOCATION,
    TABLE_SET_PROPERTIES,
    TABLE_REMOVE_PROPERTIES,
    TABLE_SET_STATISTICS,
    TABLE_REMOVE_STATISTICS,
    TABLE_REMOVE_PARTITION_SPECS,
    TABLE_MANAGE_STRUCTURE,
);

use Privilege as P;

/// The privileges that satisfy a fine-grained table privilege: the given ones, then those
/// that allow every update of a commit.
macro_rules! table_update {
    ($($own:expr),+) => {
        &[
            $($own,)+
            P::TABLE_WRITE_PROPERTIES,
            P::TABLE_WRITE_DATA,
            P::TABLE_FULL_METADATA,
            P::CATALOG_MANAGE_METADATA,
            P::CATALOG_MANAGE_CONTENT,
        ]
    };
}

impl Privilege {
    /// Whether it is one of Polaris's fine-grained table privileges, each of which allows
    /// one kind of update in a commit (`catalog::commit::update_privileges`).
    pub fn is_table_update(self) -> bool {
        matches!(
            self,
            P::TABLE_ASSIGN_UUID
                | P::TABLE_UPGRADE_FORMAT_VERSION
                | P::TABLE_ADD_SCHEMA
                | P::TABLE_SET_CURRENT_SCHEMA
                | P::TABLE_ADD_PARTITION_SPEC
                | P::TABLE_ADD_SORT_ORDER
                | P::TABLE_SET_DEFAULT_SORT_ORDER
                | P::TABLE_ADD_SNAPSHOT
                | P::TABLE_SET_SNAPSHOT_REF
                | P::TABLE_REMOVE_SNAPSHOTS
                | P::TABLE_REMOVE_SNAPSHOT_REF
                | P::TABLE_SET_LOCATION
                | P::TABLE_SET_PROPERTIES
                | P::TABLE_REMOVE_PROPERTIES
                | P::TABLE_SET_STATISTICS
                | P::TABLE_REMOVE_STATISTICS
                | P::TABLE_REMOVE_PARTITION_SPECS
                | P::TABLE_MANAGE_STRUCTURE
        )
    }

    /// The privileges that satisfy `self` when granted (itself included).
    pub fn satisfied_by(self) -> &'static [Privilege] {
        match self {
            P::CATALOG_MANAGE_ACCESS => &[P::CATALOG_MANAGE_ACCESS],
            P::CATALOG_MANAGE_CONTENT => &[P::CATALOG_MANAGE_CONTENT],
            P::CATALOG_MANAGE_METADATA => &[P::CATALOG_MANAGE_METADATA, P::CATALOG_MANAGE_CONTENT],
            P::CATALOG_READ_PROPERTIES => &[
                P::CATALOG_READ_PROPERTIES,
                P::CATALOG_WRITE_PROPERTIES,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::CATALOG_WRITE_PROPERTIES => &[
                P::CATALOG_WRITE_PROPERTIES,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::NAMESPACE_CREATE | P::NAMESPACE_DROP | P::NAMESPACE_WRITE_PROPERTIES => match self {
                P::NAMESPACE_CREATE => &[
                    P::NAMESPACE_CREATE,
                    P::NAMESPACE_FULL_METADATA,
                    P::CATALOG_MANAGE_METADATA,
                    P::CATALOG_MANAGE_CONTENT,
                ],
                P::NAMESPACE_DROP => &[
                    P::NAMESPACE_DROP,
                    P::NAMESPACE_FULL_METADATA,
                    P::CATALOG_MANAGE_METADATA,
                    P::CATALOG_MANAGE_CONTENT,
                ],
                _ => &[
                    P::NAMESPACE_WRITE_PROPERTIES,
                    P::NAMESPACE_FULL_METADATA,
                    P::CATALOG_MANAGE_METADATA,
                    P::CATALOG_MANAGE_CONTENT,
                ],
            },
            P::NAMESPACE_LIST => &[
                P::NAMESPACE_LIST,
                P::NAMESPACE_CREATE,
                P::NAMESPACE_READ_PROPERTIES,
                P::NAMESPACE_WRITE_PROPERTIES,
                P::NAMESPACE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::NAMESPACE_READ_PROPERTIES => &[
                P::NAMESPACE_READ_PROPERTIES,
                P::NAMESPACE_WRITE_PROPERTIES,
                P::NAMESPACE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::NAMESPACE_FULL_METADATA => &[
                P::NAMESPACE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_CREATE => &[
                P::TABLE_CREATE,
                P::TABLE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_DROP => &[
                P::TABLE_DROP,
                P::TABLE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_LIST => &[
                P::TABLE_LIST,
                P::TABLE_CREATE,
                P::TABLE_READ_PROPERTIES,
                P::TABLE_WRITE_PROPERTIES,
                P::TABLE_READ_DATA,
                P::TABLE_WRITE_DATA,
                P::TABLE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_READ_PROPERTIES => &[
                P::TABLE_READ_PROPERTIES,
                P::TABLE_WRITE_PROPERTIES,
                P::TABLE_READ_DATA,
                P::TABLE_WRITE_DATA,
                P::TABLE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_WRITE_PROPERTIES => &[
                P::TABLE_WRITE_PROPERTIES,
                P::TABLE_WRITE_DATA,
                P::TABLE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_READ_DATA => &[
                P::TABLE_READ_DATA,
                P::TABLE_WRITE_DATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_WRITE_DATA => &[P::TABLE_WRITE_DATA, P::CATALOG_MANAGE_CONTENT],
            P::TABLE_FULL_METADATA => &[
                P::TABLE_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::VIEW_CREATE => &[
                P::VIEW_CREATE,
                P::VIEW_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::VIEW_DROP => &[
                P::VIEW_DROP,
                P::VIEW_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::VIEW_LIST => &[
                P::VIEW_LIST,
                P::VIEW_CREATE,
                P::VIEW_READ_PROPERTIES,
                P::VIEW_WRITE_PROPERTIES,
                P::VIEW_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::VIEW_READ_PROPERTIES => &[
                P::VIEW_READ_PROPERTIES,
                P::VIEW_WRITE_PROPERTIES,
                P::VIEW_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::VIEW_WRITE_PROPERTIES => &[
                P::VIEW_WRITE_PROPERTIES,
                P::VIEW_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::VIEW_FULL_METADATA => &[
                P::VIEW_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_CREATE => &[
                P::POLICY_CREATE,
                P::POLICY_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_WRITE => &[
                P::POLICY_WRITE,
                P::POLICY_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_DROP => &[
                P::POLICY_DROP,
                P::POLICY_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_READ => &[
                P::POLICY_READ,
                P::POLICY_WRITE,
                P::POLICY_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_LIST => &[
                P::POLICY_LIST,
                P::POLICY_CREATE,
                P::POLICY_READ,
                P::POLICY_WRITE,
                P::POLICY_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_FULL_METADATA => &[
                P::POLICY_FULL_METADATA,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            // Attaching is not metadata: POLICY_FULL_METADATA does not imply it.
            P::POLICY_ATTACH => &[
                P::POLICY_ATTACH,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::POLICY_DETACH => &[
                P::POLICY_DETACH,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::CATALOG_ATTACH_POLICY => &[
                P::CATALOG_ATTACH_POLICY,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::CATALOG_DETACH_POLICY => &[
                P::CATALOG_DETACH_POLICY,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::NAMESPACE_ATTACH_POLICY => &[
                P::NAMESPACE_ATTACH_POLICY,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::NAMESPACE_DETACH_POLICY => &[
                P::NAMESPACE_DETACH_POLICY,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_ATTACH_POLICY => &[
                P::TABLE_ATTACH_POLICY,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            P::TABLE_DETACH_POLICY => &[
                P::TABLE_DETACH_POLICY,
                P::CATALOG_MANAGE_METADATA,
                P::CATALOG_MANAGE_CONTENT,
            ],
            // A fine-grained table privilege is satisfied by itself and by whatever lets a
            // commit make every update (TABLE_WRITE_PROPERTIES and what implies it); a
            // structural one by TABLE_MANAGE_STRUCTURE too. Adding a snapshot and moving a
            // ref are writing data, not structure: TABLE_MANAGE_STRUCTURE does not imply
            // them (it does imply removing them), as in Polaris.
            P::TABLE_ADD_SNAPSHOT => table_update!(P::TABLE_ADD_SNAPSHOT),
            P::TABLE_SET_SNAPSHOT_REF => table_update!(P::TABLE_SET_SNAPSHOT_REF),
            P::TABLE_MANAGE_STRUCTURE => table_update!(P::TABLE_MANAGE_STRUCTURE),
            P::TABLE_ASSIGN_UUID => table_update!(P::TABLE_ASSIGN_UUID, P::TABLE_MANAGE_STRUCTURE),
            P::TABLE_UPGRADE_FORMAT_VERSION => {
                table_update!(P::TABLE_UPGRADE_FORMAT_VERSION, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_ADD_SCHEMA => table_update!(P::TABLE_ADD_SCHEMA, P::TABLE_MANAGE_STRUCTURE),
            P::TABLE_SET_CURRENT_SCHEMA => {
                table_update!(P::TABLE_SET_CURRENT_SCHEMA, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_ADD_PARTITION_SPEC => {
                table_update!(P::TABLE_ADD_PARTITION_SPEC, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_ADD_SORT_ORDER => {
                table_update!(P::TABLE_ADD_SORT_ORDER, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_SET_DEFAULT_SORT_ORDER => {
                table_update!(P::TABLE_SET_DEFAULT_SORT_ORDER, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_REMOVE_SNAPSHOTS => {
                table_update!(P::TABLE_REMOVE_SNAPSHOTS, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_REMOVE_SNAPSHOT_REF => {
                table_update!(P::TABLE_REMOVE_SNAPSHOT_REF, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_SET_LOCATION => {
                table_update!(P::TABLE_SET_LOCATION, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_SET_PROPERTIES => {
                table_update!(P::TABLE_SET_PROPERTIES, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_REMOVE_PROPERTIES => {
                table_update!(P::TABLE_REMOVE_PROPERTIES, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_SET_STATISTICS => {
                table_update!(P::TABLE_SET_STATISTICS, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_REMOVE_STATISTICS => {
                table_update!(P::TABLE_REMOVE_STATISTICS, P::TABLE_MANAGE_STRUCTURE)
            }
            P::TABLE_REMOVE_PARTITION_SPECS => {
                table_update!(P::TABLE_REMOVE_PARTITION_SPECS, P::TABLE_MANAGE_STRUCTURE)
            }
        }
    }
}

/// What a grant is on, or what a request touches. Inside one catalog.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Securable {
    Catalog,
    Namespace {
        namespace: Vec<String>,
    },
    Table {
        namespace: Vec<String>,
        name: String,
    },
    View {
        namespace: Vec<String>,
        name: String,
    },
    /// A policy (Polaris's policy API), in the namespace it is defined in.
    Policy {
        namespace: Vec<String>,
        name: String,
    },
}

impl Securable {
    pub fn namespace(namespace: &Namespace) -> Self {
        Securable::Namespace {
            namespace: namespace.levels().to_vec(),
        }
    }

    pub fn table(ident: &Ident) -> Self {
        Securable::Table {
            namespace: ident.namespace.levels().to_vec(),
            name: ident.name.clone(),
        }
    }

    pub fn policy(namespace: &Namespace, name: &str) -> Self {
        Securable::Policy {
            namespace: namespace.levels().to_vec(),
            name: name.to_string(),
        }
    }

    pub fn view(ident: &Ident) -> Self {
        Securable::View {
            namespace: ident.namespace.levels().to_vec(),
            name: ident.name.clone(),
        }
    }

    /// Whether `privilege` may be granted on `self`: the privilege enum the management
    /// API's grant of that type takes (`CatalogPrivilege`, `TablePrivilege`…), as
    /// Polaris refuses anything else. `POLICY_ATTACH` and `POLICY_DETACH` are granted on
    /// a policy only; a target's `…_ATTACH_POLICY` on that target (or above it).
    pub fn grantable(&self, privilege: Privilege) -> bool {
        use Privilege::*;
        match self {
            Securable::Catalog => !matches!(
                privilege,
                POLICY_ATTACH
                    | POLICY_DETACH
                    | NAMESPACE_ATTACH_POLICY
                    | NAMESPACE_DETACH_POLICY
                    | TABLE_ATTACH_POLICY
                    | TABLE_DETACH_POLICY
            ),
            Securable::Namespace { .. } => !matches!(
                privilege,
                CATALOG_READ_PROPERTIES
                    | CATALOG_WRITE_PROPERTIES
                    | CATALOG_ATTACH_POLICY
                    | CATALOG_DETACH_POLICY
                    | POLICY_ATTACH
                    | POLICY_DETACH
                    | TABLE_ATTACH_POLICY
                    | TABLE_DETACH_POLICY
            ),
            Securable::Table { .. } => {
                privilege.is_table_update()
                    || matches!(
                        privilege,
                        CATALOG_MANAGE_ACCESS
                            | TABLE_DROP
                            | TABLE_LIST
                            | TABLE_READ_PROPERTIES
                            | TABLE_WRITE_PROPERTIES
                            | TABLE_READ_DATA
                            | TABLE_WRITE_DATA
                            | TABLE_FULL_METADATA
                            | TABLE_ATTACH_POLICY
                            | TABLE_DETACH_POLICY
                    )
            }
            Securable::View { .. } => matches!(
                privilege,
                CATALOG_MANAGE_ACCESS
                    | VIEW_DROP
                    | VIEW_LIST
                    | VIEW_READ_PROPERTIES
                    | VIEW_WRITE_PROPERTIES
                    | VIEW_FULL_METADATA
            ),
            Securable::Policy { .. } => matches!(
                privilege,
                CATALOG_MANAGE_ACCESS
                    | POLICY_READ
                    | POLICY_DROP
                    | POLICY_WRITE
                    | POLICY_LIST
                    | POLICY_FULL_METADATA
                    | POLICY_ATTACH
                    | POLICY_DETACH
            ),
        }
    }

    /// The grant type that names it in the management API.
    pub fn kind(&self) -> &'static str {
        match self {
            Securable::Catalog => "catalog",
            Securable::Namespace { .. } => "namespace",
            Securable::Table { .. } => "table",
            Securable::View { .. } => "view",
            Securable::Policy { .. } => "policy",
        }
    }

    /// The management API's enum of what may be granted on it.
    pub fn privilege_enum(&self) -> &'static str {
        match self {
            Securable::Catalog => "CatalogPrivilege",
            Securable::Namespace { .. } => "NamespacePrivilege",
            Securable::Table { .. } => "TablePrivilege",
            Securable::View { .. } => "ViewPrivilege",
            Securable::Policy { .. } => "PolicyPrivilege",
        }
    }

    /// Whether a grant on `self` covers `target`: the same securable, or one under it.
    pub fn covers(&self, target: &Securable) -> bool {
        match (self, target) {
            (Securable::Catalog, _) => true,
            (Securable::Namespace { namespace: granted }, Securable::Namespace { namespace })
            | (Securable::Namespace { namespace: granted }, Securable::Table { namespace, .. })
            | (Securable::Namespace { namespace: granted }, Securable::View { namespace, .. })
            | (Securable::Namespace { namespace: granted }, Securable::Policy { namespace, .. }) => {
                namespace.starts_with(granted)
            }
            (a, b) => a == b,
        }
    }
}

/// A privilege granted on a securable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Grant {
    pub securable: Securable,
    pub privilege: Privilege,
}

/// Whether `grants` allow `privilege` on `target`.
pub fn allows<'a>(
    grants: impl IntoIterator<Item = &'a Grant>,
    privilege: Privilege,
    target: &Securable,
) -> bool {
    let satisfying = privilege.satisfied_by();
    grants
        .into_iter()
        .any(|g| satisfying.contains(&g.privilege) && g.securable.covers(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(levels: &[&str]) -> Vec<String> {
        levels.iter().map(|s| s.to_string()).collect()
    }

    fn table(levels: &[&str], name: &str) -> Securable {
        Securable::Table {
            namespace: ns(levels),
            name: name.into(),
        }
    }

    #[test]
    fn names_round_trip() {
        for p in Privilege::ALL {
            assert_eq!(Privilege::parse(p.as_str()), Some(*p));
            assert!(p.satisfied_by().contains(p), "{p:?} satisfies itself");
        }
        assert_eq!(Privilege::parse("TABLE_EAT"), None);
    }

    #[test]
    fn implications() {
        let on = |privilege, securable| Grant {
            privilege,
            securable,
        };
        let write = [on(P::TABLE_WRITE_DATA, table(&["a"], "t"))];
        assert!(allows(&write, P::TABLE_READ_DATA, &table(&["a"], "t")));
        assert!(allows(
            &write,
            P::TABLE_READ_PROPERTIES,
            &table(&["a"], "t")
        ));
        assert!(!allows(&write, P::TABLE_DROP, &table(&["a"], "t")));
        let read = [on(P::TABLE_READ_DATA, table(&["a"], "t"))];
        assert!(!allows(&read, P::TABLE_WRITE_DATA, &table(&["a"], "t")));
        let content = [on(P::CATALOG_MANAGE_CONTENT, Securable::Catalog)];
        for p in Privilege::ALL {
            let expected = !matches!(p, P::CATALOG_MANAGE_ACCESS);
            assert_eq!(allows(&content, *p, &table(&["x"], "y")), expected, "{p:?}");
        }
    }

    /// Polaris's super-privileges of the fine-grained table privileges: the coarse
    /// writes imply them all; TABLE_MANAGE_STRUCTURE the structural ones, not adding a
    /// snapshot or moving a ref; none implies another or anything coarse.
    #[test]
    fn fine_grained_table_privileges() {
        let t = table(&["a"], "t");
        let holding = |privilege| {
            [Grant {
                privilege,
                securable: t.clone(),
            }]
        };
        let updates: Vec<Privilege> = Privilege::ALL
            .iter()
            .copied()
            .filter(|p| p.is_table_update())
            .collect();
        assert_eq!(updates.len(), 18);
        for coarse in [
            P::TABLE_WRITE_PROPERTIES,
            P::TABLE_WRITE_DATA,
            P::TABLE_FULL_METADATA,
        ] {
            for p in &updates {
                assert!(allows(&holding(coarse), *p, &t), "{coarse:?} implies {p:?}");
            }
        }
        let structure = holding(P::TABLE_MANAGE_STRUCTURE);
        for p in &updates {
            assert_eq!(allows(&structure, *p, &t), structure_implies(*p), "{p:?}");
        }
        for held in &updates {
            for p in Privilege::ALL {
                let implied = allows(&holding(*held), *p, &t);
                let expected =
                    p == held || (*held == P::TABLE_MANAGE_STRUCTURE && structure_implies(*p));
                assert_eq!(implied, expected, "{held:?} → {p:?}");
            }
        }
        // Not even a read: TABLE_ADD_SNAPSHOT alone does not load the table.
        assert!(!allows(
            &holding(P::TABLE_ADD_SNAPSHOT),
            P::TABLE_READ_PROPERTIES,
            &t
        ));
    }

    fn structure_implies(p: Privilege) -> bool {
        p.is_table_update() && !matches!(p, P::TABLE_ADD_SNAPSHOT | P::TABLE_SET_SNAPSHOT_REF)
    }

    /// Each grant type takes exactly the privileges of its enum in the management API's
    /// document, and every privilege there is one Floe knows.
    #[test]
    fn grantable_privileges_are_the_management_apis_enums() {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/openapi/polaris-management.json"))
                .unwrap();
        let schemas = &doc["components"]["schemas"];
        let securables = [
            ("CatalogPrivilege", Securable::Catalog),
            (
                "NamespacePrivilege",
                Securable::Namespace {
                    namespace: ns(&["a"]),
                },
            ),
            ("TablePrivilege", table(&["a"], "t")),
            (
                "ViewPrivilege",
                Securable::View {
                    namespace: ns(&["a"]),
                    name: "v".into(),
                },
            ),
            (
                "PolicyPrivilege",
                Securable::Policy {
                    namespace: ns(&["a"]),
                    name: "p".into(),
                },
            ),
        ];
        for (schema, securable) in securables {
            let mut listed: Vec<Privilege> = schemas[schema]["enum"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let name = p.as_str().unwrap();
                    Privilege::parse(name).unwrap_or_else(|| panic!("{schema}: {name} unknown"))
                })
                .collect();
            listed.sort();
            let grantable: Vec<Privilege> = Privilege::ALL
                .iter()
                .copied()
                .filter(|p| securable.grantable(*p))
                .collect();
            assert_eq!(grantable, listed, "{schema}");
        }
    }

    #[test]
    fn a_namespace_grant_covers_what_is_under_it() {
        let grants = [Grant {
            privilege: P::TABLE_READ_DATA,
            securable: Securable::Namespace {
                namespace: ns(&["a", "b"]),
            },
        }];
        assert!(allows(
            &grants,
            P::TABLE_READ_DATA,
            &table(&["a", "b"], "t")
        ));
        assert!(allows(
            &grants,
            P::TABLE_READ_DATA,
            &table(&["a", "b", "c"], "t")
        ));
        assert!(!allows(&grants, P::TABLE_READ_DATA, &table(&["a"], "t")));
        assert!(!allows(
            &grants,
            P::TABLE_READ_DATA,
            &table(&["a", "bc"], "t")
        ));
        // A table grant does not reach a view of the same name.
        let on_table = [Grant {
            privilege: P::VIEW_READ_PROPERTIES,
            securable: table(&["a"], "t"),
        }];
        let view = Securable::View {
            namespace: ns(&["a"]),
            name: "t".into(),
        };
        assert!(!allows(&on_table, P::VIEW_READ_PROPERTIES, &view));
    }
}
