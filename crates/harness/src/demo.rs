//! `batchweave demo`: the whole data plane on a local directory, verified.
//!
//! P producers write a stream of TGBs (one of them is killed midway and
//! restarted), W ranks consume it with checkpoints every K steps (one rank
//! crashes after a checkpoint and is restored), and a reclaimer deletes what
//! no checkpoint needs. At the end every rank's sequence, every TGB and
//! every byte is checked, and the command fails loudly if anything is off.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use batchweave::{ConsumerConfig, GcSettings, ProducerSettings, Stream};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use tokio::task::JoinSet;

use crate::payload;

/// Options of `batchweave demo` (defaults sized for a laptop).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct DemoArgs {
    /// Stream directory (default: a fresh temporary directory, removed afterwards).
    #[arg(long)]
    pub(crate) dir: Option<PathBuf>,
    /// Preprocessing workers.
    #[arg(long, default_value_t = 4)]
    pub(crate) producers: u32,
    /// Training ranks (DP x CP = ranks, CP = 2 when the rank count is even).
    #[arg(long, default_value_t = 8)]
    pub(crate) ranks: u32,
    /// Global steps (TGBs) in the stream.
    #[arg(long, default_value_t = 240)]
    pub(crate) steps: u64,
    /// Bytes per (d, c) slice, in KiB.
    #[arg(long, default_value_t = 128)]
    pub(crate) slice_kib: usize,
    /// Checkpoint (and write watermarks) every K steps.
    #[arg(long, default_value_t = 10)]
    pub(crate) checkpoint_every: u64,
    /// Producers stay at most this many steps ahead of the low-water mark.
    #[arg(long, default_value_t = 80)]
    pub(crate) max_lag: u64,
    /// Seed of the producers' jitter and incarnation nonces.
    #[arg(long, default_value_t = 7)]
    pub(crate) seed: u64,
    /// Flip one byte of one TGB's payload after it is checksummed, to show
    /// that corruption is caught (the demo must then fail).
    #[arg(long, hide = true)]
    pub(crate) inject_corruption: bool,
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

fn bar(mp: &MultiProgress, len: u64, label: &str) -> ProgressBar {
    let b = mp.add(ProgressBar::new(len));
    let style = ProgressStyle::with_template("{prefix:>9} [{bar:40}] {pos:>6}/{len:6} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    b.set_style(style);
    b.set_prefix(label.to_string());
    b
}

async fn produce(
    sh: Arc<Shared>,
    index: u32,
    count: u64,
    args: DemoArgs,
) -> Result<(u64, u64, u64)> {
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
    loop {
        incarnation += 1;
        let mut p = sh
            .stream
            .producer(id.clone())
            .settings(settings.clone())
            .open()
            .await?;
        let from = p.committed_offset();
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
            let st = p.stats();
            attempts += st.attempts;
            successes += st.successes;
            bytes += st.bytes_committed;
            drop(p); // the crash
            continue;
        }
        let st = p.close().await?;
        attempts += st.attempts;
        successes += st.successes;
        bytes += st.bytes_committed;
        sh.committed.fetch_add(st.tgbs_committed, Ordering::Relaxed);
        return Ok((attempts, successes, bytes));
    }
}

async fn consume(sh: Arc<Shared>, rank: u32, args: DemoArgs) -> Result<RankLog> {
    let cfg = || ConsumerConfig::new(rank, args.ranks, [sh.dp, sh.cp, 1, 1], "demo");
    let mut c = sh.stream.consumer(cfg()).await?;
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
            c = sh.stream.restore_consumer(cfg(), &saved).await?;
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

pub(crate) async fn run(args: DemoArgs) -> Result<()> {
    anyhow::ensure!(
        args.producers >= 1 && args.ranks >= 1 && args.steps >= 1 && args.checkpoint_every >= 1,
        "producers, ranks, steps and checkpoint-every must be at least 1"
    );
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir().context("creating a temporary directory")?;
            tmp.path().to_path_buf()
        }
    };
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let stream = Stream::open(&format!("file://{}", dir.display()))
        .await
        .context("opening the stream directory")?;
    let (dp, cp) = if args.ranks.is_multiple_of(2) {
        (args.ranks / 2, 2)
    } else {
        (args.ranks, 1)
    };
    let slice_len = args.slice_kib * 1024;
    println!(
        "BatchWeave demo: {} producers, {} ranks (DP={dp} x CP={cp}), {} steps of {} KiB TGBs, checkpoint every {}, max_lag {}\n  stream: {}",
        args.producers,
        args.ranks,
        args.steps,
        (dp * cp) as usize * args.slice_kib,
        args.checkpoint_every,
        args.max_lag,
        dir.display()
    );
    let sh = Arc::new(Shared {
        stream: stream.clone(),
        slice_len,
        dp,
        cp,
        stop: AtomicBool::new(false),
        committed: AtomicU64::new(0),
        consumed: AtomicU64::new(0),
    });
    let mp = MultiProgress::new();
    let ingest = bar(&mp, args.steps, "ingest");
    let read = bar(&mp, args.steps * u64::from(args.ranks), "consume");
    let t0 = Instant::now();

    // Background reclamation, off the critical path.
    let gc_store = stream.clone();
    let gc_stop = Arc::new(AtomicBool::new(false));
    let gc_flag = gc_stop.clone();
    let gc_bar = ingest.clone();
    let gc_task = tokio::spawn(async move {
        let r = gc_store.reclaimer(GcSettings {
            orphan_grace: None,
            ..Default::default()
        });
        let (mut freed, mut peak) = (0u64, 0u64);
        while !gc_flag.load(Ordering::Relaxed) {
            if let Ok(rep) = r.run_once().await {
                freed += rep.bytes_freed;
                gc_bar.set_message(format!("reclaimed {:.1} MiB", freed as f64 / 1048576.0));
            }
            if let Ok(info) = gc_store.inspect().await {
                peak = peak.max(info.retained_bytes);
            }
            gc_store
                .store()
                .clock()
                .sleep(Duration::from_millis(100))
                .await;
        }
        (freed, peak)
    });

    let mut tasks: JoinSet<Result<Option<(u32, RankLog)>>> = JoinSet::new();
    let mut prod_tasks: JoinSet<Result<(u64, u64, u64)>> = JoinSet::new();
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
    let progress = {
        let sh = sh.clone();
        let (ingest, read) = (ingest.clone(), read.clone());
        let stream = stream.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(info) = stream.inspect().await {
                    ingest.set_position(info.end_step);
                }
                read.set_position(sh.consumed.load(Ordering::Relaxed));
                stream
                    .store()
                    .clock()
                    .sleep(Duration::from_millis(100))
                    .await;
            }
        })
    };

    let mut failure: Option<anyhow::Error> = None;
    let (mut attempts, mut successes, mut ingested) = (0u64, 0u64, 0u64);
    while let Some(r) = prod_tasks.join_next().await {
        match r {
            Ok(Ok((a, s, b))) => {
                attempts += a;
                successes += s;
                ingested += b;
            }
            Ok(Err(e)) => {
                failure.get_or_insert(e.context("a producer failed"));
                sh.stop.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                failure.get_or_insert(anyhow::anyhow!("a producer task panicked: {e}"));
                sh.stop.store(true, Ordering::Relaxed);
            }
        }
    }
    let mut logs: BTreeMap<u32, RankLog> = BTreeMap::new();
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(Some((rank, log)))) => {
                logs.insert(rank, log);
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                if !sh.stop.swap(true, Ordering::Relaxed) || failure.is_none() {
                    failure.get_or_insert(e);
                }
            }
            Err(e) => {
                failure.get_or_insert(anyhow::anyhow!("a rank task panicked: {e}"));
                sh.stop.store(true, Ordering::Relaxed);
            }
        }
    }
    progress.abort();
    gc_stop.store(true, Ordering::Relaxed);
    let (mut freed, peak) = gc_task.await.unwrap_or((0, 0));
    let elapsed = t0.elapsed();
    ingest.finish();
    read.finish();
    if let Some(e) = failure {
        println!("\nVERDICT: FAIL\n  {e:#}");
        bail!("the demo failed verification: {e:#}");
    }
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
    freed += final_gc.bytes_freed;

    // Verification.
    let mut problems = Vec::new();
    let reference = logs.get(&0).map(|l| l.steps.clone()).unwrap_or_default();
    for (rank, l) in &logs {
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
    let restored = logs
        .values()
        .filter(|l| l.restored_exactly == Some(true))
        .count();
    if restored == 0 {
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
    if unique != expected {
        problems.push(format!(
            "{} TGBs expected, {} distinct seen",
            expected.len(),
            unique.len()
        ));
    }
    let stored: u64 = stream
        .store()
        .list("tgb")
        .await?
        .iter()
        .map(|o| o.size)
        .sum();
    let delivered: u64 = logs.values().map(|l| l.delivered).sum();
    let fetched: u64 = logs.values().map(|l| l.fetched_data).sum();
    let secs = elapsed.as_secs_f64().max(1e-9);
    let mib = |b: u64| b as f64 / 1048576.0;
    println!("\nResults ({:.1} s)", secs);
    println!("  steps/s            {:>10.1}", args.steps as f64 / secs);
    println!(
        "  ingested           {:>10.1} MiB/s ({:.1} MiB committed)",
        mib(ingested) / secs,
        mib(ingested)
    );
    println!(
        "  read (all ranks)   {:>10.1} MiB/s ({:.1} MiB delivered, every byte verified)",
        mib(delivered) / secs,
        mib(delivered)
    );
    println!(
        "  commit success     {:>10.1} % ({successes} of {attempts} attempts)",
        100.0 * successes as f64 / attempts.max(1) as f64
    );
    println!(
        "  read amplification {:>10.3} x (TGB bytes fetched / bytes delivered)",
        fetched as f64 / delivered.max(1) as f64
    );
    println!(
        "  reclaimed          {:>10.1} MiB; peak retained {:.1} MiB; TGB objects stored now {:.1} MiB",
        mib(freed),
        mib(peak),
        mib(stored)
    );
    println!("  producer restart   prep-0 killed at half its work and resumed from offset");
    println!(
        "  rank restore       {restored} rank restored from its checkpoint and replayed exactly"
    );
    if problems.is_empty() {
        println!(
            "\nVERDICT: PASS  all {} ranks saw the same {} steps; every TGB exactly once; every byte verified",
            args.ranks, args.steps
        );
        Ok(())
    } else {
        println!("\nVERDICT: FAIL");
        for p in &problems {
            println!("  - {p}");
        }
        bail!("{} verification problem(s)", problems.len())
    }
}
