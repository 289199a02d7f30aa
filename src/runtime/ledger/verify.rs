//! `infergate ledger verify`: every qualification's hash chain checked over
//! a whole ledger (SQLite or PostgreSQL), each broken row named, the rows
//! that predate the chain named as not covered, and any exported heads
//! (`--head QUALIFICATION:SEQ:SHA256`, e.g. from a hook summary) checked
//! against the rows as they are now.

use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde::Serialize;

use super::chain::{self, Break, Head};
use super::{Ledger, Location};

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub ledger: Option<Location>,
    /// Exported heads to check, as `QUALIFICATION:SEQ:SHA256`.
    pub heads: Vec<String>,
    pub json: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct QualificationChain {
    pub qualification: String,
    pub rows: usize,
    pub intact: bool,
    pub head: Option<Head>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeadCheck {
    pub head: String,
    /// None when the row still has the exported hash; else what differs.
    pub differs: Option<String>,
}

/// What `ledger verify` found.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    pub ledger: String,
    pub rows: usize,
    /// Every chained row holds and every exported head is found.
    pub intact: bool,
    pub chains: Vec<QualificationChain>,
    /// Each broken row, in seq order.
    pub broken: Vec<Break>,
    /// The seqs of the rows written before the ledger had a chain: not
    /// covered by it.
    pub unchained: Vec<i64>,
    pub heads: Vec<HeadCheck>,
}

/// Check the ledger `opts` names (read only; nothing is written).
pub fn check(opts: &Options) -> Result<Verified> {
    let location = match &opts.ledger {
        Some(l) => l.clone(),
        None => Location::default_location()?,
    };
    let heads = opts
        .heads
        .iter()
        .map(|h| Ok((h.clone(), Head::parse(h)?)))
        .collect::<Result<Vec<_>>>()?;
    let ledger = Ledger::connect_read_only(&location)?;
    let (rows, all) = ledger
        .verify()
        .with_context(|| format!("verifying ledger {location}"))?;
    let chains = all
        .chains
        .iter()
        .map(|(q, c)| QualificationChain {
            qualification: q.clone(),
            rows: rows.iter().filter(|r| &r.entry.qualification == q).count(),
            intact: c.intact,
            head: c.head.clone(),
        })
        .collect();
    let heads: Vec<HeadCheck> = heads
        .into_iter()
        .map(|(text, (q, head))| HeadCheck {
            head: text,
            differs: chain::check_head(&rows, &q, &head),
        })
        .collect();
    let mut broken: Vec<Break> = all.broken().cloned().collect();
    broken.sort_by_key(|b| b.seq);
    Ok(Verified {
        ledger: location.to_string(),
        rows: all.rows,
        intact: all.is_intact() && heads.iter().all(|h| h.differs.is_none()),
        chains,
        broken,
        unchained: all.unchained(),
        heads,
    })
}

/// The text `ledger verify` prints.
pub fn render(v: &Verified) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "ledger {}: {} rows, {} qualifications",
        v.ledger,
        v.rows,
        v.chains.len()
    );
    for c in &v.chains {
        let head = c
            .head
            .as_ref()
            .map(|h| format!(", head {}:{}:{}", c.qualification, h.seq, h.hash))
            .unwrap_or_default();
        let state = if c.intact { "intact" } else { "BROKEN" };
        let rows = if c.rows == 1 { "row" } else { "rows" };
        let _ = writeln!(s, "  {}: {state}, {} {rows}{head}", c.qualification, c.rows);
    }
    for b in &v.broken {
        let _ = writeln!(s, "  broken: {b}");
    }
    if !v.unchained.is_empty() {
        let _ = writeln!(
            s,
            "  seq {}: written before the ledger had a hash chain, not covered by it",
            chain::ranges(&v.unchained)
        );
    }
    for h in &v.heads {
        match &h.differs {
            None => {
                let _ = writeln!(s, "  head {}: found, unchanged", h.head);
            }
            Some(why) => {
                let _ = writeln!(s, "  head {}: DIFFERS: {why}", h.head);
            }
        }
    }
    let verdict = if v.intact {
        "verified: every chained row matches its hash and follows the one before it".to_string()
    } else {
        let heads = v.heads.iter().filter(|h| h.differs.is_some()).count();
        format!(
            "NOT VERIFIED: {} broken row(s), {heads} exported head(s) differ: the ledger was changed outside infergate",
            v.broken.len()
        )
    };
    let _ = writeln!(s, "{verdict}");
    s
}

/// The output and whether the ledger verified.
pub fn run(opts: &Options) -> Result<(String, bool)> {
    let v = check(opts)?;
    let text = if opts.json {
        serde_json::to_string_pretty(&v).context("serializing ledger verify")? + "\n"
    } else {
        render(&v)
    };
    Ok((text, v.intact))
}
