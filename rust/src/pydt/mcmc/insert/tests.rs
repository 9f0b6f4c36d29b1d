//! Insertion against independent computations: the log joint after every step against the
//! closed-form prior and the covariance form of the likelihood, the attachment law of one
//! new row against the posterior by quadrature, and the restricted sweeps against the exact
//! posterior of three points.

use std::collections::BTreeMap;

use ndarray::{Array2, array, concatenate, s};

use super::*;
use crate::pydt::mcmc::tests::{assert_mean, assert_three_point_posterior, max_z};
use crate::pydt::mcmc::{Learn, SubtreeMove};
use crate::pydt::tests::{covariance_log_likelihood, params, rng, tanh_sinh, tree};
use crate::pydt::{PydtParams, check_diffusion_tree, log_prior, sample};
use crate::tree::Tree;
use crate::tree::arena::Attachment;

/// `ln p(X, T, t)` from scratch: the closed-form prior and the likelihood by its covariance
/// form (a Cholesky factorisation, no messages).
fn fresh_log_joint(x: &Array2<f64>, tree: &Tree, p: &PydtParams, sigma2: f64) -> f64 {
    log_prior(tree, p).unwrap() + covariance_log_likelihood(x, tree, sigma2)
}

fn assert_close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() < 1e-8 * (1.0 + b.abs()), "{what}: {a} vs {b}");
}

fn learn_all() -> McmcConfig {
    McmcConfig {
        n_iter: 3,
        burn_in: 0,
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: true,
        },
        ..McmcConfig::default()
    }
}

#[test]
fn every_insertion_and_restricted_sweep_keeps_the_invariants_and_the_log_joint() {
    for seed in 0..6u64 {
        let p = params(0.5, 0.2, 1.0 + 0.3 * seed as f64);
        let (x, start) = sample(9, 3, &p, 0.7, seed).unwrap();
        let (more, _) = sample(6, 3, &p, 0.7, seed + 100).unwrap();
        let mut chain = Chain::new(x.view(), &start, p, 0.7).unwrap();
        let mut r = rng(seed);
        let mut leaves = Vec::new();
        let mut all = x.clone();
        for row in more.rows() {
            let leaf = chain.insert_row(row, &mut r).unwrap();
            assert_eq!(leaf.index(), all.nrows());
            all.push_row(row).unwrap();
            leaves.push(leaf);
            chain.arena.check_invariants().unwrap();
            let t = chain.tree().unwrap();
            check_diffusion_tree(&t).unwrap();
            assert_close(
                chain.log_joint(),
                fresh_log_joint(&all, &t, &p, 0.7),
                "after an insertion",
            );
            // Leaves keep their rows: leaf i's message is row i.
            assert_eq!(chain.x, all);
        }
        for moves in [SubtreeMove::Auto, SubtreeMove::Prior] {
            let config = McmcConfig {
                subtree_move: moves,
                ..learn_all()
            };
            let count = chain.holding(&leaves).len();
            assert!(count >= leaves.len());
            for _ in 0..3 {
                let (accepted, proposed) = chain
                    .sweep_over(&config, Pick::Holding(&leaves), count, &mut r, &|| false)
                    .unwrap();
                assert!(accepted <= proposed && proposed == count);
                chain.arena.check_invariants().unwrap();
                let t = chain.tree().unwrap();
                check_diffusion_tree(&t).unwrap();
                assert_close(
                    chain.log_joint(),
                    fresh_log_joint(&all, &t, &chain.params(), chain.sigma2()),
                    "after a restricted sweep",
                );
            }
        }
    }
}

#[test]
fn partial_fit_is_reproducible_and_keeps_every_row() {
    let p = params(0.5, 0.2, 1.0);
    let (x, t) = sample(12, 2, &p, 1.0, 3).unwrap();
    let (old, new) = (x.slice(s![..8, ..]), x.slice(s![8.., ..]));
    let config = learn_all();
    let fit = super::super::run(
        old,
        Start {
            tree: None,
            params: p,
            sigma2: 1.0,
        },
        &config,
        1,
        &|| false,
        &mut |_, _| {},
    )
    .unwrap();
    let start = Start {
        tree: Some(&fit.last.tree),
        params: p,
        sigma2: 1.0,
    };
    let grow =
        |seed: u64| partial_fit(old, new, start, &config, seed, &|| false, &mut |_, _| {}).unwrap();
    let (a, b, c) = (grow(7), grow(7), grow(8));
    assert_eq!(a.last.tree.to_newick(None), b.last.tree.to_newick(None));
    assert_eq!(a.last.log_joint.to_bits(), b.last.log_joint.to_bits());
    assert_ne!(a.last.tree.to_newick(None), c.last.tree.to_newick(None));
    assert_eq!(a.trace.len(), 3);
    assert_eq!(a.last.tree.n_leaves(), 12);
    let all = concatenate![ndarray::Axis(0), old, new];
    assert_close(
        a.last.log_joint,
        fresh_log_joint(&all, &a.last.tree, &a.last.params, a.last.sigma2),
        "partial_fit",
    );
    let _ = t;
    // No sweeps: the rows are attached and nothing else moves.
    let none = McmcConfig {
        n_iter: 0,
        ..config
    };
    let only = partial_fit(old, new, start, &none, 7, &|| false, &mut |_, _| {}).unwrap();
    assert!(only.trace.is_empty() && only.samples.is_empty());
    assert_eq!(only.last.params, p);
    // Bad input is named.
    let err = |r: Result<McmcResult>| r.unwrap_err().to_string();
    let wide = Array2::zeros((1, 3));
    assert!(
        err(partial_fit(
            old,
            wide.view(),
            start,
            &none,
            0,
            &|| false,
            &mut |_, _| {}
        ))
        .contains("x_new")
    );
    let nan = array![[0.0, f64::NAN]];
    let msg = err(partial_fit(
        old,
        nan.view(),
        start,
        &none,
        0,
        &|| false,
        &mut |_, _| {},
    ));
    assert!(msg.contains("row 0, column 1"), "{msg}");
    let no_tree = Start {
        tree: None,
        ..start
    };
    assert!(
        err(partial_fit(
            old,
            new,
            no_tree,
            &none,
            0,
            &|| false,
            &mut |_, _| {}
        ))
        .contains("tree")
    );
    let stop = partial_fit(old, new, start, &config, 0, &|| true, &mut |_, _| {});
    assert!(matches!(stop, Err(RoseTreeError::Interrupted)));
}

#[test]
fn a_row_equal_to_another_is_placed() {
    let p = params(0.5, 0.2, 1.0);
    let (x, t) = sample(10, 8, &p, 0.5, 4).unwrap();
    let mut chain = Chain::new(x.view(), &t, p, 0.5).unwrap();
    let mut r = rng(0);
    for _ in 0..3 {
        chain.insert_row(x.row(3), &mut r).unwrap();
        chain.arena.check_invariants().unwrap();
    }
    check_diffusion_tree(&chain.tree().unwrap()).unwrap();
}

#[test]
fn probit_rows_are_inserted_with_their_latent_values() {
    let x = array![[1.0, 0.0], [1.0, f64::NAN], [0.0, 1.0]];
    let t = tree(3, vec![vec![0, 1], vec![3, 2]], &[0.6, 0.2]);
    let config = McmcConfig {
        n_iter: 2,
        burn_in: 0,
        likelihood: Likelihood::Probit,
        ..McmcConfig::default()
    };
    let start = Start {
        tree: Some(&t),
        params: params(0.5, 0.2, 1.0),
        sigma2: 1.0,
    };
    let new = array![[1.0, 0.0], [f64::NAN, 1.0]];
    let fit = partial_fit(
        x.view(),
        new.view(),
        start,
        &config,
        0,
        &|| false,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(fit.last.tree.n_leaves(), 5);
    let bad = array![[0.5, 1.0]];
    let msg = partial_fit(
        x.view(),
        bad.view(),
        start,
        &config,
        0,
        &|| false,
        &mut |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("row 0, column 0"), "{msg}");
}

/// Where a new leaf joins a tree: a key per branch (`"b<node>"`) or branch point
/// (`"n<node>"`), in the ids of the tree before the insertion.
fn key(at: Attachment) -> String {
    match at {
        Attachment::Branch { below, .. } => format!("b{}", below.0),
        Attachment::Node(b) => format!("n{}", b.0),
    }
}

#[test]
fn one_new_row_joins_where_the_posterior_puts_it() {
    // Two rows under a root at 0.35, a third row near the first: the reference is
    // p(X, T') over every position of the third leaf, by quadrature over the join time on
    // each branch, from the closed-form prior and the covariance likelihood of the grown
    // tree, never from the messages or the move's formulas.
    let x = array![[0.2, -0.4], [1.4, 0.9]];
    let row = array![0.35, -0.1];
    let all = concatenate![
        ndarray::Axis(0),
        x,
        row.clone().insert_axis(ndarray::Axis(0))
    ];
    let (p, sigma2) = (params(0.8, 0.3, 1.4), 0.5);
    let t_root = 0.35;
    let start = tree(2, vec![vec![0, 1]], &[t_root]);
    // In the arena of two leaves the root is node 2; the new leaf takes id 2 and the root
    // becomes 3. Grown trees on leaves 0, 1, 2:
    let joint = |internal: Vec<Vec<usize>>, times: &[f64]| {
        let t = tree(3, internal, times);
        fresh_log_joint(&all, &t, &p, sigma2).exp()
    };
    let step = 1.0 / 64.0;
    let mut mass = BTreeMap::new();
    let mut mean_time = BTreeMap::new();
    // On the branch above leaf 0 (or 1) at s ∈ (t_root, 1).
    for leaf in [0usize, 1] {
        let other = 1 - leaf;
        let f = |s: f64| joint(vec![vec![leaf, 2], vec![3, other]], &[s, t_root]);
        let m = tanh_sinh(t_root, 1.0, step, &mut |s| f(s));
        let first = tanh_sinh(t_root, 1.0, step, &mut |s| s * f(s));
        mass.insert(format!("b{leaf}"), m);
        mean_time.insert(format!("b{leaf}"), first / m);
    }
    // Above the root at s ∈ (0, t_root): a new root over the old one and the new leaf.
    let f = |s: f64| joint(vec![vec![0, 1], vec![3, 2]], &[t_root, s]);
    let m = tanh_sinh(0.0, t_root, step, &mut |s| f(s));
    mass.insert("b3".into(), m);
    mean_time.insert(
        "b3".into(),
        tanh_sinh(0.0, t_root, step, &mut |s| s * f(s)) / m,
    );
    // At the root: one branch point of three.
    mass.insert("n3".into(), joint(vec![vec![0, 1, 2]], &[t_root]));
    let total: f64 = mass.values().sum();
    let exact: BTreeMap<String, f64> = mass.iter().map(|(k, v)| (k.clone(), v / total)).collect();
    assert!(exact.values().all(|&q| q > 0.01), "{exact:?}");

    let base = Chain::new(x.view(), &start, p, sigma2).unwrap();
    let mut r = rng(11);
    let mut draws = Vec::new();
    let mut times: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for _ in 0..30_000 {
        let mut chain = base.clone();
        let leaf = chain.insert_row(row.view(), &mut r).unwrap();
        let parent = chain.arena.parent(leaf).unwrap().unwrap();
        let siblings: Vec<NodeId> = chain
            .arena
            .children(parent)
            .unwrap()
            .iter()
            .copied()
            .filter(|&k| k != leaf)
            .collect();
        let at = if siblings.len() == 1 {
            Attachment::Branch {
                below: siblings[0],
                time: chain.arena.time(parent).unwrap(),
            }
        } else {
            Attachment::Node(parent)
        };
        let k = key(at);
        if let Attachment::Branch { time, .. } = at {
            times.entry(k.clone()).or_default().push(time);
        }
        draws.push(k);
    }
    let z = max_z(&draws, &exact, 30);
    assert!(z < 4.5, "max z = {z}: exact {exact:?}");
    for (k, ts) in &times {
        if ts.len() > 3000 {
            assert_mean(ts, mean_time[k], &format!("join time on {k}"));
        }
    }
}

#[test]
fn restricted_sweeps_over_one_new_row_keep_the_posterior_of_three_points() {
    // Only leaf 2 and its ancestors move: the Metropolis–Hastings ratio must count the
    // nodes holding it before and after each move (1 or 2 here), not all nodes, and the
    // number of moves per sweep must not follow that count (fewer moves from the states
    // with fewer such nodes would favour them).
    let x = array![[0.1, -0.3], [0.4, 0.2], [-1.2, 0.9]];
    let new = [NodeId(2)];
    for kind in [SubtreeMove::Gibbs, SubtreeMove::Prior] {
        let config = McmcConfig {
            subtree_move: kind,
            ..McmcConfig::default()
        };
        assert_three_point_posterior(
            &x,
            (params(0.5, 0.2, 1.5), 0.6),
            (60_000, 9),
            &format!("{kind:?}"),
            &mut |chain, r| {
                chain
                    .sweep_over(&config, Pick::Holding(&new), 2, r, &|| false)
                    .unwrap();
            },
        );
    }
}
