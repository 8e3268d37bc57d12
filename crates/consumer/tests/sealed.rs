//! Sealed TGBs (format version 2): a rank reads its slot with one ranged GET and no footer,
//! checks it against the manifest alone, and never delivers a slot that is corrupt, read
//! from the wrong place, or from another TGB.

mod common;

use batchweave_consumer::planted::{PlantedConsumerBugs, plant};
use batchweave_consumer::{ConsumerError, ConsumerSettings, ReadMode};
use batchweave_store::StreamStore;
use batchweave_tgb::{Grid, SliceRead, steps_covered};
use bytes::Bytes;
use common::{Sim, builder, check_batch, config, expected, fast, fresh_stores};

fn sealed_sim(store: &StreamStore, dp: u32, cp: u32) -> Sim {
    let mut sim = Sim::new(store.clone(), dp, cp);
    sim.sealed = true;
    sim
}

/// Every rank of several consumer grids (the stream's, DP remap and CP split) and both
/// read modes receives exactly its bytes; range reads of sealed TGBs read no footer and
/// send one ranged GET per planned read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sealed_streams_deliver_every_rank_its_bytes_with_one_get_per_read() {
    for (target, store) in fresh_stores("consumer-sealed").await {
        let sim = sealed_sim(&store, 2, 2);
        sim.produce("p", 1, 8, 3).await;
        let head = sim.head().await;
        assert!(head.tgbs.iter().all(|t| t.slice_stride > 0));
        for degrees in [[2, 2, 1, 1], [1, 2, 2, 1], [2, 4, 1, 1], [1, 1, 1, 1]] {
            let world: u32 = degrees.iter().product();
            for mode in [ReadMode::Range, ReadMode::Dense] {
                for rank in 0..world {
                    let settings = ConsumerSettings {
                        read_mode: mode,
                        ..fast()
                    };
                    let mut c = builder(store.clone(), config(rank, degrees, "g"))
                        .settings(settings)
                        .open()
                        .await
                        .unwrap();
                    let before = c.stats();
                    let steps =
                        steps_covered(Grid::new(2, 2), Grid::new(degrees[0], degrees[1]), 8)
                            .unwrap();
                    let mut reads = 0u64;
                    for _ in 0..steps {
                        let b = c.next().await.unwrap();
                        check_batch(&sim, &head, &b);
                        reads += b.sources.len() as u64;
                    }
                    assert!(
                        reads > 0,
                        "{}: {degrees:?} rank {rank} read nothing",
                        target.name
                    );
                    let s = c.stats();
                    if mode == ReadMode::Range {
                        assert_eq!(s.footers_read, 0, "{}: {degrees:?}", target.name);
                        assert_eq!(
                            s.store.range_gets - before.store.range_gets,
                            reads,
                            "{}: {degrees:?} rank {rank}: one ranged GET per read",
                            target.name
                        );
                    }
                }
            }
        }
    }
}

async fn rewrite(store: &StreamStore, key: &str, f: impl FnOnce(&mut Vec<u8>)) {
    let mut obj = store.get(key, 1 << 20).await.unwrap().to_vec();
    f(&mut obj);
    store.put(key, Bytes::from(obj)).await.unwrap();
}

/// Rank 1's slot of step 0 with one byte flipped: the payload, the padding or any seal
/// field. Rank 0 still reads its untouched slot; rank 1 gets a data error naming the key,
/// and its cursor stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_anywhere_in_a_slot_is_a_data_error() {
    for (target, store) in fresh_stores("consumer-sealed-flip").await {
        let mut sim = sealed_sim(&store, 2, 1);
        // Unequal slices, so the slots have padding.
        sim.spread = 32;
        let tgb = sim.write_tgb("p", 1).await;
        let head = sim.commit("p", vec![tgb.clone()]).await;
        let l = tgb.slice_stride as usize;
        for at in [
            l,
            l + 5,
            2 * l - 25,
            2 * l - 24,
            2 * l - 20,
            2 * l - 12,
            2 * l - 6,
            2 * l - 1,
        ] {
            let original = store.get(&tgb.key, 1 << 20).await.unwrap();
            rewrite(&store, &tgb.key, |o| o[at] ^= 0x10).await;
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
                matches!(err, ConsumerError::Data { .. }) && msg.contains(&tgb.key),
                "{}: byte {at}: {msg}",
                target.name
            );
            assert!(r1.next().await.is_err(), "{}: byte {at}", target.name);
            store.put(&tgb.key, original).await.unwrap();
        }
    }
}

/// The object under a committed key replaced by another sealed TGB of the same layout
/// (a zombie's rewrite, a misdirected copy): every slot opens on its own, but its seal
/// names another footer CRC32, so no rank delivers it.
#[tokio::test]
async fn a_slot_of_another_tgb_is_refused() {
    for (target, store) in fresh_stores("consumer-sealed-swap").await {
        let mut sim = sealed_sim(&store, 2, 1);
        sim.spread = 1;
        let a = sim.write_tgb("p", 1).await;
        let b = sim.write_tgb("q", 1).await;
        assert_eq!(a.slice_stride, b.slice_stride);
        assert_ne!(a.footer_crc32, b.footer_crc32);
        sim.commit("p", vec![a.clone()]).await;
        let other = store.get(&b.key, 1 << 20).await.unwrap();
        store.put(&a.key, other).await.unwrap();
        for rank in 0..2 {
            let mut c = builder(store.clone(), config(rank, [2, 1, 1, 1], "g"))
                .open()
                .await
                .unwrap();
            let msg = c.next().await.unwrap_err().to_string();
            assert!(
                msg.contains(&a.key) && msg.contains("footer CRC32"),
                "{}: {msg}",
                target.name
            );
        }
    }
}

/// The checks above are what stands between a rank and bad bytes: a reader that trusts
/// the seal (the planted bug `trust_seals`) delivers the flipped slot and the other TGB's.
#[tokio::test]
async fn a_reader_that_trusts_seals_delivers_bad_bytes() {
    let (_target, store) = fresh_stores("consumer-sealed-plant").await.remove(0);
    let mut sim = sealed_sim(&store, 2, 1);
    sim.spread = 1;
    let a = sim.write_tgb("p", 1).await;
    let b = sim.write_tgb("q", 1).await;
    let head = sim.commit("p", vec![a.clone()]).await;
    let l = a.slice_stride as usize;
    rewrite(&store, &a.key, |o| o[l + 3] ^= 0x10).await;
    let old = plant(PlantedConsumerBugs {
        trust_seals: true,
        ..PlantedConsumerBugs::default()
    });
    let mut r1 = builder(store.clone(), config(1, [2, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    let flipped = r1.next().await.unwrap();
    let other = store.get(&b.key, 1 << 20).await.unwrap();
    store.put(&a.key, other).await.unwrap();
    let mut r0 = builder(store.clone(), config(0, [2, 1, 1, 1], "g"))
        .open()
        .await
        .unwrap();
    let swapped = r0.next().await.unwrap();
    plant(old);
    // Both are wrong: the bytes differ from what check_batch (what the other tests
    // assert) expects for the step.
    for batch in [&flipped, &swapped] {
        let src = &batch.sources[0];
        let read = SliceRead {
            tgb_index: src.tgb_step,
            first_slice: src.first_slice,
            slice_count: src.slice_count,
            part: src.part,
        };
        assert_ne!(batch.data[0], expected(&sim, &head.tgbs[0], &read));
    }
}
