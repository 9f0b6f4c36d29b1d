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
    from_log_f(topology, &node_log_f(model, topology, leaves)?, mixing)
}

/// `ln f` of every node of `topology` (leaves first, then internal nodes in id order). The
/// internal nodes' statistics are merged bottom-up, each dropped once its parent has been
/// merged: at most the statistics of the nodes whose parent is still to come are held,
/// not a copy of every node's.
///
/// # Errors
/// Errors of the model.
pub(crate) fn node_log_f<M: ClusterModel>(
    model: &M,
    topology: &Topology,
    leaves: &[M::Stats],
) -> Result<Vec<f64>> {
    let n = topology.n_leaves();
    let internal = topology.internal();
    let mut log_f = Vec::with_capacity(n + internal.len());
    for s in leaves {
        log_f.push(model.log_marginal(s)?);
    }
    let mut pending: Vec<Option<M::Stats>> = (0..internal.len()).map(|_| None).collect();
    for (k, children) in internal.iter().enumerate() {
        let mut merged: Option<M::Stats> = None;
        for &c in children {
            let taken;
            let stat = if c < n {
                &leaves[c]
            } else {
                taken = pending[c - n].take().expect("children come before parents");
                &taken
            };
            merged = Some(match merged {
                None => stat.clone(),
                Some(acc) => model.merge(&acc, stat),
            });
        }
        let merged = merged.expect("an internal node has children");
        log_f.push(model.log_marginal(&merged)?);
        pending[k] = Some(merged);
    }
    Ok(log_f)
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

/// The clusters of `remix(tree, mixing).cut(threshold)` ([`RoseTree::cut`]), from each
/// node's `ln r` under `mixing` without building the remixed tree: descending from the
/// root, a node with `ln r ≥ ln threshold` (or a leaf) is a cluster. In increasing id
/// order.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] unless `0 ≤ threshold ≤ 1`.
pub fn cut_remixed(tree: &RoseTree, mixing: &Mixing, threshold: f64) -> Result<Vec<usize>> {
    let log_t = RoseTree::log_threshold(threshold)?;
    let n = tree.n_leaves();
    let values = tree.values();
    // Summaries of the internal nodes only (a leaf's is made where it is needed): a rose
    // tree over many rows has few internal nodes.
    let mut internal: Vec<Summary> = Vec::with_capacity(values.len() - n);
    for v in n..values.len() {
        let children = &tree.node(v).children;
        let of = |c: usize| {
            if c < n {
                Summary::leaf(values[c].log_f, mixing)
            } else {
                internal[c - n]
            }
        };
        let s = internal_summary(mixing, children, values[v].log_f, of);
        internal.push(s);
    }
    Ok(tree.top_down(|v| v < n || internal[v - n].values().log_r() >= log_t))
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

/// `ln p(D | T)` of the tree of `topology` given `ln f` of every node, without building the
/// tree: what [`from_log_f`]'s root would hold.
///
/// # Errors
/// As [`from_log_f`].
pub(crate) fn log_evidence_from_log_f(
    topology: &Topology,
    log_f: &[f64],
    mixing: &Mixing,
) -> Result<f64> {
    let summary = summaries(topology, log_f, mixing);
    check_finite_log_p(&summary)?;
    Ok(summary.last().expect("a tree has nodes").log_p)
}

/// Every node's [`Summary`] from its `ln f`, bottom-up.
fn summaries(topology: &Topology, log_f: &[f64], mixing: &Mixing) -> Vec<Summary> {
    let n = topology.n_leaves();
    let mut summary: Vec<Summary> = Vec::with_capacity(log_f.len());
    for &f in &log_f[..n] {
        summary.push(Summary::leaf(f, mixing));
    }
    for (k, children) in topology.internal().iter().enumerate() {
        let s = internal_summary(mixing, children, log_f[n + k], |c| summary[c]);
        summary.push(s);
    }
    summary
}

/// The [`Summary`] of an internal node with `ln f = log_f` and `children`, whose summaries
/// `of` gives.
fn internal_summary(
    mixing: &Mixing,
    children: &[usize],
    log_f: f64,
    of: impl Fn(usize) -> Summary,
) -> Summary {
    Summary::internal(
        mixing,
        children.iter().map(|&c| of(c).n_leaves).sum(),
        children.len(),
        log_f,
        children.iter().map(|&c| of(c).log_p).sum(),
        children.iter().map(|&c| of(c).log_d).sum(),
    )
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
    // Node by node, without a list of all nodes in between.
    let nodes = summary.iter().enumerate().map(|(id, s)| {
        let children = if id < n {
            Vec::new()
        } else {
            topology.internal()[id - n].clone()
        };
        (children, s.values())
    });
    RoseTree::from_nodes(n, nodes)
}
