//! Prediction against independent references: normalisation over every possible row or
//! completion, the weights from their product definition, cluster predictives from merged
//! statistics, and eq 1.24 from a full re-evaluation of the tree.

use ndarray::{Array1, Array2, array};

use super::*;
use crate::brt::{BrtParams, Mixing, evaluate, fit};
use crate::math::log_sum_exp;
use crate::models::ClusterModel;
use crate::models::{DirichletMultinomial, NormalInverseWishart};
use crate::test_util::compositions;

const NAN: f64 = f64::NAN;

fn never() -> bool {
    false
}

/// The greedy tree of `x` under `mixing`.
fn greedy_tree<M: RowQueries>(model: &M, mixing: Mixing, x: &Array2<f64>) -> RoseTree {
    fit(model, &BrtParams::new(mixing).check().unwrap(), x.view()).unwrap()
}

/// Reproducible pseudo-random binary data from a few noisy prototypes.
fn clustered_binary(seed: u64, n: usize, d: usize) -> Array2<f64> {
    let mut state = seed;
    let mut unit = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let protos: Vec<Vec<bool>> = (0..3)
        .map(|_| (0..d).map(|_| unit() < 0.5).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| {
        f64::from(u8::from(protos[i % 3][j] ^ (unit() < 0.15)))
    })
}

/// Every binary row of length `d`, as statistics.
fn all_binary_rows(model: &BetaBernoulli, d: usize) -> Vec<BernoulliStatsOf> {
    (0..1_u32 << d)
        .map(|b| {
            let row = Array1::from_shape_fn(d, |j| f64::from((b >> j) & 1));
            model.leaf_stats(row.view(), 0).unwrap()
        })
        .collect()
}

type BernoulliStatsOf = <BetaBernoulli as ClusterModel>::Stats;

fn mixings() -> [Mixing; 3] {
    [
        Mixing::Brt { gamma: 0.4 },
        Mixing::Gamma { gamma: 0.7 },
        Mixing::Dp { alpha: 1.3 },
    ]
}

/// `w_S` from its definition, one ancestor at a time, in linear space.
fn weights_by_definition(tree: &RoseTree) -> Vec<f64> {
    let nodes = tree.nodes();
    let r = |v: usize| tree.value(v).log_r().exp();
    (0..nodes.len())
        .map(|s| {
            let mut w = r(s);
            let (mut below, mut up) = (s, nodes[s].parent);
            while let Some(a) = up {
                w *= (1.0 - r(a)) * nodes[below].n_leaves as f64 / nodes[a].n_leaves as f64;
                below = a;
                up = nodes[a].parent;
            }
            w
        })
        .collect()
}

#[test]
fn weights_match_their_definition_and_sum_to_one() {
    let x = clustered_binary(5, 14, 6);
    let model = BetaBernoulli::new(&[0.8], &[1.2], 6).unwrap();
    for mixing in mixings() {
        for binary in [false, true] {
            let params = BrtParams::new(mixing).binary(binary).check().unwrap();
            let tree = fit(&model, &params, x.view()).unwrap();
            let log_w = log_cluster_weights(&tree);
            let direct = weights_by_definition(&tree);
            for (lw, w) in log_w.iter().zip(&direct) {
                assert!((lw.exp() - w).abs() < 1e-12, "{} vs {w}", lw.exp());
            }
            assert!(log_sum_exp(&log_w).abs() < 1e-12);
            // Leaves carry weight too (r = 1 at a leaf).
            assert!(log_w[..14].iter().all(|w| w.is_finite()));
        }
    }
}

#[test]
fn predictive_sums_to_one_over_every_binary_row() {
    let d = 5;
    let mut x = clustered_binary(11, 12, d);
    for with_nan in [false, true] {
        if with_nan {
            for (i, j) in [(0, 1), (3, 4), (3, 0), (7, 2), (11, 3)] {
                x[[i, j]] = NAN;
            }
        }
        let model = BetaBernoulli::new(&[0.5, 1.0, 2.0, 0.7, 1.5], &[1.0], d).unwrap();
        for mixing in mixings() {
            let tree = greedy_tree(&model, mixing, &x);
            let leaves = model.leaf_stats_all(x.view()).unwrap();
            let predictor = Predictor::new(model.clone(), tree.clone(), leaves).unwrap();
            let rows = all_binary_rows(&model, d);
            let log_p = predictor
                .log_predictive(&rows, &Threads::default(), &never)
                .unwrap();
            assert!(log_sum_exp(&log_p).abs() < 1e-12, "{}", log_sum_exp(&log_p));
        }
    }
}

#[test]
fn missing_entries_of_new_rows_are_marginalised() {
    let x = clustered_binary(3, 10, 4);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 4).unwrap();
    let tree = greedy_tree(&model, Mixing::Brt { gamma: 0.5 }, &x);
    let predictor = Predictor::new(
        model.clone(),
        tree.clone(),
        model.leaf_stats_all(x.view()).unwrap(),
    )
    .unwrap();
    let stats = |row: Array1<f64>| model.leaf_stats(row.view(), 0).unwrap();
    let rows = vec![
        stats(array![1., NAN, 0., NAN]),
        stats(array![1., 0., 0., 0.]),
        stats(array![1., 0., 0., 1.]),
        stats(array![1., 1., 0., 0.]),
        stats(array![1., 1., 0., 1.]),
        stats(array![NAN, NAN, NAN, NAN]),
    ];
    let lp = predictor
        .log_predictive(&rows, &Threads::default(), &never)
        .unwrap();
    assert!((lp[0] - log_sum_exp(&lp[1..5])).abs() < 1e-12);
    assert!(lp[5].abs() < 1e-12);
}

/// `ln w_S + ln f(D_S ∪ {x}) − ln f(D_S)` from merged statistics, without queries.
fn direct_terms<M: RowQueries>(p: &Predictor<M>, model: &M, x: &M::Stats) -> Vec<f64> {
    p.node_stats()
        .iter()
        .zip(p.log_weights())
        .map(|(s, lw)| {
            lw + model.log_marginal(&model.merge(s, x)).unwrap() - model.log_marginal(s).unwrap()
        })
        .collect()
}

/// Checks responsibilities and scores against [`direct_terms`], and that they do not depend
/// on the number of threads.
fn check_responsibilities<M: RowQueries + Clone>(model: &M, x: &Array2<f64>, new: &Array2<f64>) {
    let tree = greedy_tree(model, Mixing::Brt { gamma: 0.5 }, x);
    let predictor = Predictor::new(
        model.clone(),
        tree.clone(),
        model.leaf_stats_all(x.view()).unwrap(),
    )
    .unwrap();
    let rows = model.leaf_stats_all(new.view()).unwrap();
    let one = Threads::new(Some(1)).unwrap();
    let (log_p, resp) = predictor.responsibilities(&rows, &one, &never).unwrap();
    for (r, row) in rows.iter().enumerate() {
        let terms = direct_terms(&predictor, model, row);
        let expected = log_sum_exp(&terms);
        assert!((log_p[r] - expected).abs() < 1e-9 * expected.abs().max(1.0));
        for (s, t) in terms.iter().enumerate() {
            assert!((resp[[r, s]] - (t - expected).exp()).abs() < 1e-9);
        }
        assert!((resp.row(r).sum() - 1.0).abs() < 1e-12);
    }
    // A running sum and a two-pass sum differ in rounding only.
    let scores = predictor.log_predictive(&rows, &one, &never).unwrap();
    for (a, b) in scores.iter().zip(&log_p) {
        assert!((a - b).abs() <= 1e-14 * b.abs());
    }
    let many = Threads::new(Some(4)).unwrap();
    assert_eq!(
        predictor.log_predictive(&rows, &many, &never).unwrap(),
        scores
    );
    assert_eq!(
        predictor.responsibilities(&rows, &many, &never).unwrap(),
        (log_p, resp)
    );
}

#[test]
fn responsibilities_match_direct_computation_for_every_model() {
    // 90 rows give 179 or fewer nodes: several blocks of nodes.
    let x = clustered_binary(7, 90, 6);
    let new = clustered_binary(8, 9, 6);
    check_responsibilities(&BetaBernoulli::new(&[0.6], &[1.4], 6).unwrap(), &x, &new);
    let counts = x.mapv(|v| v * 3.0 + 1.0);
    let new_counts = new.mapv(|v| 2.0 - v);
    for coefficient in [false, true] {
        let model = DirichletMultinomial::new(&[0.5], 6, coefficient).unwrap();
        check_responsibilities(&model, &counts, &new_counts);
    }
    let gauss = x.mapv(|v| 2.0 * v)
        + &Array2::from_shape_fn((90, 6), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 11.0);
    let model = NormalInverseWishart::from_data(gauss.view(), None, None).unwrap();
    check_responsibilities(&model, &gauss, &new.mapv(|v| 1.5 * v - 0.2));
}

#[test]
fn dirichlet_multinomial_predictive_sums_to_one_over_count_vectors() {
    let x = array![
        [3., 0., 1.],
        [2., 1., 0.],
        [0., 4., 1.],
        [0., 3., 2.],
        [1., 1., 1.]
    ];
    let model = DirichletMultinomial::new(&[0.7, 1.0, 1.6], 3, true).unwrap();
    let rows: Vec<_> = compositions(4, 3)
        .into_iter()
        .map(|c| model.leaf_stats(Array1::from(c).view(), 0).unwrap())
        .collect();
    // Also with training counts near 10¹⁴–10¹⁵: ln f of a cluster is then ~10¹⁶, whose
    // doubles are spaced by 2 or more, so a predictive taken as a difference of two ln f
    // would be off by factors of e.
    for scale in [1.0, 2.5e14 + 1.0] {
        let x = x.mapv(|v| v * scale);
        let tree = greedy_tree(&model, Mixing::Dp { alpha: 1.0 }, &x);
        let predictor = Predictor::new(
            model.clone(),
            tree.clone(),
            model.leaf_stats_all(x.view()).unwrap(),
        )
        .unwrap();
        let lp = predictor
            .log_predictive(&rows, &Threads::default(), &never)
            .unwrap();
        assert!(
            log_sum_exp(&lp).abs() < 1e-12,
            "{scale}: {}",
            log_sum_exp(&lp)
        );
    }
}

#[test]
fn beta_bernoulli_predictive_stays_normalised_for_huge_priors() {
    // A prior of 10¹⁵ pseudo-counts (or 10⁻³⁰⁰ against 10³⁰⁰): the probabilities of every
    // binary row still sum to one.
    let d = 4;
    let x = clustered_binary(5, 12, d);
    for (alpha, beta) in [(1e15, 1e15), (1e15, 3.0), (1e-300, 1e300)] {
        let mut model = BetaBernoulli::new(&[alpha], &[beta], d).unwrap();
        model.prepare(x.nrows());
        let tree = greedy_tree(&model, Mixing::Brt { gamma: 0.5 }, &x);
        let predictor = Predictor::new(
            model.clone(),
            tree.clone(),
            model.leaf_stats_all(x.view()).unwrap(),
        )
        .unwrap();
        let lp = predictor
            .log_predictive(&all_binary_rows(&model, d), &Threads::default(), &never)
            .unwrap();
        assert!(
            log_sum_exp(&lp).abs() < 1e-12,
            "{alpha:e} {beta:e}: {}",
            log_sum_exp(&lp)
        );
    }
}

#[test]
fn gaussian_predictive_density_integrates_to_one() {
    let x = array![[-2.1], [-1.9], [-2.3], [1.0], [1.4], [0.8], [5.0]];
    let model = NormalInverseWishart::new(vec![0.0], 0.5, 3.0, vec![1.0]).unwrap();
    let tree = greedy_tree(&model, Mixing::Brt { gamma: 0.5 }, &x);
    let predictor = Predictor::new(
        model.clone(),
        tree.clone(),
        model.leaf_stats_all(x.view()).unwrap(),
    )
    .unwrap();
    // ∫ p(x) dx = ∫_{−π/2}^{π/2} p(tan θ) sec²θ dθ by composite Simpson; the Student-t
    // tails make the integrand vanish at both ends.
    let m = 20_000;
    let h = std::f64::consts::PI / m as f64;
    let thetas: Vec<f64> = (1..m)
        .map(|i| -std::f64::consts::FRAC_PI_2 + i as f64 * h)
        .collect();
    let rows: Vec<_> = thetas
        .iter()
        .map(|t| model.leaf_stats(array![t.tan()].view(), 0).unwrap())
        .collect();
    let lp = predictor
        .log_predictive(&rows, &Threads::default(), &never)
        .unwrap();
    let total: f64 = thetas
        .iter()
        .zip(&lp)
        .enumerate()
        .map(|(i, (t, l))| {
            let weight = if i % 2 == 0 { 4.0 } else { 2.0 };
            weight * l.exp() / t.cos().powi(2)
        })
        .sum::<f64>()
        * h
        / 3.0;
    assert!((total - 1.0).abs() < 1e-6, "{total}");
}

/// Training data with missing entries, its tree and predictor inputs.
fn with_missing() -> (Array2<f64>, BetaBernoulli, RoseTree) {
    let mut x = clustered_binary(21, 9, 4);
    for (i, j) in [(1, 2), (4, 0), (4, 3), (8, 1)] {
        x[[i, j]] = NAN;
    }
    let model = BetaBernoulli::new(&[0.6, 1.0, 2.0, 0.8], &[1.3, 0.5, 1.0, 1.0], 4).unwrap();
    let tree = greedy_tree(&model, Mixing::Brt { gamma: 0.45 }, &x);
    (x, model, tree)
}

#[test]
fn completions_of_the_missing_entries_sum_to_one_and_match_reevaluation() {
    let (x, model, tree) = with_missing();
    let predictor = Predictor::new(
        model.clone(),
        tree.clone(),
        model.leaf_stats_all(x.view()).unwrap(),
    )
    .unwrap();
    let missing: Vec<(usize, usize)> = x
        .indexed_iter()
        .filter(|(_, v)| v.is_nan())
        .map(|(ij, _)| ij)
        .collect();
    let threads = Threads::default();
    let mut log_probs = Vec::new();
    for bits in 0..1_u32 << missing.len() {
        let mut full = x.clone();
        for (k, &(i, j)) in missing.iter().enumerate() {
            full[[i, j]] = f64::from((bits >> k) & 1);
        }
        let filled: Vec<_> = [1, 4, 8]
            .iter()
            .map(|&i| (i, model.leaf_stats(full.row(i), i).unwrap()))
            .collect();
        let lp = predictor
            .log_predictive_missing(&filled, &threads, &never)
            .unwrap();
        // eq 1.24 straight: re-evaluate the tree on the completed data with the same π.
        let full_tree = evaluate(
            &model,
            &Mixing::Brt { gamma: 0.45 },
            &tree.topology(),
            &model.leaf_stats_all(full.view()).unwrap(),
        )
        .unwrap();
        assert!((lp - (full_tree.log_evidence() - tree.log_evidence())).abs() < 1e-10);
        log_probs.push(lp);
    }
    assert!(log_sum_exp(&log_probs).abs() < 1e-12);
    // Filling nothing changes nothing.
    assert_eq!(
        predictor
            .log_predictive_missing(&[], &threads, &never)
            .unwrap(),
        0.0
    );
}

#[test]
fn missing_probabilities_equal_single_entry_completions() {
    let (x, model, tree) = with_missing();
    let predictor = Predictor::new(
        model.clone(),
        tree.clone(),
        model.leaf_stats_all(x.view()).unwrap(),
    )
    .unwrap();
    let threads = Threads::new(Some(2)).unwrap();
    let found = predictor.missing_probabilities(&threads, &never).unwrap();
    let positions: Vec<(usize, usize)> = found.iter().map(|e| (e.row, e.column)).collect();
    assert_eq!(positions, [(1, 2), (4, 0), (4, 3), (8, 1)]);
    for e in &found {
        let mut row = x.row(e.row).to_owned();
        row[e.column] = 1.0;
        let filled = [(e.row, model.leaf_stats(row.view(), e.row).unwrap())];
        let lp = predictor
            .log_predictive_missing(&filled, &threads, &never)
            .unwrap();
        assert!(
            (e.p_one - lp.exp()).abs() < 1e-12,
            "{} vs {}",
            e.p_one,
            lp.exp()
        );
        assert!(0.0 < e.p_one && e.p_one < 1.0);
    }
    // Complete data: nothing to predict.
    let complete = clustered_binary(2, 6, 3);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 3).unwrap();
    let tree = greedy_tree(&model, Mixing::Gamma { gamma: 0.5 }, &complete);
    let p = Predictor::new(
        model.clone(),
        tree,
        model.leaf_stats_all(complete.view()).unwrap(),
    )
    .unwrap();
    assert!(
        p.missing_probabilities(&threads, &never)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn bad_input_and_interrupts_are_errors() {
    let (x, model, tree) = with_missing();
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    let err = Predictor::new(model.clone(), tree.clone(), leaves[1..].to_vec())
        .err()
        .unwrap();
    assert!(matches!(err, RoseTreeError::ShapeMismatch { .. }));
    let predictor = Predictor::new(model.clone(), tree.clone(), leaves.clone()).unwrap();
    let threads = Threads::default();
    for filled in [
        vec![(9, leaves[0].clone())],
        vec![(12, leaves[0].clone())],
        vec![(2, leaves[2].clone()), (2, leaves[2].clone())],
    ] {
        let err = predictor
            .log_predictive_missing(&filled, &threads, &never)
            .unwrap_err();
        assert!(matches!(err, RoseTreeError::InvalidData { .. }), "{err}");
    }
    let stop = || true;
    assert!(matches!(
        predictor.log_predictive(&leaves, &threads, &stop),
        Err(RoseTreeError::Interrupted)
    ));
    assert!(matches!(
        predictor.responsibilities(&leaves, &threads, &stop),
        Err(RoseTreeError::Interrupted)
    ));
    assert!(matches!(
        predictor.missing_probabilities(&threads, &stop),
        Err(RoseTreeError::Interrupted)
    ));
    assert!(matches!(
        predictor.log_predictive_missing(&[(1, leaves[1].clone())], &threads, &stop),
        Err(RoseTreeError::Interrupted)
    ));
    // No rows, no work.
    assert!(
        predictor
            .log_predictive(&[], &threads, &stop)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn many_rows_in_chunks_match_one_row_at_a_time() {
    // 300 features: blocks of 64 nodes and chunks of 873 rows, so 1000 rows take two.
    let d = 300;
    let x = clustered_binary(31, 80, d);
    let model = BetaBernoulli::new(&[0.5], &[0.5], d).unwrap();
    let tree = greedy_tree(&model, Mixing::Brt { gamma: 0.5 }, &x);
    let predictor = Predictor::new(
        model.clone(),
        tree.clone(),
        model.leaf_stats_all(x.view()).unwrap(),
    )
    .unwrap();
    let new = clustered_binary(32, 1000, d);
    let rows = model.leaf_stats_all(new.view()).unwrap();
    let one = Threads::new(Some(1)).unwrap();
    let all = predictor.log_predictive(&rows, &one, &never).unwrap();
    for (r, row) in rows.iter().enumerate().step_by(97) {
        let alone = predictor
            .log_predictive(std::slice::from_ref(row), &one, &never)
            .unwrap();
        assert_eq!(alone[0], all[r]);
    }
    let three = Threads::new(Some(3)).unwrap();
    assert_eq!(
        predictor.log_predictive(&rows, &three, &never).unwrap(),
        all
    );
}
