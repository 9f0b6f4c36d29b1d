//! The probit likelihood against independent computations: the truncated-normal sampler's
//! moments against their closed forms; `ln Φ` and Mills' ratio against `erfc`; the EP site
//! update against tilted moments by quadrature; EP by tree messages against EP in the
//! covariance form (Rasmussen & Williams, Algorithm 3.5); EP's evidence against the exact
//! orthant probabilities of two and three points (`1/4 + asin ρ/(2π)`,
//! `1/8 + Σ asin ρ_ij/(4π)`); the latent Gibbs draws against the mean of a truncated
//! bivariate normal in closed form; the auxiliary-variable chain's posterior over the
//! structures of three binary points against exact enumeration with the times integrated
//! numerically.

use std::collections::BTreeMap;
use std::f64::consts::PI;

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, array};

use super::*;
use crate::pydt::mcmc::{Learn, McmcConfig, Start, run};
use crate::pydt::tests::{
    covariance_log_likelihood, integrate_shape, lca_covariance, params, rng, tanh_sinh, tree,
};

/// `C_ij`, the time of the lowest common ancestor of leaves `i` and `j` (1 on the diagonal).
fn covariance(tree: &Tree) -> DMatrix<f64> {
    let n = tree.n_leaves();
    lca_covariance(tree, 1.0).view((0, 0), (n, n)).into_owned()
}

/// `P(sign(z_i) = s_i for the observed i)` for `z ~ N(0, C)` with unit diagonal, in closed
/// form for up to three observed entries (Sheppard's formula and its trivariate form).
fn orthant(col: &[f64], c: &DMatrix<f64>) -> f64 {
    let obs: Vec<(usize, f64)> = col
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan())
        .map(|(i, &v)| (i, if v == 1.0 { 1.0 } else { -1.0 }))
        .collect();
    let pairs = |scale: f64| {
        let mut s = 0.0;
        for a in 0..obs.len() {
            for b in a + 1..obs.len() {
                let ((i, si), (j, sj)) = (obs[a], obs[b]);
                s += si * sj * c[(i, j)].asin() / scale;
            }
        }
        s
    };
    match obs.len() {
        0 => 1.0,
        1 => 0.5,
        2 => 0.25 + pairs(2.0 * PI),
        3 => 0.125 + pairs(4.0 * PI),
        k => panic!("no closed form for {k} observed entries"),
    }
}

fn exact_log_marginal(x: &Array2<f64>, tree: &Tree) -> f64 {
    let c = covariance(tree);
    x.columns()
        .into_iter()
        .map(|col| orthant(&col.to_vec(), &c).ln())
        .sum()
}

/// Standard normal tail quantities from `ln_cdf_and_ratio`'s own check below.
fn upper_hazard(a: f64) -> f64 {
    ln_cdf_and_ratio(-a).1
}

#[test]
fn the_cdf_and_mills_ratio_keep_their_digits() {
    // The continued fraction against Mills' ratio (mpmath at 40 digits, rounded:
    // erfc(x/√2)/2 / φ(x)), and against libm's erfc, accurate to about 1e-13 out there.
    for (x, want) in [
        (5.0, 0.19280810471531576),
        (10.0, 0.09902859647173193),
        (20.0, 0.04987592598183679),
        (25.0, 0.039936304769535594),
        (35.0, 0.02854816184350927),
    ] {
        let got = mills_ratio(x);
        assert!((got / want - 1.0).abs() < 2e-15, "x={x}: {got} vs {want}");
    }
    for k in 0..=60 {
        let x = 5.0 + 0.5 * k as f64;
        let tail = 0.5 * libm::erfc(x / 2f64.sqrt());
        let pdf = (-0.5 * x * x).exp() / (2.0 * PI).sqrt();
        let got = mills_ratio(x);
        assert!((got * pdf / tail - 1.0).abs() < 1e-12, "x={x}");
    }
    // Both branches of ln_cdf_and_ratio agree across their switch at −5.
    let (l, r) = ln_cdf_and_ratio(-5.0 + 1e-12);
    let m = mills_ratio(5.0);
    let ln_pdf = -12.5 - 0.5 * (2.0 * PI).ln();
    assert!((l - (ln_pdf + m.ln())).abs() < 1e-12 * l.abs());
    assert!((r * m - 1.0).abs() < 1e-10);
    // Φ(0) = 1/2; a far tail against the asymptotic series; a large z.
    let (l0, r0) = ln_cdf_and_ratio(0.0);
    assert!((l0 - 0.5f64.ln()).abs() < 1e-15);
    assert!((r0 - 2.0 / (2.0 * PI).sqrt()).abs() < 1e-15);
    let x: f64 = 1e3;
    let (l, r) = ln_cdf_and_ratio(-x);
    let series = 1.0 - 1.0 / (x * x) + 3.0 / x.powi(4);
    let want = -0.5 * x * x - (x * (2.0 * PI).sqrt()).ln() + series.ln();
    assert!((l - want).abs() < 1e-12 * want.abs(), "{l} vs {want}");
    assert!((r - x / series).abs() < 1e-9);
    let (l, r) = ln_cdf_and_ratio(9.0);
    assert!(l < 0.0 && l > -1.2e-19 && r > 0.0 && r < 1.1e-18, "{l} {r}");
}

#[test]
fn the_truncated_normal_has_the_closed_form_moments() {
    let mut r = rng(31);
    let draws = 200_000;
    for a in [-3.0, -0.5, 0.0, 0.4, 2.0, 8.0, 40.0] {
        let zs: Vec<f64> = (0..draws)
            .map(|_| standard_normal_tail(a, &mut r))
            .collect();
        assert!(zs.iter().all(|&z| z > a));
        // E[Z | Z > a] = h, Var = 1 + a h − h², h = φ(a)/(1 − Φ(a)).
        let h = upper_hazard(a);
        let (mean, var) = (h, 1.0 + a * h - h * h);
        let n = draws as f64;
        let m = zs.iter().sum::<f64>() / n;
        let v = zs.iter().map(|z| (z - m).powi(2)).sum::<f64>() / (n - 1.0);
        let m4 = zs.iter().map(|z| (z - m).powi(4)).sum::<f64>() / n;
        assert!(
            (m - mean).abs() < 5.0 * (var / n).sqrt(),
            "a={a}: mean {m} vs {mean}"
        );
        assert!(
            (v - var).abs() < 5.0 * ((m4 - var * var) / n).sqrt(),
            "a={a}: var {v} vs {var}"
        );
    }
    // The two-sided wrapper: N(1.5, 0.7²) below 0 has mean 1.5 − 0.7 h(1.5/0.7).
    let (mu, sd) = (1.5, 0.7);
    let zs: Vec<f64> = (0..draws)
        .map(|_| truncated_normal(mu, sd, false, &mut r))
        .collect();
    assert!(zs.iter().all(|&z| z < 0.0));
    let h = upper_hazard(mu / sd);
    let want = mu - sd * h;
    let sd_trunc = sd * (1.0 + mu / sd * h - h * h).sqrt();
    let m = zs.iter().sum::<f64>() / draws as f64;
    assert!((m - want).abs() < 5.0 * sd_trunc / (draws as f64).sqrt());
}

#[test]
fn the_site_update_matches_tilted_moments_by_quadrature() {
    for (mean, var, y) in [
        (0.3f64, 1.2f64, 1.0f64),
        (0.3, 1.2, -1.0),
        (-2.5, 0.4, 1.0),
        (4.0, 2.0, 1.0),
        (0.0, 0.01, -1.0),
    ] {
        let s = var.sqrt();
        // ∫₀^∞ z^k N(y z; mean, var) dz over the side of y, by tanh–sinh on a finite range.
        let hi = (y * mean).max(0.0) + 40.0 * s;
        let moment = |k: i32| {
            tanh_sinh(0.0, hi, 1.0 / 64.0, &mut |u| {
                let z = y * u;
                z.powi(k) * (-(z - mean).powi(2) / (2.0 * var)).exp() / (2.0 * PI * var).sqrt()
            })
        };
        let (z0, z1, z2) = (moment(0), moment(1), moment(2));
        let (mu_hat, var_hat) = (z1 / z0, z2 / z0 - (z1 / z0).powi(2));
        let SiteUpdate {
            mean: mu_t,
            precision: tau_t,
            tilted_mean: got_mean,
            tilted_sd: got_sd,
            ln_z,
        } = site_update(mean, var, y);
        assert!((ln_z - z0.ln()).abs() < 1e-10, "{ln_z} vs {}", z0.ln());
        assert!((got_mean - mu_hat).abs() < 1e-9 * s);
        assert!((got_sd.powi(2) - var_hat).abs() < 1e-9 * var);
        // Cavity × site is the tilted Gaussian.
        let prec = 1.0 / var + tau_t;
        assert!(
            (prec * var_hat - 1.0).abs() < 1e-8,
            "{prec} vs {}",
            1.0 / var_hat
        );
        assert!(((mean / var + tau_t * mu_t) / prec - mu_hat).abs() < 1e-8 * s);
    }
}

/// EP in the covariance form (Rasmussen & Williams, Algorithm 3.5, with the hard-threshold
/// site update): sequential updates with rank-one changes of `Σ`, `Σ` recomputed as
/// `(K⁻¹ + diag τ̃)⁻¹` after each sweep, and `ln Z_EP` by a Cholesky factorisation.
fn dense_ep(col: &[f64], k_full: &DMatrix<f64>, sweeps: usize) -> (Vec<f64>, Vec<f64>, f64) {
    let obs: Vec<usize> = (0..col.len()).filter(|&i| !col[i].is_nan()).collect();
    let m = obs.len();
    let y: Vec<f64> = obs
        .iter()
        .map(|&i| if col[i] == 1.0 { 1.0 } else { -1.0 })
        .collect();
    let k = DMatrix::from_fn(m, m, |a, b| k_full[(obs[a], obs[b])]);
    let k_inv = k.clone().try_inverse().unwrap();
    let mut sigma = k.clone();
    let (mut tau, mut nu) = (vec![0.0; m], vec![0.0; m]);
    let mut mu = DVector::zeros(m);
    let mut mu_site = vec![0.0; m];
    for _ in 0..sweeps {
        for i in 0..m {
            let tau_c = 1.0 / sigma[(i, i)] - tau[i];
            let nu_c = mu[i] / sigma[(i, i)] - nu[i];
            let SiteUpdate {
                mean: mu_t,
                precision: tau_t,
                ..
            } = site_update(nu_c / tau_c, 1.0 / tau_c, y[i]);
            let delta = tau_t - tau[i];
            tau[i] = tau_t;
            nu[i] = tau_t * mu_t;
            mu_site[i] = mu_t;
            let s_i = sigma.column(i).clone_owned();
            sigma -= (delta / (1.0 + delta * sigma[(i, i)])) * &s_i * s_i.transpose();
            mu = &sigma * DVector::from_vec(nu.clone());
        }
        let mut prec = k_inv.clone();
        for i in 0..m {
            prec[(i, i)] += tau[i];
        }
        sigma = prec.try_inverse().unwrap();
        mu = &sigma * DVector::from_vec(nu.clone());
    }
    let mut ln_z = 0.0;
    for i in 0..m {
        let v = 1.0 / (1.0 / sigma[(i, i)] - tau[i]);
        let c = v * (mu[i] / sigma[(i, i)] - nu[i]);
        let ln_phi = ln_cdf_and_ratio(y[i] * c / v.sqrt()).0;
        let s2 = 1.0 / tau[i] + v;
        ln_z += ln_phi + 0.5 * (2.0 * PI * s2).ln() + (c - mu_site[i]).powi(2) / (2.0 * s2);
    }
    let mut total = k.clone();
    for i in 0..m {
        total[(i, i)] += 1.0 / tau[i];
    }
    let chol = total.cholesky().unwrap();
    let r = DVector::from_vec(mu_site.clone());
    let log_det = 2.0 * chol.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    ln_z += -0.5 * (m as f64 * (2.0 * PI).ln() + log_det + r.dot(&chol.solve(&r)));
    let mut full_mu = vec![0.0; col.len()];
    let mut full_tau = vec![0.0; col.len()];
    for (a, &i) in obs.iter().enumerate() {
        full_mu[i] = mu_site[a];
        full_tau[i] = tau[a];
    }
    (full_mu, full_tau, ln_z)
}

#[test]
fn ep_on_the_tree_is_ep_in_the_covariance_form() {
    let nan = f64::NAN;
    let cases = [
        (
            tree(
                5,
                vec![vec![0, 3], vec![5, 1], vec![2, 4], vec![6, 7]],
                &[0.8, 0.5, 0.7, 0.2],
            ),
            array![
                [1.0, 0.0, 1.0],
                [1.0, 1.0, nan],
                [0.0, 1.0, 1.0],
                [1.0, 0.0, 0.0],
                [0.0, nan, 1.0]
            ],
        ),
        (
            tree(
                7,
                vec![vec![0, 1, 2], vec![3, 4], vec![7, 8, 5], vec![9, 6]],
                &[0.9, 0.6, 0.4, 0.05],
            ),
            array![
                [1.0, 0.0],
                [1.0, 0.0],
                [1.0, 1.0],
                [0.0, nan],
                [0.0, 1.0],
                [1.0, 1.0],
                [0.0, 0.0]
            ],
        ),
    ];
    for (t, x) in cases {
        for sigma2 in [1.0, 2.5] {
            let ep = expectation_propagation(x.view(), &t, sigma2, &EpConfig::default()).unwrap();
            assert!(ep.converged && ep.iterations < 100, "{}", ep.iterations);
            let k = covariance(&t) * sigma2;
            let mut want_total = 0.0;
            for (j, col) in x.columns().into_iter().enumerate() {
                let (mu, tau, ln_z) = dense_ep(&col.to_vec(), &k, 60);
                want_total += ln_z;
                for i in 0..t.n_leaves() {
                    let (gm, gt) = (ep.site_means[[i, j]], ep.site_precisions[[i, j]]);
                    assert!(
                        (gt - tau[i]).abs() < 1e-9 * (1.0 + tau[i]),
                        "{gt} vs {}",
                        tau[i]
                    );
                    assert!(
                        (gm - mu[i]).abs() < 1e-8 * (1.0 + mu[i].abs()),
                        "{gm} vs {}",
                        mu[i]
                    );
                }
            }
            assert!(
                (ep.log_marginal - want_total).abs() < 1e-9,
                "{} vs {want_total}",
                ep.log_marginal
            );
            // σ² only rescales the sites, never the evidence.
            let unit = expectation_propagation(x.view(), &t, 1.0, &EpConfig::default()).unwrap();
            assert!((ep.log_marginal - unit.log_marginal).abs() < 1e-10);
        }
    }
}

#[test]
fn ep_approximates_the_exact_orthant_probabilities() {
    let nan = f64::NAN;
    // A single observed entry: EP is exact, ln(1/2), whatever the tree.
    let t3 = tree(3, vec![vec![0, 1], vec![3, 2]], &[0.7, 0.3]);
    let x = array![[nan], [1.0], [nan]];
    let ep = expectation_propagation(x.view(), &t3, 1.0, &EpConfig::default()).unwrap();
    assert!((ep.log_marginal - 0.5f64.ln()).abs() < 1e-13);
    let one = tree(1, vec![], &[]);
    let ep = expectation_propagation(array![[0.0, 1.0]].view(), &one, 3.0, &EpConfig::default())
        .unwrap();
    assert!((ep.log_marginal - 2.0 * 0.5f64.ln()).abs() < 1e-13);
    // Two and three points, sign patterns with and without missing entries, per column.
    // EP's error grows with the correlation (the divergence time). The largest errors
    // observed, two points / three points: 8e-12 / 2.4e-11 nats at t = 0.001, 9e-6 / 2.4e-5
    // at 0.1, 1.8e-3 / 3.7e-3 at 0.5, 0.030 / 0.049 at 0.9, 0.083 / 0.128 at 0.99 (points of
    // one sign, which EP makes less probable than they are). The tolerances allow that.
    let mut worst: f64 = 0.0;
    for (t, tol) in [
        (1e-3, 1e-10),
        (0.1, 5e-5),
        (0.5, 0.005),
        (0.9, 0.06),
        (0.99, 0.15),
    ] {
        let mut check = |x: Array2<f64>, tr: &Tree| {
            let ep = expectation_propagation(x.view(), tr, 1.0, &EpConfig::default()).unwrap();
            assert!(ep.converged);
            let mut total = 0.0;
            for (j, col) in x.columns().into_iter().enumerate() {
                let xj = col.to_owned().insert_axis(ndarray::Axis(1));
                let got = expectation_propagation(xj.view(), tr, 1.0, &EpConfig::default())
                    .unwrap()
                    .log_marginal;
                let want = exact_log_marginal(&xj, tr);
                worst = worst.max((got - want).abs());
                assert!(
                    (got - want).abs() < tol,
                    "t={t} column {j}: {got} vs {want}"
                );
                total += got;
            }
            assert!((ep.log_marginal - total).abs() < 1e-12);
        };
        let two = tree(2, vec![vec![0, 1]], &[t]);
        check(array![[1.0, 1.0, 0.0, nan], [1.0, 0.0, 0.0, 1.0]], &two);
        for shape in [
            vec![vec![0, 1], vec![3, 2]],
            vec![vec![1, 2], vec![3, 0]],
            vec![vec![0, 1, 2]],
        ] {
            let times = if shape.len() == 2 {
                vec![t, 0.5 * t]
            } else {
                vec![t]
            };
            let x = array![
                [1.0, 1.0, 1.0, 0.0, 1.0],
                [1.0, 0.0, 1.0, 1.0, nan],
                [1.0, 0.0, 0.0, 0.0, 0.0]
            ];
            check(x, &tree(3, shape, &times));
        }
    }
    assert!(worst > 1e-3, "EP is not exact for correlated points");
}

/// A tree's labelled structure: the sorted leaf sets of its internal nodes.
fn structure(tree: &Tree) -> String {
    let mut sets: Vec<Vec<usize>> = (tree.n_leaves()..tree.nodes().len())
        .map(|v| {
            let mut l = tree.leaves_of(v);
            l.sort_unstable();
            l
        })
        .collect();
    sets.sort();
    format!("{sets:?}")
}

/// Per key, the largest `|frequency − p| / standard error` by batch means.
fn max_z(draws: &[String], exact: &BTreeMap<String, f64>, batches: usize) -> f64 {
    let size = draws.len() / batches;
    let mut worst: f64 = 0.0;
    for (key, &p) in exact {
        let freqs: Vec<f64> = draws
            .chunks(size)
            .take(batches)
            .map(|b| b.iter().filter(|d| *d == key).count() as f64 / size as f64)
            .collect();
        let mean = freqs.iter().sum::<f64>() / batches as f64;
        let var = freqs.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (batches - 1) as f64;
        let se = (var / batches as f64).sqrt().max(1e-4);
        worst = worst.max((mean - p).abs() / se);
    }
    worst
}

#[test]
fn the_probit_chain_samples_the_exact_posterior_of_three_binary_points() {
    let nan = f64::NAN;
    let x = array![
        [1.0, 1.0, 0.0, 1.0, 0.0, 1.0],
        [1.0, 1.0, 1.0, nan, 0.0, 1.0],
        [0.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    ];
    let p = params(0.5, 0.2, 1.5);
    let labelled: Vec<Vec<Vec<usize>>> = vec![
        vec![vec![0, 1], vec![3, 2]],
        vec![vec![0, 2], vec![3, 1]],
        vec![vec![1, 2], vec![3, 0]],
        vec![vec![0, 1, 2]],
    ];
    // ∫ p(x | T, t) p(T, t) dt per structure with p(x | T, t) the closed-form orthant
    // probabilities, and ∫ t_root (…) dt.
    let mut mass = BTreeMap::new();
    let (mut total, mut root_time) = (0.0, 0.0);
    for shape in &labelled {
        let lik = |times: &[f64]| exact_log_marginal(&x, &tree(3, shape.clone(), times)).exp();
        let m = integrate_shape(3, shape, &p, 1.0 / 8.0, &lik);
        let r = integrate_shape(3, shape, &p, 1.0 / 8.0, &|times: &[f64]| {
            times[times.len() - 1] * lik(times)
        });
        mass.insert(
            structure(&tree(3, shape.clone(), &vec![0.5; shape.len()])),
            m,
        );
        total += m;
        root_time += r;
    }
    let exact: BTreeMap<String, f64> = mass.iter().map(|(k, v)| (k.clone(), v / total)).collect();
    root_time /= total;
    // The data must move the posterior away from the prior for the test to mean anything.
    assert!(exact["[[0, 1], [0, 1, 2]]"] > 0.45, "{exact:?}");
    let start = tree(3, vec![vec![0, 1, 2]], &[0.5]);
    let mut chain = Chain::new_probit(x.view(), &start, p, 1.0).unwrap();
    let config = McmcConfig {
        likelihood: Likelihood::Probit,
        ..McmcConfig::default()
    };
    let mut r = rng(7);
    let mut times = Vec::new();
    let draws: Vec<String> = (0..80_000)
        .map(|_| {
            chain.sweep(&config, &mut r, &|| false).unwrap();
            let t = chain.tree().unwrap();
            times.push(t.heights().unwrap()[t.root()]);
            structure(&t)
        })
        .collect();
    let z = max_z(&draws, &exact, 40);
    assert!(z < 4.5, "max z = {z}: {exact:?}");
    let batches = 40;
    let size = times.len() / batches;
    let means: Vec<f64> = times
        .chunks(size)
        .map(|b| b.iter().sum::<f64>() / size as f64)
        .collect();
    let m = means.iter().sum::<f64>() / batches as f64;
    let se = (means.iter().map(|v| (v - m).powi(2)).sum::<f64>()
        / (batches * (batches - 1)) as f64)
        .sqrt();
    assert!(
        (m - root_time).abs() < 4.5 * se,
        "E[t_root] {m} vs {root_time} (se {se})"
    );
}

#[test]
fn the_latent_values_follow_the_signs_and_the_caches_follow_them() {
    let nan = f64::NAN;
    let x = array![
        [1.0, 0.0, nan],
        [1.0, 1.0, 0.0],
        [0.0, 1.0, 1.0],
        [0.0, nan, 1.0],
        [1.0, 0.0, 0.0]
    ];
    let t = tree(
        5,
        vec![vec![0, 3], vec![5, 1], vec![2, 4], vec![6, 7]],
        &[0.8, 0.5, 0.7, 0.2],
    );
    let sigma2 = 0.7;
    let mut chain = Chain::new_probit(x.view(), &t, params(0.5, 0.2, 1.0), sigma2).unwrap();
    let config = McmcConfig {
        likelihood: Likelihood::Probit,
        ..McmcConfig::default()
    };
    let mut r = rng(17);
    let mut missing_signs = [0usize; 2];
    for _ in 0..200 {
        chain.sweep(&config, &mut r, &|| false).unwrap();
        let z = chain.latent().unwrap().to_owned();
        for ((i, j), &v) in x.indexed_iter() {
            if v.is_nan() {
                missing_signs[usize::from(z[[i, j]] > 0.0)] += 1;
            } else {
                assert_eq!(z[[i, j]] > 0.0, v == 1.0, "z[{i},{j}] = {}", z[[i, j]]);
            }
        }
        let now = chain.tree().unwrap();
        let want = covariance_log_likelihood(&z, &now, sigma2);
        assert!((chain.log_likelihood() - want).abs() < 1e-9);
    }
    // Missing entries are unconstrained: both signs occur.
    assert!(missing_signs.iter().all(|&c| c > 20), "{missing_signs:?}");
    let gaussian = Chain::new(
        x.mapv(|v| if v.is_nan() { 0.0 } else { v }).view(),
        &t,
        params(0.5, 0.2, 1.0),
        1.0,
    )
    .unwrap();
    assert!(gaussian.latent().is_none());
}

#[test]
fn the_latent_draws_follow_the_truncated_bivariate_normal() {
    // On a fixed tree of two points diverging at ρ, repeated latent draws target
    // z ~ N(0, σ²[[1, ρ], [ρ, 1]]) given the signs. By parts,
    // E[z₁ 1{z₁ > 0, s z₂ > 0}] = σ (1 + sρ)/(2√(2π)), and P = 1/4 + s asin(ρ)/(2π).
    let rho: f64 = 0.6;
    for (s, sigma2) in [(1.0, 1.0), (-1.0, 2.5)] {
        let t = tree(2, vec![vec![0, 1]], &[rho]);
        let x = array![[1.0], [if s > 0.0 { 1.0 } else { 0.0 }]];
        let mut chain = Chain::new_probit(x.view(), &t, params(0.5, 0.2, 1.0), sigma2).unwrap();
        let mut r = rng(23);
        let n = 100_000;
        let mut z1 = Vec::with_capacity(n);
        for _ in 0..n {
            chain.update_latent(&mut r).unwrap();
            z1.push(chain.latent().unwrap()[[0, 0]]);
        }
        let p = 0.25 + s * rho.asin() / (2.0 * PI);
        let want = sigma2.sqrt() * (1.0 + s * rho) / (2.0 * (2.0 * PI).sqrt()) / p;
        let batches = 50;
        let means: Vec<f64> = z1
            .chunks(n / batches)
            .map(|b| b.iter().sum::<f64>() / b.len() as f64)
            .collect();
        let m = means.iter().sum::<f64>() / batches as f64;
        let se = (means.iter().map(|v| (v - m).powi(2)).sum::<f64>()
            / (batches * (batches - 1)) as f64)
            .sqrt();
        assert!(
            (m - want).abs() < 4.5 * se,
            "s={s}: {m} vs {want} (se {se})"
        );
        assert!(se < 0.01 * want, "{se}");
    }
}

#[test]
fn probit_chains_are_reproducible() {
    let (z, _) = crate::pydt::sample(10, 3, &params(0.5, 0.2, 1.0), 1.0, 9).unwrap();
    let x = z.mapv(|v| f64::from(u8::from(v > 0.0)));
    let config = McmcConfig {
        n_iter: 6,
        burn_in: 2,
        likelihood: Likelihood::Probit,
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: false,
        },
        ..McmcConfig::default()
    };
    let start = Start {
        tree: None,
        params: params(0.5, 0.2, 1.0),
        sigma2: 1.0,
    };
    let go = |seed| run(x.view(), start, &config, seed, &|| false, &mut |_, _| {}).unwrap();
    let (a, b, c) = (go(4), go(4), go(5));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.last.tree.heights(), b.last.tree.heights());
    assert_ne!(a.trace, c.trace);
    assert!(a.trace.iter().all(|row| row.sigma2 == 1.0));
    // EP is deterministic.
    let ep1 = expectation_propagation(x.view(), &a.last.tree, 1.0, &EpConfig::default()).unwrap();
    let ep2 = expectation_propagation(x.view(), &a.last.tree, 1.0, &EpConfig::default()).unwrap();
    assert_eq!(ep1, ep2);
}

#[test]
fn bad_input_is_named() {
    let t = tree(3, vec![vec![0, 1, 2]], &[0.5]);
    let x = array![[0.0, 1.0], [1.0, 0.5], [0.0, 1.0]];
    let p = params(0.5, 0.2, 1.0);
    for err in [
        Chain::new_probit(x.view(), &t, p, 1.0).unwrap_err(),
        expectation_propagation(x.view(), &t, 1.0, &EpConfig::default()).unwrap_err(),
    ] {
        let msg = err.to_string();
        assert!(msg.contains("row 1") && msg.contains("column 1"), "{msg}");
    }
    let config = McmcConfig {
        likelihood: Likelihood::Probit,
        learn: Learn {
            sigma2: true,
            ..Learn::default()
        },
        ..McmcConfig::default()
    };
    let good = array![[0.0], [1.0], [f64::NAN]];
    let start = Start {
        tree: Some(&t),
        params: p,
        sigma2: 1.0,
    };
    let err = run(good.view(), start, &config, 0, &|| false, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("sigma2"), "{err}");
    let config = McmcConfig {
        likelihood: Likelihood::Probit,
        ..McmcConfig::default()
    };
    let err = run(x.view(), start, &config, 0, &|| false, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("row 1"), "{err}");
    let err = "logit".parse::<Likelihood>().unwrap_err();
    assert!(err.to_string().contains("likelihood"), "{err}");
    assert_eq!("probit".parse::<Likelihood>().unwrap(), Likelihood::Probit);
    let ep = |c: EpConfig, s: f64| expectation_propagation(good.view(), &t, s, &c).unwrap_err();
    let named = |err: RoseTreeError, name: &str| {
        assert!(err.to_string().contains(name), "{err}");
    };
    named(
        ep(
            EpConfig {
                max_iter: 0,
                ..EpConfig::default()
            },
            1.0,
        ),
        "max_iter",
    );
    named(
        ep(
            EpConfig {
                tol: f64::NAN,
                ..EpConfig::default()
            },
            1.0,
        ),
        "tol",
    );
    named(ep(EpConfig::default(), 0.0), "sigma2");
    let two = array![[1.0], [0.0]];
    let err = expectation_propagation(two.view(), &t, 1.0, &EpConfig::default()).unwrap_err();
    assert!(matches!(err, RoseTreeError::InvalidTree(_)), "{err}");
}
