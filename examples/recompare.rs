//! Compare two pooled qualification artifacts again as adaptive look LOOK of
//! LOOKS, optionally as the look that closes the run early (its time budget
//! ran out: it spends the error the earlier looks left). A tool for the gate
//! calibration (`docs/gate-calibration.md`), not part of infergate:
//!
//!   cargo run --release --example recompare -- BASE.json CAND.json LOOK LOOKS [closing]

use std::path::Path;

use anyhow::{Context, Result, ensure};
use infergate::report;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    ensure!(
        (4..=5).contains(&args.len()),
        "usage: recompare BASE.json CAND.json LOOK LOOKS [closing]"
    );
    let baseline = report::read_artifact(Path::new(&args[0]))?;
    let candidate = report::read_artifact(Path::new(&args[1]))?;
    let policy = report::Policy::default();
    let closing = args.get(4).is_some_and(|a| a == "closing");
    let mut look = report::design::Look::planned(
        args[2].parse().context("LOOK")?,
        args[3].parse().context("LOOKS")?,
        policy.gate.spending,
    );
    if closing {
        look = look.closing();
    }
    let r = report::compare_with_look(&baseline, &candidate, &policy, Some(&look))?;
    let v = r.to_value();
    let fw = &v["statistics"]["family_wise"];
    println!(
        "{}: look {} of {}{}, alpha pass {:.4} fail {:.4}",
        v["performance_outcome"].as_str().unwrap_or("?"),
        fw["look"],
        fw["looks"],
        if look.is_closing() { " (closing)" } else { "" },
        fw["alpha_pass"].as_f64().unwrap_or(f64::NAN),
        fw["alpha_fail"].as_f64().unwrap_or(f64::NAN)
    );
    for (cell, c) in v["cells"].as_object().into_iter().flatten() {
        for (name, m) in c["metrics"].as_object().into_iter().flatten() {
            let e = &m["evidence"];
            println!(
                "  {cell} {name}: n {} worse-direction {:+.2}% bounds [{:+.2}%, {:+.2}%] {}",
                m["baseline_n"],
                e["worse_change_percent"].as_f64().unwrap_or(f64::NAN),
                e["lower_bound_percent"].as_f64().unwrap_or(f64::NAN),
                e["upper_bound_percent"].as_f64().unwrap_or(f64::NAN),
                e["outcome"].as_str().unwrap_or("?")
            );
        }
    }
    Ok(())
}
