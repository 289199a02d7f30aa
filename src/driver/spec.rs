//! What to run as a runtime process: program, arguments, environment,
//! directory and log file. Plain data shared by the managed and detached
//! process drivers and the run log that watches both.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// What to run and where its output goes.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    pub program: OsString,
    pub args: Vec<OsString>,
    /// Added to (or overriding) the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    pub current_dir: Option<PathBuf>,
    /// stdout and stderr are appended here (created if missing).
    pub log_path: PathBuf,
}

impl ProcessSpec {
    pub fn new(program: impl Into<OsString>, log_path: impl Into<PathBuf>) -> Self {
        ProcessSpec {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
            log_path: log_path.into(),
        }
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The command line as a shell would show it, for logs and errors.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.as_os_str())
            .chain(self.args.iter().map(OsString::as_os_str))
            .map(shell_quote)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn shell_quote(s: &OsStr) -> String {
    let s = s.to_string_lossy();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
