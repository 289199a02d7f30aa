//! `verify REPORT --runs BASE_DIR CAND_DIR`: the report made again from the
//! run directories it came from. Each run artifact and journal must have
//! the sha256 the report (`provenance.inputs`) and the artifact
//! (`provenance.journal`) recorded; each journal must hold exactly one
//! record per request; each cell is aggregated again from the journal and
//! must equal the artifact's; with the suite, each turnover run is judged
//! again from its journaled answers. Then `compare` runs on the rebuilt
//! artifacts with what the report was made with (its policy, method and
//! look), and every derived field must agree bit for bit. An edited
//! journal line is named by file and line.

mod cells;
mod inputs;
mod interleaved;
mod run_journal;
mod side;
mod turnover;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use self::inputs::{check_suite, load_suite};
use self::side::{pool_passes, rebuild_side};
use crate::artifact::RunArtifact;
use crate::report::Side;
use crate::report::checker::{Checker, Disagreement};
use crate::report::verify::{self as report_verify, Verification};

/// The run directories (or run artifact files) of a report, and optionally
/// the suite they ran, to judge turnover answers again. A side of several
/// passes (`qualify` with repeats) lists each pass directory in order; they
/// are pooled as `qualify` pools them, which needs the suite.
#[derive(Debug, Clone)]
pub struct RunDirs {
    pub baseline: Vec<PathBuf>,
    pub candidate: Vec<PathBuf>,
    pub suite: Option<PathBuf>,
}

/// The report and run directories of a qualification directory, as
/// `qualify` wrote them: an interleaved side's pooled `<side>.json`, or each
/// side's pass directories in order; the suite the plan named.
pub fn qualification_dirs(dir: &Path) -> anyhow::Result<(PathBuf, RunDirs)> {
    use crate::config::plan::{BASELINE, CANDIDATE, PlanSchedule};
    use crate::runtime::state::{QualificationFile, REPORT_FILE, pass_dir, side_artifact};
    let plan = QualificationFile::read(dir)?.load_plan(dir)?;
    let side = |label: &str| match plan.schedule {
        PlanSchedule::Interleaved => vec![side_artifact(dir, label)],
        PlanSchedule::Alternating => (1..=plan.repeats)
            .map(|n| pass_dir(dir, label, n))
            .collect(),
    };
    Ok((
        dir.join(REPORT_FILE),
        RunDirs {
            baseline: side(BASELINE),
            candidate: side(CANDIDATE),
            suite: Some(plan.suite.clone()),
        },
    ))
}

/// A qualification's report (as JSON) against the runs in its directory
/// `dir`: what `infergate verify DIR` checks, and what `decide` requires.
pub fn check_qualification(report: &Value, dir: &Path) -> anyhow::Result<Verification> {
    let (_, dirs) = qualification_dirs(dir)?;
    Ok(verify_runs(report, &dirs))
}

/// [`crate::report::verify_report`], then the report made again from its runs.
pub fn verify_runs(report: &Value, dirs: &RunDirs) -> Verification {
    let mut v = crate::report::verify_report(report);
    v.unchecked.retain(|u| !u.contains("--runs"));
    let Some(root) = report.as_object() else {
        return v;
    };
    let mut ck = Checker::default();
    let suite = dirs.suite.as_deref().and_then(|p| load_suite(&mut ck, p));
    if let (Some(path), Some(s)) = (dirs.suite.as_deref(), &suite) {
        check_suite(&mut ck, root, path, s);
    }
    let mut arts = Vec::new();
    for (side, passes) in [
        (Side::Baseline, &dirs.baseline),
        (Side::Candidate, &dirs.candidate),
    ] {
        let rebuilt = match passes.as_slice() {
            [dir] => rebuild_side(&mut ck, Some(root), side, dir, suite.as_ref()),
            _ => pool_passes(
                &mut ck,
                root,
                side,
                passes,
                dirs.suite.as_deref(),
                suite.as_ref(),
            ),
        };
        arts.push(rebuilt);
    }
    if let [Some(b), Some(c)] = arts.as_slice() {
        check_capacity_schedule(&mut ck, b, c);
        recompute_from_runs(&mut ck, root, b, c);
    }
    // One file can disagree in several ways: distinct findings are all kept.
    let key = |d: &Disagreement| (d.path.clone(), d.found.clone(), d.expected.clone());
    let mut seen: BTreeSet<_> = v.disagreements.iter().map(key).collect();
    v.disagreements
        .extend(ck.out.into_iter().filter(|d| seen.insert(key(d))));
    for u in ck.unchecked {
        if !v.unchecked.contains(&u) {
            v.unchecked.push(u);
        }
    }
    v
}

/// Each capacity cell's two searches, as rebuilt from the journals, held
/// to the qualification's one level schedule (`capacity::shared::replay`):
/// both sides measured at every step, at the level the schedule names.
fn check_capacity_schedule(ck: &mut Checker, b: &RunArtifact, c: &RunArtifact) {
    use crate::report::capacity::{CapacityRun, Segment, run::rule_of, shared};
    let flat = |r: &CapacityRun| -> Vec<(f64, Segment)> {
        r.levels
            .iter()
            .flat_map(|l| l.segments.iter().map(move |s| (l.load, s.counts)))
            .collect()
    };
    for bc in &b.cells {
        let Some(cc) = c.cells.iter().find(|c| c.name == bc.name) else {
            continue;
        };
        let (Some(br), Some(cr)) = (&bc.capacity, &cc.capacity) else {
            continue;
        };
        let rule = rule_of(&br.spec, br.min_attainment);
        if let Err(why) = shared::replay(&rule, &flat(br), &flat(cr)) {
            ck.push(
                format!("cells.{}.capacity", bc.name),
                why,
                "both searches on the one level schedule `capacity::shared::next` names",
            );
        }
    }
}

/// The report made with `compare` from the rebuilt artifacts and what the
/// report was made with (its policy, method and look), against the report.
fn recompute_from_runs(
    ck: &mut Checker,
    root: &Map<String, Value>,
    b: &RunArtifact,
    c: &RunArtifact,
) {
    let made = match report_verify::made_with(root) {
        Ok(m) => m,
        Err(why) => {
            ck.limit(format!("the report made again from its runs: {why}"));
            return;
        }
    };
    match made.compare(b, c) {
        Ok(r) => {
            let mut sub = Checker::default();
            report_verify::expect_report(&mut sub, root, &r);
            for mut d in sub.out {
                d.expected = format!("{} (made again from the run directories)", d.expected);
                ck.out.push(d);
            }
        }
        Err(e) => ck.push("cells", "runs that compare refuses".into(), e.to_string()),
    }
}
