//! Per-cluster candidate lists: a few best partners and a floor below which nothing is
//! listed.

use super::TotalOrder;

/// How many candidate partners a cluster remembers after its first scan.
pub(crate) const CANDIDATES: usize = 8;

/// A cluster's best known partners with higher ids, best first (higher key, then lower id).
///
/// Invariant: no partner missing from `list` ranks before `floor`. Beside the floor the
/// list keeps its client's *cutoff* `C` (see [`Linkage::cutoff`](super::Linkage::cutoff)),
/// brought up to date by the closure given to [`push`](Self::push) whenever the floor
/// changes; a partner that ranks below the floor is a no-op for [`push`](Self::push), so
/// the caller may leave out any partner that the cutoff proves to rank below it.
#[derive(Debug, Clone)]
pub(crate) struct Candidates<K, C = ()> {
    pub(crate) list: Vec<(K, u32)>,
    cap: usize,
    pub(crate) floor: Option<(K, u32)>,
    /// The cutoff of the floor's key (`None` without a floor, or where the client has none).
    pub(crate) cutoff: Option<C>,
}

/// `a` comes before `b` in candidate order: a higher key, or an equal one and a lower id.
#[inline]
pub(crate) fn before<K: TotalOrder>(a: (K, u32), b: (K, u32)) -> bool {
    a.0.total_cmp(&b.0).then_with(|| b.1.cmp(&a.1)).is_gt()
}

impl<K: TotalOrder, C> Candidates<K, C> {
    pub(crate) fn empty() -> Self {
        Self::with_room(CANDIDATES)
    }

    /// An empty list that keeps up to `cap` partners.
    pub(crate) fn with_room(cap: usize) -> Self {
        Self {
            cap,
            list: Vec::with_capacity(cap + 1),
            floor: None,
            cutoff: None,
        }
    }

    /// An empty list with this one's room and floor, and the floor's cutoff by `cutoff`: a
    /// partner that ranks below the floor stays out of it from the start.
    pub(crate) fn empty_above_floor(&self, cutoff: &impl Fn(&K) -> Option<C>) -> Self {
        Self {
            floor: self.floor,
            cutoff: self.floor.and_then(|f| cutoff(&f.0)),
            ..Self::with_room(self.cap)
        }
    }

    /// Whichever ranks first of the floor and `entry` becomes the floor.
    #[inline]
    fn lower_floor(&mut self, entry: (K, u32), cutoff: &impl Fn(&K) -> Option<C>) {
        if self.floor.is_none_or(|f| before(entry, f)) {
            self.floor = Some(entry);
            self.cutoff = cutoff(&entry.0);
        }
    }

    /// Files a partner, keeping at most the list's room of entries, all ranked before the
    /// floor; `cutoff` gives the cutoff of a new floor's key. A partner that does not rank
    /// before the floor changes nothing.
    #[inline]
    pub(crate) fn push(&mut self, entry: (K, u32), cutoff: &impl Fn(&K) -> Option<C>) {
        if let Some(f) = self.floor {
            if !before(entry, f) {
                return;
            }
        }
        if self.list.len() == self.cap && !before(entry, self.list[self.cap - 1]) {
            self.lower_floor(entry, cutoff);
            return;
        }
        let pos = self.list.partition_point(|&e| before(e, entry));
        self.list.insert(pos, entry);
        if self.list.len() > self.cap {
            let dropped = self.list.pop().expect("list is over capacity");
            self.lower_floor(dropped, cutoff);
        }
    }

    /// The union of two candidate sets over disjoint partners (for a parallel reduction).
    pub(crate) fn merged(mut self, other: Self, cutoff: &impl Fn(&K) -> Option<C>) -> Self {
        if let Some(f) = other.floor {
            self.lower_floor(f, cutoff);
        }
        for e in other.list {
            self.push(e, cutoff);
        }
        self
    }

    /// The heap key: the best listed key (an upper bound while that partner may be dead).
    pub(crate) fn key(&self) -> Option<K> {
        self.list.first().map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator: enough to draw test cases.
    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// `c` lists a prefix of `entries` in candidate order, at most `room` of them; nothing
    /// unlisted ranks before its floor; its cutoff is its floor's key. Returns how many it
    /// lists.
    fn assert_keeps_the_best(
        c: &Candidates<f64, f64>,
        entries: &[(f64, u32)],
        room: usize,
    ) -> usize {
        let mut sorted = entries.to_vec();
        sorted.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        let listed = c.list.len();
        assert!(listed <= room);
        assert_eq!(c.list, sorted[..listed]);
        for &e in &sorted[listed..] {
            let f = c.floor.expect("an unlisted entry sets a floor");
            assert!(!before(e, f));
        }
        assert_eq!(c.cutoff, c.floor.map(|f| f.0));
        listed
    }

    /// Whatever the order of pushes and however they are split for a reduction, the listed
    /// entries are the true best ones ahead of the floor, and nothing unlisted beats the
    /// floor.
    #[test]
    fn keeps_the_best_partners_ahead_of_the_floor() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for round in 0..400 {
            let room = [1, 3, CANDIDATES, 32][round % 4];
            let m = (next() % 40) as usize;
            let entries: Vec<(f64, u32)> =
                (0..m).map(|j| ((next() % 9) as f64, j as u32)).collect();
            let split = if m == 0 { 0 } else { (next() as usize) % m };
            // The cutoff is the floor's key itself, so that its upkeep is checked too.
            let cut = |k: &f64| Some(*k);
            let mut a = Candidates::with_room(room);
            let mut b = Candidates::with_room(room);
            for (k, &e) in entries.iter().enumerate() {
                if k < split {
                    a.push(e, &cut)
                } else {
                    b.push(e, &cut)
                }
            }
            let c = a.merged(b, &cut);
            let listed = assert_keeps_the_best(&c, &entries, room);
            // Without a floor every entry is listed.
            assert_eq!(c.floor.is_none(), listed == m);
        }
    }

    /// A scan in rounds: each round's chunks start from the floor of the rounds before it
    /// and leave out what ranks below that floor. The listed entries are still the best
    /// ones, in order, and nothing unlisted ranks before the final floor.
    #[test]
    fn rounds_that_start_from_the_floor_keep_the_best_partners() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let cut = |k: &f64| Some(*k);
        for round in 0..400 {
            let room = [1, 3, CANDIDATES, 32][round % 4];
            let m = (next() % 120) as usize;
            let entries: Vec<(f64, u32)> =
                (0..m).map(|j| ((next() % 15) as f64, j as u32)).collect();
            let mut found = Candidates::with_room(room);
            let mut done = 0;
            while done < m {
                let end = (done + 1 + (next() as usize) % 40).min(m);
                // Two chunks, each seeded from the floor so far.
                let middle = done + (next() as usize) % (end - done + 1);
                let mut a = found.empty_above_floor(&cut);
                let mut b = found.empty_above_floor(&cut);
                for &e in &entries[done..middle] {
                    a.push(e, &cut);
                }
                for &e in &entries[middle..end] {
                    b.push(e, &cut);
                }
                found = found.merged(a.merged(b, &cut), &cut);
                done = end;
            }
            let listed = assert_keeps_the_best(&found, &entries, room);
            // A list with room to spare lists everything.
            assert!(listed == room.min(m) || found.floor.is_some());
        }
    }
}
