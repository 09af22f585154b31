//! Interned names: every kernel, API and marker name is stored once and referenced by id.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (rustc's hasher): kernel names are long and looked up once per event, where
/// SipHash's DoS resistance buys nothing and costs a measurable share of import time.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Index into a [`StringTable`]. Id 0 is always the empty string and means "none".
pub type StrId = u32;

/// The empty string's id, used for "no value" in name-typed columns.
pub const NO_STR: StrId = 0;

/// An append-only interner; ids are dense and stable, so a writer can stream new names
/// as they appear.
#[derive(Debug, Clone)]
pub struct StringTable {
    values: Vec<String>,
    index: FxMap<String, StrId>,
    /// Total bytes of the values.
    bytes: usize,
}

impl Default for StringTable {
    fn default() -> Self {
        let mut t = Self {
            values: Vec::new(),
            index: FxMap::default(),
            bytes: 0,
        };
        t.intern("");
        t
    }
}

impl StringTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Returns the id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.values.len() as StrId;
        self.values.push(s.to_owned());
        self.index.insert(s.to_owned(), id);
        self.bytes += s.len();
        id
    }

    /// The string for `id`, or "" for an id this table does not hold (never panics on
    /// ids read from foreign files).
    pub fn get(&self, id: StrId) -> &str {
        self.values
            .get(id as usize)
            .map(String::as_str)
            .unwrap_or("")
    }

    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.len() <= 1
    }

    /// Total bytes of the names held (each is stored twice: in id order and in the index).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Rebuilds a table from stored values in id order (the reader's path).
    pub fn from_values(values: Vec<String>) -> Self {
        let mut t = Self::default();
        for (i, v) in values.into_iter().enumerate() {
            if i == 0 {
                continue;
            }
            // Duplicates in a foreign file keep their positional id so references stay valid.
            let id = t.values.len() as StrId;
            t.index.entry(v.clone()).or_insert(id);
            t.bytes += v.len();
            t.values.push(v);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_and_zero_is_empty() {
        let mut t = StringTable::new();
        assert_eq!(t.get(NO_STR), "");
        let a = t.intern("gemv");
        let b = t.intern("attn");
        assert_eq!(t.intern("gemv"), a);
        assert_ne!(a, b);
        assert_eq!(t.get(b), "attn");
        assert_eq!(t.get(999), "");
        let r = StringTable::from_values(t.values().to_vec());
        assert_eq!(r.get(a), "gemv");
        assert_eq!(r.lookup("attn"), Some(b));
    }
}
