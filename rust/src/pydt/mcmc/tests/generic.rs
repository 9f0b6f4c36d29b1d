//! The chain under a message model of the message layer ([`Messages`]) against independent
//! computations: Brownian motion against the isotropic chain's unit messages and the dense
//! covariance form, with a diagonal rate per feature; the mutation process against the sum
//! over every internal node's state with the transition matrices `exp(δ Q)` of its rate
//! matrix (nalgebra's matrix exponential); the stationary distribution against the prior's
//! closed-form structure probabilities and the three-point posterior by quadrature; the
//! predictive density against the Gaussian mixture and the enumerated joint of the tree with
//! the new row attached.

use nalgebra::DMatrix;
use ndarray::Array2;

use super::*;
use crate::models::messages::{BrownianDiffusion, MultinomialMutation, Root};
use crate::pydt::predict::{MessagePredictor, Predictor};
use crate::pydt::sample_tree;
use crate::tree::Topology;

/// The diffusion tree's Brownian motion with variance `lambda[j]` per unit time in feature
/// `j`, from the point mass at the origin.
fn brownian(lambda: &[f64]) -> BrownianDiffusion {
    BrownianDiffusion::diagonal(lambda, lambda.len())
        .unwrap()
        .with_root(Root::Gaussian { s0: 0.0 })
        .unwrap()
}

/// Data whose entries look random but are a fixed function of the position.
fn data(n: usize, d: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |(i, j)| ((i * 7 + j * 3) as f64 * 0.37).sin() * 1.5)
}

/// Test trees: the hand-made small ones and draws from the prior, from 1 to `max` leaves.
fn trees(max: usize, seed: u64) -> Vec<Tree> {
    let mut r = rng(seed);
    let mut out: Vec<Tree> = small_trees()
        .into_iter()
        .filter(|t| t.n_leaves() <= max)
        .collect();
    out.push(tree(1, vec![], &[]));
    for n in 2..=max {
        for _ in 0..3 {
            out.push(sample_tree(n, &params(1.0, 0.3, 1.0), &mut r).unwrap());
        }
    }
    out
}

#[test]
fn brownian_messages_give_the_unit_messages_and_the_covariance_form() {
    for t in &trees(9, 1) {
        for (d, sigma2) in [(1, 1.0), (3, 0.4), (2, 2.5)] {
            let x = data(t.n_leaves(), d);
            let p = params(0.5, 0.2, 1.5);
            let unit = Chain::new(x.view(), t, p, sigma2).unwrap();
            let generic = Chain::with_model(brownian(&vec![sigma2; d]), x.view(), t, p).unwrap();
            let want = covariance_log_likelihood(&x, t, sigma2);
            for got in [unit.log_likelihood(), generic.log_likelihood()] {
                assert!(
                    (got - want).abs() < 1e-10 * (1.0 + want.abs()),
                    "{}: {got} vs {want}",
                    t.to_newick(None)
                );
            }
            assert_eq!(generic.log_prior(), unit.log_prior());
            assert!(generic.likelihood().sigma2().is_nan());
        }
        // A rate per feature: the columns are independent, each N(0, λ_j C).
        let x = data(t.n_leaves(), 2);
        let lambda = [0.3, 1.7];
        let generic =
            Chain::with_model(brownian(&lambda), x.view(), t, params(1.0, 0.1, 1.0)).unwrap();
        let want: f64 = (0..2)
            .map(|j| {
                let col = x.column(j).to_owned().insert_axis(ndarray::Axis(1));
                covariance_log_likelihood(&col, t, lambda[j])
            })
            .sum();
        let got = generic.log_likelihood();
        assert!(
            (got - want).abs() < 1e-10 * (1.0 + want.abs()),
            "{got} vs {want}"
        );
    }
}

/// The transition matrix `exp(δ Q)` of feature `q`'s mutation process with rate `rate`:
/// `Q = rate (1 qᵀ − I)` (`models/messages/mutation.rs`), exponentiated by nalgebra.
fn transition(q: &[f64], rate: f64, delta: f64) -> DMatrix<f64> {
    let k = q.len();
    let generator = DMatrix::from_fn(k, k, |i, j| rate * (q[j] - f64::from(u8::from(i == j))));
    (generator * delta).exp()
}

/// `ln p(X | T, t)` under independent-sites mutation from the equilibrium at the origin, by
/// summing over the states of the origin and of every internal node: `K^(I + 1)` terms a
/// feature. A missing entry (NaN) is summed out (its factor is 1).
fn mutation_by_enumeration(x: &Array2<f64>, t: &Tree, q: &[Vec<f64>], rates: &[f64]) -> f64 {
    let h = t.heights().unwrap();
    let n = t.n_leaves();
    let m = t.nodes().len();
    let root = t.root();
    let mut total = 0.0;
    for (d, qd) in q.iter().enumerate() {
        let k = qd.len();
        // The transition matrix of every node's branch (the root's from the origin).
        let p: Vec<DMatrix<f64>> = (0..m)
            .map(|v| {
                let top = t.node(v).parent.map_or(0.0, |a| h[a]);
                transition(qd, rates[d], h[v] - top)
            })
            .collect();
        let mut sum = 0.0;
        for code in 0..k.pow((m - n + 1) as u32) {
            let mut c = code;
            let mut state = vec![0; m];
            let origin = c % k;
            c /= k;
            for s in state.iter_mut().skip(n) {
                *s = c % k;
                c /= k;
            }
            let mut term = qd[origin];
            for v in 0..m {
                let from = t.node(v).parent.map_or(origin, |a| state[a]);
                if v < n {
                    let obs = x[[v, d]];
                    if !obs.is_nan() {
                        term *= p[v][(from, obs as usize)];
                    }
                } else {
                    term *= p[v][(from, state[v])];
                }
            }
            sum += term;
        }
        let _ = root;
        total += sum.ln();
    }
    total
}

/// Two features, of three and two states, with their rates.
fn mutation_setting() -> (Vec<Vec<f64>>, Vec<f64>) {
    (vec![vec![0.2, 0.3, 0.5], vec![0.65, 0.35]], vec![0.7, 1.8])
}

/// Codes for the two features, with a missing entry.
fn codes(n: usize) -> Array2<f64> {
    let mut x = Array2::from_shape_fn((n, 2), |(i, j)| ((i * 5 + j * 2 + i * i) % (3 - j)) as f64);
    if n > 2 {
        x[[2, 1]] = f64::NAN;
    }
    x
}

#[test]
fn mutation_messages_give_the_sum_over_internal_states() {
    let (q, rates) = mutation_setting();
    let model = MultinomialMutation::new(&q, &rates).unwrap();
    for t in &trees(5, 2) {
        let x = codes(t.n_leaves());
        let chain = Chain::with_model(model.clone(), x.view(), t, params(0.5, 0.2, 1.5)).unwrap();
        let want = mutation_by_enumeration(&x, t, &q, &rates);
        let got = chain.log_likelihood();
        assert!(
            (got - want).abs() < 1e-12 * (1.0 + want.abs()),
            "{}: {got} vs {want}",
            t.to_newick(None)
        );
    }
}

#[test]
fn the_cached_likelihood_follows_every_move_of_a_mutation_chain() {
    let (q, rates) = mutation_setting();
    let model = MultinomialMutation::new(&q, &rates).unwrap();
    let x = codes(6);
    let p = params(0.8, 0.3, 1.2);
    let start = sample_tree(6, &p, &mut rng(4)).unwrap();
    let mut chain = Chain::with_model(model, x.view(), &start, p).unwrap();
    let config = McmcConfig {
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: false,
        },
        ..McmcConfig::default()
    };
    let mut r = rng(5);
    let mut structures = std::collections::BTreeSet::new();
    for _ in 0..40 {
        chain.sweep(&config, &mut r, &|| false).unwrap();
        let now = chain.tree().unwrap();
        structures.insert(structure(&now));
        let want = mutation_by_enumeration(&x, &now, &q, &rates);
        assert!((chain.log_likelihood() - want).abs() < 1e-11 * (1.0 + want.abs()));
        let prior = log_prior(&now, &chain.params()).unwrap();
        assert!((chain.log_prior() - prior).abs() < 1e-9 * (1.0 + prior.abs()));
    }
    assert!(structures.len() > 5, "the chain hardly moved");
}

#[test]
fn a_mutation_chain_without_observations_samples_the_prior_structures() {
    // One feature missing everywhere: the likelihood is 1 and the chain samples the prior.
    let model = MultinomialMutation::new(&[vec![0.5, 0.5]], &[1.0]).unwrap();
    let n = 4;
    let p = params(0.5, 0.2, 2.0);
    let exact = exact_structures(n, &p);
    let start = tree(
        4,
        vec![vec![0, 1], vec![2, 3], vec![4, 5]],
        &[0.6, 0.8, 0.2],
    );
    let x = Array2::from_elem((n, 1), f64::NAN);
    let mut chain = Chain::with_model(model, x.view(), &start, p).unwrap();
    let config = McmcConfig::default();
    let mut r = rng(3);
    let draws: Vec<String> = (0..60_000)
        .map(|_| {
            chain.sweep(&config, &mut r, &|| false).unwrap();
            structure(&chain.tree().unwrap())
        })
        .collect();
    let z = max_z(&draws, &exact, 30);
    assert!(z < 4.5, "max z = {z}");
}

/// Runs a chain under `lik` on three rows from the star at 0.5 and asserts that its
/// structures and `E[t_root]` follow the exact posterior `(exact, root_time)`.
fn assert_posterior<L: ChainLikelihood>(
    mut chain: Chain<L>,
    (exact, root_time): (BTreeMap<String, f64>, f64),
    seed: u64,
    what: &str,
) {
    let config = McmcConfig::default();
    let mut r = rng(seed);
    let mut times = Vec::new();
    let structures: Vec<String> = (0..60_000)
        .map(|_| {
            chain.sweep(&config, &mut r, &|| false).unwrap();
            let t = chain.tree().unwrap();
            times.push(t.heights().unwrap()[t.root()]);
            structure(&t)
        })
        .collect();
    let z = max_z(&structures, &exact, 30);
    assert!(z < 4.5, "{what}: max z = {z}: {exact:?}");
    assert_mean(&times, root_time, what);
}

#[test]
fn message_chains_sample_the_posterior_of_three_points() {
    let p = params(0.5, 0.2, 1.5);
    let star = tree(3, vec![vec![0, 1, 2]], &[0.5]);
    // Mutation: two rows agree in both features, the third in neither; the exact
    // posterior by quadrature of the enumerated likelihood.
    let (q, rates) = mutation_setting();
    let x = ndarray::array![[0.0, 1.0], [0.0, 1.0], [2.0, 0.0]];
    let exact = three_point_posterior_of(&p, &|t: &Tree| {
        mutation_by_enumeration(&x, t, &q, &rates).exp()
    });
    let model = MultinomialMutation::new(&q, &[3.0, 4.0]).unwrap();
    // The chain's rates must be those of the exact posterior.
    assert!(model.rates() != rates.as_slice());
    let model = model.with_rates(&rates).unwrap();
    let chain = Chain::with_model(model, x.view(), &star, p).unwrap();
    assert_posterior(chain, exact, 7, "mutation");
    // Brownian motion: the exact posterior from the covariance form.
    let x = ndarray::array![[0.1, -0.3], [0.4, 0.2], [-1.2, 0.9]];
    let sigma2 = 0.6;
    let exact = three_point_posterior_of(&p, &|t: &Tree| {
        covariance_log_likelihood(&x, t, sigma2).exp()
    });
    let chain = Chain::with_model(brownian(&[sigma2; 2]), x.view(), &star, p).unwrap();
    assert_posterior(chain, exact, 8, "Brownian");
}

#[test]
fn message_chains_refuse_the_isotropic_moves_and_run_from_a_seed() {
    let model = MultinomialMutation::new(&[vec![0.5, 0.5]], &[1.0]).unwrap();
    let x = ndarray::array![[0.0], [1.0], [1.0], [0.0]];
    let p = params(0.5, 0.2, 1.0);
    let run = |config: &McmcConfig, seed: u64| {
        run_model(
            model.clone(),
            x.view(),
            None,
            p,
            config,
            seed,
            &|| false,
            &mut |_, _| {},
        )
    };
    let named = |config: McmcConfig, want: &str| match run(&config, 0) {
        Err(RoseTreeError::InvalidParameter { name, .. }) => assert_eq!(name, want),
        other => panic!("{want}: {other:?}"),
    };
    named(
        McmcConfig {
            subtree_move: SubtreeMove::Gibbs,
            ..McmcConfig::default()
        },
        "subtree_move",
    );
    named(
        McmcConfig {
            likelihood: Likelihood::Probit,
            ..McmcConfig::default()
        },
        "likelihood",
    );
    named(
        McmcConfig {
            learn: Learn {
                sigma2: true,
                ..Learn::default()
            },
            ..McmcConfig::default()
        },
        "sigma2",
    );
    let bad = ndarray::array![[0.0], [1.0], [2.0], [0.0]];
    assert!(matches!(
        Chain::with_model(
            model.clone(),
            bad.view(),
            &sample_tree(4, &p, &mut rng(1)).unwrap(),
            p
        ),
        Err(RoseTreeError::InvalidData { .. })
    ));
    let config = McmcConfig {
        n_iter: 20,
        burn_in: 10,
        ..McmcConfig::default()
    };
    let a = run(&config, 3).unwrap();
    let b = run(&config, 3).unwrap();
    assert_eq!(a.samples.len(), 10);
    assert_eq!(a.last.log_joint, b.last.log_joint);
    assert_eq!(a.last.tree.to_newick(None), b.last.tree.to_newick(None));
    assert!(a.trace.iter().all(|row| row.sigma2.is_nan()));
}

#[test]
fn the_message_predictor_of_brownian_motion_is_the_gaussian_mixture() {
    for (seed, (a, b, c)) in [
        (1, (1.0, 0.3, 1.0)),
        (2, (0.0, 0.0, 1.5)),
        (3, (-0.2, 0.4, 0.7)),
    ] {
        let p = params(a, b, c);
        for (n, d, sigma2) in [(1, 2, 0.8), (2, 1, 1.3), (9, 3, 0.5)] {
            let (x, t) = crate::pydt::sample(n, d, &p, sigma2, seed).unwrap();
            let rows = data(4, d);
            let gaussian = Predictor::new(x.view(), &t, &p, sigma2, 3).unwrap();
            let generic =
                MessagePredictor::new(brownian(&vec![sigma2; d]), x.view(), &t, &p, 3).unwrap();
            let want = gaussian.log_density(rows.view()).unwrap();
            let got = generic.log_density(rows.view()).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-10 * (1.0 + w.abs()), "{g} vs {w}");
            }
        }
    }
}

/// `tree` with a new leaf (id `n`, the last leaf) diverging at `time` on the branch into
/// `u`, or at `u` itself when `time` is `u`'s own time (a new branch of a branch point).
fn attach_leaf(tree: &Tree, u: usize, time: f64) -> Tree {
    let h = tree.heights().unwrap();
    let (n, m) = (tree.n_leaves(), tree.nodes().len());
    let at_node = u >= n && time == h[u];
    const NEW: usize = usize::MAX;
    // The internal nodes in id order, the new one right after `u` (children first).
    let mut order = Vec::new();
    if !at_node && u < n {
        order.push(NEW);
    }
    for v in n..m {
        order.push(v);
        if !at_node && v == u {
            order.push(NEW);
        }
    }
    let id = |v: usize| {
        if v < n {
            v
        } else {
            n + 1 + order.iter().position(|&o| o == v).unwrap()
        }
    };
    let (mut internal, mut heights) = (Vec::new(), vec![1.0; n + 1]);
    for &o in &order {
        if o == NEW {
            internal.push(vec![id(u), n]);
            heights.push(time);
            continue;
        }
        let mut children: Vec<usize> = tree
            .node(o)
            .children
            .iter()
            .map(|&c| if !at_node && c == u { id(NEW) } else { id(c) })
            .collect();
        if at_node && o == u {
            children.push(n);
        }
        internal.push(children);
        heights.push(h[o]);
    }
    Tree::new(&Topology::new(n + 1, internal).unwrap(), Some(heights)).unwrap()
}

#[test]
fn the_message_predictor_of_mutation_is_the_enumerated_joint_over_the_tree() {
    // Each component's density is p(X, y | T + y) / p(X | T) with y attached where the
    // component diverges, both by enumeration; the weights are the divergence process's.
    let (q, rates) = mutation_setting();
    let model = MultinomialMutation::new(&q, &rates).unwrap();
    let p = params(0.7, 0.3, 1.2);
    for t in &trees(4, 9) {
        let n = t.n_leaves();
        let x = codes(n);
        let predictor = MessagePredictor::new(model.clone(), x.view(), t, &p, 2).unwrap();
        // The mixture's weights and positions, from the Gaussian predictor on any data.
        let positions = Predictor::new(Array2::zeros((n, 1)).view(), t, &p, 1.0, 2).unwrap();
        let base = mutation_by_enumeration(&x, t, &q, &rates);
        let mut total = 0.0;
        for k0 in 0..3 {
            for k1 in 0..2 {
                let y = [k0 as f64, k1 as f64];
                let mut all = x.clone();
                all.push_row(ndarray::ArrayView1::from(&y)).unwrap();
                let terms: Vec<f64> = positions
                    .positions()
                    .iter()
                    .zip(positions.log_weights())
                    .map(|(&(u, time), w)| {
                        w + mutation_by_enumeration(&all, &attach_leaf(t, u, time), &q, &rates)
                            - base
                    })
                    .collect();
                let want = crate::math::log_sum_exp(&terms);
                let got = predictor
                    .log_density_row(ndarray::ArrayView1::from(&y), 0)
                    .unwrap();
                assert!(
                    (got - want).abs() < 1e-10,
                    "{} y = {y:?}: {got} vs {want}",
                    t.to_newick(None)
                );
                total += got.exp();
            }
        }
        assert!((total - 1.0).abs() < 1e-12, "the densities sum to {total}");
        // A missing entry is summed out.
        let y = [1.0, f64::NAN];
        let got = predictor
            .log_density_row(ndarray::ArrayView1::from(&y), 0)
            .unwrap();
        let want = (0..2)
            .map(|k1| {
                let y = [1.0, f64::from(k1)];
                predictor
                    .log_density_row(ndarray::ArrayView1::from(&y), 0)
                    .unwrap()
                    .exp()
            })
            .sum::<f64>()
            .ln();
        assert!((got - want).abs() < 1e-12);
    }
}

#[test]
fn a_fitted_message_chain_scores_rows_by_the_mean_of_its_states() {
    let (q, rates) = mutation_setting();
    let model = MultinomialMutation::new(&q, &rates).unwrap();
    let x = codes(6);
    let p = params(0.5, 0.2, 1.0);
    let config = McmcConfig {
        n_iter: 12,
        burn_in: 6,
        thin: 2,
        ..McmcConfig::default()
    };
    let result = run_model(
        model.clone(),
        x.view(),
        None,
        p,
        &config,
        1,
        &|| false,
        &mut |_, _| {},
    )
    .unwrap();
    let fitted = crate::pydt::Fitted::with_likelihood(
        Messages::new(model.clone()),
        x.view(),
        result.clone(),
        2,
    )
    .unwrap();
    let rows = ndarray::array![[0.0, 1.0], [2.0, f64::NAN]];
    let got = fitted
        .log_density(
            rows.view(),
            &crate::parallel::Threads::new(Some(2)).unwrap(),
        )
        .unwrap();
    for (i, value) in got.iter().enumerate() {
        let mean = result
            .samples
            .iter()
            .map(|s| {
                MessagePredictor::new(model.clone(), x.view(), &s.tree, &s.params, 2)
                    .unwrap()
                    .log_density_row(rows.row(i), i)
                    .unwrap()
                    .exp()
            })
            .sum::<f64>()
            / result.samples.len() as f64;
        assert!((value - mean.ln()).abs() < 1e-12, "row {i}");
    }
    let bad = ndarray::array![[0.0, 5.0]];
    assert!(matches!(
        fitted.log_density(bad.view(), &crate::parallel::Threads::new(Some(1)).unwrap()),
        Err(RoseTreeError::InvalidData { .. })
    ));
}
