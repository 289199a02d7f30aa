//! A prompt's blocks as ids: each block's keyed hash chained over the
//! prefix before it, mapped to a small integer the first time it is seen,
//! so two prompts sharing a prefix share their first ids and nothing of
//! the text is kept. The key is random per capture and never written.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

/// Most block hashes remembered: 2^20 entries of about 100 bytes, ~100 MB
/// at most. Past it the least recently seen is forgotten (and counted): a
/// prefix seen again after its eviction gets new ids.
pub const MAX_BLOCKS: usize = 1 << 20;

type Chain = [u8; 32];

/// A map bounded to `cap` entries that forgets the least recently used.
#[derive(Debug)]
pub struct Lru<K, V> {
    cap: usize,
    map: HashMap<K, (V, u64)>,
    order: BTreeMap<u64, K>,
    tick: u64,
    evicted: u64,
}

impl<K: std::hash::Hash + Eq + Clone, V: Copy> Lru<K, V> {
    pub fn new(cap: usize) -> Lru<K, V> {
        Lru {
            cap: cap.max(1),
            map: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            evicted: 0,
        }
    }

    /// The value of `k`, now the most recently used.
    pub fn get(&mut self, k: &K) -> Option<V> {
        let tick = self.next();
        let (v, at) = self.map.get_mut(k)?;
        self.order.remove(at);
        *at = tick;
        self.order.insert(tick, k.clone());
        Some(*v)
    }

    /// Remember `k`, forgetting the least recently used when full.
    pub fn insert(&mut self, k: K, v: V) {
        let tick = self.next();
        if let Some((_, at)) = self.map.insert(k.clone(), (v, tick)) {
            self.order.remove(&at);
        } else if self.map.len() > self.cap
            && let Some((_, old)) = self.order.pop_first()
        {
            self.map.remove(&old);
            self.evicted += 1;
        }
        self.order.insert(tick, k);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Entries forgotten to stay within the cap.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    fn next(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }
}

/// The capture's block ids and sessions.
#[derive(Debug)]
pub struct Blocks {
    key: [u8; 32],
    ids: Lru<Chain, u64>,
    next_id: u64,
    /// A prompt's last full block's id → the session of the first request
    /// whose full blocks ended there.
    sessions: Lru<u64, u64>,
}

impl Blocks {
    pub fn new(key: [u8; 32], cap: usize) -> Blocks {
        Blocks {
            key,
            ids: Lru::new(cap),
            next_id: 0,
            sessions: Lru::new(cap),
        }
    }

    /// The ids of a prompt's `bytes` (its text, or its token ids 4 bytes
    /// each) cut into blocks of `block_bytes`; the last block may be partial.
    pub fn ids(&mut self, bytes: &[u8], block_bytes: usize) -> Vec<u64> {
        let mut chain: Chain = [0; 32];
        let mut out = Vec::with_capacity(bytes.len().div_ceil(block_bytes.max(1)));
        for block in bytes.chunks(block_bytes.max(1)) {
            let mut h = Sha256::new();
            h.update(self.key);
            h.update(chain);
            h.update(block);
            chain = h.finalize().into();
            let id = match self.ids.get(&chain) {
                Some(id) => id,
                None => {
                    let id = self.next_id;
                    self.next_id += 1;
                    self.ids.insert(chain, id);
                    id
                }
            };
            out.push(id);
        }
        out
    }

    /// The session of request `id` with `full` full blocks of `ids`: the
    /// session of the earliest request whose full blocks are a prefix of
    /// these, else its own.
    pub fn session(&mut self, id: u64, ids: &[u64], full: usize) -> u64 {
        let full = &ids[..full.min(ids.len())];
        let found = (1..=full.len()).find_map(|k| self.sessions.get(&full[k - 1]));
        let session = found.unwrap_or(id);
        if let Some(last) = full.last()
            && self.sessions.get(last).is_none()
        {
            self.sessions.insert(*last, session);
        }
        session
    }

    /// Block ids forgotten to stay within the cap.
    pub fn evicted(&self) -> u64 {
        self.ids.evicted()
    }
}

/// A fresh key from the system's random source.
pub fn random_key() -> std::io::Result<[u8; 32]> {
    use std::io::Read;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut key)?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_prefix_shares_its_leading_ids_and_nothing_after() {
        let mut b = Blocks::new([7; 32], 100);
        let a = b.ids(b"aaaabbbbccccdd", 4);
        let c = b.ids(b"aaaabbbbxxxxdd", 4);
        assert_eq!(a, vec![0, 1, 2, 3]);
        assert_eq!(
            c,
            vec![0, 1, 4, 5],
            "the same last block after another prefix is another id"
        );
        // Same bytes at another position: not the same id (chained).
        assert_eq!(b.ids(b"bbbb", 4), vec![6]);
        // Another key: the same text hashes apart (ids are per capture).
        let mut other = Blocks::new([8; 32], 100);
        other.ids(b"zzzz", 4);
        assert_eq!(other.ids(b"aaaa", 4), vec![1]);
    }

    #[test]
    fn sessions_link_to_the_earliest_request_whose_blocks_are_a_prefix() {
        let mut b = Blocks::new([1; 32], 100);
        let t1 = b.ids(b"sysAuser", 4);
        assert_eq!(b.session(0, &t1, 2), 0);
        let t2 = b.ids(b"sysAuserans1more", 4);
        assert_eq!(b.session(1, &t2, 4), 0);
        let t3 = b.ids(b"sysAuserans1moreans2", 4);
        assert_eq!(b.session(2, &t3, 5), 0);
        let other = b.ids(b"xxxxuser", 4);
        assert_eq!(b.session(3, &other, 2), 3);
    }

    #[test]
    fn the_lru_forgets_the_least_recently_used_and_counts_it() {
        let mut l: Lru<u32, u32> = Lru::new(2);
        l.insert(1, 10);
        l.insert(2, 20);
        assert_eq!(l.get(&1), Some(10));
        l.insert(3, 30);
        assert_eq!(l.get(&2), None, "2 was least recently used");
        assert_eq!((l.get(&1), l.get(&3)), (Some(10), Some(30)));
        assert_eq!((l.len(), l.evicted()), (2, 1));
        l.insert(3, 31);
        assert_eq!((l.len(), l.evicted(), l.get(&3)), (2, 1, Some(31)));
        // A block id evicted comes back as a new id.
        let mut b = Blocks::new([0; 32], 1);
        assert_eq!(b.ids(b"aaaa", 4), vec![0]);
        assert_eq!(b.ids(b"bbbb", 4), vec![1]);
        assert_eq!(b.ids(b"aaaa", 4), vec![2]);
        assert_eq!(b.evicted(), 2);
    }
}
