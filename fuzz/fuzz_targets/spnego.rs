#![no_main]
//! libFuzzer entry for the `spnego` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("spnego").expect("target exists").run)(data);
});
