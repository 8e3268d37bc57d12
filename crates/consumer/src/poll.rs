//! Manifest polling: the newest version a consumer has read, and how it moves forward.
//!
//! ```text
//!  holds M(v) ── step covered? ──yes──> read
//!                   │ no
//!                   v
//!          GET manifests/<v+1> ──NotFound──> sleep (poll_min, doubling to poll_max), stall
//!                   │ found
//!                   v
//!          adopt M(v+1) ── still not covered? ──> one list_after(manifests/<v+1>), adopt newest
//! ```
//!
//! Steady state is one GET per poll; the prefix is never listed from its start. Every
//! [`LIST_PROBE_EVERY`] consecutive misses the GET is replaced by a listing after `v`, so a
//! consumer whose `v+1` was deleted by GC (a newer version still holds its steps) moves on.

use std::sync::Arc;
use std::time::Duration;

use batchweave_manifest::{
    DecodeLimits, GC_BOUNDARY_KEY, GcBoundary, HEADER_LEN, MANIFEST_DIR, Manifest,
    decode_gc_boundary, decode_manifest, manifest_key, parse_manifest_key,
};
use batchweave_store::StreamStore;

use crate::ConsumerError;
use crate::stats::{Live, add};

/// Consecutive misses after which a poll lists the versions after `v` instead of GETting
/// `v+1`.
pub const LIST_PROBE_EVERY: u32 = 16;

/// The newest manifest version a consumer has read.
#[derive(Debug)]
pub(crate) struct Tracker {
    store: StreamStore,
    limits: DecodeLimits,
    live: Arc<Live>,
    pub(crate) current: Arc<Manifest>,
}

impl Tracker {
    pub(crate) fn new(store: StreamStore, limits: DecodeLimits, live: Arc<Live>) -> Self {
        Self {
            store,
            limits,
            live,
            current: Arc::new(Manifest::genesis()),
        }
    }

    /// Reads version `v`; `None` if it does not exist (yet, or any more).
    async fn read_version(&self, v: u64) -> Result<Option<Manifest>, ConsumerError> {
        let key = manifest_key(v);
        let limit = self.limits.max_bytes.saturating_add(HEADER_LEN as u64);
        let Some(bytes) = self.store.get_opt(&key, limit).await? else {
            return Ok(None);
        };
        add(&self.live.manifests_read, 1);
        add(&self.live.manifest_bytes, bytes.len() as u64);
        let m =
            decode_manifest(&bytes, &self.limits).map_err(|source| ConsumerError::Manifest {
                key: key.clone(),
                source,
            })?;
        if m.version != v {
            return Err(ConsumerError::data(
                &key,
                format!("the object says it is version {}", m.version),
            ));
        }
        Ok(Some(m))
    }

    /// The GC boundary, if GC has written one.
    pub(crate) async fn read_boundary(&self) -> Result<Option<GcBoundary>, ConsumerError> {
        let Some(bytes) = self.store.get_opt(GC_BOUNDARY_KEY, 64 * 1024).await? else {
            return Ok(None);
        };
        add(&self.live.manifests_read, 1);
        add(&self.live.manifest_bytes, bytes.len() as u64);
        decode_gc_boundary(&bytes, &self.limits)
            .map(Some)
            .map_err(|source| ConsumerError::Manifest {
                key: GC_BOUNDARY_KEY.to_owned(),
                source,
            })
    }

    /// Makes `m` the current manifest if it is newer. A newer version must extend the
    /// current one: `first_step` and `total_tgbs` never decrease and a retained TGB keeps
    /// its step.
    fn adopt(&mut self, m: Manifest) -> Result<bool, ConsumerError> {
        let cur = &self.current;
        if m.version <= cur.version {
            return Ok(false);
        }
        let key = manifest_key(m.version);
        if m.first_step < cur.first_step || m.total_tgbs < cur.total_tgbs {
            return Err(ConsumerError::data(
                &key,
                format!(
                    "version {} (steps {}..{}) goes backwards from version {} (steps {}..{})",
                    m.version,
                    m.first_step,
                    m.total_tgbs,
                    cur.version,
                    cur.first_step,
                    cur.total_tgbs
                ),
            ));
        }
        if let Some(last) = cur.tgbs.last() {
            let step = cur.total_tgbs.saturating_sub(1);
            let again = step
                .checked_sub(m.first_step)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| m.tgbs.get(i));
            if let Some(again) = again
                && again.key != last.key
            {
                return Err(ConsumerError::data(
                    &key,
                    format!(
                        "TGB step {step} is {} but was {} in version {}",
                        again.key, last.key, cur.version
                    ),
                ));
            }
        }
        self.current = Arc::new(m);
        Ok(true)
    }

    /// Adopts the newest version after `after`, found with one listing that starts after
    /// `manifest_key(after)`. Returns whether the current manifest moved.
    pub(crate) async fn jump_to_newest(&mut self, after: u64) -> Result<bool, ConsumerError> {
        for _ in 0..3 {
            let listed = self
                .store
                .list_after(MANIFEST_DIR, &manifest_key(after))
                .await?;
            let Some(newest) = listed
                .iter()
                .filter_map(|o| parse_manifest_key(&o.key))
                .max()
            else {
                return Ok(false);
            };
            if newest <= self.current.version {
                return Ok(false);
            }
            // The newest version is never deleted; a miss is a stale view: list again.
            if let Some(m) = self.read_version(newest).await? {
                return self.adopt(m);
            }
        }
        Ok(false)
    }

    /// Positions the tracker for a consumer that starts from version `version` (0 = a
    /// fresh consumer). Versions GC has deleted are skipped via the GC boundary.
    pub(crate) async fn start_at(&mut self, version: u64) -> Result<(), ConsumerError> {
        if version > 0
            && let Some(m) = self.read_version(version).await?
        {
            self.adopt(m)?;
            return Ok(());
        }
        let min_live = self
            .read_boundary()
            .await?
            .map_or(0, |b| b.min_live_version);
        if version == 0 && min_live <= 1 {
            // A fresh stream, or one whose version 1 is still there: poll from the start.
            return Ok(());
        }
        let after = version.max(min_live.saturating_sub(1));
        if !self.jump_to_newest(after).await? && version > 0 {
            return Err(ConsumerError::state(format!(
                "manifest version {version} of the checkpoint is missing and no newer version \
                 exists (GC boundary: min live version {min_live}); is this the right stream?"
            )));
        }
        Ok(())
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
        let clock = self.store.clock().clone();
        let start = clock.now();
        let mut waited = false;
        let mut backoff = poll_min;
        let mut misses = 0u32;
        while !covered(&self.current)? {
            let v = self.current.version;
            let advanced = if misses > 0 && misses.is_multiple_of(LIST_PROBE_EVERY) {
                self.jump_to_newest(v).await?
            } else {
                let next = v.checked_add(1).ok_or_else(|| {
                    ConsumerError::data(&manifest_key(v), "version number overflows")
                })?;
                match self.read_version(next).await? {
                    Some(m) => {
                        self.adopt(m)?;
                        if !covered(&self.current)? {
                            self.jump_to_newest(next).await?;
                        }
                        true
                    }
                    None => false,
                }
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
