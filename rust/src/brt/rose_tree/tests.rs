//! Tree operations against slow references (walks up the parent pointers, enumeration of
//! every tree-consistent partition) and on a chain of 100,000 leaves, which any recursive
//! walk would overflow the stack on.

use std::time::Instant;

use ndarray::Array2;

use super::*;
use crate::brt::{self, Mixing, Predictor, evidence_gradient, log_cluster_weights};
use crate::models::{BetaBernoulli, ClusterModel};
use crate::parallel::Threads;
use crate::tree::Topology;

/// A reproducible pseudo-random bit for entry `(i, j)`: a multiplicative hash, since tests
/// need varied data, not statistical quality.
fn bit(i: usize, j: usize, seed: u64) -> f64 {
    let h = (i as u64 ^ (j as u64) << 32 ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    f64::from(u8::from(h >> 63 == 1))
}

/// The distinct heights of `tree`, in increasing order.
fn distinct_heights(tree: &RoseTree) -> Vec<f64> {
    let mut levels = tree.heights().to_vec();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    levels
}

/// A fitted rose tree (multi-way nodes) on clustered binary data.
fn fitted(n: usize, seed: u64) -> RoseTree {
    let protos = [
        [1., 1., 1., 0., 0., 0.],
        [0., 0., 0., 1., 1., 1.],
        [1., 0., 1., 0., 1., 0.],
    ];
    let x = Array2::from_shape_fn((n, 6), |(i, j)| {
        let noise = bit(i, j, seed) * bit(i, j + 6, seed) * bit(i, j + 12, seed);
        (protos[i % 3][j] - noise).abs()
    });
    let model = BetaBernoulli::new(&[0.5], &[0.5], 6).unwrap();
    let params = brt::BrtParams::new(Mixing::Brt { gamma: 0.3 })
        .check()
        .unwrap();
    brt::fit(&model, &params, x.view()).unwrap()
}

/// `h_v` by walking from `v` up to the root.
fn height_by_walk(tree: &RoseTree, v: usize) -> f64 {
    let mut best = f64::NEG_INFINITY;
    let mut a = Some(v);
    while let Some(u) = a {
        best = best.max(tree.value(u).log_r());
        a = tree.node(u).parent;
    }
    -best
}

/// Heller & Ghahramani's cut as a recursive descent (fine on these small trees).
fn cut_by_descent(tree: &RoseTree, v: usize, log_t: f64, out: &mut Vec<usize>) {
    let node = tree.node(v);
    if node.is_leaf() || tree.value(v).log_r() >= log_t {
        out.push(v);
    } else {
        for &c in &node.children {
            cut_by_descent(tree, c, log_t, out);
        }
    }
}

#[test]
fn heights_are_the_path_maximum_of_ln_r_and_monotone() {
    for seed in 1..4 {
        let tree = fitted(30, seed);
        let h = tree.heights();
        for v in 0..tree.nodes().len() {
            assert_eq!(h[v], height_by_walk(&tree, v));
            if let Some(p) = tree.node(v).parent {
                assert!(h[p] >= h[v]);
            }
        }
        assert!(
            h[..tree.n_leaves()]
                .iter()
                .all(|&x| x == 0.0 && x.is_sign_positive())
        );
    }
}

#[test]
fn cut_equals_the_top_down_descent_for_every_threshold() {
    for seed in 1..4 {
        let tree = fitted(40, seed);
        let mut thresholds = vec![0.0, 1e-300, 1e-9, 0.1, 0.5, 0.9, 1.0 - 1e-12, 1.0];
        // The node values themselves, where a rounding slip would show.
        thresholds.extend(tree.values().iter().map(|n| n.log_r().exp()));
        for t in thresholds {
            let mut expected = Vec::new();
            cut_by_descent(&tree, tree.root(), t.ln(), &mut expected);
            expected.sort_unstable();
            assert_eq!(tree.cut(t).unwrap(), expected, "threshold {t}");
        }
        for bad in [-0.1, 1.5, f64::NAN] {
            assert!(matches!(
                tree.cut(bad),
                Err(RoseTreeError::InvalidParameter { ref name, .. }) if name == "threshold"
            ));
        }
    }
}

#[test]
fn map_partition_maximises_the_partition_posterior_over_all_partitions() {
    for seed in 1..4 {
        let tree = fitted(10, seed);
        let score = |p: &Partition| {
            p.log_weight + p.clusters.iter().map(|&c| tree.value(c).log_f).sum::<f64>()
        };
        let parts = tree.partitions(1_000_000).unwrap();
        assert_eq!(parts.len() as u128, tree.n_partitions().unwrap());
        let best = parts.iter().map(score).fold(f64::NEG_INFINITY, f64::max);
        let map = tree.map_partition();
        let found = parts.iter().find(|p| {
            let mut c = p.clusters.clone();
            c.sort_unstable();
            c == map
        });
        let found = found.expect("the MAP partition is tree-consistent");
        assert!((score(found) - best).abs() <= 1e-9 * best.abs());
    }
}

#[test]
fn max_clusters_is_the_lowest_cut_with_at_most_k_clusters() {
    for seed in 1..4 {
        let tree = fitted(40, seed);
        let n = tree.n_leaves();
        // Every distinct threshold (below all heights too) and the clusters it gives.
        let levels: Vec<f64> = [vec![-1.0], distinct_heights(&tree)].concat();
        let counts: Vec<usize> = levels
            .iter()
            .map(|&t| tree.clusters_at_height(t).unwrap().len())
            .collect();
        for k in 1..=n + 2 {
            let got = tree.max_clusters(k).unwrap();
            let lowest = levels
                .iter()
                .zip(&counts)
                .find(|&(_, &c)| c <= k)
                .map(|(&t, _)| t)
                .unwrap();
            assert_eq!(got, tree.clusters_at_height(lowest).unwrap(), "k = {k}");
            if counts.contains(&k) {
                assert_eq!(got.len(), k);
            }
            tree.labels(&got).unwrap();
        }
        assert_eq!(tree.max_clusters(1).unwrap(), vec![tree.root()]);
        assert!(tree.max_clusters(0).is_err());
    }
}

#[test]
fn labels_number_clusters_by_first_row_and_reject_non_partitions() {
    // ((0, 1, 2), (3, 4)) with made-up values.
    let topo = Topology::new(5, vec![vec![2, 0, 1], vec![3, 4], vec![5, 6]]).unwrap();
    let z = vec![0.0; 8];
    let tree = RoseTree::from_parts(&topo, &z, &z, &z, &[-1.0; 8]).unwrap();
    assert_eq!(tree.labels(&[6, 5]).unwrap(), vec![0, 0, 0, 1, 1]);
    assert_eq!(tree.labels(&[3, 4, 0, 1, 2]).unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(tree.labels(&[7]).unwrap(), vec![0; 5]);
    for bad in [&[5][..], &[5, 6, 3], &[5, 6, 6], &[5, 6, 8]] {
        assert!(matches!(
            tree.labels(bad),
            Err(RoseTreeError::InvalidParameter { ref name, .. }) if name == "clusters"
        ));
    }
}

/// The clusters of a linkage matrix cut at `t` (SciPy's `fcluster(Z, t, "distance")`), as
/// sorted lists of rows, by merging rows of height ≤ t with a union–find.
fn linkage_clusters(z: &[[f64; 4]], n: usize, t: f64) -> Vec<Vec<usize>> {
    let mut members: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
    let mut alive = vec![true; n];
    for row in z {
        let (a, b) = (row[0] as usize, row[1] as usize);
        assert!(
            a < members.len() && b < members.len() && a != b,
            "refers to earlier clusters"
        );
        if row[2] <= t {
            let mut m = [members[a].clone(), members[b].clone()].concat();
            m.sort_unstable();
            assert_eq!(m.len() as f64, row[3]);
            alive[a] = false;
            alive[b] = false;
            members.push(m);
            alive.push(true);
        } else {
            members.push(Vec::new());
            alive.push(false);
        }
    }
    let mut out: Vec<Vec<usize>> = members
        .into_iter()
        .zip(alive)
        .filter(|(m, a)| *a && !m.is_empty())
        .map(|(m, _)| m)
        .collect();
    out.sort();
    out
}

#[test]
fn linkage_is_monotonic_and_its_cuts_are_the_trees_clusters() {
    for seed in 1..4 {
        let tree = fitted(40, seed);
        let n = tree.n_leaves();
        let z = tree.to_linkage().unwrap();
        assert_eq!(z.len(), n - 1);
        assert!(z.windows(2).all(|w| w[0][2] <= w[1][2]));
        assert_eq!(z[n - 2][3], n as f64);
        for t in distinct_heights(&tree) {
            let mut expected: Vec<Vec<usize>> = tree
                .clusters_at_height(t)
                .unwrap()
                .into_iter()
                .map(|c| tree.leaves_of(c))
                .collect();
            expected.sort();
            assert_eq!(linkage_clusters(&z, n, t), expected);
        }
    }
}

#[test]
fn newick_lengths_are_height_differences() {
    let topo = Topology::new(4, vec![vec![0, 1], vec![4, 2, 3]]).unwrap();
    // ln r = ln π + ln f − ln p; at the root r = e^-3, at node 4 r = e^-1.
    let log_f = [0.0, 0.0, 0.0, 0.0, -1.0, -3.0];
    let log_p = [0.0; 6];
    let log_pi = [0.0; 6];
    let tree = RoseTree::from_parts(&topo, &log_f, &log_p, &log_pi, &[-1.0; 6]).unwrap();
    assert_eq!(tree.heights(), [0.0, 0.0, 0.0, 0.0, 1.0, 3.0]);
    assert_eq!(tree.to_newick(None), "((0,1),2,3);");
    assert_eq!(
        tree.to_newick_with_lengths(None).unwrap(),
        "((0:1,1:1):2,2:3,3:3);"
    );
}

#[test]
fn partitions_refuse_huge_outputs_instead_of_exhausting_memory() {
    let tree = caterpillar_topology(30_000);
    let z = vec![0.0; 2 * 30_000 - 1];
    let tree = RoseTree::from_parts(&tree, &z, &z, &z, &z).unwrap();
    assert_eq!(tree.n_partitions(), Some(30_000));
    assert!(matches!(
        tree.partitions(100_000),
        Err(RoseTreeError::InvalidParameter { ref name, .. }) if name == "limit"
    ));
}

/// A chain: internal node `n + k` joins node `n + k − 1` (leaf 0 for k = 0) and leaf k + 1.
fn caterpillar_topology(n: usize) -> Topology {
    let internal = (0..n - 1)
        .map(|k| vec![if k == 0 { 0 } else { n + k - 1 }, k + 1])
        .collect();
    Topology::new(n, internal).unwrap()
}

#[test]
fn every_tree_operation_handles_a_chain_of_100000_leaves() {
    let n = 100_000;
    let start = Instant::now();
    let x = Array2::from_shape_fn((n, 3), |(i, j)| bit(i, j, 7));
    let model = BetaBernoulli::new(&[1.0], &[1.0], 3).unwrap();
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    let topo = caterpillar_topology(n);
    let mixing = Mixing::Brt { gamma: 0.5 };
    let tree = brt::evaluate(&model, &mixing, &topo, &leaves).unwrap();
    let root = tree.root();
    assert_eq!(tree.node(root).n_leaves, n);
    assert!(tree.log_evidence().is_finite());

    let h = tree.heights();
    assert!((0..root).all(|v| h[tree.node(v).parent.unwrap()] >= h[v]));
    tree.labels(&tree.cut(0.5).unwrap()).unwrap();
    tree.labels(&tree.map_partition()).unwrap();
    assert_eq!(tree.max_clusters(1).unwrap(), vec![root]);
    let some = tree.max_clusters(10).unwrap();
    assert!(!some.is_empty() && some.len() <= 10);
    assert_eq!(tree.to_linkage().unwrap().len(), n - 1);
    let newick = tree.to_newick(None);
    assert!(newick.starts_with(&"(".repeat(n - 1)) && newick.ends_with(");"));
    assert!(tree.to_newick_with_lengths(None).unwrap().ends_with(");"));
    assert_eq!(tree.n_partitions(), Some(n as u128));
    assert!((tree.n_partitions_log10() - (n as f64).log10()).abs() < 1e-9);
    assert!(tree.partitions(10).is_err());
    assert_eq!(tree.leaves_of(root).len(), n);
    assert_eq!(tree.topology(), topo);

    let log_w = log_cluster_weights(&tree);
    let total = crate::math::log_sum_exp(&log_w);
    assert!(total.abs() < 1e-9, "weights sum to {}", total.exp());
    let predictor = Predictor::new(model.clone(), tree.clone(), leaves.clone()).unwrap();
    let rows: Vec<_> = (0..3).map(|i| leaves[i].clone()).collect();
    let clusters = tree.cut(0.5).unwrap();
    let (log_p, proba) = predictor
        .flat_responsibilities(&clusters, &rows, &Threads::default(), &|| false)
        .unwrap();
    assert!(log_p.iter().all(|l| l.is_finite()));
    assert!(
        proba
            .rows()
            .into_iter()
            .all(|r| (r.sum() - 1.0).abs() < 1e-9)
    );
    predictor
        .log_predictive(&rows, &Threads::default(), &|| false)
        .unwrap();
    let g = evidence_gradient(&model, &mixing, &topo, &leaves).unwrap();
    assert!(g.log_evidence.is_finite());
    let elapsed = start.elapsed().as_secs_f64();
    assert!(elapsed < 60.0, "took {elapsed:.1} s");
}
