//! Incremental Server-Sent-Events parser (WHATWG "event stream" rules).
//!
//! Feed byte slices as they arrive; complete events come out through a
//! callback, borrowing either the input slice (the common case: a whole event
//! inside one read, no copy) or the parser's own buffers (an event split across
//! reads or with several `data:` lines). Splitting works on bytes: CR and LF
//! never occur inside a multi-byte UTF-8 sequence, so a read that ends in the
//! middle of a character needs no special care, and `data` is handed out as
//! bytes so the consumer validates UTF-8 once (e.g. inside `serde_json`).
//!
//! Memory is bounded by `max_event_bytes`: an event (or a single unterminated
//! line) larger than that yields [`SseError::EventTooLarge`] once, and the rest
//! of that event is skipped up to the next blank line.

use std::fmt;

/// Default cap on one event: far above any real chat chunk, far below trouble.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;

/// One dispatched event. Borrowed: copy out what must outlive the callback.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// The `event:` field, empty when the event had none (type "message").
    pub event: &'a str,
    /// The `data:` lines joined by `\n` (the spec's trailing LF removed).
    pub data: &'a [u8],
    /// The last event ID seen so far in the stream (it persists across events, per spec).
    pub id: Option<&'a str>,
    /// A valid `retry:` value (ms) given within this event's block.
    pub retry: Option<u64>,
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("event", &self.event)
            .field("data", &String::from_utf8_lossy(self.data))
            .field("id", &self.id)
            .field("retry", &self.retry)
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// The event being assembled (or one line of it) exceeded the limit; it was dropped.
    #[error("SSE event larger than {limit} bytes")]
    EventTooLarge { limit: usize },
}

/// Where the current event's data lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Data {
    /// No `data:` line yet: the event would not be dispatched.
    None,
    /// Exactly one data line, lying in the input slice of the current `feed` call.
    Input { start: usize, end: usize },
    /// In `SseParser::data` (several lines, or carried across reads).
    Buf,
}

/// What a completed line asks the caller of `line` to do.
enum LineAction {
    Nothing,
    Dispatch,
    TooLarge,
}

/// Incremental parser; one per stream. Reusable after [`SseParser::reset`].
#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    /// Bytes of the current line that arrived without a terminator yet.
    line: Vec<u8>,
    /// The last input ended in CR: a LF at the start of the next input belongs to it.
    skip_lf: bool,
    /// No line has been completed yet (a leading BOM is stripped from the first one).
    at_start: bool,
    data: Vec<u8>,
    data_at: Data,
    event: String,
    last_id: Option<String>,
    retry: Option<u64>,
    event_retry: Option<u64>,
    /// Size of the field lines of the current event so far, excluding terminators.
    event_bytes: usize,
    /// Skipping an oversized event up to its blank line.
    discarding: bool,
    /// While discarding: the current (unterminated) line is not empty.
    discard_line_nonempty: bool,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseParser {
    pub fn new(max_event_bytes: usize) -> Self {
        SseParser {
            max_event_bytes,
            line: Vec::new(),
            skip_lf: false,
            at_start: true,
            data: Vec::new(),
            data_at: Data::None,
            event: String::new(),
            last_id: None,
            retry: None,
            event_retry: None,
            event_bytes: 0,
            discarding: false,
            discard_line_nonempty: false,
        }
    }

    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// The last valid `retry:` value seen anywhere in the stream, ms.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The spec's last-event-ID buffer.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// True when input ended inside an event: an unterminated line or fields
    /// not yet closed by a blank line. See [`SseParser::finish`].
    pub fn has_pending(&self) -> bool {
        !self.discarding && (!self.line.is_empty() || self.data_at != Data::None)
    }

    /// Forget everything, keep the buffers' capacity.
    pub fn reset(&mut self) {
        self.line.clear();
        self.skip_lf = false;
        self.at_start = true;
        self.last_id = None;
        self.retry = None;
        self.discarding = false;
        self.discard_line_nonempty = false;
        self.clear_event();
    }

    fn clear_event(&mut self) {
        self.data.clear();
        self.data_at = Data::None;
        self.event.clear();
        self.event_retry = None;
        self.event_bytes = 0;
    }

    /// Parse `input`, calling `on_event` for every event completed by it (and
    /// once with an error for every oversized event). Every byte is consumed:
    /// an incomplete tail is kept for the next call.
    pub fn feed<F>(&mut self, input: &[u8], mut on_event: F)
    where
        F: FnMut(Result<Event<'_>, SseError>),
    {
        let mut pos = 0;
        if self.skip_lf && !input.is_empty() {
            self.skip_lf = false;
            if input[0] == b'\n' {
                pos = 1;
            }
        }
        while pos < input.len() {
            let rest = &input[pos..];
            let Some(off) = find_eol(rest) else {
                self.partial(rest, &mut on_event);
                break;
            };
            let end = pos + off;
            // Where the next line starts: CRLF is one terminator, even split across reads.
            let next = if input[end] == b'\r' {
                match input.get(end + 1) {
                    Some(b'\n') => end + 2,
                    Some(_) => end + 1,
                    None => {
                        self.skip_lf = true;
                        end + 1
                    }
                }
            } else {
                end + 1
            };

            if self.discarding {
                let blank = pos == end && !self.discard_line_nonempty;
                self.discard_line_nonempty = false;
                if blank {
                    self.discarding = false;
                }
                pos = next;
                continue;
            }

            let action = if self.line.is_empty() {
                self.line(input, pos, end, true)
            } else if self.event_bytes + self.line.len() + (end - pos) > self.max_event_bytes {
                LineAction::TooLarge
            } else {
                // Complete the carried-over line; swap the buffer out to borrow it while parsing.
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&input[pos..end]);
                let action = self.line(&line, 0, line.len(), false);
                line.clear();
                self.line = line;
                action
            };
            match action {
                LineAction::Nothing => {}
                LineAction::Dispatch => self.dispatch(input, &mut on_event),
                LineAction::TooLarge => {
                    self.too_large(&mut on_event);
                    // The offending line is complete; skip the rest of its event.
                    self.discard_line_nonempty = false;
                }
            }
            pos = next;
        }
        // Data still borrowed from `input` must be copied before `input` goes away.
        if let Data::Input { start, end } = self.data_at {
            self.data.clear();
            self.data.extend_from_slice(&input[start..end]);
            self.data_at = Data::Buf;
        }
    }

    /// End of input. Processes an unterminated last line and returns the event
    /// that was still open (fields without the closing blank line), if it has
    /// data. The spec says to drop such an event; returning it lets the caller
    /// decide (a server that closes right after its last `data:` line is common).
    /// Call [`SseParser::reset`] before reusing the parser for another stream.
    pub fn finish(&mut self) -> Option<Event<'_>> {
        let discarding = self.discarding;
        self.discarding = false;
        self.discard_line_nonempty = false;
        self.skip_lf = false;
        if discarding {
            self.line.clear();
            self.clear_event();
            return None;
        }
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            // The buffered line already passed the size check; TooLarge is handled for form.
            let action = self.line(&line, 0, line.len(), false);
            self.line = line;
            self.line.clear();
            if let LineAction::TooLarge = action {
                self.clear_event();
                return None;
            }
        }
        if self.data_at == Data::None {
            self.clear_event();
            return None;
        }
        self.data_at = Data::None;
        self.event_bytes = 0;
        let retry = self.event_retry.take();
        Some(Event {
            event: &self.event,
            data: &self.data,
            id: self.last_id.as_deref(),
            retry,
        })
        // `event` and `data` are cleared lazily: `clear_event` runs at the start of the next event.
    }

    /// Buffer an unterminated tail, bounded by the event size limit.
    fn partial<F>(&mut self, rest: &[u8], on_event: &mut F)
    where
        F: FnMut(Result<Event<'_>, SseError>),
    {
        if self.discarding {
            self.discard_line_nonempty = true;
            return;
        }
        if self.event_bytes + self.line.len() + rest.len() > self.max_event_bytes {
            self.too_large(on_event);
            self.discard_line_nonempty = true;
            return;
        }
        self.line.extend_from_slice(rest);
    }

    fn too_large<F>(&mut self, on_event: &mut F)
    where
        F: FnMut(Result<Event<'_>, SseError>),
    {
        self.line.clear();
        self.clear_event();
        self.discarding = true;
        on_event(Err(SseError::EventTooLarge {
            limit: self.max_event_bytes,
        }));
    }

    /// Interpret one complete line, `src[start..end]`. `from_input` says
    /// whether `src` is the caller's input slice (so data may stay borrowed).
    fn line(&mut self, src: &[u8], start: usize, end: usize, from_input: bool) -> LineAction {
        // Checked before anything else (BOM, comment) so that the verdict does not
        // depend on whether the line arrived whole or was buffered in pieces.
        if self.event_bytes + (end - start) > self.max_event_bytes {
            return LineAction::TooLarge;
        }
        let mut line = &src[start..end];
        let mut start = start;
        if self.at_start {
            self.at_start = false;
            if let Some(stripped) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = stripped;
                start += 3;
            }
        }
        if line.is_empty() {
            return LineAction::Dispatch;
        }
        if line[0] == b':' {
            return LineAction::Nothing;
        }
        // A finished event's fields are kept until the next one starts (see `finish`).
        if self.event_bytes == 0 {
            self.clear_event();
        }
        self.event_bytes += line.len();
        let (name, value, value_start) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let mut v = colon + 1;
                if line.get(v) == Some(&b' ') {
                    v += 1;
                }
                (&line[..colon], &line[v..], start + v)
            }
            None => (line, &line[line.len()..], end),
        };
        match name {
            b"data" => match self.data_at {
                Data::None if from_input => {
                    self.data_at = Data::Input {
                        start: value_start,
                        end,
                    };
                }
                Data::None => {
                    self.data.clear();
                    self.data.extend_from_slice(value);
                    self.data_at = Data::Buf;
                }
                Data::Input { start: s, end: e } => {
                    // `from_input` is necessarily true here: a borrowed range never outlives its feed.
                    self.data.clear();
                    self.data.extend_from_slice(&src[s..e]);
                    self.data.push(b'\n');
                    self.data.extend_from_slice(value);
                    self.data_at = Data::Buf;
                }
                Data::Buf => {
                    self.data.push(b'\n');
                    self.data.extend_from_slice(value);
                }
            },
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
            }
            // Per spec an id containing NUL is ignored.
            b"id" if !value.contains(&0) => {
                let v = String::from_utf8_lossy(value);
                match &mut self.last_id {
                    Some(s) => {
                        s.clear();
                        s.push_str(&v);
                    }
                    None => self.last_id = Some(v.into_owned()),
                }
            }
            // Only ASCII digits are valid; an overflowing value is ignored too.
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = value.iter().try_fold(0u64, |acc, d| {
                    acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
                });
                if let Some(ms) = ms {
                    self.retry = Some(ms);
                    self.event_retry = Some(ms);
                }
            }
            _ => {}
        }
        LineAction::Nothing
    }

    /// A blank line: hand out the event, if it has data, and start a new one.
    fn dispatch<F>(&mut self, input: &[u8], on_event: &mut F)
    where
        F: FnMut(Result<Event<'_>, SseError>),
    {
        let data: &[u8] = match self.data_at {
            Data::None => {
                // Per spec, a block without data dispatches nothing (id/retry still took effect).
                self.clear_event();
                return;
            }
            Data::Input { start, end } => &input[start..end],
            Data::Buf => &self.data,
        };
        on_event(Ok(Event {
            event: &self.event,
            data,
            id: self.last_id.as_deref(),
            retry: self.event_retry,
        }));
        self.clear_event();
    }
}

/// Offset of the first CR or LF.
#[inline]
fn find_eol(s: &[u8]) -> Option<usize> {
    // Word-at-a-time scan: SSE lines are mostly long JSON payloads.
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const CR: u64 = LO * b'\r' as u64;
    const LF: u64 = LO * b'\n' as u64;
    let mut i = 0;
    while i + 8 <= s.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[i..i + 8]);
        let w = u64::from_le_bytes(w);
        let (a, b) = (w ^ CR, w ^ LF);
        // Classic "has zero byte" test; may flag false positives only after a true one.
        let z = (a.wrapping_sub(LO) & !a) | (b.wrapping_sub(LO) & !b);
        if z & HI != 0 {
            break;
        }
        i += 8;
    }
    s[i..]
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .map(|p| p + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Item {
        Ev {
            event: String,
            data: String,
            id: Option<String>,
            retry: Option<u64>,
        },
        /// What `finish` handed back.
        Flushed(String),
        TooLarge,
    }

    fn ev(data: &str) -> Item {
        Item::Ev {
            event: String::new(),
            data: data.into(),
            id: None,
            retry: None,
        }
    }

    fn own(r: Result<Event<'_>, SseError>) -> Item {
        match r {
            Ok(e) => Item::Ev {
                event: e.event.into(),
                data: String::from_utf8(e.data.to_vec()).expect("test data is UTF-8"),
                id: e.id.map(Into::into),
                retry: e.retry,
            },
            Err(SseError::EventTooLarge { .. }) => Item::TooLarge,
        }
    }

    fn run(parts: &[&[u8]], max: usize) -> Vec<Item> {
        let mut p = SseParser::new(max);
        let mut out = Vec::new();
        for part in parts {
            p.feed(part, |r| out.push(own(r)));
        }
        if let Some(e) = p.finish() {
            out.push(Item::Flushed(
                String::from_utf8(e.data.to_vec()).expect("test data is UTF-8"),
            ));
        }
        out
    }

    struct Case {
        name: &'static str,
        input: &'static [u8],
        max: usize,
        want: Vec<Item>,
    }

    fn cases() -> Vec<Case> {
        let big = DEFAULT_MAX_EVENT_BYTES;
        vec![
            Case {
                name: "openai style with keep-alives",
                input: b": keep-alive\n\ndata: {\"a\":1}\n\n: ping\ndata: {\"b\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}\n\ndata: [DONE]\n\n",
                max: big,
                want: vec![ev("{\"a\":1}"), ev("{\"b\":\"é€😀\"}"), ev("[DONE]")],
            },
            Case {
                name: "no space after colon, CRLF",
                input: b"data:x\r\n\r\ndata:  two spaces\r\n\r\n",
                max: big,
                want: vec![ev("x"), ev(" two spaces")],
            },
            Case {
                name: "lone CR endings",
                input: b"data: a\r\rdata: b\rdata: c\r\r",
                max: big,
                want: vec![ev("a"), ev("b\nc")],
            },
            Case {
                name: "mixed endings, CR then LF pairs form one terminator",
                input: b"data: a\r\n\ndata: b\n\r\n:c\r\r",
                max: big,
                want: vec![ev("a"), ev("b")],
            },
            Case {
                name: "multi-line data and empty data lines",
                input: b"data: l1\ndata\ndata:\ndata: l4\n\ndata:\n\n",
                max: big,
                want: vec![ev("l1\n\n\nl4"), ev("")],
            },
            Case {
                name: "event, id, retry fields",
                input: b"event: error\nid: 7\nretry: 1500\ndata: {\"error\":{}}\n\nid\nretry: nope\ndata: z\n\nid: 8\n\ndata: y\n\n",
                max: big,
                want: vec![
                    Item::Ev {
                        event: "error".into(),
                        data: "{\"error\":{}}".into(),
                        id: Some("7".into()),
                        retry: Some(1500),
                    },
                    Item::Ev {
                        event: String::new(),
                        data: "z".into(),
                        id: Some(String::new()),
                        retry: None,
                    },
                    Item::Ev {
                        event: String::new(),
                        data: "y".into(),
                        id: Some("8".into()),
                        retry: None,
                    },
                ],
            },
            Case {
                name: "blocks without data dispatch nothing; event type resets",
                input: b"event: ping\n\nevent: x\nfoo: bar\n\ndata: d\n\n",
                max: big,
                want: vec![ev("d")],
            },
            Case {
                name: "BOM at start is ignored",
                input: b"\xEF\xBB\xBFdata: a\n\n",
                max: big,
                want: vec![ev("a")],
            },
            Case {
                name: "unterminated final event is flushed",
                input: b"data: a\n\ndata: b\ndata: c",
                max: big,
                want: vec![ev("a"), Item::Flushed("b\nc".into())],
            },
            Case {
                name: "final event without blank line is flushed",
                input: b"data: [DONE]\n",
                max: big,
                want: vec![Item::Flushed("[DONE]".into())],
            },
            Case {
                name: "trailing comment or fields without data flush nothing",
                input: b"data: a\n\n: bye\nevent: x",
                max: big,
                want: vec![ev("a")],
            },
            Case {
                name: "oversized event is reported once and skipped",
                input: b"data: 0123456789\n\ndata: 0123456789012345678901234567890123456789\ndata: more\n\ndata: ok\n\n",
                max: 24,
                want: vec![ev("0123456789"), Item::TooLarge, ev("ok")],
            },
            Case {
                name: "oversized by many small lines",
                input: b"data: aaaa\ndata: bbbb\ndata: cccc\ndata: dddd\ndata: eeee\n\ndata: ok\n\n",
                max: 30,
                want: vec![Item::TooLarge, ev("ok")],
            },
            Case {
                name: "oversized unterminated tail",
                input: b"data: ok\n\ndata: 0123456789012345678901234567890123456789",
                max: 24,
                want: vec![ev("ok"), Item::TooLarge],
            },
        ]
    }

    #[test]
    fn every_split_gives_the_same_events() {
        for c in cases() {
            let whole = run(&[c.input], c.max);
            assert_eq!(whole, c.want, "{}: whole", c.name);
            for i in 0..=c.input.len() {
                let (a, b) = c.input.split_at(i);
                assert_eq!(run(&[a, b], c.max), c.want, "{}: split at {i}", c.name);
            }
            let bytes: Vec<&[u8]> = c.input.chunks(1).collect();
            assert_eq!(run(&bytes, c.max), c.want, "{}: byte by byte", c.name);
        }
    }

    #[test]
    fn every_pair_of_splits_gives_the_same_events() {
        for c in cases() {
            let n = c.input.len();
            for i in 0..=n {
                for j in i..=n {
                    let parts = [&c.input[..i], &c.input[i..j], &c.input[j..]];
                    assert_eq!(run(&parts, c.max), c.want, "{}: splits {i},{j}", c.name);
                }
            }
        }
    }

    #[test]
    fn single_read_events_borrow_the_input() {
        let input = b"data: {\"x\":1}\n\n";
        let mut p = SseParser::default();
        let mut n = 0;
        p.feed(input, |r| {
            let e = r.expect("fits");
            assert!(input.as_ptr_range().contains(&e.data.as_ptr()));
            n += 1;
        });
        assert_eq!(n, 1);
        assert!(!p.has_pending());
    }

    #[test]
    fn memory_stays_bounded_on_an_endless_line() {
        let mut p = SseParser::new(1024);
        let chunk = [b'a'; 512];
        let mut errors = 0;
        p.feed(b"data: ", |_| {});
        for _ in 0..1000 {
            p.feed(&chunk, |r| {
                assert!(r.is_err());
                errors += 1;
            });
        }
        assert_eq!(errors, 1);
        assert!(p.line.capacity() <= 1024);
        // The parser recovers after the blank line that ends the bad event.
        let mut got = Vec::new();
        p.feed(b"\n\ndata: ok\n\n", |r| got.push(own(r)));
        assert_eq!(got, vec![ev("ok")]);
    }

    #[test]
    fn has_pending_tracks_open_events() {
        let mut p = SseParser::default();
        p.feed(b"data: a\n", |_| {});
        assert!(p.has_pending());
        p.feed(b"\n", |_| {});
        assert!(!p.has_pending());
        p.feed(b"dat", |_| {});
        assert!(p.has_pending());
        p.reset();
        assert!(!p.has_pending());
    }

    #[test]
    fn find_eol_matches_naive_scan() {
        let mut s = vec![b'x'; 40];
        assert_eq!(find_eol(&s), None);
        for i in 0..40 {
            for t in [b'\r', b'\n'] {
                s[i] = t;
                assert_eq!(find_eol(&s), Some(i));
                s[i] = 0x8d; // high bytes must not confuse the word test
            }
            s[i] = b'x';
        }
        // 0x0e/0x0b differ from CR/LF by one bit; a borrow must not cause a false hit.
        let t = b"\x0e\x0b\x0c\x0e\x0b\x0c\x0e\x0b\x0e\x0b\x0c\x0e\x0b\x0c\x0e\x0bz\n";
        assert_eq!(find_eol(t), Some(17));
    }
}
