//! Criterion benchmarks for BatchWeave live in `benches/`; this library is empty.
