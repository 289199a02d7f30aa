//! No suite the parser accepts makes infergate allocate more than
//! a bound before its first request. A counting allocator measures the
//! peak of what a run does before sending: load and check the suite, build
//! each cell's request source and its first request, build each turnover
//! workload's prompts (all of them: a turnover plan is made up front).
//! Suites are drawn from the parse-time limits (each field at 1, a middle
//! value or its maximum), fixed seed; one that the parser refuses is
//! skipped, one it accepts must stay within the bound. And a hook's
//! standard error, however long, is held within a bound of its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use infergate::config::limits::{
    MAX_CELL_REQUESTS, MAX_CONCURRENCY, MAX_OUTPUT_TOKENS, MAX_TURNOVER_REPEATS,
    MAX_TURNOVER_REQUESTS, MAX_TURNOVER_WORDS, MAX_WARMUP,
};
use infergate::config::suite::Suite;
use infergate::measure::exact;
use infergate::measure::turnover::TurnoverWorkload;
use infergate::measure::workload::{self, SizedBody};

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The most a run may hold before its first request.
const BOUND: usize = 512 << 20;

/// Prompt tokens of the drawn cells: the sizing body of this many filler
/// words is what a real run holds (the first request's copy included).
const PROMPT_TOKENS: [u64; 3] = [128, 32_000, 2_000_000];

fn pick<T: Copy>(rng: &mut u64, xs: &[T]) -> T {
    // xorshift64: deterministic draws, no dependency.
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    xs[(*rng % xs.len() as u64) as usize]
}

fn suite_text(rng: &mut u64) -> String {
    let prompt = pick(rng, &PROMPT_TOKENS);
    let mut s = format!(
        "name = \"drawn\"\n[[cell]]\nname = \"c\"\nprompt_tokens = {prompt}\nmax_tokens = {}\nconcurrency = {}\nrequests = {}\nwarmup = {}\n",
        pick(rng, &[1, 1000, MAX_OUTPUT_TOKENS]),
        pick(rng, &[1, 64, MAX_CONCURRENCY]),
        pick(rng, &[1, 1000, MAX_CELL_REQUESTS]),
        pick(rng, &[0, 10, MAX_WARMUP]),
    );
    let requests = pick(rng, &[1, 1000, MAX_TURNOVER_REQUESTS]);
    let concurrency = pick(rng, &[1, 16, MAX_CONCURRENCY]);
    let shots = pick(rng, &[0, 3, 8]);
    let style = pick(rng, &["words", "sentence", "copy", "needle"]);
    let body = match style {
        "words" => format!(
            "contract = \"words\"\nwords = {}\nrepeats = {}\n",
            pick(rng, &[1, 100, MAX_TURNOVER_WORDS]),
            pick(rng, &[1, 10, MAX_TURNOVER_REPEATS]),
        ),
        "sentence" => "contract = \"reference\"\nprompt = \"sentence\"\n".to_string(),
        "copy" => format!(
            "contract = \"reference\"\nprompt = \"task\"\ngenerate = {{ kind = \"copy\", length = {} }}\n",
            pick(rng, &[1, 200])
        ),
        _ => format!(
            "contract = \"reference\"\nprompt = \"task\"\ngenerate = {{ kind = \"needle\", context_words = {} }}\n",
            pick(rng, &[10, 2000, 100_000])
        ),
    };
    s.push_str(&format!(
        "[[turnover]]\nname = \"t\"\nrequests = {requests}\nconcurrency = {concurrency}\nshots = {shots}\n{body}"
    ));
    s
}

fn sized(prompt_tokens: u64) -> SizedBody {
    let words = prompt_tokens as usize;
    SizedBody {
        words,
        body: infergate::measure::workload::filler(words, 1),
        measured_prompt_tokens: prompt_tokens,
        method: "drawn".into(),
        template_prompt_tokens: Some(10),
        overhead_prompt_tokens: Some(30),
        workload_probe: None,
    }
}

/// One measurement at a time: the counters are the whole process's.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn no_accepted_suite_allocates_past_the_bound_before_its_first_request() {
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("suite.toml");
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let (mut accepted, mut refused, mut worst) = (0, 0, 0usize);
    for _ in 0..80 {
        let text = suite_text(&mut rng);
        std::fs::write(&path, &text).unwrap();
        let base = CURRENT.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        {
            let Ok((suite, _)) = Suite::load(&path) else {
                refused += 1;
                continue;
            };
            accepted += 1;
            for cell in &suite.cells {
                // What the runner holds for a filler cell: the sized body's
                // words, the per-request fits (one small entry per planned
                // request, as `exact::fit_requests` keeps them), request 0.
                let sized = sized(cell.prompt_tokens);
                let bodies = exact::Bodies::uniform(cell, &sized);
                let fits: Vec<exact::Fit> = vec![bodies.base; cell.requests + cell.warmup];
                let pre = workload::prefix(cell.cache, "nonce", &cell.name, 0);
                let first = workload::user_content(&pre, &bodies.body(fits[0]));
                assert!(first.len() >= sized.body.len());
            }
            for w in TurnoverWorkload::of_suite(&suite.turnover) {
                let plan = w.plan(0);
                assert_eq!(plan.requests.len(), w.spec.requests);
            }
        }
        let used = PEAK.load(Ordering::Relaxed) - base;
        worst = worst.max(used);
        assert!(
            used <= BOUND,
            "{} MiB before the first request (bound {} MiB) for a suite the parser accepted:\n{text}",
            used >> 20,
            BOUND >> 20
        );
    }
    eprintln!(
        "{accepted} accepted, {refused} refused; worst {} MiB before the first request",
        worst >> 20
    );
    assert!(accepted >= 25 && refused >= 5, "{accepted} / {refused}");
}

/// A command hook that writes 32 MiB to its standard error and fails: its
/// line ends with the last of it, and what was held while it ran stays
/// far below what it wrote.
#[test]
fn a_hook_writing_without_end_to_its_stderr_is_held_to_its_tail() {
    use infergate::config::plan::Hook;
    use infergate::runtime::hook;
    const WRITTEN: usize = 32 << 20;
    const HELD: usize = 4 << 20;
    let _one = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let h = Hook::Command {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!(
                "head -c {WRITTEN} /dev/zero | tr '\\0' x >&2; echo the last words >&2; exit 1"
            ),
        ],
        timeout: std::time::Duration::from_secs(120),
    };
    let call = hook::Call {
        env: &[],
        json: b"{}",
        stdin: false,
    };
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let line = rt.block_on(hook::run(&h, &call)).unwrap_err();
    let used = PEAK.load(Ordering::Relaxed) - base;
    assert!(line.ends_with("xxxthe last words"), "{line}");
    assert!(
        used < HELD,
        "{} KiB held for {} MiB of standard error",
        used >> 10,
        WRITTEN >> 20
    );
}
