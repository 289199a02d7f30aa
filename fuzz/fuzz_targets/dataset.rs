//! ShareGPT, OpenAI request-line and trace readers.
//! The invariants are in `infergate::fuzzing::dataset`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| infergate::fuzzing::dataset(data));
