//! The GC boundary as a log of create-only objects, so that it only ever moves forward.
//!
//! ```text
//!  gc/boundaries/00000000000000000001.boundary   {min_live 4, low_water 2}
//!  gc/boundaries/00000000000000000002.boundary   {min_live 9, low_water 7}   <- newest wins
//! ```
//!
//! A writer reads the newest entry `n`, merges its proposal into it (the maximum of each
//! field) and creates entry `n + 1` with If-None-Match. Two writers that read the same
//! `n` race for one key and exactly one wins; the loser reads the winner and merges
//! again. Every entry therefore dominates the one it was built on, and readers take the
//! entry with the highest index. A writer that read a stale `n` and finds the slot
//! `n + 1` empty (an old entry that was pruned) creates an entry below the newest one:
//! readers never look at it, and the writer sees after its create that the newest entry
//! does not yet hold its proposal, and merges again. [`Chain::advance_boundary`]
//! returns only once the newest entry holds the proposal.
//!
//! This needs nothing but the conditional create that the manifest chain already needs,
//! so it is the same on S3, GCS, Azure and the local directory (which has no
//! conditional update). A stream written before this scheme has a single overwritten
//! `gc/boundary` object; it is read while no entry exists, and the first entry merges it.

use std::time::Duration;

use batchweave_manifest::{GC_BOUNDARY_KEY, GcBoundary, decode_gc_boundary, encode_gc_boundary};
use batchweave_store::StoreError;

use crate::{Chain, ChainError};

/// Folder of the boundary log, relative to the stream prefix.
pub const BOUNDARY_DIR: &str = "gc/boundaries/";
const BOUNDARY_SUFFIX: &str = ".boundary";
/// Largest boundary object accepted.
const BOUNDARY_LIMIT: u64 = 64 * 1024;
/// Entries kept below the newest when the log is pruned.
pub const BOUNDARY_KEEP: u64 = 8;
/// Rounds of a boundary read or write before giving up on a store that keeps changing
/// (or keeps listing objects it cannot serve).
const ROUNDS: u32 = 16;

/// Key of boundary log entry `index`: `gc/boundaries/<index:020>.boundary`.
pub fn boundary_key(index: u64) -> String {
    format!("{BOUNDARY_DIR}{index:020}{BOUNDARY_SUFFIX}")
}

/// The exact inverse of [`boundary_key`].
pub fn parse_boundary_key(key: &str) -> Option<u64> {
    let digits = key
        .strip_prefix(BOUNDARY_DIR)?
        .strip_suffix(BOUNDARY_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The newest boundary and the log entry it was read from (0: no entry yet; the value
/// is then the legacy `gc/boundary` object's, or zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Boundary {
    /// Index of the log entry (0 if the log is empty).
    pub index: u64,
    /// The boundary.
    pub value: GcBoundary,
}

/// Whether `a` holds at least what `b` holds (informational time ignored).
pub fn dominates(a: &GcBoundary, b: &GcBoundary) -> bool {
    a.min_live_version >= b.min_live_version && a.low_water_step >= b.low_water_step
}

impl Chain {
    /// The newest boundary (zero if GC never ran). Readers call this *after* reading a
    /// version they want to trust: GC makes the boundary durable before it deletes, so a
    /// version created in a deleted slot is always below the boundary read after it.
    pub async fn boundary(&self) -> Result<GcBoundary, ChainError> {
        Ok(self.read_boundary().await?.value)
    }

    /// The newest boundary with its log index.
    pub async fn read_boundary(&self) -> Result<Boundary, ChainError> {
        self.count_boundary_read();
        for round in 0..ROUNDS {
            let from = self.known_boundary();
            // Everything from the newest index known on (that one included).
            let after = boundary_key(from.saturating_sub(1));
            let listed = match self
                .store
                .list_after(BOUNDARY_DIR.trim_end_matches('/'), &after)
                .await
            {
                Ok(l) => l,
                Err(StoreError::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(e.into()),
            };
            let Some(newest) = listed
                .iter()
                .filter_map(|o| parse_boundary_key(&o.key))
                .max()
            else {
                if from > 0 {
                    // Entries we saw are gone and none is newer: a stale listing.
                    self.backoff(round).await;
                    continue;
                }
                return self.read_legacy().await;
            };
            if let Some(known) = self.known_entry(newest) {
                // The newest entry is one already read (or written) here: its value is
                // the one read then. An index holds a different value only after it was
                // pruned and created again by a stale writer, and pruning needs newer
                // entries that are never all deleted, so such an index is never the
                // newest one listed (and a stale listing shows a past newest entry,
                // whose value was this one).
                return Ok(known);
            }
            let key = boundary_key(newest);
            self.count_boundary_get();
            match self.store.get_opt(&key, BOUNDARY_LIMIT).await? {
                Some(bytes) => {
                    self.count_boundary_bytes(bytes.len());
                    let value = decode_gc_boundary(&bytes, &self.limits)
                        .map_err(|e| ChainError::corrupt(&key, e))?;
                    let entry = Boundary {
                        index: newest,
                        value,
                    };
                    self.note_entry(entry);
                    return Ok(entry);
                }
                // Listed but gone (pruned meanwhile, or a stale listing): list again.
                None => self.backoff(round).await,
            }
        }
        Err(ChainError::Store(StoreError::Unavailable {
            op: "list",
            path: BOUNDARY_DIR.to_owned(),
            attempts: ROUNDS,
            source: "the boundary log kept changing while it was read".into(),
        }))
    }

    async fn read_legacy(&self) -> Result<Boundary, ChainError> {
        self.count_boundary_get();
        let value = match self.store.get_opt(GC_BOUNDARY_KEY, BOUNDARY_LIMIT).await? {
            Some(b) => {
                self.count_boundary_bytes(b.len());
                decode_gc_boundary(&b, &self.limits)
                    .map_err(|e| ChainError::corrupt(GC_BOUNDARY_KEY, e))?
            }
            None => GcBoundary::default(),
        };
        Ok(Boundary { index: 0, value })
    }

    /// Makes the boundary hold at least `proposal` (the maximum of each field), and
    /// returns the durable boundary, which does. Safe with any number of concurrent
    /// writers: the boundary never moves back. Only after this returns may anything
    /// below `proposal` be deleted.
    pub async fn advance_boundary(&self, proposal: GcBoundary) -> Result<GcBoundary, ChainError> {
        for round in 0..ROUNDS {
            let cur = self.read_boundary().await?;
            if dominates(&cur.value, &proposal) {
                return Ok(cur.value);
            }
            let merged = GcBoundary {
                min_live_version: cur.value.min_live_version.max(proposal.min_live_version),
                low_water_step: cur.value.low_water_step.max(proposal.low_water_step),
                updated_at_ms: proposal.updated_at_ms.max(cur.value.updated_at_ms),
            };
            let index = cur.index.checked_add(1).ok_or_else(|| {
                ChainError::corrupt(
                    &boundary_key(cur.index),
                    batchweave_manifest::ManifestError::Inconsistent {
                        reason: "boundary log index overflows".to_owned(),
                    },
                )
            })?;
            match self
                .store
                .create(&boundary_key(index), encode_gc_boundary(&merged))
                .await
            {
                // Landed (or, for Ambiguous, may have): the next round reads the newest
                // entry and returns once it holds the proposal.
                Ok(()) => self.note_entry(Boundary {
                    index,
                    value: merged,
                }),
                Err(StoreError::Conflict { .. } | StoreError::Ambiguous { .. }) => {
                    self.backoff(round).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(ChainError::Store(StoreError::Unavailable {
            op: "create",
            path: BOUNDARY_DIR.to_owned(),
            attempts: ROUNDS,
            source: "other writers kept winning the boundary log".into(),
        }))
    }

    /// Deletes boundary log entries more than [`BOUNDARY_KEEP`] below the newest (and the
    /// legacy object once the log exists). Returns how many were deleted.
    pub async fn prune_boundaries(&self) -> Result<u64, ChainError> {
        let newest = self.read_boundary().await?;
        if newest.index == 0 {
            return Ok(0);
        }
        let mut n = 0;
        for o in self.store.list(BOUNDARY_DIR.trim_end_matches('/')).await? {
            if parse_boundary_key(&o.key)
                .is_some_and(|i| i.saturating_add(BOUNDARY_KEEP) < newest.index)
            {
                self.store.delete(&o.key).await?;
                n += 1;
            }
        }
        Ok(n)
    }

    async fn backoff(&self, round: u32) {
        self.store
            .clock()
            .sleep(Duration::from_millis(5u64 << round.min(8)))
            .await;
    }
}
