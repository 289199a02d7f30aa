//! The human's side of a qualification: `decide` records a decision on a
//! report and has the runtime layer carry it out; `status` and `stop` read
//! where each qualification stands from the ledger alone; `ledger verify`
//! checks the ledger's hash chain.
//!
//! Both stand on [`crate::runtime`]; `qualify` imports nothing from here,
//! and nothing here imports `qualify` (`tests/layout.rs` holds both).

pub mod decide;
pub mod status;
pub mod verify_ledger;
