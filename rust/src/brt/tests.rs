//! Engine tests against independent, slow references: a greedy search that rescores every
//! pair and merge from scratch through [`evaluate`], brute-force enumeration of partitions
//! and of rose trees, and the identities of BRT §1.3.

use ndarray::Array2;

use super::exhaustive::{log_marginals_for_test, optimal_by_enumeration, optimal_by_subset_dp};
use super::*;
use crate::math::log_sum_exp;
use crate::models::{BetaBernoulli, ClusterModel};
use crate::parallel::Threads;
use crate::tree::Topology;

/// A small xorshift generator: tests need reproducible data, not statistical quality.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Binary data from a few noisy prototypes, so that there is structure to find.
fn clustered_binary(rng: &mut Rng, n: usize, d: usize, k: usize) -> Array2<f64> {
    let protos: Vec<Vec<bool>> = (0..k)
        .map(|_| (0..d).map(|_| rng.unit() < 0.5).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| {
        let bit = protos[i % k][j] ^ (rng.unit() < 0.15);
        f64::from(u8::from(bit))
    })
}

fn all_mixings() -> [Mixing; 3] {
    [
        Mixing::Brt { gamma: 0.4 },
        Mixing::Gamma { gamma: 0.3 },
        Mixing::Dp { alpha: 1.7 },
    ]
}

/// A forest member in the reference search: its nested shape as a topology over all rows.
#[derive(Clone)]
enum Shape {
    Leaf(usize),
    Node(Vec<Shape>),
}

impl Shape {
    fn children(&self) -> Vec<Shape> {
        match self {
            Shape::Leaf(_) => Vec::new(),
            Shape::Node(c) => c.clone(),
        }
    }
    fn is_leaf(&self) -> bool {
        matches!(self, Shape::Leaf(_))
    }
    fn rows(&self, out: &mut Vec<usize>) {
        match self {
            Shape::Leaf(i) => out.push(*i),
            Shape::Node(c) => c.iter().for_each(|s| s.rows(out)),
        }
    }
    /// Canonical form: children ordered by their smallest row.
    fn canonical(&self) -> String {
        match self {
            Shape::Leaf(i) => i.to_string(),
            Shape::Node(c) => {
                let mut parts: Vec<(usize, String)> = c
                    .iter()
                    .map(|s| {
                        let mut r = Vec::new();
                        s.rows(&mut r);
                        (*r.iter().min().unwrap(), s.canonical())
                    })
                    .collect();
                parts.sort();
                format!(
                    "({})",
                    parts.into_iter().map(|p| p.1).collect::<Vec<_>>().join(",")
                )
            }
        }
    }
}

fn shape_of(tree: &RoseTree, id: usize) -> Shape {
    let node = tree.node(id);
    if node.is_leaf() {
        Shape::Leaf(id)
    } else {
        Shape::Node(node.children.iter().map(|&c| shape_of(tree, c)).collect())
    }
}

/// `ln p` of a shape over a subset of rows, through the independent `evaluate` path.
fn log_p_of(model: &BetaBernoulli, mixing: &Mixing, x: &Array2<f64>, shape: &Shape) -> f64 {
    let mut rows = Vec::new();
    shape.rows(&mut rows);
    let local: std::collections::HashMap<usize, usize> =
        rows.iter().enumerate().map(|(k, &r)| (r, k)).collect();
    let mut internal = Vec::new();
    fn build(
        s: &Shape,
        local: &std::collections::HashMap<usize, usize>,
        n: usize,
        internal: &mut Vec<Vec<usize>>,
    ) -> usize {
        match s {
            Shape::Leaf(r) => local[r],
            Shape::Node(c) => {
                let ids = c.iter().map(|t| build(t, local, n, internal)).collect();
                internal.push(ids);
                n + internal.len() - 1
            }
        }
    }
    build(shape, &local, rows.len(), &mut internal);
    let sub = x.select(ndarray::Axis(0), &rows);
    let leaves = model.leaf_stats_all(sub.view()).unwrap();
    let topo = Topology::new(rows.len(), internal).unwrap();
    evaluate(model, mixing, &topo, &leaves)
        .unwrap()
        .log_evidence()
}

/// Figure 1.4 done the slow way: every step rescores every pair and operation from scratch.
fn reference_greedy(
    model: &BetaBernoulli,
    mixing: &Mixing,
    binary: bool,
    x: &Array2<f64>,
) -> (String, f64) {
    let n = x.nrows();
    let mut forest: Vec<(usize, Shape, f64)> = (0..n)
        .map(|i| {
            (
                i,
                Shape::Leaf(i),
                log_p_of(model, mixing, x, &Shape::Leaf(i)),
            )
        })
        .collect();
    let mut next_id = n;
    while forest.len() > 1 {
        let mut best: Option<(f64, usize, usize, Shape, f64)> = None;
        for a in 0..forest.len() {
            for b in 0..forest.len() {
                let ((ia, sa, pa), (ib, sb, pb)) = (&forest[a], &forest[b]);
                if ia >= ib {
                    continue;
                }
                let mut ops = vec![Shape::Node(vec![sa.clone(), sb.clone()])];
                if !binary {
                    if !sa.is_leaf() {
                        let mut c = sa.children();
                        c.push(sb.clone());
                        ops.push(Shape::Node(c));
                    }
                    if !sb.is_leaf() {
                        let mut c = sb.children();
                        c.push(sa.clone());
                        ops.push(Shape::Node(c));
                    }
                    if !sa.is_leaf() && !sb.is_leaf() {
                        let mut c = sa.children();
                        c.extend(sb.children());
                        ops.push(Shape::Node(c));
                    }
                }
                for shape in ops {
                    let lp = log_p_of(model, mixing, x, &shape);
                    let score = lp - pa - pb;
                    // Strictly better only: earlier pairs (lower ids) and earlier ops win ties.
                    if best.as_ref().is_none_or(|b| score > b.0 + 1e-9) {
                        best = Some((score, a, b, shape, lp));
                    }
                }
            }
        }
        let (_, a, b, shape, lp) = best.unwrap();
        let (hi, lo) = (a.max(b), a.min(b));
        forest.remove(hi);
        forest.remove(lo);
        forest.push((next_id, shape, lp));
        next_id += 1;
    }
    (forest[0].1.canonical(), forest[0].2)
}

#[test]
fn greedy_matches_the_slow_reference() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for trial in 0..12 {
        let n = 5 + trial % 6;
        let x = clustered_binary(&mut rng, n, 16, 2 + trial % 3);
        // Distinct per-feature priors: symmetric configurations then score differently, so
        // the comparison is not at the mercy of summation order in exact ties.
        let alpha: Vec<f64> = (0..16).map(|_| 0.3 + rng.unit()).collect();
        let beta: Vec<f64> = (0..16).map(|_| 0.3 + rng.unit()).collect();
        let model = BetaBernoulli::new(&alpha, &beta, 16).unwrap();
        for mixing in all_mixings() {
            for binary in [false, true] {
                let params = BrtParams::new(mixing).binary(binary).check().unwrap();
                let tree = fit(&model, &params, x.view()).unwrap();
                let (canon, lp) = reference_greedy(&model, &mixing, binary, &x);
                assert_eq!(
                    shape_of(&tree, tree.root()).canonical(),
                    canon,
                    "{mixing:?} binary={binary}"
                );
                assert!((tree.log_evidence() - lp).abs() < 1e-8 * lp.abs());
            }
        }
    }
}

#[test]
fn thread_count_does_not_change_the_tree() {
    let mut rng = Rng(7);
    // Large enough for every parallel code path (scans and merges over more than
    // PAR_THRESHOLD trees).
    let x = clustered_binary(&mut rng, 2 * crate::parallel::PAR_THRESHOLD + 50, 24, 9);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 24).unwrap();
    let base = BrtParams::new(Mixing::Brt { gamma: 0.5 });
    let run = |p: BrtParams| fit(&model, &p.check().unwrap(), x.view()).unwrap();
    let one = run(base.n_threads(Some(1)));
    let two = run(base.n_threads(Some(2)));
    let global = run(base);
    assert_eq!(one, two);
    assert_eq!(one, global);
}

#[test]
fn evidence_is_the_sum_over_enumerated_partitions() {
    let mut rng = Rng(99);
    for _ in 0..10 {
        let x = clustered_binary(&mut rng, 7, 10, 3);
        let model = BetaBernoulli::new(&[1.0], &[2.0], 10).unwrap();
        for mixing in all_mixings() {
            let tree = fit(&model, &BrtParams::new(mixing).check().unwrap(), x.view()).unwrap();
            let parts = tree.partitions(100_000).unwrap();
            assert_eq!(parts.len() as u128, tree.n_partitions().unwrap());
            let weights: Vec<f64> = parts.iter().map(|p| p.log_weight).collect();
            assert!(
                log_sum_exp(&weights).abs() < 1e-12,
                "mixing proportions sum to one"
            );
            let terms: Vec<f64> = parts
                .iter()
                .map(|p| {
                    p.log_weight + p.clusters.iter().map(|&c| tree.value(c).log_f).sum::<f64>()
                })
                .collect();
            assert!((log_sum_exp(&terms) - tree.log_evidence()).abs() < 1e-10);
        }
    }
}

#[test]
fn eq_1_10_binary_trees_leave_the_same_mass_off_the_finest_partition() {
    // For any binary tree on n leaves, Σ_{φ ≠ finest} m(φ|B) = 1 − (1 − γ)^{n−1}.
    let gamma = 0.35;
    let mut rng = Rng(5);
    for n in 2..9 {
        let x = clustered_binary(&mut rng, n, 6, 2);
        let model = BetaBernoulli::new(&[1.0], &[1.0], 6).unwrap();
        let mixing = Mixing::Brt { gamma };
        let tree = fit(
            &model,
            &BrtParams::new(mixing).binary(true).check().unwrap(),
            x.view(),
        )
        .unwrap();
        let parts = tree.partitions(100_000).unwrap();
        let finest: f64 = parts
            .iter()
            .find(|p| p.clusters.len() == n)
            .unwrap()
            .log_weight
            .exp();
        let rest = 1.0 - finest;
        assert!((rest - (1.0 - (1.0 - gamma).powi(n as i32 - 1))).abs() < 1e-12);
    }
}

#[test]
fn subset_dp_finds_the_enumerated_optimum() {
    let mut rng = Rng(31);
    for n in 2..=6 {
        let x = clustered_binary(&mut rng, n, 12, 2);
        let model = BetaBernoulli::new(&[0.5], &[0.5], 12).unwrap();
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        let log_f = log_marginals_for_test(&model, &leaves);
        for mixing in [Mixing::Brt { gamma: 0.5 }, Mixing::Gamma { gamma: 0.2 }] {
            for binary in [false, true] {
                let topo = optimal_by_subset_dp(&mixing, binary, &log_f, n);
                let dp = evaluate(&model, &mixing, &topo, &leaves)
                    .unwrap()
                    .log_evidence();
                let brute = optimal_by_enumeration(&mixing, binary, &log_f, n);
                assert!(
                    (dp - brute).abs() < 1e-9,
                    "n={n} {mixing:?} binary={binary}"
                );
                if binary {
                    assert!(topo.is_binary(), "binary search returned a multi-way node");
                }
            }
        }
    }
}

#[test]
fn subset_dp_returns_a_tree_when_every_cluster_is_impossible() {
    // ln f = −∞ for every subset (a model that gives the data zero probability): the DP
    // used to find no choice, and rebuilding the tree recursed until the stack overflowed.
    for n in 2..=6 {
        let log_f = vec![f64::NEG_INFINITY; 1 << n];
        for mixing in [Mixing::Brt { gamma: 0.5 }, Mixing::Gamma { gamma: 0.2 }] {
            for binary in [false, true] {
                let topo = optimal_by_subset_dp(&mixing, binary, &log_f, n);
                assert_eq!(topo.n_leaves(), n);
                assert!(!binary || topo.is_binary());
                let brute = optimal_by_enumeration(&mixing, binary, &log_f, n);
                assert_eq!(brute, f64::NEG_INFINITY);
            }
        }
    }
}

#[test]
fn greedy_never_beats_the_exhaustive_optimum() {
    let mut rng = Rng(77);
    for trial in 0..20 {
        let n = 3 + trial % 6;
        let x = clustered_binary(&mut rng, n, 16, 3);
        let model = BetaBernoulli::new(&[1.0], &[1.0], 16).unwrap();
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        for mixing in all_mixings() {
            let best = optimal_tree(&model, &mixing, false, &leaves)
                .unwrap()
                .log_evidence();
            let greedy = fit(&model, &BrtParams::new(mixing).check().unwrap(), x.view())
                .unwrap()
                .log_evidence();
            assert!(
                greedy <= best + 1e-9,
                "{mixing:?}: greedy {greedy} > optimum {best}"
            );
        }
    }
}

#[test]
fn edge_contraction_never_lowers_the_evidence() {
    let mut rng = Rng(11);
    for _ in 0..10 {
        let x = clustered_binary(&mut rng, 40, 12, 4);
        let model = BetaBernoulli::new(&[1.0], &[1.0], 12).unwrap();
        for mixing in all_mixings() {
            let params = BrtParams::new(mixing).binary(true);
            let tree = fit(&model, &params.check().unwrap(), x.view()).unwrap();
            let contracted =
                fit(&model, &params.contract(true).check().unwrap(), x.view()).unwrap();
            assert!(contracted.log_evidence() >= tree.log_evidence() - 1e-9);
            // The contracted tree's numbers are what evaluating its shape gives.
            let leaves = model.leaf_stats_all(x.view()).unwrap();
            let again = evaluate(&model, &mixing, &contracted.topology(), &leaves).unwrap();
            assert!((again.log_evidence() - contracted.log_evidence()).abs() < 1e-9);
        }
    }
}

#[test]
fn interrupt_stops_the_search() {
    let mut rng = Rng(3);
    let x = clustered_binary(&mut rng, 300, 8, 3);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 8).unwrap();
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap();
    let err = fit_stats(&model, &params, leaves, &|| true).unwrap_err();
    assert!(matches!(err, crate::RoseTreeError::Interrupted));
}

#[test]
fn too_few_rows_and_bad_options_are_errors() {
    let model = BetaBernoulli::new(&[1.0], &[1.0], 2).unwrap();
    let x = Array2::<f64>::zeros((1, 2));
    assert!(
        fit(
            &model,
            &BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap(),
            x.view()
        )
        .is_err()
    );
    let err = BrtParams::new(Mixing::Brt { gamma: 1.5 })
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("gamma"), "{err}");
    let err = BrtParams::new(Mixing::Brt { gamma: 0.5 })
        .n_threads(Some(0))
        .check()
        .unwrap_err();
    assert!(err.to_string().contains("n_jobs"), "{err}");
    assert!(Threads::new(Some(0)).is_err());
}

#[test]
fn greedy_matches_the_reference_on_a_permuted_sparse_case() {
    // Found by the Python property test of row-permutation invariance.
    let rows = [
        [0., 0., 0., 0., 0., 0., 0., 0.],
        [0., 0., 0., 0., 0., 0., 0., 1.],
        [0., 0., 0., 0., 0., 0., 1., 0.],
        [0., 0., 0., 0., 0., 0., 1., 1.],
        [0., 0., 0., 0., 1., 0., 0., 0.],
        [0., 0., 0., 1., 1., 0., 0., 0.],
        [1., 0., 0., 0., 0., 1., 0., 0.],
        [1., 0., 0., 1., 0., 0., 0., 1.],
    ];
    let perm = [5, 6, 2, 7, 1, 4, 0, 3];
    let alpha = [
        1.9252029063692582,
        0.6530590771345497,
        1.7083563049667023,
        0.5537796092394345,
        1.1717678479421603,
        0.5310633268348612,
        1.471362015627923,
        1.7309711313308742,
    ];
    let beta = [
        1.0233652955884602,
        1.9267742058707225,
        1.703065940854157,
        0.8749660312016792,
        1.278792931505673,
        1.5806131700044108,
        1.7060766929421523,
        1.8868454004476884,
    ];
    let model = BetaBernoulli::new(&alpha, &beta, 8).unwrap();
    let mixing = Mixing::Brt { gamma: 0.5 };
    for order in [[0, 1, 2, 3, 4, 5, 6, 7], perm] {
        let x = Array2::from_shape_fn((8, 8), |(i, j)| rows[order[i]][j]);
        let tree = fit(&model, &BrtParams::new(mixing).check().unwrap(), x.view()).unwrap();
        let (canon, lp) = reference_greedy(&model, &mixing, false, &x);
        assert_eq!(shape_of(&tree, tree.root()).canonical(), canon);
        assert!((tree.log_evidence() - lp).abs() < 1e-9);
    }
}

#[test]
fn cut_remixed_is_the_cut_of_the_remixed_tree() {
    let mut rng = Rng(11);
    for seed in 0..6 {
        let x = clustered_binary(&mut rng, 60, 16, 2 + seed);
        let model = BetaBernoulli::new(&[1.0], &[1.0], 16).unwrap();
        let tree = fit(
            &model,
            &BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap(),
            x.view(),
        )
        .unwrap();
        let mut clusters_seen = std::collections::BTreeSet::new();
        for mixing in all_mixings() {
            for t in [0.0, 1e-6, 0.1, 0.5, 0.9, 1.0] {
                let want = remix(&tree, &mixing).cut(t).unwrap();
                assert_eq!(cut_remixed(&tree, &mixing, t).unwrap(), want);
                clusters_seen.insert(want.len());
            }
        }
        // The thresholds give cuts of several sizes, not one trivial cut.
        assert!(clusters_seen.len() >= 3, "{clusters_seen:?}");
        assert!(cut_remixed(&tree, &Mixing::Dp { alpha: 1.0 }, 1.5).is_err());
    }
}
