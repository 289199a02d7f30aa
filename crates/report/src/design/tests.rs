//! The look's levels, its record, and the planning of an adaptive run's looks.

use serde_json::json;

use super::*;
use crate::checker::Checker;
use crate::stats::pass_design_share;

const OBF: Spending = Spending::OBrienFleming;

/// Look `look` of `looks`, each at its share of the planned looks.
fn at(alpha: f64, m: usize, look: usize, looks: usize, spending: Spending) -> (f64, f64) {
    Look::planned(look, looks, spending).levels(alpha, m)
}

/// [`at`], closing the run.
fn closing(alpha: f64, m: usize, look: usize, looks: usize, spending: Spending) -> (f64, f64) {
    Look::planned(look, looks, spending)
        .closing()
        .levels(alpha, m)
}

/// The last of looks at `fail` (the pass side at `pass`), exact boundaries.
fn by_side(alpha: f64, m: usize, pass: &[f64], fail: &[f64], spending: Spending) -> (f64, f64) {
    Look::planned(fail.len(), fail.len(), spending)
        .at_fractions(fail.to_vec(), Some(pass.to_vec()))
        .levels(alpha, m)
}

#[test]
fn a_fixed_run_splits_fail_not_pass() {
    assert_eq!(fixed_levels(0.05, 1), (0.05, 0.05));
    let (p, f) = fixed_levels(0.05, 6);
    assert_eq!(p, 0.05);
    assert!((f - 0.05 / 6.0).abs() < 1e-15);
    let (p, f) = at(0.05, 2, 1, 5, Spending::Bonferroni);
    assert!((p - 0.01).abs() < 1e-15 && (f - 0.005).abs() < 1e-15);
    // Degenerate counts are taken as 1.
    assert_eq!(fixed_levels(0.05, 0), (0.05, 0.05));
    assert_eq!(at(0.05, 0, 0, 0, Spending::Bonferroni), (0.05, 0.05));
}

#[test]
fn spending_shares_sum_to_alpha_and_match_published_boundaries() {
    for spending in [Spending::Bonferroni, OBF] {
        for looks in [1usize, 2, 5, 6] {
            let total: f64 = (1..=looks).map(|k| at(0.05, 3, k, looks, spending).0).sum();
            assert!(
                (total - 0.05).abs() < 1e-12,
                "{spending:?} {looks}: {total}"
            );
            // The fail level splits each share over the pairs.
            let (p, f) = at(0.05, 3, looks, looks, spending);
            assert!((f - p / 3.0).abs() < 1e-15);
        }
    }
    // One look: the whole alpha, as a fixed-size run has.
    assert_eq!(Look::fixed(OBF).levels(0.05, 3), fixed_levels(0.05, 3));
    // Lan-DeMets O'Brien-Fleming, one-sided 0.025 (two-sided 0.05), half-way:
    // 2 - 2 Phi(2.2414 / sqrt(0.5)) = 0.00153 (Jennison & Turnbull, table 7.6 gives 0.0015).
    let half = OBF.spent(0.025, 0.5);
    assert!((half - 0.001_53).abs() < 2e-5, "{half}");
    // Bonferroni spends evenly.
    let (p, f) = at(0.05, 1, 2, 5, Spending::Bonferroni);
    assert!((p - 0.01).abs() < 1e-15 && p == f);
}

#[test]
fn closing_levels_spend_what_the_earlier_looks_left() {
    let spent_before = OBF.spent(0.05, 11.0 / 20.0);
    let (pass, fail) = closing(0.05, 3, 12, 20, OBF);
    assert!((pass - (0.05 - spent_before)).abs() < 1e-15 && (fail - pass / 3.0).abs() < 1e-15);
    let (open, _) = at(0.05, 3, 12, 20, OBF);
    assert!(
        pass > 5.0 * open,
        "closing {pass} vs the look's own share {open}"
    );
    // The planned last look closes the run anyway: the same levels.
    let (a, _) = closing(0.05, 3, 20, 20, OBF);
    let (b, _) = at(0.05, 3, 20, 20, OBF);
    assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    assert!(!Look::planned(20, 20, OBF).closing().is_closing());
}

/// Each side spends over its own fractions: with the same fractions both
/// sides' levels are the shared history's; a pass side further along gets
/// a larger pass level and leaves the fail level alone; a pass side held
/// at 1 has nothing left to spend. The pass side's share of the design:
/// ((z₀.₉₅ + z₀.₉₅) / (z₁₋₀.₀₅/₃ + z₀.₉₅))² = (3.2897 / 3.7730)² for three
/// pairs (quantiles from tables), 1 for one pair.
#[test]
fn each_side_spends_over_its_own_fractions() {
    let fail_t = [0.1, 0.2, 0.3];
    let same = by_side(0.05, 3, &fail_t, &fail_t, OBF);
    let shared = Look::planned(3, 3, OBF)
        .at_fractions(fail_t.to_vec(), None)
        .levels(0.05, 3);
    assert_eq!(same, shared);
    let ahead = by_side(0.05, 3, &[0.13, 0.26, 0.39], &fail_t, OBF);
    assert!(ahead.0 > same.0, "{ahead:?} vs {same:?}");
    assert_eq!(ahead.1, same.1);
    // At 1 the pass side spends all that is left; after it, nothing.
    let closing = by_side(0.05, 3, &[0.5, 1.0], &[0.4, 0.8], OBF);
    assert!(closing.0 > 0.01, "{closing:?}");
    let after = by_side(0.05, 3, &[0.5, 1.0, 1.0], &[0.4, 0.8, 0.9], OBF);
    assert_eq!(after.0, f64::MIN_POSITIVE);
    assert!(after.1 > 1e-4, "{after:?}");
    let share = pass_design_share(0.05, 3);
    assert!(
        (share - (3.2897 / 3.7730f64).powi(2)).abs() < 1e-3,
        "{share}"
    );
    assert!((pass_design_share(0.05, 1) - 1.0).abs() < 1e-12);
    // Pass fractions of another length are not the pass side's: both
    // sides spend over the look's.
    let other = Look::planned(3, 3, OBF).at_fractions(fail_t.to_vec(), Some(vec![0.5]));
    assert_eq!(other.pass_fractions(), None);
    assert_eq!(other.levels(0.05, 3), shared);
}

/// The exact levels over measured fractions are above the share the union
/// bound would use: the earlier looks' boundaries took some paths already.
#[test]
fn group_sequential_levels_exceed_the_share() {
    let history = [1.0 / 14.0, 2.0 / 14.0, 3.0 / 13.0];
    let look = Look::planned(3, 50, OBF).at_fractions(history.to_vec(), None);
    assert_eq!(look.fraction(), Some((2.0 / 14.0, 3.0 / 13.0)));
    assert_eq!(
        look.boundaries(),
        Some(crate::stats::Boundaries::GroupSequential)
    );
    let (pass, _) = look.levels(0.05, 3);
    let share = OBF.spent(0.05, 3.0 / 13.0) - OBF.spent(0.05, 2.0 / 14.0);
    assert!(pass > share, "{pass} vs {share}");
}

/// What `compare` writes of a look is what `verify` reads back.
#[test]
fn a_look_reads_back_from_its_record() {
    let method = Method::default();
    let looks = [
        Look::fixed(OBF),
        Look::planned(17, 20, Spending::Pocock).closing(),
        Look::planned(3, 50, OBF).at_fractions(vec![0.1, 0.2, 0.3], None),
        Look::planned(3, 50, OBF)
            .at_fractions(vec![0.1, 0.2, 0.3], Some(vec![0.1, 0.3, 0.4]))
            .closing(),
    ];
    for look in looks {
        let levels = look.levels(0.05, 6);
        let fw = look.family_wise(0.05, (6, 0), &method, levels);
        let v = serde_json::to_value(&fw).unwrap();
        let mut ck = Checker::default();
        let read = read_look(&mut ck, &v, fw.looks as u64);
        assert!(ck.out.is_empty(), "{:#?}", ck.out);
        assert_eq!(read.as_ref(), Some(&look), "{v}");
        assert_eq!(read.unwrap().levels(0.05, 6), levels);
    }
}

/// A look that cannot be one is named by its field: no look or spending,
/// a measured fraction without every look's, a closing last look.
#[test]
fn an_unreadable_look_is_named() {
    let look = Look::planned(3, 50, OBF).at_fractions(vec![0.1, 0.2, 0.3], None);
    let fw = look.family_wise(0.05, (6, 0), &Method::default(), look.levels(0.05, 6));
    let v = serde_json::to_value(&fw).unwrap();
    let named = |edit: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut v = v.clone();
        edit(v.as_object_mut().unwrap());
        let mut ck = Checker::default();
        let read = read_look(&mut ck, &v, 50);
        assert!(read.is_none(), "{v}");
        ck.out.into_iter().map(|d| d.path).collect::<Vec<_>>()
    };
    let at = |k: &str| format!("statistics.family_wise.{k}");
    assert_eq!(
        named(&|fw| {
            fw.remove("look");
        }),
        [at("look")]
    );
    assert_eq!(
        named(&|fw| {
            fw.remove("spending");
        }),
        [at("spending")]
    );
    assert_eq!(
        named(&|fw| {
            fw.remove("information_fractions");
            fw.remove("boundaries");
        }),
        [at("information_fractions")]
    );
    assert_eq!(
        named(&|fw| {
            fw.insert("look".into(), json!(50));
            fw.insert("closing".into(), json!(true));
        }),
        [at("closing")]
    );
}

/// A fresh plan's looks: each fraction joins the history, the pass side's
/// its own; a probe is at the full levels; a replan from a probe moves
/// the fractions, and a resumed plan continues as the run left it.
#[test]
fn a_plan_places_its_looks_and_resumes_where_it_stood() {
    let clock = (0.4, 60.0, Some(0.4));
    let mut plan = Plan::new(50, OBF, true);
    let first = plan.next(1, clock);
    assert_eq!(first.fractions(), Some(&[1.0 / 50.0][..]));
    assert_eq!(first.pass_fractions(), Some(&[1.0 / 50.0][..]));
    assert_eq!((first.number(), first.planned_looks()), (1, 50));
    let probe = plan.probe(2);
    assert_eq!(probe.levels(0.05, 3), fixed_levels(0.05, 3));
    assert_eq!(plan.design_rounds(), None);
    // As the first look left it, with the design needing 8 rounds, the
    // pass side 0.76 of them.
    let recorded = |fractions: Vec<f64>, pass: Vec<f64>| Recorded {
        fractions,
        design_rounds: Some(8),
        pass: Some((pass, pass_design_rounds(Some(8), Some(0.76)))),
    };
    let mut plan = Plan::resume(50, OBF, recorded(vec![1.0 / 50.0], vec![1.0 / 50.0]));
    assert_eq!(plan.pass_design_rounds(), Some(7));
    let second = plan.next(2, clock);
    assert_eq!(second.fraction(), Some((1.0 / 50.0, 2.0 / 8.0)));
    assert_eq!(second.pass_fractions(), Some(&[1.0 / 50.0, 2.0 / 7.0][..]));
    let resumed = Plan::resume(
        50,
        OBF,
        recorded(vec![1.0 / 50.0, 2.0 / 8.0], vec![1.0 / 50.0, 2.0 / 7.0]),
    );
    assert_eq!(resumed, plan);
    // Looks by the budget: the pass side spends by the same fractions.
    let mut budget = Plan::new(50, OBF, false);
    assert_eq!(budget.next(1, clock).pass_fractions(), None);
}

#[test]
fn information_fraction_is_the_share_of_the_rounds_the_run_will_have() {
    use super::information_fraction as f;
    // No clock measured yet: the request budget's rounds.
    assert_eq!(f(1, 50, (0.5, 6.0, None), None, 0.0), 1.0 / 50.0);
    // 0.4 min per round, 5.6 min left: 14 more rounds → 15 in all,
    // fewer than the 50 the request budget allows.
    let t = f(1, 50, (0.4, 6.0, Some(0.4)), None, 0.0);
    assert!((t - 1.0 / 15.0).abs() < 1e-12, "{t}");
    // The request budget binds first.
    assert_eq!(f(2, 4, (0.8, 60.0, Some(0.4)), None, 0.0), 0.5);
    // The budget ends the run at this look: all that is left.
    assert_eq!(f(4, 4, (1.6, 60.0, Some(0.4)), None, 0.5), 1.0);
    assert_eq!(f(3, 50, (6.1, 6.0, Some(2.0)), None, 0.1), 1.0);
    // Below 1 while another round will run, even if the clock is nearly spent.
    assert!(f(3, 50, (5.99, 6.0, Some(2.0)), None, 0.1) < 1.0);
    // Rounds got faster (more looks ahead): what is left spread evenly
    // over them, above the previous look.
    let t = f(2, 50, (0.8, 6.0, Some(0.1)), None, 0.3);
    assert!((t - (0.3 + 0.7 / 49.0)).abs() < 1e-12, "{t}");
    // The design needs more rounds than it did (5 of 12 done, now 19):
    // not held at the previous look's 5/12, which would spend nothing,
    // but 5/12 plus an even share of the rest over the 14 looks left.
    let t = f(6, 50, (2.4, 60.0, Some(0.4)), Some(19), 5.0 / 12.0);
    assert!(
        (t - (5.0 / 12.0 + (7.0 / 12.0) / 14.0)).abs() < 1e-12,
        "{t}"
    );
    // A constant plan: the same as k / rounds.
    let t = f(6, 50, (2.4, 60.0, Some(0.4)), Some(19), 5.0 / 19.0);
    assert!((t - 6.0 / 19.0).abs() < 1e-12, "{t}");
    // The design needs 8 rounds of the 50 the budget allows: its share.
    assert_eq!(f(2, 50, (0.8, 60.0, Some(0.4)), Some(8), 0.0), 0.25);
    // The clock binds before the design's rounds: the clock's share.
    let t = f(1, 50, (0.4, 6.0, Some(0.4)), Some(20), 0.0);
    assert!((t - 1.0 / 15.0).abs() < 1e-12, "{t}");
    // The look at the design's rounds (or past them) spends what is left.
    assert_eq!(f(8, 50, (3.2, 60.0, Some(0.4)), Some(8), 0.2), 1.0);
    assert_eq!(f(3, 50, (1.2, 60.0, Some(0.4)), Some(1), 0.2), 1.0);
}

#[test]
fn design_rounds_scale_the_rounds_done_by_the_growth_the_gate_needs() {
    assert_eq!(design_rounds(4, 8, Some(1.6)), Some(7));
    assert_eq!(design_rounds(4, 8, Some(0.5)), Some(2));
    assert_eq!(design_rounds(3, 6, Some(0.0)), Some(1));
    // Round 2's 4 blocks plan, whatever the window.
    assert_eq!(design_rounds(2, 4, Some(0.3)), Some(1));
    assert_eq!(design_rounds(2, 4, Some(2.5)), Some(5));
    // Too few blocks to plan by: the budget plans the looks.
    assert_eq!(design_rounds(1, 2, Some(1.6)), None);
    assert_eq!(design_rounds(4, 8, None), None);
    assert_eq!(design_rounds(4, 8, Some(f64::NAN)), None);
}

#[test]
fn the_pass_side_needs_its_share_of_the_designs_rounds() {
    assert_eq!(pass_design_rounds(Some(40), Some(0.76)), Some(31));
    assert_eq!(pass_design_rounds(Some(1), Some(0.1)), Some(1));
    // Never more than the design's own.
    assert_eq!(pass_design_rounds(Some(10), Some(1.5)), Some(10));
    assert_eq!(pass_design_rounds(None, Some(0.76)), None);
    assert_eq!(pass_design_rounds(Some(10), None), None);
    assert_eq!(pass_design_rounds(Some(10), Some(f64::NAN)), None);
}
