//! Insertion against independent computations: after every row, the grown tree's per-node
//! quantities equal [`evaluate`] of the same shape over all rows (statistics merged from
//! scratch), the statistics kept on changed paths equal a from-scratch merge, and the shape
//! stays a valid rose tree (binary in binary mode) whatever the order of the rows.

use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::brt::{BrtParams, evaluate, fit_stats, node_stats};
use crate::models::{
    BetaBernoulli, DirichletMultinomial, NormalGamma, NormalInverseWishart, RowQueries,
};

fn mixings() -> [Mixing; 3] {
    [
        Mixing::Brt { gamma: 0.5 },
        Mixing::Gamma { gamma: 0.3 },
        Mixing::Dp { alpha: 1.5 },
    ]
}

/// Rows from `k` random binary prototypes (row `i` from prototype `i % k`) with 10 % of the
/// bits flipped.
fn binary_rows(rng: &mut Xoshiro256PlusPlus, n: usize, d: usize, k: usize) -> Array2<f64> {
    noisy_prototypes(rng, n, d, k, 0.1)
}

/// Rows from `k` random binary prototypes with a fraction `flip` of the bits flipped.
fn noisy_prototypes(
    rng: &mut Xoshiro256PlusPlus,
    n: usize,
    d: usize,
    k: usize,
    flip: f64,
) -> Array2<f64> {
    let protos: Vec<Vec<bool>> = (0..k)
        .map(|_| (0..d).map(|_| rng.random_bool(0.5)).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| {
        f64::from(u8::from(protos[i % k][j] ^ rng.random_bool(flip)))
    })
}

/// Rows from `k` Gaussian blobs (means 6 apart on average, unit noise).
fn gaussian_rows(rng: &mut Xoshiro256PlusPlus, n: usize, d: usize, k: usize) -> Array2<f64> {
    let means: Vec<Vec<f64>> = (0..k)
        .map(|_| (0..d).map(|_| rng.random_range(-6.0..6.0)).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| {
        means[i % k][j] + rng.random_range(-1.0..1.0) + rng.random_range(-1.0..1.0)
    })
}

/// Count rows from `k` peaked distributions over `d` categories.
fn count_rows(rng: &mut Xoshiro256PlusPlus, n: usize, d: usize, k: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |(i, j)| {
        let peak = (i % k) * d / k;
        let weight = if j == peak { 6 } else { 1 };
        f64::from(rng.random_range(0..weight + 1))
    })
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Fits the first `n0` rows of `x` (in `order`), inserts the others one at a time, and
/// after every row checks the tree against [`evaluate`] and the statistics on every
/// internal node against a from-scratch merge (through `ln f`, and with `same` directly).
fn check_growth<M: RowQueries>(
    model: &M,
    x: &Array2<f64>,
    n0: usize,
    mixing: Mixing,
    binary: bool,
    same: &dyn Fn(&M::Stats, &M::Stats) -> bool,
) {
    let all = model.leaf_stats_all(x.view()).unwrap();
    let params = BrtParams::new(mixing).binary(binary).check().unwrap();
    let tree = fit_stats(model, &params, all[..n0].to_vec(), &|| false).unwrap();
    let grow_params = GrowParams::new(mixing).binary(binary);
    let mut growing = GrowingTree::new(model, grow_params, &tree, all[..n0].to_vec()).unwrap();
    for (k, s) in all[n0..].iter().enumerate() {
        let ins = growing.insert(s.clone()).unwrap();
        assert_eq!(ins.row, n0 + k);
        let grown = growing.to_rose_tree();
        let n = n0 + k + 1;
        assert_eq!(grown.n_leaves(), n);
        for (id, node) in grown.nodes().iter().enumerate().skip(n) {
            assert!(node.children.len() >= 2, "node {id} has one child");
            if binary {
                assert_eq!(node.children.len(), 2, "node {id} of a binary tree");
            }
            assert!(node.children.iter().all(|&c| c < id));
        }
        let topology = grown.topology();
        let reference = evaluate(model, &mixing, &topology, &all[..n]).unwrap();
        for (id, (got, want)) in grown.values().iter().zip(reference.values()).enumerate() {
            for (what, g, w) in [
                ("ln f", got.log_f, want.log_f),
                ("ln p", got.log_p, want.log_p),
                ("ln pi", got.log_pi, want.log_pi),
                ("ln(1-pi)", got.log_1m_pi, want.log_1m_pi),
            ] {
                assert!(
                    g == w || close(g, w),
                    "{mixing:?} binary={binary} row {}: {what} of node {id}: {g} vs {w}",
                    n - 1
                );
            }
        }
        assert!(close(growing.log_evidence(), reference.log_evidence()));
        let scratch = node_stats(model, &topology, &all[..n]);
        for (k, &slot) in growing.internal_order().iter().enumerate() {
            assert!(
                same(&growing.slots[slot].stats, &scratch[n + k]),
                "statistics of node {}",
                n + k
            );
        }
    }
}

/// Fits the first `n0` rows of `x` and grows the tree by the others.
fn fit_and_grow<M: RowQueries>(
    model: &M,
    x: &Array2<f64>,
    n0: usize,
    mixing: Mixing,
    binary: bool,
) {
    let all = model.leaf_stats_all(x.view()).unwrap();
    let params = BrtParams::new(mixing).binary(binary).check().unwrap();
    let tree = fit_stats(model, &params, all[..n0].to_vec(), &|| false).unwrap();
    let grow_params = GrowParams::new(mixing).binary(binary);
    grow(
        model,
        grow_params,
        &tree,
        all[..n0].to_vec(),
        all[n0..].to_vec(),
        &|| false,
    )
    .unwrap();
}

#[test]
fn bernoulli_growth_matches_evaluation_and_exact_statistics() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(28);
    let x = binary_rows(&mut rng, 40, 8, 4);
    let model = BetaBernoulli::new(&[0.8], &[1.2], 8).unwrap();
    for mixing in mixings() {
        for binary in [false, true] {
            // Counts are integers: the statistics are exactly those of a fresh merge.
            check_growth(&model, &x, 10, mixing, binary, &|a, b| a == b);
        }
    }
}

#[test]
fn gaussian_growth_matches_evaluation() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let x = gaussian_rows(&mut rng, 36, 3, 3);
    let niw = NormalInverseWishart::new_diagonal(vec![0.0; 3], 0.05, 5.0, vec![2.0; 3]).unwrap();
    let ng = NormalGamma::new(&[0.0], 1.0, 3.0, &[2.0], 3).unwrap();
    for mixing in mixings() {
        for binary in [false, true] {
            // Sums of floats merged in another order: compared through ln f.
            let by_log_f_niw =
                |a: &_, b: &_| close(niw.log_marginal(a).unwrap(), niw.log_marginal(b).unwrap());
            check_growth(&niw, &x, 8, mixing, binary, &by_log_f_niw);
            let by_log_f_ng =
                |a: &_, b: &_| close(ng.log_marginal(a).unwrap(), ng.log_marginal(b).unwrap());
            check_growth(&ng, &x, 8, mixing, binary, &by_log_f_ng);
        }
    }
}

#[test]
fn counts_growth_matches_evaluation() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let x = count_rows(&mut rng, 30, 6, 3);
    let model = DirichletMultinomial::new(&[0.5], 6, false).unwrap();
    for mixing in mixings() {
        for binary in [false, true] {
            let by_log_f = |a: &_, b: &_| {
                close(
                    model.log_marginal(a).unwrap(),
                    model.log_marginal(b).unwrap(),
                )
            };
            check_growth(&model, &x, 6, mixing, binary, &by_log_f);
        }
    }
}

/// Any order of the same rows gives a valid tree with the right evidence; orders differ.
#[test]
fn order_changes_the_tree_but_not_its_validity() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let x = binary_rows(&mut rng, 30, 10, 3);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 10).unwrap();
    let mut shapes = std::collections::HashSet::new();
    for seed in 0..6 {
        let mut order: Vec<usize> = (0..30).collect();
        order.shuffle(&mut Xoshiro256PlusPlus::seed_from_u64(seed));
        let xs = x.select(ndarray::Axis(0), &order);
        check_growth(
            &model,
            &xs,
            2,
            Mixing::Brt { gamma: 0.5 },
            false,
            &|a, b| a == b,
        );
        // The shape over the original row numbers.
        let all = model.leaf_stats_all(xs.view()).unwrap();
        let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap();
        let tree = fit_stats(&model, &params, all[..2].to_vec(), &|| false).unwrap();
        let (grown, _) = grow(
            &model,
            GrowParams::new(Mixing::Brt { gamma: 0.5 }),
            &tree,
            all[..2].to_vec(),
            all[2..].to_vec(),
            &|| false,
        )
        .unwrap();
        let mut clusters: Vec<Vec<usize>> = (grown.n_leaves()..grown.nodes().len())
            .map(|v| {
                let mut rows: Vec<usize> =
                    grown.leaves_of(v).into_iter().map(|l| order[l]).collect();
                rows.sort_unstable();
                rows
            })
            .collect();
        clusters.sort();
        shapes.insert(clusters);
    }
    assert!(shapes.len() > 1, "six orders gave one tree");
}

/// Repairs only ever raise the evidence: from the same tree, one row inserted with repairs
/// ends at least as high as without, and strictly higher somewhere.
#[test]
fn repairs_raise_the_evidence() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(17);
    let mut improved = 0;
    for mixing in mixings() {
        for binary in [false, true] {
            for trial in 0..20 {
                let x = binary_rows(&mut rng, 24, 6, 3 + trial % 3);
                let model = BetaBernoulli::new(&[1.0], &[1.0], 6).unwrap();
                let all = model.leaf_stats_all(x.view()).unwrap();
                let params = BrtParams::new(mixing).binary(binary).check().unwrap();
                let tree = fit_stats(&model, &params, all[..12].to_vec(), &|| false).unwrap();
                let mut with = GrowParams::new(mixing).binary(binary);
                let mut without = with;
                without.max_moves = 0;
                with.max_moves = DEFAULT_MAX_MOVES;
                let mut a;
                let mut b = GrowingTree::new(&model, without, &tree, all[..12].to_vec()).unwrap();
                for s in &all[12..] {
                    // Both from the same tree: b's, which a copies before each row.
                    a = GrowingTree::new(&model, with, &b.to_rose_tree(), b.leaf_stats()).unwrap();
                    let moved = a.insert(s.clone()).unwrap().moves;
                    b.insert(s.clone()).unwrap();
                    let (ea, eb) = (a.log_evidence(), b.log_evidence());
                    assert!(ea >= eb - 1e-9 * eb.abs(), "{mixing:?}: {ea} < {eb}");
                    if moved > 0 && ea > eb + 1e-9 {
                        improved += 1;
                    }
                }
            }
        }
    }
    assert!(improved > 0, "no repair ever changed a tree");
}

/// Rows of separated clusters (64 bits, prototypes about 32 bits apart, 5 % noise),
/// streamed in random order into a tree of two rows, end up with their own cluster: every
/// cluster is the leaf set of one node.
#[test]
fn separated_clusters_stay_together() {
    let (k, per) = (4, 15);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 64).unwrap();
    for (seed, binary) in (0..40).map(|s| (s, s % 2 == 1)) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let x = noisy_prototypes(&mut rng, k * per, 64, k, 0.05);
        let mut order: Vec<usize> = (0..k * per).collect();
        order.shuffle(&mut rng);
        let xs = x.select(ndarray::Axis(0), &order);
        let all = model.leaf_stats_all(xs.view()).unwrap();
        let params = BrtParams::new(Mixing::Brt { gamma: 0.5 })
            .binary(binary)
            .check()
            .unwrap();
        let tree = fit_stats(&model, &params, all[..2].to_vec(), &|| false).unwrap();
        let grow_params = GrowParams::new(Mixing::Brt { gamma: 0.5 }).binary(binary);
        let (grown, _) = grow(
            &model,
            grow_params,
            &tree,
            all[..2].to_vec(),
            all[2..].to_vec(),
            &|| false,
        )
        .unwrap();
        let label = |leaf: usize| order[leaf] % k;
        for c in 0..k {
            let members: Vec<usize> = (0..k * per).filter(|&l| label(l) == c).collect();
            let found = (0..grown.nodes().len()).any(|v| {
                let mut leaves = grown.leaves_of(v);
                leaves.sort_unstable();
                leaves == members
            });
            if !found {
                fn show(t: &RoseTree, v: usize, label: &dyn Fn(usize) -> usize) -> String {
                    let node = t.node(v);
                    if node.children.is_empty() {
                        return format!("{}", label(v));
                    }
                    let inner: Vec<String> =
                        node.children.iter().map(|&c| show(t, c, label)).collect();
                    format!("[{}]", inner.join(" "))
                }
                panic!(
                    "seed {seed} binary={binary}: cluster {c} is split: {}",
                    show(&grown, grown.root(), &label)
                );
            }
        }
    }
}

#[test]
fn interrupt_stops_growth() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let x = binary_rows(&mut rng, 10, 4, 2);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 4).unwrap();
    let all = model.leaf_stats_all(x.view()).unwrap();
    let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap();
    let tree = fit_stats(&model, &params, all[..5].to_vec(), &|| false).unwrap();
    let got = grow(
        &model,
        GrowParams::new(Mixing::Brt { gamma: 0.5 }),
        &tree,
        all[..5].to_vec(),
        all[5..].to_vec(),
        &|| true,
    );
    assert!(matches!(got, Err(RoseTreeError::Interrupted)));
}

#[test]
fn wrong_number_of_leaves_is_an_error() {
    let model = BetaBernoulli::new(&[1.0], &[1.0], 2).unwrap();
    let x = ndarray::array![[0., 1.], [1., 0.], [1., 1.]];
    let all = model.leaf_stats_all(x.view()).unwrap();
    let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap();
    let tree = fit_stats(&model, &params, all.clone(), &|| false).unwrap();
    let got = GrowingTree::new(
        &model,
        GrowParams::new(params.mixing),
        &tree,
        all[..2].to_vec(),
    );
    assert!(matches!(got, Err(RoseTreeError::ShapeMismatch { .. })));
}

/// Rows with missing entries under the `"gamma"` rule: the shape of a data set on which a
/// rebuild once dissolved a node it still referred to.
#[test]
fn missing_entries_and_every_rule() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(156);
    for trial in 0..400 {
        let n = rng.random_range(4..14);
        let x = Array2::from_shape_fn((n, 5), |_| [0.0, 1.0, f64::NAN][rng.random_range(0..3)]);
        let n0 = rng.random_range(2..n);
        // Per-feature priors, tabulated for the first rows only (as the bindings do).
        let mut model =
            BetaBernoulli::new(&[0.7, 0.4, 1.3, 0.9, 0.6], &[1.1, 0.5, 0.8, 1.6, 0.9], 5).unwrap();
        model.prepare(n0 + 1);
        for mixing in mixings() {
            for binary in [false, true] {
                let _ = trial;
                check_growth(&model, &x, n0, mixing, binary, &|a, b| a == b);
            }
        }
    }
}

/// Local rebuilds reuse the `ln f` of unit pairs scored for earlier rows; every rebuild is
/// checked (in `try_rebuild`, under `cfg(test)`) against the same rebuild with nothing
/// kept, bit for bit. This grows trees where rows pass the same rebuilt nodes again, for
/// each model family, and requires that the check ran with kept scores.
#[test]
fn rebuilds_with_kept_pair_scores_equal_rebuilds_without() {
    let before = CHECKED_WITH_CACHE.with(std::cell::Cell::get);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2028);
    let mixing = Mixing::Brt { gamma: 0.5 };
    let bits = binary_rows(&mut rng, 160, 16, 6);
    // A prior per feature, as the data-driven default has.
    let alpha: Vec<f64> = (0..16).map(|i| 0.5 + 0.1 * f64::from(i)).collect();
    let beta: Vec<f64> = alpha.iter().rev().copied().collect();
    let bernoulli = BetaBernoulli::new(&alpha, &beta, 16).unwrap();
    let gauss = gaussian_rows(&mut rng, 120, 3, 5);
    let niw = NormalInverseWishart::new_diagonal(vec![0.0; 3], 0.05, 5.0, vec![2.0; 3]).unwrap();
    for binary in [false, true] {
        fit_and_grow(&bernoulli, &bits, 20, mixing, binary);
        fit_and_grow(&niw, &gauss, 20, mixing, binary);
    }
    let checked = CHECKED_WITH_CACHE.with(std::cell::Cell::get) - before;
    assert!(checked > 0, "no rebuild ran with kept pair scores");
}

/// The descent scores a node's internal children against the new row from join terms kept
/// per node (made once, then brought up to date as rows join the node), and its leaf
/// children from their rows packed side by side; every such score is checked (in `insert`
/// and `log_f_joined`, under `cfg(test)`) against `ln f` of the statistics, bit for bit.
/// This grows trees under tabulated beta–Bernoulli models, with a prior per feature (the
/// data-driven default) and a scalar one, tables for all rows or for the first fit's only
/// (as the bindings prepare them: the largest clusters then leave the tables), checks every
/// tree against `evaluate`, and requires that join terms were used.
#[test]
fn descent_scores_from_join_terms_equal_scores_from_statistics() {
    let before = JOINED.with(std::cell::Cell::get);
    let packed_before = PACKED.with(std::cell::Cell::get);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4242);
    let d = 70;
    let alpha: Vec<f64> = (0..d).map(|i| 0.2 + 0.03 * i as f64).collect();
    let beta: Vec<f64> = alpha.iter().rev().copied().collect();
    for trial in 0..6 {
        let x = binary_rows(&mut rng, 90, d, 4);
        let n0 = 30;
        let mut model = if trial % 2 == 0 {
            BetaBernoulli::new(&alpha, &beta, d).unwrap()
        } else {
            BetaBernoulli::new(&[0.6], &[0.9], d).unwrap()
        };
        model.prepare(if trial < 4 { n0 + 1 } else { x.nrows() + 1 });
        let mixing = mixings()[trial % 3];
        check_growth(&model, &x, n0, mixing, trial % 4 == 1, &|a, b| a == b);
    }
    let joined = JOINED.with(std::cell::Cell::get) - before;
    assert!(
        joined > 1000,
        "only {joined} descent scores came from join terms"
    );
    let packed = PACKED.with(std::cell::Cell::get) - packed_before;
    assert!(
        packed > 1000,
        "only {packed} descent scores came from packed rows"
    );
}
