//! The probit likelihood for binary data under the Pitman–Yor diffusion tree (Knowles &
//! Ghahramani, §5.4 and §6.3): an auxiliary-variable MCMC step for the sampler of
//! [`super::mcmc`], and expectation propagation (EP) on a fixed tree.
//!
//! # The model
//! The tree's Brownian motion (variance `σ²` per unit time, from the origin at `t = 0`)
//! reaches the leaves at `t = 1` at latent values `z_nd`, and the data are their signs:
//! `x_nd = 1` when `z_nd > 0`, `x_nd = 0` otherwise. A missing entry (`NaN`) leaves its
//! `z_nd` unconstrained, which is exactly marginalising it. Marginally each column is
//! `z_·d ~ N(0, σ²C)` with `C_ij` the divergence time of the lowest common ancestor of
//! `i ≠ j` and `C_ii = 1` (see [`super::log_likelihood`]), so `p(x_·d | T, t)` is an orthant
//! probability of that Gaussian.
//!
//! The paper names "a probit model for binary vectors" and "EP on the probit factor" and
//! adds nothing else: no bias (the origin is at 0) and no observation noise. The hard
//! threshold at the leaf *is* a probit factor: given the location `y_p` of leaf `n`'s parent
//! (at `t_p`), `z_n ~ N(y_p, σ²(1 − t_p))` and
//!
//! ```text
//!   P(x_n = 1 | y_p) = Φ(y_p / (σ √(1 − t_p))),
//! ```
//!
//! the leaf's own branch playing the part of the probit's Gaussian noise. (Noise of variance
//! `ν` added to `z` would lengthen every leaf branch by `ν/σ²`; it is not part of the model.)
//!
//! # The scale `σ²` is not identifiable
//! Multiplying every `z` by `s > 0` keeps its signs, and `z/s` is the Brownian motion with
//! variance `σ²/s²`: `p(x | T, t, σ²)` does not depend on `σ²`. The paper learns `σ²` only
//! for Gaussian data; here `σ²` stays fixed (1 by default; another value only rescales the
//! latent values and changes no probability of `x`, trees or times), and asking the chain to
//! learn it under the probit likelihood is an error naming `sigma2`.
//!
//! # Auxiliary-variable MCMC
//! The chain's state is `(T, t, α, β, c, z)` with target `p(T, t, α, β, c, z | x)`. Each
//! sweep first redraws `z` (the paper slice-samples these auxiliary variables; we draw them
//! from their exact conditional) in two Gibbs blocks:
//! 1. the internal locations `y | z, T, t`: backward sampling from the cached Gaussian
//!    messages, the step the Gibbs update of `1/σ²` already uses
//!    ([`Chain::sample_locations`](super::mcmc::Chain));
//! 2. `z | y, x, T, t`: given every internal location the leaves are independent, and
//!    `p(z_nd | y, x_nd) ∝ N(z_nd; y_{p(n)d}, σ²(1 − t_{p(n)})) · 1[sign(z_nd) agrees with
//!    x_nd]`, a normal truncated to one side of 0 (untruncated when `x_nd` is missing).
//!
//! If `z ~ p(z | x, T, t)`, step 1 gives `(y, z) ~ p(y, z | x, T, t)` and step 2 then
//! `(y, z') ~ p(y, z | x, T, t)`: `z'` has the same law, so dropping `y` leaves
//! `p(z | x, T, t)` invariant. The messages are then refreshed from the new `z` (every leaf
//! marked dirty, `O(N D)`), and the sweep's subtree, time and hyperparameter moves run
//! with `z` as Gaussian data. They leave `p(T, t, α, β, c | z)` invariant, which is
//! `p(T, t, α, β, c | z, x)` because `x` is a function of `z`. Together the sweep leaves the
//! joint posterior invariant, and the trees it visits follow `p(T, t | x)`.
//!
//! The chain's reported likelihood under the probit model is `ln p(z | T, t, σ²)` of the
//! current latent values (and its joint `ln p(z, T, t | α, β, c, σ²)`), cached and free.
//! `ln p(x | T, t)` is an `N`-dimensional orthant probability per column, with no closed
//! form beyond `N = 3`; [`expectation_propagation`] approximates it for one tree.
//!
//! # Sampling the truncated normal
//! `N(0, 1)` truncated to `(a, ∞)`, written by hand (`rand_distr` has no truncated normal):
//! for `a ≤ 0`, draws of `N(0, 1)` until one exceeds `a` (acceptance `1 − Φ(a) ≥ 1/2`); for
//! `a > 0`, Robert's (1995) exponential rejection sampler: propose `a + E/λ` with
//! `E ~ Exp(1)` and `λ = (a + √(a² + 4))/2`, accept with probability
//! `exp(−(z − λ)²/2)` (acceptance above 0.76 for every `a ≥ 0`, tending to 1). Both are
//! exact, and neither evaluates `Φ` or its inverse, so the far tails (`a = 40`, where
//! `1 − Φ(a)` underflows) lose nothing to rounding, which an inverse-CDF draw would.
//!
//! # Expectation propagation for one tree
//! The columns are independent given the tree; within a column write `y_n = ±1` for the sign
//! of an observed `x_n`. The posterior `p(z | x) ∝ N(z; 0, σ²C) Π_n 1[y_n z_n > 0]` is
//! approximated by `N(z; 0, σ²C) Π_n Z̃_n N(z_n; μ̃_n, 1/τ̃_n)`, one Gaussian site per
//! observed entry (Minka 2001; Rasmussen & Williams 2006, §3.6), and
//!
//! ```text
//!   ln p(x | T, t) ≈ ln Z_EP = Σ_n ln Z̃_n + ln N(μ̃; 0, σ²C + diag(1/τ̃)),
//! ```
//!
//! the last term being the Gaussian likelihood of the pseudo-observations `μ̃_n` with noise
//! variances `1/τ̃_n` at the leaves (R&W eq 3.65). A Gaussian-likelihood method (the EM over
//! the times of [`super::em`]) uses the sites as those pseudo-observations.
//!
//! The algorithm is the message layer's ([`crate::models::messages::probit`]: the tilted
//! moments and the site update written without cancellation, `τ̃_n > 0` always; cavities
//! as downward messages in precision form; the sites updated one at a time, in leaf order,
//! until the tilted means and standard deviations move by less than `tol · σ` in a sweep),
//! run here on the tree with branch variances `σ²(t_child − t_parent)`, the root node's from
//! the origin. Nothing needs `C` itself: each update costs `O(depth · K)`, a sweep
//! `O(N · depth · K)` per column (`O(N log N)` on a balanced tree, `O(N²)` on a caterpillar)
//! against the `O(N³)` of the covariance form, which the tests use as the independent
//! check. `ln N(μ̃; 0, σ²C + diag(1/τ̃))` is the sum of the normalisers of the products
//! that make EP's upward messages, as in [`super::log_likelihood`] with leaf noise.
//!
//! # Examples
//! For two leaves diverging at `t`, `P(x = (1, 1)) = 1/4 + asin(t)/(2π)`; EP comes close.
//! ```
//! use ndarray::array;
//! use rosetree::pydt::probit::{EpConfig, expectation_propagation};
//! use rosetree::tree::{Topology, Tree};
//!
//! let t = 0.6;
//! let tree = Tree::new(&Topology::new(2, vec![vec![0, 1]])?, Some(vec![1.0, 1.0, t]))?;
//! let x = array![[1.0], [1.0]];
//! let ep = expectation_propagation(x.view(), &tree, 1.0, &EpConfig::default())?;
//! let exact = (0.25 + t.asin() / (2.0 * std::f64::consts::PI)).ln();
//! assert!((ep.log_marginal - exact).abs() < 0.02);
//! assert!(ep.site_precisions.iter().all(|&p| p > 0.0));
//! # Ok::<(), rosetree::RoseTreeError>(())
//! ```

use ndarray::{Array2, ArrayView2};
use rand::Rng;
use rand_distr::{Exp1, StandardNormal};

pub use super::mcmc::Likelihood;
use super::mcmc::{Chain, Isotropic};
use super::{PydtParams, check_diffusion_tree, check_sigma2};
use crate::error::{Result, RoseTreeError};
#[cfg(test)]
use crate::models::messages::probit::mills_ratio;
use crate::models::messages::{EpColumn, ScalarTree};
#[cfg(test)]
use crate::models::messages::{SiteUpdate, ln_cdf_and_ratio, site_update};
use crate::tree::Tree;
use crate::tree::arena::{Arena, NodeId};

/// Checks that every entry of `x` is 0, 1 or `NaN` (missing).
///
/// # Errors
/// [`RoseTreeError::InvalidData`] naming the first other entry's row and column.
pub fn check_binary(x: ArrayView2<'_, f64>) -> Result<()> {
    match x
        .indexed_iter()
        .find(|(_, v)| !(v.is_nan() || **v == 0.0 || **v == 1.0))
    {
        Some(((i, j), v)) => Err(RoseTreeError::data(
            i,
            Some(j),
            format!("binary data must be 0, 1 or NaN (missing), got {v}"),
        )),
        None => Ok(()),
    }
}

/// A draw of `N(0, 1)` truncated to `(a, ∞)` (see the [module docs](self)). Exact for every
/// finite `a`.
pub(crate) fn standard_normal_tail<R: Rng + ?Sized>(a: f64, rng: &mut R) -> f64 {
    if a <= 0.0 {
        loop {
            let z: f64 = rng.sample(StandardNormal);
            if z > a {
                return z;
            }
        }
    }
    // Robert (1995): the exponential proposal with the rate that maximises acceptance.
    let lambda = 0.5 * (a + (a * a + 4.0).sqrt());
    loop {
        let e: f64 = rng.sample(Exp1);
        let z = a + e / lambda;
        let u: f64 = rng.sample(Exp1);
        if u >= 0.5 * (z - lambda) * (z - lambda) {
            return z;
        }
    }
}

/// A draw of `N(mean, sd²)` truncated to `z > 0` (`positive`) or `z < 0`, for `sd > 0`.
pub(crate) fn truncated_normal<R: Rng + ?Sized>(
    mean: f64,
    sd: f64,
    positive: bool,
    rng: &mut R,
) -> f64 {
    if positive {
        mean + sd * standard_normal_tail(-mean / sd, rng)
    } else {
        -(-mean + sd * standard_normal_tail(mean / sd, rng))
    }
}

/// The starting latent value of a binary observation `v` (0, 1 or `NaN`): `±sd` by its
/// sign, 0 where missing.
pub(super) fn starting_latent(v: f64, sd: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else if v == 1.0 {
        sd
    } else {
        -sd
    }
}

/// A draw of the latent value of a binary observation `v` (0, 1 or `NaN`) from its
/// marginal `N(0, sd²)` given the sign (unconditioned where missing): a new row's start,
/// tied with no other row.
pub(super) fn drawn_latent<R: Rng + ?Sized>(v: f64, sd: f64, rng: &mut R) -> f64 {
    if v.is_nan() {
        let z: f64 = rng.sample(StandardNormal);
        sd * z
    } else {
        truncated_normal(0.0, sd, v == 1.0, rng)
    }
}

impl Chain<Isotropic> {
    /// A probit chain (see the [module docs](self)) started at `tree` for binary data `x`
    /// (0, 1 or `NaN` for missing; row `i` at leaf `i`), its latent values starting at
    /// `±σ` by the signs of `x` (0 where missing); the first sweep redraws them.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] naming the row and column of an entry other than 0, 1
    /// or `NaN`; otherwise as [`Chain::new`].
    pub fn new_probit(
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        params: PydtParams,
        sigma2: f64,
    ) -> Result<Self> {
        check_sigma2(sigma2)?;
        check_binary(x)?;
        let sd = sigma2.sqrt();
        let z = x.mapv(|v| starting_latent(v, sd));
        let mut chain = Chain::new(z.view(), tree, params, sigma2)?;
        chain.observed = Some(x.to_owned());
        Ok(chain)
    }

    /// The current latent values `z` of a probit chain (`None` for Gaussian data).
    pub fn latent(&self) -> Option<ArrayView2<'_, f64>> {
        self.observed.as_ref().map(|_| self.x.view())
    }

    /// The Gibbs draw of the latent values given the tree, the times and the binary data
    /// (see the [module docs](self)), then the refresh of every message.
    ///
    /// # Errors
    /// Only on a broken invariant of the arena.
    pub(super) fn update_latent<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<()> {
        let d = self.x.ncols();
        let Some(observed) = self.observed.take() else {
            return Ok(());
        };
        if d > 0 {
            let (loc, _, _) = self.sample_locations(rng)?;
            let sd = self.lik.sigma2.sqrt();
            for n in 0..self.n_leaves() {
                let leaf = NodeId(n as u32);
                let parent = self.arena.parent(leaf)?;
                let len = match parent {
                    Some(p) => 1.0 - self.arena.time(p)?,
                    None => 1.0,
                };
                let sd_n = sd * len.sqrt();
                for j in 0..d {
                    let mean = parent.map_or(0.0, |p| loc[p.index() * d + j]);
                    let obs = observed[[n, j]];
                    self.x[[n, j]] = if obs.is_nan() {
                        let e: f64 = rng.sample(StandardNormal);
                        mean + sd_n * e
                    } else {
                        truncated_normal(mean, sd_n, obs == 1.0, rng)
                    };
                }
            }
        }
        self.observed = Some(observed);
        self.refresh_data();
        Ok(())
    }
}

/// The settings of [`expectation_propagation`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpConfig {
    /// The most sweeps over the sites.
    pub max_iter: usize,
    /// Converged when no tilted mean or standard deviation moved by more than `tol · σ`
    /// in a sweep.
    pub tol: f64,
}

impl Default for EpConfig {
    /// 200 sweeps, `tol = 1e-10`.
    fn default() -> Self {
        Self {
            max_iter: 200,
            tol: 1e-10,
        }
    }
}

/// The result of [`expectation_propagation`].
#[derive(Debug, Clone, PartialEq)]
pub struct EpResult {
    /// `μ̃`, the site means (`N × D`; 0 where `x` is missing).
    pub site_means: Array2<f64>,
    /// `τ̃`, the site precisions (`N × D`; 0 where `x` is missing): the noise variance of
    /// the pseudo-observation `μ̃` is `1/τ̃`.
    pub site_precisions: Array2<f64>,
    /// `ln Z_EP`, the approximation of `ln p(x | T, t)` (see the [module docs](self)).
    pub log_marginal: f64,
    /// `Σ ln Z̃_n`, the sites' normalisers: `log_marginal` minus the Gaussian likelihood of
    /// the pseudo-observations.
    pub log_site_normalisers: f64,
    /// The most sweeps any column took.
    pub iterations: usize,
    /// Whether every column converged within `max_iter` sweeps.
    pub converged: bool,
}

/// Expectation propagation for the probit likelihood on a fixed tree (see the
/// [module docs](self)): binary `x` (0, 1 or `NaN` for missing, row `i` at leaf `i`), the
/// Brownian motion's variance `sigma2` per unit time. Returns the Gaussian sites and the
/// approximation of `ln p(x | T, t)`; `O(N · depth · K · D)` per sweep.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `sigma2` unless finite and `> 0`, `max_iter`
/// when 0, `tol` unless finite and `> 0`; [`RoseTreeError::InvalidTree`] from
/// [`check_diffusion_tree`] or when the tree's leaves are not the rows of `x`;
/// [`RoseTreeError::InvalidData`] naming the row and column of an entry other than 0, 1 or
/// `NaN`.
pub fn expectation_propagation(
    x: ArrayView2<'_, f64>,
    tree: &Tree,
    sigma2: f64,
    config: &EpConfig,
) -> Result<EpResult> {
    check_sigma2(sigma2)?;
    if config.max_iter == 0 {
        return Err(RoseTreeError::param("max_iter", "must be at least 1"));
    }
    if !(config.tol.is_finite() && config.tol > 0.0) {
        return Err(RoseTreeError::param(
            "tol",
            format!("must be finite and > 0, got {}", config.tol),
        ));
    }
    let t = check_diffusion_tree(tree)?;
    let n = tree.n_leaves();
    if n != x.nrows() {
        return Err(RoseTreeError::InvalidTree(format!(
            "the tree has {n} leaves for {} rows",
            x.nrows()
        )));
    }
    check_binary(x)?;
    let geo = ScalarTree::from_tree(tree, |v| {
        sigma2
            * tree.nodes()[v]
                .parent
                .map_or(t[v].min(1.0), |p| t[v] - t[p])
    });
    Ok(run_ep(x, &geo, sigma2, config, None))
}

/// [`expectation_propagation`] on the tree of `arena` (its detached subtrees and their rows
/// left out: their sites are 0), for checked `x`, `sigma2` and `config`, with the sites
/// starting from those of `warm` (an earlier result for the same data) when given.
pub(crate) fn expectation_propagation_arena<C>(
    x: ArrayView2<'_, f64>,
    arena: &Arena<C>,
    sigma2: f64,
    config: &EpConfig,
    warm: Option<&EpResult>,
) -> EpResult {
    run_ep(x, &arena_tree(arena, sigma2), sigma2, config, warm)
}

/// The tree of `arena` under its root with branch variances `σ²(t_child − t_parent)`, the
/// root node's from the origin: what EP and the probit E-step of [`super::em`] run on.
pub(crate) fn arena_tree<C>(arena: &Arena<C>, sigma2: f64) -> ScalarTree {
    ScalarTree::from_arena(arena, |v| {
        let node = arena.node(v).expect("live node");
        let t = node.time().min(1.0);
        sigma2
            * node
                .parent()
                .map_or(t, |a| t - arena.time(a).expect("live node"))
    })
}

/// EP over the rows at the leaves of `geo` (branch variances `σ²ℓ`), one column at a time
/// by [`ScalarTree::expectation_propagation`], the sites starting at `warm`'s or flat.
pub(crate) fn run_ep(
    x: ArrayView2<'_, f64>,
    geo: &ScalarTree,
    sigma2: f64,
    config: &EpConfig,
    warm: Option<&EpResult>,
) -> EpResult {
    let sd = sigma2.sqrt();
    let mut result = EpResult {
        site_means: Array2::zeros(x.dim()),
        site_precisions: Array2::zeros(x.dim()),
        log_marginal: 0.0,
        log_site_normalisers: 0.0,
        iterations: 0,
        converged: true,
    };
    let mut col = EpColumn::default();
    for (j, column) in x.columns().into_iter().enumerate() {
        let observed: Vec<(usize, f64)> = geo
            .leaves()
            .iter()
            .map(|&i| (i, column[i]))
            .filter(|(_, v)| !v.is_nan())
            .map(|(i, v)| (i, if v == 1.0 { 1.0 } else { -1.0 }))
            .collect();
        let start = warm.map(|w| move |i: usize| (w.site_means[[i, j]], w.site_precisions[[i, j]]));
        geo.expectation_propagation(
            &observed,
            start.as_ref().map(|f| f as &dyn Fn(usize) -> (f64, f64)),
            (config.tol, sd, config.max_iter),
            &mut col,
        );
        result.iterations = result.iterations.max(col.sweeps);
        result.converged &= col.converged;
        for &(i, _) in &observed {
            result.site_means[[i, j]] = col.site_means[i];
            result.site_precisions[[i, j]] = col.site_precisions[i];
        }
        result.log_site_normalisers += col.log_site_normalisers;
        result.log_marginal += col.log_marginal;
    }
    result
}

#[cfg(test)]
mod tests;
