//! `bench manifest-growth`: the fragile window (DAC's tau) of 8 producers
//! committing at manifest version 1k vs 100k, with trimming on (max_lag + GC)
//! and off.
//!
//! Building 100k versions commit by commit would take hours untrimmed (the
//! work is quadratic), so each arm starts from a synthesized history: the
//! newest version `V` holding what it would hold at that point (built by
//! `batchweave_manifest::testing::SyntheticHistory`: the 8 producers' claims,
//! then one TGB per version, all `V - 8` descriptors untrimmed or the retained
//! window with trimming on, plus the GC boundary), then measures live commits
//! on top of it.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use batchweave::manifest::{
    GcBoundary, GroupLayout, Manifest, Watermark, encode_group_layout, encode_watermark,
    group_layout_key, manifest_key, position_name, try_encode_manifest, watermark_key,
};
use batchweave::{DacParams, GcSettings, PolicyKind, ProducerSettings, Reclaimer, Stream};
use batchweave_manifest::testing::SyntheticHistory;
use bytes::Bytes;
use serde_json::json;

use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round};

const PRODUCERS: usize = 8;
const MAX_LAG: u64 = 80;
/// How far the synthetic consumer group trails the head.
const TRAIL: u64 = 10;
const GROUP: &str = "train";

/// The manifest at version `v`: the benchmark's producers have claimed their ids and
/// committed nothing; one writer committed a TGB per version since; trimmed to the
/// last `MAX_LAG + TRAIL` TGBs when `trim`.
fn synthesize(v: u64, trim: bool) -> Manifest {
    let mut h = SyntheticHistory::new();
    for i in 0..PRODUCERS {
        h = h.idle(format!("p{i:04}"));
    }
    h = h.writer("history", v.saturating_sub(PRODUCERS as u64));
    if trim {
        h = h.retain(MAX_LAG + TRAIL);
    }
    h.build()
}

/// Moves the synthetic group's watermark to `TRAIL` steps behind the head
/// and runs a GC pass.
async fn gc_pass(stream: &Stream) -> anyhow::Result<u64> {
    let gc = stream.reclaimer(GcSettings::default());
    let Some(m) = gc.newest_manifest().await? else {
        return Ok(0);
    };
    let wm = Watermark {
        // A consumer trailing the head holds a slightly older version.
        version: m.version.saturating_sub(TRAIL),
        step: m.total_tgbs.saturating_sub(TRAIL),
        updated_at_ms: stream.store().clock().unix_millis(),
    };
    let key = watermark_key(GROUP, &position_name(0, 0))?;
    stream.store().put(&key, encode_watermark(&wm)).await?;
    gc.run_once().await?;
    Ok(m.tgbs.len() as u64)
}

#[derive(Debug, Clone, Copy, Default)]
struct Arm {
    tau_ms: f64,
    create_ms: f64,
    success: f64,
    manifest_bytes: u64,
    commits: u64,
}

async fn arm(env: &Env, v: u64, trim: bool, window: Duration) -> anyhow::Result<Arm> {
    let fresh = env
        .fresh(if trim { "growth-trim" } else { "growth-notrim" })
        .await?;
    let store = fresh.store.clone();
    let m = synthesize(v, trim);
    let bytes = try_encode_manifest(&m, &Default::default())?;
    let manifest_bytes = bytes.len() as u64;
    store.create(&manifest_key(v), bytes).await?;
    if trim {
        let b = GcBoundary {
            min_live_version: v,
            low_water_step: m.first_step,
            updated_at_ms: 1_750_000_000_000,
        };
        Reclaimer::new(store.clone(), GcSettings::default())
            .advance_boundary(b)
            .await?;
        store
            .put(
                &group_layout_key(GROUP)?,
                encode_group_layout(&GroupLayout {
                    dp: 1,
                    cp: 1,
                    updated_at_ms: 0,
                    ..Default::default()
                }),
            )
            .await?;
    }
    drop(m);
    let stream = Stream::from_store(store.clone());
    let clock = store.clock().clone();
    let end = clock.now() + window;
    let mut tasks = Vec::new();
    for i in 0..PRODUCERS {
        let builder = stream
            .producer(format!("p{i:04}"))
            .settings(ProducerSettings {
                policy: PolicyKind::Dac(DacParams::default()),
                max_lag: trim.then_some(MAX_LAG),
                lag_poll: Duration::from_millis(20),
                seed: Some(env.seed.wrapping_add(i as u64)),
                ..Default::default()
            });
        let clock = clock.clone();
        tasks.push(tokio::spawn(async move {
            let mut p = builder.open().await?;
            let base = p.stats();
            let slice = Bytes::from(vec![1u8; 10_000]);
            let mut off = p.committed_offset();
            loop {
                let left = end.saturating_duration_since(clock.now());
                if left.is_zero() {
                    break;
                }
                off += 1;
                tokio::select! {
                    r = p.append(1, 1, vec![slice.clone()], off) => { r?; }
                    () = clock.sleep(left) => break,
                }
            }
            let s = p.stats();
            anyhow::Ok((base, s))
        }));
    }
    let gc = if trim {
        let stream = stream.clone();
        let clock = clock.clone();
        Some(tokio::spawn(async move {
            loop {
                clock.sleep(Duration::from_millis(100)).await;
                if let Err(e) = gc_pass(&stream).await {
                    tracing::debug!(error = %e, "bench gc pass");
                }
            }
        }))
    } else {
        None
    };
    let (mut taus, mut create, mut att, mut ok) = (Vec::new(), Duration::ZERO, 0u64, 0u64);
    for t in tasks {
        let (b, s) = t.await.context("producer task")??;
        if let Some(t) = s.tau {
            taus.push(t.as_secs_f64() * 1e3);
        }
        create += s.commit_time.saturating_sub(b.commit_time);
        att += s.attempts.saturating_sub(b.attempts);
        ok += s.successes.saturating_sub(b.successes);
    }
    if let Some(g) = gc {
        g.abort();
    }
    env.discard(fresh).await;
    Ok(Arm {
        tau_ms: taus.iter().sum::<f64>() / taus.len().max(1) as f64,
        create_ms: ratio(create.as_secs_f64() * 1e3, att as f64),
        success: ratio(ok as f64, att as f64),
        manifest_bytes,
        commits: ok,
    })
}

/// Both versions, trimming on and off.
pub(crate) async fn run(env: Env) -> anyhow::Result<Outcome> {
    let (hi, window) = match (env.sim, env.quick) {
        // DAC's gap at 8 producers is about 7 s of simulated time: several gaps per window.
        (true, false) => (100_000, Duration::from_secs(60)),
        (true, true) => (10_000, Duration::from_secs(30)),
        (false, false) => (100_000, Duration::from_secs(4)),
        (false, true) => (10_000, Duration::from_secs(1)),
    };
    let lo = 1_000u64;
    let bar = env.meter(4, "manifest-growth");
    let mut res = HashMap::new();
    for trim in [true, false] {
        for v in [lo, hi] {
            bar.set_message(format!("v={v} trim={trim}"));
            res.insert((v, trim), arm(&env, v, trim, window).await?);
            bar.inc(1);
        }
    }
    bar.finish();
    let get = |v: u64, t: bool| res.get(&(v, t)).copied().unwrap_or_default();
    let r_on = ratio(get(hi, true).tau_ms, get(lo, true).tau_ms);
    let r_off = ratio(get(hi, false).tau_ms, get(lo, false).tau_ms);
    let label = if hi == 100_000 { "100k" } else { "10k" };
    let mut table = vec![format!(
        "   {:>7} {:>5} | {:>9} {:>10} {:>8} {:>8} {:>14}",
        "version", "trim", "tau ms", "create ms", "success", "commits", "manifest bytes"
    )];
    let mut arms = Vec::new();
    for trim in [true, false] {
        for v in [lo, hi] {
            let a = get(v, trim);
            table.push(format!(
                "   {v:>7} {:>5} | {:>9.2} {:>10.2} {:>7.1}% {:>8} {:>14}",
                if trim { "on" } else { "off" },
                a.tau_ms,
                a.create_ms,
                a.success * 100.0,
                a.commits,
                a.manifest_bytes
            ));
            arms.push(json!({
                "version": v, "trimming": trim, "tau_ms": round(a.tau_ms, 3),
                "create_ms": round(a.create_ms, 3), "commit_success": round(a.success, 4),
                "commits": a.commits, "manifest_bytes_at_start": a.manifest_bytes,
            }));
        }
    }
    table.push(format!(
        "   tau at {label} / tau at 1k: trimming on {r_on:.2}x, off {r_off:.2}x"
    ));
    let series = |trim: bool| {
        Series::new(
            if trim {
                "trimming on (max_lag + GC)"
            } else {
                "trimming off"
            },
            vec![
                (lo as f64, get(lo, trim).tau_ms),
                (hi as f64, get(hi, trim).tau_ms),
            ],
        )
    };
    Ok(Outcome {
        json: json!({
            "producers": PRODUCERS,
            "window_seconds": window.as_secs_f64(),
            "versions": [lo, hi],
            "high_version_note": if hi == 100_000 { "1k vs 100k" } else { "quick mode: 1k vs 10k (the field name keeps the 100k spelling)" },
            "tau_definition": "DAC's EMA of the fragile window (reading the base + conditional create), mean over producers at the end of the window",
            "arms": arms,
            "ratio_tau_100k_vs_1k": round(r_on, 3),
            "ratio_tau_100k_vs_1k_untrimmed": round(r_off, 3),
        }),
        table,
        chart: Chart::of(vec![Panel {
            title: "Fragile window vs manifest version".into(),
            x_label: "manifest version".into(),
            y_label: "tau (ms)".into(),
            series: vec![series(true), series(false)],
            ..Default::default()
        }]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use batchweave::manifest::{DecodeLimits, validate};

    #[test]
    fn synthesized_histories_are_valid_and_trimmed() {
        let full = synthesize(1_000, false);
        validate(&full, &DecodeLimits::default()).unwrap();
        assert_eq!((full.version, full.tgbs.len()), (1_000, 1_000 - PRODUCERS));
        let trimmed = synthesize(1_000, true);
        validate(&trimmed, &DecodeLimits::default()).unwrap();
        assert_eq!(trimmed.version, 1_000);
        assert_eq!(trimmed.tgbs.len() as u64, MAX_LAG + TRAIL);
        assert_eq!(trimmed.total_tgbs, 1_000 - PRODUCERS as u64);
    }
}
