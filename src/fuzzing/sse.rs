//! The SSE target: [`SseParser`] against a whole-input reference model
//! written from the WHATWG rules, fed whole and split at many points, under
//! several event size limits.

use crate::measure::sse::{DEFAULT_MAX_EVENT_BYTES, Event, SseError, SseParser};

/// Event size limits every input is parsed under: the degenerate ones, small
/// ones so that the oversize paths are reached by short inputs, and the client's.
const SSE_LIMITS: [usize; 6] = [0, 1, 8, 32, 256, DEFAULT_MAX_EVENT_BYTES];

/// Inputs up to this long are also fed one byte per call.
const BYTEWISE_MAX: usize = 2048;
/// Inputs up to this long are also fed as two pieces, split at every offset.
const EVERY_SPLIT_MAX: usize = 96;

/// One event as the parser handed it out, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ev {
    event: String,
    data: Vec<u8>,
    id: Option<String>,
    retry: Option<u64>,
}

/// What a stream produced, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    Event(Ev),
    TooLarge,
    /// The event `finish` returned.
    Flushed(Ev),
}

/// Everything observable after a whole stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SseOutcome {
    items: Vec<Item>,
    last_id: Option<String>,
    retry: Option<u64>,
}

fn own(e: &Event<'_>) -> Ev {
    Ev {
        event: e.event.to_string(),
        data: e.data.to_vec(),
        id: e.id.map(str::to_string),
        retry: e.retry,
    }
}

/// Feed `parts` in order, then finish; checks the per-event bounds on the way.
fn sse_run(p: &mut SseParser, parts: &[&[u8]], max: usize) -> SseOutcome {
    let mut items = Vec::new();
    for part in parts {
        p.feed(part, |r| match r {
            Ok(e) => {
                check_event_bounds(&e, max);
                items.push(Item::Event(own(&e)));
            }
            Err(SseError::EventTooLarge { limit }) => {
                assert_eq!(limit, max, "the error names the parser's limit");
                items.push(Item::TooLarge);
            }
        });
    }
    let pending = p.has_pending();
    if let Some(e) = p.finish() {
        assert!(
            pending,
            "finish returned an event but has_pending() was false"
        );
        check_event_bounds(&e, max);
        items.push(Item::Flushed(own(&e)));
    }
    assert!(!p.has_pending(), "has_pending() after finish");
    SseOutcome {
        items,
        last_id: p.last_event_id().map(str::to_string),
        retry: p.retry(),
    }
}

fn check_event_bounds(e: &Event<'_>, max: usize) {
    // The data lines (with their `data:` names) were counted against the limit.
    assert!(
        e.data.len() <= max,
        "event data of {} bytes passed a limit of {max}",
        e.data.len()
    );
    // Text fields are decoded lossily: one byte may become U+FFFD (3 bytes).
    assert!(e.event.len() <= 3 * max, "event type beyond the limit");
    assert!(
        e.id.is_none_or(|id| id.len() <= 3 * max),
        "event id beyond the limit"
    );
}

/// FNV-1a: split points that depend on the input, reproducibly.
fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Pieces of 0..=24 bytes (empty feeds included) drawn from `seed`.
fn chunks(data: &[u8], seed: u64) -> Vec<&[u8]> {
    let mut x = seed | 1;
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let n = ((x % 25) as usize).min(rest.len());
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
    }
    out
}

/// The input's lines, split on CRLF, CR or LF, and its unterminated last line.
fn split_lines(input: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let mut lines = Vec::new();
    let (mut i, mut start) = (0, 0);
    while i < input.len() {
        match input[i] {
            b'\r' => {
                lines.push(&input[start..i]);
                i += if input.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                start = i;
            }
            b'\n' => {
                lines.push(&input[start..i]);
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    (lines, &input[start..])
}

/// The model's state between lines.
struct SseModelState {
    items: Vec<Item>,
    at_start: bool,
    discarding: bool,
    event_bytes: usize,
    event: String,
    data: Option<Vec<u8>>,
    event_retry: Option<u64>,
    last_id: Option<String>,
    retry: Option<u64>,
}
impl SseModelState {
    fn clear(&mut self) {
        self.event.clear();
        self.data = None;
        self.event_retry = None;
        self.event_bytes = 0;
    }
    fn current(&self) -> Option<Ev> {
        self.data.as_ref().map(|d| Ev {
            event: self.event.clone(),
            data: d.clone(),
            id: self.last_id.clone(),
            retry: self.event_retry,
        })
    }
    /// One complete line that passed the size check.
    fn line(&mut self, raw: &[u8]) {
        let mut line = raw;
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            if let Some(ev) = self.current() {
                self.items.push(Item::Event(ev));
            }
            self.clear();
            return;
        }
        if line[0] == b':' {
            return;
        }
        self.event_bytes += line.len();
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(c) => {
                let v = &line[c + 1..];
                (&line[..c], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => match &mut self.data {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(value);
                }
                None => self.data = Some(value.to_vec()),
            },
            b"event" => self.event = String::from_utf8_lossy(value).into_owned(),
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                if let Ok(ms) = std::str::from_utf8(value).unwrap_or("x").parse::<u64>() {
                    self.retry = Some(ms);
                    self.event_retry = Some(ms);
                }
            }
            _ => {}
        }
    }
    /// The size rule; true when the line may be processed.
    fn admit(&mut self, raw: &[u8], max: usize) -> bool {
        if self.discarding {
            if raw.is_empty() {
                self.discarding = false;
            }
            return false;
        }
        if self.event_bytes + raw.len() > max {
            self.items.push(Item::TooLarge);
            self.clear();
            self.discarding = true;
            return false;
        }
        true
    }
}

/// Reference model: the whole input at once, line by line, straight from the
/// spec, with the parser's documented size rule: a line that would bring its
/// event past `max` bytes (field lines counted without terminators; the line
/// itself counted as received, comments and a first-line BOM included) drops
/// the event, is reported once, and everything up to the next blank line is
/// skipped. An unterminated last line is processed, and `finish` returns an
/// event that has data but no closing blank line.
fn sse_model(input: &[u8], max: usize) -> SseOutcome {
    let (lines, tail) = split_lines(input);
    let mut st = SseModelState {
        items: Vec::new(),
        at_start: true,
        discarding: false,
        event_bytes: 0,
        event: String::new(),
        data: None,
        event_retry: None,
        last_id: None,
        retry: None,
    };
    for raw in lines {
        if st.admit(raw, max) {
            st.line(raw);
        }
    }
    if !tail.is_empty() && st.admit(tail, max) {
        // A blank result (a lone BOM) can only happen before any data: no event.
        st.line(tail);
    }
    if !st.discarding
        && let Some(ev) = st.current()
    {
        st.items.push(Item::Flushed(ev));
    }
    SseOutcome {
        items: st.items,
        last_id: st.last_id,
        retry: st.retry,
    }
}

/// SSE: under every limit in [`SSE_LIMITS`], the parser agrees with the
/// reference model whether the input arrives whole, in pseudo-random pieces
/// (empty ones included), one byte at a time (short inputs) or in two pieces
/// split at every offset (very short inputs); a parser reused after
/// `finish` + `reset` behaves like a new one; no event exceeds the limit.
pub fn sse(data: &[u8]) {
    let seed = fnv(data);
    for max in SSE_LIMITS {
        let want = sse_model(data, max);
        let mut p = SseParser::new(max);
        assert_eq!(p.max_event_bytes(), max);
        let whole = sse_run(&mut p, &[data], max);
        assert_eq!(whole, want, "max {max}: whole input vs the model");

        p.reset();
        assert_eq!(
            sse_run(&mut p, &[data], max),
            want,
            "max {max}: a reset parser differs from a new one"
        );

        let pieces = chunks(data, seed ^ max as u64);
        assert_eq!(
            sse_run(&mut SseParser::new(max), &pieces, max),
            want,
            "max {max}: pieces {:?}",
            pieces.iter().map(|c| c.len()).collect::<Vec<_>>()
        );

        if data.len() <= BYTEWISE_MAX {
            let bytes: Vec<&[u8]> = data.chunks(1).collect();
            assert_eq!(
                sse_run(&mut SseParser::new(max), &bytes, max),
                want,
                "max {max}: byte by byte"
            );
        }
        if data.len() <= EVERY_SPLIT_MAX {
            for i in 0..=data.len() {
                let (a, b) = data.split_at(i);
                assert_eq!(
                    sse_run(&mut SseParser::new(max), &[a, b], max),
                    want,
                    "max {max}: split at {i}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_model_agrees_on_the_parsers_own_cases() {
        let input = b"\xEF\xBB\xBFevent: e\nid: 1\nretry: 10\ndata: a\ndata\r\n\r: c\rdata: b\n\ndata: tail";
        let got = sse_model(input, DEFAULT_MAX_EVENT_BYTES);
        let ev = |event: &str, data: &[u8], retry| Ev {
            event: event.into(),
            data: data.to_vec(),
            id: Some("1".into()),
            retry,
        };
        assert_eq!(
            got.items,
            vec![
                Item::Event(ev("e", b"a\n", Some(10))),
                Item::Event(ev("", b"b", None)),
                Item::Flushed(ev("", b"tail", None)),
            ]
        );
        assert_eq!((got.last_id.as_deref(), got.retry), (Some("1"), Some(10)));
        sse(input);
        // Oversized: reported once, the rest of its event skipped.
        let got = sse_model(b"data: 0123456789\ndata: x\n\ndata: ok\n\n", 8);
        assert_eq!(got.items[0], Item::TooLarge);
        assert_eq!(got.items.len(), 2);
    }
}
