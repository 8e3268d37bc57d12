//! Target `manifest_envelope`: the three envelope decoders on hostile bytes.

use batchweave_manifest::{
    DecodeLimits, HEADER_LEN, decode_gc_boundary, decode_manifest, decode_watermark,
    encode_gc_boundary, encode_manifest, encode_watermark, try_encode_manifest, validate,
};

/// Small limits, so the fuzzer reaches the limit checks with inputs of a few KiB.
pub(crate) const SMALL_LIMITS: DecodeLimits = DecodeLimits {
    max_bytes: 64 * 1024,
    max_tgbs: 64,
    max_producers: 16,
    max_grid: 1024,
};

/// Decodes `data` as a manifest, a GC boundary and a watermark with `SMALL_LIMITS`.
///
/// Whatever decodes must re-encode to bytes that decode to the same value, and encoding
/// must be deterministic (`encode(decode(encode(v))) == encode(v)`). A decoded manifest
/// must also pass `validate` and `try_encode_manifest` with the same limits, giving the
/// same bytes as `encode_manifest`.
///
/// Each input is decoded twice: as given, and with the header's length and CRC32 fields
/// recomputed for the bytes that follow (see `fix_header`), so the fuzzer also explores
/// the protobuf payload and the semantic validation behind the checksum.
pub fn manifest_envelope(data: &[u8]) -> bool {
    let raw = decode_all(data);
    let fixed = fix_header(data).is_some_and(|fixed| decode_all(&fixed));
    raw || fixed
}

/// A copy of `data` whose envelope length and CRC32 describe the bytes after the 16-byte
/// header (`None` if `data` is shorter than a header or the payload exceeds 4 GiB).
pub(crate) fn fix_header(data: &[u8]) -> Option<Vec<u8>> {
    let payload = data.get(HEADER_LEN..)?;
    let len = u32::try_from(payload.len()).ok()?;
    let mut out = data.to_vec();
    out.get_mut(8..12)?.copy_from_slice(&len.to_le_bytes());
    out.get_mut(12..16)?
        .copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    Some(out)
}

fn decode_all(data: &[u8]) -> bool {
    let limits = SMALL_LIMITS;
    let mut decoded = false;
    if let Ok(m) = decode_manifest(data, &limits) {
        if let Err(e) = validate(&m, &limits) {
            panic!("decoded manifest does not validate: {e}");
        }
        let bytes = encode_manifest(&m);
        let strict = try_encode_manifest(&m, &limits).expect("decoded manifest must re-encode");
        assert_eq!(
            strict, bytes,
            "try_encode_manifest and encode_manifest differ"
        );
        let back = decode_manifest(&bytes, &limits).expect("re-encoded manifest must decode");
        assert_eq!(back, m, "manifest roundtrip");
        assert_eq!(
            encode_manifest(&back),
            bytes,
            "manifest encoding not deterministic"
        );
        decoded = true;
    }
    if let Ok(b) = decode_gc_boundary(data, &limits) {
        let bytes = encode_gc_boundary(&b);
        let back = decode_gc_boundary(&bytes, &limits).expect("re-encoded boundary must decode");
        assert_eq!(back, b, "gc boundary roundtrip");
        assert_eq!(encode_gc_boundary(&back), bytes);
        decoded = true;
    }
    if let Ok(w) = decode_watermark(data, &limits) {
        let bytes = encode_watermark(&w);
        let back = decode_watermark(&bytes, &limits).expect("re-encoded watermark must decode");
        assert_eq!(back, w, "watermark roundtrip");
        assert_eq!(encode_watermark(&back), bytes);
        decoded = true;
    }
    decoded
}
