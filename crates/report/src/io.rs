//! Files: read run artifacts and reports with errors that name file, line and
//! column; write a report atomically.

use std::path::Path;

use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::artifact::RunArtifact;
use crate::atomic::AtomicWriteError;
use crate::design::Look;
pub use crate::files::read_regular;

use super::compare::CompareError;
use super::config_error::ConfigError;
use super::model::{INPUT_JOURNAL, INPUT_RUN_ARTIFACT, InputDigest, Report, Side};
use super::policy::Policy;

type Result<T> = std::result::Result<T, IoError>;

/// Reading, comparing or writing report files; every message names the file.
#[derive(Debug, Error)]
pub enum IoError {
    #[error("cannot read {what} {path}")]
    Read {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Not valid JSON, or not the shape expected: `file:line:column: …`.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot compare {baseline} (baseline) with {candidate} (candidate)")]
    Compare {
        baseline: String,
        candidate: String,
        #[source]
        source: CompareError,
    },
    #[error(transparent)]
    Write(#[from] AtomicWriteError),
}

fn read_json<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T> {
    let bytes = read_regular(path).map_err(|source| IoError::Read {
        what,
        path: path.display().to_string(),
        source,
    })?;
    parse_json(&bytes, &path.display().to_string(), what)
}

/// `bytes` without a leading UTF-8 byte-order mark: editors on Windows
/// write one, JSON (RFC 8259) lets a reader ignore it, serde_json does not.
/// Digests are still taken of the file as it is.
pub fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// JSON from bytes; `name` stands for the file in errors (`name:line:column: …`).
fn parse_json<T: DeserializeOwned>(bytes: &[u8], name: &str, what: &str) -> Result<T> {
    serde_json::from_slice(without_bom(bytes)).map_err(|e| {
        IoError::Invalid(format!(
            "{name}:{}:{}: not a valid {what}: {e}",
            e.line(),
            e.column()
        ))
    })
}

pub fn read_artifact(path: &Path) -> Result<RunArtifact> {
    read_json(path, "run artifact")
}

/// Any v1 report as JSON, for `verify` and the renderers. An object with a
/// key twice is refused: a reader keeps one copy, another reader the other,
/// so "pass" could be shown while "fail" is checked.
pub fn read_report_value(path: &Path) -> Result<serde_json::Value> {
    let bytes = read_regular(path).map_err(|source| IoError::Read {
        what: "JSON report",
        path: path.display().to_string(),
        source,
    })?;
    parse_report_value(&bytes, &path.display().to_string())
}

/// [`read_report_value`] on bytes already in memory; `name` stands for the
/// file in errors.
pub fn parse_report_value(bytes: &[u8], name: &str) -> Result<serde_json::Value> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_slice(without_bom(bytes));
    UniqueKeys
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| {
            IoError::Invalid(format!(
                "{name}:{}:{}: not a valid JSON report: {e}",
                e.line(),
                e.column()
            ))
        })
}

/// JSON into a `serde_json::Value`, as `Value`'s own deserializer builds it,
/// but failing at the first key an object holds twice (`Value` keeps the
/// last silently). One pass: the report is parsed once.
struct UniqueKeys;

impl<'de> serde::de::DeserializeSeed<'de> for UniqueKeys {
    type Value = serde_json::Value;
    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<serde_json::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueKeys {
    type Value = serde_json::Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut s: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = s.next_element_seed(UniqueKeys)? {
            out.push(v);
        }
        Ok(serde_json::Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut m: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut out = serde_json::Map::new();
        while let Some(k) = m.next_key::<String>()? {
            if out.contains_key(&k) {
                return Err(A::Error::custom(format!(
                    "the key {k:?} appears twice in one object"
                )));
            }
            let v = m.next_value_seed(UniqueKeys)?;
            out.insert(k, v);
        }
        Ok(serde_json::Value::Object(out))
    }
}

/// Read both run artifacts and the policy (defaults when `policy` is None),
/// and compare. The report records the sha256 of each artifact and of the
/// journal each names beside it (`provenance.inputs`); a journal that no
/// longer matches its artifact's record is a warning in the report.
pub fn compare_files(baseline: &Path, candidate: &Path, policy: Option<&Path>) -> Result<Report> {
    let policy = match policy {
        Some(p) => Policy::from_file(p)?,
        None => Policy::default(),
    };
    compare_paths(baseline, candidate, &policy)
}

/// [`compare_files`] with a policy already loaded.
pub fn compare_paths(baseline: &Path, candidate: &Path, policy: &Policy) -> Result<Report> {
    compare_paths_at(baseline, candidate, policy, None)
}

/// [`compare_paths`] at `look` of a sequential run (None: a fixed-size
/// run's one look).
pub fn compare_paths_at(
    baseline: &Path,
    candidate: &Path,
    policy: &Policy,
    look: Option<&Look>,
) -> Result<Report> {
    let mut inputs = Vec::new();
    let mut warnings = Vec::new();
    let mut arts = Vec::new();
    for (side, path) in [(Side::Baseline, baseline), (Side::Candidate, candidate)] {
        let bytes = read_regular(path).map_err(|source| IoError::Read {
            what: "run artifact",
            path: path.display().to_string(),
            source,
        })?;
        let art: RunArtifact = parse_json(&bytes, &path.display().to_string(), "run artifact")?;
        inputs.push(input(side, INPUT_RUN_ARTIFACT, path, &bytes));
        if let Some(j) = &art.provenance.journal {
            let jpath = path.parent().unwrap_or(Path::new(".")).join(&j.file);
            if let Ok(jbytes) = read_regular(&jpath) {
                let d = input(side, INPUT_JOURNAL, &jpath, &jbytes);
                if d.sha256 != j.sha256 {
                    warnings.push(format!(
                        "{side} journal {} has sha256 {}, but its run artifact recorded {}: it changed after the run",
                        jpath.display(),
                        d.sha256,
                        j.sha256
                    ));
                }
                inputs.push(d);
            }
        }
        arts.push(art);
    }
    let mut report =
        super::compare::compare_with_look(&arts[0], &arts[1], policy, look).map_err(|source| {
            IoError::Compare {
                baseline: baseline.display().to_string(),
                candidate: candidate.display().to_string(),
                source,
            }
        })?;
    if let Some(p) = report.provenance.as_mut() {
        p.inputs = inputs;
    }
    report.warnings.extend(warnings);
    Ok(report)
}

fn input(side: Side, role: &str, path: &Path, bytes: &[u8]) -> InputDigest {
    InputDigest {
        side,
        role: role.to_string(),
        path: path.display().to_string(),
        sha256: crate::digest::sha256_hex(bytes),
    }
}

/// Write `report` as pretty JSON so that `path` holds either the old file or
/// the whole new one, never a torn write: temp file in the same directory
/// (rename is atomic only within a filesystem), fsync, rename, fsync the directory.
pub fn write_report_atomic(path: &Path, report: &Report) -> Result<()> {
    Ok(crate::atomic::write_json_atomic(path, report)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn parse_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("bad.json");
        fs::write(&p, "{\n  \"schema\": \"x\",\n  oops\n}\n").expect("write");
        let e = read_report_value(&p).expect_err("invalid JSON").to_string();
        assert!(e.contains(&format!("{}:3:3", p.display())), "{e}");
    }

    #[test]
    fn a_key_twice_in_one_object_is_refused_where_it_is() {
        let text = "{\n  \"qualification\": \"pass\",\n  \"cells\": {\"a\": {\"x\": 1, \"x\": 2}},\n  \"qualification\": \"fail\"\n}";
        let e = parse_report_value(text.as_bytes(), "r.json")
            .expect_err("duplicate")
            .to_string();
        assert!(e.starts_with("r.json:3:"), "{e}");
        assert!(e.contains("\"x\" appears twice"), "{e}");
        // The same key in two objects is fine.
        parse_report_value(
            br#"{"a": {"x": 1}, "b": {"x": 1}, "l": [{"x": 1}, {"x": 2}]}"#,
            "ok",
        )
        .unwrap();
    }

    #[test]
    fn bytes_parse_like_files_and_name_the_source() {
        let v = parse_report_value(b"{\"schema\": 1}", "mem.json").expect("valid JSON");
        assert_eq!(v["schema"], 1);
        // Invalid UTF-8 inside a string is a located error, not a panic.
        let e = parse_report_value(b"{\n \"a\": \"\xff\"}", "mem.json")
            .expect_err("invalid UTF-8")
            .to_string();
        assert!(e.starts_with("mem.json:2:"), "{e}");
    }

    #[test]
    fn a_leading_byte_order_mark_is_read_past() {
        let v =
            parse_report_value(b"\xEF\xBB\xBF{\"schema\": 1}", "bom.json").expect("BOM, then JSON");
        assert_eq!(v["schema"], 1);
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("bom.json");
        let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data/runtime-profile-comparison.example.json");
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(fs::read(seed).expect("seed"));
        fs::write(&p, &bytes).expect("write");
        crate::read_report(&p).expect("the seed with a BOM");
        // Only one, and only in front: anywhere else it is not JSON.
        for bad in [
            &b"\xEF\xBB\xBF\xEF\xBB\xBF{}"[..],
            b"{}\xEF\xBB\xBF",
            b" \xEF\xBB\xBF{}",
        ] {
            parse_report_value(bad, "m.json").expect_err("not JSON");
        }
    }
}
