//! Configuration files, read and checked before anything runs: the
//! qualification [`plan`] and the workload [`suite`]. Errors are one type,
//! [`ConfigError`] (file, line, column, field); the policy file is read by the
//! report crate with the same type.

pub mod plan;
pub mod suite;

pub use crate::report::ConfigError;
