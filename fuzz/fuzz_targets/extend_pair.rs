//! Fuzz target `extend_pair`: see `batchweave_fuzz::extend_pair` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    batchweave_fuzz::extend_pair(data);
});
