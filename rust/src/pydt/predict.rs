//! The predictive density of a new point under one fitted diffusion tree (Knowles &
//! Ghahramani 2011, §5.3), as a normalised mixture of isotropic Gaussians ([`Predictor`]),
//! or for any message model of [`crate::models::messages`] as the same mixture over where
//! the point diverges with each component's density from two-way message passing
//! ([`MessagePredictor`]).
//!
//! # Where the new point diverges
//! By exchangeability the new point is the last to follow the generative process on the
//! tree of the `n` rows (see the [module docs](super)). Writing `τ = −ln(1 − t)`, so that
//! `A(t) = cτ`, it reaches the top of the branch into node `u` (`m_u` leaves below) with
//! probability `P_u`: `P_root = 1`, and for a child `k` of a branch point `b`,
//!
//! ```text
//! P_k = P_b · exp(−c w_{m_b} (τ_b − τ_top(b))) · (m_k − β) / (m_b + α),
//! ```
//!
//! surviving the branch into `b` and then taking `k`'s branch. On the branch into `u` it
//! diverges at `τ` with density `c w_{m_u} exp(−c w_{m_u}(τ − τ_top))`, in all with
//! probability `p_u = 1 − exp(−c w_{m_u}(τ_u − τ_top))` (`p_u = 1` into a leaf, where
//! `τ_u = ∞`); at a branch point `u` with `K` branches it opens a new one with probability
//! `P_u · exp(−c w_{m_u}(τ_u − τ_top)) · (α + Kβ)/(m_u + α)`. These probabilities sum to
//! one over the tree.
//!
//! # Its location
//! Given where it diverges, at time `t` on the branch above `u` (or at `u` itself), the
//! location there is the posterior of the Brownian path given the data: the product of the
//! message from the data below `u`, propagated up to `t`, and the message from everything
//! outside `u`'s subtree, propagated down to `t`. Both come from one upward and one
//! downward pass of [`crate::models::messages`] (Brownian motion with `Λ = I`, so variances
//! are in units of `σ²`; the origin is the point mass at 0 at `t = 0`). From there the point
//! runs alone to `t = 1`, adding `σ²(1 − t) I`.
//!
//! # The divergence time on a branch
//! The law of `τ` on a branch is a truncated exponential; it is represented by `n_points`
//! times at the midpoints of equal-probability bins (the quantiles `(i + ½)/n_points`), each
//! with probability `P_u p_u / n_points`: a Gaussian mixture, normalised for any
//! `n_points`. Times near `t = 1` are carried as `r = 1 − t = e^{−τ}`, so that a point that
//! diverges just before a leaf keeps a positive variance `σ² r` (a `t` that rounds to 1
//! would give a point mass); `r` is floored at the smallest normal double.
//!
//! # Cost
//! Building the mixture is `O(N D)` (two passes, then `n_points + 1` components per node);
//! the density of a new row is `O(N D)` (one term per component).

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

use super::{PydtParams, check_diffusion_tree, check_sigma2};
use crate::error::{Result, RoseTreeError};
use crate::math::log_sum_exp;
use crate::models::messages::{BrownianDiffusion, GaussianMessage, MessageModel, Root, TwoWay};
use crate::tree::Tree;

/// The predictive mixture of one tree (see the [module docs](self)).
///
/// # Examples
/// Two points diverging at `t = ½` under Neal's Dirichlet diffusion tree (`c = 1`): the
/// mixture's weights sum to one, and the density of a new point is finite.
/// ```
/// use ndarray::array;
/// use rosetree::pydt::{PydtParams, predict::Predictor};
/// use rosetree::tree::{Topology, Tree};
///
/// let tree = Tree::new(&Topology::new(2, vec![vec![0, 1]])?, Some(vec![1.0, 1.0, 0.5]))?;
/// let x = array![[0.3], [-0.2]];
/// let p = Predictor::new(x.view(), &tree, &PydtParams::ddt(1.0)?, 1.0, 3)?;
/// let total: f64 = p.log_weights().iter().map(|w| w.exp()).sum();
/// assert!((total - 1.0).abs() < 1e-12);
/// assert!(p.log_density(array![[0.0]].view())?[0].is_finite());
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Predictor {
    log_weights: Vec<f64>,
    means: Array2<f64>,
    variances: Vec<f64>,
    /// Where each component's point diverges: the node `u` and the time `t` (below `u`'s
    /// time: on the branch into `u`; equal to it: a new branch at `u`).
    positions: Vec<(usize, f64)>,
    /// `ln w_k − (D/2) ln(2π v_k)`: each component's log weight and normaliser.
    log_norms: Vec<f64>,
}

/// Where a new point diverges on a tree (see the [module docs](self)), whatever its
/// likelihood: per node, `τ` and `r = 1 − t` (`τ = ∞`, `r = 0` at the leaves), `r` at the
/// top of its branch and `ln P` of reaching that top.
#[derive(Debug, Clone)]
struct Divergence {
    tau: Vec<f64>,
    r: Vec<f64>,
    r_top: Vec<f64>,
    ln_reach: Vec<f64>,
    /// `c w_m` of the branch into each node.
    rate: Vec<f64>,
    /// The times of the nodes, their numbers of leaves and branches.
    h: Vec<f64>,
    n_leaves: Vec<usize>,
    n_children: Vec<usize>,
    n: usize,
    alpha: f64,
    beta: f64,
}

impl Divergence {
    /// The divergence probabilities of `tree`, whose heights are `h`, under `params`.
    fn new(tree: &Tree, h: &[f64], params: &PydtParams) -> Self {
        let n = tree.n_leaves();
        let nodes = tree.nodes();
        let (alpha, beta, c) = (params.alpha(), params.beta(), params.c());
        // τ = −ln(1 − t), infinite at the leaves; r = 1 − t = e^{−τ}, 0 at the leaves.
        let tau: Vec<f64> = h
            .iter()
            .enumerate()
            .map(|(v, &t)| if v < n { f64::INFINITY } else { -(-t).ln_1p() })
            .collect();
        let r: Vec<f64> = tau.iter().map(|t| (-t).exp()).collect();
        let rate: Vec<f64> = nodes
            .iter()
            .map(|node| c * params.ln_rate_factor(node.n_leaves).exp())
            .collect();
        // `r` at the parent and the probability of reaching the top of the branch.
        let mut r_top = vec![1.0_f64; nodes.len()];
        let mut ln_reach = vec![0.0; nodes.len()];
        for b in (n..nodes.len()).rev() {
            let survive = -rate[b] * (tau[b] + r_top[b].ln());
            let reach_b = ln_reach[b];
            for &k in &nodes[b].children {
                r_top[k] = r[b];
                ln_reach[k] = reach_b + survive + (nodes[k].n_leaves as f64 - beta).ln()
                    - (nodes[b].n_leaves as f64 + alpha).ln();
            }
        }
        Self {
            tau,
            r,
            r_top,
            ln_reach,
            rate,
            h: h.to_vec(),
            n_leaves: nodes.iter().map(|node| node.n_leaves).collect(),
            n_children: nodes.iter().map(|node| node.children.len()).collect(),
            n,
            alpha,
            beta,
        }
    }

    /// Calls `f(ln w, r, t, at_node)` for each component of node `u`: the `n_points`
    /// quantiles of the divergence time on the branch into `u` (`at_node` false), then, at a
    /// branch point that may open a new branch, the new branch at `u` (`at_node` true, at
    /// `u`'s own `r` and `t`).
    fn components(&self, u: usize, n_points: usize, mut f: impl FnMut(f64, f64, f64, bool)) {
        let (r_top, ln_reach, rate_u) = (self.r_top[u], self.ln_reach[u], self.rate[u]);
        let tau_top = -r_top.ln();
        let p_div = -(-rate_u * (self.tau[u] - tau_top)).exp_m1();
        if p_div > 0.0 {
            let ln_share = (p_div / n_points as f64).ln();
            for i in 0..n_points {
                let q = (i as f64 + 0.5) / n_points as f64;
                let tau_t = tau_top - (-q * p_div).ln_1p() / rate_u;
                let r_t = (-tau_t).exp().max(f64::MIN_POSITIVE);
                f(ln_reach + ln_share, r_t, -(-tau_t).exp_m1(), false);
            }
        }
        if u >= self.n {
            let new = self.alpha + self.n_children[u] as f64 * self.beta;
            if new > 0.0 {
                let survive = -rate_u * (self.tau[u] - tau_top);
                let log_w =
                    ln_reach + survive + new.ln() - (self.n_leaves[u] as f64 + self.alpha).ln();
                f(log_w, self.r[u], self.h[u], true);
            }
        }
    }
}

impl Predictor {
    /// The predictive mixture of the tree `tree` over the rows of `x` (row `i` is leaf `i`)
    /// with divergence parameters `params` and Brownian variance `sigma2` per unit time,
    /// each branch's divergence time represented by `n_points` times.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `sigma2` (finite and `> 0`) or `n_points`
    /// (at least 1); [`RoseTreeError::InvalidTree`] if `tree` is not a diffusion tree over
    /// the rows of `x`; [`RoseTreeError::InvalidData`] for a non-finite entry of `x`.
    pub fn new(
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        params: &PydtParams,
        sigma2: f64,
        n_points: usize,
    ) -> Result<Self> {
        check_sigma2(sigma2)?;
        let h = check_inputs(x, tree, n_points)?;
        let d = x.ncols();
        let model = BrownianDiffusion::isotropic(1.0, d)?.with_root(Root::Gaussian { s0: 0.0 })?;
        let nodes = tree.nodes();
        let div = Divergence::new(tree, h, params);
        let r = &div.r;
        // A branch's length is the difference of the r's at its ends; rounding must not
        // make it negative.
        let along = |msg: &GaussianMessage, length: f64| model.propagate(msg, length.max(0.0));

        // Up and outside messages; from the origin, the point mass at 0, along the root
        // node's branch.
        let root = tree.root();
        let leaves = model
            .leaf_messages(x)?
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        let root_down = along(&model.root_message(), 1.0 - r[root]);
        let TwoWay { up, out, .. } = TwoWay::new(&model, tree, leaves, root_down, |k, b| {
            (r[b] - r[k]).max(0.0)
        });

        // The components: n_points on the branch into every node, one at every branch
        // point that may open a new branch.
        let mut log_weights = Vec::new();
        let mut means: Vec<f64> = Vec::new();
        let mut variances = Vec::new();
        let mut positions = Vec::new();
        for u in 0..nodes.len() {
            let r_top = div.r_top[u];
            div.components(u, n_points, |log_w, r_t, t, at_node| {
                let msg = if at_node {
                    let from_above = along(&out[u], r_top - r[u]);
                    model.combine(&[up[u].clone(), from_above]).0
                } else {
                    let below = along(&up[u], r_t - r[u]);
                    let from_above = along(&out[u], r_top - r_t);
                    model.combine(&[below, from_above]).0
                };
                log_weights.push(log_w);
                means.extend(model.mean(&msg));
                variances.push(sigma2 * (msg.variance() + r_t));
                positions.push((u, t));
            });
        }
        let k = log_weights.len();
        let ln_2pi = (2.0 * std::f64::consts::PI).ln();
        let log_norms = log_weights
            .iter()
            .zip(&variances)
            .map(|(w, v)| w - 0.5 * d as f64 * (ln_2pi + v.ln()))
            .collect();
        Ok(Self {
            log_weights,
            means: Array2::from_shape_vec((k, d), means)
                .expect("one mean of d values per component"),
            variances,
            positions,
            log_norms,
        })
    }

    /// `ln` of each component's weight; they sum to one.
    pub fn log_weights(&self) -> &[f64] {
        &self.log_weights
    }

    /// Each component's mean (one row per component).
    pub fn means(&self) -> ArrayView2<'_, f64> {
        self.means.view()
    }

    /// Each component's variance per feature (its covariance is this times `I`).
    pub fn variances(&self) -> &[f64] {
        &self.variances
    }

    /// Where each component's point diverges: the node `u` and the time `t`; on the branch
    /// into `u` when `t` is below `u`'s time, a new branch at `u` when it equals it.
    pub fn positions(&self) -> &[(usize, f64)] {
        &self.positions
    }

    /// `ln p(y | X, T)` of each row `y` of `rows`: `ln Σ_k w_k N(y; μ_k, v_k I)`.
    ///
    /// # Errors
    /// As [`log_density_row`](Self::log_density_row), for the first row at fault.
    pub fn log_density(&self, rows: ArrayView2<'_, f64>) -> Result<Array1<f64>> {
        each_row(rows, |y, i| self.log_density_row(y, i))
    }

    /// `ln p(y | X, T)` of one new row `y` (`index` names it in errors): `O(N D)`.
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] for a wrong number of columns;
    /// [`RoseTreeError::InvalidData`] naming the row and column of a non-finite entry.
    pub fn log_density_row(&self, y: ArrayView1<'_, f64>, index: usize) -> Result<f64> {
        let d = self.means.ncols();
        if y.len() != d {
            return Err(RoseTreeError::ShapeMismatch {
                what: "X".into(),
                expected: format!("{d} columns"),
                found: format!("{} columns", y.len()),
            });
        }
        if let Some(j) = y.iter().position(|v| !v.is_finite()) {
            return Err(RoseTreeError::data(
                index,
                Some(j),
                format!("is not finite ({})", y[j]),
            ));
        }
        let terms: Vec<f64> = self
            .means
            .rows()
            .into_iter()
            .zip(self.log_norms.iter().zip(&self.variances))
            .map(|(mean, (ln_norm, v))| {
                // Differences formed directly: no |y|² − 2y·μ + |μ|², which cancels far
                // from the origin.
                let sq: f64 = y.iter().zip(mean).map(|(a, b)| (a - b) * (a - b)).sum();
                ln_norm - 0.5 * sq / v
            })
            .collect();
        Ok(log_sum_exp(&terms))
    }
}

/// The predictive density of a new row under one tree for any message model of
/// [`crate::models::messages`] (the likelihood of a [`Messages`](super::mcmc::Messages)
/// chain): the same mixture over where the new point diverges as [`Predictor`]'s (see the
/// [module docs](self)), each component's density
/// [`branch_join_log_z`](MessageModel::branch_join_log_z) of the new row's message joining
/// the posterior on the branch, from one upward and one downward pass of two-way message
/// passing ([`TwoWay`]; the model's root is the law at the origin, see
/// [`Messages`](super::mcmc::Messages)). Building it is `O(N)` messages; a row costs
/// `O(N · n_points)` joins.
///
/// The message layer's times run to 0 at the data: a point at `t` of the diffusion tree is
/// at `t − 1 = −r` there.
///
/// # Examples
/// Two points under isotropic Brownian motion: the same density as [`Predictor`].
/// ```
/// use ndarray::array;
/// use rosetree::models::messages::{BrownianDiffusion, Root};
/// use rosetree::pydt::{PydtParams, predict::{MessagePredictor, Predictor}};
/// use rosetree::tree::{Topology, Tree};
///
/// let tree = Tree::new(&Topology::new(2, vec![vec![0, 1]])?, Some(vec![1.0, 1.0, 0.5]))?;
/// let (x, params) = (array![[0.3], [-0.2]], PydtParams::ddt(1.0)?);
/// let model = BrownianDiffusion::isotropic(0.7, 1)?.with_root(Root::Gaussian { s0: 0.0 })?;
/// let generic = MessagePredictor::new(model, x.view(), &tree, &params, 3)?;
/// let gaussian = Predictor::new(x.view(), &tree, &params, 0.7, 3)?;
/// let y = array![[0.1]];
/// let (a, b) = (generic.log_density(y.view())?[0], gaussian.log_density(y.view())?[0]);
/// assert!((a - b).abs() < 1e-12);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MessagePredictor<M: MessageModel> {
    model: M,
    branches: Vec<Branch<M::Message>>,
}

/// The components on the branch into one node (and at it).
#[derive(Debug, Clone)]
struct Branch<T> {
    /// The messages from below at the node and from outside at its parent.
    up: T,
    out: T,
    /// The times of the parent and of the node, `−r`.
    top: f64,
    bottom: f64,
    /// The components' times (`−r`) and log weights.
    times: Vec<f64>,
    log_weights: Vec<f64>,
}

impl<M: MessageModel> MessagePredictor<M> {
    /// The predictive mixture of the tree `tree` over the rows of `x` (row `i` is leaf `i`)
    /// under `model` with divergence parameters `params`, each branch's divergence time
    /// represented by `n_points` times.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `n_points` (at least 1);
    /// [`RoseTreeError::InvalidTree`] if `tree` is not a diffusion tree over the rows of
    /// `x`; whatever the model's [`leaf_messages`](MessageModel::leaf_messages) reports of
    /// `x`.
    pub fn new(
        model: M,
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        params: &PydtParams,
        n_points: usize,
    ) -> Result<Self> {
        let h = check_inputs(x, tree, n_points)?;
        let div = Divergence::new(tree, h, params);
        let r = &div.r;
        let leaves = model
            .leaf_messages(x)?
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        let root_down = model.propagate(&model.root_message(), (1.0 - r[tree.root()]).max(0.0));
        let TwoWay { up, out, .. } = TwoWay::new(&model, tree, leaves, root_down, |k, b| {
            (r[b] - r[k]).max(0.0)
        });
        let branches = up
            .into_iter()
            .zip(out)
            .enumerate()
            .map(|(u, (up, out))| {
                let (top, bottom) = (-div.r_top[u], -r[u]);
                let (mut times, mut log_weights) = (Vec::new(), Vec::new());
                div.components(u, n_points, |log_w, r_t, _, _| {
                    // Rounding must not put a time outside its branch.
                    times.push((-r_t).clamp(top, bottom));
                    log_weights.push(log_w);
                });
                Branch {
                    up,
                    out,
                    top,
                    bottom,
                    times,
                    log_weights,
                }
            })
            .collect();
        Ok(Self { model, branches })
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// `ln p(y | X, T)` of each row `y` of `rows`.
    ///
    /// # Errors
    /// As [`log_density_row`](Self::log_density_row), for the first row at fault.
    pub fn log_density(&self, rows: ArrayView2<'_, f64>) -> Result<Array1<f64>> {
        each_row(rows, |y, i| self.log_density_row(y, i))
    }

    /// `ln p(y | X, T)` of one new row `y` (`index` names it in errors).
    ///
    /// # Errors
    /// Whatever the model's [`leaf_message`](MessageModel::leaf_message) reports of `y`.
    pub fn log_density_row(&self, y: ArrayView1<'_, f64>, index: usize) -> Result<f64> {
        let (leaf, leaf_log_z) = self.model.leaf_message(y, index)?;
        let mut terms = Vec::new();
        let mut joins = Vec::new();
        for b in &self.branches {
            joins.clear();
            joins.resize(b.times.len(), 0.0);
            self.model
                .branch_join_log_z(&b.up, &b.out, b.top, b.bottom, &leaf, &b.times, &mut joins);
            terms.extend(b.log_weights.iter().zip(&joins).map(|(w, z)| w + z));
        }
        Ok(leaf_log_z + log_sum_exp(&terms))
    }
}

/// Checks a predictor's inputs: `n_points ≥ 1`, a diffusion tree (its times returned),
/// whose leaves are the rows of `x`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `n_points`; [`RoseTreeError::InvalidTree`]
/// from [`check_diffusion_tree`] or for leaves that are not the rows of `x`.
fn check_inputs<'t>(x: ArrayView2<'_, f64>, tree: &'t Tree, n_points: usize) -> Result<&'t [f64]> {
    if n_points == 0 {
        return Err(RoseTreeError::param(
            "n_points",
            "must be at least 1, got 0",
        ));
    }
    let h = check_diffusion_tree(tree)?;
    if x.nrows() != tree.n_leaves() {
        return Err(RoseTreeError::InvalidTree(format!(
            "the tree has {} leaves but X has {} rows",
            tree.n_leaves(),
            x.nrows()
        )));
    }
    Ok(h)
}

/// `f(y, i)` of each row `y` of `rows` (row `i`), the first error in row order.
fn each_row(
    rows: ArrayView2<'_, f64>,
    f: impl Fn(ArrayView1<'_, f64>, usize) -> Result<f64>,
) -> Result<Array1<f64>> {
    rows.rows()
        .into_iter()
        .enumerate()
        .map(|(i, y)| f(y, i))
        .collect::<Result<Vec<f64>>>()
        .map(Array1::from)
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::pydt::sample;

    /// `∫ p(y | X, T) dy` over a grid wide enough for every component (Simpson's rule).
    fn integral_1d(p: &Predictor) -> f64 {
        let (lo, hi, steps) = (-40.0, 40.0, 160_000);
        let h = (hi - lo) / steps as f64;
        let ys = Array2::from_shape_fn((steps + 1, 1), |(i, _)| lo + i as f64 * h);
        let dens = p.log_density(ys.view()).unwrap().mapv(f64::exp);
        let inner: f64 = (1..steps)
            .map(|i| if i % 2 == 1 { 4.0 } else { 2.0 } * dens[i])
            .sum();
        h / 3.0 * (dens[0] + inner + dens[steps])
    }

    #[test]
    fn the_density_of_a_new_point_integrates_to_one() {
        // (alpha, beta, c): the Pitman–Yor tree with multifurcations, Neal's DDT, a
        // negative alpha.
        for (seed, (a, b, c)) in [
            (1, (1.0, 0.3, 1.0)),
            (2, (0.0, 0.0, 1.5)),
            (3, (-0.2, 0.4, 0.7)),
        ] {
            let params = PydtParams::new(a, b, c).unwrap();
            let (x, tree) = sample(9, 1, &params, 0.8, seed).unwrap();
            for n_points in [1, 3] {
                let p = Predictor::new(x.view(), &tree, &params, 0.8, n_points).unwrap();
                let total: f64 = p.log_weights().iter().map(|w| w.exp()).sum();
                assert!((total - 1.0).abs() < 1e-12, "weights sum to {total}");
                let integral = integral_1d(&p);
                assert!((integral - 1.0).abs() < 1e-8, "seed {seed}: ∫ = {integral}");
            }
        }
    }

    #[test]
    fn a_point_diverging_into_a_leaf_has_the_conditional_of_the_two_leaf_tree() {
        // Two leaves diverging at t_b. A new point that diverges from leaf 0's branch at t
        // (t_b < t < 1) has covariances k = (t, t_b) with the two leaves, whose covariance
        // matrix is C = [[1, t_b], [t_b, 1]] (per feature, in units of σ²): its location
        // is the Gaussian conditional, mean kᵀC⁻¹x and variance σ²(1 − kᵀC⁻¹k).
        let (tb, sigma2) = (0.4, 1.3);
        let tree = Tree::new(
            &crate::tree::Topology::new(2, vec![vec![0, 1]]).unwrap(),
            Some(vec![1.0, 1.0, tb]),
        )
        .unwrap();
        let x = ndarray::array![[0.7, -1.0], [-0.3, 2.0]];
        let p = Predictor::new(x.view(), &tree, &PydtParams::ddt(1.0).unwrap(), sigma2, 4).unwrap();
        let cov = nalgebra::Matrix2::new(1.0, tb, tb, 1.0);
        let mut checked = 0;
        for (i, &(u, t)) in p.positions().iter().enumerate() {
            if u != 0 {
                continue;
            }
            let k = nalgebra::Vector2::new(t, tb);
            let w = cov.lu().solve(&k).unwrap();
            for j in 0..2 {
                let want = w[0] * x[[0, j]] + w[1] * x[[1, j]];
                assert!((p.means()[[i, j]] - want).abs() < 1e-12);
            }
            let want_var = sigma2 * (1.0 - k.dot(&w));
            assert!((p.variances()[i] - want_var).abs() < 1e-12 * sigma2);
            checked += 1;
        }
        assert_eq!(checked, 4);
    }

    #[test]
    fn bad_settings_and_rows_are_named() {
        let params = PydtParams::ddt(1.0).unwrap();
        let (x, tree) = sample(5, 2, &params, 1.0, 4).unwrap();
        let named = |r: Result<Predictor>, want: &str| match r {
            Err(RoseTreeError::InvalidParameter { name, .. }) => assert_eq!(name, want),
            other => panic!("{want}: {other:?}"),
        };
        named(Predictor::new(x.view(), &tree, &params, 1.0, 0), "n_points");
        named(
            Predictor::new(x.view(), &tree, &params, f64::NAN, 3),
            "sigma2",
        );
        let p = Predictor::new(x.view(), &tree, &params, 1.0, 3).unwrap();
        let rows = ndarray::array![[0.0, 0.0], [0.0, f64::INFINITY]];
        assert!(matches!(
            p.log_density(rows.view()),
            Err(RoseTreeError::InvalidData {
                row: 1,
                column: Some(1),
                ..
            })
        ));
        assert!(matches!(
            p.log_density(Array2::zeros((1, 3)).view()),
            Err(RoseTreeError::ShapeMismatch { .. })
        ));
    }
}
