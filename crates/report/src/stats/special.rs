//! Special functions for the exact tests: ln Γ, the regularized incomplete
//! beta function and its inverse. Written here rather than pulled in as a
//! dependency so the numbers cannot shift under a crate upgrade.

/// `ln Γ(x)` for `x > 0` (NaN otherwise).
///
/// Lanczos approximation with g = 7 and 9 coefficients (relative error about
/// 1e-15 for x ≥ 0.5), with the reflection formula below 0.5.
pub fn ln_gamma(x: f64) -> f64 {
    // Published coefficients (Godfrey), kept digit for digit.
    #[allow(clippy::excessive_precision)]
    const COEF: [f64; 9] = [
        0.999_999_999_999_809_93,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_13,
        -176.615_029_162_140_59,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_571_6e-6,
        1.505_632_735_149_311_6e-7,
    ];
    const G: f64 = 7.0;
    // ln(sqrt(2π))
    const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

    if x.is_nan() || x <= 0.0 {
        return f64::NAN;
    }
    if x.is_infinite() {
        return f64::INFINITY;
    }
    if x < 0.5 {
        // Γ(x)Γ(1−x) = π / sin(πx); Lanczos loses accuracy near 0.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = COEF[0];
    for (i, &c) in COEF.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    LN_SQRT_2PI + (x + 0.5) * t.ln() - t + a.ln()
}

/// `ln k!`.
pub fn ln_factorial(k: u64) -> f64 {
    // Exact up to where f64 holds k! exactly, which also covers the small
    // arguments where ln Γ's absolute error matters most.
    if k <= 20 {
        return (2..=k).map(|i| i as f64).product::<f64>().ln();
    }
    ln_gamma(k as f64 + 1.0)
}

/// Regularized incomplete beta function `I_x(a, b)` for `a, b > 0`, `x` in `[0, 1]`.
/// NaN for other arguments or if the continued fraction fails to converge.
///
/// Continued fraction (modified Lentz), evaluated on whichever side of the
/// mean converges fast, as in Numerical Recipes §6.4.
pub fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if !(valid_shape(a, b) && (0.0..=1.0).contains(&x)) {
        return f64::NAN;
    }
    if x == 0.0 {
        return 0.0;
    }
    if x == 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (-x).ln_1p();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// Beta shape parameters must be positive and finite.
fn valid_shape(a: f64, b: f64) -> bool {
    a > 0.0 && b > 0.0 && a.is_finite() && b.is_finite()
}

fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    // Converges in O(sqrt(max(a, b))) steps; this cap covers proportions with
    // tens of millions of trials.
    const MAX_ITER: usize = 20_000;
    const TINY: f64 = 1e-300;
    let fix = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / fix(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..=MAX_ITER {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / fix(1.0 + aa * d);
        c = fix(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / fix(1.0 + aa * d);
        c = fix(1.0 + aa / c);
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() <= f64::EPSILON {
            return h;
        }
    }
    f64::NAN
}

/// The `p`-quantile of the Beta(a, b) distribution: the `x` with `I_x(a, b) = p`.
///
/// Bisection on `[0, 1]` (I_x is increasing in x) down to a relative width
/// of about 2⁻⁵², so tiny quantiles keep their significant digits. Slower
/// than Newton's method but cannot diverge. NaN for invalid arguments.
pub fn beta_quantile(p: f64, a: f64, b: f64) -> f64 {
    if !(valid_shape(a, b) && (0.0..=1.0).contains(&p)) {
        return f64::NAN;
    }
    if p == 0.0 {
        return 0.0;
    }
    if p == 1.0 {
        return 1.0;
    }
    // The gate asks for the same few t quantiles (its levels, its block
    // counts) at every look of every pair, and an exact bound for the same
    // few counts again and again; each is a bisection of continued fractions.
    BETA_QUANTILES.get_or([p.to_bits(), a.to_bits(), b.to_bits()], || {
        bisected_beta_quantile(p, a, b)
    })
}

/// The Beta quantiles kept (twice this at most).
static BETA_QUANTILES: super::memo::Memo<[u64; 3], f64> = super::memo::Memo::new(4096);

/// [`beta_quantile`] by bisection, for `p` in (0, 1).
fn bisected_beta_quantile(p: f64, a: f64, b: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    // Each step halves the bracket; 1100 steps reach the smallest subnormal.
    for _ in 0..1100 {
        let mid = lo + (hi - lo) / 2.0;
        if mid <= lo || mid >= hi || hi - lo <= f64::EPSILON * hi {
            break;
        }
        let v = regularized_incomplete_beta(a, b, mid);
        if v.is_nan() {
            return f64::NAN;
        }
        if v < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo + (hi - lo) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: f64, want: f64, tol: f64) -> bool {
        (got - want).abs() <= tol * want.abs().max(1.0)
    }

    /// Reference: scipy 1.17.1 `scipy.special.gammaln`.
    #[test]
    fn ln_gamma_matches_scipy() {
        let cases = [
            (0.5, 0.5723649429247),
            (1.0, 0.0),
            (1.5, -0.12078223763524526),
            (2.0, 0.0),
            (3.0, std::f64::consts::LN_2), // scipy prints 0.6931471805599453
            (10.0, 12.801827480081469),
            (100.5, 361.43554046777757),
            (10000.0, 82099.71749644238),
            (0.001, 6.907178885383853),
            (171.0, 706.5730622457875),
        ];
        for (x, want) in cases {
            let got = ln_gamma(x);
            assert!(close(got, want, 1e-13), "lnΓ({x}) = {got}, scipy {want}");
        }
        assert!(ln_gamma(0.0).is_nan());
        assert!(ln_gamma(-1.5).is_nan());
    }

    #[test]
    fn ln_factorial_small_is_exact_and_continuous_with_ln_gamma() {
        assert_eq!(ln_factorial(0), 0.0);
        assert_eq!(ln_factorial(1), 0.0);
        assert_eq!(ln_factorial(5), 120f64.ln());
        assert!(close(ln_factorial(20), ln_gamma(21.0), 1e-14));
        assert!(close(
            ln_factorial(21),
            ln_factorial(20) + 21f64.ln(),
            1e-14
        ));
    }

    /// Reference: scipy 1.17.1 `scipy.special.betainc(a, b, x)`.
    #[test]
    fn incomplete_beta_matches_scipy() {
        let cases = [
            (0.5, 0.5, 0.3, 0.36901011956554536),
            (2.0, 3.0, 0.4, 0.5247999999999999),
            (10.0, 20.0, 0.3, 0.3640040810719437),
            (1.0, 60.0, 0.05, 0.9539302010130479),
            (3.0, 58.0, 0.1, 0.9469549181840072),
            (100.0, 200.0, 0.35, 0.7325714649575441),
            (7.5, 2.25, 0.9, 0.8450360021510931),
            (1.0, 1.0, 0.123, 0.123),
            (0.1, 10.0, 0.001, 0.6596666602208251),
        ];
        for (a, b, x, want) in cases {
            let got = regularized_incomplete_beta(a, b, x);
            assert!(
                close(got, want, 1e-12),
                "I_{x}({a},{b}) = {got}, scipy {want}"
            );
        }
        assert_eq!(regularized_incomplete_beta(2.0, 3.0, 0.0), 0.0);
        assert_eq!(regularized_incomplete_beta(2.0, 3.0, 1.0), 1.0);
        assert!(regularized_incomplete_beta(0.0, 3.0, 0.5).is_nan());
        assert!(regularized_incomplete_beta(2.0, 3.0, 1.5).is_nan());
        // Large parameters still converge (symmetric: I_0.5(a, a) = 0.5).
        assert!(close(regularized_incomplete_beta(5e5, 5e5, 0.5), 0.5, 1e-9));
    }

    /// Reference: scipy 1.17.1 `scipy.stats.beta.ppf(p, a, b)`.
    #[test]
    fn beta_quantile_matches_scipy_and_inverts() {
        let cases = [
            (0.975, 1.0, 60.0, 0.05962949228616691),
            (0.025, 2.0, 59.0, 0.004062624642093496),
            (0.5, 3.0, 4.0, 0.42140719069071303),
            (0.1, 0.5, 0.5, 0.024471741852423214),
        ];
        for (p, a, b, want) in cases {
            let got = beta_quantile(p, a, b);
            assert!(
                (got - want).abs() <= 1e-11,
                "ppf({p}; {a},{b}) = {got}, scipy {want}"
            );
        }
        for (p, a, b) in [(1e-9, 2.0, 50.0), (0.3, 40.0, 7.0), (0.999, 0.7, 3.0)] {
            let x = beta_quantile(p, a, b);
            let back = regularized_incomplete_beta(a, b, x);
            assert!(((back - p) / p).abs() < 1e-9, "{p} -> {x} -> {back}");
        }
        assert_eq!(beta_quantile(0.0, 2.0, 3.0), 0.0);
        assert_eq!(beta_quantile(1.0, 2.0, 3.0), 1.0);
        assert!(beta_quantile(1.5, 2.0, 3.0).is_nan());
    }
}

/// Standard normal CDF `Φ(x)`, from libm's `erfc` (accurate in both tails).
pub fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// Standard normal quantile `Φ⁻¹(p)` for `p` in (0, 1) (±inf at 0 and 1, NaN
/// outside). Wichura's AS 241 (PPND16), relative error about 1e-16; written
/// here for the reason above (a statistics crate would bring a linear-algebra
/// stack with it for one function).
#[allow(clippy::excessive_precision)]
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q
            * (((((((2509.0809287301226727 * r + 33430.575583588128105) * r
                + 67265.770927008700853)
                * r
                + 45921.953931549871457)
                * r
                + 13731.693765509461125)
                * r
                + 1971.5909503065514427)
                * r
                + 133.14166789178437745)
                * r
                + 3.387132872796366608)
            / (((((((5226.495278852545925 * r + 28729.085735721942674) * r
                + 39307.89580009271061)
                * r
                + 21213.794301586595867)
                * r
                + 5394.1960214247511077)
                * r
                + 687.1870074920579083)
                * r
                + 42.313330701600911252)
                * r
                + 1.0);
    }
    let r = if q < 0.0 { p } else { 1.0 - p };
    let r = (-r.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        (((((((7.7454501427834140764e-4 * r + 0.0227238449892691845833) * r
            + 0.24178072517745061177)
            * r
            + 1.27045825245236838258)
            * r
            + 3.64784832476320460504)
            * r
            + 5.7694972214606914055)
            * r
            + 4.6303378461565452959)
            * r
            + 1.42343711074968357734)
            / (((((((1.05075007164441684324e-9 * r + 5.475938084995344946e-4) * r
                + 0.0151986665636164571966)
                * r
                + 0.14810397642748007459)
                * r
                + 0.68976733498510000455)
                * r
                + 1.6763848301838038494)
                * r
                + 2.05319162663775882187)
                * r
                + 1.0)
    } else {
        let r = r - 5.0;
        (((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r
            + 0.0012426609473880784386)
            * r
            + 0.026532189526576123093)
            * r
            + 0.29656057182850489123)
            * r
            + 1.7848265399172913358)
            * r
            + 5.4637849111641143699)
            * r
            + 6.6579046435011037772)
            / (((((((2.04426310338993978564e-15 * r + 1.4215117583164458887e-7) * r
                + 1.8463183175100546818e-5)
                * r
                + 7.868691311456132591e-4)
                * r
                + 0.0148753612908506148525)
                * r
                + 0.13692988092273580531)
                * r
                + 0.59983220655588793769)
                * r
                + 1.0)
    };
    if q < 0.0 { -x } else { x }
}

#[cfg(test)]
mod normal_quantile_tests {
    use super::normal_quantile;

    /// Reference values: scipy.stats.norm.ppf (scipy 1.x, checked here).
    #[test]
    fn matches_reference_values() {
        for (p, want) in [
            (0.5, 0.0),
            (0.975, 1.959_963_984_540_054),
            (0.95, 1.644_853_626_951_472_2),
            (0.8, 0.841_621_233_572_914_3),
            (0.001, -3.090_232_306_167_813_5),
            (1e-10, -6.361_340_902_404_056),
            (0.999_999, 4.753_424_308_817_087),
        ] {
            let got = normal_quantile(p);
            assert!((got - want).abs() < 1e-12, "p={p}: {got} vs {want}");
        }
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert!(normal_quantile(1.5).is_nan());
    }
}

/// Student's t quantile for `p` in (0.5, 1) with `df > 0` degrees of freedom
/// (from the beta inverse: `P(|T| > t) = I_{df/(df+t²)}(df/2, 1/2)`); the
/// normal quantile for `df = ∞`. NaN outside that range.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.5 && p < 1.0) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df.is_infinite() {
        return normal_quantile(p);
    }
    let x = beta_quantile(2.0 * (1.0 - p), df / 2.0, 0.5);
    (df * (1.0 - x) / x).sqrt()
}

/// Chi-square quantile by the Wilson–Hilferty approximation (relative error
/// below 1% for df ≥ 3 between the 5th and 95th percentiles): enough to bound
/// a standard error, where nothing finer is claimed.
pub fn chi_square_quantile_approx(p: f64, df: f64) -> f64 {
    let z = normal_quantile(p);
    let a = 2.0 / (9.0 * df);
    (df * (1.0 - a + z * a.sqrt()).powi(3)).max(0.0)
}

#[cfg(test)]
mod t_tests {
    use super::{chi_square_quantile_approx, t_quantile};

    /// Reference values: scipy.stats.t.ppf and chi2.ppf (checked here).
    #[test]
    fn t_and_chi_square_reference_values() {
        for (p, df, want) in [
            (0.95, 3.0, 2.353_363_434_801_823),
            (0.975, 10.0, 2.228_138_851_986_273_5),
            (0.99, 1.0, 31.820_515_953_773_935),
            (0.8, 30.0, 0.853_767_261_471_297_9),
        ] {
            let got = t_quantile(p, df);
            assert!(
                (got - want).abs() < 1e-9 * want,
                "t({p}, {df}) = {got}, want {want}"
            );
        }
        let c = chi_square_quantile_approx(0.2, 7.0);
        assert!((c - 3.822_323_0).abs() < 0.04, "{c}");
        assert!(t_quantile(0.4, 3.0).is_nan());
    }
}
