//! Seeded fault injection as an `ObjectStore` wrapper.
//!
//! ```text
//!   StreamStore ──> FaultStore ──> real backend
//!                     │ before: fail without touching the backend
//!                     │ after:  perform the request, then lose the reply
//!                     │ stale:  pretend the newest objects are not there yet
//!                     └ delay:  latency with jitter
//! ```
//!
//! Every decision comes from one seeded RNG, so a run is reproducible for a
//! given seed and request order.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::Clock;

/// Which requests a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultOp {
    /// GET (whole or ranged) and HEAD.
    Read,
    /// Unconditional PUT and multipart uploads.
    Put,
    /// Conditional create (`PutMode::Create`).
    Create,
    /// LIST.
    List,
    /// DELETE.
    Delete,
    /// One part of a multipart upload, and the upload's completion (the upload's
    /// start is a [`FaultOp::Put`]).
    Part,
}

/// One fault rule. Probabilities are per matching request, in `[0, 1]`.
#[derive(Debug, Clone)]
pub struct FaultRule {
    /// Requests this rule applies to (empty = all).
    pub ops: Vec<FaultOp>,
    /// Only keys containing this substring (None = all keys).
    pub path_contains: Option<String>,
    /// Fail with a transient 503 before the request reaches the backend.
    pub error_before: f64,
    /// Perform the request, then fail as if the reply was lost (503/timeout).
    pub error_after: f64,
    /// Reads: report a present object as missing; lists: drop the
    /// lexicographically last entries (a stale view of the newest objects).
    pub stale_read: f64,
    /// Extra latency: a fixed part plus a uniform jitter.
    pub latency: Option<(Duration, Duration)>,
}

impl Default for FaultRule {
    fn default() -> Self {
        Self {
            ops: Vec::new(),
            path_contains: None,
            error_before: 0.0,
            error_after: 0.0,
            stale_read: 0.0,
            latency: None,
        }
    }
}

impl FaultRule {
    fn matches(&self, op: FaultOp, path: &str) -> bool {
        (self.ops.is_empty() || self.ops.contains(&op))
            && self
                .path_contains
                .as_deref()
                .is_none_or(|s| path.contains(s))
    }
}

/// Counts of injected faults, for assertions that a test really exercised them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultStats {
    /// Errors injected before the request.
    pub before: u64,
    /// Replies lost after the request took effect.
    pub after: u64,
    /// Stale reads and lists served.
    pub stale: u64,
}

#[derive(Debug, Default)]
struct Counts {
    before: AtomicU64,
    after: AtomicU64,
    stale: AtomicU64,
}

/// A wrapper store that injects faults according to [`FaultRule`]s.
pub struct FaultStore {
    inner: Arc<dyn ObjectStore>,
    inj: Arc<Injector>,
}

/// The rules, the seeded RNG and the counts, shared with the multipart uploads a
/// [`FaultStore`] hands out (their parts draw faults too).
struct Injector {
    rules: Vec<FaultRule>,
    rng: Mutex<StdRng>,
    clock: Arc<dyn Clock>,
    enabled: AtomicBool,
    counts: Counts,
}

impl fmt::Debug for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultStore")
            .field("rules", &self.inj.rules)
            .finish()
    }
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

/// What to do with one request.
#[derive(Debug, Default, Clone, Copy)]
struct Plan {
    before: bool,
    after: bool,
    stale: bool,
    delay: Duration,
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "FaultStore",
        source: format!("injected fault: {what} (503 SlowDown)").into(),
    }
}

impl FaultStore {
    /// Wraps `inner`; decisions are drawn from `seed`; delays use `clock`.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        rules: Vec<FaultRule>,
        seed: u64,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            inner,
            inj: Arc::new(Injector {
                rules,
                rng: Mutex::new(StdRng::seed_from_u64(seed)),
                clock,
                enabled: AtomicBool::new(true),
                counts: Counts::default(),
            }),
        }
    }

    /// Turns injection on or off at run time (e.g. off for the final check).
    pub fn set_enabled(&self, on: bool) {
        self.inj.enabled.store(on, Ordering::SeqCst);
    }

    /// How many faults were injected so far.
    pub fn stats(&self) -> FaultStats {
        FaultStats {
            before: self.inj.counts.before.load(Ordering::Relaxed),
            after: self.inj.counts.after.load(Ordering::Relaxed),
            stale: self.inj.counts.stale.load(Ordering::Relaxed),
        }
    }

    fn plan(&self, op: FaultOp, path: &Path) -> Plan {
        self.inj.plan(op, path)
    }

    async fn enter(&self, op: FaultOp, path: &Path) -> Result<Plan> {
        self.inj.enter(op, path).await
    }

    fn leave<T>(&self, p: Plan, r: Result<T>) -> Result<T> {
        self.inj.leave(p, r)
    }
}

impl Injector {
    /// Draws the faults for one request. Listings match rules against their
    /// prefix with a trailing `/`, so `manifests/` matches a listing of `manifests`.
    fn plan(&self, op: FaultOp, path: &Path) -> Plan {
        let path = if op == FaultOp::List {
            format!("{}/", path.as_ref())
        } else {
            path.as_ref().to_string()
        };
        let mut p = Plan::default();
        if !self.enabled.load(Ordering::SeqCst) {
            return p;
        }
        let Ok(mut rng) = self.rng.lock() else {
            return p;
        };
        for r in self.rules.iter().filter(|r| r.matches(op, &path)) {
            p.before |= r.error_before > 0.0 && rng.random::<f64>() < r.error_before;
            p.after |= r.error_after > 0.0 && rng.random::<f64>() < r.error_after;
            p.stale |= r.stale_read > 0.0 && rng.random::<f64>() < r.stale_read;
            if let Some((base, jitter)) = r.latency {
                p.delay += base + jitter.mul_f64(rng.random::<f64>());
            }
        }
        p
    }

    async fn enter(&self, op: FaultOp, path: &Path) -> Result<Plan> {
        let p = self.plan(op, path);
        if !p.delay.is_zero() {
            self.clock.sleep(p.delay).await;
        }
        if p.before {
            self.counts.before.fetch_add(1, Ordering::Relaxed);
            return Err(injected("error before request"));
        }
        Ok(p)
    }

    fn leave<T>(&self, p: Plan, r: Result<T>) -> Result<T> {
        if p.after && r.is_ok() {
            self.counts.after.fetch_add(1, Ordering::Relaxed);
            return Err(injected("reply lost after request took effect"));
        }
        r
    }
}

/// A multipart upload of a [`FaultStore`]: its parts and its completion are requests
/// of [`FaultOp::Part`].
struct FaultUpload {
    inner: Box<dyn MultipartUpload>,
    path: Path,
    inj: Arc<Injector>,
}

impl fmt::Debug for FaultUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultUpload")
            .field("path", &self.path)
            .finish()
    }
}

#[async_trait]
impl MultipartUpload for FaultUpload {
    fn put_part(&mut self, data: PutPayload) -> object_store::UploadPart {
        // The part is sent now (its future owns the request); the plan decides whether
        // it fails before reaching the backend or after taking effect.
        let part = self.inner.put_part(data);
        let (inj, path) = (self.inj.clone(), self.path.clone());
        Box::pin(async move {
            let p = inj.enter(FaultOp::Part, &path).await?;
            let r = part.await;
            inj.leave(p, r)
        })
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let p = self.inj.enter(FaultOp::Part, &self.path).await?;
        let r = self.inner.complete().await;
        self.inj.leave(p, r)
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let op = if matches!(opts.mode, PutMode::Create) {
            FaultOp::Create
        } else {
            FaultOp::Put
        };
        let p = self.enter(op, location).await?;
        let r = self.inner.put_opts(location, payload, opts).await;
        self.leave(p, r)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let p = self.enter(FaultOp::Put, location).await?;
        let r = self.inner.put_multipart_opts(location, opts).await;
        let upload = self.leave(p, r)?;
        Ok(Box::new(FaultUpload {
            inner: upload,
            path: location.clone(),
            inj: self.inj.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let p = self.enter(FaultOp::Read, location).await?;
        if p.stale {
            self.inj.counts.stale.fetch_add(1, Ordering::Relaxed);
            return Err(object_store::Error::NotFound {
                path: location.to_string(),
                source: "injected stale read".into(),
            });
        }
        let r = self.inner.get_opts(location, options).await;
        self.leave(p, r)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let p = self.enter(FaultOp::Read, location).await?;
        let r = self.inner.get_ranges(location, ranges).await;
        self.leave(p, r)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        // Decide per location up front is impossible for a lazy stream; draw
        // one plan for the batch from its first element's path-independent rules.
        let p = self.plan(FaultOp::Delete, &Path::from(""));
        if p.before {
            self.inj.counts.before.fetch_add(1, Ordering::Relaxed);
            return futures::stream::once(async { Err(injected("error before delete")) }).boxed();
        }
        let s = self.inner.delete_stream(locations);
        if p.after {
            self.inj.counts.after.fetch_add(1, Ordering::Relaxed);
            return s
                .map(|r| r.and_then(|_| Err(injected("delete reply lost"))))
                .boxed();
        }
        s
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.list_faulty(prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.list_faulty(prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let p = self
            .enter(FaultOp::List, prefix.unwrap_or(&Path::from("")))
            .await?;
        let r = self.inner.list_with_delimiter(prefix).await;
        self.leave(p, r)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let p = self.enter(FaultOp::Put, to).await?;
        let r = self.inner.copy_opts(from, to, options).await;
        self.leave(p, r)
    }
}

impl FaultStore {
    fn list_faulty(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let root = Path::from("");
        let p = self.plan(FaultOp::List, prefix.unwrap_or(&root));
        if p.before {
            self.inj.counts.before.fetch_add(1, Ordering::Relaxed);
            return futures::stream::once(async { Err(injected("error before list")) }).boxed();
        }
        let inner = match offset {
            Some(o) => self.inner.list_with_offset(prefix, o),
            None => self.inner.list(prefix),
        };
        if !p.stale {
            return inner;
        }
        self.inj.counts.stale.fetch_add(1, Ordering::Relaxed);
        // A stale listing misses the newest (lexicographically last) entries.
        let drop_n = {
            self.inj
                .rng
                .lock()
                .map(|mut r| r.random_range(1..=3usize))
                .unwrap_or(1)
        };
        futures::stream::once(async move {
            let mut v: Vec<ObjectMeta> = futures::TryStreamExt::try_collect(inner).await?;
            v.sort_by(|a, b| a.location.cmp(&b.location));
            let keep = v.len().saturating_sub(drop_n);
            v.truncate(keep);
            Ok::<_, object_store::Error>(futures::stream::iter(v.into_iter().map(Ok)))
        })
        .map(|r| match r {
            Ok(s) => s.boxed(),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        })
        .flatten()
        .boxed()
    }
}
