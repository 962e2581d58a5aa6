#![no_main]
//! libFuzzer entry for the `iwarp_engine` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("iwarp_engine")
        .expect("target exists")
        .run)(data);
});
