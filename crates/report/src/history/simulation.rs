//! The chain and the change points on histories of known truth.
//!
//! A history is 40 steps; step k's true log ratio is `truth[k]`, its
//! estimate `truth + 0.01·Z` and its standard error `0.01·√(χ²₃₀/30)`,
//! so `(estimate − truth)/SE` is Student's t with 30 df, as a
//! qualification's paired estimate with 1 % noise would be. Seeded: every
//! number is the same on every run. docs/history.md's tables:
//! `INFERGATE_SIM_TABLES=1 cargo test -p infergate-report --lib
//! history::simulation -- --nocapture`.

use super::*;
use crate::stats::{GateOutcome, Spending, Xoshiro256};

const BUILDS: usize = 40;
const SE: f64 = 0.01;
const DF: usize = 30;

fn normal(r: &mut Xoshiro256) -> f64 {
    let u1 = 1.0 - r.next_f64();
    let u2 = r.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn history(truth: &[f64], r: &mut Xoshiro256) -> Vec<Step> {
    truth
        .iter()
        .map(|&mu| {
            let chi2: f64 = (0..DF).map(|_| normal(r).powi(2)).sum();
            Step {
                log_ratio: mu + SE * normal(r),
                standard_error: SE * (chi2 / DF as f64).sqrt(),
                df: DF as f64,
            }
        })
        .collect()
}

fn aa() -> Vec<f64> {
    vec![0.0; BUILDS]
}

/// −4 % at step 25, nothing else.
fn level_shift() -> Vec<f64> {
    let mut t = aa();
    t[SHIFT_AT] = 0.96f64.ln();
    t
}
const SHIFT_AT: usize = 25;

/// −0.7 % per build from step 10 on.
fn drift() -> Vec<f64> {
    let mut t = aa();
    for x in &mut t[DRIFT_FROM..] {
        *x = 0.993f64.ln();
    }
    t
}
const DRIFT_FROM: usize = 10;

/// What a set of histories showed.
#[derive(Default, Debug)]
struct Seen {
    runs: usize,
    /// Histories with any change point, any step one, a drift one.
    any: usize,
    any_step: usize,
    any_drift: usize,
    /// Step change points at the shifted step, and elsewhere.
    step_at_shift: usize,
    step_elsewhere: usize,
    /// Steps from the change to its first change point (any kind, found
    /// at or after it), for the histories where one was found.
    delays: Vec<usize>,
    /// Drift change points: steps from the true onset to the look that
    /// found it, and the estimated onset.
    drift_delays: Vec<usize>,
    drift_onsets: Vec<usize>,
    /// Chains whose 95 % interval held the true sum, through 10 and 40 steps.
    covered_10: usize,
    covered_40: usize,
    /// The earliest step (its index) through which the chain fails the 5 %
    /// drift gate, and the true and estimated drift then (percent).
    gate_fail_at: Vec<usize>,
    gate_true: Vec<f64>,
    gate_estimated: Vec<f64>,
    /// Histories where some step failed its own 5 % gate.
    own_gate_failed: usize,
    /// Naive: any step with p ≤ alpha (no spending).
    naive_any: usize,
}

fn simulate(
    truth: &[f64],
    change_at: Option<usize>,
    rule: &ChangePointRule,
    runs: usize,
    seed: u64,
) -> Seen {
    let mut seen = Seen {
        runs,
        ..Seen::default()
    };
    let true_sum = |k: usize| truth[..k].iter().sum::<f64>();
    let own_t = crate::stats::special::t_quantile(0.95, DF as f64);
    for run in 0..runs {
        let mut r = Xoshiro256::new(seed.wrapping_mul(1_000_003).wrapping_add(run as u64));
        let steps = history(truth, &mut r);
        let found = change_points_with(&steps, rule).unwrap();
        seen.any += usize::from(!found.is_empty());
        seen.any_step += usize::from(found.iter().any(|c| c.kind == ChangeKind::Step));
        seen.any_drift += usize::from(found.iter().any(|c| c.kind == ChangeKind::Drift));
        seen.naive_any += usize::from(steps.iter().any(|s| s.p_value() <= rule.alpha));
        if let Some(at) = change_at {
            seen.step_at_shift += usize::from(
                found
                    .iter()
                    .any(|c| c.kind == ChangeKind::Step && c.index == at),
            );
            seen.step_elsewhere += found
                .iter()
                .filter(|c| c.kind == ChangeKind::Step && c.index != at)
                .count();
            if let Some(c) = found.iter().find(|c| c.through >= at) {
                seen.delays.push(c.through - at);
            }
            if let Some(d) = found.iter().find(|c| c.kind == ChangeKind::Drift) {
                if d.through >= at {
                    seen.drift_delays.push(d.through - at);
                }
                seen.drift_onsets.push(d.index);
            }
        }
        for (k, covered) in [(10, &mut seen.covered_10), (BUILDS, &mut seen.covered_40)] {
            let c = cumulative(&steps[..k], 0.95).unwrap();
            let t = true_sum(k).exp();
            *covered += usize::from(c.low <= t && t <= c.high);
        }
        if let Some((k, c)) = (1..=BUILDS)
            .map(|k| (k, cumulative(&steps[..k], 0.95).unwrap()))
            .find(|(_, c)| drift_gate(c, 5.0, Worse::Lower, 0.05).0 == GateOutcome::Fail)
        {
            seen.gate_fail_at.push(k - 1);
            seen.gate_true.push((true_sum(k).exp() - 1.0) * 100.0);
            seen.gate_estimated.push((c.ratio - 1.0) * 100.0);
        }
        // Each step's own gate at 5 %, one-sided 5 %: fail when its upper
        // bound is below −5 % (drift_gate on a chain of one, without its
        // quantile each time).
        seen.own_gate_failed += usize::from(
            steps
                .iter()
                .any(|s| s.log_ratio + own_t * s.standard_error < 0.95f64.ln()),
        );
    }
    seen
}

fn median_usize(v: &[usize]) -> Option<usize> {
    let mut v = v.to_vec();
    v.sort_unstable();
    (!v.is_empty()).then(|| v[v.len() / 2])
}

fn median_f64(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| v[v.len() / 2])
}

fn share(k: usize, of: usize) -> f64 {
    k as f64 / of as f64
}

/// Within the stated level, give or take two standard errors of the
/// simulation's own count.
fn at_most(k: usize, of: usize, level: f64) -> bool {
    let se = (level * (1.0 - level) / of as f64).sqrt();
    share(k, of) <= level + 2.0 * se
}

fn at_least(k: usize, of: usize, level: f64) -> bool {
    let se = (level * (1.0 - level) / of as f64).sqrt();
    share(k, of) >= level - 2.0 * se
}

const RUNS: usize = 400;

#[test]
fn a_a_histories_flag_a_change_at_most_alpha_and_chains_cover() {
    let s = simulate(&aa(), None, &ChangePointRule::new(0.05), RUNS, 1);
    assert!(at_most(s.any, s.runs, 0.05), "{s:?}");
    assert!(at_least(s.covered_10, s.runs, 0.95), "{s:?}");
    assert!(at_least(s.covered_40, s.runs, 0.95), "{s:?}");
    assert!(s.gate_fail_at.len() <= s.runs / 20, "{s:?}");
    // Without spending, 40 looks at 5 % flag most histories.
    assert!(share(s.naive_any, s.runs) > 0.6, "{s:?}");
}

#[test]
fn a_four_percent_step_is_found_at_its_build() {
    let s = simulate(
        &level_shift(),
        Some(SHIFT_AT),
        &ChangePointRule::new(0.05),
        RUNS,
        2,
    );
    // Its own gate passes it (−4 % against a 5 % margin) almost always.
    assert!(share(s.own_gate_failed, s.runs) < 0.2, "{s:?}");
    assert!(share(s.step_at_shift, s.runs) > 0.4, "{s:?}");
    assert!(s.step_elsewhere <= s.runs / 20, "{s:?}");
    assert_eq!(median_usize(&s.delays), Some(0), "{s:?}");
}

#[test]
fn a_slow_drift_fails_the_chains_gate_and_is_found_near_its_onset() {
    let s = simulate(
        &drift(),
        Some(DRIFT_FROM),
        &ChangePointRule::new(0.05),
        RUNS,
        3,
    );
    assert!(at_least(s.covered_40, s.runs, 0.95), "{s:?}");
    // −0.7 % a build never fails a step's own gate...
    assert!(share(s.own_gate_failed, s.runs) < 0.05, "{s:?}");
    // ...but the chain fails its gate in most histories, at about
    // 5 % + 1.7 standard errors of a chain of ~30 steps.
    assert!(share(s.gate_fail_at.len(), s.runs) > 0.8, "{s:?}");
    let at = median_usize(&s.gate_fail_at).unwrap();
    assert!((24..=37).contains(&at), "{at}");
    assert!(share(s.drift_delays.len(), s.runs) > 0.5, "{s:?}");
    let onset = median_usize(&s.drift_onsets).unwrap();
    assert!((6..=16).contains(&onset), "{onset}");
}

fn row(name: &str, s: &Seen) {
    let opt = |x: Option<usize>| x.map_or("—".to_string(), |v| v.to_string());
    let optf = |x: Option<f64>| x.map_or("—".to_string(), |v| format!("{v:+.1} %"));
    println!(
        "| {name} | {} | {:.3} ({}: {} step, {} drift) | {:.3} | {:.3} / {:.3} | {} | {:.3} | {} | {:.3} | {} | {} | {:.3} | {} | {} / {} | {:.3} |",
        s.runs,
        share(s.any, s.runs),
        s.any,
        s.any_step,
        s.any_drift,
        share(s.naive_any, s.runs),
        share(s.covered_10, s.runs),
        share(s.covered_40, s.runs),
        s.step_at_shift,
        share(s.step_elsewhere, s.runs),
        opt(median_usize(&s.delays)),
        share(s.delays.len(), s.runs),
        opt(median_usize(&s.drift_delays)),
        opt(median_usize(&s.drift_onsets)),
        share(s.gate_fail_at.len(), s.runs),
        opt(median_usize(&s.gate_fail_at)),
        optf(median_f64(&s.gate_true)),
        optf(median_f64(&s.gate_estimated)),
        share(s.own_gate_failed, s.runs),
    );
}

/// docs/history.md's tables.
#[test]
fn history_tables() {
    if std::env::var("INFERGATE_SIM_TABLES").as_deref() != Ok("1") {
        return;
    }
    let runs = 4000;
    println!(
        "| rule / history | runs | any change point (histories: step, drift) | any step p ≤ 0.05 unspent | chain 95 % covers, 10 / 40 steps | step flagged at the shift | step flags elsewhere per run | median delay to first flag | share flagged at or after the change | median drift delay | median drift onset | chain gate fails | median step it fails at | true / estimated drift then | some step's own gate fails |"
    );
    println!("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let rules = [
        (
            "default (½ steps, O'Brien–Fleming)",
            ChangePointRule::new(0.05),
        ),
        (
            "½ steps, Pocock",
            ChangePointRule {
                drift_spending: Spending::Pocock,
                ..ChangePointRule::new(0.05)
            },
        ),
        (
            "steps only",
            ChangePointRule {
                step_share: 1.0,
                ..ChangePointRule::new(0.05)
            },
        ),
        (
            "drift only",
            ChangePointRule {
                step_share: 0.0,
                ..ChangePointRule::new(0.05)
            },
        ),
    ];
    for (name, rule) in &rules {
        for (h, truth, at, seed) in [
            ("A/A", aa(), None, 11),
            ("−4 % at step 25", level_shift(), Some(SHIFT_AT), 12),
            ("−0.7 %/build from step 10", drift(), Some(DRIFT_FROM), 13),
        ] {
            row(
                &format!("{name}; {h}"),
                &simulate(&truth, at, rule, runs, seed),
            );
        }
    }
}
