//! Locations held for staged creates ([`Mutation::ReserveLocation`]), and who may pass
//! one: pure rules both stores apply to the live reservations their index lookups found
//! overlapping a location.
//!
//! The staged create's credentials reach its location before any table lives there.
//! Only the create it staged may land there: the same name *and* the same table-uuid
//! (which only the staging caller was told). A plain create under the same name is
//! refused like any other, or a caller who guessed the name of a table being staged
//! could put their files where the stager's credentials read them. A staged create may
//! hold a location its own principal already holds under the same name (a retried
//! job stages again, with a new uuid), not one another principal holds.
//!
//! [`Mutation::ReserveLocation`]: super::Mutation::ReserveLocation

use crate::model::{CatalogId, Ident};

/// A staged create's canonical `location` held for `ident` until `expires_ms`, when what
/// was delegated for it (vended credentials, signatures) stops reaching it: until then no
/// table or view may be written in it or around it (`LocationReserved`) but the staged
/// create itself, under its name and `table_uuid` ([`refusing`]), as they would be
/// reachable with those credentials. Refused, holding nothing, where any object's
/// location, a purge's or another staged create's overlaps it (but the same name's,
/// staged by the same `principal`: a retry). A location held again under the same name
/// takes the new uuid and keeps the later expiry; under the same uuid (an extension) it
/// keeps its staging time, and a hold whose create has landed keeps its expiry.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    pub catalog: CatalogId,
    pub ident: Ident,
    pub location: String,
    pub table_uuid: String,
    pub principal: String,
    pub expires_ms: i64,
    /// When the staged create took it: a hold is extended (`catalog/staged.rs`) only so
    /// long after this. Held again under the same uuid, the first one stays.
    pub staged_ms: i64,
}

/// A live reservation overlapping the location asked for, as a store read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub catalog: CatalogId,
    /// `Namespace::key` form.
    pub namespace: String,
    pub name: String,
    pub table_uuid: String,
    pub principal: String,
}

impl Held {
    pub fn ident(&self) -> Ident {
        super::stored_ident(&self.namespace, self.name.clone())
    }

    fn names(&self, catalog: CatalogId, ident: &Ident) -> bool {
        self.catalog == catalog
            && self.name == ident.name
            && self.namespace == ident.namespace.key()
    }
}

/// What asks to use a location.
pub enum Claim<'a> {
    /// A table or view written there (a create, or a commit that moves it): its
    /// metadata document, whose `table-uuid` is read only if a reservation names it.
    Write {
        catalog: CatalogId,
        ident: &'a Ident,
        metadata: &'a str,
    },
    /// Another staged create's reservation, by `principal`.
    Reserve {
        catalog: CatalogId,
        ident: &'a Ident,
        principal: &'a str,
    },
}

/// The first of `held` that refuses `claim`, if any.
pub fn refusing<'h>(held: &'h [Held], claim: &Claim) -> Option<&'h Held> {
    let mut uuid: Option<Option<String>> = None;
    held.iter().find(|h| match claim {
        Claim::Write {
            catalog,
            ident,
            metadata,
        } => {
            if !h.names(*catalog, ident) {
                return true;
            }
            let uuid = uuid.get_or_insert_with(|| table_uuid(metadata));
            uuid.as_deref() != Some(h.table_uuid.as_str())
        }
        Claim::Reserve {
            catalog,
            ident,
            principal,
        } => !(h.names(*catalog, ident) && h.principal == *principal),
    })
}

/// A metadata document's `table-uuid` (none for a view's, or a document without one).
fn table_uuid(metadata: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Uuid {
        #[serde(rename = "table-uuid")]
        table_uuid: Option<String>,
    }
    serde_json::from_str::<Uuid>(metadata).ok()?.table_uuid
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Namespace;

    fn ident(name: &str) -> Ident {
        Ident::new(Namespace::new(vec!["db".into()]).unwrap(), name.into()).unwrap()
    }

    fn held(name: &str, uuid: &str, principal: &str) -> Held {
        Held {
            catalog: CatalogId(1),
            namespace: ident(name).namespace.key(),
            name: name.into(),
            table_uuid: uuid.into(),
            principal: principal.into(),
        }
    }

    fn write<'a>(ident: &'a Ident, metadata: &'a str) -> Claim<'a> {
        Claim::Write {
            catalog: CatalogId(1),
            ident,
            metadata,
        }
    }

    #[test]
    fn only_the_staged_create_itself_writes_where_it_holds() {
        let t = ident("t");
        let hold = [held("t", "u1", "alice")];
        let doc = |uuid: &str| format!(r#"{{"format-version":2,"table-uuid":"{uuid}"}}"#);
        assert_eq!(refusing(&hold, &write(&t, &doc("u1"))), None);
        // The same name with another uuid (a plain create), a view, or a broken
        // document: refused.
        for metadata in [doc("u2"), r#"{"view-uuid":"u1"}"#.into(), "{".into()] {
            assert_eq!(refusing(&hold, &write(&t, &metadata)), Some(&hold[0]));
        }
        // Another name, or the same name in another catalog: refused.
        let other = ident("other");
        assert!(refusing(&hold, &write(&other, &doc("u1"))).is_some());
        let elsewhere = Claim::Write {
            catalog: CatalogId(2),
            ident: &t,
            metadata: &doc("u1"),
        };
        assert!(refusing(&hold, &elsewhere).is_some());
        // Nothing held: nothing refuses.
        assert_eq!(refusing(&[], &write(&other, "{")), None);
        // Two holds of the name (a retried staged create): each write passes only its own.
        let both = [held("t", "u1", "alice"), held("t", "u2", "alice")];
        assert_eq!(refusing(&both, &write(&t, &doc("u2"))), Some(&both[0]));
    }

    #[test]
    fn a_principal_may_hold_again_what_it_holds_under_the_same_name() {
        let t = ident("t");
        let hold = [held("t", "u1", "alice")];
        let reserve = |ident, principal| Claim::Reserve {
            catalog: CatalogId(1),
            ident,
            principal,
        };
        assert_eq!(refusing(&hold, &reserve(&t, "alice")), None);
        assert!(refusing(&hold, &reserve(&t, "bob")).is_some());
        assert!(refusing(&hold, &reserve(&ident("u"), "alice")).is_some());
    }
}
