//! The producer handle: open (catch up + claim), append, flush, close.

use std::sync::{Arc, Mutex};

use batchweave_chain::{Chain, Follower};
use batchweave_manifest::{stream_grid, validate_producer_id};
use batchweave_store::StreamStore;
use batchweave_tgb::EncodedTgb;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::ProducerError;
use crate::committer::{Committer, Identity, Msg};
use crate::descriptor::tgb_descriptor;
use crate::settings::{FailPoint, FailPoints, ProducerSettings};
use crate::shared::Shared;
use crate::stats::ProducerStats;

/// Where an appended TGB went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendReceipt {
    /// This producer's sequence number of the TGB.
    pub sequence: u64,
    /// Object key relative to the stream prefix.
    pub key: String,
    /// Object size in bytes.
    pub object_size: u64,
}

/// Builds a [`Producer`].
#[derive(Debug)]
pub struct ProducerBuilder {
    store: StreamStore,
    id: String,
    settings: ProducerSettings,
    fail: FailPoints,
}

impl ProducerBuilder {
    /// Replaces the settings.
    pub fn settings(mut self, settings: ProducerSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Arms test fail points.
    pub fn fail_points(mut self, fail: FailPoints) -> Self {
        self.fail = fail;
        self
    }

    /// Catches up to the newest manifest, claims a new epoch for the id
    /// (fencing any older incarnation) and starts the commit loop.
    pub async fn open(self) -> Result<Producer, ProducerError> {
        Producer::open_inner(self).await
    }
}

/// A producer of TGBs for one stream, under a stable producer id.
///
/// Opening it catches up to the newest manifest version and commits a claim
/// of a new epoch for the id, so that an older process with the same id (a
/// zombie) is fenced. [`committed_offset`](Self::committed_offset) is then
/// final: seek the data source there and [`append`](Self::append) from it
/// for end-to-end exactly-once.
///
/// Dropping a producer without [`close`](Self::close) behaves like a crash:
/// uploaded but uncommitted TGBs are not committed (they become orphans that
/// GC sweeps), and the next incarnation resumes from the committed offset.
pub struct Producer {
    pub(crate) store: StreamStore,
    pub(crate) me: Identity,
    pub(crate) settings: ProducerSettings,
    pub(crate) fail: FailPoints,
    pub(crate) next_sequence: u64,
    committed_offset: u64,
    /// The stream's slice grid `(dp, cp)`, once known (from the base at open or the
    /// first append): a TGB of another grid is refused before it is uploaded.
    grid: Option<(u32, u32)>,
    tx: Option<mpsc::UnboundedSender<Msg>>,
    task: Option<JoinHandle<()>>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) permits: Arc<Semaphore>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("id", &self.me.id)
            .field("epoch", &self.me.epoch)
            .field("next_sequence", &self.next_sequence)
            .finish()
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

impl Producer {
    /// Starts building a producer for `producer_id` on `store`.
    pub fn builder(store: StreamStore, producer_id: impl Into<String>) -> ProducerBuilder {
        ProducerBuilder {
            store,
            id: producer_id.into(),
            settings: ProducerSettings::default(),
            fail: FailPoints::default(),
        }
    }

    async fn open_inner(b: ProducerBuilder) -> Result<Producer, ProducerError> {
        validate_producer_id(&b.id).map_err(|e| ProducerError::Invalid(e.to_string()))?;
        b.settings.validate().map_err(ProducerError::Invalid)?;
        let limits = b.settings.limits;
        // The store's time before the first read: a claim of our epoch written before it
        // is a predecessor's, one written after it a concurrent opener's (see `claim`).
        let opened_at = b.store.store_time_ms().await?;
        let mut follower = Follower::new(Chain::new(b.store.clone(), limits));
        let live = follower.refresh_boundary().await?.min_live_version.max(1);
        follower.jump_from(live).await?;
        let prev_epoch = follower
            .current()
            .producers
            .get(&b.id)
            .map_or(0, |e| e.epoch);
        let mut rng = match b.settings.seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_os_rng(),
        };
        let me = Identity {
            id: b.id.clone(),
            epoch: prev_epoch + 1,
            incarnation: rng.random(),
        };
        let shared = Arc::new(Shared {
            stats: Mutex::new(ProducerStats::default()),
            fatal: Mutex::new(None),
            worker: Arc::new(tokio::sync::Mutex::new(())),
        });
        let permits = Arc::new(Semaphore::new(b.settings.max_buffered));
        let mut committer = Committer::new(
            b.store.clone(),
            me.clone(),
            b.settings.clone(),
            b.fail.clone(),
            follower,
            shared.clone(),
            permits.clone(),
        );
        committer.claim(opened_at).await?;
        // The claim may have moved to a newer epoch (a stale first view).
        let me = committer.me.clone();
        let grid = stream_grid(committer.follower.current());
        let entry = committer
            .follower
            .current()
            .producers
            .get(&me.id)
            .cloned()
            .unwrap_or_default();
        shared.stats_mut(|s| {
            s.committed_offset = entry.source_offset;
            s.last_sequence = entry.last_sequence;
        });
        tracing::info!(producer = %me.id, epoch = me.epoch, offset = entry.source_offset, "producer opened");
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(committer.run(rx));
        Ok(Producer {
            store: b.store,
            me,
            settings: b.settings,
            fail: b.fail,
            next_sequence: entry.last_sequence + 1,
            committed_offset: entry.source_offset,
            grid,
            tx: Some(tx),
            task: Some(task),
            shared,
            permits,
        })
    }

    /// The id's committed source offset when this producer opened: where
    /// the application must resume reading its source.
    pub fn committed_offset(&self) -> u64 {
        self.committed_offset
    }

    /// The sequence number the next appended TGB gets.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// This incarnation's epoch.
    pub fn epoch(&self) -> u64 {
        self.me.epoch
    }

    /// The producer id.
    pub fn id(&self) -> &str {
        &self.me.id
    }

    /// A copy of the statistics.
    pub fn stats(&self) -> ProducerStats {
        self.shared.stats_mut(|s| s.clone())
    }

    pub(crate) fn check_alive(&self) -> Result<(), ProducerError> {
        match self.shared.fatal() {
            Some(e) => Err(ProducerError::Stopped(e)),
            None => Ok(()),
        }
    }

    /// Encodes `slices` (a `dp` x `cp` grid, slice `(d, c)` at index
    /// `d * cp + c`) as a TGB in the layout of
    /// [`ProducerSettings::slice_layout`](crate::ProducerSettings::slice_layout), uploads
    /// it, and hands it to the commit loop.
    /// `source_offset` is the application's source position after this TGB.
    /// Returns once the object is durable (not yet visible).
    pub async fn append(
        &mut self,
        dp: u32,
        cp: u32,
        slices: Vec<Bytes>,
        source_offset: u64,
    ) -> Result<AppendReceipt, ProducerError> {
        let enc = self.settings.slice_layout.encode(dp, cp, slices)?;
        self.append_encoded(enc, source_offset).await
    }

    /// Like [`append`](Self::append) for an already encoded TGB.
    pub async fn append_encoded(
        &mut self,
        enc: EncodedTgb,
        source_offset: u64,
    ) -> Result<AppendReceipt, ProducerError> {
        self.check_alive()?;
        self.check_grid((enc.dp, enc.cp))?;
        self.take_permit().await?;
        // Single-worker mode: no upload while a commit attempt is in flight.
        let _worker = if self.settings.single_worker {
            Some(self.shared.worker.clone().lock_owned().await)
        } else {
            None
        };
        let sequence = self.next_sequence;
        let desc = tgb_descriptor(&enc, &self.me.id, self.me.epoch, sequence, source_offset);
        let key = desc.key.clone();
        let upload_start = self.store.clock().unix_millis();
        let put = if enc.object_size >= self.settings.multipart_threshold {
            self.store
                .put_multipart(&key, enc.parts.clone(), self.settings.multipart_part_size)
                .await
        } else {
            self.store
                .put_payload(&key, enc.parts.iter().cloned().collect())
                .await
        };
        if let Err(e) = put {
            // Nothing was appended: the permit is not the commit loop's to return.
            self.permits.add_permits(1);
            return Err(e.into());
        }
        if self.fail.fires(FailPoint::AfterTgbPut) {
            let e = self
                .shared
                .set_fatal(ProducerError::Crashed(FailPoint::AfterTgbPut));
            return Err(ProducerError::Stopped(e));
        }
        self.next_sequence += 1;
        self.shared.stats_mut(|s| {
            s.tgbs_appended += 1;
            s.bytes_uploaded += enc.object_size;
        });
        self.send(Msg::Tgb(desc, upload_start))?;
        Ok(AppendReceipt {
            sequence,
            key,
            object_size: enc.object_size,
        })
    }

    /// Refuses a TGB whose grid is not the stream's (fixing the stream's grid at the
    /// first TGB of a stream that has none yet).
    pub(crate) fn check_grid(&mut self, grid: (u32, u32)) -> Result<(), ProducerError> {
        match self.grid {
            Some(stream) if stream != grid => Err(ProducerError::Invalid(format!(
                "the stream's grid is DP={} x CP={}, this TGB's is DP={} x CP={}: every TGB \
                 of a stream has one grid (fixed by its first commit); fix the producer's \
                 dp/cp or write to another stream",
                stream.0, stream.1, grid.0, grid.1
            ))),
            Some(_) => Ok(()),
            None => {
                self.grid = Some(grid);
                Ok(())
            }
        }
    }

    /// Takes one of the `max_buffered` permits (waiting while that many TGBs are
    /// uploaded but not committed); the commit loop returns it once the TGB commits.
    pub(crate) async fn take_permit(&self) -> Result<(), ProducerError> {
        let permit = self.permits.acquire().await.map_err(|_| {
            self.shared.fatal().map_or(
                ProducerError::Invalid("producer closed".into()),
                ProducerError::Stopped,
            )
        })?;
        permit.forget();
        Ok(())
    }

    pub(crate) fn send(&self, m: Msg) -> Result<(), ProducerError> {
        let tx = self
            .tx
            .as_ref()
            .ok_or_else(|| ProducerError::Invalid("producer closed".into()))?;
        tx.send(m).map_err(|_| {
            self.shared.fatal().map_or(
                ProducerError::Invalid("commit loop ended".into()),
                ProducerError::Stopped,
            )
        })
    }

    /// Commits everything appended so far (bypassing the commit policy, but
    /// honouring `max_lag`) and returns once it is visible.
    ///
    /// Under a cooperative policy (`coop`) others' commits publish the flushed uploads
    /// as well: the flush waits for them, reading the chain every quarter round, as long
    /// as the chain advances (for at most 8 rounds), and commits itself at its own turn
    /// or when nobody has committed for two to four rounds. A pool that flushes together
    /// (the end of a job) so needs about one create, not one or more per producer.
    pub async fn flush(&self) -> Result<(), ProducerError> {
        self.check_alive()?;
        let (tx, rx) = oneshot::channel();
        self.send(Msg::Flush(tx))?;
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(self.shared.fatal().map_or(
                ProducerError::Invalid("commit loop ended".into()),
                ProducerError::Stopped,
            )),
        }
    }

    /// Flushes, stops the commit loop and returns the final statistics
    /// (the paper's finalization phase).
    pub async fn close(mut self) -> Result<ProducerStats, ProducerError> {
        self.flush().await?;
        self.tx.take();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        Ok(self.stats())
    }
}
