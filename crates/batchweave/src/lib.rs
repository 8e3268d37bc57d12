//! BatchWeave: a consistent, brokerless training data plane on object storage.
//!
//! Preprocessing workers (**producers**) write finished global batches
//! (Transactional Global Batches, TGBs) straight to S3, GCS, Azure or a local
//! directory and publish them by creating the next manifest version with a
//! conditional create. Training ranks (**consumers**) see each batch
//! atomically, in one global order, read only their own slice with a ranged
//! GET, and resume exactly from a checkpoint. The **reclaimer** deletes what no
//! live checkpoint needs. There is no broker and no coordinator: the object
//! store is the only shared component.
//!
//! Open a [`Stream`] from a URL and get everything from it:
//!
//! ```
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! use batchweave::{ConsumerSettings, MeshConfig, ProducerSettings, RankConfig, Stream};
//! use bytes::Bytes;
//!
//! let dir = tempfile::tempdir()?;
//! let stream = Stream::open(dir.path().to_str().unwrap()).await?;
//!
//! // Two producers, each writing 3 global batches for a DP=2 x CP=1 mesh.
//! for id in ["prep-0", "prep-1"] {
//!     let mut p = stream.producer(id).settings(ProducerSettings::default()).open().await?;
//!     for i in 1..=3u64 {
//!         let slices = vec![Bytes::from(format!("{id}/{i}/d0")), Bytes::from(format!("{id}/{i}/d1"))];
//!         p.append(2, 1, slices, i).await?; // i = source offset after this batch
//!     }
//!     p.close().await?;
//! }
//!
//! // Four ranks: DP=2, TP=2. Ranks of one TP group read the same slice.
//! let mesh = MeshConfig::new(4, 2, 1, 2, 1); // world size, DP, CP, TP, PP
//! let mut ranks = Vec::new();
//! for rank in 0..4 {
//!     let me = RankConfig::new(rank, mesh, "train");
//!     ranks.push(stream.consumer(me).settings(ConsumerSettings::default()).open().await?);
//! }
//! let mut first_steps = Vec::new();
//! for c in &mut ranks {
//!     first_steps.push(c.next().await?.sources[0].key.clone());
//! }
//! assert!(first_steps.iter().all(|k| k == &first_steps[0]), "one global order");
//!
//! // Checkpoint rank 0 after step 0, read on, then restore: step 1 again, exactly.
//! let state = ranks[0].state();
//! ranks[0].checkpoint_committed(&state).await?;
//! let step1 = ranks[0].next().await?;
//! let me = RankConfig::new(0, mesh, "train");
//! let mut restored = stream.consumer(me).state(state).open().await?;
//! let again = restored.next().await?;
//! assert_eq!((again.step, &again.data), (step1.step, &step1.data));
//! # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
//! ```
//!
//! Layers (each usable on its own): [`store`] (object-store access),
//! [`manifest`] and [`tgb`] (on-store formats, mesh and remap), [`dac`] (commit
//! cadence), [`producer`], [`consumer`], [`gc`].

mod error;
mod stream;

/// This crate's README (its crates.io page), compiled as a doctest so it cannot rot.
/// The repository README's example is compiled by the benches crate.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use batchweave_consumer::{
    Batch, Consumer, ConsumerSettings, ConsumerState, ConsumerStats, MeshConfig, RankConfig,
    ReadMode,
};
pub use batchweave_dac::{CoopParams, DacParams, PolicyKind};
pub use batchweave_gc::{GcReport, GcSettings, GcTask, Reclaimer};
pub use batchweave_producer::{Producer, ProducerSettings, ProducerStats, SliceLayout};
pub use batchweave_store::{OpenOptions, StreamStore};
pub use error::{Error, ErrorKind};
/// The `object_store` version BatchWeave is built on (use this one).
pub use object_store;
pub use stream::{Stream, StreamInfo};

/// Object-store access: URL opening, counters, fault injection, latency model.
pub mod store {
    pub use batchweave_store::*;
}

/// On-store metadata format: manifest, GC boundary, watermarks, group layout, rebase.
pub mod manifest {
    pub use batchweave_manifest::*;
}

/// TGB object layout, mesh projection and topology remap.
pub mod tgb {
    pub use batchweave_tgb::*;
}

/// Commit cadence: DAC and the baseline policies.
pub mod dac {
    pub use batchweave_dac::*;
}

/// The producer client.
pub mod producer {
    pub use batchweave_producer::*;
}

/// The consumer client.
pub mod consumer {
    pub use batchweave_consumer::*;
}

/// Lifecycle: watermarks, low-water mark, reclamation.
pub mod gc {
    pub use batchweave_gc::*;
}
