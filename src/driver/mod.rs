//! Runtime drivers: start a runtime profile and tell when it is ready.
pub mod container;
pub mod detached;
pub mod external;
pub mod process;
mod runlog;
