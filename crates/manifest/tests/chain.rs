//! Property tests of the reader rules on random chains built with `rebase`:
//! every version passes `validate`, every later version passes
//! `check_extends` against every earlier one, and any single corruption of a
//! version (of the kinds below) is caught by one of the two.

mod common;

use batchweave_manifest::{
    DecodeLimits, Manifest, check_extends, decode_manifest, encode_manifest, rules, tgb_key,
    validate,
};
use common::chain;
use proptest::prelude::*;

fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

fn fail(what: String) -> TestCaseError {
    TestCaseError::fail(what)
}

/// A version as written before the grid fields existed.
fn old_format(m: &Manifest) -> Manifest {
    let mut m = m.clone();
    (m.grid_dp, m.grid_cp) = (0, 0);
    m
}

/// One corruption of a version; `at` picks the descriptor or entry.
#[derive(Debug, Clone)]
enum Corruption {
    /// Point a descriptor at another TGB's key.
    RepointKey { at: usize, other_producer: bool },
    /// Bump a descriptor's sequence (and its key with it).
    BumpSequence { at: usize },
    /// Bump a descriptor's epoch (and its key with it).
    BumpEpoch { at: usize },
    /// Move a descriptor's visible_version up or down.
    ShiftVisible { at: usize, up: bool },
    /// Re-append a retained TGB at the end (totals kept consistent).
    Reappend { at: usize },
    /// Drop a descriptor (totals kept consistent).
    Drop { at: usize },
    /// Swap two neighbouring descriptors.
    Swap { at: usize },
    /// Change a field of an entry that did not commit this version.
    Bystander { at: usize, field: u8 },
    /// Change a counter of the committer's entry.
    Committer { field: u8 },
    /// Change the stream's grid.
    Grid,
    /// Claim one more trimmed TGB (first_step and total_tgbs both + 1).
    Shift,
}

fn corruption() -> impl Strategy<Value = Corruption> {
    prop_oneof![
        (any::<usize>(), any::<bool>())
            .prop_map(|(at, other_producer)| Corruption::RepointKey { at, other_producer }),
        any::<usize>().prop_map(|at| Corruption::BumpSequence { at }),
        any::<usize>().prop_map(|at| Corruption::BumpEpoch { at }),
        (any::<usize>(), any::<bool>()).prop_map(|(at, up)| Corruption::ShiftVisible { at, up }),
        any::<usize>().prop_map(|at| Corruption::Reappend { at }),
        any::<usize>().prop_map(|at| Corruption::Drop { at }),
        any::<usize>().prop_map(|at| Corruption::Swap { at }),
        (any::<usize>(), 0..7u8).prop_map(|(at, field)| Corruption::Bystander { at, field }),
        (0..3u8).prop_map(|field| Corruption::Committer { field }),
        Just(Corruption::Grid),
        Just(Corruption::Shift),
    ]
}

/// Applies `c` to `m`; `None` if it does not apply (no descriptor, no
/// bystander, ...).
fn corrupt(m: &Manifest, c: &Corruption) -> Option<Manifest> {
    let mut m = m.clone();
    let n = m.tgbs.len();
    let pick = |at: usize| (n > 0).then(|| at % n);
    let resize = |m: &mut Manifest| {
        m.total_tgbs = m.first_step + m.tgbs.len() as u64;
        m.retained_bytes = m.tgbs.iter().map(|t| t.object_size).sum();
    };
    match *c {
        Corruption::RepointKey { at, other_producer } => {
            let t = &mut m.tgbs[pick(at)?];
            t.key = if other_producer {
                tgb_key(&format!("{}x", t.producer_id), t.epoch, t.sequence)
            } else {
                tgb_key(&t.producer_id, t.epoch, t.sequence + 1)
            };
        }
        Corruption::BumpSequence { at } => {
            let t = &mut m.tgbs[pick(at)?];
            t.sequence += 1;
            t.key = tgb_key(&t.producer_id, t.epoch, t.sequence);
        }
        Corruption::BumpEpoch { at } => {
            let t = &mut m.tgbs[pick(at)?];
            t.epoch += 1;
            t.key = tgb_key(&t.producer_id, t.epoch, t.sequence);
        }
        Corruption::ShiftVisible { at, up } => {
            let t = &mut m.tgbs[pick(at)?];
            t.visible_version = if up {
                t.visible_version + 1
            } else {
                t.visible_version - 1
            };
        }
        Corruption::Reappend { at } => {
            let mut t = m.tgbs[pick(at)?].clone();
            t.visible_version = m.version;
            m.tgbs.push(t);
            resize(&mut m);
        }
        Corruption::Drop { at } => {
            m.tgbs.remove(pick(at)?);
            m.total_tgbs -= 1;
            m.retained_bytes = m.tgbs.iter().map(|t| t.object_size).sum();
        }
        Corruption::Swap { at } => {
            let i = pick(at)?;
            if i + 1 >= n || m.tgbs[i] == m.tgbs[i + 1] {
                return None;
            }
            m.tgbs.swap(i, i + 1);
        }
        Corruption::Bystander { at, field } => {
            let version = m.version;
            let bystanders: Vec<String> = m
                .producers
                .iter()
                .filter(|(_, e)| e.last_commit_version != version)
                .map(|(id, _)| id.clone())
                .collect();
            if bystanders.is_empty() {
                return None;
            }
            let e = m
                .producers
                .get_mut(&bystanders[at % bystanders.len()])
                .unwrap();
            let slot = match field {
                0 => &mut e.epoch,
                1 => &mut e.incarnation,
                2 => &mut e.source_offset,
                3 => &mut e.last_sequence,
                4 => &mut e.tgbs_committed,
                5 => &mut e.last_commit_version,
                _ => &mut e.last_commit_ms,
            };
            *slot = slot.wrapping_add(1);
        }
        Corruption::Committer { field } => {
            let version = m.version;
            let e = m
                .producers
                .values_mut()
                .find(|e| e.last_commit_version == version)?;
            match field {
                0 => e.last_sequence += 1,
                1 => e.tgbs_committed += 1,
                _ => e.last_commit_version -= 1,
            }
        }
        Corruption::Grid => {
            if m.grid_dp == 0 {
                return None;
            }
            m.grid_dp += 1;
        }
        Corruption::Shift => {
            m.first_step += 1;
            m.total_tgbs += 1;
        }
    }
    Some(m)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn rebase_chains_pass_every_rule((_, _, chain) in chain()) {
        for (i, m) in chain.iter().enumerate() {
            validate(m, &limits()).map_err(|e| fail(format!("version {}: {e}", m.version)))?;
            let back = decode_manifest(&encode_manifest(m), &limits())
                .map_err(|e| fail(format!("version {}: {e}", m.version)))?;
            prop_assert_eq!(&back, m);
            validate(&old_format(m), &limits())
                .map_err(|e| fail(format!("old-format version {}: {e}", m.version)))?;
            for later in chain.iter().skip(i + 1) {
                let what = |e| fail(format!("{} -> {}: {e}", m.version, later.version));
                check_extends(m, later).map_err(what)?;
                check_extends(&old_format(m), later).map_err(what)?;
                check_extends(&old_format(m), &old_format(later)).map_err(what)?;
                // Never the other way round.
                let back = check_extends(later, m).unwrap_err();
                prop_assert_eq!(back.rule(), Some(rules::EXTENDS));
            }
            prop_assert_eq!(
                check_extends(m, m).unwrap_err().rule(),
                Some(rules::EXTENDS)
            );
            // Genesis keeps nothing, so every valid version extends it (from
            // version 2 on; version 1 must also be a single commit).
            if m.version >= 2 {
                check_extends(&Manifest::genesis(), m)
                    .map_err(|e| fail(format!("genesis -> {}: {e}", m.version)))?;
            }
        }
    }

    #[test]
    fn one_corruption_is_caught(
        (_, _, chain) in chain(),
        which in any::<usize>(),
        c in corruption(),
    ) {
        prop_assume!(chain.len() >= 2);
        let k = 1 + which % (chain.len() - 1);
        let (prev, m) = (&chain[k - 1], &chain[k]);
        let Some(bad) = corrupt(m, &c) else {
            return Ok(());
        };
        prop_assume!(&bad != m);
        let by_validate = validate(&bad, &limits()).err();
        let by_extends = check_extends(prev, &bad).err();
        prop_assert!(
            by_validate.is_some() || by_extends.is_some(),
            "{:?} of version {} not caught:\n{:?}",
            c,
            m.version,
            bad
        );
        // A reader of the envelope sees the same verdict as validate.
        let decoded = decode_manifest(&encode_manifest(&bad), &limits());
        prop_assert_eq!(decoded.is_err(), by_validate.is_some());
    }
}
