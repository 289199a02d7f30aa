//! The interleaved schedule of `qualify`, as pure functions: which blocks of
//! requests run in what order, the adaptive mode's budget and stopping rule,
//! and how one side's blocks pool into one artifact's cells.
//!
//! Both runtimes are up at once. Each cell's requests are cut into blocks of
//! `window` requests; block `k` runs on one runtime, then block `k` on the
//! other, with the order flipping every block (A B, B A, A B, …: pairs run
//! A B B A), so a drift in time hits both sides alike and never both load the
//! machine at once. Block `k` holds request indices `k × window ..` on both
//! sides, so the block index is a cluster id shared by the two sides: block
//! `k` of the baseline pairs with block `k` of the candidate.

use crate::artifact::CellResult;
pub use crate::config::plan::BLOCKS_PER_ROUND;
use crate::config::plan::{BASELINE, CANDIDATE, DefaultWindow, RoundCell, Window, round_requests};
use crate::config::suite::CellSpec;
use crate::measure::aggregate;
use crate::measure::record::RequestRecord;
use crate::stats::GateOutcome;

/// One cell as the interleaved schedule cuts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellLayout {
    pub name: String,
    /// Requests per block.
    pub window: usize,
    /// Requests per side in a fixed-size run (the suite's `requests`).
    pub requests: usize,
}

/// Each cell's block size: the plan's `window` for it, else
/// [`default_window`](crate::config::plan::default_window) of
/// its concurrency and arrivals.
pub fn layout(cells: &[CellSpec], window: Option<&Window>) -> Vec<CellLayout> {
    layout_by(cells, window, DefaultWindow::default())
}

/// [`layout`] with the default `rule` a qualification recorded (`verify --runs`).
pub fn layout_by(
    cells: &[CellSpec],
    window: Option<&Window>,
    rule: DefaultWindow,
) -> Vec<CellLayout> {
    cells
        .iter()
        .map(|c| {
            let w = window
                .and_then(|w| w.of(&c.name))
                .unwrap_or_else(|| rule.window(c.concurrency, !c.open_loop()))
                .max(1);
            // Conversations: whole sessions per block, so a block's turns
            // follow each other on one runtime as a user's would.
            let turns = c.workload.as_ref().and_then(|w| w.turns()).unwrap_or(1) as usize;
            CellLayout {
                name: c.name.clone(),
                window: w.div_ceil(turns) * turns,
                // A capacity cell is searched segment by segment
                // (`qualify::measure_capacity`): no blocks.
                requests: if c.capacity.is_some() { 0 } else { c.requests },
            }
        })
        .collect()
}

/// One block: requests `first .. first + count` of one cell on one side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub cell: String,
    /// The block's index in its cell: its cluster id, the same on both sides.
    pub k: u32,
    pub side: &'static str,
    pub first: usize,
    pub count: usize,
}

/// The two sides of block `k`, in the order they run: baseline first for
/// even `k`, candidate first for odd `k`.
pub fn pair(k: u32) -> [&'static str; 2] {
    if k.is_multiple_of(2) {
        [BASELINE, CANDIDATE]
    } else {
        [CANDIDATE, BASELINE]
    }
}

fn push_pair(out: &mut Vec<Block>, cell: &str, k: u32, first: usize, count: usize) {
    for side in pair(k) {
        out.push(Block {
            cell: cell.to_string(),
            k,
            side,
            first,
            count,
        });
    }
}

/// A fixed-size run: every cell's `requests` per side in blocks of its
/// window (the last block of a cell may be shorter), one cell after another.
pub fn fixed_schedule(cells: &[CellLayout]) -> Vec<Block> {
    let mut out = Vec::new();
    for c in cells {
        let mut first = 0;
        let mut k = 0;
        while first < c.requests {
            let count = c.window.min(c.requests - first);
            push_pair(&mut out, &c.name, k, first, count);
            first += count;
            k += 1;
        }
    }
    out
}

/// Round `round` (from 0) of an adaptive run: for every cell, its
/// [`BLOCKS_PER_ROUND`] blocks from `round ×` that, of a whole window each,
/// A B B A.
pub fn round_schedule(cells: &[CellLayout], round: usize) -> Vec<Block> {
    let mut out = Vec::new();
    for c in cells {
        for k in BLOCKS_PER_ROUND * round..BLOCKS_PER_ROUND * (round + 1) {
            push_pair(&mut out, &c.name, k as u32, k * c.window, c.window);
        }
    }
    out
}

/// Requests per side of `cell` once `rounds` adaptive rounds are done.
pub fn adaptive_requests(cell: &CellLayout, rounds: usize) -> usize {
    rounds.saturating_mul(round_requests(cell.window))
}

/// Each cell as an adaptive round sends it, for the budget's check
/// (`config::plan::check_round_budget`): `cells` as [`layout_by`] cut
/// `specs` under `window`.
pub fn round_cells<'a>(
    specs: &'a [CellSpec],
    cells: &[CellLayout],
    window: Option<&Window>,
) -> Vec<RoundCell<'a>> {
    specs
        .iter()
        .zip(cells)
        .map(|(s, c)| RoundCell {
            name: &s.name,
            window: c.window,
            window_given: window.is_some_and(|w| w.of(&s.name).is_some()),
            concurrency: s.concurrency,
            closed_loop: !s.open_loop(),
            turns: s.workload.as_ref().and_then(|w| w.turns()).unwrap_or(1) as usize,
        })
        .collect()
}

/// Requests per side of each cell: the suite's, or what `rounds` adaptive rounds hold.
pub fn totals(cells: &[CellLayout], rounds: Option<usize>) -> Vec<usize> {
    cells
        .iter()
        .map(|c| match rounds {
            Some(r) => adaptive_requests(c, r),
            None => c.requests,
        })
        .collect()
}

/// The most rounds `max_requests` (per side per cell) allows: no cell goes
/// over it, so 0 when one round of some cell would (a plan refused before
/// anything is sent: `config::plan::check_round_budget`); 1 without cells.
/// Every round is a look at the data, so this is also the number of looks
/// the sequential error control must allow for.
pub fn max_rounds(cells: &[CellLayout], max_requests: usize) -> usize {
    cells
        .iter()
        .map(|c| max_requests / round_requests(c.window).max(1))
        .min()
        .unwrap_or(1)
}

/// Rounds the budget still allows after round `done`: the fewer of what
/// `max_rounds` leaves and what the clock leaves at `round_minutes` a round
/// (the round that crosses `max_minutes` still runs, as [`stop_after`] lets
/// it; unknown: the requests alone); 0 once either is spent.
pub fn rounds_left(
    done: usize,
    max_rounds: usize,
    (minutes, max_minutes, round_minutes): (f64, f64, Option<f64>),
) -> usize {
    let by_requests = max_rounds.saturating_sub(done);
    if minutes >= max_minutes {
        return 0;
    }
    match round_minutes.filter(|r| r.is_finite() && *r > 0.0) {
        Some(r) => by_requests.min(((max_minutes - minutes) / r).ceil().min(1e9) as usize),
        None => by_requests,
    }
}

/// Why an adaptive run stopped adding rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The performance gate resolved: pass or fail.
    Resolved(GateOutcome),
    /// Another round would take a cell over `max_requests`.
    MaxRequests,
    /// `max_minutes` of wall clock are spent.
    MaxMinutes,
    /// The rounds the design needs are done (`looks_by = "design"`): the
    /// look at them spent all the error, and the gate is still undecided.
    DesignInformation,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Resolved(GateOutcome::Pass) => "resolved: pass",
            StopReason::Resolved(GateOutcome::Fail) => "resolved: fail",
            StopReason::Resolved(GateOutcome::Inconclusive) => "resolved: inconclusive",
            StopReason::MaxRequests => "budget spent: max_requests",
            StopReason::MaxMinutes => "budget spent: max_minutes",
            StopReason::DesignInformation => "the information the design needs is reached",
        }
    }
}

/// After `rounds_done` rounds and a look that found `outcome`: stop, and why,
/// or `None` to run another round. A decided gate stops first; then the
/// request budget; then the clock; then the rounds the design needs
/// (`design_rounds`, planned by this look's spread: this look was the last).
pub fn stop_after(
    rounds_done: usize,
    max_rounds: usize,
    minutes: f64,
    max_minutes: f64,
    design_rounds: Option<usize>,
    outcome: Option<GateOutcome>,
) -> Option<StopReason> {
    match outcome {
        Some(o @ (GateOutcome::Pass | GateOutcome::Fail)) => Some(StopReason::Resolved(o)),
        _ if rounds_done >= max_rounds => Some(StopReason::MaxRequests),
        _ if minutes >= max_minutes => Some(StopReason::MaxMinutes),
        _ if design_rounds.is_some_and(|d| rounds_done >= d) => Some(StopReason::DesignInformation),
        _ => None,
    }
}

/// The blocks per side every cell has once `rounds` adaptive rounds are
/// done (none without cells).
pub fn blocks_after(cells: &[CellLayout], rounds: usize) -> usize {
    if cells.is_empty() {
        0
    } else {
        rounds * BLOCKS_PER_ROUND
    }
}

/// The block (cluster id) of request `index` of a cell cut in blocks of `window`.
pub fn block_of(index: usize, window: usize) -> u32 {
    (index / window.max(1)) as u32
}

/// One side's cell, pooled over its blocks: requests `0 .. total` of the
/// cell, aggregated as one cell of `total` requests, each sample's cluster
/// its block. Records of other cells, and beyond `total`, are ignored.
pub fn pool_cell(
    spec: &CellSpec,
    window: usize,
    total: usize,
    records: &[RequestRecord],
) -> CellResult {
    let mut pooled = spec.clone();
    pooled.requests = total;
    let recs: Vec<RequestRecord> = records
        .iter()
        .filter(|r| r.cell == spec.name && r.index < total)
        .cloned()
        .collect();
    aggregate::cell_clustered(&pooled, &recs, |r| block_of(r.index, window))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::metric;
    use crate::measure::record::{Outcome, StreamCapture};
    use crate::report::design::DESIGN_FIRST_BLOCKS;

    fn cl(name: &str, window: usize, requests: usize) -> CellLayout {
        CellLayout {
            name: name.into(),
            window,
            requests,
        }
    }

    fn short(b: &[Block]) -> Vec<String> {
        b.iter()
            .map(|b| {
                format!(
                    "{} {} k{} {}+{}",
                    b.cell,
                    &b.side[..1],
                    b.k,
                    b.first,
                    b.count
                )
            })
            .collect()
    }

    #[test]
    fn fixed_blocks_alternate_a_b_b_a_and_cover_every_request_once() {
        let s = fixed_schedule(&[cl("x", 4, 10), cl("y", 2, 4)]);
        assert_eq!(
            short(&s),
            [
                "x b k0 0+4",
                "x c k0 0+4",
                "x c k1 4+4",
                "x b k1 4+4",
                "x b k2 8+2",
                "x c k2 8+2",
                "y b k0 0+2",
                "y c k0 0+2",
                "y c k1 2+2",
                "y b k1 2+2",
            ]
        );
        for side in [BASELINE, CANDIDATE] {
            let mut idx: Vec<usize> = s
                .iter()
                .filter(|b| b.cell == "x" && b.side == side)
                .flat_map(|b| b.first..b.first + b.count)
                .collect();
            idx.sort();
            assert_eq!(idx, (0..10).collect::<Vec<_>>());
        }
        // The block holding a request is its cluster, on both sides.
        for b in &s {
            for i in b.first..b.first + b.count {
                let w = if b.cell == "x" { 4 } else { 2 };
                assert_eq!(block_of(i, w), b.k);
            }
        }
        assert!(fixed_schedule(&[cl("z", 4, 0)]).is_empty());
    }

    #[test]
    fn the_design_plans_from_round_2_in_every_cell() {
        // A pair of blocks a round in every cell: the design plans at round 2.
        let cells = [cl("a", 1, 16), cl("b", 4, 16)];
        assert_eq!(blocks_after(&cells, 1), 2);
        assert_eq!(blocks_after(&cells, 2), DESIGN_FIRST_BLOCKS);
        assert_eq!(blocks_after(&cells[..1], 1), 2);
    }

    #[test]
    fn rounds_hold_a_pair_of_blocks_per_cell_and_the_budget_bounds_them() {
        let cells = [cl("x", 2, 99), cl("y", 4, 99)];
        assert_eq!(
            short(&round_schedule(&cells, 1)),
            [
                "x b k2 4+2",
                "x c k2 4+2",
                "x c k3 6+2",
                "x b k3 6+2",
                "y b k2 8+4",
                "y c k2 8+4",
                "y c k3 12+4",
                "y b k3 12+4",
            ]
        );
        // Round r follows round r-1 without gap or overlap.
        let all: Vec<Block> = (0..3).flat_map(|r| round_schedule(&cells, r)).collect();
        let idx: Vec<usize> = all
            .iter()
            .filter(|b| b.cell == "y" && b.side == CANDIDATE)
            .flat_map(|b| b.first..b.first + b.count)
            .collect();
        assert_eq!(
            idx,
            (0..adaptive_requests(&cells[1], 3)).collect::<Vec<_>>()
        );
        // A pair of blocks a round whatever the window: 2 requests for
        // blocks of 1, 8 for blocks of 4, 16 for blocks of 8.
        let per_round = |w| adaptive_requests(&cl("w", w, 99), 1);
        assert_eq!([1, 2, 3, 4, 8].map(per_round), [2, 4, 6, 8, 16]);
        // 40 requests per side per cell: x (4 a round) allows 10 rounds, y
        // (8 a round) 5, so the two 5; blocks of 8 (16 a round) 2.
        assert_eq!(max_rounds(&cells, 40), 5);
        assert_eq!(max_rounds(&[cl("x", 2, 99), cl("z", 8, 99)], 40), 2);
        assert_eq!(max_rounds(&[cl("o", 1, 99)], 40), 20);
        assert_eq!(max_rounds(&[], 3), 1);
    }

    #[test]
    fn no_budget_lets_a_cell_past_max_requests() {
        // Concurrency 64: blocks of 128, 256 requests per side a round. A
        // budget of 10 allows no round at all, not one of 256.
        let c64 = cl("p512-c64", 128, 99);
        assert_eq!(max_rounds(std::slice::from_ref(&c64), 10), 0);
        assert_eq!(max_rounds(&[cl("x", 2, 99), cl("y", 4, 99)], 3), 0);
        for m in [1, 2, 3, 10, 40, 255, 256, 257, 1000] {
            for cells in [vec![c64.clone()], vec![cl("a", 1, 9), cl("b", 8, 9)]] {
                let r = max_rounds(&cells, m);
                for c in &cells {
                    assert!(
                        adaptive_requests(c, r) <= m,
                        "{} at {m}: {r} rounds",
                        c.name
                    );
                }
            }
        }
    }

    #[test]
    fn the_rounds_left_are_the_fewer_of_requests_and_clock() {
        // 12 rounds by requests, 2 done: 10 left, unless the clock says fewer.
        assert_eq!(rounds_left(2, 12, (1.0, 30.0, None)), 10);
        assert_eq!(rounds_left(2, 12, (1.0, 30.0, Some(0.5))), 10);
        // 29 minutes left at 10 a round: the third round crosses the clock and still runs.
        assert_eq!(rounds_left(2, 12, (1.0, 30.0, Some(10.0))), 3);
        assert_eq!(rounds_left(2, 12, (30.0, 30.0, Some(1.0))), 0);
        assert_eq!(rounds_left(12, 12, (1.0, 30.0, Some(1.0))), 0);
        assert_eq!(rounds_left(2, 12, (1.0, 30.0, Some(f64::NAN))), 10);
    }

    #[test]
    fn adaptive_stops_on_a_decided_gate_or_a_spent_budget() {
        use GateOutcome::*;
        // Today's compare leaves the outcome unset: only the budget stops it.
        let mut rounds = 0;
        let why = loop {
            rounds += 1;
            if let Some(why) = stop_after(rounds, 4, 0.0, 30.0, None, None) {
                break why;
            }
        };
        assert_eq!((rounds, why), (4, StopReason::MaxRequests));
        assert_eq!(stop_after(3, 4, 1.0, 30.0, None, None), None);
        assert_eq!(
            stop_after(4, 4, 1.0, 30.0, None, None),
            Some(StopReason::MaxRequests)
        );
        assert_eq!(
            stop_after(2, 4, 30.0, 30.0, None, Some(Inconclusive)),
            Some(StopReason::MaxMinutes)
        );
        assert_eq!(
            stop_after(1, 4, 0.1, 30.0, None, Some(Pass)),
            Some(StopReason::Resolved(Pass))
        );
        assert_eq!(
            stop_after(4, 4, 99.0, 30.0, None, Some(Fail)),
            Some(StopReason::Resolved(Fail))
        );
        assert_eq!(stop_after(1, 4, 0.1, 30.0, None, Some(Inconclusive)), None);
        // The design's rounds are done and the gate is undecided: stop.
        assert_eq!(
            stop_after(3, 4, 0.1, 30.0, Some(3), Some(Inconclusive)),
            Some(StopReason::DesignInformation)
        );
        assert_eq!(stop_after(2, 4, 0.1, 30.0, Some(3), None), None);
    }

    fn rec(cell: &str, index: usize, ttft: f64, ok: bool) -> RequestRecord {
        RequestRecord {
            cell: cell.into(),
            index,
            send_offset_ms: index as f64,
            queue_ms: 0.0,
            target_prompt_tokens: Some(16),
            template_prompt_tokens: None,
            turn: None,
            capture: StreamCapture {
                ttft_ms: Some(ttft),
                ttfo_ms: Some(ttft),
                e2e_ms: Some(ttft + 50.0),
                prompt_tokens: Some(16),
                completion_tokens: Some(8),
                ..Default::default()
            },
            outcome: if ok {
                Outcome::Ok
            } else {
                Outcome::RequestError
            },
            detail: None,
            capacity: None,
        }
    }

    fn spec(name: &str, requests: usize) -> CellSpec {
        let suite = crate::config::suite::Suite::parse(
            &format!(
                "name = \"s\"\n[[cell]]\nname = \"{name}\"\nprompt_tokens = 16\nmax_tokens = 8\nrequests = {requests}\n"
            ),
            "t",
        )
        .unwrap();
        suite.cells[0].clone()
    }

    #[test]
    fn pooled_sides_share_block_ids() {
        let sp = spec("x", 5);
        let cells = layout(std::slice::from_ref(&sp), Some(&Window::All(2)));
        assert_eq!(cells[0].window, 2);
        // Journal order is completion order, and holds another cell and a
        // request beyond the total (never pooled).
        let base: Vec<RequestRecord> = [4, 1, 0, 3, 2, 7]
            .iter()
            .map(|&i| rec("x", i, 100.0 + i as f64, true))
            .chain([rec("other", 0, 1.0, true)])
            .collect();
        let cand: Vec<RequestRecord> = (0..5)
            .map(|i| rec("x", i, 200.0 + i as f64, i != 3))
            .collect();
        let b = pool_cell(&sp, 2, 5, &base);
        let c = pool_cell(&sp, 2, 5, &cand);
        assert_eq!((b.requests, b.shape.requests, b.succeeded), (5, 5, 5));
        assert_eq!((c.requests, c.succeeded, c.failed), (5, 4, 1));
        assert_eq!(
            b.samples[metric::TTFT_MS],
            [100.0, 101.0, 102.0, 103.0, 104.0]
        );
        assert_eq!(b.sample_clusters[metric::TTFT_MS], [0, 0, 1, 1, 2]);
        // The candidate's failed request 3 leaves a hole; the ids stay the blocks'.
        assert_eq!(c.sample_clusters[metric::TTFT_MS], [0, 0, 1, 2]);
        assert_eq!(c.samples[metric::TTFT_MS], [200.0, 201.0, 202.0, 204.0]);
        for (k, v) in &b.samples {
            assert_eq!(b.sample_clusters[k].len(), v.len(), "{k}");
        }
        // Fewer requests recorded than the total: not eligible, and says so.
        let partial = pool_cell(&sp, 2, 5, &base[..3]);
        assert!(!partial.performance_eligible);
        // A default window follows the concurrency and the arrivals: one
        // request at concurrency 1 closed-loop, else at least 4.
        assert_eq!(layout(std::slice::from_ref(&sp), None)[0].window, 1);
        // A qualification recorded before the rule pools as it ran.
        let twice = layout_by(
            std::slice::from_ref(&sp),
            None,
            DefaultWindow::TwiceConcurrency,
        );
        assert_eq!(twice[0].window, 4);
        let mut wide = sp.clone();
        wide.concurrency = 4;
        let mut open = sp;
        open.arrival = "poisson:2".into();
        assert_eq!(
            layout(&[wide, open], None)
                .iter()
                .map(|c| c.window)
                .collect::<Vec<_>>(),
            [8, 4]
        );
    }
}
