//! A suite's embeddings workloads: the inputs sent to `/v1/embeddings` in
//! batches, one request at a time, each request journaled as it completes
//! (`embeddings.jsonl`: timing and outcome, not the vectors, which go into
//! the run's artifact).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::embeddings::EmbeddingSpec;
use crate::config::timeouts::{BYTES_PER_TOKEN_ESTIMATE, Timeouts};
use crate::measure::filler;
use crate::report::artifact::Outcome;
use crate::report::embedding::EmbeddingRun;

/// The journal of embeddings requests, beside the run's artifact.
pub const JOURNAL_FILE: &str = "embeddings.jsonl";

/// Most dimensions an embedding vector may have: past any model's (the
/// largest in use have a few thousand), and every vector is kept in the run.
pub const MAX_DIMENSIONS: usize = 65_536;

/// Where the requests go and what they may take.
pub struct Server<'a> {
    pub http: &'a reqwest::Client,
    pub base: &'a str,
    pub key: Option<&'a str>,
    pub model: &'a str,
    pub timeouts: Timeouts,
}

/// One request, as the journal keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingRecord {
    pub name: String,
    pub request: usize,
    /// Inputs `first .. first + count`.
    pub first: usize,
    pub count: usize,
    pub latency_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The inputs of `spec`: its file's lines; a capture's requests' inputs
/// as filler of their lengths (a word a token, the request's tokens shared
/// evenly among its inputs); or generated sentences of 8 to 40 filler
/// words, each from its own seed.
pub fn inputs(spec: &EmbeddingSpec) -> Vec<String> {
    if let Some(lines) = &spec.lines {
        return lines.clone();
    }
    if let Some(captured) = &spec.captured {
        let mut out = Vec::new();
        for c in captured {
            let n = c.inputs as u64;
            for i in 0..n {
                let words = (c.tokens / n + u64::from(i < c.tokens % n)).max(1) as usize;
                let seed = spec
                    .seed
                    .wrapping_mul(1_000_003)
                    .wrapping_add(out.len() as u64);
                out.push(filler::filler(words, seed));
            }
        }
        return out;
    }
    (0..spec.inputs.unwrap_or(0))
        .map(|i| {
            let seed = spec.seed.wrapping_mul(1_000_003).wrapping_add(i as u64);
            let words = 8 + filler::filler_words(seed ^ 0x5eed).next().unwrap_or(0) % 33;
            filler::filler(words, seed)
        })
        .collect()
}

/// SHA-256 of the inputs, each followed by a newline.
pub fn inputs_sha256(inputs: &[String]) -> String {
    let mut text = String::with_capacity(inputs.iter().map(|s| s.len() + 1).sum());
    for s in inputs {
        text.push_str(s);
        text.push('\n');
    }
    crate::util::sha256_hex(text.as_bytes())
}

/// The inputs each request carries, in order: a capture's requests' own
/// counts, else `batch` at a time.
pub fn batches(spec: &EmbeddingSpec, inputs: usize) -> Vec<usize> {
    match &spec.captured {
        Some(c) => c.iter().map(|c| c.inputs).collect(),
        None => (0..inputs)
            .step_by(spec.batch.max(1))
            .map(|first| spec.batch.min(inputs - first))
            .collect(),
    }
}

/// Embed every input of `spec`, a batch per request, journaling each
/// request into `out_dir`'s [`JOURNAL_FILE`].
pub async fn run(
    server: &Server<'_>,
    spec: &EmbeddingSpec,
    out_dir: &Path,
) -> Result<EmbeddingRun> {
    let inputs = inputs(spec);
    let path = out_dir.join(JOURNAL_FILE);
    let mut journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut run = EmbeddingRun {
        name: spec.name.clone(),
        inputs: inputs.len(),
        batch: spec.batch,
        inputs_sha256: inputs_sha256(&inputs),
        requests: 0,
        failed: 0,
        failures_by_class: Default::default(),
        latency_ms: Vec::new(),
        dimension: None,
        vectors: vec![None; inputs.len()],
    };
    let mut first = 0;
    for (request, count) in batches(spec, inputs.len()).into_iter().enumerate() {
        let chunk = &inputs[first..first + count];
        let (record, vectors) = embed(server, spec, request, first, chunk).await;
        let mut line = serde_json::to_string(&record)?;
        line.push('\n');
        journal
            .write_all(line.as_bytes())
            .with_context(|| format!("appending to {}", path.display()))?;
        tally(&mut run, &record, first, vectors);
        first += count;
    }
    Ok(run)
}

/// One request's record and, when it succeeded, its vectors.
fn tally(
    run: &mut EmbeddingRun,
    record: &EmbeddingRecord,
    first: usize,
    vectors: Option<Vec<Vec<f32>>>,
) {
    run.requests += 1;
    match vectors {
        Some(vs) => {
            run.latency_ms.push(record.latency_ms);
            run.dimension = run.dimension.or(vs.first().map(Vec::len));
            for (i, v) in vs.into_iter().enumerate() {
                run.vectors[first + i] = Some(v);
            }
        }
        None => {
            run.failed += 1;
            *run.failures_by_class
                .entry(record.outcome.as_str().to_string())
                .or_insert(0) += 1;
        }
    }
}

async fn embed(
    server: &Server<'_>,
    spec: &EmbeddingSpec,
    request: usize,
    first: usize,
    chunk: &[String],
) -> (EmbeddingRecord, Option<Vec<Vec<f32>>>) {
    let bytes: usize = chunk.iter().map(String::len).sum();
    let wait = server
        .timeouts
        .for_prompt((bytes / BYTES_PER_TOKEN_ESTIMATE) as u64)
        .unstreamed();
    let mut req = server
        .http
        .post(format!("{}/v1/embeddings", server.base))
        .json(&json!({ "model": server.model, "input": chunk }))
        .timeout(wait);
    if let Some(k) = server.key {
        req = req.bearer_auth(k);
    }
    let t0 = Instant::now();
    let answer = read(req).await;
    let latency_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let mut record = EmbeddingRecord {
        name: spec.name.clone(),
        request,
        first,
        count: chunk.len(),
        latency_ms,
        http_status: None,
        outcome: Outcome::Ok,
        detail: None,
    };
    let vectors = match answer {
        Ok((status, body)) => {
            record.http_status = Some(status);
            match vectors_of(status, &body, chunk.len()) {
                Ok(vs) => Some(vs),
                Err((outcome, why)) => {
                    (record.outcome, record.detail) = (outcome, Some(why));
                    None
                }
            }
        }
        Err(e) => {
            (record.outcome, record.detail) = (Outcome::RequestError, Some(e));
            None
        }
    };
    (record, vectors)
}

/// The status and body, or why none came.
async fn read(req: reqwest::RequestBuilder) -> Result<(u16, String), String> {
    let resp = req.send().await.map_err(transport)?;
    let status = resp.status().as_u16();
    let body = crate::measure::answer::read_text_capped(
        resp,
        crate::measure::answer::MAX_EMBEDDINGS_BYTES,
        "an embeddings answer",
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok((status, body))
}

fn transport(e: reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else {
        "failed"
    };
    // Without the URL: it may carry credentials.
    format!("request {what}: {}", e.without_url())
}

/// The `n` vectors of an answer in input order, every one of one length;
/// else the failure's class and why.
fn vectors_of(status: u16, body: &str, n: usize) -> Result<Vec<Vec<f32>>, (Outcome, String)> {
    let bounded = || crate::measure::record::bounded(body, 300);
    if !(200..300).contains(&status) {
        return Err((Outcome::HttpError, format!("HTTP {status}: {}", bounded())));
    }
    let malformed = |why: String| (Outcome::StreamValidationFailed, why);
    #[derive(Deserialize)]
    struct Item {
        index: usize,
        embedding: Vec<f32>,
    }
    #[derive(Deserialize)]
    struct Answer {
        data: Vec<Item>,
    }
    // Straight into vectors: a JSON tree of the answer would be ~8× its floats.
    let answer: Answer = serde_json::from_str(body).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "not an embeddings answer",
            _ => "not JSON",
        };
        malformed(format!("{what} ({e}): {}", bounded()))
    })?;
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for item in answer.data {
        if item.embedding.len() > MAX_DIMENSIONS {
            return Err(malformed(format!(
                "a vector of {} dimensions for input {}; at most {MAX_DIMENSIONS} are accepted",
                item.embedding.len(),
                item.index
            )));
        }
        let slot = out
            .get_mut(item.index)
            .ok_or_else(|| malformed(format!("index {} of {n} inputs", item.index)))?;
        if slot.replace(item.embedding).is_some() {
            return Err(malformed(format!("index {} answered twice", item.index)));
        }
    }
    let out: Vec<Vec<f32>> = out
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| malformed(format!("no vector for input {i} of {n}"))))
        .collect::<Result<_, _>>()?;
    let dim = out.first().map_or(0, Vec::len);
    if dim == 0 || out.iter().any(|v| v.len() != dim) {
        let lens: Vec<usize> = out.iter().map(Vec::len).collect();
        return Err(malformed(format!("vectors of lengths {lens:?}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str) -> EmbeddingSpec {
        let s: EmbeddingSpec = toml::from_str(text).unwrap();
        s.validate().unwrap();
        s
    }

    #[test]
    fn a_captures_embeddings_requests_are_replayed_with_their_own_batches_and_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let line = |t: u64, endpoint: &str, status: u16, tokens: u64, inputs: usize| {
            format!(
                "{{\"timestamp\":{t},\"input_length\":{tokens},\"output_length\":0,\"hash_ids\":[],\"endpoint\":\"{endpoint}\",\"status\":{status},\"inputs\":{inputs}}}\n"
            )
        };
        let trace = [
            "{\"infergate_capture\":1}\n".to_string(),
            line(40, "embeddings", 200, 7, 1),
            line(10, "embeddings", 200, 31, 3),
            line(20, "embeddings", 500, 9, 2),
            line(30, "chat", 200, 50, 1),
        ]
        .concat();
        std::fs::write(dir.path().join("cap.jsonl"), trace).unwrap();
        let mut s = spec("name = \"e\"\ncapture = \"cap.jsonl\"\n");
        s.read_inputs(dir.path()).unwrap();
        let all = inputs(&s);
        // In arrival order: 31 tokens over 3 inputs, then 7 in one; the
        // failed request and the chat line left out.
        assert_eq!(batches(&s, all.len()), [3, 1]);
        assert_eq!(s.batch, 3);
        let words: Vec<usize> = all.iter().map(|t| t.split(' ').count()).collect();
        assert_eq!(words, [11, 10, 10, 7]);
        assert_eq!(all, inputs(&s), "fixed by the seed");

        let bad = |name: &str, text: &str, field: &str, why: &str| {
            std::fs::write(dir.path().join(name), text).unwrap();
            let mut s = spec(&format!("name = \"e\"\ncapture = \"{name}\"\n"));
            let e = format!("{:#}", s.read_inputs(dir.path()).unwrap_err());
            assert!(e.contains(field) && e.contains(why), "{e}");
        };
        bad(
            "plain.jsonl",
            &line(0, "embeddings", 200, 5, 1),
            "`capture`",
            "not a capture",
        );
        bad(
            "none.jsonl",
            &format!(
                "{{\"infergate_capture\":1}}\n{}",
                line(0, "embeddings", 500, 5, 1)
            ),
            "`capture`",
            "(1 failed)",
        );
        bad(
            "huge.jsonl",
            &format!(
                "{{\"infergate_capture\":1}}\n{}",
                line(0, "embeddings", 200, 5000, 4096)
            ),
            "line 2",
            "4096 inputs",
        );
        assert_eq!(
            batches(&spec("name = \"e\"\ninputs = 20\nbatch = 8\n"), 20),
            [8, 8, 4]
        );
    }

    #[test]
    fn generated_inputs_are_fixed_by_their_seed() {
        let a = inputs(&spec("name = \"e\"\ninputs = 20\nseed = 3\n"));
        assert_eq!(a.len(), 20);
        assert_eq!(a, inputs(&spec("name = \"e\"\ninputs = 20\nseed = 3\n")));
        assert_ne!(a, inputs(&spec("name = \"e\"\ninputs = 20\nseed = 4\n")));
        for s in &a {
            let words = s.split(' ').count();
            assert!((8..=40).contains(&words), "{words}: {s}");
        }
        assert!(a.iter().collect::<std::collections::BTreeSet<_>>().len() > 15);
        assert_eq!(inputs_sha256(&a).len(), 64);
    }

    #[test]
    fn a_vector_of_absurd_dimensions_is_refused() {
        let vector = |d: usize| format!("[{}]", vec!["0.5"; d].join(","));
        let body = |d| format!(r#"{{"data":[{{"index":0,"embedding":{}}}]}}"#, vector(d));
        assert_eq!(
            vectors_of(200, &body(MAX_DIMENSIONS), 1).unwrap()[0].len(),
            MAX_DIMENSIONS
        );
        let (o, m) = vectors_of(200, &body(MAX_DIMENSIONS + 1), 1).unwrap_err();
        assert_eq!(o, Outcome::StreamValidationFailed);
        assert!(
            m.contains("65537 dimensions") && m.contains("at most 65536"),
            "{m}"
        );
    }

    #[test]
    fn an_answer_is_read_in_input_order_and_anything_else_is_classified() {
        let ok =
            r#"{"data":[{"index":1,"embedding":[0.0,1.0]},{"index":0,"embedding":[1.0,0.0]}]}"#;
        assert_eq!(
            vectors_of(200, ok, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        let class = |status, body: &str, n| vectors_of(status, body, n).unwrap_err();
        assert_eq!(class(500, "{}", 1).0, Outcome::HttpError);
        for (body, why) in [
            ("nope", "not JSON"),
            (r#"{"data":[{"index":0}]}"#, "not an embeddings answer"),
            (
                r#"{"data":[{"index":0,"embedding":[1.0]}]}"#,
                "no vector for input 1 of 2",
            ),
            (
                r#"{"data":[{"index":0,"embedding":[1.0]},{"index":0,"embedding":[1.0]}]}"#,
                "answered twice",
            ),
            (
                r#"{"data":[{"index":0,"embedding":[1.0]},{"index":1,"embedding":[1.0,2.0]}]}"#,
                "lengths [1, 2]",
            ),
            (
                r#"{"data":[{"index":5,"embedding":[1.0]}]}"#,
                "index 5 of 2",
            ),
        ] {
            let (o, m) = class(200, body, 2);
            assert_eq!(o, Outcome::StreamValidationFailed, "{body}");
            assert!(m.contains(why), "{m}");
        }
    }

    #[test]
    fn bad_tables_are_refused_naming_the_field() {
        for (text, field) in [
            ("name = \"e\"\n", "`inputs`"),
            ("name = \"e\"\ninputs = 0\n", "`inputs`"),
            ("name = \"e\"\ninputs = 4\nfile = \"x.txt\"\n", "not both"),
            (
                "name = \"e\"\ncapture = \"c.jsonl\"\nfile = \"x.txt\"\n",
                "not both",
            ),
            ("name = \"e\"\ninputs = 4\nbatch = 0\n", "`batch`"),
        ] {
            let s: EmbeddingSpec = toml::from_str(text).unwrap();
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{text}: {e}");
        }
    }
}
