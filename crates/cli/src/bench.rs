//! `batchweave bench`: the paper's section 7 experiments as side-by-side ratios
//! (the runs are `batchweave_harness::bench`); this prints their tables and writes
//! `<out>/<bench>.json` and `<out>/<bench>.svg`.

use std::path::PathBuf;

use anyhow::bail;
use batchweave_harness::bench::{self, Env, SIM_AVAILABLE};
use serde_json::Value;

use crate::bars::Bars;

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
    /// Visibility latency (append returned -> listed) vs producers, per commit policy.
    Visibility,
    /// All of the above, in this order.
    All,
    /// BatchWeave next to a Kafka-protocol broker and NATS JetStream on loopback (not in
    /// `all`; needs the feature `peers` and the brokers: `cargo xtask peers`).
    Peers,
}

impl Which {
    fn expand(self) -> Vec<bench::Which> {
        use bench::Which as W;
        match self {
            Self::Producers => vec![W::Producers],
            Self::Dac => vec![W::Dac],
            Self::Consumers => vec![W::Consumers],
            Self::Lifecycle => vec![W::Lifecycle],
            Self::ExactlyOnce => vec![W::ExactlyOnce],
            Self::ManifestGrowth => vec![W::ManifestGrowth],
            Self::Visibility => vec![W::Visibility],
            Self::All => W::ALL.to_vec(),
            Self::Peers => Vec::new(),
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
    /// Simulated store in virtual time (same as `--store sim://`; needs a build with
    /// the feature `sim`).
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
    /// Commit policies `bench visibility` compares, comma-separated (default:
    /// dac,coop); a name that does not parse is skipped with a note.
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// `bench peers`: a Kafka-protocol broker's loopback `host:port`.
    #[arg(long, env = "BATCHWEAVE_PEER_KAFKA")]
    kafka: Option<String>,
    /// `bench peers`: what the Kafka-protocol broker stores to (reported, not used).
    #[arg(long, env = "BATCHWEAVE_PEER_KAFKA_STORAGE", default_value = "unknown")]
    kafka_storage: String,
    /// `bench peers`: a NATS server's (JetStream enabled) loopback `host:port`.
    #[arg(long, env = "BATCHWEAVE_PEER_NATS")]
    nats: Option<String>,
    /// `bench peers`: what the NATS server stores to (reported, not used).
    #[arg(long, env = "BATCHWEAVE_PEER_NATS_STORAGE", default_value = "unknown")]
    nats_storage: String,
    /// `bench peers`: the measured window of each ingestion arm, in seconds.
    #[arg(long, default_value_t = 15)]
    window_secs: u64,
}

/// Why `--sim` is refused by a binary built without the feature.
const NO_SIM: &str = "`bench --sim` runs the simulated store in paused (virtual) tokio time, \
     which the default `batchweave` binary leaves out; build it with the feature `sim`: \
     `cargo run --release -p batchweave-cli --features sim -- bench ...` \
     (or `cargo xtask bench`)";

/// Why `bench peers` is refused by a binary built without the feature.
#[cfg(not(feature = "peers"))]
const NO_PEERS: &str = "`bench peers` needs the brokers' clients, which the default `batchweave` \
     binary leaves out; `cargo xtask peers` installs and starts the brokers on loopback and \
     runs it (or build with `cargo build --release -p batchweave-cli --features peers`)";

#[cfg(feature = "peers")]
async fn peers(args: &BenchArgs, env: &Env) -> anyhow::Result<(Value, Vec<String>)> {
    let peers = bench::peers::Peers {
        kafka: args.kafka.clone(),
        kafka_storage: args.kafka_storage.clone(),
        nats: args.nats.clone(),
        nats_storage: args.nats_storage.clone(),
        window: std::time::Duration::from_secs(args.window_secs.max(1)),
    };
    if peers.kafka.is_none() && peers.nats.is_none() {
        bail!("bench peers: give --kafka HOST:PORT and/or --nats HOST:PORT (loopback addresses)");
    }
    let t0 = std::time::Instant::now();
    let mut outcome = bench::peers::run(env, &peers).await?;
    if let Value::Object(m) = &mut outcome.json {
        m.insert("bench".into(), "peers".into());
        m.insert("store".into(), env.describe());
        m.insert("quick".into(), args.quick.into());
        m.insert(
            "wall_seconds".into(),
            (t0.elapsed().as_secs_f64().round()).into(),
        );
    }
    let (json, svg) = outcome.write(&args.out, "peers")?;
    let mut lines = vec![format!("== bench peers ({})", env.label())];
    lines.extend(outcome.table);
    lines.push(format!("   wrote {} and {}", json.display(), svg.display()));
    Ok((outcome.json, lines))
}

#[cfg(not(feature = "peers"))]
async fn peers(_args: &BenchArgs, _env: &Env) -> anyhow::Result<(Value, Vec<String>)> {
    bail!(NO_PEERS)
}

/// Runs `batchweave bench`.
pub(crate) async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let sim = args.sim || args.store.as_deref().is_some_and(|s| s.starts_with("sim:"));
    if sim && !SIM_AVAILABLE {
        bail!(NO_SIM);
    }
    let store = if sim { None } else { args.store.clone() };
    let mut env = Env::new(sim, args.quick, store, args.seed)?.with_progress(Bars::new(
        "{prefix:>16} [{bar:30}] {pos}/{len} {elapsed_precise} {msg}",
        true,
    ));
    if !args.policies.is_empty() {
        env = env.with_policies(args.policies.clone());
    }
    let mut all = serde_json::Map::new();
    if args.which == Which::Peers {
        if sim {
            bail!(
                "bench peers runs against real brokers and a real store: pass --store, not --sim"
            );
        }
        let (json, lines) = peers(&args, &env).await?;
        for l in lines {
            if args.json {
                eprintln!("{l}");
            } else {
                println!("{l}");
            }
        }
        if args.json {
            println!("{}", serde_json::to_string(&json)?);
        }
        return Ok(());
    }
    for which in args.which.expand() {
        let name = which.name();
        let outcome = bench::run(which, &env).await?;
        let (json, svg) = outcome.write(&args.out, name)?;
        let mut lines = vec![format!("== bench {name} ({})", env.label())];
        lines.extend(outcome.table);
        lines.push(format!("   wrote {} and {}", json.display(), svg.display()));
        for l in lines {
            if args.json {
                eprintln!("{l}");
            } else {
                println!("{l}");
            }
        }
        all.insert(name.to_owned(), outcome.json);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_expands_to_every_experiment() {
        assert_eq!(Which::All.expand(), bench::Which::ALL.to_vec());
        assert_eq!(Which::Lifecycle.expand(), vec![bench::Which::Lifecycle]);
    }
}
