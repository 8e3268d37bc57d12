//! The producer process: incarnations of one producer id that append their
//! quota of TGBs, crash, restart, hit fail points and leave zombies behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::PlantedBug;
use batchweave_chain::ChainError;
use batchweave_manifest::{DecodeLimits, decode_manifest};
use batchweave_producer::{
    DacParams, FailPoint, FailPoints, PolicyKind, Producer, ProducerError, ProducerSettings,
    ProducerStats,
};
use batchweave_store::StreamStore;
use batchweave_tgb::{Grid, payload};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use crate::SimFailure;
use crate::host::{HostClock, HostStore, ListingStall};
use crate::log::lock;
use crate::world::{Life, World, slice_len};

/// How long a zombie's append or flush may take before it is given up on.
const ZOMBIE_PATIENCE: Duration = Duration::from_secs(120);

/// What the producer actor needs to know about the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerPlan {
    /// Producer index (the id is `p{index}`).
    pub(crate) index: usize,
    /// The stream's TGB grid.
    pub(crate) grid: Grid,
    /// TGBs to commit (source offsets `1..=quota`).
    pub(crate) quota: u64,
}

/// The slices of the TGB of `id` at source offset `offset`, in slice-id order.
pub(crate) fn slices(w: &World, id: &str, offset: u64, grid: Grid) -> Vec<Bytes> {
    (0..grid.dp * grid.cp)
        .map(|s| payload::slice_bytes(id, offset, s, slice_len(&w.cfg, id, offset, s)))
        .collect()
}

/// A wall-clock skew in `[-max, max]` milliseconds.
pub(crate) fn draw_skew(rng: &mut StdRng, max: Duration) -> i64 {
    let m = i64::try_from(max.as_millis()).unwrap_or(0);
    if m == 0 { 0 } else { rng.random_range(-m..=m) }
}

/// True for the known bug of a retry with fewer TGBs than an earlier
/// attempt whose reply was lost: the refreshed base already holds the
/// larger batch and `rebase` refuses the smaller one.
fn known_rebase_bug(e: &ProducerError) -> bool {
    match e {
        ProducerError::Stopped(inner) => known_rebase_bug(inner),
        ProducerError::Rebase(r) => r.to_string().contains("already holds sequence"),
        _ => false,
    }
}

/// The invariant a producer stopping with `e` breaks: a reader's refusal of a version
/// (which no correct writer creates), its own candidate refused by the validation before
/// the create, or an unexpected error.
fn producer_invariant(e: &ProducerError) -> &'static str {
    if refused_by_reader(e) {
        "reader-refused"
    } else if candidate_invalid(e) {
        "candidate-invalid"
    } else {
        "producer-error"
    }
}

/// True if a real process would simply be restarted after `e`.
fn restartable(e: &ProducerError) -> bool {
    match e {
        ProducerError::Stopped(inner) => restartable(inner),
        ProducerError::Crashed(_) | ProducerError::Expired { .. } => true,
        ProducerError::Store(s) => s.is_retryable(),
        _ => false,
    }
}

/// The mix of policies before cooperative commits (always drawn, so the draws of `rng`
/// do not depend on whether `coop` replaces the pick).
fn pick_policy(rng: &mut StdRng) -> PolicyKind {
    match rng.random_range(0..5u32) {
        0 => PolicyKind::Naive,
        1 => PolicyKind::Fixed(rng.random_range(1..=3)),
        2 => PolicyKind::Aimd,
        3 => PolicyKind::Incr,
        _ => PolicyKind::Dac(DacParams::default()),
    }
}

/// The incarnation's crash point (at `rate`), a second one before a cooperative
/// committer's create (`coop_crash`: the create attempt it fires at), plus the planted
/// state-map-check bug when `skip_check` (draws the same random numbers either way, so
/// a plant does not change the schedule).
fn fail_points(
    rng: &mut StdRng,
    rate: f64,
    skip_check: bool,
    coop_crash: Option<u64>,
    claim_crash: bool,
) -> (FailPoints, Option<(FailPoint, u64)>) {
    let armed = rng.random_bool(rate.clamp(0.0, 1.0)).then(|| {
        let point = match rng.random_range(0..3u32) {
            0 => FailPoint::AfterTgbPut,
            1 => FailPoint::BeforeCreate,
            _ => FailPoint::AfterCreate,
        };
        (point, rng.random_range(1..=5u64))
    });
    if armed.is_none() && coop_crash.is_none() && !skip_check && !claim_crash {
        return (FailPoints::default(), None);
    }
    let hits = AtomicU64::new(0);
    let creates = AtomicU64::new(0);
    let fp = FailPoints::new(move |p| {
        if p == FailPoint::SkipStateMapCheck {
            return skip_check;
        }
        let first = armed.is_some_and(|(point, nth)| {
            p == point && hits.fetch_add(1, Ordering::SeqCst) + 1 == nth
        });
        let second = coop_crash.is_some_and(|nth| {
            p == FailPoint::BeforeCreate && creates.fetch_add(1, Ordering::SeqCst) + 1 == nth
        });
        first || second || (claim_crash && p == FailPoint::AfterClaimObject)
    });
    (fp, armed)
}

/// True if `e` is (or stopped the producer with) a crash at `point`.
fn crashed_at(e: &ProducerError, point: FailPoint) -> bool {
    match e {
        ProducerError::Stopped(inner) => crashed_at(inner, point),
        ProducerError::Crashed(p) => *p == point,
        _ => false,
    }
}

/// True if `e` is a reader's refusal of what it read (a version or boundary that breaks
/// a rule of the format): a correct writer never writes one, so it is a violation
/// wherever it shows up, a zombie's reads included.
fn refused_by_reader(e: &ProducerError) -> bool {
    match e {
        ProducerError::Stopped(inner) => refused_by_reader(inner),
        ProducerError::Chain(c) => {
            matches!(c, ChainError::Corrupt { .. } | ChainError::Diverged { .. })
        }
        _ => false,
    }
}

/// True if `e` is the producer refusing its own candidate (the validation before its
/// create: the rebase built a version that breaks a rule of the format).
fn candidate_invalid(e: &ProducerError) -> bool {
    match e {
        ProducerError::Stopped(inner) => candidate_invalid(inner),
        ProducerError::Manifest(_) => true,
        _ => false,
    }
}

/// Per-id bookkeeping of one producer actor.
struct Actor {
    w: Arc<World>,
    plan: ProducerPlan,
    id: String,
    quota: u64,
    rng: StdRng,
    /// The draws for cooperative commits and the faults aimed at them (a stream of its
    /// own: with them off, `rng` draws what it drew before they existed).
    side: StdRng,
    /// The incarnation opened last runs `coop`.
    coop: bool,
    /// `max_lag` of the incarnation opened last.
    last_lag: Option<u64>,
    /// The host the incarnation opened last runs on.
    host: Arc<HostClock>,
    /// Its suspend, if one is planned.
    suspender: Option<JoinHandle<()>>,
    /// Its entry in `World::lives`.
    life: usize,
}

/// What one incarnation ended with.
enum End {
    /// Closed with its quota committed.
    Done,
    /// Died (dropped, fail point, stopped); restart.
    Crashed,
    /// Kept alive as a zombie: the next incarnation opens while it lives.
    Zombie(Box<Producer>, u64),
}

/// An incarnation's store: the faulty stack behind its host (stalled at one listing of
/// `tgb/`, if `stall`).
fn host_store(
    w: &World,
    host: &Arc<HostClock>,
    seed: u64,
    stall: Option<ListingStall>,
) -> StreamStore {
    StreamStore::from_object_store(
        Arc::new(HostStore::new(w.faults.clone(), host.clone(), stall)),
        "",
        "sim:///",
    )
    .with_clock(host.clone())
    .with_seed(seed)
}

impl Actor {
    fn who(&self) -> String {
        self.id.clone()
    }

    /// Ground truth for an `OpenRace` at `epoch`: whether the incarnation that holds it
    /// was alive after store time `began_ms` (the store's clock is the simulation's): a
    /// live version written at or after it is a commit of this id at that epoch by an
    /// incarnation of its own (a claim, or a commit of its TGBs: the entry records the
    /// version and the version names no other committer), or a TGB of that epoch was
    /// uploaded at or after it. Otherwise the claim it lost to came before the open, and
    /// the open should have claimed the next epoch. A cooperative commit that published
    /// the id's older uploads proves no process of it alive.
    fn claimed_during_open(&self, epoch: u64, began_ms: u64) -> bool {
        self.w.backend.uploaded_since(&self.id, epoch, began_ms)
            || self.w.backend.manifest_writes().iter().any(|m| {
                !m.ghost
                    && m.at_ms >= began_ms
                    && decode_manifest(&m.bytes, &DecodeLimits::default()).is_ok_and(|v| {
                        (v.committer.is_empty() || v.committer == self.id)
                            && v.producers.get(&self.id).is_some_and(|e| {
                                e.epoch == epoch && e.last_commit_version == v.version
                            })
                    })
            })
    }

    /// A known bug the run tolerates (the producer is restarted, as after a crash).
    fn known_bug(&self, e: &ProducerError) -> bool {
        !self.w.cfg.strict && known_rebase_bug(e)
    }

    fn believe(&self, offset: u64) {
        if let Some(p) = lock(&self.w.producers).get_mut(&self.id) {
            p.believed = p.believed.max(offset);
        }
    }

    /// Adds an ending incarnation's counters to the run's tally.
    fn account(&self, s: &ProducerStats) {
        self.w.count(|t| {
            t.conflicts += s.conflicts;
            t.ambiguous += s.ambiguous;
            t.lost_replies_recovered += s.lost_replies_recovered;
            t.ghosts_prevented += s.ghost_commits_prevented;
        });
    }

    fn believed(&self) -> u64 {
        lock(&self.w.producers)
            .get(&self.id)
            .map_or(0, |p| p.believed)
    }

    async fn pause(&mut self, max_ms: u64) {
        let d = Duration::from_millis(self.rng.random_range(0..=max_ms));
        self.w.clock.sleep(d).await;
    }

    /// The incarnation ended (its uploads may stay behind as orphans).
    fn end_life(&mut self) {
        if let Some(t) = self.suspender.take() {
            t.abort();
        }
        let now = self.w.elapsed_ms();
        if let Some(l) = lock(&self.w.lives).get_mut(self.life) {
            l.ended_ms.get_or_insert(now);
        }
    }

    /// The host of the next incarnation: the same one, or (half the time) a new one
    /// with its own clock skew; maybe a suspend planned for it.
    fn next_host(&mut self) {
        let skew = if self.rng.random_bool(0.5) {
            self.host.skew_ms()
        } else {
            draw_skew(&mut self.rng, self.w.cfg.max_clock_skew)
        };
        self.host = HostClock::new(self.w.clock.clone(), skew);
        if self
            .rng
            .random_bool(self.w.cfg.suspend_rate.clamp(0.0, 1.0))
        {
            let after = Duration::from_millis(self.rng.random_range(200..=20_000));
            let long = self.rng.random_bool(0.35);
            let d = Duration::from_millis(if long {
                self.rng.random_range(20_000..=60_000)
            } else {
                self.rng.random_range(1_000..=12_000)
            });
            let (w, host, who) = (self.w.clone(), self.host.clone(), self.who());
            self.suspender = Some(tokio::spawn(async move {
                w.clock.sleep(after).await;
                w.event(&who, format!("host suspended for {}ms", d.as_millis()));
                w.count(|t| t.suspends += 1);
                host.suspend(d).await;
                w.event(&who, "host woke up");
            }));
        }
    }

    /// Opens a new incarnation; `None` when it died while opening.
    /// Whether the next incarnation runs `coop`: forced, a cooperative run, or the mix at
    /// `coop_share` (drawn from `side` only).
    fn next_is_coop(&mut self) -> bool {
        let cfg = &self.w.cfg;
        match cfg.policy {
            Some(PolicyKind::Coop(_)) => true,
            Some(_) => false,
            None => {
                self.w.coop.all_coop
                    || (cfg.coop_share > 0.0
                        && self.side.random_bool(cfg.coop_share.clamp(0.0, 1.0)))
            }
        }
    }

    /// The policy of the next incarnation: the mix's pick (always drawn from `rng`, where
    /// it was drawn before cooperative commits existed), replaced by `coop` when `coop`,
    /// or by the forced policy.
    fn policy(&mut self, coop: bool) -> PolicyKind {
        let mix = pick_policy(&mut self.rng);
        match (coop, self.w.cfg.policy) {
            (true, _) => PolicyKind::Coop(self.w.coop.params),
            (false, Some(forced)) => forced,
            (false, None) => mix,
        }
    }

    /// For a cooperative incarnation, at `listing_stall_rate`: its host stalls 5-40 s
    /// when the reply to its 1st-4th listing of `tgb/` arrives, between the listing and
    /// the create of that attempt (GC may sweep what the candidate holds meanwhile).
    fn listing_stall(&mut self) -> Option<ListingStall> {
        let rate = self.w.cfg.listing_stall_rate.clamp(0.0, 1.0);
        if !self.coop || rate == 0.0 || !self.side.random_bool(rate) {
            return None;
        }
        let nth = self.side.random_range(1..=4u32);
        let duration = Duration::from_millis(self.side.random_range(5_000..=40_000));
        let (w, who) = (self.w.clone(), self.who());
        Some(ListingStall {
            nth,
            duration,
            fired: Box::new(move |d| {
                w.event(
                    &who,
                    format!(
                        "host stalls for {}ms after its listing of tgb/",
                        d.as_millis()
                    ),
                );
                w.count(|t| t.listing_stalls += 1);
            }),
        })
    }

    /// The next incarnation's `max_commit_age`: the run's, or with short ages one drawn
    /// from 0.5 s up to it.
    fn max_commit_age(&mut self) -> Duration {
        let run = self.w.coop.max_commit_age;
        if !self.w.coop.short_ages {
            return run;
        }
        let hi = u64::try_from(run.as_millis()).unwrap_or(u64::MAX).max(500);
        Duration::from_millis(self.side.random_range(500..=hi))
    }

    async fn open(&mut self) -> Result<Option<Producer>, SimFailure> {
        self.coop = self.next_is_coop();
        let coop_crash = (self.coop
            && self.w.cfg.coop_crash_rate > 0.0
            && self
                .side
                .random_bool(self.w.cfg.coop_crash_rate.clamp(0.0, 1.0)))
        .then(|| self.side.random_range(2..=6u64));
        // Fault: a cooperative opener dies right after its claim object is written.
        let claim_crash = self.coop
            && self.w.cfg.coop_crash_rate > 0.0
            && self
                .side
                .random_bool((self.w.cfg.coop_crash_rate / 2.0).clamp(0.0, 1.0));
        let max_commit_age = self.max_commit_age();
        let (fail, armed) = fail_points(
            &mut self.rng,
            self.w.cfg.fail_point_rate,
            self.w.cfg.plant == Some(PlantedBug::SkipStateMapCheck),
            coop_crash,
            claim_crash,
        );
        let drawn = self
            .rng
            .random_bool(0.3)
            .then(|| self.w.min_lag + self.rng.random_range(0..=4));
        let max_lag = self.w.uniform_lag.or(drawn);
        self.last_lag = max_lag;
        let policy = self.policy(self.coop);
        let mut max_buffered = self.rng.random_range(1..=4);
        if !self.w.cfg.small_buffers {
            // Count policies wait for k pending TGBs; a buffer below k
            // deadlocks `append` (see `SimConfig::small_buffers`).
            max_buffered = match policy {
                PolicyKind::Fixed(k) => max_buffered.max(k),
                PolicyKind::Incr => max_buffered.max(64),
                _ => max_buffered,
            };
        }
        let settings = ProducerSettings {
            seed: Some(self.rng.random()),
            policy,
            max_buffered,
            max_lag,
            max_commit_age,
            slice_layout: self.w.cfg.slice_layout,
            ..Default::default()
        };
        self.w.count(|t| {
            t.incarnations += 1;
            if self.coop {
                t.coop_incarnations += 1;
            }
        });
        self.next_host();
        {
            let mut lives = lock(&self.w.lives);
            self.life = lives.len();
            lives.push(Life {
                ended_ms: None,
                // Uploaded-but-uncommitted TGBs, plus the one being uploaded.
                buffer: max_buffered as u64 + 1,
            });
        }
        self.w.event(
            &self.who(),
            format!(
                "opening: policy {}, max_buffered {max_buffered}, max_lag {max_lag:?}, fail point {armed:?}{}{}, clock skew {}ms",
                settings.policy,
                coop_crash
                    .map(|n| format!(", crash before create {n}"))
                    .unwrap_or_default()
                    + if claim_crash { ", crash after claim object" } else { "" },
                if self.w.coop.short_ages {
                    format!(", max_commit_age {}ms", max_commit_age.as_millis())
                } else {
                    String::new()
                },
                self.host.skew_ms()
            ),
        );
        let stall = self.listing_stall();
        let store = host_store(&self.w, &self.host, self.rng.random(), stall);
        let open_began_ms = self.w.clock.unix_millis();
        match Producer::builder(store, self.id.clone())
            .settings(settings)
            .fail_points(fail)
            .open()
            .await
        {
            Ok(p) => Ok(Some(p)),
            Err(e @ ProducerError::OpenRace { epoch, .. })
                if self.claimed_during_open(epoch, open_began_ms) =>
            {
                // The rule holds: another incarnation's claim of this epoch landed
                // after this open began (a create of a dead incarnation that took effect
                // late is, to the store, a concurrent open). The loser stops at open, and
                // a restart claims the next epoch.
                self.w
                    .event(&self.who(), format!("lost an open race, restarting: {e}"));
                self.w.count(|t| t.producer_crashes += 1);
                self.end_life();
                Ok(None)
            }
            Err(e) if e.is_fenced() && !self.w.cfg.strict => {
                // Known bug: after a stale listing `open` builds on genesis,
                // claims epoch 1 and is fenced by its own older entry.
                self.w.event(
                    &self.who(),
                    format!("spurious fence on open (known bug): {e}"),
                );
                self.end_life();
                Ok(None)
            }
            Err(e) if restartable(&e) || self.known_bug(&e) => {
                self.w
                    .event(&self.who(), format!("died while opening: {e}"));
                let after_claim_object = crashed_at(&e, FailPoint::AfterClaimObject);
                self.w.count(|t| {
                    t.producer_crashes += 1;
                    if after_claim_object {
                        t.crashes_after_claim_object += 1;
                    }
                });
                self.end_life();
                Ok(None)
            }
            Err(e) => Err(self.w.violation(
                producer_invariant(&e),
                format!("{} open failed: {e}", self.id),
            )),
        }
    }

    /// A zombie (an older incarnation still alive) tries to append and
    /// flush after the newer incarnation `epoch` resumed at `resume`.
    async fn zombie(
        &mut self,
        mut z: Producer,
        next: u64,
        epoch: u64,
        resume: u64,
    ) -> Result<(), SimFailure> {
        self.w.count(|t| t.zombies += 1);
        let who = format!("{}z", self.id);
        let (lo, hi) = (
            *self.w.cfg.zombie_uploads.start(),
            *self.w.cfg.zombie_uploads.end(),
        );
        let uploads = if hi > lo {
            self.side.random_range(lo..=hi)
        } else {
            lo
        };
        let last = next + uploads - 1;
        self.w.event(
            &who,
            format!(
                "zombie epoch {} appends offsets {next}..={last} and flushes (epoch {epoch} is live)",
                z.epoch()
            ),
        );
        let grid = self.plan.grid;
        let w = self.w.clone();
        let id = self.id.clone();
        let attempt = async {
            for off in next..=last {
                let slices = slices(&w, &id, off, grid);
                z.append(grid.dp, grid.cp, slices, off).await?;
            }
            z.flush().await
        };
        let r = tokio::select! {
            biased;
            r = attempt => Some(r),
            () = self.w.clock.sleep(ZOMBIE_PATIENCE) => None,
        };
        let committed = z.stats().committed_offset;
        self.account(&z.stats());
        match r {
            Some(Ok(())) => {
                return Err(self.w.violation(
                    "zombie-fenced",
                    format!(
                        "{} zombie epoch {} flushed offset {next} successfully after epoch {epoch} opened",
                        self.id,
                        z.epoch()
                    ),
                ));
            }
            Some(Err(e)) if refused_by_reader(&e) || candidate_invalid(&e) => {
                return Err(self.w.violation(
                    producer_invariant(&e),
                    format!("{} zombie epoch {}: {e}", self.id, z.epoch()),
                ));
            }
            Some(Err(e)) => self.w.event(&who, format!("zombie refused: {e}")),
            None => self.w.event(&who, "zombie still waiting; dropped"),
        }
        if committed > resume {
            return Err(self.w.violation(
                "zombie-fenced",
                format!(
                    "{} zombie epoch {} reports committed offset {committed}, beyond {resume} where epoch {epoch} resumed",
                    self.id,
                    z.epoch()
                ),
            ));
        }
        Ok(())
    }

    /// Counts a crash that stopped the incarnation with `e` (for a cooperative committer
    /// that had uploaded, a crash before its create comes after its listing of `tgb/`).
    fn crashed(&self, e: &ProducerError) {
        let after_listing = self.coop && crashed_at(e, FailPoint::BeforeCreate);
        let after_claim_object = crashed_at(e, FailPoint::AfterClaimObject);
        self.w.count(|t| {
            t.producer_crashes += 1;
            if after_listing {
                t.crashes_after_listing += 1;
            }
            if after_claim_object {
                t.crashes_after_claim_object += 1;
            }
        });
    }

    /// The time a crashed process stays down: up to 2 s, or (at `long_down_rate`) 5-40 s
    /// while its uploads wait at an epoch nobody fenced yet.
    async fn downtime(&mut self) {
        let rate = self.w.cfg.long_down_rate.clamp(0.0, 1.0);
        if rate > 0.0 && self.side.random_bool(rate) {
            let d = self.side.random_range(5_000..=40_000u64);
            self.w.event(&self.who(), format!("stays down for {d}ms"));
            self.w.count(|t| t.long_downs += 1);
            self.w.clock.sleep(Duration::from_millis(d)).await;
        } else {
            self.pause(2000).await;
        }
    }

    /// Runs one opened incarnation until it closes, crashes or is left as a zombie.
    async fn work(&mut self, mut p: Producer, resume: u64) -> Result<End, SimFailure> {
        let cfg = self.w.cfg.clone();
        let mut next = resume + 1;
        loop {
            self.believe(p.stats().committed_offset);
            if next > self.quota {
                self.w
                    .event(&self.who(), format!("closing: {:?}", p.stats()));
                return match p.close().await {
                    Ok(stats) => {
                        if stats.committed_offset != self.quota {
                            return Err(self.w.violation(
                                "exactly-once",
                                format!(
                                    "{} closed at committed offset {}, quota {}",
                                    self.id, stats.committed_offset, self.quota
                                ),
                            ));
                        }
                        self.believe(stats.committed_offset);
                        self.account(&stats);
                        self.w.event(&self.who(), format!("closed: {stats:?}"));
                        Ok(End::Done)
                    }
                    Err(e) if restartable(&e) || self.known_bug(&e) => {
                        self.w.event(&self.who(), format!("close failed: {e}"));
                        self.crashed(&e);
                        Ok(End::Crashed)
                    }
                    Err(e) => Err(self
                        .w
                        .violation(producer_invariant(&e), format!("{} close: {e}", self.id))),
                };
            }
            let r: f64 = self.rng.random();
            let res = if r < cfg.producer_crash_rate {
                if self.rng.random_bool(cfg.zombie_rate.clamp(0.0, 1.0)) {
                    self.w
                        .event(&self.who(), format!("stalls (zombie epoch {})", p.epoch()));
                    return Ok(End::Zombie(Box::new(p), next));
                }
                self.w
                    .event(&self.who(), format!("crashes (drop) before offset {next}"));
                self.account(&p.stats());
                self.w.count(|t| t.producer_crashes += 1);
                return Ok(End::Crashed);
            } else if r < cfg.producer_crash_rate + 0.1 {
                let res = p.flush().await;
                if res.is_ok() {
                    self.believe(next - 1);
                }
                res
            } else {
                let grid = self.plan.grid;
                let slices = slices(&self.w, &self.id, next, grid);
                match p.append(grid.dp, grid.cp, slices, next).await {
                    Ok(_) => {
                        next += 1;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
            if let Err(e) = res {
                self.believe(p.stats().committed_offset);
                if restartable(&e) || self.known_bug(&e) {
                    self.account(&p.stats());
                    self.w.event(&self.who(), format!("stopped: {e}"));
                    self.crashed(&e);
                    return Ok(End::Crashed);
                }
                return Err(self
                    .w
                    .violation(producer_invariant(&e), format!("{}: {e}", self.id)));
            }
        }
    }
}

/// Runs producer `plan.index` until its quota is committed.
pub(crate) async fn producer_actor(
    w: Arc<World>,
    plan: ProducerPlan,
    seed: u64,
    side_seed: u64,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
    let id = format!("p{}", plan.index);
    let quota = plan.quota;
    let skew = draw_skew(&mut rng, w.cfg.max_clock_skew);
    let host = HostClock::new(w.clock.clone(), skew);
    lock(&w.producers).insert(
        id.clone(),
        crate::world::ProducerLog {
            quota,
            ..Default::default()
        },
    );
    let mut a = Actor {
        w,
        plan,
        id,
        quota,
        rng,
        side: StdRng::seed_from_u64(side_seed),
        coop: false,
        last_lag: None,
        host,
        suspender: None,
        life: 0,
    };
    if a.rng.random_bool(a.w.cfg.late_join_rate.clamp(0.0, 1.0)) {
        let d = a.rng.random_range(100..=20_000u64);
        a.w.event(&a.who(), format!("joins late, after {d}ms"));
        a.w.clock.sleep(Duration::from_millis(d)).await;
    }
    let mut zombie: Option<(Box<Producer>, u64, usize)> = None;
    loop {
        let Some(p) = a.open().await? else {
            a.pause(2000).await;
            continue;
        };
        let resume = p.committed_offset();
        let believed = a.believed();
        lock(&a.w.lags).insert((a.id.clone(), p.epoch()), a.last_lag);
        a.w.event(
            &a.who(),
            format!(
                "opened epoch {}, resumes after offset {resume} (believed {believed})",
                p.epoch()
            ),
        );
        if resume < believed {
            return Err(a.w.violation(
                "no-ghost-commit",
                format!(
                    "{} epoch {} resumes after offset {resume}, but an earlier incarnation reported offset {believed} committed",
                    a.id,
                    p.epoch()
                ),
            ));
        }
        if resume > a.quota {
            return Err(a.w.violation(
                "exactly-once",
                format!(
                    "{} resumes after offset {resume}, beyond its quota {}",
                    a.id, a.quota
                ),
            ));
        }
        a.believe(resume);
        if let Some((z, next, life)) = zombie.take() {
            a.zombie(*z, next, p.epoch(), resume).await?;
            let now = a.w.elapsed_ms();
            if let Some(l) = lock(&a.w.lives).get_mut(life) {
                l.ended_ms.get_or_insert(now);
            }
        }
        match a.work(p, resume).await? {
            End::Done => {
                a.end_life();
                break;
            }
            End::Crashed => {
                a.end_life();
                a.downtime().await;
            }
            // The zombie lives on (its uploads with it): its life ends with it.
            End::Zombie(z, next) => {
                a.suspender = None;
                zombie = Some((z, next, a.life));
            }
        }
    }
    if let Some(p) = lock(&a.w.producers).get_mut(&a.id) {
        p.finished = true;
    }
    Ok(())
}
