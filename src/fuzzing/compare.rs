//! The compare target: bytes read as a run artifact, compared with itself
//! and with a slower copy; every report `compare` makes verifies clean.

use super::rendered::check_report_value;
use crate::report::{self, Policy};

/// Compare: bytes read as a run artifact (as `compare` reads one), then
/// compared with itself and with a copy whose every sample is 7% larger.
/// `compare` either refuses the pair or makes a report that `verify`
/// accepts in full — every derived value recomputed bit for bit from the
/// report — and that renders. A report `compare` writes that `verify`
/// rejects is a bug in one of them.
pub fn compare(data: &[u8]) {
    let Ok(a) = serde_json::from_slice::<crate::artifact::RunArtifact>(data) else {
        return;
    };
    let mut slower = a.clone();
    for c in &mut slower.cells {
        for v in c.samples.values_mut() {
            v.iter_mut().for_each(|x| *x *= 1.07);
        }
    }
    let mut policy = Policy {
        source: "fuzz".into(),
        ..Policy::default()
    };
    // Bounded work per input; the statistics do not depend on the count.
    policy.bootstrap.iterations = 200;
    for b in [&a, &slower] {
        let Ok(r) = report::compare(&a, b, &policy) else {
            continue;
        };
        let value = r.to_value();
        let d = report::verify(&value);
        assert!(
            d.is_empty(),
            "a report compare made does not verify: {d:#?}"
        );
        check_report_value(&value);
    }
}
