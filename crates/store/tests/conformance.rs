//! The conformance suite on every store: memory, local directory, and the
//! loopback servers `cargo xtask test` starts (moto S3, Azurite, optionally
//! SeaweedFS and a real GCS bucket).

use std::sync::Arc;

use batchweave_store::conformance::{IgnoreIfNoneMatch, check_create_race, run_suite};
use batchweave_store::testing::all_targets;
use batchweave_store::{StoreError, StreamStore};
use bytes::Bytes;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conformance_suite_on_every_store() {
    let targets = all_targets();
    for t in &targets {
        let store = t
            .open_fresh("conformance")
            .await
            .unwrap_or_else(|e| panic!("{}: open failed: {e}", t.name));
        // Contended creates are slow on SeaweedFS (seconds per round): few rounds there.
        let rounds = if t.name == "s3-seaweedfs" { 3 } else { 50 };
        let report = run_suite(&store, 16, rounds)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        assert_eq!(
            report.passed,
            ["basic", "conditional_create", "probe", "create_race"]
        );
        println!(
            "conformance PASSED on {} ({}): {:?}, race {} rounds x {} racers",
            t.name, report.url, report.passed, report.race.0, report.race.1
        );
    }
}

#[tokio::test]
async fn race_check_fails_on_a_store_that_ignores_if_none_match() {
    let broken = StreamStore::in_memory().map_backend(|b| Arc::new(IgnoreIfNoneMatch(b)));
    let err = check_create_race(&broken, 16, 5).await.unwrap_err();
    assert!(err.contains("winners"), "{err}");
}

#[tokio::test]
async fn open_probe_refuses_a_store_that_ignores_if_none_match() {
    let broken = StreamStore::in_memory().map_backend(|b| Arc::new(IgnoreIfNoneMatch(b)));
    let err = broken.verify_conditional_create().await.unwrap_err();
    assert!(matches!(err, StoreError::NonConformant { .. }), "{err}");
    assert!(
        err.to_string().contains("ignores conditional create"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_upload_roundtrip_on_every_store() {
    for t in all_targets() {
        let s = t.open_fresh("multipart").await.unwrap();
        let parts: Vec<Bytes> = (0..3u8)
            .map(|i| Bytes::from(vec![i; 4 * 1024 * 1024 + 17]))
            .collect();
        let whole: Vec<u8> = parts.iter().flat_map(|b| b.iter().copied()).collect();
        s.put_multipart("big/object", parts, 5 * 1024 * 1024)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        let got = s.get("big/object", 64 << 20).await.unwrap();
        assert_eq!(got.len(), whole.len(), "{}", t.name);
        assert!(got == whole, "{}: multipart bytes differ", t.name);
        assert!(
            s.stats().multipart_parts >= 3,
            "{}: {:?}",
            t.name,
            s.stats()
        );
        s.delete("big/object").await.unwrap();
    }
}

#[tokio::test]
async fn counters_account_requests_and_bytes() {
    let s = StreamStore::in_memory();
    let before = s.stats();
    s.put("a", Bytes::from(vec![7u8; 1000])).await.unwrap();
    s.get_range("a", 10..110).await.unwrap();
    s.get("a", 4096).await.unwrap();
    let _ = s.create("a", Bytes::from_static(b"x")).await;
    let d = s.stats().since(&before);
    assert_eq!(
        (d.puts, d.range_gets, d.gets, d.creates, d.conflicts),
        (1, 1, 1, 1, 1)
    );
    assert_eq!(d.bytes_written, 1000);
    assert_eq!(d.bytes_read, 1100);
}
