//! `Stream`: opens a stream from a URL and hands out producers, consumers, `inspect`
//! and `gc`.

use std::sync::Mutex;

use batchweave::{
    GcSettings, OpenOptions, PolicyKind, ProducerSettings, SliceLayout, Stream as RustStream,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use serde_json::{Value, json};

use crate::consumer::{Consumer, ConsumerArgs};
use crate::convert::{self, seconds};
use crate::errors::{invalid, py_err};
use crate::producer::Producer;
use crate::runtime::{Owner, block_on};

/// One training data stream (an object-store prefix).
#[pyclass(module = "batchweave", frozen)]
pub(crate) struct Stream {
    url: String,
    options: Vec<(String, String)>,
    skip_verify: bool,
    identity: String,
    /// The opened stream and the process it was opened in: a forked child reopens it
    /// (the parent's HTTP connections belong to the parent's runtime).
    inner: Mutex<(Owner, RustStream)>,
}

fn option_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_owned());
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    if v.is_instance_of::<pyo3::types::PyInt>() || v.is_instance_of::<pyo3::types::PyFloat>() {
        return Ok(v.str()?.to_str()?.to_owned());
    }
    Err(PyTypeError::new_err(format!(
        "store option {key}: expected a str, bool or number, got {}",
        v.get_type().name()?
    )))
}

/// The stream's identity as the state dict records it: the URL with a local path made
/// absolute, so that `./run` and `/abs/run` name the same stream.
fn identity_of(url: &str) -> String {
    let url = url.trim();
    let local = if url.contains("://") {
        url.strip_prefix("file://")
    } else {
        Some(url)
    };
    match local.map(std::fs::canonicalize) {
        Some(Ok(p)) => format!("file://{}", p.display()),
        _ => url.trim_end_matches('/').to_owned(),
    }
}

async fn open_rust(
    url: &str,
    options: &[(String, String)],
    skip_verify: bool,
) -> Result<RustStream, batchweave::Error> {
    let opts = OpenOptions {
        options: options.to_vec(),
        skip_verify,
        ..Default::default()
    };
    RustStream::open_with(url, opts).await
}

impl Stream {
    /// The opened stream for this process (reopened after a fork).
    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<RustStream> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.0.check("stream").is_err() {
            let s = block_on(py, open_rust(&self.url, &self.options, self.skip_verify))?
                .map_err(py_err)?;
            *inner = (Owner::here(), s);
        }
        Ok(inner.1.clone())
    }

    pub(crate) fn identity(&self) -> &str {
        &self.identity
    }
}

#[pymethods]
impl Stream {
    /// Opens the stream at `url` (a path, `file://`, `s3://`, `gs://`, `az://`);
    /// `options` are `object_store` config keys (`aws_endpoint="http://..."`,
    /// `aws_allow_http=True`, ...), plus `skip_verify=True` to skip the
    /// conditional-create probe.
    #[staticmethod]
    #[pyo3(signature = (url, **options))]
    fn open(py: Python<'_>, url: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut opts = Vec::new();
        let mut skip_verify = false;
        if let Some(d) = options {
            for (k, v) in d.iter() {
                let key: String = k.extract()?;
                if key == "skip_verify" {
                    skip_verify = v.is_truthy()?;
                    continue;
                }
                let value = option_value(&key, &v)?;
                opts.push((key, value));
            }
        }
        let stream = block_on(py, open_rust(url, &opts, skip_verify))?.map_err(py_err)?;
        Ok(Self {
            url: url.to_owned(),
            options: opts,
            skip_verify,
            identity: identity_of(url),
            inner: Mutex::new((Owner::here(), stream)),
        })
    }

    /// The URL the stream was opened with.
    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    fn __repr__(&self) -> String {
        format!("<batchweave.Stream {}>", self.identity)
    }

    /// Opens (claims the epoch of) producer `id`; see `Producer`.
    #[pyo3(signature = (
        id, *, policy = "coop", max_lag = None, max_buffered = None, lag_poll = None,
        multipart_threshold = None, multipart_part_size = None, max_commit_age = None,
        seed = None, single_worker = false, slice_layout = "auto"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn producer(
        &self,
        py: Python<'_>,
        id: &str,
        policy: &str,
        max_lag: Option<u64>,
        max_buffered: Option<usize>,
        lag_poll: Option<f64>,
        multipart_threshold: Option<u64>,
        multipart_part_size: Option<usize>,
        max_commit_age: Option<f64>,
        seed: Option<u64>,
        single_worker: bool,
        slice_layout: &str,
    ) -> PyResult<Producer> {
        let slice_layout: SliceLayout = slice_layout.parse().map_err(invalid)?;
        let policy: PolicyKind = policy.parse().map_err(|e| {
            invalid(format!(
                "policy {policy:?}: {e} (use \"coop\", \"dac\", \"naive\", \"fixed:K\", \"incr\" or \"aimd\")"
            ))
        })?;
        let d = ProducerSettings::default();
        let settings = ProducerSettings {
            policy,
            max_lag,
            max_buffered: max_buffered.unwrap_or(d.max_buffered),
            lag_poll: lag_poll.map_or(Ok(d.lag_poll), |s| seconds("lag_poll", s))?,
            multipart_threshold: multipart_threshold.unwrap_or(d.multipart_threshold),
            multipart_part_size: multipart_part_size.unwrap_or(d.multipart_part_size),
            max_commit_age: max_commit_age
                .map_or(Ok(d.max_commit_age), |s| seconds("max_commit_age", s))?,
            seed,
            single_worker,
            slice_layout,
            ..d
        };
        let stream = self.get(py)?;
        let id = id.to_owned();
        let p = block_on(py, async move {
            stream.producer(id).settings(settings).open().await
        })?
        .map_err(py_err)?;
        Ok(Producer::new(p))
    }

    /// Opens a consumer for one training rank (rank and world size from `RANK` /
    /// `WORLD_SIZE` unless given; 0 and 1 when neither is set). `state` (a dict from
    /// `state_dict()`) resumes exactly after its checkpoint, also at another DP or CP.
    #[pyo3(signature = (
        *, group, dp, cp, tp = 1, pp = 1, rank = None, world_size = None, state = None,
        prefetch = None, read_mode = None, poll_min = None, poll_max = None, token_bytes = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn consumer(
        &self,
        py: Python<'_>,
        group: String,
        dp: u32,
        cp: u32,
        tp: u32,
        pp: u32,
        rank: Option<u32>,
        world_size: Option<u32>,
        state: Option<Py<PyAny>>,
        prefetch: Option<usize>,
        read_mode: Option<String>,
        poll_min: Option<f64>,
        poll_max: Option<f64>,
        token_bytes: Option<u32>,
    ) -> PyResult<Consumer> {
        Consumer::open(
            py,
            self,
            ConsumerArgs {
                group,
                degrees: [dp, cp, tp, pp],
                rank,
                world_size,
                state,
                prefetch,
                read_mode,
                poll_min,
                poll_max,
                token_bytes,
            },
        )
    }

    /// The identity a state dict records for this stream.
    #[getter(identity)]
    fn identity_py(&self) -> &str {
        &self.identity
    }

    /// The stream's state as a dict: newest version, retained steps and bytes, the
    /// producers' state map, the GC boundary and the consumer groups' watermarks.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stream = self.get(py)?;
        let info = block_on(py, async move { stream.inspect().await })?.map_err(py_err)?;
        let producers: serde_json::Map<String, Value> = info
            .producers
            .iter()
            .map(|(id, p)| {
                (
                    id.clone(),
                    json!({
                        "epoch": p.epoch,
                        "source_offset": p.source_offset,
                        "last_sequence": p.last_sequence,
                        "last_commit_version": p.last_commit_version,
                        "tgbs_committed": p.tgbs_committed,
                        "last_commit_ms": p.last_commit_ms,
                    }),
                )
            })
            .collect();
        let groups: Vec<Value> = info
            .low_water
            .groups
            .iter()
            .map(|g| {
                json!({
                    "group": g.group,
                    "step": g.step,
                    "version": g.version,
                    "dead": g.dead,
                    "positions": g.positions.iter().map(|p| json!({
                        "position": p.position,
                        "version": p.version,
                        "step": p.step,
                        "updated_at_ms": p.updated_at_ms,
                        "present": p.present,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "url": self.url,
            "version": info.version,
            "first_step": info.first_step,
            "end_step": info.end_step,
            "retained_tgbs": info.retained_tgbs,
            "retained_bytes": info.retained_bytes,
            "producers": producers,
            "gc_boundary": {
                "min_live_version": info.boundary.min_live_version,
                "low_water_step": info.boundary.low_water_step,
                "updated_at_ms": info.boundary.updated_at_ms,
            },
            "low_water": {"step": info.low_water.step, "version": info.low_water.version},
            "groups": groups,
        });
        convert::to_py(py, &v)
    }

    /// Runs one reclamation pass and returns its report as a dict. `orphan_grace`
    /// (seconds, `None` = never sweep orphans) and the other settings are the
    /// reclaimer's.
    #[pyo3(signature = (
        dry_run = false, *, orphan_grace = Some(3600.0), orphan_margin = None,
        producers_stopped = false, dead_group_after = None
    ))]
    fn gc<'py>(
        &self,
        py: Python<'py>,
        dry_run: bool,
        orphan_grace: Option<f64>,
        orphan_margin: Option<f64>,
        producers_stopped: bool,
        dead_group_after: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let d = GcSettings::default();
        let settings = GcSettings {
            orphan_grace: orphan_grace
                .map(|s| seconds("orphan_grace", s))
                .transpose()?,
            orphan_margin: orphan_margin
                .map_or(Ok(d.orphan_margin), |s| seconds("orphan_margin", s))?,
            producers_stopped,
            dead_group_after: dead_group_after
                .map(|s| seconds("dead_group_after", s))
                .transpose()?,
            dry_run,
            ..d
        };
        let stream = self.get(py)?;
        let r = block_on(
            py,
            async move { stream.reclaimer(settings).run_once().await },
        )?
        .map_err(py_err)?;
        let v = json!({
            "boundary_before": {
                "min_live_version": r.boundary_before.min_live_version,
                "low_water_step": r.boundary_before.low_water_step,
            },
            "boundary": {
                "min_live_version": r.boundary.min_live_version,
                "low_water_step": r.boundary.low_water_step,
            },
            "newest_version": r.newest_version,
            "tgbs_deleted": r.tgbs_deleted,
            "orphans_deleted": r.orphans_deleted,
            "claims_deleted": r.claims_deleted,
            "manifests_deleted": r.manifests_deleted,
            "bytes_freed": r.bytes_freed,
            "dry_run": r.dry_run,
            "groups": r.groups.iter().map(|(g, s, v)| json!({"group": g, "step": s, "version": v})).collect::<Vec<_>>(),
        });
        convert::to_py(py, &v)
    }
}
