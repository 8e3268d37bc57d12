//! The BatchWeave consumer client: a training rank's view of a stream.
//!
//! A [`Consumer`] delivers, step after step, exactly this rank's slice of each global batch,
//! in the one global order the manifest defines, and resumes from a checkpoint to exactly
//! the next step (paper sections 4.1-4.4 and 5.3).
//!
//! * **Who.** A consumer is opened for one rank: [`RankConfig`] holds the rank, the job's
//!   mesh (a `batchweave_tgb::MeshConfig`) and the consumer group, built with
//!   [`RankConfig::new`] or [`RankConfig::from_env`] from `RANK` / `WORLD_SIZE` as torchrun
//!   sets them. How it reads (prefetch, polling, read mode) is [`ConsumerSettings`], with
//!   defaults: `Consumer::builder(store, rank).settings(..).open().await`.
//! * **Position.** `(d, c)` comes from the rank and the mesh; TP and PP ranks of one
//!   `(d, c)` read the same bytes.
//! * **Cursor.** `(manifest version, consumer step)`. The consumer holds the newest manifest
//!   it has read; when a step's TGBs are not in it, it GETs version `v+1` (never a listing
//!   of the whole prefix), sleeping with bounded exponential backoff through the store's
//!   clock while caught up, and jumps to the newest version with one listing after `v+1`
//!   when it is behind. A TGB is read only once a manifest version references it, so a
//!   rank never sees a partly committed batch.
//! * **Reads.** Per TGB the footer is fetched once with one ranged GET at the location the
//!   manifest records, checked against its CRC32 and the object size, and cached (entries
//!   below the cursor are evicted). The slice run is one ranged GET, each slice checked
//!   against its CRC32; a CP split fetches the whole slice, checks it, then cuts it. Up to
//!   `prefetch` steps already visible are fetched ahead in background tasks.
//!   [`ReadMode::Dense`] fetches whole objects instead (the paper's baseline).
//! * **Remap.** A consumer whose DP/CP differ from the stream's grid reads per
//!   `batchweave_tgb::plan`; a checkpoint restored at another DP is converted with
//!   `batchweave_tgb::convert_step`.
//! * **Checkpoints.** [`Consumer::state`] is the cursor ([`ConsumerState`], JSON via
//!   [`ConsumerState::to_bytes`]); [`ConsumerBuilder::state`] resumes from it;
//!   [`Consumer::checkpoint_committed`] writes this position's watermark.
//!
//! # Objects the consumer writes
//!
//! | key | content |
//! |---|---|
//! | `watermarks/<group>/_layout` | group layout, written (plain put, idempotent) on open and restore: a `GroupLayout` envelope (docs/format.md) with the group's consumer DP and CP degrees. GC derives the positions `d{d}-c{c}` for `d < D`, `c < C` from it; a position without a watermark holds the mark at step 0 |
//! | `watermarks/<group>/d{d}-c{c}.wm` | the position's watermark (`Watermark` envelope, see `docs/format.md`): `version` = the checkpointed cursor's manifest version, `step` = the lowest TGB step the checkpoint's next consumer step needs, `updated_at_ms` from the store's clock |
//!
//! # Example
//!
//! ```
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! use batchweave_consumer::{Consumer, ConsumerSettings, RankConfig};
//! use batchweave_producer::Producer;
//! use batchweave_store::StreamStore;
//! use batchweave_tgb::MeshConfig;
//! use bytes::Bytes;
//!
//! // A producer writes one D=2 x C=1 TGB and commits it as version 1.
//! let store = StreamStore::in_memory();
//! let mut producer = Producer::builder(store.clone(), "p0").open().await?;
//! let slices = vec![Bytes::from_static(b"replica-0"), Bytes::from_static(b"replica-1")];
//! producer.append(2, 1, slices, 1).await?;
//! producer.close().await?;
//!
//! // Rank 1 of a DP=2 job reads replica 1 of step 0.
//! let rank = RankConfig::new(1, MeshConfig::new(2, 2, 1, 1, 1), "train");
//! let settings = ConsumerSettings { prefetch: 0, ..ConsumerSettings::default() };
//! let mut consumer = Consumer::builder(store, rank).settings(settings).open().await?;
//! let batch = consumer.next().await?;
//! assert_eq!((batch.step, &batch.data[0][..]), (0, &b"replica-1"[..]));
//! assert_eq!(consumer.state().next_step, 1);
//! // Equal slices are sealed (TGB format version 2): one ranged GET of the rank's
//! // 33-byte slot (the 9-byte slice and its 24-byte seal), and no footer read.
//! let stats = consumer.stats();
//! assert_eq!((stats.footer_bytes, stats.slice_bytes, stats.store.range_gets), (0, 33, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```

mod builder;
mod config;
mod consumer;
mod error;
#[doc(hidden)]
pub mod planted;
mod poll;
mod read;
mod settings;
mod state;
mod stats;

pub use batchweave_tgb::{MeshConfig, MeshOrder};
pub use builder::ConsumerBuilder;
pub use config::RankConfig;
pub use consumer::{Batch, Consumer};
pub use error::ConsumerError;
pub use poll::LIST_PROBE_EVERY;
#[doc(hidden)]
pub use poll::ManifestTracker;
pub use read::BatchSource;
pub use settings::{ConsumerSettings, MAX_PREFETCH, ReadMode};
pub use state::{ConsumerState, MAX_STATE_BYTES, STATE_FORMAT};
pub use stats::{ConsumerStats, LATENCY_SAMPLES, LatencySummary};
