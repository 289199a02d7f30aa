//! How a metric's evidence reads: the estimate its bounds surround, named
//! (a paired design's is not the point delta the tables show), and a rate's
//! bounds as the candidate's speed over the baseline's.

use crate::stats::{Direction, Evidence, Resampling};

/// The estimate an evidence pair's bounds surround. A paired design's is
/// the geometric mean (trimmed, where the design says so) of each block's
/// candidate/baseline ratio; the other designs' is the point delta of the
/// two pooled values, the one the metric tables show.
pub fn estimate_name(r: Resampling) -> &'static str {
    match r {
        Resampling::Paired | Resampling::PairedRequests => "paired estimate",
        Resampling::Independent | Resampling::Clustered => "point delta",
    }
}

/// Why a paired estimate and the tables' point delta of one metric differ,
/// for a reader who sees both.
pub const PAIRED_VS_POINT: &str = "paired estimate: the blocks' candidate/baseline ratios averaged (geometric mean), which drift between blocks cannot move; the tables' point delta compares the two sides' pooled values, so the two can differ, even in sign";

/// A rate's worse-direction change (percent) as the candidate's speed over
/// the baseline's. A delta is `(c / b − 1) × 100` and a rate's worse change
/// is its delta negated, so `c / b = 1 − worse / 100`: the upper bound of
/// the worse change is the slowest the candidate may be, the lower bound
/// the fastest.
pub fn speed_ratio(worse_percent: f64) -> f64 {
    1.0 - worse_percent / 100.0
}

/// A speed ratio: two decimals, three below 0.1, one from 10, an exponent
/// from 1000 or below 0.001. `0×` at or below 0: a bound drawn on the
/// percent scale can pass a −100 % change, a speed cannot.
pub fn fmt_ratio(r: f64) -> String {
    if r.is_nan() || r <= 0.0 {
        "0×".to_string()
    } else if !(0.001..1000.0).contains(&r) {
        format!("{r:.1e}×")
    } else if r >= 10.0 {
        format!("{r:.1}×")
    } else if r >= 0.1 {
        format!("{r:.2}×")
    } else {
        format!("{r:.3}×")
    }
}

/// Bounds of a rate's worse change as the candidate's speed range:
/// `0.88×–3.28× as fast` (slowest first).
pub fn speed_range(lower_worse: f64, upper_worse: f64) -> String {
    format!(
        "{}–{} as fast",
        fmt_ratio(speed_ratio(upper_worse)),
        fmt_ratio(speed_ratio(lower_worse))
    )
}

fn is_rate(d: Option<Direction>) -> bool {
    d == Some(Direction::HigherIsBetter)
}

/// A metric table's interval cell: the bounds against the margin, a rate's
/// as a speed range against the slowest speed the margin allows.
pub fn bounds_cell(e: &Evidence, direction: Option<Direction>) -> String {
    if is_rate(direction) {
        format!(
            "{} vs ≥{}",
            speed_range(e.lower_bound_percent, e.upper_bound_percent),
            fmt_ratio(speed_ratio(e.margin_percent))
        )
    } else {
        format!(
            "[{:+.2}, {:+.2}]% vs {}%",
            e.lower_bound_percent, e.upper_bound_percent, e.margin_percent
        )
    }
}

/// A metric's evidence part reason as the views show it: the estimate
/// named and the bounds with what would pass or fail them (a rate's as
/// speeds), then the stored reason's own tail (what more requests would
/// do). The numbers are the report's; only their reading differs from the
/// stored reason. Bounds that inform no one (`not_informative`, the words
/// of the metric's gate part) are replaced by those words: with two blocks
/// a bound can sit at `3.7e18×`, which decides nothing and reads as
/// nonsense. `None` when `stored` is not the bounds' reason
/// (`worse-direction change …, bounds […] (fail if …, pass if …)…`).
pub fn evidence_reason(
    e: &Evidence,
    direction: Option<Direction>,
    not_informative: Option<&str>,
    stored: &str,
) -> Option<String> {
    const CLAUSE: &str = ", pass if upper <= ";
    if !stored.starts_with("worse-direction change ") {
        return None;
    }
    let at = stored.find(CLAUSE)? + CLAUSE.len();
    let tail = &stored[at + stored[at..].find(')')? + 1..];
    let name = estimate_name(e.resampling);
    let (w, t) = (e.worse_change_percent, e.margin_percent);
    let head = if let Some(words) = not_informative {
        words.to_string()
    } else if is_rate(direction) {
        let floor = fmt_ratio(speed_ratio(t));
        format!(
            "{name} {} as fast (worse direction {w:+.2}%), bounds {} (fail if all of it is under {floor}, pass if all of it is at or above)",
            fmt_ratio(speed_ratio(w)),
            speed_range(e.lower_bound_percent, e.upper_bound_percent)
        )
    } else {
        format!(
            "{name}, worse direction {w:+.2}%, bounds [{:+.2}%, {:+.2}%] (fail if lower > {t}%, pass if upper <= {t}%)",
            e.lower_bound_percent, e.upper_bound_percent
        )
    };
    Some(format!("{head}{tail}"))
}

/// The seed point gate's stored reason (`delta -3.56% (higher is better);
/// worse-direction change +3.56% <= threshold 5%`) with its estimate named
/// the point delta, as the tables name it; any other text as it is.
pub fn point_reason(reason: &str) -> String {
    if reason.starts_with("delta ") && reason.contains("; worse-direction change ") {
        format!("point {reason}")
    } else {
        reason.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::GateOutcome;

    fn evidence(resampling: Resampling, w: f64, lower: f64, upper: f64) -> Evidence {
        Evidence {
            outcome: GateOutcome::Inconclusive,
            margin_percent: 5.0,
            worse_change_percent: w,
            upper_bound_percent: upper,
            lower_bound_percent: lower,
            alpha_pass: 0.05,
            alpha_fail: 0.0167,
            resampling,
            drift_floor: None,
            standard_error_percent: 10.0,
            detectable_regression_percent: 30.0,
            requests_to_resolve: Some(4911),
            unresolvable: None,
        }
    }

    /// By hand: a rate's worse change w is its delta negated, and its delta
    /// is (c/b − 1)·100, so c/b = 1 − w/100. Bounds [−227.69 %, +11.82 %]
    /// of the worse change: at the upper bound the candidate is
    /// 1 − 0.1182 = 0.8818 of the baseline's speed (11.82 % slower), at the
    /// lower 1 + 2.2769 = 3.2769 of it; a 5 % margin allows 0.95.
    #[test]
    fn a_rates_bounds_read_as_the_candidates_speed_over_the_baseline() {
        assert!((speed_ratio(11.82) - 0.8818).abs() < 1e-12);
        assert!((speed_ratio(-227.69) - 3.2769).abs() < 1e-12);
        assert_eq!(speed_ratio(0.0), 1.0);
        assert_eq!(speed_range(-227.69, 11.82), "0.88×–3.28× as fast");
        let e = evidence(Resampling::PairedRequests, -60.0, -227.69, 11.82);
        assert_eq!(
            bounds_cell(&e, Some(Direction::HigherIsBetter)),
            "0.88×–3.28× as fast vs ≥0.95×"
        );
        // A latency's bounds stay worse-direction percent.
        assert_eq!(
            bounds_cell(&e, Some(Direction::LowerIsBetter)),
            "[-227.69, +11.82]% vs 5%"
        );
    }

    #[test]
    fn ratios_stay_short_and_never_negative() {
        assert_eq!(fmt_ratio(0.8818), "0.88×");
        assert_eq!(fmt_ratio(0.0123), "0.012×");
        assert_eq!(fmt_ratio(12.34), "12.3×");
        assert_eq!(fmt_ratio(1e304), "1.0e304×");
        assert_eq!(fmt_ratio(1e-9), "1.0e-9×");
        // A percent-scale bound past −100 %: no speed is below nothing.
        assert_eq!(fmt_ratio(speed_ratio(150.0)), "0×");
    }

    #[test]
    fn the_evidence_line_names_its_estimate() {
        let more = "; about 4911 requests per side would decide it";
        let paired = evidence(Resampling::PairedRequests, 13.21, -289.70, 48.70);
        let stored = format!(
            "worse-direction change +13.21%, bounds [-289.70%, +48.70%] (fail if lower > 5%, pass if upper <= 5%){more}"
        );
        assert_eq!(
            evidence_reason(&paired, Some(Direction::HigherIsBetter), None, &stored).unwrap(),
            format!(
                "paired estimate 0.87× as fast (worse direction +13.21%), bounds 0.51×–3.90× as fast (fail if all of it is under 0.95×, pass if all of it is at or above){more}"
            )
        );
        let single = evidence(Resampling::Independent, 8.0, 2.5, 14.0);
        let stored = "worse-direction change +8.00%, bounds [+2.50%, +14.00%] (fail if lower > 5%, pass if upper <= 5%)";
        assert_eq!(
            evidence_reason(&single, Some(Direction::LowerIsBetter), None, stored).unwrap(),
            "point delta, worse direction +8.00%, bounds [+2.50%, +14.00%] (fail if lower > 5%, pass if upper <= 5%)"
        );
        // Bounds that inform no one: the words instead, the tail kept.
        let words = "too few blocks to bound: 2 of the 4 a bound needs";
        let wide = evidence(Resampling::PairedRequests, 13.21, -3.7e20, 99.0);
        let stored = format!(
            "worse-direction change +13.21%, bounds [-370000000000000000000.00%, +99.00%] (fail if lower > 5%, pass if upper <= 5%){more}"
        );
        assert_eq!(
            evidence_reason(&wide, Some(Direction::HigherIsBetter), Some(words), &stored).unwrap(),
            format!("{words}{more}")
        );
        // Any other reason (an ineligible cell, no bound yet) is left as stated.
        assert_eq!(
            evidence_reason(
                &single,
                None,
                None,
                "baseline cell is not performance-eligible"
            ),
            None
        );
    }

    #[test]
    fn the_point_gates_reason_names_the_point_delta() {
        assert_eq!(
            point_reason(
                "delta -51.42% (higher is better); worse-direction change +51.42% > threshold 5%"
            ),
            "point delta -51.42% (higher is better); worse-direction change +51.42% > threshold 5%"
        );
        assert_eq!(
            point_reason("delta undefined: baseline value is 0"),
            "delta undefined: baseline value is 0"
        );
    }
}
