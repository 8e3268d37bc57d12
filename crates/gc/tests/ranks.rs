//! The TP and PP ranks of one consumer position read the same slice but checkpoint
//! independently (a rank may restore an older checkpoint than its peers): each writes
//! its own watermark and GC holds the position at the minimum. With one shared key the
//! last writer would win and GC could delete what a peer's checkpoint still needs.

use std::time::Duration;

use batchweave_consumer::{Consumer, ConsumerBuilder, ConsumerSettings, MeshConfig, RankConfig};
use batchweave_gc::{GcSettings, Reclaimer};
use batchweave_producer::{Producer, ProducerSettings};
use batchweave_store::StreamStore;
use batchweave_store::testing::all_targets;
use bytes::Bytes;

/// A consumer builder for rank `rank` of a DP=1 x CP=1 x TP=2 group.
fn tp_rank(store: StreamStore, rank: u32) -> ConsumerBuilder {
    let me = RankConfig::new(rank, MeshConfig::new(2, 1, 1, 2, 1), "train");
    Consumer::builder(store, me).settings(ConsumerSettings {
        poll_min: Duration::from_millis(1),
        poll_max: Duration::from_millis(5),
        ..ConsumerSettings::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tp_ranks_sharing_a_position_each_hold_the_low_water_mark() {
    for t in all_targets() {
        let store = t.open_fresh("tp-marks").await.unwrap();
        let mut p = Producer::builder(store.clone(), "p")
            .settings(ProducerSettings {
                policy: "naive".parse().unwrap(),
                seed: Some(1),
                ..Default::default()
            })
            .open()
            .await
            .unwrap();
        for off in 1..=12u64 {
            p.append(1, 1, vec![Bytes::from(format!("tgb {off}"))], off)
                .await
                .unwrap();
        }
        p.close().await.unwrap();

        let mut fast = tp_rank(store.clone(), 0).open().await.unwrap();
        let mut slow = tp_rank(store.clone(), 1).open().await.unwrap();
        for _ in 0..4 {
            slow.next().await.unwrap();
        }
        for _ in 0..10 {
            fast.next().await.unwrap();
        }
        // The slow rank's checkpoint (step 4) lands first, the fast one's (step 10) last:
        // with one key per position the fast rank's mark would replace the slow one's.
        let slow_state = slow.state();
        slow.checkpoint_committed(&slow_state).await.unwrap();
        fast.checkpoint_committed(&fast.state()).await.unwrap();
        let gc = Reclaimer::new(store.clone(), GcSettings::default());
        let r = gc.run_once().await.unwrap();
        assert_eq!(r.boundary.low_water_step, 4, "{}: {r:?}", t.name);
        let g = gc.low_water().await.unwrap();
        assert_eq!(
            g.groups[0].positions.len(),
            2,
            "{}: one mark per rank",
            t.name
        );
        // The slow rank restores its checkpoint and reads step 4 onwards.
        drop(slow);
        let mut again = tp_rank(store.clone(), 1)
            .state(slow_state.clone())
            .open()
            .await
            .unwrap();
        let b = again.next().await.unwrap();
        assert_eq!(b.step, 4, "{}", t.name);
        assert_eq!(&b.data[0][..], b"tgb 5", "{}", t.name);
    }
}

/// `orphan_grace > max_commit_age + margin` holds by construction: producers record
/// their `max_commit_age` in their state entry, and GC refuses a pass whose grace could
/// sweep an upload a producer may still commit, before it writes or deletes anything.
#[tokio::test]
async fn gc_refuses_an_orphan_grace_a_producer_could_outlive() {
    let store = StreamStore::in_memory();
    let mut p = Producer::builder(store.clone(), "slow-video")
        .settings(ProducerSettings {
            policy: "naive".parse().unwrap(),
            max_commit_age: Duration::from_secs(2 * 3600),
            seed: Some(1),
            ..Default::default()
        })
        .open()
        .await
        .unwrap();
    p.append(1, 1, vec![Bytes::from_static(b"x")], 1)
        .await
        .unwrap();
    p.close().await.unwrap();
    let before = store.stats();
    let gc = |grace_secs: u64| {
        Reclaimer::new(
            store.clone(),
            GcSettings {
                orphan_grace: Some(Duration::from_secs(grace_secs)),
                ..Default::default()
            },
        )
    };
    let err = gc(3600).run_once().await.unwrap_err();
    let msg = err.to_string();
    assert_eq!(err.class(), batchweave_store::ErrorClass::Invalid, "{msg}");
    assert!(
        msg.contains("orphan_grace 3600s") && msg.contains("7200s, producer slow-video"),
        "{msg}"
    );
    let after = store.stats().since(&before);
    assert_eq!(
        (after.deletes, after.creates, after.puts),
        (0, 0, 0),
        "nothing written or deleted"
    );
    // A grace above the recorded limit plus the margin runs.
    gc(2 * 3600 + 120).run_once().await.unwrap();
}
