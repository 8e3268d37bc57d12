//! One simulation run: build the world from the seed, run every actor to
//! the end on a paused single-threaded runtime, probe, check, digest.

use std::sync::Arc;

use futures::future::{try_join, try_join_all};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::check;
use crate::consumers::{RankPlan, rank_actor, rank_config, record, start};
use crate::producers::{ProducerPlan, producer_actor};
use crate::reclaim::{gc_actor, gc_pass};
use crate::world::{Fnv, RankLog, World, lock};
use crate::{SimConfig, SimFailure, SimReport};

/// Runs the simulation for `seed` and checks its invariants.
///
/// Builds its own current-thread tokio runtime with paused time, so runs
/// are isolated from each other and from the caller, and a seed replays bit
/// for bit: equal seeds (and configs) give equal [`SimReport::digest`]s.
/// Every `tokio::select!` on the simulated paths is `biased;`, so when two
/// branches are ready in one poll the first wins rather than one picked by
/// tokio's unseeded thread-local RNG (the runtime's own `rng_seed` needs
/// `tokio_unstable`).
pub fn run(seed: u64, cfg: &SimConfig) -> Result<SimReport, SimFailure> {
    cfg.validate()
        .map_err(|detail| SimFailure::Setup { seed, detail })?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| SimFailure::Setup {
            seed,
            detail: format!("tokio runtime: {e}"),
        })?;
    rt.block_on(simulate(seed, cfg.clone()))
}

async fn simulate(seed: u64, cfg: SimConfig) -> Result<SimReport, SimFailure> {
    let mut root = StdRng::seed_from_u64(seed);
    let w = Arc::new(World::new(seed, cfg.clone(), &mut root));
    let n_producers = root.random_range(cfg.producers.clone());
    let ranks = root.random_range(cfg.ranks.clone());
    let checkpoint_every = root.random_range(cfg.checkpoint_every.clone());
    *lock(&w.ranks) = (0..ranks).map(|_| RankLog::default()).collect();
    w.event(
        "sim",
        format!("seed {seed}: {n_producers} producers, {ranks} ranks, checkpoint every {checkpoint_every}"),
    );

    let (target_tx, target_rx) = watch::channel(None::<u64>);
    let (stop_tx, stop_rx) = watch::channel(false);
    let rank_plans: Vec<RankPlan> = (0..ranks)
        .map(|rank| RankPlan {
            rank,
            ranks,
            checkpoint_every,
        })
        .collect();
    let consumers: Vec<_> = rank_plans
        .iter()
        .map(|p| rank_actor(w.clone(), *p, root.random(), target_rx.clone()))
        .collect();
    let producers: Vec<_> = (0..n_producers)
        .map(|index| {
            let plan = ProducerPlan {
                index,
                dp: ranks,
                min_lag: checkpoint_every + 1,
            };
            producer_actor(w.clone(), plan, root.random())
        })
        .collect();
    let gc_seed: u64 = root.random();

    let produce = async {
        try_join_all(producers).await?;
        let chain = check::chain(&w)?;
        let total = chain
            .values()
            .next_back()
            .map_or(0, |m| m.first_step + m.tgbs.len() as u64);
        w.event("sim", format!("all producers done: {total} steps"));
        let _ = target_tx.send(Some(total));
        Ok::<_, SimFailure>(())
    };
    let work = async {
        try_join(produce, try_join_all(consumers)).await?;
        let _ = stop_tx.send(true);
        Ok::<_, SimFailure>(())
    };
    let gc = async {
        if cfg.gc {
            gc_actor(w.clone(), gc_seed, stop_rx).await
        } else {
            Ok(())
        }
    };
    let everything = try_join(work, gc);
    let finished = tokio::select! {
        biased;
        r = everything => Some(r),
        () = w.clock.sleep(cfg.deadline) => None,
    };
    match finished {
        None => return Err(w.stuck(stuck_detail(&w))),
        Some(Err(f)) => return Err(f),
        Some(Ok(_)) => {}
    }

    probe(&w, &rank_plans, &mut root).await?;

    let chain = check::chain(&w)?;
    let steps = check::steps(&w, &chain)?;
    let newest = chain.values().next_back().cloned().unwrap_or_default();
    check::producers(&w, &steps, &newest)?;
    check::ranks(&w, &steps)?;
    if cfg.check_max_lag {
        check::max_lag(&w)?;
    }

    let last_draw: u64 = root.random();
    let virtual_ms = w.elapsed_ms();
    let events = w.events();
    let fs = w.faults.stats();
    let mut h = Fnv::default();
    for e in &events {
        h.bytes(e.as_bytes()).bytes(b"\n");
    }
    if let Some(last) = w.backend.manifest_writes().last() {
        h.bytes(&last.bytes);
    }
    h.u64(virtual_ms)
        .u64(last_draw)
        .u64(fs.before)
        .u64(fs.after)
        .u64(fs.stale);
    let tally = lock(&w.tally).clone();
    Ok(SimReport {
        seed,
        digest: h.0,
        producers: n_producers,
        ranks,
        steps: steps.len() as u64,
        versions: newest.version,
        incarnations: tally.incarnations,
        producer_crashes: tally.producer_crashes,
        zombies: tally.zombies,
        consumer_restores: tally.consumer_restores,
        gc_passes: tally.gc_passes,
        gc_interrupted: tally.gc_interrupted,
        conflicts: tally.conflicts,
        ambiguous: tally.ambiguous,
        lost_replies_recovered: tally.lost_replies_recovered,
        ghosts_prevented: tally.ghosts_prevented,
        reclaimed: (
            tally.tgbs_reclaimed,
            tally.orphans_reclaimed,
            tally.manifests_reclaimed,
        ),
        faults: (fs.before, fs.after, fs.stale),
        planted_hits: w.backend.planted_hits(),
        virtual_ms,
        events: events.len(),
    })
}

/// After the run: one more GC pass, then every rank restores from its last
/// checkpoint and must replay the next step exactly (nothing a live
/// watermark needs was reclaimed).
async fn probe(w: &World, plans: &[RankPlan], rng: &mut StdRng) -> Result<(), SimFailure> {
    if w.cfg.gc {
        gc_pass(w, rng, false).await?;
    }
    for plan in plans {
        let who = format!("r{}*", plan.rank);
        let (from, seen) = {
            let ranks = lock(&w.ranks);
            let log = ranks.get(plan.rank as usize);
            (
                log.and_then(|l| l.last_checkpoint.clone()),
                log.map_or(0, |l| l.seen.len() as u64),
            )
        };
        let next = from.as_ref().map_or(0, |s| s.next_step);
        if next >= seen {
            continue;
        }
        w.event(&who, format!("probe: restore at step {next}"));
        let mut c = start(w, &who, &rank_config(*plan, 0), from.as_ref()).await?;
        let mut errors = 0;
        loop {
            match c.next().await {
                Ok(b) => {
                    record(w, *plan, &who, &b)?;
                    break;
                }
                Err(e) => crate::consumers::judge(w, &who, &e, &mut errors).await?,
            }
        }
    }
    Ok(())
}

fn stuck_detail(w: &World) -> String {
    let producers: Vec<String> = lock(&w.producers)
        .iter()
        .filter(|(_, p)| !p.finished)
        .map(|(id, p)| format!("{id} (believed {}/{})", p.believed, p.quota))
        .collect();
    let ranks: Vec<usize> = lock(&w.ranks).iter().map(|r| r.seen.len()).collect();
    format!(
        "not finished after {:?} of virtual time; unfinished producers {producers:?}, steps seen per rank {ranks:?}",
        w.cfg.deadline
    )
}
