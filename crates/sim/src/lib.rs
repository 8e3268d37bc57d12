//! Deterministic simulation of a whole BatchWeave deployment.
//!
//! One root seed drives everything: a single-threaded tokio runtime with
//! paused (virtual) time, an in-memory object store under a latency model and
//! a fault injector (errors before and after a request takes effect, stale
//! manifest reads and listings, latency spikes), and a schedule of process
//! events drawn from the seed:
//!
//! * 2-6 producers, each committing its quota of TGBs whose bytes are a
//!   function of (producer, source offset); some join late;
//! * producer crashes (the handle is dropped) and restarts with the same id,
//!   resuming from the committed offset; fail points after the TGB upload,
//!   before and after the manifest create; zombies (an old incarnation kept
//!   alive that appends and flushes after a newer one opened);
//! * 2-4 consumer ranks of one group reading every step, checkpointing every
//!   K steps, crashing (between steps or mid-read) and restoring from their
//!   last checkpoint;
//! * GC passes at random times, some interrupted by failing deletes.
//!
//! During and after the run [`run`] checks these invariants, against the
//! ground truth the simulated backend records (every manifest write, even of
//! versions GC deleted since):
//!
//! | invariant | what must hold |
//! |---|---|
//! | `one-order` | versions are contiguous and each extends the previous one |
//! | `ranks-agree` | every rank saw the same step sequence, equal to the chain's |
//! | `exactly-once` | each producer's committed source offsets are exactly `1..=quota`, in order |
//! | `visible-object-present` | a consumer never finds a visible TGB's object missing |
//! | `exact-restore` | steps replayed after a restore equal the ones seen before the crash |
//! | `reclaim-safety` | restoring from the last checkpoint never hits reclaimed data |
//! | `no-ghost-commit` | everything a producer reported committed is in the chain |
//! | `zombie-fenced` | an incarnation older than the live one never commits |
//! | `data-integrity` | every byte a rank gets is the slice it expects |
//!
//! A failure names the invariant, the seed, the last events and the command
//! that replays it; equal seeds give equal digests (event log, final
//! manifest, virtual clock, last RNG draw).
//!
//! Known bugs the simulation found are tolerated by default so that it keeps
//! exploring; switches turn them on ([`SimConfig::stale_listings`],
//! [`SimConfig::check_max_lag`], [`SimConfig::strict`],
//! [`SimConfig::small_buffers`]).
//!
//! Debugging a seed: `BATCHWEAVE_SIM_LOG=1` prints every event, manifest
//! write and refused create as it happens; with the `sim` binary,
//! `BATCHWEAVE_SIM_LOG=2` prints the libraries' `tracing` events instead.
//!
//! [`PlantedBug`] plants a store bug (never a library change) to show that
//! the invariants catch it.
//!
//! ```
//! use batchweave_sim::{SimConfig, run};
//!
//! let cfg = SimConfig { producers: 2..=2, tgbs_per_producer: 2..=3, ..SimConfig::default() };
//! let report = run(7, &cfg).expect("seed 7 holds every invariant");
//! assert_eq!(run(7, &cfg).unwrap().digest, report.digest); // bit-for-bit replay
//! assert!(report.steps >= 4);
//! ```

mod backend;
mod check;
mod config;
mod consumers;
mod error;
mod producers;
mod reclaim;
mod run;
mod world;

pub use config::{PlantedBug, SimConfig, SimReport};
pub use error::{SimFailure, replay_hint};
pub use run::run;
