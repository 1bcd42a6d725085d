//! Group commit (`--db-group-commit`): concurrent writes of this node share one
//! transaction and one COMMIT.
//!
//! Why: every write appends its change events last, and the outbox's position counter is
//! one row (`event_head`) locked until COMMIT, so without grouping each commit in the
//! database waits for the one before it to flush its WAL. Under 50 writers the backends
//! were found waiting on that lock (`Lock:transactionid` in `pg_stat_activity`) rather
//! than working, and writes topped out at about one WAL flush each, one after another.
//!
//! How a group runs (on one pooled connection; [`COMMITTERS`] groups may be in flight,
//! so one group's statements overlap another's COMMIT, except that a group waits for an
//! earlier one committing to the same tables to be over: `Committing`, which keeps
//! commits pipelined on one table (`catalog/locks.rs`) in order):
//! - BEGIN; each batch inside a savepoint ([`writes::apply_rows`]). A batch that fails
//!   rolls back to its savepoint and fails alone; a deadlock or serialization failure is
//!   sent again in a later group, as `PostgresStore::run` retries it.
//! - A refusal (a stale compare-and-swap, a name already taken) is answered only once the
//!   group's fate is known: it may rest on an earlier batch of the same group (the name
//!   that batch created, the pointer it moved), which stands only if the group commits.
//!   If it does not, such a refusal is sent again instead of being answered.
//! - The events of the batches that succeeded are appended last, in batch order, then
//!   one COMMIT. Taking the counter's lock last keeps the group from holding it while it
//!   waits for another transaction's row locks (a commit that lost a race holds those and
//!   takes the counter last too: no deadlock between them).
//! - No batch is answered with success before COMMIT returns; if the append or the COMMIT
//!   fails, every batch still waiting gets that failure: none of them was committed, but
//!   for a COMMIT whose connection failed (`OutcomeUnknown`: it may have been). Refusals
//!   that may rest on an earlier batch are then sent again, checked afresh.

use std::collections::HashSet;
use std::sync::Arc;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot, watch, Mutex};

use super::{
    backoff, commit_failure, is_retryable, is_unavailable, outbox, redo_or_failure, writes,
    Failure, MAX_ATTEMPTS,
};
use crate::store::{Applied, ObjectKey, StoreError, StoreResult, WriteBatch, WriteTicket};

/// Most batches in one group: each holds a subtransaction, and PostgreSQL keeps 64 per
/// backend in shared memory before spilling (which slows every snapshot).
const MAX_GROUP: usize = 32;

/// Groups in flight at once. They serialise only at the counter (append, COMMIT); the
/// catalog's per-object commit locks keep two of them from writing the same object.
const COMMITTERS: usize = 2;

/// What one trip of a batch through the group committer comes back as.
enum Outcome {
    Done(StoreResult<Applied>),
    /// Nothing of the batch was committed, and the reason is worth another try (a
    /// deadlock, a serialization failure, prepared statements lost to a pooler, or a
    /// refusal checked against a group that then did not commit): send it again.
    Retry {
        batch: Box<WriteBatch>,
        reason: String,
    },
}

struct Job {
    batch: WriteBatch,
    reply: oneshot::Sender<Outcome>,
}

impl Job {
    fn answer(self, outcome: impl FnOnce(WriteBatch) -> Outcome) {
        let _ = self.reply.send(outcome(self.batch));
    }

    fn retry(self, reason: String) {
        self.answer(|batch| Outcome::Retry {
            batch: Box::new(batch),
            reason,
        })
    }

    fn fail(self, error: StoreError) {
        self.answer(|_| Outcome::Done(Err(error)))
    }
}

/// The handle of this node's group committer (tasks that live as long as the store).
pub(super) struct Groups {
    jobs: mpsc::UnboundedSender<Job>,
}

impl Groups {
    /// Starts the committers; must be called inside the Tokio runtime.
    pub(super) fn start(pool: Pool) -> Self {
        let (jobs, queue) = mpsc::unbounded_channel();
        let queue = Arc::new(Mutex::new(queue));
        let committing = Arc::new(Committing::default());
        for _ in 0..COMMITTERS {
            tokio::spawn(committer(pool.clone(), queue.clone(), committing.clone()));
        }
        Groups { jobs }
    }

    /// `Store::write` through the groups.
    pub(super) async fn write(&self, batch: WriteBatch) -> StoreResult<Applied> {
        self.enqueue(batch).await
    }

    /// `Store::enqueue` through the groups: puts `batch` in the queue now (so it joins
    /// a group no earlier than any batch queued before it) and returns the wait for its
    /// outcome, sending it again after a conflict (with the same jittered backoff and
    /// bound as `PostgresStore::run`).
    ///
    /// A group does not start while an earlier group committing to the same tables is
    /// not over (`Committing`), so a batch reaches its rows after every batch queued
    /// before it for them has committed. A batch sent again after a conflict loses its
    /// place; order only saves work (a pipelined commit built on an earlier one that
    /// failed is redone), and correctness is always the compare-and-swap's. Measured
    /// without the wait: half the pipelined commits to one hot table reached the row
    /// before the commit they were built on and were redone.
    pub(super) fn enqueue(&self, batch: WriteBatch) -> WriteTicket {
        let jobs = self.jobs.clone();
        let first = send(&jobs, batch);
        Box::pin(async move {
            let mut outcome = first.await;
            for n in 1..=MAX_ATTEMPTS {
                match outcome {
                    Outcome::Done(result) => return result,
                    Outcome::Retry { batch, reason } if n < MAX_ATTEMPTS => {
                        tracing::info!(attempt = n, error = %reason, "retrying a database conflict");
                        backoff(n).await;
                        outcome = send(&jobs, *batch).await;
                    }
                    Outcome::Retry { reason, .. } => {
                        return Err(StoreError::Internal(anyhow::anyhow!(
                            "database error: {reason}"
                        )))
                    }
                }
            }
            unreachable!("the loop returns on its last attempt")
        })
    }
}

/// Queues `batch` now; the future is its trip's outcome.
fn send(
    jobs: &mpsc::UnboundedSender<Job>,
    batch: WriteBatch,
) -> impl std::future::Future<Output = Outcome> + Send + 'static {
    let (reply, outcome) = oneshot::channel();
    let sent = jobs.send(Job { batch, reply }).is_ok();
    async move {
        if !sent {
            return Outcome::Done(Err(StoreError::Unavailable(
                "the group committer has stopped".into(),
            )));
        }
        // Handed over, then dropped unanswered: the committer ended (a panic, the
        // runtime's shutdown) at a point this side cannot see, perhaps inside COMMIT.
        outcome.await.unwrap_or_else(|_| {
            Outcome::Done(Err(StoreError::OutcomeUnknown(
                "the group committer stopped with this write".into(),
            )))
        })
    }
}

async fn committer(
    pool: Pool,
    queue: Arc<Mutex<mpsc::UnboundedReceiver<Job>>>,
    committing: Arc<Committing>,
) {
    loop {
        // The next group is what is queued once this committer's turn comes.
        let (jobs, earlier, done) = {
            let mut queue = queue.lock().await;
            let Some(first) = queue.recv().await else {
                return;
            };
            let mut jobs = vec![first];
            while jobs.len() < MAX_GROUP {
                match queue.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
            // Entered while the queue is held, so in queue order.
            let (earlier, done) = committing.enter(objects_of(&jobs));
            (jobs, earlier, done)
        };
        for mut group in earlier {
            // An error means that group's task is gone: it is not committing any more.
            let _ = group.wait_for(|over| *over).await;
        }
        commit_group(&pool, jobs).await;
        drop(done);
    }
}

/// Tables and views a group writes.
type Objects = HashSet<ObjectKey>;

/// A catalog change (`Reach::Everything`) rewrites no table's or view's row, so no
/// pipelined commit can trip over it: only the objects named count here.
fn objects_of(jobs: &[Job]) -> Objects {
    let mut objects = Objects::new();
    for job in jobs {
        job.batch.mutation.objects_written(&mut objects);
    }
    objects
}

/// The groups taken from the queue and not yet over, with the tables and views they
/// write (commits, drops, renames, undrops). A group waits for every earlier one that
/// writes one of its objects to be over before it sends anything: a commit pipelined on one of theirs
/// (`Groups::enqueue`) must not reach the row first, because its UPDATE would see the row
/// as it was before that group, find no row with the expected pointer, and fail its
/// compare-and-swap rather than wait for the lock (READ COMMITTED re-checks only rows
/// that matched). Groups over other objects still run side by side.
#[derive(Default)]
struct Committing {
    groups: std::sync::Mutex<Vec<(Objects, watch::Receiver<bool>)>>,
}

impl Committing {
    /// Registers a group over `objects`; returns the earlier groups to wait for, and
    /// what marks this one over when dropped.
    fn enter(&self, objects: Objects) -> (Vec<watch::Receiver<bool>>, OverOnDrop) {
        let (over, over_rx) = watch::channel(false);
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        groups.retain(|(_, theirs_over)| !*theirs_over.borrow());
        let earlier = groups
            .iter()
            .filter(|(theirs, _)| !theirs.is_disjoint(&objects))
            .map(|(_, theirs_over)| theirs_over.clone())
            .collect();
        if !objects.is_empty() {
            groups.push((objects, over_rx));
        }
        (earlier, OverOnDrop(over))
    }
}

/// Marks a group over when dropped (committed, failed, or its task gone).
struct OverOnDrop(watch::Sender<bool>);

impl Drop for OverOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(true);
    }
}

/// The failure of a whole group, as each of its batches gets it (a
/// `tokio_postgres::Error` cannot be cloned).
fn group_failure(error: &tokio_postgres::Error) -> impl Fn() -> StoreError + '_ {
    move || {
        if is_unavailable(error) {
            StoreError::Unavailable(format!("database: {error}"))
        } else {
            StoreError::Internal(anyhow::anyhow!("database error: {error}"))
        }
    }
}

/// How a batch that failed on its own is answered.
fn answer_failure(job: Job, failure: Failure) {
    match failure {
        Failure::Store(e) => job.fail(e),
        Failure::Sql(e) => match redo_or_failure(e) {
            Ok(e) => job.retry(e.to_string()),
            Err(failure) => job.fail(failure),
        },
    }
}

/// A batch that failed inside the group, waiting for the group's outcome.
struct Refused {
    job: Job,
    failure: Failure,
    /// An earlier batch of the group was applied, so the refusal may rest on it.
    after_applied: bool,
}

/// Answers the refused batches once the group is over: as they failed if the group
/// committed (or their failure cannot rest on it), or sent again if it did not.
fn answer_refused(refused: Vec<Refused>, committed: bool) {
    for r in refused {
        if committed || !r.after_applied {
            answer_failure(r.job, r.failure);
        } else {
            r.job
                .retry("checked against a group of writes that did not commit".into());
        }
    }
}

async fn commit_group(pool: &Pool, jobs: Vec<Job>) {
    let mut client = match pool.get().await {
        Ok(client) => client,
        Err(e) => {
            let message = format!("database connection: {e}");
            for job in jobs {
                job.fail(StoreError::Unavailable(message.clone()));
            }
            return;
        }
    };
    let tx = match client.transaction().await {
        Ok(tx) => tx,
        Err(e) => {
            let fail = group_failure(&e);
            return jobs.into_iter().for_each(|job| job.fail(fail()));
        }
    };
    let mut applied: Vec<(Job, Applied)> = Vec::with_capacity(jobs.len());
    let mut refused: Vec<Refused> = Vec::new();
    let mut jobs = jobs.into_iter();
    while let Some(job) = jobs.next() {
        let result = match tx.batch_execute("SAVEPOINT batch").await {
            Ok(()) => writes::apply_rows(&tx, &job.batch).await,
            Err(e) => Err(Failure::Sql(e)),
        };
        match result {
            Ok(done) => applied.push((job, done)),
            Err(failure) => {
                if let Err(e) = tx.batch_execute("ROLLBACK TO SAVEPOINT batch").await {
                    // The transaction is unusable: nothing of this group commits.
                    let fail = group_failure(&e);
                    let waiting = applied.into_iter().map(|(j, _)| j).chain(jobs);
                    std::iter::once(job)
                        .chain(waiting)
                        .for_each(|j| j.fail(fail()));
                    return answer_refused(refused, false);
                }
                let after_applied = !applied.is_empty();
                refused.push(Refused {
                    job,
                    failure,
                    after_applied,
                });
            }
        }
    }
    if applied.is_empty() {
        // Nothing to commit (the transaction rolls back when dropped).
        return answer_refused(refused, true);
    }
    let events: Vec<_> = applied
        .iter()
        .flat_map(|(job, _)| job.batch.events.iter().cloned())
        .collect();
    let finished = match outbox::append(&tx, &events).await {
        Ok(()) => tx.commit().await.map_err(commit_failure),
        Err(e) => Err(e),
    };
    let committed = finished.is_ok();
    match finished {
        Ok(()) => {
            for (job, done) in applied {
                job.answer(|batch| Outcome::Done(Ok(done.of(batch))));
            }
        }
        Err(Failure::Sql(e)) if is_retryable(&e) => {
            for (job, _) in applied {
                job.retry(e.to_string());
            }
        }
        Err(Failure::Sql(e)) => {
            let fail = group_failure(&e);
            applied.into_iter().for_each(|(job, _)| job.fail(fail()));
        }
        Err(Failure::Store(StoreError::OutcomeUnknown(message))) => {
            for (job, _) in applied {
                job.fail(StoreError::OutcomeUnknown(message.clone()));
            }
        }
        Err(Failure::Store(e)) => {
            let message = e.to_string();
            for (job, _) in applied {
                job.fail(StoreError::Internal(anyhow::anyhow!("{message}")));
            }
        }
    }
    answer_refused(refused, committed);
}
