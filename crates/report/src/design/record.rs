//! A look as the report's `statistics.family_wise` block records it, and
//! read back from it.

use serde_json::Value;

use super::{Look, Method, last_two};
use crate::checker::Checker;
use crate::model::FamilyWise;
use crate::stats::evidence::{Boundaries, Spending};

impl Look {
    /// The `statistics.family_wise` block: how `alpha` was spread over
    /// `gating_pairs` (of which `quality_pairs` are quality parts) and the
    /// looks, and the levels (pass, fail) it gave this look.
    pub fn family_wise(
        &self,
        alpha: f64,
        (gating_pairs, quality_pairs): (usize, usize),
        method: &Method,
        (alpha_pass, alpha_fail): (f64, f64),
    ) -> FamilyWise {
        let fraction = self.fraction();
        FamilyWise {
            method: self.rule(quality_pairs > 0),
            alpha,
            gating_pairs,
            looks: self.planned_looks(),
            look: Some(self.number()),
            closing: self.is_closing().then_some(true),
            information_fraction: fraction.map(|f| f.1),
            previous_information_fraction: fraction.map(|f| f.0),
            information_fractions: self.fractions().map(<[f64]>::to_vec),
            pass_information_fractions: self.pass_fractions().map(<[f64]>::to_vec),
            boundaries: self.boundaries(),
            spending: Some(self.spending()),
            bound_scale: Some(method.bound_scale),
            alpha_pass,
            alpha_fail,
        }
    }

    /// `statistics.family_wise.method`: the rule in words.
    fn rule(&self, quality_pairs: bool) -> String {
        let spending = self.spending();
        let mut out = format!(
            "this look's share of alpha ({} spending over the planned looks: {}); the fail bound Bonferroni over gating pairs, each (cell, metric) and each cell's SLO attainment (share / pairs), the pass bound intersection-union (every pair at the share)",
            spending.as_str(),
            match spending {
                Spending::Bonferroni => "alpha / looks each",
                Spending::OBrienFleming =>
                    "Lan-DeMets O'Brien-Fleming type, alpha(t) = 2 - 2 Phi(z_(1-alpha/2) / sqrt(t)), t = look / looks; look k spends alpha(t_k) - alpha(t_(k-1))",
                Spending::Pocock =>
                    "Lan-DeMets Pocock type, alpha(t) = alpha ln(1 + (e - 1) t), t = look / looks; look k spends alpha(t_k) - alpha(t_(k-1))",
            }
        );
        if quality_pairs {
            out.push_str("; each gating quality part (gates.quality) is one more pair");
        }
        if self.fractions().is_some() {
            out.push_str("; t is the information fraction the run measured (the share of its request or time budget it will really have, re-planned from its round time), recorded as information_fraction and previous_information_fraction; a look at t = 1 spends all that is left");
            out.push_str("; the levels are exact group-sequential boundaries (Lan-DeMets; Armitage-McPherson-Rowe recursion over every look's fraction, information_fractions): under the null each look's bound crosses, beyond the earlier looks' boundaries, with probability its share, rather than the share being the level");
        }
        if self.pass_fractions().is_some() {
            out.push_str("; the pass bound spends its alpha over its own fractions (pass_information_fractions: the share of the information the design needs to pass, which is pass_design_share of what it needs to fail), the fail bound over information_fractions");
        }
        if self.is_closing() {
            out.push_str("; this look closes the run before its last (time budget): it spends alpha - alpha(t_(k-1))");
        }
        out
    }
}

fn fw_key(k: &str) -> String {
    format!("statistics.family_wise.{k}")
}

/// The look a report's `statistics.family_wise` block (`fw`, of `looks`
/// planned) records: which look, its spending, whether it closed the run,
/// and the fractions it was made at. None, with each disagreement in `ck`,
/// when they cannot be one look.
pub fn read_look(ck: &mut Checker, fw: &Value, looks: u64) -> Option<Look> {
    let look = match ck.count(&fw_key("look"), fw.get("look")) {
        Some(k) if (1..=looks).contains(&k) => k,
        Some(k) => {
            ck.push(
                fw_key("look"),
                k.to_string(),
                format!("in 1..={looks} (looks)"),
            );
            return None;
        }
        None => return None,
    };
    let spending = spending_of(ck, fw)?;
    // A look that closed the run early spent what the earlier looks left;
    // only a look before the last can close it.
    let closing = match fw.get("closing") {
        None => false,
        Some(Value::Bool(true)) if look < looks => true,
        Some(v) => {
            ck.push(
                fw_key("closing"),
                v.to_string(),
                format!("absent, or true at a look before the last ({looks})"),
            );
            return None;
        }
    };
    let fractions = fractions_of(ck, fw)?;
    let history = history_of(ck, fw, fractions)?;
    let pass = pass_history_of(ck, fw, history.as_deref())?;
    let mut out = Look::planned(look as usize, looks as usize, spending);
    if closing {
        out = out.closing();
    }
    Some(out.at_fractions(history.unwrap_or_default(), pass))
}

fn spending_of(ck: &mut Checker, fw: &Value) -> Option<Spending> {
    let v = fw.get("spending");
    let spending = v.and_then(|v| serde_json::from_value::<Spending>(v.clone()).ok());
    if spending.is_none() {
        ck.wrong(
            &fw_key("spending"),
            v,
            "\"bonferroni\", \"o_brien_fleming\" or \"pocock\"",
        );
    }
    spending
}

/// The recorded information fractions: both or neither, with
/// 0 ≤ previous ≤ this ≤ 1 and this > 0 (a look whose fraction did not
/// grow spends nothing). `None` (and a disagreement) when they cannot be.
fn fractions_of(ck: &mut Checker, fw: &Value) -> Option<Option<(f64, f64)>> {
    let (now_key, before_key) = ("information_fraction", "previous_information_fraction");
    match (fw.get(before_key), fw.get(now_key)) {
        (None, None) => Some(None),
        (before, now) => {
            let before = ck.num(&fw_key(before_key), before);
            let now = ck.num(&fw_key(now_key), now);
            let (Some(b), Some(n)) = (before, now) else {
                return None;
            };
            if (0.0..1.0).contains(&b) && b <= n && n > 0.0 && n <= 1.0 {
                Some(Some((b, n)))
            } else {
                ck.push(
                    fw_key(now_key),
                    format!("{n} after {b}"),
                    "0 ≤ previous_information_fraction ≤ information_fraction ≤ 1, information_fraction > 0",
                );
                None
            }
        }
    }
}

/// Every look's recorded fraction (`information_fractions`), with
/// `boundaries = "group_sequential"`: in [0, 1], never going back, the last
/// two the previous and this look's fractions, which a look at fractions
/// records. All absent: a look by its share of the planned looks. `None`
/// (and a disagreement) when they cannot be.
fn history_of(
    ck: &mut Checker,
    fw: &Value,
    fractions: Option<(f64, f64)>,
) -> Option<Option<Vec<f64>>> {
    let (key, kind) = ("information_fractions", "boundaries");
    let group = fw
        .get(kind)
        .map(|v| serde_json::from_value::<Boundaries>(v.clone()).map_err(|_| v));
    let history = match (fw.get(key), group, fractions) {
        (None, None | Some(Ok(Boundaries::UnionBound)), None) => return Some(None),
        (_, Some(Err(v)), _) => {
            ck.push(
                fw_key(kind),
                v.to_string(),
                "union_bound or group_sequential",
            );
            return None;
        }
        (Some(v), Some(Ok(Boundaries::GroupSequential)), _) => v,
        (found, _, _) => {
            ck.push(
                fw_key(key),
                found.map_or("absent".to_string(), Value::to_string),
                "present exactly when boundaries = \"group_sequential\", as it is with information_fraction and previous_information_fraction",
            );
            return None;
        }
    };
    let values: Option<Vec<f64>> = history
        .as_array()
        .and_then(|a| a.iter().map(Value::as_f64).collect());
    match values {
        Some(h) if in_order(&h) && fractions.is_some() && last_two(&h) == fractions => {
            Some(Some(h))
        }
        _ => {
            ck.push(
                fw_key(key),
                history.to_string(),
                "the looks' fractions in order, each in [0, 1], ending with previous_information_fraction and information_fraction",
            );
            None
        }
    }
}

/// The pass bounds' own fractions (`pass_information_fractions`): absent,
/// or one per look of `information_fractions`, each in [0, 1], never going
/// back. `None` (and a disagreement) when they cannot be.
fn pass_history_of(
    ck: &mut Checker,
    fw: &Value,
    history: Option<&[f64]>,
) -> Option<Option<Vec<f64>>> {
    let key = "pass_information_fractions";
    let Some(found) = fw.get(key) else {
        return Some(None);
    };
    let values: Option<Vec<f64>> = found
        .as_array()
        .and_then(|a| a.iter().map(Value::as_f64).collect());
    match (values, history) {
        (Some(p), Some(h)) if p.len() == h.len() && in_order(&p) => Some(Some(p)),
        _ => {
            ck.push(
                fw_key(key),
                found.to_string(),
                "one fraction per look of information_fractions, in order, each in [0, 1]",
            );
            None
        }
    }
}

/// Looks' fractions as a run records them: at least one, each in [0, 1],
/// never going back.
fn in_order(h: &[f64]) -> bool {
    !h.is_empty() && h.iter().all(|t| (0.0..=1.0).contains(t)) && h.windows(2).all(|w| w[0] <= w[1])
}
