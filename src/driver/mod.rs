//! Runtime drivers: start a runtime profile and tell when it is ready.
//! [`external`] (a URL someone else runs), [`process`] and [`detached`]
//! (local processes, [`spec`] their command), [`container`] (Docker, by
//! image digest, through the Engine API client [`docker`]; [`gpu`] the host
//! GPUs it gets; [`registry`] a tag resolved to its digest), and the bundled reference
//! [`engine`]. [`handle`]: a started runtime as the ledger records it, to
//! check or stop it later.
pub mod container;
pub mod detached;
pub mod docker;
pub mod engine;
pub mod external;
pub mod gpu;
pub mod handle;
pub mod process;
pub mod registry;
mod runlog;
pub mod spec;
