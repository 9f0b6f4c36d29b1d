//! The Pitman–Yor diffusion tree (Knowles & Ghahramani 2011): a prior on rooted trees with
//! any number of branches per node and divergence times in `(0, 1)`, and Brownian motion of
//! the data along them. Neal's Dirichlet diffusion tree is its special case `α = β = 0`.
//!
//! This module has the foundation: the exact log density of a tree's structure and times
//! ([`log_prior`]), the Gaussian likelihood with the internal locations integrated out
//! ([`log_likelihood`]), and the generative process ([`sampler`]); the MCMC sampler
//! ([`mcmc`]) and the probit likelihood for binary data ([`probit`]) build on it, and
//! [`summary`] reduces a chain's samples to one tree.
//!
//! # The tree
//! Time runs forward from the origin (`t = 0`, location 0) to the data (`t = 1`). A tree is
//! the crate's [`Tree`] with heights: the leaves (data rows) at height exactly 1, every
//! internal node (a branch point) at its divergence time `t ∈ (0, 1)`, each parent strictly
//! earlier than its children ([`check_diffusion_tree`]). The origin is not a node: the
//! tree's root node is the first branch point, at `t_root`, and the branch from the origin
//! to it, which every point follows, is implicit. One data point is a tree of one leaf.
//!
//! # The generative process (§1)
//! With `a(t) = c/(1 − t)` and `A(t) = ∫₀ᵗ a = −c ln(1 − t)`, point 1 runs from the origin to
//! `t = 1`. Point `i > 1` follows the paths of the earlier points:
//! - on a branch that `m` earlier points followed it diverges in `[t, t + dt]` with
//!   probability `a(t) w_m dt`, `w_m = Γ(m − β)/Γ(m + 1 + α)` (eq 1), so it stays on the
//!   branch from `s` to `t` with probability `exp(−[A(t) − A(s)] w_m)` (eq 4);
//! - at a branch point that `m` earlier points passed, with `K` branches followed by
//!   `n_1, …, n_K` of them, it takes branch `l` with probability `(n_l − β)/(m + α)` and
//!   starts a new branch with probability `(α + Kβ)/(m + α)` (eqs 2–3);
//! - after diverging it runs on alone to `t = 1`.
//!
//! # The probability of a tree (§3)
//! Take an internal node `b` at time `t_b` with `K` branches leading to `n_1, …, n_K` leaves,
//! `m = Σ n_l`, below a node (or the origin) `a` at `t_a`.
//!
//! *Times* (eqs 8–9). The branch `[a, b]` is followed by `m` points. The first of them made
//! it; the `j`-th (`j = 2, …, m`) had `j − 1` predecessors on it and did not diverge between
//! `t_a` and `t_b`: `Π_{j=2}^{m} exp(−[A(t_b) − A(t_a)] w_{j−1}) = exp(−[A(t_b) − A(t_a)]
//! H_{m−1})` with `H_n = Σ_{i=1}^{n} w_i`. A branch into a leaf is followed by one point
//! (`H_0 = 0`) and contributes nothing.
//!
//! *Structure* (eq 7 and the erratum of `CONVENTIONS.md`). Let point `i` be the one whose
//! divergence created `b`, on a branch followed by `i − 1 ≥ 1` earlier points (those now
//! below branch 1 of `b`): a density `a(t_b) w_{i−1} = a(t_b) Γ(i−1−β)/Γ(i+α)`. Every later
//! point through `b` (the `(j−1)`-th to arrive, `j = i+1, …, m`) divides by `j − 1 + α` and
//! multiplies by `c − β` when it joins a branch already taken `c` times, or by `α + (k−1)β`
//! when it opens branch `k = 3, …, K`. Branch 1 is joined from `c = i − 1` to `n_1 − 1`
//! times, branch `l ≥ 2` (opened by one point) from `c = 1` to `n_l − 1`:
//!
//! ```text
//!   a(t_b) Γ(i−1−β)/Γ(i+α) · Π_{k=3}^{K}[α + (k−1)β]
//!     · [Γ(n_1−β)/Γ(i−1−β)] · Π_{l≥2} [Γ(n_l−β)/Γ(1−β)] · Γ(i+α)/Γ(m+α)
//!   = a(t_b) · Π_{k=3}^{K}[α + (k−1)β] · Π_l Γ(n_l − β) / ( Γ(m + α) Γ(1 − β)^{K−1} ),
//! ```
//!
//! which no longer depends on `i` or on the order of the points (Lemma 1). The printed eq 7
//! and appendix A lose the `Γ(1 − β)^{K−1}` (they read `Π_{c=1}^{n−1}(c − β)` as `Γ(n − β)`);
//! without it the density of two points does not integrate to one when `β ≠ 0`.
//!
//! *Per node* (eq 12). Collecting the time factors at `b` (its own branch and the branches
//! below it start or end there), with `a(t) = c/(1 − t)`:
//!
//! ```text
//!   a(t_b) exp(A(t_b)[Σ_l H_{n_l−1} − H_{m−1}]) = c (1 − t_b)^{c J_b − 1},
//!   J_b = H_{m−1} − Σ_l H_{n_l−1},
//! ```
//!
//! so `ln p(T, t) = Σ_b [ln S_b + ln c + (c J_b − 1) ln(1 − t_b)]` over the internal nodes,
//! `S_b` the structure factor above ([`PydtParams::ln_structure`], [`harmonic_gap`]).
//! Integrated over its time, the tree of two points has probability
//! `w_1 ∫₀¹ c (1 − t)^{c w_1 − 1} dt = 1`.
//!
//! The sums `H_n` are accumulated from positive terms `w_i` (each from a ratio of gamma
//! functions, [`PydtParams::harmonic`]); the structure factor is a sum of logs of gamma
//! ratios, never a difference of large `ln Γ` values.
//!
//! # The Dirichlet diffusion tree
//! With `α = β = 0`, `w_m = 1/m`, `H_n` is the harmonic number, no third branch is ever
//! opened (`α + 2β = 0`), and the structure factor is `(n_1 − 1)!(n_2 − 1)!/(m − 1)!`: Neal's
//! (2001) density `a(t_b) (n_1−1)!(n_2−1)!/(m−1)! · exp(−[A(t_b) − A(t_a)] H_{m−1})`.
//!
//! # The Gaussian likelihood (eq 10)
//! Locations follow Brownian motion with covariance `σ²I` per unit time from the origin, so
//! each branch contributes `N(x_b; x_a, σ²(t_b − t_a) I)` and the data are Gaussian once the
//! internal locations are integrated out: in each dimension `N(0, σ²C)` with `C_ij` the time
//! of the lowest common ancestor of `i ≠ j` and `C_ii = 1`. [`log_likelihood`] integrates
//! them out by the message passing of [`crate::models::messages`] (root pinned at the origin,
//! the implicit branch of length `t_root` as the root branch), in `O(N D)`.
//!
//! # Examples
//! ```
//! use ndarray::array;
//! use rosetree::pydt::{self, PydtParams};
//! use rosetree::tree::{Topology, Tree};
//!
//! // Two points diverging at t = 0.5: density c w₁ (1 − t)^{c w₁ − 1} with w₁ = Γ(1−β)/Γ(2+α).
//! let tree = Tree::new(&Topology::new(2, vec![vec![0, 1]])?, Some(vec![1.0, 1.0, 0.5]))?;
//! let ddt = PydtParams::ddt(1.0)?; // w₁ = 1: density 1
//! assert!(pydt::log_prior(&tree, &ddt)?.abs() < 1e-15);
//!
//! // Each coordinate is N(0, σ²C) with C = [[1, 0.5], [0.5, 1]].
//! let x = array![[0.3], [-0.2]];
//! let ll = pydt::log_likelihood(x.view(), &tree, 1.0)?;
//! let (det, quad) = (0.75, (0.09 + 0.04 + 0.06) / 0.75); // xᵀC⁻¹x with C⁻¹ = [[1, −.5], [−.5, 1]]/.75
//! let want = -(2.0 * std::f64::consts::PI).ln() - 0.5 * f64::ln(det) - 0.5 * quad;
//! assert!((ll - want).abs() < 1e-12);
//! # Ok::<(), rosetree::RoseTreeError>(())
//! ```

pub mod divergence;
pub mod em;
mod fitted;
pub mod mcmc;
pub mod predict;
pub mod probit;
pub mod sampler;
pub(crate) mod slice;
pub mod summary;

pub use divergence::{PydtParams, harmonic_gap};
pub use fitted::Fitted;
pub use sampler::{sample, sample_locations, sample_tree};

use ndarray::ArrayView2;

use crate::error::{Result, RoseTreeError};
use crate::models::messages::{BrownianDiffusion, Root, tree_log_likelihood};
use crate::tree::Tree;

/// Checks that `tree` is a diffusion tree (see the [module docs](self)) and returns its
/// heights: leaves at exactly 1, internal nodes at finite times in `(0, 1)`, every parent
/// strictly earlier than each of its children.
///
/// # Errors
/// [`RoseTreeError::InvalidTree`] naming the first node at fault.
pub fn check_diffusion_tree(tree: &Tree) -> Result<&[f64]> {
    let bad = |why: String| Err(RoseTreeError::InvalidTree(why));
    let Some(h) = tree.heights() else {
        return bad("a diffusion tree needs divergence times (heights)".into());
    };
    // `Tree` guarantees that all leaves share one height.
    if h[0] != 1.0 {
        return bad(format!(
            "the leaves of a diffusion tree are at t = 1, got {}",
            h[0]
        ));
    }
    for (v, node) in tree.nodes().iter().enumerate().skip(tree.n_leaves()) {
        if !(h[v] > 0.0 && h[v] < 1.0) {
            return bad(format!(
                "divergence times must lie in (0, 1), node {v} is at {}",
                h[v]
            ));
        }
        if let Some(&c) = node.children.iter().find(|&&c| h[c] <= h[v]) {
            return bad(format!(
                "node {v} (t = {}) must diverge strictly before its child {c} (t = {})",
                h[v], h[c]
            ));
        }
    }
    Ok(h)
}

/// `ln p(T, t)`, the log density of a tree's structure and divergence times under the
/// Pitman–Yor diffusion tree with `a(t) = c/(1 − t)` (eqs 7 with the erratum, 9, 12; derived
/// in the [module docs](self)): `Σ_b [ln S_b + ln c + (c J_b − 1) ln(1 − t_b)]` over the
/// internal nodes, for any number of branches per node. It is a density in the internal
/// nodes' times and a probability over the labelled structures, the leaves being the data
/// rows in order. `−∞` for a structure the parameters forbid (a third branch with
/// `α + 2β = 0`). A tree of one leaf has `ln p = 0`.
///
/// # Errors
/// As [`check_diffusion_tree`].
///
/// # Examples
/// The three-way split of three points at `t` has density
/// `c (α + 2β) Γ(1 − β)/Γ(3 + α) · (1 − t)^{c H₂ − 1}`.
/// ```
/// use rosetree::math::ln_gamma;
/// use rosetree::pydt::{self, PydtParams};
/// use rosetree::tree::{Topology, Tree};
///
/// let (a, b, c, t): (f64, f64, f64, f64) = (0.5, 0.2, 1.5, 0.3);
/// let star = Tree::new(&Topology::new(3, vec![vec![0, 1, 2]])?, Some(vec![1.0, 1.0, 1.0, t]))?;
/// let w = |m: f64| (ln_gamma(m - b) - ln_gamma(m + 1.0 + a)).exp();
/// let h2 = w(1.0) + w(2.0);
/// let want = c.ln() + (a + 2.0 * b).ln() + ln_gamma(1.0 - b) - ln_gamma(3.0 + a)
///     + (c * h2 - 1.0) * (1.0 - t).ln();
/// let got = pydt::log_prior(&star, &PydtParams::new(a, b, c)?)?;
/// assert!((got - want).abs() < 1e-13);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn log_prior(tree: &Tree, params: &PydtParams) -> Result<f64> {
    let t = check_diffusion_tree(tree)?;
    let n = tree.n_leaves();
    let h = params.harmonic(n - 1);
    let ln_c = params.c().ln();
    let mut counts = Vec::new();
    let mut log_p = 0.0;
    for (v, node) in tree.nodes().iter().enumerate().skip(n) {
        counts.clear();
        counts.extend(node.children.iter().map(|&k| tree.node(k).n_leaves));
        let j = harmonic_gap(&h, &counts);
        // ln(1 − t) by ln_1p: exact near t = 0, where 1 − t would round.
        log_p += params.ln_structure(&counts) + ln_c + (params.c() * j - 1.0) * (-t[v]).ln_1p();
    }
    Ok(log_p)
}

/// `ln p(X | T, t)`, the Gaussian likelihood of eq 10 with the internal locations
/// integrated out: Brownian motion with covariance `σ²I` per unit time from the origin at
/// `t = 0`, observed at the leaves at `t = 1` (row `i` of `x` is leaf `i`). Equivalently,
/// each column of `x` is `N(0, σ²C)` with `C_ij` the divergence time of the lowest common
/// ancestor of `i ≠ j` and `C_ii = 1`. Computed by one upward pass of message passing
/// ([`tree_log_likelihood`] with [`Root::Gaussian`] `{ s0: 0 }` and the implicit branch from
/// the origin, of length `t_root`, as its root branch): `O(N D)`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `sigma2` unless it is finite and `> 0`;
/// [`RoseTreeError::InvalidTree`] from [`check_diffusion_tree`] or for a tree whose number
/// of leaves is not the number of rows; [`RoseTreeError::InvalidParameter`] naming
/// `n_features` for `x` without columns; [`RoseTreeError::InvalidData`] for a non-finite
/// entry of `x`.
pub fn log_likelihood(x: ArrayView2<'_, f64>, tree: &Tree, sigma2: f64) -> Result<f64> {
    check_sigma2(sigma2)?;
    let t = check_diffusion_tree(tree)?;
    let model =
        BrownianDiffusion::isotropic(sigma2, x.ncols())?.with_root(Root::Gaussian { s0: 0.0 })?;
    // Branches have length |t_parent − t_child| = t_child − t_parent; the root node's own
    // branch from the origin has length t_root.
    tree_log_likelihood(&model, x, tree, t[tree.root()])
}

/// Checks the Brownian variance per unit time.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `sigma2` unless it is finite and `> 0`.
pub fn check_sigma2(sigma2: f64) -> Result<()> {
    if sigma2.is_finite() && sigma2 > 0.0 {
        Ok(())
    } else {
        Err(RoseTreeError::param(
            "sigma2",
            format!("must be finite and > 0, got {sigma2}"),
        ))
    }
}

#[cfg(test)]
mod tests;
