//! The names target: bytes as names, put in every slot of a report and
//! rendered in every format against a twin with plain names (the oracle is
//! `report::hostile`), and given to the suite reader as cell names.

use super::plan::SUITE_FILE;
use crate::config::suite::Suite;
use crate::report;

/// Names: up to 8 names from the bytes (split at 0xFF), in every slot of a
/// report a suite, plan, server or report file fills. Every format must
/// show them as text and open nothing: the same structure as the report
/// with plain names in their place, no control character, no spreadsheet
/// formula (`report::hostile::check`). The suite reader must refuse a cell
/// or suite name holding a control character or bidirectional override,
/// naming the file and the field without printing the name; any other name
/// it reads as given.
pub fn names(data: &[u8]) {
    let names = report::hostile::names_from(data);
    let (hostile, twin) = report::hostile::reports(&names).unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = report::hostile::check(&hostile, &twin) {
        panic!("names {names:?}: {e}");
    }
    for name in &names {
        check_suite_name(name);
    }
}

/// A suite naming itself and its one cell `name`.
fn check_suite_name(name: &str) {
    let quoted = toml::Value::String(name.to_string()).to_string();
    let text = format!(
        "name = {quoted}\n\n[[cell]]\nname = \"ok\"\nprompt_tokens = 16\nmax_tokens = 8\nrequests = 1\n\n[[cell]]\nname = {quoted}\nprompt_tokens = 16\nmax_tokens = 8\nrequests = 1\n"
    );
    let refused = report::text::name_problem(name).is_some();
    match Suite::parse(&text, SUITE_FILE) {
        Ok(s) => {
            assert!(!refused, "a suite accepted the name {name:?}");
            assert_eq!((s.name.as_str(), s.cells[1].name.as_str()), (name, name));
        }
        Err(e) => {
            let msg = format!("{e:#}");
            assert!(
                !msg.chars().any(report::text::is_unsafe),
                "the error prints what it refuses: {msg:?}"
            );
            if refused {
                assert!(
                    msg.starts_with(&format!("{SUITE_FILE}: line 1: field `name`: ")),
                    "{msg}"
                );
            } else {
                // Only an empty name or one that is the other cell's.
                assert!(name.trim().is_empty() || name == "ok", "{name:?}: {msg}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_name_with_a_line_break_is_refused_by_file_line_and_field() {
        let name = report::hostile::NAMES[0];
        let quoted = toml::Value::String(name.to_string()).to_string();
        let text = format!(
            "name = \"s\"\n\n[[cell]]\nname = {quoted}\nprompt_tokens = 16\nmax_tokens = 8\nrequests = 1\n"
        );
        let e = format!("{:#}", Suite::parse(&text, SUITE_FILE).unwrap_err());
        assert_eq!(
            e,
            "suites/fuzz.toml: line 3: [[cell]]: field `name`: a line break (U+000A) at character 2 is not allowed in a name: names are printed on terminals and in CI summaries, HTML, JUnit and CSV, where it could forge or hide text"
        );
        check_suite_name(name);
    }
}
