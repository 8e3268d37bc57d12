//! The checksummed envelope shared by every object kind, and the bounded
//! decoders built on it.
//!
//! ```text
//! offset size  field
//!      0    4  magic            b"BWMF" manifest | b"BWGC" gc boundary | b"BWWM" watermark
//!      4    2  format version   u16 LE, = 1
//!      6    2  flags            u16 LE, = 0 (no flag is defined; any set bit is rejected)
//!      8    4  payload length   u32 LE, = object length - 16
//!     12    4  payload CRC32    u32 LE, IEEE (crc32fast) over the payload bytes
//!     16    n  payload          the protobuf encoding of the message
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;

use crate::error::ManifestError;
use crate::limits::{DecodeLimits, check_count};
use crate::pb::{GcBoundary, GroupLayout, Manifest, Watermark};

/// Length of the envelope header in bytes.
pub const HEADER_LEN: usize = 16;
/// The envelope format version this crate writes and reads.
pub const FORMAT_VERSION: u16 = 1;
/// Magic of a manifest version object.
pub const MANIFEST_MAGIC: [u8; 4] = *b"BWMF";
/// Magic of the GC boundary object.
pub const GC_BOUNDARY_MAGIC: [u8; 4] = *b"BWGC";
/// Magic of a consumer watermark object.
pub const WATERMARK_MAGIC: [u8; 4] = *b"BWWM";
/// Magic of a consumer group layout object.
pub const GROUP_LAYOUT_MAGIC: [u8; 4] = *b"BWGL";

/// One object kind carried in an envelope.
trait Enveloped: Message + Default + Sized {
    const MAGIC: [u8; 4];

    /// Cheap checks on the raw payload before prost allocates anything.
    fn precheck(_payload: &[u8], _limits: &DecodeLimits) -> Result<(), ManifestError> {
        Ok(())
    }

    /// Semantic validation after decoding.
    fn check(&self, _limits: &DecodeLimits) -> Result<(), ManifestError> {
        Ok(())
    }
}

impl Enveloped for Manifest {
    const MAGIC: [u8; 4] = MANIFEST_MAGIC;

    fn precheck(payload: &[u8], limits: &DecodeLimits) -> Result<(), ManifestError> {
        // Field 3 = tgbs, field 4 = producers (one map entry per occurrence).
        let [tgbs, producers] = count_top_level_fields(payload, [3, 4])?;
        check_count("tgbs", tgbs, limits.max_tgbs)?;
        check_count("producers", producers, limits.max_producers)
    }

    fn check(&self, limits: &DecodeLimits) -> Result<(), ManifestError> {
        crate::validate::validate(self, limits)
    }
}

impl Enveloped for GcBoundary {
    const MAGIC: [u8; 4] = GC_BOUNDARY_MAGIC;
}

impl Enveloped for GroupLayout {
    const MAGIC: [u8; 4] = GROUP_LAYOUT_MAGIC;

    fn check(&self, limits: &DecodeLimits) -> Result<(), ManifestError> {
        let grid = u64::from(self.dp) * u64::from(self.cp);
        if self.dp == 0 || self.cp == 0 || grid > limits.max_grid {
            return Err(ManifestError::Inconsistent {
                reason: format!(
                    "group layout {}x{} is outside 1..={} positions",
                    self.dp, self.cp, limits.max_grid
                ),
            });
        }
        // One watermark per rank: bounded, since GC enumerates them.
        let ranks = grid
            .saturating_mul(u64::from(self.tp.max(1)))
            .saturating_mul(u64::from(self.pp.max(1)));
        if ranks > MAX_LAYOUT_RANKS {
            return Err(ManifestError::Inconsistent {
                reason: format!(
                    "group layout {}x{}x{}x{} has {ranks} ranks, above the limit of {MAX_LAYOUT_RANKS}",
                    self.dp, self.cp, self.tp, self.pp
                ),
            });
        }
        Ok(())
    }
}

/// Largest number of ranks (`dp * cp * tp * pp`) a group layout may describe.
pub const MAX_LAYOUT_RANKS: u64 = 1 << 20;

impl Enveloped for Watermark {
    const MAGIC: [u8; 4] = WATERMARK_MAGIC;
}

fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn encode<T: Enveloped>(msg: &T) -> Bytes {
    let payload_len = msg.encoded_len();
    let mut out = BytesMut::with_capacity(HEADER_LEN.saturating_add(payload_len));
    out.put_slice(&T::MAGIC);
    out.put_u16_le(FORMAT_VERSION);
    out.put_u16_le(0);
    // A payload over 4 GiB cannot be described; saturating makes the object
    // undecodable (length mismatch) rather than silently truncated.
    out.put_u32_le(u32::try_from(payload_len).unwrap_or(u32::MAX));
    out.put_u32_le(0); // CRC placeholder, patched below.
    // `BytesMut` grows on demand, so prost's only error (insufficient buffer
    // capacity) cannot occur.
    let encoded = msg.encode(&mut out);
    debug_assert!(encoded.is_ok());
    let crc = crc32fast::hash(out.get(HEADER_LEN..).unwrap_or_default());
    if let Some(slot) = out.get_mut(12..16) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
    out.freeze()
}

fn decode<T: Enveloped>(bytes: &[u8], limits: &DecodeLimits) -> Result<T, ManifestError> {
    let truncated = ManifestError::Truncated {
        len: bytes.len(),
        needed: HEADER_LEN,
    };
    let Some((header, payload)) = bytes.split_first_chunk::<HEADER_LEN>() else {
        return Err(truncated);
    };
    let [
        m0,
        m1,
        m2,
        m3,
        v0,
        v1,
        f0,
        f1,
        l0,
        l1,
        l2,
        l3,
        c0,
        c1,
        c2,
        c3,
    ] = *header;
    let magic = [m0, m1, m2, m3];
    if magic != T::MAGIC {
        return Err(ManifestError::BadMagic {
            expected: T::MAGIC,
            found: magic,
        });
    }
    let version = u16::from_le_bytes([v0, v1]);
    if version != FORMAT_VERSION {
        return Err(ManifestError::UnsupportedVersion { version });
    }
    let flags = u16::from_le_bytes([f0, f1]);
    if flags != 0 {
        return Err(ManifestError::UnsupportedFlags { flags });
    }
    let declared = u64::from(u32::from_le_bytes([l0, l1, l2, l3]));
    let actual = len_u64(payload.len());
    if declared != actual {
        return Err(ManifestError::LengthMismatch { declared, actual });
    }
    if declared > limits.max_bytes {
        return Err(ManifestError::TooLarge {
            len: declared,
            max: limits.max_bytes,
        });
    }
    let expected = u32::from_le_bytes([c0, c1, c2, c3]);
    let computed = crc32fast::hash(payload);
    if expected != computed {
        return Err(ManifestError::ChecksumMismatch {
            expected,
            actual: computed,
        });
    }
    T::precheck(payload, limits)?;
    let msg = T::decode(payload).map_err(|e| ManifestError::Malformed {
        reason: e.to_string(),
    })?;
    msg.check(limits)?;
    Ok(msg)
}

/// Counts the top-level occurrences of the given field numbers in a protobuf
/// payload without decoding it (nothing is allocated).
fn count_top_level_fields<const N: usize>(
    mut buf: &[u8],
    fields: [u64; N],
) -> Result<[u64; N], ManifestError> {
    let malformed = |reason: &str| ManifestError::Malformed {
        reason: reason.to_owned(),
    };
    let mut counts = [0u64; N];
    while !buf.is_empty() {
        let key = read_varint(&mut buf).ok_or_else(|| malformed("truncated field key"))?;
        let field = key >> 3;
        if field == 0 {
            return Err(malformed("field number 0"));
        }
        for (f, c) in fields.iter().zip(counts.iter_mut()) {
            if *f == field {
                *c = c.saturating_add(1);
            }
        }
        let skip = match key & 7 {
            0 => {
                read_varint(&mut buf).ok_or_else(|| malformed("truncated varint"))?;
                0
            }
            1 => 8,
            2 => read_varint(&mut buf).ok_or_else(|| malformed("truncated length"))?,
            5 => 4,
            _ => return Err(malformed("unsupported wire type")),
        };
        let skip = usize::try_from(skip).map_err(|_| malformed("length out of range"))?;
        buf = buf
            .get(skip..)
            .ok_or_else(|| malformed("field runs past the end of the payload"))?;
    }
    Ok(counts)
}

fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10u32 {
        let (&byte, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(byte & 0x7f).checked_shl(7 * i)?;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Encodes a manifest version into its envelope (deterministic: equal
/// manifests give equal bytes). Does not validate; see [`try_encode_manifest`].
pub fn encode_manifest(manifest: &Manifest) -> Bytes {
    encode(manifest)
}

/// Validates a manifest against `limits` and encodes it, refusing to produce
/// an object that a reader with the same limits would reject. Producers use
/// this before the conditional create.
pub fn try_encode_manifest(
    manifest: &Manifest,
    limits: &DecodeLimits,
) -> Result<Bytes, ManifestError> {
    crate::validate::validate(manifest, limits)?;
    let len = len_u64(manifest.encoded_len());
    let max = limits.max_bytes.min(u64::from(u32::MAX));
    if len > max {
        return Err(ManifestError::TooLarge { len, max });
    }
    Ok(encode(manifest))
}

/// Decodes and validates a manifest version object (see [`validate`](crate::validate)).
pub fn decode_manifest(bytes: &[u8], limits: &DecodeLimits) -> Result<Manifest, ManifestError> {
    decode(bytes, limits)
}

/// Encodes the GC boundary object.
pub fn encode_gc_boundary(boundary: &GcBoundary) -> Bytes {
    encode(boundary)
}

/// Decodes the GC boundary object.
pub fn decode_gc_boundary(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<GcBoundary, ManifestError> {
    decode(bytes, limits)
}

/// Encodes a consumer watermark object.
pub fn encode_watermark(watermark: &Watermark) -> Bytes {
    encode(watermark)
}

/// Decodes a consumer watermark object.
pub fn decode_watermark(bytes: &[u8], limits: &DecodeLimits) -> Result<Watermark, ManifestError> {
    decode(bytes, limits)
}

/// Encodes a consumer group layout object.
pub fn encode_group_layout(layout: &GroupLayout) -> Bytes {
    encode(layout)
}

/// Decodes a consumer group layout object (both degrees at least 1, the
/// grid within `limits.max_grid`).
pub fn decode_group_layout(
    bytes: &[u8],
    limits: &DecodeLimits,
) -> Result<GroupLayout, ManifestError> {
    decode(bytes, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wm() -> Watermark {
        Watermark {
            version: 7,
            step: 99,
            updated_at_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn header_layout() {
        let bytes = encode_watermark(&wm());
        assert_eq!(&bytes[..4], b"BWWM");
        assert_eq!(&bytes[4..6], &1u16.to_le_bytes());
        assert_eq!(&bytes[6..8], &[0, 0]);
        let len = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        assert_eq!(len as usize, bytes.len() - HEADER_LEN);
        let crc = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
        assert_eq!(crc, crc32fast::hash(&bytes[16..]));
        assert_eq!(Watermark::decode(&bytes[16..]).unwrap(), wm());
    }

    #[test]
    fn kinds_are_not_interchangeable() {
        let bytes = encode_watermark(&wm());
        let l = DecodeLimits::default();
        assert!(matches!(
            decode_gc_boundary(&bytes, &l),
            Err(ManifestError::BadMagic { .. })
        ));
        assert!(matches!(
            decode_manifest(&bytes, &l),
            Err(ManifestError::BadMagic { .. })
        ));
        assert_eq!(decode_watermark(&bytes, &l).unwrap(), wm());
    }

    #[test]
    fn header_fields_are_checked_in_order() {
        let l = DecodeLimits::default();
        let good = encode_watermark(&wm()).to_vec();
        assert!(matches!(
            decode_watermark(&good[..HEADER_LEN - 1], &l),
            Err(ManifestError::Truncated { .. })
        ));
        let mut b = good.clone();
        b[4] = 2;
        assert!(matches!(
            decode_watermark(&b, &l),
            Err(ManifestError::UnsupportedVersion { version: 2 })
        ));
        let mut b = good.clone();
        b[7] = 0x80;
        assert!(matches!(
            decode_watermark(&b, &l),
            Err(ManifestError::UnsupportedFlags { flags: 0x8000 })
        ));
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(
            decode_watermark(&b, &l),
            Err(ManifestError::LengthMismatch { .. })
        ));
        let tight = DecodeLimits {
            max_bytes: 3,
            ..DecodeLimits::default()
        };
        assert!(matches!(
            decode_watermark(&good, &tight),
            Err(ManifestError::TooLarge { max: 3, .. })
        ));
        let mut b = good.clone();
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(
            decode_watermark(&b, &l),
            Err(ManifestError::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn hostile_length_is_rejected_before_anything_else() {
        let mut b = encode_watermark(&wm()).to_vec();
        b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_watermark(&b, &DecodeLimits::default()),
            Err(ManifestError::LengthMismatch {
                declared: 4_294_967_295,
                ..
            })
        ));
    }

    #[test]
    fn tgb_count_is_limited_before_decoding() {
        // 1000 empty descriptors: tag 0x1a (field 3, wire type 2), length 0.
        let payload: Vec<u8> = std::iter::repeat_n([0x1a, 0x00], 1000).flatten().collect();
        let limits = DecodeLimits {
            max_tgbs: 999,
            ..DecodeLimits::default()
        };
        assert!(matches!(
            Manifest::precheck(&payload, &limits),
            Err(ManifestError::LimitExceeded {
                what: "tgbs",
                count: 1000,
                max: 999
            })
        ));
        assert_eq!(count_top_level_fields(&payload, [3, 4]).unwrap(), [1000, 0]);
    }

    #[test]
    fn scanner_rejects_garbage_without_panicking() {
        for bad in [
            &[0x1a, 0x05, 0x00][..],
            &[0x80][..],
            &[0x0b][..],
            &[0x00][..],
        ] {
            assert!(count_top_level_fields(bad, [3]).is_err(), "{bad:?}");
        }
        let mut b = vec![0x08];
        b.extend([0xff; 11]);
        assert!(count_top_level_fields(&b, [1]).is_err());
    }

    #[test]
    fn group_layout_roundtrip_and_bounds() {
        let l = GroupLayout {
            dp: 8,
            cp: 2,
            updated_at_ms: 5,
            ..Default::default()
        };
        let limits = DecodeLimits::default();
        assert_eq!(
            decode_group_layout(&encode_group_layout(&l), &limits).unwrap(),
            l
        );
        for bad in [
            GroupLayout {
                dp: 0,
                cp: 1,
                updated_at_ms: 0,
                ..Default::default()
            },
            GroupLayout {
                dp: 1 << 20,
                cp: 1 << 10,
                updated_at_ms: 0,
                ..Default::default()
            },
        ] {
            assert!(
                decode_group_layout(&encode_group_layout(&bad), &limits).is_err(),
                "{bad:?}"
            );
        }
        let mut bytes = encode_group_layout(&l).to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(decode_group_layout(&bytes, &limits).is_err());
    }
}
