#![no_main]
//! libFuzzer entry for the `negotiate` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("negotiate").expect("target exists").run)(data);
});
