//! The write-heavy workloads of the suite.
//!
//! - create-commits: blind table commits and view commits, each at its own fixed rate
//!   (10/s and 5/s), walking every entity in turn with a new property per round.
//! - weighted: readers and writers in closed loops, each picking tables from its own
//!   normal distribution over the table space, so that some tables are hot and writers
//!   conflict.

use std::sync::Arc;

use rand::Rng;
use rand_distr::{Distribution as _, Normal};
use serde_json::json;

use super::actions::{new_attribute, now_ms, Actions};
use super::Dataset;
use crate::bench::load::{
    circular, run_closed, run_open, Arrivals, FromFn, Limits, Stream, User, Workload,
};
use crate::bench::op::Op;
use crate::bench::report::Report;
use crate::bench::target::Target;

/// Fixed commit rates (operations per second).
#[derive(Debug, Clone, Copy)]
pub struct CommitRates {
    pub tables: f64,
    pub views: f64,
}

impl Default for CommitRates {
    fn default() -> CommitRates {
        CommitRates {
            tables: 10.0,
            views: 5.0,
        }
    }
}

pub async fn create_commits(
    target: &Target,
    dataset: Arc<Dataset>,
    rates: CommitRates,
    max_in_flight: usize,
    limits: Limits,
) -> anyhow::Result<Report> {
    dataset.validate()?;
    let mut report = Report::new("create-commits");
    super::tree_workloads::describe_dataset(&mut report, &dataset);
    let paths = target.catalog(&dataset.catalog).await?;
    let actions = Arc::new(Actions::new(
        dataset.clone(),
        paths,
        target.management_catalogs(),
    ));
    let a = actions.clone();
    let tables = circular(dataset.tables(), move |i, round| -> Op {
        a.update_table(i, new_attribute(round)).into()
    });
    let a = actions;
    let views = circular(dataset.views(), move |i, round| -> Op {
        a.update_view(i, new_attribute(round)).into()
    });
    let streams = vec![
        Stream {
            workload: Arc::new(FromFn(move |_: &mut User| Some(tables()))),
            rate: rates.tables,
        },
        Stream {
            workload: Arc::new(FromFn(move |_: &mut User| Some(views()))),
            rate: rates.views,
        },
    ];
    let load = format!(
        "open, table commits at {}/s and view commits at {}/s",
        rates.tables, rates.views
    );
    let results = run_open(
        target.client.clone(),
        streams,
        Arrivals::Uniform,
        max_in_flight,
        limits,
        "create-commits",
    )
    .await;
    report.phase("commits", load, results);
    Ok(report)
}

/// `count` users sampling tables from a normal distribution over [0, 1) of the table
/// space (values outside [0, 1] are drawn again).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Distribution {
    pub count: usize,
    pub mean: f64,
    pub variance: f64,
}

/// Draws beyond this many mean the distribution hardly touches [0, 1].
const MAX_DRAWS: usize = 100_000;

impl Distribution {
    /// A table index in `0..items`.
    pub fn sample(&self, items: u64, rng: &mut impl Rng) -> Option<u64> {
        let normal = Normal::new(self.mean, self.variance.sqrt()).ok()?;
        let value = (0..MAX_DRAWS)
            .map(|_| normal.sample(rng))
            .find(|v| (0.0..=1.0).contains(v))?;
        Some(((value * items as f64) as u64).min(items.saturating_sub(1)))
    }
}

#[derive(Debug, Clone)]
pub struct WeightedSettings {
    pub seed: u64,
    pub readers: Vec<Distribution>,
    pub writers: Vec<Distribution>,
}

impl Default for WeightedSettings {
    /// 8 readers around 0.3 and 2 writers around 0.7, variance 0.0278, seed 42.
    fn default() -> WeightedSettings {
        WeightedSettings {
            seed: 42,
            readers: vec![Distribution {
                count: 8,
                mean: 0.3,
                variance: 0.0278,
            }],
            writers: vec![Distribution {
                count: 2,
                mean: 0.7,
                variance: 0.0278,
            }],
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Role {
    writer: bool,
    distribution: Distribution,
    /// Seeds as the suite derives them: seed + (i+1)·1000 + thread for readers of the
    /// i-th distribution, (i+1)·2000 + thread for writers.
    seed: u64,
}

pub struct Weighted {
    actions: Arc<Actions>,
    roles: Vec<Role>,
}

impl Weighted {
    pub fn new(actions: Arc<Actions>, settings: &WeightedSettings) -> Weighted {
        let mut roles = Vec::new();
        for (writer, distributions, stride) in [
            (false, &settings.readers, 1000),
            (true, &settings.writers, 2000),
        ] {
            for (i, d) in distributions.iter().enumerate() {
                for thread in 0..d.count {
                    let seed = settings.seed + (i as u64 + 1) * stride + thread as u64;
                    roles.push(Role {
                        writer,
                        distribution: *d,
                        seed,
                    });
                }
            }
        }
        Weighted { actions, roles }
    }

    pub fn users(&self) -> usize {
        self.roles.len()
    }
}

impl Workload for Weighted {
    fn next_op(&self, user: &mut User) -> Option<Op> {
        let role = self.roles.get(user.id)?;
        let tables = self.actions.dataset.tables();
        let i = role.distribution.sample(tables, &mut user.rng)?;
        let call = if role.writer {
            self.actions
                .update_table(i, json!({"last_updated": now_ms().to_string()}))
        } else {
            self.actions.fetch_table(i)
        };
        Some(call.into())
    }

    fn user_seed(&self, user: usize) -> u64 {
        self.roles.get(user).map_or(user as u64, |r| r.seed)
    }
}

pub async fn weighted(
    target: &Target,
    dataset: Arc<Dataset>,
    settings: &WeightedSettings,
    limits: Limits,
) -> anyhow::Result<Report> {
    dataset.validate()?;
    anyhow::ensure!(
        dataset.max_tables.is_none(),
        "the weighted workload needs every table of the tree (no max-tables)"
    );
    let mut report = Report::new("weighted");
    super::tree_workloads::describe_dataset(&mut report, &dataset);
    let describe = |ds: &[Distribution]| -> String {
        let parts: Vec<String> = ds
            .iter()
            .map(|d| format!("{} at mean {} variance {}", d.count, d.mean, d.variance))
            .collect();
        parts.join(", ")
    };
    report.meta("readers", describe(&settings.readers));
    report.meta("writers", describe(&settings.writers));
    report.meta("seed", settings.seed);
    let paths = target.catalog(&dataset.catalog).await?;
    let actions = Arc::new(Actions::new(dataset, paths, target.management_catalogs()));
    let workload = Arc::new(Weighted::new(actions, settings));
    let users = workload.users();
    let results = run_closed(target.client.clone(), workload, users, limits, "weighted").await;
    report.phase("weighted", crate::bench::load::closed(users), results);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn samples_follow_the_normal_distribution_within_the_table_space() {
        let d = Distribution {
            count: 1,
            mean: 0.3,
            variance: 0.0278,
        };
        let items = 1_000;
        let mut rng = SmallRng::seed_from_u64(42);
        let samples: Vec<f64> = (0..50_000)
            .map(|_| d.sample(items, &mut rng).unwrap() as f64)
            .collect();
        assert!(samples.iter().all(|s| *s < items as f64));
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        let variance =
            samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / samples.len() as f64;
        // Redrawing values outside [0, 1] trims the left tail a little: the mean moves up
        // and the spread narrows slightly.
        assert!((mean / items as f64 - 0.3).abs() < 0.03, "mean {mean}");
        let sd = variance.sqrt() / items as f64;
        assert!((0.13..0.18).contains(&sd), "standard deviation {sd}");
        let hot = samples
            .iter()
            .filter(|s| (250.0..350.0).contains(*s))
            .count();
        let cold = samples
            .iter()
            .filter(|s| (850.0..950.0).contains(*s))
            .count();
        assert!(hot > 10 * cold.max(1), "hot {hot} cold {cold}");
    }

    #[test]
    fn a_distribution_far_outside_the_space_gives_up() {
        let d = Distribution {
            count: 1,
            mean: 50.0,
            variance: 0.0001,
        };
        assert_eq!(d.sample(10, &mut SmallRng::seed_from_u64(1)), None);
    }

    #[test]
    fn readers_and_writers_get_the_suite_seeds() {
        let paths = crate::bench::target::Paths::new("/v1/C_0");
        let actions = Arc::new(Actions::new(
            Arc::new(Dataset::default()),
            paths,
            String::new(),
        ));
        let w = Weighted::new(actions, &WeightedSettings::default());
        assert_eq!(w.users(), 10);
        assert_eq!(w.user_seed(0), 42 + 1000);
        assert_eq!(w.user_seed(7), 42 + 1007);
        assert_eq!(w.user_seed(8), 42 + 2000);
        assert_eq!(w.user_seed(9), 42 + 2001);
        let mut user = User {
            id: 9,
            rng: SmallRng::seed_from_u64(1),
        };
        let op = w.next_op(&mut user).unwrap();
        assert_eq!(op.calls[0].name, "Update Table");
        user.id = 0;
        assert_eq!(
            w.next_op(&mut user).unwrap().calls[0].name,
            "Fetch single Table"
        );
    }
}
