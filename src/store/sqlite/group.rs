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
//! The metadata cache (`cache.rs`) learns of each group here, before its transaction
//! begins and after it ends, whatever the outcome (a panic included). The file journal
//! (`journal.rs`) is kept here too: each group deletes the entries sync rounds covered
//! since the last, and publishes the last entry it committed.
//!
//! Under load (the last group had more than one batch) the thread waits a short *gather
//! window* before it takes a group, as PostgreSQL's `commit_delay` does. Where the thread
//! gets a core as soon as it wakes (its short slice, `slice.rs`, or `--worker-nice`,
//! `crate::runtime`), it would otherwise wake for groups of two or three, and each write
//! would pay a larger share of a COMMIT and its sync.

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
        std::thread::Builder::new()
            .name("floe-sqlite-commit".into())
            .spawn(move || {
                // Each write waits on this thread: it should get a core soon after it
                // wakes, without taking a larger share of the CPU (`slice.rs`).
                checkpoint::on_commit_thread();
                if let Err(e) = slice::ask_for_short_slice() {
                    tracing::debug!(error = %e, "the commit thread keeps the default scheduler slice");
                }
                run(&writer, &cached, &journal, &jobs, &gather, &mut wal)
            })?;
        Ok(GroupCommitter {
            queue,
            gather_us,
            cache,
            #[cfg(test)]
            checkpoint_start,
            #[cfg(test)]
            checkpoints,
        })
    }

    /// Sets the gather window taken before each group under load (zero: none).
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

fn run(
    writer: &Mutex<Connection>,
    cache: &ObjectCache,
    journal: &JournalMarks,
    jobs: &mpsc::Receiver<Job>,
    gather_us: &AtomicU64,
    checkpoints: &mut Checkpoints,
) {
    // The journal entries deleted so far (all those up to here).
    let mut trimmed = 0;
    // How many batches the last group took: more than one means writes are queuing.
    let mut last = 0;
    // Ends when the store (every sender) is dropped.
    while let Ok(first) = jobs.recv() {
        if let Some(window) = gather_window(last, gather_us.load(Ordering::Relaxed)) {
            // A sleep, not a wait on the queue: a wait would be woken by every write.
            std::thread::sleep(window);
        }
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match jobs.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        // A panic in one group must not stop the store: its callers get an error (their
        // reply senders are dropped), the transaction rolls back as it unwinds, and the
        // thread goes on with the next group.
        let batches: Vec<&WriteBatch> = group.iter().map(|j| &j.batch).collect();
        let packed: Vec<&[Option<Vec<u8>>]> = group.iter().map(|j| j.packed.as_slice()).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _bracket = Bracket::begin(cache, &batches);
            let results = commit_group(writer, &batches, &packed, journal, &mut trimmed);
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
        drop((batches, packed));
        last = group.len();
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

/// The wait before the next group: the window, but only when the last group had more
/// than one batch (a lone write on an idle server commits at once).
fn gather_window(last_group: usize, window_us: u64) -> Option<Duration> {
    (last_group > 1 && window_us > 0).then(|| Duration::from_micros(window_us))
}

/// One transaction for `batches`; a result per batch, in order.
///
/// Most groups have no failing batch, so the group is first applied without a savepoint
/// per batch. Inside a savepoint SQLite copies every page a batch changes first into its
/// sub-journal, and every batch changes the same outbox, journal and index pages: those
/// copies and the savepoints' own work were a sixth of the commit thread's time in the
/// 50/50 mix. If a batch fails there, that attempt rolls back whole and the group runs
/// again with a savepoint each, where the failing batch fails alone.
fn commit_group(
    writer: &Mutex<Connection>,
    batches: &[&WriteBatch],
    packed: &[&[Option<Vec<u8>>]],
    journal: &JournalMarks,
    trimmed: &mut i64,
) -> Vec<StoreResult<Applied>> {
    let mut conn = writer
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let group = Group {
        batches,
        packed,
        journal,
    };
    if let Attempt::Done(results) = group.attempt(&mut conn, trimmed, Isolation::None) {
        return results;
    }
    match group.attempt(&mut conn, trimmed, Isolation::Savepoints) {
        Attempt::Done(results) => results,
        // Not returned with a savepoint per batch (there, a failing batch fails alone).
        Attempt::BatchFailed => (0..batches.len())
            .map(|_| Err(internal("a batch failed outside its savepoint")))
            .collect(),
    }
}

/// How the batches of one attempt are kept from each other's failures.
#[derive(Clone, Copy, PartialEq)]
enum Isolation {
    /// Not at all: the first failing batch ends the attempt (unless it is the only one).
    None,
    /// A savepoint per batch (but for a group of one, whose transaction is its savepoint).
    Savepoints,
}

enum Attempt {
    Done(Vec<StoreResult<Applied>>),
    /// A batch failed without a savepoint; the attempt rolled back whole.
    BatchFailed,
}

struct Group<'a> {
    batches: &'a [&'a WriteBatch],
    packed: &'a [&'a [Option<Vec<u8>>]],
    journal: &'a JournalMarks,
}

impl Group<'_> {
    fn attempt(&self, conn: &mut Connection, trimmed: &mut i64, isolation: Isolation) -> Attempt {
        let n = self.batches.len();
        let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => return Attempt::Done(all_fail(n, &e)),
        };
        let synced = self.journal.synced();
        if synced > *trimmed {
            if let Err(e) = journal::trim(&tx, synced) {
                return Attempt::Done(journal_fail(n, &e));
            }
        }
        let mut results = Vec::with_capacity(n);
        for (batch, packed) in self.batches.iter().zip(self.packed) {
            // A lone batch needs no savepoint in either mode: if it fails, nothing else
            // is in the transaction, so its result is returned as `Done` (and the
            // transaction rolls back below) and a lone batch never runs a second time.
            if n == 1 || isolation == Isolation::None {
                let result = writes::apply(&tx, batch, packed);
                if result.is_err() && n > 1 {
                    // The transaction rolls back as it drops.
                    return Attempt::BatchFailed;
                }
                results.push(result);
                continue;
            }
            if let Err(e) = tx.execute_batch("SAVEPOINT batch") {
                return Attempt::Done(all_fail(n, &e));
            }
            let result = writes::apply(&tx, batch, packed);
            let end = if result.is_ok() {
                "RELEASE batch"
            } else {
                "ROLLBACK TO batch; RELEASE batch"
            };
            if let Err(e) = tx.execute_batch(end) {
                return Attempt::Done(all_fail(n, &e));
            }
            results.push(result);
        }
        if results.iter().all(Result::is_err) {
            // Nothing to keep (the transaction rolls back as it drops; a lone batch's
            // partial work with it, and the trim waits for the next group).
            return Attempt::Done(results);
        }
        let last = match self.batches.iter().any(|b| b.journal_files) {
            false => 0,
            true => match journal::last(&tx) {
                Ok(last) => last,
                // Nothing committed (the transaction rolls back as it drops).
                Err(e) => return Attempt::Done(journal_fail(n, &e)),
            },
        };
        match tx.commit() {
            Ok(()) => {
                *trimmed = synced.max(*trimmed);
                self.journal.mark_committed(last);
                Attempt::Done(results)
            }
            Err(e) => Attempt::Done(all_fail(n, &e)),
        }
    }
}

fn all_fail(n: usize, error: &rusqlite::Error) -> Vec<StoreResult<Applied>> {
    let fail = || {
        let message = format!("committing a write group: {error}");
        // Out of a resource, the group rolled back: nothing of it is kept (`super::internal`).
        super::unavailable(error, &message).unwrap_or_else(|| internal(&message))
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
