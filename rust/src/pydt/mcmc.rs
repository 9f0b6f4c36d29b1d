//! Markov chain Monte Carlo over Pitman–Yor diffusion trees (Knowles & Ghahramani, §5.1):
//! the tree structure and divergence times by subtree moves, the hyperparameters by Gibbs
//! and slice sampling, with the Gaussian likelihood's internal locations integrated out.
//!
//! # The state and its caches
//! The tree lives in an [`Arena`]. Under isotropic Brownian motion each node caches the
//! Gaussian message from the data below
//! it (`N(x_v; μ_v, σ² v_v I)`, kept in units of `σ²`: the message layer's [`UnitMessage`])
//! with the `σ²`-free parts of the local likelihood terms summed over its subtree, and its
//! own prior term `ln S_b + ln c + (c J_b − 1) ln(1 − t_b)` with the sum over its subtree.
//! A move marks only the changed paths dirty, and only those are recomputed: a subtree move
//! costs `O(depth · K · D)`, not `O(N D)`.
//!
//! The likelihood in units of `σ²` ([`SplitLogZ`](crate::models::messages::SplitLogZ)):
//! merging the messages of a node's children one at a time, each merge of `N(μ₁, σ² v₁)`
//! and `N(μ₂, σ² v₂)` contributes the normaliser `N(μ₁; μ₂, σ²(v₁ + v₂) I)`; with the root's
//! message against the origin, `N(μ_r; 0, σ²(v_r + t_r) I)`, a tree over `N` points has
//! exactly `N` of them, so
//!
//! ```text
//!   ln p(X | T, t, σ²) = −(N D/2) ln(2πσ²) − (D/2) Σ ln(v₁ + v₂) − Σ ‖μ₁ − μ₂‖²/(2σ²(v₁ + v₂)),
//! ```
//!
//! and a new `σ²` needs no message recomputed.
//!
//! # Subtree moves, exactly
//! A non-root node `v` is chosen uniformly (`N_T` choices: every node but the root), its
//! subtree is detached, and a new position is drawn by the generative process of one new
//! point on the remaining tree `R` (see the [`pydt` module docs](super)), conditioned on
//! diverging before the subtree root's time `t_v`: on a branch (a new branch point is made)
//! or at a branch point (the subtree becomes one more branch). Write `q(X)` for the
//! unconditioned density of the process ending at position `X` of `R`; the conditioning
//! divides it by `Z = P(diverge before t_v | R)`, which is the same for the move back (the
//! same `R`, the same subtree), so the Metropolis–Hastings ratio of a move from position
//! `X` (tree `T`) to `X'` (tree `T'`) is
//!
//! ```text
//!   p(X | T') p(T') / (p(X | T) p(T)) · q(X) / q(X') · N_T / N_T'.
//! ```
//!
//! When `v` is a single leaf, exchangeability makes `p(T') = p(R) q(X')` and the prior terms
//! cancel, leaving the likelihood ratio of the paper; for a subtree of several leaves they
//! do not cancel (its points all follow the path to `X'`), and the chain keeps every factor.
//! `N_T ≠ N_T'` when the move creates or removes a branch point. A tree `T'` may be reached
//! from `T` by moving either of two siblings; each choice of `v` is its own reversible move
//! with the ratio above, so the kernel satisfies detailed balance without summing routes.
//!
//! The conditioned draw is made by rejection (the walk stops as soon as it passes `t_v`),
//! and after [`REJECTION_TRIES`] failures by an exact sequential draw: the probability
//! `Z(u)` of diverging before `t_v` from the top of each branch is computed below the root
//! down to `t_v`, and the walk follows the branches in proportion to it. Both give the
//! conditioned law exactly.
//!
//! # Divergence times
//! Each sweep also slice-samples every branch point's time between its parent's and its
//! earliest child's (the subtree moves alone change a time only by removing and re-creating
//! its node), from `p(X | T, t) (1 − t_b)^{c J_b − 1}`.
//!
//! # Hyperparameters
//! - `c`: the density is `c^{|I|} exp(c Σ_b J_b ln(1 − t_b))` times terms free of `c`, so
//!   under a `Gamma(a_c, b_c)` prior (shape, rate) its conditional is
//!   `Gamma(a_c + |I|, b_c − Σ_b J_b ln(1 − t_b))` (eq 13, whose printed `+` is a `−`:
//!   `ln(1 − t) < 0`, and `Σ_b J_b ln(1 − t_b) ≤ 0` because it is a sum over branches of
//!   `−(τ_b − τ_a) H_{m−1}` with `τ = −ln(1 − t)`).
//! - `1/σ²` (eq 14): the internal locations are drawn jointly by backward sampling from the
//!   messages, then `1/σ² ~ Gamma(a_σ + |E| D/2, b_σ + Σ_{[ab]} ‖x_b − x_a‖²/(2(t_b − t_a)))`
//!   over all `|E|` branches, the one from the origin and those into the leaves included.
//! - `α` and `β`: slice sampling of `ln α` and `logit β` (their priors a Gamma and a Beta,
//!   with the Jacobians), on the structure and time terms (eqs 7 with the erratum, 9).
//!
//! # Other likelihoods
//! The chain is generic over its likelihood ([`ChainLikelihood`]): [`Isotropic`] Brownian
//! motion above, the default, or any message model of [`crate::models::messages`] through
//! [`Messages`] ([`Chain::with_model`], [`run_model`]), the coalescent's models among them
//! (Brownian motion with a diagonal or full rate, masked Brownian motion, multinomial
//! mutation). A node then caches the model's message and the sum of the merges' `ln Z`
//! below it; the subtree moves (by the prior proposal: the Gibbs re-attachment move is
//! closed-form for isotropic Gaussians only), the divergence times and `α`, `β`, `c` move
//! as above, and the model's rates stay fixed (`σ²` is learnt, and probit data observed,
//! for isotropic Brownian motion alone).
//!
//! # Binary data
//! With [`Likelihood::Probit`] the rows are binary and the Brownian motion's leaf locations
//! become latent values `z` (`x = 1` exactly when `z > 0`); each sweep first redraws `z`
//! by Gibbs sampling and then runs the moves above with `z` as the data. See
//! [`super::probit`].
//!
//! # Random streams
//! One `Xoshiro256PlusPlus` seeded from the caller's seed drives the whole chain; the result
//! is a function of the seed and the inputs alone (the chain is sequential).

use ndarray::{Array2, ArrayView2};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp1, Gamma, StandardNormal};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::slice::slice_sample;
use super::{PydtParams, check_diffusion_tree, check_sigma2, harmonic_gap, sample_tree};
use crate::error::{Result, RoseTreeError};
use crate::math::ln_gamma;
use crate::models::messages::UnitMessage;
use crate::tree::Tree;
use crate::tree::arena::{Arena, Attachment, Detached, NodeId};

/// How the data of a chain are observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Likelihood {
    /// The data are the leaf locations (eq 10).
    #[default]
    Gaussian,
    /// The data are binary, the signs of the leaf locations (see [`super::probit`]).
    Probit,
}

impl std::str::FromStr for Likelihood {
    type Err = RoseTreeError;

    /// `"gaussian"` or `"probit"`.
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "gaussian" => Ok(Self::Gaussian),
            "probit" => Ok(Self::Probit),
            other => Err(RoseTreeError::param(
                "likelihood",
                format!("must be 'gaussian' or 'probit', got {other:?}"),
            )),
        }
    }
}

/// How a sweep moves subtrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubtreeMove {
    /// [`Gibbs`](Self::Gibbs) up to [`GIBBS_MAX_POINTS`] points, [`Prior`](Self::Prior)
    /// beyond: whichever gave more effective samples of the log joint per second there.
    #[default]
    Auto,
    /// A new position drawn by the generative process of one point, accepted by
    /// Metropolis–Hastings on the likelihood and prior ratio (see the [module docs](self)):
    /// `O(depth · K · D)` a move, accepted a few per cent of the time on hundreds of points.
    Prior,
    /// A new position drawn from the exact conditional over every position, by the
    /// Gibbs re-attachment move of [`reattach`]: `O(N (D + G))` a move, accepted about 99 %
    /// of the time. More effective samples of the log joint per second than
    /// [`Prior`](Self::Prior) up to about 200 points, fewer beyond (`BENCHMARKS.md`).
    Gibbs,
}

/// The most points for which [`SubtreeMove::Auto`] takes the Gibbs re-attachment move: its
/// cost per sweep grows as `N²`, the prior move's as `N log N`, and in the same run it gave
/// 1.06 and 1.29 times the prior move's effective samples of the log joint per second at
/// 100 and 200 points and 0.33 times at 400 (`docs/pydt.md`, "Subtree moves").
pub const GIBBS_MAX_POINTS: usize = 250;

impl SubtreeMove {
    /// The move made on `n_points` points: [`Auto`](Self::Auto) resolved, the others as
    /// they are.
    #[must_use]
    pub fn for_points(self, n_points: usize) -> Self {
        match self {
            Self::Auto if n_points <= GIBBS_MAX_POINTS => Self::Gibbs,
            Self::Auto => Self::Prior,
            chosen => chosen,
        }
    }
}

impl std::str::FromStr for SubtreeMove {
    type Err = RoseTreeError;

    /// `"auto"`, `"prior"` or `"gibbs"`.
    fn from_str(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(Self::Auto),
            "prior" => Ok(Self::Prior),
            "gibbs" => Ok(Self::Gibbs),
            other => Err(RoseTreeError::param(
                "subtree_move",
                format!("must be 'auto', 'gibbs' or 'prior', got {other:?}"),
            )),
        }
    }
}

/// How many times a subtree's new position is drawn by rejection before the exact
/// sequential draw takes over (see the [module docs](self)).
pub const REJECTION_TRIES: usize = 16;

/// Exact conditioned draws of a subtree move before giving up with an error: each fails only
/// when its time rounds onto an end of its branch, which takes a `c` near the float range.
pub const CONDITIONED_TRIES: usize = 1000;

/// A Gamma prior by shape and rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GammaPrior {
    /// The shape `a > 0`.
    pub shape: f64,
    /// The rate `b > 0`.
    pub rate: f64,
}

impl GammaPrior {
    /// `ln` of the density at `x > 0`.
    pub fn ln_pdf(&self, x: f64) -> f64 {
        self.shape * self.rate.ln() - ln_gamma(self.shape) + (self.shape - 1.0) * x.ln()
            - self.rate * x
    }

    pub(super) fn check(&self, name: &str) -> Result<()> {
        for (what, v) in [("shape", self.shape), ("rate", self.rate)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(RoseTreeError::param(
                    name,
                    format!("the Gamma prior's {what} must be finite and > 0, got {v}"),
                ));
            }
        }
        Ok(())
    }
}

/// A Beta prior.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BetaPrior {
    /// The first shape `a > 0`.
    pub a: f64,
    /// The second shape `b > 0`.
    pub b: f64,
}

impl BetaPrior {
    /// `ln` of the density at `x ∈ (0, 1)`.
    pub fn ln_pdf(&self, x: f64) -> f64 {
        (self.a - 1.0) * x.ln() + (self.b - 1.0) * (-x).ln_1p()
            - crate::math::ln_beta(self.a, self.b)
    }
}

/// The priors of the hyperparameters that the chain learns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyperpriors {
    /// Prior of the concentration `α > 0`.
    pub alpha: GammaPrior,
    /// Prior of the discount `β ∈ (0, 1)`.
    pub beta: BetaPrior,
    /// Prior of the smoothness `c`.
    pub c: GammaPrior,
    /// Prior of the precision `1/σ²`.
    pub precision: GammaPrior,
}

impl Default for Hyperpriors {
    /// `α ~ Gamma(1, 1)`, `β ~ Beta(1, 1)`, `c ~ Gamma(1, 1)`, `1/σ² ~ Gamma(1, 1)`.
    fn default() -> Self {
        let unit = GammaPrior {
            shape: 1.0,
            rate: 1.0,
        };
        Self {
            alpha: unit,
            beta: BetaPrior { a: 1.0, b: 1.0 },
            c: unit,
            precision: unit,
        }
    }
}

/// Which hyperparameters the chain samples; the others stay at their starting values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Learn {
    /// Slice-sample `ln α` (needs a starting `α > 0`).
    pub alpha: bool,
    /// Slice-sample `logit β` (needs a starting `β > 0`).
    pub beta: bool,
    /// Gibbs-sample `c`.
    pub c: bool,
    /// Gibbs-sample `1/σ²` (with data only; an error with [`Likelihood::Probit`]).
    pub sigma2: bool,
}

impl Learn {
    /// Checks that a learnt `α` or `β` starts positive: they move on the log and logit
    /// scales (`how` they move, for the message: "sampled", "searched").
    pub(super) fn check_start(&self, params: &PydtParams, how: &str) -> Result<()> {
        if self.alpha && params.alpha() <= 0.0 {
            return Err(RoseTreeError::param(
                "alpha",
                format!(
                    "learning alpha needs a starting value > 0 (it is {how} on the log \
                     scale), got {}",
                    params.alpha()
                ),
            ));
        }
        if self.beta && params.beta() <= 0.0 {
            return Err(RoseTreeError::param(
                "beta",
                format!(
                    "learning beta needs a starting value in (0, 1) (it is {how} on the \
                     logit scale), got {}",
                    params.beta()
                ),
            ));
        }
        Ok(())
    }
}

impl Hyperpriors {
    /// Checks every parameter of every prior, naming the prior.
    pub(super) fn check(&self) -> Result<()> {
        self.alpha.check("alpha_prior")?;
        self.c.check("c_prior")?;
        self.precision.check("sigma2_prior")?;
        for (what, v) in [("a", self.beta.a), ("b", self.beta.b)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(RoseTreeError::param(
                    "beta_prior",
                    format!("the Beta prior's {what} must be finite and > 0, got {v}"),
                ));
            }
        }
        Ok(())
    }
}

/// The settings of a chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct McmcConfig {
    /// Sweeps; each is `N` subtree moves, a slice update of every divergence time and one
    /// update of each learnt hyperparameter.
    pub n_iter: usize,
    /// Sweeps discarded before samples are kept.
    pub burn_in: usize,
    /// Keep every `thin`-th sweep after the burn-in.
    pub thin: usize,
    /// Which hyperparameters to sample.
    pub learn: Learn,
    /// Their priors.
    pub priors: Hyperpriors,
    /// How the data are observed: Gaussian locations or binary signs (probit).
    pub likelihood: Likelihood,
    /// How subtrees move.
    pub subtree_move: SubtreeMove,
}

impl Default for McmcConfig {
    fn default() -> Self {
        Self {
            n_iter: 100,
            burn_in: 50,
            thin: 1,
            learn: Learn::default(),
            priors: Hyperpriors::default(),
            likelihood: Likelihood::Gaussian,
            subtree_move: SubtreeMove::default(),
        }
    }
}

impl McmcConfig {
    fn check(&self, params: &PydtParams) -> Result<()> {
        if self.thin == 0 {
            return Err(RoseTreeError::param("thin", "must be at least 1"));
        }
        if self.burn_in > self.n_iter {
            return Err(RoseTreeError::param(
                "burn_in",
                format!(
                    "must not exceed n_iter = {}, got {}",
                    self.n_iter, self.burn_in
                ),
            ));
        }
        self.priors.check()?;
        if self.learn.sigma2 && self.likelihood == Likelihood::Probit {
            return Err(RoseTreeError::param(
                "sigma2",
                "cannot be learnt with the probit likelihood: the signs of the latent values \
                 do not depend on their scale (fix sigma2, e.g. at 1)",
            ));
        }
        self.learn.check_start(params, "sampled")?;
        Ok(())
    }
}

/// One sweep's record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRow {
    /// `ln p(X, T, t | α, β, c, σ²)` at the end of the sweep.
    pub log_joint: f64,
    /// `ln p(X | T, t, σ²)` (0 without data); with [`Likelihood::Probit`],
    /// `ln p(z | T, t, σ²)` of the current latent values (see [`super::probit`]).
    pub log_likelihood: f64,
    /// The hyperparameters at the end of the sweep.
    pub alpha: f64,
    /// See `alpha`.
    pub beta: f64,
    /// See `alpha`.
    pub c: f64,
    /// See `alpha`.
    pub sigma2: f64,
    /// The fraction of this sweep's subtree moves that were accepted.
    pub acceptance: f64,
}

/// A kept state of the chain.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The tree, heights = divergence times.
    pub tree: Tree,
    /// The hyperparameters.
    pub params: PydtParams,
    /// The Brownian variance per unit time.
    pub sigma2: f64,
    /// `ln p(X, T, t | α, β, c, σ²)`.
    pub log_joint: f64,
}

impl Sample {
    /// The predictive mixture of a new row under this state (§5.3), for the training rows
    /// `x` of its tree, each branch's divergence time represented by `n_points` times.
    ///
    /// # Errors
    /// As [`Predictor::new`](super::predict::Predictor::new).
    pub fn predictor(
        &self,
        x: ArrayView2<'_, f64>,
        n_points: usize,
    ) -> Result<super::predict::Predictor> {
        super::predict::Predictor::new(x, &self.tree, &self.params, self.sigma2, n_points)
    }
}

/// The result of [`run`].
#[derive(Debug, Clone)]
pub struct McmcResult {
    /// The kept states, in order.
    pub samples: Vec<Sample>,
    /// One row per sweep.
    pub trace: Vec<TraceRow>,
    /// The last state.
    pub last: Sample,
    /// Subtree moves proposed over the whole run.
    pub proposals: usize,
    /// Subtree moves accepted over the whole run.
    pub accepted: usize,
}

/// The cache of a node (see the [module docs](self)).
#[derive(Debug, Clone, Default)]
pub(super) struct NodeState<Msg = UnitMessage> {
    /// The message from the data below ([`ChainLikelihood::Message`]). For [`Isotropic`],
    /// `N(μ_v, σ² v_v I)` in units of `σ²` (the data at a leaf; no features without data),
    /// with the split normalisers of the merges in the subtree.
    pub(super) msg: Msg,
    /// This node's prior term, and the sum over its subtree.
    pub(super) prior: f64,
    pub(super) sub_prior: f64,
}

/// Which nodes a subtree move picks from, uniformly; the Metropolis–Hastings ratio counts
/// them before and after the move (a move keeps a picked node pickable: its subtree moves
/// whole).
#[derive(Debug, Clone, Copy)]
pub(super) enum Pick<'a> {
    /// Every node but the root: a sweep of [`run`].
    NonRoot,
    /// The non-root nodes whose subtree holds one of these leaves: a restricted sweep of
    /// [`insert::partial_fit`], on the paths from the new leaves to the root.
    Holding(&'a [NodeId]),
}

/// `τ = −ln(1 − t)`, the time in which the divergence hazard is constant.
fn tau(t: f64) -> f64 {
    -(-t).ln_1p()
}

/// A Markov chain over trees, divergence times and hyperparameters for data `x` (one row
/// per leaf) under the likelihood `L` ([`Isotropic`] Brownian motion unless another is
/// named); see the [module docs](self).
#[derive(Debug, Clone)]
pub struct Chain<L: ChainLikelihood = Isotropic> {
    pub(super) arena: Arena<NodeState<L::Message>>,
    pub(super) x: Array2<f64>,
    params: PydtParams,
    /// The likelihood; for [`Isotropic`], with the current `σ²`.
    pub(super) lik: L,
    /// `w_m` for `m = 0..=N` (`w_0` unused) and `H_0..=H_{N−1}`.
    w: Vec<f64>,
    h: Vec<f64>,
    ln_lik: f64,
    ln_prior: f64,
    /// Scratch: the success probabilities `Z(u)` of the exact conditioned draw.
    z: Vec<f64>,
    /// With the probit likelihood, the binary observations (`NaN` missing); `x` then holds
    /// the latent values.
    pub(super) observed: Option<Array2<f64>>,
    /// Buffers of the Gibbs re-attachment move.
    scratch: reattach::Scratch,
}

impl Chain<Isotropic> {
    /// A chain started at `tree` for data `x` (row `i` at leaf `i`; `x` may have no columns,
    /// which samples the prior).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `sigma2`; [`RoseTreeError::InvalidTree`]
    /// from [`check_diffusion_tree`] or when the tree's leaves are not the rows of `x`;
    /// [`RoseTreeError::InvalidData`] for a non-finite entry of `x`.
    pub fn new(
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        params: PydtParams,
        sigma2: f64,
    ) -> Result<Self> {
        check_sigma2(sigma2)?;
        Self::with(Isotropic::new(sigma2), x, tree, params)
    }

    /// [`Chain::new`] or [`Chain::new_probit`], as `likelihood` says.
    ///
    /// # Errors
    /// Those of the constructor called.
    pub fn with_likelihood(
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        params: PydtParams,
        sigma2: f64,
        likelihood: Likelihood,
    ) -> Result<Self> {
        match likelihood {
            Likelihood::Gaussian => Self::new(x, tree, params, sigma2),
            Likelihood::Probit => Self::new_probit(x, tree, params, sigma2),
        }
    }

    /// The current Brownian variance per unit time.
    pub fn sigma2(&self) -> f64 {
        self.lik.sigma2
    }
}

impl<M> Chain<Messages<M>>
where
    Messages<M>: ChainLikelihood,
{
    /// A chain under the message model `model` (see [`Messages`]) started at `tree` for
    /// data `x` (row `i` at leaf `i`; `x` may have no columns, which samples the prior).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] from [`check_diffusion_tree`] or when the tree's
    /// leaves are not the rows of `x`; whatever the model's
    /// [`leaf_messages`](crate::models::messages::MessageModel::leaf_messages) reports of
    /// `x`.
    pub fn with_model(
        model: M,
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        params: PydtParams,
    ) -> Result<Self> {
        Self::with(Messages::new(model), x, tree, params)
    }
}

impl<L: ChainLikelihood> Chain<L> {
    /// A chain under the likelihood `lik` started at `tree` for data `x`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] from [`check_diffusion_tree`] or when the tree's
    /// leaves are not the rows of `x`; those of [`ChainLikelihood::check_data`].
    pub fn with(lik: L, x: ArrayView2<'_, f64>, tree: &Tree, params: PydtParams) -> Result<Self> {
        let t = check_diffusion_tree(tree)?;
        if tree.n_leaves() != x.nrows() {
            return Err(RoseTreeError::InvalidTree(format!(
                "the tree has {} leaves for {} rows",
                tree.n_leaves(),
                x.nrows()
            )));
        }
        let x = x.to_owned();
        lik.check_data(&x)?;
        let arena = Arena::from_topology(&tree.topology(), t, |_| NodeState::default())?;
        let mut chain = Self {
            arena,
            x,
            params,
            lik,
            w: Vec::new(),
            h: Vec::new(),
            ln_lik: 0.0,
            ln_prior: 0.0,
            z: Vec::new(),
            observed: None,
            scratch: reattach::Scratch::default(),
        };
        chain.set_params(params);
        Ok(chain)
    }

    /// The number of leaves.
    pub fn n_leaves(&self) -> usize {
        self.arena.n_leaves()
    }

    /// The current hyperparameters.
    pub fn params(&self) -> PydtParams {
        self.params
    }

    /// The likelihood.
    pub fn likelihood(&self) -> &L {
        &self.lik
    }

    /// `ln p(X | T, t, σ²)` of the current state (0 without data); for a probit chain,
    /// `ln p(z | T, t, σ²)` of its latent values.
    pub fn log_likelihood(&self) -> f64 {
        self.ln_lik
    }

    /// `ln p(T, t | α, β, c)` of the current state.
    pub fn log_prior(&self) -> f64 {
        self.ln_prior
    }

    /// `ln p(X, T, t | α, β, c, σ²)` of the current state (`X` = the latent values for a
    /// probit chain).
    pub fn log_joint(&self) -> f64 {
        self.ln_lik + self.ln_prior
    }

    /// The current tree.
    ///
    /// # Errors
    /// Never for a chain between moves; see [`Arena::to_tree`].
    pub fn tree(&self) -> Result<Tree> {
        self.arena.to_tree()
    }

    /// The current state as a [`Sample`].
    ///
    /// # Errors
    /// As [`tree`](Self::tree).
    pub fn sample(&self) -> Result<Sample> {
        Ok(Sample {
            tree: self.tree()?,
            params: self.params,
            sigma2: self.lik.sigma2(),
            log_joint: self.log_joint(),
        })
    }

    /// Sets the hyperparameters, recomputing every prior term (and every message).
    fn set_params(&mut self, params: PydtParams) {
        self.params = params;
        self.set_tables();
        self.refresh_data();
    }

    /// The tables `w_m` and `H_k` of the hyperparameters for the arena's leaves (detached
    /// ones included).
    fn set_tables(&mut self) {
        let (n, params) = (self.n_leaves(), self.params);
        self.w = std::iter::once(0.0)
            .chain((1..=n).map(|m| params.ln_rate_factor(m).exp()))
            .collect();
        self.h = params.harmonic(n.saturating_sub(1));
    }

    /// Marks every leaf dirty and recomputes the caches: after the data (the latent values
    /// of a probit chain) change.
    pub(super) fn refresh_data(&mut self) {
        for v in 0..self.n_leaves() {
            self.arena
                .mark_dirty(NodeId(v as u32))
                .expect("leaves are never freed");
        }
        self.refresh();
    }

    /// Recomputes the dirty caches and the totals.
    fn refresh(&mut self) {
        let (x, lik, params, h) = (&self.x, &self.lik, &self.params, &self.h);
        self.arena
            .refresh_dirty(|arena, v| node_state_with(arena, v, x, lik, params, h));
        let root = self.arena.root();
        let state = self.arena.cache(root).expect("the root exists");
        self.ln_prior = state.sub_prior;
        self.ln_lik = self.root_log_likelihood();
    }

    /// `ln p(X | T, t, σ²)` from the root's cache (see the [module docs](self)).
    fn root_log_likelihood(&self) -> f64 {
        let node = self.arena.node(self.arena.root()).expect("the root exists");
        self.lik
            .log_likelihood(&node.cache().msg, node.time().min(1.0), self.x.ncols())
    }

    /// Time of `v`'s parent (0 for the root: the origin).
    fn top_time(&self, v: NodeId) -> f64 {
        self.arena
            .parent(v)
            .expect("live node")
            .map_or(0.0, |p| self.arena.time(p).expect("live node"))
    }

    /// `ln` of the unconditioned density of the generative process of one new point on the
    /// current tree ending at `at` (see the [module docs](self)): a density in the time for
    /// a branch, a probability for a branch point.
    fn ln_attach(&self, at: Attachment) -> f64 {
        let (alpha, beta, c) = (self.params.alpha(), self.params.beta(), self.params.c());
        let (end, mut ln_q) = match at {
            Attachment::Branch { below, time } => {
                let m = self.arena.node(below).expect("live node").n_leaves();
                let wait = tau(time) - tau(self.top_time(below));
                let ln_q = c.ln() - (-time).ln_1p() + self.w[m].ln() - c * self.w[m] * wait;
                (below, ln_q)
            }
            Attachment::Node(b) => {
                let node = self.arena.node(b).expect("live node");
                let (m, k) = (node.n_leaves(), node.children().len());
                let wait = tau(node.time()) - tau(self.top_time(b));
                let new = (alpha + k as f64 * beta).max(0.0);
                let ln_q = -c * self.w[m] * wait + new.ln() - (m as f64 + alpha).ln();
                (b, ln_q)
            }
        };
        // The path from the origin: survive each branch above `end` and choose the branch
        // towards it at each branch point.
        let mut child = end;
        while let Some(a) = self.arena.parent(child).expect("live node") {
            let node = self.arena.node(a).expect("live node");
            let m = node.n_leaves();
            let n_child = self.arena.node(child).expect("live node").n_leaves();
            let wait = tau(node.time()) - tau(self.top_time(a));
            ln_q += -c * self.w[m] * wait + (n_child as f64 - beta).ln() - (m as f64 + alpha).ln();
            child = a;
        }
        ln_q
    }

    /// The weight of opening a new branch at a branch point with `k` branches; a rounding
    /// remainder goes to the last branch when it is 0.
    fn new_branch_weight(&self, k: usize) -> f64 {
        (self.params.alpha() + k as f64 * self.params.beta()).max(0.0)
    }

    /// One walk of the generative process of a new point, given up (`None`) as soon as it
    /// passes `t_sub` or draws a time double precision cannot place.
    fn walk<R: Rng + ?Sized>(&self, t_sub: f64, rng: &mut R) -> Option<Attachment> {
        let (alpha, beta, c) = (self.params.alpha(), self.params.beta(), self.params.c());
        let mut u = self.arena.root();
        let (mut t_top, mut tau_top) = (0.0, 0.0);
        loop {
            let node = self.arena.node(u).expect("live node");
            let m = node.n_leaves();
            let e: f64 = rng.sample(Exp1);
            let tau_div = tau_top + e / (c * self.w[m]);
            let t_div = -(-tau_div).exp_m1();
            if node.is_leaf() || t_div < node.time() {
                let ok = t_div > t_top && t_div < node.time().min(t_sub);
                return ok.then_some(Attachment::Branch {
                    below: u,
                    time: t_div,
                });
            }
            if node.time() >= t_sub {
                return None;
            }
            let k = node.children().len();
            let mut r = rng.random::<f64>() * (m as f64 + alpha);
            let mut next = None;
            for &child in node.children() {
                r -= self.arena.node(child).expect("live node").n_leaves() as f64 - beta;
                if r < 0.0 {
                    next = Some(child);
                    break;
                }
            }
            if next.is_none() && self.new_branch_weight(k) <= 0.0 {
                next = node.children().last().copied();
            }
            match next {
                Some(child) => {
                    t_top = node.time();
                    tau_top = tau(t_top);
                    u = child;
                }
                None => return Some(Attachment::Node(u)),
            }
        }
    }

    /// The exact draw of the process conditioned on diverging before `t_sub` (see the
    /// [module docs](self)); `None` only if a drawn time cannot be placed.
    fn walk_conditioned<R: Rng + ?Sized>(&mut self, t_sub: f64, rng: &mut R) -> Option<Attachment> {
        let (alpha, beta, c) = (self.params.alpha(), self.params.beta(), self.params.c());
        let tau_sub = tau(t_sub);
        // Z(u) for every node whose branch starts before t_sub, children first.
        self.z.clear();
        self.z.resize(self.arena.n_slots(), 0.0);
        let root = self.arena.root();
        let region: Vec<NodeId> = {
            let mut order = Vec::new();
            let mut stack = vec![root];
            while let Some(u) = stack.pop() {
                order.push(u);
                let node = self.arena.node(u).expect("live node");
                if !node.is_leaf() && node.time() < t_sub {
                    stack.extend_from_slice(node.children());
                }
            }
            order
        };
        // The probability of diverging on the branch above `u`, before it ends or t_sub.
        let on_branch = |chain: &Self, u: NodeId| -> (f64, f64, f64) {
            let node = chain.arena.node(u).expect("live node");
            let tau_top = tau(chain.top_time(u));
            let rate = c * chain.w[node.n_leaves()];
            let tau_end = if node.is_leaf() {
                f64::INFINITY
            } else {
                tau(node.time())
            };
            let p_div = -(-rate * (tau_end.min(tau_sub) - tau_top)).exp_m1();
            (p_div, rate, tau_top)
        };
        for &u in region.iter().rev() {
            let (p_div, rate, tau_top) = on_branch(self, u);
            let node = self.arena.node(u).expect("live node");
            let mut z = p_div;
            if !node.is_leaf() && node.time() < t_sub {
                let m = node.n_leaves() as f64;
                let mut reach = self.new_branch_weight(node.children().len());
                for &k in node.children() {
                    let n_k = self.arena.node(k).expect("live node").n_leaves() as f64;
                    reach += (n_k - beta) * self.z[k.index()];
                }
                z += (-rate * (tau(node.time()) - tau_top)).exp() * reach / (m + alpha);
            }
            self.z[u.index()] = z;
        }
        let mut u = root;
        loop {
            let (p_div, rate, tau_top) = on_branch(self, u);
            let node = self.arena.node(u).expect("live node");
            if rng.random::<f64>() * self.z[u.index()] < p_div {
                // A truncated exponential on the branch.
                let v: f64 = rng.random::<f64>();
                let tau_div = tau_top - (-v * p_div).ln_1p() / rate;
                let t_div = -(-tau_div).exp_m1();
                let ok = t_div > self.top_time(u) && t_div < node.time().min(t_sub);
                return ok.then_some(Attachment::Branch {
                    below: u,
                    time: t_div,
                });
            }
            let new = self.new_branch_weight(node.children().len());
            let mut r = rng.random::<f64>()
                * (new
                    + node
                        .children()
                        .iter()
                        .map(|&k| {
                            (self.arena.node(k).expect("live node").n_leaves() as f64 - beta)
                                * self.z[k.index()]
                        })
                        .sum::<f64>());
            let mut next = None;
            for &k in node.children() {
                r -= (self.arena.node(k).expect("live node").n_leaves() as f64 - beta)
                    * self.z[k.index()];
                if r < 0.0 {
                    next = Some(k);
                    break;
                }
            }
            if next.is_none() && new <= 0.0 {
                next = node
                    .children()
                    .iter()
                    .rev()
                    .find(|&&k| self.z[k.index()] > 0.0)
                    .copied();
            }
            match next {
                Some(k) => u = k,
                None => return Some(Attachment::Node(u)),
            }
        }
    }

    /// A draw of the new position of a detached subtree whose root is at `t_sub`.
    ///
    /// # Errors
    /// [`RoseTreeError::Numerical`] when no drawn divergence time can be placed in double
    /// precision (a `c` so large that the time rounds onto the branch's top).
    fn draw_attachment<R: Rng + ?Sized>(&mut self, t_sub: f64, rng: &mut R) -> Result<Attachment> {
        for _ in 0..REJECTION_TRIES {
            if let Some(at) = self.walk(t_sub, rng) {
                return Ok(at);
            }
        }
        for _ in 0..CONDITIONED_TRIES {
            if let Some(at) = self.walk_conditioned(t_sub, rng) {
                return Ok(at);
            }
        }
        Err(RoseTreeError::Numerical(format!(
            "no divergence time of a subtree move could be placed in double precision in \
             {CONDITIONED_TRIES} draws (c = {:e} is too large for the branch lengths)",
            self.params.c()
        )))
    }

    /// The end of a subtree move: the subtree `detached` (node `v`) is attached at `at` and
    /// kept with the Metropolis–Hastings probability `min(1, ratio)`, where `ln ratio` is the
    /// change in the log joint from `old_joint`, plus `ln q(old) − ln q(new)` of the
    /// proposal (`ln_q`), plus the change in the number of nodes the move picks from
    /// (`pick`; `n_before` of them before the detach); else the subtree goes back where it
    /// was.
    #[allow(clippy::too_many_arguments)]
    fn attach_or_undo<R: Rng + ?Sized>(
        &mut self,
        v: NodeId,
        detached: &Detached,
        at: Attachment,
        old_joint: f64,
        (ln_q_old, ln_q_new): (f64, f64),
        (pick, n_before): (Pick<'_>, usize),
        rng: &mut R,
    ) -> Result<bool> {
        self.arena.attach(detached, at)?;
        self.refresh();
        let n_after = self.pick_count(pick);
        let ln_ratio = self.log_joint() - old_joint + ln_q_old - ln_q_new
            + (n_before as f64 / n_after as f64).ln();
        let e: f64 = rng.sample(Exp1);
        if -e < ln_ratio {
            return Ok(true);
        }
        let undo = self.arena.detach(v)?;
        debug_assert_eq!(undo.root(), v);
        self.arena.reattach(detached)?;
        self.refresh();
        Ok(false)
    }

    /// How many nodes a move picks from under `pick`.
    fn pick_count(&self, pick: Pick<'_>) -> usize {
        match pick {
            Pick::NonRoot => self.arena.n_nodes() - 1,
            Pick::Holding(leaves) => self.holding(leaves).len(),
        }
    }

    /// The node a move detaches, uniformly among those of `pick` (`None` when there is
    /// none); with the number it was picked from.
    fn pick_node<R: Rng + ?Sized>(&self, pick: Pick<'_>, rng: &mut R) -> Option<(NodeId, usize)> {
        match pick {
            Pick::NonRoot => {
                let count = self.arena.n_nodes() - 1;
                (count >= 1).then(|| (self.random_non_root(rng), count))
            }
            Pick::Holding(leaves) => {
                let nodes = self.holding(leaves);
                (!nodes.is_empty()).then(|| (nodes[rng.random_range(0..nodes.len())], nodes.len()))
            }
        }
    }

    /// The non-root nodes whose subtree holds one of `leaves` (each leaf of the tree
    /// included), in the order of the walks up from `leaves`.
    pub(super) fn holding(&self, leaves: &[NodeId]) -> Vec<NodeId> {
        let root = self.arena.root();
        let mut seen = vec![false; self.arena.n_slots()];
        let mut out = Vec::new();
        for &leaf in leaves {
            let mut v = leaf;
            while v != root && !std::mem::replace(&mut seen[v.index()], true) {
                out.push(v);
                match self.arena.parent(v).expect("live node") {
                    Some(p) => v = p,
                    None => break,
                }
            }
        }
        out
    }

    /// A node other than the root, uniformly (the subtree a move detaches).
    fn random_non_root<R: Rng + ?Sized>(&self, rng: &mut R) -> NodeId {
        let root = self.arena.root();
        loop {
            let s = NodeId(rng.random_range(0..self.arena.n_slots()) as u32);
            if s != root && self.arena.node(s).is_ok() {
                return s;
            }
        }
    }

    /// One subtree move (see the [module docs](self)); returns whether it was accepted.
    ///
    /// # Errors
    /// Only on a broken invariant of the arena.
    pub fn subtree_move<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<bool> {
        self.subtree_move_of(Pick::NonRoot, rng)
    }

    /// [`subtree_move`](Self::subtree_move) of a node picked uniformly under `pick`.
    pub(super) fn subtree_move_of<R: Rng + ?Sized>(
        &mut self,
        pick: Pick<'_>,
        rng: &mut R,
    ) -> Result<bool> {
        let Some((v, n_before)) = self.pick_node(pick, rng) else {
            return Ok(false);
        };
        let old_joint = self.log_joint();
        let detached = self.arena.detach(v)?;
        let t_sub = self.arena.time(v)?;
        let ln_q_old = self.ln_attach(detached.origin());
        let at = self.draw_attachment(t_sub, rng)?;
        let ln_q_new = self.ln_attach(at);
        self.attach_or_undo(
            v,
            &detached,
            at,
            old_joint,
            (ln_q_old, ln_q_new),
            (pick, n_before),
            rng,
        )
    }

    /// Slice-samples the time of every branch point (see the [module docs](self)).
    ///
    /// # Errors
    /// Only on a broken invariant of the arena.
    pub fn update_times<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Result<()> {
        let internal: Vec<NodeId> = (self.n_leaves()..self.arena.n_slots())
            .map(|s| NodeId(s as u32))
            .filter(|&s| self.arena.node(s).is_ok())
            .collect();
        self.update_times_of(&internal, rng)
    }

    /// Slice-samples the times of the branch points `internal`, in order.
    pub(super) fn update_times_of<R: Rng + ?Sized>(
        &mut self,
        internal: &[NodeId],
        rng: &mut R,
    ) -> Result<()> {
        for &b in internal {
            let t0 = self.arena.time(b)?;
            let lo = self.top_time(b);
            let hi = self
                .arena
                .children(b)?
                .iter()
                .map(|&k| self.arena.time(k).expect("live node"))
                .fold(f64::INFINITY, f64::min);
            let fx0 = self.log_joint();
            let t1 = slice_sample(
                t0,
                fx0,
                |t| {
                    self.arena.set_time(b, t).expect("t lies within its bounds");
                    self.refresh();
                    self.log_joint()
                },
                hi - lo,
                (lo, hi),
                rng,
            );
            self.arena.set_time(b, t1)?;
            self.refresh();
        }
        Ok(())
    }

    /// A Gibbs update of `c` from eq 13 (see the [module docs](self)).
    fn update_c<R: Rng + ?Sized>(&mut self, prior: GammaPrior, rng: &mut R) -> Result<()> {
        let (mut count, mut slope) = (0usize, 0.0);
        let mut counts = Vec::new();
        for s in self.n_leaves()..self.arena.n_slots() {
            let Ok(node) = self.arena.node(NodeId(s as u32)) else {
                continue;
            };
            counts.clear();
            counts.extend(
                node.children()
                    .iter()
                    .map(|&k| self.arena.node(k).expect("live node").n_leaves()),
            );
            count += 1;
            slope += harmonic_gap(&self.h, &counts) * (-node.time()).ln_1p();
        }
        let shape = prior.shape + count as f64;
        let rate = prior.rate - slope;
        let c = Gamma::new(shape, 1.0 / rate)
            .map_err(|e| RoseTreeError::Numerical(format!("the Gibbs update of c: {e}")))?
            .sample(rng);
        let params = PydtParams::new(self.params.alpha(), self.params.beta(), c)?;
        self.set_params(params);
        Ok(())
    }

    /// `ln p(T, t | α, β, c)` of the current tree under other hyperparameters.
    fn log_prior_with(&self, params: &PydtParams, nodes: &[(Vec<usize>, f64)]) -> f64 {
        let h = params.harmonic(self.n_leaves().saturating_sub(1));
        let ln_c = params.c().ln();
        nodes
            .iter()
            .map(|(counts, ln1m_t)| {
                params.ln_structure(counts)
                    + ln_c
                    + (params.c() * harmonic_gap(&h, counts) - 1.0) * ln1m_t
            })
            .sum()
    }

    /// Slice updates of `ln α` and `logit β` (see the [module docs](self)).
    fn update_alpha_beta<R: Rng + ?Sized>(
        &mut self,
        learn: Learn,
        priors: &Hyperpriors,
        rng: &mut R,
    ) -> Result<()> {
        let nodes: Vec<(Vec<usize>, f64)> = (self.n_leaves()..self.arena.n_slots())
            .filter_map(|s| self.arena.node(NodeId(s as u32)).ok())
            .map(|node| {
                let counts = node
                    .children()
                    .iter()
                    .map(|&k| self.arena.node(k).expect("live node").n_leaves())
                    .collect();
                (counts, (-node.time()).ln_1p())
            })
            .collect();
        let mut params = self.params;
        if learn.alpha {
            let (beta, c) = (params.beta(), params.c());
            let f = |u: f64| match PydtParams::new(u.exp(), beta, c) {
                Ok(p) if u.exp() > 0.0 && u.exp().is_finite() => {
                    self.log_prior_with(&p, &nodes) + priors.alpha.ln_pdf(u.exp()) + u
                }
                _ => f64::NEG_INFINITY,
            };
            let u0 = params.alpha().ln();
            let u1 = slice_sample(u0, f(u0), f, 1.0, (-700.0, 700.0), rng);
            params = PydtParams::new(u1.exp(), beta, c)?;
        }
        if learn.beta {
            let (alpha, c) = (params.alpha(), params.c());
            let logistic = |u: f64| 1.0 / (1.0 + (-u).exp());
            let f = |u: f64| {
                let b = logistic(u);
                match PydtParams::new(alpha, b, c) {
                    Ok(p) if b > 0.0 && b < 1.0 => {
                        // dβ/du = β(1 − β).
                        self.log_prior_with(&p, &nodes)
                            + priors.beta.ln_pdf(b)
                            + b.ln()
                            + (-b).ln_1p()
                    }
                    _ => f64::NEG_INFINITY,
                }
            };
            let b0 = params.beta();
            let u0 = (b0 / (1.0 - b0)).ln();
            let u1 = slice_sample(u0, f(u0), f, 1.0, (-700.0, 700.0), rng);
            params = PydtParams::new(alpha, logistic(u1), c)?;
        }
        if params != self.params {
            self.set_params(params);
        }
        Ok(())
    }

    /// One sweep: for a probit chain first a Gibbs draw of the latent values, then `N`
    /// subtree moves, the divergence times, then the learnt hyperparameters. Returns the
    /// number of accepted moves and the number proposed.
    ///
    /// # Errors
    /// [`RoseTreeError::Interrupted`] when `interrupt` returns true (polled between moves);
    /// otherwise only on a broken invariant.
    pub fn sweep<R: Rng + ?Sized>(
        &mut self,
        config: &McmcConfig,
        rng: &mut R,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<(usize, usize)> {
        let moves = self.n_leaves();
        self.sweep_over(config, Pick::NonRoot, moves, rng, interrupt)
    }

    /// A [`sweep`](Self::sweep) of `moves` subtree moves that pick from `pick`, whose time
    /// moves visit the branch points among those nodes and the root (all of them under
    /// [`Pick::NonRoot`]).
    ///
    /// `moves` must not depend on the state (a number of moves that did would bias the
    /// chain towards the states with fewer): a full sweep makes `N`, a restricted one the
    /// number of nodes on the new leaves' paths when the sweeps begin.
    pub(super) fn sweep_over<R: Rng + ?Sized>(
        &mut self,
        config: &McmcConfig,
        pick: Pick<'_>,
        moves: usize,
        rng: &mut R,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<(usize, usize)> {
        let n = self.n_leaves();
        let proposals = if n >= 2 { moves } else { 0 };
        let mut accepted = 0;
        if let Some(chain) = L::isotropic(self)
            && chain.observed.is_some()
        {
            chain.update_latent(rng)?;
        }
        // A restricted sweep makes few moves: the Gibbs move's O(n d) each is worth it at
        // any size. Only the isotropic Brownian likelihood has the Gibbs move.
        let kind = match pick {
            _ if L::isotropic(self).is_none() => SubtreeMove::Prior,
            Pick::NonRoot => config.subtree_move.for_points(n),
            Pick::Holding(_) if config.subtree_move == SubtreeMove::Prior => SubtreeMove::Prior,
            Pick::Holding(_) => SubtreeMove::Gibbs,
        };
        for i in 0..proposals {
            if i % 64 == 0 && interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            accepted += usize::from(match kind {
                SubtreeMove::Gibbs => L::isotropic(self)
                    .expect("the Gibbs move is chosen for the isotropic likelihood alone")
                    .gibbs_move_of(pick, rng)?,
                _ => self.subtree_move_of(pick, rng)?,
            });
        }
        match pick {
            Pick::NonRoot => self.update_times(rng)?,
            Pick::Holding(leaves) => {
                let mut internal: Vec<NodeId> = self
                    .holding(leaves)
                    .into_iter()
                    .filter(|&v| !self.arena.node(v).expect("live node").is_leaf())
                    .collect();
                internal.push(self.arena.root());
                self.update_times_of(&internal, rng)?;
            }
        }
        if config.learn.c {
            self.update_c(config.priors.c, rng)?;
        }
        if config.learn.alpha || config.learn.beta {
            self.update_alpha_beta(config.learn, &config.priors, rng)?;
        }
        if config.learn.sigma2
            && let Some(chain) = L::isotropic(self)
        {
            chain.update_sigma2(config.priors.precision, rng)?;
        }
        Ok((accepted, proposals))
    }
}

/// The moves of the isotropic Brownian likelihood alone (see the [module docs](self)).
impl Chain<Isotropic> {
    /// Backward sampling of every node's location given the data (see the
    /// [module docs](self)): a draw from `p(locations | X, T, t, σ²)`, `D` values per arena
    /// slot (a leaf's are its data). Also returns the branches' total
    /// `Σ_{[ab]} ‖x_b − x_a‖²/(t_b − t_a)` and their number, the origin's branch included.
    pub(super) fn sample_locations<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
    ) -> Result<(Vec<f64>, f64, usize)> {
        let d = self.x.ncols();
        let sd = self.lik.sigma2.sqrt();
        let mut loc = vec![0.0; self.arena.n_slots() * d];
        let mut sum_sq = 0.0;
        let mut edges = 0usize;
        let root = self.arena.root();
        let order: Vec<NodeId> = self.arena.pre_order(root)?.collect();
        for v in order {
            let node = self.arena.node(v)?;
            let state = node.cache();
            let (len, from) = match node.parent() {
                Some(p) => (node.time() - self.arena.time(p)?, Some(p)),
                None => (node.time().min(1.0), None),
            };
            // N(x; x_parent, σ² len) · N(x; μ_v, σ² v_v): mean and variance of the product.
            let bridge = state.msg.given_parent(len);
            let post_sd = sd * bridge.var.sqrt();
            let own = state.msg.mean();
            // The message's weight as `1 − k` rather than `bridge.own` (the same weight,
            // rounded otherwise): a seed keeps giving the draws it gave before.
            let weight = 1.0 - bridge.parent;
            for j in 0..d {
                let parent = from.map_or(0.0, |p| loc[p.index() * d + j]);
                let mean = bridge.parent * parent + weight * own[j];
                let z: f64 = rng.sample(StandardNormal);
                let value = mean + post_sd * z;
                loc[v.index() * d + j] = value;
                sum_sq += (value - parent).powi(2) / len;
            }
            edges += 1;
        }
        Ok((loc, sum_sq, edges))
    }

    /// Backward sampling of every node's location given the data, then the Gibbs update
    /// of `1/σ²` from eq 14 (see the [module docs](self)).
    fn update_sigma2<R: Rng + ?Sized>(&mut self, prior: GammaPrior, rng: &mut R) -> Result<()> {
        let d = self.x.ncols();
        if d == 0 {
            return Ok(());
        }
        let (_, sum_sq, edges) = self.sample_locations(rng)?;
        let shape = prior.shape + 0.5 * (edges * d) as f64;
        let rate = prior.rate + 0.5 * sum_sq;
        let precision = Gamma::new(shape, 1.0 / rate)
            .map_err(|e| RoseTreeError::Numerical(format!("the Gibbs update of sigma2: {e}")))?
            .sample(rng);
        self.lik.sigma2 = 1.0 / precision;
        check_sigma2(self.lik.sigma2)?;
        self.ln_lik = self.root_log_likelihood();
        Ok(())
    }
}

/// `ln p(X | T, t, σ²)` of the data under the arena's root, from the root's cache (see the
/// [module docs](self)); 0 without columns.
pub(super) fn root_log_likelihood(arena: &Arena<NodeState>, d: usize, sigma2: f64) -> f64 {
    let node = arena.node(arena.root()).expect("the root exists");
    node.cache()
        .msg
        .against_origin(node.time().min(1.0))
        .log_z(d, sigma2)
}

/// The cache of node `v` from its children's under the isotropic Brownian likelihood (see
/// the [module docs](self)).
pub(super) fn node_state(
    arena: &Arena<NodeState>,
    v: NodeId,
    x: &Array2<f64>,
    params: &PydtParams,
    h: &[f64],
) -> NodeState {
    // Messages in units of σ²: the rate does not enter them.
    node_state_with(arena, v, x, &Isotropic::new(1.0), params, h)
}

/// The cache of node `v` from its children's under the likelihood `lik` (see the
/// [module docs](self)).
fn node_state_with<L: ChainLikelihood>(
    arena: &Arena<NodeState<L::Message>>,
    v: NodeId,
    x: &Array2<f64>,
    lik: &L,
    params: &PydtParams,
    h: &[f64],
) -> NodeState<L::Message> {
    let node = arena.node(v).expect("a dirty node is live");
    if node.is_leaf() {
        return NodeState {
            msg: lik.leaf(x.row(v.index()), v.index()),
            ..NodeState::default()
        };
    }
    let t = node.time();
    let mut sub_prior = 0.0;
    let mut counts = Vec::with_capacity(node.children().len());
    let msg = lik.node(
        x.ncols(),
        node.children().iter().map(|&k| {
            let child = arena.node(k).expect("live child");
            let s = child.cache();
            counts.push(child.n_leaves());
            sub_prior += s.sub_prior;
            (&s.msg, child.time() - t)
        }),
    );
    let prior = params.ln_structure(&counts)
        + params.c().ln()
        + (params.c() * harmonic_gap(h, &counts) - 1.0) * (-t).ln_1p();
    NodeState {
        msg,
        prior,
        sub_prior: sub_prior + prior,
    }
}

/// Where a chain starts: a tree (or a draw from the prior when `None`) and the
/// hyperparameters.
#[derive(Debug, Clone, Copy)]
pub struct Start<'a> {
    /// The initial tree, whose leaves are the data rows.
    pub tree: Option<&'a Tree>,
    /// The initial (or fixed) `α`, `β`, `c`.
    pub params: PydtParams,
    /// The initial (or fixed) Brownian variance per unit time.
    pub sigma2: f64,
}

/// Runs a chain from `start` for `config.n_iter` sweeps, keeping every `thin`-th state
/// after the burn-in; `progress(sweep, row)` is called after each sweep.
///
/// # Errors
/// Those of [`Chain::new`] (or [`Chain::new_probit`] with [`Likelihood::Probit`]) and of
/// the configuration's check (naming `thin`, `burn_in`, `alpha`, `beta`, a prior, or
/// `sigma2` when it is to be learnt under the probit likelihood);
/// [`RoseTreeError::Interrupted`] when `interrupt` returns true.
pub fn run(
    x: ArrayView2<'_, f64>,
    start: Start<'_>,
    config: &McmcConfig,
    seed: u64,
    interrupt: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, &TraceRow),
) -> Result<McmcResult> {
    let Start {
        tree: init,
        params,
        sigma2,
    } = start;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let start = first_tree(x.nrows(), init, &params, config, &mut rng)?;
    let mut chain = Chain::with_likelihood(x, &start, params, sigma2, config.likelihood)?;
    drive(
        &mut chain,
        config,
        Pick::NonRoot,
        &mut rng,
        interrupt,
        progress,
    )
}

/// Runs a chain under the message model `model` (see [`Messages`]) for data `x` from the
/// tree `tree` (a draw from the prior when `None`) with the hyperparameters `params`, for
/// `config.n_iter` sweeps, keeping every `thin`-th state after the burn-in, as [`run`]
/// does for isotropic Brownian motion: the same subtree moves by the prior proposal
/// ([`SubtreeMove::Auto`] is [`SubtreeMove::Prior`] here), the same time and `α`, `β`,
/// `c` moves; the model's rates stay fixed. The kept states' and trace rows' `sigma2` is
/// `NaN`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `likelihood` for [`Likelihood::Probit`],
/// `sigma2` when it is to be learnt, `subtree_move` for [`SubtreeMove::Gibbs`] (moves of
/// the isotropic Brownian likelihood alone); those of [`run`] for the rest of the
/// configuration and of [`Chain::with_model`]; [`RoseTreeError::Interrupted`] when
/// `interrupt` returns true.
#[allow(clippy::too_many_arguments)]
pub fn run_model<M>(
    model: M,
    x: ArrayView2<'_, f64>,
    tree: Option<&Tree>,
    params: PydtParams,
    config: &McmcConfig,
    seed: u64,
    interrupt: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, &TraceRow),
) -> Result<McmcResult>
where
    Messages<M>: ChainLikelihood,
{
    if config.likelihood != Likelihood::Gaussian {
        return Err(RoseTreeError::param(
            "likelihood",
            "the probit observation model is one of isotropic Brownian motion alone",
        ));
    }
    if config.learn.sigma2 {
        return Err(RoseTreeError::param(
            "sigma2",
            "is learnt for isotropic Brownian motion alone; a message model's rates are fixed",
        ));
    }
    if config.subtree_move == SubtreeMove::Gibbs {
        return Err(RoseTreeError::param(
            "subtree_move",
            "the Gibbs re-attachment move is one of isotropic Brownian motion alone; use \
             'prior' or 'auto'",
        ));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let start = first_tree(x.nrows(), tree, &params, config, &mut rng)?;
    let mut chain = Chain::with_model(model, x, &start, params)?;
    drive(
        &mut chain,
        config,
        Pick::NonRoot,
        &mut rng,
        interrupt,
        progress,
    )
}

/// A run's first tree over `n_rows` rows, its configuration checked first: `init`, or a
/// draw from the prior of `params` (from the Dirichlet diffusion tree's where that prior
/// cannot be drawn).
///
/// # Errors
/// Those of the configuration's check; [`RoseTreeError::InvalidParameter`] naming
/// `n_samples` for no rows.
fn first_tree<R: Rng + ?Sized>(
    n_rows: usize,
    init: Option<&Tree>,
    params: &PydtParams,
    config: &McmcConfig,
    rng: &mut R,
) -> Result<Tree> {
    config.check(params)?;
    if n_rows == 0 {
        return Err(RoseTreeError::param("n_samples", "the data have no rows"));
    }
    match init {
        Some(tree) => Ok(tree.clone()),
        None => sample_tree(n_rows, params, rng)
            .or_else(|_| sample_tree(n_rows, &PydtParams::ddt(1.0)?, rng)),
    }
}

/// Runs `config.n_iter` sweeps of `chain` over the nodes of `pick`, keeping every
/// `thin`-th state after the burn-in; `progress(sweep, row)` is called after each sweep.
fn drive<L: ChainLikelihood, R: Rng + ?Sized>(
    chain: &mut Chain<L>,
    config: &McmcConfig,
    pick: Pick<'_>,
    rng: &mut R,
    interrupt: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, &TraceRow),
) -> Result<McmcResult> {
    let mut samples = Vec::new();
    let mut trace = Vec::with_capacity(config.n_iter);
    let (mut proposals, mut accepted) = (0, 0);
    // Fixed for the whole run (see `Chain::sweep_over`).
    let moves = match pick {
        Pick::NonRoot => chain.n_leaves(),
        Pick::Holding(leaves) => chain.holding(leaves).len(),
    };
    for it in 0..config.n_iter {
        let (acc, prop) = chain.sweep_over(config, pick, moves, rng, interrupt)?;
        proposals += prop;
        accepted += acc;
        let p = chain.params();
        let row = TraceRow {
            log_joint: chain.log_joint(),
            log_likelihood: chain.log_likelihood(),
            alpha: p.alpha(),
            beta: p.beta(),
            c: p.c(),
            sigma2: chain.likelihood().sigma2(),
            acceptance: if prop == 0 {
                0.0
            } else {
                acc as f64 / prop as f64
            },
        };
        trace.push(row);
        progress(it, &row);
        if it >= config.burn_in && (it - config.burn_in).is_multiple_of(config.thin) {
            samples.push(chain.sample()?);
        }
    }
    Ok(McmcResult {
        samples,
        trace,
        last: chain.sample()?,
        proposals,
        accepted,
    })
}

pub mod chain_likelihood;
pub mod insert;
pub mod reattach;

pub use chain_likelihood::{Cached, ChainLikelihood, Isotropic, Messages};

#[cfg(test)]
mod tests;
