//! Fuzz target `extend_pair`: see `batchweave_fuzz_checks::extend_pair` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    batchweave_fuzz_checks::extend_pair(data);
});
