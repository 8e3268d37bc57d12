//! `cargo xtask python`: the Python SDK's tests.
//!
//! Creates `.tools/pyvenv` (git-ignored) on first use with maturin, pytest, numpy and mypy
//! from PyPI (pip's cache in `~/.cache/pip` is reused), installs the package with
//! `pip install ./crates/python` (maturin builds it into `target/python`; cargo rebuilds
//! only what changed), and torch + torchdata once, only when the disk has room for them:
//! otherwise it prints a loud `SKIPPED torch tests` line and runs the rest. Then it
//! starts moto on 127.0.0.1, runs pytest over `crates/python/tests` (local directory and
//! S3) and `mypy --strict` over the tests and the examples against the stubs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{cargo, servers, step};

/// Free disk below which torch (about 3 GB download, a 5.3 GB venv) is not installed.
const TORCH_MIN_FREE_GB: f64 = 12.0;
const BASE: [&str; 4] = [
    "maturin>=1.16,<2",
    "pytest>=8",
    "numpy>=2,<2.5",
    "mypy>=1.10",
];
const TORCH: [&str; 2] = ["torch==2.15.*", "torchdata==0.11.0"];

/// The venv's `bin` first on `PATH` (maturin's build hook runs the `maturin` binary).
fn venv_path(venv: &Path) -> std::ffi::OsString {
    let mut paths = vec![venv.join("bin")];
    if let Some(p) = std::env::var_os("PATH") {
        paths.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(paths).unwrap_or_default()
}

fn pip(venv: &Path) -> Command {
    let mut c = Command::new(venv.join("bin/python"));
    c.args(["-m", "pip", "--disable-pip-version-check"])
        .env("PATH", venv_path(venv))
        .env("VIRTUAL_ENV", venv);
    c
}

fn run(what: &str, cmd: &mut Command) -> Result<()> {
    let st = cmd.status().with_context(|| what.to_owned())?;
    if !st.success() {
        bail!("{what} failed: {st}");
    }
    Ok(())
}

fn free_gb(dir: &Path) -> Result<f64> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import shutil,sys; print(shutil.disk_usage(sys.argv[1]).free)",
        ])
        .arg(dir)
        .output()
        .context("python3 (shutil.disk_usage)")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let bytes: f64 = text.trim().parse().context("reading the free disk space")?;
    Ok(bytes / 1e9)
}

fn venv() -> Result<PathBuf> {
    let root = servers::root();
    let venv = root.join(".tools/pyvenv");
    let marker = venv.join(".batchweave-base-v1");
    if !marker.exists() {
        std::fs::create_dir_all(root.join(".tools"))?;
        run(
            "creating .tools/pyvenv",
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
        )?;
        eprintln!("xtask: installing {} into .tools/pyvenv", BASE.join(", "));
        run(
            "pip install (base)",
            pip(&venv).args(["install", "--quiet"]).args(BASE),
        )?;
        std::fs::write(&marker, "ok")?;
    }
    Ok(venv)
}

/// Installs torch and torchdata once if the disk allows; returns whether they are there.
fn torch(venv: &Path) -> Result<bool> {
    let marker = venv.join(".batchweave-torch-2.15");
    if marker.exists() {
        return Ok(true);
    }
    let free = free_gb(venv)?;
    if free < TORCH_MIN_FREE_GB {
        eprintln!(
            "\n!!!!!!!! SKIPPED torch tests: {free:.1} GB free (torch needs {TORCH_MIN_FREE_GB} GB) !!!!!!!!\n"
        );
        return Ok(false);
    }
    eprintln!(
        "xtask: installing {} ({free:.0} GB free; ~3 GB download)",
        TORCH.join(", ")
    );
    run(
        "pip install torch",
        pip(venv).args(["install", "--quiet"]).args(TORCH),
    )?;
    std::fs::write(&marker, "ok")?;
    Ok(true)
}

pub(crate) fn python() -> Result<()> {
    let t0 = Instant::now();
    let root = servers::root();
    let venv = venv()?;
    let have_torch = torch(&venv)?;
    let target = root.join("target/python");
    step(
        "pip install ./crates/python (maturin, release)",
        pip(&venv)
            .args([
                "install",
                "--quiet",
                "--no-build-isolation",
                "--force-reinstall",
                "--no-deps",
            ])
            .arg(root.join("crates/python"))
            .env("CARGO_TARGET_DIR", &target),
    )?;
    step(
        "cargo build -p batchweave-cli (the Rust side of the cross tests)",
        cargo().args(["build", "-p", "batchweave-cli"]),
    )?;
    let cli = root.join("target/debug/batchweave");
    let servers = servers::start_s3()?;
    let mut pytest = Command::new(venv.join("bin/python"));
    pytest
        .current_dir(&root)
        .args([
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "crates/python/tests",
        ])
        .envs(servers.env.iter().cloned())
        .env("BATCHWEAVE_CLI", &cli);
    let tests = step(
        "pytest crates/python/tests (local directory and S3 on moto)",
        &mut pytest,
    );
    drop(servers);
    tests?;
    let mut mypy = Command::new(venv.join("bin/python"));
    mypy.current_dir(&root)
        .args([
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--config-file",
        ])
        .arg(root.join("crates/python/pyproject.toml"))
        .arg("crates/python/tests")
        .env("MYPYPATH", root.join("crates/python/tests"));
    if root.join("examples/python").exists() {
        mypy.arg("examples/python");
    }
    step(
        "mypy --strict (tests and examples against the stubs)",
        &mut mypy,
    )?;
    if !have_torch {
        eprintln!(
            "\n!!!!!!!! SKIPPED torch tests (see above): the torch cases did not run !!!!!!!!\n"
        );
    }
    eprintln!("xtask: python step took {:.1}s", t0.elapsed().as_secs_f64());
    Ok(())
}
