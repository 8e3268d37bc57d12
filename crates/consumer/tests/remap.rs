//! Topology remap: consumers whose DP/CP differ from the stream's grid.

mod common;

use std::collections::BTreeMap;

use batchweave_consumer::{ConsumerError, ConsumerSettings, ConsumerState};
use batchweave_store::StreamStore;
use batchweave_tgb::{Grid, MeshConfig, steps_covered};
use bytes::Bytes;
use common::{Sim, builder, check_batch, config, fast, payload};

/// A delivered unit: (TGB step, slice id, part index, parts).
type Unit = (u64, u32, u32, u32);

/// Runs every rank of mesh `[dp, cp, tp, 1]` over all steps the stream covers and returns,
/// per unit, the DP replicas and bytes it went to, checking every batch's bytes.
async fn run_mesh(sim: &Sim, degrees: [u32; 4]) -> BTreeMap<Unit, Vec<(u64, u32, Bytes)>> {
    let head = sim.head().await;
    let [dp, cp, tp, pp] = degrees;
    let world = dp * cp * tp * pp;
    let steps = steps_covered(
        Grid::new(sim.dp, sim.cp),
        Grid::new(dp, cp),
        head.total_tgbs,
    )
    .unwrap();
    assert!(steps >= 4, "mesh {degrees:?} covers only {steps} steps");
    let mesh = MeshConfig::new(world, dp, cp, tp, pp);
    let mut units: BTreeMap<Unit, Vec<(u64, u32, Bytes)>> = BTreeMap::new();
    let mut per_rank = Vec::new();
    for rank in 0..world {
        let mut c = builder(sim.store.clone(), config(rank, degrees, "remap"))
            .open()
            .await
            .unwrap();
        let pos = mesh.position(rank).unwrap();
        assert_eq!(c.position(), pos);
        let mut got = Vec::new();
        for want in 0..steps {
            let b = c.next().await.unwrap();
            assert_eq!(b.step, want);
            check_batch(sim, &head, &b);
            got.push(b.sources.clone());
            // TP ranks of one position deliver the same bytes: record each unit once per
            // (d, c), i.e. only for tp == 0.
            if rank % tp != 0 {
                continue;
            }
            for (data, s) in b.data.iter().zip(&b.sources) {
                let (part, parts) = s.part.unwrap_or((0, 1));
                if s.slice_count == 1 {
                    units
                        .entry((s.tgb_step, s.first_slice, part, parts))
                        .or_default()
                        .push((b.step, pos.d, data.clone()));
                } else {
                    // A run of m slices: one unit per slice.
                    let mut off = 0;
                    for sl in s.first_slice..s.first_slice + s.slice_count {
                        let p = payload(&s.producer_id, s.sequence, sl);
                        let piece = data.slice(off..off + p.len());
                        off += p.len();
                        units
                            .entry((s.tgb_step, sl, 0, 1))
                            .or_default()
                            .push((b.step, pos.d, piece));
                    }
                }
            }
        }
        per_rank.push((pos, got));
    }
    // Ranks of one (d, c) read the same sources at every step.
    for (pos, got) in &per_rank {
        for (other_pos, other) in &per_rank {
            if pos == other_pos {
                assert_eq!(got, other);
            }
        }
    }
    units
}

/// Every slice of every TGB the run covered is delivered exactly once (as a whole slice,
/// or as all its parts exactly once each), to exactly one DP replica at one step.
fn assert_exactly_once(units: &BTreeMap<Unit, Vec<(u64, u32, Bytes)>>, sim: &Sim, tgbs: u64) {
    let slices = sim.dp * sim.cp;
    let mut whole: BTreeMap<(u64, u32), Vec<u8>> = BTreeMap::new();
    let mut parts_seen: BTreeMap<(u64, u32), Vec<u32>> = BTreeMap::new();
    for (&(t, sl, part, parts), deliveries) in units {
        assert_eq!(
            deliveries.len(),
            1,
            "unit {t}/{sl} part {part}/{parts}: {deliveries:?}"
        );
        parts_seen.entry((t, sl)).or_default().push(part);
        let (_, _, bytes) = &deliveries[0];
        whole.entry((t, sl)).or_default().extend_from_slice(bytes);
        assert!(parts_seen[&(t, sl)].len() as u32 <= parts);
    }
    assert_eq!(
        whole.len() as u64,
        tgbs * u64::from(slices),
        "slices delivered"
    );
    for ((t, sl), bytes) in &whole {
        // Units are ordered by part: the parts reassemble the slice exactly.
        let seq = t + 1; // the stream is one producer, sequence = step + 1
        assert_eq!(bytes[..], payload("p", seq, *sl)[..], "TGB {t} slice {sl}");
    }
}

async fn stream(dp: u32, cp: u32, tgbs: u64) -> Sim {
    let sim = Sim::new(StreamStore::in_memory(), dp, cp);
    sim.produce("p", 1, tgbs, 3).await;
    sim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dp_doubled_reads_two_tgbs_per_step() {
    let sim = stream(2, 2, 8).await;
    let units = run_mesh(&sim, [4, 2, 1, 1]).await;
    assert_exactly_once(&units, &sim, 8);
    // Step k: replicas 0, 1 read TGB 2k; replicas 2, 3 read TGB 2k+1.
    for (&(t, _, _, _), d) in &units {
        let (step, replica, _) = &d[0];
        assert_eq!(t, 2 * step + u64::from(*replica / 2));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dp_halved_serves_one_tgb_over_two_steps() {
    let sim = stream(4, 1, 6).await;
    let units = run_mesh(&sim, [2, 1, 2, 1]).await;
    assert_exactly_once(&units, &sim, 6);
    for (&(t, sl, _, _), d) in &units {
        let (step, replica, _) = &d[0];
        assert_eq!(t, step / 2);
        assert_eq!(sl, (step % 2) as u32 * 2 + replica);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_doubled_cuts_each_slice_into_parts() {
    let sim = stream(2, 2, 5).await;
    let units = run_mesh(&sim, [2, 4, 1, 1]).await;
    assert_exactly_once(&units, &sim, 5);
    assert!(units.keys().all(|u| u.3 == 2), "every unit is a half slice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cp_halved_reads_adjacent_slices_in_one_range() {
    let sim = stream(2, 2, 5).await;
    let units = run_mesh(&sim, [2, 1, 1, 1]).await;
    assert_exactly_once(&units, &sim, 5);
    // One ranged GET per TGB for the two slices of a replica.
    let cfg = config(1, [2, 1, 1, 1], "one");
    let settings = ConsumerSettings {
        prefetch: 0,
        // Counting this step's requests only.
        footer_lookahead: 0,
        ..fast()
    };
    let mut c = builder(sim.store.clone(), cfg)
        .settings(settings)
        .open()
        .await
        .unwrap();
    let b = c.next().await.unwrap();
    assert_eq!((b.sources[0].first_slice, b.sources[0].slice_count), (2, 2));
    let s = c.stats();
    assert_eq!(s.slice_bytes, b.data[0].len() as u64);
    assert_eq!(s.store.range_gets, 2, "footer + one run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_at_another_dp_converts_the_step() {
    let sim = stream(2, 1, 12).await;
    let head = sim.head().await;
    // Checkpoint at DP=2, step 4 (DP-slice 8 = TGB 4).
    let state = ConsumerState {
        version: 1,
        next_step: 4,
        dp: 2,
        cp: 1,
        group: "g".into(),
    };
    // DP=4: step 2, replica 3 reads DP-slice 11 = TGB 5 slice 1.
    let mut c = builder(sim.store.clone(), config(3, [4, 1, 1, 1], "g"))
        .state(state.clone())
        .open()
        .await
        .unwrap();
    let b = c.next().await.unwrap();
    check_batch(&sim, &head, &b);
    assert_eq!(
        (b.step, b.sources[0].tgb_step, b.sources[0].first_slice),
        (2, 5, 1)
    );
    assert_eq!(c.state().dp, 4);
    // DP=1: step 8, replica 0 reads TGB 4 slice 0.
    let mut c = builder(sim.store.clone(), config(0, [1, 1, 1, 1], "g"))
        .state(state.clone())
        .open()
        .await
        .unwrap();
    let b = c.next().await.unwrap();
    assert_eq!(
        (b.step, b.sources[0].tgb_step, b.sources[0].first_slice),
        (8, 4, 0)
    );
    // DP=3: 8 DP-slices is not a whole number of steps.
    let err = builder(sim.store.clone(), config(0, [3, 1, 1, 1], "g"))
        .state(state.clone())
        .open()
        .await
        .unwrap_err();
    assert!(matches!(err, ConsumerError::Remap { .. }), "{err}");
    assert!(err.to_string().contains("DP=2"), "{err}");
}
