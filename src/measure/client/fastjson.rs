//! A fast path for parsing the usual streamed chunk.
//!
//! serde_json spends most of its time on a chunk in generic machinery (ten
//! keys matched through visitors, every string validated apart). This parser
//! handles the common case in one pass over bytes already known to be UTF-8,
//! and gives up — returning `None`, so the caller parses with serde_json —
//! on anything it is not sure to read exactly as serde would: any backslash
//! (escapes), a repeated known field, a known field of an unexpected type, an
//! `error` field, a `tool_calls` delta that is not `null`, a number that is
//! not a plain `u64` where one is read,
//! nesting deeper than serde's limit, or any JSON syntax error. So it never
//! accepts what serde rejects, and what it accepts equals serde's result
//! (strings always borrowed, as serde borrows unescaped strings).

use std::borrow::Cow;

use super::chunk::{Choice, Chunk, Delta, Str, Usage};

/// Below serde_json's recursion limit (128), so deep input always falls back.
const MAX_DEPTH: usize = 100;

/// Parse `data` into `out` (which must start as `Chunk::default()`); false
/// means "not sure": `out` is then partly filled and must be discarded.
/// Filled in place because a chunk is a few hundred bytes: moving it around
/// costs more than parsing the fields it usually has.
pub(super) fn parse_into<'a>(data: &'a [u8], out: &mut Chunk<'a>) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let mut p = Parser {
        s: text,
        b: data,
        i: 0,
    };
    p.ws();
    if p.chunk(out).is_none() {
        return false;
    }
    p.ws();
    p.i == p.b.len()
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Nonzero when some byte of `w` is `"`, `\\` or below 0x20: the classic
/// "has a zero byte" and "has a byte less than n" word tests, which are exact
/// as yes/no answers (only the position of later flags can be wrong).
fn special(w: u64) -> u64 {
    let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGHS;
    zero(w ^ (ONES * b'"' as u64)) | zero(w ^ (ONES * b'\\' as u64)) | below_space
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
}

/// Keys seen in one object, so a repeated known field falls back (serde rejects it).
#[derive(Default)]
struct Seen(u8);

impl Seen {
    fn first(&mut self, bit: u8) -> Option<()> {
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string without escapes or control characters, borrowed; the opening quote is next.
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        // Eight bytes at a time while none of them is special (quote, backslash, control).
        while let Some(w) = self.b.get(self.i..self.i + 8) {
            let w = u64::from_le_bytes(w.try_into().ok()?);
            if special(w) != 0 {
                break;
            }
            self.i += 8;
        }
        loop {
            match *self.b.get(self.i)? {
                b'"' => break,
                b'\\' | 0..=0x1f => return None,
                _ => self.i += 1,
            }
        }
        let s = self.s.get(start..self.i)?;
        self.i += 1;
        Some(s)
    }

    /// `null` or a string.
    fn opt_str(&mut self) -> Option<Option<Str<'a>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        Some(Some(Str(Cow::Borrowed(self.string()?))))
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        (self.b.get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Iterate `{ "key": value, ... }`; `field` reads each value (the key is given).
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            field(self, key)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Iterate `[ value, ... ]`; `item` reads each value.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        self.ws();
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Validate and skip any value.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(drop),
            b'{' => self.object(|p, _| p.skip(depth + 1)),
            b'[' => self.array(|p| p.skip(depth + 1)),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number().map(drop),
        }
    }

    /// A JSON number (RFC 8259 grammar); returns its text.
    fn number(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        let _ = self.eat(b'-');
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.digits1()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.digits1()?;
        }
        Some(&self.b[start..self.i])
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
    }

    fn digits1(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// `null` or a plain non-negative integer that fits a u64.
    fn opt_u64(&mut self) -> Option<Option<u64>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        let n = self.number()?;
        if !n.iter().all(u8::is_ascii_digit) {
            return None;
        }
        n.iter()
            .try_fold(0u64, |acc, &d| {
                acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
            .map(Some)
    }

    fn chunk(&mut self, c: &mut Chunk<'a>) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|p, key| match key {
            "model" => {
                seen.first(1)?;
                c.model = p.opt_str()?;
                Some(())
            }
            "system_fingerprint" => {
                seen.first(2)?;
                c.system_fingerprint = p.opt_str()?;
                Some(())
            }
            "choices" => {
                seen.first(4)?;
                if p.peek()? == b'n' {
                    return p.literal(b"null");
                }
                p.array(|p| {
                    let slot = if c.choices.first.is_none() {
                        c.choices.first.insert(Choice::default())
                    } else {
                        c.choices.rest.push(Choice::default());
                        c.choices.rest.last_mut()?
                    };
                    p.choice(slot)
                })
            }
            "usage" => {
                seen.first(8)?;
                if p.peek()? == b'n' {
                    return p.literal(b"null");
                }
                p.usage(c.usage.insert(Usage::default()))
            }
            // Rare, and carried as a serde Value: leave it to serde.
            "error" => None,
            // Final chunk only, with floats: serde reads it (the cost is one chunk).
            "timings" => None,
            _ => p.skip(1),
        })
    }

    fn choice(&mut self, c: &mut Choice<'a>) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|p, key| match key {
            "delta" => {
                seen.first(1)?;
                if p.peek()? == b'n' {
                    return p.literal(b"null");
                }
                p.delta(c.delta.insert(Delta::default()))
            }
            "text" => {
                seen.first(2)?;
                c.text = p.opt_str()?;
                Some(())
            }
            "finish_reason" => {
                seen.first(4)?;
                c.finish_reason = p.opt_str()?;
                Some(())
            }
            // `null` unless asked for; asked-for logprobs are left to serde.
            "logprobs" => {
                seen.first(8)?;
                p.literal(b"null")
            }
            _ => p.skip(2),
        })
    }

    fn delta(&mut self, d: &mut Delta<'a>) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|p, key| match key {
            "content" => {
                seen.first(1)?;
                d.content = p.opt_str()?;
                Some(())
            }
            "reasoning_content" => {
                seen.first(2)?;
                d.reasoning_content = p.opt_str()?;
                Some(())
            }
            "reasoning" => {
                seen.first(4)?;
                d.reasoning = p.opt_str()?;
                Some(())
            }
            // Tool-call deltas are assembled from serde's reading.
            "tool_calls" => {
                seen.first(8)?;
                p.literal(b"null")
            }
            _ => p.skip(3),
        })
    }

    fn usage(&mut self, u: &mut Usage) -> Option<()> {
        let mut seen = Seen::default();
        self.object(|p, key| match key {
            "prompt_tokens" => {
                seen.first(1)?;
                u.prompt_tokens = p.opt_u64()?;
                Some(())
            }
            "completion_tokens" => {
                seen.first(2)?;
                u.completion_tokens = p.opt_u64()?;
                Some(())
            }
            // Once per stream, in the usage chunk: left to serde.
            "prompt_tokens_details" | "completion_tokens_details" => None,
            _ => p.skip(2),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path's answer, if it gives one, as serde_json's would print.
    fn fast(data: &str) -> Option<String> {
        let mut c = Chunk::default();
        parse_into(data.as_bytes(), &mut c).then(|| format!("{c:?}"))
    }

    fn serde(data: &str) -> Option<String> {
        serde_json::from_slice::<Chunk<'_>>(data.as_bytes())
            .ok()
            .map(|c| format!("{c:?}"))
    }

    const TYPICAL: &[&str] = &[
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant","content":null},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"hmm","content":""}}],"model":null}"#,
        r#"{"choices":[{"delta":{"reasoning":"r é ü 漢"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}"#,
        r#"{"choices":[{"text":"abc","index":0,"logprobs":null,"finish_reason":"length"}]}"#,
        r#"{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"}},{"text":"c"}]}"#,
        r#" { "choices" : [ { "delta" : { "content" : "spaced" } } ] , "x" : [ 1 , -2.5e+3 , true , false , null , { } , [ ] ] } "#,
        r#"{"choices":null,"usage":{"prompt_tokens":null,"completion_tokens":18446744073709551615}}"#,
        r#"{"nested":{"a":[{"b":[{"c":{}}]}]},"choices":[{"delta":{"content":"deep"},"extra":{"k":[0.5,1E9]}}]}"#,
        r#"{"choices":[{"delta":{"content":"twelve bytes long string here with more than eight"}}]}"#,
    ];

    #[test]
    fn typical_chunks_take_the_fast_path_and_match_serde() {
        for t in TYPICAL {
            let f = fast(t);
            assert!(f.is_some(), "fast path refused {t}");
            assert_eq!(f, serde(t), "{t}");
        }
    }

    #[test]
    fn unusual_chunks_fall_back() {
        for t in [
            r#"{"choices":[{"delta":{"content":"line\nbreak"}}]}"#,
            r#"{"model":"a","model":"b"}"#,
            r#"{"error":null}"#,
            r#"{"error":{"message":"x"}}"#,
            r#"{"usage":{"prompt_tokens":-0}}"#,
            r#"{"usage":{"prompt_tokens":1.0}}"#,
            r#"{"usage":{"prompt_tokens":18446744073709551616}}"#,
            r#"{"choices":{}}"#,
            r#"{"choices":[[]]}"#,
            r#"[]"#,
            r#"{"a":01}"#,
            r#"{"a":1}x"#,
            "{\"a\":\"\u{1}\"}",
            r#"{"choices":[],"timings":{"cache_n":24,"prompt_ms":1.5}}"#,
            r#"{"choices":[{"delta":{"content":"a"},"logprobs":{"content":[]}}]}"#,
            r#"{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
        ] {
            assert_eq!(fast(t), None, "{t}");
        }
        let deep = format!("{{\"x\":{}1{}}}", "[".repeat(150), "]".repeat(150));
        assert_eq!(fast(&deep), None);
    }

    /// Every one-byte change of the typical chunks: whatever the fast path
    /// accepts, serde accepts with the same result.
    #[test]
    fn mutations_never_disagree_with_serde() {
        let alphabet: &[u8] = b"\"\\{}[],:0123456789-+.eEtrufalsn \t\n\x01\x7f";
        let mut accepted = 0;
        for t in TYPICAL {
            let b = t.as_bytes();
            for i in 0..b.len() {
                let mut variants: Vec<Vec<u8>> = Vec::new();
                let mut del = b.to_vec();
                del.remove(i);
                variants.push(del);
                for &c in alphabet {
                    let mut rep = b.to_vec();
                    rep[i] = c;
                    variants.push(rep);
                    let mut ins = b.to_vec();
                    ins.insert(i, c);
                    variants.push(ins);
                }
                for v in variants {
                    let mut c = Chunk::default();
                    if parse_into(&v, &mut c) {
                        accepted += 1;
                        let s = serde_json::from_slice::<Chunk<'_>>(&v);
                        let text = String::from_utf8_lossy(&v);
                        assert!(s.is_ok(), "fast accepted what serde rejects: {text}");
                        assert_eq!(
                            Some(format!("{c:?}")),
                            s.ok().map(|c| format!("{c:?}")),
                            "{text}"
                        );
                    }
                }
            }
        }
        assert!(accepted > 1000, "{accepted}");
    }

    #[test]
    fn word_scan_finds_every_special_byte() {
        for pos in 0..8 {
            for special_byte in [b'"', b'\\', 0u8, 0x1f] {
                let mut w = [b'a'; 8];
                w[pos] = special_byte;
                assert_ne!(special(u64::from_le_bytes(w)), 0, "{pos} {special_byte}");
            }
            let mut w = [0xC3u8; 8];
            w[pos] = b' ';
            assert_eq!(special(u64::from_le_bytes(w)), 0);
        }
        assert_eq!(special(u64::from_le_bytes(*b"plain ok")), 0);
    }
}
