//! `bench consumers`: range reads vs dense reads vs raw GET, per world size
//! and slice size (paper section 7.4).

use anyhow::Context;
use batchweave::{ConsumerSettings, MeshConfig, ProducerSettings, RankConfig, ReadMode, Stream};
use bytes::Bytes;
use serde_json::json;

use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round, size_label};

/// Per-rank results of one read mode at one point.
#[derive(Debug, Clone, Default)]
struct Reads {
    /// TGB bytes fetched (footers + slices) / bytes delivered.
    amplification: f64,
    /// All store bytes read (manifests too) / bytes delivered.
    amplification_all: f64,
    /// Mean per-rank delivered MB/s.
    rank_mb_per_s: f64,
    p50_ms: f64,
    p95_ms: f64,
    /// Range GETs + GETs per rank per step.
    requests_per_step: f64,
}

fn pct(sorted: &[f64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(0.0)
}

async fn read_ranks(
    stream: &Stream,
    world: u32,
    steps: u64,
    mode: ReadMode,
) -> anyhow::Result<Reads> {
    let group = match mode {
        ReadMode::Range => "range",
        ReadMode::Dense => "dense",
    };
    let mut tasks = Vec::new();
    for rank in 0..world {
        let me = RankConfig::new(rank, MeshConfig::new(world, world, 1, 1, 1), group);
        let settings = ConsumerSettings {
            read_mode: mode,
            ..ConsumerSettings::default()
        };
        // Own counters per rank: the same prefix, a fresh handle.
        let s = Stream::from_store(stream.store().scoped(""));
        tasks.push(tokio::spawn(async move {
            let clock = s.store().clock().clone();
            let mut c = s.consumer(me).settings(settings).open().await?;
            let t0 = clock.now();
            for _ in 0..steps {
                c.next().await?;
            }
            let el = clock.now().saturating_duration_since(t0);
            anyhow::Ok((c.stats(), el))
        }));
    }
    let (mut tgb, mut all, mut delivered, mut reqs) = (0u64, 0u64, 0u64, 0u64);
    let mut rates = Vec::new();
    let (mut p50s, mut p95s) = (Vec::new(), Vec::new());
    for t in tasks {
        let (st, el) = t.await.context("rank task")??;
        tgb += st.footer_bytes + st.slice_bytes;
        all += st.store.bytes_read;
        delivered += st.bytes_delivered;
        reqs += st.store.gets + st.store.range_gets;
        rates.push(ratio(st.bytes_delivered as f64, el.as_secs_f64()) / 1e6);
        p50s.push(st.fetch_latency.p50.as_secs_f64() * 1e3);
        p95s.push(st.fetch_latency.p95.as_secs_f64() * 1e3);
    }
    p50s.sort_by(f64::total_cmp);
    p95s.sort_by(f64::total_cmp);
    Ok(Reads {
        amplification: ratio(tgb as f64, delivered as f64),
        amplification_all: ratio(all as f64, delivered as f64),
        rank_mb_per_s: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        p50_ms: pct(&p50s, 50),
        p95_ms: pct(&p95s, 95),
        requests_per_step: ratio(reqs as f64, (u64::from(world) * steps) as f64),
    })
}

/// Raw GET of exactly each rank's slice bytes, rank-parallel, step by step.
async fn raw_get(
    stream: &Stream,
    keys: &[String],
    world: u32,
    slice: usize,
) -> anyhow::Result<Reads> {
    let mut tasks = Vec::new();
    for rank in 0..world {
        let store = stream.store().scoped("");
        let keys = keys.to_vec();
        tasks.push(tokio::spawn(async move {
            let clock = store.clock().clone();
            let mut lat = Vec::new();
            let t0 = clock.now();
            let mut bytes = 0u64;
            let off = u64::from(rank) * slice as u64;
            for k in &keys {
                let s = clock.now();
                bytes += store.get_range(k, off..off + slice as u64).await?.len() as u64;
                lat.push(clock.now().saturating_duration_since(s).as_secs_f64() * 1e3);
            }
            let el = clock.now().saturating_duration_since(t0);
            anyhow::Ok((bytes, el, lat))
        }));
    }
    let mut rates = Vec::new();
    let mut lat = Vec::new();
    for t in tasks {
        let (b, el, l) = t.await.context("raw GET task")??;
        rates.push(ratio(b as f64, el.as_secs_f64()) / 1e6);
        lat.extend(l);
    }
    lat.sort_by(f64::total_cmp);
    Ok(Reads {
        amplification: 1.0,
        amplification_all: 1.0,
        rank_mb_per_s: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        p50_ms: pct(&lat, 50),
        p95_ms: pct(&lat, 95),
        requests_per_step: 1.0,
    })
}

fn reads_json(r: &Reads) -> serde_json::Value {
    json!({
        "read_amplification": round(r.amplification, 4),
        "read_amplification_all_bytes": round(r.amplification_all, 4),
        "rank_mb_per_s": round(r.rank_mb_per_s, 3),
        "p50_fetch_ms": round(r.p50_ms, 2),
        "p95_fetch_ms": round(r.p95_ms, 2),
        "requests_per_rank_step": round(r.requests_per_step, 3),
    })
}

/// World size x slice size.
pub(crate) async fn run(env: Env) -> anyhow::Result<Outcome> {
    let (worlds, sizes, budget): (Vec<u32>, Vec<usize>, f64) = match (env.sim, env.quick) {
        (true, false) => (vec![8, 32, 128], vec![100_000, 1_000_000], 4e9),
        (true, true) => (vec![8, 32, 128], vec![100_000], 3e8),
        (false, false) => (vec![8, 32], vec![100_000, 1_000_000], 5e8),
        (false, true) => (vec![8], vec![100_000], 5e7),
    };
    let bar = env.meter((worlds.len() * sizes.len()) as u64, "consumers");
    let mut points = Vec::new();
    let mut table = vec![format!(
        "   {:>4} {:>6} {:>5} | {:>28} | {:>28} | {:>20}",
        "W",
        "slice",
        "steps",
        "range: amp  MB/s/rank p50/p95",
        "dense: amp  MB/s/rank p50/p95",
        "raw GET: MB/s p50/p95"
    )];
    let mut panels: Vec<Panel> = Vec::new();
    for &size in &sizes {
        let mut amp_range = Series::new("range read amplification", vec![]);
        let mut amp_dense = Series::new("dense read amplification", vec![]);
        for &w in &worlds {
            bar.set_message(format!("W={w} {}", size_label(size)));
            // Dense reads move W^2 * size bytes per step: keep that within the budget.
            let dense_per_step = f64::from(w) * f64::from(w) * size as f64;
            let steps = (budget / dense_per_step).clamp(2.0, 20.0) as u64;
            let fresh = env.fresh("consumers").await?;
            let stream = Stream::from_store(fresh.store.clone());
            let mut p = stream
                .producer("writer")
                .settings(ProducerSettings {
                    seed: Some(env.seed),
                    ..Default::default()
                })
                .open()
                .await?;
            let slice = Bytes::from(vec![0x3c; size]);
            let mut keys = Vec::new();
            for i in 0..steps {
                let slices = (0..w).map(|_| slice.clone()).collect();
                keys.push(p.append(w, 1, slices, i + 1).await?.key);
            }
            p.close().await?;
            let raw = raw_get(&stream, &keys, w, size).await?;
            let range = read_ranks(&stream, w, steps, ReadMode::Range).await?;
            let dense = read_ranks(&stream, w, steps, ReadMode::Dense).await?;
            bar.inc(1);
            table.push(format!(
                "   {w:>4} {:>6} {steps:>5} | {:>5.3}x {:>8.2} {:>6.1}/{:<6.1} | {:>6.1}x {:>8.2} {:>6.1}/{:<6.1} | {:>6.2} {:>5.1}/{:<5.1}",
                size_label(size),
                range.amplification, range.rank_mb_per_s, range.p50_ms, range.p95_ms,
                dense.amplification, dense.rank_mb_per_s, dense.p50_ms, dense.p95_ms,
                raw.rank_mb_per_s, raw.p50_ms, raw.p95_ms,
            ));
            amp_range.points.push((f64::from(w), range.amplification));
            amp_dense.points.push((f64::from(w), dense.amplification));
            points.push(json!({
                "world_size": w,
                "slice_bytes": size,
                "steps": steps,
                "read_amplification": round(range.amplification, 4),
                "dense_read_amplification": round(dense.amplification, 3),
                "ratio_effective_vs_raw_get": round(ratio(range.rank_mb_per_s, raw.rank_mb_per_s), 3),
                "ratio_range_vs_dense_throughput": round(ratio(range.rank_mb_per_s, dense.rank_mb_per_s), 3),
                "range": reads_json(&range),
                "dense": reads_json(&dense),
                "raw_get": reads_json(&raw),
            }));
            env.discard(fresh);
        }
        panels.push(Panel {
            title: format!("Read amplification, {} slices", size_label(size)),
            x_label: "world size".into(),
            y_label: "bytes fetched / delivered".into(),
            series: vec![amp_range, amp_dense],
            ..Default::default()
        });
    }
    bar.finish();
    Ok(Outcome {
        json: json!({
            "mesh": "DP = world size, CP = TP = PP = 1; one slice per rank per step",
            "read_amplification_definition": "(footer bytes + slice bytes fetched) / bytes delivered, summed over ranks (ConsumerStats); *_all_bytes adds manifest and GC-boundary reads from the per-rank store counters",
            "latency": "per-step fetch latency; p50 = median over ranks of each rank's p50, p95 = 95th percentile over ranks of each rank's p95; raw GET: over all requests",
            "points": points,
        }),
        table,
        chart: Chart::of(panels),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(pct(&v, 50), 10.0);
        assert_eq!(pct(&v, 95), 19.0);
        assert_eq!(pct(&[], 50), 0.0);
        assert_eq!(pct(&[3.0], 95), 3.0);
    }
}
