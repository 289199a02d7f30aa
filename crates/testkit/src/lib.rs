//! Test doubles for infergate's tests and benches, never part of a release
//! binary (this crate is only a dev-dependency): a fast SSE source that
//! streams at a known rate with embedded timestamps (and can count prompt
//! tokens as the reference engine does, [`promptcount`]), and a
//! fault-injecting TCP proxy placed in front of the real engine.

pub mod fastsource;
pub mod faultproxy;
pub mod promptcount;
