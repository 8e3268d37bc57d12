//! `bench consumers`: range reads vs dense reads vs raw GET, per world size
//! and slice size (paper section 7.4).

use anyhow::Context;
use batchweave::{
    ConsumerSettings, MeshConfig, ProducerSettings, RankConfig, ReadMode, SliceLayout, Stream,
};
use bytes::Bytes;
use serde_json::json;

use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round, size_label};

/// Per-rank results of one read mode at one point.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reads {
    /// TGB bytes fetched (footers + slices) / bytes delivered.
    pub(crate) amplification: f64,
    /// All store bytes read (manifests too) / bytes delivered.
    pub(crate) amplification_all: f64,
    /// Mean per-rank delivered MB/s.
    pub(crate) rank_mb_per_s: f64,
    pub(crate) p50_ms: f64,
    pub(crate) p95_ms: f64,
    /// Range GETs + GETs per rank per step.
    pub(crate) requests_per_step: f64,
    /// Bytes delivered to all ranks together.
    pub(crate) delivered: u64,
    /// CPU seconds of the whole process per GB delivered (`None`: not measured).
    pub(crate) cpu_s_per_gb: Option<f64>,
}

fn pct(sorted: &[f64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(0.0)
}

pub(crate) async fn read_ranks(
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
        delivered,
        cpu_s_per_gb: None,
    })
}

/// Raw GET of exactly each rank's slice bytes, rank-parallel, with as many GETs in flight
/// per rank as a consumer has steps in flight (`depth`), delivered in step order.
async fn raw_get(
    stream: &Stream,
    keys: &[String],
    world: u32,
    slice: usize,
    depth: usize,
) -> anyhow::Result<Reads> {
    use futures::StreamExt as _;
    let mut tasks = Vec::new();
    for rank in 0..world {
        let store = stream.store().scoped("");
        let keys = keys.to_vec();
        tasks.push(tokio::spawn(async move {
            let clock = store.clock().clone();
            let t0 = clock.now();
            let off = u64::from(rank) * slice as u64;
            let got: Vec<(u64, f64)> = futures::stream::iter(keys)
                .map(|k| {
                    let (store, clock) = (store.clone(), clock.clone());
                    async move {
                        let s = clock.now();
                        let n = store.get_range(&k, off..off + slice as u64).await?.len() as u64;
                        let ms = clock.now().saturating_duration_since(s).as_secs_f64() * 1e3;
                        anyhow::Ok((n, ms))
                    }
                })
                .buffered(depth.max(1))
                .collect::<Vec<_>>()
                .await
                .into_iter()
                .collect::<anyhow::Result<_>>()?;
            let el = clock.now().saturating_duration_since(t0);
            let bytes = got.iter().map(|g| g.0).sum::<u64>();
            let lat = got.into_iter().map(|g| g.1).collect::<Vec<_>>();
            anyhow::Ok((bytes, el, lat))
        }));
    }
    let mut rates = Vec::new();
    let mut lat = Vec::new();
    let mut delivered = 0u64;
    for t in tasks {
        let (b, el, l) = t.await.context("raw GET task")??;
        rates.push(ratio(b as f64, el.as_secs_f64()) / 1e6);
        lat.extend(l);
        delivered += b;
    }
    lat.sort_by(f64::total_cmp);
    Ok(Reads {
        amplification: 1.0,
        amplification_all: 1.0,
        rank_mb_per_s: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        p50_ms: pct(&lat, 50),
        p95_ms: pct(&lat, 95),
        requests_per_step: 1.0,
        delivered,
        cpu_s_per_gb: None,
    })
}

/// Runs one read arm and fills in its CPU seconds per GB delivered (the whole process,
/// all ranks together).
pub(crate) async fn measured(
    arm: impl Future<Output = anyhow::Result<Reads>>,
) -> anyhow::Result<Reads> {
    let before = crate::rusage::now();
    let mut r = arm.await?;
    let cpu = match (before, crate::rusage::now()) {
        (Some(a), Some(b)) => Some(b.cpu_since(&a)),
        _ => None,
    };
    r.cpu_s_per_gb = super::ingest::cpu_s_per_gb(cpu, r.delivered);
    Ok(r)
}

fn reads_json(r: &Reads) -> serde_json::Value {
    json!({
        "read_amplification": round(r.amplification, 4),
        "read_amplification_all_bytes": round(r.amplification_all, 4),
        "rank_mb_per_s": round(r.rank_mb_per_s, 3),
        "p50_fetch_ms": round(r.p50_ms, 2),
        "p95_fetch_ms": round(r.p95_ms, 2),
        "requests_per_rank_step": round(r.requests_per_step, 3),
        "cpu_s_per_gb": r.cpu_s_per_gb.map(|c| round(c, 3)),
    })
}

/// Writes `steps` TGBs of `w` slices of `size` bytes in `layout` to `stream`; returns
/// their keys.
pub(crate) async fn write_stream(
    stream: &Stream,
    seed: u64,
    w: u32,
    size: usize,
    steps: u64,
    layout: SliceLayout,
) -> anyhow::Result<Vec<String>> {
    let mut p = stream
        .producer("writer")
        .settings(ProducerSettings {
            seed: Some(seed),
            slice_layout: layout,
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
    Ok(keys)
}

/// World size x slice size.
pub(crate) async fn run(env: Env) -> anyhow::Result<Outcome> {
    let (worlds, sizes, budget): (Vec<u32>, Vec<usize>, f64) = match (env.sim, env.quick) {
        (true, false) => (vec![8, 32, 128], vec![100_000, 1_000_000], 4e9),
        (true, true) => (vec![8, 32, 128], vec![100_000], 3e8),
        (false, false) => (vec![8, 32], vec![100_000, 1_000_000], 2e9),
        (false, true) => (vec![8], vec![100_000], 5e7),
    };
    // Up to 2,000 steps per arm on a real store (200 steps of 100 KB slices at W = 8 take
    // well under a second on a local directory, too short to measure) and 1,000 on the
    // simulator (where a rank's start, a listing and the first version, is a tenth of
    // 200 steps); quick runs stay at 200.
    let max_steps = match (env.sim, env.quick) {
        (_, true) => 200.0,
        (true, false) => 1_000.0,
        (false, false) => 2_000.0,
    };
    let bar = env.meter((worlds.len() * sizes.len()) as u64, "consumers");
    let mut points = Vec::new();
    let mut table = vec![format!(
        "   {:>4} {:>6} {:>5} | {:>37} | {:>28} | {:>20} | {}",
        "W",
        "slice",
        "steps",
        "range (sealed): amp MB/s/rank p50/p95",
        "dense: amp  MB/s/rank p50/p95",
        "raw GET: MB/s p50/p95",
        "range/raw  packed/raw  CPU-s/GB range/raw"
    )];
    let mut panels: Vec<Panel> = Vec::new();
    for &size in &sizes {
        let mut amp_range = Series::new("range read amplification", vec![]);
        let mut amp_dense = Series::new("dense read amplification", vec![]);
        for &w in &worlds {
            bar.set_message(format!("W={w} {}", size_label(size)));
            // Range reads and raw GETs move W * size bytes per step, dense reads W^2 *
            // size: each arm gets as many steps as the budget allows (the dense arm reads
            // the first `dense_steps` of the same TGBs).
            let steps = (budget / (f64::from(w) * size as f64)).clamp(4.0, max_steps) as u64;
            let dense_per_step = f64::from(w) * f64::from(w) * size as f64;
            let dense_steps = ((budget / dense_per_step) as u64).clamp(2, steps);
            let depth = ConsumerSettings::default().prefetch + 1;
            let fresh = env.fresh("consumers").await?;
            let stream = Stream::from_store(fresh.store.clone());
            // Equal slices: the default layout seals them (one ranged GET per rank and
            // TGB). The packed layout (footer, then slice) is read in the same run.
            let keys = write_stream(&stream, env.seed, w, size, steps, SliceLayout::Sealed).await?;
            let raw = measured(raw_get(&stream, &keys, w, size, depth)).await?;
            let range = measured(read_ranks(&stream, w, steps, ReadMode::Range)).await?;
            env.discard(fresh).await;
            let packed_fresh = env.fresh("consumers-packed").await?;
            let packed_stream = Stream::from_store(packed_fresh.store.clone());
            write_stream(
                &packed_stream,
                env.seed,
                w,
                size,
                steps,
                SliceLayout::Packed,
            )
            .await?;
            let packed = measured(read_ranks(&packed_stream, w, steps, ReadMode::Range)).await?;
            env.discard(packed_fresh).await;
            // A stream of its own, `dense_steps` long: a dense rank prefetching past the
            // steps it reads would count whole objects it never delivers.
            let dense_fresh = env.fresh("consumers-dense").await?;
            let dense_stream = Stream::from_store(dense_fresh.store.clone());
            write_stream(
                &dense_stream,
                env.seed,
                w,
                size,
                dense_steps,
                SliceLayout::Packed,
            )
            .await?;
            let dense =
                measured(read_ranks(&dense_stream, w, dense_steps, ReadMode::Dense)).await?;
            env.discard(dense_fresh).await;
            bar.inc(1);
            table.push(format!(
                "   {w:>4} {:>6} {steps:>5} | {:>6.4}x {:>8.2} {:>6.1}/{:<6.1}       | {:>6.1}x {:>8.2} {:>6.1}/{:<6.1} | {:>6.2} {:>5.1}/{:<5.1} | {:>9.2} {:>10.2}  {}",
                size_label(size),
                range.amplification, range.rank_mb_per_s, range.p50_ms, range.p95_ms,
                dense.amplification, dense.rank_mb_per_s, dense.p50_ms, dense.p95_ms,
                raw.rank_mb_per_s, raw.p50_ms, raw.p95_ms,
                ratio(range.rank_mb_per_s, raw.rank_mb_per_s),
                ratio(packed.rank_mb_per_s, raw.rank_mb_per_s),
                match (range.cpu_s_per_gb, raw.cpu_s_per_gb) {
                    (Some(a), Some(b)) => format!("{a:.2}/{b:.2}"),
                    _ => "-".into(),
                },
            ));
            amp_range.points.push((f64::from(w), range.amplification));
            amp_dense.points.push((f64::from(w), dense.amplification));
            points.push(json!({
                "world_size": w,
                "slice_bytes": size,
                "steps": steps,
                "dense_steps": dense_steps,
                "raw_get_in_flight_per_rank": depth,
                "ratio_cpu_per_gb_range_vs_raw_get": match (range.cpu_s_per_gb, raw.cpu_s_per_gb) {
                    (Some(a), Some(b)) => json!(round(ratio(a, b), 3)),
                    _ => serde_json::Value::Null,
                },
                "read_amplification": round(range.amplification, 4),
                "dense_read_amplification": round(dense.amplification, 3),
                "ratio_effective_vs_raw_get": round(ratio(range.rank_mb_per_s, raw.rank_mb_per_s), 3),
                "ratio_effective_packed_vs_raw_get": round(ratio(packed.rank_mb_per_s, raw.rank_mb_per_s), 3),
                "ratio_sealed_vs_packed_throughput": round(ratio(range.rank_mb_per_s, packed.rank_mb_per_s), 3),
                "ratio_range_vs_dense_throughput": round(ratio(range.rank_mb_per_s, dense.rank_mb_per_s), 3),
                "range": reads_json(&range),
                "range_packed": reads_json(&packed),
                "dense": reads_json(&dense),
                "raw_get": reads_json(&raw),
            }));
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
            "layouts": "range: sealed TGBs (format version 2, one ranged GET per rank and TGB, the default for equal slices); range_packed: packed TGBs (version 1, footer then slice), written and read in the same run; dense: packed",
            "read_amplification_definition": "(footer bytes + slice bytes fetched) / bytes delivered, summed over ranks (ConsumerStats); *_all_bytes adds manifest and GC-boundary reads from the per-rank store counters",
            "cpu_s_per_gb": "user + system CPU of the whole bench process (getrusage) over one arm, all ranks together, per 10^9 bytes delivered; on a real store the server's CPU is not in it",
            "raw_get_concurrency": "as many ranged GETs in flight per rank as a consumer has steps in flight (prefetch + 1), delivered in order",
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
