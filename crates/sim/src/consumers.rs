//! A consumer rank: reads every step, verifies every byte, checkpoints every
//! K steps, crashes and restores from its last checkpoint.

use std::sync::Arc;
use std::time::Duration;

use batchweave_consumer::{Batch, Consumer, ConsumerConfig, ConsumerError, ConsumerState};
use batchweave_manifest::TGB_DIR;
use batchweave_store::StoreError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::SimFailure;
use crate::world::{StepSeen, World, filler_len, lock, parse_slice, slice_bytes};

/// The consumer group of the simulation.
pub(crate) const GROUP: &str = "train";

/// Consecutive unexplained errors tolerated before they count as a violation.
const MAX_ERRORS: u32 = 30;

/// What a rank actor needs to know about the run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankPlan {
    pub(crate) rank: u32,
    pub(crate) ranks: u32,
    pub(crate) checkpoint_every: u64,
}

pub(crate) fn rank_config(plan: RankPlan, prefetch: usize) -> ConsumerConfig {
    ConsumerConfig {
        prefetch,
        poll_min: Duration::from_millis(5),
        poll_max: Duration::from_millis(200),
        ..ConsumerConfig::new(plan.rank, plan.ranks, [plan.ranks, 1, 1, 1], GROUP)
    }
}

/// Classifies a consumer error: `Ok(())` to retry, `Err` for a violation.
pub(crate) async fn judge(
    w: &World,
    who: &str,
    e: &ConsumerError,
    errors: &mut u32,
) -> Result<(), SimFailure> {
    *errors += 1;
    let missing_tgb = match e {
        ConsumerError::Store(StoreError::NotFound { path }) if path.starts_with(TGB_DIR) => {
            !w.backend.exists(path).await
        }
        _ => false,
    };
    if missing_tgb {
        return Err(w.violation(
            "visible-object-present",
            format!("{who}: a visible TGB's object is missing: {e}"),
        ));
    }
    match e {
        ConsumerError::DataReclaimed { .. } => {
            return Err(w.violation("reclaim-safety", format!("{who}: {e}")));
        }
        ConsumerError::Data { .. } | ConsumerError::Manifest { .. } => {
            return Err(w.violation("data-integrity", format!("{who}: {e}")));
        }
        _ => {}
    }
    if !e.is_retryable() && *errors > MAX_ERRORS {
        return Err(w.violation(
            "consumer-error",
            format!("{who}: {errors} consecutive errors, the last: {e}"),
        ));
    }
    w.event(who, format!("error (retrying): {e}"));
    w.clock.sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// Opens (no checkpoint) or restores a consumer, retrying store trouble.
pub(crate) async fn start(
    w: &World,
    who: &str,
    config: &ConsumerConfig,
    from: Option<&ConsumerState>,
) -> Result<Consumer, SimFailure> {
    let mut errors = 0;
    loop {
        let r = match from {
            Some(st) => Consumer::restore(w.store.clone(), config.clone(), st).await,
            None => Consumer::open(w.store.clone(), config.clone()).await,
        };
        match r {
            Ok(c) => return Ok(c),
            Err(e) => judge(w, who, &e, &mut errors).await?,
        }
    }
}

/// Checks a batch's bytes and records it (or compares it with the step
/// recorded before a crash).
pub(crate) fn record(w: &World, plan: RankPlan, who: &str, b: &Batch) -> Result<(), SimFailure> {
    let (Some(data), Some(src), 1, 1) = (
        b.data.first(),
        b.sources.first(),
        b.data.len(),
        b.sources.len(),
    ) else {
        return Err(w.violation(
            "data-integrity",
            format!(
                "{who}: step {} has {} reads, expected 1",
                b.step,
                b.data.len()
            ),
        ));
    };
    let Some((producer, offset, d)) = parse_slice(data) else {
        return Err(w.violation(
            "data-integrity",
            format!("{who}: step {}: unreadable slice", b.step),
        ));
    };
    let expected = slice_bytes(
        &producer,
        offset,
        plan.rank,
        filler_len(&w.cfg, &producer, offset),
    );
    if d != plan.rank || producer != src.producer_id || *data != expected || src.tgb_step != b.step
    {
        return Err(w.violation(
            "data-integrity",
            format!(
                "{who}: step {} from {} (producer {} seq {}): got slice of ({producer}, offset {offset}, d {d}), \
                 bytes {}",
                b.step,
                src.key,
                src.producer_id,
                src.sequence,
                if *data == expected { "match" } else { "differ" }
            ),
        ));
    }
    let seen = StepSeen {
        step: b.step,
        producer,
        sequence: src.sequence,
        key: src.key.clone(),
        offset,
    };
    let mut ranks = lock(&w.ranks);
    let Some(log) = ranks.get_mut(plan.rank as usize) else {
        return Ok(());
    };
    let known = log.seen.len() as u64;
    if b.step < known {
        let before = log.seen.get(b.step as usize).cloned();
        if before.as_ref() != Some(&seen) {
            drop(ranks);
            return Err(w.violation(
                "exact-restore",
                format!(
                    "{who}: replayed step {} is {seen:?}, before the crash it was {before:?}",
                    b.step
                ),
            ));
        }
    } else if b.step == known {
        log.seen.push(seen);
    } else {
        drop(ranks);
        return Err(w.violation(
            "no-skipped-steps",
            format!("{who}: got step {} after only {known} steps", b.step),
        ));
    }
    Ok(())
}

enum Turn {
    Batch(Result<Batch, ConsumerError>),
    Target,
    Crash,
}

/// Reads until the target step count is known and reached.
pub(crate) async fn rank_actor(
    w: Arc<World>,
    plan: RankPlan,
    seed: u64,
    mut target: watch::Receiver<Option<u64>>,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = format!("r{}", plan.rank);
    let config = rank_config(plan, rng.random_range(0..=3));
    let mut c = start(&w, &who, &config, None).await?;
    w.event(&who, format!("opened, prefetch {}", config.prefetch));
    let mut since = 0u64;
    let mut errors = 0u32;
    let crash_rate = w.cfg.consumer_crash_rate.clamp(0.0, 1.0);
    loop {
        let goal = *target.borrow_and_update();
        if let Some(t) = goal
            && c.state().next_step >= t
        {
            break;
        }
        let mid_crash = rng
            .random_bool(crash_rate / 2.0)
            .then(|| Duration::from_millis(rng.random_range(1..=200)));
        let timer = async {
            match mid_crash {
                Some(d) => w.clock.sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let turn = tokio::select! {
            biased;
            r = c.next() => Turn::Batch(r),
            _ = target.changed(), if goal.is_none() => Turn::Target,
            () = timer => Turn::Crash,
        };
        let crash = match turn {
            Turn::Target => false,
            Turn::Crash => true,
            Turn::Batch(Err(e)) => {
                judge(&w, &who, &e, &mut errors).await?;
                false
            }
            Turn::Batch(Ok(b)) => {
                errors = 0;
                record(&w, plan, &who, &b)?;
                since += 1;
                if since >= plan.checkpoint_every {
                    since = 0;
                    let st = c.state();
                    if let Some(log) = lock(&w.ranks).get_mut(plan.rank as usize) {
                        log.last_checkpoint = Some(st.clone());
                    }
                    match c.checkpoint_committed(&st).await {
                        Ok(()) => w.event(
                            &who,
                            format!("checkpoint at step {} (v{})", st.next_step, st.version),
                        ),
                        Err(e) if e.is_retryable() => w.event(
                            &who,
                            format!(
                                "checkpoint {} saved, watermark not written: {e}",
                                st.next_step
                            ),
                        ),
                        Err(e) => {
                            return Err(
                                w.violation("consumer-error", format!("{who}: watermark: {e}"))
                            );
                        }
                    }
                }
                rng.random_bool(crash_rate)
            }
        };
        if crash {
            drop(c);
            let from = lock(&w.ranks)
                .get(plan.rank as usize)
                .and_then(|l| l.last_checkpoint.clone());
            w.event(
                &who,
                format!(
                    "crashes; restores from {:?}",
                    from.as_ref().map(|s| (s.next_step, s.version))
                ),
            );
            w.count(|t| t.consumer_restores += 1);
            since = 0;
            c = start(&w, &who, &config, from.as_ref()).await?;
        }
    }
    w.event(&who, format!("done at step {}", c.state().next_step));
    Ok(())
}
