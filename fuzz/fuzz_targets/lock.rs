#![no_main]
//! libFuzzer entry for the `lock` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("lock").expect("target exists").run)(data);
});
