//! [`StreamStore`]: one stream's view of an object store.

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::clock::{Clock, TokioClock};
use crate::counters::{CounterSnapshot, Counters, Op};
use crate::error::{Class, StoreError, classify};

/// Retry policy for idempotent operations (everything but conditional create).
///
/// Backoff is exponential with full jitter: attempt `n` waits a uniform draw
/// in `[0, min(max_backoff, base * 2^n)]`, drawn from the handle's seeded RNG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = no retries).
    pub max_attempts: u32,
    /// First backoff ceiling.
    pub base: Duration,
    /// Largest backoff ceiling.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 8,
            base: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// Metadata of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Key relative to the stream prefix.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time in Unix milliseconds, as the store reports it.
    pub last_modified_ms: i64,
}

/// One stream's view of an object store: a backend, a key prefix, counters,
/// a retry policy and a clock.
///
/// All keys are relative to the prefix. Cloning is cheap and clones share
/// the counters.
///
/// Contract of the operations, on every backend:
/// - [`create`](Self::create) is atomic and mutually exclusive: of any number of
///   concurrent creates of one key exactly one succeeds; the others get
///   [`StoreError::Conflict`] (or [`StoreError::Ambiguous`] when the outcome is
///   unknown, never a false success).
/// - [`put`](Self::put) overwrites atomically; readers see the old or the new bytes.
/// - [`delete`](Self::delete) is idempotent: a missing key is not an error.
/// - Reads after a successful write see it (strong read-after-write, as S3,
///   GCS, Azure and a local directory provide).
#[derive(Clone)]
pub struct StreamStore {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    url: Arc<str>,
    counters: Arc<Counters>,
    clock: Arc<dyn Clock>,
    retry: RetryPolicy,
    rng: Arc<Mutex<StdRng>>,
}

impl fmt::Debug for StreamStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the backend: its Debug may contain credentials.
        f.debug_struct("StreamStore")
            .field("url", &self.url)
            .field("prefix", &self.prefix.as_ref())
            .field("backend", &crate::error::Redacted)
            .finish()
    }
}

impl StreamStore {
    /// Wraps an existing `object_store` backend. `url` is only used in
    /// messages (pass it without credentials).
    pub fn from_object_store(inner: Arc<dyn ObjectStore>, prefix: &str, url: &str) -> Self {
        Self {
            inner,
            prefix: Path::from(prefix),
            url: Arc::from(crate::error::redact_url(url)),
            counters: Arc::new(Counters::default()),
            clock: TokioClock::shared(),
            retry: RetryPolicy::default(),
            // Entropy by default: probe keys and backoff jitter must differ
            // between processes; simulations pass a seed with `with_seed`.
            rng: Arc::new(Mutex::new(StdRng::from_os_rng())),
        }
    }

    /// A fresh in-memory store (for tests and examples).
    pub fn in_memory() -> Self {
        Self::from_object_store(
            Arc::new(object_store::memory::InMemory::new()),
            "",
            "memory:///",
        )
    }

    /// Replaces the clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces the retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Seeds the backoff-jitter RNG (simulations pass their root seed).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = Arc::new(Mutex::new(StdRng::seed_from_u64(seed)));
        self
    }

    /// Replaces the backend with `f(backend)`, e.g. to add fault injection or
    /// a latency model. The new handle has fresh counters.
    pub fn map_backend(
        &self,
        f: impl FnOnce(Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore>,
    ) -> Self {
        let mut s = self.clone();
        s.inner = f(self.inner.clone());
        s.counters = Arc::new(Counters::default());
        s
    }

    /// The same backend under `prefix/sub`, with fresh counters.
    pub fn scoped(&self, sub: &str) -> Self {
        let mut s = self.clone();
        s.prefix = self.full_path(sub);
        s.counters = Arc::new(Counters::default());
        s
    }

    /// The store URL (credentials removed).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key prefix inside the backend.
    pub fn prefix(&self) -> &str {
        self.prefix.as_ref()
    }

    /// The clock this handle (and everything built on it) uses.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The backend, for wrappers and the conformance suite.
    pub fn backend(&self) -> &Arc<dyn ObjectStore> {
        &self.inner
    }

    /// The live counters shared by this handle and its clones.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CounterSnapshot {
        self.counters.snapshot()
    }

    fn full_path(&self, key: &str) -> Path {
        let key = key.trim_matches('/');
        if self.prefix.as_ref().is_empty() {
            Path::from(key)
        } else if key.is_empty() {
            self.prefix.clone()
        } else {
            Path::from(format!("{}/{}", self.prefix.as_ref(), key))
        }
    }

    fn relative_key(&self, p: &Path) -> String {
        let s = p.as_ref();
        let pre = self.prefix.as_ref();
        if pre.is_empty() {
            s.to_string()
        } else {
            s.strip_prefix(pre)
                .map(|r| r.trim_start_matches('/').to_string())
                .unwrap_or_else(|| s.to_string())
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .retry
            .base
            .saturating_mul(1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX))
            .min(self.retry.max_backoff);
        let frac: f64 = self
            .rng
            .lock()
            .map(|mut r| r.random::<f64>())
            .unwrap_or(0.5);
        ceiling.mul_f64(frac)
    }

    /// Runs an idempotent request with retries on transient errors.
    async fn retrying<T, F, Fut>(
        &self,
        op: &'static str,
        key: &str,
        kind: Op,
        mut f: F,
    ) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, object_store::Error>>,
    {
        let mut attempt = 0u32;
        loop {
            self.counters.request(kind);
            match f().await {
                Ok(v) => return Ok(v),
                Err(e) => {
                    attempt += 1;
                    match classify(&e) {
                        Class::NotFound => {
                            return Err(StoreError::NotFound {
                                path: key.to_string(),
                            });
                        }
                        Class::Conflict => {
                            return Err(StoreError::Conflict {
                                path: key.to_string(),
                            });
                        }
                        Class::Permanent => {
                            return Err(StoreError::Rejected {
                                op,
                                path: key.to_string(),
                                source: Box::new(e),
                            });
                        }
                        Class::Transient if attempt >= self.retry.max_attempts.max(1) => {
                            return Err(StoreError::Unavailable {
                                op,
                                path: key.to_string(),
                                attempts: attempt,
                                source: Box::new(e),
                            });
                        }
                        Class::Transient => {
                            tracing::debug!(op, key, attempt, error = %e, "transient store error, retrying");
                            self.counters.retry();
                            self.clock.sleep(self.backoff(attempt)).await;
                        }
                    }
                }
            }
        }
    }

    /// Writes (or overwrites) `key`.
    pub async fn put(&self, key: &str, data: Bytes) -> Result<(), StoreError> {
        self.put_payload(key, PutPayload::from(data)).await
    }

    /// Writes (or overwrites) `key` from several buffers without copying them.
    pub async fn put_payload(&self, key: &str, payload: PutPayload) -> Result<(), StoreError> {
        let path = self.full_path(key);
        let len = payload.content_length() as u64;
        self.retrying("put", key, Op::Put, || {
            self.inner
                .put_opts(&path, payload.clone(), PutOptions::default())
        })
        .await?;
        self.counters.written(len);
        Ok(())
    }

    /// Writes `key` as a multipart upload of `part_size`-byte parts (the last
    /// may be smaller). The object appears atomically when the upload
    /// completes; a failed upload is aborted and retried from the start.
    pub async fn put_multipart(
        &self,
        key: &str,
        parts: Vec<Bytes>,
        part_size: usize,
    ) -> Result<(), StoreError> {
        let path = self.full_path(key);
        let part_size = part_size.max(MIN_PART_SIZE);
        let total: u64 = parts.iter().map(|b| b.len() as u64).sum();
        let payload: PutPayload = parts.into_iter().collect();
        // Re-chunk into parts of `part_size` (zero-copy slices).
        let mut chunks: Vec<PutPayload> = Vec::new();
        let mut cur: Vec<Bytes> = Vec::new();
        let mut cur_len = 0usize;
        for b in payload.iter() {
            let mut b = b.clone();
            while !b.is_empty() {
                let take = (part_size - cur_len).min(b.len());
                cur.push(b.split_to(take));
                cur_len += take;
                if cur_len == part_size {
                    chunks.push(std::mem::take(&mut cur).into_iter().collect());
                    cur_len = 0;
                }
            }
        }
        if !cur.is_empty() || chunks.is_empty() {
            chunks.push(cur.into_iter().collect());
        }
        let counters = self.counters.clone();
        self.retrying("put_multipart", key, Op::Put, || {
            let inner = self.inner.clone();
            let path = path.clone();
            let chunks = chunks.clone();
            let counters = counters.clone();
            async move {
                let mut upload = inner.put_multipart_opts(&path, Default::default()).await?;
                for c in chunks {
                    counters.request(Op::Part);
                    if let Err(e) = upload.put_part(c).await {
                        let _ = upload.abort().await;
                        return Err(e);
                    }
                }
                upload.complete().await.map(|_| ())
            }
        })
        .await?;
        self.counters.written(total);
        Ok(())
    }

    /// Starts a multipart upload of `key` that the caller feeds piece by piece
    /// ([`StreamingUpload`]), for an object too large to hold in memory. Parts are
    /// `part_size` bytes (at least 5 MiB, S3's minimum; the last may be smaller) and at
    /// most `parts_in_flight` (at least 1) upload at once, so the upload holds at most
    /// `(parts_in_flight + 1) * part_size` bytes. Starting the upload is retried like
    /// any idempotent request; the parts are not (their bytes are gone once sent), so a
    /// failed part fails the upload, which is then aborted.
    pub async fn streaming_upload(
        &self,
        key: &str,
        part_size: usize,
        parts_in_flight: usize,
    ) -> Result<StreamingUpload, StoreError> {
        let path = self.full_path(key);
        let upload = self
            .retrying("put_multipart", key, Op::Put, || {
                self.inner.put_multipart_opts(&path, Default::default())
            })
            .await?;
        let part_size = part_size.max(MIN_PART_SIZE);
        Ok(StreamingUpload {
            key: key.to_owned(),
            writer: object_store::WriteMultipart::new_with_chunk_size(upload, part_size),
            part_size,
            parts_in_flight: parts_in_flight.max(1),
            written: 0,
            counters: self.counters.clone(),
        })
    }

    /// Conditionally creates `key`: succeeds only if no object exists there.
    ///
    /// Never retried. [`StoreError::Conflict`] means the key was taken and this
    /// call had no effect; [`StoreError::Ambiguous`] means the outcome is
    /// unknown (the request may have taken effect and its reply been lost):
    /// read the key to find out.
    pub async fn create(&self, key: &str, data: Bytes) -> Result<(), StoreError> {
        let path = self.full_path(key);
        let len = data.len() as u64;
        self.counters.request(Op::Create);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .inner
            .put_opts(&path, PutPayload::from(data), opts)
            .await
        {
            Ok(_) => {
                self.counters.written(len);
                Ok(())
            }
            Err(e) => match classify(&e) {
                Class::Conflict => {
                    self.counters.conflict();
                    Err(StoreError::Conflict {
                        path: key.to_string(),
                    })
                }
                Class::Permanent | Class::NotFound => Err(StoreError::Rejected {
                    op: "create",
                    path: key.to_string(),
                    source: Box::new(e),
                }),
                Class::Transient => Err(StoreError::Ambiguous {
                    path: key.to_string(),
                    source: Box::new(e),
                }),
            },
        }
    }

    /// Reads the whole object, refusing objects larger than `limit` bytes
    /// before reading their body.
    pub async fn get(&self, key: &str, limit: u64) -> Result<Bytes, StoreError> {
        let path = self.full_path(key);
        let bytes = self
            .retrying("get", key, Op::Get, || async {
                let r = self.inner.get_opts(&path, GetOptions::default()).await?;
                if r.meta.size > limit {
                    return Ok(Err(r.meta.size));
                }
                r.bytes().await.map(Ok)
            })
            .await?
            .map_err(|size| StoreError::TooLarge {
                path: key.to_string(),
                size,
                limit,
            })?;
        if bytes.len() as u64 > limit {
            return Err(StoreError::TooLarge {
                path: key.to_string(),
                size: bytes.len() as u64,
                limit,
            });
        }
        self.counters.read(bytes.len() as u64);
        Ok(bytes)
    }

    /// Like [`get`](Self::get) but a missing key is `Ok(None)`.
    pub async fn get_opt(&self, key: &str, limit: u64) -> Result<Option<Bytes>, StoreError> {
        match self.get(key, limit).await {
            Ok(b) => Ok(Some(b)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads `range` of `key` with one ranged GET. A store that returns a
    /// different number of bytes than asked is an error.
    pub async fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, StoreError> {
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        let path = self.full_path(key);
        let want = range.end - range.start;
        let bytes = self
            .retrying("get_range", key, Op::RangeGet, || {
                let opts = GetOptions {
                    range: Some(GetRange::Bounded(range.clone())),
                    ..Default::default()
                };
                async { self.inner.get_opts(&path, opts).await?.bytes().await }
            })
            .await?;
        self.counters.read(bytes.len() as u64);
        if bytes.len() as u64 != want {
            return Err(StoreError::Rejected {
                op: "get_range",
                path: key.to_string(),
                source: format!(
                    "asked for bytes {}..{} ({want} bytes), got {} bytes",
                    range.start,
                    range.end,
                    bytes.len()
                )
                .into(),
            });
        }
        Ok(bytes)
    }

    /// Reads several ranges of one object (backends may coalesce them).
    pub async fn get_ranges(
        &self,
        key: &str,
        ranges: &[Range<u64>],
    ) -> Result<Vec<Bytes>, StoreError> {
        let path = self.full_path(key);
        let out = self
            .retrying("get_ranges", key, Op::RangeGet, || {
                self.inner.get_ranges(&path, ranges)
            })
            .await?;
        for (b, r) in out.iter().zip(ranges) {
            if b.len() as u64 != r.end.saturating_sub(r.start) {
                return Err(StoreError::Rejected {
                    op: "get_ranges",
                    path: key.to_string(),
                    source: "store returned a range of the wrong length".into(),
                });
            }
        }
        self.counters
            .read(out.iter().map(|b| b.len() as u64).sum::<u64>());
        Ok(out)
    }

    /// Size and modification time of `key`.
    pub async fn head(&self, key: &str) -> Result<ObjectInfo, StoreError> {
        let path = self.full_path(key);
        let meta = self
            .retrying("head", key, Op::Head, || self.inner.head(&path))
            .await?;
        Ok(ObjectInfo {
            key: key.to_string(),
            size: meta.size,
            last_modified_ms: meta.last_modified.timestamp_millis(),
        })
    }

    /// Every object under `prefix` (relative), sorted by key.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        self.list_inner(prefix, None).await
    }

    /// Objects under `prefix` whose key sorts strictly after `after`
    /// (relative keys), sorted by key. Backends that can (S3, GCS) push the
    /// offset down, so this does not read the whole prefix.
    pub async fn list_after(
        &self,
        prefix: &str,
        after: &str,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        self.list_inner(prefix, Some(after)).await
    }

    async fn list_inner(
        &self,
        prefix: &str,
        after: Option<&str>,
    ) -> Result<Vec<ObjectInfo>, StoreError> {
        let p = self.full_path(prefix);
        let offset = after.map(|a| self.full_path(a));
        let mut out = self
            .retrying("list", prefix, Op::List, || {
                let stream = match &offset {
                    Some(o) => self.inner.list_with_offset(Some(&p), o),
                    None => self.inner.list(Some(&p)),
                };
                stream.try_collect::<Vec<_>>()
            })
            .await?
            .into_iter()
            .map(|m| ObjectInfo {
                key: self.relative_key(&m.location),
                size: m.size,
                last_modified_ms: m.last_modified.timestamp_millis(),
            })
            .collect::<Vec<_>>();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Deletes `key`; deleting a missing key succeeds (whatever the backend says).
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.full_path(key);
        match self
            .retrying("delete", key, Op::Delete, || self.inner.delete(&path))
            .await
        {
            Ok(()) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The store's own clock, in Unix milliseconds: a probe object is written, its
    /// `last_modified` read back, and the probe deleted. Comparable with other objects'
    /// `last_modified` without the skew between this host and the store (at the
    /// store's resolution, which is a second on some S3 implementations).
    pub async fn store_time_ms(&self) -> Result<i64, StoreError> {
        let nonce: u64 = self.rng.lock().map(|mut r| r.random()).unwrap_or(0);
        let probe = format!("_probe/time-{nonce:016x}");
        self.put(&probe, Bytes::from_static(b"time")).await?;
        let info = self.head(&probe).await;
        let _ = self.delete(&probe).await;
        Ok(info?.last_modified_ms)
    }

    /// Checks that the store honours conditional create: creates a probe key
    /// twice and expects the second to conflict. Refuses stores that ignore
    /// If-None-Match (they would let two producers commit the same version).
    pub async fn verify_conditional_create(&self) -> Result<(), StoreError> {
        let nonce: u64 = self.rng.lock().map(|mut r| r.random()).unwrap_or(0);
        let probe = format!("_probe/create-{:016x}-{}", nonce, self.clock.unix_millis());
        let first = self.create(&probe, Bytes::from_static(b"probe-1")).await;
        let second = match first {
            Ok(()) => self.create(&probe, Bytes::from_static(b"probe-2")).await,
            Err(e) => return Err(e),
        };
        let _ = self.delete(&probe).await;
        match second {
            Err(StoreError::Conflict { .. }) => Ok(()),
            Ok(()) => Err(StoreError::NonConformant {
                url: self.url.to_string(),
                probe,
            }),
            Err(e) => Err(e),
        }
    }
}

/// S3's smallest part of a multipart upload (but the last).
const MIN_PART_SIZE: usize = 5 * 1024 * 1024;

/// A multipart upload fed piece by piece ([`StreamStore::streaming_upload`]). The object
/// appears, atomically, only when [`finish`](Self::finish) completes; dropping the
/// upload unfinished leaves nothing visible (the store's incomplete upload is aborted by
/// [`abort`](Self::abort), or left to the bucket's lifecycle rule and GC).
pub struct StreamingUpload {
    key: String,
    writer: object_store::WriteMultipart,
    part_size: usize,
    parts_in_flight: usize,
    written: u64,
    counters: Arc<Counters>,
}

impl fmt::Debug for StreamingUpload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamingUpload")
            .field("key", &self.key)
            .field("part_size", &self.part_size)
            .field("written", &self.written)
            .finish()
    }
}

impl StreamingUpload {
    /// Appends `data` (not copied: it is sent as parts of the upload). Waits while
    /// `parts_in_flight` parts are uploading, so memory stays bounded whatever the
    /// caller writes; an error means a part failed and the upload must be aborted.
    pub async fn write(&mut self, mut data: Bytes) -> Result<(), StoreError> {
        while !data.is_empty() {
            if let Err(e) = self.writer.wait_for_capacity(self.parts_in_flight).await {
                return Err(unretried("put_part", &self.key, e));
            }
            let room = self.part_size - (self.written % self.part_size as u64) as usize;
            let piece = data.split_to(room.min(data.len()));
            let len = piece.len();
            self.writer.put(piece);
            self.written += len as u64;
            if len == room {
                self.counters.request(Op::Part);
            }
        }
        Ok(())
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The key, relative to the stream prefix.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Uploads what is buffered, waits for every part and completes the upload: the
    /// object is then visible, whole. On error the upload is aborted.
    pub async fn finish(self) -> Result<u64, StoreError> {
        if !self.written.is_multiple_of(self.part_size as u64) {
            self.counters.request(Op::Part);
        }
        let (key, written, counters) = (self.key.clone(), self.written, self.counters.clone());
        match self.writer.finish().await {
            Ok(_) => {
                counters.written(written);
                Ok(written)
            }
            Err(e) => Err(unretried("complete_multipart", &key, e)),
        }
    }

    /// Abandons the upload: stops the parts in flight and aborts it at the store.
    pub async fn abort(self) -> Result<(), StoreError> {
        let key = self.key.clone();
        self.writer.abort().await.map_err(|e| StoreError::Rejected {
            op: "abort_multipart",
            path: key,
            source: Box::new(e),
        })
    }
}

/// The error of a request that is not retried here (a part of a streaming upload, its
/// completion): transient or not, as the store said.
fn unretried(op: &'static str, key: &str, e: object_store::Error) -> StoreError {
    match classify(&e) {
        Class::Transient => StoreError::Unavailable {
            op,
            path: key.to_owned(),
            attempts: 1,
            source: Box::new(e),
        },
        _ => StoreError::Rejected {
            op,
            path: key.to_owned(),
            source: Box::new(e),
        },
    }
}
