//! Every `floe bench` workload, small and short, against an in-process Floe; the counts
//! each report gives are checked against what the catalog then contains.

use std::sync::Arc;
use std::time::Duration;

use floe::bench::endpoints::{self, Endpoint, EndpointSettings};
use floe::bench::load::{Arrivals, Limits, Model};
use floe::bench::polaris::tree_workloads::{create_tree, read_tree, TreeRun, TreeUsers};
use floe::bench::polaris::writes::{self, CommitRates, WeightedSettings};
use floe::bench::polaris::{read_update, Dataset, Tree};
use floe::bench::report::Report;
use floe::bench::target::{Paths, Target, TargetConfig};
use floe::bench::ycsb::{self, KeyChooser, Preset, YcsbSettings};
use serde_json::Value;
use tokio::sync::oneshot;

struct Floe {
    base: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
    _stop: oneshot::Sender<()>,
}

impl Floe {
    async fn start() -> Floe {
        floe::bench::live::set_quiet(true);
        let dir = tempfile::tempdir().unwrap();
        let mut config = floe::server::ServerConfig::new(dir.path().join("data"));
        config.fsync = false;
        let router = floe::server::build(&config).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(floe::server::run(listener, router, async move {
            let _ = stopped.await;
        }));
        Floe {
            base,
            http: reqwest::Client::new(),
            _dir: dir,
            _stop: stop,
        }
    }

    async fn target(&self) -> Target {
        Target::connect(TargetConfig::new(url::Url::parse(&self.base).unwrap()))
            .await
            .unwrap()
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    /// Every namespace of a catalog (prefix), depth first.
    async fn namespaces(&self, prefix: &str) -> Vec<Vec<String>> {
        let mut all = Vec::new();
        let mut queue = vec![None::<Vec<String>>];
        while let Some(parent) = queue.pop() {
            let path = match &parent {
                Some(p) => format!("/v1/{prefix}/namespaces?parent={}", Paths::ns(p)),
                None => format!("/v1/{prefix}/namespaces"),
            };
            let found: Vec<Vec<String>> =
                serde_json::from_value(self.get(&path).await["namespaces"].clone()).unwrap();
            for ns in found {
                queue.push(Some(ns.clone()));
                all.push(ns);
            }
        }
        all
    }

    /// How many tables a top-level namespace of the default catalog holds.
    async fn table_count(&self, namespace: &str) -> u64 {
        let path = format!("/v1/default/namespaces/{namespace}/tables");
        self.get(&path).await["identifiers"]
            .as_array()
            .unwrap()
            .len() as u64
    }

    /// Every table (or view) of a catalog with its loaded metadata.
    async fn objects(&self, prefix: &str, kind: &str) -> Vec<Value> {
        let mut out = Vec::new();
        for ns in self.namespaces(prefix).await {
            let base = format!("/v1/{prefix}/namespaces/{}/{kind}", Paths::ns(&ns));
            for id in self.get(&base).await["identifiers"].as_array().unwrap() {
                out.push(
                    self.get(&format!("{base}/{}", id["name"].as_str().unwrap()))
                        .await,
                );
            }
        }
        out
    }
}

fn small_tree(catalog: &str) -> Arc<Dataset> {
    Arc::new(Dataset {
        catalog: catalog.into(),
        base_location: "file:///tmp/unused".into(),
        tree: Tree { width: 2, depth: 3 },
        tables_per_namespace: 2,
        views_per_namespace: 1,
        ..Dataset::default()
    })
}

fn tree_run(users: TreeUsers) -> TreeRun {
    TreeRun {
        manage_catalogs: true,
        users,
        phase_cap: Duration::from_secs(60),
    }
}

fn assert_no_failures(report: &Report) {
    for row in report.rows() {
        assert_eq!(
            row.ko, 0,
            "{}: {} failed: {:?}",
            report.workload, row.request, row.errors
        );
    }
}

/// How many properties of an object's metadata start with `prefix`.
fn properties_with(objects: &[Value], prefix: &str) -> u64 {
    objects
        .iter()
        .map(|o| {
            o["metadata"]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| k.starts_with(prefix))
                .count() as u64
        })
        .sum()
}

/// Creates the small tree in `catalog` (as create-tree-dataset does) and checks it.
async fn create_and_check(floe: &Floe, target: &Target, catalog: &str) -> Arc<Dataset> {
    let dataset = small_tree(catalog);
    let report = create_tree(
        target,
        dataset.clone(),
        &tree_run(TreeUsers::polaris_create(&dataset)),
    )
    .await
    .unwrap();
    assert_no_failures(&report);
    assert!(
        report.expectations.iter().all(|e| e.met()),
        "{}",
        report.table()
    );
    let namespaces = floe.namespaces(catalog).await;
    assert_eq!(namespaces.len() as u64, report.ok("Create Namespace"));
    assert_eq!(namespaces.len(), 7);
    assert!(namespaces.contains(&vec!["NS_0".into(), "NS_2".into(), "NS_6".into()]));
    let tables = floe.objects(catalog, "tables").await;
    assert_eq!(tables.len() as u64, report.ok("Create Table"));
    assert_eq!(tables.len(), 8);
    assert_eq!(properties_with(&tables, "InitialAttribute_"), 8 * 10);
    let views = floe.objects(catalog, "views").await;
    assert_eq!(views.len() as u64, report.ok("Create View"));
    assert_eq!(views.len(), 4);
    dataset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polaris_workloads_report_what_the_catalog_then_contains() {
    let floe = Floe::start().await;
    let target = floe.target().await;

    let dataset = create_and_check(&floe, &target, "C_0").await;
    let read = read_tree(
        &target,
        dataset.clone(),
        &tree_run(TreeUsers::polaris_read()),
    )
    .await
    .unwrap();
    assert_no_failures(&read);
    assert!(
        read.expectations.iter().all(|e| e.met()),
        "{}",
        read.table()
    );
    assert_eq!(read.ok("Check Table Exists"), 8);
    assert_eq!(read.ok("Fetch children Views"), 4);

    // read-update: each update writes a property no other update writes.
    let open = Model::Open {
        rate: 150.0,
        arrivals: Arrivals::Poisson,
        max_in_flight: 50,
    };
    let limits = Limits::for_duration(Duration::from_secs(1));
    let mixed = read_update::read_update(&target, dataset.clone(), 0.5, open, limits)
        .await
        .unwrap();
    assert_no_failures(&mixed);
    let (ok, _) = mixed.phases[0].results.total();
    assert!(
        (100..=200).contains(&ok),
        "about 150 operations in 1 s at 150/s, got {ok}"
    );
    let reads = mixed.ok("Read");
    let writes = mixed.ok("Write");
    assert_eq!(reads + writes, ok);
    let tables = floe.objects("C_0", "tables").await;
    assert_eq!(
        properties_with(&tables, "NewAttribute_"),
        mixed.ok("Update Table")
    );
    let views = floe.objects("C_0", "views").await;
    assert_eq!(
        properties_with(&views, "NewAttribute_"),
        mixed.ok("Update View")
    );
    let namespaces = floe.namespaces("C_0").await;
    let mut updated = 0;
    for ns in &namespaces {
        let props = floe
            .get(&format!("/v1/C_0/namespaces/{}", Paths::ns(ns)))
            .await["properties"]
            .clone();
        updated += props
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| k.starts_with("UpdatedAttribute_"))
            .count() as u64;
    }
    assert_eq!(updated, mixed.ok("Update namespace"));

    // create-commits on a tree of its own, so its property names cannot collide.
    let commits_tree = create_and_check(&floe, &target, "commits").await;
    let rates = CommitRates {
        tables: 20.0,
        views: 10.0,
    };
    let commits = writes::create_commits(&target, commits_tree, rates, 10, limits)
        .await
        .unwrap();
    assert_no_failures(&commits);
    let table_commits = commits.ok("Update Table");
    assert!(
        (15..=25).contains(&table_commits),
        "20/s for 1 s, got {table_commits}"
    );
    assert!((7..=13).contains(&commits.ok("Update View")));
    let tables = floe.objects("commits", "tables").await;
    assert_eq!(properties_with(&tables, "NewAttribute_"), table_commits);
    let views = floe.objects("commits", "views").await;
    assert_eq!(
        properties_with(&views, "NewAttribute_"),
        commits.ok("Update View")
    );

    // weighted: every acknowledged commit is one more metadata version of some table
    // (Floe numbers its metadata files; the metadata log would not do, as it keeps only
    // the last 100 entries per table).
    let weighted_tree = create_and_check(&floe, &target, "weighted").await;
    let before: usize = metadata_versions(&floe.objects("weighted", "tables").await);
    let report = writes::weighted(&target, weighted_tree, &WeightedSettings::default(), limits)
        .await
        .unwrap();
    assert_no_failures(&report);
    let after = metadata_versions(&floe.objects("weighted", "tables").await);
    assert!(report.ok("Update Table") > 0 && report.ok("Fetch single Table") > 0);
    assert_eq!((after - before) as u64, report.ok("Update Table"));
}

/// The sum of the tables' metadata file versions (`<version>-<uuid>.metadata.json`).
fn metadata_versions(tables: &[Value]) -> usize {
    tables
        .iter()
        .map(|t| {
            let location = t["metadata-location"]
                .as_str()
                .expect("a metadata location");
            let file = location.rsplit('/').next().unwrap_or_default();
            file.split('-')
                .next()
                .and_then(|v| v.parse::<usize>().ok())
                .expect("a numbered metadata file")
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ycsb_presets_and_single_endpoints_match_the_catalog() {
    let floe = Floe::start().await;
    let target = floe.target().await;
    let limits = Limits::for_duration(Duration::from_millis(500));
    let settings = |presets: Vec<Preset>| YcsbSettings {
        presets,
        scales: vec![30, 60],
        tables_per_namespace: 20,
        keys: KeyChooser::Zipfian,
        load_users: 4,
        scan_page_size: 7,
        ..YcsbSettings::default()
    };
    let two_users = Model::Closed { users: 2 };
    // Scans first, alone: their namespaces hold exactly 20 tables until inserts add more.
    let scans = ycsb::ycsb(&target, &settings(vec![Preset::Scan]), two_users, limits)
        .await
        .unwrap();
    assert_no_failures(&scans);
    let names: Vec<&str> = scans.phases.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "load to 30",
            "run scan at 30",
            "load to 60",
            "run scan at 60"
        ]
    );
    // At 60 tables every namespace holds 20: 3 pages of 7 per scan.
    let at_60 = &scans.phases[3].results;
    assert!(at_60.ok("scan (whole namespace)") > 0);
    assert_eq!(
        at_60.ok("scan page (list tables)"),
        3 * at_60.ok("scan (whole namespace)")
    );
    let presets = vec![
        Preset::InsertOnly,
        Preset::UpdateOnly,
        Preset::ReadOnly,
        Preset::ReadUpdate,
    ];
    let mixed = ycsb::ycsb(&target, &settings(presets), two_users, limits)
        .await
        .unwrap();
    assert_no_failures(&mixed);
    assert_eq!(mixed.phases.len(), 2 * (1 + 4));
    for phase in mixed.phases.iter().filter(|p| p.name.starts_with("run")) {
        assert!(phase.results.total().0 > 0, "{} ran nothing", phase.name);
    }
    assert!(mixed.ok("update (commit)") > 0 && mixed.ok("read (load table)") > 0);
    let inserted = mixed.ok("insert (create table)");
    assert!(inserted > 0);
    let namespaces = floe.namespaces("default").await;
    let count = |prefix: &str| {
        namespaces
            .iter()
            .filter(|ns| ns[0].starts_with(prefix))
            .count()
    };
    assert_eq!(
        count("ycsb_inserts_"),
        2,
        "one namespace of inserts per scale"
    );
    assert_eq!(
        count("ycsb_"),
        3 + 2,
        "60 loaded tables in namespaces of 20"
    );
    let mut loaded = 0;
    for k in 0..3 {
        loaded += floe.table_count(&format!("ycsb_{k}")).await;
    }
    assert_eq!(
        loaded, 60,
        "inserts leave the loaded namespaces as they were"
    );
    let mut listed_inserts = 0;
    for ns in namespaces
        .iter()
        .filter(|ns| ns[0].starts_with("ycsb_inserts_"))
    {
        listed_inserts += floe.table_count(&ns[0]).await;
    }
    assert_eq!(listed_inserts, inserted);

    let settings = EndpointSettings {
        namespaces: 3,
        tables_per_namespace: 4,
        setup_users: 2,
        ..EndpointSettings::default()
    };
    endpoints::setup(&target, &settings).await.unwrap();
    let counted = Limits {
        ops: Some(100),
        duration: None,
        warmup: Duration::ZERO,
    };
    for which in Endpoint::ALL {
        let report = endpoints::endpoint(
            &target,
            &settings,
            which,
            Model::Closed { users: 3 },
            counted,
        )
        .await
        .unwrap();
        assert_no_failures(&report);
        assert_eq!(report.ok(which.name()), 100, "{}", which.name());
    }
    let open = Model::Open {
        rate: 200.0,
        arrivals: Arrivals::Uniform,
        max_in_flight: 10,
    };
    let report = endpoints::endpoint(&target, &settings, Endpoint::GetTable, open, counted)
        .await
        .unwrap();
    assert_eq!(report.ok("get_table"), 100);
    let namespaces = floe.get("/v1/default/namespaces").await["namespaces"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        namespaces,
        3 + 2 + 3,
        "ycsb_, ycsb_inserts_ and bench_ns_ namespaces"
    );
    for k in 0..3 {
        let listed = floe
            .get(&format!("/v1/default/namespaces/bench_ns_{k}/tables"))
            .await;
        assert_eq!(listed["identifiers"].as_array().unwrap().len(), 4);
    }

    let dir = tempfile::tempdir().unwrap();
    let written = report.write_files(dir.path(), "get_table").unwrap();
    assert_eq!(written.len(), 3);
    let csv = std::fs::read_to_string(dir.path().join("get_table.csv")).unwrap();
    assert!(csv.starts_with("workload,phase,request,kind,count,ok,ko,"));
    assert!(csv
        .lines()
        .nth(1)
        .unwrap()
        .starts_with("get_table,get_table,get_table,request,100,100,0,"));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("get_table.json")).unwrap())
            .unwrap();
    assert_eq!(json["rows"][0]["ok"], 100);
    let html = std::fs::read_to_string(dir.path().join("get_table.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("Latency by percentile"));
    assert!(
        !html.contains("<script") && !html.contains("<link") && !html.contains("https://"),
        "opens offline"
    );
}
