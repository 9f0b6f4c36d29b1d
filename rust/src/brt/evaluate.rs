//! `ln p(D | T)` of a given tree (eq 1.5), bottom-up.

use super::RoseTree;
use super::mixing::Mixing;
use super::mixing::Summary;
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use crate::tree::Topology;

/// Annotates `topology` with `ln f`, `ln p` and `ln π` under `model` and `mixing`, given the
/// statistics of each leaf (data row).
///
/// # Errors
/// [`RoseTreeError::ShapeMismatch`] when `leaves` and the tree disagree on the number of data
/// items; errors of the model.
pub fn evaluate<M: ClusterModel>(
    model: &M,
    mixing: &Mixing,
    topology: &Topology,
    leaves: &[M::Stats],
) -> Result<RoseTree> {
    let n = topology.n_leaves();
    if leaves.len() != n {
        return Err(RoseTreeError::ShapeMismatch {
            what: "tree".into(),
            expected: format!("{} leaves (one per data row)", leaves.len()),
            found: format!("{n} leaves"),
        });
    }
    let stats = node_stats(model, topology, leaves);
    let mut summary = Vec::with_capacity(stats.len());
    for s in leaves {
        summary.push(Summary::leaf(model.log_marginal(s)?, mixing));
    }
    for (k, children) in topology.internal().iter().enumerate() {
        let n_leaves = children.iter().map(|&c| summary[c].n_leaves).sum();
        let sum_log_p = children.iter().map(|&c| summary[c].log_p).sum();
        let sum_log_d = children.iter().map(|&c| summary[c].log_d).sum();
        let log_f = model.log_marginal(&stats[n + k])?;
        summary.push(Summary::internal(
            mixing,
            n_leaves,
            children.len(),
            log_f,
            sum_log_p,
            sum_log_d,
        ));
    }
    check_finite_log_p(&summary)?;
    Ok(annotated(topology, &summary))
}

/// A NaN anywhere (a model's `ln f` of NaN, or `−∞ − (−∞)` where every partition of a node
/// is impossible) is an error naming the node, as in the greedy search.
fn check_finite_log_p(summary: &[Summary]) -> Result<()> {
    match summary
        .iter()
        .position(|s| s.log_p.is_nan() || s.log_d.is_nan())
    {
        Some(v) => Err(RoseTreeError::Numerical(format!(
            "ln p of node {v} is NaN: the cluster model's ln f is not finite there (extreme \
             hyperparameters or data beyond double precision)"
        ))),
        None => Ok(()),
    }
}

/// `tree` with every node's mixture quantities recomputed under `mixing` from the cluster
/// marginal likelihoods it already holds (`ln f` does not depend on the mixing rule), so no
/// data or model is needed: the same tree under another prior over its partitions.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, BrtParams, Mixing};
/// use rosetree::models::{BetaBernoulli, ClusterModel};
///
/// let x = array![[1., 1., 0.], [1., 1., 0.], [0., 0., 1.], [0., 1., 1.]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 3)?;
/// let tree = brt::fit(&model, &BrtParams::new(Mixing::Brt { gamma: 0.5 }).check()?, x.view())?;
/// let dp = Mixing::Dp { alpha: 1.0 };
/// let remixed = brt::remix(&tree, &dp);
/// let direct = brt::evaluate(&model, &dp, &tree.topology(), &model.leaf_stats_all(x.view())?)?;
/// assert!((remixed.log_evidence() - direct.log_evidence()).abs() < 1e-12);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn remix(tree: &RoseTree, mixing: &Mixing) -> RoseTree {
    let topology = tree.topology();
    let log_f: Vec<f64> = tree.values().iter().map(|v| v.log_f).collect();
    annotated(&topology, &summaries(&topology, &log_f, mixing))
}

/// The tree of `topology` annotated under `mixing`, given `ln f` of every node (leaves first,
/// then internal nodes in id order): eq 1.5 bottom-up, which needs nothing else, so that
/// parts of a tree scored apart can be joined exactly (see [`super::stitch()`]).
///
/// # Errors
/// [`RoseTreeError::ShapeMismatch`] unless `log_f` has one value per node;
/// [`RoseTreeError::Numerical`] where a node's `ln p` is NaN.
pub fn from_log_f(topology: &Topology, log_f: &[f64], mixing: &Mixing) -> Result<RoseTree> {
    let n_nodes = topology.n_leaves() + topology.internal().len();
    if log_f.len() != n_nodes {
        return Err(RoseTreeError::ShapeMismatch {
            what: "log_f".into(),
            expected: format!("{n_nodes} values (one per node)"),
            found: format!("{} values", log_f.len()),
        });
    }
    let summary = summaries(topology, log_f, mixing);
    check_finite_log_p(&summary)?;
    Ok(annotated(topology, &summary))
}

/// Every node's [`Summary`] from its `ln f`, bottom-up.
fn summaries(topology: &Topology, log_f: &[f64], mixing: &Mixing) -> Vec<Summary> {
    let n = topology.n_leaves();
    let mut summary: Vec<Summary> = Vec::with_capacity(log_f.len());
    for &f in &log_f[..n] {
        summary.push(Summary::leaf(f, mixing));
    }
    for (k, children) in topology.internal().iter().enumerate() {
        summary.push(Summary::internal(
            mixing,
            children.iter().map(|&c| summary[c].n_leaves).sum(),
            children.len(),
            log_f[n + k],
            children.iter().map(|&c| summary[c].log_p).sum(),
            children.iter().map(|&c| summary[c].log_d).sum(),
        ));
    }
    summary
}

/// The statistics of every node of `topology` (leaves first, then internal nodes in id
/// order), merged bottom-up from the leaves' statistics.
///
/// # Panics
/// If `leaves` does not hold one entry per leaf of `topology`.
pub fn node_stats<M: ClusterModel>(
    model: &M,
    topology: &Topology,
    leaves: &[M::Stats],
) -> Vec<M::Stats> {
    assert_eq!(leaves.len(), topology.n_leaves(), "one statistic per leaf");
    let mut stats: Vec<M::Stats> = Vec::with_capacity(leaves.len() + topology.internal().len());
    stats.extend_from_slice(leaves);
    for children in topology.internal() {
        let mut merged = stats[children[0]].clone();
        for &c in &children[1..] {
            merged = model.merge(&merged, &stats[c]);
        }
        stats.push(merged);
    }
    stats
}

/// Builds a [`RoseTree`] from a topology and one summary per node.
pub(crate) fn annotated(topology: &Topology, summary: &[Summary]) -> RoseTree {
    let n = topology.n_leaves();
    let nodes = summary
        .iter()
        .enumerate()
        .map(|(id, s)| {
            let children = if id < n {
                Vec::new()
            } else {
                topology.internal()[id - n].clone()
            };
            (children, s.values())
        })
        .collect();
    RoseTree::from_nodes(n, nodes)
}
