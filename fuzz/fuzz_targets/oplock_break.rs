#![no_main]
//! libFuzzer entry for the `oplock_break` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("oplock_break")
        .expect("target exists")
        .run)(data);
});
