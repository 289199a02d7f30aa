//! The sequential design of a comparison, in one place: which look at the
//! data it is and the error it may spend there ([`Look`] and its levels);
//! how an adaptive run places its looks (each look's information fraction
//! and the rounds its design needs, re-planned at every look: [`Plan`]);
//! the method the report's numbers are computed with ([`Method`]); and the
//! report's `statistics.family_wise` and `statistics.design` blocks that
//! record them, written by `compare` and read back by `verify`.
//!
//! The gate spends its one-sided error `alpha` over its looks. A fixed-size
//! run has one look and spends all of it there. An adaptive run looks after
//! every round; each look spends `α(tₖ) − α(tₖ₋₁)` of the spending function
//! at its information fraction `tₖ`. With the fractions the run measured
//! (every look's, in order) the levels are exact group-sequential
//! boundaries over them ([`crate::stats::sequential`]); without them, look
//! k of L is at `k / L` and its share is its level (the union bound over
//! looks). Either way the fail bound splits its level over the gating
//! pairs (any one failing fails the gate) and the pass bound does not
//! (every pair must pass: intersection-union).
//!
//! Pure functions of their arguments: no clock, no I/O.

mod method;
mod plan;
mod record;

#[cfg(test)]
mod tests;

pub use method::{Method, SINGLE_PASS_DRIFT};
pub use plan::{
    Clock, DESIGN_FIRST_BLOCKS, Plan, Recorded, design_growth, design_rounds, information_fraction,
    pass_design_rounds,
};
pub use record::read_look;

use crate::stats::evidence::{Boundaries, Spending};
use crate::stats::sequential::side_level;

/// Which look at the data a comparison is, and what it may spend.
#[derive(Debug, Clone, PartialEq)]
pub struct Look {
    /// The round it follows (1-based): look `number` of `planned`, at most
    /// the last.
    number: usize,
    /// The most looks the run may take (the rounds its budget allows); 1: a
    /// fixed-size run.
    planned: usize,
    /// It closes the run before its planned last (the clock ran out).
    closing: bool,
    /// Every look's information fraction so far, this one last; empty when
    /// the run measured none.
    fractions: Vec<f64>,
    /// The pass bound's own fractions, one per look of `fractions`, when
    /// the pass side spends its error by its own information.
    pass_fractions: Option<Vec<f64>>,
    spending: Spending,
}

impl Look {
    /// The one look of a fixed-size run: all of `alpha`.
    pub fn fixed(spending: Spending) -> Look {
        Look::planned(1, 1, spending)
    }

    /// Look `number` of `planned`, at fraction `number / planned`, its
    /// share of alpha its level (the union bound over looks).
    pub fn planned(number: usize, planned: usize, spending: Spending) -> Look {
        Look {
            number,
            planned: planned.max(1),
            closing: false,
            fractions: Vec::new(),
            pass_fractions: None,
            spending,
        }
    }

    /// A look after round `number` at the full levels, as if it were the
    /// only one: what the design plans by (its spread), never a verdict.
    pub fn probe(number: usize, planned: usize, spending: Spending) -> Look {
        Look::planned(number, planned, spending).at_fractions(vec![1.0], Some(vec![1.0]))
    }

    /// This look closes the run before its planned last (its time budget
    /// ran out): it spends all the earlier looks left. The planned last
    /// look closes the run anyway, so there it changes nothing.
    pub fn closing(mut self) -> Look {
        self.closing = true;
        self
    }

    /// At the information fractions the run measured, every look's in
    /// order, this one last: the levels are exact group-sequential
    /// boundaries over them. `pass`: the pass bound's own fractions, one
    /// per look (of another length they are not the pass side's history,
    /// and both sides spend over `fractions`). No fractions: as before.
    pub fn at_fractions(mut self, fractions: Vec<f64>, pass: Option<Vec<f64>>) -> Look {
        self.pass_fractions = pass.filter(|p| p.len() == fractions.len() && !p.is_empty());
        self.fractions = fractions;
        self
    }

    /// The round this look follows.
    pub fn round(&self) -> usize {
        self.number
    }

    /// Which look of [`Look::planned_looks`] this is (1-based).
    pub fn number(&self) -> usize {
        self.number.clamp(1, self.planned)
    }

    pub fn planned_looks(&self) -> usize {
        self.planned
    }

    /// It closes the run before its planned last look.
    pub fn is_closing(&self) -> bool {
        self.closing && self.number() < self.planned
    }

    pub fn spending(&self) -> Spending {
        self.spending
    }

    /// Every look's information fraction, this one last; None when the
    /// run measured none.
    pub fn fractions(&self) -> Option<&[f64]> {
        (!self.fractions.is_empty()).then_some(self.fractions.as_slice())
    }

    /// The pass bound's own fractions, when it spends by them.
    pub fn pass_fractions(&self) -> Option<&[f64]> {
        self.fractions().and(self.pass_fractions.as_deref())
    }

    /// The previous look's fraction (0 for the first) and this look's.
    pub fn fraction(&self) -> Option<(f64, f64)> {
        last_two(self.fractions()?)
    }

    /// How its levels follow from its share of alpha: group-sequential
    /// boundaries over the measured fractions; None: the share is the level.
    pub fn boundaries(&self) -> Option<Boundaries> {
        self.fractions().map(|_| Boundaries::GroupSequential)
    }

    /// The levels (pass, fail) of this look's bounds, for `alpha` over
    /// `pairs` gating pairs.
    pub fn levels(&self, alpha: f64, pairs: usize) -> (f64, f64) {
        let Some(fail) = self.fractions() else {
            return self.share_levels(alpha, pairs);
        };
        // The two sides' errors are separate (a pass wrongly given, a fail
        // wrongly given): each holds over its own looks whatever the
        // other's fractions are, as long as neither depends on the
        // observed difference. The fail side splits its error over the pairs.
        let pass = self.pass_fractions().unwrap_or(fail);
        let m = pairs.max(1) as f64;
        (
            side_level(alpha, 1.0, pass, self.spending),
            side_level(alpha, m, fail, self.spending),
        )
    }

    /// Look k of L at fraction k / L: its share `α(k/L) − α((k−1)/L)` (or,
    /// closing, all that is left), by the union bound over looks. The
    /// shares sum to `alpha`, so the error stays at or below it under any
    /// stopping rule that looks at most L times at these points; the stop
    /// must not depend on the observed difference (a clock does not, to
    /// first order: it measures both sides' latencies together).
    fn share_levels(&self, alpha: f64, pairs: usize) -> (f64, f64) {
        let (look, looks) = (self.number(), self.planned);
        let until = if self.is_closing() {
            alpha
        } else {
            self.spending.spent(alpha, look as f64 / looks as f64)
        };
        let before = self.spending.spent(alpha, (look - 1) as f64 / looks as f64);
        split(until - before, pairs)
    }

    /// Where its levels come from, for a disagreement about them.
    pub fn describe_levels(&self, alpha: f64, pairs: usize) -> String {
        let mut out = format!(
            "from alpha {alpha}, {pairs} pairs, look {} of {}",
            self.number(),
            self.planned
        );
        match self.fraction() {
            Some((b, n)) => out.push_str(&format!(" at information fraction {n} after {b}")),
            None if self.is_closing() => out.push_str(" (closing)"),
            None => {}
        }
        out.push_str(&format!(", {} spending", self.spending.as_str()));
        if self.fractions().is_some() {
            out.push_str(", group-sequential boundaries over information_fractions");
        }
        if self.pass_fractions().is_some() {
            out.push_str(" (the pass bounds over pass_information_fractions)");
        }
        out
    }
}

/// The levels of a fixed-size run's one look at `alpha` over `pairs`
/// gating pairs: `alpha` for each pass bound, `alpha / pairs` for each fail
/// bound (what a known-variance oracle is held to).
pub fn fixed_levels(alpha: f64, pairs: usize) -> (f64, f64) {
    split(alpha, pairs)
}

/// The previous look's fraction (0 for the first) and the last one's, of
/// every look's in order; None for no looks.
fn last_two(history: &[f64]) -> Option<(f64, f64)> {
    let now = *history.last()?;
    let before = history.len().checked_sub(2).map_or(0.0, |i| history[i]);
    Some((before, now))
}

/// A look's pass and fail levels from its share of alpha.
fn split(share: f64, pairs: usize) -> (f64, f64) {
    // Never zero: a look with no error to spend would be a bound at ±inf.
    let share = share.max(f64::MIN_POSITIVE);
    (share, share / pairs.max(1) as f64)
}
