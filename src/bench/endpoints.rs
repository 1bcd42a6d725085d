//! Single-endpoint tests, like vegeta's: one request shape hammered under a load model,
//! on a flat dataset (by default 100 namespaces of 100 tables, as the student catalog's
//! published run).

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use rand::Rng;

use super::client::{uri, Req};
use super::fixtures::{ensure_complete, populate, FlatLayout};
use super::load::{run, FromFn, Limits, Model, User, Workload};
use super::op::Call;
use super::report::Report;
use super::target::Target;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Endpoint {
    /// GET one table, always the same.
    GetTable,
    /// GET the table list of one namespace.
    ListTable,
    /// GET one namespace.
    GetNamespace,
    /// GET the list of top-level namespaces.
    ListNamespace,
    /// GET a table picked uniformly at random.
    GetRandomizedTable,
}

impl Endpoint {
    pub const ALL: [Endpoint; 5] = [
        Endpoint::GetTable,
        Endpoint::ListTable,
        Endpoint::GetNamespace,
        Endpoint::ListNamespace,
        Endpoint::GetRandomizedTable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Endpoint::GetTable => "get_table",
            Endpoint::ListTable => "list_table",
            Endpoint::GetNamespace => "get_namespace",
            Endpoint::ListNamespace => "list_namespace",
            Endpoint::GetRandomizedTable => "get_randomized_table",
        }
    }
}

#[derive(Debug, Clone)]
pub struct EndpointSettings {
    pub catalog: String,
    pub namespaces: u64,
    pub tables_per_namespace: u64,
    pub setup_users: usize,
}

impl Default for EndpointSettings {
    fn default() -> EndpointSettings {
        EndpointSettings {
            catalog: "default".into(),
            namespaces: 100,
            tables_per_namespace: 100,
            setup_users: 20,
        }
    }
}

const SETUP_CAP: Duration = Duration::from_secs(3600);

fn layout(settings: &EndpointSettings) -> FlatLayout {
    FlatLayout {
        prefix: "bench_ns".into(),
        tables_per_namespace: settings.tables_per_namespace,
    }
}

/// Creates the dataset (idempotent); returns how long it took.
pub async fn setup(target: &Target, settings: &EndpointSettings) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let paths = target.catalog(&settings.catalog).await?;
    let tables = settings.namespaces * settings.tables_per_namespace;
    let layout = layout(settings);
    let results = populate(
        target,
        &paths,
        &layout,
        0..tables,
        settings.setup_users,
        SETUP_CAP,
    )
    .await;
    ensure_complete(&results, "creating the single-endpoint dataset")?;
    Ok(started.elapsed())
}

/// Runs one endpoint test on a dataset made by [`setup`].
pub async fn endpoint(
    target: &Target,
    settings: &EndpointSettings,
    which: Endpoint,
    model: Model,
    limits: Limits,
) -> anyhow::Result<Report> {
    anyhow::ensure!(
        settings.namespaces > 0 && settings.tables_per_namespace > 0,
        "the single-endpoint dataset needs at least one table"
    );
    let paths = target.catalog(&settings.catalog).await?;
    let layout = layout(settings);
    let (ns, table) = layout.table(0);
    let name = which.name();
    let fixed = move |path: String| Call::new(name, Req::get(uri(path).expect("path")), 200);
    let workload: Arc<dyn Workload> = match which {
        Endpoint::GetTable => repeat(fixed(paths.table(&ns, &table))),
        Endpoint::ListTable => repeat(fixed(paths.tables(&ns))),
        Endpoint::GetNamespace => repeat(fixed(paths.namespace(&ns))),
        Endpoint::ListNamespace => repeat(fixed(paths.namespaces())),
        Endpoint::GetRandomizedTable => {
            let tables = settings.namespaces * settings.tables_per_namespace;
            Arc::new(FromFn(move |user: &mut User| {
                let (ns, table) = layout.table(user.rng.random_range(0..tables));
                Some(fixed(paths.table(&ns, &table)).into())
            }))
        }
    };
    let mut report = Report::new(name);
    report.meta("catalog", &settings.catalog);
    report.meta(
        "dataset",
        format!(
            "{} namespaces × {} tables",
            settings.namespaces, settings.tables_per_namespace
        ),
    );
    let results = run(target.client.clone(), workload, model, limits, name).await;
    report.phase(name, model.describe(), results);
    Ok(report)
}

fn repeat(call: Call) -> Arc<dyn Workload> {
    Arc::new(FromFn(move |_: &mut User| Some(call.clone().into())))
}
