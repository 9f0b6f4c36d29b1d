//! Greedy agglomerative construction of Bayesian rose trees (BRT Figure 1.4).
//!
//! Memory is `O(n·d)`: instead of a heap of all `O(n²)` pairs, every tree keeps a short list
//! of its best partners among the trees with a higher id (Müllner's generic linkage
//! algorithm, adapted to maximising a score, with a few candidates per tree instead of one).
//! Next to the list a tree keeps a *floor*, the best-ranked partner known to be left out of
//! it: no partner outside the list ranks above the floor. The best live entry of the list is
//! therefore the tree's exact best merge whenever it ranks above the floor; only when the
//! listed partners ahead of the floor have all been merged away is the tree rescanned. A
//! newly merged tree has the highest id, so it has no list of its own: each surviving tree
//! scores it once and files it in its own list. Every pair is scored by a pure function of
//! the two trees' statistics, so the result does not depend on the number of threads.

use rayon::prelude::*;

use std::time::{Duration, Instant};

use super::heap::IndexedHeap;
use super::merge::{MergeOp, MergeRule, Summary, best_merge, merged_summary};
use super::mixing::{Mixing, PriorTable};
use super::score::Score;
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use crate::parallel::{PAR_THRESHOLD, Threads};
use crate::tree::RoseTree;

const NONE: u32 = u32::MAX;
/// The interrupt callback is polled between steps at most this often, and the initial scan
/// is cut into blocks of about this much work, so that an interrupt is noticed within a
/// fraction of a second however costly a pair score is.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// How many candidate partners a tree remembers.
const CANDIDATES: usize = 8;

/// A tree's best known partners with higher ids, best first (higher score, then lower id).
///
/// Invariant: no partner missing from `list` ranks before `floor`.
#[derive(Debug, Clone)]
struct Candidates {
    list: Vec<(Score, u32)>,
    floor: Option<(Score, u32)>,
}

/// `a` comes before `b` in candidate order: a higher score, or an equal one and a lower id.
#[inline]
fn before(a: (Score, u32), b: (Score, u32)) -> bool {
    a.0.total_cmp(&b.0).then_with(|| b.1.cmp(&a.1)).is_gt()
}

impl Candidates {
    fn empty() -> Self {
        Self {
            list: Vec::with_capacity(CANDIDATES + 1),
            floor: None,
        }
    }

    /// Whichever ranks first of the floor and `entry` becomes the floor.
    fn lower_floor(&mut self, entry: (Score, u32)) {
        if self.floor.is_none_or(|f| before(entry, f)) {
            self.floor = Some(entry);
        }
    }

    /// Files a partner, keeping at most [`CANDIDATES`] entries, all ranked before the floor.
    fn push(&mut self, entry: (Score, u32)) {
        let full = self.list.len() == CANDIDATES;
        if self.floor.is_some_and(|f| !before(entry, f))
            || full && !before(entry, self.list[CANDIDATES - 1])
        {
            self.lower_floor(entry);
            return;
        }
        let pos = self.list.partition_point(|&e| before(e, entry));
        self.list.insert(pos, entry);
        if self.list.len() > CANDIDATES {
            let dropped = self.list.pop().expect("list is over capacity");
            self.lower_floor(dropped);
        }
    }

    fn merged(mut self, other: Self) -> Self {
        if let Some(f) = other.floor {
            self.lower_floor(f);
        }
        for e in other.list {
            self.push(e);
        }
        self
    }

    /// The heap key: the best listed score (an upper bound while that partner may be dead).
    fn key(&self) -> Option<Score> {
        self.list.first().map(|e| e.0)
    }
}

struct Search<'a, M: ClusterModel> {
    model: &'a M,
    mixing: PriorTable,
    binary: bool,
    rule: MergeRule,
    /// Statistics of live trees by tree id; `None` once merged away.
    stats: Vec<Option<M::Stats>>,
    /// [`ClusterModel::query`] of every live tree with more than one leaf.
    queries: Vec<Option<M::Query>>,
    summary: Vec<Summary>,
    children: Vec<Vec<u32>>,
    /// The root of a tree that was absorbed or collapsed does not survive as a node.
    dissolved: Vec<bool>,
    /// Live tree ids in increasing order.
    active: Vec<u32>,
    candidates: Vec<Candidates>,
    heap: IndexedHeap<Score>,
    threads: &'a Threads,
}

/// Builds a rose tree greedily from the statistics of `leaves` (one per data row).
///
/// With `binary` only joins are considered (Bayesian hierarchical clustering); `rule` says
/// how candidate merges are ranked. Parallel sections run on `threads`; `interrupt` is
/// polled from the calling thread every `POLL_INTERVAL` (50 ms) or so, and when it returns `true`
/// the search stops with [`RoseTreeError::Interrupted`].
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] for fewer than two leaves; errors of the model;
/// [`RoseTreeError::Numerical`] for a NaN score; [`RoseTreeError::Interrupted`].
pub fn greedy<M: ClusterModel>(
    model: &M,
    mixing: &Mixing,
    binary: bool,
    rule: MergeRule,
    leaves: Vec<M::Stats>,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<RoseTree> {
    let n = leaves.len();
    if n < 2 {
        return Err(RoseTreeError::param(
            "X",
            format!("needs at least 2 rows, got {n}"),
        ));
    }
    if n >= (NONE as usize) / 2 {
        return Err(RoseTreeError::param("X", format!("too many rows ({n})")));
    }
    let capacity = 2 * n - 1;
    let log_f = threads.install(|| maybe_par_map(&leaves, |s| model.log_marginal(s)))?;
    let mixing = PriorTable::new(*mixing, n);
    let mut search = Search {
        model,
        binary,
        rule,
        summary: log_f.iter().map(|&lf| Summary::leaf(lf, &mixing)).collect(),
        mixing,
        stats: leaves.into_iter().map(Some).collect(),
        queries: (0..n).map(|_| None).collect(),
        children: vec![Vec::new(); n],
        dissolved: vec![false; n],
        active: (0..n as u32).collect(),
        candidates: (0..capacity).map(|_| Candidates::empty()).collect(),
        heap: IndexedHeap::new(capacity),
        threads,
    };
    search.stats.resize(capacity, None);
    search.queries.resize_with(capacity, || None);
    search.initial_scan(interrupt)?;
    let mut polled = Instant::now();
    for _ in 0..n - 1 {
        if polled.elapsed() >= POLL_INTERVAL {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            polled = Instant::now();
        }
        let (i, j) = search.next_pair()?;
        search.merge(i, j)?;
    }
    Ok(search.into_tree())
}

impl<M: ClusterModel> Search<'_, M> {
    /// `ln f` of the union of trees `i < j`. Every pair is evaluated the same way wherever it
    /// is scored: a single row against a cluster through the cluster's cached query, two
    /// single rows through the query of the lower id (`leaf_query`, computed by the caller),
    /// two clusters directly.
    fn pair_log_f(&self, i: u32, j: u32, leaf_query: Option<&M::Query>) -> Result<f64> {
        let (si, sj) = (self.stats_of(i), self.stats_of(j));
        let single = |t: u32| self.summary[t as usize].n_leaves == 1;
        match (single(i), single(j)) {
            (true, true) => match leaf_query {
                Some(q) => self.model.log_marginal_query(q, si, sj),
                None => self.model.log_marginal_merged(si, sj),
            },
            (false, true) => self.model.log_marginal_query(self.query_of(i), si, sj),
            (true, false) => self.model.log_marginal_query(self.query_of(j), sj, si),
            (false, false) => self.model.log_marginal_merged(si, sj),
        }
    }

    /// The ranking key of merging `i < j`, checked for NaN.
    fn score(&self, i: u32, j: u32, leaf_query: Option<&M::Query>) -> Result<Score> {
        let log_f = self.pair_log_f(i, j, leaf_query)?;
        let (score, _) = best_merge(
            &self.mixing,
            self.binary,
            self.rule,
            &self.summary[i as usize],
            &self.summary[j as usize],
            log_f,
        );
        if score.is_nan() {
            return Err(RoseTreeError::Numerical(format!(
                "the merge score of trees {i} and {j} is NaN (cluster log marginal {log_f})"
            )));
        }
        Ok(score)
    }

    fn query_of(&self, id: u32) -> &M::Query {
        self.queries[id as usize]
            .as_ref()
            .expect("live cluster has a query")
    }

    fn stats_of(&self, id: u32) -> &M::Stats {
        self.stats[id as usize]
            .as_ref()
            .expect("live tree has statistics")
    }

    /// The best partners of `k` among live trees with a higher id.
    fn scan(&self, k: u32) -> Result<Candidates> {
        let start = self.active.partition_point(|&t| t <= k);
        let partners = &self.active[start..];
        let leaf_query =
            (self.summary[k as usize].n_leaves == 1).then(|| self.model.query(self.stats_of(k)));
        let score = |j: u32| self.score(k, j, leaf_query.as_ref()).map(|s| (s, j));
        if partners.len() >= PAR_THRESHOLD {
            self.threads.install(|| {
                partners
                    .par_iter()
                    .try_fold(Candidates::empty, |mut c, &j| {
                        c.push(score(j)?);
                        Ok(c)
                    })
                    .try_reduce(Candidates::empty, |a, b| Ok(a.merged(b)))
            })
        } else {
            let mut c = Candidates::empty();
            for &j in partners {
                c.push(score(j)?);
            }
            Ok(c)
        }
    }

    fn set_candidates(&mut self, k: u32, c: Candidates) {
        match c.key() {
            Some(key) => self.heap.set(k as usize, key),
            None => self.heap.remove(k as usize),
        }
        self.candidates[k as usize] = c;
    }

    /// Scores every pair of leaves once: the `O(n²)` part of the search, in blocks of rows
    /// sized to take about [`POLL_INTERVAL`] each, so that an interrupt is noticed however
    /// costly a pair score is. (Which rows form a block does not change any result.)
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
            let block = &ids[start..end];
            let clock = Instant::now();
            let found: Vec<Candidates> = self.threads.install(|| {
                block
                    .par_iter()
                    .map(|&k| self.scan(k))
                    .collect::<Result<_>>()
            })?;
            for (&k, c) in block.iter().zip(found) {
                self.set_candidates(k, c);
            }
            let took = clock.elapsed().as_secs_f64().max(1e-6);
            budget = (pairs.max(1.0) * POLL_INTERVAL.as_secs_f64() / took).clamp(1.0, 1e9);
            start = end;
        }
        Ok(())
    }

    /// The globally best pair. A tree at the top of the heap whose best listed partner has
    /// been merged away drops the dead entries and goes back with its next candidate; a tree
    /// with no live candidate ahead of its floor is rescanned.
    fn next_pair(&mut self) -> Result<(u32, u32)> {
        loop {
            let k = self.heap.top().ok_or_else(|| {
                RoseTreeError::Numerical(
                    "no candidate merge left before the tree was complete".into(),
                )
            })? as u32;
            let c = &mut self.candidates[k as usize];
            let before_len = c.list.len();
            c.list.retain(|&(_, j)| self.stats[j as usize].is_some());
            let floor = c.floor;
            match c.list.first().copied() {
                // Ahead of the floor, the best live candidate is the exact best partner.
                Some((score, j)) if floor.is_none_or(|f| before((score, j), f)) => {
                    if c.list.len() == before_len {
                        return Ok((k, j));
                    }
                    // The key went down: another tree may now be on top.
                    self.heap.set(k as usize, score);
                }
                _ => {
                    let fresh = self.scan(k)?;
                    self.set_candidates(k, fresh);
                }
            }
        }
    }

    fn merge(&mut self, i: u32, j: u32) -> Result<()> {
        let (a, b) = (self.summary[i as usize], self.summary[j as usize]);
        let stats = self.model.merge(self.stats_of(i), self.stats_of(j));
        let log_f = self.model.log_marginal(&stats)?;
        let (_, op) = best_merge(&self.mixing, self.binary, self.rule, &a, &b, log_f);
        let merged = merged_summary(&self.mixing, op, &a, &b, log_f);
        let m = self.summary.len() as u32;

        let children = match op {
            MergeOp::Join => vec![i, j],
            MergeOp::Absorb => self.take_children(i, &[j]),
            MergeOp::AbsorbReverse => self.take_children(j, &[i]),
            MergeOp::Collapse => {
                let mut c = self.take_children(i, &[]);
                c.extend(self.take_children(j, &[]));
                c
            }
        };
        self.children.push(children);
        self.summary.push(merged);
        self.dissolved.push(false);
        self.queries[m as usize] = Some(self.model.query(&stats));
        self.stats[m as usize] = Some(stats);
        for t in [i, j] {
            self.stats[t as usize] = None;
            self.queries[t as usize] = None;
            self.heap.remove(t as usize);
            self.candidates[t as usize] = Candidates::empty();
            let pos = self.active.binary_search(&t).expect("merged tree was live");
            self.active.remove(pos);
        }

        // Every surviving tree scores the new one and files it among its candidates.
        let score = |&t: &u32| self.score(t, m, None).map(|s| (t, s));
        let scored: Vec<(u32, Score)> = if self.active.len() >= PAR_THRESHOLD {
            self.threads
                .install(|| self.active.par_iter().map(score).collect::<Result<_>>())?
        } else {
            self.active.iter().map(score).collect::<Result<_>>()?
        };
        for (t, s) in scored {
            let c = &mut self.candidates[t as usize];
            let old_key = c.key();
            c.push((s, m));
            if c.key() != old_key {
                self.heap.set(t as usize, s);
            }
        }
        self.active.push(m);
        Ok(())
    }

    /// Moves the children of `t` out (dissolving its root) and appends `extra`.
    fn take_children(&mut self, t: u32, extra: &[u32]) -> Vec<u32> {
        self.dissolved[t as usize] = true;
        let mut c = std::mem::take(&mut self.children[t as usize]);
        c.extend_from_slice(extra);
        c
    }

    fn into_tree(self) -> RoseTree {
        let n = self.active.len();
        debug_assert_eq!(n, 1);
        let nodes = self
            .summary
            .iter()
            .zip(self.children)
            .zip(self.dissolved)
            .map(|((s, children), dissolved)| {
                (!dissolved).then(|| s.to_node(children.into_iter().map(|c| c as usize).collect()))
            })
            .collect();
        RoseTree::from_sparse_nodes(nodes)
    }
}

/// Maps `f` over `items`, in parallel for long slices, stopping at the first error.
pub(crate) fn maybe_par_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R> + Sync + Send,
) -> Result<Vec<R>> {
    if items.len() >= PAR_THRESHOLD {
        items.par_iter().map(f).collect()
    } else {
        items.iter().map(f).collect()
    }
}
