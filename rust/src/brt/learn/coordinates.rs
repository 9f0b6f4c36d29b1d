//! The unconstrained coordinates in which [`super::learn_with`] searches: each model's own
//! ([`Learnable`]) and the mixing parameter's ([`MixingCoordinate`]).
//!
//! Every vector of coordinates is a valid prior, so the optimiser needs only a box (which
//! keeps its steps finite, [`super::LOG_BOUND`]). The model's coordinates are relative to a
//! base, the model learning starts from (its data-driven defaults resolved), which also
//! fixes what does not move: `μ₀` and the shape of `Ψ₀` of the Normal–inverse-Wishart
//! prior, and with `tie` the Normal–Gamma `m₀` and the ratios between its `b₀`.

use crate::error::Result;
use crate::models::{
    BetaBernoulli, Differentiable, DirichletMultinomial, NormalGamma, NormalInverseWishart,
};

use super::super::Mixing;

/// A cluster model whose hyperparameters can be learnt: its coordinates, relative to
/// itself as the base (the model learning starts from).
///
/// `tie` asks for one value per hyperparameter shared by all features (where the model has
/// per-feature ones; each model documents what it ties). The coordinates are ordered as the
/// model documents; their gradient comes from the one of [`Differentiable::add_gradient`]
/// by the chain rule ([`Learnable::coordinate_gradient`]).
pub trait Learnable: Differentiable + Clone {
    /// The coordinates of this model itself (with `tie`, of the features' mean where the
    /// per-feature values differ: another prior).
    fn start(&self, tie: bool) -> Vec<f64>;

    /// Whether the model has per-feature hyperparameters whose values are the same for
    /// every feature, so that tied coordinates describe it exactly and can be learnt first.
    fn shared_start(&self) -> bool {
        false
    }

    /// Tied coordinates `eta` as per-feature ones describing the same prior (for a model
    /// with per-feature hyperparameters; others return `eta`).
    fn untie(&self, eta: &[f64]) -> Vec<f64> {
        eta.to_vec()
    }

    /// The model at coordinates `eta`.
    ///
    /// # Errors
    /// [`crate::RoseTreeError::InvalidParameter`] where a coordinate gives a value outside
    /// the model's domain (beyond double precision).
    fn at(&self, eta: &[f64], tie: bool) -> Result<Self>;

    /// `∂/∂eta` from `grad`, the gradient with respect to the hyperparameters of the model
    /// at `eta` (in the order of [`Differentiable::hyperparameters`]).
    fn coordinate_gradient(&self, eta: &[f64], grad: &[f64], tie: bool) -> Vec<f64>;
}

/// `ln` of each value, or with `tie` of the mean of each group of `d`.
fn log_groups(groups: &[&[f64]], tie: bool) -> Vec<f64> {
    if tie {
        groups
            .iter()
            .map(|g| (g.iter().sum::<f64>() / g.len() as f64).ln())
            .collect()
    } else {
        groups
            .iter()
            .flat_map(|g| g.iter().map(|v| v.ln()))
            .collect()
    }
}

/// Each of `eta` repeated `d` times.
fn repeat_each(eta: &[f64], d: usize) -> Vec<f64> {
    eta.iter()
        .flat_map(|&v| std::iter::repeat_n(v, d))
        .collect()
}

/// `e^eta` per feature: with `tie`, each shared value repeated `d` times.
fn positive_values(eta: &[f64], d: usize, tie: bool) -> Vec<f64> {
    let values: Vec<f64> = eta.iter().map(|v| v.exp()).collect();
    if tie { repeat_each(&values, d) } else { values }
}

/// The chain rule for values `e^eta`: `grad · value`, and with `tie` each shared value's
/// derivative summed over the `d` features it stands for.
fn positive_gradient(eta: &[f64], grad: &[f64], d: usize, tie: bool) -> Vec<f64> {
    if tie {
        eta.iter()
            .zip(grad.chunks(d))
            .map(|(e, g)| g.iter().sum::<f64>() * e.exp())
            .collect()
    } else {
        eta.iter().zip(grad).map(|(e, g)| g * e.exp()).collect()
    }
}

/// Whether each group of values is one value repeated, over more than one feature.
fn all_shared(groups: &[&[f64]]) -> bool {
    groups
        .iter()
        .all(|g| g.len() > 1 && g.iter().all(|v| *v == g[0]))
}

/// `ln α_i` then `ln β_i` per feature; with `tie`, `ln ᾱ` and `ln β̄` shared by all features.
impl Learnable for BetaBernoulli {
    fn start(&self, tie: bool) -> Vec<f64> {
        log_groups(&[self.alpha(), self.beta()], tie)
    }

    fn shared_start(&self) -> bool {
        all_shared(&[self.alpha(), self.beta()])
    }

    fn untie(&self, eta: &[f64]) -> Vec<f64> {
        repeat_each(eta, self.alpha().len())
    }

    fn at(&self, eta: &[f64], tie: bool) -> Result<Self> {
        self.with_hyperparameters(&positive_values(eta, self.alpha().len(), tie))
    }

    fn coordinate_gradient(&self, eta: &[f64], grad: &[f64], tie: bool) -> Vec<f64> {
        positive_gradient(eta, grad, self.alpha().len(), tie)
    }
}

/// `ln α_k` per category; with `tie`, `ln ᾱ` shared by all categories.
impl Learnable for DirichletMultinomial {
    fn start(&self, tie: bool) -> Vec<f64> {
        log_groups(&[self.alpha()], tie)
    }

    fn shared_start(&self) -> bool {
        all_shared(&[self.alpha()])
    }

    fn untie(&self, eta: &[f64]) -> Vec<f64> {
        repeat_each(eta, self.alpha().len())
    }

    fn at(&self, eta: &[f64], tie: bool) -> Result<Self> {
        self.with_hyperparameters(&positive_values(eta, self.alpha().len(), tie))
    }

    fn coordinate_gradient(&self, eta: &[f64], grad: &[f64], tie: bool) -> Vec<f64> {
        positive_gradient(eta, grad, self.alpha().len(), tie)
    }
}

/// `(ln κ₀, ln(ν₀ − d + 1), ln c)` with `Ψ₀ = c Ψ₀,base`; `μ₀` and the shape of `Ψ₀` stay
/// the base's. There is nothing per feature to tie.
impl Learnable for NormalInverseWishart {
    fn start(&self, _tie: bool) -> Vec<f64> {
        let d = self.mu0().len() as f64;
        vec![self.kappa0().ln(), (self.nu0() - d + 1.0).ln(), 0.0]
    }

    fn at(&self, eta: &[f64], _tie: bool) -> Result<Self> {
        let d = self.mu0().len() as f64;
        self.with_hyperparameters(&[eta[0].exp(), eta[1].exp() + d - 1.0, eta[2].exp()])
    }

    fn coordinate_gradient(&self, eta: &[f64], grad: &[f64], _tie: bool) -> Vec<f64> {
        // κ₀ = e^η₀, ν₀ = e^η₁ + d − 1; the model's third entry is already ∂/∂ln c.
        vec![grad[0] * eta[0].exp(), grad[1] * eta[1].exp(), grad[2]]
    }
}

impl NormalGamma {
    /// The unit of the `m₀` coordinates: each feature's prior standard deviation
    /// `√(b₀ⱼ / a₀)` at the base.
    fn m0_unit(&self, j: usize) -> f64 {
        (self.b0()[j] / self.a0()).sqrt()
    }
}

/// Per feature: `m₀ⱼ` as the shift from the base in units of the feature's prior standard
/// deviation at the base, `√(b₀ⱼ / a₀)`, then
/// `ln κ₀`, `ln a₀`, then `ln(b₀ⱼ / b₀ⱼ,base)`, so that no coordinate depends on the scale of
/// the data. With `tie`: `(ln κ₀, ln a₀, ln s)` with `m₀` at the base and every `b₀ⱼ`
/// scaled by one factor `s`.
impl Learnable for NormalGamma {
    fn start(&self, tie: bool) -> Vec<f64> {
        let shared = [self.kappa0().ln(), self.a0().ln()];
        let d = self.m0().len();
        if tie {
            vec![shared[0], shared[1], 0.0]
        } else {
            [vec![0.0; d], shared.to_vec(), vec![0.0; d]].concat()
        }
    }

    fn at(&self, eta: &[f64], tie: bool) -> Result<Self> {
        let d = self.m0().len();
        let mut values = self.m0().to_vec();
        if tie {
            values.extend([eta[0].exp(), eta[1].exp()]);
            values.extend(self.b0().iter().map(|b| b * eta[2].exp()));
        } else {
            for (j, m) in values.iter_mut().enumerate() {
                *m += eta[j] * self.m0_unit(j);
            }
            values.extend([eta[d].exp(), eta[d + 1].exp()]);
            values.extend(
                self.b0()
                    .iter()
                    .zip(&eta[d + 2..])
                    .map(|(b, e)| b * e.exp()),
            );
        }
        self.with_hyperparameters(&values)
    }

    fn coordinate_gradient(&self, eta: &[f64], grad: &[f64], tie: bool) -> Vec<f64> {
        // The model's order is (m₀, κ₀, a₀, b₀); b₀ = b₀,base · e^η, so ∂/∂η = b₀ ∂/∂b₀.
        let d = self.m0().len();
        let (g_m0, rest) = grad.split_at(d);
        let (g_shared, g_b0) = rest.split_at(2);
        let (kappa_eta, a_eta) = if tie {
            (eta[0], eta[1])
        } else {
            (eta[d], eta[d + 1])
        };
        let shared = [g_shared[0] * kappa_eta.exp(), g_shared[1] * a_eta.exp()];
        if tie {
            let g_scale: f64 = self
                .b0()
                .iter()
                .zip(g_b0)
                .map(|(b, g)| g * b * eta[2].exp())
                .sum();
            vec![shared[0], shared[1], g_scale]
        } else {
            let mut out: Vec<f64> = (0..d).map(|j| g_m0[j] * self.m0_unit(j)).collect();
            out.extend(shared);
            out.extend(
                self.b0()
                    .iter()
                    .zip(g_b0)
                    .zip(&eta[d + 2..])
                    .map(|((b, g), e)| g * b * e.exp()),
            );
            out
        }
    }
}

/// The mixing parameter's coordinate: `logit γ` ([`Mixing::Brt`], [`Mixing::Gamma`]) or
/// `ln a` ([`Mixing::Dp`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct MixingCoordinate {
    /// The rule, with the starting value.
    pub(super) start: Mixing,
}

impl MixingCoordinate {
    /// The coordinate of the starting value.
    pub(super) fn initial(&self) -> f64 {
        match self.start {
            Mixing::Brt { gamma } | Mixing::Gamma { gamma } => gamma.ln() - (-gamma).ln_1p(),
            Mixing::Dp { alpha } => alpha.ln(),
        }
    }

    /// The mixing rule at coordinate `theta`.
    pub(super) fn at(&self, theta: f64) -> Mixing {
        match self.start {
            Mixing::Brt { .. } => Mixing::Brt {
                gamma: expit(theta),
            },
            Mixing::Gamma { .. } => Mixing::Gamma {
                gamma: expit(theta),
            },
            Mixing::Dp { .. } => Mixing::Dp { alpha: theta.exp() },
        }
    }

    /// `∂/∂theta` from `∂/∂γ` (or `∂/∂a`) `g`.
    pub(super) fn gradient(&self, theta: f64, g: f64) -> f64 {
        match self.start {
            Mixing::Brt { .. } | Mixing::Gamma { .. } => {
                let gamma = expit(theta);
                g * gamma * (1.0 - gamma)
            }
            Mixing::Dp { .. } => g * theta.exp(),
        }
    }
}

/// `1 / (1 + e^{−θ})` without overflow for `θ` far below zero (a start as small as
/// `γ = 5e-324`).
fn expit(theta: f64) -> f64 {
    if theta >= 0.0 {
        1.0 / (1.0 + (-theta).exp())
    } else {
        let e = theta.exp();
        e / (1.0 + e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(f(η + h) − f(η − h)) / 2h` of `f(η) = Σ_k w_k θ_k(η)` against the chain rule, where
    /// `θ(η)` are the model's hyperparameters at `η` and `w` an arbitrary "gradient": checks
    /// each map's derivative independently of any likelihood.
    fn check_chain_rule<M: Learnable>(base: &M, eta: &[f64], tie: bool) {
        check_chain_rule_of(base, eta, tie, |m| m.hyperparameters());
    }

    /// [`check_chain_rule`] with the hyperparameters as `values` reads them off a model.
    fn check_chain_rule_of<M: Learnable>(
        base: &M,
        eta: &[f64],
        tie: bool,
        values: impl Fn(&M) -> Vec<f64>,
    ) {
        let n = base.hyperparameters().len();
        let w: Vec<f64> = (0..n).map(|k| 0.3 + 0.17 * k as f64).collect();
        let f = |e: &[f64]| -> f64 {
            let theta = values(&base.at(e, tie).unwrap());
            theta.iter().zip(&w).map(|(t, w)| t * w).sum()
        };
        let analytic = base.coordinate_gradient(eta, &w, tie);
        assert_eq!(analytic.len(), eta.len());
        for i in 0..eta.len() {
            let h = 1e-6;
            let (mut up, mut down) = (eta.to_vec(), eta.to_vec());
            up[i] += h;
            down[i] -= h;
            let fd = (f(&up) - f(&down)) / (2.0 * h);
            assert!(
                (analytic[i] - fd).abs() <= 1e-6 * fd.abs().max(1.0),
                "coordinate {i}: {} vs {fd}",
                analytic[i]
            );
        }
    }

    #[test]
    fn every_map_reproduces_its_start_and_has_the_chain_rules_derivative() {
        let bb = BetaBernoulli::new(&[0.5, 2.0, 1.5], &[1.0, 0.25, 3.0], 3).unwrap();
        let dm = DirichletMultinomial::new(&[0.5, 2.0, 1.5, 0.1], 4, false).unwrap();
        let niw =
            NormalInverseWishart::new(vec![0.1, -0.2], 0.5, 4.5, vec![1.2, 0.3, 0.3, 0.8]).unwrap();
        let ng = NormalGamma::new(&[0.1, -0.3], 0.4, 1.6, &[0.7, 1.2], 2).unwrap();
        fn same<M: Learnable>(m: &M, tie: bool) {
            let back = m.at(&m.start(tie), tie).unwrap().hyperparameters();
            for (a, b) in back.iter().zip(m.hyperparameters()) {
                assert!((a - b).abs() <= 1e-14 * b.abs(), "{a} vs {b}");
            }
        }
        same(&bb, false);
        same(&dm, false);
        same(&niw, false);
        same(&ng, false);
        same(&ng, true);
        let moved = [0.3, -0.4, 0.2, 0.1, 0.5, -0.7];
        check_chain_rule(&bb, &moved, false);
        check_chain_rule(&bb, &moved[..2], true);
        check_chain_rule(&dm, &moved[..4], false);
        check_chain_rule(&dm, &moved[..1], true);
        // The Normal–inverse-Wishart gradient's third entry is with respect to ln c of
        // Ψ₀ → cΨ₀, read here off Ψ₀ itself.
        let psi00 = niw.psi0()[0];
        check_chain_rule_of(&niw, &moved[..3], false, |m| {
            vec![m.kappa0(), m.nu0(), (m.psi0()[0] / psi00).ln()]
        });
        check_chain_rule(&ng, &moved, false);
        check_chain_rule(&ng, &moved[..3], true);
        // A tied start is the features' mean; untied it describes the same prior.
        let shared = BetaBernoulli::new(&[0.7], &[1.9], 3).unwrap();
        assert!(shared.shared_start() && !bb.shared_start());
        let tied = shared.start(true);
        let a = shared.at(&tied, true).unwrap().hyperparameters();
        let b = shared
            .at(&shared.untie(&tied), false)
            .unwrap()
            .hyperparameters();
        assert_eq!(a, b);
        assert!((bb.start(true)[0] - (4.0_f64 / 3.0).ln()).abs() < 1e-15);
    }

    #[test]
    fn the_mixing_coordinate_round_trips_and_differentiates() {
        for start in [
            Mixing::Brt { gamma: 0.3 },
            Mixing::Gamma { gamma: 0.9 },
            Mixing::Dp { alpha: 2.5 },
        ] {
            let c = MixingCoordinate { start };
            assert!(
                (c.at(c.initial()) == start) || {
                    let (Mixing::Brt { gamma: a }
                    | Mixing::Gamma { gamma: a }
                    | Mixing::Dp { alpha: a }) = c.at(c.initial());
                    let (Mixing::Brt { gamma: b }
                    | Mixing::Gamma { gamma: b }
                    | Mixing::Dp { alpha: b }) = start;
                    (a - b).abs() < 1e-15 * b
                }
            );
            let value = |t: f64| match c.at(t) {
                Mixing::Brt { gamma } | Mixing::Gamma { gamma } => gamma,
                Mixing::Dp { alpha } => alpha,
            };
            let t = c.initial() + 0.2;
            let fd = (value(t + 1e-6) - value(t - 1e-6)) / 2e-6;
            assert!((c.gradient(t, 1.0) - fd).abs() < 1e-8 * fd.abs().max(1.0));
        }
        assert!(expit(-744.0) > 0.0 && expit(40.0) == 1.0);
    }
}
