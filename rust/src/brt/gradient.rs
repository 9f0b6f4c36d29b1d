//! The gradient of `ln p(D | T)` with respect to the hyperparameters (BRT eqs 1.27–1.28).
//!
//! Unrolling the recursions of eqs 1.27 and 1.28 gives one sum over the nodes. With
//! `reach_S = Π_{A ∈ ancestors(S)} (1 − r_A)`, the probability that the mixture descends to
//! `S`,
//! - `∂ ln p(D|T)/∂η = Σ_S reach_S r_S ∂ ln f(leaves(S))/∂η`, and
//! - `∂ ln p(D|T)/∂θ = Σ_{internal S} reach_S [r_S ∂ ln π_S/∂θ + (1 − r_S) ∂ ln(1 − π_S)/∂θ]`
//!
//! for the mixing parameter `θ` (`γ`, or the DP concentration `a`, whose `π_S` depends on the
//! whole subtree through `d_S`).

use super::evaluate::{evaluate, node_stats};
use super::mixing::Mixing;
use crate::error::{Result, RoseTreeError};
use crate::models::Differentiable;
use crate::tree::Topology;

/// `ln p(D | T)` and its gradient.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceGradient {
    /// `ln p(D | T)`.
    pub log_evidence: f64,
    /// `∂ ln p(D | T) / ∂η`, in the order of the model's
    /// [`hyperparameters`](Differentiable::hyperparameters).
    pub model: Vec<f64>,
    /// `∂ ln p(D | T) / ∂γ` for [`Mixing::Brt`] and [`Mixing::Gamma`], `∂ ln p(D | T) / ∂a`
    /// for [`Mixing::Dp`].
    pub mixing: f64,
}

/// `ln p(D | T)` of the tree `topology` over data with leaf statistics `leaves`, and its
/// gradient with respect to the model's hyperparameters and the mixing parameter.
///
/// # Errors
/// As [`evaluate`]; [`RoseTreeError::Numerical`](crate::RoseTreeError::Numerical) from the
/// model's gradient.
///
/// # Examples
/// ```
/// use rosetree::brt::{Mixing, evidence_gradient};
/// use rosetree::models::{BetaBernoulli, ClusterModel, Differentiable};
/// use rosetree::tree::Topology;
///
/// let x = ndarray::array![[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 2)?;
/// let leaves = model.leaf_stats_all(x.view())?;
/// let tree = Topology::new(3, vec![vec![0, 1], vec![2, 3]])?;
/// let g = evidence_gradient(&model, &Mixing::Brt { gamma: 0.5 }, &tree, &leaves)?;
/// assert_eq!(g.model.len(), model.n_hyperparameters());
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn evidence_gradient<M: Differentiable>(
    model: &M,
    mixing: &Mixing,
    topology: &Topology,
    leaves: &[M::Stats],
) -> Result<EvidenceGradient> {
    let tree = evaluate(model, mixing, topology, leaves)?;
    let stats = node_stats(model, topology, leaves);
    let (nodes, values) = (tree.nodes(), tree.values());
    let n = topology.n_leaves();
    let dp_dlog_d = dp_log_d_derivatives(mixing, &tree);

    let mut grad_model = vec![0.0; model.n_hyperparameters()];
    let mut grad_mixing = 0.0;
    let mut log_reach = vec![0.0_f64; nodes.len()];
    // Parents have larger ids than their children: descend from the root.
    for id in (n..nodes.len()).rev() {
        let (node, v) = (&nodes[id], &values[id]);
        let sum_log_p: f64 = node.children.iter().map(|&c| values[c].log_p).sum();
        let log_r = v.log_r();
        // `1 − r` from its own terms, exact where `r` is close to one.
        let log_1m_r = (v.log_1m_pi + sum_log_p - v.log_p).min(0.0);
        for &c in &node.children {
            log_reach[c] = log_reach[id] + log_1m_r;
        }
        let reach = log_reach[id].exp();
        if reach == 0.0 {
            continue;
        }
        let weight = (log_reach[id] + log_r).exp();
        if weight > 0.0 {
            model.add_gradient(&stats[id], weight, &mut grad_model)?;
        }
        let (d_log_pi, d_log_1m_pi) = match *mixing {
            Mixing::Brt { gamma } => {
                let k = node.children.len() as f64;
                let d_log_pi = (k - 1.0) * ((k - 2.0) * (-gamma).ln_1p() - v.log_pi).exp();
                (d_log_pi, -(k - 1.0) / (1.0 - gamma))
            }
            Mixing::Gamma { gamma } => (1.0 / gamma, -1.0 / (1.0 - gamma)),
            Mixing::Dp { alpha } => {
                let own = dp_dlog_d[id];
                let below: f64 = node.children.iter().map(|&c| dp_dlog_d[c]).sum();
                (1.0 / alpha - own, below - own)
            }
        };
        grad_mixing += reach * (log_r.exp() * d_log_pi + log_1m_r.exp() * d_log_1m_pi);
    }
    for (id, s) in stats.iter().enumerate().take(n) {
        // A leaf has π = 1: r = 1 and the mixture ends there.
        let weight = log_reach[id].exp();
        if weight > 0.0 {
            model.add_gradient(s, weight, &mut grad_model)?;
        }
    }
    if grad_mixing.is_nan() || grad_model.iter().any(|g| g.is_nan()) {
        return Err(RoseTreeError::Numerical(
            "the gradient of ln p(D | T) is NaN (extreme hyperparameters or data beyond \
             double precision)"
                .into(),
        ));
    }
    Ok(EvidenceGradient {
        log_evidence: tree.log_evidence(),
        model: grad_model,
        mixing: grad_mixing,
    })
}

/// `u_S = ∂ ln d_S / ∂a` of every node under the DP rule, bottom-up: `u_leaf = 1/a`,
/// `u_S = π_S / a + (1 − π_S) Σ_children u_c` (from `d_S = a Γ(n_S) + Π d_c`). Empty for
/// the other rules.
fn dp_log_d_derivatives(mixing: &Mixing, tree: &super::RoseTree) -> Vec<f64> {
    let Mixing::Dp { alpha } = *mixing else {
        return Vec::new();
    };
    let nodes = tree.nodes();
    let mut u = vec![1.0 / alpha; nodes.len()];
    for id in tree.n_leaves()..nodes.len() {
        let node = &nodes[id];
        let below: f64 = node.children.iter().map(|&c| u[c]).sum();
        let v = tree.value(id);
        u[id] = v.log_pi.exp() / alpha + v.log_1m_pi.exp() * below;
    }
    u
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;
    use crate::models::{BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart};
    use crate::test_util::random_topology;

    fn mixing_with(mixing: &Mixing, theta: f64) -> Mixing {
        match mixing {
            Mixing::Brt { .. } => Mixing::Brt { gamma: theta },
            Mixing::Gamma { .. } => Mixing::Gamma { gamma: theta },
            Mixing::Dp { .. } => Mixing::Dp { alpha: theta },
        }
    }

    fn theta(mixing: &Mixing) -> f64 {
        match *mixing {
            Mixing::Brt { gamma } | Mixing::Gamma { gamma } => gamma,
            Mixing::Dp { alpha } => alpha,
        }
    }

    /// The analytic gradient against central finite differences of `ln p(D | T)`, computed
    /// by evaluating the tree under perturbed hyperparameters.
    fn check_against_finite_differences<M: Differentiable>(model: &M, x: &Array2<f64>) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        for mixing in [
            Mixing::Brt { gamma: 0.3 },
            Mixing::Gamma { gamma: 0.6 },
            Mixing::Dp { alpha: 1.7 },
        ] {
            let topology = random_topology(x.nrows(), 3, &mut rng);
            let g = evidence_gradient(model, &mixing, &topology, &leaves).unwrap();
            let value = |m: &M, mix: &Mixing| {
                let leaves = m.leaf_stats_all(x.view()).unwrap();
                evaluate(m, mix, &topology, &leaves).unwrap().log_evidence()
            };
            assert!((g.log_evidence - value(model, &mixing)).abs() < 1e-12);
            let eta = model.hyperparameters();
            for i in 0..eta.len() {
                let h = 1e-6 * eta[i].abs().max(1.0);
                let (mut up, mut down) = (eta.clone(), eta.clone());
                up[i] += h;
                down[i] -= h;
                let fd = (value(&model.with_hyperparameters(&up).unwrap(), &mixing)
                    - value(&model.with_hyperparameters(&down).unwrap(), &mixing))
                    / (2.0 * h);
                assert!(
                    (g.model[i] - fd).abs() < 1e-5 * fd.abs().max(1.0),
                    "{mixing:?} η[{i}]: analytic {} vs finite difference {fd}",
                    g.model[i]
                );
            }
            let t = theta(&mixing);
            let h = 1e-6 * t;
            let fd = (value(model, &mixing_with(&mixing, t + h))
                - value(model, &mixing_with(&mixing, t - h)))
                / (2.0 * h);
            assert!(
                (g.mixing - fd).abs() < 1e-5 * fd.abs().max(1.0),
                "{mixing:?}: analytic {} vs finite difference {fd}",
                g.mixing
            );
        }
    }

    fn random_data(
        n: usize,
        d: usize,
        seed: u64,
        f: impl Fn(&mut Xoshiro256PlusPlus) -> f64,
    ) -> Array2<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        Array2::from_shape_simple_fn((n, d), || f(&mut rng))
    }

    #[test]
    fn beta_bernoulli_gradient_matches_finite_differences() {
        let mut x = random_data(9, 4, 1, |r| f64::from(u8::from(r.random_bool(0.4))));
        x[(2, 1)] = f64::NAN;
        x[(5, 3)] = f64::NAN;
        let model = BetaBernoulli::new(&[0.7, 1.3, 2.0, 0.4], &[1.1, 0.5, 3.0, 0.9], 4).unwrap();
        check_against_finite_differences(&model, &x);
    }

    #[test]
    fn dirichlet_multinomial_gradient_matches_finite_differences() {
        let x = random_data(8, 3, 2, |r| f64::from(r.random_range(0..5_u8)));
        let model = DirichletMultinomial::new(&[0.5, 1.5, 2.5], 3, false).unwrap();
        check_against_finite_differences(&model, &x);
    }

    #[test]
    fn normal_inverse_wishart_gradient_matches_finite_differences() {
        let x = random_data(10, 2, 3, |r| r.random_range(-2.0..2.0));
        let model =
            NormalInverseWishart::new(vec![0.1, -0.2], 0.5, 4.5, vec![1.2, 0.3, 0.3, 0.8]).unwrap();
        check_against_finite_differences(&model, &x);
    }

    #[test]
    fn normal_gamma_gradient_matches_finite_differences() {
        let mut x = random_data(9, 3, 4, |r| r.random_range(-2.0..2.0));
        x[(1, 2)] = f64::NAN;
        x[(6, 0)] = f64::NAN;
        let model = NormalGamma::new(&[0.1, -0.3, 0.2], 0.4, 1.6, &[0.7, 1.2, 0.9], 3).unwrap();
        check_against_finite_differences(&model, &x);
    }
}
