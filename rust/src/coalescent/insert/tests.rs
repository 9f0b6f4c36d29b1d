//! Growing a coalescent tree against independent computations: the grown tree's structure
//! from its ancestor sets, its `ln p(x, π)` in the covariance form of Brownian motion with
//! Kingman's prior as coexistence times, the chosen branch against the join density
//! integrated by a dense trapezoid rule, and the chosen time against a dense grid.

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, Axis, concatenate};

use super::grow::Growing;
use super::*;
use crate::coalescent::predict::Predictor;
use crate::coalescent::{CoalescentParams, fit, log_joint};
use crate::math::log_sum_exp;
use crate::models::messages::tests::{normal, random_tree, rng, shared_lengths};
use crate::models::messages::{BrownianDiffusion, MultinomialMutation, Root};

const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// The Greedy-Rate1 fit of the rows of `x` with the default parameters.
fn greedy<M: MessageModel + Clone>(model: &M, x: ndarray::ArrayView2<'_, f64>) -> CoalescentFit {
    fit(model, &CoalescentParams::new().check().unwrap(), x).unwrap()
}

/// The leaf messages of the rows of `x`, without their normalisers.
fn messages<M: MessageModel>(model: &M, x: ndarray::ArrayView2<'_, f64>) -> Vec<M::Message> {
    let leaves = model.leaf_messages(x).unwrap();
    leaves.into_iter().map(|(m, _)| m).collect()
}

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
    let fit = greedy(&model, x.view());
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
        let fitted = greedy(&model, first.view());
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

/// A fitted tree of `n` rows (blobs in 2-d), its model and predictor, and the arena of
/// the same tree with its outside messages.
fn fitted_small(
    seed: u64,
    n: usize,
    noise: f64,
) -> (
    BrownianDiffusion,
    Tree,
    Vec<crate::models::messages::GaussianMessage>,
) {
    let (x, _) = blobs(n, 2, 3, 5.0, 10 + seed);
    let model = BrownianDiffusion::isotropic(2.0, 2)
        .unwrap()
        .with_noise(noise)
        .unwrap();
    let fitted = greedy(&model, x.view());
    let leaves = messages(&model, x.view());
    (model, fitted.tree, leaves)
}

/// The join density of every branch of the predictor's tree on a dense grid of times
/// (geometric towards a leaf, 60 time units above the root): `(times, log densities)`.
fn dense(
    p: &Predictor<BrownianDiffusion>,
    v: usize,
    leaf: &crate::models::messages::GaussianMessage,
    z: f64,
) -> (Vec<f64>, Vec<f64>) {
    let tree = p.tree();
    let (top, bottom) = p.branch_span(v);
    let (m, geometric) = (20_000, v < tree.n_leaves());
    let lo = if top.is_finite() { top } else { bottom - 60.0 };
    let ts: Vec<f64> = if top == bottom {
        Vec::new()
    } else if geometric {
        let (a, b) = ((-lo).ln(), (1e-12 * -lo).ln());
        (0..=m)
            .map(|i| -(a + (b - a) * i as f64 / m as f64).exp())
            .collect()
    } else {
        (0..=m)
            .map(|i| lo + (bottom - lo) * i as f64 / m as f64)
            .collect()
    };
    let f: Vec<f64> = ts
        .iter()
        .map(|&t| p.log_join_density(v, t, leaf, z))
        .collect();
    (ts, f)
}

/// `ln ∫ exp(f)` by the trapezoid rule on the points `(ts, f)`.
fn log_trapezoid(ts: &[f64], f: &[f64]) -> f64 {
    if ts.len() < 2 {
        return f64::NEG_INFINITY;
    }
    let top = f.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut s = 0.0;
    for i in 1..ts.len() {
        s += 0.5 * (ts[i] - ts[i - 1]).abs() * ((f[i] - top).exp() + (f[i - 1] - top).exp());
    }
    top + s.ln()
}

#[test]
fn the_map_join_beats_a_dense_grid_of_every_branch() {
    for seed in 0..4 {
        let (model, tree, leaves) = fitted_small(seed, 12, 0.2);
        let p = Predictor::from_leaves(model.clone(), leaves.clone(), tree.clone()).unwrap();
        let mut growing = Growing::new(&model, &tree, leaves);
        growing.downward();
        let mut g = rng(100 + seed);
        for i in 0..5 {
            let y = Array2::from_shape_fn((1, 2), |_| 5.0 * normal(&mut g));
            let (leaf, z) = model.leaf_message(y.row(0), i).unwrap();
            let (node, time, _) = growing.best_join(&leaf, JoinRule::MaxDensity, i).unwrap();
            // The arena's density is the predictor's, less the row's constant.
            let chosen = p.log_join_density(node, time, &leaf, z);
            let offset = chosen - growing.log_density(node, time, &leaf);
            for v in 0..tree.nodes().len() {
                let t = p.branch_span(v).1 - 0.01;
                if p.branch_span(v).0 < t {
                    let again = growing.log_density(v, t, &leaf) + offset;
                    let want = p.log_join_density(v, t, &leaf, z);
                    assert!((again - want).abs() < 1e-9 * (1.0 + want.abs()));
                }
            }
            let (top, bottom) = p.branch_span(node);
            assert!(time >= top && time <= bottom);
            // No point of any branch's dense grid is better.
            let peaks: Vec<f64> = (0..tree.nodes().len())
                .map(|v| {
                    let (_, f) = dense(&p, v, &leaf, z);
                    f.into_iter().fold(f64::NEG_INFINITY, f64::max)
                })
                .collect();
            let best = (0..peaks.len())
                .max_by(|&a, &b| peaks[a].total_cmp(&peaks[b]))
                .unwrap();
            assert!(chosen >= peaks[best] - 1e-7, "{chosen} < {}", peaks[best]);
            let second = (0..peaks.len())
                .filter(|&v| v != best)
                .map(|v| peaks[v])
                .fold(f64::NEG_INFINITY, f64::max);
            if peaks[best] - second > 1e-6 {
                assert_eq!(node, best, "row {i}: {peaks:?}");
            }
        }
    }
}

#[test]
fn branch_masses_match_dense_integration() {
    for (seed, noise) in [(0, 0.2), (1, 0.0), (2, 0.05), (3, 1.0)] {
        let (model, tree, leaves) = fitted_small(seed, 12, noise);
        let p = Predictor::from_leaves(model.clone(), leaves.clone(), tree.clone()).unwrap();
        let mut growing = Growing::new(&model, &tree, leaves);
        growing.downward();
        let mut g = rng(200 + seed);
        for i in 0..5 {
            let y = Array2::from_shape_fn((1, 2), |_| 5.0 * normal(&mut g));
            let (leaf, z) = model.leaf_message(y.row(0), i).unwrap();
            let fast: Vec<f64> = growing.scores(&leaf).iter().map(|s| s.log_mass).collect();
            let slow: Vec<f64> = (0..tree.nodes().len())
                .map(|v| {
                    let (ts, f) = dense(&p, v, &leaf, z);
                    log_trapezoid(&ts, &f)
                })
                .collect();
            let (fast_total, slow_total) = (log_sum_exp(&fast), log_sum_exp(&slow));
            // The predictor's density of the row agrees with its exact quadrature.
            let exact = p.log_density_by_branch_of(&leaf, z).0;
            assert!((slow_total - exact).abs() < 1e-3, "{slow_total} vs {exact}");
            // Each branch's share of the probability, to 3 % where it matters.
            for v in 0..fast.len() {
                let (a, b) = (fast[v] - fast_total, slow[v] - slow_total);
                if b > -10.0 {
                    assert!((a - b).abs() < 0.03, "row {i} branch {v}: {a} vs {b}");
                } else {
                    assert!(a < -9.0, "row {i} branch {v}: {a} vs {b}");
                }
            }
            let (node, _, log_p) = growing.best_join(&leaf, JoinRule::BranchMass, i).unwrap();
            let best = (0..slow.len())
                .max_by(|&a, &b| slow[a].total_cmp(&slow[b]))
                .unwrap();
            let second = (0..slow.len())
                .filter(|&v| v != best)
                .map(|v| slow[v])
                .fold(f64::NEG_INFINITY, f64::max);
            if slow[best] - second > 0.05 {
                assert_eq!(node, best, "row {i}");
            }
            assert!((log_p - (fast[node] - fast_total)).abs() < 1e-12);
        }
    }
}

#[test]
fn the_grid_is_bounded_per_branch() {
    let (x, _) = blobs(400, 3, 5, 4.0, 3);
    let model = BrownianDiffusion::isotropic(1.0, 3)
        .unwrap()
        .with_noise(0.1)
        .unwrap();
    let fitted = greedy(&model, x.view());
    let leaves = messages(&model, x.view());
    let growing = Growing::new(&model, &fitted.tree, leaves);
    let most = (0..growing.len())
        .map(|v| growing.grid(v).len())
        .max()
        .unwrap();
    assert!(most <= 3 * (24 + 14) + 1, "{most}");
}

/// Isotropic Brownian diffusion in 3 dimensions (λ = 1.5, noise 0.1) with the root `root`.
fn brownian_3d(root: Root) -> BrownianDiffusion {
    let model = BrownianDiffusion::isotropic(1.5, 3).unwrap();
    model.with_root(root).unwrap().with_noise(0.1).unwrap()
}

/// After a downward pass, the arena's upward and outside messages are those of a fresh
/// predictor on the same tree (`leaves`: every row's message, in row order).
fn assert_fresh_messages(
    growing: &mut Growing<'_, BrownianDiffusion>,
    model: &BrownianDiffusion,
    leaves: Vec<crate::models::messages::GaussianMessage>,
) {
    growing.downward();
    let (tree, id) = growing.finish().unwrap();
    let p = Predictor::from_leaves(model.clone(), leaves, tree).unwrap();
    let close = |x: f64, y: f64| x == y || (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs()));
    for (v, &w) in id.iter().enumerate() {
        let ((up, out), (up_fresh, out_fresh)) = (growing.messages(v), p.messages(w));
        for (a, b) in [(up, up_fresh), (out, out_fresh)] {
            assert!(close(a.variance(), b.variance()), "node {v}");
            for (x, y) in a.whitened_mean().iter().zip(b.whitened_mean()) {
                assert!(close(*x, *y), "node {v}: {x} vs {y}");
            }
        }
    }
}

#[test]
fn incremental_messages_equal_a_fresh_pass() {
    for (seed, root) in [(0, Root::Flat), (1, Root::Gaussian { s0: 2.0 })] {
        let (x, _) = blobs(40, 3, 4, 4.0, 20 + seed);
        let model = brownian_3d(root);
        let first = x.slice(ndarray::s![..15, ..]).to_owned();
        let fitted = greedy(&model, first.view());
        let leaves: Vec<_> = messages(&model, x.view());
        let mut growing = Growing::new(&model, &fitted.tree, leaves[..15].to_vec());
        for (i, leaf) in leaves[15..].iter().enumerate() {
            growing.downward();
            let (node, time, _) = growing.best_join(leaf, JoinRule::MaxDensity, i).unwrap();
            growing.insert(node, time, leaf.clone());
        }
        assert_fresh_messages(&mut growing, &model, leaves);
    }
}

#[test]
fn the_hazard_inverts() {
    let mut r = rng(5);
    let tree = random_tree(30, 0.0, &mut r);
    let (model, _, _) = fitted_small(0, 3, 0.1);
    let leaves = vec![model.combine(&[]).0; 30];
    let growing = Growing::new(&model, &tree, leaves);
    let h = tree.heights().unwrap();
    let deepest = h.iter().copied().fold(0.0, f64::min);
    for k in 0..=200 {
        let t = 1.5 * deepest * f64::from(k) / 200.0;
        let back = growing.time_at_hazard_of(t);
        assert!((back - t).abs() < 1e-12 * (1.0 + t.abs()), "{t} -> {back}");
    }
}

#[test]
fn repairs_raise_the_log_joint_and_keep_the_messages() {
    for (seed, root) in [(0, Root::Flat), (1, Root::Gaussian { s0: 3.0 })] {
        let (x, _) = blobs(50, 3, 4, 4.0, 40 + seed);
        let model = brownian_3d(root);
        let all = model.leaf_messages(x.view()).unwrap();
        let leaves = messages(&model, x.view());
        let fitted = greedy(&model, x.slice(ndarray::s![..10, ..]));
        let mut growing = Growing::new(&model, &fitted.tree, leaves[..10].to_vec());
        let log_joint = |g: &Growing<'_, BrownianDiffusion>, rows: usize| {
            let tree = g.finish().unwrap().0;
            log_joint_from_leaves(&model, &all[..rows], &tree).unwrap()
        };
        let (mut tried, mut moved) = (0, 0);
        for (i, leaf) in leaves[10..].iter().enumerate() {
            growing.downward();
            let (node, time, _) = growing.best_join(leaf, JoinRule::MaxDensity, i).unwrap();
            let (_, j) = growing.insert(node, time, leaf.clone());
            for u in growing.repair_candidates(j) {
                let before = log_joint(&growing, 11 + i);
                let did = growing.repair(u, JoinRule::MaxDensity, true, i).unwrap();
                let after = log_joint(&growing, 11 + i);
                tried += 1;
                if did {
                    moved += 1;
                    assert!(after > before, "{after} <= {before}");
                } else {
                    assert!(
                        (after - before).abs() < 1e-9 * before.abs(),
                        "{after} vs {before}"
                    );
                }
            }
        }
        assert!(tried > 0 && moved > 0, "{moved} of {tried}");
        assert_fresh_messages(&mut growing, &model, leaves);
    }
}

#[test]
fn insertion_is_deterministic() {
    let (x, _) = blobs(60, 3, 4, 3.0, 9);
    let model = BrownianDiffusion::isotropic(1.0, 3)
        .unwrap()
        .with_noise(0.1)
        .unwrap();
    let first = x.slice(ndarray::s![..20, ..]).to_owned();
    let rest = x.slice(ndarray::s![20.., ..]).to_owned();
    let fitted = greedy(&model, first.view());
    let grow = |rule, repair, retime| {
        insert_rows_with(
            &model,
            &fitted.tree,
            model.leaf_messages(first.view()).unwrap(),
            model.leaf_messages(rest.view()).unwrap(),
            Growth {
                rule,
                repair,
                retime,
                rotate: retime,
                ..Growth::default()
            },
            &|| false,
        )
        .unwrap()
    };
    for (rule, repair, retime) in [
        (JoinRule::MaxDensity, true, false),
        (JoinRule::MaxDensity, false, false),
        (JoinRule::MaxDensity, false, true),
        (JoinRule::BranchMass, true, true),
    ] {
        let (a, ja) = grow(rule, repair, retime);
        let (b, jb) = grow(rule, repair, retime);
        assert_eq!(a.tree, b.tree);
        assert_eq!(a.log_joint.to_bits(), b.log_joint.to_bits());
        assert_eq!(ja, jb);
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
    let fitted = greedy(&model, first.view());
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
    let fitted = greedy(&model, x.view());
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
    let fitted = greedy(&model, x.view());
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

#[test]
fn a_join_at_a_blocks_time_goes_down_to_its_shallowest_child() {
    // Leaves 0..4; node 5 = (0, 1) and node 6 = (5, 2) at t = −1, a block of one time;
    // node 7 = (6, 3) at −2; node 8 = (7, 4) at −3.
    let topology = Topology::new(5, vec![vec![0, 1], vec![5, 2], vec![6, 3], vec![7, 4]]).unwrap();
    let heights = vec![0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -1.0, -2.0, -3.0];
    let tree = Tree::new(&topology, Some(heights)).unwrap();
    let x = ndarray::array![
        [0.3, -0.2, 0.1],
        [-0.4, 0.5, 0.0],
        [0.2, 0.1, -0.6],
        [2.0, 1.5, -1.0],
        [-3.0, 2.0, 2.5]
    ];
    let model = brownian_3d(Root::Gaussian { s0: 2.0 });
    let growing = Growing::new(&model, &tree, messages(&model, x.view()));
    // Into the block (on the branch above 6 at its time, or at the top of 2's branch):
    // down to leaf 2, one level below 6, rather than to 5 (two levels, through 0 or 1).
    for c in [6, 2] {
        assert_eq!(growing.tie_join(c, -1.0), 2, "from {c}");
    }
    // Elsewhere in time, or a block of one node whose children are shallower: unchanged
    // or down to the shallower child.
    assert_eq!(growing.tie_join(6, -1.5), 6);
    assert_eq!(growing.tie_join(3, -1.5), 3);
    assert_eq!(growing.tie_join(0, 0.0), 0);
    assert_eq!(growing.tie_join(8, -3.0), 4);
    assert_eq!(growing.tie_join(4, -3.0), 4);
    assert_eq!(growing.tie_join(7, -2.0), 3);
    // Each place has the same ln p(x, π) as the join it replaces (the covariance form).
    let row = ndarray::array![[0.1, 0.4, -0.3]];
    let all = concatenate![Axis(0), x, row];
    for (c, t) in [(6, -1.0), (2, -1.0), (8, -3.0), (7, -2.0)] {
        let lp = |node| {
            let grown = insert_leaf(&tree, node, t).unwrap().0;
            let direct = log_joint(&model, all.view(), &grown).unwrap();
            let written = covariance_log_joint(&all, &grown, 1.5, 2.0, 0.1);
            assert!((direct - written).abs() < 1e-9 * written.abs());
            direct
        };
        let (there, here) = (lp(c), lp(growing.tie_join(c, t)));
        assert!(
            (there - here).abs() < 1e-12 * there.abs(),
            "{c}: {there} vs {here}"
        );
    }
}

#[test]
fn rows_joining_at_one_time_grow_a_balanced_subtree_of_the_same_log_joint() {
    // Rows within the noise of row 0 join at t = 0, one after another.
    let (x, _) = blobs(12, 3, 3, 6.0, 21);
    let model = brownian_3d(Root::Gaussian { s0: 3.0 });
    let fitted = greedy(&model, x.view());
    let k = 40;
    let mut g = rng(22);
    let rows = Array2::from_shape_fn((k, 3), |(_, j)| x[[0, j]] + 1e-3 * normal(&mut g));
    let all = concatenate![Axis(0), x, rows];
    let grow = |balance| {
        insert_rows_with(
            &model,
            &fitted.tree,
            model.leaf_messages(x.view()).unwrap(),
            model.leaf_messages(rows.view()).unwrap(),
            Growth {
                balance,
                ..Growth::default()
            },
            &|| false,
        )
        .unwrap()
    };
    let (balanced, joins) = grow(true);
    let (stacked, stacked_joins) = grow(false);
    assert!(joins.iter().chain(&stacked_joins).all(|j| j.time == 0.0));
    for grown in [&balanced, &stacked] {
        let want = covariance_log_joint(&all, &grown.tree, 1.5, 3.0, 0.1);
        assert!((grown.log_joint - want).abs() < 1e-9 * want.abs());
    }
    let gap = (balanced.log_joint - stacked.log_joint).abs();
    assert!(gap < 1e-9 * stacked.log_joint.abs(), "{gap}");
    // The 41 copies of row 0 under one node of time 0: a chain stacked, ⌈log₂ 41⌉ = 6
    // levels balanced.
    let copies = |tree: &Tree| {
        let v = (tree.n_leaves()..tree.nodes().len())
            .find(|&v| tree.leaves_of(v).len() == k + 1)
            .expect("the copies are a subtree");
        let mut l = tree.leaves_of(v);
        l.sort_unstable();
        assert_eq!(l, [0].into_iter().chain(12..12 + k).collect::<Vec<_>>());
        let mut depth = 0;
        for leaf in l {
            let (mut u, mut d) = (leaf, 0);
            while u != v {
                u = tree.node(u).parent.unwrap();
                d += 1;
            }
            depth = depth.max(d);
        }
        depth
    };
    assert_eq!(copies(&stacked.tree), k);
    assert_eq!(copies(&balanced.tree), 6);
    assert!(balanced.tree.depth() <= fitted.tree.depth() + 6);
}

#[test]
fn retiming_raises_the_log_joint_by_the_gain_it_reports() {
    for (seed, root) in [(0, Root::Flat), (1, Root::Gaussian { s0: 3.0 })] {
        let (x, _) = blobs(40, 3, 4, 4.0, 50 + seed);
        let model = brownian_3d(root);
        let all = model.leaf_messages(x.view()).unwrap();
        let leaves = messages(&model, x.view());
        let fitted = greedy(&model, x.slice(ndarray::s![..15, ..]));
        let mut growing = Growing::new(&model, &fitted.tree, leaves[..15].to_vec());
        // From scratch, on the arena as a tree (which checks that times fall to the root).
        let log_joint = |g: &Growing<'_, BrownianDiffusion>, rows: usize| {
            let tree = g.finish().unwrap().0;
            log_joint_from_leaves(&model, &all[..rows], &tree).unwrap()
        };
        let (mut tried, mut moved, mut roots) = (0, 0, 0);
        for (i, leaf) in leaves[15..].iter().enumerate() {
            growing.downward();
            let (node, time, _) = growing.best_join(leaf, JoinRule::MaxDensity, i).unwrap();
            let (_, j) = growing.insert(node, time, leaf.clone());
            let mut above = growing.parent_of(j);
            while let Some(v) = above {
                let before = log_joint(&growing, 16 + i);
                let gain = growing.retime(v);
                let after = log_joint(&growing, 16 + i);
                tried += 1;
                assert!(gain >= 0.0);
                if gain > 0.0 {
                    moved += 1;
                    roots += usize::from(growing.parent_of(v).is_none());
                    let change = after - before;
                    assert!(
                        (change - gain).abs() < 1e-8 * (1.0 + before.abs()),
                        "node {v}: gain {gain}, change {change}"
                    );
                } else {
                    assert!((after - before).abs() < 1e-9 * before.abs());
                }
                above = growing.parent_of(v);
            }
        }
        assert!(
            moved > 0 && moved < tried && roots > 0,
            "{moved} of {tried}, {roots}"
        );
        assert_fresh_messages(&mut growing, &model, leaves);
    }
}

#[test]
fn rotations_raise_the_log_joint_by_the_gain_they_report() {
    for (seed, root) in [(0, Root::Flat), (1, Root::Gaussian { s0: 3.0 })] {
        let (x, _) = blobs(40, 3, 4, 3.0, 60 + seed);
        let model = brownian_3d(root);
        let all = model.leaf_messages(x.view()).unwrap();
        let leaves = messages(&model, x.view());
        let fitted = greedy(&model, x.slice(ndarray::s![..15, ..]));
        let mut growing = Growing::new(&model, &fitted.tree, leaves[..15].to_vec());
        let log_joint = |g: &Growing<'_, BrownianDiffusion>, rows: usize| {
            let tree = g.finish().unwrap().0;
            log_joint_from_leaves(&model, &all[..rows], &tree).unwrap()
        };
        let (mut tried, mut moved) = (0, 0);
        for (i, leaf) in leaves[15..].iter().enumerate() {
            growing.downward();
            let (node, time, _) = growing.best_join(leaf, JoinRule::MaxDensity, i).unwrap();
            let (_, j) = growing.insert(node, time, leaf.clone());
            let mut above = growing.parent_of(j);
            while let Some(v) = above {
                let before = log_joint(&growing, 16 + i);
                let gain = growing.rotate(v);
                let after = log_joint(&growing, 16 + i);
                tried += 1;
                assert!(gain >= 0.0);
                if gain > 0.0 {
                    moved += 1;
                    let change = after - before;
                    assert!(
                        (change - gain).abs() < 1e-8 * (1.0 + before.abs()),
                        "node {v}: gain {gain}, change {change}"
                    );
                } else {
                    assert_eq!(after, before);
                }
                above = growing.parent_of(v);
            }
        }
        assert!(moved > 0 && moved < tried, "{moved} of {tried}");
        assert_fresh_messages(&mut growing, &model, leaves);
    }
}
