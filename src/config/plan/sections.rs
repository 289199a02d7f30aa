//! One checker per section of a plan (everything but the runtimes): each
//! takes its raw TOML shape and returns the typed value, or an error naming
//! the file, the line and the field.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::Duration;

use toml::Spanned;

use super::model::*;
use super::raw::*;
use crate::report::ConfigError;

pub(super) type ErrFn<'a> = dyn Fn(Option<Range<usize>>, &str, String) -> ConfigError + 'a;

/// The plan's TOML shape; errors name the field by its path.
pub(super) fn raw_plan(text: &str, file: &str) -> Result<RawPlan, ConfigError> {
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        // Spanned wrappers add a private segment to the path; readers want the field.
        let path = e
            .path()
            .to_string()
            .replace(".$__serde_spanned_private_value", "");
        let inner = e.into_inner();
        ConfigError {
            file: file.to_string(),
            line: inner.span().map(|s| line_of(text, s.start)),
            column: None,
            field: (path != ".").then_some(path),
            message: crate::report::config_error::toml_error_message(text, &inner),
        }
    })
}

/// `policy = "file.toml"` or an inline `[policy]` table; absent: the defaults.
pub(super) fn policy_source(
    v: Option<toml::Value>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
    span: Option<Range<usize>>,
) -> Result<PolicySource, ConfigError> {
    let Some(v) = v else {
        return Ok(PolicySource::Defaults);
    };
    match v {
        toml::Value::String(s) => Ok(PolicySource::File(resolve(&s))),
        toml::Value::Table(t) => Ok(PolicySource::Inline(
            toml::to_string(&t).map_err(|e| err(span.clone(), "policy", e.to_string()))?,
        )),
        other => Err(err(
            span,
            "policy",
            format!("expected a path or a table, found a {}", other.type_str()),
        )),
    }
}

/// Where top-level `key` is set (`key = …`, `[key]` or `[key.…]`), for
/// errors about a value read without its span.
pub(super) fn key_line(text: &str, key: &str) -> Option<Range<usize>> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let header = t
            .strip_prefix('[')
            .map(|h| h.trim_start_matches('[').trim_start());
        let named = |rest: &str| {
            rest.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(['=', ']', '.']))
        };
        if header.map_or(named(t), named) {
            return Some(at..at + line.trim_end().len());
        }
        at += line.len();
    }
    None
}

pub(super) fn repeats(v: Option<Spanned<i64>>, err: &ErrFn) -> Result<usize, ConfigError> {
    match v {
        None => Ok(1),
        Some(r) if *r.get_ref() >= 1 && *r.get_ref() <= 100 => Ok(*r.get_ref() as usize),
        Some(r) => Err(err(
            Some(r.span()),
            "repeats",
            format!("must be 1..=100, got {}", r.get_ref()),
        )),
    }
}

pub(super) fn readmission(
    v: Option<RawReadmission>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Readmission, ConfigError> {
    let Some(r) = v else {
        return Ok(Readmission {
            expected_model: None,
            canary: true,
            timeout: Duration::from_secs(60),
            hook: None,
        });
    };
    Ok(Readmission {
        expected_model: r.expected_model,
        canary: r.canary,
        timeout: seconds(r.timeout_s, 60.0, "readmission.timeout_s", err)?,
        hook: match r.hook {
            None => None,
            Some(h) => Some(hook(h, "readmission.hook", resolve, err)?),
        },
    })
}

pub(super) fn decision(v: Option<RawDecision>, err: &ErrFn) -> Result<DecisionPolicy, ConfigError> {
    let decision = match v {
        None => DecisionPolicy {
            on_pass: OnOutcome::Pending,
            on_fail: OnOutcome::Pending,
        },
        Some(d) => DecisionPolicy {
            on_pass: on_outcome(d.on_pass, "decision.on_pass", err)?,
            on_fail: on_outcome(d.on_fail, "decision.on_fail", err)?,
        },
    };
    if decision.on_fail == OnOutcome::Promote {
        return Err(err(
            None,
            "decision.on_fail",
            "a failed qualification is never promoted automatically".into(),
        ));
    }
    Ok(decision)
}

/// A keyword field: the value its word stands for, or an error at the
/// word naming what `field` accepts (`"x": expected "a" or "b"`).
fn keyword<T: Copy>(
    v: &Spanned<String>,
    field: &str,
    [(a, x), (b, y)]: [(&str, T); 2],
    err: &ErrFn,
) -> Result<T, ConfigError> {
    match v.get_ref().as_str() {
        w if w == a => Ok(x),
        w if w == b => Ok(y),
        other => Err(err(
            Some(v.span()),
            field,
            format!("{other:?}: expected {a:?} or {b:?}"),
        )),
    }
}

pub(super) fn after(v: Option<Spanned<String>>, err: &ErrFn) -> Result<After, ConfigError> {
    let Some(a) = v else {
        return Ok(After::RestoreBaseline);
    };
    let words = [
        ("restore-baseline", After::RestoreBaseline),
        ("stop", After::Stop),
    ];
    keyword(&a, "after", words, err)
}

pub(super) fn docker(v: Option<RawDocker>, err: &ErrFn) -> Result<DockerSettings, ConfigError> {
    let Some(d) = v else {
        return Ok(DockerSettings::default());
    };
    let registry = d.registry.filter(|r| !r.is_empty());
    let pull = match &d.pull {
        None => PullPolicy::Missing,
        Some(p) => {
            let policy = match p.get_ref().as_str() {
                "missing" => PullPolicy::Missing,
                "never" => PullPolicy::Never,
                "always" => PullPolicy::Always,
                other => {
                    return Err(err(
                        Some(p.span()),
                        "docker.pull",
                        format!("{other:?}: expected \"missing\", \"never\" or \"always\""),
                    ));
                }
            };
            if policy == PullPolicy::Always && registry.is_none() {
                return Err(err(
                    Some(p.span()),
                    "docker.pull",
                    "\"always\" pulls by digest from [docker] registry, and none is set".into(),
                ));
            }
            policy
        }
    };
    Ok(DockerSettings {
        socket: d
            .socket
            .map(PathBuf::from)
            .unwrap_or_else(|| DockerSettings::default().socket),
        registry,
        auth_env: d.auth_env,
        pull,
    })
}

pub(super) fn timeouts(
    v: Option<RawTimeouts>,
    err: &ErrFn,
) -> Result<crate::config::timeouts::Timeouts, ConfigError> {
    let d = crate::config::timeouts::Timeouts::default();
    let t = v.unwrap_or(RawTimeouts {
        connect_s: None,
        first_byte_s: None,
        idle_s: None,
        total_s: None,
        per_1k_prompt_tokens_s: None,
    });
    let secs = |v, default: Duration, field| seconds(v, default.as_secs_f64(), field, err);
    Ok(crate::config::timeouts::Timeouts {
        connect: secs(t.connect_s, d.connect, "timeouts.connect_s")?,
        first_byte: secs(t.first_byte_s, d.first_byte, "timeouts.first_byte_s")?,
        idle: secs(t.idle_s, d.idle, "timeouts.idle_s")?,
        total: secs(t.total_s, d.total, "timeouts.total_s")?,
        per_1k_prompt_tokens: allowance(t.per_1k_prompt_tokens_s, d.per_1k_prompt_tokens, err)?,
    })
}

/// `timeouts.per_1k_prompt_tokens_s`: seconds, zero allowed (no allowance).
fn allowance(
    v: Option<Spanned<f64>>,
    default: Duration,
    err: &ErrFn,
) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) if s.get_ref().is_finite() && *s.get_ref() >= 0.0 && *s.get_ref() < 1e7 => {
            Ok(Duration::from_secs_f64(*s.get_ref()))
        }
        Some(s) => Err(err(
            Some(s.span()),
            "timeouts.per_1k_prompt_tokens_s",
            format!(
                "must be zero or a positive number of seconds (added per 1,000 prompt tokens), got {}",
                s.get_ref()
            ),
        )),
    }
}

/// Interleaved unless the plan says otherwise, sets `repeats` (the
/// alternating schedule's knob keeps meaning what it meant), or both
/// runtimes need the same fixed address.
pub(super) fn schedule(
    v: Option<Spanned<String>>,
    repeats_given: Option<Range<usize>>,
    clash: Option<String>,
    err: &ErrFn,
) -> Result<PlanSchedule, ConfigError> {
    let schedule = match &v {
        None if repeats_given.is_some() || clash.is_some() => PlanSchedule::Alternating,
        None => PlanSchedule::Interleaved,
        Some(s) => {
            let words = [
                ("interleaved", PlanSchedule::Interleaved),
                ("alternating", PlanSchedule::Alternating),
            ];
            keyword(s, "schedule", words, err)?
        }
    };
    if schedule == PlanSchedule::Interleaved {
        if let Some(span) = repeats_given {
            return Err(err(
                Some(span),
                "repeats",
                "applies only to schedule = \"alternating\" (interleaved blocks replace passes; size them with `window`)".into(),
            ));
        }
        if let (Some(why), Some(s)) = (&clash, &v) {
            return Err(err(
                Some(s.span()),
                "schedule",
                format!(
                    "\"interleaved\" needs both runtimes up at once, but {why}: use schedule = \"alternating\""
                ),
            ));
        }
    }
    Ok(schedule)
}

pub(super) fn window(
    v: Option<RawWindow>,
    text: &str,
    schedule: PlanSchedule,
    err: &ErrFn,
) -> Result<Option<Window>, ConfigError> {
    let size = |w: i64, at: Option<Range<usize>>, field: &str| -> Result<usize, ConfigError> {
        if schedule == PlanSchedule::Alternating {
            return Err(err(
                at,
                field,
                "applies only to schedule = \"interleaved\"".into(),
            ));
        }
        match w {
            n @ 1..=100_000 => Ok(n as usize),
            n => Err(err(
                at,
                field,
                format!("must be 1..=100000 requests per block, got {n}"),
            )),
        }
    };
    match v {
        None => Ok(None),
        Some(RawWindow::All(w)) => Ok(Some(Window::All(size(
            w,
            key_line(text, "window"),
            "window",
        )?))),
        Some(RawWindow::ByCell(m)) if m.is_empty() => Err(err(
            key_line(text, "window"),
            "window",
            "names no cell: give `window = N` for every cell or `[window]` with `CELL = N` lines"
                .into(),
        )),
        Some(RawWindow::ByCell(m)) => {
            let mut out = BTreeMap::new();
            for (cell, w) in &m {
                let n = size(*w.get_ref(), Some(w.span()), &format!("window.{cell}"))?;
                out.insert(cell.clone(), n);
            }
            Ok(Some(Window::ByCell(out)))
        }
    }
}

pub(super) fn adaptive(
    text: &str,
    v: Option<Spanned<RawAdaptive>>,
    schedule: PlanSchedule,
    err: &ErrFn,
) -> Result<Adaptive, ConfigError> {
    let Some(a) = v else {
        return Ok(Adaptive::default());
    };
    let span = a.span();
    let a = a.into_inner();
    let max_requests = match a.max_requests {
        None => DEFAULT_ADAPTIVE_MAX_REQUESTS,
        Some(m) if (1..=MAX_ADAPTIVE_MAX_REQUESTS as i64).contains(m.get_ref()) => {
            *m.get_ref() as usize
        }
        Some(m) => {
            return Err(err(
                Some(m.span()),
                "adaptive.max_requests",
                format!(
                    "must be 1..={MAX_ADAPTIVE_MAX_REQUESTS} requests, got {}",
                    m.get_ref()
                ),
            ));
        }
    };
    let max_minutes = match a.max_minutes {
        None => DEFAULT_ADAPTIVE_MAX_MINUTES,
        Some(m) if m.get_ref().is_finite() && *m.get_ref() > 0.0 && *m.get_ref() <= 1e6 => {
            *m.get_ref()
        }
        Some(m) => {
            return Err(err(
                Some(m.span()),
                "adaptive.max_minutes",
                format!("must be a positive number of minutes, got {}", m.get_ref()),
            ));
        }
    };
    let looks_by = match &a.looks_by {
        None => LooksBy::Design,
        Some(v) => {
            let words = [("design", LooksBy::Design), ("budget", LooksBy::Budget)];
            keyword(v, "adaptive.looks_by", words, err)?
        }
    };
    if a.enabled && schedule == PlanSchedule::Alternating {
        return Err(err(
            Some(key_span(text, span, "enabled")),
            "adaptive.enabled",
            "adaptive mode adds interleaved blocks: it needs schedule = \"interleaved\"".into(),
        ));
    }
    Ok(Adaptive {
        enabled: a.enabled,
        max_requests,
        max_minutes,
        looks_by,
    })
}

pub(super) fn seconds(
    v: Option<Spanned<f64>>,
    default: f64,
    field: &str,
    err: &ErrFn,
) -> Result<Duration, ConfigError> {
    match v {
        None => Ok(Duration::from_secs_f64(default)),
        Some(s) if s.get_ref().is_finite() && *s.get_ref() > 0.0 && *s.get_ref() < 1e7 => {
            Ok(Duration::from_secs_f64(*s.get_ref()))
        }
        Some(s) => Err(err(
            Some(s.span()),
            field,
            format!("must be a positive number of seconds, got {}", s.get_ref()),
        )),
    }
}

pub(super) fn on_outcome(
    v: Option<Spanned<String>>,
    field: &str,
    err: &ErrFn,
) -> Result<OnOutcome, ConfigError> {
    let Some(v) = v else {
        return Ok(OnOutcome::Pending);
    };
    match v.get_ref().as_str() {
        "pending" => Ok(OnOutcome::Pending),
        "promote" => Ok(OnOutcome::Promote),
        "retain-baseline" => Ok(OnOutcome::RetainBaseline),
        other => Err(err(
            Some(v.span()),
            field,
            format!("{other:?}: expected \"pending\", \"promote\" or \"retain-baseline\""),
        )),
    }
}

pub(super) fn hook(
    h: Spanned<RawHook>,
    field: &str,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Hook, ConfigError> {
    let span = h.span();
    let h = h.into_inner();
    // Bounded like every other duration here: `Duration::from_secs_f64` panics
    // on 1e300 (found by review, replayed through `fuzzing::plan`).
    let timeout = seconds(h.timeout_s, 30.0, &format!("{field}.timeout_s"), err)?;
    match (h.command, h.url) {
        (Some(argv), None) => {
            let Some(first) = argv.first() else {
                return Err(err(
                    Some(span),
                    &format!("{field}.command"),
                    "is empty".into(),
                ));
            };
            if h.bearer_env.is_some() {
                return Err(err(
                    Some(span),
                    &format!("{field}.bearer_env"),
                    "applies only to a url hook".into(),
                ));
            }
            let mut argv = argv.clone();
            if first.contains('/') {
                argv[0] = resolve(first).display().to_string();
            }
            // Found now, not when the verdict is in.
            if crate::util::which(&argv[0]).is_none() {
                return Err(err(
                    Some(span),
                    &format!("{field}.command"),
                    format!(
                        "{:?} is not an executable file{}",
                        argv[0],
                        if first.contains('/') { "" } else { " on PATH" }
                    ),
                ));
            }
            Ok(Hook::Command { argv, timeout })
        }
        (None, Some(url)) => {
            // Kept in the plan and its copy: no password or token in it.
            if let Err(m) =
                crate::config::urls::check_http_url(&url, crate::config::urls::Password::Refused)
            {
                return Err(err(Some(span), &format!("{field}.url"), m));
            }
            Ok(Hook::Http {
                url,
                timeout,
                bearer_env: h.bearer_env,
            })
        }
        _ => Err(err(
            Some(span),
            field,
            "give exactly one of `command` or `url`".into(),
        )),
    }
}

/// `[hooks]`: each `on_verdict` and `on_decision` entry read as a hook.
pub(super) fn hooks(
    v: Option<RawHooks>,
    resolve: &dyn Fn(&str) -> PathBuf,
    err: &ErrFn,
) -> Result<Hooks, ConfigError> {
    let Some(h) = v else {
        return Ok(Hooks::default());
    };
    let read = |list: Vec<Spanned<RawHook>>, name: &str| {
        list.into_iter()
            .enumerate()
            .map(|(i, raw)| hook(raw, &format!("hooks.{name}[{i}]"), resolve, err))
            .collect::<Result<Vec<_>, _>>()
    };
    Ok(Hooks {
        on_verdict: read(h.on_verdict, "on_verdict")?,
        on_decision: read(h.on_decision, "on_decision")?,
    })
}

/// The span of `key = …` inside `table` (a `[table]` span), else `table`.
pub(super) fn key_span(text: &str, table: Range<usize>, key: &str) -> Range<usize> {
    let body = text.get(table.clone()).unwrap_or("");
    let mut offset = table.start;
    for line in body.split_inclusive('\n') {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix(key)
            && rest.trim_start().starts_with('=')
        {
            let start = offset + (line.len() - t.len());
            return start..start + key.len();
        }
        offset += line.len();
    }
    table
}

/// 1-based line of byte offset `at`.
pub(super) fn line_of(text: &str, at: usize) -> usize {
    text.get(..at).unwrap_or(text).matches('\n').count() + 1
}
