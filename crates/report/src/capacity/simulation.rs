//! The search and its intervals against a queue whose capacity is known.
//!
//! The model: `slots` requests served at once, each for an exponential time
//! of mean `1/mu` seconds (a fixed per-token speed, geometric output
//! lengths), a fixed prefill `prefill_s` before the first token, Poisson
//! arrivals, requests beyond the slots waiting first come first served.
//! TTFT is the wait plus the prefill. In steady state (M/M/c) the wait
//! exceeds `t` with probability `C(c, λ/μ)·exp(−(cμ − λ)t)` (Erlang's C
//! formula), so the attainment of `TTFT ≤ T` at rate λ, and the rate where
//! it crosses the minimum, are computed, not assumed. Each segment starts
//! from an empty queue (a runtime switched in, as a qualification does) and
//! leaves its warm-up out.

use super::estimate::{CapacityEstimate, LogCapacity, estimate};
use super::level::Segment;
use super::search::{Ended, Next, SearchRule, Tried};
use crate::stats::Xoshiro256;

#[derive(Debug, Clone, Copy)]
pub struct Queue {
    pub slots: usize,
    pub mu: f64,
    pub prefill_s: f64,
    pub ttft_slo_s: f64,
}

impl Queue {
    /// Steady-state share of requests with TTFT within the SLO at rate `lambda`.
    pub fn attainment(&self, lambda: f64) -> f64 {
        let c = self.slots as f64;
        if lambda >= c * self.mu {
            return 0.0;
        }
        let slack = self.ttft_slo_s - self.prefill_s;
        if slack < 0.0 {
            return 0.0;
        }
        1.0 - erlang_c(self.slots, lambda / self.mu) * (-(c * self.mu - lambda) * slack).exp()
    }

    /// The rate at which steady-state attainment equals `m` (bisection: it falls with rate).
    pub fn capacity(&self, m: f64) -> f64 {
        let (mut lo, mut hi) = (1e-9, self.slots as f64 * self.mu);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if self.attainment(mid) >= m {
                lo = mid
            } else {
                hi = mid
            }
        }
        lo
    }

    /// One segment at `lambda` from an empty queue: `warmup` requests left
    /// out, then `of` measured.
    pub fn segment(&self, lambda: f64, warmup: u64, of: u64, rng: &mut Xoshiro256) -> Segment {
        let mut free = vec![0.0f64; self.slots];
        let mut now = 0.0;
        let mut met = 0;
        for k in 0..warmup + of {
            now += exp(rng, lambda);
            let (i, &earliest) = free
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .expect("a slot");
            let start = now.max(earliest);
            free[i] = start + exp(rng, self.mu);
            if k >= warmup && start - now + self.prefill_s <= self.ttft_slo_s {
                met += 1;
            }
        }
        Segment { met, of, warmup }
    }
}

fn exp(rng: &mut Xoshiro256, rate: f64) -> f64 {
    -(1.0 - rng.next_f64()).ln() / rate
}

/// Erlang's C: the probability an arrival waits, `c` servers at offered load `a`.
fn erlang_c(c: usize, a: f64) -> f64 {
    // The Erlang B recursion, then C from B: stable for any c.
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let rho = a / c as f64;
    b / (1.0 - rho + rho * b)
}

/// One side's whole search against `q`.
pub fn search(rule: &SearchRule, q: &Queue, rng: &mut Xoshiro256) -> (Vec<Tried>, Ended) {
    let mut tried: Vec<Tried> = Vec::new();
    loop {
        match rule.next(&tried) {
            Next::Done(e) => return (tried, e),
            Next::Measure(load) => {
                let warmup = rule.spec.warmup_at(load) as u64;
                let s = q.segment(load, warmup, rule.spec.segment_requests as u64, rng);
                Tried::record(&mut tried, load, s);
            }
        }
    }
}

/// A search and its estimate.
pub fn measured(
    rule: &SearchRule,
    q: &Queue,
    confidence: f64,
    seed: u64,
) -> (Vec<Tried>, CapacityEstimate, Option<LogCapacity>) {
    let mut rng = Xoshiro256::new(seed);
    let (tried, ended) = search(rule, q, &mut rng);
    let (e, r) = estimate(rule, &tried, ended, confidence);
    (tried, e, r)
}

/// A fixed grid over the same range at the same resolution, each level
/// measured until decided as the search measures one (or `max_segments`):
/// the requests a sweep would spend for the same answer.
pub fn grid_requests(rule: &SearchRule, q: &Queue, rng: &mut Xoshiro256) -> u64 {
    let mut load = rule.spec.low;
    let mut spent = 0;
    while load <= rule.spec.high * (1.0 + 1e-9) {
        let mut t = Tried {
            load,
            segments: Vec::new(),
        };
        loop {
            let warmup = rule.spec.warmup_at(load) as u64;
            let s = q.segment(load, warmup, rule.spec.segment_requests as u64, rng);
            spent += s.of + s.warmup;
            t.segments.push(s);
            let d = rule.judge(std::slice::from_ref(&t), 0).decision;
            if d != super::LevelDecision::NotYetSure || t.segments.len() >= rule.spec.max_segments {
                break;
            }
        }
        load *= rule.spec.step();
    }
    spent
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{IntervalMethod, gate, ratio};
    use crate::stats::GateOutcome;

    const M: f64 = 0.9;

    fn queue(slots: usize) -> Queue {
        Queue {
            slots,
            mu: 1.0,
            prefill_s: 0.1,
            ttft_slo_s: 1.0,
        }
    }

    fn rule() -> SearchRule {
        SearchRule {
            spec: toml::from_str(
                "by = \"rate\"\nlow = 0.5\nhigh = 8\nprecision_percent = 10\nsegment_requests = 32\nwarmup_requests = 32\n",
            )
            .unwrap(),
            min_attainment: M,
            alpha_search: 0.05,
        }
    }

    #[test]
    fn the_models_capacity_is_where_its_attainment_crosses_the_minimum() {
        let q = queue(4);
        let c = q.capacity(M);
        assert!((q.attainment(c) - M).abs() < 1e-9);
        assert!(q.attainment(0.5 * c) > M && q.attainment(1.5 * c) < M);
        // Erlang C at one server is the utilisation.
        assert!((erlang_c(1, 0.3) - 0.3).abs() < 1e-12);
        // Pooling: six slots hold more than 1.5× four's load.
        let r = queue(6).capacity(M) / c;
        assert!(r > 1.5, "{r}");
        // A long simulated run agrees with the formula (steady state).
        let mut rng = Xoshiro256::new(3);
        let s = q.segment(c, 20_000, 200_000, &mut rng);
        let seen = s.met as f64 / s.of as f64;
        assert!((seen - M).abs() < 0.01, "{seen}");
    }

    #[test]
    fn a_search_resolves_within_its_precision_near_the_models_edge() {
        let (q, r) = (queue(4), rule());
        let truth = q.capacity(M);
        for seed in 0..20 {
            let (tried, e, _) = measured(&r, &q, 0.95, seed);
            assert_eq!(e.ended, Ended::Resolved, "{tried:?}");
            let (held, not_held) = (e.held.unwrap(), e.not_held.unwrap());
            assert!(not_held / held <= r.spec.step() * (1.0 + 1e-9), "{e:?}");
            // Steered by point estimates near the edge: within a fifth of it.
            assert!(
                held <= truth * 1.2 && not_held >= truth / 1.2,
                "{truth}: {e:?}"
            );
            assert_eq!(
                e.requests + e.warmup_requests,
                tried
                    .iter()
                    .flat_map(|t| &t.segments)
                    .map(|s| s.of + s.warmup)
                    .sum::<u64>()
            );
        }
    }

    #[test]
    fn the_search_spends_at_most_half_what_a_grid_spends() {
        let (q, r) = (queue(4), rule());
        let mut search: Vec<u64> = (0..20)
            .map(|seed| {
                let (_, e, _) = measured(&r, &q, 0.95, seed);
                e.requests + e.warmup_requests
            })
            .collect();
        let mut grid: Vec<u64> = (0..20)
            .map(|seed| grid_requests(&r, &q, &mut Xoshiro256::new(seed)))
            .collect();
        let (s, g) = (median(&mut search), median(&mut grid));
        assert!(2 * s <= g, "search {s}, grid {g}");
    }

    #[test]
    fn an_a_a_pair_does_not_fail_the_capacity_gate_beyond_its_error() {
        let c = coverage(400, 4, 4, 5.0);
        // The ratio interval is two-sided at 90 %: at most 5 % below the floor.
        assert!(c.outcomes[1] <= 20, "{:?}", c.outcomes);
        assert!(
            covers(c.ratio_covered, c.ratio_given, 0.90),
            "{}/{}",
            c.ratio_covered,
            c.ratio_given
        );
    }

    /// Covered at the stated level, give or take two standard errors of
    /// the simulation's own count.
    fn covers(covered: usize, of: usize, level: f64) -> bool {
        let se = (level * (1.0 - level) / of as f64).sqrt();
        of > 0 && covered as f64 / of as f64 >= level - 2.0 * se
    }

    #[test]
    fn the_intervals_cover_and_the_gate_finds_a_known_capacity_gain() {
        let c = coverage(400, 4, 6, 5.0);
        // Nearly every run gives an interval; each covers at its level.
        assert!(
            c.given >= 360 && c.ratio_given >= 340,
            "{} {}",
            c.given,
            c.ratio_given
        );
        assert!(
            covers(c.side_covered, c.given, 0.95),
            "{}/{}",
            c.side_covered,
            c.given
        );
        assert!(
            covers(c.ratio_covered, c.ratio_given, 0.90),
            "{}/{}",
            c.ratio_covered,
            c.ratio_given
        );
        // Six slots hold 1.71× four's load: found in most runs, never failed.
        assert!(
            c.outcomes[0] >= 320 && c.outcomes[1] == 0,
            "{:?}",
            c.outcomes
        );
    }

    /// Runs of one side and of a pair; what docs/capacity.md reports.
    struct Coverage {
        runs: usize,
        side_covered: usize,
        ratio_covered: usize,
        curve: usize,
        given: usize,
        ratio_given: usize,
        requests: Vec<u64>,
        grid: Vec<u64>,
        outcomes: [usize; 3],
    }

    fn coverage(runs: usize, base_slots: usize, cand_slots: usize, margin: f64) -> Coverage {
        let (qb, qc) = (queue(base_slots), queue(cand_slots));
        let (tb, tc) = (qb.capacity(M), qc.capacity(M));
        let r = rule();
        let mut cov = Coverage {
            runs,
            side_covered: 0,
            ratio_covered: 0,
            curve: 0,
            given: 0,
            ratio_given: 0,
            requests: Vec::new(),
            grid: Vec::new(),
            outcomes: [0; 3],
        };
        for run in 0..runs as u64 {
            let (_, eb, rb) = measured(&r, &qb, 0.95, 1000 + run);
            let (_, ec, rc) = measured(&r, &qc, 0.95, 500_000 + run);
            cov.given += usize::from(eb.interval.is_some());
            if eb.interval.is_some_and(|[l, h]| l <= tb && tb <= h) {
                cov.side_covered += 1;
            }
            if eb.method == Some(IntervalMethod::CurveFieller) {
                cov.curve += 1;
            }
            let ratio = ratio((&eb, rb), (&ec, rc), 0.90);
            cov.ratio_given += usize::from(ratio.interval.is_some());
            if ratio
                .interval
                .is_some_and(|[l, h]| l <= tc / tb && tc / tb <= h)
            {
                cov.ratio_covered += 1;
            }
            cov.outcomes[match gate(&ratio, margin) {
                GateOutcome::Pass => 0,
                GateOutcome::Fail => 1,
                GateOutcome::Inconclusive => 2,
            }] += 1;
            cov.requests.push(eb.requests + eb.warmup_requests);
            if run < 20 {
                let mut rng = Xoshiro256::new(77 + run);
                cov.grid.push(grid_requests(&r, &qb, &mut rng));
            }
        }
        cov
    }

    fn median(v: &mut [u64]) -> u64 {
        v.sort_unstable();
        v[v.len() / 2]
    }

    /// docs/capacity.md's table: `INFERGATE_SIM_TABLES=1 cargo test -p
    /// infergate-report --lib capacity::simulation -- --nocapture`.
    #[test]
    fn coverage_table() {
        if std::env::var("INFERGATE_SIM_TABLES").as_deref() != Ok("1") {
            return;
        }
        println!(
            "| pair | runs | side interval given | side covered when given | of which curve | ratio interval given | ratio covered when given | pass / fail / inconclusive | median requests per side (+warm-up) | grid, same range and resolution |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|");
        for (b, c) in [(4, 6), (4, 4), (6, 4)] {
            let mut k = coverage(400, b, c, 5.0);
            println!(
                "| {b} → {c} slots (true ratio {:.3}) | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} | {} |",
                queue(c).capacity(M) / queue(b).capacity(M),
                k.runs,
                k.given,
                k.side_covered,
                k.curve,
                k.ratio_given,
                k.ratio_covered,
                k.outcomes[0],
                k.outcomes[1],
                k.outcomes[2],
                median(&mut k.requests),
                median(&mut k.grid)
            );
        }
    }
}
