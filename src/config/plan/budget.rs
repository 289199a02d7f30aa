//! The adaptive budget against one round: what a round sends per side to a
//! cell, and a `max_requests` that cannot hold one round refused before
//! anything is sent, naming the numbers and what would fit.

use super::model::default_window;

/// Blocks per adaptive round, in every cell: one A B B A pair, so each
/// side has run first once, and each cell runs for about as long whatever
/// its window (two turns per side). Blocks of one request then look every 2
/// requests per side: a look costs milliseconds against a request's
/// second, and on a quiet simulated host rounds of 2 requests decide at 6
/// per side where rounds of 8 decide at 8 (the design planned from round 3
/// in both; `docs/gate-calibration-results.md`). Blocks of 4 or more hold
/// 8 or more requests a round.
pub const BLOCKS_PER_ROUND: usize = 2;

/// Requests per side one adaptive round sends to a cell cut in blocks of `window`.
pub fn round_requests(window: usize) -> usize {
    BLOCKS_PER_ROUND.saturating_mul(window)
}

/// One cell as an adaptive round sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundCell<'a> {
    pub name: &'a str,
    /// Requests per block.
    pub window: usize,
    /// The plan's `window` set it (else the default rule did).
    pub window_given: bool,
    pub concurrency: usize,
    pub closed_loop: bool,
    /// A conversation's turns (1 otherwise): a block holds whole sessions.
    pub turns: usize,
}

/// Where the budget was given, for the words of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSource {
    /// `qualify --max-requests N` (its cells from `--cells`).
    Flag,
    /// A plan's `[adaptive] max_requests` (its cells from the suite).
    Plan,
}

/// Every cell's round within `max_requests` per side, or the first cell
/// whose one round is not, in words: the round's requests, and what would
/// fit (a larger budget, a smaller window that still reaches the cell's
/// load, a lower concurrency). A budget below one round is not a budget:
/// without this an adaptive run sends its first round whatever it costs.
pub fn check_round_budget(
    cells: &[RoundCell],
    max_requests: usize,
    source: BudgetSource,
) -> Result<(), String> {
    let Some(c) = cells
        .iter()
        .find(|c| round_requests(c.window) > max_requests)
    else {
        return Ok(());
    };
    let round = round_requests(c.window);
    let (budget, raise) = match source {
        BudgetSource::Flag => (
            format!("--max-requests {max_requests}"),
            format!("--max-requests {round}"),
        ),
        BudgetSource::Plan => (
            format!("[adaptive] max_requests = {max_requests}"),
            format!("max_requests = {round}"),
        ),
    };
    let window = if c.window_given {
        "the plan's window".to_string()
    } else {
        format!("the default window at concurrency {}", c.concurrency)
    };
    let mut fits = vec![format!("{raise} or more")];
    if let (BudgetSource::Plan, Some(w)) = (source, window_fit(c, max_requests)) {
        let least = least_window(c);
        fits.push(format!(
            "[window] {} = {w} (a block of at least {least} request(s) reaches the cell's load)",
            c.name
        ));
    }
    if let Some(n) = concurrency_fit(c, max_requests) {
        fits.push(match source {
            BudgetSource::Flag => format!("cells at concurrency {n} or less (--cells PROMPTx{n})"),
            BudgetSource::Plan => format!("the cell at concurrency {n} or less"),
        });
    }
    Err(format!(
        "{budget} (requests per side per cell) cannot hold one adaptive round of cell {}: a round is {BLOCKS_PER_ROUND} blocks of {} requests per side ({window}) = {round}, and every round is sent whole; nothing was sent. Give {}",
        c.name,
        c.window,
        fits.join(", or ")
    ))
}

/// The smallest window that reaches the cell's load: its concurrency
/// (closed loop) in whole sessions; one request (open loop).
fn least_window(c: &RoundCell) -> usize {
    let least = if c.closed_loop { c.concurrency } else { 1 };
    let turns = c.turns.max(1);
    least.max(1).div_ceil(turns) * turns
}

/// The largest window whose round fits `max_requests`, if it still
/// reaches the cell's load.
fn window_fit(c: &RoundCell, max_requests: usize) -> Option<usize> {
    let turns = c.turns.max(1);
    let most = max_requests / BLOCKS_PER_ROUND / turns * turns;
    (most >= least_window(c)).then_some(most)
}

/// The highest concurrency below the cell's whose default window's round
/// fits `max_requests` (closed-loop cells at the default window only).
fn concurrency_fit(c: &RoundCell, max_requests: usize) -> Option<usize> {
    if c.window_given || !c.closed_loop {
        return None;
    }
    let turns = c.turns.max(1);
    (1..c.concurrency).rev().find(|&n| {
        let w = default_window(n, true).div_ceil(turns) * turns;
        round_requests(w) <= max_requests
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(name: &str, concurrency: usize) -> RoundCell<'_> {
        RoundCell {
            name,
            window: default_window(concurrency, true),
            window_given: false,
            concurrency,
            closed_loop: true,
            turns: 1,
        }
    }

    #[test]
    fn a_round_is_a_pair_of_whole_windows() {
        // Concurrency 64: blocks of 128 (twice it), 256 requests per side a round.
        assert_eq!(round_requests(cell("c64", 64).window), 256);
        assert_eq!(round_requests(cell("c4", 4).window), 16);
        assert_eq!(round_requests(cell("c1", 1).window), 2);
        assert_eq!(round_requests(usize::MAX), usize::MAX);
    }

    #[test]
    fn a_budget_below_one_round_is_refused_naming_what_fits() {
        let cells = [cell("p512-c1", 1), cell("p512-c64", 64)];
        let why = check_round_budget(&cells, 10, BudgetSource::Flag).unwrap_err();
        assert_eq!(
            why,
            "--max-requests 10 (requests per side per cell) cannot hold one adaptive round of cell p512-c64: a round is 2 blocks of 128 requests per side (the default window at concurrency 64) = 256, and every round is sent whole; nothing was sent. Give --max-requests 256 or more, or cells at concurrency 2 or less (--cells PROMPTx2)"
        );
        assert!(check_round_budget(&cells, 256, BudgetSource::Flag).is_ok());
        assert!(check_round_budget(&cells[..1], 2, BudgetSource::Flag).is_ok());
        // One request per side cannot hold even a pair of blocks of one.
        let why = check_round_budget(&cells[..1], 1, BudgetSource::Flag).unwrap_err();
        assert!(why.ends_with("Give --max-requests 2 or more"), "{why}");
        // A plan's window can be smaller, but never below the concurrency.
        let why = check_round_budget(&cells, 200, BudgetSource::Plan).unwrap_err();
        assert!(
            why.starts_with("[adaptive] max_requests = 200 (requests per side per cell) cannot hold one adaptive round of cell p512-c64: a round is 2 blocks of 128")
                && why.ends_with("Give max_requests = 256 or more, or [window] p512-c64 = 100 (a block of at least 64 request(s) reaches the cell's load), or the cell at concurrency 50 or less"),
            "{why}"
        );
        let why = check_round_budget(&cells, 100, BudgetSource::Plan).unwrap_err();
        assert!(!why.contains("[window]"), "{why}");
        // A window the plan gave: no concurrency follows from it.
        let given = RoundCell {
            window: 300,
            window_given: true,
            ..cell("w", 4)
        };
        let why = check_round_budget(&[given], 200, BudgetSource::Plan).unwrap_err();
        assert!(
            why.contains("(the plan's window) = 600")
                && why.ends_with(
                    "or [window] w = 100 (a block of at least 4 request(s) reaches the cell's load)"
                ),
            "{why}"
        );
    }
}
