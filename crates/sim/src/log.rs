//! The event log every actor of a run appends to (and the backend, which records
//! violations with their trace), with the one-line description of a manifest
//! version the log and the checks' messages use.

use std::sync::{Arc, Mutex, MutexGuard};

use batchweave_manifest::Manifest;
use batchweave_store::Clock;
use tokio::time::Instant;

/// Events kept in a failure's trace.
const TRACE_LEN: usize = 60;

/// Locks `m`, taking over a poisoned lock (a panicking actor fails the run anyway).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The event log, shared with the backend (which records violations with their trace).
pub(crate) struct EventLog {
    lines: Mutex<Vec<String>>,
    clock: Arc<dyn Clock>,
    start: Instant,
    /// Print every event as it happens (`BATCHWEAVE_SIM_LOG=1`).
    echo: bool,
}

impl EventLog {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            lines: Mutex::new(Vec::new()),
            start: clock.now(),
            clock,
            echo: std::env::var("BATCHWEAVE_SIM_LOG").is_ok_and(|v| v == "1"),
        }
    }

    /// Virtual milliseconds since the run started.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        let d = self.clock.now().saturating_duration_since(self.start);
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    /// Appends an event to the log.
    pub(crate) fn event(&self, who: &str, what: impl AsRef<str>) {
        let line = format!("{:>9}ms {who:<6} {}", self.elapsed_ms(), what.as_ref());
        tracing::trace!("{line}");
        if self.echo {
            eprintln!("{line}");
        }
        lock(&self.lines).push(line);
    }

    /// The last events.
    pub(crate) fn trace(&self) -> Vec<String> {
        let log = lock(&self.lines);
        log.iter()
            .skip(log.len().saturating_sub(TRACE_LEN))
            .cloned()
            .collect()
    }

    /// The whole log.
    pub(crate) fn all(&self) -> Vec<String> {
        lock(&self.lines).clone()
    }
}

/// A one-line description of a version for messages.
pub(crate) fn summary(m: &Manifest) -> String {
    let tgbs: Vec<String> = m
        .tgbs
        .iter()
        .map(|d| format!("{}#{}e{}", d.producer_id, d.sequence, d.epoch))
        .collect();
    let producers: Vec<String> = m
        .producers
        .iter()
        .map(|(id, e)| {
            format!(
                "{id}:e{}/i{:x}/off{}",
                e.epoch,
                e.incarnation % 0x10000,
                e.source_offset
            )
        })
        .collect();
    format!(
        "[v{} first_step {} tgbs {tgbs:?} producers {producers:?}]",
        m.version, m.first_step
    )
}
