//! Recent list pages (the namespaces, tables or views under one parent) kept in memory,
//! so that a list answers without a read transaction, as a load does (`cache.rs`).
//! Catalogs list the same parents over and over (an engine's `SHOW TABLES`, a UI's tree,
//! the benchmark's mix), and their members change far less often than their documents:
//! a commit to a table changes no list.
//!
//! Valid for the reason the object cache is: this process is the database's only writer,
//! and every write goes through the one commit thread, which brackets each group with
//! [`ListCache::begin`] and [`ListCache::end`]. Only a group that may change what some
//! list returns ([`changes_membership`]: a create, drop, rename or undrop, a namespace
//! created or dropped, any catalog change) takes part:
//! - `begin` (before its statements, and so its COMMIT) drops every page and counts the
//!   group pending;
//!   `end` (after COMMIT or rollback, before any caller is answered) uncounts it. Both
//!   bump the lists' generation.
//! - A list that misses reads the database and keeps its page only if the generation is
//!   the one it saw before the read and no such group is pending.
//!
//! So a page is only kept from a read that no membership change overlapped, and is
//! dropped before the next one commits: lists stay linearizable. Dropping *every* page
//! (not just the parent's) keeps the rule obviously right, including for renames across
//! namespaces and catalogs dropped and created again, at the price of refilling after
//! each membership change; commits to existing objects, the usual write, keep them all.
//! The generation is the lists' own, not the object cache's: that one moves with every
//! commit, which would refuse nearly every fill under a write load.

use std::sync::{Mutex, MutexGuard};

use foldhash::HashMap;

use crate::model::{Namespace, ObjectKind};
use crate::store::{Mutation, Page, PageRequest};

/// Whether `mutation` may change what a list returns (which names a parent holds), or
/// whether a parent exists.
pub(super) fn changes_membership(mutation: &Mutation) -> bool {
    match mutation {
        Mutation::None
        | Mutation::UpdateNamespace { .. }
        | Mutation::ForgetDropped { .. }
        | Mutation::FinishPurge { .. }
        | Mutation::DeferPurge { .. }
        | Mutation::ReserveLocation(_)
        | Mutation::RecordMetrics { .. } => false,
        // A commit adds a name only when it creates an object.
        Mutation::CommitObjects { writes, .. } => writes
            .iter()
            .any(|w| w.expected_metadata_location.is_none()),
        Mutation::CreateCatalog(_)
        | Mutation::UpdateCatalog { .. }
        | Mutation::DropCatalog { .. }
        | Mutation::CreateNamespace { .. }
        | Mutation::DropNamespace { .. }
        | Mutation::DropObject { .. }
        | Mutation::Undrop { .. }
        | Mutation::RenameObject { .. } => true,
    }
}

/// What a list is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Listing {
    Namespaces,
    Objects(ObjectKind),
}

/// One list request: catalog name, parent's key, what, and the page asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ListKey {
    catalog: String,
    parent: String,
    listing: Listing,
    after: Option<String>,
    limit: Option<usize>,
}

impl ListKey {
    pub(super) fn new(
        catalog: &str,
        parent: &Namespace,
        listing: Listing,
        page: &PageRequest,
    ) -> ListKey {
        ListKey {
            catalog: catalog.to_string(),
            parent: parent.key(),
            listing,
            after: page.after.clone(),
            limit: page.limit,
        }
    }

    fn cost(&self) -> usize {
        self.catalog.len() + self.parent.len() + self.after.as_ref().map_or(0, String::len) + 64
    }
}

/// A page as kept: names of tables or views, or namespaces.
pub(super) enum Kept {
    Names(Page<String>),
    Namespaces(Page<Namespace>),
}

/// An item a list returns, and how its page is kept.
pub(super) trait Item: Clone + Sized {
    fn keep(page: Page<Self>) -> Kept;
    fn kept(kept: &Kept) -> Option<&Page<Self>>;
    /// About the bytes the item takes in memory.
    fn cost(&self) -> usize;
}

impl Item for String {
    fn keep(page: Page<Self>) -> Kept {
        Kept::Names(page)
    }
    fn kept(kept: &Kept) -> Option<&Page<Self>> {
        match kept {
            Kept::Names(page) => Some(page),
            Kept::Namespaces(_) => None,
        }
    }
    fn cost(&self) -> usize {
        self.len() + 24
    }
}

impl Item for Namespace {
    fn keep(page: Page<Self>) -> Kept {
        Kept::Namespaces(page)
    }
    fn kept(kept: &Kept) -> Option<&Page<Self>> {
        match kept {
            Kept::Namespaces(page) => Some(page),
            Kept::Names(_) => None,
        }
    }
    fn cost(&self) -> usize {
        self.levels().iter().map(|l| l.len() + 24).sum::<usize>() + 24
    }
}

/// Proof of the lists' generation a list saw before it read the database.
pub(super) struct ListTicket(u64);

pub(super) enum ListLookup<T> {
    Hit(Page<T>),
    Miss(ListTicket),
}

#[derive(Default)]
struct Inner {
    pages: HashMap<ListKey, (Kept, usize)>,
    generation: u64,
    /// Membership changes in flight.
    pending: u32,
    bytes: usize,
}

pub(super) struct ListCache {
    inner: Mutex<Inner>,
    /// Most bytes kept; 0 turns the cache off.
    budget: usize,
}

impl ListCache {
    pub(super) fn new(budget: usize) -> Self {
        ListCache {
            inner: Mutex::new(Inner::default()),
            budget,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn get<T: Item>(&self, key: &ListKey) -> ListLookup<T> {
        let inner = self.lock();
        match inner.pages.get(key).and_then(|(kept, _)| T::kept(kept)) {
            Some(page) => ListLookup::Hit(page.clone()),
            None => ListLookup::Miss(ListTicket(inner.generation)),
        }
    }

    /// Keeps the page a read found for `key`, unless a membership change overlapped the
    /// read. When the budget is full every page goes: pages are small and cheap to read
    /// again, so a simple bound beats the bookkeeping of an order.
    pub(super) fn fill<T: Item>(&self, ticket: ListTicket, key: ListKey, page: &Page<T>) {
        let cost = key.cost()
            + page.items.iter().map(Item::cost).sum::<usize>()
            + page.next_after.as_ref().map_or(0, String::len);
        if self.budget == 0 || cost > self.budget / 4 {
            return;
        }
        let mut inner = self.lock();
        if inner.generation != ticket.0 || inner.pending != 0 {
            return;
        }
        if inner.bytes + cost > self.budget {
            inner.pages.clear();
            inner.bytes = 0;
        }
        if let Some((_, old)) = inner.pages.insert(key, (T::keep(page.clone()), cost)) {
            inner.bytes -= old;
        }
        inner.bytes += cost;
    }

    /// Before a write group's statements (each part of a group has its own), with
    /// whether any of its mutations [`changes_membership`].
    pub(super) fn begin(&self, changes: bool) {
        if !changes {
            return;
        }
        let mut inner = self.lock();
        inner.generation += 1;
        inner.pending += 1;
        inner.pages.clear();
        inner.bytes = 0;
    }

    /// After that group's transaction committed or rolled back.
    pub(super) fn end(&self, changes: bool) {
        if !changes {
            return;
        }
        let mut inner = self.lock();
        inner.generation += 1;
        inner.pending -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CatalogId, CatalogRecord, Ident, Properties};
    use crate::store::{ObjectWrite, StoredProperties};

    fn key(parent: &str) -> ListKey {
        ListKey::new(
            "c",
            &Namespace::root().child(parent),
            Listing::Objects(ObjectKind::Table),
            &PageRequest::default(),
        )
    }

    fn page(names: &[&str]) -> Page<String> {
        Page {
            items: names.iter().map(|n| n.to_string()).collect(),
            next_after: None,
        }
    }

    fn ticket(cache: &ListCache, parent: &str) -> ListTicket {
        match cache.get::<String>(&key(parent)) {
            ListLookup::Miss(ticket) => ticket,
            ListLookup::Hit(_) => panic!("unexpected hit"),
        }
    }

    fn hit(cache: &ListCache, parent: &str) -> Option<Vec<String>> {
        match cache.get::<String>(&key(parent)) {
            ListLookup::Hit(page) => Some(page.items),
            ListLookup::Miss(_) => None,
        }
    }

    #[test]
    fn a_filled_page_is_served_until_a_membership_change_begins() {
        let cache = ListCache::new(1 << 20);
        let t = ticket(&cache, "db");
        cache.fill(t, key("db"), &page(&["a", "b"]));
        assert_eq!(hit(&cache, "db"), Some(vec!["a".into(), "b".into()]));
        // A write that changes no list keeps every page.
        cache.begin(false);
        cache.end(false);
        assert!(hit(&cache, "db").is_some());
        // One that may, drops them all (other parents' too) as it begins.
        let other = ticket(&cache, "other");
        cache.fill(other, key("other"), &page(&["x"]));
        cache.begin(true);
        assert_eq!(hit(&cache, "db"), None);
        assert_eq!(hit(&cache, "other"), None);
        cache.end(true);
        assert_eq!(hit(&cache, "db"), None);
    }

    #[test]
    fn a_read_overlapping_a_membership_change_is_not_kept() {
        let cache = ListCache::new(1 << 20);
        // The change began and ended during the read.
        let t = ticket(&cache, "db");
        cache.begin(true);
        cache.end(true);
        cache.fill(t, key("db"), &page(&["old"]));
        assert_eq!(hit(&cache, "db"), None);
        // The change was in flight when the read began, and still is.
        cache.begin(true);
        let t = ticket(&cache, "db");
        cache.fill(t, key("db"), &page(&["old"]));
        assert_eq!(hit(&cache, "db"), None);
        cache.end(true);
        // After it, a read fills again.
        let t = ticket(&cache, "db");
        cache.fill(t, key("db"), &page(&["new"]));
        assert_eq!(hit(&cache, "db"), Some(vec!["new".into()]));
    }

    #[test]
    fn pages_differ_by_kind_page_and_item_type() {
        let cache = ListCache::new(1 << 20);
        let t = ticket(&cache, "db");
        cache.fill(t, key("db"), &page(&["t"]));
        let views = ListKey::new(
            "c",
            &Namespace::root().child("db"),
            Listing::Objects(ObjectKind::View),
            &PageRequest::default(),
        );
        assert!(matches!(cache.get::<String>(&views), ListLookup::Miss(_)));
        let second = ListKey::new(
            "c",
            &Namespace::root().child("db"),
            Listing::Objects(ObjectKind::Table),
            &PageRequest {
                after: Some("t".into()),
                limit: Some(1),
            },
        );
        assert!(matches!(cache.get::<String>(&second), ListLookup::Miss(_)));
        // The same key asked for namespaces cannot hand back names.
        assert!(matches!(
            cache.get::<Namespace>(&key("db")),
            ListLookup::Miss(_)
        ));
    }

    #[test]
    fn the_budget_bounds_the_pages_and_zero_turns_them_off() {
        let cache = ListCache::new(400);
        for parent in ["a", "b", "c", "d", "e", "f"] {
            let t = ticket(&cache, parent);
            cache.fill(t, key(parent), &page(&["x"]));
            assert!(cache.lock().bytes <= 400);
        }
        assert!(hit(&cache, "f").is_some());
        // A page larger than a quarter of the budget is never kept.
        let t = ticket(&cache, "big");
        let names: Vec<String> = (0..20).map(|i| format!("name{i}")).collect();
        let big = Page {
            items: names,
            next_after: None,
        };
        cache.fill(t, key("big"), &big);
        assert_eq!(hit(&cache, "big"), None);
        let off = ListCache::new(0);
        let t = ticket(&off, "db");
        off.fill(t, key("db"), &page(&["a"]));
        assert_eq!(hit(&off, "db"), None);
    }

    fn write(expected: Option<&str>) -> ObjectWrite {
        ObjectWrite {
            ident: Ident::new(Namespace::root().child("db"), "t".into()).unwrap(),
            kind: ObjectKind::Table,
            expected_metadata_location: expected.map(str::to_string),
            metadata_location: "m1".into(),
            metadata: "{}".into(),
            location: "file:/wh/t/".into(),
            check_location: false,
        }
    }

    #[test]
    fn only_membership_changes_take_part() {
        let catalog = CatalogId(1);
        let db = Namespace::root().child("db");
        let t = Ident::new(db.clone(), "t".into()).unwrap();
        let commit = |writes| Mutation::CommitObjects { catalog, writes };
        let record = CatalogRecord {
            id: catalog,
            name: "c".into(),
            catalog_type: Default::default(),
            properties: Properties::new(),
            storage_config: serde_json::json!({"storageType": "FILE"}),
            connection: None,
            created_ms: 1,
            updated_ms: 1,
            version: 1,
        };
        let keeps = [
            Mutation::None,
            commit(vec![write(Some("m0"))]),
            Mutation::update_namespace(
                catalog,
                db.clone(),
                &StoredProperties::new(Properties::new()),
                Properties::new(),
            ),
            Mutation::ForgetDropped { id: "x".into() },
            Mutation::RecordMetrics {
                catalog,
                ident: t.clone(),
                report: "{}".into(),
            },
        ];
        for m in &keeps {
            assert!(!changes_membership(m), "{m:?}");
        }
        let changes = [
            commit(vec![write(Some("m0")), write(None)]),
            Mutation::CreateCatalog(record),
            Mutation::DropCatalog {
                catalog,
                name: "c".into(),
            },
            Mutation::CreateNamespace {
                catalog,
                namespace: db.child("x"),
                properties: Properties::new(),
            },
            Mutation::DropNamespace {
                catalog,
                namespace: db.clone(),
            },
            Mutation::DropObject {
                catalog,
                kind: ObjectKind::Table,
                ident: t.clone(),
                expected: "m0".into(),
                retain: None,
            },
            Mutation::RenameObject {
                catalog,
                kind: ObjectKind::Table,
                from: t.clone(),
                to: Ident::new(db.clone(), "u".into()).unwrap(),
                expected: "m0".into(),
            },
            Mutation::Undrop {
                catalog,
                id: "x".into(),
                write: write(None),
            },
        ];
        for m in &changes {
            assert!(changes_membership(m), "{m:?}");
        }
    }
}
