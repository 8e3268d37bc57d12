//! End-to-end: many ranks of one stream while producers commit, atomic visibility under
//! stale manifest reads, read amplification from the store counters.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use batchweave_consumer::{Consumer, ConsumerSettings, ReadMode};
use batchweave_manifest::{find_step, tgb_key};
use batchweave_store::{FaultOp, FaultRule, FaultStore, StreamStore};
use common::{Sim, builder, check_batch, config, digest, fast, fresh_stores};
use tokio::time::timeout;

/// (consumer step, TGB step, key, digest of the bytes) per batch.
type Log = Vec<(u64, u64, String, u64)>;

async fn consume(mut c: Consumer, steps: u64) -> (Log, Vec<batchweave_consumer::Batch>) {
    let mut log = Vec::new();
    let mut batches = Vec::new();
    for want in 0..steps {
        let b = timeout(Duration::from_secs(60), c.next())
            .await
            .unwrap_or_else(|_| panic!("rank timed out waiting for step {want}"))
            .unwrap();
        assert_eq!(b.step, want);
        let s = &b.sources[0];
        log.push((b.step, s.tgb_step, s.key.clone(), digest(&b.data[0])));
        batches.push(b);
    }
    (log, batches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_ranks_see_identical_steps_while_producers_commit() {
    // TGB grid 4 x 2; consumer mesh DP=4, CP=2, TP=2 (W = 16): two ranks per slice.
    let (producers, per_producer) = (3u64, 8u64);
    let steps = producers * per_producer;
    for (target, store) in fresh_stores("consumer-e2e").await {
        let sim = Sim::new(store.clone(), 4, 2);
        let mut committers = Vec::new();
        for p in 0..producers {
            let sim = sim.clone();
            committers.push(tokio::spawn(async move {
                let id = format!("prep-{p}");
                for seq in 1..=per_producer {
                    let t = sim.write_tgb(&id, seq).await;
                    sim.commit(&id, vec![t]).await;
                    sim.store.clock().sleep(Duration::from_millis(2 + p)).await;
                }
            }));
        }
        let mut ranks = Vec::new();
        for rank in 0..16 {
            let c = builder(store.clone(), config(rank, [4, 2, 2, 1], "train"))
                .open()
                .await
                .unwrap();
            ranks.push(tokio::spawn(consume(c, steps)));
        }
        for c in committers {
            c.await.unwrap();
        }
        let head = sim.head().await;
        assert_eq!(head.total_tgbs, steps);
        let mut by_slice: BTreeMap<(u64, u32), HashSet<u64>> = BTreeMap::new();
        let mut first: Option<Vec<(u64, String)>> = None;
        for (rank, h) in ranks.into_iter().enumerate() {
            let (log, batches) = h.await.unwrap();
            for b in &batches {
                check_batch(&sim, &head, b);
                let s = &b.sources[0];
                by_slice
                    .entry((s.tgb_step, s.first_slice))
                    .or_default()
                    .insert(digest(&b.data[0]));
            }
            let seq: Vec<(u64, String)> = log.iter().map(|l| (l.1, l.2.clone())).collect();
            match &first {
                None => first = Some(seq),
                Some(f) => assert_eq!(f, &seq, "{}: rank {rank} differs", target.name),
            }
        }
        // Every (TGB, slice) was delivered, and the two TP ranks of a slice got the same bytes.
        assert_eq!(by_slice.len() as u64, steps * 8, "{}", target.name);
        assert!(by_slice.values().all(|d| d.len() == 1), "{}", target.name);
        println!("{}: 16 ranks agree on {steps} steps", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_manifest_reads_never_expose_an_uncommitted_tgb() {
    let base = StreamStore::in_memory();
    let fault = Arc::new(FaultStore::new(
        base.backend().clone(),
        vec![FaultRule {
            ops: vec![FaultOp::Read, FaultOp::List],
            path_contains: Some("manifests/".into()),
            stale_read: 0.5,
            ..Default::default()
        }],
        7,
        base.clock().clone(),
    ));
    let faulty = base.map_backend(|_| fault.clone());
    let sim = Sim::new(base.clone(), 2, 1);
    let steps = 20u64;
    let committer = {
        let sim = sim.clone();
        tokio::spawn(async move {
            for seq in 1..=steps {
                let t = sim.write_tgb("p", seq).await;
                // Objects of the next two sequences exist before they are committed.
                sim.write_tgb("p", seq + 1).await;
                sim.write_tgb("p", seq + 2).await;
                sim.commit("p", vec![t]).await;
                sim.store.clock().sleep(Duration::from_millis(3)).await;
            }
        })
    };
    let mut seen = Vec::new();
    let mut c = builder(faulty.clone(), config(1, [2, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    for want in 0..steps {
        let b = timeout(Duration::from_secs(30), c.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(b.step, want);
        // The TGB is in the version the batch was planned from, at that step.
        let m = sim.read_version(b.version).await.expect("version exists");
        let d = find_step(&m, b.sources[0].tgb_step).expect("TGB visible in that version");
        assert_eq!(d.key, b.sources[0].key);
        assert!(b.sources[0].visible_version <= b.version);
        seen.push(b);
    }
    committer.await.unwrap();
    let head = sim.head().await;
    for b in &seen {
        check_batch(&sim, &head, b);
    }
    assert!(fault.stats().stale > 0, "no stale read was injected");
    // Nothing more is visible: the pre-written objects of seq 21 and 22 stay invisible.
    assert!(timeout(Duration::from_millis(100), c.next()).await.is_err());
    assert!(
        base.get_opt(&tgb_key("p", 1, 21), 1 << 20)
            .await
            .unwrap()
            .is_some()
    );
}

async fn run_amplification(mode: ReadMode, store: &StreamStore, sim: &Sim, steps: u64) -> f64 {
    let cfg = config(5, [4, 2, 1, 1], "amp");
    let settings = ConsumerSettings {
        read_mode: mode,
        prefetch: 0,
        // Exact per-step accounting below: no footer read ahead.
        footer_lookahead: 0,
        ..fast()
    };
    let mut c = builder(store.clone(), cfg)
        .settings(settings)
        .open()
        .await
        .unwrap();
    let head = sim.head().await;
    let mut slice_total = 0u64;
    for _ in 0..steps {
        let b = c.next().await.unwrap();
        check_batch(sim, &head, &b);
        slice_total += b.data[0].len() as u64;
        if mode == ReadMode::Range {
            // Per TGB: at most (slice + footer) / slice.
            let d = find_step(&head, b.sources[0].tgb_step).unwrap();
            let per = c.stats();
            assert_eq!(
                per.slice_bytes, slice_total,
                "only the slice bytes were fetched"
            );
            assert_eq!(u64::from(d.footer_length) * (b.step + 1), per.footer_bytes);
        }
    }
    let s = c.stats();
    // Everything the store counted is accounted for, manifests separately.
    assert_eq!(
        s.bytes_fetched,
        s.manifest_bytes + s.footer_bytes + s.slice_bytes,
        "{s:?}"
    );
    assert_eq!(s.bytes_delivered, slice_total);
    assert_eq!(
        s.store.lists, s.boundary_reads,
        "steady state lists nothing but the boundary log"
    );
    match mode {
        ReadMode::Range => {
            let footers: u64 = head.tgbs.iter().map(|d| u64::from(d.footer_length)).sum();
            assert_eq!(s.slice_bytes, s.bytes_delivered);
            assert_eq!(s.footer_bytes, footers);
            assert_eq!(s.footers_read, steps);
            assert_eq!(
                s.store.range_gets,
                2 * steps,
                "one footer + one slice GET per TGB"
            );
            let bound = (slice_total + footers) as f64 / slice_total as f64;
            assert!(s.read_amplification() <= bound + 1e-9);
        }
        ReadMode::Dense => {
            let objects: u64 = head.tgbs.iter().map(|d| d.object_size).sum();
            assert_eq!(s.slice_bytes, objects);
            assert_eq!(s.footers_read, 0);
        }
    }
    s.read_amplification()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_reads_fetch_only_the_slice_and_footer() {
    for (target, store) in fresh_stores("consumer-amp").await {
        let mut sim = Sim::new(store.clone(), 4, 2);
        sim.spread = 4096; // slices of 48 .. 4144 bytes
        sim.produce("p", 1, 6, 2).await;
        let range = run_amplification(ReadMode::Range, &store, &sim, 6).await;
        let dense = run_amplification(ReadMode::Dense, &store, &sim, 6).await;
        println!(
            "{}: amplification range {range:.3}, dense {dense:.3}",
            target.name
        );
        assert!(range < 1.2, "{}: {range}", target.name);
        assert!(
            dense > 4.0,
            "{}: dense {dense} should be about D*C = 8",
            target.name
        );
    }
}

/// Waits (at most about 30 s) until `c` has read `n` footers.
async fn footers_read(c: &Consumer, store: &StreamStore, n: u64) {
    for _ in 0..30_000 {
        if c.stats().footers_read >= n {
            return;
        }
        store.clock().sleep(Duration::from_millis(1)).await;
    }
    panic!("only {} footers read, expected {n}", c.stats().footers_read);
}

/// With `footer_lookahead`, the footers of visible steps are read in the background
/// ahead of their steps, each once: every step after the first is then one ranged GET on
/// the critical path (a footer-cache hit), and the totals are those of reading without
/// lookahead. Without it, no step finds its footer cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn footers_of_visible_steps_are_read_ahead_once() {
    for (target, store) in fresh_stores("footer-ahead").await {
        let sim = Sim::new(store.clone(), 2, 1);
        // One version: the lookahead covers what the held manifest lists.
        sim.produce("p", 1, 8, 8).await; // v1: steps 0..7
        let head = sim.head().await;
        for ahead in [0usize, 3] {
            let settings = ConsumerSettings {
                prefetch: 0,
                footer_lookahead: ahead,
                ..fast()
            };
            let mut c = builder(store.clone(), config(1, [2, 1, 1, 1], "ahead"))
                .settings(settings)
                .open()
                .await
                .unwrap();
            for step in 0..8u64 {
                let b = c.next().await.unwrap();
                assert_eq!(b.step, step);
                check_batch(&sim, &head, &b);
                // The footers of the next `ahead` steps are read before we go on.
                footers_read(&c, &store, (step + 1 + ahead as u64).min(8)).await;
            }
            let s = c.stats();
            assert_eq!(s.footers_read, 8, "{}: each footer once", target.name);
            assert_eq!(
                s.store.range_gets, 16,
                "{}: footer + slice per TGB",
                target.name
            );
            let want_hits = if ahead == 0 { 0 } else { 7 };
            assert_eq!(
                s.footer_cache_hits, want_hits,
                "{} (lookahead {ahead}): steps that found their footer read ahead",
                target.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_consumer_gets_the_next_version_without_listing() {
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("p", 1, 1, 1).await;
    let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    assert_eq!(c.next().await.unwrap().step, 0);
    let late = {
        let sim = sim.clone();
        tokio::spawn(async move {
            sim.store.clock().sleep(Duration::from_millis(80)).await;
            sim.produce("p", 2, 1, 1).await;
        })
    };
    let b = timeout(Duration::from_secs(10), c.next())
        .await
        .unwrap()
        .unwrap();
    late.await.unwrap();
    assert_eq!((b.step, b.version), (1, 2));
    let s = c.stats();
    assert_eq!(s.stalls, 1);
    assert!(s.stall_time >= Duration::from_millis(60), "{s:?}");
    assert_eq!(
        s.store.lists, s.boundary_reads,
        "polling must GET v+1, not list the manifests"
    );
    // Backoff doubles from 1 ms to 20 ms: about 10 polls in 80 ms, not 80.
    assert!(s.store.gets < 20, "{} GETs while waiting", s.store.gets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_far_behind_jumps_to_the_newest_version_with_one_listing() {
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("p", 1, 10, 1).await; // versions 1..=10, one TGB each
    let cfg = config(0, [1, 1, 1, 1], "g");
    let settings = ConsumerSettings {
        prefetch: 0,
        ..fast()
    };
    let state = batchweave_consumer::ConsumerState {
        version: 1,
        next_step: 7,
        dp: 1,
        cp: 1,
        group: "g".into(),
    };
    let mut c = builder(store.clone(), cfg)
        .settings(settings)
        .state(state)
        .open()
        .await
        .unwrap();
    let b = c.next().await.unwrap();
    assert_eq!((b.step, b.version), (7, 10));
    let s = c.stats();
    // v1 (the cursor), v2 (does not cover step 7), then one listing and v10;
    // the boundary after each of the three adoptions.
    assert_eq!(
        (
            s.manifests_read,
            s.store.lists - s.boundary_reads,
            s.boundary_reads,
            s.stalls
        ),
        (3, 1, 3, 0),
        "{s:?}"
    );
    check_batch(&sim, &sim.head().await, &b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_runs_ahead_but_stays_bounded() {
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("p", 1, 30, 30).await;
    let cfg = config(0, [1, 1, 1, 1], "g");
    let settings = ConsumerSettings {
        prefetch: 4,
        footer_lookahead: 8,
        ..fast()
    };
    let mut c = builder(store.clone(), cfg)
        .settings(settings)
        .open()
        .await
        .unwrap();
    c.next().await.unwrap();
    store.clock().sleep(Duration::from_millis(100)).await;
    let s = c.stats();
    // Step 0 plus four steps ahead, each a footer and a slice GET, and the footers of the
    // eight steps after those; nothing beyond.
    assert_eq!(s.store.range_gets, 10 + 8, "{s:?}");
    assert_eq!(s.footers_read, 5 + 8, "{s:?}");
    assert!(s.slice_bytes > s.bytes_delivered);
    for want in 1..30 {
        assert_eq!(c.next().await.unwrap().step, want);
        assert!(c.stats().footers_cached <= 6 + 8, "{:?}", c.stats());
    }
    let s = c.stats();
    assert_eq!(
        s.slice_bytes, s.bytes_delivered,
        "all prefetched steps delivered"
    );
    assert_eq!(s.fetch_latency.samples, 30);
    assert!(s.fetch_latency.p50 <= s.fetch_latency.p99);
}
