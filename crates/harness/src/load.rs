//! `batchweave load`: many producers and ranks on one stream for minutes,
//! with seeded fault injection on every request, then a verdict: nothing
//! lost, duplicated or reordered, every byte verified; and a report of
//! memory, commits, conflicts and stalls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use batchweave::store::{FaultRule, FaultStore};
use batchweave::{ConsumerConfig, ProducerSettings, Stream};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinSet;

use crate::inspect::open_stream;
use crate::payload;

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
}

/// A rank's number, the TGBs it saw in order, and its statistics.
type RankResult = (u32, Vec<(String, u64)>, batchweave::ConsumerStats);

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

pub(crate) async fn run(a: LoadArgs) -> Result<()> {
    ensure!(
        a.producers >= 1 && a.ranks >= 1,
        "need at least one producer and one rank"
    );
    ensure!(
        (0.0..0.5).contains(&a.error_rate),
        "--error-rate must be in [0, 0.5)"
    );
    let base = open_stream(&a.store).await?;
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
    let (dp, cp) = if a.ranks.is_multiple_of(2) {
        (a.ranks / 2, 2)
    } else {
        (a.ranks, 1)
    };
    let stop_producing = Arc::new(AtomicBool::new(false));
    let final_total = Arc::new(AtomicU64::new(u64::MAX));
    let consumed = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    println!(
        "load: {} producers, {} ranks (DP={dp} x CP={cp}), {} s, error rate {}, store {}",
        a.producers, a.ranks, a.duration_secs, a.error_rate, a.store
    );

    let mut producers: JoinSet<Result<batchweave::ProducerStats>> = JoinSet::new();
    for i in 0..a.producers {
        let (stream, stop, a) = (stream.clone(), stop_producing.clone(), a.clone());
        producers.spawn(async move {
            let id = format!("load-{i}");
            let settings = ProducerSettings {
                seed: Some(a.seed ^ u64::from(i)),
                ..Default::default()
            };
            let mut p = stream
                .producer(id.clone())
                .settings(settings)
                .open()
                .await?;
            let mut seq = p.committed_offset();
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                p.append(
                    dp,
                    cp,
                    payload::tgb_slices(&id, seq, dp, cp, a.slice_bytes),
                    seq,
                )
                .await?;
            }
            Ok(p.close().await?)
        });
    }
    let mut ranks: JoinSet<Result<RankResult>> = JoinSet::new();
    for r in 0..a.ranks {
        let (stream, total, consumed, a) = (
            stream.clone(),
            final_total.clone(),
            consumed.clone(),
            a.clone(),
        );
        ranks.spawn(async move {
            let mut c = stream
                .consumer(ConsumerConfig::new(r, a.ranks, [dp, cp, 1, 1], "load"))
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
                if step.is_multiple_of(10) {
                    let st = c.state();
                    c.checkpoint_committed(&st).await?;
                }
            }
            Ok((r, seen, c.stats()))
        });
    }
    let bar = ProgressBar::new(a.duration_secs);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>8} [{bar:40}] {pos}/{len} s {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix("load");
    while t0.elapsed() < Duration::from_secs(a.duration_secs) && !producers.is_empty() {
        clock.sleep(Duration::from_millis(500)).await;
        bar.set_position(t0.elapsed().as_secs().min(a.duration_secs));
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
    while let Some(r) = producers.join_next().await {
        pstats.push(r.context("producer task panicked")??);
    }
    let total: u64 = pstats.iter().map(|s| s.tgbs_committed).sum();
    final_total.store(total, Ordering::Relaxed);
    let mut logs: BTreeMap<u32, Vec<(String, u64)>> = BTreeMap::new();
    let mut cstats = Vec::new();
    while let Some(r) = ranks.join_next().await {
        let (rank, seen, st) = r.context("rank task panicked")??;
        logs.insert(rank, seen);
        cstats.push(st);
    }
    bar.finish_and_clear();
    let secs = t0.elapsed().as_secs_f64();
    let reference = logs.get(&0).cloned().unwrap_or_default();
    let mut problems = Vec::new();
    for (r, l) in &logs {
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
    let lost = pstats.iter().map(|s| s.last_sequence).sum::<u64>() as usize - unique.len();
    let sum = |f: fn(&batchweave::ProducerStats) -> u64| pstats.iter().map(f).sum::<u64>();
    let stalls: u64 = cstats.iter().map(|s| s.stalls).sum();
    let p95 = cstats
        .iter()
        .map(|s| s.fetch_latency.p95)
        .max()
        .unwrap_or_default();
    let fs = fault.stats();
    println!(
        "load: {:.0} s, {} TGBs committed by {} producers ({:.1} TGB/s), {} rank-steps verified",
        secs,
        total,
        a.producers,
        total as f64 / secs,
        consumed.load(Ordering::Relaxed)
    );
    println!(
        "  commits {} of {} attempts ({:.1} %), conflicts {}, ambiguous {}, lost replies recovered {}, ghost commits prevented {}",
        sum(|s| s.successes),
        sum(|s| s.attempts),
        100.0 * sum(|s| s.successes) as f64 / sum(|s| s.attempts).max(1) as f64,
        sum(|s| s.conflicts),
        sum(|s| s.ambiguous),
        sum(|s| s.lost_replies_recovered),
        sum(|s| s.ghost_commits_prevented)
    );
    println!(
        "  faults injected: {} before, {} after (lost replies); consumer stalls {stalls}; worst p95 fetch {:?}",
        fs.before, fs.after, p95
    );
    println!(
        "  peak RSS {} MiB; {lost} lost, {duplicated} duplicated, {reordered} reordered",
        peak_rss_kib() / 1024
    );
    if !problems.is_empty() || lost + duplicated + reordered > 0 {
        for p in &problems {
            println!("  - {p}");
        }
        bail!("load run failed verification");
    }
    println!("VERDICT: PASS");
    Ok(())
}
