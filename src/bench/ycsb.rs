//! YCSB's core workloads mapped onto a catalog: a record is a table. Each preset has a
//! load phase (create tables up to the scale) and a run phase (the preset's operation
//! mix); with several scales (10³ … 10⁶ tables) the catalog grows between run phases, so
//! the report shows how latency changes with its size.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::ValueEnum;
use hyper::Method;
use rand::Rng;
use rand_distr::{Distribution, Zipf};
use serde_json::json;

use super::client::{uri, Req};
use super::fixtures::{create_namespace_call, ensure_complete, populate, table_body, FlatLayout};
use super::load::{closed, run, Limits, Model, User, Workload};
use super::op::{Call, Op};
use super::report::Report;
use super::target::{Paths, Target};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// Create tables (YCSB's insert).
    InsertOnly,
    /// Blind set-properties commits.
    UpdateOnly,
    /// Load tables.
    ReadOnly,
    /// Half loads, half commits (YCSB workload A).
    ReadUpdate,
    /// List a namespace's tables page by page (YCSB workload E's scans).
    Scan,
}

/// How run-phase operations pick their table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KeyChooser {
    Uniform,
    /// YCSB's scrambled Zipfian (θ = 0.99): a few hot tables spread over the key space.
    Zipfian,
}

#[derive(Debug, Clone)]
pub struct YcsbSettings {
    pub catalog: String,
    /// Run in this order at each scale, after its load phase.
    pub presets: Vec<Preset>,
    /// Table counts to load and run at, ascending.
    pub scales: Vec<u64>,
    pub tables_per_namespace: u64,
    pub keys: KeyChooser,
    pub load_users: usize,
    pub scan_page_size: u64,
}

impl Default for YcsbSettings {
    fn default() -> YcsbSettings {
        YcsbSettings {
            catalog: "default".into(),
            presets: vec![Preset::ReadOnly],
            scales: vec![1_000],
            tables_per_namespace: 1_000,
            keys: KeyChooser::Zipfian,
            load_users: 20,
            scan_page_size: 100,
        }
    }
}

const ZIPFIAN_THETA: f64 = 0.99;
/// A scan reads until the last page; this only bounds a server that never ends a list.
const MAX_SCAN_PAGES: u32 = 100_000;
const LOAD_CAP: Duration = Duration::from_secs(6 * 3600);

/// Picks keys in `0..n`.
pub struct KeyPicker {
    n: u64,
    zipf: Option<Zipf<f64>>,
}

impl KeyPicker {
    pub fn new(n: u64, chooser: KeyChooser) -> KeyPicker {
        let n = n.max(1);
        let zipf = match chooser {
            KeyChooser::Uniform => None,
            KeyChooser::Zipfian => Some(Zipf::new(n as f64, ZIPFIAN_THETA).expect("n ≥ 1, θ > 0")),
        };
        KeyPicker { n, zipf }
    }

    pub fn pick(&self, rng: &mut impl Rng) -> u64 {
        match &self.zipf {
            None => rng.random_range(0..self.n),
            // Hot ranks are scattered by a hash, as YCSB's ScrambledZipfianGenerator does,
            // so that hot tables do not all sit in the first namespace.
            Some(zipf) => fnv1a(zipf.sample(rng) as u64 - 1) % self.n,
        }
    }
}

fn fnv1a(value: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in value.to_le_bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

struct RunPhase {
    preset: Preset,
    paths: Paths,
    layout: FlatLayout,
    picker: KeyPicker,
    namespace_picker: KeyPicker,
    /// Inserts go to a namespace of their own, so that the loaded namespaces keep their
    /// size and later scans and reads compare across servers whatever each inserted.
    insert_namespace: Vec<String>,
    scan_page_size: u64,
    inserted: AtomicU64,
    run_id: String,
}

impl RunPhase {
    fn read(&self, key: u64) -> Call {
        let (ns, name) = self.layout.table(key);
        Call::new(
            "read (load table)",
            Req::get(uri(self.paths.table(&ns, &name)).expect("path")),
            200,
        )
    }

    fn update(&self, key: u64, rng: &mut impl Rng) -> Call {
        let (ns, name) = self.layout.table(key);
        let value: u64 = rng.random();
        let body = json!({"updates": [{"action": "set-properties", "updates": {"field0": format!("{value:016x}")}}]});
        let req = Req::with_body(
            Method::POST,
            uri(self.paths.table(&ns, &name)).expect("path"),
            Bytes::from(body.to_string()),
        );
        Call::new("update (commit)", req, 200)
    }

    fn insert(&self) -> Call {
        let k = self.inserted.fetch_add(1, Ordering::Relaxed);
        let ns = self.insert_namespace.clone();
        let name = format!("i_{}_{k}", self.run_id);
        let req = Req::with_body(
            Method::POST,
            uri(self.paths.tables(&ns)).expect("path"),
            table_body(&name),
        );
        Call::new("insert (create table)", req, 200)
    }

    fn scan(&self, rng: &mut impl Rng) -> Op {
        let ns = self.layout.namespace(self.namespace_picker.pick(rng));
        let path = format!(
            "{}?pageSize={}",
            self.paths.tables(&ns),
            self.scan_page_size
        );
        let mut call = Call::new(
            "scan page (list tables)",
            Req::get(uri(path).expect("path")),
            200,
        );
        call.follow_pages = MAX_SCAN_PAGES;
        Op {
            group: Some("scan (whole namespace)"),
            calls: vec![call],
        }
    }
}

impl Workload for RunPhase {
    fn next_op(&self, user: &mut User) -> Option<Op> {
        let rng = &mut user.rng;
        Some(match self.preset {
            Preset::InsertOnly => self.insert().into(),
            Preset::UpdateOnly => self.update(self.picker.pick(rng), rng).into(),
            Preset::ReadOnly => self.read(self.picker.pick(rng)).into(),
            Preset::ReadUpdate => {
                let key = self.picker.pick(rng);
                if rng.random_bool(0.5) {
                    self.read(key).into()
                } else {
                    self.update(key, rng).into()
                }
            }
            Preset::Scan => self.scan(rng),
        })
    }
}

pub async fn ycsb(
    target: &Target,
    settings: &YcsbSettings,
    model: Model,
    limits: Limits,
) -> anyhow::Result<Report> {
    let mut scales = settings.scales.clone();
    scales.sort_unstable();
    scales.dedup();
    anyhow::ensure!(
        scales.first().is_some_and(|s| *s > 0),
        "give at least one scale above 0"
    );
    anyhow::ensure!(!settings.presets.is_empty(), "give at least one preset");
    let mut report = Report::new("ycsb");
    let names: Vec<String> = settings.presets.iter().map(|p| preset_name(*p)).collect();
    report.meta("catalog", &settings.catalog);
    report.meta("presets", names.join(", "));
    report.meta("scales (tables)", format!("{scales:?}"));
    report.meta("tables per namespace", settings.tables_per_namespace);
    report.meta(
        "key distribution",
        format!("{:?}", settings.keys).to_lowercase(),
    );
    let paths = target.catalog(&settings.catalog).await?;
    let layout = FlatLayout {
        prefix: "ycsb".into(),
        tables_per_namespace: settings.tables_per_namespace,
    };
    let run_id = format!("{:x}", super::polaris::actions::now_ms());
    let mut loaded = 0;
    for scale in scales {
        let load = populate(
            target,
            &paths,
            &layout,
            loaded..scale,
            settings.load_users,
            LOAD_CAP,
        )
        .await;
        ensure_complete(&load, &format!("loading {scale} tables"))?;
        report.phase(
            &format!("load to {scale}"),
            closed(settings.load_users),
            load,
        );
        loaded = scale;
        let namespaces = layout.namespaces_for(scale);
        for (preset, name) in settings.presets.iter().zip(&names) {
            let insert_namespace = vec![format!("ycsb_inserts_{run_id}_{scale}")];
            if *preset == Preset::InsertOnly {
                let create = create_namespace_call(&paths, &insert_namespace);
                let response = target.call(&create.req).await?;
                anyhow::ensure!(
                    response.status == 200,
                    "creating namespace {insert_namespace:?} answered {}",
                    response.status
                );
            }
            let workload = Arc::new(RunPhase {
                preset: *preset,
                paths: paths.clone(),
                layout: layout.clone(),
                picker: KeyPicker::new(scale, settings.keys),
                namespace_picker: KeyPicker::new(namespaces, settings.keys),
                insert_namespace,
                scan_page_size: settings.scan_page_size,
                inserted: AtomicU64::new(0),
                run_id: format!("{run_id}_{scale}_{name}"),
            });
            let label = format!("{name} at {scale}");
            let results = run(target.client.clone(), workload, model, limits, &label).await;
            report.phase(&format!("run {name} at {scale}"), model.describe(), results);
        }
    }
    Ok(report)
}

fn preset_name(preset: Preset) -> String {
    preset
        .to_possible_value()
        .map_or_else(|| format!("{preset:?}"), |v| v.get_name().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn uniform_keys_cover_the_range_evenly() {
        let picker = KeyPicker::new(10, KeyChooser::Uniform);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[picker.pick(&mut rng) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn zipfian_keys_have_hot_spots_scattered_over_the_range() {
        let n = 10_000;
        let picker = KeyPicker::new(n, KeyChooser::Zipfian);
        let mut rng = SmallRng::seed_from_u64(2);
        let mut counts = vec![0u32; n as usize];
        let draws = 200_000;
        for _ in 0..draws {
            let key = picker.pick(&mut rng);
            assert!(key < n);
            counts[key as usize] += 1;
        }
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top_1_percent: u32 = sorted[..(n / 100) as usize].iter().sum();
        // θ = 0.99 over 10⁴ keys puts about half of the draws on the hottest 1%.
        assert!(
            top_1_percent > draws / 3,
            "top 1% got {top_1_percent} of {draws}"
        );
        let hottest = counts.iter().position(|c| *c == sorted[0]).unwrap();
        assert_ne!(hottest, 0, "ranks are scrambled, not key 0 first");
    }
}
