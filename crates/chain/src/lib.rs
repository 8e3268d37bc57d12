//! The one reader of a BatchWeave stream's manifest chain, and the one writer of its
//! GC boundary.
//!
//! Every client (producer, consumer, GC, the CLI) reads `manifests/` and the boundary
//! through this crate, so there is one answer to "which versions are live":
//!
//! * a version is read with bounded decoding and every per-version rule of
//!   docs/format.md section 4 ([`Chain::read_version`]); the object must say it is the
//!   version its key names;
//! * a version below the boundary's `min_live_version` is deleted, whatever the store
//!   still holds under its key (a stalled producer can fill a deleted slot: a ghost).
//!   [`Follower`] reads the boundary after every version it adopts and never adopts one
//!   below it;
//! * a newer version must extend the one held over their whole overlap
//!   ([`batchweave_manifest::check_extends`]); one that does not is refused with
//!   [`ChainError::Diverged`] and nothing from it is used;
//! * the newest version is found by a listing that starts at the boundary and is then
//!   confirmed by probing the next version numbers, so a stale listing never makes a
//!   reader take an older version for the newest ([`Chain::newest`]);
//! * the boundary is a log of create-only objects that only moves forward, whatever the
//!   number of concurrent reclaimers ([`Chain::advance_boundary`], module `boundary`).
//!
//! ```
//! # async fn demo() -> Result<(), batchweave_chain::ChainError> {
//! use batchweave_chain::{Chain, Follower};
//! use batchweave_manifest::{DecodeLimits, GcBoundary};
//! use batchweave_store::StreamStore;
//!
//! let chain = Chain::new(StreamStore::in_memory(), DecodeLimits::default());
//! assert_eq!(chain.newest().await?.version, 0); // an empty stream: genesis
//!
//! // Two reclaimers: the boundary takes the maximum of what they propose.
//! chain.advance_boundary(GcBoundary { min_live_version: 4, low_water_step: 2, ..Default::default() }).await?;
//! let b = chain.advance_boundary(GcBoundary { min_live_version: 3, low_water_step: 5, ..Default::default() }).await?;
//! assert_eq!((b.min_live_version, b.low_water_step), (4, 5));
//!
//! let mut f = Follower::new(chain);
//! assert!(!f.poll().await?); // nothing committed yet
//! # Ok(()) }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo()).unwrap();
//! ```

mod boundary;
mod error;
mod follow;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use batchweave_manifest::{
    DecodeLimits, HEADER_LEN, MANIFEST_DIR, Manifest, ManifestError, check_extends,
    decode_manifest, manifest_key, parse_manifest_key,
};
use batchweave_store::{StoreError, StreamStore};

pub use boundary::{
    BOUNDARY_DIR, BOUNDARY_KEEP, Boundary, boundary_key, dominates, parse_boundary_key,
};
pub use error::ChainError;
pub use follow::{Follower, PlantedReaderBugs, Start};

/// What a [`Chain`] has read, for statistics (manifest bytes per delivered byte).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChainStats {
    /// Manifest versions read (GETs that returned an object).
    pub manifests_read: u64,
    /// Bytes of those versions.
    pub manifest_bytes: u64,
    /// Boundary reads: each one listing of the boundary log, plus a GET of its newest
    /// entry unless that is the entry this chain already read (entries are create-only,
    /// so an index read once never needs reading again).
    pub boundary_reads: u64,
    /// Boundary reads that needed the GET of a log entry (the newest one listed was not
    /// known yet, or the stream has only the legacy object).
    pub boundary_gets: u64,
    /// Bytes of the boundary objects read.
    pub boundary_bytes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    manifests_read: AtomicU64,
    manifest_bytes: AtomicU64,
    boundary_reads: AtomicU64,
    boundary_bytes: AtomicU64,
    boundary_gets: AtomicU64,
    /// Highest boundary log index seen: listings start there.
    known_boundary: AtomicU64,
    /// The newest log entry read or written, with its value: a listing whose newest
    /// entry is this one needs no GET (see `Chain::read_boundary`).
    known_entry: std::sync::Mutex<Option<Boundary>>,
}

/// One stream's chain: a store handle and the decode limits. Cheap to clone; clones
/// share statistics.
#[derive(Debug, Clone)]
pub struct Chain {
    store: StreamStore,
    limits: DecodeLimits,
    counters: Arc<Counters>,
}

/// Attempts of a listing-based lookup before it gives up on a store that keeps listing
/// versions it cannot serve.
const LIST_ROUNDS: u32 = 5;

impl Chain {
    /// The chain of the stream in `store`, decoded within `limits`.
    pub fn new(store: StreamStore, limits: DecodeLimits) -> Self {
        Self {
            store,
            limits,
            counters: Arc::new(Counters::default()),
        }
    }

    /// The store handle.
    pub fn store(&self) -> &StreamStore {
        &self.store
    }

    /// The decode limits.
    pub fn limits(&self) -> &DecodeLimits {
        &self.limits
    }

    /// What this chain (and its clones) has read so far.
    pub fn stats(&self) -> ChainStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ChainStats {
            manifests_read: get(&self.counters.manifests_read),
            manifest_bytes: get(&self.counters.manifest_bytes),
            boundary_reads: get(&self.counters.boundary_reads),
            boundary_bytes: get(&self.counters.boundary_bytes),
            boundary_gets: get(&self.counters.boundary_gets),
        }
    }

    fn count_boundary_read(&self) {
        self.counters.boundary_reads.fetch_add(1, Ordering::Relaxed);
    }

    fn count_boundary_get(&self) {
        self.counters.boundary_gets.fetch_add(1, Ordering::Relaxed);
    }

    fn count_boundary_bytes(&self, n: usize) {
        self.counters
            .boundary_bytes
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    fn known_boundary(&self) -> u64 {
        self.counters.known_boundary.load(Ordering::Relaxed)
    }

    fn note_boundary(&self, index: u64) {
        self.counters
            .known_boundary
            .fetch_max(index, Ordering::Relaxed);
    }

    /// Remembers log entry `entry` (read, or created by this chain) if it is the
    /// highest index known.
    fn note_entry(&self, entry: Boundary) {
        self.note_boundary(entry.index);
        let mut known = self
            .counters
            .known_entry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if known.is_none_or(|k| k.index < entry.index) {
            *known = Some(entry);
        }
    }

    /// The value of log entry `index`, if it is the one remembered.
    fn known_entry(&self, index: u64) -> Option<Boundary> {
        let known = self
            .counters
            .known_entry
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        known.filter(|k| k.index == index)
    }

    /// Reads version `v`: `Ok(None)` if no object exists there (not yet, or deleted).
    /// The object is decoded within the limits, must pass every per-version rule, and
    /// must say it is version `v`. Whether `v` is live is the caller's question (see
    /// [`Follower`]).
    pub async fn read_version(&self, v: u64) -> Result<Option<Manifest>, ChainError> {
        let key = manifest_key(v);
        let limit = self.limits.max_bytes.saturating_add(HEADER_LEN as u64);
        let Some(bytes) = self.store.get_opt(&key, limit).await? else {
            return Ok(None);
        };
        self.counters.manifests_read.fetch_add(1, Ordering::Relaxed);
        self.counters
            .manifest_bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let m = decode_manifest(&bytes, &self.limits).map_err(|e| ChainError::corrupt(&key, e))?;
        if m.version != v {
            return Err(ChainError::corrupt(
                &key,
                ManifestError::Inconsistent {
                    reason: format!("the object says it is version {}", m.version),
                },
            ));
        }
        Ok(Some(m))
    }

    /// The newest version at or after `from` (0 or 1: from the start), if any: the
    /// newest one a listing shows (or version `from` itself when the listing shows
    /// none), then confirmed by probing the following version numbers (each must extend
    /// the one before), so that a stale listing never yields an older version than the
    /// newest. Callers pass `from >= min_live_version` as they last read it; when that
    /// view is stale, the listing can show a ghost (a version created in a deleted slot)
    /// whose successor does not extend it: the boundary is then read again, and the
    /// search starts over from it. A break in the chain above the boundary is
    /// [`ChainError::Diverged`].
    pub async fn newest_from(&self, from: u64) -> Result<Option<Manifest>, ChainError> {
        let mut from = from;
        for _ in 0..LIST_ROUNDS {
            let Some(m) = self.listed_newest(from).await? else {
                return Ok(None);
            };
            match self.probe_newer(m).await {
                Err(e @ ChainError::Diverged { held, .. }) => {
                    let live = self.boundary().await?.min_live_version;
                    if held >= live {
                        return Err(e);
                    }
                    // The version we stood on is deleted (a ghost may fill its slot):
                    // the live chain starts at the boundary.
                    from = live;
                }
                other => return other.map(Some),
            }
        }
        Err(ChainError::Store(StoreError::Unavailable {
            op: "list",
            path: MANIFEST_DIR.to_owned(),
            attempts: LIST_ROUNDS,
            source: "the boundary kept moving past the versions listed".into(),
        }))
    }

    /// The newest version a listing shows at or after `from` (version `from` itself
    /// when the listing shows none), unconfirmed.
    async fn listed_newest(&self, from: u64) -> Result<Option<Manifest>, ChainError> {
        for round in 0..LIST_ROUNDS {
            let after = manifest_key(from.saturating_sub(1));
            let listed = match self
                .store
                .list_after(MANIFEST_DIR.trim_end_matches('/'), &after)
                .await
            {
                Ok(l) => l,
                Err(StoreError::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            let Some(max) = listed
                .iter()
                .filter_map(|o| parse_manifest_key(&o.key))
                .filter(|v| *v >= from)
                .max()
            else {
                // Nothing listed: an empty stream, or a stale listing. One GET of
                // `from` tells them apart; the probe then finds the newest.
                return self.read_version(from.max(1)).await;
            };
            if let Some(m) = self.read_version(max).await? {
                return Ok(Some(m));
            }
            // Listed but not readable: deleted meanwhile or a stale listing.
            self.store
                .clock()
                .sleep(Duration::from_millis(5 << round))
                .await;
        }
        Ok(None)
    }

    /// Follows the versions after `m` with GETs while they exist; each must extend the
    /// one before.
    async fn probe_newer(&self, mut m: Manifest) -> Result<Manifest, ChainError> {
        while let Some(next) = match m.version.checked_add(1) {
            Some(v) => self.read_version(v).await?,
            None => None,
        } {
            check_extends(&m, &next).map_err(|source| ChainError::Diverged {
                version: next.version,
                held: m.version,
                source,
            })?;
            m = next;
        }
        Ok(m)
    }

    /// The newest version of the stream (genesis, version 0, if it has none), looked up
    /// from the boundary so that deleted history is never listed.
    pub async fn newest(&self) -> Result<Manifest, ChainError> {
        let b = self.boundary().await?;
        Ok(self
            .newest_from(b.min_live_version.max(1))
            .await?
            .unwrap_or_else(Manifest::genesis))
    }
}
