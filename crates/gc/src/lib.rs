//! BatchWeave lifecycle: checkpoint watermarks, the low-water mark, trimming,
//! safe physical deletion and the orphan sweep (paper section 5.3).
//!
//! After each successful checkpoint a consumer writes its watermark
//! `watermarks/<group>/<position>.wm` = (manifest version, next TGB step).
//! A group's mark is the minimum over its positions (a position that has not
//! written one holds the mark at 0); the stream's low-water mark is the
//! minimum over live groups. The [`Reclaimer`] turns it into the GC boundary
//! and deletes what no live checkpoint can need.
//!
//! Invariants (tested in `tests/`):
//! - **Rollback safety**: no TGB object with step at or above any live
//!   watermark, and no manifest version at or above the lowest watermark
//!   version, is ever deleted; the newest version is never deleted.
//! - **No ghost commits**: the boundary is durable before anything is
//!   deleted, and producers check it after every successful create.
//! - **Convergence**: every step is idempotent; a crashed pass is finished by
//!   the next one.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use batchweave_gc::{GcSettings, Reclaimer};
//! use batchweave_store::StreamStore;
//!
//! let store = StreamStore::open("memory:///").await?;
//! let gc = Reclaimer::new(store, GcSettings { dry_run: true, ..Default::default() });
//! let report = gc.run_once().await?;
//! assert_eq!(report.bytes_freed, 0); // an empty stream has nothing to reclaim
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

mod error;
mod marks;
mod reclaim;

pub use error::GcError;
pub use marks::{GroupMark, LowWater, PositionMark};
pub use reclaim::{GcReport, GcSettings, GcTask, Reclaimer};
