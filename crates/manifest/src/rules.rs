//! The stable names of the manifest rules, as carried by
//! [`ManifestError::Rule`](crate::ManifestError::Rule) and numbered in
//! `docs/format.md` section 4.
//!
//! Per-version rules ([`validate`](crate::validate), run by every decoder):
//! [`TGB_KEY`], [`PRODUCER_ENTRY`], [`UNIQUE_TGB`], [`SEQUENCE_ORDER`],
//! [`EPOCH_ORDER`], [`SOURCE_OFFSET`], [`VISIBLE_ORDER`], [`PRODUCER_TOTALS`],
//! [`ONE_COMMITTER`], [`GRID`].
//!
//! Extension rules between an older and a newer version
//! ([`check_extends`](crate::check_extends)): [`EXTENDS`], [`SAME_STEP`],
//! [`PRODUCER_PROGRESS`], [`GRID`], [`NEW_TGBS`], [`SINGLE_COMMIT`].

/// Every descriptor's `key` is `tgb_key(producer_id, epoch, sequence)` (form 1) or
/// exactly `described_tgb_key(descriptor)` (form 2, every field agreeing).
pub const TGB_KEY: &str = "tgb-key";
/// Every descriptor's producer has an entry in `producers`.
pub const PRODUCER_ENTRY: &str = "producer-entry";
/// No `(producer_id, sequence)` appears twice in `tgbs`.
pub const UNIQUE_TGB: &str = "unique-tgb";
/// Per producer, the retained descriptors have sequences `>= 1`, ascending
/// and contiguous in step order, the last one equal to the entry's
/// `last_sequence`.
pub const SEQUENCE_ORDER: &str = "sequence-order";
/// Per producer, descriptor epochs never decrease along the sequence and are
/// at most the entry's `epoch`.
pub const EPOCH_ORDER: &str = "epoch-order";
/// Per producer, descriptor `source_offset`s never decrease along the
/// sequence and the last one is at most the entry's `source_offset`.
pub const SOURCE_OFFSET: &str = "source-offset";
/// Every `visible_version` is at least 1 and they never decrease along
/// `tgbs`; a producer's TGBs are not visible after its `last_commit_version`.
pub const VISIBLE_ORDER: &str = "visible-order";
/// Every entry has `tgbs_committed == last_sequence`, and the entries'
/// `tgbs_committed` sum to `total_tgbs`.
pub const PRODUCER_TOTALS: &str = "producer-totals";
/// From version 1 on, exactly one entry has `last_commit_version == version`
/// (the committer), and every TGB with `visible_version == version` is its. A
/// cooperative version (one that names its `committer`) instead has the named
/// committer's entry record the version, and every TGB visible at the version
/// belongs to an entry that records it.
pub const ONE_COMMITTER: &str = "one-committer";
/// One slice grid per stream: `grid_dp`/`grid_cp` are both 0 or both set
/// (and set only once a TGB was committed), and every retained descriptor
/// has the stream's grid; a newer version keeps the grid of an older one.
pub const GRID: &str = "grid";
/// The newer version has a higher number, and neither `first_step` nor
/// `total_tgbs` decreases.
pub const EXTENDS: &str = "extends";
/// Every step retained in both versions has an identical descriptor.
pub const SAME_STEP: &str = "same-step";
/// Every producer entry of the older version is in the newer one with
/// `epoch`, `last_sequence`, `tgbs_committed`, `source_offset` and
/// `last_commit_version` all `>=`, and the same incarnation unless the epoch
/// grew.
pub const PRODUCER_PROGRESS: &str = "producer-progress";
/// A TGB at a step the older version had not reached (`>= total_tgbs`) is
/// visible only after the older version and has a sequence above its
/// producer's `last_sequence` there.
pub const NEW_TGBS: &str = "new-tgbs";
/// Between consecutive versions, exactly one producer's entry changed (the
/// committer's, `last_commit_version == version`), and the new TGBs are its,
/// visible at the new version, as many as its `last_sequence` and
/// `tgbs_committed` grew. In a cooperative version, the other entries that changed
/// kept epoch, incarnation and `max_commit_age_ms` and each grew by at least one TGB,
/// every changed entry grew by exactly its new TGBs and records the version. In both,
/// every new TGB has its entry's epoch.
pub const SINGLE_COMMIT: &str = "single-commit";

/// Every rule name, per-version rules first.
pub const ALL: [&str; 15] = [
    TGB_KEY,
    PRODUCER_ENTRY,
    UNIQUE_TGB,
    SEQUENCE_ORDER,
    EPOCH_ORDER,
    SOURCE_OFFSET,
    VISIBLE_ORDER,
    PRODUCER_TOTALS,
    ONE_COMMITTER,
    GRID,
    EXTENDS,
    SAME_STEP,
    PRODUCER_PROGRESS,
    NEW_TGBS,
    SINGLE_COMMIT,
];
