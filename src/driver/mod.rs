//! Runtime drivers: start a runtime profile and tell when it is ready.
pub mod process;
