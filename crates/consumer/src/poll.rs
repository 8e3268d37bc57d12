//! Manifest polling: the newest live version a consumer has read, and how it moves
//! forward. The chain rules (liveness against the GC boundary, extension of the held
//! version) live in `batchweave-chain`; this module adds the consumer's cadence.
//!
//! ```text
//!  holds M(v) ── step covered? ──yes──> read
//!                   │ no
//!                   v
//!          Follower::poll (GET v+1, boundary) ──not moved──> sleep (poll_min, doubling
//!                   │ moved                                   to poll_max), stall
//!                   v
//!          still not covered? ──> Follower::jump_from(v+2): one listing, adopt newest
//! ```
//!
//! Steady state is one GET per poll while nothing is new; the prefix is never listed
//! from its start. Every [`LIST_PROBE_EVERY`] consecutive misses the GET is replaced by a
//! listing after `v`, so a consumer whose `v+1` was deleted by GC (a newer version still
//! holds its steps) moves on.

use std::sync::Arc;
use std::time::Duration;

use batchweave_chain::{Chain, Follower, Start};
use batchweave_manifest::{DecodeLimits, GcBoundary, Manifest, manifest_key};
use batchweave_store::StreamStore;

use crate::ConsumerError;

/// Consecutive misses after which a poll lists the versions after `v` instead of GETting
/// `v+1`.
pub const LIST_PROBE_EVERY: u32 = 16;

/// The newest live manifest version a consumer has read.
#[derive(Debug)]
pub(crate) struct Tracker {
    follower: Follower,
}

impl Tracker {
    pub(crate) fn new(store: StreamStore, limits: DecodeLimits) -> Self {
        let mut follower = Follower::new(Chain::new(store, limits));
        let planted = crate::planted::planted();
        if planted.skip_boundary || planted.skip_extension {
            // Test-only (crates/sim): never set by the library.
            follower.plant(batchweave_chain::PlantedReaderBugs {
                skip_boundary: planted.skip_boundary,
                skip_extension: planted.skip_extension,
            });
        }
        Self { follower }
    }

    /// The version held.
    pub(crate) fn current(&self) -> &Arc<Manifest> {
        self.follower.current()
    }

    /// The GC boundary as last read.
    pub(crate) fn boundary(&self) -> GcBoundary {
        self.follower.boundary()
    }

    /// Re-reads the GC boundary.
    pub(crate) async fn refresh_boundary(&mut self) -> Result<GcBoundary, ConsumerError> {
        Ok(self.follower.refresh_boundary().await?)
    }

    /// Manifest versions and bytes read so far.
    pub(crate) fn chain_stats(&self) -> batchweave_chain::ChainStats {
        self.follower.chain().stats()
    }

    /// Positions the tracker for a consumer that starts from version `version` (0 = a
    /// fresh consumer). A version that GC deleted, or that is below the GC boundary (a
    /// ghost may fill its slot), is never adopted: the tracker then holds the newest live
    /// version, and the caller checks that the steps it needs are still there.
    pub(crate) async fn start_at(&mut self, version: u64) -> Result<(), ConsumerError> {
        match self.follower.start_at(version).await? {
            Start::Empty if version > 0 => Err(ConsumerError::state(format!(
                "manifest version {version} of the checkpoint is missing and no newer version \
                 exists (GC boundary: min live version {}); is this the right stream?",
                self.follower.boundary().min_live_version
            ))),
            _ => Ok(()),
        }
    }

    /// Polls until `covered(current manifest)` holds. Sleeps through the store's clock with
    /// exponential backoff between `poll_min` and `poll_max`; returns the time spent
    /// sleeping-and-polling when it had to wait at all.
    pub(crate) async fn wait_until(
        &mut self,
        mut covered: impl FnMut(&Manifest) -> Result<bool, ConsumerError>,
        poll_min: Duration,
        poll_max: Duration,
    ) -> Result<Option<Duration>, ConsumerError> {
        let clock = self.follower.chain().store().clock().clone();
        let start = clock.now();
        let mut waited = false;
        let mut backoff = poll_min;
        let mut misses = 0u32;
        while !covered(self.follower.current())? {
            let v = self.follower.current().version;
            let next = v
                .checked_add(1)
                .ok_or_else(|| ConsumerError::data(&manifest_key(v), "version number overflows"))?;
            let advanced = if misses > 0 && misses.is_multiple_of(LIST_PROBE_EVERY) {
                self.follower.jump_from(next).await?
            } else if self.follower.poll().await? {
                if !covered(self.follower.current())? {
                    let after = self.follower.current().version.saturating_add(1);
                    self.follower.jump_from(after).await?;
                }
                true
            } else {
                false
            };
            if advanced {
                misses = 0;
                backoff = poll_min;
                continue;
            }
            misses = misses.saturating_add(1);
            waited = true;
            clock.sleep(backoff).await;
            backoff = backoff.saturating_mul(2).min(poll_max);
        }
        Ok(waited.then(|| clock.now().saturating_duration_since(start)))
    }
}

/// A consumer's manifest following without its reads: the same `Tracker` and
/// `wait_until` loop a [`Consumer`](crate::Consumer) runs when the step it needs is not in
/// the held version, for benchmarks that follow a stream with many ranks and count what
/// they read (`bench visibility`). Not part of the supported API.
#[doc(hidden)]
#[derive(Debug)]
pub struct ManifestTracker {
    tracker: Tracker,
    poll_min: Duration,
    poll_max: Duration,
}

impl ManifestTracker {
    /// A tracker on `store` (pass a handle with counters of its own to count its
    /// requests) that polls and decodes as a consumer with `settings` does.
    pub fn new(store: StreamStore, settings: &crate::ConsumerSettings) -> Self {
        Self {
            tracker: Tracker::new(store, settings.limits),
            poll_min: settings.poll_min,
            poll_max: settings.poll_max,
        }
    }

    /// Positions as a consumer resuming from a checkpoint of manifest version `version`
    /// (0: a fresh consumer).
    pub async fn start_at(&mut self, version: u64) -> Result<(), ConsumerError> {
        self.tracker.start_at(version).await
    }

    /// Waits as a consumer whose grid is the stream's does for consumer step `step`:
    /// until the held version lists more than `step` TGBs. Returns the time spent waiting
    /// when it had to wait.
    pub async fn wait_for_step(&mut self, step: u64) -> Result<Option<Duration>, ConsumerError> {
        self.tracker
            .wait_until(|m| Ok(m.total_tgbs > step), self.poll_min, self.poll_max)
            .await
    }

    /// The version held.
    pub fn current(&self) -> &Arc<Manifest> {
        self.tracker.current()
    }

    /// Manifest versions, boundary reads and their bytes so far.
    pub fn chain_stats(&self) -> batchweave_chain::ChainStats {
        self.tracker.chain_stats()
    }
}
