//! `batchweave`: the command-line tool of BatchWeave.
//!
//! | command | what it does |
//! |---|---|
//! | `demo` | the whole data plane on a local directory, verified end to end |
//! | `produce` | a producer of synthetic, verifiable TGBs (resumes after a kill) |
//! | `consume` | one training rank that verifies every byte, checkpoints and resumes |
//! | `inspect` | a stream's versions, steps, producers, watermarks and low-water mark |
//! | `gc` | one reclamation pass (or `--dry-run`) |
//! | `load` | many producers and ranks for minutes with injected faults, verified |
//! | `bench` | the paper's experiments as ratios, with JSON and SVG plots |
//!
//! The runs behind `demo`, `load` and `bench` (and the synthetic payload every command
//! writes and verifies) live in `batchweave-harness`; this crate parses arguments,
//! calls them and prints. Feature `sim` (off by default) enables `bench --sim`, the
//! benchmarks on a simulated store in paused tokio time.

mod bars;
mod bench;
mod consume;
mod demo;
mod gc_cmd;
mod inspect;
mod load;
mod produce;

use clap::{Parser, Subcommand};

/// BatchWeave: a consistent, brokerless training data plane on object storage.
#[derive(Debug, Parser)]
#[command(name = "batchweave", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run producers, ranks and GC on a local directory and verify every byte.
    Demo(demo::DemoArgs),
    /// Produce synthetic TGBs until this producer id has exactly N committed.
    Produce(produce::ProduceArgs),
    /// Consume as one rank, verifying every byte; checkpoint and resume.
    Consume(consume::ConsumeArgs),
    /// Show a stream's state.
    Inspect(inspect::InspectArgs),
    /// Reclaim storage behind the low-water mark.
    Gc(gc_cmd::GcArgs),
    /// Run a benchmark: ratios against same-run baselines, JSON and SVG output.
    Bench(bench::BenchArgs),
    /// Many producers and ranks for minutes with injected faults; verify and report.
    Load(load::LoadArgs),
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn main() -> std::process::ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Demo(a) => demo::run(a).await,
            Command::Produce(a) => produce::run(a).await,
            Command::Consume(a) => consume::run(a).await,
            Command::Inspect(a) => inspect::run(a).await,
            Command::Gc(a) => gc_cmd::run(a).await,
            Command::Bench(a) => bench::run(a).await,
            Command::Load(a) => load::run(a).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
