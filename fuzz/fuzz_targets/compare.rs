//! Run artifacts and `compare`: bytes as a run artifact, compared with itself
//! and a slower copy; every report made must verify. The invariants are in
//! `infergate::fuzzing::compare`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| infergate::fuzzing::compare(data));
