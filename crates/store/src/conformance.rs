//! The store conformance suite as code (feature `test-util`).
//!
//! Every backend BatchWeave runs on must pass it: plain put/get/range/list/
//! delete semantics, conditional create, and a race of many concurrent
//! creators of one key with exactly one winner per round. The crate's tests
//! run it on InMemory, a local directory, and the loopback S3 and Azure
//! servers that `cargo xtask` starts.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

use crate::{StoreError, StreamStore};

/// What the suite ran, for the test log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConformanceReport {
    /// Store URL.
    pub url: String,
    /// Names of the checks that passed.
    pub passed: Vec<&'static str>,
    /// Race rounds run and racers per round.
    pub race: (usize, usize),
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn se(e: StoreError) -> String {
    e.to_string()
}

/// put/get/head/range/ranges/list/list_after/delete semantics.
pub async fn check_basic(s: &StreamStore) -> Result<(), String> {
    let data = Bytes::from((0..=255u8).cycle().take(10_000).collect::<Vec<u8>>());
    s.put("conf/a/obj", data.clone()).await.map_err(se)?;
    let got = s.get("conf/a/obj", 1 << 20).await.map_err(se)?;
    ensure!(got == data, "get returned different bytes");
    let too_large = s.get("conf/a/obj", 100).await;
    ensure!(
        matches!(too_large, Err(StoreError::TooLarge { .. })),
        "get over the limit must be refused, got {too_large:?}"
    );
    let head = s.head("conf/a/obj").await.map_err(se)?;
    ensure!(head.size == 10_000, "head size {}", head.size);
    // The store's clock (read through a probe object) is not behind an object written
    // before it: producers order claims against it at open.
    let now = s.store_time_ms().await.map_err(se)?;
    ensure!(
        now >= head.last_modified_ms,
        "store time {now} is behind an earlier write's last_modified {}",
        head.last_modified_ms
    );
    ensure!(
        s.list("_probe").await.map_err(se)?.is_empty(),
        "the time probe was left behind"
    );
    let r = s.get_range("conf/a/obj", 100..1100).await.map_err(se)?;
    ensure!(
        r == data.slice(100..1100),
        "range read returned wrong bytes"
    );
    let rs = s
        .get_ranges("conf/a/obj", &[0..10, 5000..5010, 9990..10_000])
        .await
        .map_err(se)?;
    ensure!(
        rs.len() == 3 && rs[1] == data.slice(5000..5010) && rs[2] == data.slice(9990..10_000),
        "get_ranges wrong"
    );
    s.put("conf/a/obj", Bytes::from_static(b"new"))
        .await
        .map_err(se)?;
    ensure!(
        s.get("conf/a/obj", 100).await.map_err(se)? == "new",
        "overwrite not visible"
    );
    for k in ["conf/b/1", "conf/b/2", "conf/b/3", "conf/bb/x"] {
        s.put(k, Bytes::from_static(b"x")).await.map_err(se)?;
    }
    let keys: Vec<String> = s
        .list("conf/b")
        .await
        .map_err(se)?
        .into_iter()
        .map(|o| o.key)
        .collect();
    ensure!(
        keys == ["conf/b/1", "conf/b/2", "conf/b/3"],
        "list by segment prefix: {keys:?}"
    );
    let after: Vec<String> = s
        .list_after("conf/b", "conf/b/1")
        .await
        .map_err(se)?
        .into_iter()
        .map(|o| o.key)
        .collect();
    ensure!(after == ["conf/b/2", "conf/b/3"], "list_after: {after:?}");
    let missing = s.get("conf/missing", 10).await;
    ensure!(
        matches!(missing, Err(StoreError::NotFound { .. })),
        "missing key: {missing:?}"
    );
    ensure!(
        s.get_opt("conf/missing", 10).await.map_err(se)?.is_none(),
        "get_opt of missing key"
    );
    s.delete("conf/b/1").await.map_err(se)?;
    s.delete("conf/b/1")
        .await
        .map_err(|e| format!("second delete must be idempotent: {e}"))?;
    s.delete("conf/never-existed")
        .await
        .map_err(|e| format!("delete of a missing key: {e}"))?;
    ensure!(
        s.get_opt("conf/b/1", 10).await.map_err(se)?.is_none(),
        "deleted key still readable"
    );
    for k in ["conf/a/obj", "conf/b/2", "conf/b/3", "conf/bb/x"] {
        s.delete(k).await.map_err(se)?;
    }
    Ok(())
}

/// Conditional create: the first wins, the second is a `Conflict` and changes nothing.
pub async fn check_conditional_create(s: &StreamStore) -> Result<(), String> {
    s.create("conf/create/k", Bytes::from_static(b"first"))
        .await
        .map_err(se)?;
    let second = s
        .create("conf/create/k", Bytes::from_static(b"second"))
        .await;
    ensure!(
        matches!(second, Err(StoreError::Conflict { .. })),
        "second create must conflict, got {second:?}"
    );
    let got = s.get("conf/create/k", 100).await.map_err(se)?;
    ensure!(
        got == "first",
        "a conflicting create changed the object to {got:?}"
    );
    s.delete("conf/create/k").await.map_err(se)?;
    s.create("conf/create/k", Bytes::from_static(b"again"))
        .await
        .map_err(|e| format!("create after delete: {e}"))?;
    s.delete("conf/create/k").await.map_err(se)?;
    Ok(())
}

/// `racers` concurrent creates of one key, `rounds` times: exactly one winner
/// per round, and the stored bytes are the winner's.
pub async fn check_create_race(
    s: &StreamStore,
    racers: usize,
    rounds: usize,
) -> Result<(), String> {
    for round in 0..rounds {
        let key = format!("conf/race/{round:04}");
        let attempts = (0..racers).map(|i| {
            let s = s.clone();
            let key = key.clone();
            async move { (i, s.create(&key, Bytes::from(format!("racer-{i}"))).await) }
        });
        let results = futures::future::join_all(attempts).await;
        let winners: Vec<usize> = results
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(i, _)| *i)
            .collect();
        for (i, r) in &results {
            if let Err(e) = r {
                ensure!(
                    e.is_conflict(),
                    "round {round}: racer {i} failed with a non-conflict error: {e}"
                );
            }
        }
        ensure!(
            winners.len() == 1,
            "round {round}: {} winners {winners:?} among {racers} racers (exactly one expected)",
            winners.len()
        );
        let stored = s.get(&key, 100).await.map_err(se)?;
        ensure!(
            stored == format!("racer-{}", winners[0]),
            "round {round}: stored {stored:?}, winner was racer {}",
            winners[0]
        );
        s.delete(&key).await.map_err(se)?;
    }
    Ok(())
}

/// Runs every check; `rounds` race rounds of `racers` racers.
pub async fn run_suite(
    s: &StreamStore,
    racers: usize,
    rounds: usize,
) -> Result<ConformanceReport, String> {
    let mut passed = Vec::new();
    check_basic(s).await.map_err(|e| format!("basic: {e}"))?;
    passed.push("basic");
    check_conditional_create(s)
        .await
        .map_err(|e| format!("conditional create: {e}"))?;
    passed.push("conditional_create");
    s.verify_conditional_create()
        .await
        .map_err(|e| format!("probe: {e}"))?;
    passed.push("probe");
    check_create_race(s, racers, rounds)
        .await
        .map_err(|e| format!("race: {e}"))?;
    passed.push("create_race");
    Ok(ConformanceReport {
        url: s.url().to_string(),
        passed,
        race: (rounds, racers),
    })
}

/// A deliberately broken wrapper that turns every conditional create into a
/// plain overwrite, as stores that ignore If-None-Match do. Used to show that
/// the race check and the open-time probe catch such stores.
#[derive(Debug)]
pub struct IgnoreIfNoneMatch(pub Arc<dyn ObjectStore>);

impl fmt::Display for IgnoreIfNoneMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IgnoreIfNoneMatch({})", self.0)
    }
}

#[async_trait]
impl ObjectStore for IgnoreIfNoneMatch {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        if matches!(opts.mode, PutMode::Create) {
            opts.mode = PutMode::Overwrite;
        }
        self.0.put_opts(location, payload, opts).await
    }
    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.0.put_multipart_opts(location, opts).await
    }
    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.0.get_opts(location, options).await
    }
    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.0.get_ranges(location, ranges).await
    }
    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.0.delete_stream(locations)
    }
    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.0.list(prefix)
    }
    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.0.list_with_delimiter(prefix).await
    }
    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.0.copy_opts(from, to, options).await
    }
}
