//! The `infergate` binary: parse the command line, run it on a tokio
//! runtime, map errors to exit code 2 (a closed standard output to a quiet
//! SIGPIPE). Everything else is in `cli/`.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(cli::dispatch(cli.cmd)) {
        Ok(code) => code,
        Err(e) if e.chain().any(|c| c.is::<cli::StdoutClosed>()) => reader_gone(),
        Err(e) => {
            // Every message that can carry a URL or connection string goes
            // through the one redaction rule.
            eprintln!("error: {}", infergate::util::redact(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}

/// Standard output's reader has gone: end as a Unix tool does when it
/// writes to a pipe nobody reads, by SIGPIPE, with nothing on standard
/// error (Rust ignores SIGPIPE, so the write failed instead).
fn reader_gone() -> ExitCode {
    // SAFETY: restoring a signal's default disposition and raising it; no
    // handler of ours is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    // SIGPIPE blocked: the status a shell shows for it.
    ExitCode::from(128 + libc::SIGPIPE as u8)
}
