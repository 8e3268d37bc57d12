//! Injected time: everything in BatchWeave that waits or reads the time goes
//! through a [`Clock`], so a simulation can run in tokio's paused virtual time.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// A source of time and of sleeping.
///
/// Contract: `now()` never goes backwards; `sleep(d)` completes no earlier than
/// `now() + d`; `unix_millis()` is wall-clock time, which never goes backwards either
/// and, unlike `now()`, keeps running while the host is suspended. BatchWeave never
/// orders anything by wall-clock time, but it judges ages by it (an upload's age
/// against `max_commit_age`, an orphan's against the grace period): an age measured
/// with a monotonic clock stops while a host hibernates.
pub trait Clock: Send + Sync + Debug + 'static {
    /// A monotonic instant.
    fn now(&self) -> Instant;
    /// Waits for `d`.
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
    /// Wall-clock milliseconds since the Unix epoch that correspond to `now()`.
    fn unix_millis(&self) -> u64;
}

/// The clock of the tokio runtime. Under a paused runtime
/// (`tokio::time::pause`, `start_paused = true`) it is virtual and
/// deterministic; otherwise it is real time.
#[derive(Debug, Clone)]
pub struct TokioClock {
    base_unix_ms: u64,
    start: Instant,
    /// Read the system clock on every `unix_millis()` (real time) rather than
    /// `base + elapsed` (virtual time under a paused runtime).
    wall: bool,
    /// The largest wall reading returned, so that readings never go backwards.
    last: Arc<std::sync::atomic::AtomicU64>,
}

impl TokioClock {
    /// Real time: `unix_millis()` reads the system clock at every call (so a
    /// long-running process does not keep the clock error it started with, and time
    /// spent suspended counts), never going backwards.
    pub fn system() -> Self {
        Self {
            wall: true,
            ..Self::with_base(system_unix_millis())
        }
    }

    /// A clock whose `unix_millis()` starts at `base_unix_ms`: with a paused
    /// runtime every reading is a function of the schedule alone.
    pub fn with_base(base_unix_ms: u64) -> Self {
        Self {
            base_unix_ms,
            start: Instant::now(),
            wall: false,
            last: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// The default shared clock.
    pub fn shared() -> Arc<dyn Clock> {
        Arc::new(Self::system())
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    #[allow(clippy::disallowed_methods)]
    fn sleep(&self, d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(tokio::time::sleep(d))
    }

    fn unix_millis(&self) -> u64 {
        if self.wall {
            let now = system_unix_millis();
            let prev = self
                .last
                .fetch_max(now, std::sync::atomic::Ordering::Relaxed);
            return now.max(prev);
        }
        let elapsed = Instant::now().saturating_duration_since(self.start);
        self.base_unix_ms
            .saturating_add(elapsed.as_millis().min(u128::from(u64::MAX)) as u64)
    }
}

/// The system's wall clock in Unix milliseconds (0 before 1970).
#[allow(clippy::disallowed_methods)]
fn system_unix_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis().min(u128::from(u64::MAX)) as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn paused_clock_is_virtual_and_deterministic() {
        let c = TokioClock::with_base(1_000);
        let t0 = c.now();
        c.sleep(Duration::from_secs(3600)).await;
        assert_eq!(c.now() - t0, Duration::from_secs(3600));
        assert_eq!(c.unix_millis(), 1_000 + 3_600_000);
    }
}
