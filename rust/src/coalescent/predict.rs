//! Prediction with a fitted coalescent tree (Teh, Daumé & Roy 2007, §4.4): posterior
//! marginals by two-way message passing, the predictive density of a new point, and where
//! it would coalesce.
//!
//! # Posterior marginals
//! The two-way message passing of [`TwoWay`] (the message layer's, shared with the
//! diffusion tree): an upward pass gives each node `v` its message `U_v` from the data
//! below it; a downward pass, started from the root's prior
//! ([`MessageModel::root_message`]), gives the message `O_c` that reaches the parent `p` of
//! each node `c` from everything outside `c`'s subtree, `O_c = combine(D_p, propagate(U_s,
//! t_s − t_p))` for `c`'s sibling `s`, with `D_c = propagate(O_c, t_c − t_p)`. The posterior
//! at a point at time `t` on the branch above `c` is
//! `combine(propagate(U_c, t_c − t), propagate(O_c, t − t_p))`, normalised so that it is a
//! density (or distribution) against the model's reference measure.
//!
//! # Where a new point joins, and its density
//! Under the `(n + 1)`-coalescent, restricted to the first `n` lineages it is the
//! `n`-coalescent (Kingman's consistency); given those lineages' tree `π`, the new lineage
//! coalesces with each lineage alive at time `s` at rate 1, so it joins a given branch at a
//! time `t` with density `S(t) = exp(−∫_t^0 k(s) ds)`, `k(s)` the number of branches of `π`
//! alive at `s` (above the root `k = 1`, the root's lineage continuing to `−∞`). This is the
//! ratio of eq 2 for the tree `π′` with the new leaf inserted and for `π`: the waiting times
//! before the join carry the extra rate `k` each, and the join itself is one of the
//! `C(k + 1, 2)` pairs at rate 1. Inserting a node on a branch does not change the
//! likelihood of the other points, so
//!
//! ```text
//! p(y′ | x, π) = Σ_branches ∫ S(t) · E_{posterior at (branch, t)}[p(y′ | value at t)] dt,
//! ```
//!
//! and the last factor is the normaliser of combining the posterior message with the new
//! leaf's message propagated over `|t|` (times its own `ln Z_leaf`). Above the root the new
//! point makes a new root at `t`; the factor is then `p(x, y′ | π′) / p(x | π)` with the
//! root prior moved to `t`. A Gaussian root prior sits on whichever node is the root, so
//! moving it changes the probability of the old points too: the density is then divided by
//! `Σ∫ S(t) p(x | π′) / p(x | π)`, which makes it the conditional density of `y′` given `x`
//! and `π` under the `(n + 1)`-point model (the divisor is 1 for a flat or stationary root).
//!
//! The time integral is split at every event time of the tree, where `k` changes; within a
//! piece `S` is an exponential and the rest is smooth, and each piece is integrated by an
//! 8-point Gauss–Legendre rule after cutting it into sub-pieces over which `S` falls by at
//! most `e²` (at most 64 of them: below that, where `S` has fallen by `e^128` within the
//! piece, the piece is cut off). On leaf branches the piece that ends at the leaf is graded geometrically
//! towards `t = 0` (24 levels), where the posterior narrows to the observed point and the
//! density of a nearby `y′` peaks at `|t|` of the order of the squared distance. Above the
//! root, `∫_0^∞ e^{−s} g(s) ds` with `s = t_root − t` by 32-point Gauss–Laguerre. The cost
//! per new point is `O(d)` per quadrature node, and there are `O(n²)` pieces in the worst
//! case (every branch alive across every event).

use gauss_quad::{GaussLaguerre, GaussLegendre};

use super::check_timed_tree;
use crate::error::{Result, RoseTreeError};
use crate::models::messages::{MessageModel, TwoWay, posterior_between};
use crate::tree::Tree;

const LEGENDRE_ORDER: usize = 8;
const LAGUERRE_ORDER: usize = 64;
/// Geometric grading of the piece ending at a leaf: sub-pieces `[−Δ 2^{−j}, −Δ 2^{−j−1}]`.
const LEAF_LEVELS: i32 = 24;
/// The most `k·Δ` (the fall of `ln S`) over one sub-piece, and the most sub-pieces.
const MAX_HAZARD_STEP: f64 = 2.0;
const MAX_SUBPIECES: usize = 64;

/// A quadrature node on the branch above `node` (`node = root`: above the root): time `t`
/// and `ln(weight · S(t))`.
#[derive(Debug, Clone, Copy)]
struct Node {
    node: usize,
    t: f64,
    log_weight: f64,
}

/// A fitted tree's messages, ready to predict (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Predictor<M: MessageModel> {
    model: M,
    tree: Tree,
    /// `U_v`: each node's message at its own time from the data below.
    up: Vec<M::Message>,
    /// `D_v`: each node's message at its own time from everything outside its subtree.
    down: Vec<M::Message>,
    /// `O_c`: at the parent's time, from everything outside `c`'s subtree (the root: its
    /// prior).
    out: Vec<M::Message>,
    /// `ln Z_−∞` of the root's message.
    root_log_z: f64,
    /// `ln` of the probability of the data given the join, averaged over the join:
    /// `ln Σ_nodes w · p(x | π′) / p(x | π)`, 0 unless a Gaussian root moves with the join.
    log_norm: f64,
    quadrature: Vec<Node>,
    /// `t` of each quadrature node, in the same order.
    times: Vec<f64>,
    /// The quadrature nodes on the branch above each non-root node: `(node, start, end)`,
    /// a range of `quadrature`.
    branches: Vec<(usize, usize, usize)>,
    /// `ln S(t)` of the tree (negated).
    hazard: Hazard,
}

impl<M: MessageModel> Predictor<M> {
    /// Messages of the rows of `x` on the timed binary tree `tree` (row `i` is leaf `i`).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree is not a timed binary coalescent tree over
    /// the rows of `x`; whatever [`MessageModel::leaf_messages`] reports for the data.
    pub fn new(model: M, x: ndarray::ArrayView2<'_, f64>, tree: Tree) -> Result<Self> {
        let n = tree.n_leaves();
        if x.nrows() != n {
            return Err(RoseTreeError::InvalidTree(format!(
                "the tree has {n} leaves but X has {} rows",
                x.nrows()
            )));
        }
        let leaves = model
            .leaf_messages(x)?
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        Self::from_leaves(model, leaves, tree)
    }

    /// [`Predictor::new`] from the leaves' messages already computed (the first part of
    /// what [`MessageModel::leaf_messages`] returns), leaf `i` first.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree is not a timed binary coalescent tree over
    /// `leaves`.
    pub fn from_leaves(model: M, leaves: Vec<M::Message>, tree: Tree) -> Result<Self> {
        let heights = check_timed_tree(&tree)?.to_vec();
        let n = tree.n_leaves();
        if leaves.len() != n {
            return Err(RoseTreeError::InvalidTree(format!(
                "the tree has {n} leaves but {} leaf messages were given",
                leaves.len()
            )));
        }
        let TwoWay { up, out, down } =
            TwoWay::new(&model, &tree, leaves, model.root_message(), |c, p| {
                heights[c] - heights[p]
            });
        let root = tree.root();
        let root_log_z = model.root_log_z(&up[root]);
        let hazard = Hazard::new(&tree, &heights);
        let quadrature = quadrature(&tree, &heights, &hazard);
        let log_norm = log_sum_exp(
            &quadrature
                .iter()
                .map(|q| {
                    if q.node == root && q.t <= heights[root] {
                        let moved = model.propagate(&up[root], heights[root] - q.t);
                        q.log_weight + model.root_log_z(&moved) - root_log_z
                    } else {
                        q.log_weight
                    }
                })
                .collect::<Vec<_>>(),
        );
        let times = quadrature.iter().map(|q| q.t).collect();
        // The nodes of one branch are consecutive (see `quadrature`); the root's are those
        // above it, where the new row makes a new root.
        let mut branches: Vec<(usize, usize, usize)> = Vec::new();
        for (i, q) in quadrature.iter().enumerate() {
            match branches.last_mut() {
                Some((v, _, end)) if *v == q.node && *end == i => *end = i + 1,
                _ if q.node == root => {}
                _ => branches.push((q.node, i, i + 1)),
            }
        }
        Ok(Self {
            model,
            tree,
            up,
            down,
            out,
            root_log_z,
            log_norm,
            quadrature,
            times,
            branches,
            hazard,
        })
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// `U_v` and `O_v` (see the [module docs](self)), for tests.
    #[cfg(test)]
    pub(crate) fn messages(&self, v: usize) -> (&M::Message, &M::Message) {
        (&self.up[v], &self.out[v])
    }

    /// The posterior message at node `v` (at its own time), given all the data.
    pub fn posterior_at_node(&self, v: usize) -> M::Message {
        self.model
            .combine(&[self.up[v].clone(), self.down[v].clone()])
            .0
    }

    /// The posterior message at time `t` on the branch above node `v` (`t` between the
    /// parent's time and `v`'s; for the root, any `t ≤ t_root`).
    pub fn posterior_on_branch(&self, v: usize, t: f64) -> M::Message {
        let h = self.tree.heights().expect("checked: the tree has heights");
        let above = self.tree.nodes()[v].parent.map_or(t, |p| h[p]);
        posterior_between(&self.model, &self.up[v], &self.out[v], h[v] - t, t - above)
    }

    /// `ln p(y′ | x, π)` for the new row `row` (see the [module docs](self)), and the
    /// log of the same sum restricted to each branch (indexed by the node below it), whose
    /// differences from the total are the log probabilities of joining each branch.
    ///
    /// # Errors
    /// Whatever [`MessageModel::leaf_message`] reports for the row (`index` names it).
    pub fn log_density_by_branch(
        &self,
        row: ndarray::ArrayView1<'_, f64>,
        index: usize,
    ) -> Result<(f64, Vec<f64>)> {
        let (leaf, leaf_log_z) = self.model.leaf_message(row, index)?;
        Ok(self.log_density_by_branch_of(&leaf, leaf_log_z))
    }

    /// [`Predictor::log_density_by_branch`] for a new row given by its leaf message and that
    /// message's `ln Z_leaf` (as [`MessageModel::leaf_message`] returns them).
    pub fn log_density_by_branch_of(&self, leaf: &M::Message, leaf_log_z: f64) -> (f64, Vec<f64>) {
        let h = self.tree.heights().expect("checked: the tree has heights");
        let nodes = self.tree.nodes();
        let root = self.tree.root();
        // ln f at every quadrature node: on the branches, a branch at a time.
        let mut log_f = vec![f64::NAN; self.quadrature.len()];
        for &(v, start, end) in &self.branches {
            let top = nodes[v].parent.map_or(h[v], |p| h[p]);
            self.model.branch_join_log_z(
                &self.up[v],
                &self.out[v],
                top,
                h[v],
                leaf,
                &self.times[start..end],
                &mut log_f[start..end],
            );
        }
        let mut by_branch = vec![Vec::new(); nodes.len()];
        for (q, &on_branch) in self.quadrature.iter().zip(&log_f) {
            let log_f = if q.node == root {
                self.new_root_log_f(h[root], q.t, leaf)
            } else {
                on_branch
            };
            by_branch[q.node].push(q.log_weight + log_f + leaf_log_z - self.log_norm);
        }
        let per_branch: Vec<f64> = by_branch.iter().map(|v| log_sum_exp(v)).collect();
        (log_sum_exp(&per_branch), per_branch)
    }

    /// `ln f` of a new row (its leaf message `leaf`) making a new root at `t ≤ t_root`: the
    /// old root's message and the new leaf meet there, under the root's prior.
    fn new_root_log_f(&self, t_root: f64, t: f64, leaf: &M::Message) -> f64 {
        new_root_log_f(
            &self.model,
            (&self.up[self.tree.root()], t_root, self.root_log_z),
            t,
            leaf,
        )
    }

    /// The times a new row can join the branch above `v`: `(t_parent, t_v)`, and
    /// `(−∞, t_root)` above the root (where the row makes a new root).
    pub fn branch_span(&self, v: usize) -> (f64, f64) {
        let h = self.tree.heights().expect("checked: the tree has heights");
        let top = self.tree.nodes()[v]
            .parent
            .map_or(f64::NEG_INFINITY, |p| h[p]);
        (top, h[v])
    }

    /// The quadrature's times on the branch above `v` (module docs), in increasing order:
    /// a grid that resolves the join density there, graded towards a leaf.
    pub fn branch_times(&self, v: usize) -> Vec<f64> {
        let mut times: Vec<f64> = match self.branches.iter().find(|b| b.0 == v) {
            Some(&(_, start, end)) => self.times[start..end].to_vec(),
            None => self
                .quadrature
                .iter()
                .filter(|q| q.node == v)
                .map(|q| q.t)
                .collect(),
        };
        times.sort_by(f64::total_cmp);
        times
    }

    /// The log density, in the join time `t`, of the new row (given by its leaf message and
    /// `ln Z_leaf`) joining the branch above `v` at `t`, together with the row:
    /// `ln S(t) + ln E_posterior[p(y′ | value at t)]`, the integrand whose integral over
    /// the branch and sum over the branches is `p(y′ | x, π)` (module docs). `t` must lie
    /// in [`branch_span`](Self::branch_span)`(v)`.
    pub fn log_join_density(&self, v: usize, t: f64, leaf: &M::Message, leaf_log_z: f64) -> f64 {
        let h = self.tree.heights().expect("checked: the tree has heights");
        let log_f = if v == self.tree.root() {
            self.new_root_log_f(h[v], t, leaf)
        } else {
            let (top, bottom) = self.branch_span(v);
            let mut z = [f64::NAN];
            self.model.branch_join_log_z(
                &self.up[v],
                &self.out[v],
                top,
                bottom,
                leaf,
                &[t],
                &mut z,
            );
            z[0]
        };
        log_f - self.hazard.at(t) + leaf_log_z - self.log_norm
    }
}

/// `ln f` of a new row (its leaf message `leaf`) making a new root at `t ≤ t_root` above
/// a root whose message is `up` at `t_root`, with `root_log_z` its `ln Z_−∞`: the old
/// root's message and the new leaf meet at `t`, under the root's prior.
pub(super) fn new_root_log_f<M: MessageModel>(
    model: &M,
    (up, t_root, root_log_z): (&M::Message, f64, f64),
    t: f64,
    leaf: &M::Message,
) -> f64 {
    let old = model.propagate(up, t_root - t);
    let (msg, log_z) = model.combine(&[old, model.propagate(leaf, -t)]);
    log_z + model.root_log_z(&msg) - root_log_z
}

/// `ln Σ exp(v)`; `−∞` for an empty slice.
pub(crate) fn log_sum_exp(v: &[f64]) -> f64 {
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY || max.is_nan() {
        return max;
    }
    max + v.iter().map(|x| (x - max).exp()).sum::<f64>().ln()
}

/// `ln S(t) = −∫_t^0 k(s) ds` of a tree: the log probability that a new lineage has not
/// joined the tree between the leaves' time 0 and `t` (module docs).
#[derive(Debug, Clone)]
pub(super) struct Hazard {
    /// Merge times, most recent first.
    events: Vec<f64>,
    /// `∫_{e_j}^0 k` at each event (`hazard_at[0] = 0`, then one per event).
    hazard_at: Vec<f64>,
    n: usize,
}

impl Hazard {
    fn new(tree: &Tree, heights: &[f64]) -> Self {
        let n = tree.n_leaves();
        Self::of_events(heights[n..].to_vec(), n)
    }

    /// The hazard of a tree of `n` leaves whose merge times are `events`, in any order.
    pub(super) fn of_events(mut events: Vec<f64>, n: usize) -> Self {
        events.sort_by(|a, b| b.total_cmp(a));
        let mut hazard = Self {
            events,
            hazard_at: Vec::new(),
            n,
        };
        hazard.accumulate();
        hazard
    }

    /// The hazard after a new leaf joins the tree at time `t`: one more lineage below `t`
    /// and one more merge at `t` (`O(n)`).
    pub(super) fn insert(&mut self, t: f64) {
        let at = self.events.partition_point(|&e| e > t);
        self.events.insert(at, t);
        self.n += 1;
        self.accumulate();
    }

    /// The hazard after the leaf that joined the tree at time `t` leaves it: the inverse
    /// of [`Hazard::insert`].
    pub(super) fn remove(&mut self, t: f64) {
        if let Some(at) = self.events.iter().position(|&e| e == t) {
            self.events.remove(at);
            self.n -= 1;
            self.accumulate();
        }
    }

    /// `hazard_at` from `events` and `n`.
    fn accumulate(&mut self) {
        self.hazard_at.clear();
        self.hazard_at.push(0.0);
        let mut last = (0.0, 0.0);
        for (j, &e) in self.events.iter().enumerate() {
            let h = last.1 + (self.n - j) as f64 * (last.0 - e);
            self.hazard_at.push(h);
            last = (e, h);
        }
    }

    /// The time `t ≤ 0` where `∫_t^0 k = h` (`h ≥ 0`), the inverse of [`Hazard::at`]; the
    /// most recent such time where `k` is 0 nowhere, so it is unique.
    pub(super) fn time_at(&self, h: f64) -> f64 {
        let i = self.hazard_at.partition_point(|&x| x <= h).max(1) - 1;
        let e = if i == 0 { 0.0 } else { self.events[i - 1] };
        e - (h - self.hazard_at[i]) / (self.n - i) as f64
    }

    /// `∫_t^0 k(s) ds`: `j` merges at times `≥ t`, so `n − j` lineages below the last of
    /// them.
    pub(super) fn at(&self, t: f64) -> f64 {
        let j = self.events.partition_point(|&e| e >= t);
        let prev = if j == 0 { 0.0 } else { self.events[j - 1] };
        self.hazard_at[j] + (self.n - j) as f64 * (prev - t)
    }

    /// The event times strictly between `top` and `bottom`, most recent first: a binary
    /// search, so that cutting every branch costs `O(n log n)` plus the pieces.
    fn inside(&self, top: f64, bottom: f64) -> &[f64] {
        let start = self.events.partition_point(|&e| e >= bottom);
        let end = self.events.partition_point(|&e| e > top).max(start);
        &self.events[start..end]
    }
}

/// The quadrature nodes of the join time over every branch (module docs).
fn quadrature(tree: &Tree, heights: &[f64], hazard_of: &Hazard) -> Vec<Node> {
    let n = tree.n_leaves();
    let root = tree.root();
    let events = &hazard_of.events;
    let hazard = |t: f64| hazard_of.at(t);
    let legendre = GaussLegendre::new(LEGENDRE_ORDER.try_into().expect("order > 0"));
    let mut nodes = Vec::new();
    let add_piece = |node: usize, lo: f64, hi: f64, nodes: &mut Vec<Node>| {
        let half = 0.5 * (hi - lo);
        let mid = 0.5 * (hi + lo);
        for (x, w) in legendre.iter() {
            let t = mid + half * x;
            nodes.push(Node {
                node,
                t,
                log_weight: (w * half).ln() - hazard(t),
            });
        }
    };
    for c in 0..tree.nodes().len() {
        let Some(p) = tree.nodes()[c].parent else {
            continue;
        };
        let (top, bottom) = (heights[p], heights[c]);
        // Event times strictly inside the branch cut it into pieces with one k each.
        let inside = hazard_of.inside(top, bottom).iter().rev().copied();
        let mut cuts: Vec<f64> = std::iter::once(top).chain(inside).collect();
        cuts.push(bottom);
        cuts.sort_by(f64::total_cmp);
        cuts.dedup();
        for pair in cuts.windows(2) {
            let (lo, hi) = (pair[0], pair[1]);
            if hi <= lo {
                continue;
            }
            let k = (n - events.partition_point(|&e| e >= hi)) as f64;
            // Below `hi − MAX_HAZARD_STEP·MAX_SUBPIECES / k`, `S` has fallen by more than
            // `e^128` from `S(hi)`: that part carries nothing in double precision, and
            // spreading the sub-pieces over it would leave `S` unresolved where it matters.
            let lo = lo.max(hi - MAX_HAZARD_STEP * MAX_SUBPIECES as f64 / k);
            let m = ((k * (hi - lo) / MAX_HAZARD_STEP).ceil() as usize).clamp(1, MAX_SUBPIECES);
            let step = (hi - lo) / m as f64;
            for s in 0..m {
                let (a, b) = (lo + step * s as f64, lo + step * (s + 1) as f64);
                if c < n && s + 1 == m && hi == 0.0 {
                    // Graded towards the leaf: [a, a/2], [a/2, a/4], …
                    let mut left = a;
                    for j in 1..=LEAF_LEVELS {
                        let right = a * 0.5f64.powi(j);
                        add_piece(c, left, right, &mut nodes);
                        left = right;
                    }
                    add_piece(c, left, 0.0, &mut nodes);
                } else {
                    add_piece(c, a, b, &mut nodes);
                }
            }
        }
    }
    // Above the root: t = t_root − s, S(t) = S(t_root) e^{−s}.
    let laguerre = GaussLaguerre::new(
        LAGUERRE_ORDER.try_into().expect("order > 0"),
        0.0.try_into().expect("0 > −1"),
    );
    let base = hazard(heights[root]);
    for (s, w) in laguerre.iter() {
        nodes.push(Node {
            node: root,
            t: heights[root] - s,
            log_weight: w.ln() - base,
        });
    }
    nodes
}
