//! Cooperative commits ([`rebase_cooperative`], `docs/format.md` section 5.5).
//!
//! Property tests check a cooperative candidate against an independent model of which
//! uploads a committer publishes for other producers, then the race of a second
//! committer on top of it and the merge of later plain commits. Example tests build
//! cooperative versions that break one rule each and check that readers refuse them
//! under the right rule name, and cover the self-describing keys (form 2) that
//! cooperative commits rely on.

mod common;

use std::collections::BTreeSet;

use batchweave_manifest::{
    DecodeLimits, Manifest, Pending, ProducerState, RebaseError, TgbDescriptor, check_extends,
    decode_manifest, described_tgb_key, descriptor_from_key, encode_manifest,
    parse_described_tgb_key, parse_tgb_key, rebase, rebase_cooperative, rules, stream_grid,
    tgb_key, tgb_key_after, validate, validate_descriptor,
};
use common::{Mix, pending, random_tgb, tgb};
use proptest::collection::vec;
use proptest::prelude::*;

fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

/// `d` under its self-describing key (form 2).
fn described(mut d: TgbDescriptor) -> TgbDescriptor {
    d.key = described_tgb_key(&d);
    d
}

/// `d` with the grid `(dp, cp)` and the footer that grid implies.
fn regrid(mut d: TgbDescriptor, (dp, cp): (u32, u32)) -> TgbDescriptor {
    d.dp = dp;
    d.cp = cp;
    d.footer_length = 20 + 20 * dp * cp;
    d.object_size = d.payload_bytes + u64::from(d.footer_length) + 32;
    d
}

// ---------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------

/// What a cooperative commit on `base` by `committer` must publish of `offers`, written
/// from the rule rather than from the implementation: producers in the order of their
/// first offer; for each other producer whose entry records a `max_commit_age_ms`, walk
/// its sequences `last_sequence + 1, + 2, ...`; at each, the offers of the entry's epoch
/// with that sequence, duplicates counted once, must be exactly one TGB, under a key
/// that names it (form 1 or form 2), with the stream's grid (fixed by the first one
/// published if `grid` is `None`) and a source offset not before the previous one's
/// (the entry's for the first); at most `cap` in all.
fn model(
    base: &Manifest,
    committer: &str,
    offers: &[TgbDescriptor],
    mut grid: Option<(u32, u32)>,
    cap: usize,
) -> Vec<TgbDescriptor> {
    let mut order: Vec<&str> = Vec::new();
    for t in offers {
        if t.producer_id != committer && !order.contains(&t.producer_id.as_str()) {
            order.push(&t.producer_id);
        }
    }
    let mut out: Vec<TgbDescriptor> = Vec::new();
    for id in order {
        let Some(e) = base.producers.get(id) else {
            continue;
        };
        if e.max_commit_age_ms == 0 {
            continue;
        }
        let (mut seq, mut offset) = (e.last_sequence + 1, e.source_offset);
        while out.len() < cap {
            let mut at: Vec<&TgbDescriptor> = Vec::new();
            for t in offers {
                if t.producer_id == id
                    && t.epoch == e.epoch
                    && t.sequence == seq
                    && !at.contains(&t)
                {
                    at.push(t);
                }
            }
            let [t] = at[..] else { break };
            let named = t.key == tgb_key(id, t.epoch, t.sequence) || t.key == described_tgb_key(t);
            if !named || t.source_offset < offset || grid.is_some_and(|g| g != (t.dp, t.cp)) {
                break;
            }
            grid.get_or_insert((t.dp, t.cp));
            out.push(t.clone());
            seq += 1;
            offset = t.source_offset;
        }
    }
    out
}

/// The TGBs `next` appended after `prev` (steps `>= prev.total_tgbs`).
fn appended(prev: &Manifest, next: &Manifest) -> Vec<TgbDescriptor> {
    let skip = prev.total_tgbs.saturating_sub(next.first_step) as usize;
    next.tgbs[skip.min(next.tgbs.len())..].to_vec()
}

/// Runs `rebase_cooperative` and checks its candidate against plain `rebase` and the
/// model: (a) it passes `validate` and `check_extends` from `base` and survives an
/// encode/decode round trip; (b) exactly the model's TGBs were appended after the
/// committer's own, in order, every advanced entry changed exactly as its producer's own
/// commit of them would change it and every other entry is the base's; (c) the count is
/// theirs, `committer` is set iff it is not 0, and with 0 the candidate is `rebase`'s.
/// Returns the candidate and what it published.
fn check_candidate(
    base: &Manifest,
    pending: &Pending,
    offers: &[TgbDescriptor],
    cap: usize,
    trim: u64,
) -> (Manifest, Vec<TgbDescriptor>) {
    let id = pending.producer_id.as_str();
    let plain = rebase(base, pending, trim).unwrap_or_else(|e| panic!("rebase: {e}"));
    let (cand, count) = rebase_cooperative(base, pending, offers, cap, trim)
        .unwrap_or_else(|e| panic!("rebase_cooperative: {e}"));
    validate(&cand, &limits()).unwrap_or_else(|e| panic!("validate: {e}"));
    check_extends(base, &cand).unwrap_or_else(|e| panic!("check_extends: {e}"));
    assert_eq!(
        decode_manifest(&encode_manifest(&cand), &limits()).unwrap(),
        cand
    );

    let want = model(base, id, offers, stream_grid(&plain), cap);
    assert_eq!(
        count,
        want.len(),
        "published {count}, the model says {want:?}"
    );
    if count == 0 {
        assert_eq!(cand, plain);
        assert!(cand.committer.is_empty());
        return (cand, want);
    }
    assert_eq!(cand.committer, id);
    let v = cand.version;
    assert_eq!(
        (v, cand.first_step, cand.committed_at_ms),
        (plain.version, plain.first_step, plain.committed_at_ms)
    );
    let own = plain.tgbs.len();
    assert_eq!(&cand.tgbs[..own], &plain.tgbs[..]);
    let published: Vec<TgbDescriptor> = want
        .iter()
        .map(|t| TgbDescriptor {
            visible_version: v,
            ..t.clone()
        })
        .collect();
    assert_eq!(&cand.tgbs[own..], &published[..]);
    assert_eq!(cand.total_tgbs, plain.total_tgbs + count as u64);
    assert_eq!(
        cand.retained_bytes,
        plain.retained_bytes + want.iter().map(|t| t.object_size).sum::<u64>()
    );
    let grid = match (plain.grid_dp, plain.grid_cp) {
        (0, 0) => (want[0].dp, want[0].cp),
        g => g,
    };
    assert_eq!((cand.grid_dp, cand.grid_cp), grid);

    assert!(cand.producers.keys().eq(plain.producers.keys()));
    assert_eq!(cand.producers[id], plain.producers[id]);
    for (p, b) in &cand.producers {
        if p == id {
            continue;
        }
        let a = base.producers[p];
        let mine: Vec<TgbDescriptor> = want
            .iter()
            .filter(|t| t.producer_id == *p)
            .cloned()
            .collect();
        let Some(last) = mine.last() else {
            assert_eq!(*b, a, "producer {p} published nothing, its entry must stay");
            continue;
        };
        let expected = ProducerState {
            last_sequence: last.sequence,
            tgbs_committed: a.tgbs_committed + mine.len() as u64,
            source_offset: last.source_offset,
            last_commit_version: v,
            last_commit_ms: pending.now_ms,
            ..a
        };
        assert_eq!(*b, expected, "producer {p}");
        // Exactly what the producer's own commit of those TGBs would have made of it.
        let by_itself = rebase(
            base,
            &Pending {
                producer_id: p.clone(),
                epoch: a.epoch,
                incarnation: a.incarnation,
                tgbs: mine.clone(),
                source_offset: last.source_offset,
                now_ms: pending.now_ms,
            },
            0,
        )
        .unwrap_or_else(|e| panic!("{p}'s own commit: {e}"));
        assert_eq!(*b, by_itself.producers[p], "producer {p}");
        assert_eq!(appended(base, &by_itself).len(), mine.len());
    }
    (cand, want)
}

// ---------------------------------------------------------------------------------------
// Random scenarios
// ---------------------------------------------------------------------------------------

/// Odd offers a listing of `tgb/` may hold next to a producer's real uploads.
#[derive(Debug, Clone, Copy)]
enum Junk {
    /// A fenced incarnation's leftover: an older epoch, maybe at a sequence the
    /// entry's incarnation also uploaded.
    Stale,
    /// An upload of an epoch not claimed yet.
    Future,
    /// A sequence the entry already holds.
    Published,
    /// Another grid than the stream's.
    WrongGrid,
    /// A source offset before the previous TGB's.
    OffsetBack,
    /// A form-2 key one of whose fields disagrees with the descriptor.
    BadKey,
    /// The upload under its form-1 key (valid too, but a second candidate for the
    /// sequence if the form-2 one is listed).
    Form1,
}

fn junk() -> impl Strategy<Value = Junk> {
    prop_oneof![
        Just(Junk::Stale),
        Just(Junk::Future),
        Just(Junk::Published),
        Just(Junk::WrongGrid),
        Just(Junk::OffsetBack),
        Just(Junk::BadKey),
        Just(Junk::Form1),
    ]
}

/// What one producer has in the listing.
#[derive(Debug, Clone)]
struct Listing {
    /// Whether its base entry records a `max_commit_age_ms`.
    aged: bool,
    /// TGBs it uploaded after its entry, contiguous from `last_sequence + 1`, of the
    /// entry's epoch (epoch 1 from sequence 1 without an entry).
    uploads: usize,
    /// Uploads the listing misses (indexes modulo `uploads`): gaps.
    missing: Vec<usize>,
    /// Odd offers, with a number that places them.
    junk: Vec<(Junk, u64)>,
}

fn listing() -> impl Strategy<Value = Listing> {
    (
        prop::bool::weighted(0.8),
        prop_oneof![1 => Just(0usize), 4 => 1..6usize],
        vec(any::<usize>(), 0..2),
        vec((junk(), any::<u64>()), 0..3),
    )
        .prop_map(|(aged, uploads, missing, junk)| Listing {
            aged,
            uploads,
            missing,
            junk,
        })
}

#[derive(Debug, Clone)]
struct Scenario {
    /// The base: the newest version of a random chain (producers `p0..p3`).
    base: Manifest,
    /// The grid the chain's producers use (the base's, if it has one).
    grid: (u32, u32),
    /// Producers `p0..p5` (`p4`, `p5` never have an entry).
    listings: Vec<Listing>,
    /// Index of the first committer, its own batch and whether it claims a new epoch.
    committer: usize,
    own: usize,
    claim: bool,
    own_form2: bool,
    /// `max_others`.
    cap: usize,
    /// The first commit's trim point (reduced modulo the base's total + 2).
    trim: Option<u64>,
    /// Index of the second committer among the others.
    second: usize,
    /// Offers listed twice (indexes modulo the offers).
    dups: Vec<usize>,
    /// Layouts, offsets, incarnations and the shuffle.
    seed: u64,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        common::chain(),
        any::<bool>(),
        vec(listing(), 6),
        (
            0..6usize,
            0..4usize,
            prop::bool::weighted(0.2),
            any::<bool>(),
        ),
        prop_oneof![2 => Just(usize::MAX), 3 => 0..8usize],
        prop::option::weighted(0.3, any::<u64>()),
        (any::<usize>(), vec(any::<usize>(), 0..3), any::<u64>()),
    )
        .prop_map(
            |(
                (_, grid, chain),
                old,
                listings,
                (committer, own, claim, own_form2),
                cap,
                trim,
                (second, dups, seed),
            )| {
                let mut base = chain.last().cloned().unwrap();
                if old {
                    // A version written before the grid fields existed.
                    base.grid_dp = 0;
                    base.grid_cp = 0;
                }
                for (i, l) in listings.iter().enumerate() {
                    if let Some(e) = base.producers.get_mut(&common::chain_id(i)) {
                        e.max_commit_age_ms = if l.aged { 30_000 + i as u64 } else { 0 };
                    }
                }
                Scenario {
                    base,
                    grid,
                    listings,
                    committer,
                    own,
                    claim,
                    own_form2,
                    cap,
                    trim,
                    second,
                    dups,
                    seed,
                }
            },
        )
}

/// Everything a scenario's listing holds: per producer its uploads (what it would
/// commit itself), and all offers, shuffled.
fn offers(s: &Scenario, mix: &mut Mix) -> (Vec<Vec<TgbDescriptor>>, Vec<TgbDescriptor>) {
    let wrong = (s.grid.0 + 1, s.grid.1);
    let mut uploads_of = Vec::new();
    let mut all = Vec::new();
    for (i, l) in s.listings.iter().enumerate() {
        let id = common::chain_id(i);
        let e = s.base.producers.get(&id).copied().unwrap_or(ProducerState {
            epoch: 1,
            ..ProducerState::default()
        });
        let first = e.last_sequence + 1;
        let mut offset = e.source_offset;
        let mut uploads = Vec::new();
        for k in 0..l.uploads as u64 {
            offset += mix.below(3);
            let d = described(random_tgb(mix, &id, e.epoch, first + k, s.grid, offset));
            // A listing describes the upload exactly: key and size.
            assert_eq!(descriptor_from_key(&d.key, d.object_size), Some(d.clone()));
            uploads.push(d);
        }
        for (k, d) in uploads.iter().enumerate() {
            if !l.missing.iter().any(|m| m % l.uploads == k) {
                all.push(d.clone());
            }
        }
        // The source offset the upload of `seq` has (or would have), and its
        // predecessor's.
        let at = |seq: u64| {
            uploads
                .iter()
                .rev()
                .find(|u| u.sequence <= seq)
                .map_or(e.source_offset, |u| u.source_offset)
        };
        for &(j, a) in &l.junk {
            let seq = first + a % (l.uploads as u64 + 2);
            let d = random_tgb(mix, &id, e.epoch, seq, s.grid, at(seq));
            let d = match j {
                Junk::Stale => described(TgbDescriptor {
                    epoch: e.epoch.saturating_sub(1 + a % 2),
                    ..d
                }),
                Junk::Future => described(TgbDescriptor {
                    epoch: e.epoch + 1 + a % 2,
                    ..d
                }),
                Junk::Published => described(TgbDescriptor {
                    sequence: e.last_sequence - a % (e.last_sequence + 1),
                    source_offset: e.source_offset,
                    ..d
                }),
                Junk::WrongGrid => described(regrid(d, wrong)),
                Junk::OffsetBack => described(TgbDescriptor {
                    source_offset: at(seq - 1).saturating_sub(1 + a % 3),
                    ..d
                }),
                Junk::BadKey => {
                    let mut other = d.clone();
                    match a % 6 {
                        0 => other = regrid(other, wrong),
                        1 => other.payload_bytes += 1,
                        2 => other.footer_crc32 ^= 1,
                        3 => other.source_offset += 1,
                        4 => other.sequence += 1,
                        _ => other.epoch += 1,
                    }
                    TgbDescriptor {
                        key: described_tgb_key(&other),
                        ..d
                    }
                }
                Junk::Form1 => {
                    uploads
                        .iter()
                        .find(|u| u.sequence == seq)
                        .map_or(d, |u| TgbDescriptor {
                            key: tgb_key(&id, u.epoch, u.sequence),
                            ..u.clone()
                        })
                }
            };
            all.push(d);
        }
        uploads_of.push(uploads);
    }
    if !all.is_empty() {
        for &k in &s.dups {
            all.push(all[k % all.len()].clone());
        }
    }
    for i in (1..all.len()).rev() {
        all.swap(i, mix.below(i as u64 + 1) as usize);
    }
    (uploads_of, all)
}

/// The first committer's batch: its entry continued (or claimed under a higher epoch,
/// or a new producer's first commit), `own` new TGBs of the stream's grid.
fn own_batch(s: &Scenario, mix: &mut Mix) -> Pending {
    let id = common::chain_id(s.committer);
    let e = s.base.producers.get(&id).copied();
    let (epoch, incarnation) = match e {
        Some(e) if !s.claim => (e.epoch, e.incarnation),
        _ => (e.map_or(1, |e| e.epoch + 1), mix.next()),
    };
    let e = e.unwrap_or_default();
    let mut offset = e.source_offset;
    let mut tgbs = Vec::new();
    for k in 0..s.own as u64 {
        offset += mix.below(3);
        let d = random_tgb(mix, &id, epoch, e.last_sequence + 1 + k, s.grid, offset);
        tgbs.push(if s.own_form2 { described(d) } else { d });
    }
    let claims = s.claim || !s.base.producers.contains_key(&id);
    let source_offset = if claims && tgbs.is_empty() {
        e.source_offset // a TGB-less claim carries the committed offset
    } else {
        offset + mix.below(4)
    };
    Pending {
        producer_id: id,
        epoch,
        incarnation,
        tgbs,
        source_offset,
        now_ms: 1_800_000_000_000,
    }
}

/// The second committer's batch on `c1`: what it uploaded, of which `c1` may already
/// have published a prefix for it (those it resends, as after a lost reply), its
/// uploads beyond that if they continue it.
fn second_batch(
    s: &Scenario,
    c1: &Manifest,
    q: usize,
    uploads: &[TgbDescriptor],
    published: &[TgbDescriptor],
    mix: &mut Mix,
) -> Pending {
    let id = common::chain_id(q);
    let entry = s.base.producers.get(&id).copied();
    let (epoch, incarnation) = entry.map_or((1, mix.next()), |e| (e.epoch, e.incarnation));
    let mut tgbs: Vec<TgbDescriptor> = published
        .iter()
        .filter(|t| t.producer_id == id)
        .map(|t| TgbDescriptor {
            visible_version: 0,
            ..t.clone()
        })
        .collect();
    let grid = stream_grid(c1);
    for u in uploads {
        let (next, from) = tgbs.last().map_or_else(
            || entry.map_or((1, 0), |e| (e.last_sequence + 1, e.source_offset)),
            |t| (t.sequence + 1, t.source_offset),
        );
        if u.sequence == next && u.source_offset >= from && grid.is_none_or(|g| g == (u.dp, u.cp)) {
            tgbs.push(u.clone());
        }
    }
    let source_offset = tgbs.last().map_or_else(
        || c1.producers.get(&id).map_or(0, |e| e.source_offset),
        |t| t.source_offset,
    );
    Pending {
        producer_id: id,
        epoch,
        incarnation,
        tgbs,
        source_offset,
        now_ms: 1_800_000_000_100,
    }
}

/// A plain commit of `id` without TGBs on `m`: its entry continued at its committed
/// offset, or a new producer's first claim.
fn offset_only(m: &Manifest, id: &str) -> Pending {
    let e = m.producers.get(id).copied().unwrap_or(ProducerState {
        epoch: 1,
        incarnation: 77,
        ..ProducerState::default()
    });
    Pending {
        producer_id: id.to_owned(),
        epoch: e.epoch,
        incarnation: e.incarnation,
        tgbs: Vec::new(),
        source_offset: e.source_offset,
        now_ms: 1_800_000_000_200,
    }
}

/// (e) A later plain commit by `id` on `m` keeps every other entry, the advanced ones
/// included, and every TGB.
fn check_merge(m: &Manifest, id: &str) {
    let next = rebase(m, &offset_only(m, id), 0).unwrap_or_else(|e| panic!("{id}: {e}"));
    validate(&next, &limits()).unwrap();
    check_extends(m, &next).unwrap();
    assert!(next.committer.is_empty());
    assert_eq!(next.tgbs, m.tgbs);
    for (p, e) in &m.producers {
        if p != id {
            assert_eq!(next.producers[p], *e, "producer {p} after {id}'s commit");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cooperative_commits_publish_exactly_the_continuing_runs(s in scenario()) {
        let mut mix = Mix(s.seed);
        let base = &s.base;
        validate(base, &limits()).unwrap();
        let (uploads, offers) = offers(&s, &mut mix);
        let own = own_batch(&s, &mut mix);
        let trim = s.trim.map_or(0, |t| t % (base.total_tgbs + 2));

        // (a)-(c): the first committer.
        let (c1, published) = check_candidate(base, &own, &offers, s.cap, trim);

        // (d): a second committer, one of the others, rebases its own batch on the
        // first's candidate (it lost the conditional create) with the same listing.
        let others: Vec<usize> = (0..6).filter(|&i| i != s.committer).collect();
        let q = others[s.second % others.len()];
        let batch = second_batch(&s, &c1, q, &uploads[q], &published, &mut mix);
        let (c2, _) = check_candidate(&c1, &batch, &offers, s.cap, 0);
        check_extends(base, &c2).unwrap();
        let mut seen = BTreeSet::new();
        for t in appended(base, &c1).iter().chain(&appended(&c1, &c2)) {
            prop_assert!(
                seen.insert((t.producer_id.clone(), t.sequence)),
                "{} sequence {} published twice", t.producer_id, t.sequence
            );
            if let Some(e) = base.producers.get(&t.producer_id) {
                prop_assert!(t.sequence > e.last_sequence);
            }
        }
        let mut retained = BTreeSet::new();
        for t in &c2.tgbs {
            prop_assert!(retained.insert((t.producer_id.clone(), t.sequence)));
        }
        // The second committer's own TGBs that the first published are not appended
        // again, and its entry continues where the first left it.
        let qid = common::chain_id(q);
        if let (Some(a), Some(b)) = (c1.producers.get(&qid), c2.producers.get(&qid)) {
            let last = batch.tgbs.last().map_or(a.last_sequence, |t| t.sequence);
            prop_assert_eq!(b.last_sequence, last.max(a.last_sequence));
        }

        // (e): later plain commits keep what the cooperative ones advanced.
        check_merge(&c1, "fresh");
        check_merge(&c2, &own.producer_id);
        check_merge(&c2, "fresh");
    }

    #[test]
    fn described_keys_describe_their_objects(
        id in "[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}",
        epoch in prop_oneof![0..3u64, Just(9_999_999_999u64), any::<u64>()],
        sequence in prop_oneof![1..3u64, any::<u64>()],
        grid in (1..=300u32, 1..=200u32),
        source_offset in any::<u64>(),
        seed in any::<u64>(),
    ) {
        let d = described(random_tgb(&mut Mix(seed), &id, epoch, sequence, grid, source_offset));
        let k = parse_described_tgb_key(&d.key).unwrap();
        prop_assert_eq!(
            (k.producer_id, k.epoch, k.sequence, k.dp, k.cp),
            (id.as_str(), epoch, sequence, grid.0, grid.1)
        );
        prop_assert_eq!(
            (k.payload_bytes, k.footer_crc32, k.source_offset),
            (d.payload_bytes, d.footer_crc32, d.source_offset)
        );
        prop_assert_eq!(parse_tgb_key(&d.key), Some((id.as_str(), epoch, sequence)));
        // The listing's size decides: exactly the layout's, nothing else.
        prop_assert_eq!(descriptor_from_key(&d.key, d.object_size), Some(d.clone()));
        prop_assert_eq!(descriptor_from_key(&d.key, d.object_size + 1), None);
        prop_assert_eq!(descriptor_from_key(&d.key, d.object_size - 1), None);
        prop_assert_eq!(descriptor_from_key(&tgb_key(&id, epoch, sequence), d.object_size), None);
        let big = DecodeLimits { max_grid: u64::MAX, ..limits() };
        validate_descriptor(0, &d, 1, &big).unwrap();
    }

    #[test]
    fn sealed_keys_describe_their_objects(
        id in "[A-Za-z0-9_-][A-Za-z0-9._-]{0,20}",
        grid in (1..=64u32, 1..=16u32),
        stride in 24..100_000u64,
        sequence in 1..1_000u64,
        seed in any::<u64>(),
    ) {
        // A sealed TGB: `dp * cp` slots of `stride` bytes before the footer.
        let mut d = random_tgb(&mut Mix(seed), &id, 1, sequence, grid, seed);
        let slots = u64::from(grid.0) * u64::from(grid.1);
        d.payload_bytes = stride * slots;
        d.footer_offset = d.payload_bytes;
        d.object_size = d.payload_bytes + u64::from(d.footer_length) + 32;
        d.slice_stride = stride;
        let d = described(d);
        prop_assert!(d.key.contains(&format!(".{}x{}s.", grid.0, grid.1)), "{}", d.key);
        prop_assert!(parse_described_tgb_key(&d.key).unwrap().sealed);
        prop_assert_eq!(descriptor_from_key(&d.key, d.object_size), Some(d.clone()));
        validate_descriptor(0, &d, 1, &limits()).unwrap();
        // The packed spelling of the same fields is another key, so a descriptor and a
        // key that disagree on the layout break `tgb-key`.
        let mut packed = d.clone();
        packed.slice_stride = 0;
        prop_assert_ne!(described_tgb_key(&packed), d.key.clone());
        // A stride that is not the slots', or leaves no room for a seal, is refused.
        let mut bad = d.clone();
        bad.slice_stride = stride + 1;
        prop_assert!(validate_descriptor(0, &bad, 1, &limits()).is_err());
        if slots > 1 || stride > 24 {
            let mut small = d.clone();
            small.payload_bytes = 23 * slots;
            small.footer_offset = small.payload_bytes;
            small.object_size = small.payload_bytes + u64::from(small.footer_length) + 32;
            small.slice_stride = 23;
            prop_assert!(validate_descriptor(0, &small, 1, &limits()).is_err());
            let key = described_tgb_key(&small);
            prop_assert_eq!(descriptor_from_key(&key, small.object_size), None);
        }
    }

    #[test]
    fn both_key_forms_sort_by_epoch_then_sequence(
        keys in vec((0..10_000_000_000u64, any::<u64>(), any::<bool>(), any::<u64>()), 1..24),
    ) {
        // One producer's listing, keys of both forms mixed (epochs of up to 10 digits).
        let mut listed: Vec<(String, u64, u64)> = keys
            .iter()
            .map(|&(epoch, sequence, form2, seed)| {
                let d = random_tgb(&mut Mix(seed), "prep-3", epoch, sequence, (2, 1), seed);
                let key = if form2 { described_tgb_key(&d) } else { d.key };
                (key, epoch, sequence)
            })
            .collect();
        listed.sort();
        for w in listed.windows(2) {
            prop_assert!((w[0].1, w[0].2) <= (w[1].1, w[1].2), "{:?} then {:?}", w[0], w[1]);
        }
    }

    #[test]
    fn a_listing_after_a_position_holds_exactly_the_later_keys(
        at in (0..10_000_000_000u64, prop_oneof![0..4u64, any::<u64>()]),
        keys in vec((0..10_000_000_000u64, prop_oneof![0..4u64, any::<u64>()], any::<bool>(), any::<u64>()), 1..24),
    ) {
        // What a cooperative committer lists for one producer: `list_after` compares keys
        // as strings, so a key is returned iff it sorts after the offset.
        let offset = tgb_key_after("prep-3", at.0, at.1);
        // Only characters object_store's `Path` keeps as they are (it percent-encodes
        // others such as `~`, and a backend then compares the encoded form).
        prop_assert!(
            offset.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/".contains(&b)),
            "{}", offset
        );
        for &(epoch, sequence, form2, seed) in &keys {
            let d = random_tgb(&mut Mix(seed), "prep-3", epoch, sequence, (2, 1), seed);
            let key = if form2 { described_tgb_key(&d) } else { d.key };
            prop_assert_eq!(
                key.as_str() > offset.as_str(),
                (epoch, sequence) > at,
                "{} against {}", key, offset
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Examples
// ---------------------------------------------------------------------------------------

/// Versions 1-3: `a` (epoch 1) commits 1..=2, `b` (epoch 3) commits 1, `c` (epoch 1)
/// commits 1; `b` and `c` record a `max_commit_age_ms` (as current producers do after
/// their rebase), `a` does not.
fn base3() -> Manifest {
    let v1 = rebase(&Manifest::genesis(), &pending("a", 1, 7, 1..=2), 0).unwrap();
    let mut v2 = rebase(&v1, &pending("b", 3, 8, 1..=1), 0).unwrap();
    v2.producers.get_mut("b").unwrap().max_commit_age_ms = 60_000;
    let mut v3 = rebase(&v2, &pending("c", 1, 9, 1..=1), 0).unwrap();
    v3.producers.get_mut("c").unwrap().max_commit_age_ms = 60_000;
    validate(&v3, &limits()).unwrap();
    v3
}

fn up(p: &str, epoch: u64, sequence: u64) -> TgbDescriptor {
    described(tgb(p, epoch, sequence))
}

/// Version 4: `a` commits its sequence 3 and publishes `b`'s uploads 2 and 3.
fn coop4(trim: u64) -> Manifest {
    let (m, n) = rebase_cooperative(
        &base3(),
        &pending("a", 1, 7, 3..=3),
        &[up("b", 3, 3), up("b", 3, 2)],
        16,
        trim,
    )
    .unwrap();
    assert_eq!(n, 2);
    validate(&m, &limits()).unwrap();
    check_extends(&base3(), &m).unwrap();
    m
}

/// Recomputes `total_tgbs` and `retained_bytes` after an edit of `tgbs`.
fn refresh(m: &mut Manifest) {
    m.total_tgbs = m.first_step + m.tgbs.len() as u64;
    m.retained_bytes = m.tgbs.iter().map(|t| t.object_size).sum();
}

/// The rule a reader reports for `m`, read back from its envelope.
fn decode_rule(m: &Manifest) -> Option<&'static str> {
    let err = decode_manifest(&encode_manifest(m), &limits()).unwrap_err();
    err.rule()
}

/// The rule `check_extends(prev, next)` reports, for a `next` that passes `validate`.
fn extends_rule(prev: &Manifest, next: &Manifest) -> Option<&'static str> {
    validate(next, &limits()).unwrap_or_else(|e| panic!("validate: {e}"));
    check_extends(prev, next).unwrap_err().rule()
}

fn entry<'a>(m: &'a mut Manifest, id: &str) -> &'a mut ProducerState {
    m.producers.get_mut(id).unwrap()
}

#[test]
fn a_cooperative_version_advances_every_entry_it_publishes_for() {
    let m = coop4(0);
    assert_eq!(m.committer, "a");
    let seqs: Vec<_> = m
        .tgbs
        .iter()
        .map(|t| (t.producer_id.as_str(), t.sequence, t.visible_version))
        .collect();
    assert_eq!(
        seqs,
        [
            ("a", 1, 1),
            ("a", 2, 1),
            ("b", 1, 2),
            ("c", 1, 3),
            ("a", 3, 4),
            ("b", 2, 4),
            ("b", 3, 4)
        ]
    );
    let b = m.producers["b"];
    assert_eq!(
        (b.epoch, b.incarnation, b.last_sequence, b.tgbs_committed),
        (3, 8, 3, 3)
    );
    assert_eq!(
        (b.source_offset, b.last_commit_version, b.max_commit_age_ms),
        (30, 4, 60_000)
    );
    assert_eq!(m.producers["c"], base3().producers["c"]);
    // `b` then commits its batch itself: what `a` published is recognised as committed
    // (as after a lost reply) and only its sequence 4 is appended.
    let mut own = pending("b", 3, 8, 2..=4);
    own.tgbs = own.tgbs.into_iter().map(described).collect();
    let v5 = rebase(&m, &own, 0).unwrap();
    check_extends(&m, &v5).unwrap();
    assert_eq!(appended(&m, &v5).len(), 1);
    assert_eq!(v5.producers["b"].last_sequence, 4);
    // A committer may claim a new epoch in its cooperative commit.
    let (claim, n) = rebase_cooperative(
        &base3(),
        &pending("a", 2, 70, 3..=3),
        &[up("b", 3, 2)],
        16,
        0,
    )
    .unwrap();
    assert_eq!((n, claim.producers["a"].epoch), (1, 2));
    validate(&claim, &limits()).unwrap();
    check_extends(&base3(), &claim).unwrap();
}

/// Regression: leftovers of a fenced epoch and uploads of an epoch not claimed yet
/// share sequences with the entry's own uploads (a listing sorts the older epoch
/// first); they were taken as the end of the run, so nothing was published. The same
/// offer listed twice also ended the run.
#[test]
fn other_epochs_and_duplicates_do_not_end_the_run() {
    let base = base3();
    let own = pending("a", 1, 7, 3..=3);
    for offers in [
        vec![up("b", 2, 2), up("b", 3, 2), up("b", 2, 3), up("b", 3, 3)],
        vec![up("b", 3, 2), up("b", 4, 2), up("b", 3, 3), up("b", 4, 3)],
        vec![up("b", 3, 2), up("b", 3, 2), up("b", 3, 3), up("b", 3, 2)],
        vec![up("b", 3, 1), up("b", 3, 2), up("b", 3, 3), up("c", 0, 2)],
    ] {
        let (m, n) = rebase_cooperative(&base, &own, &offers, 16, 0).unwrap();
        assert_eq!(n, 2, "{offers:?}");
        assert_eq!(m.producers["b"].last_sequence, 3);
        assert_eq!(m.producers["c"], base.producers["c"]);
    }
    // Two different objects that claim one sequence: the run ends before it.
    let mut twin = up("b", 3, 3);
    twin.footer_crc32 ^= 1;
    let twin = described(twin);
    let (m, n) = rebase_cooperative(
        &base,
        &own,
        &[up("b", 3, 2), up("b", 3, 3), twin, up("b", 3, 4)],
        16,
        0,
    )
    .unwrap();
    assert_eq!((n, m.producers["b"].last_sequence), (1, 2));
}

#[test]
fn what_a_cooperative_commit_never_publishes() {
    let base = base3();
    let own = pending("a", 1, 7, 3..=3);
    let nothing = |offers: &[TgbDescriptor], cap: usize| {
        let (m, n) = rebase_cooperative(&base, &own, offers, cap, 0).unwrap();
        assert_eq!(n, 0, "{offers:?}");
        assert_eq!(m, rebase(&base, &own, 0).unwrap());
        assert!(m.committer.is_empty());
    };
    nothing(&[], 16);
    nothing(&[up("b", 3, 2)], 0);
    nothing(&[up("b", 2, 2), up("b", 4, 2)], 16); // stale and future epochs
    nothing(&[up("b", 3, 1)], 16); // already published
    nothing(&[up("b", 3, 3)], 16); // a gap
    nothing(&[regrid(up("b", 3, 2), (1, 1))].map(described), 16);
    nothing(
        &[described(TgbDescriptor {
            source_offset: 9,
            ..tgb("b", 3, 2)
        })],
        16,
    ); // before the entry's source offset 10
    let mut bad = up("b", 3, 2);
    bad.key = described_tgb_key(&TgbDescriptor {
        footer_crc32: 1,
        ..bad.clone()
    });
    nothing(&[bad], 16);
    nothing(&[up("a", 1, 4)], 16); // the committer's own id
    nothing(&[up("x", 1, 1)], 16); // a producer without an entry
    // An entry without a max_commit_age_ms.
    let mut unaged = base.clone();
    entry(&mut unaged, "b").max_commit_age_ms = 0;
    let (m, n) = rebase_cooperative(&unaged, &own, &[up("b", 3, 2)], 16, 0).unwrap();
    assert_eq!((n, m), (0, rebase(&unaged, &own, 0).unwrap()));
    // The cap counts TGBs over all producers, served in the order of their first offer.
    let offers = [up("c", 1, 2), up("b", 3, 2), up("b", 3, 3), up("c", 1, 3)];
    let (m, n) = rebase_cooperative(&base, &own, &offers, 3, 0).unwrap();
    assert_eq!(n, 3);
    assert_eq!(
        (
            m.producers["c"].last_sequence,
            m.producers["b"].last_sequence
        ),
        (3, 2)
    );
}

/// Regression: `rebase` accepted a pending TGB under a self-describing key whose fields
/// disagree with the descriptor, and built a candidate that `validate` refuses
/// (`tgb-key`).
#[test]
fn a_pending_tgb_under_a_wrong_described_key_is_refused() {
    let mut p = pending("a", 1, 7, 3..=3);
    p.tgbs[0] = up("a", 1, 3);
    rebase(&base3(), &p, 0).unwrap();
    p.tgbs[0].key = described_tgb_key(&TgbDescriptor {
        source_offset: 31,
        ..p.tgbs[0].clone()
    });
    assert!(matches!(
        rebase(&base3(), &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    assert!(matches!(
        rebase_cooperative(&base3(), &p, &[up("b", 3, 2)], 16, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
}

#[test]
fn a_stale_epoch_tgb_is_refused() {
    // Entry epoch 3, TGBs of epoch 2 (a fenced incarnation's leftovers). With `b`'s
    // epoch-3 sequence 1 trimmed, the version alone looks fine: single-commit
    // catches it.
    let mut m = coop4(4);
    for t in m.tgbs.iter_mut().filter(|t| t.producer_id == "b") {
        t.epoch = 2;
        t.key = described_tgb_key(t);
    }
    assert_eq!(extends_rule(&base3(), &m), Some(rules::SINGLE_COMMIT));
    let err = check_extends(&base3(), &m).unwrap_err().to_string();
    assert!(
        err.contains("epoch 2") && err.contains("holds epoch 3"),
        "{err}"
    );
    // With the epoch-3 TGB retained, the version alone already is invalid.
    let mut m = coop4(0);
    let last = m.tgbs.last_mut().unwrap();
    last.epoch = 2;
    last.key = described_tgb_key(last);
    assert_eq!(decode_rule(&m), Some(rules::EPOCH_ORDER));
    // The requirement is new for plain versions too: `a` (epoch 1) appends epoch 0.
    let mut plain = rebase(&base3(), &pending("a", 1, 7, 3..=3), 4).unwrap();
    plain.tgbs[0].epoch = 0;
    plain.tgbs[0].key = tgb_key("a", 0, 3);
    assert_eq!(extends_rule(&base3(), &plain), Some(rules::SINGLE_COMMIT));
}

#[test]
fn a_sequence_gap_is_refused() {
    // `b`'s sequence 2 left out: the retained sequence 1 then 3.
    let mut m = coop4(0);
    m.tgbs
        .retain(|t| (t.producer_id.as_str(), t.sequence) != ("b", 2));
    m.first_step += 1; // so that the totals still add up to b's three
    refresh(&mut m);
    assert_eq!(decode_rule(&m), Some(rules::SEQUENCE_ORDER));
    // The same gap behind a trim: valid alone, but b grew by two with one new TGB.
    let mut m = coop4(4);
    m.tgbs
        .retain(|t| (t.producer_id.as_str(), t.sequence) != ("b", 2));
    m.first_step += 1;
    refresh(&mut m);
    assert_eq!(extends_rule(&base3(), &m), Some(rules::SINGLE_COMMIT));
}

#[test]
fn another_entry_may_change_only_by_its_new_tgbs() {
    let base = base3();
    // Another incarnation under the same epoch: producer-progress, before single-commit.
    let mut m = coop4(0);
    entry(&mut m, "b").incarnation += 1;
    assert_eq!(extends_rule(&base, &m), Some(rules::PRODUCER_PROGRESS));
    // Its epoch raised (the TGBs keep theirs): single-commit, on the TGBs' epoch.
    let mut m = coop4(0);
    entry(&mut m, "b").epoch = 4;
    assert_eq!(extends_rule(&base, &m), Some(rules::SINGLE_COMMIT));
    // Epoch and incarnation raised, the TGBs moved to the new epoch too: only the
    // committer's own entry may change its epoch.
    let mut m = coop4(0);
    let b = entry(&mut m, "b");
    (b.epoch, b.incarnation) = (4, 99);
    for t in m
        .tgbs
        .iter_mut()
        .filter(|t| t.visible_version == 4 && t.producer_id == "b")
    {
        t.epoch = 4;
        t.key = described_tgb_key(t);
    }
    assert_eq!(extends_rule(&base, &m), Some(rules::SINGLE_COMMIT));
    let err = check_extends(&base, &m).unwrap_err().to_string();
    assert!(err.contains("other than by publishing"), "{err}");
    // Its max_commit_age_ms changed.
    let mut m = coop4(0);
    entry(&mut m, "b").max_commit_age_ms = 1;
    assert_eq!(extends_rule(&base, &m), Some(rules::SINGLE_COMMIT));
}

#[test]
fn an_entry_advanced_without_tgbs_is_refused() {
    let base = base3();
    // `c` records the version but gained nothing.
    let mut m = coop4(0);
    let c = entry(&mut m, "c");
    (c.last_commit_version, c.last_commit_ms) = (4, 1_000);
    assert_eq!(extends_rule(&base, &m), Some(rules::SINGLE_COMMIT));
    // `c`'s resume point moved (and it does not even record the version).
    let mut m = coop4(0);
    entry(&mut m, "c").source_offset += 5;
    assert_eq!(extends_rule(&base, &m), Some(rules::SINGLE_COMMIT));
    // Both, and a new entry too.
    let mut m = coop4(0);
    m.producers.insert(
        "d".into(),
        ProducerState {
            epoch: 1,
            last_commit_version: 4,
            ..ProducerState::default()
        },
    );
    assert_eq!(extends_rule(&base, &m), Some(rules::SINGLE_COMMIT));
}

#[test]
fn the_named_committer_must_record_the_version() {
    for who in ["c", "nobody"] {
        let mut m = coop4(0);
        m.committer = who.into();
        assert_eq!(decode_rule(&m), Some(rules::ONE_COMMITTER), "{who}");
    }
    // Naming `b`, which records the version too, is accepted: `a`'s entry changed only
    // by its new TGB, as a published producer's may, so nothing tells them apart.
    let mut m = coop4(0);
    m.committer = "b".into();
    validate(&m, &limits()).unwrap();
    check_extends(&base3(), &m).unwrap();
    // The committer's entry does not record the version.
    let mut m = coop4(0);
    entry(&mut m, "a").last_commit_version = 1;
    assert_eq!(decode_rule(&m), Some(rules::ONE_COMMITTER));
}

#[test]
fn a_tgb_visible_at_the_version_needs_its_entry_to_record_it() {
    let mut m = coop4(0);
    entry(&mut m, "b").last_commit_version = 2;
    assert_eq!(decode_rule(&m), Some(rules::ONE_COMMITTER));
    let err = validate(&m, &limits()).unwrap_err().to_string();
    assert!(err.contains("did not advance its entry"), "{err}");
}

/// What a reader that predates the `committer` field does with a cooperative version:
/// it skips the unknown field 10 and then sees a version that two entries claim to have
/// committed. It refuses it when decoding (`one-committer`), and its `check_extends`
/// would refuse it too (`single-commit`): loudly, never by reading it as something else.
#[test]
fn an_older_reader_refuses_a_cooperative_version() {
    let m = coop4(0);
    let mut old = m.clone();
    old.committer.clear();
    assert_eq!(decode_rule(&old), Some(rules::ONE_COMMITTER));
    assert_eq!(
        check_extends(&base3(), &old).unwrap_err().rule(),
        Some(rules::SINGLE_COMMIT)
    );
    // The field is the only difference on the wire: field 10, after field 9.
    let (new, stripped) = (encode_manifest(&m), encode_manifest(&old));
    let tail = [0x52, 0x01, b'a'];
    assert_eq!(&new[new.len() - 3..], &tail);
    assert_eq!(&new[16..new.len() - 3], &stripped[16..]);
}

#[test]
fn a_described_key_must_agree_with_every_field() {
    let m = coop4(0);
    let i = m.tgbs.len() - 1;
    let changes: [fn(&mut TgbDescriptor); 8] = [
        |d| d.dp += 1,
        |d| d.cp += 1,
        |d| d.payload_bytes += 1,
        |d| d.footer_crc32 ^= 0x10,
        |d| d.source_offset += 1,
        |d| d.sequence += 1,
        |d| d.epoch += 1,
        |d| d.producer_id = "c".into(),
    ];
    for change in changes {
        let mut other = m.tgbs[i].clone();
        change(&mut other);
        let mut bad = m.clone();
        bad.tgbs[i].key = described_tgb_key(&other);
        assert_eq!(
            decode_rule(&bad),
            Some(rules::TGB_KEY),
            "{}",
            bad.tgbs[i].key
        );
    }
    // Other spellings of the same fields.
    let key = m.tgbs[i].key.clone();
    assert_eq!(
        key,
        "tgb/b/0000000003-00000000000000000003.2x2.1021.deadbeef.30.tgb"
    );
    for spelled in [
        key.replace("deadbeef", "DEADBEEF"),
        key.replace(".1021.", ".01021."),
        key.replace(".30.tgb", ".30.0.tgb"),
        key.replace("2x2", "2X2"),
    ] {
        let mut bad = m.clone();
        bad.tgbs[i].key = spelled.clone();
        assert_eq!(decode_rule(&bad), Some(rules::TGB_KEY), "{spelled}");
    }
    // A form-1 key stays valid next to form-2 ones.
    let mut mixed = m.clone();
    mixed.tgbs[i].key = tgb_key("b", 3, 3);
    validate(&mixed, &limits()).unwrap();
}

#[test]
fn descriptor_from_key_takes_exactly_the_size_the_key_implies() {
    let d = up("b", 3, 2);
    // payload 1014, footer 20 + 20 * 4, trailer 32.
    assert_eq!(d.object_size, 1014 + 100 + 32);
    let got = descriptor_from_key(&d.key, d.object_size).unwrap();
    assert_eq!(got, d);
    assert_eq!(got.visible_version, 0);
    validate_descriptor(0, &got, 1, &limits()).unwrap();
    for size in [0, d.object_size - 1, d.object_size + 1, d.payload_bytes] {
        assert_eq!(descriptor_from_key(&d.key, size), None, "{size}");
    }
    // Form 1 says too little, a grid with no cell describes no TGB.
    assert_eq!(
        descriptor_from_key(&d.key.replace(".2x2.1014.deadbeef.20", ""), 1146),
        None
    );
    let empty = d.key.replace(".2x2.", ".0x2.");
    assert_eq!(descriptor_from_key(&empty, 1014 + 20 + 32), None);
    // Grids whose footer length overflows a u64, or does not fit the u32 field.
    let huge = d.key.replace(".2x2.", ".4294967295x4294967295.");
    assert!(parse_described_tgb_key(&huge).is_some());
    assert_eq!(descriptor_from_key(&huge, u64::MAX), None);
    let wide = d.key.replace(".2x2.", ".65536x4096.");
    assert_eq!(
        descriptor_from_key(&wide, 1014 + 20 + 20 * (1 << 28) + 32),
        None
    );
}
