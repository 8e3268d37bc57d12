//! Model test of the commit/rebase protocol: N producers race conditional
//! creates against a simulated version log, with stale bases and lost
//! replies, and the resulting chain must hold every TGB exactly once.

mod common;

use std::collections::BTreeMap;

use batchweave_manifest::{
    CommitStatus, DecodeLimits, Manifest, Pending, RebaseError, TgbDescriptor, check_extends,
    commit_status, rebase, validate,
};
use common::tgb;
use proptest::prelude::*;

struct Producer {
    id: String,
    epoch: u64,
    incarnation: u64,
    produced: u64,
    queue_len: u64,
    pending: Vec<TgbDescriptor>,
    /// The version this producer believes is current (may be stale).
    base: usize,
}

impl Producer {
    fn pending(&self) -> Pending {
        Pending {
            producer_id: self.id.clone(),
            epoch: self.epoch,
            incarnation: self.incarnation,
            source_offset: self.pending.last().map_or(0, |t| t.source_offset),
            tgbs: self.pending.clone(),
            now_ms: 5,
        }
    }
}

#[derive(Debug, Clone)]
struct Op {
    who: usize,
    kind: u8,
    lose_reply: bool,
    use_status: bool,
    stale_to: usize,
    trim: u64,
}

fn op() -> impl Strategy<Value = Op> {
    (
        any::<usize>(),
        0..4u8,
        prop::bool::weighted(0.25),
        any::<bool>(),
        any::<usize>(),
        any::<u64>(),
    )
        .prop_map(|(who, kind, lose_reply, use_status, stale_to, trim)| Op {
            who,
            kind,
            lose_reply,
            use_status,
            stale_to,
            trim,
        })
}

/// One commit attempt of `p` against `log`; returns whether it created a version.
fn attempt(log: &mut Vec<Manifest>, p: &mut Producer, o: &Op, trimming: bool) -> bool {
    let base = &log[p.base];
    let trim = if trimming {
        o.trim % (base.total_tgbs + 2)
    } else {
        0
    };
    let candidate = rebase(base, &p.pending(), trim).expect("rebase of a live producer");
    let target = p.base + 1;
    if target == log.len() {
        log.push(candidate);
        p.base = target;
        if !o.lose_reply {
            p.pending.clear();
        } else if o.use_status {
            // The producer reads the version it lost the reply for and
            // recognises its own commit via the state map.
            let last = p.pending.last().map_or(0, |t| t.sequence);
            let status = commit_status(&log[target], &p.id, p.epoch, p.incarnation, last);
            assert_eq!(status, CommitStatus::Committed);
            p.pending.clear();
        }
        true
    } else {
        // AlreadyExists: read the winner and rebase on it next time.
        p.base = target;
        false
    }
}

fn run(n: usize, queues: &[u64], ops: &[Op], trimming: bool) -> Result<(), TestCaseError> {
    let mut log = vec![Manifest::genesis()];
    let mut ps: Vec<Producer> = (0..n)
        .map(|i| Producer {
            id: format!("p{i}"),
            epoch: 1 + i as u64 % 3,
            incarnation: 100 + i as u64,
            produced: 0,
            queue_len: queues[i],
            pending: Vec::new(),
            base: 0,
        })
        .collect();
    let produce = |p: &mut Producer| {
        if p.produced < p.queue_len {
            p.produced += 1;
            p.pending.push(tgb(&p.id, p.epoch, p.produced));
        }
    };
    for o in ops {
        let p = &mut ps[o.who % n];
        match o.kind {
            0 => produce(p),
            // Catch up part of the way: bases are stale but never move back
            // (a producer never forgets a version it has seen).
            1 => p.base += o.stale_to % (log.len() - p.base),
            _ if !p.pending.is_empty() => {
                attempt(&mut log, p, o, trimming);
            }
            _ => {}
        }
    }
    // Drain: produce everything left and commit until nothing is pending.
    let drain = Op {
        who: 0,
        kind: 2,
        lose_reply: false,
        use_status: false,
        stale_to: 0,
        trim: 0,
    };
    for p in &mut ps {
        while p.produced < p.queue_len {
            produce(p);
        }
    }
    let mut fuel = 10_000;
    while let Some(p) = ps.iter_mut().find(|p| !p.pending.is_empty()) {
        attempt(&mut log, p, &drain, trimming);
        fuel -= 1;
        prop_assert!(fuel > 0, "drain does not terminate");
    }

    // Every version is valid, numbered by its position, and extends its
    // predecessor (after trimming `drop` leading entries).
    let limits = DecodeLimits::default();
    let mut trimmed: Vec<TgbDescriptor> = Vec::new();
    for v in 1..log.len() {
        let (prev, cur) = (&log[v - 1], &log[v]);
        validate(cur, &limits).map_err(|e| TestCaseError::fail(e.to_string()))?;
        check_extends(prev, cur).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(cur.version, v as u64);
        prop_assert!(cur.first_step >= prev.first_step);
        if !trimming {
            prop_assert_eq!(cur.first_step, 0);
        }
        let drop = (cur.first_step - prev.first_step) as usize;
        prop_assert!(drop <= prev.tgbs.len());
        let kept = &prev.tgbs[drop..];
        prop_assert_eq!(
            &cur.tgbs[..kept.len()],
            kept,
            "version {} is not an extension",
            v
        );
        for t in &cur.tgbs[kept.len()..] {
            prop_assert_eq!(t.visible_version, v as u64);
        }
        trimmed.extend_from_slice(&prev.tgbs[..drop]);
    }
    let last = log.last().unwrap();
    let all: Vec<&TgbDescriptor> = trimmed.iter().chain(&last.tgbs).collect();
    prop_assert_eq!(all.len() as u64, last.total_tgbs);
    let mut seen: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for t in &all {
        seen.entry(t.producer_id.as_str())
            .or_default()
            .push(t.sequence);
    }
    for p in &ps {
        let expected: Vec<u64> = (1..=p.queue_len).collect();
        let got = seen.get(p.id.as_str()).cloned().unwrap_or_default();
        // Exactly once, in ascending order.
        prop_assert_eq!(&got, &expected, "producer {}", &p.id);
        if p.queue_len > 0 {
            let e = &last.producers[&p.id];
            prop_assert_eq!(e.last_sequence, p.queue_len);
            prop_assert_eq!(e.tgbs_committed, p.queue_len);
            prop_assert_eq!(e.source_offset, p.queue_len * 10);
        }
    }
    Ok(())
}

fn scenario() -> impl Strategy<Value = (usize, Vec<u64>, Vec<Op>)> {
    (2..=6usize).prop_flat_map(|n| {
        (
            Just(n),
            proptest::collection::vec(0..8u64, n),
            proptest::collection::vec(op(), 0..120),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn concurrent_commits_are_exactly_once((n, queues, ops) in scenario()) {
        run(n, &queues, &ops, false)?;
    }

    #[test]
    fn concurrent_commits_with_trimming_are_exactly_once((n, queues, ops) in scenario()) {
        run(n, &queues, &ops, true)?;
    }

    #[test]
    fn old_incarnation_is_fenced_once_the_new_one_is_in_the_chain(
        committed in 0..5u64,
        same_epoch in any::<bool>(),
        with_tgbs in any::<bool>(),
        others_after in 0..4u64,
        zombie_seqs in (1..10u64, 0..4u64),
        trim in 0..20u64,
    ) {
        let mut chain = vec![Manifest::genesis()];
        // The old incarnation (epoch 3, incarnation 7) commits `committed` TGBs.
        for s in 1..=committed {
            let mut p = common::pending("a", 3, 7, s..=s);
            p.tgbs[0].source_offset = s * 10;
            let next = rebase(chain.last().unwrap(), &p, 0).unwrap();
            chain.push(next);
        }
        // The new incarnation claims (a racing process claiming the same
        // epoch as the old one is modelled by `same_epoch`).
        let new_epoch = if same_epoch { 3 } else { 4 };
        let claim = if with_tgbs {
            common::pending("a", new_epoch, 8, committed + 1..=committed + 2)
        } else {
            common::empty("a", new_epoch, 8, committed * 10)
        };
        let base = chain.last().unwrap().clone();
        match rebase(&base, &claim, 0) {
            Ok(next) => {
                prop_assert!(!(same_epoch && committed > 0), "same-epoch takeover accepted");
                chain.push(next);
            }
            Err(RebaseError::Fenced { theirs, .. }) => {
                // Claiming an epoch already held by another incarnation fails.
                prop_assert!(same_epoch && committed > 0);
                prop_assert_eq!(theirs, (3, 7));
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        }
        let claimed_at = chain.len() - 1;
        for s in 1..=others_after {
            let next = rebase(chain.last().unwrap(), &common::pending("b", 1, 1, s..=s), trim).unwrap();
            chain.push(next);
        }
        let (start, len) = zombie_seqs;
        for m in &chain[claimed_at..] {
            for (epoch, inc) in [(3, 7), (new_epoch, 9)] {
                let zombie = common::pending("a", epoch, inc, start..=start + len);
                let r = rebase(m, &zombie, trim);
                prop_assert!(matches!(r, Err(RebaseError::Fenced { .. })), "{:?}", r);
                let status = commit_status(m, "a", epoch, inc, start);
                prop_assert!(matches!(status, CommitStatus::Fenced { .. }), "{:?}", status);
            }
        }
    }
}
