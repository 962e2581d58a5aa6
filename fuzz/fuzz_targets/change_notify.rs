#![no_main]
//! libFuzzer entry for the `change_notify` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("change_notify")
        .expect("target exists")
        .run)(data);
});
