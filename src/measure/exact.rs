//! Prompt sizing per request: every request of a plain (filler) cell brought
//! to the cell's prompt-token target exactly, where a token counter is
//! reachable (the model's `tokenizer.json`, or the server's `/tokenize`).
//!
//! A cell's filler body is sized once ([`PromptSizer::size`]): its probe's
//! whole prompt, counted by the server (`usage.prompt_tokens`), is the
//! reference. A request differs from the probe only in its unique prefix,
//! whose tokens vary with its hex digits, request number and run nonce (±4
//! on SmolLM2), so before any request is sent each request's prefix is
//! counted with the counter, together with the newline and the first filler
//! words after it (tokenization is local: what follows a word boundary does
//! not depend on the prefix). Then the body is cut or extended by whole
//! filler words, and topped up with words of one token, until
//!
//! ```text
//! probe's usage + head(request) − head(probe) + tokens of words added − removed + pads = target
//! ```
//!
//! What flows into the load generator is plain data: a word and pad count
//! per request ([`Fits`]) and the cell's filler text ([`Bodies`]). Without a
//! counter (usage calibration only) every request sends the cell's one body
//! and the artifact says what tolerance was achieved ([`achieved`]).

use std::ops::Range;
use std::time::{Duration, Instant};

use anyhow::Result;
use futures_util::{StreamExt, TryStreamExt, stream};

use crate::config::suite::CellSpec;
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::workload::{
    PromptSizer, SizedBody, WORDS, cell_seed, filler, filler_words, prefix, probe_prefix,
};

/// Filler words after the prefix counted with it: the tokenizer's context
/// across the join.
pub const HEAD_WORDS: usize = 4;
/// `/tokenize` calls in flight at once while counting a cell's prefixes.
const IN_FLIGHT: usize = 8;

/// One request's body: the cell's first `words` filler words, then `pads`
/// words of one token each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fit {
    pub words: u32,
    pub pads: u32,
}

/// The words and one-token pads that change a body of `base` words by
/// exactly `delta` tokens. `tokens[i]` is what word `i` adds after the words
/// before it (a caller makes `tokens` long enough for the largest `delta`);
/// at least `min_words` are kept. Without a pad (`pad` false) the nearest
/// body is taken: off by less than one word's tokens.
pub fn fit(base: usize, tokens: &[u64], min_words: usize, pad: bool, delta: i64) -> Fit {
    let mut n = base.min(tokens.len());
    let mut pads = 0u64;
    if delta >= 0 {
        let mut left = delta as u64;
        while n < tokens.len() && tokens[n] <= left {
            left -= tokens[n];
            n += 1;
        }
        if pad {
            pads = left;
        } else if left > 0 && n < tokens.len() && tokens[n] - left < left {
            n += 1;
        }
    } else {
        let mut over = delta.unsigned_abs();
        while over > 0 && n > min_words {
            n -= 1;
            let t = tokens[n];
            if t <= over {
                over -= t;
                continue;
            }
            // This word is more than what is left to remove.
            if pad {
                pads = t - over;
            } else if t - over > over {
                n += 1;
            }
            break;
        }
    }
    Fit {
        words: n as u32,
        pads: pads as u32,
    }
}

/// The cell's filler, long enough for every request, cut per request.
#[derive(Debug, Clone)]
pub struct Bodies {
    text: String,
    /// Byte end of each word of `text`.
    ends: Vec<usize>,
    /// A filler word of one token, when the counter found one.
    pad: Option<&'static str>,
    /// The sized body (the probe's): what requests without a fit send.
    pub base: Fit,
}

impl Bodies {
    /// `words` words of the cell's filler (seeded as [`cell_seed`]).
    pub fn new(seed: u64, base: usize, words: usize, pad: Option<&'static str>) -> Bodies {
        let text = filler(words.max(base), seed);
        let ends = text
            .match_indices(' ')
            .map(|(i, _)| i)
            .chain([text.len()])
            .filter(|_| !text.is_empty())
            .collect();
        Bodies {
            text,
            ends,
            pad,
            base: Fit {
                words: base as u32,
                pads: 0,
            },
        }
    }

    /// Every request the sized body (usage calibration).
    pub fn uniform(cell: &CellSpec, sized: &SizedBody) -> Bodies {
        Bodies::new(cell_seed(cell), sized.words, sized.words, None)
    }

    /// The body of `fit`.
    pub fn body(&self, fit: Fit) -> String {
        let words = (fit.words as usize).min(self.ends.len());
        let end = words.checked_sub(1).map_or(0, |i| self.ends[i]);
        let mut s = String::with_capacity(end + 8 * fit.pads as usize);
        s.push_str(&self.text[..end]);
        if let Some(p) = self.pad {
            for _ in 0..fit.pads {
                if !s.is_empty() {
                    s.push(' ');
                }
                s.push_str(p);
            }
        }
        s
    }
}

/// Each request's fit, by request index (a range of them: a run or a block).
#[derive(Debug, Clone, PartialEq)]
pub struct Fits {
    first: usize,
    fits: Vec<Option<Fit>>,
    /// How long counting and fitting took (before any request was sent).
    pub took: Duration,
    /// How the prefixes were counted.
    pub method: String,
}

impl Fits {
    pub fn get(&self, index: usize) -> Option<Fit> {
        self.fits
            .get(index.checked_sub(self.first)?)
            .copied()
            .flatten()
    }

    pub fn len(&self) -> usize {
        self.fits.iter().flatten().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Fit every request of `indices` (within `range`) of a plain cell to the
/// cell's target, counting with `sizer`; `None` when nothing can count
/// text (usage calibration: every request sends the sized body).
pub async fn fit_requests(
    sizer: &PromptSizer,
    cell: &CellSpec,
    nonce: &str,
    sized: &SizedBody,
    range: Range<usize>,
    indices: impl Iterator<Item = usize>,
) -> Result<Option<(Bodies, Fits)>> {
    if !sizer.counts_text() || cell.workload.is_some() || sized.words == 0 {
        return Ok(None);
    }
    let t0 = Instant::now();
    let seed = cell_seed(cell);
    let head = filler(HEAD_WORDS.min(sized.words), seed);
    let probe = probe_prefix(cell.cache, nonce, &cell.name);
    let h_probe = sizer.text_tokens(&format!("{probe}\n{head}")).await? as i64;
    let indices: Vec<usize> = indices.filter(|i| range.contains(i)).collect();
    // The prefix with what follows it, counted; a shared cell's is the probe's.
    let heads: Vec<i64> = stream::iter(indices.iter().map(|&i| {
        let pre = prefix(cell.cache, nonce, &cell.name, i);
        let same = pre == probe;
        let text = format!("{pre}\n{head}");
        async move {
            if same {
                return Ok(h_probe);
            }
            sizer.text_tokens(&text).await.map(|n| n as i64)
        }
    }))
    .buffered(IN_FLIGHT)
    .try_collect()
    .await?;
    let reference = sized.measured_prompt_tokens as i64;
    let target = cell.prompt_tokens as i64;
    let deltas: Vec<i64> = heads
        .iter()
        .map(|h| target - (reference + h - h_probe))
        .collect();
    let (per_word, pad) = word_tokens(sizer, seed).await?;
    let most = deltas.iter().copied().max().unwrap_or(0).max(0) as usize;
    let words = sized.words + most + 1;
    let tokens: Vec<u64> = filler_words(seed)
        .take(words)
        .map(|w| per_word[w])
        .collect();
    let min_words = HEAD_WORDS.min(sized.words);
    let mut fits = vec![None; range.len()];
    for (&i, &d) in indices.iter().zip(&deltas) {
        fits[i - range.start] = Some(fit(sized.words, &tokens, min_words, pad.is_some(), d));
    }
    let bodies = Bodies::new(seed, sized.words, words, pad.map(|w| WORDS[w]));
    Ok(Some((
        bodies,
        Fits {
            first: range.start,
            fits,
            took: t0.elapsed(),
            method: sizer.method(),
        },
    )))
}

/// Tokens each filler word adds after another word (counted in context, so
/// a counter that adds a BOS token cancels out), and the first word of one
/// token, if any: the pad.
async fn word_tokens(sizer: &PromptSizer, seed: u64) -> Result<(Vec<u64>, Option<usize>)> {
    let first = WORDS[filler_words(seed).next().unwrap_or(0)];
    let alone = sizer.text_tokens(first).await?;
    let counts: Vec<u64> = stream::iter(WORDS.iter().map(|w| {
        let text = format!("{first} {w}");
        async move { sizer.text_tokens(&text).await }
    }))
    .buffered(IN_FLIGHT)
    .try_collect()
    .await?;
    let per_word: Vec<u64> = counts.iter().map(|c| c.saturating_sub(alone)).collect();
    let pad = per_word.iter().position(|&t| t == 1);
    Ok((per_word, pad))
}

/// What each cell's prompts came to against their targets, as the server
/// counted them (successful requests with usage): for the artifact's
/// `method.prompt_tokens_achieved`.
pub fn achieved(cells: &[CellSpec], records: &[RequestRecord]) -> String {
    let mut out = Vec::new();
    for c in cells {
        let offs: Vec<i64> = records
            .iter()
            .filter(|r| r.cell == c.name && r.outcome == Outcome::Ok)
            .filter_map(|r| Some(r.capture.prompt_tokens? as i64 - r.target_prompt_tokens? as i64))
            .collect();
        let (Some(lo), Some(hi)) = (offs.iter().min(), offs.iter().max()) else {
            continue;
        };
        let exact = offs.iter().filter(|&&d| d == 0).count();
        let pct = |d: i64| d as f64 / c.prompt_tokens.max(1) as f64 * 100.0;
        let range = if c.workload.is_some() {
            "each request's target".to_string()
        } else {
            c.prompt_tokens.to_string()
        };
        out.push(format!(
            "{}: {exact} of {} requests exactly on target ({range}); off by {lo:+} to {hi:+} tokens ({:+.1}% to {:+.1}%)",
            c.name,
            offs.len(),
            pct(*lo),
            pct(*hi),
        ));
    }
    out.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fit_adds_or_removes_whole_words_then_pads() {
        // Word i adds tokens[i]; the body has 5 words.
        let tokens = [1, 2, 1, 2, 1, 2, 1, 1, 3, 1];
        let total = |f: Fit| tokens[..f.words as usize].iter().sum::<u64>() + f.pads as u64;
        let base: u64 = tokens[..5].iter().sum();
        for delta in -4i64..=5 {
            let f = fit(5, &tokens, 1, true, delta);
            assert_eq!(total(f) as i64, base as i64 + delta, "delta {delta}: {f:?}");
            assert!(f.pads <= 2, "pads stay below the largest word: {f:?}");
        }
        assert_eq!(fit(5, &tokens, 1, true, 0), Fit { words: 5, pads: 0 });
        // +2 at word 5 (2 tokens): one word; +1: a pad, not a 2-token word.
        assert_eq!(fit(5, &tokens, 1, true, 2), Fit { words: 6, pads: 0 });
        assert_eq!(fit(5, &tokens, 1, true, 1), Fit { words: 5, pads: 1 });
        // −1 where the last word is 1 token; −2 removes it and a 2-token word
        // would overshoot, so the 2-token word goes and a pad comes back.
        assert_eq!(fit(5, &tokens, 1, true, -1), Fit { words: 4, pads: 0 });
        assert_eq!(fit(5, &tokens, 1, true, -2), Fit { words: 3, pads: 1 });
    }

    #[test]
    fn without_a_pad_the_nearest_body_and_never_below_min_words() {
        let tokens = [1, 1, 3, 1, 3, 1];
        // +1: word 3 (1 token), exact. Then word 4 is 3 tokens: +2 stays
        // 1 short rather than 2 over; +3 goes 1 over rather than 2 short.
        assert_eq!(fit(3, &tokens, 1, false, 1), Fit { words: 4, pads: 0 });
        assert_eq!(fit(3, &tokens, 1, false, 2), Fit { words: 4, pads: 0 });
        assert_eq!(fit(3, &tokens, 1, false, 3), Fit { words: 5, pads: 0 });
        assert_eq!(fit(3, &tokens, 1, false, 4), Fit { words: 5, pads: 0 });
        // −1 with a 3-token last word: removing it is 2 off, keeping it 1.
        assert_eq!(fit(3, &tokens, 1, false, -1), Fit { words: 3, pads: 0 });
        assert_eq!(fit(3, &tokens, 1, false, -2), Fit { words: 2, pads: 0 });
        assert_eq!(fit(3, &tokens, 2, true, -9), Fit { words: 2, pads: 0 });
    }

    #[test]
    fn bodies_cut_the_filler_at_words_and_pad_with_the_one_token_word() {
        let b = Bodies::new(7, 5, 9, Some("river"));
        assert_eq!(b.body(b.base), filler(5, 7));
        assert_eq!(b.body(Fit { words: 9, pads: 0 }), filler(9, 7));
        assert_eq!(
            b.body(Fit { words: 3, pads: 2 }),
            format!("{} river river", filler(3, 7))
        );
        assert_eq!(b.body(Fit { words: 0, pads: 1 }), "river");
        assert_eq!(b.body(Fit { words: 99, pads: 0 }), filler(9, 7));
        let none = Bodies::new(7, 5, 5, None);
        assert_eq!(none.body(Fit { words: 5, pads: 3 }), filler(5, 7));
        assert_eq!(
            Bodies::new(7, 0, 0, None).body(Fit { words: 0, pads: 0 }),
            ""
        );
    }

    #[test]
    fn achieved_says_how_far_the_server_counted_prompts_from_the_target() {
        use crate::measure::record::StreamCapture;
        let text = "name = \"t\"\n[[cell]]\nname = \"c\"\nprompt_tokens = 128\nmax_tokens = 1\nrequests = 4\n[[cell]]\nname = \"idle\"\nprompt_tokens = 64\nmax_tokens = 1\nrequests = 1\n";
        let cells = crate::config::suite::Suite::parse(text, "t.toml")
            .unwrap()
            .cells;
        let rec = |index, prompt: Option<u64>, outcome| RequestRecord {
            cell: "c".into(),
            index,
            send_offset_ms: 0.0,
            queue_ms: 0.0,
            target_prompt_tokens: Some(128),
            template_prompt_tokens: None,
            turn: None,
            capture: StreamCapture {
                prompt_tokens: prompt,
                ..Default::default()
            },
            outcome,
            detail: None,
            capacity: None,
        };
        let recs = [
            rec(0, Some(128), Outcome::Ok),
            rec(1, Some(131), Outcome::Ok),
            rec(2, Some(126), Outcome::Ok),
            rec(3, Some(200), Outcome::HttpError),
            rec(4, None, Outcome::Ok),
        ];
        assert_eq!(
            achieved(&cells, &recs),
            "c: 1 of 3 requests exactly on target (128); off by -2 to +3 tokens (-1.6% to +2.3%)"
        );
        assert_eq!(achieved(&cells, &recs[3..]), "");
    }

    #[test]
    fn fits_are_found_by_request_index() {
        let f = Fits {
            first: 10,
            fits: vec![None, Some(Fit { words: 3, pads: 1 })],
            took: Duration::ZERO,
            method: String::new(),
        };
        assert_eq!(f.get(11), Some(Fit { words: 3, pads: 1 }));
        assert_eq!((f.get(10), f.get(9), f.get(12)), (None, None, None));
        assert_eq!(f.len(), 1);
    }
}
