//! Aggregation + compare time for 1M request records.
//!
//! Builds `RECORDS` request records in memory (half baseline, half
//! candidate, spread over `CELLS` cells, 16 content chunks each), aggregates
//! every cell with `aggregate::cell` exactly as `infergate run` does, then
//! runs `report::compare` with the default policy. Building the records is
//! not timed. The default policy's bootstrap (10 000 resamples of every p50
//! metric of every cell) is timed in full; at 50 000 records per cell and
//! side it samples the resample median's rank (O(1) per resample, see
//! `stats::bootstrap::RANK_SAMPLING_MIN_N`). `--extrapolate` instead scales
//! a run with 1% of the iterations, for record counts where each resample
//! is O(n).
//!
//! Run: `cargo bench --bench compare [-- RECORDS] [-- --extrapolate]`.

use std::time::{Duration, Instant};

use infergate::artifact::{CellResult, RunArtifact};
use infergate::config::suite::{CachePolicy, CellSpec};
use infergate::measure::aggregate;
use infergate::measure::record::{Outcome, RequestRecord, StreamCapture};
use infergate::report::{self, Policy};
use infergate_report::fixtures;

mod common;

use common::{cpu_self, flag};

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
        output: Default::default(),
        endpoint: Default::default(),
        extra: toml::Table::new(),
        slo: None,
        expect: Default::default(),
        workload: None,
        capacity: None,
        dataset: None,
        dataset_sha256: None,
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
                template_prompt_tokens: None,
                turn: None,
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
                capacity: None,
            });
        }
    }
    out
}

fn artifact(label: &str, cells: Vec<CellResult>) -> RunArtifact {
    let provenance = fixtures::bare_provenance(label, "bench", env!("CARGO_PKG_VERSION"));
    fixtures::artifact(provenance, cells, Vec::new())
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// Wall time and this process's CPU time of one step (everything here is one thread).
#[derive(Clone, Copy)]
struct Timed(Duration, Duration);

impl Timed {
    fn show(&self) -> String {
        format!("{} | {}", secs(self.0), secs(self.1))
    }
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

    let (t, cpu) = (Instant::now(), cpu_self());
    let bcells: Vec<CellResult> = specs.iter().map(|s| aggregate::cell(s, &base)).collect();
    let ccells: Vec<CellResult> = specs.iter().map(|s| aggregate::cell(s, &cand)).collect();
    let agg = Timed(t.elapsed(), cpu_self() - cpu);
    assert!(
        bcells
            .iter()
            .all(|c| c.performance_eligible && c.succeeded == per_cell)
    );
    let (b, c) = (artifact("baseline", bcells), artifact("candidate", ccells));
    if std::env::args().any(|a| a == "--aggregate-only") {
        println!("aggregate::cell, both sides: {}", agg.show());
        return;
    }

    let policy = Policy::default();
    let timed = |iterations: usize| {
        let mut p = policy.clone();
        p.bootstrap.iterations = iterations;
        let (t, cpu) = (Instant::now(), cpu_self());
        let rep = report::compare(&b, &c, &p).expect("comparable");
        assert_eq!(rep.cells.0.len(), CELLS);
        Timed(t.elapsed(), cpu_self() - cpu)
    };
    let full = policy.bootstrap.iterations;
    // Measured, not extrapolated: above `RANK_SAMPLING_MIN_N` values per side
    // the bootstrap costs O(1) per resample. `--extrapolate` times 1% of the
    // iterations and scales (for small cells, where it is O(n) per resample).
    let sample_iters = (full / 100).max(1);
    let c0 = timed(0);
    let cs = timed(sample_iters);
    let extrapolate = flag("--extrapolate");
    let c_full = if extrapolate {
        let k = full as f64 / sample_iters as f64;
        let more = |a: Duration, b: Duration| a + b.saturating_sub(a).mul_f64(k);
        Timed(more(c0.0, cs.0), more(c0.1, cs.1))
    } else {
        timed(full)
    };
    let how = if extrapolate {
        "extrapolated"
    } else {
        "measured"
    };

    let n = 2 * CELLS * per_cell;
    let p50s = policy.metrics.iter().filter(|m| m.quantile == 0.5).count();
    println!(
        "{n} request records ({} per side, {CELLS} cells of {per_cell} per side, {CHUNKS} chunks each), built in memory in {} (not timed). Default policy: {} gating metrics, {p50s} of them p50 with a bootstrap CI of {full} iterations.",
        n / 2,
        secs(built),
        policy.metrics.len(),
    );
    println!();
    println!("| step | wall | CPU (user+sys) |");
    println!("|---|---|---|");
    println!(
        "| aggregate::cell, every cell of both sides | {} |",
        agg.show()
    );
    println!(
        "| report::compare, bootstrap off (iterations = 0) | {} |",
        c0.show()
    );
    println!(
        "| report::compare, {sample_iters} bootstrap iterations | {} |",
        cs.show()
    );
    println!(
        "| report::compare, default {full} iterations ({how}) | {} |",
        c_full.show()
    );
    let total = Timed(agg.0 + c_full.0, agg.1 + c_full.1);
    let no_boot = Timed(agg.0 + c0.0, agg.1 + c0.1);
    println!(
        "| total: aggregate + compare, default policy | {} |",
        total.show()
    );
    println!(
        "| total: aggregate + compare, bootstrap off | {} |",
        no_boot.show()
    );
    println!(
        "SUMMARY|aggregate + compare, {n} records, default policy ({how})|{:.1} s wall, {:.1} s CPU (bootstrap off: {:.2} s wall, {:.2} s CPU)|< 2 s|{}",
        total.0.as_secs_f64(),
        total.1.as_secs_f64(),
        no_boot.0.as_secs_f64(),
        no_boot.1.as_secs_f64(),
        if total.1.as_secs_f64() < 2.0 {
            "met"
        } else {
            "not met"
        }
    );
}
