//! The gate at one look: family-wise error rates under A/A and against a
//! known shift, interval coverage, and whether `requests_to_resolve` resolves.

use super::*;

/// The tool's recommendation, as `infergate calibrate` makes it: an A/A
/// pilot gives the standard error; the n that fails a 2×margin shift with
/// 95 % follows. At that n the gate must rarely fail an A/A, mostly pass
/// it, and fail a +10 % regression.
#[test]
fn interleaved_gate_error_rates_at_the_recommended_n() {
    let mut r = Xoshiro256::new(21);
    let pilot = INTERLEAVED.draw(0.0, &mut r);
    let j = judge(
        &pilot,
        Resampling::Paired,
        alpha_levels(0.05, 3, 1),
        None,
        1,
    );
    let n = requests_to_detect(
        j.ev.standard_error_percent,
        0.0,
        pilot.b.len() as f64,
        5.0,
        10.0,
        j.ev.alpha_fail,
        0.95,
    )
    .unwrap();
    let sim = Sim {
        blocks: n.div_ceil(INTERLEAVED.per_block).max(INTERLEAVED.blocks),
        ..INTERLEAVED
    };
    let trials = 100;
    let [pass, fail, _] = family(sim, 0.0, Resampling::Paired, trials, 11);
    assert!(
        fail * 100 <= trials * 5,
        "n={n}: A/A family false fails {fail}/{trials}"
    );
    assert!(
        pass * 100 >= trials * 80,
        "n={n}: A/A passes {pass}/{trials}"
    );
    let [pass, fail, _] = family(sim, 10.0, Resampling::Paired, trials, 22);
    assert!(
        fail * 100 >= trials * 95,
        "n={n}: +10% failed {fail}/{trials}"
    );
    assert!(
        pass * 100 <= trials * 5,
        "n={n}: +10% passed {pass}/{trials}"
    );
}

/// Without pairing or a floor the same family, at a small n, still keeps
/// its false fails down (Bonferroni over the three cells).
#[test]
fn interleaved_a_a_family_false_fails_at_small_n() {
    let trials = 150;
    let [_, fail, _] = family(INTERLEAVED, 0.0, Resampling::Paired, trials, 12);
    assert!(
        fail * 100 <= trials * 5,
        "A/A family false fails {fail}/{trials}"
    );
}

#[test]
fn paired_block_bootstrap_covers_95_percent() {
    let c = coverage(
        Sim {
            blocks: 12,
            ..INTERLEAVED
        },
        10.0,
        Resampling::Paired,
        300,
        31,
    );
    assert!((0.92..=0.98).contains(&c), "coverage {c}");
}

/// Few blocks: the raw percentile interval under-covers (the bootstrap
/// cannot see between-block variance from three blocks), so the gate's
/// bounds are widened by √(B/(B−1))·t/z. Their two-sided 95 % interval
/// (each bound at 2.5 %) must cover at least 92 %; over-covering is the
/// stated cost of few blocks.
#[test]
fn gate_bounds_with_few_blocks_cover_at_least_95_percent() {
    let sim = Sim {
        blocks: 3,
        per_block: 4,
        ..INTERLEAVED
    };
    let mut r = Xoshiro256::new(33);
    let trials = 300;
    let (mut raw, mut gate) = (0, 0);
    for t in 0..trials {
        let d = sim.draw(10.0, &mut r);
        let j = judge(&d, Resampling::Paired, (0.025, 0.025), None, t as u64);
        raw += usize::from(j.ci.0 <= 10.0 && 10.0 <= j.ci.1);
        gate += usize::from(j.ev.lower_bound_percent <= 10.0 && 10.0 <= j.ev.upper_bound_percent);
    }
    let (raw, gate) = (raw as f64 / trials as f64, gate as f64 / trials as f64);
    assert!(gate >= 0.92, "gate bounds coverage {gate} (raw {raw})");
    assert!(
        gate >= raw,
        "widening cannot lower coverage: {gate} < {raw}"
    );
}

#[test]
fn clustered_bootstrap_covers_95_percent_across_passes() {
    // Separate passes, each with its own drift: only resampling the passes
    // puts that variance inside the interval.
    let sim = Sim {
        blocks: 12,
        per_block: 6,
        shared: false,
        drift_sd: 0.03,
        ..INTERLEAVED
    };
    let c = coverage(sim, 0.0, Resampling::Clustered, 300, 41);
    assert!((0.92..=0.98).contains(&c), "clustered coverage {c}");
    // The same data resampled as independent requests covers far less.
    let naive = coverage(sim, 0.0, Resampling::Independent, 300, 41);
    assert!(naive < 0.85, "independent coverage {naive}");
}

#[test]
fn single_pass_a_a_needs_the_drift_floor() {
    // One pass per side at different times: each side's whole run drifts.
    let sim = Sim {
        blocks: 1,
        per_block: 24,
        shared: false,
        ..INTERLEAVED
    };
    let floor = DriftFloor {
        pass_sd_percent: 6.0,
        source: "test".into(),
    };
    let mut r = Xoshiro256::new(51);
    let trials = 200usize;
    let (mut fail_naive, mut fail_floor) = (0, 0);
    for t in 0..trials {
        let d = sim.draw(0.0, &mut r);
        let a = (0.05, 0.05);
        let t = t as u64;
        fail_naive +=
            (judge(&d, Resampling::Independent, a, None, t).outcome == GateOutcome::Fail) as usize;
        fail_floor += (judge(&d, Resampling::Independent, a, Some(&floor), t).outcome
            == GateOutcome::Fail) as usize;
    }
    assert!(
        fail_naive * 10 >= trials,
        "naive false fails {fail_naive}/{trials}"
    );
    assert!(
        fail_floor * 20 <= trials,
        "floored false fails {fail_floor}/{trials}"
    );
}

/// `requests_to_resolve` promises resolution with probability ≥ 80 % if the
/// true change is the pilot's point estimate. Check that promise: pilots of
/// a noisy cell, then fresh runs at the predicted n with that true change.
#[test]
fn requests_to_resolve_resolves_at_least_80_percent() {
    let sim = Sim {
        blocks: 6,
        cv: 0.25,
        ..INTERLEAVED
    };
    let mut r = Xoshiro256::new(61);
    let mut checked = 0;
    for pilot_seed in 0..6u64 {
        let pilot = sim.draw(3.0, &mut r);
        let j = judge(&pilot, Resampling::Paired, (0.05, 0.05), None, pilot_seed);
        let Some(n) = j.ev.requests_to_resolve else {
            continue;
        };
        if n > 400 {
            continue; // a point estimate on the margin: too slow to simulate here
        }
        checked += 1;
        let truth = j.ev.worse_change_percent;
        let big = Sim {
            blocks: n.div_ceil(sim.per_block),
            ..sim
        };
        let trials = 50usize;
        let resolved = (0..trials)
            .filter(|&t| {
                let d = big.draw(truth, &mut r);
                judge(&d, Resampling::Paired, (0.05, 0.05), None, 1000 + t as u64).outcome
                    != GateOutcome::Inconclusive
            })
            .count();
        assert!(
            resolved * 10 >= trials * 8,
            "pilot {pilot_seed}: n={n} at {truth:+.2}% resolved {resolved}/{trials}"
        );
    }
    assert!(
        checked >= 2,
        "too few inconclusive pilots ({checked}): the test tested nothing"
    );
}
