//! [`Stream`]: the one entry point.

use std::collections::BTreeMap;

use batchweave_consumer::{Consumer, ConsumerBuilder, RankConfig};
use batchweave_gc::{GcSettings, LowWater, Reclaimer};
use batchweave_manifest::{GcBoundary, ProducerState};
use batchweave_producer::ProducerBuilder;
use batchweave_store::{OpenOptions, StreamStore};

use crate::Error;

/// One training data stream: an object-store prefix.
#[derive(Debug, Clone)]
pub struct Stream {
    store: StreamStore,
}

/// A summary of a stream's state, as `batchweave inspect` shows it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StreamInfo {
    /// Newest manifest version (0 for an empty stream).
    pub version: u64,
    /// First retained global step.
    pub first_step: u64,
    /// One past the last committed step (total TGBs ever committed).
    pub end_step: u64,
    /// Retained TGBs.
    pub retained_tgbs: u64,
    /// Bytes of the retained TGB objects.
    pub retained_bytes: u64,
    /// Producer entries of the state map.
    pub producers: BTreeMap<String, ProducerState>,
    /// The GC boundary.
    pub boundary: GcBoundary,
    /// The low-water mark and per-group watermarks.
    pub low_water: LowWater,
}

impl Stream {
    /// Opens the stream at `url` (`file:///dir`, a plain path, `memory:///`,
    /// `s3://bucket/prefix`, `gs://...`, `az://...`; credentials from the
    /// usual `AWS_*`, `GOOGLE_*`, `AZURE_*` variables) and checks that the store
    /// honours conditional create.
    pub async fn open(url: &str) -> Result<Self, Error> {
        Ok(Self {
            store: StreamStore::open(url).await?,
        })
    }

    /// Opens with explicit options (backend settings, retry, clock).
    pub async fn open_with(url: &str, options: OpenOptions) -> Result<Self, Error> {
        Ok(Self {
            store: StreamStore::open_with(url, options).await?,
        })
    }

    /// Wraps an already opened store (e.g. with fault injection).
    pub fn from_store(store: StreamStore) -> Self {
        Self { store }
    }

    /// The underlying store handle.
    pub fn store(&self) -> &StreamStore {
        &self.store
    }

    /// A producer builder for `producer_id`; `.settings(..).open().await`.
    pub fn producer(&self, producer_id: impl Into<String>) -> ProducerBuilder {
        batchweave_producer::Producer::builder(self.store.clone(), producer_id)
    }

    /// A consumer builder for one rank; `.settings(..).open().await` starts at
    /// step 0, and `.state(saved)` before `.open()` resumes from checkpoint state
    /// (the next batch is exactly the one after the checkpoint).
    pub fn consumer(&self, rank: RankConfig) -> ConsumerBuilder {
        Consumer::builder(self.store.clone(), rank)
    }

    /// The reclaimer of this stream.
    pub fn reclaimer(&self, settings: GcSettings) -> Reclaimer {
        Reclaimer::new(self.store.clone(), settings)
    }

    /// Reads the newest version, the GC boundary and the watermarks.
    pub async fn inspect(&self) -> Result<StreamInfo, Error> {
        let gc = self.reclaimer(GcSettings::default());
        let boundary = gc.boundary().await?;
        let newest = gc.newest_manifest().await?.unwrap_or_default();
        let low_water = gc.low_water().await?;
        Ok(StreamInfo {
            version: newest.version,
            first_step: newest.first_step,
            end_step: newest.total_tgbs,
            retained_tgbs: newest.tgbs.len() as u64,
            retained_bytes: newest.retained_bytes,
            producers: newest.producers.into_iter().collect(),
            boundary,
            low_water,
        })
    }
}
