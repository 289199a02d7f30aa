//! What the rest of an adaptive run's budget can still decide, pair by
//! gating (cell, metric) pair: in words for the round's progress line, as
//! numbers for its ledger entry. A pair's evidence part says how many
//! requests per side would decide it if its point change is the truth
//! (`requests_to_resolve`), and its point says which way (beyond the
//! margin: fail; within it: pass); the budget says how many requests per
//! side each cell will have when it is spent.

use serde_json::{Value, json};

use crate::report::Report;
use crate::stats::GateOutcome;

/// One gating pair at a look, as its evidence part and metric give it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PairAtLook {
    pub cell: String,
    /// The policy's name of the metric (`ttft_p50_ms`).
    pub metric: String,
    /// The metric in short words (`TTFT`, `decode p90`).
    pub words: String,
    pub outcome: GateOutcome,
    /// The point change lies beyond the margin (more requests would fail
    /// the pair) or not (they would pass it); None when the pair has no
    /// bound at this look.
    pub beyond_margin: Option<bool>,
    pub requests_per_side: Option<usize>,
    pub requests_to_resolve: Option<usize>,
    pub design_requests_per_side: Option<usize>,
}

/// What the rest of the budget can do for one pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reach {
    Decided,
    CanFail,
    CanPass,
    /// More requests per side than the budget holds would decide it
    /// (`Some`), or no number of requests would (`None`).
    Cannot(Option<usize>),
    /// No bound at this look (the look's share of the error is too small,
    /// the cell is not eligible, a side has no values): nothing to scale from.
    NotBounded,
}

impl Reach {
    fn as_str(self) -> &'static str {
        match self {
            Reach::Decided => "decided",
            Reach::CanFail => "can_fail",
            Reach::CanPass => "can_pass",
            Reach::Cannot(_) => "cannot",
            Reach::NotBounded => "not_bounded",
        }
    }
}

/// What `budget` requests per side (the pair's cell when the budget is
/// spent) can do for `p`.
pub(super) fn reach(p: &PairAtLook, budget: usize) -> Reach {
    if p.outcome != GateOutcome::Inconclusive {
        return Reach::Decided;
    }
    match (p.beyond_margin, p.requests_to_resolve) {
        (None, _) => Reach::NotBounded,
        (Some(_), Some(n)) if n > budget => Reach::Cannot(Some(n)),
        (Some(true), Some(_)) => Reach::CanFail,
        (Some(false), Some(_)) => Reach::CanPass,
        (Some(_), None) => Reach::Cannot(None),
    }
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Items of several cells: commas between them when one already holds an
/// "and" ("TTFT and e2e at c1, decode at c4"), else [`and_list`].
fn join_items(items: &[String]) -> String {
    if items.len() > 1 && items.iter().any(|i| i.contains(" and ")) {
        items.join(", ")
    } else {
        and_list(items)
    }
}

/// The undecided pairs in words, grouped by what the budget can do for
/// them: "decode at c4 can fail within the budget; TTFT there cannot be
/// decided within it (about 1466 requests per side would)". Each pair
/// comes with the requests per side its cell has when the budget is
/// spent. Every pair decided: says so; no pairs: empty.
pub(super) fn budget_words(pairs: &[(PairAtLook, usize)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let reached: Vec<(&PairAtLook, Reach)> = pairs.iter().map(|(p, b)| (p, reach(p, *b))).collect();
    if reached.iter().all(|(_, r)| *r == Reach::Decided) {
        return "every gating pair is decided".into();
    }
    // The budget is named once, then "it".
    let mut budget = Some("the budget");
    let mut last_cell: Option<&str> = None;
    let mut clauses = Vec::new();
    // Each group's words, in the order the line says them.
    let groups = [
        " can fail within ",
        " can pass within ",
        " cannot be decided within ",
        ": no bound at this look yet",
    ];
    for (g, verb) in groups.into_iter().enumerate() {
        let members: Vec<(&PairAtLook, Reach)> = reached
            .iter()
            .copied()
            .filter(|(_, r)| group(*r) == Some(g))
            .collect();
        if members.is_empty() {
            continue;
        }
        // One pair the budget cannot decide: its number after the verb.
        let alone = match members[..] {
            [(_, r @ Reach::Cannot(_))] => need(r),
            _ => String::new(),
        };
        let items = cell_items(&members, alone.is_empty(), &mut last_cell);
        let object = if verb.ends_with(' ') {
            budget.take().unwrap_or("it")
        } else {
            ""
        };
        clauses.push(format!("{}{verb}{object}{alone}", join_items(&items)));
    }
    clauses.join("; ")
}

/// The group of `budget_words` a reach is said in; none for a decided pair.
fn group(r: Reach) -> Option<usize> {
    match r {
        Reach::CanFail => Some(0),
        Reach::CanPass => Some(1),
        Reach::Cannot(_) => Some(2),
        Reach::NotBounded => Some(3),
        Reach::Decided => None,
    }
}

/// One group's pairs as items: pairs of one cell side by side share its
/// name ("TTFT and e2e at c1"), "there" when it is the cell just named;
/// a pair the budget cannot decide carries its own number when `numbered`.
fn cell_items<'a>(
    members: &[(&'a PairAtLook, Reach)],
    numbered: bool,
    last_cell: &mut Option<&'a str>,
) -> Vec<String> {
    let mut items = Vec::new();
    let mut i = 0;
    while i < members.len() {
        let (first, r) = members[i];
        let cell = first.cell.as_str();
        let mut n = 1;
        while !matches!(r, Reach::Cannot(_))
            && members.get(i + n).is_some_and(|(p, _)| p.cell == cell)
        {
            n += 1;
        }
        let names: Vec<String> = members[i..i + n]
            .iter()
            .map(|(p, _)| p.words.clone())
            .collect();
        let place = if *last_cell == Some(cell) {
            "there".to_string()
        } else {
            format!("at {cell}")
        };
        let number = if numbered { need(r) } else { String::new() };
        items.push(format!("{} {place}{number}", and_list(&names)));
        *last_cell = Some(cell);
        i += n;
    }
    items
}

/// What would decide a pair the budget cannot: " (about N requests per
/// side would)"; nothing for the other reaches.
fn need(r: Reach) -> String {
    match r {
        Reach::Cannot(Some(n)) => format!(" (about {n} requests per side would)"),
        Reach::Cannot(None) => " (no number of requests would)".into(),
        _ => String::new(),
    }
}

/// A metric in short words: its sample's (`TTFT`, `e2e`, `decode`), with
/// its quantile when not the median (`e2e p90`, from the name's `_p90`).
fn metric_words(name: &str, sample: Option<&str>) -> String {
    let word = match sample.unwrap_or(name) {
        "ttft_ms" => "TTFT",
        "ttfo_ms" => "TTFO",
        "e2e_ms" => "e2e",
        "decode_tok_s" => "decode",
        "prefill_tok_s" => "prefill",
        "tpot_ms" => "TPOT",
        "itl_ms" => "ITL",
        "queue_ms" => "queue",
        other => other,
    };
    let quantile = name.split('_').skip(1).find(|p| {
        p.strip_prefix('p')
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    });
    match quantile {
        Some(q) if q != "p50" => format!("{word} {q}"),
        _ => word.to_string(),
    }
}

/// Every gating pair of a look's report: its evidence part, and the side
/// of the margin its point lies on when the part has a bound.
pub(super) fn pairs_at_look(report: &Report) -> Vec<PairAtLook> {
    let Some(gate) = report
        .gates
        .as_ref()
        .and_then(|g| g.performance_evidence.as_ref())
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (cell, c) in report.cells.iter() {
        for (metric, m) in c.metrics.iter() {
            let subject = format!("cells.{cell}.metrics.{metric}");
            let Some(part) = gate.parts.iter().find(|p| p.subject == subject) else {
                continue;
            };
            // A part with the requests it rests on has its bounds (an eligible cell's evidence).
            let beyond_margin = part.requests_per_side.and(
                m.evidence
                    .as_ref()
                    .map(|e| e.worse_change_percent > e.margin_percent),
            );
            out.push(PairAtLook {
                cell: cell.to_string(),
                metric: metric.to_string(),
                words: metric_words(metric, m.sample.as_deref()),
                outcome: part.outcome,
                beyond_margin,
                requests_per_side: part.requests_per_side,
                requests_to_resolve: part.requests_to_resolve,
                design_requests_per_side: part.design_requests_per_side,
            });
        }
    }
    out
}

/// The pairs as the round's ledger entry keeps them: the evidence's
/// numbers, the budget's requests per side, and what it can do.
pub(super) fn ledger_pairs(pairs: &[(PairAtLook, usize)]) -> Value {
    pairs
        .iter()
        .map(|(p, budget)| {
            json!({
                "cell": p.cell,
                "metric": p.metric,
                "outcome": p.outcome.as_str(),
                "point": p.beyond_margin.map(|b| if b { "beyond_margin" } else { "within_margin" }),
                "requests_per_side": p.requests_per_side,
                "requests_to_resolve": p.requests_to_resolve,
                "design_requests_per_side": p.design_requests_per_side,
                "budget_requests_per_side": budget,
                "within_budget": reach(p, *budget).as_str(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cell: &str, words: &str, beyond: Option<bool>, need: Option<usize>) -> PairAtLook {
        PairAtLook {
            cell: cell.into(),
            metric: words.to_lowercase(),
            words: words.into(),
            outcome: GateOutcome::Inconclusive,
            beyond_margin: beyond,
            requests_per_side: beyond.map(|_| 8),
            requests_to_resolve: need,
            design_requests_per_side: need.map(|n| n * 2),
        }
    }

    fn decided(cell: &str, words: &str, outcome: GateOutcome) -> PairAtLook {
        PairAtLook {
            outcome,
            ..pair(cell, words, Some(false), None)
        }
    }

    #[test]
    fn undecided_pairs_are_grouped_by_what_the_budget_can_do() {
        let pairs = [
            (pair("concurrent-512", "decode", Some(true), Some(30)), 48),
            (pair("concurrent-512", "TTFT", Some(false), Some(1466)), 48),
            (decided("concurrent-512", "e2e", GateOutcome::Pass), 48),
        ];
        assert_eq!(
            budget_words(&pairs),
            "decode at concurrent-512 can fail within the budget; TTFT there cannot be decided within it (about 1466 requests per side would)"
        );
    }

    #[test]
    fn pairs_of_one_cell_share_its_name_and_each_group_says_it_once() {
        let pairs = [
            (pair("c1", "TTFT", Some(false), Some(12)), 20),
            (pair("c1", "e2e", Some(false), Some(20)), 20),
            (pair("c4", "decode", Some(false), Some(40)), 80),
            (pair("c4", "TTFT", Some(true), Some(16)), 80),
            (pair("c4", "e2e", Some(true), None), 80),
            (pair("c1", "decode", None, None), 20),
        ];
        assert_eq!(
            budget_words(&pairs),
            "TTFT at c4 can fail within the budget; TTFT and e2e at c1, decode at c4 can pass within it; e2e there cannot be decided within it (no number of requests would); decode at c1: no bound at this look yet"
        );
    }

    #[test]
    fn a_spent_budget_decides_nothing_more() {
        // A pair that needs more requests than its cell will have: cannot.
        let pairs = [
            (pair("c4", "decode", Some(true), Some(33)), 32),
            (pair("c4", "TTFT", Some(false), Some(32)), 32),
            (pair("c1", "TTFT", Some(false), Some(3)), 2),
        ];
        assert_eq!(reach(&pairs[0].0, 32), Reach::Cannot(Some(33)));
        assert_eq!(reach(&pairs[1].0, 32), Reach::CanPass);
        assert_eq!(
            budget_words(&pairs),
            "TTFT at c4 can pass within the budget; decode there (about 33 requests per side would) and TTFT at c1 (about 3 requests per side would) cannot be decided within it"
        );
    }

    #[test]
    fn everything_decided_says_so_and_nothing_says_nothing() {
        let pairs = [
            (decided("c1", "TTFT", GateOutcome::Pass), 20),
            (decided("c4", "decode", GateOutcome::Fail), 80),
        ];
        assert_eq!(budget_words(&pairs), "every gating pair is decided");
        assert_eq!(budget_words(&[]), "");
        let ledger = ledger_pairs(&pairs);
        assert_eq!(ledger[1]["within_budget"], "decided");
        assert_eq!(ledger[1]["outcome"], "fail");
        assert_eq!(ledger[0]["point"], "within_margin");
        assert_eq!(ledger[0]["budget_requests_per_side"], 20);
    }

    #[test]
    fn metrics_read_as_short_words() {
        assert_eq!(metric_words("ttft_p50_ms", Some("ttft_ms")), "TTFT");
        assert_eq!(
            metric_words("decode_tok_s_p50", Some("decode_tok_s")),
            "decode"
        );
        assert_eq!(metric_words("e2e_p90_ms", Some("e2e_ms")), "e2e p90");
        assert_eq!(metric_words("queue_depth", None), "queue_depth");
    }
}
