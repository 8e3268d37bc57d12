//! TGBs streamed into a multipart upload: [`Producer::stream_tgb`] and [`TgbWriter`].

use batchweave_store::StreamingUpload;
use batchweave_tgb::TgbStreamEncoder;
use bytes::Bytes;

use crate::ProducerError;
use crate::committer::Msg;
use crate::descriptor::streamed_tgb_descriptor;
use crate::producer::{AppendReceipt, Producer};
use crate::settings::FailPoint;

impl Producer {
    /// Starts a `dp` x `cp` TGB whose slices the caller streams in
    /// ([`TgbWriter`]), for a global batch larger than memory (a video episode of many
    /// GB). Its bytes go into a multipart upload as they arrive, so the TGB itself
    /// holds at most `(stream_parts_in_flight + 1) * multipart_part_size` bytes
    /// ([`ProducerSettings`](crate::ProducerSettings)); the footer is written last
    /// from the slices' lengths and CRCs.
    ///
    /// The TGB is the producer's next one: [`TgbWriter::finish`] hands it to the
    /// commit loop as [`append`](Self::append) does, and until then no other TGB can be
    /// appended (the writer borrows the producer). A writer dropped or
    /// [`aborted`](TgbWriter::abort) before it finishes leaves nothing visible and
    /// consumes no sequence number. A failed part is not retried by the producer (its
    /// bytes are gone; the store client retries each request itself): the write
    /// returns the error, the upload is aborted, and the application writes the TGB
    /// again from its source.
    ///
    /// The object's key is the plain [`tgb_key`](batchweave_manifest::tgb_key) (form 1),
    /// since the self-describing key of [`append`](Self::append) names the footer's CRC,
    /// known only at the end; so a cooperative commit of another producer does not
    /// publish a streamed TGB, this producer's own commit does.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use batchweave_producer::Producer;
    /// use batchweave_store::StreamStore;
    /// use bytes::Bytes;
    ///
    /// let store = StreamStore::open("memory:///").await?;
    /// let mut p = Producer::builder(store, "video-0").open().await?;
    /// let mut tgb = p.stream_tgb(2, 1).await?;
    /// for slice in 0..2 {
    ///     for chunk in 0..3 {
    ///         tgb.write(Bytes::from(format!("slice {slice} chunk {chunk};"))).await?;
    ///     }
    ///     tgb.end_slice()?;
    /// }
    /// let receipt = tgb.finish(1).await?;
    /// assert_eq!(receipt.sequence, 1);
    /// assert_eq!(p.close().await?.tgbs_committed, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(()) }).unwrap();
    /// ```
    pub async fn stream_tgb(&mut self, dp: u32, cp: u32) -> Result<TgbWriter<'_>, ProducerError> {
        self.check_alive()?;
        let enc = TgbStreamEncoder::new(dp, cp)?;
        self.check_grid((dp, cp))?;
        self.take_permit().await?;
        let mut w = TgbWriter {
            sequence: self.next_sequence,
            upload_start: self.store.clock().unix_millis(),
            producer: self,
            enc,
            upload: None,
            worker: None,
            permit: true,
        };
        // Single-worker mode: no upload while a commit attempt is in flight.
        if w.producer.settings.single_worker {
            w.worker = Some(w.producer.shared.worker.clone().lock_owned().await);
        }
        let key = batchweave_manifest::tgb_key(&w.producer.me.id, w.producer.me.epoch, w.sequence);
        let s = &w.producer.settings;
        let upload = w
            .producer
            .store
            .streaming_upload(&key, s.multipart_part_size, s.stream_parts_in_flight)
            .await?;
        w.upload = Some(upload);
        Ok(w)
    }
}

/// One TGB being streamed into the store ([`Producer::stream_tgb`]): feed its slices in
/// slice-id order (`d * cp + c`) with [`write`](Self::write) and
/// [`end_slice`](Self::end_slice), then [`finish`](Self::finish).
#[must_use = "a TGB writer that is not finished uploads nothing"]
pub struct TgbWriter<'p> {
    producer: &'p mut Producer,
    enc: TgbStreamEncoder,
    /// `None` once a part failed (the upload was aborted) or the TGB finished.
    upload: Option<StreamingUpload>,
    sequence: u64,
    upload_start: u64,
    worker: Option<tokio::sync::OwnedMutexGuard<()>>,
    /// The buffer permit taken at the start, until the commit loop owns the TGB.
    permit: bool,
}

impl std::fmt::Debug for TgbWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TgbWriter")
            .field("sequence", &self.sequence)
            .field("slices_closed", &self.enc.slices_closed())
            .field("slices_needed", &self.enc.slices_needed())
            .field("bytes_written", &self.enc.bytes_written())
            .finish()
    }
}

impl TgbWriter<'_> {
    fn upload(&mut self) -> Result<&mut StreamingUpload, ProducerError> {
        self.upload.as_mut().ok_or_else(|| {
            ProducerError::Invalid(
                "this TGB's upload failed and was aborted: start the TGB again with stream_tgb"
                    .into(),
            )
        })
    }

    /// Appends `data` to the current slice (a slice may take any number of writes).
    /// Waits while the upload has its parts in flight. An error from the store
    /// aborts the upload (the writer is then dead; start the TGB again); writing
    /// beyond the grid's last slice is refused without harm.
    pub async fn write(&mut self, data: Bytes) -> Result<(), ProducerError> {
        self.upload()?;
        self.enc.write(&data)?;
        let upload = self.upload()?;
        if let Err(e) = upload.write(data).await {
            if let Some(u) = self.upload.take() {
                let _ = u.abort().await;
            }
            return Err(e.into());
        }
        Ok(())
    }

    /// Closes the current slice. An error beyond the grid's last slice.
    pub fn end_slice(&mut self) -> Result<(), ProducerError> {
        self.upload()?;
        Ok(self.enc.end_slice()?)
    }

    /// A whole slice: [`write`](Self::write) then [`end_slice`](Self::end_slice).
    pub async fn write_slice(&mut self, data: Bytes) -> Result<(), ProducerError> {
        self.write(data).await?;
        self.end_slice()
    }

    /// Payload bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.enc.bytes_written()
    }

    /// The sequence number this TGB gets.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// Writes the footer and trailer, completes the upload (the object now exists,
    /// whole, not yet visible) and hands the TGB to the commit loop, like
    /// [`Producer::append`]; `source_offset` is the application's source position after
    /// it. All `dp * cp` slices must be closed; otherwise, or if the store fails, the
    /// upload is aborted and nothing is appended.
    pub async fn finish(mut self, source_offset: u64) -> Result<AppendReceipt, ProducerError> {
        self.upload()?;
        let enc = std::mem::replace(&mut self.enc, TgbStreamEncoder::new(1, 1)?);
        let tail = match enc.finish() {
            Ok(t) => t,
            Err(e) => {
                if let Some(u) = self.upload.take() {
                    let _ = u.abort().await;
                }
                return Err(e.into());
            }
        };
        let Some(mut upload) = self.upload.take() else {
            return Err(ProducerError::Invalid("no upload".into()));
        };
        let done = match upload.write(tail.bytes.clone()).await {
            Ok(()) => upload.finish().await,
            Err(e) => {
                let _ = upload.abort().await;
                Err(e)
            }
        };
        let object_size = done?;
        debug_assert_eq!(object_size, tail.object_size);
        let p = &mut *self.producer;
        if p.fail.fires(FailPoint::AfterTgbPut) {
            let e = p
                .shared
                .set_fatal(ProducerError::Crashed(FailPoint::AfterTgbPut));
            return Err(ProducerError::Stopped(e));
        }
        let desc =
            streamed_tgb_descriptor(&tail, &p.me.id, p.me.epoch, self.sequence, source_offset);
        let key = desc.key.clone();
        p.next_sequence += 1;
        p.shared.stats_mut(|s| {
            s.tgbs_appended += 1;
            s.bytes_uploaded += tail.object_size;
        });
        p.send(Msg::Tgb(desc, self.upload_start))?;
        self.permit = false;
        Ok(AppendReceipt {
            sequence: self.sequence,
            key,
            object_size: tail.object_size,
        })
    }

    /// Abandons the TGB: aborts the upload at the store. Nothing is appended.
    pub async fn abort(mut self) -> Result<(), ProducerError> {
        match self.upload.take() {
            Some(u) => Ok(u.abort().await?),
            None => Ok(()),
        }
    }
}

impl Drop for TgbWriter<'_> {
    fn drop(&mut self) {
        if self.permit {
            self.producer.permits.add_permits(1);
        }
        if let Some(u) = self.upload.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            // Best effort: the bucket's lifecycle rule reclaims what this misses.
            rt.spawn(async move {
                let _ = u.abort().await;
            });
        }
    }
}
