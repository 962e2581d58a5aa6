//! The hasher of the tables keyed by the u64 (and u32) ids looked up at every request
//! or response: a client's requests in flight by MessageId and its sessions by
//! SessionId, a server's sessions, trees and opens by the ids it assigned.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A table keyed by ids, hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Hashes an id with one multiplication (Fibonacci hashing) instead of SipHash.
///
/// For keys their owner assigns: consecutive ids (MessageIds, a server's SessionIds,
/// TreeIds and FileIds) never share a bucket, because the low bits that pick it are a
/// bijection of the id's. The peer only chooses what it looks up (a miss costs one
/// probe), never what is inserted, so it cannot crowd a bucket. Not for tables whose
/// keys the peer chooses.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

const FIBONACCI: u64 = 0x9E37_79B9_7F4A_7C15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(FIBONACCI);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(FIBONACCI);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn consecutive_ids_spread_and_the_table_finds_them() {
        let b = BuildHasherDefault::<IdHasher>::default();
        // Consecutive ids land in distinct buckets of a table their size.
        let mut seen = std::collections::HashSet::new();
        for id in 5000u64..5000 + 1024 {
            assert!(
                seen.insert(b.hash_one(id) & 1023),
                "id {id} shares a bucket"
            );
        }
        let mut seen = std::collections::HashSet::new();
        for id in 1u32..=1024 {
            assert!(
                seen.insert(b.hash_one(id) & 1023),
                "id {id} shares a bucket"
            );
        }
        // And the high bits (the table's tag) differ between neighbours.
        assert_ne!(b.hash_one(1u64) >> 57, b.hash_one(2u64) >> 57);
        let mut m: IdMap<u64, u64> = IdMap::default();
        for id in (0..10_000u64).chain([u64::MAX, 1 << 63]) {
            m.insert(id, id ^ 7);
        }
        assert_eq!(m.get(&u64::MAX), Some(&(u64::MAX ^ 7)));
        assert_eq!(m.remove(&4321), Some(4321 ^ 7));
        assert_eq!(m.get(&4321), None);
        assert_eq!(m.len(), 10_001);
        let mut t: IdMap<u32, u32> = IdMap::default();
        t.insert(7, 1);
        assert_eq!(t.get(&7), Some(&1));
        assert_eq!(t.get(&8), None);
    }
}
