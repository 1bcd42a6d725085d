//! Prometheus metrics: one registry for the process, served at `GET /metrics` in the
//! text exposition format (`prometheus-client`).
//!
//! Requests are labelled by *route template* (`/v1/{prefix}/namespaces/{namespace}`),
//! never the raw path, so the number of series is bounded by the route table, not by
//! the catalog's contents. Route strings are interned once (`&'static str`), and each
//! label set's handles kept (`record_request`), so counting a request costs two hash
//! lookups and the metrics' own updates, not an allocation.
//!
//! What is measured where: HTTP in `http::front`; commits, cache lookups and store
//! writes in the catalog; the relay's lag in `events::relay`; the database pool and build
//! information when scraped (`render`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, RwLock};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: &'static str,
    pub route: &'static str,
    pub status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: &'static str,
    pub route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub cache: &'static str,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlaceLabels {
    pub place: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub store: &'static str,
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub request_duration: Family<RouteLabels, Histogram>,
    /// Commit attempts by outcome: `committed`, `conflict` (lost a race; retried),
    /// `rejected` (requirements or validation), `failed` (store error).
    pub commits: Family<OutcomeLabels, Counter>,
    pub store_write_duration: Histogram,
    pub cache: Family<CacheLabels, Counter>,
    pub events_relayed: Counter,
    /// Events written but not yet confirmed by the relay's broker (on the node holding
    /// the lease; 0 elsewhere).
    pub relay_lag: Gauge,
    pub db_connections: Family<StateLabels, Gauge>,
    pub db_waiting: Gauge,
    /// The embedded store's WAL checkpoints by where they ran (`store::sqlite::checkpoint`).
    pub wal_checkpoints: Family<PlaceLabels, Counter>,
    pub build: Family<BuildLabels, Gauge>,
}

/// Seconds, from 0.1 ms to ~13 s.
fn latency_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.0001, 2.0, 18)
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("floe");
    let requests = Family::<RequestLabels, Counter>::default();
    registry.register(
        "http_requests",
        "HTTP requests by method, route template and status class",
        requests.clone(),
    );
    let request_duration =
        Family::<RouteLabels, Histogram>::new_with_constructor(
            || Histogram::new(latency_buckets()),
        );
    registry.register_with_unit(
        "http_request_duration",
        "Time from receiving a request to its response, by route template",
        Unit::Seconds,
        request_duration.clone(),
    );
    let commits = Family::<OutcomeLabels, Counter>::default();
    registry.register(
        "commit_attempts",
        "Commit attempts of tables and views by outcome (committed, conflict: lost a race and retried, rejected, failed)",
        commits.clone(),
    );
    let store_write_duration = Histogram::new(latency_buckets());
    registry.register_with_unit(
        "store_write_duration",
        "Time of one store transaction (a change with its idempotency record and events)",
        Unit::Seconds,
        store_write_duration.clone(),
    );
    let cache = Family::<CacheLabels, Counter>::default();
    registry.register(
        "cache_lookups",
        "Cache lookups by cache (catalog records, vended credentials) and result",
        cache.clone(),
    );
    let events_relayed = Counter::default();
    registry.register(
        "events_relayed",
        "Change events confirmed by the relay's broker on this node",
        events_relayed.clone(),
    );
    let relay_lag = Gauge::default();
    registry.register(
        "event_relay_lag_events",
        "Change events written but not yet confirmed by the broker (node holding the relay lease)",
        relay_lag.clone(),
    );
    let db_connections = Family::<StateLabels, Gauge>::default();
    registry.register(
        "db_pool_connections",
        "PostgreSQL connections of this node's pool by state (in_use, idle)",
        db_connections.clone(),
    );
    let db_waiting = Gauge::default();
    registry.register(
        "db_pool_waiting_requests",
        "Requests waiting for a PostgreSQL connection",
        db_waiting.clone(),
    );
    let wal_checkpoints = Family::<PlaceLabels, Counter>::default();
    registry.register(
        "wal_checkpoints",
        "Embedded store WAL checkpoints by place (background: the checkpoint thread; tail: the writer after a background pass; inline: the writer past the hard limit; failed)",
        wal_checkpoints.clone(),
    );
    let build = Family::<BuildLabels, Gauge>::default();
    registry.register("build_info", "Floe's version and store", build.clone());
    // Every known label value starts at 0, so a series exists before its first event
    // (rates and alerts over "no commit has failed yet" work from the start).
    for outcome in ["committed", "conflict", "rejected", "failed"] {
        let _ = commits.get_or_create(&OutcomeLabels { outcome });
    }
    for cache_name in ["catalog", "credentials"] {
        for result in ["hit", "miss"] {
            let _ = cache.get_or_create(&CacheLabels {
                cache: cache_name,
                result,
            });
        }
    }
    for place in ["background", "tail", "inline", "failed"] {
        let _ = wal_checkpoints.get_or_create(&PlaceLabels { place });
    }
    Metrics {
        registry,
        requests,
        request_duration,
        commits,
        store_write_duration,
        cache,
        events_relayed,
        relay_lag,
        db_connections,
        db_waiting,
        wal_checkpoints,
        build,
    }
});

static ENABLED: AtomicBool = AtomicBool::new(true);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Turns recording off (`--metrics false`): for measuring what metrics cost.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

static ROUTES: LazyLock<RwLock<foldhash::HashMap<String, &'static str>>> =
    LazyLock::new(Default::default);

/// The route template as a `&'static str`: leaked once per distinct template (bounded by
/// the router's routes).
pub fn intern(route: &str) -> &'static str {
    if let Some(s) = ROUTES.read().expect("poisoned").get(route) {
        return s;
    }
    let mut routes = ROUTES.write().expect("poisoned");
    routes
        .entry(route.to_string())
        .or_insert_with(|| Box::leak(route.to_string().into_boxed_str()))
}

/// `2xx`, `4xx`…
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// A request's labels: method, route template, status class.
type RequestKey = (&'static str, &'static str, &'static str);

/// Each label set's counter and histogram, found in the families once. The families
/// hash their label sets with SipHash behind a lock on every lookup, two per request:
/// most of what counting a request cost. The handles share the families' metrics, which
/// live as long as the process; the map is bounded by routes × methods × status classes.
static REQUEST_HANDLES: LazyLock<RwLock<foldhash::HashMap<RequestKey, (Counter, Histogram)>>> =
    LazyLock::new(Default::default);

/// Records one HTTP request.
pub fn record_request(method: &'static str, route: &'static str, status: u16, took: Duration) {
    if !enabled() {
        return;
    }
    let key = (method, route, status_class(status));
    let seconds = took.as_secs_f64();
    if let Some((count, duration)) = REQUEST_HANDLES.read().expect("poisoned").get(&key) {
        count.inc();
        duration.observe(seconds);
        return;
    }
    let m = metrics();
    let count = m
        .requests
        .get_or_create(&RequestLabels {
            method,
            route,
            status: key.2,
        })
        .clone();
    let duration = m
        .request_duration
        .get_or_create(&RouteLabels { method, route })
        .clone();
    count.inc();
    duration.observe(seconds);
    REQUEST_HANDLES
        .write()
        .expect("poisoned")
        .insert(key, (count, duration));
}

/// Counts one event in `family` under `labels` (when recording is on).
fn count<L>(family: impl FnOnce(&'static Metrics) -> &'static Family<L, Counter>, labels: &L)
where
    L: Clone + std::hash::Hash + Eq + 'static,
{
    if enabled() {
        family(metrics()).get_or_create(labels).inc();
    }
}

pub fn record_commit(outcome: &'static str) {
    count(|m| &m.commits, &OutcomeLabels { outcome });
}

pub fn record_cache(cache: &'static str, hit: bool) {
    let result = if hit { "hit" } else { "miss" };
    count(|m| &m.cache, &CacheLabels { cache, result });
}

pub fn record_wal_checkpoint(place: &'static str) {
    count(|m| &m.wal_checkpoints, &PlaceLabels { place });
}

/// A pool's state when scraped.
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolState {
    pub in_use: u64,
    pub idle: u64,
    pub waiting: u64,
}

/// The text exposition of every metric, with the pool's and build's state as of now.
pub fn render(store: &'static str, pool: Option<PoolState>) -> String {
    let m = metrics();
    m.build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
            store,
        })
        .set(1);
    if let Some(pool) = pool {
        for (state, n) in [("in_use", pool.in_use), ("idle", pool.idle)] {
            m.db_connections
                .get_or_create(&StateLabels { state })
                .set(n as i64);
        }
        m.db_waiting.set(pool.waiting as i64);
    }
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry)
        .expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_interned_once() {
        let a = intern("/v1/{prefix}/namespaces");
        let b = intern(&String::from("/v1/{prefix}/namespaces"));
        assert!(std::ptr::eq(a, b));
    }

    #[test]
    fn rendering_names_metrics_by_convention() {
        record_request("GET", intern("/v1/config"), 200, Duration::from_millis(2));
        record_commit("committed");
        let text = render("embedded", None);
        assert!(text.contains(
            "floe_http_requests_total{method=\"GET\",route=\"/v1/config\",status=\"2xx\"}"
        ));
        assert!(text.contains("floe_http_request_duration_seconds_bucket{"));
        assert!(text.contains("floe_commit_attempts_total{outcome=\"committed\"}"));
        assert!(text.contains("floe_build_info{version="));
        assert!(text.ends_with("# EOF\n"));
    }
}
