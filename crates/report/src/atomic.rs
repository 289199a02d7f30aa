//! Final artifacts are written atomically: a reader sees the old file or the
//! whole new one, never a torn one.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// A failed atomic write: what was being done, to which file, and why.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}")]
pub struct AtomicWriteError {
    pub op: &'static str,
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

type Result<T> = std::result::Result<T, AtomicWriteError>;

/// Attach `op` and `path` to an I/O error.
fn at<T>(r: std::io::Result<T>, op: &'static str, path: &Path) -> Result<T> {
    r.map_err(|source| AtomicWriteError {
        op,
        path: path.display().to_string(),
        source,
    })
}

/// Write `bytes` to a temporary file beside `path`, fsync it, then rename over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    at(std::fs::create_dir_all(dir), "creating", dir)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per process and call, so concurrent writers never share a temp file.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.tmp.{}.{seq}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = at(std::fs::File::create(&tmp), "creating", &tmp)?;
        at(f.write_all(bytes), "writing", &tmp)?;
        at(f.sync_all(), "syncing", &tmp)?;
        at(std::fs::rename(&tmp, path), "renaming onto", path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    // Persist the rename itself; not every platform can open a directory.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Serialize to pretty JSON and write atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|e| AtomicWriteError {
        op: "serializing JSON for",
        path: path.display().to_string(),
        source: e.into(),
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

/// A command asked to write over one of its own inputs.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to write {out}: it is the {what} this command reads ({input}); write the output to another path"
)]
pub struct OverwritesInput {
    pub out: String,
    pub what: String,
    pub input: String,
}

/// Where `p` is, for comparing: the canonical path when it exists, else its
/// canonical parent joined with its name (a file not written yet), else `p`
/// made absolute.
fn resolved(p: &Path) -> std::path::PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let parent = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (std::fs::canonicalize(parent), p.file_name()) {
        (Ok(d), Some(name)) => d.join(name),
        _ => std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
    }
}

/// Whether two paths name one file: the same resolved path, or (both
/// existing) the same device and inode, which also catches hard links.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if resolved(a) == resolved(b) {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.is_file() && x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    false
}

/// Refuse, before anything is written, an output that is one of the
/// command's inputs (`(what, path)`, e.g. `("baseline run artifact", …)`).
/// Every writer of a command-line output calls this first.
pub fn refuse_overwriting_inputs(
    out: &Path,
    inputs: &[(&str, &Path)],
) -> std::result::Result<(), OverwritesInput> {
    match inputs.iter().find(|(_, input)| same_file(out, input)) {
        Some((what, input)) => Err(OverwritesInput {
            out: out.display().to_string(),
            what: what.to_string(),
            input: input.display().to_string(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_atomic(&p, b"old").unwrap();
        write_atomic(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_output_naming_an_input_is_refused_however_it_is_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let b = dir.path().join("b");
        std::fs::create_dir_all(&b).unwrap();
        let input = b.join("run.json");
        std::fs::write(&input, "{}").unwrap();
        let via_dot = b.join(".").join("run.json");
        let via_parent = b.join("..").join("b").join("run.json");
        let link = dir.path().join("hard.json");
        std::fs::hard_link(&input, &link).unwrap();
        for out in [&input, &via_dot, &via_parent, &link] {
            let e = refuse_overwriting_inputs(out, &[("baseline run artifact", &input)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("refusing to write"), "{e}");
            assert!(e.contains("baseline run artifact"), "{e}");
        }
        // A path that does not exist yet, and a sibling, are fine.
        let fresh = b.join("report.json");
        assert!(refuse_overwriting_inputs(&fresh, &[("input", &input)]).is_ok());
        let nowhere = dir.path().join("no/such/dir/r.json");
        assert!(refuse_overwriting_inputs(&nowhere, &[("input", &input)]).is_ok());
    }
}
