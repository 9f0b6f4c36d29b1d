//! Greedy Bayesian EM for Pitman–Yor diffusion trees (Knowles & Ghahramani, §5.2): for a
//! fixed tree structure, EM over the divergence times with the internal locations
//! integrated out by belief propagation, point updates of the hyperparameters; over
//! structures, a greedy search that detaches subtrees and re-attaches them where a quick
//! score of the log joint is best, keeping the `K` best trees seen.
//!
//! # What is maximised
//! The objective of a state `(T, t, α, β, c, σ²)` is
//!
//! ```text
//!   F = ln p(X | T, t, σ²) + ln p(T, t | α, β, c) + Σ_b ln t_b (1 − t_b) + Σ_{learnt θ} ln p(θ),
//! ```
//!
//! the exact log joint ([`super::log_likelihood`] + [`super::log_prior`]) with each branch
//! point's time `t_b` measured as `s_b = logit t_b`, the coordinates the paper optimises in
//! (the Jacobian `Σ_b ln t_b (1 − t_b)` over the branch points `b`), plus the log prior
//! densities of the hyperparameters that are learnt ([`Learn`], priors as in
//! [`Hyperpriors`]; `1/σ²`'s density in the precision).
//!
//! *Why the Jacobian.* A maximum over densities depends on the coordinates, and in `t` there
//! is none: a branch point's prior density `∝ c (1 − t)^{c J − 1}` is unbounded at `t = 1` when
//! `c J < 1`, and once `c < 1` the log joint grows without bound as `σ² → ∞` while every
//! cherry's branch point moves towards `t = 1` (a cherry's maximum over its time scales as
//! `σ^{2 − 2cJ}`). Learning `c` and `σ²` runs into that corner on ordinary data. In
//! `u = −ln(1 − t)` the density `∝ c e^{−c J u}` is bounded but peaks at `u = 0`, so the
//! maximum pulls branch points to the origin and `c` up. In `s` the density
//! `∝ c t (1 − t)^{c J}` vanishes at both ends and peaks inside, at `t = 1/(1 + c J)` alone.
//! The kept trees report the log joint in `t` ([`EmTree::log_joint`]), comparable with
//! [`super::mcmc`]'s.
//!
//! Every step below is a (generalised) EM or coordinate-ascent step on `F`, so `F`
//! never decreases; a step that would lower it because of rounding is undone.
//!
//! # E-step: the locations given the tree (belief propagation)
//! Each node `v` caches the upward message from the data below it, `N(x_v; μ_v, σ² u_v I)`
//! (`u_v = 0` at a leaf; the caches of [`super::mcmc`]). Given its parent `a` (the origin,
//! location 0 at `t = 0`, above the root), the location of `v` depends on the data only
//! through that message, and with the branch length `ℓ = t_v − t_a`:
//!
//! ```text
//!   x_v | x_a, X  ~  N(k x_a + (1 − k) μ_v, σ² ℓ u_v/(ℓ + u_v)),    k = u_v/(ℓ + u_v).
//! ```
//!
//! A top-down pass from the origin (mean 0, variance 0) gives the posterior marginals
//! `N(m_v, σ² P_v I)`: `m_v = k m_a + (1 − k) μ_v`, `P_v = k² P_a + ℓ u_v/(ℓ + u_v)`, and, since
//! `x_v − x_a = (1 − k)(μ_v − x_a) + noise`, the expected squared length of each branch
//! (the message layer's [`UnitMessage::posterior_below`](crate::models::messages::UnitMessage::posterior_below))
//!
//! ```text
//!   S_v = E‖x_v − x_a‖² = (1 − k)² (‖μ_v − m_a‖² + D σ² P_a) + D σ² ℓ u_v/(ℓ + u_v).
//! ```
//!
//! # M-step over the divergence times (eq 15)
//! With `S` fixed, the expected complete log joint as a function of the times is
//!
//! ```text
//!   Q(t) = Σ_branches [−(D/2) ln ℓ_v − S_v/(2σ² ℓ_v)] + Σ_internal [c J_b ln(1 − t_b) + ln t_b] + const,
//! ```
//!
//! the paper's eq 15 with point values of `c` and `1/σ²` and the Jacobian to `s` (which
//! turns its `c J − 1` into `c J` and adds `ln t_b`). It is maximised over all the
//! times jointly by L-BFGS (the `argmin` crate, Moré–Thuente line search).
//!
//! *Parametrisation.* L-BFGS does not run on `s = logit t` itself (the objective's
//! coordinates, which fix what is maximised, not how): those do not keep a parent before its
//! children (the `1/ℓ` terms do, but only from inside: a line search may step across). Here
//! every point of `ℝ^{|I|}` is a valid tree: with a ceiling `1 − δ` ([`TIME_GAP`] `= δ`) and
//! `h_v = 1 − δ − t_v` the gap below it (`h = 1 − δ` at the origin), each internal node takes
//! a fraction `σ(s_v)` of its parent's gap:
//!
//! ```text
//!   h_v = h_a σ(−s_v),    ℓ_v = t_v − t_a = h_a σ(s_v),    1 − t_v = δ + h_v,
//! ```
//!
//! i.e. `ln h_v = ln h_a − softplus(s_v)` and `ln ℓ_v = ln h_a − softplus(−s_v)`: times increase
//! down the tree and stay below `1 − δ`, so leaf branches (`ℓ = δ + h_a`) never vanish. For
//! a node at the origin these are the objective's `s = logit t` up to `δ`. `δ` keeps exactly
//! repeated points, whose density grows without bound as their branch point approaches
//! `t = 1`, at representable times.
//!
//! *Gradient.* Write `ε_v = ∂/∂ln ℓ_v [−(D/2) ln ℓ_v − S_v/(2σ²ℓ_v)] = −D/2 + S_v/(2σ²ℓ_v)`
//! for an internal branch, and for the leaf branches below `b` (their length is `δ + h_b`)
//! `ε^L_b = −(D/2) n^L_b + S^L_b/(2σ²(δ + h_b))` with `n^L_b` of them and `S^L_b` the sum of
//! their `S`. Since `∂ ln h_j/∂s_i = −σ(s_i)` for every internal `j` under `i` (`i` itself
//! included), `∂ ln ℓ_i/∂s_i = σ(−s_i)`, `∂ ln ℓ_j/∂s_i = −σ(s_i)` for internal `j` strictly
//! under `i`, `∂ ln(δ + h_j)/∂s_i = −σ(s_i) h_j/(δ + h_j)` and `∂ ln t_j/∂s_i = σ(s_i) h_j/t_j`
//! (`t_j` summed down the tree, not `1 − δ − h_j`, to keep a small `t_j`'s digits):
//!
//! ```text
//!   ∂Q/∂s_i = ε_i σ(−s_i) − σ(s_i) A_i,
//!   A_i = (c J_i + ε^L_i) h_i/(δ + h_i) − h_i/t_i + Σ_{internal children k} (ε_k + A_k),
//! ```
//!
//! accumulated children first: `O(|I|)` per evaluation, free of `D` (the `S` carry the
//! data). Logs of branch lengths below `e^{−300}` are floored (a region no optimum reaches)
//! so that the line search never meets an overflow.
//!
//! # Hyperparameters
//! With the E-step's `q` held fixed, each update maximises `F`'s lower bound in one
//! hyperparameter (generalised EM):
//! - `1/σ²`: the variational posterior is the Gibbs conditional of eq 14 with the expected
//!   statistics, `Gamma(a_σ + |E| D/2, b_σ + Σ_v S_v/(2ℓ_v))` over all `|E|` branches (the one
//!   from the origin and those into the leaves included); the point value is its mode
//!   `(a_σ + |E| D/2 − 1)/(b_σ + Σ_v S_v/(2ℓ_v))`, which maximises
//!   `E_q[ln p(X, x | T, t, σ²)] + ln p(1/σ²)`. At a fixed point of EM it maximises
//!   `ln p(X | T, t, σ²) + ln p(1/σ²)` itself.
//! - `c`: no latent variable enters; the posterior is exactly eq 13,
//!   `Gamma(a_c + |I|, b_c − Σ_b J_b ln(1 − t_b))`, and its mode maximises `F` in `c`.
//! - `α` and `β`: golden-section search (the `argmin` crate) on `ln α` and `logit β` over
//!   the structure and time terms (eqs 7 with the erratum, 9) plus their log prior
//!   densities; the result is kept only if `F` improves. Learnt only if asked.
//!
//! # Greedy search over structures
//! *Quick score.* With a subtree detached from the tree (what remains is `R`), attaching it at
//! a position `X` gives a tree `T'` whose exact log joint at the current times (a new branch
//! point at the midpoint of the branch, or of its part before the subtree's root) is
//!
//! ```text
//!   ln p(X_R, R) + [ln p(T') − ln p(R)] + ln p(X_s | X_R, T').
//! ```
//!
//! The prior ratio collects the new or changed branch point and the changed terms of its
//! ancestors (their counts grow by the subtree's `n_s` leaves), summed down the tree in one
//! pass. The likelihood term is the subtree's own merges times
//! `N(μ_s; m*, σ²(p* + u_s + t_s − t*) I)`, with `N(m*, σ² p*)` the posterior of the location at
//! the attachment point given `X_R`: the product of the message from outside the branch's
//! subtree (a top-down pass with leave-one-out products over siblings) and the branch's
//! upward message (the message layer's [`Outside`] and
//! [`BranchJoin`]). One detachment scores every branch
//! midpoint and every branch point in `O(N D)`; the scores are exact log joints of the
//! candidate trees.
//!
//! The current tree's EM runs to convergence (at most 1000 steps) after the initial tree is
//! built and after each pass; a candidate's runs at most [`EmConfig::em_steps`] steps.
//!
//! *Local EM for candidates.* A move changes the terms of `Q` only along the paths from the
//! root to where the subtree left and to where it joined (their counts, hence `c J`), and at
//! the moved subtree's root. A candidate therefore gets EM over those times alone
//! (`State::local_em`): each round a full `O(N D)` E-step and an M-step over the free times
//! with every other *time* fixed (`LocalProblem`: `O(path)` per evaluation instead of
//! `O(N)`), the hyperparameters held. Each round is a generalised EM step on `F` (a
//! coordinate block of the M-step), so the candidate's `F` is exact and never below what
//! its first E-step started from; it is at most what the full M-step reaches from the same
//! E-step, and equal when every internal node is on the paths. The accepted candidate then
//! gets full EM (all times and the learnt hyperparameters, at most
//! [`EmConfig::em_steps`] steps), which only raises `F`.
//!
//! *Moves.* Every non-root node is detached in turn (in an order drawn from the seed), the
//! [`EmConfig::n_candidates`] best positions that change the structure get local EM, and the
//! best of them replaces the current tree, after full EM, if it raises `F`. A pass with no
//! accepted move ends the search.
//!
//! *Initial tree* (unless given): the best by `F`, after EM, of
//! - sequential attachment (the paper's): the points one at a time, each at the best of its
//!   best-scoring positions after local EM, followed by full EM, once in the left-to-right
//!   leaf order of the Ward dendrogram of the rows (Euclidean; the `kodama` crate) and once
//!   in an order drawn from the seed. The hyperparameters are held at their starting values while it is built
//!   (learnt from a few points they can fall into a corner such as `β → 1`, where every
//!   branch point sits at `t ≈ 0`) and learnt from the complete tree on;
//! - for `k = 1 … 12`, the Ward dendrogram cut into `k` clusters, each a branch point over
//!   its rows, under one root (skipped when `F = −∞`, as for the DDT's multi-way nodes).
//!
//! Why more than the paper's start: the search is local, and with `β` learnt `F` has
//! distant optima. A branch point with many children makes a new branch there likely
//! (`(α + Kβ)/(m + α)`), so once early points hang at the root, later ones follow them there
//! rather than start a cluster, and learning drives `β → 1`. On the four clusters of the
//! paper's Figure 5 (`N = 100`, three draws) the search from sequential attachment ends
//! 15–40 nats of `F` below the four-way tree it reaches from the Ward cut `k = 4`.
//!
//! *Cost.* One detachment costs `O(N D)` for the scores and `n_candidates` local EMs of
//! `O(N D + P · L)` per step (`P` free times on the paths, `L` objective evaluations of
//! L-BFGS); only accepted moves pay for full EM, `O(N D + N · L)` per step. The searches over
//! `α` and `β` pool the branch points by their counts (`PriorSummary`): `O(N)` logarithms
//! per evaluation, no log-gamma function.
//!
//! # Binary data: the probit likelihood
//! With [`EmConfig::likelihood`] = [`Likelihood::Probit`] the data are the signs of the
//! leaves' latent values `z` ([`super::probit`]); `σ²` is fixed (not identified) and
//! `ln p(X | T, t)` in `F` is EP's `ln Z_EP`
//! ([`expectation_propagation`](super::probit::expectation_propagation)), rerun on every
//! change of the tree or times from the sites it had before (to `10⁻⁷ σ`; a kept tree's
//! reported log joint reruns it from flat sites to EP's defaults). This is EM with EP in the
//! E-step (the paper's "EP on the probit factor"):
//! - *E-step.* EP's sites `N(z_nd; μ̃_nd, 1/τ̃_nd)` are Gaussian pseudo-observations of the
//!   latent values, so `q` over all locations, `z` included, is Gaussian on the tree — but
//!   with a precision per leaf *and column*, not the isotropic messages above. One scalar
//!   belief propagation per column: upward messages `(λ_v, η_v)` in precision form (a leaf's
//!   is its site, `(0, 0)` where the entry is missing), lifted across a branch of variance
//!   `L = σ²ℓ` to `(λ, η)/(1 + Lλ)`; then top-down, with `f = 1/(1 + Lλ_v)`,
//!   `x_v | x_a ~ N(f x_a + L f η_v, L f)`, so
//!
//!   ```text
//!     m_v = f m_a + L f η_v,   P_v = f² P_a + L f,
//!     E(x_v − x_a)² = (L f (η_v − λ_v m_a))² + (L λ_v f)² P_a + L f,
//!   ```
//!
//!   summed over the columns into `S_v`, the leaves' branches included (their `z` is latent):
//!   the message layer's [`ScalarTree`] and
//!   [`Precision::posterior_below`](crate::models::messages::Precision::posterior_below).
//! - *M-step.* `Q(t)` above with these `S`, unchanged: the branch into a leaf is the branch
//!   into its latent value in every column. `c`, `α`, `β` as above.
//! - Every update is kept only if `F` (with `ln Z_EP`) does not fall, as above; EP's
//!   evidence is not a bound, so this guard, not EM's theory, makes `F` non-decreasing.
//! - *Quick scores* need a Gaussian stand-in for the data: each entry's latent mean under a
//!   lone `N(0, σ²)` truncated to its sign, `±σ√(2/π)` (0 where missing). They only rank the
//!   positions that get EM; what is kept is decided by `F`.
//!
//! # Random streams
//! One `Xoshiro256PlusPlus` seeded from the caller's seed draws the order of the points and
//! of the subtrees; the search is sequential and a function of the seed and the inputs.

use std::cmp::Ordering;

use argmin::core::{CostFunction, Executor, Gradient, State as _};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use ndarray::{Array2, ArrayView2};
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::mcmc::{Hyperpriors, Learn, NodeState, node_state, root_log_likelihood};
use super::probit::{
    EpConfig, EpResult, Likelihood, arena_tree, check_binary, expectation_propagation_arena, run_ep,
};
use super::{PydtParams, check_diffusion_tree, check_sigma2, harmonic_gap};
use crate::error::{Result, RoseTreeError};
use crate::math::ln_gamma;
use crate::models::messages::{BranchJoin, Outside, Precision, ScalarTree, SplitLogZ};
use crate::optimize::golden_max;
use crate::progress;
use crate::tree::arena::{Arena, Attachment, NodeId};
use crate::tree::{Topology, Tree};

/// `δ`: divergence times stay at most `1 − δ` during EM (see the [module docs](self)).
pub const TIME_GAP: f64 = 1e-9;

/// EP's settings in the probit E-step: EP runs on every change of the tree, from the sites
/// it last had, until no tilted moment moves by more than `10⁻⁷ σ`.
const EP: EpConfig = EpConfig {
    max_iter: 200,
    tol: 1e-7,
};

/// The floor of `ln ℓ` inside the M-step objective.
const LN_LEN_FLOOR: f64 = -300.0;

/// The most EM steps that polish the current tree after the initial tree is built and
/// after each pass (a candidate gets [`EmConfig::em_steps`]).
const POLISH_STEPS: usize = 1000;

/// The most L-BFGS iterations of one M-step.
const LBFGS_MAX_ITERS: u64 = 200;

/// The settings of [`greedy_em`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EmConfig {
    /// The most passes of re-attachment over all subtrees.
    pub max_iter: usize,
    /// How many distinct trees to keep, best first.
    pub k_best: usize,
    /// How many of the best-scoring positions of a detached subtree get EM.
    pub n_candidates: usize,
    /// The most EM steps (E-step, M-step, hyperparameters) per tree.
    pub em_steps: usize,
    /// Which hyperparameters to learn.
    pub learn: Learn,
    /// Their priors.
    pub priors: Hyperpriors,
    /// EM stops when a step raises the objective by less than this; a move is accepted when
    /// it raises the objective by more.
    pub tol: f64,
    /// Gaussian data, or binary data under the probit likelihood (EP in the E-step).
    pub likelihood: Likelihood,
}

impl Default for EmConfig {
    /// 10 passes, `K = 10`, 3 candidates, 10 EM steps, nothing learnt, default priors,
    /// `tol = 1e-6`, Gaussian likelihood.
    fn default() -> Self {
        Self {
            max_iter: 10,
            k_best: 10,
            n_candidates: 3,
            em_steps: 10,
            learn: Learn::default(),
            priors: Hyperpriors::default(),
            tol: 1e-6,
            likelihood: Likelihood::Gaussian,
        }
    }
}

impl EmConfig {
    fn check(&self, params: &PydtParams) -> Result<()> {
        for (name, v) in [
            ("k_best", self.k_best),
            ("n_candidates", self.n_candidates),
            ("em_steps", self.em_steps),
        ] {
            if v == 0 {
                return Err(RoseTreeError::param(name, "must be at least 1"));
            }
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(RoseTreeError::param(
                "tol",
                format!("must be finite and ≥ 0, got {}", self.tol),
            ));
        }
        self.priors.check()?;
        self.learn.check_start(params, "searched")?;
        if self.likelihood == Likelihood::Probit && self.learn.sigma2 {
            return Err(RoseTreeError::param(
                "sigma2",
                "cannot be learnt under the probit likelihood (its scale is not identified)",
            ));
        }
        Ok(())
    }
}

/// One of the trees kept by [`greedy_em`].
#[derive(Debug, Clone)]
pub struct EmTree {
    /// The tree, heights = divergence times.
    pub tree: Tree,
    /// The hyperparameters.
    pub params: PydtParams,
    /// The Brownian variance per unit time.
    pub sigma2: f64,
    /// `ln p(X, T, t | α, β, c, σ²)`, exactly `log_prior + log_likelihood`; under the probit
    /// likelihood `log_prior` plus [`expectation_propagation`](super::probit::expectation_propagation)'s
    /// `ln Z_EP` with its default settings.
    pub log_joint: f64,
    /// The objective `F` (see the [module docs](self)): the log joint, the Jacobian to
    /// `u = −ln(1 − t)` and the log priors of the learnt hyperparameters.
    pub objective: f64,
}

/// The progress of one pass, for [`greedy_em`]'s callback.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassRow {
    /// The objective after the pass.
    pub objective: f64,
    /// The log joint after the pass.
    pub log_joint: f64,
    /// Moves accepted in the pass.
    pub accepted: usize,
    /// The hyperparameters after the pass.
    pub params: PydtParams,
    /// See `params`.
    pub sigma2: f64,
}

/// The result of [`greedy_em`].
#[derive(Debug, Clone)]
pub struct EmResult {
    /// The `k_best` best distinct trees seen (fewer if fewer were seen), best first.
    pub best: Vec<EmTree>,
    /// The objective of the current tree after the initial tree's EM, then after each pass:
    /// never decreasing.
    pub trace: Vec<f64>,
    /// Moves accepted over the search.
    pub accepted: usize,
}

/// Node `v`'s `d` values in the flat buffer `buf`, and its parent's (`None` for the root).
fn parent_and_own(
    buf: &mut [f64],
    d: usize,
    parent: Option<NodeId>,
    v: NodeId,
) -> (&mut [f64], Option<&[f64]>) {
    let vi = v.index() * d;
    match parent {
        None => (&mut buf[vi..vi + d], None),
        Some(a) if a.index() * d < vi => {
            let (lo, hi) = buf.split_at_mut(vi);
            let ai = a.index() * d;
            (&mut hi[..d], Some(&lo[ai..ai + d]))
        }
        Some(a) => {
            let (lo, hi) = buf.split_at_mut(a.index() * d);
            (&mut lo[vi..vi + d], Some(&hi[..d]))
        }
    }
}

/// `ln dt/ds = ln t(1 − t)` for `s = logit t`.
fn ln_logit_jacobian(t: f64) -> f64 {
    t.ln() + (-t).ln_1p()
}

/// `a ≥ b`, false when either is NaN (a NaN objective is never an improvement).
fn at_least(a: f64, b: f64) -> bool {
    a >= b
}

/// `ln(1 + eˣ)` without overflow.
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// The logistic function `1/(1 + e⁻ˣ)` without overflow.
fn logistic(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The expected complete log joint of the times for L-BFGS (see the [module docs](self)),
/// over the internal nodes in pre-order.
#[derive(Debug, Clone)]
pub(super) struct TimeProblem {
    /// The parent's position in the list; `usize::MAX` for the root (parent = the origin).
    parent: Vec<usize>,
    /// `S` of the node's own branch.
    stat: Vec<f64>,
    /// `c J`: the coefficient of `ln(1 − t)` (see `F` in the [module docs](self)).
    kappa: Vec<f64>,
    /// The number of leaf children, and the sum of `S` over their branches.
    n_leaf: Vec<f64>,
    leaf_stat: Vec<f64>,
    half_d: f64,
    inv_2s2: f64,
}

impl TimeProblem {
    /// The branch term `−(D/2) ln ℓ − S/(2σ²ℓ)` and its derivative in `ln ℓ`.
    fn branch(&self, ln_len: f64, stat: f64) -> (f64, f64) {
        let l = ln_len.max(LN_LEN_FLOOR);
        let quad = stat * self.inv_2s2 * (-l).exp();
        let eps = if ln_len < LN_LEN_FLOOR {
            0.0
        } else {
            quad - self.half_d
        };
        (-self.half_d * l - quad, eps)
    }

    /// `Q(s)` (to maximise), and its gradient into `grad` when given.
    pub(super) fn eval(&self, s: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let m = s.len();
        let mut ln_h = vec![0.0; m];
        let mut eps = vec![0.0; m];
        let mut acc = vec![0.0; m];
        let mut t = vec![0.0; m];
        let ln_h0 = (-TIME_GAP).ln_1p();
        let mut q = 0.0;
        for i in 0..m {
            let lhp = if self.parent[i] == usize::MAX {
                ln_h0
            } else {
                ln_h[self.parent[i]]
            };
            ln_h[i] = lhp - softplus(s[i]);
            let ln_len = lhp - softplus(-s[i]);
            let (phi, e) = self.branch(ln_len, self.stat[i]);
            let h = ln_h[i].exp();
            // t summed down the tree (1 − δ − h loses the digits of a small t).
            t[i] = ln_len.exp()
                + if self.parent[i] == usize::MAX {
                    0.0
                } else {
                    t[self.parent[i]]
                };
            let ln_gap = (TIME_GAP + h).ln();
            let (phi_l, eps_l) = if self.n_leaf[i] > 0.0 {
                let quad = self.leaf_stat[i] * self.inv_2s2 / (TIME_GAP + h);
                (
                    -self.half_d * self.n_leaf[i] * ln_gap - quad,
                    quad - self.half_d * self.n_leaf[i],
                )
            } else {
                (0.0, 0.0)
            };
            q += phi + self.kappa[i] * ln_gap + t[i].ln() + phi_l;
            eps[i] = e;
            acc[i] = (self.kappa[i] + eps_l) * h / (TIME_GAP + h) - h / t[i];
        }
        if let Some(g) = grad {
            for i in (0..m).rev() {
                g[i] = eps[i] * logistic(-s[i]) - logistic(s[i]) * acc[i];
                let p = self.parent[i];
                if p != usize::MAX {
                    acc[p] += eps[i] + acc[i];
                }
            }
        }
        q
    }
}

/// A function of the M-step's free coordinates to maximise, with its gradient.
pub(super) trait TimeObjective {
    /// The value (to maximise), and the gradient into `grad` when given.
    fn eval(&self, s: &[f64], grad: Option<&mut [f64]>) -> f64;
}

impl TimeObjective for TimeProblem {
    fn eval(&self, s: &[f64], grad: Option<&mut [f64]>) -> f64 {
        TimeProblem::eval(self, s, grad)
    }
}

/// `Q` of the M-step over the times of a set of free internal nodes closed upwards (every
/// free node's parent is free, or it is the root), the other times held *fixed* (not their
/// coordinates `s`): the terms of `Q` that involve a free time, i.e. each free node's own
/// branch, its `c J ln(1 − t) + ln t`, and the branches into its fixed children. Each free
/// node takes a fraction `σ(s_v)` of the gap between its parent's time `t_a` and its ceiling
/// `U_v` (the earliest fixed time below it through free nodes, `1 − δ` for a leaf):
///
/// ```text
///   t_v = U_v − b_v,   b_v = (U_v − t_a) σ(−s_v),   ℓ_v = (U_v − t_a) σ(s_v),
/// ```
///
/// so every point of `ℝ^{|free|}` is a valid tree, as in the full problem. `U_v − t_a` of a
/// free parent is `(U_v − U_a) + b_a`, and `1 − t_v`, `t_k − t_v` likewise sums of
/// non-negative parts. Evaluations cost `O(Σ_free (1 + children))`, free of `N` and `D`.
///
/// *Gradient.* With `g_v = ∂Q/∂t_v` at fixed other times (`ε/ℓ` of its own branch, minus
/// those of its children's branches, `−c J/(1 − t_v) + 1/t_v`) and `∂t_w/∂t_v = σ(−s_w)` for a
/// free child `w`, children first: `T_v = g_v + Σ_w σ(−s_w) T_w`,
/// `∂Q/∂s_v = T_v (U_v − t_a) σ(s_v) σ(−s_v)`.
#[derive(Debug, Clone)]
pub(super) struct LocalProblem {
    /// The free parent's position, `usize::MAX` when the parent is fixed or the origin.
    parent: Vec<usize>,
    /// The fixed parent's time (0 for the origin); unused under a free parent.
    floor: Vec<f64>,
    /// `U_v`.
    ceil: Vec<f64>,
    /// `S` of the node's own branch, and `c J`.
    stat: Vec<f64>,
    kappa: Vec<f64>,
    /// The fixed children's branches, `kids[start[i]..start[i + 1]]`: `(t_k − U_v, S_k)`.
    start: Vec<usize>,
    kids: Vec<(f64, f64)>,
    half_d: f64,
    inv_2s2: f64,
}

impl LocalProblem {
    /// `(ln ℓ, φ(ℓ), ∂φ/∂ℓ)` of a branch of length `ℓ = len` with statistic `stat`, with
    /// `φ = −(D/2) ln ℓ − S/(2σ²ℓ)` floored as in the full problem.
    fn branch(&self, len: f64, stat: f64) -> (f64, f64) {
        let ln_len = len.ln();
        let l = ln_len.max(LN_LEN_FLOOR);
        let inv = (-l).exp();
        let quad = stat * self.inv_2s2 * inv;
        let d = if ln_len < LN_LEN_FLOOR {
            0.0
        } else {
            (quad - self.half_d) * inv
        };
        (-self.half_d * l - quad, d)
    }

    /// `(t_v, b_v, U_v − t_a)` of every free node at `s`.
    fn times(&self, s: &[f64]) -> Vec<(f64, f64, f64)> {
        let mut out: Vec<(f64, f64, f64)> = Vec::with_capacity(s.len());
        for (i, &si) in s.iter().enumerate() {
            let gap = match self.parent[i] {
                usize::MAX => self.ceil[i] - self.floor[i],
                a => (self.ceil[i] - self.ceil[a]) + out[a].1,
            };
            let b = gap * logistic(-si);
            out.push((self.ceil[i] - b, b, gap));
        }
        out
    }
}

impl TimeObjective for LocalProblem {
    fn eval(&self, s: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let m = s.len();
        let tb = self.times(s);
        let mut g = vec![0.0; m];
        let mut q = 0.0;
        for i in 0..m {
            let (t, b, gap) = tb[i];
            let (phi, d) = self.branch(gap * logistic(s[i]), self.stat[i]);
            q += phi;
            g[i] += d;
            if self.parent[i] != usize::MAX {
                g[self.parent[i]] -= d;
            }
            let rest = (1.0 - self.ceil[i]) + b;
            q += self.kappa[i] * rest.ln() + t.ln();
            g[i] += -self.kappa[i] / rest + 1.0 / t;
            for &(above, stat) in &self.kids[self.start[i]..self.start[i + 1]] {
                let (phi, d) = self.branch(above + b, stat);
                q += phi;
                g[i] -= d;
            }
        }
        if let Some(grad) = grad {
            for i in (0..m).rev() {
                let (sp, sm) = (logistic(s[i]), logistic(-s[i]));
                grad[i] = g[i] * tb[i].2 * sp * sm;
                if self.parent[i] != usize::MAX {
                    g[self.parent[i]] += sm * g[i];
                }
            }
        }
        q
    }
}

/// `−Q` for argmin, which minimises.
struct Negated<'a, P: TimeObjective>(&'a P);

impl<P: TimeObjective> CostFunction for Negated<'_, P> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, s: &Vec<f64>) -> std::result::Result<f64, argmin::core::Error> {
        let q = self.0.eval(s, None);
        if !q.is_finite() {
            return Err(argmin::core::Error::msg(
                "the M-step objective is not finite",
            ));
        }
        Ok(-q)
    }
}

impl<P: TimeObjective> Gradient for Negated<'_, P> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, s: &Vec<f64>) -> std::result::Result<Vec<f64>, argmin::core::Error> {
        let mut g = vec![0.0; s.len()];
        self.0.eval(s, Some(&mut g));
        g.iter_mut().for_each(|v| *v = -*v);
        Ok(g)
    }
}

/// A one-dimensional function for argmin's golden-section search (minimised).
fn numerical(what: &str, e: impl std::fmt::Display) -> RoseTreeError {
    RoseTreeError::Numerical(format!("{what}: {e}"))
}

/// The E-step's result: posterior marginals `N(m_v, σ² P_v I)` and `S_v = E‖x_v − x_a‖²`,
/// indexed by slot.
#[derive(Debug, Clone)]
pub(super) struct Estep {
    pub(super) mean: Vec<f64>,
    pub(super) var: Vec<f64>,
    pub(super) stat: Vec<f64>,
}

/// A candidate position for a detached subtree, with its quick score.
#[derive(Debug, Clone, Copy)]
pub(super) struct Candidate {
    pub(super) at: Attachment,
    pub(super) score: f64,
}

/// The search state: a tree with cached messages, the hyperparameters and the data.
#[derive(Debug, Clone)]
pub(super) struct State<'a> {
    pub(super) arena: Arena<NodeState>,
    /// The data of the Gaussian caches: the data, or the probit's pseudo-data.
    x: &'a Array2<f64>,
    params: PydtParams,
    sigma2: f64,
    h: Vec<f64>,
    learn: Learn,
    priors: Hyperpriors,
    /// `ln p(x | T, t, σ²)` of the Gaussian caches.
    ln_lik: f64,
    ln_prior: f64,
    probit: Option<ProbitState<'a>>,
}

/// The probit likelihood's part of a [`State`]: the binary data and EP on the current tree.
#[derive(Debug, Clone)]
struct ProbitState<'a> {
    x: &'a Array2<f64>,
    /// The tree EP last ran on (that of the last refresh), and its result.
    tree: ScalarTree,
    ep: EpResult,
}

impl<'a> State<'a> {
    /// A state over `arena` (every cache computed here).
    pub(super) fn new(
        arena: Arena<NodeState>,
        x: &'a Array2<f64>,
        params: PydtParams,
        sigma2: f64,
        learn: Learn,
        priors: Hyperpriors,
    ) -> Self {
        let mut state = Self {
            arena,
            x,
            params,
            sigma2,
            h: Vec::new(),
            learn,
            priors,
            ln_lik: 0.0,
            ln_prior: 0.0,
            probit: None,
        };
        state.set_params(params);
        state
    }

    /// The state with binary data `x` under the probit likelihood (see the
    /// [module docs](self)); its own `x` must be the pseudo-data of [`pseudo_data`].
    pub(super) fn with_probit(mut self, x: &'a Array2<f64>) -> Self {
        let tree = arena_tree(&self.arena, self.sigma2);
        self.probit = Some(ProbitState {
            x,
            ep: run_ep(x.view(), &tree, self.sigma2, &EP, None),
            tree,
        });
        self
    }

    pub(super) fn params(&self) -> PydtParams {
        self.params
    }

    pub(super) fn sigma2(&self) -> f64 {
        self.sigma2
    }

    /// Sets the hyperparameters, recomputing every cache (EP's sites, which do not depend on
    /// them, excepted).
    fn set_params(&mut self, params: PydtParams) {
        self.params = params;
        self.h = params.harmonic(self.arena.n_leaves().saturating_sub(1));
        for v in 0..self.arena.n_leaves() {
            self.arena
                .mark_dirty(NodeId(v as u32))
                .expect("leaves are never freed");
        }
        let probit = self.probit.take();
        self.refresh();
        self.probit = probit;
    }

    /// Recomputes the dirty caches and the totals.
    pub(super) fn refresh(&mut self) {
        let (x, params, h) = (self.x, &self.params, &self.h);
        self.arena
            .refresh_dirty(|arena, v| node_state(arena, v, x, params, h));
        let root = self.arena.root();
        self.ln_prior = self.arena.cache(root).expect("the root exists").sub_prior;
        self.ln_lik = root_log_likelihood(&self.arena, self.x.ncols(), self.sigma2);
        if let Some(p) = &mut self.probit {
            p.tree = arena_tree(&self.arena, self.sigma2);
            p.ep = run_ep(p.x.view(), &p.tree, self.sigma2, &EP, Some(&p.ep));
        }
    }

    /// `ln p(X, T, t | α, β, c, σ²)` of the tree under the root (under the probit
    /// likelihood, with EP's `ln Z_EP` for `ln p(X | T, t)`).
    pub(super) fn log_joint(&self) -> f64 {
        self.probit
            .as_ref()
            .map_or(self.ln_lik, |p| p.ep.log_marginal)
            + self.ln_prior
    }

    /// The log priors of the learnt hyperparameters.
    fn hyper_ln_prior(&self) -> f64 {
        let (l, p) = (&self.learn, &self.priors);
        let mut s = 0.0;
        if l.alpha {
            s += p.alpha.ln_pdf(self.params.alpha());
        }
        if l.beta {
            s += p.beta.ln_pdf(self.params.beta());
        }
        if l.c {
            s += p.c.ln_pdf(self.params.c());
        }
        if l.sigma2 {
            s += p.precision.ln_pdf(1.0 / self.sigma2);
        }
        s
    }

    /// The objective `F` (see the [module docs](self)).
    pub(super) fn objective(&self) -> f64 {
        self.log_joint() + self.hyper_ln_prior() + self.ln_time_jacobian()
    }

    /// `Σ_b ln t_b (1 − t_b)` over the branch points: the log Jacobian from the times `t`
    /// to `s = logit t`.
    fn ln_time_jacobian(&self) -> f64 {
        self.pre_order()
            .into_iter()
            .map(|v| self.arena.node(v).expect("live node"))
            .filter(|node| !node.is_leaf())
            .map(|node| ln_logit_jacobian(node.time()))
            .sum()
    }

    /// The time of `v`'s parent (0 for the root: the origin).
    fn top_time(&self, v: NodeId) -> f64 {
        self.arena
            .parent(v)
            .expect("live node")
            .map_or(0.0, |p| self.arena.time(p).expect("live node"))
    }

    /// The length of the branch above `v`.
    fn branch_len(&self, v: NodeId) -> f64 {
        self.arena.time(v).expect("live node").min(1.0) - self.top_time(v)
    }

    /// The nodes of the tree in pre-order.
    fn pre_order(&self) -> Vec<NodeId> {
        self.arena
            .pre_order(self.arena.root())
            .expect("the root exists")
            .collect()
    }

    /// The E-step (see the [module docs](self)).
    pub(super) fn estep(&self) -> Estep {
        if let Some(p) = &self.probit {
            return self.probit_estep(&p.tree, &p.ep);
        }
        let d = self.x.ncols();
        let slots = self.arena.n_slots();
        let mut e = Estep {
            mean: vec![0.0; slots * d],
            var: vec![0.0; slots],
            stat: vec![0.0; slots],
        };
        for v in self.pre_order() {
            let node = self.arena.node(v).expect("live node");
            let (own, rest) = parent_and_own(&mut e.mean, d, node.parent(), v);
            let pa = node.parent().map_or(0.0, |a| e.var[a.index()]);
            let (var, stat) =
                node.cache()
                    .msg
                    .posterior_below(self.branch_len(v), (rest, pa), self.sigma2, own);
            e.var[v.index()] = var;
            e.stat[v.index()] = stat;
        }
        e
    }

    /// The E-step under the probit likelihood: the leaves' latent values observed through
    /// EP's sites, one scalar belief propagation per column (see the [module docs](self)).
    fn probit_estep(&self, tree: &ScalarTree, ep: &EpResult) -> Estep {
        let d = self.x.ncols();
        let slots = self.arena.n_slots();
        let mut e = Estep {
            mean: vec![0.0; slots * d],
            var: vec![0.0; slots],
            stat: vec![0.0; slots],
        };
        // The upward messages in precision form, and the marginals.
        let mut up = vec![Precision::default(); slots];
        let mut post = Vec::new();
        for j in 0..d {
            for &i in tree.leaves() {
                up[i] = Precision::site(ep.site_means[[i, j]], ep.site_precisions[[i, j]]);
            }
            tree.upward(&mut up);
            tree.posterior(&up, &mut post, |i, [mean, var, sq]| {
                e.mean[i * d + j] = mean;
                e.stat[i] += sq;
                e.var[i] += var / (self.sigma2 * d as f64);
            });
        }
        e
    }

    /// The internal nodes in pre-order, and the M-step problem built from the E-step.
    pub(super) fn time_problem(&self, e: &Estep) -> (Vec<NodeId>, TimeProblem) {
        let internal: Vec<NodeId> = self
            .pre_order()
            .into_iter()
            .filter(|&v| !self.arena.node(v).expect("live node").is_leaf())
            .collect();
        let mut pos = vec![usize::MAX; self.arena.n_slots()];
        for (i, v) in internal.iter().enumerate() {
            pos[v.index()] = i;
        }
        let m = internal.len();
        let mut p = TimeProblem {
            parent: vec![usize::MAX; m],
            stat: vec![0.0; m],
            kappa: vec![0.0; m],
            n_leaf: vec![0.0; m],
            leaf_stat: vec![0.0; m],
            half_d: 0.5 * self.x.ncols() as f64,
            inv_2s2: 0.5 / self.sigma2,
        };
        let mut counts = Vec::new();
        for (i, &v) in internal.iter().enumerate() {
            let node = self.arena.node(v).expect("live node");
            if let Some(a) = node.parent() {
                p.parent[i] = pos[a.index()];
            }
            p.stat[i] = e.stat[v.index()];
            counts.clear();
            for &k in node.children() {
                let child = self.arena.node(k).expect("live node");
                counts.push(child.n_leaves());
                if child.is_leaf() {
                    p.n_leaf[i] += 1.0;
                    p.leaf_stat[i] += e.stat[k.index()];
                }
            }
            p.kappa[i] = self.params.c() * harmonic_gap(&self.h, &counts);
        }
        (internal, p)
    }

    /// The parameters `s` of the current times.
    pub(super) fn times_to_s(&self, internal: &[NodeId]) -> Vec<f64> {
        internal
            .iter()
            .map(|&v| {
                let t = self.arena.time(v).expect("live node");
                let ta = self.top_time(v);
                // Times at or past the ceiling (a given tree, or nudged apart) map to tiny
                // gaps instead of failing.
                let ha = (1.0 - TIME_GAP - ta).max(1e-300);
                let (lo, hi) = (ha * 1e-15, ha * (1.0 - 1e-15));
                let hv = (1.0 - TIME_GAP - t).clamp(lo, hi);
                let ell = (t - ta).clamp(lo, ha);
                ell.ln() - hv.ln()
            })
            .collect()
    }

    /// Sets the internal nodes' times from `s`, in pre-order, keeping each strictly after
    /// its parent in floating point.
    pub(super) fn set_s(&mut self, internal: &[NodeId], s: &[f64]) -> Result<()> {
        let ln_h0 = (-TIME_GAP).ln_1p();
        let mut ln_h = vec![0.0; self.arena.n_slots()];
        let mut by_slot = vec![0.0; self.arena.n_slots()];
        let mut times = Vec::with_capacity(internal.len());
        for (&v, &si) in internal.iter().zip(s) {
            let parent = self.arena.parent(v)?;
            let lhp = parent.map_or(ln_h0, |a| ln_h[a.index()]);
            ln_h[v.index()] = lhp - softplus(si);
            let mut t = 1.0 - TIME_GAP - ln_h[v.index()].exp();
            let ta = parent.map_or(0.0, |a| by_slot[a.index()]);
            if t <= ta {
                t = ta.next_up();
            }
            by_slot[v.index()] = t;
            times.push(t);
        }
        self.set_times(internal, &times)
    }

    /// Moves the internal nodes (in pre-order) to `times`, which must be ordered down the
    /// tree: first each to the earlier of its old and new time (top-down), then to the new
    /// one (bottom-up), so that every intermediate tree is valid.
    pub(super) fn set_times(&mut self, internal: &[NodeId], times: &[f64]) -> Result<()> {
        for (&v, &t) in internal.iter().zip(times) {
            let old = self.arena.time(v)?;
            if t < old {
                self.arena.set_time(v, t)?;
            }
        }
        for (&v, &t) in internal.iter().zip(times).rev() {
            if self.arena.time(v)? != t {
                self.arena.set_time(v, t)?;
            }
        }
        self.refresh();
        Ok(())
    }

    /// The M-step over the times (see the [module docs](self)); a result that lowers the
    /// objective (by rounding) is undone.
    fn mstep_times(&mut self, e: &Estep) -> Result<()> {
        let (internal, problem) = self.time_problem(e);
        if internal.is_empty() {
            return Ok(());
        }
        let s0 = self.times_to_s(&internal);
        let s1 = lbfgs_max(&problem, s0)?;
        let Some(s1) = s1 else { return Ok(()) };
        let before = self.objective();
        let old: Vec<f64> = internal
            .iter()
            .map(|&v| self.arena.time(v).expect("live node"))
            .collect();
        self.set_s(&internal, &s1)?;
        if !at_least(self.objective(), before) {
            self.set_times(&internal, &old)?;
        }
        Ok(())
    }

    /// The free nodes of a local M-step: the internal nodes among `seeds` and their
    /// ancestors, in pre-order (a set closed upwards).
    pub(super) fn free_nodes(&self, seeds: &[NodeId]) -> Vec<NodeId> {
        let mut mark = vec![false; self.arena.n_slots()];
        for &v in seeds {
            if self
                .arena
                .node(v)
                .is_ok_and(|n| !n.is_leaf() && n.parent().is_some())
                || v == self.arena.root()
            {
                for a in std::iter::once(v).chain(self.arena.ancestors(v).expect("live node")) {
                    if mark[a.index()] {
                        break;
                    }
                    mark[a.index()] = true;
                }
            }
        }
        if !mark.iter().any(|&m| m) {
            return Vec::new();
        }
        let root = self.arena.root();
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            if !mark[v.index()] {
                continue;
            }
            out.push(v);
            stack.extend(self.arena.children(v).expect("live node").iter().rev());
        }
        out
    }

    /// The M-step problem over the times of `free` (see [`LocalProblem`]), with the other
    /// times fixed, and the coordinates of the current times; `None` when a free node has no
    /// room between its parent and its ceiling.
    pub(super) fn local_problem(
        &self,
        e: &Estep,
        free: &[NodeId],
    ) -> Option<(LocalProblem, Vec<f64>)> {
        let m = free.len();
        let mut pos = vec![usize::MAX; self.arena.n_slots()];
        for (i, v) in free.iter().enumerate() {
            pos[v.index()] = i;
        }
        let ceiling = 1.0 - TIME_GAP;
        let mut p = LocalProblem {
            parent: vec![usize::MAX; m],
            floor: vec![0.0; m],
            ceil: vec![ceiling; m],
            stat: vec![0.0; m],
            kappa: vec![0.0; m],
            start: Vec::with_capacity(m + 1),
            kids: Vec::new(),
            half_d: 0.5 * self.x.ncols() as f64,
            inv_2s2: 0.5 / self.sigma2,
        };
        let mut counts = Vec::new();
        // Ceilings children first.
        for i in (0..m).rev() {
            let node = self.arena.node(free[i]).expect("live node");
            let mut u = ceiling;
            for &k in node.children() {
                u = u.min(match pos[k.index()] {
                    usize::MAX => self.arena.time(k).expect("live node").min(ceiling),
                    j => p.ceil[j],
                });
            }
            p.ceil[i] = u;
        }
        let mut times = Vec::with_capacity(m);
        for (i, &v) in free.iter().enumerate() {
            let node = self.arena.node(v).expect("live node");
            match node.parent() {
                Some(a) if pos[a.index()] != usize::MAX => p.parent[i] = pos[a.index()],
                _ => p.floor[i] = self.top_time(v),
            }
            p.stat[i] = e.stat[v.index()];
            p.start.push(p.kids.len());
            counts.clear();
            for &k in node.children() {
                let child = self.arena.node(k).expect("live node");
                counts.push(child.n_leaves());
                if pos[k.index()] == usize::MAX {
                    let tk = child.time().min(1.0);
                    p.kids.push(((tk - p.ceil[i]).max(0.0), e.stat[k.index()]));
                }
            }
            p.kappa[i] = self.params.c() * harmonic_gap(&self.h, &counts);
            times.push(node.time());
        }
        p.start.push(p.kids.len());
        // The coordinates of the current times.
        let mut s0 = Vec::with_capacity(m);
        for i in 0..m {
            let lo = match p.parent[i] {
                usize::MAX => p.floor[i],
                a => times[a],
            };
            let (gap, b) = (p.ceil[i] - lo, p.ceil[i] - times[i]);
            if !(gap > 0.0 && b >= 0.0) {
                return None;
            }
            let (lo_b, hi_b) = (gap * 1e-15, gap * (1.0 - 1e-15));
            let b = b.clamp(lo_b, hi_b);
            s0.push((gap - b).ln() - b.ln());
        }
        Some((p, s0))
    }

    /// The M-step over the times of `free` alone (see [`LocalProblem`]): the E-step's `S`
    /// and the other times held fixed. A result that lowers the objective (by rounding) is
    /// undone.
    pub(super) fn local_mstep(&mut self, e: &Estep, free: &[NodeId]) -> Result<()> {
        if free.is_empty() {
            return Ok(());
        }
        let Some((problem, s0)) = self.local_problem(e, free) else {
            return Ok(());
        };
        let Some(s1) = lbfgs_max(&problem, s0)? else {
            return Ok(());
        };
        let old: Vec<f64> = free
            .iter()
            .map(|&v| self.arena.time(v).expect("live node"))
            .collect();
        // Strictly inside (parent, children) in floating point, or no move.
        let tb = problem.times(&s1);
        let mut times = Vec::with_capacity(free.len());
        for (i, &v) in free.iter().enumerate() {
            let lo = match problem.parent[i] {
                usize::MAX => problem.floor[i],
                a => times[a],
            };
            let mut t: f64 = tb[i].0;
            if t <= lo {
                t = lo.next_up();
            }
            let node = self.arena.node(v).expect("live node");
            let hi = node
                .children()
                .iter()
                .filter(|k| !free.contains(k))
                .map(|&k| self.arena.time(k).expect("live node"))
                .fold(f64::INFINITY, f64::min);
            if !(t > lo && t < hi && t.is_finite()) {
                return Ok(());
            }
            times.push(t);
        }
        let before = self.objective();
        self.set_times(free, &times)?;
        if !at_least(self.objective(), before) {
            self.set_times(free, &old)?;
        }
        Ok(())
    }

    /// EM over the times of the free nodes of `seeds` ([`free_nodes`](Self::free_nodes))
    /// with the hyperparameters held: at most `steps` rounds of a full E-step and a
    /// [`local_mstep`](Self::local_mstep), until a round gains at most `tol`. Each round is a
    /// (generalised) EM step on `F`, so `F` never decreases.
    pub(super) fn local_em(&mut self, seeds: &[NodeId], steps: usize, tol: f64) -> Result<()> {
        let free = self.free_nodes(seeds);
        let mut f_old = self.objective();
        for _ in 0..steps {
            let e = self.estep();
            self.local_mstep(&e, &free)?;
            let f = self.objective();
            if (f - f_old).is_nan() || f - f_old <= tol {
                break;
            }
            f_old = f;
        }
        Ok(())
    }

    /// The update of `1/σ²` to the mode of its variational posterior (see the
    /// [module docs](self)).
    fn update_sigma2(&mut self, e: &Estep) {
        let d = self.x.ncols() as f64;
        let (mut edges, mut sum) = (0usize, 0.0);
        for v in self.pre_order() {
            edges += 1;
            sum += e.stat[v.index()] / (2.0 * self.branch_len(v));
        }
        let prior = self.priors.precision;
        let shape = prior.shape + 0.5 * edges as f64 * d;
        let precision = (shape - 1.0) / (prior.rate + sum);
        if !(precision.is_finite() && precision > 0.0) {
            return;
        }
        let before = (self.objective(), self.sigma2);
        self.sigma2 = 1.0 / precision;
        self.ln_lik = root_log_likelihood(&self.arena, self.x.ncols(), self.sigma2);
        if !at_least(self.objective(), before.0) {
            self.sigma2 = before.1;
            self.ln_lik = root_log_likelihood(&self.arena, self.x.ncols(), self.sigma2);
        }
    }

    /// `(counts, ln(1 − t))` of every branch point.
    fn branch_points(&self) -> Vec<(Vec<usize>, f64)> {
        self.pre_order()
            .into_iter()
            .filter_map(|v| {
                let node = self.arena.node(v).expect("live node");
                (!node.is_leaf()).then(|| {
                    let counts = node
                        .children()
                        .iter()
                        .map(|&k| self.arena.node(k).expect("live node").n_leaves())
                        .collect();
                    (counts, (-node.time()).ln_1p())
                })
            })
            .collect()
    }

    /// The update of `c` to the mode of eq 13 (see the [module docs](self)).
    fn update_c(&mut self) -> Result<()> {
        let nodes = self.branch_points();
        if nodes.is_empty() {
            return Ok(());
        }
        let slope: f64 = nodes
            .iter()
            .map(|(counts, l)| harmonic_gap(&self.h, counts) * l)
            .sum();
        let prior = self.priors.c;
        let c = (prior.shape + nodes.len() as f64 - 1.0) / (prior.rate - slope);
        if !(c.is_finite() && c > 0.0) {
            return Ok(());
        }
        self.try_params(PydtParams::new(self.params.alpha(), self.params.beta(), c)?);
        Ok(())
    }

    /// Moves to `params` if that does not lower the objective.
    fn try_params(&mut self, params: PydtParams) {
        let (before, old) = (self.objective(), self.params);
        self.set_params(params);
        if !at_least(self.objective(), before) {
            self.set_params(old);
        }
    }

    /// Golden-section updates of `α` and `β` (see the [module docs](self)).
    fn update_alpha_beta(&mut self) -> Result<()> {
        let summary = PriorSummary::new(&self.branch_points());
        let ln_prior = |p: &PydtParams| summary.ln_prior(p);
        let priors = self.priors;
        let mut params = self.params;
        if self.learn.alpha {
            let (beta, c) = (params.beta(), params.c());
            let f = |u: f64| match PydtParams::new(u.exp(), beta, c) {
                Ok(p) => ln_prior(&p) + priors.alpha.ln_pdf(u.exp()),
                Err(_) => f64::NEG_INFINITY,
            };
            let u0 = params.alpha().ln();
            if let Some(u) = golden_max(f, (u0 - 5.0).max(-20.0), (u0 + 5.0).min(10.0), u0, 1e-7) {
                params = PydtParams::new(u.exp(), beta, c)?;
            }
        }
        if self.learn.beta {
            let (alpha, c) = (params.alpha(), params.c());
            let f = |u: f64| match PydtParams::new(alpha, logistic(u), c) {
                Ok(p) if logistic(u) > 0.0 && logistic(u) < 1.0 => {
                    ln_prior(&p) + priors.beta.ln_pdf(logistic(u))
                }
                _ => f64::NEG_INFINITY,
            };
            let b0 = params.beta();
            let u0 = (b0 / (1.0 - b0)).ln();
            if let Some(u) = golden_max(f, (u0 - 5.0).max(-20.0), (u0 + 5.0).min(20.0), u0, 1e-7) {
                params = PydtParams::new(alpha, logistic(u), c)?;
            }
        }
        if params != self.params {
            self.try_params(params);
        }
        Ok(())
    }

    /// EM for the current structure: at most `steps` rounds of E-step, M-step over the
    /// times and hyperparameter updates, until a round gains less than `tol`.
    pub(super) fn em(&mut self, steps: usize, tol: f64) -> Result<()> {
        let mut f_old = self.objective();
        for _ in 0..steps {
            let e = self.estep();
            self.mstep_times(&e)?;
            if self.learn.sigma2 {
                self.update_sigma2(&e);
            }
            if self.learn.c {
                self.update_c()?;
            }
            if self.learn.alpha || self.learn.beta {
                self.update_alpha_beta()?;
            }
            let f = self.objective();
            if (f - f_old).is_nan() || f - f_old <= tol {
                break;
            }
            f_old = f;
        }
        Ok(())
    }

    /// The prior term of a branch point with `counts` at time `t`.
    fn node_term(&self, counts: &[usize], t: f64) -> f64 {
        let p = &self.params;
        p.ln_structure(counts)
            + p.c().ln()
            + (p.c() * harmonic_gap(&self.h, counts) - 1.0) * (-t).ln_1p()
    }

    /// The quick scores of every position for the detached subtree under `sub`: the exact
    /// log joint of the tree with the subtree attached there, at the current times and a new
    /// branch point at the midpoint (see the [module docs](self)). Caches must be fresh.
    pub(super) fn score_attachments(&self, sub: NodeId) -> Vec<Candidate> {
        let d = self.x.ncols();
        let s_node = self.arena.node(sub).expect("live node");
        let (t_s, n_s) = (s_node.time(), s_node.n_leaves());
        let s_state = s_node.cache();
        let s_msg = &s_state.msg;
        let base =
            self.ln_lik + self.ln_prior + s_state.sub_prior + s_msg.log_z().log_z(d, self.sigma2);
        let slots = self.arena.n_slots();
        // The message at the parent's location from outside each node's subtree, and the sum
        // of the changes of the ancestors' prior terms.
        let mut o_mean = vec![0.0; slots * d];
        let mut o_var = vec![0.0; slots];
        let mut path = vec![0.0; slots];
        let mut out = Vec::new();
        let mut counts = Vec::new();
        let mut outside = Outside::default();
        let mut msgs = Vec::new();
        for b in self.pre_order() {
            let node = self.arena.node(b).expect("live node");
            let st = node.cache();
            let (t_a, t_b) = (self.top_time(b), node.time());
            let om = &o_mean[b.index() * d..(b.index() + 1) * d];
            let ov = o_var[b.index()];
            // The subtree joining the posterior at t* (from below and above), eq 11.
            let join = BranchJoin::new(st.msg.mean(), om, s_msg.mean());
            let lik = |t_star: f64| -> f64 {
                let at = join.at(st.msg.var() + (t_b - t_star), ov + (t_star - t_a));
                let v = at.var + s_msg.var() + t_s - t_star;
                SplitLogZ::normal(at.sq_dist, v).log_z(d, self.sigma2)
            };
            let hi = t_b.min(t_s);
            let t_star = 0.5 * (t_a + hi);
            if t_a < t_star && t_star < hi {
                let prior = path[b.index()] + self.node_term(&[node.n_leaves(), n_s], t_star);
                let score = base + prior + lik(t_star);
                if score.is_finite() {
                    out.push(Candidate {
                        at: Attachment::Branch {
                            below: b,
                            time: t_star,
                        },
                        score,
                    });
                }
            }
            if node.is_leaf() {
                continue;
            }
            counts.clear();
            counts.extend(
                node.children()
                    .iter()
                    .map(|&k| self.arena.node(k).expect("live node").n_leaves()),
            );
            if t_b < t_s {
                counts.push(n_s);
                let prior = path[b.index()] + self.node_term(&counts, t_b) - st.prior;
                counts.pop();
                let score = base + prior + lik(t_b);
                if score.is_finite() {
                    out.push(Candidate {
                        at: Attachment::Node(b),
                        score,
                    });
                }
            }
            // Messages into b's location from outside each child: from above, and from the
            // other children.
            let kids = node.children();
            msgs.clear();
            msgs.extend(kids.iter().map(|&k| {
                let ks = self.arena.node(k).expect("live node");
                (
                    k.index(),
                    ks.cache().msg.mean(),
                    ks.cache().msg.var() + (ks.time() - t_b),
                )
            }));
            outside.compute(
                &mut o_mean,
                &mut o_var,
                (b.index(), ov + (t_b - t_a)),
                &msgs,
            );
            for (i, &k) in kids.iter().enumerate() {
                counts[i] += n_s;
                path[k.index()] = path[b.index()] + self.node_term(&counts, t_b) - st.prior;
                counts[i] -= n_s;
            }
        }
        out
    }

    /// A canonical key of the tree's structure (children ordered by their smallest leaf).
    fn structure_key(&self) -> Vec<u32> {
        let slots = self.arena.n_slots();
        let mut min_leaf = vec![u32::MAX; slots];
        let root = self.arena.root();
        for v in self.arena.post_order(root).expect("the root exists") {
            let node = self.arena.node(v).expect("live node");
            min_leaf[v.index()] = if node.is_leaf() {
                v.0
            } else {
                node.children()
                    .iter()
                    .map(|k| min_leaf[k.index()])
                    .min()
                    .unwrap_or(u32::MAX)
            };
        }
        const OPEN: u32 = u32::MAX;
        const CLOSE: u32 = u32::MAX - 1;
        let mut key = Vec::with_capacity(3 * self.arena.n_leaves());
        let mut stack = vec![(root, false)];
        while let Some((v, done)) = stack.pop() {
            let node = self.arena.node(v).expect("live node");
            if node.is_leaf() {
                key.push(v.0);
            } else if done {
                key.push(CLOSE);
            } else {
                key.push(OPEN);
                stack.push((v, true));
                let mut kids = node.children().to_vec();
                kids.sort_by_key(|k| std::cmp::Reverse(min_leaf[k.index()]));
                stack.extend(kids.into_iter().map(|k| (k, false)));
            }
        }
        key
    }

    /// The state as an [`EmTree`].
    pub(super) fn em_tree(&self) -> Result<EmTree> {
        let tree = self.arena.to_tree()?;
        let log_joint = match &self.probit {
            // EP from flat sites to its default tolerance: `expectation_propagation`'s value.
            Some(p) => {
                expectation_propagation_arena(
                    p.x.view(),
                    &self.arena,
                    self.sigma2,
                    &EpConfig::default(),
                    None,
                )
                .log_marginal
                    + self.ln_prior
            }
            None => self.log_joint(),
        };
        Ok(EmTree {
            tree,
            params: self.params,
            sigma2: self.sigma2,
            log_joint,
            objective: self.objective(),
        })
    }
}

/// The structure and divergence-time terms of the log prior, summed over the branch points,
/// as a function of the hyperparameters for the golden-section searches over `α` and `β`.
/// Counts of the same size are pooled, so that one evaluation costs `O(N)` logarithms where
/// the sum over the branch points costs `O(N)` log-gamma ratios and the table of `H_k`:
/// with `K_b` branches of `n_{bl}` leaves below `m_b` at each branch point `b`,
///
/// ```text
///   Σ_b ln structure_b = Σ_{k≥3} #{K_b ≥ k} ln(α + (k−1)β) + Σ_{j≥1} #{n_bl > j} ln(j − β)
///                        − Σ_{j≥1} #{m_b > j} ln(j + α) − |I| [ln Γ(1 + α) − ln Γ(1 − β)],
///   Σ_b J_b ln(1 − t_b) = Σ_{j≥1} w_j W_j,   W_j = Σ_{i≥j} ω_i,
/// ```
///
/// (eq 7 with `Γ(x + n)/Γ(x)` written as a product), where `ω_i` collects `+ln(1 − t_b)` at
/// `i = m_b − 1` and `−ln(1 − t_b)` at each `i = n_bl − 1`, and `w_{j+1} = w_j (j − β)/(j + 1 + α)`
/// (eq 8). It agrees with [`PydtParams::ln_structure`] and [`harmonic_gap`] to rounding.
#[derive(Debug, Clone)]
pub(super) struct PriorSummary {
    /// Entry `k`: the branch points with at least `k + 3` branches.
    wide: Vec<f64>,
    /// Entry `j − 1`: the branches with more than `j` leaves (`ln(j − β)`).
    branches: Vec<f64>,
    /// Entry `j − 1`: the branch points with more than `j` leaves below (`ln(j + α)`).
    points: Vec<f64>,
    /// Entry `j − 1`: `W_j`.
    weights: Vec<f64>,
    /// `|I|` and `Σ_b ln(1 − t_b)`.
    n_points: f64,
    sum_ln_gap: f64,
}

impl PriorSummary {
    /// The summary of `(counts, ln(1 − t))` of every branch point.
    pub(super) fn new(nodes: &[(Vec<usize>, f64)]) -> Self {
        let n = nodes
            .iter()
            .map(|(c, _)| c.iter().sum::<usize>())
            .max()
            .unwrap_or(1);
        let k_max = nodes.iter().map(|(c, _)| c.len()).max().unwrap_or(2);
        let mut wide = vec![0.0; k_max.saturating_sub(2)];
        let mut branches = vec![0.0; n];
        let mut points = vec![0.0; n];
        let mut omega = vec![0.0; n];
        let mut sum_ln_gap = 0.0;
        for (counts, l) in nodes {
            let m: usize = counts.iter().sum();
            for w in wide.iter_mut().take(counts.len().saturating_sub(2)) {
                *w += 1.0;
            }
            // #{m > j} for j = 1 … m − 1: counted at m − 1 and summed from the top below.
            points[m - 1] += 1.0;
            omega[m - 1] += l;
            for &c in counts {
                branches[c - 1] += 1.0;
                omega[c - 1] -= l;
            }
            sum_ln_gap += l;
        }
        // Suffix sums: entry j − 1 counts the sizes ≥ j + 1, i.e. index ≥ j.
        let suffix = |v: &mut Vec<f64>| {
            let mut acc = 0.0;
            for x in v.iter_mut().rev() {
                acc += *x;
                *x = acc;
            }
        };
        for v in [&mut branches, &mut points] {
            suffix(v);
            v.remove(0);
        }
        suffix(&mut omega);
        omega.remove(0);
        Self {
            wide,
            branches,
            points,
            weights: omega,
            n_points: nodes.len() as f64,
            sum_ln_gap,
        }
    }

    /// `Σ_b [ln structure_b + ln c + (c J_b − 1) ln(1 − t_b)]` under `p`.
    pub(super) fn ln_prior(&self, p: &PydtParams) -> f64 {
        let (alpha, beta, c) = (p.alpha(), p.beta(), p.c());
        let mut s = 0.0;
        for (k, &a) in self.wide.iter().enumerate() {
            s += a * (alpha + (k + 2) as f64 * beta).max(0.0).ln();
        }
        let mut w = if self.weights.is_empty() {
            0.0
        } else {
            p.ln_rate_factor(1).exp()
        };
        let mut time = 0.0;
        for (i, ((&b, &a), &wt)) in self
            .branches
            .iter()
            .zip(&self.points)
            .zip(&self.weights)
            .enumerate()
        {
            let j = (i + 1) as f64;
            if b != 0.0 {
                s += b * (j - beta).ln();
            }
            if a != 0.0 {
                s -= a * (j + alpha).ln();
            }
            time += w * wt;
            w *= (j - beta) / (j + 1.0 + alpha);
        }
        s - self.n_points * (ln_gamma(1.0 + alpha) - ln_gamma(1.0 - beta))
            + self.n_points * c.ln()
            + c * time
            - self.sum_ln_gap
    }
}

/// Maximises `Q(s)` by L-BFGS from `s0`; `None` when it found nothing better.
pub(super) fn lbfgs_max<P: TimeObjective>(problem: &P, s0: Vec<f64>) -> Result<Option<Vec<f64>>> {
    let q0 = problem.eval(&s0, None);
    if !q0.is_finite() {
        // Nothing to climb from (data or variances beyond double precision); the line
        // search would never end on infinite costs.
        return Ok(None);
    }
    let line = MoreThuenteLineSearch::new();
    let solver = LBFGS::new(line, 7)
        .with_tolerance_grad(1e-9)
        .map_err(|e| numerical("L-BFGS", e))?
        // A step that changes the objective by rounding only ends the search (the line
        // search returns a zero step when it can no longer make progress).
        .with_tolerance_cost(1e-13 * q0.abs().max(1.0))
        .map_err(|e| numerical("L-BFGS", e))?;
    let res = Executor::new(Negated(problem), solver)
        .configure(|st| st.param(s0).max_iters(LBFGS_MAX_ITERS))
        .run();
    let Ok(res) = res else { return Ok(None) };
    let Some(s1) = res.state().get_best_param() else {
        return Ok(None);
    };
    let q1 = problem.eval(s1, None);
    Ok((s1.iter().all(|v| v.is_finite()) && q1 > q0).then(|| s1.clone()))
}

/// The K best distinct trees seen, by objective.
struct KBest {
    k: usize,
    items: Vec<(Vec<u32>, EmTree)>,
}

impl KBest {
    fn offer(&mut self, state: &State<'_>) -> Result<()> {
        let f = state.objective();
        if self.items.len() >= self.k && self.items.last().is_some_and(|(_, t)| t.objective >= f) {
            return Ok(());
        }
        let key = state.structure_key();
        if let Some(i) = self.items.iter().position(|(k, _)| *k == key) {
            if self.items[i].1.objective >= f {
                return Ok(());
            }
            self.items.remove(i);
        }
        self.items.push((key, state.em_tree()?));
        self.items.sort_by(|a, b| {
            b.1.objective
                .partial_cmp(&a.1.objective)
                .unwrap_or(Ordering::Equal)
        });
        self.items.truncate(self.k);
        Ok(())
    }
}

/// The order of the candidates by their objective `F` (the log joint plus `ln t(1 − t)` of a
/// new branch point), best first (ties keep the scoring order).
fn best_candidates(mut c: Vec<Candidate>, n: usize) -> Vec<Candidate> {
    let rank = |c: &Candidate| match c.at {
        Attachment::Branch { time, .. } => c.score + ln_logit_jacobian(time),
        Attachment::Node(_) => c.score,
    };
    c.sort_by(|a, b| rank(b).partial_cmp(&rank(a)).unwrap_or(Ordering::Equal));
    c.truncate(n);
    c
}

/// Greedy Bayesian EM (see the [module docs](self)) for data `x` (row `i` at leaf `i`),
/// from `start` (or the best of several initial trees when `None`, see the
/// [module docs](self)) and the starting
/// hyperparameters `params`, `sigma2` (fixed unless learnt). `progress(pass, row)` is called
/// after each pass.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `sigma2`, `n_samples` (no rows), `n_features`
/// (no columns), `k_best`, `n_candidates`, `em_steps`, `tol`, a prior, or `alpha`/`beta`
/// when learnt from 0; [`RoseTreeError::InvalidData`] for a non-finite entry of `x`;
/// [`RoseTreeError::InvalidTree`] when `start` is not a diffusion tree over the rows;
/// [`RoseTreeError::Interrupted`] when `interrupt` returns true (polled between moves).
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::pydt::{self, PydtParams};
/// use rosetree::pydt::em::{EmConfig, greedy_em};
///
/// let x = array![[0.0, 0.1], [0.1, 0.0], [5.0, 5.1], [5.1, 5.0]];
/// let params = PydtParams::ddt(1.0)?;
/// let r = greedy_em(x.view(), None, params, 10.0, &EmConfig::default(), 0, &|| false, &mut |_, _| {})?;
/// let best = &r.best[0];
/// let exact = pydt::log_prior(&best.tree, &best.params)? + pydt::log_likelihood(x.view(), &best.tree, best.sigma2)?;
/// assert!((best.log_joint - exact).abs() < 1e-8);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn greedy_em(
    x: ArrayView2<'_, f64>,
    start: Option<&Tree>,
    params: PydtParams,
    sigma2: f64,
    config: &EmConfig,
    seed: u64,
    interrupt: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, &PassRow),
) -> Result<EmResult> {
    check_sigma2(sigma2)?;
    config.check(&params)?;
    let n = x.nrows();
    if n == 0 {
        return Err(RoseTreeError::param("n_samples", "the data have no rows"));
    }
    if x.ncols() == 0 {
        return Err(RoseTreeError::param(
            "n_features",
            "the data have no columns",
        ));
    }
    let probit = config.likelihood == Likelihood::Probit;
    if probit {
        check_binary(x)?;
    } else if let Some(((i, j), v)) = x.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(RoseTreeError::data(
            i,
            Some(j),
            format!("must be finite, got {v}"),
        ));
    }
    let binary = x.to_owned();
    let x = if probit {
        pseudo_data(&binary, sigma2)
    } else {
        x.to_owned()
    };
    let binary = probit.then_some(&binary);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (learn, priors, tol) = (config.learn, config.priors, config.tol);
    let mut state = match start {
        Some(tree) => {
            let t = check_diffusion_tree(tree)?;
            if tree.n_leaves() != n {
                return Err(RoseTreeError::InvalidTree(format!(
                    "the tree has {} leaves for {n} rows",
                    tree.n_leaves()
                )));
            }
            let arena = Arena::from_topology(&tree.topology(), t, |_| NodeState::default())?;
            let mut state = State::new(arena, &x, params, sigma2, learn, priors);
            if let Some(b) = binary {
                state = state.with_probit(b);
            }
            state.em(config.em_steps, tol)?;
            state
        }
        None => {
            // Several initial trees, the best after EM kept (see the module docs).
            let ward = Ward::new(&x);
            let mut random: Vec<usize> = (0..n).collect();
            random.shuffle(&mut rng);
            let mut starts = Vec::new();
            for order in [ward.order(), random] {
                starts.push(sequential(
                    &x, binary, &order, params, sigma2, config, interrupt,
                )?);
            }
            for k in 1..=WARD_CUTS.min(n - 1) {
                if interrupt() {
                    return Err(RoseTreeError::Interrupted);
                }
                let (topology, times) = ward.two_level(k)?;
                let arena = Arena::from_topology(&topology, &times, |_| NodeState::default())?;
                let mut s = State::new(arena, &x, params, sigma2, learn, priors);
                if let Some(b) = binary {
                    s = s.with_probit(b);
                }
                if s.objective().is_finite() {
                    starts.push(s);
                }
            }
            let mut best: Option<State<'_>> = None;
            for mut s in starts {
                s.em(POLISH_STEPS, tol)?;
                if best.as_ref().is_none_or(|b| s.objective() > b.objective()) {
                    best = Some(s);
                }
            }
            best.expect("the initial trees")
        }
    };
    state.em(POLISH_STEPS, tol)?;
    let mut kbest = KBest {
        k: config.k_best,
        items: Vec::new(),
    };
    kbest.offer(&state)?;
    let mut trace = vec![state.objective()];
    let mut accepted_total = 0;
    for pass in 0..config.max_iter {
        let mut order: Vec<NodeId> = (0..state.arena.n_slots())
            .map(|s| NodeId(s as u32))
            .filter(|&v| state.arena.node(v).is_ok() && v != state.arena.root())
            .collect();
        order.shuffle(&mut rng);
        let mut accepted = 0;
        let total = order.len();
        for (i, v) in order.into_iter().enumerate() {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            progress::report("moving subtrees", i, total);
            if state.arena.node(v).is_err() || v == state.arena.root() {
                continue;
            }
            if let Some(better) = improve(&state, v, config, &mut kbest)? {
                state = better;
                accepted += 1;
            }
        }
        accepted_total += accepted;
        state.em(POLISH_STEPS, tol)?;
        kbest.offer(&state)?;
        trace.push(state.objective());
        progress(
            pass,
            &PassRow {
                objective: state.objective(),
                log_joint: state.log_joint(),
                accepted,
                params: state.params(),
                sigma2: state.sigma2(),
            },
        );
        if accepted == 0 {
            break;
        }
    }
    Ok(EmResult {
        best: kbest.items.into_iter().map(|(_, t)| t).collect(),
        trace,
        accepted: accepted_total,
    })
}

/// One move: detaches `v`, runs EM at the best-scoring positions that change the tree's
/// structure, and returns the best resulting state if it beats the current objective by
/// more than `tol`.
fn improve<'a>(
    state: &State<'a>,
    v: NodeId,
    config: &EmConfig,
    kbest: &mut KBest,
) -> Result<Option<State<'a>>> {
    let f0 = state.objective();
    let key0 = state.structure_key();
    let mut rest = state.clone();
    let det = rest.arena.detach(v)?;
    rest.refresh();
    // Where the subtree was: the branch point it left, or the one its sibling joined.
    let origin = match det.origin() {
        Attachment::Node(p) => Some(p),
        Attachment::Branch { below, .. } => rest.arena.parent(below)?,
    };
    let cands = best_candidates(rest.score_attachments(v), usize::MAX);
    let mut best: Option<State<'a>> = None;
    let mut tried = 0;
    for cand in cands {
        if tried == config.n_candidates {
            break;
        }
        let mut trial = rest.clone();
        let parent = trial.arena.attach(&det, cand.at)?;
        // The subtree back where it was (or at an equivalent position) is not a move.
        if trial.structure_key() == key0 {
            continue;
        }
        tried += 1;
        trial.refresh();
        let seeds: Vec<NodeId> = [Some(parent), Some(v), origin]
            .into_iter()
            .flatten()
            .collect();
        trial.local_em(&seeds, config.em_steps, config.tol)?;
        kbest.offer(&trial)?;
        if best
            .as_ref()
            .is_none_or(|b| trial.objective() > b.objective())
        {
            best = Some(trial);
        }
    }
    let Some(mut best) = best.filter(|b| b.objective() > f0 + config.tol) else {
        return Ok(None);
    };
    best.em(config.em_steps, config.tol)?;
    kbest.offer(&best)?;
    Ok(Some(best))
}

/// The Gaussian stand-in for binary data `x` in the quick scores under the probit likelihood
/// (see the [module docs](self)): each entry's latent value's mean under `N(0, σ²)`
/// truncated to its sign, `±σ √(2/π)`, and 0 where it is missing.
fn pseudo_data(x: &Array2<f64>, sigma2: f64) -> Array2<f64> {
    // σ·√(2/π), not √(2σ²/π): 2σ² overflows for σ² near the largest float.
    let a = sigma2.sqrt() * (2.0 / std::f64::consts::PI).sqrt();
    x.mapv(|v| {
        if v.is_nan() {
            0.0
        } else if v == 1.0 {
            a
        } else {
            -a
        }
    })
}

/// The most clusters of the Ward dendrogram's two-level initial trees.
const WARD_CUTS: usize = 12;

/// The Ward dendrogram of the rows (Euclidean; `kodama`), for initial trees: merge `i`
/// creates cluster `n + i` from two earlier clusters (rows are clusters `0 .. n`).
struct Ward {
    n: usize,
    merges: Vec<(usize, usize)>,
}

impl Ward {
    fn new(x: &Array2<f64>) -> Self {
        let n = x.nrows();
        if n < 2 {
            return Self {
                n,
                merges: Vec::new(),
            };
        }
        // Ward's tree does not depend on the scale: measured in units of the largest entry,
        // no distance overflows (kodama panics on the NaN that infinite ones make).
        let scale = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let mut condensed = Vec::with_capacity(n * (n - 1) / 2);
        for i in 0..n {
            for j in i + 1..n {
                let d2: f64 = x
                    .row(i)
                    .iter()
                    .zip(x.row(j))
                    .map(|(a, b)| ((a - b) / scale).powi(2))
                    .sum();
                condensed.push(d2.sqrt());
            }
        }
        let dendrogram = kodama::linkage(&mut condensed, n, kodama::Method::Ward);
        let merges = dendrogram
            .steps()
            .iter()
            .map(|s| (s.cluster1, s.cluster2))
            .collect();
        Self { n, merges }
    }

    /// The rows below cluster `c`, left to right.
    fn rows(&self, c: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![c];
        while let Some(c) = stack.pop() {
            if c < self.n {
                out.push(c);
            } else {
                let (a, b) = self.merges[c - self.n];
                stack.push(b);
                stack.push(a);
            }
        }
        out
    }

    /// The leaves from left to right: an order in which the rows of a cluster come together.
    fn order(&self) -> Vec<usize> {
        self.rows(self.n + self.merges.len() - 1)
    }

    /// The `k` clusters left when the last `k − 1` merges are undone.
    fn cut(&self, k: usize) -> Vec<usize> {
        let top = self.merges.len() + 1 - k;
        let mut clusters: Vec<usize> = self.merges[top..]
            .iter()
            .flat_map(|&(a, b)| [a, b])
            .filter(|&c| c < self.n + top)
            .collect();
        if k == 1 {
            clusters.push(self.n + self.merges.len() - 1);
        }
        clusters
    }

    /// The tree whose root holds the `k` clusters of [`cut`](Self::cut), each a branch point
    /// over its rows (a one-row cluster is a leaf of the root); `k = 1` is one branch point.
    /// With its times: the clusters at 0.9, the root at 0.5.
    fn two_level(&self, k: usize) -> Result<(Topology, Vec<f64>)> {
        let mut internal = Vec::new();
        let mut root = Vec::new();
        for c in self.cut(k) {
            let rows = self.rows(c);
            if rows.len() == 1 {
                root.push(rows[0]);
            } else if k == 1 {
                root = rows;
            } else {
                root.push(self.n + internal.len());
                internal.push(rows);
            }
        }
        let mut times = vec![1.0; self.n];
        times.extend(std::iter::repeat_n(0.9, internal.len()));
        times.push(0.5);
        internal.push(root);
        Ok((Topology::new(self.n, internal)?, times))
    }
}

/// The initial tree by sequential attachment of the points in `order`.
fn sequential<'a>(
    x: &'a Array2<f64>,
    binary: Option<&'a Array2<f64>>,
    order: &[usize],
    params: PydtParams,
    sigma2: f64,
    config: &EmConfig,
    interrupt: &dyn Fn() -> bool,
) -> Result<State<'a>> {
    let n = x.nrows();
    if n == 1 {
        let arena =
            Arena::from_topology(&Topology::new(1, vec![])?, &[1.0], |_| NodeState::default())?;
        let state = State::new(arena, x, params, sigma2, config.learn, config.priors);
        return Ok(match binary {
            Some(b) => state.with_probit(b),
            None => state,
        });
    }
    let perm = order;
    // A caterpillar over all leaves, from which every leaf but the first two is detached.
    let internal: Vec<Vec<usize>> = (0..n - 1)
        .map(|k| {
            if k == 0 {
                vec![0, 1]
            } else {
                vec![n + k - 1, k + 1]
            }
        })
        .collect();
    let mut times = vec![1.0; n];
    times.extend((0..n - 1).map(|k| 1.0 - (k + 1) as f64 / n as f64));
    let arena = Arena::from_topology(&Topology::new(n, internal)?, &times, |_| {
        NodeState::default()
    })?;
    // The hyperparameters stay fixed while the tree is built: learnt on a handful of points
    // they can run into a corner (β → 1 pins every branch point at t ≈ 0) that the search
    // cannot leave.
    let mut state = State::new(arena, x, params, sigma2, Learn::default(), config.priors);
    let mut handles = Vec::with_capacity(n - 2);
    for &i in &perm[2..] {
        handles.push(state.arena.detach(NodeId(i as u32))?);
    }
    if let Some(b) = binary {
        state = state.with_probit(b);
    }
    let root = state.arena.root();
    state.arena.set_time(root, 0.5)?;
    state.refresh();
    state.em(config.em_steps, config.tol)?;
    for (k, det) in handles.into_iter().enumerate() {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        progress::report("building a starting tree, point", k + 2, n);
        // EM at the best-scoring positions, the best result kept: the quick score puts a
        // new branch point at a branch's midpoint, which undersells it against a
        // branch point whose time has already been fitted.
        let cands = best_candidates(state.score_attachments(det.root()), config.n_candidates);
        let mut best: Option<State<'a>> = None;
        for cand in cands {
            let mut trial = state.clone();
            let parent = trial.arena.attach(&det, cand.at)?;
            trial.refresh();
            trial.local_em(&[parent], config.em_steps, config.tol)?;
            if best
                .as_ref()
                .is_none_or(|b| trial.objective() > b.objective())
            {
                best = Some(trial);
            }
        }
        state = best.ok_or_else(|| {
            RoseTreeError::Numerical("no position scored finitely for a new point".into())
        })?;
        state.em(config.em_steps, config.tol)?;
    }
    state.learn = config.learn;
    state.em(config.em_steps, config.tol)?;
    Ok(state)
}

#[cfg(test)]
mod tests;
