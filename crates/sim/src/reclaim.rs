//! The GC process: reclamation passes at random intervals, some of them
//! interrupted by failing deletes, until the run ends.

use std::sync::Arc;
use std::time::Duration;

use batchweave_gc::{GcError, GcSettings, Reclaimer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::SimFailure;
use crate::world::World;

/// One GC pass; `interrupt` runs it on a store whose deletes fail.
pub(crate) async fn gc_pass(
    w: &World,
    rng: &mut StdRng,
    interrupt: bool,
) -> Result<(), SimFailure> {
    let store = if interrupt {
        w.flaky_delete_store(rng.random_range(0.2..=1.0), rng.random())
    } else {
        w.store.clone()
    };
    let settings = GcSettings {
        orphan_grace: w.cfg.orphan_grace,
        // One virtual clock for every process: no skew to allow for.
        orphan_margin: Duration::from_secs(1),
        ..Default::default()
    };
    w.count(|t| t.gc_passes += 1);
    match Reclaimer::new(store, settings).run_once().await {
        Ok(r) => {
            w.count(|t| {
                t.tgbs_reclaimed += r.tgbs_deleted;
                t.orphans_reclaimed += r.orphans_deleted;
                t.manifests_reclaimed += r.manifests_deleted;
            });
            w.event(
                "gc",
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
            Ok(())
        }
        Err(GcError::Store(e)) => {
            w.count(|t| t.gc_interrupted += 1);
            w.event(
                "gc",
                format!(
                    "pass {}: {e}",
                    if interrupt { "interrupted" } else { "failed" }
                ),
            );
            Ok(())
        }
        Err(e) => Err(w.violation("gc-error", format!("gc pass: {e}"))),
    }
}

/// Runs passes every 0.2-6 s of virtual time until `stop` turns true.
pub(crate) async fn gc_actor(
    w: Arc<World>,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
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
        gc_pass(&w, &mut rng, interrupt).await?;
    }
}
