//! The tree workloads.
//!
//! create-tree-dataset: catalogs (1 user), then the namespace tree level by level (a
//! level starts when its parents all exist), then tables, then views; then the suite's
//! assertions that every entity was created exactly once. read-tree-dataset: every
//! entity read once (list → HEAD → GET), kind by kind.

use std::sync::Arc;
use std::time::Duration;

use super::actions::Actions;
use super::Dataset;
use crate::bench::load::{closed, indexed, run_closed, Limits};
use crate::bench::op::Op;
use crate::bench::report::Report;
use crate::bench::stats::Results;
use crate::bench::target::Target;

/// Users per phase of the tree workloads.
#[derive(Debug, Clone, Copy)]
pub struct TreeUsers {
    pub catalogs: usize,
    pub namespaces: usize,
    pub tables: usize,
    pub views: usize,
}

impl TreeUsers {
    /// The suite's create-tree-dataset: 1 catalog user; namespace users ramp to
    /// 1 + (W−1)·D; 20 table users; 10 view users.
    pub fn polaris_create(dataset: &Dataset) -> TreeUsers {
        TreeUsers {
            catalogs: 1,
            namespaces: (1 + (dataset.tree.width - 1) * dataset.tree.depth) as usize,
            tables: 20,
            views: 10,
        }
    }

    /// The suite's read-tree-dataset: 20 namespace, 20 table and 10 view users.
    pub fn polaris_read() -> TreeUsers {
        TreeUsers {
            catalogs: 1,
            namespaces: 20,
            tables: 20,
            views: 10,
        }
    }

    /// The same count everywhere ("sequential" is 1, "concurrent" 50).
    pub fn all(users: usize) -> TreeUsers {
        TreeUsers {
            catalogs: users,
            namespaces: users,
            tables: users,
            views: users,
        }
    }
}

/// How a tree workload runs.
#[derive(Debug, Clone, Copy)]
pub struct TreeRun {
    /// Create (or fetch) catalogs through the management API; off for a catalog given
    /// as existing (servers without the management API).
    pub manage_catalogs: bool,
    pub users: TreeUsers,
    /// Upper bound on each phase, so a stalled server cannot hold a run forever.
    pub phase_cap: Duration,
}

fn describe(report: &mut Report, dataset: &Dataset, run: &TreeRun) {
    describe_dataset(report, dataset);
    report.meta(
        "catalogs",
        if run.manage_catalogs {
            "through the management API"
        } else {
            "given as existing"
        },
    );
}

pub(crate) fn describe_dataset(report: &mut Report, dataset: &Dataset) {
    report.meta("catalog", &dataset.catalog);
    report.meta(
        "tree",
        format!(
            "width {}, depth {}: {} namespaces, {} tables, {} views",
            dataset.tree.width,
            dataset.tree.depth,
            dataset.namespaces(),
            dataset.tables(),
            dataset.views()
        ),
    );
    report.meta(
        "entities",
        format!(
            "{} columns per table, {} per view; {} properties per namespace, {} per table, {} per view",
            dataset.columns_per_table,
            dataset.columns_per_view,
            dataset.namespace_properties,
            dataset.table_properties,
            dataset.view_properties
        ),
    );
}

async fn closed_phase(
    target: &Target,
    len: u64,
    users: usize,
    cap: Duration,
    label: &str,
    op: impl Fn(u64) -> Op + Send + Sync + 'static,
) -> Results {
    let workload = indexed(len, op);
    run_closed(
        target.client.clone(),
        workload,
        users,
        Limits::for_duration(cap),
        label,
    )
    .await
}

pub async fn create_tree(
    target: &Target,
    dataset: Arc<Dataset>,
    run: &TreeRun,
) -> anyhow::Result<Report> {
    dataset.validate()?;
    let mut report = Report::new("create-tree-dataset");
    describe(&mut report, &dataset, run);
    let users = run.users;
    if run.manage_catalogs {
        let paths = crate::bench::target::Paths::new(String::new());
        let actions = Arc::new(Actions::new(
            dataset.clone(),
            paths,
            target.management_catalogs(),
        ));
        let results = closed_phase(
            target,
            dataset.catalogs,
            users.catalogs,
            run.phase_cap,
            "catalogs",
            move |i| actions.create_catalog(i).into(),
        )
        .await;
        report.expect(
            "catalogs created",
            dataset.catalogs,
            results.ok("Create Catalog"),
        );
        report.phase("catalogs", closed(users.catalogs), results);
    }
    let paths = target.catalog(&dataset.catalog).await?;
    let actions = Arc::new(Actions::new(
        dataset.clone(),
        paths,
        target.management_catalogs(),
    ));

    let mut namespaces = Results::default();
    for depth in 0..dataset.tree.depth {
        let level = dataset.tree.level(depth);
        let actions = actions.clone();
        let results = closed_phase(
            target,
            level.end - level.start,
            users.namespaces,
            run.phase_cap,
            &format!("namespaces, level {depth}"),
            move |i| actions.create_namespace(level.start + i).into(),
        )
        .await;
        namespaces.append(results);
    }
    report.expect(
        "namespaces created",
        dataset.namespaces(),
        namespaces.ok("Create Namespace"),
    );
    report.phase(
        "namespaces",
        format!("{}, level by level", closed(users.namespaces)),
        namespaces,
    );

    let table_actions = actions.clone();
    let tables = closed_phase(
        target,
        dataset.tables(),
        users.tables,
        run.phase_cap,
        "tables",
        move |i| table_actions.create_table(i).into(),
    )
    .await;
    report.expect(
        "tables created",
        dataset.tables(),
        tables.ok("Create Table"),
    );
    report.phase("tables", closed(users.tables), tables);

    let views = closed_phase(
        target,
        dataset.views(),
        users.views,
        run.phase_cap,
        "views",
        move |i| actions.create_view(i).into(),
    )
    .await;
    report.expect("views created", dataset.views(), views.ok("Create View"));
    report.phase("views", closed(users.views), views);
    Ok(report)
}

/// read-tree-dataset: every entity read once, list → HEAD → GET, per kind in turn.
pub async fn read_tree(
    target: &Target,
    dataset: Arc<Dataset>,
    run: &TreeRun,
) -> anyhow::Result<Report> {
    dataset.validate()?;
    let mut report = Report::new("read-tree-dataset");
    describe(&mut report, &dataset, run);
    let users = run.users;
    let cap = run.phase_cap;
    let paths = target.catalog(&dataset.catalog).await?;
    let actions = Arc::new(Actions::new(
        dataset.clone(),
        paths,
        target.management_catalogs(),
    ));
    let chain = |calls| Op { group: None, calls };
    if run.manage_catalogs {
        let a = actions.clone();
        let results = closed_phase(
            target,
            dataset.catalogs,
            users.catalogs,
            cap,
            "catalogs",
            move |i| a.fetch_catalog(i).into(),
        )
        .await;
        report.expect(
            "catalogs read",
            dataset.catalogs,
            results.ok("Fetch Catalog"),
        );
        report.phase("catalogs", closed(users.catalogs), results);
    }
    let a = actions.clone();
    let results = closed_phase(
        target,
        dataset.namespaces(),
        users.namespaces,
        cap,
        "namespaces",
        move |n| {
            chain(vec![
                a.fetch_child_namespaces(n),
                a.check_namespace_exists(n),
                a.fetch_namespace(n),
            ])
        },
    )
    .await;
    report.expect(
        "namespaces read",
        dataset.namespaces(),
        results.ok("Fetch single namespace"),
    );
    report.phase("namespaces", closed(users.namespaces), results);
    let a = actions.clone();
    let results = closed_phase(
        target,
        dataset.tables(),
        users.tables,
        cap,
        "tables",
        move |i| {
            chain(vec![
                a.fetch_children_tables(i),
                a.check_table_exists(i),
                a.fetch_table(i),
            ])
        },
    )
    .await;
    report.expect(
        "tables read",
        dataset.tables(),
        results.ok("Fetch single Table"),
    );
    report.phase("tables", closed(users.tables), results);
    let a = actions;
    let results = closed_phase(
        target,
        dataset.views(),
        users.views,
        cap,
        "views",
        move |i| {
            chain(vec![
                a.fetch_children_views(i),
                a.check_view_exists(i),
                a.fetch_view(i),
            ])
        },
    )
    .await;
    report.expect(
        "views read",
        dataset.views(),
        results.ok("Fetch single View"),
    );
    report.phase("views", closed(users.views), results);
    Ok(report)
}
