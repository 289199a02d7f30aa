//! The human's side of a qualification: `decide` records a decision on a
//! report and has the runtime layer carry it out; `status` and `stop` read
//! where each qualification stands from the ledger alone.
//!
//! Both stand on [`crate::runtime`]; `qualify` imports nothing from here,
//! and nothing here imports `qualify` (`tests/layout.rs` holds both).

pub mod decide;
pub mod status;
