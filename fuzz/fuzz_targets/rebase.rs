//! Fuzz target `rebase`: see `batchweave_fuzz_checks::rebase` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    batchweave_fuzz_checks::rebase(data);
});
