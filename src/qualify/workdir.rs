//! Where a qualification lives: its id, its directory (new, or the one the
//! ledger names when resuming) and the plan it runs, recorded once.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::outcome::{CandidateImage, Options};
use crate::config::plan::{BASELINE, CANDIDATE, DefaultWindow, Plan, PlanSchedule};
use crate::measure::pool::Blocks;
use crate::runtime::ctx::Ctx;
use crate::runtime::ledger::{Entry, Location, Status};
use crate::runtime::state::{
    PLAN_COPY, QUALIFICATION_FILE, QUALIFICATION_SCHEMA, QualificationFile, interleaved_dir,
};

/// The plan, checked against the options it is run with.
pub(super) fn load_plan(plan_path: &Path, opts: &Options) -> Result<Plan> {
    let plan = match &opts.candidate_image {
        None => Plan::load(plan_path)?,
        Some(c) => {
            let plan = Plan::load(plan_path)?;
            let mut text = Plan::with_image(&plan.text, plan_path, CANDIDATE, &c.pinned)?;
            if let Some((image, _)) = &c.baseline {
                text = Plan::with_image(&text, plan_path, BASELINE, image)?;
            }
            Plan::parse(&text, plan_path, &plan.base_dir)?
        }
    };
    if opts.adaptive && plan.schedule != PlanSchedule::Interleaved {
        bail!(
            "--adaptive adds interleaved blocks, but {} runs schedule = \"{}\"",
            plan_path.display(),
            plan.schedule.as_str()
        );
    }
    Ok(plan)
}

/// Where the qualification lives and whether it is adaptive: from the
/// ledger's plan entry when resuming (the mode it began with: a look taken is
/// a look spent), else a new, empty directory.
pub(super) fn resolve_out_dir(
    plan: &Plan,
    plan_path: &Path,
    opts: &Options,
    id: &str,
    entries: &[Entry],
) -> Result<(PathBuf, bool)> {
    let mut adaptive =
        plan.schedule == PlanSchedule::Interleaved && (plan.adaptive.enabled || opts.adaptive);
    if entries.is_empty() {
        let root = opts
            .out_root
            .clone()
            .unwrap_or_else(|| PathBuf::from("out/qualify"));
        let dir = absolute(&root.join(id))?;
        if dir.exists() && !holds_only_its_inputs(&dir, plan, plan_path) {
            bail!(
                "{} already exists and is not empty; choose another --id or --out",
                dir.display()
            );
        }
        return Ok((dir, adaptive));
    }
    let plan_entry = entries
        .iter()
        .find(|e| e.step == "plan")
        .with_context(|| format!("ledger has entries for {id} but no plan entry"))?;
    if plan_entry.detail_str("plan_sha256") != Some(plan.sha256.as_str()) {
        bail!(
            "qualification {id} ran a different plan (sha256 {}); {} now has sha256 {}: start a new qualification instead",
            plan_entry.detail_str("plan_sha256").unwrap_or("?"),
            plan_path.display(),
            plan.sha256
        );
    }
    if let Some(began) = plan_entry.detail.get("adaptive").and_then(|a| a.as_bool()) {
        if began != adaptive && !opts.quiet {
            eprintln!(
                "qualification {id}: began {}adaptive; resuming it so",
                if began { "" } else { "not " }
            );
        }
        adaptive = began;
    }
    let dir = plan_entry
        .detail_str("out_dir")
        .context("plan entry without out_dir")?;
    Ok((PathBuf::from(dir), adaptive))
}

/// Whether `dir` is empty but for this plan and its suite (as
/// `qualify --baseline --candidate` writes them there before it starts).
fn holds_only_its_inputs(dir: &Path, plan: &Plan, plan_path: &Path) -> bool {
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.into_iter().all(|e| {
        e.is_ok_and(|e| {
            let p = e.path();
            same(&p, plan_path) || same(&p, &plan.suite)
        })
    })
}

/// A new qualification: the plan copy, the sidecar file, the `plan` entry.
pub(super) fn record_plan(
    ctx: &Ctx<'_>,
    plan_path: &Path,
    ledger_path: &Location,
    adaptive: bool,
    candidate_image: Option<&CandidateImage>,
) -> Result<()> {
    let (plan, out_dir, id) = (ctx.plan, ctx.out_dir, ctx.qualification);
    crate::atomic::write_atomic(&out_dir.join(PLAN_COPY), plan.text.as_bytes())?;
    let qf = QualificationFile {
        schema: QUALIFICATION_SCHEMA.into(),
        id: id.to_string(),
        plan: absolute(plan_path)?,
        plan_dir: absolute(&plan.base_dir)?,
        plan_sha256: plan.sha256.clone(),
        ledger: ledger_path.absolute()?,
        default_window: Some(DefaultWindow::default()),
    };
    crate::atomic::write_json_atomic(&out_dir.join(QUALIFICATION_FILE), &qf)?;
    let mut detail = json!({
            "plan": qf.plan,
            "plan_sha256": plan.sha256,
            "out_dir": out_dir,
            "suite": plan.suite,
            "schedule": plan.schedule.as_str(),
            "order": match plan.schedule {
                PlanSchedule::Alternating => json!(plan.pass_order().iter().map(|(l, n)| format!("{l}-{n}")).collect::<Vec<_>>()),
                PlanSchedule::Interleaved => json!("blocks of each cell alternating A B B A"),
            },
            "window": plan.window,
            "adaptive": adaptive,
            "adaptive_budget": adaptive.then(|| json!({
                "max_requests": plan.adaptive.max_requests,
                "max_minutes": plan.adaptive.max_minutes,
            })),
            "baseline": plan.baseline.driver.kind(),
            "candidate": plan.candidate.driver.kind(),
            "host": crate::util::hostname(),
            "pid": std::process::id(),
    });
    if let Some(c) = candidate_image {
        detail["candidate_image_resolved"] = c.resolved.clone();
        if let Some((image, promoted_in)) = &c.baseline {
            detail["baseline_image_promoted"] =
                json!({"image": image, "qualification": promoted_in});
        }
    }
    ctx.log("plan", None, Status::Ok, detail)?;
    ctx.say(&format!(
        "qualification {id}: plan {} → {}",
        plan_path.display(),
        out_dir.display()
    ));
    Ok(())
}

/// The default-window rule the qualification in `out_dir` began under, so a
/// resumed one cuts its blocks as its first invocation did: a file without
/// the field was cut by `TwiceConcurrency`; no file, the current one.
pub(super) fn recorded_window_rule(out_dir: &Path) -> DefaultWindow {
    match QualificationFile::read(out_dir) {
        Ok(q) => q.window_rule(),
        Err(_) => DefaultWindow::default(),
    }
}

pub(super) fn record_resume(ctx: &Ctx<'_>, opts: &Options, entries: usize) -> Result<()> {
    ctx.log(
        "resume",
        None,
        Status::Info,
        json!({"pid": std::process::id(), "rollback": opts.rollback}),
    )?;
    ctx.say(&format!(
        "qualification {}: resuming from the ledger ({entries} entries)",
        ctx.qualification
    ));
    Ok(())
}

/// `<plan name>-<UTC yyyymmddThhmmssZ>-<8 hex digits>`: the suffix (from
/// the OS-seeded hasher keys, the process id, the clock's nanoseconds and a
/// counter) keeps two qualifications of one plan started within the same
/// second apart, in one process or in two.
pub fn new_id(plan_name: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let clean: String = plan_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let now = chrono::Utc::now();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_i64(now.timestamp_nanos_opt().unwrap_or_default());
    h.write_u64(SEQ.fetch_add(1, Ordering::Relaxed));
    format!(
        "{clean}-{}-{:08x}",
        now.format("%Y%m%dT%H%M%SZ"),
        h.finish() as u32
    )
}

/// The directory `qualify --baseline --candidate` writes a new
/// qualification's plan and suite into, `out_root/id`: the id checked
/// first (it names a directory: no `..`, no absolute path), then the
/// directory new or empty. Nothing is created or written here.
pub fn new_qualification_dir(out_root: &Path, id: &str) -> Result<PathBuf> {
    check_id(id)?;
    let dir = out_root.join(id);
    match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dir),
        Err(e) => return Err(e).with_context(|| format!("inspecting {}", dir.display())),
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!(
            "{} already exists and is not a directory; choose another --id or --out",
            dir.display()
        ),
    }
    let plan = dir.join(PLAN_COPY);
    if std::fs::symlink_metadata(&plan).is_ok() {
        bail!(
            "{} already holds a plan: to resume or repeat it, run infergate qualify {}",
            dir.display(),
            plan.display()
        );
    }
    let mut entries =
        std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))?;
    if entries.next().is_some() {
        bail!(
            "{} already exists and is not empty; choose another --id or --out",
            dir.display()
        );
    }
    Ok(dir)
}

pub(super) fn check_id(id: &str) -> Result<()> {
    let ok = !id.is_empty()
        && id.len() <= 100
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !id.starts_with('.');
    if !ok {
        bail!(
            "qualification id {id:?}: use letters, digits, '-', '_' and '.' (it names a directory)"
        );
    }
    Ok(())
}

pub fn absolute(p: &Path) -> Result<PathBuf> {
    if p.is_absolute() {
        Ok(p.to_path_buf())
    } else {
        Ok(std::env::current_dir()
            .context("reading the current directory")?
            .join(p))
    }
}

/// Both sides' interleaved blocks, as their directories under `out_dir` hold them.
pub(super) fn recover_blocks(out_dir: &Path) -> Result<Blocks> {
    Blocks::recover(
        &interleaved_dir(out_dir, BASELINE),
        &interleaved_dir(out_dir, CANDIDATE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::plan::CANDIDATE;
    use crate::runtime::state::pass_dir;

    #[test]
    fn a_resumed_qualification_keeps_the_window_rule_it_began_under() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded_window_rule(dir.path()), DefaultWindow::ByArrivals);
        let old = crate::runtime::state::UNRECORDED_WINDOW_QUALIFICATION_JSON;
        std::fs::write(dir.path().join(QUALIFICATION_FILE), old).unwrap();
        assert_eq!(
            recorded_window_rule(dir.path()),
            DefaultWindow::TwiceConcurrency
        );
        let mut q: QualificationFile = serde_json::from_str(old).unwrap();
        q.default_window = Some(DefaultWindow::ByArrivals);
        crate::atomic::write_json_atomic(&dir.path().join(QUALIFICATION_FILE), &q).unwrap();
        assert_eq!(recorded_window_rule(dir.path()), DefaultWindow::ByArrivals);
    }

    #[test]
    fn ids_are_directory_safe() {
        assert!(check_id("ref-20260101T000000Z").is_ok());
        assert!(check_id("../x").is_err());
        assert!(check_id("").is_err());
        let id = new_id("my plan/1");
        assert!(id.starts_with("my-plan-1-"), "{id}");
        assert!(check_id(&id).is_ok());
    }

    #[test]
    fn a_new_qualifications_directory_is_new_or_empty_and_its_id_is_checked_first() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        assert_eq!(new_qualification_dir(&out, "a").unwrap(), out.join("a"));
        let abs = dir.path().join("abs");
        for id in ["../../victim", abs.to_str().unwrap(), "x/y"] {
            let e = new_qualification_dir(&out, id).unwrap_err().to_string();
            assert!(e.starts_with("qualification id"), "{id}: {e}");
        }
        std::fs::create_dir_all(out.join("empty")).unwrap();
        assert!(new_qualification_dir(&out, "empty").is_ok());
        std::fs::create_dir_all(out.join("proj")).unwrap();
        std::fs::write(out.join("proj/suite.toml"), "").unwrap();
        let e = new_qualification_dir(&out, "proj").unwrap_err().to_string();
        assert!(e.contains("already exists and is not empty"), "{e}");
        std::fs::write(out.join("proj").join(PLAN_COPY), "").unwrap();
        let e = new_qualification_dir(&out, "proj").unwrap_err().to_string();
        assert!(e.contains("already holds a plan"), "{e}");
        std::fs::write(out.join("file"), "").unwrap();
        let e = new_qualification_dir(&out, "file").unwrap_err().to_string();
        assert!(e.contains("is not a directory"), "{e}");
        // Nothing was made.
        assert!(!out.join("a").exists() && !abs.exists());
    }

    #[test]
    fn two_qualifications_of_one_plan_in_one_second_get_two_ids() {
        let ids: std::collections::BTreeSet<String> = (0..50).map(|_| new_id("plan")).collect();
        assert_eq!(ids.len(), 50, "{ids:?}");
        for id in &ids {
            let (stamp, suffix) = id.strip_prefix("plan-").unwrap().split_once('-').unwrap();
            assert_eq!(stamp.len(), "20260101T000000Z".len(), "{id}");
            assert!(
                suffix.len() == 8 && suffix.bytes().all(|b| b.is_ascii_hexdigit()),
                "{id}"
            );
        }
    }

    #[test]
    fn pass_order_names_directories() {
        assert_eq!(
            pass_dir(Path::new("/o"), CANDIDATE, 2),
            Path::new("/o/candidate-2")
        );
    }
}
