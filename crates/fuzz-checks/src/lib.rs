//! The checks behind BatchWeave's cargo-fuzz targets, one function per target.
//!
//! Each function takes the raw fuzz input, feeds it to the decoders and the math of
//! `batchweave-manifest` and `batchweave-tgb`, and panics only when an invariant is
//! broken (a decoder panicking, a roundtrip that does not give the value back, a remap
//! read outside the TGB grid, a rebase result that does not validate, an extension check
//! that accepts two versions in both orders). The libFuzzer
//! binaries in `fuzz/fuzz_targets/` (their own workspace, so libFuzzer never enters the
//! normal build) are one-line wrappers around these functions, and this crate's test
//! `tests/corpus.rs` replays the checked-in corpus through the same functions with
//! `cargo test`.
//!
//! Every target returns whether the input reached its deep checks (something decoded, a
//! plan or a merge succeeded); the replay test uses that to make sure the corpus still
//! exercises them.
//!
//! | target              | input                                         |
//! |---------------------|-----------------------------------------------|
//! | `manifest_envelope` | raw bytes: manifest, GC boundary, watermark   |
//! | `tgb_footer`        | a TGB object; also `check header ++ footer`   |
//! | `mesh_remap`        | mesh, rank, grids, step, drawn from the bytes |
//! | `rebase`            | base manifest (envelope or fields) + pending  |
//! | `extend_pair`       | two manifest envelopes back to back           |

mod extend;
mod footer;
mod input;
mod manifest;
mod mesh;
mod rebase;

pub use extend::extend_pair;
pub use footer::tgb_footer;
pub use manifest::manifest_envelope;
pub use mesh::mesh_remap;
pub use rebase::rebase;

/// A target: checks one input, returns whether it reached the deep checks.
pub type Target = fn(&[u8]) -> bool;

/// Every target by name, for corpus replay.
pub const TARGETS: [(&str, Target); 5] = [
    ("manifest_envelope", manifest_envelope),
    ("tgb_footer", tgb_footer),
    ("mesh_remap", mesh_remap),
    ("rebase", rebase),
    ("extend_pair", extend_pair),
];
