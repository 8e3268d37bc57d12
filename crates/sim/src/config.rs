//! What a simulation run may do ([`SimConfig`]) and what it reports ([`SimReport`]).

use std::ops::RangeInclusive;
use std::time::Duration;

/// A bug planted to show that the invariants catch it: in the simulated
/// object store (breaking the store contract the protocol relies on for
/// manifest versions), or, for [`SkipStateMapCheck`](Self::SkipStateMapCheck),
/// in the producer through its test hook [`FailPoint::SkipStateMapCheck`](batchweave_producer::FailPoint::SkipStateMapCheck).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum PlantedBug {
    /// A conditional create of a manifest version that already exists
    /// overwrites it instead of failing, with this probability (a store or
    /// proxy that ignores `If-None-Match`). Two producers then both "win"
    /// one version.
    CreateOverwrites {
        /// Probability per create of an existing manifest key, in `[0, 1]`.
        rate: f64,
    },
    /// A conditional create of a manifest version that already exists
    /// reports success without writing anything, with this probability (a
    /// reply that lies about the outcome: the lost/garbled-reply path). The
    /// producer believes it committed a batch that is in no version.
    FalseSuccess {
        /// Probability per create of an existing manifest key, in `[0, 1]`.
        rate: f64,
    },
    /// A read of the GC boundary object reports it missing, with this
    /// probability (a stale read of `gc/boundary`). A producer whose create
    /// landed in a version slot GC had emptied then misses the ghost check
    /// and believes it committed.
    StaleBoundary {
        /// Probability per read of `gc/boundary`, in `[0, 1]`.
        rate: f64,
    },
    /// The producer skips the state-map check after a lost or failed create
    /// reply (and when it absorbs commits it finds on refresh), so a batch
    /// whose create landed but whose reply was lost is sent again: a
    /// duplicate.
    SkipStateMapCheck,
}

/// The shape of the simulated world. Every random choice inside these bounds
/// is drawn from the run's seed; use `..Default::default()`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// How many producers (distinct ids) write to the stream.
    pub producers: RangeInclusive<usize>,
    /// How many consumer ranks (DP degree of the one consumer group).
    pub ranks: RangeInclusive<u32>,
    /// TGBs each producer must get committed (its quota of source offsets).
    pub tgbs_per_producer: RangeInclusive<u64>,
    /// Filler bytes of each slice after its self-describing header (small keeps the run fast).
    pub slice_bytes: RangeInclusive<usize>,
    /// Consumers checkpoint (and write their watermark) every K steps.
    pub checkpoint_every: RangeInclusive<u64>,
    /// Base probability of an injected store error per request (split over
    /// errors before and after the request takes effect, by operation).
    pub fault_rate: f64,
    /// Probability that a manifest read or listing is stale.
    pub stale_rate: f64,
    /// Probability per producer action that the producer process crashes.
    pub producer_crash_rate: f64,
    /// Probability per producer restart that the old incarnation is kept
    /// alive as a zombie that later tries to append and flush.
    pub zombie_rate: f64,
    /// Probability per producer incarnation that a fail point is armed.
    pub fail_point_rate: f64,
    /// Probability per consumed step that the consumer rank crashes and
    /// restores from its last checkpoint.
    pub consumer_crash_rate: f64,
    /// Probability that a producer joins late (after a random delay).
    pub late_join_rate: f64,
    /// Let a producer's `max_buffered` fall below its count policy's batch
    /// size (`fixed:K` with K above it, or `incr`). Off by default; it found
    /// a deadlock in `append` (full buffer, policy waiting for more data),
    /// fixed: a full buffer now forces a commit (regression seed in the tests).
    pub small_buffers: bool,
    /// Serve stale listings of `manifests/` too (the newest 1-3 entries
    /// missing, as an eventually consistent store would), with probability
    /// `stale_rate`. On by default. Stale listings used to trigger these
    /// bugs, fixed and kept as regression checks (stale GETs of manifests
    /// are always on):
    /// - a restarting producer opens on a stale base and fails with a
    ///   spurious `Fenced` (tolerated and retried unless `strict`);
    /// - a lost create reply resolved through a stale listing adopts a ghost
    ///   version (below the GC boundary) as its base and counts its own ghost
    ///   as committed (`no-ghost-commit`);
    /// - GC's orphan sweep trusts a stale newest version and deletes TGBs a
    ///   newer version made visible (`visible-object-present`).
    pub stale_listings: bool,
    /// Check that no version ends more than the committing incarnation's
    /// `max_lag` past the low-water mark in force (`max-lag`). On by default
    /// (it caught the producer computing its allowance before refreshing its
    /// base; fixed).
    pub check_max_lag: bool,
    /// Fail on producer errors instead of restarting the producer (on by
    /// default; it caught a spurious `Fenced` on open and `rebase` refusing a
    /// smaller retry after a lost reply, both fixed).
    pub strict: bool,
    /// Run GC passes concurrently with everything else.
    pub gc: bool,
    /// Probability that a GC pass runs with a store whose deletes fail
    /// (an interrupted pass).
    pub gc_interrupt_rate: f64,
    /// Producers' `max_commit_age`.
    pub max_commit_age: Duration,
    /// GC's orphan grace period (`None`: no orphan sweep). Must exceed
    /// `max_commit_age`.
    pub orphan_grace: Option<Duration>,
    /// Virtual time after which a run that has not finished is a liveness failure.
    pub deadline: Duration,
    /// A planted bug (in the simulated store, or the producer's state-map check).
    pub plant: Option<PlantedBug>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            producers: 2..=6,
            ranks: 2..=4,
            tgbs_per_producer: 3..=10,
            slice_bytes: 0..=32,
            checkpoint_every: 2..=5,
            fault_rate: 0.04,
            stale_rate: 0.05,
            producer_crash_rate: 0.04,
            zombie_rate: 0.3,
            fail_point_rate: 0.25,
            consumer_crash_rate: 0.03,
            late_join_rate: 0.3,
            small_buffers: false,
            stale_listings: true,
            check_max_lag: true,
            strict: true,
            gc: true,
            gc_interrupt_rate: 0.3,
            max_commit_age: Duration::from_secs(15),
            orphan_grace: Some(Duration::from_secs(30)),
            deadline: Duration::from_secs(4 * 3600),
            plant: None,
        }
    }
}

impl SimConfig {
    /// Checks the bounds; the message says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        let empty = |r: bool, what: &str| {
            if r {
                Err(format!("{what}: empty range"))
            } else {
                Ok(())
            }
        };
        empty(self.producers.is_empty(), "producers")?;
        empty(self.ranks.is_empty(), "ranks")?;
        empty(self.tgbs_per_producer.is_empty(), "tgbs_per_producer")?;
        empty(self.slice_bytes.is_empty(), "slice_bytes")?;
        empty(self.checkpoint_every.is_empty(), "checkpoint_every")?;
        if *self.producers.start() == 0 || *self.ranks.start() == 0 {
            return Err("need at least one producer and one rank".into());
        }
        if *self.checkpoint_every.start() == 0 || *self.tgbs_per_producer.start() == 0 {
            return Err("checkpoint_every and tgbs_per_producer start at 1".into());
        }
        if let Some(g) = self.orphan_grace
            && g <= self.max_commit_age
        {
            return Err("orphan_grace must exceed max_commit_age".into());
        }
        Ok(())
    }
}

/// What one successful run did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimReport {
    /// The root seed.
    pub seed: u64,
    /// Hash of the event log, the final manifest bytes, the final virtual
    /// clock and the last draw of the root RNG: equal for equal seeds.
    pub digest: u64,
    /// Producers in the run.
    pub producers: usize,
    /// Consumer ranks in the run.
    pub ranks: u32,
    /// Global steps committed (and read by every rank).
    pub steps: u64,
    /// Newest manifest version.
    pub versions: u64,
    /// Producer incarnations opened (first opens and restarts).
    pub incarnations: u64,
    /// Producer crashes (drops, fail points, stopped producers).
    pub producer_crashes: u64,
    /// Zombie incarnations that tried to commit after being fenced.
    pub zombies: u64,
    /// Consumer crashes followed by a restore.
    pub consumer_restores: u64,
    /// GC passes run (including interrupted ones).
    pub gc_passes: u64,
    /// GC passes that ended in an error (interrupted).
    pub gc_interrupted: u64,
    /// Producer creates that conflicted, summed over incarnations.
    pub conflicts: u64,
    /// Producer creates with an unknown outcome (lost replies and errors before).
    pub ambiguous: u64,
    /// Lost replies the producers recognised as their own commits.
    pub lost_replies_recovered: u64,
    /// Creates in a slot GC had emptied, recognised as ghosts.
    pub ghosts_prevented: u64,
    /// Objects GC deleted: (TGBs below the low-water mark, orphans, manifest versions).
    pub reclaimed: (u64, u64, u64),
    /// Store faults injected: (before, after, stale).
    pub faults: (u64, u64, u64),
    /// Times the planted bug changed a store reply.
    pub planted_hits: u64,
    /// Virtual time the run took, in milliseconds.
    pub virtual_ms: u64,
    /// Number of events in the log.
    pub events: usize,
}
