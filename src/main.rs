//! The `infergate` binary: parse the command line, run it on a tokio
//! runtime, map errors to exit code 2. Everything else is in `cli/`.

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
        Err(e) => {
            // Every message that can carry a URL or connection string goes
            // through the one redaction rule.
            eprintln!("error: {}", infergate::util::redact(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
