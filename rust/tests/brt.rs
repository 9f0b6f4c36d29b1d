//! Bayesian rose trees through the public API: options checked once, the greedy tree's
//! numbers equal an independent evaluation of its shape, the exhaustive optimum bounds it,
//! and predictive probabilities sum to one.

use ndarray::{Array2, array};
use rosetree::brt::{self, BrtParams, Mixing, Predictor};
use rosetree::models::{BetaBernoulli, ClusterModel};
use rosetree::parallel::Threads;

fn data() -> Array2<f64> {
    array![
        [1., 1., 0., 0.],
        [1., 1., 0., 0.],
        [1., 1., 1., 0.],
        [0., 0., 1., 1.],
        [0., 0., 1., 1.],
        [0., 1., 1., 1.],
        [1., 0., 0., 1.],
    ]
}

#[test]
fn invalid_options_are_refused_before_any_search() {
    for (mixing, name) in [
        (Mixing::Brt { gamma: 0.0 }, "gamma"),
        (Mixing::Gamma { gamma: 1.5 }, "gamma"),
        (Mixing::Dp { alpha: -1.0 }, "alpha"),
    ] {
        let err = BrtParams::new(mixing).check().unwrap_err().to_string();
        assert!(err.contains(name), "{err}");
    }
}

#[test]
fn the_greedy_tree_reports_what_evaluating_its_shape_gives_and_never_beats_the_optimum() {
    let x = data();
    let model = BetaBernoulli::new(&[0.5], &[0.5], 4).unwrap();
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    for mixing in [
        Mixing::Brt { gamma: 0.4 },
        Mixing::Gamma { gamma: 0.4 },
        Mixing::Dp { alpha: 1.5 },
    ] {
        for binary in [false, true] {
            let params = BrtParams::new(mixing).binary(binary).check().unwrap();
            let tree = brt::fit(&model, &params, x.view()).unwrap();
            let again = brt::evaluate(&model, &mixing, &tree.topology(), &leaves).unwrap();
            assert!((again.log_evidence() - tree.log_evidence()).abs() < 1e-12);
            let best = brt::optimal_tree(&model, &mixing, binary, &leaves).unwrap();
            assert!(best.log_evidence() >= tree.log_evidence() - 1e-12);
            // The shared tree's heights are monotone and give a valid linkage.
            let z = tree.to_linkage().unwrap();
            assert!(z.windows(2).all(|w| w[0][2] <= w[1][2]));
            assert_eq!(z.last().unwrap()[3], x.nrows() as f64);
        }
    }
}

#[test]
fn predictive_probabilities_of_every_binary_row_sum_to_one() {
    let x = data();
    let model = BetaBernoulli::new(&[1.0], &[1.0], 4).unwrap();
    let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check().unwrap();
    let tree = brt::fit(&model, &params, x.view()).unwrap();
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    let predictor = Predictor::new(model.clone(), tree, leaves).unwrap();
    let rows: Vec<_> = (0..16_u32)
        .map(|b| {
            let row = array![
                f64::from(b & 1),
                f64::from((b >> 1) & 1),
                f64::from((b >> 2) & 1),
                f64::from(b >> 3)
            ];
            model.leaf_stats(row.view(), 0).unwrap()
        })
        .collect();
    let log_p = predictor
        .log_predictive(&rows, &Threads::default(), &|| false)
        .unwrap();
    let total: f64 = log_p.iter().map(|l| l.exp()).sum();
    assert!((total - 1.0).abs() < 1e-12, "{total}");
}
