//! The extension rule: what a newer version of a stream must keep of an
//! older one (`docs/format.md` section 4.3). [`validate`](crate::validate)
//! checks one version; [`check_extends`] checks that two versions belong to
//! one chain built by the rebase rule.

use crate::error::{ManifestError, clip};
use crate::pb::{Manifest, ProducerState, TgbDescriptor};
use crate::rules;
use crate::validate::{rule, stream_grid};

/// Checks that `next` extends `prev`: that a chain of rebases can lead from
/// `prev` to `next` as far as the two versions show. Both are expected to
/// have passed [`validate`](crate::validate) (every decoder runs it); on
/// other input this never panics, but its verdict means little.
///
/// For any `next.version > prev.version` (a jump over versions the caller did
/// not read, or may not be able to read any more):
///
/// * `extends`: `next.version > prev.version` (an error otherwise),
///   `first_step` and `total_tgbs` do not decrease;
/// * `grid`: a grid fixed in `prev` is unchanged in `next` (for older
///   versions without the fields, their grids as [`stream_grid`] derives
///   them agree);
/// * `same-step`: every step retained in both has an identical descriptor;
/// * `producer-progress`: every entry of `prev` is in `next` with `epoch`,
///   `last_sequence`, `tgbs_committed`, `source_offset` and
///   `last_commit_version` all `>=`, and the same incarnation unless the
///   epoch grew;
/// * `new-tgbs`: every TGB of `next` at a step `>= prev.total_tgbs` has
///   `visible_version > prev.version` and, if its producer has an entry in
///   `prev`, a sequence above that entry's `last_sequence`.
///
/// When `next.version == prev.version + 1`, also `single-commit`: exactly
/// one producer's entry changed or was added, with `last_commit_version ==
/// next.version`; every new TGB (step `>= prev.total_tgbs`) is its and has
/// `visible_version == next.version`; and their number equals the growth of
/// its `last_sequence` and of its `tgbs_committed`. A cooperative version (one
/// that names its `committer`) may also advance other entries, each keeping its
/// epoch, incarnation and `max_commit_age_ms` and growing by exactly its new
/// TGBs (at least one), or recording an epoch claim (a higher epoch, a non-zero
/// limit, no new TGBs, sequence, count and source offset unchanged; a new entry
/// starts at 0); in both, every new TGB carries its entry's epoch.
///
/// Costs O(retained TGBs + producers · log producers) and allocates nothing
/// unless it reports an error.
pub fn check_extends(prev: &Manifest, next: &Manifest) -> Result<(), ManifestError> {
    let (pv, nv) = (prev.version, next.version);
    if nv <= pv {
        return Err(rule(
            rules::EXTENDS,
            format!("version {nv} is not newer than version {pv}"),
        ));
    }
    if next.first_step < prev.first_step {
        return Err(rule(
            rules::EXTENDS,
            format!(
                "first_step went back from {} at version {pv} to {} at version {nv}",
                prev.first_step, next.first_step
            ),
        ));
    }
    if next.total_tgbs < prev.total_tgbs {
        return Err(rule(
            rules::EXTENDS,
            format!(
                "total_tgbs went back from {} at version {pv} to {} at version {nv}",
                prev.total_tgbs, next.total_tgbs
            ),
        ));
    }
    check_grid(prev, next)?;
    check_shared_steps(prev, next)?;
    for (id, a) in &prev.producers {
        let Some(b) = next.producers.get(id) else {
            return Err(rule(
                rules::PRODUCER_PROGRESS,
                format!("producer {id} has an entry at version {pv} but none at version {nv}"),
            ));
        };
        check_progress(id, a, b, pv, nv)?;
    }
    check_new_tgbs(prev, next)?;
    if pv.checked_add(1) == Some(nv) {
        check_single_commit(prev, next)?;
    }
    Ok(())
}

fn check_grid(prev: &Manifest, next: &Manifest) -> Result<(), ManifestError> {
    let (pv, nv) = (prev.version, next.version);
    let fixed = |m: &Manifest| (m.grid_dp, m.grid_cp);
    let differ = |g: (u32, u32), h: (u32, u32)| {
        Err(rule(
            rules::GRID,
            format!(
                "the stream's grid is DP={} x CP={} at version {pv} but DP={} x CP={} at \
                 version {nv}",
                g.0, g.1, h.0, h.1
            ),
        ))
    };
    if fixed(prev) != (0, 0) {
        if fixed(next) != fixed(prev) {
            return differ(fixed(prev), fixed(next));
        }
    } else if let (Some(g), Some(h)) = (stream_grid(prev), stream_grid(next))
        && g != h
    {
        return differ(g, h);
    }
    Ok(())
}

/// `same-step`: the steps retained in both versions,
/// `next.first_step .. prev.total_tgbs` (`next.first_step >= prev.first_step`
/// and `next.total_tgbs >= prev.total_tgbs` are checked before).
fn check_shared_steps(prev: &Manifest, next: &Manifest) -> Result<(), ManifestError> {
    let (pv, nv) = (prev.version, next.version);
    let Some(shared) = prev.total_tgbs.checked_sub(next.first_step) else {
        return Ok(());
    };
    let skip = next.first_step.saturating_sub(prev.first_step);
    let older = prev
        .tgbs
        .iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX));
    let mut compared = 0u64;
    for (a, b) in older.zip(&next.tgbs) {
        if compared == shared {
            break;
        }
        let step = next.first_step.saturating_add(compared);
        if a != b {
            return Err(rule(
                rules::SAME_STEP,
                format!(
                    "step {step} differs between version {pv} and version {nv}: {}",
                    describe_difference(a, b)
                ),
            ));
        }
        compared = compared.saturating_add(1);
    }
    if compared != shared {
        let step = next.first_step.saturating_add(compared);
        return Err(rule(
            rules::SAME_STEP,
            format!("step {step} is not retained by both version {pv} and version {nv}"),
        ));
    }
    Ok(())
}

/// Names the first field that differs between two descriptors, with both values.
fn describe_difference(a: &TgbDescriptor, b: &TgbDescriptor) -> String {
    macro_rules! first_diff {
        ($($field:ident),*) => {
            $(if a.$field != b.$field {
                return format!(
                    concat!(stringify!($field), " {:?} became {:?}"),
                    a.$field, b.$field
                );
            })*
        };
    }
    first_diff!(
        key,
        producer_id,
        epoch,
        sequence,
        visible_version,
        object_size,
        dp,
        cp,
        footer_offset,
        footer_length,
        footer_crc32,
        payload_bytes,
        source_offset
    );
    "the descriptors are equal".to_owned()
}

/// `producer-progress` for one entry present in both versions.
fn check_progress(
    id: &str,
    a: &ProducerState,
    b: &ProducerState,
    pv: u64,
    nv: u64,
) -> Result<(), ManifestError> {
    for (field, old, new) in [
        ("epoch", a.epoch, b.epoch),
        ("last_sequence", a.last_sequence, b.last_sequence),
        ("tgbs_committed", a.tgbs_committed, b.tgbs_committed),
        ("source_offset", a.source_offset, b.source_offset),
        (
            "last_commit_version",
            a.last_commit_version,
            b.last_commit_version,
        ),
    ] {
        if new < old {
            return Err(rule(
                rules::PRODUCER_PROGRESS,
                format!(
                    "producer {id}: {field} went back from {old} at version {pv} to {new} at \
                     version {nv}"
                ),
            ));
        }
    }
    if a.epoch == b.epoch && a.incarnation != b.incarnation {
        return Err(rule(
            rules::PRODUCER_PROGRESS,
            format!(
                "producer {id}: epoch {} changed hands from incarnation {} at version {pv} to \
                 incarnation {} at version {nv} (a new incarnation needs a higher epoch)",
                a.epoch, a.incarnation, b.incarnation
            ),
        ));
    }
    Ok(())
}

/// The TGBs `next` retains at steps `>= prev.total_tgbs` (appended after
/// `prev`), with their steps.
fn new_tgbs<'a>(
    prev: &Manifest,
    next: &'a Manifest,
) -> impl Iterator<Item = (u64, &'a TgbDescriptor)> {
    let from = prev.total_tgbs.max(next.first_step);
    let skip = from.saturating_sub(next.first_step);
    next.tgbs
        .iter()
        .skip(usize::try_from(skip).unwrap_or(usize::MAX))
        .zip(0u64..)
        .map(move |(d, i)| (from.saturating_add(i), d))
}

/// `new-tgbs`.
fn check_new_tgbs(prev: &Manifest, next: &Manifest) -> Result<(), ManifestError> {
    let (pv, nv) = (prev.version, next.version);
    for (step, d) in new_tgbs(prev, next) {
        if d.visible_version <= pv {
            return Err(rule(
                rules::NEW_TGBS,
                format!(
                    "step {step} is beyond version {pv}'s {} TGBs but its visible_version at \
                     version {nv} is {}",
                    prev.total_tgbs, d.visible_version
                ),
            ));
        }
        if let Some(a) = prev.producers.get(&d.producer_id)
            && d.sequence <= a.last_sequence
        {
            return Err(rule(
                rules::NEW_TGBS,
                format!(
                    "step {step}: producer {} sequence {} was appended after version {pv}, \
                     which already holds its sequences up to {}",
                    d.producer_id, d.sequence, a.last_sequence
                ),
            ));
        }
    }
    Ok(())
}

/// `single-commit`, for `next.version == prev.version + 1`.
///
/// A plain version (no `committer`) changes exactly one entry, the committer's. A
/// cooperative version names its committer, whose entry changes as in a plain commit;
/// every other entry it changes keeps its epoch, incarnation and `max_commit_age_ms`
/// and gains at least one TGB, or records an epoch claim (a higher epoch and nothing
/// else but the incarnation and limit). In both, every changed entry records the version, grows
/// by exactly its new TGBs, and every new TGB is visible at the version and of its
/// entry's epoch.
fn check_single_commit(prev: &Manifest, next: &Manifest) -> Result<(), ManifestError> {
    let nv = next.version;
    let cooperative = !next.committer.is_empty();
    let mut changed = next
        .producers
        .iter()
        .filter(|(id, b)| prev.producers.get(*id) != Some(*b));
    let Some((first, _)) = changed.clone().next() else {
        return Err(rule(
            rules::SINGLE_COMMIT,
            format!("no producer entry changed at version {nv} (a commit updates its committer's)"),
        ));
    };
    if !cooperative && let Some((other, _)) = changed.clone().nth(1) {
        return Err(rule(
            rules::SINGLE_COMMIT,
            format!(
                "the entries of producers {first} and {other} both changed at version {nv} \
                 (one commit changes one entry)"
            ),
        ));
    }
    // New TGBs per producer.
    let mut added: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for (step, d) in new_tgbs(prev, next) {
        if d.visible_version != nv {
            return Err(rule(
                rules::SINGLE_COMMIT,
                format!(
                    "step {step} was appended at version {nv} but its visible_version is {}",
                    d.visible_version
                ),
            ));
        }
        let Some(b) = next.producers.get(&d.producer_id) else {
            continue; // `producer-entry` reports it
        };
        if d.epoch != b.epoch {
            return Err(rule(
                rules::SINGLE_COMMIT,
                format!(
                    "step {step} was appended at version {nv} with epoch {} of producer {}, \
                     whose entry holds epoch {} (a TGB is published only under its \
                     producer's current epoch)",
                    d.epoch, d.producer_id, b.epoch
                ),
            ));
        }
        *added.entry(d.producer_id.as_str()).or_default() += 1;
    }
    let mut grown = 0u64;
    for (id, b) in changed.by_ref() {
        if b.last_commit_version != nv {
            return Err(rule(
                rules::SINGLE_COMMIT,
                format!(
                    "producer {id}: its entry changed at version {nv} but its \
                     last_commit_version is {}",
                    b.last_commit_version
                ),
            ));
        }
        let a = prev.producers.get(id).cloned().unwrap_or_default();
        let mine = added.remove(id.as_str()).unwrap_or(0);
        grown = grown.saturating_add(mine);
        if cooperative && *id != next.committer {
            let old = prev.producers.get(id);
            let same = old.is_some_and(|a| {
                (a.epoch, a.incarnation, a.max_commit_age_ms)
                    == (b.epoch, b.incarnation, b.max_commit_age_ms)
            });
            // A recorded epoch claim: a higher epoch (any from 1 for a new entry), a limit,
            // and nothing else of the entry changed (it gains no TGBs: those of its old
            // epoch are fenced by the claim, those of the new one are not published yet).
            let claim = mine == 0
                && b.max_commit_age_ms > 0
                && b.epoch > old.map_or(0, |a| a.epoch)
                && old.map_or((0, 0, 0), |a| {
                    (a.last_sequence, a.tgbs_committed, a.source_offset)
                }) == (b.last_sequence, b.tgbs_committed, b.source_offset);
            if !claim && (!same || mine == 0) {
                return Err(rule(
                    rules::SINGLE_COMMIT,
                    format!(
                        "producer {id}: version {nv}, which producer {} committed, changed \
                         its entry other than by publishing its next TGBs or recording a \
                         claim of a higher epoch (only the committer's own entry may change \
                         otherwise)",
                        clip(&next.committer)
                    ),
                ));
            }
        }
        for (field, old, new) in [
            ("last_sequence", a.last_sequence, b.last_sequence),
            ("tgbs_committed", a.tgbs_committed, b.tgbs_committed),
        ] {
            if new.checked_sub(old) != Some(mine) {
                return Err(rule(
                    rules::SINGLE_COMMIT,
                    format!(
                        "producer {id}: version {nv} appends {mine} of its TGBs, but its \
                         {field} went from {old} to {new}"
                    ),
                ));
            }
        }
    }
    if let Some((id, _)) = added.into_iter().next() {
        return Err(rule(
            rules::SINGLE_COMMIT,
            format!("version {nv} appends TGBs of producer {id}, whose entry it did not advance"),
        ));
    }
    let appended = next.total_tgbs.saturating_sub(prev.total_tgbs);
    if grown != appended {
        return Err(rule(
            rules::SINGLE_COMMIT,
            format!("version {nv} appends {appended} TGBs but its entries grew by {grown}"),
        ));
    }
    Ok(())
}
