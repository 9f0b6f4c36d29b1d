//! The greedy loop: Müllner's generic linkage algorithm with a few candidates per cluster.
//!
//! Memory is `O(n)` beyond the client's own: instead of a heap of all `O(n²)` pairs, every
//! cluster keeps a short list of its best partners among the clusters with a higher id, and
//! next to the list a *floor*, the best-ranked partner known to be left out of it: no partner
//! outside the list ranks above the floor. The best live entry of the list is therefore the
//! cluster's exact best merge whenever it ranks above the floor; only when the listed partners
//! ahead of the floor have all been merged away is the cluster rescanned. A newly merged
//! cluster has the highest id, so it has no list of its own: each survivor scores it once and
//! files it in its own list. Every key is a pure function of the two clusters, so the result
//! does not depend on the number of threads.
//!
//! Merges are made one at a time, each with its own parallel section. Batching merges that
//! do not interact (as reciprocal-nearest-neighbour chains do for reducible linkages) would
//! cut the sections, but a rose tree's key is not reducible: a new cluster usually ranks
//! first with its next partner, and in the rose-tree searches of `bench_scale.py`'s binary
//! data (n = 8,000) 57–99.5 % of merges take the cluster made by the merge just before, so a
//! batch would average 1.0–1.7 merges. (Greedy-Rate1's merge times would batch: 167.)
//!
//! Most partners of a cluster rank below its floor, and filing one of them changes nothing.
//! A client that can prove this for a pair more cheaply than it can compute the pair's key
//! ([`Linkage::cutoff`], [`Linkage::score_above`]) is asked for the proof first; the lists,
//! floors and merges are the same as if every key were computed.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::candidates::{CANDIDATES, Candidates, before};
use super::{IndexedHeap, Linkage, TotalOrder};
use crate::error::{Result, RoseTreeError};
use crate::parallel::{PAR_THRESHOLD, Threads};
use crate::progress;

/// Partners a rescanned cluster remembers. A cluster is rescanned when every partner on
/// its list has merged away; on data with many near-equal rows that happens to nearly
/// every row once (its nearest rows merge among themselves first), and a longer list then
/// spares most second rescans (binary rows from 12 prototypes, n = 16,000: 19,600 rescans
/// with 8 entries, 15,500 with 32), while the first scan of every row keeps the short list.
const RESCAN_ROOM: usize = 32;

/// Heap slots a thread looked at for other clusters to rescan beside the top
/// ([`Engine::rescan`]).
const RESCAN_PROBE: usize = 4;

/// A scan goes through its partners in rounds ([`Engine::scan`]): `SEED_SCAN` partners per
/// entry of room first, then each round `SCAN_GROWTH` times as many as the one before.
const SEED_SCAN: usize = 4;
const SCAN_GROWTH: usize = 8;

/// The interrupt callback is polled between steps at most this often, and the initial scan
/// is cut into blocks of about this much work, so that an interrupt is noticed within a
/// fraction of a second however costly a pair score is.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

struct Engine<'a, L: Linkage> {
    linkage: &'a mut L,
    /// Cluster ids in increasing order: every live one, and up to as many merged ones, which
    /// are dropped in one pass when there are more (rather than shifting the list twice a
    /// merge).
    active: Vec<u32>,
    /// Merged ids still in `active`.
    stale: usize,
    /// Whether each id is live.
    live: Vec<bool>,
    candidates: Vec<Candidates<L::Key, L::Cutoff>>,
    heap: IndexedHeap<L::Key>,
    threads: &'a Threads,
}

/// Merges `n` singleton clusters greedily until one is left, and returns the merges in
/// order: the `k`-th pair `(i, j)`, `i < j`, became cluster `n + k`.
///
/// Parallel sections run on `threads`. A search of a few thousand clusters or more on
/// several threads is driven from a thread of the pool, so that no step waits for its
/// parallel section to be handed over ([`Threads::run_polled`]). `interrupt` is polled from
/// the calling thread every 50 ms or so, and when it returns `true` the search stops with
/// [`RoseTreeError::Interrupted`].
///
/// # Examples
/// Single linkage on points of a line, with the key `−|x_i − x_j|` of the closest points
/// of two clusters:
/// ```
/// use rosetree::agglomerate::{Linkage, agglomerate};
/// use rosetree::parallel::Threads;
///
/// struct Single { points: Vec<Vec<f64>> }
/// impl Linkage for Single {
///     type Key = f64;
///     type Probe = ();
///     type Cutoff = ();
///     fn score(&self, i: u32, j: u32, _: Option<&()>) -> rosetree::Result<f64> {
///         let (a, b) = (&self.points[i as usize], &self.points[j as usize]);
///         Ok(a.iter().flat_map(|x| b.iter().map(move |y| -(x - y).abs())).fold(f64::MIN, f64::max))
///     }
///     fn merge(&mut self, i: u32, j: u32, _: u32) -> rosetree::Result<()> {
///         let mut p = self.points[i as usize].clone();
///         p.extend(&self.points[j as usize]);
///         self.points.push(p);
///         Ok(())
///     }
/// }
///
/// let mut linkage = Single { points: vec![vec![0.0], vec![10.0], vec![1.0], vec![12.0]] };
/// let merges = agglomerate(&mut linkage, 4, &Threads::default(), &|| false)?;
/// assert_eq!(merges, vec![(0, 2), (1, 3), (4, 5)]);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `X` for more than `2³¹` clusters; the client's
/// errors; [`RoseTreeError::Numerical`] if no candidate is left before one cluster remains;
/// [`RoseTreeError::Interrupted`].
pub fn agglomerate<L: Linkage>(
    linkage: &mut L,
    n: usize,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<Vec<(u32, u32)>> {
    if n >= (u32::MAX as usize) / 2 {
        return Err(RoseTreeError::param("X", format!("too many rows ({n})")));
    }
    if n < OFF_THREAD || threads.runs_inline() {
        return search(linkage, n, threads, interrupt);
    }
    // The loop runs on the pool, so that each merge's parallel section starts there; this
    // thread polls the interrupt.
    threads.run_polled(interrupt, &|| {}, |stop| {
        search(linkage, n, threads, &|| stop.load(Ordering::Relaxed))
    })
}

/// Searches with at least this many clusters run on the pool ([`Threads::run_polled`]).
const OFF_THREAD: usize = 2 * PAR_THRESHOLD;

fn search<L: Linkage>(
    linkage: &mut L,
    n: usize,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<Vec<(u32, u32)>> {
    if n <= 1 {
        return Ok(Vec::new());
    }
    let capacity = 2 * n - 1;
    let mut live = vec![true; n];
    live.resize(capacity, false);
    let mut engine = Engine {
        linkage,
        active: (0..n as u32).collect(),
        stale: 0,
        live,
        candidates: (0..capacity).map(|_| Candidates::empty()).collect(),
        heap: IndexedHeap::new(capacity),
        threads,
    };
    engine.initial_scan(interrupt)?;
    let mut merges = Vec::with_capacity(n - 1);
    let mut polled = Instant::now();
    for k in 0..n - 1 {
        if polled.elapsed() >= POLL_INTERVAL {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            polled = Instant::now();
        }
        let (i, j) = engine.next_pair()?;
        engine.merge(i, j, (n + k) as u32)?;
        merges.push((i, j));
        progress::report("merging", k + 1, n - 1);
    }
    Ok(merges)
}

impl<L: Linkage> Engine<'_, L> {
    /// The best partners of `k` among live clusters with a higher id. Once the list has a
    /// floor, partners that the client proves to rank below it are not scored in full.
    ///
    /// The partners are taken in rounds of growing size, each split between threads, and
    /// every chunk of a round starts from the floor of all the rounds before it. (A chunk
    /// that started empty would score its partners in full until its own floor rose; on
    /// many threads, with many small chunks, that cost more than the rest of the scan:
    /// rescans on two threads took longer than on one.) How a round is cut into chunks may
    /// change the floor that comes out, and so how many partners are listed, never which
    /// partners rank ahead of it: the merges are the same for any number of threads.
    fn scan(&self, k: u32, room: usize) -> Result<Candidates<L::Key, L::Cutoff>> {
        let start = self.active.partition_point(|&t| t <= k);
        let partners = &self.active[start..];
        let probe = self.linkage.probe(k);
        let (linkage, live) = (&*self.linkage, &self.live);
        let cutoff = |key: &L::Key| linkage.cutoff(key);
        let visit = |c: &mut Candidates<L::Key, L::Cutoff>, &j: &u32| {
            if live[j as usize] {
                let key = match &c.cutoff {
                    Some(cut) => linkage.score_above(k, j, probe.as_ref(), cut)?,
                    None => Some(linkage.score(k, j, probe.as_ref())?),
                };
                if let Some(key) = key {
                    c.push((key, j), &cutoff);
                }
            }
            Ok(())
        };
        let mut found = Candidates::with_room(room);
        // On one thread, one round. (One call of the fold, so that `visit` is inlined.)
        let mut size = if self.threads.folds_in_parallel(partners.len()) {
            SEED_SCAN * room
        } else {
            partners.len()
        };
        let mut done = 0;
        while done < partners.len() {
            let round = &partners[done..partners.len().min(done + size)];
            let more = self.threads.try_fold(
                round,
                || found.empty_above_floor(&cutoff),
                visit,
                |a, b| a.merged(b, &cutoff),
            )?;
            found = found.merged(more, &cutoff);
            done += round.len();
            size = size.saturating_mul(SCAN_GROWTH);
        }
        Ok(found)
    }

    fn set_candidates(&mut self, k: u32, c: Candidates<L::Key, L::Cutoff>) {
        match c.key() {
            Some(key) => self.heap.set(k as usize, key),
            None => self.heap.remove(k as usize),
        }
        self.candidates[k as usize] = c;
    }

    /// Scores every pair of singletons once: the `O(n²)` part of the search, in blocks of
    /// rows sized to take about [`POLL_INTERVAL`] each, so that an interrupt is noticed
    /// however costly a pair score is. (Which rows form a block does not change any result.)
    fn initial_scan(&mut self, interrupt: &dyn Fn() -> bool) -> Result<()> {
        let ids: Vec<u32> = self.active.clone();
        let n = ids.len();
        // Row k is scored against the n − 1 − k rows after it.
        let mut budget = PAR_THRESHOLD as f64 * 64.0;
        let mut start = 0;
        while start < n {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            let (mut end, mut pairs) = (start, 0.0);
            while end < n && (end == start || pairs < budget) {
                pairs += (n - 1 - end) as f64;
                end += 1;
            }
            progress::report("scoring pairs", start, n);
            let block = &ids[start..end];
            let clock = Instant::now();
            let found = self
                .threads
                .try_map(block, 2, |&k| self.scan(k, CANDIDATES))?;
            for (&k, c) in block.iter().zip(found) {
                self.set_candidates(k, c);
            }
            let took = clock.elapsed().as_secs_f64().max(1e-6);
            budget = (pairs.max(1.0) * POLL_INTERVAL.as_secs_f64() / took).clamp(1.0, 1e9);
            start = end;
        }
        Ok(())
    }

    /// The globally best pair. A cluster at the top of the heap whose best listed partner
    /// has been merged away drops the dead entries and goes back with its next candidate; a
    /// cluster with no live candidate ahead of its floor is rescanned.
    fn next_pair(&mut self) -> Result<(u32, u32)> {
        loop {
            let k = self.heap.top().ok_or_else(|| {
                RoseTreeError::Numerical(
                    "no candidate merge left before the tree was complete".into(),
                )
            })? as u32;
            let c = &mut self.candidates[k as usize];
            let before_len = c.list.len();
            c.list.retain(|&(_, j)| self.live[j as usize]);
            let floor = c.floor;
            match c.list.first().copied() {
                // Ahead of the floor, the best live candidate is the exact best partner.
                Some((key, j)) if floor.is_none_or(|f| before((key, j), f)) => {
                    if c.list.len() == before_len {
                        return Ok((k, j));
                    }
                    // The key went down: another cluster may now be on top.
                    self.heap.set(k as usize, key);
                }
                _ => self.rescan(k)?,
            }
        }
    }

    /// Rescans `k`, whose listed partners ahead of its floor have all merged away.
    ///
    /// On several threads, the clusters in the first slots of the heap (`RESCAN_PROBE` a
    /// thread) whose lists have run out too are rescanned with it, a cluster to a thread. A
    /// scan is valid whenever it is made, and such a cluster would be rescanned when it
    /// reached the top, unless it merged first as another cluster's partner; the slots
    /// near the top hold few of those. A single rescan split between threads gains little:
    /// it is a few tens of microseconds of work. Many clusters wait for one (binary rows,
    /// n = 8,000: 550 on average at each rescan), and eight slots on two threads rescan
    /// 3 % more clusters in 30 % of the parallel sections.
    fn rescan(&mut self, k: u32) -> Result<()> {
        let mut due = vec![k];
        if !self.threads.sequential() {
            let live = &self.live;
            let exhausted = |t: u32| {
                let c = &self.candidates[t as usize];
                c.floor.is_some() && c.list.iter().all(|&(_, j)| !live[j as usize])
            };
            due.extend(
                self.heap
                    .near_top(RESCAN_PROBE * self.threads.count())
                    .iter()
                    .copied()
                    .filter(|&t| t != k && exhausted(t)),
            );
        }
        let fresh = self
            .threads
            .try_map(&due, 2, |&t| self.scan(t, RESCAN_ROOM))?;
        for (t, c) in due.into_iter().zip(fresh) {
            self.set_candidates(t, c);
        }
        Ok(())
    }

    /// Merges `i` and `j` into `m`. Each survivor scores `m` and files it among its own
    /// candidates, in parallel (a survivor's list belongs to one thread); only the survivors
    /// whose best key changed go back to the heap, on this thread.
    fn merge(&mut self, i: u32, j: u32, m: u32) -> Result<()> {
        self.linkage.merge(i, j, m)?;
        for t in [i, j] {
            self.live[t as usize] = false;
            self.heap.remove(t as usize);
            self.candidates[t as usize] = Candidates::empty();
        }
        self.stale += 2;
        if 2 * self.stale > self.active.len() {
            let live = &self.live;
            self.active.retain(|&t| live[t as usize]);
            self.stale = 0;
        }
        let (linkage, live) = (&*self.linkage, &self.live);
        let changed = self.threads.try_update_at(
            &mut self.candidates,
            &self.active,
            PAR_THRESHOLD,
            |t, c| {
                if !live[t as usize] {
                    return Ok(None);
                }
                let key = match &c.cutoff {
                    Some(cut) => match linkage.score_above(t, m, None, cut)? {
                        Some(key) => key,
                        // Below the floor: the list stays as it is.
                        None => return Ok(None),
                    },
                    None => linkage.score(t, m, None)?,
                };
                let old_key = c.key();
                c.push((key, m), &|key: &L::Key| linkage.cutoff(key));
                Ok(match (old_key, c.key()) {
                    (Some(old), Some(new)) => old.total_cmp(&new).is_ne().then_some(new),
                    (None, new) => new,
                    // A push never empties a list.
                    (Some(_), None) => None,
                })
            },
        )?;
        for (t, key) in changed {
            self.heap.set(t as usize, key);
        }
        self.live[m as usize] = true;
        self.active.push(m);
        Ok(())
    }
}
