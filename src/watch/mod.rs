//! `infergate watch PLAN --candidate HOST/REPO:TAG`: qualify each new digest
//! a tag resolves to, against the plan's baseline, once.
//!
//! A tick resolves the tag on its registry ([`crate::driver::registry`]),
//! names the qualification by the two runtimes it compares (the plan's name,
//! the candidate's digest, the baseline's identity), and then:
//! - the ledger holds that qualification, finished, or the digest is the
//!   build a promotion put in service: say so, do nothing;
//! - it holds it unfinished (interrupted): resume it, as `qualify --id` does;
//! - else: qualify the plan with the candidate's image replaced by the digest.
//!
//! The baseline is the plan's until a qualification of this repository's
//! builds in the ledger is promoted: from then on, the build that promotion
//! put in service (the newest such), so a stream of builds is a chain, each
//! paired against the one it would replace.
//!
//! A finished qualification is not repeated, whatever its verdict
//! (inconclusive, failed and refused included): the digest was judged, and
//! repeating it is a person's decision (`infergate qualify` with the pinned
//! image). One watcher per ledger at a time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::report::digest::sha256_hex;
use anyhow::{Context, Result, bail};

use crate::config::plan::{BASELINE, CANDIDATE, Driver, Plan};
use crate::driver::registry::{self, ImageName, Resolved};
use crate::qualify::{self, CandidateImage};
use crate::report::DecisionAction;
use crate::runtime::ledger::{Ledger, Location, QualificationLock};
use crate::runtime::state::decision_in;

#[derive(Debug, Clone)]
pub struct Options {
    pub plan: PathBuf,
    /// `HOST[:PORT]/REPOSITORY:TAG`.
    pub candidate: String,
    pub ledger: Option<Location>,
    pub out_root: Option<PathBuf>,
    pub quiet: bool,
}

/// What one tick did.
#[derive(Debug)]
pub enum Tick {
    /// The ledger already holds a finished qualification of this digest
    /// against this baseline.
    Judged {
        resolved: Resolved,
        qualification: String,
        verdict: String,
    },
    /// A qualification ran (or resumed) to its end.
    Qualified {
        resolved: Resolved,
        outcome: Box<qualify::Outcome>,
    },
}

impl Tick {
    pub fn qualification(&self) -> &str {
        match self {
            Tick::Judged { qualification, .. } => qualification,
            Tick::Qualified { outcome, .. } => &outcome.id,
        }
    }
}

/// One tick: resolve, then qualify the digest unless it was judged.
pub async fn once(opts: &Options) -> Result<Tick> {
    let plan = Plan::load(&opts.plan)?;
    if !matches!(plan.candidate.driver, Driver::Container(_)) {
        bail!(
            "{}: watch replaces the candidate's image, so [candidate] needs driver = \"container\"",
            opts.plan.display()
        );
    }
    let location = qualify::ledger_for(&plan, opts.ledger.as_ref())?;
    let ledger = Ledger::connect(&location)?;
    let _watcher = watcher_lock(&ledger, &location)?;

    let name = ImageName::parse(&opts.candidate)?;
    let resolved = registry::resolve(&name, registry::host_architecture())
        .await
        .with_context(|| format!("resolving {name}"))?;
    let pinned = resolved.pinned();
    // The baseline now serving: the plan's, or the build of this repository
    // a promotion recorded in this ledger last put in its place.
    let promoted = match plan.baseline.driver {
        Driver::Container(_) => last_promotion(&ledger, &resolved.repository)?,
        _ => None,
    };
    // The tag still names the build a promotion put in service: nothing new.
    if let Some((image, promoted_in)) = &promoted
        && *image == pinned
    {
        return Ok(Tick::Judged {
            qualification: promoted_in.clone(),
            verdict: "promoted: the build serving".into(),
            resolved,
        });
    }
    // Checked before anything is recorded: the plan takes these images.
    let mut text = Plan::with_image(&plan.text, &opts.plan, CANDIDATE, &pinned)?;
    if let Some((image, _)) = &promoted {
        text = Plan::with_image(&text, &opts.plan, BASELINE, image)?;
    }
    let effective = Plan::parse(&text, &opts.plan, &plan.base_dir)?;
    let id = qualification_id(&effective, &resolved);
    let entries = ledger.entries(&id)?;
    if let Some(done) = entries.iter().rev().find(|e| e.step == "done") {
        return Ok(Tick::Judged {
            verdict: done.detail_str("verdict").unwrap_or("?").to_string(),
            qualification: id,
            resolved,
        });
    }
    let q = qualify::Options {
        id: Some(id),
        out_root: opts.out_root.clone(),
        ledger: Some(location),
        quiet: opts.quiet,
        candidate_image: Some(CandidateImage {
            pinned,
            resolved: serde_json::to_value(&resolved)?,
            baseline: promoted,
        }),
        ..Default::default()
    };
    let outcome = qualify::run(&opts.plan, &q).await?;
    Ok(Tick::Qualified {
        resolved,
        outcome: Box::new(outcome),
    })
}

/// Ticks every `period` until interrupted; a tick that fails (the registry
/// down, a refused plan) is said and the next one tried.
pub async fn every(opts: &Options, period: Duration, mut said: impl FnMut(Result<Tick>)) {
    loop {
        said(once(opts).await);
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = tokio::signal::ctrl_c() => return,
        }
    }
}

/// `<plan>-<candidate digest, 12 hex>-on-<baseline, 12 hex>`: the same two
/// runtimes always name the same qualification, so a judged digest is found
/// and an interrupted one resumed.
pub fn qualification_id(plan: &Plan, candidate: &Resolved) -> String {
    let cand = candidate
        .digest
        .strip_prefix("sha256:")
        .unwrap_or(&candidate.digest);
    let base = match &plan.baseline.driver {
        Driver::Container(c) => c
            .image
            .digest
            .strip_prefix("sha256:")
            .unwrap_or(&c.image.digest)
            .to_string(),
        // Not an image: what identifies it is its whole definition.
        other => sha256_hex(format!("{other:?}").as_bytes()),
    };
    let name: String = plan
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(60)
        .collect();
    format!(
        "{}-{}-on-{}",
        name.trim_start_matches('.'),
        &cand[..12.min(cand.len())],
        &base[..12.min(base.len())]
    )
}

/// The image of `repository` the newest promotion in the ledger put in
/// service, and that qualification's id: the candidate of the last
/// qualification whose last decision was to promote.
fn last_promotion(ledger: &Ledger, repository: &str) -> Result<Option<(String, String)>> {
    let prefix = format!("{repository}@");
    for q in ledger.qualifications()?.iter().rev() {
        let entries = ledger.entries(q)?;
        if decision_in(&entries) != DecisionAction::Promote {
            continue;
        }
        let candidate = entries
            .iter()
            .rev()
            .find(|e| e.step == "compare")
            .and_then(|e| e.detail.pointer("/lineage/candidate_image"))
            .and_then(serde_json::Value::as_str);
        if let Some(image) = candidate.filter(|i| i.starts_with(&prefix)) {
            return Ok(Some((image.to_string(), q.clone())));
        }
    }
    Ok(None)
}

/// One watcher per ledger: a lock file beside a SQLite ledger, an advisory
/// lock in a PostgreSQL one.
fn watcher_lock(ledger: &Ledger, location: &Location) -> Result<QualificationLock> {
    let dir = match location {
        Location::Sqlite(path) => sibling(path, "watch"),
        Location::Postgres(_) => PathBuf::new(),
    };
    ledger.lock("watch:", &dir).map_err(|e| {
        anyhow::anyhow!("another `infergate watch` holds the ledger {location} ({e:#})")
    })
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{suffix}"));
    PathBuf::from(s)
}

/// The line a tick prints.
pub fn describe(tick: &Tick) -> String {
    match tick {
        Tick::Judged {
            resolved,
            qualification,
            verdict,
        } => format!(
            "{} ({}) was qualified against this baseline already: {qualification}, {verdict}; nothing to do",
            resolved.pinned(),
            resolved.tag.as_deref().unwrap_or("by digest"),
        ),
        Tick::Qualified { resolved, outcome } => format!(
            "{} qualified as {}: {:?}",
            resolved.pinned(),
            outcome.id,
            outcome.verdict
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(dir: &Path, candidate: &str) -> PathBuf {
        let digest = format!("sha256:{}", "c".repeat(64));
        let text = format!(
            "name = \"nightly watch\"\nsuite = \"suite.toml\"\n[baseline]\ndriver = \"container\"\nimage = \"127.0.0.1:5000/e@{digest}\"\nport = 8001\n[candidate]\n{candidate}\n"
        );
        let p = dir.join("plan.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[tokio::test]
    async fn a_candidate_that_is_not_a_container_is_refused_before_any_registry_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(
            dir.path(),
            "driver = \"process\"\nengine_profile = \"candidate\"",
        );
        let opts = Options {
            plan: p,
            // Not a registry anyone runs: never reached, the plan is refused first.
            candidate: "127.0.0.1:9/e:nightly".into(),
            ledger: Some(Location::Sqlite(dir.path().join("ledger.sqlite"))),
            out_root: None,
            quiet: true,
        };
        let e = once(&opts).await.unwrap_err().to_string();
        assert!(e.contains("driver = \"container\""), "{e}");
    }

    #[test]
    fn the_id_names_both_runtimes_and_is_a_valid_directory_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(
            dir.path(),
            &format!(
                "driver = \"container\"\nimage = \"127.0.0.1:5000/e@sha256:{}\"\nport = 8002",
                "c".repeat(64)
            ),
        );
        let plan = Plan::load(&p).unwrap();
        let r = Resolved {
            repository: "127.0.0.1:5000/e".into(),
            tag: Some("nightly".into()),
            digest: format!("sha256:{}", "d".repeat(64)),
            media_type: String::new(),
            platform_digest: None,
            platform: None,
        };
        let id = qualification_id(&plan, &r);
        assert_eq!(
            id,
            format!("nightly-watch-{}-on-{}", "d".repeat(12), "c".repeat(12))
        );
        assert!(
            id.len() <= 100
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{id}"
        );
    }

    #[test]
    fn a_second_watcher_on_one_ledger_is_refused_while_the_first_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let location = Location::Sqlite(dir.path().join("ledger.sqlite"));
        let ledger = Ledger::connect(&location).unwrap();
        let first = watcher_lock(&ledger, &location).unwrap();
        let Err(e) = watcher_lock(&ledger, &location) else {
            panic!("two watchers hold one ledger")
        };
        let e = e.to_string();
        assert!(
            e.contains("another `infergate watch` holds the ledger"),
            "{e}"
        );
        drop(first);
        watcher_lock(&ledger, &location).expect("free again");
    }
}
