//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use batchweave_manifest::{
    Manifest, Pending, ProducerState, TgbDescriptor, rebase, stream_grid, tgb_key,
};
use proptest::prelude::*;

/// A valid descriptor of `producer`'s TGB `(epoch, sequence)`.
pub fn tgb(producer: &str, epoch: u64, sequence: u64) -> TgbDescriptor {
    // The layout of a 2 x 2 TGB: slices, a footer of 20 + 20 * 4 bytes, the trailer.
    let payload = 1000 + sequence * 7;
    TgbDescriptor {
        key: tgb_key(producer, epoch, sequence),
        object_size: payload + 100 + 32,
        dp: 2,
        cp: 2,
        footer_offset: payload,
        footer_length: 100,
        footer_crc32: 0xdead_beef,
        producer_id: producer.to_owned(),
        epoch,
        sequence,
        visible_version: 0,
        payload_bytes: payload,
        source_offset: sequence * 10,
        slice_stride: 0,
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

/// A small deterministic generator (splitmix64) for descriptor layouts.
pub struct Mix(pub u64);

impl Mix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A valid descriptor of `producer`'s TGB `(epoch, sequence)` with grid
/// `(dp, cp)`, source offset `source_offset` and a layout drawn from `mix`.
pub fn random_tgb(
    mix: &mut Mix,
    producer: &str,
    epoch: u64,
    sequence: u64,
    (dp, cp): (u32, u32),
    source_offset: u64,
) -> TgbDescriptor {
    let footer_length = 20 + 20 * dp * cp;
    let body = mix.below(1 << 20);
    TgbDescriptor {
        key: tgb_key(producer, epoch, sequence),
        object_size: body + u64::from(footer_length) + 32,
        dp,
        cp,
        footer_offset: body,
        footer_length,
        footer_crc32: mix.next() as u32,
        producer_id: producer.to_owned(),
        epoch,
        sequence,
        visible_version: 0,
        payload_bytes: body,
        source_offset,
        slice_stride: 0,
    }
}

/// One commit of a random chain.
#[derive(Debug, Clone)]
pub struct Commit {
    /// Index of the committing producer (modulo the number of producers).
    pub who: usize,
    /// Number of new TGBs (0 = an offset-only commit, or a TGB-less claim).
    pub tgbs: usize,
    /// A new incarnation with a higher epoch that recovered from the newest version.
    pub claim: bool,
    /// Resend the producer's last committed batch too (its reply was lost).
    pub replay: bool,
    /// How far the batch's source offset runs past its last TGB.
    pub offset_gap: u64,
    /// Trim point (reduced modulo the base's total + 2), or none.
    pub trim: Option<u64>,
    /// Seed of the TGB layouts, offsets and incarnation.
    pub seed: u64,
}

pub fn commit() -> impl Strategy<Value = Commit> {
    (
        any::<usize>(),
        prop_oneof![1 => Just(0usize), 4 => 1..=3usize],
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.2),
        prop_oneof![3 => Just(0u64), 1 => 0..5u64],
        prop::option::weighted(0.3, any::<u64>()),
        any::<u64>(),
    )
        .prop_map(
            |(who, tgbs, claim, replay, offset_gap, trim, seed)| Commit {
                who,
                tgbs,
                claim,
                replay,
                offset_gap,
                trim,
                seed,
            },
        )
}

/// Producer ids of [`build_chain`]: `p0`, `p1`, ...
pub fn chain_id(i: usize) -> String {
    format!("p{i}")
}

struct ChainProducer {
    id: String,
    epoch: u64,
    incarnation: u64,
    next_sequence: u64,
    offset: u64,
    last_batch: Vec<TgbDescriptor>,
}

/// Applies `commits` one after the other with [`rebase`], each on the newest
/// version, by `producers` producers `p0..` that all use `grid`. Returns the
/// chain, `base` first. Producers with an entry in `base` continue it.
pub fn build_chain(
    base: Manifest,
    producers: usize,
    grid: (u32, u32),
    commits: &[Commit],
) -> Vec<Manifest> {
    let mut ps: Vec<ChainProducer> = (0..producers)
        .map(|i| {
            let id = chain_id(i);
            let e = base.producers.get(&id).copied().unwrap_or_default();
            ChainProducer {
                epoch: e.epoch.max(1),
                incarnation: if e.epoch == 0 {
                    100 + i as u64
                } else {
                    e.incarnation
                },
                next_sequence: e.last_sequence + 1,
                offset: e.source_offset,
                last_batch: Vec::new(),
                id,
            }
        })
        .collect();
    let mut chain = vec![base];
    for c in commits {
        let head = chain.last().unwrap();
        let p = &mut ps[c.who % producers];
        let mut mix = Mix(c.seed);
        if c.claim {
            let e = head.producers.get(&p.id).copied().unwrap_or_default();
            p.epoch = p.epoch.max(e.epoch) + 1;
            p.incarnation = mix.next();
            p.next_sequence = e.last_sequence + 1;
            p.offset = e.source_offset;
            p.last_batch.clear();
        }
        let mut new = Vec::new();
        for k in 0..c.tgbs as u64 {
            p.offset += mix.below(3);
            new.push(random_tgb(
                &mut mix,
                &p.id,
                p.epoch,
                p.next_sequence + k,
                grid,
                p.offset,
            ));
        }
        // A TGB-less claim carries the committed offset; anything else may run ahead.
        if !(c.claim && new.is_empty()) {
            p.offset += c.offset_gap;
        }
        let mut tgbs = if c.replay {
            p.last_batch.clone()
        } else {
            Vec::new()
        };
        tgbs.extend(new.iter().cloned());
        let pending = Pending {
            producer_id: p.id.clone(),
            epoch: p.epoch,
            incarnation: p.incarnation,
            tgbs,
            source_offset: p.offset,
            now_ms: 1_700_000_000_000 + chain.len() as u64,
        };
        let trim = c.trim.map_or(0, |t| t % (head.total_tgbs + 2));
        let next = rebase(head, &pending, trim)
            .unwrap_or_else(|e| panic!("rebase {c:?} on version {}: {e}", head.version));
        p.next_sequence += new.len() as u64;
        if !new.is_empty() {
            p.last_batch = new;
        }
        chain.push(next);
    }
    chain
}

/// A valid version whose TGBs were all trimmed: `producers` entries `p0..`
/// with large counters, so chains built on it start far from zero.
pub fn prefix_base() -> impl Strategy<Value = Manifest> {
    (
        1000..u64::MAX / 2,
        proptest::collection::vec(
            (
                1..1000u64,
                any::<u64>(),
                0..u64::MAX / 4,
                0..u64::MAX / 16,
                any::<u64>(),
            ),
            1..4,
        ),
        any::<usize>(),
        (1..=64u32, 1..=64u32),
    )
        .prop_map(|(version, entries, committer, grid)| {
            let committer = committer % entries.len();
            let producers: std::collections::BTreeMap<String, ProducerState> = entries
                .iter()
                .enumerate()
                .map(
                    |(i, &(epoch, incarnation, source_offset, last_sequence, ms))| {
                        let state = ProducerState {
                            epoch,
                            incarnation,
                            source_offset,
                            last_sequence,
                            last_commit_version: if i == committer {
                                version
                            } else {
                                version - 1 - i as u64
                            },
                            tgbs_committed: last_sequence,
                            last_commit_ms: ms,
                            max_commit_age_ms: 0,
                        };
                        (chain_id(i), state)
                    },
                )
                .collect();
            let total: u64 = entries.iter().map(|e| e.3).sum();
            let (grid_dp, grid_cp) = if total > 0 { grid } else { (0, 0) };
            Manifest {
                version,
                first_step: total,
                total_tgbs: total,
                producers,
                committed_at_ms: 1_700_000_000_000,
                grid_dp,
                grid_cp,
                ..Manifest::default()
            }
        })
}

/// A random chain: its producer count, grid and the versions (base first;
/// the base is genesis or a [`prefix_base`]).
pub fn chain() -> impl Strategy<Value = (usize, (u32, u32), Vec<Manifest>)> {
    (
        prop_oneof![Just(None), prefix_base().prop_map(Some)],
        1..=4usize,
        (1..=8u32, 1..=8u32),
        proptest::collection::vec(commit(), 0..24),
    )
        .prop_map(|(base, n, grid, commits)| {
            let (base, grid) = match base {
                Some(b) => {
                    let grid = stream_grid(&b).unwrap_or(grid);
                    (b, grid)
                }
                None => (Manifest::genesis(), grid),
            };
            (n, grid, build_chain(base, n, grid, &commits))
        })
}

/// Random manifests that satisfy every invariant of `validate`: the newest
/// version of a random chain, sometimes without the grid fields (as a
/// version written before they existed).
pub fn valid_manifest() -> impl Strategy<Value = Manifest> {
    (chain(), any::<bool>(), any::<u64>()).prop_map(|((_, _, chain), old, ms)| {
        let mut m = chain.last().cloned().unwrap();
        if old {
            m.grid_dp = 0;
            m.grid_cp = 0;
        }
        m.committed_at_ms = ms;
        m
    })
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
