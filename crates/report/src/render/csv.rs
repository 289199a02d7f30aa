//! CSV for spreadsheets and pandas: one row per (cell, metric) with both
//! sides' values and the deciding bounds, and one row per recorded request
//! (failures included) from the report's kept request rows. The bounds are
//! worse-direction percent around the estimate named in `estimate` (a
//! paired design's is not `delta_percent`); a rate's are also given as the
//! candidate's speed over the baseline's.

use serde_json::Value;

/// Columns of `metrics.csv`, each read from a metric's JSON.
const METRIC_COLUMNS: [&str; 18] = [
    "cell",
    "metric",
    "direction",
    "baseline",
    "candidate",
    "delta_percent",
    "baseline_n",
    "candidate_n",
    "decision",
    "lower_bound_percent",
    "upper_bound_percent",
    "margin_percent",
    "requests_to_resolve",
    "seed_flag",
    // Added after the above: the estimate the bounds surround, and a
    // rate's bounds as speed ratios (candidate over baseline).
    "estimate",
    "estimate_worse_percent",
    "speed_ratio_low",
    "speed_ratio_high",
];

/// Columns of `requests.csv` before the rows' own fields (in first-seen order).
const REQUEST_KEYS: [&str; 3] = ["cell", "side", "index"];

/// (`metrics.csv`, `requests.csv`) of a v1 report.
pub fn render(v: &Value) -> (String, String) {
    (metrics(v), requests(v))
}

fn cells(v: &Value) -> Vec<(&String, &Value)> {
    let mut cells: Vec<(&String, &Value)> = v["cells"]
        .as_object()
        .map(|o| o.iter().collect())
        .unwrap_or_default();
    cells.sort_by(|a, b| super::natural_cmp(a.0, b.0));
    cells
}

fn metrics(v: &Value) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(METRIC_COLUMNS);
    for (cell, c) in cells(v) {
        let Some(ms) = c["metrics"].as_object() else {
            continue;
        };
        for (name, m) in ms {
            let e = &m["evidence"];
            // The evidence outcome decides where there is one; else the CI verdict.
            let decision = e["outcome"].as_str().or_else(|| m["verdict"].as_str());
            let seed_flag = m
                .as_object()
                .and_then(|o| o.iter().find(|(k, _)| k.starts_with("no_more_than_")))
                .map(|(_, f)| f.clone());
            let row = [
                Some(Value::from(cell.as_str())),
                Some(Value::from(name.as_str())),
                Some(m["direction"].clone()),
                Some(m["baseline"].clone()),
                Some(m["candidate"].clone()),
                Some(m["delta_percent"].clone()),
                Some(m["baseline_n"].clone()),
                Some(m["candidate_n"].clone()),
                decision.map(Value::from),
                Some(e["lower_bound_percent"].clone()),
                Some(e["upper_bound_percent"].clone()),
                Some(e["margin_percent"].clone()),
                Some(e["requests_to_resolve"].clone()),
                seed_flag,
            ]
            .into_iter()
            .chain(estimate_fields(m));
            let _ = w.write_record(row.map(|x| field(x.as_ref())));
        }
    }
    finish(w)
}

/// The estimate a metric's evidence bounds surround (its name and its
/// worse-direction change), and for a rate the bounds as the candidate's
/// speed over the baseline's, slowest first; empty where there is none.
fn estimate_fields(m: &Value) -> [Option<Value>; 4] {
    let e = &m["evidence"];
    let name = super::view::json::typed::<crate::stats::Resampling>(e.get("resampling"))
        .map(|r| Value::from(super::estimate::estimate_name(r)));
    let rate = m["direction"] == "higher_is_better";
    let ratio = |k: &str| {
        e[k].as_f64()
            .filter(|_| rate)
            .map(|w| Value::from(super::estimate::speed_ratio(w)))
    };
    [
        name,
        Some(e["worse_change_percent"].clone()),
        ratio("upper_bound_percent"),
        ratio("lower_bound_percent"),
    ]
}

fn requests(v: &Value) -> String {
    let all: Vec<(&String, &str, usize, &serde_json::Map<String, Value>)> = cells(v)
        .into_iter()
        .flat_map(|(cell, c)| {
            ["baseline", "candidate"].into_iter().flat_map(move |side| {
                c["request_rows"][side]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .enumerate()
                    .filter_map(move |(i, r)| Some((cell, side, i, r.as_object()?)))
            })
        })
        .collect();
    let mut keys: Vec<&str> = Vec::new();
    for (_, _, _, r) in &all {
        for k in r.keys() {
            if !keys.contains(&k.as_str()) {
                keys.push(k);
            }
        }
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = REQUEST_KEYS
        .iter()
        .map(|k| k.to_string())
        .chain(keys.iter().map(|k| text_field(k)));
    let _ = w.write_record(header);
    for (cell, side, i, r) in all {
        let head = [text_field(cell), side.to_string(), i.to_string()];
        let rest = keys.iter().map(|k| field(r.get(*k)));
        let _ = w.write_record(head.into_iter().chain(rest));
    }
    finish(w)
}

/// A JSON value as a CSV field: numbers and booleans as JSON writes them,
/// strings as [`text_field`], missing or null empty.
fn field(x: Option<&Value>) -> String {
    match x {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => text_field(s),
        Some(other) => other.to_string(),
    }
}

/// Text as a spreadsheet shows it instead of running it: a field starting
/// with `=`, `+`, `-`, `@`, a tab or a carriage return is read as a formula
/// (CSV injection), so it gets a leading `'`. Only text passes here: a
/// negative number stays a number. The writer quotes (RFC 4180).
fn text_field(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    }
}

fn finish(w: csv::Writer<Vec<u8>>) -> String {
    // Writing to memory cannot fail; the bytes are UTF-8 as the fields were.
    w.into_inner()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_row_per_metric_and_per_request_with_quoting() {
        let v = json!({"cells": {
            "c10": {"metrics": {}},
            "c2, \"odd\"": {
                "metrics": {"ttft_p50_ms": {"baseline": 100.0, "candidate": 110.5, "delta_percent": 10.5,
                    "direction": "lower_is_better", "baseline_n": 4, "candidate_n": 4, "verdict": "regression",
                    "no_more_than_5_percent_regression": false,
                    "evidence": {"outcome": "fail", "lower_bound_percent": 6.0, "upper_bound_percent": 15.0, "margin_percent": 5.0}}},
                "request_rows": {"baseline": [{"ok": true, "ttft_ms": 99.0}],
                                 "candidate": [{"ok": false, "error": "HTTP 500"}]}
            }
        }});
        let (m, r) = render(&v);
        let mut lines = m.lines();
        assert_eq!(lines.next().unwrap(), METRIC_COLUMNS.join(","));
        assert_eq!(
            lines.next().unwrap(),
            "\"c2, \"\"odd\"\"\",ttft_p50_ms,lower_is_better,100.0,110.5,10.5,4,4,fail,6.0,15.0,5.0,,false,,,,"
        );
        assert_eq!(lines.next(), None);
        let r: Vec<&str> = r.lines().collect();
        assert_eq!(r[0], "cell,side,index,ok,ttft_ms,error");
        assert_eq!(r[1], "\"c2, \"\"odd\"\"\",baseline,0,true,99.0,");
        assert_eq!(r[2], "\"c2, \"\"odd\"\"\",candidate,0,false,,HTTP 500");
    }

    /// A paired rate: the estimate named, its bounds as speeds by hand
    /// (c/b = 1 − worse/100: +50 % worse is 0.5×, −100 % is 2×); a latency
    /// gets no speed.
    #[test]
    fn the_estimate_is_named_and_a_rates_bounds_are_speed_ratios() {
        let evidence = |w: f64, lo: f64, hi: f64, r: &str| {
            json!({"outcome": "inconclusive", "worse_change_percent": w, "lower_bound_percent": lo,
                   "upper_bound_percent": hi, "margin_percent": 5.0, "resampling": r})
        };
        let v = json!({"cells": {"c": {"metrics": {
            "decode_tok_s_p50": {"direction": "higher_is_better", "delta_percent": -3.56,
                "evidence": evidence(13.21, -100.0, 50.0, "paired_requests")},
            "ttft_p50_ms": {"direction": "lower_is_better", "delta_percent": 8.0,
                "evidence": evidence(8.0, 2.5, 14.0, "independent")}
        }}}});
        let (m, _) = render(&v);
        let rows: Vec<&str> = m.lines().collect();
        assert!(
            rows[0].ends_with(
                ",seed_flag,estimate,estimate_worse_percent,speed_ratio_low,speed_ratio_high"
            ),
            "{}",
            rows[0]
        );
        assert!(
            rows[1].starts_with("c,decode_tok_s_p50,")
                && rows[1].ends_with(",paired estimate,13.21,0.5,2.0"),
            "{}",
            rows[1]
        );
        assert!(
            rows[2].starts_with("c,ttft_p50_ms,") && rows[2].ends_with(",point delta,8.0,,"),
            "{}",
            rows[2]
        );
    }

    #[test]
    fn text_cannot_start_a_formula_and_numbers_stay_numbers() {
        let v = json!({"cells": {"=HYPERLINK(\"http://e\")": {
            "metrics": {"@SUM(A1)": {"baseline": -1.5, "delta_percent": -3.0, "direction": "+x"}},
            "request_rows": {"baseline": [{"-k": "-1+2", "ok": true}]}
        }}});
        let (m, r) = render(&v);
        let row = m.lines().nth(1).unwrap();
        assert!(
            row.starts_with("\"'=HYPERLINK(\"\"http://e\"\")\",'@SUM(A1),'+x,-1.5,,-3.0,"),
            "{row}"
        );
        let r: Vec<&str> = r.lines().collect();
        assert_eq!(r[0], "cell,side,index,'-k,ok");
        assert_eq!(
            r[1],
            "\"'=HYPERLINK(\"\"http://e\"\")\",baseline,0,'-1+2,true"
        );
    }
}
