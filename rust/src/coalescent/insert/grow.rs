//! A coalescent tree while rows are added to it: its structure as an arena, its upward
//! messages kept up to date along the changed path, and the join density of a new row
//! scored on every branch in `O(n · (d + log n))` (see the [parent module](super)).
//!
//! # Ids
//! The arena keeps the input tree's node ids; the `i`-th added row makes leaf
//! `n_nodes + 2i` and its join node `n_nodes + 2i + 1` (`n_nodes` the input tree's node
//! count). [`Growing::finish`] renumbers them into a [`Tree`].
//!
//! # Scoring a branch
//! The join density on the branch above `c`, from its parent's time `top` to its own time
//! `bottom`, is `S(t) · f_c(t)` (module docs of [`super::super::predict`]). `S` is evaluated
//! exactly at any `t` from the prefix sums of the piecewise-constant hazard
//! ([`Hazard::at`], a binary search), and `f_c` by [`MessageModel::branch_join_log_z`]
//! (`O(d)` once per branch, then `O(1)` per time for Brownian motion). The branch is cut
//! where `ln S` has fallen by 1, 2, …, [`FINE_HAZARD`] below its value at `bottom`, then
//! every 4 up to [`HAZARD_CAP`] (the inverse of the hazard, [`Hazard::time_at`]), so that
//! `S` varies by a bounded factor over a piece wherever the branch lies; beyond the last
//! cut `S` has fallen by `e^HAZARD_CAP` and is left out. A leaf branch is also cut at
//! ratio-2 levels from its lowest cut towards the leaf ([`LEAF_LEVELS`] of them), where the
//! density of a row near the leaf peaks at `|t|` of the order of its squared distance
//! (the piece that ends at the leaf is left out). Each piece takes [`PIECE_ORDER`]
//! Gauss–Legendre nodes. Above the root the join makes a new root, integrated by
//! Gauss–Laguerre over `t_root − t` as in the predictor. A branch thus has at most
//! `PIECE_ORDER · (LEAF_LEVELS + 14)` nodes whatever the tree, against one piece per
//! merge time it spans in the [`Predictor`](super::super::predict::Predictor)'s quadrature; the
//! branch probabilities agree with a dense integration to about 3 % (the tests).

use std::collections::HashMap;

use gauss_quad::{GaussLaguerre, GaussLegendre};

use super::super::predict::{Hazard, new_root_log_f};
use super::JoinRule;
use crate::error::{Result, RoseTreeError};
use crate::math::log_sum_exp;
use crate::models::messages::{MessageModel, outside_messages};
use crate::tree::{Topology, Tree};

/// Gauss–Legendre nodes per piece of a branch.
const PIECE_ORDER: usize = 3;
/// How far `ln S` falls along a branch before the rest is left out.
const HAZARD_CAP: f64 = 32.0;
/// Pieces over which `ln S` falls by 1 up to this fall, then by 4.
const FINE_HAZARD: f64 = 8.0;
/// Geometric levels of the piece of a leaf branch that ends at the leaf.
const LEAF_LEVELS: i32 = 24;
/// Gauss–Laguerre nodes above the root.
const ROOT_ORDER: usize = 32;
/// Under [`JoinRule::MaxDensity`], the branches whose best grid node is refined.
const REFINED: usize = 4;

/// The join density's summary on one branch.
#[derive(Debug, Clone, Copy)]
pub(super) struct BranchScore {
    /// `ln ∫ S f` over the branch (up to the same constant on every branch).
    pub log_mass: f64,
    /// The largest `ln (S f)` on the branch's grid (same constant).
    pub log_peak: f64,
}

/// A timed binary tree as an arena, with the messages that scoring a new row needs.
pub(super) struct Growing<'m, M: MessageModel> {
    model: &'m M,
    parent: Vec<Option<usize>>,
    children: Vec<Option<[usize; 2]>>,
    time: Vec<f64>,
    /// `U_v`: the message at `v`'s time from the data below it.
    up: Vec<M::Message>,
    /// `O_c`: the message at `c`'s parent's time from everything outside `c`'s subtree
    /// (the root: its prior); valid after [`Growing::downward`].
    out: Vec<M::Message>,
    /// Edges from each node down to its farthest leaf, kept up to date with `up`.
    levels: Vec<usize>,
    root: usize,
    hazard: Hazard,
    /// The arena id of each leaf, in row order.
    leaves: Vec<usize>,
    /// A leaf and its old parent while [`Growing::repair`] has them out of the tree.
    detached: Option<(usize, usize)>,
    /// Gauss–Legendre nodes on `[−1, 1]` and the `ln` of their weights.
    legendre: Vec<(f64, f64)>,
    laguerre: Vec<(f64, f64)>,
}

impl<'m, M: MessageModel> Growing<'m, M> {
    /// The arena of a timed binary tree (checked by the caller) and its upward messages
    /// from `leaves`, the messages of its leaves in id order.
    pub(super) fn new(model: &'m M, tree: &Tree, leaves: Vec<M::Message>) -> Self {
        let h = tree.heights().expect("checked: the tree has heights");
        let nodes = tree.nodes();
        let n = tree.n_leaves();
        let mut up = leaves;
        let mut children = vec![None; n];
        let mut levels = vec![0; n];
        for (v, node) in nodes.iter().enumerate().skip(n) {
            let [a, b] = node.children[..] else {
                unreachable!("checked: the tree is binary")
            };
            up.push(merged(model, (&up[a], h[a]), (&up[b], h[b]), h[v]));
            levels.push(1 + levels[a].max(levels[b]));
            children.push(Some([a, b]));
        }
        let legendre = GaussLegendre::new(PIECE_ORDER.try_into().expect("order > 0"))
            .iter()
            .map(|&(x, w)| (x, w.ln()))
            .collect();
        let laguerre = GaussLaguerre::new(
            ROOT_ORDER.try_into().expect("order > 0"),
            0.0.try_into().expect("0 > −1"),
        )
        .iter()
        .copied()
        .collect();
        Self {
            model,
            parent: nodes.iter().map(|node| node.parent).collect(),
            children,
            time: h.to_vec(),
            out: vec![model.root_message(); nodes.len()],
            up,
            levels,
            root: tree.root(),
            hazard: Hazard::of_events(h[n..].to_vec(), n),
            leaves: (0..n).collect(),
            detached: None,
            legendre,
            laguerre,
        }
    }

    /// The number of nodes in the arena.
    pub(super) fn len(&self) -> usize {
        self.time.len()
    }

    /// The downward pass: `O_c` of every node from the root's prior ([`outside_messages`]
    /// at each node), `O(n · d)`.
    pub(super) fn downward(&mut self) {
        let model = self.model;
        self.out[self.root] = model.root_message();
        let mut stack = vec![self.root];
        while let Some(p) = stack.pop() {
            let Some([a, b]) = self.children[p] else {
                continue;
            };
            let down = match self.parent[p] {
                Some(q) => model.propagate(&self.out[p], self.time[p] - self.time[q]),
                None => self.out[p].clone(),
            };
            let from_a = model.propagate(&self.up[a], self.time[a] - self.time[p]);
            let from_b = model.propagate(&self.up[b], self.time[b] - self.time[p]);
            let [out_a, out_b]: [M::Message; 2] = outside_messages(model, &down, &[from_a, from_b])
                .try_into()
                .unwrap_or_else(|_| unreachable!("two children, two messages"));
            self.out[a] = out_a;
            self.out[b] = out_b;
            stack.extend([a, b]);
        }
    }

    /// `(top, bottom)` of the branch above `c` (`top = −∞` above the root).
    pub(super) fn span(&self, c: usize) -> (f64, f64) {
        let top = self.parent[c].map_or(f64::NEG_INFINITY, |p| self.time[p]);
        (top, self.time[c])
    }

    /// `ln S(t) + ln f_c(t)` of a row (its leaf message) joining the branch above `c` at
    /// `t`, without the row's own `ln Z_leaf` (the same on every branch). Needs
    /// [`Growing::downward`] first.
    pub(super) fn log_density(&self, c: usize, t: f64, leaf: &M::Message) -> f64 {
        let mut log_f = [f64::NAN];
        self.log_f_into(c, leaf, &[t], &mut log_f);
        log_f[0] - self.hazard.at(t)
    }

    /// `ln f_c(t)` of a row joining the branch above `c` at each of `times` (above the
    /// root: making a new root), into `log_f`.
    fn log_f_into(&self, c: usize, leaf: &M::Message, times: &[f64], log_f: &mut [f64]) {
        if c == self.root {
            for (z, &t) in log_f.iter_mut().zip(times) {
                *z = self.new_root_log_f(t, leaf);
            }
        } else {
            let (top, bottom) = self.span(c);
            let (up, out) = (&self.up[c], &self.out[c]);
            self.model
                .branch_join_log_z(up, out, top, bottom, leaf, times, log_f);
        }
    }

    fn new_root_log_f(&self, t: f64, leaf: &M::Message) -> f64 {
        let up = &self.up[self.root];
        let t_root = self.time[self.root];
        new_root_log_f(self.model, (up, t_root, self.model.root_log_z(up)), t, leaf)
    }

    /// The grid of the branch above `c` (module docs): times in increasing order and the
    /// `ln` of their weights for `dt`.
    pub(super) fn grid(&self, c: usize) -> Vec<(f64, f64)> {
        let (mut grid, mut cuts) = (Vec::new(), Vec::new());
        self.grid_into(c, &mut grid, &mut cuts);
        grid.sort_by(|a, b| a.0.total_cmp(&b.0));
        grid
    }

    /// [`Growing::grid`] into `grid`, in no particular order (`cuts` is scratch space).
    fn grid_into(&self, c: usize, grid: &mut Vec<(f64, f64)>, cuts: &mut Vec<f64>) {
        let (top, bottom) = self.span(c);
        grid.clear();
        if c == self.root {
            // S(t_root − s) = S(t_root) e^{−s}: the weight carries e^{+s} back.
            grid.extend(self.laguerre.iter().map(|&(s, w)| (bottom - s, w.ln() + s)));
            return;
        }
        if top >= bottom {
            return;
        }
        let h_bottom = self.hazard.at(bottom);
        let fall = (self.hazard.at(top) - h_bottom).min(HAZARD_CAP);
        let time_at = |s: f64| {
            if s >= fall && fall < HAZARD_CAP {
                top
            } else {
                self.hazard.time_at(h_bottom + s).clamp(top, bottom)
            }
        };
        // Cuts from the bottom up: where ln S has fallen by 1, 2, … 8, then 12, … 32.
        cuts.clear();
        cuts.push(bottom);
        let mut s = 0.0;
        while s < fall {
            s = if s < FINE_HAZARD { s + 1.0 } else { s + 4.0 }.min(fall);
            cuts.push(time_at(s));
        }
        if self.children[c].is_none() {
            // A leaf branch: also ratio-2 levels from the lowest cut towards the leaf,
            // merged in (both run from the leaf up). The piece that would end at the leaf
            // carries nothing.
            let low = *cuts.last().expect("not empty");
            let hazard_cuts = cuts.len();
            let mut levels = (1..=LEAF_LEVELS)
                .rev()
                .map(|j| low * 0.5f64.powi(j))
                .peekable();
            let mut j = 1;
            let mut merged = Vec::with_capacity(hazard_cuts + LEAF_LEVELS as usize);
            while j < hazard_cuts || levels.peek().is_some() {
                match levels.peek() {
                    Some(&l) if j >= hazard_cuts || l >= cuts[j] => {
                        merged.push(l);
                        levels.next();
                    }
                    _ => {
                        merged.push(cuts[j]);
                        j += 1;
                    }
                }
            }
            cuts.clear();
            cuts.extend(merged);
        }
        for pair in cuts.windows(2) {
            let (hi, lo) = (pair[0], pair[1]);
            if lo < hi {
                let (half, mid) = (0.5 * (hi - lo), 0.5 * (hi + lo));
                let log_half = half.ln();
                grid.extend(
                    self.legendre
                        .iter()
                        .map(|&(x, log_w)| (mid + half * x, log_w + log_half)),
                );
            }
        }
    }

    /// The join density of a row (its leaf message) on every branch, indexed by arena id,
    /// `−∞` on branches of zero length. Needs [`Growing::downward`] first.
    pub(super) fn scores(&self, leaf: &M::Message) -> Vec<BranchScore> {
        let (mut grid, mut cuts) = (Vec::new(), Vec::new());
        let (mut times, mut log_f) = (Vec::new(), Vec::new());
        (0..self.len())
            .map(|c| {
                self.grid_into(c, &mut grid, &mut cuts);
                if grid.is_empty() || self.detached.is_some_and(|(u, j)| c == u || c == j) {
                    return BranchScore {
                        log_mass: f64::NEG_INFINITY,
                        log_peak: f64::NEG_INFINITY,
                    };
                }
                times.clear();
                times.extend(grid.iter().map(|g| g.0));
                log_f.clear();
                log_f.resize(grid.len(), f64::NAN);
                self.log_f_into(c, leaf, &times, &mut log_f);
                // ln f + ln S at each node, then ln Σ w S f.
                let mut peak = f64::NEG_INFINITY;
                for (z, &t) in log_f.iter_mut().zip(&times) {
                    *z -= self.hazard.at(t);
                    if *z > peak {
                        peak = *z;
                    }
                }
                let log_mass = if peak.is_finite() {
                    let sum: f64 = log_f
                        .iter()
                        .zip(&grid)
                        .map(|(&z, &(_, log_w))| (z - peak + log_w).exp())
                        .sum();
                    peak + sum.ln()
                } else {
                    peak
                };
                BranchScore {
                    log_mass,
                    log_peak: peak,
                }
            })
            .collect()
    }

    /// Where a row (its leaf message) joins under `rule`: the branch (arena id), the time,
    /// and the branch's share of the row's predictive probability. Needs
    /// [`Growing::downward`] first.
    ///
    /// # Errors
    /// [`RoseTreeError::Numerical`] when the density is zero, infinite or NaN on every
    /// branch; `index` names the row.
    pub(super) fn best_join(
        &self,
        leaf: &M::Message,
        rule: JoinRule,
        index: usize,
    ) -> Result<(usize, f64, f64)> {
        let scores = self.scores(leaf);
        let key = |s: &BranchScore| match rule {
            JoinRule::MaxDensity => s.log_peak,
            JoinRule::BranchMass => s.log_mass,
        };
        // Candidates by the rule's key, best first (the lower id on a tie).
        let mut ranked: Vec<usize> = (0..scores.len())
            .filter(|&c| key(&scores[c]).is_finite())
            .collect();
        ranked.sort_by(|&a, &b| key(&scores[b]).total_cmp(&key(&scores[a])).then(a.cmp(&b)));
        if ranked.is_empty() {
            return Err(RoseTreeError::Numerical(format!(
                "where row {index} joins the tree is undefined in double precision: its \
                 predictive density is 0 or infinite on every branch (data or Lambda too \
                 extreme, or a pinned root)"
            )));
        }
        let refined = match rule {
            JoinRule::MaxDensity => REFINED,
            JoinRule::BranchMass => 1,
        };
        let mut best: Option<(f64, usize, f64)> = None;
        for &c in ranked.iter().take(refined) {
            let density = |t: f64| self.log_density(c, t, leaf);
            let times: Vec<f64> = self.grid(c).iter().map(|g| g.0).collect();
            let t = super::best_time(&density, self.span(c), &times);
            let value = density(t);
            if best.is_none_or(|(b, _, _)| value > b) {
                best = Some((value, c, t));
            }
        }
        let (_, node, time) = best.expect("at least one candidate");
        let masses: Vec<f64> = scores.iter().map(|s| s.log_mass).collect();
        let log_p = scores[node].log_mass - log_sum_exp(&masses);
        Ok((node, time, log_p))
    }

    /// Adds a leaf with message `leaf` on the branch above `c` at time `t` (inside the
    /// branch), and updates the upward messages on the path to the root and the hazard
    /// (`O(depth · d + n)`). Returns the new leaf's and the new node's arena ids.
    pub(super) fn insert(&mut self, c: usize, t: f64, leaf: M::Message) -> (usize, usize) {
        let (l, j) = (self.len(), self.len() + 1);
        self.parent.extend([None, None]);
        self.children.extend([None, None]);
        self.time.extend([0.0, t]);
        self.up.extend([leaf.clone(), leaf]);
        self.levels.extend([0, 0]);
        // The new node's outside is the one `c` had: still valid after the join (for
        // [`Growing::retime`]).
        let outside = self.out[c].clone();
        self.out.extend([self.model.root_message(), outside]);
        self.leaves.push(l);
        self.attach(l, j, c, t);
        (l, j)
    }

    /// The parent of `v` (`None` for the root).
    pub(super) fn parent_of(&self, v: usize) -> Option<usize> {
        self.parent[v]
    }

    /// `ln p(x, π)` as a function of the time `t` of the internal node `v`, up to a
    /// constant: the normaliser of the messages of `v`'s two children and of its outside
    /// (`O_v` brought down from the parent's time to `t`; at the root, the root's prior)
    /// all meeting at `t` (every other normaliser of the tree does not depend on `t`), plus
    /// the prior's change from `v`'s time `t_v`, `−(H(t) − H(t_v)) − max(t − t_v, 0)` with
    /// `H(s) = ∫_s^0 k` of the current hazard (moving the merge deeper adds a lineage over
    /// `(t, t_v)`, moving it up removes one over `(t_v, t)`). Needs `O_v` valid.
    pub(super) fn time_log_joint(&self, v: usize, t: f64) -> f64 {
        let model = self.model;
        let [a, b] = self.children[v].expect("an internal node");
        let outside = match self.parent[v] {
            Some(p) => model.propagate(&self.out[v], t - self.time[p]),
            None => self.out[v].clone(),
        };
        let messages = [
            model.propagate(&self.up[a], self.time[a] - t),
            model.propagate(&self.up[b], self.time[b] - t),
            outside,
        ];
        let t_v = self.time[v];
        model.combine(&messages).1 - (self.hazard.at(t) - self.hazard.at(t_v)) - (t - t_v).max(0.0)
    }

    /// `ln` of the normalisers that depend on how the three subtrees `inner` (two nodes,
    /// merging at `v`'s time) and `other` (merging with them at `p`'s time) are arranged
    /// below `p`, given `p`'s outside message.
    fn arrangement_log_z(&self, p: usize, v: usize, inner: [usize; 2], other: usize) -> f64 {
        let model = self.model;
        let (t_p, t_v) = (self.time[p], self.time[v]);
        let at = |c: usize, t: f64| model.propagate(&self.up[c], self.time[c] - t);
        let (merged_v, z_v) = model.combine(&[at(inner[0], t_v), at(inner[1], t_v)]);
        let outside = match self.parent[p] {
            Some(q) => model.propagate(&self.out[p], t_p - self.time[q]),
            None => self.out[p].clone(),
        };
        let z_p = model
            .combine(&[
                model.propagate(&merged_v, t_v - t_p),
                at(other, t_p),
                outside,
            ])
            .1;
        z_v + z_p
    }

    /// The best rotation at the internal node `p`, with every time held: for a child `v`
    /// of `p` that is internal, one of `v`'s children swapped with `v`'s sibling (where
    /// `v` is no more recent than that sibling, so the tree stays timed); the one that
    /// raises `ln p(x, π)` most is made, if any does, and its gain returned (0 when none
    /// is made). The prior does not change (the same merge times), and the likelihood
    /// only through the normalisers at `v` and `p` given `p`'s outside message, which must
    /// be valid (as for [`Growing::retime`]). `O(d)`.
    pub(super) fn rotate(&mut self, p: usize) -> f64 {
        let Some([x, y]) = self.children[p] else {
            return 0.0;
        };
        let mut best: Option<(f64, usize, usize, usize)> = None;
        for (v, s) in [(x, y), (y, x)] {
            let Some([a, b]) = self.children[v] else {
                continue;
            };
            if self.time[v] > self.time[s] {
                continue;
            }
            // Each arrangement against the current one, both seen from `v`.
            let now = self.arrangement_log_z(p, v, [a, b], s);
            for (keep, swap) in [(b, a), (a, b)] {
                let gain = self.arrangement_log_z(p, v, [keep, s], swap) - now;
                if gain > 1e-9 * (1.0 + now.abs()) && best.is_none_or(|(g, ..)| gain > g) {
                    best = Some((gain, v, keep, swap));
                }
            }
        }
        let Some((gain, v, keep, swap)) = best else {
            return 0.0;
        };
        let sibling = if x == v { y } else { x };
        self.children[v] = Some([keep, sibling]);
        self.parent[sibling] = Some(v);
        self.children[p] = Some([v, swap]);
        self.parent[swap] = Some(p);
        self.update_up_from(Some(v));
        gain
    }

    /// Moves the internal node `v` to the time between its parent's and its children's
    /// that maximises `ln p(x, π)` with the rest of the tree held ([`Growing::time_log_joint`],
    /// Brent's method; at the root, down to as far again below the root as the root is
    /// below its children), when that raises it; returns the gain (0 when it stays).
    /// Needs `O_v` valid: after [`Growing::downward`], the outside of every node on the
    /// path from a join to the root stays valid through the join and through moves of the
    /// nodes below it on that path, so the path can be swept upwards. `O(d)` per
    /// evaluation, `O(n)` to update the hazard when it moves.
    pub(super) fn retime(&mut self, v: usize) -> f64 {
        let [a, b] = self.children[v].expect("an internal node");
        let t_v = self.time[v];
        let hi = self.time[a].min(self.time[b]);
        let lo = match self.parent[v] {
            Some(p) => self.time[p],
            None => t_v - (hi - t_v) - 1.0,
        };
        if hi <= lo {
            return 0.0;
        }
        let objective = |t: f64| self.time_log_joint(v, t);
        let base = objective(t_v);
        let mut best = (base, t_v);
        let found = crate::optimize::brent_max(objective, lo, hi);
        for t in found.into_iter().chain([lo, hi]) {
            let value = objective(t);
            if value > best.0 {
                best = (value, t);
            }
        }
        let (value, t) = best;
        let gain = value - base;
        if gain.is_nan() || gain <= 1e-9 * (1.0 + base.abs()) {
            return 0.0;
        }
        self.hazard.remove(t_v);
        self.hazard.insert(t);
        self.time[v] = t;
        self.update_up_from(Some(v));
        gain
    }

    /// Joins the detached leaf `u` to the branch above `c` at time `t` through the
    /// detached node `j` (its old parent), updating the upward messages on the path to the
    /// root and the hazard.
    fn attach(&mut self, u: usize, j: usize, c: usize, t: f64) {
        let p = self.parent[c];
        self.parent[u] = Some(j);
        self.parent[j] = p;
        self.children[j] = Some([c, u]);
        self.time[j] = t;
        self.parent[c] = Some(j);
        match p {
            Some(p) => self.relink(p, c, j),
            None => self.root = j,
        }
        self.detached = None;
        self.update_up_from(Some(j));
        self.hazard.insert(t);
    }

    /// Takes the leaf `u` out of the tree with its parent, whose other child takes the
    /// parent's place; returns that child and the parent's time (where `u` was joined).
    fn detach(&mut self, u: usize) -> (usize, f64) {
        let j = self.parent[u].expect("a leaf of a tree of two or more leaves");
        let [a, b] = self.children[j].expect("internal");
        let s = if a == u { b } else { a };
        let g = self.parent[j];
        self.parent[s] = g;
        match g {
            Some(g) => self.relink(g, j, s),
            None => self.root = s,
        }
        self.parent[j] = None;
        self.detached = Some((u, j));
        self.update_up_from(g);
        self.hazard.remove(self.time[j]);
        (s, self.time[j])
    }

    /// In `p`'s children, `new` for `old`.
    fn relink(&mut self, p: usize, old: usize, new: usize) {
        let kids = self.children[p].as_mut().expect("a parent has children");
        let slot = kids
            .iter()
            .position(|&k| k == old)
            .expect("old is a child of p");
        kids[slot] = new;
    }

    /// Recomputes the upward messages (and the levels) from `v` to the root.
    fn update_up_from(&mut self, mut above: Option<usize>) {
        while let Some(v) = above {
            let [a, b] = self.children[v].expect("an internal node");
            self.up[v] = merged(
                self.model,
                (&self.up[a], self.time[a]),
                (&self.up[b], self.time[b]),
                self.time[v],
            );
            self.levels[v] = 1 + self.levels[a].max(self.levels[b]);
            above = self.parent[v];
        }
    }

    /// Where in a block of nodes of equal time a join at that time goes: for a join on the
    /// branch above `c` at time `t` that is `c`'s own time (`c` internal) or its parent's,
    /// the node below the join is free to be any child of the block, the connected set of
    /// internal nodes at exactly `t` that `c` or its parent belongs to. Every such place
    /// resolves the same multifurcation at `t` (the block's children and the row), so
    /// `ln p(x, π)` is the same (the likelihood multiplies the same messages at one time
    /// and the prior sees the same merge times). This returns the child `u` of the block
    /// where the tree stays shallowest, the least `depth of u below the block's top +
    /// levels below u` (the first child on a tie), so that rows that join a block one after
    /// another (rows within the noise of each other or of a cluster fitted at one time)
    /// make a balanced subtree rather than a chain. Any other join, `c` itself.
    /// `O(size of the block + depth)`.
    pub(super) fn tie_join(&self, c: usize, t: f64) -> usize {
        let at_t = |v: usize| self.children[v].is_some() && self.time[v] == t;
        let start = if at_t(c) {
            c
        } else {
            match self.parent[c] {
                Some(p) if at_t(p) => p,
                _ => return c,
            }
        };
        let mut top = start;
        while let Some(p) = self.parent[top].filter(|&p| at_t(p)) {
            top = p;
        }
        // The block, parents before children; then, children first, each block node's
        // least levels to the bottom of the tree through a child of the block.
        let mut block = vec![top];
        let mut i = 0;
        while i < block.len() {
            let [a, b] = self.children[block[i]].expect("a block node is internal");
            block.extend([a, b].into_iter().filter(|&k| at_t(k)));
            i += 1;
        }
        let mut least: HashMap<usize, usize> = HashMap::with_capacity(block.len());
        let cost = |least: &HashMap<usize, usize>, k: usize| {
            least.get(&k).copied().unwrap_or(self.levels[k])
        };
        for &v in block.iter().rev() {
            let [a, b] = self.children[v].expect("a block node is internal");
            let value = 1 + cost(&least, a).min(cost(&least, b));
            least.insert(v, value);
        }
        let mut v = top;
        loop {
            let [a, b] = self.children[v].expect("a block node is internal");
            let next = if cost(&least, b) < cost(&least, a) {
                b
            } else {
                a
            };
            if !least.contains_key(&next) {
                return next;
            }
            v = next;
        }
    }

    /// The leaves that [`Growing::repair`] tries after a row joined through node `j`: the
    /// node below the join if it is a leaf, else its children that are leaves.
    pub(super) fn repair_candidates(&self, j: usize) -> Vec<usize> {
        let [c, _] = self.children[j].expect("a join node");
        match self.children[c] {
            None => vec![c],
            Some(kids) => kids
                .into_iter()
                .filter(|&k| self.children[k].is_none())
                .collect(),
        }
    }

    /// Re-places the leaf `u`: takes it out, finds its best join under `rule` in the tree
    /// without it, and moves it there if that raises `ln p(x, π)` (the join density is the
    /// ratio of `p(x, π)` with and without the leaf, so the gain is the difference of the
    /// densities at the new and the old join); otherwise puts it back. Returns whether it
    /// moved. With `balance`, the move goes where [`Growing::tie_join`] puts it.
    /// `O(n · (d + log n))`, as an insertion.
    ///
    /// # Errors
    /// As [`Growing::best_join`].
    pub(super) fn repair(
        &mut self,
        u: usize,
        rule: JoinRule,
        balance: bool,
        index: usize,
    ) -> Result<bool> {
        let leaf = self.up[u].clone();
        let j = self.parent[u].expect("a leaf of a tree of two or more leaves");
        let (s, t_old) = self.detach(u);
        self.downward();
        let old = self.log_density(s, t_old, &leaf);
        let (c, t, _) = self.best_join(&leaf, rule, index)?;
        let new = self.log_density(c, t, &leaf);
        if new > old + 1e-9 * (1.0 + old.abs()) {
            let c = if balance { self.tie_join(c, t) } else { c };
            self.attach(u, j, c, t);
            return Ok(true);
        }
        self.attach(u, j, s, t_old);
        Ok(false)
    }

    /// `Hazard::time_at(Hazard::at(t))` (for tests).
    #[cfg(test)]
    pub(super) fn time_at_hazard_of(&self, t: f64) -> f64 {
        self.hazard.time_at(self.hazard.at(t))
    }

    /// The upward and outside messages of arena node `v` (for tests).
    #[cfg(test)]
    pub(super) fn messages(&self, v: usize) -> (&M::Message, &M::Message) {
        (&self.up[v], &self.out[v])
    }

    /// The arena as a [`Tree`]: leaves in row order, internal nodes in order of their
    /// times, most recent first (children before parents on equal times), and each arena
    /// id's id in it.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] never for an arena built by this module.
    pub(super) fn finish(&self) -> Result<(Tree, Vec<usize>)> {
        let m = self.len();
        // Edges down to the farthest leaf, children first (a pre-order reversed): a
        // parent's is larger than its children's, which orders equal times.
        let mut pre = Vec::with_capacity(m);
        let mut stack = vec![self.root];
        while let Some(v) = stack.pop() {
            pre.push(v);
            stack.extend(self.children[v].into_iter().flatten());
        }
        let mut levels = vec![0usize; m];
        for &v in pre.iter().rev() {
            if let Some([a, b]) = self.children[v] {
                levels[v] = 1 + levels[a].max(levels[b]);
            }
        }
        let mut internal: Vec<usize> = (0..m).filter(|&v| self.children[v].is_some()).collect();
        internal.sort_by(|&a, &b| {
            self.time[b]
                .total_cmp(&self.time[a])
                .then(levels[a].cmp(&levels[b]))
                .then(a.cmp(&b))
        });
        let mut id = vec![usize::MAX; m];
        for (i, &v) in self.leaves.iter().chain(&internal).enumerate() {
            id[v] = i;
        }
        let kids = internal
            .iter()
            .map(|&v| {
                let [a, b] = self.children[v].expect("internal");
                vec![id[a], id[b]]
            })
            .collect();
        let heights = self
            .leaves
            .iter()
            .chain(&internal)
            .map(|&v| self.time[v])
            .collect();
        let tree = Tree::new(&Topology::new(self.leaves.len(), kids)?, Some(heights))?;
        Ok((tree, id))
    }
}

/// The message at time `t` of a node whose children's messages are `a` and `b` at their
/// times.
fn merged<M: MessageModel>(
    model: &M,
    (a, t_a): (&M::Message, f64),
    (b, t_b): (&M::Message, f64),
    t: f64,
) -> M::Message {
    model
        .combine(&[model.propagate(a, t_a - t), model.propagate(b, t_b - t)])
        .0
}
