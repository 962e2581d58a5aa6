#![no_main]
//! libFuzzer entry for the `session_setup` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("session_setup")
        .expect("target exists")
        .run)(data);
});
