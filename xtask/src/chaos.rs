//! `cargo xtask chaos`: real `batchweave` processes against a loopback S3
//! server (SeaweedFS, which keeps its data across a restart), with random
//! SIGKILLs and restarts, one server restart mid-run, and `batchweave gc`
//! running concurrently. Producers alternate between the cooperative and the DAC
//! commit policy. At the end the ranks' logs must agree and hold every
//! TGB exactly once, in each producer's order: 0 lost, 0 duplicated, 0 reordered.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::servers;

/// A tiny seeded generator (xtask has no dependencies to spare).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Proc {
    name: String,
    args: Vec<String>,
    child: Option<Child>,
    done: bool,
    starts: u32,
}

fn start(bin: &Path, env: &[(String, String)], p: &mut Proc, dir: &Path) -> Result<()> {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{}.stderr", p.name)))?;
    let child = Command::new(bin)
        .args(&p.args)
        .envs(env.iter().cloned())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {}", p.name))?;
    p.child = Some(child);
    p.starts += 1;
    Ok(())
}

/// (step, producer, sequence) of every line of a consume log.
fn read_log(path: &Path) -> Result<Vec<(u64, String, u64)>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let field = |line: &str, key: &str| -> Option<String> {
        let i = line.find(key)? + key.len();
        let rest = &line[i..];
        let rest = rest.trim_start_matches([':', ' ']);
        if let Some(r) = rest.strip_prefix('"') {
            r.split('"').next().map(str::to_string)
        } else {
            Some(rest.chars().take_while(char::is_ascii_digit).collect())
        }
    };
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let step: u64 = field(line, "\"step\"").context("step")?.parse()?;
        let producer = field(line, "\"producer\"").context("producer")?;
        let seq: u64 = field(line, "\"sequence\"").context("sequence")?.parse()?;
        out.push((step, producer, seq));
    }
    Ok(out)
}

/// The shape of one chaos run.
struct Plan {
    producers: u64,
    /// TGBs per producer.
    per: u64,
    ranks: u64,
    short: bool,
}

impl Plan {
    fn steps(&self) -> u64 {
        self.producers * self.per
    }
}

/// What the run did to the processes and the server.
#[derive(Default)]
struct Mayhem {
    kills: u32,
    failures: u32,
    server_restarts: u32,
    gc_runs: u32,
}

pub(crate) fn chaos(short: bool) -> Result<()> {
    let root = servers::root();
    let st = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .args(["build", "--quiet", "-p", "batchweave-cli"])
        .status()?;
    ensure!(st.success(), "building batchweave failed");
    let bin = root.join("target/debug/batchweave");
    let mut srv = servers::start(true)?;
    let endpoint = srv
        .env
        .iter()
        .find(|(k, _)| k == "BATCHWEAVE_TEST_SEAWEED_ENDPOINT")
        .map(|(_, v)| v.clone())
        .context("chaos needs SeaweedFS (it keeps its data across a restart); it did not start")?;
    let dir: PathBuf = root.join(".run/chaos");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let url = format!("s3://bwtest/chaos-{}", std::process::id());
    let env: Vec<(String, String)> = vec![
        ("AWS_ENDPOINT".into(), endpoint),
        ("AWS_ALLOW_HTTP".into(), "true".into()),
        ("AWS_ACCESS_KEY_ID".into(), "testing".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "testing".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("RUST_LOG".into(), "warn".into()),
    ];
    let (producers, per, ranks) = if short {
        (2u64, 40u64, 2u64)
    } else {
        (3, 100, 4)
    };
    let plan = Plan {
        producers,
        per,
        ranks,
        short,
    };
    let mut procs = processes(&plan, &url, &dir);
    for p in &mut procs {
        start(&bin, &env, p, &dir)?;
    }
    eprintln!(
        "chaos: {producers} producers x {per} TGBs (policies {}), {ranks} ranks, store {url}",
        POLICIES.join("/")
    );
    let m = run_to_the_end(&plan, &bin, &env, &mut procs, &dir, &mut srv, &url)?;
    let (steps, lost, duplicated, reordered) = verdict(&plan, &dir)?;
    println!(
        "chaos: {} SIGKILLs, {} failed exits restarted, {} S3 server restart(s), {} gc runs; {steps} steps on {ranks} ranks: {lost} lost, {duplicated} duplicated, {reordered} reordered",
        m.kills, m.failures, m.server_restarts, m.gc_runs
    );
    if lost + duplicated + reordered > 0 {
        bail!("chaos found {lost} lost, {duplicated} duplicated, {reordered} reordered TGBs");
    }
    drop(srv);
    Ok(())
}

/// The producers' commit policies, in turn.
const POLICIES: [&str; 2] = ["coop", "dac"];

/// The producer and consumer processes of the run (not started yet).
fn processes(plan: &Plan, url: &str, dir: &Path) -> Vec<Proc> {
    let (per, ranks, steps) = (plan.per, plan.ranks, plan.steps());
    let mut procs: Vec<Proc> = Vec::new();
    for i in 0..plan.producers {
        // Cooperative and DAC producers share the stream: a coop commit publishes the
        // uploads of both, and of the killed ones.
        let policy = POLICIES[usize::try_from(i).unwrap_or(0) % POLICIES.len()];
        let args = format!(
            "produce --store {url} --producer-id p{i} --tgbs {per} --dp {ranks} --cp 1 --slice-bytes 2048 --policy {policy} --max-lag 24"
        );
        procs.push(Proc {
            name: format!("produce-p{i}"),
            args: args.split(' ').map(String::from).collect(),
            child: None,
            done: false,
            starts: 0,
        });
    }
    for r in 0..ranks {
        let args = format!(
            "consume --store {url} --rank {r} --world-size {ranks} --dp {ranks} --steps {steps} --group chaos --checkpoint-every 4 --state-file {} --log {} --slice-bytes 2048 --idle-timeout-secs 300",
            dir.join(format!("rank{r}.state")).display(),
            dir.join(format!("rank{r}.log")).display()
        );
        procs.push(Proc {
            name: format!("consume-r{r}"),
            args: args.split(' ').map(String::from).collect(),
            child: None,
            done: false,
            starts: 0,
        });
    }
    procs
}

/// Watches the processes until every one finished successfully, restarting the ones
/// that fail, SIGKILLing a random live one every 0.3-1.2 s, restarting the S3 server
/// once and running `batchweave gc` every 2 s. Fails past the deadline.
fn run_to_the_end(
    plan: &Plan,
    bin: &Path,
    env: &[(String, String)],
    procs: &mut [Proc],
    dir: &Path,
    srv: &mut servers::Servers,
    url: &str,
) -> Result<Mayhem> {
    let short = plan.short;
    let mut rng = Lcg(0xC4A05 ^ u64::from(std::process::id()));
    let t0 = Instant::now();
    let deadline = Duration::from_secs(if short { 300 } else { 900 });
    let mut m = Mayhem::default();
    let mut last_gc = Instant::now();
    let mut last_kill = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        for p in procs.iter_mut() {
            if p.done {
                continue;
            }
            if let Some(c) = p.child.as_mut()
                && let Some(status) = c.try_wait()?
            {
                if status.success() {
                    p.done = true;
                    eprintln!("chaos: {} finished after {} start(s)", p.name, p.starts);
                    continue;
                }
                m.failures += 1;
                start(bin, env, p, dir)?;
            }
        }
        // Counted after the loop: the last process may have finished in it.
        if procs.iter().all(|p| p.done) {
            return Ok(m);
        }
        ensure!(
            t0.elapsed() < deadline,
            "chaos run did not finish within {deadline:?}; see {}",
            dir.display()
        );
        if last_kill.elapsed() > Duration::from_millis(300 + rng.below(900)) {
            let live: Vec<usize> = (0..procs.len()).filter(|&i| !procs[i].done).collect();
            let i = live[rng.below(live.len() as u64) as usize];
            let p = &mut procs[i];
            if let Some(mut c) = p.child.take() {
                let _ = c.kill(); // SIGKILL
                let _ = c.wait();
                m.kills += 1;
                start(bin, env, p, dir)?;
            }
            last_kill = Instant::now();
        }
        if m.server_restarts == 0 && t0.elapsed() > Duration::from_secs(if short { 3 } else { 10 })
        {
            eprintln!("chaos: restarting the S3 server");
            srv.restart_seaweed()?;
            m.server_restarts += 1;
        }
        if last_gc.elapsed() > Duration::from_secs(2) {
            let out = Command::new(bin)
                .args(["gc", "--store", url, "--orphan-grace-secs", "3600"])
                .envs(env.iter().cloned())
                .output()?;
            if out.status.success() {
                m.gc_runs += 1;
            }
            last_gc = Instant::now();
        }
    }
}

/// The verdict from the ranks' logs: every rank logged the same steps as rank 0, which
/// logged every step once; returns (steps, lost, duplicated, reordered) TGBs.
fn verdict(plan: &Plan, dir: &Path) -> Result<(usize, usize, usize, usize)> {
    let steps = plan.steps();
    let logs: Vec<Vec<(u64, String, u64)>> = (0..plan.ranks)
        .map(|r| read_log(&dir.join(format!("rank{r}.log"))))
        .collect::<Result<_>>()?;
    let reference: Vec<(u64, String, u64)> = logs[0].clone();
    ensure!(
        reference.len() as u64 == steps,
        "rank 0 logged {} steps, expected {steps}",
        reference.len()
    );
    for (r, l) in logs.iter().enumerate() {
        ensure!(l == &reference, "rank {r}'s log differs from rank 0's");
    }
    let mut seen = BTreeSet::new();
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let (mut duplicated, mut reordered) = (0, 0);
    for (i, (step, p, q)) in reference.iter().enumerate() {
        ensure!(*step == i as u64, "step {step} at line {i}");
        if !seen.insert((p.clone(), *q)) {
            duplicated += 1;
        }
        let l = last.entry(p.clone()).or_insert(0);
        if *q <= *l {
            reordered += 1;
        }
        *l = *q;
    }
    let per = plan.per;
    let lost = (0..plan.producers)
        .flat_map(|i| (1..=per).map(move |q| (format!("p{i}"), q)))
        .filter(|k| !seen.contains(k))
        .count();
    Ok((reference.len(), lost, duplicated, reordered))
}
