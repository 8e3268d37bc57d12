//! Exact resume: restoring from every checkpoint position yields exactly the rest.

mod common;

use std::time::Duration;

use batchweave_consumer::{Batch, ConsumerError, ConsumerSettings, ConsumerState};
use batchweave_manifest::{DecodeLimits, decode_watermark, watermark_key};
use batchweave_store::StreamStore;
use common::{Sim, builder, check_batch, config, fast, fresh_stores};
use tokio::time::timeout;

fn view(b: &Batch) -> (u64, String, Vec<u8>) {
    (b.step, b.sources[0].key.clone(), b.data[0].to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restore_from_every_checkpoint_yields_exactly_the_rest() {
    let steps = 30u64;
    for (target, store) in fresh_stores("consumer-restore").await {
        let sim = Sim::new(store.clone(), 2, 2);
        // Two producers, interleaved, 3 TGBs per version.
        for round in 0..5 {
            sim.produce("a", 1 + round * 3, 3, 3).await;
            sim.produce("b", 1 + round * 3, 3, 3).await;
        }
        let head = sim.head().await;
        assert_eq!(head.total_tgbs, steps);
        let cfg = || config(3, [2, 2, 1, 1], "train");
        let open = |rank| {
            builder(store.clone(), rank).settings(ConsumerSettings {
                prefetch: 3,
                ..fast()
            })
        };
        // The reference run, with the state after every step.
        let mut c = open(cfg()).open().await.unwrap();
        let mut states = vec![c.state()];
        let mut reference = Vec::new();
        for _ in 0..steps {
            let b = c.next().await.unwrap();
            check_batch(&sim, &head, &b);
            reference.push(view(&b));
            states.push(c.state());
        }
        assert_eq!(states[0].next_step, 0);
        for (k, state) in states.iter().enumerate() {
            assert_eq!(state.next_step, k as u64);
            let restored = ConsumerState::from_bytes(&state.to_bytes()).unwrap();
            let mut r = open(cfg()).state(restored).open().await.unwrap();
            let rest: Vec<_> = {
                let mut v = Vec::new();
                for _ in k as u64..steps {
                    v.push(view(&r.next().await.unwrap()));
                }
                v
            };
            assert_eq!(rest, reference[k..], "{}: restore at step {k}", target.name);
            assert_eq!(r.state().next_step, steps);
            if k + 1 == states.len() {
                // And nothing beyond the stream's end is invented.
                assert!(timeout(Duration::from_millis(150), r.next()).await.is_err());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_committed_writes_the_watermark_and_the_layout() {
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 2, 1);
    sim.produce("p", 1, 8, 4).await;
    // DP=1 on a D=2 stream: consumer step k reads TGB k/2, so TGB steps differ from
    // consumer steps. Rank 1 of DP=1 x CP=1 x TP=2 is position d0-c0, TP rank 1: its
    // own mark d0-c0-t1-p0 (the TP ranks of a position checkpoint independently).
    let mut c = builder(store.clone(), config(1, [1, 1, 2, 1], "g1"))
        .open()
        .await
        .unwrap();
    let layout = store.get("watermarks/g1/_layout", 1024).await.unwrap();
    let layout = batchweave_manifest::decode_group_layout(&layout, &Default::default()).unwrap();
    assert_eq!((layout.dp, layout.cp), (1, 1));
    for _ in 0..7 {
        c.next().await.unwrap();
    }
    let state = c.state();
    assert_eq!(state.next_step, 7);
    c.checkpoint_committed(&state).await.unwrap();
    let key = watermark_key("g1", "d0-c0-t1-p0").unwrap();
    let wm = decode_watermark(
        &store.get(&key, 1024).await.unwrap(),
        &DecodeLimits::default(),
    )
    .unwrap();
    assert_eq!(
        (wm.version, wm.step),
        (state.version, 3),
        "step 7 at DP=1 needs TGB 3"
    );
    assert!(wm.updated_at_ms > 0);

    // A state of another group or grid is refused.
    let other = ConsumerState {
        group: "g2".into(),
        ..state.clone()
    };
    assert!(matches!(
        c.checkpoint_committed(&other).await,
        Err(ConsumerError::State { .. })
    ));
    let err = builder(store.clone(), config(0, [1, 1, 1, 1], "g1"))
        .state(other.clone())
        .open()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("group"), "{err}");
}
