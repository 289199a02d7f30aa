//! Deterministic filler text: common words from a seed, so any tokenizer
//! splits them sanely. A leaf module (no imports of the crate): the
//! workload's prompts and the turnover's generated tasks both use it.

/// Word list for filler text: common words, so any tokenizer splits them sanely.
pub const WORDS: &[&str] = &[
    "river", "stone", "light", "garden", "window", "silver", "morning", "orange", "paper",
    "harbor", "forest", "bridge", "candle", "winter", "summer", "valley", "market", "letter",
    "planet", "mirror", "thunder", "meadow", "engine", "castle", "island", "pocket", "rabbit",
    "ladder", "copper", "basket", "feather", "lantern", "compass", "blanket", "cottage", "anchor",
    "pepper", "marble", "tunnel", "violet", "kettle", "saddle", "glacier", "canyon", "orchard",
    "pebble", "quartz", "falcon", "walnut", "cabin", "ribbon", "timber", "velvet", "sparrow",
    "crystal", "harvest", "lemon", "shadow", "signal", "voyage",
];

/// A deterministic filler of `n` words from `seed`.
pub fn filler(n: usize, seed: u64) -> String {
    let mut s = String::with_capacity(n * 8);
    push_filler(&mut s, n, seed);
    s
}

/// [`filler`], appended to `s`.
pub fn push_filler(s: &mut String, n: usize, seed: u64) {
    for (i, w) in filler_words(seed).take(n).enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[w]);
    }
}

/// The filler's words from `seed`, as indices into [`WORDS`], without end:
/// `filler(n, seed)` is the first `n` of them joined by spaces.
pub fn filler_words(seed: u64) -> impl Iterator<Item = usize> {
    let mut x = seed ^ 0x2545_F491_4F6C_DD1D;
    std::iter::from_fn(move || {
        // xorshift64*: cheap and stable; quality is irrelevant for filler.
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        Some((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as usize % WORDS.len())
    })
}
