#![no_main]
//! libFuzzer entry for the `query_directory` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("query_directory")
        .expect("target exists")
        .run)(data);
});
