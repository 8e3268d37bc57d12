//! The demo run (`batchweave demo`): the whole data plane on a local directory, verified.
//!
//! P producers write a stream of TGBs (one of them is killed midway and
//! restarted), W ranks consume it with checkpoints every K steps (one rank
//! crashes after a checkpoint and is restored), and a reclaimer deletes what
//! no checkpoint needs. At the end every rank's sequence, every TGB and
//! every byte is checked; [`DemoReport::passed`] says whether all of it held.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use batchweave::{GcSettings, MeshConfig, ProducerSettings, RankConfig, Stream};
use tokio::task::JoinSet;

use crate::payload;
use crate::progress::{Meter, Progress};

/// The demo's shape (the defaults are `batchweave demo`'s, sized for a laptop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoConfig {
    /// Preprocessing workers.
    pub producers: u32,
    /// Training ranks (DP x CP = ranks, CP = 2 when the rank count is even).
    pub ranks: u32,
    /// Global steps (TGBs) in the stream.
    pub steps: u64,
    /// Bytes per (d, c) slice, in KiB.
    pub slice_kib: usize,
    /// Checkpoint (and write watermarks) every K steps.
    pub checkpoint_every: u64,
    /// Producers stay at most this many steps ahead of the low-water mark.
    pub max_lag: u64,
    /// Seed of the producers' jitter and incarnation nonces.
    pub seed: u64,
    /// Flip one byte of one TGB's payload after it is checksummed, to show that
    /// corruption is caught (the run must then fail).
    pub inject_corruption: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            producers: 4,
            ranks: 8,
            steps: 240,
            slice_kib: 128,
            checkpoint_every: 10,
            max_lag: 80,
            seed: 7,
            inject_corruption: false,
        }
    }
}

impl DemoConfig {
    /// The TGB grid `(dp, cp)`: `(ranks / 2, 2)` for an even rank count, else `(ranks, 1)`.
    pub fn grid(&self) -> (u32, u32) {
        if self.ranks.is_multiple_of(2) {
            (self.ranks / 2, 2)
        } else {
            (self.ranks, 1)
        }
    }

    /// KiB of one TGB's payload (`dp * cp` slices).
    pub fn tgb_kib(&self) -> usize {
        let (dp, cp) = self.grid();
        (dp * cp) as usize * self.slice_kib
    }

    fn check(&self) -> Result<()> {
        anyhow::ensure!(
            self.producers >= 1 && self.ranks >= 1 && self.steps >= 1 && self.checkpoint_every >= 1,
            "producers, ranks, steps and checkpoint-every must be at least 1"
        );
        Ok(())
    }
}

/// What a demo run measured and found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DemoReport {
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// Why the run stopped early (a producer or rank failed: a read did not verify, a
    /// checksum did not match, ...), with its causes; `None` if every task finished.
    pub failure: Option<String>,
    /// What verification found wrong after the run; empty if everything held.
    pub problems: Vec<String>,
    /// Commit attempts and successes of all producers.
    pub attempts: u64,
    /// Successful commit attempts.
    pub successes: u64,
    /// Payload bytes committed.
    pub ingested_bytes: u64,
    /// Bytes delivered to all ranks (each verified).
    pub delivered_bytes: u64,
    /// TGB bytes (footers and slices) the ranks fetched.
    pub fetched_bytes: u64,
    /// Bytes the reclaimer freed.
    pub freed_bytes: u64,
    /// The most TGB bytes the stream retained at once.
    pub peak_retained_bytes: u64,
    /// TGB object bytes still stored at the end.
    pub stored_tgb_bytes: u64,
    /// The killed producer: the source offset it was killed after, and the committed
    /// offset its restarted incarnation resumed from (what it had committed by then).
    pub producer_restart: Option<(u64, u64)>,
    /// Ranks restored from a checkpoint that replayed exactly the steps they had seen.
    pub ranks_restored: usize,
}

impl DemoReport {
    /// Every task finished and every check held.
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.problems.is_empty()
    }
}

/// What one rank saw: step -> TGB identities, and bytes verified.
#[derive(Debug, Default)]
struct RankLog {
    steps: BTreeMap<u64, Vec<(String, u64)>>,
    verified_bytes: u64,
    delivered: u64,
    fetched_data: u64,
    restored_exactly: Option<bool>,
}

struct Shared {
    stream: Stream,
    slice_len: usize,
    dp: u32,
    cp: u32,
    stop: AtomicBool,
    committed: AtomicU64,
    consumed: AtomicU64,
}

/// What one producer task did: commit attempts, successes, payload bytes committed, and
/// for the killed producer (the offset it was killed after, the offset it resumed from).
type ProducerOutcome = (u64, u64, u64, Option<(u64, u64)>);

async fn produce(
    sh: Arc<Shared>,
    index: u32,
    count: u64,
    args: DemoConfig,
) -> Result<ProducerOutcome> {
    let id = format!("prep-{index}");
    let settings = ProducerSettings {
        max_lag: Some(args.max_lag),
        max_commit_age: Duration::from_secs(30),
        seed: Some(args.seed.wrapping_add(u64::from(index))),
        ..Default::default()
    };
    let mut attempts = 0;
    let mut successes = 0;
    let mut bytes = 0;
    // Producer 0 is killed halfway (dropped without close: uncommitted TGBs
    // are lost) and restarted with the same id.
    let kill_at = if index == 0 { Some(count / 2) } else { None };
    let mut incarnation = 0;
    // (killed after offset, the restarted incarnation's committed offset)
    let mut restart: Option<(u64, u64)> = None;
    // (TGBs the crashed incarnation saw committed, bytes of one TGB)
    let mut posthumous = (0u64, 0u64);
    loop {
        incarnation += 1;
        let mut p = sh
            .stream
            .producer(id.clone())
            .settings(settings.clone())
            .open()
            .await?;
        let from = p.committed_offset();
        if let Some((killed_after, _)) = restart {
            restart = Some((killed_after, from));
            // A commit the crashed incarnation had in flight may have landed after its
            // stats were taken: the chain (the restart's offset) says what it got in.
            // The demo's TGBs all have one size.
            bytes += from.saturating_sub(posthumous.0) * posthumous.1;
        }
        anyhow::ensure!(
            p.next_sequence() == from + 1,
            "{id}: sequence {} does not follow offset {from}",
            p.next_sequence()
        );
        let mut killed = false;
        for seq in from + 1..=count {
            if sh.stop.load(Ordering::Relaxed) {
                bail!("stopped");
            }
            let slices = payload::tgb_slices(&id, seq, sh.dp, sh.cp, sh.slice_len);
            if args.inject_corruption && index == 1 && seq == 3 {
                let mut enc = batchweave::tgb::encode_tgb(sh.dp, sh.cp, slices)?;
                let mut first = enc.parts[0].to_vec();
                let mid = first.len() / 2;
                first[mid] ^= 0x40; // after the CRC was computed: storage corruption
                enc.parts[0] = first.into();
                p.append_encoded(enc, seq).await?;
            } else {
                p.append(sh.dp, sh.cp, slices, seq).await?;
            }
            if kill_at == Some(seq) && incarnation == 1 {
                killed = true;
                break;
            }
        }
        if killed {
            restart = kill_at.map(|k| (k, 0));
            let st = p.stats();
            attempts += st.attempts;
            successes += st.successes;
            bytes += st.bytes_committed;
            posthumous = (
                st.tgbs_committed,
                st.bytes_uploaded / st.tgbs_appended.max(1),
            );
            drop(p); // the crash
            continue;
        }
        let st = p.close().await?;
        attempts += st.attempts;
        successes += st.successes;
        bytes += st.bytes_committed;
        sh.committed.fetch_add(st.tgbs_committed, Ordering::Relaxed);
        return Ok((attempts, successes, bytes, restart));
    }
}

async fn consume(sh: Arc<Shared>, rank: u32, args: DemoConfig) -> Result<RankLog> {
    let mesh = MeshConfig::new(args.ranks, sh.dp, sh.cp, 1, 1);
    let me = RankConfig::new(rank, mesh, "demo");
    let mut c = sh.stream.consumer(me.clone()).open().await?;
    let mut log = RankLog::default();
    let mut crash_after = if rank + 1 == args.ranks {
        Some(args.steps / 2 + args.checkpoint_every / 2)
    } else {
        None
    };
    let mut saved = c.state();
    let mut replay_check: Option<BTreeMap<u64, Vec<(String, u64)>>> = None;
    let mut step = 0;
    while step < args.steps {
        if sh.stop.load(Ordering::Relaxed) {
            bail!("stopped");
        }
        let b = tokio::time::timeout(Duration::from_secs(60), c.next())
            .await
            .with_context(|| format!("rank {rank}: no batch for step {step} within 60 s"))?
            .with_context(|| format!("rank {rank}: reading step {step}"))?;
        anyhow::ensure!(
            b.step == step,
            "rank {rank}: expected step {step}, got {}",
            b.step
        );
        let mut ids = Vec::new();
        for (src, data) in b.sources.iter().zip(&b.data) {
            payload::verify_read(src, sh.slice_len, data)
                .map_err(|e| anyhow::anyhow!("rank {rank} step {step} ({}): {e}", src.key))?;
            log.verified_bytes += data.len() as u64;
            ids.push((src.producer_id.clone(), src.sequence));
        }
        if let Some(expected) = replay_check.as_mut().and_then(|m| m.remove(&step)) {
            log.restored_exactly = Some(log.restored_exactly.unwrap_or(true) && expected == ids);
        } else {
            log.steps.insert(step, ids);
        }
        step += 1;
        sh.consumed.fetch_add(1, Ordering::Relaxed);
        if step % args.checkpoint_every == 0 {
            saved = c.state();
            c.checkpoint_committed(&saved).await?;
        }
        if crash_after == Some(step) {
            crash_after = None;
            // Crash after the checkpoint: restore and re-read from it; the
            // replayed steps must be exactly the ones seen before.
            let st = c.stats();
            log.delivered += st.bytes_delivered;
            log.fetched_data += st.footer_bytes + st.slice_bytes;
            drop(c);
            replay_check = Some(
                log.steps
                    .range(saved.next_step..)
                    .map(|(k, v)| (*k, v.clone()))
                    .collect(),
            );
            c = sh
                .stream
                .consumer(me.clone())
                .state(saved.clone())
                .open()
                .await?;
            step = saved.next_step;
        }
    }
    let st = c.stats();
    log.delivered += st.bytes_delivered;
    log.fetched_data += st.footer_bytes + st.slice_bytes;
    if replay_check.is_some_and(|m| !m.is_empty()) {
        log.restored_exactly = Some(false);
    }
    Ok(log)
}

/// Runs the demo on a stream in the directory `dir` (created if missing; use an empty
/// one) and verifies it. `Err` only if the run could not start (the directory, the
/// stream); a run that fails verification is an `Ok` report that has not
/// [`passed`](DemoReport::passed).
pub async fn run(dir: &Path, args: &DemoConfig, progress: &dyn Progress) -> Result<DemoReport> {
    args.check()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let stream = Stream::open(&format!("file://{}", dir.display()))
        .await
        .context("opening the stream directory")?;
    let (dp, cp) = args.grid();
    let sh = Arc::new(Shared {
        stream: stream.clone(),
        slice_len: args.slice_kib * 1024,
        dp,
        cp,
        stop: AtomicBool::new(false),
        committed: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
    });
    let ingest = progress.meter("ingest", args.steps);
    let read = progress.meter("consume", args.steps * u64::from(args.ranks));
    let t0 = Instant::now();

    // Background reclamation, off the critical path.
    let gc_stop = Arc::new(AtomicBool::new(false));
    let gc_task = tokio::spawn(reclaim(stream.clone(), gc_stop.clone(), ingest.clone()));

    let mut tasks: JoinSet<Result<Option<(u32, RankLog)>>> = JoinSet::new();
    let mut prod_tasks: JoinSet<Result<ProducerOutcome>> = JoinSet::new();
    let per = args.steps / u64::from(args.producers);
    let mut expected: BTreeSet<(String, u64)> = BTreeSet::new();
    for i in 0..args.producers {
        let n = per + u64::from(u64::from(i) < args.steps % u64::from(args.producers));
        for s in 1..=n {
            expected.insert((format!("prep-{i}"), s));
        }
        prod_tasks.spawn(produce(sh.clone(), i, n, args.clone()));
    }
    for r in 0..args.ranks {
        let sh = sh.clone();
        let a = args.clone();
        tasks.spawn(async move { consume(sh, r, a).await.map(|l| Some((r, l))) });
    }
    let progress_task = tokio::spawn(show_progress(sh.clone(), ingest.clone(), read.clone()));
    let mut report = DemoReport::default();
    let (failure, logs) = join_tasks(&sh, prod_tasks, tasks, &mut report).await;
    progress_task.abort();
    gc_stop.store(true, Ordering::Relaxed);
    let (freed, peak) = gc_task.await.unwrap_or((0, 0));
    report.elapsed = t0.elapsed();
    report.freed_bytes = freed;
    report.peak_retained_bytes = peak;
    ingest.finish();
    read.finish();
    if let Some(e) = failure {
        report.failure = Some(format!("{e:#}"));
        return Ok(report);
    }
    finish(&stream, &mut report, &logs, &expected).await?;
    Ok(report)
}

/// After a run without failures: the final GC pass, the verdict on the ranks' logs and
/// the byte counts of the report.
async fn finish(
    stream: &Stream,
    report: &mut DemoReport,
    logs: &BTreeMap<u32, RankLog>,
    expected: &BTreeSet<(String, u64)>,
) -> Result<()> {
    // Final pass: everything is committed and checkpointed; sweep orphans of
    // the killed producer too (no upload is in flight any more).
    let final_gc = stream
        .reclaimer(GcSettings {
            orphan_grace: Some(Duration::ZERO),
            producers_stopped: true,
            ..Default::default()
        })
        .run_once()
        .await?;
    report.freed_bytes += final_gc.bytes_freed;
    report.problems = verify(logs, expected);
    report.ranks_restored = logs
        .values()
        .filter(|l| l.restored_exactly == Some(true))
        .count();
    report.stored_tgb_bytes = stream
        .store()
        .list("tgb")
        .await?
        .iter()
        .map(|o| o.size)
        .sum();
    report.delivered_bytes = logs.values().map(|l| l.delivered).sum();
    report.fetched_bytes = logs.values().map(|l| l.fetched_data).sum();
    Ok(())
}

/// The background reclaimer: a GC pass every 100 ms until `stop`, reporting what it
/// freed on `bar`; returns the bytes freed and the peak of retained bytes it saw.
async fn reclaim(stream: Stream, stop: Arc<AtomicBool>, bar: Arc<dyn Meter>) -> (u64, u64) {
    let r = stream.reclaimer(GcSettings {
        orphan_grace: None,
        ..Default::default()
    });
    let (mut freed, mut peak) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(rep) = r.run_once().await {
            freed += rep.bytes_freed;
            bar.set_message(format!("reclaimed {:.1} MiB", freed as f64 / 1048576.0));
        }
        if let Ok(info) = stream.inspect().await {
            peak = peak.max(info.retained_bytes);
        }
        stream
            .store()
            .clock()
            .sleep(Duration::from_millis(100))
            .await;
    }
    (freed, peak)
}

/// Moves the bars every 100 ms: ingest to the stream's end step, consume to the steps
/// the ranks consumed. Runs until aborted.
async fn show_progress(sh: Arc<Shared>, ingest: Arc<dyn Meter>, read: Arc<dyn Meter>) {
    loop {
        if let Ok(info) = sh.stream.inspect().await {
            ingest.set_position(info.end_step);
        }
        read.set_position(sh.consumed.load(Ordering::Relaxed));
        sh.stream
            .store()
            .clock()
            .sleep(Duration::from_millis(100))
            .await;
    }
}

/// Joins producers and ranks together: the first failure stops the run at once (a
/// failed rank holds the low-water mark back, so producers bounded by `max_lag` would
/// otherwise wait for it forever). Adds the producers' outcomes to `report`; returns
/// the first failure and the logs of the ranks that finished.
async fn join_tasks(
    sh: &Shared,
    mut prod_tasks: JoinSet<Result<ProducerOutcome>>,
    mut tasks: JoinSet<Result<Option<(u32, RankLog)>>>,
    report: &mut DemoReport,
) -> (Option<anyhow::Error>, BTreeMap<u32, RankLog>) {
    let mut failure: Option<anyhow::Error> = None;
    let mut logs: BTreeMap<u32, RankLog> = BTreeMap::new();
    loop {
        let failed = tokio::select! {
            Some(r) = prod_tasks.join_next() => match r {
                Ok(Ok((a, s, b, restart))) => {
                    report.producer_restart = report.producer_restart.or(restart);
                    report.attempts += a;
                    report.successes += s;
                    report.ingested_bytes += b;
                    None
                }
                Ok(Err(e)) => Some(e.context("a producer failed")),
                Err(e) if e.is_cancelled() => None,
                Err(e) => Some(anyhow::anyhow!("a producer task panicked: {e}")),
            },
            Some(r) = tasks.join_next() => match r {
                Ok(Ok(Some((rank, log)))) => {
                    logs.insert(rank, log);
                    None
                }
                Ok(Ok(None)) => None,
                Ok(Err(e)) => Some(e),
                Err(e) if e.is_cancelled() => None,
                Err(e) => Some(anyhow::anyhow!("a rank task panicked: {e}")),
            },
            else => break,
        };
        if let Some(e) = failed {
            failure.get_or_insert(e);
            sh.stop.store(true, Ordering::Relaxed);
            prod_tasks.abort_all();
            tasks.abort_all();
        }
    }
    (failure, logs)
}

/// What the ranks' logs show against the TGBs the producers were asked to write: one
/// line per violated expectation.
fn verify(logs: &BTreeMap<u32, RankLog>, expected: &BTreeSet<(String, u64)>) -> Vec<String> {
    let mut problems = Vec::new();
    let reference = logs.get(&0).map(|l| l.steps.clone()).unwrap_or_default();
    for (rank, l) in logs {
        if l.steps != reference {
            problems.push(format!(
                "rank {rank} saw a different step sequence than rank 0"
            ));
        }
        if l.verified_bytes != l.delivered {
            problems.push(format!(
                "rank {rank}: {} bytes delivered but {} verified",
                l.delivered, l.verified_bytes
            ));
        }
        if l.restored_exactly == Some(false) {
            problems.push(format!(
                "rank {rank}: restore from the checkpoint did not replay the same steps"
            ));
        }
    }
    if !logs.values().any(|l| l.restored_exactly == Some(true)) {
        problems.push("no rank was restored from a checkpoint".into());
    }
    let seen: Vec<(String, u64)> = reference.values().flatten().cloned().collect();
    let unique: BTreeSet<(String, u64)> = seen.iter().cloned().collect();
    if unique.len() != seen.len() {
        problems.push(format!(
            "{} TGBs appeared more than once",
            seen.len() - unique.len()
        ));
    }
    if &unique != expected {
        problems.push(format!(
            "{} TGBs expected, {} distinct seen",
            expected.len(),
            unique.len()
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::NoProgress;

    fn small() -> DemoConfig {
        DemoConfig {
            producers: 2,
            ranks: 4,
            steps: 30,
            slice_kib: 1,
            checkpoint_every: 5,
            max_lag: 20,
            ..Default::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_demo_passes_and_restores_one_rank() {
        let dir = tempfile::tempdir().unwrap();
        let r = run(dir.path(), &small(), &NoProgress).await.unwrap();
        assert!(r.passed(), "{r:?}");
        assert_eq!(r.ranks_restored, 1);
        assert!(r.ingested_bytes >= 30 * 4 * 1024, "{r:?}");
        assert!(r.delivered_bytes >= 30 * 4 * 1024, "{r:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn corruption_fails_the_run_with_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = DemoConfig {
            inject_corruption: true,
            ..small()
        };
        let r = run(dir.path(), &cfg, &NoProgress).await.unwrap();
        assert!(!r.passed());
        let why = r.failure.unwrap_or_default();
        assert!(why.contains("checksum mismatch"), "{why}");
    }

    #[test]
    fn verification_names_what_is_off() {
        let log = |steps: &[(u64, &str, u64)], restored| RankLog {
            steps: steps
                .iter()
                .map(|(s, p, q)| (*s, vec![((*p).to_owned(), *q)]))
                .collect(),
            restored_exactly: restored,
            ..Default::default()
        };
        let expected: BTreeSet<(String, u64)> = [("a".to_owned(), 1), ("a".to_owned(), 2)].into();
        let good = BTreeMap::from([
            (0, log(&[(0, "a", 1), (1, "a", 2)], None)),
            (1, log(&[(0, "a", 1), (1, "a", 2)], Some(true))),
        ]);
        assert!(verify(&good, &expected).is_empty());
        let bad = BTreeMap::from([
            (0, log(&[(0, "a", 1), (1, "a", 1)], None)),
            (1, log(&[(0, "a", 1)], Some(false))),
        ]);
        let p = verify(&bad, &expected).join("\n");
        for want in [
            "rank 1 saw a different step sequence",
            "rank 1: restore from the checkpoint did not replay",
            "no rank was restored",
            "1 TGBs appeared more than once",
            "2 TGBs expected, 1 distinct seen",
        ] {
            assert!(p.contains(want), "{want:?} missing in:\n{p}");
        }
    }
}
