//! SSE: `SseParser` against a reference model, fed whole and in pieces.
//! The invariants are in `infergate::fuzzing::sse`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| infergate::fuzzing::sse(data));
