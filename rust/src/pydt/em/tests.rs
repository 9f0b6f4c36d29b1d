//! Greedy EM against independent computations: the M-step gradient against central finite
//! differences; the E-step against the covariance form of the Gaussian conditional; the
//! hyperparameter updates against one-dimensional numerical maximisation; the quick scores
//! and the reported log joints against `log_prior + log_likelihood`; and the search on
//! well-separated clusters.

use nalgebra::DMatrix;
use ndarray::{Array2, ArrayView2, array};
use rand::Rng;
use rand_distr::StandardNormal;

use super::*;
use crate::pydt::mcmc::GammaPrior;
use crate::pydt::tests::{lca_covariance, params, rng};
use crate::pydt::{log_likelihood, log_prior, sample};

/// The exact log joint of a tree.
fn exact(x: &Array2<f64>, tree: &Tree, p: &PydtParams, sigma2: f64) -> f64 {
    log_prior(tree, p).unwrap() + log_likelihood(x.view(), tree, sigma2).unwrap()
}

/// `Σ_b ln t_b (1 − t_b)` over the branch points: the Jacobian from `t` to `s = logit t`.
fn jacobian(tree: &Tree) -> f64 {
    let t = tree.heights().unwrap();
    (0..tree.nodes().len())
        .filter(|&v| !tree.node(v).children.is_empty())
        .map(|v| (t[v] * (1.0 - t[v])).ln())
        .sum()
}

/// The objective `F` with no hyperparameter learnt: the log joint in `s = logit t`.
fn objective(x: &Array2<f64>, tree: &Tree, p: &PydtParams, sigma2: f64) -> f64 {
    exact(x, tree, p, sigma2) + jacobian(tree)
}

fn state_of<'a>(x: &'a Array2<f64>, tree: &Tree, p: PydtParams, sigma2: f64) -> State<'a> {
    let arena = Arena::from_topology(&tree.topology(), tree.heights().unwrap(), |_| {
        NodeState::default()
    })
    .unwrap();
    State::new(
        arena,
        x,
        p,
        sigma2,
        Learn::default(),
        Hyperpriors::default(),
    )
}

/// A sampled data set with its tree.
fn sampled(n: usize, d: usize, p: &PydtParams, sigma2: f64, seed: u64) -> (Array2<f64>, Tree) {
    sample(n, d, p, sigma2, seed).unwrap()
}

/// The maximiser of `f` on `[lo, hi]` by a dense scan refined by ternary search (a direct
/// numerical maximisation, independent of the code under test).
fn maximise(f: impl Fn(f64) -> f64, lo: f64, hi: f64) -> f64 {
    let n = 2000;
    let best = (0..=n)
        .map(|i| lo + (hi - lo) * i as f64 / n as f64)
        .max_by(|a, b| f(*a).partial_cmp(&f(*b)).unwrap())
        .unwrap();
    let step = (hi - lo) / n as f64;
    let (mut a, mut b) = (best - step, best + step);
    for _ in 0..200 {
        let m1 = a + (b - a) / 3.0;
        let m2 = b - (b - a) / 3.0;
        if f(m1) < f(m2) {
            a = m1;
        } else {
            b = m2;
        }
    }
    0.5 * (a + b)
}

#[test]
fn the_time_gradient_is_the_finite_difference_of_the_objective() {
    for (seed, p) in [(1, params(0.0, 0.0, 1.0)), (2, params(0.5, 0.3, 2.0))] {
        let (x, tree) = sampled(12, 3, &p, 0.7, seed);
        let state = state_of(&x, &tree, p, 0.7);
        let e = state.estep();
        let (internal, problem) = state.time_problem(&e);
        let mut r = rng(seed);
        let s: Vec<f64> = state
            .times_to_s(&internal)
            .iter()
            .map(|v| v + 0.5 * r.sample::<f64, _>(StandardNormal))
            .collect();
        assert_gradient(|s, g| problem.eval(s, g), &s);
    }
}

#[test]
fn the_m_step_objective_at_the_current_times_is_the_expected_complete_log_joint() {
    // Q(s(t)) must equal Σ_b [−(D/2) ln ℓ_b − S_b/(2σ²ℓ_b)] + Σ [cJ ln(1 − t) + ln t] evaluated
    // directly from the times (up to the ceiling δ, whose effect is O(δ)).
    let p = params(0.3, 0.1, 1.5);
    let (x, tree) = sampled(9, 2, &p, 0.5, 4);
    let state = state_of(&x, &tree, p, 0.5);
    let e = state.estep();
    let (internal, problem) = state.time_problem(&e);
    let q = problem.eval(&state.times_to_s(&internal), None);
    let t = tree.heights().unwrap();
    let h = p.harmonic(tree.n_leaves());
    let mut want = 0.0;
    for (v, node) in tree.nodes().iter().enumerate() {
        let ta = node.parent.map_or(0.0, |a| t[a]);
        let ell = t[v] - ta;
        want += -ell.ln() - e.stat[v] / (2.0 * 0.5 * ell);
        if !node.children.is_empty() {
            let counts: Vec<usize> = node
                .children
                .iter()
                .map(|&k| tree.node(k).n_leaves)
                .collect();
            want += p.c() * harmonic_gap(&h, &counts) * (-t[v]).ln_1p() + t[v].ln();
        }
    }
    assert!(
        (q - want).abs() < 1e-6 * want.abs().max(1.0),
        "{q} vs {want}"
    );
}

/// The posterior marginals of every node and the cross-covariances with the parent from
/// the covariance form: all locations are jointly N(0, σ² K ⊗ I) with K_uv = t(lca(u, v)).
fn covariance_form(x: &Array2<f64>, tree: &Tree, sigma2: f64) -> (DMatrix<f64>, DMatrix<f64>) {
    let n = tree.n_leaves();
    let k = lca_covariance(tree, sigma2);
    let kll = k.view((0, 0), (n, n)).into_owned();
    let kal = k.columns(0, n).into_owned();
    let inv = kll.try_inverse().unwrap();
    let xl = DMatrix::from_fn(n, x.ncols(), |i, j| x[[i, j]]);
    let mean = &kal * &inv * xl;
    let cov = &k - &kal * &inv * kal.transpose();
    (mean, cov)
}

/// `Var(x_v − x_a)` from a joint covariance, with the origin (variance 0) above the root.
fn difference_variance(cov: &DMatrix<f64>, v: usize, parent: Option<usize>) -> f64 {
    parent.map_or(cov[(v, v)], |a| {
        cov[(v, v)] + cov[(a, a)] - 2.0 * cov[(v, a)]
    })
}

#[test]
fn the_e_step_is_the_covariance_form_conditional() {
    for (seed, sigma2) in [(3, 0.8), (5, 2.0)] {
        let p = params(0.5, 0.2, 1.0);
        let (x, tree) = sampled(8, 3, &p, sigma2, seed);
        let state = state_of(&x, &tree, p, sigma2);
        let e = state.estep();
        let (mean, cov) = covariance_form(&x, &tree, sigma2);
        let d = x.ncols();
        for (v, node) in tree.nodes().iter().enumerate() {
            for j in 0..d {
                assert!((e.mean[v * d + j] - mean[(v, j)]).abs() < 1e-9);
            }
            assert!((sigma2 * e.var[v] - cov[(v, v)]).abs() < 1e-9);
            // E‖x_v − x_a‖² with the origin (0, variance 0) above the root.
            let above = |j: usize| node.parent.map_or(0.0, |a| mean[(a, j)]);
            let dm: f64 = (0..d).map(|j| (mean[(v, j)] - above(j)).powi(2)).sum();
            let want = dm + d as f64 * difference_variance(&cov, v, node.parent);
            assert!(
                (e.stat[v] - want).abs() < 1e-9 * (1.0 + want),
                "node {v}: {} vs {want}",
                e.stat[v]
            );
        }
    }
}

#[test]
fn the_m_step_reaches_a_stationary_point_and_raises_the_objective() {
    let p = params(0.4, 0.2, 1.2);
    let (x, tree) = sampled(15, 4, &p, 0.6, 7);
    let mut state = state_of(&x, &tree, p, 0.6);
    assert!((state.log_joint() - exact(&x, &tree, &p, 0.6)).abs() < 1e-8);
    let before = objective(&x, &tree, &p, 0.6);
    assert!((state.objective() - before).abs() < 1e-8);
    let e = state.estep();
    let (internal, problem) = state.time_problem(&e);
    let q0 = problem.eval(&state.times_to_s(&internal), None);
    state.mstep_times(&e).unwrap();
    let s1 = state.times_to_s(&internal);
    let mut g = vec![0.0; s1.len()];
    let q1 = problem.eval(&s1, Some(&mut g));
    assert!(q1 > q0);
    let norm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!(norm < 1e-4, "gradient norm {norm} after the M-step");
    let after_tree = state.arena.to_tree().unwrap();
    let after = objective(&x, &after_tree, &p, 0.6);
    assert!(after >= before, "{after} < {before}");
    assert!((state.objective() - after).abs() < 1e-8);
    assert!((state.log_joint() - exact(&x, &after_tree, &p, 0.6)).abs() < 1e-8);
    // EM to convergence keeps raising it.
    state.em(20, 1e-10).unwrap();
    let last = objective(&x, &state.arena.to_tree().unwrap(), &p, 0.6);
    assert!(last >= after);
}

#[test]
fn the_sigma2_update_converges_to_the_numerical_maximiser() {
    // With the times fixed, iterating the E-step and the σ² update is EM in σ² alone; its
    // fixed point maximises ln p(X | T, t, σ²) + ln Gamma(1/σ²; a, b).
    let p = params(0.0, 0.0, 1.0);
    let x = array![[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2], [0.9, 0.8]];
    let tree = crate::pydt::tests::tree(
        4,
        vec![vec![0, 1], vec![4, 2], vec![5, 3]],
        &[0.7, 0.4, 0.2],
    );
    let prior = GammaPrior {
        shape: 2.0,
        rate: 0.5,
    };
    let mut state = state_of(&x, &tree, p, 1.0);
    state.learn.sigma2 = true;
    state.priors.precision = prior;
    for _ in 0..2000 {
        let e = state.estep();
        state.update_sigma2(&e);
    }
    let f = |ln_s2: f64| {
        let s2 = ln_s2.exp();
        log_likelihood(x.view(), &tree, s2).unwrap() + prior.ln_pdf(1.0 / s2)
    };
    let want = maximise(f, -6.0, 4.0).exp();
    assert!(
        (state.sigma2() - want).abs() < 1e-6 * want,
        "{} vs {want}",
        state.sigma2()
    );
}

#[test]
fn the_c_update_is_the_numerical_maximiser() {
    let (a, b) = (0.5, 0.2);
    let p = params(a, b, 1.0);
    let (x, tree) = sampled(10, 2, &p, 1.0, 11);
    let prior = GammaPrior {
        shape: 1.5,
        rate: 0.7,
    };
    let mut state = state_of(&x, &tree, p, 1.0);
    state.learn.c = true;
    state.priors.c = prior;
    state.update_c().unwrap();
    let f = |ln_c: f64| {
        let c = ln_c.exp();
        log_prior(&tree, &params(a, b, c)).unwrap() + prior.ln_pdf(c)
    };
    let want = maximise(f, -6.0, 5.0).exp();
    let got = state.params().c();
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
}

#[test]
fn alpha_and_beta_updates_raise_the_objective_to_a_one_dimensional_maximum() {
    let p = params(0.5, 0.3, 1.0);
    let (x, tree) = sampled(20, 2, &p, 1.0, 12);
    let mut state = state_of(&x, &tree, params(2.0, 0.6, 1.0), 1.0);
    state.learn.alpha = true;
    state.learn.beta = true;
    let f0 = state.objective();
    state.update_alpha_beta().unwrap();
    assert!(state.objective() >= f0);
    // β is the last coordinate searched: it maximises the objective along β.
    let alpha = state.params().alpha();
    let priors = Hyperpriors::default();
    let f = |u: f64| {
        let beta = 1.0 / (1.0 + (-u).exp());
        log_prior(&tree, &params(alpha, beta, 1.0)).unwrap()
            + priors.alpha.ln_pdf(alpha)
            + priors.beta.ln_pdf(beta)
    };
    let u = maximise(f, -8.0, 8.0);
    let want = 1.0 / (1.0 + (-u).exp());
    assert!((state.params().beta() - want).abs() < 1e-4);
}

#[test]
fn quick_scores_are_the_exact_log_joints_of_the_candidate_trees() {
    let p = params(0.5, 0.2, 1.3);
    let (x, tree) = sampled(10, 2, &p, 0.9, 13);
    let state = state_of(&x, &tree, p, 0.9);
    // A leaf and an internal subtree.
    let internal_sub = (tree.n_leaves()..tree.nodes().len())
        .find(|&v| v != tree.root())
        .unwrap();
    for v in [0, internal_sub] {
        let mut rest = state.clone();
        let det = rest.arena.detach(NodeId(v as u32)).unwrap();
        rest.refresh();
        let cands = rest.score_attachments(NodeId(v as u32));
        assert!(cands.len() > 5);
        for c in cands {
            let mut trial = rest.clone();
            trial.arena.attach(&det, c.at).unwrap();
            trial.refresh();
            let want = exact(&x, &trial.arena.to_tree().unwrap(), &p, 0.9);
            assert!(
                (c.score - want).abs() < 1e-8 * want.abs().max(1.0),
                "{:?}: {} vs {want}",
                c.at,
                c.score
            );
        }
    }
}

/// Four tight clusters of `per` points around the corners of a square in 2-D.
fn four_clusters(per: usize, seed: u64) -> Array2<f64> {
    let mut r = rng(seed);
    let centres = [[-3.0, -3.0], [3.0, -3.0], [-3.0, 3.0], [3.0, 3.0]];
    Array2::from_shape_fn((4 * per, 2), |(i, j)| {
        centres[i / per][j] + 0.05 * r.sample::<f64, _>(StandardNormal)
    })
}

/// Whether each cluster of `per` consecutive rows is the leaf set of a node.
fn recovers(tree: &Tree, per: usize) -> bool {
    (0..4).all(|k| {
        let want: Vec<usize> = (k * per..(k + 1) * per).collect();
        (0..tree.nodes().len()).any(|v| {
            let mut l = tree.leaves_of(v);
            l.sort_unstable();
            l == want
        })
    })
}

fn run(x: &Array2<f64>, p: PydtParams, sigma2: f64, config: &EmConfig, seed: u64) -> EmResult {
    greedy_em(
        x.view(),
        None,
        p,
        sigma2,
        config,
        seed,
        &|| false,
        &mut |_, _| {},
    )
    .unwrap()
}

#[test]
fn the_search_recovers_well_separated_clusters() {
    let x = four_clusters(6, 21);
    let config = EmConfig {
        max_iter: 3,
        ..EmConfig::default()
    };
    let r = run(&x, params(0.0, 0.0, 1.0), 1.0, &config, 3);
    assert!(recovers(&r.best[0].tree, 6));
    assert!(r.trace.windows(2).all(|w| w[1] >= w[0]), "{:?}", r.trace);
    // Every kept tree reports its exact log joint, best first, distinct.
    for (i, b) in r.best.iter().enumerate() {
        check_diffusion_tree(&b.tree).unwrap();
        let want = exact(&x, &b.tree, &b.params, b.sigma2);
        assert!((b.log_joint - want).abs() < 1e-8 * want.abs().max(1.0));
        if i > 0 {
            assert!(r.best[i - 1].objective >= b.objective);
        }
    }
    assert_eq!(r.best[0].objective, *r.trace.last().unwrap());
    assert!(r.best.len() <= 10 && r.best.len() > 1);
}

#[test]
fn learning_every_hyperparameter_never_lowers_the_objective() {
    let x = four_clusters(5, 22);
    let config = EmConfig {
        max_iter: 2,
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: true,
        },
        ..EmConfig::default()
    };
    let r = run(&x, params(0.5, 0.2, 1.0), 2.0, &config, 5);
    assert!(r.trace.windows(2).all(|w| w[1] >= w[0]), "{:?}", r.trace);
    assert!(recovers(&r.best[0].tree, 5));
    let b = &r.best[0];
    let pr = Hyperpriors::default();
    let want = objective(&x, &b.tree, &b.params, b.sigma2)
        + pr.alpha.ln_pdf(b.params.alpha())
        + pr.beta.ln_pdf(b.params.beta())
        + pr.c.ln_pdf(b.params.c())
        + pr.precision.ln_pdf(1.0 / b.sigma2);
    assert!((b.objective - want).abs() < 1e-8 * want.abs());
    // Under the model a point's variance per coordinate is σ² (C_ii = 1); the clusters'
    // centres at (±3, ±3) give the data a mean square of about 9 per coordinate.
    let mean_square = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    assert!(
        b.sigma2 > mean_square / 3.0 && b.sigma2 < 3.0 * mean_square,
        "sigma2 {} against a mean square of {mean_square}",
        b.sigma2
    );
}

#[test]
fn a_given_start_tree_and_a_seed_give_the_same_result() {
    let p = params(0.3, 0.1, 1.0);
    let (x, tree) = sampled(12, 2, &p, 1.0, 30);
    let config = EmConfig {
        max_iter: 2,
        ..EmConfig::default()
    };
    let a = run(&x, p, 1.0, &config, 9);
    let b = run(&x, p, 1.0, &config, 9);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.best[0].tree, b.best[0].tree);
    let from = greedy_em(
        x.view(),
        Some(&tree),
        p,
        1.0,
        &config,
        9,
        &|| false,
        &mut |_, _| {},
    )
    .unwrap();
    assert!(from.trace.windows(2).all(|w| w[1] >= w[0]));
    // EM alone on the start tree already beats the start.
    assert!(from.trace[0] >= objective(&x, &tree, &p, 1.0));
}

#[test]
fn duplicated_points_stay_representable() {
    let x = array![[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [-1.0, 0.5]];
    let r = run(&x, params(0.0, 0.0, 1.0), 1.0, &EmConfig::default(), 1);
    for b in &r.best {
        check_diffusion_tree(&b.tree).unwrap();
        assert!(b.log_joint.is_finite());
    }
    let one = array![[0.5, 0.5]];
    let r = run(&one, params(0.0, 0.0, 1.0), 1.0, &EmConfig::default(), 1);
    assert_eq!(r.best[0].tree.n_leaves(), 1);
}

#[test]
fn bad_inputs_are_named() {
    let x = four_clusters(2, 1);
    let p = params(0.0, 0.0, 1.0);
    let name = |r: Result<EmResult>| match r {
        Err(RoseTreeError::InvalidParameter { name, .. }) => name,
        other => panic!("expected a named parameter error, got {other:?}"),
    };
    let go = |x: ArrayView2<'_, f64>, sigma2: f64, config: &EmConfig| {
        greedy_em(x, None, p, sigma2, config, 0, &|| false, &mut |_, _| {})
    };
    let ok = EmConfig::default();
    assert_eq!(name(go(x.view(), 0.0, &ok)), "sigma2");
    assert_eq!(name(go(x.view(), f64::NAN, &ok)), "sigma2");
    let bad = |f: fn(&mut EmConfig)| {
        let mut c = EmConfig::default();
        f(&mut c);
        c
    };
    assert_eq!(name(go(x.view(), 1.0, &bad(|c| c.k_best = 0))), "k_best");
    assert_eq!(
        name(go(x.view(), 1.0, &bad(|c| c.n_candidates = 0))),
        "n_candidates"
    );
    assert_eq!(name(go(x.view(), 1.0, &bad(|c| c.tol = -1.0))), "tol");
    assert_eq!(
        name(go(x.view(), 1.0, &bad(|c| c.priors.c.rate = 0.0))),
        "c_prior"
    );
    assert_eq!(
        name(go(x.view(), 1.0, &bad(|c| c.learn.alpha = true))),
        "alpha"
    );
    let empty = Array2::<f64>::zeros((0, 2));
    assert_eq!(name(go(empty.view(), 1.0, &ok)), "n_samples");
    let flat = Array2::<f64>::zeros((3, 0));
    assert_eq!(name(go(flat.view(), 1.0, &ok)), "n_features");
    let mut nan = x.clone();
    nan[[1, 1]] = f64::NAN;
    assert!(matches!(
        go(nan.view(), 1.0, &ok),
        Err(RoseTreeError::InvalidData { .. })
    ));
    let wrong = crate::pydt::tests::tree(2, vec![vec![0, 1]], &[0.5]);
    assert!(matches!(
        greedy_em(
            x.view(),
            Some(&wrong),
            p,
            1.0,
            &ok,
            0,
            &|| false,
            &mut |_, _| {}
        ),
        Err(RoseTreeError::InvalidTree(_))
    ));
    assert!(matches!(
        greedy_em(x.view(), None, p, 1.0, &ok, 0, &|| true, &mut |_, _| {}),
        Err(RoseTreeError::Interrupted)
    ));
}

/// Binary data: `per` rows in each of two groups, each group's columns mostly 1 on its own
/// half and mostly 0 on the other (`flip` of the entries flipped), one entry in ten missing.
fn two_binary_groups(per: usize, d: usize, flip: f64, seed: u64) -> Array2<f64> {
    let mut r = rng(seed);
    Array2::from_shape_fn((2 * per, d), |(i, j)| {
        if r.random::<f64>() < 0.1 {
            return f64::NAN;
        }
        let on = (i < per) == (j < d / 2);
        if on != (r.random::<f64>() < flip) {
            1.0
        } else {
            0.0
        }
    })
}

fn probit_config() -> EmConfig {
    EmConfig {
        likelihood: Likelihood::Probit,
        ..EmConfig::default()
    }
}

#[test]
fn the_probit_e_step_is_the_covariance_form_conditional_given_the_sites() {
    // With EP's sites as Gaussian pseudo-observations of the leaves' latent values, the
    // locations of all nodes are jointly Gaussian: prior N(0, σ² K), K_uv = t(lca(u, v)), and
    // precision τ̃ at each leaf (none where an entry is missing). Posterior by dense algebra.
    let p = params(0.5, 0.2, 1.0);
    let sigma2 = 1.3;
    let (_, tree) = sampled(7, 3, &p, sigma2, 11);
    let x = two_binary_groups(4, 3, 0.2, 5)
        .slice(ndarray::s![..7, ..])
        .to_owned();
    let pseudo = pseudo_data(&x, sigma2);
    let mut state = state_of(&pseudo, &tree, p, sigma2).with_probit(&x);
    // Sites of every sign and scale, a missing one included.
    let mut r = rng(2);
    let ep = &mut state.probit.as_mut().unwrap().ep;
    for v in ep.site_means.iter_mut() {
        *v = r.sample::<f64, _>(StandardNormal);
    }
    for v in ep.site_precisions.iter_mut() {
        *v = r.random::<f64>() * 3.0;
    }
    ep.site_precisions[[2, 1]] = 0.0;
    let (mu, tau) = (ep.site_means.clone(), ep.site_precisions.clone());
    let e = state.estep();
    let m = tree.nodes().len();
    let k_inv = lca_covariance(&tree, sigma2).try_inverse().unwrap();
    // Per column: the posterior mean and covariance of every node given the sites.
    let posterior: Vec<(nalgebra::DVector<f64>, DMatrix<f64>)> = (0..3)
        .map(|j| {
            let mut prec = k_inv.clone();
            let mut h = nalgebra::DVector::zeros(m);
            for i in 0..tree.n_leaves() {
                prec[(i, i)] += tau[[i, j]];
                h[i] = tau[[i, j]] * mu[[i, j]];
            }
            let cov = prec.try_inverse().unwrap();
            (&cov * h, cov)
        })
        .collect();
    for (v, node) in tree.nodes().iter().enumerate() {
        for (j, (mean, _)) in posterior.iter().enumerate() {
            assert!(
                (e.mean[v * 3 + j] - mean[v]).abs() < 1e-9,
                "node {v}, column {j}"
            );
        }
        let want: f64 = posterior
            .iter()
            .map(|(mean, cov)| {
                let above = node.parent.map_or(0.0, |a| mean[a]);
                (mean[v] - above).powi(2) + difference_variance(cov, v, node.parent)
            })
            .sum();
        assert!(
            (e.stat[v] - want).abs() < 1e-9 * (1.0 + want),
            "node {v}: {} vs {want}",
            e.stat[v]
        );
    }
}

#[test]
fn probit_ep_on_a_partial_tree_is_ep_on_the_rows_in_it() {
    use crate::pydt::tests::tree;
    let full_tree = tree(
        6,
        vec![vec![0, 1], vec![2, 5], vec![3, 4, 7], vec![6, 8]],
        &[0.8, 0.9, 0.6, 0.3],
    );
    let x = two_binary_groups(3, 4, 0.1, 8);
    let mut arena =
        Arena::from_topology(&full_tree.topology(), full_tree.heights().unwrap(), |_| ()).unwrap();
    let config = EpConfig::default();
    let ep = |x: ArrayView2<'_, f64>, t: &Tree| {
        crate::pydt::probit::expectation_propagation(x, t, 1.0, &config).unwrap()
    };
    let on_arena = expectation_propagation_arena(x.view(), &arena, 1.0, &config, None);
    assert!((ep(x.view(), &full_tree).log_marginal - on_arena.log_marginal).abs() < 1e-9);
    // Without the last row's leaf (its parent spliced out): EP on the first five rows and
    // the tree that remains.
    let _det = arena.detach(NodeId(5)).unwrap();
    let partial = expectation_propagation_arena(x.view(), &arena, 1.0, &config, None);
    let rest = tree(
        5,
        vec![vec![0, 1], vec![2, 3, 4], vec![5, 6]],
        &[0.8, 0.6, 0.3],
    );
    let want = ep(x.slice(ndarray::s![..5, ..]), &rest);
    assert!((partial.log_marginal - want.log_marginal).abs() < 1e-9);
    assert!(partial.site_precisions.row(5).iter().all(|&v| v == 0.0));
}

#[test]
fn probit_em_separates_two_groups_and_reports_ep_log_joints() {
    let x = two_binary_groups(5, 24, 0.1, 3);
    let config = EmConfig {
        max_iter: 3,
        learn: Learn {
            c: true,
            ..Learn::default()
        },
        ..probit_config()
    };
    let r = run(&x, params(0.5, 0.2, 1.0), 1.0, &config, 1);
    assert!(r.trace.windows(2).all(|w| w[1] >= w[0]), "{:?}", r.trace);
    let best = &r.best[0].tree;
    let groups = (0..best.nodes().len()).any(|v| {
        let mut l = best.leaves_of(v);
        l.sort_unstable();
        l == (0..5).collect::<Vec<_>>() || l == (5..10).collect::<Vec<_>>()
    });
    assert!(groups, "{best:?}");
    for b in &r.best {
        let ep = crate::pydt::probit::expectation_propagation(
            x.view(),
            &b.tree,
            1.0,
            &EpConfig::default(),
        )
        .unwrap();
        let want = log_prior(&b.tree, &b.params).unwrap() + ep.log_marginal;
        assert!((b.log_joint - want).abs() < 1e-8 * want.abs().max(1.0));
        assert_eq!(b.sigma2, 1.0);
    }
    // EM's fit beats the starting tree's under the same objective.
    assert!(r.best[0].objective > r.trace[0] || r.trace.len() == 1);
}

#[test]
fn probit_em_names_bad_inputs() {
    let x = two_binary_groups(3, 4, 0.1, 8);
    let p = params(0.5, 0.2, 1.0);
    let go = |x: &Array2<f64>, config: &EmConfig| {
        greedy_em(x.view(), None, p, 1.0, config, 0, &|| false, &mut |_, _| {})
    };
    let learn_sigma2 = EmConfig {
        learn: Learn {
            sigma2: true,
            ..Learn::default()
        },
        ..probit_config()
    };
    assert!(matches!(
        go(&x, &learn_sigma2),
        Err(RoseTreeError::InvalidParameter { ref name, .. }) if name == "sigma2"
    ));
    let mut bad = x.clone();
    bad[[2, 3]] = 0.5;
    assert!(matches!(
        go(&bad, &probit_config()),
        Err(RoseTreeError::InvalidData {
            row: 2,
            column: Some(3),
            ..
        })
    ));
}

#[test]
fn the_ward_order_keeps_each_cluster_together() {
    let x = four_clusters(5, 9);
    // Rows shuffled so that the clusters are not already consecutive.
    let perm = [
        13, 2, 7, 19, 0, 11, 5, 16, 9, 3, 18, 6, 14, 1, 10, 17, 4, 12, 8, 15,
    ];
    let shuffled = Array2::from_shape_fn((20, 2), |(i, j)| x[[perm[i], j]]);
    let order = Ward::new(&shuffled).order();
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..20).collect::<Vec<_>>());
    let cluster: Vec<usize> = order.iter().map(|&i| perm[i] / 5).collect();
    for block in cluster.chunks(5) {
        assert!(block.iter().all(|&k| k == block[0]), "{cluster:?}");
    }
    // The order does not depend on the scale, up to the largest finite one.
    assert_eq!(Ward::new(&(&shuffled * 1e300)).order(), order);
    assert_eq!(Ward::new(&(&shuffled * 1e-300)).order(), order);
}

#[test]
fn the_pydt_joins_four_equidistant_clusters_at_one_branch_point() {
    // Four clusters at the corners of a square, learning α, β, c and σ²: the PYDT's best
    // tree has the four clusters as the children of its root (the paper's Figure 5, with
    // its spread: centres at (±1, ±1), variance 1/8).
    let mut r = rng(6);
    let per = 20;
    let x = Array2::from_shape_fn((4 * per, 2), |(i, j)| {
        let centre = if (i / per) >> j & 1 == 1 { 1.0 } else { -1.0 };
        centre + (0.125f64).sqrt() * r.sample::<f64, _>(StandardNormal)
    });
    let config = EmConfig {
        max_iter: 5,
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: true,
        },
        ..EmConfig::default()
    };
    let r = run(&x, params(0.5, 0.2, 1.0), 1.0, &config, 0);
    let tree = &r.best[0].tree;
    // The clusters are the quadrants (a point may stray across the axes from its centre).
    let quadrant = |i: usize| usize::from(x[[i, 0]] > 0.0) + 2 * usize::from(x[[i, 1]] > 0.0);
    let mut quadrants = Vec::new();
    let mut strays = 0;
    for &k in &tree.node(tree.root()).children {
        let leaves = tree.leaves_of(k);
        if leaves.len() == 1 {
            strays += 1;
            continue;
        }
        let q = quadrant(leaves[0]);
        assert!(leaves.iter().all(|&i| quadrant(i) == q), "{leaves:?}");
        quadrants.push(q);
    }
    quadrants.sort_unstable();
    assert_eq!(quadrants, vec![0, 1, 2, 3]);
    assert!(strays <= 2);
    assert!(r.best[0].params.beta() > 0.2);
}

/// The internal nodes of a state in pre-order.
fn internal_nodes(state: &State<'_>) -> Vec<NodeId> {
    state
        .arena
        .pre_order(state.arena.root())
        .unwrap()
        .filter(|&v| !state.arena.node(v).unwrap().is_leaf())
        .collect()
}

#[test]
fn the_pooled_prior_summary_is_the_sum_over_branch_points() {
    // Multi-way branch points (β > 0) and every term of the structure factor.
    for (seed, p) in [(3, params(0.3, 0.4, 1.5)), (4, params(1.0, 0.1, 0.7))] {
        let (x, tree) = sampled(40, 2, &p, 1.0, seed);
        let state = state_of(&x, &tree, p, 1.0);
        let nodes = state.branch_points();
        assert!(nodes.iter().any(|(c, _)| c.len() > 2) || seed == 4);
        let summary = PriorSummary::new(&nodes);
        for q in [
            p,
            params(2.0, 0.05, 1.0),
            params(0.01, 0.9, 3.0),
            params(-0.5, 0.4, 1.0),
        ] {
            let h = q.harmonic(x.nrows() - 1);
            let want: f64 = nodes
                .iter()
                .map(|(counts, l)| {
                    q.ln_structure(counts)
                        + q.c().ln()
                        + (q.c() * harmonic_gap(&h, counts) - 1.0) * l
                })
                .sum();
            let got = summary.ln_prior(&q);
            assert!(
                (got - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{q:?}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn the_local_time_gradient_is_the_finite_difference_of_its_objective() {
    for (seed, p) in [(5, params(0.0, 0.0, 1.0)), (6, params(0.5, 0.3, 2.0))] {
        let (x, tree) = sampled(14, 3, &p, 0.7, seed);
        let state = state_of(&x, &tree, p, 0.7);
        let e = state.estep();
        // The path above one deep branch point.
        let deep = internal_nodes(&state)
            .into_iter()
            .max_by_key(|&v| state.arena.ancestors(v).unwrap().count())
            .unwrap();
        let free = state.free_nodes(&[deep]);
        assert!(free.len() >= 2);
        let (problem, s0) = state.local_problem(&e, &free).unwrap();
        let mut r = rng(seed);
        let s: Vec<f64> = s0
            .iter()
            .map(|v| v + 0.5 * r.sample::<f64, _>(StandardNormal))
            .collect();
        assert_gradient(|s, g| problem.eval(s, g), &s);
    }
}

#[test]
fn the_local_m_step_is_at_most_the_full_one_and_equal_when_every_time_is_free() {
    let p = params(0.4, 0.2, 1.2);
    for seed in [7, 8, 9] {
        let (x, tree) = sampled(16, 4, &p, 0.6, seed);
        let state = state_of(&x, &tree, p, 0.6);
        let e = state.estep();
        let (internal, problem) = state.time_problem(&e);
        // The full M-step's Q of a state's times (same structure, same ids).
        let q = |s: &State<'_>| problem.eval(&s.times_to_s(&internal), None);
        let q0 = q(&state);
        let mut full = state.clone();
        full.mstep_times(&e).unwrap();
        let deep = *internal.last().unwrap();
        let mut local = state.clone();
        local.local_mstep(&e, &state.free_nodes(&[deep])).unwrap();
        let (ql, qf) = (q(&local), q(&full));
        assert!(ql >= q0 - 1e-9, "local {ql} below the start {q0}");
        assert!(ql <= qf + 1e-6, "local {ql} above the full M-step {qf}");
        assert!(local.objective() >= state.objective());
        // Every internal node free: the same maximisation.
        let mut all = state.clone();
        let every = state.free_nodes(&internal);
        assert_eq!(every.len(), internal.len());
        all.local_mstep(&e, &every).unwrap();
        let qa = q(&all);
        assert!(
            (qa - qf).abs() < 1e-6 * (1.0 + qf.abs()),
            "all free {qa} vs full {qf}"
        );
        // The reported log joint stays exact.
        let t = local.arena.to_tree().unwrap();
        assert!((local.log_joint() - exact(&x, &t, &p, 0.6)).abs() < 1e-8);
        assert!((local.objective() - objective(&x, &t, &p, 0.6)).abs() < 1e-8);
    }
}

#[test]
fn local_em_after_a_move_never_lowers_the_objective_and_full_em_only_raises_it() {
    let p = params(0.3, 0.1, 1.0);
    let (x, tree) = sampled(20, 3, &p, 1.0, 31);
    let mut state = state_of(&x, &tree, p, 1.0);
    state.em(50, 1e-9).unwrap();
    let leaf = NodeId(3);
    let mut rest = state.clone();
    let det = rest.arena.detach(leaf).unwrap();
    rest.refresh();
    let cands = best_candidates(rest.score_attachments(leaf), 4);
    for cand in cands {
        let mut trial = rest.clone();
        let parent = trial.arena.attach(&det, cand.at).unwrap();
        trial.refresh();
        let mut f = trial.objective();
        for _ in 0..5 {
            trial.local_em(&[parent], 1, 0.0).unwrap();
            assert!(trial.objective() >= f);
            f = trial.objective();
        }
        trial.em(10, 1e-9).unwrap();
        assert!(trial.objective() >= f);
        let t = trial.arena.to_tree().unwrap();
        assert!((trial.log_joint() - exact(&x, &t, &p, 1.0)).abs() < 1e-8);
    }
}

#[test]
fn the_search_is_a_function_of_the_seed_and_its_passes_never_lower_the_objective() {
    let p = params(0.5, 0.2, 1.0);
    let (x, _) = sampled(30, 3, &p, 1.0, 40);
    let config = EmConfig {
        max_iter: 3,
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: true,
        },
        ..EmConfig::default()
    };
    let a = run(&x, p, 1.0, &config, 11);
    let b = run(&x, p, 1.0, &config, 11);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.best[0].tree, b.best[0].tree);
    assert_eq!(a.best[0].log_joint, b.best[0].log_joint);
    assert!(a.trace.windows(2).all(|w| w[1] >= w[0]), "{:?}", a.trace);
    let best = &a.best[0];
    let want = exact(&x, &best.tree, &best.params, best.sigma2);
    assert!((best.log_joint - want).abs() < 1e-8 * want.abs().max(1.0));
}

/// `eval`'s gradient at `s` against central finite differences.
fn assert_gradient(eval: impl Fn(&[f64], Option<&mut [f64]>) -> f64, s: &[f64]) {
    let mut g = vec![0.0; s.len()];
    eval(s, Some(&mut g));
    for i in 0..s.len() {
        let h = 1e-5;
        let (mut up, mut dn) = (s.to_vec(), s.to_vec());
        up[i] += h;
        dn[i] -= h;
        let fd = (eval(&up, None) - eval(&dn, None)) / (2.0 * h);
        assert!(
            (fd - g[i]).abs() < 1e-6 * (1.0 + g[i].abs()),
            "coordinate {i}: gradient {} vs finite difference {fd}",
            g[i]
        );
    }
}
