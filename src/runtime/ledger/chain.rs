//! The ledger's hash chain: each row carries the sha256 of its own fields
//! and of the hash of the row before it, so a row edited, deleted,
//! reordered or slipped in outside infergate is named by the next read that
//! checks it (`status`, `decide`, `ledger verify`).
//!
//! One chain per qualification, its rows in `seq` order. `status` and
//! `decide` read one qualification and check exactly the rows they read,
//! and a qualification's head (its last row's seq and hash) is one value a
//! second system can keep (the hook summary, `status --json`) and check
//! later (`ledger verify --head`). Appends are serialized as well (an
//! immediate transaction in SQLite, an advisory lock in PostgreSQL), so a
//! row's predecessor is read in the transaction that writes it.
//!
//! The bytes a row's hash covers ([`row_hash`]): the UTF-8 compact JSON
//! array `["infergate-ledger-chain/1", prev, qualification, seq, at, step,
//! runtime, status, detail]`, as serde_json writes it (no whitespace; seq
//! an integer; runtime a string or null; every other field a string, detail
//! the row's detail column as text, byte for byte). `prev` is the hash of
//! the qualification's previous row, "" for its first.

use std::collections::HashMap;
use std::fmt;

use anyhow::{Result, bail};
use serde::Serialize;

use super::entry::{Entry, Row};

/// The first element of every hashed array: which serialization this is.
pub const FORMAT: &str = "infergate-ledger-chain/1";

/// sha256 (hex) of a row: see the module's description of the bytes.
pub fn row_hash(prev: &str, e: &Entry, detail_text: &str) -> String {
    let fields = serde_json::json!([
        FORMAT,
        prev,
        e.qualification,
        e.seq,
        e.at,
        e.step,
        e.runtime,
        e.status.as_str(),
        detail_text
    ]);
    crate::util::sha256_hex(fields.to_string().as_bytes())
}

/// What an append stores beside entry `e` (its seq drawn).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub detail: String,
    pub prev: String,
    pub hash: String,
}

/// Seal `e` after `last`, the hash of its qualification's last row (None
/// for its first row, or when that row predates the chain).
pub fn seal(e: &Entry, last: Option<String>) -> Sealed {
    let detail = e.detail.to_string();
    let prev = last.unwrap_or_default();
    let hash = row_hash(&prev, e, &detail);
    Sealed { detail, prev, hash }
}

/// A qualification's last chained row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Head {
    pub seq: i64,
    pub hash: String,
}

impl Head {
    /// `QUALIFICATION:SEQ:SHA256`, as `ledger verify --head` takes it.
    pub fn parse(text: &str) -> Result<(String, Head)> {
        let mut parts = text.rsplitn(3, ':');
        let (hash, seq, id) = (parts.next(), parts.next(), parts.next());
        let (Some(hash), Some(seq), Some(id)) = (hash, seq, id) else {
            bail!("--head {text:?}: expected QUALIFICATION:SEQ:SHA256");
        };
        let Ok(seq) = seq.parse::<i64>() else {
            bail!("--head {text:?}: the seq {seq:?} is not a whole number");
        };
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            bail!("--head {text:?}: the hash is not a sha256 (64 hex digits)");
        }
        let hash = hash.to_ascii_lowercase();
        Ok((id.to_string(), Head { seq, hash }))
    }
}

/// What broke at a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Its fields do not match its hash.
    Edited,
    /// The row it follows is not in the ledger.
    Deleted,
    /// It follows a row that comes after it.
    Reordered,
    /// It is not part of the chain the rows around it form.
    Inserted,
    /// No hash, where the chain covers every row.
    Unhashed,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Edited => "edited",
            Kind::Deleted => "deleted",
            Kind::Reordered => "reordered",
            Kind::Inserted => "inserted",
            Kind::Unhashed => "no hash",
        }
    }
}

/// One broken row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Break {
    pub qualification: String,
    pub seq: i64,
    pub step: String,
    pub runtime: Option<String>,
    pub kind: Kind,
    pub why: String,
}

impl fmt::Display for Break {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let runtime = self
            .runtime
            .as_deref()
            .map(|r| format!(" {r}"))
            .unwrap_or_default();
        write!(
            f,
            "qualification {}, seq {} ({}{runtime}): {}: {}",
            self.qualification,
            self.seq,
            self.step,
            self.kind.as_str(),
            self.why
        )
    }
}

/// One qualification's chain as checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Chain {
    /// Its last chained row: what a second system keeps to notice a
    /// rewrite later.
    pub head: Option<Head>,
    /// No row broken.
    pub intact: bool,
    /// Each broken row, in seq order.
    pub broken: Vec<Break>,
    /// The seqs of its rows that predate the chain: not covered.
    pub unchained: Vec<i64>,
}

/// Check one qualification's `rows` (in seq order). Rows without a hash
/// at or below `unchained_through` predate the chain.
pub fn verify(rows: &[Row], unchained_through: i64) -> Chain {
    check(&rows.iter().collect::<Vec<_>>(), unchained_through)
}

fn check(rows: &[&Row], through: i64) -> Chain {
    let by_hash: HashMap<&str, usize> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((r.hash.as_deref()?, i)))
        .collect();
    let mut chain = Chain::default();
    // The hash the next row must follow; None after a row whose hash was
    // removed (its follower's link cannot be checked).
    let mut expected: Option<&str> = Some("");
    let mut last: Option<usize> = None;
    for (i, r) in rows.iter().enumerate() {
        let e = &r.entry;
        let Some(hash) = r.hash.as_deref() else {
            if e.seq <= through {
                chain.unchained.push(e.seq);
            } else {
                let why = format!(
                    "it has no hash, though the chain covers every row after seq {through}: its hash was removed, or it was written outside infergate"
                );
                chain.broken.push(broke(r, Kind::Unhashed, why));
                expected = None;
            }
            continue;
        };
        match r.prev.as_deref() {
            None => chain
                .broken
                .push(broke(r, Kind::Edited, "its prev is missing".into())),
            Some(p) if row_hash(p, e, &r.detail_text) != hash => chain.broken.push(broke(
                r,
                Kind::Edited,
                "its contents do not match its hash".into(),
            )),
            Some(_) => {}
        }
        if let (Some(p), Some(want)) = (r.prev.as_deref(), expected)
            && p != want
        {
            link_break(rows, i, p, by_hash.get(p).copied(), last, &mut chain.broken);
        }
        expected = Some(hash);
        last = Some(i);
        chain.head = Some(Head {
            seq: e.seq,
            hash: hash.to_string(),
        });
    }
    chain.broken.sort_by_key(|b| b.seq);
    chain.intact = chain.broken.is_empty();
    chain
}

/// Row `i` follows `p`, not the row before it: say what that means. `at`
/// is the index of the row whose hash `p` is, `last` the row before `i`
/// in the chain.
fn link_break(
    rows: &[&Row],
    i: usize,
    p: &str,
    at: Option<usize>,
    last: Option<usize>,
    broken: &mut Vec<Break>,
) {
    let seq = |k: usize| rows[k].entry.seq;
    match at {
        Some(j) if j > i => broken.push(broke(
            rows[i],
            Kind::Reordered,
            format!(
                "it follows seq {} in the chain, which comes after it",
                seq(j)
            ),
        )),
        Some(j) => {
            for r in &rows[j + 1..i] {
                let marked = broken.iter().any(|b| b.seq == r.entry.seq);
                if r.hash.is_some() && !marked {
                    let why = format!(
                        "it is not in the chain: seq {} follows seq {} directly",
                        seq(i),
                        seq(j)
                    );
                    broken.push(broke(r, Kind::Inserted, why));
                }
            }
        }
        None if p.is_empty() => {
            let why = format!(
                "it starts a chain of its own, though seq {} comes before it: it was written outside infergate",
                last.map_or(0, seq)
            );
            broken.push(broke(rows[i], Kind::Inserted, why));
        }
        None => {
            let why = match last {
                Some(k) => format!(
                    "the row it follows is missing: deleted between seq {} and seq {}",
                    seq(k),
                    seq(i)
                ),
                None => format!(
                    "the row it follows is missing: rows of its qualification before seq {} were deleted",
                    seq(i)
                ),
            };
            broken.push(broke(rows[i], Kind::Deleted, why));
        }
    }
}

fn broke(r: &Row, kind: Kind, why: String) -> Break {
    Break {
        qualification: r.entry.qualification.clone(),
        seq: r.entry.seq,
        step: r.entry.step.clone(),
        runtime: r.entry.runtime.clone(),
        kind,
        why,
    }
}

/// A whole ledger as checked: each qualification's chain, in the order
/// qualifications first appear.
#[derive(Debug, Clone, Default)]
pub struct LedgerCheck {
    pub rows: usize,
    pub chains: Vec<(String, Chain)>,
}

impl LedgerCheck {
    pub fn broken(&self) -> impl Iterator<Item = &Break> {
        self.chains.iter().flat_map(|(_, c)| &c.broken)
    }

    pub fn is_intact(&self) -> bool {
        self.chains.iter().all(|(_, c)| c.intact)
    }

    /// The seqs of every row that predates the chain, ascending.
    pub fn unchained(&self) -> Vec<i64> {
        let mut all: Vec<i64> = self
            .chains
            .iter()
            .flat_map(|(_, c)| c.unchained.iter().copied())
            .collect();
        all.sort_unstable();
        all
    }
}

/// Check every qualification of `rows` (a whole ledger, in seq order).
pub fn verify_all(rows: &[Row], unchained_through: i64) -> LedgerCheck {
    let mut order: Vec<&str> = Vec::new();
    let mut by_id: HashMap<&str, Vec<&Row>> = HashMap::new();
    for r in rows {
        let id = r.entry.qualification.as_str();
        by_id
            .entry(id)
            .or_insert_with(|| {
                order.push(id);
                Vec::new()
            })
            .push(r);
    }
    let chains = order
        .into_iter()
        .map(|id| (id.to_string(), check(&by_id[id], unchained_through)))
        .collect();
    LedgerCheck {
        rows: rows.len(),
        chains,
    }
}

/// Whether `qualification`'s row `head.seq` in `rows` still has the hash
/// exported as `head`: None when it has, else what differs. An intact
/// chain whose row still has the exported hash holds every row up to it
/// as it was when the head was exported.
pub fn check_head(rows: &[Row], qualification: &str, head: &Head) -> Option<String> {
    let at = format!("qualification {qualification}, seq {}", head.seq);
    let Some(r) = rows.iter().find(|r| r.entry.seq == head.seq) else {
        return Some(format!(
            "{at}: no such row: it was deleted since the head was exported"
        ));
    };
    if r.entry.qualification != qualification {
        return Some(format!(
            "{at}: seq {} is a row of qualification {}: the ledger was rewritten since the head was exported",
            head.seq, r.entry.qualification
        ));
    }
    match r.hash.as_deref() {
        Some(h) if h == head.hash => None,
        found => Some(format!(
            "{at}: its hash is {}, the exported head is {}: it, or a row before it, was rewritten since the head was exported",
            found.unwrap_or("missing"),
            head.hash
        )),
    }
}

/// `seqs` (ascending) as ranges: "1–4, 7, 9–10".
pub fn ranges(seqs: &[i64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < seqs.len() {
        let mut j = i;
        while j + 1 < seqs.len() && seqs[j + 1] == seqs[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            seqs[i].to_string()
        } else {
            format!("{}–{}", seqs[i], seqs[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ledger::Status;
    use serde_json::json;

    /// Rows as appends make them: (seq, qualification, step, detail).
    fn sealed(rows: &[(i64, &str, &str, serde_json::Value)]) -> Vec<Row> {
        let mut last: HashMap<String, String> = HashMap::new();
        rows.iter()
            .map(|(seq, q, step, detail)| {
                let entry = Entry {
                    seq: *seq,
                    qualification: q.to_string(),
                    at: format!("2026-12-07T08:00:{seq:02}Z"),
                    step: step.to_string(),
                    runtime: None,
                    status: Status::Ok,
                    detail: detail.clone(),
                };
                let s = seal(&entry, last.get(*q).cloned());
                last.insert(q.to_string(), s.hash.clone());
                Row {
                    entry,
                    detail_text: s.detail,
                    prev: Some(s.prev),
                    hash: Some(s.hash),
                }
            })
            .collect()
    }

    fn qualification() -> Vec<Row> {
        sealed(&[
            (1, "q", "plan", json!({})),
            (2, "q", "done", json!({"verdict": "qualified"})),
            (
                3,
                "q",
                "decision",
                json!({"action": "retain_baseline", "who": "ana"}),
            ),
            (4, "q", "readmit", json!({})),
            (5, "q", "serving", json!({})),
        ])
    }

    fn kinds(c: &Chain) -> Vec<(i64, Kind)> {
        c.broken.iter().map(|b| (b.seq, b.kind)).collect()
    }

    #[test]
    fn the_bytes_hashed_are_the_documented_array() {
        // Computed apart, with Python's json.dumps(separators=(",", ":"),
        // ensure_ascii=False) and hashlib.sha256.
        let mut e = Entry {
            seq: 7,
            qualification: "q1".into(),
            at: "2026-12-07T08:00:00Z".into(),
            step: "decision".into(),
            runtime: None,
            status: Status::Ok,
            detail: json!({"who": "ana", "action": "retain_baseline"}),
        };
        let first = seal(&e, None);
        assert_eq!(first.detail, r#"{"action":"retain_baseline","who":"ana"}"#);
        assert_eq!(first.prev, "");
        assert_eq!(
            first.hash,
            "de1b1c28cd3a34c2cd9609e95c7b434a99c7129e8a6cf8981cf46430d69d0536"
        );
        e.seq = 8;
        e.qualification = "qé\n\"x".into();
        e.runtime = Some("baseline".into());
        assert_eq!(
            seal(&e, Some(first.hash)).hash,
            "89dc73b25a5881de454dad348c537b7e57a67745dc14f897531e301078bad563"
        );
    }

    #[test]
    fn an_untouched_chain_holds_and_its_head_is_its_last_row() {
        let rows = qualification();
        let c = verify(&rows, 0);
        assert!(
            c.intact && c.broken.is_empty() && c.unchained.is_empty(),
            "{c:?}"
        );
        assert_eq!(c.head.as_ref().map(|h| h.seq), Some(5));
        assert_eq!(c.head.unwrap().hash, rows[4].hash.clone().unwrap());
    }

    #[test]
    fn an_edited_row_is_named_alone() {
        for edit in [
            |r: &mut Row| r.detail_text = r.detail_text.replace("retain_baseline", "promote"),
            |r: &mut Row| r.entry.step = "note".into(),
            |r: &mut Row| r.entry.at = "2026-12-07T09:00:00Z".into(),
            |r: &mut Row| r.entry.runtime = Some("candidate".into()),
            |r: &mut Row| r.entry.status = Status::Failed,
            |r: &mut Row| r.prev = None,
        ] {
            let mut rows = qualification();
            edit(&mut rows[2]);
            let c = verify(&rows, 0);
            assert_eq!(kinds(&c), [(3, Kind::Edited)], "{c:?}");
            assert!(!c.intact);
        }
        let mut rows = qualification();
        rows[2].detail_text = rows[2].detail_text.replace("ana", "mallory");
        let b = &verify(&rows, 0).broken[0];
        assert_eq!(
            b.to_string(),
            "qualification q, seq 3 (decision): edited: its contents do not match its hash"
        );
    }

    #[test]
    fn a_deleted_row_is_named_at_the_row_that_followed_it() {
        let mut rows = qualification();
        rows.remove(3);
        let c = verify(&rows, 0);
        assert_eq!(kinds(&c), [(5, Kind::Deleted)], "{c:?}");
        assert!(
            c.broken[0].why.contains("deleted between seq 3 and seq 5"),
            "{c:?}"
        );
        // Two in a row, then the first.
        let mut rows = qualification();
        rows.drain(1..3);
        assert_eq!(kinds(&verify(&rows, 0)), [(4, Kind::Deleted)]);
        let mut rows = qualification();
        rows.remove(0);
        let c = verify(&rows, 0);
        assert_eq!(kinds(&c), [(2, Kind::Deleted)], "{c:?}");
        assert!(
            c.broken[0].why.contains("before seq 2 were deleted"),
            "{c:?}"
        );
    }

    #[test]
    fn reordered_and_inserted_rows_are_named() {
        // Seqs 3 and 4 swapped: each is edited (its seq is hashed), and
        // the one now first follows a row after it.
        let mut rows = qualification();
        rows[2].entry.seq = 4;
        rows[3].entry.seq = 3;
        rows.swap(2, 3);
        let c = verify(&rows, 0);
        assert!(kinds(&c).contains(&(3, Kind::Reordered)), "{c:?}");
        assert!(kinds(&c).contains(&(3, Kind::Edited)), "{c:?}");
        // A forged row with a valid hash after seq 20: seq 30 skips it.
        let mut rows = sealed(&[
            (10, "q", "plan", json!({})),
            (20, "q", "done", json!({"verdict": "not_qualified"})),
            (30, "q", "serving", json!({})),
        ]);
        let forged = Entry {
            seq: 25,
            step: "decision".into(),
            detail: json!({"action": "promote"}),
            ..rows[1].entry.clone()
        };
        let s = seal(&forged, rows[1].hash.clone());
        let row = Row {
            entry: forged,
            detail_text: s.detail,
            prev: Some(s.prev),
            hash: Some(s.hash),
        };
        rows.insert(2, row);
        assert_eq!(kinds(&verify(&rows, 0)), [(25, Kind::Inserted)]);
        // A row starting a chain of its own after others.
        let mut rows = qualification();
        rows.extend(sealed(&[(9, "q", "decision", json!({}))]));
        assert_eq!(kinds(&verify(&rows, 0)), [(9, Kind::Inserted)]);
    }

    #[test]
    fn rows_before_the_chain_are_not_covered_and_a_removed_hash_is_named() {
        let mut rows = qualification();
        for r in &mut rows[..2] {
            r.hash = None;
            r.prev = None;
        }
        // Seq 3 was the chain's first row when 1 and 2 predate it.
        let mut after = sealed(&[
            (
                3,
                "q",
                "decision",
                json!({"action": "retain_baseline", "who": "ana"}),
            ),
            (4, "q", "readmit", json!({})),
            (5, "q", "serving", json!({})),
        ]);
        rows.truncate(2);
        rows.append(&mut after);
        let c = verify(&rows, 2);
        assert!(c.intact, "{c:?}");
        assert_eq!(c.unchained, [1, 2]);
        // The same rows when the chain covers every row: 1 and 2 lost theirs.
        let c = verify(&rows, 0);
        assert_eq!(
            kinds(&c),
            [(1, Kind::Unhashed), (2, Kind::Unhashed)],
            "{c:?}"
        );
        // A hash removed mid-chain names that row only.
        let mut rows = qualification();
        rows[2].hash = None;
        assert_eq!(kinds(&verify(&rows, 0)), [(3, Kind::Unhashed)]);
    }

    #[test]
    fn a_ledger_is_checked_per_qualification() {
        let mut rows = sealed(&[
            (1, "a", "plan", json!({})),
            (2, "b", "plan", json!({})),
            (3, "a", "done", json!({})),
            (4, "b", "done", json!({})),
        ]);
        let all = verify_all(&rows, 0);
        assert!(all.is_intact() && all.rows == 4);
        assert_eq!(
            all.chains
                .iter()
                .map(|(q, c)| (q.as_str(), c.head.as_ref().unwrap().seq))
                .collect::<Vec<_>>(),
            [("a", 3), ("b", 4)]
        );
        // Another qualification's rows between two of a's are no gap.
        rows.remove(1);
        let all = verify_all(&rows, 0);
        assert_eq!(
            all.broken()
                .map(|b| (b.qualification.as_str(), b.seq))
                .collect::<Vec<_>>(),
            [("b", 4)]
        );
    }

    #[test]
    fn an_exported_head_is_found_or_what_differs_said() {
        let rows = qualification();
        let head = verify(&rows, 0).head.unwrap();
        assert_eq!(check_head(&rows, "q", &head), None);
        let text = format!("q:{}:{}", head.seq, head.hash.to_uppercase());
        assert_eq!(Head::parse(&text).unwrap(), ("q".to_string(), head.clone()));
        let other = Head {
            seq: 4,
            ..head.clone()
        };
        assert!(
            check_head(&rows, "q", &other)
                .unwrap()
                .contains("rewritten")
        );
        assert!(
            check_head(&rows[..4], "q", &head)
                .unwrap()
                .contains("deleted")
        );
        assert!(
            check_head(&rows, "r", &head)
                .unwrap()
                .contains("a row of qualification q")
        );
        for bad in ["q:5", "q:x:ab", &format!("q:5:{}", "g".repeat(64))] {
            assert!(Head::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seqs_are_shown_as_ranges() {
        assert_eq!(ranges(&[1, 2, 3, 4, 7, 9, 10]), "1–4, 7, 9–10");
        assert_eq!(ranges(&[]), "");
    }
}
