//! Canary markers: one per request, unique within a run and across its
//! repeats, in the shape `config::turnover::marker` defines (`K48213`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::turnover::marker::{LETTERS, NUMBERS};
pub use crate::config::turnover::marker::{MARKER_LEN, MARKER_SPACE, marker_shaped};

/// Prime and larger than nothing that divides MARKER_SPACE (2, 3, 5, 11), so
/// `ordinal * STRIDE + offset (mod MARKER_SPACE)` is a bijection: distinct
/// ordinals can never share a marker.
const STRIDE: u64 = 1_000_003;

/// Key that decides which markers a workload gets: FNV-1a over its name and
/// seed. Stable across platforms and Rust versions, unlike `DefaultHasher`,
/// so baseline and candidate are sent the very same prompts.
pub fn marker_key(name: &str, seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes().chain(seed.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The marker of the `ordinal`-th request of a workload (`ordinal` below [`MARKER_SPACE`]).
pub fn marker(key: u64, ordinal: u64) -> String {
    let v = ((ordinal % MARKER_SPACE) * STRIDE + key % MARKER_SPACE) % MARKER_SPACE;
    let letter = LETTERS[(v / NUMBERS) as usize] as char;
    format!("{letter}{}", 10_000 + v % NUMBERS)
}

/// Every marker a qualification issues, with where it was issued: a marker
/// from another repeat, another workload or an earlier pass (stale KV or
/// prefix cache on the same server) in an answer is contamination too.
/// Prompts are deterministic, so the whole set is known before any request.
#[derive(Clone, Default, PartialEq)]
pub struct IssuedMarkers(Arc<HashMap<String, String>>);

impl std::fmt::Debug for IssuedMarkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IssuedMarkers({} markers)", self.0.len())
    }
}

impl IssuedMarkers {
    /// `(workload name, marker key, requests, repeats)` of each workload.
    pub fn of_workloads<'a>(
        workloads: impl IntoIterator<Item = (&'a str, u64, usize, usize)>,
    ) -> IssuedMarkers {
        let mut all = HashMap::new();
        for (name, key, requests, repeats) in workloads {
            for repeat in 0..repeats {
                for (i, m) in MarkerSet::for_run(key, repeat, requests).iter().enumerate() {
                    all.insert(
                        m.to_string(),
                        format!("turnover {name} repeat {repeat} request {i}"),
                    );
                }
            }
        }
        IssuedMarkers(Arc::new(all))
    }

    /// Where `marker` was issued, if it was.
    pub fn origin(&self, marker: &str) -> Option<&str> {
        self.0.get(marker).map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The markers of one run: request `i` of repeat `r` gets ordinal `r * requests + i`,
/// so no two requests of a run, or of its repeats, share one.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkerSet {
    markers: Vec<String>,
    owner: HashMap<String, usize>,
    /// Markers issued anywhere in the qualification (may include this run's).
    issued: IssuedMarkers,
}

impl MarkerSet {
    /// Markers for `requests` requests of repeat `repeat`. The caller keeps
    /// `(repeat + 1) * requests` within [`MARKER_SPACE`] (the spec validates it).
    pub fn for_run(key: u64, repeat: usize, requests: usize) -> MarkerSet {
        let base = repeat as u64 * requests as u64;
        let markers: Vec<String> = (0..requests as u64)
            .map(|i| marker(key, base + i))
            .collect();
        let owner = markers
            .iter()
            .enumerate()
            .map(|(i, m)| (m.clone(), i))
            .collect();
        MarkerSet {
            markers,
            owner,
            issued: IssuedMarkers::default(),
        }
    }

    /// The same run, judged against every marker of the qualification.
    pub fn with_issued(mut self, issued: IssuedMarkers) -> MarkerSet {
        self.issued = issued;
        self
    }

    /// Is `marker` another request's: of this run but not `own`, or issued elsewhere?
    pub fn foreign_to(&self, own: usize, marker: &str) -> bool {
        match self.owner(marker) {
            Some(o) => o != own,
            None => self.issued.origin(marker).is_some(),
        }
    }

    /// Where a foreign `marker` came from, for people.
    pub fn origin(&self, marker: &str) -> Option<String> {
        match self.owner(marker) {
            Some(o) => Some(format!("request {o} of this run")),
            None => self.issued.origin(marker).map(str::to_string),
        }
    }

    pub fn len(&self) -> usize {
        self.markers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.markers.is_empty()
    }

    /// Marker of request `index`.
    pub fn get(&self, index: usize) -> Option<&str> {
        self.markers.get(index).map(String::as_str)
    }

    /// Which request of this run owns `marker`.
    pub fn owner(&self, marker: &str) -> Option<usize> {
        self.owner.get(marker).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.markers.iter().map(String::as_str)
    }
}

/// Result of the canary check of one answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CanaryCheck {
    /// The answer begins with its own marker (after optional whitespace).
    pub begins_with_own: bool,
    /// Other requests' markers of the same run found anywhere in the answer
    /// (content or reasoning), each once, in order of appearance.
    pub foreign: Vec<String>,
}

impl CanaryCheck {
    /// Passes iff the answer begins with its marker and carries no foreign one.
    pub fn passed(&self) -> bool {
        self.begins_with_own && self.foreign.is_empty()
    }
}

/// Does `content` begin with `marker`, allowing leading whitespace? `K482130`
/// does not begin with `K48213`: the marker must end where a number would.
pub fn begins_with(content: &str, marker: &str) -> bool {
    content
        .trim_start()
        .strip_prefix(marker)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// Canary check of request `own` of `set` against its captured answer.
pub fn check(set: &MarkerSet, own: usize, content: &str, reasoning: &str) -> CanaryCheck {
    let begins_with_own = set.get(own).is_some_and(|m| begins_with(content, m));
    let mut foreign: Vec<String> = Vec::new();
    for m in marker_shaped(content).chain(marker_shaped(reasoning)) {
        if set.foreign_to(own, m) && !foreign.iter().any(|f| f == m) {
            foreign.push(m.to_string());
        }
    }
    CanaryCheck {
        begins_with_own,
        foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_exact_limit_is_the_marker_space() {
        assert_eq!(MARKER_SPACE, infergate_report::MAX_EXACT_REQUESTS);
    }
    use std::collections::HashSet;

    #[test]
    fn markers_are_unique_across_a_run_and_its_repeats() {
        let key = marker_key("words", 1);
        let mut seen = HashSet::new();
        for repeat in 0..3 {
            let set = MarkerSet::for_run(key, repeat, 500);
            for m in set.iter() {
                assert!(seen.insert(m.to_string()), "duplicate marker {m}");
            }
        }
        assert_eq!(seen.len(), 1500);
    }

    #[test]
    fn the_mapping_is_a_bijection_on_the_whole_space() {
        // Exhaustive: every ordinal maps to a distinct marker.
        let key = marker_key("x", 7);
        let mut seen = vec![false; MARKER_SPACE as usize];
        for o in 0..MARKER_SPACE {
            let v = ((o * STRIDE) + key % MARKER_SPACE) % MARKER_SPACE;
            assert!(!seen[v as usize]);
            seen[v as usize] = true;
        }
        let m = marker(key, 12);
        assert_eq!(m.len(), MARKER_LEN);
    }

    #[test]
    fn markers_have_the_calibrated_shape_and_avoid_example_letters() {
        let set = MarkerSet::for_run(marker_key("shape", 0), 0, 2000);
        for m in set.iter() {
            let b = m.as_bytes();
            assert_eq!(b.len(), 6, "{m}");
            assert!(b[0].is_ascii_uppercase() && !b"QXIO".contains(&b[0]), "{m}");
            assert!(b[1] != b'0' && b[1..].iter().all(u8::is_ascii_digit), "{m}");
            assert_eq!(marker_shaped(m).collect::<Vec<_>>(), vec![m]);
        }
    }

    #[test]
    fn markers_are_deterministic_per_name_and_seed() {
        assert_eq!(marker(marker_key("a", 1), 3), marker(marker_key("a", 1), 3));
        assert_ne!(
            MarkerSet::for_run(marker_key("a", 1), 0, 8),
            MarkerSet::for_run(marker_key("a", 2), 0, 8)
        );
    }

    #[test]
    fn finds_marker_shapes_but_not_longer_numbers() {
        let t = "K48213 cedar, B12345x and Z123456 and cedarM55555. Q1234 é R99999";
        let found: Vec<&str> = marker_shaped(t).collect();
        assert_eq!(found, ["K48213", "B12345", "M55555", "R99999"]);
        assert_eq!(marker_shaped("").count(), 0);
        assert_eq!(marker_shaped("K4821").count(), 0);
    }

    #[test]
    fn begins_with_allows_leading_whitespace_only() {
        assert!(begins_with("K48213 cedar", "K48213"));
        assert!(begins_with("\n  K48213", "K48213"));
        assert!(begins_with("K48213", "K48213"));
        assert!(begins_with("K48213: cedar", "K48213"));
        assert!(!begins_with("Sure! K48213 cedar", "K48213"));
        assert!(!begins_with("K482130 cedar", "K48213"));
        assert!(!begins_with("", "K48213"));
    }

    #[test]
    fn foreign_markers_of_the_same_run_are_contamination() {
        let set = MarkerSet::for_run(marker_key("c", 0), 0, 4);
        let (m0, m1, m2) = (
            set.get(0).unwrap(),
            set.get(1).unwrap(),
            set.get(2).unwrap(),
        );

        let clean = check(&set, 0, &format!(" {m0} cedar cedar"), "");
        assert!(clean.passed());

        // A's answer carrying B's content: wrong start and a foreign marker.
        let swapped = check(&set, 0, &format!("{m1} cedar cedar"), "");
        assert!(!swapped.begins_with_own);
        assert_eq!(swapped.foreign, [m1]);

        // Own marker first, but another request's marker later (and in reasoning), once each.
        let leak = check(&set, 0, &format!("{m0} cedar {m2} {m2}"), m1);
        assert!(leak.begins_with_own && !leak.passed());
        assert_eq!(leak.foreign, [m2, m1]);

        // Another repeat's marker counts once the qualification's markers are known.
        let key = marker_key("c", 0);
        let other = MarkerSet::for_run(key, 1, 4);
        let o1 = other.get(1).unwrap();
        let alone = check(&set, 0, &format!("{m0} {o1}"), "");
        assert!(
            alone.passed(),
            "without the registry another repeat is invisible"
        );
        let all = IssuedMarkers::of_workloads([("c", key, 4, 2), ("d", marker_key("d", 0), 4, 1)]);
        assert_eq!(all.len(), 12);
        let judged = set.clone().with_issued(all.clone());
        let leak = check(&judged, 0, &format!("{m0} {o1}"), "");
        assert_eq!(leak.foreign, [o1]);
        assert_eq!(judged.origin(o1).unwrap(), "turnover c repeat 1 request 1");
        let d0 = MarkerSet::for_run(marker_key("d", 0), 0, 4);
        let cross = check(&judged, 2, m2, d0.get(3).unwrap());
        assert_eq!(cross.foreign, [d0.get(3).unwrap()]);
        // Its own marker stays its own with the registry too.
        assert!(check(&judged, 0, &format!("{m0} cedar"), "").passed());

        // A marker-shaped string that belongs to no request of the run is not contamination.
        let stray = check(&set, 0, &format!("{m0} Q52817 cedar"), "");
        assert!(stray.passed());

        // Missing own marker, nothing foreign: canary fails without contamination.
        let missing = check(&set, 3, "cedar cedar", "");
        assert!(!missing.passed() && missing.foreign.is_empty());
    }
}
