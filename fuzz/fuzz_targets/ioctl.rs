#![no_main]
//! libFuzzer entry for the `ioctl` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("ioctl").expect("target exists").run)(data);
});
