#![no_main]
//! libFuzzer entry for the `header` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("header").expect("target exists").run)(data);
});
