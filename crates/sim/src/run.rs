//! One simulation run: draw the world from the seed, run every actor to the end on a
//! paused single-threaded runtime, probe, check, digest.

use std::sync::Arc;

use batchweave_consumer::planted::{PlantedConsumerBugs, plant};
use batchweave_manifest::Manifest;
use batchweave_producer::planted::{PlantedProducerBugs, plant as plant_producer};
use batchweave_tgb::Grid;
use futures::future::{try_join, try_join_all, try_join3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::check;
use crate::consumers::{config, rank_actor, rank_plans, record, retire, start};
use crate::log::lock;
use crate::probe::{forge, forged_refused, prober};
use crate::producers::{ProducerPlan, producer_actor};
use crate::reclaim::{Gc, gc_actor, gc_pass};
use crate::world::{CoopPlan, Fnv, GroupPlan, RankLog, RankPlan, Shape, World};
use crate::{CoopReport, PlantedBug, SimConfig, SimFailure, SimReport};

/// Salt of the random stream of cooperative commits and the faults aimed at them (its
/// own, so that with them off the root stream draws what it drew before they existed).
const SIDE_SALT: u64 = 0x636f_6f70_2d73_696d;

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
    // Consumer and producer plants are per thread: this run's runtime is this thread.
    let _plants = Plants::set(cfg.plant);
    rt.block_on(simulate(seed, cfg.clone()))
}

/// Sets the consumer and producer plants of this thread for one run, and restores the
/// previous ones after.
struct Plants(PlantedConsumerBugs, PlantedProducerBugs);

impl Plants {
    fn set(p: Option<PlantedBug>) -> Self {
        let consumer = PlantedConsumerBugs {
            skip_boundary: p == Some(PlantedBug::SkipBoundaryCheck),
            skip_extension: p == Some(PlantedBug::SkipExtensionCheck),
            shared_rank_mark: p == Some(PlantedBug::SharedRankMark),
            trust_seals: false,
        };
        let producer = PlantedProducerBugs {
            publish_gap: p == Some(PlantedBug::PublishGap),
            publish_stale_epoch: p == Some(PlantedBug::PublishStaleEpoch),
            skip_others_age_check: p == Some(PlantedBug::SkipOthersAgeCheck),
            record_old_claims: p == Some(PlantedBug::RecordOldClaims),
            record_same_epoch_claims: p == Some(PlantedBug::RecordSameEpochClaims),
        };
        Self(plant(consumer), plant_producer(producer))
    }
}

impl Drop for Plants {
    fn drop(&mut self) {
        plant(self.0);
        plant_producer(self.1);
    }
}

/// Draws the stream's grid and the consumer groups.
fn draw_shape(cfg: &SimConfig, rng: &mut StdRng, planned_tgbs: u64) -> Shape {
    let n_groups = rng.random_range(cfg.groups.clone());
    let mut groups: Vec<GroupPlan> = Vec::with_capacity(n_groups);
    for index in 0..n_groups {
        let mut dp = rng.random_range(cfg.ranks.clone());
        let mut cp = if cfg.remap {
            rng.random_range(1..=2)
        } else {
            1
        };
        let (mut tp, mut pp) = if cfg.tp_pp {
            (
                if rng.random_bool(0.5) { 2 } else { 1 },
                if rng.random_bool(0.15) { 2 } else { 1 },
            )
        } else {
            (1, 1)
        };
        if !cfg.remap && index > 0 {
            dp = groups[0].dp;
        }
        let cap = if index == 0 { 8 } else { 4 };
        while dp * cp * tp * pp > cap {
            if dp > 1 && cfg.remap {
                dp -= 1;
            } else if pp > 1 {
                pp = 1;
            } else if cp > 1 {
                cp = 1;
            } else {
                tp = 1;
            }
        }
        let checkpoint_every = rng.random_range(cfg.checkpoint_every.clone());
        let stop_tgbs =
            (index > 0 && rng.random_bool(cfg.retire_rate.clamp(0.0, 1.0))).then(|| {
                let f = rng.random_range(0.15..=0.7);
                ((planned_tgbs as f64 * f) as u64).max(1)
            });
        groups.push(GroupPlan {
            index,
            name: format!("g{index}"),
            dp,
            cp,
            tp,
            pp,
            checkpoint_every,
            stop_tgbs,
        });
    }
    let grid = if cfg.remap {
        Grid::new(rng.random_range(1..=4), rng.random_range(1..=2))
    } else {
        groups[0].grid()
    };
    // K consumer steps of a group read about K * D_c / D_t TGBs.
    let interval_tgbs = groups
        .iter()
        .map(|g| (g.checkpoint_every * u64::from(g.dp)).div_ceil(u64::from(grid.dp)))
        .max()
        .unwrap_or(1);
    let min_lag = interval_tgbs + 2;
    let uniform_lag = rng
        .random_bool(cfg.uniform_lag_rate.clamp(0.0, 1.0))
        .then(|| min_lag + rng.random_range(0..=4));
    Shape {
        grid,
        groups,
        uniform_lag,
        min_lag,
        interval_tgbs,
    }
}

/// Logs the run's shape: producers, TGBs, grid, groups and a uniform `max_lag`.
fn announce(w: &World, seed: u64, n_producers: usize, planned: u64) {
    let groups: Vec<String> = w
        .groups
        .iter()
        .map(|g| {
            format!(
                "{} {}x{}x{}x{} every {}{}",
                g.name,
                g.dp,
                g.cp,
                g.tp,
                g.pp,
                g.checkpoint_every,
                g.stop_tgbs
                    .map(|t| format!(" (retired after {t} TGBs)"))
                    .unwrap_or_default()
            )
        })
        .collect();
    w.event(
        "sim",
        format!(
            "seed {seed}: {n_producers} producers, {planned} TGBs of {}x{}, groups {groups:?}, max_lag {:?}",
            w.grid.dp, w.grid.cp, w.uniform_lag
        ),
    );
    let c = &w.coop;
    if c.all_coop || w.cfg.coop_share > 0.0 {
        w.event(
            "sim",
            format!(
                "coop: round {}ms x {:.2} windows, rho {:.2}{}{}, stale tgb/ listings {:?}",
                c.params.interval.as_millis(),
                c.params.windows,
                c.params.rho,
                if c.all_coop { ", every producer" } else { "" },
                if c.short_ages {
                    format!(
                        ", short ages up to {}ms, orphan grace {:?}",
                        c.max_commit_age.as_millis(),
                        c.orphan_grace
                    )
                } else {
                    String::new()
                },
                c.stale
            ),
        );
    }
}

/// Every group registers its layout before anything is written: GC must hold every
/// group at step 0 until each of its ranks has a watermark.
async fn register_groups(w: &World, plans: &[RankPlan]) -> Result<(), SimFailure> {
    for g in &w.groups {
        let c = start(
            w,
            "setup",
            &config(&g.name, 0, [g.dp, g.cp, g.tp, g.pp]),
            0,
            None,
        )
        .await?;
        drop(c);
    }
    for p in plans {
        w.backend.set_mark(p.id(), Some((0, 0)));
    }

    Ok(())
}

/// The run proper: every rank, producer, reclaimer and the prober as concurrent actors,
/// until the producers met their quotas and the groups read everything (or the
/// deadline passed). Returns the reclaimer for the final pass and how many ran.
async fn run_actors(
    w: &Arc<World>,
    cfg: &SimConfig,
    plans: &[RankPlan],
    quotas: &[u64],
    root: &mut StdRng,
    side: &mut StdRng,
) -> Result<(Gc, usize), SimFailure> {
    let (target_tx, target_rx) = watch::channel(None::<u64>);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut group_work = Vec::new();
    for g in &w.groups {
        let mine: Vec<RankPlan> = plans
            .iter()
            .filter(|p| p.group == g.index)
            .cloned()
            .collect();
        let ids: Vec<(usize, u32)> = mine.iter().map(RankPlan::id).collect();
        let actors: Vec<_> = mine
            .into_iter()
            .map(|p| rank_actor(w.clone(), p, root.random(), target_rx.clone()))
            .collect();
        let (w, name, stops) = (w.clone(), g.name.clone(), g.stop_tgbs.is_some());
        group_work.push(async move {
            try_join_all(actors).await?;
            if stops {
                retire(&w, &name, &ids).await?;
                w.count(|t| t.retired += 1);
            }
            Ok::<_, SimFailure>(())
        });
    }
    let producers: Vec<_> = quotas
        .iter()
        .enumerate()
        .map(|(index, quota)| {
            let plan = ProducerPlan {
                index,
                grid: w.grid,
                quota: *quota,
            };
            producer_actor(w.clone(), plan, root.random(), side.random())
        })
        .collect();
    let n_gc = root.random_range(cfg.reclaimers.clone());
    let reclaimers: Vec<(Gc, u64)> = (0..n_gc)
        .map(|i| (Gc::new(w, i, root), root.random()))
        .collect();
    let final_gc = Gc::new(w, n_gc, root);
    let probe_seed: u64 = root.random();

    let produce = async {
        try_join_all(producers).await?;
        let total = w.backend.total();
        w.event("sim", format!("all producers done: {total} steps"));
        let _ = target_tx.send(Some(total));
        Ok::<_, SimFailure>(())
    };
    let work = async {
        try_join(produce, try_join_all(group_work)).await?;
        let _ = stop_tx.send(true);
        Ok::<_, SimFailure>(())
    };
    let gc = async {
        if cfg.gc {
            try_join_all(
                reclaimers
                    .into_iter()
                    .map(|(gc, s)| gc_actor(w.clone(), gc, s, stop_rx.clone())),
            )
            .await?;
        }
        Ok(())
    };
    let probes = async {
        if cfg.probes > 0 {
            prober(w.clone(), probe_seed, stop_rx.clone()).await?;
        }
        Ok(())
    };
    let everything = try_join3(work, gc, probes);
    let finished = tokio::select! {
        biased;
        r = everything => Some(r),
        () = w.clock.sleep(cfg.deadline) => None,
    };
    match finished {
        None => Err(w.stuck(stuck_detail(w))),
        Some(Err(f)) => Err(f),
        Some(Ok(_)) => Ok((final_gc, n_gc)),
    }
}

/// The checks on the chain as written, then the forged version: returns the number of
/// steps and the newest version.
async fn check_chain(
    w: &World,
    cfg: &SimConfig,
    plans: &[RankPlan],
    root: &mut StdRng,
) -> Result<(u64, Manifest), SimFailure> {
    let chain = check::chain(w)?;
    let steps = check::steps(w, &chain)?;
    let newest = chain.values().next_back().cloned().unwrap_or_default();
    check::producers(w, &steps, &newest)?;
    check::ranks(w, plans, steps.len() as u64)?;
    if cfg.check_max_lag {
        check::max_lag(w)?;
    }

    if cfg.forger
        && let Some(v) = forge(w, &newest).await
    {
        let live: Vec<&RankPlan> = plans
            .iter()
            .filter(|p| w.groups[p.group].stop_tgbs.is_none())
            .collect();
        if !live.is_empty() {
            let p = live[root.random_range(0..live.len())];
            forged_refused(w, p, &newest, v).await?;
        }
    }

    Ok((steps.len() as u64, newest))
}

async fn simulate(seed: u64, cfg: SimConfig) -> Result<SimReport, SimFailure> {
    let mut root = StdRng::seed_from_u64(seed);
    let n_producers = root.random_range(cfg.producers.clone());
    let quotas: Vec<u64> = (0..n_producers)
        .map(|_| root.random_range(cfg.tgbs_per_producer.clone()))
        .collect();
    let planned: u64 = quotas.iter().sum();
    let shape = draw_shape(&cfg, &mut root, planned);
    let mut side = StdRng::seed_from_u64(seed ^ SIDE_SALT);
    let coop = CoopPlan::draw(&cfg, &mut side);
    let w = Arc::new(World::new(seed, cfg.clone(), &mut root, shape, coop));
    let plans: Vec<RankPlan> = w
        .groups
        .iter()
        .flat_map(|g| rank_plans(g, w.grid, planned))
        .collect();
    *lock(&w.ranks) = plans.iter().map(|p| (p.id(), RankLog::default())).collect();
    announce(&w, seed, n_producers, planned);
    register_groups(&w, &plans).await?;
    let (final_gc, n_gc) = run_actors(&w, &cfg, &plans, &quotas, &mut root, &mut side).await?;
    w.backend_violation()?;
    final_restores(&w, &plans, &final_gc, &mut root).await?;
    w.backend_violation()?;

    let (steps, newest) = check_chain(&w, &cfg, &plans, &mut root).await?;

    let last_draw: u64 = root.random();
    let virtual_ms = w.elapsed_ms();
    let events = w.events();
    let fs = w.faults.stats();
    let bc = w.backend.counts();
    let tally = lock(&w.tally).clone();
    Ok(SimReport {
        seed,
        digest: digest(&w, &events, virtual_ms, last_draw),
        producers: n_producers,
        tgb_grid: (w.grid.dp, w.grid.cp),
        groups: w.groups.iter().map(|g| (g.dp, g.cp, g.tp, g.pp)).collect(),
        ranks: plans.len() as u32,
        retired: tally.retired,
        steps,
        versions: newest.version,
        incarnations: tally.incarnations,
        producer_crashes: tally.producer_crashes,
        zombies: tally.zombies,
        suspends: tally.suspends,
        consumer_restores: tally.consumer_restores,
        probes: (
            tally.probes,
            tally.ghost_probes,
            tally.remap_probes,
            tally.reclaimed_probes,
        ),
        reclaimers: if cfg.gc { n_gc } else { 0 },
        gc_passes: tally.gc_passes,
        gc_interrupted: tally.gc_interrupted,
        gc_deletes_checked: bc.deletes_checked,
        storage_checks: tally.storage_checks,
        conflicts: tally.conflicts,
        ambiguous: tally.ambiguous,
        lost_replies_recovered: tally.lost_replies_recovered,
        ghosts_prevented: tally.ghosts_prevented,
        ghosts_written: bc.ghosts,
        delayed_creates: bc.delayed_creates,
        reclaimed: (
            tally.tgbs_reclaimed,
            tally.orphans_reclaimed,
            tally.manifests_reclaimed,
        ),
        faults: (fs.before, fs.after, fs.stale),
        stale_overwrites: bc.stale_overwrites,
        planted_hits: bc.planted_hits,
        coop: CoopReport {
            incarnations: tally.coop_incarnations,
            interval_ms: u64::try_from(w.coop.params.interval.as_millis()).unwrap_or(u64::MAX),
            all_coop: w.coop.all_coop,
            short_ages: w.coop.short_ages.then(|| {
                let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(0);
                (ms(w.coop.max_commit_age), w.coop.orphan_grace.map_or(0, ms))
            }),
            versions: bc.coop_versions,
            published_for_others: bc.published_for_others,
            claims_recorded: bc.claims_recorded,
            crashes_after_claim_object: tally.crashes_after_claim_object,
            crashes_after_listing: tally.crashes_after_listing,
            fenced_while_published: bc.fenced_while_published,
            fenced_with_uploads: bc.fenced_with_uploads,
            long_downs: tally.long_downs,
            listing_stalls: tally.listing_stalls,
            zombie_uploads: (bc.zombie_uploads, bc.zombie_listed),
            swept_while_held: bc.swept_while_held,
            stale_listings: (bc.stale_missing, bc.stale_deleted),
            deleted_listed: bc.deleted_listed,
        },
        virtual_ms,
        events: events.len(),
    })
}

/// The run's digest: the event log, the last manifest written, the virtual clock, the
/// last draw of the root RNG and the fault counts.
fn digest(w: &World, events: &[String], virtual_ms: u64, last_draw: u64) -> u64 {
    let fs = w.faults.stats();
    let mut h = Fnv::default();
    for e in events {
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
    h.0
}

/// After the run: one more GC pass, then every rank of a live group restores from its
/// last checkpoint and must get exactly the next step (nothing a live watermark needs
/// was reclaimed).
async fn final_restores(
    w: &World,
    plans: &[RankPlan],
    gc: &Gc,
    rng: &mut StdRng,
) -> Result<(), SimFailure> {
    if w.cfg.gc {
        gc_pass(w, gc, rng, false).await?;
    }
    for plan in plans
        .iter()
        .filter(|p| w.groups[p.group].stop_tgbs.is_none())
    {
        let who = format!("{}*", plan.who());
        let (from, seen) = {
            let ranks = lock(&w.ranks);
            let log = ranks.get(&plan.id());
            (
                log.and_then(|l| l.last_checkpoint.clone()),
                log.map_or(0, |l| l.seen.len() as u64),
            )
        };
        let next = from.as_ref().map_or(0, |s| s.next_step);
        if next >= seen {
            continue;
        }
        w.event(&who, format!("final restore at step {next}"));
        let mut c = start(w, &who, &plan.config, 0, from.as_ref()).await?;
        let mut errors = 0;
        loop {
            match c.next().await {
                Ok(b) => {
                    record(w, plan, &who, &b)?;
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
    let ranks: Vec<String> = lock(&w.ranks)
        .iter()
        .map(|(id, r)| format!("g{}r{}:{}", id.0, id.1, r.seen.len()))
        .collect();
    format!(
        "not finished after {:?} of virtual time; unfinished producers {producers:?}, steps seen per rank {ranks:?}",
        w.cfg.deadline
    )
}
