//! Bounded, thread-safe memo tables for pure functions the gate calls with
//! the same arguments again and again (a look's exact level, the paths
//! through a schedule's looks, a Beta quantile): a qualification's looks, and
//! every simulated run of the tests, ask for the same values thousands of
//! times. A value is what the function returned for those argument bits, so
//! memoizing changes no result.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// A memo of at most twice `capacity` entries: the ones added since the
/// last turn, and the turn before's (one found there is kept again). A
/// used entry survives turns; an unused one is gone after two.
pub(crate) struct Memo<K, V> {
    tables: Mutex<Option<Tables<K, V>>>,
    capacity: usize,
}

struct Tables<K, V> {
    new: HashMap<K, V>,
    old: HashMap<K, V>,
}

impl<K: Eq + Hash, V: Clone> Memo<K, V> {
    pub(crate) const fn new(capacity: usize) -> Self {
        Memo {
            tables: Mutex::new(None),
            capacity,
        }
    }

    /// The value memoized for `key`, if any.
    pub(crate) fn get(&self, key: &K) -> Option<V> {
        let mut guard = self.lock();
        let tables = guard.as_mut()?;
        if let Some(v) = tables.new.get(key) {
            return Some(v.clone());
        }
        let (key, v) = tables.old.remove_entry(key)?;
        self.keep(tables, key, v.clone());
        Some(v)
    }

    /// Memoizes `v` for `key`.
    pub(crate) fn insert(&self, key: K, v: V) {
        let mut guard = self.lock();
        let tables = guard.get_or_insert_with(|| Tables {
            new: HashMap::new(),
            old: HashMap::new(),
        });
        self.keep(tables, key, v);
    }

    /// The value memoized for `key`, else `compute()`'s, kept. `compute`
    /// runs outside the lock, so a slow one holds no other thread up (two
    /// threads may both compute a missing value; they get the same one).
    pub(crate) fn get_or(&self, key: K, compute: impl FnOnce() -> V) -> V {
        if let Some(v) = self.get(&key) {
            return v;
        }
        let v = compute();
        self.insert(key, v.clone());
        v
    }

    fn keep(&self, tables: &mut Tables<K, V>, key: K, v: V) {
        if tables.new.len() >= self.capacity {
            tables.old = std::mem::take(&mut tables.new);
        }
        tables.new.insert(key, v);
    }

    /// Entries held now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock()
            .as_ref()
            .map_or(0, |t| t.new.len() + t.old.len())
    }

    /// A panic elsewhere while the lock was held leaves tables of complete
    /// entries (each is inserted whole): still fit to serve.
    fn lock(&self) -> MutexGuard<'_, Option<Tables<K, V>>> {
        self.tables.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memo_serves_what_was_computed_and_stays_bounded() {
        let memo: Memo<u32, u32> = Memo::new(3);
        let calls = std::cell::Cell::new(0);
        let square = |x: u32| {
            calls.set(calls.get() + 1);
            x * x
        };
        assert_eq!(memo.get_or(4, || square(4)), 16);
        assert_eq!(memo.get_or(4, || square(4)), 16);
        assert_eq!(calls.get(), 1);
        for x in 0..20 {
            assert_eq!(memo.get_or(x, || square(x)), x * x);
            // A used entry is kept through the turns.
            assert_eq!(memo.get_or(4, || square(4)), 16);
            assert!(memo.len() <= 6);
        }
        assert_eq!(calls.get(), 20);
        assert_eq!(memo.get(&100), None);
    }
}
