use ndarray::{Array2, ArrayView1};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::brt::fit;
use crate::models::{
    BetaBernoulli, ClusterModel, Differentiable, DirichletMultinomial, NormalGamma,
    NormalInverseWishart,
};

/// Three groups of binary rows, each near a prototype, with a few bits flipped.
fn clustered(seed: u64, per_group: usize, d: usize) -> Array2<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let protos: Vec<Vec<bool>> = (0..3)
        .map(|_| (0..d).map(|_| rng.random_bool(0.5)).collect())
        .collect();
    Array2::from_shape_fn((3 * per_group, d), |(i, j)| {
        let bit = protos[i / per_group][j] ^ ((i * 7 + j * 13) % 11 == 0);
        f64::from(u8::from(bit))
    })
}

/// A model whose hyperparameters are held: learning moves only the mixing parameter.
#[derive(Clone)]
struct Held<M>(M);

impl<M: ClusterModel> ClusterModel for Held<M> {
    type Stats = M::Stats;

    fn n_features(&self) -> usize {
        self.0.n_features()
    }

    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<M::Stats> {
        self.0.leaf_stats(row, index)
    }

    fn merge(&self, a: &M::Stats, b: &M::Stats) -> M::Stats {
        self.0.merge(a, b)
    }

    fn log_marginal(&self, s: &M::Stats) -> Result<f64> {
        self.0.log_marginal(s)
    }
}

impl<M: ClusterModel + Clone> Differentiable for Held<M> {
    fn n_hyperparameters(&self) -> usize {
        0
    }

    fn hyperparameters(&self) -> Vec<f64> {
        Vec::new()
    }

    fn with_hyperparameters(&self, _eta: &[f64]) -> Result<Self> {
        Ok(self.clone())
    }

    fn add_gradient(&self, _s: &M::Stats, _weight: f64, _grad: &mut [f64]) -> Result<()> {
        Ok(())
    }
}

impl<M: ClusterModel + Clone> Learnable for Held<M> {
    fn start(&self, _tie: bool) -> Vec<f64> {
        Vec::new()
    }

    fn at(&self, _eta: &[f64], _tie: bool) -> Result<Self> {
        Ok(self.clone())
    }

    fn coordinate_gradient(&self, _eta: &[f64], _grad: &[f64], _tie: bool) -> Vec<f64> {
        Vec::new()
    }
}

fn gamma_of(mixing: &Mixing) -> f64 {
    match *mixing {
        Mixing::Brt { gamma } | Mixing::Gamma { gamma } => gamma,
        Mixing::Dp { alpha } => alpha,
    }
}

#[test]
fn gamma_alone_reaches_the_maximum_of_a_dense_grid_of_the_trees_evidence() {
    let x = clustered(1, 3, 4);
    let model = BetaBernoulli::new(&[0.8], &[1.2], 4).unwrap();
    let leaves = model.leaf_stats_all(x.view()).unwrap();
    for start in [Mixing::Brt { gamma: 0.5 }, Mixing::Gamma { gamma: 0.02 }] {
        // One tree throughout: the search hands back the greedy tree of the start.
        let tree = fit(&model, &BrtParams::new(start).check().unwrap(), x.view()).unwrap();
        let topology = tree.topology();
        let evidence = |mixing: &Mixing| {
            evaluate(&model, mixing, &topology, &leaves)
                .unwrap()
                .log_evidence()
        };
        let params = LearnParams::new(BrtParams::new(start)).check().unwrap();
        let held = Held(model.clone());
        let learned = learn_with(
            &held,
            &params,
            x.view(),
            &mut |_, mixing| evaluate(&model, mixing, &topology, &leaves),
            &|| false,
            &mut |_| {},
        )
        .unwrap();
        // Brute force: γ on a grid of 20 000 points of (0, 1).
        let with = |gamma: f64| match start {
            Mixing::Brt { .. } => Mixing::Brt { gamma },
            _ => Mixing::Gamma { gamma },
        };
        let (mut grid_best, mut grid_gamma) = (f64::NEG_INFINITY, 0.0);
        for k in 1..20_000 {
            let gamma = f64::from(k) / 20_000.0;
            let value = evidence(&with(gamma));
            if value > grid_best {
                (grid_best, grid_gamma) = (value, gamma);
            }
        }
        let got = learned.log_evidence();
        assert_eq!(got, evidence(&learned.mixing));
        assert!(
            got >= grid_best - 1e-9,
            "{start:?}: {got} vs grid {grid_best}"
        );
        assert!(
            (gamma_of(&learned.mixing) - grid_gamma).abs() < 1e-3,
            "{start:?}: γ {} vs grid {grid_gamma}",
            gamma_of(&learned.mixing)
        );
        assert!(got > evidence(&start));
    }
}

/// `n` binary rows in three groups, each bit of a group's prototype flipped with
/// probability `flip`.
fn noisy(seed: u64, n: usize, d: usize, flip: f64) -> Array2<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let protos: Vec<Vec<bool>> = (0..3)
        .map(|_| (0..d).map(|_| rng.random_bool(0.5)).collect())
        .collect();
    Array2::from_shape_fn((n, d), |(i, j)| {
        f64::from(u8::from(protos[i % 3][j] ^ rng.random_bool(flip)))
    })
}

#[test]
fn at_an_interior_optimum_the_gradient_vanishes() {
    let x = noisy(2, 24, 5, 0.2);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 5).unwrap();
    for (mixing, tie) in [
        (Mixing::Brt { gamma: 0.5 }, true),
        (Mixing::Dp { alpha: 1.0 }, true),
        (Mixing::Gamma { gamma: 0.3 }, false),
    ] {
        let params = LearnParams::new(BrtParams::new(mixing).binary(true))
            .tie(tie)
            .tol(0.0)
            .check()
            .unwrap();
        let learned = learn(&model, &params, x.view(), &|| false).unwrap();
        let leaves = learned.model.leaf_stats_all(x.view()).unwrap();
        let g = evidence_gradient(
            &learned.model,
            &learned.mixing,
            &learned.tree.topology(),
            &leaves,
        )
        .unwrap();
        let value = learned.log_evidence();
        assert!((g.log_evidence - value).abs() <= 1e-12 * value.abs());
        // The coordinates' gradient: ∂/∂ln α = α ∂/∂α (summed over features when tied),
        // and ∂/∂logit γ = γ(1 − γ) ∂/∂γ or ∂/∂ln a = a ∂/∂a.
        let d = 5;
        let (alpha, beta) = (learned.model.alpha(), learned.model.beta());
        let coords: Vec<f64> = if tie {
            vec![
                (0..d).map(|i| alpha[i] * g.model[i]).sum(),
                (0..d).map(|i| beta[i] * g.model[d + i]).sum(),
            ]
        } else {
            (0..d)
                .map(|i| alpha[i] * g.model[i])
                .chain((0..d).map(|i| beta[i] * g.model[d + i]))
                .collect()
        };
        let (theta, theta_value) = match learned.mixing {
            Mixing::Brt { gamma } | Mixing::Gamma { gamma } => (
                gamma * (1.0 - gamma) * g.mixing,
                (gamma / (1.0 - gamma)).ln(),
            ),
            Mixing::Dp { alpha } => (alpha * g.mixing, alpha.ln()),
        };
        let values: Vec<f64> = if tie {
            vec![alpha[0].ln(), beta[0].ln()]
        } else {
            alpha.iter().chain(beta).map(|v| v.ln()).collect()
        };
        // Karush–Kuhn–Tucker: zero inside the box; at a bound, pointing out of it.
        let mut interior = 0;
        for (c, v) in coords
            .iter()
            .chain([&theta])
            .zip(values.iter().chain([&theta_value]))
        {
            if *v <= -LOG_BOUND + 1e-6 {
                assert!(*c <= 1e-3, "{mixing:?}, tie {tie}: {c} at the lower bound");
            } else if *v >= LOG_BOUND - 1e-6 {
                assert!(*c >= -1e-3, "{mixing:?}, tie {tie}: {c} at the upper bound");
            } else {
                interior += 1;
                assert!(c.abs() < 1e-3, "{mixing:?}, tie {tie}: {coords:?} {theta}");
            }
        }
        // Tied, every coordinate is interior on these data.
        assert!(
            interior == coords.len() + 1 || !tie,
            "{values:?} {theta_value}"
        );
        assert!(interior >= 1);
        assert!(learned.trace.windows(2).all(|w| w[1] >= w[0]));
    }
}

#[test]
fn learning_never_loses_evidence_and_stages_a_shared_start() {
    let x = clustered(3, 4, 6);
    let model = BetaBernoulli::new(&[1.0], &[1.0], 6).unwrap();
    let search = BrtParams::new(Mixing::Brt { gamma: 0.5 });
    // As `learn` searches: with the model ready for the rows' counts.
    let mut prepared = model.clone();
    prepared.prepare(x.nrows());
    let start = fit(&prepared, &search.check().unwrap(), x.view()).unwrap();
    let tied = learn(
        &model,
        &LearnParams::new(search).tie(true).check().unwrap(),
        x.view(),
        &|| false,
    )
    .unwrap();
    let staged = learn(
        &model,
        &LearnParams::new(search).check().unwrap(),
        x.view(),
        &|| false,
    )
    .unwrap();
    // The first value is the search at the given hyperparameters, exactly.
    assert_eq!(tied.trace[0], start.log_evidence());
    for learned in [&tied, &staged] {
        assert!(learned.trace.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*learned.trace.last().unwrap(), learned.log_evidence());
        // The reported evidence is the tree's under the learnt hyperparameters.
        let leaves = learned.model.leaf_stats_all(x.view()).unwrap();
        let again = evaluate(
            &learned.model,
            &learned.mixing,
            &learned.tree.topology(),
            &leaves,
        )
        .unwrap();
        assert!(
            (again.log_evidence() - learned.log_evidence()).abs()
                <= 1e-12 * again.log_evidence().abs()
        );
    }
    assert!(tied.log_evidence() > start.log_evidence() + 1.0);
    // Stage one is the tied ascent itself; stage two only climbs from its end.
    assert_eq!(staged.trace[..tied.trace.len()], tied.trace[..]);
    assert!(staged.trace.len() > tied.trace.len());
    assert!(staged.log_evidence() >= tied.log_evidence());
    let alpha = staged.model.alpha();
    assert!(alpha.iter().any(|a| *a != alpha[0]), "{alpha:?}");
    assert!(
        tied.model
            .alpha()
            .iter()
            .all(|a| *a == tied.model.alpha()[0])
    );
}

#[test]
fn every_built_in_model_learns() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let real = Array2::from_shape_fn((18, 2), |(i, _)| {
        (i / 6) as f64 * 2.0 + rng.random_range(-0.3..0.3)
    });
    let counts = Array2::from_shape_fn((12, 3), |(i, j)| {
        f64::from(if (i / 6) == j % 2 { 5_u8 } else { 1 } + u8::from((i + j) % 3 == 0))
    });
    let search = BrtParams::new(Mixing::Brt { gamma: 0.5 });
    fn check<M: Learnable + crate::models::RowQueries>(
        model: &M,
        x: &Array2<f64>,
        search: BrtParams,
        tie: bool,
    ) {
        let params = LearnParams::new(search).tie(tie).check().unwrap();
        let start = fit(model, &search.check().unwrap(), x.view()).unwrap();
        let learned = learn(model, &params, x.view(), &|| false).unwrap();
        assert!(
            learned.log_evidence() > start.log_evidence(),
            "{} {}",
            learned.log_evidence(),
            start.log_evidence()
        );
        assert!(learned.trace.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(learned.model.n_hyperparameters(), model.n_hyperparameters());
    }
    let niw = NormalInverseWishart::from_data(real.view(), None, None).unwrap();
    let ng = NormalGamma::new(&[2.0, 2.0], 1.0, 5.0, &[1.0, 1.0], 2).unwrap();
    let dm = DirichletMultinomial::new(&[1.0], 3, false).unwrap();
    for tie in [false, true] {
        check(&niw, &real, search, tie);
        check(&ng, &real, search, tie);
        check(&dm, &counts, search, tie);
    }
}

#[test]
fn restarts_are_deterministic_for_a_seed_and_any_thread_count() {
    let x = clustered(4, 6, 5);
    let model = BetaBernoulli::from_frequencies(
        &crate::models::ColumnMoments::dense(x.view()).unwrap(),
        None,
        None,
    )
    .unwrap();
    let run = |threads: Option<usize>, seed: u64| {
        let search = BrtParams::new(Mixing::Gamma { gamma: 0.5 }).n_threads(threads);
        let params = LearnParams::new(search)
            .n_restarts(2)
            .seed(seed)
            .check()
            .unwrap();
        learn(&model, &params, x.view(), &|| false).unwrap()
    };
    let one = run(Some(1), 9);
    assert_eq!(one.start_log_evidences.len(), 3);
    assert_eq!(
        one.log_evidence(),
        one.start_log_evidences
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    );
    for other in [run(Some(2), 9), run(None, 9), run(Some(1), 9)] {
        assert_eq!(other.start_log_evidences, one.start_log_evidences);
        assert_eq!(other.trace, one.trace);
        assert_eq!(other.model.hyperparameters(), one.model.hyperparameters());
        assert_eq!(other.mixing, one.mixing);
        assert_eq!(other.tree.topology(), one.tree.topology());
    }
    // Another seed draws other restarts (the first start is the same).
    let reseeded = run(Some(1), 10);
    assert_eq!(reseeded.start_log_evidences[0], one.start_log_evidences[0]);
    assert_ne!(
        reseeded.start_log_evidences[1..],
        one.start_log_evidences[1..]
    );
}

#[test]
fn bad_parameters_are_named() {
    let brt = BrtParams::new(Mixing::Brt { gamma: 0.5 });
    let name = |r: Result<ValidLearnParams>| match r {
        Err(RoseTreeError::InvalidParameter { name, .. }) => name,
        other => panic!("{other:?}"),
    };
    assert_eq!(name(LearnParams::new(brt).max_iter(0).check()), "max_iter");
    assert_eq!(name(LearnParams::new(brt).tol(-1.0).check()), "tol");
    assert_eq!(name(LearnParams::new(brt).tol(f64::NAN).check()), "tol");
    for gamma in [0.0, 1.0, f64::NAN] {
        let search = BrtParams::new(Mixing::Gamma { gamma });
        assert_eq!(name(LearnParams::new(search).check()), "gamma");
    }
    for alpha in [0.0, -1.0, f64::INFINITY] {
        let search = BrtParams::new(Mixing::Dp { alpha });
        assert_eq!(name(LearnParams::new(search).check()), "dp_alpha");
    }
    assert_eq!(
        name(LearnParams::new(brt.n_threads(Some(0))).check()),
        "n_jobs"
    );
    // Rows that do not fit the model.
    let model = BetaBernoulli::new(&[1.0], &[1.0], 3).unwrap();
    let params = LearnParams::new(brt).check().unwrap();
    let x = clustered(0, 2, 4);
    assert!(matches!(
        learn(&model, &params, x.view(), &|| false),
        Err(RoseTreeError::ShapeMismatch { .. })
    ));
    // Interrupted before it starts.
    let x = clustered(0, 2, 3);
    assert!(matches!(
        learn(&model, &params, x.view(), &|| true),
        Err(RoseTreeError::Interrupted)
    ));
}

#[test]
fn a_start_outside_the_box_is_kept_until_beaten() {
    // All ones: every tree's evidence is 7 ln(α/(α+β)) to O(β/α²), so a point inside the
    // box cannot beat α = 1e12, and learning must keep it.
    let x = Array2::from_elem((7, 1), 1.0);
    let model = BetaBernoulli::new(&[1e12], &[1.27], 1).unwrap();
    let search = BrtParams::new(Mixing::Brt { gamma: 0.5 });
    let start = fit(&model, &search.check().unwrap(), x.view()).unwrap();
    let learned = learn(
        &model,
        &LearnParams::new(search).check().unwrap(),
        x.view(),
        &|| false,
    )
    .unwrap();
    assert!((learned.trace[0] - start.log_evidence()).abs() <= 1e-12 * start.log_evidence().abs());
    assert!(learned.log_evidence() >= start.log_evidence());
    assert!(learned.trace.windows(2).all(|w| w[1] >= w[0]));
}
