//! The synthetic, deterministic payload every run writes and verifies: the scheme of
//! [`batchweave_tgb::payload`] (shared with the simulation), and the check of one read
//! a consumer delivered against it.
//!
//! Every byte of slice `s` of the TGB with sequence `q` of producer `p` is a function of
//! `(p, q, s)` and the slice length, so any consumer can verify every byte it reads
//! without talking to the producer.

pub use batchweave_tgb::payload::{parse_header, slice_bytes, tgb_slices, verify};

/// Checks one read of a batch (its source and bytes) against the payload it must be,
/// for slices of `slice_len` bytes; the error names the key and the slices.
pub fn verify_read(
    src: &batchweave::consumer::BatchSource,
    slice_len: usize,
    data: &[u8],
) -> Result<(), String> {
    verify(
        &src.producer_id,
        src.sequence,
        src.first_slice,
        src.slice_count,
        src.part,
        slice_len,
        data,
    )
    .map_err(|e| {
        format!(
            "key {}, slices {}..{}: {e}",
            src.key,
            src.first_slice,
            src.first_slice + src.slice_count
        )
    })
}
