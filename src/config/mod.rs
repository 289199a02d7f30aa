//! Configuration files, read and checked before anything runs: the
//! qualification [`plan`] and the workload [`suite`] (or, for an ad-hoc run,
//! the suite [`adhoc`] makes from `infergate run`'s cell flags). Errors are one type,
//! [`ConfigError`] (file, line, column, field); the policy file is read by the
//! report crate with the same type.

pub mod adhoc;
pub mod dataset;
pub mod embeddings;
pub mod endpoints;
pub mod features;
pub mod init;
pub mod ledger_location;
pub mod limits;
pub mod plan;
pub mod suite;
pub mod tasks;
pub mod timeouts;
pub mod turnover;
pub mod urls;
pub mod workload;

pub use crate::report::ConfigError;
