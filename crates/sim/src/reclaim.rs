//! The GC processes: one or more reclaimers, each on a host with its own clock
//! skew, running passes at random intervals (some interrupted by failing deletes)
//! until the run ends. After every complete pass of a uniform-lag run, the stored
//! TGB objects are checked against their bound (`storage-bound`).

use std::sync::Arc;
use std::time::Duration;

use batchweave_gc::{GcError, GcReport, GcSettings, Reclaimer};
use batchweave_manifest::Manifest;
use batchweave_store::Clock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::SimFailure;
use crate::config::CLOCK_BASE_MS;
use crate::host::HostClock;
use crate::log::lock;
use crate::producers::draw_skew;
use crate::world::World;

/// One reclaimer: its name and its host's clock.
pub(crate) struct Gc {
    pub(crate) name: String,
    pub(crate) clock: Arc<HostClock>,
}

impl Gc {
    pub(crate) fn new(w: &World, index: usize, rng: &mut StdRng) -> Self {
        let skew = draw_skew(rng, w.cfg.max_clock_skew);
        Self {
            name: format!("gc{index}"),
            clock: HostClock::new(w.clock.clone(), skew),
        }
    }
}

/// One GC pass; `interrupt` runs it on a store whose deletes fail.
pub(crate) async fn gc_pass(
    w: &World,
    gc: &Gc,
    rng: &mut StdRng,
    interrupt: bool,
) -> Result<(), SimFailure> {
    let clock: Arc<dyn Clock> = gc.clock.clone();
    let store = if interrupt {
        w.flaky_delete_store(rng.random_range(0.2..=1.0), rng.random(), clock)
    } else {
        w.gc_store(clock, rng.random())
    };
    let settings = GcSettings {
        orphan_grace: w.coop.orphan_grace,
        // What the grace leaves beyond the producers' max_commit_age: it covers the
        // skew between two hosts, a delayed create and the pass itself (validated; in a
        // run with short ages, the run's grace and longest age).
        orphan_margin: w
            .coop
            .orphan_grace
            .unwrap_or_default()
            .saturating_sub(w.coop.max_commit_age + Duration::from_secs(1)),
        ..Default::default()
    };
    w.count(|t| t.gc_passes += 1);
    let (start_ms, start_elapsed) = (w.clock.unix_millis(), w.elapsed_ms());
    let steps_at_start = w.backend.total();
    let orphan_margin = settings.orphan_margin;
    match Reclaimer::new(store, settings).run_once().await {
        Ok(r) => {
            w.count(|t| {
                t.tgbs_reclaimed += r.tgbs_deleted;
                t.orphans_reclaimed += r.orphans_deleted;
                t.manifests_reclaimed += r.manifests_deleted;
            });
            w.event(
                &gc.name,
                format!(
                    "pass: boundary v{} step {}, newest v{}, deleted {} tgbs, {} orphans, {} manifests",
                    r.boundary.min_live_version,
                    r.boundary.low_water_step,
                    r.newest_version,
                    r.tgbs_deleted,
                    r.orphans_deleted,
                    r.manifests_deleted
                ),
            );
            // A pass bounds storage when it read the chain as it was when it started: one
            // whose reads were stale (`gc_stale_reads`) leaves what it did not see, and
            // its orphan sweep waits for proof, for a later pass.
            let fresh = w
                .backend
                .live_version_steps(r.newest_version)
                .is_some_and(|(_, total)| total >= steps_at_start);
            if !interrupt && fresh {
                storage_bound(w, &r, orphan_margin, start_ms, start_elapsed)?;
            }
            Ok(())
        }
        Err(GcError::Store(e)) => {
            w.count(|t| t.gc_interrupted += 1);
            w.event(
                &gc.name,
                format!(
                    "pass {}: {e}",
                    if interrupt { "interrupted" } else { "failed" }
                ),
            );
            Ok(())
        }
        Err(GcError::Chain(e)) if e.is_retryable() => {
            w.count(|t| t.gc_interrupted += 1);
            w.event(&gc.name, format!("pass failed in the chain: {e}"));
            Ok(())
        }
        Err(e) => Err(w.violation("gc-error", format!("{} pass: {e}", gc.name))),
    }
}

/// `storage-bound`, after a complete pass that made boundary `r.boundary` durable and
/// started at store time `start_ms` (`start_elapsed` into the run), in a run where every producer has `max_lag` L:
/// - stored TGBs at live steps at or above the pass's low-water step number at most
///   `L + interval + 1` (plus what another reclaimer's later boundary lets producers add);
/// - stored TGBs no version lists (uploads not committed, orphans) number at most the
///   buffers (`max_buffered + 1`) of the producer incarnations alive within the grace
///   period;
/// - nothing older than the grace period survives the pass unless it is at a live step
///   at or above the low-water step.
///
/// TGBs at live steps below the low-water step that are younger than the grace period
/// (left by an interrupted pass after producers trimmed them) are the orphan sweep's
/// and not counted. An upload no version lists survives the grace period until the
/// chain proves it an orphan (see [`proven_orphan`]).
fn storage_bound(
    w: &World,
    r: &GcReport,
    orphan_margin: Duration,
    start_ms: u64,
    start_elapsed: u64,
) -> Result<(), SimFailure> {
    let (Some(lag), Some(grace)) = (w.uniform_lag, w.coop.orphan_grace) else {
        return Ok(());
    };
    w.count(|t| t.storage_checks += 1);
    let low = r.boundary.low_water_step;
    let margin = u64::try_from((grace + w.cfg.max_clock_skew * 2).as_millis()).unwrap_or(0);
    let old = start_ms.saturating_sub(margin);
    let (mut live, mut uncommitted) = (0u64, 0u64);
    let newest = w.backend.live_version(r.newest_version);
    for (key, mtime, step) in w.backend.stored_tgbs() {
        match step {
            Some(s) if s >= low => live += 1,
            // Awaiting proof: bounded by the buffers of the incarnations whose fate no
            // version decides yet, not by the grace period.
            None if !proven_orphan(newest.as_ref(), &key, mtime, orphan_margin) => {}
            _ if mtime < old => {
                return Err(w.violation(
                    "storage-bound",
                    format!(
                        "{key} (live step {step:?}, written at {}ms) survived a complete pass with low-water step {low} and grace {grace:?}",
                        mtime.saturating_sub(CLOCK_BASE_MS)
                    ),
                ));
            }
            Some(_) => {}
            None => uncommitted += 1,
        }
    }
    let window =
        lag + w.interval_tgbs + 1 + w.backend.boundary().low_water_step.saturating_sub(low);
    if live > window {
        return Err(w.violation(
            "storage-bound",
            format!(
                "{live} TGBs stored at live steps from {low} on, the bound is {window} (max_lag {lag} + interval {} + 1 + boundary moved on by others)",
                w.interval_tgbs
            ),
        ));
    }
    let since = start_elapsed.saturating_sub(margin);
    let buffers: u64 = lock(&w.lives)
        .iter()
        .filter(|l| l.ended_ms.is_none_or(|e| e >= since))
        .map(|l| l.buffer)
        .sum();
    if uncommitted > buffers {
        return Err(w.violation(
            "storage-bound",
            format!(
                "{uncommitted} uncommitted TGBs stored, the buffers of the incarnations alive within the grace period hold {buffers}"
            ),
        ));
    }
    Ok(())
}

/// The orphan rule restated on ground truth: an upload that no version lists is proven
/// never to be committed by the live version `m` (the newest when the pass started)
/// when `m` holds its producer at a higher epoch or past its sequence, or `m` was
/// committed more than the longest `max_commit_age` plus `orphan_margin` after the
/// upload.
fn proven_orphan(m: Option<&Manifest>, key: &str, mtime: u64, orphan_margin: Duration) -> bool {
    let Some(m) = m else {
        return false;
    };
    if let Some((id, epoch, seq)) = batchweave_manifest::parse_tgb_key(key)
        && let Some(e) = m.producers.get(id)
        && (e.epoch > epoch || (e.epoch == epoch && e.last_sequence >= seq))
    {
        return true;
    }
    let reach = m
        .producers
        .values()
        .map(|e| e.max_commit_age_ms)
        .max()
        .unwrap_or(0)
        .saturating_add(u64::try_from(orphan_margin.as_millis()).unwrap_or(u64::MAX));
    m.committed_at_ms > mtime.saturating_add(reach)
}

/// Runs passes every 0.2-6 s of virtual time until `stop` turns true.
pub(crate) async fn gc_actor(
    w: Arc<World>,
    gc: Gc,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
    w.event(
        &gc.name,
        format!("reclaimer, clock skew {}ms", gc.clock.skew_ms()),
    );
    loop {
        let d = Duration::from_millis(rng.random_range(200..=6000));
        let stopped = tokio::select! {
            biased;
            r = stop.changed() => r.is_err() || *stop.borrow(),
            () = w.clock.sleep(d) => *stop.borrow(),
        };
        if stopped {
            return Ok(());
        }
        let interrupt = rng.random_bool(w.cfg.gc_interrupt_rate.clamp(0.0, 1.0));
        gc_pass(&w, &gc, &mut rng, interrupt).await?;
    }
}
