//! The sealed layout (format version 2): roundtrips through both read paths (one GET per
//! slot, and footer + ranged GET), agreement of seals and footer, corruption and hostile
//! bytes.

use batchweave_tgb::{
    FooterCheck, SEAL_LEN, SEALED_FORMAT_VERSION, TgbError, decode_footer, decode_object,
    decode_trailer, encode_tgb_sealed, join_slices, open_sealed_run,
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
    let enc = encode_tgb_sealed(d, c, parts).unwrap();
    let obj = enc.to_bytes();
    (enc, obj)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn both_read_paths_return_every_slice((d, c, slices) in grid_and_slices()) {
        let (enc, obj) = encode(d, c, &slices);
        let n = u64::from(d * c);
        let longest = slices.iter().map(Vec::len).max().unwrap_or(0) as u64;
        prop_assert_eq!(enc.slice_stride, longest + SEAL_LEN as u64);
        prop_assert_eq!(enc.payload_bytes, n * enc.slice_stride);
        prop_assert_eq!(enc.footer_offset, enc.payload_bytes);
        prop_assert_eq!(obj.len() as u64, enc.object_size);
        prop_assert_eq!(decode_trailer(&obj).unwrap().version, SEALED_FORMAT_VERSION);

        let index = decode_object(&obj).unwrap();
        let start = enc.footer_offset as usize;
        let footer = obj.slice(start..start + enc.footer_length as usize);
        let check = FooterCheck::new(enc.footer_offset, enc.footer_crc32)
            .with_object_size(enc.object_size);
        prop_assert_eq!(&decode_footer(&footer, check).unwrap(), &index);
        prop_assert_eq!(index.slice_stride(), enc.slice_stride);

        let n = d * c;
        for first in 0..n {
            for count in 1..=(n - first) {
                let want: Vec<u8> = slices[first as usize..(first + count) as usize].concat();
                // One GET, no footer: what a rank does with the manifest's stride.
                let l = enc.slice_stride as usize;
                let run = obj.slice(first as usize * l..(first + count) as usize * l);
                let got = open_sealed_run(&run, first, count, enc.slice_stride, enc.footer_crc32)
                    .unwrap();
                prop_assert_eq!(&join_slices(got)[..], &want[..]);
                // Footer first: the range it gives is the same slots.
                let r = index.range_of(first, count).unwrap();
                prop_assert_eq!(r.clone(), (first as u64 * enc.slice_stride)..((first + count) as u64 * enc.slice_stride));
                let got = index.split_run(first, count, &run).unwrap();
                prop_assert_eq!(&join_slices(got)[..], &want[..]);
            }
        }
    }

    #[test]
    fn any_flip_in_a_slot_is_caught_by_both_paths(
        (d, c, slices) in grid_and_slices(),
        pick in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let (enc, obj) = encode(d, c, &slices);
        let payload = enc.payload_bytes as usize;
        let at = pick.index(payload);
        let mut bad = obj.to_vec();
        bad[at] ^= 1 << bit;
        let bad = Bytes::from(bad);
        let l = enc.slice_stride as usize;
        let slot = at / l;
        let run = bad.slice(slot * l..(slot + 1) * l);
        prop_assert!(open_sealed_run(&run, slot as u32, 1, enc.slice_stride, enc.footer_crc32).is_err());
        prop_assert!(decode_object(&bad).is_err());
        let index = decode_object(&obj).unwrap();
        prop_assert!(index.split_run(slot as u32, 1, &run).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in vec(any::<u8>(), 0..200),
        first in 0u32..4,
        count in 0u32..4,
        stride in 0u64..80,
        crc in any::<u32>(),
    ) {
        let b = Bytes::from(bytes);
        let _ = open_sealed_run(&b, first, count, stride, crc);
        let _ = decode_object(&b);
    }
}

/// A writer whose seals disagree with its footer (a seal re-made for other bytes) writes an
/// object that a reader of the whole object refuses, although every slot opens.
#[test]
fn seals_that_disagree_with_the_footer_are_refused() {
    let enc = encode_tgb_sealed(2, 1, vec![Bytes::from_static(b"abcd"); 2]).unwrap();
    let mut obj = enc.to_bytes().to_vec();
    let l = enc.slice_stride as usize;
    // Slot 1 now holds "abce" with a seal that matches it.
    obj[l + 3] = b'e';
    let crc = crc32fast::hash(b"abce");
    obj[2 * l - 8..2 * l - 4].copy_from_slice(&crc.to_le_bytes());
    let obj = Bytes::from(obj);
    let slot = obj.slice(l..2 * l);
    assert!(open_sealed_run(&slot, 1, 1, enc.slice_stride, enc.footer_crc32).is_ok());
    assert!(matches!(
        decode_object(&obj),
        Err(TgbError::SliceChecksum { slice: 1, .. })
    ));
    let index = decode_object(&enc.to_bytes()).unwrap();
    assert!(matches!(
        index.split_run(1, 1, &slot),
        Err(TgbError::SliceChecksum { slice: 1, .. })
    ));
}

/// A version-1 trailer on a sealed footer (or the other way round) is refused.
#[test]
fn trailer_and_footer_versions_must_agree() {
    let enc = encode_tgb_sealed(1, 1, vec![Bytes::from_static(b"x")]).unwrap();
    let mut obj = enc.to_bytes().to_vec();
    let at = obj.len() - 16;
    obj[at] = 1;
    assert!(matches!(
        decode_object(&obj),
        Err(TgbError::LayoutMismatch { .. })
    ));
}

/// A sealed footer whose offset is not slices x stride, or whose stride is below the seal,
/// or whose entry leaves no room for the seal, is refused.
#[test]
fn sealed_footers_must_describe_slots() {
    let enc = encode_tgb_sealed(2, 1, vec![Bytes::from_static(b"ab"); 2]).unwrap();
    let obj = enc.to_bytes();
    let start = enc.footer_offset as usize;
    let footer = obj.slice(start..start + enc.footer_length as usize);
    let crc = enc.footer_crc32;
    // Offset not a multiple of the slot count.
    assert!(decode_footer(&footer, FooterCheck::new(enc.footer_offset + 1, crc)).is_err());
    // Stride below the seal.
    assert!(decode_footer(&footer, FooterCheck::new(2 * (SEAL_LEN as u64 - 1), crc)).is_err());
    // An entry longer than its slot's room, CRC fixed up.
    let mut f = footer.to_vec();
    f[20 + 8] = (enc.slice_stride - SEAL_LEN as u64 + 1) as u8;
    let crc = crc32fast::hash(&f);
    assert!(matches!(
        decode_footer(&f, FooterCheck::new(enc.footer_offset, crc)),
        Err(TgbError::SliceOutOfPlace { slice: 0, .. })
    ));
}
