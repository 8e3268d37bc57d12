//! The public-API snapshot: every item the facade and the library crates export, one
//! line each (`cargo public-api`), checked in under `api/<crate>.txt`, so that an API
//! change is a reviewed diff. `cargo xtask api` compares, `cargo xtask api --bless`
//! rewrites the snapshots.
//!
//! `cargo public-api` reads rustdoc's JSON output, which needs a nightly flag:
//! `RUSTC_BOOTSTRAP=1` enables it on the stable toolchain (as the fuzz build does).
//! The tool is installed into `.tools/cargo` on first use.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::servers::root;

/// The crates meant for crates.io whose API is snapshotted.
const CRATES: [&str; 9] = [
    "batchweave",
    "batchweave-store",
    "batchweave-manifest",
    "batchweave-tgb",
    "batchweave-dac",
    "batchweave-chain",
    "batchweave-producer",
    "batchweave-consumer",
    "batchweave-gc",
];

/// The version of `cargo-public-api` the snapshots are made with.
const TOOL_VERSION: &str = "0.52.0";

fn tool_root() -> PathBuf {
    root().join(".tools/cargo")
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Installs `cargo-public-api` into `.tools/cargo` unless that version is there.
fn install() -> Result<PathBuf> {
    let bin = tool_root().join("bin");
    let exe = bin.join("cargo-public-api");
    let have = Command::new(&exe)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if have.as_deref().is_some_and(|v| v.contains(TOOL_VERSION)) {
        return Ok(bin);
    }
    eprintln!("installing cargo-public-api {TOOL_VERSION} into .tools/cargo (once)");
    let st = cargo()
        .args(["install", "--locked", "--version", TOOL_VERSION, "--root"])
        .arg(tool_root())
        .arg("cargo-public-api")
        .status()
        .context("running cargo install cargo-public-api")?;
    if !st.success() {
        bail!("cargo install cargo-public-api {TOOL_VERSION} failed");
    }
    Ok(bin)
}

/// The public API of `krate`, one item a line.
fn snapshot(bin: &Path, krate: &str) -> Result<String> {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = cargo()
        .current_dir(root())
        .env("PATH", path)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["public-api", "-p", krate, "-sss", "--color", "never"])
        .output()
        .with_context(|| format!("running cargo public-api -p {krate}"))?;
    if !out.status.success() {
        bail!(
            "cargo public-api -p {krate} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Compares (or with `bless`, rewrites) every crate's snapshot.
pub(crate) fn check(bless: bool) -> Result<()> {
    let bin = install()?;
    let dir = root().join("api");
    std::fs::create_dir_all(&dir)?;
    let mut changed = Vec::new();
    for krate in CRATES {
        let now = snapshot(&bin, krate)?;
        let file = dir.join(format!("{krate}.txt"));
        let before = std::fs::read_to_string(&file).unwrap_or_default();
        if before == now {
            eprintln!("api {krate}: unchanged ({} items)", now.lines().count());
            continue;
        }
        if bless {
            std::fs::write(&file, &now)?;
            eprintln!(
                "api {krate}: snapshot written ({} items)",
                now.lines().count()
            );
        } else {
            changed.push(diff(krate, &before, &now));
        }
    }
    if !changed.is_empty() {
        bail!(
            "the public API changed; review and run `cargo xtask api --bless`:\n{}",
            changed.join("\n")
        );
    }
    Ok(())
}

/// The lines only in `before` (-) and only in `now` (+).
fn diff(krate: &str, before: &str, now: &str) -> String {
    let old: std::collections::BTreeSet<&str> = before.lines().collect();
    let new: std::collections::BTreeSet<&str> = now.lines().collect();
    let mut out = format!("--- api/{krate}.txt");
    for l in old.difference(&new) {
        out.push_str(&format!("\n- {l}"));
    }
    for l in new.difference(&old) {
        out.push_str(&format!("\n+ {l}"));
    }
    out
}
