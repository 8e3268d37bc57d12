//! The one error type of this crate.

/// Everything that can go wrong while encoding or decoding a TGB object, projecting a rank
/// onto the device mesh, or remapping a consumer grid onto the stream's grid.
///
/// Decoders return these for corrupt or hostile bytes; they never panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TgbError {
    /// A grid has a zero degree or more slices than [`MAX_SLICES`](crate::MAX_SLICES).
    #[error("invalid TGB grid D={dp} x C={cp}: {reason}")]
    InvalidGrid {
        /// DP degree of the grid.
        dp: u32,
        /// CP degree of the grid.
        cp: u32,
        /// Why the grid was rejected.
        reason: &'static str,
    },
    /// The encoder was given a number of slices other than `D * C`.
    #[error("a D={dp} x C={cp} TGB needs {expected} slices, got {actual}")]
    SliceCountMismatch {
        /// DP degree of the grid.
        dp: u32,
        /// CP degree of the grid.
        cp: u32,
        /// `D * C`.
        expected: u64,
        /// Number of slices passed in.
        actual: u64,
    },
    /// The object would be larger than a `u64` can address.
    #[error("TGB object size overflows u64")]
    SizeOverflow,
    /// Input bytes are shorter (or longer) than the structure they should hold.
    #[error("{what}: expected {expected} bytes, got {actual}")]
    Length {
        /// Which structure was being decoded.
        what: &'static str,
        /// Length the structure requires.
        expected: u64,
        /// Length that was supplied.
        actual: u64,
    },
    /// A magic number did not match; the bytes are not a TGB footer or trailer.
    #[error("{what}: bad magic (not a BatchWeave TGB, or corrupt)")]
    BadMagic {
        /// Which structure was being decoded.
        what: &'static str,
    },
    /// The format version is not one this build understands.
    #[error(
        "{what}: unsupported format version {version} (this build reads versions 1 to {supported})"
    )]
    UnsupportedVersion {
        /// Which structure was being decoded.
        what: &'static str,
        /// Version found in the bytes.
        version: u16,
        /// Version this build reads.
        supported: u16,
    },
    /// Bytes that the format reserves as zero were not zero.
    #[error("{what}: reserved bytes are not zero")]
    ReservedNotZero {
        /// Which structure was being decoded.
        what: &'static str,
    },
    /// The footer CRC32 does not match the expected one (from the manifest or trailer).
    #[error("footer checksum mismatch: expected {expected:#010x}, computed {actual:#010x}")]
    FooterChecksum {
        /// CRC32 the caller expected.
        expected: u32,
        /// CRC32 computed over the footer bytes.
        actual: u32,
    },
    /// The footer and trailer disagree with the object's size or each other.
    #[error("TGB layout mismatch: {reason} (expected {expected}, found {actual})")]
    LayoutMismatch {
        /// Which invariant failed.
        reason: &'static str,
        /// Value the invariant requires.
        expected: u64,
        /// Value found.
        actual: u64,
    },
    /// A footer entry puts a slice somewhere other than directly after the previous slice.
    #[error(
        "slice {slice}: footer entry at offset {offset} length {length} breaks the layout \
         (slices must be back to back from offset 0 up to the footer at {footer_offset})"
    )]
    SliceOutOfPlace {
        /// Slice id (`d * C + c`).
        slice: u32,
        /// Offset recorded in the footer.
        offset: u64,
        /// Length recorded in the footer.
        length: u64,
        /// Where the footer starts.
        footer_offset: u64,
    },
    /// A slice id, `(d, c)` pair or slice run lies outside the grid.
    #[error("slice {first}..{first}+{count} is outside a grid of {slices} slices")]
    NoSuchSlice {
        /// First slice id requested.
        first: u64,
        /// Number of slices requested.
        count: u64,
        /// Number of slices in the grid.
        slices: u64,
    },
    /// Bytes read for a slice (or run of slices) have the wrong length.
    #[error("slice {slice}: expected {expected} bytes, got {actual}")]
    SliceLength {
        /// First slice id of the read.
        slice: u32,
        /// Length the footer records.
        expected: u64,
        /// Length supplied.
        actual: u64,
    },
    /// Bytes read for a slice do not match the CRC32 in the footer.
    #[error("slice {slice}: checksum mismatch (footer {expected:#010x}, data {actual:#010x})")]
    SliceChecksum {
        /// Slice id (`d * C + c`).
        slice: u32,
        /// CRC32 recorded in the footer.
        expected: u32,
        /// CRC32 of the supplied bytes.
        actual: u32,
    },
    /// A sealed slot's seal does not belong where it was read (format version 2).
    #[error("slice {slice}: seal {field} is {actual:#x}, expected {expected:#x}")]
    SealMismatch {
        /// Slice id (`d * C + c`) the slot was read as.
        slice: u32,
        /// The seal field that disagrees: `slice id`, `footer CRC32` or `length`.
        field: &'static str,
        /// Value the reader expected.
        expected: u64,
        /// Value the seal holds.
        actual: u64,
    },
    /// A mesh degree (DP, CP, TP or PP) is zero.
    #[error("mesh degree {dim} is 0; every degree must be at least 1")]
    MeshZeroDegree {
        /// Name of the zero degree (`"dp"`, `"cp"`, `"tp"`, `"pp"`).
        dim: &'static str,
    },
    /// The mesh degrees do not multiply to the world size.
    #[error(
        "world size {world_size} != dp {dp} * cp {cp} * tp {tp} * pp {pp} = {product}; \
         set the degrees so that their product is the world size"
    )]
    MeshWorldSize {
        /// Configured world size.
        world_size: u32,
        /// DP degree.
        dp: u32,
        /// CP degree.
        cp: u32,
        /// TP degree.
        tp: u32,
        /// PP degree.
        pp: u32,
        /// Product of the four degrees.
        product: u128,
    },
    /// A rank is not below the world size.
    #[error("rank {rank} is out of range for world size {world_size} (ranks are 0..{world_size})")]
    RankOutOfRange {
        /// The rank.
        rank: u32,
        /// The world size.
        world_size: u32,
    },
    /// A mesh order string is not a permutation of `tp`, `cp`, `dp`, `pp`.
    #[error(
        "mesh order {input:?}: {reason}; expected the four names tp, cp, dp, pp each once, \
         innermost first, joined by '-' (e.g. \"tp-cp-dp-pp\")"
    )]
    MeshOrder {
        /// The string that was parsed.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A consumer position lies outside the consumer grid.
    #[error("position (d={d}, c={c}) is outside the consumer grid D={dp} x C={cp}")]
    PositionOutOfGrid {
        /// DP coordinate.
        d: u32,
        /// CP coordinate.
        c: u32,
        /// Consumer DP degree.
        dp: u32,
        /// Consumer CP degree.
        cp: u32,
    },
    /// Neither CP degree divides the other, so chunks cannot be merged or split evenly.
    #[error(
        "cannot remap CP {tgb_cp} (stream) to CP {consumer_cp} (consumer): one must be a \
         multiple of the other"
    )]
    CpRatio {
        /// CP degree of the stream's TGBs.
        tgb_cp: u32,
        /// CP degree of the consumer.
        consumer_cp: u32,
    },
    /// A consumer step does not fall on a step boundary under the other DP degree.
    #[error(
        "step {step} at DP {from_dp} covers {step}*{from_dp} DP slices, which is not a whole \
         number of steps at DP {to_dp}; restore from a checkpoint taken at a step that is a \
         multiple of {to_dp}/gcd({from_dp}, {to_dp})"
    )]
    StepNotAligned {
        /// Step under `from_dp`.
        step: u64,
        /// DP degree the step was counted under.
        from_dp: u32,
        /// DP degree to convert to.
        to_dp: u32,
    },
    /// A CP sub-part request is invalid for the slice it applies to.
    #[error("cannot cut part {index} of {parts} from a {len}-byte slice: {reason}")]
    BadPart {
        /// Part index.
        index: u32,
        /// Number of parts.
        parts: u32,
        /// Slice length in bytes.
        len: u64,
        /// Why.
        reason: &'static str,
    },
    /// A step or index computation overflowed `u64`.
    #[error("arithmetic overflow computing {what}")]
    Overflow {
        /// Which quantity overflowed.
        what: &'static str,
    },
}
