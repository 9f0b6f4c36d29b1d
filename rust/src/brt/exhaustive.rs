//! The maximum-likelihood rose tree by exhaustive search (BRT §1.6.1), for small data sets.
//!
//! For the `"brt"` and `"gamma"` rules `π_T` depends only on a node's own child count, and
//! `p(T)` increases with every child's `p`, so the best tree on a set `S` is found by dynamic
//! programming over subsets: `best(S) = max_c [π_c f(S) + (1 − π_c) G_c(S)]`, where
//! `G_c(S)` is the best product of `best(B)` over partitions of `S` into `c` blocks. This is
//! `O(n·3ⁿ)`. The DP rule's `π_T` depends on the whole subtree through `d_T`, so there every
//! rose tree is enumerated (660,032 trees on 8 leaves).

use super::RoseTree;
use super::evaluate::evaluate;
use super::mixing::{Mixing, node_log_p};
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use crate::tree::Topology;

/// The largest data set [`optimal_tree`] accepts for the `"brt"` and `"gamma"` rules.
pub const MAX_EXHAUSTIVE: usize = 12;
/// The largest data set [`optimal_tree`] accepts for the DP rule (full enumeration).
pub const MAX_EXHAUSTIVE_DP: usize = 8;

/// The rose tree (or, with `binary`, the binary tree) that maximises `ln p(D | T)`.
/// Ties keep the first tree found.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `X` for fewer than 2 or more than
/// [`MAX_EXHAUSTIVE`] ([`MAX_EXHAUSTIVE_DP`] for the DP rule) rows; errors of the model.
pub fn optimal_tree<M: ClusterModel>(
    model: &M,
    mixing: &Mixing,
    binary: bool,
    leaves: &[M::Stats],
) -> Result<RoseTree> {
    let n = leaves.len();
    let limit = if mixing.depends_on_subtree() {
        MAX_EXHAUSTIVE_DP
    } else {
        MAX_EXHAUSTIVE
    };
    if !(2..=limit).contains(&n) {
        return Err(RoseTreeError::param(
            "X",
            format!("exhaustive search takes 2 to {limit} rows for this mixing rule, got {n}"),
        ));
    }
    let log_f = subset_log_marginals(model, leaves)?;
    let topology = if mixing.depends_on_subtree() {
        Enumeration::new(mixing, binary, &log_f, n).best_topology()
    } else {
        subset_dp(mixing, binary, &log_f, n)
    };
    evaluate(model, mixing, &topology, leaves)
}

/// `ln f(S)` for every non-empty subset `S` of the rows, indexed by bit mask.
fn subset_log_marginals<M: ClusterModel>(model: &M, leaves: &[M::Stats]) -> Result<Vec<f64>> {
    let full = (1_usize << leaves.len()) - 1;
    let mut stats: Vec<Option<M::Stats>> = vec![None; full + 1];
    let mut log_f = vec![f64::NAN; full + 1];
    for s in 1..=full {
        let low = s.trailing_zeros() as usize;
        let rest = s & (s - 1);
        let merged = match &stats[rest] {
            None => leaves[low].clone(),
            Some(r) => model.merge(r, &leaves[low]),
        };
        log_f[s] = model.log_marginal(&merged)?;
        stats[s] = Some(merged);
    }
    Ok(log_f)
}

/// Builds a topology from a recursive description: `blocks(S)` gives the children's subsets.
fn topology_from(n: usize, full: usize, blocks: &dyn Fn(usize) -> Vec<usize>) -> Topology {
    fn build(
        s: usize,
        blocks: &dyn Fn(usize) -> Vec<usize>,
        internal: &mut Vec<Vec<usize>>,
        n: usize,
    ) -> usize {
        if s.count_ones() == 1 {
            return s.trailing_zeros() as usize;
        }
        let children = blocks(s)
            .into_iter()
            .map(|b| build(b, blocks, internal, n))
            .collect();
        internal.push(children);
        n + internal.len() - 1
    }
    let mut internal = Vec::new();
    build(full, blocks, &mut internal, n);
    Topology::new(n, internal).expect("exhaustive search builds valid trees")
}

// Subsets are bit masks: indexing by them is the algorithm, not an iteration over a slice.
#[allow(clippy::needless_range_loop)]
fn subset_dp(mixing: &Mixing, binary: bool, log_f: &[f64], n: usize) -> Topology {
    let full = (1_usize << n) - 1;
    let max_c = if binary { 2 } else { n };
    // g[c][S]: best Σ ln p over partitions of S into c blocks; choice[c][S]: the block
    // holding S's lowest element.
    let mut g = vec![vec![f64::NEG_INFINITY; full + 1]; max_c + 1];
    let mut choice = vec![vec![0_usize; full + 1]; max_c + 1];
    let mut best_c = vec![0_usize; full + 1];
    for s in 1..=full {
        if s.count_ones() == 1 {
            g[1][s] = log_f[s];
            continue;
        }
        let low = s & s.wrapping_neg();
        let rest = s ^ low;
        for c in 2..=max_c.min(s.count_ones() as usize) {
            // B = low ∪ sub for every sub ⊊ rest, so that S \ B is non-empty.
            let mut sub = (rest.wrapping_sub(1)) & rest;
            loop {
                let b = low | sub;
                let v = g[1][b] + g[c - 1][s ^ b];
                // The first partition stands until a better one comes, so that a choice
                // exists even where every partition has ln p = −∞ (data the model gives
                // zero probability: the tree is then any tree, of evidence −∞).
                if v > g[c][s] || choice[c][s] == 0 {
                    g[c][s] = v;
                    choice[c][s] = b;
                }
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & rest;
            }
        }
        let mut best = f64::NEG_INFINITY;
        for c in 2..=max_c.min(s.count_ones() as usize) {
            let prior = mixing.node_prior(c, s.count_ones() as usize, 0.0);
            let v = node_log_p(&prior, log_f[s], g[c][s]);
            if v > best || best_c[s] == 0 {
                best = v;
                best_c[s] = c;
            }
        }
        g[1][s] = best;
    }
    topology_from(n, full, &|s| {
        let mut blocks = Vec::new();
        let mut cur = s;
        for c in (2..=best_c[s]).rev() {
            let b = choice[c][cur];
            blocks.push(b);
            cur ^= b;
        }
        blocks.push(cur);
        blocks
    })
}

/// Every rose tree on every subset, as `(ln p, ln d)` candidates with back-pointers.
struct Enumeration<'a> {
    mixing: &'a Mixing,
    binary: bool,
    log_f: &'a [f64],
    n: usize,
    cands: Vec<Vec<Cand>>,
}

#[derive(Clone)]
struct Cand {
    log_p: f64,
    log_d: f64,
    /// `(subset, candidate index)` of each child.
    children: Vec<(usize, usize)>,
}

impl<'a> Enumeration<'a> {
    #[allow(clippy::needless_range_loop)]
    fn new(mixing: &'a Mixing, binary: bool, log_f: &'a [f64], n: usize) -> Self {
        let full = (1_usize << n) - 1;
        let mut this = Self {
            mixing,
            binary,
            log_f,
            n,
            cands: vec![Vec::new(); full + 1],
        };
        for s in 1..=full {
            if s.count_ones() == 1 {
                let leaf = Cand {
                    log_p: log_f[s],
                    log_d: mixing.leaf_log_d(),
                    children: Vec::new(),
                };
                this.cands[s] = vec![leaf];
            } else {
                // The full set keeps only its best tree; every other subset keeps them all.
                let keep_all = s != full;
                this.cands[s] = this.trees_on(s, keep_all);
            }
        }
        this
    }

    fn trees_on(&self, s: usize, keep_all: bool) -> Vec<Cand> {
        let mut out: Vec<Cand> = Vec::new();
        let mut blocks = Vec::new();
        self.partitions(s, &mut blocks, &mut |blocks: &[usize]| {
            if blocks.len() < 2 || (self.binary && blocks.len() != 2) {
                return;
            }
            let mut idx = vec![0_usize; blocks.len()];
            loop {
                let (mut lp, mut ld) = (0.0, 0.0);
                for (k, &b) in blocks.iter().enumerate() {
                    lp += self.cands[b][idx[k]].log_p;
                    ld += self.cands[b][idx[k]].log_d;
                }
                let prior = self
                    .mixing
                    .node_prior(blocks.len(), s.count_ones() as usize, ld);
                let cand = Cand {
                    log_p: node_log_p(&prior, self.log_f[s], lp),
                    log_d: prior.log_d,
                    children: blocks.iter().copied().zip(idx.iter().copied()).collect(),
                };
                if keep_all {
                    out.push(cand);
                } else if out.first().is_none_or(|b| cand.log_p > b.log_p) {
                    out = vec![cand];
                }
                // Next index combination (odometer).
                let mut k = 0;
                while k < blocks.len() {
                    idx[k] += 1;
                    if idx[k] < self.cands[blocks[k]].len() {
                        break;
                    }
                    idx[k] = 0;
                    k += 1;
                }
                if k == blocks.len() {
                    break;
                }
            }
        });
        out
    }

    /// Calls `visit` with every set partition of `s` (each block holds its lowest element
    /// first, so every partition is produced once).
    fn partitions(&self, s: usize, blocks: &mut Vec<usize>, visit: &mut dyn FnMut(&[usize])) {
        if s == 0 {
            visit(blocks);
            return;
        }
        let low = s & s.wrapping_neg();
        let rest = s ^ low;
        let mut sub = rest;
        loop {
            blocks.push(low | sub);
            self.partitions(rest ^ sub, blocks, visit);
            blocks.pop();
            if sub == 0 {
                break;
            }
            sub = (sub - 1) & rest;
        }
    }

    fn best_topology(&self) -> Topology {
        let full = (1_usize << self.n) - 1;
        let mut internal = Vec::new();
        self.build(full, 0, &mut internal);
        Topology::new(self.n, internal).expect("exhaustive search builds valid trees")
    }

    fn build(&self, s: usize, idx: usize, internal: &mut Vec<Vec<usize>>) -> usize {
        if s.count_ones() == 1 {
            return s.trailing_zeros() as usize;
        }
        let children = self.cands[s][idx]
            .children
            .iter()
            .map(|&(b, k)| self.build(b, k, internal))
            .collect();
        internal.push(children);
        self.n + internal.len() - 1
    }
}

/// Brute force over every rose tree for any mixing rule: the reference the subset dynamic
/// programme is tested against.
#[cfg(test)]
pub(crate) fn optimal_by_enumeration(
    mixing: &Mixing,
    binary: bool,
    log_f: &[f64],
    n: usize,
) -> f64 {
    let e = Enumeration::new(mixing, binary, log_f, n);
    e.cands[(1 << n) - 1][0].log_p
}

#[cfg(test)]
pub(crate) fn optimal_by_subset_dp(
    mixing: &Mixing,
    binary: bool,
    log_f: &[f64],
    n: usize,
) -> Topology {
    subset_dp(mixing, binary, log_f, n)
}

#[cfg(test)]
pub(crate) fn log_marginals_for_test<M: ClusterModel>(model: &M, leaves: &[M::Stats]) -> Vec<f64> {
    subset_log_marginals(model, leaves).unwrap()
}
