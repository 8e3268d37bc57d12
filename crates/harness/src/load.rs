//! The load run (`batchweave load`): many producers and ranks on one stream for
//! minutes, with seeded fault injection on every request, then a verdict: nothing
//! lost, duplicated or reordered, every byte verified; and a report of memory, CPU,
//! commits, conflicts, stalls, visibility latency (append returned -> listed in a
//! manifest, measured by a [`Observer`]) and drain time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use batchweave::store::{FaultRule, FaultStats, FaultStore};
use batchweave::{
    GcSettings, MeshConfig, PolicyKind, ProducerSettings, ProducerStats, RankConfig, Stream,
};
use tokio::task::JoinSet;

use crate::progress::Progress;
use crate::visibility::{Observer, Recorder, VisibilityReport};
use crate::{payload, rusage};

/// The shape of a load run (the defaults are `batchweave load`'s).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Concurrent producers.
    pub producers: u32,
    /// Ranks (DP = ranks / 2, CP = 2 when even).
    pub ranks: u32,
    /// How long producers keep producing.
    pub duration: Duration,
    /// Probability of an injected transient error per request (half before the
    /// request takes effect, half after: lost replies), in `[0, 0.5)`.
    pub error_rate: f64,
    /// Bytes per (d, c) slice.
    pub slice_bytes: usize,
    /// Seed of the fault injection and the producers' jitter.
    pub seed: u64,
    /// Poll interval of the visibility observer (the resolution of its latencies).
    pub observe_poll: Duration,
    /// The producers' commit policy.
    pub policy: PolicyKind,
    /// A reclaimer runs a pass this often behind the ranks' checkpoints, as a deployment
    /// runs GC (`None`: nothing is reclaimed, the manifest keeps every step and `tgb/`
    /// every object of the run).
    pub gc_interval: Option<Duration>,
    /// The producers' `max_lag` (`None`: unbounded): commits wait while they would be more
    /// than this many steps ahead of the ranks' last checkpoint, which bounds what the
    /// manifest retains and what `tgb/` holds, as a deployment bounds them. Needs
    /// `gc_interval` (GC writes the boundary the producers wait on).
    pub max_lag: Option<u64>,
}

/// Steps between two checkpoints of a load run's ranks.
pub const CHECKPOINT_EVERY: u64 = 10;

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            producers: 32,
            ranks: 64,
            duration: Duration::from_secs(180),
            error_rate: 0.01,
            slice_bytes: 2048,
            seed: 1,
            observe_poll: Duration::from_millis(20),
            policy: PolicyKind::default(),
            gc_interval: Some(Duration::from_secs(1)),
            max_lag: None,
        }
    }
}

impl LoadConfig {
    /// The TGB grid `(dp, cp)`: `(ranks / 2, 2)` for an even rank count, else `(ranks, 1)`.
    pub fn grid(&self) -> (u32, u32) {
        if self.ranks.is_multiple_of(2) {
            (self.ranks / 2, 2)
        } else {
            (self.ranks, 1)
        }
    }
}

/// What a load run measured and found.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// Every producer's statistics at close.
    pub producers: Vec<ProducerStats>,
    /// How long each producer's open took (catch-up and epoch claim), from the start of
    /// the run: all producers open at once, so the last of these is when the pool was
    /// complete. Each claim is its own create, so at many producers it grows with N.
    pub opened: Vec<Duration>,
    /// Rank-steps consumed (each verified).
    pub rank_steps: u64,
    /// The faults injected.
    pub faults: FaultStats,
    /// Consumer stalls summed over ranks.
    pub stalls: u64,
    /// The worst rank's p95 fetch latency.
    pub worst_p95_fetch: Duration,
    /// Peak resident memory of this process, KiB (0 where unknown).
    pub peak_rss_kib: u64,
    /// CPU time (user + system) of the whole process during the run, producers and
    /// ranks together (`None` where getrusage is unavailable).
    pub cpu: Option<Duration>,
    /// Visibility latency of every appended TGB, from an observer polling the chain
    /// every [`LoadConfig::observe_poll`] on its own handle of the store (no faults
    /// injected), stopped once every producer has closed; its
    /// [`drain`](VisibilityReport::drain) is the time from the last append's return
    /// to the last TGB's visibility.
    pub visibility: VisibilityReport,
    /// Committed TGBs that rank 0 never saw.
    pub lost: usize,
    /// TGBs rank 0 saw more than once.
    pub duplicated: usize,
    /// TGBs rank 0 saw out of their producer's sequence order.
    pub reordered: usize,
    /// Ranks whose sequence of TGBs differs from rank 0's.
    pub problems: Vec<String>,
}

impl LoadReport {
    /// Nothing lost, duplicated or reordered, and every rank saw rank 0's sequence.
    pub fn passed(&self) -> bool {
        self.problems.is_empty() && self.lost + self.duplicated + self.reordered == 0
    }

    /// TGBs committed by all producers.
    pub fn committed(&self) -> u64 {
        self.sum(|s| s.tgbs_committed)
    }

    /// The sum of one statistic over the producers.
    pub fn sum(&self, f: impl Fn(&ProducerStats) -> u64) -> u64 {
        self.producers.iter().map(f).sum()
    }

    /// Process CPU seconds per committed MB (10^6 bytes of TGB objects).
    pub fn cpu_seconds_per_committed_mb(&self) -> Option<f64> {
        let mb = self.sum(|s| s.bytes_committed) as f64 / 1e6;
        self.cpu.filter(|_| mb > 0.0).map(|c| c.as_secs_f64() / mb)
    }
}

/// A rank's number, the TGBs it saw in order, and its statistics.
type RankResult = (u32, Vec<(String, u64)>, batchweave::ConsumerStats);

/// Peak resident memory of this process in KiB (`VmHWM`; 0 where unknown).
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Runs the load on `base` (a fresh stream): every request goes through a fault
/// injector; producers produce for `duration`, ranks read until the end and verify
/// every byte. `Err` if a producer or rank fails; the verdict is
/// [`LoadReport::passed`].
pub async fn run(base: &Stream, a: &LoadConfig, progress: &dyn Progress) -> Result<LoadReport> {
    ensure!(
        a.producers >= 1 && a.ranks >= 1,
        "need at least one producer and one rank"
    );
    ensure!(
        (0.0..0.5).contains(&a.error_rate),
        "--error-rate must be in [0, 0.5)"
    );
    ensure!(
        a.max_lag.is_none() || a.gc_interval.is_some(),
        "--max-lag needs GC (--gc-interval-secs above 0): producers wait for the boundary GC writes"
    );
    ensure!(
        a.max_lag.is_none_or(|l| l > CHECKPOINT_EVERY),
        "--max-lag must be above {CHECKPOINT_EVERY}, the ranks' checkpoint interval: the ranks could never checkpoint past the producers' limit"
    );
    let clock = base.store().clock().clone();
    let fault = Arc::new(FaultStore::new(
        base.store().backend().clone(),
        vec![FaultRule {
            error_before: a.error_rate / 2.0,
            error_after: a.error_rate / 2.0,
            ..Default::default()
        }],
        a.seed,
        clock.clone(),
    ));
    let f2 = fault.clone();
    let stream = Stream::from_store(base.store().map_backend(move |_| f2));
    let stop_producing = Arc::new(AtomicBool::new(false));
    let final_total = Arc::new(AtomicU64::new(u64::MAX));
    let consumed = Arc::new(AtomicU64::new(0));
    let usage0 = rusage::now();
    // The observer reads the base store: no faults on its reads, and not counted in the
    // fault injector's statistics.
    let observer = Observer::start(base.store(), a.observe_poll).await?;
    let t0 = Instant::now();

    let mut producers: JoinSet<Result<(ProducerStats, Duration)>> = JoinSet::new();
    for i in 0..a.producers {
        producers.spawn(producer(
            stream.clone(),
            a.clone(),
            i,
            stop_producing.clone(),
            observer.recorder(),
        ));
    }
    // GC on the faulty store, like everything the job runs; its passes retry on the next
    // interval. It trims behind the ranks' checkpoints (group `load`), so what the
    // manifest retains and what `tgb/` holds stay bounded by the ranks' lag.
    let gc = a
        .gc_interval
        .map(|every| stream.reclaimer(GcSettings::default()).spawn(every));
    let mut ranks: JoinSet<Result<RankResult>> = JoinSet::new();
    for r in 0..a.ranks {
        ranks.spawn(rank(
            stream.clone(),
            a.clone(),
            r,
            final_total.clone(),
            consumed.clone(),
        ));
    }
    let secs = a.duration.as_secs();
    let bar = progress.meter("load", secs);
    while t0.elapsed() < a.duration && !producers.is_empty() {
        clock.sleep(Duration::from_millis(500)).await;
        bar.set_position(t0.elapsed().as_secs().min(secs));
        bar.set_message(format!(
            "{} rank-steps, rss {} MiB",
            consumed.load(Ordering::Relaxed),
            peak_rss_kib() / 1024
        ));
        if producers.len() < a.producers as usize {
            break; // a producer stopped early: it failed
        }
    }
    stop_producing.store(true, Ordering::Relaxed);
    let mut pstats = Vec::new();
    let mut opened = Vec::new();
    while let Some(r) = producers.join_next().await {
        let (stats, open) = r.context("producer task panicked")??;
        pstats.push(stats);
        opened.push(open);
    }
    opened.sort();
    // Every producer closed (flushed): all it appended is visible.
    let vis = observer.finish().await?;
    let total: u64 = pstats.iter().map(|s| s.tgbs_committed).sum();
    final_total.store(total, Ordering::Relaxed);
    let mut logs: BTreeMap<u32, Vec<(String, u64)>> = BTreeMap::new();
    let mut cstats = Vec::new();
    while let Some(r) = ranks.join_next().await {
        let (rank, seen, st) = r.context("rank task panicked")??;
        logs.insert(rank, seen);
        cstats.push(st);
    }
    bar.finish();
    if let Some(gc) = gc {
        gc.stop();
    }
    let committed = pstats.iter().map(|s| s.last_sequence).sum::<u64>();
    let (lost, duplicated, reordered, problems) = verdict(&logs, committed);
    Ok(LoadReport {
        elapsed: t0.elapsed(),
        rank_steps: consumed.load(Ordering::Relaxed),
        faults: fault.stats(),
        stalls: cstats.iter().map(|s| s.stalls).sum(),
        worst_p95_fetch: cstats
            .iter()
            .map(|s| s.fetch_latency.p95)
            .max()
            .unwrap_or_default(),
        peak_rss_kib: peak_rss_kib(),
        cpu: rusage::now()
            .zip(usage0)
            .map(|(now, then)| now.cpu_since(&then)),
        visibility: vis,
        producers: pstats,
        opened,
        lost,
        duplicated,
        reordered,
        problems,
    })
}

/// Producer `i` (`load-{i}`): appends TGBs of the synthetic payload, one per source
/// offset, until `stop`, recording when each append returned, then closes (which
/// flushes). Returns its statistics and how long its open took.
async fn producer(
    stream: Stream,
    a: LoadConfig,
    i: u32,
    stop: Arc<AtomicBool>,
    rec: Recorder,
) -> Result<(ProducerStats, Duration)> {
    let t0 = Instant::now();
    let clock = stream.store().clock().clone();
    let (dp, cp) = a.grid();
    let id = format!("load-{i}");
    let settings = ProducerSettings {
        policy: a.policy,
        max_lag: a.max_lag,
        seed: Some(a.seed ^ u64::from(i)),
        ..Default::default()
    };
    let mut p = stream
        .producer(id.clone())
        .settings(settings)
        .open()
        .await?;
    let open = t0.elapsed();
    let mut seq = p.committed_offset();
    while !stop.load(Ordering::Relaxed) {
        seq += 1;
        let receipt = p
            .append(
                dp,
                cp,
                payload::tgb_slices(&id, seq, dp, cp, a.slice_bytes),
                seq,
            )
            .await?;
        rec.record_upload(receipt.key, clock.now());
    }
    Ok((p.close().await?, open))
}

/// Rank `r` of group `load`: reads every step until `total` (known once the producers
/// stopped), verifies every byte, checkpoints every [`CHECKPOINT_EVERY`] steps; returns what it saw.
async fn rank(
    stream: Stream,
    a: LoadConfig,
    r: u32,
    total: Arc<AtomicU64>,
    consumed: Arc<AtomicU64>,
) -> Result<RankResult> {
    let (dp, cp) = a.grid();
    let mesh = MeshConfig::new(a.ranks, dp, cp, 1, 1);
    let mut c = stream
        .consumer(RankConfig::new(r, mesh, "load"))
        .open()
        .await?;
    let mut seen = Vec::new();
    let mut step = 0u64;
    while step < total.load(Ordering::Relaxed) {
        let b = match tokio::time::timeout(Duration::from_secs(2), c.next()).await {
            Ok(b) => b.with_context(|| format!("rank {r} step {step}"))?,
            Err(_) => continue, // re-check whether the end is known
        };
        for (src, data) in b.sources.iter().zip(&b.data) {
            payload::verify_read(src, a.slice_bytes, data)
                .map_err(|e| anyhow::anyhow!("rank {r} step {step}: {e}"))?;
            seen.push((src.producer_id.clone(), src.sequence));
        }
        step += 1;
        consumed.fetch_add(1, Ordering::Relaxed);
        if step.is_multiple_of(CHECKPOINT_EVERY) {
            let st = c.state();
            c.checkpoint_committed(&st).await?;
        }
    }
    Ok((r, seen, c.stats()))
}

/// The verdict on the ranks' logs, rank 0's as the reference, given how many TGBs the
/// producers committed: (lost, duplicated, reordered, ranks that saw another sequence).
fn verdict(
    logs: &BTreeMap<u32, Vec<(String, u64)>>,
    committed: u64,
) -> (usize, usize, usize, Vec<String>) {
    let reference = logs.get(&0).cloned().unwrap_or_default();
    let mut problems = Vec::new();
    for (r, l) in logs {
        if l != &reference {
            problems.push(format!("rank {r} saw a different sequence"));
        }
    }
    let unique: BTreeSet<&(String, u64)> = reference.iter().collect();
    let duplicated = reference.len() - unique.len();
    let mut last: BTreeMap<&str, u64> = BTreeMap::new();
    let mut reordered = 0;
    for (p, q) in &reference {
        let l = last.entry(p.as_str()).or_insert(0);
        if *q <= *l {
            reordered += 1;
        }
        *l = *q;
    }
    let lost = (committed as usize).saturating_sub(unique.len());
    (lost, duplicated, reordered, problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    #[tokio::test]
    async fn max_lag_misconfigurations_are_refused_with_what_to_fix() {
        let stream = Stream::open("memory:///").await.unwrap();
        for (max_lag, gc_interval, fix) in [
            (20, None, "--gc-interval-secs"),
            (
                CHECKPOINT_EVERY,
                Some(Duration::from_secs(1)),
                "checkpoint interval",
            ),
        ] {
            let cfg = LoadConfig {
                max_lag: Some(max_lag),
                gc_interval,
                ..LoadConfig::default()
            };
            let Err(e) = run(&stream, &cfg, &NoProgress).await else {
                panic!("max_lag {max_lag}, gc {gc_interval:?} was accepted");
            };
            assert!(e.to_string().contains(fix), "{e}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_short_load_with_faults_loses_nothing() {
        for (policy, max_lag) in [("coop", None), ("dac", None), ("coop", Some(20))] {
            let stream = Stream::open("memory:///").await.unwrap();
            let cfg = LoadConfig {
                producers: 3,
                ranks: 4,
                duration: Duration::from_secs(2),
                error_rate: 0.05,
                slice_bytes: 64,
                seed: 3,
                observe_poll: Duration::from_millis(20),
                policy: policy.parse().unwrap(),
                gc_interval: Some(Duration::from_millis(200)),
                max_lag,
            };
            let r = run(&stream, &cfg, &NoProgress).await.unwrap();
            assert!(r.passed(), "{r:?}");
            assert!(r.committed() > 0 && r.rank_steps >= r.committed(), "{r:?}");
            let v = &r.visibility;
            assert_eq!(
                v.uploads,
                r.committed(),
                "every committed TGB was recorded: {v:?}"
            );
            assert_eq!((v.samples, v.pending), (v.uploads, 0), "{v:?}");
            assert!(v.drain().is_some() && v.p95 <= v.max, "{v:?}");
            assert!(
                r.faults.before + r.faults.after > 0,
                "faults were injected: {r:?}"
            );
            // GC ran behind the ranks: some of what they read is gone again.
            let stored = stream.store().list("tgb/").await.unwrap().len() as u64;
            assert!(
                stored < r.committed(),
                "{stored} of {} TGBs still stored",
                r.committed()
            );
        }
    }
}
