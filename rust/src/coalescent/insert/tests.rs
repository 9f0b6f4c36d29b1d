//! Growing a coalescent tree against independent computations: the grown tree's structure
//! from its ancestor sets, its `ln p(x, π)` in the covariance form of Brownian motion with
//! Kingman's prior as coexistence times, the chosen branch against the join density
//! integrated by a dense trapezoid rule, and the chosen time against a dense grid.

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, Axis, concatenate};

use super::*;
use crate::coalescent::{CoalescentParams, fit, log_joint};
use crate::models::messages::tests::{normal, random_tree, rng, shared_lengths};
use crate::models::messages::{BrownianDiffusion, MultinomialMutation, Root};

const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// The set of leaves below every node, as sorted vectors, keyed by the node's height.
fn clusters(tree: &Tree) -> Vec<(Vec<usize>, f64)> {
    let h = tree.heights().unwrap();
    let mut out: Vec<(Vec<usize>, f64)> = (tree.n_leaves()..tree.nodes().len())
        .map(|v| {
            let mut l = tree.leaves_of(v);
            l.sort_unstable();
            (l, h[v])
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `ln p(x, π)` written out: rows stacked are `N(0, (s0 + C + η I) ⊗ λI)` with `C` the
/// shared path lengths below the root node, and the prior is `−Σ` over pairs of lineages
/// of the time both are alive.
fn covariance_log_joint(x: &Array2<f64>, t: &Tree, lambda: f64, s0: f64, noise: f64) -> f64 {
    let (n, d) = x.dim();
    let c = shared_lengths(t);
    let cov = DMatrix::from_fn(n, n, |i, j| {
        lambda * (s0 + c[i][j] + if i == j { noise } else { 0.0 })
    });
    let l = cov.cholesky().expect("SPD").l();
    let log_det: f64 = 2.0 * l.diagonal().iter().map(|v| v.ln()).sum::<f64>();
    let mut ll = 0.0;
    for k in 0..d {
        let col = DVector::from_iterator(n, x.column(k).iter().copied());
        let z = l.solve_lower_triangular(&col).unwrap();
        ll += -0.5 * (n as f64 * LN_2PI + log_det + z.norm_squared());
    }
    let h = t.heights().unwrap();
    let spans: Vec<(f64, f64)> = (0..t.nodes().len())
        .filter_map(|v| t.node(v).parent.map(|p| (h[p], h[v])))
        .collect();
    let mut coexist = 0.0;
    for (a, &(lo_a, hi_a)) in spans.iter().enumerate() {
        for &(lo_b, hi_b) in &spans[a + 1..] {
            coexist += (hi_a.min(hi_b) - lo_a.max(lo_b)).max(0.0);
        }
    }
    ll - coexist
}

fn blobs(n: usize, d: usize, k: usize, sep: f64, seed: u64) -> (Array2<f64>, Vec<usize>) {
    let mut g = rng(seed);
    let centres: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..d).map(|_| sep * normal(&mut g)).collect())
        .collect();
    let labels: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % k).collect();
    let x = Array2::from_shape_fn((n, d), |(i, j)| centres[labels[i]][j] + normal(&mut g));
    (x, labels)
}

#[test]
fn a_leaf_is_inserted_on_the_branch_at_its_time_and_nothing_else_moves() {
    let mut r = rng(3);
    for n in 1..9 {
        let tree = if n == 1 {
            Tree::new(&Topology::new(1, vec![]).unwrap(), Some(vec![0.0])).unwrap()
        } else {
            random_tree(n, 0.0, &mut r)
        };
        let h = tree.heights().unwrap().to_vec();
        for v in 0..tree.nodes().len() {
            let top = tree.node(v).parent.map_or(h[v] - 2.0, |p| h[p]);
            for frac in [0.0, 0.3, 1.0] {
                let t = h[v] + frac * (top - h[v]);
                let (grown, w) = insert_leaf(&tree, v, t).unwrap();
                check_timed_tree(&grown).unwrap();
                assert_eq!(grown.n_leaves(), n + 1);
                assert_eq!(grown.heights().unwrap()[w], t);
                // The new node holds the node's leaves and the new leaf n.
                let mut below = tree.leaves_of(v);
                below.push(n);
                below.sort_unstable();
                let mut got = grown.leaves_of(w);
                got.sort_unstable();
                assert_eq!(got, below);
                assert_eq!(grown.node(n).parent, Some(w));
                // Every old cluster keeps its time; those above the join gain leaf n.
                let mut above = Vec::new();
                let mut a = tree.node(v).parent;
                while let Some(u) = a {
                    above.push(u);
                    a = tree.node(u).parent;
                }
                let mut want: Vec<(Vec<usize>, f64)> = (n..tree.nodes().len())
                    .map(|u| {
                        let mut l = tree.leaves_of(u);
                        if above.contains(&u) {
                            l.push(n);
                        }
                        l.sort_unstable();
                        (l, h[u])
                    })
                    .collect();
                want.push((below.clone(), t));
                want.sort_by(|a, b| a.0.cmp(&b.0));
                assert_eq!(clusters(&grown), want);
            }
        }
    }
    // Off the branch, or at a positive time: refused.
    let tree = random_tree(4, 0.0, &mut r);
    let h = tree.heights().unwrap();
    let p = tree.node(0).parent.unwrap();
    assert!(insert_leaf(&tree, 0, h[p] - 0.1).is_err());
    assert!(insert_leaf(&tree, 0, 0.1).is_err());
    assert!(insert_leaf(&tree, 99, -0.1).is_err());
}

#[test]
fn internal_ids_stay_in_time_order() {
    let (x, _) = blobs(30, 2, 3, 6.0, 1);
    let model = BrownianDiffusion::isotropic(1.0, 2)
        .unwrap()
        .with_noise(0.1)
        .unwrap();
    let fit = fit(&model, &CoalescentParams::new().check().unwrap(), x.view()).unwrap();
    let ordered = |t: &Tree| {
        let h = &t.heights().unwrap()[t.n_leaves()..];
        h.windows(2).all(|w| w[0] >= w[1])
    };
    assert!(ordered(&fit.tree));
    let (more, _) = blobs(10, 2, 3, 6.0, 2);
    let leaves = model.leaf_messages(x.view()).unwrap();
    let rows = model.leaf_messages(more.view()).unwrap();
    let (grown, _) = insert_rows(&model, &fit.tree, leaves, rows, &|| false).unwrap();
    assert!(ordered(&grown.tree));
}

#[test]
fn the_grown_tree_reports_its_log_joint_in_covariance_form() {
    for (seed, (s0, noise)) in [(0.5, 0.1), (2.0, 0.0), (1.0, 0.5)].into_iter().enumerate() {
        let (x, _) = blobs(14, 3, 3, 4.0, seed as u64);
        let model = BrownianDiffusion::isotropic(1.3, 3)
            .unwrap()
            .with_root(Root::Gaussian { s0 })
            .unwrap()
            .with_noise(noise)
            .unwrap();
        let first = x.slice(ndarray::s![..6, ..]).to_owned();
        let rest = x.slice(ndarray::s![6.., ..]).to_owned();
        let fitted = fit(
            &model,
            &CoalescentParams::new().check().unwrap(),
            first.view(),
        )
        .unwrap();
        let (grown, joins) = insert_rows(
            &model,
            &fitted.tree,
            model.leaf_messages(first.view()).unwrap(),
            model.leaf_messages(rest.view()).unwrap(),
            &|| false,
        )
        .unwrap();
        assert_eq!(joins.len(), 8);
        let want = covariance_log_joint(&x, &grown.tree, 1.3, s0, noise);
        assert!(
            (grown.log_joint - want).abs() < 1e-9 * (1.0 + want.abs()),
            "{} vs {want}",
            grown.log_joint
        );
    }
}

/// `ln ∫` of `exp(f)` over `[lo, hi]` by the trapezoid rule on `m` intervals, uniform in
/// `ln(−t)` when `geometric` (a leaf branch, `hi = 0`), else uniform in `t`.
fn log_trapezoid(f: &dyn Fn(f64) -> f64, lo: f64, hi: f64, m: usize, geometric: bool) -> f64 {
    let ts: Vec<f64> = if geometric {
        // From lo to −1e−12·|lo| geometrically (the rest carries nothing: the density
        // is bounded with observation noise).
        let a = (-lo).ln();
        let b = (1e-12 * -lo).ln();
        (0..=m)
            .map(|i| -(a + (b - a) * i as f64 / m as f64).exp())
            .collect()
    } else {
        (0..=m)
            .map(|i| lo + (hi - lo) * i as f64 / m as f64)
            .collect()
    };
    let vals: Vec<f64> = ts.iter().map(|&t| f(t)).collect();
    let top = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut s = 0.0;
    for i in 1..ts.len() {
        s += 0.5 * (ts[i] - ts[i - 1]) * ((vals[i] - top).exp() + (vals[i - 1] - top).exp());
    }
    top + s.ln()
}

#[test]
fn the_chosen_branch_and_time_maximise_the_join_density() {
    for seed in 0..4 {
        let (x, _) = blobs(12, 2, 3, 5.0, 10 + seed);
        let model = BrownianDiffusion::isotropic(2.0, 2)
            .unwrap()
            .with_noise(0.2)
            .unwrap();
        let fitted = fit(&model, &CoalescentParams::new().check().unwrap(), x.view()).unwrap();
        let leaves: Vec<_> = model
            .leaf_messages(x.view())
            .unwrap()
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        let p = Predictor::from_leaves(model.clone(), leaves, fitted.tree.clone()).unwrap();
        let mut g = rng(100 + seed);
        for i in 0..5 {
            let y = Array2::from_shape_fn((1, 2), |_| 5.0 * normal(&mut g));
            let (leaf, z) = model.leaf_message(y.row(0), i).unwrap();
            let join = best_join(&p, &leaf, z, i).unwrap();
            // Every branch's probability by a dense trapezoid rule.
            let n_nodes = fitted.tree.nodes().len();
            let root = fitted.tree.root();
            let mass: Vec<f64> = (0..n_nodes)
                .map(|v| {
                    let (top, bottom) = p.branch_span(v);
                    let f = |t: f64| p.log_join_density(v, t, &leaf, z);
                    if top == bottom {
                        f64::NEG_INFINITY
                    } else if v == root {
                        log_trapezoid(&f, bottom - 60.0, bottom, 60_000, false)
                    } else {
                        log_trapezoid(&f, top, bottom, 20_000, v < fitted.tree.n_leaves())
                    }
                })
                .collect();
            assert!(mass.iter().all(|m| !m.is_nan()), "{mass:?}");
            let best = (0..n_nodes)
                .max_by(|&a, &b| mass[a].total_cmp(&mass[b]))
                .unwrap();
            let second = (0..n_nodes)
                .filter(|&v| v != best)
                .map(|v| mass[v])
                .fold(f64::NEG_INFINITY, f64::max);
            // Unless two branches are within the rules' errors of each other.
            if mass[best] - second > 1e-3 {
                assert_eq!(join.node, best, "row {i}: {mass:?}");
            }
            // The time: no point of a dense grid on the branch is better.
            let (top, bottom) = p.branch_span(join.node);
            let top = if top.is_finite() { top } else { bottom - 60.0 };
            let f = |t: f64| p.log_join_density(join.node, t, &leaf, z);
            let chosen = f(join.time);
            assert!(join.time >= top && join.time <= bottom);
            for k in 0..=20_000 {
                let t = top + (bottom - top) * f64::from(k) / 20_000.0;
                assert!(f(t) <= chosen + 1e-7, "{} at {t} beats {chosen}", f(t));
            }
        }
    }
}

#[test]
fn separated_clusters_grow_without_mixing() {
    // Rows arriving one at a time, the first fit from two rows of one cluster.
    let (x, labels) = blobs(60, 4, 4, 10.0, 7);
    let model = BrownianDiffusion::isotropic(60.0, 4)
        .unwrap()
        .with_noise(0.02)
        .unwrap();
    let first = x.slice(ndarray::s![..2, ..]).to_owned();
    let fitted = fit(
        &model,
        &CoalescentParams::new().check().unwrap(),
        first.view(),
    )
    .unwrap();
    let mut tree = fitted.tree;
    for i in 2..x.nrows() {
        let rows = x.slice(ndarray::s![i..=i, ..]).to_owned();
        let done = x.slice(ndarray::s![..i, ..]).to_owned();
        let (grown, _) = insert_rows(
            &model,
            &tree,
            model.leaf_messages(done.view()).unwrap(),
            model.leaf_messages(rows.view()).unwrap(),
            &|| false,
        )
        .unwrap();
        tree = grown.tree;
    }
    // Each cluster's rows are exactly the leaves of one node.
    for k in 0..4 {
        let members: Vec<usize> = (0..60).filter(|&i| labels[i] == k).collect();
        let found = (0..tree.nodes().len()).any(|v| {
            let mut l = tree.leaves_of(v);
            l.sort_unstable();
            l == members
        });
        assert!(found, "cluster {k} is not a subtree");
    }
    let again = log_joint(&model, x.view(), &tree).unwrap();
    assert!(again.is_finite());
}

#[test]
fn multinomial_rows_join_their_prototype() {
    let protos = [
        [0.0, 1.0, 2.0, 0.0, 1.0, 2.0],
        [2.0, 2.0, 0.0, 1.0, 0.0, 1.0],
    ];
    let x = Array2::from_shape_fn((10, 6), |(i, j)| protos[i % 2][j]);
    let model = MultinomialMutation::from_data(x.view(), &[3; 6], &[1.0]).unwrap();
    let fitted = fit(&model, &CoalescentParams::new().check().unwrap(), x.view()).unwrap();
    let new = Array2::from_shape_fn((2, 6), |(i, j)| protos[i][j]);
    let (grown, joins) = insert_rows(
        &model,
        &fitted.tree,
        model.leaf_messages(x.view()).unwrap(),
        model.leaf_messages(new.view()).unwrap(),
        &|| false,
    )
    .unwrap();
    assert_eq!(joins.len(), 2);
    let all = concatenate![Axis(0), x, new];
    let again = log_joint(&model, all.view(), &grown.tree).unwrap();
    assert!((grown.log_joint - again).abs() < 1e-12 * again.abs());
    // Row 10 (prototype 0) is a sibling of a subtree of even rows only, row 11 of odd rows.
    for (leaf, parity) in [(10, 0), (11, 1)] {
        let p = grown.tree.node(leaf).parent.unwrap();
        assert!(
            grown
                .tree
                .leaves_of(p)
                .iter()
                .filter(|&&l| l < 10)
                .all(|&l| l % 2 == parity)
        );
    }
}

#[test]
fn interrupts_and_mismatched_leaves_are_errors() {
    let (x, _) = blobs(6, 2, 2, 4.0, 1);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let fitted = fit(&model, &CoalescentParams::new().check().unwrap(), x.view()).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let rows = model.leaf_messages(x.view()).unwrap();
    assert!(matches!(
        insert_rows(&model, &fitted.tree, leaves.clone(), rows.clone(), &|| true),
        Err(RoseTreeError::Interrupted)
    ));
    assert!(matches!(
        insert_rows(&model, &fitted.tree, leaves[..5].to_vec(), rows, &|| false),
        Err(RoseTreeError::InvalidTree(_))
    ));
}
