//! Fuzzing entry points: one pure function per parser that reads untrusted
//! input, each checking that parser's invariants on arbitrary bytes and
//! panicking when one is broken. "Does not crash" is the least of them.
//!
//! The cargo-fuzz targets under `fuzz/` call these; this module's tests run
//! them over the committed seed corpus (`fuzz/corpus/<target>/`) and every
//! committed finding (`fuzz/regressions/<target>/`), so `cargo test` replays
//! findings on stable without cargo-fuzz. See `docs/fuzzing.md`.
//!
//! One file per target, named after it:
//! - [`sse()`]: [`SseParser`](crate::measure::sse::SseParser) against a
//!   whole-input reference model written from the WHATWG rules, fed whole
//!   and split at many points, under several event size limits.
//! - [`report()`]: bytes read as a v1 report the way `infergate verify`,
//!   `report` and `decide` read one, then verified and rendered.
//! - [`plan()`]: text parsed as a qualification plan, a workload suite (with
//!   its turnover tables) and a comparison policy.
//! - [`compare()`]: bytes read as a run artifact, compared with itself and
//!   with a slower copy; every report `compare` makes verifies clean.
//! - [`dataset()`]: text read as a ShareGPT file, OpenAI request lines and a
//!   Mooncake trace, as a workload cell reads a user's file.
//! - [`names()`]: bytes as names, put in every slot of a report and rendered
//!   in every format against a twin with plain names (the oracle is
//!   `report::hostile`), and given to the suite reader as cell names.
//!
//! `rendered.rs` holds the checks every rendered report must pass, shared
//! by the targets that make or read reports.

mod compare;
mod dataset;
mod names;
mod plan;
mod rendered;
mod report;
mod sse;

pub use compare::compare;
pub use dataset::dataset;
pub use names::names;
pub use plan::plan;
pub use report::report;
pub use sse::sse;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn files(target: &str, kind: &str) -> Vec<PathBuf> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz")
            .join(kind)
            .join(target);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut out: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        out.sort();
        out
    }

    /// Every committed seed and regression input of `target`, through `f`.
    fn replay(target: &str, f: fn(&[u8])) {
        let seeds = files(target, "corpus");
        assert!(!seeds.is_empty(), "no seeds under fuzz/corpus/{target}");
        for p in seeds.iter().chain(&files(target, "regressions")) {
            let data = std::fs::read(p).expect("read corpus file");
            let r = std::panic::catch_unwind(|| f(&data));
            assert!(r.is_ok(), "{target}: {} broke an invariant", p.display());
        }
    }

    #[test]
    fn sse_corpus_and_regressions() {
        replay("sse", sse);
    }

    #[test]
    fn report_corpus_and_regressions() {
        replay("report", report);
    }

    #[test]
    fn compare_corpus_and_regressions() {
        replay("compare", compare);
    }

    #[test]
    fn plan_corpus_and_regressions() {
        replay("plan", plan);
    }

    #[test]
    fn dataset_corpus_and_regressions() {
        replay("dataset", dataset);
    }

    #[test]
    fn names_corpus_and_regressions() {
        replay("names", names);
    }
}
