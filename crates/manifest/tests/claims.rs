//! Epoch claims recorded by cooperative commits ([`rebase_cooperative_with_claims`],
//! [`EpochClaim`], `docs/protocol.md` section 14): which claims a committer records,
//! what the recorded entry looks like, and the reader rule that refuses every other
//! change of another producer's epoch.

mod common;

use batchweave_manifest::{
    CLAIM_DIR, DecodeLimits, EpochClaim, Manifest, ProducerState, check_extends, described_tgb_key,
    rebase, rebase_cooperative_with_claims, rules, validate,
};
use common::{pending, tgb};
use proptest::prelude::*;

fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

fn claim(id: &str, epoch: u64, incarnation: u64) -> EpochClaim {
    EpochClaim {
        producer_id: id.to_owned(),
        epoch,
        incarnation,
        max_commit_age_ms: 30_000,
    }
}

/// Versions 1-2: `a` (epoch 1) commits 1..=2 and `b` (epoch 3, incarnation 8) commits 1;
/// both record a `max_commit_age_ms`.
fn base2() -> Manifest {
    let mut v1 = rebase(&Manifest::genesis(), &pending("a", 1, 7, 1..=2), 0).unwrap();
    v1.producers.get_mut("a").unwrap().max_commit_age_ms = 60_000;
    let mut v2 = rebase(&v1, &pending("b", 3, 8, 1..=1), 0).unwrap();
    v2.producers.get_mut("b").unwrap().max_commit_age_ms = 60_000;
    validate(&v2, &limits()).unwrap();
    v2
}

/// `a`'s plain commit of its sequence 3 on `base`, recording `claims`.
fn commit_with(base: &Manifest, claims: &[EpochClaim]) -> (Manifest, usize) {
    let (m, n, c) =
        rebase_cooperative_with_claims(base, &pending("a", 1, 7, 3..=3), &[], claims, 16, 16, 0)
            .unwrap();
    assert_eq!(n, 0);
    validate(&m, &limits()).unwrap_or_else(|e| panic!("validate: {e}"));
    check_extends(base, &m).unwrap_or_else(|e| panic!("extends: {e}"));
    (m, c)
}

#[test]
fn claim_keys_round_trip_and_refuse_anything_else() {
    let c = EpochClaim {
        producer_id: "worker-7".into(),
        epoch: 12,
        incarnation: 0xdead_beef_0000_0001,
        max_commit_age_ms: 600_000,
    };
    let key = c.key();
    assert_eq!(
        key,
        "claims/worker-7/0000000012.deadbeef00000001.600000.claim"
    );
    assert!(key.starts_with(CLAIM_DIR));
    assert_eq!(EpochClaim::parse(&key), Some(c));
    for bad in [
        "claims/worker-7/000000012.deadbeef00000001.600000.claim", // short epoch
        "claims/worker-7/0000000000.deadbeef00000001.600000.claim", // epoch 0
        "claims/worker-7/0000000012.DEADBEEF00000001.600000.claim", // upper-case hex
        "claims/worker-7/0000000012.deadbeef0000001.600000.claim", // short incarnation
        "claims/worker-7/0000000012.deadbeef00000001.0600000.claim", // leading zero
        "claims/worker-7/0000000012.deadbeef00000001.0.claim",     // no limit
        "claims/worker-7/0000000012.deadbeef00000001.claim",       // missing part
        "claims/worker-7/0000000012.deadbeef00000001.600000.1.claim", // extra part
        "claims/worker-7/0000000012.deadbeef00000001.99999999999999999999.claim",
        "claims/../0000000012.deadbeef00000001.600000.claim", // invalid id
        "claims/a/b/0000000012.deadbeef00000001.600000.claim",
        "tgb/worker-7/0000000012.deadbeef00000001.600000.claim",
        "claims/worker-7/0000000012.deadbeef00000001.600000",
    ] {
        assert_eq!(EpochClaim::parse(bad), None, "{bad}");
    }
}

#[test]
fn a_claim_above_the_entry_is_recorded_keeping_sequence_and_offset() {
    let base = base2();
    let (m, n) = commit_with(&base, &[claim("b", 4, 99)]);
    assert_eq!(n, 1);
    assert_eq!(m.committer, "a");
    let (old, b) = (base.producers["b"], m.producers["b"]);
    assert_eq!(
        (b.epoch, b.incarnation, b.max_commit_age_ms),
        (4, 99, 30_000)
    );
    assert_eq!(
        (b.last_sequence, b.tgbs_committed, b.source_offset),
        (old.last_sequence, old.tgbs_committed, old.source_offset)
    );
    assert_eq!(
        (b.last_commit_version, b.last_commit_ms),
        (3, m.committed_at_ms)
    );
    // b's old incarnation is fenced from here on: its next commit is refused.
    let late = rebase(&m, &pending("b", 3, 8, 2..=2), 0).unwrap_err();
    assert!(late.to_string().contains("fenced"), "{late}");
    // The new incarnation commits its next sequence on top.
    let next = rebase(&m, &pending("b", 4, 99, 2..=2), 0).unwrap();
    check_extends(&m, &next).unwrap();
}

#[test]
fn a_producer_without_an_entry_gets_one_at_zero() {
    let base = base2();
    let (m, n) = commit_with(&base, &[claim("c", 1, 5)]);
    assert_eq!(n, 1);
    let c = m.producers["c"];
    assert_eq!(
        (c.epoch, c.incarnation, c.last_sequence, c.source_offset),
        (1, 5, 0, 0)
    );
    assert_eq!(c.last_commit_version, m.version);
}

#[test]
fn what_a_committer_never_records() {
    let base = base2();
    // At or below the entry's epoch, the committer's own id, a limit of 0: nothing.
    let mut zero = claim("c", 1, 5);
    zero.max_commit_age_ms = 0;
    for cs in [
        vec![claim("b", 3, 99)],
        vec![claim("b", 2, 99)],
        vec![claim("a", 2, 70)],
        vec![zero],
        // Two incarnations claim one epoch: the chain decides between them, not a
        // committer.
        vec![claim("b", 4, 98), claim("b", 4, 99)],
    ] {
        let (m, n) = commit_with(&base, &cs);
        assert_eq!(n, 0, "{cs:?}");
        assert_eq!(m.committer, "", "{cs:?}");
        assert_eq!(m.producers["b"], base.producers["b"], "{cs:?}");
    }
    // The same claim twice is one claim; of two epochs the higher is recorded (it fences
    // the lower as well).
    let (m, n) = commit_with(&base, &[claim("b", 4, 98), claim("b", 4, 98)]);
    assert_eq!((n, m.producers["b"].incarnation), (1, 98));
    let (m, n) = commit_with(&base, &[claim("b", 4, 98), claim("b", 6, 97)]);
    assert_eq!((n, m.producers["b"].epoch), (1, 6));
    // A tie below the highest epoch does not matter.
    let (m, n) = commit_with(
        &base,
        &[claim("b", 4, 98), claim("b", 4, 99), claim("b", 5, 97)],
    );
    assert_eq!((n, m.producers["b"].epoch), (1, 5));
    // At most `max_claims`.
    let (m, n, c) = rebase_cooperative_with_claims(
        &base,
        &pending("a", 1, 7, 3..=3),
        &[],
        &[claim("c", 1, 1), claim("d", 1, 2), claim("e", 1, 3)],
        16,
        2,
        0,
    )
    .unwrap();
    assert_eq!((n, c), (0, 2));
    assert!(m.producers.contains_key("c") && m.producers.contains_key("d"));
    assert!(!m.producers.contains_key("e"));
}

#[test]
fn a_producer_that_gets_tgbs_published_has_its_claim_wait() {
    // b's upload of sequence 2 (epoch 3) is published; its restart's claim waits for a
    // later version (one version never both publishes for an entry and re-epochs it).
    let base = base2();
    let mut up = tgb("b", 3, 2);
    up.key = described_tgb_key(&up);
    let (m, n, c) = rebase_cooperative_with_claims(
        &base,
        &pending("a", 1, 7, 3..=3),
        std::slice::from_ref(&up),
        &[claim("b", 4, 99)],
        16,
        16,
        0,
    )
    .unwrap();
    assert_eq!((n, c), (1, 0));
    assert_eq!(m.producers["b"].epoch, 3);
    check_extends(&base, &m).unwrap();
}

/// `next` with `b`'s entry replaced by `b`, as a cooperative version of `a`.
fn forged(base: &Manifest, b: ProducerState) -> Manifest {
    let (mut m, _) = commit_with(base, &[claim("b", 4, 99)]);
    *m.producers.get_mut("b").unwrap() = b;
    m
}

#[test]
fn readers_refuse_every_other_change_of_another_producers_epoch() {
    let base = base2();
    let good = commit_with(&base, &[claim("b", 4, 99)]).0.producers["b"];
    let rule = |m: &Manifest| {
        validate(m, &limits()).unwrap_or_else(|e| panic!("validate: {e}"));
        check_extends(&base, m).unwrap_err().rule()
    };
    // A new incarnation at the same epoch: the epoch changed hands.
    let mut same = good;
    same.epoch = 3;
    assert!(matches!(
        rule(&forged(&base, same)),
        Some(rules::SINGLE_COMMIT | rules::PRODUCER_PROGRESS)
    ));
    // A claim that moves the source offset, or records no limit.
    let mut moved = good;
    moved.source_offset += 1;
    assert_eq!(rule(&forged(&base, moved)), Some(rules::SINGLE_COMMIT));
    let mut unlimited = good;
    unlimited.max_commit_age_ms = 0;
    assert_eq!(rule(&forged(&base, unlimited)), Some(rules::SINGLE_COMMIT));
    // The same changes in a plain version (no committer): one entry per commit.
    let (mut plain, _) = commit_with(&base, &[claim("b", 4, 99)]);
    plain.committer.clear();
    let err = validate(&plain, &limits()).unwrap_err();
    assert_eq!(err.rule(), Some(rules::ONE_COMMITTER), "{err}");
}

proptest! {
    /// Whatever claims a listing shows, the candidate is valid, extends its base, records
    /// for each other producer at most the highest epoch above its entry, and changes
    /// nothing of a recorded entry but its epoch, incarnation, limit and commit marks.
    #[test]
    fn recorded_claims_follow_the_rule(
        raw in proptest::collection::vec((0usize..4, 0u64..7, 0u64..3, 1u64..100_000), 0..12),
    ) {
        let ids = ["a", "b", "c", "d"];
        let claims: Vec<EpochClaim> = raw
            .iter()
            .map(|&(i, epoch, inc, age)| EpochClaim {
                producer_id: ids[i].to_owned(),
                epoch,
                incarnation: inc,
                max_commit_age_ms: age,
            })
            .collect();
        let base = base2();
        let (m, n) = commit_with(&base, &claims);
        let mut recorded = 0;
        for id in ["b", "c", "d"] {
            let held = base.producers.get(id).map_or(0, |e| e.epoch);
            let above: Vec<&EpochClaim> =
                claims.iter().filter(|c| c.producer_id == id && c.epoch > held).collect();
            let top = above.iter().map(|c| c.epoch).max();
            let at_top: std::collections::BTreeSet<(u64, u64)> = above
                .iter()
                .filter(|c| Some(c.epoch) == top)
                .map(|c| (c.incarnation, c.max_commit_age_ms))
                .collect();
            match (top, at_top.len()) {
                (Some(epoch), 1) => {
                    recorded += 1;
                    let e = m.producers[id];
                    let &(inc, age) = at_top.iter().next().unwrap();
                    prop_assert_eq!((e.epoch, e.incarnation, e.max_commit_age_ms), (epoch, inc, age));
                    let old = base.producers.get(id).copied().unwrap_or_default();
                    prop_assert_eq!(
                        (e.last_sequence, e.tgbs_committed, e.source_offset),
                        (old.last_sequence, old.tgbs_committed, old.source_offset)
                    );
                }
                _ => prop_assert_eq!(m.producers.get(id), base.producers.get(id)),
            }
        }
        prop_assert_eq!(n, recorded);
        prop_assert_eq!(m.producers["a"].epoch, 1);
    }
}
