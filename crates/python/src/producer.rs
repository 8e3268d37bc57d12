//! `Producer`: a preprocessing worker's handle, a context manager.

use std::sync::Arc;

use batchweave::{Producer as RustProducer, ProducerStats};
use bytes::Bytes;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::buffer::{Buffer, exported_bytes};
use crate::convert;
use crate::errors::{invalid, py_err};
use crate::runtime::{Owner, block_on};

/// A producer: `append` global batches, `flush`, `close` (or leave the `with` block).
#[pyclass(module = "batchweave", frozen)]
pub(crate) struct Producer {
    owner: Owner,
    id: String,
    epoch: u64,
    committed_offset: u64,
    inner: Arc<Mutex<Option<RustProducer>>>,
    /// The statistics `close` returned.
    last_stats: std::sync::Mutex<Option<ProducerStats>>,
}

impl Producer {
    pub(crate) fn new(p: RustProducer) -> Self {
        Self {
            owner: Owner::here(),
            id: p.id().to_owned(),
            epoch: p.epoch(),
            committed_offset: p.committed_offset(),
            inner: Arc::new(Mutex::new(Some(p))),
            last_stats: std::sync::Mutex::new(None),
        }
    }

    fn closed_err(&self) -> PyErr {
        invalid(format!("producer {:?} is closed", self.id))
    }

    fn close_inner(&self, py: Python<'_>) -> PyResult<()> {
        self.owner.check("producer")?;
        let inner = self.inner.clone();
        let out = block_on(py, async move {
            let taken = inner.lock().await.take();
            match taken {
                Some(p) => Some(p.close().await),
                None => None,
            }
        })?;
        match out {
            None => Ok(()),
            Some(Ok(stats)) => {
                *self.last_stats.lock().unwrap_or_else(|p| p.into_inner()) = Some(stats);
                Ok(())
            }
            Some(Err(e)) => Err(py_err(e)),
        }
    }
}

/// The bytes of one slice, without a copy when possible: ours (`Buffer`) and `bytes` by
/// reference, any other C-contiguous buffer (bytearray, numpy array, memoryview,
/// array.array) through its held buffer export (see `buffer::exported_bytes`: sound
/// because `append` reads the bytes only while it runs, and the caller must not mutate them
/// meanwhile). A non-contiguous buffer (a strided numpy view) is copied once.
fn slice_bytes(i: usize, obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.cast::<Buffer>() {
        return Ok(b.get().bytes.clone());
    }
    if obj.is_instance_of::<PyBytes>() {
        // Holds a reference to the (immutable) bytes object and points into it.
        let backed: PyBackedBytes = obj.extract()?;
        return Ok(Bytes::from_owner(backed));
    }
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "slice {i} is a str; encode it (s.encode()) or pass a bytes-like object"
        )));
    }
    let py = obj.py();
    match exported_bytes(obj) {
        Ok(Some(bytes)) => Ok(bytes),
        Ok(None) => {
            // Not C-contiguous: one copy, in C order, into an immutable bytes object.
            let copy = py
                .get_type::<PyBytes>()
                .call1((PyMemoryView::from(obj)?,))?;
            let backed: PyBackedBytes = copy.extract()?;
            Ok(Bytes::from_owner(backed))
        }
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            let name = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into());
            Err(PyTypeError::new_err(format!(
                "slice {i} is a {name}, not a bytes-like object (bytes, bytearray, memoryview, \
                 a numpy array or a batchweave.Buffer)"
            )))
        }
        Err(e) => Err(e),
    }
}

fn stats_json(s: &ProducerStats) -> Value {
    json!({
        "attempts": s.attempts,
        "successes": s.successes,
        "conflicts": s.conflicts,
        "ambiguous": s.ambiguous,
        "lost_replies_recovered": s.lost_replies_recovered,
        "ghost_commits_prevented": s.ghost_commits_prevented,
        "tgbs_appended": s.tgbs_appended,
        "bytes_uploaded": s.bytes_uploaded,
        "tgbs_committed": s.tgbs_committed,
        "bytes_committed": s.bytes_committed,
        "lag_waits": s.lag_waits,
        "full_buffer_reads": s.full_buffer_reads,
        "offer_listings": s.offer_listings,
        "offer_listings_reused": s.offer_listings_reused,
        "claim_objects": s.claim_objects,
        "claims_recorded_by_others": s.claims_recorded_by_others,
        "claims_recorded_for_others": s.claims_recorded_for_others,
        "gap": s.gap.as_secs_f64(),
        "tau": s.tau.map(|t| t.as_secs_f64()),
        "commit_time": s.commit_time.as_secs_f64(),
        "producers_seen": s.producers_seen,
        "version": s.version,
        "committed_offset": s.committed_offset,
        "last_sequence": s.last_sequence,
        "success_rate": s.success_rate(),
    })
}

#[pymethods]
impl Producer {
    /// The producer id.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }

    /// This incarnation's epoch (claimed when the producer opened).
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The id's committed source offset when this producer opened: seek the source
    /// there, then append what follows.
    #[getter]
    fn committed_offset(&self) -> u64 {
        self.committed_offset
    }

    /// True once `close` ran (or the `with` block ended).
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        let inner = self.inner.clone();
        block_on(py, async move { inner.lock().await.is_none() })
    }

    /// The statistics as a dict (the final ones after `close`).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.inner.clone();
        let live = block_on(
            py,
            async move { inner.lock().await.as_ref().map(|p| p.stats()) },
        )?;
        let s = match live {
            Some(s) => s,
            None => self
                .last_stats
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .unwrap_or_default(),
        };
        convert::to_py(py, &stats_json(&s))
    }

    /// Uploads one global batch: `slices` are `dp * cp` bytes-like objects, slice
    /// `(d, c)` at index `d * cp + c`; `source_offset` is the source position after
    /// this batch. Returns once the object is durable (visible after the next commit)
    /// with a dict `{"sequence", "key", "object_size"}`. Bad input raises and leaves
    /// the producer usable.
    ///
    /// The slices are read in place, not copied (a non-contiguous buffer excepted), with
    /// the GIL released: do not mutate a buffer (from another thread) while `append` runs
    /// on it. Once it returns, the bytes have been read and uploaded and the buffers are
    /// free to reuse.
    #[pyo3(signature = (slices, *, dp, cp, source_offset))]
    fn append<'py>(
        &self,
        py: Python<'py>,
        slices: &Bound<'py, PyAny>,
        dp: u32,
        cp: u32,
        source_offset: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.owner.check("producer")?;
        if slices.is_instance_of::<PyBytes>()
            || slices.is_instance_of::<PyByteArray>()
            || slices.is_instance_of::<PyString>()
            || slices.cast::<Buffer>().is_ok()
        {
            return Err(PyTypeError::new_err(
                "slices must be a list of dp*cp bytes-like objects, not one bytes-like object",
            ));
        }
        let items: Vec<Bytes> = slices
            .try_iter()
            .map_err(|_| {
                PyTypeError::new_err(
                    "slices must be a list (or other iterable) of dp*cp bytes-like objects",
                )
            })?
            .enumerate()
            .map(|(i, o)| slice_bytes(i, &o?))
            .collect::<PyResult<_>>()?;
        let expected = u64::from(dp) * u64::from(cp);
        if items.len() as u64 != expected {
            return Err(invalid(format!(
                "{} slices given for a DP={dp} x CP={cp} batch: pass exactly dp*cp = {expected} \
                 slices, slice (d, c) at index d*cp + c",
                items.len()
            )));
        }
        // The last clone of each slice is dropped here, with the GIL held: releasing a
        // buffer export then costs no GIL round trip.
        let keep = items.clone();
        let inner = self.inner.clone();
        let out = block_on(py, async move {
            let mut guard = inner.lock().await;
            match guard.as_mut() {
                Some(p) => Some(p.append(dp, cp, items, source_offset).await),
                None => None,
            }
        });
        drop(keep);
        let out = out?;
        let receipt = out.ok_or_else(|| self.closed_err())?.map_err(py_err)?;
        let v = json!({
            "sequence": receipt.sequence,
            "key": receipt.key,
            "object_size": receipt.object_size,
        });
        convert::to_py(py, &v)
    }

    /// Commits everything appended so far and returns once it is visible.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.owner.check("producer")?;
        let inner = self.inner.clone();
        let out = block_on(py, async move {
            let guard = inner.lock().await;
            match guard.as_ref() {
                Some(p) => Some(p.flush().await),
                None => None,
            }
        })?;
        out.ok_or_else(|| self.closed_err())?.map_err(py_err)
    }

    /// Drains and commits what was appended, then stops the commit loop. Closing a
    /// closed producer does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.close_inner(py)
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Leaving the block drains and commits, also on an exception (which then
    /// propagates, the drain error attached as its `__context__` and a note).
    #[pyo3(signature = (_exc_type = None, exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let result = self.close_inner(py);
        match (exc.filter(|e| !e.is_none()), result) {
            (_, Ok(())) => Ok(false),
            (None, Err(e)) => Err(e),
            (Some(exc), Err(drain)) => {
                let drain_obj = drain.value(py).clone();
                if exc.getattr("__context__")?.is_none() {
                    exc.setattr("__context__", &drain_obj)?;
                }
                exc.call_method1(
                    "add_note",
                    (format!(
                        "batchweave: draining producer {:?} on exit also failed: {drain_obj}",
                        self.id
                    ),),
                )?;
                Ok(false)
            }
        }
    }

    fn __repr__(&self) -> String {
        format!("<batchweave.Producer {:?} epoch {}>", self.id, self.epoch)
    }
}
