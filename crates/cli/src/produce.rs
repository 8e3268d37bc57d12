//! `batchweave produce`: a producer of synthetic, verifiable TGBs.
//!
//! The producer's source is the sequence of synthetic TGBs `1, 2, ..., N`
//! (payloads from [`payload::tgb_slices`]), and its source offset after TGB
//! `q` is `q`. On open the producer reports the committed offset `k` of its
//! id, so TGBs `1..=k` are committed and the command appends `k+1..=N`.
//! Killed at any point and restarted with the same id, it continues until
//! exactly `N` are committed, never more.

use std::time::Instant;

use anyhow::{Context, bail, ensure};
use batchweave::{PolicyKind, ProducerSettings, SliceLayout};

use crate::inspect::{open_stream, print_out};
use batchweave_harness::payload;

/// Arguments of `batchweave produce`.
#[derive(Debug, clap::Args)]
pub(crate) struct ProduceArgs {
    /// Stream URL: a directory, `file:///dir`, `s3://bucket/prefix`, `gs://...`, `az://...`.
    #[arg(long)]
    store: String,
    /// Stable producer id (1-128 characters of `[A-Za-z0-9._-]`); reuse it after a crash.
    #[arg(long)]
    producer_id: String,
    /// Total number of TGBs this producer id must have committed when the command ends.
    #[arg(long)]
    tgbs: u64,
    /// Data-parallel degree of each TGB's grid.
    #[arg(long, default_value_t = 2)]
    dp: u32,
    /// Context-parallel degree of each TGB's grid.
    #[arg(long, default_value_t = 1)]
    cp: u32,
    /// Bytes of every slice (a TGB holds `dp * cp` slices).
    #[arg(long, default_value_t = 4096)]
    slice_bytes: usize,
    /// Commit policy: `coop` (cooperative commits, the default), `dac`, `naive`, `fixed:K`,
    /// `incr` or `aimd`.
    #[arg(long, default_value = "coop")]
    policy: String,
    /// Do not commit TGBs more than this many steps ahead of the stream's low-water mark.
    #[arg(long)]
    max_lag: Option<u64>,
    /// Seed for the incarnation nonce and the DAC jitter (default: from the OS).
    #[arg(long)]
    seed: Option<u64>,
    /// Slice layout: `sealed` (one ranged GET per rank and TGB), `packed` (footer, then
    /// slice), or `auto` (sealed unless padding costs more than 1/16 of the bytes).
    #[arg(long, default_value = "auto")]
    slice_layout: String,
}

/// Largest accepted slice (the payloads are generated in memory).
const MAX_SLICE_BYTES: usize = 1 << 30;

fn check(args: &ProduceArgs) -> anyhow::Result<(PolicyKind, SliceLayout)> {
    let layout: SliceLayout = args
        .slice_layout
        .parse()
        .map_err(|e: String| anyhow::anyhow!("--slice-layout: {e}"))?;
    let policy: PolicyKind = args
        .policy
        .parse()
        .with_context(|| format!("--policy {:?}", args.policy))?;
    policy
        .validate()
        .with_context(|| format!("--policy {:?}", args.policy))?;
    ensure!(
        args.dp >= 1 && args.cp >= 1,
        "--dp and --cp must be at least 1"
    );
    ensure!(
        args.dp.checked_mul(args.cp).is_some(),
        "--dp {} x --cp {} is too large",
        args.dp,
        args.cp
    );
    ensure!(
        (1..=MAX_SLICE_BYTES).contains(&args.slice_bytes),
        "--slice-bytes must be between 1 and {MAX_SLICE_BYTES}"
    );
    Ok((policy, layout))
}

/// Runs `batchweave produce`.
pub(crate) async fn run(args: ProduceArgs) -> anyhow::Result<()> {
    let (policy, slice_layout) = check(&args)?;
    let started = Instant::now();
    let stream = open_stream(&args.store).await?;
    let settings = ProducerSettings {
        policy,
        max_lag: args.max_lag,
        seed: args.seed,
        slice_layout,
        ..Default::default()
    };
    let id = args.producer_id.as_str();
    let mut producer = stream
        .producer(id)
        .settings(settings)
        .open()
        .await
        .with_context(|| format!("opening producer {id:?} on {}", args.store))?;
    let committed = producer.committed_offset();
    let next = producer.next_sequence();
    if Some(next) != committed.checked_add(1) {
        bail!(
            "producer {id:?}: committed source offset {committed} but next sequence {next}; \
             `batchweave produce` keeps source offset == sequence, so this id was written by \
             something else"
        );
    }
    if committed > args.tgbs {
        bail!(
            "producer {id:?} already has {committed} TGBs committed, more than --tgbs {}",
            args.tgbs
        );
    }
    let epoch = producer.epoch();
    for seq in next..=args.tgbs {
        let slices = payload::tgb_slices(id, seq, args.dp, args.cp, args.slice_bytes);
        let receipt = producer
            .append(args.dp, args.cp, slices, seq)
            .await
            .with_context(|| format!("producer {id:?}: appending TGB {seq}"))?;
        ensure!(
            receipt.sequence == seq,
            "producer {id:?}: TGB with source offset {seq} got sequence {}",
            receipt.sequence
        );
    }
    let stats = producer
        .close()
        .await
        .with_context(|| format!("producer {id:?}: committing the last TGBs"))?;
    ensure!(
        stats.last_sequence == args.tgbs && stats.committed_offset == args.tgbs,
        "producer {id:?}: after close the committed offset is {} (last sequence {}), expected {}",
        stats.committed_offset,
        stats.last_sequence,
        args.tgbs
    );
    print_out(&format!(
        "produce {id}: {}/{} TGBs committed ({} this run, epoch {epoch}, policy {policy}); \
         {} commit attempts, {:.1}% success, {} conflicts; {} bytes in {:.2}s\n",
        stats.committed_offset,
        args.tgbs,
        stats.tgbs_committed,
        stats.attempts,
        stats.success_rate() * 100.0,
        stats.conflicts,
        stats.bytes_committed,
        started.elapsed().as_secs_f64()
    ))?;
    Ok(())
}
