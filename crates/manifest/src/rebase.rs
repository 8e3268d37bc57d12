//! The commit/rebase merge (paper section 5.1, DESIGN.md "Commit protocol"),
//! as pure functions: no I/O, time comes in as an argument.
//!
//! ```text
//!  base M(v) ──trim──► M(v).tgbs[drop..] ++ my new TGBs ──► candidate M(v+1)
//!                      other producers' entries verbatim, my entry updated
//!
//!  create manifests/<v+1> ─ok──► committed (all my TGBs visible at v+1)
//!         │
//!         └─AlreadyExists──► read the winner M(v+1), rebase on it, try v+2
//! ```
//!
//! Rules for the caller's own entry `e = base.producers[producer_id]`:
//!
//! | base entry                                     | outcome                                   |
//! |------------------------------------------------|-------------------------------------------|
//! | `e.epoch > epoch`                              | [`RebaseError::Fenced`]                   |
//! | `e.epoch == epoch`, other incarnation          | [`RebaseError::Fenced`]                   |
//! | same epoch and incarnation ("ours")            | pending sequences `<= e.last_sequence` are already committed (a lost reply) and skipped; the rest must start at `e.last_sequence + 1` |
//! | `e.epoch < epoch` or no entry ("claim")        | all pending TGBs are new and must start at `e.last_sequence + 1` (1 without an entry); a claim without TGBs must carry `e.source_offset` |
//!
//! In every case the batch's TGBs must be stored under their own keys
//! ([`tgb_key`](crate::tgb_key), or [`described_tgb_key`](crate::described_tgb_key)
//! with every field agreeing), their source offsets must not decrease
//! and not exceed the batch's `source_offset`, the new ones must not start
//! before `e.source_offset`, and every new TGB must have the stream's slice
//! grid ([`stream_grid`]; the first TGB ever committed fixes it, and the
//! candidate records it in `grid_dp`/`grid_cp`), or the merge fails with
//! [`RebaseError::GridMismatch`]. Built on a base that passes
//! [`validate`](crate::validate), every candidate passes it too and
//! [`check_extends`](crate::check_extends) holds from the base to it.

use crate::error::RebaseError;
use crate::keys::{EpochClaim, described_tgb_key, is_key_of, tgb_key, validate_producer_id};
use crate::limits::DecodeLimits;
use crate::pb::{Manifest, ProducerState, TgbDescriptor};
use crate::validate::{stream_grid, validate_descriptor};

/// One producer's uncommitted work, the input of [`rebase`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pending {
    /// The stable producer id.
    pub producer_id: String,
    /// The epoch of this incarnation.
    pub epoch: u64,
    /// The random nonce of this incarnation.
    pub incarnation: u64,
    /// This producer's uncommitted TGBs: ascending, contiguous sequences,
    /// each carrying `producer_id` and `epoch`. May include TGBs whose commit
    /// reply was lost; they are recognised and not appended twice.
    pub tgbs: Vec<TgbDescriptor>,
    /// Source offset after the last pending TGB (the resume point once
    /// everything here is committed).
    pub source_offset: u64,
    /// Unix milliseconds, recorded as `committed_at_ms` / `last_commit_ms`.
    pub now_ms: u64,
}

/// Whether a producer's TGBs up to some sequence are in a manifest version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitStatus {
    /// The entry has this epoch and incarnation and covers the sequence.
    Committed,
    /// Not (yet) committed: the caller may retry.
    NotCommitted,
    /// Another incarnation owns the producer id: the caller must stop.
    Fenced {
        /// Epoch recorded in the manifest.
        epoch: u64,
        /// Incarnation recorded in the manifest.
        incarnation: u64,
    },
}

impl Manifest {
    /// The state before the first commit: version 0, no TGBs, no producers.
    /// Version 0 is never written; the first real version is 1.
    pub fn genesis() -> Self {
        Self::default()
    }
}

/// Global step of `m.tgbs[index]`, or `None` if the index is out of range.
pub fn step_of(m: &Manifest, index: usize) -> Option<u64> {
    if index >= m.tgbs.len() {
        return None;
    }
    m.first_step.checked_add(u64::try_from(index).ok()?)
}

/// The descriptor of global step `step`, if it is retained in `m`.
pub fn find_step(m: &Manifest, step: u64) -> Option<&TgbDescriptor> {
    let index = usize::try_from(step.checked_sub(m.first_step)?).ok()?;
    m.tgbs.get(index)
}

/// The last retained global step of `m` (`None` if `m` retains no TGB).
pub fn last_step(m: &Manifest) -> Option<u64> {
    let len = u64::try_from(m.tgbs.len()).ok()?;
    m.first_step.checked_add(len.checked_sub(1)?)
}

/// Reports whether `producer_id`'s TGBs up to `last_sequence` are committed
/// in `m` by the incarnation `(epoch, incarnation)`.
///
/// `Committed` if the entry has this epoch and incarnation and its
/// `last_sequence >= last_sequence`; `Fenced` if the entry has a newer epoch
/// or the same epoch with another incarnation; `NotCommitted` otherwise.
pub fn commit_status(
    m: &Manifest,
    producer_id: &str,
    epoch: u64,
    incarnation: u64,
    last_sequence: u64,
) -> CommitStatus {
    let Some(e) = m.producers.get(producer_id) else {
        return CommitStatus::NotCommitted;
    };
    if e.epoch > epoch || (e.epoch == epoch && e.incarnation != incarnation) {
        return CommitStatus::Fenced {
            epoch: e.epoch,
            incarnation: e.incarnation,
        };
    }
    if e.epoch == epoch && e.last_sequence >= last_sequence {
        CommitStatus::Committed
    } else {
        CommitStatus::NotCommitted
    }
}

fn invalid(reason: String) -> RebaseError {
    RebaseError::InvalidPending { reason }
}

/// Checks the pending batch on its own: valid id, TGBs of this producer and
/// epoch under their own keys, sequences >= 1, ascending and contiguous,
/// source offsets never decreasing and at most the batch's `source_offset`.
fn check_pending(p: &Pending) -> Result<(), RebaseError> {
    validate_producer_id(&p.producer_id).map_err(|e| invalid(e.to_string()))?;
    let mut prev: Option<&TgbDescriptor> = None;
    for t in &p.tgbs {
        if t.producer_id != p.producer_id || t.epoch != p.epoch {
            return Err(invalid(format!(
                "TGB {:?} belongs to producer {:?} epoch {}, not {:?} epoch {}",
                t.key, t.producer_id, t.epoch, p.producer_id, p.epoch
            )));
        }
        if t.sequence == 0 {
            return Err(invalid("sequence 0 (sequences start at 1)".to_owned()));
        }
        // Either key form; a self-describing key must agree with every field (the
        // `tgb-key` rule every reader checks).
        if !is_key_of(t) {
            return Err(invalid(format!(
                "TGB {:?} is not stored under its key {:?} (nor under its self-describing \
                 key {:?})",
                t.key,
                tgb_key(&p.producer_id, t.epoch, t.sequence),
                described_tgb_key(t)
            )));
        }
        if let Some(prev) = prev {
            if prev.sequence.checked_add(1) != Some(t.sequence) {
                return Err(invalid(format!(
                    "sequences not ascending and contiguous: {} then {}",
                    prev.sequence, t.sequence
                )));
            }
            if t.source_offset < prev.source_offset {
                return Err(invalid(format!(
                    "source offsets go back: sequence {} has {}, sequence {} has {}",
                    prev.sequence, prev.source_offset, t.sequence, t.source_offset
                )));
            }
        }
        prev = Some(t);
    }
    if let Some(last) = prev
        && last.source_offset > p.source_offset
    {
        return Err(invalid(format!(
            "the batch's source_offset {} is before the offset {} of its last TGB (sequence {})",
            p.source_offset, last.source_offset, last.sequence
        )));
    }
    Ok(())
}

/// [`rebase`], and also publish TGBs that other producers uploaded and have not
/// committed yet (a cooperative commit, `docs/protocol.md` section 14).
///
/// `others` are candidates, typically every TGB of a listing of `tgb/` that the
/// caller could describe from its key (see
/// [`descriptor_from_key`](crate::descriptor_from_key)) and whose age it checked
/// against its producer's `max_commit_age_ms`. For each producer other than the
/// caller, the candidate adds exactly the TGBs that continue the producer's entry in
/// `base`: sequences `last_sequence + 1, + 2, ...` without a gap, each of the entry's
/// own epoch (a fenced incarnation's leftovers and uploads of an epoch not claimed yet
/// are never published, and are skipped rather than ending the run), with the stream's
/// grid, its key naming it, and source offsets that never go back from the entry's; the
/// run stops at the first sequence without a qualifying TGB, at a sequence that two
/// different candidates claim, and at `max_others` in all. The order of `others` does
/// not matter, except that producers are served in the order of their first candidate
/// (which matters for the cap, and for the grid while the stream has none), and the
/// same candidate twice counts once. A producer without an entry, or whose entry
/// does not record its `max_commit_age_ms`, gets nothing published. Each advanced entry
/// changes exactly as its producer's own commit of those TGBs would change it
/// (sequence, count, source offset, `last_commit_version`, `last_commit_ms`); its epoch,
/// incarnation and `max_commit_age_ms` stay. Candidates the base already holds are
/// skipped, so two committers that publish the same TGB race through the conditional
/// create and the loser's rebase keeps it once.
///
/// Returns the candidate and the number of other producers' TGBs it publishes. With
/// none, the candidate is exactly [`rebase`]'s; otherwise it names its `committer`.
pub fn rebase_cooperative(
    base: &Manifest,
    pending: &Pending,
    others: &[TgbDescriptor],
    max_others: usize,
    trim_below_step: u64,
) -> Result<(Manifest, usize), RebaseError> {
    rebase_cooperative_with_claims(base, pending, others, &[], max_others, 0, trim_below_step)
        .map(|(m, tgbs, _)| (m, tgbs))
}

/// [`rebase_cooperative`], and also record other producers' epoch claims
/// ([`EpochClaim`], `docs/protocol.md` section 14): the caller found them in a listing of
/// `claims/` and checked each one's age against the limit its key names.
///
/// For each producer other than the caller that gets no TGBs published in this version,
/// the claim of the highest epoch above its entry's (any epoch from 1 for a producer
/// without an entry) is recorded, unless two claims of different incarnations name that
/// epoch (the chain then decides between the openers, as their own claims race): the
/// entry takes the claim's epoch, incarnation and `max_commit_age_ms`, records the version
/// as its `last_commit_version` and `now_ms` as its `last_commit_ms`, and keeps its
/// sequence, count and source offset (a new entry starts at 0). From that version on,
/// uploads of the old epoch are unpublishable (the fencing of `docs/protocol.md` section
/// 6) and the opener, which sees its epoch and incarnation recorded, has claimed. At most
/// `max_claims` claims are recorded, in the order of the producers' first claim.
///
/// Returns the candidate, the number of other producers' TGBs it publishes and the
/// number of claims it records. With neither, the candidate is exactly [`rebase`]'s;
/// otherwise it names its `committer`.
pub fn rebase_cooperative_with_claims(
    base: &Manifest,
    pending: &Pending,
    others: &[TgbDescriptor],
    claims: &[EpochClaim],
    max_others: usize,
    max_claims: usize,
    trim_below_step: u64,
) -> Result<(Manifest, usize, usize), RebaseError> {
    let mut m = rebase(base, pending, trim_below_step)?;
    let grid = stream_grid(&m);
    let published = publishable(base, &pending.producer_id, others, grid, max_others);
    let served: Vec<&str> = published
        .iter()
        .filter_map(|run| run.first().map(|t| t.producer_id.as_str()))
        .collect();
    let recorded = recordable_claims(base, &pending.producer_id, claims, &served, max_claims);
    if published.is_empty() && recorded.is_empty() {
        return Ok((m, 0, 0));
    }
    let version = m.version;
    let limits = DecodeLimits {
        max_grid: u64::MAX,
        ..DecodeLimits::default()
    };
    let mut count = 0usize;
    for run in published {
        let Some(last) = run.last() else { continue };
        let entry = m
            .producers
            .get_mut(&last.producer_id)
            .ok_or_else(|| invalid(format!("producer {} has no entry", last.producer_id)))?;
        let k = u64::try_from(run.len()).unwrap_or(u64::MAX);
        entry.last_sequence = last.sequence;
        entry.source_offset = last.source_offset;
        entry.tgbs_committed =
            entry
                .tgbs_committed
                .checked_add(k)
                .ok_or(RebaseError::Overflow {
                    what: "tgbs_committed",
                })?;
        entry.last_commit_version = version;
        entry.last_commit_ms = pending.now_ms;
        for t in run {
            let mut d = t.clone();
            d.visible_version = version;
            validate_descriptor(m.tgbs.len(), &d, version, &limits)
                .map_err(|e| invalid(e.to_string()))?;
            m.retained_bytes =
                m.retained_bytes
                    .checked_add(d.object_size)
                    .ok_or(RebaseError::Overflow {
                        what: "retained_bytes",
                    })?;
            m.tgbs.push(d);
            count += 1;
        }
    }
    let claimed = recorded.len();
    for c in recorded {
        let entry = m.producers.entry(c.producer_id.clone()).or_default();
        entry.epoch = c.epoch;
        entry.incarnation = c.incarnation;
        entry.max_commit_age_ms = c.max_commit_age_ms;
        entry.last_commit_version = version;
        entry.last_commit_ms = pending.now_ms;
    }
    m.total_tgbs = m
        .first_step
        .checked_add(u64::try_from(m.tgbs.len()).unwrap_or(u64::MAX))
        .ok_or(RebaseError::Overflow { what: "total_tgbs" })?;
    if m.grid_dp == 0
        && let Some(t) = m.tgbs.first()
    {
        (m.grid_dp, m.grid_cp) = (t.dp, t.cp);
    }
    m.committer = pending.producer_id.clone();
    Ok((m, count, claimed))
}

/// Per other producer that `served` does not name (in the order of its first claim), the
/// claim [`rebase_cooperative_with_claims`] records; at most `max` in all.
fn recordable_claims<'a>(
    base: &Manifest,
    committer: &str,
    claims: &'a [EpochClaim],
    served: &[&str],
    max: usize,
) -> Vec<&'a EpochClaim> {
    let mut best: Vec<(&'a EpochClaim, bool)> = Vec::new();
    for c in claims {
        if c.producer_id == committer
            || served.contains(&c.producer_id.as_str())
            || c.max_commit_age_ms == 0
            || validate_producer_id(&c.producer_id).is_err()
        {
            continue;
        }
        let held = base.producers.get(&c.producer_id).map_or(0, |e| e.epoch);
        if c.epoch <= held {
            continue;
        }
        match best
            .iter_mut()
            .find(|(b, _)| b.producer_id == c.producer_id)
        {
            None => best.push((c, false)),
            Some((b, tie)) => {
                if c.epoch > b.epoch {
                    (*b, *tie) = (c, false);
                } else if c.epoch == b.epoch && c != *b {
                    *tie = true;
                }
            }
        }
    }
    best.into_iter()
        .filter(|(_, tie)| !tie)
        .map(|(c, _)| c)
        .take(max)
        .collect()
}

/// Bounds for checking an offer on its own: any grid (the stream's grid is checked apart).
const OFFER_LIMITS: DecodeLimits = DecodeLimits {
    max_bytes: u64::MAX,
    max_tgbs: u64::MAX,
    max_producers: u64::MAX,
    max_grid: u64::MAX,
};

/// Per other producer (in the order of its first candidate), the run of candidates that
/// continues its entry in `base` (see [`rebase_cooperative`]); at most `max` in all.
fn publishable<'a>(
    base: &Manifest,
    committer: &str,
    others: &'a [TgbDescriptor],
    grid: Option<(u32, u32)>,
    max: usize,
) -> Vec<Vec<&'a TgbDescriptor>> {
    let mut by_producer: Vec<(&str, Vec<&'a TgbDescriptor>)> = Vec::new();
    for t in others {
        if t.producer_id == committer {
            continue;
        }
        match by_producer.iter_mut().find(|(p, _)| *p == t.producer_id) {
            Some((_, v)) => v.push(t),
            None => by_producer.push((t.producer_id.as_str(), vec![t])),
        }
    }
    let mut grid = grid;
    let mut left = max;
    let mut runs = Vec::new();
    for (id, cands) in by_producer {
        if left == 0 {
            break;
        }
        let Some(e) = base.producers.get(id) else {
            continue;
        };
        if e.max_commit_age_ms == 0 || validate_producer_id(id).is_err() {
            continue;
        }
        // Only uploads of the entry's epoch that it does not hold yet are candidates at
        // all. A fenced incarnation's leftovers and uploads of an epoch not claimed yet
        // may carry the very sequences the entry's incarnation uploads (a listing even
        // sorts them first): skipped, they must not end the run.
        let mut cands: Vec<&TgbDescriptor> = cands
            .into_iter()
            .filter(|t| t.epoch == e.epoch && t.sequence > e.last_sequence)
            .collect();
        cands.sort_by_key(|t| t.sequence);
        let mut next = e.last_sequence.checked_add(1);
        let mut offset = e.source_offset;
        let mut run = Vec::new();
        let mut rest = cands.as_slice();
        while let Some(&t) = rest.first() {
            let same = rest.iter().take_while(|u| u.sequence == t.sequence).count();
            let (this, after) = rest.split_at(same);
            rest = after;
            // The same offer twice counts once; two different objects that claim one
            // sequence end the run before it (only their producer knows which one it
            // commits).
            let fits = this.iter().all(|u| *u == t)
                && Some(t.sequence) == next
                && t.source_offset >= offset
                && is_key_of(t)
                && grid.is_none_or(|g| g == (t.dp, t.cp))
                // A malformed offer does not qualify (it never fails the whole rebase).
                && validate_descriptor(0, t, u64::MAX, &OFFER_LIMITS).is_ok();
            if !fits || run.len() >= left {
                break;
            }
            grid.get_or_insert((t.dp, t.cp));
            next = t.sequence.checked_add(1);
            offset = t.source_offset;
            run.push(t);
        }
        left -= run.len();
        if !run.is_empty() {
            runs.push(run);
        }
    }
    runs
}

/// Builds the candidate version `base.version + 1` from `base` and the
/// caller's pending TGBs (see the module docs for the rules).
///
/// Fails with [`RebaseError::GridMismatch`] if a new TGB's grid is not the
/// stream's ([`stream_grid`] of the base, or the first new TGB's if the base
/// has none), before anything is built.
///
/// `trim_below_step` drops leading descriptors whose step is below it
/// (clamped: `first_step` never decreases and never exceeds the base's
/// total); pass 0 to trim nothing.
pub fn rebase(
    base: &Manifest,
    pending: &Pending,
    trim_below_step: u64,
) -> Result<Manifest, RebaseError> {
    check_pending(pending)?;
    let id = pending.producer_id.as_str();
    let version = base
        .version
        .checked_add(1)
        .ok_or(RebaseError::Overflow { what: "version" })?;
    let entry = base.producers.get(id);
    let ours = same_epoch(entry, pending)?;
    let new = new_tgbs(entry, pending, ours)?;
    let (grid_dp, grid_cp) = check_grid(base, new)?;
    let (first_step, tgbs) = retained_then_new(base, new, trim_below_step, version)?;
    let retained_bytes = tgbs
        .iter()
        .try_fold(0u64, |sum, d| sum.checked_add(d.object_size))
        .ok_or(RebaseError::Overflow {
            what: "retained_bytes",
        })?;
    let total_tgbs = u64::try_from(tgbs.len())
        .ok()
        .and_then(|n| first_step.checked_add(n))
        .ok_or(RebaseError::Overflow { what: "total_tgbs" })?;
    let mut producers = base.producers.clone();
    producers.insert(id.to_owned(), producer_state(entry, pending, new, version)?);
    Ok(Manifest {
        version,
        first_step,
        tgbs,
        producers,
        committed_at_ms: pending.now_ms,
        total_tgbs,
        retained_bytes,
        grid_dp,
        grid_cp,
        committer: String::new(),
    })
}

/// Whether the base's entry of the pending producer is of the pending batch's own epoch
/// (`false`: no entry, or an older epoch, which this batch claims). Fenced when the entry
/// has a newer epoch, or the same epoch under another incarnation.
fn same_epoch(entry: Option<&ProducerState>, pending: &Pending) -> Result<bool, RebaseError> {
    match entry {
        Some(e)
            if e.epoch > pending.epoch
                || (e.epoch == pending.epoch && e.incarnation != pending.incarnation) =>
        {
            Err(RebaseError::Fenced {
                producer_id: pending.producer_id.clone(),
                ours: (pending.epoch, pending.incarnation),
                theirs: (e.epoch, e.incarnation),
            })
        }
        Some(e) => Ok(e.epoch == pending.epoch),
        None => Ok(false),
    }
}

/// The pending TGBs the base does not hold yet (`ours`: the entry is of the batch's
/// epoch, see [`same_epoch`]), checked against the entry: they continue its sequence, a
/// batch without TGBs recovers from the committed offset, and the resume point never
/// goes back.
fn new_tgbs<'p>(
    entry: Option<&ProducerState>,
    pending: &'p Pending,
    ours: bool,
) -> Result<&'p [TgbDescriptor], RebaseError> {
    let id = pending.producer_id.as_str();
    let committed_seq = entry.map_or(0, |e| e.last_sequence);
    // In a claim nothing pending can be committed yet (the TGBs carry the new epoch).
    let already = if ours { committed_seq } else { 0 };
    let new: &[TgbDescriptor] = match pending.tgbs.iter().position(|t| t.sequence > already) {
        Some(at) => pending.tgbs.get(at..).unwrap_or_default(),
        None => &[],
    };
    let pending_last = pending.tgbs.last().map(|t| t.sequence);
    if ours && pending_last.is_some_and(|last| last < committed_seq) {
        return Err(invalid(format!(
            "the manifest already holds sequence {committed_seq} of this incarnation, \
             beyond the last pending sequence {}",
            pending_last.unwrap_or_default()
        )));
    }
    if let Some(first) = new.first() {
        let expected = committed_seq
            .checked_add(1)
            .ok_or(RebaseError::Overflow { what: "sequence" })?;
        if first.sequence != expected {
            return Err(RebaseError::SequenceGap {
                producer_id: id.to_owned(),
                expected,
                found: first.sequence,
            });
        }
    } else if let Some(e) = entry.filter(|_| !ours && pending.tgbs.is_empty())
        && e.source_offset != pending.source_offset
    {
        return Err(RebaseError::StaleRecovery {
            producer_id: id.to_owned(),
            committed: e.source_offset,
            claimed: pending.source_offset,
        });
    }
    // The resume point never goes back, and new TGBs start at or after it
    // (the batch's own offsets are ordered by `check_pending`).
    if let Some(e) = entry {
        let first_new = new
            .first()
            .map_or(pending.source_offset, |t| t.source_offset);
        if first_new < e.source_offset {
            return Err(invalid(format!(
                "source offset {first_new} is before the committed source offset {} \
                 of producer {id}",
                e.source_offset
            )));
        }
    }
    Ok(new)
}

/// The stream's grid `(dp, cp)` (`(0, 0)` while it has none): fixed by the first TGB ever
/// committed, which every new TGB must match.
fn check_grid(base: &Manifest, new: &[TgbDescriptor]) -> Result<(u32, u32), RebaseError> {
    let grid = stream_grid(base).or_else(|| new.first().map(|t| (t.dp, t.cp)));
    if let Some(stream) = grid
        && let Some(t) = new.iter().find(|t| (t.dp, t.cp) != stream)
    {
        return Err(RebaseError::GridMismatch {
            stream,
            tgb: (t.dp, t.cp),
        });
    }
    Ok(grid.unwrap_or_default())
}

/// The TGB list of the new version: the base's from the trimmed first step on (the
/// step is returned), then the new TGBs, visible from `version` and each validated.
fn retained_then_new(
    base: &Manifest,
    new: &[TgbDescriptor],
    trim_below_step: u64,
    version: u64,
) -> Result<(u64, Vec<TgbDescriptor>), RebaseError> {
    let retained_len =
        u64::try_from(base.tgbs.len()).map_err(|_| RebaseError::Overflow { what: "total_tgbs" })?;
    let base_total = base
        .first_step
        .checked_add(retained_len)
        .ok_or(RebaseError::Overflow { what: "total_tgbs" })?;
    let first_step = base.first_step.max(trim_below_step.min(base_total));
    let drop = usize::try_from(first_step - base.first_step).unwrap_or(usize::MAX);
    let kept = base.tgbs.get(drop..).unwrap_or_default();

    let limits = DecodeLimits {
        max_grid: u64::MAX,
        ..DecodeLimits::default()
    };
    let mut tgbs = Vec::with_capacity(kept.len().saturating_add(new.len()));
    tgbs.extend_from_slice(kept);
    for t in new {
        let mut d = t.clone();
        d.visible_version = version;
        validate_descriptor(tgbs.len(), &d, version, &limits)
            .map_err(|e| invalid(e.to_string()))?;
        tgbs.push(d);
    }
    Ok((first_step, tgbs))
}

/// The pending producer's entry in the new version.
fn producer_state(
    entry: Option<&ProducerState>,
    pending: &Pending,
    new: &[TgbDescriptor],
    version: u64,
) -> Result<ProducerState, RebaseError> {
    let appended = u64::try_from(new.len()).unwrap_or(u64::MAX);
    Ok(ProducerState {
        epoch: pending.epoch,
        incarnation: pending.incarnation,
        source_offset: pending.source_offset,
        last_sequence: new
            .last()
            .map_or(entry.map_or(0, |e| e.last_sequence), |t| t.sequence),
        last_commit_version: version,
        tgbs_committed: entry
            .map_or(0, |e| e.tgbs_committed)
            .checked_add(appended)
            .ok_or(RebaseError::Overflow {
                what: "tgbs_committed",
            })?,
        last_commit_ms: pending.now_ms,
        // The producer sets its own after the rebase; kept otherwise.
        max_commit_age_ms: entry.map_or(0, |e| e.max_commit_age_ms),
    })
}
