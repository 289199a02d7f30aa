//! The server's side while a cell runs: read each metrics endpoint (the
//! target's `/metrics`, extra ones the user names) just before the cell's
//! measured requests, at a fixed interval during them, and just after;
//! append every scrape to `server-metrics.jsonl` as it is taken. The window
//! math is `infergate_report::server_metrics`; this file only fetches and parses.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::server_metrics::{Kind, MetricSample, Scrape};

pub const SCRAPE_LOG_FILE: &str = "server-metrics.jsonl";
/// The target's own endpoint, by name (a plan may not give an extra one that name).
pub use crate::config::plan::TARGET_ENDPOINT;

/// What to scrape, and how often during a cell.
#[derive(Debug, Clone)]
pub struct ScrapeOptions {
    /// Read the target's `/metrics` (a target without one is noted, not an error).
    pub target: bool,
    /// Extra endpoints: (name, full URL), e.g. a DCGM exporter or a router.
    pub extra: Vec<(String, String)>,
    /// Between the before and after scrapes; None: only those two.
    pub interval: Option<Duration>,
}

impl Default for ScrapeOptions {
    fn default() -> Self {
        ScrapeOptions {
            target: true,
            extra: Vec::new(),
            interval: Some(Duration::from_secs(5)),
        }
    }
}

impl ScrapeOptions {
    pub fn none() -> Self {
        ScrapeOptions {
            target: false,
            extra: Vec::new(),
            interval: None,
        }
    }

    /// How scrapes were taken, for the artifact's method notes.
    pub fn describe(&self) -> String {
        let mut what: Vec<String> = Vec::new();
        if self.target {
            what.push("the target's /metrics".into());
        }
        what.extend(self.extra.iter().map(|(n, _)| format!("endpoint {n}")));
        let every = self.interval.map_or("no scrapes between".to_string(), |d| {
            format!("every {:.1} s between", d.as_secs_f64())
        });
        format!(
            "{} read (Prometheus text format) after each cell's warmup, {every}, and after its last request: the window holds the cell's journaled requests only (prompt sizing's max_tokens=1 probes and the warmup come before it); counters and histograms as their increase over the windows, gauges over every scrape; every scrape in {SCRAPE_LOG_FILE}",
            what.join(" and ")
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Before,
    During,
    After,
}

/// One line of the scrape log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScrapeEntry {
    pub cell: String,
    /// Unique per measured window: the run's nonce and the window's first request.
    pub window: String,
    pub endpoint: String,
    pub url: String,
    pub phase: Phase,
    /// The window's request indices as half-open ranges (in `before` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<[usize; 2]>,
    pub offset_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<Vec<MetricSample>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ScrapeEntry {
    pub fn scrape(&self) -> Option<Scrape> {
        self.samples.as_ref().map(|s| Scrape {
            offset_ms: self.offset_ms,
            samples: s.clone(),
        })
    }
}

/// Indices as sorted half-open ranges: `[0,1,2,5]` → `[[0,3],[5,6]]`.
pub fn ranges(indices: &[usize]) -> Vec<[usize; 2]> {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<[usize; 2]> = Vec::new();
    for i in sorted {
        match out.last_mut() {
            Some(r) if r[1] == i => r[1] += 1,
            _ => out.push([i, i + 1]),
        }
    }
    out
}

/// Parse a Prometheus text exposition. Only `# TYPE` lines and samples are
/// kept (HELP text and other comments carry nothing the window math reads,
/// and the parser is stricter about them than servers are); a sample's kind
/// is its family's TYPE. Non-finite values are left out.
pub fn parse(text: &str) -> Result<Vec<MetricSample>, String> {
    let mut kept = String::with_capacity(text.len());
    for line in text.lines().map(|l| l.trim_end_matches('\r')) {
        let t = line.trim();
        if t.is_empty() || (t.starts_with('#') && !t.starts_with("# TYPE ")) {
            continue;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    let (_, families) = nom_openmetrics::parser::prometheus(&kept).map_err(|e| {
        let at = match &e {
            nom::Err::Error(v) | nom::Err::Failure(v) => v
                .errors
                .first()
                .map(|(rest, _)| rest.lines().next().unwrap_or("").to_string()),
            nom::Err::Incomplete(_) => None,
        };
        match at {
            Some(line) => format!(
                "not the Prometheus text format at line `{}`",
                truncate(&line)
            ),
            None => "not the Prometheus text format".to_string(),
        }
    })?;
    let mut types: BTreeMap<&str, Kind> = BTreeMap::new();
    for f in &families {
        for d in &f.descriptors {
            if let nom_openmetrics::MetricDescriptor::Type { metric, r#type } = d {
                types.insert(metric, kind_of(r#type));
            }
        }
    }
    let kind = |name: &str| -> Kind {
        if name.ends_with("_created") {
            return Kind::Gauge;
        }
        if let Some(k) = types.get(name) {
            return *k;
        }
        for suffix in ["_total", "_bucket", "_sum", "_count"] {
            if let Some(k) = name.strip_suffix(suffix).and_then(|b| types.get(b)) {
                return *k;
            }
        }
        Kind::Untyped
    };
    Ok(families
        .iter()
        .flat_map(|f| f.samples.iter())
        .filter(|s| s.number().is_finite())
        .map(|s| MetricSample {
            name: s.name().to_string(),
            labels: s
                .labels()
                .iter()
                .map(|l| (l.name.to_string(), l.value.clone()))
                .collect(),
            kind: kind(s.name()),
            value: s.number(),
        })
        .collect())
}

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

fn kind_of(t: &nom_openmetrics::MetricType) -> Kind {
    use nom_openmetrics::MetricType as T;
    match t {
        T::Counter => Kind::Counter,
        T::Gauge => Kind::Gauge,
        T::Histogram => Kind::Histogram,
        T::Summary => Kind::Summary,
        // The parser has no tag for "histogram" (it comes back as Unknown).
        T::Unknown(s) if s.trim() == "histogram" => Kind::Histogram,
        _ => Kind::Untyped,
    }
}

/// An append-only log of scrapes, one JSON line each, written as taken.
pub struct ScrapeLog {
    file: File,
}

impl ScrapeLog {
    pub fn open(path: &Path) -> Result<ScrapeLog> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(ScrapeLog { file })
    }

    fn append(&mut self, e: &ScrapeEntry) -> Result<()> {
        let mut line = serde_json::to_vec(e).context("serializing a scrape")?;
        line.push(b'\n');
        self.file.write_all(&line).context("appending a scrape")
    }
}

/// Every entry of a scrape log; a missing file is no entries. A torn last
/// line (a kill mid-write) is left out; any other bad line is an error
/// naming it.
pub fn read_log(path: &Path) -> Result<Vec<ScrapeEntry>> {
    let f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let mut out = Vec::new();
    let mut reader = BufReader::new(f);
    let mut buf = String::new();
    for lineno in 1.. {
        buf.clear();
        let n = reader
            .read_line(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        if buf.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(&buf) {
            Ok(e) => out.push(e),
            Err(_) if !buf.ends_with('\n') => break,
            Err(e) => anyhow::bail!("{}:{lineno}: not a scrape entry: {e}", path.display()),
        }
    }
    Ok(out)
}

/// One endpoint to scrape.
#[derive(Debug, Clone)]
struct Endpoint {
    name: String,
    url: String,
    /// Credentials redacted, as written into artifacts.
    shown: String,
    /// Whether the target's API key goes with the request: only to the
    /// target's own origin (scheme, host, port), never to a third party.
    with_key: bool,
}

/// Takes scrapes for one run and logs them.
pub struct Scraper {
    http: reqwest::Client,
    key: Option<String>,
    endpoints: Vec<Endpoint>,
    interval: Option<Duration>,
    /// The log, and every entry written to it by this scraper, so a caller
    /// pools them without reading the log back.
    log: Mutex<(ScrapeLog, Vec<ScrapeEntry>)>,
    t0: Instant,
}

impl Scraper {
    /// None when nothing is to be scraped.
    pub fn new(
        opts: &ScrapeOptions,
        base: &str,
        key: Option<String>,
        log: &Path,
        t0: Instant,
    ) -> Result<Option<Arc<Scraper>>> {
        let mut endpoints = Vec::new();
        if opts.target {
            let url = format!("{base}/metrics");
            endpoints.push(Endpoint {
                name: TARGET_ENDPOINT.to_string(),
                shown: crate::util::redact_url(&url),
                url,
                with_key: true,
            });
        }
        for (name, url) in &opts.extra {
            endpoints.push(Endpoint {
                name: name.clone(),
                url: url.clone(),
                shown: crate::util::redact_url(url),
                with_key: same_origin(url, base),
            });
        }
        if endpoints.is_empty() {
            return Ok(None);
        }
        let http = crate::measure::http_client()
            .timeout(Duration::from_secs(5))
            .build()
            .context("building the metrics HTTP client")?;
        Ok(Some(Arc::new(Scraper {
            http,
            key,
            endpoints,
            interval: opts.interval,
            log: Mutex::new((ScrapeLog::open(log)?, Vec::new())),
            t0,
        })))
    }

    /// Scrape every endpoint once and log each result. An endpoint that
    /// fails is logged with why; only a log that cannot be written is an error.
    pub async fn take(
        &self,
        cell: &str,
        window: &str,
        phase: Phase,
        requests: &[[usize; 2]],
    ) -> Result<()> {
        for ep in &self.endpoints {
            let offset_ms = self.t0.elapsed().as_secs_f64() * 1000.0;
            let (samples, error) = match self.fetch(ep).await {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(e)),
            };
            let entry = ScrapeEntry {
                cell: cell.to_string(),
                window: window.to_string(),
                endpoint: ep.name.clone(),
                url: ep.shown.clone(),
                phase,
                requests: requests.to_vec(),
                offset_ms,
                samples,
                error,
            };
            let mut log = self
                .log
                .lock()
                .map_err(|_| anyhow::anyhow!("scrape log lock poisoned"))?;
            log.0.append(&entry)?;
            log.1.push(entry);
        }
        Ok(())
    }

    /// Every entry this scraper wrote, in the log's order.
    pub fn taken(&self) -> Vec<ScrapeEntry> {
        self.log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
            .clone()
    }

    async fn fetch(&self, ep: &Endpoint) -> Result<Vec<MetricSample>, String> {
        let mut req = self.http.get(&ep.url);
        if let Some(k) = self.key.as_ref().filter(|_| ep.with_key) {
            req = req.bearer_auth(k);
        }
        let resp = req.send().await.map_err(|e| {
            format!(
                "GET failed: {}",
                crate::util::redact_url(&e.without_url().to_string())
            )
        })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("GET answered {status}"));
        }
        let limit = crate::measure::answer::MAX_METRICS_BYTES;
        let text = crate::measure::answer::read_text_capped(resp, limit, "a metrics answer")
            .await
            .map_err(|e| e.to_string())?;
        parse(&text)
    }

    /// Scrape at the interval until the returned guard is dropped.
    pub fn during(self: &Arc<Self>, cell: &str, window: &str) -> Option<DuringGuard> {
        let every = self.interval?;
        let me = self.clone();
        let (cell, window) = (cell.to_string(), window.to_string());
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                // A log that cannot be written fails the cell at its after-scrape.
                if me.take(&cell, &window, Phase::During, &[]).await.is_err() {
                    return;
                }
            }
        });
        Some(DuringGuard(task))
    }
}

/// Whether two URLs share an origin (scheme, host and port); false when
/// either does not parse.
fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin().is_tuple() && a.origin() == b.origin(),
        _ => false,
    }
}

/// Stops the interval scrapes of a window when dropped. A scrape in flight
/// is dropped with it: its log line is written whole or not at all.
pub struct DuringGuard(tokio::task::JoinHandle<()>);

impl Drop for DuringGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LLAMA: &str = "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed\n# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 31\n# HELP llamacpp:requests_processing Number of requests processing\n# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n";

    #[test]
    fn parses_colon_names_types_and_labels() {
        let s = parse(LLAMA).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].name, "llamacpp:prompt_tokens_total");
        assert_eq!((s[0].kind, s[0].value), (Kind::Counter, 31.0));
        assert_eq!(s[1].kind, Kind::Gauge);
        let vllm = "# HELP vllm:ttft TTFT\n# TYPE vllm:ttft histogram\nvllm:ttft_bucket{engine=\"0\",le=\"+Inf\"} 3.0\r\nvllm:ttft_sum{engine=\"0\"} 1.5\n\nvllm:ttft_count{engine=\"0\"} 3.0\n# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total{m=\"a \\\"b\\\"\"} 1.0e+03\nvllm:prompt_tokens_created{m=\"x\"} 1.7e+09\nnan_gauge NaN\nplain 2";
        let s = parse(vllm).unwrap();
        let kinds: Vec<(&str, Kind)> = s.iter().map(|m| (m.name.as_str(), m.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                ("vllm:ttft_bucket", Kind::Histogram),
                ("vllm:ttft_sum", Kind::Histogram),
                ("vllm:ttft_count", Kind::Histogram),
                ("vllm:prompt_tokens_total", Kind::Counter),
                ("vllm:prompt_tokens_created", Kind::Gauge),
                ("plain", Kind::Untyped),
            ]
        );
        assert_eq!(s[0].labels["le"], "+Inf");
        assert_eq!(s[3].labels["m"], "a \"b\"");
        assert_eq!(s[3].value, 1000.0);
    }

    #[test]
    fn a_page_that_is_not_metrics_says_where() {
        let e = parse("<html>\n<body>Not Found</body>\n").unwrap_err();
        assert!(e.contains("<html>"), "{e}");
    }

    #[test]
    fn the_key_goes_only_to_the_targets_own_origin() {
        let base = "http://user:pw@127.0.0.1:8000/v1/..";
        assert!(same_origin("http://127.0.0.1:8000/metrics", base));
        assert!(same_origin(
            "http://127.0.0.1:8000/other/metrics",
            "http://127.0.0.1:8000"
        ));
        assert!(!same_origin("http://127.0.0.1:9400/metrics", base), "port");
        assert!(
            !same_origin("https://127.0.0.1:8000/metrics", base),
            "scheme"
        );
        assert!(!same_origin("http://localhost:8000/metrics", base), "host");
        assert!(!same_origin("not a url", base));
    }

    /// A loopback metrics server that answers one page and records the
    /// Authorization header of each request (None when absent).
    async fn recording_server() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let auth = head
                    .lines()
                    .find_map(|l| l.strip_prefix("authorization: ").map(str::to_string));
                log.lock().unwrap().push(auth);
                let _ = s
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{LLAMA}",
                            LLAMA.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            }
        });
        (base, seen)
    }

    #[tokio::test]
    async fn a_third_party_metrics_endpoint_never_receives_the_api_key() {
        let (target, at_target) = recording_server().await;
        let (dcgm, at_dcgm) = recording_server().await;
        let dir = tempfile::tempdir().unwrap();
        let opts = ScrapeOptions {
            target: true,
            extra: vec![
                ("dcgm".into(), format!("{dcgm}/metrics")),
                ("same".into(), format!("{target}/metrics")),
            ],
            ..ScrapeOptions::default()
        };
        let s = Scraper::new(
            &opts,
            &target,
            Some("sekrit".into()),
            &dir.path().join(SCRAPE_LOG_FILE),
            Instant::now(),
        )
        .unwrap()
        .unwrap();
        s.take("c", "w", Phase::Before, &[]).await.unwrap();
        assert!(
            s.taken().iter().all(|e| e.error.is_none()),
            "{:?}",
            s.taken()
        );
        let bearer = Some("Bearer sekrit".to_string());
        assert_eq!(*at_target.lock().unwrap(), [bearer.clone(), bearer]);
        assert_eq!(*at_dcgm.lock().unwrap(), [None]);
    }

    #[test]
    fn ranges_compress_sorted_indices() {
        assert_eq!(ranges(&[5, 0, 1, 2]), vec![[0, 3], [5, 6]]);
        assert!(ranges(&[]).is_empty());
    }

    #[test]
    fn the_log_keeps_every_whole_line_and_drops_a_torn_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SCRAPE_LOG_FILE);
        let mut log = ScrapeLog::open(&path).unwrap();
        let e = ScrapeEntry {
            cell: "c".into(),
            window: "n/0".into(),
            endpoint: TARGET_ENDPOINT.into(),
            url: "http://127.0.0.1:1/metrics".into(),
            phase: Phase::Before,
            requests: vec![[0, 4]],
            offset_ms: 1.5,
            samples: Some(parse(LLAMA).unwrap()),
            error: None,
        };
        log.append(&e).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"cell\":")
            .unwrap();
        assert_eq!(read_log(&path).unwrap(), vec![e]);
        std::fs::write(&path, "{}\n").unwrap();
        let err = read_log(&path).unwrap_err().to_string();
        assert!(err.contains(":1: not a scrape entry"), "{err}");
        assert!(read_log(&dir.path().join("none")).unwrap().is_empty());
    }
}
