#![no_main]
//! libFuzzer entry for the `tree_connect` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("tree_connect")
        .expect("target exists")
        .run)(data);
});
