//! The files a report was made from, read and held to what the report
//! and the artifacts recorded of them: sha256s, the suite given.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::artifact::RunArtifact;
use crate::config::suite::Suite;
use crate::measure::runner::ARTIFACT_FILE;
use crate::report::checker::Checker;
use crate::report::{INPUT_RUN_ARTIFACT, Side};
use crate::util::sha256_hex;

/// The suite given with `--suite`, and the sha256 of its text.
pub(super) struct SuiteFile {
    pub(super) suite: Suite,
    pub(super) sha256: String,
}

pub(super) fn load_suite(ck: &mut Checker, path: &Path) -> Option<SuiteFile> {
    match Suite::load(path) {
        Ok((suite, text)) => Some(SuiteFile {
            suite,
            sha256: sha256_hex(text.as_bytes()),
        }),
        Err(e) => {
            ck.push(
                path.display().to_string(),
                format!("{e:#}"),
                "a readable suite",
            );
            None
        }
    }
}

/// The suite file against the sha256 each side's provenance records of the
/// suite it ran (`provenance.<side>.suite_sha256`): a suite edited since
/// (`DIR/suite.toml`, or the one given with `--suite`) is named, whatever
/// the schedule.
pub(super) fn check_suite(
    ck: &mut Checker,
    root: &Map<String, Value>,
    path: &Path,
    suite: &SuiteFile,
) {
    for side in [Side::Baseline, Side::Candidate] {
        let at = format!("provenance.{}.suite_sha256", side.as_str());
        match root
            .get("provenance")
            .and_then(|p| p.get(side.as_str()))
            .and_then(|p| p.get("suite_sha256"))
            .and_then(Value::as_str)
        {
            Some(rec) if rec != suite.sha256 => ck.push(
                path.display().to_string(),
                format!("sha256 {}", suite.sha256),
                format!("{rec}, as {at} records: the suite changed after the run"),
            ),
            Some(_) => {}
            None => ck.limit(format!(
                "{}: the report does not record the {side} suite's sha256 ({at}); the file is taken as the suite it ran",
                path.display()
            )),
        }
    }
}

/// The recorded sha256 of `role` on `side` in the report's inputs.
pub(super) fn recorded_input(
    root: &Map<String, Value>,
    side: Side,
    role: &str,
) -> Option<(usize, String)> {
    let inputs = root.get("provenance")?.get("inputs")?.as_array()?;
    inputs.iter().enumerate().find_map(|(i, x)| {
        (x.get("side")?.as_str()? == side.as_str() && x.get("role")?.as_str()? == role)
            .then(|| Some((i, x.get("sha256")?.as_str()?.to_string())))
            .flatten()
    })
}

/// The file's sha256 against the report's record of it; `root` None: the
/// file is not one compare read (a pass of a pooled side, a block journal).
pub(super) fn check_input(
    ck: &mut Checker,
    root: Option<&Map<String, Value>>,
    side: Side,
    role: &str,
    file: &Path,
    bytes: &[u8],
) {
    let Some(root) = root else {
        return;
    };
    let now = sha256_hex(bytes);
    match recorded_input(root, side, role) {
        Some((i, rec)) if rec != now => ck.push(
            file.display().to_string(),
            format!("sha256 {now}"),
            format!("{rec}, as provenance.inputs[{i}] records: the file changed after compare read it"),
        ),
        Some(_) => {}
        None => ck.limit(format!(
            "the {side} {role}'s sha256: the report does not record it (made by an older compare, or from artifacts in memory)"
        )),
    }
}

/// The run artifact of `dir` (a run directory, or the artifact itself),
/// its sha256 checked against the report's record.
pub(super) fn read_artifact(
    ck: &mut Checker,
    root: Option<&Map<String, Value>>,
    side: Side,
    dir: &Path,
) -> Option<(PathBuf, RunArtifact)> {
    let file = if dir.is_dir() {
        dir.join(ARTIFACT_FILE)
    } else {
        dir.to_path_buf()
    };
    let name = file.display().to_string();
    let bytes = match crate::report::read_regular(&file) {
        Ok(b) => b,
        Err(e) => {
            ck.push(&name, format!("unreadable: {e}"), "a run artifact");
            return None;
        }
    };
    check_input(ck, root, side, INPUT_RUN_ARTIFACT, &file, &bytes);
    match serde_json::from_slice(crate::report::without_bom(&bytes)) {
        Ok(a) => Some((file, a)),
        Err(e) => {
            ck.push(
                format!("{name}:{}:{}", e.line(), e.column()),
                format!("not a run artifact: {e}"),
                "a run artifact",
            );
            None
        }
    }
}
