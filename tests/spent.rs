//! What a run says it sent is what the server received: its measured
//! requests, the cell's warmup, and the probes named beside them
//! (discovery, prompt sizing, `/tokenize`, the server's `/metrics`), block
//! by block as a qualification runs them, against the loopback fast source
//! (no engine).

use std::time::Duration;

mod support;

use infergate::config::suite::Suite;
use infergate::measure::client::Timeouts;
use infergate::measure::runner::{self, RunPart};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig};

const SUITE: &str = r#"
name = "spent"
[[cell]]
name = "small"
prompt_tokens = 200
tolerance_percent = 50
max_tokens = 8
concurrency = 2
requests = 8
warmup = 3
seed = 3
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_s_measured_warmup_and_probes_are_all_the_server_received() {
    let (_, src) = FastSource::start(FastSourceConfig {
        ttft: Duration::from_millis(2),
        ..FastSourceConfig::default()
    })
    .expect("fast source");
    let dir = tempfile::tempdir().unwrap();
    let suite_path = dir.path().join("suite.toml");
    std::fs::write(&suite_path, SUITE).unwrap();
    let (suite, text) = Suite::load(&suite_path).unwrap();
    let opts = |first, warmup, resume| runner::RunOptions {
        timeouts: Timeouts {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(10),
            idle: Duration::from_secs(10),
            total: Duration::from_secs(20),
            per_1k_prompt_tokens: Duration::ZERO,
        },
        part: RunPart::Block {
            first,
            count: 4,
            warmup,
        },
        resume,
        ..support::run_opts(&src.base_url(), suite_path.clone(), dir.path().join("run"))
    };
    // The runtime's first block: discovery, sizing, the warmup, 4 measured.
    let first = runner::measure_suite(&opts(0, true, false), &suite, &text, None, None)
        .await
        .expect("first block");
    let heard = src.requests();
    let p = first.probes;
    assert_eq!(first.records.len(), 4);
    assert!(
        p.discovery > 0 && p.prompt_sizing > 0 && p.metrics > 0,
        "{p:?}"
    );
    assert_eq!(
        heard.len(),
        4 + 3 + p.total(),
        "{p:?} against what the server heard: {heard:?}"
    );
    // The next block reaches the same server: no discovery, no warmup.
    let second = runner::measure_suite(
        &opts(4, false, true),
        &suite,
        &text,
        Some(&first.records),
        Some(first.target.clone()),
    )
    .await
    .expect("second block");
    let q = second.probes;
    assert_eq!((second.records.len(), q.discovery), (4, 0), "{q:?}");
    let heard = src.requests();
    assert_eq!(
        heard.len(),
        4 + 3 + p.total() + 4 + q.total(),
        "{q:?} against what the server heard: {heard:?}"
    );
}
