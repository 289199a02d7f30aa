//! `reference_comparison`: every pair's class, agreement and divergence
//! decided again from the per-token data the report kept, the counts from
//! the classes, each pair's pass from the declared `cross_runtime`, and
//! every pair the policy fails found as a failed request of its candidate
//! run. The texts themselves are not kept, so whether two texts were
//! identical (or differed without logprobs) is taken as given.

use serde_json::{Map, Value};

use crate::agreement::{DivergenceClass, TokenLogprob, compare_tokens};
use crate::model::{Side, parse_turnover_key};
use crate::reference::{ReferenceComparison, passes, summarize};

use super::super::checker::{Checker, join};

const KEY: &str = "reference_comparison";

pub(super) fn check(ck: &mut Checker, root: &Map<String, Value>) {
    let Some(v) = root.get(KEY) else {
        return;
    };
    let rc: ReferenceComparison = match serde_json::from_value(v.clone()) {
        Ok(rc) => rc,
        Err(e) => {
            ck.wrong(KEY, Some(v), &format!("a reference comparison ({e})"));
            return;
        }
    };
    ck.limit("reference_comparison: the reference texts are not kept, so a pair's identical or text-only class is taken as given; near-tie and hard classes, agreement and gaps are recomputed from the kept tokens");
    let policy = crate::policy::QualityPolicy {
        cross_runtime: rc.cross_runtime,
        near_tie_nats: rc.near_tie_nats,
        ..Default::default()
    };
    for (i, p) in rc.prompts.iter().enumerate() {
        let at = format!("{KEY}.prompts[{i}]");
        let (b, c) = (side(&p.baseline_tokens), side(&p.candidate_tokens));
        let texts_equal = p.comparison.class == DivergenceClass::Identical;
        // With tokens on both sides the tokens decide (a text-only pair
        // with both is a disagreement); without, only the text could.
        let again = compare_tokens(texts_equal, b, c, rc.near_tie_nats);
        let found = &v["prompts"][i];
        for (k, e) in [
            ("class", to_value(&again.class)),
            ("agreement", to_value(&again.agreement)),
            ("divergence", to_value(&again.divergence)),
            ("passed", Value::Bool(passes(again.class, rc.cross_runtime))),
        ] {
            let f = found.get(k).unwrap_or(&Value::Null);
            ck.expect_exact(&join(&at, k), Some(f), &e);
        }
        if !passes(p.comparison.class, rc.cross_runtime)
            && !failed_in_run(root, &p.turnover, p.repeat, p.request_index)
        {
            ck.push(
                join(&at, "passed"),
                format!(
                    "false, but candidate turnover `{}` repeat {} has no failed request {}",
                    p.turnover, p.repeat, p.request_index
                ),
                "a controlled_output_failed failure of that request in the candidate's run",
            );
        }
    }
    let again = summarize(rc.prompts.clone(), &policy);
    for (k, n) in [
        ("pairs", again.pairs),
        ("identical", again.identical),
        ("near_tie", again.near_tie),
        ("hard", again.hard),
        ("text_only", again.text_only),
    ] {
        ck.expect_exact(&join(KEY, k), v.get(k), &Value::from(n));
    }
}

fn side(t: &[TokenLogprob]) -> Option<&[TokenLogprob]> {
    (!t.is_empty()).then_some(t)
}

fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

/// The candidate's run `name` repeat `repeat` lists request `index` as failed.
fn failed_in_run(root: &Map<String, Value>, name: &str, repeat: usize, index: usize) -> bool {
    let mut ordinal_of_name = 0;
    let mut keyed: Vec<(usize, &Value)> = root
        .iter()
        .filter_map(|(k, v)| match parse_turnover_key(k) {
            Some((Side::Candidate, o)) => Some((o, v)),
            _ => None,
        })
        .collect();
    keyed.sort_by_key(|(o, _)| *o);
    keyed.into_iter().any(|(_, run)| {
        let run_name = run
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("turnover");
        if run_name != name {
            return false;
        }
        let r = run
            .get("repeat")
            .and_then(Value::as_u64)
            .map_or(ordinal_of_name, |r| r as usize);
        ordinal_of_name += 1;
        r == repeat
            && run
                .get("failures")
                .and_then(Value::as_array)
                .is_some_and(|fs| {
                    fs.iter().any(|f| {
                        f.get("request_index").and_then(Value::as_u64) == Some(index as u64)
                    })
                })
    })
}
