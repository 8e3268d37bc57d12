//! Fuzz target `mesh_remap`: see `batchweave_fuzz_checks::mesh_remap` for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    batchweave_fuzz_checks::mesh_remap(data);
});
