//! The per-process tokio runtime, created lazily and re-created after `fork`.
//!
//! A forked child (a `DataLoader` worker) inherits the parent's memory but none of its
//! threads, so a runtime created before the fork is dead in the child: using it deadlocks.
//! Every entry point therefore asks [`runtime`] for the runtime of *this* process id.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors;

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// The runtime of the calling process, created on first use in this process.
pub(crate) fn runtime() -> PyResult<Arc<Runtime>> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((owner, rt)) = slot.as_ref()
        && *owner == pid
    {
        return Ok(rt.clone());
    }
    if let Some((_, inherited)) = slot.take() {
        // The parent's runtime: its worker threads do not exist here, so dropping it
        // would wait for them forever. Leak it instead (one allocation per fork).
        std::mem::forget(inherited);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("batchweave")
        .build()
        .map_err(|e| errors::internal(format!("cannot start the tokio runtime: {e}")))?;
    let rt = Arc::new(rt);
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// Runs `fut` to completion on the process's runtime with the GIL released.
pub(crate) fn block_on<F>(py: Python<'_>, fut: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    Ok(py.detach(move || rt.block_on(fut)))
}

/// Interval at which a long wait re-acquires the GIL to let Python handle signals
/// (Ctrl-C raises `KeyboardInterrupt` in the waiting call).
pub(crate) const SIGNAL_CHECK: Duration = Duration::from_millis(200);

/// A Python object bound to the process that created it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner(u32);

impl Owner {
    pub(crate) fn here() -> Self {
        Self(std::process::id())
    }

    /// Fails with `InvalidError` in a forked child: the object's tasks live in the
    /// parent's runtime.
    pub(crate) fn check(self, what: &str) -> PyResult<()> {
        if self.0 == std::process::id() {
            Ok(())
        } else {
            Err(errors::invalid(format!(
                "this {what} was opened in process {} and cannot be used in process {} (after a \
                 fork): open a new one in this process",
                self.0,
                std::process::id()
            )))
        }
    }
}
