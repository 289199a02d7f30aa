//! Plan, suite and policy TOML parsers.
//! The invariants are in `infergate::fuzzing::plan`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| infergate::fuzzing::plan(data));
