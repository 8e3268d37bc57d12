//! Object naming inside one stream prefix, and the validation of keys and ids.
//!
//! Every key here is relative to the stream prefix:
//!
//! ```text
//! manifests/<version:020>.manifest        one per manifest version (conditional create)
//! tgb/<producer>/<epoch:010>-<seq:020>.tgb immutable TGB objects (key form 1)
//! tgb/<producer>/<epoch:010>-<seq:020>.<dp>x<cp>.<payload>.<crc:08x>.<offset>.tgb
//!                                         the same, self-describing (form 2)
//! watermarks/<group>/<position>.wm        one per consumer position
//! gc/boundary                             the GC boundary object
//! ```

use crate::error::{ManifestError, clip};
use crate::pb::TgbDescriptor;

/// Folder of the manifest versions, relative to the stream prefix.
pub const MANIFEST_DIR: &str = "manifests/";
/// Key of the GC boundary object, relative to the stream prefix.
pub const GC_BOUNDARY_KEY: &str = "gc/boundary";
/// Folder of the TGB objects, relative to the stream prefix.
pub const TGB_DIR: &str = "tgb/";
/// Folder of the consumer watermarks, relative to the stream prefix.
pub const WATERMARK_DIR: &str = "watermarks/";
/// Folder of the epoch claim objects, relative to the stream prefix.
pub const CLAIM_DIR: &str = "claims/";
/// Longest accepted object key, in bytes (the S3 limit).
pub const MAX_KEY_BYTES: usize = 1024;
/// Longest accepted producer id, group or position name, in characters.
pub const MAX_ID_LEN: usize = 128;

const MANIFEST_SUFFIX: &str = ".manifest";
const WATERMARK_SUFFIX: &str = ".wm";
const VERSION_DIGITS: usize = 20;
const TGB_SUFFIX: &str = ".tgb";
const CLAIM_SUFFIX: &str = ".claim";
const INCARNATION_HEX_DIGITS: usize = 16;
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

/// The key after which a listing of `tgb/<producer_id>/` (`list_after`) returns exactly
/// the producer's TGBs beyond `(epoch, sequence)`: every key of either form ([`tgb_key`],
/// [`described_tgb_key`]) of a later sequence of `epoch`, or of a later epoch, sorts
/// after it, and every key of `epoch` up to `sequence` (or of an earlier epoch) sorts
/// before it. A cooperative committer lists each active producer's uploads from its
/// entry's position this way, so the listing holds what is not yet published, however
/// many TGBs the stream retains.
pub fn tgb_key_after(producer_id: &str, epoch: u64, sequence: u64) -> String {
    // `z` sorts after every character either form puts after the sequence's `.` (`t` of
    // form 1's `.tgb`, or form 2's first digit). Not `~`: object_store's `Path`
    // percent-encodes it, and `%` sorts before the digits.
    format!("{TGB_DIR}{producer_id}/{epoch:010}-{sequence:020}.z")
}

/// The exact inverse of [`tgb_key`] and [`described_tgb_key`]: `Some((producer_id,
/// epoch, sequence))` for a key either produces from a valid producer id, `None` for
/// anything else
/// (other paddings or suffixes, signs, numbers above `u64::MAX`, invalid ids).
///
/// Allocates nothing; [`validate`](crate::validate) uses it to check that
/// every descriptor's key names its own producer, epoch and sequence.
pub fn parse_tgb_key(key: &str) -> Option<(&str, u64, u64)> {
    let (id, name, tail) = split_tgb_key(key)?;
    if tail.is_some() {
        return parse_described_tgb_key(key).map(|k| (k.producer_id, k.epoch, k.sequence));
    }
    validate_producer_id(id).ok()?;
    let (epoch, sequence) = name.split_once('-')?;
    Some((
        id,
        padded(epoch, EPOCH_DIGITS)?,
        padded(sequence, SEQUENCE_DIGITS)?,
    ))
}

/// Key of a self-describing TGB object (key form 2), the form producers write:
///
/// ```text
/// tgb/<producer>/<epoch:010>-<seq:020>.<dp>x<cp>[s].<payload_bytes>.<footer_crc32:08x>.<source_offset>.tgb
/// ```
///
/// Numbers are decimal without leading zeros, the CRC eight lowercase hex digits. The `s`
/// after the grid marks a sealed TGB (TGB format version 2), whose slot stride is
/// `payload_bytes / (dp * cp)`; the descriptor's `slice_stride` is non-zero exactly then. With
/// the object size from a listing, the key says everything a descriptor records
/// ([`descriptor_from_key`](crate::descriptor_from_key)): the footer starts where the
/// payload ends and is `20 + 20 * dp * cp` bytes long (`docs/format-tgb.md`). So a
/// committer can publish another producer's upload from one listing of `tgb/`, with no
/// read of the object (cooperative commits, `docs/protocol.md`). The prefix up to the
/// sequence is [`tgb_key`]'s, so listings sort both forms by producer, epoch, sequence.
pub fn described_tgb_key(d: &TgbDescriptor) -> String {
    format!(
        "{TGB_DIR}{}/{:010}-{:020}.{}x{}{}.{}.{:08x}.{}{TGB_SUFFIX}",
        d.producer_id,
        d.epoch,
        d.sequence,
        d.dp,
        d.cp,
        if d.slice_stride == 0 { "" } else { "s" },
        d.payload_bytes,
        d.footer_crc32,
        d.source_offset
    )
}

/// What a key of form 2 ([`described_tgb_key`]) says about its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyDescription<'a> {
    /// The producer id.
    pub producer_id: &'a str,
    /// The writer's epoch.
    pub epoch: u64,
    /// The producer's sequence number of the TGB.
    pub sequence: u64,
    /// The slice grid.
    pub dp: u32,
    /// The slice grid.
    pub cp: u32,
    /// Payload bytes (also the footer's offset).
    pub payload_bytes: u64,
    /// CRC32 of the footer bytes.
    pub footer_crc32: u32,
    /// The producer's source offset after this TGB.
    pub source_offset: u64,
    /// A sealed TGB (the grid is followed by `s`): its slot stride is
    /// `payload_bytes / (dp * cp)`.
    pub sealed: bool,
}

/// The exact inverse of [`described_tgb_key`]: `Some` for a key it produces from a
/// valid producer id, `None` for anything else (form 1 keys included).
pub fn parse_described_tgb_key(key: &str) -> Option<KeyDescription<'_>> {
    let (id, head, tail) = split_tgb_key(key)?;
    validate_producer_id(id).ok()?;
    let (epoch, sequence) = head.split_once('-')?;
    let mut f = tail?.split('.');
    let (grid, payload, crc, offset) = (f.next()?, f.next()?, f.next()?, f.next()?);
    if f.next().is_some() {
        return None;
    }
    let (grid, sealed) = match grid.strip_suffix('s') {
        Some(g) => (g, true),
        None => (grid, false),
    };
    let (dp, cp) = grid.split_once('x')?;
    Some(KeyDescription {
        producer_id: id,
        epoch: padded(epoch, EPOCH_DIGITS)?,
        sequence: padded(sequence, SEQUENCE_DIGITS)?,
        dp: u32::try_from(decimal(dp)?).ok()?,
        cp: u32::try_from(decimal(cp)?).ok()?,
        payload_bytes: decimal(payload)?,
        footer_crc32: hex8(crc)?,
        source_offset: decimal(offset)?,
        sealed,
    })
}

/// `(producer id, "<epoch>-<seq>", the fields after it)` of a key under `tgb/` ending in
/// `.tgb`, unchecked.
fn split_tgb_key(key: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = key.strip_prefix(TGB_DIR)?.strip_suffix(TGB_SUFFIX)?;
    let (id, name) = rest.split_once('/')?;
    Some(match name.split_once('.') {
        Some((head, tail)) => (id, head, Some(tail)),
        None => (id, name, None),
    })
}

/// The value of a non-empty run of ASCII digits, if it fits a `u64` (one pass).
fn digits_value(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        let x = c.wrapping_sub(b'0');
        if x > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(x))?;
    }
    Some(v)
}

/// Parses `digits` if it is exactly how `{n}` prints a `u64`.
fn decimal(digits: &str) -> Option<u64> {
    decimal_bytes(digits.as_bytes())
}

fn decimal_bytes(digits: &[u8]) -> Option<u64> {
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    digits_value(digits)
}

/// Parses exactly eight lowercase hex digits.
fn hex8(digits: &str) -> Option<u32> {
    hex8_bytes(digits.as_bytes())
}

fn hex8_bytes(digits: &[u8]) -> Option<u32> {
    if digits.len() != 8 {
        return None;
    }
    let mut v: u32 = 0;
    for &c in digits {
        let x = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => return None,
        };
        v = (v << 4) | u32::from(x);
    }
    Some(v)
}

/// Whether `d.key` is the key of the object `d` describes, for a descriptor whose
/// `producer_id` is already known to be valid: either `tgb_key(producer_id, epoch,
/// sequence)` (form 1) or exactly [`described_tgb_key`]`(d)` (form 2, whose fields must
/// all agree with the descriptor's). Allocates nothing and reads the name once: the
/// per-descriptor check of every manifest read (`tests::is_key_of_by_splitting` is the
/// plain statement it is tested against).
pub(crate) fn is_key_of(d: &TgbDescriptor) -> bool {
    let Some(name) = d
        .key
        .strip_prefix(TGB_DIR)
        .and_then(|rest| rest.strip_prefix(d.producer_id.as_str()))
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(|rest| rest.strip_suffix(TGB_SUFFIX))
    else {
        return false;
    };
    let b = name.as_bytes();
    // Fields end at a `.`; the first holds `<epoch>-<sequence>`, the others (form 2) the
    // grid, payload bytes, footer CRC and source offset.
    let mut fields = b.split(|&c| c == b'.');
    let Some(head) = fields.next() else {
        return false;
    };
    let Some(dash) = head.iter().position(|&c| c == b'-') else {
        return false;
    };
    if padded_bytes(&head[..dash], EPOCH_DIGITS) != Some(d.epoch)
        || padded_bytes(&head[dash + 1..], SEQUENCE_DIGITS) != Some(d.sequence)
    {
        return false;
    }
    let Some(grid) = fields.next() else {
        return true; // form 1
    };
    let (Some(payload), Some(crc), Some(offset), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return false;
    };
    // The `s` marker of a sealed TGB, exactly when the descriptor has a stride.
    let grid = match (grid.strip_suffix(b"s"), d.slice_stride) {
        (Some(g), s) if s != 0 => g,
        (None, 0) => grid,
        _ => return false,
    };
    let Some(x) = grid.iter().position(|&c| c == b'x') else {
        return false;
    };
    decimal_bytes(&grid[..x]) == Some(u64::from(d.dp))
        && decimal_bytes(&grid[x + 1..]) == Some(u64::from(d.cp))
        && decimal_bytes(payload) == Some(d.payload_bytes)
        && hex8_bytes(crc) == Some(d.footer_crc32)
        && decimal_bytes(offset) == Some(d.source_offset)
}

/// Parses `digits` if it is exactly how `format!("{n:0width$}")` prints its
/// value: `width` digits, or more without a leading zero.
fn padded(digits: &str, width: usize) -> Option<u64> {
    padded_bytes(digits.as_bytes(), width)
}

fn padded_bytes(digits: &[u8], width: usize) -> Option<u64> {
    if digits.len() < width || (digits.len() > width && digits[0] == b'0') {
        return None;
    }
    digits_value(digits)
}

/// An opening producer's claim of a new epoch, discoverable through the store: an
/// empty object whose key says everything a committer records in the producer's entry
/// when it publishes the claim (cooperative commits, `docs/protocol.md` section 14):
///
/// ```text
/// claims/<producer>/<epoch:010>.<incarnation:016x>.<max_commit_age_ms>.claim
/// ```
///
/// The incarnation is sixteen lowercase hex digits, the limit decimal without leading
/// zeros (at least 1). Nothing in it is trusted beyond what an opener's own claim would
/// be: a committer publishes a claim only above the entry's epoch and only while the
/// object is younger than the limit it names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EpochClaim {
    /// The producer that claims.
    pub producer_id: String,
    /// The epoch it claims.
    pub epoch: u64,
    /// Its incarnation nonce.
    pub incarnation: u64,
    /// Its `max_commit_age`, in milliseconds (also how long the claim may be published).
    pub max_commit_age_ms: u64,
}

impl EpochClaim {
    /// The claim object's key (the id is not checked here; see [`validate_producer_id`]).
    pub fn key(&self) -> String {
        format!(
            "{CLAIM_DIR}{}/{:010}.{:016x}.{}{CLAIM_SUFFIX}",
            self.producer_id, self.epoch, self.incarnation, self.max_commit_age_ms
        )
    }

    /// The exact inverse of [`key`](Self::key): `None` for anything it could not have
    /// produced from a valid producer id (other paddings, upper-case hex, a limit of 0 or
    /// with leading zeros, an epoch of 0, numbers above `u64::MAX`). Allocates only the id.
    pub fn parse(key: &str) -> Option<EpochClaim> {
        let rest = key.strip_prefix(CLAIM_DIR)?.strip_suffix(CLAIM_SUFFIX)?;
        let (id, name) = rest.split_once('/')?;
        validate_producer_id(id).ok()?;
        let mut parts = name.split('.');
        let (epoch, inc, age) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let epoch = padded(epoch, EPOCH_DIGITS).filter(|e| *e > 0)?;
        if inc.len() != INCARNATION_HEX_DIGITS
            || !inc.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        let incarnation = u64::from_str_radix(inc, 16).ok()?;
        if age.is_empty() || age.starts_with('0') {
            return None;
        }
        let max_commit_age_ms = digits_value(age.as_bytes())?;
        Some(EpochClaim {
            producer_id: id.to_owned(),
            epoch,
            incarnation,
            max_commit_age_ms,
        })
    }
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

    /// The plain statement of [`is_key_of`], by splitting and parsing: the model the
    /// one-pass version is tested against.
    fn is_key_of_by_splitting(d: &TgbDescriptor) -> bool {
        fn number(digits: &str) -> Option<u64> {
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            digits.parse().ok()
        }
        let decimal = |s: &str| number(s).filter(|_| s.len() == 1 || !s.starts_with('0'));
        let padded = |s: &str, w: usize| {
            number(s).filter(|_| s.len() >= w && (s.len() == w || !s.starts_with('0')))
        };
        let hex8 = |s: &str| {
            (s.len() == 8 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                .then(|| u32::from_str_radix(s, 16).ok())
                .flatten()
        };
        let Some(name) = d
            .key
            .strip_prefix(TGB_DIR)
            .and_then(|r| r.strip_prefix(d.producer_id.as_str()))
            .and_then(|r| r.strip_prefix('/'))
            .and_then(|r| r.strip_suffix(TGB_SUFFIX))
        else {
            return false;
        };
        let (head, tail) = match name.split_once('.') {
            Some((h, t)) => (h, Some(t)),
            None => (name, None),
        };
        let Some((e, s)) = head.split_once('-') else {
            return false;
        };
        if padded(e, EPOCH_DIGITS) != Some(d.epoch)
            || padded(s, SEQUENCE_DIGITS) != Some(d.sequence)
        {
            return false;
        }
        let Some(tail) = tail else {
            return true;
        };
        let f: Vec<&str> = tail.split('.').collect();
        let [grid, payload, crc, offset] = f[..] else {
            return false;
        };
        let grid = match (grid.strip_suffix('s'), d.slice_stride) {
            (Some(g), s) if s != 0 => g,
            (None, 0) => grid,
            _ => return false,
        };
        grid.split_once('x').is_some_and(|(dp, cp)| {
            decimal(dp) == Some(u64::from(d.dp)) && decimal(cp) == Some(u64::from(d.cp))
        }) && decimal(payload) == Some(d.payload_bytes)
            && hex8(crc) == Some(d.footer_crc32)
            && decimal(offset) == Some(d.source_offset)
    }

    fn is_tgb_key_of(key: &str, producer_id: &str, epoch: u64, sequence: u64) -> bool {
        is_key_of(&TgbDescriptor {
            key: key.to_owned(),
            producer_id: producer_id.to_owned(),
            epoch,
            sequence,
            ..Default::default()
        })
    }

    fn described() -> TgbDescriptor {
        TgbDescriptor {
            key: String::new(),
            object_size: 100 + 20 + 20 * 6 + 32,
            dp: 3,
            cp: 2,
            footer_offset: 100,
            footer_length: 20 + 20 * 6,
            footer_crc32: 0x0a1b_2c3d,
            producer_id: "prep-7".into(),
            epoch: 4,
            sequence: 19,
            visible_version: 0,
            payload_bytes: 100,
            source_offset: 12_345,
            slice_stride: 0,
        }
    }

    #[test]
    fn described_keys_name_every_field_and_parse_back_exactly() {
        let mut d = described();
        let k = described_tgb_key(&d);
        assert_eq!(
            k,
            "tgb/prep-7/0000000004-00000000000000000019.3x2.100.0a1b2c3d.12345.tgb"
        );
        assert_eq!(parse_tgb_key(&k), Some(("prep-7", 4, 19)));
        let p = parse_described_tgb_key(&k).unwrap();
        assert_eq!(
            (p.producer_id, p.epoch, p.sequence, p.dp, p.cp),
            ("prep-7", 4, 19, 3, 2)
        );
        assert_eq!(
            (p.payload_bytes, p.footer_crc32, p.source_offset),
            (100, 0x0a1b_2c3d, 12_345)
        );
        d.key = k.clone();
        assert!(is_key_of(&d));
        // Every field of the key must agree with the descriptor.
        for change in [
            |d: &mut TgbDescriptor| d.dp = 2,
            |d: &mut TgbDescriptor| d.cp = 3,
            |d: &mut TgbDescriptor| d.payload_bytes = 101,
            |d: &mut TgbDescriptor| d.footer_crc32 ^= 1,
            |d: &mut TgbDescriptor| d.source_offset += 1,
            |d: &mut TgbDescriptor| d.sequence += 1,
            |d: &mut TgbDescriptor| d.epoch += 1,
        ] {
            let mut e = d.clone();
            change(&mut e);
            assert!(!is_key_of(&e), "{e:?}");
        }
        // Near misses are not keys of form 2 (nor of form 1).
        let base = "tgb/prep-7/0000000004-00000000000000000019";
        for tail in [
            ".3x2.100.0A1B2C3D.12345.tgb",
            ".3x2.100.a1b2c3d.12345.tgb",
            ".3x2.0100.0a1b2c3d.12345.tgb",
            ".3x2.100.0a1b2c3d.012345.tgb",
            ".3x2.100.0a1b2c3d.tgb",
            ".3x2.100.0a1b2c3d.12345.7.tgb",
            ".3-2.100.0a1b2c3d.12345.tgb",
            ".3x2.100.0a1b2c3d.+12345.tgb",
            ".3x2.100.0a1b2c3d.18446744073709551616.tgb",
            ".4294967296x1.100.0a1b2c3d.1.tgb",
            ".3x2..0a1b2c3d.12345.tgb",
        ] {
            let k = format!("{base}{tail}");
            assert_eq!(parse_described_tgb_key(&k), None, "{k}");
            assert_eq!(parse_tgb_key(&k), None, "{k}");
        }
        assert_eq!(parse_described_tgb_key(&tgb_key("p", 1, 2)), None);
    }

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

    proptest::proptest! {
        /// What lets `validate` skip the key's own scan: a key that names its descriptor,
        /// whose id is valid, is a valid key. Keys of both forms, from any valid id and any
        /// fields, and then the same keys with one byte changed anywhere.
        #[test]
        fn a_key_that_names_its_descriptor_is_a_valid_key(
            id in "[A-Za-z0-9._-]{1,128}",
            epoch in proptest::prelude::any::<u64>(),
            sequence in proptest::prelude::any::<u64>(),
            dp in proptest::prelude::any::<u32>(),
            cp in proptest::prelude::any::<u32>(),
            payload_bytes in proptest::prelude::any::<u64>(),
            footer_crc32 in proptest::prelude::any::<u32>(),
            source_offset in proptest::prelude::any::<u64>(),
            form2 in proptest::prelude::any::<bool>(),
            slice_stride in proptest::prop_oneof![proptest::strategy::Just(0u64), proptest::prelude::any::<u64>()],
            at in proptest::prelude::any::<usize>(),
            byte in proptest::prelude::any::<u8>(),
        ) {
            proptest::prop_assume!(validate_producer_id(&id).is_ok());
            let mut d = TgbDescriptor {
                producer_id: id.clone(),
                epoch, sequence, dp, cp, payload_bytes, footer_crc32, source_offset,
                slice_stride,
                ..Default::default()
            };
            d.key = if form2 { described_tgb_key(&d) } else { tgb_key(&id, epoch, sequence) };
            proptest::prop_assert!(is_key_of(&d), "{}", d.key);
            proptest::prop_assert!(is_key_of_by_splitting(&d));
            proptest::prop_assert!(validate_key(&d.key).is_ok(), "{}", d.key);
            let mut bytes = d.key.clone().into_bytes();
            let i = at % bytes.len();
            bytes[i] = byte;
            if let Ok(key) = String::from_utf8(bytes) {
                d.key = key;
                proptest::prop_assert_eq!(is_key_of(&d), is_key_of_by_splitting(&d), "{:?}", d.key);
                if is_key_of(&d) {
                    proptest::prop_assert!(validate_key(&d.key).is_ok(), "{:?}", d.key);
                }
            }
        }
    }
}
