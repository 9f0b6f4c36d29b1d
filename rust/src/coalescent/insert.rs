//! Trees that grow: new rows added to a fitted coalescent tree one at a time, without
//! refitting (`partial_fit`).
//!
//! A row is placed where the coalescent's own predictive (Teh, Daumé & Roy 2007, §4.4;
//! [`Predictor`](super::predict::Predictor)) puts it. Under the `(n + 1)`-coalescent, given the
//! tree `π` of the first `n` rows, the new lineage joins the branch above node `v` at time
//! `t` with density `S(t) = exp(−∫_t^0 k)` times the probability of the row given the
//! value of the process there (see [`super::predict`]): the joint density of the row and
//! of joining `(v, t)`.
//!
//! 1. **Join.** Under [`JoinRule::MaxDensity`] (the default), the `(branch, time)` of the
//!    largest joint density, the MAP join point; under [`JoinRule::BranchMass`], the
//!    branch with the largest probability (the density integrated over its join times),
//!    then the time of the largest density on it. Every branch is scored on a grid of at
//!    most about a hundred times whatever the tree (see the `grow` module: `S` exact at
//!    each time from the hazard's prefix sums, pieces cut where `ln S` falls by 1 and, on
//!    leaf branches, at ratio-2 levels towards the leaf);
//!    the best grid times (of the four best branches under `MaxDensity`, of the chosen
//!    branch under `BranchMass`) are refined by Brent's method (argmin's `BrentOpt`)
//!    between their neighbours, a refinement kept only if its density is at least the grid
//!    node's. Ties go to the lower node id.
//! 2. **Insertion.** A new node at that time on the branch, with the branch's lower node
//!    and the new leaf as children (above the root: a new root). Every other node keeps its
//!    time, so the result is again a timed binary tree whose every parent is no more
//!    recent than its children: a valid coalescent tree over all rows.
//! 3. **Ties** (on by default, [`Growth::balance`]): a join at the very time of the node
//!    below it, or of that node's parent, joins a block of nodes of one time, a
//!    multifurcation resolved as a binary tree. Every child of the block is then an equally
//!    good place (same `ln p(x, π)`), and the row goes down the block to the child with the
//!    fewest levels below it. Without this, rows within the observation noise of a cluster
//!    (joined at the cluster's time, often `t = 0`) stack one above another in a chain as
//!    long as their number; see `BENCHMARKS.md`.
//! 4. **Repairs** (optional, off by default; see [`Growth::repair`] and
//!    [`Growth::retime`]): the leaves next to the new node re-placed, or the nodes on its
//!    path to the root re-timed, where that raises `ln p(x, π)`.
//!
//! Each row is placed given the tree grown so far (rows in the order given). Per row, the
//! upward messages change only on the path from the new node to the root (`O(depth · d)`);
//! the outside messages all change (every one of them now includes the new row), and one
//! downward pass recomputes them (`O(n · d)`); scoring is `O(d)` per branch plus `O(log n)`
//! per grid time (a binary search for `S`). A row thus costs `O(n · (d + log n))`, against
//! `O(n²)` for the predictor's quadrature, which cuts every branch at every merge time it
//! spans. The log joint of the tree over all rows (eq 7) is evaluated once, from scratch,
//! at the end.
//!
//! **Why the MAP join point.** Integrated over a branch, the density favours long
//! branches high in the tree: a row of a cluster most probably joins the long branch above
//! the cluster's root, and rows then stack up there one above another (a comb) and rows of
//! other classes join it too. The single most probable point instead sits next to the row's
//! closest neighbours, low in the tree. See `BENCHMARKS.md` (streaming, Kingman's
//! coalescent) for the measurement.
//!
//! Nothing here is random: the tree after a sequence of rows depends only on the tree, the
//! model, the rows and their order.

use super::kingman::{check_timed_tree, log_joint_from_leaves};
use super::merges::CoalescentFit;
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::optimize::brent_max;
use crate::tree::{Topology, Tree};

mod grow;

use grow::Growing;

/// How a new row's join is chosen (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JoinRule {
    /// The `(branch, time)` of the largest joint density of the row and the join.
    #[default]
    MaxDensity,
    /// The branch of the largest probability (the density integrated over the branch),
    /// then the time of the largest density on it.
    BranchMass,
}

/// How [`insert_rows_with`] grows a tree (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// Where a row joins.
    pub rule: JoinRule,
    /// A join into a block of nodes of one time goes down to the block's shallowest child
    /// (the same `ln p(x, π)`, a balanced block). On by default.
    pub balance: bool,
    /// After each row joins through a new node, the leaves next to it (the node below the
    /// join if it is a leaf, else that node's children that are leaves) are each taken out
    /// and put back at their best join under `rule` in the tree without them, when that
    /// raises `ln p(x, π)` (the join density is the ratio of `p(x, π)` with and without
    /// the leaf, so the gain is exact up to the grid): at most two moves per row, each
    /// costing as much as an insertion. It raised the log joint on real data but neither
    /// purity nor depth (`BENCHMARKS.md`), so it is off by default.
    pub repair: bool,
    /// After each row joins, the nodes on the path from its join node's parent to the
    /// root are each moved, bottom up, to the time that maximises `ln p(x, π)` with the
    /// rest of the tree held, when that raises it (Brent's method between the node's
    /// parent's and children's times). Off by default.
    pub retime: bool,
    /// After each row joins, at each node on the path from its join node's parent to the
    /// root, bottom up, the best rotation that raises `ln p(x, π)` with every time held
    /// (a grandchild swapped with its uncle). Off by default.
    pub rotate: bool,
}

impl Default for Growth {
    fn default() -> Self {
        Self {
            rule: JoinRule::MaxDensity,
            balance: true,
            repair: false,
            retime: false,
            rotate: false,
        }
    }
}

/// Where a new row joined a tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Join {
    /// The node below the join: the row joined the branch above it (for the root, the
    /// lineage above it, making a new root); under [`Growth::balance`], after the row went
    /// down a block of nodes of the join's time. Ids are those of the tree the rows were added
    /// to, then two per row added before: the `i`-th row's leaf is `m + 2i` and its join
    /// node `m + 2i + 1`, `m` the number of nodes of the tree given.
    pub node: usize,
    /// The join time, between the node's parent's time and the node's own.
    pub time: f64,
    /// `ln` of the predictive probability of joining that branch (the chosen branch's share
    /// of `p(y′ | x, π)`, from the scoring grid).
    pub log_branch_probability: f64,
}

/// The maximiser of `density` on `span` (`span.0` may be `−∞`), from the grid `times`
/// (increasing, inside `span`): its best node, refined by Brent's method between the
/// node's neighbours (the span's ends beyond the first and last node).
fn best_time(density: &dyn Fn(f64) -> f64, span: (f64, f64), times: &[f64]) -> f64 {
    let (top, bottom) = span;
    let values: Vec<f64> = times.iter().map(|&t| density(t)).collect();
    let mut j = None;
    for (i, &value) in values.iter().enumerate() {
        if !value.is_nan() && j.is_none_or(|k: usize| value > values[k]) {
            j = Some(i);
        }
    }
    let Some(j) = j else {
        // No grid (a branch of zero length) or no number on it: the branch's lower end.
        return bottom;
    };
    let (t0, f0) = (times[j], values[j]);
    let lo = match j.checked_sub(1) {
        Some(i) => times[i],
        // Above the root the span is unbounded: reach as far again beyond the deepest node.
        None if top == f64::NEG_INFINITY => t0 - (bottom - t0).max(1.0),
        None => top,
    };
    let hi = times.get(j + 1).copied().unwrap_or(bottom);
    let mut best = (f0, t0);
    for t in [lo, hi] {
        let value = density(t);
        if value > best.0 {
            best = (value, t);
        }
    }
    if hi > lo {
        if let Some(t) = brent_max(density, lo, hi) {
            let value = density(t);
            if value > best.0 {
                best = (value, t);
            }
        }
    }
    best.1
}

/// The tree with a new leaf joined to the branch above `node` at time `time`: leaves keep
/// their ids and the new leaf is `n` (so every internal node's id grows by one, and by one
/// more for those after the new node); the new internal node comes, among the internal
/// nodes, after those more recent than `time` (as far as its child and parent allow), so a
/// tree whose internal ids follow its merge times keeps that order. Returns the new tree
/// and the new internal node's id.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if `tree` is not a timed coalescent tree, `node` is not
/// one of its nodes, or `time` is not finite, `≤ 0` and between the times of `node`'s
/// parent and `node`.
pub fn insert_leaf(tree: &Tree, node: usize, time: f64) -> Result<(Tree, usize)> {
    let h = check_timed_tree(tree)?;
    let nodes = tree.nodes();
    let n = tree.n_leaves();
    if node >= nodes.len() {
        return Err(RoseTreeError::InvalidTree(format!(
            "node {node} is not in a tree of {} nodes",
            nodes.len()
        )));
    }
    let parent = nodes[node].parent;
    let top = parent.map_or(f64::NEG_INFINITY, |p| h[p]);
    if !(time.is_finite() && time <= 0.0 && time >= top && time <= h[node]) {
        return Err(RoseTreeError::InvalidTree(format!(
            "a join at time {time} is not on the branch above node {node} (times {top} to {})",
            h[node]
        )));
    }
    let n_internal = nodes.len() - n;
    // Position of the new node among the internal nodes.
    let after_child = if node >= n { node - n + 1 } else { 0 };
    let before_parent = parent.map_or(n_internal, |p| p - n);
    let more_recent = h[n..].iter().filter(|&&t| t > time).count();
    let pos = more_recent.clamp(after_child, before_parent);
    let new_id = |u: usize| {
        if u < n {
            u
        } else if u - n < pos {
            u + 1
        } else {
            u + 2
        }
    };
    let joined = n + 1 + pos;
    let mut internal = Vec::with_capacity(n_internal + 1);
    let mut heights = vec![0.0; n + 1];
    for (k, u) in (n..nodes.len()).enumerate() {
        if k == pos {
            internal.push(vec![new_id(node), n]);
            heights.push(time);
        }
        let children = nodes[u]
            .children
            .iter()
            .map(|&c| if c == node { joined } else { new_id(c) })
            .collect();
        internal.push(children);
        heights.push(h[u]);
    }
    if pos == n_internal {
        internal.push(vec![new_id(node), n]);
        heights.push(time);
    }
    let tree = Tree::new(&Topology::new(n + 1, internal)?, Some(heights))?;
    Ok((tree, joined))
}

/// Adds rows to a fitted coalescent tree, one at a time in the order given, each at its
/// MAP join point ([`JoinRule::MaxDensity`]); [`insert_rows_with`] with the default
/// [`Growth`] (that rule, ties balanced, no repairs).
///
/// # Errors
/// As [`insert_rows_with`].
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::coalescent::{self, CoalescentParams, insert_rows};
/// use rosetree::models::messages::{BrownianDiffusion, MessageModel};
///
/// let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0]];
/// let model = BrownianDiffusion::isotropic(1.0, 2)?.with_noise(0.1)?;
/// let fit = coalescent::fit(&model, &CoalescentParams::new().check()?, x.view())?;
/// let new = array![[3.05, 3.05]];
/// let (grown, joins) = insert_rows(
///     &model,
///     &fit.tree,
///     model.leaf_messages(x.view())?,
///     model.leaf_messages(new.view())?,
///     &|| false,
/// )?;
/// // The new row (leaf 4) joins the cluster of rows 2 and 3.
/// let p = grown.tree.nodes()[4].parent.unwrap();
/// assert!(grown.tree.leaves_of(p).len() <= 3 && grown.tree.leaves_of(p).len() >= 2);
/// assert!(grown.tree.leaves_of(p).iter().all(|&l| l >= 2));
/// let all = ndarray::concatenate![ndarray::Axis(0), x, new];
/// let again = coalescent::log_joint(&model, all.view(), &grown.tree)?;
/// assert!((grown.log_joint - again).abs() < 1e-12);
/// assert_eq!(joins.len(), 1);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn insert_rows<M: MessageModel>(
    model: &M,
    tree: &Tree,
    leaves: Vec<(M::Message, f64)>,
    rows: Vec<(M::Message, f64)>,
    interrupt: &dyn Fn() -> bool,
) -> Result<(CoalescentFit, Vec<Join>)> {
    insert_rows_with(model, tree, leaves, rows, Growth::default(), interrupt)
}

/// Adds rows to a fitted coalescent tree, one at a time in the order given, each where
/// `growth` puts it (see the [module docs](self)), and returns the grown tree over all rows
/// (the tree's rows first, leaf `n + i` the `i`-th new row) with its `ln p(x, π)` (eq 7),
/// and where each row joined. `leaves` are the messages of the tree's rows and `rows` those
/// of the new rows, as [`MessageModel::leaf_messages`] returns them. `interrupt` is polled
/// between rows and stops with [`RoseTreeError::Interrupted`] when it returns `true`.
///
/// Internal node ids of the grown tree follow their times, most recent first.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if `tree` is not a timed coalescent tree over `leaves`;
/// [`RoseTreeError::Numerical`] when a row's predictive density is zero, infinite or NaN on
/// every branch (data or hyperparameters beyond double precision, or a root pinned at a
/// point), naming the row; [`RoseTreeError::Interrupted`].
pub fn insert_rows_with<M: MessageModel>(
    model: &M,
    tree: &Tree,
    leaves: Vec<(M::Message, f64)>,
    rows: Vec<(M::Message, f64)>,
    growth: Growth,
    interrupt: &dyn Fn() -> bool,
) -> Result<(CoalescentFit, Vec<Join>)> {
    let Growth {
        rule,
        balance,
        repair,
        retime,
        rotate,
    } = growth;
    check_timed_tree(tree)?;
    if leaves.len() != tree.n_leaves() {
        return Err(RoseTreeError::InvalidTree(format!(
            "the tree has {} leaves but {} leaf messages were given",
            tree.n_leaves(),
            leaves.len()
        )));
    }
    let mut growing = Growing::new(model, tree, leaves.iter().map(|l| l.0.clone()).collect());
    let mut all = leaves;
    let mut joins = Vec::with_capacity(rows.len());
    for (i, row) in rows.into_iter().enumerate() {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        growing.downward();
        let (node, time, log_branch_probability) = growing.best_join(&row.0, rule, i)?;
        let node = if balance {
            growing.tie_join(node, time)
        } else {
            node
        };
        let (_, j) = growing.insert(node, time, row.0.clone());
        if retime || rotate {
            let mut above = growing.parent_of(j);
            while let Some(v) = above {
                if rotate {
                    growing.rotate(v);
                }
                if retime {
                    growing.retime(v);
                }
                above = growing.parent_of(v);
            }
        }
        if repair {
            for u in growing.repair_candidates(j) {
                growing.repair(u, rule, balance, i)?;
            }
        }
        joins.push(Join {
            node,
            time,
            log_branch_probability,
        });
        all.push(row);
    }
    let tree = growing.finish()?.0;
    let log_joint = log_joint_from_leaves(model, &all, &tree)?;
    Ok((CoalescentFit { tree, log_joint }, joins))
}

#[cfg(test)]
mod tests;
