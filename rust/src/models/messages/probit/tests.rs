//! Probit sites and scalar precision messages against independent computations: the site
//! normaliser against one-dimensional Gauss–Legendre quadrature of the tilted and the site's
//! Gaussian integrals; the scalar tree's cavities, posterior marginals, branch statistics
//! and pseudo-observation likelihood against the covariance form of the Gaussian on the tree
//! (dense Cholesky factors).

use gauss_quad::GaussLegendre;
use nalgebra::{DMatrix, DVector};

use super::*;
use crate::test_util::lca_covariance;
use crate::tree::Topology;

/// `∫_lo^hi f` by a composite 20-point Gauss–Legendre rule on `pieces` equal pieces.
fn integrate(lo: f64, hi: f64, pieces: usize, f: impl Fn(f64) -> f64) -> f64 {
    let rule = GaussLegendre::new(20.try_into().unwrap());
    let step = (hi - lo) / pieces as f64;
    (0..pieces)
        .map(|k| {
            let a = lo + step * k as f64;
            rule.integrate(a, a + step, &f)
        })
        .sum()
}

fn normal_pdf(z: f64, m: f64, v: f64) -> f64 {
    (-(z - m).powi(2) / (2.0 * v)).exp() / (2.0 * std::f64::consts::PI * v).sqrt()
}

#[test]
fn the_site_normaliser_reproduces_the_tilted_normaliser_by_quadrature() {
    for (mean, var, y) in [
        (0.3f64, 1.2f64, 1.0f64),
        (0.3, 1.2, -1.0),
        (-2.5, 0.4, 1.0),
        (4.0, 2.0, -1.0),
        (0.0, 0.01, 1.0),
    ] {
        let s = var.sqrt();
        let site = site_update(mean, var, y);
        // Z_n = ∫ 1[y z > 0] N(z; mean, var) dz, on the side of y.
        let (lo, hi) = if y > 0.0 {
            (0.0, mean.max(0.0) + 40.0 * s)
        } else {
            (mean.min(0.0) - 40.0 * s, 0.0)
        };
        let z_n = integrate(lo, hi, 400, |z| normal_pdf(z, mean, var));
        // ∫ N(z; mean, var) N(z; μ̃, 1/τ̃) dz.
        let v_site = 1.0 / site.precision;
        let span = 40.0 * (s + v_site.sqrt());
        let overlap = integrate(mean - span, mean + span, 800, |z| {
            normal_pdf(z, mean, var) * normal_pdf(z, site.mean, v_site)
        });
        let got = site_log_normaliser((mean, var), y, site.mean, site.precision);
        let want = z_n.ln() - overlap.ln();
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
        assert!((site.ln_z - z_n.ln()).abs() < 1e-9);
    }
    // A flat site is the tilted normaliser itself.
    let flat = site_log_normaliser((0.5, 2.0), -1.0, 0.0, 0.0);
    assert!((flat - ln_cdf_and_ratio(-0.5 / 2f64.sqrt()).0).abs() < 1e-15);
}

/// `((0, 1) at 0.6, (2, 3, 4) at 0.4) at 0.25`, branch variances `σ²` times the lengths.
fn tree_and_lengths(sigma2: f64) -> (Tree, ScalarTree) {
    let tree = Tree::new(
        &Topology::new(5, vec![vec![0, 1], vec![2, 3, 4], vec![5, 6]]).unwrap(),
        Some(vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 0.4, 0.25]),
    )
    .unwrap();
    let h = tree.heights().unwrap().to_vec();
    let parents: Vec<Option<usize>> = tree.nodes().iter().map(|n| n.parent).collect();
    let scalar = ScalarTree::from_tree(&tree, |v| {
        sigma2 * (h[v] - parents[v].map_or(0.0, |p| h[p]))
    });
    (tree, scalar)
}

/// Mean and covariance of the nodes `target` given observations `x` at `obs` with noise
/// variances `noise`.
fn conditional(
    c: &DMatrix<f64>,
    obs: &[usize],
    noise: &[f64],
    x: &[f64],
    target: &[usize],
) -> (DVector<f64>, DMatrix<f64>) {
    let k = DMatrix::from_fn(obs.len(), obs.len(), |i, j| {
        c[(obs[i], obs[j])] + if i == j { noise[i] } else { 0.0 }
    });
    let chol = k.cholesky().unwrap();
    let cross = DMatrix::from_fn(target.len(), obs.len(), |i, j| c[(target[i], obs[j])]);
    let mean = &cross * chol.solve(&DVector::from_column_slice(x));
    let tt = DMatrix::from_fn(target.len(), target.len(), |i, j| c[(target[i], target[j])]);
    (mean.clone(), tt - &cross * chol.solve(&cross.transpose()))
}

/// Sites at the leaves: `(μ̃, τ̃)`, leaf 3 without one.
fn sites() -> Vec<(f64, f64)> {
    vec![(0.8, 2.0), (-0.4, 0.5), (1.5, 4.0), (0.0, 0.0), (0.3, 1.0)]
}

#[test]
fn cavities_posteriors_and_branch_statistics_are_the_conditional_gaussian() {
    let sigma2 = 1.3;
    let (tree, scalar) = tree_and_lengths(sigma2);
    let c = lca_covariance(&tree, sigma2);
    let m = tree.nodes().len();
    let s = sites();
    let mut up = vec![Precision::default(); m];
    for (i, &(mu, tau)) in s.iter().enumerate() {
        up[i] = Precision::site(mu, tau);
    }
    scalar.upward(&mut up);
    let observed: Vec<usize> = (0..5).filter(|&i| s[i].1 > 0.0).collect();
    let obs_x: Vec<f64> = observed.iter().map(|&i| s[i].0).collect();
    let obs_noise: Vec<f64> = observed.iter().map(|&i| 1.0 / s[i].1).collect();
    // Cavity of leaf n: z_n given every other site.
    let mut path = Vec::new();
    for n in 0..5 {
        let (mean, var) = scalar.cavity(&up, n, &mut path);
        let others: Vec<usize> = (0..observed.len()).filter(|&k| observed[k] != n).collect();
        let (mu, cov) = conditional(
            &c,
            &others.iter().map(|&k| observed[k]).collect::<Vec<_>>(),
            &others.iter().map(|&k| obs_noise[k]).collect::<Vec<_>>(),
            &others.iter().map(|&k| obs_x[k]).collect::<Vec<_>>(),
            &[n],
        );
        assert!((mean - mu[0]).abs() < 1e-12, "leaf {n}");
        assert!((var - cov[(0, 0)]).abs() < 1e-12, "leaf {n}");
    }
    // Posterior marginals and E(x_v − x_a)² given every site.
    let all: Vec<usize> = (0..m).collect();
    let (mu, cov) = conditional(&c, &observed, &obs_noise, &obs_x, &all);
    let mut post = Vec::new();
    let mut seen = 0;
    scalar.posterior(&up, &mut post, |v, [mean, var, sq]| {
        seen += 1;
        assert!((mean - mu[v]).abs() < 1e-12, "node {v}");
        assert!((var - cov[(v, v)]).abs() < 1e-12, "node {v}");
        let want = match tree.node(v).parent {
            Some(a) => (mu[v] - mu[a]).powi(2) + cov[(v, v)] + cov[(a, a)] - 2.0 * cov[(v, a)],
            None => mu[v].powi(2) + cov[(v, v)],
        };
        assert!((sq - want).abs() < 1e-12, "node {v}");
    });
    assert_eq!(seen, m);
}

#[test]
fn the_pseudo_likelihood_is_the_covariance_form() {
    let sigma2 = 0.7;
    let (tree, scalar) = tree_and_lengths(sigma2);
    let c = lca_covariance(&tree, sigma2);
    let s = sites();
    let mu: Vec<f64> = (0..8).map(|v| if v < 5 { s[v].0 } else { 0.0 }).collect();
    let tau: Vec<f64> = (0..8).map(|v| if v < 5 { s[v].1 } else { 0.0 }).collect();
    let observed = [0, 1, 2, 4];
    let k = DMatrix::from_fn(4, 4, |i, j| {
        c[(observed[i], observed[j])] + if i == j { 1.0 / tau[observed[i]] } else { 0.0 }
    });
    let x = DVector::from_iterator(4, observed.iter().map(|&i| mu[i]));
    let chol = k.cholesky().unwrap();
    let log_det = 2.0 * chol.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    let want = -0.5 * (4.0 * (2.0 * std::f64::consts::PI).ln() + log_det + x.dot(&chol.solve(&x)));
    let mut up: Vec<Precision> = (0..8).map(|v| Precision::site(mu[v], tau[v])).collect();
    scalar.upward(&mut up);
    let got = scalar.log_pseudo_likelihood(&up);
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    // Without any site: no term.
    assert_eq!(
        scalar.log_pseudo_likelihood(&[Precision::default(); 8]),
        0.0
    );
}

#[test]
fn precision_messages_cross_branches_and_multiply() {
    // N(2, 0.5) across a branch of variance 1.5 is N(2, 2).
    let m = Precision::site(2.0, 2.0).propagate(1.5);
    let (mean, var) = m.moments();
    assert!((mean - 2.0).abs() < 1e-15 && (var - 2.0).abs() < 1e-15);
    // N(0, 1) · N(3, 2): precision 1.5, mean 1.
    let p = Precision::site(0.0, 1.0).times(Precision::site(3.0, 0.5));
    let (mean, var) = p.moments();
    assert!((mean - 1.0).abs() < 1e-15 && (var - 1.0 / 1.5).abs() < 1e-15);
    // The uninformative message stays uninformative.
    assert_eq!(Precision::default().propagate(3.0), Precision::default());
}
