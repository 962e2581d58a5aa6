#![no_main]
//! libFuzzer entry for the `direct_pdu` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("direct_pdu").expect("target exists").run)(data);
});
