//! The TGB (training global batch) object format of BatchWeave, and the math that tells a
//! training rank which bytes of it to read.
//!
//! No I/O and no runtime: bytes in, bytes or values out.
//!
//! - **Layout** ([`encode_tgb`], [`decode_trailer`], [`decode_footer`], [`decode_object`],
//!   [`SliceIndex`]): a TGB object holds `D * C` slices back to back (slice `(d, c)` has id
//!   `d * C + c`), then a footer indexing them (offset, length, CRC32 each), then a 32-byte
//!   trailer that locates the footer. The manifest records the footer's offset, length and
//!   CRC32 so a reader fetches it with one ranged GET; the trailer serves readers that only
//!   have the object. Byte-level spec: `docs/format-tgb.md`.
//! - **Mesh projection** ([`MeshConfig::position`]): rank -> `(d, c)`; TP and PP ranks of one
//!   `(d, c)` read the same slice.
//! - **Topology remap** ([`plan`] and friends): the reads a consumer whose `(DP, CP)` differ
//!   from the stream's performs at a given step.
//! - **Synthetic payload** (`payload`, feature `test-util`): deterministic slices whose
//!   every byte a reader can check against the producer, the TGB and the slice id.
//!
//! ```
//! use batchweave_tgb::{FooterCheck, Grid, MeshConfig, decode_footer, encode_tgb, plan};
//! use bytes::Bytes;
//!
//! // Producer: a D=2 x C=2 TGB.
//! let slices = ["d0c0", "d0c1", "d1c0", "d1c1"].map(|s| Bytes::from_static(s.as_bytes())).to_vec();
//! let tgb = encode_tgb(2, 2, slices)?;
//! let object = tgb.to_bytes();
//!
//! // Consumer: the manifest gives the footer location and CRC.
//! let start = tgb.footer_offset as usize;
//! let footer = &object[start..start + tgb.footer_length as usize];
//! let index = decode_footer(footer, FooterCheck::new(tgb.footer_offset, tgb.footer_crc32))?;
//!
//! // Rank 6 of a 16-GPU job with D=2, C=2, TP=2, PP=2 is (d=1, c=1).
//! let pos = MeshConfig::new(16, 2, 2, 2, 2).position(6)?;
//! let read = plan(Grid::new(2, 2), Grid::new(2, 2), pos, 0)?[0];
//! let range = index.range_of(read.first_slice, read.slice_count)?;
//! let bytes = object.slice(range.start as usize..range.end as usize);
//! index.verify(read.first_slice, &bytes)?;
//! assert_eq!(&bytes[..], b"d1c1");
//! # Ok::<(), batchweave_tgb::TgbError>(())
//! ```

mod error;
mod footer;
mod layout;
mod mesh;
mod remap;
mod seal;

#[cfg(any(test, feature = "test-util"))]
pub mod payload;

pub use error::TgbError;
pub use footer::{FooterCheck, SliceEntry, SliceIndex, decode_footer, decode_object};
pub use layout::{
    EncodedTgb, FOOTER_ENTRY_LEN, FOOTER_HEADER_LEN, FOOTER_MAGIC, FORMAT_VERSION, MAX_SLICES,
    SEALED_FORMAT_VERSION, SEALED_TRAILER_MAGIC, TRAILER_LEN, TRAILER_MAGIC, TgbStreamEncoder,
    TgbTail, Trailer, decode_trailer, encode_tgb, footer_len,
};
pub use mesh::{MeshConfig, MeshDim, MeshOrder, Position};
pub use remap::{
    Grid, SliceRead, convert_step, cut_part, part_range, plan, steps_covered, tgbs_needed_through,
    tgbs_of_step,
};
pub use seal::{
    SEAL_LEN, SEAL_MAGIC, SliceLayout, encode_tgb_sealed, join_slices, open_sealed_run,
    sealed_stride,
};
