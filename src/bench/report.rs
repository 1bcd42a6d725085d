//! A finished run's figures in the Polaris report's shape (per request: count, OK, KO,
//! mean, min, p50, p75, p99, max in ms), as a terminal table, CSV and JSON.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

use super::stats::{OpStats, Results};

/// One phase of a workload (e.g. "namespaces" of create-tree-dataset) and its figures.
#[derive(Clone)]
pub struct Phase {
    pub name: String,
    /// The load model, as a reader wants to see it ("closed, 20 users").
    pub load: String,
    pub results: Results,
}

/// A count the workload promises (create-tree-dataset's assertions).
#[derive(Debug, Clone)]
pub struct Expectation {
    pub what: String,
    pub expected: u64,
    pub actual: u64,
}

impl Expectation {
    pub fn met(&self) -> bool {
        self.expected == self.actual
    }
}

/// Everything one `floe bench` workload produced.
#[derive(Clone, Default)]
pub struct Report {
    pub workload: String,
    /// Target, parameters and load model, in the order given.
    pub meta: Vec<(String, String)>,
    pub phases: Vec<Phase>,
    pub expectations: Vec<Expectation>,
}

/// One row of the table (a request name or a group).
#[derive(Debug, Clone)]
pub struct Row {
    pub phase: String,
    pub request: String,
    pub is_group: bool,
    pub count: u64,
    pub ok: u64,
    pub ko: u64,
    pub retries: u64,
    pub mean: f64,
    pub min: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    /// Requests per second over the phase's measured time.
    pub throughput: f64,
    pub errors: Vec<(String, u64)>,
    /// Service time (from the actual send), open model only: p50 and p99.
    pub service: Option<(f64, f64)>,
}

pub fn ms(micros: u64) -> f64 {
    micros as f64 / 1000.0
}

fn quantile(h: &Histogram<u64>, q: f64) -> f64 {
    ms(h.value_at_quantile(q))
}

impl Row {
    pub fn new(phase: &str, request: &str, s: &OpStats, seconds: f64) -> Row {
        let h = &s.latency;
        let empty = h.is_empty();
        let at = |q| if empty { 0.0 } else { quantile(h, q) };
        Row {
            phase: phase.to_string(),
            request: request.to_string(),
            is_group: s.is_group,
            count: s.count(),
            ok: s.ok,
            ko: s.ko,
            retries: s.retries,
            mean: if empty { 0.0 } else { h.mean() / 1000.0 },
            min: if empty { 0.0 } else { ms(h.min()) },
            p25: at(0.25),
            p50: at(0.50),
            p75: at(0.75),
            p90: at(0.90),
            p99: at(0.99),
            p999: at(0.999),
            max: if empty { 0.0 } else { ms(h.max()) },
            throughput: if seconds > 0.0 {
                s.count() as f64 / seconds
            } else {
                0.0
            },
            errors: s.errors.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            service: s
                .service
                .as_ref()
                .filter(|h| !h.is_empty())
                .map(|h| (quantile(h, 0.5), quantile(h, 0.99))),
        }
    }
}

impl Report {
    pub fn new(workload: &str) -> Report {
        Report {
            workload: workload.to_string(),
            ..Report::default()
        }
    }

    pub fn meta(&mut self, key: &str, value: impl ToString) {
        self.meta.push((key.to_string(), value.to_string()));
    }

    pub fn phase(&mut self, name: &str, load: impl ToString, results: Results) {
        self.phases.push(Phase {
            name: name.to_string(),
            load: load.to_string(),
            results,
        });
    }

    pub fn expect(&mut self, what: &str, expected: u64, actual: u64) {
        self.expectations.push(Expectation {
            what: what.to_string(),
            expected,
            actual,
        });
    }

    pub fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for phase in &self.phases {
            let seconds = phase.results.elapsed.as_secs_f64();
            for (name, stats) in &phase.results.requests {
                rows.push(Row::new(&phase.name, name, stats, seconds));
            }
        }
        rows
    }

    /// Successful requests of `request` over all phases.
    pub fn ok(&self, request: &str) -> u64 {
        self.phases.iter().map(|p| p.results.ok(request)).sum()
    }

    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "== {}", self.workload);
        for (k, v) in &self.meta {
            let _ = writeln!(out, "   {k}: {v}");
        }
        let rows = self.rows();
        for phase in &self.phases {
            let (ok, ko) = phase.results.total();
            let seconds = phase.results.elapsed.as_secs_f64();
            let _ = writeln!(
                out,
                "\n-- {} ({}): {:.2} s, {} requests, {:.0} req/s",
                phase.name,
                phase.load,
                seconds,
                ok + ko,
                if seconds > 0.0 {
                    (ok + ko) as f64 / seconds
                } else {
                    0.0
                }
            );
            let _ = writeln!(
                out,
                "{:<28} {:>8} {:>8} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "request (ms)",
                "count",
                "OK",
                "KO",
                "retry",
                "mean",
                "min",
                "p50",
                "p75",
                "p99",
                "max",
                "req/s"
            );
            for r in rows.iter().filter(|r| r.phase == phase.name) {
                let name = if r.is_group {
                    format!("[{}]", r.request)
                } else {
                    r.request.clone()
                };
                let _ = writeln!(
                    out,
                    "{name:<28} {:>8} {:>8} {:>6} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.1}",
                    r.count, r.ok, r.ko, r.retries, r.mean, r.min, r.p50, r.p75, r.p99, r.max,
                    r.throughput
                );
                if !r.errors.is_empty() {
                    let errors: Vec<String> =
                        r.errors.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
                    let _ = writeln!(out, "{:<28}   errors: {}", "", errors.join(", "));
                }
                if let Some((p50, p99)) = r.service {
                    let _ = writeln!(
                        out,
                        "{:<28}   service time (from actual send): p50 {p50:.3}, p99 {p99:.3}",
                        ""
                    );
                }
            }
        }
        for e in &self.expectations {
            let verdict = if e.met() { "ok" } else { "NOT MET" };
            let _ = writeln!(
                out,
                "\nexpect {}: {} (got {}) {verdict}",
                e.what, e.expected, e.actual
            );
        }
        out
    }

    pub fn csv(&self) -> String {
        let mut out = String::from(
            "workload,phase,request,kind,count,ok,ko,retries,mean_ms,min_ms,p25_ms,p50_ms,p75_ms,p90_ms,p99_ms,p999_ms,max_ms,throughput_rps,errors\n",
        );
        for r in self.rows() {
            let errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.1},{}",
                csv_field(&self.workload),
                csv_field(&r.phase),
                csv_field(&r.request),
                if r.is_group { "group" } else { "request" },
                r.count, r.ok, r.ko, r.retries, r.mean, r.min, r.p25, r.p50, r.p75, r.p90, r.p99,
                r.p999, r.max, r.throughput,
                csv_field(&errors.join(";"))
            );
        }
        out
    }

    pub fn json(&self) -> Value {
        let rows: Vec<Value> = self.rows().iter().map(row_json).collect();
        let phases: Vec<Value> = self
            .phases
            .iter()
            .map(|p| {
                let timeline: Vec<Value> = p
                    .results
                    .timeline
                    .iter()
                    .map(|s| {
                        let q = |q| {
                            if s.latency.is_empty() {
                                0.0
                            } else {
                                quantile(&s.latency, q)
                            }
                        };
                        json!({"ok": s.ok, "ko": s.ko, "p50_ms": q(0.5), "p99_ms": q(0.99)})
                    })
                    .collect();
                json!({
                    "name": p.name,
                    "load": p.load,
                    "seconds": p.results.elapsed.as_secs_f64(),
                    "timeline": timeline,
                })
            })
            .collect();
        let expectations: Vec<Value> = self
            .expectations
            .iter()
            .map(|e| json!({"what": e.what, "expected": e.expected, "actual": e.actual, "met": e.met()}))
            .collect();
        let meta: serde_json::Map<String, Value> = self
            .meta
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        json!({
            "workload": self.workload,
            "meta": meta,
            "phases": phases,
            "rows": rows,
            "expectations": expectations,
        })
    }

    /// Writes `<stem>.csv`, `<stem>.json` and `<stem>.html` into `dir`.
    pub fn write_files(&self, dir: &Path, stem: &str) -> anyhow::Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let files = [
            (dir.join(format!("{stem}.csv")), self.csv()),
            (
                dir.join(format!("{stem}.json")),
                serde_json::to_string_pretty(&self.json())?,
            ),
            (dir.join(format!("{stem}.html")), super::html::render(self)),
        ];
        let mut written = Vec::new();
        for (path, text) in files {
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            written.push(path);
        }
        Ok(written)
    }
}

fn row_json(r: &Row) -> Value {
    let errors: serde_json::Map<String, Value> = r
        .errors
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    json!({
        "phase": r.phase, "request": r.request, "group": r.is_group,
        "count": r.count, "ok": r.ok, "ko": r.ko, "retries": r.retries,
        "mean_ms": r.mean, "min_ms": r.min, "p25_ms": r.p25, "p50_ms": r.p50, "p75_ms": r.p75,
        "p90_ms": r.p90, "p99_ms": r.p99, "p999_ms": r.p999, "max_ms": r.max,
        "throughput_rps": r.throughput, "errors": errors,
        "service_p50_ms": r.service.map(|s| s.0), "service_p99_ms": r.service.map(|s| s.1),
    })
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
