//! Restore probes: a checkpoint restored by a consumer of a group of its own (retired
//! afterwards), at the same DP or another one, from a rank's older checkpoint or at a
//! version whose slot a ghost fills. Whatever the checkpoint, each batch must be
//! exactly the live chain's, or the answer `DataReclaimed`; never anything else
//! (`restore-outcome`). At the end of the run, a forged version after the newest must
//! be refused (`forged-refused`).

use std::sync::Arc;
use std::time::Duration;

use batchweave_consumer::{ConsumerError, ConsumerState};
use batchweave_manifest::{
    Manifest, Pending, TgbDescriptor, encode_manifest, manifest_key, rebase, tgb_key,
};
use batchweave_tgb::{Grid, convert_step, encode_tgb, tgbs_needed_through};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use crate::SimFailure;
use crate::consumers::{MAX_ERRORS, builder, check_batch, config, retire};
use crate::log::lock;
use crate::producers::slices;
use crate::world::World;

/// How long one probe step may take before it counts as no answer.
const PROBE_PATIENCE: Duration = Duration::from_secs(180);

/// What a probe restores.
struct Target {
    state: ConsumerState,
    ghost: bool,
    what: String,
}

/// How a probe ended.
enum Outcome {
    /// Every batch read was the live chain's.
    Exact,
    /// The consumer said `DataReclaimed` (at restore or at a step).
    Reclaimed,
}

/// A checkpoint at ghost version `g`: a rank's, if one was taken there, else one a rank
/// of the stream's own grid could have taken from the live version `g` (its next step
/// within that version's steps), at a step where the ghost lists another TGB whose
/// object still exists if there is one (that is where a reader fooled by the ghost
/// would show it).
fn ghost_target(w: &World, g: u64, ghost: &Manifest, rng: &mut StdRng) -> Option<Target> {
    let from_history: Vec<ConsumerState> = lock(&w.ranks)
        .values()
        .flat_map(|l| l.history.iter().filter(|s| s.version == g).cloned())
        .collect();
    if !from_history.is_empty() && rng.random_bool(0.5) {
        let st = from_history[rng.random_range(0..from_history.len())].clone();
        return Some(Target {
            what: format!("a checkpoint at ghost version {g}"),
            state: st,
            ghost: true,
        });
    }
    let (live_first, live_total) = w.backend.live_version_steps(g)?;
    let stored = w.backend.stored_tgbs();
    let candidates: Vec<u64> = ghost
        .tgbs
        .iter()
        .enumerate()
        .map(|(i, d)| (ghost.first_step + i as u64, d))
        .filter(|(t, d)| {
            *t >= live_first
                && *t < live_total
                && w.backend.step(*t).is_some_and(|l| l.key != d.key)
                && stored.iter().any(|(k, _, _)| *k == d.key)
        })
        .map(|(t, _)| t)
        .collect();
    let next = if candidates.is_empty() {
        live_total
    } else {
        candidates[rng.random_range(0..candidates.len())]
    };
    Some(Target {
        what: format!("a cursor at ghost version {g}, next TGB step {next}"),
        state: ConsumerState {
            version: g,
            next_step: next,
            dp: w.grid.dp,
            cp: w.grid.cp,
            group: String::new(),
        },
        ghost: true,
    })
}

/// A random checkpoint some rank took (older ones as likely as the latest).
fn history_target(w: &World, rng: &mut StdRng) -> Option<Target> {
    let all: Vec<((usize, u32), ConsumerState)> = lock(&w.ranks)
        .iter()
        .flat_map(|(id, l)| l.history.iter().map(|s| (*id, s.clone())))
        .collect();
    if all.is_empty() {
        return None;
    }
    let (id, st) = all[rng.random_range(0..all.len())].clone();
    Some(Target {
        what: format!(
            "g{}r{}'s checkpoint (step {}, v{})",
            id.0, id.1, st.next_step, st.version
        ),
        state: st,
        ghost: false,
    })
}

/// A DP the state can be restored at (`convert_step` aligned), maybe another one.
fn pick_dp(st: &ConsumerState, rng: &mut StdRng) -> u32 {
    if rng.random_bool(0.5) {
        return st.dp;
    }
    let ok: Vec<u32> = (1..=4)
        .filter(|dp| *dp != st.dp && convert_step(st.next_step, st.dp, *dp).is_ok())
        .collect();
    if ok.is_empty() {
        st.dp
    } else {
        ok[rng.random_range(0..ok.len())]
    }
}

/// Runs one probe; `n` names its group.
async fn probe(w: &World, rng: &mut StdRng, n: u64, t: Target) -> Result<(), SimFailure> {
    let name = format!("probe{n}");
    let who = format!("pr{n}");
    let dp = pick_dp(&t.state, rng);
    let cp = if w.grid.cp == 1 {
        rng.random_range(1..=2)
    } else {
        [1, w.grid.cp][rng.random_range(0..2usize)]
    };
    let rank = rng.random_range(0..dp * cp);
    let cfg = config(&name, rank, [dp, cp, 1, 1]);
    let prefetch = rng.random_range(0..=2);
    let grid = Grid::new(dp, cp);
    let pos = cfg
        .position()
        .map_err(|e| w.violation("sim-setup", e.to_string()))?;
    let Ok(first) = convert_step(t.state.next_step, t.state.dp, dp) else {
        return Ok(());
    };
    let state = ConsumerState {
        group: name.clone(),
        ..t.state.clone()
    };
    w.count(|c| {
        c.probes += 1;
        if t.ghost {
            c.ghost_probes += 1;
        }
        if dp != t.state.dp {
            c.remap_probes += 1;
        }
    });
    w.event(
        &who,
        format!(
            "probe: restores {} at DP={dp} CP={cp} {pos:?} (step {first})",
            t.what
        ),
    );
    let outcome = run_probe(w, &who, &cfg, prefetch, grid, pos, &state, first, rng).await;
    let ranks: Vec<(usize, u32)> = Vec::new();
    let retired = retire(w, &name, &ranks).await;
    match outcome? {
        Outcome::Exact => w.event(&who, "probe: the live chain's batches"),
        Outcome::Reclaimed => {
            w.count(|c| c.reclaimed_probes += 1);
            w.event(&who, "probe: DataReclaimed");
        }
    }
    retired
}

#[allow(clippy::too_many_arguments)]
async fn run_probe(
    w: &World,
    who: &str,
    cfg: &batchweave_consumer::RankConfig,
    prefetch: usize,
    grid: Grid,
    pos: batchweave_tgb::Position,
    state: &ConsumerState,
    first: u64,
    rng: &mut StdRng,
) -> Result<Outcome, SimFailure> {
    let refuse = |what: String| {
        w.violation(
            "restore-outcome",
            format!(
                "{who} (restored {state:?} at DP={} CP={}): {what}",
                grid.dp, grid.cp
            ),
        )
    };
    let mut errors = 0u32;
    let mut c = loop {
        match builder(w, cfg, prefetch).state(state.clone()).open().await {
            Ok(c) => break c,
            Err(ConsumerError::DataReclaimed { .. }) => return Ok(Outcome::Reclaimed),
            Err(
                e @ (ConsumerError::Data { .. }
                | ConsumerError::Manifest { .. }
                | ConsumerError::Remap { .. }),
            ) => return Err(refuse(format!("restore failed: {e}"))),
            Err(e) => {
                errors += 1;
                if errors > MAX_ERRORS {
                    return Err(refuse(format!("{errors} failed restores, the last: {e}")));
                }
                w.event(who, format!("restore failed (retrying): {e}"));
                w.clock.sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let steps = rng.random_range(1..=3u64);
    for step in first..first + steps {
        // Only steps the live chain already holds: a probe never waits for producers.
        let Ok(needs) = tgbs_needed_through(w.grid, grid, step) else {
            break;
        };
        if needs >= w.backend.total() {
            break;
        }
        let mut errors = 0u32;
        let b = loop {
            let r = tokio::select! {
                biased;
                r = c.next() => r,
                () = w.clock.sleep(PROBE_PATIENCE) => {
                    return Err(refuse(format!("no answer for step {step} within {PROBE_PATIENCE:?}")));
                }
            };
            match r {
                Ok(b) => break b,
                Err(ConsumerError::DataReclaimed { .. }) => return Ok(Outcome::Reclaimed),
                Err(e @ (ConsumerError::Data { .. } | ConsumerError::Manifest { .. })) => {
                    return Err(refuse(format!("step {step}: {e}")));
                }
                Err(e) => {
                    errors += 1;
                    if errors > MAX_ERRORS {
                        return Err(refuse(format!(
                            "step {step}: {errors} errors, the last: {e}"
                        )));
                    }
                    w.event(who, format!("error (retrying): {e}"));
                    w.clock.sleep(Duration::from_millis(50)).await;
                }
            }
        };
        if b.step != step {
            return Err(refuse(format!(
                "asked for step {step}, got step {}",
                b.step
            )));
        }
        check_batch(w, grid, pos, &b).map_err(refuse)?;
        // Slow readers poll through deleted slots (and the ghosts that fill them).
        w.clock
            .sleep(Duration::from_millis(rng.random_range(0..=1500)))
            .await;
    }
    Ok(Outcome::Exact)
}

/// Runs probes until `stop` turns true: a ghost slot as soon as one is written, else a
/// random older checkpoint every few seconds, at most `SimConfig::probes` in all.
pub(crate) async fn prober(
    w: Arc<World>,
    seed: u64,
    mut stop: watch::Receiver<bool>,
) -> Result<(), SimFailure> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut n = 0u64;
    let mut probed_ghosts = 0usize;
    loop {
        let wait = rng.random_range(10..=60u32);
        let mut ghost = None;
        for _ in 0..wait {
            let stopped = tokio::select! {
                biased;
                r = stop.changed() => r.is_err() || *stop.borrow(),
                () = w.clock.sleep(Duration::from_millis(100)) => *stop.borrow(),
            };
            if stopped {
                return Ok(());
            }
            let ghosts = w.backend.ghosts();
            if ghosts.len() > probed_ghosts {
                probed_ghosts = ghosts.len();
                ghost = ghosts.into_iter().next_back();
                break;
            }
        }
        // Every ghost is probed (up to a few), older checkpoints up to `probes`.
        let target = match ghost {
            Some((g, gh)) if n < u64::from(w.cfg.probes) + 6 => {
                ghost_target(&w, g, &gh.manifest, &mut rng)
            }
            None if n < u64::from(w.cfg.probes) => history_target(&w, &mut rng),
            _ => continue,
        };
        if let Some(t) = target {
            probe(&w, &mut rng, n, t).await?;
            n += 1;
        }
    }
}

/// A rogue writer: creates the version after the newest, appending TGBs of a producer
/// `forger` but changing a retained step's descriptor (valid on its own: its key moves to
/// the other key form, or its footer CRC changes; only the extension check sees it). Returns the forged version.
pub(crate) async fn forge(w: &World, newest: &Manifest) -> Option<u64> {
    let first = newest.tgbs.first()?;
    let mut tgbs = Vec::new();
    // Enough for the next step of every group (a step reads up to D_c / D_t TGBs).
    let needed = w
        .groups
        .iter()
        .map(|g| u64::from(g.dp).div_ceil(u64::from(w.grid.dp)))
        .max()
        .unwrap_or(1)
        + 1;
    for seq in 1..=needed {
        let enc = encode_tgb(w.grid.dp, w.grid.cp, slices(w, "forger", seq, w.grid)).ok()?;
        let key = tgb_key("forger", 1, seq);
        w.backend
            .put_unrecorded(&key, enc.to_bytes(), false)
            .await
            .ok()?;
        tgbs.push(TgbDescriptor {
            key,
            object_size: enc.object_size,
            dp: w.grid.dp,
            cp: w.grid.cp,
            footer_offset: enc.footer_offset,
            footer_length: enc.footer_length,
            footer_crc32: enc.footer_crc32,
            producer_id: "forger".into(),
            epoch: 1,
            sequence: seq,
            payload_bytes: enc.payload_bytes,
            source_offset: seq,
            ..Default::default()
        });
    }
    let pending = Pending {
        producer_id: "forger".into(),
        epoch: 1,
        incarnation: 1,
        tgbs,
        source_offset: needed,
        now_ms: w.clock.unix_millis(),
    };
    let mut m = rebase(newest, &pending, newest.first_step).ok()?;
    let changed = m.tgbs.iter_mut().find(|d| d.key == first.key)?;
    // A self-describing key (form 2) names the footer CRC, so flipping it would break
    // the version on its own (`tgb-key`): the step is moved to its form-1 key instead,
    // which is valid on its own and differs from what the chain retains.
    let form1 = tgb_key(&changed.producer_id, changed.epoch, changed.sequence);
    if changed.key == form1 {
        changed.footer_crc32 ^= 1;
    } else {
        changed.key = form1;
    }
    let v = m.version;
    w.backend
        .put_unrecorded(&manifest_key(v), encode_manifest(&m), true)
        .await
        .ok()?;
    w.event(
        "forger",
        format!(
            "created version {v}: {needed} TGBs appended, step {} ({}) rewritten",
            newest.first_step, first.key
        ),
    );
    Some(v)
}

/// A rank restored at the end of the live chain asks for the next step: it must refuse
/// the forged version `forged` (a `Data` error naming it), never deliver from it.
pub(crate) async fn forged_refused(
    w: &World,
    plan: &crate::world::RankPlan,
    newest: &Manifest,
    forged: u64,
) -> Result<(), SimFailure> {
    let grid = plan.config.grid();
    let Ok(next) = batchweave_tgb::steps_covered(w.grid, grid, newest.total_tgbs) else {
        return Ok(());
    };
    let who = format!("{}*", plan.who());
    let state = ConsumerState {
        version: newest.version,
        next_step: next,
        dp: grid.dp,
        cp: grid.cp,
        group: plan.config.group.clone(),
    };
    w.event(
        &who,
        format!(
            "restores at v{} step {next}, after the live chain",
            newest.version
        ),
    );
    let fail = |what: String| w.violation("forged-refused", format!("{who}: {what}"));
    let mut errors = 0u32;
    let mut c = loop {
        match builder(w, &plan.config, 0)
            .state(state.clone())
            .open()
            .await
        {
            // A stale read of the checkpoint's version makes the restore jump to the
            // newest listed version: a fresh reader, with nothing held to check the
            // forged version against. Restore again: the rule under test is the
            // extension check of a reader that holds a version.
            Ok(c) if c.manifest_version() != newest.version && errors < MAX_ERRORS => {
                errors += 1;
                w.event(
                    &who,
                    format!(
                        "restore held v{} instead of v{} (stale read): again",
                        c.manifest_version(),
                        newest.version
                    ),
                );
            }
            Ok(c) => break c,
            // Refused while restoring (the restore looked past the version it holds).
            Err(ConsumerError::Data { key, .. }) if key == manifest_key(forged) => {
                w.event(&who, format!("restore refused forged version {forged}"));
                return Ok(());
            }
            // Store trouble, or a stale view that makes the restore say the version
            // is missing (a `State` error): try again, as the live ranks do.
            Err(e) if errors < MAX_ERRORS && !matches!(e, ConsumerError::Data { .. }) => {
                errors += 1;
                w.event(&who, format!("restore failed (retrying): {e}"));
                w.clock.sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(fail(format!("restore failed: {e}"))),
        }
    };
    loop {
        let r = tokio::select! {
            biased;
            r = c.next() => r,
            () = w.clock.sleep(PROBE_PATIENCE) => {
                return Err(fail(format!("no answer within {PROBE_PATIENCE:?}")));
            }
        };
        match r {
            Err(ConsumerError::Data { key, .. }) if key == manifest_key(forged) => {
                w.event(&who, format!("refused forged version {forged}"));
                return Ok(());
            }
            Err(e) if errors < MAX_ERRORS && e.is_retryable() => {
                errors += 1;
                w.clock.sleep(Duration::from_millis(50)).await;
            }
            Err(e) => {
                return Err(fail(format!(
                    "expected a Data error naming version {forged}, got: {e}"
                )));
            }
            Ok(b) => {
                let d = check_batch(w, grid, plan.pos, &b).err().unwrap_or_default();
                return Err(fail(format!(
                    "delivered step {} from the forged version {forged}: {d}",
                    b.step
                )));
            }
        }
    }
}
