//! See `sluice::fuzzing::proxy_protocol` for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzzing::proxy_protocol(data));
