//! The report target: bytes read as a v1 report the way `infergate verify`,
//! `report` and `decide` read one, then verified and rendered.

use super::rendered::check_report_value;
use crate::report::{self, Report};

const REPORT_NAME: &str = "fuzz-report.json";

/// Report: parsing arbitrary bytes (as `infergate verify` and `report` do)
/// gives a value or an error that names the source, line and column. A value
/// can be verified and rendered in every format; the HTML page carries only
/// the renderer's own tags (every report string escaped), and every Markdown
/// table row has its header's number of cells. A value that is also a typed
/// [`Report`] (what `decide` reads) survives being written back and read
/// again unchanged, and if the report was consistent it still verifies clean.
pub fn report(data: &[u8]) {
    let value = match report::parse_report_value(data, REPORT_NAME) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("{e:#}");
            let loc = msg
                .strip_prefix(REPORT_NAME)
                .and_then(|m| m.strip_prefix(':'))
                .unwrap_or_else(|| panic!("error does not name its source: {msg}"));
            let mut parts = loc.splitn(3, ':');
            for what in ["line", "column"] {
                let n: usize = parts
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("error has no {what}: {msg}"));
                assert!(what == "column" || n >= 1, "line 0: {msg}");
            }
            assert!(
                parts.next().is_some_and(|m| !m.trim().is_empty()),
                "error without a message: {msg}"
            );
            return;
        }
    };
    check_report_value(&value);

    let Ok(typed) = serde_json::from_value::<Report>(value.clone()) else {
        return;
    };
    let written = typed.to_value();
    assert!(
        written.is_object(),
        "a typed report serializes to an object"
    );
    let reread: Report = serde_json::from_value(written.clone())
        .unwrap_or_else(|e| panic!("a report infergate writes does not read back: {e}"));
    assert_eq!(reread, typed, "a report changed on a write/read round trip");
    check_report_value(&written);
    if report::verify(&value).is_empty() {
        let after = report::verify(&written);
        assert!(
            after.is_empty(),
            "a consistent report is inconsistent once rewritten: {after:?}"
        );
    }
}
