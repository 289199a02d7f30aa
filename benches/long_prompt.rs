//! The 120k-token prompt path at full size, without a GPU: infergate's
//! runner (`runner::run`, exact sizing with the model's `tokenizer.json`)
//! against the fast source in counting mode, which reports each chat
//! request's `usage.prompt_tokens` as the reference engine counts it
//! (SmolLM2's ChatML template and tokenizer) and prefills nothing.
//!
//! The client runs in a child process of its own (this binary re-run with
//! `--client`), once per request count: 1, the concurrency, and the whole
//! cell. Its peak RSS (VmHWM) is then the client's alone: the source, its
//! tokenizer and the prompts it recorded live in this process. Each count
//! runs twice, the second time with glibc's mmap threshold held fixed
//! (`MALLOC_MMAP_THRESHOLD_`), which tells bodies the client keeps from
//! freed ones the allocator keeps. Per run: the wall time of `runner::run`
//! (sizing's probes included), the client's CPU time and VmHWM, the
//! journal's longest line, and how many requests' `usage.prompt_tokens`
//! are exactly on target.
//!
//! Then every prompt of the whole cell is recounted by the reference engine
//! (llama.cpp, `long` profile, one thread), which shares no code with
//! infergate nor with the counting mode: its own chat template
//! (`/apply-template`) and tokenizer (`/tokenize`) on the messages the
//! source received. A shorter prompt's `usage.prompt_tokens`, from the
//! engine itself, checks that this recount is how the engine counts.
//!
//! Run: `cargo bench --bench long_prompt [-- --requests 100 --concurrency 4
//! --prompt-tokens 120000 --max-tokens 4 --tokenizer PATH --no-recount]`.
//! Needs `scripts/setup-tokenizer.sh`'s file (found by running it when
//! `--tokenizer` is not given) and, for the recount, `scripts/setup-engine.sh`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infergate::driver::engine;
use infergate::measure::record::Outcome;
use infergate::measure::{client::Timeouts, journal, runner};
use infergate_testkit::fastsource::{FastSource, FastSourceConfig, RecordedPrompt};
use infergate_testkit::promptcount::{ChatMessage, PromptCounter, engine_recount};

use common::{arg, cpu_self, flag, status_kb};

/// glibc's initial mmap threshold (128 KiB). Set through the environment it
/// stays fixed: a freed block above it goes back to the kernel at once,
/// where by default the threshold rises to the largest block freed and
/// later bodies of that size are carved from the heaps, which then keep
/// their high-water mark.
const FIXED_MMAP_THRESHOLD: &str = "131072";

struct Params {
    requests: usize,
    concurrency: usize,
    prompt_tokens: u64,
    max_tokens: u64,
}

impl Params {
    fn from_args() -> Params {
        let num = |name: &str, default: u64| {
            arg(name).map_or(default, |v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name} {v}: not a number"))
            })
        };
        Params {
            requests: num("--requests", 100) as usize,
            concurrency: num("--concurrency", 4) as usize,
            prompt_tokens: num("--prompt-tokens", 120_000),
            max_tokens: num("--max-tokens", 4),
        }
    }

    /// One cell as a seed suite would write it: unique prompts, no warmup
    /// (so the source's streamed requests are exactly the measured ones).
    fn suite(&self, requests: usize) -> String {
        format!(
            "name = \"long\"\n[[cell]]\nname = \"p{t}\"\nprompt_tokens = {t}\ntolerance_percent = 1\n\
             max_tokens = {m}\nconcurrency = {c}\nrequests = {requests}\nwarmup = 0\ncache = \"unique\"\n",
            t = self.prompt_tokens,
            m = self.max_tokens,
            c = self.concurrency,
        )
    }
}

/// `--client`: one run through infergate's runner, then its wall time and
/// this process's peak RSS on stdout.
fn client() {
    let p = Params::from_args();
    let url = arg("--url").expect("--url");
    let dir = PathBuf::from(arg("--out").expect("--out"));
    let tokenizer = PathBuf::from(arg("--tokenizer").expect("--tokenizer"));
    let requests: usize = arg("--runs").and_then(|v| v.parse().ok()).expect("--runs");
    std::fs::create_dir_all(&dir).expect("creating the run directory");
    let suite = dir.join("suite.toml");
    std::fs::write(&suite, p.suite(requests)).expect("writing the suite");
    let opts = runner::RunOptions {
        target: url,
        api_key_env: None,
        suite,
        out_dir: dir.join("run"),
        runtime_label: Some("fastsource".into()),
        image: None,
        only_cells: vec![],
        resume: false,
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(300),
            idle: Duration::from_secs(60),
            total: Duration::from_secs(600),
            // The default allowance: 240 s more for a 120k prompt.
            per_1k_prompt_tokens: Timeouts::default().per_1k_prompt_tokens,
        },
        skip_turnover: Some(infergate::artifact::TurnoverSkip::SkippedByRun),
        quiet: true,
        tokenizer: Some(tokenizer),
        part: runner::RunPart::Whole,
        scrape: infergate::measure::scrape::ScrapeOptions::default(),
    };
    // The runtime `infergate run` builds.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let t0 = Instant::now();
    let art = rt.block_on(runner::run(&opts)).expect("run");
    let wall = t0.elapsed();
    eprintln!(
        "long_prompt: {requests} requests: {}",
        art.method
            .get("prompt_tokens_achieved")
            .map_or("", String::as_str)
    );
    println!(
        "WALL {} CPU {} VMHWM {}",
        wall.as_secs_f64(),
        cpu_self().as_secs_f64(),
        status_kb("VmHWM").map_or(-1, |v| v as i64)
    );
}

/// What one client run came to.
struct Run {
    requests: usize,
    wall_s: f64,
    cpu_s: f64,
    hwm_kb: u64,
    journal_lines: usize,
    ok: usize,
    on_target: usize,
    off: Vec<(usize, Option<u64>)>,
    longest_line: usize,
    /// The measured (streamed) prompts as the source received them.
    prompts: Vec<RecordedPrompt>,
}

/// One client run of `n` requests in a child process; with
/// `fixed_threshold`, glibc's mmap threshold held at its initial value.
fn run_client(
    p: &Params,
    src: &FastSource,
    tokenizer: &Path,
    dir: &Path,
    n: usize,
    fixed_threshold: bool,
) -> Run {
    let out = dir.join(format!("n{n}-{fixed_threshold}"));
    let exe = std::env::current_exe().expect("current exe");
    let mut cmd = Command::new(exe);
    if fixed_threshold {
        cmd.env("MALLOC_MMAP_THRESHOLD_", FIXED_MMAP_THRESHOLD);
    } else {
        cmd.env_remove("MALLOC_MMAP_THRESHOLD_");
    }
    let o = cmd
        .args(["--client", "--url", &src.base_url(), "--out"])
        .arg(&out)
        .arg("--tokenizer")
        .arg(tokenizer)
        .args([
            "--runs",
            &n.to_string(),
            "--concurrency",
            &p.concurrency.to_string(),
            "--prompt-tokens",
            &p.prompt_tokens.to_string(),
            "--max-tokens",
            &p.max_tokens.to_string(),
        ])
        .stderr(Stdio::inherit())
        .output()
        .expect("running the client");
    assert!(o.status.success(), "client run of {n} failed: {}", o.status);
    let text = String::from_utf8_lossy(&o.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    let (wall_s, cpu_s, hwm_kb) = match f.as_slice() {
        ["WALL", w, "CPU", c, "VMHWM", kb] => {
            (w.parse().unwrap(), c.parse().unwrap(), kb.parse().unwrap())
        }
        _ => panic!("unexpected client output: {text}"),
    };
    let journal_path = out.join("run").join(runner::JOURNAL_FILE);
    let journal_text = std::fs::read_to_string(&journal_path).expect("journal");
    let longest_line = journal_text.lines().map(str::len).max().unwrap_or(0);
    let mut recs = journal::read(&journal_path).expect("journal records");
    recs.sort_by_key(|r| r.index);
    let ok = recs.iter().filter(|r| r.outcome == Outcome::Ok).count();
    let off: Vec<(usize, Option<u64>)> = recs
        .iter()
        .filter(|r| r.capture.prompt_tokens != Some(p.prompt_tokens))
        .map(|r| (r.index, r.capture.prompt_tokens))
        .collect();
    let prompts: Vec<RecordedPrompt> = src
        .take_prompts()
        .into_iter()
        .filter(|r| r.stream)
        .collect();
    Run {
        requests: n,
        wall_s,
        cpu_s,
        hwm_kb,
        journal_lines: recs.len(),
        ok,
        on_target: recs.len() - off.len(),
        off,
        longest_line,
        prompts,
    }
}

/// The request index a unique prefix names (`[xxxxxxxx cell C request I run R]`).
fn index_of(prompt: &RecordedPrompt) -> Option<usize> {
    let content = &prompt.messages.last()?.content;
    let head = content.get(..content.find(']')?)?;
    let after = head.split(" request ").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

/// Recount every prompt with the reference engine; also the engine's own
/// usage of a shorter prompt against the recount method.
fn recount(p: &Params, prompts: &[RecordedPrompt]) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut profile = engine::builtin_profiles()
        .expect("engine profiles")
        .remove("long")
        .expect("the long profile");
    profile.threads = 1;
    let log_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("long_prompt");
    let eng = rt
        .block_on(engine::start(&profile, &log_dir))
        .expect("the reference engine (scripts/setup-engine.sh) starts");
    eprintln!(
        "long_prompt: engine {} (log {})",
        eng.base_url,
        eng.log_path.display()
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(300))
        .build()
        .expect("client");
    let t0 = Instant::now();
    let mut counts = Vec::new();
    for r in prompts {
        let n = rt
            .block_on(engine_recount(&http, &eng.base_url, &r.messages))
            .expect("recount");
        counts.push((index_of(r), n, r.prompt_tokens));
    }
    let took = t0.elapsed();
    counts.sort();
    let exact = counts.iter().filter(|c| c.1 == p.prompt_tokens).count();
    let agree = counts.iter().filter(|c| c.1 == c.2).count();
    let indices: Vec<usize> = counts.iter().filter_map(|c| c.0).collect();
    println!();
    println!(
        "Recount by the reference engine (`/apply-template` + `/tokenize`, {:.1} s): {exact} of {} prompts exactly {} tokens; {agree} agree with the source's count; request indices {}",
        took.as_secs_f64(),
        counts.len(),
        p.prompt_tokens,
        if indices == (0..p.requests).collect::<Vec<_>>() {
            format!("0..{} each once", p.requests)
        } else {
            format!("{indices:?}")
        }
    );
    for (i, n, src) in counts.iter().filter(|c| c.1 != p.prompt_tokens) {
        println!("- request {i:?}: engine recount {n}, source {src}");
    }
    assert_eq!(exact, counts.len(), "every prompt recounted on target");
    // The recount method against the engine's own usage: the first 2,000
    // words of a measured prompt (about 2.5k tokens), prefilled for real.
    if let Some(first) = prompts.first() {
        let content = &first.messages[0].content;
        let cut = content
            .match_indices(' ')
            .nth(2000)
            .map_or(content.len(), |(i, _)| i);
        let msgs = [ChatMessage {
            role: "user".into(),
            content: content[..cut].to_string(),
        }];
        let recounted = rt
            .block_on(engine_recount(&http, &eng.base_url, &msgs))
            .expect("recount");
        let usage: serde_json::Value = rt
            .block_on(async {
                http.post(format!("{}/v1/chat/completions", eng.base_url))
                    .json(&serde_json::json!({"messages": msgs, "max_tokens": 1}))
                    .send()
                    .await?
                    .json()
                    .await
            })
            .expect("chat completion");
        println!(
            "Recount method vs the engine's own usage.prompt_tokens, prefilled (the first {cut} bytes of request {}): {recounted} vs {}",
            index_of(first).map_or("?".into(), |i| i.to_string()),
            usage["usage"]["prompt_tokens"]
        );
    }
    drop(eng);
}

fn tokenizer_path() -> PathBuf {
    if let Some(p) = arg("--tokenizer") {
        return PathBuf::from(p);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup-tokenizer.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/setup-tokenizer.sh");
    assert!(out.status.success(), "scripts/setup-tokenizer.sh failed");
    let text = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(text.lines().last().unwrap_or("").trim())
}

fn main() {
    if flag("--client") {
        return client();
    }
    let p = Params::from_args();
    let tokenizer = tokenizer_path();
    let cfg = FastSourceConfig {
        counter: Some(PromptCounter::smollm2(&tokenizer).expect("tokenizer")),
        record_prompts: true,
        // Paced, so the client times each answer's decode.
        ttft: std::time::Duration::from_millis(50),
        itl: std::time::Duration::from_millis(50),
        ..Default::default()
    };
    let (_, src) = FastSource::start(cfg).expect("fast source");
    let dir = tempfile::tempdir().expect("tempdir");
    println!(
        "### One cell of {} prompt tokens, cache = \"unique\", concurrency {}, max_tokens {}, against the counting fast source",
        p.prompt_tokens, p.concurrency, p.max_tokens
    );
    println!();
    println!(
        "| requests | wall time of runner::run (sizing included) | client CPU time | client peak RSS (VmHWM) | the same, glibc mmap threshold fixed | journal lines (ok) | usage.prompt_tokens exactly on target | longest journal line |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut sizes = vec![1, p.concurrency, p.requests];
    sizes.dedup();
    let mut last = None;
    for n in sizes {
        let fixed = run_client(&p, &src, &tokenizer, dir.path(), n, true);
        let r = run_client(&p, &src, &tokenizer, dir.path(), n, false);
        println!(
            "| {} | {:.1} s | {:.1} s | {:.1} MiB | {:.1} MiB | {} ({}) | {} of {} | {} bytes |",
            r.requests,
            r.wall_s,
            r.cpu_s,
            r.hwm_kb as f64 / 1024.0,
            fixed.hwm_kb as f64 / 1024.0,
            r.journal_lines,
            r.ok,
            r.on_target,
            r.journal_lines,
            r.longest_line.max(fixed.longest_line)
        );
        for run in [&r, &fixed] {
            for (i, got) in &run.off {
                println!("- request {i}: usage.prompt_tokens {got:?}");
            }
            assert_eq!(run.prompts.len(), n, "streamed requests the source saw");
            assert_eq!(
                (run.journal_lines, run.ok, run.on_target),
                (n, n, n),
                "run of {n}"
            );
        }
        last = Some(r);
    }
    let Some(last) = last else { return };
    let bytes: Vec<usize> = last
        .prompts
        .iter()
        .map(|r| r.messages.iter().map(|m| m.content.len()).sum())
        .collect();
    println!();
    println!(
        "Prompt text per request: {} to {} bytes",
        bytes.iter().min().unwrap_or(&0),
        bytes.iter().max().unwrap_or(&0)
    );
    if !flag("--no-recount") {
        recount(&p, &last.prompts);
    }
}
