//! The innermost simulated store: an `InMemory` backend that keeps the
//! ground truth the checks need and, on request, misbehaves (planted bugs).
//!
//! ```text
//!   StreamStore ─> FaultStore ─> LatencyStore ─> SimBackend ─> InMemory
//!                                                  │ records every manifest write
//!                                                  │ stamps objects with virtual time
//!                                                  └ planted bug (optional)
//! ```
//!
//! `InMemory` stamps objects with the real wall clock; GC's orphan sweep
//! compares those stamps with the injected clock, so the backend rewrites
//! them in listings with the virtual time of the write. That keeps the sweep
//! meaningful and the run deterministic.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use batchweave_chain::{BOUNDARY_DIR, parse_boundary_key};
use batchweave_manifest::{DecodeLimits, decode_gc_boundary};
use batchweave_store::Clock;
use batchweave_store::object_store::path::Path;
use batchweave_store::object_store::{
    self, CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::PlantedBug;

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// One write of a manifest version that took effect.
#[derive(Debug, Clone)]
pub(crate) struct ManifestWrite {
    /// Key relative to the store root.
    pub(crate) key: String,
    /// The bytes written.
    pub(crate) bytes: Bytes,
    /// Virtual unix milliseconds of the write.
    pub(crate) at_ms: u64,
    /// The GC boundary's `min_live_version` when the write took effect: a
    /// version below it landed in a slot GC had emptied (a ghost the
    /// writer must not count as committed).
    pub(crate) min_live: u64,
    /// The GC boundary's `low_water_step` when the write took effect.
    pub(crate) low_water: u64,
}

#[derive(Debug)]
struct State {
    /// Virtual modification time of every object written, by key.
    mtimes: BTreeMap<String, u64>,
    /// Every manifest write that took effect, in order.
    manifests: Vec<ManifestWrite>,
    plant: Option<PlantedBug>,
    rng: StdRng,
    planted_hits: u64,
}

/// See the module docs.
pub(crate) struct SimBackend {
    inner: Arc<dyn ObjectStore>,
    clock: Arc<dyn Clock>,
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for SimBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimBackend").finish_non_exhaustive()
    }
}

impl fmt::Display for SimBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimBackend({})", self.inner)
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn is_manifest(p: &Path) -> bool {
    p.as_ref().starts_with(batchweave_manifest::MANIFEST_DIR)
}

impl SimBackend {
    pub(crate) fn new(clock: Arc<dyn Clock>, plant: Option<PlantedBug>, seed: u64) -> Self {
        Self {
            inner: Arc::new(object_store::memory::InMemory::new()),
            clock,
            state: Arc::new(Mutex::new(State {
                mtimes: BTreeMap::new(),
                manifests: Vec::new(),
                plant,
                rng: StdRng::seed_from_u64(seed),
                planted_hits: 0,
            })),
        }
    }

    /// Every manifest write so far, in order.
    pub(crate) fn manifest_writes(&self) -> Vec<ManifestWrite> {
        lock(&self.state).manifests.clone()
    }

    /// How often the planted bug changed an outcome.
    pub(crate) fn planted_hits(&self) -> u64 {
        lock(&self.state).planted_hits
    }

    /// Whether `key` exists right now (ground truth, no faults, no latency).
    pub(crate) async fn exists(&self, key: &str) -> bool {
        self.inner.head(&Path::from(key)).await.is_ok()
    }

    /// Draws whether the planted bug fires for a create of an existing key.
    fn plant_fires(&self) -> Option<PlantedBug> {
        let mut st = lock(&self.state);
        let plant = st.plant?;
        let rate = match plant {
            PlantedBug::CreateOverwrites { rate }
            | PlantedBug::FalseSuccess { rate }
            | PlantedBug::StaleBoundary { rate } => rate,
            // A producer-side plant: the store behaves.
            PlantedBug::SkipStateMapCheck => return None,
        };
        if st.rng.random::<f64>() < rate {
            st.planted_hits += 1;
            Some(plant)
        } else {
            None
        }
    }

    /// The current GC boundary: `(min_live_version, low_water_step)` of the newest
    /// boundary log entry, zero if there is none (ground truth, no faults).
    async fn boundary(&self) -> (u64, u64) {
        let dir = Path::from(BOUNDARY_DIR.trim_end_matches('/'));
        let Ok(listed) = self.inner.list(Some(&dir)).try_collect::<Vec<_>>().await else {
            return (0, 0);
        };
        let Some(newest) = listed
            .iter()
            .filter(|m| parse_boundary_key(m.location.as_ref()).is_some())
            .max_by(|a, b| a.location.as_ref().cmp(b.location.as_ref()))
        else {
            return (0, 0);
        };
        let Ok(r) = self.inner.get(&newest.location).await else {
            return (0, 0);
        };
        match r.bytes().await {
            Ok(b) => decode_gc_boundary(&b, &DecodeLimits::default())
                .map_or((0, 0), |b| (b.min_live_version, b.low_water_step)),
            Err(_) => (0, 0),
        }
    }

    /// The planted stale boundary: a listing of the boundary log that misses its
    /// newest entry, so the reader takes an older boundary for the current one.
    fn maybe_stale(
        &self,
        prefix: Option<&Path>,
        s: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let log =
            prefix.is_some_and(|p| p.as_ref().starts_with(BOUNDARY_DIR.trim_end_matches('/')));
        let planted = matches!(
            lock(&self.state).plant,
            Some(PlantedBug::StaleBoundary { .. })
        );
        if !log || !planted || self.plant_fires().is_none() {
            return s;
        }
        futures::stream::once(async move {
            let mut all: Vec<Result<ObjectMeta>> = s.collect().await;
            let newest = all
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().ok().map(|m| (i, m.location.to_string())))
                .max_by(|a, b| a.1.cmp(&b.1))
                .map(|(i, _)| i);
            if let Some(i) = newest {
                let _ = all.remove(i);
            }
            futures::stream::iter(all)
        })
        .flatten()
        .boxed()
    }

    fn stamp(&self, key: &Path, manifest: Option<(Bytes, (u64, u64))>) {
        let now = self.clock.unix_millis();
        let mut st = lock(&self.state);
        st.mtimes.insert(key.as_ref().to_string(), now);
        if let Some((bytes, (min_live, low_water))) = manifest {
            if std::env::var("BATCHWEAVE_SIM_LOG").is_ok_and(|x| x == "1")
                && let Ok(m) =
                    batchweave_manifest::decode_manifest(&bytes, &DecodeLimits::default())
            {
                eprintln!(
                    "{:>9}ms store  write (min live {min_live}) {}",
                    now.saturating_sub(crate::world::CLOCK_BASE_MS),
                    crate::check::summary(&m)
                );
            }
            st.manifests.push(ManifestWrite {
                key: key.as_ref().to_string(),
                bytes,
                at_ms: now,
                min_live,
                low_water,
            });
        }
    }

    fn restamp(
        &self,
        s: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let state = self.state.clone();
        s.map(move |r| {
            r.map(|mut m| {
                let ms = lock(&state)
                    .mtimes
                    .get(m.location.as_ref())
                    .copied()
                    .unwrap_or(0);
                m.last_modified = Default::default();
                m.last_modified += Duration::from_millis(ms);
                m
            })
        })
        .boxed()
    }

    async fn put_inner(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        let manifest = is_manifest(location);
        let creating = matches!(opts.mode, PutMode::Create);
        let mut false_success = false;
        let planted = matches!(
            lock(&self.state).plant,
            Some(PlantedBug::CreateOverwrites { .. } | PlantedBug::FalseSuccess { .. })
        );
        if planted && manifest && creating && self.inner.head(location).await.is_ok() {
            match self.plant_fires() {
                Some(PlantedBug::CreateOverwrites { .. }) => opts.mode = PutMode::Overwrite,
                Some(PlantedBug::FalseSuccess { .. }) => false_success = true,
                Some(PlantedBug::StaleBoundary { .. } | PlantedBug::SkipStateMapCheck) | None => {}
            }
        }
        let bytes = manifest.then(|| Bytes::from(payload.clone()));
        let r = self.inner.put_opts(location, payload, opts).await;
        if let (Some(b), Err(e)) = (&bytes, &r)
            && std::env::var("BATCHWEAVE_SIM_LOG").is_ok_and(|x| x == "1")
            && let Ok(m) = batchweave_manifest::decode_manifest(b, &DecodeLimits::default())
        {
            eprintln!(
                "{:>9}ms store  refused {}: {e}",
                self.clock
                    .unix_millis()
                    .saturating_sub(crate::world::CLOCK_BASE_MS),
                crate::check::summary(&m)
            );
        }
        match r {
            Ok(r) => {
                let manifest = match bytes {
                    Some(b) => Some((b, self.boundary().await)),
                    None => None,
                };
                self.stamp(location, manifest);
                Ok(r)
            }
            Err(object_store::Error::AlreadyExists { .. }) if false_success => Ok(PutResult {
                e_tag: None,
                version: None,
                extensions: Default::default(),
            }),
            Err(e) => Err(e),
        }
    }
}

impl ObjectStore for SimBackend {
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
        Box::pin(self.put_inner(location, payload, opts))
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
        Box::pin(async move {
            // The object appears at completion; stamping at the start is
            // early, which only makes the orphan sweep more aggressive.
            self.stamp(location, None);
            self.inner.put_multipart_opts(location, opts).await
        })
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
        self.inner.get_opts(location, options)
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
        self.inner.get_ranges(location, ranges)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.maybe_stale(prefix, self.restamp(self.inner.list(prefix)))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.maybe_stale(
            prefix,
            self.restamp(self.inner.list_with_offset(prefix, offset)),
        )
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
        self.inner.list_with_delimiter(prefix)
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
        Box::pin(async move {
            self.inner.copy_opts(from, to, options).await?;
            self.stamp(to, None);
            Ok(())
        })
    }
}
