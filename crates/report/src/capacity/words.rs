//! A pair's capacity in the words the views print (a side's line is
//! `run::CapacityRun::line`).

use super::estimate::CapacityRatio;
use super::run::shown;
use super::spec::CapacitySpec;
use crate::artifact::Slo;
use crate::model::CapacityComparison;
use crate::stats::GateOutcome;

/// A percentage as people write it: `95`, `99.5`.
fn percent(share: f64) -> String {
    let p = share * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0}")
    } else {
        format!("{}", (p * 100.0).round() / 100.0)
    }
}

/// The targets as a reader says them: `TTFT ≤ 2000 ms, TPOT ≤ 80 ms`.
pub fn targets(slo: &Slo) -> String {
    [
        ("TTFT", slo.ttft_ms),
        ("TPOT", slo.tpot_ms),
        ("e2e", slo.e2e_ms),
    ]
    .iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k} ≤ {v} ms")))
    .collect::<Vec<_>>()
    .join(", ")
}

/// The SLO a capacity is held at: `TTFT ≤ 2000 ms, TPOT ≤ 80 ms, 90 %`.
pub fn at(slo: &Slo) -> String {
    format!("{}, {} %", targets(slo), percent(slo.min_attainment()))
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
    pair_at(spec, &at(slo), r, outcome, margin_percent)
}

/// A report's capacity comparison as [`pair`] says it, the SLO as the
/// baseline's search was held to it.
pub fn pair_of(c: &CapacityComparison) -> String {
    let at = format!(
        "{}, {} %",
        c.baseline.slo,
        percent(c.baseline.min_attainment)
    );
    pair_at(&c.baseline.spec, &at, &c.ratio, c.outcome, c.margin_percent)
}

fn pair_at(
    spec: &CapacitySpec,
    at: &str,
    r: &CapacityRatio,
    outcome: GateOutcome,
    margin_percent: f64,
) -> String {
    let what = spec.by.name();
    let ratio = r.ratio.map_or("an unknown multiple of".into(), |x| {
        format!("{}×", shown(x))
    });
    let bound = match r.interval {
        Some([lo, hi]) => format!(
            " ({}×–{}×, {} %)",
            shown(lo),
            shown(hi),
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
        "candidate holds {ratio}{bound} the baseline's {what} at {at}: {verdict} (floor {}×)",
        shown(1.0 - margin_percent / 100.0)
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
