//! Greedy-MaxProb and Greedy-MinDuration against the paper's rule written out here: every
//! live pair's `i`-th term of eq 7 evaluated from `combine(propagate(…))` and maximised
//! over the duration numerically (a log grid, then bisection on a finite-difference slope),
//! without `pair`, `pair_log_z` or `optimal_duration`.

use std::cell::Cell;

use ndarray::Array2;
use rand::Rng;

use super::*;
use crate::coalescent::{CoalescentParams, Inference, fit, fit_leaves, log_joint};
use crate::models::messages::tests::{normal, rng};
use crate::models::messages::{BrownianDiffusion, MultinomialMutation};

/// The duration maximising `g` over `δ ≥ 0` and `g` there: the best point of a log grid
/// on `[1e-12, 1e4]` (and 0), then bisection on the five-point slope of `g` between the
/// grid's neighbours of that point. Exactly 0 when `g(0)` beats the grid.
fn maximise(g: impl Fn(f64) -> f64) -> (f64, f64) {
    const STEPS: i32 = 240;
    let ratio = 1e16_f64.powf(1.0 / f64::from(STEPS));
    let mut grid = vec![0.0];
    grid.extend((0..=STEPS).map(|k| 1e-12 * ratio.powi(k)));
    let values: Vec<f64> = grid.iter().map(|&x| g(x)).collect();
    let k = (0..grid.len())
        .max_by(|&a, &b| values[a].total_cmp(&values[b]).then(b.cmp(&a)))
        .unwrap();
    assert!(k + 1 < grid.len(), "the optimum lies beyond the grid");
    if k == 0 {
        return (0.0, values[0]);
    }
    let slope = |x: f64| {
        let h = 1e-3 * x;
        (8.0 * (g(x + h) - g(x - h)) - (g(x + 2.0 * h) - g(x - 2.0 * h))) / (12.0 * h)
    };
    let (mut lo, mut hi) = (grid[k - 1], grid[k + 1]);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if slope(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let x = 0.5 * (lo + hi);
    (x, g(x))
}

/// The paper's greedy rule, `O(n³)` pairs each maximised numerically. Returns the merges
/// `(l, r, time)` in order. Panics unless the winner of every step beats the runner-up
/// clearly (tie-free data), so that the comparison is meaningful.
fn reference<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    rule: Rule,
) -> Vec<(usize, usize, f64)> {
    let n = leaves.len();
    let mut msgs: Vec<M::Message> = leaves.iter().map(|(m, _)| m.clone()).collect();
    let mut times = vec![0.0; n];
    let mut live: Vec<usize> = (0..n).collect();
    let mut now = 0.0;
    let mut merges = Vec::new();
    while live.len() > 1 {
        let m = live.len() as f64;
        let rate = m * (m - 1.0) / 2.0;
        // (key to minimise, δ, l, r)
        let mut scored: Vec<((f64, f64), f64, usize, usize)> = Vec::new();
        for (a, &l) in live.iter().enumerate() {
            for &r in &live[a + 1..] {
                let (bl, br) = (times[l] - now, times[r] - now);
                let term = |delta: f64| {
                    let incoming = [
                        model.propagate(&msgs[l], bl + delta),
                        model.propagate(&msgs[r], br + delta),
                    ];
                    -rate * delta + model.combine(&incoming).1
                };
                let (delta, value) = maximise(term);
                let key = match rule {
                    Rule::MaxProb => (-value, 0.0),
                    Rule::MinDuration => (delta, -value),
                };
                scored.push((key, delta, l, r));
            }
        }
        // Stable: equal keys keep the id order.
        scored.sort_by(|a, b| a.0.0.total_cmp(&b.0.0).then(a.0.1.total_cmp(&b.0.1)));
        let (key, delta, l, r) = scored[0];
        if let Some(second) = scored.get(1) {
            let gap = if key.0 == second.0.0 {
                second.0.1 - key.1
            } else {
                (second.0.0 - key.0) / (1.0 + key.0.abs())
            };
            assert!(gap > 1e-6, "not tie-free: {:?} vs {:?}", scored[0], second);
        }
        let t = now - delta;
        let (msg, _) = model.combine(&[
            model.propagate(&msgs[l], times[l] - t),
            model.propagate(&msgs[r], times[r] - t),
        ]);
        msgs.push(msg);
        times.push(t);
        now = t;
        live.retain(|&c| c != l && c != r);
        live.push(msgs.len() - 1);
        merges.push((l, r, t));
    }
    merges
}

fn run<M: MessageModel>(
    model: &M,
    leaves: Vec<(M::Message, f64)>,
    rule: Rule,
    n_threads: Option<usize>,
) -> CoalescentFit {
    let threads = Threads::new(n_threads).unwrap();
    exact_greedy(model, leaves, rule, &threads, &|| false).unwrap()
}

/// The fit's merges, in id order, are the reference's, at the same times (to 1e-8).
fn assert_matches_reference<M: MessageModel>(model: &M, x: &Array2<f64>, what: &str) {
    let leaves = model.leaf_messages(x.view()).unwrap();
    let n = leaves.len();
    for rule in [Rule::MaxProb, Rule::MinDuration] {
        let want = reference(model, &leaves, rule);
        let got = run(model, leaves.clone(), rule, Some(2));
        let h = got.tree.heights().unwrap();
        for (k, &(l, r, t)) in want.iter().enumerate() {
            assert_eq!(
                got.tree.node(n + k).children,
                vec![l, r],
                "{what}, {rule:?}, merge {k}"
            );
            assert!(
                (h[n + k] - t).abs() < 1e-8 * (1.0 + t.abs()),
                "{what}, {rule:?}, merge {k}: {} vs {t}",
                h[n + k]
            );
        }
        let again = log_joint(model, x.view(), &got.tree).unwrap();
        assert!(
            (got.log_joint - again).abs() <= 1e-12 * again.abs(),
            "{what}: {} vs {again}",
            got.log_joint
        );
    }
}

fn random_spd(d: usize, r: &mut impl Rng) -> Array2<f64> {
    let a = Array2::from_shape_simple_fn((d, d), || normal(r));
    a.dot(&a.t()) + Array2::<f64>::eye(d) * 0.3
}

#[test]
fn brownian_greedy_trees_match_the_paper_rule() {
    let mut r = rng(51);
    for seed in 0..3 {
        let (n, d) = (8 + 3 * seed, 1 + seed);
        let x = Array2::from_shape_simple_fn((n, d), || 2.0 * normal(&mut r));
        let iso = BrownianDiffusion::isotropic(0.3 + r.random::<f64>(), d).unwrap();
        assert_matches_reference(&iso, &x, &format!("isotropic, seed {seed}"));
        let full = BrownianDiffusion::full(random_spd(d, &mut r).view()).unwrap();
        assert_matches_reference(&full, &x, &format!("full Λ, seed {seed}"));
    }
}

#[test]
fn multinomial_greedy_trees_match_the_paper_rule() {
    let mut r = rng(53);
    for seed in 0..3 {
        let (n, d, k) = (8 + 2 * seed, 12, 3);
        let x = Array2::from_shape_fn((n, d), |_| {
            if r.random::<f64>() < 0.1 {
                f64::NAN
            } else {
                r.random_range(0..k) as f64
            }
        });
        let one = MultinomialMutation::from_data(x.view(), &[k], &[0.7]).unwrap();
        assert_matches_reference(&one, &x, &format!("one rate, seed {seed}"));
        // Several rates: the objective can have several local maxima.
        let rates: Vec<f64> = (0..d).map(|_| 0.1 + 3.0 * r.random::<f64>()).collect();
        let many = MultinomialMutation::from_data(x.view(), &[k], &rates).unwrap();
        assert_matches_reference(&many, &x, &format!("rates per feature, seed {seed}"));
    }
}

/// Rows `0..n` in three tight, far-apart groups (row `i` in group `i % 3`).
fn three_groups(n: usize, d: usize) -> Array2<f64> {
    let mut r = rng(57);
    Array2::from_shape_fn((n, d), |(i, j)| {
        20.0 * ((i % 3) as f64) * if j % 2 == 0 { 1.0 } else { -1.0 } + 0.1 * normal(&mut r)
    })
}

#[test]
fn every_greedy_search_recovers_clear_clusters_for_any_thread_count() {
    let (n, d) = (120, 4);
    let x = three_groups(n, d);
    let model = BrownianDiffusion::isotropic(1.0, d).unwrap();
    for inference in [
        Inference::GreedyRate1,
        Inference::GreedyMaxProb,
        Inference::GreedyMinDuration,
    ] {
        let fits: Vec<CoalescentFit> = [Some(1), Some(2), Some(3)]
            .into_iter()
            .map(|threads| {
                let params = CoalescentParams::new()
                    .inference(inference)
                    .n_threads(threads);
                fit(&model, &params.check().unwrap(), x.view()).unwrap()
            })
            .collect();
        for other in &fits[1..] {
            assert_eq!(other.tree, fits[0].tree, "{inference:?}");
            assert_eq!(other.log_joint.to_bits(), fits[0].log_joint.to_bits());
        }
        // The root's two children split one group from the other two, and each group is
        // a subtree.
        let tree = &fits[0].tree;
        let group_of = |v: usize| -> Vec<usize> {
            let mut g: Vec<usize> = tree.leaves_of(v).iter().map(|i| i % 3).collect();
            g.sort_unstable();
            g.dedup();
            g
        };
        let whole_groups = (0..tree.nodes().len())
            .filter(|&v| group_of(v).len() == 1 && tree.leaves_of(v).len() == n / 3)
            .count();
        assert_eq!(whole_groups, 3, "{inference:?}");
        let again = log_joint(&model, x.view(), tree).unwrap();
        assert!((fits[0].log_joint - again).abs() <= 1e-12 * again.abs());
    }
}

#[test]
fn an_interrupt_stops_the_search() {
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let x = three_groups(90, 2);
    for inference in [Inference::GreedyMaxProb, Inference::GreedyMinDuration] {
        let params = CoalescentParams::new()
            .inference(inference)
            .check()
            .unwrap();
        let calls = Cell::new(0);
        let interrupt = || {
            calls.set(calls.get() + 1);
            calls.get() > 5
        };
        let leaves = model.leaf_messages(x.view()).unwrap();
        let err = fit_leaves(&model, &params, leaves, &interrupt).unwrap_err();
        assert!(matches!(err, crate::RoseTreeError::Interrupted), "{err:?}");
        assert_eq!(calls.get(), 6);
        // No rows is an error, one row a one-leaf tree.
        assert!(matches!(
            fit_leaves(&model, &params, Vec::new(), &|| false),
            Err(crate::RoseTreeError::InvalidParameter { .. })
        ));
        let one = fit(&model, &params, x.slice(ndarray::s![..1, ..])).unwrap();
        assert_eq!(one.tree.n_leaves(), 1);
        assert_eq!(one.log_joint, 0.0);
    }
}

#[test]
fn merge_times_follow_eq_12_with_the_true_rate() {
    // Two close pairs far apart in one dimension, Λ = 1: both rules merge (0, 1) first and
    // then (2, 3), each after the duration of eq 12, `v̂ = 2S/(√(D² + 4·C(m,2)·S) + D)`,
    // `δ = (v̂ − L₀)/2`, with the rate of 4 and then 3 lineages.
    let model = BrownianDiffusion::isotropic(1.0, 1).unwrap();
    let x = ndarray::array![[0.0], [0.05], [10.0], [10.06]];
    let v_hat = |s: f64, rate: f64| 2.0 * s / ((1.0 + 4.0 * rate * s).sqrt() + 1.0);
    let t4 = -0.5 * v_hat(0.05 * 0.05, 6.0);
    let t5 = t4 - 0.5 * (v_hat(0.06 * 0.06, 3.0) + 2.0 * t4);
    for rule in [Rule::MaxProb, Rule::MinDuration] {
        let got = run(&model, model.leaf_messages(x.view()).unwrap(), rule, None);
        assert_eq!(got.tree.node(4).children, vec![0, 1]);
        assert_eq!(got.tree.node(5).children, vec![2, 3]);
        let h = got.tree.heights().unwrap();
        assert!((h[4] - t4).abs() < 1e-15, "{} vs {t4}", h[4]);
        assert!((h[5] - t5).abs() < 1e-15, "{} vs {t5}", h[5]);
    }
}

#[test]
fn ties_are_broken_as_documented() {
    let c = |delta, value, l, r| Candidate { delta, value, l, r };
    // MinDuration: the shorter duration, then (at equal, e.g. clamped, durations) the
    // larger term, then the lower ids.
    let order = Rule::MinDuration;
    assert!(order.before(&c(0.0, -5.0, 7, 8), &c(1e-300, 9.0, 0, 1)));
    assert!(order.before(&c(0.0, -1.0, 7, 8), &c(0.0, -2.0, 0, 1)));
    assert!(order.before(&c(0.0, -1.0, 0, 9), &c(0.0, -1.0, 1, 2)));
    assert!(!order.before(&c(0.0, -1.0, 1, 2), &c(0.0, -1.0, 1, 2)));
    // MaxProb: the larger term whatever the duration, then the lower ids; −∞ ties.
    let order = Rule::MaxProb;
    assert!(order.before(&c(3.0, -1.0, 7, 8), &c(0.0, -2.0, 0, 1)));
    assert!(order.before(&c(3.0, -1.0, 0, 8), &c(0.0, -1.0, 1, 2)));
    let minus_inf = f64::NEG_INFINITY;
    assert!(order.before(&c(0.0, minus_inf, 2, 3), &c(0.0, minus_inf, 2, 4)));
    assert!(order.before(&c(0.0, -1e300, 9, 10), &c(0.0, minus_inf, 0, 1)));
}
