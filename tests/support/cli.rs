//! The `infergate` binary as the tests run it, and what it printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Its standard output, then its standard error.
pub fn printed(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `infergate qualify plan.toml` in `dir`, into `out/q` with the ledger
/// `L.sqlite` beside it (none from the environment): its exit code and
/// all it printed.
pub fn qualify_q(dir: &Path) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .current_dir(dir)
        .args([
            "qualify",
            "plan.toml",
            "--ledger",
            "L.sqlite",
            "--out",
            "out",
            "--id",
            "q",
        ])
        .env_remove("INFERGATE_LEDGER")
        .output()
        .unwrap();
    (o.status.code(), printed(&o))
}

/// `infergate verify DIR`: whether it agreed, and all it printed.
pub fn verify(dir: &Path) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_infergate"))
        .arg("verify")
        .arg(dir)
        .output()
        .unwrap();
    (o.status.success(), printed(&o))
}

/// [`qualify_q`], then the report it wrote (no report is a panic naming the
/// exit code and all it printed): the exit code, all it printed, the
/// report and the qualification's directory.
pub fn qualify_report(dir: &Path) -> (Option<i32>, String, serde_json::Value, PathBuf) {
    let (code, all) = qualify_q(dir);
    let qdir = dir.join("out").join("q");
    let report = std::fs::read(qdir.join("report.json"))
        .unwrap_or_else(|e| panic!("no report ({e}): exit {code:?}\n{all}"));
    (code, all, serde_json::from_slice(&report).unwrap(), qdir)
}
