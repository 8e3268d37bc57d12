//! Encode/decode roundtrips, corruption detection and hostile-bytes behaviour of the layout.

use batchweave_tgb::{
    FOOTER_HEADER_LEN, FOOTER_MAGIC, FooterCheck, TRAILER_LEN, TgbError, TgbStreamEncoder,
    decode_footer, decode_object, decode_trailer, encode_tgb, footer_len,
};
use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;

fn grid_and_slices() -> impl Strategy<Value = (u32, u32, Vec<Vec<u8>>)> {
    (1u32..=4, 1u32..=4).prop_flat_map(|(d, c)| {
        (
            Just(d),
            Just(c),
            vec(vec(any::<u8>(), 0..40), (d * c) as usize),
        )
    })
}

fn encode(d: u32, c: u32, slices: &[Vec<u8>]) -> (batchweave_tgb::EncodedTgb, Bytes) {
    let parts = slices.iter().map(|s| Bytes::copy_from_slice(s)).collect();
    let enc = encode_tgb(d, c, parts).unwrap();
    let obj = enc.to_bytes();
    (enc, obj)
}

fn manifest_check(enc: &batchweave_tgb::EncodedTgb) -> FooterCheck {
    FooterCheck::new(enc.footer_offset, enc.footer_crc32).with_object_size(enc.object_size)
}

fn footer_bytes(enc: &batchweave_tgb::EncodedTgb, obj: &Bytes) -> Bytes {
    let start = enc.footer_offset as usize;
    obj.slice(start..start + enc.footer_length as usize)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn roundtrip_is_identity((d, c, slices) in grid_and_slices()) {
        let (enc, obj) = encode(d, c, &slices);
        let payload: usize = slices.iter().map(Vec::len).sum();
        prop_assert_eq!(enc.payload_bytes, payload as u64);
        prop_assert_eq!(enc.object_size, obj.len() as u64);
        prop_assert_eq!(enc.object_size, payload as u64 + footer_len(d * c) + TRAILER_LEN as u64);
        prop_assert_eq!(enc.footer(), footer_bytes(&enc, &obj));

        let from_object = decode_object(&obj).unwrap();
        let index = decode_footer(&footer_bytes(&enc, &obj), manifest_check(&enc)).unwrap();
        prop_assert_eq!(&from_object, &index);
        prop_assert_eq!((index.dp(), index.cp()), (d, c));
        prop_assert_eq!(index.footer_offset(), enc.footer_offset);
        for dd in 0..d {
            for cc in 0..c {
                let id = index.slice_id(dd, cc).unwrap();
                prop_assert_eq!(id, dd * c + cc);
                let r = index.slice(dd, cc).unwrap().range();
                let got = obj.slice(r.start as usize..r.end as usize);
                prop_assert_eq!(&got[..], &slices[id as usize][..]);
                index.verify(id, &got).unwrap();
            }
            // One replica's C chunks are one contiguous range.
            let r = index.range_of(dd * c, c).unwrap();
            let run = obj.slice(r.start as usize..r.end as usize);
            let want: Vec<u8> = slices[(dd * c) as usize..((dd + 1) * c) as usize].concat();
            prop_assert_eq!(&run[..], &want[..]);
            let split = index.split_run(dd * c, c, &run).unwrap();
            prop_assert_eq!(split.len(), c as usize);
        }
        prop_assert!(index.slice(d, 0).is_err());
        prop_assert!(index.range_of(0, d * c + 1).is_err());
        prop_assert!(index.range_of(0, 0).is_err());
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes(
        bytes in vec(any::<u8>(), 0..200),
        offset in any::<u64>(),
        size in any::<u64>(),
    ) {
        let _ = decode_trailer(&bytes);
        let _ = decode_object(&bytes);
        let crc = crc32fast::hash(&bytes);
        let _ = decode_footer(&bytes, FooterCheck::new(offset, crc));
        let _ = decode_footer(&bytes, FooterCheck::new(offset, crc).with_object_size(size));
    }

    /// Valid-CRC footers with mutated fields reach the structural checks; whatever they
    /// accept still satisfies the layout invariants.
    #[test]
    fn mutated_footers_with_fixed_crc_never_panic(
        (d, c, slices) in grid_and_slices(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        offset_delta in -3i64..3,
    ) {
        let (enc, obj) = encode(d, c, &slices);
        let mut footer = footer_bytes(&enc, &obj).to_vec();
        for (at, v) in edits {
            let i = at.index(footer.len());
            footer[i] = v;
        }
        let crc = crc32fast::hash(&footer);
        let offset = enc.footer_offset.saturating_add_signed(offset_delta);
        if let Ok(index) = decode_footer(&footer, FooterCheck::new(offset, crc)) {
            let mut next = 0;
            for e in index.entries() {
                prop_assert_eq!(e.offset, next);
                next = e.offset + e.length;
            }
            prop_assert_eq!(next, offset);
            prop_assert_eq!(index.entries().len() as u32, index.dp() * index.cp());
        }
    }

    #[test]
    fn any_flip_in_footer_or_trailer_is_detected(
        (d, c, slices) in grid_and_slices(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let (enc, obj) = encode(d, c, &slices);
        let tail_start = enc.footer_offset as usize;
        let i = tail_start + at.index(obj.len() - tail_start);
        let mut bad = obj.to_vec();
        bad[i] ^= mask;
        prop_assert!(decode_object(&bad).is_err(), "flip at {} of {} not detected", i, bad.len());
        if i < tail_start + enc.footer_length as usize {
            let footer = &bad[tail_start..tail_start + enc.footer_length as usize];
            let err = decode_footer(footer, manifest_check(&enc)).unwrap_err();
            prop_assert!(matches!(err, TgbError::FooterChecksum { .. }), "{err}");
        }
    }

    #[test]
    fn any_flip_in_a_slice_is_detected_by_verify(
        (d, c, slices) in grid_and_slices(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..=255,
    ) {
        let (enc, obj) = encode(d, c, &slices);
        prop_assume!(enc.payload_bytes > 0);
        let index = decode_object(&obj).unwrap();
        let i = at.index(enc.payload_bytes as usize) as u64;
        let id = index.entries().iter().position(|e| e.range().contains(&i)).unwrap() as u32;
        let r = index.entry(id).unwrap().range();
        let mut bytes = obj[r.start as usize..r.end as usize].to_vec();
        bytes[(i - r.start) as usize] ^= mask;
        let err = index.verify(id, &bytes).unwrap_err();
        prop_assert!(
            matches!(err, TgbError::SliceChecksum { slice, .. } if slice == id),
            "{err}"
        );
        let names_slice = err.to_string().contains(&format!("slice {id}"));
        prop_assert!(names_slice, "{}", err);
    }
}

fn header(dp: u32, cp: u32) -> Vec<u8> {
    let mut h = FOOTER_MAGIC.to_vec();
    h.extend_from_slice(&1u16.to_le_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&dp.to_le_bytes());
    h.extend_from_slice(&cp.to_le_bytes());
    assert_eq!(h.len(), FOOTER_HEADER_LEN);
    h
}

fn check_of(bytes: &[u8]) -> FooterCheck {
    FooterCheck::new(0, crc32fast::hash(bytes))
}

#[test]
fn huge_claimed_grid_is_rejected_before_allocating() {
    let h = header(65_536, 1);
    let err = decode_footer(&h, check_of(&h)).unwrap_err();
    assert_eq!(
        err,
        TgbError::Length {
            what: "TGB footer",
            expected: footer_len(65_536),
            actual: 20
        }
    );
    let h = header(u32::MAX, u32::MAX);
    assert!(matches!(
        decode_footer(&h, check_of(&h)),
        Err(TgbError::InvalidGrid { .. })
    ));
    let h = header(0, 1);
    assert!(matches!(
        decode_footer(&h, check_of(&h)),
        Err(TgbError::InvalidGrid { .. })
    ));
}

#[test]
fn slices_must_lie_back_to_back_before_the_footer() {
    let mut f = header(1, 2);
    for (off, len) in [(0u64, 4u64), (5, 4)] {
        f.extend_from_slice(&off.to_le_bytes());
        f.extend_from_slice(&len.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
    }
    let err = decode_footer(&f, FooterCheck::new(9, crc32fast::hash(&f))).unwrap_err();
    assert!(
        matches!(
            err,
            TgbError::SliceOutOfPlace {
                slice: 1,
                offset: 5,
                ..
            }
        ),
        "{err}"
    );

    // End offset overflowing u64.
    let mut f = header(1, 2);
    for (off, len) in [(0u64, u64::MAX), (u64::MAX, 1)] {
        f.extend_from_slice(&off.to_le_bytes());
        f.extend_from_slice(&len.to_le_bytes());
        f.extend_from_slice(&0u32.to_le_bytes());
    }
    let err = decode_footer(&f, FooterCheck::new(u64::MAX, crc32fast::hash(&f))).unwrap_err();
    assert!(
        matches!(err, TgbError::SliceOutOfPlace { slice: 1, .. }),
        "{err}"
    );

    // Slice overlapping the footer.
    let mut f = header(1, 1);
    f.extend_from_slice(&0u64.to_le_bytes());
    f.extend_from_slice(&10u64.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    let err = decode_footer(&f, FooterCheck::new(9, crc32fast::hash(&f))).unwrap_err();
    assert!(
        matches!(err, TgbError::SliceOutOfPlace { slice: 0, .. }),
        "{err}"
    );
    assert!(decode_footer(&f, FooterCheck::new(10, crc32fast::hash(&f))).is_ok());
}

#[test]
fn manifest_disagreeing_with_object_is_rejected() {
    let enc = encode_tgb(
        1,
        2,
        vec![Bytes::from_static(b"ab"), Bytes::from_static(b"cde")],
    )
    .unwrap();
    let obj = enc.to_bytes();
    let footer = enc.footer();
    // Wrong offset: slices no longer end at the footer.
    let err = decode_footer(&footer, FooterCheck::new(6, enc.footer_crc32)).unwrap_err();
    assert!(
        matches!(
            err,
            TgbError::LayoutMismatch {
                expected: 6,
                actual: 5,
                ..
            }
        ),
        "{err}"
    );
    // Wrong object size.
    let check = FooterCheck::new(5, enc.footer_crc32).with_object_size(enc.object_size + 1);
    assert!(matches!(
        decode_footer(&footer, check),
        Err(TgbError::LayoutMismatch { .. })
    ));
    // Truncated object.
    assert!(decode_object(&obj[1..]).is_err());
    assert!(decode_object(&obj[..obj.len() - 1]).is_err());
    // Wrong length fetched for a run.
    let index = decode_object(&obj).unwrap();
    let err = index.split_run(0, 2, &obj.slice(0..4)).unwrap_err();
    assert!(
        matches!(
            err,
            TgbError::SliceLength {
                expected: 5,
                actual: 4,
                ..
            }
        ),
        "{err}"
    );
    assert!(matches!(
        index.verify(1, b"cd"),
        Err(TgbError::SliceLength { slice: 1, .. })
    ));
    assert!(matches!(
        index.verify(2, b""),
        Err(TgbError::NoSuchSlice { .. })
    ));
}

/// A slice's bytes cut at the given points (each taken modulo the length).
fn chunks(s: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (s.len() + 1)).collect();
    at.push(0);
    at.push(s.len());
    at.sort_unstable();
    at.windows(2).map(|w| s[w[0]..w[1]].to_vec()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Streaming the slices in arbitrary pieces (empty ones included) gives exactly the
    /// object `encode_tgb` makes of them, which the golden test pins to the spec.
    #[test]
    fn streamed_object_equals_the_encoded_one(
        (d, c, slices) in grid_and_slices(),
        cuts in vec(any::<usize>(), 0..6),
    ) {
        let (enc, obj) = encode(d, c, &slices);
        let mut s = TgbStreamEncoder::new(d, c).unwrap();
        let mut streamed = Vec::new();
        for slice in &slices {
            for piece in chunks(slice, &cuts) {
                s.write(&piece).unwrap();
                streamed.extend_from_slice(&piece);
            }
            s.end_slice().unwrap();
        }
        prop_assert_eq!(s.bytes_written(), enc.payload_bytes);
        let tail = s.finish().unwrap();
        streamed.extend_from_slice(&tail.bytes);
        prop_assert_eq!(&streamed[..], &obj[..]);
        prop_assert_eq!(
            (tail.object_size, tail.footer_offset, tail.footer_length, tail.footer_crc32),
            (enc.object_size, enc.footer_offset, enc.footer_length, enc.footer_crc32)
        );
        prop_assert!(decode_object(&Bytes::from(streamed)).is_ok());
    }
}

#[test]
fn the_stream_encoder_refuses_a_wrong_slice_count() {
    assert!(matches!(
        TgbStreamEncoder::new(0, 2),
        Err(TgbError::InvalidGrid { .. })
    ));
    // Finishing early.
    let mut s = TgbStreamEncoder::new(2, 1).unwrap();
    s.write(b"a").unwrap();
    s.end_slice().unwrap();
    assert_eq!((s.slices_closed(), s.slices_needed()), (1, 2));
    assert!(matches!(
        s.clone().finish(),
        Err(TgbError::SliceCountMismatch {
            expected: 2,
            actual: 1,
            ..
        })
    ));
    // Bytes left in an unclosed last slice belong to no slice.
    s.write(b"b").unwrap();
    assert!(matches!(
        s.clone().finish(),
        Err(TgbError::SliceCountMismatch { .. })
    ));
    s.end_slice().unwrap();
    // A write or a slice beyond D * C.
    assert!(matches!(
        s.clone().write(b"c"),
        Err(TgbError::SliceCountMismatch {
            expected: 2,
            actual: 3,
            ..
        })
    ));
    assert!(matches!(
        s.clone().end_slice(),
        Err(TgbError::SliceCountMismatch { .. })
    ));
    let tail = s.finish().unwrap();
    assert_eq!(tail.footer_offset, 2);
}
