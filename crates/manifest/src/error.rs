//! The crate's error types: [`ManifestError`] for decoding and validation,
//! [`RebaseError`] for building the next version.

/// Why an object read from the store (or a value about to be written) was
/// rejected. Every decoder in this crate returns it instead of panicking.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The input is shorter than the 16-byte envelope header.
    #[error("envelope truncated: {len} bytes, the header alone needs {needed}")]
    Truncated {
        /// Bytes available.
        len: usize,
        /// Bytes the header needs.
        needed: usize,
    },
    /// The first four bytes are not the magic of the expected object kind.
    #[error("bad magic: expected {expected:?}, found {found:?}")]
    BadMagic {
        /// Magic of the kind the caller asked for.
        expected: [u8; 4],
        /// Magic found in the input.
        found: [u8; 4],
    },
    /// The envelope's format version is not one this crate reads.
    #[error("unsupported envelope format version {version}")]
    UnsupportedVersion {
        /// Version found in the header.
        version: u16,
    },
    /// The envelope's flags field has bits this crate does not know.
    #[error("unsupported envelope flags {flags:#06x}")]
    UnsupportedFlags {
        /// Flags found in the header.
        flags: u16,
    },
    /// The header's payload length disagrees with the bytes that follow it.
    #[error("payload length field says {declared} bytes, {actual} follow the header")]
    LengthMismatch {
        /// Length written in the header.
        declared: u64,
        /// Bytes actually present after the header.
        actual: u64,
    },
    /// The payload is larger than [`DecodeLimits::max_bytes`](crate::DecodeLimits).
    #[error("payload of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Payload length.
        len: u64,
        /// Configured limit.
        max: u64,
    },
    /// The payload's CRC32 does not match the header: the object is corrupt.
    #[error("payload checksum mismatch: header {expected:#010x}, computed {actual:#010x}")]
    ChecksumMismatch {
        /// CRC32 stored in the header.
        expected: u32,
        /// CRC32 computed over the payload.
        actual: u32,
    },
    /// The payload is not valid protobuf for the expected message.
    #[error("payload is not a valid protobuf message: {reason}")]
    Malformed {
        /// What the wire-format decoder objected to.
        reason: String,
    },
    /// A count in the object exceeds a [`DecodeLimits`](crate::DecodeLimits) bound.
    #[error("too many {what}: {count} exceeds the limit of {max}")]
    LimitExceeded {
        /// What was counted (`"tgbs"`, `"producers"`, `"grid cells"`).
        what: &'static str,
        /// The count found.
        count: u64,
        /// The configured limit.
        max: u64,
    },
    /// An object key is not a valid key inside the stream prefix.
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey {
        /// The key (clipped to 256 characters).
        key: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A producer id, consumer group or position name is not a valid id.
    #[error("invalid id {id:?}: {reason}")]
    InvalidId {
        /// The id (clipped to 256 characters).
        id: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A TGB descriptor breaks an invariant.
    #[error("tgb descriptor {index} is invalid: {reason}")]
    InvalidDescriptor {
        /// Position of the descriptor in `Manifest.tgbs`.
        index: usize,
        /// The broken invariant.
        reason: String,
    },
    /// A manifest-level invariant does not hold (totals, producer entries).
    #[error("inconsistent manifest: {reason}")]
    Inconsistent {
        /// The broken invariant.
        reason: String,
    },
    /// A manifest version breaks one of the numbered rules of
    /// `docs/format.md` section 4: a per-version rule checked by
    /// [`validate`](crate::validate) (so by every decoder), or an extension
    /// rule between two versions checked by
    /// [`check_extends`](crate::check_extends). Writers that follow the
    /// rebase rule never produce one; a reader that sees one must not use
    /// the version.
    #[error("rule {rule} violated: {reason}")]
    Rule {
        /// Short stable name of the rule, one of [`rules::ALL`](crate::rules::ALL)
        /// (for example `"unique-tgb"`); meant to be printed and matched.
        rule: &'static str,
        /// What broke it: the step, producer or field and the values found.
        reason: String,
    },
}

impl ManifestError {
    /// The rule name of a [`ManifestError::Rule`], `None` for other errors.
    pub fn rule(&self) -> Option<&'static str> {
        match self {
            Self::Rule { rule, .. } => Some(rule),
            _ => None,
        }
    }
}

/// Why [`rebase`](crate::rebase) could not build the next version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RebaseError {
    /// The base's entry for this producer id belongs to a newer epoch, or to
    /// the same epoch claimed by another incarnation: this process is a
    /// zombie and must stop producing.
    #[error(
        "producer {producer_id} is fenced: ours (epoch, incarnation) = {ours:?}, \
         the manifest holds {theirs:?}"
    )]
    Fenced {
        /// The producer id.
        producer_id: String,
        /// `(epoch, incarnation)` of the caller.
        ours: (u64, u64),
        /// `(epoch, incarnation)` recorded in the base manifest.
        theirs: (u64, u64),
    },
    /// The first pending TGB that is not yet committed does not directly
    /// follow the base entry's `last_sequence`: TGBs would be missing.
    #[error(
        "producer {producer_id}: sequence gap, the manifest expects sequence {expected} next, \
         the first new pending TGB has {found}"
    )]
    SequenceGap {
        /// The producer id.
        producer_id: String,
        /// `last_sequence + 1` of the base entry.
        expected: u64,
        /// Sequence of the first pending TGB that would be appended.
        found: u64,
    },
    /// A TGB-less epoch claim names a source offset that differs from the one
    /// committed by the previous epoch: the claimer recovered from a stale
    /// manifest (an older incarnation committed after it) and must recover again.
    #[error(
        "producer {producer_id}: stale recovery, the manifest records source offset {committed}, \
         the claim says {claimed}"
    )]
    StaleRecovery {
        /// The producer id.
        producer_id: String,
        /// `source_offset` of the base entry.
        committed: u64,
        /// `source_offset` of the pending claim.
        claimed: u64,
    },
    /// The pending batch itself is malformed (bad id, foreign TGBs, sequences
    /// not ascending and contiguous, invalid descriptors).
    #[error("invalid pending batch: {reason}")]
    InvalidPending {
        /// The broken rule.
        reason: String,
    },
    /// A counter would exceed `u64::MAX`.
    #[error("arithmetic overflow computing {what}")]
    Overflow {
        /// The counter that overflowed.
        what: &'static str,
    },
    /// A new TGB's slice grid differs from the stream's grid (fixed by the
    /// first commit that carried a TGB; see [`stream_grid`](crate::stream_grid)).
    /// Nothing was built: the TGB cannot become visible in this stream.
    #[error(
        "grid mismatch: the stream's grid is DP={} x CP={}, this TGB's is DP={} x CP={}",
        stream.0,
        stream.1,
        tgb.0,
        tgb.1
    )]
    GridMismatch {
        /// `(dp, cp)` of the stream.
        stream: (u32, u32),
        /// `(dp, cp)` of the refused TGB.
        tgb: (u32, u32),
    },
}

/// Clips untrusted text stored in an error so that a hostile 200 MiB key
/// does not end up in a log line.
pub(crate) fn clip(s: &str) -> String {
    const MAX: usize = 256;
    match s.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_owned(),
    }
}
