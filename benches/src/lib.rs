//! Criterion benchmarks for BatchWeave live in `benches/`; this library holds no code.
//!
//! It compiles the repository README's Rust example as a doctest, so the README cannot
//! rot. (The doctest lives here, in a crate that is never packaged, because a published
//! crate cannot include a file outside its own directory.)

/// The README's Rust example.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
