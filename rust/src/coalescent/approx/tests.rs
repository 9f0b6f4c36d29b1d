//! The approximate Greedy-Rate1 search: a valid timed tree whose `ln p(x, π)` is the exact
//! evaluation of the tree returned, the exact search below `exact_below`, the same tree for
//! any number of threads, close to the exact tree's `ln p(x, π)` on clustered data.

use ndarray::Array2;
use rand::Rng;

use super::*;
use crate::coalescent::{check_timed_tree, log_joint};
use crate::models::messages::tests::{normal, rng};
use crate::models::messages::{BrownianDiffusion, MultinomialMutation};

/// `n` rows in `d` dimensions around `k` well-separated centres.
fn mixture(n: usize, d: usize, k: usize, seed: u64) -> Array2<f64> {
    let mut g = rng(seed);
    let centres: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..d).map(|_| 8.0 * normal(&mut g)).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| centres[i % k][j] + normal(&mut g))
}

/// `n` rows of `d` binary features copied from `k` prototypes with 10 % flipped.
fn binary(n: usize, d: usize, k: usize, seed: u64) -> Array2<f64> {
    let mut g = rng(seed);
    let protos: Vec<Vec<bool>> = (0..k)
        .map(|_| (0..d).map(|_| g.random::<bool>()).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| {
        let flip = g.random::<f64>() < 0.1;
        f64::from(u8::from(protos[i % k][j] ^ flip))
    })
}

fn params(exact_below: usize, sample: usize, seed: u64) -> ApproxParams {
    ApproxParams {
        exact_below,
        sample,
        seed,
    }
}

fn fit_approx<M: MessageModel + Clone>(
    model: &M,
    x: &Array2<f64>,
    p: ApproxParams,
    threads: Option<usize>,
) -> CoalescentFit {
    let threads = Threads::new(threads).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    greedy_rate1_approx(model, leaves, p, &threads, &|| false).unwrap()
}

fn check_fit<M: MessageModel + Clone>(model: &M, x: &Array2<f64>, fit: &CoalescentFit) {
    check_timed_tree(&fit.tree).unwrap();
    assert_eq!(fit.tree.n_leaves(), x.nrows());
    let again = log_joint(model, x.view(), &fit.tree).unwrap();
    assert!(
        (fit.log_joint - again).abs() <= 1e-9 * again.abs().max(1.0),
        "{} vs {again}",
        fit.log_joint
    );
    // Ids in time order, the most recent first, as the exact search numbers them.
    let h = fit.tree.heights().unwrap();
    assert!(h[x.nrows()..].windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn brownian_tree_is_valid_and_its_log_joint_exact() {
    let x = mixture(600, 3, 5, 1);
    let model = BrownianDiffusion::isotropic(1.0, 3).unwrap();
    let fit = fit_approx(&model, &x, params(100, 50, 7), Some(1));
    check_fit(&model, &x, &fit);
}

#[test]
fn multinomial_tree_is_valid_and_its_log_joint_exact() {
    let x = binary(500, 12, 4, 2);
    let model = MultinomialMutation::from_data(x.view(), &[2; 12], &[1.0]).unwrap();
    let fit = fit_approx(&model, &x, params(80, 40, 3), Some(2));
    check_fit(&model, &x, &fit);
}

#[test]
fn same_tree_for_any_number_of_threads() {
    let x = mixture(700, 2, 6, 4);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let one = fit_approx(&model, &x, params(90, 30, 11), Some(1));
    let two = fit_approx(&model, &x, params(90, 30, 11), Some(2));
    let four = fit_approx(&model, &x, params(90, 30, 11), Some(4));
    assert_eq!(one.tree, two.tree);
    assert_eq!(one.tree, four.tree);
    assert_eq!(one.log_joint.to_bits(), two.log_joint.to_bits());
}

#[test]
fn small_data_is_the_exact_search() {
    let x = mixture(120, 2, 3, 5);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let approx = fit_approx(&model, &x, params(120, 50, 1), Some(1));
    let threads = Threads::new(Some(1)).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let exact = greedy_rate1(&model, leaves, &threads, &|| false).unwrap();
    assert_eq!(approx.tree, exact.tree);
    assert_eq!(approx.log_joint.to_bits(), exact.log_joint.to_bits());
}

#[test]
fn close_to_the_exact_tree_on_clustered_data() {
    let x = mixture(800, 4, 8, 6);
    let model = BrownianDiffusion::isotropic(1.0, 4).unwrap();
    let approx = fit_approx(&model, &x, params(200, 100, 2), None);
    let threads = Threads::new(None).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let exact = greedy_rate1(&model, leaves, &threads, &|| false).unwrap();
    let gap = (approx.log_joint - exact.log_joint) / exact.log_joint.abs();
    assert!(
        gap.abs() < 0.01,
        "{} vs {}",
        approx.log_joint,
        exact.log_joint
    );
}

#[test]
fn rows_that_do_not_split_are_cut_into_blocks() {
    // Identical rows: every row goes to the same group, and blocks take over. They merge
    // at time 0, where the density is infinite, as in the exact search.
    let x = Array2::from_elem((300, 2), 0.5);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let fit = fit_approx(&model, &x, params(50, 20, 3), Some(2));
    check_timed_tree(&fit.tree).unwrap();
    assert_eq!(
        fit.log_joint,
        log_joint(&model, x.view(), &fit.tree).unwrap()
    );
}

#[test]
fn interrupt_and_bad_options() {
    let x = mixture(300, 2, 3, 8);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let threads = Threads::new(Some(2)).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let err = greedy_rate1_approx(&model, leaves.clone(), params(50, 20, 0), &threads, &|| {
        true
    })
    .unwrap_err();
    assert!(matches!(err, RoseTreeError::Interrupted), "{err}");
    let err =
        greedy_rate1_approx(&model, leaves, params(50, 60, 0), &threads, &|| false).unwrap_err();
    assert!(err.to_string().contains("approx_sample"), "{err}");
    let err = crate::coalescent::CoalescentParams::new()
        .inference(crate::coalescent::Inference::GreedyMaxProb)
        .approx(Some(params(50, 20, 0)))
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("approximate"), "{err}");
}

#[test]
fn cut_groups_splits_the_oldest_large_group_first() {
    let x = mixture(200, 2, 4, 9);
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let fit = fit_approx(&model, &x, params(200, 100, 0), Some(1));
    let groups = cut_groups(&fit.tree, 60);
    assert!(groups.len() >= 4);
    let covered: usize = groups.iter().map(|&g| fit.tree.nodes()[g].n_leaves).sum();
    assert_eq!(covered, 200);
    assert!(groups.iter().all(|&g| fit.tree.nodes()[g].n_leaves <= 60));
}

#[test]
fn the_router_sends_each_sample_row_to_its_own_group() {
    // Two clusters far apart: the sample tree's root splits them, and every row of the
    // sample is routed to the group (lineage) it belongs to.
    let mut x = mixture(40, 3, 2, 11);
    for (i, mut row) in x.rows_mut().into_iter().enumerate() {
        row += if i % 2 == 0 { 30.0 } else { -30.0 };
    }
    let model = BrownianDiffusion::isotropic(4.0, 3)
        .unwrap()
        .with_noise(0.1)
        .unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let threads = Threads::new(Some(1)).unwrap();
    let tree = greedy_rate1(&model, leaves.clone(), &threads, &|| false)
        .unwrap()
        .tree;
    let sample = leaves.iter().map(|(m, _)| m.clone()).collect();
    let router = Router::new(&model, sample, &tree, 20).unwrap();
    assert_eq!(router.groups.len(), 2);
    assert!(router.tau < 0.0);
    for (i, (leaf, _)) in leaves.iter().enumerate() {
        let g = router.groups[router.route(&model, leaf)];
        assert!(tree.leaves_of(g).contains(&i), "row {i} sent to group {g}");
    }
}

/// With observation noise Greedy-Rate1 joins close rows after no time; a cut that went
/// down to those merges would tell groups apart at `t = 0`, sending every row to its
/// nearest sample point's group. Clusters larger than a part are therefore not split below
/// their first merge after time 0, and each part stays within one cluster.
#[test]
fn merges_at_the_leaves_time_are_never_cut() {
    let (n, k) = (1200, 4);
    let x = mixture(n, 3, k, 12);
    let model = BrownianDiffusion::isotropic(1.0, 3)
        .unwrap()
        .with_noise(0.5)
        .unwrap();
    let threads = Threads::new(Some(1)).unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let sample: Vec<_> = leaves.iter().step_by(6).cloned().collect();
    let tree = greedy_rate1(&model, sample, &threads, &|| false)
        .unwrap()
        .tree;
    let h = tree.heights().unwrap();
    assert!(
        (tree.n_leaves()..tree.nodes().len()).any(|v| h[v] == 0.0),
        "the sample tree has merges at time 0"
    );
    let groups = cut_groups(&tree, 5);
    assert!(
        groups
            .iter()
            .all(|&g| tree.nodes()[g].parent.is_none_or(|p| h[p] < 0.0))
    );
    // Parts of 100 rows, clusters of 300: every cluster is split over several parts, and
    // no part holds two clusters' rows (row i is in cluster i % k).
    let fit = fit_approx(&model, &x, params(100, 50, 1), Some(1));
    check_fit(&model, &x, &fit);
    let t = &fit.tree;
    for v in 0..t.nodes().len() {
        let rows = t.leaves_of(v);
        let clusters: std::collections::BTreeSet<usize> = rows.iter().map(|&r| r % k).collect();
        if rows.len() <= n / k {
            assert_eq!(
                clusters.len(),
                1,
                "node {v} over {} rows mixes clusters",
                rows.len()
            );
        }
    }
}

#[test]
fn regrouping_joins_the_fragments_of_a_cluster_that_the_parts_kept_apart() {
    // Two tight clusters a and b, each split into two fragments, and a tree that joins
    // each a-fragment with a b-fragment first: (a1, b1), (a2, b2), then the two.
    let mut rows = Vec::new();
    for (centre, jitter) in [(0.0, 0.01), (0.0, -0.01), (10.0, 0.01), (10.0, -0.01)] {
        for k in 0..3 {
            rows.push([centre + jitter * f64::from(k), centre - jitter]);
        }
    }
    let x = Array2::from_shape_fn((12, 2), |(i, j)| rows[i][j]);
    let model = BrownianDiffusion::isotropic(1.0, 2)
        .unwrap()
        .with_noise(0.01)
        .unwrap();
    let leaves = model.leaf_messages(x.view()).unwrap();
    let threads = Threads::new(Some(1)).unwrap();
    // Each fragment (rows 3f..3f+3) by the exact search, then the bad joins.
    let fragment = |f: usize| {
        let part: Vec<_> = leaves[3 * f..3 * f + 3].to_vec();
        Shape::Part {
            rows: (3 * f..3 * f + 3).collect(),
            tree: greedy_rate1(&model, part, &threads, &|| false)
                .unwrap()
                .tree,
        }
    };
    let bad = join(
        join(fragment(0), fragment(2)),
        join(fragment(1), fragment(3)),
    );
    let tree = timed_tree(&model, &leaves, bad).unwrap();
    let before = log_joint_from_leaves(&model, &leaves, &tree).unwrap();
    // The four fragments' subtrees are the 4 oldest lineages.
    let regrouped = regroup(&model, &leaves, &tree, 4, &threads, &|| false)
        .unwrap()
        .unwrap();
    check_fit(&model, &x, &regrouped);
    assert!(
        regrouped.log_joint > before + 10.0,
        "{} vs {before}",
        regrouped.log_joint
    );
    // The regrouped tree's root splits the two clusters.
    let root = regrouped.tree.root();
    let mut sides: Vec<Vec<usize>> = regrouped.tree.nodes()[root]
        .children
        .iter()
        .map(|&c| {
            let mut l = regrouped.tree.leaves_of(c);
            l.sort_unstable();
            l
        })
        .collect();
    sides.sort();
    assert_eq!(sides, vec![(0..6).collect::<Vec<_>>(), (6..12).collect()]);
    // Too few lineages to choose among: nothing to regroup.
    assert!(
        regroup(&model, &leaves, &tree, 2, &threads, &|| false)
            .unwrap()
            .is_none()
    );
}
