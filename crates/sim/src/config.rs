//! What a simulation run may do ([`SimConfig`]) and what it reports ([`SimReport`]).

use std::ops::RangeInclusive;
use std::time::Duration;

use batchweave_producer::{CoopParams, PolicyKind, SliceLayout};

/// Unix milliseconds the virtual clock starts at (2024-01-01T00:00:00Z).
pub(crate) const CLOCK_BASE_MS: u64 = 1_704_067_200_000;

/// A bug planted to show that the invariants catch it: in the simulated object store
/// (breaking the store contract the protocol relies on), in the producer through its test
/// hook [`FailPoint::SkipStateMapCheck`](batchweave_producer::FailPoint::SkipStateMapCheck),
/// or in the consumer through its test-only switches
/// (`batchweave_consumer::planted`, which reach the chain's `Follower::plant`).
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
    /// A listing of the boundary log misses its newest entry, with this probability
    /// (a stale read): the reader takes an older boundary for the current one.
    StaleBoundary {
        /// Probability per listing of `gc/boundaries/`, in `[0, 1]`.
        rate: f64,
    },
    /// The producer skips the state-map check after a lost or failed create
    /// reply (and when it absorbs commits it finds on refresh), so a batch
    /// whose create landed but whose reply was lost is sent again: a
    /// duplicate.
    SkipStateMapCheck,
    /// Consumers adopt a version whatever the boundary read after it says: a ghost (a
    /// version a stalled producer created in a slot GC deleted) is taken for live.
    SkipBoundaryCheck,
    /// The boundary log loses the monotone rule: every entry a reclaimer creates is
    /// rewritten, a moment after the reclaimer verified it (and deleted what it
    /// allows), with the lower entry below it, as a reclaimer that wrote its
    /// stale proposal instead of the merged maximum would; readers see the lower
    /// boundary until the next advance.
    LowerBoundary,
    /// Consumers adopt a newer version without checking that it extends the one they
    /// hold (a rewritten history is taken as it comes).
    SkipExtensionCheck,
    /// The TP/PP ranks of a position share one watermark `d{d}-c{c}` and the group
    /// layout records no TP/PP (the rule before per-rank marks): the last writer wins.
    SharedRankMark,
    /// A cooperative committer publishes another producer's upload that skips a sequence
    /// (its `last_sequence + 2` while `+ 1` is not published), through
    /// `batchweave_producer::planted`.
    PublishGap,
    /// A cooperative committer publishes another producer's upload of an older epoch than
    /// its entry's (a fenced incarnation's leftover or a zombie's upload).
    PublishStaleEpoch,
    /// A cooperative committer publishes other producers' uploads whatever their age (no
    /// `max_commit_age` check): uploads GC may already have swept as orphans.
    SkipOthersAgeCheck,
    /// A cooperative committer records other producers' epoch claims whatever their age
    /// (no check against the limit a claim key names): a crashed opener's claim fences its
    /// id's live incarnation long after.
    RecordOldClaims,
    /// A cooperative committer records an epoch claim of the epoch an entry already holds,
    /// under another incarnation (the claim takes the epoch from its live holder).
    RecordSameEpochClaims,
}

impl PlantedBug {
    /// Every plant with its `sim --plant` name (store plants at rate 0.5).
    pub const NAMED: [(&'static str, PlantedBug); 13] = [
        ("overwrite", PlantedBug::CreateOverwrites { rate: 0.5 }),
        ("false-success", PlantedBug::FalseSuccess { rate: 0.5 }),
        ("stale-boundary", PlantedBug::StaleBoundary { rate: 0.5 }),
        ("skip-state-map-check", PlantedBug::SkipStateMapCheck),
        ("skip-boundary-check", PlantedBug::SkipBoundaryCheck),
        ("lower-boundary", PlantedBug::LowerBoundary),
        ("skip-extension-check", PlantedBug::SkipExtensionCheck),
        ("shared-rank-mark", PlantedBug::SharedRankMark),
        ("publish-gap", PlantedBug::PublishGap),
        ("publish-stale-epoch", PlantedBug::PublishStaleEpoch),
        ("skip-others-age-check", PlantedBug::SkipOthersAgeCheck),
        ("record-old-claims", PlantedBug::RecordOldClaims),
        (
            "record-same-epoch-claims",
            PlantedBug::RecordSameEpochClaims,
        ),
    ];

    /// The plant named `name` on the `sim` command line.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p)
    }

    /// The `sim --plant` name of this plant, if it has one.
    pub fn name(&self) -> Option<&'static str> {
        Self::NAMED.iter().find(|(_, p)| p == self).map(|(n, _)| *n)
    }
}

/// The shape of the simulated world. Every random choice inside these bounds
/// is drawn from the run's seed; use `..Default::default()`.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// How many producers (distinct ids) write to the stream.
    pub producers: RangeInclusive<usize>,
    /// DP degree of each consumer group.
    pub ranks: RangeInclusive<u32>,
    /// How many consumer groups read the stream (each with its own mesh, checkpoint
    /// interval and watermarks). The first reads to the end.
    pub groups: RangeInclusive<usize>,
    /// Probability that a group other than the first stops reading early and is
    /// retired (`Reclaimer::retire_group`) as soon as its ranks stopped.
    pub retire_rate: f64,
    /// Draw the stream's TGB grid (D_t in 1..=4, C_t in 1..=2) independently of the
    /// groups' grids, so consumers remap (DP and CP ratios both ways). Off: the TGB
    /// grid is the first group's `DP x CP`.
    pub remap: bool,
    /// Let groups run with TP and PP up to 2: several ranks per position, each with its
    /// own watermark, crashing and restoring independently.
    pub tp_pp: bool,
    /// TGBs each producer must get committed (its quota of source offsets).
    pub tgbs_per_producer: RangeInclusive<u64>,
    /// Filler bytes of each slice after its self-describing header (small keeps the run fast).
    pub slice_bytes: RangeInclusive<usize>,
    /// Consumers checkpoint (and write their watermark) every K steps (drawn per group).
    pub checkpoint_every: RangeInclusive<u64>,
    /// Restore probes per run (at most): a rank's older checkpoint, or a checkpoint at a
    /// version whose slot a ghost fills, restored (at the same or another DP) in a group
    /// of its own that is retired afterwards; the batches must be the live chain's or
    /// `DataReclaimed`, never anything else.
    pub probes: u32,
    /// Base probability of an injected store error per request (split over
    /// errors before and after the request takes effect, by operation).
    pub fault_rate: f64,
    /// Probability that a manifest read or listing is stale.
    pub stale_rate: f64,
    /// Probability that a read of an overwritten watermark or group layout returns the
    /// bytes it held before its last overwrite (a stale read of an overwritten object).
    pub stale_overwrite_rate: f64,
    /// Probability per conditional create (manifest versions and boundary log entries)
    /// that the client gives up with a transport error while the create takes effect
    /// later, up to [`max_create_delay`](Self::max_create_delay) after it was sent.
    pub delayed_create_rate: f64,
    /// Longest delay of such a create.
    pub max_create_delay: Duration,
    /// Largest offset of a host's wall clock from the store's (each producer
    /// incarnation and each reclaimer runs on a host of its own; a restarted producer
    /// keeps its host or moves to a new one).
    pub max_clock_skew: Duration,
    /// Probability per producer incarnation that its host is suspended once (its wall
    /// clock keeps running, its monotonic clock stops, its requests and replies wait):
    /// short suspends leave it with a stale base (ghost creates), long ones outlast
    /// `max_commit_age`.
    pub suspend_rate: f64,
    /// Probability per producer action that the producer process crashes.
    pub producer_crash_rate: f64,
    /// Probability per producer restart that the old incarnation is kept
    /// alive as a zombie that later tries to append and flush.
    pub zombie_rate: f64,
    /// Probability per producer incarnation that a fail point is armed.
    pub fail_point_rate: f64,
    /// Every producer incarnation runs this commit policy (`sim --policy NAME`); `None`:
    /// each draws one from the mix (`naive`, `fixed:1-3`, `aimd`, `incr`, `dac` and, at
    /// [`coop_share`](Self::coop_share), `coop`). A forced `coop` runs with the run's
    /// [`CoopParams`] whatever the variant holds (see [`coop_params`](Self::coop_params)).
    pub policy: Option<PolicyKind>,
    /// Probability per producer incarnation of the mix that it runs the cooperative
    /// policy `coop` (whose commits also publish other producers' uploads).
    pub coop_share: f64,
    /// Probability per run that every producer incarnation runs `coop` (a cooperative
    /// stream), whatever the mix draws.
    pub all_coop_rate: f64,
    /// The cooperative cadence's parameters; `None`: drawn per run (round interval
    /// 50 ms - 1 s, 1-3 fragile windows, jitter 0-1), so runs explore other interleavings.
    pub coop_params: Option<CoopParams>,
    /// Probability per cooperative incarnation of an extra fail point: a crash before
    /// the create of its 2nd-6th commit attempt, after the attempt listed `tgb/` and
    /// built its candidate (a committer dying between its listing and its create).
    pub coop_crash_rate: f64,
    /// Probability per cooperative incarnation that its host stalls for 5-40 s when the
    /// reply to one of its first listings of `tgb/` arrives: between that attempt's
    /// listing and its create, while GC may sweep what the candidate holds.
    pub listing_stall_rate: f64,
    /// Probability per cooperative run that commit ages are short: every incarnation's
    /// `max_commit_age` is drawn from 0.5 s up to the run's 1.5-6 s, and GC's orphan grace
    /// is only just above the longest (the least [`orphan_grace`](Self::orphan_grace)'s
    /// rule allows, plus 0-3 s), so uploads of crashed producers, and uploads nobody
    /// published in time, become old enough to be swept while the run goes on.
    pub short_age_rate: f64,
    /// Probability per producer crash that the process stays down for 5-40 s (instead of
    /// at most 2 s) before it restarts: its uploads wait for cooperative committers (or
    /// for the orphan sweep) at an epoch nobody fenced yet.
    pub long_down_rate: f64,
    /// TGBs a zombie appends (each uploaded under its fenced epoch, so cooperative
    /// committers list them) before it flushes.
    pub zombie_uploads: RangeInclusive<u64>,
    /// Serve stale listings of `tgb/` (drawn per run, up to 30% of listings each): a
    /// listing that misses some objects written within the last 50 ms - 3 s, and a
    /// listing that still shows objects deleted within the last 50 ms - 3 s (a swept
    /// orphan still listed).
    pub tgb_stale_listings: bool,
    /// Every consumer rank's [`footer_lookahead`]: footers of steps after those in
    /// flight read in the background. 0 by default, so that the consumers' requests,
    /// and with them the schedules the seeds in docs/reliability.md name, stay as they
    /// were before the lookahead existed; `sim --footer-lookahead N` and the seed test
    /// `footer_lookahead_seeds_hold_every_invariant` run with it.
    ///
    /// [`footer_lookahead`]: batchweave_consumer::ConsumerSettings::footer_lookahead
    pub footer_lookahead: usize,
    /// Every producer's [`slice_layout`]. [`SliceLayout::Packed`] by default (TGB format
    /// version 1: footer, then slice), so that the object sizes, and with them the
    /// schedules the seeds in docs/reliability.md name, stay as they were before sealed
    /// TGBs existed; `sim --sealed` and the seed test `sealed_seeds_hold_every_invariant`
    /// run with [`SliceLayout::Sealed`] (the producers' default for equal slices; the
    /// simulation's slices vary, so every slot is padded).
    ///
    /// [`slice_layout`]: batchweave_producer::ProducerSettings::slice_layout
    pub slice_layout: SliceLayout,
    /// Probability per consumed step that the consumer rank crashes and
    /// restores from its last checkpoint.
    pub consumer_crash_rate: f64,
    /// Probability that a producer joins late (after a random delay).
    pub late_join_rate: f64,
    /// Probability per run that every producer incarnation uses the same `max_lag`, so
    /// that storage has a bound (`storage-bound`, checked after every complete GC pass).
    pub uniform_lag_rate: f64,
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
    /// Serve stale GETs of manifest versions to the reclaimers too (producers and
    /// consumers always get them). On by default. Off, GC's view of the newest version
    /// is always fresh; on, it found a bug, fixed and kept as a regression check
    /// (`crates/sim/tests/seeds.rs::orphan_sweep_after_a_stale_probe_deletes_nothing_live`):
    /// a stale GET ended GC's search for the newest version early and the orphan sweep
    /// deleted TGBs that the versions it missed had made visible. The sweep now deletes
    /// only what the version it read proves to be an orphan.
    pub gc_stale_reads: bool,
    /// Run GC passes concurrently with everything else.
    pub gc: bool,
    /// How many reclaimers run passes concurrently (each on its own host clock).
    pub reclaimers: RangeInclusive<usize>,
    /// Probability that a GC pass runs with a store whose deletes fail
    /// (an interrupted pass).
    pub gc_interrupt_rate: f64,
    /// Producers' `max_commit_age`.
    pub max_commit_age: Duration,
    /// GC's orphan grace period (`None`: no orphan sweep). Must exceed
    /// `max_commit_age + 2 * max_clock_skew + max_create_delay` (the margin GC is
    /// given is what is left of it, less one second).
    pub orphan_grace: Option<Duration>,
    /// At the end of the run, a rogue writer creates a version after the newest that
    /// appends a TGB but rewrites a retained step; a rank restored at the end of the
    /// live chain must refuse it (`forged-refused`).
    pub forger: bool,
    /// Virtual time after which a run that has not finished is a liveness failure.
    pub deadline: Duration,
    /// A planted bug (see [`PlantedBug`]).
    pub plant: Option<PlantedBug>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            producers: 2..=6,
            ranks: 1..=4,
            groups: 1..=3,
            retire_rate: 0.5,
            remap: true,
            tp_pp: true,
            tgbs_per_producer: 3..=10,
            slice_bytes: 0..=32,
            checkpoint_every: 2..=5,
            probes: 6,
            fault_rate: 0.04,
            stale_rate: 0.05,
            stale_overwrite_rate: 0.1,
            delayed_create_rate: 0.03,
            max_create_delay: Duration::from_secs(5),
            max_clock_skew: Duration::from_secs(2),
            suspend_rate: 0.2,
            producer_crash_rate: 0.04,
            zombie_rate: 0.3,
            fail_point_rate: 0.25,
            policy: None,
            footer_lookahead: 0,
            slice_layout: SliceLayout::Packed,
            coop_share: 0.35,
            all_coop_rate: 0.25,
            coop_params: None,
            coop_crash_rate: 0.3,
            listing_stall_rate: 0.15,
            short_age_rate: 0.5,
            long_down_rate: 0.2,
            zombie_uploads: 1..=3,
            tgb_stale_listings: true,
            consumer_crash_rate: 0.03,
            late_join_rate: 0.3,
            uniform_lag_rate: 0.5,
            small_buffers: false,
            stale_listings: true,
            check_max_lag: true,
            strict: true,
            gc_stale_reads: true,
            gc: true,
            reclaimers: 1..=2,
            gc_interrupt_rate: 0.3,
            max_commit_age: Duration::from_secs(15),
            orphan_grace: Some(Duration::from_secs(30)),
            forger: true,
            deadline: Duration::from_secs(4 * 3600),
            plant: None,
        }
    }
}

impl SimConfig {
    /// The world before cooperative commits: no `coop` producers and none of the faults
    /// aimed at them (stale listings of `tgb/`, short commit ages, long downtimes, zombies
    /// uploading more than once). Those draw from random streams of their own, so with
    /// them off a seed runs the schedule it ran before they existed: the regression seeds
    /// found in that world replay it.
    pub fn without_coop() -> Self {
        Self {
            coop_share: 0.0,
            all_coop_rate: 0.0,
            coop_crash_rate: 0.0,
            listing_stall_rate: 0.0,
            short_age_rate: 0.0,
            long_down_rate: 0.0,
            zombie_uploads: 1..=1,
            tgb_stale_listings: false,
            ..Self::default()
        }
    }

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
        empty(self.groups.is_empty(), "groups")?;
        empty(self.reclaimers.is_empty(), "reclaimers")?;
        empty(self.tgbs_per_producer.is_empty(), "tgbs_per_producer")?;
        empty(self.slice_bytes.is_empty(), "slice_bytes")?;
        empty(self.checkpoint_every.is_empty(), "checkpoint_every")?;
        empty(self.zombie_uploads.is_empty(), "zombie_uploads")?;
        if *self.zombie_uploads.start() == 0 {
            return Err("zombie_uploads starts at 1".into());
        }
        if let Some(p) = &self.policy {
            p.validate().map_err(|e| format!("policy: {e}"))?;
        }
        if let Some(p) = &self.coop_params {
            p.validate().map_err(|e| format!("coop_params: {e}"))?;
        }
        if *self.producers.start() == 0 || *self.ranks.start() == 0 || *self.groups.start() == 0 {
            return Err("need at least one producer, one group and DP 1".into());
        }
        if *self.ranks.end() > 8 {
            return Err("ranks: DP above 8 is not simulated".into());
        }
        if *self.checkpoint_every.start() == 0 || *self.tgbs_per_producer.start() == 0 {
            return Err("checkpoint_every and tgbs_per_producer start at 1".into());
        }
        if let Some(g) = self.orphan_grace
            && g <= self.max_commit_age + self.max_clock_skew * 2 + self.max_create_delay
        {
            return Err(
                "orphan_grace must exceed max_commit_age + 2 * max_clock_skew + max_create_delay"
                    .into(),
            );
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
    /// The stream's TGB grid `(D_t, C_t)`.
    pub tgb_grid: (u32, u32),
    /// Consumer groups: `(DP, CP, TP, PP)` of each.
    pub groups: Vec<(u32, u32, u32, u32)>,
    /// Consumer ranks in the run (over all groups, probes not counted).
    pub ranks: u32,
    /// Groups retired after stopping early.
    pub retired: u64,
    /// Global steps committed.
    pub steps: u64,
    /// Newest manifest version.
    pub versions: u64,
    /// Producer incarnations opened (first opens and restarts).
    pub incarnations: u64,
    /// Producer crashes (drops, fail points, stopped producers).
    pub producer_crashes: u64,
    /// Zombie incarnations that tried to commit after being fenced.
    pub zombies: u64,
    /// Producer hosts suspended.
    pub suspends: u64,
    /// Consumer crashes followed by a restore.
    pub consumer_restores: u64,
    /// Restore probes run: (in all, at a ghost slot, with another DP, answered `DataReclaimed`).
    pub probes: (u64, u64, u64, u64),
    /// Reclaimers that ran passes concurrently.
    pub reclaimers: usize,
    /// GC passes run (including interrupted ones).
    pub gc_passes: u64,
    /// GC passes that ended in an error (interrupted).
    pub gc_interrupted: u64,
    /// Deletions of TGB objects and manifest versions checked against the live marks.
    pub gc_deletes_checked: u64,
    /// `storage-bound` checks made (after complete GC passes of uniform-lag runs).
    pub storage_checks: u64,
    /// Producer creates that conflicted, summed over incarnations.
    pub conflicts: u64,
    /// Producer creates with an unknown outcome (lost replies and errors before).
    pub ambiguous: u64,
    /// Lost replies the producers recognised as their own commits.
    pub lost_replies_recovered: u64,
    /// Creates in a slot GC had emptied, recognised as ghosts.
    pub ghosts_prevented: u64,
    /// Manifest creates that landed in a slot GC had emptied (ghosts), by anyone.
    pub ghosts_written: u64,
    /// Creates that took effect after the client had given up on them.
    pub delayed_creates: u64,
    /// Objects GC deleted: (TGBs below the low-water mark, orphans, manifest versions).
    pub reclaimed: (u64, u64, u64),
    /// Store faults injected: (before, after, stale).
    pub faults: (u64, u64, u64),
    /// Stale reads of overwritten watermarks and layouts served.
    pub stale_overwrites: u64,
    /// Times the planted bug changed a store reply.
    pub planted_hits: u64,
    /// What the run did with cooperative commits and the faults aimed at them.
    pub coop: CoopReport,
    /// Virtual time the run took, in milliseconds.
    pub virtual_ms: u64,
    /// Number of events in the log.
    pub events: usize,
}

/// Cooperative commits in one run, and the faults aimed at them (each counted where it
/// happened; the backend's counts are ground truth, not what a process believed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoopReport {
    /// Producer incarnations that ran the cooperative policy.
    pub incarnations: u64,
    /// The round interval of the run's cooperative cadence, in milliseconds.
    pub interval_ms: u64,
    /// Every incarnation of the run was cooperative.
    pub all_coop: bool,
    /// Commit ages were short in this run: the longest `max_commit_age` and the orphan
    /// grace, in milliseconds.
    pub short_ages: Option<(u64, u64)>,
    /// Live versions that published other producers' TGBs.
    pub versions: u64,
    /// TGBs those versions published for other producers.
    pub published_for_others: u64,
    /// Epoch claims live cooperative versions recorded for other producers (claim objects
    /// of `claims/`, `docs/protocol.md` section 14).
    pub claims_recorded: u64,
    /// Cooperative openers that crashed right after writing their claim object, before
    /// claiming themselves (others may record the claim of a process that is gone).
    pub crashes_after_claim_object: u64,
    /// Fault (a): cooperative committers that crashed between their listing of `tgb/`
    /// and their create (fail point `BeforeCreate` once they had uploaded).
    pub crashes_after_listing: u64,
    /// Fault (b): a producer fenced while another was publishing its TGBs: candidates
    /// that published a producer's uploads and lost their slot to a version that holds it
    /// at a newer epoch (the claim of its restart, or a later version).
    pub fenced_while_published: u64,
    /// Fault (b): claims of a newer epoch while uploads of the older one beyond its entry
    /// were stored (leftovers a cooperative committer could have published).
    pub fenced_with_uploads: u64,
    /// Producer crashes followed by a long downtime (5-40 s) before the restart.
    pub long_downs: u64,
    /// Fault (d): cooperative committers whose host stalled 5-40 s between a listing of
    /// `tgb/` and its create.
    pub listing_stalls: u64,
    /// Fault (c): uploads of an epoch that was already fenced (zombies that keep
    /// uploading), and listings of `tgb/` that showed at least one of them.
    pub zombie_uploads: (u64, u64),
    /// Fault (d): candidates (created or refused) that held a TGB GC had deleted before
    /// the create took effect (a created one is a violation).
    pub swept_while_held: u64,
    /// Fault (e): stale listings of `tgb/`: (missing objects written within the window,
    /// showing objects deleted within the window).
    pub stale_listings: (u64, u64),
    /// Deleted objects those stale listings showed.
    pub deleted_listed: u64,
}
