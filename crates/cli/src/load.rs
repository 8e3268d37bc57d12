//! `batchweave load`: many producers and ranks on one stream for minutes with
//! injected faults (the run is `batchweave_harness::load`); this prints its report
//! and verdict.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use batchweave_harness::load::{self, LoadConfig};

use crate::bars::Bars;
use crate::inspect::open_stream;

/// Options of `batchweave load`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LoadArgs {
    /// Stream URL (e.g. s3://bucket/prefix with AWS_ENDPOINT for a loopback server).
    #[arg(long)]
    store: String,
    /// Concurrent producers.
    #[arg(long, default_value_t = 32)]
    producers: u32,
    /// Ranks (DP = ranks / 2, CP = 2 when even).
    #[arg(long, default_value_t = 64)]
    ranks: u32,
    /// How long producers keep producing.
    #[arg(long, default_value_t = 180)]
    duration_secs: u64,
    /// Probability of an injected transient error per request (half before
    /// the request takes effect, half after: lost replies).
    #[arg(long, default_value_t = 0.01)]
    error_rate: f64,
    /// Bytes per (d, c) slice.
    #[arg(long, default_value_t = 2048)]
    slice_bytes: usize,
    /// Seed of the fault injection.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Poll interval of the visibility observer, in milliseconds (the resolution of
    /// the visibility latencies and the drain time).
    #[arg(long, default_value_t = 20)]
    observe_poll_ms: u64,
    /// The producers' commit policy: `coop`, `dac`, `naive`, `fixed:K`, `incr` or `aimd`
    /// (default: the library's).
    #[arg(long)]
    policy: Option<String>,
    /// Seconds between GC passes behind the ranks' checkpoints, as a deployment runs
    /// GC; 0 turns GC off (the manifest then keeps every step, `tgb/` every object).
    #[arg(long, default_value_t = 1.0)]
    gc_interval_secs: f64,
    /// Do not commit TGBs more than this many steps ahead of the ranks' last checkpoint
    /// (the producers' `max_lag`, above 10, the ranks' checkpoint interval; default
    /// unbounded). Bounds what the manifest retains and
    /// what `tgb/` holds, as a deployment would.
    #[arg(long)]
    max_lag: Option<u64>,
}

/// Runs `batchweave load`.
pub(crate) async fn run(a: LoadArgs) -> Result<()> {
    ensure!(
        a.producers >= 1 && a.ranks >= 1,
        "need at least one producer and one rank"
    );
    ensure!(
        (0.0..0.5).contains(&a.error_rate),
        "--error-rate must be in [0, 0.5)"
    );
    let policy: batchweave::PolicyKind = match &a.policy {
        None => batchweave::PolicyKind::default(),
        Some(p) => p.parse().with_context(|| format!("--policy {p:?}"))?,
    };
    let cfg = LoadConfig {
        policy,
        producers: a.producers,
        ranks: a.ranks,
        duration: Duration::from_secs(a.duration_secs),
        error_rate: a.error_rate,
        slice_bytes: a.slice_bytes,
        seed: a.seed,
        observe_poll: Duration::from_millis(a.observe_poll_ms.max(1)),
        gc_interval: (a.gc_interval_secs > 0.0)
            .then(|| Duration::try_from_secs_f64(a.gc_interval_secs))
            .transpose()
            .context("--gc-interval-secs")?,
        max_lag: a.max_lag,
    };
    let stream = open_stream(&a.store).await?;
    let (dp, cp) = cfg.grid();
    println!(
        "load: {} producers ({policy}), {} ranks (DP={dp} x CP={cp}), {} s, error rate {}, gc {}, max_lag {}, store {}",
        a.producers,
        a.ranks,
        a.duration_secs,
        a.error_rate,
        cfg.gc_interval
            .map_or_else(|| "off".to_owned(), |d| format!("every {:?}", d)),
        cfg.max_lag
            .map_or_else(|| "unbounded".to_owned(), |l| l.to_string()),
        a.store
    );
    let bars = Bars::new("{prefix:>8} [{bar:40}] {pos}/{len} s {msg}", true);
    let r = load::run(&stream, &cfg, bars.as_ref()).await?;
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    let (attempts, successes) = (r.sum(|s| s.attempts), r.sum(|s| s.successes));
    println!(
        "load: {:.0} s, {} TGBs committed by {} producers ({:.1} TGB/s), {} rank-steps verified",
        secs,
        r.committed(),
        a.producers,
        r.committed() as f64 / secs,
        r.rank_steps
    );
    println!(
        "  commits {successes} of {attempts} attempts ({:.1} %), TGBs published for other producers {}, conflicts {}, ambiguous {}, lost replies recovered {}, ghost commits prevented {}, full-buffer reads {}, offer listings {} (reused {}), epoch claims recorded by others {} of {}",
        100.0 * successes as f64 / attempts.max(1) as f64,
        r.sum(|s| s.tgbs_published_for_others),
        r.sum(|s| s.conflicts),
        r.sum(|s| s.ambiguous),
        r.sum(|s| s.lost_replies_recovered),
        r.sum(|s| s.ghost_commits_prevented),
        r.sum(|s| s.full_buffer_reads),
        r.sum(|s| s.offer_listings),
        r.sum(|s| s.offer_listings_reused),
        r.sum(|s| s.claims_recorded_by_others),
        r.sum(|s| s.claim_objects)
    );
    if let (Some(first), Some(last)) = (r.opened.first(), r.opened.last()) {
        println!(
            "  producers open (catch-up + epoch claim, all started at once): first {:.2} s, p50 {:.2} s, last {:.2} s",
            first.as_secs_f64(),
            r.opened[r.opened.len() / 2].as_secs_f64(),
            last.as_secs_f64()
        );
    }
    println!(
        "  faults injected: {} before, {} after (lost replies); consumer stalls {}; worst p95 fetch {:?}",
        r.faults.before, r.faults.after, r.stalls, r.worst_p95_fetch
    );
    let v = &r.visibility;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "  visibility (append returned -> listed in a manifest; observer polls every {} ms, so each figure is late by up to that plus one manifest read): p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms over {} TGBs",
        v.poll.as_millis(),
        ms(v.p50),
        ms(v.p95),
        ms(v.max),
        v.samples
    );
    println!(
        "  drain (last append returned -> last TGB visible): {}; never visible {}, trimmed before observed {}, observer poll errors {}",
        v.drain()
            .map_or_else(|| "n/a".to_owned(), |d| format!("{:.1} ms", ms(d))),
        v.pending,
        v.unobserved,
        v.poll_errors
    );
    let mb = r.sum(|s| s.bytes_committed) as f64 / 1e6;
    println!(
        "  CPU {} (user+sys, whole process: producers and ranks) for {mb:.1} MB committed: {}",
        r.cpu
            .map_or_else(|| "n/a".to_owned(), |c| format!("{:.2} s", c.as_secs_f64())),
        r.cpu_seconds_per_committed_mb().map_or_else(
            || "n/a".to_owned(),
            |c| format!("{c:.3} CPU-s per committed MB")
        )
    );
    println!(
        "  peak RSS {} MiB; {} lost, {} duplicated, {} reordered",
        r.peak_rss_kib / 1024,
        r.lost,
        r.duplicated,
        r.reordered
    );
    if !r.passed() {
        for p in &r.problems {
            println!("  - {p}");
        }
        bail!("load run failed verification");
    }
    println!("VERDICT: PASS");
    Ok(())
}
