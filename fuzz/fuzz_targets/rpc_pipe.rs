#![no_main]
//! libFuzzer entry for the `rpc_pipe` target (see smbx_fuzz::TARGETS).

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (smbx_fuzz::target("rpc_pipe").expect("target exists").run)(data);
});
