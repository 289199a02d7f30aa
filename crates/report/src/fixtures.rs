//! Report fixtures for tests and benches, built the same way everywhere:
//! a cell's shape, deterministic samples, a cell with its metrics
//! summarized from them, a turnover run, an artifact, and the seed's
//! situation as two runs. Dev-only (feature
//! `fixtures`, enabled by the dev-dependencies): never in a release build.

use std::collections::BTreeMap;

use crate::artifact::{
    CellResult, CellShape, Provenance, RUN_SCHEMA, RunArtifact, TurnoverFailure, TurnoverRun,
    metric,
};

/// A closed-loop cell of unique prompts at temperature 0, seed 1, 64 output
/// tokens, one warmup request.
pub fn shape(prompt_tokens: u64, concurrency: usize, requests: usize) -> CellShape {
    CellShape {
        prompt_tokens,
        tolerance_percent: 5.0,
        max_tokens: 64,
        concurrency,
        requests,
        warmup: 1,
        cache: "unique".into(),
        arrival: "closed".into(),
        temperature: 0.0,
        seed: Some(1),
        workload: None,
        endpoint: None,
    }
}

/// Deterministic spread around `center`: ±4 %.
pub fn spread(center: f64, n: usize, phase: usize) -> Vec<f64> {
    (0..n)
        .map(|i| center * (1.0 + 0.04 * (((i * 7 + phase) % 11) as f64 / 5.0 - 1.0)))
        .collect()
}

/// TTFT, end-to-end and decode speed, each [`spread`] around its centre
/// (phases `phase`, `phase + 3`, `phase + 5`).
pub fn spread_samples(
    n: usize,
    (ttft, e2e, decode): (f64, f64, f64),
    phase: usize,
) -> BTreeMap<String, Vec<f64>> {
    BTreeMap::from([
        (metric::TTFT_MS.to_string(), spread(ttft, n, phase)),
        (metric::E2E_MS.to_string(), spread(e2e, n, phase + 3)),
        (
            metric::DECODE_TOK_S.to_string(),
            spread(decode, n, phase + 5),
        ),
    ])
}

/// A cell of `shape.requests` requests, all succeeded and eligible, its
/// metrics summarized from `samples`; no clusters, rows or server detail.
pub fn cell(
    name: &str,
    shape: CellShape,
    samples: BTreeMap<String, Vec<f64>>,
    median_prompt_tokens: Option<f64>,
) -> CellResult {
    let metrics = samples
        .iter()
        .filter_map(|(k, v)| crate::stats::summarize(v).map(|s| (k.clone(), s)))
        .collect();
    let n = shape.requests;
    CellResult {
        request_rows: Vec::new(),
        capacity: None,
        fidelity: None,
        server_timings: None,
        server_metrics: Vec::new(),
        slices: Vec::new(),
        sessions: None,
        slo: None,
        name: name.into(),
        shape,
        requests: n,
        succeeded: n,
        failed: 0,
        failures_by_class: BTreeMap::new(),
        performance_eligible: true,
        ineligible_reasons: vec![],
        median_prompt_tokens,
        metrics,
        samples,
        tokens_estimated: false,
        sample_clusters: BTreeMap::new(),
        prompt_cache: None,
        speculative: None,
        expect: Default::default(),
        output_length: None,
        warnings: vec![],
    }
}

/// A words-contract output failure of request `index`.
pub fn failure(index: usize) -> TurnoverFailure {
    TurnoverFailure {
        request_index: index,
        failure_class: "controlled_output_failed".into(),
        words: 33,
        finish_reasons: vec!["stop".into()],
        canary_passed: true,
        foreign_markers: vec![],
        error: None,
        output: None,
        divergence: None,
    }
}

/// A words-contract turnover run at concurrency 8: `failed` of `requests`
/// failed (requests 0, 5, 10, …), every response received, none contaminated.
pub fn turnover(repeat: usize, requests: usize, failed: usize) -> TurnoverRun {
    TurnoverRun {
        references: vec![],
        reference_tokens: vec![],
        task_answers: String::new(),
        task_set_sha256: None,
        features: Default::default(),
        name: "turnover".into(),
        repeat,
        contract: "words".into(),
        concurrency: 8,
        requests,
        exact_output_passed: requests - failed,
        failed,
        responses_received: requests,
        performance_eligible: false,
        contaminated: 0,
        failures: (0..failed).map(|i| failure(i * 5)).collect(),
        first_ttft_ms: None,
        later_ttft_p50_ms: None,
    }
}

/// A llama-server image by `digest` on loopback, serving the reference
/// model for the suite `smoke`.
pub fn provenance(label: &str, digest: &str) -> Provenance {
    Provenance {
        target: "http://127.0.0.1:8080".into(),
        model: "smollm2-135m-instruct".into(),
        runtime: Some(label.into()),
        image: Some(format!("registry.example/llama-server@sha256:{digest}")),
        suite: "smoke".into(),
        suite_sha256: Some("ab12".into()),
        tool_version: "0.1.0".into(),
        host: "ci".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        ended_at: "2025-01-01T00:10:00Z".into(),
        ..Default::default()
    }
}

/// The least provenance an artifact needs: target, model, runtime, suite.
pub fn bare_provenance(label: &str, suite: &str, tool_version: &str) -> Provenance {
    Provenance {
        target: "http://127.0.0.1:1".into(),
        model: "m".into(),
        runtime: Some(label.into()),
        suite: suite.into(),
        tool_version: tool_version.into(),
        ..Default::default()
    }
}

/// A single run's artifact (no schedule, no method notes).
pub fn artifact(
    provenance: Provenance,
    cells: Vec<CellResult>,
    turnover: Vec<TurnoverRun>,
) -> RunArtifact {
    RunArtifact {
        rate_sweeps: Vec::new(),
        embeddings: Vec::new(),
        schema: RUN_SCHEMA.into(),
        provenance,
        method: BTreeMap::new(),
        cells,
        turnover,
        schedule: None,
        turnover_not_run: None,
    }
}

/// A cell of `n` requests at concurrency 2 and `prompt` tokens, its samples
/// [`spread_samples`] around `centres` (TTFT, end-to-end, decode speed),
/// its median prompt 3 tokens short of `prompt`.
pub fn spread_cell(
    name: &str,
    prompt: u64,
    n: usize,
    centres: (f64, f64, f64),
    phase: usize,
) -> CellResult {
    let samples = spread_samples(n, centres, phase);
    cell(
        name,
        shape(prompt, 2, n),
        samples,
        Some(prompt as f64 - 3.0),
    )
}

/// The seed's situation as (baseline, candidate) runs: the candidate a
/// little faster in two cells (`capacity-4k`, 12 requests; `capacity-120k`,
/// 3), the baseline's turnover run failing 7 of 60, the candidate's two
/// failing 2 and 3 of 60.
pub fn seed_like() -> (RunArtifact, RunArtifact) {
    let b = artifact(
        provenance("baseline", "0c06"),
        vec![
            spread_cell("capacity-4k", 3000, 12, (496.0, 638.0, 288.0), 0),
            spread_cell("capacity-120k", 97000, 3, (14940.0, 15100.0, 255.0), 1),
        ],
        vec![turnover(0, 60, 7)],
    );
    let c = artifact(
        provenance("candidate", "877a"),
        vec![
            spread_cell("capacity-4k", 3000, 12, (470.0, 607.0, 300.0), 2),
            spread_cell("capacity-120k", 97000, 3, (14744.0, 14881.0, 299.0), 3),
        ],
        vec![turnover(0, 60, 2), turnover(1, 60, 3)],
    );
    (b, c)
}
