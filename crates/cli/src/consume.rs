//! `batchweave consume`: one training rank that verifies every byte,
//! checkpoints, and resumes exactly.
//!
//! Per step: `next()`, verify every read against [`payload::verify`], append
//! one JSON line to the log, and every `K` steps checkpoint: fsync the log,
//! write the state file atomically (`PATH.tmp`, fsync, rename), then tell the
//! consumer the checkpoint is durable (which writes the watermark). On
//! restart the state file is restored and the log is cut back to the lines of
//! steps before the restored cursor, so the log of a killed-and-restarted
//! rank ends equal to that of an uninterrupted one.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use batchweave::consumer::MAX_PREFETCH;
use batchweave::{Batch, ConsumerSettings, ConsumerState, MeshConfig, RankConfig};
use serde::{Deserialize, Serialize};

use crate::inspect::{open_stream, print_out};
use batchweave_harness::payload;

/// Arguments of `batchweave consume`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Stream URL: a directory, `file:///dir`, `s3://bucket/prefix`, `gs://...`, `az://...`.
    #[arg(long)]
    store: String,
    /// This process's global rank, `0 .. world-size`.
    #[arg(long)]
    rank: u32,
    /// Number of ranks; must equal `dp * cp * tp * pp`.
    #[arg(long)]
    world_size: u32,
    /// Data-parallel degree of the training mesh (may differ from the stream's grid).
    #[arg(long, default_value_t = 1)]
    dp: u32,
    /// Context-parallel degree of the training mesh (may differ from the stream's grid).
    #[arg(long, default_value_t = 1)]
    cp: u32,
    /// Tensor-parallel degree (ranks of one TP group read the same bytes).
    #[arg(long, default_value_t = 1)]
    tp: u32,
    /// Pipeline-parallel degree (ranks of one PP group read the same bytes).
    #[arg(long, default_value_t = 1)]
    pp: u32,
    /// Absolute end: stop once consumer step N-1 has been consumed (also after a restart).
    #[arg(long)]
    steps: u64,
    /// Consumer group name (watermarks are kept per group).
    #[arg(long)]
    group: String,
    /// Checkpoint after every K-th step (needs --state-file).
    #[arg(long)]
    checkpoint_every: Option<u64>,
    /// Checkpoint state file: restored from when it exists, written atomically at each
    /// checkpoint and at the end.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Write one JSON line per consumed step here (JSON Lines), for example:
    ///
    ///   {"step":0,"tgbs":[{"producer":"prep-0","sequence":1,"tgb_step":0,"key":"tgb/prep-0/0000000001-00000000000000000001.tgb"}],"digest":"81c5b6bb"}
    ///
    /// step: this rank's consumer step (one line per step, consecutive, in order).
    /// tgbs: the reads the step took, in order (one today): the producer id, its sequence
    ///   number of the TGB, the TGB's step in the stream, and the TGB object's key.
    /// digest: CRC32 (IEEE) of the bytes the step delivered, as 8 lowercase hex digits.
    ///
    /// On a restart from --state-file the log is cut back to the steps before the restored
    /// cursor (a torn last line goes too), so it ends as an uninterrupted rank's would.
    /// Field names and meanings are stable and fields are only added: parse each line as
    /// JSON and ignore keys you do not know. See docs/operations.md, section 9.
    #[arg(long, verbatim_doc_comment)]
    log: Option<PathBuf>,
    /// Slice size the producer used (`produce --slice-bytes`), to verify every byte.
    #[arg(long, default_value_t = 4096)]
    slice_bytes: usize,
    /// Steps fetched ahead of the cursor in the background.
    #[arg(long, default_value_t = 4)]
    prefetch: usize,
    /// Fail if no new step arrives for this many seconds.
    #[arg(long, default_value_t = 120)]
    idle_timeout_secs: u64,
}

/// One TGB read of a step, as the log records it.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct LogTgb {
    producer: String,
    sequence: u64,
    tgb_step: u64,
    key: String,
}

/// One line of the `--log` file.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct LogLine {
    step: u64,
    tgbs: Vec<LogTgb>,
    digest: String,
}

/// `path` with `.tmp` appended to its file name.
fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Replaces `path` with `bytes` atomically: write `path.tmp`, fsync, rename,
/// fsync the directory.
fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let tmp = tmp_path(path);
    let mut f = File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(d) = File::open(dir)
    {
        // Directory fsync is best effort (not supported everywhere).
        let _ = d.sync_all();
    }
    Ok(())
}

/// Cuts the log at `path` back to its leading lines with step below `start`
/// (rewritten atomically) and opens it for appending.
fn open_log(path: &Path, start: u64) -> anyhow::Result<File> {
    let mut kept = Vec::new();
    match File::open(path) {
        Ok(f) => {
            for line in BufReader::new(f).lines() {
                let line = line.with_context(|| format!("reading log {}", path.display()))?;
                // A torn last line (killed mid-write) does not parse: stop there.
                match serde_json::from_str::<LogLine>(&line) {
                    Ok(l) if l.step < start => {
                        kept.extend_from_slice(line.as_bytes());
                        kept.push(b'\n');
                    }
                    _ => break,
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("opening log {}", path.display())),
    }
    write_atomic(path, &kept).with_context(|| format!("truncating log {}", path.display()))?;
    OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("opening log {} for appending", path.display()))
}

/// Verifies every read of `batch`; the error names the step, key and slices.
fn verify(batch: &Batch, slice_bytes: usize) -> anyhow::Result<()> {
    ensure!(
        batch.data.len() == batch.sources.len(),
        "step {}: {} reads but {} sources",
        batch.step,
        batch.data.len(),
        batch.sources.len()
    );
    for (src, data) in batch.sources.iter().zip(&batch.data) {
        payload::verify_read(src, slice_bytes, data).map_err(|msg| {
            anyhow::anyhow!("step {} (TGB step {}), {msg}", batch.step, src.tgb_step)
        })?;
    }
    Ok(())
}

fn log_line(batch: &Batch) -> LogLine {
    let mut h = crc32fast::Hasher::new();
    for d in &batch.data {
        h.update(d);
    }
    LogLine {
        step: batch.step,
        tgbs: batch
            .sources
            .iter()
            .map(|s| LogTgb {
                producer: s.producer_id.clone(),
                sequence: s.sequence,
                tgb_step: s.tgb_step,
                key: s.key.clone(),
            })
            .collect(),
        digest: format!("{:08x}", h.finalize()),
    }
}

fn check(args: &ConsumeArgs) -> anyhow::Result<()> {
    if args.checkpoint_every.is_some() && args.state_file.is_none() {
        bail!("--checkpoint-every needs --state-file");
    }
    ensure!(
        args.checkpoint_every != Some(0),
        "--checkpoint-every must be at least 1"
    );
    ensure!(args.slice_bytes >= 1, "--slice-bytes must be at least 1");
    ensure!(
        args.prefetch <= MAX_PREFETCH,
        "--prefetch must be at most {MAX_PREFETCH}"
    );
    ensure!(
        args.idle_timeout_secs >= 1,
        "--idle-timeout-secs must be at least 1"
    );
    Ok(())
}

/// Runs `batchweave consume`.
pub(crate) async fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    check(&args)?;
    let started = Instant::now();
    let stream = open_stream(&args.store).await?;
    let mesh = MeshConfig::new(args.world_size, args.dp, args.cp, args.tp, args.pp);
    let me = RankConfig::new(args.rank, mesh, &args.group);
    let settings = ConsumerSettings {
        prefetch: args.prefetch,
        ..ConsumerSettings::default()
    };
    let rank = args.rank;
    let saved = match &args.state_file {
        Some(p) => match fs::read(p) {
            Ok(b) => Some(
                ConsumerState::from_bytes(&b)
                    .with_context(|| format!("reading consumer state {}", p.display()))?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", p.display())),
        },
        None => None,
    };
    let open = stream.consumer(me).settings(settings);
    let mut consumer = match &saved {
        Some(state) => open
            .state(state.clone())
            .open()
            .await
            .with_context(|| format!("rank {rank}: restoring from {state:?}"))?,
        None => open
            .open()
            .await
            .with_context(|| format!("rank {rank}: opening the consumer"))?,
    };
    let start = consumer.state().next_step;
    let mut log = match &args.log {
        Some(p) => Some(open_log(p, start)?),
        None => None,
    };
    let idle = Duration::from_secs(args.idle_timeout_secs);
    let mut checkpoints = 0u64;
    let mut last_checkpoint = saved.as_ref().map(|_| start);
    let mut reads = 0u64;
    while consumer.state().next_step < args.steps {
        let step = consumer.state().next_step;
        let batch = match tokio::time::timeout(idle, consumer.next()).await {
            Ok(r) => r.with_context(|| format!("rank {rank}: reading step {step}"))?,
            Err(_) => bail!(
                "rank {rank}: step {step} did not become visible within {}s \
                 (--idle-timeout-secs); are the producers running and is --steps {} reachable?",
                args.idle_timeout_secs,
                args.steps
            ),
        };
        ensure!(
            batch.step == step,
            "rank {rank}: asked for step {step}, got step {}",
            batch.step
        );
        verify(&batch, args.slice_bytes)
            .with_context(|| format!("rank {rank}: verification failed"))?;
        reads += batch.sources.len() as u64;
        if let (Some(f), Some(p)) = (log.as_mut(), &args.log) {
            let mut line = serde_json::to_vec(&log_line(&batch)).context("encoding a log line")?;
            line.push(b'\n');
            f.write_all(&line)
                .with_context(|| format!("writing log {}", p.display()))?;
        }
        let done = step.saturating_add(1);
        let due = args
            .checkpoint_every
            .is_some_and(|k| done.is_multiple_of(k))
            || done == args.steps;
        if let (true, Some(path)) = (due, &args.state_file) {
            if let (Some(f), Some(p)) = (log.as_ref(), &args.log) {
                f.sync_all()
                    .with_context(|| format!("syncing log {}", p.display()))?;
            }
            let state = consumer.state();
            write_atomic(path, &state.to_bytes())
                .with_context(|| format!("rank {rank}: writing checkpoint at step {done}"))?;
            consumer
                .checkpoint_committed(&state)
                .await
                .with_context(|| format!("rank {rank}: writing the watermark at step {done}"))?;
            checkpoints += 1;
            last_checkpoint = Some(done);
        }
    }
    let stats = consumer.stats();
    let pos = consumer.position();
    print_out(&format!(
        "consume rank {rank} (d{} c{}, group {}): steps {start}..{} done ({} this run), \
         {reads} reads verified, {} bytes delivered, read amplification {:.3}, \
         {checkpoints} checkpoints (last at {}), {:.2}s\n",
        pos.d,
        pos.c,
        args.group,
        consumer.state().next_step,
        consumer.state().next_step.saturating_sub(start),
        stats.bytes_delivered,
        stats.read_amplification(),
        last_checkpoint.map_or_else(|| "none".to_string(), |s| format!("step {s}")),
        started.elapsed().as_secs_f64()
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(step: u64) -> String {
        let l = LogLine {
            step,
            tgbs: vec![LogTgb {
                producer: "p".into(),
                sequence: step + 1,
                tgb_step: step,
                key: format!("k{step}"),
            }],
            digest: "00000000".into(),
        };
        serde_json::to_string(&l).unwrap()
    }

    #[test]
    fn log_is_cut_to_steps_before_the_cursor_and_torn_lines_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("log.jsonl");
        let mut text: String = (0..5).map(|s| line(s) + "\n").collect();
        text.push_str("{\"step\":5,\"tg");
        fs::write(&p, &text).unwrap();
        let mut f = open_log(&p, 3).unwrap();
        let expect: String = (0..3).map(|s| line(s) + "\n").collect();
        assert_eq!(fs::read_to_string(&p).unwrap(), expect);
        f.write_all(b"x\n").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), expect + "x\n");

        // A start beyond the log keeps every whole line, and the torn one goes.
        fs::write(&p, &text).unwrap();
        drop(open_log(&p, 100).unwrap());
        let whole: String = (0..5).map(|s| line(s) + "\n").collect();
        assert_eq!(fs::read_to_string(&p).unwrap(), whole);
        assert!(!tmp_path(&p).exists());
    }

    #[test]
    fn missing_log_is_created_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.jsonl");
        drop(open_log(&p, 0).unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"");
    }
}
