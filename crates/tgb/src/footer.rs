//! Footer decoding and the slice index a reader caches per TGB.

use std::ops::Range;

use bytes::Bytes;

use crate::TgbError;
use crate::layout::{
    FOOTER_ENTRY_LEN, FOOTER_HEADER_LEN, FOOTER_MAGIC, SEALED_FORMAT_VERSION, TRAILER_LEN, Trailer,
    check_version, checked_slices, decode_trailer, footer_len,
};
use crate::seal::{SEAL_LEN, open_sealed_run, open_slot};

const WHAT: &str = "TGB footer";

/// What a reader already knows about the footer before decoding it: from the manifest's TGB
/// descriptor, or from the object's trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterCheck {
    footer_offset: u64,
    footer_crc32: u32,
    object_size: Option<u64>,
}

impl FooterCheck {
    /// Expect the footer at `footer_offset` with CRC32 `footer_crc32`.
    pub fn new(footer_offset: u64, footer_crc32: u32) -> Self {
        Self {
            footer_offset,
            footer_crc32,
            object_size: None,
        }
    }

    /// Also check that the object is exactly `object_size` bytes
    /// (`footer_offset + footer length + 32`).
    pub fn with_object_size(mut self, object_size: u64) -> Self {
        self.object_size = Some(object_size);
        self
    }

    /// The expectations a decoded trailer gives.
    pub fn from_trailer(trailer: &Trailer) -> Self {
        Self::new(trailer.footer_offset, trailer.footer_crc32)
    }
}

/// One footer entry: where a slice lives in the object and its CRC32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SliceEntry {
    /// Byte offset of the slice in the object.
    pub offset: u64,
    /// Slice length in bytes (may be 0).
    pub length: u64,
    /// CRC32 of the slice bytes.
    pub crc32: u32,
}

impl SliceEntry {
    /// The slice's byte range in the object.
    pub fn range(&self) -> Range<u64> {
        // Cannot overflow: decode_footer checked offset + length <= footer_offset.
        self.offset..self.offset.saturating_add(self.length)
    }
}

/// The decoded footer of one TGB: grid and per-slice location and checksum.
///
/// Only [`decode_footer`] and [`decode_object`] build one, so its entries always satisfy
/// the layout invariants: slices back to back from offset 0 up to the footer (format
/// version 1), or slice `i` at the start of slot `i * stride` (version 2, sealed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceIndex {
    dp: u32,
    cp: u32,
    footer_offset: u64,
    /// Slot stride of a sealed TGB; 0 for a packed one.
    stride: u64,
    footer_crc32: u32,
    entries: Vec<SliceEntry>,
}

impl SliceIndex {
    /// DP degree of the TGB.
    pub fn dp(&self) -> u32 {
        self.dp
    }

    /// CP degree of the TGB.
    pub fn cp(&self) -> u32 {
        self.cp
    }

    /// Offset of the footer, which is also the total payload size.
    pub fn footer_offset(&self) -> u64 {
        self.footer_offset
    }

    /// The slot stride of a sealed TGB (format version 2); 0 for a packed one.
    pub fn slice_stride(&self) -> u64 {
        self.stride
    }

    /// All entries in slice-id order.
    pub fn entries(&self) -> &[SliceEntry] {
        &self.entries
    }

    /// Slice id of `(d, c)`: `d * C + c`.
    pub fn slice_id(&self, d: u32, c: u32) -> Result<u32, TgbError> {
        if d >= self.dp || c >= self.cp {
            return Err(TgbError::PositionOutOfGrid {
                d,
                c,
                dp: self.dp,
                cp: self.cp,
            });
        }
        // Cannot overflow: dp * cp <= MAX_SLICES.
        Ok(d * self.cp + c)
    }

    /// The entry of slice `(d, c)`.
    pub fn slice(&self, d: u32, c: u32) -> Result<&SliceEntry, TgbError> {
        self.entry(self.slice_id(d, c)?)
    }

    /// The entry of slice id `slice`.
    pub fn entry(&self, slice: u32) -> Result<&SliceEntry, TgbError> {
        self.entries
            .get(slice as usize)
            .ok_or(TgbError::NoSuchSlice {
                first: u64::from(slice),
                count: 1,
                slices: self.entries.len() as u64,
            })
    }

    fn run(&self, first_slice: u32, count: u32) -> Result<&[SliceEntry], TgbError> {
        let start = first_slice as usize;
        let err = || TgbError::NoSuchSlice {
            first: u64::from(first_slice),
            count: u64::from(count),
            slices: self.entries.len() as u64,
        };
        let end = start.checked_add(count as usize).ok_or_else(err)?;
        match self.entries.get(start..end) {
            Some(run) if !run.is_empty() => Ok(run),
            _ => Err(err()),
        }
    }

    /// Byte range covering the `count >= 1` contiguous slices starting at `first_slice`
    /// (one ranged GET). For a sealed TGB, the whole slots, seals included.
    pub fn range_of(&self, first_slice: u32, count: u32) -> Result<Range<u64>, TgbError> {
        let run = self.run(first_slice, count)?;
        if self.stride != 0 {
            // decode_footer checked stride * slices == footer_offset.
            let start = u64::from(first_slice) * self.stride;
            return Ok(start..start + run.len() as u64 * self.stride);
        }
        match (run.first(), run.last()) {
            (Some(a), Some(b)) => Ok(a.offset..b.range().end),
            _ => Err(TgbError::NoSuchSlice {
                first: u64::from(first_slice),
                count: u64::from(count),
                slices: self.entries.len() as u64,
            }),
        }
    }

    /// Checks that `bytes` are exactly slice `slice` (length and CRC32).
    pub fn verify(&self, slice: u32, bytes: &[u8]) -> Result<(), TgbError> {
        let e = self.entry(slice)?;
        if bytes.len() as u64 != e.length {
            return Err(TgbError::SliceLength {
                slice,
                expected: e.length,
                actual: bytes.len() as u64,
            });
        }
        let actual = crc32fast::hash(bytes);
        if actual != e.crc32 {
            return Err(TgbError::SliceChecksum {
                slice,
                expected: e.crc32,
                actual,
            });
        }
        Ok(())
    }

    /// Splits the bytes of [`range_of(first_slice, count)`](Self::range_of) into its slices,
    /// verifying each one (for a sealed TGB, each slot's seal too, and that seal and footer
    /// agree). Zero-copy: the results share `bytes`' buffer.
    pub fn split_run(
        &self,
        first_slice: u32,
        count: u32,
        bytes: &Bytes,
    ) -> Result<Vec<Bytes>, TgbError> {
        let run = self.run(first_slice, count)?;
        if self.stride != 0 {
            let slices =
                open_sealed_run(bytes, first_slice, count, self.stride, self.footer_crc32)?;
            for (i, s) in slices.iter().enumerate() {
                self.verify(first_slice.saturating_add(i as u32), s)?;
            }
            return Ok(slices);
        }
        let range = self.range_of(first_slice, count)?;
        let total = range.end - range.start;
        if bytes.len() as u64 != total {
            return Err(TgbError::SliceLength {
                slice: first_slice,
                expected: total,
                actual: bytes.len() as u64,
            });
        }
        let mut out = Vec::with_capacity(run.len());
        let mut pos = 0usize;
        for (i, e) in run.iter().enumerate() {
            // Lengths sum to `total == bytes.len()`, so these fit in usize.
            let len = usize::try_from(e.length).map_err(|_| TgbError::SizeOverflow)?;
            let end = pos.checked_add(len).ok_or(TgbError::SizeOverflow)?;
            let part = bytes.slice(pos..end);
            let id = first_slice.saturating_add(i as u32);
            self.verify(id, &part)?;
            out.push(part);
            pos = end;
        }
        Ok(out)
    }
}

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

/// Decodes and validates a footer (exactly the footer bytes, without the trailer).
///
/// Checks, in order: the CRC32 against `expected`; the length is at least the header; magic,
/// version, reserved bytes; `D`, `C` non-zero and `D * C <= MAX_SLICES`; the length is exactly
/// `20 + 20 * D * C` (checked before allocating); the slices lie back to back from offset 0 up
/// to the expected footer offset; and, if given, the object size. Never panics.
pub fn decode_footer(bytes: &[u8], expected: FooterCheck) -> Result<SliceIndex, TgbError> {
    let actual = crc32fast::hash(bytes);
    if actual != expected.footer_crc32 {
        return Err(TgbError::FooterChecksum {
            expected: expected.footer_crc32,
            actual,
        });
    }
    let len = bytes.len() as u64;
    if bytes.len() < FOOTER_HEADER_LEN {
        return Err(TgbError::Length {
            what: WHAT,
            expected: FOOTER_HEADER_LEN as u64,
            actual: len,
        });
    }
    if bytes.get(0..8) != Some(&FOOTER_MAGIC[..]) {
        return Err(TgbError::BadMagic { what: WHAT });
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    check_version(WHAT, version)?;
    if bytes[10] != 0 || bytes[11] != 0 {
        return Err(TgbError::ReservedNotZero { what: WHAT });
    }
    let dp = le_u32(bytes, 12);
    let cp = le_u32(bytes, 16);
    let n = checked_slices(dp, cp)?;
    if len != footer_len(n) {
        return Err(TgbError::Length {
            what: WHAT,
            expected: footer_len(n),
            actual: len,
        });
    }
    if let Some(size) = expected.object_size {
        let want = expected
            .footer_offset
            .checked_add(len)
            .and_then(|v| v.checked_add(TRAILER_LEN as u64))
            .ok_or(TgbError::SizeOverflow)?;
        if size != want {
            return Err(TgbError::LayoutMismatch {
                reason: "object size != footer offset + footer length + 32",
                expected: want,
                actual: size,
            });
        }
    }
    if version == SEALED_FORMAT_VERSION {
        return decode_sealed_entries(bytes, expected, dp, cp, n);
    }
    let mut entries = Vec::with_capacity(n as usize);
    let mut next: u64 = 0;
    for (i, raw) in bytes[FOOTER_HEADER_LEN..]
        .chunks_exact(FOOTER_ENTRY_LEN)
        .enumerate()
    {
        let e = SliceEntry {
            offset: le_u64(raw, 0),
            length: le_u64(raw, 8),
            crc32: le_u32(raw, 16),
        };
        let end = e.offset.checked_add(e.length);
        if e.offset != next || end.is_none_or(|end| end > expected.footer_offset) {
            return Err(TgbError::SliceOutOfPlace {
                slice: i as u32,
                offset: e.offset,
                length: e.length,
                footer_offset: expected.footer_offset,
            });
        }
        next = end.unwrap_or(u64::MAX);
        entries.push(e);
    }
    if next != expected.footer_offset {
        return Err(TgbError::LayoutMismatch {
            reason: "slices end before the footer offset",
            expected: expected.footer_offset,
            actual: next,
        });
    }
    Ok(SliceIndex {
        dp,
        cp,
        footer_offset: expected.footer_offset,
        stride: 0,
        footer_crc32: expected.footer_crc32,
        entries,
    })
}

/// The entries of a sealed footer (format version 2), whose header `decode_footer` checked:
/// the payload is `n` slots of one stride of at least the seal, and entry `i` starts slot
/// `i` and leaves room for its seal.
fn decode_sealed_entries(
    bytes: &[u8],
    expected: FooterCheck,
    dp: u32,
    cp: u32,
    n: u32,
) -> Result<SliceIndex, TgbError> {
    let f = expected.footer_offset;
    let stride = f / u64::from(n);
    if !f.is_multiple_of(u64::from(n)) || stride < SEAL_LEN as u64 {
        return Err(TgbError::LayoutMismatch {
            reason: "a sealed TGB's footer offset is not slices * stride with stride >= 24",
            expected: u64::from(n) * stride.max(SEAL_LEN as u64),
            actual: f,
        });
    }
    let room = stride - SEAL_LEN as u64;
    let mut entries = Vec::with_capacity(n as usize);
    for (i, raw) in bytes[FOOTER_HEADER_LEN..]
        .chunks_exact(FOOTER_ENTRY_LEN)
        .enumerate()
    {
        let e = SliceEntry {
            offset: le_u64(raw, 0),
            length: le_u64(raw, 8),
            crc32: le_u32(raw, 16),
        };
        // Cannot overflow: i < n and n * stride == f.
        if e.offset != i as u64 * stride || e.length > room {
            return Err(TgbError::SliceOutOfPlace {
                slice: i as u32,
                offset: e.offset,
                length: e.length,
                footer_offset: f,
            });
        }
        entries.push(e);
    }
    Ok(SliceIndex {
        dp,
        cp,
        footer_offset: f,
        stride,
        footer_crc32: expected.footer_crc32,
        entries,
    })
}

/// Decodes the slice index of a whole TGB object held in memory: trailer, then footer,
/// checking that trailer, footer and object size agree.
pub fn decode_object(object: &[u8]) -> Result<SliceIndex, TgbError> {
    let trailer = decode_trailer(object)?;
    let size = object.len() as u64;
    let footer_start = trailer.footer_offset;
    let footer_end = footer_start.checked_add(u64::from(trailer.footer_length));
    let want_end = size.saturating_sub(TRAILER_LEN as u64);
    if footer_end != Some(want_end) {
        return Err(TgbError::LayoutMismatch {
            reason: "trailer footer offset + length != object size - 32",
            expected: want_end,
            actual: footer_end.unwrap_or(u64::MAX),
        });
    }
    let footer = usize::try_from(footer_start)
        .ok()
        .and_then(|s| object.get(s..object.len() - TRAILER_LEN))
        .ok_or(TgbError::SizeOverflow)?;
    let index = decode_footer(
        footer,
        FooterCheck::from_trailer(&trailer).with_object_size(size),
    )?;
    let footer_version = if index.stride == 0 {
        1
    } else {
        SEALED_FORMAT_VERSION
    };
    if trailer.version != footer_version {
        return Err(TgbError::LayoutMismatch {
            reason: "trailer and footer have different format versions",
            expected: footer_version.into(),
            actual: trailer.version.into(),
        });
    }
    if index.stride != 0 {
        check_seals(object, &index)?;
    }
    Ok(index)
}

/// Every slot of a sealed object opens, and its seal agrees with its footer entry.
fn check_seals(object: &[u8], index: &SliceIndex) -> Result<(), TgbError> {
    let stride = usize::try_from(index.stride).map_err(|_| TgbError::SizeOverflow)?;
    let payload = object
        .get(..usize::try_from(index.footer_offset).map_err(|_| TgbError::SizeOverflow)?)
        .ok_or(TgbError::SizeOverflow)?;
    for ((i, slot), e) in payload.chunks_exact(stride).enumerate().zip(&index.entries) {
        let id = i as u32;
        let opened = open_slot(slot, id, index.footer_crc32)?;
        if opened.length != e.length {
            return Err(TgbError::SliceLength {
                slice: id,
                expected: e.length,
                actual: opened.length,
            });
        }
        if opened.crc32 != e.crc32 {
            return Err(TgbError::SliceChecksum {
                slice: id,
                expected: e.crc32,
                actual: opened.crc32,
            });
        }
    }
    Ok(())
}
