//! The line on the terminal while a run goes on: ops/s over the last second, errors,
//! elapsed and remaining time (or operations).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::load::Limits;
use super::stats::Live;

/// When not on a terminal, a line is printed this often instead of one redrawn line.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences live lines (tests, and `--quiet`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub struct LiveLine {
    task: Option<tokio::task::JoinHandle<()>>,
    redraw: bool,
}

impl LiveLine {
    pub fn start(label: &str, live: Arc<Live>, limits: &Limits) -> LiveLine {
        if QUIET.load(Ordering::Relaxed) {
            return LiveLine {
                task: None,
                redraw: false,
            };
        }
        let redraw = std::io::stderr().is_terminal();
        let label = label.to_string();
        let total = limits.duration.map(|d| d + limits.warmup);
        let ops_limit = limits.ops;
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut last_plain = started;
            let mut previous = 0;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                let ok = live.ok.load(Ordering::Relaxed);
                let ko = live.ko.load(Ordering::Relaxed);
                let rate = ok + ko - previous;
                previous = ok + ko;
                let elapsed = started.elapsed();
                let remaining = match (total, ops_limit) {
                    (Some(t), _) => format!("{:.0}s left", t.saturating_sub(elapsed).as_secs_f64()),
                    (None, Some(n)) => format!("{} ops left", n.saturating_sub(ok + ko)),
                    (None, None) => "until done".into(),
                };
                let line = format!(
                    "[{label}] {:>5.0}s  {rate:>8} ops/s  ok {ok}  errors {ko}  {remaining}",
                    elapsed.as_secs_f64()
                );
                let mut err = std::io::stderr().lock();
                if redraw {
                    let _ = write!(err, "\r\x1b[2K{line}");
                    let _ = err.flush();
                } else if last_plain.elapsed() >= PLAIN_EVERY {
                    last_plain = Instant::now();
                    let _ = writeln!(err, "{line}");
                }
            }
        });
        LiveLine {
            task: Some(task),
            redraw,
        }
    }

    pub fn stop(self) {
        if let Some(task) = self.task {
            task.abort();
            if self.redraw {
                let _ = write!(std::io::stderr(), "\r\x1b[2K");
            }
        }
    }
}
