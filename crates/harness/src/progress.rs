//! Progress of a long run, reported to whoever draws it (the CLI's bars), or to nobody.

use std::sync::Arc;

/// Hands out a [`Meter`] per phase of a run. The harness never draws anything itself.
pub trait Progress: Send + Sync {
    /// A new meter of `len` units labelled `label`.
    fn meter(&self, label: &str, len: u64) -> Arc<dyn Meter>;
}

/// One phase's progress: a position out of a length, and a message.
pub trait Meter: Send + Sync {
    /// Sets the message shown next to the position.
    fn set_message(&self, message: String);
    /// Sets the position.
    fn set_position(&self, position: u64);
    /// Advances the position by `delta`.
    fn inc(&self, delta: u64);
    /// The phase is over.
    fn finish(&self);
}

/// Reports nothing (tests, and runs nobody watches).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn meter(&self, _label: &str, _len: u64) -> Arc<dyn Meter> {
        Arc::new(NoProgress)
    }
}

impl Meter for NoProgress {
    fn set_message(&self, _message: String) {}
    fn set_position(&self, _position: u64) {}
    fn inc(&self, _delta: u64) {}
    fn finish(&self) {}
}
