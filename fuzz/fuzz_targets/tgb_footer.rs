//! Fuzz target `tgb_footer`: see `batchweave_fuzz_checks::tgb_footer` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    batchweave_fuzz_checks::tgb_footer(data);
});
