//! The comparison policy: which metrics gate, their thresholds and
//! directions, the turnover gate mode and the bootstrap settings. Read from a
//! TOML file (see `policies/default.toml`) or built from defaults.
//!
//! ```toml
//! threshold_percent = 5            # default for every metric
//!
//! [[metric]]
//! name = "ttft_p50_ms"             # sample `ttft_ms`, quantile 0.5 and
//! threshold_percent = 3            # lower-is-better follow from the name
//!
//! [turnover]
//! gate = "non_inferior"            # or "strict"
//! alpha = 0.05
//!
//! [bootstrap]
//! iterations = 10000
//! confidence = 0.95
//! seed = 7
//!
//! [[slo]]                          # gate on SLO attainment (a binomial)
//! cell = "c1-256"                  # absent: every cell
//! ttft_ms = 1500                   # any subset of ttft_ms, tpot_ms, e2e_ms
//! tpot_ms = 80
//! margin_points = 5                # the attainment may drop at most 5 points
//!
//! [quality]
//! cross_runtime = "near_tie"       # or "exact" (the default), or "rate"
//! near_tie_nats = 0.5              # tolerance of a near-tie divergence
//! hard_margin_percent = 10         # "rate": the hard-divergence share's margin
//! accuracy_margin_points = 5       # task accuracy may drop at most 5 points
//! feature_margin_points = 5        # a feature's delivered share (valid JSON, …) likewise
//! embedding_cosine_min = 0.85      # embeddings: every input's cosine across runtimes at least
//! embedding_cosine_mean_min = 0.97 # and their mean at least
//!
//! [[quality.embeddings]]           # one embeddings workload's own floors
//! workload = "alone"
//! cosine_min = 0.999
//! ```

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::config_error::{ConfigError, line_col};

use crate::artifact::Slo;
use crate::stats::evidence::Spending;
use crate::stats::{BootstrapConfig, Direction};

pub use super::model::PolicySlo as SloSpec;
pub use super::model::TurnoverGateMode;
use super::model::{PolicyMetric, PolicySummary};

pub const DEFAULT_THRESHOLD_PERCENT: f64 = 5.0;
pub const DEFAULT_METRICS: [&str; 3] = ["ttft_p50_ms", "e2e_p50_ms", "decode_tok_s_p50"];
pub const DEFAULT_ALPHA: f64 = 0.05;
pub const DEFAULT_TURNOVER_CONFIDENCE: f64 = 0.95;

/// One gating metric: the `quantile` of per-request `sample` values.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSpec {
    /// Name in the report (`ttft_p50_ms`).
    pub name: String,
    /// Per-request sample key in the run artifact (`ttft_ms`).
    pub sample: String,
    pub quantile: f64,
    pub direction: Direction,
    pub threshold_percent: f64,
}

impl MetricSpec {
    /// A metric whose sample, quantile and direction follow from its name.
    pub fn from_name(name: &str, threshold_percent: f64) -> Option<MetricSpec> {
        let (sample, quantile) = split_quantile(name)?;
        Some(MetricSpec {
            name: name.to_string(),
            direction: infer_direction(&sample)?,
            sample,
            quantile,
            threshold_percent,
        })
    }
}

/// `ttft_p50_ms` → (`ttft_ms`, 0.5); `decode_tok_s_p99` → (`decode_tok_s`,
/// 0.99); `e2e_p999_ms` → (`e2e_ms`, 0.999). None without a `_pNN` part.
pub fn split_quantile(name: &str) -> Option<(String, f64)> {
    let parts: Vec<&str> = name.split('_').collect();
    let (i, digits) = parts.iter().enumerate().find_map(|(i, p)| {
        let d = p.strip_prefix('p')?;
        (i > 0 && !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())).then_some((i, d))
    })?;
    // pNN is NN percent, so the quantile is "0.NN" (p5 → 0.05, p999 → 0.999),
    // parsed from text to avoid a rounding step; p100 is the maximum.
    let quantile: f64 = match digits {
        "100" => 1.0,
        d if d.len() == 1 => format!("0.0{d}").parse().ok()?,
        d => format!("0.{d}").parse().ok()?,
    };
    let mut rest = parts;
    rest.remove(i);
    Some((rest.join("_"), quantile))
}

/// Throughputs (`tok_s` anywhere in the name) are better higher; latencies
/// (ending `_ms`) better lower. None when the name says neither.
pub fn infer_direction(name: &str) -> Option<Direction> {
    if name.contains("tok_s") {
        Some(Direction::HigherIsBetter)
    } else if name.ends_with("_ms") {
        Some(Direction::LowerIsBetter)
    } else {
        None
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnoverPolicy {
    pub gate: TurnoverGateMode,
    /// Significance level of the one-sided test in `non_inferior` mode.
    pub alpha: f64,
    /// Confidence of the Clopper–Pearson failure-rate intervals.
    pub confidence: f64,
    /// Non-inferiority margin on the failure-rate difference (candidate −
    /// baseline): the one-sided upper bound at `1 − alpha` must be below it.
    pub margin: f64,
}

// Defined beside the classifier (no import cycle through the report model).
pub use crate::agreement::{CrossRuntime, EmbeddingFloors, QualityPolicy};

/// Which rule decides the qualification's performance part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateRule {
    /// Confidence bounds against each margin: pass, fail or inconclusive.
    Evidence,
    /// The seed's point-delta flags (`no_more_than_<T>_percent_regression`).
    Point,
}

impl GateRule {
    pub fn as_str(self) -> &'static str {
        match self {
            GateRule::Evidence => "evidence",
            GateRule::Point => "point",
        }
    }
}

/// The evidence gate's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct GatePolicy {
    pub decide: GateRule,
    /// One-sided error of the gate: the chance of failing a runtime no worse
    /// than its margins (family-wise), and of passing one that is worse.
    pub alpha: f64,
    /// Between-pass s.d. (percent) assumed when the design cannot measure
    /// drift (one pass per side at different times) and no calibration is given.
    pub drift_sd_percent: f64,
    /// Where `drift_sd_percent` came from.
    pub drift_source: String,
    /// How an adaptive run shares `alpha` between its looks.
    pub spending: Spending,
}

pub const DEFAULT_GATE_ALPHA: f64 = 0.05;
/// ±12 % run-to-run range of p50 TTFT measured on the reference engine ≈ ±2 s.d.
pub const DEFAULT_DRIFT_SD_PERCENT: f64 = 6.0;
/// Default non-inferiority margin on SLO attainment, in percentage points.
pub const DEFAULT_SLO_MARGIN_POINTS: f64 = 5.0;
/// Default turnover non-inferiority margin: 5 percentage points of failure rate.
pub const DEFAULT_TURNOVER_MARGIN: f64 = 0.05;

impl Default for GatePolicy {
    fn default() -> Self {
        GatePolicy {
            decide: GateRule::Evidence,
            alpha: DEFAULT_GATE_ALPHA,
            drift_sd_percent: DEFAULT_DRIFT_SD_PERCENT,
            drift_source: "policy default (6%: the ±12% run-to-run range measured on the reference engine); run `infergate calibrate` for this runtime and suite".into(),
            spending: Spending::OBrienFleming,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// "defaults" or the file it was read from.
    pub source: String,
    pub metrics: Vec<MetricSpec>,
    pub turnover: TurnoverPolicy,
    pub bootstrap: BootstrapConfig,
    pub gate: GatePolicy,
    /// SLOs to gate on, per cell (a spec without a cell applies to every
    /// cell; a cell's own spec wins over it).
    pub slo: Vec<SloSpec>,
    pub quality: QualityPolicy,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            source: "defaults".to_string(),
            metrics: DEFAULT_METRICS
                .iter()
                .filter_map(|n| MetricSpec::from_name(n, DEFAULT_THRESHOLD_PERCENT))
                .collect(),
            turnover: TurnoverPolicy {
                gate: TurnoverGateMode::Strict,
                alpha: DEFAULT_ALPHA,
                confidence: DEFAULT_TURNOVER_CONFIDENCE,
                margin: DEFAULT_TURNOVER_MARGIN,
            },
            bootstrap: BootstrapConfig::default(),
            gate: GatePolicy::default(),
            slo: Vec::new(),
            quality: QualityPolicy::default(),
        }
    }
}

impl Policy {
    /// Every metric with the same threshold (e.g. to name the flag
    /// `no_more_than_3_percent_regression`).
    pub fn with_threshold(mut self, threshold_percent: f64) -> Policy {
        // No longer what its source says (`verify` holds "defaults" to the defaults).
        self.source = format!("{} with threshold_percent {threshold_percent}", self.source);
        for m in &mut self.metrics {
            m.threshold_percent = threshold_percent;
        }
        self
    }

    /// The SLO spec that applies to `cell`: its own, else the one for every cell.
    pub fn slo_for(&self, cell: &str) -> Option<&SloSpec> {
        let own = self.slo.iter().find(|s| s.cell.as_deref() == Some(cell));
        own.or_else(|| self.slo.iter().find(|s| s.cell.is_none()))
    }

    pub fn summary(&self) -> PolicySummary {
        PolicySummary {
            source: self.source.clone(),
            metrics: self
                .metrics
                .iter()
                .map(|m| PolicyMetric {
                    name: m.name.clone(),
                    sample: m.sample.clone(),
                    quantile: m.quantile,
                    direction: m.direction,
                    threshold_percent: m.threshold_percent,
                })
                .collect(),
            turnover_gate: self.turnover.gate,
            alpha: self.turnover.alpha,
            slo: self.slo.clone(),
        }
    }

    pub fn from_file(path: &Path) -> Result<Policy, ConfigError> {
        let text = crate::files::read_regular(path)
            .and_then(|b| {
                String::from_utf8(b)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|e| {
                ConfigError::file(path.display().to_string(), format!("cannot read: {e}"))
            })?;
        Policy::from_toml_str(&text, &path.display().to_string())
    }

    /// Parse policy text; `file` names it in errors.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Policy, ConfigError> {
        let raw: RawPolicy = toml::from_str(text).map_err(|e| ConfigError::toml(file, text, &e))?;
        raw.into_policy(text, file)
    }
}

/// Most bootstrap resamples a policy may ask for: 100 × the default, far past
/// any gain in precision; beyond it `compare` would run for hours (and hold
/// one f64 per resample).
pub const MAX_BOOTSTRAP_ITERATIONS: usize = 1_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
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

/// Largest regression threshold a metric may have, percent: 1000 % is an
/// eleven-fold slowdown, already past any gate worth the name; beyond it a
/// threshold (1e308) only overflows the arithmetic made of it.
pub const MAX_THRESHOLD_PERCENT: f64 = 1000.0;

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
    fn into_policy(self, text: &str, file: &str) -> Result<Policy, ConfigError> {
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
        Ok(Policy {
            source: file.to_string(),
            metrics,
            turnover,
            bootstrap,
            gate,
            slo,
            quality,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_declares_nothing_its_name_contradicts() {
        for (text, field) in [
            (
                "[[metric]]\nname = \"ttft_p50_ms\"\nquantile = 0.9\n",
                "metric[0].quantile",
            ),
            (
                "[[metric]]\nname = \"ttft_p50_ms\"\nsample = \"e2e_ms\"\n",
                "metric[0].sample",
            ),
            (
                "[[metric]]\nname = \"e2e_p50_ms\"\ndirection = \"higher_is_better\"\n",
                "metric[0].direction",
            ),
        ] {
            let e = Policy::from_toml_str(text, "p.toml").expect_err(text);
            assert_eq!(e.field.as_deref(), Some(field), "{e}");
        }
        // Agreeing declarations, and names without a pNN part, are fine.
        Policy::from_toml_str(
            "[[metric]]\nname = \"ttft_p50_ms\"\nquantile = 0.5\n",
            "p.toml",
        )
        .expect("agrees");
        Policy::from_toml_str(
            "[[metric]]\nname = \"queue\"\nsample = \"queue_ms\"\nquantile = 0.9\n",
            "p.toml",
        )
        .expect("no pNN");
    }

    #[test]
    fn a_metric_name_with_a_line_break_is_refused_by_line_and_field() {
        let text = "[[metric]]\nname = \"ttft_p90_ms\\n# forged\"\nsample = \"ttft_ms\"\n";
        let e = Policy::from_toml_str(text, "p.toml").expect_err("a line break in a name");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("metric[0].name")),
            "{e}"
        );
        assert!(
            e.message
                .starts_with("a line break (U+000A) at character 12 is not allowed in a name"),
            "{e}"
        );
    }

    #[test]
    fn control_character_in_a_comment_gets_a_message() {
        // Found by fuzzing: toml's own message is empty here.
        let e = Policy::from_toml_str("# a\u{7}b\nthreshold_percent = 5\n", "p.toml")
            .expect_err("BEL in a comment");
        assert_eq!((e.line, e.column), (Some(1), Some(4)), "{e}");
        assert!(e.message.contains("U+0007"), "{e}");
    }

    #[test]
    fn default_metrics_are_the_seeds_three() {
        let p = Policy::default();
        let got: Vec<(&str, &str, f64, Direction, f64)> = p
            .metrics
            .iter()
            .map(|m| {
                (
                    m.name.as_str(),
                    m.sample.as_str(),
                    m.quantile,
                    m.direction,
                    m.threshold_percent,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("ttft_p50_ms", "ttft_ms", 0.5, Direction::LowerIsBetter, 5.0),
                ("e2e_p50_ms", "e2e_ms", 0.5, Direction::LowerIsBetter, 5.0),
                (
                    "decode_tok_s_p50",
                    "decode_tok_s",
                    0.5,
                    Direction::HigherIsBetter,
                    5.0
                ),
            ]
        );
        assert_eq!(p.turnover.gate, TurnoverGateMode::Strict);
    }

    #[test]
    fn sample_policy_file_is_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../policies/default.toml");
        let p = Policy::from_file(&path).expect("policies/default.toml parses");
        assert_eq!(
            Policy {
                source: "defaults".into(),
                ..p
            },
            Policy::default()
        );
    }

    #[test]
    fn quality_cross_runtime_defaults_to_exact_and_parses() {
        let d = Policy::default().quality;
        assert_eq!(
            (d.cross_runtime, d.near_tie_nats),
            (CrossRuntime::Exact, 0.5)
        );
        let p = Policy::from_toml_str(
            "[quality]\ncross_runtime = \"near_tie\"\nnear_tie_nats = 0.25\n",
            "p.toml",
        )
        .expect("valid policy");
        assert_eq!(
            (p.quality.cross_runtime, p.quality.near_tie_nats),
            (CrossRuntime::NearTie, 0.25)
        );
        let e = Policy::from_toml_str("[quality]\nnear_tie_nats = -1\n", "p.toml").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("quality.near_tie_nats"));
        assert!(Policy::from_toml_str("[quality]\ncross_runtime = \"loose\"\n", "p.toml").is_err());
    }

    /// `[[quality.embeddings]]`: a workload's own floors, what it leaves
    /// out taken from `[quality]`; a second table for one workload, an
    /// empty name, a cosine out of range or an unknown field is refused
    /// with its line and field.
    #[test]
    fn a_workload_may_have_its_own_embedding_floors() {
        let p = Policy::from_toml_str(
            "[quality]\nembedding_cosine_mean_min = 0.9\n[[quality.embeddings]]\nworkload = \"alone\"\ncosine_min = 0.99\n",
            "p.toml",
        )
        .expect("valid policy");
        assert_eq!(p.quality.embedding_floors_for("alone"), (0.99, 0.9));
        assert_eq!(p.quality.embedding_floors_for("other"), (0.85, 0.9));
        let refused = |text: &str| Policy::from_toml_str(text, "p.toml").unwrap_err();
        let twice =
            "[[quality.embeddings]]\nworkload = \"a\"\n[[quality.embeddings]]\nworkload = \"a\"\n";
        let e = refused(twice);
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(4), Some("quality.embeddings[1].workload"))
        );
        assert!(e.message.contains("a second floor for workload `a`"), "{e}");
        let e = refused("[[quality.embeddings]]\nworkload = \" \"\n");
        assert!(e.message.contains("empty workload name"), "{e}");
        let e = refused("[[quality.embeddings]]\nworkload = \"a\"\ncosine_min = 1.5\n");
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(3), Some("quality.embeddings[0].cosine_min"))
        );
        let e = refused("[[quality.embeddings]]\nworkload = \"a\"\ncosine = 0.9\n");
        assert!(format!("{e}").contains("cosine"), "{e}");
        assert!(
            refused("[[quality.embeddings]]\ncosine_min = 0.9\n")
                .to_string()
                .contains("workload")
        );
    }

    #[test]
    fn quantile_names() {
        assert_eq!(
            split_quantile("e2e_p999_ms"),
            Some(("e2e_ms".into(), 0.999))
        );
        assert_eq!(split_quantile("itl_p90_ms"), Some(("itl_ms".into(), 0.9)));
        assert_eq!(split_quantile("x_p5_ms"), Some(("x_ms".into(), 0.05)));
        assert_eq!(split_quantile("x_p100_ms"), Some(("x_ms".into(), 1.0)));
        assert_eq!(split_quantile("ttft_ms"), None);
    }

    #[test]
    fn file_overrides_and_inherits() {
        let p = Policy::from_toml_str(
            "threshold_percent = 3\n[[metric]]\nname = \"ttft_p50_ms\"\n[[metric]]\nname = \"e2e_p90_ms\"\nthreshold_percent = 10\n[turnover]\ngate = \"non_inferior\"\nalpha = 0.01\n[bootstrap]\niterations = 500\nseed = 9\n",
            "p.toml",
        )
        .expect("valid policy");
        assert_eq!(p.metrics.len(), 2);
        assert_eq!(p.metrics[0].threshold_percent, 3.0);
        assert_eq!(
            (p.metrics[1].quantile, p.metrics[1].threshold_percent),
            (0.9, 10.0)
        );
        assert_eq!(p.turnover.gate, TurnoverGateMode::NonInferior);
        assert_eq!(p.turnover.alpha, 0.01);
        assert_eq!((p.bootstrap.iterations, p.bootstrap.seed), (500, 9));
        assert_eq!(p.source, "p.toml");
    }

    #[test]
    fn top_level_threshold_applies_to_default_metrics() {
        let p = Policy::from_toml_str("threshold_percent = 2.5\n", "p.toml").expect("valid");
        assert!(p.metrics.iter().all(|m| m.threshold_percent == 2.5));
        assert_eq!(p.metrics.len(), 3);
    }

    #[test]
    fn slo_specs_parse_and_a_cells_own_wins_over_every_cells() {
        let p = Policy::from_toml_str(
            "[[slo]]\nttft_ms = 2000\n[[slo]]\ncell = \"c1\"\nttft_ms = 500\ntpot_ms = 40\nmargin_points = 2\n",
            "p.toml",
        )
        .unwrap();
        let own = p.slo_for("c1").unwrap();
        assert_eq!(
            (own.targets.ttft_ms, own.targets.tpot_ms, own.margin_points),
            (Some(500.0), Some(40.0), 2.0)
        );
        let any = p.slo_for("c2").unwrap();
        assert_eq!(
            (any.targets.ttft_ms, any.margin_points),
            (Some(2000.0), DEFAULT_SLO_MARGIN_POINTS)
        );
        assert!(Policy::default().slo_for("c1").is_none());
        for (text, field) in [
            ("[[slo]]\ncell = \"c\"\n", "slo[0]"),
            ("[[slo]]\ncell = \"c\"\nttft_ms = -1\n", "slo[0]"),
            (
                "[[slo]]\nttft_ms = 1\nmargin_points = 100\n",
                "slo[0].margin_points",
            ),
            ("[[slo]]\nttft_ms = 1\n[[slo]]\ne2e_ms = 1\n", "slo[1].cell"),
            ("[[slo]]\nttft = 1\n", "slo"),
        ] {
            let e = Policy::from_toml_str(text, "p.toml").expect_err(text);
            assert!(
                e.field.as_deref().is_some_and(|f| f.starts_with(field)),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn spending_defaults_to_obrien_fleming_and_can_be_bonferroni() {
        assert_eq!(Policy::default().gate.spending, Spending::OBrienFleming);
        let p = Policy::from_toml_str("[gate]\nspending = \"bonferroni\"\n", "p.toml").unwrap();
        assert_eq!(p.gate.spending, Spending::Bonferroni);
        let p = Policy::from_toml_str("[gate]\nspending = \"pocock\"\n", "p.toml").unwrap();
        assert_eq!(p.gate.spending, Spending::Pocock);
    }

    #[test]
    fn the_method_is_no_gate_setting() {
        // How compare computes (`design::Method`) is not the user's to set.
        for (text, field) in [
            ("[gate]\nblock_mean = \"mean\"\n", "gate.block_mean"),
            (
                "[gate]\n\ndesign_spread = \"bounds\"\n",
                "gate.design_spread",
            ),
            (
                "[gate]\nalpha = 0.05\npair_requests = false\n",
                "gate.pair_requests",
            ),
        ] {
            let e = Policy::from_toml_str(text, "pol.toml").expect_err(text);
            let line = text.lines().count();
            assert_eq!(
                (e.line, e.field.as_deref()),
                (Some(line), Some(field)),
                "{text}: {e}"
            );
            assert!(
                e.to_string().starts_with(&format!("pol.toml:{line}:")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_threshold_past_1000_percent_is_refused_with_its_value() {
        let e = Policy::from_toml_str("threshold_percent = 1e308\n", "p.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.toml:1:21: field `threshold_percent`: 1e308 is not a percentage in [0, 1000]"
        );
        let p = Policy::from_toml_str("threshold_percent = 1000\n", "p.toml").unwrap();
        assert!(p.metrics.iter().all(|m| m.threshold_percent == 1000.0));
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let cases = [
            ("[turnover]\ngate = \"bogus\"\n", 2, "turnover.gate"),
            ("[turnover]\nalpah = 0.1\n", 2, "turnover.alpah"),
            ("[turnover]\nalpha = 1.5\n", 2, "turnover.alpha"),
            ("[bootstrap]\niterations = 0\n", 2, "bootstrap.iterations"),
            (
                "[bootstrap]\niterations = 1000000000000\n",
                2,
                "bootstrap.iterations",
            ),
            (
                "[[metric]]\nname = \"ttft_p50_ms\"\n[[metric]]\nname = \"queue_depth\"\n",
                4,
                "metric[1].name",
            ),
            (
                "[[metric]]\nname = \"ttft_p50_ms\"\nthreshold_percent = \"x\"\n",
                3,
                "metric[0].threshold_percent",
            ),
            ("threshold_percent = -1\n", 1, "threshold_percent"),
            ("\nthreshold_percent = 1e308\n", 2, "threshold_percent"),
            (
                "[[metric]]\nname = \"ttft_p50_ms\"\nthreshold_percent = 1000.5\n",
                3,
                "metric[0].threshold_percent",
            ),
            (
                "[[metric]]\nname = \"ttft_p50_ms\"\n\n[[metric]]\nname = \"foo_p50_ms\"\n",
                5,
                "metric[1].name",
            ),
            (
                "[[metric]]\nname = \"q\"\nsample = \"foo_ms\"\nquantile = 0.5\n",
                2,
                "metric[0].sample",
            ),
            ("[gate]\nspending = \"haybittle\"\n", 2, "gate.spending"),
        ];
        for (text, line, field) in cases {
            let e = Policy::from_toml_str(text, "pol.toml").expect_err(text);
            assert_eq!(e.line, Some(line), "{text}: {e}");
            assert_eq!(e.field.as_deref(), Some(field), "{text}: {e}");
            let shown = e.to_string();
            assert!(shown.starts_with(&format!("pol.toml:{line}:")), "{shown}");
            assert!(shown.contains(field), "{shown}");
        }
    }
}
