//! Producer statistics.

use std::time::Duration;

/// What a producer has done so far (cheap to read: a copy under a lock).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ProducerStats {
    /// Commit attempts (conditional creates sent), including the epoch claim, each counted
    /// once its outcome is resolved (a commit in the same update as its success), so a
    /// snapshot never counts the success of an attempt it does not count.
    pub attempts: u64,
    /// Attempts whose batch ended up in the chain (including recovered lost replies).
    pub successes: u64,
    /// Creates that found the version taken by another producer.
    pub conflicts: u64,
    /// Creates whose outcome was unknown (resolved by reading the chain).
    pub ambiguous: u64,
    /// Conflicts or ambiguous creates that turned out to be our own commit.
    pub lost_replies_recovered: u64,
    /// Creates that succeeded below the GC boundary and were treated as conflicts.
    pub ghost_commits_prevented: u64,
    /// TGBs uploaded by `append`.
    pub tgbs_appended: u64,
    /// Bytes uploaded by `append`.
    pub bytes_uploaded: u64,
    /// TGBs now visible in the chain.
    pub tgbs_committed: u64,
    /// Object bytes of the committed TGBs.
    pub bytes_committed: u64,
    /// Of `tgbs_committed`, the TGBs another producer's cooperative commit published.
    pub tgbs_published_by_others: u64,
    /// TGBs of other producers this producer's cooperative commits published.
    pub tgbs_published_for_others: u64,
    /// Epoch claim objects this producer wrote (`claims/`, cooperative policies): one per
    /// epoch it claimed.
    pub claim_objects: u64,
    /// Of this producer's epoch claims, those another producer's cooperative attempt
    /// recorded (the open returned without a create of its own).
    pub claims_recorded_by_others: u64,
    /// Other producers' epoch claims this producer's cooperative commits recorded.
    pub claims_recorded_for_others: u64,
    /// Times a ready commit waited because of `max_lag`.
    pub lag_waits: u64,
    /// Reads of the chain by a full buffer waiting for other producers to publish it
    /// (cooperative policies), instead of an attempt out of turn.
    pub full_buffer_reads: u64,
    /// Listings of `tgb/` behind cooperative attempts' offers.
    pub offer_listings: u64,
    /// Cooperative attempts that reused the listing of an attempt that conflicted less
    /// than a second before, instead of listing `tgb/` again.
    pub offer_listings_reused: u64,
    /// Current commit gap chosen by the policy.
    pub gap: Duration,
    /// The policy's estimate of the fragile window (DAC only).
    pub tau: Option<Duration>,
    /// Total time spent in conditional creates.
    pub commit_time: Duration,
    /// Producers in the state map of the newest version seen.
    pub producers_seen: usize,
    /// Newest version this producer committed or rebased on.
    pub version: u64,
    /// Source offset of the last committed TGB of this id.
    pub committed_offset: u64,
    /// Sequence of the last committed TGB of this id.
    pub last_sequence: u64,
}

impl ProducerStats {
    /// Fraction of attempts that committed, in `[0, 1]` (1 before any attempt).
    pub fn success_rate(&self) -> f64 {
        if self.attempts == 0 {
            1.0
        } else {
            self.successes as f64 / self.attempts as f64
        }
    }
}
