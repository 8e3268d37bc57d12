//! Consumers that cannot be fooled: a version below the GC boundary (a ghost filling a
//! deleted slot) never reaches a rank, and a version that breaks a rule of the format or
//! rewrites history is refused with nothing from it delivered. Every test runs on every
//! store target (memory, local directory, and the loopback S3 and Azure servers when
//! configured) and fails on a consumer without the checks.

mod common;

use batchweave_chain::Chain;
use batchweave_consumer::{ConsumerError, ConsumerState};
use batchweave_manifest::{
    DecodeLimits, GcBoundary, Manifest, Pending, encode_manifest, manifest_key, rebase,
};
use batchweave_store::StreamStore;
use common::{Sim, builder, check_batch, config, fresh_stores, id_word};

/// The reproduction: producer `a` commits v1 (steps 0, 1) and v2..v4 (steps 2,
/// 3, 4); a stalled producer `s` still holds v1. GC makes the boundary (min live 4,
/// low water 2) durable and deletes v1..v3; then `s` creates `manifests/2` in the empty
/// slot, listing its own TGBs as steps 2 and 3. Returns the live head v4 and the ghost.
async fn ghost_stream(store: &StreamStore) -> (Sim, Manifest, Manifest) {
    let sim = Sim::new(store.clone(), 1, 1);
    sim.produce("a", 1, 2, 2).await; // v1: steps 0, 1
    let v1 = sim.read_version(1).await.unwrap();
    sim.produce("a", 3, 3, 1).await; // v2, v3, v4: steps 2, 3, 4
    let head = sim.head().await;
    assert_eq!((head.version, head.total_tgbs), (4, 5));
    Chain::new(store.clone(), DecodeLimits::default())
        .advance_boundary(GcBoundary {
            min_live_version: 4,
            low_water_step: 2,
            updated_at_ms: 0,
        })
        .await
        .unwrap();
    for v in 1..4 {
        store.delete(&manifest_key(v)).await.unwrap();
    }
    let tgbs = vec![sim.write_tgb("s", 1).await, sim.write_tgb("s", 2).await];
    let pending = Pending {
        producer_id: "s".into(),
        epoch: 1,
        incarnation: id_word("s") | 1,
        source_offset: 2,
        tgbs,
        now_ms: 1_700_000_000_000,
    };
    let ghost = rebase(&v1, &pending, 0).unwrap();
    assert_eq!(ghost.version, 2);
    store
        .create(&manifest_key(2), encode_manifest(&ghost))
        .await
        .unwrap();
    (sim, head, ghost)
}

fn cursor(version: u64, next_step: u64) -> ConsumerState {
    ConsumerState {
        version,
        next_step,
        dp: 1,
        cp: 1,
        group: "g".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_rank_never_trains_on_a_ghost_version() {
    for (t, store) in fresh_stores("ghost-restore").await {
        let (sim, head, _ghost) = ghost_stream(&store).await;
        // The cursor names the deleted version 2, whose slot the ghost now fills.
        let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
            .state(cursor(2, 2))
            .open()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        for want in 2..5 {
            let b = c.next().await.unwrap();
            assert_eq!(b.step, want, "{}", t.name);
            assert_eq!(
                b.sources[0].producer_id, "a",
                "{}: step {want} came from the ghost",
                t.name
            );
            check_batch(&sim, &head, &b);
        }
        // A cursor whose step GC reclaimed: a clear error, never the ghost's data.
        let err = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
            .state(cursor(2, 1))
            .open()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                ConsumerError::DataReclaimed {
                    step: 1,
                    first_step: 2,
                    ..
                }
            ),
            "{}: {err}",
            t.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_rank_never_adopts_a_ghost_version() {
    for (t, store) in fresh_stores("ghost-running").await {
        let sim = Sim::new(store.clone(), 1, 1);
        sim.produce("a", 1, 2, 2).await; // v1: steps 0, 1
        let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
            .open()
            .await
            .unwrap();
        c.next().await.unwrap();
        c.next().await.unwrap();
        // The rank holds v1 while the rest of the stream moves on and GC deletes v1..v3.
        let v1 = sim.read_version(1).await.unwrap();
        sim.produce("a", 3, 3, 1).await;
        let head = sim.head().await;
        Chain::new(store.clone(), DecodeLimits::default())
            .advance_boundary(GcBoundary {
                min_live_version: 4,
                low_water_step: 2,
                updated_at_ms: 0,
            })
            .await
            .unwrap();
        for v in 1..4 {
            store.delete(&manifest_key(v)).await.unwrap();
        }
        let pending = Pending {
            producer_id: "s".into(),
            epoch: 1,
            incarnation: 7,
            source_offset: 1,
            tgbs: vec![sim.write_tgb("s", 1).await],
            now_ms: 1_700_000_000_000,
        };
        let ghost = rebase(&v1, &pending, 0).unwrap();
        store
            .create(&manifest_key(2), encode_manifest(&ghost))
            .await
            .unwrap();
        // Its next GET of v+1 finds the ghost: it must read the boundary and skip it.
        let b = c.next().await.unwrap();
        assert_eq!((b.step, b.version), (2, 4), "{}", t.name);
        assert_eq!(
            b.sources[0].producer_id, "a",
            "{}: the ghost's TGB was delivered",
            t.name
        );
        check_batch(&sim, &head, &b);
    }
}

/// Forges version `v + 1` from the head `v` with `f`, and creates it.
async fn forge(sim: &Sim, f: impl FnOnce(&mut Manifest)) -> Manifest {
    let mut m = sim.head().await;
    m.version += 1;
    f(&mut m);
    sim.store
        .create(&manifest_key(m.version), encode_manifest(&m))
        .await
        .unwrap();
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_reappends_a_committed_tgb_is_refused() {
    for (t, store) in fresh_stores("dup-tgb").await {
        let sim = Sim::new(store.clone(), 1, 1);
        sim.produce("a", 1, 3, 1).await; // v1..v3: steps 0, 1, 2
        let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
            .open()
            .await
            .unwrap();
        for _ in 0..3 {
            c.next().await.unwrap();
        }
        // v4 lists step 0's TGB again as step 3, with a correct checksum and totals.
        let forged = forge(&sim, |m| {
            let mut again = m.tgbs[0].clone();
            again.visible_version = m.version;
            m.retained_bytes += again.object_size;
            m.tgbs.push(again);
            m.total_tgbs += 1;
            let e = m.producers.get_mut("a").unwrap();
            e.tgbs_committed += 1;
            e.last_commit_version = m.version;
        })
        .await;
        let err = c.next().await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ConsumerError::Manifest { ref key, .. } if *key == manifest_key(forged.version)),
            "{}: {msg}",
            t.name
        );
        // The cursor did not move and nothing from v4 was delivered.
        assert_eq!(c.state().next_step, 3, "{}", t.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_that_changes_a_delivered_step_is_refused() {
    for (t, store) in fresh_stores("changed-step").await {
        let sim = Sim::new(store.clone(), 1, 1);
        sim.produce("a", 1, 3, 1).await; // v1..v3: steps 0, 1, 2
        let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
            .open()
            .await
            .unwrap();
        for _ in 0..3 {
            c.next().await.unwrap();
        }
        // v4 appends a real TGB but also rewrites step 0's descriptor (valid on its own:
        // only the comparison with the version held shows it).
        let next = sim.write_tgb("a", 4).await;
        let forged = forge(&sim, |m| {
            m.tgbs[0].footer_crc32 ^= 1;
            let mut d = next;
            d.visible_version = m.version;
            m.retained_bytes += d.object_size;
            m.tgbs.push(d);
            m.total_tgbs += 1;
            let e = m.producers.get_mut("a").unwrap();
            e.tgbs_committed += 1;
            e.last_sequence += 1;
            e.source_offset = 4;
            e.last_commit_version = m.version;
        })
        .await;
        let err = c.next().await.unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, ConsumerError::Data { ref key, .. } if *key == manifest_key(forged.version)),
            "{}: {msg}",
            t.name
        );
        assert!(
            msg.contains("does not extend version 3"),
            "{}: {msg}",
            t.name
        );
        assert_eq!(c.state().next_step, 3, "{}", t.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_from_a_version_without_tgbs_says_data_reclaimed() {
    for (t, store) in fresh_stores("empty-restore").await {
        let sim = Sim::new(store.clone(), 1, 1);
        sim.commit("p", vec![]).await; // v1: an epoch claim, no TGB (no grid known yet)
        sim.produce("p", 1, 4, 1).await; // v2..v5: steps 0..3
        // GC: the mark passed step 3; the TGB objects below it are deleted before any
        // producer trimmed them from a version.
        Chain::new(store.clone(), DecodeLimits::default())
            .advance_boundary(GcBoundary {
                min_live_version: 1,
                low_water_step: 3,
                updated_at_ms: 0,
            })
            .await
            .unwrap();
        let head = sim.head().await;
        for d in &head.tgbs[..3] {
            store.delete(&d.key).await.unwrap();
        }
        let mut c = builder(store.clone(), config(0, [1, 1, 1, 1], "g"))
            .state(cursor(1, 1))
            .open()
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        let err = c.next().await.unwrap_err();
        assert!(
            matches!(
                err,
                ConsumerError::DataReclaimed {
                    step: 1,
                    tgb_step: 1,
                    first_step: 3,
                    ..
                }
            ),
            "{}: {err}",
            t.name
        );
    }
}
