#![no_main]
//! libFuzzer entry for the `direct_connection` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("direct_connection")
        .expect("target exists")
        .run)(data);
});
