//! Report reader: bytes as a v1 report, then verify, render and round-trip.
//! The invariants are in `infergate::fuzzing::report`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| infergate::fuzzing::report(data));
