//! Greedy agglomerative construction of Bayesian rose trees (BRT Figure 1.4).
//!
//! Memory is `O(n·d)`: instead of a heap of all `O(n²)` pairs, every tree keeps its best
//! partner among the trees with a higher id (Müllner's generic linkage algorithm, adapted to
//! maximising a score). A cached best is exact while its partner is alive; once the partner
//! has been merged away the cached score is only an upper bound, and the tree is rescanned
//! when it reaches the top of the heap. A newly merged tree has the highest id, so it has no
//! partner list of its own: each surviving tree scores it once and adopts it if it beats the
//! cached best. Every pair score is a pure function of the two trees' statistics, so the
//! result does not depend on the number of threads.

use rayon::prelude::*;

use super::heap::IndexedHeap;
use super::merge::{MergeOp, Summary, best_merge};
use super::mixing::Mixing;
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use crate::parallel::{PAR_THRESHOLD, Threads};
use crate::tree::{Node, RoseTree};

const NONE: u32 = u32::MAX;
/// How many merges run between two polls of the interrupt callback.
const POLL_EVERY: usize = 64;

/// A tree's best known merge with a higher-id partner.
#[derive(Debug, Clone, Copy)]
struct Best {
    score: f64,
    partner: u32,
}

impl Best {
    const EMPTY: Self = Self {
        score: f64::NEG_INFINITY,
        partner: NONE,
    };

    /// Higher score wins; equal scores go to the lower partner id.
    fn better(self, other: Self) -> Self {
        if other.score > self.score || (other.score == self.score && other.partner < self.partner) {
            other
        } else {
            self
        }
    }
}

struct Search<'a, M: ClusterModel> {
    model: &'a M,
    mixing: &'a Mixing,
    binary: bool,
    /// Statistics of live trees by tree id; `None` once merged away.
    stats: Vec<Option<M::Stats>>,
    summary: Vec<Summary>,
    children: Vec<Vec<u32>>,
    /// The root of a tree that was absorbed or collapsed does not survive as a node.
    dissolved: Vec<bool>,
    /// Live tree ids in increasing order.
    active: Vec<u32>,
    best: Vec<Best>,
    heap: IndexedHeap,
    threads: &'a Threads,
}

/// Builds a rose tree greedily from the statistics of `leaves` (one per data row).
///
/// With `binary` only joins are considered (Bayesian hierarchical clustering). `interrupt`
/// is polled every few merges from the calling thread (parallel sections run on `threads`); when it returns `true` the search
/// stops with [`RoseTreeError::Interrupted`].
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] for fewer than two leaves; errors of the model;
/// [`RoseTreeError::Numerical`] for a NaN score; [`RoseTreeError::Interrupted`].
pub fn greedy<M: ClusterModel>(
    model: &M,
    mixing: &Mixing,
    binary: bool,
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
    let mut search = Search {
        model,
        mixing,
        binary,
        summary: log_f.iter().map(|&lf| Summary::leaf(lf, mixing)).collect(),
        stats: leaves.into_iter().map(Some).collect(),
        children: vec![Vec::new(); n],
        dissolved: vec![false; n],
        active: (0..n as u32).collect(),
        best: vec![Best::EMPTY; capacity],
        heap: IndexedHeap::new(capacity),
        threads,
    };
    search.stats.resize(capacity, None);
    search.initial_scan(interrupt)?;
    for step in 0..n - 1 {
        if step % POLL_EVERY == 0 && interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        let (i, j) = search.next_pair()?;
        search.merge(i, j)?;
    }
    Ok(search.into_tree())
}

impl<M: ClusterModel> Search<'_, M> {
    /// `ln L` of merging `i < j`, checked for NaN.
    fn score(&self, i: u32, j: u32) -> Result<f64> {
        let (si, sj) = (self.stats_of(i), self.stats_of(j));
        let log_f = self.model.log_marginal_merged(si, sj)?;
        let (score, _, _) = best_merge(
            self.mixing,
            self.binary,
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

    fn stats_of(&self, id: u32) -> &M::Stats {
        self.stats[id as usize]
            .as_ref()
            .expect("live tree has statistics")
    }

    /// The best partner of `k` among live trees with a higher id.
    fn scan(&self, k: u32) -> Result<Best> {
        let start = self.active.partition_point(|&t| t <= k);
        let candidates = &self.active[start..];
        let score = |&j: &u32| self.score(k, j).map(|score| Best { score, partner: j });
        if candidates.len() >= PAR_THRESHOLD {
            self.threads.install(|| {
                candidates
                    .par_iter()
                    .map(score)
                    .try_reduce(|| Best::EMPTY, |a, b| Ok(a.better(b)))
            })
        } else {
            candidates
                .iter()
                .map(score)
                .try_fold(Best::EMPTY, |a, b| Ok(a.better(b?)))
        }
    }

    fn set_best(&mut self, k: u32, best: Best) {
        self.best[k as usize] = best;
        if best.partner == NONE {
            self.heap.remove(k as usize);
        } else {
            self.heap.set(k as usize, best.score);
        }
    }

    /// Scores every pair of leaves once: the `O(n²)` part of the search, in row blocks so
    /// that an interrupt is noticed.
    fn initial_scan(&mut self, interrupt: &dyn Fn() -> bool) -> Result<()> {
        let ids: Vec<u32> = self.active.clone();
        for block in ids.chunks(PAR_THRESHOLD) {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            let found: Vec<Best> = self.threads.install(|| {
                block
                    .par_iter()
                    .map(|&k| self.scan(k))
                    .collect::<Result<_>>()
            })?;
            for (&k, best) in block.iter().zip(found) {
                self.set_best(k, best);
            }
        }
        Ok(())
    }

    /// The globally best pair, rescanning trees whose cached partner is gone.
    fn next_pair(&mut self) -> Result<(u32, u32)> {
        loop {
            let k = self.heap.top().ok_or_else(|| {
                RoseTreeError::Numerical(
                    "no candidate merge left before the tree was complete".into(),
                )
            })? as u32;
            let best = self.best[k as usize];
            if self.stats[best.partner as usize].is_some() {
                return Ok((k, best.partner));
            }
            let fresh = self.scan(k)?;
            self.set_best(k, fresh);
        }
    }

    fn merge(&mut self, i: u32, j: u32) -> Result<()> {
        let (a, b) = (self.summary[i as usize], self.summary[j as usize]);
        let stats = self.model.merge(self.stats_of(i), self.stats_of(j));
        let log_f = self.model.log_marginal(&stats)?;
        let (_, op, merged) = best_merge(self.mixing, self.binary, &a, &b, log_f);
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
        self.stats[i as usize] = None;
        self.stats[j as usize] = None;
        self.stats[m as usize] = Some(stats);
        for t in [i, j] {
            self.heap.remove(t as usize);
            let pos = self.active.binary_search(&t).expect("merged tree was live");
            self.active.remove(pos);
        }

        // Every surviving tree scores the new one; it wins outright only if it beats the
        // cached best strictly (a tie keeps the lower-id partner, or the rescan decides).
        let score = |&t: &u32| self.score(t, m).map(|s| (t, s));
        let scored: Vec<(u32, f64)> = if self.active.len() >= PAR_THRESHOLD {
            self.threads
                .install(|| self.active.par_iter().map(score).collect::<Result<_>>())?
        } else {
            self.active.iter().map(score).collect::<Result<_>>()?
        };
        for (t, s) in scored {
            if s > self.best[t as usize].score {
                self.set_best(
                    t,
                    Best {
                        score: s,
                        partner: m,
                    },
                );
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
                (!dissolved).then(|| Node {
                    children: children.into_iter().map(|c| c as usize).collect(),
                    parent: None,
                    n_leaves: s.n_leaves,
                    log_f: s.log_f,
                    log_p: s.log_p,
                    log_pi: s.log_pi,
                })
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
