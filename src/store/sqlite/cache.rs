//! The current pointer of each recently loaded table and view, the properties of each
//! recently read namespace, and the record of each catalog read, kept in memory so that
//! a load answers without a database read (or a parse). Most requests name a catalog
//! first, so its record alone was a read transaction and two JSON parses per request.
//!
//! Valid because this process is the database's only writer (the store holds an
//! exclusive lock on the data directory) and every write goes through the one commit
//! thread (`group.rs`), which brackets each group's transaction with [`ObjectCache::begin`]
//! and [`ObjectCache::end`]:
//! - `begin` (before the statements of the group, or of the part of it, that touch them,
//!   and so before its COMMIT) evicts the objects the group touches and marks them
//!   pending; `end` (after COMMIT or rollback, before any caller is answered) unmarks them.
//!   Both bump the generation.
//! - A load that misses reads the database and fills the entry only if the generation is
//!   the one it saw before the read and the object is not pending.
//!
//! So an entry is only ever filled from a read that no write overlapped, and a load is
//! served from memory only when the database would give the same answer: loads stay
//! linearizable. Size is bounded by [`ObjectCache::new`]'s budget of metadata bytes.
//!
//! The maps hash with foldhash (randomly seeded per process, as hashbrown's own default):
//! a load looks up three names, and std's SipHash made that half of the lookup's cost.

use std::sync::{Arc, Mutex, MutexGuard};

use foldhash::HashMap;

use super::list_cache::ListCache;
use crate::model::{CatalogId, CatalogRecord, Ident, Namespace, ObjectKind};
use crate::store::cache_text::{CachedText, MetadataText};
use crate::store::{Mutation, ObjectKey, Reach, StoredObject, StoredProperties};

/// A namespace's own key among the objects' keys: no table or view has an empty name.
pub(super) fn namespace_key(catalog: CatalogId, namespace: &Namespace) -> ObjectKey {
    (catalog.0, namespace.key(), String::new())
}

/// What a write group touches, as far as the cache is concerned.
pub(super) enum Touched {
    Nothing,
    /// These objects (a catalog id, a namespace key, a name; an empty name is the
    /// namespace itself).
    Objects(Vec<ObjectKey>),
    /// Anything (a catalog created, changed or dropped: names may map to other ids).
    All,
}

impl Touched {
    /// What `mutations` touch together.
    pub(super) fn of<'a>(mutations: impl IntoIterator<Item = &'a Mutation>) -> Touched {
        let mut keys = Vec::new();
        for mutation in mutations {
            if mutation.objects_written(&mut keys) == Reach::Everything {
                return Touched::All;
            }
            match mutation {
                Mutation::CreateNamespace {
                    catalog, namespace, ..
                }
                | Mutation::UpdateNamespace {
                    catalog, namespace, ..
                }
                | Mutation::DropNamespace { catalog, namespace } => {
                    keys.push(namespace_key(*catalog, namespace))
                }
                _ => {}
            }
        }
        if keys.is_empty() {
            Touched::Nothing
        } else {
            Touched::Objects(keys)
        }
    }
}

/// Proof of the generation a load saw before it read the database.
pub(super) struct Ticket(u64);

pub(super) enum Lookup<T = StoredObject> {
    Hit(T),
    Miss(Ticket),
}

/// A cached pointer; its document lives in the cache's own heap (`cache_text.rs`).
struct Cached {
    kind: ObjectKind,
    metadata_location: String,
    /// Shared with the loads that hit it (`get`), never copied out.
    metadata: Arc<CachedText>,
}

impl Cached {
    fn size(&self) -> usize {
        cost(&self.metadata_location, self.metadata.as_str())
    }
}

#[derive(Default)]
struct Catalog {
    id: i64,
    /// The catalog's record, once read. Not counted against the budget: there is one per
    /// catalog, however many objects are cached, and a write to any catalog drops them
    /// all (`Touched::All`).
    record: Option<Arc<CatalogRecord>>,
    /// Namespace key, then object name.
    objects: HashMap<String, HashMap<String, Arc<Cached>>>,
    /// Namespace key: its properties and their cost.
    namespaces: HashMap<String, (Arc<StoredProperties>, usize)>,
}

#[derive(Default)]
struct Inner {
    /// By catalog name.
    catalogs: HashMap<String, Catalog>,
    generation: u64,
    pending: HashMap<(i64, String, String), u32>,
    /// Writes in flight that may touch anything.
    pending_all: u32,
    bytes: usize,
}

pub(super) struct ObjectCache {
    inner: Mutex<Inner>,
    /// Most metadata bytes kept; 0 turns the cache off.
    budget: usize,
    /// Recent list pages, bracketed by the same commit thread (`list_cache.rs`).
    pub(super) lists: ListCache,
}

fn cost(metadata_location: &str, metadata: &str) -> usize {
    metadata.len() + metadata_location.len() + 64
}

/// Whether an entry of `cost` may be kept at all: at most a quarter of the budget, so
/// that one large document cannot crowd out the rest.
fn fits(cost: usize, budget: usize) -> bool {
    cost <= budget / 4
}

/// About the bytes of a namespace's properties as JSON, plus its key and the entry.
/// The map is counted at its text's size, plus the text itself and its packed form.
fn namespace_cost(key: &str, properties: &StoredProperties) -> usize {
    let packed = properties.packed().map_or(0, |p| p.len());
    2 * properties.json().len() + packed + key.len() + 64
}

impl ObjectCache {
    pub(super) fn new(budget: usize) -> Self {
        ObjectCache {
            inner: Mutex::new(Inner::default()),
            budget,
            // List pages are small: an eighth of the documents' budget holds thousands.
            lists: ListCache::new(budget / 8),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn get(&self, catalog: &str, namespace: &str, name: &str) -> Lookup {
        let hit = {
            let inner = self.lock();
            let hit = inner
                .catalogs
                .get(catalog)
                .and_then(|c| c.objects.get(namespace))
                .and_then(|names| names.get(name));
            match hit {
                Some(object) => object.clone(),
                None => return Lookup::Miss(Ticket(inner.generation)),
            }
        };
        // The document is shared, not copied: a load holds the cache's block.
        Lookup::Hit(StoredObject {
            kind: hit.kind,
            metadata_location: hit.metadata_location.clone(),
            metadata: MetadataText::Shared(hit.metadata.clone()),
        })
    }

    pub(super) fn get_namespace(
        &self,
        catalog: &str,
        namespace: &str,
    ) -> Lookup<Arc<StoredProperties>> {
        let inner = self.lock();
        match inner
            .catalogs
            .get(catalog)
            .and_then(|c| c.namespaces.get(namespace))
        {
            Some((properties, _)) => Lookup::Hit(properties.clone()),
            None => Lookup::Miss(Ticket(inner.generation)),
        }
    }

    pub(super) fn get_catalog(&self, catalog: &str) -> Lookup<Arc<CatalogRecord>> {
        let inner = self.lock();
        match inner.catalogs.get(catalog).and_then(|c| c.record.as_ref()) {
            Some(record) => Lookup::Hit(record.clone()),
            None => Lookup::Miss(Ticket(inner.generation)),
        }
    }

    /// Keeps the record a read found, unless a write overlapped the read. Every write to
    /// a catalog is `Touched::All`, so the generation and `pending_all` are the only
    /// checks it needs (no per-key pending mark applies to a catalog).
    pub(super) fn fill_catalog(&self, ticket: Ticket, record: &CatalogRecord) {
        if self.budget == 0 {
            return;
        }
        let mut inner = self.lock();
        if inner.generation != ticket.0 || inner.pending_all != 0 {
            return;
        }
        inner.catalog_entry(&record.name, record.id.0).record = Some(Arc::new(record.clone()));
    }

    /// As [`ObjectCache::get_namespace`], but a hit leaves the cache: for an update about
    /// to change the properties, which then need not be copied (its own write would
    /// evict them as it begins). A miss is a miss, with its ticket.
    pub(super) fn take_namespace(
        &self,
        catalog: &str,
        namespace: &str,
    ) -> Lookup<Arc<StoredProperties>> {
        let mut inner = self.lock();
        let taken = inner
            .catalogs
            .get_mut(catalog)
            .and_then(|c| c.namespaces.remove(namespace));
        match taken {
            Some((properties, cost)) => {
                inner.bytes -= cost;
                Lookup::Hit(properties)
            }
            None => Lookup::Miss(Ticket(inner.generation)),
        }
    }

    /// Keeps the properties a read found for `namespace` of catalog `id`, unless a
    /// write overlapped the read.
    pub(super) fn fill_namespace(
        &self,
        ticket: Ticket,
        catalog: &str,
        id: CatalogId,
        namespace: &Namespace,
        properties: &Arc<StoredProperties>,
    ) {
        let key = namespace_key(id, namespace);
        let cost = namespace_cost(&key.1, properties);
        if self.budget == 0 || !fits(cost, self.budget) {
            return;
        }
        let mut inner = self.lock();
        if !inner.fillable(&ticket, &key) {
            return;
        }
        inner.make_room(cost, self.budget);
        let entry = inner.catalog_entry(catalog, id.0);
        let old = entry.namespaces.insert(key.1, (properties.clone(), cost));
        inner.bytes += cost;
        if let Some((_, old)) = old {
            inner.bytes -= old;
        }
    }

    /// Keeps what a load read from the database (catalog `id` holds it), unless a write
    /// overlapped the read.
    pub(super) fn fill(
        &self,
        ticket: Ticket,
        catalog: &str,
        id: i64,
        ident: &Ident,
        object: &StoredObject,
    ) {
        let cost = cost(&object.metadata_location, &object.metadata);
        if self.budget == 0 || !fits(cost, self.budget) {
            return;
        }
        let key = (id, ident.namespace.key(), ident.name.clone());
        let mut inner = self.lock();
        if !inner.fillable(&ticket, &key) {
            return;
        }
        inner.make_room(cost, self.budget);
        let (_, namespace, name) = key;
        let cached = Cached {
            kind: object.kind,
            metadata_location: object.metadata_location.clone(),
            metadata: object.metadata.shared(),
        };
        let entry = inner.catalog_entry(catalog, id);
        let old = entry
            .objects
            .entry(namespace)
            .or_default()
            .insert(name, Arc::new(cached));
        inner.bytes += cost;
        if let Some(old) = old {
            inner.bytes -= old.size();
        }
    }

    /// After a group's COMMIT, before [`ObjectCache::end`]: keeps what `mutations` (those
    /// of its batches that committed, in order) wrote, so that the next load of what a
    /// write just changed needs no database read either. Only the commit thread calls
    /// it, and what it keeps is what the database now holds; loads that read before the
    /// COMMIT cannot overwrite it (their fills see a newer generation after `end`).
    /// Every other mutation evicts what it touched, in the group's order: a namespace's
    /// update and then its drop in one group (a drop swaps no version, so it need not
    /// wait for the update's group to end) must leave nothing, not the update's copy.
    /// `texts`: each mutation's documents as [`ObjectCache::texts_for`] made them
    /// (a document without one is copied here).
    pub(super) fn keep_written<'a>(
        &self,
        mutations: impl IntoIterator<Item = (&'a Mutation, &'a [Option<Arc<CachedText>>])>,
    ) {
        if self.budget == 0 {
            return;
        }
        let mut inner = self.lock();
        for (mutation, texts) in mutations {
            match mutation {
                Mutation::UpdateNamespace {
                    catalog,
                    namespace,
                    properties,
                    ..
                } => {
                    let key = namespace.key();
                    let cost = namespace_cost(&key, properties);
                    inner.keep(catalog.0, cost, self.budget, |c| {
                        c.namespaces
                            .insert(key, (properties.clone(), cost))
                            .map(|(_, old)| old)
                    });
                }
                Mutation::CommitObjects { catalog, writes } => {
                    for (i, w) in writes.iter().enumerate() {
                        let cost = cost(&w.metadata_location, &w.metadata);
                        inner.keep(catalog.0, cost, self.budget, |c| {
                            let metadata = match texts.get(i) {
                                Some(Some(text)) => text.clone(),
                                _ => Arc::new(CachedText::new(&w.metadata)),
                            };
                            let cached = Cached {
                                kind: w.kind,
                                metadata_location: w.metadata_location.clone(),
                                metadata,
                            };
                            c.objects
                                .entry(w.ident.namespace.key())
                                .or_default()
                                .insert(w.ident.name.clone(), Arc::new(cached))
                                .map(|old| old.size())
                        });
                    }
                }
                other => match Touched::of([other]) {
                    Touched::Nothing => {}
                    Touched::Objects(keys) => {
                        for key in &keys {
                            evict(&mut inner, key);
                        }
                    }
                    Touched::All => {
                        inner.catalogs.clear();
                        inner.bytes = 0;
                    }
                },
            }
        }
    }

    /// The cache's copies of the documents `mutation` writes, one per write, for
    /// [`keep_written`] once it commits; `None` for a document too large to be kept, and
    /// nothing when the cache is off. Made by the writer before it queues the batch, so
    /// that the copy (a few µs for a 23 KB document) is not on the commit thread, the
    /// store's one serial section.
    ///
    /// [`keep_written`]: ObjectCache::keep_written
    pub(super) fn texts_for(&self, mutation: &Mutation) -> Vec<Option<Arc<CachedText>>> {
        match mutation {
            Mutation::CommitObjects { writes, .. } if self.budget > 0 => writes
                .iter()
                .map(|w| {
                    fits(cost(&w.metadata_location, &w.metadata), self.budget)
                        .then(|| Arc::new(CachedText::new(&w.metadata)))
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Before a write group's statements (each part of a group has its own, and the
    /// counts nest): what they touch is evicted and pending.
    pub(super) fn begin(&self, touched: &Touched) {
        let mut inner = self.lock();
        inner.generation += 1;
        match touched {
            Touched::Nothing => {}
            Touched::All => {
                inner.pending_all += 1;
                inner.catalogs.clear();
                inner.bytes = 0;
            }
            Touched::Objects(keys) => {
                for key in keys {
                    *inner.pending.entry(key.clone()).or_default() += 1;
                    evict(&mut inner, key);
                }
            }
        }
    }

    /// After the transaction committed or rolled back.
    pub(super) fn end(&self, touched: &Touched) {
        let mut inner = self.lock();
        inner.generation += 1;
        match touched {
            Touched::Nothing => {}
            Touched::All => inner.pending_all -= 1,
            Touched::Objects(keys) => {
                for key in keys {
                    if let Some(count) = inner.pending.get_mut(key) {
                        *count -= 1;
                        if *count == 0 {
                            inner.pending.remove(key);
                        }
                    }
                }
            }
        }
    }
}

impl Inner {
    /// Inserts (by `insert`, which returns the cost of what it replaced) an entry of
    /// `cost` into catalog `id`, if that catalog is cached and the entry fits.
    fn keep(
        &mut self,
        id: i64,
        cost: usize,
        budget: usize,
        insert: impl FnOnce(&mut Catalog) -> Option<usize>,
    ) {
        if !fits(cost, budget) || !self.catalogs.values().any(|c| c.id == id) {
            return;
        }
        self.make_room(cost, budget);
        // Eviction may have dropped the catalog's entry.
        let Some(catalog) = self.catalogs.values_mut().find(|c| c.id == id) else {
            return;
        };
        let replaced = insert(catalog).unwrap_or(0);
        self.bytes = self.bytes + cost - replaced;
    }

    /// Whether a load's read, made with `ticket`, may fill the entry of `key`: no write
    /// began since the ticket, and none that may touch `key` is in flight.
    fn fillable(&self, ticket: &Ticket, key: &ObjectKey) -> bool {
        self.generation == ticket.0 && self.pending_all == 0 && !self.pending.contains_key(key)
    }

    /// Evicts until `cost` more bytes fit in `budget`.
    fn make_room(&mut self, cost: usize, budget: usize) {
        while self.bytes + cost > budget && self.bytes > 0 {
            evict_some(self);
        }
    }

    /// The entry of catalog `name`, whose id is `id`.
    fn catalog_entry(&mut self, name: &str, id: i64) -> &mut Catalog {
        let entry = self.catalogs.entry(name.to_string()).or_default();
        if entry.id != id {
            // Dropped and created again since (only possible when empty).
            *entry = Catalog {
                id,
                ..Catalog::default()
            };
        }
        entry
    }
}

fn evict(inner: &mut Inner, (id, namespace, name): &(i64, String, String)) {
    let Some(catalog) = inner.catalogs.values_mut().find(|c| c.id == *id) else {
        return;
    };
    if name.is_empty() {
        if let Some((_, cost)) = catalog.namespaces.remove(namespace) {
            inner.bytes -= cost;
        }
        return;
    }
    let Some(names) = catalog.objects.get_mut(namespace) else {
        return;
    };
    if let Some(old) = names.remove(name) {
        if names.is_empty() {
            catalog.objects.remove(namespace);
        }
        inner.bytes -= old.size();
    }
}

/// Frees room by dropping one namespace's entries (whichever the map yields first: the
/// order is arbitrary, so this is a random eviction, which suits skewed loads well enough
/// without the bookkeeping of an LRU).
fn evict_some(inner: &mut Inner) {
    let mut freed = 0;
    for catalog in inner.catalogs.values_mut() {
        if let Some(namespace) = catalog.objects.keys().next().cloned() {
            if let Some(names) = catalog.objects.remove(&namespace) {
                freed = names.values().map(|o| o.size()).sum();
            }
            if let Some((_, cost)) = catalog.namespaces.remove(&namespace) {
                freed += cost;
            }
            break;
        }
        if let Some(namespace) = catalog.namespaces.keys().next().cloned() {
            if let Some((_, cost)) = catalog.namespaces.remove(&namespace) {
                freed = cost;
            }
            break;
        }
    }
    if freed == 0 {
        inner.catalogs.clear();
        inner.bytes = 0;
    } else {
        inner.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CatalogId, Namespace, Properties};

    fn size(object: &StoredObject) -> usize {
        cost(&object.metadata_location, &object.metadata)
    }

    fn ident(name: &str) -> Ident {
        Ident::new(Namespace::root().child("ns"), name.into()).unwrap()
    }

    fn object(location: &str) -> StoredObject {
        StoredObject {
            kind: ObjectKind::Table,
            metadata_location: location.into(),
            metadata: "{}".into(),
        }
    }

    fn touched(name: &str) -> Touched {
        Touched::Objects(vec![(1, ident(name).namespace.key(), name.into())])
    }

    fn ticket(cache: &ObjectCache, name: &str) -> Ticket {
        match cache.get("c", &ident(name).namespace.key(), name) {
            Lookup::Miss(ticket) => ticket,
            Lookup::Hit(_) => panic!("unexpected hit"),
        }
    }

    fn hit(cache: &ObjectCache, name: &str) -> Option<String> {
        match cache.get("c", &ident(name).namespace.key(), name) {
            Lookup::Hit(o) => Some(o.metadata_location.clone()),
            Lookup::Miss(_) => None,
        }
    }

    #[test]
    fn a_read_no_write_overlapped_is_kept() {
        let cache = ObjectCache::new(1 << 20);
        let t = ticket(&cache, "t");
        cache.fill(t, "c", 1, &ident("t"), &object("v1"));
        assert_eq!(hit(&cache, "t").as_deref(), Some("v1"));
    }

    #[test]
    fn a_read_that_a_write_overlapped_is_not_kept() {
        let cache = ObjectCache::new(1 << 20);
        // Read before the write began, filled after it ended.
        let t = ticket(&cache, "t");
        cache.begin(&touched("t"));
        cache.end(&touched("t"));
        cache.fill(t, "c", 1, &ident("t"), &object("v1"));
        assert_eq!(hit(&cache, "t"), None);
        // Read while the write is in flight (the old row), filled before it ends.
        cache.begin(&touched("t"));
        let t = ticket(&cache, "t");
        cache.fill(t, "c", 1, &ident("t"), &object("v1"));
        assert_eq!(hit(&cache, "t"), None);
        cache.end(&touched("t"));
        assert_eq!(hit(&cache, "t"), None);
    }

    #[test]
    fn a_write_evicts_what_it_touches_only() {
        let cache = ObjectCache::new(1 << 20);
        for name in ["a", "b"] {
            let t = ticket(&cache, name);
            cache.fill(t, "c", 1, &ident(name), &object(name));
        }
        cache.begin(&touched("a"));
        assert_eq!(hit(&cache, "a"), None);
        assert_eq!(hit(&cache, "b").as_deref(), Some("b"));
        cache.end(&touched("a"));
        cache.begin(&Touched::All);
        cache.end(&Touched::All);
        assert_eq!(hit(&cache, "b"), None);
    }

    #[test]
    fn a_catalog_record_is_kept_until_a_catalog_write() {
        let cache = ObjectCache::new(1 << 20);
        let record = |version: i64| CatalogRecord {
            id: CatalogId(1),
            name: "c".into(),
            catalog_type: Default::default(),
            properties: Properties::from([("k".to_string(), "v".to_string())]),
            storage_config: serde_json::json!({"storageType": "FILE"}),
            connection: None,
            created_ms: 1,
            updated_ms: 2,
            version,
        };
        let ticket = || match cache.get_catalog("c") {
            Lookup::Miss(t) => t,
            Lookup::Hit(_) => panic!("unexpected hit"),
        };
        let hit = || match cache.get_catalog("c") {
            Lookup::Hit(r) => Some(r.version),
            Lookup::Miss(_) => None,
        };
        // Read while a catalog write is in flight: not kept, during or after it.
        cache.begin(&Touched::All);
        let t = ticket();
        cache.fill_catalog(t, &record(1));
        assert_eq!(hit(), None);
        cache.end(&Touched::All);
        // Read before a write began, filled after it ended: not kept.
        let t = ticket();
        cache.begin(&touched("t"));
        cache.end(&touched("t"));
        cache.fill_catalog(t, &record(1));
        assert_eq!(hit(), None);
        // A read no write overlapped is kept, and survives a table's commit.
        let t = ticket();
        cache.fill_catalog(t, &record(2));
        assert_eq!(hit(), Some(2));
        cache.begin(&touched("t"));
        cache.end(&touched("t"));
        assert_eq!(hit(), Some(2));
        assert!(matches!(cache.get_catalog("other"), Lookup::Miss(_)));
        // A catalog write drops it as it begins.
        cache.begin(&Touched::All);
        assert_eq!(hit(), None);
        cache.end(&Touched::All);
        assert_eq!(hit(), None);
        // Off with the cache.
        let off = ObjectCache::new(0);
        let t = match off.get_catalog("c") {
            Lookup::Miss(t) => t,
            Lookup::Hit(_) => panic!("unexpected hit"),
        };
        off.fill_catalog(t, &record(3));
        assert!(matches!(off.get_catalog("c"), Lookup::Miss(_)));
    }

    #[test]
    fn an_update_takes_a_namespaces_properties_out_of_the_cache() {
        let cache = ObjectCache::new(1 << 20);
        let ns = Namespace::root().child("ns");
        let props = Arc::new(StoredProperties::new(Properties::from([(
            "k".to_string(),
            "v".to_string(),
        )])));
        let Lookup::Miss(t) = cache.take_namespace("c", &ns.key()) else {
            panic!("unexpected hit");
        };
        cache.fill_namespace(t, "c", CatalogId(1), &ns, &props);
        let bytes = cache.lock().bytes;
        assert!(bytes > 0);
        let Lookup::Hit(taken) = cache.take_namespace("c", &ns.key()) else {
            panic!("a kept entry is taken");
        };
        // Handed over: the caller's is the only copy besides `props`, and the cache
        // no longer counts it.
        assert_eq!(Arc::strong_count(&taken), 2);
        assert_eq!(cache.lock().bytes, 0);
        assert!(matches!(
            cache.get_namespace("c", &ns.key()),
            Lookup::Miss(_)
        ));
        assert!(matches!(
            cache.take_namespace("c", &ns.key()),
            Lookup::Miss(_)
        ));
    }

    #[test]
    fn a_namespace_write_evicts_its_properties_only() {
        let cache = ObjectCache::new(1 << 20);
        let ns = Namespace::root().child("ns");
        let other = Namespace::root().child("other");
        let props = |v: &str| {
            Arc::new(StoredProperties::new(Properties::from([(
                "k".to_string(),
                v.to_string(),
            )])))
        };
        let hit = |namespace: &Namespace| match cache.get_namespace("c", &namespace.key()) {
            Lookup::Hit(p) => Some(p["k"].clone()),
            Lookup::Miss(_) => None,
        };
        let ticket = |namespace: &Namespace| match cache.get_namespace("c", &namespace.key()) {
            Lookup::Miss(t) => t,
            Lookup::Hit(_) => panic!("unexpected hit"),
        };
        for namespace in [&ns, &other] {
            let t = ticket(namespace);
            cache.fill_namespace(t, "c", CatalogId(1), namespace, &props("1"));
        }
        assert_eq!(hit(&ns).as_deref(), Some("1"));
        // A table's commit leaves namespaces alone.
        cache.begin(&touched("t"));
        cache.end(&touched("t"));
        assert_eq!(hit(&ns).as_deref(), Some("1"));
        let update =
            Mutation::update_namespace(CatalogId(1), ns.clone(), &props("1"), Properties::new());
        let touched = Touched::of([&update]);
        cache.begin(&touched);
        assert_eq!(hit(&ns), None);
        assert_eq!(hit(&other).as_deref(), Some("1"));
        // A read during the write (the old row) is not kept.
        let t = ticket(&ns);
        cache.fill_namespace(t, "c", CatalogId(1), &ns, &props("1"));
        assert_eq!(hit(&ns), None);
        cache.end(&touched);
        let t = ticket(&ns);
        cache.fill_namespace(t, "c", CatalogId(1), &ns, &props("2"));
        assert_eq!(hit(&ns).as_deref(), Some("2"));
        let drop = Mutation::DropNamespace {
            catalog: CatalogId(1),
            namespace: ns.clone(),
        };
        cache.begin(&Touched::of([&drop]));
        assert_eq!(hit(&ns), None);
    }

    /// A namespace updated and then dropped in one group: the update's copy goes with
    /// the drop (as do an object's after a later drop of it), and a create after both
    /// leaves nothing to serve but the database's row.
    #[test]
    fn a_later_mutation_of_the_group_evicts_what_an_earlier_one_kept() {
        let cache = ObjectCache::new(1 << 20);
        let ns = Namespace::root().child("ns");
        let update = Mutation::update_namespace(
            CatalogId(1),
            ns.clone(),
            &StoredProperties::new(Properties::new()),
            Properties::from([("k".into(), "2".into())]),
        );
        let drop = Mutation::DropNamespace {
            catalog: CatalogId(1),
            namespace: ns.clone(),
        };
        // The catalog is cached (every request reads its record first).
        let t = ticket(&cache, "t");
        cache.fill(t, "c", 1, &ident("t"), &object("v1"));
        let namespace_hit = || matches!(cache.get_namespace("c", &ns.key()), Lookup::Hit(_));
        for group in [vec![update.clone()], vec![update.clone(), drop.clone()]] {
            let touched = Touched::of(&group);
            cache.begin(&touched);
            cache.keep_written(group.iter().map(|m| (m, &[][..])));
            cache.end(&touched);
            assert_eq!(namespace_hit(), group.len() == 1, "{group:?}");
        }
        let drop_t = Mutation::DropObject {
            catalog: CatalogId(1),
            kind: ObjectKind::Table,
            ident: ident("t"),
            expected: "v1".into(),
            retain: None,
        };
        let group = [drop_t];
        let touched = Touched::of(&group);
        cache.begin(&touched);
        let t = ticket(&cache, "t");
        cache.keep_written(group.iter().map(|m| (m, &[][..])));
        cache.end(&touched);
        cache.fill(t, "c", 1, &ident("t"), &object("v1"));
        assert_eq!(hit(&cache, "t"), None);
        let inner = cache.lock();
        assert_eq!(inner.bytes, 0);
    }

    #[test]
    fn a_committed_write_is_kept_for_the_next_load() {
        let cache = ObjectCache::new(1 << 20);
        let t = ticket(&cache, "t");
        cache.fill(t, "c", 1, &ident("t"), &object("v1"));
        let write = |name: &str, catalog: i64| Mutation::CommitObjects {
            catalog: CatalogId(catalog),
            writes: vec![crate::store::ObjectWrite {
                ident: ident(name),
                kind: ObjectKind::Table,
                metadata_location: format!("{name}-v2"),
                expected_metadata_location: None,
                metadata: "{}".into(),
                location: "file:///t".into(),
                check_location: false,
            }],
        };
        let ns = Namespace::root().child("ns");
        let update = Mutation::update_namespace(
            CatalogId(1),
            ns.clone(),
            &StoredProperties::new(Properties::new()),
            Properties::from([("k".into(), "2".into())]),
        );
        // `u` is new; catalog 2 is not cached, so nothing of it is kept.
        let group = [write("t", 1), write("u", 1), write("w", 2), update];
        let touched = Touched::of(&group);
        // `t` brings its own copy (as a writer's `texts_for` makes it); the others are
        // copied by `keep_written`.
        let texts: Vec<Vec<Option<Arc<CachedText>>>> = group
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if i == 0 {
                    cache.texts_for(m)
                } else {
                    Vec::new()
                }
            })
            .collect();
        assert!(matches!(texts[0].as_slice(), [Some(_)]));
        cache.begin(&touched);
        cache.keep_written(group.iter().zip(texts.iter().map(Vec::as_slice)));
        cache.end(&touched);
        assert_eq!(hit(&cache, "t").as_deref(), Some("t-v2"));
        assert_eq!(hit(&cache, "u").as_deref(), Some("u-v2"));
        assert!(cache.lock().catalogs.values().all(|c| c.id == 1));
        match cache.get_namespace("c", &ns.key()) {
            Lookup::Hit(p) => assert_eq!(p["k"], "2"),
            Lookup::Miss(_) => panic!("the update was not kept"),
        }
        let inner = cache.lock();
        let objects: usize = inner.catalogs["c"]
            .objects
            .values()
            .flat_map(|n| n.values())
            .map(|o| o.size())
            .sum();
        let namespaces: usize = inner.catalogs["c"].namespaces.values().map(|n| n.1).sum();
        assert_eq!(inner.bytes, objects + namespaces);
    }

    #[test]
    fn a_writer_copies_only_what_the_cache_could_keep() {
        let commit = |documents: &[&str]| Mutation::CommitObjects {
            catalog: CatalogId(1),
            writes: documents
                .iter()
                .enumerate()
                .map(|(i, d)| crate::store::ObjectWrite {
                    ident: ident(&format!("t{i}")),
                    kind: ObjectKind::Table,
                    metadata_location: format!("t{i}-v1"),
                    expected_metadata_location: None,
                    metadata: d.to_string(),
                    location: format!("file:///t{i}/"),
                    check_location: false,
                })
                .collect(),
        };
        let big = "x".repeat(300);
        let cache = ObjectCache::new(1000); // a quarter: 250 bytes
        let texts = cache.texts_for(&commit(&["{}", &big]));
        assert!(matches!(texts.as_slice(), [Some(t), None] if t.as_str() == "{}"));
        assert!(ObjectCache::new(0).texts_for(&commit(&["{}"])).is_empty());
    }

    #[test]
    fn the_budget_bounds_the_bytes_kept() {
        let cache = ObjectCache::new(4 * size(&object("x")));
        for i in 0..20 {
            let name = format!("t{i}");
            let t = ticket(&cache, &name);
            cache.fill(t, "c", 1, &ident(&name), &object("x"));
        }
        let inner = cache.lock();
        assert!(
            inner.bytes <= cache.budget,
            "{} > {}",
            inner.bytes,
            cache.budget
        );
        let kept: usize = inner
            .catalogs
            .values()
            .flat_map(|c| c.objects.values())
            .map(|n| n.len())
            .sum();
        assert_eq!(kept * size(&object("x")), inner.bytes);
    }

    #[test]
    fn touched_by_mutation() {
        let m = Mutation::RenameObject {
            catalog: CatalogId(3),
            kind: ObjectKind::Table,
            from: ident("a"),
            to: ident("b"),
            expected: "x".into(),
        };
        match Touched::of([&m]) {
            Touched::Objects(keys) => assert_eq!(keys.len(), 2),
            _ => panic!("a rename touches two objects"),
        }
        assert!(matches!(Touched::of([&Mutation::None]), Touched::Nothing));
        let drop_catalog = Mutation::DropCatalog {
            catalog: CatalogId(3),
            name: "c".into(),
        };
        assert!(
            matches!(Touched::of([&m, &drop_catalog]), Touched::All),
            "a catalog change may remap every name"
        );
    }
}
