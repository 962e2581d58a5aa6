#![no_main]
//! libFuzzer entry for the `create` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("create").expect("target exists").run)(data);
});
