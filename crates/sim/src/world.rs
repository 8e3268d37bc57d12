//! The state one run shares between its actors: the store stack, the clock,
//! the event log, the counters, the plan of the consumer groups and what each
//! actor observed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use batchweave_consumer::{ConsumerState, RankConfig};
use batchweave_store::{
    Clock, FaultOp, FaultRule, FaultStore, LatencyModel, LatencyStore, RetryPolicy, StreamStore,
    TokioClock,
};
use batchweave_tgb::{Grid, Position, payload};
use bytes::Bytes;
use rand::Rng;
use rand::rngs::StdRng;

use batchweave_producer::CoopParams;

use crate::backend::{SimBackend, TgbStale};
use crate::config::CLOCK_BASE_MS;
use crate::log::{EventLog, lock};
use crate::{SimConfig, SimFailure};

/// FNV-1a, 64 bit: a stable hash for digests and filler lengths.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(pub(crate) u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        for x in b {
            self.0 ^= u64::from(*x);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        self
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
}

/// Length of slice `s` of the TGB of `producer` at source offset `offset`: the
/// [`payload`] header, then [`filler_len`] bytes.
pub(crate) fn slice_len(cfg: &SimConfig, producer: &str, offset: u64, s: u32) -> usize {
    payload::header_len(producer, offset, s) + filler_len(cfg, producer, offset)
}

/// Filler length of the slices of `(producer, offset)`: a function of the
/// pair only, so a reader can recompute the expected bytes.
fn filler_len(cfg: &SimConfig, producer: &str, offset: u64) -> usize {
    let (lo, hi) = (*cfg.slice_bytes.start(), *cfg.slice_bytes.end());
    let span = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0) + 1;
    let h = Fnv::default()
        .bytes(producer.as_bytes())
        .u64(offset)
        .u64(7)
        .0;
    lo + usize::try_from(h % span).unwrap_or(0)
}

/// One consumer group of the run.
#[derive(Debug, Clone)]
pub(crate) struct GroupPlan {
    pub(crate) index: usize,
    pub(crate) name: String,
    pub(crate) dp: u32,
    pub(crate) cp: u32,
    pub(crate) tp: u32,
    pub(crate) pp: u32,
    pub(crate) checkpoint_every: u64,
    /// Stop once this many TGB steps are covered, then retire the group.
    pub(crate) stop_tgbs: Option<u64>,
}

impl GroupPlan {
    pub(crate) fn world(&self) -> u32 {
        self.dp * self.cp * self.tp * self.pp
    }

    pub(crate) fn grid(&self) -> Grid {
        Grid::new(self.dp, self.cp)
    }
}

/// Where a rank sits and how it reads.
#[derive(Debug, Clone)]
pub(crate) struct RankPlan {
    pub(crate) group: usize,
    pub(crate) rank: u32,
    pub(crate) config: RankConfig,
    pub(crate) pos: Position,
    pub(crate) checkpoint_every: u64,
    /// Consumer step at which the rank stops (its group is retired), if it does.
    pub(crate) stop: Option<u64>,
}

impl RankPlan {
    pub(crate) fn id(&self) -> (usize, u32) {
        (self.group, self.rank)
    }

    pub(crate) fn who(&self) -> String {
        format!("g{}r{}", self.group, self.rank)
    }
}

/// One step as a rank saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepSeen {
    pub(crate) step: u64,
    pub(crate) key: String,
    pub(crate) tgb_step: u64,
    pub(crate) first_slice: u32,
    pub(crate) slice_count: u32,
    pub(crate) part: Option<(u32, u32)>,
    pub(crate) data: Bytes,
}

/// What one rank did.
#[derive(Debug, Default)]
pub(crate) struct RankLog {
    pub(crate) seen: Vec<StepSeen>,
    pub(crate) last_checkpoint: Option<ConsumerState>,
    /// Every checkpoint it took, oldest first.
    pub(crate) history: Vec<ConsumerState>,
    /// Its state when it stopped reading.
    pub(crate) final_state: Option<ConsumerState>,
}

/// What one producer id did.
#[derive(Debug, Default, Clone)]
pub(crate) struct ProducerLog {
    pub(crate) quota: u64,
    /// Highest source offset any incarnation reported as committed.
    pub(crate) believed: u64,
    pub(crate) finished: bool,
}

/// One producer incarnation's lifetime and buffer (for `storage-bound`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Life {
    pub(crate) ended_ms: Option<u64>,
    pub(crate) buffer: u64,
}

/// Counters for the report.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub(crate) incarnations: u64,
    pub(crate) producer_crashes: u64,
    pub(crate) zombies: u64,
    pub(crate) suspends: u64,
    pub(crate) consumer_restores: u64,
    pub(crate) probes: u64,
    pub(crate) ghost_probes: u64,
    pub(crate) remap_probes: u64,
    pub(crate) reclaimed_probes: u64,
    pub(crate) retired: u64,
    pub(crate) gc_passes: u64,
    pub(crate) gc_interrupted: u64,
    pub(crate) storage_checks: u64,
    pub(crate) conflicts: u64,
    pub(crate) ambiguous: u64,
    pub(crate) lost_replies_recovered: u64,
    pub(crate) ghosts_prevented: u64,
    pub(crate) coop_incarnations: u64,
    pub(crate) crashes_after_listing: u64,
    pub(crate) crashes_after_claim_object: u64,
    pub(crate) long_downs: u64,
    pub(crate) listing_stalls: u64,
    pub(crate) tgbs_reclaimed: u64,
    pub(crate) orphans_reclaimed: u64,
    pub(crate) manifests_reclaimed: u64,
}

/// Everything the actors of one run share.
pub(crate) struct World {
    pub(crate) seed: u64,
    pub(crate) cfg: SimConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) backend: Arc<SimBackend>,
    pub(crate) faults: Arc<FaultStore>,
    /// The same faults for the reclaimers, without stale GETs of manifest versions
    /// unless `SimConfig::gc_stale_reads`.
    pub(crate) gc_faults: Arc<FaultStore>,
    /// The store consumers use: faults over latency over the backend.
    pub(crate) store: StreamStore,
    /// The backend with latency but without faults (for interrupted GC passes).
    pub(crate) quiet: Arc<dyn batchweave_store::object_store::ObjectStore>,
    pub(crate) log: Arc<EventLog>,
    pub(crate) tally: Mutex<Tally>,
    pub(crate) producers: Mutex<BTreeMap<String, ProducerLog>>,
    pub(crate) ranks: Mutex<BTreeMap<(usize, u32), RankLog>>,
    /// `max_lag` of every producer incarnation, by (id, epoch).
    pub(crate) lags: Mutex<BTreeMap<(String, u64), Option<u64>>>,
    /// Producer incarnations' lifetimes.
    pub(crate) lives: Mutex<Vec<Life>>,
    /// The stream's TGB grid.
    pub(crate) grid: Grid,
    /// The consumer groups.
    pub(crate) groups: Vec<GroupPlan>,
    /// The `max_lag` every incarnation uses, in a uniform-lag run.
    pub(crate) uniform_lag: Option<u64>,
    /// Smallest `max_lag` that cannot deadlock with the groups' checkpoint intervals.
    pub(crate) min_lag: u64,
    /// Checkpoint interval of the slowest group, in TGB steps.
    pub(crate) interval_tgbs: u64,
    /// Cooperative commits and commit ages in this run.
    pub(crate) coop: CoopPlan,
}

/// What a run draws for cooperative commits and the faults aimed at them, from a random
/// stream of its own (with all of it off, the other draws are those of a run before it).
#[derive(Debug, Clone)]
pub(crate) struct CoopPlan {
    /// The cadence of every cooperative incarnation.
    pub(crate) params: CoopParams,
    /// Every incarnation runs `coop`.
    pub(crate) all_coop: bool,
    /// The longest `max_commit_age` of the run, and whether ages are short (then each
    /// incarnation draws its own, from 0.5 s up to it).
    pub(crate) max_commit_age: Duration,
    pub(crate) short_ages: bool,
    /// GC's orphan grace in this run.
    pub(crate) orphan_grace: Option<Duration>,
    /// Stale listings of `tgb/`.
    pub(crate) stale: TgbStale,
}

impl CoopPlan {
    /// Draws the run's plan from `side` (nothing when the config turns it all off).
    pub(crate) fn draw(cfg: &SimConfig, side: &mut StdRng) -> Self {
        let params = cfg.coop_params.unwrap_or_else(|| CoopParams {
            interval: Duration::from_millis(side.random_range(50..=1000)),
            windows: side.random_range(1.0..=3.0),
            rho: side.random_range(0.0..=1.0),
            ..CoopParams::default()
        });
        let forced_coop = matches!(cfg.policy, Some(batchweave_producer::PolicyKind::Coop(_)));
        let all_coop = forced_coop
            || (cfg.policy.is_none() && side.random_bool(cfg.all_coop_rate.clamp(0.0, 1.0)));
        let short_ages = all_coop && side.random_bool(cfg.short_age_rate.clamp(0.0, 1.0));
        let (max_commit_age, orphan_grace) = if short_ages {
            let age = Duration::from_millis(side.random_range(1500..=6000));
            // Only just above what the rule allows (see `SimConfig::orphan_grace`).
            let least = age + cfg.max_clock_skew * 2 + cfg.max_create_delay;
            let grace = least + Duration::from_millis(side.random_range(1..=3000));
            (age, cfg.orphan_grace.map(|_| grace))
        } else {
            (cfg.max_commit_age, cfg.orphan_grace)
        };
        let stale = if cfg.tgb_stale_listings {
            TgbStale {
                miss_rate: side.random_range(0.0..=0.3),
                miss_window_ms: side.random_range(50..=3000),
                deleted_rate: side.random_range(0.0..=0.3),
                deleted_window_ms: side.random_range(50..=3000),
                seed: side.random(),
            }
        } else {
            TgbStale::default()
        };
        Self {
            params,
            all_coop,
            max_commit_age,
            short_ages,
            orphan_grace,
            stale,
        }
    }
}

/// The fault rules; `stale_gets` adds stale GETs of manifest versions to the stale
/// listings.
fn fault_rules(cfg: &SimConfig, stale_gets: bool) -> Vec<FaultRule> {
    let f = cfg.fault_rate;
    let rule = |ops: Vec<FaultOp>, before: f64, after: f64| FaultRule {
        ops,
        error_before: before,
        error_after: after,
        ..Default::default()
    };
    vec![
        rule(vec![FaultOp::Create], f, f),
        rule(vec![FaultOp::Put], f / 2.0, f / 2.0),
        rule(vec![FaultOp::Read], f / 2.0, f / 4.0),
        rule(vec![FaultOp::List], f / 2.0, 0.0),
        rule(vec![FaultOp::Delete], f / 2.0, f / 2.0),
        FaultRule {
            // Stale listings trigger the known bugs (see `SimConfig::strict`).
            ops: match (stale_gets, cfg.stale_listings) {
                (true, true) => vec![FaultOp::Read, FaultOp::List],
                (true, false) => vec![FaultOp::Read],
                (false, true) => vec![FaultOp::List],
                (false, false) => vec![],
            },
            path_contains: Some(batchweave_manifest::MANIFEST_DIR.into()),
            stale_read: if stale_gets || cfg.stale_listings {
                cfg.stale_rate
            } else {
                0.0
            },
            ..Default::default()
        },
        // Latency spikes on commits: a wide jitter on top of the model.
        FaultRule {
            ops: vec![FaultOp::Create],
            latency: Some((Duration::ZERO, Duration::from_millis(400))),
            ..Default::default()
        },
    ]
}

/// The parts of the world drawn before the store exists.
pub(crate) struct Shape {
    pub(crate) grid: Grid,
    pub(crate) groups: Vec<GroupPlan>,
    pub(crate) uniform_lag: Option<u64>,
    pub(crate) min_lag: u64,
    pub(crate) interval_tgbs: u64,
}

impl World {
    /// Builds the store stack; must run inside the paused runtime.
    pub(crate) fn new(
        seed: u64,
        cfg: SimConfig,
        rng: &mut StdRng,
        shape: Shape,
        coop: CoopPlan,
    ) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(CLOCK_BASE_MS));
        let log = Arc::new(EventLog::new(clock.clone()));
        let backend = SimBackend::new(
            clock.clone(),
            &cfg,
            rng.random(),
            log.clone(),
            coop.stale.clone(),
        );
        let model = LatencyModel {
            first_byte: Duration::from_millis(rng.random_range(2..=30)),
            jitter: Duration::from_millis(rng.random_range(0..=20)),
            ..LatencyModel::default()
        };
        let quiet: Arc<dyn batchweave_store::object_store::ObjectStore> = Arc::new(
            LatencyStore::new(backend.clone(), model, rng.random(), clock.clone()),
        );
        let faults = Arc::new(FaultStore::new(
            quiet.clone(),
            fault_rules(&cfg, true),
            rng.random(),
            clock.clone(),
        ));
        let gc_faults = Arc::new(FaultStore::new(
            quiet.clone(),
            fault_rules(&cfg, cfg.gc_stale_reads),
            rng.random(),
            clock.clone(),
        ));
        let store = StreamStore::from_object_store(faults.clone(), "", "sim:///")
            .with_clock(clock.clone())
            .with_seed(rng.random());

        Self {
            seed,
            cfg,
            clock,
            backend,
            faults,
            gc_faults,
            store,
            quiet,
            log,
            tally: Mutex::new(Tally::default()),
            producers: Mutex::new(BTreeMap::new()),
            ranks: Mutex::new(BTreeMap::new()),
            lags: Mutex::new(BTreeMap::new()),
            lives: Mutex::new(Vec::new()),
            grid: shape.grid,
            groups: shape.groups,
            uniform_lag: shape.uniform_lag,
            min_lag: shape.min_lag,
            interval_tgbs: shape.interval_tgbs,
            coop,
        }
    }

    /// A reclaimer's store handle over the faulty stack with its own clock (a host of
    /// its own).
    pub(crate) fn gc_store(&self, clock: Arc<dyn Clock>, seed: u64) -> StreamStore {
        StreamStore::from_object_store(self.gc_faults.clone(), "", "sim:///")
            .with_clock(clock)
            .with_seed(seed)
    }

    /// A store handle whose deletes fail with probability `rate` and that
    /// never retries: a GC pass on it stops at the first failed delete.
    pub(crate) fn flaky_delete_store(
        &self,
        rate: f64,
        seed: u64,
        clock: Arc<dyn Clock>,
    ) -> StreamStore {
        let rules = vec![FaultRule {
            ops: vec![FaultOp::Delete],
            error_before: rate,
            ..Default::default()
        }];
        let inner = Arc::new(FaultStore::new(
            self.quiet.clone(),
            rules,
            seed,
            self.clock.clone(),
        ));
        StreamStore::from_object_store(inner, "", "sim:///gc-interrupted")
            .with_clock(clock)
            .with_seed(seed)
            .with_retry(RetryPolicy {
                max_attempts: 1,
                ..RetryPolicy::default()
            })
    }

    /// Virtual milliseconds since the run started.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.log.elapsed_ms()
    }

    /// Appends an event to the log.
    pub(crate) fn event(&self, who: &str, what: impl AsRef<str>) {
        self.log.event(who, what);
    }

    /// The whole event log.
    pub(crate) fn events(&self) -> Vec<String> {
        self.log.all()
    }

    /// A violation of `invariant`, with the recent events. A violation the backend
    /// saw earlier (at a deletion or a commit) is reported instead: it came first.
    pub(crate) fn violation(
        &self,
        invariant: &'static str,
        detail: impl Into<String>,
    ) -> SimFailure {
        let detail = detail.into();
        if let Some(seen) = self.backend.violation() {
            return SimFailure::Violation {
                seed: self.seed,
                invariant: seen.invariant,
                detail: seen.detail,
                trace: seen.trace,
                replay: crate::replay_hint(self.seed, &self.cfg),
            };
        }
        self.event("check", format!("VIOLATION {invariant}: {detail}"));
        SimFailure::Violation {
            seed: self.seed,
            invariant,
            detail,
            trace: self.log.trace(),
            replay: crate::replay_hint(self.seed, &self.cfg),
        }
    }

    /// The backend's violation, if it saw one.
    pub(crate) fn backend_violation(&self) -> Result<(), SimFailure> {
        match self.backend.violation() {
            Some(seen) => Err(SimFailure::Violation {
                seed: self.seed,
                invariant: seen.invariant,
                detail: seen.detail,
                trace: seen.trace,
                replay: crate::replay_hint(self.seed, &self.cfg),
            }),
            None => Ok(()),
        }
    }

    /// A liveness failure.
    pub(crate) fn stuck(&self, detail: impl Into<String>) -> SimFailure {
        if let Err(f) = self.backend_violation() {
            return f;
        }
        SimFailure::Stuck {
            seed: self.seed,
            detail: detail.into(),
            trace: self.log.trace(),
            replay: crate::replay_hint(self.seed, &self.cfg),
        }
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut lock(&self.tally));
    }
}
