//! Cooperative commits (policy `coop`): a commit also publishes the next uploads of
//! other producers, under exactly the rules their own commits follow.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use batchweave_producer::planted::{PlantedProducerBugs, plant};
use batchweave_producer::{FailPoint, FailPoints, Producer, ProducerError, ProducerSettings};
use batchweave_store::StreamStore;
use batchweave_store::testing::all_targets;
use common::{check_chain, check_exactly_once, slices};

fn coop() -> ProducerSettings {
    ProducerSettings {
        policy: "coop".parse().unwrap(),
        seed: Some(7),
        ..Default::default()
    }
}

/// A producer `id` that uploads `offsets` and dies before its first commit of them
/// (the claim is its first create; the crash is at the second).
async fn upload_then_crash(
    store: &StreamStore,
    id: &str,
    offsets: std::ops::RangeInclusive<u64>,
    settings: ProducerSettings,
) -> u64 {
    let creates = Arc::new(AtomicU32::new(0));
    let c = creates.clone();
    let fp = FailPoints::new(move |p| {
        p == FailPoint::BeforeCreate && c.fetch_add(1, Ordering::SeqCst) >= 1
    });
    let mut p = Producer::builder(store.clone(), id)
        .settings(settings)
        .fail_points(fp)
        .open()
        .await
        .unwrap();
    let epoch = p.epoch();
    for off in offsets {
        p.append(2, 1, slices(id, off, 2), off).await.unwrap();
    }
    let err = p.flush().await.unwrap_err();
    assert!(
        matches!(err, ProducerError::Stopped(_)),
        "expected the planted crash, got {err}"
    );
    epoch
}

/// One flushed commit of `id` at `offset`; returns its statistics.
async fn commit_one(
    store: &StreamStore,
    id: &str,
    offset: u64,
) -> batchweave_producer::ProducerStats {
    let mut p = Producer::builder(store.clone(), id)
        .settings(coop())
        .open()
        .await
        .unwrap();
    p.append(2, 1, slices(id, offset, 2), offset).await.unwrap();
    p.close().await.unwrap()
}

#[tokio::test]
async fn a_commit_publishes_a_crashed_producers_uploads_and_its_restart_resumes_after_them() {
    let store = StreamStore::in_memory();
    upload_then_crash(&store, "a", 1..=3, coop()).await;
    // b's open publishes them (its epoch claim is a cooperative commit), then b commits
    // its own upload.
    let b = commit_one(&store, "b", 1).await;
    assert_eq!(b.tgbs_published_for_others, 3, "{b:?}");
    let newest = check_chain(&store).await;
    let a = &newest.producers["a"];
    assert_eq!((a.last_sequence, a.source_offset), (3, 3));
    // The restart resumes after what the other producer published for it.
    let mut p = Producer::builder(store.clone(), "a")
        .settings(coop())
        .open()
        .await
        .unwrap();
    assert_eq!(p.committed_offset(), 3);
    p.append(2, 1, slices("a", 4, 2), 4).await.unwrap();
    p.close().await.unwrap();
    let newest = check_chain(&store).await;
    let per = check_exactly_once(&store, &newest).await;
    assert_eq!(per["a"], vec![1, 2, 3, 4]);
    assert_eq!(per["b"], vec![1]);
}

#[tokio::test]
async fn a_fenced_incarnations_leftovers_are_never_published() {
    let store = StreamStore::in_memory();
    let old = upload_then_crash(&store, "a", 1..=2, coop()).await;
    // The next incarnation claims a higher epoch before anyone published the old uploads,
    // then uploads sequence 1 of its own epoch and dies too.
    let new = upload_then_crash(&store, "a", 1..=1, coop()).await;
    assert!(new > old);
    commit_one(&store, "b", 1).await;
    let newest = check_chain(&store).await;
    let of_a: Vec<_> = newest
        .tgbs
        .iter()
        .filter(|d| d.producer_id == "a")
        .map(|d| (d.epoch, d.sequence))
        .collect();
    assert_eq!(of_a, vec![(new, 1)], "only the current epoch's upload");
    check_exactly_once(&store, &newest).await;
}

#[tokio::test]
async fn uploads_older_than_their_producers_max_commit_age_are_not_published() {
    for planted in [false, true] {
        let store = StreamStore::in_memory();
        let short = ProducerSettings {
            max_commit_age: Duration::from_millis(50),
            ..coop()
        };
        upload_then_crash(&store, "a", 1..=2, short).await;
        store.clock().sleep(Duration::from_millis(300)).await;
        let before = plant(PlantedProducerBugs {
            skip_others_age_check: planted,
            ..Default::default()
        });
        let b = commit_one(&store, "b", 1).await;
        plant(before);
        let newest = check_chain(&store).await;
        let a = &newest.producers["a"];
        if planted {
            // The planted bug publishes uploads GC may already have swept as orphans.
            assert_eq!(a.last_sequence, 2, "the plant must change the outcome");
        } else {
            assert_eq!(b.tgbs_published_for_others, 0);
            assert_eq!(a.last_sequence, 0);
        }
    }
}

/// Opens cooperative producer `id` and appends `n` TGBs it does not commit: it batches by
/// count (fixed:100), so it never commits them on its own (a coop cadence would: alone on
/// a fast store it commits every 4 tau, as DAC).
async fn open_with_uploads(store: &StreamStore, id: &str, n: u64) -> Producer {
    let slow = ProducerSettings {
        policy: "fixed:100".parse().unwrap(),
        ..coop()
    };
    let mut p = Producer::builder(store.clone(), id)
        .settings(slow)
        .open()
        .await
        .unwrap();
    for off in 1..=n {
        p.append(2, 1, slices(id, off, 2), off).await.unwrap();
    }
    p
}

#[tokio::test]
async fn producers_learn_from_the_state_map_that_others_published_their_tgbs() {
    let store = StreamStore::in_memory();
    // a uploads without committing; b's cooperative flush publishes a's uploads;
    // a then sees them committed and never sends them again.
    let a = open_with_uploads(&store, "a", 3).await;
    let b = commit_one(&store, "b", 1).await;
    assert_eq!(b.tgbs_published_for_others, 3);
    let st = a.close().await.unwrap();
    assert_eq!(st.tgbs_committed, 3);
    assert_eq!(st.tgbs_published_by_others, 3);
    assert_eq!(st.committed_offset, 3);
    let newest = check_chain(&store).await;
    assert_eq!(
        check_exactly_once(&store, &newest).await["a"],
        vec![1, 2, 3]
    );
}

/// An epoch claim is a cooperative commit too: a producer's open publishes the uploads
/// others have waiting (a pool opening at once claims one version per fragile window for
/// a while, and the uploads of those already open would otherwise wait for the end of it).
#[tokio::test]
async fn an_epoch_claim_publishes_the_uploads_others_have_waiting() {
    let store = StreamStore::in_memory();
    let a = open_with_uploads(&store, "a", 3).await;
    let b = Producer::builder(store.clone(), "b")
        .settings(coop())
        .open()
        .await
        .unwrap();
    let newest = check_chain(&store).await;
    assert_eq!(newest.committer, "b", "b's claim is the newest version");
    assert_eq!(
        newest.producers["a"].last_sequence, 3,
        "the claim published a's uploads"
    );
    assert_eq!(newest.producers["b"].last_sequence, 0);
    assert_eq!(b.stats().tgbs_published_for_others, 3);
    let st = a.close().await.unwrap();
    assert_eq!(st.tgbs_published_by_others, 3);
    b.close().await.unwrap();
    let newest = check_chain(&store).await;
    assert_eq!(
        check_exactly_once(&store, &newest).await["a"],
        vec![1, 2, 3]
    );
}

/// `n` cooperative producers `p00`, `p01`, ... (seeded by their index) opening on `store`
/// at once, each appending offsets `1..=per` and closing: their tasks.
fn spawn_pool(
    store: &StreamStore,
    n: u64,
    per: u64,
) -> Vec<tokio::task::JoinHandle<Result<batchweave_producer::ProducerStats, ProducerError>>> {
    (0..n)
        .map(|i| {
            let s = store.clone();
            tokio::spawn(async move {
                let id = format!("p{i:02}");
                let mut p = Producer::builder(s, id.clone())
                    .settings(ProducerSettings {
                        seed: Some(i),
                        ..coop()
                    })
                    .open()
                    .await?;
                for off in 1..=per {
                    p.append(2, 1, slices(&id, off, 2), off).await?;
                }
                p.close().await
            })
        })
        .collect()
}

/// Sixteen cooperative producers race on every store: exactly once, one order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_cooperative_producers_race_exactly_once_on_every_store() {
    for t in all_targets() {
        let store = t.open_fresh("coop16").await.unwrap();
        let per: u64 = if t.name == "s3-seaweedfs" { 2 } else { 5 };
        let tasks = spawn_pool(&store, 16, per);
        let mut published = 0;
        for h in tasks {
            let st = h
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{}: {e}", t.name));
            assert_eq!(st.committed_offset, per);
            published += st.tgbs_published_for_others;
        }
        let newest = check_chain(&store).await;
        let each = check_exactly_once(&store, &newest).await;
        assert_eq!(newest.tgbs.len() as u64, 16 * per, "{}", t.name);
        for offs in each.values() {
            assert_eq!(offs, &(1..=per).collect::<Vec<_>>(), "{}", t.name);
        }
        println!(
            "coop16 on {}: {} versions, {published} published for others",
            t.name, newest.version
        );
    }
}

#[tokio::test]
async fn with_a_large_retained_window_a_committer_lists_only_what_is_unpublished() {
    // 2,100 retained TGBs of one producer: three listing pages of `tgb/` against two
    // active producers (`bulk` and `a`), so the committer lists each producer from its
    // entry's position, and must still find what a crashed producer uploaded beyond its
    // entry.
    for target in batchweave_store::testing::embedded_targets() {
        let store = target.open_fresh("retained").await.unwrap();
        let mut bulk = Producer::builder(store.clone(), "bulk")
            .open()
            .await
            .unwrap();
        for off in 1..=2100 {
            bulk.append(2, 1, slices("bulk", off, 2), off)
                .await
                .unwrap();
        }
        bulk.close().await.unwrap();
        // `a` commits 1 itself, then uploads 2..=4 and dies before committing them.
        commit_one(&store, "a", 1).await;
        let epoch = upload_then_crash(&store, "a", 2..=4, coop()).await;
        assert!(epoch > 1);
        let b = commit_one(&store, "b", 1).await;
        let newest = check_chain(&store).await;
        assert!(newest.tgbs.len() > 2000, "{}", newest.tgbs.len());
        assert_eq!(b.tgbs_published_for_others, 3, "{}: {b:?}", target.name);
        let per = check_exactly_once(&store, &newest).await;
        assert_eq!(per["a"].len(), 4, "{per:?}");
        assert_eq!(per["bulk"].len(), 2100);
    }
}

/// A create that conflicts because another producer's cooperative commit took the same
/// version number and published our batch is not a lost reply: the owner learns that
/// others published its TGBs (the held version names their committer), and counts no
/// success and no recovered reply of its own.
#[tokio::test]
async fn a_batch_published_by_the_version_we_raced_for_is_not_a_lost_reply() {
    let store = StreamStore::in_memory();
    // a's second create (its first commit, after the claim) waits while b opens: b's
    // claim takes that version number and publishes a's three uploads.
    let creates = Arc::new(AtomicU32::new(0));
    let (c, other) = (creates.clone(), store.clone());
    let fp = FailPoints::new(move |p| {
        if p == FailPoint::BeforeCreate && c.fetch_add(1, Ordering::SeqCst) == 1 {
            let s = other.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let b = Producer::builder(s, "b")
                        .settings(coop())
                        .open()
                        .await
                        .unwrap();
                    assert_eq!(b.stats().tgbs_published_for_others, 3);
                    b.close().await.unwrap();
                });
            })
            .join()
            .unwrap();
        }
        false
    });
    let mut a = Producer::builder(store.clone(), "a")
        .settings(ProducerSettings {
            policy: "fixed:100".parse().unwrap(),
            ..coop()
        })
        .fail_points(fp)
        .open()
        .await
        .unwrap();
    for off in 1..=3 {
        a.append(2, 1, slices("a", off, 2), off).await.unwrap();
    }
    let st = a.close().await.unwrap();
    assert_eq!(
        creates.load(Ordering::SeqCst),
        2,
        "a sent its claim and one commit"
    );
    assert_eq!(st.conflicts, 1);
    assert_eq!(st.tgbs_committed, 3);
    assert_eq!(st.tgbs_published_by_others, 3, "{st:?}");
    assert_eq!(st.lost_replies_recovered, 0, "{st:?}");
    assert_eq!(st.successes, 1, "only a's claim was its own: {st:?}");
    let newest = check_chain(&store).await;
    assert_eq!(newest.committer, "b");
    assert_eq!(
        check_exactly_once(&store, &newest).await["a"],
        vec![1, 2, 3]
    );
}

/// A wall clock that never moves: every candidate carries the same commit time, as
/// candidates prepared in the same millisecond do (256 producers racing for a version).
#[derive(Debug)]
struct FrozenWallClock;

impl batchweave_store::Clock for FrozenWallClock {
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
    fn sleep(&self, d: Duration) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        batchweave_store::TokioClock::system().sleep(d)
    }
    fn unix_millis(&self) -> u64 {
        1_700_000_000_000
    }
}

/// The same race when the loser next holds a later version (the winner committed again)
/// and both candidates carry the same commit time: a create refused with a conflict had
/// no effect, so the version that published the batch is not taken for ours (a load with
/// no injected errors counted 4 "lost replies recovered" this way).
#[tokio::test]
async fn a_conflicted_create_is_never_taken_for_a_lost_reply_even_in_the_same_millisecond() {
    let store = StreamStore::in_memory().with_clock(Arc::new(FrozenWallClock));
    let creates = Arc::new(AtomicU32::new(0));
    let (c, other) = (creates.clone(), store.clone());
    let fp = FailPoints::new(move |p| {
        if p == FailPoint::BeforeCreate && c.fetch_add(1, Ordering::SeqCst) == 1 {
            let s = other.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let mut b = Producer::builder(s, "b")
                        .settings(coop())
                        .open()
                        .await
                        .unwrap();
                    assert_eq!(b.stats().tgbs_published_for_others, 3);
                    // A second version after the one a races for.
                    b.append(2, 1, slices("b", 1, 2), 1).await.unwrap();
                    b.close().await.unwrap();
                });
            })
            .join()
            .unwrap();
        }
        false
    });
    let mut a = Producer::builder(store.clone(), "a")
        .settings(ProducerSettings {
            policy: "fixed:100".parse().unwrap(),
            ..coop()
        })
        .fail_points(fp)
        .open()
        .await
        .unwrap();
    for off in 1..=3 {
        a.append(2, 1, slices("a", off, 2), off).await.unwrap();
    }
    let st = a.close().await.unwrap();
    assert_eq!(creates.load(Ordering::SeqCst), 2, "{st:?}");
    assert_eq!(st.conflicts, 1, "{st:?}");
    assert_eq!(st.tgbs_published_by_others, 3, "{st:?}");
    assert_eq!(st.lost_replies_recovered, 0, "{st:?}");
    assert_eq!(st.successes, 1, "only a's claim was its own: {st:?}");
    let newest = check_chain(&store).await;
    assert_eq!(newest.producers["a"].last_sequence, 3);
    assert_eq!(
        newest.producers["a"].last_commit_version,
        newest.version - 1
    );
    assert_eq!(
        check_exactly_once(&store, &newest).await["a"],
        vec![1, 2, 3]
    );
}

/// A store on a paused clock with 40 ms a request, where 8 producers have claimed: with
/// `a`, 9 active producers, and DAC's gap (about 155 fragile windows of 80-120 ms) is
/// longer than the schedule's 9 rounds of 1 s, so `a` keeps to its turns.
async fn slow_store_with_eight_claims() -> StreamStore {
    let store = common::fixed_latency_store(Duration::from_millis(40), 3);
    for i in 0..8 {
        let p = Producer::builder(store.clone(), format!("p{i}"))
            .settings(coop())
            .open()
            .await
            .unwrap();
        p.close().await.unwrap();
    }
    store
}

/// Opens `a` with a buffer of 2 on `store` and fills it.
async fn open_full(store: &StreamStore) -> Producer {
    let small = ProducerSettings {
        max_buffered: 2,
        ..coop()
    };
    let mut a = Producer::builder(store.clone(), "a")
        .settings(small)
        .open()
        .await
        .unwrap();
    for off in 1..=2 {
        a.append(2, 1, slices("a", off, 2), off).await.unwrap();
    }
    // Both uploads finish (an append returns once its upload is under way).
    store.clock().sleep(Duration::from_millis(100)).await;
    a
}

/// A full buffer under `coop` waits for the others' turns instead of attempting out of
/// turn: its appenders are waiting, and some other producer's commit (here `b`'s epoch
/// claim) is likely to publish it within a round. The producer reads the chain every
/// quarter round, finds its TGBs published, and releases them without a create of its
/// own. (Attempting at once, as a full buffer did before, commits them itself: 2
/// attempts, none published by others. On a loopback SeaweedFS server with 32
/// producers that doubled the conflicts and cost coop a third of DAC's ingestion,
/// docs/benchmarks.md.)
#[tokio::test(start_paused = true)]
async fn a_full_buffer_waits_for_the_others_turns_before_attempting_out_of_turn() {
    let store = slow_store_with_eight_claims().await;
    let mut a = open_full(&store).await;
    let b = commit_one(&store, "b", 1).await;
    assert_eq!(
        b.tgbs_published_for_others, 2,
        "b's claim publishes a's uploads"
    );
    store.clock().sleep(Duration::from_secs(1)).await;
    let st = a.stats();
    assert_eq!(
        (st.attempts, st.tgbs_published_by_others, st.tgbs_committed),
        (1, 2, 2),
        "a attempted out of turn instead of reading the chain: {st:?}"
    );
    assert!(st.full_buffer_reads > 0, "{st:?}");
    // There is room again: the next append does not wait for a commit.
    a.append(2, 1, slices("a", 3, 2), 3).await.unwrap();
    let st = a.close().await.unwrap();
    assert_eq!(st.tgbs_committed, 3);
    let newest = check_chain(&store).await;
    assert_eq!(
        check_exactly_once(&store, &newest).await["a"],
        vec![1, 2, 3]
    );
}

/// The wait is bounded: when nobody commits for two to four rounds, the producer with
/// a full buffer attempts itself.
#[tokio::test(start_paused = true)]
async fn a_full_buffer_nobody_publishes_commits_itself_within_four_rounds() {
    let store = slow_store_with_eight_claims().await;
    let a = open_full(&store).await;
    store.clock().sleep(Duration::from_secs(5)).await;
    let st = a.stats();
    assert_eq!(
        (st.attempts, st.tgbs_published_by_others, st.tgbs_committed),
        (2, 0, 2),
        "{st:?}"
    );
    assert!(st.full_buffer_reads >= 4, "{st:?}");
    a.close().await.unwrap();
    let newest = check_chain(&store).await;
    assert_eq!(check_exactly_once(&store, &newest).await["a"], vec![1, 2]);
}

/// A flush under `coop` waits for the others' turns as a full buffer does: while the
/// chain advances, another producer's commit (here `b`'s epoch claim) publishes the
/// flushed uploads, and the flush returns without a create of its own. (Attempting at
/// once, and again at once after every conflict, as a flush did before: `a` commits
/// them itself, 2 attempts; 256 producers closing together on a local directory made
/// about 550 creates for 14 commits, and the last upload became visible 8-17 s after
/// production ended.)
#[tokio::test(start_paused = true)]
async fn a_flush_waits_for_the_others_turns_before_attempting_out_of_turn() {
    let store = slow_store_with_eight_claims().await;
    let mut a = Producer::builder(store.clone(), "a")
        .settings(coop())
        .open()
        .await
        .unwrap();
    for off in 1..=2 {
        a.append(2, 1, slices("a", off, 2), off).await.unwrap();
    }
    store.clock().sleep(Duration::from_millis(100)).await;
    let b_store = store.clone();
    let (flushed, b) = tokio::join!(a.flush(), async move {
        b_store.clock().sleep(Duration::from_millis(200)).await;
        commit_one(&b_store, "b", 1).await
    });
    flushed.unwrap();
    assert_eq!(b.tgbs_published_for_others, 2, "{b:?}");
    let st = a.close().await.unwrap();
    assert_eq!(
        (st.attempts, st.tgbs_published_by_others, st.tgbs_committed),
        (1, 2, 2),
        "a's flush attempted out of turn instead of reading the chain: {st:?}"
    );
    assert!(st.full_buffer_reads > 0, "{st:?}");
    let newest = check_chain(&store).await;
    assert_eq!(check_exactly_once(&store, &newest).await["a"], vec![1, 2]);
}

/// The flush's wait is bounded: when nobody commits for two to four rounds, the flushing
/// producer attempts itself, and the flush returns once its uploads are visible.
#[tokio::test(start_paused = true)]
async fn a_flush_nobody_publishes_commits_itself_within_four_rounds() {
    let store = slow_store_with_eight_claims().await;
    let mut a = Producer::builder(store.clone(), "a")
        .settings(coop())
        .open()
        .await
        .unwrap();
    for off in 1..=2 {
        a.append(2, 1, slices("a", off, 2), off).await.unwrap();
    }
    let t0 = store.clock().now();
    a.flush().await.unwrap();
    let took = store.clock().now() - t0;
    assert!(took <= Duration::from_secs(5), "the flush took {took:?}");
    let st = a.close().await.unwrap();
    assert_eq!(
        (st.attempts, st.tgbs_published_by_others, st.tgbs_committed),
        (2, 0, 2),
        "{st:?}"
    );
    let newest = check_chain(&store).await;
    assert_eq!(check_exactly_once(&store, &newest).await["a"], vec![1, 2]);
}

/// A pool opening at once retries its epoch claims after conflicts, and every retry
/// used to list `tgb/` again (256 producers on a local directory: 5,879 listings for
/// 263 commits, about 45% of the CPU). A retry within a second of a conflicted attempt
/// reuses that attempt's listing; an attempt after a commit lists afresh. The uploads
/// are published exactly once all the same. Each producer here finds a dead opener's
/// claim object of the epoch it claims (another incarnation's), so no committer may
/// record either claim (the chain decides between them) and every producer claims with
/// creates of its own, as before claim objects.
#[tokio::test(start_paused = true)]
async fn claim_retries_after_a_conflict_reuse_the_offers_listing() {
    let store = common::fixed_latency_store(Duration::from_millis(20), 11);
    for i in 0..16 {
        let decoy = batchweave_manifest::EpochClaim {
            producer_id: format!("p{i:02}"),
            epoch: 1,
            incarnation: 1,
            max_commit_age_ms: 600_000,
        };
        store
            .create(&decoy.key(), Default::default())
            .await
            .unwrap();
    }
    let tasks = spawn_pool(&store, 16, 3);
    let (mut attempts, mut listings, mut reused, mut conflicts) = (0, 0, 0, 0);
    for h in tasks {
        let st = h.await.unwrap().unwrap();
        assert_eq!(st.committed_offset, 3, "{st:?}");
        // Every cooperative attempt took its offers from a listing, fresh or reused,
        // and only a retry after an attempt that did not commit reuses one.
        assert_eq!(
            st.offer_listings + st.offer_listings_reused,
            st.attempts,
            "{st:?}"
        );
        assert!(st.offer_listings >= 1, "{st:?}");
        assert!(
            st.offer_listings_reused <= st.conflicts + st.ambiguous,
            "{st:?}"
        );
        attempts += st.attempts;
        listings += st.offer_listings;
        reused += st.offer_listings_reused;
        conflicts += st.conflicts;
    }
    assert!(conflicts > 0, "the claims never raced");
    assert!(
        reused > 0 && listings < attempts,
        "{listings} listings for {attempts} attempts ({reused} reused, {conflicts} conflicts)"
    );
    let newest = check_chain(&store).await;
    let each = check_exactly_once(&store, &newest).await;
    assert_eq!(newest.tgbs.len(), 48);
    for offs in each.values() {
        assert_eq!(offs, &vec![1, 2, 3]);
    }
    println!(
        "{listings} listings for {attempts} attempts ({reused} reused, {conflicts} conflicts)"
    );
}

/// Epoch claims published like uploads (`docs/protocol.md` section 14): a cooperative
/// opener writes its claim object first, and any cooperative attempt that lists it
/// records it. Sixteen producers opening at once then need far fewer creates than one
/// claim each, and the openers whose claims others recorded return without a create of
/// their own. (Without claim objects every open is its own create: 16 claim versions.)
#[tokio::test(start_paused = true)]
async fn a_pool_opening_at_once_has_its_claims_recorded_by_a_few_creates() {
    let store = common::fixed_latency_store(Duration::from_millis(20), 5);
    let tasks = spawn_pool(&store, 16, 0);
    let (mut objects, mut by_others, mut for_others) = (0, 0, 0);
    for h in tasks {
        let st = h.await.unwrap().unwrap();
        objects += st.claim_objects;
        by_others += st.claims_recorded_by_others;
        for_others += st.claims_recorded_for_others;
    }
    let newest = check_chain(&store).await;
    assert_eq!(newest.producers.len(), 16);
    assert_eq!(objects, 16);
    assert!(
        by_others >= 8 && newest.version <= 8,
        "{by_others} claims recorded by others, {} versions",
        newest.version
    );
    assert_eq!(
        by_others, for_others,
        "every recorded claim is its opener's"
    );
    // The pool then commits exactly once on top of the recorded claims.
    let tasks = spawn_pool(&store, 16, 3);
    for h in tasks {
        assert_eq!(h.await.unwrap().unwrap().committed_offset, 3);
    }
    let newest = check_chain(&store).await;
    for offs in check_exactly_once(&store, &newest).await.values() {
        assert_eq!(offs, &vec![1, 2, 3]);
    }
}

/// An opener that dies right after writing its claim object: a cooperative committer
/// records the claim all the same, which fences the id's previous incarnation (as the
/// opener's own claim would have), and the next restart claims above it and resumes
/// where the entry stands.
#[tokio::test]
async fn a_claim_of_an_opener_that_died_is_recorded_and_fences_its_predecessor() {
    let store = StreamStore::in_memory();
    let mut a1 = Producer::builder(store.clone(), "a")
        .settings(coop())
        .open()
        .await
        .unwrap();
    a1.append(2, 1, slices("a", 1, 2), 1).await.unwrap();
    a1.flush().await.unwrap();
    let Err(err) = Producer::builder(store.clone(), "a")
        .settings(coop())
        .fail_points(FailPoints::new(|p| p == FailPoint::AfterClaimObject))
        .open()
        .await
    else {
        panic!("the planted crash after the claim object did not fire");
    };
    assert!(
        matches!(err, ProducerError::Crashed(FailPoint::AfterClaimObject)),
        "{err}"
    );
    let b = commit_one(&store, "b", 1).await;
    assert_eq!(b.claims_recorded_for_others, 1);
    let newest = check_chain(&store).await;
    let e = newest.producers["a"];
    assert_eq!((e.epoch, e.last_sequence, e.source_offset), (2, 1, 1));
    // The first incarnation is fenced at its next commit.
    a1.append(2, 1, slices("a", 2, 2), 2).await.unwrap();
    let err = a1.flush().await.unwrap_err();
    assert!(err.is_fenced(), "{err}");
    let a3 = Producer::builder(store.clone(), "a")
        .settings(coop())
        .open()
        .await
        .unwrap();
    assert_eq!((a3.epoch(), a3.committed_offset()), (3, 1));
    a3.close().await.unwrap();
    let newest = check_chain(&store).await;
    assert_eq!(check_exactly_once(&store, &newest).await["a"], vec![1]);
}

/// A claim object older than the limit it names is never recorded: an opener that died
/// long ago must not fence its id's live incarnation. The planted bug that records it
/// anyway changes the outcome (the live incarnation is fenced).
#[tokio::test]
async fn a_claim_older_than_its_limit_is_never_recorded() {
    for planted in [false, true] {
        let store = StreamStore::in_memory();
        let a1 = Producer::builder(store.clone(), "a")
            .settings(coop())
            .open()
            .await
            .unwrap();
        let short = ProducerSettings {
            max_commit_age: Duration::from_millis(50),
            ..coop()
        };
        let opened = Producer::builder(store.clone(), "a")
            .settings(short)
            .fail_points(FailPoints::new(|p| p == FailPoint::AfterClaimObject))
            .open()
            .await;
        assert!(opened.is_err(), "the planted crash after the claim object");
        store.clock().sleep(Duration::from_millis(300)).await;
        let before = plant(PlantedProducerBugs {
            record_old_claims: planted,
            ..Default::default()
        });
        let b = commit_one(&store, "b", 1).await;
        plant(before);
        let mut a1 = a1;
        a1.append(2, 1, slices("a", 1, 2), 1).await.unwrap();
        let newest = check_chain(&store).await;
        if planted {
            assert_eq!(
                newest.producers["a"].epoch, 2,
                "the plant must change the outcome"
            );
            a1.close().await.unwrap_err();
        } else {
            assert_eq!(b.claims_recorded_for_others, 0);
            assert_eq!(newest.producers["a"].epoch, 1);
            a1.close().await.unwrap();
        }
    }
}
