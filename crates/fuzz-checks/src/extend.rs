//! Target `extend_pair`: the extension rule on two hostile manifests.

use batchweave_manifest::{
    HEADER_LEN, MANIFEST_MAGIC, Manifest, ManifestError, check_extends, decode_manifest, rules,
};

use super::manifest::{SMALL_LIMITS, fix_header};

/// Splits `data` in two, decodes both halves as manifests, and if both decode runs
/// `check_extends` in both orders.
///
/// The split: when `data` starts with a manifest envelope (`BWMF`) whose length field
/// fits, the first half is that envelope and the second half the bytes after it (so
/// `envelope(a) ++ envelope(b)` is the natural seed); otherwise `data` is cut in the
/// middle. Each half's envelope length and CRC32 are recomputed (`fix_header`) so the
/// fuzzer reaches the payloads behind the checksum.
///
/// `check_extends` must never panic, and must report only named rules. It never accepts
/// both orders, always refuses the order whose second version is not newer with rule
/// `extends`, refuses a version against itself, and accepts every valid version of
/// number 2 or more as an extension of genesis (version 0: nothing to keep). Returns
/// whether both halves decoded.
pub fn extend_pair(data: &[u8]) -> bool {
    let (first, second) = split(data);
    let (Some(a), Some(b)) = (decode(first), decode(second)) else {
        return false;
    };
    let forward = check_extends(&a, &b);
    let backward = check_extends(&b, &a);
    let forward_rule = named_rule(&forward);
    let backward_rule = named_rule(&backward);
    assert!(
        forward.is_err() || backward.is_err(),
        "versions {} and {} extend each other",
        a.version,
        b.version
    );
    let not_newer = if a.version < b.version {
        backward_rule
    } else {
        forward_rule
    };
    assert_eq!(
        not_newer,
        Some(rules::EXTENDS),
        "versions {} and {}",
        a.version,
        b.version
    );
    for m in [&a, &b] {
        assert_eq!(named_rule(&check_extends(m, m)), Some(rules::EXTENDS));
        if m.version >= 2
            && let Err(e) = check_extends(&Manifest::genesis(), m)
        {
            panic!("valid version {} does not extend genesis: {e}", m.version);
        }
    }
    true
}

/// The rule name of a `check_extends` result (`None` for `Ok`); panics on an error that
/// is not a named rule.
fn named_rule(r: &Result<(), ManifestError>) -> Option<&'static str> {
    let e = r.as_ref().err()?;
    let rule = e
        .rule()
        .unwrap_or_else(|| panic!("check_extends error without a rule: {e}"));
    assert!(rules::ALL.contains(&rule), "unknown rule name {rule:?}");
    Some(rule)
}

fn split(data: &[u8]) -> (&[u8], &[u8]) {
    let envelope_len = data
        .get(..4)
        .filter(|magic| *magic == MANIFEST_MAGIC)
        .and_then(|_| data.get(8..12))
        .and_then(|l| <[u8; 4]>::try_from(l).ok())
        .and_then(|l| usize::try_from(u32::from_le_bytes(l)).ok())
        .and_then(|l| HEADER_LEN.checked_add(l))
        .filter(|&total| total <= data.len());
    data.split_at(envelope_len.unwrap_or(data.len() / 2))
}

fn decode(half: &[u8]) -> Option<Manifest> {
    decode_manifest(&fix_header(half)?, &SMALL_LIMITS).ok()
}
