//! Two runtimes' searches on one level schedule: every level is measured on
//! both sides (so the two curves are read at the same loads), each side
//! judging the levels by its own rule, and the next level taken from both
//! sides' states.
//!
//! The rule (`next`): once both sides' own searches have ended, stop; while
//! the level last measured is unfinished for either side, measure it again
//! on both; else measure the new level the side further from its own
//! stopping point asks for: a side whose search has ended asks for none; of
//! two that ask, the one without a bracket, else the one whose bracket is
//! wider on a log scale, the baseline on a tie.
//!
//! Pure: `verify` makes the same schedule again from the journals.

use super::level::Segment;
use super::search::{Next, SearchRule, Tried};

/// How far a side is from its stopping point: unbracketed is farthest,
/// else the log width of its bracket.
fn distance(rule: &SearchRule, tried: &[Tried]) -> f64 {
    match rule.bracket(tried) {
        (Some(lo), Some(hi)) => (hi / lo).ln(),
        _ => f64::INFINITY,
    }
}

/// The next load both sides measure, after the shared levels each side
/// `tried` (the same loads in the same order on both); None once both
/// sides' searches have ended.
pub fn next(rule: &SearchRule, baseline: &[Tried], candidate: &[Tried]) -> Option<f64> {
    let asks = [rule.next(baseline), rule.next(candidate)];
    let last = baseline.last().map(|t| t.load);
    let wanted: Vec<(f64, f64)> = asks
        .iter()
        .zip([baseline, candidate])
        .filter_map(|(n, t)| match n {
            Next::Measure(load) => Some((*load, distance(rule, t))),
            Next::Done(_) => None,
        })
        .collect();
    if let Some(&(load, _)) = wanted.iter().find(|(l, _)| Some(*l) == last) {
        return Some(load);
    }
    // Of two new levels, the farther side's; `max_by` keeps the last of
    // equals, so the candidate's is taken only when strictly farther.
    wanted
        .iter()
        .rev()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|&(load, _)| load)
}

/// Where two sides' segments (load, counts, in the order run) depart from
/// the shared schedule: the same load at each step on both sides, each the
/// one [`next`] names after the steps before it. `Err` names the earliest step
/// that does not.
pub fn replay(
    rule: &SearchRule,
    baseline: &[(f64, Segment)],
    candidate: &[(f64, Segment)],
) -> Result<(), String> {
    if baseline.len() != candidate.len() {
        return Err(format!(
            "the baseline has {} segments and the candidate {}: a shared schedule measures both at every step",
            baseline.len(),
            candidate.len()
        ));
    }
    let mut sides: [Vec<Tried>; 2] = [Vec::new(), Vec::new()];
    for (k, (b, c)) in baseline.iter().zip(candidate).enumerate() {
        let want = next(rule, &sides[0], &sides[1]);
        if b.0 != c.0 || want != Some(b.0) {
            return Err(format!(
                "step {k}: the baseline measured {} and the candidate {}, where the schedule names {}",
                b.0,
                c.0,
                want.map_or("none (both searches had ended)".into(), |l| l.to_string())
            ));
        }
        for (t, (load, seg)) in sides.iter_mut().zip([b, c]) {
            Tried::record(t, *load, *seg);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::Ended;

    fn rule() -> SearchRule {
        SearchRule {
            spec: toml::from_str("by = \"rate\"\nlow = 1\nhigh = 16\nprecision_percent = 10\n")
                .unwrap(),
            min_attainment: 0.9,
            alpha_search: 0.05,
        }
    }

    /// Runs the shared schedule against two step curves (every level at or
    /// below a side's edge meets all its requests, above it none).
    fn run(rule: &SearchRule, edges: [f64; 2]) -> [Vec<Tried>; 2] {
        let mut sides: [Vec<Tried>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..500 {
            let Some(load) = next(rule, &sides[0], &sides[1]) else {
                return sides;
            };
            for (t, edge) in sides.iter_mut().zip(edges) {
                let s = Segment {
                    met: if load <= edge { 16 } else { 0 },
                    of: 16,
                    warmup: 4,
                };
                Tried::record(t, load, s);
            }
        }
        panic!("the shared schedule did not end");
    }

    #[test]
    fn both_sides_resolve_their_own_edges_on_one_schedule() {
        let r = rule();
        for edges in [[2.0, 4.0], [5.5, 5.5], [11.0, 1.3]] {
            let [b, c] = run(&r, edges);
            let loads = |t: &[Tried]| t.iter().map(|t| t.load).collect::<Vec<_>>();
            assert_eq!(loads(&b), loads(&c), "one schedule");
            for (t, edge) in [(&b, edges[0]), (&c, edges[1])] {
                assert_eq!(r.next(t), Next::Done(Ended::Resolved), "{edges:?}");
                let (lo, hi) = r.bracket(t);
                let (lo, hi) = (lo.unwrap(), hi.unwrap());
                assert!(
                    lo <= edge && edge < hi && hi / lo <= 1.1,
                    "{edge}: {lo} {hi}"
                );
            }
            let flat = |t: &[Tried]| -> Vec<(f64, Segment)> {
                t.iter()
                    .flat_map(|l| l.segments.iter().map(move |s| (l.load, *s)))
                    .collect()
            };
            assert_eq!(replay(&r, &flat(&b), &flat(&c)), Ok(()));
            // A level one side measured where the schedule named another is named.
            let mut moved = flat(&c);
            let last = moved.len() - 1;
            moved[last].0 *= 1.5;
            let e = replay(&r, &flat(&b), &moved).unwrap_err();
            assert!(e.starts_with(&format!("step {last}:")), "{e}");
            // No level is measured twice apart.
            let mut l = loads(&b);
            l.sort_by(f64::total_cmp);
            l.dedup();
            assert_eq!(l.len(), b.len(), "{edges:?}");
        }
    }

    #[test]
    fn an_unfinished_level_is_measured_again_on_both() {
        let r = rule();
        let seg = |met| Segment {
            met,
            of: 16,
            warmup: 4,
        };
        let t = |segs: Vec<Segment>| {
            vec![Tried {
                load: 1.0,
                segments: segs,
            }]
        };
        // The baseline ran the level to its last segment; the candidate
        // is a segment short of it and unsure.
        let b = t(vec![seg(16); 8]);
        let c = t(vec![
            seg(16),
            seg(12),
            seg(14),
            seg(16),
            seg(13),
            seg(15),
            seg(14),
        ]);
        assert_eq!(r.next(&b), Next::Measure(16.0));
        assert_eq!(r.next(&c), Next::Measure(1.0));
        assert_eq!(next(&r, &b, &c), Some(1.0));
    }
}
