//! Output quality and the cross-runtime reference pairs in words: each
//! quality part with its outcome, the pairs' summary, and each differing
//! pair with how the policy counts it.

use crate::agreement::{DivergenceClass, TokenLogprob};
use crate::quality::QualityComparison;
use crate::reference::ReferenceComparison;

use super::View;

impl View {
    /// One line per quality part, with its outcome: the hard-divergence
    /// share (saying when it is reported only), each task's accuracy and
    /// each feature's delivered share.
    pub fn quality_lines(q: &QualityComparison) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(h) = &q.hard_divergence {
            let how = if h.gating {
                ""
            } else {
                " (reported; gates under cross_runtime = \"rate\")"
            };
            let mut line = format!("hard divergences: {}{how}", h.reason());
            if let Some(n) = h.pairs_to_resolve {
                line.push_str(&format!("; about {n} reference pairs would decide it"));
            }
            out.push((h.outcome.as_str().to_string(), line));
        }
        for t in &q.tasks {
            let mut line = format!("task {}: {}", t.name, t.reason());
            line.push_str(&format!(
                "; {} lost, {} gained",
                t.table.baseline_only, t.table.candidate_only
            ));
            if t.baseline_unanswered + t.candidate_unanswered > 0 {
                line.push_str(&format!(
                    "; unanswered (counted wrong): baseline {}, candidate {}",
                    t.baseline_unanswered, t.candidate_unanswered
                ));
            }
            if let Some(n) = t.items_to_resolve {
                line.push_str(&format!("; about {n} items would decide it"));
            }
            out.push((t.outcome.as_str().to_string(), line));
        }
        for f in &q.features {
            let mut line = format!("{} {}: {}", f.feature, f.rate.name, f.reason());
            if let Some(n) = f.rate.items_to_resolve {
                line.push_str(&format!("; about {n} requests would decide it"));
            }
            out.push((f.rate.outcome.as_str().to_string(), line));
        }
        out
    }

    /// The reference pairs' summary line.
    pub fn reference_summary(rc: &ReferenceComparison) -> String {
        format!(
            "{} pairs: {} identical, {} near-tie, {} hard, {} without logprobs (exact text); cross_runtime = \"{}\", near-tie within {} nats",
            rc.pairs,
            rc.identical,
            rc.near_tie,
            rc.hard,
            rc.text_only,
            rc.cross_runtime.as_str(),
            rc.near_tie_nats
        )
    }

    /// One line per differing pair with its [`PairMark`]: where it
    /// diverges, both tokens with their logprobs, the gaps, and the
    /// agreement before it.
    pub fn divergence_lines(rc: &ReferenceComparison) -> Vec<(PairMark, String)> {
        let nats = |g: Option<f64>| g.map_or("not in top-k".to_string(), |g| format!("{g:.3}"));
        let side = |t: Option<&TokenLogprob>| {
            t.map_or("(ended)".to_string(), |t| {
                format!("{:?} {:.3}", t.token, t.logprob)
            })
        };
        rc.prompts
            .iter()
            .filter(|p| p.comparison.class != DivergenceClass::Identical)
            .map(|p| {
                let c = &p.comparison;
                let head = format!(
                    "{} {} repeat {} request {}",
                    c.class.as_str(),
                    p.turnover,
                    p.repeat,
                    p.request_index
                );
                let line = match &c.divergence {
                    None => format!("{head}: the texts differ; no per-token logprobs to weigh it"),
                    Some(d) => format!(
                        "{head} at token {}: baseline {} vs candidate {}; gaps {} / {} nats; {} tokens before it, top-1 agreed on {}, max |Δ logprob| {}",
                        d.position,
                        side(d.baseline.as_ref()),
                        side(d.candidate.as_ref()),
                        nats(d.baseline_gap_nats),
                        nats(d.candidate_gap_nats),
                        c.agreement.tokens,
                        c.agreement.top1_agree,
                        c.agreement.max_abs_dlogprob.map_or("–".into(), |x| format!("{x:.3}")),
                    ),
                };
                (PairMark::of(p), line)
            })
            .collect()
    }
}

/// How a differing reference pair is listed. A hard divergence (or a
/// difference without logprobs to weigh it) that the policy passes, as
/// `cross_runtime = "rate"` does, is still a divergence: it counts towards
/// the hard-divergence share, and is never marked as fine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairMark {
    /// A near-tie the policy passes.
    Pass,
    /// A pair the policy fails.
    Fail,
    /// A hard divergence the policy passes on its own, counted by the quality gate.
    Counted,
}

impl PairMark {
    fn of(p: &crate::reference::ReferencePair) -> PairMark {
        match (p.passed, p.comparison.class) {
            (false, _) => PairMark::Fail,
            (true, DivergenceClass::Hard | DivergenceClass::TextOnly) => PairMark::Counted,
            (true, _) => PairMark::Pass,
        }
    }

    /// The word the Markdown and HTML lists lead with.
    pub fn word(self) -> &'static str {
        match self {
            PairMark::Pass => "pass",
            PairMark::Fail => "fail",
            PairMark::Counted => "counted",
        }
    }
}
