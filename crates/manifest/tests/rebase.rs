//! Example-based tests of the rebase rules and the step helpers.

mod common;

use batchweave_manifest::{
    CommitStatus, DecodeLimits, Manifest, RebaseError, commit_status, decode_manifest,
    encode_manifest, find_step, last_step, rebase, step_of, validate,
};
use common::{pending, tgb};

fn ok(m: &Manifest) {
    validate(m, &DecodeLimits::default()).unwrap();
    assert_eq!(
        &decode_manifest(&encode_manifest(m), &DecodeLimits::default()).unwrap(),
        m
    );
}

#[test]
fn first_commit_from_genesis() {
    let g = Manifest::genesis();
    assert_eq!((g.version, g.total_tgbs, last_step(&g)), (0, 0, None));
    let v1 = rebase(&g, &pending("a", 1, 9, 1..=3), 0).unwrap();
    ok(&v1);
    assert_eq!(v1.version, 1);
    assert_eq!(v1.total_tgbs, 3);
    assert!(v1.tgbs.iter().all(|t| t.visible_version == 1));
    assert_eq!(
        v1.retained_bytes,
        v1.tgbs.iter().map(|t| t.object_size).sum::<u64>()
    );
    assert_eq!(v1.committed_at_ms, 1_000);
    let e = &v1.producers["a"];
    assert_eq!((e.epoch, e.incarnation, e.last_sequence), (1, 9, 3));
    assert_eq!(
        (e.source_offset, e.last_commit_version, e.tgbs_committed),
        (30, 1, 3)
    );
    assert_eq!(step_of(&v1, 2), Some(2));
    assert_eq!(step_of(&v1, 3), None);
    assert_eq!(find_step(&v1, 1).map(|t| t.sequence), Some(2));
    assert_eq!(last_step(&v1), Some(2));
}

#[test]
fn other_producers_are_copied_verbatim() {
    let v1 = rebase(&Manifest::genesis(), &pending("a", 1, 1, 1..=2), 0).unwrap();
    let v2 = rebase(&v1, &pending("b", 4, 2, 1..=1), 0).unwrap();
    ok(&v2);
    assert_eq!(v2.producers["a"], v1.producers["a"]);
    assert_eq!(&v2.tgbs[..2], &v1.tgbs[..]);
    assert_eq!(v2.tgbs[2].visible_version, 2);
    assert_eq!(v2.tgbs[0].visible_version, 1);
}

#[test]
fn lost_reply_is_not_appended_twice() {
    let v1 = rebase(&Manifest::genesis(), &pending("a", 1, 1, 1..=2), 0).unwrap();
    let v2 = rebase(&v1, &pending("b", 1, 5, 1..=1), 0).unwrap();
    // "a" believes its commit of 1..=2 failed, produced 3 meanwhile.
    let v3 = rebase(&v2, &pending("a", 1, 1, 1..=3), 0).unwrap();
    ok(&v3);
    let seqs: Vec<_> = v3
        .tgbs
        .iter()
        .map(|t| (t.producer_id.as_str(), t.sequence))
        .collect();
    assert_eq!(seqs, [("a", 1), ("a", 2), ("b", 1), ("a", 3)]);
    assert_eq!(v3.producers["a"].tgbs_committed, 3);
    // Everything already in: nothing appended, version still advances.
    let v4 = rebase(&v3, &pending("a", 1, 1, 1..=3), 0).unwrap();
    assert_eq!(v4.tgbs, v3.tgbs);
    assert_eq!(v4.producers["a"].last_sequence, 3);
    assert_eq!(commit_status(&v3, "a", 1, 1, 3), CommitStatus::Committed);
    assert_eq!(commit_status(&v3, "a", 1, 1, 4), CommitStatus::NotCommitted);
    assert_eq!(commit_status(&v3, "c", 1, 1, 1), CommitStatus::NotCommitted);
}

#[test]
fn gaps_and_malformed_batches_are_rejected() {
    let v1 = rebase(&Manifest::genesis(), &pending("a", 1, 1, 1..=2), 0).unwrap();
    assert!(matches!(
        rebase(&v1, &pending("a", 1, 1, 4..=5), 0),
        Err(RebaseError::SequenceGap {
            expected: 3,
            found: 4,
            ..
        })
    ));
    assert!(matches!(
        rebase(&Manifest::genesis(), &pending("a", 1, 1, 2..=2), 0),
        Err(RebaseError::SequenceGap {
            expected: 1,
            found: 2,
            ..
        })
    ));
    // Base holds more of this incarnation than the caller knows about.
    assert!(matches!(
        rebase(&v1, &pending("a", 1, 1, 1..=1), 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let mut p = pending("a", 1, 1, 3..=5);
    p.tgbs.swap(0, 1);
    assert!(matches!(
        rebase(&v1, &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let mut p = pending("a", 1, 1, 3..=3);
    p.tgbs[0].producer_id = "b".into();
    assert!(matches!(
        rebase(&v1, &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let mut p = pending("a", 1, 1, 3..=3);
    p.tgbs[0].epoch = 2;
    assert!(matches!(
        rebase(&v1, &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let mut p = pending("a", 1, 1, 3..=3);
    p.tgbs[0].key = "../x".into();
    assert!(matches!(
        rebase(&v1, &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let p = common::empty("a/b", 1, 1, 0);
    assert!(matches!(
        rebase(&v1, &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let mut p = common::empty("a", 1, 1, 0);
    p.tgbs = vec![tgb("a", 1, 0)];
    assert!(matches!(
        rebase(&Manifest::genesis(), &p, 0),
        Err(RebaseError::InvalidPending { .. })
    ));
    let mut top = v1.clone();
    top.version = u64::MAX;
    assert!(matches!(
        rebase(&top, &pending("a", 1, 1, 3..=3), 0),
        Err(RebaseError::Overflow { what: "version" })
    ));
}

#[test]
fn fencing_and_epoch_claims() {
    let v1 = rebase(&Manifest::genesis(), &pending("a", 1, 11, 1..=2), 0).unwrap();
    // Same epoch, other incarnation: the one in the chain wins.
    assert_eq!(
        rebase(&v1, &pending("a", 1, 12, 3..=3), 0),
        Err(RebaseError::Fenced {
            producer_id: "a".into(),
            ours: (1, 12),
            theirs: (1, 11)
        })
    );
    assert_eq!(
        commit_status(&v1, "a", 1, 12, 1),
        CommitStatus::Fenced {
            epoch: 1,
            incarnation: 11
        }
    );
    // A stale TGB-less claim (recovered offset 0, committed 20) is refused.
    let mut claim = common::empty("a", 2, 21, 0);
    assert!(matches!(
        rebase(&v1, &claim, 0),
        Err(RebaseError::StaleRecovery {
            committed: 20,
            claimed: 0,
            ..
        })
    ));
    // The right claim replaces the lower epoch and keeps last_sequence.
    claim.source_offset = 20;
    let v2 = rebase(&v1, &claim, 0).unwrap();
    ok(&v2);
    assert_eq!(v2.tgbs, v1.tgbs);
    let e = &v2.producers["a"];
    assert_eq!(
        (e.epoch, e.incarnation, e.last_sequence, e.tgbs_committed),
        (2, 21, 2, 2)
    );
    // The zombie is now fenced, whatever it tries.
    for p in [pending("a", 1, 11, 3..=3), common::empty("a", 1, 11, 20)] {
        assert!(matches!(
            rebase(&v2, &p, 0),
            Err(RebaseError::Fenced {
                theirs: (2, 21),
                ..
            })
        ));
    }
    assert_eq!(
        commit_status(&v2, "a", 1, 11, 2),
        CommitStatus::Fenced {
            epoch: 2,
            incarnation: 21
        }
    );
    assert_eq!(commit_status(&v2, "a", 2, 21, 2), CommitStatus::Committed);
    // A claim that carries TGBs must continue the sequence of the old epoch.
    assert!(matches!(
        rebase(&v1, &pending("a", 2, 21, 1..=1), 0),
        Err(RebaseError::SequenceGap {
            expected: 3,
            found: 1,
            ..
        })
    ));
    let v2b = rebase(&v1, &pending("a", 2, 21, 3..=4), 0).unwrap();
    ok(&v2b);
    assert_eq!(v2b.producers["a"].tgbs_committed, 4);
    assert_eq!(v2b.tgbs[3].key, "tgb/a/0000000002-00000000000000000004.tgb");
}

#[test]
fn trimming_is_clamped_and_monotonic() {
    let v1 = rebase(&Manifest::genesis(), &pending("a", 1, 1, 1..=4), 0).unwrap();
    let v2 = rebase(&v1, &pending("b", 1, 1, 1..=1), 2).unwrap();
    ok(&v2);
    assert_eq!((v2.first_step, v2.total_tgbs, v2.tgbs.len()), (2, 5, 3));
    assert_eq!(find_step(&v2, 1), None);
    assert_eq!(find_step(&v2, 2).map(|t| t.sequence), Some(3));
    // Lower trim point: first_step does not go back.
    let v3 = rebase(&v2, &pending("b", 1, 1, 2..=2), 0).unwrap();
    assert_eq!(v3.first_step, 2);
    // Beyond the total: clamped to the base's total; the new TGB is retained.
    let v4 = rebase(&v3, &pending("b", 1, 1, 3..=3), 1_000).unwrap();
    ok(&v4);
    assert_eq!((v4.first_step, v4.total_tgbs, v4.tgbs.len()), (6, 7, 1));
    assert_eq!(v4.retained_bytes, v4.tgbs[0].object_size);
    assert_eq!(last_step(&v4), Some(6));
}
