//! The disagreement type (what `verify` finds in a report, and `compare` in
//! a run artifact; what the renderers list) and the collector every check
//! writes to: typed getters that report a wrong type at its path, and
//! comparisons within a tolerance (values a report states) or bit for bit
//! (values recomputed).

use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

/// One thing in a report that does not follow from the rest of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disagreement {
    /// JSON path, e.g. `cells.capacity-4k.metrics.ttft_p50_ms.delta_percent`.
    pub path: String,
    /// The value found, as JSON (`missing` when absent).
    pub found: String,
    /// What the rest of the report implies.
    pub expected: String,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{}: found {}, expected {}",
            self.path, self.found, self.expected
        )
    }
}

const REL_TOL: f64 = 1e-9;

pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= REL_TOL * a.abs().max(b.abs()).max(1.0)
}

pub fn show(v: Option<&Value>) -> String {
    match v {
        None => "missing".to_string(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 80 {
                format!("{}…", s.chars().take(80).collect::<String>())
            } else {
                s
            }
        }
    }
}

fn type_name(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => format!("boolean {b}"),
        Some(Value::Number(n)) => format!("number {n}"),
        Some(Value::String(_)) => format!("string {}", show(v)),
        Some(Value::Array(_)) => "an array".into(),
        Some(Value::Object(_)) => "an object".into(),
    }
}

pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Collects disagreements, and what could not be checked; typed getters
/// report wrong types at their path.
#[derive(Default)]
pub struct Checker {
    pub out: Vec<Disagreement>,
    /// What this report does not let `verify` recompute, in plain words.
    pub unchecked: Vec<String>,
}

impl Checker {
    pub fn push(&mut self, path: impl Into<String>, found: String, expected: impl Into<String>) {
        self.out.push(Disagreement {
            path: path.into(),
            found,
            expected: expected.into(),
        });
    }

    pub fn limit(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.unchecked.contains(&what) {
            self.unchecked.push(what);
        }
    }

    pub fn wrong(&mut self, path: &str, v: Option<&Value>, expected: &str) {
        self.push(path, type_name(v), expected);
    }

    pub fn num(&mut self, path: &str, v: Option<&Value>) -> Option<f64> {
        match v.and_then(Value::as_f64) {
            Some(x) if x.is_finite() => Some(x),
            _ => {
                self.wrong(path, v, "a finite number");
                None
            }
        }
    }

    /// Absent or null is fine (None); otherwise a finite number.
    pub fn opt_num(&mut self, path: &str, v: Option<&Value>) -> Option<f64> {
        match v {
            None | Some(Value::Null) => None,
            some => self.num(path, some),
        }
    }

    pub fn count(&mut self, path: &str, v: Option<&Value>) -> Option<u64> {
        let r = v.and_then(Value::as_u64);
        if r.is_none() {
            self.wrong(path, v, "a non-negative integer");
        }
        r
    }

    pub fn opt_count(&mut self, path: &str, v: Option<&Value>) -> Option<u64> {
        match v {
            None | Some(Value::Null) => None,
            some => self.count(path, some),
        }
    }

    pub fn boolean(&mut self, path: &str, v: Option<&Value>) -> Option<bool> {
        let r = v.and_then(Value::as_bool);
        if r.is_none() {
            self.wrong(path, v, "a boolean");
        }
        r
    }

    pub fn string<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Option<&'a str> {
        let r = v.and_then(Value::as_str);
        if r.is_none() {
            self.wrong(path, v, "a string");
        }
        r
    }

    pub fn object<'a>(
        &mut self,
        path: &str,
        v: Option<&'a Value>,
    ) -> Option<&'a Map<String, Value>> {
        let r = v.and_then(Value::as_object);
        if r.is_none() {
            self.wrong(path, v, "an object");
        }
        r
    }

    pub fn array<'a>(&mut self, path: &str, v: Option<&'a Value>) -> Option<&'a Vec<Value>> {
        let r = v.and_then(Value::as_array);
        if r.is_none() {
            self.wrong(path, v, "an array");
        }
        r
    }

    pub fn expect_num(&mut self, path: &str, found: f64, expected: f64) {
        if !close(found, expected) {
            self.push(path, found.to_string(), expected.to_string());
        }
    }

    pub fn expect_bool(&mut self, path: &str, found: bool, expected: bool) {
        if found != expected {
            self.push(path, found.to_string(), expected.to_string());
        }
    }

    /// Deep comparison of a recomputed block with the one found: numbers
    /// within tolerance, everything else equal; reports at the leaves.
    pub fn expect_value(&mut self, path: &str, found: Option<&Value>, expected: &Value) {
        self.diff(path, found, expected, Exactness::Tolerant);
    }

    /// Deep comparison of a block recomputed bit for bit (same inputs, same
    /// functions): numbers must be equal, and an object may hold no key the
    /// recomputation does not write.
    pub fn expect_exact(&mut self, path: &str, found: Option<&Value>, expected: &Value) {
        self.diff(path, found, expected, Exactness::Exact);
    }

    fn diff(&mut self, path: &str, found: Option<&Value>, expected: &Value, how: Exactness) {
        match (found, expected) {
            (Some(Value::Number(f)), Value::Number(e)) => {
                if let (Some(f), Some(e)) = (f.as_f64(), e.as_f64()) {
                    let same = match how {
                        Exactness::Exact => f == e,
                        Exactness::Tolerant => close(f, e),
                    };
                    if !same {
                        self.push(path, f.to_string(), e.to_string());
                    }
                }
            }
            (Some(Value::Object(f)), Value::Object(e)) => {
                for (k, ev) in e {
                    self.diff(&join(path, k), f.get(k), ev, how);
                }
                if how == Exactness::Exact {
                    for (k, fv) in f.iter().filter(|(k, _)| !e.contains_key(*k)) {
                        self.push(
                            join(path, k),
                            show(Some(fv)),
                            "absent: recomputing the report does not give this field",
                        );
                    }
                }
            }
            (Some(Value::Array(f)), Value::Array(e)) => {
                if f.len() != e.len() {
                    self.push(
                        format!("{path}.length"),
                        f.len().to_string(),
                        e.len().to_string(),
                    );
                }
                for (i, (fv, ev)) in f.iter().zip(e).enumerate() {
                    self.diff(&format!("{path}[{i}]"), Some(fv), ev, how);
                }
            }
            (f, e) => {
                if f != Some(e) {
                    self.push(path, show(f), show(Some(e)));
                }
            }
        }
    }

    pub fn f64_array(&mut self, path: &str, v: Option<&Value>) -> Option<Vec<f64>> {
        let arr = self.array(path, v)?;
        let mut out = Vec::with_capacity(arr.len());
        let mut ok = true;
        for (i, x) in arr.iter().enumerate() {
            match self.num(&format!("{path}[{i}]"), Some(x)) {
                Some(x) => out.push(x),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Exactness {
    Tolerant,
    Exact,
}
