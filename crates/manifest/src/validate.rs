//! Semantic validation of a decoded manifest (run by
//! [`decode_manifest`](crate::decode_manifest) after the envelope checks).

use crate::envelope::{DecodeLimits, check_count};
use crate::error::ManifestError;
use crate::keys::{validate_key, validate_producer_id};
use crate::pb::{Manifest, TgbDescriptor};

/// Smallest accepted `TgbDescriptor.footer_length`, in bytes. No TGB footer
/// (see `docs/format-tgb.md`) can be shorter than this.
pub const MIN_FOOTER_LENGTH: u32 = 8;

/// Checks every invariant of a manifest version that can be checked from the
/// version alone:
///
/// * `tgbs.len() <= max_tgbs`, `producers.len() <= max_producers`;
/// * `total_tgbs == first_step + tgbs.len()` (no overflow);
/// * `retained_bytes == sum(tgbs[i].object_size)` (no overflow);
/// * every descriptor is valid (see [`validate_descriptor`]);
/// * every producer id is valid and its `last_commit_version <= version`.
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
    let mut retained = 0u64;
    for (index, d) in m.tgbs.iter().enumerate() {
        validate_descriptor(index, d, m.version, limits)?;
        retained =
            retained
                .checked_add(d.object_size)
                .ok_or_else(|| ManifestError::Inconsistent {
                    reason: "sum of object sizes overflows u64".to_owned(),
                })?;
    }
    if retained != m.retained_bytes {
        return inconsistent(format!(
            "retained_bytes is {} but the object sizes sum to {retained}",
            m.retained_bytes
        ));
    }
    for (id, state) in &m.producers {
        validate_producer_id(id)?;
        if state.last_commit_version > m.version {
            return inconsistent(format!(
                "producer {id}: last_commit_version {} is after version {}",
                state.last_commit_version, m.version
            ));
        }
    }
    Ok(())
}

/// Checks one TGB descriptor found at `index` of a manifest of `version`:
/// `dp >= 1`, `cp >= 1`, `dp * cp <= max_grid`,
/// `footer_length >= MIN_FOOTER_LENGTH`,
/// `footer_offset + footer_length <= object_size`,
/// `payload_bytes + footer_length <= object_size`,
/// `visible_version <= version`, a valid producer id and a valid key.
pub fn validate_descriptor(
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
    if d.footer_length < MIN_FOOTER_LENGTH {
        return bad(format!(
            "footer_length {} is below the minimum {MIN_FOOTER_LENGTH}",
            d.footer_length
        ));
    }
    let footer_end = d.footer_offset.checked_add(u64::from(d.footer_length));
    if footer_end.is_none_or(|end| end > d.object_size) {
        return bad(format!(
            "footer {}+{} is outside the object of {} bytes",
            d.footer_offset, d.footer_length, d.object_size
        ));
    }
    let used = d.payload_bytes.checked_add(u64::from(d.footer_length));
    if used.is_none_or(|used| used > d.object_size) {
        return bad(format!(
            "payload {} + footer {} bytes exceed the object of {} bytes",
            d.payload_bytes, d.footer_length, d.object_size
        ));
    }
    if d.visible_version > version {
        return bad(format!(
            "visible_version {} is after the manifest version {version}",
            d.visible_version
        ));
    }
    validate_producer_id(&d.producer_id)?;
    validate_key(&d.key)
}
