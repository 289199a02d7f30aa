//! How many times this process read each input file (suites, gate
//! policies, journals), for the tests that hold a qualification to reading
//! its suite and policy once and pooling its blocks in memory
//! (`tests/qualify.rs`). Behind the `read-counts` feature: never in a
//! release build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

static READS: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

/// Count one read of `path`.
pub fn count(path: &Path) {
    READS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .entry(path.to_path_buf())
        .and_modify(|n| *n += 1)
        .or_insert(1);
}

/// How many times `path` (as given) has been read in this process.
pub fn reads(path: &Path) -> usize {
    READS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(path)
        .copied()
        .unwrap_or(0)
}
