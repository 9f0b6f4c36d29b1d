//! An indexed max-heap over dense cluster ids, keyed by each cluster's best merge key.
//!
//! The engine keeps one entry per cluster (its best listed partner), not one per pair, so the
//! heap stays `O(n)` in size; keys change in place. Order: higher key first, then lower id,
//! which together with the partner rule gives the deterministic tie-breaking of
//! `CONVENTIONS.md`. Keys are compared with a total order ([`TotalOrder`]).

use std::cmp::Ordering;

use super::TotalOrder;

const ABSENT: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub(crate) struct IndexedHeap<K> {
    heap: Vec<u32>,
    pos: Vec<u32>,
    key: Vec<Option<K>>,
}

impl<K: TotalOrder> IndexedHeap<K> {
    /// An empty heap for ids `0..capacity`.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            heap: Vec::with_capacity(capacity),
            pos: vec![ABSENT; capacity],
            key: vec![None; capacity],
        }
    }

    #[inline]
    fn key_of(&self, id: u32) -> &K {
        self.key[id as usize]
            .as_ref()
            .expect("ids in the heap have keys")
    }

    /// `a` comes before `b`.
    #[inline]
    fn before(&self, a: u32, b: u32) -> bool {
        match self.key_of(a).total_cmp(self.key_of(b)) {
            Ordering::Greater => true,
            Ordering::Less => false,
            Ordering::Equal => a < b,
        }
    }

    pub(crate) fn top(&self) -> Option<usize> {
        self.heap.first().map(|&i| i as usize)
    }

    /// The ids in the first `k` slots of the heap: the top, then ids near it (not in order).
    pub(crate) fn near_top(&self, k: usize) -> &[u32] {
        &self.heap[..k.min(self.heap.len())]
    }

    pub(crate) fn contains(&self, id: usize) -> bool {
        self.pos[id] != ABSENT
    }

    /// Inserts `id` or changes its key.
    pub(crate) fn set(&mut self, id: usize, key: K) {
        self.key[id] = Some(key);
        if self.contains(id) {
            let p = self.pos[id] as usize;
            self.sift_up(p);
            self.sift_down(self.pos[id] as usize);
        } else {
            self.heap.push(id as u32);
            self.pos[id] = (self.heap.len() - 1) as u32;
            self.sift_up(self.heap.len() - 1);
        }
    }

    /// Removes `id` if present.
    pub(crate) fn remove(&mut self, id: usize) {
        if !self.contains(id) {
            return;
        }
        let p = self.pos[id] as usize;
        let last = self.heap.len() - 1;
        self.swap(p, last);
        self.heap.pop();
        self.pos[id] = ABSENT;
        if p < self.heap.len() {
            let moved = self.heap[p] as usize;
            self.sift_up(p);
            self.sift_down(self.pos[moved] as usize);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a] as usize] = a as u32;
        self.pos[self.heap[b] as usize] = b as u32;
    }

    fn sift_up(&mut self, mut p: usize) {
        while p > 0 {
            let parent = (p - 1) / 2;
            if self.before(self.heap[p], self.heap[parent]) {
                self.swap(p, parent);
                p = parent;
            } else {
                break;
            }
        }
    }

    fn sift_down(&mut self, mut p: usize) {
        loop {
            let (l, r) = (2 * p + 1, 2 * p + 2);
            let mut best = p;
            if l < self.heap.len() && self.before(self.heap[l], self.heap[best]) {
                best = l;
            }
            if r < self.heap.len() && self.before(self.heap[r], self.heap[best]) {
                best = r;
            }
            if best == p {
                return;
            }
            self.swap(p, best);
            p = best;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drains the heap and checks it against a sort, under random updates and removals.
    #[test]
    fn matches_sorting_under_updates() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..50 {
            let n = 64;
            let mut heap = IndexedHeap::new(n);
            let mut keys: Vec<Option<f64>> = vec![None; n];
            for _ in 0..400 {
                let id = (next() % n as u64) as usize;
                if next() % 4 == 0 {
                    heap.remove(id);
                    keys[id] = None;
                } else {
                    // Few distinct values, so ties are common.
                    let k = (next() % 7) as f64 - 3.0;
                    heap.set(id, k);
                    keys[id] = Some(k);
                }
            }
            let mut expected: Vec<(f64, usize)> = keys
                .iter()
                .enumerate()
                .filter_map(|(i, k)| k.map(|k| (k, i)))
                .collect();
            expected.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            let mut got = Vec::new();
            while let Some(id) = heap.top() {
                got.push((keys[id].unwrap(), id));
                heap.remove(id);
            }
            assert_eq!(got, expected);
        }
    }
}
