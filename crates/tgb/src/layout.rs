//! Byte layout of a TGB object: constants, the trailer, and the encoder.
//!
//! ```text
//! offset 0                                   footer_offset          object_size - 32
//! | slice 0 | slice 1 | ... | slice D*C-1 | footer              | trailer (32 bytes) |
//!                                         | header (20 bytes)   |
//!                                         | D*C entries (20 B)  |
//! ```
//!
//! Slice id of `(d, c)` is `d * C + c`; slices are stored back to back in id order, so the
//! `C` chunks of one DP replica form one contiguous byte range. All integers are
//! little-endian. The full field-by-field description is `docs/format-tgb.md`.

use bytes::{BufMut, Bytes, BytesMut};

use crate::TgbError;

/// Format version of a TGB whose slices are packed back to back ([`encode_tgb`], and every
/// streamed TGB).
pub const FORMAT_VERSION: u16 = 1;
/// Format version of a TGB whose slices sit in sealed slots of one stride
/// ([`encode_tgb_sealed`](crate::encode_tgb_sealed)): a rank reads its slot with one GET
/// and checks it without the footer.
pub const SEALED_FORMAT_VERSION: u16 = 2;
/// First 8 bytes of every footer.
pub const FOOTER_MAGIC: [u8; 8] = *b"BWTGBFTR";
/// Last 8 bytes of every TGB object of format version 1.
pub const TRAILER_MAGIC: [u8; 8] = *b"BWTGB\0v1";
/// Last 8 bytes of every TGB object of format version 2 (sealed).
pub const SEALED_TRAILER_MAGIC: [u8; 8] = *b"BWTGB\0v2";
/// Length of the footer header: magic (8), version (2), reserved (2), D (4), C (4).
pub const FOOTER_HEADER_LEN: usize = 20;
/// Length of one footer entry: offset (8), length (8), crc32 (4).
pub const FOOTER_ENTRY_LEN: usize = 20;
/// Length of the trailer at the end of every TGB object.
pub const TRAILER_LEN: usize = 32;
/// Largest number of slices (`D * C`) a TGB may have. Bounds the footer at about 1.3 MB.
pub const MAX_SLICES: u32 = 65_536;

/// Footer length in bytes for a grid of `slices` slices: `20 + 20 * slices`.
pub const fn footer_len(slices: u32) -> u64 {
    FOOTER_HEADER_LEN as u64 + FOOTER_ENTRY_LEN as u64 * slices as u64
}

/// Number of slices of a `dp x cp` grid, rejecting zero degrees and grids above
/// [`MAX_SLICES`].
pub(crate) fn checked_slices(dp: u32, cp: u32) -> Result<u32, TgbError> {
    if dp == 0 || cp == 0 {
        return Err(TgbError::InvalidGrid {
            dp,
            cp,
            reason: "DP and CP must be at least 1",
        });
    }
    let n = u64::from(dp) * u64::from(cp);
    match u32::try_from(n) {
        Ok(n) if n <= MAX_SLICES => Ok(n),
        _ => Err(TgbError::InvalidGrid {
            dp,
            cp,
            reason: "D * C exceeds MAX_SLICES (65536)",
        }),
    }
}

/// Accepts the two format versions this build reads.
pub(crate) fn check_version(what: &'static str, version: u16) -> Result<(), TgbError> {
    if version == FORMAT_VERSION || version == SEALED_FORMAT_VERSION {
        Ok(())
    } else {
        Err(TgbError::UnsupportedVersion {
            what,
            version,
            supported: SEALED_FORMAT_VERSION,
        })
    }
}

/// The fixed-size record at the very end of a TGB object; it locates the footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Trailer {
    /// Byte offset of the footer in the object (= total payload bytes).
    pub footer_offset: u64,
    /// Footer length in bytes.
    pub footer_length: u32,
    /// CRC32 (IEEE, as computed by `crc32fast`) of the footer bytes.
    pub footer_crc32: u32,
    /// Format version of the object.
    pub version: u16,
}

impl Trailer {
    /// The 32 trailer bytes.
    pub fn to_bytes(&self) -> [u8; TRAILER_LEN] {
        let mut out = [0u8; TRAILER_LEN];
        out[0..8].copy_from_slice(&self.footer_offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.footer_length.to_le_bytes());
        out[12..16].copy_from_slice(&self.footer_crc32.to_le_bytes());
        out[16..18].copy_from_slice(&self.version.to_le_bytes());
        // 18..24 reserved, zero.
        out[24..32].copy_from_slice(if self.version == SEALED_FORMAT_VERSION {
            &SEALED_TRAILER_MAGIC
        } else {
            &TRAILER_MAGIC
        });
        out
    }
}

/// Decodes the trailer from the LAST [`TRAILER_LEN`] bytes of `bytes` (pass exactly the
/// suffix read, or the whole object).
///
/// Checks the magic, the version and the reserved bytes, and that the footer length is a
/// possible footer length (`20 + 20 * n` with `1 <= n <= MAX_SLICES`). The footer itself is
/// checked by [`decode_footer`](crate::decode_footer).
pub fn decode_trailer(bytes: &[u8]) -> Result<Trailer, TgbError> {
    const WHAT: &str = "TGB trailer";
    let start = bytes
        .len()
        .checked_sub(TRAILER_LEN)
        .ok_or(TgbError::Length {
            what: WHAT,
            expected: TRAILER_LEN as u64,
            actual: bytes.len() as u64,
        })?;
    let t: &[u8; TRAILER_LEN] =
        bytes
            .get(start..)
            .and_then(|s| s.try_into().ok())
            .ok_or(TgbError::Length {
                what: WHAT,
                expected: TRAILER_LEN as u64,
                actual: 0,
            })?;
    let magic_version = if t[24..32] == TRAILER_MAGIC {
        FORMAT_VERSION
    } else if t[24..32] == SEALED_TRAILER_MAGIC {
        SEALED_FORMAT_VERSION
    } else {
        return Err(TgbError::BadMagic { what: WHAT });
    };
    let version = u16::from_le_bytes([t[16], t[17]]);
    check_version(WHAT, version)?;
    if version != magic_version {
        return Err(TgbError::LayoutMismatch {
            reason: "the trailer's magic names another format version than its version field",
            expected: magic_version.into(),
            actual: version.into(),
        });
    }
    if t[18..24].iter().any(|&b| b != 0) {
        return Err(TgbError::ReservedNotZero { what: WHAT });
    }
    let trailer = Trailer {
        footer_offset: u64::from_le_bytes([t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]),
        footer_length: u32::from_le_bytes([t[8], t[9], t[10], t[11]]),
        footer_crc32: u32::from_le_bytes([t[12], t[13], t[14], t[15]]),
        version,
    };
    let len = u64::from(trailer.footer_length);
    let entries = len
        .checked_sub(FOOTER_HEADER_LEN as u64)
        .unwrap_or(u64::MAX);
    if entries == 0
        || !entries.is_multiple_of(FOOTER_ENTRY_LEN as u64)
        || entries / FOOTER_ENTRY_LEN as u64 > u64::from(MAX_SLICES)
    {
        return Err(TgbError::LayoutMismatch {
            reason: "trailer footer length is not 20 + 20*n for 1 <= n <= 65536",
            expected: footer_len(1),
            actual: len,
        });
    }
    Ok(trailer)
}

/// A TGB encoded into its parts, ready to upload (as one object, possibly multipart).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EncodedTgb {
    /// The object's parts in order: the `D * C` slices (the caller's buffers, not copied),
    /// then one buffer holding footer + trailer.
    pub parts: Vec<Bytes>,
    /// DP degree.
    pub dp: u32,
    /// CP degree.
    pub cp: u32,
    /// Total object size in bytes.
    pub object_size: u64,
    /// Offset of the footer (= `payload_bytes`).
    pub footer_offset: u64,
    /// Footer length in bytes (without the trailer).
    pub footer_length: u32,
    /// CRC32 of the footer bytes; the manifest records it with offset and length.
    pub footer_crc32: u32,
    /// Bytes before the footer: the sum of all slice lengths (packed), or
    /// `slice_stride * dp * cp` (sealed).
    pub payload_bytes: u64,
    /// The slot stride of a sealed TGB (format version 2): slice `i` and its seal fill
    /// `[i * slice_stride, (i + 1) * slice_stride)`. 0 for a packed TGB.
    pub slice_stride: u64,
}

impl EncodedTgb {
    /// Concatenates the parts into one contiguous buffer (copies the payload).
    pub fn to_bytes(&self) -> Bytes {
        match self.parts.as_slice() {
            [only] => only.clone(),
            parts => {
                let mut out =
                    BytesMut::with_capacity(usize::try_from(self.object_size).unwrap_or(0));
                for p in parts {
                    out.put_slice(p);
                }
                out.freeze()
            }
        }
    }

    /// The footer bytes alone (what a reader fetches with the manifest's footer range).
    pub fn footer(&self) -> Bytes {
        let tail = self.parts.last().cloned().unwrap_or_default();
        tail.slice(..tail.len().saturating_sub(TRAILER_LEN))
    }
}

/// Encodes a `dp x cp` TGB from its slices, given in slice-id order (`d * cp + c`).
///
/// The slices are not copied: they become the first parts of [`EncodedTgb::parts`].
/// Rejects zero degrees, grids above [`MAX_SLICES`] and a slice count other than `dp * cp`.
pub fn encode_tgb(dp: u32, cp: u32, slices: Vec<Bytes>) -> Result<EncodedTgb, TgbError> {
    let n = checked_slices(dp, cp)?;
    if slices.len() as u64 != u64::from(n) {
        return Err(TgbError::SliceCountMismatch {
            dp,
            cp,
            expected: u64::from(n),
            actual: slices.len() as u64,
        });
    }
    let mut enc = TgbStreamEncoder::new(dp, cp)?;
    for s in &slices {
        enc.write(s)?;
        enc.end_slice()?;
    }
    let tail = enc.finish()?;
    let mut parts = slices;
    parts.push(tail.bytes);
    Ok(EncodedTgb {
        parts,
        dp,
        cp,
        object_size: tail.object_size,
        footer_offset: tail.footer_offset,
        footer_length: tail.footer_length,
        footer_crc32: tail.footer_crc32,
        payload_bytes: tail.footer_offset,
        slice_stride: 0,
    })
}

/// The end of a streamed TGB object: footer + trailer bytes and where they sit
/// ([`TgbStreamEncoder::finish`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TgbTail {
    /// Footer then trailer: the last bytes of the object, to write after the slices.
    pub bytes: Bytes,
    /// DP degree.
    pub dp: u32,
    /// CP degree.
    pub cp: u32,
    /// Total object size in bytes (slices + footer + trailer).
    pub object_size: u64,
    /// Offset of the footer (= the payload bytes, the sum of all slice lengths).
    pub footer_offset: u64,
    /// Footer length in bytes (without the trailer).
    pub footer_length: u32,
    /// CRC32 of the footer bytes.
    pub footer_crc32: u32,
}

/// Encodes a TGB whose slices are written piece by piece, for a writer that streams them
/// to the store instead of holding them (a TGB larger than memory).
///
/// Feed the slices in slice-id order: [`write`](Self::write) appends bytes to the current
/// slice (any number of times, any sizes), [`end_slice`](Self::end_slice) closes it. The
/// encoder keeps only each closed slice's offset, length and CRC32 (20 bytes per slice);
/// [`finish`](Self::finish), once all `dp * cp` slices are closed, returns the footer and
/// trailer to write after them. The bytes written followed by [`TgbTail::bytes`] are
/// exactly the object [`encode_tgb`] makes of the same slices.
///
/// ```
/// use batchweave_tgb::{TgbStreamEncoder, encode_tgb};
/// use bytes::Bytes;
///
/// let mut enc = TgbStreamEncoder::new(2, 1)?;
/// enc.write(b"hel")?;
/// enc.write(b"lo")?;
/// enc.end_slice()?;
/// enc.write(b"world")?;
/// enc.end_slice()?;
/// let tail = enc.finish()?;
/// let whole = encode_tgb(2, 1, vec![Bytes::from_static(b"hello"), Bytes::from_static(b"world")])?;
/// assert_eq!([&b"helloworld"[..], &tail.bytes].concat(), whole.to_bytes());
/// # Ok::<(), batchweave_tgb::TgbError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TgbStreamEncoder {
    dp: u32,
    cp: u32,
    slices: u32,
    closed: u32,
    /// The footer so far: header, then one entry per closed slice.
    footer: BytesMut,
    /// Start offset of the current slice (= payload bytes of the closed ones).
    slice_start: u64,
    /// Bytes written so far.
    written: u64,
    crc: crc32fast::Hasher,
}

impl TgbStreamEncoder {
    /// An encoder for a `dp x cp` TGB. Rejects zero degrees and grids above
    /// [`MAX_SLICES`].
    pub fn new(dp: u32, cp: u32) -> Result<Self, TgbError> {
        let slices = checked_slices(dp, cp)?;
        let mut footer = BytesMut::with_capacity(footer_len(slices) as usize + TRAILER_LEN);
        footer.put_slice(&FOOTER_MAGIC);
        footer.put_u16_le(FORMAT_VERSION);
        footer.put_u16_le(0);
        footer.put_u32_le(dp);
        footer.put_u32_le(cp);
        Ok(Self {
            dp,
            cp,
            slices,
            closed: 0,
            footer,
            slice_start: 0,
            written: 0,
            crc: crc32fast::Hasher::new(),
        })
    }

    /// [`TgbError::SliceCountMismatch`] once all slices are closed: more bytes, or
    /// another slice, would be slice `dp * cp + 1`.
    fn check_open(&self) -> Result<(), TgbError> {
        if self.closed >= self.slices {
            return Err(TgbError::SliceCountMismatch {
                dp: self.dp,
                cp: self.cp,
                expected: u64::from(self.slices),
                actual: u64::from(self.closed) + 1,
            });
        }
        Ok(())
    }

    /// Appends `bytes` to the current slice. An error once all slices are closed.
    pub fn write(&mut self, bytes: &[u8]) -> Result<(), TgbError> {
        self.check_open()?;
        self.written = self
            .written
            .checked_add(bytes.len() as u64)
            .ok_or(TgbError::SizeOverflow)?;
        self.crc.update(bytes);
        Ok(())
    }

    /// Closes the current slice (possibly empty). An error once all slices are closed.
    pub fn end_slice(&mut self) -> Result<(), TgbError> {
        self.check_open()?;
        let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
        self.footer.put_u64_le(self.slice_start);
        self.footer.put_u64_le(self.written - self.slice_start);
        self.footer.put_u32_le(crc);
        self.slice_start = self.written;
        self.closed += 1;
        Ok(())
    }

    /// Slices closed so far.
    pub fn slices_closed(&self) -> u32 {
        self.closed
    }

    /// `dp * cp`: the slices the TGB needs.
    pub fn slices_needed(&self) -> u32 {
        self.slices
    }

    /// Payload bytes written so far (all slices, the current one included).
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// The footer and trailer, once all `dp * cp` slices are closed (else
    /// [`TgbError::SliceCountMismatch`]; bytes written after the last close are an error
    /// too, since they belong to no slice).
    pub fn finish(self) -> Result<TgbTail, TgbError> {
        if self.closed != self.slices || self.written != self.slice_start {
            return Err(TgbError::SliceCountMismatch {
                dp: self.dp,
                cp: self.cp,
                expected: u64::from(self.slices),
                actual: u64::from(self.closed) + u64::from(self.written != self.slice_start),
            });
        }
        let mut tail = self.footer;
        let footer_crc32 = crc32fast::hash(&tail);
        let footer_length = u32::try_from(tail.len()).map_err(|_| TgbError::SizeOverflow)?;
        let trailer = Trailer {
            footer_offset: self.written,
            footer_length,
            footer_crc32,
            version: FORMAT_VERSION,
        };
        tail.put_slice(&trailer.to_bytes());
        let object_size = self
            .written
            .checked_add(tail.len() as u64)
            .ok_or(TgbError::SizeOverflow)?;
        Ok(TgbTail {
            bytes: tail.freeze(),
            dp: self.dp,
            cp: self.cp,
            object_size,
            footer_offset: self.written,
            footer_length,
            footer_crc32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_grids() {
        assert!(matches!(
            encode_tgb(0, 1, vec![]),
            Err(TgbError::InvalidGrid { .. })
        ));
        assert!(matches!(
            encode_tgb(1, 0, vec![]),
            Err(TgbError::InvalidGrid { .. })
        ));
        assert!(matches!(
            encode_tgb(65_537, 1, vec![]),
            Err(TgbError::InvalidGrid { .. })
        ));
        assert!(matches!(
            encode_tgb(u32::MAX, u32::MAX, vec![]),
            Err(TgbError::InvalidGrid { .. })
        ));
        let err = encode_tgb(2, 2, vec![Bytes::new(); 3]).unwrap_err();
        assert!(matches!(
            err,
            TgbError::SliceCountMismatch {
                expected: 4,
                actual: 3,
                ..
            }
        ));
    }

    #[test]
    fn max_grid_is_accepted() {
        let enc = encode_tgb(256, 256, vec![Bytes::new(); 65_536]).unwrap();
        assert_eq!(u64::from(enc.footer_length), footer_len(MAX_SLICES));
        assert_eq!(enc.object_size, footer_len(MAX_SLICES) + TRAILER_LEN as u64);
    }

    #[test]
    fn parts_are_zero_copy_and_sizes_add_up() {
        let a = Bytes::from_static(b"hello");
        let b = Bytes::from_static(b"world!");
        let enc = encode_tgb(2, 1, vec![a.clone(), b.clone()]).unwrap();
        assert_eq!(enc.parts[0].as_ptr(), a.as_ptr());
        assert_eq!(enc.parts[1].as_ptr(), b.as_ptr());
        assert_eq!(enc.payload_bytes, 11);
        assert_eq!(enc.footer_offset, 11);
        assert_eq!(enc.object_size, 11 + 60 + 32);
        let all = enc.to_bytes();
        assert_eq!(all.len() as u64, enc.object_size);
        assert_eq!(&all[..11], b"helloworld!");
        assert_eq!(crc32fast::hash(&enc.footer()), enc.footer_crc32);
        let t = decode_trailer(&all).unwrap();
        assert_eq!(t.footer_offset, 11);
        assert_eq!(t.footer_length, 60);
        assert_eq!(t.footer_crc32, enc.footer_crc32);
    }

    #[test]
    fn trailer_rejects_short_and_bad_lengths() {
        assert!(matches!(
            decode_trailer(&[0u8; 31]),
            Err(TgbError::Length { .. })
        ));
        let mut t = Trailer {
            footer_offset: 0,
            footer_length: 20,
            footer_crc32: 0,
            version: 1,
        };
        assert!(matches!(
            decode_trailer(&t.to_bytes()),
            Err(TgbError::LayoutMismatch { .. })
        ));
        t.footer_length = 41;
        assert!(matches!(
            decode_trailer(&t.to_bytes()),
            Err(TgbError::LayoutMismatch { .. })
        ));
        t.footer_length = 40;
        assert_eq!(decode_trailer(&t.to_bytes()).unwrap(), t);
        t.version = 2;
        assert_eq!(decode_trailer(&t.to_bytes()).unwrap(), t);
        assert_eq!(t.to_bytes()[24..], SEALED_TRAILER_MAGIC);
        let mut b = t.to_bytes();
        b[16] = 1;
        assert!(matches!(
            decode_trailer(&b),
            Err(TgbError::LayoutMismatch { .. })
        ));
        t.version = 3;
        assert!(matches!(
            decode_trailer(&t.to_bytes()),
            Err(TgbError::UnsupportedVersion { .. })
        ));
    }
}
