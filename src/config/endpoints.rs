//! `infergate qualify --baseline URL --candidate URL`: the plan and suite of
//! a qualification of two endpoints someone else runs, written from the
//! flags and from what discovery found on both servers. Both files go into
//! the qualification's directory, so `infergate qualify DIR/plan.toml`
//! repeats it exactly; their text depends on the flags and on the servers'
//! context window alone.

use std::fmt::Write as _;

use super::limits::MAX_PROMPT_TOKENS;
use super::plan::{
    Adaptive, BudgetSource, MAX_ADAPTIVE_MAX_REQUESTS, RoundCell, check_round_budget,
    default_window,
};
use super::urls::{Password, check_http_url};

/// The plan's name, and the id's prefix; [`AA_NAME`] when both are one endpoint.
pub const NAME: &str = "endpoints";
pub const AA_NAME: &str = "endpoints-aa";

/// Output tokens of every cell: enough decode steps for a stable decode
/// speed, few enough to keep a round short.
pub const MAX_TOKENS: u64 = 64;
/// Prompt tolerance of every cell, percent.
pub const TOLERANCE_PERCENT: f64 = 5.0;

/// One cell: prompt tokens and requests in flight (`512x1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellShape {
    pub prompt_tokens: u64,
    pub concurrency: usize,
}

impl CellShape {
    pub fn name(&self) -> String {
        format!("p{}-c{}", self.prompt_tokens, self.concurrency)
    }

    /// Tokens one request may need: the prompt at its tolerance, plus the
    /// output (saturating: a need beyond `u64` fits no context).
    pub fn need(&self) -> u64 {
        let prompt = (self.prompt_tokens as f64 * (1.0 + TOLERANCE_PERCENT / 100.0)).ceil() as u64;
        prompt.saturating_add(MAX_TOKENS)
    }
}

/// What the command line asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoints {
    pub baseline: String,
    pub candidate: String,
    /// Environment variable holding the key both endpoints take.
    pub api_key_env: Option<String>,
    /// `--cells`; empty: [`default_cells`] for the servers' context.
    pub cells: Vec<CellShape>,
    pub max_requests: usize,
    pub max_minutes: f64,
    /// `--no-turnover`: no exactness check under churn.
    pub turnover: bool,
}

impl Endpoints {
    /// Both URLs http(s), without a password or a query (they are written
    /// into the plan and the ledger), told apart or the same endpoint.
    pub fn check(&self) -> Result<(), String> {
        for (flag, url) in [
            ("--baseline", &self.baseline),
            ("--candidate", &self.candidate),
        ] {
            check_http_url(url, Password::Refused).map_err(|m| format!("{flag}: {m}"))?;
        }
        if let Some(name) = &self.api_key_env {
            // The name is written into the plan, its comment line too.
            if name.is_empty() || name.contains('=') || name.chars().any(char::is_control) {
                return Err(format!(
                    "--api-key-env {name:?}: not an environment variable's name"
                ));
            }
            match std::env::var(name) {
                Ok(v) if !v.is_empty() => {}
                _ => return Err(format!("--api-key-env {name}: the variable is not set")),
            }
        }
        if !(1..=MAX_ADAPTIVE_MAX_REQUESTS).contains(&self.max_requests) {
            return Err(format!(
                "--max-requests must be from 1 to {MAX_ADAPTIVE_MAX_REQUESTS}; got {}",
                self.max_requests
            ));
        }
        if !(self.max_minutes > 0.0 && self.max_minutes <= 24.0 * 60.0) {
            return Err(format!(
                "--max-minutes must be in (0, 1440]; got {}",
                self.max_minutes
            ));
        }
        self.check_budget()
    }

    /// `--max-requests` holds one adaptive round of every cell (the
    /// default cells' concurrency does not depend on the servers' context,
    /// so this needs no request).
    fn check_budget(&self) -> Result<(), String> {
        let cells = if self.cells.is_empty() {
            default_cells(None)
        } else {
            self.cells.clone()
        };
        let names: Vec<String> = cells.iter().map(CellShape::name).collect();
        let round: Vec<RoundCell> = cells
            .iter()
            .zip(&names)
            .map(|(c, name)| RoundCell {
                name,
                window: default_window(c.concurrency, true),
                window_given: false,
                concurrency: c.concurrency,
                closed_loop: true,
                turns: 1,
            })
            .collect();
        check_round_budget(&round, self.max_requests, BudgetSource::Flag)
    }

    /// The same server on both sides: an A/A run, which measures its noise.
    pub fn is_aa(&self) -> bool {
        self.baseline.trim_end_matches('/') == self.candidate.trim_end_matches('/')
    }

    pub fn name(&self) -> &'static str {
        if self.is_aa() { AA_NAME } else { NAME }
    }
}

/// `--cells 512x1,2048x4`: prompt tokens × concurrency, comma-separated;
/// each cell once, its prompt at most [`MAX_PROMPT_TOKENS`]. The list is
/// written into the plan's first comment line as given, so it holds no
/// control character (a newline would end the comment).
pub fn parse_cells(s: &str) -> Result<Vec<CellShape>, String> {
    if s.chars().any(char::is_control) {
        return Err(format!(
            "--cells {s:?}: holds a control character (a newline?); give e.g. 512x1,2048x4"
        ));
    }
    s.split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            let bad = || format!("--cells: {c:?} is not PROMPTxCONCURRENCY (e.g. 512x1)");
            let (p, n) = c.split_once(['x', 'X']).ok_or_else(bad)?;
            let prompt_tokens: u64 = p.trim().parse().map_err(|_| bad())?;
            let concurrency: usize = n.trim().parse().map_err(|_| bad())?;
            if !(1..=MAX_PROMPT_TOKENS).contains(&prompt_tokens)
                || concurrency == 0
                || concurrency > 1024
            {
                return Err(format!(
                    "--cells: {c:?}: prompt tokens must be from 1 to {MAX_PROMPT_TOKENS} and concurrency from 1 to 1024"
                ));
            }
            Ok(CellShape {
                prompt_tokens,
                concurrency,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| {
            if v.is_empty() {
                return Err("--cells: no cell given".into());
            }
            // Each cell's name is its shape, and a suite names each cell once.
            match v.iter().enumerate().find(|(i, c)| v[..*i].contains(c)) {
                Some((_, c)) => Err(format!(
                    "--cells: {}x{} is given twice",
                    c.prompt_tokens, c.concurrency
                )),
                None => Ok(v),
            }
        })
}

/// The cells when none are given: a short prompt one at a time (TTFT and
/// decode speed undisturbed) and a longer one four at a time (batching),
/// each as large as the context allows up to 512 and 2048 tokens.
pub fn default_cells(context: Option<u64>) -> Vec<CellShape> {
    let fit = |want: u64| match context {
        // Half of what the output and the tolerance leave; 100 tokens keep
        // the chat template and a sized body above any server's overhead.
        Some(ctx) => want
            .min(
                (ctx.saturating_sub(MAX_TOKENS) as f64 / (1.0 + TOLERANCE_PERCENT / 100.0) / 2.0)
                    as u64,
            )
            .max(100),
        None => want,
    };
    let mut cells = vec![
        CellShape {
            prompt_tokens: fit(512),
            concurrency: 1,
        },
        CellShape {
            prompt_tokens: fit(2048),
            concurrency: 4,
        },
    ];
    cells.dedup();
    cells
}

/// Each cell against the context one request may use on both servers
/// (the smaller of the two); the first that does not fit is an error
/// naming it, before any request. `given`: the user passed `--cells`; the
/// defaults are not blamed on a flag the user never gave.
pub fn check_fit(cells: &[CellShape], context: Option<u64>, given: bool) -> Result<(), String> {
    let Some(ctx) = context else { return Ok(()) };
    let Some(c) = cells.iter().find(|c| c.need() > ctx) else {
        return Ok(());
    };
    let need = format!(
        "up to {} prompt tokens plus {MAX_TOKENS} output tokens = {} > the {ctx} tokens per request the servers give",
        c.need() - MAX_TOKENS,
        c.need()
    );
    Err(if given {
        format!("--cells {}x{}: {need}", c.prompt_tokens, c.concurrency)
    } else {
        format!(
            "the servers give {ctx} tokens per request, too few for the smallest cell infergate would choose ({}x{}: {need}); nothing can be measured on them",
            c.prompt_tokens, c.concurrency
        )
    })
}

/// The plan: both endpoints as external runtimes, the shared defaults.
pub fn plan_text(e: &Endpoints, command: &str) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "# Written by: {command}");
    let _ = writeln!(
        t,
        "# Repeat exactly: infergate qualify THIS-DIRECTORY/plan.toml"
    );
    if e.is_aa() {
        let _ = writeln!(
            t,
            "# Baseline and candidate are one endpoint: an A/A run. It measures this\n\
             # endpoint's noise; a pass is what it should show."
        );
    }
    let _ = writeln!(
        t,
        "# The defaults any plan gets: an interleaved schedule (each cell's requests\n\
         # alternate between the endpoints in blocks, so drift hits both alike) and\n\
         # adaptive rounds of blocks until the gate decides or the budget is spent."
    );
    let _ = writeln!(t, "name = {:?}", e.name());
    let _ = writeln!(t, "suite = \"suite.toml\"");
    let _ = writeln!(t, "schedule = \"interleaved\"\n");
    if !e.turnover {
        // Recorded in the runs, so the report says the turnover gates did
        // not run rather than failing a candidate that had none to run.
        let _ = writeln!(
            t,
            "# --no-turnover: no exactness check under churn; the turnover gates do not run\n\
             skip_turnover = true\n"
        );
    }
    let _ = writeln!(t, "[adaptive]\nenabled = true");
    let _ = writeln!(
        t,
        "max_requests = {}    # per side per cell",
        e.max_requests
    );
    let _ = writeln!(t, "max_minutes = {}\n", e.max_minutes);
    for (label, url) in [("baseline", &e.baseline), ("candidate", &e.candidate)] {
        let _ = writeln!(t, "[{label}]\ndriver = \"external\"\nurl = {url:?}");
        if let Some(k) = &e.api_key_env {
            let _ = writeln!(t, "api_key_env = {k:?}");
        }
        t.push('\n');
    }
    t
}

/// The suite: the cells, and (unless `--no-turnover`) a turnover workload
/// whose every output under churn must equal the endpoint's own answer to
/// the same prompt alone.
pub fn suite_text(e: &Endpoints, cells: &[CellShape]) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "name = {:?}", e.name());
    let _ = writeln!(
        t,
        "description = \"Cells and a turnover check for two endpoints, from infergate qualify --baseline --candidate\"\n"
    );
    for (i, c) in cells.iter().enumerate() {
        let warmup = c.concurrency.max(2);
        let _ = writeln!(
            t,
            "[[cell]]\nname = {:?}\nprompt_tokens = {}\ntolerance_percent = {TOLERANCE_PERCENT}\n\
             max_tokens = {MAX_TOKENS}\nconcurrency = {}\nrequests = {}\nwarmup = {warmup}\n\
             cache = \"unique\"\nseed = {}\n",
            c.name(),
            c.prompt_tokens,
            c.concurrency,
            c.concurrency.saturating_mul(4).max(12),
            i + 1
        );
    }
    if e.turnover {
        let _ = writeln!(
            t,
            "[[turnover]]\nname = \"words-c4\"\ncontract = \"reference\"\nprompt = \"words\"\n\
             words = 5\nrequests = 40\nconcurrency = 4\nrepeats = 1\nseed = 1"
        );
    }
    t
}

/// The `[adaptive]` defaults a plan gets, for the help text.
pub fn default_budget() -> (usize, f64) {
    let a = Adaptive::default();
    (a.max_requests, a.max_minutes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::Plan;
    use crate::config::suite::LoadedSuite;

    fn endpoints(b: &str, c: &str) -> Endpoints {
        let (max_requests, max_minutes) = default_budget();
        Endpoints {
            baseline: b.into(),
            candidate: c.into(),
            api_key_env: None,
            cells: Vec::new(),
            max_requests,
            max_minutes,
            turnover: true,
        }
    }

    #[test]
    fn cells_read_as_prompt_by_concurrency_and_bad_ones_are_named() {
        assert_eq!(
            parse_cells("512x1, 2048X4").unwrap(),
            [
                CellShape {
                    prompt_tokens: 512,
                    concurrency: 1
                },
                CellShape {
                    prompt_tokens: 2048,
                    concurrency: 4
                }
            ]
        );
        for bad in ["512", "x4", "512x0", "0x1", "512x1,abc", ""] {
            assert!(parse_cells(bad).is_err(), "{bad}");
        }
        assert!(parse_cells("1x2000").unwrap_err().contains("1 to 1024"));
        // What would not read back from the plan or suite written: refused
        // here, naming the flag.
        for (bad, why) in [
            ("64x1\n", "control character"),
            ("64x1,\r128x2", "control character"),
            (
                "18446744073709551553x1",
                "prompt tokens must be from 1 to 2000000",
            ),
            ("2000001x1", "prompt tokens must be from 1 to 2000000"),
            ("64x1, 128x2,64X1", "64x1 is given twice"),
        ] {
            let e = parse_cells(bad).unwrap_err();
            assert!(e.starts_with("--cells") && e.contains(why), "{bad:?}: {e}");
        }
        assert!(parse_cells("2000000x1").is_ok());
    }

    #[test]
    fn a_cells_need_saturates_and_never_fits_by_wrapping() {
        let huge = CellShape {
            prompt_tokens: u64::MAX - 62,
            concurrency: 1,
        };
        assert_eq!(huge.need(), u64::MAX);
        assert!(check_fit(&[huge], Some(4096), true).is_err());
    }

    #[test]
    fn a_budget_a_plan_cannot_hold_is_refused_naming_the_flag() {
        let mut e = endpoints("http://127.0.0.1:1", "http://127.0.0.1:2");
        e.max_requests = 9_223_372_036_854_775_808;
        let msg = e.check().unwrap_err();
        assert!(
            msg.starts_with("--max-requests must be from 1 to 10000000"),
            "{msg}"
        );
        // One round of the default 2048x4 cell is 2 blocks of 8: 16 per side;
        // at concurrency 2 a block is 4 (at least 4), a round 8.
        e.max_requests = 10;
        let msg = e.check().unwrap_err();
        assert!(
            msg.starts_with("--max-requests 10 (requests per side per cell) cannot hold one adaptive round of cell p2048-c4: a round is 2 blocks of 8 requests per side")
                && msg.ends_with("Give --max-requests 16 or more, or cells at concurrency 2 or less (--cells PROMPTx2)"),
            "{msg}"
        );
        e.cells = parse_cells("64x64").unwrap();
        let msg = e.check().unwrap_err();
        assert!(
            msg.contains("cell p64-c64: a round is 2 blocks of 128 requests per side (the default window at concurrency 64) = 256"),
            "{msg}"
        );
        e.max_requests = 256;
        e.check().unwrap();
        e.cells = Vec::new();
        e.max_requests = MAX_ADAPTIVE_MAX_REQUESTS;
        e.check().unwrap();
        e.max_minutes = f64::NAN;
        assert!(e.check().unwrap_err().starts_with("--max-minutes"));
    }

    #[test]
    fn default_cells_shrink_to_the_context_and_a_given_cell_too_big_is_named() {
        let big = default_cells(Some(131_072));
        assert_eq!(
            big.iter().map(CellShape::name).collect::<Vec<_>>(),
            ["p512-c1", "p2048-c4"]
        );
        let small = default_cells(Some(1024));
        assert!(small.iter().all(|c| c.need() <= 1024), "{small:?}");
        assert!(check_fit(&small, Some(1024), false).is_ok());
        let e = check_fit(&default_cells(Some(1)), Some(1), false).unwrap_err();
        assert!(
            !e.contains("--cells") && e.contains("the servers give 1 tokens per request"),
            "{e}"
        );
        let e = check_fit(&parse_cells("4096x4").unwrap(), Some(4096), true).unwrap_err();
        assert!(
            e.starts_with("--cells 4096x4: up to 4301 prompt tokens plus 64"),
            "{e}"
        );
    }

    #[test]
    fn the_written_plan_and_suite_read_back_as_any_plan_does() {
        let dir = tempfile::tempdir().unwrap();
        let mut e = endpoints("http://127.0.0.1:8000", "http://127.0.0.1:8001/");
        e.api_key_env = Some("INFERGATE_ENDPOINTS_TEST_KEY".into());
        let cells = default_cells(Some(4096));
        std::fs::write(dir.path().join("suite.toml"), suite_text(&e, &cells)).unwrap();
        let plan_path = dir.path().join("plan.toml");
        std::fs::write(&plan_path, plan_text(&e, "infergate qualify …")).unwrap();
        let plan = Plan::load(&plan_path).unwrap();
        assert_eq!(plan.name, NAME);
        assert!(plan.adaptive.enabled);
        assert_eq!(
            (plan.adaptive.max_requests, plan.adaptive.max_minutes),
            default_budget()
        );
        assert_eq!(
            plan.baseline.api_key_env.as_deref(),
            Some("INFERGATE_ENDPOINTS_TEST_KEY")
        );
        let suite = LoadedSuite::read(&plan.suite).unwrap();
        assert_eq!(suite.suite.cells.len(), 2);
        assert_eq!(suite.suite.turnover.len(), 1);
        assert!(!plan.skip_turnover);
        // `--no-turnover`: the plan skips it, so the runs record the skip.
        e.turnover = false;
        std::fs::write(&plan_path, plan_text(&e, "infergate qualify …")).unwrap();
        assert!(Plan::load(&plan_path).unwrap().skip_turnover);
        // One endpoint twice is an A/A run, and its files say so.
        let aa = endpoints("http://127.0.0.1:8000/", "http://127.0.0.1:8000");
        assert!(aa.is_aa());
        assert!(plan_text(&aa, "x").contains("an A/A run"));
        assert_eq!(aa.name(), AA_NAME);
    }

    #[test]
    fn urls_that_are_not_http_or_hold_a_password_are_refused_naming_the_flag() {
        let e = endpoints("ftp://127.0.0.1/", "http://127.0.0.1:1");
        assert!(e.check().unwrap_err().starts_with("--baseline: "));
        let e = endpoints("http://127.0.0.1:1", "http://u:secret@127.0.0.1:2");
        let msg = e.check().unwrap_err();
        assert!(
            msg.starts_with("--candidate: ") && !msg.contains("secret"),
            "{msg}"
        );
        let mut e = endpoints("http://127.0.0.1:1", "http://127.0.0.1:2");
        e.api_key_env = Some("INFERGATE_ENDPOINTS_SURELY_UNSET".into());
        assert!(e.check().unwrap_err().contains("is not set"));
        e.api_key_env = Some("KEY\nX".into());
        assert!(
            e.check()
                .unwrap_err()
                .contains("not an environment variable's name")
        );
        // A newline the URL parser would drop is refused, not written.
        for (b, c, flag) in [
            ("http://127.0.0.1:1\n", "http://127.0.0.1:1", "--baseline: "),
            ("http://127.0.0.1:1", " http://127.0.0.1:1", "--candidate: "),
        ] {
            let msg = endpoints(b, c).check().unwrap_err();
            assert!(
                msg.starts_with(flag) && msg.contains("control character"),
                "{msg}"
            );
        }
    }
}
