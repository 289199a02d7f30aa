//! Lenient reading of a report's JSON: a field absent, or not of the type
//! asked for, is `None` (or empty), never an error, so any v1 report shows.

use serde_json::Value;

/// A string field.
pub fn as_string(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str).map(String::from)
}

/// A finite number (NaN and infinities read as absent).
pub fn as_finite(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// A non-negative integer.
pub fn as_u64(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

/// A boolean.
pub fn as_bool(v: Option<&Value>) -> Option<bool> {
    v.and_then(Value::as_bool)
}

/// The strings of an array (other elements left out).
pub fn as_strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The finite numbers of an array (other elements left out).
pub fn as_finite_floats(v: Option<&Value>) -> Option<Vec<f64>> {
    v.and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|x| x.as_f64())
            .filter(|x| x.is_finite())
            .collect()
    })
}

/// Any field serde can read as `T`.
pub fn typed<T: serde::de::DeserializeOwned>(v: Option<&Value>) -> Option<T> {
    v.and_then(|v| serde_json::from_value(v.clone()).ok())
}
