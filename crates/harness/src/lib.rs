//! BatchWeave's harness: the runs behind `batchweave demo`, `batchweave load` and
//! `batchweave bench`, with their verification, and the synthetic payload they share.
//!
//! The `batchweave` binary parses arguments, calls a run here and prints its report;
//! everything the runs measure or check lives in this crate, so the runs can be driven
//! from tests and other tools without the command line.
//!
//! | module | what |
//! |---|---|
//! | [`payload`] | deterministic slices: every byte is a function of (producer, sequence, slice), so a reader verifies what it got without talking to the producer |
//! | [`demo`] | producers (one killed and restarted), ranks (one crashed and restored), GC; then every rank's steps, every TGB and every byte checked |
//! | [`load`] | many producers and ranks for minutes with seeded faults on every request; nothing lost, duplicated or reordered |
//! | [`bench`](mod@bench) | the paper's section 7 experiments as ratios against same-run baselines, with JSON results and SVG plots |
//! | [`visibility`] | an observer of the manifest chain: how long after its append returned a TGB is listed (visibility latency, drain time) |
//! | [`readers`] | many consumer ranks following the chain with the consumers' own polling loop: the manifest and boundary bytes and requests they cost |
//! | [`rusage`] | CPU time and peak RSS of this process (getrusage) |
//! | [`progress`] | how a run reports progress to whoever draws it |
//!
//! # Features
//!
//! `sim`: the benchmarks on the simulated store run on a paused tokio runtime (virtual
//! time), which needs tokio's `test-util`. Without it [`bench::Env::new`] refuses the
//! simulator and [`bench::SIM_AVAILABLE`] is false; everything else works.

pub mod bench;
pub mod demo;
pub mod load;
pub mod payload;
pub mod progress;
pub mod readers;
pub mod rusage;
pub mod visibility;
