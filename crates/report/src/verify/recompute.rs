//! Bit-for-bit recomputation of a compare-made report from what it holds:
//! the policy, method and look (from its `policy` and `statistics`
//! blocks), and each side's
//! cells (per-request samples and clusters, requests, eligibility) and
//! turnover runs rebuilt into run artifacts, then `compare` run again. Every
//! derived field must come out identical: values, deltas, flags, intervals,
//! verdicts, evidence bounds and outcomes, requests to resolve, gates,
//! turnover tests, qualification. A field the recomputation does not write
//! is a disagreement too.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::artifact::{
    CellResult, CellShape, Provenance, RUN_SCHEMA, RequestRow, RunArtifact, Schedule, Slo,
    TurnoverFailure, TurnoverRun,
};
use crate::slo;

use super::super::checker::{Checker, join};
use super::super::compare::{Given, compare_given};
use super::super::model::{Report, Side, parse_turnover_key};
use super::params::{self, Params};
use crate::embedding::EmbeddingAgreement;
use crate::reference::ReferenceComparison;

/// Fields a person writes, not `compare`: never recomputed.
const HUMAN: [&str; 3] = ["promotion", "human_decision", "decision"];

/// Recompute the report and compare it with the one found. Returns the
/// recomputed report, when the report holds enough to make it.
pub(super) fn check(
    ck: &mut Checker,
    root: &Map<String, Value>,
    params: &Params,
) -> Option<Report> {
    if !params.made_by_compare {
        return None;
    }
    let made = match params::made_with(root, params) {
        Ok(m) => m,
        Err(why) => {
            ck.limit(format!("bit-for-bit recomputation of the report: {why}"));
            return None;
        }
    };
    let (b, c) = match artifacts_from_report(root) {
        Ok(x) => x,
        Err(why) => {
            ck.limit(format!("bit-for-bit recomputation of the report: {why}"));
            return None;
        }
    };
    // The reference texts are not kept: the comparison `references` checks
    // from its own kept tokens stands in for them.
    let given = root
        .get("reference_comparison")
        .and_then(|v| serde_json::from_value::<ReferenceComparison>(v.clone()).ok());
    let embeddings = root
        .get("quality")
        .and_then(|q| q.get("embeddings"))
        .and_then(|v| serde_json::from_value::<Vec<EmbeddingAgreement>>(v.clone()).ok())
        .map(|es| es.iter().map(EmbeddingAgreement::pair).collect());
    let given = Given {
        references: given.as_ref(),
        embeddings,
    };
    match compare_given(
        &b,
        &c,
        &made.policy,
        (&made.method, Some(&made.look)),
        given,
    ) {
        Ok(r) => {
            expect_report(ck, root, &r);
            Some(r)
        }
        Err(e) => {
            ck.push(
                "cells",
                "runs that compare refuses".into(),
                format!("comparable runs: {e}"),
            );
            None
        }
    }
}

/// Every field of `expected` (but the human ones and the warnings, which
/// depend on what the report does not keep) bit for bit in `root`.
pub(super) fn expect_report(ck: &mut Checker, root: &Map<String, Value>, expected: &Report) {
    let Value::Object(e) = expected.to_value() else {
        return;
    };
    for (k, ev) in &e {
        match k.as_str() {
            k if HUMAN.contains(&k) || k == "warnings" => {}
            // Inputs are recorded by `compare_files`, not recomputed.
            "provenance" => {
                for side in ["baseline", "candidate"] {
                    let found = root.get("provenance").and_then(|p| p.get(side));
                    ck.expect_exact(&join("provenance", side), found, &ev[side]);
                }
            }
            _ => ck.expect_exact(k, root.get(k), ev),
        }
    }
    for k in root.keys() {
        if parse_turnover_key(k).is_some() && !e.contains_key(k) {
            ck.push(
                k,
                "present".into(),
                "absent: no such run in the recomputation",
            );
        }
    }
}

/// A field a run may leave out.
fn optional<T: serde::de::DeserializeOwned>(
    run: &Value,
    key: &str,
    field: &str,
) -> Result<Option<T>, String> {
    run.get(field)
        .map(|v| parse(Some(v), &join(key, field)))
        .transpose()
}

fn parse<T: serde::de::DeserializeOwned>(v: Option<&Value>, what: &str) -> Result<T, String> {
    let v = v.ok_or(format!("no {what}"))?;
    serde_json::from_value(v.clone()).map_err(|e| format!("unreadable {what}: {e}"))
}

/// The two run artifacts the report describes, as far as `compare` reads them.
pub(super) fn artifacts_from_report(
    root: &Map<String, Value>,
) -> Result<(RunArtifact, RunArtifact), String> {
    let prov = root.get("provenance");
    let schedule: Option<Schedule> = root
        .get("statistics")
        .and_then(|s| s.get("design"))
        .map(|d| parse(d.get("schedule"), "statistics.design.schedule"))
        .transpose()?;
    let cells = root
        .get("cells")
        .and_then(Value::as_object)
        .ok_or("no cells")?;
    let order = cell_order(root, cells);
    // The report keeps the candidate's skip as its turnover gate's
    // `not_run` (the baseline's changes nothing compare writes).
    let not_run = root
        .get("turnover_gate")
        .and_then(|g| g.get("not_run"))
        .map(|v| parse(Some(v), "turnover_gate.not_run"))
        .transpose()?;
    let mut out = Vec::new();
    for side in [Side::Baseline, Side::Candidate] {
        let s = side.as_str();
        let provenance: Provenance =
            parse(prov.and_then(|p| p.get(s)), &format!("provenance.{s}"))?;
        let cells = order
            .iter()
            .map(|name| side_cell(name, &cells[name.as_str()], s))
            .collect::<Result<Vec<_>, _>>()?;
        out.push(RunArtifact {
            rate_sweeps: Vec::new(),
            embeddings: Vec::new(),
            schema: RUN_SCHEMA.to_string(),
            provenance,
            method: BTreeMap::new(),
            cells,
            turnover: side_turnover(root, side)?,
            schedule,
            turnover_not_run: not_run.filter(|_| side == Side::Candidate),
        });
    }
    let c = out.pop().ok_or("no candidate")?;
    let b = out.pop().ok_or("no baseline")?;
    Ok((b, c))
}

/// Cell names in the order the report's gate parts list them (the run's
/// order, which a JSON object does not keep), then any others by name.
fn cell_order(root: &Map<String, Value>, cells: &Map<String, Value>) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    let parts = root
        .get("gates")
        .and_then(|g| g.get("performance"))
        .and_then(|p| p.get("parts"))
        .and_then(Value::as_array);
    for part in parts.into_iter().flatten() {
        let Some(rest) = part
            .get("subject")
            .and_then(Value::as_str)
            .and_then(|s| s.strip_prefix("cells."))
        else {
            continue;
        };
        if let Some(name) = cells
            .keys()
            .filter(|k| rest.starts_with(&format!("{k}.")))
            .max_by_key(|k| k.len())
            && !order.contains(name)
        {
            order.push(name.clone());
        }
    }
    for k in cells.keys() {
        if !order.contains(k) {
            order.push(k.clone());
        }
    }
    order
}

fn side_cell(name: &str, cell: &Value, side: &str) -> Result<CellResult, String> {
    let fields = SideFields { name, cell, side };
    let requests: usize = fields.required("requests")?;
    let failed: usize = fields.optional("failed")?.unwrap_or(0);
    let (eligible, reasons) = side_eligibility(name, cell, side)?;
    let (samples, sample_clusters) = side_samples(&fields)?;
    let request_rows: Vec<RequestRow> = match cell.get("request_rows") {
        Some(pair) => parse(pair.get(side), &fields.at(&format!("request_rows.{side}")))?,
        None => Vec::new(),
    };
    let median_prompt_tokens = fields
        .optional::<Option<f64>>("median_prompt_tokens")?
        .flatten();
    // compare reads only the completion tokens' median from the metrics.
    let metrics = completion_metrics(fields.optional("median_completion_tokens")?);
    // Measured by the run, not derived: taken as given, carried through.
    let server_timings = fields.optional("server_timings")?;
    let server_metrics = fields.optional("server_metrics")?.unwrap_or_default();
    // Measured by the run (per turn or length): taken as given.
    let slices = fields.optional("slices")?.unwrap_or_default();
    let sessions = fields.optional("sessions")?;
    let speculative = fields.optional("speculative")?;
    let slo = suite_slo(&fields, &request_rows)?;
    Ok(CellResult {
        name: name.to_string(),
        shape: side_shape(cell),
        requests,
        succeeded: requests.saturating_sub(failed),
        failed,
        failures_by_class: BTreeMap::new(),
        performance_eligible: eligible,
        ineligible_reasons: reasons,
        median_prompt_tokens,
        metrics,
        samples,
        tokens_estimated: false,
        sample_clusters,
        // Not kept by a report; what they decided (comparability, warnings)
        // is in the report's own eligibility and warnings, taken as given.
        prompt_cache: None,
        speculative,
        expect: Default::default(),
        output_length: None,
        warnings: Vec::new(),
        server_timings,
        server_metrics,
        slices,
        sessions,
        request_rows,
        slo,
        capacity: side_capacity(&fields)?,
        // A replay's fidelity is the run's (its captured side is the trace's).
        fidelity: None,
    })
}

/// The side's capacity search, made again from its segments' counts and
/// lags (every level's evidence, the bracket, the estimate, the totals);
/// only how it stopped is taken as the report says (it rests on the
/// cell's `requests`, which a report does not keep).
fn side_capacity(fields: &SideFields) -> Result<Option<crate::capacity::CapacityRun>, String> {
    let Some(v) = fields.cell.get("capacity").and_then(|c| c.get(fields.side)) else {
        return Ok(None);
    };
    let run: crate::capacity::CapacityRun =
        parse(Some(v), &fields.at(&format!("capacity.{}", fields.side)))?;
    let segments: Vec<(f64, crate::capacity::SegmentRun)> = run
        .levels
        .iter()
        .flat_map(|l| l.segments.iter().map(move |s| (l.load, *s)))
        .collect();
    Ok(Some(crate::capacity::run::assemble(
        &run.spec,
        run.slo.clone(),
        run.min_attainment,
        &segments,
        run.stopped,
    )))
}

/// One side's fields of a report cell, read back as the run's.
struct SideFields<'a> {
    name: &'a str,
    cell: &'a Value,
    side: &'a str,
}

impl SideFields<'_> {
    /// Where `k` is, for an error.
    fn at(&self, k: &str) -> String {
        format!("cells.{}.{k}", self.name)
    }

    /// The cell's `{side}_{k}`, which it must have.
    fn required<T: serde::de::DeserializeOwned>(&self, k: &str) -> Result<T, String> {
        let key = format!("{}_{k}", self.side);
        parse(self.cell.get(&key), &self.at(&key))
    }

    /// The cell's `{side}_{k}`, when it has it.
    fn optional<T: serde::de::DeserializeOwned>(&self, k: &str) -> Result<Option<T>, String> {
        let key = format!("{}_{k}", self.side);
        match self.cell.get(&key) {
            Some(v) => parse(Some(v), &self.at(&key)).map(Some),
            None => Ok(None),
        }
    }
}

/// The side's per-request samples and their clusters, by sample name.
#[allow(clippy::type_complexity)]
fn side_samples(
    fields: &SideFields,
) -> Result<(BTreeMap<String, Vec<f64>>, BTreeMap<String, Vec<u32>>), String> {
    let side = fields.side;
    let mut samples = BTreeMap::new();
    let mut sample_clusters = BTreeMap::new();
    if let Some(s) = fields.cell.get("samples").and_then(Value::as_object) {
        for (k, pair) in s {
            let v: Vec<f64> = parse(pair.get(side), &fields.at(&format!("samples.{k}.{side}")))?;
            samples.insert(k.clone(), v);
            if let Some(c) = pair.get(format!("{side}_clusters")) {
                let c: Vec<u32> =
                    parse(Some(c), &fields.at(&format!("samples.{k}.{side}_clusters")))?;
                sample_clusters.insert(k.clone(), c);
            }
        }
    }
    Ok((samples, sample_clusters))
}

/// The shape as far as compare reads it.
fn side_shape(cell: &Value) -> CellShape {
    CellShape {
        prompt_tokens: 0,
        // Only the output-length check reads it (prompt sizes are not re-judged).
        tolerance_percent: cell
            .get("output_tolerance_percent")
            .and_then(Value::as_f64)
            .unwrap_or(f64::INFINITY),
        max_tokens: 0,
        concurrency: 0,
        requests: 0,
        warmup: 0,
        cache: String::new(),
        arrival: String::new(),
        temperature: 0.0,
        seed: None,
        workload: None,
        endpoint: None,
    }
}

/// The metrics with only the completion tokens' median, when the report has it.
fn completion_metrics(median: Option<f64>) -> BTreeMap<String, crate::stats::Summary> {
    match median {
        Some(p50) => {
            let s = crate::stats::Summary {
                n: 1,
                p50,
                p90: p50,
                p99: p50,
                mean: p50,
                min: p50,
                max: p50,
            };
            BTreeMap::from([(crate::artifact::metric::COMPLETION_TOKENS.to_string(), s)])
        }
        None => BTreeMap::new(),
    }
}

/// Suite SLOs travel with the runs; the policy's are in the policy block.
fn suite_slo(
    fields: &SideFields,
    request_rows: &[RequestRow],
) -> Result<Option<crate::artifact::SloAttainment>, String> {
    Ok(match fields.cell.get("slo") {
        Some(v) if v.get("source").and_then(Value::as_str) == Some("suite") => {
            let targets: Slo = parse(v.get("targets"), &fields.at("slo.targets"))?;
            Some(slo::attainment(&targets, request_rows))
        }
        _ => None,
    })
}

/// A side's eligibility as its run had it: the report's, less what
/// `compare` itself added for a cell that is not comparable (it adds it again).
fn side_eligibility(name: &str, cell: &Value, side: &str) -> Result<(bool, Vec<String>), String> {
    let at = |k: &str| format!("cells.{name}.{side}_{k}");
    let eligible: bool = parse(
        cell.get(format!("{side}_performance_eligible")),
        &at("performance_eligible"),
    )?;
    let mut reasons: Vec<String> = match cell.get(format!("{side}_ineligible_reasons")) {
        Some(v) => parse(Some(v), &at("ineligible_reasons"))?,
        None => Vec::new(),
    };
    let Some(nc) = cell.get("not_comparable").and_then(Value::as_str) else {
        return Ok((eligible, reasons));
    };
    reasons.retain(|r| r != nc);
    Ok((reasons.is_empty(), reasons))
}

/// A task workload's answers on `side`, as the report's `quality` kept them.
fn task_answers(root: &Map<String, Value>, side: Side, name: &str) -> String {
    let key = format!("{}_answers", side.as_str());
    root.get("quality")
        .and_then(|q| q.get("tasks"))
        .and_then(Value::as_array)
        .and_then(|ts| {
            ts.iter()
                .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
        })
        .and_then(|t| t.get(&key))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A workload's feature marks on `side`, as the report's `quality` kept
/// them (`features[]` of that workload).
fn feature_marks(
    root: &Map<String, Value>,
    side: Side,
    name: &str,
) -> std::collections::BTreeMap<String, String> {
    let key = format!("{}_answers", side.as_str());
    root.get("quality")
        .and_then(|q| q.get("features"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|f| f.get("name").and_then(Value::as_str) == Some(name))
        .filter_map(|f| {
            let feature = f.get("feature").and_then(Value::as_str)?;
            let marks = f.get(&key).and_then(Value::as_str)?;
            Some((feature.to_string(), marks.to_string()))
        })
        .collect()
}

/// A side's turnover runs in key order.
fn side_turnover(root: &Map<String, Value>, side: Side) -> Result<Vec<TurnoverRun>, String> {
    let mut keyed: Vec<(usize, &str, &Value)> = root
        .iter()
        .filter_map(|(k, v)| match parse_turnover_key(k) {
            Some((s, ordinal)) if s == side => Some((ordinal, k.as_str(), v)),
            _ => None,
        })
        .collect();
    keyed.sort_by_key(|(o, _, _)| *o);
    let mut out: Vec<TurnoverRun> = Vec::new();
    for (_, key, run) in keyed {
        let num = |k: &str| -> Result<usize, String> { parse(run.get(k), &join(key, k)) };
        let name: String = match run.get("name") {
            Some(v) => parse(Some(v), &join(key, "name"))?,
            None => "turnover".into(),
        };
        let earlier = out.iter().filter(|r| r.name == name).count();
        let failures: Vec<TurnoverFailure> = parse(run.get("failures"), &join(key, "failures"))?;
        out.push(TurnoverRun {
            // Reference texts are not kept by a report; the cross-check of the
            // candidate's against the baseline's is taken as given.
            references: Vec::new(),
            reference_tokens: Vec::new(),
            task_answers: if earlier == 0 {
                task_answers(root, side, &name)
            } else {
                String::new()
            },
            // Same items on both sides was checked when the report was made.
            task_set_sha256: None,
            features: if earlier == 0 {
                feature_marks(root, side, &name)
            } else {
                Default::default()
            },
            repeat: run.get("repeat").map_or(Ok(earlier), |_| num("repeat"))?,
            contract: match run.get("contract") {
                Some(v) => parse(Some(v), &join(key, "contract"))?,
                None => "words".into(),
            },
            concurrency: run
                .get("concurrency")
                .map_or(Ok(0), |_| num("concurrency"))?,
            requests: num("requests")?,
            exact_output_passed: num("exact_output_passed")?,
            failed: num("failed")?,
            responses_received: num("responses_received")?,
            performance_eligible: parse(
                run.get("performance_eligible"),
                &join(key, "performance_eligible"),
            )?,
            contaminated: run
                .get("contaminated")
                .map_or(Ok(0), |_| num("contaminated"))?,
            // Measured by the run: taken as given, carried through.
            first_ttft_ms: optional(run, key, "first_ttft_ms")?,
            later_ttft_p50_ms: optional(run, key, "later_ttft_p50_ms")?,
            failures,
            name,
        });
    }
    Ok(out)
}
