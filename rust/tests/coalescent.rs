//! Kingman's coalescent through the public API: every search reports the `ln p(x, π)` that a
//! fresh evaluation of its tree gives, Greedy-Rate1 finds well-separated groups, and the
//! two parts of `ln p(x, π)` equal closed forms computed here independently: the prior
//! Kingman's waiting-time density, the likelihood a multivariate normal density whose
//! covariance is read off the tree.

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, ArrayView1, array};
use rosetree::coalescent::{self, CoalescentParams, Inference};
use rosetree::models::messages::{BrownianDiffusion, Root};
use rosetree::tree::{Topology, Tree};

/// Five points around each of `centres`, row `5g + k` the `k`-th of group `g`.
fn groups(centres: &[[f64; 2]]) -> Array2<f64> {
    let jitter = [
        [0.1, -0.2],
        [-0.15, 0.05],
        [0.2, 0.1],
        [0.0, -0.1],
        [-0.05, 0.2],
    ];
    Array2::from_shape_fn((5 * centres.len(), 2), |(i, j)| {
        centres[i / 5][j] + jitter[i % 5][j]
    })
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

/// Leaves 0..4 at time 0; (0, 1) merge at −0.2, (2, 3) at −0.7, the two pairs at −1.5.
fn four_leaves() -> Tree {
    let topology = Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap();
    Tree::new(&topology, Some(vec![0.0, 0.0, 0.0, 0.0, -0.2, -0.7, -1.5])).unwrap()
}

#[test]
fn every_search_reports_the_log_joint_of_the_tree_it_returns() {
    let x = groups(&[[0.0, 0.0], [3.0, 1.0], [-2.0, 4.0]]);
    let models = [
        BrownianDiffusion::isotropic(1.0, 2).unwrap(),
        BrownianDiffusion::isotropic(0.3, 2)
            .unwrap()
            .with_root(Root::Gaussian { s0: 2.0 })
            .unwrap(),
        BrownianDiffusion::diagonal(&[0.5, 2.0], 2)
            .unwrap()
            .with_noise(0.05)
            .unwrap(),
    ];
    for model in &models {
        for inference in [
            Inference::GreedyRate1,
            Inference::GreedyMaxProb,
            Inference::GreedyMinDuration,
        ] {
            let params = CoalescentParams::new()
                .inference(inference)
                .check()
                .unwrap();
            let fit = coalescent::fit(model, &params, x.view()).unwrap();
            assert_eq!(fit.tree.n_leaves(), 15);
            coalescent::check_timed_tree(&fit.tree).unwrap();
            let again = coalescent::log_joint(model, x.view(), &fit.tree).unwrap();
            assert!(fit.log_joint.is_finite());
            assert!(
                (fit.log_joint - again).abs() <= 1e-9 * again.abs().max(1.0),
                "{inference:?}: fit {} against {again}",
                fit.log_joint
            );
        }
    }
}

#[test]
fn greedy_rate1_recovers_well_separated_groups() {
    let x = groups(&[[0.0, 0.0], [20.0, 0.0], [0.0, 20.0]]);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let params = CoalescentParams::new().check().unwrap();
    let fit = coalescent::fit(&model, &params, x.view()).unwrap();
    let tree = &fit.tree;
    for g in 0..3 {
        let group: Vec<usize> = (5 * g..5 * g + 5).collect();
        let found = (0..tree.nodes().len()).any(|v| {
            let mut leaves = tree.leaves_of(v);
            leaves.sort_unstable();
            leaves == group
        });
        assert!(
            found,
            "group {g} is not a cluster of {}",
            tree.to_newick(None)
        );
    }
    // Every merge within a group comes before (is more recent than) any across groups.
    let h = tree.heights().unwrap();
    let (mut within, mut across) = (f64::NEG_INFINITY, f64::INFINITY);
    for (v, &t) in h.iter().enumerate().skip(tree.n_leaves()) {
        let leaves = tree.leaves_of(v);
        if leaves.iter().all(|&i| i / 5 == leaves[0] / 5) {
            within = within.max(-t);
        } else {
            across = across.min(-t);
        }
    }
    assert!(within < across, "within {within}, across {across}");
}

#[test]
fn the_prior_is_kingmans_waiting_time_density() {
    // Intervals with 4, 3 and 2 lineages of lengths 0.2, 0.5 and 0.8 and rates C(m, 2) = 6,
    // 3, 1: ln p(π) = −(6·0.2 + 3·0.5 + 1·0.8) = −3.5.
    let got = coalescent::log_prior(&four_leaves()).unwrap();
    assert!((got + 3.5).abs() < 1e-14, "{got}");
    // The same tree with the two later merges swapped in time: 6·0.2 + 3·(0.6 − 0.2) + 1·0.9.
    let topology = Topology::new(4, vec![vec![0, 1], vec![2, 3], vec![4, 5]]).unwrap();
    let tree = Tree::new(&topology, Some(vec![0.0, 0.0, 0.0, 0.0, -0.6, -0.2, -1.5])).unwrap();
    let got = coalescent::log_prior(&tree).unwrap();
    assert!((got + (1.2 + 1.2 + 0.9)).abs() < 1e-14, "{got}");
}

#[test]
fn the_likelihood_is_the_normal_density_with_the_trees_covariance() {
    // Brownian motion with rate λ per unit time from y_root ~ N(0, s0 λ) at the root's time
    // t_r: leaves i ≠ j covary by λ (s0 + t_lca − t_r), and each has variance λ (s0 − t_r).
    let (lambda, s0) = (0.7, 1.3);
    let tree = four_leaves();
    let x = array![[0.3, -1.0], [0.5, -0.6], [-1.2, 0.4], [-0.9, 1.1]];
    let model = BrownianDiffusion::isotropic(lambda, 2)
        .unwrap()
        .with_root(Root::Gaussian { s0 })
        .unwrap();
    let lca = [
        [0.0, -0.2, -1.5, -1.5],
        [-0.2, 0.0, -1.5, -1.5],
        [-1.5, -1.5, 0.0, -0.7],
        [-1.5, -1.5, -0.7, 0.0],
    ];
    let sigma = DMatrix::from_fn(4, 4, |i, j| lambda * (s0 + lca[i][j] + 1.5));
    let want: f64 = x.columns().into_iter().map(|c| log_normal(c, &sigma)).sum();
    let joint = coalescent::log_joint(&model, x.view(), &tree).unwrap();
    let got = joint - coalescent::log_prior(&tree).unwrap();
    assert!((got - want).abs() < 1e-10, "{got} against {want}");
}

#[test]
fn malformed_trees_are_refused_by_name() {
    let topology = Topology::new(3, vec![vec![0, 1, 2]]).unwrap();
    let star = Tree::new(&topology, Some(vec![0.0, 0.0, 0.0, -1.0])).unwrap();
    let err = coalescent::log_prior(&star).unwrap_err().to_string();
    assert!(err.contains("binary"), "{err}");
    let topology = Topology::new(2, vec![vec![0, 1]]).unwrap();
    let future = Tree::new(&topology, Some(vec![0.0, 0.0, 0.5])).unwrap();
    let err = coalescent::log_prior(&future).unwrap_err().to_string();
    assert!(err.contains("≤ 0"), "{err}");
}
