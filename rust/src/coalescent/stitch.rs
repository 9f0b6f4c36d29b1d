//! Greedy-Rate1 subtrees fitted apart (on other machines) joined into one coalescent tree
//! from their roots' summaries, never their rows, with the exact `ln p(x, π)` of the tree
//! returned.
//!
//! # Why a summary suffices
//! By eq 6, `p(x | π) = Z_−∞ · Π_i Z_i · Π_leaves Z_leaf`: every merge inside a subtree
//! contributes its own `Z_i`, fixed by the subtree alone, and what the nodes above it see of
//! the subtree is its root's message `M_root` at the root's time. So a part is summarised by
//! [`PartSummary`]: that message and `Σ ln Z` over its leaves and merges
//! ([`part_summary`]). The prior term of eq 7 (Kingman's, with the true rates
//! `C(n − i + 1, 2)`) depends on all the merge times in time order, which are part of the
//! tree returned anyway (the parts' trees are joined into it).
//!
//! # Times of the joins
//! The nodes above the parts are timed from the bottom up by the Greedy-Rate1 rule, as in
//! the approximate search ([`super::approx`]): a join of subtrees formed at `t_l` and `t_r`
//! is placed at `min(t_l, t_r) − δ*`, `δ* ≥ 0` the most probable duration under rate 1
//! given the two messages ([`MessageModel::optimal_duration`]), so every parent is no later
//! than its children.

use super::kingman::{check_timed_tree, log_prior};
use crate::error::{Result, RoseTreeError};
use crate::models::messages::{MessageModel, subtree_log_evidence_from_leaves, upward_root};
use crate::tree::{Topology, Tree};

/// What the nodes above a part need of it: its root's message at the root's time, and the
/// sum of `ln Z` over its leaves and merges (eq 6 restricted to the part, without the root
/// term `ln Z_−∞`).
#[derive(Debug, Clone, PartialEq)]
pub struct PartSummary<Msg> {
    /// The normalised message of the part's root node, at the root's time.
    pub message: Msg,
    /// `Σ ln Z_leaf + Σ ln Z_i` over the part's leaves and merges.
    pub log_z: f64,
}

/// The [`PartSummary`] of a part with leaf messages `leaves` (as
/// [`MessageModel::leaf_messages`] returns them) and timed binary tree `tree` (`None` for a
/// part of one row).
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if `tree` is not a timed binary coalescent tree over
/// `leaves`, or if there is no tree and not exactly one leaf.
pub fn part_summary<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: Option<&Tree>,
) -> Result<PartSummary<M::Message>> {
    match tree {
        None if leaves.len() == 1 => Ok(PartSummary {
            message: leaves[0].0.clone(),
            log_z: leaves[0].1,
        }),
        None => Err(RoseTreeError::InvalidTree(format!(
            "a part without a tree has one row, this one has {}",
            leaves.len()
        ))),
        Some(tree) => {
            check_timed_tree(tree)?;
            let (message, log_z) = upward_root(model, leaves, tree)?;
            Ok(PartSummary { message, log_z })
        }
    }
}

/// A part to stitch: the global rows of its leaves, its timed tree (`None` for one row) and
/// its [`PartSummary`].
#[derive(Debug, Clone)]
pub struct Part<Msg> {
    /// Leaf `k` of the part's tree is row `rows[k]` of the whole data.
    pub rows: Vec<usize>,
    /// The part's timed binary tree; `None` for a part of one row.
    pub tree: Option<Tree>,
    /// What the nodes above the part need of it.
    pub summary: PartSummary<Msg>,
}

/// The stitched tree and where the inputs went in it.
#[derive(Debug, Clone)]
pub struct Stitched {
    /// The coalescent tree over all rows (leaf `i` is row `i`), internal nodes numbered by
    /// time, the most recent first (as the greedy searches number them).
    pub tree: Tree,
    /// `ln p(x, π)` of [`tree`](Self::tree) (eq 7), exact.
    pub log_joint: f64,
    /// For each part, the node of [`tree`](Self::tree) that is each of its internal nodes
    /// (`part_nodes[p][k]` is internal node `m + k` of part `p`'s tree of `m` leaves).
    pub part_nodes: Vec<Vec<usize>>,
    /// The node of [`tree`](Self::tree) that is each top node, in the order given.
    pub top_nodes: Vec<usize>,
    /// The evidence `E(v) = ln p(x_v | π_v)` of each top node's subtree with the root prior
    /// on the node itself (as [`subtree_log_evidence_from_leaves`]), in the order given.
    pub top_evidence: Vec<f64>,
}

/// The tree over `n_rows` rows joined from `parts` by the binary top nodes `top`: node `p <
/// parts.len()` is part `p`'s root, and node `parts.len() + k` joins the two nodes `top[k]`
/// (which come before it); the last top node is the root (or the one part when `top` is
/// empty). The joins are timed by the Greedy-Rate1 rule (module docs) and `ln p(x, π)` is
/// computed from the summaries alone; it equals [`super::log_joint`] of the rows on the tree
/// returned.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if the rows of the parts are not `0..n_rows` each once, a
/// part's tree is not a timed binary tree over its rows, or `top` does not join every part
/// into one tree; [`RoseTreeError::Numerical`] for a NaN join time.
///
/// # Examples
/// Two parts of two rows each, fitted apart and joined: the log joint from the summaries is
/// the log joint of the rows on the tree.
/// ```
/// use ndarray::array;
/// use rosetree::coalescent::stitch::{Part, part_summary, stitch};
/// use rosetree::coalescent::{greedy_rate1, log_joint};
/// use rosetree::models::messages::{BrownianDiffusion, MessageModel};
/// use rosetree::parallel::Threads;
///
/// let model = BrownianDiffusion::isotropic(1.0, 1)?;
/// let x = array![[0.0], [0.2], [5.0], [5.1]];
/// let threads = Threads::new(Some(1))?;
/// let mut parts = Vec::new();
/// for rows in [vec![0, 1], vec![2, 3]] {
///     let leaves = model.leaf_messages(x.select(ndarray::Axis(0), &rows).view())?;
///     let tree = greedy_rate1(&model, leaves.clone(), &threads, &|| false)?.tree;
///     let summary = part_summary(&model, &leaves, Some(&tree))?;
///     parts.push(Part { rows, tree: Some(tree), summary });
/// }
/// let stitched = stitch(&model, 4, &parts, &[[0, 1]])?;
/// let again = log_joint(&model, x.view(), &stitched.tree)?;
/// assert!((stitched.log_joint - again).abs() < 1e-12);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn stitch<M: MessageModel>(
    model: &M,
    n_rows: usize,
    parts: &[Part<M::Message>],
    top: &[[usize; 2]],
) -> Result<Stitched> {
    let bad = |why: String| Err(RoseTreeError::InvalidTree(why));
    if parts.is_empty() {
        return bad("no parts to stitch".into());
    }
    if top.len() + 1 != parts.len() {
        return bad(format!(
            "{} parts need {} binary top nodes, got {}",
            parts.len(),
            parts.len() - 1,
            top.len()
        ));
    }
    let mut seen = vec![false; n_rows];
    for (p, part) in parts.iter().enumerate() {
        for &r in &part.rows {
            if r >= n_rows || std::mem::replace(&mut seen[r], true) {
                return bad(format!(
                    "part {p} has row {r}: not a row, or a row of two parts"
                ));
            }
        }
        let m = part.tree.as_ref().map_or(1, Tree::n_leaves);
        if m != part.rows.len() {
            return bad(format!(
                "part {p} has {} rows but its tree {m} leaves",
                part.rows.len()
            ));
        }
    }
    if let Some(r) = seen.iter().position(|s| !s) {
        return bad(format!("row {r} is in no part"));
    }
    // Internal nodes over ids (rows `0..n`, internal `n + k`), children first, with times.
    let mut internal: Vec<([usize; 2], f64)> = Vec::with_capacity(n_rows.saturating_sub(1));
    let mut part_nodes = Vec::with_capacity(parts.len());
    // Each input node's id, time and (for part roots and joins) message.
    let n_in = parts.len() + top.len();
    let mut ids = Vec::with_capacity(n_in);
    let mut times = Vec::with_capacity(n_in);
    let mut messages: Vec<Option<M::Message>> = Vec::with_capacity(n_in);
    let mut log_z: f64 = 0.0;
    for (p, part) in parts.iter().enumerate() {
        log_z += part.summary.log_z;
        messages.push(Some(part.summary.message.clone()));
        let Some(tree) = &part.tree else {
            ids.push(part.rows[0]);
            times.push(0.0);
            part_nodes.push(Vec::new());
            continue;
        };
        let h = check_timed_tree(tree).map_err(|e| match e {
            RoseTreeError::InvalidTree(why) => {
                RoseTreeError::InvalidTree(format!("part {p}: {why}"))
            }
            other => other,
        })?;
        let m = tree.n_leaves();
        let base = n_rows + internal.len();
        let id = |c: usize| if c < m { part.rows[c] } else { base + c - m };
        let mut nodes = Vec::with_capacity(m - 1);
        for (v, node) in tree.nodes().iter().enumerate().skip(m) {
            nodes.push(base + v - m);
            internal.push(([id(node.children[0]), id(node.children[1])], h[v]));
        }
        ids.push(id(tree.root()));
        times.push(h[tree.root()]);
        part_nodes.push(nodes);
    }
    let mut below: Vec<f64> = parts.iter().map(|p| p.summary.log_z).collect();
    let mut top_evidence = Vec::with_capacity(top.len());
    for (k, &[a, b]) in top.iter().enumerate() {
        let me = parts.len() + k;
        if a >= me || b >= me || a == b {
            return bad(format!(
                "top node {me} joins nodes {a} and {b}: each must be a distinct earlier node"
            ));
        }
        let (Some(ma), Some(mb)) = (messages[a].take(), messages[b].take()) else {
            return bad(format!(
                "top node {me} joins a node that already has a parent"
            ));
        };
        let (ta, tb) = (times[a], times[b]);
        let delta = model.optimal_duration(&model.pair(&ma, &mb), (ta - tb).abs(), 1.0)?;
        let t = ta.min(tb) - delta;
        if t.is_nan() {
            return Err(RoseTreeError::Numerical(format!(
                "the time of top node {me} (a join of two parts) is NaN"
            )));
        }
        let (msg, z) = model.combine(&[model.propagate(&ma, ta - t), model.propagate(&mb, tb - t)]);
        log_z += z;
        below.push(below[a] + below[b] + z);
        top_evidence.push(below[me] + model.root_log_z(&msg));
        ids.push(n_rows + internal.len());
        internal.push(([ids[a], ids[b]], t));
        times.push(t);
        messages.push(Some(msg));
    }
    let root_msg = messages[n_in - 1]
        .take()
        .ok_or_else(|| RoseTreeError::InvalidTree("the root has a parent".into()))?;
    if messages.iter().any(Option::is_some) {
        return bad("the top nodes leave more than one tree".into());
    }
    let (tree, new_id) = number_by_time(n_rows, &internal)?;
    let renumber = |v: usize| if v < n_rows { v } else { new_id[v - n_rows] };
    let log_joint = log_prior(&tree)? + log_z + model.root_log_z(&root_msg);
    Ok(Stitched {
        tree,
        log_joint,
        part_nodes: part_nodes
            .into_iter()
            .map(|nodes| nodes.into_iter().map(renumber).collect())
            .collect(),
        top_nodes: ids[parts.len()..].iter().map(|&v| renumber(v)).collect(),
        top_evidence,
    })
}

/// The tree of the internal nodes `internal` (children first; ids `n + k`) with their
/// times, renumbered by time, the most recent first (ties keep the given order, so children
/// still come before their parents), and the new id of each internal node `n + k`.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if the nodes do not form one binary tree over `n` leaves.
pub(crate) fn number_by_time(
    n: usize,
    internal: &[([usize; 2], f64)],
) -> Result<(Tree, Vec<usize>)> {
    let mut order: Vec<usize> = (0..internal.len()).collect();
    order.sort_by(|&i, &j| internal[j].1.total_cmp(&internal[i].1).then(i.cmp(&j)));
    let mut new_id = vec![0; order.len()];
    for (rank, &k) in order.iter().enumerate() {
        new_id[k] = n + rank;
    }
    let renumber = |c: usize| if c < n { c } else { new_id[c - n] };
    let children = order
        .iter()
        .map(|&k| internal[k].0.iter().map(|&c| renumber(c)).collect())
        .collect();
    let mut heights = vec![0.0; n];
    heights.extend(order.iter().map(|&k| internal[k].1));
    let tree = Tree::new(&Topology::new(n, children)?, Some(heights))?;
    Ok((tree, new_id))
}

/// The evidence `E(v)` of every node of a part's tree (`None` for one row), leaves first,
/// with the root prior on `v` itself (as [`subtree_log_evidence_from_leaves`]): what the
/// log-likelihood ratios of the whole tree's nodes need of the part
/// ([`Stitched::part_nodes`] places its internal nodes, [`Part::rows`] its leaves).
///
/// # Errors
/// As [`subtree_log_evidence_from_leaves`]; [`RoseTreeError::InvalidTree`] without a tree
/// for other than one leaf.
pub fn part_evidence<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: Option<&Tree>,
) -> Result<Vec<f64>> {
    match tree {
        Some(tree) => subtree_log_evidence_from_leaves(model, leaves, tree),
        None if leaves.len() == 1 => Ok(vec![leaves[0].1 + model.root_log_z(&leaves[0].0)]),
        None => Err(RoseTreeError::InvalidTree(format!(
            "a part without a tree has one row, this one has {}",
            leaves.len()
        ))),
    }
}

#[cfg(test)]
mod tests;
