#![no_main]
//! libFuzzer entry for the `close` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("close").expect("target exists").run)(data);
});
