//! Ad-hoc runs: one cell, or a sweep of cells, described by `infergate run`'s
//! flags instead of a suite file. The flags become a [`Suite`] and the TOML
//! text of that suite, which the run writes into its output directory, so an
//! ad-hoc run is reproducible (`--suite OUT/suite.toml` measures the same
//! cells) and comparable like any other. The text depends on the flags alone
//! (no time, host or target in it): two ad-hoc runs with the same flags share
//! the suite's sha256, which is what `compare` checks.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use super::suite::{CachePolicy, CellEndpoint, CellSpec, OutputPolicy, Suite};
use crate::artifact::Slo;

/// The suite file an ad-hoc run writes beside run.json.
pub const SUITE_FILE: &str = "suite.toml";
/// Every ad-hoc suite's name: `compare` requires equal names, and the cell
/// names (which carry the shape) tell two ad-hoc suites apart.
pub const SUITE_NAME: &str = "adhoc";

/// Open-loop arrival process of the `--rate` cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenLoop {
    #[default]
    Poisson,
    Constant,
}

impl OpenLoop {
    pub fn as_str(self) -> &'static str {
        match self {
            OpenLoop::Poisson => "poisson",
            OpenLoop::Constant => "constant",
        }
    }
}

/// The cell flags of `infergate run`, as given (`None`/empty: not given).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CellFlags {
    pub prompt_tokens: Option<u64>,
    pub tolerance_percent: Option<f64>,
    pub max_tokens: Option<u64>,
    /// Closed loop: requests in flight; open loop: the cap on them. Several
    /// values sweep: one cell each.
    pub concurrency: Vec<usize>,
    /// Open loop, requests per second; several values sweep. Empty: closed loop.
    pub rate: Vec<f64>,
    /// With `rate`: how sends are spaced (default Poisson).
    pub arrival: Option<OpenLoop>,
    pub requests: Option<usize>,
    pub warmup: Option<usize>,
    pub cache: Option<CachePolicy>,
    pub seed: Option<u64>,
    /// Output length (default: the suite file's default, fixed).
    pub output: Option<OutputPolicy>,
    /// The endpoint measured (default chat).
    pub endpoint: Option<CellEndpoint>,
    /// `--slo` as given: `ttft:1500,tpot:80,e2e:4000,min:0.9`, any subset.
    pub slo: Option<String>,
}

/// `ttft:1500,tpot:80,e2e:4000,min:0.9` (any subset, any order) as SLOs.
pub fn parse_slo(text: &str) -> Result<Slo> {
    let mut slo = Slo::default();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = part.split_once(':') else {
            bail!(
                "--slo {text}: `{part}` is not KEY:VALUE (ttft, tpot, e2e in ms; min, an attainment)"
            );
        };
        let v: f64 = value
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("--slo {text}: `{value}` in `{part}` is not a number"))?;
        let slot = match key.trim() {
            "ttft" => &mut slo.ttft_ms,
            "tpot" => &mut slo.tpot_ms,
            "e2e" => &mut slo.e2e_ms,
            "min" => &mut slo.min_attainment,
            other => bail!("--slo {text}: unknown key `{other}` (ttft, tpot, e2e, min)"),
        };
        if slot.replace(v).is_some() {
            bail!("--slo {text}: `{}` is given twice", key.trim());
        }
    }
    if let Some(why) = slo.problem() {
        bail!("--slo {text}: {why}");
    }
    Ok(slo)
}

/// Longest plain decimal a rate keeps in a cell name (`0.000125`, `12345.75`).
const PLAIN_RATE_CHARS: usize = 8;

/// A `--rate` value as its cell's name shows it: the shortest decimal that
/// reads back as the value (`2.5`, `8`) when it is short, else the shortest
/// scientific form that does (`1e-300`, `3.0000000000000004e-1`), so a name
/// holds at most 17 significant digits, never the hundreds of a plain
/// `1e300`. Distinct values stay distinct: each form spells one value only,
/// and only the scientific one has an `e`. The dot becomes `_` (reports use
/// cell names inside dotted JSON paths).
fn rate_in_name(rate: f64) -> String {
    let plain = rate.to_string();
    let text = if plain.len() <= PLAIN_RATE_CHARS {
        plain
    } else {
        format!("{rate:e}")
    };
    text.replace('.', "_")
}

/// One cell's place in the sweep.
struct Point {
    concurrency: usize,
    rate: Option<f64>,
}

impl CellFlags {
    /// The suite these flags describe, and the TOML text to write for it.
    /// The text is parsed back and must give the same cells, so the file
    /// written reproduces exactly what runs.
    pub fn suite(&self) -> Result<(Suite, String)> {
        self.check()?;
        let cells: Vec<CellSpec> = self.points().iter().map(|p| self.cell(p)).collect();
        self.check_unique(&cells)?;
        let suite = Suite {
            name: SUITE_NAME.to_string(),
            description: self.command_line(),
            cells,
            turnover: Vec::new(),
            tokenizer: None,
            embeddings: Vec::new(),
        };
        let text = suite_toml(&suite)?;
        let again = Suite::parse(&text, SUITE_FILE)?;
        if again != suite {
            bail!("internal: the ad-hoc suite's TOML does not read back as the same suite");
        }
        Ok((suite, text))
    }

    /// Checks that name the flag at fault; the suite parser checks the rest again.
    fn check(&self) -> Result<()> {
        let missing: Vec<&str> = [
            ("--prompt-tokens", self.prompt_tokens.is_none()),
            ("--max-tokens", self.max_tokens.is_none()),
            ("--requests", self.requests.is_none()),
        ]
        .into_iter()
        .filter_map(|(flag, absent)| absent.then_some(flag))
        .collect();
        if !missing.is_empty() {
            bail!(
                "give --suite FILE, or describe the cell with flags: {} missing",
                missing.join(", ")
            );
        }
        for (flag, v) in [
            ("--prompt-tokens", self.prompt_tokens.unwrap_or(1)),
            ("--max-tokens", self.max_tokens.unwrap_or(1)),
            ("--requests", self.requests.unwrap_or(1) as u64),
        ] {
            if v == 0 {
                bail!("{flag} must be > 0");
            }
        }
        if self.concurrency.contains(&0) {
            bail!("--concurrency: every value must be > 0");
        }
        if let Some(r) = self.rate.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
            bail!("--rate {r}: must be a positive number of requests per second");
        }
        // Named by its flag here; the suite parser would name the cell it made.
        let sent = (self.requests.unwrap_or(1)).saturating_add(self.warmup.unwrap_or(0));
        for r in &self.rate {
            super::limits::schedule_within(
                &format!("--rate {r:?}: at that rate, {sent} requests (--requests and --warmup)"),
                sent as f64 / r,
            )?;
        }
        if let Some(t) = self.tolerance_percent
            && !(t.is_finite() && t >= 0.0)
        {
            bail!("--tolerance-percent {t}: must be >= 0");
        }
        if self.concurrency.len() > 1 && self.rate.len() > 1 {
            bail!("--concurrency and --rate both list several values: sweep one of them");
        }
        if self.arrival.is_some() && self.rate.is_empty() {
            bail!("--arrival needs --rate: without a rate the loop is closed");
        }
        if let Some(text) = &self.slo {
            parse_slo(text)?;
        }
        Ok(())
    }

    /// Each cell's concurrency and rate, in the order the values were given.
    /// Open loop without `--concurrency` is uncapped (the cap is the request
    /// count), as a rate is meant to be kept whatever the latency.
    fn points(&self) -> Vec<Point> {
        let requests = self.requests.unwrap_or(1);
        if self.rate.is_empty() {
            let cs = if self.concurrency.is_empty() {
                vec![1]
            } else {
                self.concurrency.clone()
            };
            return cs
                .into_iter()
                .map(|concurrency| Point {
                    concurrency,
                    rate: None,
                })
                .collect();
        }
        let caps = if self.concurrency.is_empty() {
            vec![requests]
        } else {
            self.concurrency.clone()
        };
        let mut out = Vec::new();
        for &rate in &self.rate {
            for &concurrency in &caps {
                out.push(Point {
                    concurrency,
                    rate: Some(rate),
                });
            }
        }
        out
    }

    fn cell(&self, p: &Point) -> CellSpec {
        let kind = self.arrival.unwrap_or_default();
        CellSpec {
            name: self.cell_name(p),
            prompt_tokens: self.prompt_tokens.unwrap_or(1),
            tolerance_percent: self.tolerance_percent.unwrap_or(10.0),
            max_tokens: self.max_tokens.unwrap_or(1),
            concurrency: p.concurrency,
            requests: self.requests.unwrap_or(1),
            warmup: self.warmup.unwrap_or(0),
            cache: self.cache.unwrap_or(CachePolicy::Unique),
            arrival: match p.rate {
                None => "closed".to_string(),
                Some(r) => format!("{}:{r}", kind.as_str()),
            },
            temperature: 0.0,
            seed: self.seed,
            output: self.output.unwrap_or_default(),
            endpoint: self.endpoint.unwrap_or_default(),
            extra: toml::Table::new(),
            // check() has parsed it already.
            slo: self.slo.as_deref().and_then(|t| parse_slo(t).ok()),
            expect: Default::default(),
            workload: None,
            capacity: None,
            dataset: None,
            dataset_sha256: None,
        }
    }

    /// `p256-o32-c4`, `p256-o32-poisson2_5rps` (`-c4` added when capped):
    /// the shape in the name, with no dot, since reports use cell names
    /// inside dotted JSON paths.
    fn cell_name(&self, p: &Point) -> String {
        let base = format!(
            "p{}-o{}",
            self.prompt_tokens.unwrap_or(1),
            self.max_tokens.unwrap_or(1)
        );
        match p.rate {
            None => format!("{base}-c{}", p.concurrency),
            Some(r) => {
                let kind = self.arrival.unwrap_or_default().as_str();
                let rate = rate_in_name(r);
                let cap = if self.concurrency.is_empty() {
                    String::new()
                } else {
                    format!("-c{}", p.concurrency)
                };
                format!("{base}-{kind}{rate}rps{cap}")
            }
        }
    }

    fn check_unique(&self, cells: &[CellSpec]) -> Result<()> {
        for (i, c) in cells.iter().enumerate() {
            if cells[..i].iter().any(|o| o.name == c.name) {
                let flag = if self.rate.len() > 1 {
                    "--rate"
                } else {
                    "--concurrency"
                };
                bail!("{flag} gives the same value twice (cell {} again)", c.name);
            }
        }
        Ok(())
    }

    /// The flags in one fixed spelling, defaults included: the suite's
    /// description, so the file says how it was made.
    fn command_line(&self) -> String {
        let join = |v: Vec<String>| v.join(",");
        let mut s = format!(
            "infergate run --prompt-tokens {} --tolerance-percent {} --max-tokens {} --requests {} --warmup {}",
            self.prompt_tokens.unwrap_or(1),
            self.tolerance_percent.unwrap_or(10.0),
            self.max_tokens.unwrap_or(1),
            self.requests.unwrap_or(1),
            self.warmup.unwrap_or(0),
        );
        if !self.concurrency.is_empty() {
            s += &format!(
                " --concurrency {}",
                join(self.concurrency.iter().map(|c| c.to_string()).collect())
            );
        }
        if !self.rate.is_empty() {
            s += &format!(
                " --rate {} --arrival {}",
                join(self.rate.iter().map(|r| r.to_string()).collect()),
                self.arrival.unwrap_or_default().as_str()
            );
        }
        let cache = match self.cache.unwrap_or(CachePolicy::Unique) {
            CachePolicy::Unique => "unique",
            CachePolicy::Shared => "shared",
        };
        s += &format!(" --cache {cache}");
        if let Some(seed) = self.seed {
            s += &format!(" --seed {seed}");
        }
        if self.output == Some(OutputPolicy::Free) {
            s += " --output free";
        }
        if self.endpoint == Some(CellEndpoint::Completions) {
            s += " --endpoint completions";
        }
        if let Some(slo) = &self.slo {
            s += &format!(" --slo {slo}");
        }
        s
    }
}

/// A suite as TOML, after a header saying where it came from.
pub fn suite_toml(suite: &Suite) -> Result<String> {
    // Only what an ad-hoc suite holds: no turnover, no tokenizer.
    #[derive(Serialize)]
    struct File<'a> {
        name: &'a str,
        description: &'a str,
        cell: &'a [CellSpec],
    }
    let body = toml::to_string(&File {
        name: &suite.name,
        description: &suite.description,
        cell: &suite.cells,
    })
    .context("writing the ad-hoc suite as TOML")?;
    // A text file ends with a newline; the serializer leaves the last one off.
    let body = if body.ends_with('\n') {
        body
    } else {
        body + "\n"
    };
    Ok(format!(
        "# Written by `infergate run` from its cell flags. `infergate run --suite\n# <this file>` measures the same cells, and `infergate compare` accepts\n# the two runs (same suite, same sha256).\n{body}"
    ))
}

/// Write the suite file into `out_dir`, or keep the one there when it is the
/// same text (a `--resume`, or a second attempt); a different one belongs to
/// another run and is never overwritten.
pub fn write_suite_file(out_dir: &Path, text: &str) -> Result<PathBuf> {
    let path = out_dir.join(SUITE_FILE);
    match std::fs::read_to_string(&path) {
        Ok(existing) if existing == text => return Ok(path),
        Ok(_) => bail!(
            "{} already exists and describes other cells; choose another --out, or run that suite with --suite {}",
            path.display(),
            path.display()
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    crate::atomic::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::suite::Arrival;

    fn flags() -> CellFlags {
        CellFlags {
            prompt_tokens: Some(256),
            max_tokens: Some(32),
            requests: Some(8),
            ..CellFlags::default()
        }
    }

    fn err(f: &CellFlags) -> String {
        format!("{:#}", f.suite().unwrap_err())
    }

    #[test]
    fn one_cell_takes_the_suite_files_defaults() {
        let (s, _) = flags().suite().unwrap();
        assert_eq!(s.name, SUITE_NAME);
        let [c] = &s.cells[..] else {
            panic!("{:?}", s.cells)
        };
        assert_eq!(c.name, "p256-o32-c1");
        assert_eq!((c.prompt_tokens, c.max_tokens, c.requests), (256, 32, 8));
        assert_eq!((c.concurrency, c.warmup, c.tolerance_percent), (1, 0, 10.0));
        assert_eq!(c.cache, CachePolicy::Unique);
        assert_eq!(c.arrival().unwrap(), Arrival::Closed);
        assert!(c.extra.is_empty() && c.seed.is_none());
    }

    #[test]
    fn a_concurrency_list_makes_one_cell_per_value_in_order() {
        let f = CellFlags {
            concurrency: vec![1, 4, 16],
            warmup: Some(2),
            ..flags()
        };
        let (s, _) = f.suite().unwrap();
        let got: Vec<(&str, usize, usize)> = s
            .cells
            .iter()
            .map(|c| (c.name.as_str(), c.concurrency, c.warmup))
            .collect();
        assert_eq!(
            got,
            [
                ("p256-o32-c1", 1, 2),
                ("p256-o32-c4", 4, 2),
                ("p256-o32-c16", 16, 2)
            ]
        );
    }

    #[test]
    fn a_rate_list_makes_open_loop_cells_uncapped_unless_told() {
        let f = CellFlags {
            rate: vec![2.5, 8.0],
            ..flags()
        };
        let (s, _) = f.suite().unwrap();
        assert_eq!(s.cells[0].name, "p256-o32-poisson2_5rps");
        assert_eq!(
            s.cells[0].arrival().unwrap(),
            Arrival::Poisson { rate: 2.5 }
        );
        assert_eq!(
            s.cells[1].arrival().unwrap(),
            Arrival::Poisson { rate: 8.0 }
        );
        assert_eq!(s.cells[0].concurrency, 8, "cap = requests");
        let f = CellFlags {
            arrival: Some(OpenLoop::Constant),
            concurrency: vec![3],
            ..f
        };
        let (s, _) = f.suite().unwrap();
        assert_eq!(s.cells[1].name, "p256-o32-constant8rps-c3");
        assert_eq!(
            s.cells[1].arrival().unwrap(),
            Arrival::Constant { rate: 8.0 }
        );
        assert_eq!(s.cells[1].concurrency, 3);
    }

    #[test]
    fn a_rate_in_a_cell_name_is_short_and_tells_distinct_values_apart() {
        assert_eq!(rate_in_name(2.5), "2_5");
        assert_eq!(rate_in_name(8.0), "8");
        assert_eq!(rate_in_name(0.000125), "0_000125");
        assert_eq!(rate_in_name(0.0000125), "1_25e-5");
        assert_eq!(rate_in_name(1e-300), "1e-300");
        assert_eq!(rate_in_name(1e300), "1e300");
        assert_eq!(rate_in_name(0.1 + 0.2), "3_0000000000000004e-1");
        let rates = [
            0.3,
            0.1 + 0.2,
            1e-300,
            1e300,
            f64::MIN_POSITIVE,
            f64::MAX,
            1.0 / 3.0,
            2.0 / 3.0,
            12345.75,
            123456.75,
        ];
        let names: Vec<String> = rates.iter().map(|r| rate_in_name(*r)).collect();
        for (i, n) in names.iter().enumerate() {
            // Bounded: 17 digits, a dot, an `e`, a sign and 3 exponent digits at most.
            assert!(n.len() <= 23, "{n}");
            assert!(!n.contains('.'), "{n}");
            let name = format!("p256-o32-poisson{n}rps");
            assert_eq!(crate::report::text::name_problem(&name), None, "{name}");
            assert!(!names[..i].contains(n), "{n} names two rates");
            // It reads back as the very value: no two values share it.
            assert_eq!(n.replace('_', ".").parse::<f64>().unwrap(), rates[i], "{n}");
        }
    }

    #[test]
    fn the_text_reads_back_as_the_suite_and_depends_on_the_flags_alone() {
        let f = CellFlags {
            concurrency: vec![1, 2],
            tolerance_percent: Some(5.0),
            cache: Some(CachePolicy::Shared),
            seed: Some(7),
            output: Some(OutputPolicy::Free),
            slo: Some("ttft:1500,tpot:80,min:0.95".into()),
            ..flags()
        };
        let (s, text) = f.suite().unwrap();
        assert_eq!(Suite::parse(&text, "t").unwrap(), s);
        assert!(text.starts_with("# Written by `infergate run`"), "{text}");
        assert_eq!(s.cells[1].output, OutputPolicy::Free);
        assert_eq!(
            s.cells[1].slo,
            Some(Slo {
                ttft_ms: Some(1500.0),
                tpot_ms: Some(80.0),
                e2e_ms: None,
                min_attainment: Some(0.95),
            })
        );
        assert_eq!(s.cells[1].seed, Some(7));
        assert_eq!(f.suite().unwrap().1, text, "same flags, same bytes");
        assert!(
            s.description.contains("--concurrency 1,2")
                && s.description.contains("--output free")
                && s.description.contains("--slo ttft:1500,tpot:80,min:0.95"),
            "{}",
            s.description
        );
        let other = CellFlags {
            warmup: Some(1),
            ..f
        };
        assert_ne!(other.suite().unwrap().1, text);
    }

    #[test]
    fn slo_flags_parse_any_subset_and_name_what_is_wrong() {
        assert_eq!(
            parse_slo("e2e:4000").unwrap(),
            Slo {
                e2e_ms: Some(4000.0),
                ..Slo::default()
            }
        );
        for (text, says) in [
            ("ttft", "is not KEY:VALUE"),
            ("ttft:fast", "is not a number"),
            ("itl:5", "unknown key `itl`"),
            ("ttft:1,ttft:2", "given twice"),
            ("ttft:-5", "not a positive number"),
            ("min:0.9", "no target"),
            ("ttft:100,min:1.5", "min_attainment 1.5"),
        ] {
            let e = parse_slo(text).unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        let f = CellFlags {
            slo: Some("tpot:0".into()),
            ..flags()
        };
        assert!(err(&f).contains("--slo tpot:0"), "{}", err(&f));
    }

    #[test]
    fn bad_flags_are_named() {
        let none = CellFlags {
            prompt_tokens: None,
            requests: None,
            ..flags()
        };
        let e = err(&none);
        assert!(
            e.contains("--prompt-tokens, --requests missing") && e.contains("--suite"),
            "{e}"
        );
        assert!(
            err(&CellFlags {
                max_tokens: Some(0),
                ..flags()
            })
            .contains("--max-tokens must be > 0")
        );
        assert!(
            err(&CellFlags {
                concurrency: vec![2, 0],
                ..flags()
            })
            .contains("--concurrency")
        );
        assert!(
            err(&CellFlags {
                rate: vec![f64::NAN],
                ..flags()
            })
            .contains("--rate NaN")
        );
        let slow = err(&CellFlags {
            rate: vec![2.0, 1e-300],
            warmup: Some(2),
            ..flags()
        });
        assert!(
            slow.starts_with("--rate 1e-300: at that rate, 10 requests (--requests and --warmup) take 1.000e301 s to send, above the maximum of 86400 s (24 h)"),
            "{slow}"
        );
        assert!(
            err(&CellFlags {
                tolerance_percent: Some(-1.0),
                ..flags()
            })
            .contains("--tolerance-percent")
        );
        let both = CellFlags {
            concurrency: vec![1, 2],
            rate: vec![1.0, 2.0],
            ..flags()
        };
        assert!(err(&both).contains("sweep one of them"));
        let arrival = CellFlags {
            arrival: Some(OpenLoop::Constant),
            ..flags()
        };
        assert!(err(&arrival).contains("--arrival needs --rate"));
        let twice = CellFlags {
            concurrency: vec![4, 4],
            ..flags()
        };
        assert!(err(&twice).contains("--concurrency gives the same value twice"));
    }

    #[test]
    fn the_suite_file_is_written_once_and_never_replaced_by_another() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let (_, text) = flags().suite().unwrap();
        let path = write_suite_file(&out, &text).unwrap();
        assert_eq!(path, out.join(SUITE_FILE));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        write_suite_file(&out, &text).expect("the same text again is fine");
        let (_, other) = CellFlags {
            requests: Some(9),
            ..flags()
        }
        .suite()
        .unwrap();
        let e = format!("{:#}", write_suite_file(&out, &other).unwrap_err());
        assert!(
            e.contains(&path.display().to_string()) && e.contains("already exists"),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "kept");
    }
}
