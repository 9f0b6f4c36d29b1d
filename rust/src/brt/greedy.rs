//! Greedy agglomerative construction of Bayesian rose trees (BRT Figure 1.4), as a client
//! of the generic agglomeration engine ([`crate::agglomerate`]): a cluster is a rose tree,
//! kept as its statistics and [`Summary`]; a pair's key is the exact score of its best merge
//! ([`best_merge`]), which depends on the two trees alone; merging builds the new root by
//! join, absorb or collapse.

use super::merge::{GainBound, MergeOp, MergeRule, best_merge, merged_summary};
use super::mixing::Summary;
use super::mixing::{Mixing, PriorTable};
use super::score::Score;
use crate::agglomerate::{Linkage, agglomerate};
use crate::brt::RoseTree;
use crate::error::{Result, RoseTreeError};
use crate::models::RowQueries;
use crate::parallel::{PAR_THRESHOLD, Threads};

/// Scores rank in the engine as exact arithmetic ranks them.
impl crate::agglomerate::TotalOrder for Score {
    #[inline]
    fn total_cmp(&self, other: &Self) -> std::cmp::Ordering {
        Score::total_cmp(self, other)
    }
}

/// The rose-tree search's state, indexed by tree id (leaves `0..n`, the `k`-th merge `n + k`).
struct RoseLinkage<'a, M: RowQueries> {
    model: &'a M,
    mixing: PriorTable,
    binary: bool,
    rule: MergeRule,
    /// The bound that lets a pair below a candidate list's floor go unscored.
    bound: Option<GainBound>,
    /// What the bound reads of each tree, kept apart from the summaries so that the loop
    /// over partners touches 16 bytes a tree.
    hot: Vec<Hot>,
    /// Leaves `0..n` (the ids below `n_rows`) packed by [`ClusterModel::pack_row`], `words`
    /// words each, where the model packs rows (`words > 0`); `packed[t]` says whether leaf
    /// `t` has a packed form.
    rows: Vec<u64>,
    words: usize,
    packed: Vec<bool>,
    n_rows: u32,
    /// Statistics of live trees; `None` once merged away.
    stats: Vec<Option<M::Stats>>,
    /// [`ClusterModel::query`] of every live tree with more than one leaf.
    queries: Vec<Option<M::Query>>,
    summary: Vec<Summary>,
    children: Vec<Vec<u32>>,
    /// The root of a tree that was absorbed or collapsed does not survive as a node.
    dissolved: Vec<bool>,
}

/// The numbers of a tree that [`GainBound`] reads.
#[derive(Debug, Clone, Copy)]
struct Hot {
    log_p: f64,
    n_children: u32,
    n_leaves: u32,
}

impl Hot {
    fn of(s: &Summary) -> Self {
        // Trees of more than 2³² leaves or children are beyond the engine's ids.
        Self {
            log_p: s.log_p,
            n_children: s.n_children as u32,
            n_leaves: s.n_leaves as u32,
        }
    }
}

/// Builds a rose tree greedily from the statistics of `leaves` (one per data row).
///
/// With `binary` only joins are considered (Bayesian hierarchical clustering); `rule` says
/// how candidate merges are ranked. Parallel sections run on `threads`; `interrupt` is
/// polled from the calling thread every 50 ms or so, and when it returns `true` the search
/// stops with [`RoseTreeError::Interrupted`].
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] for fewer than two leaves; errors of the model;
/// [`RoseTreeError::Numerical`] for a NaN score; [`RoseTreeError::Interrupted`].
pub fn greedy<M: RowQueries>(
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
    let capacity = 2 * n - 1;
    let log_f = threads.try_map(&leaves, PAR_THRESHOLD, |s| model.log_marginal(s))?;
    let bound = GainBound::new(mixing, rule);
    let mixing = PriorTable::new(*mixing, n);
    // Rows are packed only where the bound can use them.
    let words = if bound.is_some() {
        model.packed_row_words()
    } else {
        0
    };
    let mut rows = vec![0; n * words];
    let packed = if words > 0 {
        leaves
            .iter()
            .zip(rows.chunks_exact_mut(words))
            .map(|(s, out)| model.pack_row(s, out))
            .collect()
    } else {
        vec![false; n]
    };
    let summary: Vec<Summary> = log_f.iter().map(|&lf| Summary::leaf(lf, &mixing)).collect();
    let mut linkage = RoseLinkage {
        model,
        binary,
        rule,
        bound,
        hot: summary.iter().map(Hot::of).collect(),
        rows,
        words,
        packed,
        n_rows: n as u32,
        summary,
        mixing,
        stats: leaves.into_iter().map(Some).collect(),
        queries: (0..n).map(|_| None).collect(),
        children: vec![Vec::new(); n],
        dissolved: vec![false; n],
    };
    linkage.stats.resize(capacity, None);
    linkage.queries.resize_with(capacity, || None);
    agglomerate(&mut linkage, n, threads, interrupt)?;
    Ok(linkage.into_tree())
}

impl<M: RowQueries> Linkage for RoseLinkage<'_, M> {
    type Key = Score;
    type Probe = M::Query;
    /// [`Score::softplus_cutoff`] of the floor.
    type Cutoff = f64;

    /// A single row scanned against many trees gets a query of its own; a cluster's query
    /// is cached from its creation.
    fn probe(&self, i: u32) -> Option<M::Query> {
        (self.summary[i as usize].n_leaves == 1).then(|| self.model.query(self.stats_of(i)))
    }

    /// The ranking key of merging `i < j`, checked for NaN.
    fn score(&self, i: u32, j: u32, probe: Option<&M::Query>) -> Result<Score> {
        let log_f = self.pair_log_f(i, j, probe)?;
        self.key(i, j, log_f)
    }

    /// [`softplus_cutoff`](Score::softplus_cutoff) of the floor `key` against the shared
    /// split ratio, where the mixing rule has one and the floor is above it.
    fn cutoff(&self, key: &Score) -> Option<f64> {
        let x = key.softplus_cutoff(self.bound?.r());
        (x > f64::NEG_INFINITY).then_some(x)
    }

    /// `None` where [`GainBound`] proves the pair below the floor: from the model's cheap
    /// upper bound on `ln f` where the pair is a packed row against a query, else from the
    /// exact `ln f` before the transcendental functions of the score.
    #[inline(always)]
    fn score_above(
        &self,
        i: u32,
        j: u32,
        probe: Option<&M::Query>,
        cutoff: &f64,
    ) -> Result<Option<Score>> {
        let Some(bound) = &self.bound else {
            return self.score(i, j, probe).map(Some);
        };
        let (a, b) = (self.hot[i as usize], self.hot[j as usize]);
        let Some(log_pi) = bound.log_pi_max(
            &self.mixing,
            self.binary,
            (a.n_children as usize, b.n_children as usize),
            (a.n_leaves + b.n_leaves) as usize,
        ) else {
            return self.score(i, j, probe).map(Some);
        };
        let denom = (a.log_p, b.log_p);
        if let Some(upper) = self.pair_log_f_upper(i, j, probe) {
            if bound.below(*cutoff, log_pi, upper, denom) {
                return Ok(None);
            }
        }
        self.exact_above(i, j, probe, (*cutoff, log_pi, denom))
    }

    fn merge(&mut self, i: u32, j: u32, m: u32) -> Result<()> {
        debug_assert_eq!(m as usize, self.summary.len());
        let (a, b) = (self.summary[i as usize], self.summary[j as usize]);
        let stats = self.model.merge(self.stats_of(i), self.stats_of(j));
        let log_f = self.model.log_marginal(&stats)?;
        let (_, op) = best_merge(&self.mixing, self.binary, self.rule, &a, &b, log_f);
        let merged = merged_summary(&self.mixing, op, &a, &b, log_f);
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
        self.hot.push(Hot::of(&merged));
        self.summary.push(merged);
        self.dissolved.push(false);
        self.queries[m as usize] = Some(self.model.query(&stats));
        self.stats[m as usize] = Some(stats);
        for t in [i, j] {
            self.stats[t as usize] = None;
            self.queries[t as usize] = None;
        }
        Ok(())
    }
}

impl<M: RowQueries> RoseLinkage<'_, M> {
    /// `ln f` of the union of trees `i < j`. Every pair is evaluated the same way wherever it
    /// is scored: a single row against a cluster through the cluster's cached query, two
    /// single rows through the query of the lower id (the probe, computed once per scan),
    /// two clusters directly.
    fn pair_log_f(&self, i: u32, j: u32, probe: Option<&M::Query>) -> Result<f64> {
        let (si, sj) = (self.stats_of(i), self.stats_of(j));
        let single = |t: u32| self.summary[t as usize].n_leaves == 1;
        match (single(i), single(j)) {
            (true, true) => match probe {
                Some(q) => self.model.log_marginal_query(q, si, sj),
                None => self.model.log_marginal_merged(si, sj),
            },
            (false, true) => self.model.log_marginal_query(self.query_of(i), si, sj),
            (true, false) => self.model.log_marginal_query(self.query_of(j), sj, si),
            (false, false) => self.model.log_marginal_merged(si, sj),
        }
    }

    /// The rest of [`score_above`](Linkage::score_above), out of line so that the bound's
    /// test stays small: the exact `ln f`, the test again with it, the key.
    #[inline(never)]
    fn exact_above(
        &self,
        i: u32,
        j: u32,
        probe: Option<&M::Query>,
        (cutoff, log_pi, denom): (f64, f64, (f64, f64)),
    ) -> Result<Option<Score>> {
        let log_f = self.pair_log_f(i, j, probe)?;
        let bound = self.bound.as_ref().expect("called with a bound");
        if bound.below(cutoff, log_pi, log_f, denom) {
            return Ok(None);
        }
        self.key(i, j, log_f).map(Some)
    }

    /// The ranking key of merging `i < j` with `ln f` of their union, checked for NaN.
    #[inline(always)]
    fn key(&self, i: u32, j: u32, log_f: f64) -> Result<Score> {
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

    /// The model's cheap upper bound on [`pair_log_f`](Self::pair_log_f), where the pair
    /// is scored through a query and has a packed row on the other side.
    #[inline(always)]
    fn pair_log_f_upper(&self, i: u32, j: u32, probe: Option<&M::Query>) -> Option<f64> {
        if self.words == 0 {
            return None;
        }
        let leaf = |t: u32| t < self.n_rows;
        match (leaf(i), leaf(j)) {
            (true, true) => self.model.log_marginal_upper_packed(
                probe?,
                self.packed_row(i),
                self.packed_row(j)?,
            ),
            (false, true) => {
                self.model
                    .log_marginal_upper_packed(self.query_of(i), None, self.packed_row(j)?)
            }
            (true, false) => {
                self.model
                    .log_marginal_upper_packed(self.query_of(j), None, self.packed_row(i)?)
            }
            (false, false) => None,
        }
    }

    /// The packed form of leaf `t`, where it has one.
    #[inline(always)]
    fn packed_row(&self, t: u32) -> Option<&[u64]> {
        let t = t as usize;
        if self.packed[t] {
            Some(&self.rows[t * self.words..(t + 1) * self.words])
        } else {
            None
        }
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

    /// Moves the children of `t` out (dissolving its root) and appends `extra`.
    fn take_children(&mut self, t: u32, extra: &[u32]) -> Vec<u32> {
        self.dissolved[t as usize] = true;
        let mut c = std::mem::take(&mut self.children[t as usize]);
        c.extend_from_slice(extra);
        c
    }

    fn into_tree(self) -> RoseTree {
        let nodes = self
            .summary
            .iter()
            .zip(self.children)
            .zip(self.dissolved)
            .map(|((s, children), dissolved)| {
                (!dissolved).then(|| {
                    let children = children.into_iter().map(|c| c as usize).collect();
                    (children, s.values())
                })
            })
            .collect();
        RoseTree::from_sparse_nodes(nodes)
    }
}
