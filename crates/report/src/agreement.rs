//! Token-level agreement of two runtimes' greedy reference texts, from the
//! per-token logprobs the servers streamed (`logprobs` / `top_logprobs`).
//!
//! Up to the first divergence the two sequences are the same tokens: how
//! close were the distributions (top-1 agreement, the chosen token's
//! |Δ logprob|, a truncated KL estimate)? At the first divergence: was it a
//! *near-tie* (each side's choice is in the other's top-k, within a
//! tolerance in nats of the other's choice: a benign numerics change flips
//! it) or a *hard* divergence (a side preferred its token by more than the
//! tolerance, or the other's choice is not even in its top-k)?
//!
//! Tokens are compared by their bytes (the token text when the server sent
//! no bytes): two engines may number the same vocabulary differently.

use serde::{Deserialize, Serialize};

/// Default near-tie tolerance in nats. Near-ties on the reference model
/// (SmolLM2-135M) are 0.06–0.31 nats: answering "Name a color." its first two
/// tokens' runners-up were that close ("The" −1.55 vs "A" −1.86; " color"
/// −1.62 vs " most" −1.68). The tolerance sits above them with room; the seeded simulation in the tests
/// shows no hard divergence for A/A numeric jitter up to 0.05 nats per
/// logit at this tolerance (a few percent of divergences at 0.1), and most
/// divergences of a model perturbed by 1 nat per logit flagged hard.
pub const DEFAULT_NEAR_TIE_NATS: f64 = 0.5;

/// Alternatives asked per token (`top_logprobs`) on reference requests.
pub const DEFAULT_TOP_LOGPROBS: usize = 5;

/// One generated token: what was chosen, its logprob, the top alternatives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    pub token: String,
    /// The token's bytes, kept only when they differ from `token`'s UTF-8
    /// (a token that is part of a multi-byte character).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    /// The engine's token id, when it sent one (not compared across engines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    pub logprob: f64,
    /// The server's top alternatives at this position, most likely first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    pub token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    pub logprob: f64,
}

impl TokenLogprob {
    /// What two engines' tokens are compared by.
    pub fn key(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.token.as_bytes())
    }

    /// Logprob this side gave the token with key `key`: the chosen one's, or
    /// one of the top alternatives'. None when it is not in the top-k.
    pub fn logprob_of(&self, key: &[u8]) -> Option<f64> {
        if self.key() == key {
            return Some(self.logprob);
        }
        self.top.iter().find(|t| t.key() == key).map(|t| t.logprob)
    }

    /// The most likely token at this position (the chosen one when no
    /// alternatives were sent, or it beats them).
    fn top1(&self) -> &[u8] {
        match self.top.first() {
            Some(t) if t.logprob > self.logprob => t.key(),
            _ => self.key(),
        }
    }
}

impl TopLogprob {
    pub fn key(&self) -> &[u8] {
        self.bytes.as_deref().unwrap_or(self.token.as_bytes())
    }
}

/// How a cross-runtime reference pair compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DivergenceClass {
    /// Byte-identical texts.
    Identical,
    /// Texts differ first at a token both sides nearly tied.
    NearTie,
    /// Texts differ first at a token one side clearly preferred (or one
    /// side's choice is outside the other's top-k, or one side ended).
    Hard,
    /// Texts differ and a side has no per-token logprobs: only the exact
    /// comparison is possible.
    TextOnly,
}

impl DivergenceClass {
    pub fn as_str(self) -> &'static str {
        match self {
            DivergenceClass::Identical => "identical",
            DivergenceClass::NearTie => "near_tie",
            DivergenceClass::Hard => "hard",
            DivergenceClass::TextOnly => "text_only",
        }
    }
}

/// Agreement over the tokens both sides generated alike (before the first
/// divergence).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Positions compared.
    pub tokens: usize,
    /// Of those, positions where both sides' most likely token is the same.
    pub top1_agree: usize,
    /// Mean and largest |Δ logprob| of the chosen token (nats); None when
    /// no position was compared.
    pub mean_abs_dlogprob: Option<f64>,
    pub max_abs_dlogprob: Option<f64>,
    /// Mean over positions of KL(baseline ‖ candidate) restricted to the
    /// baseline's top-k, a candidate token outside its own top-k taken at
    /// its k-th logprob (the most it can have). A truncated estimate: it
    /// sees only the head of each distribution.
    pub mean_kl_topk: Option<f64>,
}

/// The first differing token of two sequences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenDivergence {
    /// Token position (0-based) of the first difference.
    pub position: usize,
    /// Each side's token there (with its top-k); None when that side ended.
    pub baseline: Option<TokenLogprob>,
    pub candidate: Option<TokenLogprob>,
    /// How much the baseline preferred its token to the candidate's
    /// (nats); None when the candidate's is not in the baseline's top-k.
    pub baseline_gap_nats: Option<f64>,
    /// How much the candidate preferred its token to the baseline's.
    pub candidate_gap_nats: Option<f64>,
}

/// The comparison of one prompt's reference pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenComparison {
    pub class: DivergenceClass,
    pub agreement: Agreement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<TokenDivergence>,
}

/// Compare two greedy token sequences. `texts_equal`: the reference texts
/// are byte-identical (then the class is `Identical` whatever the token
/// split). `None` tokens on a side: the server sent no logprobs.
pub fn compare_tokens(
    texts_equal: bool,
    baseline: Option<&[TokenLogprob]>,
    candidate: Option<&[TokenLogprob]>,
    near_tie_nats: f64,
) -> TokenComparison {
    let (Some(b), Some(c)) = (baseline, candidate) else {
        return TokenComparison {
            class: if texts_equal {
                DivergenceClass::Identical
            } else {
                DivergenceClass::TextOnly
            },
            agreement: agreement(&[], &[]),
            divergence: None,
        };
    };
    let common = b
        .iter()
        .zip(c)
        .take_while(|(x, y)| x.key() == y.key())
        .count();
    let agreement = agreement(&b[..common], &c[..common]);
    if texts_equal {
        return TokenComparison {
            class: DivergenceClass::Identical,
            agreement,
            divergence: None,
        };
    }
    let (bt, ct) = (b.get(common), c.get(common));
    let gap = |own: Option<&TokenLogprob>, other: Option<&TokenLogprob>| {
        let (own, other) = (own?, other?);
        Some(own.logprob - own.logprob_of(other.key())?)
    };
    // A side that ended chose the end of the sequence, which servers send
    // as a token with no text: the continuing side's gap to it is what can
    // be weighed (the ended side's own distribution there is not sent).
    let end_gap = |own: Option<&TokenLogprob>| {
        let own = own?;
        Some(own.logprob - own.top.iter().find(|t| t.key().is_empty())?.logprob)
    };
    let (bg, cg) = match (bt, ct) {
        (None, Some(_)) => (None, end_gap(ct)),
        (Some(_), None) => (end_gap(bt), None),
        _ => (gap(bt, ct), gap(ct, bt)),
    };
    let within = |g: Option<f64>| g.is_some_and(|x| x.abs() <= near_tie_nats);
    // Both sides must hold the other's choice within the tolerance; where
    // one side ended, the other must hold the end within it. A side that
    // sent no more tokens without ending gives nothing to weigh: hard.
    let near = match (bt, ct) {
        (None, Some(_)) => within(cg),
        (Some(_), None) => within(bg),
        _ => within(bg) && within(cg),
    };
    TokenComparison {
        class: if near {
            DivergenceClass::NearTie
        } else {
            DivergenceClass::Hard
        },
        agreement,
        divergence: Some(TokenDivergence {
            position: common,
            baseline: bt.cloned(),
            candidate: ct.cloned(),
            baseline_gap_nats: bg,
            candidate_gap_nats: cg,
        }),
    }
}

/// Agreement statistics over aligned, equal-keyed positions.
pub fn agreement(b: &[TokenLogprob], c: &[TokenLogprob]) -> Agreement {
    let n = b.len().min(c.len());
    let (mut top1, mut sum_d, mut max_d, mut sum_kl) = (0, 0.0, 0.0f64, 0.0);
    for (x, y) in b.iter().zip(c) {
        top1 += usize::from(x.top1() == y.top1());
        let d = (x.logprob - y.logprob).abs();
        sum_d += d;
        max_d = max_d.max(d);
        sum_kl += kl_topk(x, y);
    }
    let mean = |s: f64| (n > 0).then(|| s / n as f64);
    Agreement {
        tokens: n,
        top1_agree: top1,
        mean_abs_dlogprob: mean(sum_d),
        max_abs_dlogprob: (n > 0).then_some(max_d),
        mean_kl_topk: mean(sum_kl),
    }
}

/// Σ over the baseline's top-k (its chosen token when no alternatives) of
/// p_b(t)·(log p_b(t) − log p_c(t)), with log p_c of a token outside the
/// candidate's top-k bounded by the candidate's smallest listed logprob.
fn kl_topk(b: &TokenLogprob, c: &TokenLogprob) -> f64 {
    let floor = c.top.iter().map(|t| t.logprob).fold(c.logprob, f64::min);
    let one = |key: &[u8], lp: f64| {
        let q = c.logprob_of(key).unwrap_or(floor);
        lp.exp() * (lp - q)
    };
    if b.top.is_empty() {
        return one(b.key(), b.logprob);
    }
    b.top.iter().map(|t| one(t.key(), t.logprob)).sum()
}

/// How the candidate's reference texts are held against the baseline's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossRuntime {
    /// Byte for byte: any difference fails that request.
    Exact,
    /// A difference that starts at a near-tie passes; a hard divergence (or
    /// a difference without logprobs to weigh it) fails.
    NearTie,
    /// No single difference fails a request: the quality gate holds the
    /// share of hard divergences (with its confidence bound) to a margin.
    Rate,
}

impl CrossRuntime {
    pub fn as_str(self) -> &'static str {
        match self {
            CrossRuntime::Exact => "exact",
            CrossRuntime::NearTie => "near_tie",
            CrossRuntime::Rate => "rate",
        }
    }
}

/// Output quality across runtimes.
#[derive(Debug, Clone, PartialEq)]
pub struct QualityPolicy {
    /// `Exact` by default: today's behaviour, which the turnover tests and
    /// teams that demand byte-identical migrations rely on.
    pub cross_runtime: CrossRuntime,
    /// Largest logprob gap (nats) on each side for a near-tie.
    pub near_tie_nats: f64,
    /// Largest share of hard divergences (percent of reference pairs) the
    /// quality gate passes under `cross_runtime = "rate"`.
    pub hard_margin_percent: f64,
    /// Largest task-accuracy drop (points) the quality gate passes.
    pub accuracy_margin_points: f64,
    /// Largest drop (points) in a feature's delivered share (structured
    /// output valid, …) the quality gate passes.
    pub feature_margin_points: f64,
    /// Embeddings: the lowest cosine of any input's two vectors, and their
    /// mean, the quality gate passes.
    pub embedding_cosine_min: f64,
    pub embedding_cosine_mean_min: f64,
    /// Floors of named embeddings workloads, in place of the two above.
    pub embedding_floors: Vec<EmbeddingFloors>,
}

/// The floors of one embeddings workload (`[[quality.embeddings]]`): a
/// workload whose vectors do not depend on batching (one input per
/// request) can hold far stricter ones than the default.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddingFloors {
    pub workload: String,
    pub cosine_min: f64,
    pub cosine_mean_min: f64,
}

/// Default hard-divergence margin: a runtime against itself shows none, so
/// 10 % of pairs is a clear defect signal; 44 pairs with none pass it at
/// the default levels (the upper bound of 0/44 at α = 0.0125 is 9.5 %).
pub const DEFAULT_HARD_MARGIN_PERCENT: f64 = 10.0;
/// Default accuracy margin: 5 points, the usual non-inferiority margin of
/// a model evaluation; a paired A/A with no discordant item passes it from
/// 52 items at one-sided 0.05, 96 at 0.0125 (four gating pairs).
pub const DEFAULT_ACCURACY_MARGIN_POINTS: f64 = 5.0;
/// Default feature margin: 5 points, as for accuracy: with every answer
/// delivered on both sides, 52 requests pass it at one-sided 0.05, 96 at
/// 0.0125 (docs/features.md).
pub const DEFAULT_FEATURE_MARGIN_POINTS: f64 = 5.0;
/// Default embedding floors, from an A/A pair of the reference engine's
/// two profiles, 8 inputs per request (docs/features.md): lowest cosine
/// 0.912 and mean 0.987 there, as batching moves llama.cpp's vectors; the
/// perturbed-weights model gives 0.723 and 0.955.
pub const DEFAULT_EMBEDDING_COSINE_MIN: f64 = 0.85;
pub const DEFAULT_EMBEDDING_COSINE_MEAN_MIN: f64 = 0.97;

impl QualityPolicy {
    /// Whether the hard-divergence share gates (else it is reported only).
    pub fn rate_gated(&self) -> bool {
        self.cross_runtime == CrossRuntime::Rate
    }

    /// The (lowest, mean) cosine floors `workload` is judged by.
    pub fn embedding_floors_for(&self, workload: &str) -> (f64, f64) {
        self.embedding_floors
            .iter()
            .find(|f| f.workload == workload)
            .map_or(
                (self.embedding_cosine_min, self.embedding_cosine_mean_min),
                |f| (f.cosine_min, f.cosine_mean_min),
            )
    }
}

impl Default for QualityPolicy {
    fn default() -> Self {
        QualityPolicy {
            cross_runtime: CrossRuntime::Exact,
            near_tie_nats: DEFAULT_NEAR_TIE_NATS,
            hard_margin_percent: DEFAULT_HARD_MARGIN_PERCENT,
            accuracy_margin_points: DEFAULT_ACCURACY_MARGIN_POINTS,
            feature_margin_points: DEFAULT_FEATURE_MARGIN_POINTS,
            embedding_cosine_min: DEFAULT_EMBEDDING_COSINE_MIN,
            embedding_cosine_mean_min: DEFAULT_EMBEDDING_COSINE_MEAN_MIN,
            embedding_floors: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Xoshiro256;

    fn tok(token: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: token.into(),
            bytes: None,
            id: None,
            logprob,
            top: top
                .iter()
                .map(|(t, l)| TopLogprob {
                    token: (*t).into(),
                    bytes: None,
                    logprob: *l,
                })
                .collect(),
        }
    }

    /// "Name a color." as measured on the reference model: "The" −1.55 vs "A" −1.86.
    fn the() -> TokenLogprob {
        tok("The", -1.55, &[("The", -1.55), ("A", -1.86), ("Red", -2.4)])
    }

    /// Measured on the reference engine: one pass ended after "Lisbon"
    /// (EOS), the other wrote "." at −0.888 with the end ("") at −0.971.
    #[test]
    fn ending_against_a_near_tied_end_token_is_a_near_tie() {
        let b = vec![tok("Lisbon", -0.5, &[])];
        let c = vec![
            tok("Lisbon", -0.5, &[]),
            tok(".", -0.888, &[(".", -0.888), ("", -0.971), (",", -2.37)]),
        ];
        let r = compare_tokens(false, Some(&b), Some(&c), DEFAULT_NEAR_TIE_NATS);
        assert_eq!(r.class, DivergenceClass::NearTie);
        let d = r.divergence.unwrap();
        assert_eq!((d.position, d.baseline_gap_nats), (1, None));
        assert!((d.candidate_gap_nats.unwrap() - 0.083).abs() < 1e-9);
        // The end far down the list, or not in it at all: hard.
        let c = vec![
            tok("Lisbon", -0.5, &[]),
            tok(".", -0.1, &[(".", -0.1), ("", -2.9)]),
        ];
        let r = compare_tokens(false, Some(&b), Some(&c), DEFAULT_NEAR_TIE_NATS);
        assert_eq!(r.class, DivergenceClass::Hard);
        let c = vec![tok("Lisbon", -0.5, &[]), tok(".", -0.1, &[(".", -0.1)])];
        let r = compare_tokens(false, Some(&c), Some(&b), DEFAULT_NEAR_TIE_NATS);
        assert_eq!(r.class, DivergenceClass::Hard);
    }

    #[test]
    fn a_measured_near_tie_is_a_near_tie_and_a_confident_flip_is_hard() {
        let b = vec![
            the(),
            tok(" color", -1.62, &[(" color", -1.62), (" most", -1.68)]),
        ];
        let c = vec![
            the(),
            tok(" most", -1.60, &[(" most", -1.60), (" color", -1.65)]),
        ];
        let r = compare_tokens(false, Some(&b), Some(&c), DEFAULT_NEAR_TIE_NATS);
        assert_eq!(r.class, DivergenceClass::NearTie);
        let d = r.divergence.unwrap();
        assert_eq!(d.position, 1);
        assert!((d.baseline_gap_nats.unwrap() - 0.06).abs() < 1e-9);
        assert!((d.candidate_gap_nats.unwrap() - 0.05).abs() < 1e-9);
        assert_eq!((r.agreement.tokens, r.agreement.top1_agree), (1, 1));
        assert_eq!(r.agreement.max_abs_dlogprob, Some(0.0));

        // The candidate's choice is 2 nats below the baseline's: hard.
        let c = vec![
            the(),
            tok(" most", -0.1, &[(" most", -0.1), (" color", -3.0)]),
        ];
        let b = vec![
            the(),
            tok(" color", -0.2, &[(" color", -0.2), (" most", -2.2)]),
        ];
        let r = compare_tokens(false, Some(&b), Some(&c), DEFAULT_NEAR_TIE_NATS);
        assert_eq!(r.class, DivergenceClass::Hard);
        // Within a 3-nat tolerance the same pair is a near-tie: the policy decides.
        assert_eq!(
            compare_tokens(false, Some(&b), Some(&c), 3.0).class,
            DivergenceClass::NearTie
        );
    }

    #[test]
    fn outside_the_top_k_or_an_early_end_is_hard() {
        let b = vec![tok("x", -0.3, &[("x", -0.3), ("y", -0.4)])];
        let c = vec![tok("z", -0.2, &[("z", -0.2), ("x", -0.25)])];
        let r = compare_tokens(false, Some(&b), Some(&c), 1.0);
        assert_eq!(r.class, DivergenceClass::Hard);
        let d = r.divergence.unwrap();
        assert_eq!(
            d.baseline_gap_nats, None,
            "z is not in the baseline's top-k"
        );
        assert!((d.candidate_gap_nats.unwrap() - 0.05).abs() < 1e-9);

        let r = compare_tokens(false, Some(&b), Some(&[]), 1.0);
        assert_eq!(r.class, DivergenceClass::Hard);
        assert_eq!(r.divergence.unwrap().candidate, None);
    }

    #[test]
    fn tokens_compare_by_bytes_not_ids() {
        let mut b = tok("\u{fffd}", -0.1, &[]);
        b.bytes = Some(vec![0xE2]);
        b.id = Some(7);
        let mut c = b.clone();
        c.id = Some(9001);
        let r = compare_tokens(false, Some(&[b.clone()]), Some(&[c]), 0.5);
        // Same bytes, other ids: no divergence among the tokens kept.
        assert_eq!(r.divergence.unwrap().position, 1);
        let mut other = b.clone();
        other.bytes = Some(vec![0xE3]);
        let r = compare_tokens(false, Some(&[b]), Some(&[other]), 0.5);
        assert_eq!(r.divergence.unwrap().position, 0);
    }

    #[test]
    fn without_logprobs_only_the_text_decides() {
        let t = [the()];
        let r = compare_tokens(false, Some(&t), None, 0.5);
        assert_eq!((r.class, r.divergence), (DivergenceClass::TextOnly, None));
        assert_eq!(
            compare_tokens(true, None, None, 0.5).class,
            DivergenceClass::Identical
        );
    }

    #[test]
    fn agreement_statistics_by_hand() {
        let b = vec![
            tok("a", -0.1, &[("a", -0.1), ("b", -2.4)]),
            tok("c", -0.5, &[("c", -0.5), ("d", -1.0)]),
        ];
        let c = vec![
            tok("a", -0.2, &[("a", -0.2), ("b", -1.8)]),
            tok("c", -0.9, &[("d", -0.8), ("c", -0.9)]),
        ];
        let a = agreement(&b, &c);
        assert_eq!((a.tokens, a.top1_agree), (2, 1));
        assert!((a.mean_abs_dlogprob.unwrap() - 0.25).abs() < 1e-12);
        assert!((a.max_abs_dlogprob.unwrap() - 0.4).abs() < 1e-12);
        let kl0 = (-0.1f64).exp() * 0.1 + (-2.4f64).exp() * (-0.6);
        let kl1 = (-0.5f64).exp() * 0.4 + (-1.0f64).exp() * (-0.2);
        assert!((a.mean_kl_topk.unwrap() - (kl0 + kl1) / 2.0).abs() < 1e-12);
        // The same distribution on both sides: KL 0.
        assert_eq!(agreement(&b, &b).mean_kl_topk, Some(0.0));
    }

    // ---- seeded simulation ----------------------------------------------

    const VOCAB: usize = 64;
    const LEN: usize = 40;

    fn normal(r: &mut Xoshiro256) -> f64 {
        // Box–Muller; 1 − u keeps the log finite.
        let (u, v) = (1.0 - r.next_f64(), r.next_f64());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    fn mix(xs: &[u64]) -> u64 {
        xs.iter().fold(0x9E37_79B9_7F4A_7C15, |h, &x| {
            (h ^ x).wrapping_mul(0x100_0000_01B3).rotate_left(29)
        })
    }

    /// An engine's greedy decode of prompt `p` under a toy language model:
    /// logits depend on (prompt, position, previous token); `noise` adds
    /// per-engine N(0, σ) to every logit (numerics), seeded by `engine`.
    fn decode(p: u64, engine: u64, sigma: f64, k: usize) -> Vec<TokenLogprob> {
        let mut out = Vec::with_capacity(LEN);
        let mut prev = 0u64;
        for pos in 0..LEN as u64 {
            let mut r = Xoshiro256::new(mix(&[p, pos, prev]));
            // Scale 2.5: a small model's spread, with many near-ties.
            let mut logits: Vec<f64> = (0..VOCAB).map(|_| 2.5 * normal(&mut r)).collect();
            let mut e = Xoshiro256::new(mix(&[p, pos, prev, engine]));
            for l in &mut logits {
                *l += sigma * normal(&mut e);
            }
            let max = logits.iter().cloned().fold(f64::MIN, f64::max);
            let lse = max + logits.iter().map(|l| (l - max).exp()).sum::<f64>().ln();
            let mut order: Vec<usize> = (0..VOCAB).collect();
            order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
            let name = |i: usize| format!("t{i}");
            let top = order[..k]
                .iter()
                .map(|&i| TopLogprob {
                    token: name(i),
                    bytes: None,
                    logprob: logits[i] - lse,
                })
                .collect();
            let chosen = order[0];
            out.push(TokenLogprob {
                token: name(chosen),
                bytes: None,
                id: Some(chosen as i64),
                logprob: logits[chosen] - lse,
                top,
            });
            prev = chosen as u64;
        }
        out
    }

    /// (divergent prompts, hard divergences) over `n` prompts.
    fn simulate(seed: u64, n: u64, sigma_b: f64, sigma_c: f64, tol: f64) -> (usize, usize) {
        let (mut div, mut hard) = (0, 0);
        for p in 0..n {
            let b = decode(mix(&[seed, p]), 1, sigma_b, DEFAULT_TOP_LOGPROBS);
            let c = decode(mix(&[seed, p]), 2, sigma_c, DEFAULT_TOP_LOGPROBS);
            let equal = b.iter().zip(&c).all(|(x, y)| x.key() == y.key());
            let r = compare_tokens(equal, Some(&b), Some(&c), tol);
            div += usize::from(r.class != DivergenceClass::Identical);
            hard += usize::from(r.class == DivergenceClass::Hard);
        }
        (div, hard)
    }

    /// A/A with numeric jitter: the texts part at near-ties, never hard, at
    /// the default tolerance — for jitter up to 0.05 nats per logit; at 0.1
    /// (a gap difference of s.d. 0.2 between engines) a tail of a few
    /// percent of divergences exceeds 0.5 nats.
    #[test]
    fn simulated_a_a_jitter_gives_no_hard_divergence() {
        for (seed, sigma) in [(11, 0.01), (12, 0.03), (13, 0.05)] {
            let (div, hard) = simulate(seed, 300, sigma, sigma, DEFAULT_NEAR_TIE_NATS);
            assert!(div > 0, "σ {sigma}: the jitter should flip some near-ties");
            assert_eq!(hard, 0, "σ {sigma}: {hard} hard of {div} divergences");
        }
        let (div, hard) = simulate(15, 300, 0.1, 0.1, DEFAULT_NEAR_TIE_NATS);
        assert!(hard * 100 <= div * 3, "σ 0.1: {hard} hard of {div}");
        // Identical numerics: identical texts.
        assert_eq!(simulate(14, 100, 0.0, 0.0, DEFAULT_NEAR_TIE_NATS), (0, 0));
    }

    /// A perturbed model (1 nat per logit): most prompts diverge, and most
    /// divergences are flagged hard.
    #[test]
    fn simulated_perturbed_model_is_flagged_hard() {
        let (div, hard) = simulate(21, 300, 0.0, 1.0, DEFAULT_NEAR_TIE_NATS);
        assert!(div >= 270, "{div} of 300 diverged");
        assert!(hard * 2 >= div, "{hard} hard of {div}");
        // At zero tolerance every divergence is hard (the class can fail).
        let (div, hard) = simulate(22, 100, 0.03, 0.03, 0.0);
        assert_eq!(div, hard);
    }
}
