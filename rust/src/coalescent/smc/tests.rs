//! Checks of the SMC against independent computations: the PostPost integral and duration
//! sampler against brute-force quadrature in `δ`, and the unbiasedness of `p̂(x)` against the
//! exact `p(x)` from the Gaussian covariance form integrated over the coalescent's waiting
//! times and summed over the ranked tree histories.

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, array};

use super::*;
use crate::models::messages::tree_log_likelihood;
use crate::models::messages::{MaskedBrownian, Root, Root::Gaussian};

const ALL: [Proposal; 3] = [
    Proposal::PriorPrior,
    Proposal::PriorPost,
    Proposal::PostPost,
];

fn one_thread() -> Threads {
    Threads::new(Some(1)).unwrap()
}

/// One run on one thread, never interrupted.
fn fit<M: DurationPosterior>(
    model: &M,
    x: &Array2<f64>,
    proposal: Proposal,
    s: usize,
    seed: u64,
) -> Result<SmcResult> {
    run(
        model,
        x.view(),
        &SmcParams::new(proposal, s, seed),
        &one_thread(),
        &|| false,
    )
}

/// The weight of node `i` of `0..=k` in composite Simpson's rule (`k` even), times 3/h.
fn simpson_weight(i: usize, k: usize) -> f64 {
    if i == 0 || i == k {
        1.0
    } else if i % 2 == 1 {
        4.0
    } else {
        2.0
    }
}

/// `ln ∫_0^∞ e^{−rate·δ} Z(base + 2δ) dδ` by composite Simpson in `y = ln δ` over
/// `[−60, 16]`, from [`MessageModel::pair_log_z`] alone.
fn brute_log_integral(model: &BrownianDiffusion, pair: &GaussianPair, rate: f64) -> f64 {
    let f = |y: f64| {
        let d = y.exp();
        -rate * d + model.pair_log_z(pair, 2.0 * d) + y
    };
    let (lo, hi, k) = (-60.0, 16.0, 400_000);
    let h = (hi - lo) / k as f64;
    let vals: Vec<f64> = (0..=k).map(|i| f(lo + i as f64 * h)).collect();
    let max = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = vals
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = simpson_weight(i, k);
            c * (v - max).exp()
        })
        .sum();
    max + (sum * h / 3.0).ln()
}

/// `(D, Λ = λI, S, w, rate)`: interior and boundary modes, `w = 0`, `S = 0`, the steep
/// rates of early steps with large `n`, and one and many dimensions.
const CASES: [(usize, f64, f64, f64, f64); 10] = [
    (1, 1.0, 0.5, 0.2, 3.0),
    (2, 1.0, 2.0, 0.0, 1.0),
    (20, 1.0, 3.0, 1e-5, 80_000.0),
    (20, 1.0, 50.0, 0.1, 1.0),
    (20, 2.0, 0.01, 2.0, 1.0),
    (5, 1.0, 0.0, 0.3, 10.0),
    (1, 0.5, 0.0, 0.0, 1.0),
    (20, 1.0, 40.0, 1e-3, 3.0),
    (3, 1.0, 1e-6, 1e-4, 6.0),
    (20, 0.7, 200.0, 5.0, 45.0),
];

#[test]
fn post_post_integral_matches_quadrature_in_delta() {
    for &(d, lambda, s, w, rate) in &CASES {
        let model = BrownianDiffusion::isotropic(lambda, d).unwrap();
        // S is a squared Mahalanobis distance: the pair's own summary.
        let pair = GaussianPair { sq_dist: s, var: w };
        let exact = brute_log_integral(&model, &pair, rate);
        let precise = model.log_integral(&pair, 0.0, rate).unwrap();
        assert!(
            (precise - exact).abs() < 1e-9 * exact.abs().max(1.0),
            "{:?}: {precise} vs {exact}",
            (d, lambda, s, w, rate)
        );
        // The base length adds to w.
        let split = GaussianPair {
            sq_dist: s,
            var: 0.5 * w,
        };
        let shifted = model.log_integral(&split, 0.5 * w, rate).unwrap();
        assert!((shifted - precise).abs() < 1e-11 * precise.abs().max(1.0));
        // The Laplace approximation that chooses the pair is within 10 % (20 % for the
        // log-gamma shape of D = 1 with S = w = 0).
        let approx = model.approx_log_integral(&pair, 0.0, rate).unwrap();
        eprintln!(
            "{:?}: ln Î − ln I = {:.2e}",
            (d, lambda, s, w, rate),
            approx - exact
        );
        assert!(
            (approx - exact).abs() < if s == 0.0 && w == 0.0 { 0.2 } else { 0.1 },
            "{:?}: approx {approx} vs {exact}",
            (d, lambda, s, w, rate)
        );
    }
}

#[test]
fn post_post_integral_without_truncation_is_the_gig_normaliser() {
    // D = 3, w = 0: ∫_0^∞ u^{−3/2} e^{−(λu + S/u)/2} du = √(2π/S) e^{−√(λS)} (K_{−1/2}), so
    // I = (c/2) √(2π/S) e^{−√(λS)} with c = (2π)^{−3/2}.
    let (lambda, s) = (6.0, 0.7);
    let model = BrownianDiffusion::isotropic(1.0, 3).unwrap();
    let pair = GaussianPair {
        sq_dist: s,
        var: 0.0,
    };
    let expected = -1.5 * (std::f64::consts::TAU).ln() - std::f64::consts::LN_2
        + 0.5 * (std::f64::consts::TAU / s).ln()
        - (lambda * s).sqrt();
    let got = model.log_integral(&pair, 0.0, lambda).unwrap();
    assert!((got - expected).abs() < 1e-11, "{got} vs {expected}");
}

#[test]
fn duration_draws_follow_the_posterior() {
    for &(d, lambda, s, w, rate) in &[CASES[0], CASES[3], CASES[4], CASES[2], CASES[8], CASES[9]] {
        let model = BrownianDiffusion::isotropic(lambda, d).unwrap();
        let pair = GaussianPair { sq_dist: s, var: w };
        let mut rng = stream(11, 0, 0);
        let n = 20_000;
        let mut draws: Vec<f64> = (0..n)
            .map(|_| model.sample_duration(&pair, 0.0, rate, &mut rng).unwrap().0)
            .collect();
        draws.sort_by(f64::total_cmp);
        assert!(draws[0] >= 0.0);
        let log_i = brute_log_integral(&model, &pair, rate);
        // The posterior CDF at the empirical deciles, by Simpson in δ on [0, q].
        for k in 1..10 {
            let q = draws[k * n / 10];
            let m = 20_000;
            let h = q / m as f64;
            let cdf: f64 = (0..=m)
                .map(|i| {
                    let c = simpson_weight(i, m);
                    let delta = i as f64 * h;
                    c * (-rate * delta + model.pair_log_z(&pair, 2.0 * delta) - log_i).exp()
                })
                .sum::<f64>()
                * h
                / 3.0;
            // Kolmogorov–Smirnov at the 0.1 % level: 1.95/√n ≈ 0.014.
            assert!(
                (cdf - k as f64 / 10.0).abs() < 0.014,
                "{:?}: CDF at the {k}th decile is {cdf}",
                (d, lambda, s, w, rate)
            );
        }
    }
}

/// Every ranked history of `n` lineages: the sequence of slot pairs `(i, j)`, `i > j`, merged
/// (the merged lineage takes slot `j`, slot `i` is removed).
fn histories(m: usize) -> Vec<Vec<(usize, usize)>> {
    if m == 1 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for i in 1..m {
        for j in 0..i {
            for rest in histories(m - 1) {
                let mut h = vec![(i, j)];
                h.extend(rest);
                out.push(h);
            }
        }
    }
    out
}

/// `p(x | π)` for Brownian motion with `Λ = λI` from the covariance form: per column, the
/// leaves are jointly normal given the root value with covariance `λ·C`, `C_ab` the length
/// of the path shared from the root node (`t_lca(a, b) − t_root`), and the root value is
/// `N(0, s0·λ)` or flat (integrated against Lebesgue measure, Teh et al. eq 5 with
/// `Z_−∞ = 1`).
fn covariance_density(
    x: &Array2<f64>,
    history: &[(usize, usize)],
    deltas: &[f64],
    lambda: f64,
    root: Root,
) -> f64 {
    let n = x.nrows();
    let mut slots: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut lca = DMatrix::<f64>::zeros(n, n);
    let mut t = 0.0;
    for (&(i, j), &d) in history.iter().zip(deltas) {
        t -= d;
        for &a in &slots[i] {
            for &b in &slots[j] {
                lca[(a, b)] = t;
                lca[(b, a)] = t;
            }
        }
        let moved = slots.swap_remove(i);
        slots[j].extend(moved);
    }
    let t_root = t;
    let c = DMatrix::from_fn(n, n, |a, b| {
        let shared = if a == b { 0.0 } else { lca[(a, b)] } - t_root;
        lambda * shared
    });
    let mut density = 1.0;
    for col in x.columns() {
        // A missing entry is marginalised by dropping its row and column.
        let rows: Vec<usize> = (0..n).filter(|&a| !col[a].is_nan()).collect();
        let m = rows.len();
        if m == 0 {
            continue;
        }
        let c = DMatrix::from_fn(m, m, |a, b| c[(rows[a], rows[b])]);
        let ones = DVector::from_element(m, 1.0);
        let xv = DVector::from_iterator(m, rows.iter().map(|&a| col[a]));
        density *= match root {
            Root::Gaussian { s0 } => {
                let sigma = &c + (&ones * ones.transpose()) * (s0 * lambda);
                let chol = sigma.clone().cholesky().unwrap();
                let quad = xv.dot(&chol.solve(&xv));
                (-0.5 * (m as f64 * LN_2PI + chol.determinant().ln() + quad)).exp()
            }
            Root::Flat if m == 1 => 1.0,
            Root::Flat => {
                let chol = c.clone().cholesky().unwrap();
                let (px, p1) = (chol.solve(&xv), chol.solve(&ones));
                let (a, b, q) = (ones.dot(&p1), ones.dot(&px), xv.dot(&px));
                (-0.5 * (m as f64 * LN_2PI + chol.determinant().ln() + q - b * b / a)).exp()
                    * (std::f64::consts::TAU / a).sqrt()
            }
        };
    }
    density
}

/// The exact `p(x) = Σ_histories ∫ Π_i e^{−λ_i δ_i} p(x | π) dδ` by the midpoint rule with
/// `k` points per waiting time in `v_i = e^{−λ_i δ_i}` (so `e^{−λ_i δ_i} dδ_i = dv_i / λ_i`).
fn exact_marginal(x: &Array2<f64>, lambda: f64, root: Root, k: usize) -> f64 {
    let n = x.nrows();
    let rates: Vec<f64> = (2..=n).rev().map(|m| (m * (m - 1) / 2) as f64).collect();
    let steps = n - 1;
    let mut total = 0.0;
    for history in histories(n) {
        let mut index = vec![0usize; steps];
        loop {
            let deltas: Vec<f64> = index
                .iter()
                .zip(&rates)
                .map(|(&g, r)| -((g as f64 + 0.5) / k as f64).ln() / r)
                .collect();
            total += covariance_density(x, &history, &deltas, lambda, root);
            let mut pos = 0;
            while pos < steps {
                index[pos] += 1;
                if index[pos] < k {
                    break;
                }
                index[pos] = 0;
                pos += 1;
            }
            if pos == steps {
                break;
            }
        }
    }
    total / (k as f64).powi(steps as i32) / rates.iter().product::<f64>()
}

/// Asserts that the mean of `p̂(x) / p(x)` over `runs` seeds is 1 within 4 standard errors
/// (and that the standard error is small enough for the check to mean something).
fn assert_unbiased<M: DurationPosterior>(
    model: &M,
    x: &Array2<f64>,
    exact: f64,
    proposal: Proposal,
    s: usize,
    runs: u64,
) -> usize {
    let mut ratios = Vec::new();
    let mut resamplings = 0;
    for seed in 0..runs {
        let params = SmcParams::new(proposal, s, seed);
        let fit = run(model, x.view(), &params, &one_thread(), &|| false).unwrap();
        resamplings += fit.resampled.iter().filter(|&&r| r).count();
        ratios.push((fit.log_marginal - exact.ln()).exp());
    }
    let mean = ratios.iter().sum::<f64>() / runs as f64;
    let var = ratios.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / (runs - 1) as f64;
    let se = (var / runs as f64).sqrt();
    assert!(
        se < 0.05,
        "{proposal:?}: standard error {se} too large to test"
    );
    assert!(
        (mean - 1.0).abs() < 4.0 * se,
        "{proposal:?}: mean p̂/p = {mean} ± {se}"
    );
    resamplings
}

#[test]
fn exact_marginal_quadrature_has_converged() {
    let x = array![[0.0, 1.0], [0.4, 0.7], [1.7, -0.5]];
    for root in [Gaussian { s0: 1.5 }, Root::Flat] {
        let (coarse, fine) = (
            exact_marginal(&x, 0.8, root, 400),
            exact_marginal(&x, 0.8, root, 800),
        );
        assert!((coarse / fine - 1.0).abs() < 2e-3, "{coarse} vs {fine}");
    }
}

#[test]
fn marginal_estimate_is_unbiased_for_three_points() {
    let x = array![[0.0, 1.0], [0.4, 0.7], [1.7, -0.5]];
    for root in [Gaussian { s0: 1.5 }, Root::Flat] {
        let model = BrownianDiffusion::isotropic(0.8, 2)
            .unwrap()
            .with_root(root)
            .unwrap();
        let exact = exact_marginal(&x, 0.8, root, 800);
        // The given-tree evaluation agrees with the covariance form used for p(x).
        let deltas = [0.3, 0.9];
        let tree = Tree::new(
            &Topology::new(3, vec![vec![0, 1], vec![3, 2]]).unwrap(),
            Some(vec![0.0, 0.0, 0.0, -0.3, -1.2]),
        )
        .unwrap();
        let direct = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
        let cov = covariance_density(&x, &[(1, 0), (1, 0)], &deltas, 0.8, root).ln();
        assert!((direct - cov).abs() < 1e-12, "{direct} vs {cov}");
        for proposal in ALL {
            assert_unbiased(&model, &x, exact, proposal, 3, 2000);
        }
    }
}

#[test]
fn marginal_estimate_is_unbiased_with_missing_entries() {
    // Leaf 1 misses feature 1: once it has merged, its lineage's two features carry
    // different variances, and PostPost proposes from the surrogate GIG.
    let x = array![[0.0, 1.0], [0.4, f64::NAN], [1.7, -0.5]];
    for root in [Gaussian { s0: 1.5 }, Root::Flat] {
        let base = BrownianDiffusion::isotropic(0.8, 2)
            .unwrap()
            .with_root(root)
            .unwrap();
        let model = MaskedBrownian::new(base).unwrap();
        let exact = exact_marginal(&x, 0.8, root, 800);
        let tree = Tree::new(
            &Topology::new(3, vec![vec![0, 1], vec![3, 2]]).unwrap(),
            Some(vec![0.0, 0.0, 0.0, -0.3, -1.2]),
        )
        .unwrap();
        let direct = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
        let cov = covariance_density(&x, &[(1, 0), (1, 0)], &[0.3, 0.9], 0.8, root).ln();
        assert!((direct - cov).abs() < 1e-12, "{direct} vs {cov}");
        for proposal in ALL {
            assert_unbiased(&model, &x, exact, proposal, 3, 2000);
        }
    }
}

#[test]
fn marginal_estimate_is_unbiased_for_four_points_with_resampling() {
    let x = array![[0.0], [0.3], [1.4], [2.9]];
    let root = Gaussian { s0: 2.0 };
    let model = BrownianDiffusion::isotropic(1.2, 1)
        .unwrap()
        .with_root(root)
        .unwrap();
    let (coarse, exact) = (
        exact_marginal(&x, 1.2, root, 60),
        exact_marginal(&x, 1.2, root, 120),
    );
    assert!((coarse / exact - 1.0).abs() < 3e-3, "{coarse} vs {exact}");
    for proposal in ALL {
        let resamplings = assert_unbiased(&model, &x, exact, proposal, 4, 2000);
        // PostPost's weights vary too little here to fall below S/2.
        if proposal != Proposal::PostPost {
            assert!(resamplings > 0, "{proposal:?} never resampled");
        }
    }
}

fn random_rows(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = stream(seed, 0, 0);
    Array2::from_shape_fn((n, d), |(i, _)| {
        (i % 3) as f64 * 2.0 + rng.random::<f64>() - 0.5
    })
}

#[test]
fn results_do_not_depend_on_the_number_of_threads() {
    let x = random_rows(25, 3, 5);
    let model = BrownianDiffusion::isotropic(1.0, 3).unwrap();
    for proposal in ALL {
        let params = SmcParams::new(proposal, 12, 42);
        let a = run(&model, x.view(), &params, &one_thread(), &|| false).unwrap();
        let threads = Threads::new(Some(3)).unwrap();
        let b = run(&model, x.view(), &params, &threads, &|| false).unwrap();
        assert_eq!(a.trees, b.trees);
        assert_eq!(a.log_weights, b.log_weights);
        assert_eq!(a.log_marginal.to_bits(), b.log_marginal.to_bits());
        assert_eq!(a.ess, b.ess);
        let c = run(
            &model,
            x.view(),
            &SmcParams::new(proposal, 12, 43),
            &threads,
            &|| false,
        );
        assert_ne!(a.log_marginal, c.unwrap().log_marginal);
    }
}

#[test]
fn ess_is_bounded_and_resampling_follows_it() {
    let x = random_rows(30, 2, 9);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    for proposal in ALL {
        let s = 20;
        let fit = fit(&model, &x, proposal, s, 3).unwrap();
        assert_eq!(fit.ess.len(), 29);
        for (step, (&e, &r)) in fit.ess.iter().zip(&fit.resampled).enumerate() {
            assert!(
                (1.0 - 1e-12..=s as f64 * (1.0 + 1e-12)).contains(&e),
                "ESS {e}"
            );
            assert_eq!(r, e < 0.5 * s as f64 && step < 28, "step {step}: ESS {e}");
        }
        assert!(
            fit.resampled.iter().any(|&r| r),
            "{proposal:?} never resampled"
        );
        let norm = log_sum_exp(&fit.log_weights);
        assert!(norm.abs() < 1e-12);
        // Every particle is a valid coalescent tree whose weight is finite.
        for tree in &fit.trees {
            let h = tree.heights().unwrap();
            assert!(h[..30].iter().all(|&t| t == 0.0));
            for (id, node) in tree.nodes().iter().enumerate().skip(30) {
                assert!(node.children.iter().all(|&c| h[c] > h[id]));
            }
            assert!(
                tree_log_likelihood(&model, x.view(), tree, 0.0)
                    .unwrap()
                    .is_finite()
            );
        }
    }
}

#[test]
fn errors_are_reported() {
    let x = random_rows(5, 2, 1);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let params = SmcParams::new(Proposal::PostPost, 4, 0);
    let interrupted = run(&model, x.view(), &params, &one_thread(), &|| true);
    assert!(matches!(interrupted, Err(RoseTreeError::Interrupted)));
    let zero = fit(&model, &x, Proposal::PriorPost, 0, 0);
    assert!(
        matches!(zero, Err(RoseTreeError::InvalidParameter { ref name, .. }) if name == "n_particles")
    );
    let empty = Array2::<f64>::zeros((0, 2));
    assert!(matches!(
        run(&model, empty.view(), &params, &one_thread(), &|| false),
        Err(RoseTreeError::InvalidData { .. })
    ));
    let dup = array![[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]];
    assert!(matches!(
        run(&model, dup.view(), &params, &one_thread(), &|| false),
        Err(RoseTreeError::Numerical(_))
    ));
    // PriorPost copes with duplicates: the first merge is a.s. after time 0.
    let ok = fit(&model, &dup, Proposal::PriorPost, 4, 0);
    assert!(ok.unwrap().log_marginal.is_finite());

    let mutation = MultinomialMutation::new(&[vec![0.5, 0.5]], &[1.0]).unwrap();
    let bits = array![[0.0], [1.0], [1.0]];
    let post = run(&mutation, bits.view(), &params, &one_thread(), &|| false);
    assert!(
        matches!(post, Err(RoseTreeError::InvalidParameter { ref name, .. }) if name == "inference")
    );
    let prior = fit(&mutation, &bits, Proposal::PriorPost, 4, 0);
    assert!(prior.unwrap().log_marginal.is_finite());
}

#[test]
fn one_row_is_its_own_tree() {
    let model = BrownianDiffusion::isotropic(1.0, 1)
        .unwrap()
        .with_root(Gaussian { s0: 2.0 })
        .unwrap();
    let x = array![[0.5]];
    let fit = fit(&model, &x, Proposal::PostPost, 3, 0).unwrap();
    let expected = -0.5 * (LN_2PI + 2f64.ln() + 0.25 / 2.0);
    assert!((fit.log_marginal - expected).abs() < 1e-14);
    assert!(fit.ess.is_empty());
}

#[test]
fn triangular_indices_round_trip() {
    let mut k = 0;
    for i in 1..200 {
        for j in 0..i {
            assert_eq!(tri(i, j), k);
            assert_eq!(tri(j, i), k);
            assert_eq!(untri(k), (i, j));
            k += 1;
        }
    }
}

/// The speed measurement of the issue: SMC-PostPost, S = 50, d = 20, Brownian, n ∈ {100,
/// 200, 400}. Run with `cargo test --release -- --ignored post_post_speed --nocapture`.
#[test]
#[ignore]
fn post_post_speed() {
    let model = BrownianDiffusion::isotropic(1.0, 20).unwrap();
    let mut last: Option<(usize, f64)> = None;
    for n in [100, 200, 400] {
        let x = random_rows(n, 20, n as u64);
        let start = std::time::Instant::now();
        let fit = run(
            &model,
            x.view(),
            &SmcParams::new(Proposal::PostPost, 50, 1),
            &Threads::new(None).unwrap(),
            &|| false,
        )
        .unwrap();
        let secs = start.elapsed().as_secs_f64();
        let exponent = last.map(|(m, t)| (secs / t).ln() / (n as f64 / m as f64).ln());
        #[allow(clippy::print_stdout)]
        {
            println!(
                "n = {n}: {secs:.2} s, ln p̂(x) = {:.2}, growth exponent {exponent:?}",
                fit.log_marginal
            );
        }
        last = Some((n, secs));
    }
}
