//! Sealed slots (format version 2): every slice in a slot of one stride, closed by a seal
//! that lets a rank check the slot it read without the footer.
//!
//! ```text
//! offset i*L                                                  (i+1)*L - 24      (i+1)*L
//! | payload of slice i (len_i bytes) | zero padding           | seal (24 bytes)  |
//!                                                              | magic "BWSL" (4) |
//!                                                              | slice id   (u32) |
//!                                                              | len_i      (u64) |
//!                                                              | CRC32 of payload |
//!                                                              | footer CRC32     |
//! ```
//!
//! The stride `L` is the same for every slot, so slice `i` lives at `i * L` whatever the
//! other slices' lengths: the manifest's descriptor says `L`, and one ranged GET of
//! `[i * L, (i + 1) * L)` returns the slice with everything needed to check it. The seal
//! binds the slot to its place (slice id) and to its TGB (the footer CRC32 the manifest
//! records, which the footer's own entries determine), and the payload to its CRC32. The
//! footer and trailer follow the slots exactly as in version 1, so a reader of the whole
//! object checks footer and seals against each other. Byte-level spec:
//! `docs/format-tgb.md`, section 7.

use bytes::{BufMut, Bytes, BytesMut};

use crate::TgbError;
use crate::layout::{
    EncodedTgb, FOOTER_MAGIC, SEALED_FORMAT_VERSION, TRAILER_LEN, Trailer, checked_slices,
    footer_len,
};

/// Length of the seal that closes every slot of a sealed TGB.
pub const SEAL_LEN: usize = 24;
/// First 4 bytes of every seal.
pub const SEAL_MAGIC: [u8; 4] = *b"BWSL";

const WHAT: &str = "TGB slice seal";

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

/// The slot stride a sealed TGB of these slices gets: the longest slice plus the seal.
pub fn sealed_stride(slices: &[Bytes]) -> Result<u64, TgbError> {
    let longest = slices.iter().map(|s| s.len() as u64).max().unwrap_or(0);
    longest
        .checked_add(SEAL_LEN as u64)
        .ok_or(TgbError::SizeOverflow)
}

/// Encodes a `dp x cp` TGB in the sealed layout (format version 2) from its slices, given
/// in slice-id order (`d * cp + c`).
///
/// Every slot is [`sealed_stride`] bytes: the slice, zero padding up to the longest slice,
/// and a [`SEAL_LEN`]-byte seal. The slices are not copied: each is a part of
/// [`EncodedTgb::parts`], followed by a part holding its padding and seal; the last part is
/// footer + trailer. Rejects what [`encode_tgb`](crate::encode_tgb) rejects.
///
/// ```
/// use batchweave_tgb::{encode_tgb_sealed, open_sealed_run};
/// use bytes::Bytes;
///
/// let tgb = encode_tgb_sealed(2, 1, vec![Bytes::from_static(b"hello"), Bytes::from_static(b"hi")])?;
/// assert_eq!(tgb.slice_stride, 5 + 24);
/// let object = tgb.to_bytes();
/// // A rank that knows the stride and the footer CRC32 (from the manifest) reads slice 1
/// // with one ranged GET and checks it without the footer.
/// let slot = object.slice(29..58);
/// let slices = open_sealed_run(&slot, 1, 1, tgb.slice_stride, tgb.footer_crc32)?;
/// assert_eq!(&slices[0][..], b"hi");
/// # Ok::<(), batchweave_tgb::TgbError>(())
/// ```
pub fn encode_tgb_sealed(dp: u32, cp: u32, slices: Vec<Bytes>) -> Result<EncodedTgb, TgbError> {
    let n = checked_slices(dp, cp)?;
    if slices.len() as u64 != u64::from(n) {
        return Err(TgbError::SliceCountMismatch {
            dp,
            cp,
            expected: u64::from(n),
            actual: slices.len() as u64,
        });
    }
    let stride = sealed_stride(&slices)?;
    let payload_bytes = stride
        .checked_mul(u64::from(n))
        .ok_or(TgbError::SizeOverflow)?;
    let flen = footer_len(n);
    let mut footer = BytesMut::with_capacity(flen as usize + TRAILER_LEN);
    footer.put_slice(&FOOTER_MAGIC);
    footer.put_u16_le(SEALED_FORMAT_VERSION);
    footer.put_u16_le(0);
    footer.put_u32_le(dp);
    footer.put_u32_le(cp);
    let mut crcs = Vec::with_capacity(slices.len());
    for (i, s) in slices.iter().enumerate() {
        let crc = crc32fast::hash(s);
        crcs.push(crc);
        // Cannot overflow: i * stride < payload_bytes, which fitted.
        footer.put_u64_le(i as u64 * stride);
        footer.put_u64_le(s.len() as u64);
        footer.put_u32_le(crc);
    }
    let footer_crc32 = crc32fast::hash(&footer);
    let footer_length = u32::try_from(footer.len()).map_err(|_| TgbError::SizeOverflow)?;
    footer.put_slice(
        &Trailer {
            footer_offset: payload_bytes,
            footer_length,
            footer_crc32,
            version: SEALED_FORMAT_VERSION,
        }
        .to_bytes(),
    );
    let object_size = payload_bytes
        .checked_add(footer.len() as u64)
        .ok_or(TgbError::SizeOverflow)?;
    let mut parts = Vec::with_capacity(2 * slices.len() + 1);
    for (i, (s, crc)) in slices.into_iter().zip(crcs).enumerate() {
        // stride - len >= SEAL_LEN for every slice, and the padding of the longest is 0.
        let pad = usize::try_from(stride - s.len() as u64).map_err(|_| TgbError::SizeOverflow)?;
        let mut tail = BytesMut::zeroed(pad);
        let seal = pad - SEAL_LEN;
        tail[seal..seal + 4].copy_from_slice(&SEAL_MAGIC);
        tail[seal + 4..seal + 8].copy_from_slice(&(i as u32).to_le_bytes());
        tail[seal + 8..seal + 16].copy_from_slice(&(s.len() as u64).to_le_bytes());
        tail[seal + 16..seal + 20].copy_from_slice(&crc.to_le_bytes());
        tail[seal + 20..seal + 24].copy_from_slice(&footer_crc32.to_le_bytes());
        parts.push(s);
        parts.push(tail.freeze());
    }
    parts.push(footer.freeze());
    Ok(EncodedTgb {
        parts,
        dp,
        cp,
        object_size,
        footer_offset: payload_bytes,
        footer_length,
        footer_crc32,
        payload_bytes,
        slice_stride: stride,
    })
}

/// How a producer lays out a TGB's slices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SliceLayout {
    /// Sealed when the padding to the longest slice costs at most 1/16 of the slices'
    /// bytes (equal slices always), packed otherwise.
    #[default]
    Auto,
    /// Format version 1: slices back to back; a rank reads the footer, then its slice.
    Packed,
    /// Format version 2: sealed slots of one stride; a rank reads its slot with one GET.
    Sealed,
}

impl SliceLayout {
    /// The layout's name: `auto`, `packed` or `sealed`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Packed => "packed",
            Self::Sealed => "sealed",
        }
    }

    /// Whether `slices` get sealed slots under this layout.
    pub fn seals(self, slices: &[Bytes]) -> bool {
        match self {
            Self::Packed => false,
            Self::Sealed => true,
            Self::Auto => {
                let total: u64 = slices.iter().map(|s| s.len() as u64).sum();
                let longest = slices.iter().map(|s| s.len() as u64).max().unwrap_or(0);
                let padding = (longest as u128) * (slices.len() as u128) - u128::from(total);
                padding * 16 <= u128::from(total)
            }
        }
    }

    /// Encodes a `dp x cp` TGB in this layout ([`encode_tgb_sealed`] or
    /// [`encode_tgb`](crate::encode_tgb)).
    pub fn encode(self, dp: u32, cp: u32, slices: Vec<Bytes>) -> Result<EncodedTgb, TgbError> {
        if self.seals(&slices) {
            encode_tgb_sealed(dp, cp, slices)
        } else {
            crate::encode_tgb(dp, cp, slices)
        }
    }
}

impl std::str::FromStr for SliceLayout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "packed" => Ok(Self::Packed),
            "sealed" => Ok(Self::Sealed),
            _ => Err(format!(
                "unknown slice layout {s:?}: use auto, packed or sealed"
            )),
        }
    }
}

/// What a seal says, once checked against where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Opened {
    pub(crate) length: u64,
    pub(crate) crc32: u32,
}

/// Checks one slot read as slice `slice` of the TGB whose footer CRC32 is `footer_crc32`,
/// in this order: the slot holds a seal; magic; slice id; footer CRC32; the length fits
/// before the seal; the padding is zero; the payload's CRC32. Any byte of the slot that
/// differs from what the writer sealed fails one of them. Never panics.
pub(crate) fn open_slot(slot: &[u8], slice: u32, footer_crc32: u32) -> Result<Opened, TgbError> {
    let room = slot.len().checked_sub(SEAL_LEN).ok_or(TgbError::Length {
        what: WHAT,
        expected: SEAL_LEN as u64,
        actual: slot.len() as u64,
    })?;
    let seal = &slot[room..];
    if seal[0..4] != SEAL_MAGIC {
        return Err(TgbError::BadMagic { what: WHAT });
    }
    let mismatch = |field, expected: u64, actual: u64| TgbError::SealMismatch {
        slice,
        field,
        expected,
        actual,
    };
    let id = le_u32(seal, 4);
    if id != slice {
        return Err(mismatch("slice id", slice.into(), id.into()));
    }
    let tgb = le_u32(seal, 20);
    if tgb != footer_crc32 {
        return Err(mismatch("footer CRC32", footer_crc32.into(), tgb.into()));
    }
    let length = le_u64(seal, 8);
    let len = match usize::try_from(length) {
        Ok(len) if len <= room => len,
        _ => return Err(mismatch("length", room as u64, length)),
    };
    if slot[len..room].iter().any(|&b| b != 0) {
        return Err(TgbError::ReservedNotZero {
            what: "TGB slot padding",
        });
    }
    let crc32 = le_u32(seal, 16);
    let actual = crc32fast::hash(&slot[..len]);
    if actual != crc32 {
        return Err(TgbError::SliceChecksum {
            slice,
            expected: crc32,
            actual,
        });
    }
    Ok(Opened { length, crc32 })
}

/// Opens `count >= 1` consecutive sealed slots read with one ranged GET of
/// `[first_slice * stride, (first_slice + count) * stride)` from the TGB whose footer CRC32
/// is `footer_crc32` (both from the manifest's descriptor), and returns their slices in
/// order. Checks the length of `bytes`, then every slot as described in the module docs
/// (slice id, footer CRC32, length, zero padding, payload CRC32). Zero-copy: the results
/// share `bytes`' buffer. Never panics.
pub fn open_sealed_run(
    bytes: &Bytes,
    first_slice: u32,
    count: u32,
    stride: u64,
    footer_crc32: u32,
) -> Result<Vec<Bytes>, TgbError> {
    if count == 0 || stride < SEAL_LEN as u64 {
        return Err(TgbError::LayoutMismatch {
            reason: "a sealed run needs count >= 1 and a stride of at least the seal",
            expected: SEAL_LEN as u64,
            actual: stride,
        });
    }
    let total = stride
        .checked_mul(u64::from(count))
        .ok_or(TgbError::SizeOverflow)?;
    if bytes.len() as u64 != total {
        return Err(TgbError::SliceLength {
            slice: first_slice,
            expected: total,
            actual: bytes.len() as u64,
        });
    }
    // bytes.len() == count * stride, so stride fits in usize.
    let stride = usize::try_from(stride).map_err(|_| TgbError::SizeOverflow)?;
    let mut out = Vec::with_capacity(count as usize);
    for (i, slot) in bytes.chunks_exact(stride).enumerate() {
        let id = first_slice
            .checked_add(i as u32)
            .ok_or(TgbError::Overflow { what: "slice id" })?;
        let opened = open_slot(slot, id, footer_crc32)?;
        let start = i * stride;
        // open_slot checked length <= stride - SEAL_LEN.
        out.push(bytes.slice(start..start + opened.length as usize));
    }
    Ok(out)
}

/// The slices of a run as one buffer: the only slice itself (zero-copy), or the slices
/// copied back to back.
pub fn join_slices(slices: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(slices) {
        Ok([only]) => only,
        Err(many) => {
            let len = many.iter().map(Bytes::len).sum();
            let mut out = BytesMut::with_capacity(len);
            for s in &many {
                out.put_slice(s);
            }
            out.freeze()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode_object, encode_tgb};

    fn slices() -> Vec<Bytes> {
        ["a", "", "longest slice", "mid"]
            .map(|s| Bytes::from(s.as_bytes().to_vec()))
            .to_vec()
    }

    #[test]
    fn every_slot_opens_to_its_slice() {
        let want = slices();
        let enc = encode_tgb_sealed(2, 2, want.clone()).unwrap();
        assert_eq!(enc.slice_stride, 13 + 24);
        assert_eq!(enc.payload_bytes, 4 * 37);
        let object = enc.to_bytes();
        assert_eq!(object.len() as u64, enc.object_size);
        let l = enc.slice_stride as usize;
        for (i, w) in want.iter().enumerate() {
            let slot = object.slice(i * l..(i + 1) * l);
            let got = open_sealed_run(&slot, i as u32, 1, enc.slice_stride, enc.footer_crc32);
            assert_eq!(got.unwrap(), vec![w.clone()]);
        }
        let run = object.slice(l..3 * l);
        let got = open_sealed_run(&run, 1, 2, enc.slice_stride, enc.footer_crc32).unwrap();
        assert_eq!(got, want[1..3].to_vec());
        assert_eq!(&join_slices(got)[..], b"longest slice");
        let index = decode_object(&object).unwrap();
        assert_eq!(index.slice_stride(), enc.slice_stride);
    }

    #[test]
    fn every_corrupt_byte_of_a_slot_is_caught() {
        let enc = encode_tgb_sealed(2, 2, slices()).unwrap();
        let object = enc.to_bytes();
        let l = enc.slice_stride as usize;
        for i in 0..4 {
            for at in 0..l {
                let mut slot = object[i * l..(i + 1) * l].to_vec();
                slot[at] ^= 0x40;
                let slot = Bytes::from(slot);
                let r = open_sealed_run(&slot, i as u32, 1, enc.slice_stride, enc.footer_crc32);
                assert!(r.is_err(), "slot {i} byte {at} flipped was accepted");
            }
        }
    }

    #[test]
    fn a_slot_read_at_the_wrong_place_or_from_another_tgb_is_refused() {
        let enc = encode_tgb_sealed(2, 2, slices()).unwrap();
        let object = enc.to_bytes();
        let l = enc.slice_stride as usize;
        let slot0 = object.slice(0..l);
        let e = open_sealed_run(&slot0, 1, 1, enc.slice_stride, enc.footer_crc32).unwrap_err();
        assert!(matches!(
            e,
            TgbError::SealMismatch {
                field: "slice id",
                ..
            }
        ));
        let other = encode_tgb_sealed(2, 2, vec![Bytes::from_static(b"b"); 4]).unwrap();
        let e = open_sealed_run(&slot0, 0, 1, l as u64, other.footer_crc32).unwrap_err();
        assert!(matches!(
            e,
            TgbError::SealMismatch {
                field: "footer CRC32",
                ..
            }
        ));
        // Wrong length, a stride below the seal, no slots.
        assert!(open_sealed_run(&slot0, 0, 2, l as u64, enc.footer_crc32).is_err());
        assert!(open_sealed_run(&object.slice(0..8), 0, 1, 8, enc.footer_crc32).is_err());
        assert!(open_sealed_run(&slot0, 0, 0, l as u64, enc.footer_crc32).is_err());
        // A packed TGB's bytes are no slot.
        let packed = encode_tgb(1, 1, vec![Bytes::from(vec![7u8; 40])]).unwrap();
        let bytes = packed.to_bytes().slice(0..40);
        assert!(open_sealed_run(&bytes, 0, 1, 40, packed.footer_crc32).is_err());
    }

    #[test]
    fn auto_seals_unless_padding_costs_more_than_a_sixteenth() {
        let b = |n: usize| Bytes::from(vec![1u8; n]);
        assert!(SliceLayout::Auto.seals(&[b(100), b(100)]));
        assert!(SliceLayout::Auto.seals(&[b(0)]));
        // 16 slices: one 6 bytes short pads 6 of 1594 bytes.
        let mut v = vec![b(100); 15];
        v.push(b(94));
        assert!(SliceLayout::Auto.seals(&v));
        assert!(!SliceLayout::Auto.seals(&[b(100), b(50)]));
        assert!(!SliceLayout::Packed.seals(&[b(100), b(100)]));
        assert!(SliceLayout::Sealed.seals(&[b(100), b(1)]));
        assert_eq!(
            SliceLayout::Auto
                .encode(2, 1, vec![b(3), b(3)])
                .unwrap()
                .slice_stride,
            27
        );
        assert_eq!(
            SliceLayout::Auto
                .encode(2, 1, vec![b(3), b(1)])
                .unwrap()
                .slice_stride,
            0
        );
        for l in [SliceLayout::Auto, SliceLayout::Packed, SliceLayout::Sealed] {
            assert_eq!(l.name().parse::<SliceLayout>(), Ok(l));
        }
        assert!(
            "dense"
                .parse::<SliceLayout>()
                .unwrap_err()
                .contains("auto, packed or sealed")
        );
    }

    #[test]
    fn rejects_what_the_packed_encoder_rejects() {
        assert!(encode_tgb_sealed(0, 1, vec![]).is_err());
        assert!(encode_tgb_sealed(2, 1, vec![Bytes::new()]).is_err());
        let e = encode_tgb_sealed(1, 1, vec![Bytes::new()]).unwrap();
        assert_eq!(e.slice_stride, SEAL_LEN as u64);
    }
}
