//! Where a bench runs: a fresh stream per arm on the simulated store, a
//! temporary directory, or a prefix of a user-given URL.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use batchweave::object_store::memory::InMemory;
use batchweave::object_store::path::Path;
use batchweave::object_store::{ObjectStore, ObjectStoreExt as _};
use batchweave::store::{Clock, LatencyModel, LatencyStore, StreamStore, TokioClock};
use futures::StreamExt;
use serde_json::{Value, json};

/// Unix milliseconds at which the simulated clock starts (any fixed value).
const SIM_EPOCH_MS: u64 = 1_750_000_000_000;

#[derive(Debug)]
enum Base {
    Sim(LatencyModel),
    Url(String),
    Dir(tempfile::TempDir),
}

/// The run's store factory and mode (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct Env {
    /// Virtual time on the simulated store.
    pub(crate) sim: bool,
    /// Small sweeps and short windows.
    pub(crate) quick: bool,
    /// Root seed.
    pub(crate) seed: u64,
    base: Arc<Base>,
    next: Arc<AtomicU64>,
}

/// One fresh stream: its store and, on the simulator, the raw backend (to
/// free memory behind the model's back).
pub(crate) struct Fresh {
    /// The stream.
    pub(crate) store: StreamStore,
    /// The in-memory backend under the latency model (simulator only).
    pub(crate) mem: Option<Arc<InMemory>>,
}

impl Env {
    /// Chooses the base: the simulator, `url`, or a temporary directory.
    pub(crate) fn new(
        sim: bool,
        quick: bool,
        url: Option<String>,
        seed: u64,
    ) -> anyhow::Result<Self> {
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
            base: Arc::new(base),
            next: Arc::new(AtomicU64::new(0)),
        })
    }

    /// A short label for tables.
    pub(crate) fn label(&self) -> String {
        match &*self.base {
            Base::Sim(_) => "sim store, virtual time".into(),
            Base::Url(u) => format!("store {u}, wall-clock time"),
            Base::Dir(d) => format!("local dir {}, wall-clock time", d.path().display()),
        }
    }

    /// The store description for the JSON results.
    pub(crate) fn describe(&self) -> Value {
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
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let sub = format!("{what}-{n}");
        match &*self.base {
            Base::Sim(model) => {
                let mem = Arc::new(InMemory::new());
                let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(SIM_EPOCH_MS));
                let seed = self.seed.wrapping_mul(1_000_003).wrapping_add(n);
                let lat = LatencyStore::new(mem.clone(), *model, seed, clock.clone());
                let store = StreamStore::from_object_store(Arc::new(lat), "", "sim://")
                    .with_clock(clock)
                    .with_seed(seed);
                Ok(Fresh {
                    store,
                    mem: Some(mem),
                })
            }
            Base::Url(u) => {
                let root = StreamStore::open(u)
                    .await
                    .with_context(|| format!("opening {u}"))?;
                Ok(Fresh {
                    store: root.scoped(&format!("bench/{sub}")),
                    mem: None,
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
                Ok(Fresh { store, mem: None })
            }
        }
    }

    /// Removes a finished stream's objects from the local directory (the
    /// simulator frees memory when the backend is dropped).
    pub(crate) fn discard(&self, fresh: Fresh) {
        if let Base::Dir(_) = &*self.base {
            let prefix = fresh.store.prefix().to_owned();
            if !prefix.is_empty() {
                let _ = std::fs::remove_dir_all(format!("/{}", prefix.trim_start_matches('/')));
            }
        }
    }
}

/// On the simulator, deletes every TGB object every `every` (virtual time)
/// straight from the backend, so that long ingestion runs do not keep
/// gigabytes in memory; the producer never reads its TGBs back. Stops when
/// the returned handle is aborted or dropped with the runtime.
pub(crate) fn spawn_reaper(fresh: &Fresh, every: Duration) -> Option<tokio::task::JoinHandle<()>> {
    let mem = fresh.mem.clone()?;
    let clock = fresh.store.clock().clone();
    Some(tokio::spawn(async move {
        let prefix = Path::from("tgb");
        loop {
            clock.sleep(every).await;
            let keys: Vec<Path> = mem
                .list(Some(&prefix))
                .filter_map(|m| async move { m.ok().map(|m| m.location) })
                .collect()
                .await;
            for k in keys {
                let _ = mem.delete(&k).await;
            }
        }
    }))
}
