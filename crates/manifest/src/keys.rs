//! Object naming inside one stream prefix, and the validation of keys and ids.
//!
//! Every key here is relative to the stream prefix:
//!
//! ```text
//! manifests/<version:020>.manifest        one per manifest version (conditional create)
//! tgb/<producer>/<epoch:010>-<seq:020>.tgb immutable TGB objects
//! watermarks/<group>/<position>.wm        one per consumer position
//! gc/boundary                             the GC boundary object
//! ```

use crate::error::{ManifestError, clip};

/// Folder of the manifest versions, relative to the stream prefix.
pub const MANIFEST_DIR: &str = "manifests/";
/// Key of the GC boundary object, relative to the stream prefix.
pub const GC_BOUNDARY_KEY: &str = "gc/boundary";
/// Folder of the TGB objects, relative to the stream prefix.
pub const TGB_DIR: &str = "tgb/";
/// Folder of the consumer watermarks, relative to the stream prefix.
pub const WATERMARK_DIR: &str = "watermarks/";
/// Longest accepted object key, in bytes (the S3 limit).
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest accepted producer id, group or position name, in characters.
pub const MAX_ID_LEN: usize = 128;

const MANIFEST_SUFFIX: &str = ".manifest";
const WATERMARK_SUFFIX: &str = ".wm";
const VERSION_DIGITS: usize = 20;
const TGB_SUFFIX: &str = ".tgb";
const EPOCH_DIGITS: usize = 10;
const SEQUENCE_DIGITS: usize = 20;

/// Key of manifest version `version`: `manifests/<version:020>.manifest`.
///
/// Zero padding to 20 digits (the width of `u64::MAX`) makes lexicographic
/// listing order equal to version order.
pub fn manifest_key(version: u64) -> String {
    format!("{MANIFEST_DIR}{version:020}{MANIFEST_SUFFIX}")
}

/// The exact inverse of [`manifest_key`]: `Some(version)` for a key it could
/// have produced, `None` for anything else (other widths, signs, spaces,
/// suffixes, numbers above `u64::MAX`).
pub fn parse_manifest_key(key: &str) -> Option<u64> {
    let digits = key
        .strip_prefix(MANIFEST_DIR)?
        .strip_suffix(MANIFEST_SUFFIX)?;
    if digits.len() != VERSION_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Key of a TGB object: `tgb/<producer_id>/<epoch:010>-<sequence:020>.tgb`.
///
/// The id is not checked here; call [`validate_producer_id`] once when the
/// producer starts (a manifest naming a key built from an invalid id is
/// rejected by [`validate`](crate::validate)).
pub fn tgb_key(producer_id: &str, epoch: u64, sequence: u64) -> String {
    format!("{TGB_DIR}{producer_id}/{epoch:010}-{sequence:020}{TGB_SUFFIX}")
}

/// The exact inverse of [`tgb_key`]: `Some((producer_id, epoch, sequence))`
/// for a key it produces from a valid producer id, `None` for anything else
/// (other paddings or suffixes, signs, numbers above `u64::MAX`, invalid ids).
///
/// Allocates nothing; [`validate`](crate::validate) uses it to check that
/// every descriptor's key names its own producer, epoch and sequence.
pub fn parse_tgb_key(key: &str) -> Option<(&str, u64, u64)> {
    let rest = key.strip_prefix(TGB_DIR)?.strip_suffix(TGB_SUFFIX)?;
    let (id, name) = rest.split_once('/')?;
    validate_producer_id(id).ok()?;
    let (epoch, sequence) = name.split_once('-')?;
    Some((
        id,
        padded(epoch, EPOCH_DIGITS)?,
        padded(sequence, SEQUENCE_DIGITS)?,
    ))
}

/// Whether `key` is exactly `tgb_key(producer_id, epoch, sequence)`, for a
/// `producer_id` already known to be valid: [`parse_tgb_key`] without
/// re-checking the id, for the per-descriptor check of every manifest read.
pub(crate) fn is_tgb_key_of(key: &str, producer_id: &str, epoch: u64, sequence: u64) -> bool {
    key.strip_prefix(TGB_DIR)
        .and_then(|rest| rest.strip_prefix(producer_id))
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.strip_suffix(TGB_SUFFIX))
        .and_then(|name| name.split_once('-'))
        .is_some_and(|(e, s)| {
            padded(e, EPOCH_DIGITS) == Some(epoch) && padded(s, SEQUENCE_DIGITS) == Some(sequence)
        })
}

/// Parses `digits` if it is exactly how `format!("{n:0width$}")` prints its
/// value: `width` digits, or more without a leading zero.
fn padded(digits: &str, width: usize) -> Option<u64> {
    if !digits.bytes().all(|b| b.is_ascii_digit())
        || digits.len() < width
        || (digits.len() > width && digits.starts_with('0'))
    {
        return None;
    }
    digits.parse().ok()
}

/// Key of a consumer position's watermark: `watermarks/<group>/<position>.wm`.
///
/// Both `group` and `position` (for example `"d3-c1"`) must be valid ids in
/// the sense of [`validate_producer_id`].
pub fn watermark_key(group: &str, position: &str) -> Result<String, ManifestError> {
    validate_producer_id(group)?;
    validate_producer_id(position)?;
    Ok(format!(
        "{WATERMARK_DIR}{group}/{position}{WATERMARK_SUFFIX}"
    ))
}

/// Key of a consumer group's layout object: `watermarks/<group>/_layout`.
pub fn group_layout_key(group: &str) -> Result<String, ManifestError> {
    validate_producer_id(group)?;
    Ok(format!("{WATERMARK_DIR}{group}/_layout"))
}

/// The consumer position name of `(d, c)`: `d{d}-c{c}`, the `<position>`
/// part of [`watermark_key`].
pub fn position_name(d: u32, c: u32) -> String {
    format!("d{d}-c{c}")
}

/// The watermark name of one rank: `d{d}-c{c}` when its group has one rank per
/// position (`tp * pp == 1`), else `d{d}-c{c}-t{t}-p{p}`, so that the TP and PP ranks
/// of a position, which checkpoint independently, never overwrite each other's mark.
pub fn rank_mark_name(d: u32, c: u32, t: u32, p: u32, tp: u32, pp: u32) -> String {
    if tp.max(1).saturating_mul(pp.max(1)) <= 1 {
        position_name(d, c)
    } else {
        format!("d{d}-c{c}-t{t}-p{p}")
    }
}

/// Every watermark name of a group layout `dp x cp x tp x pp` (0 read as 1 for the
/// last two), in the order of [`rank_mark_name`]'s arguments.
pub fn layout_mark_names(dp: u32, cp: u32, tp: u32, pp: u32) -> Vec<String> {
    let (tp, pp) = (tp.max(1), pp.max(1));
    let mut out = Vec::new();
    for d in 0..dp {
        for c in 0..cp {
            for t in 0..tp {
                for p in 0..pp {
                    out.push(rank_mark_name(d, c, t, p, tp, pp));
                }
            }
        }
    }
    out
}

/// The exact inverse of [`watermark_key`]: `Some((group, position))` for a key
/// it could have produced, `None` otherwise.
pub fn parse_watermark_key(key: &str) -> Option<(&str, &str)> {
    let rest = key
        .strip_prefix(WATERMARK_DIR)?
        .strip_suffix(WATERMARK_SUFFIX)?;
    let (group, position) = rest.split_once('/')?;
    if validate_producer_id(group).is_err() || validate_producer_id(position).is_err() {
        return None;
    }
    Some((group, position))
}

/// Checks a producer id (also used for consumer groups and positions):
/// 1 to 128 characters of `[A-Za-z0-9._-]`, and neither `.` nor `..`.
pub fn validate_producer_id(id: &str) -> Result<(), ManifestError> {
    let bad = |reason| {
        Err(ManifestError::InvalidId {
            id: clip(id),
            reason,
        })
    };
    if id.is_empty() {
        return bad("empty");
    }
    if id.len() > MAX_ID_LEN {
        return bad("longer than 128 characters");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return bad("characters outside [A-Za-z0-9._-]");
    }
    if id == "." || id == ".." {
        return bad("`.` and `..` are reserved");
    }
    Ok(())
}

/// Checks a TGB object key named by a manifest.
///
/// Keys are relative to the stream prefix and must stay inside it, under
/// `tgb/`: rejected are the empty key, keys longer than 1024 bytes, a leading
/// `/`, empty, `.` or `..` path segments (so also `//` and a trailing `/`),
/// backslashes, control characters, and anything whose first segment is not
/// `tgb` or that has nothing after `tgb/`.
pub fn validate_key(key: &str) -> Result<(), ManifestError> {
    let bad = |reason| {
        Err(ManifestError::InvalidKey {
            key: clip(key),
            reason,
        })
    };
    if key.is_empty() {
        return bad("empty");
    }
    if key.len() > MAX_KEY_BYTES {
        return bad("longer than 1024 bytes");
    }
    if key.starts_with('/') {
        return bad("absolute (leading `/`)");
    }
    if key.contains('\\') {
        return bad("contains a backslash");
    }
    if key.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    if key
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return bad("empty, `.` or `..` path segment");
    }
    match key.strip_prefix(TGB_DIR) {
        Some(rest) if !rest.is_empty() => Ok(()),
        _ => bad("outside `tgb/`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_key_roundtrip_and_order() {
        for v in [0, 1, 42, 999, u64::MAX - 1, u64::MAX] {
            let k = manifest_key(v);
            assert_eq!(k.len(), MANIFEST_DIR.len() + 20 + MANIFEST_SUFFIX.len());
            assert_eq!(parse_manifest_key(&k), Some(v));
        }
        assert_eq!(manifest_key(42), "manifests/00000000000000000042.manifest");
        assert!(manifest_key(9) < manifest_key(10));
    }

    #[test]
    fn parse_manifest_key_rejects_near_misses() {
        for k in [
            "",
            "manifests/42.manifest",
            "manifests/0000000000000000042.manifest",
            "manifests/000000000000000000042.manifest",
            "manifests/0000000000000000004a.manifest",
            "manifests/+0000000000000000042.manifest",
            "manifests/00000000000000000042.manifest.tmp",
            "/manifests/00000000000000000042.manifest",
            "manifest/00000000000000000042.manifest",
            "manifests/99999999999999999999.manifest",
            "manifests/00000000000000000042.Manifest",
        ] {
            assert_eq!(parse_manifest_key(k), None, "{k}");
        }
    }

    #[test]
    fn tgb_key_layout() {
        let k = tgb_key("p-1", 3, 7);
        assert_eq!(k, "tgb/p-1/0000000003-00000000000000000007.tgb");
        validate_key(&k).unwrap();
    }

    #[test]
    fn parse_tgb_key_is_the_exact_inverse() {
        for (id, epoch, seq) in [
            ("p-1", 3, 7),
            ("a", 0, 0),
            ("prep.0_x", 9_999_999_999, 1),
            ("x", 10_000_000_000, u64::MAX),
            ("x", u64::MAX, 12),
        ] {
            let k = tgb_key(id, epoch, seq);
            assert_eq!(parse_tgb_key(&k), Some((id, epoch, seq)), "{k}");
        }
        for (id, epoch, seq) in [("p", 1, 2), ("p-1", 12_345_678_901, 0)] {
            let k = tgb_key(id, epoch, seq);
            assert!(is_tgb_key_of(&k, id, epoch, seq));
            assert!(!is_tgb_key_of(&k, id, epoch + 1, seq));
            assert!(!is_tgb_key_of(&k, id, epoch, seq + 1));
            assert!(!is_tgb_key_of(&k, "q", epoch, seq));
            assert!(!is_tgb_key_of(&k, "p-", epoch, seq));
        }
        for k in [
            "tgb/p/0000000001-00000000000000000002",
            "tgb/p/0000000001-00000000000000000002.tgb.tgb",
            "tgb/p/000000001-00000000000000000002.tgb",
            "tgb/p/00000000001-00000000000000000002.tgb",
            "tgb/p/0000000001-0000000000000000002.tgb",
            "tgb/p/0000000001-000000000000000000002.tgb",
            "tgb/p/0000000001-99999999999999999999.tgb",
            "tgb/p/+000000001-00000000000000000002.tgb",
            "tgb/p/0000000001+00000000000000000002.tgb",
            "tgb/p/0000000001--0000000000000000002.tgb",
            "tgb/p/q/0000000001-00000000000000000002.tgb",
            "tgb/../0000000001-00000000000000000002.tgb",
            "tgb//0000000001-00000000000000000002.tgb",
            "x/p/0000000001-00000000000000000002.tgb",
            "tgb/p/-.tgb",
            "",
        ] {
            assert_eq!(parse_tgb_key(k), None, "{k}");
            assert!(!is_tgb_key_of(k, "p", 1, 2), "{k}");
        }
    }

    #[test]
    fn watermark_keys() {
        let k = watermark_key("trainer.a", "d3-c1").unwrap();
        assert_eq!(k, "watermarks/trainer.a/d3-c1.wm");
        assert_eq!(parse_watermark_key(&k), Some(("trainer.a", "d3-c1")));
        assert_eq!(
            group_layout_key("trainer.a").unwrap(),
            "watermarks/trainer.a/_layout"
        );
        assert_eq!(position_name(3, 1), "d3-c1");
        assert!(group_layout_key("../x").is_err());
        assert!(watermark_key("a/b", "d0-c0").is_err());
        assert!(watermark_key("g", "..").is_err());
        assert!(watermark_key("", "x").is_err());
        for k in [
            "watermarks/g/d0.wm/x.wm",
            "watermarks//d0.wm",
            "watermarks/g/.wm",
            "watermarks/g/d0",
            "gc/boundary",
        ] {
            assert_eq!(parse_watermark_key(k), None, "{k}");
        }
    }

    #[test]
    fn producer_ids() {
        for ok in ["a", "A.b_c-9", ".hidden", "...", &"x".repeat(128)] {
            validate_producer_id(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "a b", "é", "a\0", &"x".repeat(129)] {
            assert!(validate_producer_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_must_stay_under_tgb() {
        validate_key("tgb/p/1.tgb").unwrap();
        validate_key("tgb/x").unwrap();
        for bad in [
            "",
            "../x",
            "/abs",
            "other/x",
            "tgb/../../x",
            "tgb/./x",
            "tgb//x",
            "tgb/x/",
            "tgb/",
            "tgb",
            "tgbx/y",
            "tgb\\x",
            "tgb/a\nb",
            "tgb/..",
            "manifests/00000000000000000001.manifest",
        ] {
            assert!(validate_key(bad).is_err(), "{bad:?}");
        }
        assert!(validate_key(&format!("tgb/{}", "a".repeat(1100))).is_err());
    }
}
