//! TGB reads: footer cache, one ranged GET per slice run, CRC checks, dense baseline.
//!
//! ```text
//!  descriptor (from the manifest)      footer cache (per TGB step)
//!  key, object_size, footer_offset ──> GET [F, F+len) once ──> SliceIndex
//!  footer_length, footer_crc32                                    │ range_of(first, count)
//!                                                                 v
//!                              GET [offset_first, end_last) ──> split_run: CRC per slice
//!                                                                 │ part? cut_part
//!                                                                 v
//!                                                           bytes for the rank
//! ```
//!
//! A sealed TGB (format version 2, `slice_stride = L` in its descriptor) skips the footer:
//! one `GET [first * L, (first + count) * L)` returns the slots, and `open_sealed_run`
//! checks each seal (slice id, the descriptor's footer CRC32, zero padding) and payload
//! CRC32 against the descriptor alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use batchweave_manifest::TgbDescriptor;
use batchweave_store::StreamStore;
use batchweave_tgb::{
    FooterCheck, Grid, SliceIndex, SliceRead, TgbError, cut_part, decode_footer, decode_object,
    join_slices, open_sealed_run,
};
use bytes::Bytes;
use tokio::sync::OnceCell;

use crate::stats::{Live, add};
use crate::{ConsumerError, ReadMode};

/// Where one piece of a batch came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BatchSource {
    /// Global TGB step (position in the stream's TGB list).
    pub tgb_step: u64,
    /// TGB object key.
    pub key: String,
    /// Producer that wrote the TGB.
    pub producer_id: String,
    /// The producer's sequence number of the TGB.
    pub sequence: u64,
    /// Manifest version in which the TGB became visible.
    pub visible_version: u64,
    /// First slice id read.
    pub first_slice: u32,
    /// Number of contiguous slices read.
    pub slice_count: u32,
    /// `Some((index, parts))` when only a part of the slice is delivered (CP split).
    pub part: Option<(u32, u32)>,
}

/// One planned read: the descriptor of its TGB and what to read from it.
#[derive(Debug, Clone)]
pub(crate) struct PlannedRead {
    pub(crate) desc: TgbDescriptor,
    pub(crate) read: SliceRead,
}

type FooterCell = Arc<OnceCell<Arc<SliceIndex>>>;

/// A cached footer: the key of the TGB it belongs to and its index, once read.
type FooterEntry = (String, FooterCell);

/// Shared by the consumer and its prefetch tasks; cloning is cheap.
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    pub(crate) store: StreamStore,
    pub(crate) mode: ReadMode,
    pub(crate) token_bytes: u32,
    pub(crate) grid: Grid,
    pub(crate) live: Arc<Live>,
    footers: Arc<Mutex<HashMap<u64, FooterEntry>>>,
    /// Planted bug (tests only): sealed slots are delivered unchecked.
    trust_seals: bool,
}

fn data_err(key: &str, what: &str, e: TgbError) -> ConsumerError {
    ConsumerError::data(key, format!("{what}: {e}"))
}

impl Reader {
    pub(crate) fn new(
        store: StreamStore,
        mode: ReadMode,
        token_bytes: u32,
        grid: Grid,
        live: Arc<Live>,
    ) -> Self {
        Self {
            store,
            mode,
            token_bytes,
            grid,
            live,
            footers: Arc::default(),
            trust_seals: crate::planted::planted().trust_seals,
        }
    }

    /// Drops cached footers of TGB steps below `step`.
    pub(crate) fn evict_below(&self, step: u64) {
        if let Ok(mut m) = self.footers.lock() {
            m.retain(|&s, _| s >= step);
        }
    }

    /// Number of cached footers.
    pub(crate) fn cached_footers(&self) -> usize {
        self.footers.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Reads every planned read of one step, in order.
    pub(crate) async fn fetch_step(
        &self,
        reads: &[PlannedRead],
    ) -> Result<(Vec<Bytes>, Vec<BatchSource>), ConsumerError> {
        let mut data = Vec::with_capacity(reads.len());
        let mut sources = Vec::with_capacity(reads.len());
        for r in reads {
            data.push(self.fetch_one(r).await?);
            sources.push(BatchSource {
                tgb_step: r.read.tgb_index,
                key: r.desc.key.clone(),
                producer_id: r.desc.producer_id.clone(),
                sequence: r.desc.sequence,
                visible_version: r.desc.visible_version,
                first_slice: r.read.first_slice,
                slice_count: r.read.slice_count,
                part: r.read.part,
            });
        }
        Ok((data, sources))
    }

    /// Reads and checks the footer of `r`'s TGB into the cache ahead of its step (range
    /// reads of packed TGBs only: a sealed TGB's slot is read without its footer); the
    /// step's own fetch repeats a failed read and reports its error.
    pub(crate) async fn warm_footer(&self, r: &PlannedRead) -> Result<(), ConsumerError> {
        if self.mode == ReadMode::Range && r.desc.slice_stride == 0 {
            self.check_descriptor_grid(r)?;
            self.footer(r.read.tgb_index, &r.desc).await?;
        }
        Ok(())
    }

    fn check_descriptor_grid(&self, r: &PlannedRead) -> Result<(), ConsumerError> {
        let d = &r.desc;
        if (d.dp, d.cp) != (self.grid.dp, self.grid.cp) {
            return Err(ConsumerError::data(
                &d.key,
                format!(
                    "TGB at step {} has grid D={} x C={}, but the stream's grid is D={} x C={} \
                     (all TGBs of a stream must share one grid)",
                    r.read.tgb_index, d.dp, d.cp, self.grid.dp, self.grid.cp
                ),
            ));
        }
        Ok(())
    }

    async fn fetch_one(&self, r: &PlannedRead) -> Result<Bytes, ConsumerError> {
        let d = &r.desc;
        self.check_descriptor_grid(r)?;
        let (first, count) = (r.read.first_slice, r.read.slice_count);
        let what = || {
            format!(
                "slices {first}..{} of TGB step {}",
                first.saturating_add(count),
                r.read.tgb_index
            )
        };
        // The slices read, checked; and, for a packed run, the run itself (the slices
        // back to back, so no copy is needed to deliver them together).
        let (slices, packed_run) = match self.mode {
            ReadMode::Range if d.slice_stride != 0 => {
                // A sealed TGB: the slots hold everything needed to check them, and their
                // place follows from the stride (the manifest checked that `dp * cp`
                // slots of it fill the object up to the footer).
                let range = sealed_range(d, first, count)?;
                let run = self.store.get_range(&d.key, range).await?;
                add(&self.live.slice_bytes, run.len() as u64);
                let slices = if self.trust_seals {
                    unchecked_slots(&run, d.slice_stride)
                } else {
                    open_sealed_run(&run, first, count, d.slice_stride, d.footer_crc32)
                        .map_err(|e| data_err(&d.key, &what(), e))?
                };
                (slices, None)
            }
            ReadMode::Range => {
                let index = self.footer(r.read.tgb_index, d).await?;
                let range = index
                    .range_of(first, count)
                    .map_err(|e| data_err(&d.key, "slice run", e))?;
                let run = self.store.get_range(&d.key, range).await?;
                add(&self.live.slice_bytes, run.len() as u64);
                let slices = index
                    .split_run(first, count, &run)
                    .map_err(|e| data_err(&d.key, &what(), e))?;
                (slices, Some(run))
            }
            ReadMode::Dense => {
                let object = self.store.get(&d.key, d.object_size).await?;
                add(&self.live.slice_bytes, object.len() as u64);
                if object.len() as u64 != d.object_size {
                    return Err(ConsumerError::data(
                        &d.key,
                        format!(
                            "object is {} bytes, the manifest says {}",
                            object.len(),
                            d.object_size
                        ),
                    ));
                }
                let index = decode_object(&object).map_err(|e| data_err(&d.key, "object", e))?;
                check_grid(&index, d)?;
                let range = index
                    .range_of(first, count)
                    .map_err(|e| data_err(&d.key, "slice run", e))?;
                // decode_object checked every entry lies inside the payload.
                let run = object.slice(
                    usize::try_from(range.start)
                        .unwrap_or(usize::MAX)
                        .min(object.len())
                        ..usize::try_from(range.end)
                            .unwrap_or(usize::MAX)
                            .min(object.len()),
                );
                let slices = index
                    .split_run(first, count, &run)
                    .map_err(|e| data_err(&d.key, &what(), e))?;
                (slices, Some(run))
            }
        };
        match r.read.part {
            // A packed run is exactly its slices, back to back (split_run checked it).
            None if d.slice_stride == 0 => Ok(packed_run.unwrap_or_else(|| join_slices(slices))),
            None => Ok(join_slices(slices)),
            Some((i, m)) => {
                let slice = slices.first().cloned().unwrap_or_default();
                cut_part(&slice, i, m, self.token_bytes)
                    .map_err(|e| data_err(&d.key, &format!("part {i} of {m} of slice {first}"), e))
            }
        }
    }

    /// The footer of the TGB at `step`, from the cache or with one ranged GET. A cached
    /// footer serves only the TGB key it was read from.
    async fn footer(&self, step: u64, d: &TgbDescriptor) -> Result<Arc<SliceIndex>, ConsumerError> {
        let cell = {
            let mut m = self.footers.lock().map_err(|_| ConsumerError::Internal {
                message: "footer cache lock poisoned".into(),
            })?;
            match m.get(&step) {
                Some((key, cell)) if *key == d.key => cell.clone(),
                _ => {
                    let cell = FooterCell::default();
                    m.insert(step, (d.key.clone(), cell.clone()));
                    cell
                }
            }
        };
        if let Some(idx) = cell.get() {
            add(&self.live.footer_cache_hits, 1);
            return Ok(idx.clone());
        }
        let idx = cell
            .get_or_try_init(|| async {
                let end = d
                    .footer_offset
                    .checked_add(u64::from(d.footer_length))
                    .ok_or_else(|| ConsumerError::data(&d.key, "footer range overflows"))?;
                let bytes = self.store.get_range(&d.key, d.footer_offset..end).await?;
                add(&self.live.footers_read, 1);
                add(&self.live.footer_bytes, bytes.len() as u64);
                let check = FooterCheck::new(d.footer_offset, d.footer_crc32)
                    .with_object_size(d.object_size);
                let index =
                    decode_footer(&bytes, check).map_err(|e| data_err(&d.key, "footer", e))?;
                check_grid(&index, d)?;
                Ok::<_, ConsumerError>(Arc::new(index))
            })
            .await?;
        Ok(idx.clone())
    }
}

/// The planted bug `trust_seals`: each slot's first `length` bytes, as its seal says,
/// unchecked (clamped to the slot so that the plant itself cannot panic).
fn unchecked_slots(run: &Bytes, stride: u64) -> Vec<Bytes> {
    let stride = usize::try_from(stride).unwrap_or(usize::MAX).max(24);
    (0..run.len() / stride)
        .map(|i| {
            let slot = run.slice(i * stride..(i + 1) * stride);
            let mut len = [0u8; 8];
            len.copy_from_slice(&slot[stride - 16..stride - 8]);
            let len = usize::try_from(u64::from_le_bytes(len)).unwrap_or(0);
            slot.slice(..len.min(stride - 24))
        })
        .collect()
}

/// The slots `first .. first + count` of a sealed TGB: `[first * L, (first + count) * L)`
/// for the descriptor's stride `L`, inside the payload.
fn sealed_range(
    d: &TgbDescriptor,
    first: u32,
    count: u32,
) -> Result<std::ops::Range<u64>, ConsumerError> {
    let start = u64::from(first).checked_mul(d.slice_stride);
    let end = first
        .checked_add(count)
        .and_then(|e| u64::from(e).checked_mul(d.slice_stride));
    match (start, end) {
        (Some(s), Some(e)) if count >= 1 && e <= d.footer_offset => Ok(s..e),
        _ => Err(ConsumerError::data(
            &d.key,
            format!(
                "slots {first}..{first}+{count} of stride {} lie outside the {} bytes before \
                 the footer",
                d.slice_stride, d.footer_offset
            ),
        )),
    }
}

fn check_grid(index: &SliceIndex, d: &TgbDescriptor) -> Result<(), ConsumerError> {
    if index.slice_stride() != d.slice_stride {
        return Err(ConsumerError::data(
            &d.key,
            format!(
                "the object's slot stride is {} (0 = packed), the manifest says {}",
                index.slice_stride(),
                d.slice_stride
            ),
        ));
    }
    if (index.dp(), index.cp()) != (d.dp, d.cp) {
        return Err(ConsumerError::data(
            &d.key,
            format!(
                "footer grid D={} x C={} differs from the manifest's D={} x C={}",
                index.dp(),
                index.cp(),
                d.dp,
                d.cp
            ),
        ));
    }
    Ok(())
}
