//! WAL checkpoints off the commit path.
//!
//! In WAL mode every commit appends its pages to the WAL; a checkpoint copies them back
//! into the database file and syncs it, so that the WAL can start over. SQLite runs one
//! on the committing connection, inside COMMIT, once the WAL passes `wal_autocheckpoint`
//! pages: in the 50/50 mix that made one group in a few hundred wait ~45 ms for thousands
//! of page copies and a sync of the database (the writes' p99), and every write queued
//! behind it waited too.
//!
//! Here the bulk of that work runs on a thread of its own, over its own connection:
//! - after each group, the commit thread looks at how many frames the WAL holds (SQLite's
//!   WAL hook tells the committing thread, [`note_wal_frames`]); past [`START_FRAMES`] it
//!   wakes the checkpoint thread, which runs a PASSIVE checkpoint (it copies the frames
//!   no reader still needs, waiting for no one) and then syncs the database file, while
//!   commits go on;
//! - commits went on, so when that pass ends the WAL holds a tail of frames it did not
//!   copy, and a checkpoint that raced every commit could leave the WAL growing under
//!   steady writes. The commit thread copies the tail itself, after answering its group:
//!   as the one writer, nothing is appended meanwhile, so the whole WAL is then in the
//!   database (SQLite syncs it, a few pages now) and the next write starts the WAL over;
//! - past four times that (the checkpoint thread gone, or failing) the commit thread
//!   checkpoints everything itself, as SQLite would have;
//! - the writer's rarer commits from other threads (relay leases, purges, the file
//!   journal's restore) checkpoint inside their COMMIT past [`START_FRAMES`], as SQLite's
//!   own hook did: a server whose only writes are those (an idle catalog with an event
//!   relay renewing its lease) would otherwise grow its WAL without end, since only a
//!   commit group asks for a pass.
//!
//! The threshold is `floe serve --wal-checkpoint-frames` ([`START_FRAMES`] by default): a
//! smaller one keeps less WAL on disk and makes the recovery after a crash shorter, for
//! more passes and database syncs.
//!
//! Durability is SQLite's own: a checkpoint copies only committed frames, and the WAL is
//! reused only after a checkpoint that copied all of it synced the database.
//! A failed checkpoint changes nothing that was acknowledged; it is logged and retried
//! at the next threshold.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use rusqlite::{ffi, Connection};

use super::connection::open_connection;

/// The WAL's frames (pages) past which a background pass starts, ~64 MiB (SQLite's
/// `wal_autocheckpoint` default is 1,000). Commits rewrite the same hot pages (the
/// objects' b-tree, the outbox's tail), and a checkpoint copies each page once however
/// often the WAL holds it, so fewer, larger checkpoints copy fewer pages and sync the
/// database less: when the commit thread ran them, 16,000 instead of 1,000 cost it 5%
/// less per write in the 50/50 mix (BENCHMARKS.md).
pub(super) const START_FRAMES: u32 = 16_000;

/// The WAL's frames past which a pass starts in this process: [`START_FRAMES`] unless
/// the server was told otherwise (`--wal-checkpoint-frames`). Process-wide, because
/// SQLite's WAL hook, which reads it on other threads than the commit thread, has no
/// store to ask; a store's commit thread takes it when the store opens.
static START: AtomicU32 = AtomicU32::new(START_FRAMES);

/// Sets the threshold for the stores this process opens from now on (the server sets it
/// once, before it opens its store; tests change a store's own instead).
pub(super) fn set_start_frames(frames: u32) {
    START.store(frames.max(1), Ordering::Relaxed);
}

/// The threshold a store opened now starts with.
pub(super) fn start_frames() -> u32 {
    START.load(Ordering::Relaxed)
}

/// Past this many times the threshold the commit thread checkpoints itself.
const HARD_FACTOR: u32 = 4;

thread_local! {
    /// The frames in the WAL after this thread's last commit on a writer connection.
    static WAL_FRAMES: Cell<u32> = const { Cell::new(0) };
    /// Set on a commit thread ([`on_commit_thread`]), whose checkpoints
    /// [`Checkpoints::after_group`] starts.
    static COMMIT_THREAD: Cell<bool> = const { Cell::new(false) };
}

/// The frames in the WAL after the calling thread's last commit on a writer connection.
#[cfg(test)]
pub(super) fn wal_frames() -> u32 {
    WAL_FRAMES.with(Cell::get)
}

/// Marks the calling thread as a commit thread: its commits only note the WAL's size.
pub(super) fn on_commit_thread() {
    COMMIT_THREAD.with(|cell| cell.set(true));
}

/// SQLite's WAL hook, called on the committing thread after each commit with the frames
/// the WAL now holds. Replaces SQLite's own (`wal_autocheckpoint`), which checkpointed
/// right there, inside COMMIT; another thread's commit still does, past [`START_FRAMES`].
unsafe extern "C" fn note_wal_frames(
    _context: *mut c_void,
    db: *mut ffi::sqlite3,
    name: *const c_char,
    frames: c_int,
) -> c_int {
    let frames = u32::try_from(frames).unwrap_or(0);
    WAL_FRAMES.with(|cell| cell.set(frames));
    if frames >= start_frames() && !COMMIT_THREAD.with(Cell::get) {
        // SAFETY: `db` and `name` are SQLite's own, valid for this call; checkpointing
        // from the hook is what SQLite's default hook does. A checkpoint that fails (or
        // finds another running) is retried after the next commit, as SQLite's would be.
        unsafe {
            ffi::sqlite3_wal_checkpoint_v2(
                db,
                name,
                ffi::SQLITE_CHECKPOINT_PASSIVE,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
        }
    }
    ffi::SQLITE_OK
}

/// Installs [`note_wal_frames`] on the writer's connection.
pub(super) fn hook_writer(conn: &Connection) {
    // SAFETY: the handle is the live connection's; the hook takes no context and only
    // writes a thread-local, so it outlives nothing.
    unsafe {
        ffi::sqlite3_wal_hook(conn.handle(), Some(note_wal_frames), std::ptr::null_mut());
    }
}

/// How many checkpoints ran where (tests read them; the process-wide metric
/// `floe_wal_checkpoints_total` counts them too).
#[derive(Default)]
pub(super) struct Counts {
    pub(super) background: AtomicU64,
    pub(super) tails: AtomicU64,
    pub(super) inline: AtomicU64,
}

/// Where a checkpoint ran: the metric's label and this store's count.
#[derive(Clone, Copy)]
enum Place {
    Background,
    Tail,
    Inline,
}

impl Counts {
    fn record(&self, place: Place, outcome: anyhow::Result<()>) {
        let (count, label) = match place {
            Place::Background => (&self.background, "background"),
            Place::Tail => (&self.tails, "tail"),
            Place::Inline => (&self.inline, "inline"),
        };
        match outcome {
            Ok(()) => {
                count.fetch_add(1, Ordering::Relaxed);
                crate::metrics::record_wal_checkpoint(label);
            }
            Err(e) => {
                crate::metrics::record_wal_checkpoint("failed");
                tracing::warn!(error = %e, place = label, "checkpointing the embedded store's WAL");
            }
        }
    }
}

/// The commit thread's side: when to wake the checkpoint thread, when to copy the tail.
pub(super) struct Checkpoints {
    wake: mpsc::SyncSender<()>,
    /// Set by the checkpoint thread when a pass it was woken for has ended.
    passed: Arc<AtomicBool>,
    /// A pass was asked for and its tail is not copied yet.
    pending: bool,
    start: Arc<AtomicU32>,
    counts: Arc<Counts>,
}

impl Checkpoints {
    /// Starts the checkpoint thread on `path` (a connection of its own). It ends when
    /// this is dropped (with the commit thread).
    pub(super) fn start(
        path: &Path,
        start: Arc<AtomicU32>,
        counts: Arc<Counts>,
    ) -> std::io::Result<Self> {
        let (wake, woken) = mpsc::sync_channel(1);
        let passed = Arc::new(AtomicBool::new(false));
        let (path, done, counted) = (path.to_path_buf(), passed.clone(), counts.clone());
        std::thread::Builder::new()
            .name("floe-sqlite-checkpoint".into())
            .spawn(move || background(&path, &woken, &done, &counted))?;
        Ok(Checkpoints {
            wake,
            passed,
            pending: false,
            start,
            counts,
        })
    }

    /// After a group has been answered: wakes the checkpoint thread, copies the tail of
    /// its pass, or checkpoints here, as the WAL's size says (locking the writer only
    /// then).
    pub(super) fn after_group(&mut self, writer: &Mutex<Connection>) {
        let frames = WAL_FRAMES.with(Cell::get);
        let start = self.start.load(Ordering::Relaxed);
        let hard = start.saturating_mul(HARD_FACTOR);
        if self.pending {
            if self.passed.swap(false, Ordering::AcqRel) {
                self.pending = false;
                self.run_here(writer, Place::Tail);
            } else if frames >= hard {
                self.run_here(writer, Place::Inline);
            }
            return;
        }
        if frames < start {
            return;
        }
        match self.wake.try_send(()) {
            Ok(()) => self.pending = true,
            // A pass is still queued (not possible while `pending` is clear), or the
            // thread is gone: past the hard limit, do it here.
            Err(_) if frames >= hard => self.run_here(writer, Place::Inline),
            Err(_) => {}
        }
    }

    fn run_here(&self, writer: &Mutex<Connection>, place: Place) {
        let conn = writer.lock().unwrap_or_else(|e| e.into_inner());
        self.counts.record(place, passive(&conn));
    }
}

/// The checkpoint thread: a pass each time it is woken, until the commit thread ends.
fn background(path: &Path, woken: &mpsc::Receiver<()>, passed: &AtomicBool, counts: &Counts) {
    let conn = match open_connection(path) {
        Ok(conn) => conn,
        Err(e) => {
            // The commit thread checkpoints past the hard limit instead.
            tracing::warn!(error = %format!("{e:#}"), "the WAL checkpoint thread could not start");
            return;
        }
    };
    while woken.recv().is_ok() {
        let pass = passive(&conn).and_then(|()| sync_database(&conn));
        counts.record(Place::Background, pass);
        passed.store(true, Ordering::Release);
    }
}

/// A PASSIVE checkpoint: copies what it can, waits for no reader or writer.
fn passive(conn: &Connection) -> anyhow::Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
    Ok(())
}

/// Syncs the pages a pass copied. SQLite syncs the database only after a pass that
/// copied the whole WAL; one that commits outran leaves them to the next full pass,
/// which is the commit thread's tail, and that sync should cost a few pages, not all.
///
/// Through the connection's own file (SQLite's `SQLITE_FCNTL_FILE_POINTER`), never a
/// descriptor opened for it: closing *any* descriptor of a file drops every POSIX lock
/// the process holds on it, and SQLite keeps a shared lock on a WAL database for as long
/// as a connection is open, believing it still held. Without it, another process on the
/// database (an operator's `sqlite3 floe.db .backup`) would take the exclusive lock when
/// it closed, think itself the last connection, checkpoint and delete the WAL and shared
/// memory that Floe goes on committing into: every later write lost at the next start.
fn sync_database(conn: &Connection) -> anyhow::Result<()> {
    let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: the handle is this thread's live connection; FILE_POINTER writes the main
    // database's `sqlite3_file` (owned by the connection, open while it is) into `file`.
    let rc = unsafe {
        ffi::sqlite3_file_control(
            conn.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            (&raw mut file).cast(),
        )
    };
    anyhow::ensure!(
        rc == ffi::SQLITE_OK && !file.is_null(),
        "no database file ({rc})"
    );
    // SAFETY: `file` is open and its methods are the VFS's; no statement runs on this
    // connection meanwhile (it is this thread's alone), as SQLite requires of xSync.
    let rc = unsafe {
        match (*(*file).pMethods).xSync {
            Some(sync) => sync(file, ffi::SQLITE_SYNC_NORMAL | ffi::SQLITE_SYNC_DATAONLY),
            None => ffi::SQLITE_MISUSE,
        }
    };
    anyhow::ensure!(rc == ffi::SQLITE_OK, "syncing the database failed ({rc})");
    Ok(())
}
