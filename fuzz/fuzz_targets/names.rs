//! Hostile names: every report format, against a twin with plain names,
//! and the suite reader's refusal. The invariants are in
//! `infergate::fuzzing::names`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| infergate::fuzzing::names(data));
