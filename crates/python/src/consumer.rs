//! `Consumer` (one training rank, iterable) and `Batch`.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use batchweave::consumer::BatchSource;
use batchweave::{
    Batch as RustBatch, Consumer as RustConsumer, ConsumerSettings, ConsumerState, MeshConfig,
    RankConfig, ReadMode,
};
use pyo3::exceptions::{PyStopIteration, PyTimeoutError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::{Value, json};
use tokio::sync::Mutex as AsyncMutex;
use tokio::task::JoinHandle;

use crate::buffer::Buffer;
use crate::convert::{self, seconds};
use crate::errors::{internal, invalid, py_err};
use crate::runtime::{Owner, SIGNAL_CHECK, block_on, runtime};
use crate::stream::Stream;

/// Format marker of the Python state dict (it wraps the consumer's own state).
pub(crate) const PY_STATE_FORMAT: &str = "batchweave-python-state/1";

type NextResult = Result<(RustBatch, ConsumerState), batchweave::Error>;

/// One step of this rank: `step`, `data` (zero-copy buffers), `sources`, `version`.
#[pyclass(module = "batchweave", frozen)]
pub(crate) struct Batch {
    /// The consumer step (counted at the consumer's DP degree).
    #[pyo3(get)]
    step: u64,
    /// The manifest version the step was read from.
    #[pyo3(get)]
    version: u64,
    /// The rank's bytes: a list of `Buffer`s (buffer protocol, no copy).
    #[pyo3(get)]
    data: Py<PyList>,
    /// Where each entry of `data` came from: a list of dicts.
    #[pyo3(get)]
    sources: Py<PyList>,
}

#[pymethods]
impl Batch {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "<batchweave.Batch step {} ({} buffers)>",
            self.step,
            self.data.bind(py).len()
        )
    }
}

fn source_json(s: &BatchSource) -> Value {
    json!({
        "tgb_step": s.tgb_step,
        "key": s.key,
        "producer_id": s.producer_id,
        "sequence": s.sequence,
        "visible_version": s.visible_version,
        "first_slice": s.first_slice,
        "slice_count": s.slice_count,
        "part": s.part.map(|(i, n)| vec![i, n]),
    })
}

fn to_py_batch(py: Python<'_>, b: RustBatch) -> PyResult<Batch> {
    let data = PyList::empty(py);
    for bytes in b.data {
        data.append(Py::new(py, Buffer { bytes })?)?;
    }
    let sources = PyList::empty(py);
    for s in &b.sources {
        sources.append(convert::to_py(py, &source_json(s))?)?;
    }
    Ok(Batch {
        step: b.step,
        version: b.version,
        data: data.unbind(),
        sources: sources.unbind(),
    })
}

/// A training rank's consumer. Iterate it (`for batch in rank`), or call `next`.
#[pyclass(module = "batchweave", frozen)]
pub(crate) struct Consumer {
    owner: Owner,
    stream: String,
    group: String,
    rank: u32,
    world_size: u32,
    /// `None` once closed.
    inner: Arc<AsyncMutex<Option<RustConsumer>>>,
    /// The cursor after the last delivered batch: `state_dict` reads only this.
    state: Mutex<ConsumerState>,
    /// A `next` still running after its caller timed out (or was interrupted): the next
    /// call waits for it instead of starting another.
    pending: Mutex<Option<JoinHandle<NextResult>>>,
    closed: std::sync::atomic::AtomicBool,
}

fn env_u32(name: &str) -> PyResult<Option<u32>> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v.trim().parse::<u32>().map(Some).map_err(|_| {
            invalid(format!(
                "environment variable {name}={v:?} is not a non-negative integer"
            ))
        }),
    }
}

/// Rank and world size: the arguments, else `RANK` / `WORLD_SIZE`, else 0 and 1.
pub(crate) fn rank_and_world(rank: Option<u32>, world: Option<u32>) -> PyResult<(u32, u32)> {
    let rank = match rank {
        Some(r) => Some(r),
        None => env_u32("RANK")?,
    };
    let world = match world {
        Some(w) => Some(w),
        None => env_u32("WORLD_SIZE")?,
    };
    match (rank, world) {
        (Some(r), Some(w)) => Ok((r, w)),
        (None, None) => Ok((0, 1)),
        (Some(_), None) => Err(invalid(
            "RANK is set (or rank given) but WORLD_SIZE is not: set both (torchrun does) or \
             pass rank= and world_size=",
        )),
        (None, Some(_)) => Err(invalid(
            "WORLD_SIZE is set (or world_size given) but RANK is not: set both (torchrun does) \
             or pass rank= and world_size=",
        )),
    }
}

/// The consumer state inside a Python state dict, checked against this stream and group.
fn parse_state(stream: &str, group: &str, sd: &Bound<'_, PyAny>) -> PyResult<ConsumerState> {
    let v = convert::from_py(sd)?;
    let Value::Object(m) = &v else {
        return Err(invalid("a state dict must be a dict (from state_dict())"));
    };
    let format = m.get("format").and_then(Value::as_str);
    if format != Some(PY_STATE_FORMAT) {
        return Err(invalid(format!(
            "not a BatchWeave consumer state dict (format {format:?}, expected \
             {PY_STATE_FORMAT:?}); pass what state_dict() returned"
        )));
    }
    let their_stream = m.get("stream").and_then(Value::as_str).unwrap_or("");
    if their_stream != stream {
        return Err(invalid(format!(
            "the state dict belongs to stream {their_stream:?}, not to this stream {stream:?}"
        )));
    }
    let their_group = m.get("group").and_then(Value::as_str).unwrap_or("");
    if their_group != group {
        return Err(invalid(format!(
            "the state dict belongs to consumer group {their_group:?}, not to group {group:?}"
        )));
    }
    let cursor = m
        .get("cursor")
        .ok_or_else(|| invalid("the state dict has no cursor"))?;
    let bytes = serde_json::to_vec(cursor).map_err(|e| internal(e.to_string()))?;
    ConsumerState::from_bytes(&bytes).map_err(py_err)
}

fn state_json(stream: &str, group: &str, s: &ConsumerState) -> PyResult<Value> {
    let cursor: Value =
        serde_json::from_slice(&s.to_bytes()).map_err(|e| internal(e.to_string()))?;
    Ok(json!({
        "format": PY_STATE_FORMAT,
        "stream": stream,
        "group": group,
        "cursor": cursor,
    }))
}

fn read_mode(s: &str) -> PyResult<ReadMode> {
    match s {
        "range" => Ok(ReadMode::Range),
        "dense" => Ok(ReadMode::Dense),
        other => Err(invalid(format!(
            "read_mode {other:?}: use \"range\" (the default) or \"dense\""
        ))),
    }
}

/// Everything `stream.consumer(...)` takes.
pub(crate) struct ConsumerArgs {
    pub(crate) group: String,
    pub(crate) degrees: [u32; 4],
    pub(crate) rank: Option<u32>,
    pub(crate) world_size: Option<u32>,
    pub(crate) state: Option<Py<PyAny>>,
    pub(crate) prefetch: Option<usize>,
    pub(crate) read_mode: Option<String>,
    pub(crate) poll_min: Option<f64>,
    pub(crate) poll_max: Option<f64>,
    pub(crate) token_bytes: Option<u32>,
}

impl Consumer {
    pub(crate) fn open(py: Python<'_>, stream: &Stream, a: ConsumerArgs) -> PyResult<Self> {
        let (rank, world_size) = rank_and_world(a.rank, a.world_size)?;
        let [dp, cp, tp, pp] = a.degrees;
        let d = ConsumerSettings::default();
        let settings = ConsumerSettings {
            prefetch: a.prefetch.unwrap_or(d.prefetch),
            read_mode: a.read_mode.as_deref().map_or(Ok(d.read_mode), read_mode)?,
            poll_min: a
                .poll_min
                .map_or(Ok(d.poll_min), |s| seconds("poll_min", s))?,
            poll_max: a
                .poll_max
                .map_or(Ok(d.poll_max), |s| seconds("poll_max", s))?,
            token_bytes: a.token_bytes.unwrap_or(d.token_bytes),
            ..d
        };
        let identity = stream.identity().to_owned();
        let saved = match &a.state {
            Some(sd) if !sd.bind(py).is_none() => {
                Some(parse_state(&identity, &a.group, sd.bind(py))?)
            }
            _ => None,
        };
        let mut me = RankConfig::new(rank, MeshConfig::new(world_size, dp, cp, tp, pp), &a.group);
        me.local_rank = env_u32("LOCAL_RANK").ok().flatten();
        let s = stream.get(py)?;
        let c = block_on(py, async move {
            let mut b = s.consumer(me).settings(settings);
            if let Some(st) = saved {
                b = b.state(st);
            }
            b.open().await
        })?
        .map_err(py_err)?;
        let state = c.state();
        Ok(Self {
            owner: Owner::here(),
            stream: identity,
            group: a.group,
            rank,
            world_size,
            inner: Arc::new(AsyncMutex::new(Some(c))),
            state: Mutex::new(state),
            pending: Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn closed_err(&self) -> PyErr {
        invalid(format!("consumer of group {:?} is closed", self.group))
    }

    /// Waits for the next batch; `None` if the consumer was closed meanwhile.
    fn next_inner(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Batch>> {
        self.owner.check("consumer")?;
        if self.is_closed() {
            return Ok(None);
        }
        let deadline = match timeout {
            Some(t) => Some(Instant::now() + seconds("timeout", t)?),
            None => None,
        };
        let rt = runtime()?;
        let taken = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut handle = match taken {
            Some(h) => h,
            None => {
                let inner = self.inner.clone();
                rt.spawn(async move {
                    let mut guard = inner.lock_owned().await;
                    let c = guard
                        .as_mut()
                        .ok_or_else(|| batchweave::Error::invalid("consumer closed"))?;
                    let b = c.next().await?;
                    Ok((b, c.state()))
                })
            }
        };
        loop {
            let slice = match deadline {
                Some(d) => d
                    .saturating_duration_since(Instant::now())
                    .min(SIGNAL_CHECK),
                None => SIGNAL_CHECK,
            };
            let rt2 = rt.clone();
            let (h, done) = py.detach(move || {
                let done =
                    rt2.block_on(async { tokio::time::timeout(slice, &mut handle).await.ok() });
                (handle, done)
            });
            handle = h;
            if let Some(joined) = done {
                let (batch, state) = joined
                    .map_err(|e| internal(format!("the consumer task failed: {e}")))?
                    .map_err(crate::errors::to_py)?;
                *self.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
                return to_py_batch(py, batch).map(Some);
            }
            if self.is_closed() {
                handle.abort();
                return Ok(None);
            }
            let park = |h: JoinHandle<NextResult>| {
                *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(h);
            };
            if let Err(e) = py.check_signals() {
                park(handle);
                return Err(e);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                park(handle);
                return Err(PyTimeoutError::new_err(format!(
                    "no batch arrived within {:.3}s",
                    timeout.unwrap_or_default()
                )));
            }
        }
    }
}

#[pymethods]
impl Consumer {
    /// The next batch of this rank. Waits for it (forever without `timeout`; with it,
    /// raises `TimeoutError` after `timeout` seconds; the call can be repeated).
    #[pyo3(signature = (timeout = None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Batch> {
        self.next_inner(py, timeout)?
            .ok_or_else(|| self.closed_err())
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Batch> {
        self.next_inner(py, None)?
            .ok_or_else(|| PyStopIteration::new_err(()))
    }

    /// The cursor after the last delivered batch, as a small JSON-serializable dict that
    /// names the stream and the group. Pure: no I/O, no side effect.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner()).clone();
        convert::to_py(py, &state_json(&self.stream, &self.group, &s)?)
    }

    /// Call after the checkpoint holding `state` (from `state_dict()`) is durable:
    /// writes this rank's watermark, so GC may reclaim what it no longer needs.
    fn checkpoint_committed(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<()> {
        self.owner.check("consumer")?;
        let st = parse_state(&self.stream, &self.group, state)?;
        let inner = self.inner.clone();
        let out = block_on(py, async move {
            let guard = inner.lock().await;
            match guard.as_ref() {
                Some(c) => Some(c.checkpoint_committed(&st).await),
                None => None,
            }
        })?;
        out.ok_or_else(|| self.closed_err())?.map_err(py_err)
    }

    /// Statistics as a dict (steps, bytes fetched and delivered, stalls, requests).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.owner.check("consumer")?;
        let inner = self.inner.clone();
        let s = block_on(
            py,
            async move { inner.lock().await.as_ref().map(|c| c.stats()) },
        )?
        .ok_or_else(|| self.closed_err())?;
        let v = json!({
            "steps": s.steps,
            "bytes_fetched": s.bytes_fetched,
            "manifest_bytes": s.manifest_bytes,
            "footer_bytes": s.footer_bytes,
            "slice_bytes": s.slice_bytes,
            "bytes_delivered": s.bytes_delivered,
            "stalls": s.stalls,
            "stall_time": s.stall_time.as_secs_f64(),
            "manifests_read": s.manifests_read,
            "boundary_reads": s.boundary_reads,
            "footers_read": s.footers_read,
            "footer_cache_hits": s.footer_cache_hits,
            "footers_cached": s.footers_cached,
            "read_amplification": s.read_amplification(),
            "store": {
                "gets": s.store.gets,
                "range_gets": s.store.range_gets,
                "heads": s.store.heads,
                "lists": s.store.lists,
                "puts": s.store.puts,
                "bytes_read": s.store.bytes_read,
                "bytes_written": s.store.bytes_written,
                "retries": s.store.retries,
            },
        });
        convert::to_py(py, &v)
    }

    /// The consumer group.
    #[getter]
    fn group(&self) -> &str {
        &self.group
    }

    /// This process's global rank.
    #[getter]
    fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of ranks.
    #[getter]
    fn world_size(&self) -> u32 {
        self.world_size
    }

    /// True once `close` ran.
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// Stops the consumer (ends iteration, also one blocked in another thread).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(h) = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            h.abort();
        }
        if self.owner.check("consumer").is_err() {
            return Ok(());
        }
        let inner = self.inner.clone();
        block_on(py, async move {
            // A next() still running holds the lock for at most one signal-check slice
            // after `closed` is set.
            let c = inner.lock().await.take();
            drop(c);
        })
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<batchweave.Consumer group {:?} rank {}/{}>",
            self.group, self.rank, self.world_size
        )
    }
}
