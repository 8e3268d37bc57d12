//! Fuzz target `manifest_envelope`: see `batchweave_fuzz_checks::manifest_envelope` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    batchweave_fuzz_checks::manifest_envelope(data);
});
