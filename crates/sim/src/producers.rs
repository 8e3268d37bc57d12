//! The producer process: incarnations of one producer id that append their
//! quota of TGBs, crash, restart, hit fail points and leave zombies behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::PlantedBug;
use batchweave_producer::{
    FailPoint, FailPoints, PolicyKind, Producer, ProducerError, ProducerSettings, ProducerStats,
};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::SimFailure;
use crate::world::{World, filler_len, lock, slice_bytes};

/// How long a zombie's append or flush may take before it is given up on.
const ZOMBIE_PATIENCE: Duration = Duration::from_secs(120);

/// What the producer actor needs to know about the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProducerPlan {
    /// Producer index (the id is `p{index}`).
    pub(crate) index: usize,
    /// TGB grid D (one slice per consumer rank).
    pub(crate) dp: u32,
    /// Smallest `max_lag` that cannot deadlock with the checkpoint interval.
    pub(crate) min_lag: u64,
}

/// The slices of the TGB of `id` at source offset `offset`.
fn slices(w: &World, id: &str, offset: u64, dp: u32) -> Vec<Bytes> {
    let filler = filler_len(&w.cfg, id, offset);
    (0..dp)
        .map(|d| slice_bytes(id, offset, d, filler))
        .collect()
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

/// True if a real process would simply be restarted after `e`.
fn restartable(e: &ProducerError) -> bool {
    match e {
        ProducerError::Stopped(inner) => restartable(inner),
        ProducerError::Crashed(_) | ProducerError::Expired { .. } => true,
        ProducerError::Store(s) => s.is_retryable(),
        _ => false,
    }
}

fn pick_policy(rng: &mut StdRng) -> PolicyKind {
    match rng.random_range(0..5u32) {
        0 => PolicyKind::Naive,
        1 => PolicyKind::Fixed(rng.random_range(1..=3)),
        2 => PolicyKind::Aimd,
        3 => PolicyKind::Incr,
        _ => PolicyKind::default(),
    }
}

/// The incarnation's crash point (at `rate`), plus the planted
/// state-map-check bug when `skip_check` (draws the same random numbers
/// either way, so a plant does not change the schedule).
fn fail_points(
    rng: &mut StdRng,
    rate: f64,
    skip_check: bool,
) -> (FailPoints, Option<(FailPoint, u64)>) {
    let armed = rng.random_bool(rate.clamp(0.0, 1.0)).then(|| {
        let point = match rng.random_range(0..3u32) {
            0 => FailPoint::AfterTgbPut,
            1 => FailPoint::BeforeCreate,
            _ => FailPoint::AfterCreate,
        };
        (point, rng.random_range(1..=5u64))
    });
    if armed.is_none() && !skip_check {
        return (FailPoints::default(), None);
    }
    let hits = AtomicU64::new(0);
    let fp = FailPoints::new(move |p| {
        if p == FailPoint::SkipStateMapCheck {
            return skip_check;
        }
        armed.is_some_and(|(point, nth)| {
            p == point && hits.fetch_add(1, Ordering::SeqCst) + 1 == nth
        })
    });
    (fp, armed)
}

/// Per-id bookkeeping of one producer actor.
struct Actor {
    w: Arc<World>,
    plan: ProducerPlan,
    id: String,
    quota: u64,
    rng: StdRng,
    /// `max_lag` of the incarnation opened last.
    last_lag: Option<u64>,
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

impl Actor {
    fn who(&self) -> String {
        self.id.clone()
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

    /// Opens a new incarnation; `None` when it died while opening.
    async fn open(&mut self) -> Result<Option<Producer>, SimFailure> {
        let (fail, armed) = fail_points(
            &mut self.rng,
            self.w.cfg.fail_point_rate,
            self.w.cfg.plant == Some(PlantedBug::SkipStateMapCheck),
        );
        let max_lag = self
            .rng
            .random_bool(0.3)
            .then(|| self.plan.min_lag + self.rng.random_range(0..=4));
        self.last_lag = max_lag;
        let policy = pick_policy(&mut self.rng);
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
            max_commit_age: self.w.cfg.max_commit_age,
            ..Default::default()
        };
        self.w.count(|t| t.incarnations += 1);
        self.w.event(
            &self.who(),
            format!(
                "opening: policy {:?}, max_buffered {max_buffered}, max_lag {max_lag:?}, fail point {armed:?}",
                settings.policy
            ),
        );
        match Producer::builder(self.w.store.clone(), self.id.clone())
            .settings(settings)
            .fail_points(fail)
            .open()
            .await
        {
            Ok(p) => Ok(Some(p)),
            Err(e) if e.is_fenced() && !self.w.cfg.strict => {
                // Known bug: after a stale listing `open` builds on genesis,
                // claims epoch 1 and is fenced by its own older entry.
                self.w.event(
                    &self.who(),
                    format!("spurious fence on open (known bug): {e}"),
                );
                Ok(None)
            }
            Err(e) if restartable(&e) => {
                self.w
                    .event(&self.who(), format!("died while opening: {e}"));
                self.w.count(|t| t.producer_crashes += 1);
                Ok(None)
            }
            Err(e) => Err(self
                .w
                .violation("producer-error", format!("{} open failed: {e}", self.id))),
        }
    }

    /// A zombie (an older incarnation still alive) tries to append and
    /// flush after the newer incarnation `epoch` resumed at `resume`.
    async fn zombie(
        &self,
        mut z: Producer,
        next: u64,
        epoch: u64,
        resume: u64,
    ) -> Result<(), SimFailure> {
        self.w.count(|t| t.zombies += 1);
        let who = format!("{}z", self.id);
        self.w.event(
            &who,
            format!(
                "zombie epoch {} appends offset {next} and flushes (epoch {epoch} is live)",
                z.epoch()
            ),
        );
        let dp = self.plan.dp;
        let slices = slices(&self.w, &self.id, next, dp);
        let attempt = async {
            z.append(dp, 1, slices, next).await?;
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
                    Err(e) if restartable(&e) || (!self.w.cfg.strict && known_rebase_bug(&e)) => {
                        self.w.event(&self.who(), format!("close failed: {e}"));
                        self.w.count(|t| t.producer_crashes += 1);
                        Ok(End::Crashed)
                    }
                    Err(e) => Err(self
                        .w
                        .violation("producer-error", format!("{} close: {e}", self.id))),
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
                let slices = slices(&self.w, &self.id, next, self.plan.dp);
                match p.append(self.plan.dp, 1, slices, next).await {
                    Ok(_) => {
                        next += 1;
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            };
            if let Err(e) = res {
                self.believe(p.stats().committed_offset);
                if restartable(&e) || (!self.w.cfg.strict && known_rebase_bug(&e)) {
                    self.account(&p.stats());
                    self.w.event(&self.who(), format!("stopped: {e}"));
                    self.w.count(|t| t.producer_crashes += 1);
                    return Ok(End::Crashed);
                }
                return Err(self
                    .w
                    .violation("producer-error", format!("{}: {e}", self.id)));
            }
        }
    }
}

/// Runs producer `plan.index` until its quota is committed.
pub(crate) async fn producer_actor(
    w: Arc<World>,
    plan: ProducerPlan,
    seed: u64,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
    let id = format!("p{}", plan.index);
    let quota = rng.random_range(w.cfg.tgbs_per_producer.clone());
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
        last_lag: None,
    };
    if a.rng.random_bool(a.w.cfg.late_join_rate.clamp(0.0, 1.0)) {
        let d = a.rng.random_range(100..=20_000u64);
        a.w.event(&a.who(), format!("joins late, after {d}ms"));
        a.w.clock.sleep(Duration::from_millis(d)).await;
    }
    let mut zombie: Option<(Box<Producer>, u64)> = None;
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
        if let Some((z, next)) = zombie.take() {
            a.zombie(*z, next, p.epoch(), resume).await?;
        }
        match a.work(p, resume).await? {
            End::Done => break,
            End::Crashed => a.pause(2000).await,
            End::Zombie(z, next) => zombie = Some((z, next)),
        }
    }
    if let Some(p) = lock(&a.w.producers).get_mut(&a.id) {
        p.finished = true;
    }
    Ok(())
}
