//! infergate: qualify an LLM serving runtime against the one in service.
//!
//! Data flows one way: suite → workload → loadgen → client → records (journal)
//! → aggregate → compare → gates → report. Each module is one stage.

pub mod aggregate;
pub mod artifact;
pub mod atomic;
pub mod cli_qualify;
pub mod client;
pub mod decide;
pub mod discover;
pub mod driver;
pub mod engine;
pub mod fastsource;
pub mod faultproxy;
pub mod fuzzing;
pub mod interleave;
pub mod journal;
pub mod ledger;
pub mod lifecycle;
pub mod loadgen;
pub mod plan;
pub mod qualify;
pub mod readmit;
pub mod record;
pub mod report;
pub mod runner;
pub mod sse;
pub mod stats;
pub mod status;
pub mod suite;
pub mod tokenizer;
pub mod turnover;
pub mod workload;
