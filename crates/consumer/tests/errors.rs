//! Corrupt data, garbage manifests, mixed grids, GC-trimmed cursors.

mod common;

use std::time::Duration;

use batchweave_consumer::{ConsumerError, ConsumerSettings, ConsumerState};
use batchweave_manifest::{
    GC_BOUNDARY_KEY, GcBoundary, encode_gc_boundary, encode_manifest, manifest_key,
};
use batchweave_store::StreamStore;
use bytes::Bytes;
use common::{Sim, builder, check_batch, config, fast, fresh_stores};
use tokio::time::timeout;

async fn flip_byte(store: &StreamStore, key: &str, at: usize) {
    let mut obj = store.get(key, 1 << 20).await.unwrap().to_vec();
    obj[at] ^= 0x40;
    store.put(key, Bytes::from(obj)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_a_tgb_is_a_data_error_naming_the_key() {
    for (target, store) in fresh_stores("consumer-corrupt").await {
        let sim = Sim::new(store.clone(), 2, 1);
        let tgbs = vec![
            sim.write_tgb("p", 1).await,
            sim.write_tgb("p", 2).await,
            sim.write_tgb("p", 3).await,
        ];
        let head = sim.commit("p", tgbs.clone()).await;
        // Step 0: a byte of slice 1 (rank 1's); step 1: a byte of the footer.
        let slice0_len = common::payload("p", 1, 0).len();
        flip_byte(&store, &tgbs[0].key, slice0_len + 3).await;
        flip_byte(&store, &tgbs[1].key, tgbs[1].footer_offset as usize + 30).await;

        // Rank 0 reads slice 0 of step 0: untouched, so it succeeds.
        let mut r0 = builder(store.clone(), config(0, [2, 1, 1, 1], "g"))
            .open()
            .await
            .unwrap();
        check_batch(&sim, &head, &r0.next().await.unwrap());

        let mut r1 = builder(store.clone(), config(1, [2, 1, 1, 1], "g"))
            .open()
            .await
            .unwrap();
        let err = r1.next().await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ConsumerError::Data { .. }),
            "{}: {msg}",
            target.name
        );
        assert!(
            msg.contains(&tgbs[0].key) && msg.contains("slice 1"),
            "{msg}"
        );
        // The cursor did not move: retrying gives the same error, not step 1.
        assert!(r1.next().await.is_err());
        assert_eq!(r1.state().next_step, 0);

        // The footer of step 1 is corrupt for every rank.
        let err = r0.next().await.unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConsumerError::Data { .. }), "{msg}");
        assert!(
            msg.contains(&tgbs[1].key) && msg.contains("footer"),
            "{msg}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_manifest_is_a_clear_error() {
    let store = StreamStore::in_memory();
    store
        .create(
            &manifest_key(1),
            Bytes::from_static(b"this is not a manifest"),
        )
        .await
        .unwrap();
    let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    let err = c.next().await.unwrap_err();
    assert!(
        matches!(err, ConsumerError::Manifest { ref key, .. } if key == &manifest_key(1)),
        "{err}"
    );

    // A valid manifest stored under the wrong version number.
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("p", 1, 2, 1).await;
    let v2 = sim.read_version(2).await.unwrap();
    store
        .create(&manifest_key(3), encode_manifest(&v2))
        .await
        .unwrap();
    let state = ConsumerState {
        version: 2,
        next_step: 2,
        dp: 1,
        cp: 1,
        group: "g".into(),
    };
    let mut c = builder(store, config(0, [1, 1, 1, 1], "g"))
        .state(state.clone())
        .open()
        .await
        .unwrap();
    let err = c.next().await.unwrap_err();
    assert!(err.to_string().contains("says it is version 2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_mixing_grids_is_refused_naming_the_rule() {
    // The rebase refuses a TGB of another grid, so such a version can only be forged.
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 2, 1);
    sim.produce("p", 1, 1, 1).await;
    let mut v2 = sim.read_version(1).await.unwrap();
    let b = sim.write_tgb_grid("p", 2, 4, 1).await;
    v2.version = 2;
    v2.total_tgbs += 1;
    v2.retained_bytes += b.object_size;
    let mut b = b;
    b.visible_version = 2;
    v2.tgbs.push(b.clone());
    let e = v2.producers.get_mut("p").unwrap();
    e.last_sequence = 2;
    e.tgbs_committed = 2;
    e.last_commit_version = 2;
    e.source_offset = b.source_offset;
    store
        .create(&manifest_key(2), encode_manifest(&v2))
        .await
        .unwrap();
    let mut c = builder(store, config(0, [2, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    c.next().await.unwrap();
    let err = c.next().await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ConsumerError::Manifest { .. }), "{msg}");
    assert!(
        msg.contains(&manifest_key(2)) && msg.contains("grid"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impossible_cp_ratio_is_refused() {
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 1, 2);
    sim.produce("p", 1, 1, 1).await;
    let mut c = builder(store, config(0, [1, 3, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    let err = c.next().await.unwrap_err();
    assert!(matches!(err, ConsumerError::Remap { .. }), "{err}");
}

/// Versions 1..=6 with two TGBs each, then version 7 trims the first 8 steps, GC writes its
/// boundary and deletes versions 1..=6.
async fn gc_stream(store: &StreamStore) -> Sim {
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("p", 1, 12, 2).await;
    let t = sim.write_tgb("p", 13).await;
    let v7 = sim.commit_trim("p", vec![t], 8).await;
    assert_eq!((v7.version, v7.first_step), (7, 8));
    let boundary = GcBoundary {
        min_live_version: 7,
        low_water_step: 8,
        updated_at_ms: 0,
    };
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&boundary))
        .await
        .unwrap();
    for v in 1..7 {
        store.delete(&manifest_key(v)).await.unwrap();
    }
    sim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restoring_a_cursor_whose_version_gc_deleted() {
    let store = StreamStore::in_memory();
    let sim = gc_stream(&store).await;
    let head = sim.read_version(7).await.unwrap();
    let state = |next_step| ConsumerState {
        version: 3,
        next_step,
        dp: 1,
        cp: 1,
        group: "g".into(),
    };
    // Step 9 is still retained: found through the boundary and one listing.
    let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
        .state(state(9))
        .open()
        .await
        .unwrap();
    for want in 9..13 {
        let b = c.next().await.unwrap();
        assert_eq!((b.step, b.version), (want, 7));
        check_batch(&sim, &head, &b);
    }
    let st = c.stats();
    assert_eq!(
        st.store.lists - st.boundary_reads,
        1,
        "one listing of the manifests"
    );

    // Step 5 was trimmed: a clear error, at restore.
    let err = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
        .state(state(5))
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ConsumerError::DataReclaimed {
                step: 5,
                first_step: 8,
                ..
            }
        ),
        "{err}"
    );
    // A fresh consumer (step 0) also learns it was reclaimed.
    let err = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap_err();
    assert!(
        matches!(err, ConsumerError::DataReclaimed { step: 0, .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_consumer_whose_next_version_was_deleted_moves_on() {
    let store = StreamStore::in_memory();
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("p", 1, 2, 2).await; // v1: steps 0, 1
    let cfg = config(0, [1, 1, 1, 1], "g");
    let settings = ConsumerSettings {
        prefetch: 0,
        poll_max: Duration::from_millis(2),
        ..fast()
    };
    let mut c = builder(store.clone(), cfg)
        .settings(settings)
        .open()
        .await
        .unwrap();
    c.next().await.unwrap();
    c.next().await.unwrap();
    // v2 and v3 appear, and GC deletes v2 before the consumer reads it.
    sim.produce("p", 3, 2, 1).await;
    store.delete(&manifest_key(2)).await.unwrap();
    let b = timeout(Duration::from_secs(10), c.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((b.step, b.version), (2, 3));
    let st = c.stats();
    assert_eq!(
        st.store.lists - st.boundary_reads,
        1,
        "one listing of the manifests"
    );
}
