//! Planted bugs for the deterministic simulation (`crates/sim`), which shows that its
//! invariants and the readers' rules catch each one. Test-only: nothing in the library
//! sets them.
//!
//! The switches are per thread (the simulation runs each seed on its own current-thread
//! runtime) and are read by a cooperative committer when it builds a candidate.

use std::cell::Cell;

/// Cooperative-commit bugs to plant; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlantedProducerBugs {
    /// Publish another producer's upload that skips a sequence (its `last_sequence + 2`
    /// while `+ 1` is not published).
    pub publish_gap: bool,
    /// Publish another producer's upload of an older epoch than its entry's (a fenced
    /// incarnation's leftover).
    pub publish_stale_epoch: bool,
    /// Publish other producers' uploads whatever their age (no `max_commit_age` check).
    pub skip_others_age_check: bool,
    /// Record other producers' epoch claims whatever their age (no check against the
    /// limit a claim key names).
    pub record_old_claims: bool,
    /// Record an epoch claim of the epoch an entry already holds, under another
    /// incarnation (the claim takes the epoch from its live holder).
    pub record_same_epoch_claims: bool,
}

thread_local! {
    static PLANTED: Cell<PlantedProducerBugs> = const { Cell::new(PlantedProducerBugs {
        publish_gap: false,
        publish_stale_epoch: false,
        skip_others_age_check: false,
        record_old_claims: false,
        record_same_epoch_claims: false,
    }) };
}

/// Plants `bugs` in cooperative commits built on this thread from now on; returns the
/// previous setting, to restore when done.
pub fn plant(bugs: PlantedProducerBugs) -> PlantedProducerBugs {
    PLANTED.with(|p| p.replace(bugs))
}

/// The bugs planted on this thread.
pub(crate) fn planted() -> PlantedProducerBugs {
    PLANTED.with(Cell::get)
}
