//! Fuzzing entry points: one pure function per parser that reads untrusted
//! input, each checking that parser's invariants on arbitrary bytes and
//! panicking when one is broken. "Does not crash" is the least of them.
//!
//! The cargo-fuzz targets under `fuzz/` call these; this module's tests run
//! them over the committed seed corpus (`fuzz/corpus/<target>/`) and every
//! committed finding (`fuzz/regressions/<target>/`), so `cargo test` replays
//! findings on stable without cargo-fuzz. See `docs/fuzzing.md`.
//!
//! - [`sse`]: [`SseParser`] against a whole-input reference model written
//!   from the WHATWG rules, fed whole and split at many points, under several
//!   event size limits.
//! - [`report`]: bytes read as a v1 report the way `infergate verify`,
//!   `report` and `decide` read one, then verified and rendered.
//! - [`plan`]: text parsed as a qualification plan, a workload suite (with its
//!   turnover tables) and a comparison policy.
//! - [`compare`]: bytes read as a run artifact, compared with itself and
//!   with a slower copy; every report `compare` makes verifies clean.
//! - [`dataset`]: text read as a ShareGPT file, OpenAI request lines and a
//!   Mooncake trace, as a workload cell reads a user's file.
//! - [`names`]: bytes as names, put in every slot of a report and rendered
//!   in every format against a twin with plain names (the oracle is
//!   `report::hostile`), and given to the suite reader as cell names.

use std::path::Path;

use serde_json::Value;

use crate::config::plan::{BASELINE, CANDIDATE, Driver, OnOutcome, Plan, PolicySource};
use crate::config::suite::Suite;
use crate::measure::sse::{DEFAULT_MAX_EVENT_BYTES, Event, SseError, SseParser};
use crate::measure::turnover::TurnoverSpec;
use crate::report::{self, Policy, Report};

// ---------------------------------------------------------------- SSE ----

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

// ------------------------------------------------------------- report ----

const REPORT_NAME: &str = "fuzz-report.json";

/// Report: parsing arbitrary bytes (as `infergate verify` and `report` do)
/// gives a value or an error that names the source, line and column. A value
/// can be verified and rendered in every format; the HTML page carries only
/// the renderer's own tags (every report string escaped), and every Markdown
/// table row has its header's number of cells. A value that is also a typed
/// [`Report`] (what `decide` reads) survives being written back and read
/// again unchanged, and if the report was consistent it still verifies clean.
pub fn report(data: &[u8]) {
    let value = match report::parse_report_value(data, REPORT_NAME) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("{e:#}");
            let loc = msg
                .strip_prefix(REPORT_NAME)
                .and_then(|m| m.strip_prefix(':'))
                .unwrap_or_else(|| panic!("error does not name its source: {msg}"));
            let mut parts = loc.splitn(3, ':');
            for what in ["line", "column"] {
                let n: usize = parts
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("error has no {what}: {msg}"));
                assert!(what == "column" || n >= 1, "line 0: {msg}");
            }
            assert!(
                parts.next().is_some_and(|m| !m.trim().is_empty()),
                "error without a message: {msg}"
            );
            return;
        }
    };
    check_report_value(&value);

    let Ok(typed) = serde_json::from_value::<Report>(value.clone()) else {
        return;
    };
    let written = typed.to_value();
    assert!(
        written.is_object(),
        "a typed report serializes to an object"
    );
    let reread: Report = serde_json::from_value(written.clone())
        .unwrap_or_else(|e| panic!("a report infergate writes does not read back: {e}"));
    assert_eq!(reread, typed, "a report changed on a write/read round trip");
    check_report_value(&written);
    if report::verify(&value).is_empty() {
        let after = report::verify(&written);
        assert!(
            after.is_empty(),
            "a consistent report is inconsistent once rewritten: {after:?}"
        );
    }
}

// ------------------------------------------------------------ compare ----

/// Compare: bytes read as a run artifact (as `compare` reads one), then
/// compared with itself and with a copy whose every sample is 7% larger.
/// `compare` either refuses the pair or makes a report that `verify`
/// accepts in full — every derived value recomputed bit for bit from the
/// report — and that renders. A report `compare` writes that `verify`
/// rejects is a bug in one of them.
pub fn compare(data: &[u8]) {
    let Ok(a) = serde_json::from_slice::<crate::artifact::RunArtifact>(data) else {
        return;
    };
    let mut slower = a.clone();
    for c in &mut slower.cells {
        for v in c.samples.values_mut() {
            v.iter_mut().for_each(|x| *x *= 1.07);
        }
    }
    let mut policy = Policy {
        source: "fuzz".into(),
        ..Policy::default()
    };
    // Bounded work per input; the statistics do not depend on the count.
    policy.bootstrap.iterations = 200;
    for b in [&a, &slower] {
        let Ok(r) = report::compare(&a, b, &policy) else {
            continue;
        };
        let value = r.to_value();
        let d = report::verify(&value);
        assert!(
            d.is_empty(),
            "a report compare made does not verify: {d:#?}"
        );
        check_report_value(&value);
    }
}

/// Verify and render one report value, checking the renderers' promises.
fn check_report_value(value: &Value) {
    for d in report::verify(value) {
        assert!(!d.expected.is_empty(), "disagreement without expectation");
        let _ = d.to_string();
    }
    for (color, verbose) in [(true, true), (false, false)] {
        let _ = report::terminal(value, report::TerminalOptions { color, verbose });
    }
    check_markdown(&report::markdown(value));
    check_html(&report::html(value));
}

/// The tags the HTML renderer writes itself; any other tag came from a string
/// in the report that was not escaped.
const HTML_TAGS: &[&str] = &[
    "!doctype", "a", "b", "body", "circle", "code", "details", "div", "h1", "h2", "h3", "head",
    "html", "li", "line", "meta", "p", "polyline", "rect", "span", "style", "summary", "svg",
    "table", "td", "text", "th", "title", "tr", "ul",
];

fn check_html(html: &str) {
    let bytes = html.as_bytes();
    for (i, _) in html.match_indices('<') {
        let rest = &bytes[i + 1..];
        let rest = rest.strip_prefix(b"/").unwrap_or(rest);
        let name: String = rest
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'!')
            .map(|b| b.to_ascii_lowercase() as char)
            .collect();
        assert!(
            HTML_TAGS.contains(&name.as_str()),
            "HTML has a tag <{name}> the renderer does not write (unescaped report text?) near {:?}",
            &html[i..html.len().min(i + 60)]
        );
    }
}

/// Cells of one Markdown table row: `|` not escaped by a backslash.
fn md_cells(line: &str) -> usize {
    let mut n = 0;
    let mut escaped = false;
    for c in line.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '|' if !escaped => n += 1,
            _ => escaped = false,
        }
    }
    n
}

fn check_markdown(md: &str) {
    let lines: Vec<&str> = md.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        // A table: a row, then the delimiter row, then rows until a line that is no row.
        let is_table = lines[i].starts_with('|')
            && lines
                .get(i + 1)
                .is_some_and(|l| l.starts_with("| ---") || l.starts_with("| :--"));
        if !is_table {
            i += 1;
            continue;
        }
        let cells = md_cells(lines[i]);
        let mut j = i + 1;
        while j < lines.len() && !lines[j].trim().is_empty() {
            assert!(
                lines[j].starts_with('|') && md_cells(lines[j]) == cells,
                "Markdown table row {j} does not have the header's {cells} cells: {:?}\nheader: {:?}",
                lines[j],
                lines[i]
            );
            j += 1;
        }
        i = j;
    }
}

// --------------------------------------------------------------- plan ----

const PLAN_FILE: &str = "plans/fuzz.toml";
const PLAN_DIR: &str = "/fuzz/plans";
const SUITE_FILE: &str = "suites/fuzz.toml";
const POLICY_FILE: &str = "policies/fuzz.toml";

/// Plan text (arbitrary bytes, read as UTF-8 with replacement) parsed as a
/// plan, a suite and a policy: none panics; every error names its file and
/// a line or field (a line whenever the text is not TOML at all); whatever
/// is accepted satisfies the checks its parser promises.
pub fn plan(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let is_toml = text.parse::<toml::Table>().is_ok();
    check_plan(&text, is_toml);
    check_suite(&text, is_toml);
    check_policy(&text, is_toml);
}

/// Would parsing read a policy file outside [`PLAN_DIR`] (which does not
/// exist)? `policy = "/dev/zero"` is the operator's business, not a finding.
fn reads_outside(text: &str) -> bool {
    let Ok(t) = text.parse::<toml::Table>() else {
        return false;
    };
    t.get("policy")
        .and_then(toml::Value::as_str)
        .is_some_and(|p| Path::new(p).is_absolute() || p.contains(".."))
}

fn check_plan(text: &str, is_toml: bool) {
    if reads_outside(text) {
        return;
    }
    let lines = text.lines().count() + 1;
    let plan = match Plan::parse(text, Path::new(PLAN_FILE), Path::new(PLAN_DIR)) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.file, PLAN_FILE, "{e}");
            assert!(!e.message.trim().is_empty(), "plan error without message");
            assert!(
                e.line.is_some() || e.field.as_ref().is_some_and(|f| !f.is_empty()),
                "plan error names neither a line nor a field: {e}"
            );
            assert!(is_toml || e.line.is_some(), "TOML error without line: {e}");
            if let Some(l) = e.line {
                assert!((1..=lines).contains(&l), "line {l} of {lines}: {e}");
            }
            assert!(e.to_string().starts_with(PLAN_FILE));
            return;
        }
    };
    assert!(is_toml, "a plan was read from text that is not TOML");
    assert_eq!(plan.text, text);
    assert_eq!(plan.sha256, crate::util::sha256_hex(text.as_bytes()));
    assert!(
        (1..=100).contains(&plan.repeats),
        "repeats {}",
        plan.repeats
    );
    if plan.schedule == crate::config::plan::PlanSchedule::Interleaved {
        assert_eq!(
            plan.repeats, 1,
            "repeats belong to the alternating schedule"
        );
    } else {
        assert!(plan.window.is_none() && !plan.adaptive.enabled);
    }
    assert!(plan.window.is_none_or(|w| w >= 1));
    assert!(plan.adaptive.max_requests >= 1 && plan.adaptive.max_minutes > 0.0);
    let order = plan.pass_order();
    assert_eq!(order.len(), 2 * plan.repeats);
    for label in [BASELINE, CANDIDATE] {
        assert_eq!(
            order.iter().filter(|(l, _)| *l == label).count(),
            plan.repeats
        );
        let r = plan.runtime(label).expect("both runtimes");
        assert_eq!(r.label, label);
        let _ = plan.expected_model(label);
        match &r.driver {
            Driver::External { url, health_path } => {
                assert!(url.starts_with("http://") || url.starts_with("https://"));
                assert!(health_path.starts_with('/'));
            }
            Driver::Process(_) => {}
            Driver::Container(c) => {
                assert_ne!(c.port, 0);
                assert!(c.health_path.starts_with('/'));
                let again = crate::config::plan::ImageRef::parse(&c.image.to_string());
                assert_eq!(again.as_ref(), Ok(&c.image), "image ref round trip");
            }
        }
    }
    assert!(
        plan.suite.is_absolute(),
        "suite path not anchored: {:?}",
        plan.suite
    );
    assert_ne!(plan.decision.on_fail, OnOutcome::Promote);
    if let PolicySource::Inline(p) = &plan.policy {
        Policy::from_toml_str(p, "inline").expect("an inline policy the plan accepted");
    }
}

fn check_suite(text: &str, is_toml: bool) {
    let suite = match Suite::parse(text, SUITE_FILE) {
        Ok(s) => s,
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(
                msg.starts_with(SUITE_FILE),
                "suite error without file: {msg}"
            );
            assert!(is_toml || msg.contains("line "), "no line: {msg}");
            return;
        }
    };
    for c in &suite.cells {
        c.arrival().expect("validated arrival");
        let _ = c.shape();
        for tokens in [0, c.prompt_tokens, u64::MAX] {
            let _ = c.prompt_within_tolerance(tokens);
        }
        // A bigger context window never refuses a cell a smaller one took.
        let mut fits = false;
        for window in [0, c.max_tokens, c.prompt_tokens, u64::MAX / 2, u64::MAX] {
            let ok = c.check_fits(window).is_ok();
            assert!(ok || !fits, "cell fits a smaller window but not {window}");
            fits = ok;
        }
    }
    if let Ok(specs) = TurnoverSpec::from_tables(&suite.turnover) {
        for s in &specs {
            let _ = (s.max_tokens(), s.shots(), s.prompt_style(), s.cell_label(1));
        }
    }
}

fn check_policy(text: &str, is_toml: bool) {
    let policy = match Policy::from_toml_str(text, POLICY_FILE) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!(e.file, POLICY_FILE);
            assert!(!e.message.trim().is_empty(), "policy error without message");
            assert!(is_toml || e.line.is_some(), "TOML error without line: {e}");
            return;
        }
    };
    for m in &policy.metrics {
        assert!((0.0..=report::policy::MAX_THRESHOLD_PERCENT).contains(&m.threshold_percent));
        assert!((0.0..=1.0).contains(&m.quantile));
        // Reports name the flag after the threshold; readers must get it back.
        let flag = report::regression_flag_name(m.threshold_percent);
        assert_eq!(
            report::parse_regression_flag(&flag),
            Some(m.threshold_percent),
            "flag {flag} does not give its threshold back"
        );
    }
    let t = &policy.turnover;
    assert!(t.alpha > 0.0 && t.alpha < 1.0 && t.confidence > 0.0 && t.confidence < 1.0);
    let b = &policy.bootstrap;
    assert!(b.iterations > 0 && b.confidence > 0.0 && b.confidence < 1.0);
    let _ = policy.summary();
}

// ------------------------------------------------------------ datasets ----

/// The file name every dataset error must lead with.
const DATASET_FILE: &str = "fuzz/dataset.jsonl";

/// Text read by each dataset reader. A refusal names the file (and, for a
/// bad record, where in it); a dataset read holds something to send; a
/// trace's lines are in time order with lengths within the request limits.
pub fn dataset(data: &[u8]) {
    use crate::config::dataset::{Dataset, DatasetError, openai_text, sharegpt_text, trace_text};
    use crate::config::limits::{MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    type Reader = fn(&str, &str) -> Result<Dataset, DatasetError>;
    let readers: [Reader; 3] = [sharegpt_text, openai_text, trace_text];
    for read in readers {
        match read(text, DATASET_FILE) {
            Ok(d) => {
                assert!(d.capacity(1) > 0, "an accepted dataset supplies requests");
                match &d {
                    Dataset::Conversations(c) => assert!(c.iter().all(|c| {
                        !c.turns.is_empty() && c.turns.iter().all(|(u, _)| !u.trim().is_empty())
                    })),
                    Dataset::Requests(r) => assert!(!r.is_empty()),
                    Dataset::Trace(t) => {
                        for w in t.windows(2) {
                            assert!(w[0].timestamp_ms <= w[1].timestamp_ms);
                        }
                        let span = t[t.len() - 1].timestamp_ms - t[0].timestamp_ms;
                        assert!(span <= crate::config::dataset::MAX_TRACE_SPAN_MS);
                        for e in t {
                            assert!((1..=MAX_PROMPT_TOKENS).contains(&e.input_length));
                            assert!((1..=MAX_OUTPUT_TOKENS).contains(&e.output_length));
                        }
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.starts_with(DATASET_FILE), "{msg}");
                if let DatasetError::Bad { at, why, .. } = &e {
                    assert!(!at.is_empty() && !why.is_empty(), "{msg}");
                }
            }
        }
    }
}

// -------------------------------------------------------------- names ----

/// Names: up to 8 names from the bytes (split at 0xFF), in every slot of a
/// report a suite, plan, server or report file fills. Every format must
/// show them as text and open nothing: the same structure as the report
/// with plain names in their place, no control character, no spreadsheet
/// formula (`report::hostile::check`). The suite reader must refuse a cell
/// or suite name holding a control character or bidirectional override,
/// naming the file and the field without printing the name; any other name
/// it reads as given.
pub fn names(data: &[u8]) {
    let names = report::hostile::names_from(data);
    let (hostile, twin) = report::hostile::reports(&names).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = report::hostile::check(&hostile, &twin) {
        panic!("names {names:?}: {e}");
    }
    for name in &names {
        check_suite_name(name);
    }
}

/// A suite naming itself and its one cell `name`.
fn check_suite_name(name: &str) {
    let quoted = toml::Value::String(name.to_string()).to_string();
    let text = format!(
        "name = {quoted}\n\n[[cell]]\nname = \"ok\"\nprompt_tokens = 16\nmax_tokens = 8\nrequests = 1\n\n[[cell]]\nname = {quoted}\nprompt_tokens = 16\nmax_tokens = 8\nrequests = 1\n"
    );
    let refused = report::text::name_problem(name).is_some();
    match Suite::parse(&text, SUITE_FILE) {
        Ok(s) => {
            assert!(!refused, "a suite accepted the name {name:?}");
            assert_eq!((s.name.as_str(), s.cells[1].name.as_str()), (name, name));
        }
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(
                !msg.chars().any(report::text::is_unsafe),
                "the error prints what it refuses: {msg:?}"
            );
            if refused {
                assert!(
                    msg.starts_with(&format!("{SUITE_FILE}: line 1: field `name`: ")),
                    "{msg}"
                );
            } else {
                // Only an empty name or one that is the other cell's.
                assert!(name.trim().is_empty() || name == "ok", "{name:?}: {msg}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn files(target: &str, kind: &str) -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz")
            .join(kind)
            .join(target);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        out.sort();
        out
    }

    /// Every committed seed and regression input of `target`, through `f`.
    fn replay(target: &str, f: fn(&[u8])) {
        let seeds = files(target, "corpus");
        assert!(!seeds.is_empty(), "no seeds under fuzz/corpus/{target}");
        for p in seeds.iter().chain(&files(target, "regressions")) {
            let data = std::fs::read(p).expect("read corpus file");
            let r = std::panic::catch_unwind(|| f(&data));
            assert!(r.is_ok(), "{target}: {} broke an invariant", p.display());
        }
    }

    #[test]
    fn sse_corpus_and_regressions() {
        replay("sse", sse);
    }

    #[test]
    fn report_corpus_and_regressions() {
        replay("report", report);
    }

    #[test]
    fn compare_corpus_and_regressions() {
        replay("compare", compare);
    }

    #[test]
    fn plan_corpus_and_regressions() {
        replay("plan", plan);
    }

    #[test]
    fn dataset_corpus_and_regressions() {
        replay("dataset", dataset);
    }

    #[test]
    fn names_corpus_and_regressions() {
        replay("names", names);
    }

    #[test]
    fn a_cell_name_with_a_line_break_is_refused_by_file_line_and_field() {
        let name = report::hostile::NAMES[0];
        let quoted = toml::Value::String(name.to_string()).to_string();
        let text = format!(
            "name = \"s\"\n\n[[cell]]\nname = {quoted}\nprompt_tokens = 16\nmax_tokens = 8\nrequests = 1\n"
        );
        let e = format!("{:#}", Suite::parse(&text, SUITE_FILE).unwrap_err());
        assert_eq!(
            e,
            "suites/fuzz.toml: line 3: [[cell]]: field `name`: a line break (U+000A) at character 2 is not allowed in a name: names are printed on terminals and in CI summaries, HTML, JUnit and CSV, where it could forge or hide text"
        );
        check_suite_name(name);
    }

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

    #[test]
    fn html_and_markdown_checks_catch_what_they_should() {
        assert!(std::panic::catch_unwind(|| check_html("<p>ok</p><script>")).is_err());
        check_html("<p>a &lt;script&gt;</p>");
        check_markdown("| a | b |\n| --- | --- |\n| 1 | 2 \\| 3 |\n\ntext | x\n");
        let broken = "| a | b |\n| --- | --- |\n| `x\ny` | 2 |\n";
        assert!(std::panic::catch_unwind(|| check_markdown(broken)).is_err());
    }
}
