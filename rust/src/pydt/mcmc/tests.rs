//! The chain against independent computations: its cached likelihood and prior against
//! `log_likelihood` (message passing) and `log_prior`; the attachment density against
//! quadrature; the stationary distribution against exact structure probabilities (the prior
//! in closed form, the posterior of three points by quadrature), with Monte Carlo errors
//! from batch means.

use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector};
use ndarray::{Array2, array};

use super::*;
use crate::pydt::tests::{
    covariance_log_likelihood, integrate_shape, params, rng, shapes, small_trees, tanh_sinh, tree,
};
use crate::pydt::{log_likelihood, log_prior};

/// A tree's labelled structure: the sorted leaf sets of its internal nodes.
pub(super) fn structure(tree: &Tree) -> String {
    let mut sets: Vec<Vec<usize>> = (tree.n_leaves()..tree.nodes().len())
        .map(|v| {
            let mut l = tree.leaves_of(v);
            l.sort_unstable();
            l
        })
        .collect();
    sets.sort();
    format!("{sets:?}")
}

/// Every labelled rooted tree (any number of branches per node) on `set`, as a list of the
/// internal nodes' leaf sets with, per internal node, its children's leaf counts.
/// A labelled tree: its internal nodes' leaf sets and their children's leaf counts.
type Labelled = (Vec<Vec<usize>>, Vec<Vec<usize>>);

fn all_trees(set: &[usize]) -> Vec<Labelled> {
    if set.len() == 1 {
        return vec![(Vec::new(), Vec::new())];
    }
    let mut out = Vec::new();
    // Set partitions of `set` into at least two blocks (restricted growth strings).
    let n = set.len();
    let mut labels = vec![0usize; n];
    loop {
        let k = labels.iter().max().unwrap() + 1;
        if k >= 2 {
            let blocks: Vec<Vec<usize>> = (0..k)
                .map(|b| (0..n).filter(|&i| labels[i] == b).map(|i| set[i]).collect())
                .collect();
            // The product of the blocks' trees.
            let mut acc: Vec<Labelled> = vec![(Vec::new(), Vec::new())];
            for block in &blocks {
                let subs = all_trees(block);
                acc = acc
                    .iter()
                    .flat_map(|(s, c)| {
                        subs.iter().map(move |(s2, c2)| {
                            let mut s = s.clone();
                            s.extend(s2.iter().cloned());
                            let mut c = c.clone();
                            c.extend(c2.iter().cloned());
                            (s, c)
                        })
                    })
                    .collect();
            }
            let mut all = set.to_vec();
            all.sort_unstable();
            for (s, c) in &mut acc {
                s.push(all.clone());
                c.push(blocks.iter().map(Vec::len).collect());
            }
            out.extend(acc);
        }
        // Next restricted growth string.
        let mut i = n - 1;
        loop {
            let max_before = labels[..i].iter().max().copied().unwrap_or(0);
            if i > 0 && labels[i] <= max_before {
                labels[i] += 1;
                labels[i + 1..].iter_mut().for_each(|l| *l = 0);
                break;
            }
            if i <= 1 {
                return out;
            }
            i -= 1;
        }
    }
}

/// The probability of each labelled structure on `n` leaves with the divergence times
/// integrated out: `Π_b S_b / H_{m_b − 1}` (the integral over nested `τ_b = −ln(1 − t_b)`
/// of `Π_b c e^{−c J_b τ_b}` is `Π_b 1/Σ_{b' under b} J_{b'}`, and the `J` of a subtree sum
/// to `H_{m − 1}`). Checked here against quadrature of `log_prior`.
pub(super) fn exact_structures(n: usize, p: &PydtParams) -> BTreeMap<String, f64> {
    let h = p.harmonic(n - 1);
    let leaves: Vec<usize> = (0..n).collect();
    all_trees(&leaves)
        .into_iter()
        .map(|(mut sets, counts)| {
            let prob: f64 = counts
                .iter()
                .map(|c| (p.ln_structure(c) - h[c.iter().sum::<usize>() - 1].ln()).exp())
                .product();
            sets.sort();
            (format!("{sets:?}"), prob)
        })
        .collect()
}

/// Per key, the largest `|frequency − p| / standard error` over a run split into batches
/// (batch means: the error allows for the chain's autocorrelation).
pub(super) fn max_z(draws: &[String], exact: &BTreeMap<String, f64>, batches: usize) -> f64 {
    let size = draws.len() / batches;
    let mut worst: f64 = 0.0;
    for (key, &p) in exact {
        let freqs: Vec<f64> = draws
            .chunks(size)
            .take(batches)
            .map(|b| b.iter().filter(|d| *d == key).count() as f64 / size as f64)
            .collect();
        let mean = freqs.iter().sum::<f64>() / batches as f64;
        let var = freqs.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (batches - 1) as f64;
        let se = (var / batches as f64).sqrt().max(1e-4);
        worst = worst.max((mean - p).abs() / se);
    }
    worst
}

fn start(params: PydtParams) -> Start<'static> {
    Start {
        tree: None,
        params,
        sigma2: 1.0,
    }
}

fn empty_data(n: usize) -> Array2<f64> {
    Array2::zeros((n, 0))
}

#[test]
fn the_closed_form_structure_probabilities_match_quadrature() {
    let p = params(0.5, 0.2, 2.0);
    for n in [3, 4] {
        let exact = exact_structures(n, &p);
        let total: f64 = exact.values().sum();
        assert!((total - 1.0).abs() < 1e-12, "n={n}: {total}");
        assert_eq!(exact.len(), if n == 3 { 4 } else { 26 });
        for (shape, _) in shapes(n) {
            let t = tree(n, shape.clone(), &vec![0.5; shape.len()]);
            let quad = integrate_shape(n, &shape, &p, 1.0 / 8.0, &|_| 1.0);
            let got = exact[&structure(&t)];
            assert!((got - quad).abs() < 1e-9, "{shape:?}: {got} vs {quad}");
        }
    }
}

#[test]
fn cached_likelihood_and_prior_follow_every_move() {
    let mut r = rng(11);
    for (k, t) in small_trees().into_iter().enumerate() {
        let n = t.n_leaves();
        let x = Array2::from_shape_fn((n, 3), |(i, j)| ((i * 7 + j * 3 + k) % 5) as f64 - 2.0);
        let p = params(0.7, 0.3, 1.3);
        let mut chain = Chain::new(x.view(), &t, p, 0.8).unwrap();
        for step in 0..60 {
            match step % 3 {
                0 | 1 => {
                    chain.subtree_move(&mut r).unwrap();
                }
                _ => chain.update_times(&mut r).unwrap(),
            }
            let now = chain.tree().unwrap();
            let want_lik = covariance_log_likelihood(&x, &now, 0.8);
            assert!((chain.log_likelihood() - want_lik).abs() < 1e-9);
            assert!(
                (chain.log_likelihood() - log_likelihood(x.view(), &now, 0.8).unwrap()).abs()
                    < 1e-9
            );
            assert!((chain.log_prior() - log_prior(&now, &p).unwrap()).abs() < 1e-9);
        }
    }
}

/// The positions of the generative process on a tree, with their masses: every branch
/// point (an atom) and every branch (the density integrated over `(top, min(end, t_sub))`).
fn position_masses(chain: &Chain, t_sub: f64) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let root = chain.arena.root();
    let nodes: Vec<NodeId> = chain.arena.pre_order(root).unwrap().collect();
    for u in nodes {
        let top = chain.top_time(u);
        if top >= t_sub {
            continue;
        }
        let node = chain.arena.node(u).unwrap();
        let end = node.time().min(t_sub);
        // t = end − (end − top)(1 − s)⁸ flattens the (1 − t)^{c w_1 − 1} of a branch into a
        // leaf, which tanh–sinh alone would truncate.
        let mass = tanh_sinh(0.0, 1.0, 1.0 / 16.0, &mut |s| {
            let t = end - (end - top) * (1.0 - s).powi(8);
            let jacobian = 8.0 * (end - top) * (1.0 - s).powi(7);
            if t > top && t < end {
                jacobian
                    * chain
                        .ln_attach(Attachment::Branch { below: u, time: t })
                        .exp()
            } else {
                0.0
            }
        });
        out.insert(format!("branch {u}"), mass);
        if !node.is_leaf() && node.time() < t_sub {
            out.insert(
                format!("node {u}"),
                chain.ln_attach(Attachment::Node(u)).exp(),
            );
        }
    }
    out
}

fn position_key(at: Attachment) -> String {
    match at {
        Attachment::Branch { below, .. } => format!("branch {below}"),
        Attachment::Node(u) => format!("node {u}"),
    }
}

#[test]
fn the_attachment_density_integrates_to_one_and_the_walks_follow_it() {
    let mut r = rng(21);
    // c w_1 is not small in these settings: with c w_1 = 0.2 the process puts a mass of
    // (10⁻¹⁶)^0.2 ≈ 10⁻³ within double precision's reach of t = 1, where no time exists.
    for (a, b, c) in [(0.5, 0.2, 1.0), (0.0, 0.0, 2.0), (2.0, 0.5, 3.0)] {
        let p = params(a, b, c);
        for t in small_trees() {
            let mut chain = Chain::new(empty_data(t.n_leaves()).view(), &t, p, 1.0).unwrap();
            let all = position_masses(&chain, 1.0);
            let total: f64 = all.values().sum();
            assert!((total - 1.0).abs() < 1e-8, "α={a} β={b} c={c}: {total}");
            // Conditioned on diverging before an internal node's time: the rejection walk and
            // the exact conditioned walk both draw positions in proportion to the masses.
            let t_sub = 0.5 * (1.0 + t.heights().unwrap()[t.root()]);
            let masses = position_masses(&chain, t_sub);
            let z: f64 = masses.values().sum();
            chain.walk_conditioned(t_sub, &mut r);
            let root = chain.arena.root();
            assert!((chain.z[root.index()] - z).abs() < 1e-8);
            let draws = 20_000;
            for exact in [false, true] {
                let mut counts: BTreeMap<String, usize> = BTreeMap::new();
                let mut got = 0;
                while got < draws {
                    let at = if exact {
                        chain.walk_conditioned(t_sub, &mut r)
                    } else {
                        chain.walk(t_sub, &mut r)
                    };
                    if let Some(at) = at {
                        *counts.entry(position_key(at)).or_default() += 1;
                        got += 1;
                    }
                }
                for (key, mass) in &masses {
                    let q = mass / z;
                    let f = counts.get(key).copied().unwrap_or(0) as f64 / draws as f64;
                    let se = (q * (1.0 - q) / draws as f64).sqrt().max(1e-4);
                    assert!(
                        (f - q).abs() < 5.0 * se,
                        "{key}: {f} vs {q} (exact={exact})"
                    );
                }
            }
        }
    }
}

/// The configuration with each subtree move.
fn with_move(subtree_move: SubtreeMove) -> McmcConfig {
    McmcConfig {
        subtree_move,
        ..McmcConfig::default()
    }
}

#[test]
fn sampling_the_prior_gives_the_exact_structure_probabilities() {
    for moves in [SubtreeMove::Prior, SubtreeMove::Gibbs] {
        for (a, b, c) in [(0.5, 0.2, 2.0), (0.0, 0.0, 1.0), (1.0, 0.6, 0.8)] {
            let p = params(a, b, c);
            let n = 4;
            let exact = exact_structures(n, &p);
            let start = tree(
                4,
                vec![vec![0, 1], vec![2, 3], vec![4, 5]],
                &[0.6, 0.8, 0.2],
            );
            let mut chain = Chain::new(empty_data(n).view(), &start, p, 1.0).unwrap();
            let config = with_move(moves);
            let mut r = rng(3);
            let draws: Vec<String> = (0..60_000)
                .map(|_| {
                    chain.sweep(&config, &mut r, &|| false).unwrap();
                    structure(&chain.tree().unwrap())
                })
                .collect();
            let z = max_z(&draws, &exact, 30);
            assert!(z < 4.5, "{moves:?} α={a} β={b} c={c}: max z = {z}");
        }
    }
}

#[test]
fn gibbs_moves_alone_keep_the_prior_of_four_points() {
    // Without the time slice moves: each Gibbs move must leave p(T, t) invariant by itself
    // (times change only when a move re-creates a branch point).
    for (a, b, c) in [(0.5, 0.2, 2.0), (1.0, 0.6, 0.8)] {
        let p = params(a, b, c);
        let exact = exact_structures(4, &p);
        let start = tree(4, vec![vec![0, 1, 2, 3]], &[0.5]);
        let mut chain = Chain::new(empty_data(4).view(), &start, p, 1.0).unwrap();
        let mut r = rng(17);
        let draws: Vec<String> = (0..100_000)
            .map(|_| {
                for _ in 0..4 {
                    chain.gibbs_move(&mut r).unwrap();
                }
                structure(&chain.tree().unwrap())
            })
            .collect();
        let z = max_z(&draws, &exact, 40);
        assert!(z < 4.5, "α={a} β={b} c={c}: max z = {z}");
    }
}

#[test]
fn sampling_the_prior_of_the_hyperparameters_gives_their_priors() {
    let p = params(1.0, 0.3, 1.0);
    let start = tree(
        4,
        vec![vec![0, 1], vec![2, 3], vec![4, 5]],
        &[0.6, 0.8, 0.2],
    );
    let mut chain = Chain::new(empty_data(4).view(), &start, p, 1.0).unwrap();
    let priors = Hyperpriors {
        alpha: GammaPrior {
            shape: 2.0,
            rate: 2.0,
        },
        beta: BetaPrior { a: 2.0, b: 3.0 },
        c: GammaPrior {
            shape: 3.0,
            rate: 2.0,
        },
        precision: GammaPrior {
            shape: 1.0,
            rate: 1.0,
        },
    };
    let config = McmcConfig {
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: false,
        },
        priors,
        // Both subtree moves keep the structures' prior at fixed hyperparameters (the tests
        // above); with α learnt, both give means of α a few standard errors below 1 at
        // other seeds, from the hyperparameter updates they share.
        subtree_move: SubtreeMove::Prior,
        ..McmcConfig::default()
    };
    let mut r = rng(8);
    let (mut alpha, mut beta, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..40_000 {
        chain.sweep(&config, &mut r, &|| false).unwrap();
        let q = chain.params();
        alpha.push(q.alpha());
        beta.push(q.beta());
        c.push(q.c());
    }
    // Means and P(x < median-ish cut) against the priors, errors by batch means.
    let check = |xs: &[f64], mean: f64, name: &str| {
        let batches = 40;
        let size = xs.len() / batches;
        let means: Vec<f64> = xs
            .chunks(size)
            .map(|b| b.iter().sum::<f64>() / size as f64)
            .collect();
        let m = means.iter().sum::<f64>() / batches as f64;
        let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (batches - 1) as f64;
        let se = (var / batches as f64).sqrt();
        assert!(
            (m - mean).abs() < 4.5 * se,
            "{name}: mean {m} vs {mean} (se {se})"
        );
    };
    check(&alpha, 1.0, "alpha");
    check(&beta, 0.4, "beta");
    check(&c, 1.5, "c");
}

/// The exact posterior of the labelled structures of three points and `E[t_root]`, by
/// quadrature of `p(X | T, t) p(T, t)`.
fn three_point_posterior(
    x: &Array2<f64>,
    p: &PydtParams,
    sigma2: f64,
) -> (BTreeMap<String, f64>, f64) {
    three_point_posterior_of(p, &|t: &Tree| {
        log_likelihood(x.view(), t, sigma2).map_or(0.0, f64::exp)
    })
}

/// [`three_point_posterior`] for the likelihood `lik(T, t)` (not its log).
pub(super) fn three_point_posterior_of(
    p: &PydtParams,
    lik: &dyn Fn(&Tree) -> f64,
) -> (BTreeMap<String, f64>, f64) {
    let labelled: Vec<Vec<Vec<usize>>> = vec![
        vec![vec![0, 1], vec![3, 2]],
        vec![vec![0, 2], vec![3, 1]],
        vec![vec![1, 2], vec![3, 0]],
        vec![vec![0, 1, 2]],
    ];
    // ∫ p(X | T, t) p(T, t) dt per structure, and ∫ t_root (…) dt.
    let mut mass = BTreeMap::new();
    let (mut total, mut root_time) = (0.0, 0.0);
    for shape in &labelled {
        let lik = |times: &[f64]| lik(&tree(3, shape.clone(), times));
        let m = integrate_shape(3, shape, p, 1.0 / 8.0, &lik);
        let r = integrate_shape(3, shape, p, 1.0 / 8.0, &|times: &[f64]| {
            times[times.len() - 1] * lik(times)
        });
        mass.insert(
            structure(&tree(3, shape.clone(), &vec![0.5; shape.len()])),
            m,
        );
        total += m;
        root_time += r;
    }
    let exact = mass.iter().map(|(k, v)| (k.clone(), v / total)).collect();
    (exact, root_time / total)
}

/// Asserts that batch means of `times` agree with `want`.
pub(super) fn assert_mean(times: &[f64], want: f64, what: &str) {
    let batches = 30;
    let size = times.len() / batches;
    let means: Vec<f64> = times
        .chunks(size)
        .take(batches)
        .map(|b| b.iter().sum::<f64>() / size as f64)
        .collect();
    let m = means.iter().sum::<f64>() / batches as f64;
    let se = (means.iter().map(|v| (v - m).powi(2)).sum::<f64>()
        / (batches * (batches - 1)) as f64)
        .sqrt();
    assert!(
        (m - want).abs() < 4.5 * se,
        "{what}: E[t_root] {m} vs {want} (se {se})"
    );
}

/// Runs `step` `draws` times on a chain over the three rows of `x`, started at the star at
/// 0.5 with the seed `seed`, and asserts that the structures and `E[t_root]` of the states
/// after each step follow the exact posterior.
pub(super) fn assert_three_point_posterior(
    x: &Array2<f64>,
    (p, sigma2): (PydtParams, f64),
    (draws, seed): (usize, u64),
    what: &str,
    step: &mut dyn FnMut(&mut Chain, &mut rand_xoshiro::Xoshiro256PlusPlus),
) {
    let (exact, root_time) = three_point_posterior(x, &p, sigma2);
    let start = tree(3, vec![vec![0, 1, 2]], &[0.5]);
    let mut chain = Chain::new(x.view(), &start, p, sigma2).unwrap();
    let mut r = rng(seed);
    let mut times = Vec::new();
    let structures: Vec<String> = (0..draws)
        .map(|_| {
            step(&mut chain, &mut r);
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
fn the_posterior_of_three_points_matches_quadrature() {
    let x = array![[0.1, -0.3], [0.4, 0.2], [-1.2, 0.9]];
    for moves in [SubtreeMove::Prior, SubtreeMove::Gibbs] {
        let config = with_move(moves);
        assert_three_point_posterior(
            &x,
            (params(0.5, 0.2, 1.5), 0.6),
            (60_000, 5),
            &format!("{moves:?}"),
            &mut |chain, r| {
                chain.sweep(&config, r, &|| false).unwrap();
            },
        );
    }
}

#[test]
fn gibbs_moves_alone_keep_the_posterior_of_three_points() {
    // Close points (the move's grid is logarithmic near t = 1) and a distant one.
    let x = array![[0.1, -0.3], [0.15, -0.28], [-1.2, 0.9]];
    let mut accepted = 0usize;
    assert_three_point_posterior(
        &x,
        (params(1.0, 0.3, 1.0), 0.5),
        (120_000, 23),
        "Gibbs moves alone",
        &mut |chain, r| {
            for _ in 0..2 {
                accepted += usize::from(chain.gibbs_move(r).unwrap());
            }
        },
    );
    let rate = accepted as f64 / 240_000.0;
    assert!(rate > 0.9, "acceptance {rate}");
}

#[test]
fn the_precision_update_targets_the_collapsed_posterior() {
    // On a fixed tree, p(1/σ² | X, T, t) = Gamma(a + N D/2, b + Q/2) with
    // Q = Σ_d x_dᵀ C⁻¹ x_d from the covariance form: backward sampling the locations and
    // drawing 1/σ² from eq 14 leaves it invariant.
    let t = tree(4, vec![vec![1, 3], vec![4, 0, 2]], &[0.75, 0.35]);
    let x = array![
        [0.3, -0.1, 0.8],
        [1.1, 0.4, -0.2],
        [-0.5, 0.0, 0.6],
        [0.9, 0.7, -0.4]
    ];
    let h = t.heights().unwrap();
    let cov = DMatrix::from_fn(4, 4, |i, j| {
        if i == j {
            1.0
        } else if [i, j].iter().all(|k| [1, 3].contains(k)) {
            h[4]
        } else {
            h[5]
        }
    });
    let inv = cov.try_inverse().unwrap();
    let q: f64 = x
        .columns()
        .into_iter()
        .map(|col| {
            let v = DVector::from_iterator(4, col.iter().copied());
            v.dot(&(&inv * &v))
        })
        .sum();
    let prior = GammaPrior {
        shape: 2.0,
        rate: 1.5,
    };
    let (shape, rate) = (prior.shape + 6.0, prior.rate + q / 2.0);
    let want = rate / (shape - 1.0); // E[σ²] under the inverse gamma
    let mut chain = Chain::new(x.view(), &t, params(0.5, 0.2, 1.0), 1.0).unwrap();
    let mut r = rng(13);
    let n = 40_000;
    let mut sum = 0.0;
    for _ in 0..n {
        chain.update_sigma2(prior, &mut r).unwrap();
        sum += chain.sigma2();
        let lik = covariance_log_likelihood(&x, &t, chain.sigma2());
        assert!((chain.log_likelihood() - lik).abs() < 1e-9);
    }
    let sd = rate / ((shape - 1.0) * (shape - 2.0).sqrt());
    // The chain on σ² mixes in a few steps; allow for an autocorrelation time of 10.
    let se = sd * (10.0 / n as f64).sqrt();
    assert!(
        (sum / n as f64 - want).abs() < 4.0 * se,
        "{} vs {want}",
        sum / n as f64
    );
}

#[test]
fn chains_are_reproducible_and_interruptible() {
    let (x, _) = crate::pydt::sample(12, 2, &params(0.5, 0.2, 1.0), 1.0, 3).unwrap();
    let config = McmcConfig {
        n_iter: 8,
        burn_in: 2,
        thin: 2,
        learn: Learn {
            alpha: true,
            beta: true,
            c: true,
            sigma2: true,
        },
        ..McmcConfig::default()
    };
    let go = |seed| {
        run(
            x.view(),
            start(params(0.5, 0.2, 1.0)),
            &config,
            seed,
            &|| false,
            &mut |_, _| {},
        )
        .unwrap()
    };
    let (a, b, c) = (go(4), go(4), go(5));
    assert_eq!(a.samples.len(), 3);
    assert_eq!(a.trace.len(), 8);
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.last.tree.heights(), b.last.tree.heights());
    assert_ne!(a.trace, c.trace);
    assert_eq!(a.proposals, 8 * 12);
    let stop = run(
        x.view(),
        start(params(0.5, 0.2, 1.0)),
        &config,
        4,
        &|| true,
        &mut |_, _| {},
    );
    assert!(matches!(stop, Err(RoseTreeError::Interrupted)));
}

#[test]
fn bad_settings_are_named() {
    let x = array![[0.0], [1.0], [f64::NAN]];
    let t = tree(3, vec![vec![0, 1, 2]], &[0.5]);
    let p = params(0.5, 0.2, 1.0);
    let err = Chain::new(x.view(), &t, p, 1.0).unwrap_err();
    assert!(err.to_string().contains("row 2"), "{err}");
    let x = array![[0.0], [1.0], [2.0]];
    let named = |config: McmcConfig, p: PydtParams, name: &str| {
        let err = run(x.view(), start(p), &config, 0, &|| false, &mut |_, _| {}).unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
    };
    named(
        McmcConfig {
            thin: 0,
            ..McmcConfig::default()
        },
        p,
        "thin",
    );
    named(
        McmcConfig {
            burn_in: 200,
            ..McmcConfig::default()
        },
        p,
        "burn_in",
    );
    let learn_alpha = Learn {
        alpha: true,
        ..Learn::default()
    };
    named(
        McmcConfig {
            learn: learn_alpha,
            ..McmcConfig::default()
        },
        params(0.0, 0.2, 1.0),
        "alpha",
    );
    let bad_prior = Hyperpriors {
        c: GammaPrior {
            shape: 0.0,
            rate: 1.0,
        },
        ..Hyperpriors::default()
    };
    named(
        McmcConfig {
            priors: bad_prior,
            ..McmcConfig::default()
        },
        p,
        "c_prior",
    );
    let err = Chain::new(x.view(), &t, p, -1.0).unwrap_err();
    assert!(err.to_string().contains("sigma2"), "{err}");
}

mod generic;
