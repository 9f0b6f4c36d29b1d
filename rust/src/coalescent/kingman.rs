//! Kingman's n-coalescent as a prior on timed binary trees (Teh, Daumé & Roy 2007, §2), and
//! the joint density `p(x, π)` of data and tree (eq 7).
//!
//! A tree is the crate's [`Tree`] with heights: leaves at time 0, each internal node at its
//! coalescence time `t_i ≤ 0`, times falling towards the root. Sorting the `n − 1` merge
//! times from the most recent, `0 = t_0 ≥ t_1 ≥ … ≥ t_{n−1}`, the `i`-th waiting time
//! `δ_i = t_{i−1} − t_i` is `Exp(C(n − i + 1, 2))`, and the merging pair is uniform among
//! the `C(n − i + 1, 2)` pairs alive, so the density of a tree is (eq 2)
//! `p(π) = Π_i C(m_i, 2) e^{−C(m_i, 2) δ_i} / C(m_i, 2) = Π_i exp(−C(m_i, 2) δ_i)` with
//! `m_i = n − i + 1` lineages during the `i`-th interval.

use ndarray::ArrayView2;

use crate::error::{Result, RoseTreeError};
use crate::models::messages::{MessageModel, tree_log_likelihood_from_leaves};
use crate::tree::Tree;

/// `C(m, 2) = m(m − 1)/2`, the rate at which the first of `m` lineages coalesce.
pub fn pair_rate(m: usize) -> f64 {
    (m as f64) * (m as f64 - 1.0) / 2.0
}

/// Checks that `tree` is a timed binary coalescent tree: heights present, every leaf at
/// time 0, every internal node with two children at a finite time `≤ 0` no later than its
/// children's times.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] saying what is wrong.
pub fn check_timed_tree(tree: &Tree) -> Result<&[f64]> {
    let bad = |why: String| Err(RoseTreeError::InvalidTree(why));
    let Some(h) = tree.heights() else {
        return bad("a coalescent tree needs times (heights)".into());
    };
    if let Some(v) = (0..tree.n_leaves()).find(|&v| h[v] != 0.0) {
        return bad(format!("leaves must be at time 0, leaf {v} is at {}", h[v]));
    }
    for (v, node) in tree.nodes().iter().enumerate().skip(tree.n_leaves()) {
        if node.children.len() != 2 {
            return bad(format!(
                "a coalescent tree is binary, node {v} has {} children",
                node.children.len()
            ));
        }
        if !(h[v].is_finite() && h[v] <= 0.0) {
            return bad(format!(
                "coalescence times must be finite and ≤ 0, node {v} is at {}",
                h[v]
            ));
        }
        if let Some(&c) = node.children.iter().find(|&&c| h[c] < h[v]) {
            return bad(format!(
                "node {v} (time {}) is more recent than its child {c} (time {})",
                h[v], h[c]
            ));
        }
    }
    Ok(h)
}

/// `ln p(π)`, the log density of a timed binary tree under Kingman's n-coalescent (Teh et
/// al. eq 2): `−Σ_i C(n − i + 1, 2) δ_i` over the waiting times between successive
/// coalescence events taken in time order (equal times give waiting times of zero, so their
/// order does not matter).
///
/// # Errors
/// As [`check_timed_tree`].
pub fn log_prior(tree: &Tree) -> Result<f64> {
    let h = check_timed_tree(tree)?;
    let n = tree.n_leaves();
    let mut times: Vec<f64> = h[n..].to_vec();
    // Most recent first; times are finite, so `total_cmp` is the numeric order.
    times.sort_by(|a, b| b.total_cmp(a));
    let mut log_p = 0.0;
    let mut previous = 0.0;
    for (i, &t) in times.iter().enumerate() {
        log_p -= pair_rate(n - i) * (previous - t);
        previous = t;
    }
    Ok(log_p)
}

/// `ln p(x, π)` of the data `x` (row `i` is leaf `i`) and a timed binary tree (Teh et al.
/// eq 7): [`log_prior`] with the true rates `C(n − i + 1, 2)` plus `ln p(x | π)` by message
/// passing (eqs 4–6), the root's prior sitting on the root node.
///
/// # Examples
/// Two points in one dimension merging at `t = −1` under Brownian motion with `Λ = 1` and a
/// flat root: the prior gives `e^{−1}` and the likelihood `N(x₀ − x₁; 0, 2)`.
/// ```
/// use ndarray::array;
/// use rosetree::coalescent::log_joint;
/// use rosetree::models::messages::BrownianDiffusion;
/// use rosetree::tree::{Topology, Tree};
///
/// let tree = Tree::new(&Topology::new(2, vec![vec![0, 1]])?, Some(vec![0.0, 0.0, -1.0]))?;
/// let model = BrownianDiffusion::isotropic(1.0, 1)?;
/// let got = log_joint(&model, array![[0.5], [-0.5]].view(), &tree)?;
/// let want = -1.0 - 0.5 * (2.0 * std::f64::consts::PI * 2.0).ln() - 0.25;
/// assert!((got - want).abs() < 1e-14);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// As [`check_timed_tree`] and [`MessageModel::leaf_messages`];
/// [`RoseTreeError::InvalidTree`] if the tree's leaves are not the rows of `x`.
pub fn log_joint<M: MessageModel>(model: &M, x: ArrayView2<'_, f64>, tree: &Tree) -> Result<f64> {
    let leaves = model.leaf_messages(x)?;
    log_joint_from_leaves(model, &leaves, tree)
}

/// [`log_joint`] from leaf messages already computed (as [`MessageModel::leaf_messages`]
/// returns them).
///
/// # Errors
/// As [`log_joint`].
pub fn log_joint_from_leaves<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: &Tree,
) -> Result<f64> {
    let prior = log_prior(tree)?;
    Ok(prior + tree_log_likelihood_from_leaves(model, leaves, tree, 0.0)?)
}
