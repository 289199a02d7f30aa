//! The floor `qualify`, `decide` and `status` stand on: a runtime started,
//! watched, stopped, restored and readmitted (`lifecycle`, `readmit`), the
//! plan's hooks run (`hook`, `notify`), and every step recorded in the
//! ledger (`ledger`), with the qualification directory's files and lock
//! (`state`).
//!
//! Nothing here imports `qualify` or `decision` (`tests/layout.rs` holds it).

pub mod hook;
pub mod ledger;
pub mod lifecycle;
pub mod notify;
pub mod readmit;
pub mod state;
