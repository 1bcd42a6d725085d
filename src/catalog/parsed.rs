//! The parsed metadata of the documents this node's commits wrote, kept so that the next
//! commit to the same table or view starts from it instead of parsing the document again.
//!
//! Why: parsing a stored document is about a third of a commit's CPU. iceberg-rust's
//! format-version enum is untagged (V3 tried first) with flattened fields, so serde
//! buffers the whole document into its `Content` tree before building the model. A commit
//! already holds the model of the document it writes; keeping it until the next commit of
//! that object saves the parse (BENCHMARKS.md, "Commits without a parse").
//!
//! Why it is exact:
//! - An entry is keyed by the metadata file's location. Floe names every file it writes
//!   with a random UUID and never rewrites one.
//! - It is used only for a stored document of the same length and hash as the one it
//!   was written as. So a document that came from anywhere else (a register, another
//!   node, a file replaced behind the catalog's back) is parsed as before.
//! - Parsing what iceberg-rust serialises gives back the same model: unit tests check
//!   this for every format version after every kind of update, and with the self-check
//!   on (debug builds, and the test suites' servers) each hit is compared with a fresh
//!   parse.
//!
//! A commit *takes* its base out (no clone of the model), and puts the new model in under
//! the new location, whether or not that write then lands: a pipelined commit may build
//! on it before it is durable (`locks.rs`), and an entry no stored pointer names is never
//! hit and soon evicted. Bounded by a budget in document bytes (with the properties' text
//! kept beside a model); beyond it arbitrary entries go. Random eviction keeps a share of
//! hits when commits go round more objects than fit, where least-recently-used would keep
//! none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use iceberg::spec::{TableMetadata, ViewMetadata};

use super::error::CatalogResult;
use crate::json_text::{Fields, MapText};
use crate::stable_hash::fold_words;
use crate::store::StoredObject;

/// Whether every kept model used is compared with a fresh parse of its document, and every
/// document written with the `Value` path's (`commit::metadata_json`); a mismatch panics.
/// On in debug builds; the test suites turn it on in release builds too (CI runs them so).
static SELF_CHECK: AtomicBool = AtomicBool::new(cfg!(debug_assertions));

/// Turns the self-check on or off (the test suites' servers turn it on).
pub fn set_self_check(on: bool) {
    SELF_CHECK.store(on, Ordering::Relaxed);
}

pub(super) fn self_check() -> bool {
    SELF_CHECK.load(Ordering::Relaxed)
}

/// What a cached location holds. Boxed: a view's model is much smaller than a table's.
pub(super) enum Model {
    Table(Box<Kept<TableMetadata>>),
    View(Box<Kept<ViewMetadata>>),
}

/// A model, the text its document's properties were written from (`None`: the model was
/// parsed, or its properties need an escape), which the next commit changes instead of
/// writing all the properties again (`json_text::map_text`), and where its document's
/// top-level fields lie (`None`: parsed), which the next commit copies when it changes
/// only properties (`json_text::fields`).
pub(super) struct Kept<M> {
    pub(super) model: M,
    pub(super) properties: Option<MapText>,
    pub(super) fields: Option<Fields>,
}

impl Model {
    /// The kept table, if this is one.
    pub(super) fn into_table(self) -> Option<Kept<TableMetadata>> {
        match self {
            Model::Table(kept) => Some(*kept),
            Model::View(_) => None,
        }
    }

    /// The kept view, if this is one.
    pub(super) fn into_view(self) -> Option<Kept<ViewMetadata>> {
        match self {
            Model::View(kept) => Some(*kept),
            Model::Table(_) => None,
        }
    }

    /// Bytes beyond the document's that the entry holds, for the budget.
    fn extra_bytes(&self) -> usize {
        let (properties, fields) = match self {
            Model::Table(kept) => (&kept.properties, &kept.fields),
            Model::View(kept) => (&kept.properties, &kept.fields),
        };
        properties.as_ref().map_or(0, MapText::size) + fields.as_ref().map_or(0, Fields::size)
    }
}

impl ParsedCache<Model> {
    /// The model of a stored object's document: the one its commit wrote, when this node
    /// still holds it (`kept` picks the object's kind), else `parse`d.
    pub(super) fn base<T: PartialEq>(
        &self,
        object: &StoredObject,
        kept: impl FnOnce(Model) -> Option<Kept<T>>,
        parse: impl Fn(&str) -> CatalogResult<T>,
    ) -> CatalogResult<Kept<T>> {
        match self
            .take(&object.metadata_location, &object.metadata)
            .and_then(kept)
        {
            // Its properties' text and fields are checked with every document written
            // from them (`commit::metadata_document`, `commit::table_document_spliced`).
            Some(kept) => {
                assert!(
                    !self_check()
                        || parse(&object.metadata).is_ok_and(|parsed| parsed == kept.model),
                    "the kept model of {} differs from its document's",
                    object.metadata_location
                );
                Ok(kept)
            }
            None => parse(&object.metadata).map(|model| Kept {
                model,
                properties: None,
                fields: None,
            }),
        }
    }

    /// Keeps `model`, the parsed form of `document` as written to `location`, counting
    /// the properties' text it holds too.
    pub(super) fn keep(&self, location: &str, document: &str, model: Model) {
        let extra = model.extra_bytes();
        self.put(location, document, model, extra);
    }
}

/// Models by metadata location, for one kind of object.
pub(super) struct ParsedCache<T> {
    budget: usize,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    entries: HashMap<String, Entry<T>>,
    /// Sum of the entries' document lengths.
    bytes: usize,
}

impl<T> Inner<T> {
    /// Takes the entry at `location` out, keeping `bytes` the sum of what stays.
    fn remove(&mut self, location: &str) -> Option<Entry<T>> {
        let entry = self.entries.remove(location)?;
        self.bytes -= entry.cost;
        Some(entry)
    }
}

struct Entry<T> {
    len: usize,
    hash: u64,
    /// What the entry counts against the budget: the document's length and `extra`.
    cost: usize,
    model: T,
}

impl<T> ParsedCache<T> {
    /// A cache holding models of at most `budget` bytes of documents (0: off).
    pub(super) fn new(budget: usize) -> Self {
        ParsedCache {
            budget,
            inner: Mutex::new(Inner {
                entries: HashMap::new(),
                bytes: 0,
            }),
        }
    }

    /// The model of `document`, stored at `location`, taken out of the cache; `None` when
    /// this cache does not hold that very document.
    pub(super) fn take(&self, location: &str, document: &str) -> Option<T> {
        if self.budget == 0 {
            return None;
        }
        let hash = fold_words(&[document.as_bytes()]);
        let entry = self.lock().remove(location);
        // Another document at the same location: not this node's write. Dropped outside
        // the lock (freeing a model is thousands of deallocations).
        let model = entry
            .filter(|e| e.len == document.len() && e.hash == hash)
            .map(|e| e.model);
        crate::metrics::record_cache("commit", model.is_some());
        model
    }

    /// Keeps `model`, the parsed form of `document` as written to `location`, with
    /// `extra` bytes more than the document held beside it.
    pub(super) fn put(&self, location: &str, document: &str, model: T, extra: usize) {
        let cost = document.len() + extra;
        if self.budget == 0 || cost > self.budget {
            return;
        }
        let entry = Entry {
            len: document.len(),
            hash: fold_words(&[document.as_bytes()]),
            cost,
            model,
        };
        let mut evicted = Vec::new();
        {
            let mut inner = self.lock();
            evicted.extend(inner.remove(location));
            inner.bytes += entry.cost;
            inner.entries.insert(location.to_string(), entry);
            while inner.bytes > self.budget {
                let Some(key) = inner.entries.keys().find(|k| *k != location).cloned() else {
                    break;
                };
                evicted.extend(inner.remove(&key));
            }
        }
        drop(evicted);
    }

    /// Drops the model written to `location` (its write was refused).
    pub(super) fn forget(&self, location: &str) {
        // Dropped outside the lock, as in `take`.
        let removed = self.lock().remove(location);
        drop(removed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        // The map stays consistent whatever panicked while holding it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_is_taken_once_and_only_for_its_own_document() {
        let cache = ParsedCache::new(1 << 20);
        cache.put("s3://b/t/metadata/1-a.metadata.json", "{\"a\":1}", 1, 0);
        // Another document at the same location: a miss, and the entry is gone.
        assert_eq!(
            cache.take("s3://b/t/metadata/1-a.metadata.json", "{\"a\":2}"),
            None
        );
        assert_eq!(cache.held(), (0, 0));
        cache.put("s3://b/t/metadata/1-a.metadata.json", "{\"a\":1}", 1, 0);
        assert_eq!(
            cache.take("s3://b/t/metadata/2-b.metadata.json", "{\"a\":1}"),
            None
        );
        assert_eq!(
            cache.take("s3://b/t/metadata/1-a.metadata.json", "{\"a\":1}"),
            Some(1)
        );
        assert_eq!(
            cache.take("s3://b/t/metadata/1-a.metadata.json", "{\"a\":1}"),
            None
        );
        assert_eq!(cache.held(), (0, 0));
    }

    #[test]
    fn same_length_documents_are_told_apart_by_hash() {
        let cache = ParsedCache::new(1 << 20);
        cache.put("l", "{\"k\":\"abcdefgh\"}", 1, 0);
        assert_eq!(cache.take("l", "{\"k\":\"abcdefgi\"}"), None);
    }

    #[test]
    fn the_budget_bounds_what_is_kept_and_the_newest_entry_stays() {
        let cache = ParsedCache::new(100);
        let doc = "x".repeat(30);
        for i in 0..10 {
            cache.put(&format!("loc-{i}"), &doc, i, 0);
            let (entries, bytes) = cache.held();
            assert!(bytes <= 100, "{bytes} bytes held");
            assert_eq!(bytes, entries * 30);
        }
        assert_eq!(cache.take("loc-9", &doc), Some(9));
        // A document larger than the whole budget is not kept, and evicts nothing.
        cache.put("big", &"y".repeat(101), 99, 0);
        // What is kept beside a model counts too.
        cache.put("big-extra", &"y".repeat(60), 98, 41);
        assert_eq!(cache.take("big-extra", &"y".repeat(60)), None);
        assert_eq!(cache.take("big", &"y".repeat(101)), None);
        assert_eq!(cache.held().0, 2);
        // Putting the same location twice counts it once.
        cache.put("loc-x", &doc, 1, 0);
        cache.put("loc-x", &doc, 2, 0);
        assert_eq!(cache.take("loc-x", &doc), Some(2));
    }

    #[test]
    fn forget_and_a_zero_budget_keep_nothing() {
        let cache = ParsedCache::new(1 << 20);
        cache.put("l", "{}", 1, 0);
        cache.forget("l");
        assert_eq!(cache.held(), (0, 0));
        assert_eq!(cache.take("l", "{}"), None);
        let off = ParsedCache::new(0);
        off.put("l", "{}", 1, 0);
        assert_eq!(off.take("l", "{}"), None);
    }
}
