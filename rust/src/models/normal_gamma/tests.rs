// Reference values are quoted with every digit mpmath printed.
#![allow(clippy::excessive_precision)]

use ndarray::{Array2, array};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use statrs::distribution::{Continuous, StudentsT};

use super::*;
use crate::math::ln_gamma;

const NAN: f64 = f64::NAN;

/// `n × d` draws of `loc + scale · N(0, 1)` (Box–Muller), deterministic in `seed`.
fn normals(n: usize, d: usize, loc: f64, scale: f64, seed: u64) -> Array2<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Array2::from_shape_simple_fn((n, d), || {
        let (u, v): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
        loc + scale * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    })
}

fn stats_of(model: &NormalGamma, x: &Array2<f64>) -> NormalGammaStats {
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    leaves[1..]
        .iter()
        .fold(leaves[0].clone(), |acc, s| model.merge(&acc, s))
}

/// `Σ_t ln p(x_t | x_<t)` feature by feature: each predictive is a Student t with `2a`
/// degrees of freedom, location `μ` and scale² `b(κ + 1)/(aκ)` (Murphy 2007, eq 100), and
/// the posterior is updated one observation at a time (eqs 86–89); missing entries are
/// skipped. Independent of the closed form and of the merged statistics.
fn sequential(m0: &[f64], kappa0: f64, a0: f64, b0: &[f64], x: &Array2<f64>) -> f64 {
    let mut total = 0.0;
    for j in 0..x.ncols() {
        let (mut mu, mut kappa, mut a, mut b) = (m0[j], kappa0, a0, b0[j]);
        for &v in x.column(j) {
            if v.is_nan() {
                continue;
            }
            let scale = (b * (kappa + 1.0) / (a * kappa)).sqrt();
            total += StudentsT::new(mu, scale, 2.0 * a).unwrap().ln_pdf(v);
            b += kappa * (v - mu).powi(2) / (2.0 * (kappa + 1.0));
            mu = (kappa * mu + v) / (kappa + 1.0);
            kappa += 1.0;
            a += 0.5;
        }
    }
    total
}

#[test]
fn matches_sequential_student_t_predictives() {
    let mut x = normals(9, 4, 0.7, 1.8, 1);
    x[(2, 1)] = NAN;
    x[(5, 3)] = NAN;
    x[(6, 3)] = NAN;
    let (m0, b0) = (vec![0.1, -0.4, 1.0, 0.0], vec![0.5, 2.0, 1.3, 0.9]);
    for (kappa0, a0) in [(0.5, 1.5), (0.01, 0.3), (3.0, 40.0)] {
        let expected = sequential(&m0, kappa0, a0, &b0, &x);
        let complete = x.slice(ndarray::s![.., ..1]).to_owned();
        let expected_complete = sequential(&m0, kappa0, a0, &b0, &complete);
        for prepared in [0, 4, 20] {
            let mut model = NormalGamma::new(&m0, kappa0, a0, &b0, 4).unwrap();
            model.prepare(prepared);
            let got = model.log_marginal(&stats_of(&model, &x)).unwrap();
            assert!(
                (got - expected).abs() < 1e-11 * expected.abs(),
                "κ0={kappa0} a0={a0}: {got} vs {expected}"
            );
            let mut one = NormalGamma::new(&m0[..1], kappa0, a0, &b0[..1], 1).unwrap();
            one.prepare(prepared);
            let got = one.log_marginal(&stats_of(&one, &complete)).unwrap();
            assert!((got - expected_complete).abs() < 1e-11 * expected_complete.abs());
        }
    }
}

#[test]
fn ln_gamma_ratio_and_digamma_diff_match_high_precision_values() {
    // (a, h, ln Γ(a + h) − ln Γ(a), ψ(a + h) − ψ(a)) by mpmath at 50 digits.
    let reference = [
        (1e8, 0.5, 9.210_340_370_726_182_7, 5.000_000_012_5e-9),
        (1e8, 3.0, 55.262_042_261_857_096, 2.999_999_970_000_000_5e-8),
        (
            20.0,
            0.5,
            1.491_616_787_331_304_1,
            0.025_312_402_465_497_531,
        ),
        (19.5, 0.5, 1.478_797_678_238_397, 0.025_969_648_816_553_751),
        (
            37.25,
            1234.5,
            7_719.633_769_253_709_8,
            3.543_586_900_139_746_6,
        ),
        (0.3, 0.5, -0.943_738_316_418_237_96, 2.537_515_655_493_994_6),
        (0.3, 7.0, 6.052_094_528_204_173_5, 5.420_344_557_838_119_2),
        (5.0, 40.5, 124.039_770_843_263_79, 2.300_565_395_692_485),
        (1e-3, 2.5, -6.621_792_613_130_769_2, 1_001.279_218_812_146_9),
        (1e5, 1e5, 1_189_921.636_035_005, 0.693_149_680_566_195_31),
    ];
    for (a, h, ratio, psi) in reference {
        let got = ln_gamma_ratio(a, h);
        assert!(
            (got - ratio).abs() <= 1e-14 * ratio.abs(),
            "ln Γ ratio a={a} h={h}: {got} vs {ratio}"
        );
        let got = digamma_diff(a, h);
        assert!(
            (got - psi).abs() <= 1e-13 * psi.abs(),
            "ψ difference a={a} h={h}: {got} vs {psi}"
        );
    }
    assert_eq!(
        (ln_gamma_ratio(3.0, 0.0), digamma_diff(1e9, 0.0)),
        (0.0, 0.0)
    );
    // The plain difference of `ln Γ` at a = 10⁸ is off by far more than the helper.
    let plain = ln_gamma(1e8 + 0.5) - ln_gamma(1e8);
    assert!((plain - 9.210_340_370_726_182_7).abs() > 1e-9);
}

#[test]
fn large_a0_keeps_full_precision() {
    // ln f by mpmath at 60 digits for b0 = (a0, 2 a0). At a0 = 10⁸ both the count term
    // (`ln Γ(a0 + n/2) − ln Γ(a0)`) and the rate term (`a0 ln b0 − a_n ln b_n`) are
    // differences of numbers near 10⁹, which plain arithmetic gets right to only ~10⁻⁷.
    let x = array![[0.3, 1.2], [-0.5, 0.1], [1.1, 0.7], [0.25, -0.4]];
    for (a0, want) in [
        (1e8, -12.796_610_776_279_491),
        (1e5, -12.796_608_291_902_754),
        (40.0, -12.790_731_310_565_049),
    ] {
        let model = NormalGamma::new(&[0.0, 0.5], 0.2, a0, &[a0, 2.0 * a0], 2).unwrap();
        let got = model.log_marginal(&stats_of(&model, &x)).unwrap();
        assert!(
            (got - want).abs() < 1e-13 * want.abs(),
            "a0={a0}: {got} vs {want}"
        );
        // The shortcuts agree with the closed form to rounding.
        let l = model.leaf_stats_all(x.view()).unwrap();
        let a = stats_of(&model, &x.slice(ndarray::s![..3, ..]).to_owned());
        for fast in [
            model.log_marginal_merged(&a, &l[3]).unwrap(),
            model
                .log_marginal_query(&model.query(&a), &a, &l[3])
                .unwrap(),
        ] {
            assert!((fast - got).abs() < 1e-13 * want.abs());
        }
    }
}

#[test]
fn a_missing_entry_is_marginalised_out() {
    let with_nan = array![[1.0, 0.5], [NAN, -0.3], [2.5, NAN], [0.2, 1.1]];
    let model = NormalGamma::new(&[0.3, -0.2], 0.4, 1.7, &[0.8, 1.5], 2).unwrap();
    let col0 = NormalGamma::new(&[0.3], 0.4, 1.7, &[0.8], 1).unwrap();
    let col1 = NormalGamma::new(&[-0.2], 0.4, 1.7, &[1.5], 1).unwrap();
    let expected = col0
        .log_marginal(&stats_of(&col0, &array![[1.0], [2.5], [0.2]]))
        .unwrap()
        + col1
            .log_marginal(&stats_of(&col1, &array![[0.5], [-0.3], [1.1]]))
            .unwrap();
    let got = model.log_marginal(&stats_of(&model, &with_nan)).unwrap();
    assert!((got - expected).abs() < 1e-13 * expected.abs());
    let empty = model.leaf_stats(array![NAN, NAN].view(), 0).unwrap();
    assert_eq!(model.log_marginal(&empty).unwrap(), 0.0);
    assert_eq!((empty.n_rows(), empty.observed(1)), (1, 0));
    assert!(!empty.is_complete());
}

#[test]
fn shortcuts_equal_merge_then_evaluate() {
    let mut x = normals(8, 5, -1.0, 2.0, 4);
    let complete = x.clone();
    x[(1, 2)] = NAN;
    x[(6, 0)] = NAN;
    for (a0, shared) in [(0.8, false), (50.0, false), (0.8, true), (50.0, true)] {
        for data in [&complete, &x] {
            for prepared in [0, 8] {
                let mut model = NormalGamma::new(&[0.0, 1.0, -1.0, 0.5, 0.0], 0.3, a0, &[1.2], 5)
                    .unwrap()
                    .with_shared_precision(shared)
                    .unwrap();
                model.prepare(prepared);
                let l = model.leaf_stats_all(data.view()).unwrap();
                let a = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
                let b = model.merge(&model.merge(&l[3], &l[4]), &l[5]);
                for (p, q) in [(&a, &b), (&b, &a), (&a, &l[6]), (&l[6], &l[1]), (&b, &l[7])] {
                    let direct = model.log_marginal(&model.merge(p, q)).unwrap();
                    let merged = model.log_marginal_merged(p, q).unwrap();
                    let queried = model.log_marginal_query(&model.query(p), p, q).unwrap();
                    assert!((merged - direct).abs() < 1e-12 * direct.abs());
                    assert!(
                        (queried - direct).abs() < 1e-12 * direct.abs(),
                        "{queried} vs {direct}"
                    );
                }
            }
        }
    }
}

#[test]
fn merged_statistics_are_those_of_the_union_far_from_the_origin() {
    // Unit variance at an offset of 10⁸: Σx² − n x̄² would lose every digit of M2.
    let x = normals(40, 3, 1e8, 1.0, 5);
    let model = NormalGamma::new(&[1e8], 0.1, 2.0, &[1.0], 3).unwrap();
    let l = model.leaf_stats_all(x.view()).unwrap();
    let left = l[1..]
        .iter()
        .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
    // A balanced merge tree in another order.
    let mut level: Vec<NormalGammaStats> = l.iter().rev().cloned().collect();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|c| {
                if c.len() == 2 {
                    model.merge(&c[0], &c[1])
                } else {
                    c[0].clone()
                }
            })
            .collect();
    }
    let right = &level[0];
    for j in 0..3 {
        // Two-pass reference (after subtracting the offset exactly: 10⁸ is a double and
        // the draws differ from it by less than 2⁵, so the differences are exact).
        let shifted: Vec<f64> = x.column(j).iter().map(|v| v - 1e8).collect();
        let mean = shifted.iter().sum::<f64>() / 40.0;
        let m2: f64 = shifted.iter().map(|v| (v - mean).powi(2)).sum();
        for s in [&left, right] {
            // Measured from m0 = 10⁸.
            assert!((s.mean()[j] - mean).abs() < 1e-12);
            assert!((s.m2()[j] - m2).abs() < 1e-6 * m2, "{} vs {m2}", s.m2()[j]);
        }
    }
    let (fa, fb) = (
        model.log_marginal(&left).unwrap(),
        model.log_marginal(right).unwrap(),
    );
    assert!((fa - fb).abs() < 1e-9 * fa.abs());
    assert_eq!(left.n_rows(), 40);
}

#[test]
fn column_moments_dense_and_csr_agree_with_two_pass_formulas() {
    let x = array![
        [0.0, 2.0, NAN],
        [1.5, 0.0, 0.0],
        [0.0, 4.0, 3.0],
        [2.5, 0.0, NAN]
    ];
    let dense = ColumnMoments::dense(x.view()).unwrap();
    // The same matrix in CSR form, zeros unstored (and one stored explicitly).
    let indptr = [0, 2, 4, 6, 8];
    let indices = [1, 2, 0, 2, 1, 2, 0, 2];
    let data = [2.0, NAN, 1.5, 0.0, 4.0, 3.0, 2.5, NAN];
    let csr = ColumnMoments::csr(&indptr, &indices, &data, 3).unwrap();
    assert_eq!(dense, csr);
    assert_eq!(dense.count, vec![4, 4, 2]);
    assert_eq!(dense.mean, vec![1.0, 1.5, 1.5]);
    let var0 = (1.0 + 0.25 + 1.0 + 2.25) / 3.0;
    let var1 = (0.25 + 2.25 + 6.25 + 2.25) / 3.0;
    for (got, want) in dense.variance.iter().zip([var0, var1, 4.5]) {
        assert!((got - want).abs() < 1e-15);
    }
    // Malformed CSR input and infinite values are errors, not panics.
    assert!(ColumnMoments::csr(&[0, 2], &[0, 5], &[1.0, 2.0], 3).is_err());
    assert!(ColumnMoments::csr(&[1, 2], &[0, 1], &[1.0, 2.0], 3).is_err());
    assert!(ColumnMoments::csr(&[0, 3], &[0, 1], &[1.0, 2.0], 3).is_err());
    let err = ColumnMoments::csr(&[0, 1, 2], &[0, 2], &[1.0, f64::INFINITY], 3).unwrap_err();
    assert!(matches!(
        err,
        RoseTreeError::InvalidData {
            row: 1,
            column: Some(2),
            ..
        }
    ));
    let err = ColumnMoments::dense(array![[1.0], [f64::NEG_INFINITY]].view()).unwrap_err();
    assert!(matches!(
        err,
        RoseTreeError::InvalidData {
            row: 1,
            column: Some(0),
            ..
        }
    ));
}

#[test]
fn data_driven_defaults() {
    let x = array![[1.0, 5.0, 2.0], [3.0, 5.0, NAN], [2.0, 5.0, 4.0]];
    let moments = ColumnMoments::dense(x.view()).unwrap();
    let model = NormalGamma::with_defaults(&moments, None, None, None, None).unwrap();
    assert_eq!(model.m0(), &[2.0, 5.0, 3.0]);
    assert_eq!(model.kappa0(), NormalGamma::DEFAULT_KAPPA0);
    assert_eq!(model.a0(), NormalGamma::DEFAULT_A0);
    // Variances 1, 0 and 2, mean 1; ridge 10⁻⁶.
    let scale = NormalGamma::DEFAULT_B0_SCALE * NormalGamma::DEFAULT_A0;
    for (got, var) in model.b0().iter().zip([1.0, 0.0, 2.0]) {
        assert!((got - scale * (var + 1e-6)).abs() < 1e-15 * scale);
    }
    // b0 follows a given a0; given values are kept.
    let model =
        NormalGamma::with_defaults(&moments, Some(vec![0.0]), Some(2.0), Some(4.0), None).unwrap();
    assert_eq!(
        (model.m0(), model.kappa0(), model.a0()),
        (&[0.0; 3][..], 2.0, 4.0)
    );
    assert!((model.b0()[2] - NormalGamma::DEFAULT_B0_SCALE * 4.0 * (2.0 + 1e-6)).abs() < 1e-14);
    // A column with one observed entry takes the mean variance of the others.
    let x = array![[1.0, 5.0, 2.0], [3.0, 5.0, NAN], [2.0, 5.0, NAN]];
    let moments = ColumnMoments::dense(x.view()).unwrap();
    let model = NormalGamma::with_defaults(&moments, None, None, None, None).unwrap();
    assert!((model.b0()[2] - scale * (0.5 + 0.5e-6)).abs() < 1e-15);
    // Every column constant: b0 = scale · a0.
    let constant = ColumnMoments::dense(array![[1.0, 2.0], [1.0, 2.0]].view()).unwrap();
    let model = NormalGamma::with_defaults(&constant, None, None, None, None).unwrap();
    assert_eq!(model.b0(), &[scale; 2]);
}

#[test]
fn invalid_priors_are_named() {
    let name = |r: Result<NormalGamma>| match r {
        Err(RoseTreeError::InvalidParameter { name, .. }) => name,
        other => panic!("expected InvalidParameter, got {other:?}"),
    };
    let new = |m0: &[f64], k: f64, a: f64, b: &[f64]| name(NormalGamma::new(m0, k, a, b, 2));
    assert_eq!(new(&[f64::NAN], 1.0, 1.0, &[1.0]), "m0");
    assert_eq!(new(&[0.0; 3], 1.0, 1.0, &[1.0]), "m0");
    assert_eq!(new(&[], 1.0, 1.0, &[1.0]), "m0");
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(new(&[0.0], bad, 1.0, &[1.0]), "kappa0");
        assert_eq!(new(&[0.0], 1.0, bad, &[1.0]), "a0");
        assert_eq!(new(&[0.0], 1.0, 1.0, &[1.0, bad]), "b0");
    }
    assert_eq!(new(&[0.0], 1.0, 1.0, &[1.0; 3]), "b0");
    assert_eq!(
        name(NormalGamma::new(&[0.0], 1.0, 1.0, &[1.0], 0)),
        "n_features"
    );
    let model = NormalGamma::new(&[0.0], 1.0, 1.0, &[1.0], 2).unwrap();
    assert_eq!(
        name(model.with_hyperparameters(&[0.0; 5])),
        "hyperparameters"
    );
    assert_eq!(
        name(model.with_hyperparameters(&[0.0, 0.0, 1.0, -1.0, 1.0, 1.0])),
        "a0"
    );
}

#[test]
fn invalid_data_is_located_and_overflow_is_numerical() {
    let model = NormalGamma::new(&[0.0], 1.0, 1.0, &[1.0], 3).unwrap();
    for bad in [f64::INFINITY, f64::NEG_INFINITY] {
        let err = model
            .leaf_stats(array![0.0, bad, 1.0].view(), 6)
            .unwrap_err();
        assert!(matches!(
            err,
            RoseTreeError::InvalidData {
                row: 6,
                column: Some(1),
                ..
            }
        ));
    }
    let l = model
        .leaf_stats_all(array![[1e200, 0.0, 0.0], [-1e200, 0.0, 0.0]].view())
        .unwrap();
    let merged = model.merge(&l[0], &l[1]);
    for result in [
        model.log_marginal(&merged),
        model.log_marginal_merged(&l[0], &l[1]),
        model.log_marginal_query(&model.query(&l[0]), &l[0], &l[1]),
    ] {
        assert!(
            matches!(result, Err(RoseTreeError::Numerical(_))),
            "{result:?}"
        );
    }
}

#[test]
fn gradient_matches_finite_differences_of_ln_f() {
    let mut x = normals(6, 3, 0.5, 1.5, 8);
    x[(2, 1)] = NAN;
    for a0 in [1.3, 60.0] {
        let model = NormalGamma::new(&[0.2, -0.1, 0.4], 0.7, a0, &[0.9, 1.4, 0.6], 3).unwrap();
        let s = stats_of(&model, &x);
        let mut grad = vec![0.0; model.n_hyperparameters()];
        model.add_gradient(&s, 2.0, &mut grad).unwrap();
        let eta = model.hyperparameters();
        let f = |eta: &[f64]| {
            let m = model.with_hyperparameters(eta).unwrap();
            m.log_marginal(&stats_of(&m, &x)).unwrap()
        };
        for i in 0..eta.len() {
            let h = 1e-6 * eta[i].abs().max(0.1);
            let (mut up, mut down) = (eta.clone(), eta.clone());
            up[i] += h;
            down[i] -= h;
            let fd = 2.0 * (f(&up) - f(&down)) / (2.0 * h);
            assert!(
                (grad[i] - fd).abs() < 1e-6 * fd.abs().max(1.0),
                "a0={a0} η[{i}]: {} vs {fd}",
                grad[i]
            );
        }
    }
}

/// `ln f` of the shared-precision model by quadrature over `t = ln λ`: the prior
/// `Gamma(a0, rate b0)` times, for each feature, the density of its observed entries given
/// `λ` with the mean integrated out, `N(m0_j 1, (I + 11ᵀ/κ0)/λ)` (its determinant and
/// quadratic form by the matrix determinant lemma and Sherman–Morrison). The trapezoid rule
/// on a fine uniform grid, whose error falls faster than any power of the spacing for a
/// smooth integrand that vanishes at both ends.
fn shared_by_quadrature(m0: &[f64], kappa0: f64, a0: f64, b0: f64, x: &Array2<f64>) -> f64 {
    let log_integrand = |t: f64| {
        let lambda = t.exp();
        // Gamma density in t = ln λ: b0^a0 λ^a0 e^(−b0 λ) / Γ(a0).
        let mut total = a0 * b0.ln() + a0 * t - b0 * lambda - ln_gamma(a0);
        for (column, m) in x.columns().into_iter().zip(m0) {
            let d: Vec<f64> = column
                .iter()
                .filter(|v| !v.is_nan())
                .map(|v| v - m)
                .collect();
            let n = d.len() as f64;
            if d.is_empty() {
                continue;
            }
            let (sum, sum_sq) = (d.iter().sum::<f64>(), d.iter().map(|v| v * v).sum::<f64>());
            let quad = lambda * (sum_sq - sum * sum / (kappa0 + n));
            let log_det = (1.0 + n / kappa0).ln() - n * t;
            total -= 0.5 * (n * (std::f64::consts::TAU).ln() + log_det + quad);
        }
        total
    };
    let (lo, hi, steps) = (-30.0, 30.0, 60_000);
    let h = (hi - lo) / f64::from(steps);
    let values: Vec<f64> = (0..=steps)
        .map(|i| log_integrand(lo + h * f64::from(i)))
        .collect();
    let peak = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let w = if i == 0 || i == values.len() - 1 {
                0.5
            } else {
                1.0
            };
            w * (v - peak).exp()
        })
        .sum();
    peak + (sum * h).ln()
}

#[test]
fn shared_precision_matches_quadrature_over_the_precision() {
    let mut x = normals(7, 4, 0.3, 1.6, 11);
    let complete = x.clone();
    x[(1, 2)] = NAN;
    x[(4, 0)] = NAN;
    x[(5, 0)] = NAN;
    let m0 = [0.1, -0.4, 1.0, 0.0];
    for (kappa0, a0, b0) in [(0.5, 1.5, 0.8), (0.02, 0.4, 3.0), (4.0, 30.0, 12.0)] {
        for data in [&complete, &x] {
            let model = NormalGamma::new(&m0, kappa0, a0, &[b0], 4)
                .unwrap()
                .with_shared_precision(true)
                .unwrap();
            let got = model.log_marginal(&stats_of(&model, data)).unwrap();
            let want = shared_by_quadrature(&m0, kappa0, a0, b0, data);
            assert!(
                (got - want).abs() < 1e-10 * want.abs(),
                "κ0={kappa0} a0={a0} b0={b0}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn shared_precision_defaults_and_errors() {
    let x = array![[1.0, 10.0], [3.0, 14.0], [2.0, NAN]];
    let moments = ColumnMoments::dense(x.view()).unwrap();
    let model = NormalGamma::shared_with_defaults(&moments, None, None, None, None).unwrap();
    assert!(model.shared_precision());
    assert_eq!(model.m0(), &[2.0, 12.0]);
    // Sample variances 1 and 8: b0 = 0.2 · a0 · 4.5 for both features.
    let want = NormalGamma::DEFAULT_B0_SCALE * NormalGamma::DEFAULT_A0 * 4.5;
    assert!(model.b0().iter().all(|&b| (b - want).abs() < 1e-12 * want));
    let diagonal = NormalGamma::new(&[0.0, 0.0], 1.0, 2.0, &[1.0, 2.0], 2).unwrap();
    let err = diagonal.with_shared_precision(true).unwrap_err();
    assert!(matches!(err, RoseTreeError::InvalidParameter { ref name, .. } if name == "b0"));
    let shared = NormalGamma::new(&[0.0, 0.0], 1.0, 2.0, &[1.0], 2)
        .unwrap()
        .with_shared_precision(true)
        .unwrap();
    let s = stats_of(&shared, &array![[0.1, 0.2], [0.3, -0.4]]);
    let mut grad = vec![0.0; shared.n_hyperparameters()];
    assert!(shared.add_gradient(&s, 1.0, &mut grad).is_err());
    // Rebuilding from its hyperparameters keeps the shared precision.
    let again = shared
        .with_hyperparameters(&shared.hyperparameters())
        .unwrap();
    assert!(again.shared_precision());
}
