//! What the ledger says is already done: finished blocks and sides, the
//! adaptive rounds looked at, the measuring's cost. Resuming reads these.

use crate::measure::interleave::{Block, CellLayout, adaptive_requests};
use crate::measure::runner::Probes;
use crate::runtime::ledger::{Entry, Status};

pub(super) fn ok_entry<'a>(
    entries: &'a [Entry],
    step: &str,
    label: &str,
) -> impl Iterator<Item = &'a Entry> {
    entries.iter().filter(move |e| {
        e.step == step && e.status == Status::Ok && e.runtime.as_deref() == Some(label)
    })
}

pub(super) fn side_finished(entries: &[Entry], label: &str) -> bool {
    ok_entry(entries, "run", label).any(|e| e.detail_str("schedule") == Some("interleaved"))
}

pub(super) fn block_finished(entries: &[Entry], b: &Block) -> bool {
    ok_entry(entries, "block", b.side).any(|e| {
        e.detail_str("cell") == Some(b.cell.as_str())
            && e.detail.get("block").and_then(|k| k.as_u64()) == Some(b.k as u64)
    })
}

/// The last adaptive round the ledger records as looked at.
pub(super) fn last_round(entries: &[Entry]) -> Option<&Entry> {
    entries
        .iter()
        .rev()
        .find(|e| e.step == "round" && e.status == Status::Ok)
}

/// Adaptive rounds finished (looked at), per the ledger.
pub(super) fn rounds_done(entries: &[Entry]) -> usize {
    entries
        .iter()
        .filter(|e| e.step == "round" && e.status == Status::Ok)
        .filter_map(|e| e.detail.get("round").and_then(|r| r.as_u64()))
        .max()
        .unwrap_or(0) as usize
}

/// A cell whose requests per side at the last recorded round (round
/// `done`) differ from what that many rounds hold now: the rounds were cut
/// by another infergate (one whose rounds held 8 requests per side for
/// blocks of one, where these hold 2), and continuing would pair this run's
/// looks with the wrong requests. (cell, recorded, now).
pub(super) fn round_size_mismatch<'a>(
    entries: &[Entry],
    cells: &'a [CellLayout],
    done: usize,
) -> Option<(&'a str, u64, usize)> {
    let recorded = last_round(entries)?.detail.get("requests_per_side")?;
    cells.iter().find_map(|c| {
        let had = recorded.get(&c.name)?.as_u64()?;
        let now = adaptive_requests(c, done);
        (had != now as u64).then_some((c.name.as_str(), had, now))
    })
}

/// The round entries' keys of the looks' fractions: both sides', and the
/// pass side's own when it spends by its own information.
pub(super) const FRACTION: &str = "information_fraction";
pub(super) const PASS_FRACTION: &str = "pass_information_fraction";

/// Every adaptive round's information fraction, in round order (the
/// looks' history); None when a round recorded none or none was looked at.
pub(super) fn fractions_looked(entries: &[Entry]) -> Option<Vec<f64>> {
    fractions_looked_by(entries, FRACTION)
}

/// [`fractions_looked`] of the round entries' `key`.
pub(super) fn fractions_looked_by(entries: &[Entry], key: &str) -> Option<Vec<f64>> {
    let mut rounds: Vec<(u64, Option<f64>)> = entries
        .iter()
        .filter(|e| e.step == "round" && e.status == Status::Ok)
        .map(|e| {
            (
                e.detail.get("round").and_then(|r| r.as_u64()).unwrap_or(0),
                e.detail.get(key).and_then(|f| f.as_f64()),
            )
        })
        .collect();
    rounds.sort_by_key(|r| r.0);
    rounds.dedup_by_key(|r| r.0);
    let history: Option<Vec<f64>> = rounds.into_iter().map(|r| r.1).collect();
    history.filter(|h| !h.is_empty())
}

/// The cost of the measuring, as the last `interleaved` entry records it.
pub fn spent_in(entries: &[Entry]) -> Option<String> {
    entries
        .iter()
        .rev()
        .find(|e| e.step == "interleaved" && e.status == Status::Ok)
        .and_then(|e| e.detail_str("spent").map(str::to_string))
}

/// Warmup requests `label` was sent, per its started blocks (each records
/// the warmup it ran first): a cell's warmup runs once per runtime lifetime,
/// so a resumed run that started the runtimes again warmed up again.
pub(super) fn warmups_sent(entries: &[Entry], label: &str) -> usize {
    entries
        .iter()
        .filter(|e| e.step == "block" && e.status == Status::Started)
        .filter(|e| e.runtime.as_deref() == Some(label))
        .filter_map(|e| e.detail.get("warmup").and_then(|w| w.as_u64()))
        .sum::<u64>() as usize
}

/// What `label` sent besides its measured and warmup requests, per its
/// finished blocks (each records its run's probes).
pub(super) fn probes_sent(entries: &[Entry], label: &str) -> Probes {
    let count = |e: &Entry, key: &str| {
        e.detail
            .get("probes")
            .and_then(|p| p.get(key))
            .and_then(|n| n.as_u64())
            .unwrap_or(0) as usize
    };
    ok_entry(entries, "block", label).fold(Probes::default(), |sum, e| Probes {
        discovery: sum.discovery + count(e, "discovery"),
        prompt_sizing: sum.prompt_sizing + count(e, "prompt_sizing"),
        tokenize: sum.tokenize + count(e, "tokenize"),
        metrics: sum.metrics + count(e, "metrics"),
    })
}

/// What `label`'s turnover check sent (its requests, reference answers,
/// embeddings and probes), as its finished `run` entries record it.
pub(super) fn turnover_sent(entries: &[Entry], label: &str) -> usize {
    ok_entry(entries, "run", label)
        .filter(|e| e.detail_str("schedule") == Some("interleaved"))
        .filter_map(|e| e.detail.get("turnover_requests").and_then(|n| n.as_u64()))
        .sum::<u64>() as usize
}

/// What one side was sent, in words: the measured requests, and beside
/// them the warmups, the probes and the turnover check's requests, so a
/// budget of measured requests is never read as all that was sent.
pub(super) fn spent_words(
    measured: usize,
    warmups: usize,
    probes: Probes,
    turnover: usize,
) -> String {
    let mut beside = vec![format!("+{warmups} warmup")];
    let kinds = [
        (probes.discovery, "discovery"),
        (probes.prompt_sizing, "prompt sizing"),
        (probes.tokenize, "/tokenize"),
        (probes.metrics, "/metrics"),
    ];
    let named: Vec<String> = kinds
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    beside.push(match named.is_empty() {
        true => "+0 probes".to_string(),
        false => format!("+{} probes: {}", probes.total(), named.join(", ")),
    });
    if turnover > 0 {
        beside.push(format!("+{turnover} turnover"));
    }
    format!(
        "{measured} measured requests per side ({})",
        beside.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round(k: u64, per_cell: serde_json::Value) -> Entry {
        Entry {
            seq: k as i64,
            qualification: "q".into(),
            at: String::new(),
            step: "round".into(),
            runtime: None,
            status: Status::Ok,
            detail: json!({"round": k, "requests_per_side": per_cell}),
        }
    }

    #[test]
    fn what_was_sent_names_warmups_and_probes_beside_the_measured() {
        let probes = Probes {
            discovery: 4,
            prompt_sizing: 3,
            tokenize: 2,
            metrics: 0,
        };
        assert_eq!(
            spent_words(256, 64, probes, 0),
            "256 measured requests per side (+64 warmup; +9 probes: 4 discovery, 3 prompt sizing, 2 /tokenize)"
        );
        let scraped = Probes {
            metrics: 6,
            ..probes
        };
        assert_eq!(
            spent_words(8, 0, scraped, 0),
            "8 measured requests per side (+0 warmup; +15 probes: 4 discovery, 3 prompt sizing, 2 /tokenize, 6 /metrics)"
        );
        assert_eq!(
            spent_words(16, 2, Probes::default(), 40),
            "16 measured requests per side (+2 warmup; +0 probes; +40 turnover)"
        );
        // Summed over a side's finished blocks, each with its run's probes.
        let block = |label: &str, probes: serde_json::Value| Entry {
            seq: 0,
            qualification: "q".into(),
            at: String::new(),
            step: "block".into(),
            runtime: Some(label.into()),
            status: Status::Ok,
            detail: json!({"probes": probes}),
        };
        let entries = [
            block("baseline", json!(probes)),
            block(
                "baseline",
                json!({"discovery": 0, "prompt_sizing": 0, "tokenize": 5, "metrics": 2}),
            ),
            block("candidate", json!(probes)),
        ];
        let sum = probes_sent(&entries, "baseline");
        assert_eq!(
            (sum.discovery, sum.prompt_sizing, sum.tokenize, sum.metrics),
            (4, 3, 7, 2)
        );
        assert_eq!(probes_sent(&entries[..0], "baseline"), Probes::default());
        // The turnover's requests, from the side's finished interleaved run.
        let run = |schedule: &str, n: u64| Entry {
            step: "run".into(),
            detail: json!({"schedule": schedule, "turnover_requests": n}),
            ..block("baseline", json!({}))
        };
        let runs = [run("interleaved", 80), run("passes", 7)];
        assert_eq!(turnover_sent(&runs, "baseline"), 80);
        assert_eq!(turnover_sent(&runs, "candidate"), 0);
    }

    #[test]
    fn a_ledger_cut_in_other_rounds_is_named_by_its_cell() {
        let cell = |name: &str, window| CellLayout {
            name: name.into(),
            window,
            requests: 16,
        };
        // Rounds of a pair of blocks: 2 requests a round in blocks of one, 8 in blocks of 4.
        let cells = [cell("c1", 1), cell("c4", 4)];
        let entries = [
            round(2, json!({"c1": 4, "c4": 16})),
            round(3, json!({"c1": 6, "c4": 24})),
        ];
        assert_eq!(round_size_mismatch(&entries, &cells, 3), None);
        // Cut by an infergate whose rounds held 8 requests in blocks of one.
        let older = [round(3, json!({"c1": 24, "c4": 24}))];
        assert_eq!(round_size_mismatch(&older, &cells, 3), Some(("c1", 24, 6)));
        // No round looked at yet: nothing to hold it to.
        assert_eq!(round_size_mismatch(&[], &cells, 3), None);
    }
}
