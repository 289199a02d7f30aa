//! The policy file's TOML shape, as serde reads it (spans kept, so an error
//! names the line), and its checks, section by section, into a [`Policy`]:
//! the first error found is reported with its file, line, column and field.

use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use crate::config_error::{ConfigError, line_col};

use crate::artifact::Slo;
use crate::stats::evidence::Spending;
use crate::stats::{BootstrapConfig, Direction};

use super::{
    CrossRuntime, DEFAULT_SLO_MARGIN_POINTS, DEFAULT_THRESHOLD_PERCENT, EmbeddingFloors,
    GatePolicy, GateRule, MAX_BOOTSTRAP_ITERATIONS, MAX_THRESHOLD_PERCENT, MetricSpec, Policy,
    QualityPolicy, SloSpec, TurnoverGateMode, TurnoverPolicy, infer_direction, split_quantile,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    #[serde(default)]
    threshold_percent: Option<Spanned<f64>>,
    #[serde(default)]
    metric: Option<Vec<RawMetric>>,
    #[serde(default)]
    turnover: Option<RawTurnover>,
    #[serde(default)]
    bootstrap: Option<RawBootstrap>,
    #[serde(default)]
    gate: Option<RawGate>,
    #[serde(default)]
    slo: Option<Vec<RawSlo>>,
    #[serde(default)]
    quality: Option<RawQuality>,
    #[serde(default)]
    capacity: Option<RawCapacity>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapacity {
    #[serde(default)]
    margin_percent: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuality {
    #[serde(default)]
    cross_runtime: Option<CrossRuntime>,
    #[serde(default)]
    near_tie_nats: Option<Spanned<f64>>,
    #[serde(default)]
    hard_margin_percent: Option<Spanned<f64>>,
    #[serde(default)]
    accuracy_margin_points: Option<Spanned<f64>>,
    #[serde(default)]
    feature_margin_points: Option<Spanned<f64>>,
    #[serde(default)]
    embedding_cosine_min: Option<Spanned<f64>>,
    #[serde(default)]
    embedding_cosine_mean_min: Option<Spanned<f64>>,
    #[serde(default)]
    embeddings: Option<Vec<RawEmbeddingFloors>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmbeddingFloors {
    workload: Spanned<String>,
    #[serde(default)]
    cosine_min: Option<Spanned<f64>>,
    #[serde(default)]
    cosine_mean_min: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSlo {
    #[serde(default)]
    cell: Option<Spanned<String>>,
    #[serde(default)]
    ttft_ms: Option<Spanned<f64>>,
    #[serde(default)]
    tpot_ms: Option<Spanned<f64>>,
    #[serde(default)]
    e2e_ms: Option<Spanned<f64>>,
    #[serde(default)]
    min_attainment: Option<Spanned<f64>>,
    #[serde(default)]
    margin_points: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGate {
    #[serde(default)]
    decide: Option<GateRule>,
    #[serde(default)]
    alpha: Option<Spanned<f64>>,
    #[serde(default)]
    drift_sd_percent: Option<Spanned<f64>>,
    #[serde(default)]
    spending: Option<Spending>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetric {
    name: Spanned<String>,
    #[serde(default)]
    threshold_percent: Option<Spanned<f64>>,
    #[serde(default)]
    direction: Option<Direction>,
    #[serde(default)]
    sample: Option<String>,
    #[serde(default)]
    quantile: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurnover {
    #[serde(default)]
    gate: Option<TurnoverGateMode>,
    #[serde(default)]
    alpha: Option<Spanned<f64>>,
    #[serde(default)]
    confidence: Option<Spanned<f64>>,
    #[serde(default)]
    margin: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBootstrap {
    #[serde(default)]
    iterations: Option<Spanned<i64>>,
    #[serde(default)]
    confidence: Option<Spanned<f64>>,
    #[serde(default)]
    seed: Option<Spanned<i64>>,
}

/// Where a policy's text came from, to point its errors at a file, line and field.
struct Source<'a> {
    text: &'a str,
    file: &'a str,
}

impl Source<'_> {
    fn err(&self, span: Range<usize>, field: String, message: String) -> ConfigError {
        let (line, column) = line_col(self.text, span.start);
        ConfigError {
            file: self.file.to_string(),
            line: Some(line),
            column: Some(column),
            field: Some(field),
            message,
        }
    }

    /// An error at `v` when it is given and not `ok`.
    fn check(
        &self,
        v: &Option<Spanned<f64>>,
        field: String,
        ok: fn(f64) -> bool,
        what: &str,
    ) -> Result<(), ConfigError> {
        match v {
            Some(s) if !ok(*s.get_ref()) => {
                // 1e308 in full is 309 digits: long values are shown as written.
                let v = *s.get_ref();
                let shown = match v.to_string() {
                    d if d.len() > 24 => format!("{v:e}"),
                    d => d,
                };
                Err(self.err(s.span(), field, format!("{shown} is not {what}")))
            }
            _ => Ok(()),
        }
    }
}

fn threshold_ok(t: f64) -> bool {
    t.is_finite() && t >= 0.0
}

fn threshold_percent_ok(t: f64) -> bool {
    (0.0..=MAX_THRESHOLD_PERCENT).contains(&t)
}

const THRESHOLD_PERCENT: &str = "a percentage in [0, 1000]";

fn open_unit(p: f64) -> bool {
    p > 0.0 && p < 1.0
}

impl RawPolicy {
    /// Each section in turn (the first error found is the one reported); an
    /// absent section keeps its defaults.
    pub(super) fn into_policy(self, text: &str, file: &str) -> Result<Policy, ConfigError> {
        let src = Source { text, file };
        src.check(
            &self.threshold_percent,
            "threshold_percent".into(),
            threshold_percent_ok,
            THRESHOLD_PERCENT,
        )?;
        let default_threshold = self
            .threshold_percent
            .as_ref()
            .map_or(DEFAULT_THRESHOLD_PERCENT, |s| *s.get_ref());
        let defaults = Policy::default();
        let metrics = match self.metric {
            None => defaults
                .metrics
                .iter()
                .cloned()
                .map(|mut m| {
                    m.threshold_percent = default_threshold;
                    m
                })
                .collect(),
            Some(raw) => metrics(&src, raw, default_threshold)?,
        };
        let turnover = turnover(&src, self.turnover, defaults.turnover.clone())?;
        let gate = gate(&src, self.gate, defaults.gate.clone())?;
        let bootstrap = bootstrap(&src, self.bootstrap, defaults.bootstrap)?;
        let slo = slos(&src, self.slo.unwrap_or_default())?;
        let quality = quality(&src, self.quality)?;
        let mut capacity = defaults.capacity;
        if let Some(c) = self.capacity {
            src.check(
                &c.margin_percent,
                "capacity.margin_percent".into(),
                |m| (0.0..100.0).contains(&m),
                "a percentage in [0, 100)",
            )?;
            capacity.margin_percent = c
                .margin_percent
                .map_or(capacity.margin_percent, |s| *s.get_ref());
        }
        Ok(Policy {
            source: file.to_string(),
            metrics,
            turnover,
            bootstrap,
            gate,
            slo,
            quality,
            capacity,
        })
    }
}

/// The `[[metric]]` tables, each named once.
fn metrics(
    src: &Source,
    raw: Vec<RawMetric>,
    default_threshold: f64,
) -> Result<Vec<MetricSpec>, ConfigError> {
    let mut out: Vec<MetricSpec> = Vec::new();
    for (i, m) in raw.into_iter().enumerate() {
        let name = m.name.get_ref().clone();
        // Before any message that quotes the name.
        if let Some(why) = crate::text::name_problem(&name) {
            return Err(src.err(m.name.span(), format!("metric[{i}].name"), why));
        }
        if out.iter().any(|o| o.name == name) {
            return Err(src.err(
                m.name.span(),
                format!("metric[{i}].name"),
                format!("`{name}` appears twice"),
            ));
        }
        out.push(metric(src, i, m, default_threshold)?);
    }
    Ok(out)
}

/// One `[[metric]]`: what its name does not say must be given, and what it
/// gives must agree with its name.
fn metric(
    src: &Source,
    i: usize,
    m: RawMetric,
    default_threshold: f64,
) -> Result<MetricSpec, ConfigError> {
    let at = |f: &str| format!("metric[{i}].{f}");
    let name = m.name.get_ref().clone();
    src.check(
        &m.threshold_percent,
        at("threshold_percent"),
        threshold_percent_ok,
        THRESHOLD_PERCENT,
    )?;
    src.check(
        &m.quantile,
        at("quantile"),
        |q| (0.0..=1.0).contains(&q),
        "a quantile in [0, 1]",
    )?;
    let inferred = split_quantile(&name);
    named_consistently(&m, &name, inferred.as_ref())
        .map_err(|(field, msg)| src.err(m.name.span(), at(field), msg))?;
    let sample_given = m.sample.is_some();
    let sample = m
        .sample
        .or_else(|| inferred.as_ref().map(|(s, _)| s.clone()))
        .ok_or_else(|| {
            src.err(
                m.name.span(),
                at("name"),
                format!("cannot tell the sample of `{name}` (no _pNN part): give `sample`"),
            )
        })?;
    let quantile = m
        .quantile
        .map(|q| *q.get_ref())
        .or(inferred.map(|(_, q)| q))
        .ok_or_else(|| {
            src.err(
                m.name.span(),
                at("name"),
                format!("cannot tell the quantile of `{name}` (no _pNN part): give `quantile`"),
            )
        })?;
    // Refused here, not at the gate: a name no run records.
    if !crate::artifact::metric::SAMPLES.contains(&sample.as_str()) {
        let field = if sample_given { "sample" } else { "name" };
        return Err(src.err(
            m.name.span(),
            at(field),
            format!(
                "`{name}` gates on the sample `{sample}`, which no run records (runs record {})",
                crate::artifact::metric::SAMPLES.join(", ")
            ),
        ));
    }
    let direction = m
        .direction
        .or_else(|| infer_direction(&sample))
        .ok_or_else(|| {
            src.err(
                m.name.span(),
                at("name"),
                format!("cannot tell whether `{name}` is better lower or higher: give `direction`"),
            )
        })?;
    Ok(MetricSpec {
        name,
        sample,
        quantile,
        direction,
        threshold_percent: m
            .threshold_percent
            .map_or(default_threshold, |s| *s.get_ref()),
    })
}

fn turnover(
    src: &Source,
    raw: Option<RawTurnover>,
    mut turnover: TurnoverPolicy,
) -> Result<TurnoverPolicy, ConfigError> {
    if let Some(t) = raw {
        src.check(&t.alpha, "turnover.alpha".into(), open_unit, "in (0, 1)")?;
        src.check(
            &t.confidence,
            "turnover.confidence".into(),
            open_unit,
            "in (0, 1)",
        )?;
        turnover.gate = t.gate.unwrap_or(turnover.gate);
        turnover.alpha = t.alpha.map_or(turnover.alpha, |s| *s.get_ref());
        turnover.confidence = t.confidence.map_or(turnover.confidence, |s| *s.get_ref());
        src.check(&t.margin, "turnover.margin".into(), open_unit, "in (0, 1)")?;
        turnover.margin = t.margin.map_or(turnover.margin, |s| *s.get_ref());
    }
    Ok(turnover)
}

fn gate(
    src: &Source,
    raw: Option<RawGate>,
    mut gate: GatePolicy,
) -> Result<GatePolicy, ConfigError> {
    if let Some(g) = raw {
        src.check(
            &g.alpha,
            "gate.alpha".into(),
            |a| a > 0.0 && a < 0.5,
            "in (0, 0.5)",
        )?;
        src.check(
            &g.drift_sd_percent,
            "gate.drift_sd_percent".into(),
            threshold_ok,
            "a finite percentage ≥ 0",
        )?;
        gate.decide = g.decide.unwrap_or(gate.decide);
        gate.spending = g.spending.unwrap_or(gate.spending);
        gate.alpha = g.alpha.map_or(gate.alpha, |s| *s.get_ref());
        if let Some(d) = g.drift_sd_percent {
            gate.drift_sd_percent = *d.get_ref();
            gate.drift_source = format!("policy {}", src.file);
        }
    }
    Ok(gate)
}

fn bootstrap(
    src: &Source,
    raw: Option<RawBootstrap>,
    mut bootstrap: BootstrapConfig,
) -> Result<BootstrapConfig, ConfigError> {
    if let Some(b) = raw {
        src.check(
            &b.confidence,
            "bootstrap.confidence".into(),
            open_unit,
            "in (0, 1)",
        )?;
        if let Some(it) = &b.iterations {
            bootstrap.iterations = usize::try_from(*it.get_ref())
                .ok()
                .filter(|n| (1..=MAX_BOOTSTRAP_ITERATIONS).contains(n))
                .ok_or_else(|| {
                    src.err(
                        it.span(),
                        "bootstrap.iterations".into(),
                        format!(
                            "{} is not a count from 1 to {MAX_BOOTSTRAP_ITERATIONS}",
                            it.get_ref()
                        ),
                    )
                })?;
        }
        if let Some(s) = &b.seed {
            bootstrap.seed = u64::try_from(*s.get_ref()).map_err(|_| {
                src.err(
                    s.span(),
                    "bootstrap.seed".into(),
                    format!("{} is negative", s.get_ref()),
                )
            })?;
        }
        bootstrap.confidence = b.confidence.map_or(bootstrap.confidence, |s| *s.get_ref());
    }
    Ok(bootstrap)
}

/// The `[[slo]]` tables: at most one per cell and one for every cell.
fn slos(src: &Source, raw: Vec<RawSlo>) -> Result<Vec<SloSpec>, ConfigError> {
    let mut slo: Vec<SloSpec> = Vec::new();
    for (i, raw) in raw.into_iter().enumerate() {
        let at = |f: &str| format!("slo[{i}].{f}");
        // toml keeps no span for the table itself: point at its first field.
        let span = [
            raw.cell.as_ref().map(Spanned::span),
            raw.ttft_ms.as_ref().map(Spanned::span),
            raw.tpot_ms.as_ref().map(Spanned::span),
            raw.e2e_ms.as_ref().map(Spanned::span),
            raw.min_attainment.as_ref().map(Spanned::span),
            raw.margin_points.as_ref().map(Spanned::span),
        ]
        .into_iter()
        .flatten()
        .min_by_key(|r| r.start)
        .unwrap_or(0..0);
        let cell = raw.cell.map(Spanned::into_inner);
        if slo.iter().any(|s| s.cell == cell) {
            let which = cell
                .as_deref()
                .map_or("every cell".to_string(), |c| format!("cell `{c}`"));
            return Err(src.err(span, at("cell"), format!("a second SLO for {which}")));
        }
        let value = |v: &Option<Spanned<f64>>| v.as_ref().map(|v| *v.get_ref());
        let targets = Slo {
            ttft_ms: value(&raw.ttft_ms),
            tpot_ms: value(&raw.tpot_ms),
            e2e_ms: value(&raw.e2e_ms),
            min_attainment: value(&raw.min_attainment),
        };
        if let Some(why) = targets.problem() {
            return Err(src.err(span, format!("slo[{i}]"), why));
        }
        src.check(
            &raw.margin_points,
            at("margin_points"),
            |m| m.is_finite() && (0.0..100.0).contains(&m),
            "a margin in percentage points in [0, 100)",
        )?;
        slo.push(SloSpec {
            cell,
            targets,
            margin_points: raw
                .margin_points
                .map_or(DEFAULT_SLO_MARGIN_POINTS, |m| *m.get_ref()),
        });
    }
    Ok(slo)
}

fn quality(src: &Source, raw: Option<RawQuality>) -> Result<QualityPolicy, ConfigError> {
    let mut quality = QualityPolicy::default();
    if let Some(q) = raw {
        src.check(
            &q.near_tie_nats,
            "quality.near_tie_nats".into(),
            threshold_ok,
            "a finite number of nats ≥ 0",
        )?;
        let percent_ok: fn(f64) -> bool = |m| m.is_finite() && (0.0..100.0).contains(&m);
        src.check(
            &q.hard_margin_percent,
            "quality.hard_margin_percent".into(),
            percent_ok,
            "a percentage in [0, 100)",
        )?;
        src.check(
            &q.accuracy_margin_points,
            "quality.accuracy_margin_points".into(),
            percent_ok,
            "points in [0, 100)",
        )?;
        src.check(
            &q.feature_margin_points,
            "quality.feature_margin_points".into(),
            percent_ok,
            "points in [0, 100)",
        )?;
        for (v, name) in [
            (&q.embedding_cosine_min, "quality.embedding_cosine_min"),
            (
                &q.embedding_cosine_mean_min,
                "quality.embedding_cosine_mean_min",
            ),
        ] {
            src.check(v, name.into(), cosine_ok, COSINE)?;
        }
        quality.embedding_cosine_min = q
            .embedding_cosine_min
            .map_or(quality.embedding_cosine_min, |s| *s.get_ref());
        quality.embedding_cosine_mean_min = q
            .embedding_cosine_mean_min
            .map_or(quality.embedding_cosine_mean_min, |s| *s.get_ref());
        quality.embedding_floors =
            embedding_floors(src, q.embeddings.unwrap_or_default(), &quality)?;
        quality.feature_margin_points = q
            .feature_margin_points
            .map_or(quality.feature_margin_points, |s| *s.get_ref());
        quality.hard_margin_percent = q
            .hard_margin_percent
            .map_or(quality.hard_margin_percent, |s| *s.get_ref());
        quality.accuracy_margin_points = q
            .accuracy_margin_points
            .map_or(quality.accuracy_margin_points, |s| *s.get_ref());
        quality.cross_runtime = q.cross_runtime.unwrap_or(quality.cross_runtime);
        quality.near_tie_nats = q
            .near_tie_nats
            .map_or(quality.near_tie_nats, |s| *s.get_ref());
    }
    Ok(quality)
}

fn cosine_ok(c: f64) -> bool {
    c.is_finite() && (-1.0..=1.0).contains(&c)
}
const COSINE: &str = "a cosine in [-1, 1]";

/// The `[[quality.embeddings]]` tables: one per named workload, a floor it
/// leaves out taken from `[quality]`'s.
fn embedding_floors(
    src: &Source,
    raw: Vec<RawEmbeddingFloors>,
    quality: &QualityPolicy,
) -> Result<Vec<EmbeddingFloors>, ConfigError> {
    let mut out: Vec<EmbeddingFloors> = Vec::new();
    for (i, raw) in raw.into_iter().enumerate() {
        let at = |f: &str| format!("quality.embeddings[{i}].{f}");
        let workload = raw.workload.get_ref().trim().to_string();
        if workload.is_empty() || out.iter().any(|f| f.workload == workload) {
            let why = if workload.is_empty() {
                "an empty workload name".to_string()
            } else {
                format!("a second floor for workload `{workload}`")
            };
            return Err(src.err(raw.workload.span(), at("workload"), why));
        }
        src.check(&raw.cosine_min, at("cosine_min"), cosine_ok, COSINE)?;
        src.check(
            &raw.cosine_mean_min,
            at("cosine_mean_min"),
            cosine_ok,
            COSINE,
        )?;
        out.push(EmbeddingFloors {
            workload,
            cosine_min: raw
                .cosine_min
                .map_or(quality.embedding_cosine_min, |s| *s.get_ref()),
            cosine_mean_min: raw
                .cosine_mean_min
                .map_or(quality.embedding_cosine_mean_min, |s| *s.get_ref()),
        });
    }
    Ok(out)
}

/// A metric named `<sample>_pNN…` may not declare another sample,
/// quantile or direction than its name says: a report would then call
/// `ttft_p50_ms` what is a p90 (and `verify` rejects such reports).
fn named_consistently(
    m: &RawMetric,
    name: &str,
    inferred: Option<&(String, f64)>,
) -> Result<(), (&'static str, String)> {
    if let (Some((s, _)), Some(found)) = (inferred, &m.sample)
        && found != s
    {
        return Err((
            "sample",
            format!("sample `{found}` disagrees with the name `{name}` (sample `{s}`)"),
        ));
    }
    if let (Some((_, q)), Some(found)) = (inferred, &m.quantile)
        && found.get_ref() != q
    {
        return Err((
            "quantile",
            format!(
                "quantile {} disagrees with the name `{name}` (quantile {q})",
                found.get_ref()
            ),
        ));
    }
    let sample = m
        .sample
        .clone()
        .or_else(|| inferred.map(|(s, _)| s.clone()));
    if let (Some(found), Some(d)) = (m.direction, sample.as_deref().and_then(infer_direction))
        && found != d
    {
        return Err((
            "direction",
            format!("direction {found:?} disagrees with the name `{name}`, which says {d:?}"),
        ));
    }
    Ok(())
}
