//! The metadata caches' documents (both stores'), kept in a mimalloc heap of their own.
//!
//! Why: a cached document (tens of KB) lives until a write evicts it, while documents of
//! the same size are allocated and freed all the time by requests (response bodies,
//! commits' serialized metadata). Sharing mimalloc's 512 KiB pages with them, each
//! long-lived entry pinned a page that was otherwise free: after a minute of the 50/50
//! mix, ~12 MB of cached documents held ~100 MiB of resident memory (BENCHMARKS.md,
//! "Issue #12's goals"). In a heap of their own (mimalloc v3 heaps take allocations from
//! any thread) the entries pack together and reuse each other's freed blocks.
//!
//! Under another global allocator (the tests use the system one) this is still correct:
//! the heap is mimalloc's own, and its blocks go back to it through `mi_free`.
//!
//! [`MetadataText`] is how a stored pointer carries its document: its own string, or a
//! cached block shared by reference count, so a load that hits a cache copies nothing.

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::{Arc, OnceLock};

use libmimalloc_sys::{mi_free, mi_heap_malloc, mi_heap_new, mi_heap_t};

/// The process's one heap for cached text, made on first use and never deleted.
struct Heap(NonNull<mi_heap_t>);

// SAFETY: mimalloc v3's first-class heaps may be allocated from on any thread (and their
// blocks freed on any thread); the pointer itself is never written after creation.
unsafe impl Send for Heap {}
unsafe impl Sync for Heap {}

fn heap() -> NonNull<mi_heap_t> {
    static HEAP: OnceLock<Heap> = OnceLock::new();
    HEAP.get_or_init(|| {
        // SAFETY: no preconditions; null means mimalloc could not make a heap.
        let heap = unsafe { mi_heap_new() };
        Heap(NonNull::new(heap).expect("mimalloc could not create the cache's heap"))
    })
    .0
}

/// Immutable UTF-8 text in the cache's heap.
pub struct CachedText {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the text is immutable once made, and mimalloc frees a block from any thread.
unsafe impl Send for CachedText {}
unsafe impl Sync for CachedText {}

impl CachedText {
    pub(crate) fn new(text: &str) -> CachedText {
        let len = text.len();
        if len == 0 {
            return CachedText {
                ptr: NonNull::dangling(),
                len,
            };
        }
        // SAFETY: the heap is live for the whole process; mimalloc's blocks are aligned
        // for any type, bytes included.
        let raw = unsafe { mi_heap_malloc(heap().as_ptr(), len) }.cast::<u8>();
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(std::alloc::Layout::array::<u8>(len).expect("len"));
        };
        // SAFETY: `ptr` is a fresh block of `len` bytes that cannot overlap `text`.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), ptr.as_ptr(), len) };
        CachedText { ptr, len }
    }

    pub(crate) fn as_str(&self) -> &str {
        // SAFETY: `len` bytes copied from a `str` at creation and never changed since.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.ptr.as_ptr(), self.len))
        }
    }
}

impl Drop for CachedText {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated by `mi_heap_malloc` in `new` and freed only here.
            unsafe { mi_free(self.ptr.as_ptr().cast()) }
        }
    }
}

/// A metadata document's text: a string of its own, or a cached document shared without
/// a copy. A load served from the cache holds the cache's block (a reference count), not
/// a copy of its tens of KB: that copy, and its allocation and free, were about 2% of the
/// server's CPU in the 50/50 mix (BENCHMARKS.md, "Cached documents shared, not copied").
#[derive(Clone)]
pub enum MetadataText {
    Owned(String),
    Shared(Arc<CachedText>),
}

impl MetadataText {
    pub fn as_str(&self) -> &str {
        match self {
            MetadataText::Owned(text) => text,
            MetadataText::Shared(text) => text.as_str(),
        }
    }

    /// The text in the cache's heap: shared as it is, or copied there once.
    pub(crate) fn shared(&self) -> Arc<CachedText> {
        match self {
            MetadataText::Shared(text) => text.clone(),
            MetadataText::Owned(text) => Arc::new(CachedText::new(text)),
        }
    }

    pub fn into_string(self) -> String {
        match self {
            MetadataText::Owned(text) => text,
            MetadataText::Shared(text) => text.as_str().to_string(),
        }
    }
}

impl Deref for MetadataText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for MetadataText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for MetadataText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for MetadataText {}

impl PartialEq<&str> for MetadataText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for MetadataText {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl From<String> for MetadataText {
    fn from(text: String) -> Self {
        MetadataText::Owned(text)
    }
}

impl From<&str> for MetadataText {
    fn from(text: &str) -> Self {
        MetadataText::Owned(text.to_string())
    }
}

impl serde::Serialize for MetadataText {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for MetadataText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(MetadataText::Owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_across_threads() {
        let texts: Vec<CachedText> = ["", "x", &"é".repeat(20_000)]
            .into_iter()
            .map(CachedText::new)
            .collect();
        assert_eq!(texts[0].as_str(), "");
        assert_eq!(texts[1].as_str(), "x");
        let big = std::thread::spawn(move || {
            let big = texts.into_iter().nth(2).unwrap();
            big.as_str().to_string()
        })
        .join()
        .unwrap();
        assert_eq!(big, "é".repeat(20_000));
    }

    #[test]
    fn shared_and_owned_text_read_and_compare_alike() {
        let owned = MetadataText::from("{\"a\":1}");
        let shared = MetadataText::Shared(owned.shared());
        assert_eq!(owned, shared);
        assert_eq!(shared, "{\"a\":1}");
        assert_eq!(shared.len(), 7);
        // Sharing a shared text is the same block, not a copy.
        let again = shared.shared();
        match &shared {
            MetadataText::Shared(block) => assert!(Arc::ptr_eq(block, &again)),
            MetadataText::Owned(_) => unreachable!(),
        }
        let json = serde_json::to_string(&shared).unwrap();
        assert_eq!(json, "\"{\\\"a\\\":1}\"");
        let back: MetadataText = serde_json::from_str(&json).unwrap();
        assert_eq!(back.into_string(), "{\"a\":1}");
    }
}
