//! Small exact cases: published intervals, the outcome from the bounds,
//! the drift floor, pairing and quantiles.

use super::*;

#[test]
fn wilson_and_newcombe_match_published_values() {
    // Newcombe (1998), Statistics in Medicine 17:873, table II example (a):
    // 56/70 vs 48/80, method 10 interval 0.0524 to 0.3339.
    let (lo, hi) = newcombe_difference(56, 70, 48, 80, 0.95);
    assert!(
        (lo - 0.0524).abs() < 5e-4 && (hi - 0.3339).abs() < 5e-4,
        "{lo} {hi}"
    );
    // Example (h): 0/10 vs 0/20 gives −0.1611 to 0.2775.
    let (lo, hi) = newcombe_difference(0, 10, 0, 20, 0.95);
    assert!(
        (lo + 0.1611).abs() < 5e-4 && (hi - 0.2775).abs() < 5e-4,
        "{lo} {hi}"
    );
    // Wilson 0/60 at 95%: upper 0.0602 (R: prop.test(0, 60, correct=FALSE)).
    let (l, u) = wilson(0, 60, 1.959_963_984_540_054);
    assert!(l == 0.0 && (u - 0.0602).abs() < 5e-4, "{u}");
}

#[test]
fn combine_fail_dominates_then_inconclusive() {
    use GateOutcome::*;
    assert_eq!(combine([Pass, Pass]), Pass);
    assert_eq!(combine([Pass, Inconclusive]), Inconclusive);
    assert_eq!(combine([Inconclusive, Fail, Pass]), Fail);
    assert_eq!(combine([]), Inconclusive);
}

#[test]
fn outcome_follows_the_bounds() {
    use Direction::*;
    let e = |d: &[f64], dir, p| evidence(d, &inp(dir, p, None)).unwrap();
    // Latency +1% ± 2%: upper 95% ≈ 2.8 ≤ 5: pass.
    let x = e(&dist(1.0, 2.0), LowerIsBetter, 1.0);
    assert_eq!(x.outcome, GateOutcome::Pass);
    assert!((x.upper_bound_percent - 2.8).abs() < 0.01, "{x:?}");
    // +12% ± 4%: lower 5% ≈ 8.4 > 5: fail.
    assert_eq!(
        e(&dist(12.0, 4.0), LowerIsBetter, 12.0).outcome,
        GateOutcome::Fail
    );
    // +5% ± 4%: straddles: inconclusive, and a count is given.
    let x = e(&dist(5.5, 4.0), LowerIsBetter, 5.5);
    assert_eq!(x.outcome, GateOutcome::Inconclusive);
    assert!(x.requests_to_resolve.is_some_and(|n| n > 20), "{x:?}");
    // Throughput −12% ± 4% is 12% worse: fail; +12% is better: pass.
    assert_eq!(
        e(&dist(-12.0, 4.0), HigherIsBetter, -12.0).outcome,
        GateOutcome::Fail
    );
    assert_eq!(
        e(&dist(12.0, 4.0), HigherIsBetter, 12.0).outcome,
        GateOutcome::Pass
    );
    // A large confident improvement of latency passes (non-inferiority).
    assert_eq!(
        e(&dist(-20.0, 4.0), LowerIsBetter, -20.0).outcome,
        GateOutcome::Pass
    );
}

/// The design plans from the standard error where the bootstrap is
/// normal (its bounds over t say the same), and from the bounds where its
/// tails are heavier than its middle: a t with 3 degrees of freedom,
/// for the spread of its middle, is about 1.3–1.5 times as far out as the
/// normal at the fail bound's 1.7 % point.
#[test]
fn the_design_plans_from_the_bounds_where_the_tails_are_wider() {
    let units = 20;
    let quantiles = |q: &dyn Fn(f64) -> f64| -> Vec<f64> {
        (0..4000)
            .map(|i| 2.0 * q((i as f64 + 0.5) / 4000.0))
            .collect()
    };
    let (alpha_pass, alpha_fail) = (0.05, 0.05 / 3.0);
    let judge = |deltas: &[f64]| {
        let input = EvidenceInput {
            units,
            alpha_pass,
            alpha_fail,
            ..inp(Direction::LowerIsBetter, 0.0, None)
        };
        evidence(deltas, &input).unwrap()
    };
    let normal = judge(&quantiles(&normal_quantile));
    let se = normal.standard_error_percent;
    assert_eq!(DesignSpread::StandardError.of(&normal, units), se);
    let bounds = DesignSpread::Bounds.of(&normal, units);
    assert!(bounds >= se && bounds < 1.02 * se, "{bounds} {se}");
    // `t_quantile` takes the upper half; the lower is its mirror.
    let t3 = |p: f64| (p - 0.5).signum() * t_quantile(0.5 + (p - 0.5).abs(), 3.0);
    let heavy = judge(&quantiles(&t3));
    let se = heavy.standard_error_percent;
    assert_eq!(DesignSpread::StandardError.of(&heavy, units), se);
    let bounds = DesignSpread::Bounds.of(&heavy, units);
    assert!(bounds > 1.3 * se, "{bounds} {se}");
}

#[test]
fn drift_floor_widens_and_can_make_it_unresolvable() {
    let floor = DriftFloor {
        pass_sd_percent: 6.0,
        source: "test".into(),
    };
    let d = dist(0.0, 1.0);
    let narrow = evidence(&d, &inp(Direction::LowerIsBetter, 0.0, None)).unwrap();
    let wide = evidence(&d, &inp(Direction::LowerIsBetter, 0.0, Some(&floor))).unwrap();
    assert_eq!(narrow.outcome, GateOutcome::Pass);
    // z(0.95)·√2·6 ≈ 13.96 in quadrature with 0.9: upper ≈ 13.99 > 5.
    assert!((wide.upper_bound_percent - 13.99).abs() < 0.05, "{wide:?}");
    assert_eq!(wide.outcome, GateOutcome::Inconclusive);
    assert!(wide.requests_to_resolve.is_none());
    assert!(wide.unresolvable.as_deref().unwrap().contains("drift"));
    // A change far beyond the floor still fails.
    let big = evidence(
        &dist(40.0, 1.0),
        &inp(Direction::LowerIsBetter, 40.0, Some(&floor)),
    )
    .unwrap();
    assert_eq!(big.outcome, GateOutcome::Fail);
}

#[test]
fn independent_median_path_is_the_plain_bootstrap_stream() {
    let b: Vec<f64> = (0..30).map(|i| 100.0 + (i * 7 % 11) as f64).collect();
    let c: Vec<f64> = (0..30).map(|i| 103.0 + (i * 5 % 13) as f64).collect();
    let cfg = BootstrapConfig::default();
    let ci = crate::stats::bootstrap_delta_ci(&b, &c, &cfg).unwrap();
    let d = bootstrap_deltas(
        Clustered::flat(&b),
        Clustered::flat(&c),
        0.5,
        Resampling::Independent,
        cfg.iterations,
        cfg.seed,
    )
    .unwrap();
    assert_eq!(percentile_sorted(&d, 0.025), Some(ci.low));
    assert_eq!(percentile_sorted(&d, 0.975), Some(ci.high));
}

#[test]
fn paired_needs_the_same_blocks_on_both_sides() {
    let v = [1.0, 2.0, 3.0, 4.0];
    let (ca, cb) = ([0, 0, 1, 1], [0, 0, 2, 2]);
    let a = Clustered {
        values: &v,
        clusters: Some(&ca),
    };
    let b = Clustered {
        values: &v,
        clusters: Some(&cb),
    };
    assert!(bootstrap_deltas(a, b, 0.5, Resampling::Paired, 10, 1).is_none());
    assert!(bootstrap_deltas(a, a, 0.5, Resampling::Paired, 10, 1).is_some());
    // Wrong-length cluster list is refused, not guessed.
    let short = Clustered {
        values: &v,
        clusters: Some(&ca[..3]),
    };
    assert!(bootstrap_deltas(short, a, 0.5, Resampling::Clustered, 10, 1).is_none());
    assert_eq!(a.cluster_count(), 2);
}

#[test]
fn quantile_in_place_is_type_7() {
    let mut r = Xoshiro256::new(5);
    for n in [1usize, 2, 3, 10, 51] {
        let v: Vec<f64> = (0..n).map(|_| r.next_f64() * 100.0).collect();
        for q in [0.0, 0.1, 0.5, 0.9, 0.99, 1.0] {
            let mut w = v.clone();
            assert_eq!(
                quantile_in_place(&mut w, q),
                percentile(&v, q),
                "n={n} q={q}"
            );
        }
    }
}
