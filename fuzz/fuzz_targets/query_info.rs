#![no_main]
//! libFuzzer entry for the `query_info` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("query_info").expect("target exists").run)(data);
});
