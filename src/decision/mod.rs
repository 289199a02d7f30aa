//! The stages after the report: the human's decision (`decide`) and
//! carrying it out — restoring and readmitting a runtime by its exact
//! digest (`lifecycle`, `readmit`) — the ledger every step of a
//! qualification is recorded in, the qualification directory's state
//! (`state`), and `status` / `stop`, read from the ledger alone.
//!
//! `qualify` runs the pipeline and uses these to bring its runtimes up and
//! down and to record each step; nothing here imports `qualify`
//! (`tests/layout.rs` holds it).

pub mod decide;
pub mod hook;
pub mod ledger;
pub mod lifecycle;
pub mod notify;
pub mod readmit;
pub mod state;
pub mod status;
