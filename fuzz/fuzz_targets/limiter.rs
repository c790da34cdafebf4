//! See `sluice::fuzzing::limiter` for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzzing::limiter(data));
