//! Deterministic simulation of a whole BatchWeave deployment.
//!
//! One root seed drives everything: a single-threaded tokio runtime with
//! paused (virtual) time, an in-memory object store under a latency model and
//! a fault injector (errors before and after a request takes effect, creates
//! that take effect after the client gave up, stale manifest reads and
//! listings, stale reads of overwritten watermarks and layouts, latency
//! spikes), and a schedule of process events drawn from the seed:
//!
//! * 2-6 producers, each committing its quota of TGBs of the stream's grid
//!   (`D_t x C_t`, drawn independently of the consumers'); some join late; each
//!   incarnation runs a commit policy of the mix, a good share of them `coop`
//!   (cooperative commits, which also publish other producers' uploads found by a
//!   listing of `tgb/`), in some runs all of them (`sim --policy NAME` forces one);
//! * aimed at cooperative commits: committers crashing between their listing and
//!   their create or stalling there, producers fenced while others publish their uploads, zombies that
//!   keep uploading under their fenced epoch, short commit ages (uploads become old
//!   enough for GC's orphan sweep while the run goes on), crashed producers that stay
//!   down 5-40 s, stale listings of `tgb/` (recent uploads missing, deleted ones still
//!   shown);
//! * producer crashes (the handle is dropped) and restarts with the same id,
//!   resuming from the committed offset, on the same host or a new one; fail
//!   points after the TGB upload, before and after the manifest create;
//!   zombies (an old incarnation kept alive that appends and flushes after a
//!   newer one opened); host suspends (the wall clock runs on, the monotonic
//!   clock stops, requests and replies wait) and wall clocks skewed per host;
//! * 1-3 consumer groups, each its own mesh (`DP x CP x TP x PP`, remapping
//!   onto the TGB grid), checkpoint interval and watermarks; every rank reads
//!   every step, checkpoints every K steps, crashes (between steps or
//!   mid-read) and restores from its last checkpoint; groups other than the
//!   first may stop early and are then retired;
//! * restore probes: a rank's older checkpoint, or a checkpoint at a version
//!   whose slot a ghost fills, restored at the same or another DP;
//! * one or two reclaimers running GC passes at random times, each on its own
//!   host clock, some passes interrupted by failing deletes;
//! * at the end, a rogue writer's version that rewrites history.
//!
//! During and after the run [`run`] checks these invariants, against the
//! ground truth the simulated backend records (every manifest write, ghost or
//! live, every delete, every stored TGB object):
//!
//! | invariant | what must hold |
//! |---|---|
//! | `one-order` | versions are contiguous and each extends the previous one |
//! | `live-chain-batch` | every batch a rank gets is exactly the live chain's batch of its step for its position and grid |
//! | `ranks-agree` | every rank saw every step of its group |
//! | `exactly-once` | each producer's committed source offsets are exactly `1..=quota`, in order |
//! | `visible-object-present` | a version never makes visible a TGB whose object is gone; a rank never finds one missing |
//! | `exact-restore` | steps replayed after a restore equal the ones seen before the crash |
//! | `reclaim-safety` | restoring a live rank's last checkpoint never hits reclaimed data |
//! | `gc-safety` | at every deletion: a TGB's step is below every live rank's mark, a version below every live rank's mark version, never the newest |
//! | `restore-outcome` | a restore from any checkpoint (older, at a ghost slot, at another DP) yields the live chain's batches or `DataReclaimed`, nothing else |
//! | `storage-bound` | with one `max_lag` L everywhere, after a complete GC pass: stored TGBs at live steps from the low-water mark on at most `L + interval + 1`, uncommitted ones within the producers' buffers, nothing older than the grace period left behind that the newest version proves an orphan |
//! | `forged-refused` | a version that does not extend the chain is refused with a `Data` error naming it |
//! | `no-ghost-commit` | everything a producer reported committed is in the chain |
//! | `zombie-fenced` | an incarnation older than the live one never commits |
//! | `max-lag` | no version ends more than its committer's `max_lag` past the low-water mark |
//! | `data-integrity` | no live rank gets a `Data` or `Manifest` error |
//! | `reader-rules` | every version created decodes and extends the one before it, as every reader checks (at the create) |
//! | `reader-refused`, `candidate-invalid` | no producer (zombies included) refuses a version it reads, nor its own candidate before the create |
//! | `published-uploaded`, `published-reclaimed` | a TGB a version makes visible was uploaded under its key with its size, and GC never deleted it |
//! | `fenced-published` | no version makes visible a TGB of an epoch its producer's newer incarnation fenced |
//! | `published-contiguous` | each producer's sequences in the chain are 1, 2, 3, ... (and its offsets, `exactly-once`) |
//! | `coop-age` | a cooperative version publishes another producer's upload only within that producer's `max_commit_age` |
//!
//! A failure names the invariant, the seed, the last events and the command
//! that replays it; equal seeds give equal digests (event log, final
//! manifest, virtual clock, last RNG draw).
//!
//! The defaults turn every check on ([`SimConfig::stale_listings`],
//! [`SimConfig::check_max_lag`], [`SimConfig::strict`],
//! [`SimConfig::gc_stale_reads`]); the bugs these found are fixed and kept as
//! regression seeds in `crates/sim/tests/seeds.rs`; no known bug is tolerated.
//! [`SimConfig::small_buffers`] widens the world to buffers smaller than a count
//! policy's batch.
//!
//! Debugging a seed: `BATCHWEAVE_SIM_LOG=1` prints every event, manifest
//! write and refused create as it happens; with the `sim` binary,
//! `BATCHWEAVE_SIM_LOG=2` prints the libraries' `tracing` events instead.
//!
//! [`PlantedBug`] plants a bug (in the store, or through the producer's and
//! the consumer's test-only hooks) to show that the invariants catch it.
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
mod host;
mod log;
mod probe;
mod producers;
mod reclaim;
mod run;
mod world;

pub use config::{CoopReport, PlantedBug, SimConfig, SimReport};
pub use error::{SimFailure, replay_hint};
pub use run::run;
