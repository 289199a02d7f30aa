//! `infergate ledger migrate`: one ledger copied into another with its
//! ids, each detail's text and the hash chain kept byte for byte, then
//! both checked: the copy equals the source row for row and its chain
//! verifies.

use anyhow::{Result, bail};

use super::{Backend, Ledger, Row};

/// What `infergate ledger migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    pub copied: usize,
    /// Entries the destination already held, identical (a rerun).
    pub already: usize,
    /// Qualifications whose chain was checked in the destination.
    pub chains: usize,
    /// The seqs of the rows that predate the chain (not covered), ascending.
    pub unchained: Vec<i64>,
}

/// Copy every row of `from` into `to`, ids (seq) kept, in one
/// transaction; then check `to` holds `from` row for row and its chain
/// verifies. A source whose chain is broken is refused (the copy would
/// carry rows nobody can vouch for); rows `to` already holds must be the
/// same (a migration run again); anything else in `to` is refused, so two
/// ledgers are never merged by accident.
pub fn migrate(from: &Ledger, to: &Ledger) -> Result<Migrated> {
    let (source, checked) = from.verify()?;
    if let Some(first) = checked.broken().next() {
        bail!(
            "ledger {} does not verify ({} broken row(s); the first: {first}): refusing to copy a ledger changed outside infergate (`infergate ledger verify --ledger {}` names each)",
            from.location,
            checked.broken().count(),
            from.location
        );
    }
    let present = to.rows(None)?;
    let mut already = 0;
    for p in &present {
        match source.iter().find(|s| s.entry.seq == p.entry.seq) {
            Some(s) if s == p => already += 1,
            _ => bail!(
                "ledger {} already holds entry {} ({} {}), which {} does not: refusing to merge two ledgers",
                to.location,
                p.entry.seq,
                p.entry.qualification,
                p.entry.step,
                from.location
            ),
        }
    }
    let missing: Vec<Row> = source
        .iter()
        .filter(|s| !present.iter().any(|p| p.entry.seq == s.entry.seq))
        .cloned()
        .collect();
    // The rows that predate the chain in the source predate it in the copy.
    let through = from.unchained_through()?;
    if through > to.unchained_through()? {
        match &to.backend {
            Backend::Sqlite(b) => b.set_unchained_through(through)?,
            Backend::Postgres(b) => b.set_unchained_through(through)?,
        }
    }
    match &to.backend {
        Backend::Sqlite(b) => b.insert_exact(&missing)?,
        Backend::Postgres(b) => b.insert_exact(&missing)?,
    }
    let (after, copy) = to.verify()?;
    if after != source {
        bail!(
            "ledger {} does not equal {} after the migration ({} entries against {})",
            to.location,
            from.location,
            after.len(),
            source.len()
        );
    }
    if let Some(first) = copy.broken().next() {
        bail!(
            "ledger {}'s chain does not verify after the migration: {first}",
            to.location
        );
    }
    Ok(Migrated {
        copied: missing.len(),
        already,
        chains: copy.chains.len(),
        unchained: copy.unchained(),
    })
}
