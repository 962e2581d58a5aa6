#![no_main]
//! libFuzzer entry for the `frame` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("frame").expect("target exists").run)(data);
});
