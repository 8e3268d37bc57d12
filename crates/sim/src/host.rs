//! A host a process runs on: a wall clock offset from the store's (clock skew), and a
//! suspend (the host hibernates: its wall clock keeps running, its monotonic clock
//! stops, nothing it sends leaves and nothing it is sent arrives until it wakes).
//!
//! ```text
//!   Producer ─> StreamStore (HostClock) ─> HostStore ─> FaultStore ─> ...
//!                 now(): frozen while suspended,        waits while suspended, before
//!                        then behind by the time lost   sending and before returning
//!                 unix_millis(): store time + skew
//! ```
//!
//! The pattern of `crates/producer/tests/guards.rs::Suspendable`, applied to a whole
//! process: a producer woken from a long suspend must judge its uploads' age by the wall
//! clock (they may have been swept as orphans meanwhile), and one woken from a short
//! suspend holds a base that may be long gone (its next create may land in a slot GC
//! deleted: a ghost).

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use batchweave_store::Clock;
use batchweave_store::object_store::path::Path;
use batchweave_store::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::log::lock;

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

#[derive(Debug, Default)]
struct Suspension {
    /// Monotonic time at which the current suspend began.
    frozen_at: Option<Instant>,
    /// Monotonic time lost to suspends that ended.
    lost: Duration,
    /// Suspends in progress (a planned one and a listing stall may overlap).
    depth: u32,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct HostClock {
    base: Arc<dyn Clock>,
    skew_ms: i64,
    state: Mutex<Suspension>,
    awake: watch::Sender<bool>,
}

impl HostClock {
    /// A host whose wall clock is `skew_ms` ahead of `base` (behind if negative).
    pub(crate) fn new(base: Arc<dyn Clock>, skew_ms: i64) -> Arc<Self> {
        Arc::new(Self {
            base,
            skew_ms,
            state: Mutex::new(Suspension::default()),
            awake: watch::channel(true).0,
        })
    }

    pub(crate) fn skew_ms(&self) -> i64 {
        self.skew_ms
    }

    /// Suspends the host for `d` of the world's time (overlapping suspends: until the
    /// last one ends).
    pub(crate) async fn suspend(&self, d: Duration) {
        {
            let mut st = lock(&self.state);
            st.depth += 1;
            if st.depth == 1 {
                st.frozen_at = Some(self.base.now());
            }
        }
        self.awake.send_replace(false);
        self.base.sleep(d).await;
        {
            let mut st = lock(&self.state);
            st.depth -= 1;
            if st.depth > 0 {
                return;
            }
            if let Some(t) = st.frozen_at.take() {
                st.lost += self.base.now().saturating_duration_since(t);
            }
        }
        self.awake.send_replace(true);
    }

    /// Returns once the host is awake.
    pub(crate) async fn wait_awake(&self) {
        let mut rx = self.awake.subscribe();
        while !*rx.borrow_and_update() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

impl Clock for HostClock {
    fn now(&self) -> Instant {
        let st = lock(&self.state);
        let t = st.frozen_at.unwrap_or_else(|| self.base.now());
        t.checked_sub(st.lost).unwrap_or(t)
    }

    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.base.sleep(d)
    }

    fn unix_millis(&self) -> u64 {
        let wall = i64::try_from(self.base.unix_millis()).unwrap_or(i64::MAX);
        u64::try_from(wall.saturating_add(self.skew_ms)).unwrap_or(0)
    }
}

/// A stall planned for the `nth` listing of `tgb/` a host makes: the host is suspended
/// for `duration` when that listing's reply arrives (a committer that stops between its
/// listing and its create, while GC may sweep what it lists); `fired` is told when.
pub(crate) struct ListingStall {
    pub(crate) nth: u32,
    pub(crate) duration: Duration,
    pub(crate) fired: Box<dyn Fn(Duration) + Send + Sync>,
}

/// The host's network: requests wait while it is suspended, and so do replies.
pub(crate) struct HostStore {
    inner: Arc<dyn ObjectStore>,
    host: Arc<HostClock>,
    stall: Arc<Mutex<Option<ListingStall>>>,
}

impl HostStore {
    pub(crate) fn new(
        inner: Arc<dyn ObjectStore>,
        host: Arc<HostClock>,
        stall: Option<ListingStall>,
    ) -> Self {
        Self {
            inner,
            host,
            stall: Arc::new(Mutex::new(stall)),
        }
    }

    /// The planned stall, if this listing (of `prefix`) is the one it waits for.
    fn stall_now(&self, prefix: Option<&Path>) -> Option<ListingStall> {
        let tgb = prefix
            .is_some_and(|p| format!("{}/", p.as_ref()).starts_with(batchweave_manifest::TGB_DIR));
        if !tgb {
            return None;
        }
        let mut st = lock(&self.stall);
        let s = st.as_mut()?;
        s.nth = s.nth.saturating_sub(1);
        if s.nth == 0 { st.take() } else { None }
    }

    async fn around<T>(&self, f: impl Future<Output = Result<T>>) -> Result<T> {
        self.host.wait_awake().await;
        let r = f.await;
        self.host.wait_awake().await;
        r
    }

    fn stream<T: Send + 'static>(
        &self,
        make: impl FnOnce() -> BoxStream<'static, Result<T>> + Send + 'static,
    ) -> BoxStream<'static, Result<T>> {
        let host = self.host.clone();
        futures::stream::once(async move {
            host.wait_awake().await;
            make()
        })
        .flatten()
        .boxed()
    }
}

impl fmt::Debug for HostStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostStore").finish_non_exhaustive()
    }
}

impl fmt::Display for HostStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostStore({})", self.inner)
    }
}

impl ObjectStore for HostStore {
    fn put_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> BoxFut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.around(self.inner.put_opts(location, payload, opts)))
    }

    fn put_multipart_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        opts: PutMultipartOptions,
    ) -> BoxFut<'async_trait, Box<dyn MultipartUpload>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.around(self.inner.put_multipart_opts(location, opts)))
    }

    fn get_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        options: GetOptions,
    ) -> BoxFut<'async_trait, GetResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.around(self.inner.get_opts(location, options)))
    }

    fn get_ranges<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        ranges: &'life2 [Range<u64>],
    ) -> BoxFut<'async_trait, Vec<Bytes>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.around(self.inner.get_ranges(location, ranges)))
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let inner = self.inner.clone();
        self.stream(move || inner.delete_stream(locations))
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let inner = self.inner.clone();
        let stall = self.stall_now(prefix);
        let prefix = prefix.cloned();
        let listed = self.stream(move || inner.list(prefix.as_ref()));
        let Some(stall) = stall else {
            return listed;
        };
        let host = self.host.clone();
        futures::stream::once(async move {
            let all: Vec<Result<ObjectMeta>> = listed.collect().await;
            (stall.fired)(stall.duration);
            host.suspend(stall.duration).await;
            futures::stream::iter(all)
        })
        .flatten()
        .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let inner = self.inner.clone();
        let prefix = prefix.cloned();
        let offset = offset.clone();
        self.stream(move || inner.list_with_offset(prefix.as_ref(), &offset))
    }

    fn list_with_delimiter<'life0, 'life1, 'async_trait>(
        &'life0 self,
        prefix: Option<&'life1 Path>,
    ) -> BoxFut<'async_trait, ListResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.around(self.inner.list_with_delimiter(prefix)))
    }

    fn copy_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: CopyOptions,
    ) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.around(self.inner.copy_opts(from, to, options)))
    }
}
