//! Learning the hyperparameters with the tree (BRT §1.4.2).
//!
//! Coordinate ascent on `ln p(D | T)`: given the tree, the cluster model's hyperparameters
//! and the mixing parameter move to a local maximum of the evidence by L-BFGS-B
//! ([`crate::optimize::lbfgsb_max`]) on their unconstrained coordinates ([`Learnable`]; `γ`
//! on a logit scale, the DP concentration on a log scale), with the gradient of
//! [`super::evidence_gradient`] (eqs 1.27–1.28); given the hyperparameters, the tree search
//! runs again, and its tree is kept only if it is more likely. Each step is kept only if
//! the evidence does not fall, so the trace never decreases and the result is at least as
//! likely as the start. The ascent ends when an iteration (a hyperparameter step and a
//! search) raises the evidence by at most `tol · max(1, |ln p|)`, or after `max_iter`
//! iterations.
//!
//! Every coordinate is searched within `±`[`LOG_BOUND`]; a starting value outside that box
//! is kept as it is (not clipped) until a point in the box gives a more likely tree.
//!
//! **Staged start.** Without `tie`, when the model has per-feature hyperparameters that all
//! start at one value ([`Learnable::shared_start`]), the shared values are learnt first and
//! the per-feature ascent starts from their optimum (one trace holds both stages): from a
//! flat start such as `Beta(1, 1)` on sparse binary data, the direct per-feature ascent can
//! end at `γ → 0` and a nearly flat tree, a far worse optimum.
//!
//! **Restarts.** With `n_restarts`, the ascent runs again from random starts around the
//! first (each coordinate moved by a standard normal draw from a generator seeded by
//! `seed`), and the most likely result is kept, as in the BRT chapter (which used 10).
//!
//! **Why L-BFGS-B from `basin`.** The evidence is smooth in the coordinates and its gradient
//! costs one pass over the tree, so a quasi-Newton method suits it; a box keeps every step
//! finite (`e^{±12}` spans any sensible prior). `basin`'s solver is a port of Nocedal and
//! Morales's L-BFGS-B 3.0, the algorithm, line search and stopping rules of SciPy's
//! `minimize(method="L-BFGS-B")`, which this module replaces; `argmin`'s L-BFGS has no
//! bounds.

mod coordinates;

use std::ops::Deref;

use ndarray::ArrayView2;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

pub use coordinates::Learnable;
use coordinates::MixingCoordinate;

use super::{BrtParams, Mixing, RoseTree, ValidBrtParams, evaluate, evidence_gradient, fit_stats};
use crate::error::{Result, RoseTreeError};
use crate::models::RowQueries;
use crate::optimize::{BoxOptions, lbfgsb_max};
use crate::progress;
use crate::tree::Topology;

/// The box of every coordinate, `[−12, 12]`: wide enough for any sensible prior
/// (`e^{±12}` ≈ 6·10⁻⁶ … 1.6·10⁵) and tight enough that no step overflows.
pub const LOG_BOUND: f64 = 12.0;

/// L-BFGS-B's relative tolerance on `ln p(D | T)`: 10⁻⁴ nats on an evidence of 10⁴, far
/// below anything reported, and a third of the evaluations of SciPy's default.
pub const FTOL: f64 = 1e-8;

/// Options of hyperparameter learning: the tree search, and how the ascent goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LearnParams {
    /// The tree search; its mixing rule holds the starting `γ` (or DP concentration).
    pub search: BrtParams,
    /// Learn one value per hyperparameter shared by all features, instead of one per
    /// feature (each [`Learnable`] model says what it ties). A per-feature start whose
    /// values differ then starts from their mean, another prior.
    pub tie: bool,
    /// Restarts from random starts around the first.
    pub n_restarts: usize,
    /// The most iterations of each ascent (each stage of a staged start).
    pub max_iter: usize,
    /// The relative gain of an iteration below which the ascent stops.
    pub tol: f64,
    /// The seed of the restarts' starts.
    pub seed: u64,
}

impl LearnParams {
    /// Learning with the tree search `search`: per-feature hyperparameters, no restarts,
    /// at most 20 iterations, `tol = 1e-6`, seed 0.
    pub fn new(search: BrtParams) -> Self {
        Self {
            search,
            tie: false,
            n_restarts: 0,
            max_iter: 20,
            tol: 1e-6,
            seed: 0,
        }
    }

    /// One value per hyperparameter shared by all features.
    #[must_use]
    pub fn tie(mut self, tie: bool) -> Self {
        self.tie = tie;
        self
    }

    /// Restarts from random starts around the first.
    #[must_use]
    pub fn n_restarts(mut self, n_restarts: usize) -> Self {
        self.n_restarts = n_restarts;
        self
    }

    /// The most iterations of each ascent.
    #[must_use]
    pub fn max_iter(mut self, max_iter: usize) -> Self {
        self.max_iter = max_iter;
        self
    }

    /// The relative gain below which the ascent stops.
    #[must_use]
    pub fn tol(mut self, tol: f64) -> Self {
        self.tol = tol;
        self
    }

    /// The seed of the restarts.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks every option once.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming the option at fault: as
    /// [`BrtParams::check`] (the starting `gamma` must lie strictly between 0 and 1, the
    /// starting `dp_alpha` be finite and positive), `max_iter` below 1, `tol` negative or
    /// not finite.
    pub fn check(self) -> Result<ValidLearnParams> {
        let search = self.search.check()?;
        if self.max_iter == 0 {
            return Err(RoseTreeError::param(
                "max_iter",
                "must be at least 1, got 0",
            ));
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(RoseTreeError::param(
                "tol",
                format!("must be a finite number >= 0, got {}", self.tol),
            ));
        }
        Ok(ValidLearnParams {
            params: self,
            search,
        })
    }
}

/// [`LearnParams`] that have passed [`LearnParams::check`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidLearnParams {
    params: LearnParams,
    search: ValidBrtParams,
}

impl ValidLearnParams {
    /// The tree search under `mixing` (the learner's, valid by construction).
    fn search_with(&self, mixing: Mixing) -> ValidBrtParams {
        self.search.with_mixing(mixing)
    }
}

impl Deref for ValidLearnParams {
    type Target = LearnParams;

    fn deref(&self) -> &LearnParams {
        &self.params
    }
}

/// Where an ascent stands, told after each iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Iteration {
    /// The start (0 for the given hyperparameters, then the restarts).
    pub start: usize,
    /// The number of starts.
    pub n_starts: usize,
    /// The iteration within the start, from 0 (counting on through a staged start's two
    /// stages).
    pub iteration: usize,
    /// `ln p(D | T)` after it.
    pub log_evidence: f64,
}

/// The result of [`learn`] and [`learn_with`]: the most likely start's.
#[derive(Debug, Clone)]
pub struct Learned<M> {
    /// The cluster model with the learnt hyperparameters.
    pub model: M,
    /// The mixing rule with the learnt `γ` or DP concentration.
    pub mixing: Mixing,
    /// The tree, its quantities under `model` and `mixing`.
    pub tree: RoseTree,
    /// `ln p(D | T)` at the start and after each step (the hyperparameters, then the
    /// tree, in turn) of the most likely start; it never decreases.
    pub trace: Vec<f64>,
    /// The final `ln p(D | T)` of each start, the first being the given hyperparameters;
    /// `−∞` for a random start that is not a prior in double precision (around an extreme
    /// given prior) or whose search fails numerically.
    pub start_log_evidences: Vec<f64>,
}

impl<M> Learned<M> {
    /// `ln p(D | T)` of the result.
    pub fn log_evidence(&self) -> f64 {
        self.tree.log_evidence()
    }
}

/// Learns the hyperparameters of `model` (the start, its data-driven defaults resolved)
/// and the mixing parameter of `params.search` with the tree of the rows of `x` (module
/// docs), searching every tree with `params.search` (the exact greedy search, or the
/// approximate one it names). `interrupt` is polled between steps and inside them.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, BrtParams, LearnParams, Mixing};
/// use rosetree::models::BetaBernoulli;
///
/// let x = array![
///     [1., 1., 0., 0.], [1., 1., 0., 0.], [1., 1., 1., 0.],
///     [0., 0., 1., 1.], [0., 0., 1., 1.], [0., 1., 1., 1.],
/// ];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 4)?;
/// let search = BrtParams::new(Mixing::Brt { gamma: 0.5 });
/// let params = LearnParams::new(search).tie(true).check()?;
/// let learned = brt::learn(&model, &params, x.view(), &|| false)?;
/// let start = brt::fit(&model, &search.check()?, x.view())?;
/// assert!(learned.log_evidence() >= start.log_evidence());
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// As [`learn_with`] and [`super::fit_stats`].
pub fn learn<M: Learnable + RowQueries>(
    model: &M,
    params: &ValidLearnParams,
    x: ArrayView2<'_, f64>,
    interrupt: &dyn Fn() -> bool,
) -> Result<Learned<M>> {
    let mut search = |m: &M, mixing: &Mixing| {
        let mut m = m.clone();
        m.prepare(x.nrows());
        let leaves = m.leaf_stats_all(x)?;
        fit_stats(&m, &params.search_with(*mixing), leaves, interrupt)
    };
    learn_with(model, params, x, &mut search, interrupt, &mut |_| {})
}

/// What stays fixed through one learning run.
struct Context<'a, M> {
    base: &'a M,
    mixing: MixingCoordinate,
    x: ArrayView2<'a, f64>,
    params: &'a ValidLearnParams,
    n_starts: usize,
    interrupt: &'a dyn Fn() -> bool,
}

/// A point of the ascent: its coordinates and the hyperparameters they stand for (for the
/// first start, exactly the given ones until a step moves them).
struct Point<M> {
    u: Vec<f64>,
    model: M,
    mixing: Mixing,
}

/// [`learn`] with the tree search `search(model, mixing)` of the caller's choice (a search
/// in another process, an approximate search); its trees are kept only when their
/// `ln p(D | T)` under the hyperparameters they were searched with beats the current
/// tree's, so a search may also return the tree it was given. `params.search` is not used.
/// `on_iteration` is told after each iteration where the ascent stands; progress is also
/// reported to this thread's [`progress`] watcher.
///
/// # Errors
/// [`RoseTreeError::ShapeMismatch`] for rows that do not fit the model or a tree that does
/// not fit the rows; [`RoseTreeError::Interrupted`] when `interrupt` returns `true`;
/// whatever `search` reports.
pub fn learn_with<M: Learnable>(
    model: &M,
    params: &ValidLearnParams,
    x: ArrayView2<'_, f64>,
    search: &mut dyn FnMut(&M, &Mixing) -> Result<RoseTree>,
    interrupt: &dyn Fn() -> bool,
    on_iteration: &mut dyn FnMut(Iteration),
) -> Result<Learned<M>> {
    if x.ncols() != model.n_features() {
        return Err(RoseTreeError::ShapeMismatch {
            what: "X".into(),
            expected: format!("{} columns", model.n_features()),
            found: format!("{} columns", x.ncols()),
        });
    }
    let ctx = Context {
        base: model,
        mixing: MixingCoordinate {
            start: params.search.mixing,
        },
        x,
        params,
        n_starts: params.n_restarts + 1,
        interrupt,
    };
    let staged = !params.tie && model.shared_start();
    let first_tie = params.tie || staged;
    let mut u0 = model.start(first_tie);
    u0.push(ctx.mixing.initial());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(params.seed);
    let mut starts = vec![u0.clone()];
    for _ in 0..params.n_restarts {
        starts.push(
            u0.iter()
                .map(|v| {
                    let z: f64 = rng.sample(StandardNormal);
                    (v + z).clamp(-LOG_BOUND, LOG_BOUND)
                })
                .collect(),
        );
    }

    let mut best: Option<Learned<M>> = None;
    let mut finals = Vec::with_capacity(starts.len());
    for (start, u) in starts.into_iter().enumerate() {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        let (first, tree) = if start == 0 {
            let first = first_point(&ctx, u, first_tie)?;
            let tree = search(&first.model, &first.mixing)?;
            (first, tree)
        } else {
            // A random start around an extreme prior can leave double precision (a rate
            // of 5e-324 halved is 0): such a start ends at once, at −∞.
            match decode(&ctx, u, first_tie)
                .and_then(|first| Ok((search(&first.model, &first.mixing)?, first)))
            {
                Ok((tree, first)) => (first, tree),
                Err(RoseTreeError::InvalidParameter { .. } | RoseTreeError::Numerical(_)) => {
                    finals.push(f64::NEG_INFINITY);
                    continue;
                }
                Err(e) => return Err(e),
            }
        };
        let mut trace = vec![tree.log_evidence()];
        let mut iteration = 0;
        let (mut point, mut tree) = ascend(
            &ctx,
            first_tie,
            first,
            tree,
            &mut trace,
            (start, &mut iteration),
            search,
            on_iteration,
        )?;
        if staged {
            // The same prior in per-feature coordinates, so the evidence carries over.
            let (eta, theta) = point.u.split_at(point.u.len() - 1);
            let mut untied = model.untie(eta);
            untied.push(theta[0]);
            point.u = untied;
            (point, tree) = ascend(
                &ctx,
                false,
                point,
                tree,
                &mut trace,
                (start, &mut iteration),
                search,
                on_iteration,
            )?;
        }
        finals.push(tree.log_evidence());
        if best
            .as_ref()
            .is_none_or(|b| tree.log_evidence() > b.log_evidence())
        {
            best = Some(Learned {
                model: point.model,
                mixing: point.mixing,
                tree,
                trace,
                start_log_evidences: Vec::new(),
            });
        }
    }
    let mut best = best.expect("there is at least one start");
    best.start_log_evidences = finals;
    Ok(best)
}

/// The hyperparameters at `u`.
fn decode<M: Learnable>(ctx: &Context<'_, M>, u: Vec<f64>, tie: bool) -> Result<Point<M>> {
    let (eta, theta) = u.split_at(u.len() - 1);
    let model = ctx.base.at(eta, tie)?;
    let mixing = ctx.mixing.at(theta[0]);
    Ok(Point { u, model, mixing })
}

/// The first start: the given hyperparameters themselves, unless `u` stands for another
/// prior (a tied start from per-feature values that differ), whose values it then holds.
/// The coordinates round-trip through logarithms, which would move a given value by an
/// ulp or, outside the box, by more.
fn first_point<M: Learnable>(ctx: &Context<'_, M>, u: Vec<f64>, tie: bool) -> Result<Point<M>> {
    let decoded = decode(ctx, u, tie)?;
    let given = ctx.base.hyperparameters();
    let same = decoded
        .model
        .hyperparameters()
        .iter()
        .zip(&given)
        .all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(f64::MIN_POSITIVE));
    Ok(Point {
        model: if same {
            ctx.base.clone()
        } else {
            decoded.model
        },
        mixing: ctx.mixing.start,
        u: decoded.u,
    })
}

/// `ln p(D | T)` of `topology` and its gradient with respect to the coordinates `u`.
fn evidence_at<M: Learnable>(
    ctx: &Context<'_, M>,
    topology: &Topology,
    u: &[f64],
    tie: bool,
) -> Result<(f64, Vec<f64>)> {
    if (ctx.interrupt)() {
        return Err(RoseTreeError::Interrupted);
    }
    let (eta, theta) = u.split_at(u.len() - 1);
    let model = ctx.base.at(eta, tie)?;
    let mixing = ctx.mixing.at(theta[0]);
    let leaves = model.leaf_stats_all(ctx.x)?;
    let g = evidence_gradient(&model, &mixing, topology, &leaves)?;
    let mut grad = ctx.base.coordinate_gradient(eta, &g.model, tie);
    grad.push(ctx.mixing.gradient(theta[0], g.mixing));
    Ok((g.log_evidence, grad))
}

/// One ascent from `point` and its tree, appending to `trace`; `at` is the start and the
/// iteration count of this start so far.
#[allow(clippy::too_many_arguments)]
fn ascend<M: Learnable>(
    ctx: &Context<'_, M>,
    tie: bool,
    mut point: Point<M>,
    mut tree: RoseTree,
    trace: &mut Vec<f64>,
    at: (usize, &mut usize),
    search: &mut dyn FnMut(&M, &Mixing) -> Result<RoseTree>,
    on_iteration: &mut dyn FnMut(Iteration),
) -> Result<(Point<M>, RoseTree)> {
    let (start, iteration) = at;
    let options = BoxOptions {
        ftol: FTOL,
        ..BoxOptions::default()
    };
    for it in 0..ctx.params.max_iter {
        if (ctx.interrupt)() {
            return Err(RoseTreeError::Interrupted);
        }
        progress::report("learning hyperparameters", it, ctx.params.max_iter);
        // The hyperparameters given the tree.
        let topology = tree.topology();
        let f = |u: &[f64]| evidence_at(ctx, &topology, u, tie);
        let found = lbfgsb_max(&f, -LOG_BOUND, LOG_BOUND, &point.u, &options)?;
        if let Some(found) = found.filter(|f| f.value > tree.log_evidence()) {
            let moved = decode(ctx, found.x, tie)?;
            let leaves = moved.model.leaf_stats_all(ctx.x)?;
            let evaluated = evaluate(&moved.model, &moved.mixing, &topology, &leaves)?;
            // The search's evidence comes from its own sums; keep the step only if the
            // tree's evaluation agrees that it is better.
            if evaluated.log_evidence() >= tree.log_evidence() {
                point = moved;
                tree = evaluated;
            }
        }
        trace.push(tree.log_evidence());
        if (ctx.interrupt)() {
            return Err(RoseTreeError::Interrupted);
        }
        // The tree given the hyperparameters, kept only if more likely.
        let candidate = search(&point.model, &point.mixing)?;
        if candidate.n_leaves() != ctx.x.nrows() {
            return Err(RoseTreeError::ShapeMismatch {
                what: "tree".into(),
                expected: format!("{} leaves (one per data row)", ctx.x.nrows()),
                found: format!("{} leaves", candidate.n_leaves()),
            });
        }
        if candidate.log_evidence() > tree.log_evidence() {
            tree = candidate;
        }
        trace.push(tree.log_evidence());
        on_iteration(Iteration {
            start,
            n_starts: ctx.n_starts,
            iteration: *iteration,
            log_evidence: tree.log_evidence(),
        });
        *iteration += 1;
        let last = trace[trace.len() - 1];
        if last - trace[trace.len() - 3] <= ctx.params.tol * last.abs().max(1.0) {
            break;
        }
    }
    Ok((point, tree))
}

#[cfg(test)]
mod tests;
