//! Reclamation rules: low-water mark, boundary, deletion, orphans, crash
//! convergence and the ghost-commit race.

use std::sync::Arc;
use std::time::Duration;

use batchweave_gc::{GcSettings, Reclaimer};
use batchweave_manifest::{
    DecodeLimits, GroupLayout, Manifest, Watermark, decode_manifest, encode_group_layout,
    encode_watermark, group_layout_key, manifest_key, parse_manifest_key, watermark_key,
};
use batchweave_producer::{FailPoint, FailPoints, Producer, ProducerSettings};
use batchweave_store::testing::all_targets;
use batchweave_store::{
    Clock, FaultOp, FaultRule, FaultStore, RetryPolicy, StreamStore, TokioClock,
};
use bytes::Bytes;

fn psettings() -> ProducerSettings {
    ProducerSettings {
        policy: "naive".parse().unwrap(),
        seed: Some(1),
        ..Default::default()
    }
}

async fn produce(store: &StreamStore, id: &str, n: u64) {
    produce_with(store, id, n, &psettings()).await;
}

async fn produce_with(store: &StreamStore, id: &str, n: u64, settings: &ProducerSettings) {
    let mut p = Producer::builder(store.clone(), id)
        .settings(settings.clone())
        .open()
        .await
        .unwrap();
    let from = p.committed_offset();
    for off in from + 1..=from + n {
        p.append(1, 1, vec![Bytes::from(format!("{id}-{off}"))], off)
            .await
            .unwrap();
        p.flush().await.unwrap();
    }
    p.close().await.unwrap();
}

async fn versions(store: &StreamStore) -> Vec<u64> {
    let mut v: Vec<u64> = store
        .list("manifests")
        .await
        .unwrap()
        .iter()
        .filter_map(|o| parse_manifest_key(&o.key))
        .collect();
    v.sort_unstable();
    v
}

async fn newest(store: &StreamStore) -> Manifest {
    let v = *versions(store).await.last().unwrap();
    decode_manifest(
        &store.get(&manifest_key(v), 1 << 30).await.unwrap(),
        &DecodeLimits::default(),
    )
    .unwrap()
}

async fn set_layout(store: &StreamStore, group: &str, dp: u32, cp: u32) {
    let l = GroupLayout {
        dp,
        cp,
        updated_at_ms: 0,
        ..Default::default()
    };
    store
        .put(&group_layout_key(group).unwrap(), encode_group_layout(&l))
        .await
        .unwrap();
}

async fn set_mark(store: &StreamStore, group: &str, pos: &str, version: u64, step: u64) {
    let w = Watermark {
        version,
        step,
        updated_at_ms: store.clock().unix_millis(),
    };
    store
        .put(&watermark_key(group, pos).unwrap(), encode_watermark(&w))
        .await
        .unwrap();
}

/// A reclaimer whose clock runs two hours ahead, with the default orphan grace of one
/// hour: every uncommitted object is an orphan to it. (A zero grace is refused: the
/// test producers record the default `max_commit_age` of 30 minutes.)
fn gc(store: &StreamStore) -> Reclaimer {
    gc_with(store, GcSettings::default())
}

fn gc_with(store: &StreamStore, settings: GcSettings) -> Reclaimer {
    let ahead = TokioClock::system().unix_millis() + 2 * 3600 * 1000;
    Reclaimer::new(
        store
            .clone()
            .with_clock(Arc::new(TokioClock::with_base(ahead))),
        settings,
    )
}

#[tokio::test]
async fn low_water_is_the_minimum_and_missing_positions_hold_it_at_zero() {
    let store = StreamStore::in_memory();
    set_layout(&store, "train", 2, 1).await;
    set_mark(&store, "train", "d0-c0", 7, 30).await;
    let lw = gc(&store).low_water().await.unwrap();
    assert_eq!(lw.step, Some(0), "d1-c0 has not checkpointed yet");
    set_mark(&store, "train", "d1-c0", 5, 20).await;
    let lw = gc(&store).low_water().await.unwrap();
    assert_eq!((lw.step, lw.version), (Some(20), Some(5)));
    set_layout(&store, "eval", 1, 1).await;
    set_mark(&store, "eval", "d0-c0", 9, 12).await;
    let lw = gc(&store).low_water().await.unwrap();
    assert_eq!(
        (lw.step, lw.version),
        (Some(12), Some(5)),
        "minimum over groups, per field"
    );
    assert_eq!(gc(&store).retire_group("eval").await.unwrap(), 2);
    assert_eq!(gc(&store).low_water().await.unwrap().step, Some(20));
}

#[tokio::test]
async fn dead_groups_are_ignored_only_when_configured() {
    let store = StreamStore::in_memory();
    set_layout(&store, "old", 1, 1).await;
    let w = Watermark {
        version: 1,
        step: 1,
        updated_at_ms: 1,
    };
    store
        .put(
            &watermark_key("old", "d0-c0").unwrap(),
            encode_watermark(&w),
        )
        .await
        .unwrap();
    set_layout(&store, "live", 1, 1).await;
    set_mark(&store, "live", "d0-c0", 4, 40).await;
    assert_eq!(gc(&store).low_water().await.unwrap().step, Some(1));
    let r = Reclaimer::new(
        store.clone(),
        GcSettings {
            dead_group_after: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    );
    assert_eq!(r.low_water().await.unwrap().step, Some(40));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reclaims_below_the_mark_and_never_at_or_above_it_on_every_store() {
    for t in all_targets() {
        let store = t.open_fresh("gc-basic").await.unwrap();
        produce(&store, "p", 12).await;
        let before = newest(&store).await;
        let mark_version = before.version - 3;
        set_layout(&store, "g", 1, 1).await;
        set_mark(&store, "g", "d0-c0", mark_version, 8).await;

        let dry = Reclaimer::new(
            store.clone(),
            GcSettings {
                dry_run: true,
                ..Default::default()
            },
        )
        .run_once()
        .await
        .unwrap();
        assert_eq!(dry.tgbs_deleted, 8, "{}", t.name);
        assert_eq!(
            versions(&store).await.len() as u64,
            before.version,
            "{}: dry run deleted nothing",
            t.name
        );

        let r = gc(&store).run_once().await.unwrap();
        assert_eq!(
            (
                r.tgbs_deleted,
                r.boundary.low_water_step,
                r.boundary.min_live_version
            ),
            (8, 8, mark_version),
            "{}",
            t.name
        );
        assert_eq!(r.manifests_deleted, mark_version - 1, "{}", t.name);
        assert_eq!(
            versions(&store).await.first(),
            Some(&mark_version),
            "{}",
            t.name
        );
        for (i, d) in before.tgbs.iter().enumerate() {
            let exists = store.head(&d.key).await.is_ok();
            assert_eq!(exists, i >= 8, "{}: step {i} {}", t.name, d.key);
        }
        // The next commit trims the descriptors below the mark.
        produce(&store, "p", 1).await;
        let after = newest(&store).await;
        assert_eq!(
            (after.first_step, after.total_tgbs, after.tgbs.len()),
            (8, 13, 5),
            "{}",
            t.name
        );
        // A second pass converges: nothing more to do but the old manifests.
        let r2 = gc(&store).run_once().await.unwrap();
        assert_eq!((r2.tgbs_deleted, r2.orphans_deleted), (0, 0), "{}", t.name);
        println!("gc PASSED on {}", t.name);
    }
}

#[tokio::test]
async fn orphans_of_a_crashed_producer_are_swept_committed_tgbs_are_not() {
    let store = StreamStore::in_memory();
    // Producers that give up on an upload after 100 ms: its commit deadline.
    let quick = ProducerSettings {
        max_commit_age: Duration::from_millis(100),
        ..psettings()
    };
    produce_with(&store, "p", 3, &quick).await;
    let fp = FailPoints::new(|p| p == FailPoint::AfterTgbPut);
    let mut crashing = Producer::builder(store.clone(), "p")
        .settings(quick.clone())
        .fail_points(fp)
        .open()
        .await
        .unwrap();
    assert!(
        crashing
            .append(1, 1, vec![Bytes::from_static(b"lost")], 4)
            .await
            .is_err()
    );
    drop(crashing);
    let objects = store.list("tgb").await.unwrap().len();
    assert_eq!(objects, 4, "three committed and one orphan");
    let young = Reclaimer::new(store.clone(), GcSettings::default());
    assert_eq!(
        young.run_once().await.unwrap().orphans_deleted,
        0,
        "a young object is never an orphan"
    );
    let sweeper = gc_with(
        &store,
        GcSettings {
            orphan_margin: Duration::from_millis(50),
            ..Default::default()
        },
    );
    assert_eq!(
        sweeper.run_once().await.unwrap().orphans_deleted,
        0,
        "old by the grace period, but no version is known to be newer than its commit \
         deadline: a commit that lists it may exist beyond what this pass read"
    );
    store.clock().sleep(Duration::from_millis(200)).await;
    produce_with(&store, "q", 1, &quick).await;
    let r = sweeper.run_once().await.unwrap();
    assert_eq!(
        (r.orphans_deleted, r.tgbs_deleted),
        (1, 0),
        "a commit after the deadline proves it an orphan; no watermark: only the orphan goes"
    );
    assert_eq!(store.list("tgb").await.unwrap().len(), 4);
}

/// Epoch claim objects (`claims/`, cooperative opens) are swept once no committer may
/// record them: past the grace period, and recorded or overtaken by the newest version
/// (its entry holds the claim's epoch or a higher one), or past the limit the claim names
/// by a version committed after it. A claim a committer may still record stays, and so
/// does anything under `claims/` that is not a claim key.
#[tokio::test]
async fn claim_objects_are_swept_once_no_committer_may_record_them() {
    use batchweave_manifest::EpochClaim;
    let store = StreamStore::in_memory();
    produce(&store, "p", 1).await;
    let claim = |id: &str, epoch, max_commit_age_ms| EpochClaim {
        producer_id: id.to_owned(),
        epoch,
        incarnation: 0x1234,
        max_commit_age_ms,
    };
    let recorded = claim("p", 1, 600_000).key();
    let short = claim("p", 2, 100).key();
    let pending = claim("q", 1, 600_000).key();
    for k in [&recorded, &short, &pending, &"claims/README".to_owned()] {
        store.create(k, Bytes::new()).await.unwrap();
    }
    let young = Reclaimer::new(store.clone(), GcSettings::default());
    assert_eq!(
        young.run_once().await.unwrap().claims_deleted,
        0,
        "all within the grace period"
    );
    let sweeper = gc_with(
        &store,
        GcSettings {
            orphan_margin: Duration::from_millis(50),
            ..Default::default()
        },
    );
    assert_eq!(sweeper.run_once().await.unwrap().claims_deleted, 1);
    let left = |l: Vec<batchweave_store::ObjectInfo>| -> Vec<String> {
        l.into_iter().map(|o| o.key).collect()
    };
    assert_eq!(
        left(store.list("claims").await.unwrap()),
        ["claims/README", &short, &pending],
        "p's epoch 1 is recorded: its claim goes; the others may still be recorded"
    );
    store.clock().sleep(Duration::from_millis(200)).await;
    produce(&store, "r", 1).await;
    assert_eq!(sweeper.run_once().await.unwrap().claims_deleted, 1);
    assert_eq!(
        left(store.list("claims").await.unwrap()),
        ["claims/README", &pending],
        "a version committed after the short claim's limit proves nobody records it"
    );
}

/// Kill a GC pass at a random delete (retries off) many times, then rerun:
/// the stream converges to the same state as one clean pass.
#[tokio::test]
async fn a_gc_crash_mid_deletion_and_a_rerun_converge() {
    async fn stream() -> StreamStore {
        let store = StreamStore::in_memory();
        produce(&store, "a", 10).await;
        produce(&store, "b", 10).await;
        let n = newest(&store).await;
        set_layout(&store, "g", 1, 1).await;
        set_mark(&store, "g", "d0-c0", n.version - 2, 15).await;
        store
    }
    async fn keys(s: &StreamStore) -> Vec<String> {
        s.list("")
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.key)
            .collect()
    }
    let clean = stream().await;
    gc(&clean).run_once().await.unwrap();
    let expected = keys(&clean).await;
    for seed in 0..10 {
        let store = stream().await;
        let fault = Arc::new(FaultStore::new(
            store.backend().clone(),
            vec![FaultRule {
                ops: vec![FaultOp::Delete],
                error_before: 0.2,
                ..Default::default()
            }],
            seed,
            store.clock().clone(),
        ));
        let f2 = fault.clone();
        let crashing = store.map_backend(move |_| f2).with_retry(RetryPolicy {
            max_attempts: 1,
            ..Default::default()
        });
        let first = gc(&crashing).run_once().await;
        assert!(first.is_err() || fault.stats().before == 0, "seed {seed}");
        fault.set_enabled(false);
        gc(&crashing).run_once().await.unwrap();
        assert_eq!(keys(&store).await, expected, "seed {seed}: rerun converges");
    }
}

/// The ghost-commit race with a real GC pass: a producer stalled on an old
/// base commits while GC deletes the versions it is based on. Randomised
/// interleavings (latency jitter) over many seeds: nothing lost, nothing twice,
/// and no visible TGB without its object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ghost_commit_race_with_gc_loses_nothing() {
    for seed in 0..12u64 {
        let base = StreamStore::in_memory();
        let jitter = Arc::new(FaultStore::new(
            base.backend().clone(),
            vec![FaultRule {
                latency: Some((Duration::ZERO, Duration::from_micros(800))),
                ..Default::default()
            }],
            seed,
            base.clock().clone(),
        ));
        let store = base.map_backend(move |_| jitter);
        let mut stalled = Producer::builder(store.clone(), "stalled")
            .settings(psettings())
            .open()
            .await
            .unwrap();
        produce(&store, "busy", 6).await;
        let n = newest(&store).await;
        set_layout(&store, "g", 1, 1).await;
        set_mark(&store, "g", "d0-c0", n.version, 0).await;
        stalled
            .append(1, 1, vec![Bytes::from_static(b"late")], 1)
            .await
            .unwrap();
        // Orphan sweeping is off here: its safety rests on the grace period
        // exceeding the producer's max_commit_age, tested separately.
        let g = Reclaimer::new(
            store.clone(),
            GcSettings {
                orphan_grace: None,
                ..Default::default()
            },
        );
        let (flushed, gcr) = tokio::join!(stalled.flush(), g.run_once());
        flushed.unwrap();
        gcr.unwrap();
        let st = stalled.close().await.unwrap();
        let m = newest(&store).await;
        let late: Vec<_> = m
            .tgbs
            .iter()
            .filter(|d| d.producer_id == "stalled")
            .collect();
        assert_eq!(late.len(), 1, "seed {seed}: {st:?}");
        for d in &m.tgbs {
            assert!(
                store.head(&d.key).await.is_ok(),
                "seed {seed}: visible {} missing",
                d.key
            );
        }
        assert_eq!(m.tgbs.len(), 7, "seed {seed}");
    }
}
