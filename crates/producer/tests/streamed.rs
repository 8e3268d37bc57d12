//! TGBs streamed into a multipart upload ([`Producer::stream_tgb`]): the object is the
//! one `append` would write, it commits in order with appended ones, a TGB that fails or
//! is abandoned leaves nothing visible and costs no sequence number, and the writer's
//! memory stays bounded by its parts, not by the TGB.

mod common;

use std::sync::Arc;
use std::time::Duration;

use batchweave_manifest::TGB_DIR;
use batchweave_producer::{Producer, ProducerError, ProducerSettings};
use batchweave_store::testing::all_targets;
use batchweave_store::{FaultOp, FaultRule, FaultStore, StreamStore};
use batchweave_tgb::{FooterCheck, decode_footer, decode_object, encode_tgb};
use bytes::Bytes;
use common::{check_chain, check_exactly_once, slices};

const MIB: usize = 1024 * 1024;

fn settings() -> ProducerSettings {
    ProducerSettings {
        seed: Some(7),
        multipart_part_size: 5 * MIB,
        stream_parts_in_flight: 2,
        ..Default::default()
    }
}

/// Slice `s` of a streamed test TGB at `offset`: `len` bytes, distinct per slice and TGB.
fn big_slice(offset: u64, s: u32, len: usize) -> Bytes {
    let seed = (offset as u32).wrapping_mul(31).wrapping_add(s);
    Bytes::from(
        (0..len)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8)
            .collect::<Vec<u8>>(),
    )
}

/// Streams the TGB of `slices` in pieces of `piece` bytes.
async fn stream(
    p: &mut Producer,
    dp: u32,
    cp: u32,
    slices: &[Bytes],
    piece: usize,
    offset: u64,
) -> Result<u64, ProducerError> {
    let mut w = p.stream_tgb(dp, cp).await?;
    for s in slices {
        let mut rest = s.clone();
        while !rest.is_empty() {
            let n = piece.min(rest.len());
            w.write(rest.split_to(n)).await?;
        }
        w.end_slice()?;
    }
    Ok(w.finish(offset).await?.sequence)
}

/// On every store: TGBs streamed in pieces across several 5 MiB parts (and one smaller
/// than a part) commit between appended ones, in sequence order, exactly once, and
/// each object is byte for byte what `encode_tgb` makes of the same slices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_tgbs_are_the_encoded_objects_and_commit_in_order() {
    for target in all_targets() {
        let store = target.open_fresh("streamed").await.unwrap();
        let mut p = Producer::builder(store.clone(), "video")
            .settings(settings())
            .open()
            .await
            .unwrap();
        let big: Vec<Bytes> = (0..4).map(|s| big_slice(2, s, 3 * MIB + 17)).collect();
        let small: Vec<Bytes> = (0..4).map(|s| big_slice(4, s, 1000 + s as usize)).collect();
        p.append(2, 2, slices("video", 1, 4), 1).await.unwrap();
        assert_eq!(stream(&mut p, 2, 2, &big, 700_001, 2).await.unwrap(), 2);
        p.append(2, 2, slices("video", 3, 4), 3).await.unwrap();
        assert_eq!(stream(&mut p, 2, 2, &small, 333, 4).await.unwrap(), 4);
        let stats = p.close().await.unwrap();
        assert_eq!(stats.tgbs_committed, 4, "{}", target.name);

        let newest = check_chain(&store).await;
        let per = check_exactly_once(&store, &newest).await;
        assert_eq!(per["video"], vec![1, 2, 3, 4], "{}", target.name);
        for (d, want) in [(&newest.tgbs[1], &big), (&newest.tgbs[3], &small)] {
            let obj = store.get(&d.key, 1 << 30).await.unwrap();
            let enc = encode_tgb(2, 2, want.clone()).unwrap();
            assert!(obj == enc.to_bytes(), "{}: {} differs", target.name, d.key);
            assert_eq!(
                (d.object_size, d.footer_offset, d.footer_crc32),
                (enc.object_size, enc.footer_offset, enc.footer_crc32)
            );
            // A reader checks it as it checks any TGB: the footer by the manifest's CRC.
            let f = d.footer_offset as usize;
            let index = decode_footer(
                &obj[f..f + d.footer_length as usize],
                FooterCheck::new(d.footer_offset, d.footer_crc32).with_object_size(d.object_size),
            )
            .unwrap();
            let r = index.range_of(3, 1).unwrap();
            index
                .verify(3, &obj[r.start as usize..r.end as usize])
                .unwrap();
            assert!(decode_object(&obj).is_ok());
        }
    }
}

/// A TGB with too few slices is refused at `finish` (nothing visible, no sequence
/// used); a write beyond the last slice is refused without harming the TGB.
#[tokio::test]
async fn a_wrong_slice_count_is_refused_and_loses_nothing() {
    let store = StreamStore::in_memory();
    let mut p = Producer::builder(store.clone(), "v")
        .settings(settings())
        .open()
        .await
        .unwrap();
    let mut w = p.stream_tgb(2, 1).await.unwrap();
    w.write_slice(Bytes::from_static(b"only one"))
        .await
        .unwrap();
    let e = w.finish(1).await.unwrap_err();
    assert!(e.to_string().contains("needs 2 slices"), "{e}");
    assert_eq!(p.next_sequence(), 1);

    let mut w = p.stream_tgb(2, 1).await.unwrap();
    w.write_slice(Bytes::from_static(b"a")).await.unwrap();
    w.write_slice(Bytes::from_static(b"b")).await.unwrap();
    let e = w.write(Bytes::from_static(b"c")).await.unwrap_err();
    assert!(matches!(e, ProducerError::Tgb(_)), "{e}");
    assert!(w.end_slice().is_err());
    assert_eq!(w.finish(1).await.unwrap().sequence, 1);

    // Another grid than the stream's is refused before anything is uploaded.
    let e = p.stream_tgb(1, 2).await.unwrap_err();
    assert!(e.to_string().contains("grid"), "{e}");
    p.close().await.unwrap();
    let newest = check_chain(&store).await;
    assert_eq!(newest.tgbs.len(), 1);
    let obj = store.get(&newest.tgbs[0].key, 1 << 20).await.unwrap();
    let enc = encode_tgb(
        2,
        1,
        vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
    )
    .unwrap();
    assert_eq!(obj, enc.to_bytes());
}

/// Abandoned TGBs (dropped or aborted mid-way) leave no object, give back their buffer
/// permit (with `max_buffered = 1` the next TGB would wait forever otherwise) and their
/// sequence number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_tgbs_leave_nothing_and_give_back_their_permit() {
    let dir = tempfile::tempdir().unwrap();
    let store = StreamStore::open(&format!("file://{}", dir.path().display()))
        .await
        .unwrap();
    let mut p = Producer::builder(store.clone(), "v")
        .settings(ProducerSettings {
            max_buffered: 1,
            ..settings()
        })
        .open()
        .await
        .unwrap();
    for abort in [false, true] {
        let mut w = p.stream_tgb(1, 1).await.unwrap();
        w.write(big_slice(9, 0, 6 * MIB)).await.unwrap();
        if abort {
            w.abort().await.unwrap();
        } else {
            drop(w);
        }
        assert_eq!(p.next_sequence(), 1);
    }
    let append = p.append(1, 1, slices("v", 1, 1), 1);
    let r = tokio::time::timeout(Duration::from_secs(30), append)
        .await
        .expect("the abandoned TGBs kept the only buffer permit")
        .unwrap();
    assert_eq!(r.sequence, 1);
    p.close().await.unwrap();
    let newest = check_chain(&store).await;
    assert_eq!(newest.tgbs.len(), 1);
    let objects = store.list(TGB_DIR.trim_end_matches('/')).await.unwrap();
    assert_eq!(objects.len(), 1, "{objects:?}");
}

/// Parts that fail (before reaching the store, or with the reply lost) fail their TGB:
/// its upload is aborted, nothing of it is visible, and the application's retry of the
/// same source range commits exactly once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_parts_fail_the_tgb_and_a_retry_commits_it_once() {
    let base = StreamStore::in_memory();
    let fault = Arc::new(FaultStore::new(
        base.backend().clone(),
        vec![FaultRule {
            ops: vec![FaultOp::Part],
            error_before: 0.15,
            error_after: 0.15,
            ..Default::default()
        }],
        11,
        base.clock().clone(),
    ));
    let f2 = fault.clone();
    let store = base.map_backend(move |_| f2);
    let mut p = Producer::builder(store.clone(), "v")
        .settings(settings())
        .open()
        .await
        .unwrap();
    let mut failures = 0;
    for offset in 1..=6u64 {
        let tgb: Vec<Bytes> = (0..2).map(|s| big_slice(offset, s, 6 * MIB)).collect();
        loop {
            match stream(&mut p, 2, 1, &tgb, 2 * MIB + 3, offset).await {
                Ok(seq) => {
                    assert_eq!(seq, offset);
                    break;
                }
                Err(ProducerError::Store(_)) => failures += 1,
                Err(e) => panic!("unexpected: {e}"),
            }
            assert!(failures < 100, "no TGB got through");
        }
    }
    p.close().await.unwrap();
    fault.set_enabled(false);
    assert!(failures >= 2, "faults were injected: {:?}", fault.stats());
    let newest = check_chain(&store).await;
    let per = check_exactly_once(&store, &newest).await;
    assert_eq!(per["v"], (1..=6).collect::<Vec<_>>());
    for d in &newest.tgbs {
        let obj = store.get(&d.key, 1 << 30).await.unwrap();
        let want: Vec<Bytes> = (0..2)
            .map(|s| big_slice(d.source_offset, s, 6 * MIB))
            .collect();
        assert!(obj == encode_tgb(2, 1, want).unwrap().to_bytes());
    }
}

/// Peak resident memory while streaming a 512 MiB TGB to a local directory grows by
/// a few parts, not by the TGB (Linux: `VmHWM` of `/proc/self/status`; nextest runs
/// each test in its own process). Every piece is a fresh allocation, so a writer that
/// held on to them would show. `BATCHWEAVE_STREAM_TGB_MIB` sets another size (a
/// multiple of 8 MiB, for example 4096 for the 4 GiB measurement in docs/benchmarks.md);
/// the test prints the peak growth and the rate.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_a_tgb_holds_a_few_parts_not_the_tgb() {
    fn peak_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
    let dir = tempfile::tempdir().unwrap();
    let store = StreamStore::open(&format!("file://{}", dir.path().display()))
        .await
        .unwrap();
    let mut p = Producer::builder(store.clone(), "v")
        .settings(settings())
        .open()
        .await
        .unwrap();
    const SLICES: u32 = 8;
    let total_mib: usize = std::env::var("BATCHWEAVE_STREAM_TGB_MIB")
        .ok()
        .map(|v| {
            v.parse()
                .expect("BATCHWEAVE_STREAM_TGB_MIB: a number of MiB")
        })
        .unwrap_or(512);
    assert!(
        total_mib >= 8 && total_mib.is_multiple_of(8),
        "BATCHWEAVE_STREAM_TGB_MIB must be a multiple of 8, got {total_mib}"
    );
    let slice = total_mib / 8 * MIB;
    let before = peak_kib();
    let started = std::time::Instant::now();
    let mut w = p.stream_tgb(SLICES, 1).await.unwrap();
    for s in 0..SLICES {
        for k in 0..slice / MIB {
            w.write(Bytes::from(vec![(s as usize * 131 + k) as u8; MIB]))
                .await
                .unwrap();
        }
        w.end_slice().unwrap();
    }
    let r = w.finish(1).await.unwrap();
    let elapsed = started.elapsed();
    let grown_mib = (peak_kib() - before) / 1024;
    p.close().await.unwrap();
    println!(
        "streamed a {total_mib} MiB TGB in {:.1} s ({:.0} MiB/s); peak RSS grew by {grown_mib} MiB",
        elapsed.as_secs_f64(),
        total_mib as f64 / elapsed.as_secs_f64()
    );
    assert_eq!(
        r.object_size,
        u64::from(SLICES) * slice as u64 + 20 + 20 * 8 + 32
    );
    let on_disk = store.head(&r.key).await.unwrap().size;
    assert_eq!(on_disk, r.object_size);
    // 2 parts in flight + 1 filling, of 5 MiB, plus a piece: about 16 MiB. The bound
    // leaves room for the allocator, far below the TGB's 512 MiB, and does not grow
    // with the TGB.
    assert!(
        grown_mib < 96,
        "peak RSS grew by {grown_mib} MiB streaming a {total_mib} MiB TGB"
    );
}
