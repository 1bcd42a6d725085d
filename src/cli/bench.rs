//! `floe bench`: load-test any Iceberg REST catalog (see `crate::bench`).

mod args;

use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::bench::ceiling::{ceiling, CeilingSettings};
use crate::bench::endpoints::{self, Endpoint, EndpointSettings};
use crate::bench::events::{self, EventsBenchSettings};
use crate::bench::load::{Arrivals, Model};
use crate::bench::polaris::read_update;
use crate::bench::polaris::tree_workloads::{create_tree, read_tree, TreeUsers};
use crate::bench::polaris::writes::{self, CommitRates, Distribution, WeightedSettings};
use crate::bench::report::Report;
use crate::bench::target::Target;
use crate::bench::ycsb::{self, KeyChooser, Preset, YcsbSettings};
use args::{
    parse_distributions, parse_duration, DatasetArgs, LimitArgs, LoadArgs, OutputArgs, TargetArgs,
};

#[derive(Args, Debug)]
pub struct BenchArgs {
    // Boxed: `floe`'s command enum would otherwise be as large as every bench option.
    #[command(flatten)]
    target: Box<TargetArgs>,
    #[command(flatten)]
    output: OutputArgs,
    #[command(subcommand)]
    workload: Box<Workload>,
}

#[derive(Subcommand, Debug)]
enum Workload {
    /// Polaris create-tree-dataset: catalogs, the namespace tree level by level, tables, views.
    CreateTree {
        #[command(flatten)]
        dataset: DatasetArgs,
        /// The same user count in every phase [default: the suite's 1/1+(W-1)D/20/10].
        #[arg(long)]
        users: Option<usize>,
        /// Longest any phase may run.
        #[arg(long, default_value = "1h", value_parser = parse_duration)]
        phase_cap: Duration,
    },
    /// Polaris read-tree-dataset: list, HEAD and GET of every entity.
    ReadTree {
        #[command(flatten)]
        dataset: DatasetArgs,
        /// The same user count in every phase [default: the suite's 1/20/20/10].
        #[arg(long)]
        users: Option<usize>,
        #[arg(long, default_value = "1h", value_parser = parse_duration)]
        phase_cap: Duration,
    },
    /// Polaris read-update-tree-dataset [default: open, 100 ops/s, Poisson, 5 minutes].
    ReadUpdate {
        #[command(flatten)]
        dataset: DatasetArgs,
        #[command(flatten)]
        load: LoadArgs,
        /// Share of reads (0.5, 0.99, ...).
        #[arg(long, default_value_t = 0.5)]
        read_write_ratio: f64,
    },
    /// Polaris create-commits: table and view commits at fixed rates [default: 1 minute].
    CreateCommits {
        #[command(flatten)]
        dataset: DatasetArgs,
        #[arg(long, default_value_t = 10.0)]
        table_commits_per_second: f64,
        #[arg(long, default_value_t = 5.0)]
        view_commits_per_second: f64,
        /// Most commits in flight at once.
        #[arg(long, default_value_t = 1000)]
        max_in_flight: usize,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Polaris weighted workload: readers and writers on normally distributed hot spots
    /// [default: 5 minutes].
    Weighted {
        #[command(flatten)]
        dataset: DatasetArgs,
        /// COUNT:MEAN:VARIANCE, comma-separated.
        #[arg(long, default_value = "8:0.3:0.0278", value_parser = parse_distributions)]
        readers: Vec<Distribution>,
        #[arg(long, default_value = "2:0.7:0.0278", value_parser = parse_distributions)]
        writers: Vec<Distribution>,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// A YCSB-style preset: load phase then run phase, at each scale [default: closed, 50 users, 30 s].
    Ycsb {
        /// Presets run at each scale, comma-separated.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "read-only")]
        preset: Vec<Preset>,
        /// Table counts to grow the catalog to, comma-separated (1000,10000,100000).
        #[arg(long, value_delimiter = ',', default_value = "1000")]
        scale: Vec<u64>,
        #[arg(long, default_value = "default")]
        catalog: String,
        #[arg(long, default_value_t = 1000)]
        tables_per_namespace: u64,
        #[arg(long, value_enum, default_value_t = KeyChooser::Zipfian)]
        keys: KeyChooser,
        #[arg(long, default_value_t = 20)]
        load_users: usize,
        #[arg(long, default_value_t = 100)]
        scan_page_size: u64,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// A single-endpoint test, like vegeta's [default: closed, 50 users, 10 s].
    Endpoint {
        #[arg(value_enum)]
        endpoint: Endpoint,
        #[arg(long, default_value = "default")]
        catalog: String,
        #[arg(long, default_value_t = 100)]
        namespaces: u64,
        #[arg(long, default_value_t = 100)]
        tables_per_namespace: u64,
        #[arg(long, default_value_t = 20)]
        setup_users: usize,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Change events end to end: events/s and delivery latency (commit acknowledged to
    /// consumer received) over the broker the server relays to [default: 10 users, 20 s].
    Events {
        /// The broker to consume from, as the server's `--events-sink`
        /// (nats://host:port or kafka://host:port), or `none` to measure commits only.
        #[arg(long)]
        sink: String,
        #[arg(long, default_value = "default")]
        catalog: String,
        /// Tables the commits spread over (1: one hot table).
        #[arg(long, default_value_t = 1)]
        tables: u64,
        #[arg(long, default_value_t = 10)]
        users: usize,
        #[arg(long, default_value = "20s", value_parser = parse_duration)]
        duration: Duration,
        /// Bytes of the property each commit sets (about 1 KiB events with the default).
        #[arg(long, default_value_t = 512)]
        payload_bytes: usize,
    },
    /// The tool's ceiling against a static endpoint (built in, or --endpoint), next to wrk's.
    Ceiling {
        /// Endpoint to hit instead of the built-in static server (e.g. http://127.0.0.1:8181/healthz).
        #[arg(long = "endpoint")]
        endpoint: Option<url::Url>,
        #[arg(long, default_value_t = 50)]
        connections: usize,
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        duration: Duration,
        #[arg(long, default_value = "2s", value_parser = parse_duration)]
        warmup: Duration,
        /// Worker threads of the built-in static server.
        #[arg(long, default_value_t = 1)]
        server_threads: usize,
        /// Skip the wrk comparison.
        #[arg(long)]
        no_wrk: bool,
    },
    /// Serves one file's bytes as JSON at every GET path until stopped: the static
    /// endpoint that `bench/read-path.py` compares loadTable with (same runtime, same
    /// HTTP stack, no catalog work).
    StaticServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: std::net::SocketAddr,
        #[arg(long)]
        body_file: std::path::PathBuf,
    },
}

const MINUTE: Duration = Duration::from_secs(60);

pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    crate::bench::live::set_quiet(args.output.quiet);
    let report = match *args.workload {
        Workload::Ceiling {
            endpoint,
            connections,
            duration,
            warmup,
            server_threads,
            no_wrk,
        } => {
            let settings = CeilingSettings {
                url: endpoint,
                connections,
                duration,
                warmup,
                server_threads,
                with_wrk: !no_wrk,
            };
            ceiling(&settings).await?
        }
        Workload::StaticServer { bind, body_file } => {
            let body = std::fs::read(&body_file)
                .with_context(|| format!("reading {}", body_file.display()))?;
            return crate::bench::ceiling::serve_static(bind, body).await;
        }
        workload => {
            let target = Target::connect(args.target.config()?).await?;
            let mut report = run_workload(&target, workload).await?;
            report
                .meta
                .insert(0, ("target".into(), args.target.url.to_string()));
            if let Some(tokens) = &target.tokens {
                report.meta("tokens fetched", tokens.tokens_fetched());
            }
            report
        }
    };
    println!("{}", report.table());
    if let Some(dir) = &args.output.out {
        let stem = args
            .output
            .name
            .clone()
            .unwrap_or_else(|| report.workload.replace(' ', "-"));
        for path in report.write_files(dir, &stem)? {
            eprintln!("wrote {}", path.display());
        }
    }
    let unmet: Vec<String> = report
        .expectations
        .iter()
        .filter(|e| !e.met())
        .map(|e| e.what.clone())
        .collect();
    anyhow::ensure!(
        unmet.is_empty(),
        "expectations not met: {}",
        unmet.join(", ")
    );
    Ok(())
}

async fn run_workload(target: &Target, workload: Workload) -> anyhow::Result<Report> {
    let closed_50 = Model::Closed { users: 50 };
    match workload {
        Workload::CreateTree {
            dataset,
            users,
            phase_cap,
        } => {
            let ds = dataset.dataset()?;
            let run = dataset.tree_run(users, TreeUsers::polaris_create(&ds), phase_cap);
            create_tree(target, ds, &run).await
        }
        Workload::ReadTree {
            dataset,
            users,
            phase_cap,
        } => {
            let run = dataset.tree_run(users, TreeUsers::polaris_read(), phase_cap);
            read_tree(target, dataset.dataset()?, &run).await
        }
        Workload::ReadUpdate {
            dataset,
            load,
            read_write_ratio,
        } => {
            let default = Model::Open {
                rate: 100.0,
                arrivals: Arrivals::Poisson,
                max_in_flight: load.max_in_flight,
            };
            let model = load.model(default);
            read_update::read_update(
                target,
                dataset.dataset()?,
                read_write_ratio,
                model,
                load.limits(5 * MINUTE),
            )
            .await
        }
        Workload::CreateCommits {
            dataset,
            table_commits_per_second,
            view_commits_per_second,
            max_in_flight,
            limits,
        } => {
            let rates = CommitRates {
                tables: table_commits_per_second,
                views: view_commits_per_second,
            };
            writes::create_commits(
                target,
                dataset.dataset()?,
                rates,
                max_in_flight,
                limits.limits(MINUTE),
            )
            .await
        }
        Workload::Weighted {
            dataset,
            readers,
            writers,
            seed,
            limits,
        } => {
            let settings = WeightedSettings {
                seed,
                readers,
                writers,
            };
            writes::weighted(
                target,
                dataset.dataset()?,
                &settings,
                limits.limits(5 * MINUTE),
            )
            .await
        }
        Workload::Ycsb {
            preset,
            scale,
            catalog,
            tables_per_namespace,
            keys,
            load_users,
            scan_page_size,
            load,
        } => {
            let settings = YcsbSettings {
                catalog,
                presets: preset,
                scales: scale,
                tables_per_namespace,
                keys,
                load_users,
                scan_page_size,
            };
            ycsb::ycsb(
                target,
                &settings,
                load.model(closed_50),
                load.limits(Duration::from_secs(30)),
            )
            .await
        }
        Workload::Endpoint {
            endpoint,
            catalog,
            namespaces,
            tables_per_namespace,
            setup_users,
            load,
        } => {
            let settings = EndpointSettings {
                catalog,
                namespaces,
                tables_per_namespace,
                setup_users,
            };
            let took = endpoints::setup(target, &settings).await?;
            let mut report = endpoints::endpoint(
                target,
                &settings,
                endpoint,
                load.model(closed_50),
                load.limits(Duration::from_secs(10)),
            )
            .await?;
            report.meta("setup", format!("{:.1} s", took.as_secs_f64()));
            Ok(report)
        }
        Workload::Events {
            sink,
            catalog,
            tables,
            users,
            duration,
            payload_bytes,
        } => {
            let settings = EventsBenchSettings {
                sink,
                catalog,
                tables: tables.max(1),
                users: users.max(1),
                duration,
                payload_bytes,
            };
            events::events(target, &settings).await
        }
        Workload::Ceiling { .. } | Workload::StaticServer { .. } => {
            unreachable!("handled before connecting")
        }
    }
}
