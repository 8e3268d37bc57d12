//! Target `tgb_footer`: trailer, footer and whole-object decoding of TGBs.

use batchweave_tgb::{
    FOOTER_ENTRY_LEN, FOOTER_HEADER_LEN, FooterCheck, SliceIndex, TRAILER_LEN, decode_footer,
    decode_object, decode_trailer, encode_tgb, encode_tgb_sealed, open_sealed_run,
};
use bytes::Bytes;

use super::input::Input;

/// Largest payload the checks copy into a buffer of their own.
const MAX_COPY: u64 = 1 << 16;

/// Two readings of `data`:
///
/// 1. As a whole TGB object: `decode_trailer` (a decoded trailer must re-serialise to the
///    last 32 bytes), the footer the trailer points at, and `decode_object`. A decoded
///    object whose slices all verify must re-encode with `encode_tgb` to exactly `data`.
/// 2. As `flags(1) footer_offset(8) crc32(4) object_size(8) footer..`, fed to
///    `decode_footer` with the `FooterCheck` those fields describe (flag bit 0 set: take
///    the CRC from the input, else compute it so the decoder goes past the checksum;
///    bit 1: also check the object size).
///
/// On every decoded index, `range_of`, `verify`, `slice` and `split_run` must not panic
/// and must agree with the entries.
///
/// Reading 1 is repeated on a copy whose slice and footer CRC32s are recomputed (see
/// `fix_checksums`), so the fuzzer explores the layout checks behind the checksums.
pub fn tgb_footer(data: &[u8]) -> bool {
    let mut decoded = as_object(data);
    if let Some(fixed) = fix_checksums(data) {
        decoded |= as_object(&fixed);
    }

    let mut input = Input::new(data);
    let flags = input.byte();
    let footer_offset = input.u64_le();
    let crc = input.u32_le();
    let size = input.u64_le();
    let footer = input.rest();
    let crc = if flags & 1 == 0 {
        crc32fast::hash(footer)
    } else {
        crc
    };
    let mut check = FooterCheck::new(footer_offset, crc);
    if flags & 2 != 0 {
        check = check.with_object_size(size);
    }
    if let Ok(index) = decode_footer(footer, check) {
        assert_eq!(index.footer_offset(), footer_offset);
        check_index(&index, None);
        decoded = true;
    }
    decoded
}

/// A copy of `data` (read as an object) whose footer entries carry the CRC32 of the bytes
/// they point at (where those lie inside `data`) and whose trailer carries the footer's
/// CRC32. `None` if there is no trailer or the footer it names is not inside `data`.
fn fix_checksums(data: &[u8]) -> Option<Vec<u8>> {
    let trailer = decode_trailer(data).ok()?;
    let start = usize::try_from(trailer.footer_offset).ok()?;
    let end = start.checked_add(trailer.footer_length as usize)?;
    let mut out = data.to_vec();
    let footer = out.get(start..end)?.to_vec();
    let mut fixed_footer = footer.clone();
    let entries = footer
        .get(FOOTER_HEADER_LEN..)?
        .chunks_exact(FOOTER_ENTRY_LEN);
    for (raw, slot) in entries.zip(
        fixed_footer
            .get_mut(FOOTER_HEADER_LEN..)?
            .chunks_exact_mut(FOOTER_ENTRY_LEN),
    ) {
        let mut input = Input::new(raw);
        let (offset, length) = (input.u64_le(), input.u64_le());
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(length).ok())
            .and_then(|(o, l)| Some(o..o.checked_add(l)?));
        if let Some(slice) = range.and_then(|r| data.get(r)) {
            slot[16..20].copy_from_slice(&crc32fast::hash(slice).to_le_bytes());
        }
    }
    out.get_mut(start..end)?.copy_from_slice(&fixed_footer);
    let at = out.len() - TRAILER_LEN + 12;
    out.get_mut(at..at + 4)?
        .copy_from_slice(&crc32fast::hash(&fixed_footer).to_le_bytes());
    Some(out)
}

/// Returns whether the object decoded.
fn as_object(data: &[u8]) -> bool {
    let object = decode_object(data);
    if let Ok(trailer) = decode_trailer(data) {
        let tail = &data[data.len() - TRAILER_LEN..];
        assert_eq!(&trailer.to_bytes()[..], tail, "trailer roundtrip");
        let footer = usize::try_from(trailer.footer_offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(trailer.footer_length as usize)?))
            .and_then(|r| data.get(r));
        if let Some(footer) = footer {
            let via_trailer = decode_footer(footer, FooterCheck::from_trailer(&trailer));
            if let Ok(index) = &object {
                assert_eq!(via_trailer.as_ref(), Ok(index), "object vs footer decode");
            }
        }
    } else {
        assert!(object.is_err(), "object decoded without a trailer");
    }
    if let Ok(index) = object {
        check_index(&index, Some(data));
        return true;
    }
    false
}

/// Cross-checks the accessors of a decoded index; `object` is the whole object if known.
fn check_index(index: &SliceIndex, object: Option<&[u8]>) {
    let entries = index.entries();
    let n = u32::try_from(entries.len()).expect("at most 65536 slices");
    assert_eq!(
        u64::from(n),
        u64::from(index.dp()) * u64::from(index.cp()),
        "entry count != dp * cp"
    );
    let stride = index.slice_stride();
    let mut next = 0u64;
    for (i, e) in (0..n).zip(entries) {
        assert_eq!(index.entry(i), Ok(e));
        if stride == 0 {
            assert_eq!(e.offset, next, "slices not back to back");
            next = e.range().end;
            assert_eq!(index.range_of(i, 1), Ok(e.range()));
        } else {
            // Sealed: slice i at the start of slot i, with room for the seal.
            assert_eq!(e.offset, u64::from(i) * stride, "slice not at its slot");
            assert!(e.length + 24 <= stride, "slice leaves no room for its seal");
            next = e.offset + stride;
            assert_eq!(index.range_of(i, 1), Ok(e.offset..next));
        }
    }
    assert_eq!(
        next,
        index.footer_offset(),
        "slices do not end at the footer"
    );
    assert_eq!(index.range_of(0, n), Ok(0..index.footer_offset()));
    assert!(index.range_of(0, 0).is_err());
    assert!(index.range_of(n, 1).is_err());
    assert!(index.range_of(u32::MAX, u32::MAX).is_err());
    assert!(index.entry(n).is_err());
    let (d, c) = (index.dp() - 1, index.cp() - 1);
    assert_eq!(index.slice_id(d, c), Ok(n - 1));
    assert!(index.slice(index.dp(), 0).is_err());
    assert!(index.slice(0, index.cp()).is_err());

    let payload = match object {
        Some(object) => {
            let end = usize::try_from(index.footer_offset()).expect("footer inside the object");
            Bytes::copy_from_slice(&object[..end])
        }
        // Without the object, check the length and CRC paths on zeros of the right size.
        None if index.footer_offset() <= MAX_COPY => {
            Bytes::from(vec![0u8; index.footer_offset() as usize])
        }
        None => return,
    };
    let mut all_ok = true;
    for (i, e) in (0..n).zip(entries) {
        let slice = payload.slice(e.offset as usize..e.range().end as usize);
        all_ok &= index.verify(i, &slice).is_ok();
        assert!(index.verify(i, &payload[..0]).is_err() || e.length == 0);
    }
    if stride != 0 {
        // The one-GET path must agree with the footer path, slot by slot: a slot it
        // opens is the entry's slice.
        let crc = footer_crc(index, object);
        let sealed = open_sealed_run(&payload, 0, n, stride, crc);
        all_ok &= sealed.is_ok();
        if let Ok(slices) = &sealed {
            for (i, s) in (0..n).zip(slices) {
                let opened_ok = index.verify(i, s).is_ok();
                all_ok &= opened_ok;
            }
        }
    }
    let split = index.split_run(0, n, &payload);
    assert_eq!(split.is_ok(), all_ok, "split_run disagrees with verify");
    assert!(
        index
            .split_run(0, n, &payload.slice(1.min(payload.len())..))
            .is_err()
            || payload.is_empty()
    );
    if let (Ok(slices), Some(object)) = (split, object) {
        let again = if stride == 0 {
            encode_tgb(index.dp(), index.cp(), slices)
        } else {
            encode_tgb_sealed(index.dp(), index.cp(), slices)
        }
        .expect("decoded grid re-encodes");
        // A sealed object whose seals all open re-encodes exactly unless its stride is
        // wider than its longest slice needs (the encoder picks the narrowest).
        if stride == 0 || again.slice_stride == stride {
            assert_eq!(&again.to_bytes()[..], object, "TGB re-encoding differs");
        }
    }
}

/// The footer CRC32 a seal must name: the trailer's, when the object is known (else any
/// value; the checks then only exercise the refusal paths).
fn footer_crc(index: &SliceIndex, object: Option<&[u8]>) -> u32 {
    object
        .and_then(|o| decode_trailer(o).ok())
        .map_or(index.footer_offset() as u32, |t| t.footer_crc32)
}
