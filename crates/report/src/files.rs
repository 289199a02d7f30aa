//! Reading inputs: only regular files, so a FIFO or a device named as an
//! input is refused instead of blocking or never ending. A leaf.

/// "a symbolic link", "a FIFO", … for messages.
pub fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Read a whole input file, refusing anything but a regular file (a FIFO
/// would block the command until killed, a device would never end). The
/// file is opened without blocking and checked by its descriptor, so what is
/// checked is what is read.
pub fn read_regular(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (mut f, len) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    f.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// [`read_regular`], refusing a file that holds more than `limit` bytes.
/// The limit is enforced on what is read, not on the size the file reports
/// (a file may grow while it is read). A file over the limit is an error of
/// kind `FileTooLarge` naming the limit.
pub fn read_regular_at_most(path: &std::path::Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (f, len) = open_regular(path)?;
    let too_large = || {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!("it holds more than {limit} bytes, the most read of such a file"),
        )
    };
    if len > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    f.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// `path` opened without blocking, and its size, when it is a regular file.
fn open_regular(path: &std::path::Path) -> std::io::Result<(std::fs::File, u64)> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let f = opts.open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {}, not a regular file", file_kind(&meta.file_type())),
        ));
    }
    Ok((f, meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_over_the_limit_is_refused_by_what_is_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        assert_eq!(read_regular_at_most(&p, 10).unwrap().len(), 10);
        let e = read_regular_at_most(&p, 9).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("more than 9 bytes"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn a_device_is_refused_before_it_is_read() {
        let e = read_regular_at_most(std::path::Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
    }
}
