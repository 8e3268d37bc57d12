//! The BatchWeave producer client.
//!
//! A producer writes finished global batches (TGBs) straight to the object
//! store and publishes them by creating the next manifest version with a
//! conditional create. There is no coordinator: concurrent producers
//! serialise on the version number, and a loser rebases onto the winner.
//!
//! Guarantees (each checked by the tests in `tests/`):
//! - **Atomic visibility**: a TGB is visible exactly when a manifest version
//!   that lists it exists; its object was written before.
//! - **One order**: versions are totally ordered and each extends the last.
//! - **Exactly once**: a TGB is committed at most once (lost replies are
//!   recognised through the state map) and, once appended by an incarnation
//!   that flushes, at least once; a restarted producer resumes from
//!   [`Producer::committed_offset`].
//! - **Fencing**: opening a producer commits a new epoch for its id; an older
//!   incarnation that later sees it stops with [`ProducerError::Fenced`].
//! - **No ghost commits**: a create that succeeded below the GC boundary
//!   (because GC had deleted that version) is treated as a conflict.
//! - **Cooperative commits** (policy `coop`): a commit also publishes the next
//!   uploads of other producers, found by a listing of `tgb/` and described by
//!   their keys, under the rules their own commits follow (contiguous sequences,
//!   their entry's epoch, their `max_commit_age`, one grid; `max_lag` is the
//!   committer's); each
//!   producer learns from the state map that its TGBs were published.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use batchweave_producer::{Producer, ProducerSettings};
//! use batchweave_store::StreamStore;
//! use bytes::Bytes;
//!
//! let store = StreamStore::open("memory:///").await?;
//! let mut p = Producer::builder(store, "worker-0").settings(ProducerSettings::default()).open().await?;
//! assert_eq!(p.committed_offset(), 0);
//! for i in 0..3u64 {
//!     let slices = (0..4).map(|s| Bytes::from(format!("step {i} slice {s}"))).collect();
//!     p.append(2, 2, slices, i + 1).await?; // a 2 x 2 grid; source offset after this TGB
//! }
//! let stats = p.close().await?;
//! assert_eq!(stats.tgbs_committed, 3);
//! assert_eq!(stats.committed_offset, 3);
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

mod committer;
mod descriptor;
mod error;
pub mod planted;
mod producer;
mod settings;
mod shared;
mod stats;
mod stream;

pub use batchweave_dac::{CoopParams, DacParams, PolicyKind};
pub use descriptor::tgb_descriptor;
pub use error::ProducerError;
pub use producer::{AppendReceipt, Producer, ProducerBuilder};
pub use settings::{FailPoint, FailPoints, ProducerSettings, SliceLayout};
pub use stats::ProducerStats;
pub use stream::TgbWriter;
