//! The state one run shares between its actors: the store stack, the clock,
//! the event log, the counters and what each actor observed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use batchweave_consumer::ConsumerState;
use batchweave_store::{
    Clock, FaultOp, FaultRule, FaultStore, LatencyModel, LatencyStore, RetryPolicy, StreamStore,
    TokioClock,
};
use bytes::Bytes;
use rand::Rng;
use rand::rngs::StdRng;
use tokio::time::Instant;

use crate::backend::SimBackend;
use crate::{SimConfig, SimFailure};

/// Unix milliseconds the virtual clock starts at (2024-01-01T00:00:00Z).
pub(crate) const CLOCK_BASE_MS: u64 = 1_704_067_200_000;

/// Events kept in a failure's trace.
const TRACE_LEN: usize = 60;

/// FNV-1a, 64 bit: a stable hash for digests and payloads.
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

/// The deterministic bytes of slice `d` of the TGB of `producer` at source
/// offset `offset`: a header naming all three, then `filler` derived bytes.
pub(crate) fn slice_bytes(producer: &str, offset: u64, d: u32, filler: usize) -> Bytes {
    let mut v = format!("{producer}|{offset}|{d}|").into_bytes();
    let h = Fnv::default().bytes(producer.as_bytes()).u64(offset).0;
    v.extend((0..filler).map(|i| (h.rotate_left((i % 64) as u32) as u8) ^ (d as u8)));
    Bytes::from(v)
}

/// Parses a slice header: `(producer, offset, d)`.
pub(crate) fn parse_slice(b: &[u8]) -> Option<(String, u64, u32)> {
    let mut pipes = b
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == b'|')
        .map(|(i, _)| i);
    let (a, c, e) = (pipes.next()?, pipes.next()?, pipes.next()?);
    let field = |r: std::ops::Range<usize>| std::str::from_utf8(b.get(r)?).ok();
    Some((
        field(0..a)?.to_string(),
        field(a + 1..c)?.parse().ok()?,
        field(c + 1..e)?.parse().ok()?,
    ))
}

/// Filler length of the slices of `(producer, offset)`: a function of the
/// pair only, so a reader can recompute the expected bytes.
pub(crate) fn filler_len(cfg: &SimConfig, producer: &str, offset: u64) -> usize {
    let (lo, hi) = (*cfg.slice_bytes.start(), *cfg.slice_bytes.end());
    let span = u64::try_from(hi.saturating_sub(lo)).unwrap_or(0) + 1;
    let h = Fnv::default()
        .bytes(producer.as_bytes())
        .u64(offset)
        .u64(7)
        .0;
    lo + usize::try_from(h % span).unwrap_or(0)
}

/// One step as a rank saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepSeen {
    pub(crate) step: u64,
    pub(crate) producer: String,
    pub(crate) sequence: u64,
    pub(crate) key: String,
    pub(crate) offset: u64,
}

/// What one rank did.
#[derive(Debug, Default)]
pub(crate) struct RankLog {
    pub(crate) seen: Vec<StepSeen>,
    pub(crate) last_checkpoint: Option<ConsumerState>,
}

/// What one producer id did.
#[derive(Debug, Default, Clone)]
pub(crate) struct ProducerLog {
    pub(crate) quota: u64,
    /// Highest source offset any incarnation reported as committed.
    pub(crate) believed: u64,
    pub(crate) finished: bool,
}

/// Counters for the report.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    pub(crate) incarnations: u64,
    pub(crate) producer_crashes: u64,
    pub(crate) zombies: u64,
    pub(crate) consumer_restores: u64,
    pub(crate) gc_passes: u64,
    pub(crate) gc_interrupted: u64,
    pub(crate) conflicts: u64,
    pub(crate) ambiguous: u64,
    pub(crate) lost_replies_recovered: u64,
    pub(crate) ghosts_prevented: u64,
    pub(crate) tgbs_reclaimed: u64,
    pub(crate) orphans_reclaimed: u64,
    pub(crate) manifests_reclaimed: u64,
}

/// Everything the actors of one run share.
pub(crate) struct World {
    pub(crate) seed: u64,
    pub(crate) cfg: SimConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) start: Instant,
    pub(crate) backend: Arc<SimBackend>,
    pub(crate) faults: Arc<FaultStore>,
    /// The store every component uses: faults over latency over the backend.
    pub(crate) store: StreamStore,
    /// The backend with latency but without faults (for interrupted GC passes).
    pub(crate) quiet: Arc<dyn batchweave_store::object_store::ObjectStore>,
    log: Mutex<Vec<String>>,
    /// Print every event as it happens (`BATCHWEAVE_SIM_LOG=1`).
    echo: bool,
    pub(crate) tally: Mutex<Tally>,
    pub(crate) producers: Mutex<BTreeMap<String, ProducerLog>>,
    pub(crate) ranks: Mutex<Vec<RankLog>>,
    /// `max_lag` of every producer incarnation, by (id, epoch).
    pub(crate) lags: Mutex<BTreeMap<(String, u64), Option<u64>>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn fault_rules(cfg: &SimConfig) -> Vec<FaultRule> {
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
            ops: if cfg.stale_listings {
                vec![FaultOp::Read, FaultOp::List]
            } else {
                vec![FaultOp::Read]
            },
            path_contains: Some(batchweave_manifest::MANIFEST_DIR.into()),
            stale_read: cfg.stale_rate,
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

impl World {
    /// Builds the store stack; must run inside the paused runtime.
    pub(crate) fn new(seed: u64, cfg: SimConfig, rng: &mut StdRng) -> Self {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(CLOCK_BASE_MS));
        let backend = Arc::new(SimBackend::new(clock.clone(), cfg.plant, rng.random()));
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
            fault_rules(&cfg),
            rng.random(),
            clock.clone(),
        ));
        let store = StreamStore::from_object_store(faults.clone(), "", "sim:///")
            .with_clock(clock.clone())
            .with_seed(rng.random());

        Self {
            seed,
            cfg,
            start: clock.now(),
            clock,
            backend,
            faults,
            store,
            quiet,
            log: Mutex::new(Vec::new()),
            echo: std::env::var("BATCHWEAVE_SIM_LOG").is_ok_and(|v| v == "1"),
            tally: Mutex::new(Tally::default()),
            producers: Mutex::new(BTreeMap::new()),
            ranks: Mutex::new(Vec::new()),
            lags: Mutex::new(BTreeMap::new()),
        }
    }

    /// A store handle whose deletes fail with probability `rate` and that
    /// never retries: a GC pass on it stops at the first failed delete.
    pub(crate) fn flaky_delete_store(&self, rate: f64, seed: u64) -> StreamStore {
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
            .with_clock(self.clock.clone())
            .with_seed(seed)
            .with_retry(RetryPolicy {
                max_attempts: 1,
                ..RetryPolicy::default()
            })
    }

    /// Virtual milliseconds since the run started.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        let d = self.clock.now().saturating_duration_since(self.start);
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }

    /// Appends an event to the log.
    pub(crate) fn event(&self, who: &str, what: impl AsRef<str>) {
        let line = format!("{:>9}ms {who:<6} {}", self.elapsed_ms(), what.as_ref());
        tracing::trace!("{line}");
        if self.echo {
            eprintln!("{line}");
        }
        lock(&self.log).push(line);
    }

    /// The whole event log.
    pub(crate) fn events(&self) -> Vec<String> {
        lock(&self.log).clone()
    }

    fn trace(&self) -> Vec<String> {
        let log = lock(&self.log);
        log.iter()
            .skip(log.len().saturating_sub(TRACE_LEN))
            .cloned()
            .collect()
    }

    /// A violation of `invariant`, with the recent events.
    pub(crate) fn violation(
        &self,
        invariant: &'static str,
        detail: impl Into<String>,
    ) -> SimFailure {
        let detail = detail.into();
        self.event("check", format!("VIOLATION {invariant}: {detail}"));
        SimFailure::Violation {
            seed: self.seed,
            invariant,
            detail,
            trace: self.trace(),
            replay: crate::replay_hint(self.seed, &self.cfg),
        }
    }

    /// A liveness failure.
    pub(crate) fn stuck(&self, detail: impl Into<String>) -> SimFailure {
        SimFailure::Stuck {
            seed: self.seed,
            detail: detail.into(),
            trace: self.trace(),
            replay: crate::replay_hint(self.seed, &self.cfg),
        }
    }

    pub(crate) fn count(&self, f: impl FnOnce(&mut Tally)) {
        f(&mut lock(&self.tally));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_describe_themselves() {
        let b = slice_bytes("p3", 17, 2, 40);
        assert_eq!(parse_slice(&b), Some(("p3".into(), 17, 2)));
        assert_eq!(b, slice_bytes("p3", 17, 2, 40));
        assert_ne!(b, slice_bytes("p3", 17, 1, 40));
        assert_eq!(parse_slice(b"garbage"), None);
    }
}
