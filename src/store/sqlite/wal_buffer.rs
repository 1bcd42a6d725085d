//! A SQLite VFS for the writer connection that gathers a commit's WAL writes into one.
//!
//! SQLite writes each WAL frame with two `pwrite`s, its 24-byte header and then its page:
//! in the 50/50 mix (under `strace`, which makes groups larger) a commit group wrote ~59
//! frames with ~118 system calls on the one serial thread, and now with one or two
//! (BENCHMARKS.md, "The WAL's frames written in one call").
//! This VFS is SQLite's own default (`unix`) with one change: for a WAL file, a write that
//! continues the previous one is appended to a buffer, and the buffer goes to the file
//! in one write before anything that must see the file as written: a sync, a read, a size,
//! a truncation, a file control, a close, or a write anywhere else.
//!
//! Why this is safe: with `synchronous = FULL`, SQLite syncs a commit's frames before it
//! publishes them in the WAL index (`sqlite3WalFrames`), so no other connection can look
//! for a frame still in the buffer, and what is acknowledged is on disk as before. Frames
//! written before a commit (a spilled page cache) are read back only by this connection,
//! through this file, which writes the buffer first. Only the writer connection uses this
//! VFS (`connection::open_writer`); the readers use `unix` itself, and both share os_unix.c's
//! process-wide lock table, since every call ends in its functions.
//!
//! Layout: the `unix` file structure comes first in each file this VFS opens, so for every
//! file but a WAL SQLite calls `unix`'s own methods on it untouched; the buffer's state
//! follows it, at `Registered::extra_offset`.

use rusqlite::ffi;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

/// The name the writer connection opens its database with (`register` returns it).
const VFS_NAME: &CStr = c"floe-wal-buffer";

/// Past this, the buffer is written out before it grows: a commit group writes ~250 KB,
/// a migration can write far more.
const BUFFER_MAX: usize = 4 << 20;

/// The most one call to `unix`'s write passes on: its `seekAndWriteFd` keeps only the low
/// 17 bits of a length (a write of 128 KiB or more came back short, as a full disk).
const WRITE_MAX: usize = 124 << 10;

/// What a buffered WAL file keeps beside `unix`'s structure.
struct Extra {
    /// `unix`'s methods for this file, which this VFS's methods end in.
    inner: *const ffi::sqlite3_io_methods,
    /// Bytes written but not yet passed on, and the file offset of the first.
    buffer: *mut Pending,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    offset: i64,
    /// Writes SQLite asked for, and writes passed on to the file (tests read them).
    asked: u64,
    passed_on: u64,
}

struct Registered {
    /// `unix`, which every call ends in.
    base: *mut ffi::sqlite3_vfs,
    /// Where `Extra` starts in a file structure: after `unix`'s, aligned.
    extra_offset: usize,
}

// SAFETY: the pointers are to SQLite's static `unix` VFS, valid for the process's life.
unsafe impl Send for Registered {}
unsafe impl Sync for Registered {}

static REGISTERED: OnceLock<Result<Registered, String>> = OnceLock::new();

/// Registers the VFS (once per process); returns its name for `open_with_flags_and_vfs`.
pub fn register() -> anyhow::Result<&'static CStr> {
    let registered = REGISTERED.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find and sqlite3_vfs_register are thread-safe; the new
        // VFS is leaked, as SQLite keeps a pointer to it for the process's life.
        unsafe {
            let base = ffi::sqlite3_vfs_find(std::ptr::null());
            if base.is_null() {
                return Err("SQLite has no default VFS".to_string());
            }
            let base_size = (*base).szOsFile as usize;
            let extra_offset = base_size.next_multiple_of(std::mem::align_of::<Extra>());
            let mut vfs = *base;
            vfs.szOsFile = (extra_offset + std::mem::size_of::<Extra>()) as c_int;
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pNext = std::ptr::null_mut();
            vfs.xOpen = Some(open);
            let vfs = Box::into_raw(Box::new(vfs));
            let rc = ffi::sqlite3_vfs_register(vfs, 0);
            if rc != ffi::SQLITE_OK {
                return Err(format!("registering SQLite's VFS {VFS_NAME:?}: code {rc}"));
            }
            Ok(Registered { base, extra_offset })
        }
    });
    match registered {
        Ok(_) => Ok(VFS_NAME),
        Err(e) => Err(anyhow::anyhow!("{e}")),
    }
}

fn registered() -> &'static Registered {
    match REGISTERED.get() {
        Some(Ok(registered)) => registered,
        // SQLite calls `open` only through the registered VFS.
        _ => unreachable!("the WAL buffer VFS is used before it is registered"),
    }
}

/// # Safety
/// `file` is a file structure this VFS opened as a WAL.
unsafe fn extra(file: *mut ffi::sqlite3_file) -> *mut Extra {
    (file as *mut u8).add(registered().extra_offset) as *mut Extra
}

unsafe extern "C" fn open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let base = registered().base;
    let Some(base_open) = (*base).xOpen else {
        return ffi::SQLITE_CANTOPEN;
    };
    let rc = base_open(base, name, file, flags, out_flags);
    if rc != ffi::SQLITE_OK || flags & ffi::SQLITE_OPEN_WAL == 0 || (*file).pMethods.is_null() {
        return rc;
    }
    extra(file).write(Extra {
        inner: (*file).pMethods,
        buffer: Box::into_raw(Box::default()),
    });
    (*file).pMethods = &WAL_METHODS;
    rc
}

/// The methods of a buffered WAL file: each ends in `unix`'s, after writing the buffer
/// out if it has to.
static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

unsafe fn inner(file: *mut ffi::sqlite3_file) -> &'static ffi::sqlite3_io_methods {
    &*(*extra(file)).inner
}

/// Writes the buffer to the file, in as few calls as `WRITE_MAX` allows; empties it
/// whatever the outcome (a failed write fails the transaction, which SQLite then rolls
/// back, and the WAL's frames past its last commit are never read).
unsafe fn flush(file: *mut ffi::sqlite3_file) -> c_int {
    let pending = &mut *(*extra(file)).buffer;
    if pending.bytes.is_empty() {
        return ffi::SQLITE_OK;
    }
    let Some(write) = inner(file).xWrite else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let mut rc = ffi::SQLITE_OK;
    let mut offset = pending.offset;
    for chunk in pending.bytes.chunks(WRITE_MAX) {
        pending.passed_on += 1;
        // A chunk's length fits: WRITE_MAX < c_int::MAX.
        rc = write(
            file,
            chunk.as_ptr() as *const c_void,
            chunk.len() as c_int,
            offset,
        );
        if rc != ffi::SQLITE_OK {
            break;
        }
        offset += chunk.len() as i64;
    }
    pending.bytes.clear();
    rc
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    data: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    let pending = &mut *(*extra(file)).buffer;
    let amount = amount.max(0) as usize;
    pending.asked += 1;
    let continues = pending.offset + pending.bytes.len() as i64 == offset;
    if !pending.bytes.is_empty() && (!continues || pending.bytes.len() + amount > BUFFER_MAX) {
        let rc = flush(file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
    }
    if pending.bytes.is_empty() {
        pending.offset = offset;
    }
    pending
        .bytes
        .extend_from_slice(std::slice::from_raw_parts(data as *const u8, amount));
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    let rc = flush(file);
    let extra = extra(file);
    let methods = (*extra).inner;
    drop(Box::from_raw((*extra).buffer));
    let closed = match (*methods).xClose {
        Some(close) => close(file),
        None => ffi::SQLITE_OK,
    };
    if rc != ffi::SQLITE_OK {
        rc
    } else {
        closed
    }
}

/// Writes the buffer out, then calls `unix`'s method; a failed write is the answer.
macro_rules! flushed {
    ($file:ident, $method:ident ( $($arg:expr),* )) => {{
        let rc = flush($file);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        match inner($file).$method {
            Some(method) => method($file $(, $arg)*),
            None => ffi::SQLITE_IOERR,
        }
    }};
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    data: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    flushed!(file, xRead(data, amount, offset))
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    flushed!(file, xTruncate(size))
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    flushed!(file, xSync(flags))
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    flushed!(file, xFileSize(size))
}

unsafe extern "C" fn file_control(
    file: *mut ffi::sqlite3_file,
    op: c_int,
    arg: *mut c_void,
) -> c_int {
    flushed!(file, xFileControl(op, arg))
}

unsafe extern "C" fn lock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flushed!(file, xLock(level))
}

unsafe extern "C" fn unlock(file: *mut ffi::sqlite3_file, level: c_int) -> c_int {
    flushed!(file, xUnlock(level))
}

unsafe extern "C" fn check_reserved_lock(file: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    flushed!(file, xCheckReservedLock(out))
}

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    inner(file).xSectorSize.map_or(4096, |method| method(file))
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    inner(file)
        .xDeviceCharacteristics
        .map_or(0, |method| method(file))
}

// A WAL file has no shared memory and is never mapped; these only keep the table whole.
unsafe extern "C" fn shm_map(
    file: *mut ffi::sqlite3_file,
    page: c_int,
    size: c_int,
    extend: c_int,
    out: *mut *mut c_void,
) -> c_int {
    flushed!(file, xShmMap(page, size, extend, out))
}

unsafe extern "C" fn shm_lock(
    file: *mut ffi::sqlite3_file,
    offset: c_int,
    n: c_int,
    flags: c_int,
) -> c_int {
    flushed!(file, xShmLock(offset, n, flags))
}

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    if let Some(method) = inner(file).xShmBarrier {
        method(file)
    }
}

unsafe extern "C" fn shm_unmap(file: *mut ffi::sqlite3_file, delete: c_int) -> c_int {
    flushed!(file, xShmUnmap(delete))
}

unsafe extern "C" fn fetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    amount: c_int,
    out: *mut *mut c_void,
) -> c_int {
    flushed!(file, xFetch(offset, amount, out))
}

unsafe extern "C" fn unfetch(
    file: *mut ffi::sqlite3_file,
    offset: i64,
    page: *mut c_void,
) -> c_int {
    flushed!(file, xUnfetch(offset, page))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::{params, Connection, OpenFlags};
    use std::path::Path;

    fn open(path: &Path, buffered: bool) -> Connection {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE;
        let conn = match buffered {
            true => Connection::open_with_flags_and_vfs(path, flags, register().unwrap()),
            false => Connection::open_with_flags(path, flags),
        }
        .unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;
             PRAGMA wal_autocheckpoint = 0;",
        )
        .unwrap();
        conn
    }

    /// The writes SQLite asked of the connection's WAL file, and those passed on.
    fn counts(conn: &Connection) -> (u64, u64) {
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: the handle is open; the pointer SQLite returns is its WAL file, checked
        // to be this VFS's before its state is read.
        unsafe {
            let rc = ffi::sqlite3_file_control(
                conn.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_JOURNAL_POINTER,
                &mut file as *mut _ as *mut c_void,
            );
            assert_eq!(rc, ffi::SQLITE_OK);
            assert!(std::ptr::eq((*file).pMethods, &WAL_METHODS));
            let pending = &*(*extra(file)).buffer;
            (pending.asked, pending.passed_on)
        }
    }

    /// The database as a crash would leave it: its file and its WAL copied as they are
    /// on disk now, opened elsewhere (SQLite recovers the WAL on open).
    fn as_after_a_crash(path: &Path, to: &Path) -> Connection {
        std::fs::copy(path, to).unwrap();
        let wal = |p: &Path| p.with_extension("db-wal");
        std::fs::copy(wal(path), wal(to)).unwrap();
        Connection::open(to).unwrap()
    }

    #[test]
    fn each_commit_is_in_the_file_when_acknowledged_in_fewer_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = open(&path, true);
        let reader = open(&path, false);
        writer
            .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
            .unwrap();
        let before = counts(&writer);
        for k in 0..20i64 {
            let tx = writer.unchecked_transaction().unwrap();
            for i in 0..10 {
                // 3 KB a row: a commit of ~10 pages and their b-tree.
                tx.execute(
                    "INSERT INTO t VALUES (?1, ?2)",
                    params![k * 10 + i, vec![k as u8; 3000]],
                )
                .unwrap();
            }
            tx.commit().unwrap();
            // Another connection of the process sees the commit at once…
            let seen: i64 = reader
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .unwrap();
            assert_eq!(seen, (k + 1) * 10);
            // …and so would the next process after a crash now.
            let copy = dir.path().join(format!("copy{k}.db"));
            let recovered = as_after_a_crash(&path, &copy);
            let (n, sum): (i64, i64) = recovered
                .query_row("SELECT count(*), sum(length(v)) FROM t", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            assert_eq!((n, sum), ((k + 1) * 10, (k + 1) * 10 * 3000));
        }
        let (asked, passed_on) = counts(&writer);
        let (asked, passed_on) = (asked - before.0, passed_on - before.1);
        // Two writes a frame, at least ten frames a commit; one write a commit.
        assert!(asked >= 20 * 20, "{asked} writes asked");
        assert!(
            passed_on <= 20 * 2,
            "{passed_on} writes passed on for {asked}"
        );
        let check: String = writer
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    #[test]
    fn a_transaction_past_the_page_cache_and_the_buffer_commits_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = open(&path, true);
        // A page cache of 10 pages: the transaction spills frames to the WAL before its
        // commit and reads them back, and rewrites some (SQLite then rewrites checksums).
        writer
            .execute_batch(
                "PRAGMA cache_size = 10;
                 CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL);",
            )
            .unwrap();
        let before = counts(&writer);
        let tx = writer.unchecked_transaction().unwrap();
        for k in 0..3000i64 {
            tx.execute(
                "INSERT INTO t VALUES (?1, ?2)",
                params![k, vec![(k % 251) as u8; 2000]],
            )
            .unwrap();
        }
        // Frames written before the commit, and read back (a read writes the buffer).
        let spilled = counts(&writer);
        assert!(
            spilled.0 > before.0 && spilled.1 > before.1,
            "nothing spilled: {before:?} then {spilled:?}"
        );
        // Every row changed again, in the same transaction.
        for k in 0..3000i64 {
            tx.execute(
                "UPDATE t SET v = ?2 WHERE k = ?1",
                params![k, vec![(k % 251) as u8; 2001]],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        let recovered = as_after_a_crash(&path, &dir.path().join("copy.db"));
        let (n, sum, bad): (i64, i64, i64) = recovered
            .query_row(
                "SELECT count(*), sum(length(v)),
                        sum(hex(substr(v, 1, 1)) != printf('%02X', k % 251)
                            OR hex(substr(v, -1)) != printf('%02X', k % 251))
                 FROM t",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        assert_eq!((n, sum, bad), (3000, 3000 * 2001, 0));
        let check: String = recovered
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    #[test]
    fn a_rolled_back_transaction_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer = open(&path, true);
        writer
            .execute_batch("PRAGMA cache_size = 10; CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)")
            .unwrap();
        writer
            .execute("INSERT INTO t VALUES (1, x'00')", [])
            .unwrap();
        let tx = writer.unchecked_transaction().unwrap();
        for k in 2..2000i64 {
            tx.execute("INSERT INTO t VALUES (?1, ?2)", params![k, vec![1u8; 2000]])
                .unwrap();
        }
        tx.rollback().unwrap();
        writer
            .execute("INSERT INTO t VALUES (2, x'02')", [])
            .unwrap();
        let recovered = as_after_a_crash(&path, &dir.path().join("copy.db"));
        let rows: Vec<(i64, Vec<u8>)> = recovered
            .prepare("SELECT k, v FROM t ORDER BY k")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(rows, vec![(1, vec![0]), (2, vec![2])]);
    }
}
