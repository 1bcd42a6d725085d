//! The options `floe bench` subcommands share: target, output, load model and limits,
//! the Polaris dataset, and the parsers of durations and distributions.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::bench::auth::{Auth, ClientCredentials};
use crate::bench::load::{Arrivals, Limits, Model};
use crate::bench::polaris::tree_workloads::{TreeRun, TreeUsers};
use crate::bench::polaris::writes::Distribution;
use crate::bench::polaris::{Dataset, Tree};
use crate::bench::target::TargetConfig;

#[derive(Args, Debug)]
pub(super) struct TargetArgs {
    /// The server's root URL (plain HTTP).
    #[arg(
        long,
        global = true,
        env = "FLOE_BENCH_URL",
        default_value = "http://127.0.0.1:8181"
    )]
    pub(super) url: url::Url,
    /// Another node serving the same catalogs (repeat for more): connections are spread
    /// round-robin over --url and every --node.
    #[arg(long = "node", global = true)]
    pub(super) nodes: Vec<url::Url>,
    /// Where the REST API's `/v1` lives under the root (`/api/catalog` for Polaris).
    #[arg(long, global = true, default_value = "")]
    pub(super) rest_root: String,
    /// Per-request timeout.
    #[arg(long, global = true, default_value = "60s", value_parser = parse_duration)]
    pub(super) timeout: Duration,
    /// A fixed bearer token.
    #[arg(
        long,
        global = true,
        env = "FLOE_BENCH_TOKEN",
        conflicts_with = "client_id"
    )]
    pub(super) token: Option<String>,
    /// OAuth2 client id (client credentials grant).
    #[arg(
        long,
        global = true,
        env = "FLOE_BENCH_CLIENT_ID",
        requires = "client_secret"
    )]
    pub(super) client_id: Option<String>,
    #[arg(long, global = true, env = "FLOE_BENCH_CLIENT_SECRET")]
    pub(super) client_secret: Option<String>,
    /// Token endpoint [default: <url><rest-root>/v1/oauth/tokens].
    #[arg(long, global = true)]
    pub(super) token_url: Option<url::Url>,
    #[arg(long, global = true, default_value = "PRINCIPAL_ROLE:ALL")]
    pub(super) scope: String,
    /// Refresh the token at least this often (and before it expires).
    #[arg(long, global = true, default_value = "60s", value_parser = parse_duration)]
    pub(super) token_refresh: Duration,
}

#[derive(Args, Debug)]
pub(super) struct OutputArgs {
    /// Also write <name>.csv, <name>.json and <name>.html into this directory.
    #[arg(long, global = true)]
    pub(super) out: Option<PathBuf>,
    /// File name stem of the written reports [default: the workload's name].
    #[arg(long, global = true)]
    pub(super) name: Option<String>,
    /// No live line while running.
    #[arg(long, global = true)]
    pub(super) quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub(super) struct LimitArgs {
    /// Measured time (e.g. 30s, 5m) [default: the workload's].
    #[arg(long, value_parser = parse_duration)]
    pub(super) duration: Option<Duration>,
    /// Stop after this many measured operations.
    #[arg(long)]
    pub(super) requests: Option<u64>,
    /// Run, unmeasured, for this long first.
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub(super) warmup: Duration,
}

impl LimitArgs {
    pub(super) fn limits(&self, default_duration: Duration) -> Limits {
        Limits {
            duration: match (self.duration, self.requests) {
                (Some(d), _) => Some(d),
                (None, Some(_)) => None,
                (None, None) => Some(default_duration),
            },
            ops: self.requests,
            warmup: self.warmup,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(super) struct LoadArgs {
    /// Closed model: this many users back to back (1 = sequential, 50 = concurrent).
    #[arg(long, conflicts_with = "rate")]
    pub(super) users: Option<usize>,
    /// Open model: this many operations per second, latency from intended start.
    #[arg(long)]
    pub(super) rate: Option<f64>,
    /// Open model: exponential gaps between arrivals instead of even spacing.
    #[arg(long, requires = "rate")]
    pub(super) poisson: bool,
    /// Open model: most operations in flight at once.
    #[arg(long, default_value_t = 1000)]
    pub(super) max_in_flight: usize,
    #[command(flatten)]
    pub(super) limits: LimitArgs,
}

impl LoadArgs {
    pub(super) fn model(&self, default: Model) -> Model {
        match (self.users, self.rate) {
            (Some(users), _) => Model::Closed { users },
            (None, Some(rate)) => Model::Open {
                rate,
                arrivals: if self.poisson {
                    Arrivals::Poisson
                } else {
                    Arrivals::Uniform
                },
                max_in_flight: self.max_in_flight,
            },
            (None, None) => default,
        }
    }

    pub(super) fn limits(&self, default_duration: Duration) -> Limits {
        self.limits.limits(default_duration)
    }
}

#[derive(Args, Debug, Clone)]
pub(super) struct DatasetArgs {
    /// Catalog holding the tree: `C_0` as the suite names it, or an existing catalog.
    #[arg(long, default_value = "C_0")]
    pub(super) catalog: String,
    /// The catalog exists already: no management API calls (Iceberg's reference server).
    #[arg(long)]
    pub(super) existing_catalog: bool,
    #[arg(long, default_value_t = 1)]
    pub(super) num_catalogs: u64,
    #[arg(long, default_value_t = 2)]
    pub(super) namespace_width: u64,
    #[arg(long, default_value_t = 4)]
    pub(super) namespace_depth: u64,
    #[arg(long, default_value_t = 5)]
    pub(super) tables_per_namespace: u64,
    #[arg(long, default_value_t = 3)]
    pub(super) views_per_namespace: u64,
    #[arg(long)]
    pub(super) max_tables: Option<u64>,
    #[arg(long)]
    pub(super) max_views: Option<u64>,
    #[arg(long, default_value_t = 10)]
    pub(super) columns_per_table: u64,
    #[arg(long, default_value_t = 10)]
    pub(super) columns_per_view: u64,
    #[arg(long, default_value_t = 10)]
    pub(super) namespace_properties: u64,
    #[arg(long, default_value_t = 10)]
    pub(super) table_properties: u64,
    #[arg(long, default_value_t = 10)]
    pub(super) view_properties: u64,
    /// Base location of created catalogs (`<base>/C_i`).
    #[arg(long, default_value = "file:///tmp/polaris")]
    pub(super) base_location: String,
    /// `storageConfigInfo` of created catalogs (JSON).
    #[arg(long, default_value = r#"{"storageType": "FILE"}"#)]
    pub(super) storage_config_info: String,
}

impl DatasetArgs {
    pub(super) fn dataset(&self) -> anyhow::Result<Arc<Dataset>> {
        let dataset = Dataset {
            catalogs: self.num_catalogs,
            catalog: self.catalog.clone(),
            base_location: self.base_location.clone(),
            storage_config: serde_json::from_str(&self.storage_config_info)?,
            tree: Tree {
                width: self.namespace_width,
                depth: self.namespace_depth,
            },
            tables_per_namespace: self.tables_per_namespace,
            max_tables: self.max_tables,
            views_per_namespace: self.views_per_namespace,
            max_views: self.max_views,
            columns_per_table: self.columns_per_table,
            columns_per_view: self.columns_per_view,
            namespace_properties: self.namespace_properties,
            table_properties: self.table_properties,
            view_properties: self.view_properties,
        };
        dataset.validate()?;
        Ok(Arc::new(dataset))
    }

    pub(super) fn tree_run(
        &self,
        users: Option<usize>,
        defaults: TreeUsers,
        cap: Duration,
    ) -> TreeRun {
        TreeRun {
            manage_catalogs: !self.existing_catalog,
            users: users.map_or(defaults, TreeUsers::all),
            phase_cap: cap,
        }
    }
}

/// Parses `500ms`, `30s`, `5m`, `1h`, or plain seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {text}"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit in {text} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text}: {e}"))
}

pub(super) fn parse_distributions(text: &str) -> Result<Distribution, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [count, mean, variance] = parts.as_slice() else {
        return Err(format!("expected COUNT:MEAN:VARIANCE, got {text}"));
    };
    let bad = |what: &str| format!("bad {what} in {text}");
    Ok(Distribution {
        count: count.parse().map_err(|_| bad("count"))?,
        mean: mean.parse().map_err(|_| bad("mean"))?,
        variance: variance.parse().map_err(|_| bad("variance"))?,
    })
}

impl TargetArgs {
    pub(super) fn config(&self) -> anyhow::Result<TargetConfig> {
        let auth = match (&self.token, &self.client_id) {
            (Some(token), _) => Auth::Bearer(token.clone()),
            (None, Some(id)) => {
                let default_url = format!(
                    "{}{}/v1/oauth/tokens",
                    self.url.as_str().trim_end_matches('/'),
                    self.rest_root
                );
                Auth::ClientCredentials(ClientCredentials {
                    token_url: match &self.token_url {
                        Some(u) => u.clone(),
                        None => url::Url::parse(&default_url)?,
                    },
                    client_id: id.clone(),
                    client_secret: self.client_secret.clone().unwrap_or_default(),
                    scope: self.scope.clone(),
                    refresh_every: self.token_refresh,
                })
            }
            (None, None) => Auth::None,
        };
        Ok(TargetConfig {
            url: self.url.clone(),
            rest_root: self.rest_root.trim_end_matches('/').to_string(),
            auth,
            timeout: self.timeout,
            nodes: self.nodes.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert!(parse_duration("3 weeks").is_err());
    }

    #[test]
    fn distributions() {
        let d = parse_distributions("8:0.3:0.0278").unwrap();
        assert_eq!((d.count, d.mean, d.variance), (8, 0.3, 0.0278));
        assert!(parse_distributions("8:0.3").is_err());
    }
}
