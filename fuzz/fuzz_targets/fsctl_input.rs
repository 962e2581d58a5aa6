#![no_main]
//! libFuzzer entry for the `fsctl_input` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("fsctl_input").expect("target exists").run)(data);
});
