//! The manifest's record of one encoded TGB.

use batchweave_manifest::{TgbDescriptor, described_tgb_key, tgb_key};
use batchweave_tgb::{EncodedTgb, TgbTail};

/// The descriptor that records `enc`, uploaded as TGB `sequence` of epoch `epoch` of
/// `producer_id` and covering the producer's source up to `source_offset`.
///
/// The key is the self-describing [`described_tgb_key`] of the descriptor (key form 2,
/// whose prefix is [`tgb_key`](batchweave_manifest::tgb_key)`(producer_id, epoch,
/// sequence)`: the reader rule `tgb-key`), so that a cooperative committer can publish
/// the upload from a listing; the object layout (size, grid, footer location and CRC, payload bytes) is `enc`'s,
/// and `visible_version` is 0: [`rebase`](batchweave_manifest::rebase) sets it to the
/// version that makes the TGB visible. This is the one place that maps an encoded TGB
/// onto a descriptor; [`Producer::append`](crate::Producer::append) uses it.
pub fn tgb_descriptor(
    enc: &EncodedTgb,
    producer_id: &str,
    epoch: u64,
    sequence: u64,
    source_offset: u64,
) -> TgbDescriptor {
    let mut d = TgbDescriptor {
        key: String::new(),
        object_size: enc.object_size,
        dp: enc.dp,
        cp: enc.cp,
        footer_offset: enc.footer_offset,
        footer_length: enc.footer_length,
        footer_crc32: enc.footer_crc32,
        producer_id: producer_id.to_owned(),
        epoch,
        sequence,
        visible_version: 0,
        payload_bytes: enc.payload_bytes,
        source_offset,
        slice_stride: enc.slice_stride,
    };
    d.key = described_tgb_key(&d);
    d
}

/// The descriptor of a streamed TGB ([`Producer::stream_tgb`](crate::Producer::stream_tgb)),
/// whose layout was known only once its upload had begun: its key is the plain
/// [`tgb_key`] (key form 1), which says no layout, so only its own producer commits it
/// (a cooperative committer publishes from keys of form 2 alone, and stops at the gap).
pub(crate) fn streamed_tgb_descriptor(
    tail: &TgbTail,
    producer_id: &str,
    epoch: u64,
    sequence: u64,
    source_offset: u64,
) -> TgbDescriptor {
    TgbDescriptor {
        key: tgb_key(producer_id, epoch, sequence),
        object_size: tail.object_size,
        dp: tail.dp,
        cp: tail.cp,
        footer_offset: tail.footer_offset,
        footer_length: tail.footer_length,
        footer_crc32: tail.footer_crc32,
        producer_id: producer_id.to_owned(),
        epoch,
        sequence,
        visible_version: 0,
        payload_bytes: tail.footer_offset,
        source_offset,
        slice_stride: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use batchweave_manifest::{DecodeLimits, validate_descriptor};
    use batchweave_tgb::encode_tgb;
    use bytes::Bytes;

    #[test]
    fn the_descriptor_records_the_object_and_passes_the_descriptor_rules() {
        let slices = (0..6).map(|i| Bytes::from(vec![i; 10])).collect();
        let enc = encode_tgb(3, 2, slices).unwrap();
        let d = tgb_descriptor(&enc, "p-1", 4, 9, 77);
        assert!(
            d.key
                .starts_with(tgb_key("p-1", 4, 9).trim_end_matches(".tgb"))
        );
        let listed = batchweave_manifest::descriptor_from_key(&d.key, enc.object_size).unwrap();
        assert_eq!(listed, d);
        assert_eq!((d.dp, d.cp, d.object_size), (3, 2, enc.object_size));
        assert_eq!(
            (d.footer_offset, d.footer_length, d.footer_crc32),
            (enc.footer_offset, enc.footer_length, enc.footer_crc32)
        );
        assert_eq!(
            (d.payload_bytes, d.source_offset, d.visible_version),
            (60, 77, 0)
        );
        validate_descriptor(0, &d, 0, &DecodeLimits::default()).unwrap();
    }
}
