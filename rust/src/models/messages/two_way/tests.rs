//! Two-way passing against the covariance form: Brownian motion with a Gaussian root prior
//! `N(0, s0 λ)` on coalescent-style trees with two- and three-way merges puts every node's
//! value in a joint Gaussian with `Cov(x_u, x_v) = λ (s0 + h_{lca(u, v)} − h_root)`; the
//! outside, down and posterior messages are conditionals of it, computed by dense Cholesky
//! factors.

use nalgebra::{DMatrix, DVector};
use ndarray::Array2;

use super::*;
use crate::models::messages::tests::{normal, random_tree, rng};
use crate::models::messages::{BrownianDiffusion, GaussianMessage, Root};
use crate::test_util::lca_covariance;

/// `λ (s0 + h_lca − h_root)` over every node.
fn covariance(tree: &Tree, lambda: f64, s0: f64) -> DMatrix<f64> {
    let h_root = tree.heights().unwrap()[tree.root()];
    lca_covariance(tree, 1.0).map(|h| lambda * (s0 + h - h_root))
}

/// Mean and variance of node `target` given the values `x` at the nodes `obs`.
fn conditional(c: &DMatrix<f64>, obs: &[usize], x: &[f64], target: usize) -> (f64, f64) {
    if obs.is_empty() {
        return (0.0, c[(target, target)]);
    }
    let k = DMatrix::from_fn(obs.len(), obs.len(), |i, j| c[(obs[i], obs[j])]);
    let chol = k.cholesky().unwrap();
    let cross = DVector::from_iterator(obs.len(), obs.iter().map(|&o| c[(target, o)]));
    let mean = cross.dot(&chol.solve(&DVector::from_column_slice(x)));
    (mean, c[(target, target)] - cross.dot(&chol.solve(&cross)))
}

#[test]
fn outside_down_and_posterior_messages_are_conditionals() {
    let mut r = rng(17);
    let (lambda, s0) = (0.8, 1.5);
    let model = BrownianDiffusion::isotropic(lambda, 1)
        .unwrap()
        .with_root(Root::Gaussian { s0 })
        .unwrap();
    for _ in 0..4 {
        let tree = random_tree(7, 0.5, &mut r);
        assert!(
            tree.nodes().iter().any(|n| n.children.len() == 3),
            "a three-way merge is exercised"
        );
        let n = tree.n_leaves();
        let h = tree.heights().unwrap().to_vec();
        let x = Array2::from_shape_fn((n, 1), |_| normal(&mut r));
        let leaves = model
            .leaf_messages(x.view())
            .unwrap()
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        let two = TwoWay::new(&model, &tree, leaves, model.root_message(), |c, p| {
            h[c] - h[p]
        });
        let cov = covariance(&tree, lambda, s0);
        let moments = |msg: &GaussianMessage| (model.mean(msg)[0], model.variances(msg)[0]);
        for v in 0..tree.nodes().len() {
            let inside = tree.leaves_of(v);
            let outside: Vec<usize> = (0..n).filter(|i| !inside.contains(i)).collect();
            let xo: Vec<f64> = outside.iter().map(|&i| x[[i, 0]]).collect();
            // D_v: the law of x_v given the data outside v's subtree.
            let (mean, var) = moments(&two.down[v]);
            let (want_m, want_v) = conditional(&cov, &outside, &xo, v);
            assert!(
                (mean - want_m).abs() < 1e-10 && (var - want_v).abs() < 1e-10,
                "D_{v}"
            );
            // O_v: the same at v's parent (the root: its prior).
            let (mean, var) = moments(&two.out[v]);
            let (want_m, want_v) = match tree.node(v).parent {
                Some(p) => conditional(&cov, &outside, &xo, p),
                None => (0.0, lambda * s0),
            };
            assert!(
                (mean - want_m).abs() < 1e-10 && (var - want_v).abs() < 1e-10,
                "O_{v}"
            );
            // The posterior at v given all the data (a leaf: its own value).
            let all: Vec<usize> = (0..n).collect();
            let xa: Vec<f64> = all.iter().map(|&i| x[[i, 0]]).collect();
            let (mean, var) = moments(&two.posterior_at_node(&model, v));
            if v < n {
                assert!((mean - x[[v, 0]]).abs() < 1e-14 && var == 0.0);
            } else {
                let (want_m, want_v) = conditional(&cov, &all, &xa, v);
                assert!((mean - want_m).abs() < 1e-10 && (var - want_v).abs() < 1e-10);
            }
        }
    }
}
