//! The two load models.
//!
//! - Closed: N users, each sending its next operation as soon as the previous one ends
//!   ("sequential" is 1 user, "concurrent" 50). Latency runs from the send.
//! - Open: operations arrive at a fixed rate whatever the server does. Latency runs
//!   from each operation's *intended* start, so when the server stalls and the tool must
//!   wait for a free connection, the wait is counted (no coordinated omission).
//!
//! Both stop at a duration, an operation count, or when the workload runs out of work,
//! whichever comes first; operations meant to start during the warm-up are run but not
//! measured.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use tokio::sync::Semaphore;

use super::client::Client;
use super::live::LiveLine;
use super::op::{execute, Op};
use super::stats::{Live, Locked, Recorder, Results, Shared, Timeline};

/// A generator of operations; shared by every user of a run.
pub trait Workload: Send + Sync {
    /// The next operation of `user`, or `None` when there is no more work.
    fn next_op(&self, user: &mut User) -> Option<Op>;

    /// Seed of each user's random generator.
    fn user_seed(&self, user: usize) -> u64 {
        0x5eed_0000 + user as u64
    }
}

/// One virtual user (closed model) or the scheduler of one stream (open model).
pub struct User {
    pub id: usize,
    pub rng: SmallRng,
}

/// When a run ends.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Measured time, after the warm-up.
    pub duration: Option<Duration>,
    /// Measured operations, after the warm-up.
    pub ops: Option<u64>,
    pub warmup: Duration,
}

impl Limits {
    pub fn for_duration(duration: Duration) -> Limits {
        Limits {
            duration: Some(duration),
            ..Limits::default()
        }
    }
}

/// How open-model arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrivals {
    /// Exactly 1/rate apart.
    #[default]
    Uniform,
    /// Exponential gaps (a Poisson process), like Gatling's `randomized` injection.
    Poisson,
}

/// One open-model stream: a workload at its own rate (ops/s).
pub struct Stream {
    pub workload: Arc<dyn Workload>,
    pub rate: f64,
}

struct Run {
    shared: Shared,
    limits: Limits,
    deadline: Option<Instant>,
    measured_ops: AtomicU64,
}

impl Run {
    fn new(limits: Limits, with_service: bool) -> Run {
        let measure_from = Instant::now() + limits.warmup;
        Run {
            shared: Shared {
                live: Arc::new(Live::default()),
                timeline: Arc::new(Timeline::default()),
                measure_from,
                with_service,
            },
            limits,
            deadline: limits.duration.map(|d| measure_from + d),
            measured_ops: AtomicU64::new(0),
        }
    }

    /// Whether an operation meant to start at `at` may still start.
    fn admit(&self, at: Instant) -> bool {
        if self.deadline.is_some_and(|d| at >= d) {
            return false;
        }
        match self.limits.ops {
            Some(limit) if at >= self.shared.measure_from => {
                self.measured_ops.fetch_add(1, Ordering::Relaxed) < limit
            }
            _ => true,
        }
    }

    fn results(&self, workers: Vec<Recorder>) -> Results {
        let end = Instant::now();
        let elapsed = end.saturating_duration_since(self.shared.measure_from);
        let workers = workers.into_iter().map(Recorder::finish).collect();
        Results::from_workers(workers, self.shared.timeline.take(), elapsed)
    }
}

/// Runs `users` closed-loop users until the limits or the workload's end.
pub async fn run_closed(
    client: Arc<Client>,
    workload: Arc<dyn Workload>,
    users: usize,
    limits: Limits,
    label: &str,
) -> Results {
    let run = Arc::new(Run::new(limits, false));
    let live = LiveLine::start(label, run.shared.live.clone(), &limits);
    let users = users.max(1);
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(users);
    // Like wrk: a thread per core, each with its own single-threaded runtime and its
    // share of the users, so that no request hops between threads.
    let mut finished = Vec::with_capacity(threads);
    for thread in 0..threads {
        let (client, workload, run) = (client.clone(), workload.clone(), run.clone());
        let ids: Vec<usize> = (thread..users).step_by(threads).collect();
        let (done, finished_rx) = tokio::sync::oneshot::channel();
        finished.push(finished_rx);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the users");
            let recorders = runtime.block_on(async move {
                let handles: Vec<_> = ids
                    .into_iter()
                    .map(|id| {
                        tokio::spawn(user_loop(id, client.clone(), workload.clone(), run.clone()))
                    })
                    .collect();
                let mut recorders = Vec::with_capacity(handles.len());
                for handle in handles {
                    recorders.push(handle.await.expect("a user task panicked"));
                }
                recorders
            });
            let _ = done.send(recorders);
        });
    }
    let mut recorders = Vec::with_capacity(users);
    for thread in finished {
        recorders.extend(thread.await.expect("a user thread panicked"));
    }
    live.stop();
    run.results(recorders)
}

async fn user_loop(
    id: usize,
    client: Arc<Client>,
    workload: Arc<dyn Workload>,
    run: Arc<Run>,
) -> Recorder {
    let mut user = User {
        id,
        rng: SmallRng::seed_from_u64(workload.user_seed(id)),
    };
    let mut recorder = Recorder::new(run.shared.clone());
    let mut conn = None;
    loop {
        let now = Instant::now();
        if !run.admit(now) {
            break;
        }
        let Some(op) = workload.next_op(&mut user) else {
            break;
        };
        execute(&client, Some(&mut conn), &op, now, &mut recorder).await;
    }
    recorder
}

/// Runs open-model streams at their rates, at most `max_in_flight` operations at a time.
pub async fn run_open(
    client: Arc<Client>,
    streams: Vec<Stream>,
    arrivals: Arrivals,
    max_in_flight: usize,
    limits: Limits,
    label: &str,
) -> Results {
    let run = Arc::new(Run::new(limits, true));
    let live = LiveLine::start(label, run.shared.live.clone(), &limits);
    let in_flight = Arc::new(Semaphore::new(max_in_flight.max(1)));
    let recorder = Arc::new(Mutex::new(Recorder::new(run.shared.clone())));
    let start = Instant::now();
    let mut schedulers = Vec::new();
    for (index, stream) in streams.into_iter().enumerate() {
        let (client, run, in_flight, recorder) = (
            client.clone(),
            run.clone(),
            in_flight.clone(),
            recorder.clone(),
        );
        if stream.rate.is_nan() || stream.rate <= 0.0 {
            continue;
        }
        let handle = tokio::runtime::Handle::current();
        // A thread of its own: tokio's timer ticks in whole milliseconds, and being late
        // to an intended start would count against the server.
        schedulers.push(tokio::task::spawn_blocking(move || {
            let mut user = User {
                id: index,
                rng: SmallRng::seed_from_u64(stream.workload.user_seed(index)),
            };
            let gap = Exp::new(stream.rate).expect("a positive rate");
            let mut next = start;
            while run.admit(next) {
                wait_until(next);
                let Some(op) = stream.workload.next_op(&mut user) else {
                    break;
                };
                // Waiting here delays the send, never the intended start.
                let permit = handle
                    .block_on(in_flight.clone().acquire_owned())
                    .expect("the semaphore is never closed");
                let (client, recorder) = (client.clone(), recorder.clone());
                handle.spawn(async move {
                    execute(&client, None, &op, next, &mut Locked(&recorder)).await;
                    // The recorder is unwrapped once every permit is back: release it first.
                    drop(recorder);
                    drop(permit);
                });
                next += match arrivals {
                    Arrivals::Uniform => Duration::from_secs_f64(1.0 / stream.rate),
                    Arrivals::Poisson => Duration::from_secs_f64(gap.sample(&mut user.rng)),
                };
            }
        }));
    }
    for scheduler in schedulers {
        scheduler.await.expect("a scheduler panicked");
    }
    // Every permit back means every operation has ended.
    let all = u32::try_from(max_in_flight.max(1)).unwrap_or(u32::MAX);
    let _ = in_flight.acquire_many(all).await;
    live.stop();
    let recorder = Arc::try_unwrap(recorder)
        .ok()
        .expect("no operation outlives the run")
        .into_inner()
        .expect("recorder lock");
    run.results(vec![recorder])
}

/// The OS wakes a sleeping thread tens of µs late; the last stretch is spun instead.
const SPIN: Duration = Duration::from_micros(100);

fn wait_until(at: Instant) {
    let now = Instant::now();
    if at > now + SPIN {
        std::thread::sleep(at - now - SPIN);
    }
    while Instant::now() < at {
        std::hint::spin_loop();
    }
}

/// A workload from a closure.
pub struct FromFn<F>(pub F);

impl<F> Workload for FromFn<F>
where
    F: Fn(&mut User) -> Option<Op> + Send + Sync,
{
    fn next_op(&self, user: &mut User) -> Option<Op> {
        (self.0)(user)
    }
}

/// Operations `op(0) … op(len - 1)`, each handed to exactly one user, in order.
pub fn indexed<F>(len: u64, op: F) -> Arc<dyn Workload>
where
    F: Fn(u64) -> Op + Send + Sync + 'static,
{
    let next = AtomicU64::new(0);
    Arc::new(FromFn(move |_: &mut User| {
        let i = next.fetch_add(1, Ordering::Relaxed);
        (i < len).then(|| op(i))
    }))
}

/// Operations `op(0), op(1), …` without end, each index handed out once, wrapping at
/// `len` (Polaris's circular feeders); `op` also gets the round (`i / len`).
pub fn circular<T, F>(len: u64, op: F) -> impl Fn() -> T + Send + Sync
where
    F: Fn(u64, u64) -> T + Send + Sync,
{
    let next = AtomicU64::new(0);
    move || {
        let i = next.fetch_add(1, Ordering::Relaxed);
        op(i % len.max(1), i / len.max(1))
    }
}

/// A load model with its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    Closed {
        users: usize,
    },
    Open {
        rate: f64,
        arrivals: Arrivals,
        max_in_flight: usize,
    },
}

/// "closed, 1 user (sequential)", "closed, 20 users".
pub fn closed(users: usize) -> String {
    match users {
        1 => "closed, 1 user (sequential)".into(),
        n => format!("closed, {n} users"),
    }
}

impl Model {
    pub fn describe(&self) -> String {
        match self {
            Model::Closed { users } => closed(*users),
            Model::Open {
                rate,
                arrivals,
                max_in_flight,
            } => format!(
                "open, {rate} ops/s ({}), at most {max_in_flight} in flight",
                match arrivals {
                    Arrivals::Uniform => "evenly spaced",
                    Arrivals::Poisson => "Poisson arrivals",
                }
            ),
        }
    }
}

/// Runs one workload under `model`.
pub async fn run(
    client: Arc<Client>,
    workload: Arc<dyn Workload>,
    model: Model,
    limits: Limits,
    label: &str,
) -> Results {
    match model {
        Model::Closed { users } => run_closed(client, workload, users, limits, label).await,
        Model::Open {
            rate,
            arrivals,
            max_in_flight,
        } => {
            let streams = vec![Stream { workload, rate }];
            run_open(client, streams, arrivals, max_in_flight, limits, label).await
        }
    }
}
