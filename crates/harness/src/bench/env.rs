//! Where a bench runs: a fresh stream per arm on the simulated store, a
//! temporary directory, or a prefix of a user-given URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use batchweave::object_store::memory::InMemory;
use batchweave::object_store::path::Path;
use batchweave::object_store::{ObjectStore, ObjectStoreExt as _};
use batchweave::store::{Clock, LatencyModel, LatencyStore, StreamStore, Surcharge, TokioClock};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::progress::{Meter, NoProgress, Progress};

/// Unix milliseconds at which the simulated clock starts (any fixed value).
const SIM_EPOCH_MS: u64 = 1_750_000_000_000;

#[derive(Debug)]
enum Base {
    Sim(LatencyModel),
    Url(String),
    Dir(tempfile::TempDir),
}

/// Where and how the benches run: the store factory (a fresh stream per arm), the mode
/// and the progress sink (cheap to clone).
#[derive(Clone)]
pub struct Env {
    /// Virtual time on the simulated store.
    pub(crate) sim: bool,
    /// Small sweeps and short windows (a smoke test: its ratios are not representative).
    pub(crate) quick: bool,
    /// Root seed (latency jitter, producer jitter).
    pub(crate) seed: u64,
    /// The commit policies `bench visibility` compares (CLI spelling); `None`: its
    /// default list.
    pub(crate) policies: Option<Vec<String>>,
    base: Arc<Base>,
    next: Arc<AtomicU64>,
    progress: Arc<dyn Progress>,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("sim", &self.sim)
            .field("quick", &self.quick)
            .field("seed", &self.seed)
            .field("policies", &self.policies)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

/// A current-thread runtime with paused time (virtual time for the simulated store).
#[cfg(feature = "sim")]
pub(crate) fn paused_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?)
}

/// Without the `sim` feature there is no paused time; [`Env::new`] refuses the
/// simulator, so this is never reached.
#[cfg(not(feature = "sim"))]
pub(crate) fn paused_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    anyhow::bail!("{}", super::SIM_UNAVAILABLE)
}

/// One fresh stream: its store and, on the simulator, the raw backend (to
/// free memory behind the model's back).
pub(crate) struct Fresh {
    /// The stream.
    pub(crate) store: StreamStore,
    /// The in-memory backend under the latency model (simulator only).
    pub(crate) mem: Option<Arc<InMemory>>,
    /// The stream's directory (local directory only).
    pub(crate) dir: Option<std::path::PathBuf>,
}

impl Env {
    /// Chooses the base: the simulator (`sim`; needs the crate feature `sim`, see
    /// [`SIM_AVAILABLE`](super::SIM_AVAILABLE)), the stream URL `url` (each arm gets a
    /// fresh prefix under it), or a fresh temporary directory.
    pub fn new(sim: bool, quick: bool, url: Option<String>, seed: u64) -> anyhow::Result<Self> {
        if sim && !super::SIM_AVAILABLE {
            anyhow::bail!("{}", super::SIM_UNAVAILABLE);
        }
        let base = match (sim, url) {
            (true, _) => Base::Sim(LatencyModel::default()),
            (false, Some(u)) => Base::Url(u),
            (false, None) => Base::Dir(
                tempfile::Builder::new()
                    .prefix("batchweave-bench-")
                    .tempdir()
                    .context("creating a temporary directory")?,
            ),
        };
        Ok(Self {
            sim,
            quick,
            seed,
            policies: None,
            base: Arc::new(base),
            next: Arc::new(AtomicU64::new(0)),
            progress: Arc::new(NoProgress),
        })
    }

    /// Reports the benches' progress to `progress` (default: nowhere).
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = progress;
        self
    }

    /// The commit policies `bench visibility` compares, by name as
    /// [`PolicyKind`](batchweave::PolicyKind) parses them (a name that does not parse is
    /// skipped with a note). Other benches ignore it.
    pub fn with_policies(mut self, names: Vec<String>) -> Self {
        self.policies = Some(names);
        self
    }

    /// A progress meter of `len` units for one bench's phase.
    pub(crate) fn meter(&self, len: u64, what: &str) -> Arc<dyn Meter> {
        self.progress.meter(what, len)
    }

    /// A short label for tables.
    pub fn label(&self) -> String {
        match &*self.base {
            Base::Sim(_) => "sim store, virtual time".into(),
            Base::Url(u) => format!("store {u}, wall-clock time"),
            Base::Dir(d) => format!("local dir {}, wall-clock time", d.path().display()),
        }
    }

    /// The store description for the JSON results.
    pub fn describe(&self) -> Value {
        match &*self.base {
            Base::Sim(m) => json!({
                "kind": "sim",
                "time": "virtual (paused tokio runtime): throughput = virtual bytes / virtual seconds",
                "first_byte_ms": m.first_byte.as_secs_f64() * 1e3,
                "bandwidth_mib_per_s_per_connection": m.bandwidth / (1024.0 * 1024.0),
                "jitter_ms": m.jitter.as_secs_f64() * 1e3,
                "put_rate_per_s": m.put_rate,
                "get_rate_per_s": m.get_rate,
            }),
            Base::Url(u) => json!({ "kind": "url", "url": u, "time": "wall clock" }),
            Base::Dir(_) => json!({ "kind": "local-dir", "time": "wall clock" }),
        }
    }

    /// A fresh, empty stream named after `what` (call inside the bench runtime).
    pub(crate) async fn fresh(&self, what: &str) -> anyhow::Result<Fresh> {
        self.fresh_charged(what, None).await
    }

    /// [`Self::fresh`], with the simulator's latency model charging `surcharge` on top of
    /// each request's bytes (ignored on real stores).
    pub(crate) async fn fresh_charged(
        &self,
        what: &str,
        surcharge: Option<Surcharge>,
    ) -> anyhow::Result<Fresh> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let sub = format!("{what}-{n}");
        match &*self.base {
            Base::Sim(model) => {
                let mem = Arc::new(InMemory::new());
                let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(SIM_EPOCH_MS));
                let seed = self.seed.wrapping_mul(1_000_003).wrapping_add(n);
                let mut lat = LatencyStore::new(mem.clone(), *model, seed, clock.clone());
                if let Some(s) = surcharge {
                    lat = lat.with_surcharge(s);
                }
                let store = StreamStore::from_object_store(Arc::new(lat), "", "sim://")
                    .with_clock(clock)
                    .with_seed(seed);
                Ok(Fresh {
                    store,
                    mem: Some(mem),
                    dir: None,
                })
            }
            Base::Url(u) => {
                let root = StreamStore::open(u)
                    .await
                    .with_context(|| format!("opening {u}"))?;
                Ok(Fresh {
                    store: root.scoped(&format!("bench/{sub}")),
                    mem: None,
                    dir: None,
                })
            }
            Base::Dir(d) => {
                let path = d.path().join(&sub);
                std::fs::create_dir_all(&path)
                    .with_context(|| format!("creating {}", path.display()))?;
                let url = path.to_string_lossy().into_owned();
                let store = StreamStore::open(&url)
                    .await
                    .with_context(|| format!("opening {url}"))?;
                Ok(Fresh {
                    store,
                    mem: None,
                    dir: Some(path),
                })
            }
        }
    }

    /// A handle on `fresh`'s stream for readers that must not share the producers'
    /// request-rate budget: on the simulator the same objects behind a latency model of
    /// its own (same parameters, its own rate gates and jitter seeded by `salt`), so
    /// their queueing does not slow the producers; elsewhere the same backend with fresh
    /// counters.
    pub(crate) fn reader_store(&self, fresh: &Fresh, salt: u64) -> StreamStore {
        match (&*self.base, &fresh.mem) {
            (Base::Sim(model), Some(mem)) => {
                let clock = fresh.store.clock().clone();
                let seed = self.seed.wrapping_mul(7_919).wrapping_add(salt);
                let lat = LatencyStore::new(mem.clone(), *model, seed, clock.clone());
                StreamStore::from_object_store(Arc::new(lat), "", "sim://")
                    .with_clock(clock)
                    .with_seed(seed)
            }
            _ => fresh.store.map_backend(|b| b),
        }
    }

    /// Removes a finished stream's objects: the local directory's subdirectory, or
    /// every object under the stream's prefix on a store URL (a benchmark on a real
    /// server writes tens of GB; best effort, errors are ignored). The simulator frees
    /// memory when the backend is dropped.
    pub(crate) async fn discard(&self, fresh: Fresh) {
        match &*self.base {
            Base::Dir(_) => {
                if let Some(dir) = &fresh.dir {
                    let _ = std::fs::remove_dir_all(dir);
                }
            }
            Base::Url(_) => {
                use futures::StreamExt as _;
                let Ok(objects) = fresh.store.list("").await else {
                    return;
                };
                let store = &fresh.store;
                futures::stream::iter(objects)
                    .for_each_concurrent(16, |o| async move {
                        let _ = store.delete(&o.key).await;
                    })
                    .await;
            }
            Base::Sim(_) => {}
        }
    }
}

/// Deletes TGB objects straight from the backend every `every` (on the simulator in
/// virtual time), so that long ingestion runs do not keep gigabytes in memory or on disk;
/// the producer never reads its TGBs back. On a real store its listing and deletes run
/// in the bench's process, so its CPU counts in every arm alike. With `keep` zero, everything goes at each pass.
/// Otherwise an object goes once the newest manifest version lists it as committed (as GC
/// deletes what consumers that keep up have read, a little later), or once it has been
/// listed for `keep` uncommitted. A cooperative committer finds other producers' uploads
/// by listing them, so `keep` must cover several rounds. Stops when the returned handle is
/// aborted or dropped with the runtime.
pub(crate) fn spawn_reaper(
    fresh: &Fresh,
    every: Duration,
    keep: Duration,
) -> tokio::task::JoinHandle<()> {
    use batchweave::manifest::{DecodeLimits, MANIFEST_DIR, decode_manifest, parse_tgb_key};
    // On a real store the benches write GBs a second: without it a 10-MB, 32-producer
    // run fills the disk (or the server) within a minute.
    let mem: Arc<dyn ObjectStore> = match &fresh.mem {
        Some(m) => m.clone(),
        None => fresh.store.backend().clone(),
    };
    let clock = fresh.store.clock().clone();
    let root = fresh.store.prefix().trim_matches('/').to_owned();
    let under = move |rel: &str| -> Path {
        if root.is_empty() {
            Path::from(rel)
        } else {
            Path::from(format!("{root}/{rel}"))
        }
    };
    tokio::spawn(async move {
        let prefix = under("tgb");
        let manifests = under(MANIFEST_DIR.trim_end_matches('/'));
        let tgb_root = format!("{prefix}/");
        // When the reaper first saw each uncommitted object (virtual time).
        let mut seen: std::collections::HashMap<Path, tokio::time::Instant> =
            std::collections::HashMap::new();
        loop {
            clock.sleep(every).await;
            let now = clock.now();
            let newest = if keep.is_zero() {
                None
            } else {
                let metas: Vec<_> = mem
                    .list(Some(&manifests))
                    .filter_map(|m| async move { m.ok().map(|m| m.location) })
                    .collect()
                    .await;
                match metas.into_iter().max() {
                    Some(k) => match mem.get(&k).await {
                        Ok(r) => r
                            .bytes()
                            .await
                            .ok()
                            .and_then(|b| decode_manifest(&b, &DecodeLimits::default()).ok()),
                        Err(_) => None,
                    },
                    None => None,
                }
            };
            let keys: Vec<Path> = mem
                .list(Some(&prefix))
                .filter_map(|m| async move { m.ok().map(|m| m.location) })
                .collect()
                .await;
            let mut doomed = Vec::new();
            for k in keys {
                let rel = format!("tgb/{}", k.as_ref().strip_prefix(&tgb_root).unwrap_or(""));
                let committed = newest.as_ref().is_some_and(|m| {
                    parse_tgb_key(&rel).is_some_and(|(p, e, s)| {
                        m.producers.get(p).is_some_and(|st| {
                            e < st.epoch || (e == st.epoch && s <= st.last_sequence)
                        })
                    })
                });
                let first = *seen.entry(k.clone()).or_insert(now);
                if committed || now.saturating_duration_since(first) >= keep {
                    seen.remove(&k);
                    doomed.push(k);
                }
            }
            // Concurrent deletes: a real store's deletes are one request (or one blocking
            // file operation) each, and the producers write thousands of objects a second.
            let mem = &mem;
            futures::stream::iter(doomed)
                .for_each_concurrent(16, |k| async move {
                    let _ = mem.delete(&k).await;
                })
                .await;
        }
    })
}
