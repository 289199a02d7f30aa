//! Final artifacts are written atomically: a reader sees the old file or the
//! whole new one, never a torn one.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::files::file_kind;

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
///
/// `path` must be absent or a regular file: the rename would replace a
/// device node, a FIFO, a socket or a symbolic link with a regular file, so
/// those are refused. An existing file keeps its mode (and, where the
/// process may set it, its owner).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let existing = existing_regular(path)?;
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
        if let Some(meta) = &existing {
            keep_mode_and_owner(&f, meta, &tmp)?;
        }
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

/// The metadata of `path` if it is a regular file, None if it is absent;
/// an error for anything else.
fn existing_regular(path: &Path) -> Result<Option<std::fs::Metadata>> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AtomicWriteError {
            op: "inspecting",
            path: path.display().to_string(),
            source,
        }),
        Ok(m) if m.is_file() => Ok(Some(m)),
        Ok(m) => Err(AtomicWriteError {
            op: "refusing to replace",
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "it is {}, not a regular file; outputs are written only as regular files: name a new path",
                    file_kind(&m.file_type())
                ),
            ),
        }),
    }
}

/// Give the temporary file the replaced file's permissions and owner, so
/// an atomic write changes the content only. Setting the owner needs
/// privilege unless it is already ours; where it is refused, the file is
/// left ours (the write still happens, as a plain write would).
fn keep_mode_and_owner(f: &std::fs::File, old: &std::fs::Metadata, tmp: &Path) -> Result<()> {
    at(
        f.set_permissions(old.permissions()),
        "setting the mode of",
        tmp,
    )?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mine = f.metadata().map(|m| (m.uid(), m.gid())).ok();
        if mine != Some((old.uid(), old.gid())) {
            let _ = std::os::unix::fs::fchown(f, Some(old.uid()), Some(old.gid()));
        }
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

    #[cfg(unix)]
    #[test]
    fn only_a_regular_file_is_replaced_and_it_keeps_its_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept.json");
        std::fs::write(&kept, "old").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&kept, b"new").unwrap();
        assert_eq!(std::fs::read(&kept).unwrap(), b"new");
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);

        let target = dir.path().join("target.json");
        std::fs::write(&target, "target").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        for (p, kind) in [
            (&link, "a symbolic link"),
            (&fifo, "a FIFO"),
            (&sub, "a directory"),
            (&std::path::PathBuf::from("/dev/null"), "a character device"),
        ] {
            let e = write_atomic(p, b"x").unwrap_err();
            let msg = format!("{e}: {}", e.source);
            assert!(msg.contains(kind), "{msg}");
            assert!(msg.contains("not a regular file"), "{msg}");
        }
        // Nothing replaced: the link still points at its untouched target.
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"target");
        use std::os::unix::fs::FileTypeExt;
        assert!(
            std::fs::symlink_metadata("/dev/null")
                .unwrap()
                .file_type()
                .is_char_device()
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            5,
            "no temp file left"
        );
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
