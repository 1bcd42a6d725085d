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
//! hit and soon evicted. Bounded by a budget of the models' memory, estimated from their
//! documents and schemas (`model_bytes`), with the properties' text kept beside a model;
//! beyond it arbitrary entries go. Random eviction keeps a share of hits when commits go
//! round more objects than fit, where least-recently-used would keep none.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use iceberg::spec::{SchemaRef, TableMetadata, ViewMetadata};

use super::error::CatalogResult;
use crate::json_text::{Fields, MapText};
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

    /// The memory the entry holds, for the budget: the model's estimate and the text kept
    /// beside it.
    fn cost(&self, document_len: usize) -> usize {
        let (schemas, log_text, map, properties, fields) = match self {
            Model::Table(kept) => {
                // An entry's text: its file's location, and about 50 bytes of
                // `{"timestamp-ms":…,"metadata-file":""}` around it.
                let log = kept.model.metadata_log().iter();
                let log_text = log.map(|entry| entry.metadata_file.len() + 50).sum();
                let schemas = schema_fields(kept.model.schemas_iter());
                let map = kept.model.properties();
                (schemas, log_text, map, &kept.properties, &kept.fields)
            }
            Model::View(kept) => {
                let schemas = schema_fields(kept.model.schemas_iter());
                let map = kept.model.properties();
                (schemas, 0, map, &kept.properties, &kept.fields)
            }
        };
        model_bytes(document_len, schemas, log_text, map)
            + properties.as_ref().map_or(0, MapText::size)
            + fields.as_ref().map_or(0, Fields::size)
    }
}

/// The fields of all these schemas, nested ones included.
fn schema_fields<'a>(schemas: impl Iterator<Item = &'a SchemaRef>) -> usize {
    schemas
        .map(|schema| schema.field_id_to_fields().len())
        .sum()
}

/// The heap bytes of a parsed model, estimated from its document's length, its schemas'
/// fields, the length of its metadata log's text and its properties.
///
/// Why not the document's length: a model takes several times its text, and how many
/// times depends on what the text holds. Measured with iceberg-rust 0.10.1 (a counting
/// allocator; the test below checks the estimate against it): about 3 KiB for a new
/// two-column table of 600 bytes; 700-800 bytes per schema field (each sits in several
/// index maps beside the field itself: 13x the text for a 1,000-column table); about 2x
/// the text for a snapshot; about the text for a metadata-log entry; and for properties
/// their hash table, whose size doubles in steps (500 short properties took 83 KB where
/// three times their text said 74), so it is counted from the map itself. So: three
/// times the text outside the properties, schemas counted per field on top, the metadata
/// log once instead of three times, the properties as held. Counting documents only, a
/// 16 MiB budget let the server's RSS grow by 77 MiB with models of new tables.
fn model_bytes(
    document_len: usize,
    schema_fields: usize,
    log_text: usize,
    properties: &HashMap<String, String>,
) -> usize {
    let (text, held) = properties_bytes(properties);
    (2048 + 820 * schema_fields + 3 * document_len.saturating_sub(text))
        .saturating_sub(2 * log_text)
        + held
}

/// A properties map's text in a document (`"key":"value",` each, escapes not counted:
/// so the rest of the document is never under-counted) and the heap bytes it holds:
/// hashbrown's buckets of two `String`s with a control byte each (and a group's worth
/// more), and each key's and value's bytes.
fn properties_bytes(properties: &HashMap<String, String>) -> (usize, usize) {
    let strings: usize = properties.iter().map(|(k, v)| k.len() + v.len()).sum();
    let text = strings + 6 * properties.len();
    // hashbrown keeps a table of 8 buckets or more at most 7/8 full, a smaller one one
    // bucket short of full; `capacity` is that many entries.
    let buckets = match properties.capacity() {
        0 => 0,
        small if small < 7 => small + 1,
        capacity => capacity / 7 * 8,
    };
    let bucket = std::mem::size_of::<(String, String)>() + 1;
    let table = if buckets == 0 {
        0
    } else {
        buckets * bucket + 16
    };
    (text, table + strings)
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
    /// its estimated memory and the text kept beside it (`Model::cost`).
    pub(super) fn keep(&self, location: &str, document: &str, model: Model) {
        let cost = model.cost(document.len());
        self.put(location, document, model, cost);
    }
}

/// The hash an entry's document is recognised by: xxh3, vectorised. The ETags' fold
/// (`stable_hash::fold_words`) takes one word at a time through a chain of dependent
/// multiplies, and a commit's two calls over its documents were 1.4% of the server's
/// samples in the 50/50 mix (BENCHMARKS.md). Never stored or sent, so it may change with
/// a build.
fn document_hash(document: &str) -> u64 {
    twox_hash::XxHash3_64::oneshot(document.as_bytes())
}

/// Models by metadata location, for one kind of object.
pub(super) struct ParsedCache<T> {
    budget: usize,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    entries: HashMap<String, Entry<T>>,
    /// Sum of the entries' costs.
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
    /// What the entry counts against the budget (`Model::cost`).
    cost: usize,
    model: T,
}

impl<T> ParsedCache<T> {
    /// A cache holding entries of at most `budget` bytes in all (0: off).
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
        let hash = document_hash(document);
        let entry = self.lock().remove(location);
        // Another document at the same location: not this node's write. Dropped outside
        // the lock (freeing a model is thousands of deallocations).
        let model = entry
            .filter(|e| e.len == document.len() && e.hash == hash)
            .map(|e| e.model);
        crate::metrics::record_cache("commit", model.is_some());
        model
    }

    /// Keeps `model`, the parsed form of `document` as written to `location`, counting
    /// `cost` bytes against the budget.
    pub(super) fn put(&self, location: &str, document: &str, model: T, cost: usize) {
        if self.budget == 0 || cost > self.budget {
            return;
        }
        let entry = Entry {
            len: document.len(),
            hash: document_hash(document),
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
            cache.put(&format!("loc-{i}"), &doc, i, 30);
            let (entries, bytes) = cache.held();
            assert!(bytes <= 100, "{bytes} bytes held");
            assert_eq!(bytes, entries * 30);
        }
        assert_eq!(cache.take("loc-9", &doc), Some(9));
        // An entry costing more than the whole budget is not kept, and evicts nothing.
        cache.put("big", &"y".repeat(60), 99, 101);
        assert_eq!(cache.take("big", &"y".repeat(60)), None);
        assert_eq!(cache.held().0, 2);
        // Putting the same location twice counts it once.
        cache.put("loc-x", &doc, 1, 30);
        cache.put("loc-x", &doc, 2, 30);
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

/// `model_bytes` against what iceberg-rust's models really take.
#[cfg(test)]
mod estimate_tests {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use serde_json::{json, Value};

    use super::*;

    /// Counts the bytes this thread holds. It is the allocator of the whole unit-test binary
    /// (one per binary), but costs the other tests only a thread-local add.
    struct Counting;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
    }

    fn count(delta: isize) {
        // `try_with`: an allocation may come after this thread's locals are gone.
        let _ = LIVE.try_with(|live| live.set(live.get() + delta));
    }

    // SAFETY: every call is passed to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            count(-(layout.size() as isize));
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size as isize - layout.size() as isize);
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// The heap bytes a model parsed from `document` holds, itself included (the cache
    /// keeps it boxed); the mean of ten parses.
    fn held<T>(document: &str, parse: impl Fn(&str) -> T) -> usize {
        let before = LIVE.with(Cell::get);
        let models: Vec<T> = (0..10).map(|_| parse(document)).collect();
        let after = LIVE.with(Cell::get);
        drop(models);
        (after - before) as usize / 10
    }

    fn fields(count: usize) -> Value {
        let field = |i| {
            json!({"id": i, "name": format!("column_{i}"), "required": false,
            "type": if i % 2 == 0 { "string" } else { "long" }})
        };
        (1..=count).map(field).collect()
    }

    fn properties(count: usize) -> Value {
        let property = |i| (format!("some.property.{i}"), json!(format!("value-{i}")));
        Value::Object((0..count).map(property).collect())
    }

    /// A V2 table document: `columns` columns, `snapshots` snapshots, `log` metadata-log
    /// entries and `props` properties.
    fn table(columns: usize, snapshots: i64, log: i64, props: usize) -> String {
        let at = |i: i64| 1_700_000_000_000 + i;
        let snapshot = |i: i64| {
            json!({"snapshot-id": i, "timestamp-ms": at(i),
            "sequence-number": i, "schema-id": 0, "parent-snapshot-id": (i > 1).then_some(i - 1),
            "manifest-list": format!("file:///w/ns/t/metadata/snap-{i}-1-4a4c0e7d1f3b.avro"),
            "summary": {"operation": "append", "added-records": "3", "added-data-files": "1",
                "total-records": "30", "total-data-files": "10"}})
        };
        let log_entry = |i: i64| {
            json!({"timestamp-ms": at(i), "metadata-file":
            format!("file:///w/ns/t/metadata/{i:05}-0b8e0a47-0c8f-4b7a-9f1e-4a4c0e7d1f3b.metadata.json")})
        };
        let mut document = json!({"format-version": 2,
            "table-uuid": "0b8e0a47-0c8f-4b7a-9f1e-4a4c0e7d1f3b", "location": "file:///w/ns/t",
            "last-sequence-number": snapshots, "last-updated-ms": at(99_999),
            "last-column-id": columns, "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": fields(columns)}],
            "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999, "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}], "properties": properties(props),
            "snapshots": (1..=snapshots).map(snapshot).collect::<Value>(),
            "snapshot-log": (1..=snapshots).map(|i| json!({"snapshot-id": i, "timestamp-ms": at(i)}))
                .collect::<Value>(),
            "metadata-log": (1..=log).map(log_entry).collect::<Value>(), "refs": {}});
        if snapshots > 0 {
            document["current-snapshot-id"] = json!(snapshots);
            document["refs"] = json!({"main": {"snapshot-id": snapshots, "type": "branch"}});
        }
        document.to_string()
    }

    /// A view document: `versions` versions over one schema of `columns` columns.
    fn view(columns: usize, versions: i64, props: usize) -> String {
        let version = |i: i64| {
            json!({"version-id": i, "timestamp-ms": 1_700_000_000_000 + i,
            "schema-id": 0, "summary": {"engine-name": "spark", "engine-version": "3.5.1"},
            "default-namespace": ["ns"], "representations": [{"type": "sql", "dialect": "spark",
                "sql": format!("SELECT id, data FROM ns.t WHERE id > {i}")}]})
        };
        json!({"view-uuid": "0b8e0a47-0c8f-4b7a-9f1e-4a4c0e7d1f3b", "format-version": 1,
            "location": "file:///w/ns/v", "current-version-id": versions,
            "schemas": [{"type": "struct", "schema-id": 0, "fields": fields(columns)}],
            "versions": (1..=versions).map(version).collect::<Value>(),
            "version-log": (1..=versions)
                .map(|i| json!({"version-id": i, "timestamp-ms": 1_700_000_000_000 + i}))
                .collect::<Value>(),
            "properties": properties(props)})
        .to_string()
    }

    /// The estimate of `document`'s model (`wrap` makes it a `Model`) is never below what
    /// the model holds, nor more than twice it.
    fn check<M: serde::de::DeserializeOwned>(
        what: &str,
        document: &str,
        wrap: fn(Box<Kept<M>>) -> Model,
    ) {
        let parse = |text: &str| serde_json::from_str::<M>(text).unwrap();
        let real = held(document, parse);
        let model = wrap(Box::new(Kept {
            model: parse(document),
            properties: None,
            fields: None,
        }));
        let estimate = model.cost(document.len());
        assert!(
            real <= estimate && estimate <= 2 * real,
            "{what} ({} bytes of text): model {real} bytes, estimated {estimate}",
            document.len()
        );
    }

    #[test]
    fn the_estimate_covers_a_model_and_at_most_doubles_it() {
        let shapes = [
            (2, 0, 0, 0),
            (10, 0, 0, 10),
            (200, 0, 0, 0),
            (1000, 0, 0, 0),
            (2, 10, 10, 0),
            (2, 100, 0, 0),
            (2, 0, 100, 0),
            (2, 100, 100, 0),
            (20, 100, 100, 10),
            (2, 0, 0, 200),
            // The Polaris mix's tables after many property updates: the properties' hash
            // table doubles in steps (three times their text was 11% short at 500).
            (10, 0, 100, 100),
            (10, 0, 100, 500),
            (10, 0, 100, 1500),
        ];
        for (columns, snapshots, log, props) in shapes {
            let what = format!("table {columns}c {snapshots}s {log}l {props}p");
            let document = table(columns, snapshots, log, props);
            check::<TableMetadata>(&what, &document, Model::Table);
        }
        for (columns, versions, props) in [
            (2, 1, 0),
            (20, 1, 5),
            (5, 50, 0),
            (300, 10, 0),
            (10, 1, 500),
        ] {
            let what = format!("view {columns}c {versions}v {props}p");
            check::<ViewMetadata>(&what, &view(columns, versions, props), Model::View);
        }
    }
}
