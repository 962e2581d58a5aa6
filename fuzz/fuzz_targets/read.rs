#![no_main]
//! libFuzzer entry for the `read` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("read").expect("target exists").run)(data);
});
