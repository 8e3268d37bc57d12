//! The paper's section 7 experiments as side-by-side ratios.
//!
//! Every bench measures its baseline in the same run on the same store and returns an
//! [`Outcome`]: a JSON result object, a short table and a plot ([`Outcome::write`] puts
//! them in `<out>/<bench>.json` and `<out>/<bench>.svg`). On the simulated store
//! ([`Env::new`] with `sim`) the store is an in-memory backend behind a latency model
//! (first-byte latency, per-connection bandwidth, jitter, S3's per-prefix request
//! rates) on a paused current-thread tokio runtime: every wait is virtual, so hundreds
//! of producers and ranks fit on two cores, and throughputs are virtual bytes per
//! virtual second. The paused runtime needs the crate feature `sim`.
//!
//! | bench | paper | headline JSON fields |
//! |---|---|---|
//! | `producers` | figure 6 | `ratio_ingest_vs_raw_put`, `ratio_dac_vs_best_baseline` per point |
//! | `dac` | figure 7 | `dac_commit_success`, `ratio_dac_vs_best_baseline`, `dac_drift`; the paper's untrimmed regime (simulator): `growing.ratio_dac_vs_best_baseline`, `growing.dac_commit_success`; `attempts_per_tgb` per policy |
//! | `consumers` | section 7.4 | `read_amplification` per point |
//! | `lifecycle` | figure 9 | `reduction`, `bound_held` |
//! | `exactly-once` | figure 8 | `overhead` |
//! | `manifest-growth` | section 5.2 | `ratio_tau_100k_vs_1k` |
//! | `peers` (feature `peers`; not in `bench all`) | section 7.2 vs Kafka | `ratio_batchweave_vs_kafka`, `ratio_batchweave_vs_nats` per point, `bytes_fetched_per_delivered` per system |
//! | `visibility` | issue #16 | `visibility_p50_s`, `visibility_p95_s`, `requests_per_tgb` per policy and point |

mod consumers;
mod env;
mod exactly_once;
mod growth;
mod ingest;
mod lifecycle;
#[cfg(feature = "peers")]
pub mod peers;
mod plot;
mod producers;
mod visibility;

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};

pub use env::Env;
pub use plot::{Chart, Panel, Series};

/// Whether this build can run the benches on the simulated store (crate feature `sim`:
/// tokio's paused time).
pub const SIM_AVAILABLE: bool = cfg!(feature = "sim");

/// Why [`Env::new`] refuses the simulator without the `sim` feature.
pub const SIM_UNAVAILABLE: &str = "the simulated store runs in paused (virtual) tokio time, \
     which this build leaves out: build batchweave-harness with its feature `sim`";

/// One experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Which {
    /// Figure 6: producers x payload sweep, ingestion per commit policy vs raw PUT.
    Producers,
    /// Figure 7: 32 producers, throughput and commit success over time per policy.
    Dac,
    /// Section 7.4: world size x slice size, range reads vs dense reads vs raw GET.
    Consumers,
    /// Figure 9: stored bytes over time with and without GC.
    Lifecycle,
    /// Figure 8: commit latency with the producer-state map vs a same-size dummy.
    ExactlyOnce,
    /// Section 5.2: the fragile window at version 1k vs 100k, trimming on and off.
    ManifestGrowth,
    /// Issue #16: visibility latency (append returned -> listed) against the number of
    /// producers, per commit policy.
    Visibility,
}

impl Which {
    /// Every experiment, in the order `bench all` runs them.
    pub const ALL: [Which; 7] = [
        Self::Producers,
        Self::Dac,
        Self::Consumers,
        Self::Lifecycle,
        Self::ExactlyOnce,
        Self::ManifestGrowth,
        Self::Visibility,
    ];

    /// The experiment's name: `<out>/<name>.json`, and the `bench` field of its result.
    pub fn name(self) -> &'static str {
        match self {
            Self::Producers => "producers",
            Self::Dac => "dac",
            Self::Consumers => "consumers",
            Self::Lifecycle => "lifecycle",
            Self::ExactlyOnce => "exactly-once",
            Self::ManifestGrowth => "manifest-growth",
            Self::Visibility => "visibility",
        }
    }
}

/// What one bench produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The result object, with the run's `bench`, `store`, `quick`, `wall_seconds` and
    /// `machine` fields.
    pub json: Value,
    /// Table lines for the terminal.
    pub table: Vec<String>,
    /// The plot.
    pub chart: Chart,
}

impl Outcome {
    /// Writes `<dir>/<name>.json` (pretty-printed) and `<dir>/<name>.svg`; returns both
    /// paths.
    pub fn write(&self, dir: &Path, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = dir.join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(&self.json)?;
        std::fs::write(&json, text + "\n")
            .with_context(|| format!("writing {}", json.display()))?;
        let svg = dir.join(format!("{name}.svg"));
        self.chart
            .write_svg(&svg)
            .with_context(|| format!("writing {}", svg.display()))?;
        Ok((json, svg))
    }
}

/// Runs one bench in `env`: on the simulated store in a paused current-thread runtime
/// of its own (on a blocking thread of the caller's runtime), else on the caller's.
pub async fn run(which: Which, env: &Env) -> anyhow::Result<Outcome> {
    let t0 = std::time::Instant::now();
    let e = env.clone();
    let mut outcome = if env.sim {
        tokio::task::spawn_blocking(move || -> anyhow::Result<Outcome> {
            env::paused_runtime()?.block_on(dispatch(which, e))
        })
        .await
        .context("bench thread")??
    } else {
        dispatch(which, e).await?
    };
    if let Value::Object(m) = &mut outcome.json {
        m.insert("bench".into(), json!(which.name()));
        m.insert("store".into(), env.describe());
        m.insert("quick".into(), json!(env.quick));
        m.insert(
            "wall_seconds".into(),
            json!(round(t0.elapsed().as_secs_f64(), 1)),
        );
        m.insert(
            "machine".into(),
            json!({ "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) }),
        );
    }
    Ok(outcome)
}

async fn dispatch(which: Which, env: Env) -> anyhow::Result<Outcome> {
    match which {
        Which::Producers => producers::producers(env).await,
        Which::Dac => producers::dac(env).await,
        Which::Consumers => consumers::run(env).await,
        Which::Lifecycle => lifecycle::run(env).await,
        Which::ExactlyOnce => exactly_once::run(env).await,
        Which::ManifestGrowth => growth::run(env).await,
        Which::Visibility => visibility::run(env).await,
    }
}

/// `x` rounded to `digits` decimals (for readable JSON).
pub(crate) fn round(x: f64, digits: i32) -> f64 {
    if !x.is_finite() {
        return 0.0;
    }
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// `a / b`, or 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// Human-readable size: `100KB`, `1MB`, `10MB`.
pub(crate) fn size_label(bytes: usize) -> String {
    if bytes >= 1_000_000 && bytes.is_multiple_of(1_000_000) {
        format!("{}MB", bytes / 1_000_000)
    } else if bytes >= 1000 && bytes.is_multiple_of(1000) {
        format!("{}KB", bytes / 1000)
    } else {
        format!("{bytes}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_round_and_label() {
        assert_eq!(round(1.23456, 2), 1.23);
        assert_eq!(round(f64::NAN, 2), 0.0);
        assert_eq!(ratio(1.0, 0.0), 0.0);
        assert_eq!(ratio(3.0, 2.0), 1.5);
        assert_eq!(size_label(100_000), "100KB");
        assert_eq!(size_label(10_000_000), "10MB");
        assert_eq!(size_label(1234), "1234B");
        let names: std::collections::HashSet<_> = Which::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names.len(), 7, "every experiment has its own name");
    }
}
