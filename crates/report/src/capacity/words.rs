//! Capacity in the words the views print: one line per side, one per pair.

use super::estimate::{CapacityEstimate, CapacityRatio, IntervalMethod};
use super::search::Ended;
use super::spec::{CapacitySpec, LoadAxis};
use crate::artifact::Slo;
use crate::stats::GateOutcome;

/// A load with its unit: `2.41 req/s`, `12 concurrent`.
pub fn load(axis: LoadAxis, x: f64) -> String {
    match axis {
        LoadAxis::Rate => format!("{} req/s", sig3(x)),
        LoadAxis::Concurrency => format!("{x:.0} concurrent"),
    }
}

/// A percentage as people write it: `95`, `99.5`.
fn percent(share: f64) -> String {
    let p = share * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}")
    } else {
        format!("{}", (p * 100.0).round() / 100.0)
    }
}

/// Three significant figures, no exponent.
fn sig3(x: f64) -> String {
    let digits = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.digits$}")
}

/// The SLO a capacity is held at: `TTFT ≤ 2000 ms, TPOT ≤ 80 ms, 90 %`.
pub fn at(slo: &Slo) -> String {
    let mut parts: Vec<String> = [
        ("TTFT", slo.ttft_ms),
        ("TPOT", slo.tpot_ms),
        ("e2e", slo.e2e_ms),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k} ≤ {v} ms")))
    .collect();
    parts.push(format!("{} %", percent(slo.min_attainment())));
    parts.join(", ")
}

/// One side: `holds 2.41 req/s (2.10–2.80, 95 %, probit fit) at TTFT ≤ 2000
/// ms, 90 %; bracket 2.30–2.50 req/s; 412 requests (+58 warm-up)`.
pub fn side(spec: &CapacitySpec, slo: &Slo, e: &CapacityEstimate) -> String {
    let unit = |x| load(spec.by, x);
    let head = match e.ended {
        Ended::BelowRange => format!(
            "holds less than {} (the range's low end did not hold)",
            unit(spec.low)
        ),
        Ended::AboveRange => format!(
            "holds more than {} (the range's high end held)",
            unit(spec.high)
        ),
        Ended::Resolved => {
            let point = e.fitted.or(e.held).map_or("no level".into(), unit);
            let bound = match (e.interval, e.method) {
                (Some([lo, hi]), Some(m)) => format!(
                    " ({}–{}, {} %, {})",
                    sig3(lo),
                    sig3(hi),
                    percent(e.confidence),
                    match m {
                        IntervalMethod::CurveFieller => "probit fit",
                        IntervalMethod::DecidedBracket => "decided levels",
                    }
                ),
                _ => " (no interval: the levels do not bound it)".into(),
            };
            format!("holds {point}{bound}")
        }
    };
    let bracket = match (e.held, e.not_held) {
        (Some(h), Some(n)) => format!("; bracket {}–{}", sig3(h), unit(n)),
        _ => String::new(),
    };
    format!(
        "{head} at {}{bracket}; {} requests (+{} warm-up)",
        at(slo),
        e.requests,
        e.warmup_requests
    )
}

/// A pair: `candidate holds 1.31× (1.18×–1.45×) the baseline's rate at TTFT
/// ≤ 2000 ms, 90 %: pass (floor 0.95×)`.
pub fn pair(
    spec: &CapacitySpec,
    slo: &Slo,
    r: &CapacityRatio,
    outcome: GateOutcome,
    margin_percent: f64,
) -> String {
    let what = match spec.by {
        LoadAxis::Rate => "rate",
        LoadAxis::Concurrency => "concurrency",
    };
    let ratio = r
        .ratio
        .map_or("an unknown multiple of".into(), |x| format!("{}×", sig3(x)));
    let bound = match r.interval {
        Some([lo, hi]) => format!(
            " ({}×–{}×, {} %)",
            sig3(lo),
            sig3(hi),
            percent(r.confidence)
        ),
        None => " (no interval)".into(),
    };
    let verdict = match outcome {
        GateOutcome::Pass => "pass",
        GateOutcome::Fail => "fail",
        GateOutcome::Inconclusive => "inconclusive",
    };
    format!(
        "candidate holds {ratio}{bound} the baseline's {what} at {}: {verdict} (floor {}×)",
        at(slo),
        sig3(1.0 - margin_percent / 100.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> CapacitySpec {
        toml::from_str("by = \"rate\"\nlow = 0.5\nhigh = 8\nprecision_percent = 10\n").unwrap()
    }

    fn slo() -> Slo {
        Slo {
            ttft_ms: Some(2000.0),
            tpot_ms: Some(80.0),
            e2e_ms: None,
            min_attainment: Some(0.9),
        }
    }

    #[test]
    fn a_side_reads_as_its_capacity_bound_bracket_and_spend() {
        let e = CapacityEstimate {
            ended: Ended::Resolved,
            held: Some(2.3),
            not_held: Some(2.5),
            fitted: Some(2.41),
            interval: Some([2.1, 2.8]),
            method: Some(IntervalMethod::CurveFieller),
            confidence: 0.95,
            dispersion: 4.0,
            requests: 412,
            warmup_requests: 58,
        };
        assert_eq!(
            side(&spec(), &slo(), &e),
            "holds 2.41 req/s (2.10–2.80, 95 %, probit fit) at TTFT ≤ 2000 ms, TPOT ≤ 80 ms, 90 %; bracket 2.30–2.50 req/s; 412 requests (+58 warm-up)"
        );
        let below = CapacityEstimate {
            ended: Ended::BelowRange,
            ..e
        };
        assert!(side(&spec(), &slo(), &below).starts_with("holds less than 0.50 req/s"));
    }

    #[test]
    fn a_pair_reads_as_a_multiple_with_its_bound_and_verdict() {
        let r = CapacityRatio {
            ratio: Some(1.31),
            interval: Some([1.18, 1.45]),
            confidence: 0.9,
        };
        assert_eq!(
            pair(&spec(), &slo(), &r, GateOutcome::Pass, 5.0),
            "candidate holds 1.31× (1.18×–1.45×, 90 %) the baseline's rate at TTFT ≤ 2000 ms, TPOT ≤ 80 ms, 90 %: pass (floor 0.95×)"
        );
    }
}
