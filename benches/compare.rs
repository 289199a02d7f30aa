//! Aggregation + compare time for 1M request records.
//!
//! Builds `RECORDS` request records in memory (half baseline, half
//! candidate, spread over `CELLS` cells, 16 content chunks each), aggregates
//! every cell with `aggregate::cell` exactly as `infergate run` does, then
//! runs `report::compare` with the default policy. Building the records is
//! not timed. A second compare with the bootstrap switched off shows how much
//! of the time is the bootstrap.
//!
//! Run: `cargo bench --bench compare [-- RECORDS]`.

use std::time::{Duration, Instant};

use infergate::aggregate;
use infergate::artifact::{CellResult, Provenance, RUN_SCHEMA, RunArtifact};
use infergate::record::{Outcome, RequestRecord, StreamCapture};
use infergate::report::{self, Policy};
use infergate::suite::{CachePolicy, CellSpec};

const CELLS: usize = 10;
const CHUNKS: usize = 16;

fn spec(i: usize, requests: usize) -> CellSpec {
    CellSpec {
        name: format!("cell-{i}"),
        prompt_tokens: 1000,
        tolerance_percent: 10.0,
        max_tokens: CHUNKS as u64,
        concurrency: 64,
        requests,
        warmup: 0,
        cache: CachePolicy::Unique,
        arrival: "closed".into(),
        temperature: 0.0,
        seed: None,
        extra: toml::Table::new(),
    }
}

/// A cheap deterministic jitter in [0, 1).
fn jitter(x: u64) -> f64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
}

fn records(specs: &[CellSpec], side: u64) -> Vec<RequestRecord> {
    let mut out = Vec::with_capacity(specs.iter().map(|s| s.requests).sum());
    for (c, s) in specs.iter().enumerate() {
        for index in 0..s.requests {
            let key = (side << 40) ^ ((c as u64) << 32) ^ index as u64;
            let ttft = 50.0 + 10.0 * jitter(key);
            let chunk_ms: Vec<f64> = (0..CHUNKS)
                .map(|k| ttft + k as f64 * (5.0 + jitter(key ^ (k as u64) << 20)))
                .collect();
            let e2e = chunk_ms[CHUNKS - 1] + 0.1;
            out.push(RequestRecord {
                cell: s.name.clone(),
                index,
                send_offset_ms: index as f64,
                queue_ms: 0.0,
                target_prompt_tokens: Some(s.prompt_tokens),
                capture: StreamCapture {
                    http_status: Some(200),
                    ttfo_ms: Some(ttft),
                    ttft_ms: Some(ttft),
                    e2e_ms: Some(e2e),
                    chunk_ms,
                    content: "tok".repeat(CHUNKS),
                    prompt_tokens: Some(1000),
                    completion_tokens: Some(CHUNKS as u64),
                    finish_reasons: vec!["length".into()],
                    saw_done: true,
                    model: Some("m".into()),
                    ..Default::default()
                },
                outcome: Outcome::Ok,
                detail: None,
            });
        }
    }
    out
}

fn artifact(label: &str, cells: Vec<CellResult>) -> RunArtifact {
    RunArtifact {
        schema: RUN_SCHEMA.into(),
        provenance: Provenance {
            target: "http://127.0.0.1:1".into(),
            model: "m".into(),
            runtime: Some(label.into()),
            suite: "bench".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        },
        method: Default::default(),
        cells,
        turnover: Vec::new(),
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn main() {
    let total: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let per_cell = total / 2 / CELLS;
    let specs: Vec<CellSpec> = (0..CELLS).map(|i| spec(i, per_cell)).collect();
    let t = Instant::now();
    let base = records(&specs, 0);
    let cand = records(&specs, 1);
    let built = t.elapsed();

    let t = Instant::now();
    let bcells: Vec<CellResult> = specs.iter().map(|s| aggregate::cell(s, &base)).collect();
    let ccells: Vec<CellResult> = specs.iter().map(|s| aggregate::cell(s, &cand)).collect();
    let agg = t.elapsed();
    assert!(
        bcells
            .iter()
            .all(|c| c.performance_eligible && c.succeeded == per_cell)
    );
    let (b, c) = (artifact("baseline", bcells), artifact("candidate", ccells));
    if std::env::args().any(|a| a == "--aggregate-only") {
        println!("aggregate::cell, both sides: {}", secs(agg));
        return;
    }

    let policy = Policy::default();
    let t = Instant::now();
    let rep = report::compare(&b, &c, &policy).expect("comparable");
    let cmp = t.elapsed();
    assert_eq!(rep.cells.0.len(), CELLS);

    let mut no_boot = Policy::default();
    no_boot.bootstrap.iterations = 0;
    let t = Instant::now();
    let _ = report::compare(&b, &c, &no_boot).expect("comparable");
    let cmp_no_boot = t.elapsed();

    let n = 2 * CELLS * per_cell;
    let p50s = policy.metrics.iter().filter(|m| m.quantile == 0.5).count();
    println!(
        "{n} records ({} per side, {CELLS} cells of {per_cell}, {CHUNKS} chunks each); built in {} (not timed)",
        n / 2,
        secs(built)
    );
    println!("| step | time |");
    println!("|---|---|");
    println!("| aggregate::cell, both sides | {} |", secs(agg));
    println!(
        "| report::compare, default policy ({} bootstrap iterations, {p50s} p50 metrics) | {} |",
        policy.bootstrap.iterations,
        secs(cmp)
    );
    println!(
        "| report::compare, bootstrap off (iterations = 0) | {} |",
        secs(cmp_no_boot)
    );
    println!("| **aggregate + compare** | **{}** |", secs(agg + cmp));
    let total = agg + cmp;
    println!(
        "SUMMARY|aggregate + compare, {n} records|{:.2} s|< 2 s|{}",
        total.as_secs_f64(),
        if total < Duration::from_secs(2) {
            "met"
        } else {
            "not met"
        }
    );
}
