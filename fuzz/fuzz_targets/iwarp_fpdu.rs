#![no_main]
//! libFuzzer entry for the `iwarp_fpdu` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("iwarp_fpdu").expect("target exists").run)(data);
});
