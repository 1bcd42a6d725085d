//! Group commit: the write batches that arrive while a commit is on disk share the next
//! transaction, and so its one round of fsyncs.
//!
//! One thread owns the commit path. It takes the first waiting batch, then every batch
//! already queued behind it (up to [`MAX_GROUP`]), applies them in one IMMEDIATE
//! transaction, commits once, and only then answers each caller. A group in which a batch
//! fails is rolled back and applied again with a SAVEPOINT per batch. So:
//! - durability is unchanged: nothing is acknowledged before its COMMIT is on disk;
//! - a batch that fails (a stale requirement, a name taken, a reused idempotency key) is
//!   rolled back to its savepoint and fails alone; the others still commit;
//! - batches apply in arrival order, each seeing the ones before it, exactly as if they
//!   had committed one by one (positions in the event outbox stay in commit order);
//! - under no load a group is one batch, and costs what a lone transaction did.
//!
//! If the COMMIT itself fails, every batch of the group fails (none was acknowledged).
//!
//! The metadata cache (`cache.rs`) learns of each group here, before the statements of
//! each of its parts run and after its transaction ends, whatever the outcome (a panic
//! included). The file journal
//! (`journal.rs`) is kept here too: each group deletes the entries sync rounds covered
//! since the last, and publishes the last entry it committed.
//!
//! Under load (the last group had more than one batch) a group stays open for a short
//! *gather window* before it commits, as PostgreSQL's `commit_delay` does. Where the
//! thread gets a core as soon as it wakes (its short slice, `slice.rs`, or
//! `--worker-nice`, `crate::runtime`), it would otherwise wake for groups of two or three,
//! and each write would pay a larger share of a COMMIT and its sync. The batches already
//! queued are applied inside the window, and those that arrive during it after it, so
//! the window costs a group only what is left of it after their statements.

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::cache::{ObjectCache, Touched};
use super::checkpoint::{self, Checkpoints};
use super::documents;
use super::journal::{self, JournalMarks};
use super::list_cache::changes_membership;
use super::slice;
use super::writes;
use crate::store::cache_text::CachedText;
use crate::store::{Applied, StoreError, StoreResult, WriteBatch, WriteTicket};

/// Most batches one transaction takes: bounds a group's latency and its rollback work.
pub(super) const MAX_GROUP: usize = 256;

struct Job {
    batch: WriteBatch,
    /// The batch's new documents as the store keeps them, packed by the caller.
    packed: Vec<Option<Vec<u8>>>,
    /// The cache's copies of its new documents (`ObjectCache::texts_for`), made by the caller.
    texts: Vec<Option<Arc<CachedText>>>,
    reply: oneshot::Sender<StoreResult<Applied>>,
}

/// The queue in front of the commit thread.
pub(super) struct GroupCommitter {
    queue: mpsc::Sender<Job>,
    /// The gather window, in microseconds (0: none); read by the thread for every group.
    gather_us: Arc<AtomicU64>,
    cache: Arc<ObjectCache>,
    /// The WAL's frames past which a checkpoint pass starts (`checkpoint.rs`).
    #[cfg(test)]
    checkpoint_start: Arc<AtomicU32>,
    /// The checkpoints run so far, by where.
    #[cfg(test)]
    pub(super) checkpoints: Arc<checkpoint::Counts>,
    /// The groups taken so far.
    #[cfg(test)]
    pub(super) groups: Arc<AtomicU64>,
}

impl GroupCommitter {
    /// Starts the commit thread over the store's writer connection (which other, rarer
    /// writes, such as relay leases, also lock for their own transactions), and the WAL
    /// checkpoint thread over a connection of its own to `path`.
    pub(super) fn start(
        path: &Path,
        writer: Arc<Mutex<Connection>>,
        cache: Arc<ObjectCache>,
        journal: Arc<JournalMarks>,
    ) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::channel::<Job>();
        let gather_us = Arc::new(AtomicU64::new(0));
        let gather = gather_us.clone();
        let cached = cache.clone();
        let checkpoint_start = Arc::new(AtomicU32::new(checkpoint::start_frames()));
        let checkpoints = Arc::<checkpoint::Counts>::default();
        let mut wal = Checkpoints::start(path, checkpoint_start.clone(), checkpoints.clone())?;
        let groups = Arc::new(AtomicU64::new(0));
        let counted = groups.clone();
        std::thread::Builder::new()
            .name("floe-sqlite-commit".into())
            .spawn(move || {
                // Each write waits on this thread: it should get a core soon after it
                // wakes, without taking a larger share of the CPU (`slice.rs`).
                checkpoint::on_commit_thread();
                if let Err(e) = slice::ask_for_short_slice() {
                    tracing::debug!(error = %e, "the commit thread keeps the default scheduler slice");
                }
                let queue = Queue {
                    jobs,
                    gather_us: gather,
                    groups: counted,
                };
                run(&writer, &cached, &journal, &queue, &mut wal)
            })?;
        Ok(GroupCommitter {
            queue,
            gather_us,
            cache,
            #[cfg(test)]
            checkpoint_start,
            #[cfg(test)]
            checkpoints,
            #[cfg(test)]
            groups,
        })
    }

    /// Sets the gather window each group under load stays open for (zero: none).
    pub(super) fn set_gather(&self, window: Duration) {
        let us = u64::try_from(window.as_micros()).unwrap_or(u64::MAX);
        self.gather_us.store(us, Ordering::Relaxed);
    }

    /// Sets the WAL's frames past which a checkpoint pass starts (tests make it small).
    #[cfg(test)]
    pub(super) fn set_checkpoint_start(&self, frames: u32) {
        self.checkpoint_start.store(frames, Ordering::Relaxed);
    }

    /// Applies `batch` in the next group; resolves once it is durable (or refused).
    pub(super) async fn apply(&self, batch: WriteBatch) -> StoreResult<Applied> {
        self.enqueue(batch).await
    }

    /// Queues `batch` now (batches queued later apply after it, in this group or a later
    /// one) and returns the wait for its outcome.
    pub(super) fn enqueue(&self, batch: WriteBatch) -> WriteTicket {
        let (reply, answer) = oneshot::channel();
        // Here, on the caller's thread: the commit thread is the one serial section.
        let packed = documents::pack_batch(&batch);
        let texts = self.cache.texts_for(&batch.mutation);
        let sent = self.queue.send(Job {
            batch,
            packed,
            texts,
            reply,
        });
        Box::pin(async move {
            sent.map_err(|_| internal("the commit thread has stopped"))?;
            answer
                .await
                .map_err(|_| internal("the commit thread dropped a write (it panicked)"))?
        })
    }
}

/// Tells the caches a group ended when dropped, so that a panic ends it too.
struct Bracket<'a> {
    cache: &'a ObjectCache,
    touched: Touched,
    /// Whether the group may change what a list returns.
    lists: bool,
}

impl<'a> Bracket<'a> {
    fn begin(cache: &'a ObjectCache, batches: &[&WriteBatch]) -> Self {
        let touched = Touched::of(batches.iter().map(|b| &b.mutation));
        let lists = batches.iter().any(|b| changes_membership(&b.mutation));
        cache.begin(&touched);
        cache.lists.begin(lists);
        Bracket {
            cache,
            touched,
            lists,
        }
    }
}

impl Drop for Bracket<'_> {
    fn drop(&mut self) {
        self.cache.lists.end(self.lists);
        self.cache.end(&self.touched);
    }
}

/// The commit thread's side of the queue.
struct Queue {
    jobs: mpsc::Receiver<Job>,
    /// The gather window, in microseconds (`GroupCommitter::set_gather`).
    gather_us: Arc<AtomicU64>,
    /// The groups taken so far (tests count them).
    groups: Arc<AtomicU64>,
}

fn run(
    writer: &Mutex<Connection>,
    cache: &ObjectCache,
    journal: &JournalMarks,
    queue: &Queue,
    checkpoints: &mut Checkpoints,
) {
    let jobs = &queue.jobs;
    // The journal entries deleted so far (all those up to here).
    let mut trimmed = 0;
    // How many batches the last group took: more than one means writes are queuing.
    let mut last = 0;
    // Ends when the store (every sender) is dropped.
    while let Ok(first) = jobs.recv() {
        let window = gather_window(last, queue.gather_us.load(Ordering::Relaxed));
        let mut group = vec![first];
        drain(jobs, &mut group);
        // A panic in one group must not stop the store: its callers get an error (their
        // reply senders are dropped), the transaction rolls back as it unwinds, and the
        // thread goes on with the next group.
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // Each part of the group tells the caches before its statements run; all end
            // after `keep_written`, as they drop, whatever the outcome.
            let mut brackets = Vec::with_capacity(2);
            let parts = Parts {
                cache,
                jobs,
                window,
                brackets: &mut brackets,
            };
            let results = commit_group(writer, journal, parts, &mut group, &mut trimmed);
            // Each `Ok` committed (a failed COMMIT fails them all).
            cache.keep_written(
                group
                    .iter()
                    .zip(&results)
                    .filter(|(_, result)| result.is_ok())
                    .map(|(job, _)| (&job.batch.mutation, job.texts.as_slice())),
            );
            results
        }));
        last = group.len();
        queue.groups.fetch_add(1, Ordering::Relaxed);
        if let Ok(results) = outcome {
            for (job, result) in group.into_iter().zip(results) {
                // The caller may have gone (its request was cancelled); the write stands.
                // The batch goes back with the answer, so its documents are freed (or
                // used) on the caller's thread, not on this serial one.
                let _ = job.reply.send(result.map(|applied| applied.of(job.batch)));
            }
        }
        // After the answers: a checkpoint here delays the next group, not this one.
        checkpoints.after_group(writer);
    }
}

/// Moves the jobs already queued into `group`, up to [`MAX_GROUP`].
fn drain(jobs: &mpsc::Receiver<Job>, group: &mut Vec<Job>) {
    while group.len() < MAX_GROUP {
        match jobs.try_recv() {
            Ok(job) => group.push(job),
            Err(_) => break,
        }
    }
}

/// The wait before the next group: the window, but only when the last group had more
/// than one batch (a lone write on an idle server commits at once).
fn gather_window(last_group: usize, window_us: u64) -> Option<Duration> {
    (last_group > 1 && window_us > 0).then(|| Duration::from_micros(window_us))
}

/// One transaction for `group`; a result per batch, in order.
///
/// The batches queued when the group starts are applied at once; then, under load
/// (`window`), the thread sleeps out what is left of the gather window, takes the
/// batches that arrived meanwhile and applies them too, and only then commits. The
/// window is spent on the first batches' statements instead of idle before them, so a
/// group's cycle (and every write's wait for it) is shorter by their work.
///
/// Most groups have no failing batch, so the group is first applied without a savepoint
/// per batch. Inside a savepoint SQLite copies every page a batch changes first into its
/// sub-journal, and every batch changes the same outbox, journal and index pages: those
/// copies and the savepoints' own work were a sixth of the commit thread's time in the
/// 50/50 mix. If a batch fails there, that attempt rolls back whole (taking no more
/// batches) and the group runs again with a savepoint each, where the failing batch
/// fails alone.
fn commit_group(
    writer: &Mutex<Connection>,
    journal: &JournalMarks,
    parts: Parts<'_, '_>,
    group: &mut Vec<Job>,
    trimmed: &mut i64,
) -> Vec<StoreResult<Applied>> {
    let Parts {
        cache,
        jobs,
        window,
        brackets,
    } = parts;
    let started = std::time::Instant::now();
    let mut conn = writer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    brackets.push(Bracket::begin(cache, &batches(group)));
    let mut open = match Open::begin(&mut conn, journal, *trimmed, group.len()) {
        Ok(open) => open,
        Err(results) => return results,
    };
    let mut failed = !open.apply(&group[..]);
    // A full group takes no more: it commits at once.
    let window = window.filter(|_| group.len() < MAX_GROUP);
    if let (false, Some(window)) = (failed, window) {
        if let Some(rest) = window.checked_sub(started.elapsed()) {
            // A sleep, not a wait on the queue: a wait would be woken by every write.
            std::thread::sleep(rest);
        }
        let before = group.len();
        drain(jobs, group);
        if group.len() > before {
            brackets.push(Bracket::begin(cache, &batches(&group[before..])));
            failed = !open.apply(&group[before..]);
        }
    }
    if !failed {
        return open.commit(trimmed);
    }
    if group.len() == 1 {
        // A lone batch's failure is its own result; its transaction rolls back as it drops.
        return open.results;
    }
    drop(open);
    // Again, with a savepoint per batch, so that a failing batch fails alone.
    let mut open = match Open::begin(&mut conn, journal, *trimmed, group.len()) {
        Ok(open) => open,
        Err(results) => return results,
    };
    if let Err(e) = open.apply_with_savepoints(group) {
        return all_fail(group.len(), &e, Failed::Writing);
    }
    if open.results.iter().all(Result::is_err) {
        // Nothing to keep (the transaction rolls back as it drops, and the trim waits
        // for the next group).
        return open.results;
    }
    open.commit(trimmed)
}

/// How a group takes its later parts: from `jobs` after `window` (none: it takes none),
/// each announced to `cache` by a bracket kept in `brackets` (their counts nest).
struct Parts<'a, 'b> {
    cache: &'a ObjectCache,
    jobs: &'a mpsc::Receiver<Job>,
    window: Option<Duration>,
    brackets: &'b mut Vec<Bracket<'a>>,
}

fn batches(jobs: &[Job]) -> Vec<&WriteBatch> {
    jobs.iter().map(|j| &j.batch).collect()
}

/// A group's transaction, open, with the batches applied so far without savepoints.
struct Open<'c> {
    tx: rusqlite::Transaction<'c>,
    journal: &'c JournalMarks,
    /// The journal's synced mark read when the transaction began (trimmed up to it).
    synced: i64,
    /// Whether a batch applied wrote file journal entries (then the last is published).
    journal_files: bool,
    results: Vec<StoreResult<Applied>>,
}

impl<'c> Open<'c> {
    /// Begins the transaction and deletes the journal entries synced since the last group.
    /// On failure, the group's `n` results (each the failure).
    fn begin(
        conn: &'c mut Connection,
        journal: &'c JournalMarks,
        trimmed: i64,
        n: usize,
    ) -> Result<Self, Vec<StoreResult<Applied>>> {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| all_fail(n, &e, Failed::Writing))?;
        let synced = journal.synced();
        if synced > trimmed {
            journal::trim(&tx, synced).map_err(|e| journal_fail(n, &e))?;
        }
        Ok(Open {
            tx,
            journal,
            synced,
            journal_files: false,
            results: Vec::new(),
        })
    }

    /// Applies `jobs`; false when one failed (the attempt is then over: the transaction
    /// holds the failed batch's partial work and must roll back).
    fn apply(&mut self, jobs: &[Job]) -> bool {
        for job in jobs {
            self.journal_files |= job.batch.journal_files;
            let result = writes::apply(&self.tx, &job.batch, &job.packed);
            let ok = result.is_ok();
            self.results.push(result);
            if !ok {
                return false;
            }
        }
        true
    }

    /// Applies `jobs` with a savepoint each: a failing batch's work is rolled back to its
    /// savepoint, and its failure is its result. Fails only if a savepoint does.
    fn apply_with_savepoints(&mut self, jobs: &[Job]) -> rusqlite::Result<()> {
        for job in jobs {
            self.journal_files |= job.batch.journal_files;
            self.tx.execute_batch("SAVEPOINT batch")?;
            let result = writes::apply(&self.tx, &job.batch, &job.packed);
            self.tx.execute_batch(if result.is_ok() {
                "RELEASE batch"
            } else {
                "ROLLBACK TO batch; RELEASE batch"
            })?;
            self.results.push(result);
        }
        Ok(())
    }

    /// Commits the batches applied (those whose results are `Ok` are kept).
    fn commit(self, trimmed: &mut i64) -> Vec<StoreResult<Applied>> {
        let n = self.results.len();
        let last = match self.journal_files {
            false => 0,
            true => match journal::last(&self.tx) {
                Ok(last) => last,
                // Nothing committed (the transaction rolls back as it drops).
                Err(e) => return journal_fail(n, &e),
            },
        };
        match self.tx.commit() {
            Ok(()) => {
                *trimmed = self.synced.max(*trimmed);
                self.journal.mark_committed(last);
                self.results
            }
            Err(e) => all_fail(n, &e, Failed::Committing),
        }
    }
}

/// Where a group failed: before its COMMIT (its BEGIN, a savepoint), or in it.
#[derive(Clone, Copy)]
enum Failed {
    Writing,
    Committing,
}

/// Every batch of a failed group fails. Out of a resource (a full disk, memory), SQLite
/// rolled the group back: nothing of it is kept, and the client may retry later
/// (`super::internal`). Any other failure before the COMMIT kept nothing either; one of
/// the COMMIT itself (an I/O error syncing the WAL) may leave the group's frames, its
/// commit mark included, in the WAL, which a restart's recovery would then keep: the
/// outcome is unknown.
fn all_fail(n: usize, error: &rusqlite::Error, at: Failed) -> Vec<StoreResult<Applied>> {
    let fail = || {
        let doing = match at {
            Failed::Writing => "writing",
            Failed::Committing => "committing",
        };
        let message = format!("{doing} a write group: {error}");
        super::unavailable(error, &message).unwrap_or_else(|| match at {
            Failed::Writing => internal(&message),
            Failed::Committing => StoreError::OutcomeUnknown(message.clone()),
        })
    };
    (0..n).map(|_| Err(fail())).collect()
}

fn journal_fail(n: usize, error: &StoreError) -> Vec<StoreResult<Applied>> {
    (0..n)
        .map(|_| Err(internal(&format!("keeping the file journal: {error}"))))
        .collect()
}

fn internal(message: &str) -> StoreError {
    StoreError::Internal(anyhow::anyhow!("{message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window is taken only under load and only when set: a write after a lone one
    /// (or the first write) commits at once.
    #[test]
    fn the_gather_window_is_taken_only_after_a_group_of_several() {
        assert_eq!(gather_window(0, 300), None);
        assert_eq!(gather_window(1, 300), None);
        assert_eq!(gather_window(2, 300), Some(Duration::from_micros(300)));
        assert_eq!(gather_window(256, 300), Some(Duration::from_micros(300)));
        assert_eq!(gather_window(6, 0), None);
    }
}
