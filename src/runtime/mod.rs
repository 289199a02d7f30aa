//! The floor `qualify`, `decide` and `status` stand on: a runtime started,
//! watched, stopped, restored and readmitted (`lifecycle`, `readmit`), a
//! decision carried out (`promotion`), the plan's hooks run (`hook`,
//! `notify`), and every step recorded in the ledger (`ledger`) through one
//! logger (`ctx`), with the qualification directory's files and lock
//! (`state`), and what a qualification left running stopped (`stop`). A started runtime as the ledger records it, its handle, is
//! the drivers' ([`crate::driver::handle`]).
//!
//! Nothing here imports `qualify` or `decision` (`tests/layout.rs` holds it).

pub mod ctx;
pub mod hook;
pub mod ledger;
pub mod lifecycle;
pub mod notify;
pub mod promotion;
pub mod readmit;
pub mod state;
pub mod stop;
