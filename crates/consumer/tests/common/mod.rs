//! Test helper: writes streams without the producer crate, simulating several producers
//! (TGB objects with `encode_tgb`, versions with `rebase` + conditional create), with a
//! deterministic payload per (producer, sequence, slice).

#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use batchweave_consumer::{Batch, Consumer, ConsumerBuilder, ConsumerSettings, RankConfig};
use batchweave_manifest::{
    DecodeLimits, Manifest, Pending, TgbDescriptor, decode_manifest, encode_manifest, manifest_key,
    rebase, tgb_key,
};
use batchweave_store::StreamStore;
use batchweave_store::testing::TestTarget;
use batchweave_tgb::{MeshConfig, SliceRead, cut_part, encode_tgb, encode_tgb_sealed};
use bytes::{Bytes, BytesMut};

/// FNV-1a over a few words.
fn mix(words: &[u64]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for b in w.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

pub fn id_word(producer: &str) -> u64 {
    producer
        .bytes()
        .fold(0u64, |a, b| a.wrapping_mul(131).wrapping_add(u64::from(b)))
}

/// The deterministic bytes of slice `slice` of `producer`'s TGB `seq`: a header naming
/// them, then a pseudo-random tail; lengths vary between 48 and `48 + spread` bytes.
pub fn payload_sized(producer: &str, seq: u64, slice: u32, spread: u64) -> Bytes {
    let h = mix(&[id_word(producer), seq, u64::from(slice)]);
    let len = 48 + (h % spread.max(1)) as usize;
    let mut out = BytesMut::with_capacity(len);
    out.extend_from_slice(format!("{producer}/{seq}/{slice}|").as_bytes());
    let mut x = h;
    while out.len() < len {
        x = mix(&[x]);
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out.freeze()
}

/// [`payload_sized`] with the default spread of 64 bytes.
pub fn payload(producer: &str, seq: u64, slice: u32) -> Bytes {
    payload_sized(producer, seq, slice, 64)
}

/// A stream being written by simulated producers on `store`, grid `dp x cp`.
#[derive(Clone, Debug)]
pub struct Sim {
    pub store: StreamStore,
    pub dp: u32,
    pub cp: u32,
    /// Payload length spread (bigger = bigger slices).
    pub spread: u64,
    /// Write sealed TGBs (format version 2) instead of packed ones.
    pub sealed: bool,
}

impl Sim {
    pub fn new(store: StreamStore, dp: u32, cp: u32) -> Self {
        Self {
            store,
            dp,
            cp,
            spread: 64,
            sealed: false,
        }
    }

    /// Writes `producer`'s TGB `seq` (epoch 1) and returns its descriptor.
    pub async fn write_tgb(&self, producer: &str, seq: u64) -> TgbDescriptor {
        self.write_tgb_grid(producer, seq, self.dp, self.cp).await
    }

    /// Like [`write_tgb`](Self::write_tgb) with an explicit grid.
    pub async fn write_tgb_grid(
        &self,
        producer: &str,
        seq: u64,
        dp: u32,
        cp: u32,
    ) -> TgbDescriptor {
        let slices = (0..dp * cp)
            .map(|s| payload_sized(producer, seq, s, self.spread))
            .collect();
        let tgb = if self.sealed {
            encode_tgb_sealed(dp, cp, slices).unwrap()
        } else {
            encode_tgb(dp, cp, slices).unwrap()
        };
        let key = tgb_key(producer, 1, seq);
        self.store.put(&key, tgb.to_bytes()).await.unwrap();
        TgbDescriptor {
            key,
            object_size: tgb.object_size,
            dp,
            cp,
            footer_offset: tgb.footer_offset,
            footer_length: tgb.footer_length,
            footer_crc32: tgb.footer_crc32,
            producer_id: producer.into(),
            epoch: 1,
            sequence: seq,
            payload_bytes: tgb.payload_bytes,
            source_offset: seq,
            slice_stride: tgb.slice_stride,
            ..Default::default()
        }
    }

    /// Reads version `v` if it exists.
    pub async fn read_version(&self, v: u64) -> Option<Manifest> {
        let bytes = self
            .store
            .get_opt(&manifest_key(v), 1 << 30)
            .await
            .unwrap()?;
        Some(decode_manifest(&bytes, &DecodeLimits::default()).unwrap())
    }

    /// The newest version, probing forward from `from`.
    pub async fn newest_from(&self, mut from: Manifest) -> Manifest {
        while let Some(m) = self.read_version(from.version + 1).await {
            from = m;
        }
        from
    }

    /// Commits `tgbs` of `producer` (epoch 1, incarnation derived from the id) on the
    /// newest version, rebasing on conflict. `trim` is passed to `rebase`. Returns the
    /// committed version.
    pub async fn commit_trim(
        &self,
        producer: &str,
        tgbs: Vec<TgbDescriptor>,
        trim: u64,
    ) -> Manifest {
        let source_offset = tgbs.last().map_or(0, |t| t.source_offset);
        let pending = Pending {
            producer_id: producer.into(),
            epoch: 1,
            incarnation: id_word(producer) | 1,
            tgbs,
            source_offset,
            now_ms: 1_700_000_000_000,
        };
        let mut base = self.newest_from(Manifest::genesis()).await;
        loop {
            let cand = rebase(&base, &pending, trim).unwrap();
            match self
                .store
                .create(&manifest_key(cand.version), encode_manifest(&cand))
                .await
            {
                Ok(()) => return cand,
                Err(e) if e.is_conflict() => base = self.newest_from(base).await,
                Err(e) => panic!("commit failed: {e}"),
            }
        }
    }

    /// [`commit_trim`](Self::commit_trim) without trimming.
    pub async fn commit(&self, producer: &str, tgbs: Vec<TgbDescriptor>) -> Manifest {
        self.commit_trim(producer, tgbs, 0).await
    }

    /// One producer writes TGBs `first_seq ..` in versions of `per_version` TGBs each,
    /// `count` TGBs in all.
    pub async fn produce(&self, producer: &str, first_seq: u64, count: u64, per_version: u64) {
        let mut seq = first_seq;
        while seq < first_seq + count {
            let n = per_version.min(first_seq + count - seq);
            let mut tgbs = Vec::new();
            for s in seq..seq + n {
                tgbs.push(self.write_tgb(producer, s).await);
            }
            self.commit(producer, tgbs).await;
            seq += n;
        }
    }

    /// The newest version of the stream.
    pub async fn head(&self) -> Manifest {
        self.newest_from(Manifest::genesis()).await
    }
}

/// The bytes a rank must receive for `read` of the TGB `desc`.
pub fn expected(sim: &Sim, desc: &TgbDescriptor, read: &SliceRead) -> Bytes {
    let mut out = BytesMut::new();
    for s in read.first_slice..read.first_slice + read.slice_count {
        out.extend_from_slice(&payload_sized(
            &desc.producer_id,
            desc.sequence,
            s,
            sim.spread,
        ));
    }
    let whole = out.freeze();
    match read.part {
        None => whole,
        Some((i, m)) => cut_part(&whole, i, m, 1).unwrap(),
    }
}

/// Checks every read of `batch` against the final manifest `m`: the source key is the TGB at
/// that step and the bytes are exactly the planned slice(s).
pub fn check_batch(sim: &Sim, m: &Manifest, batch: &Batch) {
    assert_eq!(batch.data.len(), batch.sources.len());
    for (data, src) in batch.data.iter().zip(&batch.sources) {
        let desc = batchweave_manifest::find_step(m, src.tgb_step)
            .unwrap_or_else(|| panic!("step {} not in the final manifest", src.tgb_step));
        assert_eq!(src.key, desc.key, "consumer step {}", batch.step);
        assert_eq!(src.producer_id, desc.producer_id);
        assert_eq!(src.sequence, desc.sequence);
        assert_eq!(src.visible_version, desc.visible_version);
        let read = SliceRead {
            tgb_index: src.tgb_step,
            first_slice: src.first_slice,
            slice_count: src.slice_count,
            part: src.part,
        };
        assert!(
            *data == expected(sim, desc, &read),
            "consumer step {}: bytes of {} slices {}+{} part {:?} differ",
            batch.step,
            src.key,
            src.first_slice,
            src.slice_count,
            src.part
        );
    }
}

/// Rank `rank` of a mesh of `degrees` (`[dp, cp, tp, pp]`, world size their product).
pub fn config(rank: u32, degrees: [u32; 4], group: &str) -> RankConfig {
    let [dp, cp, tp, pp] = degrees;
    RankConfig::new(
        rank,
        MeshConfig::new(dp * cp * tp * pp, dp, cp, tp, pp),
        group,
    )
}

/// Consumer settings for tests: fast polling.
pub fn fast() -> ConsumerSettings {
    ConsumerSettings {
        poll_min: Duration::from_millis(1),
        poll_max: Duration::from_millis(20),
        ..ConsumerSettings::default()
    }
}

/// A consumer builder for `rank` with the [`fast`] settings.
pub fn builder(store: StreamStore, rank: RankConfig) -> ConsumerBuilder {
    Consumer::builder(store, rank).settings(fast())
}

/// Fresh stores on every target (memory, local, configured servers). Keep the targets
/// alive while using the stores: the local target's directory is removed on drop.
pub async fn fresh_stores(tag: &str) -> Vec<(TestTarget, StreamStore)> {
    let mut out = Vec::new();
    for t in batchweave_store::testing::all_targets() {
        let s = t
            .open_fresh(tag)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        out.push((t, s));
    }
    out
}

/// A short digest of bytes for logs and comparisons.
pub fn digest(b: &[u8]) -> u64 {
    b.chunks(8).fold(0xdead_beef, |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        mix(&[h, u64::from_le_bytes(w)])
    })
}
