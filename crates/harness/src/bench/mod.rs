//! `batchweave bench`: the paper's section 7 experiments as side-by-side ratios.
//!
//! Every bench measures its baseline in the same run on the same store, prints a
//! short table, writes `<out>/<bench>.json` and `<out>/<bench>.svg`, and with
//! `--json` prints one JSON object to stdout. With `--sim` (or `--store sim://`)
//! the store is an in-memory backend behind a latency model (first-byte
//! latency, per-connection bandwidth, jitter, S3's per-prefix request rates)
//! on a paused current-thread tokio runtime: every wait is virtual, so
//! hundreds of producers and ranks fit on two cores, and throughputs are
//! virtual bytes per virtual second.
//!
//! | bench | paper | headline JSON fields |
//! |---|---|---|
//! | `producers` | figure 6 | `ratio_ingest_vs_raw_put`, `ratio_dac_vs_best_baseline` per point |
//! | `dac` | figure 7 | `dac_commit_success`, `ratio_dac_vs_best_baseline`, `dac_drift` |
//! | `consumers` | section 7.4 | `read_amplification` per point |
//! | `lifecycle` | figure 9 | `reduction`, `bound_held` |
//! | `exactly-once` | figure 8 | `overhead` |
//! | `manifest-growth` | section 5.2 | `ratio_tau_100k_vs_1k` |

mod consumers;
mod env;
mod exactly_once;
mod growth;
mod ingest;
mod lifecycle;
mod plot;
mod producers;

use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

pub(crate) use env::Env;
use plot::Chart;

/// Which experiment to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Which {
    /// Producers x payload sweep: ingestion per commit policy vs raw PUT.
    Producers,
    /// Figure 7: 32 producers, throughput and commit success over time per policy.
    Dac,
    /// World size x slice size: range reads vs dense reads vs raw GET.
    Consumers,
    /// Figure 9: stored bytes over time with and without GC.
    Lifecycle,
    /// Figure 8: commit latency with the producer-state map vs a same-size dummy.
    ExactlyOnce,
    /// Fragile window at version 1k vs 100k, trimming on and off.
    ManifestGrowth,
    /// All of the above, in this order.
    All,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Self::Producers => "producers",
            Self::Dac => "dac",
            Self::Consumers => "consumers",
            Self::Lifecycle => "lifecycle",
            Self::ExactlyOnce => "exactly-once",
            Self::ManifestGrowth => "manifest-growth",
            Self::All => "all",
        }
    }

    fn expand(self) -> Vec<Which> {
        match self {
            Self::All => vec![
                Self::Producers,
                Self::Dac,
                Self::Consumers,
                Self::Lifecycle,
                Self::ExactlyOnce,
                Self::ManifestGrowth,
            ],
            w => vec![w],
        }
    }
}

/// Arguments of `batchweave bench`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchArgs {
    /// The experiment.
    #[arg(value_enum)]
    which: Which,
    /// Store URL (a directory, `file:///dir`, `s3://...`, or `sim://` for the
    /// simulated store); default: a fresh temporary directory.
    #[arg(long)]
    store: Option<String>,
    /// Simulated store in virtual time (same as `--store sim://`).
    #[arg(long)]
    sim: bool,
    /// Small sweeps and short windows (a smoke test of a few minutes in total).
    #[arg(long)]
    quick: bool,
    /// Print one JSON object with all results to stdout (tables go to stderr).
    #[arg(long)]
    json: bool,
    /// Directory for `<bench>.json` and `<bench>.svg`.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
    /// Root seed of the simulation (latency jitter, producer jitter).
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// What one bench produced.
pub(crate) struct Outcome {
    /// The result object (also written to `<out>/<bench>.json`).
    pub(crate) json: Value,
    /// Table lines for the terminal.
    pub(crate) table: Vec<String>,
    /// The plot.
    pub(crate) chart: Chart,
}

/// A progress bar over `len` units of work, drawn on stderr.
pub(crate) fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_owned());
    bar
}

/// Runs `batchweave bench`.
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let sim = args.sim || args.store.as_deref().is_some_and(|s| s.starts_with("sim:"));
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let env = Env::new(sim, args.quick, args.store.clone(), args.seed)?;
    let mut all = serde_json::Map::new();
    for which in args.which.expand() {
        let name = which.name();
        let e = env.clone();
        let t0 = std::time::Instant::now();
        let outcome = if sim {
            tokio::task::spawn_blocking(move || -> anyhow::Result<Outcome> {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .start_paused(true)
                    .build()?;
                rt.block_on(dispatch(which, e))
            })
            .await
            .context("bench thread")??
        } else {
            dispatch(which, e).await?
        };
        let mut json = outcome.json;
        if let Value::Object(m) = &mut json {
            m.insert("bench".into(), json!(name));
            m.insert("store".into(), env.describe());
            m.insert("quick".into(), json!(args.quick));
            m.insert(
                "wall_seconds".into(),
                json!(round(t0.elapsed().as_secs_f64(), 1)),
            );
            m.insert(
                "machine".into(),
                json!({ "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) }),
            );
        }
        let text = serde_json::to_string_pretty(&json)?;
        let jpath = args.out.join(format!("{name}.json"));
        std::fs::write(&jpath, text + "\n")
            .with_context(|| format!("writing {}", jpath.display()))?;
        let spath = args.out.join(format!("{name}.svg"));
        outcome
            .chart
            .write_svg(&spath)
            .with_context(|| format!("writing {}", spath.display()))?;
        let mut lines = vec![format!("== bench {name} ({})", env.label())];
        lines.extend(outcome.table);
        lines.push(format!(
            "   wrote {} and {}",
            jpath.display(),
            spath.display()
        ));
        for l in lines {
            if args.json {
                eprintln!("{l}");
            } else {
                println!("{l}");
            }
        }
        all.insert(name.to_owned(), json);
    }
    if args.json {
        let v = if all.len() == 1 {
            all.into_iter()
                .next()
                .map(|(_, v)| v)
                .unwrap_or(Value::Null)
        } else {
            Value::Object(all)
        };
        println!("{}", serde_json::to_string(&v)?);
    }
    Ok(())
}

async fn dispatch(which: Which, env: Env) -> anyhow::Result<Outcome> {
    match which {
        Which::Producers => producers::producers(env).await,
        Which::Dac => producers::dac(env).await,
        Which::Consumers => consumers::run(env).await,
        Which::Lifecycle => lifecycle::run(env).await,
        Which::ExactlyOnce => exactly_once::run(env).await,
        Which::ManifestGrowth => growth::run(env).await,
        Which::All => anyhow::bail!("`all` is expanded before dispatch"),
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
        assert_eq!(
            Which::All.expand().len(),
            6,
            "all expands to every experiment"
        );
    }
}
