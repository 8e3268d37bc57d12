//! `bench lifecycle` (figure 9): stored bytes over a 1,010-step run with a
//! checkpoint every 10 steps and `max_lag` 80, with and without physical
//! deletion. Both arms advance the GC boundary the same way (the reclaimer's
//! pass decides it), so the producer is paced identically; only the "with GC"
//! arm deletes.

use std::time::Duration;

use anyhow::Context;
use batchweave::manifest::parse_tgb_key;
use batchweave::{GcSettings, MeshConfig, ProducerSettings, RankConfig, Reclaimer, Stream};
use bytes::Bytes;
use serde_json::json;

use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round, size_label};

const STEPS: u64 = 1_010;
const INTERVAL: u64 = 10;
const MAX_LAG: u64 = 80;
const MAX_BUFFERED: usize = 4;

/// One sample, taken right after a checkpoint and its GC pass.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    step: u64,
    seconds: f64,
    bytes: u64,
    /// Committed TGB objects still stored.
    committed_tgbs: u64,
    /// Uploaded, not yet committed TGB objects.
    uncommitted_tgbs: u64,
}

async fn sample(stream: &Stream, step: u64, t: f64) -> anyhow::Result<Sample> {
    let info = stream.inspect().await?;
    let committed = info.producers.get("writer").map_or(0, |p| p.last_sequence);
    let objects = stream.store().list("").await?;
    let mut s = Sample {
        step,
        seconds: t,
        ..Default::default()
    };
    for o in &objects {
        s.bytes += o.size;
        if o.key.starts_with("tgb/") {
            match parse_tgb_key(&o.key).map(|(_, _, sequence)| sequence) {
                Some(q) if q <= committed => s.committed_tgbs += 1,
                _ => s.uncommitted_tgbs += 1,
            }
        }
    }
    Ok(s)
}

/// The "without GC" control: the reclaimer's pass as a dry run decides the boundary
/// (from the rank's watermark and the newest version, exactly as the "with GC" arm's
/// pass does), and only the boundary is advanced to it, so producers trim their
/// manifests and pace `max_lag` identically; no object is deleted.
async fn logical_trim(gc: &Reclaimer) -> anyhow::Result<()> {
    let plan = gc.run_once().await?;
    if plan.boundary != plan.boundary_before {
        gc.advance_boundary(plan.boundary).await?;
    }
    Ok(())
}

async fn arm(
    env: &Env,
    tgb: usize,
    delete: bool,
    bar: &dyn crate::progress::Meter,
) -> anyhow::Result<Vec<Sample>> {
    let fresh = env
        .fresh(if delete {
            "lifecycle-gc"
        } else {
            "lifecycle-nogc"
        })
        .await?;
    let stream = Stream::from_store(fresh.store.clone());
    let clock = fresh.store.clock().clone();
    let mut consumer = stream
        .consumer(RankConfig::new(0, MeshConfig::new(1, 1, 1, 1, 1), "train"))
        .open()
        .await?;
    let builder = stream.producer("writer").settings(ProducerSettings {
        max_lag: Some(MAX_LAG),
        max_buffered: MAX_BUFFERED,
        lag_poll: Duration::from_millis(20),
        seed: Some(env.seed),
        ..Default::default()
    });
    let slice = Bytes::from(vec![0x11; tgb]);
    let writer = tokio::spawn(async move {
        let mut p = builder.open().await?;
        for i in 1..=STEPS {
            p.append(1, 1, vec![slice.clone()], i).await?;
        }
        p.close().await?;
        anyhow::Ok(())
    });
    let gc = stream.reclaimer(GcSettings::default());
    let plan = stream.reclaimer(GcSettings {
        dry_run: true,
        orphan_grace: None,
        ..Default::default()
    });
    let t0 = clock.now();
    let mut samples = vec![sample(&stream, 0, 0.0).await?];
    for step in 1..=STEPS {
        consumer.next().await?;
        if step.is_multiple_of(INTERVAL) {
            let state = consumer.state();
            consumer.checkpoint_committed(&state).await?;
            if delete {
                gc.run_once().await?;
            } else {
                logical_trim(&plan).await?;
            }
            let t = clock.now().saturating_duration_since(t0).as_secs_f64();
            samples.push(sample(&stream, step, t).await?);
            bar.inc(1);
        }
    }
    writer.await.context("producer task")??;
    env.discard(fresh).await;
    Ok(samples)
}

/// Both arms and the comparison.
pub(crate) async fn run(env: Env) -> anyhow::Result<Outcome> {
    let tgb = match (env.sim, env.quick) {
        (true, false) => 1_000_000,
        (true, true) => 100_000,
        (false, false) => 256_000,
        (false, true) => 16_000,
    };
    let bar = env.meter(2 * STEPS / INTERVAL, "lifecycle");
    bar.set_message("with GC".into());
    let with = arm(&env, tgb, true, bar.as_ref()).await?;
    bar.set_message("without GC".into());
    let without = arm(&env, tgb, false, bar.as_ref()).await?;
    bar.finish();
    let bound = MAX_LAG + INTERVAL + 1;
    let peak = |s: &[Sample]| s.iter().map(|x| x.bytes).max().unwrap_or(0);
    let mean = |s: &[Sample]| s.iter().map(|x| x.bytes as f64).sum::<f64>() / s.len().max(1) as f64;
    let worst = with.iter().map(|s| s.committed_tgbs).max().unwrap_or(0);
    let worst_uncommitted = with.iter().map(|s| s.uncommitted_tgbs).max().unwrap_or(0);
    let held = with.iter().all(|s| s.committed_tgbs <= bound);
    let reduction = 1.0 - ratio(peak(&with) as f64, peak(&without) as f64);
    let reduction_mean = 1.0 - ratio(mean(&with), mean(&without));
    let end_reduction = 1.0
        - ratio(
            with.last().map_or(0, |s| s.bytes) as f64,
            without.last().map_or(0, |s| s.bytes) as f64,
        );
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let table = vec![
        format!(
            "   TGB {} x {STEPS} steps, checkpoint every {INTERVAL}, max_lag {MAX_LAG}",
            size_label(tgb)
        ),
        format!(
            "   peak stored: with GC {:.3} GiB, without {:.3} GiB -> reduction {:.1}% (mean {:.1}%, at end {:.1}%)",
            gib(peak(&with)),
            gib(peak(&without)),
            reduction * 100.0,
            reduction_mean * 100.0,
            end_reduction * 100.0
        ),
        format!(
            "   committed TGBs stored (with GC): max {worst} vs bound max_lag + interval + 1 = {bound}: {}; uncommitted uploads max {worst_uncommitted} (max_buffered {MAX_BUFFERED})",
            if held {
                "held at every sample"
            } else {
                "VIOLATED"
            }
        ),
    ];
    let series = |s: &[Sample]| -> Vec<serde_json::Value> {
        s.iter()
            .map(|x| {
                json!([
                    x.step,
                    round(x.seconds, 3),
                    x.bytes,
                    x.committed_tgbs,
                    x.uncommitted_tgbs
                ])
            })
            .collect()
    };
    let line = |name: &str, s: &[Sample]| {
        Series::new(
            name,
            s.iter()
                .map(|x| (x.step as f64, x.bytes as f64 / 1e6))
                .collect(),
        )
    };
    Ok(Outcome {
        json: json!({
            "steps": STEPS,
            "checkpoint_interval": INTERVAL,
            "max_lag": MAX_LAG,
            "max_buffered": MAX_BUFFERED,
            "tgb_bytes": tgb,
            "peak_bytes_with_gc": peak(&with),
            "peak_bytes_without_gc": peak(&without),
            "reduction": round(reduction, 4),
            "reduction_definition": "1 - peak stored bytes with GC / peak without (the paper's 9.76 vs 34.85 GiB); reduction_mean uses the mean over samples",
            "reduction_mean": round(reduction_mean, 4),
            "reduction_at_end": round(end_reduction, 4),
            "bound_tgbs": bound,
            "max_committed_tgbs_stored": worst,
            "max_uncommitted_tgbs_stored": worst_uncommitted,
            "bound_held": held,
            "samples_columns": ["consumer_step", "seconds", "stored_bytes", "committed_tgbs_stored", "uncommitted_tgbs_stored"],
            "with_gc": series(&with),
            "without_gc": series(&without),
        }),
        table,
        chart: Chart::of(vec![Panel {
            title: format!("Stored bytes, {STEPS} steps, {} TGBs", size_label(tgb)),
            x_label: "consumer step".into(),
            y_label: "MB stored".into(),
            series: vec![line("with GC", &with), line("without GC", &without)],
            ..Default::default()
        }]),
    })
}
