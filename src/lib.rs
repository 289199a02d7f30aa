//! infergate: qualify an LLM serving runtime against the one in service.
//!
//! Data flows one way: suite → workload → loadgen → client → records (journal)
//! → aggregate → compare → gates → report. Each module is one stage.

pub mod aggregate;
pub mod artifact;
pub mod atomic;
pub mod client;
pub mod discover;
pub mod driver;
pub mod engine;
pub mod fastsource;
pub mod faultproxy;
pub mod journal;
pub mod loadgen;
pub mod record;
pub mod report;
pub mod runner;
pub mod sse;
pub mod stats;
pub mod suite;
pub mod turnover;
pub mod workload;
