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
}
