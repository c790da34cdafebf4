//! See `sluice::fuzzing::h1loop` for the input and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice::fuzzing::h1loop(data));
