#![no_main]
//! libFuzzer entry for the `ntlm` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("ntlm").expect("target exists").run)(data);
});
