//! Brownian message passing against the covariance form of the same Gaussian: the leaves of
//! a timed tree are jointly normal with `Cov(x_i, x_j) = (s0 + shared path length) ⊗ Λ`,
//! evaluated here with a dense Cholesky factor of the `nD × nD` matrix, independently of
//! the whitening and of the messages.

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, array};
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::models::messages::tests::{
    caterpillar, cherry_at_zero, golden_max, invalid_parameter, normal, random_tree, rng,
    shared_lengths,
};
use crate::models::messages::{tree_log_likelihood, tree_log_likelihood_from_leaves};
use crate::test_util::durations_around;

/// `ln N(x; 0, cov)` by a dense Cholesky factor.
pub(crate) fn mvn_log_density(x: &DVector<f64>, cov: &DMatrix<f64>) -> f64 {
    let chol = cov.clone().cholesky().expect("covariance must be SPD");
    let l = chol.l();
    let z = l.solve_lower_triangular(x).unwrap();
    let log_det: f64 = 2.0 * l.diagonal().iter().map(|v| v.ln()).sum::<f64>();
    -0.5 * (x.len() as f64 * LN_2PI + log_det + z.norm_squared())
}

/// `C ⊗ Λ`, rows of `x` stacked: entry `((i, a), (j, b)) = C_ij Λ_ab`.
fn kron(c: &[Vec<f64>], lambda: &DMatrix<f64>) -> DMatrix<f64> {
    let (n, d) = (c.len(), lambda.nrows());
    DMatrix::from_fn(n * d, n * d, |r, s| {
        c[r / d][s / d] * lambda[(r % d, s % d)]
    })
}

fn stacked(x: &Array2<f64>) -> DVector<f64> {
    DVector::from_iterator(x.len(), x.iter().copied())
}

/// `ln ∫ N(x; 1 ⊗ y, C0 ⊗ Λ) dy` in closed form (generalised least squares): with
/// `A = 1_n ⊗ I_D`, `Σ = C0 ⊗ Λ`, `P = AᵀΣ⁻¹A`, `b = AᵀΣ⁻¹x`, the integral is
/// `(2π)^{−(n−1)D/2} |Σ|^{−1/2} |P|^{−1/2} exp(−(xᵀΣ⁻¹x − bᵀP⁻¹b)/2)`.
pub(crate) fn flat_root_log_density(
    x: &Array2<f64>,
    c0: &[Vec<f64>],
    lambda: &DMatrix<f64>,
) -> f64 {
    let (n, d) = x.dim();
    let sigma = kron(c0, lambda);
    let chol = sigma.cholesky().unwrap();
    let a = DMatrix::from_fn(n * d, d, |r, s| if r % d == s { 1.0 } else { 0.0 });
    let xv = stacked(x);
    let si_x = chol.solve(&xv);
    let si_a = chol.solve(&a);
    let p = a.transpose() * &si_a;
    let b = a.transpose() * &si_x;
    let p_chol = p.cholesky().unwrap();
    let log_det_sigma = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
    let log_det_p = 2.0 * p_chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
    let quad = xv.dot(&si_x) - b.dot(&p_chol.solve(&b));
    -0.5 * (((n - 1) * d) as f64 * LN_2PI + log_det_sigma + log_det_p + quad)
}

/// The three forms of `Λ` in `d` dimensions, as models and as dense matrices.
fn lambdas(d: usize, rng: &mut impl Rng) -> Vec<(BrownianDiffusion, DMatrix<f64>)> {
    let iso = 0.3 + rng.random::<f64>();
    let diag: Vec<f64> = (0..d).map(|_| 0.2 + 2.0 * rng.random::<f64>()).collect();
    let a = DMatrix::from_fn(d, d, |_, _| normal(rng));
    let full = &a * a.transpose() + DMatrix::identity(d, d) * 0.3;
    let full_nd = Array2::from_shape_fn((d, d), |(i, j)| full[(i, j)]);
    vec![
        (
            BrownianDiffusion::isotropic(iso, d).unwrap(),
            DMatrix::identity(d, d) * iso,
        ),
        (
            BrownianDiffusion::diagonal(&diag, d).unwrap(),
            DMatrix::from_diagonal(&DVector::from_vec(diag)),
        ),
        (BrownianDiffusion::full(full_nd.view()).unwrap(), full),
    ]
}

fn random_data(n: usize, d: usize, rng: &mut impl Rng) -> Array2<f64> {
    Array2::from_shape_simple_fn((n, d), || 1.5 * normal(rng))
}

#[test]
fn proper_root_matches_the_covariance_form() {
    let mut r = rng(11);
    let mut checked = 0;
    for d in 1..=3 {
        for n in 2..=6 {
            for _ in 0..3 {
                let tree = random_tree(n, 0.3, &mut r);
                let x = random_data(n, d, &mut r);
                let s0 = 0.1 + 3.0 * r.random::<f64>();
                let root_branch = if r.random::<f64>() < 0.5 { 0.0 } else { 0.7 };
                let c: Vec<Vec<f64>> = shared_lengths(&tree)
                    .into_iter()
                    .map(|row| row.into_iter().map(|v| v + s0 + root_branch).collect())
                    .collect();
                for (model, lambda) in lambdas(d, &mut r) {
                    let model = model.with_root(Root::Gaussian { s0 }).unwrap();
                    let got = tree_log_likelihood(&model, x.view(), &tree, root_branch).unwrap();
                    let want = mvn_log_density(&stacked(&x), &kron(&c, &lambda));
                    assert!(
                        (got - want).abs() < 1e-10 * (1.0 + want.abs()),
                        "d={d} n={n}: {got} vs {want}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 135);
}

#[test]
fn flat_root_matches_the_integral_over_the_root() {
    let mut r = rng(12);
    for d in 1..=3 {
        for n in 2..=6 {
            for _ in 0..3 {
                let tree = random_tree(n, 0.3, &mut r);
                let x = random_data(n, d, &mut r);
                let c0 = shared_lengths(&tree);
                for (model, lambda) in lambdas(d, &mut r) {
                    assert_eq!(model.root(), Root::Flat);
                    let got = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
                    // The flat root does not care how long the root branch is.
                    let longer = tree_log_likelihood(&model, x.view(), &tree, 3.0).unwrap();
                    let want = flat_root_log_density(&x, &c0, &lambda);
                    assert!(
                        (got - want).abs() < 1e-10 * (1.0 + want.abs()),
                        "d={d} n={n}: {got} vs {want}"
                    );
                    assert_eq!(got, longer);
                }
            }
        }
    }
}

#[test]
fn flat_root_matches_a_trapezoid_quadrature_in_one_dimension() {
    // ∫ N(x; y·1, C0 λ) dy over the root location y, by the trapezoid rule on a fine grid
    // (spectrally accurate for this smooth, rapidly decaying integrand).
    let mut r = rng(13);
    for n in [2, 4, 5] {
        let tree = random_tree(n, 0.3, &mut r);
        let x = random_data(n, 1, &mut r);
        let lambda = 0.8;
        let model = BrownianDiffusion::isotropic(lambda, 1).unwrap();
        let got = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
        let c0 = shared_lengths(&tree);
        let cov = DMatrix::from_fn(n, n, |i, j| lambda * c0[i][j]);
        let spread = (lambda * c0[0][0]).sqrt();
        let lo = x.iter().copied().fold(f64::INFINITY, f64::min) - 40.0 * spread;
        let hi = x.iter().copied().fold(f64::NEG_INFINITY, f64::max) + 40.0 * spread;
        let m = 100_000;
        let h = (hi - lo) / m as f64;
        let logs: Vec<f64> = (0..=m)
            .map(|k| {
                let y = lo + h * k as f64;
                let diff = DVector::from_iterator(n, x.iter().map(|v| v - y));
                let w: f64 = if k == 0 || k == m { 0.5 } else { 1.0 };
                w.ln() + mvn_log_density(&diff, &cov)
            })
            .collect();
        let want = crate::math::log_sum_exp(&logs) + h.ln();
        assert!((got - want).abs() < 1e-9, "n={n}: {got} vs {want}");
    }
}

#[test]
fn diffusion_tree_form_with_the_root_at_the_origin() {
    // Knowles & Ghahramani eq 10: each dimension of the leaves is N(0, σ²C) with C_ij the
    // divergence time of the lowest common ancestor and C_ii = 1; the root sits at the
    // origin at time 0, the leaves at time 1.
    let mut r = rng(14);
    for n in 2..=7 {
        for d in 1..=2 {
            let coalescent = random_tree(n, 0.3, &mut r);
            let h = coalescent.heights().unwrap();
            let depth = -h[coalescent.root()] * 1.25;
            let times: Vec<f64> = h.iter().map(|t| 1.0 + t / depth).collect();
            let t_root = times[coalescent.root()];
            let tree = coalescent.clone().with_heights(times.clone()).unwrap();
            let sigma2 = 0.5 + r.random::<f64>();
            let model = BrownianDiffusion::isotropic(sigma2, d)
                .unwrap()
                .with_root(Root::Gaussian { s0: 0.0 })
                .unwrap();
            let x = random_data(n, d, &mut r);
            let got = tree_log_likelihood(&model, x.view(), &tree, t_root).unwrap();
            // C_ij = t(lca(i, j)), found here from the leaf sets of the internal nodes.
            let mut c = vec![vec![1.0; n]; n];
            for v in (n..tree.nodes().len()).rev() {
                let below = tree.leaves_of(v);
                for &i in &below {
                    for &j in &below {
                        if i != j {
                            c[i][j] = times[v];
                        }
                    }
                }
            }
            let want: f64 = (0..d)
                .map(|a| {
                    let col = DVector::from_iterator(n, x.column(a).iter().copied());
                    let cov = DMatrix::from_fn(n, n, |i, j| sigma2 * c[i][j]);
                    mvn_log_density(&col, &cov)
                })
                .sum();
            assert!(
                (got - want).abs() < 1e-10 * (1.0 + want.abs()),
                "{got} vs {want}"
            );
        }
    }
}

#[test]
fn a_deep_chain_stays_finite_and_exact() {
    let n = 1200;
    let tree = caterpillar(n, 0.01);
    let mut r = rng(15);
    let x = random_data(n, 1, &mut r);
    let s0 = 2.0;
    let model = BrownianDiffusion::isotropic(1.3, 1)
        .unwrap()
        .with_root(Root::Gaussian { s0 })
        .unwrap();
    let got = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
    // Leaves i ≠ j meet at the node where leaf max(i, j) joins, at time −max(i, j)·step
    // (leaves 0 and 1 at the first node); the root is at −(n − 1)·step.
    let shared = |i: usize, j: usize| {
        let joined = if i == j { 0 } else { i.max(j).max(1) };
        (n - 1 - joined) as f64 * 0.01
    };
    let cov = DMatrix::from_fn(n, n, |i, j| 1.3 * (s0 + shared(i, j)));
    let want = mvn_log_density(&stacked(&x), &cov);
    assert!(got.is_finite());
    assert!((got - want).abs() < 1e-9 * want.abs(), "{got} vs {want}");
    // Three dimensions with a full Λ and a flat root: finite.
    let x3 = random_data(n, 3, &mut r);
    let model3 =
        BrownianDiffusion::full(array![[1.0, 0.3, 0.0], [0.3, 2.0, 0.1], [0.0, 0.1, 0.5]].view())
            .unwrap();
    assert!(
        tree_log_likelihood(&model3, x3.view(), &tree, 0.0)
            .unwrap()
            .is_finite()
    );
}

/// The value of `−rate·δ + ln N(μ_l − μ_r; 0, (w + 2δ)Λ)` in data coordinates.
fn objective(diff: &DVector<f64>, lambda: &DMatrix<f64>, w: f64, rate: f64, delta: f64) -> f64 {
    -rate * delta + mvn_log_density(diff, &(lambda * (w + 2.0 * delta)))
}

#[test]
fn optimal_duration_maximises_the_rate_one_objective() {
    let mut r = rng(16);
    let mut interior = 0;
    for d in 1..=3 {
        for (model, lambda) in lambdas(d, &mut r) {
            for _ in 0..6 {
                let x = random_data(2, d, &mut r);
                let (l, _) = model.leaf_message(x.row(0), 0).unwrap();
                let (rr, _) = model.leaf_message(x.row(1), 1).unwrap();
                // Messages with variance: the leaves seen through branches of length a, b.
                let (a, b) = (0.3 * r.random::<f64>(), 0.3 * r.random::<f64>());
                let base = 0.2 * r.random::<f64>();
                let rate = [1.0, 0.3, 4.0][r.random_range(0..3)];
                let pair = model.pair(&model.propagate(&l, a), &model.propagate(&rr, b));
                let got = model.optimal_duration(&pair, base, rate).unwrap();
                let diff = DVector::from_iterator(d, (0..d).map(|k| x[[0, k]] - x[[1, k]]));
                let w = a + b + base;
                let f = |delta: f64| objective(&diff, &lambda, w, rate, delta);
                let want = golden_max(f, 0.0, 100.0);
                assert!((got - want).abs() < 1e-6 * (1.0 + want), "{got} vs {want}");
                if got > 0.0 {
                    interior += 1;
                    // Stationary: the objective falls on both sides.
                    let step = 1e-4 * (1.0 + got);
                    assert!(f(got) >= f(got + step) && f(got) >= f(got - step));
                } else {
                    assert!(f(0.0) >= f(1e-6));
                }
            }
        }
    }
    assert!(interior >= 20, "only {interior} interior optima");
}

/// `duration_exceeds(l, r, base, rate, h)` holds only where `optimal_duration` exceeds `h`
/// (and the golden-section maximiser of the objective lies no lower than `h` less its
/// tolerance), for isotropic, diagonal and full `Λ`, rows at every scale, `h` at, just
/// below and far below the optimum; and it does hold for most `h` a relative `10⁻⁷` below
/// an optimum not dwarfed by the pair's variance.
#[test]
fn duration_exceeds_only_below_the_optimal_duration() {
    let mut r = rng(23);
    let (mut yes, mut near, mut near_yes) = (0, 0, 0);
    for d in [1, 2, 3, 7, 20, 33] {
        for (model, lambda) in lambdas(d, &mut r) {
            for _ in 0..40 {
                let scale = 10f64.powf(r.random_range(-3.0..3.0));
                let x = random_data(2, d, &mut r).mapv(|v| v * scale);
                let (l, _) = model.leaf_message(x.row(0), 0).unwrap();
                let (rr, _) = model.leaf_message(x.row(1), 1).unwrap();
                let grow = |r: &mut Xoshiro256PlusPlus| {
                    if r.random_bool(0.5) {
                        0.0
                    } else {
                        scale * scale * r.random::<f64>()
                    }
                };
                let (a, b) = (grow(&mut r), grow(&mut r));
                let (l, rr) = (model.propagate(&l, a), model.propagate(&rr, b));
                let base = if r.random_bool(0.5) {
                    0.0
                } else {
                    0.2 * scale * scale * r.random::<f64>()
                };
                let rate = [1.0, 0.3, 4.0][r.random_range(0..3)];
                let delta = model
                    .optimal_duration(&model.pair(&l, &rr), base, rate)
                    .unwrap();
                let reference = (d <= 3).then(|| {
                    let diff = DVector::from_iterator(d, (0..d).map(|k| x[[0, k]] - x[[1, k]]));
                    let w = a + b + base;
                    let f = |t: f64| objective(&diff, &lambda, w, rate, t);
                    golden_max(f, 0.0, 10.0 * (1.0 + delta))
                });
                for h in durations_around(delta, &mut r) {
                    if !model.duration_exceeds(&l, &rr, base, rate, h) {
                        continue;
                    }
                    assert!(delta > h, "d={d}: {delta} vs {h}");
                    if let Some(want) = reference {
                        assert!(want > h - 1e-6 * (1.0 + want), "d={d}: {want} vs {h}");
                    }
                    yes += 1;
                }
                if delta > 0.0 && a + b + base <= 10.0 * delta {
                    near += 1;
                    let h = delta * (1.0 - 1e-7);
                    near_yes += usize::from(model.duration_exceeds(&l, &rr, base, rate, h));
                }
            }
        }
    }
    assert!(
        yes > 500 && near_yes * 10 >= near * 9,
        "{yes} {near_yes}/{near}"
    );
}

#[test]
fn optimal_duration_is_clamped_at_zero() {
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let (a, _) = model.leaf_message(array![0.0, 0.0].view(), 0).unwrap();
    let (b, _) = model.leaf_message(array![1.0, 0.0].view(), 1).unwrap();
    let pair = model.pair(&a, &b);
    // Unclamped optimum: S/(√(D² + 4S) + D) − base/2 = 1/(√8 + 2) − base/2.
    let free = 1.0 / (8f64.sqrt() + 2.0);
    assert!((model.optimal_duration(&pair, 0.0, 1.0).unwrap() - free).abs() < 1e-16);
    assert!((model.optimal_duration(&pair, 0.1, 1.0).unwrap() - (free - 0.05)).abs() < 1e-16);
    assert_eq!(model.optimal_duration(&pair, 2.0 * free, 1.0).unwrap(), 0.0);
    assert_eq!(model.optimal_duration(&pair, 5.0, 1.0).unwrap(), 0.0);
    // Identical points want no time at all.
    assert_eq!(
        model
            .optimal_duration(&model.pair(&a, &a), 0.0, 1.0)
            .unwrap(),
        0.0
    );
}

#[test]
fn merge_log_z_is_the_combined_normaliser() {
    let model = BrownianDiffusion::full(array![[2.0, 0.4], [0.4, 1.0]].view()).unwrap();
    let (a, _) = model.leaf_message(array![0.3, -1.0].view(), 0).unwrap();
    let (b, _) = model.leaf_message(array![1.1, 0.4].view(), 1).unwrap();
    let (c, _) = model.leaf_message(array![-0.7, 0.2].view(), 2).unwrap();
    let (ab, _) = model.combine(&[model.propagate(&a, 0.4), model.propagate(&b, 0.9)]);
    for (l, r, dl, dr) in [(&a, &b, 0.4, 0.9), (&ab, &c, 0.5, 1.8), (&c, &ab, 2.0, 0.1)] {
        let (_, z) = model.combine(&[model.propagate(l, dl), model.propagate(r, dr)]);
        let m = model.merge_log_z(l, r, dl, dr);
        assert!((z - m).abs() < 1e-14 * (1.0 + z.abs()), "{z} vs {m}");
    }
    // The merged mean is back in data coordinates: (0.9·a + 0.4·b) / 1.3.
    let mean = model.mean(&ab);
    assert!((mean[0] - (0.9 * 0.3 + 0.4 * 1.1) / 1.3).abs() < 1e-15);
    assert!((mean[1] - (0.4 * 0.4 - 0.9) / 1.3).abs() < 1e-15);
    assert!((ab.variance() - 0.4 * 0.9 / 1.3).abs() < 1e-16);
}

#[test]
fn point_masses_and_empty_products() {
    let model = BrownianDiffusion::isotropic(1.0, 1)
        .unwrap()
        .with_root(Root::Gaussian { s0: 1.0 })
        .unwrap();
    let tree = cherry_at_zero();
    // Duplicates merged at zero length: the density of a point mass, +∞.
    let dup = array![[0.5], [0.5], [2.0]];
    assert_eq!(
        tree_log_likelihood(&model, dup.view(), &tree, 0.0).unwrap(),
        f64::INFINITY
    );
    // Distinct points merged at zero length: impossible, −∞ (never NaN).
    let distinct = array![[0.5], [0.6], [2.0]];
    assert_eq!(
        tree_log_likelihood(&model, distinct.view(), &tree, 0.0).unwrap(),
        f64::NEG_INFINITY
    );
    // One point mass among Gaussians: the others' densities at its location.
    let (p, _) = model.leaf_message(array![0.5].view(), 0).unwrap();
    let (q, _) = model.leaf_message(array![1.5].view(), 1).unwrap();
    let (r, _) = model.leaf_message(array![-1.0].view(), 2).unwrap();
    let (msg, z) = model.combine(&[
        p.clone(),
        model.propagate(&q, 2.0),
        model.propagate(&r, 0.5),
    ]);
    let want = model.log_normal(1.0, 2.0) + model.log_normal(2.25, 0.5);
    assert_eq!(msg, p);
    assert!((z - want).abs() < 1e-15);
    // The empty product is uninformative and drops out of later products.
    let (flat, z0) = model.combine(&[]);
    assert_eq!((flat.variance(), z0), (f64::INFINITY, 0.0));
    assert_eq!(model.root_log_z(&flat), 0.0);
    let q1 = model.propagate(&q, 1.0);
    assert_eq!(
        model.combine(&[flat.clone(), q1.clone()]),
        (q1.clone(), 0.0)
    );
    assert_eq!(model.merge_log_z(&flat, &q, 1.0, 1.0), 0.0);
    assert_eq!(
        model
            .optimal_duration(&model.pair(&flat, &q), 0.0, 1.0)
            .unwrap(),
        0.0
    );
}

#[test]
fn bad_parameters_and_data_are_rejected() {
    let param = invalid_parameter;
    param(BrownianDiffusion::isotropic(0.0, 2), "lambda");
    param(BrownianDiffusion::isotropic(-1.0, 2), "lambda");
    param(BrownianDiffusion::isotropic(f64::NAN, 2), "lambda");
    param(BrownianDiffusion::isotropic(1.0, 0), "n_features");
    param(BrownianDiffusion::diagonal(&[1.0, 2.0], 3), "lambda");
    param(BrownianDiffusion::diagonal(&[1.0, 0.0, 2.0], 3), "lambda");
    param(
        BrownianDiffusion::full(Array2::zeros((0, 0)).view()),
        "lambda",
    );
    param(
        BrownianDiffusion::full(Array2::eye(2).slice(ndarray::s![.., ..1])),
        "lambda",
    );
    param(
        BrownianDiffusion::full(array![[1.0, 0.5], [0.4, 1.0]].view()),
        "lambda",
    );
    param(
        BrownianDiffusion::full(array![[1.0, 2.0], [2.0, 1.0]].view()),
        "lambda",
    );
    param(
        BrownianDiffusion::full(array![[1.0, f64::NAN], [f64::NAN, 1.0]].view()),
        "lambda",
    );
    let ok = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    param(ok.clone().with_root(Root::Gaussian { s0: -0.1 }), "s0");
    param(
        ok.clone().with_root(Root::Gaussian { s0: f64::INFINITY }),
        "s0",
    );
    assert!(matches!(
        ok.leaf_message(array![1.0].view(), 4),
        Err(RoseTreeError::ShapeMismatch { .. })
    ));
    for v in [f64::NAN, f64::INFINITY] {
        assert!(matches!(
            ok.leaf_message(array![1.0, v].view(), 4),
            Err(RoseTreeError::InvalidData {
                row: 4,
                column: Some(1),
                ..
            })
        ));
    }
}

#[test]
fn leaves_may_be_given_as_messages() {
    let model = BrownianDiffusion::isotropic(0.7, 2).unwrap();
    let mut r = rng(17);
    let tree = random_tree(5, 0.3, &mut r);
    let x = random_data(5, 2, &mut r);
    let leaves = model.leaf_messages(x.view()).unwrap();
    assert_eq!(
        tree_log_likelihood_from_leaves(&model, &leaves, &tree, 0.0).unwrap(),
        tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap()
    );
    assert!(matches!(
        tree_log_likelihood_from_leaves(&model, &leaves[..4], &tree, 0.0),
        Err(RoseTreeError::InvalidTree(_))
    ));
}

#[test]
fn noise_is_the_leaf_variance_and_is_checked() {
    let model = BrownianDiffusion::isotropic(2.0, 2)
        .unwrap()
        .with_noise(0.25)
        .unwrap();
    let (leaf, log_z) = model.leaf_message(array![1.0, -1.0].view(), 0).unwrap();
    assert_eq!(leaf.variance(), 0.25);
    assert_eq!(log_z, 0.0);
    // Two equal rows: ln N(0; 0, 2ηΛ) in d = 2 is −ln(2π · 2η · 2).
    let (_, log_z) = model.combine(&[leaf.clone(), leaf]);
    let want = -(2.0 * std::f64::consts::PI * 0.5 * 2.0).ln();
    assert!((log_z - want).abs() < 1e-14, "{log_z} vs {want}");
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        assert!(
            BrownianDiffusion::isotropic(1.0, 1)
                .unwrap()
                .with_noise(bad)
                .is_err()
        );
    }
}
