//! What the producer refuses before anything becomes visible: a TGB of another grid
//! than the stream's, and an upload older than `max_commit_age` by wall-clock time
//! (which keeps running while the host is suspended, unlike a monotonic clock).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use batchweave_manifest::{DecodeLimits, decode_manifest, manifest_key};
use batchweave_producer::{Producer, ProducerError, ProducerSettings};
use batchweave_store::testing::all_targets;
use batchweave_store::{Clock, FaultOp, FaultRule, FaultStore, StreamStore, TokioClock};
use bytes::Bytes;
use tokio::time::Instant;

fn slices(n: u32) -> Vec<Bytes> {
    (0..n).map(|i| Bytes::from(format!("slice {i}"))).collect()
}

fn settings(policy: &str) -> ProducerSettings {
    ProducerSettings {
        policy: policy.parse().unwrap(),
        seed: Some(3),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_tgb_of_another_grid_is_refused_and_the_producer_stays_usable() {
    for t in all_targets() {
        let store = t.open_fresh("grid-append").await.unwrap();
        grid_refused_at_append(store).await;
    }
}

async fn grid_refused_at_append(store: StreamStore) {
    let mut p = Producer::builder(store.clone(), "a")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    p.append(4, 2, slices(8), 1).await.unwrap();
    p.flush().await.unwrap();
    // A second worker configured with another grid opens on the same stream.
    let mut q = Producer::builder(store.clone(), "b")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    let e = q.append(2, 1, slices(2), 1).await.unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, ProducerError::Invalid(_)), "{msg}");
    assert!(
        msg.contains("stream's grid is DP=4 x CP=2") && msg.contains("this TGB's is DP=2 x CP=1"),
        "{msg}"
    );
    // Nothing of it was uploaded or committed, and the producer still works.
    assert!(store.list("tgb/b").await.unwrap().is_empty());
    q.append(4, 2, slices(8), 1).await.unwrap();
    q.close().await.unwrap();
    p.close().await.unwrap();
}

#[tokio::test]
async fn the_rebase_refuses_a_grid_fixed_by_a_racing_producer() {
    for t in all_targets() {
        let store = t.open_fresh("grid-race").await.unwrap();
        grid_refused_by_rebase(store).await;
    }
}

/// Both open on an empty stream (no grid yet); `a` commits 4 x 2 first, so `b`'s
/// 2 x 1 TGB is refused by the rebase: it never becomes visible.
async fn grid_refused_by_rebase(store: StreamStore) {
    let mut a = Producer::builder(store.clone(), "a")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    let mut b = Producer::builder(store.clone(), "b")
        .settings(settings("naive"))
        .open()
        .await
        .unwrap();
    a.append(4, 2, slices(8), 1).await.unwrap();
    a.flush().await.unwrap();
    b.append(2, 1, slices(2), 1).await.unwrap();
    let e = b.flush().await.unwrap_err();
    assert!(
        e.to_string().contains("DP=4 x CP=2") && e.to_string().contains("DP=2 x CP=1"),
        "{e}"
    );
    let newest = a.stats().version;
    a.close().await.unwrap();
    let m = decode_manifest(
        &store.get(&manifest_key(newest), 1 << 20).await.unwrap(),
        &DecodeLimits::default(),
    )
    .unwrap();
    assert!(m.tgbs.iter().all(|d| (d.dp, d.cp) == (4, 2)));
}

/// Tokio's clock with a wall clock that can jump forward: a host suspend, during
/// which monotonic time stands still.
#[derive(Debug)]
struct Suspendable {
    inner: TokioClock,
    slept_ms: AtomicU64,
}

impl Clock for Suspendable {
    fn now(&self) -> Instant {
        self.inner.now()
    }
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.inner.sleep(d)
    }
    fn unix_millis(&self) -> u64 {
        self.inner.unix_millis() + self.slept_ms.load(Ordering::Relaxed)
    }
}

#[tokio::test]
async fn an_upload_aged_by_a_host_suspend_is_not_committed() {
    for t in all_targets() {
        let store = t.open_fresh("suspend").await.unwrap();
        suspended_upload_not_committed(store).await;
    }
}

async fn suspended_upload_not_committed(store: StreamStore) {
    let clock = Arc::new(Suspendable {
        inner: TokioClock::system(),
        slept_ms: AtomicU64::new(0),
    });
    let store = store.with_clock(clock.clone());
    let mut p = Producer::builder(store.clone(), "a")
        .settings(ProducerSettings {
            max_commit_age: Duration::from_secs(60),
            ..settings("fixed:100")
        })
        .open()
        .await
        .unwrap();
    p.append(1, 1, slices(1), 1).await.unwrap();
    // The host hibernates for two hours between the upload and its commit: GC (on
    // another host) may have swept the upload as an orphan meanwhile.
    clock.slept_ms.store(2 * 3600 * 1000, Ordering::Relaxed);
    let e = p.flush().await.unwrap_err();
    assert!(
        e.to_string().contains("more than max_commit_age"),
        "a suspended upload was committed: {e}"
    );
    assert_eq!(p.stats().tgbs_committed, 0);
}

/// Opens `id` on `store` (naive policy, a fixed seed per opener).
async fn open(store: StreamStore, id: &str, seed: u64) -> Result<Producer, ProducerError> {
    Producer::builder(store, id)
        .settings(ProducerSettings {
            seed: Some(seed),
            ..settings("naive")
        })
        .open()
        .await
}

#[tokio::test]
async fn two_processes_opening_one_id_at_the_same_moment_the_loser_fails_at_open() {
    for t in all_targets() {
        let store = t.open_fresh("open-race").await.unwrap();
        open_race(store).await;
    }
}

/// Creates take 500 ms, so both openers read the chain before either claim lands.
async fn open_race(mem: StreamStore) {
    let clock = mem.clock().clone();
    let store = mem.map_backend(|inner| {
        Arc::new(FaultStore::new(
            inner,
            vec![FaultRule {
                ops: vec![FaultOp::Create],
                latency: Some((Duration::from_millis(500), Duration::ZERO)),
                ..Default::default()
            }],
            1,
            clock,
        ))
    });
    let (a, b) = tokio::join!(
        open(store.clone(), "prep-0", 1),
        open(store.clone(), "prep-0", 2)
    );
    let (mut winner, err) = match (a, b) {
        (Ok(p), Err(e)) | (Err(e), Ok(p)) => (p, e),
        (a, b) => panic!("exactly one open must fail: {:?} / {:?}", a.err(), b.err()),
    };
    let msg = err.to_string();
    assert!(matches!(err, ProducerError::OpenRace { .. }), "{msg}");
    assert!(
        msg.contains("opened by another process at the same time"),
        "{msg}"
    );
    // The winner was not fenced: it commits.
    winner.append(1, 1, slices(1), 1).await.unwrap();
    winner.close().await.unwrap();
}

#[tokio::test]
async fn a_restart_after_the_first_open_fences_it_instead() {
    for t in all_targets() {
        let store = t.open_fresh("restart").await.unwrap();
        restart_fences(store).await;
    }
}

/// Not a race: the second open starts after the first one's claim is in the chain, so it
/// is a restart: it claims the next epoch and the first process is fenced.
async fn restart_fences(store: StreamStore) {
    let mut first = open(store.clone(), "prep-0", 1).await.unwrap();
    let mut second = open(store.clone(), "prep-0", 2).await.unwrap();
    first.append(1, 1, slices(1), 1).await.unwrap();
    assert!(first.flush().await.unwrap_err().is_fenced());
    second.append(1, 1, slices(1), 1).await.unwrap();
    second.close().await.unwrap();
}
