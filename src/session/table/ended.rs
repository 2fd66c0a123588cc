//! Sealed ids of sessions ended here, remembered (by a hash of the id) until they expire,
//! so that such an id is not resumed on this replica.

use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasher as _;

/// Most ended sealed ids remembered; beyond that the oldest are forgotten (and could be
/// resumed here again until they expire, as on any other replica).
const MAX_ENDED: usize = 65_536;

/// Sealed ids of sessions ended here (by a hash of the id), oldest first.
#[derive(Default)]
pub(super) struct Ended {
    order: VecDeque<(u64, u64)>,
    hashes: HashSet<u64>,
    hasher: std::collections::hash_map::RandomState,
}

impl Ended {
    pub(super) fn insert(&mut self, id: &str, expires: u64, now: u64) {
        while let Some(&(hash, until)) = self.order.front() {
            if until > now && self.order.len() < MAX_ENDED {
                break;
            }
            self.order.pop_front();
            self.hashes.remove(&hash);
        }
        let hash = self.hasher.hash_one(id);
        if self.hashes.insert(hash) {
            self.order.push_back((hash, expires));
        }
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.hashes.contains(&self.hasher.hash_one(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_ids_are_forgotten() {
        let mut ended = Ended::default();
        ended.insert("a", 10, 5);
        ended.insert("b", 20, 5);
        ended.insert("c", 30, 15);
        assert!(!ended.contains("a") && ended.contains("b") && ended.contains("c"), "expired ones are forgotten");
    }
}
