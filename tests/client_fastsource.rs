//! The streaming client against the loopback fast source, whose schedule is the ground truth.

use std::time::{Duration, Instant};

use infergate::measure::client::{
    Client, ClientConfig, Endpoint, Timeouts, chat_body, completions_body,
};
use infergate::measure::record::{Outcome, StreamCapture};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};
use serde_json::{Map, Value, json};

fn source(cfg: FastSourceConfig) -> (FastSource, Client) {
    let (_, src) = FastSource::start(cfg).expect("fast source starts");
    let mut cc = ClientConfig::new(src.base_url());
    cc.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
        total: Duration::from_secs(10),
        per_1k_prompt_tokens: Duration::ZERO,
    };
    let client = Client::new(cc).expect("client");
    (src, client)
}

fn body(max_tokens: u64, fastsource: Value) -> Value {
    let mut extra = Map::new();
    extra.insert("model".into(), json!("fastsource"));
    extra.insert("fastsource".into(), fastsource);
    chat_body(
        json!([{"role": "user", "content": "hi"}]),
        max_tokens,
        0.0,
        Some(1),
        extra,
    )
}

fn class(c: &StreamCapture) -> Option<Outcome> {
    c.failure.as_ref().map(|f| f.class)
}

fn message(c: &StreamCapture) -> String {
    c.failure
        .as_ref()
        .map(|f| f.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn scheduled_stream_is_measured_no_earlier_than_sent() {
    let (_src, client) = source(FastSourceConfig::default());
    let (ttft, itl, n) = (30.0, 5.0, 10u64);
    let c = client
        .stream(
            Endpoint::Chat,
            &body(n, json!({"ttft_ms": ttft, "itl_ms": itl})),
        )
        .await;
    assert_eq!(c.failure, None, "{c:?}");
    assert_eq!(c.http_status, Some(200));
    // The role-only chunk arrives at once and must not count as the first token.
    let got = c.ttft_ms.expect("ttft");
    assert!(got >= ttft, "ttft {got} < scheduled {ttft}");
    assert!(got < ttft + 250.0, "ttft {got} far beyond schedule");
    assert_eq!(c.ttfo_ms, c.ttft_ms);
    assert_eq!(c.chunk_ms.len(), n as usize);
    for (i, at) in c.chunk_ms.iter().enumerate() {
        let due = ttft + itl * i as f64;
        assert!(*at >= due, "chunk {i} at {at} ms, scheduled {due} ms");
    }
    assert!(c.e2e_ms >= c.chunk_ms.last().copied());
    assert!(c.saw_done);
    assert_eq!(c.content, "tok".repeat(n as usize));
    assert_eq!(c.completion_tokens, Some(n));
    assert!(c.prompt_tokens.is_some());
    assert_eq!(c.finish_reasons, vec!["length"]);
    assert_eq!(c.model.as_deref(), Some("fastsource"));
    assert_eq!(c.system_fingerprint.as_deref(), Some("fastsource"));
    // Sound bounds only: the last chunk cannot arrive before it is sent.
    assert!(c.e2e_ms.expect("e2e") >= ttft + itl * (n - 1) as f64);
    assert!(c.derived().decode_tok_s.is_some());
}

#[tokio::test]
async fn fast_stream_many_chunks_in_few_reads() {
    let (_src, client) = source(FastSourceConfig::default());
    let c = client.stream(Endpoint::Chat, &body(5000, json!({}))).await;
    assert_eq!(c.failure, None, "{}", message(&c));
    assert_eq!(c.chunk_ms.len(), 5000);
    assert_eq!(c.completion_tokens, Some(5000));
    assert!(c.chunk_ms.windows(2).all(|w| w[1] >= w[0]));
}

#[tokio::test]
async fn completions_endpoint() {
    let (_src, client) = source(FastSourceConfig::default());
    let b = completions_body("once upon", 4, 0.0, None, Map::new());
    let c = client.stream(Endpoint::Completions, &b).await;
    assert_eq!(c.failure, None, "{}", message(&c));
    assert_eq!((c.content.as_str(), c.chunk_ms.len()), ("toktoktoktok", 4));
}

#[tokio::test]
async fn no_done_ends_at_close_after_final_chunk() {
    let (_src, client) = source(FastSourceConfig::default());
    let c = client
        .stream(Endpoint::Chat, &body(3, json!({"done": false})))
        .await;
    assert_eq!(c.failure, None, "{}", message(&c));
    assert!(!c.saw_done);
    assert!(c.e2e_ms.is_some());
    assert_eq!(c.finish_reasons, vec!["length"]);
}

#[tokio::test]
async fn no_usage_leaves_completion_tokens_unknown() {
    let (_src, client) = source(FastSourceConfig::default());
    let c = client
        .stream(Endpoint::Chat, &body(3, json!({"usage": false})))
        .await;
    assert_eq!(c.failure, None, "{}", message(&c));
    assert_eq!((c.completion_tokens, c.prompt_tokens), (None, None));
    assert!(!c.completion_tokens_estimated);
}

#[tokio::test]
async fn http_500_is_an_http_error_with_a_snippet() {
    let (_src, client) = source(FastSourceConfig::default());
    let c = client
        .stream(Endpoint::Chat, &body(3, json!({"status": 500})))
        .await;
    assert_eq!(class(&c), Some(Outcome::HttpError));
    assert_eq!(c.http_status, Some(500));
    assert!(message(&c).contains("injected failure"), "{}", message(&c));
    assert_eq!(c.ttft_ms, None);
}

#[tokio::test]
async fn stalled_stream_hits_the_idle_timeout() {
    let (src, _) = source(FastSourceConfig::default());
    let mut cc = ClientConfig::new(src.base_url());
    cc.timeouts.idle = Duration::from_millis(150);
    let client = Client::new(cc).expect("client");
    let t = Instant::now();
    let c = client
        .stream(Endpoint::Chat, &body(10, json!({"stall_after": 2})))
        .await;
    let waited = t.elapsed();
    assert_eq!(class(&c), Some(Outcome::RequestError));
    assert!(message(&c).contains("idle timeout"), "{}", message(&c));
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    // What arrived before the stall is kept.
    assert_eq!(c.chunk_ms.len(), 2);
    assert_eq!(c.http_status, Some(200));
}

#[tokio::test]
async fn silent_body_hits_the_first_byte_timeout() {
    let (src, _) = source(FastSourceConfig::default());
    let mut cc = ClientConfig::new(src.base_url());
    cc.timeouts.first_byte = Duration::from_millis(150);
    let client = Client::new(cc).expect("client");
    let c = client
        .stream(
            Endpoint::Chat,
            &body(10, json!({"stall_after": 0, "role_chunk": false})),
        )
        .await;
    assert_eq!(class(&c), Some(Outcome::RequestError));
    assert!(
        message(&c).contains("first-byte timeout"),
        "{}",
        message(&c)
    );
}

/// A first-byte timeout set for short prompts does not kill a long prefill,
/// and the long prompts' allowance does not let a short request hang: each
/// request gets the base plus its own prompt's allowance.
#[tokio::test]
async fn the_first_byte_timeout_grows_with_the_prompt_and_only_with_it() {
    let (src, _) = source(FastSourceConfig::default());
    let mut cc = ClientConfig::new(src.base_url());
    cc.timeouts.first_byte = Duration::from_millis(300);
    cc.timeouts.per_1k_prompt_tokens = Duration::from_millis(10);
    let client = Client::new(cc).expect("client");
    // The source answers 600 ms after the request, with nothing before.
    let late = |content: &str| {
        let mut b = body(4, json!({"ttft_ms": 600.0, "role_chunk": false}));
        b["messages"] = json!([{"role": "user", "content": content}]);
        b
    };
    let (_, long) = client
        .stream_sized(Endpoint::Chat, &late("hi"), Some(100_000))
        .await;
    assert_eq!(long.failure, None, "300 ms + 1 s for 100k tokens: {long:?}");
    assert!(long.ttft_ms.unwrap() >= 600.0);
    let (_, short) = client
        .stream_sized(Endpoint::Chat, &late("hi"), Some(100))
        .await;
    assert_eq!(class(&short), Some(Outcome::RequestError));
    assert!(
        message(&short).starts_with("first-byte timeout")
            && message(&short).contains("within 301ms"),
        "{}",
        message(&short)
    );
    // Without a count, the body's size stands in: 400 kB of prompt is about
    // 100k tokens, a 2-byte one is not.
    let (_, unsized_long) = client
        .stream_sized(Endpoint::Chat, &late(&"word ".repeat(80_000)), None)
        .await;
    assert_eq!(unsized_long.failure, None, "{unsized_long:?}");
    let (_, unsized_short) = client.stream_sized(Endpoint::Chat, &late("hi"), None).await;
    assert_eq!(class(&unsized_short), Some(Outcome::RequestError));
}

#[tokio::test]
async fn slow_stream_hits_the_total_timeout() {
    let (src, _) = source(FastSourceConfig::default());
    let mut cc = ClientConfig::new(src.base_url());
    cc.timeouts.total = Duration::from_millis(200);
    let client = Client::new(cc).expect("client");
    let c = client
        .stream(Endpoint::Chat, &body(100, json!({"itl_ms": 20.0})))
        .await;
    assert_eq!(class(&c), Some(Outcome::RequestError));
    assert!(message(&c).contains("total timeout"), "{}", message(&c));
    assert!(!c.chunk_ms.is_empty());
}

#[tokio::test]
async fn error_object_in_a_200_stream_fails_validation() {
    let (_src, client) = source(FastSourceConfig::default());
    let c = client
        .stream(Endpoint::Chat, &body(10, json!({"error_after": 3})))
        .await;
    assert_eq!(class(&c), Some(Outcome::StreamValidationFailed));
    assert!(message(&c).contains("injected error"), "{}", message(&c));
    assert_eq!(c.http_status, Some(200));
    assert_eq!(c.chunk_ms.len(), 3);
}

#[tokio::test]
async fn missing_finish_reason_fails_validation() {
    let (_src, client) = source(FastSourceConfig::default());
    let c = client
        .stream(Endpoint::Chat, &body(3, json!({"no_finish": true})))
        .await;
    assert_eq!(class(&c), Some(Outcome::StreamValidationFailed));
    assert!(message(&c).contains("finish_reason"), "{}", message(&c));
}

#[tokio::test]
async fn non_sse_answer_fails_validation() {
    let (_src, client) = source(FastSourceConfig::default());
    let mut b = body(3, json!({}));
    b["stream"] = json!(false);
    let c = client.stream(Endpoint::Chat, &b).await;
    assert_eq!(class(&c), Some(Outcome::StreamValidationFailed));
    assert!(message(&c).contains("application/json"), "{}", message(&c));
}

#[tokio::test]
async fn refused_connection_is_a_request_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let client =
        Client::new(ClientConfig::new(format!("http://127.0.0.1:{port}"))).expect("client");
    let c = client.stream(Endpoint::Chat, &body(3, json!({}))).await;
    assert_eq!(class(&c), Some(Outcome::RequestError));
    assert!(message(&c).contains("connect"), "{}", message(&c));
    assert_eq!(c.http_status, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_and_sequential_requests_share_the_pool() {
    let (_src, client) = source(FastSourceConfig::default());
    let client = std::sync::Arc::new(client);
    for _round in 0..3 {
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    client
                        .stream(
                            Endpoint::Chat,
                            &body(20, json!({"ttft_ms": 2.0, "itl_ms": 1.0})),
                        )
                        .await
                })
            })
            .collect();
        for t in tasks {
            let c = t.await.expect("task");
            assert_eq!(c.failure, None, "{}", message(&c));
            assert_eq!(c.chunk_ms.len(), 20);
        }
    }
}
