//! A latency model as an `ObjectStore` wrapper, driven by the injected clock.
//!
//! Each request waits `first_byte + bytes / bandwidth (+ jitter)`; an optional
//! request-rate limit per class (S3 allows about 3,500 PUT/s and 5,500 GET/s
//! per prefix) queues requests beyond the rate. With a paused tokio runtime the
//! waits are virtual, so hundreds of simulated clients run on two cores.
//!
//! A [`Surcharge`] charges reads and writes of some objects for more bytes than
//! they hold: a benchmark keeps the stored objects small (say a trimmed manifest)
//! while the model charges each request for the size the object would have (the
//! untrimmed manifest of a long run).

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::clock::Clock;

/// Parameters of [`LatencyStore`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyModel {
    /// Time to first byte of every request.
    pub first_byte: Duration,
    /// Per-connection bandwidth in bytes per second (0 = unlimited).
    pub bandwidth: f64,
    /// Uniform extra latency in `[0, jitter]`.
    pub jitter: Duration,
    /// Write requests per second the store accepts (0 = unlimited).
    pub put_rate: f64,
    /// Read requests per second the store accepts (0 = unlimited).
    pub get_rate: f64,
}

impl Default for LatencyModel {
    /// Numbers of the order of a cloud object store seen from the same region.
    fn default() -> Self {
        Self {
            first_byte: Duration::from_millis(20),
            bandwidth: 100.0 * 1024.0 * 1024.0,
            jitter: Duration::from_millis(10),
            put_rate: 3500.0,
            get_rate: 5500.0,
        }
    }
}

/// Extra bytes charged to a GET or PUT of `location` on top of its payload (see
/// [`LatencyStore::with_surcharge`]); called once per such request, so keep it cheap.
pub type Surcharge = Arc<dyn Fn(&Path) -> u64 + Send + Sync>;

#[derive(Debug)]
struct RateGate {
    next_free: Option<Instant>,
}

/// A wrapper that delays requests according to a [`LatencyModel`].
pub struct LatencyStore {
    inner: Arc<dyn ObjectStore>,
    model: LatencyModel,
    clock: Arc<dyn Clock>,
    rng: Mutex<StdRng>,
    put_gate: Mutex<RateGate>,
    get_gate: Mutex<RateGate>,
    surcharge: Option<Surcharge>,
}

impl fmt::Debug for LatencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyStore")
            .field("model", &self.model)
            .finish()
    }
}

impl fmt::Display for LatencyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LatencyStore({})", self.inner)
    }
}

impl LatencyStore {
    /// Wraps `inner` with `model`; jitter drawn from `seed`.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        model: LatencyModel,
        seed: u64,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            inner,
            model,
            clock,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            put_gate: Mutex::new(RateGate { next_free: None }),
            get_gate: Mutex::new(RateGate { next_free: None }),
            surcharge: None,
        }
    }

    /// Charges every PUT and every (non-HEAD) GET of an object `surcharge(location)`
    /// bytes more than it moves; the stored bytes and what a GET returns are unchanged.
    pub fn with_surcharge(mut self, surcharge: Surcharge) -> Self {
        self.surcharge = Some(surcharge);
        self
    }

    fn extra(&self, location: &Path) -> u64 {
        self.surcharge.as_ref().map_or(0, |f| f(location))
    }

    /// The time a request of `bytes` payload bytes takes, excluding queueing.
    pub fn service_time(&self, bytes: u64) -> Duration {
        let m = &self.model;
        let transfer = if m.bandwidth > 0.0 {
            Duration::from_secs_f64(bytes as f64 / m.bandwidth)
        } else {
            Duration::ZERO
        };
        let j = self
            .rng
            .lock()
            .map(|mut r| r.random::<f64>())
            .unwrap_or(0.0);
        m.first_byte + transfer + m.jitter.mul_f64(j)
    }

    fn queue_delay(&self, write: bool) -> Duration {
        let rate = if write {
            self.model.put_rate
        } else {
            self.model.get_rate
        };
        if rate <= 0.0 {
            return Duration::ZERO;
        }
        let gate = if write {
            &self.put_gate
        } else {
            &self.get_gate
        };
        let now = self.clock.now();
        let Ok(mut g) = gate.lock() else {
            return Duration::ZERO;
        };
        let start = g.next_free.map_or(now, |t| t.max(now));
        g.next_free = Some(start + Duration::from_secs_f64(1.0 / rate));
        start - now
    }

    async fn wait(&self, write: bool, bytes: u64) {
        let d = self.queue_delay(write) + self.service_time(bytes);
        self.clock.sleep(d).await;
    }
}

#[async_trait]
impl ObjectStore for LatencyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let bytes = (payload.content_length() as u64).saturating_add(self.extra(location));
        self.wait(true, bytes).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.wait(true, 0).await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let head = options.head;
        let r = self.inner.get_opts(location, options).await;
        let bytes = match (&r, head) {
            (Ok(g), false) => g
                .range
                .end
                .saturating_sub(g.range.start)
                .saturating_add(self.extra(location)),
            _ => 0,
        };
        self.wait(false, bytes).await;
        r
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let total: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        self.wait(false, total).await;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let d = self.queue_delay(true) + self.service_time(0);
        let sleep = self.clock.sleep(d);
        let inner = self.inner.delete_stream(locations);
        futures::stream::once(sleep)
            .flat_map(move |_| futures::stream::empty())
            .chain(inner)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let sleep = self
            .clock
            .sleep(self.queue_delay(false) + self.service_time(0));
        let inner = self.inner.list(prefix);
        futures::stream::once(sleep)
            .flat_map(|_| futures::stream::empty())
            .chain(inner)
            .boxed()
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let sleep = self
            .clock
            .sleep(self.queue_delay(false) + self.service_time(0));
        let inner = self.inner.list_with_offset(prefix, offset);
        futures::stream::once(sleep)
            .flat_map(|_| futures::stream::empty())
            .chain(inner)
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.wait(false, 0).await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.wait(true, 0).await;
        self.inner.copy_opts(from, to, options).await
    }
}
