//! Fault injection and the latency model behave as documented.

use std::sync::Arc;
use std::time::Duration;

use batchweave_store::{
    FaultOp, FaultRule, FaultStore, LatencyModel, LatencyStore, RetryPolicy, StoreError,
    StreamStore, TokioClock,
};
use bytes::Bytes;

fn faulty(rules: Vec<FaultRule>, seed: u64) -> (StreamStore, Arc<FaultStore>) {
    let base = StreamStore::in_memory();
    let clock = base.clock().clone();
    let fs = Arc::new(FaultStore::new(base.backend().clone(), rules, seed, clock));
    let fs2 = fs.clone();
    (base.map_backend(move |_| fs2), fs)
}

#[tokio::test(start_paused = true)]
async fn lost_create_reply_is_ambiguous_and_took_effect() {
    let (s, f) = faulty(
        vec![FaultRule {
            ops: vec![FaultOp::Create],
            error_after: 1.0,
            ..Default::default()
        }],
        1,
    );
    let r = s.create("m/1", Bytes::from_static(b"mine")).await;
    assert!(matches!(r, Err(StoreError::Ambiguous { .. })), "{r:?}");
    f.set_enabled(false);
    assert_eq!(
        s.get("m/1", 100).await.unwrap(),
        "mine",
        "the create took effect"
    );
    assert_eq!(f.stats().after, 1);
}

#[tokio::test(start_paused = true)]
async fn failed_create_before_effect_is_ambiguous_and_did_not_happen() {
    let (s, f) = faulty(
        vec![FaultRule {
            ops: vec![FaultOp::Create],
            error_before: 1.0,
            ..Default::default()
        }],
        1,
    );
    let r = s.create("m/1", Bytes::from_static(b"mine")).await;
    assert!(matches!(r, Err(StoreError::Ambiguous { .. })), "{r:?}");
    f.set_enabled(false);
    assert!(s.get_opt("m/1", 100).await.unwrap().is_none());
    // A conditional create is never retried by the store layer.
    assert_eq!(s.stats().creates, 1);
}

#[tokio::test(start_paused = true)]
async fn idempotent_requests_are_retried_through_transient_errors() {
    let (s, f) = faulty(
        vec![FaultRule {
            ops: vec![FaultOp::Read, FaultOp::Put, FaultOp::Delete],
            error_before: 0.4,
            error_after: 0.2,
            ..Default::default()
        }],
        7,
    );
    let s = s.with_retry(RetryPolicy {
        max_attempts: 30,
        ..Default::default()
    });
    for i in 0..50 {
        let k = format!("k/{i}");
        s.put(&k, Bytes::from(format!("v{i}"))).await.unwrap();
        assert_eq!(s.get(&k, 100).await.unwrap(), format!("v{i}"));
        s.delete(&k).await.unwrap();
    }
    let st = f.stats();
    assert!(
        st.before > 10 && st.after > 5,
        "faults were injected: {st:?}"
    );
    assert!(s.stats().retries >= st.before, "{:?}", s.stats());
}

#[tokio::test(start_paused = true)]
async fn retries_give_up_with_unavailable() {
    let (s, _f) = faulty(
        vec![FaultRule {
            error_before: 1.0,
            ..Default::default()
        }],
        3,
    );
    let s = s.with_retry(RetryPolicy {
        max_attempts: 4,
        ..Default::default()
    });
    let e = s.get("x", 10).await.unwrap_err();
    assert!(
        matches!(e, StoreError::Unavailable { attempts: 4, .. }),
        "{e}"
    );
}

#[tokio::test(start_paused = true)]
async fn stale_reads_hide_existing_objects_only_on_matching_paths() {
    let (s, f) = faulty(
        vec![FaultRule {
            ops: vec![FaultOp::Read, FaultOp::List],
            path_contains: Some("manifests/".into()),
            stale_read: 1.0,
            ..Default::default()
        }],
        5,
    );
    s.put("manifests/1", Bytes::from_static(b"a"))
        .await
        .unwrap();
    s.put("manifests/2", Bytes::from_static(b"b"))
        .await
        .unwrap();
    s.put("tgb/x", Bytes::from_static(b"c")).await.unwrap();
    assert!(
        s.get_opt("manifests/2", 10).await.unwrap().is_none(),
        "stale read"
    );
    assert_eq!(
        s.get("tgb/x", 10).await.unwrap(),
        "c",
        "other paths unaffected"
    );
    let listed = s.list("manifests").await.unwrap();
    assert!(listed.len() < 2, "stale list drops the newest: {listed:?}");
    assert!(f.stats().stale >= 2);
}

#[tokio::test(start_paused = true)]
async fn faults_are_deterministic_for_a_seed() {
    async fn outcomes(seed: u64) -> Vec<bool> {
        let (s, _f) = faulty(
            vec![FaultRule {
                ops: vec![FaultOp::Create],
                error_before: 0.5,
                ..Default::default()
            }],
            seed,
        );
        let mut v = Vec::new();
        for i in 0..64 {
            v.push(s.create(&format!("k{i}"), Bytes::new()).await.is_ok());
        }
        v
    }
    assert_eq!(outcomes(11).await, outcomes(11).await);
    assert_ne!(outcomes(11).await, outcomes(12).await);
}

#[tokio::test(start_paused = true)]
async fn latency_model_runs_in_virtual_time() {
    let base = StreamStore::in_memory();
    let clock = Arc::new(TokioClock::with_base(0));
    let model = LatencyModel {
        first_byte: Duration::from_millis(20),
        bandwidth: 1024.0 * 1024.0,
        jitter: Duration::ZERO,
        put_rate: 10.0,
        get_rate: 0.0,
    };
    let c2 = clock.clone();
    let s = base.map_backend(move |b| Arc::new(LatencyStore::new(b, model, 1, c2)));
    let t0 = tokio::time::Instant::now();
    s.put("one", Bytes::from(vec![0u8; 1024 * 1024]))
        .await
        .unwrap();
    let one = t0.elapsed();
    assert!(
        one >= Duration::from_millis(1020) && one < Duration::from_millis(1100),
        "{one:?}"
    );
    // 20 puts at 10 PUT/s are paced by the rate limit.
    let t1 = tokio::time::Instant::now();
    let puts = (0..20).map(|i| {
        let s = s.clone();
        async move { s.put(&format!("p{i}"), Bytes::new()).await }
    });
    for r in futures::future::join_all(puts).await {
        r.unwrap();
    }
    let many = t1.elapsed();
    assert!(
        many >= Duration::from_millis(1900),
        "rate limit paces requests: {many:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_surcharge_charges_requests_for_bytes_the_object_does_not_hold() {
    let base = StreamStore::in_memory();
    let clock = Arc::new(TokioClock::with_base(0));
    let model = LatencyModel {
        first_byte: Duration::from_millis(10),
        bandwidth: 1024.0 * 1024.0,
        jitter: Duration::ZERO,
        put_rate: 0.0,
        get_rate: 0.0,
    };
    let c2 = clock.clone();
    // Objects under `big/` are charged as if they held 2 MiB more.
    let surcharge: batchweave_store::Surcharge = Arc::new(|p: &object_store::path::Path| {
        if p.as_ref().starts_with("big/") {
            2 * 1024 * 1024
        } else {
            0
        }
    });
    let s = base.map_backend(move |b| {
        Arc::new(LatencyStore::new(b, model, 1, c2).with_surcharge(surcharge))
    });
    let timed = |key: &'static str| {
        let s = s.clone();
        async move {
            let t = tokio::time::Instant::now();
            s.put(key, Bytes::from_static(b"tiny")).await.unwrap();
            let put = t.elapsed();
            let t = tokio::time::Instant::now();
            let got = s.get(key, 1024).await.unwrap();
            (put, t.elapsed(), got)
        }
    };
    let (put, get, got) = timed("big/m").await;
    assert_eq!(&got[..], b"tiny", "the stored bytes are unchanged");
    for d in [put, get] {
        assert!(
            d >= Duration::from_millis(2010) && d < Duration::from_millis(2100),
            "{d:?}"
        );
    }
    let (put, get, _) = timed("small/m").await;
    for d in [put, get] {
        assert!(d < Duration::from_millis(20), "{d:?}");
    }
}
