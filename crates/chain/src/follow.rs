//! [`Follower`]: the live version a client holds, and how it moves forward.
//!
//! ```text
//!  holds M(v) ── GET manifests/<v+1> ──NotFound──> not moved (the caller sleeps)
//!                        │ found
//!                        v
//!                 read the boundary B (after the version: see Chain::boundary)
//!                        │
//!        v+1 < B.min_live? ──yes──> deleted: list from B.min_live, adopt the newest
//!                        │ no
//!                        v
//!                 M(v+1) extends M(v)? ──no──> ChainError::Diverged, nothing adopted
//!                        │ yes
//!                        v
//!                     adopt M(v+1)
//! ```

use std::sync::Arc;

use batchweave_manifest::{GcBoundary, Manifest, check_extends};

use crate::{Chain, ChainError};

/// Where [`Follower::start_at`] landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At the version asked for.
    Exact,
    /// That version is deleted (missing, or below the boundary): at the newest live
    /// version instead, which holds every step the asked-for one held that GC kept.
    Newer,
    /// A fresh start on a stream with no live version yet (genesis held).
    Empty,
}

/// Reader checks a [`Follower`] can be told to skip: planted bugs for the deterministic
/// simulation (`crates/sim`), which shows that its invariants catch each one. Test-only:
/// nothing in the library sets them, and a follower starts with none.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlantedReaderBugs {
    /// Ignore the boundary: every read of it is taken as "GC never ran", so a version
    /// is adopted whatever the boundary says (a ghost below `min_live_version` is taken
    /// for live) and no step counts as reclaimed.
    pub skip_boundary: bool,
    /// Adopt a newer version without checking that it extends the one held.
    pub skip_extension: bool,
}

/// The newest live version a client has adopted. Never holds a version below the
/// boundary read after it, and every version it adopts extends the one before.
#[derive(Debug, Clone)]
pub struct Follower {
    chain: Chain,
    current: Arc<Manifest>,
    boundary: GcBoundary,
    /// When the boundary was last read (wall-clock milliseconds, which keep running
    /// across a host suspend), if ever.
    boundary_read_ms: Option<u64>,
    planted: PlantedReaderBugs,
}

impl Follower {
    /// A follower holding genesis (version 0).
    pub fn new(chain: Chain) -> Self {
        Self {
            chain,
            current: Arc::new(Manifest::genesis()),
            boundary: GcBoundary::default(),
            boundary_read_ms: None,
            planted: PlantedReaderBugs::default(),
        }
    }

    /// Test-only: plants reader bugs in this follower (see [`PlantedReaderBugs`]).
    #[doc(hidden)]
    pub fn plant(&mut self, bugs: PlantedReaderBugs) {
        self.planted = bugs;
    }

    /// Whether `version` is below the boundary `b` (never with the planted skip-boundary
    /// bug, whose boundary stays zero).
    fn below(&self, version: u64, b: &GcBoundary) -> bool {
        version < b.min_live_version
    }

    /// The chain it reads.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The version held.
    pub fn current(&self) -> &Arc<Manifest> {
        &self.current
    }

    /// The boundary as last read.
    pub fn boundary(&self) -> GcBoundary {
        self.boundary
    }

    /// How long ago the boundary was last read (by wall-clock time), `None` if never.
    /// A stale boundary is safe (it only moves forward, so it trims and reclaims less
    /// than it could); a writer that trims by it re-reads it when it is old.
    pub fn boundary_age(&self) -> Option<std::time::Duration> {
        let now = self.chain.store().clock().unix_millis();
        self.boundary_read_ms
            .map(|t| std::time::Duration::from_millis(now.saturating_sub(t)))
    }

    /// Re-reads the boundary (it only moves forward).
    pub async fn refresh_boundary(&mut self) -> Result<GcBoundary, ChainError> {
        let b = self.chain.boundary().await?;
        self.note(b);
        Ok(self.boundary)
    }

    fn note(&mut self, b: GcBoundary) {
        self.boundary_read_ms = Some(self.chain.store().clock().unix_millis());
        if self.planted.skip_boundary {
            return;
        }
        if crate::dominates(&b, &self.boundary) {
            self.boundary = b;
        }
    }

    /// Makes `m` the held version if it is newer and extends the held one; returns
    /// whether it moved. No I/O: the caller has established that `m` is live.
    pub fn adopt(&mut self, m: Manifest) -> Result<bool, ChainError> {
        if m.version <= self.current.version {
            return Ok(false);
        }
        if self.current.version > 0 && !self.planted.skip_extension {
            check_extends(&self.current, &m).map_err(|source| ChainError::Diverged {
                version: m.version,
                held: self.current.version,
                source,
            })?;
        }
        self.current = Arc::new(m);
        Ok(true)
    }

    /// Positions the follower for a client that starts from version `version` (0: a
    /// fresh client). A version that is missing or below the boundary is treated as
    /// deleted: the follower then holds the newest live version.
    pub async fn start_at(&mut self, version: u64) -> Result<Start, ChainError> {
        if version > 0 {
            let m = self.chain.read_version(version).await?;
            // After the read: a ghost created in a deleted slot is below this boundary.
            let b = self.refresh_boundary().await?;
            if let Some(m) = m
                && !self.below(m.version, &b)
            {
                self.adopt(m)?;
                return Ok(Start::Exact);
            }
        } else {
            let b = self.refresh_boundary().await?;
            if b.min_live_version <= 1 {
                // A fresh stream, or one whose version 1 is live: poll from the start.
                return Ok(Start::Empty);
            }
        }
        let from = version.max(self.boundary.min_live_version).max(1);
        if self.jump_from(from).await? {
            Ok(Start::Newer)
        } else {
            Ok(Start::Empty)
        }
    }

    /// Adopts the newest live version at or after `from`, found with one listing;
    /// returns whether the held version moved.
    pub async fn jump_from(&mut self, from: u64) -> Result<bool, ChainError> {
        let from = from.max(self.boundary.min_live_version).max(1);
        let Some(m) = self.chain.newest_from(from).await? else {
            return Ok(false);
        };
        if m.version <= self.current.version {
            return Ok(false);
        }
        let b = self.refresh_boundary().await?;
        if self.below(m.version, &b) {
            // GC moved past it while we read: the next call lists from the new boundary.
            return Ok(false);
        }
        if self.below(self.current.version, &b) {
            // The version held is deleted, and may be a ghost (a producer's base can be
            // one: `poll_cached` adopts without a fresh boundary read). Extension is a
            // property of the live chain: take the newest live version without comparing.
            self.current = Arc::new(m);
            return Ok(true);
        }
        self.adopt(m)
    }

    /// Like [`jump_from`](Self::jump_from) but trusts the boundary as last read instead of
    /// reading it again after the listing: for a producer, as with
    /// [`poll_cached`](Self::poll_cached) (a base below the real boundary makes the next
    /// create land below it or conflict, and the fresh boundary check after every create
    /// catches the first). Saves the boundary's round trips (a listing of its log and a
    /// GET) inside the producer's fragile window. If the listed version does not extend
    /// the one held, the boundary is read again and the jump redone with it, as
    /// [`poll_cached`](Self::poll_cached) does.
    pub async fn jump_from_cached(&mut self, from: u64) -> Result<bool, ChainError> {
        let from = from.max(self.boundary.min_live_version).max(1);
        let Some(m) = self.chain.newest_from(from).await? else {
            return Ok(false);
        };
        let b = self.boundary;
        if self.below(m.version, &b) {
            return self.jump_from(from).await;
        }
        match self.adopt(m) {
            Err(ChainError::Diverged { .. }) => {
                // The held version may be a ghost the cached boundary did not reveal:
                // decide with a fresh boundary, as `jump_from` does.
                self.refresh_boundary().await?;
                self.jump_from(from).await
            }
            other => other,
        }
    }

    /// One step forward: GET the next version; if it exists and is live, adopt it, and
    /// if it is below the boundary (deleted; a ghost may fill its slot) jump to the
    /// newest live version instead. Returns whether the held version moved.
    pub async fn poll(&mut self) -> Result<bool, ChainError> {
        self.poll_inner(true).await
    }

    /// Like [`poll`](Self::poll) but trusts the boundary as last read instead of reading
    /// it again: for a producer, whose every create is followed by a fresh boundary
    /// check anyway (a commit on a deleted base lands below the boundary and is caught
    /// there), so adopting a ghost base costs a retry, never a wrong commit.
    pub async fn poll_cached(&mut self) -> Result<bool, ChainError> {
        self.poll_inner(false).await
    }

    async fn poll_inner(&mut self, fresh: bool) -> Result<bool, ChainError> {
        let Some(next) = self.current.version.checked_add(1) else {
            return Ok(false);
        };
        let Some(m) = self.chain.read_version(next).await? else {
            return Ok(false);
        };
        let b = if fresh {
            self.refresh_boundary().await?
        } else {
            self.boundary
        };
        if self.below(m.version, &b) {
            return self.jump_from(b.min_live_version).await;
        }
        match self.adopt(m) {
            Err(e @ ChainError::Diverged { .. }) => {
                // The next version does not extend the one held. If the held one is
                // deleted (a producer's base adopted with a boundary read before a
                // suspend can be a ghost), the live chain goes on from the boundary;
                // otherwise a writer rewrote history and the error stands.
                let b = self.refresh_boundary().await?;
                if self.below(self.current.version, &b) {
                    return self.jump_from(b.min_live_version).await;
                }
                Err(e)
            }
            other => other,
        }
    }
}
