//! SQLite's own page cache, with the one page number SQLite borrows as a scratch key given
//! another key, so that a commit does not walk every cached page.
//!
//! Why: when SQLite's b-tree rebalances pages (`balance_nonroot`), it sorts the new pages
//! by swapping their page numbers in the cache through a temporary one: the "pending
//! byte" page (`0x40000000 / page size + 1`, 262,145 with 4 KiB pages), a page no
//! database ever uses. The default page cache (pcache1) remembers the largest key it has
//! been given, and at the end of every transaction the pager truncates the cache to the
//! database's size. With that key far past the end, pcache1 walks its whole hash table,
//! every cached page, instead of the few slots past the end. In the 50/50 mix the walk was
//! a tenth of the commit thread's time (BENCHMARKS.md, "SQLite's page cache without the
//! walk at each commit"), on the one serial section every write waits for.
//!
//! This wraps the default cache and hands it the key 0 (a page number no database has)
//! wherever SQLite names the pending-byte page. The translation is the same in every
//! call that takes a key (fetch and rekey), so the cache stays consistent; the page
//! under that key only exists between the swap's three moves, which follow one another
//! (or, on a corrupt database, while SQLite refuses to read it).
//!
//! SQLite takes a page cache only before it is initialised, so [`install`] is called
//! first thing by the `floe` binary (and by the test that checks it); a process that
//! used SQLite before keeps the default cache, which is correct, only slower.

use rusqlite::ffi;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where SQLite's locks live in a database file; its page is never stored (sqlite3.c's
/// `PENDING_BYTE`, unchanged outside SQLite's own tests).
const PENDING_BYTE: c_uint = 0x4000_0000;

/// The key the pending-byte page gets instead.
const SCRATCH_KEY: c_uint = 0;

/// How many times a page was moved to or from the scratch key ([`scratch_moves`]).
static SCRATCH_MOVES: AtomicU64 = AtomicU64::new(0);

/// How many times a rebalance moved a page through the scratch key since the start: for
/// the test that checks the wrapper is in place and in use.
pub fn scratch_moves() -> u64 {
    SCRATCH_MOVES.load(Ordering::Relaxed)
}

/// The default cache's methods, as SQLite had them.
static BASE: OnceLock<Methods> = OnceLock::new();

struct Methods(ffi::sqlite3_pcache_methods2);

// SAFETY: function pointers and SQLite's own argument pointer, never written after
// `install`; SQLite calls them from any thread.
unsafe impl Send for Methods {}
unsafe impl Sync for Methods {}

/// Puts the wrapper in place; returns whether it is (false: SQLite was already
/// initialised, or has no page cache to wrap). Must run before any other use of SQLite
/// in the process, and not beside one on another thread (`sqlite3_config` is not
/// thread-safe): the binary calls it before it starts a thread.
pub fn install() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let mut base = std::mem::MaybeUninit::<ffi::sqlite3_pcache_methods2>::zeroed();
        // SAFETY: SQLITE_CONFIG_GETPCACHE2 copies the current methods into the struct it
        // is given (after setting up the default if none is set); before initialisation
        // only, else it returns SQLITE_MISUSE and writes nothing.
        let base = unsafe {
            if ffi::sqlite3_config(ffi::SQLITE_CONFIG_GETPCACHE2, base.as_mut_ptr())
                != ffi::SQLITE_OK
            {
                return false;
            }
            base.assume_init()
        };
        let complete = base.xCreate.is_some()
            && base.xCachesize.is_some()
            && base.xPagecount.is_some()
            && base.xFetch.is_some()
            && base.xUnpin.is_some()
            && base.xRekey.is_some()
            && base.xTruncate.is_some()
            && base.xDestroy.is_some();
        if !complete || BASE.set(Methods(base)).is_err() {
            return false;
        }
        let ours = ffi::sqlite3_pcache_methods2 {
            xCreate: Some(create),
            xCachesize: Some(cachesize),
            xPagecount: Some(pagecount),
            xFetch: Some(fetch),
            xUnpin: Some(unpin),
            xRekey: Some(rekey),
            xTruncate: Some(truncate),
            xDestroy: Some(destroy),
            xShrink: base.xShrink.map(|_| shrink as _),
            // Version, argument, init and shutdown stay the base's: they act on the
            // cache module as a whole, not on one cache.
            ..base
        };
        // SAFETY: SQLite copies the struct; every function in it stays valid for the
        // process's life, and SQLite is not initialised yet (GETPCACHE2 succeeded).
        unsafe {
            ffi::sqlite3_config(ffi::SQLITE_CONFIG_PCACHE2, &ours as *const _) == ffi::SQLITE_OK
        }
    })
}

/// One cache: the default's, and the page number its page size makes the pending-byte
/// page.
struct Cache {
    inner: *mut ffi::sqlite3_pcache,
    pending_page: c_uint,
}

impl Cache {
    fn key(&self, key: c_uint) -> c_uint {
        scratch_key(key, self.pending_page)
    }
}

/// The key the default cache gets for page `key`.
fn scratch_key(key: c_uint, pending_page: c_uint) -> c_uint {
    if key == pending_page {
        SCRATCH_KEY
    } else {
        key
    }
}

fn pending_page(page_size: c_int) -> c_uint {
    PENDING_BYTE / page_size.max(1) as c_uint + 1
}

fn base() -> &'static ffi::sqlite3_pcache_methods2 {
    // Only installed once BASE is set.
    &BASE.get().expect("the page cache's base methods").0
}

/// # Safety
/// `cache` was returned by [`create`] and not yet destroyed.
unsafe fn ours<'a>(cache: *mut ffi::sqlite3_pcache) -> &'a Cache {
    &*(cache as *const Cache)
}

unsafe extern "C" fn create(
    page_size: c_int,
    extra: c_int,
    purgeable: c_int,
) -> *mut ffi::sqlite3_pcache {
    let inner = (base().xCreate.expect("checked at install"))(page_size, extra, purgeable);
    if inner.is_null() {
        return inner;
    }
    let cache = Cache {
        inner,
        pending_page: pending_page(page_size),
    };
    Box::into_raw(Box::new(cache)).cast()
}

unsafe extern "C" fn cachesize(cache: *mut ffi::sqlite3_pcache, pages: c_int) {
    (base().xCachesize.expect("checked at install"))(ours(cache).inner, pages)
}

unsafe extern "C" fn pagecount(cache: *mut ffi::sqlite3_pcache) -> c_int {
    (base().xPagecount.expect("checked at install"))(ours(cache).inner)
}

unsafe extern "C" fn fetch(
    cache: *mut ffi::sqlite3_pcache,
    key: c_uint,
    create: c_int,
) -> *mut ffi::sqlite3_pcache_page {
    let cache = ours(cache);
    (base().xFetch.expect("checked at install"))(cache.inner, cache.key(key), create)
}

unsafe extern "C" fn unpin(
    cache: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    discard: c_int,
) {
    (base().xUnpin.expect("checked at install"))(ours(cache).inner, page, discard)
}

unsafe extern "C" fn rekey(
    cache: *mut ffi::sqlite3_pcache,
    page: *mut ffi::sqlite3_pcache_page,
    old: c_uint,
    new: c_uint,
) {
    let cache = ours(cache);
    let (old_key, new_key) = (cache.key(old), cache.key(new));
    if old_key != old || new_key != new {
        SCRATCH_MOVES.fetch_add(1, Ordering::Relaxed);
    }
    (base().xRekey.expect("checked at install"))(cache.inner, page, old_key, new_key)
}

unsafe extern "C" fn truncate(cache: *mut ffi::sqlite3_pcache, limit: c_uint) {
    (base().xTruncate.expect("checked at install"))(ours(cache).inner, limit)
}

unsafe extern "C" fn destroy(cache: *mut ffi::sqlite3_pcache) {
    let cache = Box::from_raw(cache as *mut Cache);
    (base().xDestroy.expect("checked at install"))(cache.inner)
}

unsafe extern "C" fn shrink(cache: *mut ffi::sqlite3_pcache) {
    if let Some(shrink) = base().xShrink {
        shrink(ours(cache).inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_pending_byte_page_changes_key() {
        let pending = pending_page(4096);
        assert_eq!(pending, 262_145);
        assert_eq!(pending_page(65_536), 16_385);
        assert_eq!(pending_page(512), 2_097_153);
        assert_eq!(scratch_key(pending, pending), SCRATCH_KEY);
        for key in [1, 2, pending - 1, pending + 1, 16_385, u32::MAX] {
            assert_eq!(scratch_key(key, pending), key);
        }
        // A 64 KiB-page database's scratch page is an ordinary page of a 4 KiB one.
        assert_eq!(scratch_key(16_385, pending_page(4096)), 16_385);
        assert_eq!(scratch_key(16_385, pending_page(65_536)), SCRATCH_KEY);
    }
}
