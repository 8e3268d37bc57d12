//! A consumer rank: reads every step of its group, checks every batch against the
//! live chain, checkpoints every K steps (recording its live mark), crashes and
//! restores from its last checkpoint; a group may stop early and be retired.

use std::sync::Arc;
use std::time::Duration;

use batchweave_consumer::{
    Batch, Consumer, ConsumerBuilder, ConsumerError, ConsumerSettings, ConsumerState, MeshConfig,
    RankConfig,
};
use batchweave_gc::{GcSettings, Reclaimer};
use batchweave_manifest::TGB_DIR;
use batchweave_store::StoreError;
use batchweave_tgb::{Grid, Position, payload, plan, steps_covered};
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::SimFailure;
use crate::backend::Mark;
use crate::log::lock;
use crate::world::{GroupPlan, RankPlan, StepSeen, World, slice_len};

/// Consecutive unexplained errors tolerated before they count as a violation.
pub(crate) const MAX_ERRORS: u32 = 30;

/// Rank `rank` of a `dp x cp x tp x pp` group `group`.
pub(crate) fn config(group: &str, rank: u32, [dp, cp, tp, pp]: [u32; 4]) -> RankConfig {
    let mesh = MeshConfig::new(dp * cp * tp * pp, dp, cp, tp, pp);
    RankConfig::new(rank, mesh, group)
}

/// A consumer builder for `rank` prefetching `prefetch` steps, polling 5 ms .. 200 ms.
pub(crate) fn builder(w: &World, rank: &RankConfig, prefetch: usize) -> ConsumerBuilder {
    Consumer::builder(w.store.clone(), rank.clone()).settings(ConsumerSettings {
        prefetch,
        footer_lookahead: w.cfg.footer_lookahead,
        poll_min: Duration::from_millis(5),
        poll_max: Duration::from_millis(200),
        ..ConsumerSettings::default()
    })
}

/// The plans of every rank of `g`.
pub(crate) fn rank_plans(g: &GroupPlan, grid: Grid, planned_tgbs: u64) -> Vec<RankPlan> {
    let stop = g
        .stop_tgbs
        .map(|t| steps_covered(grid, g.grid(), t.min(planned_tgbs)).unwrap_or(0));
    (0..g.world())
        .map(|rank| {
            let config = config(&g.name, rank, [g.dp, g.cp, g.tp, g.pp]);
            let pos = config.position().unwrap_or(Position { d: 0, c: 0 });
            RankPlan {
                group: g.index,
                rank,
                config,
                pos,
                checkpoint_every: g.checkpoint_every,
                stop,
            }
        })
        .collect()
}

/// The live mark a checkpoint at `state` needs: its version and the lowest TGB step its
/// next consumer step reads.
pub(crate) fn mark_of(w: &World, grid: Grid, pos: Position, state: &ConsumerState) -> Mark {
    let step = plan(w.grid, grid, pos, state.next_step)
        .ok()
        .and_then(|r| r.iter().map(|r| r.tgb_index).min())
        .unwrap_or(0);
    (state.version, step)
}

/// What the live chain holds for one consumer step.
pub(crate) struct Expected {
    pub(crate) tgb_step: u64,
    pub(crate) first_slice: u32,
    pub(crate) slice_count: u32,
    pub(crate) part: Option<(u32, u32)>,
    pub(crate) key: String,
    pub(crate) producer: String,
    pub(crate) sequence: u64,
    pub(crate) data: Bytes,
}

/// The live chain's batch of consumer step `step` for position `pos` of grid `grid`:
/// `Ok(None)` if the step is not (yet) committed.
pub(crate) fn expected(
    w: &World,
    grid: Grid,
    pos: Position,
    step: u64,
) -> Result<Option<Expected>, String> {
    let reads = plan(w.grid, grid, pos, step).map_err(|e| format!("plan: {e}"))?;
    let [r] = reads.as_slice() else {
        return Err(format!("plan has {} reads", reads.len()));
    };
    let Some(t) = w.backend.step(r.tgb_index) else {
        return Ok(None);
    };
    let data = payload::expected_read(
        &t.producer,
        t.offset,
        r.first_slice..r.first_slice + r.slice_count,
        r.part,
        |s| slice_len(&w.cfg, &t.producer, t.offset, s),
    )
    .map_err(|e| format!("part: {e}"))?;
    Ok(Some(Expected {
        tgb_step: r.tgb_index,
        first_slice: r.first_slice,
        slice_count: r.slice_count,
        part: r.part,
        key: t.key,
        producer: t.producer,
        sequence: t.sequence,
        data,
    }))
}

/// Checks that `b` is exactly the live chain's batch of its step for `pos` in `grid`.
/// `Err` is the description of the difference.
pub(crate) fn check_batch(
    w: &World,
    grid: Grid,
    pos: Position,
    b: &Batch,
) -> Result<StepSeen, String> {
    let (Some(data), Some(src), 1, 1) = (
        b.data.first(),
        b.sources.first(),
        b.data.len(),
        b.sources.len(),
    ) else {
        return Err(format!(
            "step {} has {} reads, expected 1",
            b.step,
            b.data.len()
        ));
    };
    let what = || {
        payload::parse_header(data).map_or("unreadable bytes".to_string(), |(p, o, s)| {
            format!("a slice of ({p}, offset {o}, slice {s})")
        })
    };
    let Some(e) = expected(w, grid, pos, b.step)? else {
        return Err(format!(
            "step {} (TGB step {}, {} from {}) is not in the live chain ({} steps): {}",
            b.step,
            src.tgb_step,
            src.key,
            src.producer_id,
            w.backend.total(),
            what()
        ));
    };
    let same = (
        src.tgb_step,
        src.first_slice,
        src.slice_count,
        src.part,
        src.key.as_str(),
        src.producer_id.as_str(),
        src.sequence,
    ) == (
        e.tgb_step,
        e.first_slice,
        e.slice_count,
        e.part,
        e.key.as_str(),
        e.producer.as_str(),
        e.sequence,
    );
    if !same || *data != e.data {
        return Err(format!(
            "step {}: got {} slices {}+{} part {:?} of TGB step {} ({}), bytes {}; the live chain has {} slices {}+{} part {:?} of TGB step {} ({} seq {})",
            b.step,
            src.key,
            src.first_slice,
            src.slice_count,
            src.part,
            src.tgb_step,
            what(),
            if *data == e.data { "equal" } else { "differ" },
            e.key,
            e.first_slice,
            e.slice_count,
            e.part,
            e.tgb_step,
            e.producer,
            e.sequence
        ));
    }
    Ok(StepSeen {
        step: b.step,
        key: e.key,
        tgb_step: e.tgb_step,
        first_slice: e.first_slice,
        slice_count: e.slice_count,
        part: e.part,
        data: e.data,
    })
}

/// Classifies a consumer error of a live rank: `Ok(())` to retry, `Err` for a violation.
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

/// Opens (no checkpoint) or restores a live rank's consumer, retrying store trouble.
pub(crate) async fn start(
    w: &World,
    who: &str,
    config: &RankConfig,
    prefetch: usize,
    from: Option<&ConsumerState>,
) -> Result<Consumer, SimFailure> {
    let mut errors = 0;
    loop {
        let b = builder(w, config, prefetch);
        let r = match from {
            Some(st) => b.state(st.clone()).open().await,
            None => b.open().await,
        };
        match r {
            Ok(c) => return Ok(c),
            Err(e) => judge(w, who, &e, &mut errors).await?,
        }
    }
}

/// Checks a live rank's batch and records it (or compares it with the step recorded
/// before a crash).
pub(crate) fn record(w: &World, plan: &RankPlan, who: &str, b: &Batch) -> Result<(), SimFailure> {
    let seen = check_batch(w, plan.config.grid(), plan.pos, b)
        .map_err(|d| w.violation("live-chain-batch", format!("{who}: {d}")))?;
    let mut ranks = lock(&w.ranks);
    let Some(log) = ranks.get_mut(&plan.id()) else {
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

/// Reads until its stop step, or until the target TGB count is known and its steps
/// are covered.
pub(crate) async fn rank_actor(
    w: Arc<World>,
    plan: RankPlan,
    seed: u64,
    mut target: watch::Receiver<Option<u64>>,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
    let who = plan.who();
    let config = plan.config.clone();
    let prefetch = rng.random_range(0..=3);
    let grid = config.grid();
    // Ranks are not equally fast: a rank's compute time per step (its TP/PP peers
    // checkpoint at other moments).
    let step_time = Duration::from_millis(rng.random_range(0..=200));
    let mut c = start(&w, &who, &config, prefetch, None).await?;
    w.event(
        &who,
        format!(
            "opened at {:?} of {}x{}x{}x{}, prefetch {}, stop at {:?}",
            plan.pos,
            config.mesh.dp,
            config.mesh.cp,
            config.mesh.tp,
            config.mesh.pp,
            prefetch,
            plan.stop
        ),
    );
    let mut since = 0u64;
    let mut errors = 0u32;
    let crash_rate = w.cfg.consumer_crash_rate.clamp(0.0, 1.0);
    loop {
        let goal = target
            .borrow_and_update()
            .map(|t| steps_covered(w.grid, grid, t).unwrap_or(0));
        let goal = match (goal, plan.stop) {
            (Some(g), Some(s)) => Some(g.min(s)),
            (g, s) => g.or(s),
        };
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
        let waiting = goal.is_none() || target.borrow().is_none();
        let turn = tokio::select! {
            biased;
            r = c.next() => Turn::Batch(r),
            _ = target.changed(), if waiting => Turn::Target,
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
                record(&w, &plan, &who, &b)?;
                w.clock.sleep(step_time).await;
                since += 1;
                if since >= plan.checkpoint_every {
                    since = 0;
                    let st = c.state();
                    if let Some(log) = lock(&w.ranks).get_mut(&plan.id()) {
                        log.last_checkpoint = Some(st.clone());
                        log.history.push(st.clone());
                    }
                    // The checkpoint is durable: from now on it is what this rank
                    // restores, and what GC must keep.
                    w.backend
                        .set_mark(plan.id(), Some(mark_of(&w, grid, plan.pos, &st)));
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
                .get(&plan.id())
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
            c = start(&w, &who, &config, prefetch, from.as_ref()).await?;
        }
    }
    let st = c.state();
    w.event(&who, format!("done at step {}", st.next_step));
    if let Some(log) = lock(&w.ranks).get_mut(&plan.id()) {
        log.final_state = Some(st);
    }
    Ok(())
}

/// Retires group `name` (its ranks have stopped), retrying store trouble. Its ranks'
/// marks stop counting first: from the moment the retirement starts nothing of theirs
/// needs protection.
pub(crate) async fn retire(
    w: &World,
    name: &str,
    ranks: &[(usize, u32)],
) -> Result<(), SimFailure> {
    for r in ranks {
        w.backend.set_mark(*r, None);
    }
    let gc = Reclaimer::new(w.store.clone(), GcSettings::default());
    for attempt in 0.. {
        match gc.retire_group(name).await {
            Ok(n) => {
                w.event("gc", format!("retired group {name} ({n} objects)"));
                return Ok(());
            }
            Err(e) if attempt < 100 => {
                w.event("gc", format!("retiring {name} failed (retrying): {e}"));
                w.clock.sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(w.violation("gc-error", format!("retire {name}: {e}")));
            }
        }
    }
    Ok(())
}
