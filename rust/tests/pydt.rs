//! The Pitman–Yor diffusion tree through the public API: the prior and the likelihood equal
//! closed forms derived here independently of the crate's helpers, and a chain is a
//! function of its seed whose recorded log joint is the prior plus the likelihood of the
//! state it keeps.
//!
//! The prior of a small tree, from the generative process (Knowles & Ghahramani 2011, §3):
//! with `a(t) = c/(1 − t)`, `A(t) = −c ln(1 − t)` and `w(m) = Γ(m − β)/Γ(m + 1 + α)`, a
//! point on a segment that `m` earlier points traversed diverges at `t` with density
//! `a(t) w(m) e^{−w(m) A(t)} = c w(m) (1 − t)^{c w(m) − 1}`, survives it with probability
//! `(1 − t)^{c w(m)}`, and at a branch point with branches taken by `b_k` of `m` points
//! follows branch `k` with probability `(b_k − β)/(m + α)`.

use nalgebra::{DMatrix, DVector};
use ndarray::{ArrayView1, array};
use rosetree::math::ln_gamma;
use rosetree::pydt::mcmc::{self, Likelihood, McmcConfig, Start};
use rosetree::pydt::{self, PydtParams};
use rosetree::tree::{Topology, Tree};

const ALPHA: f64 = 0.4;
const BETA: f64 = 0.25;
const C: f64 = 1.7;

fn w(m: f64) -> f64 {
    (ln_gamma(m - BETA) - ln_gamma(m + 1.0 + ALPHA)).exp()
}

fn params() -> PydtParams {
    PydtParams::new(ALPHA, BETA, C).unwrap()
}

/// `ln N(y; 0, Σ)` by a Cholesky factor.
fn log_normal(y: ArrayView1<'_, f64>, sigma: &DMatrix<f64>) -> f64 {
    let n = y.len();
    let chol = sigma.clone().cholesky().expect("positive definite");
    let y = DVector::from_iterator(n, y.iter().copied());
    let z = chol.l().solve_lower_triangular(&y).unwrap();
    let log_det = 2.0 * chol.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    -0.5 * ((n as f64) * (2.0 * std::f64::consts::PI).ln() + log_det + z.norm_squared())
}

/// ((0, 1), (2, 3)): the pairs diverge at `tl` and `ts`, the root at `tr`; leaves at 1.
fn two_pairs(tl: f64, ts: f64, tr: f64) -> Tree {
    let topology = Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap();
    Tree::new(&topology, Some(vec![1.0, 1.0, 1.0, 1.0, tl, ts, tr])).unwrap()
}

#[test]
fn the_prior_of_three_points_is_the_generative_processs_density() {
    // ((0, 1), 2) with the root at ta and (0, 1) at tb > ta. Point 1 leaves point 0's path at
    // tb (m = 1); point 2 leaves the segment [0, tb), which two points took, at ta (m = 2).
    let (ta, tb) = (0.3, 0.65);
    let topology = Topology::new(3, vec![vec![0, 1], vec![2, 3]]).unwrap();
    let tree = Tree::new(&topology, Some(vec![1.0, 1.0, 1.0, tb, ta])).unwrap();
    let want = (C
        * w(1.0)
        * (1.0 - tb).powf(C * w(1.0) - 1.0)
        * C
        * w(2.0)
        * (1.0 - ta).powf(C * w(2.0) - 1.0))
    .ln();
    let got = pydt::log_prior(&tree, &params()).unwrap();
    assert!((got - want).abs() < 1e-12, "{got} against {want}");

    // (0, (1, 2)) by its own history: point 1 leaves at ta; point 2 survives [0, ta) (m = 2),
    // follows point 1's branch with probability (1 − β)/(2 + α), then leaves it at tb
    // (m = 1, survival counted from ta). Exchangeability: another labelled tree, its own
    // density, which the prior must give as well.
    let topology = Topology::new(3, vec![vec![1, 2], vec![0, 3]]).unwrap();
    let tree = Tree::new(&topology, Some(vec![1.0, 1.0, 1.0, tb, ta])).unwrap();
    let want = (C * w(1.0) * (1.0 - ta).powf(C * w(1.0) - 1.0))
        * (1.0 - ta).powf(C * w(2.0))
        * (1.0 - BETA)
        / (2.0 + ALPHA)
        * C
        * w(1.0)
        * (1.0 - tb).powf(C * w(1.0) - 1.0)
        * (1.0 - ta).powf(-C * w(1.0));
    let got = pydt::log_prior(&tree, &params()).unwrap();
    assert!(
        (got - want.ln()).abs() < 1e-12,
        "{got} against {}",
        want.ln()
    );
}

#[test]
fn the_prior_of_two_pairs_is_the_generative_processs_density() {
    // Point 1 leaves point 0 at tl (m = 1); point 2 leaves [0, tl) at tr (m = 2); point 3
    // survives [0, tr) (m = 3), follows point 2's branch with probability (1 − β)/(3 + α)
    // and leaves it at ts (m = 1, survival from tr).
    let (tl, ts, tr) = (0.6, 0.8, 0.3);
    let f = |m: f64, t: f64| C * w(m) * (1.0 - t).powf(C * w(m) - 1.0);
    let want = f(1.0, tl) * f(2.0, tr) * (1.0 - tr).powf(C * w(3.0)) * (1.0 - BETA) / (3.0 + ALPHA)
        * f(1.0, ts)
        * (1.0 - tr).powf(-C * w(1.0));
    let got = pydt::log_prior(&two_pairs(tl, ts, tr), &params()).unwrap();
    assert!(
        (got - want.ln()).abs() < 1e-12,
        "{got} against {}",
        want.ln()
    );
}

#[test]
fn the_likelihood_is_the_normal_density_with_the_trees_covariance() {
    // Brownian motion with variance σ² per unit time from the origin at t = 0: leaves i ≠ j
    // covary by σ² times the divergence time of their lowest common ancestor, and each has
    // variance σ² (it is observed at t = 1).
    let (tl, ts, tr, sigma2) = (0.6, 0.8, 0.3, 1.9);
    let x = array![
        [0.3, -1.0, 0.2],
        [0.5, -0.6, 0.0],
        [-1.2, 0.4, 0.7],
        [-0.9, 1.1, -0.3]
    ];
    let lca = [
        [1.0, tl, tr, tr],
        [tl, 1.0, tr, tr],
        [tr, tr, 1.0, ts],
        [tr, tr, ts, 1.0],
    ];
    let sigma = DMatrix::from_fn(4, 4, |i, j| sigma2 * lca[i][j]);
    let want: f64 = x.columns().into_iter().map(|c| log_normal(c, &sigma)).sum();
    let got = pydt::log_likelihood(x.view(), &two_pairs(tl, ts, tr), sigma2).unwrap();
    assert!((got - want).abs() < 1e-10, "{got} against {want}");
    let err = pydt::log_likelihood(x.view(), &two_pairs(tl, ts, tr), 0.0).unwrap_err();
    assert!(err.to_string().contains("sigma2"), "{err}");
}

#[test]
fn a_chain_is_a_function_of_its_seed() {
    let x = array![
        [0.1, 0.0],
        [0.2, -0.1],
        [2.0, 2.1],
        [2.2, 1.9],
        [-1.5, 0.4],
        [-1.4, 0.6],
    ];
    let config = McmcConfig {
        n_iter: 30,
        burn_in: 10,
        likelihood: Likelihood::Gaussian,
        ..McmcConfig::default()
    };
    let chain = |seed| {
        let start = Start {
            tree: None,
            params: params(),
            sigma2: 1.0,
        };
        mcmc::run(x.view(), start, &config, seed, &|| false, &mut |_, _| {}).unwrap()
    };
    let (a, b, other) = (chain(7), chain(7), chain(8));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.last.tree, b.last.tree);
    assert_eq!(a.last.log_joint.to_bits(), b.last.log_joint.to_bits());
    assert_eq!((a.proposals, a.accepted), (b.proposals, b.accepted));
    assert_eq!(a.samples.len(), 20);
    assert_ne!(a.trace, other.trace);
    // What the chain records is the prior plus the likelihood of the state it keeps.
    for s in a.samples.iter().chain([&a.last]) {
        let want = pydt::log_prior(&s.tree, &s.params).unwrap()
            + pydt::log_likelihood(x.view(), &s.tree, s.sigma2).unwrap();
        assert!(
            (s.log_joint - want).abs() < 1e-8 * want.abs().max(1.0),
            "{} against {want}",
            s.log_joint
        );
    }
}
