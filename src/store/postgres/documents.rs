//! Metadata documents this node has loaded, so that a load whose pointer has not moved
//! fetches only the pointer from PostgreSQL, not the document (~23 KB for a table with a
//! full metadata log: PostgreSQL decompresses it from TOAST and sends it, and Floe copies
//! it in, on every load).
//!
//! Why this stays exact on any number of nodes: a load still reads the pointer from the
//! database in its one round trip, as before, so it sees every write committed before it
//! (any node's); only the document is taken from memory, and only when the row still is
//! the very row version it was cached from: the same metadata location *and* the same
//! `xmin` (the transaction that wrote that version of the row; any update, even one that
//! kept the location, makes a new version with a new `xmin`). So nothing here needs to be
//! invalidated by a write, on this node or another; entries only age out of the budget.
//!
//! Bounded by a budget of bytes (`--metadata-cache-mib`, shared with the embedded store's
//! cache; 0 turns it off), with random eviction beyond it, like the embedded store's.
//! The documents live in the caches' own allocator heap (`store/cache_text.rs`). Keys
//! hash with foldhash (randomly seeded per process), which costs a fraction of SipHash
//! on every load.

use std::sync::{Arc, Mutex, MutexGuard};

use foldhash::HashMap;

use crate::store::cache_text::{CachedText, MetadataText};

/// A catalog name, a namespace key and an object name.
type Key = (String, String, String);

struct Entry {
    location: String,
    /// The row version's `xmin`, as text.
    version: String,
    document: Arc<CachedText>,
}

impl Entry {
    fn size(&self) -> usize {
        cost(&self.location, &self.version, self.document.as_str())
    }
}

fn cost(location: &str, version: &str, document: &str) -> usize {
    location.len() + version.len() + document.len() + 96
}

#[derive(Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    bytes: usize,
}

pub(super) struct Documents {
    inner: Mutex<Inner>,
    /// Most bytes kept; 0 turns the cache off.
    budget: usize,
}

/// What a load knows before it asks the database.
pub(super) struct Known {
    pub(super) location: String,
    pub(super) version: String,
    document: Arc<CachedText>,
}

impl Known {
    /// The document, shared with the cache (not copied).
    pub(super) fn document(&self) -> MetadataText {
        MetadataText::Shared(self.document.clone())
    }
}

impl Documents {
    pub(super) fn new(budget: usize) -> Self {
        Documents {
            inner: Mutex::new(Inner::default()),
            budget,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The row version and document last loaded for this object, if still kept.
    pub(super) fn get(&self, catalog: &str, namespace: &str, name: &str) -> Option<Known> {
        if self.budget == 0 {
            return None;
        }
        // A lookup by borrowed parts would need a second map shape; the key is small.
        let key = (catalog.to_string(), namespace.to_string(), name.to_string());
        let inner = self.lock();
        inner.entries.get(&key).map(|e| Known {
            location: e.location.clone(),
            version: e.version.clone(),
            document: e.document.clone(),
        })
    }

    /// Keeps the document a load read from the row version (`location`, `version`) of
    /// the object at `key` (catalog, namespace key, name), replacing what was kept.
    /// Returns the document for the load to hand out: the kept block, shared (so the
    /// load copies the text once, not twice), or its own copy when nothing is kept.
    pub(super) fn put(
        &self,
        key: (&str, &str, &str),
        location: &str,
        version: &str,
        document: &str,
    ) -> MetadataText {
        let size = cost(location, version, document);
        if size > self.budget / 4 {
            return document.into(); // off, or one document would crowd out the rest
        }
        // Copied before the lock is taken: the copy is the costly part.
        let shared = Arc::new(CachedText::new(document));
        let entry = Entry {
            location: location.to_string(),
            version: version.to_string(),
            document: shared.clone(),
        };
        let (catalog, namespace, name) = key;
        let key = (catalog.to_string(), namespace.to_string(), name.to_string());
        let mut inner = self.lock();
        while inner.bytes + size > self.budget && !inner.entries.is_empty() {
            evict_some(&mut inner);
        }
        inner.bytes += size;
        if let Some(old) = inner.entries.insert(key, entry) {
            inner.bytes -= old.size();
        }
        MetadataText::Shared(shared)
    }
}

/// Drops a few entries (whichever the map yields first: its order is arbitrary, so this
/// is a random eviction, as in the embedded store's cache).
fn evict_some(inner: &mut Inner) {
    let victims: Vec<Key> = inner.entries.keys().take(16).cloned().collect();
    for key in victims {
        if let Some(old) = inner.entries.remove(&key) {
            inner.bytes -= old.size();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_document_loaded_per_object() {
        let docs = Documents::new(1 << 20);
        assert!(docs.get("c", "ns", "t").is_none());
        docs.put(("c", "ns", "t"), "s3://b/t/m1.json", "7", "{\"v\":1}");
        let handed = docs.put(("c", "ns", "t"), "s3://b/t/m2.json", "9", "{\"v\":2}");
        assert_eq!(handed, "{\"v\":2}");
        let known = docs.get("c", "ns", "t").unwrap();
        // The load hands out the kept block itself, not a second copy.
        match (&handed, known.document()) {
            (MetadataText::Shared(a), MetadataText::Shared(b)) => assert!(Arc::ptr_eq(a, &b)),
            other => panic!("not shared: {other:?}"),
        }
        assert_eq!(known.location, "s3://b/t/m2.json");
        assert_eq!(known.version, "9");
        assert_eq!(known.document(), "{\"v\":2}");
        assert!(docs.get("c", "ns", "u").is_none());
        assert!(docs.get("d", "ns", "t").is_none());
        assert_eq!(
            docs.lock().bytes,
            cost("s3://b/t/m2.json", "9", "{\"v\":2}")
        );
    }

    #[test]
    fn the_budget_bounds_the_bytes_kept() {
        let document = "x".repeat(1000);
        let docs = Documents::new(20 * cost("loc-00", "1", &document));
        for i in 0..100 {
            let name = format!("t{i}");
            docs.put(("c", "ns", &name), &format!("loc-{i:02}"), "1", &document);
            let inner = docs.lock();
            assert!(
                inner.bytes <= docs.budget,
                "{} > {}",
                inner.bytes,
                docs.budget
            );
            let sum: usize = inner.entries.values().map(Entry::size).sum();
            assert_eq!(inner.bytes, sum);
        }
        assert!(docs.lock().entries.len() >= 4);
    }

    #[test]
    fn a_zero_budget_keeps_nothing_and_a_huge_document_is_not_kept() {
        let off = Documents::new(0);
        assert_eq!(off.put(("c", "ns", "t"), "l", "1", "{}"), "{}");
        assert!(off.get("c", "ns", "t").is_none());
        let small = Documents::new(1000);
        let huge = "x".repeat(400);
        assert_eq!(small.put(("c", "ns", "t"), "l", "1", &huge), huge);
        assert!(small.get("c", "ns", "t").is_none());
    }
}
