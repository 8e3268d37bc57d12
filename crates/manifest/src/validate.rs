//! Semantic validation of a decoded manifest (run by
//! [`decode_manifest`](crate::decode_manifest) after the envelope checks).

use std::collections::HashMap;

use crate::error::{ManifestError, clip};
use crate::keys::{described_tgb_key, is_key_of, tgb_key, validate_key, validate_producer_id};
use crate::limits::{DecodeLimits, check_count};
use crate::pb::{Manifest, ProducerState, TgbDescriptor};
use crate::rules;

/// Length of a TGB footer's fixed part, in bytes (`docs/format-tgb.md` section 2.1).
pub const TGB_FOOTER_HEADER_LEN: u64 = 20;
/// Length of one slice entry of a TGB footer, in bytes.
pub const TGB_FOOTER_ENTRY_LEN: u64 = 20;
/// Length of a TGB object's trailer, in bytes.
pub const TGB_TRAILER_LEN: u64 = 32;
/// Length of the seal that closes every slot of a sealed TGB (format version 2), in bytes.
pub const TGB_SEAL_LEN: u64 = 24;
/// Smallest possible `TgbDescriptor.footer_length` (the footer of a one-slice TGB).
pub const MIN_FOOTER_LENGTH: u32 = 40;

/// The footer length of a TGB of `slices` slices, `20 + 20 * slices` (`None` on
/// overflow). A descriptor's `footer_length` must be exactly this for its grid.
pub fn tgb_footer_length(slices: u64) -> Option<u64> {
    slices
        .checked_mul(TGB_FOOTER_ENTRY_LEN)?
        .checked_add(TGB_FOOTER_HEADER_LEN)
}

/// Checks every invariant of a manifest version that can be checked from the
/// version alone (`docs/format.md` section 4):
///
/// * `tgbs.len() <= max_tgbs`, `producers.len() <= max_producers`;
/// * `total_tgbs == first_step + tgbs.len()` (no overflow);
/// * `retained_bytes == sum(tgbs[i].object_size)` (no overflow);
/// * every descriptor is valid (see [`validate_descriptor`]);
/// * every producer id is valid and its `last_commit_version <= version`;
/// * the rules of [`rules`](crate::rules) that concern one version, each
///   reported as [`ManifestError::Rule`] with its name: `tgb-key`,
///   `producer-entry`, `unique-tgb`, `sequence-order`, `epoch-order`,
///   `source-offset`, `visible-order`, `producer-totals`, `one-committer`
///   and `grid`.
///
/// Runs in O(tgbs + producers) time (expected: one hash lookup per
/// descriptor) and allocates one map entry per producer, nothing per
/// descriptor unless it reports an error.
pub fn validate(m: &Manifest, limits: &DecodeLimits) -> Result<(), ManifestError> {
    let count = u64::try_from(m.tgbs.len()).unwrap_or(u64::MAX);
    check_count("tgbs", count, limits.max_tgbs)?;
    let producers = u64::try_from(m.producers.len()).unwrap_or(u64::MAX);
    check_count("producers", producers, limits.max_producers)?;
    let inconsistent = |reason: String| Err(ManifestError::Inconsistent { reason });
    match m.first_step.checked_add(count) {
        Some(total) if total == m.total_tgbs => {}
        Some(total) => {
            return inconsistent(format!(
                "total_tgbs is {} but first_step + tgbs.len() is {total}",
                m.total_tgbs
            ));
        }
        None => return inconsistent("first_step + tgbs.len() overflows u64".to_owned()),
    }
    let grid = check_grid_fields(m, limits)?;

    // One entry per producer: its state and what its retained TGBs showed so far.
    let mut tracks: HashMap<&str, Track<'_>> = HashMap::with_capacity(m.producers.len());
    let mut committers = 0usize;
    let mut committer: Option<&str> = None;
    for (id, state) in &m.producers {
        validate_producer_id(id)?;
        if state.last_commit_version > m.version {
            return inconsistent(format!(
                "producer {id}: last_commit_version {} is after version {}",
                state.last_commit_version, m.version
            ));
        }
        if state.last_commit_version == m.version {
            committers = committers.saturating_add(1);
            committer.get_or_insert(id.as_str());
        }
        tracks.insert(id.as_str(), Track { state, last: None });
    }
    // The committer, if there is exactly one (otherwise reported after the TGBs). A
    // cooperative version names it, and every entry it advanced is a committer here.
    let cooperative = !m.committer.is_empty();
    let committer = committer.filter(|_| committers == 1 && !cooperative);

    let mut retained = 0u64;
    let mut prev_visible = 0u64;
    for (index, d) in m.tgbs.iter().enumerate() {
        check_layout(index, d, m.version, limits)?;
        validate_producer_id(&d.producer_id)?;
        // A key that names its descriptor (`tgb-key`) is a valid key: `tgb/`, the valid
        // id (no `/`, backslash or control character, not `.` or `..`), and a non-empty name of
        // digits, `-`, `x` and `.`, well under 1,024 bytes. So the key's own scan runs
        // only when the rule fails, and reports what it reported before the shortcut.
        let key_of = is_key_of(d);
        if key_of {
            debug_assert!(validate_key(&d.key).is_ok(), "{:?}", d.key);
        } else {
            validate_key(&d.key)?;
        }
        retained =
            retained
                .checked_add(d.object_size)
                .ok_or_else(|| ManifestError::Inconsistent {
                    reason: "sum of object sizes overflows u64".to_owned(),
                })?;
        let step = m
            .first_step
            .saturating_add(u64::try_from(index).unwrap_or(u64::MAX));
        check_descriptor_rules(m, step, d, key_of, grid, &mut tracks)?;
        if d.visible_version == 0 {
            return Err(rule(
                rules::VISIBLE_ORDER,
                format!("step {step}: visible_version is 0 (the first version is 1)"),
            ));
        }
        if d.visible_version < prev_visible {
            return Err(rule(
                rules::VISIBLE_ORDER,
                format!(
                    "step {step}: visible_version {} is below the previous step's {prev_visible}",
                    d.visible_version
                ),
            ));
        }
        prev_visible = d.visible_version;
        if cooperative
            && d.visible_version == m.version
            && tracks
                .get(d.producer_id.as_str())
                .is_some_and(|t| t.state.last_commit_version != m.version)
        {
            return Err(rule(
                rules::ONE_COMMITTER,
                format!(
                    "step {step}: a TGB of producer {} became visible at version {}, which \
                     did not advance its entry",
                    d.producer_id, m.version
                ),
            ));
        }
        if d.visible_version == m.version
            && let Some(c) = committer
            && c != d.producer_id
        {
            return Err(rule(
                rules::ONE_COMMITTER,
                format!(
                    "step {step}: a TGB of producer {} became visible at version {}, \
                     which producer {c} committed",
                    d.producer_id, m.version
                ),
            ));
        }
    }
    if retained != m.retained_bytes {
        return inconsistent(format!(
            "retained_bytes is {} but the object sizes sum to {retained}",
            m.retained_bytes
        ));
    }

    let mut committed = 0u64;
    for (id, state) in &m.producers {
        if let Some(last) = tracks.get(id.as_str()).and_then(|t| t.last) {
            check_producer_end(id, state, &last)?;
        }
        if state.tgbs_committed != state.last_sequence {
            return Err(rule(
                rules::PRODUCER_TOTALS,
                format!(
                    "producer {id}: tgbs_committed is {} but last_sequence is {}",
                    state.tgbs_committed, state.last_sequence
                ),
            ));
        }
        committed = committed.checked_add(state.tgbs_committed).ok_or_else(|| {
            rule(
                rules::PRODUCER_TOTALS,
                "the producers' tgbs_committed overflow u64".to_owned(),
            )
        })?;
    }
    if committed != m.total_tgbs {
        return Err(rule(
            rules::PRODUCER_TOTALS,
            format!(
                "the producers' tgbs_committed sum to {committed} but total_tgbs is {}",
                m.total_tgbs
            ),
        ));
    }
    if cooperative {
        if m.producers.get(&m.committer).map(|e| e.last_commit_version) != Some(m.version) {
            return Err(rule(
                rules::ONE_COMMITTER,
                format!(
                    "version {} names committer {:?}, whose entry does not record it",
                    m.version,
                    clip(&m.committer)
                ),
            ));
        }
    } else if m.version >= 1 && committers != 1 {
        return Err(rule(
            rules::ONE_COMMITTER,
            format!(
                "{committers} producer entries have last_commit_version {} (exactly one committed it)",
                m.version
            ),
        ));
    }
    Ok(())
}

/// The stream's slice grid `(dp, cp)`: the manifest's `grid_dp`/`grid_cp`
/// when set; for a version written before those fields existed (both 0),
/// the grid of its first retained TGB; `None` if neither (no TGB committed
/// yet, or an old version that retains none).
///
/// On a manifest that passed [`validate`], every retained TGB has this grid.
pub fn stream_grid(m: &Manifest) -> Option<(u32, u32)> {
    if m.grid_dp != 0 || m.grid_cp != 0 {
        return Some((m.grid_dp, m.grid_cp));
    }
    m.tgbs.first().map(|d| (d.dp, d.cp))
}

/// Builds a [`ManifestError::Rule`].
pub(crate) fn rule(rule: &'static str, reason: String) -> ManifestError {
    ManifestError::Rule { rule, reason }
}

/// What the last retained TGB of a producer showed (in step order).
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// Sequence of the producer's first retained TGB.
    first_sequence: u64,
    sequence: u64,
    epoch: u64,
    source_offset: u64,
    visible_version: u64,
    step: u64,
}

/// One producer while validating: its entry and its last retained TGB so far.
struct Track<'a> {
    state: &'a ProducerState,
    last: Option<Seen>,
}

/// Checks the grid fields and returns the stream's grid.
fn check_grid_fields(
    m: &Manifest,
    limits: &DecodeLimits,
) -> Result<Option<(u32, u32)>, ManifestError> {
    let (dp, cp) = (m.grid_dp, m.grid_cp);
    if (dp == 0) != (cp == 0) {
        return Err(rule(
            rules::GRID,
            format!("grid_dp is {dp} and grid_cp is {cp}: both are 0 or neither is"),
        ));
    }
    if dp != 0 {
        check_count(
            "grid cells",
            u64::from(dp).saturating_mul(u64::from(cp)),
            limits.max_grid,
        )?;
        if m.total_tgbs == 0 {
            return Err(rule(
                rules::GRID,
                format!(
                    "the grid is fixed to DP={dp} x CP={cp} but no TGB was committed \
                     (the first TGB fixes it)"
                ),
            ));
        }
    }
    Ok(stream_grid(m))
}

/// The per-descriptor rules that involve its producer: `tgb-key`, `grid`,
/// `producer-entry`, `unique-tgb`, `sequence-order`, `epoch-order`,
/// `source-offset`.
fn check_descriptor_rules(
    m: &Manifest,
    step: u64,
    d: &TgbDescriptor,
    key_of: bool,
    grid: Option<(u32, u32)>,
    tracks: &mut HashMap<&str, Track<'_>>,
) -> Result<(), ManifestError> {
    let p = d.producer_id.as_str();
    // `key_of` is `is_key_of(d)`, on an id already checked.
    if !key_of {
        return Err(rule(
            rules::TGB_KEY,
            format!(
                "step {step}: key {:?} is neither {:?}, the key of producer {p} epoch {} \
                 sequence {}, nor {:?}, the self-describing key of this descriptor",
                d.key,
                tgb_key(p, d.epoch, d.sequence),
                d.epoch,
                d.sequence,
                described_tgb_key(d)
            ),
        ));
    }
    if let Some((dp, cp)) = grid
        && (d.dp, d.cp) != (dp, cp)
    {
        return Err(rule(
            rules::GRID,
            format!(
                "step {step}: the TGB's grid is DP={} x CP={}, the stream's is DP={dp} x CP={cp}",
                d.dp, d.cp
            ),
        ));
    }
    let Some(track) = tracks.get_mut(p) else {
        return Err(rule(
            rules::PRODUCER_ENTRY,
            format!(
                "step {step}: producer {p} has no entry in producers (version {})",
                m.version
            ),
        ));
    };
    let first_sequence = match track.last {
        None => {
            if d.sequence == 0 {
                return Err(rule(
                    rules::SEQUENCE_ORDER,
                    format!("step {step}: producer {p} sequence 0 (sequences start at 1)"),
                ));
            }
            d.sequence
        }
        Some(last) => {
            if (last.first_sequence..=last.sequence).contains(&d.sequence) {
                return Err(rule(
                    rules::UNIQUE_TGB,
                    format!(
                        "step {step}: producer {p} sequence {} is already retained at an \
                         earlier step (its sequences {}..={} precede it, the last at step {})",
                        d.sequence, last.first_sequence, last.sequence, last.step
                    ),
                ));
            }
            if last.sequence.checked_add(1) != Some(d.sequence) {
                return Err(rule(
                    rules::SEQUENCE_ORDER,
                    format!(
                        "step {step}: producer {p} sequence {} follows its sequences {}..={} \
                         (the last at step {}); expected sequence {}",
                        d.sequence,
                        last.first_sequence,
                        last.sequence,
                        last.step,
                        last.sequence.saturating_add(1)
                    ),
                ));
            }
            if d.epoch < last.epoch {
                return Err(rule(
                    rules::EPOCH_ORDER,
                    format!(
                        "step {step}: producer {p} sequence {} has epoch {}, below epoch {} of \
                         sequence {}",
                        d.sequence, d.epoch, last.epoch, last.sequence
                    ),
                ));
            }
            if d.source_offset < last.source_offset {
                return Err(rule(
                    rules::SOURCE_OFFSET,
                    format!(
                        "step {step}: producer {p} sequence {} has source_offset {}, below \
                         {} of sequence {}",
                        d.sequence, d.source_offset, last.source_offset, last.sequence
                    ),
                ));
            }
            last.first_sequence
        }
    };
    if d.epoch > track.state.epoch {
        return Err(rule(
            rules::EPOCH_ORDER,
            format!(
                "step {step}: producer {p} sequence {} has epoch {}, after its entry's epoch {}",
                d.sequence, d.epoch, track.state.epoch
            ),
        ));
    }
    track.last = Some(Seen {
        first_sequence,
        sequence: d.sequence,
        epoch: d.epoch,
        source_offset: d.source_offset,
        visible_version: d.visible_version,
        step,
    });
    Ok(())
}

/// The rules between a producer's entry and its last retained TGB.
fn check_producer_end(id: &str, state: &ProducerState, last: &Seen) -> Result<(), ManifestError> {
    if last.sequence != state.last_sequence {
        return Err(rule(
            rules::SEQUENCE_ORDER,
            format!(
                "producer {id}: its last retained TGB (step {}) has sequence {}, \
                 its entry's last_sequence is {}",
                last.step, last.sequence, state.last_sequence
            ),
        ));
    }
    if last.source_offset > state.source_offset {
        return Err(rule(
            rules::SOURCE_OFFSET,
            format!(
                "producer {id}: its last retained TGB (step {}) has source_offset {}, \
                 after its entry's {}",
                last.step, last.source_offset, state.source_offset
            ),
        ));
    }
    if last.visible_version > state.last_commit_version {
        return Err(rule(
            rules::VISIBLE_ORDER,
            format!(
                "producer {id}: its TGB at step {} became visible at version {}, \
                 after its entry's last_commit_version {}",
                last.step, last.visible_version, state.last_commit_version
            ),
        ));
    }
    Ok(())
}

/// The descriptor of a TGB object known only from a listing: its key, which must be
/// of form 2 ([`described_tgb_key`]), and its size, which must be the one the key's
/// layout implies (`payload_bytes + 20 + 20 * dp * cp + 32`). `None` otherwise.
/// `visible_version` is 0 ([`rebase_cooperative`](crate::rebase_cooperative) sets it).
///
/// Nothing here is trusted beyond what the key says: a reader checks the footer
/// against `footer_crc32` and every slice against the footer's CRCs, as for any
/// descriptor.
pub fn descriptor_from_key(key: &str, object_size: u64) -> Option<TgbDescriptor> {
    let k = crate::keys::parse_described_tgb_key(key)?;
    let slices = u64::from(k.dp).checked_mul(u64::from(k.cp))?;
    if slices == 0 {
        return None;
    }
    let footer_length = tgb_footer_length(slices)?;
    let size = k
        .payload_bytes
        .checked_add(footer_length)?
        .checked_add(TGB_TRAILER_LEN)?;
    if size != object_size {
        return None;
    }
    let slice_stride = if k.sealed {
        if !k.payload_bytes.is_multiple_of(slices) || k.payload_bytes / slices < TGB_SEAL_LEN {
            return None;
        }
        k.payload_bytes / slices
    } else {
        0
    };
    Some(TgbDescriptor {
        key: key.to_owned(),
        object_size,
        dp: k.dp,
        cp: k.cp,
        footer_offset: k.payload_bytes,
        footer_length: u32::try_from(footer_length).ok()?,
        footer_crc32: k.footer_crc32,
        producer_id: k.producer_id.to_owned(),
        epoch: k.epoch,
        sequence: k.sequence,
        visible_version: 0,
        payload_bytes: k.payload_bytes,
        source_offset: k.source_offset,
        slice_stride,
    })
}

/// Checks one TGB descriptor found at `index` of a manifest of `version`:
/// `dp >= 1`, `cp >= 1`, `dp * cp <= max_grid`,
/// `footer_length == 20 + 20 * dp * cp`, `payload_bytes == footer_offset`,
/// `footer_offset + footer_length + 32 == object_size` (the TGB layout of
/// `docs/format-tgb.md`),
/// `visible_version <= version`, a valid producer id and a valid key.
pub fn validate_descriptor(
    index: usize,
    d: &TgbDescriptor,
    version: u64,
    limits: &DecodeLimits,
) -> Result<(), ManifestError> {
    check_layout(index, d, version, limits)?;
    validate_producer_id(&d.producer_id)?;
    validate_key(&d.key)
}

/// The checks of [`validate_descriptor`] other than the id's and the key's.
fn check_layout(
    index: usize,
    d: &TgbDescriptor,
    version: u64,
    limits: &DecodeLimits,
) -> Result<(), ManifestError> {
    let bad = |reason: String| Err(ManifestError::InvalidDescriptor { index, reason });
    if d.dp == 0 || d.cp == 0 {
        return bad(format!("empty slice grid dp={} cp={}", d.dp, d.cp));
    }
    let grid = u64::from(d.dp).saturating_mul(u64::from(d.cp));
    check_count("grid cells", grid, limits.max_grid)?;
    // The object layout of docs/format-tgb.md: slices [0, F), the footer of exactly
    // 20 + 20 * dp * cp bytes at F, the 32-byte trailer at the end.
    let want = tgb_footer_length(grid);
    if want != Some(u64::from(d.footer_length)) {
        return bad(format!(
            "footer_length {} is not the {} bytes of a {}x{} TGB's footer",
            d.footer_length,
            want.map_or_else(|| "overflowing".to_owned(), |w| w.to_string()),
            d.dp,
            d.cp
        ));
    }
    if d.payload_bytes != d.footer_offset {
        return bad(format!(
            "payload_bytes {} differ from footer_offset {}: the slices fill the object up to \
             the footer",
            d.payload_bytes, d.footer_offset
        ));
    }
    let end = d
        .footer_offset
        .checked_add(u64::from(d.footer_length))
        .and_then(|e| e.checked_add(TGB_TRAILER_LEN));
    if end != Some(d.object_size) {
        return bad(format!(
            "footer {}+{} and the {TGB_TRAILER_LEN}-byte trailer do not end the object of {} bytes",
            d.footer_offset, d.footer_length, d.object_size
        ));
    }
    // A sealed TGB (format version 2): `grid` slots of `slice_stride` bytes, each with
    // room for its seal, fill the object up to the footer.
    if d.slice_stride != 0
        && (d.slice_stride < TGB_SEAL_LEN
            || d.slice_stride.checked_mul(grid) != Some(d.footer_offset))
    {
        return bad(format!(
            "slice_stride {} is not a sealed TGB's: {} slots of at least {TGB_SEAL_LEN} bytes \
             must fill the {} bytes before the footer",
            d.slice_stride, grid, d.footer_offset
        ));
    }
    if d.visible_version > version {
        return bad(format!(
            "visible_version {} is after the manifest version {version}",
            d.visible_version
        ));
    }
    Ok(())
}
