//! `infergate capture` against the loopback fast source: what passes
//! through is what the upstream sent, the trace holds shapes and no text.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use infergate::capture::{Capture, Config, Summary};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use serde_json::{Value, json};
use tokio::sync::oneshot;

const KEY: &str = "sk-capture-test-4f7d9a1c2b3e5f60718293a4b5c6d7e8";

struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Summary>,
    dir: tempfile::TempDir,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(mut self) -> (Summary, Vec<Value>, tempfile::TempDir) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let summary = self.task.await.unwrap();
        let text = std::fs::read_to_string(self.dir.path().join("trace.jsonl")).unwrap();
        let lines = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (summary, lines, self.dir)
    }
}

async fn capture(upstream: String, tweak: impl FnOnce(&mut Config)) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config::new("127.0.0.1:0".parse().unwrap(), upstream, dir.path());
    tweak(&mut cfg);
    let c = Capture::bind(cfg).await.unwrap();
    let addr = c.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        c.run(async {
            let _ = rx.await;
        })
        .await
        .unwrap()
    });
    Running {
        addr,
        stop: Some(tx),
        task,
        dir,
    }
}

fn source(cfg: FastSourceConfig) -> FastSource {
    FastSource::start(cfg).expect("fast source starts").1
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn chat(prompt: &str, stream: bool, max_tokens: u64) -> Value {
    json!({"model": "fastsource", "stream": stream, "max_tokens": max_tokens, "temperature": 0.7,
           "messages": [{"role": "user", "content": prompt}]})
}

async fn post(url: &str, body: &Value) -> (u16, Vec<u8>) {
    let r = client()
        .post(url)
        .bearer_auth(KEY)
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

/// No run of 16 characters of any secret is in any file under `dir`.
fn assert_nothing_of(dir: &Path, secrets: &[&str]) {
    let mut files = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        files += 1;
        for s in secrets {
            for w in s.as_bytes().windows(16) {
                assert!(
                    !bytes.windows(16).any(|b| b == w),
                    "{} holds {:?}",
                    p.display(),
                    String::from_utf8_lossy(w)
                );
            }
        }
    }
    assert!(files >= 2, "trace and summary");
}

const PROMPT: &str = "The quarterly figures for the northern warehouse show a steady rise in returns of damaged crockery, mostly blue plates.";

#[tokio::test]
async fn answers_pass_unchanged_and_the_trace_holds_their_shapes_only() {
    // Two identical sources: one asked directly, one behind the capture;
    // what the client gets through the capture is what the upstream sends.
    let direct = source(FastSourceConfig::default());
    let behind = source(FastSourceConfig::default());
    let cap = capture(behind.base_url(), |_| {}).await;
    for stream in [true, false] {
        let body = chat(PROMPT, stream, 6);
        let want = post(&format!("{}/v1/chat/completions", direct.base_url()), &body).await;
        let got = post(&cap.url("/v1/chat/completions"), &body).await;
        assert_eq!(want.0, 200);
        assert_eq!(
            String::from_utf8_lossy(&got.1),
            String::from_utf8_lossy(&want.1),
            "stream {stream}"
        );
    }
    // Another path passes through, counted, not recorded.
    let models = client().get(cap.url("/v1/models")).send().await.unwrap();
    assert_eq!(models.status(), 200);
    let (summary, lines, dir) = cap.stop().await;
    assert!(lines[0]["infergate_capture"].is_number(), "{}", lines[0]);
    let lines = &lines[1..];
    assert_eq!(lines.len(), 2);
    let prompt_tokens = (serde_json::to_vec(&chat(PROMPT, true, 6)).unwrap().len() / 4) as u64;
    for (l, stream) in lines.iter().zip([true, false]) {
        assert_eq!(l["endpoint"], "chat");
        assert_eq!(l["stream"], stream);
        assert_eq!(l["status"], 200);
        assert_eq!(l["error"], Value::Null);
        assert_eq!(l["model"], "fastsource");
        assert_eq!(
            (&l["max_tokens"], &l["temperature"]),
            (&json!(6), &json!(0.7))
        );
        assert_eq!(l["output_length"], 6, "{l}");
        assert_eq!(l["output_from"], "usage");
        assert_eq!(l["finish_reason"], "length");
        assert_eq!(l["estimated"], false);
        assert_eq!(l["tools"], Value::Null);
        assert!(l["hash_ids"].as_array().is_some_and(|h| !h.is_empty()));
        assert!(l["prompt"].is_null() && l["answer"].is_null());
    }
    // The streamed and the whole request differ by one byte of `stream`.
    assert!(
        lines[0]["input_length"]
            .as_u64()
            .unwrap()
            .abs_diff(prompt_tokens)
            <= 1
    );
    assert_eq!(lines[0]["input_from"], "usage");
    assert_eq!(
        lines[0]["hash_ids"], lines[1]["hash_ids"],
        "the same prompt"
    );
    assert_eq!((summary.requests, summary.passthrough), (2, 1));
    assert_eq!((summary.lines, summary.dropped_lines), (2, 0));
    assert_eq!(summary.by_endpoint["chat"], 2);
    assert!(!summary.lengths_estimated && !summary.keep_text);
    assert_nothing_of(dir.path(), &[PROMPT, KEY, &"tok".repeat(6)]);
}

#[tokio::test]
async fn a_stream_is_forwarded_as_it_arrives_not_when_it_ends() {
    let up = source(FastSourceConfig {
        itl: Duration::from_millis(150),
        ..FastSourceConfig::default()
    });
    let cap = capture(up.base_url(), |_| {}).await;
    let t0 = Instant::now();
    let mut r = client()
        .post(cap.url("/v1/chat/completions"))
        .json(&chat("hi", true, 6))
        .send()
        .await
        .unwrap();
    let mut first = None;
    while let Some(c) = r.chunk().await.unwrap() {
        if first.is_none() && String::from_utf8_lossy(&c).contains("tok") {
            first = Some(t0.elapsed());
        }
    }
    let (first, all) = (first.unwrap(), t0.elapsed());
    assert!(all >= Duration::from_millis(700), "{all:?}");
    assert!(
        first + Duration::from_millis(400) < all,
        "first {first:?}, all {all:?}"
    );
    let (_, lines, _dir) = cap.stop().await;
    // The proxy's own time to first byte: its answer's head from the
    // upstream to the client's socket, well under the 150 ms between chunks.
    let us = lines[1]["proxy_first_byte_us"].as_u64().expect("timed");
    assert!(us < 100_000, "{us} µs");
}

#[tokio::test]
async fn prompts_sharing_a_prefix_share_their_leading_ids_and_a_session() {
    let up = source(FastSourceConfig::default());
    let cap = capture(up.base_url(), |c| c.block_tokens = 4).await;
    let turn1 = json!({"stream": false, "max_tokens": 2, "messages": [
        {"role": "user", "content": PROMPT}]});
    let turn2 = json!({"stream": false, "max_tokens": 2, "messages": [
        {"role": "user", "content": PROMPT},
        {"role": "assistant", "content": "Mostly on Tuesdays."},
        {"role": "user", "content": "And the southern one?"}]});
    let other = json!({"stream": false, "max_tokens": 2, "messages": [
        {"role": "user", "content": "Something else entirely, with no shared start at all."}]});
    for b in [&turn1, &turn2, &other] {
        assert_eq!(post(&cap.url("/v1/chat/completions"), b).await.0, 200);
    }
    let (_, lines, _dir) = cap.stop().await;
    let ids =
        |i: usize| -> Vec<u64> { serde_json::from_value(lines[i]["hash_ids"].clone()).unwrap() };
    let (a, b, c) = (ids(1), ids(2), ids(3));
    // 16-byte blocks (4 tokens of 4 bytes, no tokenizer): "user\n" and the prompt.
    let shared = ("user\n".len() + PROMPT.len()) / 16;
    assert!(shared >= 7);
    assert_eq!(a[..shared], b[..shared]);
    assert!(b.len() > a.len());
    assert_ne!(a[0], c[0]);
    assert!(c.iter().all(|x| !a.contains(x)));
    assert_eq!(
        lines[2]["session"], lines[1]["id"],
        "turn 2 is turn 1's session"
    );
    assert_eq!(lines[3]["session"], lines[3]["id"]);
}

#[tokio::test]
async fn an_upstream_down_is_a_502_recorded_and_the_bound_stops_the_capture() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cap = capture(format!("http://127.0.0.1:{port}"), |c| {
        c.max_requests = Some(1)
    })
    .await;
    let (status, _) = post(&cap.url("/v1/chat/completions"), &chat("hi", true, 3)).await;
    assert_eq!(status, 502);
    // The bound stops it: the stop signal is held, never sent.
    let _held = cap.stop.take();
    let summary = tokio::time::timeout(Duration::from_secs(5), &mut cap.task)
        .await
        .expect("stops at the bound")
        .unwrap();
    assert_eq!(summary.stopped_by, "max_requests");
    assert_eq!(summary.upstream_unreachable, 1);
    let text = std::fs::read_to_string(cap.dir.path().join("trace.jsonl")).unwrap();
    let line: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        (&line["status"], &line["error"]),
        (&json!(502), &json!("upstream_unreachable"))
    );
}

#[tokio::test]
async fn a_malformed_body_passes_through_recorded_as_unparsed() {
    let direct = source(FastSourceConfig::default());
    let behind = source(FastSourceConfig::default());
    let cap = capture(behind.base_url(), |_| {}).await;
    let send = |url: String| async move {
        let r = client()
            .post(url)
            .header("content-type", "application/json")
            .body("{\"messages\": [not json")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.bytes().await.unwrap())
    };
    let want = send(format!("{}/v1/chat/completions", direct.base_url())).await;
    let got = send(cap.url("/v1/chat/completions")).await;
    assert_eq!(got, want);
    assert_eq!(got.0, 400);
    let (_, lines, _dir) = cap.stop().await;
    assert_eq!(lines[1]["parsed"], false);
    assert_eq!(lines[1]["status"], 400);
    assert_eq!(lines[1]["hash_ids"], json!([]));
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413_recorded() {
    let up = source(FastSourceConfig::default());
    let cap = capture(up.base_url(), |c| c.max_body_bytes = 1024).await;
    let (status, _) = post(
        &cap.url("/v1/chat/completions"),
        &chat(&"x".repeat(2000), false, 2),
    )
    .await;
    assert_eq!(status, 413);
    let (summary, lines, _dir) = cap.stop().await;
    assert_eq!(summary.body_too_large, 1);
    assert_eq!(
        (&lines[1]["status"], &lines[1]["error"]),
        (&json!(413), &json!("body_too_large"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_replays_as_a_trace_cell_without_its_failed_and_embeddings_lines() {
    let up = source(FastSourceConfig::default());
    let cap = capture(up.base_url(), |_| {}).await;
    let url = cap.url("/v1/chat/completions");
    for i in 0..6 {
        let prompt = format!("{PROMPT} Question {i}: how many plates were returned that week?");
        assert_eq!(post(&url, &chat(&prompt, i % 2 == 0, 8)).await.0, 200);
    }
    let mut failing = chat("hi", true, 4);
    failing["fastsource"] = json!({"status": 500});
    assert_eq!(post(&url, &failing).await.0, 500);
    let emb = post(&cap.url("/v1/embeddings"), &json!({"input": "a b c"})).await;
    assert_eq!(emb.0, 404, "the fast source serves no embeddings");
    let (summary, lines, dir) = cap.stop().await;
    assert_eq!((summary.requests, summary.lines), (8, 8));
    assert_eq!(lines.len(), 9);
    let suite = dir.path().join("replay.toml");
    std::fs::write(
        &suite,
        format!(
            "name = \"replay\"\n[[cell]]\nname = \"captured\"\nmax_tokens = 8\nrequests = 6\nseed = 3\nworkload = {{ kind = \"trace\", path = \"{}\", block_tokens = 16 }}\n",
            dir.path().join("trace.jsonl").display()
        ),
    )
    .unwrap();
    let replay = source(FastSourceConfig::default());
    let out = dir.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("run")
        .arg("--target")
        .arg(replay.base_url())
        .arg("--suite")
        .arg(&suite)
        .arg("--out")
        .arg(&out)
        .arg("--skip-turnover")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let art: infergate::artifact::RunArtifact = serde_json::from_slice(
        &std::fs::read(out.join(infergate::measure::runner::ARTIFACT_FILE)).unwrap(),
    )
    .unwrap();
    let c = &art.cells[0];
    assert_eq!((c.requests, c.failed), (6, 0), "{c:?}");
    let w = c.shape.workload.as_deref().unwrap();
    assert!(
        w.contains("a capture: 1 failed and 1 embeddings lines left out"),
        "{w}"
    );
    // Seven lines would be one too many: the failed and embeddings ones are out.
    let too_many = std::fs::read_to_string(&suite)
        .unwrap()
        .replace("requests = 6", "requests = 7");
    std::fs::write(&suite, too_many).unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args([
            "run",
            "--target",
            &replay.base_url(),
            "--skip-turnover",
            "--suite",
        ])
        .arg(&suite)
        .arg("--out")
        .arg(dir.path().join("run2"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("supplies only 6"), "{err}");
}

/// A loopback upstream that answers one request with the head of a stream
/// and one event, then waits: it says when the proxy closes the connection.
async fn stalled_upstream() -> (String, oneshot::Receiver<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        // The head and its body (the request is small).
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
        }
        let event = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
            event.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = tx.send(());
    });
    (url, rx)
}

#[tokio::test]
async fn a_client_that_goes_away_ends_the_upstream_request() {
    let (up, closed) = stalled_upstream().await;
    let cap = capture(up, |_| {}).await;
    let mut r = client()
        .post(cap.url("/v1/chat/completions"))
        .json(&chat("hi", true, 50))
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("content"));
    drop(r);
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the upstream connection is closed when the client goes")
        .unwrap();
    let (_, lines, _dir) = cap.stop().await;
    assert_eq!(
        (&lines[1]["status"], &lines[1]["error"]),
        (&json!(200), &json!("client_gone"))
    );
    assert_eq!(lines[1]["output_length"], 1, "the one chunk that passed");
}

#[tokio::test]
async fn with_keep_text_the_trace_holds_the_prompt_and_the_answer_and_says_so() {
    let up = source(FastSourceConfig::default());
    let cap = capture(up.base_url(), |c| c.keep_text = true).await;
    assert_eq!(
        post(&cap.url("/v1/chat/completions"), &chat(PROMPT, true, 3))
            .await
            .0,
        200
    );
    let (summary, lines, _dir) = cap.stop().await;
    assert!(summary.keep_text);
    assert_eq!(lines[0]["keep_text"], true);
    assert!(lines[1]["prompt"].as_str().unwrap().contains(PROMPT));
    assert_eq!(lines[1]["answer"], "toktoktok");
}

/// A word-level tokenizer.json: one token a known word, `[UNK]` else.
const TOKENIZER: &str = r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,"model":{"type":"WordLevel","vocab":{"[UNK]":0,"user":1,"a":2,"b":3,"c":4},"unk_token":"[UNK]"}}"#;

#[tokio::test]
async fn without_usage_lengths_are_counted_with_the_tokenizer_or_estimated_and_say_so() {
    let up = source(FastSourceConfig {
        usage: false,
        ..FastSourceConfig::default()
    });
    let tok = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tok.path(), TOKENIZER).unwrap();
    let path = tok.path().to_path_buf();
    let cap = capture(up.base_url(), move |c| {
        c.tokenizer = Some(path);
        c.block_tokens = 2;
    })
    .await;
    let url = cap.url("/v1/chat/completions");
    for stream in [true, false] {
        assert_eq!(post(&url, &chat("a b a b c", stream, 3)).await.0, 200);
    }
    let (summary, lines, _dir) = cap.stop().await;
    assert!(
        lines[0]["blocks_from"]
            .as_str()
            .unwrap()
            .starts_with("tokens of tokenizer.json"),
        "{}",
        lines[0]
    );
    // The stream reports no usage: its prompt is counted, "user a b a b c",
    // six tokens in three blocks of two.
    let l = &lines[1];
    assert_eq!(
        (&l["input_length"], &l["input_from"]),
        (&json!(6), &json!("tokenizer"))
    );
    assert_eq!(l["hash_ids"].as_array().unwrap().len(), 3);
    // Its answer: the text-bearing chunks, estimated.
    assert_eq!(
        (&l["output_length"], &l["output_from"]),
        (&json!(3), &json!("chunks"))
    );
    assert_eq!(l["estimated"], true);
    // The whole answer carries usage all the same (the source always sends
    // it there), and usage wins; its blocks are the same tokens.
    let l = &lines[2];
    assert_eq!(
        (&l["input_from"], &l["output_from"]),
        (&json!("usage"), &json!("usage"))
    );
    assert_eq!(l["hash_ids"], lines[1]["hash_ids"]);
    assert_eq!(l["estimated"], false);
    assert_eq!(
        (summary.estimated_lines, summary.lengths_estimated),
        (1, true)
    );
}

/// `infergate capture` in front of `upstream` into `out`, on a free port,
/// once it says it listens: the child, the rest of its standard error, the port.
fn command(
    upstream: &str,
    out: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    u16,
) {
    use std::io::BufRead;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["capture", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--upstream", upstream])
        .arg("--out")
        .arg(out)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("listening on"), "{first}");
    (child, err, port)
}

#[test]
fn the_command_stops_on_sigterm_with_its_trace_flushed_and_summary_written() {
    let up = source(FastSourceConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut err, port) = command(&up.base_url(), dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    assert_eq!(rt.block_on(post(&url, &chat("hi", true, 2))).0, 200);
    // SAFETY: a signal to the child this test started, by its id.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(status.success(), "{rest}");
    assert!(
        rest.contains("stopped by signal: 1 requests recorded"),
        "{rest}"
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        (&summary["stopped_by"], &summary["lines"]),
        (&json!("signal"), &json!(1))
    );
    let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    assert_eq!(trace.lines().count(), 2);
}

/// A loopback upstream that answers one request `ok` and hands over the
/// request's head as it arrived.
async fn recording_upstream() -> (String, oneshot::Receiver<String>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
            .unwrap();
        let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
    });
    (url, rx)
}

#[tokio::test]
async fn a_request_without_a_body_passes_through_without_one() {
    let (up, head) = recording_upstream().await;
    let cap = capture(up, |_| {}).await;
    let r = client()
        .get(cap.url("/v1/models?x=1"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "ok");
    let head = head.await.unwrap().to_ascii_lowercase();
    assert!(
        head.starts_with("get /v1/models?x=1 http/1.1\r\n"),
        "{head}"
    );
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(
        head.contains(&format!(
            "authorization: bearer {}",
            KEY.to_ascii_lowercase()
        )),
        "{head}"
    );
    let (summary, _, _dir) = cap.stop().await;
    assert_eq!((summary.passthrough, summary.requests), (1, 0));
}

#[tokio::test]
async fn the_duration_bound_stops_the_capture() {
    let up = source(FastSourceConfig::default());
    let mut cap = capture(up.base_url(), |c| {
        c.duration = Some(Duration::from_millis(300))
    })
    .await;
    // The stop signal held, never sent.
    let _held = cap.stop.take();
    let summary = tokio::time::timeout(Duration::from_secs(5), &mut cap.task)
        .await
        .expect("stops after its duration")
        .unwrap();
    assert_eq!((summary.stopped_by, summary.lines), ("duration", 0));
    let text = std::fs::read_to_string(cap.dir.path().join("trace.jsonl")).unwrap();
    assert_eq!(text.lines().count(), 1, "the header alone");
}

#[tokio::test]
async fn an_upstream_that_is_not_a_base_url_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [
        "ftp://127.0.0.1:1",
        "127.0.0.1:8080",
        "http://127.0.0.1:1/?a=b",
        "http://127.0.0.1:1/#x",
    ] {
        let out = dir.path().join("out");
        let cfg = Config::new("127.0.0.1:0".parse().unwrap(), bad, &out);
        let e = Capture::bind(cfg).await.err().expect(bad).to_string();
        assert!(e.starts_with("--upstream"), "{bad}: {e}");
        assert!(!out.exists(), "{bad}");
    }
}

/// A replay's fidelity: a capture of requests of varied lengths at varied
/// gaps, replayed by `infergate run` against the same kind of source, sends
/// what was captured. Tolerances: output tokens exact (the source answers
/// exactly `max_tokens`, and the replay asks each line's `output_length`);
/// prompt tokens within 10 % at p10, p50 and p90 (the replay's prompts are
/// filler sized by usage calibration, not the captured text); inter-arrival
/// times within 15 % or 15 ms at each quantile (gaps of 100 to 400 ms;
/// captured timestamps are whole ms, and both sides' timers run on a shared
/// 2-core machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_of_a_capture_reports_its_fidelity_side_by_side() {
    let up = source(FastSourceConfig::default());
    let cap = capture(up.base_url(), |_| {}).await;
    let url = cap.url("/v1/chat/completions");
    let gaps_ms = [100u64, 300, 150, 400, 200, 120, 350, 250, 180];
    for i in 0..10usize {
        let prompt = format!("{PROMPT} {}", "more words here ".repeat(20 * i + 40));
        assert_eq!(
            post(&url, &chat(&prompt, i % 2 == 0, 3 + i as u64)).await.0,
            200
        );
        if let Some(g) = gaps_ms.get(i) {
            tokio::time::sleep(Duration::from_millis(*g)).await;
        }
    }
    let mut failing = chat("hi", true, 4);
    failing["fastsource"] = json!({"status": 500});
    assert_eq!(post(&url, &failing).await.0, 500);
    post(&cap.url("/v1/embeddings"), &json!({"input": "a b c"})).await;
    let (_, lines, dir) = cap.stop().await;
    // The lines the replay sends: the first nine replayable ones.
    let sent: Vec<&Value> = lines[1..]
        .iter()
        .filter(|l| l["status"] == 200 && l["endpoint"] == "chat")
        .take(9)
        .collect();
    let suite = dir.path().join("replay.toml");
    std::fs::write(
        &suite,
        format!(
            "name = \"replay\"\n[[cell]]\nname = \"captured\"\nmax_tokens = 64\nrequests = 9\nworkload = {{ kind = \"trace\", path = \"{}\", block_tokens = 512 }}\n",
            dir.path().join("trace.jsonl").display()
        ),
    )
    .unwrap();
    let replay = source(FastSourceConfig::default());
    let out = dir.path().join("run");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_infergate"))
        .args(["run", "--target", &replay.base_url(), "--skip-turnover"])
        .arg("--suite")
        .arg(&suite)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The table, for `--nocapture`.
    println!("{stdout}");
    assert!(
        stdout.contains("fidelity of the replay to the capture")
            && stdout.contains("inter-arrival ms"),
        "{stdout}"
    );
    let run: Value = serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    let f = &run["cells"][0]["fidelity"];
    assert_eq!((&f["lines"], &f["sent"]), (&json!(10), &json!(9)), "{f}");
    assert_eq!(
        f["left_out"],
        json!({"failed": 1, "embeddings": 1, "not_asked": 1})
    );
    assert_eq!(f["replay_failed"], 0);
    let q = |c: &Value, side: &str, p: &str| c[side][p].as_f64().unwrap();
    // Captured quantiles are the sent lines' own.
    let mut inputs: Vec<f64> = sent
        .iter()
        .map(|l| l["input_length"].as_f64().unwrap())
        .collect();
    inputs.sort_by(f64::total_cmp);
    assert_eq!(q(&f["prompt_tokens"], "captured", "p50"), inputs[4]);
    for p in ["p10", "p50", "p90"] {
        let (c, r) = (
            q(&f["prompt_tokens"], "captured", p),
            q(&f["prompt_tokens"], "replayed", p),
        );
        assert!((r - c).abs() <= 0.10 * c, "prompt {p}: {c} vs {r}\n{f}");
        let (c, r) = (
            q(&f["output_tokens"], "captured", p),
            q(&f["output_tokens"], "replayed", p),
        );
        assert_eq!(c, r, "output {p}\n{f}");
        let (c, r) = (
            q(&f["inter_arrival_ms"], "captured", p),
            q(&f["inter_arrival_ms"], "replayed", p),
        );
        assert!(
            (r - c).abs() <= (0.15 * c).max(15.0),
            "inter-arrival {p}: {c} vs {r}\n{f}"
        );
    }
    assert!(f["prompt_tokens"]["distance"].as_f64().unwrap() <= 0.10);
    assert_eq!(f["output_tokens"]["distance"], 0.0);
    assert_eq!(
        (
            &f["inter_arrival_ms"]["captured"]["n"],
            &f["inter_arrival_ms"]["replayed"]["n"]
        ),
        (&json!(8), &json!(8))
    );
    // The source reports no cache: nothing on either side, no distance.
    assert_eq!(
        f["cache_hit_share"],
        json!({"captured": {"n": 0}, "replayed": {"n": 0}})
    );
    // The artifact with its fidelity holds to the published schema, which
    // requires each quantity.
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/infergate-run.v1.json");
    let schema: Value = serde_json::from_slice(&std::fs::read(&schema_path).unwrap()).unwrap();
    let loc = format!("file://{}", schema_path.display());
    let mut compiler = boon::Compiler::new();
    let mut schemas = boon::Schemas::new();
    compiler.add_resource(&loc, schema).unwrap();
    let idx = compiler.compile(&loc, &mut schemas).unwrap();
    schemas
        .validate(&run, idx)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut cut = run.clone();
    cut["cells"][0]["fidelity"]
        .as_object_mut()
        .unwrap()
        .remove("inter_arrival_ms");
    assert!(
        schemas.validate(&cut, idx).is_err(),
        "valid without a quantity"
    );
}

/// A qualification on a capture is an ordinary plan: the trace is a `trace`
/// cell of its suite, both runtimes are sent the same replay, the report
/// compares the cell, and `verify` makes it again from the qualification's
/// directory. (Two fast sources alike: an A/A pair.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_qualification_on_a_capture_is_an_ordinary_plan() {
    let up = source(FastSourceConfig::default());
    let cap = capture(up.base_url(), |_| {}).await;
    let url = cap.url("/v1/chat/completions");
    for i in 0..12usize {
        let prompt = format!("{PROMPT} {}", "words of the request ".repeat(10 * i + 20));
        assert_eq!(post(&url, &chat(&prompt, true, 8)).await.0, 200);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, _, dir) = cap.stop().await;
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(
        dir.path().join("suite.toml"),
        format!(
            "name = \"from-capture\"\n[[cell]]\nname = \"captured\"\nmax_tokens = 16\nconcurrency = 2\nrequests = 12\nworkload = {{ kind = \"trace\", path = \"{}\" }}\n",
            trace.display()
        ),
    )
    .unwrap();
    let (a, b) = (
        source(FastSourceConfig::default()),
        source(FastSourceConfig::default()),
    );
    std::fs::write(
        dir.path().join("plan.toml"),
        format!(
            "name = \"on-capture\"\nsuite = \"suite.toml\"\nskip_turnover = true\n\
             [baseline]\ndriver = \"external\"\nurl = \"{}\"\n\
             [candidate]\ndriver = \"external\"\nurl = \"{}\"\n",
            a.base_url(),
            b.base_url()
        ),
    )
    .unwrap();
    let (_, all, report, qdir) = support::cli::qualify_report(dir.path());
    let cell = &report["cells"]["captured"];
    assert!(cell["metrics"]["ttft_p50_ms"].is_object(), "{all}\n{cell}");
    assert_eq!(
        cell["baseline_requests"], cell["candidate_requests"],
        "{cell}"
    );
    assert!(cell["baseline_requests"].as_u64().unwrap() >= 12, "{cell}");
    let (agreed, v) = support::cli::verify(&qdir);
    assert!(agreed, "{v}");
}

#[tokio::test]
async fn a_trace_that_cannot_be_written_lets_traffic_pass_and_counts_its_lines() {
    let up = source(FastSourceConfig::default());
    let mut cap = capture(up.base_url(), |c| {
        // A full disk: every write to the trace fails with ENOSPC.
        std::os::unix::fs::symlink("/dev/full", c.out.join("trace.jsonl")).unwrap();
    })
    .await;
    let url = cap.url("/v1/chat/completions");
    for stream in [true, false, true] {
        let (status, body) = post(&url, &chat(PROMPT, stream, 4)).await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert!(String::from_utf8_lossy(&body).contains("tok"));
    }
    let _ = cap.stop.take().unwrap().send(());
    let s = (&mut cap.task).await.unwrap();
    assert_eq!(
        (s.requests, s.lines, s.unwritten_lines, s.dropped_lines),
        (3, 0, 3, 0),
        "{s:?}"
    );
    assert!(
        s.write_error
            .as_deref()
            .is_some_and(|e| e.contains("trace.jsonl") && e.contains("No space left")),
        "{s:?}"
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(cap.dir.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["unwritten_lines"], 3, "{summary}");
}

/// A loopback upstream that answers one request with the head of a stream
/// and one event, then closes the connection without ending the stream.
async fn breaking_upstream() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut chunk).await.unwrap();
            buf.extend_from_slice(&chunk[..n]);
        }
        let event = "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n";
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
            event.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(s);
    });
    url
}

#[tokio::test]
async fn an_upstream_closing_mid_stream_breaks_the_clients_answer_and_is_recorded() {
    let cap = capture(breaking_upstream().await, |_| {}).await;
    let mut r = client()
        .post(cap.url("/v1/chat/completions"))
        .json(&chat("hi", true, 50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let first = r.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("content"));
    // The break is passed on as a break, not as a clean end of the answer.
    let rest = r.chunk().await;
    assert!(rest.is_err(), "{rest:?}");
    let (s, lines, _dir) = cap.stop().await;
    assert_eq!(s.lines, 1);
    assert_eq!(
        (&lines[1]["status"], &lines[1]["error"]),
        (&json!(200), &json!("upstream_broke"))
    );
    assert_eq!(lines[1]["output_length"], 1, "the one chunk that passed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_leaves_a_line_for_every_request_that_finished() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    // Each answer streams for about 200 ms, so the signal lands mid-stream.
    let up = source(FastSourceConfig {
        chunks: 20,
        itl: Duration::from_millis(10),
        ..FastSourceConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut err, port) = command(&up.base_url(), dir.path());
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let (finished, in_flight) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (url, finished, in_flight) = (url.clone(), finished.clone(), in_flight.clone());
        clients.push(tokio::spawn(async move {
            let c = client();
            loop {
                in_flight.fetch_add(1, Ordering::SeqCst);
                let whole = async {
                    let r = c.post(&url).json(&chat(PROMPT, true, 20)).send().await?;
                    r.error_for_status()?.bytes().await
                }
                .await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                match whole {
                    Ok(b) if String::from_utf8_lossy(&b).contains("[DONE]") => {
                        finished.fetch_add(1, Ordering::SeqCst);
                    }
                    _ => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let busy = in_flight.load(Ordering::SeqCst);
    // SAFETY: a signal to the child this test started, by its id.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    for c in clients {
        tokio::time::timeout(Duration::from_secs(30), c)
            .await
            .expect("every client ends once the capture has stopped")
            .unwrap();
    }
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(status.success(), "{rest}");
    assert!(busy > 0, "requests were open when the signal came");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("summary.json")).unwrap()).unwrap();
    let trace = std::fs::read_to_string(dir.path().join("trace.jsonl")).unwrap();
    let lines: Vec<Value> = trace
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let done = finished.load(Ordering::SeqCst);
    let whole = lines
        .iter()
        .filter(|l| l["status"] == 200 && l["error"].is_null())
        .count() as u64;
    assert!(done >= 8, "load before the signal: {done} answers");
    assert_eq!(whole, done, "a whole line per finished answer: {trace}");
    assert_eq!(
        (
            &summary["stopped_by"],
            &summary["lines"],
            &summary["requests"]
        ),
        (&json!("signal"), &json!(lines.len()), &json!(lines.len())),
        "{summary}"
    );
    assert_eq!(summary["dropped_lines"], 0);
}
