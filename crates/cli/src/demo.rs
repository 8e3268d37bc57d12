//! `batchweave demo`: the whole data plane on a local directory, verified (the run is
//! `batchweave_harness::demo`); this prints its results and verdict and fails loudly
//! if anything is off.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use batchweave_harness::demo::{self, DemoConfig, DemoReport};

use crate::bars::Bars;

/// Options of `batchweave demo` (defaults sized for a laptop).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DemoArgs {
    /// Stream directory (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Preprocessing workers.
    #[arg(long, default_value_t = 4)]
    producers: u32,
    /// Training ranks (DP x CP = ranks, CP = 2 when the rank count is even).
    #[arg(long, default_value_t = 8)]
    ranks: u32,
    /// Global steps (TGBs) in the stream.
    #[arg(long, default_value_t = 240)]
    steps: u64,
    /// Bytes per (d, c) slice, in KiB.
    #[arg(long, default_value_t = 128)]
    slice_kib: usize,
    /// Checkpoint (and write watermarks) every K steps.
    #[arg(long, default_value_t = 10)]
    checkpoint_every: u64,
    /// Producers stay at most this many steps ahead of the low-water mark.
    #[arg(long, default_value_t = 80)]
    max_lag: u64,
    /// Seed of the producers' jitter and incarnation nonces.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Flip one byte of one TGB's payload after it is checksummed, to show
    /// that corruption is caught (the demo must then fail).
    #[arg(long, hide = true)]
    inject_corruption: bool,
}

/// Runs `batchweave demo`.
pub(crate) async fn run(args: DemoArgs) -> Result<()> {
    let cfg = DemoConfig {
        producers: args.producers,
        ranks: args.ranks,
        steps: args.steps,
        slice_kib: args.slice_kib,
        checkpoint_every: args.checkpoint_every,
        max_lag: args.max_lag,
        seed: args.seed,
        inject_corruption: args.inject_corruption,
    };
    let tmp;
    let dir = match args.dir {
        Some(d) => d,
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let (dp, cp) = cfg.grid();
    println!(
        "BatchWeave demo: {} producers, {} ranks (DP={dp} x CP={cp}), {} steps of {} KiB TGBs, checkpoint every {}, max_lag {}\n  stream: {}",
        cfg.producers,
        cfg.ranks,
        cfg.steps,
        cfg.tgb_kib(),
        cfg.checkpoint_every,
        cfg.max_lag,
        dir.display()
    );
    let bars = Bars::new("{prefix:>9} [{bar:40}] {pos:>6}/{len:6} {msg}", false);
    let report = demo::run(&dir, &cfg, bars.as_ref()).await?;
    if let Some(why) = &report.failure {
        println!("\nVERDICT: FAIL\n  {why}");
        bail!("the demo failed verification: {why}");
    }
    print_results(&cfg, &report);
    if report.passed() {
        println!(
            "\nVERDICT: PASS  all {} ranks saw the same {} steps; every TGB exactly once; every byte verified",
            cfg.ranks, cfg.steps
        );
        Ok(())
    } else {
        println!("\nVERDICT: FAIL");
        for p in &report.problems {
            println!("  - {p}");
        }
        bail!("{} verification problem(s)", report.problems.len())
    }
}

fn print_results(cfg: &DemoConfig, r: &DemoReport) {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let mib = |b: u64| b as f64 / 1048576.0;
    println!("\nResults ({:.1} s)", secs);
    println!("  steps/s            {:>10.1}", cfg.steps as f64 / secs);
    println!(
        "  ingested           {:>10.1} MiB/s ({:.1} MiB committed)",
        mib(r.ingested_bytes) / secs,
        mib(r.ingested_bytes)
    );
    println!(
        "  read (all ranks)   {:>10.1} MiB/s ({:.1} MiB delivered, every byte verified)",
        mib(r.delivered_bytes) / secs,
        mib(r.delivered_bytes)
    );
    println!(
        "  commit success     {:>10.1} % ({} of {} attempts)",
        100.0 * r.successes as f64 / r.attempts.max(1) as f64,
        r.successes,
        r.attempts
    );
    println!(
        "  read amplification {:>10.3} x (TGB bytes fetched / bytes delivered)",
        r.fetched_bytes as f64 / r.delivered_bytes.max(1) as f64
    );
    println!(
        "  reclaimed          {:>10.1} MiB; peak retained {:.1} MiB; TGB objects stored now {:.1} MiB",
        mib(r.freed_bytes),
        mib(r.peak_retained_bytes),
        mib(r.stored_tgb_bytes)
    );
    match r.producer_restart {
        Some((killed, resumed)) => println!(
            "  producer restart   prep-0 killed after offset {killed} and resumed from its committed offset {resumed}"
        ),
        None => println!("  producer restart   none (the run stopped before it)"),
    }
    println!(
        "  rank restore       {} rank restored from its checkpoint and replayed exactly",
        r.ranks_restored
    );
}
