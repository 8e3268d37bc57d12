//! End-to-end tests of the `batchweave` binary: produce, consume, inspect and
//! gc as separate processes, with consumers and producers killed (SIGKILL)
//! and restarted, on a local directory and, when configured, on the
//! loopback S3 server (`BATCHWEAVE_TEST_S3_URL` / `BATCHWEAVE_TEST_S3_ENDPOINT`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Where a scenario runs: a store URL and the environment of every child.
struct Target {
    url: String,
    env: Vec<(String, String)>,
    /// Scratch directory for logs and state files (and the store when local).
    scratch: tempfile::TempDir,
}

impl Target {
    fn local() -> Self {
        let scratch = tempfile::tempdir().unwrap();
        let store = scratch.path().join("stream");
        std::fs::create_dir_all(&store).unwrap();
        Self {
            url: store.to_str().unwrap().to_string(),
            env: Vec::new(),
            scratch,
        }
    }

    /// The loopback S3 server, or `None` (after printing SKIP) when not configured.
    fn s3(test: &str) -> Option<Self> {
        let (Ok(base), Ok(endpoint)) = (
            std::env::var("BATCHWEAVE_TEST_S3_URL"),
            std::env::var("BATCHWEAVE_TEST_S3_ENDPOINT"),
        ) else {
            if std::env::var("BATCHWEAVE_REQUIRE_SERVERS").as_deref() == Ok("1") {
                panic!(
                    "{test}: BATCHWEAVE_REQUIRE_SERVERS=1 but BATCHWEAVE_TEST_S3_URL/_ENDPOINT are not set"
                );
            }
            println!(
                "SKIP {test}: BATCHWEAVE_TEST_S3_URL / BATCHWEAVE_TEST_S3_ENDPOINT not set (run `cargo xtask servers`)"
            );
            return None;
        };
        let scratch = tempfile::tempdir().unwrap();
        // The random temp dir name makes the prefix unique per run.
        let unique = scratch
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let env = [
            ("AWS_ENDPOINT", endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_REGION", "us-east-1"),
        ];
        Some(Self {
            url: format!(
                "{}/cli-{test}-{}",
                base.trim_end_matches('/'),
                unique.trim_start_matches('.')
            ),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            scratch,
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path().join(name)
    }

    fn cmd(&self, sub: &str, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_batchweave"));
        c.arg(sub).args(["--store", &self.url]).args(args);
        c.envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c
    }

    fn spawn(&self, sub: &str, args: &[&str]) -> Child {
        self.cmd(sub, args).spawn().unwrap()
    }

    /// Runs to completion and returns stdout; panics with stderr on failure.
    fn ok(&self, sub: &str, args: &[&str]) -> String {
        finish(self.spawn(sub, args), &format!("{sub} {args:?}"))
    }

    fn inspect(&self) -> Value {
        serde_json::from_str(&self.ok("inspect", &["--json"])).unwrap()
    }

    fn produce(&self, id: &str, n: u64, extra: &[&str]) -> Child {
        let n = n.to_string();
        let mut args = vec!["--producer-id", id, "--tgbs", &n, "--dp", "2", "--cp", "1"];
        args.extend_from_slice(&["--slice-bytes", "512"]);
        args.extend_from_slice(extra);
        self.spawn("produce", &args)
    }

    /// A consumer rank of a DP=2 x TP=2 job (world size 4).
    fn consume(&self, rank: u32, steps: u64, group: &str, tag: &str, every: u64) -> Child {
        let (rank, steps, every) = (rank.to_string(), steps.to_string(), every.to_string());
        let log = self.path(&format!("{tag}.log"));
        let state = self.path(&format!("{tag}.state"));
        self.spawn(
            "consume",
            &[
                "--rank",
                &rank,
                "--world-size",
                "4",
                "--dp",
                "2",
                "--tp",
                "2",
                "--steps",
                &steps,
                "--group",
                group,
                "--checkpoint-every",
                &every,
                "--state-file",
                state.to_str().unwrap(),
                "--log",
                log.to_str().unwrap(),
                "--slice-bytes",
                "512",
                "--idle-timeout-secs",
                "60",
            ],
        )
    }
}

/// Waits (at most two minutes) for `child`; panics with its stderr on failure.
fn finish(child: Child, what: &str) -> String {
    let out = wait(child, what);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn wait(mut child: Child, what: &str) -> Output {
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} hung; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Polls `cond` every 20 ms for at most a minute.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_log(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn log_lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

fn count_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.map(|e| e.unwrap().path())
            .map(|p| if p.is_dir() { count_files(&p) } else { 1 })
            .sum()
    })
}

/// `(d, c)` from a consume summary line `consume rank R (dX cY, ...`.
fn position(stdout: &str) -> String {
    let start = stdout.find("(d").expect("summary names the position") + 1;
    stdout[start..].split(',').next().unwrap().to_string()
}

/// The number before `word` in a gc summary (`... would delete 3 TGBs, ...`).
fn count_before(stdout: &str, word: &str) -> u64 {
    let line = stdout.lines().last().unwrap();
    let i = line
        .find(word)
        .unwrap_or_else(|| panic!("no {word:?} in {line:?}"));
    line[..i]
        .trim_end()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Produce 2 x 12 concurrently, inspect, gc (dry run without and with
/// watermarks), 4 ranks to step 10 with checkpoints, gc for real, then the
/// 4 ranks restored to the end; the logs agree across ranks.
fn scenario_flow(t: &Target) {
    let producers = [
        t.produce("prep-0", 12, &["--policy", "dac"]),
        t.produce("prep-1", 12, &["--policy", "fixed:5"]),
    ];
    for p in producers {
        let out = finish(p, "produce");
        assert!(out.contains("12/12 TGBs committed"), "{out}");
    }
    let info = t.inspect();
    assert_eq!(info["end_step"], 24);
    assert_eq!(info["retained_tgbs"], 24);
    let producers = info["producers"].as_array().unwrap();
    assert_eq!(producers.len(), 2);
    for p in producers {
        assert_eq!(
            (p["source_offset"].as_u64(), p["last_sequence"].as_u64()),
            (Some(12), Some(12)),
            "{p}"
        );
    }
    assert!(info["groups"].as_array().unwrap().is_empty());
    assert_eq!(info["low_water"]["step"], Value::Null);

    let dry = t.ok("gc", &["--dry-run"]);
    assert_eq!(
        (count_before(&dry, "TGBs"), count_before(&dry, "bytes")),
        (0, 0),
        "{dry}"
    );

    let run_ranks = |steps: u64| -> Vec<String> {
        let kids: Vec<Child> = (0..4)
            .map(|r| t.consume(r, steps, "train", &format!("rank{r}"), 4))
            .collect();
        kids.into_iter()
            .map(|k| position(&finish(k, "consume")))
            .collect()
    };
    let positions = run_ranks(10);
    let dry = t.ok("gc", &["--dry-run"]);
    assert_eq!(
        count_before(&dry, "TGBs"),
        10,
        "all positions checkpointed at step 10: {dry}"
    );
    assert!(count_before(&dry, "bytes") > 0, "{dry}");
    let real = t.ok("gc", &[]);
    assert_eq!(count_before(&real, "TGBs"), 10, "{real}");
    if Path::new(&t.url).is_dir() {
        let left = count_files(&Path::new(&t.url).join("tgb"));
        assert_eq!(left, 14, "10 of 24 TGB objects deleted");
    }
    let info = t.inspect();
    assert_eq!(info["gc_boundary"]["low_water_step"], 10);
    assert_eq!(info["low_water"]["step"], 10);
    // DP=2 x TP=2: one watermark per rank (the TP ranks of a position checkpoint
    // independently), so four marks.
    assert_eq!(info["groups"][0]["positions"].as_array().unwrap().len(), 4);

    assert_eq!(
        run_ranks(24),
        positions,
        "positions are stable across restarts"
    );
    let logs: Vec<Vec<Value>> = (0..4)
        .map(|r| read_log(&t.path(&format!("rank{r}.log"))))
        .collect();
    for log in &logs {
        assert_eq!(log.len(), 24);
        for (i, line) in log.iter().enumerate() {
            assert_eq!(line["step"], i as u64);
        }
    }
    for r in 1..4 {
        for (a, b) in logs[0].iter().zip(&logs[r]) {
            assert_eq!(
                a["tgbs"], b["tgbs"],
                "rank 0 and rank {r} read the same TGB at each step"
            );
        }
        if positions[r] == positions[0] {
            assert_eq!(logs[r], logs[0], "same position, same log");
        } else {
            assert!(
                logs[r]
                    .iter()
                    .zip(&logs[0])
                    .all(|(a, b)| a["digest"] != b["digest"]),
                "other replica, other bytes"
            );
        }
    }
    assert_eq!(positions.iter().filter(|p| *p == &positions[0]).count(), 2);
    // Every TGB exactly once, each producer's in sequence order.
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in &logs[0] {
        let tgbs = line["tgbs"].as_array().unwrap();
        assert_eq!(tgbs.len(), 1);
        seen.entry(tgbs[0]["producer"].as_str().unwrap().to_string())
            .or_default()
            .push(tgbs[0]["sequence"].as_u64().unwrap());
    }
    let expect: Vec<u64> = (1..=12).collect();
    assert_eq!(seen.len(), 2);
    assert!(seen.values().all(|s| s == &expect), "{seen:?}");
}

/// A rank killed while waiting for more TGBs and restarted from its state
/// file ends with the log of an uninterrupted rank of the same position.
fn scenario_consumer_kill(t: &Target) {
    finish(
        t.produce("early", 12, &["--policy", "naive"]),
        "produce early",
    );
    let mut victim = t.consume(1, 24, "killed", "victim", 5);
    let log = t.path("victim.log");
    wait_until("the victim's log to reach 6 lines", || log_lines(&log) >= 6);
    // Only 12 of 24 steps exist: the victim is still running, blocked at step 12.
    wait_until("the victim to consume all 12 visible steps", || {
        log_lines(&log) >= 12
    });
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the victim ended early"
    );
    victim.kill().unwrap();
    let _ = victim.wait();
    assert_eq!(log_lines(&log), 12);
    let state = std::fs::read_to_string(t.path("victim.state")).unwrap();
    assert!(
        state.contains("\"next_step\":10"),
        "last checkpoint at step 10: {state}"
    );

    finish(
        t.produce("late", 12, &["--policy", "naive"]),
        "produce late",
    );
    let restarted = finish(t.consume(1, 24, "killed", "victim", 5), "restarted victim");
    assert!(restarted.contains("steps 10..24"), "{restarted}");
    let reference = finish(
        t.consume(0, 24, "reference", "reference", 5),
        "reference rank",
    );
    assert_eq!(
        position(&restarted),
        position(&reference),
        "ranks 0 and 1 are one TP group"
    );
    let (a, b) = (
        std::fs::read(&log).unwrap(),
        std::fs::read(t.path("reference.log")).unwrap(),
    );
    assert_eq!(log_lines(&log), 24);
    assert!(
        a == b,
        "the restarted rank's log differs from the uninterrupted one"
    );
}

/// A producer killed mid-run (held back by --max-lag so the kill point is
/// deterministic) and restarted ends with exactly N committed, each once.
fn scenario_producer_kill(t: &Target) {
    const N: u64 = 20;
    let mut victim = t.produce("worker", N, &["--policy", "naive", "--max-lag", "6"]);
    let offset = |t: &Target| -> u64 {
        let info = t.inspect();
        info["producers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == "worker")
            .map_or(0, |p| p["source_offset"].as_u64().unwrap())
    };
    wait_until("the producer to commit 6 TGBs", || offset(t) >= 6);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the producer ended despite --max-lag"
    );
    victim.kill().unwrap();
    let _ = victim.wait();
    let before = offset(t);
    assert!((6..N).contains(&before), "killed with {before} committed");

    let out = finish(
        t.produce("worker", N, &["--policy", "fixed:3"]),
        "restarted producer",
    );
    assert!(
        out.contains(&format!("{N}/{N} TGBs committed ({} this run", N - before)),
        "{out}"
    );
    let again = finish(t.produce("worker", N, &[]), "producer already done");
    assert!(again.contains("(0 this run"), "{again}");
    let info = t.inspect();
    assert_eq!(info["end_step"], N);
    assert_eq!(info["retained_tgbs"], N);
    let p = &info["producers"][0];
    assert_eq!(
        (
            p["source_offset"].as_u64(),
            p["last_sequence"].as_u64(),
            p["tgbs_committed"].as_u64()
        ),
        (Some(N), Some(N), Some(N))
    );
    assert_eq!(p["epoch"], 3, "three incarnations");

    // Every byte verifies, and the sequences are exactly 1..=N in order.
    finish(t.consume(0, N, "check", "check", 100), "verifying consumer");
    let seqs: Vec<u64> = read_log(&t.path("check.log"))
        .iter()
        .map(|l| l["tgbs"][0]["sequence"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=N).collect::<Vec<_>>());
}

/// Two `batchweave gc` processes at once, three times, while the ranks move on between
/// rounds: the boundary is the ranks' mark after every round (never lower, whichever
/// process wrote last), both processes succeed, and the ranks then restore and read to
/// the end with every byte verified and all four logs in agreement.
fn scenario_two_reclaimers(t: &Target) {
    for p in [
        t.produce("prep-0", 12, &["--policy", "naive"]),
        t.produce("prep-1", 12, &["--policy", "naive"]),
    ] {
        finish(p, "produce");
    }
    let run_ranks = |steps: u64| {
        let kids: Vec<Child> = (0..4)
            .map(|r| t.consume(r, steps, "train", &format!("rank{r}"), 2))
            .collect();
        for k in kids {
            finish(k, "consume");
        }
    };
    let mut last = 0;
    for steps in [8u64, 14, 20] {
        run_ranks(steps);
        let gcs = [t.spawn("gc", &[]), t.spawn("gc", &[])];
        for g in gcs {
            finish(g, "one of two concurrent gc processes");
        }
        let info = t.inspect();
        let low = info["gc_boundary"]["low_water_step"].as_u64().unwrap();
        assert_eq!(low, steps, "after the round at step {steps}: {info}");
        assert!(low >= last, "the boundary moved back: {last} then {low}");
        last = low;
    }
    run_ranks(24);
    let logs: Vec<Vec<Value>> = (0..4)
        .map(|r| read_log(&t.path(&format!("rank{r}.log"))))
        .collect();
    assert!(logs.iter().all(|l| !l.is_empty()));
    for pair in logs.chunks(2) {
        // The two TP ranks of a position log the same steps and digests.
        assert_eq!(pair[0], pair[1]);
    }
}

#[test]
fn local_two_gc_processes_at_once() {
    scenario_two_reclaimers(&Target::local());
}

#[test]
fn s3_two_gc_processes_at_once() {
    if let Some(t) = Target::s3("s3_two_gc_processes_at_once") {
        scenario_two_reclaimers(&t);
    }
}

#[test]
fn local_produce_consume_inspect_gc() {
    scenario_flow(&Target::local());
}

#[test]
fn local_consumer_killed_and_restarted() {
    scenario_consumer_kill(&Target::local());
}

#[test]
fn local_producer_killed_and_restarted() {
    scenario_producer_kill(&Target::local());
}

#[test]
fn s3_produce_consume_inspect_gc() {
    if let Some(t) = Target::s3("s3_produce_consume_inspect_gc") {
        scenario_flow(&t);
    }
}

#[test]
fn s3_consumer_killed_and_restarted() {
    if let Some(t) = Target::s3("s3_consumer_killed_and_restarted") {
        scenario_consumer_kill(&t);
    }
}

#[test]
fn s3_producer_killed_and_restarted() {
    if let Some(t) = Target::s3("s3_producer_killed_and_restarted") {
        scenario_producer_kill(&t);
    }
}

#[test]
fn corrupt_payload_size_is_reported_with_step_and_key() {
    let t = Target::local();
    finish(t.produce("p", 2, &["--policy", "naive"]), "produce");
    // The wrong --slice-bytes makes every read mismatch: a loud failure.
    let out = wait(
        t.cmd(
            "consume",
            &[
                "--rank",
                "0",
                "--world-size",
                "1",
                "--dp",
                "1",
                "--steps",
                "2",
                "--group",
                "g",
                "--slice-bytes",
                "100",
            ],
        )
        .spawn()
        .unwrap(),
        "consume",
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("step 0") && err.contains("key tgb/") && err.contains("payload mismatch"),
        "{err}"
    );
}
