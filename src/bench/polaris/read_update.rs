//! read-update-tree-dataset: each operation is a read with probability `read-write-ratio`
//! (uniform over the 9 reads: list, HEAD and GET of namespaces, tables and views) or
//! else a write (uniform over the 3 property updates). Each of the 12 requests walks
//! the dataset in order through its own circular feeder, as in the suite.

use std::sync::Arc;

use rand::Rng;

use super::actions::{new_attribute, Actions};
use super::Dataset;
use crate::bench::load::{circular, run, Limits, Model, User, Workload};
use crate::bench::op::{Call, Op};
use crate::bench::report::Report;
use crate::bench::target::Target;

type Feeder = Box<dyn Fn() -> Call + Send + Sync>;

pub struct ReadUpdate {
    read_ratio: f64,
    reads: Vec<Feeder>,
    writes: Vec<Feeder>,
}

fn feeder(len: u64, call: impl Fn(u64, u64) -> Call + Send + Sync + 'static) -> Feeder {
    Box::new(circular(len, call))
}

impl ReadUpdate {
    pub fn new(actions: Arc<Actions>, read_ratio: f64) -> ReadUpdate {
        let d = actions.dataset.clone();
        let (ns, tables, views) = (d.namespaces(), d.tables(), d.views());
        let a = || actions.clone();
        let reads = vec![
            feeder(ns, {
                let a = a();
                move |i, _| a.fetch_child_namespaces(i)
            }),
            feeder(ns, {
                let a = a();
                move |i, _| a.check_namespace_exists(i)
            }),
            feeder(ns, {
                let a = a();
                move |i, _| a.fetch_namespace(i)
            }),
            feeder(tables, {
                let a = a();
                move |i, _| a.fetch_children_tables(i)
            }),
            feeder(tables, {
                let a = a();
                move |i, _| a.check_table_exists(i)
            }),
            feeder(tables, {
                let a = a();
                move |i, _| a.fetch_table(i)
            }),
            feeder(views, {
                let a = a();
                move |i, _| a.fetch_children_views(i)
            }),
            feeder(views, {
                let a = a();
                move |i, _| a.check_view_exists(i)
            }),
            feeder(views, {
                let a = a();
                move |i, _| a.fetch_view(i)
            }),
        ];
        let writes = vec![
            feeder(ns, {
                let a = a();
                move |i, round| a.update_namespace(i, round)
            }),
            feeder(tables, {
                let a = a();
                move |i, round| a.update_table(i, new_attribute(round))
            }),
            feeder(views, {
                let a = a();
                move |i, round| a.update_view(i, new_attribute(round))
            }),
        ];
        ReadUpdate {
            read_ratio,
            reads,
            writes,
        }
    }
}

impl Workload for ReadUpdate {
    fn next_op(&self, user: &mut User) -> Option<Op> {
        let (group, choices) = if user.rng.random::<f64>() < self.read_ratio {
            ("Read", &self.reads)
        } else {
            ("Write", &self.writes)
        };
        let call = choices[user.rng.random_range(0..choices.len())]();
        Some(Op {
            group: Some(group),
            calls: vec![call],
        })
    }
}

pub async fn read_update(
    target: &Target,
    dataset: Arc<Dataset>,
    read_ratio: f64,
    model: Model,
    limits: Limits,
) -> anyhow::Result<Report> {
    dataset.validate()?;
    anyhow::ensure!(
        (0.0..=1.0).contains(&read_ratio),
        "the read/write ratio is between 0 and 1"
    );
    let mut report = Report::new("read-update-tree-dataset");
    super::tree_workloads::describe_dataset(&mut report, &dataset);
    report.meta("read/write ratio", read_ratio);
    let paths = target.catalog(&dataset.catalog).await?;
    let actions = Arc::new(Actions::new(dataset, paths, target.management_catalogs()));
    let workload = Arc::new(ReadUpdate::new(actions, read_ratio));
    let results = run(
        target.client.clone(),
        workload,
        model,
        limits,
        "read-update",
    )
    .await;
    report.phase(
        &format!("read-update {read_ratio}"),
        model.describe(),
        results,
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;
    use crate::bench::target::Paths;

    fn mix(read_ratio: f64, ops: usize) -> HashMap<&'static str, usize> {
        let paths = Paths::new("/v1/C_0");
        let actions = Arc::new(Actions::new(
            Arc::new(Dataset::default()),
            paths,
            String::new(),
        ));
        let workload = ReadUpdate::new(actions, read_ratio);
        let mut user = User {
            id: 0,
            rng: SmallRng::seed_from_u64(7),
        };
        let mut counts = HashMap::new();
        for _ in 0..ops {
            let op = workload.next_op(&mut user).unwrap();
            *counts.entry(op.group.unwrap()).or_default() += 1;
            *counts.entry(op.calls[0].name).or_default() += 1;
        }
        counts
    }

    fn within(actual: usize, expected: f64, tolerance: f64) -> bool {
        (actual as f64 - expected).abs() <= expected * tolerance
    }

    #[test]
    fn reads_and_writes_follow_the_ratio_and_are_uniform_within_each() {
        let ops = 90_000;
        for ratio in [0.5, 0.8, 0.99] {
            let counts = mix(ratio, ops);
            let reads = counts["Read"];
            let writes = counts.get("Write").copied().unwrap_or(0);
            assert_eq!(reads + writes, ops);
            assert!(
                within(reads, ops as f64 * ratio, 0.02),
                "ratio {ratio}: {reads} reads"
            );
            for name in [
                "Fetch child namespaces",
                "Check Namespace Exists",
                "Fetch single namespace",
                "Fetch children Tables",
                "Check Table Exists",
                "Fetch single Table",
                "Fetch children Views",
                "Check View Exists",
                "Fetch single View",
            ] {
                assert!(
                    within(counts[name], reads as f64 / 9.0, 0.06),
                    "ratio {ratio}: {name} {}",
                    counts[name]
                );
            }
            for name in ["Update namespace", "Update Table", "Update View"] {
                let n = counts.get(name).copied().unwrap_or(0);
                assert!(
                    within(n, writes as f64 / 3.0, 0.15),
                    "ratio {ratio}: {name} {n}"
                );
            }
        }
    }

    #[test]
    fn only_reads_at_ratio_one_and_only_writes_at_zero() {
        assert!(!mix(1.0, 1000).contains_key("Write"));
        assert!(!mix(0.0, 1000).contains_key("Read"));
    }

    #[test]
    fn feeders_walk_every_entity_then_start_a_new_round() {
        let paths = Paths::new("/v1/C_0");
        let dataset = Arc::new(Dataset::default());
        let actions = Arc::new(Actions::new(dataset.clone(), paths, String::new()));
        let update = circular(dataset.tables(), move |i, round| {
            actions.update_table(i, new_attribute(round))
        });
        let first: Vec<String> = (0..dataset.tables())
            .map(|_| update().req.uri.to_string())
            .collect();
        let again = update();
        assert_eq!(again.req.uri.to_string(), first[0]);
        assert!(
            String::from_utf8_lossy(again.req.body.as_ref().unwrap()).contains("NewAttribute_1")
        );
        let unique: std::collections::HashSet<_> = first.iter().collect();
        assert_eq!(unique.len() as u64, dataset.tables());
    }
}
