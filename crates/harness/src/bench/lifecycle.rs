//! `bench lifecycle` (figure 9): stored bytes over a 1,010-step run with a
//! checkpoint every 10 steps and `max_lag` 80, with and without physical
//! deletion. Both arms advance the low-water mark (logical trim), so the
//! producer is paced identically; only the "with GC" arm deletes.

use std::time::Duration;

use anyhow::Context;
use batchweave::{ConsumerConfig, GcSettings, ProducerSettings, Stream};
use bytes::Bytes;
use serde_json::json;

use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, progress, ratio, round, size_label};

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

fn sequence_of(key: &str) -> Option<u64> {
    key.strip_suffix(".tgb")?.rsplit('-').next()?.parse().ok()
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
            match sequence_of(&o.key) {
                Some(q) if q <= committed => s.committed_tgbs += 1,
                _ => s.uncommitted_tgbs += 1,
            }
        }
    }
    Ok(s)
}

/// Advances only the boundary's low-water step (what producers trim and
/// pace by), deleting nothing: the "without GC" control.
async fn logical_trim(stream: &Stream) -> anyhow::Result<()> {
    let gc = stream.reclaimer(GcSettings::default());
    let (mut b, lw, newest) = (
        gc.boundary().await?,
        gc.low_water().await?,
        gc.newest_manifest().await?,
    );
    if let (Some(step), Some(m)) = (lw.step, newest) {
        let next = b.low_water_step.max(step.min(m.total_tgbs));
        if next != b.low_water_step {
            b.low_water_step = next;
            b.updated_at_ms = stream.store().clock().unix_millis();
            gc.advance_boundary(b).await?;
        }
    }
    Ok(())
}

async fn arm(
    env: &Env,
    tgb: usize,
    delete: bool,
    bar: &indicatif::ProgressBar,
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
        .consumer(ConsumerConfig::new(0, 1, [1, 1, 1, 1], "train"))
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
                logical_trim(&stream).await?;
            }
            let t = clock.now().saturating_duration_since(t0).as_secs_f64();
            samples.push(sample(&stream, step, t).await?);
            bar.inc(1);
        }
    }
    writer.await.context("producer task")??;
    env.discard(fresh);
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
    let bar = progress(2 * STEPS / INTERVAL, "lifecycle");
    bar.set_message("with GC");
    let with = arm(&env, tgb, true, &bar).await?;
    bar.set_message("without GC");
    let without = arm(&env, tgb, false, &bar).await?;
    bar.finish_and_clear();
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
        }]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_is_parsed_from_tgb_keys() {
        assert_eq!(sequence_of("tgb/writer/1-42.tgb"), Some(42));
        assert_eq!(sequence_of("tgb/wri-ter/3-7.tgb"), Some(7));
        assert_eq!(sequence_of("tgb/writer/1-x.tgb"), None);
        assert_eq!(sequence_of("manifests/1"), None);
    }
}
