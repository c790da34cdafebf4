//! See `sluice::fuzzing::h2upstream` for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzzing::h2upstream(data));
