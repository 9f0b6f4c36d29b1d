//! Brownian diffusion with missing entries against two independent computations: with
//! nothing missing, [`BrownianDiffusion`]'s message passing; with entries missing, the
//! covariance form of each feature on its own, restricted to the leaves that observe it
//! (features are independent under a diagonal `Λ`, and a missing entry is marginalised by
//! dropping its row and column from the Gaussian).

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, array};
use rand::Rng;

use super::*;
use crate::models::messages::brownian::tests::{flat_root_log_density, mvn_log_density};
use crate::models::messages::tests::{invalid_parameter, normal, random_tree, rng, shared_lengths};
use crate::models::messages::tree_log_likelihood;

fn data_with_holes(n: usize, d: usize, p_missing: f64, r: &mut impl Rng) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| {
        if r.random::<f64>() < p_missing {
            f64::NAN
        } else {
            2.0 * normal(r)
        }
    })
}

/// `Σ_j ln p(x_{O_j, j})` with `O_j` the rows observing feature `j`, each by the dense
/// covariance form: `(s0 + C)λ_j` for a Gaussian root, the closed-form integral over the
/// root for the flat one.
fn per_feature_covariance_form(x: &Array2<f64>, c: &[Vec<f64>], lambda: &[f64], root: Root) -> f64 {
    let mut total = 0.0;
    for (j, &lam) in lambda.iter().enumerate() {
        let rows: Vec<usize> = (0..x.nrows()).filter(|&i| !x[[i, j]].is_nan()).collect();
        if rows.is_empty() {
            continue;
        }
        let sub: Vec<Vec<f64>> = rows
            .iter()
            .map(|&a| rows.iter().map(|&b| c[a][b]).collect())
            .collect();
        let values = Array2::from_shape_fn((rows.len(), 1), |(k, _)| x[[rows[k], j]]);
        total += match root {
            Root::Flat => flat_root_log_density(&values, &sub, &DMatrix::from_element(1, 1, lam)),
            Root::Gaussian { s0 } => {
                let m = rows.len();
                let cov = DMatrix::from_fn(m, m, |a, b| (s0 + sub[a][b]) * lam);
                mvn_log_density(&DVector::from_iterator(m, values.iter().copied()), &cov)
            }
        };
    }
    total
}

fn models(d: usize, r: &mut impl Rng) -> Vec<(BrownianDiffusion, Vec<f64>)> {
    let lambda: Vec<f64> = (0..d).map(|_| 0.3 + 2.0 * r.random::<f64>()).collect();
    let mut out = Vec::new();
    for root in [Root::Flat, Root::Gaussian { s0: 0.7 }] {
        out.push((
            BrownianDiffusion::diagonal(&lambda, d)
                .unwrap()
                .with_root(root)
                .unwrap(),
            lambda.clone(),
        ));
    }
    out
}

#[test]
fn with_nothing_missing_it_is_brownian_diffusion() {
    let mut r = rng(31);
    for d in 1..=4 {
        for n in 2..=7 {
            let tree = random_tree(n, 0.3, &mut r);
            let x = data_with_holes(n, d, 0.0, &mut r);
            for (base, _) in models(d, &mut r) {
                let masked = MaskedBrownian::new(base.clone()).unwrap();
                for root_branch in [0.0, 0.4] {
                    let want = tree_log_likelihood(&base, x.view(), &tree, root_branch).unwrap();
                    let got = tree_log_likelihood(&masked, x.view(), &tree, root_branch).unwrap();
                    assert!(
                        (got - want).abs() < 1e-11 * (1.0 + want.abs()),
                        "d={d} n={n}: {got} vs {want}"
                    );
                }
                // The pair normaliser and the optimal duration agree too.
                let (a, _) = base.leaf_message(x.row(0), 0).unwrap();
                let (b, _) = base.leaf_message(x.row(1), 1).unwrap();
                let (ma, _) = masked.leaf_message(x.row(0), 0).unwrap();
                let (mb, _) = masked.leaf_message(x.row(1), 1).unwrap();
                let (pa, pm) = (base.pair(&a, &b), masked.pair(&ma, &mb));
                for length in [0.1, 1.0, 7.0] {
                    let (want, got) =
                        (base.pair_log_z(&pa, length), masked.pair_log_z(&pm, length));
                    assert!((got - want).abs() < 1e-12 * (1.0 + want.abs()));
                }
                let want = base.optimal_duration(&pa, 0.3, 1.0).unwrap();
                let got = masked.optimal_duration(&pm, 0.3, 1.0).unwrap();
                assert!((got - want).abs() < 1e-14 * (1.0 + want));
            }
        }
    }
}

#[test]
fn missing_entries_match_the_covariance_form_without_them() {
    let mut r = rng(32);
    let mut checked = 0;
    for d in 1..=3 {
        for n in 2..=7 {
            for _ in 0..3 {
                let tree = random_tree(n, 0.3, &mut r);
                let x = data_with_holes(n, d, 0.35, &mut r);
                let c = shared_lengths(&tree);
                for (base, lambda) in models(d, &mut r) {
                    let root = base.root();
                    let masked = MaskedBrownian::new(base).unwrap();
                    let got = tree_log_likelihood(&masked, x.view(), &tree, 0.0).unwrap();
                    let want = per_feature_covariance_form(&x, &c, &lambda, root);
                    assert!(
                        (got - want).abs() < 1e-9 * (1.0 + want.abs()),
                        "d={d} n={n} {root:?}: {got} vs {want}\n{x}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 108);
}

#[test]
fn leaf_messages_and_their_summaries() {
    let model = MaskedBrownian::new(BrownianDiffusion::diagonal(&[4.0, 1.0], 2).unwrap()).unwrap();
    let (msg, log_z) = model.leaf_message(array![2.0, f64::NAN].view(), 0).unwrap();
    assert_eq!(log_z, 0.0);
    assert_eq!(msg.whitened_mean(), &[1.0, 0.0]);
    assert_eq!(msg.variances(), &[0.0, f64::INFINITY]);
    let up = model.propagate(&msg, 0.5);
    assert_eq!(up.variances(), &[0.5, f64::INFINITY]);
    let mean = model.mean(&up);
    assert_eq!(mean[0], 2.0);
    assert!(mean[1].is_nan());
    assert_eq!(model.variances(&up)[0], 2.0);

    // Two leaves observing different features share nothing: Z = 1, δ* = 0.
    let (other, _) = model.leaf_message(array![f64::NAN, 1.0].view(), 1).unwrap();
    let pair = model.pair(&msg, &other);
    assert!(pair.groups().is_empty());
    assert_eq!(model.pair_log_z(&pair, 1.0), 0.0);
    assert_eq!(model.optimal_duration(&pair, 0.0, 1.0).unwrap(), 0.0);
    let (joined, log_z) = model.combine(&[up.clone(), model.propagate(&other, 0.5)]);
    assert_eq!(log_z, 0.0);
    assert_eq!(joined.variances(), &[0.5, 0.5]);
}

#[test]
fn point_masses_meet_as_in_brownian_diffusion() {
    let model = MaskedBrownian::new(BrownianDiffusion::isotropic(1.0, 2).unwrap()).unwrap();
    let leaf = |a: f64, b: f64| model.leaf_message(array![a, b].view(), 0).unwrap().0;
    // Coinciding in the one shared feature: +∞; disagreeing anywhere: −∞.
    assert_eq!(
        model.combine(&[leaf(1.0, f64::NAN), leaf(1.0, 2.0)]).1,
        f64::INFINITY
    );
    assert_eq!(
        model.combine(&[leaf(1.0, 2.0), leaf(1.0, 3.0)]).1,
        f64::NEG_INFINITY
    );
    assert_eq!(
        model.pair_log_z(&model.pair(&leaf(1.0, 2.0), &leaf(1.0, 3.0)), 0.0),
        f64::NEG_INFINITY
    );
    // A point mass against a spread message: the spread message's density there.
    let spread = model.propagate(&leaf(0.0, f64::NAN), 2.0);
    let (msg, log_z) = model.combine(&[leaf(1.0, 5.0), spread]);
    let want = -0.5 * ((2.0 * std::f64::consts::PI * 2.0).ln() + 0.5);
    assert!((log_z - want).abs() < 1e-15);
    assert_eq!(msg.variances(), &[0.0, 0.0]);
}

/// `−rate·δ + ln Z(base + 2δ)` maximised by brute force: a fine grid in `ln δ`, refined by
/// golden sections around the best grid point.
fn brute_optimal(model: &MaskedBrownian, pair: &MaskedPair, base: f64, rate: f64) -> f64 {
    let f = |x: f64| -rate * x + model.pair_log_z(pair, base + 2.0 * x);
    let mut best = (f(0.0), 0.0);
    let grid: Vec<f64> = (0..=20_000)
        .map(|k| 1e-8 * 10f64.powf(k as f64 * 12.0 / 20_000.0))
        .collect();
    for (k, &x) in grid.iter().enumerate() {
        if f(x) > best.0 {
            best = (f(x), k as f64);
        }
    }
    if best.1 == 0.0 && f(0.0) >= f(grid[0]) {
        return 0.0;
    }
    let k = best.1 as usize;
    let (mut lo, mut hi) = (grid[k.saturating_sub(1)], grid[(k + 1).min(grid.len() - 1)]);
    let g = 0.5 * (5f64.sqrt() - 1.0);
    for _ in 0..200 {
        let (a, b) = (hi - g * (hi - lo), lo + g * (hi - lo));
        if f(a) < f(b) {
            lo = a;
        } else {
            hi = b;
        }
    }
    0.5 * (lo + hi)
}

#[test]
fn optimal_duration_finds_the_best_of_several_maxima() {
    let model = MaskedBrownian::new(BrownianDiffusion::isotropic(1.0, 6).unwrap()).unwrap();
    let mut r = rng(33);
    for case in 0..300 {
        // Messages with different patterns of spread per feature: several groups.
        let msg = |r: &mut rand_xoshiro::Xoshiro256PlusPlus| MaskedMessage {
            mean: (0..6).map(|_| 3.0 * normal(r)).collect(),
            var: (0..6)
                .map(|_| match r.random_range(0..4) {
                    0 => f64::INFINITY,
                    1 => 0.0,
                    2 => 1e-3,
                    _ => r.random::<f64>() * 4.0,
                })
                .collect(),
        };
        let (a, b) = (msg(&mut r), msg(&mut r));
        let pair = model.pair(&a, &b);
        let base = if case % 2 == 0 {
            0.0
        } else {
            r.random::<f64>()
        };
        let rate = [0.5, 1.0, 6.0][case % 3];
        let got = model.optimal_duration(&pair, base, rate).unwrap();
        // The unbounded duration is the bounded one wherever that is positive.
        let free = model.unbounded_duration(&pair, base, rate).unwrap();
        assert!(free.max(0.0) == got, "case {case}: {free} against {got}");
        let want = brute_optimal(&model, &pair, base, rate);
        let f = |x: f64| -rate * x + model.pair_log_z(&pair, base + 2.0 * x);
        assert!(
            f(got) >= f(want) - 1e-9 * (1.0 + f(want).abs()),
            "case {case}: δ = {got} gives {} but δ = {want} gives {}",
            f(got),
            f(want)
        );
    }
    // One feature that agrees tightly (w = 1e-4) gives a local maximum at δ = 0; five that
    // disagree (S = 500 over w = 0.5) a better one near u = S/n = 100.
    let tight = MaskedMessage {
        mean: vec![0.0; 6],
        var: vec![1e-4, 0.25, 0.25, 0.25, 0.25, 0.25],
    };
    let far = MaskedMessage {
        mean: vec![0.0, 10.0, 10.0, 10.0, 10.0, 10.0],
        var: vec![0.0, 0.25, 0.25, 0.25, 0.25, 0.25],
    };
    let pair = model.pair(&tight, &far);
    assert_eq!(pair.groups().len(), 2);
    let f = |x: f64| -x + model.pair_log_z(&pair, 2.0 * x);
    assert!(f(0.0) > f(1e-6), "δ = 0 is a local maximum");
    let got = model.optimal_duration(&pair, 0.0, 1.0).unwrap();
    let want = brute_optimal(&model, &pair, 0.0, 1.0);
    assert!(
        got > 5.0 && (got - want).abs() < 1e-6 * want,
        "{got} vs {want}"
    );
    assert!(f(got) > f(0.0));
}

#[test]
fn unbounded_duration_is_the_best_negative_duration_where_the_bound_binds() {
    // Close messages with noise-like variances: the maximum over δ ≥ 0 is at 0, and the
    // unbounded maximiser lies between −(smallest u)/2 and 0. One group: the maximum of
    // the objective on a fine grid over that interval; several: a local maximum there
    // (the slope changes sign from + to − through it), above the objective at δ = 0.
    let model = MaskedBrownian::new(BrownianDiffusion::isotropic(1.0, 5).unwrap()).unwrap();
    let mut r = rng(35);
    let (mut one_group, mut several) = (0, 0);
    for case in 0..400 {
        let shared_var = case % 2 == 0;
        let v0 = 0.2 + r.random::<f64>();
        let msg = |r: &mut rand_xoshiro::Xoshiro256PlusPlus| MaskedMessage {
            mean: (0..5).map(|_| 0.3 * normal(r)).collect(),
            var: (0..5)
                .map(|_| {
                    if shared_var {
                        v0
                    } else {
                        0.2 + r.random::<f64>()
                    }
                })
                .collect(),
        };
        let (a, b) = (msg(&mut r), msg(&mut r));
        let pair = model.pair(&a, &b);
        let base = [0.0, 0.1][(case / 2) % 2];
        if model.optimal_duration(&pair, base, 1.0).unwrap() > 0.0 {
            continue;
        }
        let f = |x: f64| -x + model.pair_log_z(&pair, base + 2.0 * x);
        let got = model.unbounded_duration(&pair, base, 1.0).unwrap();
        let smallest = pair
            .groups()
            .iter()
            .map(|g| g.0)
            .fold(f64::INFINITY, f64::min)
            + base;
        assert!(got < 0.0 && got > -0.5 * smallest, "case {case}: {got}");
        if pair.groups().len() == 1 {
            one_group += 1;
            let lo = -0.5 * smallest;
            let best = (1..100_000)
                .map(|k| lo * (1.0 - k as f64 / 100_000.0))
                .fold(f64::NEG_INFINITY, |m, x| m.max(f(x)));
            assert!(
                f(got) >= best - 1e-9 * (1.0 + best.abs()),
                "case {case}: {} < {best}",
                f(got)
            );
        } else {
            several += 1;
            // A step small beside the distance to the bound, where a group that almost
            // agrees puts a narrow peak.
            let h = 1e-4 * (got + 0.5 * smallest);
            assert!(f(got) >= f(got - h) && f(got) >= f(got + h), "case {case}");
            assert!(f(got) > f(0.0), "case {case}");
        }
    }
    assert!(one_group > 20 && several > 20, "{one_group} {several}");
    // Where a group of the smallest variance agrees exactly, the objective grows without
    // bound towards that variance's end: the bound itself.
    let a = MaskedMessage {
        mean: vec![0.0, 1.0],
        var: vec![0.1, 0.3],
    };
    let b = MaskedMessage {
        mean: vec![0.0, 1.2],
        var: vec![0.1, 0.5],
    };
    let model = MaskedBrownian::new(BrownianDiffusion::isotropic(1.0, 2).unwrap()).unwrap();
    let pair = model.pair(&a, &b);
    assert_eq!(model.unbounded_duration(&pair, 0.0, 1.0).unwrap(), -0.1);
}

#[test]
fn a_full_lambda_or_an_infinite_value_is_rejected() {
    let full = BrownianDiffusion::full(array![[2.0, 0.5], [0.5, 1.0]].view()).unwrap();
    invalid_parameter(MaskedBrownian::new(full), "lambda");
    let model = MaskedBrownian::new(BrownianDiffusion::isotropic(1.0, 2).unwrap()).unwrap();
    match model.leaf_message(array![1.0, f64::INFINITY].view(), 4) {
        Err(RoseTreeError::InvalidData { row, column, .. }) => {
            assert_eq!((row, column), (4, Some(1)));
        }
        other => panic!("expected InvalidData, got {other:?}"),
    }
}
