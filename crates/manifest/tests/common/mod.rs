//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use batchweave_manifest::{Manifest, Pending, ProducerState, TgbDescriptor, tgb_key};
use proptest::prelude::*;

/// A valid descriptor of `producer`'s TGB `(epoch, sequence)`.
pub fn tgb(producer: &str, epoch: u64, sequence: u64) -> TgbDescriptor {
    let size = 1000 + sequence * 7;
    TgbDescriptor {
        key: tgb_key(producer, epoch, sequence),
        object_size: size,
        dp: 2,
        cp: 2,
        footer_offset: size - 100,
        footer_length: 64,
        footer_crc32: 0xdead_beef,
        producer_id: producer.to_owned(),
        epoch,
        sequence,
        visible_version: 0,
        payload_bytes: size - 200,
        source_offset: sequence * 10,
    }
}

/// A pending batch of sequences `seqs` for `(producer, epoch, incarnation)`.
pub fn pending(
    producer: &str,
    epoch: u64,
    incarnation: u64,
    seqs: std::ops::RangeInclusive<u64>,
) -> Pending {
    let tgbs: Vec<_> = seqs.map(|s| tgb(producer, epoch, s)).collect();
    Pending {
        producer_id: producer.to_owned(),
        epoch,
        incarnation,
        source_offset: tgbs.last().map_or(0, |t| t.source_offset),
        tgbs,
        now_ms: 1_000,
    }
}

fn id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,16}".prop_filter("reserved", |s| s != "." && s != "..")
}

fn descriptor() -> impl Strategy<Value = TgbDescriptor> {
    (
        id(),
        any::<u32>(),
        1..=64u32,
        1..=64u32,
        8..=1000u32,
        any::<u32>(),
        (
            any::<u64>(),
            1..u64::MAX,
            0..1000u64,
            any::<u64>(),
            any::<u32>(),
        ),
    )
        .prop_map(
            |(
                producer,
                body,
                dp,
                cp,
                footer_length,
                footer_crc32,
                (epoch, sequence, vis, src, pay),
            )| {
                let object_size = u64::from(body) + u64::from(footer_length);
                TgbDescriptor {
                    key: tgb_key(&producer, epoch, sequence),
                    object_size,
                    dp,
                    cp,
                    footer_offset: u64::from(body),
                    footer_length,
                    footer_crc32,
                    producer_id: producer,
                    epoch,
                    sequence,
                    visible_version: vis,
                    payload_bytes: u64::from(pay) % (u64::from(body) + 1),
                    source_offset: src,
                }
            },
        )
}

fn producer_state() -> impl Strategy<Value = ProducerState> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
        0..1000u64,
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(
            |(epoch, incarnation, source_offset, last_sequence, lcv, tgbs_committed, ms)| {
                ProducerState {
                    epoch,
                    incarnation,
                    source_offset,
                    last_sequence,
                    last_commit_version: lcv,
                    tgbs_committed,
                    last_commit_ms: ms,
                }
            },
        )
}

/// Random manifests that satisfy every invariant of `validate`.
pub fn valid_manifest() -> impl Strategy<Value = Manifest> {
    (
        1000..u64::MAX / 2,
        0..u64::MAX / 4,
        proptest::collection::vec(descriptor(), 0..8),
        proptest::collection::btree_map(id(), producer_state(), 0..5),
        any::<u64>(),
    )
        .prop_map(
            |(version, first_step, tgbs, producers, committed_at_ms)| Manifest {
                version,
                first_step,
                total_tgbs: first_step + tgbs.len() as u64,
                retained_bytes: tgbs.iter().map(|t| t.object_size).sum(),
                tgbs,
                producers,
                committed_at_ms,
            },
        )
}

/// A pending batch without TGBs (an epoch claim or an offset-only commit).
pub fn empty(producer: &str, epoch: u64, incarnation: u64, source_offset: u64) -> Pending {
    Pending {
        producer_id: producer.to_owned(),
        epoch,
        incarnation,
        tgbs: Vec::new(),
        source_offset,
        now_ms: 1_000,
    }
}
