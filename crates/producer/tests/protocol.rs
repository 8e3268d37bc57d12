//! The commit protocol under concurrency and failure, on every store.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use batchweave_manifest::{GC_BOUNDARY_KEY, GcBoundary, encode_gc_boundary, manifest_key};
use batchweave_producer::{
    FailPoint, FailPoints, PolicyKind, Producer, ProducerError, ProducerSettings,
};
use batchweave_store::testing::all_targets;
use batchweave_store::{FaultOp, FaultRule, FaultStore, StreamStore};
use common::{check_chain, check_exactly_once, slices};

fn settings(policy: &str) -> ProducerSettings {
    ProducerSettings {
        policy: policy.parse().unwrap(),
        seed: Some(42),
        ..Default::default()
    }
}

async fn run_producer(
    store: StreamStore,
    id: String,
    tgbs: u64,
    policy: &'static str,
) -> Result<(), ProducerError> {
    run_producer_flushing(store, id, tgbs, policy, false).await
}

/// Appends offsets up to `tgbs` (from the committed offset on), optionally
/// flushing after each append so that every TGB is its own commit.
async fn run_producer_flushing(
    store: StreamStore,
    id: String,
    tgbs: u64,
    policy: &'static str,
    flush_each: bool,
) -> Result<(), ProducerError> {
    let mut p = Producer::builder(store, id.clone())
        .settings(settings(policy))
        .open()
        .await?;
    let start = p.committed_offset();
    for off in start + 1..=tgbs {
        p.append(2, 1, slices(&id, off, 2), off).await?;
        if flush_each {
            p.flush().await?;
        }
    }
    let st = p.close().await?;
    assert_eq!(st.committed_offset, tgbs);
    Ok(())
}

/// 16 producers race on one stream: every TGB appears exactly once, in one
/// order that every version extends, each producer's TGBs in sequence order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_producers_race_exactly_once_on_every_store() {
    for t in all_targets() {
        let store = t.open_fresh("race16").await.unwrap();
        let per = if t.name == "s3-seaweedfs" { 2 } else { 6 };
        let policies = ["naive", "dac", "fixed:2", "incr", "aimd"];
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let s = store.clone();
                tokio::spawn(run_producer(
                    s,
                    format!("p{i:02}"),
                    per,
                    policies[i % policies.len()],
                ))
            })
            .collect();
        for h in tasks {
            h.await
                .unwrap()
                .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        }
        let newest = check_chain(&store).await;
        let per_producer = check_exactly_once(&store, &newest).await;
        assert_eq!(newest.tgbs.len() as u64, 16 * per, "{}", t.name);
        for offs in per_producer.values() {
            assert_eq!(offs, &(1..=per).collect::<Vec<_>>(), "{}", t.name);
        }
        println!(
            "race16 PASSED on {}: {} versions, {} TGBs",
            t.name,
            newest.version,
            newest.tgbs.len()
        );
    }
}

/// Crash a producer at each fail point, at several occurrences, while a
/// second producer commits concurrently; restart it; exactly once holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_at_every_fail_point_then_restart_is_exactly_once() {
    const N: u64 = 8;
    for point in [
        FailPoint::AfterTgbPut,
        FailPoint::BeforeCreate,
        FailPoint::AfterCreate,
    ] {
        for nth in 1..=4u32 {
            let store = StreamStore::in_memory();
            let other = tokio::spawn(run_producer(store.clone(), "other".into(), 10, "naive"));
            let hits = Arc::new(AtomicU32::new(0));
            let h = hits.clone();
            let fp =
                FailPoints::new(move |p| p == point && h.fetch_add(1, Ordering::SeqCst) + 1 == nth);
            let crashed = async {
                let mut p = Producer::builder(store.clone(), "victim")
                    .settings(settings("naive"))
                    .fail_points(fp)
                    .open()
                    .await?;
                for off in 1..=N {
                    p.append(2, 1, slices("victim", off, 2), off).await?;
                    if off % 3 == 0 {
                        p.flush().await?;
                    }
                }
                p.close().await.map(|_| ())
            }
            .await;
            let crashed_at = crashed.err();
            assert!(
                crashed_at.is_some() || hits.load(Ordering::SeqCst) < nth,
                "{point:?}#{nth}: the fail point fired but the producer did not stop"
            );
            // Restart: resume from the committed offset.
            let mut p = Producer::builder(store.clone(), "victim")
                .settings(settings("naive"))
                .open()
                .await
                .unwrap();
            let from = p.committed_offset();
            assert!(from <= N);
            for off in from + 1..=N {
                p.append(2, 1, slices("victim", off, 2), off).await.unwrap();
            }
            p.close().await.unwrap();
            other.await.unwrap().unwrap();
            let newest = check_chain(&store).await;
            let per = check_exactly_once(&store, &newest).await;
            assert_eq!(
                per["victim"],
                (1..=N).collect::<Vec<_>>(),
                "{point:?}#{nth} ({crashed_at:?})"
            );
            assert_eq!(per["other"], (1..=10).collect::<Vec<_>>());
        }
    }
}

/// Lost replies (the create took effect, the answer was lost) and failures
/// before the create are resolved through the state map: never twice, never dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_are_resolved_through_the_state_map() {
    let base = StreamStore::in_memory();
    let fault = Arc::new(FaultStore::new(
        base.backend().clone(),
        vec![
            FaultRule {
                ops: vec![FaultOp::Create],
                error_after: 0.3,
                error_before: 0.1,
                latency: Some((Duration::from_millis(1), Duration::from_millis(3))),
                ..Default::default()
            },
            FaultRule {
                ops: vec![FaultOp::Read, FaultOp::List, FaultOp::Put],
                error_before: 0.05,
                ..Default::default()
            },
        ],
        9,
        base.clock().clone(),
    ));
    let f2 = fault.clone();
    let store = base.map_backend(move |_| f2);
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            tokio::spawn(run_producer_flushing(
                store.clone(),
                format!("p{i}"),
                30,
                "naive",
                true,
            ))
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    fault.set_enabled(false);
    let newest = check_chain(&store).await;
    let per = check_exactly_once(&store, &newest).await;
    assert_eq!(per.len(), 4);
    for offs in per.values() {
        assert_eq!(offs, &(1..=30).collect::<Vec<_>>());
    }
    assert!(
        fault.stats().after >= 10,
        "lost replies were injected: {:?}",
        fault.stats()
    );
}

/// A stale read of the newest manifest only costs retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_manifest_reads_cost_retries_not_correctness() {
    let base = StreamStore::in_memory();
    let fault = Arc::new(FaultStore::new(
        base.backend().clone(),
        vec![
            FaultRule {
                ops: vec![FaultOp::Read, FaultOp::List],
                path_contains: Some("manifests/".into()),
                stale_read: 0.5,
                ..Default::default()
            },
            FaultRule {
                ops: vec![FaultOp::Create],
                latency: Some((Duration::from_millis(1), Duration::from_millis(3))),
                ..Default::default()
            },
        ],
        4,
        base.clock().clone(),
    ));
    let f2 = fault.clone();
    let store = base.map_backend(move |_| f2);
    let tasks: Vec<_> = (0..4)
        .map(|i| tokio::spawn(run_producer(store.clone(), format!("p{i}"), 10, "naive")))
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    fault.set_enabled(false);
    let newest = check_chain(&store).await;
    check_exactly_once(&store, &newest).await;
    assert_eq!(newest.tgbs.len(), 40);
    assert!(fault.stats().stale > 0);
}

/// A zombie (older incarnation of the same id) is fenced once the new
/// incarnation has claimed its epoch, and commits nothing more.
#[tokio::test]
async fn zombie_with_an_old_epoch_is_fenced() {
    let store = StreamStore::in_memory();
    let mut zombie = Producer::builder(store.clone(), "p")
        .settings(settings("fixed:100"))
        .open()
        .await
        .unwrap();
    zombie.append(1, 1, slices("p", 1, 1), 1).await.unwrap();
    zombie.flush().await.unwrap();
    zombie.append(1, 1, slices("p", 2, 1), 2).await.unwrap(); // buffered, not committed
    let mut fresh = Producer::builder(store.clone(), "p")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    assert_eq!(fresh.epoch(), zombie.epoch() + 1);
    assert_eq!(fresh.committed_offset(), 1);
    let e = zombie.flush().await.unwrap_err();
    assert!(e.is_fenced(), "{e}");
    let e = zombie.append(1, 1, slices("p", 3, 1), 3).await.unwrap_err();
    assert!(e.is_fenced(), "a fenced producer accepts nothing more: {e}");
    fresh.append(1, 1, slices("p", 2, 1), 2).await.unwrap();
    fresh.close().await.unwrap();
    let newest = check_chain(&store).await;
    let per = check_exactly_once(&store, &newest).await;
    assert_eq!(per["p"], vec![1, 2]);
    assert!(
        newest.tgbs.iter().filter(|d| d.epoch == 1).count() == 1,
        "only the pre-fence TGB of epoch 1"
    );
}

/// The ghost-commit race: GC deletes old versions while a stalled producer
/// holds an old base; its create of an already-deleted version number
/// "succeeds". The producer must see the boundary and recommit in the live chain.
#[tokio::test]
async fn ghost_commit_after_gc_is_detected_and_harmless() {
    let store = StreamStore::in_memory();
    let mut stalled = Producer::builder(store.clone(), "stalled")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    let claimed_at = stalled.stats().version;
    // Others commit many versions while `stalled` sleeps on its old base.
    for i in 0..3 {
        run_producer(store.clone(), format!("busy{i}"), 4, "naive")
            .await
            .unwrap();
    }
    let newest = check_chain(&store).await;
    assert!(newest.version > claimed_at + 2);
    // GC: advance the boundary durably, then delete everything below the newest.
    let b = GcBoundary {
        min_live_version: newest.version,
        low_water_step: 0,
        updated_at_ms: 0,
    };
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&b))
        .await
        .unwrap();
    for v in 1..newest.version {
        store.delete(&manifest_key(v)).await.unwrap();
    }
    // The stalled producer wakes up: its create of claimed_at + 1 lands in an empty slot.
    stalled
        .append(2, 1, slices("stalled", 1, 2), 1)
        .await
        .unwrap();
    stalled.flush().await.unwrap();
    let st = stalled.stats();
    assert_eq!(st.ghost_commits_prevented, 1, "{st:?}");
    assert!(
        store
            .get_opt(&manifest_key(claimed_at + 1), 1 << 20)
            .await
            .unwrap()
            .is_some(),
        "the ghost object exists"
    );
    stalled.close().await.unwrap();
    // The live chain (from the boundary up) holds the TGB exactly once.
    let live = batchweave_manifest::decode_manifest(
        &store
            .get(&manifest_key(newest.version + 1), 1 << 20)
            .await
            .unwrap(),
        &Default::default(),
    )
    .unwrap();
    let per = check_exactly_once(&store, &live).await;
    assert_eq!(per["stalled"], vec![1]);
}

/// `max_lag` holds a producer back until the low-water mark advances.
#[tokio::test]
async fn max_lag_waits_for_the_low_water_mark() {
    let store = StreamStore::in_memory();
    let s = ProducerSettings {
        max_lag: Some(5),
        lag_poll: Duration::from_millis(5),
        ..settings("naive")
    };
    let mut p = Producer::builder(store.clone(), "p")
        .settings(s)
        .open()
        .await
        .unwrap();
    for off in 1..=8 {
        p.append(1, 1, slices("p", off, 1), off).await.unwrap();
    }
    let p = Arc::new(tokio::sync::Mutex::new(p));
    let p2 = p.clone();
    let flush = tokio::spawn(async move { p2.lock().await.flush().await });
    store.clock().sleep(Duration::from_millis(200)).await;
    let newest = batchweave_manifest::decode_manifest(
        &store
            .get(&manifest_key(store_newest(&store).await), 1 << 20)
            .await
            .unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        newest.total_tgbs, 5,
        "at most max_lag TGBs ahead of low-water step 0"
    );
    let b = GcBoundary {
        min_live_version: 0,
        low_water_step: 3,
        updated_at_ms: 0,
    };
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&b))
        .await
        .unwrap();
    flush.await.unwrap().unwrap();
    let p = Arc::try_unwrap(p).unwrap().into_inner();
    assert!(p.stats().lag_waits > 0);
    let st = p.close().await.unwrap();
    assert_eq!(st.tgbs_committed, 8);
}

async fn store_newest(store: &StreamStore) -> u64 {
    store
        .list("manifests")
        .await
        .unwrap()
        .iter()
        .filter_map(|o| batchweave_manifest::parse_manifest_key(&o.key))
        .max()
        .unwrap()
}

/// Large TGBs go up as multipart uploads and commit like any other.
#[tokio::test]
async fn large_tgbs_use_multipart() {
    let store = StreamStore::in_memory();
    let s = ProducerSettings {
        multipart_threshold: 1 << 20,
        multipart_part_size: 5 << 20,
        ..settings("naive")
    };
    let mut p = Producer::builder(store.clone(), "video")
        .settings(s)
        .open()
        .await
        .unwrap();
    let big: Vec<bytes::Bytes> = (0..4)
        .map(|i| bytes::Bytes::from(vec![i as u8; 3 << 20]))
        .collect();
    let r = p.append(2, 2, big, 1).await.unwrap();
    p.close().await.unwrap();
    assert!(store.stats().multipart_parts >= 2, "{:?}", store.stats());
    let newest = check_chain(&store).await;
    check_exactly_once(&store, &newest).await;
    assert_eq!(store.head(&r.key).await.unwrap().size, r.object_size);
}

/// Misconfiguration is reported with what to fix.
#[tokio::test]
async fn bad_ids_and_settings_are_clear_errors() {
    let store = StreamStore::in_memory();
    let e = Producer::builder(store.clone(), "../evil")
        .open()
        .await
        .unwrap_err();
    assert!(matches!(e, ProducerError::Invalid(_)), "{e}");
    let s = ProducerSettings {
        max_buffered: 0,
        ..Default::default()
    };
    let e = Producer::builder(store, "ok")
        .settings(s)
        .open()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("max_buffered"), "{e}");
    let _unused: PolicyKind = "dac".parse().unwrap();
}

/// A TGB older than `max_commit_age` is never committed (GC may have swept it).
#[tokio::test]
async fn expired_uploads_are_not_committed() {
    let store = StreamStore::in_memory();
    let s = ProducerSettings {
        max_commit_age: Duration::from_millis(10),
        ..settings("fixed:100")
    };
    let mut p = Producer::builder(store.clone(), "slow")
        .settings(s)
        .open()
        .await
        .unwrap();
    p.append(1, 1, slices("slow", 1, 1), 1).await.unwrap();
    store.clock().sleep(Duration::from_millis(50)).await;
    let e = p.flush().await.unwrap_err();
    assert!(e.to_string().contains("max_commit_age"), "{e}");
    let newest = check_chain(&store).await;
    assert!(newest.tgbs.is_empty(), "nothing was committed");
}

/// Appends `n` TGBs under `naive` on a store where every request takes
/// exactly 10 ms of virtual time; returns how long the appends took and the
/// commit-attempt time spent meanwhile, then closes and checks the chain.
async fn timed_naive_run(single_worker: bool, n: u64) -> (Duration, Duration) {
    let store = common::fixed_latency_store(Duration::from_millis(10), 7);
    let clock = store.clock().clone();
    let mut p = Producer::builder(store.clone(), "solo")
        .settings(ProducerSettings {
            single_worker,
            ..settings("naive")
        })
        .open()
        .await
        .unwrap();
    let (t0, c0) = (clock.now(), p.stats().commit_time);
    for off in 1..=n {
        p.append(1, 1, slices("solo", off, 1), off).await.unwrap();
    }
    let appends = clock.now() - t0;
    let commits = p.stats().commit_time - c0;
    let st = p.close().await.unwrap();
    assert_eq!(st.tgbs_committed, n);
    check_exactly_once(&store, &check_chain(&store).await).await;
    (appends, commits)
}

/// `single_worker` serialises uploads and commit attempts: the appends take
/// the uploads plus every attempt made meanwhile. Without it, uploads never
/// wait for commits: the appends take exactly the uploads.
#[tokio::test(start_paused = true)]
async fn single_worker_serialises_uploads_and_commits() {
    let n = 20;
    let uploads = Duration::from_millis(10) * n as u32;
    let (single, commits) = timed_naive_run(true, n).await;
    assert!(commits > Duration::ZERO, "no attempt while appending");
    assert!(
        single >= uploads + commits,
        "single worker: appends took {single:?} < uploads {uploads:?} + attempts {commits:?}"
    );
    let (piped, commits) = timed_naive_run(false, n).await;
    assert!(commits > Duration::ZERO, "no attempt while appending");
    assert_eq!(piped, uploads, "pipelined appends waited for commits");
}

/// An attempt is counted together with its outcome: between any two snapshots of a
/// producer's statistics, taken while attempts are in flight, the successes never grow
/// by more than the attempts (plus the lost replies recovered later, whose attempts were
/// counted as conflicts). Counting the attempt when the create returns and the success
/// after the boundary read that follows it showed windows with more successes than
/// attempts (the `bench dac` pipelined arm reported 101.3% commit success).
#[tokio::test(start_paused = true)]
async fn snapshots_never_show_more_successes_than_attempts() {
    use batchweave_store::{Clock, LatencyModel, LatencyStore, TokioClock};
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(1_700_000_000_000));
    let model = LatencyModel {
        first_byte: Duration::from_millis(10),
        bandwidth: 0.0,
        jitter: Duration::from_millis(7),
        put_rate: 0.0,
        get_rate: 0.0,
    };
    let mem = Arc::new(batchweave_store::object_store::memory::InMemory::new());
    let lat = LatencyStore::new(mem, model, 11, clock.clone());
    let store = StreamStore::from_object_store(Arc::new(lat), "", "sim://").with_clock(clock);
    let mut p = Producer::builder(store.clone(), "solo")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    let mut prev = p.stats();
    let mut windows = 0;
    for off in 1..=200 {
        p.append(1, 1, slices("solo", off, 1), off).await.unwrap();
        let now = p.stats();
        assert!(now.successes <= now.attempts, "{now:?}");
        let grew = now.successes - prev.successes;
        let allowed = (now.attempts - prev.attempts)
            + (now.lost_replies_recovered - prev.lost_replies_recovered);
        assert!(
            grew <= allowed,
            "after offset {off}: {grew} more successes, {allowed} more attempts (and recoveries)"
        );
        windows += usize::from(now.attempts > prev.attempts);
        prev = now;
    }
    assert!(
        windows > 20,
        "too few snapshots spanned an attempt: {windows}"
    );
    let st = p.close().await.unwrap();
    assert_eq!(st.tgbs_committed, 200);
    assert_eq!(
        st.successes,
        st.attempts - st.conflicts - st.ambiguous + st.lost_replies_recovered
    );
}

/// A commit drops the descriptors the boundary released since this producer last read
/// it, even with no conflict in between (the boundary is otherwise read only after a
/// create, a whole commit gap before the next attempt): a boundary older than a second
/// is re-read before the attempt.
#[tokio::test(start_paused = true)]
async fn commits_trim_by_a_fresh_boundary() {
    // Virtual wall-clock time too: the boundary's age is judged by it.
    let store = StreamStore::in_memory().with_clock(Arc::new(
        batchweave_store::TokioClock::with_base(1_700_000_000_000),
    ));
    let mut p = Producer::builder(store.clone(), "trim")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    for off in 1..=4 {
        p.append(1, 1, slices("t", off, 1), off).await.unwrap();
    }
    p.flush().await.unwrap();
    // GC releases the four committed TGBs after that commit's boundary read.
    let b = GcBoundary {
        min_live_version: 0,
        low_water_step: 4,
        updated_at_ms: 0,
    };
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&b))
        .await
        .unwrap();
    store.clock().sleep(Duration::from_secs(2)).await;
    p.append(1, 1, slices("t", 5, 1), 5).await.unwrap();
    p.flush().await.unwrap();
    let newest = batchweave_manifest::decode_manifest(
        &store
            .get(&manifest_key(store_newest(&store).await), 1 << 20)
            .await
            .unwrap(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(newest.total_tgbs, 5);
    assert_eq!(
        (newest.first_step, newest.tgbs.len()),
        (4, 1),
        "the commit after GC released steps 0..4 retains only step 4"
    );
    p.close().await.unwrap();
}
