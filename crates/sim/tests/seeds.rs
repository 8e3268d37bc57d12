//! The CI seed budget (the default mix, and a cooperative stream), the determinism
//! self-test, the planted-bug checks and the bugs the simulation found (each a
//! regression seed, run in the world it was found in and in today's).
//!
//! Replay one seed: `BATCHWEAVE_SIM_SEED=N cargo test -p batchweave-sim --test seeds replay -- --nocapture`
//! (or `cargo run -p batchweave-sim --release --bin sim -- --seed N --trace`).

use batchweave_producer::SliceLayout;
use batchweave_sim::{PlantedBug, SimConfig, SimFailure, SimReport, run};

/// Seeds `cargo test` runs.
const CI_SEEDS: u64 = 400;

/// Seeds of a cooperative stream (`sim --policy coop`) `cargo test` runs.
const COOP_SEEDS: u64 = 300;

/// Seeds within which a planted bug must be caught.
const PLANT_BUDGET: u64 = 100;

fn fail(f: &SimFailure) -> ! {
    for line in f.trace() {
        eprintln!("  {line}");
    }
    panic!("{f}");
}

#[test]
fn ci_seeds_hold_every_invariant() {
    let cfg = SimConfig::default();
    let mut t = Totals::default();
    for seed in 0..CI_SEEDS {
        match run(seed, &cfg) {
            Ok(r) => t.add(&r),
            Err(f) => fail(&f),
        }
    }
    // The schedule really exercised the interesting paths.
    assert!(t.steps > CI_SEEDS * 10, "only {} steps", t.steps);
    assert!(
        t.restores > 0 && t.zombies > 0 && t.lost > 0,
        "restores {}, zombies {}, lost replies {}",
        t.restores,
        t.zombies,
        t.lost
    );
    eprintln!("{t:?}");
    let exercised = [
        ("remapped groups", t.remapped),
        ("groups with TP or PP above 1", t.tp_pp),
        ("several groups", t.multi_group),
        ("retired groups", t.retired),
        ("two reclaimers", t.two_reclaimers),
        ("ghost writes", t.ghosts),
        ("ghost probes", t.ghost_probes),
        ("probes at another DP", t.remap_probes),
        ("probes answered DataReclaimed", t.reclaimed_probes),
        ("host suspends", t.suspends),
        ("delayed creates", t.delayed),
        ("stale reads of overwritten objects", t.stale_overwrites),
        ("deletions checked", t.deletes_checked),
        ("storage-bound checks", t.storage_checks),
    ];
    for (what, n) in exercised.into_iter().chain(t.coop_exercised()) {
        assert!(n > 0, "no {what} in {CI_SEEDS} seeds: {t:?}");
    }
}

/// Every producer cooperative (`sim --policy coop`): the faults aimed at cooperative
/// commits all happen, and every invariant holds.
#[test]
fn cooperative_seeds_hold_every_invariant() {
    let cfg = SimConfig {
        policy: Some("coop".parse().expect("coop parses")),
        ..SimConfig::default()
    };
    let mut t = Totals::default();
    for seed in 0..COOP_SEEDS {
        match run(seed, &cfg) {
            Ok(r) => {
                assert_eq!(r.coop.incarnations, r.incarnations, "seed {seed}");
                t.add(&r);
            }
            Err(f) => fail(&f),
        }
    }
    eprintln!("{t:?}");
    assert!(t.steps > COOP_SEEDS * 10, "only {} steps", t.steps);
    for (what, n) in t.coop_exercised() {
        assert!(n > 0, "no {what} in {COOP_SEEDS} cooperative seeds: {t:?}");
    }
}

/// Seeds with consumers reading footers ahead (`sim --footer-lookahead 8`) `cargo test`
/// runs.
const LOOKAHEAD_SEEDS: u64 = 300;

/// The default mix with every rank reading the footers of the 8 steps after those in
/// flight in the background (the consumers' default; the default mix keeps it off so
/// that the seeds below stay where docs/reliability.md names them).
#[test]
fn footer_lookahead_seeds_hold_every_invariant() {
    let cfg = SimConfig {
        footer_lookahead: 8,
        ..SimConfig::default()
    };
    let mut t = Totals::default();
    for seed in 0..LOOKAHEAD_SEEDS {
        match run(seed, &cfg) {
            Ok(r) => t.add(&r),
            Err(f) => fail(&f),
        }
    }
    eprintln!("{t:?}");
    assert!(t.steps > LOOKAHEAD_SEEDS * 10, "only {} steps", t.steps);
    assert!(
        t.restores > 0 && t.zombies > 0 && t.reclaimed_probes > 0,
        "restores {}, zombies {}, probes answered DataReclaimed {}",
        t.restores,
        t.zombies,
        t.reclaimed_probes
    );
}

/// The default mix with every producer writing sealed TGBs (TGB format version 2): ranks
/// read each slot with one ranged GET and no footer, under every fault of the mix (the
/// default mix writes packed TGBs so that the seeds below stay where docs/reliability.md
/// names them).
#[test]
fn sealed_seeds_hold_every_invariant() {
    let cfg = SimConfig {
        slice_layout: SliceLayout::Sealed,
        ..SimConfig::default()
    };
    let mut t = Totals::default();
    for seed in 0..LOOKAHEAD_SEEDS {
        match run(seed, &cfg) {
            Ok(r) => t.add(&r),
            Err(f) => fail(&f),
        }
    }
    eprintln!("{t:?}");
    assert!(t.steps > LOOKAHEAD_SEEDS * 10, "only {} steps", t.steps);
    assert!(
        t.restores > 0 && t.zombies > 0 && t.reclaimed_probes > 0,
        "restores {}, zombies {}, probes answered DataReclaimed {}",
        t.restores,
        t.zombies,
        t.reclaimed_probes
    );
}

/// What the CI seeds exercised, summed.
#[derive(Debug, Default)]
struct Totals {
    steps: u64,
    restores: u64,
    zombies: u64,
    lost: u64,
    remapped: u64,
    tp_pp: u64,
    multi_group: u64,
    retired: u64,
    two_reclaimers: u64,
    ghosts: u64,
    ghost_probes: u64,
    remap_probes: u64,
    reclaimed_probes: u64,
    suspends: u64,
    delayed: u64,
    stale_overwrites: u64,
    deletes_checked: u64,
    storage_checks: u64,
    coop_versions: u64,
    published_for_others: u64,
    crashes_after_listing: u64,
    fenced_while_published: u64,
    fenced_with_uploads: u64,
    long_downs: u64,
    zombie_uploads_listed: u64,
    swept_while_held: u64,
    stale_missing: u64,
    stale_deleted: u64,
    short_age_runs: u64,
    orphans_in_short_runs: u64,
}

impl Totals {
    /// The cooperative paths and the faults aimed at them.
    fn coop_exercised(&self) -> [(&'static str, u64); 12] {
        [
            ("cooperative versions", self.coop_versions),
            ("TGBs published for others", self.published_for_others),
            (
                "(a) crashes between a listing and its create",
                self.crashes_after_listing,
            ),
            (
                "(b) producers fenced while another published their TGBs",
                self.fenced_while_published,
            ),
            (
                "(b) claims fencing stored uploads",
                self.fenced_with_uploads,
            ),
            ("long downtimes", self.long_downs),
            (
                "(c) zombie uploads in a listing",
                self.zombie_uploads_listed,
            ),
            ("(d) candidates holding a swept TGB", self.swept_while_held),
            ("(e) listings missing recent uploads", self.stale_missing),
            ("(e) listings showing deleted uploads", self.stale_deleted),
            ("runs with short commit ages", self.short_age_runs),
            (
                "orphans swept in short-age runs",
                self.orphans_in_short_runs,
            ),
        ]
    }

    fn add(&mut self, r: &SimReport) {
        self.steps += r.steps;
        self.restores += r.consumer_restores;
        self.zombies += r.zombies;
        self.lost += r.lost_replies_recovered;
        let (dt, ct) = r.tgb_grid;
        self.remapped += u64::from(r.groups.iter().any(|g| (g.0, g.1) != (dt, ct)));
        self.tp_pp += u64::from(r.groups.iter().any(|g| g.2 * g.3 > 1));
        self.multi_group += u64::from(r.groups.len() > 1);
        self.retired += r.retired;
        self.two_reclaimers += u64::from(r.reclaimers > 1);
        self.ghosts += r.ghosts_written;
        self.ghost_probes += r.probes.1;
        self.remap_probes += r.probes.2;
        self.reclaimed_probes += r.probes.3;
        self.suspends += r.suspends;
        self.delayed += r.delayed_creates;
        self.stale_overwrites += r.stale_overwrites;
        self.deletes_checked += r.gc_deletes_checked;
        self.storage_checks += r.storage_checks;
        let c = &r.coop;
        self.coop_versions += c.versions;
        self.published_for_others += c.published_for_others;
        self.crashes_after_listing += c.crashes_after_listing;
        self.fenced_while_published += c.fenced_while_published;
        self.fenced_with_uploads += c.fenced_with_uploads;
        self.long_downs += c.long_downs;
        self.zombie_uploads_listed += c.zombie_uploads.1;
        self.swept_while_held += c.swept_while_held;
        self.stale_missing += c.stale_listings.0;
        self.stale_deleted += c.stale_listings.1;
        if c.short_ages.is_some() {
            self.short_age_runs += 1;
            self.orphans_in_short_runs += r.reclaimed.1;
        }
    }
}

#[test]
fn same_seed_replays_bit_for_bit_and_seeds_differ() {
    let cfg = SimConfig::default();
    let a = run(4242, &cfg).unwrap_or_else(|f| fail(&f));
    let b = run(4242, &cfg).unwrap_or_else(|f| fail(&f));
    assert_eq!(a, b, "one seed, two different runs");
    let c = run(4243, &cfg).unwrap_or_else(|f| fail(&f));
    assert_ne!(a.digest, c.digest, "two seeds, one digest");
}

/// Replay is exact across seeds, not only for one: 20 seeds, each run twice, give
/// the same report (digest, steps, clock) both times.
#[test]
fn twenty_seeds_each_replay_bit_for_bit() {
    let cfg = SimConfig::default();
    for seed in 9_000..9_020 {
        let a = run(seed, &cfg).unwrap_or_else(|f| fail(&f));
        let b = run(seed, &cfg).unwrap_or_else(|f| fail(&f));
        assert_eq!(a, b, "seed {seed} did not replay");
    }
}

#[test]
fn a_failing_seed_replays_identically() {
    let cfg = SimConfig {
        plant: Some(PlantedBug::CreateOverwrites { rate: 0.5 }),
        ..SimConfig::default()
    };
    let first = (0..PLANT_BUDGET)
        .find_map(|s| run(s, &cfg).err())
        .expect("the planted bug is caught");
    let again = run(first.seed(), &cfg).expect_err("the failing seed fails again");
    assert_eq!(first.to_string(), again.to_string());
    assert_eq!(first.trace(), again.trace());
    assert!(
        first
            .to_string()
            .contains(&format!("--seed {}", first.seed())),
        "{first}"
    );
}

fn caught_within_budget(plant: PlantedBug) -> SimFailure {
    let cfg = SimConfig {
        plant: Some(plant),
        ..SimConfig::default()
    };
    for seed in 0..PLANT_BUDGET {
        if let Err(f) = run(seed, &cfg) {
            eprintln!("{plant:?} caught at seed {seed}: {f}");
            return f;
        }
    }
    panic!("{plant:?} survived {PLANT_BUDGET} seeds");
}

/// Asserts that `plant` is caught within the budget by one of `invariants`, at `seed`
/// (the seed docs/reliability.md names; it moves when the schedule changes).
fn caught_by(plant: PlantedBug, invariants: &[&str], seed: u64) {
    let f = caught_within_budget(plant);
    let inv = f.invariant().unwrap_or("(liveness)");
    assert!(
        invariants.contains(&inv),
        "{plant:?} caught by `{inv}`, expected one of {invariants:?}: {f}"
    );
    assert_eq!(
        f.seed(),
        seed,
        "{plant:?} is now caught at another seed: update docs/reliability.md"
    );
}

#[test]
fn planted_bug_is_caught() {
    // A store that ignores If-None-Match on manifests: two producers win one version.
    let f = caught_within_budget(PlantedBug::CreateOverwrites { rate: 0.5 });
    assert!(f.invariant().is_some(), "{f}");
    // A create reply that claims success although the version was taken.
    let f = caught_within_budget(PlantedBug::FalseSuccess { rate: 0.5 });
    assert!(f.invariant().is_some(), "{f}");
    // The producer skips the state-map check on a lost reply: a duplicate.
    let f = caught_within_budget(PlantedBug::SkipStateMapCheck);
    assert!(f.invariant().is_some(), "{f}");
    // A boundary-log listing that misses its newest entry (a stale read).
    let f = caught_within_budget(PlantedBug::StaleBoundary { rate: 0.5 });
    assert!(f.invariant().is_some(), "{f}");
}

/// (a) A consumer that ignores the boundary: at seed 0 a probe restoring an older
/// checkpoint gets a bare `NotFound` for a reclaimed TGB instead of `DataReclaimed`; from
/// seed 30 on, probes restoring a checkpoint at a version whose slot a ghost fills are
/// delivered the ghost's TGB.
#[test]
fn planted_skip_boundary_check_is_caught() {
    caught_by(PlantedBug::SkipBoundaryCheck, &["restore-outcome"], 0);
}

/// (b) A boundary log whose newest entry holds less than the one before: readers take
/// ghosts for live (a zombie's ghost create counts as its commit, restores get the
/// ghost's batch or a bare NotFound; or, with GC's reads stale too, a producer's
/// extension check refuses the rewritten history it meets and the producer stops).
#[test]
fn planted_lower_boundary_is_caught() {
    caught_by(
        PlantedBug::LowerBoundary,
        &[
            "producer-error",
            "reader-refused",
            "zombie-fenced",
            "no-ghost-commit",
            "restore-outcome",
            "live-chain-batch",
        ],
        0,
    );
}

/// (c) A reader without the extension check: the forged version at the end is adopted.
#[test]
fn planted_skip_extension_check_is_caught() {
    caught_by(PlantedBug::SkipExtensionCheck, &["forged-refused"], 0);
}

/// (d) TP ranks sharing one watermark: GC deletes what the slower rank's checkpoint
/// needs (seen at the deletion).
#[test]
fn planted_shared_rank_mark_is_caught() {
    caught_by(
        PlantedBug::SharedRankMark,
        &["gc-safety", "reclaim-safety"],
        17,
    );
}

/// (e) A cooperative committer that publishes another producer's upload past a gap
/// (`last_sequence + 2`): its own validation before the create refuses the candidate
/// (`producer-totals` or `sequence-order`: a producer's sequences are 1, 2, 3, ... across
/// epochs, so `tgbs_committed == last_sequence`), and the producer stops: a correct
/// writer never builds such a candidate. Had it reached the store, the backend's
/// `published-contiguous` would refuse it (see the backend's unit tests).
#[test]
fn planted_publish_gap_is_caught() {
    caught_by(
        PlantedBug::PublishGap,
        &[
            "candidate-invalid",
            "published-contiguous",
            "reader-rules",
            "reader-refused",
        ],
        13,
    );
}

/// (f) A cooperative committer that publishes a fenced incarnation's leftover (or a
/// zombie's upload): at seed 8 the committer's own validation refuses the candidate
/// (`candidate-invalid`, `epoch-order`: the producer's retained TGB before it has the
/// newer epoch); at seed 16 the version is created (its earlier retained TGBs are of the
/// old epoch too, so it is valid on its own) and the ground truth refuses it at once
/// (`fenced-published`).
#[test]
fn planted_publish_stale_epoch_is_caught() {
    caught_by(
        PlantedBug::PublishStaleEpoch,
        &["candidate-invalid", "fenced-published", "reader-rules"],
        8,
    );
    let cfg = SimConfig {
        plant: Some(PlantedBug::PublishStaleEpoch),
        ..SimConfig::default()
    };
    let f = run(8, &cfg).expect_err("seed 8 builds a candidate with a fenced epoch");
    assert_eq!(f.invariant(), Some("candidate-invalid"), "{f}");
    assert!(f.to_string().contains("epoch-order"), "{f}");
    let f = run(16, &cfg).expect_err("seed 16 creates a version with a fenced epoch");
    assert_eq!(f.invariant(), Some("fenced-published"), "{f}");
}

/// (g) A cooperative committer without the age check: at seed 8 it publishes an upload
/// older than its producer's `max_commit_age` (`coop-age`, the rule GC's orphan sweep
/// relies on); at seed 12685 the harm itself: GC sweeps p2's sequence-3 upload as an
/// orphan at 35.5 s, and a committer without the check publishes it afterwards: version
/// 22 lists a deleted TGB (`published-reclaimed`).
#[test]
fn planted_skip_others_age_check_is_caught() {
    caught_by(
        PlantedBug::SkipOthersAgeCheck,
        &["coop-age", "published-reclaimed", "visible-object-present"],
        8,
    );
    let cfg = SimConfig {
        plant: Some(PlantedBug::SkipOthersAgeCheck),
        ..SimConfig::default()
    };
    let f = run(12685, &cfg).expect_err("seed 12685 publishes a swept orphan");
    assert_eq!(f.invariant(), Some("published-reclaimed"), "{f}");
}

/// (h) A cooperative committer that records epoch claims whatever their age: at seed 20
/// version 3 records p0's claim of epoch 2, written 2,075 ms before the version, beyond
/// the claim's limit of 1,827 ms (`claim-recorded`: a crashed opener's claim may fence its
/// id's live incarnation only while it is younger than that; GC relies on it to sweep
/// claim objects).
#[test]
fn planted_record_old_claims_is_caught() {
    caught_by(PlantedBug::RecordOldClaims, &["claim-recorded"], 20);
}

/// (i) A cooperative committer that records a claim of the epoch an entry already holds,
/// under another incarnation: at seed 14 the version is created and readers refuse it
/// after the version before (`reader-rules`: the epoch changed hands without growing).
#[test]
fn planted_record_same_epoch_claims_is_caught() {
    caught_by(
        PlantedBug::RecordSameEpochClaims,
        &["reader-rules", "candidate-invalid", "claim-recorded"],
        14,
    );
}

#[test]
fn every_plant_has_a_name() {
    for (name, plant) in PlantedBug::NAMED {
        assert_eq!(PlantedBug::from_name(name), Some(plant));
        assert_eq!(plant.name(), Some(name));
    }
    for name in [
        "publish-gap",
        "publish-stale-epoch",
        "skip-others-age-check",
        "record-old-claims",
        "record-same-epoch-claims",
    ] {
        assert!(PlantedBug::from_name(name).is_some(), "{name}");
    }
}

#[test]
fn invalid_configs_are_refused() {
    let cfg = SimConfig {
        orphan_grace: Some(SimConfig::default().max_commit_age),
        ..SimConfig::default()
    };
    assert!(matches!(
        run(1, &cfg),
        Err(SimFailure::Setup { seed: 1, .. })
    ));
    #[allow(clippy::reversed_empty_ranges)]
    let cfg = SimConfig {
        producers: 3..=2,
        ..SimConfig::default()
    };
    assert!(matches!(run(1, &cfg), Err(SimFailure::Setup { .. })));
}

/// Seeds that once failed and the fix each needed (the full sweeps run 10,000 seeds; CI
/// runs the first few hundred, so these are kept here).
#[test]
fn seeds_that_once_failed_pass() {
    // 7646: a restart of an id whose dead incarnation's epoch claim another producer had
    // just recorded read that version stale (not found), dated it by the version's own
    // `last_modified` as if its id had created it, and stopped with `OpenRace`.
    for seed in [7646] {
        if let Err(f) = run(seed, &SimConfig::default()) {
            fail(&f);
        }
    }
}

#[test]
fn replay() {
    let Ok(seed) = std::env::var("BATCHWEAVE_SIM_SEED") else {
        eprintln!("SKIP replay: set BATCHWEAVE_SIM_SEED=N to replay seed N");
        return;
    };
    let seed: u64 = seed.parse().expect("BATCHWEAVE_SIM_SEED is a number");
    match run(seed, &SimConfig::default()) {
        Ok(r) => eprintln!("{r:#?}"),
        Err(f) => fail(&f),
    }
}

/// `cfg` in the world before cooperative commits ([`SimConfig::without_coop`]).
fn before_coop(cfg: &SimConfig) -> SimConfig {
    let w = SimConfig::without_coop();
    SimConfig {
        coop_share: w.coop_share,
        all_coop_rate: w.all_coop_rate,
        coop_crash_rate: w.coop_crash_rate,
        listing_stall_rate: w.listing_stall_rate,
        short_age_rate: w.short_age_rate,
        long_down_rate: w.long_down_rate,
        zombie_uploads: w.zombie_uploads,
        tgb_stale_listings: w.tgb_stale_listings,
        ..cfg.clone()
    }
}

/// A regression seed holds in the world it was found in (before cooperative commits,
/// where it replays its original schedule: their draws come from streams of their own)
/// and in today's.
fn must_hold(seed: u64, cfg: SimConfig) {
    for c in [before_coop(&cfg), cfg] {
        if let Err(f) = run(seed, &c) {
            fail(&f);
        }
    }
}

/// Bug (producer): a count policy whose batch is larger than `max_buffered`
/// never commits, so `append` waits for buffer space forever. Seed 1 with
/// `small_buffers` opens p0 with `incr` (threshold 10) and `max_buffered 2`:
/// its third `append` never returns and the run is stuck.
#[test]

fn bug_small_buffer_deadlocks_append() {
    must_hold(
        1,
        SimConfig {
            small_buffers: true,
            ..SimConfig::default()
        },
    );
}

/// Bug (producer): `Committer::attempt` computes the `max_lag` allowance on
/// the old base and then `refresh()`es the base, committing that many TGBs
/// on a newer, longer base. Seed 4: version 17 by p2 epoch 3 (max_lag 4)
/// ends at step 12 while the low-water mark is 3.
#[test]

fn bug_max_lag_exceeded_after_refresh() {
    must_hold(
        4,
        SimConfig {
            check_max_lag: true,
            ..SimConfig::default()
        },
    );
}

/// Bug (producer): p1 (max_lag 6) creates v12 with 5 TGBs; the reply is
/// lost and the resync misses v12 (stale listing), so the attempt counts as
/// a conflict; the next attempt (allowance now 2) refreshes onto v12, which
/// already holds sequence 5, and `rebase` refuses "already holds sequence 5
/// ... beyond the last pending sequence 2": the producer stops with an
/// internal error. Seed 1994 with stale listings.
#[test]

fn bug_rebase_refuses_smaller_retry_after_lost_reply() {
    must_hold(
        1994,
        SimConfig {
            stale_listings: true,
            strict: true,
            ..SimConfig::default()
        },
    );
}

/// Bug (producer): `open` on a stale listing builds on an old version (or
/// genesis), claims an epoch that is not newer than its own entry and fails
/// with `Fenced` although no other incarnation is alive. Seed 4: p2 claims
/// epoch 1 while the stream holds p2 at epoch 1 with another incarnation.
#[test]

fn bug_spurious_fence_on_open_after_stale_listing() {
    must_hold(
        4,
        SimConfig {
            stale_listings: true,
            strict: true,
            ..SimConfig::default()
        },
    );
}

/// Bug (producer, safety): a create lands in a version slot GC emptied (a
/// ghost) and its reply is lost; the resync's stale listing shows the ghost
/// as the newest version, `commit_status` finds the batch in it and the
/// producer counts it as committed (no `min_live_version` check on this
/// path). Seed 9495: p4 epoch 1 writes ghost versions 20 and 21 (boundary at
/// 22) and reports offset 3 committed; the chain holds offset 1.
#[test]

fn bug_ghost_commit_through_lost_reply() {
    must_hold(
        9495,
        SimConfig {
            stale_listings: true,
            ..SimConfig::default()
        },
    );
}

/// Bug (GC, safety): the orphan sweep keeps only the keys of the newest
/// version it read; with a stale listing that is an older version, so TGBs
/// made visible by newer versions and older than the grace period are
/// deleted. Seed 5832: a pass at 53.7 s reads v36 instead of v39 and deletes
/// `tgb/p5/0000000003-00000000000000000007.tgb`, visible since v38; rank 0
/// then finds it missing.
#[test]

fn bug_gc_orphan_sweep_deletes_visible_tgb() {
    must_hold(
        5832,
        SimConfig {
            stale_listings: true,
            ..SimConfig::default()
        },
    );
}

/// Regression (producer, liveness), found by seed 2370: a restart whose first view is
/// stale meets its predecessor's claim at the epoch it picked and took it for a
/// concurrent open: p0's incarnation claims epoch 3 and crashes at 5.8 s; the restart at
/// 5.9 s, with a stale first view, claims epoch 3 too and stopped with `OpenRace`
/// although no other process was alive (wall-clock and same-epoch rules both misfired
/// here, under clock skew and against a predecessor still committing). The claim is now
/// ordered by the store's own clock: a same-epoch claim whose incarnation's last commit
/// precedes the open (by `last_modified`, against a probe written when the open began)
/// is a predecessor's, and the open claims the next epoch.
#[test]
fn a_restart_after_a_stale_first_view_fences_its_predecessor() {
    must_hold(2370, SimConfig::default());
}

/// Regression (GC, safety), found by seed 278 with stale GETs for GC: the newest
/// version is a listing confirmed by GETs of the next version numbers; a stale GET
/// ended the confirmation early, and the orphan sweep took what the versions it missed
/// listed for orphans (it deleted `tgb/p2/0000000003-00000000000000000003.tgb`, live at
/// step 36, while a checkpoint needed step 35: `gc-safety`). The sweep now deletes only
/// what the version it read proves to be an orphan (`Reclaimer::run_once`, step 6).
#[test]
fn orphan_sweep_after_a_stale_probe_deletes_nothing_live() {
    let cfg = SimConfig::default();
    assert!(cfg.gc_stale_reads, "GC gets stale reads by default");
    must_hold(278, cfg);
}

/// Regression (producer, liveness), found by seed 11700: a producer woken from a
/// suspend refreshed its base with the boundary read before the suspend, adopted the
/// ghost that fills its next version number, and then, when a stale listing showed that
/// ghost as the newest version, refused the live chain as not extending it and stopped
/// with a `Data` error ("manifest version 30 does not extend version 29"). The chain's
/// search for the newest version now reads the boundary again when the version it
/// stands on is followed by one that does not extend it, and starts over from there.
#[test]
fn a_producer_woken_over_a_ghost_base_keeps_committing() {
    must_hold(11700, SimConfig::default());
}

/// Regression (producer, liveness), found by seed 9268 in a cooperative stream (a crash,
/// then 34 s down) and kept as seed 6858 (the schedule moved): p4 claims epoch 1 at
/// 0.6 s (version 1, its entry's last commit), its host stalls 16 s after a listing of
/// `tgb/`, it stops with `Expired` at 28.9 s, and GC has deleted version 1 meanwhile. Its
/// restart opens on a stale first view (genesis), claims epoch 1 again, and the claim
/// lands in the deleted slot 1 as a ghost; resolving it, the open met p4's epoch 1 of the
/// other incarnation and asked whether that incarnation committed after the open began,
/// by the `last_modified` of version 1: its own ghost's. It stopped with `OpenRace`
/// although no other process was alive. A version below the boundary now counts as
/// older than the open, as a deleted one did.
#[test]
fn a_restart_whose_claim_fills_its_predecessors_reclaimed_slot_fences_it() {
    must_hold(6858, SimConfig::default());
}

/// Regression (producer, liveness), found by seed 8354 with every producer cooperative:
/// p3 epoch 1 uploads two TGBs and crashes; its restart opens on a stale first view and
/// claims epoch 1 again, while p0's cooperative commit (version 3) publishes the crashed
/// incarnation's uploads. The open met p3's epoch 1 of the other incarnation, recorded at
/// version 3, and dated that incarnation's last commit by the `last_modified` of version
/// 3, written after the open began: it stopped with `OpenRace` although no other process
/// of p3 was alive. A cooperative version of another committer now dates only the uploads
/// it published (the newest of them, by its `last_modified`); the simulation accepts an
/// `OpenRace` only when the other incarnation committed or uploaded after the open began.
#[test]
fn a_restart_racing_a_cooperative_commit_of_its_predecessors_uploads_fences_it() {
    must_hold(
        8354,
        SimConfig {
            policy: Some("coop".parse().expect("coop parses")),
            ..SimConfig::default()
        },
    );
}
