//! The per-request log line, kept off the request path.
//!
//! A request only appends a small record (time, method, path, status, latency, request
//! id) to a shared buffer. A background thread takes the whole buffer every
//! [`FLUSH_EVERY`], formats the lines (text or JSON, as `--log-format` says) and writes
//! them to stderr in one write. Formatting each line through the log subscriber in the
//! request's own thread cost ~11% of loadTable throughput at 50 connections on 2 cores,
//! and a channel with a wake-up per line cost more; batching costs a few percent.
//! If the buffer is full (stderr stalled), lines are dropped and counted, never waited
//! for.

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use axum::http::Method;
use chrono::{DateTime, SecondsFormat, Utc};

/// Lines buffered before new ones are dropped.
const MAX_BUFFERED: usize = 64 * 1024;
/// How often buffered lines are written.
const FLUSH_EVERY: Duration = Duration::from_millis(20);

pub struct Line {
    pub at: SystemTime,
    pub method: Method,
    pub path: String,
    pub status: u16,
    pub micros: u64,
    pub request_id: String,
}

static BUFFER: Mutex<Vec<Line>> = Mutex::new(Vec::new());
static WRITER: OnceLock<()> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);
static JSON: AtomicBool = AtomicBool::new(false);

/// Chooses JSON lines instead of text (`--log-format json`).
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

/// Whether request lines are wanted at all (`--log warn` turns them off).
pub fn enabled() -> bool {
    tracing::enabled!(target: "floe::request", tracing::Level::INFO)
}

/// Buffers a line; never blocks on I/O.
pub fn log(line: Line) {
    WRITER.get_or_init(|| {
        std::thread::Builder::new()
            .name("floe-access-log".into())
            .spawn(write_lines)
            .expect("start the access log thread");
    });
    let mut buffer = BUFFER.lock().unwrap_or_else(|e| e.into_inner());
    if buffer.len() < MAX_BUFFERED {
        buffer.push(line);
    } else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

fn write_lines() {
    loop {
        std::thread::sleep(FLUSH_EVERY);
        flush();
    }
}

/// Writes what is buffered now (also called once on shutdown).
pub fn flush() {
    let lines = std::mem::take(&mut *BUFFER.lock().unwrap_or_else(|e| e.into_inner()));
    let dropped = DROPPED.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "request log lines dropped: the log could not keep up"
        );
    }
    if lines.is_empty() {
        return;
    }
    let json = JSON.load(Ordering::Relaxed);
    let mut text = String::with_capacity(lines.len() * 160);
    let mut stamp = Stamp::default();
    for line in &lines {
        format_line(&mut text, line, json, &mut stamp);
    }
    // Nothing useful can be done if stderr is gone.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A line's timestamp as RFC 3339 with microseconds (`2026-11-26T18:36:26.123456Z`, as
/// the log subscriber writes it). The text up to the second is formatted once per second
/// (a batch spans about 20 ms): chrono's formatting per line was about half of a line's
/// cost, and the line's cost is paid for every request.
#[derive(Default)]
struct Stamp {
    second: Option<u64>,
    /// `YYYY-MM-DDTHH:MM:SS` of `second`.
    prefix: String,
}

impl Stamp {
    fn push(&mut self, out: &mut String, at: SystemTime) {
        let Ok(since_epoch) = at.duration_since(SystemTime::UNIX_EPOCH) else {
            out.push_str(&DateTime::<Utc>::from(at).to_rfc3339_opts(SecondsFormat::Micros, true));
            return;
        };
        let second = since_epoch.as_secs();
        if self.second != Some(second) {
            self.prefix.clear();
            let _ = write!(
                self.prefix,
                "{}",
                DateTime::<Utc>::from(SystemTime::UNIX_EPOCH + Duration::from_secs(second))
                    .format("%Y-%m-%dT%H:%M:%S")
            );
            self.second = Some(second);
        }
        out.push_str(&self.prefix);
        out.push('.');
        let micros = since_epoch.subsec_micros();
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(micros);
        out.extend(std::iter::repeat_n('0', 6 - digits.len()));
        out.push_str(digits);
        out.push('Z');
    }
}

/// One line in the shape of the log subscriber's own text or JSON lines.
fn format_line(out: &mut String, line: &Line, json: bool, stamp: &mut Stamp) {
    if json {
        let mut at = String::with_capacity(27);
        stamp.push(&mut at, line.at);
        let value = serde_json::json!({
            "timestamp": at,
            "level": "INFO",
            "fields": {
                "method": line.method.as_str(),
                "path": line.path,
                "status": line.status,
                "micros": line.micros,
                "request_id": line.request_id,
            },
            "target": "floe::request",
        });
        let _ = writeln!(out, "{value}");
    } else {
        // Pushed piece by piece: `writeln!` with six arguments cost more than the rest.
        let mut number = itoa::Buffer::new();
        stamp.push(out, line.at);
        out.push_str("  INFO floe::request: method=");
        out.push_str(line.method.as_str());
        out.push_str(" path=");
        out.push_str(&line.path);
        out.push_str(" status=");
        out.push_str(number.format(line.status));
        out.push_str(" micros=");
        out.push_str(number.format(line.micros));
        out.push_str(" request_id=");
        out.push_str(&line.request_id);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_in_text_and_json() {
        let line = Line {
            at: SystemTime::UNIX_EPOCH,
            method: Method::GET,
            path: "/v1/config".into(),
            status: 200,
            micros: 12,
            request_id: "r".into(),
        };
        let mut stamp = Stamp::default();
        let mut text = String::new();
        format_line(&mut text, &line, false, &mut stamp);
        assert_eq!(
            text,
            "1970-01-01T00:00:00.000000Z  INFO floe::request: method=GET path=/v1/config status=200 micros=12 request_id=r\n"
        );
        let mut json = String::new();
        format_line(&mut json, &line, true, &mut stamp);
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["fields"]["status"], 200);
        assert_eq!(value["timestamp"], "1970-01-01T00:00:00.000000Z");
    }

    /// The timestamp reads as chrono writes it, within a second (the prefix is reused),
    /// across seconds and days, and for micros of every width.
    #[test]
    fn timestamps_match_chrono() {
        let mut stamp = Stamp::default();
        for (secs, micros) in [
            (1_764_182_186, 0),
            (1_764_182_186, 7),
            (1_764_182_186, 123_456),
            (1_764_182_187, 999_999),
            (1_764_268_800, 10),
            (951_782_400, 500),
        ] {
            let at = SystemTime::UNIX_EPOCH + Duration::new(secs, micros * 1000 + 999);
            let mut ours = String::new();
            stamp.push(&mut ours, at);
            let chrono = DateTime::<Utc>::from(at).to_rfc3339_opts(SecondsFormat::Micros, true);
            assert_eq!(ours, chrono);
        }
    }
}
