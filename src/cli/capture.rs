//! `infergate capture`: the flags, the stop signals, the summary printed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};

use infergate::capture::{Capture, Config};

#[derive(clap::Args)]
pub struct CaptureArgs {
    /// Address to listen on, e.g. 127.0.0.1:9000.
    #[arg(long, value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Base URL of the runtime to forward to, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL")]
    pub upstream: String,
    /// Directory for trace.jsonl and summary.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Stop after this many recorded requests (later ones pass through unrecorded).
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u64>,
    /// Stop after this long: 90s, 10m, 2h (a bare number is seconds).
    #[arg(long, value_name = "D", value_parser = duration)]
    pub duration: Option<Duration>,
    /// The model's tokenizer.json: prompts' blocks cut from tokens, and
    /// lengths counted when the answer reports none.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// Tokens per hash block.
    #[arg(long, default_value_t = 512, value_name = "N")]
    pub block_tokens: u64,
    /// Write the prompts and answers into the trace too (`--keep text`).
    #[arg(long, value_name = "WHAT", value_parser = ["text"])]
    pub keep: Option<String>,
}

fn duration(s: &str) -> Result<Duration, String> {
    let (n, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = n
        .parse()
        .map_err(|_| format!("{s:?}: expected e.g. 90s, 10m, 2h"))?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: the unit is s, m or h")),
    };
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// SIGINT or SIGTERM.
async fn signalled() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => drop(tokio::signal::ctrl_c().await),
    }
}

pub async fn main_capture(a: CaptureArgs) -> Result<ExitCode> {
    if a.max_requests == Some(0) {
        bail!("--max-requests must be at least 1");
    }
    let mut cfg = Config::new(a.listen, a.upstream, a.out);
    cfg.max_requests = a.max_requests;
    cfg.duration = a.duration;
    cfg.tokenizer = a.tokenizer;
    cfg.block_tokens = a.block_tokens;
    cfg.keep_text = a.keep.is_some();
    let out = cfg.out.clone();
    let capture = Capture::bind(cfg).await?;
    eprintln!(
        "capture: listening on {}, recording into {}; stop with Ctrl-C",
        capture.local_addr()?,
        out.join("trace.jsonl").display()
    );
    let s = capture.run(signalled()).await?;
    eprintln!(
        "capture: stopped by {}: {} requests recorded ({} chat, {} completions, {} embeddings), {} passed through, {} lines written, {} dropped, {} block ids evicted, lengths {}{}; {}",
        s.stopped_by,
        s.requests,
        s.by_endpoint.get("chat").unwrap_or(&0),
        s.by_endpoint.get("completions").unwrap_or(&0),
        s.by_endpoint.get("embeddings").unwrap_or(&0),
        s.passthrough + s.over_bound,
        s.lines,
        s.dropped_lines,
        s.evicted_blocks,
        if s.lengths_estimated {
            format!("estimated on {} lines", s.estimated_lines)
        } else {
            "all reported or counted".into()
        },
        if s.keep_text {
            ", text kept (--keep text)"
        } else {
            ""
        },
        out.join("summary.json").display()
    );
    if let Some(e) = &s.write_error {
        eprintln!(
            "capture: the trace could not be written ({e}): {} lines unwritten; traffic was passed on throughout",
            s.unwritten_lines
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_their_unit_and_nonsense_is_named() {
        assert_eq!(duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(duration("45"), Ok(Duration::from_secs(45)));
        assert!(duration("5d").unwrap_err().contains("s, m or h"));
        assert!(duration("m").unwrap_err().contains("expected"));
    }
}
