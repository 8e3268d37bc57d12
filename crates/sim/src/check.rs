//! The invariants checked after a run, against the ground truth the
//! simulated backend recorded (every manifest write, including versions GC
//! has since deleted).
//!
//! | name | what must hold |
//! |---|---|
//! | `chain-decodes` | every manifest version written decodes and names its own version |
//! | `one-order` | versions are contiguous from 1 and each extends the previous one |
//! | `exactly-once` | each producer's committed source offsets are exactly `1..=quota`, in order |
//! | `zombie-fenced` | along the chain a producer's epochs never go backwards |
//! | `no-ghost-commit` | everything a producer reported committed is in the chain |
//! | `ranks-agree` | every rank saw every step of its group (each checked against the live chain on delivery) |

use std::collections::BTreeMap;

use batchweave_manifest::{
    DecodeLimits, Manifest, TgbDescriptor, decode_manifest, parse_manifest_key,
};

use batchweave_tgb::steps_covered;

use crate::SimFailure;
use crate::log::{lock, summary};
use crate::world::{RankPlan, World};

/// The chain as written: the last write of each version, decoded.
pub(crate) fn chain(w: &World) -> Result<BTreeMap<u64, Manifest>, SimFailure> {
    let limits = DecodeLimits::default();
    let mut out = BTreeMap::new();
    for write in w.backend.manifest_writes() {
        let Some(v) = parse_manifest_key(&write.key) else {
            continue;
        };
        if write.ghost {
            // Landed in a slot GC had emptied: not part of the chain (the
            // writer must have treated it as a conflict; `producers` checks
            // that nothing it believes committed is missing).
            continue;
        }
        let m = decode_manifest(&write.bytes, &limits).map_err(|e| {
            w.violation(
                "chain-decodes",
                format!("{} (written at {}ms): {e}", write.key, write.at_ms),
            )
        })?;
        if m.version != v {
            return Err(w.violation(
                "chain-decodes",
                format!("{} holds version {}", write.key, m.version),
            ));
        }
        out.insert(v, m);
    }
    Ok(out)
}

fn total(m: &Manifest) -> u64 {
    m.first_step + m.tgbs.len() as u64
}

/// `max-lag`: a version that adds TGBs, committed by an incarnation with `max_lag = L`,
/// ends at most L steps past the low-water mark in force when it was written (the
/// producer's view of the mark can only be lower). The committer of a cooperative
/// version is the one it names (its `max_lag` bounds the TGBs it publishes for others
/// too, docs/protocol.md section 14); of a plain version, the producer of its TGBs.
pub(crate) fn max_lag(w: &World) -> Result<(), SimFailure> {
    let limits = DecodeLimits::default();
    let lags = lock(&w.lags).clone();
    let mut prev_total = 0u64;
    let mut last_version = 0u64;
    for write in w.backend.manifest_writes() {
        let Some(v) = parse_manifest_key(&write.key) else {
            continue;
        };
        let Ok(m) = decode_manifest(&write.bytes, &limits) else {
            continue;
        };
        if write.ghost || v <= last_version {
            continue;
        }
        last_version = v;
        let total = total(&m);
        let committers: Vec<(String, u64)> = if m.committer.is_empty() {
            m.tgbs
                .iter()
                .filter(|d| d.visible_version == v)
                .map(|d| (d.producer_id.clone(), d.epoch))
                .collect()
        } else {
            m.producers
                .get(&m.committer)
                .map(|e| (m.committer.clone(), e.epoch))
                .into_iter()
                .collect()
        };
        let adds = m.tgbs.iter().any(|d| d.visible_version == v);
        for (id, epoch) in committers {
            if let Some(Some(lag)) = lags.get(&(id.clone(), epoch))
                && adds
                && total > write.low_water.saturating_add(*lag)
                && total > prev_total
            {
                return Err(w.violation(
                    "max-lag",
                    format!(
                        "version {v} by {id} epoch {epoch} (max_lag {lag}) ends at step {total}, the low-water mark was {}",
                        write.low_water
                    ),
                ));
            }
        }
        prev_total = total;
    }
    Ok(())
}

/// Checks one order and returns the descriptor of every global step.
pub(crate) fn steps(
    w: &World,
    chain: &BTreeMap<u64, Manifest>,
) -> Result<Vec<TgbDescriptor>, SimFailure> {
    let mut steps: Vec<TgbDescriptor> = Vec::new();
    let mut prev: Option<&Manifest> = None;
    for (v, m) in chain {
        let expect = prev.map_or(1, |p| p.version + 1);
        if *v != expect {
            return Err(w.violation(
                "one-order",
                format!("version {v} follows version {}", expect - 1),
            ));
        }
        let base = prev.map_or(0, total);
        if m.first_step > base || total(m) < base {
            return Err(w.violation(
                "one-order",
                format!(
                    "version {v} covers steps {}..{}, its predecessor ended at {base}: {} after {}",
                    m.first_step,
                    total(m),
                    summary(m),
                    prev.map(summary).unwrap_or_default()
                ),
            ));
        }
        for (i, d) in m.tgbs.iter().enumerate() {
            let step = m.first_step + i as u64;
            match steps.get(step as usize) {
                Some(old) if old != d => {
                    return Err(w.violation(
                        "one-order",
                        format!(
                            "version {v} has {} ({} seq {}) at step {step}, an earlier version had {} ({} seq {})",
                            d.key, d.producer_id, d.sequence, old.key, old.producer_id, old.sequence
                        ),
                    ));
                }
                Some(_) => {}
                None if step as usize == steps.len() => {
                    if d.visible_version != *v {
                        return Err(w.violation(
                            "one-order",
                            format!(
                                "step {step} first appears in version {v} with visible_version {}",
                                d.visible_version
                            ),
                        ));
                    }
                    steps.push(d.clone());
                }
                None => {
                    return Err(
                        w.violation("one-order", format!("version {v} skips to step {step}"))
                    );
                }
            }
        }
        if let Some(p) = prev {
            for (id, e) in &m.producers {
                if let Some(old) = p.producers.get(id)
                    && (e.epoch < old.epoch || e.source_offset < old.source_offset)
                {
                    return Err(w.violation(
                        "zombie-fenced",
                        format!(
                            "version {v}: {id} at epoch {} offset {}, version {} had epoch {} offset {}",
                            e.epoch, e.source_offset, p.version, old.epoch, old.source_offset
                        ),
                    ));
                }
            }
        }
        prev = Some(m);
    }
    Ok(steps)
}

/// Exactly once, per-producer order, epochs, ghost commits.
pub(crate) fn producers(
    w: &World,
    steps: &[TgbDescriptor],
    newest: &Manifest,
) -> Result<(), SimFailure> {
    let logs = lock(&w.producers).clone();
    let mut per: BTreeMap<&str, Vec<&TgbDescriptor>> = BTreeMap::new();
    for d in steps {
        per.entry(d.producer_id.as_str()).or_default().push(d);
    }
    for (id, log) in &logs {
        let mine = per.remove(id.as_str()).unwrap_or_default();
        let offsets: Vec<u64> = mine.iter().map(|d| d.source_offset).collect();
        let want: Vec<u64> = (1..=log.quota).collect();
        if offsets != want {
            let believed = log.believed;
            let invariant = if (offsets.len() as u64) < believed.min(log.quota) {
                "no-ghost-commit"
            } else {
                "exactly-once"
            };
            return Err(w.violation(
                invariant,
                format!("{id} committed source offsets {offsets:?}, expected 1..={} (it reported {believed} committed)", log.quota),
            ));
        }
        for pair in mine.windows(2) {
            if let [a, b] = pair
                && (b.epoch < a.epoch || (b.epoch == a.epoch && b.sequence != a.sequence + 1))
            {
                return Err(w.violation(
                    "zombie-fenced",
                    format!(
                        "{id}: {} (epoch {} seq {}) follows {} (epoch {} seq {})",
                        b.key, b.epoch, b.sequence, a.key, a.epoch, a.sequence
                    ),
                ));
            }
        }
        let state = newest.producers.get(id).map_or(0, |e| e.source_offset);
        if state < log.believed || state != log.quota {
            return Err(w.violation(
                "no-ghost-commit",
                format!("{id}: newest version records offset {state}, it reported {} committed, quota {}", log.believed, log.quota),
            ));
        }
    }
    if let Some((id, _)) = per.into_iter().next() {
        return Err(w.violation("exactly-once", format!("TGBs of unknown producer {id}")));
    }
    Ok(())
}

/// Every rank saw every step of its group (each one was checked against the live
/// chain when it was delivered): to the end of the chain, or to its stop step.
pub(crate) fn ranks(w: &World, plans: &[RankPlan], total: u64) -> Result<(), SimFailure> {
    for p in plans {
        let covered = steps_covered(w.grid, p.config.grid(), total).unwrap_or(0);
        let want = p.stop.map_or(covered, |s| s.min(covered));
        let seen = lock(&w.ranks)
            .get(&p.id())
            .map_or(0, |l| l.seen.len() as u64);
        if seen != want {
            return Err(w.violation(
                "ranks-agree",
                format!(
                    "{} saw {seen} steps, its group's share of the chain's {total} TGBs is {want}",
                    p.who()
                ),
            ));
        }
    }
    Ok(())
}
