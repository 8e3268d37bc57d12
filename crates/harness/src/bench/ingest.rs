//! One ingestion run: N producers appending same-size TGBs for a fixed
//! window under one commit policy (optionally with a visibility observer), and the
//! raw-PUT baseline of the same shape.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use batchweave::manifest::{
    DecodeLimits, Manifest, manifest_key, parse_manifest_key, try_encode_manifest,
};
use batchweave::producer::ProducerBuilder;
use batchweave::store::{StreamStore, Surcharge};
use batchweave::tgb::encode_tgb;
use batchweave::{
    ConsumerSettings, GcSettings, PolicyKind, Producer, ProducerSettings, ProducerStats, Stream,
};
use bytes::Bytes;
use futures::StreamExt as _;
use tokio::time::Instant;

use super::env::{Env, spawn_reaper};
use crate::readers::{Readers, ReadersReport};
use crate::rusage;
use crate::visibility::{Observer, VisibilityReport};

/// The shape of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Concurrent producers (or PUT tasks).
    pub(crate) producers: usize,
    /// Payload bytes per TGB (one slice).
    pub(crate) payload: usize,
    /// Measured window, after the warmup.
    pub(crate) window: Duration,
    /// Excluded start of the run.
    pub(crate) warmup: Duration,
    /// Time-series buckets over warmup + window.
    pub(crate) buckets: usize,
    /// The paper's producer model: one worker uploads and commits, so commit
    /// attempts stall uploads ([`ProducerSettings::single_worker`]).
    pub(crate) single_worker: bool,
    /// Run a visibility [`Observer`] polling every this often. It samples the TGBs
    /// whose append returned after the warmup and before the last tenth of the window
    /// (those could not become visible before the window closes under any policy).
    pub(crate) observe: Option<Duration>,
    /// Open every producer (claim its epoch) before the run starts, one after the
    /// other, for at most this long on the store's clock; `None`: each producer opens
    /// inside the run (the claims are part of the warmup). One at a time because N
    /// producers claiming at once conflict with each other: about N^2 / 2 requests, which
    /// at N = 1024 costs minutes of wall time on the simulator and measures nothing of
    /// interest here.
    pub(crate) open_first: Option<Duration>,
    /// Groups of consumer ranks to run over the measured window, by size: each group
    /// follows the stream with the consumers' own polling loop
    /// ([`Readers`](crate::readers::Readers)) on a store handle of its own (on the
    /// simulator its own latency model and rate gates, so neither the producers nor the
    /// other groups queue behind it). Empty: none.
    pub(crate) readers: &'static [usize],
    /// How long the reader groups run, from the end of the warmup (at most to the end
    /// of the window).
    pub(crate) readers_window: Duration,
    /// The paper's regime (issue #17, section 3; simulator only): the manifest is
    /// trimmed as usual, so the producers' CPU and memory stay bounded, but the latency
    /// model charges every manifest GET and PUT for the bytes the trimmed descriptors
    /// would add ([`Untrimmed`]): manifest I/O costs what an untrimmed manifest's would.
    pub(crate) untrimmed: bool,
}

/// The paper's untrimmed manifest, as the latency model sees it: every second the
/// trimmer reads the newest version and sets the surcharge to its trimmed steps
/// (`first_step`) times the encoded bytes of one descriptor (measured once on that
/// manifest: its size with and without its descriptors). Versions committed within
/// the second are charged for at least what the newest version read had trimmed, so
/// the surcharge lags the untrimmed size by at most a second of growth.
#[derive(Debug, Default)]
pub(crate) struct Untrimmed {
    /// Bytes charged on top of a manifest version's own.
    extra: AtomicU64,
    /// The newest version's encoded size plus `extra`.
    size: AtomicU64,
    /// Encoded bytes per descriptor (0 until measured).
    per_tgb: AtomicU64,
}

impl Untrimmed {
    /// The latency model's surcharge: `extra` for manifest versions, 0 otherwise.
    fn surcharge(self: &Arc<Self>) -> Surcharge {
        let me = self.clone();
        Arc::new(move |p: &batchweave::object_store::path::Path| {
            let key = p.as_ref();
            let versioned = key
                .rfind(batchweave::manifest::MANIFEST_DIR)
                .is_some_and(|i| parse_manifest_key(&key[i..]).is_some());
            if versioned {
                me.extra.load(Ordering::Relaxed)
            } else {
                0
            }
        })
    }

    /// Updates the surcharge from the newest version `m`.
    fn observe(&self, m: &Manifest) {
        let limits = DecodeLimits::default();
        let Ok(full) = try_encode_manifest(m, &limits) else {
            return;
        };
        let full = full.len() as u64;
        let mut per = self.per_tgb.load(Ordering::Relaxed);
        if per == 0 && !m.tgbs.is_empty() {
            // The same version with every step trimmed (still a valid manifest).
            let bare = Manifest {
                tgbs: Vec::new(),
                first_step: m.total_tgbs,
                retained_bytes: 0,
                ..m.clone()
            };
            if let Ok(b) = try_encode_manifest(&bare, &limits) {
                per = full.saturating_sub(b.len() as u64) / m.tgbs.len() as u64;
                self.per_tgb.store(per, Ordering::Relaxed);
            }
        }
        let extra = m.first_step.saturating_mul(per);
        self.extra.store(extra, Ordering::Relaxed);
        self.size
            .store(full.saturating_add(extra), Ordering::Relaxed);
    }
}

/// How a producer task gets its producer.
enum Start {
    /// Opens it inside the run (bounded by the run's end).
    Open(ProducerBuilder),
    /// Opened before the run.
    Ready(Producer),
    /// Did not open before the run within [`Shape::open_first`].
    Never,
}

/// Cumulative totals over all producers at one instant.
#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    bytes: u64,
    tgbs: u64,
    attempts: u64,
    successes: u64,
}

impl Totals {
    fn of(stats: &[ProducerStats]) -> Self {
        stats.iter().fold(Self::default(), |t, s| Self {
            bytes: t.bytes + s.bytes_committed,
            tgbs: t.tgbs + s.tgbs_committed,
            attempts: t.attempts + s.attempts,
            successes: t.successes + s.successes,
        })
    }
}

/// What one ingestion run measured.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ingest {
    /// Committed (visible) bytes per second over the window.
    pub(crate) bytes_per_sec: f64,
    /// Successful attempts / attempts over the window.
    pub(crate) success: f64,
    /// Attempts over the window.
    pub(crate) attempts: u64,
    /// `(seconds since start, MB/s, success rate)` per bucket.
    pub(crate) series: Vec<(f64, f64, f64)>,
    /// Mean of the producers' DAC fragile-window estimates at the end (seconds).
    pub(crate) tau: Option<f64>,
    /// Mean of the producers' commit gaps at the end (zero for count-based policies).
    pub(crate) gap: Duration,
    /// TGBs committed over the whole run (warmup included).
    pub(crate) tgbs_committed: u64,
    /// Store requests of the producers over the whole run (the trimmer, the reaper and
    /// the observer use handles of their own).
    pub(crate) requests: u64,
    /// The observer's report, with [`Shape::observe`].
    pub(crate) visibility: Option<VisibilityReport>,
    /// When the producers were told to stop (the end of the window).
    pub(crate) end: Option<Instant>,
    /// Producers that finished opening (claiming their epoch) before the end.
    pub(crate) opened: usize,
    /// With [`Shape::open_first`]: how long opening every producer took.
    pub(crate) open_time: Option<Duration>,
    /// One report per group of [`Shape::readers`], in order.
    pub(crate) readers: Vec<ReadersReport>,
    /// CPU time (user + system) of this whole process over the run, warmup included
    /// (`None` where getrusage is unavailable). On the simulator it includes the latency
    /// model's and the in-memory store's work.
    pub(crate) cpu: Option<Duration>,
    /// Bytes of TGB objects committed over the whole run (what [`Self::cpu`] moved).
    pub(crate) bytes_total: u64,
    /// TGBs committed over the window (the stream's count at its end minus at the warmup's).
    pub(crate) tgbs_in_window: u64,
    /// With [`Shape::untrimmed`]: `(seconds since start, untrimmed manifest MB, mean
    /// fragile window of the producers in ms or 0)` per bucket.
    pub(crate) manifest_series: Vec<(f64, f64, f64)>,
}

/// What one raw-PUT run measured.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RawPut {
    /// PUT bytes per second over the window.
    pub(crate) bytes_per_sec: f64,
    /// PUT bytes over the whole run, warmup included.
    pub(crate) bytes_total: u64,
    /// CPU time of this process over the whole run (see [`Ingest::cpu`]).
    pub(crate) cpu: Option<Duration>,
}

/// CPU seconds per GB (10^9 bytes) moved, or `None` without a CPU reading or bytes.
pub(crate) fn cpu_s_per_gb(cpu: Option<Duration>, bytes: u64) -> Option<f64> {
    let cpu = cpu?;
    (bytes > 0).then(|| cpu.as_secs_f64() / (bytes as f64 / 1e9))
}

/// CPU time since `before` (user + system of the whole process).
fn cpu_since(before: Option<rusage::Usage>) -> Option<Duration> {
    Some(rusage::now()?.cpu_since(&before?))
}

fn tgb_body(payload: usize) -> anyhow::Result<(Vec<Bytes>, u64)> {
    let slice = Bytes::from(vec![0x5a; payload]);
    let enc = encode_tgb(1, 1, vec![slice])?;
    Ok((enc.parts, enc.object_size))
}

/// Runs `shape` under `policy` on a fresh stream.
pub(crate) async fn ingest(env: &Env, shape: Shape, policy: PolicyKind) -> anyhow::Result<Ingest> {
    if shape.untrimmed && !env.sim {
        anyhow::bail!("the untrimmed-manifest regime runs on the simulator only (--sim)");
    }
    let untrimmed = shape.untrimmed.then(|| Arc::new(Untrimmed::default()));
    let fresh = env
        .fresh_charged("ingest", untrimmed.as_ref().map(Untrimmed::surcharge))
        .await?;
    let usage0 = rusage::now();
    // A cooperative committer finds other producers' uploads by listing them: the reaper
    // keeps uncommitted uploads for a minute (GC's orphan grace is an hour).
    let keep = if policy.build().cooperative() {
        Duration::from_secs(60)
    } else {
        Duration::ZERO
    };
    let reaper = spawn_reaper(&fresh, Duration::from_millis(250), keep);
    let stream = Stream::from_store(fresh.store.clone());
    let clock = fresh.store.clock().clone();
    let slots: Arc<Vec<Mutex<ProducerStats>>> =
        Arc::new((0..shape.producers).map(|_| Mutex::default()).collect());
    let observer = match shape.observe {
        Some(poll) => Some(Observer::start(&fresh.store, poll).await?),
        None => None,
    };
    let builders = (0..shape.producers).map(|i| {
        let settings = ProducerSettings {
            policy,
            // References only (the objects are uploaded): let every policy
            // batch as much as it wants, as the paper's producers do.
            max_buffered: 1 << 20,
            seed: Some(env.seed.wrapping_mul(31).wrapping_add(i as u64)),
            single_worker: shape.single_worker,
            // The paper's producers have no bound on an upload's age: in its regime a
            // policy that stops committing stalls (and is measured so) rather than
            // stopping with an expired upload after 30 minutes. Nothing sweeps uploads
            // here but the simulator's reaper, behind the producers' back.
            max_commit_age: if shape.untrimmed {
                (shape.warmup + shape.window) * 2
            } else {
                ProducerSettings::default().max_commit_age
            },
            ..Default::default()
        };
        stream.producer(format!("p{i:04}")).settings(settings)
    });
    let (starts, open_time): (Vec<Start>, _) = match shape.open_first {
        None => (builders.map(Start::Open).collect(), None),
        Some(limit) => {
            let until = clock.now() + limit;
            let t0 = clock.now();
            let mut starts = Vec::with_capacity(shape.producers);
            for b in builders {
                let left = until.saturating_duration_since(clock.now());
                starts.push(tokio::select! {
                    r = b.open() => Start::Ready(r?),
                    () = clock.sleep(left) => Start::Never,
                });
            }
            (starts, Some(clock.now().saturating_duration_since(t0)))
        }
    };
    let start = clock.now();
    let end = start + shape.warmup + shape.window;
    let sampled = (start + shape.warmup, end - shape.window / 10);
    let enc = encode_tgb(1, 1, vec![Bytes::from(vec![0x5a; shape.payload])])?;
    let trimmer = spawn_trimmer(&stream, Duration::from_secs(1), untrimmed.clone());
    // The reader groups start positioned at the head once the warmup is over and stop
    // after `readers_window` (or at the end of the window).
    let reader_groups = (!shape.readers.is_empty()).then(|| {
        let stores: Vec<StreamStore> = (0..shape.readers.len())
            .map(|i| env.reader_store(&fresh, i as u64))
            .collect();
        let (ws, clock) = (shape.readers, clock.clone());
        let at = start + shape.warmup;
        let until = (at + shape.readers_window).min(end);
        tokio::spawn(async move {
            clock.sleep(at.saturating_duration_since(clock.now())).await;
            let mut groups = Vec::with_capacity(ws.len());
            for (store, &w) in stores.iter().zip(ws) {
                groups.push(Readers::start(store, w, ConsumerSettings::default()).await?);
            }
            clock
                .sleep(until.saturating_duration_since(clock.now()))
                .await;
            let mut reports = Vec::with_capacity(groups.len());
            for g in groups {
                reports.push(g.finish().await?);
            }
            anyhow::Ok(reports)
        })
    });
    let mut tasks = Vec::with_capacity(shape.producers);
    for (i, how) in starts.into_iter().enumerate() {
        let (slots, enc, clock) = (slots.clone(), enc.clone(), clock.clone());
        let rec = observer.as_ref().map(Observer::recorder);
        tasks.push(tokio::spawn(async move {
            // Opening claims an epoch (a commit attempt): under heavy contention it can
            // outlast the run, so it is bounded by the run's end too.
            let left = end.saturating_duration_since(clock.now());
            let mut p = match how {
                Start::Ready(p) => p,
                Start::Never => return anyhow::Ok(None),
                Start::Open(builder) => tokio::select! {
                    r = builder.open() => r?,
                    () = clock.sleep(left) => return anyhow::Ok(None),
                },
            };
            let mut offset = 0u64;
            loop {
                let left = end.saturating_duration_since(clock.now());
                if left.is_zero() {
                    break;
                }
                offset += 1;
                let receipt = tokio::select! {
                    r = p.append_encoded(enc.clone(), offset) => r?,
                    () = clock.sleep(left) => break,
                };
                if let Some(rec) = &rec {
                    let now = clock.now();
                    if now >= sampled.0 && now <= sampled.1 {
                        rec.record_upload(receipt.key, now);
                    }
                }
                if let Ok(mut s) = slots[i].lock() {
                    *s = p.stats();
                }
            }
            let last = p.stats();
            if let Ok(mut s) = slots[i].lock() {
                *s = last.clone();
            }
            anyhow::Ok(Some(last))
        }));
    }
    // The stream's own count of committed TGBs (the newest version's total), read on a
    // handle of its own: under cooperative commits a producer learns late that others
    // published its TGBs, so its statistics lag the stream.
    let truth = Stream::from_store(fresh.store.map_backend(|b| b)).reclaimer(GcSettings::default());
    let committed_now = || async {
        truth
            .newest_manifest()
            .await
            .ok()
            .flatten()
            .map_or(0, |m| m.total_tgbs)
    };
    let total = shape.warmup + shape.window;
    let step = total / u32::try_from(shape.buckets.max(1)).unwrap_or(1);
    let mut stream_at_warmup = 0u64;
    let mut marks = vec![(0.0, Totals::default())];
    let mut manifest_series = Vec::new();
    let mut at_warmup = Totals::default();
    let mut t = start;
    while t + step <= end {
        clock
            .sleep((t + step).saturating_duration_since(clock.now()))
            .await;
        t += step;
        let snap: Vec<ProducerStats> = slots
            .iter()
            .filter_map(|m| m.lock().ok().map(|s| s.clone()))
            .collect();
        let now = Totals::of(&snap);
        if t.saturating_duration_since(start) <= shape.warmup {
            at_warmup = now;
            stream_at_warmup = committed_now().await;
        }
        let at = t.saturating_duration_since(start).as_secs_f64();
        if let Some(u) = &untrimmed {
            let taus: Vec<f64> = snap
                .iter()
                .filter_map(|s| s.tau)
                .map(|d| d.as_secs_f64())
                .collect();
            let tau_ms = if taus.is_empty() {
                0.0
            } else {
                taus.iter().sum::<f64>() / taus.len() as f64 * 1e3
            };
            manifest_series.push((at, u.size.load(Ordering::Relaxed) as f64 / 1e6, tau_ms));
        }
        marks.push((at, now));
    }
    let stream_at_end = committed_now().await;
    let readers = match reader_groups {
        Some(g) => g.await.context("reader groups")??,
        None => Vec::new(),
    };
    let mut finals = Vec::with_capacity(tasks.len());
    for t in tasks {
        // `None`: the producer was still opening when the run ended.
        if let Some(s) = t.await.context("producer task")?? {
            finals.push(s);
        }
    }
    let visibility = match observer {
        Some(o) => Some(o.finish().await?),
        None => None,
    };
    let requests = {
        let c = fresh.store.stats();
        c.read_requests() + c.write_requests() + c.lists
    };
    reaper.abort();
    trimmer.abort();
    let fin = Totals::of(&finals);
    let taus: Vec<f64> = finals
        .iter()
        .filter_map(|s| s.tau.map(|d| d.as_secs_f64()))
        .collect();
    let attempts = fin.attempts.saturating_sub(at_warmup.attempts);
    let series = marks
        .windows(2)
        .map(|w| {
            let (t0, a) = w[0];
            let (t1, b) = w[1];
            let dt = (t1 - t0).max(1e-9);
            let mb = b.bytes.saturating_sub(a.bytes) as f64 / dt / 1e6;
            let att = b.attempts.saturating_sub(a.attempts);
            let ok = b.successes.saturating_sub(a.successes);
            let rate = if att == 0 {
                1.0
            } else {
                ok as f64 / att as f64
            };
            (t1, mb, rate)
        })
        .collect();
    let cpu = cpu_since(usage0);
    let gap = finals
        .iter()
        .map(|s| s.gap)
        .sum::<Duration>()
        .checked_div(u32::try_from(finals.len()).unwrap_or(u32::MAX))
        .unwrap_or_default();
    env.discard(fresh).await;
    let tgbs_committed = stream_at_end.max(fin.tgbs);
    Ok(Ingest {
        gap,
        tgbs_committed,
        tgbs_in_window: stream_at_end.saturating_sub(stream_at_warmup),
        manifest_series,
        cpu,
        bytes_total: tgbs_committed * enc.object_size,
        requests,
        visibility,
        end: Some(end),
        opened: finals.len(),
        open_time,
        readers,
        // Every TGB of the run has the same size.
        bytes_per_sec: stream_at_end.saturating_sub(stream_at_warmup) as f64
            * enc.object_size as f64
            / shape.window.as_secs_f64().max(1e-9),
        success: if attempts == 0 {
            0.0
        } else {
            fin.successes.saturating_sub(at_warmup.successes) as f64 / attempts as f64
        },
        attempts,
        series,
        tau: if taus.is_empty() {
            None
        } else {
            Some(taus.iter().sum::<f64>() / taus.len() as f64)
        },
    })
}

/// Manifest versions the trimmer keeps behind the newest: the store holds only
/// these (older ones are deleted behind a GC boundary, as GC deletes versions no
/// checkpoint needs), so a long run's memory and the simulator's listings stay
/// bounded. Keeping every version made the simulator spend most of its CPU listing
/// them (`InMemory` lists a prefix by filtering all keys) when a producer resyncs.
const KEEP_VERSIONS: u64 = 1024;

/// Logical trim as a consumer group that keeps up with the head would
/// cause it: every `every`, the GC boundary's low-water step moves to the
/// newest version's end, so commits drop older descriptors and manifests
/// track the retained window, and only the newest [`KEEP_VERSIONS`] manifest
/// versions are kept (on the simulator the reaper discards TGB bodies). Its
/// requests go through a handle of its own, so `stream`'s counters do not see
/// them. With `untrimmed`, it also updates that surcharge from each newest
/// version it reads.
pub(crate) fn spawn_trimmer(
    stream: &Stream,
    every: Duration,
    untrimmed: Option<Arc<Untrimmed>>,
) -> tokio::task::JoinHandle<()> {
    let stream = Stream::from_store(stream.store().map_backend(|b| b));
    tokio::spawn(async move {
        let clock = stream.store().clock().clone();
        let gc = stream.reclaimer(GcSettings::default());
        loop {
            clock.sleep(every).await;
            let (Ok(mut b), Ok(Some(m))) = (gc.boundary().await, gc.newest_manifest().await) else {
                continue;
            };
            let old_live = b.min_live_version.max(1);
            if let Some(u) = &untrimmed {
                u.observe(&m);
            }
            let live = old_live.max(m.version.saturating_sub(KEEP_VERSIONS));
            if m.total_tgbs > b.low_water_step || live > old_live {
                b.low_water_step = b.low_water_step.max(m.total_tgbs);
                b.min_live_version = b.min_live_version.max(live);
                b.updated_at_ms = clock.unix_millis();
                // Versions are deleted only once the boundary below which a version
                // counts as deleted is durable (as GC does: a producer whose base is
                // deleted learns it from the boundary, never commits on a ghost).
                if gc.advance_boundary(b).await.is_ok() && live > old_live {
                    let store = stream.store();
                    futures::stream::iter(old_live..live)
                        .for_each_concurrent(4, |v| async move {
                            let _ = store.delete(&manifest_key(v)).await;
                        })
                        .await;
                }
            }
        }
    })
}

/// Raw PUT throughput of `shape.producers` tasks writing objects of the
/// encoded TGB's size back to back, one PUT in flight per task as a producer has one
/// upload in flight (bytes per second over the window).
pub(crate) async fn raw_put(env: &Env, shape: Shape) -> anyhow::Result<RawPut> {
    let fresh = env.fresh("rawput").await?;
    let usage0 = rusage::now();
    let reaper = spawn_reaper(&fresh, Duration::from_millis(250), Duration::ZERO);
    let (parts, size) = tgb_body(shape.payload)?;
    let store: StreamStore = fresh.store.clone();
    let clock = store.clock().clone();
    let start = clock.now();
    let from = start + shape.warmup;
    let end = from + shape.window;
    let mut tasks = Vec::new();
    for i in 0..shape.producers {
        let (store, parts, clock) = (store.clone(), parts.clone(), clock.clone());
        tasks.push(tokio::spawn(async move {
            let (mut done, mut all) = (0u64, 0u64);
            let mut k = 0u64;
            loop {
                let left = end.saturating_duration_since(clock.now());
                if left.is_zero() {
                    break;
                }
                k += 1;
                let key = format!("tgb/raw/{i}/{k}.tgb");
                tokio::select! {
                    r = store.put_payload(&key, parts.iter().cloned().collect()) => { r?; }
                    () = clock.sleep(left) => break,
                }
                all += size;
                let now: Instant = clock.now();
                if now >= from && now <= end {
                    done += size;
                }
            }
            anyhow::Ok((done, all))
        }));
    }
    let (mut bytes, mut bytes_total) = (0u64, 0u64);
    for t in tasks {
        let (d, a) = t.await.context("put task")??;
        bytes += d;
        bytes_total += a;
    }
    let cpu = cpu_since(usage0);
    reaper.abort();
    env.discard(fresh).await;
    Ok(RawPut {
        bytes_per_sec: bytes as f64 / shape.window.as_secs_f64().max(1e-9),
        bytes_total,
        cpu,
    })
}

#[cfg(test)]
mod tests {
    use batchweave_manifest::testing::SyntheticHistory;

    use super::*;

    #[test]
    fn the_untrimmed_surcharge_is_the_trimmed_steps_times_a_descriptor() {
        let full = SyntheticHistory::new().writer("w", 1000).build();
        let trimmed = SyntheticHistory::new()
            .writer("w", 1000)
            .retain(100)
            .build();
        assert_eq!(trimmed.first_step, 900);
        let limits = DecodeLimits::default();
        let full_len = try_encode_manifest(&full, &limits).unwrap().len() as u64;
        let u = Arc::new(Untrimmed::default());
        u.observe(&trimmed);
        let per = u.per_tgb.load(Ordering::Relaxed);
        assert!(per > 0, "a descriptor is measured");
        assert_eq!(u.extra.load(Ordering::Relaxed), 900 * per);
        // The charged size is the untrimmed manifest's, to within a few bytes per
        // descriptor (descriptors' varints differ in width).
        let charged = u.size.load(Ordering::Relaxed);
        assert!(
            charged.abs_diff(full_len) <= full_len / 20,
            "{charged} vs {full_len}"
        );
        let charge = u.surcharge();
        let key = |k: &str| batchweave::object_store::path::Path::from(k);
        assert_eq!(
            charge(&key("manifests/00000000000000000042.manifest")),
            900 * per
        );
        assert_eq!(
            charge(&key("bench/x/manifests/00000000000000000042.manifest")),
            900 * per
        );
        assert_eq!(charge(&key("tgb/w/00000000000000000001.tgb")), 0);
        assert_eq!(charge(&key("gc/boundary")), 0);
    }
}
