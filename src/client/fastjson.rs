//! A fast path for parsing the usual streamed chunk.
//!
//! serde_json spends most of its time on a chunk in generic machinery (ten
//! keys matched through visitors, every string validated apart). This parser
//! handles the common case in one pass over bytes already known to be UTF-8,
//! and gives up — returning `None`, so the caller parses with serde_json —
//! on anything it is not sure to read exactly as serde would: any backslash
//! (escapes), a repeated known field, a known field of an unexpected type, an
//! `error` field, a number that is not a plain `u64` where one is read,
//! nesting deeper than serde's limit, or any JSON syntax error. So it never
//! accepts what serde rejects, and what it accepts equals serde's result
//! (strings always borrowed, as serde borrows unescaped strings).

use std::borrow::Cow;

use super::{Choice, Choices, Chunk, Delta, Str, Usage};

/// Below serde_json's recursion limit (128), so deep input always falls back.
const MAX_DEPTH: usize = 100;

pub(super) fn parse(data: &[u8]) -> Option<Chunk<'_>> {
    let text = std::str::from_utf8(data).ok()?;
    let mut p = Parser { s: text, b: data, i: 0 };
    p.ws();
    let chunk = p.chunk()?;
    p.ws();
    (p.i == p.b.len()).then_some(chunk)
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

    fn chunk(&mut self) -> Option<Chunk<'a>> {
        let mut c = Chunk {
            model: None,
            system_fingerprint: None,
            choices: Choices::default(),
            usage: None,
            error: None,
        };
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
                    let ch = p.choice()?;
                    if c.choices.first.is_none() {
                        c.choices.first = Some(ch);
                    } else {
                        c.choices.rest.push(ch);
                    }
                    Some(())
                })
            }
            "usage" => {
                seen.first(8)?;
                if p.peek()? == b'n' {
                    return p.literal(b"null");
                }
                c.usage = Some(p.usage()?);
                Some(())
            }
            // Rare, and carried as a serde Value: leave it to serde.
            "error" => None,
            _ => p.skip(1),
        })?;
        Some(c)
    }

    fn choice(&mut self) -> Option<Choice<'a>> {
        let mut c = Choice {
            delta: None,
            text: None,
            finish_reason: None,
        };
        let mut seen = Seen::default();
        self.object(|p, key| match key {
            "delta" => {
                seen.first(1)?;
                if p.peek()? == b'n' {
                    return p.literal(b"null");
                }
                c.delta = Some(p.delta()?);
                Some(())
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
            _ => p.skip(2),
        })?;
        Some(c)
    }

    fn delta(&mut self) -> Option<Delta<'a>> {
        let mut d = Delta {
            content: None,
            reasoning_content: None,
            reasoning: None,
        };
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
            _ => p.skip(3),
        })?;
        Some(d)
    }

    fn usage(&mut self) -> Option<Usage> {
        let mut u = Usage {
            prompt_tokens: None,
            completion_tokens: None,
        };
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
            _ => p.skip(2),
        })?;
        Some(u)
    }
}
