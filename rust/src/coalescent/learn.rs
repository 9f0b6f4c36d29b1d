//! Learning `Λ` together with the tree (Teh, Daumé & Roy 2007, §4.4).
//!
//! Coordinate ascent on `J(π, Λ) = ln p(x, π | Λ) + ln p(Λ)`: given the tree, `Λ` moves to
//! its posterior mode ([`LearnableRate::lambda_map`]); given `Λ`, the inference searches a new
//! tree, kept only if it raises `J`. Each step is accepted only if `J` does not fall, so the
//! trace ([`Learned::trace`]) never decreases.
//!
//! # Priors and posterior modes
//! **Brownian diffusion** ([`BrownianDiffusion`]). Given a timed tree the data enter `Λ`'s
//! posterior only through the independent contrasts ([`brownian_contrasts`]): `m` contrasts
//! with scatter `S`, and `ln p(x | π, Λ) = c − (m/2) ln|Λ| − ½ tr(Λ⁻¹S)`. The conjugate
//! prior for each shape of `Λ` ([`LambdaPrior::InverseWishart`], `ν` counting
//! pseudo-contrasts):
//! - full `Λ`: `IW(ν, Ψ)`, density `∝ |Λ|^{−(ν+d+1)/2} exp(−½ tr(ΨΛ⁻¹))`; mode
//!   `(Ψ + S)/(ν + m + d + 1)`;
//! - diagonal `Λ`: `λ_j ~ IW₁(ν, ψ_j) = InvGamma(ν/2, ψ_j/2)`; mode `(ψ_j + S_jj)/(ν + m + 2)`;
//! - `Λ = λI`: the `d` coordinates pool, `λ ~ InvGamma(dν/2, ψ/2)`; mode
//!   `(ψ + tr S)/(d(ν + m) + 2)`.
//!
//! The default prior ([`LearnableRate::default_prior`]) is proper, weak, and has its mode at the
//! starting `Λ₀`: `ν = d + 1`, `Ψ = (2d + 2)Λ₀` for a full matrix; `ν = 2`, `ψ = 4λ₀ⱼ` per
//! feature for a diagonal; `ν = 2`, `ψ = (2d + 2)λ₀` for a scalar.
//!
//! **Mutation** ([`MultinomialMutation`]). Each rate `λ_j`, or one rate shared by every
//! feature, has a `Gamma(a, b_j)` prior ([`LambdaPrior::Gamma`], shape `a`, rate `b_j`;
//! default `a = 2`, `b = 1/λ₀`, whose mode is the starting rate), and moves to the maximiser
//! of its posterior by [`rate_map`].

use nalgebra::DMatrix;
use ndarray::{Array2, ArrayView2};

use super::hyper::{brownian_contrasts, gamma_log_density, rate_map};
use super::kingman::log_joint;
use super::merges::CoalescentFit;
use crate::error::{Result, RoseTreeError};
use crate::math::{ln_gamma, ln_multigamma};
use crate::models::messages::{BrownianDiffusion, MessageModel, MultinomialMutation};
use crate::parallel::Threads;
use crate::tree::Tree;

/// A round of learning stops the ascent when it raises `J` by less than this, relative to
/// `1 + |J|`.
pub const TOLERANCE: f64 = 1e-9;

/// The value of `Λ`: one number, one per feature, or a full matrix.
///
/// For Brownian diffusion `Λ = λI`, `diag(λ)` or the matrix itself; for the mutation model
/// one rate shared by every feature or one rate per feature.
#[derive(Debug, Clone, PartialEq)]
pub enum Lambda {
    /// `Λ = λI`, or one mutation rate for every feature.
    Shared(f64),
    /// `Λ = diag(λ₁, …, λ_d)`, or one mutation rate per feature.
    PerFeature(Vec<f64>),
    /// A full symmetric positive-definite `Λ` (Brownian diffusion only).
    Full(Array2<f64>),
}

impl Lambda {
    /// The shape as NumPy writes it: `[]`, `[d]` or `[d, d]`.
    #[must_use]
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Self::Shared(_) => vec![],
            Self::PerFeature(v) => vec![v.len()],
            Self::Full(m) => m.shape().to_vec(),
        }
    }

    /// The entries in row-major order.
    #[must_use]
    pub fn values(&self) -> Vec<f64> {
        match self {
            Self::Shared(v) => vec![*v],
            Self::PerFeature(v) => v.clone(),
            Self::Full(m) => m.iter().copied().collect(),
        }
    }
}

/// The prior on `Λ` (module docs).
#[derive(Debug, Clone, PartialEq)]
pub enum LambdaPrior {
    /// Brownian diffusion: `IW(ν, Ψ)` for a full `Λ`, `InvGamma(ν/2, ψ_j/2)` per feature for a
    /// diagonal one, `InvGamma(dν/2, ψ/2)` for `Λ = λI`; `psi` has the shape of `Λ`.
    InverseWishart {
        /// `ν`, the pseudo-contrasts.
        nu: f64,
        /// `Ψ`, shaped like `Λ`.
        psi: Lambda,
    },
    /// The mutation model: `Gamma(shape, rates_j)` on each rate (`rates` has one entry per
    /// feature; for a shared rate the first is its prior's rate).
    Gamma {
        /// The shape `a`.
        shape: f64,
        /// The rate `b_j` of each feature's prior.
        rates: Vec<f64>,
    },
}

fn bad_prior(reason: impl Into<String>) -> RoseTreeError {
    RoseTreeError::param("Lambda_prior", reason)
}

impl LambdaPrior {
    /// A Gamma prior with shape `shape` and rate `rate` (one value, or one per feature of
    /// `lambda`), checked for `lambda` in `d` features.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `Lambda_prior` for a rate of another shape
    /// than `lambda`'s, a shape that is not `> 0`, or a rate that is not finite and `> 0`.
    pub fn gamma(shape: f64, rate: &Lambda, lambda: &Lambda, d: usize) -> Result<Self> {
        let rates = match (rate, lambda) {
            (Lambda::Shared(b), _) => vec![*b; d],
            (Lambda::PerFeature(b), Lambda::PerFeature(l)) if b.len() == l.len() => b.clone(),
            _ => {
                return Err(bad_prior(format!(
                    "rate must be a number or have the shape of Lambda {:?}",
                    lambda.shape()
                )));
            }
        };
        let positive = |v: &f64| v.is_finite() && *v > 0.0;
        if !(positive(&shape) && rates.iter().all(positive)) {
            return Err(bad_prior(format!(
                "needs shape > 0 and finite rates > 0, got ({shape}, {:?})",
                rate.values()
            )));
        }
        Ok(Self::Gamma { shape, rates })
    }

    /// An inverse-Wishart prior `(ν, Ψ)` for `lambda` in `d` features, checked.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `Lambda_prior` for a `Ψ` of another shape
    /// than `lambda`'s or not finite; for a full `Λ`, `ν ≤ d − 1` or a `Ψ` that is not
    /// symmetric (to a relative `1e-10`) and positive definite; otherwise `ν ≤ 0` or an
    /// entry of `Ψ` that is not `> 0`.
    pub fn inverse_wishart(nu: f64, psi: Lambda, lambda: &Lambda, d: usize) -> Result<Self> {
        if psi.shape() != lambda.shape() {
            return Err(bad_prior(format!(
                "Psi must have the shape of Lambda {:?}, got {:?}",
                lambda.shape(),
                psi.shape()
            )));
        }
        if !psi.values().iter().all(|v| v.is_finite()) {
            return Err(bad_prior("Psi must be finite"));
        }
        if let Lambda::Full(m) = &psi {
            if !(nu.is_finite() && nu > d as f64 - 1.0) {
                return Err(bad_prior(format!(
                    "nu must be > d - 1 = {} for a full Lambda, got {nu}",
                    d as i64 - 1
                )));
            }
            let symmetric = (0..d)
                .all(|i| (0..i).all(|j| (m[[i, j]] - m[[j, i]]).abs() <= 1e-10 * m[[j, i]].abs()));
            if !symmetric {
                return Err(bad_prior("Psi must be symmetric"));
            }
            if as_matrix(m).cholesky().is_none() {
                return Err(bad_prior("Psi must be positive definite"));
            }
        } else {
            if !(nu.is_finite() && nu > 0.0) {
                return Err(bad_prior(format!("nu must be > 0, got {nu}")));
            }
            if psi.values().iter().any(|v| *v <= 0.0) {
                return Err(bad_prior("Psi must be > 0"));
            }
        }
        Ok(Self::InverseWishart { nu, psi })
    }

    /// `ln p(Λ)` under this prior for `Λ` in `d` features (`−∞` for a `Λ` outside its
    /// support).
    #[must_use]
    pub fn log_density(&self, lambda: &Lambda, d: usize) -> f64 {
        match (self, lambda) {
            (Self::Gamma { shape, rates }, Lambda::Shared(l)) => {
                positive_gamma_log_density(*l, *shape, rates[0])
            }
            (Self::Gamma { shape, rates }, Lambda::PerFeature(l)) => l
                .iter()
                .zip(rates)
                .map(|(l, b)| positive_gamma_log_density(*l, *shape, *b))
                .sum(),
            (Self::InverseWishart { nu, psi }, _) => {
                inverse_wishart_log_density(*nu, psi, lambda, d)
            }
            (Self::Gamma { .. }, Lambda::Full(_)) => f64::NEG_INFINITY,
        }
    }
}

fn as_matrix(m: &Array2<f64>) -> DMatrix<f64> {
    DMatrix::from_fn(m.nrows(), m.ncols(), |i, j| m[[i, j]])
}

/// [`gamma_log_density`], `−∞` for `x ≤ 0`.
fn positive_gamma_log_density(x: f64, a: f64, b: f64) -> f64 {
    if x > 0.0 {
        gamma_log_density(x, a, b)
    } else {
        f64::NEG_INFINITY
    }
}

/// `ln InvGamma(x; a, β)`, shape `a`, scale `β`.
fn inverse_gamma_log_density(x: f64, a: f64, beta: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        return f64::NEG_INFINITY;
    }
    a * beta.ln() - ln_gamma(a) - (a + 1.0) * x.ln() - beta / x
}

/// `ln p(Λ)` under `IW(ν, Ψ)` in the form for `Λ`'s shape in `d` features (module docs).
fn inverse_wishart_log_density(nu: f64, psi: &Lambda, lambda: &Lambda, d: usize) -> f64 {
    match (psi, lambda) {
        // λI pools the d coordinates.
        (Lambda::Shared(psi), Lambda::Shared(l)) => {
            inverse_gamma_log_density(*l, d as f64 * nu / 2.0, psi / 2.0)
        }
        (Lambda::PerFeature(psi), Lambda::PerFeature(l)) => l
            .iter()
            .zip(psi)
            .map(|(l, p)| inverse_gamma_log_density(*l, nu / 2.0, p / 2.0))
            .sum(),
        (Lambda::Full(psi), Lambda::Full(l)) => {
            let d = l.nrows();
            let Some(chol) = as_matrix(l).cholesky() else {
                return f64::NEG_INFINITY;
            };
            let Some(psi_chol) = as_matrix(psi).cholesky() else {
                return f64::NEG_INFINITY;
            };
            let ln_det = |c: &nalgebra::Cholesky<f64, nalgebra::Dyn>| {
                2.0 * c.l_dirty().diagonal().iter().map(|v| v.ln()).sum::<f64>()
            };
            let trace = (chol.inverse() * as_matrix(psi)).trace();
            let df = d as f64;
            0.5 * nu * ln_det(&psi_chol)
                - 0.5 * nu * df * std::f64::consts::LN_2
                - ln_multigamma(0.5 * nu, d)
                - 0.5 * (nu + df + 1.0) * ln_det(&chol)
                - 0.5 * trace
        }
        _ => f64::NEG_INFINITY,
    }
}

/// A message model whose rate `Λ` can be learnt with the tree (module docs).
pub trait LearnableRate: MessageModel + Clone {
    /// The same model with `lambda` in place of its `Λ`; everything else kept.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] for a `lambda` this model cannot take.
    fn with_lambda(&self, lambda: &Lambda) -> Result<Self>;

    /// The weak proper prior whose mode is `lambda` (module docs).
    fn default_prior(lambda: &Lambda, d: usize) -> LambdaPrior;

    /// The posterior mode of `Λ` given the rows `x` and the timed tree (module docs);
    /// `current` is this model's `Λ`, kept where a search finds nothing better.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `Lambda_prior` for a prior of the other
    /// model; as [`brownian_contrasts`] or [`rate_map`].
    fn lambda_map(
        &self,
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        current: &Lambda,
        prior: &LambdaPrior,
        threads: &Threads,
    ) -> Result<Lambda>;
}

impl LearnableRate for BrownianDiffusion {
    fn with_lambda(&self, lambda: &Lambda) -> Result<Self> {
        let d = self.n_features();
        let model = match lambda {
            Lambda::Shared(l) => Self::isotropic(*l, d),
            Lambda::PerFeature(l) => Self::diagonal(l, d),
            Lambda::Full(l) => Self::full(l.view()),
        }?;
        model.with_root(self.root())?.with_noise(self.noise())
    }

    fn default_prior(lambda: &Lambda, d: usize) -> LambdaPrior {
        let df = d as f64;
        let (nu, psi) = match lambda {
            Lambda::Shared(l) => (2.0, Lambda::Shared((2.0 * df + 2.0) * l)),
            Lambda::PerFeature(l) => (2.0, Lambda::PerFeature(l.iter().map(|v| 4.0 * v).collect())),
            Lambda::Full(l) => (df + 1.0, Lambda::Full(l * (2.0 * df + 2.0))),
        };
        LambdaPrior::InverseWishart { nu, psi }
    }

    fn lambda_map(
        &self,
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        current: &Lambda,
        prior: &LambdaPrior,
        _threads: &Threads,
    ) -> Result<Lambda> {
        let LambdaPrior::InverseWishart { nu, psi } = prior else {
            return Err(bad_prior(
                "must be an inverse-Wishart (nu, Psi) for Brownian diffusion",
            ));
        };
        let (s, m) = brownian_contrasts(x, tree, self.root(), self.noise())?;
        let (d, m) = (s.nrows() as f64, m as f64);
        Ok(match (psi, current) {
            (Lambda::Shared(psi), Lambda::Shared(_)) => {
                Lambda::Shared((psi + s.diag().sum()) / (d * (nu + m) + 2.0))
            }
            (Lambda::PerFeature(psi), Lambda::PerFeature(_)) => Lambda::PerFeature(
                psi.iter()
                    .zip(s.diag())
                    .map(|(p, s)| (p + s) / (nu + m + 2.0))
                    .collect(),
            ),
            (Lambda::Full(psi), Lambda::Full(_)) => {
                let out = (psi + &s) / (nu + m + d + 1.0);
                Lambda::Full((&out + &out.t()) / 2.0)
            }
            _ => {
                return Err(bad_prior(format!(
                    "Psi must have the shape of Lambda {:?}, got {:?}",
                    current.shape(),
                    psi.shape()
                )));
            }
        })
    }
}

fn matrix_rates() -> RoseTreeError {
    RoseTreeError::param(
        "lambda",
        "the mutation model takes one rate, or one per feature, not a matrix",
    )
}

impl LearnableRate for MultinomialMutation {
    fn with_lambda(&self, lambda: &Lambda) -> Result<Self> {
        match lambda {
            Lambda::Shared(l) => self.with_rates(&[*l]),
            Lambda::PerFeature(l) => self.with_rates(l),
            Lambda::Full(_) => Err(matrix_rates()),
        }
    }

    fn default_prior(lambda: &Lambda, d: usize) -> LambdaPrior {
        let rates = match lambda {
            Lambda::Shared(l) => vec![1.0 / l; d],
            Lambda::PerFeature(l) => l.iter().map(|v| 1.0 / v).collect(),
            Lambda::Full(_) => vec![1.0; d],
        };
        LambdaPrior::Gamma { shape: 2.0, rates }
    }

    fn lambda_map(
        &self,
        x: ArrayView2<'_, f64>,
        tree: &Tree,
        current: &Lambda,
        prior: &LambdaPrior,
        threads: &Threads,
    ) -> Result<Lambda> {
        let LambdaPrior::Gamma { shape, rates } = prior else {
            return Err(bad_prior(
                "must be a Gamma (shape, rate) for the mutation model",
            ));
        };
        let d = x.ncols();
        let (start, shared) = match current {
            Lambda::Shared(l) => (vec![*l; d], true),
            Lambda::PerFeature(l) => (l.clone(), false),
            Lambda::Full(_) => return Err(matrix_rates()),
        };
        let found = rate_map(self, x, tree, &start, shared, *shape, rates, threads)?;
        Ok(if shared {
            Lambda::Shared(found[0])
        } else {
            Lambda::PerFeature(found)
        })
    }
}

/// What a tree search returns that learning needs: the tree and its `ln p(x, π)`.
pub trait SearchResult {
    /// The tree (for a sample of trees, the one reported).
    fn tree(&self) -> &Tree;
    /// Its `ln p(x, π)` under the `Λ` of the search.
    fn log_joint(&self) -> f64;
    /// The same result with `ln p(x, π)` under another `Λ` (the tree unchanged).
    fn set_log_joint(&mut self, value: f64);
}

impl SearchResult for CoalescentFit {
    fn tree(&self) -> &Tree {
        &self.tree
    }
    fn log_joint(&self) -> f64 {
        self.log_joint
    }
    fn set_log_joint(&mut self, value: f64) {
        self.log_joint = value;
    }
}

/// The options of [`learn`].
#[derive(Debug, Clone, Copy)]
pub struct LearnOptions {
    /// The most rounds (an M-step and a search each).
    pub rounds: usize,
    /// A sampler's result (SMC particles) describes the `Λ` it was drawn under: search again
    /// at the end if the kept result was found under an earlier `Λ`. A greedy tree keeps its
    /// `ln p(x, π)` re-evaluated under the final `Λ` instead.
    pub resample: bool,
}

/// The result of [`learn`].
#[derive(Debug, Clone)]
pub struct Learned<R> {
    /// The search's result under (or, for a greedy tree, evaluated at) [`Self::lambda`].
    pub fit: R,
    /// The learnt `Λ`.
    pub lambda: Lambda,
    /// `J = ln p(x, π) + ln p(Λ)` at the start and after every accepted step.
    pub trace: Vec<f64>,
}

/// Coordinate ascent between `Λ` and the tree (module docs), from the tree of `first` (a
/// search's result; its `ln p(x, π)` is evaluated again under `model`, whose `Λ` is
/// `lambda`). `search` runs the inference under a model; `on_round` is
/// told each round's number (from 0) and `J` before it. `interrupt` is polled between steps.
///
/// # Errors
/// [`RoseTreeError::Numerical`] if `J` is not finite at the start; whatever the M-step or the
/// search reports; [`RoseTreeError::Interrupted`] when `interrupt` returns `true`.
#[allow(clippy::too_many_arguments)]
pub fn learn<M: LearnableRate, R: SearchResult>(
    model: &M,
    lambda: Lambda,
    prior: &LambdaPrior,
    x: ArrayView2<'_, f64>,
    first: R,
    search: &mut dyn FnMut(&M) -> Result<R>,
    options: LearnOptions,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
    on_round: &mut dyn FnMut(usize, f64),
) -> Result<Learned<R>> {
    let mut lambda = lambda;
    let mut fit = first;
    // J at the start from the tree's own evaluation under `model`, as every later J.
    fit.set_log_joint(log_joint(model, x, fit.tree())?);
    let mut objective = fit.log_joint() + prior.log_density(&lambda, x.ncols());
    if !objective.is_finite() {
        return Err(RoseTreeError::Numerical(
            "ln p(x, tree) + ln p(Lambda) is not finite at the start of learning (Lambda or \
             Lambda_prior too extreme for double precision)"
                .into(),
        ));
    }
    let mut trace = vec![objective];
    // Whether `fit` was found under the current Λ.
    let mut current = true;
    for round in 0..options.rounds {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        on_round(round, objective);
        // Λ given the tree: the posterior mode, never worse than before.
        let new = model.lambda_map(x, fit.tree(), &lambda, prior, threads)?;
        let moved = model.with_lambda(&new)?;
        let tree_joint = log_joint(&moved, x, fit.tree())?;
        let value = tree_joint + prior.log_density(&new, x.ncols());
        // (written so that a NaN, from a Λ beyond double precision, stops too)
        if value.is_nan() || value < objective {
            break;
        }
        lambda = new;
        fit.set_log_joint(tree_joint);
        current = false;
        trace.push(value);
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        // The tree given Λ, kept only if it raises J.
        let candidate = search(&moved)?;
        let with_prior = candidate.log_joint() + prior.log_density(&lambda, x.ncols());
        let improved = with_prior > value;
        if improved {
            fit = candidate;
            current = true;
            trace.push(with_prior);
        }
        let last = *trace.last().expect("the trace starts with the first J");
        let gain = last - objective;
        objective = last;
        if !improved || gain <= TOLERANCE * (1.0 + objective.abs()) {
            break;
        }
    }
    if options.resample && !current {
        fit = search(&model.with_lambda(&lambda)?)?;
    }
    Ok(Learned { fit, lambda, trace })
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::coalescent::{CoalescentParams, fit};
    use crate::models::messages::Root;
    use crate::tree::Topology;

    /// A three-leaf timed tree and rows on it.
    fn small() -> (Array2<f64>, Tree) {
        let x = array![[0.0, 1.0], [0.5, 0.7], [2.0, -1.0], [2.4, -0.2]];
        let tree = Tree::new(
            &Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap(),
            Some(vec![0.0, 0.0, 0.0, 0.0, -0.4, -0.6, -2.5]),
        )
        .unwrap();
        (x, tree)
    }

    /// `J(Λ)` on the tree, by the upward pass.
    fn objective<M: LearnableRate>(
        model: &M,
        prior: &LambdaPrior,
        x: &Array2<f64>,
        tree: &Tree,
        l: &Lambda,
    ) -> f64 {
        let m = model.with_lambda(l).unwrap();
        log_joint(&m, x.view(), tree).unwrap() + prior.log_density(l, x.ncols())
    }

    #[test]
    fn the_brownian_modes_beat_a_grid_of_every_shape() {
        let (x, tree) = small();
        let threads = Threads::new(Some(1)).unwrap();
        for root in [Root::Flat, Root::Gaussian { s0: 1.5 }] {
            let model = BrownianDiffusion::isotropic(1.0, 2)
                .unwrap()
                .with_root(root)
                .unwrap()
                .with_noise(0.1)
                .unwrap();
            // λI: a one-dimensional grid around the mode.
            let start = Lambda::Shared(1.3);
            let prior = BrownianDiffusion::default_prior(&start, 2);
            let Lambda::Shared(mode) = model
                .lambda_map(x.view(), &tree, &start, &prior, &threads)
                .unwrap()
            else {
                panic!("shape kept")
            };
            let best = objective(&model, &prior, &x, &tree, &Lambda::Shared(mode));
            for k in -200..=200 {
                let l = mode * (f64::from(k) * 0.005).exp();
                assert!(objective(&model, &prior, &x, &tree, &Lambda::Shared(l)) <= best + 1e-12);
            }
            // diag(λ): each coordinate on its own grid, the other held.
            let start = Lambda::PerFeature(vec![0.5, 2.0]);
            let prior =
                LambdaPrior::inverse_wishart(3.0, Lambda::PerFeature(vec![2.0, 5.0]), &start, 2)
                    .unwrap();
            let Lambda::PerFeature(mode) = model
                .lambda_map(x.view(), &tree, &start, &prior, &threads)
                .unwrap()
            else {
                panic!("shape kept")
            };
            let best = objective(&model, &prior, &x, &tree, &Lambda::PerFeature(mode.clone()));
            for j in 0..2 {
                for k in -100..=100 {
                    let mut l = mode.clone();
                    l[j] *= (f64::from(k) * 0.01).exp();
                    assert!(
                        objective(&model, &prior, &x, &tree, &Lambda::PerFeature(l))
                            <= best + 1e-12
                    );
                }
            }
            // Full Λ: every entry's direction, symmetric perturbations.
            let start = Lambda::Full(array![[1.0, 0.3], [0.3, 2.0]]);
            let prior = BrownianDiffusion::default_prior(&start, 2);
            let Lambda::Full(mode) = model
                .lambda_map(x.view(), &tree, &start, &prior, &threads)
                .unwrap()
            else {
                panic!("shape kept")
            };
            let best = objective(&model, &prior, &x, &tree, &Lambda::Full(mode.clone()));
            for (i, j) in [(0, 0), (1, 1), (0, 1)] {
                for k in [-0.02, -0.002, 0.002, 0.02] {
                    let mut l = mode.clone();
                    l[[i, j]] += k;
                    l[[j, i]] = l[[i, j]];
                    assert!(objective(&model, &prior, &x, &tree, &Lambda::Full(l)) < best);
                }
            }
        }
    }

    #[test]
    fn the_inverse_wishart_density_is_the_inverse_gamma_in_one_dimension() {
        // IW₁(ν, ψ) = InvGamma(ν/2, ψ/2), written out independently.
        let (nu, psi, l) = (3.0_f64, 2.5_f64, 0.7_f64);
        let full = LambdaPrior::InverseWishart {
            nu,
            psi: Lambda::Full(array![[psi]]),
        }
        .log_density(&Lambda::Full(array![[l]]), 1);
        let a = nu / 2.0;
        let want = a * (psi / 2.0).ln() - ln_gamma(a) - (a + 1.0) * l.ln() - psi / (2.0 * l);
        assert!((full - want).abs() < 1e-13, "{full} {want}");
    }

    #[test]
    fn learning_never_lowers_the_objective_and_keeps_the_best_tree() {
        let x = array![
            [0.0, 0.1],
            [0.2, -0.1],
            [3.0, 3.2],
            [3.3, 2.9],
            [-2.0, 4.0],
            [-2.2, 4.4]
        ];
        let params = CoalescentParams::new().check().unwrap();
        let threads = Threads::new(Some(1)).unwrap();
        for start in [Lambda::Shared(0.05), Lambda::PerFeature(vec![20.0, 0.3])] {
            let model = BrownianDiffusion::isotropic(1.0, 2)
                .unwrap()
                .with_noise(0.1)
                .unwrap()
                .with_lambda(&start)
                .unwrap();
            let prior = BrownianDiffusion::default_prior(&start, 2);
            let first = fit(&model, &params, x.view()).unwrap();
            let mut rounds = Vec::new();
            let learned = learn(
                &model,
                start.clone(),
                &prior,
                x.view(),
                first,
                &mut |m| fit(m, &params, x.view()),
                LearnOptions {
                    rounds: 10,
                    resample: false,
                },
                &threads,
                &|| false,
                &mut |r, _| rounds.push(r),
            )
            .unwrap();
            assert!(learned.trace.windows(2).all(|w| w[1] >= w[0]));
            assert!(learned.trace.last().unwrap() > &learned.trace[0]);
            assert_eq!(rounds[0], 0);
            // The reported fit is the tree's own ln p(x, π) under the learnt Λ, and J's last
            // value is it plus the prior.
            let m = model.with_lambda(&learned.lambda).unwrap();
            let again = log_joint(&m, x.view(), &learned.fit.tree).unwrap();
            assert_eq!(learned.fit.log_joint, again);
            let j = again + prior.log_density(&learned.lambda, 2);
            assert!((learned.trace.last().unwrap() - j).abs() <= 1e-12 * j.abs());
        }
        assert!(matches!(
            learn(
                &BrownianDiffusion::isotropic(1.0, 2).unwrap(),
                Lambda::Shared(1.0),
                &LambdaPrior::Gamma { shape: 2.0, rates: vec![1.0; 2] },
                x.view(),
                fit(&BrownianDiffusion::isotropic(1.0, 2).unwrap(), &params, x.view()).unwrap(),
                &mut |m| fit(m, &params, x.view()),
                LearnOptions { rounds: 3, resample: false },
                &threads,
                &|| false,
                &mut |_, _| {},
            ),
            Err(RoseTreeError::InvalidParameter { name, .. }) if name == "Lambda_prior"
        ));
    }

    #[test]
    fn bad_priors_are_named() {
        let full = Lambda::Full(array![[1.0, 0.0], [0.0, 1.0]]);
        let cases = [
            LambdaPrior::inverse_wishart(0.5, full.clone(), &full, 2),
            LambdaPrior::inverse_wishart(
                5.0,
                Lambda::Full(array![[1.0, 2.0], [2.0, 1.0]]),
                &full,
                2,
            ),
            LambdaPrior::inverse_wishart(
                5.0,
                Lambda::Full(array![[1.0, 0.5], [0.0, 1.0]]),
                &full,
                2,
            ),
            LambdaPrior::inverse_wishart(5.0, Lambda::PerFeature(vec![1.0, 1.0]), &full, 2),
            LambdaPrior::inverse_wishart(0.0, Lambda::Shared(1.0), &Lambda::Shared(1.0), 2),
            LambdaPrior::inverse_wishart(2.0, Lambda::Shared(f64::NAN), &Lambda::Shared(1.0), 2),
            LambdaPrior::gamma(0.0, &Lambda::Shared(1.0), &Lambda::Shared(1.0), 2),
            LambdaPrior::gamma(
                2.0,
                &Lambda::PerFeature(vec![1.0, 2.0]),
                &Lambda::Shared(1.0),
                2,
            ),
        ];
        for case in cases {
            assert!(
                matches!(&case, Err(RoseTreeError::InvalidParameter { name, .. }) if name == "Lambda_prior"),
                "{case:?}"
            );
        }
    }
}
