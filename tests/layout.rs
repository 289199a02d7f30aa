//! The layout is part of the design: data flows one way, so no file may
//! import (directly or through others) a file that imports it; `stats` is a
//! leaf; the report crate knows nothing of the main crate; `util` is a leaf.
//! Read from the sources themselves: every `use` tree and every
//! `crate::`/`super::`/`self::` path and child module's bare `e::f` path in
//! code (comments and strings left out), resolved to the file that defines
//! it, following `pub use` re-exports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One crate's modules: module path (`["measure", "client"]`) → its file.
struct Crate {
    files: BTreeMap<Vec<String>, PathBuf>,
    /// Per module: item name → where a `pub use` says it really is (absolute path).
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    /// Per module: absolute paths of its `pub use …::*` globs.
    globs: BTreeMap<Vec<String>, Vec<Vec<String>>>,
    code: BTreeMap<Vec<String>, String>,
}

fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "main.rs" | "mod.rs" => {}
        f => parts.push(f.trim_end_matches(".rs").to_string()),
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Source with comments, string and char literals blanked (newlines kept).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r' && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#")) {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            i += 3;
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // '\n', '\'', '\u{…}': skip the quote, backslash and escaped char.
            i += 3;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else {
            let ch = src[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Expand a `use` tree (`a::{b, c::{d, e}}`) into full paths (`as` dropped).
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix: Vec<String> = tree[..open]
            .trim_end_matches("::")
            .split("::")
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().to_string())
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap()];
        let mut parts = Vec::new();
        let (mut depth, mut start) = (0, 0);
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&inner[start..]);
        parts
            .into_iter()
            .filter(|p| !p.trim().is_empty())
            .flat_map(expand)
            .map(|tail| {
                let mut p = prefix.clone();
                if tail != ["self"] {
                    p.extend(tail);
                }
                p
            })
            .collect()
    } else {
        let path = tree.split(" as ").next().unwrap();
        vec![path.split("::").map(|s| s.trim().to_string()).collect()]
    }
}

/// Inline `mod name { … }` blocks: (name, body start, body end) byte offsets.
fn inline_mods(code: &str) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    let b = code.as_bytes();
    let mut i = 0;
    while let Some(at) = code[i..].find("mod ") {
        let s = i + at;
        i = s + 4;
        if s > 0 && (b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_') {
            continue;
        }
        let rest = &code[s + 4..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let after = rest[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = s + 4 + name.len() + (rest.len() - name.len() - after.len());
        let mut depth = 0;
        for (j, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((name.clone(), open, open + j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Every path a file names: (inline module path inside the file, raw path).
fn paths_in(code: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mods = inline_mods(code);
    let scope = |at: usize| -> Vec<String> {
        mods.iter()
            .filter(|(_, s, e)| *s < at && at < *e)
            .map(|(n, _, _)| n.clone())
            .collect()
    };
    let mut out = Vec::new();
    // `use` declarations, including grouped trees.
    let mut i = 0;
    while let Some(at) = code[i..].find("use ") {
        let s = i + at;
        i = s + 4;
        let before = code[..s].trim_end();
        let starts_item = s == 0
            || code.as_bytes()[s - 1].is_ascii_whitespace()
                && (before.is_empty()
                    || before.ends_with(';')
                    || before.ends_with('{')
                    || before.ends_with('}')
                    || before.ends_with(']')
                    || before.ends_with("pub")
                    || before.ends_with(')'));
        if !starts_item {
            continue;
        }
        let Some(end) = code[s..].find(';') else {
            continue;
        };
        for p in expand(&code[s + 4..s + end]) {
            out.push((scope(s), p));
        }
        i = s + end;
    }
    // Paths in code: crate::a::b, super::x, self::y, and a child module's
    // bare `e::f` (resolved below only when `e` is a child module's file).
    let b = code.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if !(b[i].is_ascii_alphabetic() || b[i] == b'_')
            || (i > 0 && (word(b[i - 1]) || b[i - 1] == b':'))
        {
            i += 1;
            continue;
        }
        let s = i;
        while i < b.len() && (word(b[i]) || b[i] == b':') {
            i += 1;
        }
        let path = &code[s..i];
        if !path.contains("::") || path.ends_with("::") {
            // `use super::{…}` / `super::*`: the use tree above has it.
            continue;
        }
        out.push((
            scope(s),
            path.split("::")
                .filter(|p| !p.is_empty())
                .map(str::to_string)
                .collect(),
        ));
    }
    out
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut files = Vec::new();
        rust_files(root, &mut files);
        let mut c = Crate {
            files: BTreeMap::new(),
            reexports: BTreeMap::new(),
            globs: BTreeMap::new(),
            code: BTreeMap::new(),
        };
        for f in files {
            let m = module_path(root, &f);
            c.code
                .insert(m.clone(), strip(&std::fs::read_to_string(&f).unwrap()));
            c.files.insert(m, f);
        }
        for (m, code) in c.code.clone() {
            let mut i = 0;
            while let Some(at) = code[i..].find("pub use ") {
                let s = i + at;
                let end = s + code[s..].find(';').unwrap();
                i = end;
                for p in expand(&code[s + 8..end]) {
                    let Some(abs) = c.absolute(&m, &[], &p) else {
                        continue;
                    };
                    let last = p.last().unwrap().clone();
                    if last == "*" {
                        c.globs.entry(m.clone()).or_default().push(abs);
                    } else {
                        c.reexports.entry(m.clone()).or_default().insert(last, abs);
                    }
                }
            }
        }
        c
    }

    /// `path` as written in module `m` (inside inline modules `inner`) as an
    /// absolute path in this crate; None when it names another crate or std.
    fn absolute(&self, m: &[String], inner: &[String], path: &[String]) -> Option<Vec<String>> {
        let mut here: Vec<String> = m.iter().chain(inner).cloned().collect();
        let mut rest = path;
        match rest.first()?.as_str() {
            "crate" => {
                here.clear();
                rest = &rest[1..];
            }
            "self" => rest = &rest[1..],
            "super" => {
                while rest.first().map(String::as_str) == Some("super") {
                    here.pop()?;
                    rest = &rest[1..];
                }
            }
            first => {
                // A relative path names a child module of the file's module, or nothing local.
                let mut child = m.to_vec();
                child.push(first.to_string());
                if !self.files.contains_key(&child) {
                    return None;
                }
                here = m.to_vec();
            }
        }
        here.extend(rest.iter().filter(|s| *s != "*").cloned());
        if path.last().map(String::as_str) == Some("*") {
            here.push("*".into());
        }
        Some(here)
    }

    /// The file that defines an absolute path, following re-exports.
    fn file_of(&self, abs: &[String], depth: usize) -> Option<Vec<String>> {
        let abs: Vec<String> = abs.iter().filter(|s| *s != "*").cloned().collect();
        let n = (0..=abs.len())
            .rev()
            .find(|&n| self.files.contains_key(&abs[..n]))?;
        let module = abs[..n].to_vec();
        let Some(item) = abs.get(n) else {
            return Some(module);
        };
        if depth < 8 {
            if let Some(target) = self.reexports.get(&module).and_then(|r| r.get(item)) {
                return self.file_of(target, depth + 1).or(Some(module));
            }
            for g in self.globs.get(&module).into_iter().flatten() {
                let mut p = g.clone();
                p.push(item.clone());
                if let Some(f) = self.file_of(&p, depth + 1)
                    && f != module
                    && self.defines(&f, item)
                {
                    return Some(f);
                }
            }
        }
        Some(module)
    }

    fn defines(&self, m: &[String], item: &str) -> bool {
        let code = &self.code[m];
        [
            "struct ", "enum ", "fn ", "const ", "type ", "trait ", "static ", "mod ",
        ]
        .iter()
        .any(|kw| {
            code.match_indices(&format!("{kw}{item}")).any(|(i, _)| {
                let after = code[i + kw.len() + item.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
    }

    /// File-level import graph: module → modules it uses (itself excluded).
    fn graph(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut g = BTreeMap::new();
        for (m, code) in &self.code {
            let mut deps = BTreeSet::new();
            for (inner, p) in paths_in(code) {
                // A child naming an item of its own ancestor (a parent's
                // mod.rs) is how Rust nests modules, not a cycle between files.
                if let Some(abs) = self.absolute(m, &inner, &p)
                    && let Some(f) = self.file_of(&abs, 0)
                    && &f != m
                    && !m.starts_with(&f)
                {
                    deps.insert(f);
                }
            }
            g.insert(m.clone(), deps);
        }
        g
    }
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "<root>".into()
    } else {
        m.join("::")
    }
}

/// Every cycle's first closing edge, as `a -> b -> … -> a`.
fn cycles(g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    fn visit(
        n: &Vec<String>,
        g: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
        out: &mut Vec<String>,
    ) {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for d in g.get(n).into_iter().flatten() {
            match state.get(d).copied().unwrap_or(0) {
                0 => visit(d, g, state, stack, out),
                1 => {
                    let at = stack.iter().position(|x| x == d).unwrap();
                    let mut c: Vec<String> = stack[at..].iter().map(|m| name(m)).collect();
                    c.push(name(d));
                    out.push(c.join(" -> "));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
    }
    let mut state = BTreeMap::new();
    let mut out = Vec::new();
    for n in g.keys() {
        if !state.contains_key(n) {
            visit(n, g, &mut state, &mut Vec::new(), &mut out);
        }
    }
    out
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn main_crate() -> Crate {
    // The binary's `cli/` and `main.rs` sit beside the library under src/;
    // they form their own crate, so they are read on their own.
    let mut c = Crate::read(&root().join("src"));
    c.files
        .retain(|m, _| m.first().map(String::as_str) != Some("cli"));
    c.code
        .retain(|m, _| m.first().map(String::as_str) != Some("cli"));
    c
}

#[test]
fn no_file_imports_a_file_that_imports_it() {
    for (label, c) in [
        ("infergate", main_crate()),
        (
            "infergate-report",
            Crate::read(&root().join("crates/report/src")),
        ),
        (
            "infergate-testkit",
            Crate::read(&root().join("crates/testkit/src")),
        ),
    ] {
        let found = cycles(&c.graph());
        assert!(
            found.is_empty(),
            "{label}: import cycles:\n{}",
            found.join("\n")
        );
    }
}

#[test]
fn stats_is_a_leaf_and_util_imports_nothing() {
    let report = Crate::read(&root().join("crates/report/src"));
    for (m, deps) in report.graph() {
        if m.first().map(String::as_str) == Some("stats") {
            for d in deps {
                assert_eq!(
                    d.first().map(String::as_str),
                    Some("stats"),
                    "{} imports {}",
                    name(&m),
                    name(&d)
                );
            }
        }
    }
    let main = main_crate();
    let g = main.graph();
    assert!(
        g[&vec!["util".to_string()]].is_empty(),
        "util imports {:?}",
        g
    );
}

/// The runtime layer (`runtime/`: lifecycle, readmit, hooks, the ledger,
/// state) is the floor the commands stand on: `qualify` and `decision`
/// import it, it never imports either, so the folder tree shows the flow
/// (runtime → qualify, runtime → decide/status).
#[test]
fn the_runtime_layer_does_not_import_the_commands_on_it() {
    let main = main_crate();
    let g = main.graph();
    let runtime: Vec<_> = g
        .iter()
        .filter(|(m, _)| m.first().map(String::as_str) == Some("runtime"))
        .collect();
    assert!(runtime.len() >= 6, "{} runtime files", runtime.len());
    for (m, deps) in runtime {
        for d in deps {
            let top = d.first().map(String::as_str);
            assert!(
                top != Some("qualify") && top != Some("decision"),
                "{} imports {}",
                name(m),
                name(d)
            );
        }
    }
    // And qualify and decision do use it (the rule is not vacuous).
    for user in ["qualify", "decision"] {
        assert!(
            g.iter()
                .filter(|(m, _)| m.first().map(String::as_str) == Some(user))
                .any(|(_, deps)| deps
                    .iter()
                    .any(|d| d.first().map(String::as_str) == Some("runtime"))),
            "{user} imports nothing from runtime"
        );
    }
}

/// A room holds one concept: no source file of the crates holds more than
/// `MAX` lines outside its tests (`tests.rs` files and the `mod tests`
/// block). Past that, a file is split along its seams (docs/architecture.md).
#[test]
fn no_room_outgrows_one_concept() {
    const MAX: usize = 900;
    let mut files = Vec::new();
    for dir in ["src", "crates/report/src", "crates/testkit/src"] {
        rust_files(&root().join(dir), &mut files);
    }
    assert!(files.len() > 100, "{} files", files.len());
    let mut over = Vec::new();
    for f in files.iter().filter(|f| !f.ends_with("tests.rs")) {
        let code = std::fs::read_to_string(f).unwrap();
        let body = code
            .find("#[cfg(test)]\nmod tests")
            .map_or(code.as_str(), |i| &code[..i]);
        let lines = body.lines().count();
        if lines > MAX {
            over.push(format!("{} ({lines} lines)", f.display()));
        }
    }
    assert!(over.is_empty(), "rooms over {MAX} lines: {over:#?}");
}

/// `verify --runs` reads what `qualify` writes, through the layers both
/// stand on: the directory's layout (`runtime::state`) and the pooling of
/// passes and blocks (`measure::pool`, `measure::interleave`). Neither
/// imports the other, so checking a qualification never runs one.
#[test]
fn verify_runs_and_qualify_are_peers() {
    let main = main_crate();
    let g = main.graph();
    let top_of = |m: &Vec<String>| m.first().cloned().unwrap_or_default();
    let mut seen = 0;
    for (m, deps) in &g {
        let (from, other) = match top_of(m).as_str() {
            "verify_runs" => ("verify_runs", "qualify"),
            "qualify" => ("qualify", "verify_runs"),
            _ => continue,
        };
        seen += 1;
        for d in deps {
            assert!(
                top_of(d) != other,
                "{} ({from}) imports {}",
                name(m),
                name(d)
            );
        }
    }
    assert!(seen >= 10, "{seen} qualify and verify_runs files");
    // Both use the shared layers (the rule is not vacuous).
    for shared in [["runtime", "state"], ["measure", "pool"]] {
        let users = g
            .iter()
            .filter(|(m, deps)| {
                ["qualify", "verify_runs"].contains(&top_of(m).as_str())
                    && deps
                        .iter()
                        .any(|d| d.starts_with(&shared.map(String::from)))
            })
            .map(|(m, _)| top_of(m))
            .collect::<BTreeSet<_>>();
        assert_eq!(users.len(), 2, "{shared:?} used by {users:?}");
    }
}

/// `decision/` is the human's side alone: `decide` and `status` (and its
/// mod.rs). `qualify` stands on the runtime layer, not on it, and it does
/// not import `qualify` either: the two commands meet only in `runtime`.
#[test]
fn decision_holds_decide_and_status_and_qualify_does_not_import_it() {
    let main = main_crate();
    let files: BTreeSet<String> = main
        .files
        .keys()
        .filter(|m| m.first().map(String::as_str) == Some("decision"))
        .map(|m| name(m))
        .collect();
    assert_eq!(
        files,
        BTreeSet::from(["decision", "decision::decide", "decision::status"].map(String::from))
    );
    let g = main.graph();
    for (m, deps) in &g {
        let top = m.first().map(String::as_str);
        let forbidden = match top {
            Some("qualify") => "decision",
            Some("decision") => "qualify",
            _ => continue,
        };
        for d in deps {
            assert_ne!(
                d.first().map(String::as_str),
                Some(forbidden),
                "{} imports {}",
                name(m),
                name(d)
            );
        }
    }
}

/// In the report crate `verify` makes reports again with `compare`, so
/// `compare` does not import `verify` (an artifact's own problems are
/// `consistency`'s); and the renderers only display what is computed before
/// them (`rendered` runs `verify`), so no file under `render/` imports it.
#[test]
fn compare_and_the_renderers_do_not_import_verify() {
    let report = Crate::read(&root().join("crates/report/src"));
    let g = report.graph();
    let imports_verify = |deps: &BTreeSet<Vec<String>>| {
        deps.iter()
            .any(|d| d.first().map(String::as_str) == Some("verify"))
    };
    let compare: Vec<_> = g
        .iter()
        .filter(|(m, _)| m.first().map(String::as_str) == Some("compare"))
        .collect();
    assert!(compare.len() >= 2, "{} compare files", compare.len());
    for (m, deps) in compare {
        assert!(!imports_verify(deps), "{} imports {deps:?}", name(m));
    }
    let render: Vec<_> = g
        .iter()
        .filter(|(m, _)| m.first().map(String::as_str) == Some("render"))
        .collect();
    assert!(render.len() >= 8, "{} render files", render.len());
    for (m, deps) in render {
        assert!(!imports_verify(deps), "{} imports {deps:?}", name(m));
    }
    // The rule sees an import of verify where there is one.
    assert!(imports_verify(&g[&vec!["rendered".to_string()]]));
}

/// The named fields of `pub struct {name}` in `code` (comments and
/// strings stripped).
fn struct_fields(code: &str, name: &str) -> Vec<String> {
    let code = strip(code);
    let start = code
        .find(&format!("pub struct {name} {{"))
        .unwrap_or_else(|| panic!("no `pub struct {name}`"));
    let body = &code[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    body.lines()
        .filter_map(|l| {
            let l = l.trim().strip_prefix("pub ").unwrap_or(l.trim());
            let (field, _) = l.split_once(':')?;
            let field = field.trim();
            field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                .then(|| field.to_string())
        })
        .filter(|f| !f.is_empty())
        .collect()
}

/// The user's policy holds what a user decides; which look a comparison is
/// and the method it computes by are the sequential design's
/// (`crates/report/src/design/`): no field of `Policy` or of its `[gate]`
/// names a look, and the method's knobs are not gate settings.
#[test]
fn the_policy_has_no_look_and_no_method() {
    let code = std::fs::read_to_string(root().join("crates/report/src/policy/mod.rs")).unwrap();
    let fields = struct_fields(&code, "Policy");
    assert!(fields.len() >= 6, "{fields:?}");
    assert!(fields.contains(&"gate".to_string()), "{fields:?}");
    for f in &fields {
        assert!(
            !f.contains("look") && !f.contains("sequential") && !f.contains("fraction"),
            "Policy has a per-look field `{f}`"
        );
    }
    let gate = struct_fields(&code, "GatePolicy");
    assert!(gate.contains(&"spending".to_string()), "{gate:?}");
    for f in &gate {
        assert!(
            ![
                "pair_requests",
                "block_mean",
                "design_spread",
                "bound_scale",
                "boundaries"
            ]
            .contains(&f.as_str())
                && !f.contains("look"),
            "GatePolicy has the method's `{f}`"
        );
    }
    // The parser sees fields where there are some.
    let fake =
        "pub struct Policy {\n    /// a look\n    pub sequential_look: usize,\n    x: u8,\n}\n";
    assert_eq!(struct_fields(fake, "Policy"), ["sequential_look", "x"]);
}

/// One definition of a look: `design::Look` in the report crate; no other
/// file of either crate (tests aside, and the gate simulations they and the
/// calibration tables run, `stats::evidence::simulation`) defines a look
/// type, its levels or the planning of the looks.
#[test]
fn a_look_is_defined_once() {
    let report = Crate::read(&root().join("crates/report/src"));
    let main = main_crate();
    let mut found = Vec::new();
    for (label, c) in [("infergate_report", &report), ("infergate", &main)] {
        for (m, code) in &c.code {
            if m.last().map(String::as_str) == Some("tests")
                || m.ends_with(&["evidence".to_string(), "simulation".to_string()])
            {
                continue;
            }
            let code = strip(code);
            for item in [
                "struct Look ",
                "struct Look<",
                "struct LookPlan",
                "fn alpha_levels",
                "fn information_fraction",
                "fn design_rounds",
            ] {
                if code.contains(item) {
                    found.push(format!("{label}::{} {}", name(m), item.trim()));
                }
            }
        }
    }
    assert_eq!(
        found,
        [
            "infergate_report::design struct Look",
            "infergate_report::design::plan fn information_fraction",
            "infergate_report::design::plan fn design_rounds",
        ],
    );
}

#[test]
fn config_is_the_lowest_layer() {
    // Configuration is read before anything runs, so it builds on nothing
    // of the pipeline: only itself, `util` and the report crate's re-exports.
    // What a suite declares is parsed and checked here; what is compiled for
    // a run (prompts, markers, marks) is `measure`'s.
    const BELOW: &[&str] = &[
        "config",
        "util",
        "report",
        "artifact",
        "atomic",
        "stats",
        "slo",
        "server_metrics",
    ];
    let main = main_crate();
    let g = main.graph();
    let config: Vec<_> = g
        .iter()
        .filter(|(m, _)| m.first().map(String::as_str) == Some("config"))
        .collect();
    assert!(config.len() >= 9, "{} config files", config.len());
    let mut left = Vec::new();
    for (m, deps) in config {
        for d in deps {
            let top = d.first().map(String::as_str).unwrap_or_default();
            if BELOW.contains(&top) {
                continue;
            }
            left.push(format!("{} imports {}", name(m), name(d)));
        }
    }
    assert!(left.is_empty(), "config imports the pipeline: {left:#?}");
}

/// `capture` (the recording proxy) is a stage of its own beside
/// `measure`: it stands on `measure` (the SSE reader, a chunk's usage, the
/// tokenizer) and `config` (its trace is a dataset trace), and nothing in
/// the pipeline imports it: replaying a capture is a `trace` cell.
#[test]
fn capture_stands_beside_measure_and_nothing_in_the_pipeline_imports_it() {
    const UNDER: &[&str] = &[
        "capture",
        "config",
        "measure",
        "util",
        "report",
        "artifact",
        "atomic",
        "stats",
        "slo",
        "server_metrics",
    ];
    let main = main_crate();
    let g = main.graph();
    let top = |m: &Vec<String>| m.first().cloned().unwrap_or_default();
    let mut left = Vec::new();
    let mut seen = 0;
    for (m, deps) in &g {
        let from_capture = top(m) == "capture";
        seen += usize::from(from_capture);
        for d in deps {
            let bad = if from_capture {
                !UNDER.contains(&top(d).as_str())
            } else {
                top(d) == "capture"
            };
            if bad {
                left.push(format!("{} imports {}", name(m), name(d)));
            }
        }
    }
    assert!(left.is_empty(), "{left:#?}");
    assert!(seen >= 4, "{seen} capture files");
    // It reads the streams it forwards with the measuring client's reader.
    assert!(
        g.iter().any(|(m, deps)| top(m) == "capture"
            && deps
                .iter()
                .any(|d| d.starts_with(&["measure".into(), "sse".into()]))),
        "capture does not read streams through measure::sse"
    );
}

#[test]
fn the_report_crate_knows_nothing_of_the_main_crate() {
    let manifest = std::fs::read_to_string(root().join("crates/report/Cargo.toml")).unwrap();
    let deps = manifest.split("[dependencies]").nth(1).unwrap();
    let deps = deps.split("\n[").next().unwrap();
    for forbidden in ["infergate", "rusqlite", "tokenizers", "reqwest", "tokio"] {
        assert!(
            !deps
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{forbidden} "))
                    || l.trim_start().starts_with(&format!("{forbidden}="))),
            "crates/report depends on {forbidden}"
        );
    }
    let c = Crate::read(&root().join("crates/report/src"));
    for (m, code) in &c.code {
        assert!(
            !code.contains("infergate::"),
            "{} names the main crate",
            name(m)
        );
    }
}

#[test]
fn the_checker_sees_a_cycle_when_there_is_one() {
    // The rule above could pass by seeing nothing: feed it a known cycle.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "pub mod x;\npub use x::Thing;\n/// crate::b in a comment is not an import\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a/x.rs"),
        "use crate::b::{self, Other};\npub struct Thing;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub struct Other;\nfn f() -> crate::a::Thing { let s = \"crate::a\"; crate::a::Thing }\n",
    )
    .unwrap();
    let c = Crate::read(src);
    let g = c.graph();
    // `crate::a::Thing` resolves through the re-export to a/x.rs.
    assert_eq!(
        g[&vec!["b".to_string()]],
        BTreeSet::from([vec!["a".to_string(), "x".to_string()]])
    );
    let found = cycles(&g);
    assert_eq!(found, vec!["a::x -> b -> a::x".to_string()], "{g:?}");
}

#[test]
fn the_checker_sees_a_super_cycle_through_a_child_module() {
    // A shape seen in this code: `c` calls `super::v::problems`, `v` calls
    // its child `r` by a bare path, and `r` imports `c` back with `super::super::`.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("v")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod c;\npub mod v;\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "pub fn make() {\n    let _ = super::v::problems();\n}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("v/mod.rs"),
        "mod r;\nuse self::r as _;\npub fn problems() {}\npub fn again() {\n    r::remake();\n}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("v/r.rs"),
        "use super::super::c::{make, self};\npub fn remake() {\n    make();\n    super::problems();\n}\n",
    )
    .unwrap();
    let c = Crate::read(src);
    let g = c.graph();
    // `super::problems` from v/r.rs names its own parent: not an edge.
    assert_eq!(
        g[&vec!["v".to_string(), "r".to_string()]],
        BTreeSet::from([vec!["c".to_string()]]),
        "{g:?}"
    );
    let found = cycles(&g);
    assert_eq!(found, vec!["c -> v -> v::r -> c".to_string()], "{g:?}");
}

#[test]
fn test_doubles_are_dev_only_and_fuzzing_is_opt_in() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let section = |name: &str| -> String {
        manifest
            .split(&format!("\n[{name}]\n"))
            .nth(1)
            .map(|s| s.split("\n[").next().unwrap().to_string())
            .unwrap_or_default()
    };
    assert!(!section("dependencies").contains("infergate-testkit"));
    assert!(section("dev-dependencies").contains("infergate-testkit"));
    let features = section("features");
    assert!(
        !features
            .lines()
            .any(|l| l.trim_start().starts_with("default")),
        "no default features: fuzzing must stay opt-in\n{features}"
    );
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    assert!(lib.contains("#[cfg(feature = \"fuzzing\")]\npub mod fuzzing;"));
    let main = main_crate();
    for m in main.files.keys() {
        let n = name(m);
        assert!(
            !n.contains("fastsource") && !n.contains("faultproxy"),
            "{n} in the main crate"
        );
    }
}

/// Docs, comments, identifiers and plans say how the system works today;
/// how it got there is in git. An ordinal "step", an issue number or a
/// stop number in them narrates history.
#[test]
fn nothing_narrates_the_history_of_the_work() {
    let history = regex::Regex::new(
        r"(?i)\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)[ _]step\b|issue #[0-9]|\bstop [0-9]+\b|\(#[0-9]+\)",
    )
    .unwrap();
    let root = root();
    let mut files = vec![root.join("README.md")];
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| {
                ["rs", "md", "toml", "py", "sh"].contains(&x.to_str().unwrap_or(""))
            }) {
                out.push(p);
            }
        }
    }
    for dir in [
        "docs", "src", "crates", "tests", "scripts", "plans", "policies", "suites", "engine",
    ] {
        walk(&root.join(dir), &mut files);
    }
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            text.lines()
                .enumerate()
                .filter(|(_, l)| history.is_match(l))
                .map(|(i, l)| format!("{rel}:{}: {}", i + 1, l.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(files.len() > 100, "{} files read", files.len());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// `watch` stands on `qualify` (a tick runs one qualification) and nothing
/// in the pipeline stands on it: a stream of builds is a caller of the
/// pipeline, not a part of it.
#[test]
fn watch_is_above_qualify_and_nothing_imports_it() {
    let main = main_crate();
    let g = main.graph();
    let mut uses_qualify = false;
    for (m, deps) in &g {
        let top = m.first().map(String::as_str);
        for d in deps {
            let dtop = d.first().map(String::as_str);
            if top == Some("watch") {
                uses_qualify |= dtop == Some("qualify");
            } else {
                assert_ne!(dtop, Some("watch"), "{} imports {}", name(m), name(d));
            }
        }
    }
    assert!(uses_qualify, "watch imports nothing from qualify");
}
