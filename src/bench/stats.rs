//! What a run measured: per request name, an HDR histogram of latencies (µs) with OK/KO
//! counts, retries and errors by cause; per second of the run, counts and a coarser
//! histogram for the charts. Each worker records into its own `Recorder`; recorders are
//! merged once at the end, so recording takes no lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use super::client::Failure;

/// Significant digits of the per-request histograms (0.1% resolution).
const SIGFIG: u8 = 3;
/// The per-second histograms only feed charts.
const TIMELINE_SIGFIG: u8 = 2;

pub fn histogram(sigfig: u8) -> Histogram<u64> {
    Histogram::new(sigfig).expect("valid significant figures")
}

/// Records into an auto-resizing histogram (`saturating_record` would clamp to its
/// current, tiny, range instead of growing it).
pub fn put(histogram: &mut Histogram<u64>, value: u64) {
    if histogram.record(value).is_err() {
        histogram.saturating_record(value);
    }
}

/// How one request (after its retries) or one group of requests ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Status(u16),
    /// The status was right but the body was not what was written.
    Check(&'static str),
    Failure(Failure),
}

impl Outcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }

    pub fn label(&self) -> String {
        match self {
            Outcome::Ok => "ok".into(),
            Outcome::Status(s) => s.to_string(),
            Outcome::Check(what) => format!("check: {what}"),
            Outcome::Failure(f) => f.label().into(),
        }
    }
}

/// Figures of one request name (or group of requests).
#[derive(Clone)]
pub struct OpStats {
    /// From the intended send time (open model) or the send (closed model) to the end.
    pub latency: Histogram<u64>,
    /// From the actual send; kept only when it can differ from `latency` (open model).
    pub service: Option<Histogram<u64>>,
    pub ok: u64,
    pub ko: u64,
    /// Attempts that were repeated because of a retryable status (not counted in OK/KO).
    pub retries: u64,
    pub errors: BTreeMap<String, u64>,
    pub is_group: bool,
    /// Orders rows as the run first met them.
    pub first_seen: Instant,
}

impl OpStats {
    fn new(is_group: bool, with_service: bool, now: Instant) -> OpStats {
        OpStats {
            latency: histogram(SIGFIG),
            service: with_service.then(|| histogram(SIGFIG)),
            ok: 0,
            ko: 0,
            retries: 0,
            errors: BTreeMap::new(),
            is_group,
            first_seen: now,
        }
    }

    pub fn count(&self) -> u64 {
        self.ok + self.ko
    }

    fn merge(&mut self, other: &OpStats) {
        self.latency
            .add(&other.latency)
            .expect("histograms auto-resize");
        if let (Some(mine), Some(theirs)) = (&mut self.service, &other.service) {
            mine.add(theirs).expect("histograms auto-resize");
        }
        self.ok += other.ok;
        self.ko += other.ko;
        self.retries += other.retries;
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.first_seen = self.first_seen.min(other.first_seen);
    }
}

/// One second of the measured window.
#[derive(Clone)]
pub struct Second {
    pub ok: u64,
    pub ko: u64,
    pub latency: Histogram<u64>,
}

impl Second {
    fn new() -> Second {
        Second {
            ok: 0,
            ko: 0,
            latency: histogram(TIMELINE_SIGFIG),
        }
    }

    fn merge(&mut self, other: &Second) {
        self.ok += other.ok;
        self.ko += other.ko;
        self.latency.add(&other.latency).expect("auto-resize");
    }
}

/// Counters the live line reads while the run goes on (warm-up included).
#[derive(Default)]
pub struct Live {
    pub ok: AtomicU64,
    pub ko: AtomicU64,
}

/// Where workers flush their finished seconds.
#[derive(Default)]
pub struct Timeline {
    seconds: Mutex<Vec<Second>>,
}

impl Timeline {
    fn add(&self, index: usize, second: &Second) {
        let mut seconds = self.seconds.lock().expect("timeline lock");
        if seconds.len() <= index {
            seconds.resize_with(index + 1, Second::new);
        }
        seconds[index].merge(second);
    }

    pub fn take(&self) -> Vec<Second> {
        std::mem::take(&mut self.seconds.lock().expect("timeline lock"))
    }
}

/// What the workers of one run share.
#[derive(Clone)]
pub struct Shared {
    pub live: Arc<Live>,
    pub timeline: Arc<Timeline>,
    /// Requests meant to start before this are warm-up: run, not measured.
    pub measure_from: Instant,
    pub with_service: bool,
}

/// Where an operation's requests are recorded: a worker's own recorder, or a shared one.
pub trait Sink {
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        name: &'static str,
        is_group: bool,
        intended: Instant,
        sent: Instant,
        end: Instant,
        outcome: Outcome,
        retries: u32,
    );
}

impl Sink for Recorder {
    fn record(
        &mut self,
        name: &'static str,
        is_group: bool,
        intended: Instant,
        sent: Instant,
        end: Instant,
        outcome: Outcome,
        retries: u32,
    ) {
        Recorder::record(self, name, is_group, intended, sent, end, outcome, retries)
    }
}

/// A recorder shared by short-lived tasks (the open model); locked per record only.
pub struct Locked<'a>(pub &'a Mutex<Recorder>);

impl Sink for Locked<'_> {
    fn record(
        &mut self,
        name: &'static str,
        is_group: bool,
        intended: Instant,
        sent: Instant,
        end: Instant,
        outcome: Outcome,
        retries: u32,
    ) {
        let mut recorder = self.0.lock().expect("recorder lock");
        recorder.record(name, is_group, intended, sent, end, outcome, retries)
    }
}

/// One worker's figures.
pub struct Recorder {
    shared: Shared,
    ops: HashMap<&'static str, OpStats>,
    current: Option<(usize, Second)>,
}

impl Recorder {
    pub fn new(shared: Shared) -> Recorder {
        Recorder {
            shared,
            ops: HashMap::new(),
            current: None,
        }
    }

    /// Records a request or group that was meant to start at `intended`, was sent at
    /// `sent` and ended at `end`.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        name: &'static str,
        is_group: bool,
        intended: Instant,
        sent: Instant,
        end: Instant,
        outcome: Outcome,
        retries: u32,
    ) {
        let counter = if outcome.is_ok() {
            &self.shared.live.ok
        } else {
            &self.shared.live.ko
        };
        if !is_group {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        if intended < self.shared.measure_from {
            return;
        }
        let micros = |d: Duration| (d.as_micros() as u64).max(1);
        let latency = micros(end - intended);
        let with_service = self.shared.with_service;
        let stats = self
            .ops
            .entry(name)
            .or_insert_with(|| OpStats::new(is_group, with_service, intended));
        put(&mut stats.latency, latency);
        if let Some(service) = &mut stats.service {
            put(service, micros(end - sent));
        }
        stats.retries += u64::from(retries);
        if outcome.is_ok() {
            stats.ok += 1;
        } else {
            stats.ko += 1;
            *stats.errors.entry(outcome.label()).or_default() += 1;
        }
        if !is_group {
            self.count_in_second(intended, latency, outcome.is_ok());
        }
    }

    fn count_in_second(&mut self, intended: Instant, latency: u64, ok: bool) {
        let index = (intended - self.shared.measure_from).as_secs() as usize;
        if self.current.as_ref().is_some_and(|(i, _)| *i != index) {
            self.flush_second();
        }
        let (_, second) = self.current.get_or_insert_with(|| (index, Second::new()));
        if ok {
            second.ok += 1;
        } else {
            second.ko += 1;
        }
        put(&mut second.latency, latency);
    }

    fn flush_second(&mut self) {
        if let Some((index, second)) = self.current.take() {
            self.shared.timeline.add(index, &second);
        }
    }

    /// Hands this worker's figures over; call once, when the worker is done.
    pub fn finish(mut self) -> HashMap<&'static str, OpStats> {
        self.flush_second();
        std::mem::take(&mut self.ops)
    }
}

/// The merged figures of one run (or one phase of a workload).
#[derive(Clone, Default)]
pub struct Results {
    /// In the order the run first met them.
    pub requests: Vec<(String, OpStats)>,
    pub timeline: Vec<Second>,
    /// Length of the measured window (warm-up excluded).
    pub elapsed: Duration,
}

impl Results {
    pub fn from_workers(
        workers: Vec<HashMap<&'static str, OpStats>>,
        timeline: Vec<Second>,
        elapsed: Duration,
    ) -> Results {
        let mut merged: HashMap<&'static str, OpStats> = HashMap::new();
        for ops in workers {
            for (name, stats) in ops {
                match merged.get_mut(name) {
                    Some(mine) => mine.merge(&stats),
                    None => {
                        merged.insert(name, stats);
                    }
                }
            }
        }
        let mut requests: Vec<(String, OpStats)> = merged
            .into_iter()
            .map(|(name, stats)| (name.to_string(), stats))
            .collect();
        // Groups after requests, as Gatling lists them.
        requests.sort_by_key(|(_, s)| (s.is_group, s.first_seen));
        Results {
            requests,
            timeline,
            elapsed,
        }
    }

    pub fn get(&self, name: &str) -> Option<&OpStats> {
        self.requests
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
    }

    /// Successful requests of `name` (0 when none ran).
    pub fn ok(&self, name: &str) -> u64 {
        self.get(name).map_or(0, |s| s.ok)
    }

    /// All requests (groups excluded).
    pub fn total(&self) -> (u64, u64) {
        self.requests
            .iter()
            .filter(|(_, s)| !s.is_group)
            .fold((0, 0), |(ok, ko), (_, s)| (ok + s.ok, ko + s.ko))
    }
}

impl Results {
    /// Appends a later run (e.g. the next level of a tree): same-named rows merge, the
    /// timelines follow each other, and the measured times add up.
    pub fn append(&mut self, later: Results) {
        for (name, stats) in later.requests {
            match self.requests.iter_mut().find(|(n, _)| *n == name) {
                Some((_, mine)) => mine.merge(&stats),
                None => self.requests.push((name, stats)),
            }
        }
        self.timeline.extend(later.timeline);
        self.elapsed += later.elapsed;
    }
}
