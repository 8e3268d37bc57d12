//! `bench exactly-once` (figure 8): the per-commit cost of the manifest-inlined
//! producer-state map, against a dummy-metadata control of the same size.
//!
//! Three single-writer streams on the same store commit one TGB per
//! operation, in alternating order on paired inputs:
//! - `state`: the real path, `rebase` (which updates this producer's entry of
//!   a 32-entry state map, checks fencing and sequence continuity) + validated
//!   encode (every rule a reader checks) + conditional create;
//! - `dummy`: the same TGB appended by hand to a manifest whose map has 32
//!   equally sized entries under other ids that nothing reads or updates;
//! - `none`: no map at all (what the map's bytes cost).
//!
//! The two controls write versions that readers refuse since the reader rules
//! (docs/format.md section 4): they are encoded unvalidated, and nothing reads
//! them. The overhead therefore includes the validation a real producer runs.

use batchweave::manifest::{
    Manifest, Pending, TgbDescriptor, encode_manifest, manifest_key, rebase, try_encode_manifest,
};
use batchweave::producer::tgb_descriptor;
use batchweave::store::StreamStore;
use batchweave::tgb::encode_tgb;
use batchweave_manifest::testing::SyntheticHistory;
use bytes::Bytes;
use serde_json::json;

use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round, size_label};

const MAP_ENTRIES: usize = 32;
const ME: &str = "p0000";
const INCARNATION: u64 = 0x5eed;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    State,
    Dummy,
    None,
}

struct Arm {
    kind: Kind,
    store: StreamStore,
    base: Manifest,
    commit: Vec<f64>,
    op: Vec<f64>,
    bytes: u64,
}

/// A version whose state map has `MAP_ENTRIES` entries under ids `<prefix>0000..`: a
/// valid (trimmed) history in which `<prefix>0000` claimed its id and committed
/// nothing, and each other entry committed `1000 + i` TGBs, all trimmed since. The
/// `p` and `d` maps differ only in the ids' first letter, so they encode to the
/// same size. The history's TGBs had the grid `dp x 1` of the TGBs the arm commits
/// (one grid per stream).
fn seeded(prefix: char, dp: u32) -> Manifest {
    let mut h = SyntheticHistory::new()
        .incarnation(INCARNATION)
        .grid(dp, 1, 64)
        .idle(format!("{prefix}0000"))
        .retain(0);
    for i in 1..MAP_ENTRIES {
        h = h.writer(format!("{prefix}{i:04}"), 1_000 + i as u64);
    }
    h.build()
}

async fn new_arm(env: &Env, kind: Kind, dp: u32) -> anyhow::Result<(Arm, super::env::Fresh)> {
    let fresh = env.fresh("exactly-once").await?;
    let base = match kind {
        Kind::State => seeded('p', dp),
        Kind::Dummy => seeded('d', dp),
        // No map: a version that only counts the (trimmed) steps of the others.
        Kind::None => {
            let m = seeded('d', dp);
            Manifest {
                producers: Default::default(),
                ..m
            }
        }
    };
    fresh
        .store
        .create(&manifest_key(base.version), encode(kind, &base)?)
        .await?;
    Ok((
        Arm {
            kind,
            store: fresh.store.clone(),
            base,
            commit: Vec::new(),
            op: Vec::new(),
            bytes: 0,
        },
        fresh,
    ))
}

/// The `state` arm encodes as a producer does (validated: every rule a reader checks).
/// The controls write what a writer without exactly-once state would: versions that
/// readers now refuse (rules `producer-entry`, `producer-totals`, `one-committer`), so
/// they are encoded unvalidated; nothing reads them.
fn encode(kind: Kind, m: &Manifest) -> anyhow::Result<Bytes> {
    Ok(match kind {
        Kind::State => try_encode_manifest(m, &Default::default())?,
        Kind::Dummy | Kind::None => encode_manifest(m),
    })
}

impl Arm {
    /// Uploads one TGB and commits it; records latencies in seconds.
    async fn op(&mut self, seq: u64, dp: u32, slices: &[Bytes]) -> anyhow::Result<()> {
        let clock = self.store.clock().clone();
        let t0 = clock.now();
        let enc = encode_tgb(dp, 1, slices.to_vec())?;
        let desc = tgb_descriptor(&enc, ME, 1, seq, seq);
        self.store
            .put_payload(&desc.key, enc.parts.iter().cloned().collect())
            .await?;
        let t1 = clock.now();
        let now_ms = clock.unix_millis();
        let candidate = match self.kind {
            Kind::State => rebase(
                &self.base,
                &Pending {
                    producer_id: ME.into(),
                    epoch: 1,
                    incarnation: INCARNATION,
                    tgbs: vec![desc],
                    source_offset: seq,
                    now_ms,
                },
                0,
            )?,
            Kind::Dummy | Kind::None => {
                let mut m = self.base.clone();
                m.version += 1;
                m.retained_bytes += desc.object_size;
                m.total_tgbs += 1;
                m.committed_at_ms = now_ms;
                m.tgbs.push(TgbDescriptor {
                    visible_version: m.version,
                    ..desc
                });
                m
            }
        };
        let bytes = encode(self.kind, &candidate)?;
        self.bytes += bytes.len() as u64;
        self.store
            .create(&manifest_key(candidate.version), bytes)
            .await?;
        let t2 = clock.now();
        self.base = candidate;
        self.commit
            .push(t2.saturating_duration_since(t1).as_secs_f64());
        self.op.push(t2.saturating_duration_since(t0).as_secs_f64());
        Ok(())
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The median: robust to the page-cache writeback spikes of a real disk.
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if !n.is_multiple_of(2) => s.get(n / 2).copied().unwrap_or(0.0),
        n => {
            (s.get(n / 2 - 1).copied().unwrap_or(0.0) + s.get(n / 2).copied().unwrap_or(0.0)) / 2.0
        }
    }
}

/// The sweep over payload and TGB size.
pub(crate) async fn run(env: Env) -> anyhow::Result<Outcome> {
    let (payloads, tgbs, ops): (Vec<usize>, Vec<u32>, usize) = match (env.sim, env.quick) {
        (true, false) => (vec![100_000, 1_000_000, 10_000_000], vec![8, 32, 128], 200),
        (true, true) => (vec![100_000, 1_000_000], vec![8, 128], 40),
        (false, false) => (vec![100_000, 1_000_000, 10_000_000], vec![8, 32, 128], 60),
        (false, true) => (vec![100_000], vec![8, 128], 15),
    };
    let bar = env.meter((payloads.len() * tgbs.len()) as u64, "exactly-once");
    let mut points = Vec::new();
    let mut table = vec![format!(
        "   {:>7} {:>4} | {:>10} {:>10} {:>10} | {:>9} {:>9} | {:>11} {:>11}",
        "payload",
        "TGB",
        "state ms",
        "dummy ms",
        "none ms",
        "overhead",
        "op ovh",
        "state bytes",
        "dummy bytes"
    )];
    let mut lines: Vec<Series> = tgbs
        .iter()
        .map(|t| Series::new(format!("TGB={t}"), vec![]))
        .collect();
    for &payload in &payloads {
        for (ti, &dp) in tgbs.iter().enumerate() {
            bar.set_message(format!("{} TGB={dp}", size_label(payload)));
            let per = (payload / dp as usize).max(1);
            let slices: Vec<Bytes> = (0..dp).map(|_| Bytes::from(vec![0x42; per])).collect();
            let mut arms = Vec::new();
            let mut fresh = Vec::new();
            for k in [Kind::State, Kind::Dummy, Kind::None] {
                let (a, f) = new_arm(&env, k, dp).await?;
                arms.push(a);
                fresh.push(f);
            }
            // Fewer operations for big payloads on a real disk.
            let n = if env.sim {
                ops
            } else {
                ops.min((2_000_000_000 / payload / 3).max(5))
            };
            for i in 0..n {
                let seq = i as u64 + 1;
                // Rotate the order so no arm always goes first.
                for j in 0..arms.len() {
                    let idx = (i + j) % arms.len();
                    if let Some(a) = arms.get_mut(idx) {
                        a.op(seq, dp, &slices).await?;
                    }
                }
            }
            let [s, d, z] = [&arms[0], &arms[1], &arms[2]]
                .map(|a| (median(&a.commit), median(&a.op), a.bytes / n.max(1) as u64));
            let overhead = ratio(s.0, d.0) - 1.0;
            let op_overhead = ratio(s.1, d.1) - 1.0;
            let vs_none = ratio(s.0, z.0) - 1.0;
            table.push(format!(
                "   {:>7} {dp:>4} | {:>10.3} {:>10.3} {:>10.3} | {:>8.1}% {:>8.1}% | {:>11} {:>11}",
                size_label(payload),
                s.0 * 1e3,
                d.0 * 1e3,
                z.0 * 1e3,
                overhead * 100.0,
                op_overhead * 100.0,
                s.2,
                d.2
            ));
            if let Some(l) = lines.get_mut(ti) {
                l.points.push((payload as f64 / 1e6, overhead * 100.0));
            }
            points.push(json!({
                "payload_bytes": payload,
                "tgb_slices": dp,
                "ops": n,
                "commit_ms": { "state": round(s.0 * 1e3, 4), "dummy": round(d.0 * 1e3, 4), "none": round(z.0 * 1e3, 4) },
                "op_ms": { "state": round(s.1 * 1e3, 4), "dummy": round(d.1 * 1e3, 4), "none": round(z.1 * 1e3, 4) },
                "mean_manifest_bytes": { "state": s.2, "dummy": d.2, "none": z.2 },
                "overhead": round(overhead, 4),
                "op_overhead": round(op_overhead, 4),
                "overhead_vs_no_map": round(vs_none, 4),
            }));
            for f in fresh {
                env.discard(f).await;
            }
            bar.inc(1);
        }
    }
    bar.finish();
    let over: Vec<f64> = points
        .iter()
        .filter_map(|p| p["overhead"].as_f64())
        .collect();
    let worst = over.iter().copied().fold(f64::MIN, f64::max);
    let best = over.iter().copied().fold(f64::MAX, f64::min);
    table.push(format!(
        "   commit-latency overhead of the state map vs a same-size dummy: {:.1}% .. {:.1}% (mean {:.1}%)",
        best * 100.0, worst * 100.0, mean(&over) * 100.0
    ));
    Ok(Outcome {
        json: json!({
            "map_entries": MAP_ENTRIES,
            "definition": "overhead = median commit latency (build candidate + encode + conditional create) with the producer-state map / with a same-size dummy map - 1; op_overhead includes the TGB upload",
            "overhead": round(worst, 4),
            "overhead_min": round(best, 4),
            "overhead_mean": round(mean(&over), 4),
            "points": points,
            "note": if env.sim { "sim store: CPU time is free in virtual time, so equal-size manifests cost the same; run on a real store to see the CPU share" } else { "wall-clock time on a real store" },
        }),
        table,
        chart: Chart::of(vec![Panel {
            title: "Exactly-once overhead (commit latency)".into(),
            x_label: "payload MB".into(),
            y_label: "% over dummy".into(),
            series: lines,
            ..Default::default()
        }]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use batchweave::manifest::{DecodeLimits, validate};

    #[test]
    fn dummy_map_is_the_same_size_as_the_state_map() {
        let (a, b) = (seeded('p', 8), seeded('d', 8));
        validate(&a, &DecodeLimits::default()).unwrap();
        assert_eq!(a.producers.len(), MAP_ENTRIES);
        assert_eq!(a.producers[ME].incarnation, INCARNATION);
        assert_eq!((a.producers[ME].last_sequence, a.tgbs.len()), (0, 0));
        let ea = try_encode_manifest(&a, &Default::default()).unwrap();
        let eb = try_encode_manifest(&b, &Default::default()).unwrap();
        assert_eq!(ea.len(), eb.len());
        // The state arm's first commit goes through the real rebase.
        let slices = (0..8).map(|_| Bytes::from_static(b"x")).collect();
        let enc = encode_tgb(8, 1, slices).unwrap();
        let pending = Pending {
            producer_id: ME.into(),
            epoch: 1,
            incarnation: INCARNATION,
            tgbs: vec![tgb_descriptor(&enc, ME, 1, 1, 1)],
            source_offset: 1,
            now_ms: 1,
        };
        let next = rebase(&a, &pending, 0).unwrap();
        validate(&next, &DecodeLimits::default()).unwrap();
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert!(
            ea.len() > 32 * 20,
            "the map is not trivially small: {}",
            ea.len()
        );
    }
}
