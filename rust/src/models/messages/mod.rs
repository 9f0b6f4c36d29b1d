//! Message models: clusters summarised by messages propagated along a timed tree.
//!
//! The second model seam, beside [`ClusterModel`](super::ClusterModel). Kingman's coalescent
//! (Teh, Daumé & Roy 2007, §3–4) and the Pitman–Yor diffusion tree (Knowles & Ghahramani,
//! eq 10) put a Markov process on the branches of a tree and observe it at the leaves. The
//! latent values at the internal nodes are integrated out by one upward pass of belief
//! propagation (Teh et al. eqs 4–6):
//!
//! - a leaf sends the message `M(y) ∝ p(x_leaf | y)` ([`leaf_message`]);
//! - along a branch of length `δ` the message becomes `∫ k_δ(y, y′) M(y′) dy′`
//!   ([`propagate`]);
//! - at a node the incoming (propagated) messages are multiplied and normalised,
//!   `M_i(y) = Z_i⁻¹ Π_b M_b(y)`, and the normaliser `Z_i` is the local likelihood of the
//!   merge ([`combine`]; eq 4);
//! - at the root, `Z_−∞ = ∫ q(z) k(z, y) M_root(y) dz dy` ([`root_log_z`]; eq 5);
//! - `p(x | π) = Z_−∞ · Π_i Z_i · Π_leaves Z_leaf` (eq 6), which
//!   [`tree_log_likelihood`] evaluates for a whole timed tree.
//!
//! Messages are always stored normalised, so their entries stay of order one however deep
//! the tree, and every normaliser is returned as a logarithm: that running log scale is what
//! keeps chains of thousands of merges from underflowing.
//!
//! # Time and branch lengths
//! A message model only sees durations `δ ≥ 0`. Trees are the crate's [`Tree`] with
//! heights: a branch's length is `|h_parent − h_child|`. For Kingman's coalescent the leaves
//! are at time 0 and the merge times are negative, growing more negative towards the root
//! (Teh et al. §2), so a branch has length `t_child − t_parent`. For the Pitman–Yor diffusion
//! tree the root is at time 0, the leaves at time 1 and the branch points in between; its
//! root node is the first branch point, and the branch from the origin to it is the
//! `root_branch` argument of [`tree_log_likelihood`].
//!
//! # The merge of a pair as a function of the branch lengths
//! The agglomerative algorithms of Teh et al. §4 score a pair of subtrees `l, r` that would
//! merge after branch lengths `δ_l, δ_r`: `ln Z(δ_l, δ_r)` ([`merge_log_z`]). Both models
//! here are reversible with respect to their root measure `q` (the flat measure for Brownian
//! motion, the equilibrium for the mutation process), so `Z` depends on the two lengths only
//! through their sum `L = δ_l + δ_r`: the evidence that the two messages come from one point
//! after a path of length `L` between them. [`pair`] precomputes what does not depend on
//! `L` once per pair, so that SMC-PostPost's integral over the duration (Teh et al. eq 10)
//! or a Newton iteration costs `O(d)` or less per evaluation; [`optimal_duration`] maximises
//! Greedy-Rate1's objective `−rate · δ + ln Z(L₀ + 2δ)` over `δ ≥ 0` (eq 12 with the
//! coalescent rate replaced by `rate`).
//!
//! The models are [`BrownianDiffusion`] (Teh et al. eqs 11–13; Knowles & Ghahramani
//! eq 10), [`MaskedBrownian`] (the same process for data with missing entries) and
//! [`MultinomialMutation`] (Teh et al. eqs 14–15).
//!
//! # Two-way passing, rate-free messages and probit sites
//! Both families use this layer beyond the upward pass:
//! - [`TwoWay`]: up, outside and down messages of every node for any model, and the
//!   posterior at a node or on a branch ([`posterior_between`]); the coalescent's and the
//!   diffusion tree's predictive densities are built on it.
//! - [`UnitMessage`]: isotropic Brownian messages in units of the rate `σ²`, each carrying
//!   the `σ²`-free parts of the normalisers below it ([`SplitLogZ`]: their number,
//!   `Σ ln(v₁ + v₂)` and `Σ ‖μ₁ − μ₂‖²/(v₁ + v₂)`), so that a likelihood at a new `σ²` costs
//!   `O(1)`; with the outside messages of a branch point's children in precision form
//!   ([`Outside`]), a node's law given its parent ([`Bridge`]) and a message joining the
//!   posterior on a branch at `O(1)` per point ([`BranchJoin`]). The diffusion tree's MCMC
//!   and EM keep these messages in their caches.
//! - [`Precision`] and [`ScalarTree`]: one-dimensional messages in precision form on a tree,
//!   and expectation propagation with probit sites as Gaussian pseudo-observations
//!   ([`site_update`], [`site_log_normaliser`]).
//!
//! [`leaf_message`]: MessageModel::leaf_message
//! [`propagate`]: MessageModel::propagate
//! [`combine`]: MessageModel::combine
//! [`root_log_z`]: MessageModel::root_log_z
//! [`merge_log_z`]: MessageModel::merge_log_z
//! [`pair`]: MessageModel::pair
//! [`optimal_duration`]: MessageModel::optimal_duration

use ndarray::{ArrayView1, ArrayView2};

use crate::error::{Result, RoseTreeError};
use crate::tree::Tree;

mod brownian;
mod masked;
mod mutation;
pub mod probit;
pub mod two_way;
pub mod unit;

pub use brownian::{BrownianDiffusion, GaussianMessage, GaussianPair, Root};
pub use masked::{MaskedBrownian, MaskedMessage, MaskedPair};
pub use mutation::{MultinomialMutation, MutationMessage, MutationPair};
pub use probit::{
    EpColumn, Precision, ScalarTree, SiteUpdate, ln_cdf_and_ratio, site_log_normaliser, site_update,
};
pub use two_way::{TwoWay, outside_messages, posterior_between};
pub use unit::{BranchJoin, Bridge, JoinPoint, Outside, SplitLogZ, UnitMessage};

/// A Markov process on the branches of a tree, integrated out by upward message passing
/// (Teh, Daumé & Roy 2007, eqs 4–7; see the [module docs](self)).
///
/// # Examples
/// Two points in one dimension under Brownian motion with `Λ = 1`, merging one time unit
/// before the present: `Z` is the density of their difference under `N(0, 2Λ)` (eq 11).
/// ```
/// use ndarray::array;
/// use rosetree::models::messages::{BrownianDiffusion, MessageModel};
///
/// let model = BrownianDiffusion::isotropic(1.0, 1)?;
/// let (a, _) = model.leaf_message(array![0.5].view(), 0)?;
/// let (b, _) = model.leaf_message(array![-0.5].view(), 1)?;
/// let (_, log_z) = model.combine(&[model.propagate(&a, 1.0), model.propagate(&b, 1.0)]);
/// let expected = -0.5 * (2.0 * std::f64::consts::PI * 2.0).ln() - 1.0 / 4.0;
/// assert!((log_z - expected).abs() < 1e-14);
/// assert_eq!(log_z, model.merge_log_z(&a, &b, 1.0, 1.0));
///
/// // Greedy-Rate1's optimal duration (eq 12 with rate 1): ((4 + 1)^½ − 1) / 4.
/// let delta = model.optimal_duration(&model.pair(&a, &b), 0.0, 1.0)?;
/// assert!((delta - (5f64.sqrt() - 1.0) / 4.0).abs() < 1e-15);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub trait MessageModel: Sync {
    /// A normalised message `M(y)` from a node to its parent.
    type Message: Clone + Send + Sync;

    /// What [`pair_log_z`](MessageModel::pair_log_z) needs of two messages, computed once
    /// per pair by [`pair`](MessageModel::pair).
    type Pair: Clone + Send + Sync;

    /// The number of columns a data row must have.
    fn n_features(&self) -> usize;

    /// The message of the data row `row` (row `index` of the data, for errors) and its log
    /// normaliser: `p(x_row | y) = exp(log_z) · M(y)`. NaN marks a missing entry where the
    /// model supports it (the uninformative message for that feature).
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] for a row of the wrong length,
    /// [`RoseTreeError::InvalidData`] naming the row and column of a value outside the
    /// model's support.
    fn leaf_message(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<(Self::Message, f64)>;

    /// The messages of every row of `x`, with their log normalisers.
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] for a wrong number of columns, and whatever
    /// [`leaf_message`](MessageModel::leaf_message) reports for a row.
    fn leaf_messages(&self, x: ArrayView2<'_, f64>) -> Result<Vec<(Self::Message, f64)>> {
        super::map_rows(x, self.n_features(), |row, i| self.leaf_message(row, i))
    }

    /// The message after running the process for a time `duration ≥ 0` along a branch,
    /// `M′(y) = ∫ k_duration(y, y′) M(y′) dy′`; it stays normalised. A negative or NaN
    /// `duration` is a caller error (the result is then meaningless but no panic occurs).
    fn propagate(&self, msg: &Self::Message, duration: f64) -> Self::Message;

    /// The product of the messages arriving at a node (each already propagated to the
    /// node's time), normalised, and the log of its normaliser `ln Z` (Teh et al. eq 4).
    /// Any number of messages may arrive (rose-tree nodes have more than two children);
    /// an empty product is the uninformative message with `ln Z = 0`. Where the messages
    /// contradict each other outright, `ln Z = −∞` and the returned message is a placeholder
    /// that keeps later sums at `−∞` rather than NaN.
    fn combine(&self, msgs: &[Self::Message]) -> (Self::Message, f64);

    /// The root's prior as a message, the start of a downward pass: with it,
    /// `combine(&[root_message(), M_root])` is the posterior at the root node. Messages are
    /// relative to the model's reference measure (the flat measure for Brownian motion, the
    /// equilibrium for mutation), so a prior equal to that measure is the uninformative
    /// message, which is the default.
    fn root_message(&self) -> Self::Message {
        self.combine(&[]).0
    }

    /// `ln Z_−∞`, the log normaliser at the root (Teh et al. eq 5): the message at the root
    /// node integrated against the root's prior.
    fn root_log_z(&self, msg: &Self::Message) -> f64;

    /// `ln Z` of a new leaf joining the branch above a node, at each time `t` of `times`:
    /// `combine(&[posterior, propagate(leaf, −t)]).1`, where the posterior at `t` is
    /// `combine(&[propagate(up, bottom − t), propagate(out, t − top)]).0`, `up` being the
    /// node's message at its own time `bottom` from the data below it and `out` the message
    /// at its parent's time `top` from everything else (`top ≤ t ≤ bottom ≤ 0`). The result
    /// for `times[i]` goes to `log_z[i]` (the two have the same length).
    ///
    /// A new row's predictive density (`coalescent::Predictor`) asks this for every branch,
    /// at many times each, so a model may do the work that does not depend on `t` once per
    /// call; the default evaluates the definition at every time.
    #[allow(clippy::too_many_arguments)]
    fn branch_join_log_z(
        &self,
        up: &Self::Message,
        out: &Self::Message,
        top: f64,
        bottom: f64,
        leaf: &Self::Message,
        times: &[f64],
        log_z: &mut [f64],
    ) {
        for (&t, z) in times.iter().zip(log_z) {
            *z = branch_join_at(self, up, out, (top, bottom), leaf, t);
        }
    }

    /// Precomputes the parts of the merge normaliser of `left` and `right` that do not
    /// depend on the branch lengths.
    fn pair(&self, left: &Self::Message, right: &Self::Message) -> Self::Pair;

    /// `ln Z` of merging the pair after a total branch length `length = δ_l + δ_r ≥ 0`
    /// between the two messages (see the [module docs](self) for why the sum suffices).
    fn pair_log_z(&self, pair: &Self::Pair, length: f64) -> f64;

    /// `ln Z` of merging `left` and `right` at a node that lies `delta_left` and
    /// `delta_right` above them: `combine(&[propagate(left, δ_l), propagate(right, δ_r)]).1`,
    /// computed through [`pair_log_z`](MessageModel::pair_log_z).
    fn merge_log_z(
        &self,
        left: &Self::Message,
        right: &Self::Message,
        delta_left: f64,
        delta_right: f64,
    ) -> f64 {
        self.pair_log_z(&self.pair(left, right), delta_left + delta_right)
    }

    /// The duration `δ ≥ 0` that maximises `−rate · δ + ln Z(base_length + 2δ)` for the
    /// pair: the most probable merge time under an exponential waiting time of rate `rate`
    /// when both branches grow by `δ` from lengths summing to `base_length` (Teh et al.
    /// §4.2; Greedy-Rate1 uses `rate = 1`). Clamped at `δ = 0` when the maximum lies at
    /// negative durations.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] for `rate` not finite and `> 0`, or
    /// `base_length` not finite and `≥ 0`.
    fn optimal_duration(&self, pair: &Self::Pair, base_length: f64, rate: f64) -> Result<f64>;

    /// The same maximiser without the bound `δ ≥ 0`: a negative duration where
    /// [`optimal_duration`](MessageModel::optimal_duration) is clamped at 0 says how much
    /// shorter the pair's branches would like to be (down to `−(v_l + v_r + base_length)/2`,
    /// where their variance vanishes). Greedy-Rate1 ranks pairs that all merge at once by
    /// it, the closest first, rather than by their ids. It must equal
    /// [`optimal_duration`](MessageModel::optimal_duration) where that is positive, and be
    /// at most 0 where that is 0: Greedy-Rate1 takes both from this one call. The default is
    /// [`optimal_duration`](MessageModel::optimal_duration) itself, for models without
    /// negative lengths (the mutation model: its rows merge at once only when equal).
    ///
    /// # Errors
    /// As [`optimal_duration`](MessageModel::optimal_duration).
    fn unbounded_duration(&self, pair: &Self::Pair, base_length: f64, rate: f64) -> Result<f64> {
        self.optimal_duration(pair, base_length, rate)
    }

    /// Whether [`optimal_duration`](MessageModel::optimal_duration)`(&pair(left, right),
    /// base_length, rate)` exceeds `h ≥ 0` by a margin far beyond the rounding of
    /// computing it, decided more cheaply than computing it: `true` only where it does;
    /// `false` (the default) says nothing. Greedy-Rate1 uses it to leave pairs that merge too late to
    /// matter unscored.
    fn duration_exceeds(
        &self,
        left: &Self::Message,
        right: &Self::Message,
        base_length: f64,
        rate: f64,
        h: f64,
    ) -> bool {
        let _ = (left, right, base_length, rate, h);
        false
    }
}

/// Messages as plain numbers, so that a subtree's root message can travel between machines
/// (`rosetree.dask`) and come back as the same message.
pub trait MessageCodec: MessageModel {
    /// The message's numbers: Brownian, the whitened mean then the variance factor;
    /// masked Brownian, the whitened means then the per-feature variance factors;
    /// mutation, every feature's block of entries.
    fn encode_message(&self, msg: &Self::Message) -> Vec<f64>;

    /// The message of [`encode_message`](MessageCodec::encode_message)'s numbers.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `message` for the wrong number of values, or
    /// values no message has (a NaN, a negative variance or entry).
    fn decode_message(&self, values: &[f64]) -> Result<Self::Message>;
}

/// Checks the length of an encoded message.
pub(crate) fn check_message_len(values: &[f64], want: usize) -> Result<()> {
    if values.len() == want {
        return Ok(());
    }
    Err(RoseTreeError::param(
        "message",
        format!("needs {want} values, got {}", values.len()),
    ))
}

/// [`MessageModel::branch_join_log_z`] at one time `t` of the branch `(top, bottom)`, by its
/// definition.
pub(crate) fn branch_join_at<M: MessageModel + ?Sized>(
    model: &M,
    up: &M::Message,
    out: &M::Message,
    (top, bottom): (f64, f64),
    leaf: &M::Message,
    t: f64,
) -> f64 {
    let post = posterior_between(model, up, out, bottom - t, t - top);
    model.combine(&[post, model.propagate(leaf, -t)]).1
}

/// Checks that a data row has the model's `d` values.
///
/// # Errors
/// [`RoseTreeError::ShapeMismatch`] naming row `index` otherwise.
pub(crate) fn check_row(row: ArrayView1<'_, f64>, d: usize, index: usize) -> Result<()> {
    if row.len() == d {
        return Ok(());
    }
    Err(RoseTreeError::ShapeMismatch {
        what: format!("row {index}"),
        expected: format!("{d} values"),
        found: format!("{} values", row.len()),
    })
}

/// Checks the arguments of [`MessageModel::optimal_duration`].
#[inline]
pub(crate) fn check_duration_args(base_length: f64, rate: f64) -> Result<()> {
    if !(rate.is_finite() && rate > 0.0) {
        return Err(RoseTreeError::param(
            "rate",
            format!("must be finite and > 0, got {rate}"),
        ));
    }
    if !(base_length.is_finite() && base_length >= 0.0) {
        return Err(RoseTreeError::param(
            "base_length",
            format!("must be finite and ≥ 0, got {base_length}"),
        ));
    }
    Ok(())
}

/// The root of a function `f` that is positive at `lo` and negative at `hi`, by Newton
/// steps kept inside the shrinking bracket (bisection when a step would leave it).
/// `f` returns the value and the derivative.
pub(crate) fn bracketed_root(f: impl Fn(f64) -> (f64, f64), mut lo: f64, mut hi: f64) -> f64 {
    let mut x = 0.5 * (lo + hi);
    for _ in 0..400 {
        let (fx, dfx) = f(x);
        if fx > 0.0 {
            lo = x;
        } else if fx < 0.0 {
            hi = x;
        } else {
            return x;
        }
        let newton = x - fx / dfx;
        let next = if newton.is_finite() && newton > lo && newton < hi {
            newton
        } else {
            0.5 * (lo + hi)
        };
        if (next - x).abs() <= 2.0 * f64::EPSILON * x.abs() || hi - lo <= f64::EPSILON * hi {
            return next;
        }
        x = next;
    }
    x
}

/// The best local maximum on `[0, hi]` of an objective that may have several, given its
/// slope and curvature `slope(δ) = (g′, g″)` and its value `objective(δ)`, where `g′ < 0`
/// beyond `hi`: `g′` is tabulated on 0 and 121 geometrically spaced durations from `hi`
/// down to `10⁻¹²·hi`; every sign change from `+` to `−` is refined by
/// [`bracketed_root`], and the best of these and `δ = 0` is returned (ties to the shorter
/// duration). A maximum narrower than the grid spacing (a factor 1.26) can be missed.
pub(crate) fn best_stationary_point(
    slope: impl Fn(f64) -> (f64, f64),
    objective: impl Fn(f64) -> f64,
    hi: f64,
) -> f64 {
    const STEPS: i32 = 120;
    let ratio = 1e-12_f64.powf(1.0 / f64::from(STEPS));
    let mut grid: Vec<f64> = (0..=STEPS).map(|j| hi * ratio.powi(j)).collect();
    grid.push(0.0);
    grid.reverse();
    let slopes: Vec<f64> = grid.iter().map(|&x| slope(x).0).collect();
    let mut best = (objective(0.0), 0.0);
    for j in 1..grid.len() {
        if slopes[j - 1] > 0.0 && slopes[j] <= 0.0 {
            let x = if slopes[j] == 0.0 {
                grid[j]
            } else {
                bracketed_root(&slope, grid[j - 1], grid[j])
            };
            let value = objective(x);
            if value > best.0 || best.0.is_nan() {
                best = (value, x);
            }
        }
    }
    best.1
}

/// `ln p(x | π, times)`, the log likelihood of the data `x` given a timed tree, by one
/// upward pass of message passing (Teh et al. eq 6; Knowles & Ghahramani eq 10 for
/// Brownian motion).
///
/// Row `i` of `x` is leaf `i` of `tree`, which must have heights; a branch has length
/// `|h_parent − h_child|` (see the [module docs](self) for the coalescent's and the
/// diffusion tree's time conventions). The message at the root node is propagated along a
/// further branch of length `root_branch` before [`MessageModel::root_log_z`]: 0 for the
/// coalescent, whose root prior is on the root node itself, and the root node's divergence
/// time for the Pitman–Yor diffusion tree, whose process starts at the origin at time 0
/// ([`BrownianDiffusion`] with [`Root::Gaussian`] `{ s0: 0.0 }`).
///
/// The coalescent's `ln p(x, π)` (eq 7) adds the prior on the tree to this value.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] if the tree has no heights or its number of leaves is not
/// the number of rows, [`RoseTreeError::InvalidParameter`] for a negative or non-finite
/// `root_branch`, and whatever [`MessageModel::leaf_messages`] reports.
pub fn tree_log_likelihood<M: MessageModel>(
    model: &M,
    x: ArrayView2<'_, f64>,
    tree: &Tree,
    root_branch: f64,
) -> Result<f64> {
    let leaves = model.leaf_messages(x)?;
    tree_log_likelihood_from_leaves(model, &leaves, tree, root_branch)
}

/// [`tree_log_likelihood`] from leaf messages already computed (one per leaf, with its log
/// normaliser, as [`MessageModel::leaf_messages`] returns them).
///
/// # Errors
/// As [`tree_log_likelihood`].
pub fn tree_log_likelihood_from_leaves<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: &Tree,
    root_branch: f64,
) -> Result<f64> {
    check_leaf_count(leaves.len(), tree)?;
    if !(root_branch.is_finite() && root_branch >= 0.0) {
        return Err(RoseTreeError::param(
            "root_branch",
            format!("must be finite and ≥ 0, got {root_branch}"),
        ));
    }
    let mut log_p: f64 = leaves.iter().map(|(_, z)| z).sum();
    let root = upward_pass(model, leaves, tree, |_, _, log_z| log_p += log_z)?;
    Ok(log_p + model.root_log_z(&model.propagate(&root, root_branch)))
}

/// The log evidence of every subtree on its own, `E(v) = ln p(x_v | π_v)`: the data below
/// node `v` under the subtree rooted at `v`, with the root prior placed on `v` itself
/// (Teh et al. eq 6 applied to the subtree; no branch above `v`). Indexed by node id; for a
/// leaf it is the leaf's own `ln Z_leaf + ln Z_−∞`, and at the root it is
/// [`tree_log_likelihood_from_leaves`] with `root_branch = 0`.
///
/// `E(v) − E(l) − E(r)` for a node `v` with children `l, r` is the log likelihood ratio of
/// one tree over the data below `v` against two independent trees over its children's data
/// (Teh et al. footnote 1 and §5, where it decides the flat clusters): for a stationary
/// process whose root draws from the equilibrium it is the merge's own `ln Z_v`; with a
/// Gaussian root it includes the root integrals of the three subtrees.
///
/// # Errors
/// As [`tree_log_likelihood_from_leaves`].
pub fn subtree_log_evidence_from_leaves<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: &Tree,
) -> Result<Vec<f64>> {
    check_leaf_count(leaves.len(), tree)?;
    let nodes = tree.nodes();
    // Below each node: the sum of the leaves' and merges' `ln Z`.
    let mut below = vec![0.0; nodes.len()];
    let mut evidence = vec![0.0; nodes.len()];
    for (v, (msg, log_z)) in leaves.iter().enumerate() {
        below[v] = *log_z;
        evidence[v] = log_z + model.root_log_z(msg);
    }
    upward_pass(model, leaves, tree, |v, msg, log_z| {
        below[v] = log_z + nodes[v].children.iter().map(|&c| below[c]).sum::<f64>();
        evidence[v] = below[v] + model.root_log_z(msg);
    })?;
    Ok(evidence)
}

/// The message of the root of a timed tree over `leaves` and the sum of `ln Z` over its
/// leaves and merges: eq 6 without the root term `ln Z_−∞`, and what the nodes above the
/// tree see of it when it is a subtree of a larger tree.
///
/// # Errors
/// As [`tree_log_likelihood_from_leaves`].
pub fn upward_root<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: &Tree,
) -> Result<(M::Message, f64)> {
    check_leaf_count(leaves.len(), tree)?;
    let mut log_z: f64 = leaves.iter().map(|(_, z)| z).sum();
    let root = upward_pass(model, leaves, tree, |_, _, z| log_z += z)?;
    Ok((root, log_z))
}

fn check_leaf_count(n_leaves: usize, tree: &Tree) -> Result<()> {
    if n_leaves != tree.n_leaves() {
        return Err(RoseTreeError::InvalidTree(format!(
            "the tree has {} leaves but {} rows (leaf messages) were given",
            tree.n_leaves(),
            n_leaves
        )));
    }
    Ok(())
}

/// One upward pass of belief propagation over a timed tree: calls `visit(v, M_v, ln Z_v)`
/// for every internal node in id order (children before parents, see [`Tree`], so no
/// recursion is needed and only the messages still waiting for their parent are kept) and
/// returns the root's message.
fn upward_pass<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: &Tree,
    mut visit: impl FnMut(usize, &M::Message, f64),
) -> Result<M::Message> {
    let heights = tree
        .heights()
        .ok_or_else(|| RoseTreeError::InvalidTree("the tree has no heights".into()))?;
    let nodes = tree.nodes();
    let mut waiting: Vec<Option<M::Message>> = Vec::with_capacity(nodes.len());
    waiting.extend(leaves.iter().map(|(m, _)| Some(m.clone())));
    waiting.resize(nodes.len(), None);
    let mut incoming = Vec::new();
    for (id, node) in nodes.iter().enumerate().skip(tree.n_leaves()) {
        incoming.clear();
        for &c in &node.children {
            // `Tree` guarantees each child comes before its parent and has one parent.
            let msg = waiting[c].take().ok_or_else(|| {
                RoseTreeError::InvalidTree(format!("node {c} has no message for node {id}"))
            })?;
            incoming.push(model.propagate(&msg, (heights[id] - heights[c]).abs()));
        }
        let (msg, log_z) = model.combine(&incoming);
        visit(id, &msg, log_z);
        waiting[id] = Some(msg);
    }
    waiting[tree.root()]
        .take()
        .ok_or_else(|| RoseTreeError::InvalidTree("the root has no message".into()))
}

#[cfg(test)]
pub(crate) mod tests;
