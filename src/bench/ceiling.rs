//! The tool's own ceiling: how many requests/s it drives against a trivial static
//! endpoint on this machine, next to what wrk drives there. A catalog figure near the
//! ceiling measures the tool, not the catalog.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tokio::sync::oneshot;

use super::client::{uri, Req};
use super::load::{run_closed, FromFn, Limits, User};
use super::op::Call;
use super::report::Report;
use super::target::{Target, TargetConfig};

/// Names the built-in server's threads, so that the tool's own CPU time excludes them.
const SERVER_THREAD: &str = "floe-static";
/// Linux's clock ticks per second in `/proc/*/stat` (`getconf CLK_TCK`).
const TICKS_PER_SECOND: f64 = 100.0;

/// The name and CPU seconds (user + system) in a `/proc/.../stat` line.
fn cpu_of_stat(stat: &str) -> Option<(&str, f64)> {
    let (_, after_pid) = stat.split_once(" (")?;
    let (name, rest) = after_pid.rsplit_once(") ")?;
    // The fields after the name start at field 3; utime and stime are 14 and 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: f64 = fields.get(15 - 3)?.parse().ok()?;
    Some((name, (utime + stime) / TICKS_PER_SECOND))
}

/// CPU seconds this process used so far, less the built-in server's threads. Threads
/// that already ended count too (they are in the process's total).
fn own_cpu_seconds() -> f64 {
    let total = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| cpu_of_stat(&s).map(|(_, cpu)| cpu))
        .unwrap_or(0.0);
    let server: f64 = std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("stat")).ok())
        .filter_map(|stat| {
            cpu_of_stat(&stat)
                .filter(|(name, _)| name.starts_with(SERVER_THREAD))
                .map(|(_, cpu)| cpu)
        })
        .sum();
    total - server
}

/// A static HTTP endpoint (`GET /` → `ok`) on its own runtime and threads, as a separate
/// server process would be; stops when dropped.
pub struct StaticServer {
    pub address: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl StaticServer {
    pub fn start(worker_threads: usize) -> anyhow::Result<StaticServer> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name(SERVER_THREAD)
            .enable_all()
            .build()?;
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                let app = Router::new().route("/", get(|| async { "ok" }));
                // Not graceful: idle keep-alive connections must not hold the stop.
                tokio::select! {
                    _ = axum::serve(listener, app) => {}
                    _ = stopped => {}
                }
            });
        });
        Ok(StaticServer {
            address,
            stop: Some(stop),
        })
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serves `body` as `application/json` at every GET path on `bind` until Ctrl-C: the
/// static server a catalog's read path is measured against. It runs on the caller's
/// runtime, as `floe serve` does, so both have the same threads and HTTP stack.
pub async fn serve_static(bind: SocketAddr, body: Vec<u8>) -> anyhow::Result<()> {
    let body = axum::body::Bytes::from(body);
    let handler = move || {
        let body = body.clone();
        async move {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                body,
            )
        }
    };
    let app = Router::new().fallback(get(handler));
    let listener = tokio::net::TcpListener::bind(bind).await?;
    println!("serving on http://{}", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// What wrk achieved: requests/s, and CPU seconds per request.
pub struct WrkRun {
    pub requests_per_second: f64,
    pub cpu_per_request: Option<f64>,
}

/// Runs wrk against `url`. A shell runs it and then prints its own `/proc` stat line,
/// whose children's CPU times are then wrk's.
pub async fn run_wrk(url: &str, connections: usize, duration: Duration) -> Result<WrkRun, String> {
    let threads = connections.clamp(1, 2);
    let script = format!(
        "wrk -t{threads} -c{connections} -d{}s '{url}' && cat /proc/$$/stat",
        duration.as_secs().max(1)
    );
    let output = tokio::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .await
        .map_err(|e| format!("could not run wrk ({e})"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "wrk failed (install it with `apt-get install -y wrk`): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let value = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let requests_per_second =
        value("Requests/sec:").ok_or_else(|| format!("no Requests/sec in: {text}"))?;
    let total: Option<f64> = text
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok());
    let children_cpu = text.lines().last().and_then(|stat| {
        let (_, rest) = stat.rsplit_once(") ")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // cutime and cstime are fields 16 and 17; the list starts at field 3.
        let cutime: f64 = fields.get(16 - 3)?.parse().ok()?;
        let cstime: f64 = fields.get(17 - 3)?.parse().ok()?;
        Some((cutime + cstime) / TICKS_PER_SECOND)
    });
    let cpu_per_request = match (children_cpu, total) {
        (Some(cpu), Some(n)) if n > 0.0 => Some(cpu / n),
        _ => None,
    };
    Ok(WrkRun {
        requests_per_second,
        cpu_per_request,
    })
}

#[derive(Debug, Clone)]
pub struct CeilingSettings {
    /// Endpoint to hit; `None` starts the built-in static server.
    pub url: Option<url::Url>,
    pub connections: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub server_threads: usize,
    pub with_wrk: bool,
}

pub async fn ceiling(settings: &CeilingSettings) -> anyhow::Result<Report> {
    let server = match &settings.url {
        Some(_) => None,
        None => Some(StaticServer::start(settings.server_threads)?),
    };
    let url = match (&settings.url, &server) {
        (Some(url), _) => url.clone(),
        (None, Some(s)) => url::Url::parse(&format!("http://{}/", s.address))?,
        (None, None) => unreachable!("a server is started when no URL is given"),
    };
    let target = Target::connect(TargetConfig::new(url.clone())).await?;
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let call = Call::new("static GET", Req::get(uri(path)?), 200);
    let workload = Arc::new(FromFn(move |_: &mut User| Some(call.clone().into())));
    let limits = Limits {
        duration: Some(settings.duration),
        ops: None,
        warmup: settings.warmup,
    };
    let cpu_before = own_cpu_seconds();
    let results = run_closed(
        target.client.clone(),
        workload,
        settings.connections,
        limits,
        "ceiling",
    )
    .await;
    let cpu = own_cpu_seconds() - cpu_before;
    let (ok, ko) = results.total();
    let measured = results.elapsed.as_secs_f64().max(1e-9);
    let ours = (ok + ko) as f64 / measured;
    // The warm-up's requests used CPU too: count them in.
    let all_requests = (ours * (measured + settings.warmup.as_secs_f64())).max(1.0);
    let mut report = Report::new("ceiling");
    report.meta("endpoint", &url);
    report.meta("connections", settings.connections);
    report.meta("floe bench requests/s", format!("{ours:.0}"));
    report.meta(
        "floe bench CPU per request (µs)",
        format!("{:.1}", cpu / all_requests * 1e6),
    );
    if settings.with_wrk {
        match run_wrk(url.as_str(), settings.connections, settings.duration).await {
            Ok(wrk) => {
                report.meta("wrk requests/s", format!("{:.0}", wrk.requests_per_second));
                if let Some(per) = wrk.cpu_per_request {
                    report.meta("wrk CPU per request (µs)", format!("{:.1}", per * 1e6));
                }
                report.meta(
                    "floe bench / wrk (requests/s)",
                    format!("{:.2}", ours / wrk.requests_per_second),
                );
            }
            Err(why) => report.meta("wrk", why),
        }
    }
    report.phase(
        "static GET",
        super::load::closed(settings.connections),
        results,
    );
    Ok(report)
}
