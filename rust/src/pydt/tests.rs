//! The Pitman–Yor diffusion tree against independent computations: the closed-form density
//! against the sequential process's own probabilities for every order of the points
//! (exchangeability), against Neal's Dirichlet diffusion tree formula, and against one by
//! numerical integration over the divergence times; the likelihood against the covariance
//! form; the sampler against probabilities and moments integrated from the density.

use std::f64::consts::FRAC_PI_2;

use nalgebra::{DMatrix, DVector};
use ndarray::Array2;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::tree::Topology;

/// A diffusion tree: leaves at 1, internal nodes at `times` (in id order).
pub(super) fn tree(n: usize, internal: Vec<Vec<usize>>, times: &[f64]) -> Tree {
    let mut h = vec![1.0; n];
    h.extend_from_slice(times);
    Tree::new(&Topology::new(n, internal).unwrap(), Some(h)).unwrap()
}

pub(super) fn params(alpha: f64, beta: f64, c: f64) -> PydtParams {
    PydtParams::new(alpha, beta, c).unwrap()
}

pub(super) fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// `Γ(m − β)/Γ(m + 1 + α)` from `tgamma`, not from the module's log-gamma ratios.
fn rate(m: usize, a: f64, b: f64) -> f64 {
    libm::tgamma(m as f64 - b) / libm::tgamma(m as f64 + 1.0 + a)
}

/// The log density of `tree` built by the sequential process of §1 with the points arriving
/// in `order`: each point walks from the origin down the tree of the earlier points, paying
/// for not diverging along every branch it follows (eq 4), for each branch it chooses at an
/// existing branch point (eq 2), and finally for diverging: at a new time on a branch
/// (eq 1) or at an existing branch point as a new branch (eq 3). A direct transcription of
/// the process, sharing nothing with `log_prior`.
fn sequential_log_density(tree: &Tree, order: &[usize], a: f64, b: f64, c: f64) -> f64 {
    let h = tree.heights().unwrap();
    let nodes = tree.nodes();
    let cum = |t: f64| -c * (1.0 - t).ln(); // A(t)
    let mut log_p = 0.0;
    for k in 1..order.len() {
        // Earlier points below every node.
        let mut cnt = vec![0usize; nodes.len()];
        for &i in &order[..k] {
            cnt[i] = 1;
        }
        for v in tree.n_leaves()..nodes.len() {
            cnt[v] = nodes[v].children.iter().map(|&ch| cnt[ch]).sum();
        }
        let mut path = vec![order[k]];
        while let Some(p) = nodes[*path.last().unwrap()].parent {
            path.push(p);
        }
        path.reverse();
        // The branch being followed starts at time s and was followed by m points.
        let (mut s, mut m) = (0.0, k);
        for pair in path.windows(2) {
            let (v, next) = (pair[0], pair[1]);
            // Branches of v that earlier points took: v is a branch point of their tree
            // only if there are two or more.
            let taken = nodes[v].children.iter().filter(|&&ch| cnt[ch] > 0).count();
            let stay = -(cum(h[v]) - cum(s)) * rate(m, a, b);
            if cnt[next] == 0 {
                log_p += stay;
                log_p += if taken >= 2 {
                    ((a + taken as f64 * b) / (cnt[v] as f64 + a)).ln()
                } else {
                    (c / (1.0 - h[v]) * rate(m, a, b)).ln()
                };
                break;
            }
            if taken >= 2 {
                log_p += stay + ((cnt[next] as f64 - b) / (cnt[v] as f64 + a)).ln();
                s = h[v];
                m = cnt[next];
            }
        }
    }
    log_p
}

/// Neal's (2001) Dirichlet diffusion tree density with `a(t) = c/(1 − t)`: per branch point
/// `b` below `a`, `a(t_b) (l − 1)!(r − 1)!/(m − 1)! · exp(−[A(t_b) − A(t_a)] H_{m−1})` with
/// `H` the harmonic numbers, written out with factorials and harmonic sums.
fn neal_log_density(tree: &Tree, c: f64) -> f64 {
    let h = tree.heights().unwrap();
    let fact = |n: usize| (1..=n).map(|i| i as f64).product::<f64>();
    let harm = |n: usize| (1..=n).map(|i| 1.0 / i as f64).sum::<f64>();
    let cum = |t: f64| -c * (1.0 - t).ln();
    let mut log_p = 0.0;
    for (v, node) in tree.nodes().iter().enumerate().skip(tree.n_leaves()) {
        assert_eq!(node.children.len(), 2);
        let (l, r) = (
            tree.node(node.children[0]).n_leaves,
            tree.node(node.children[1]).n_leaves,
        );
        let m = node.n_leaves;
        let t_a = node.parent.map_or(0.0, |p| h[p]);
        log_p += (c / (1.0 - h[v])).ln() + (fact(l - 1) * fact(r - 1) / fact(m - 1)).ln()
            - (cum(h[v]) - cum(t_a)) * harm(m - 1);
    }
    log_p
}

/// `∫_a^b f(t) dt` by the tanh–sinh rule with step `step` over `|x| ≤ 3` (hand-written:
/// gauss-quad has no rule for endpoint singularities of unknown order, such as the
/// `(1 − t)^{cJ − 1}` of these densities). Nodes are placed by their distance from the
/// nearer end, so that none rounds onto it; nodes that still do are skipped.
pub(super) fn tanh_sinh(a: f64, b: f64, step: f64, f: &mut dyn FnMut(f64) -> f64) -> f64 {
    let half = 0.5 * (b - a);
    let kmax = (3.0 / step).round() as i64;
    let mut sum = 0.0;
    for k in -kmax..=kmax {
        let x = k as f64 * step;
        let u = FRAC_PI_2 * x.sinh();
        let weight = half * step * FRAC_PI_2 * x.cosh() / u.cosh().powi(2);
        let t = if u >= 0.0 {
            b - (b - a) / (1.0 + (2.0 * u).exp())
        } else {
            a + (b - a) / (1.0 + (-2.0 * u).exp())
        };
        if t > a && t < b {
            sum += weight * f(t);
        }
    }
    sum
}

/// `∫ g(t) exp(log_prior(T, t)) dt` over the divergence times of the shape `internal` (on
/// `n` leaves), each parent strictly before its children, by nested tanh–sinh rules.
pub(super) fn integrate_shape(
    n: usize,
    internal: &[Vec<usize>],
    p: &PydtParams,
    step: f64,
    g: &dyn Fn(&[f64]) -> f64,
) -> f64 {
    let k = internal.len();
    let mut parent = vec![None; k];
    for (i, children) in internal.iter().enumerate() {
        for &ch in children {
            if ch >= n {
                parent[ch - n] = Some(i);
            }
        }
    }
    let shape = Topology::new(n, internal.to_vec()).unwrap();
    // Integrate the root first (it is last in id order), then down.
    fn level(
        i: usize,
        times: &mut Vec<f64>,
        parent: &[Option<usize>],
        step: f64,
        leaf: &mut dyn FnMut(&[f64]) -> f64,
    ) -> f64 {
        if i == usize::MAX {
            return leaf(times);
        }
        let lo = parent[i].map_or(0.0, |q| times[q]);
        let next = i.checked_sub(1).unwrap_or(usize::MAX);
        tanh_sinh(lo, 1.0, step, &mut |t| {
            times[i] = t;
            level(next, times, parent, step, leaf)
        })
    }
    let mut times = vec![f64::NAN; k];
    let mut leaf = |times: &[f64]| {
        let mut h = vec![1.0; n];
        h.extend_from_slice(times);
        match Tree::new(&shape, Some(h)) {
            Ok(t) => match log_prior(&t, p) {
                Ok(lp) => g(times) * lp.exp(),
                // Times equal after rounding: a set of measure zero.
                Err(_) => 0.0,
            },
            Err(_) => 0.0,
        }
    };
    level(k - 1, &mut times, &parent, step, &mut leaf)
}

/// The unlabelled shape of the subtree at `v`, as a canonical string.
fn shape_of(tree: &Tree, v: usize) -> String {
    let node = tree.node(v);
    if node.is_leaf() {
        return "x".into();
    }
    let mut parts: Vec<String> = node.children.iter().map(|&c| shape_of(tree, c)).collect();
    parts.sort();
    format!("({})", parts.join(""))
}

/// Every ordering of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for pos in 0..=p.len() {
            let mut q = p.clone();
            q.insert(pos, n - 1);
            out.push(q);
        }
    }
    out
}

/// Small trees of every kind: binary, with a three-way branch point at the root or below,
/// and a four-way star.
pub(super) fn small_trees() -> Vec<Tree> {
    vec![
        tree(2, vec![vec![0, 1]], &[0.4]),
        tree(3, vec![vec![0, 1], vec![3, 2]], &[0.7, 0.3]),
        tree(3, vec![vec![2, 0], vec![3, 1]], &[0.55, 0.5]),
        tree(3, vec![vec![0, 1, 2]], &[0.4]),
        tree(
            4,
            vec![vec![0, 1], vec![2, 3], vec![4, 5]],
            &[0.6, 0.8, 0.2],
        ),
        tree(
            4,
            vec![vec![0, 2], vec![4, 1], vec![5, 3]],
            &[0.9, 0.5, 0.1],
        ),
        tree(4, vec![vec![1, 3], vec![4, 0, 2]], &[0.75, 0.35]),
        tree(4, vec![vec![0, 1, 3], vec![4, 2]], &[0.6, 0.45]),
        tree(4, vec![vec![0, 1, 2, 3]], &[0.3]),
        tree(
            5,
            vec![vec![0, 4], vec![1, 2, 3], vec![5, 6]],
            &[0.8, 0.7, 0.25],
        ),
    ]
}

#[test]
fn the_density_is_the_sequential_process_for_every_order_of_the_points() {
    let settings = [
        (0.5, 0.2, 1.0),
        (1.5, 0.0, 0.7),
        (-0.3, 0.4, 2.0),
        (2.0, 0.9, 0.3),
        (0.0, 0.0, 1.3),
        (-0.4, 0.2, 1.0), // α = −2β: never a third branch
    ];
    for (a, b, c) in settings {
        let p = params(a, b, c);
        for t in small_trees() {
            let got = log_prior(&t, &p).unwrap();
            for order in permutations(t.n_leaves()) {
                let want = sequential_log_density(&t, &order, a, b, c);
                if want == f64::NEG_INFINITY {
                    assert_eq!(got, want, "{a} {b} {c} {order:?} {}", t.to_newick(None));
                    continue;
                }
                assert!(
                    (got - want).abs() < 1e-12 * (1.0 + want.abs()),
                    "α={a} β={b} c={c} order {order:?} {}: {got} vs {want}",
                    t.to_newick(None)
                );
            }
        }
    }
}

#[test]
fn multifurcations_have_probability_zero_exactly_when_alpha_plus_2beta_is_zero() {
    let star = tree(3, vec![vec![0, 1, 2]], &[0.4]);
    assert_eq!(
        log_prior(&star, &params(0.0, 0.0, 1.0)).unwrap(),
        f64::NEG_INFINITY
    );
    assert_eq!(
        log_prior(&star, &params(-0.6, 0.3, 1.0)).unwrap(),
        f64::NEG_INFINITY
    );
    assert!(
        log_prior(&star, &params(-0.59, 0.3, 1.0))
            .unwrap()
            .is_finite()
    );
    // Binary trees stay finite at the boundary.
    let binary = tree(3, vec![vec![0, 1], vec![3, 2]], &[0.7, 0.3]);
    assert!(
        log_prior(&binary, &params(-0.6, 0.3, 1.0))
            .unwrap()
            .is_finite()
    );
}

#[test]
fn alpha_beta_zero_is_neals_dirichlet_diffusion_tree() {
    let mut r = rng(11);
    for c in [0.4, 1.0, 2.5] {
        let ddt = PydtParams::ddt(c).unwrap();
        for n in 2..16 {
            let t = sample_tree(n, &ddt, &mut r).unwrap();
            assert!(t.topology().is_binary());
            let got = log_prior(&t, &ddt).unwrap();
            let want = neal_log_density(&t, c);
            assert!(
                (got - want).abs() < 1e-11 * (1.0 + want.abs()),
                "c={c} n={n}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn two_points_integrate_to_one_and_the_printed_eq_7_does_not() {
    let pair = |t: f64| tree(2, vec![vec![0, 1]], &[t]);
    for (a, b, c) in [
        (0.5, 0.2, 2.0),
        (0.0, 0.0, 1.0),
        (1.5, 0.0, 3.0),
        (-0.5, 0.6, 1.0),
        (2.0, 0.5, 6.0),
        (0.2, 0.9, 2.0),
    ] {
        let p = params(a, b, c);
        let total = tanh_sinh(0.0, 1.0, 1.0 / 64.0, &mut |t| {
            log_prior(&pair(t), &p).unwrap().exp()
        });
        assert!((total - 1.0).abs() < 1e-7, "α={a} β={b} c={c}: ∫ = {total}");
        // The printed eq 7 has Γ(1 − β)^{K−1} = Γ(1 − β) more in the numerator: its two-point
        // density integrates to Γ(1 − β), which is 1 only for β = 0.
        let gamma = libm::tgamma(1.0 - b);
        let printed = tanh_sinh(0.0, 1.0, 1.0 / 64.0, &mut |t| {
            (log_prior(&pair(t), &p).unwrap() + gamma.ln()).exp()
        });
        assert!((printed - gamma).abs() < 1e-7);
        if b > 0.0 {
            assert!((printed - 1.0).abs() > 1e-2, "β={b}: {printed}");
        }
    }
}

/// The shapes of trees on 3 and 4 leaves: a representative, and the number of labelled trees
/// of that shape.
pub(super) fn shapes(n: usize) -> Vec<(Vec<Vec<usize>>, usize)> {
    match n {
        3 => vec![(vec![vec![0, 1], vec![3, 2]], 3), (vec![vec![0, 1, 2]], 1)],
        4 => vec![
            (vec![vec![0, 1, 2, 3]], 1),
            (vec![vec![0, 1], vec![4, 2, 3]], 6),
            (vec![vec![0, 1, 2], vec![4, 3]], 4),
            (vec![vec![0, 1], vec![4, 2], vec![5, 3]], 12),
            (vec![vec![0, 1], vec![2, 3], vec![4, 5]], 3),
        ],
        _ => unreachable!(),
    }
}

/// `w_1 (α + 2β) / ((2 + α)(w_1 + w_2))`: the three-way split of three points, a second point
/// diverging at `t`, the third staying with them to `t` (probability `(1 − t)^{c w_2}`) and
/// opening a new branch there.
fn star_of_three(a: f64, b: f64) -> f64 {
    let (w1, w2) = (rate(1, a, b), rate(2, a, b));
    w1 * (a + 2.0 * b) / ((2.0 + a) * (w1 + w2))
}

#[test]
fn three_and_four_points_have_total_probability_one() {
    for (a, b, c) in [(0.5, 0.2, 2.0), (1.5, 0.0, 3.0), (-0.2, 0.3, 2.5)] {
        let p = params(a, b, c);
        for n in [3, 4] {
            let probs: Vec<f64> = shapes(n)
                .iter()
                .map(|(s, _)| integrate_shape(n, s, &p, 1.0 / 8.0, &|_| 1.0))
                .collect();
            let total: f64 = shapes(n)
                .iter()
                .zip(&probs)
                .map(|((_, k), q)| *k as f64 * q)
                .sum();
            assert!(
                (total - 1.0).abs() < 1e-10,
                "α={a} β={b} c={c} n={n}: {total}"
            );
            if n == 3 {
                assert!((probs[1] - star_of_three(a, b)).abs() < 1e-7);
            }
        }
    }
}

#[test]
fn the_first_divergence_time_is_beta_distributed() {
    // All points share one path until the first divergence, where N − 1 of them have been
    // at risk with rates w_1, …, w_{N−1}: P(t_root > t) = (1 − t)^{c H_{N−1}}, so t_root is
    // Beta(1, c H_{N−1}), with mean 1/(1 + c H_{N−1}). Check that against the density.
    for (a, b, c) in [(0.5, 0.2, 2.0), (-0.2, 0.3, 2.5)] {
        let p = params(a, b, c);
        let h2 = rate(1, a, b) + rate(2, a, b);
        let mean: f64 = shapes(3)
            .iter()
            .map(|(s, k)| *k as f64 * integrate_shape(3, s, &p, 1.0 / 8.0, &|t| t[t.len() - 1]))
            .sum();
        assert!((mean - 1.0 / (1.0 + c * h2)).abs() < 1e-7, "{mean}");
    }
}

#[test]
fn harmonic_sums_match_their_closed_forms() {
    for (a, b) in [(0.5, 0.2), (1.5, 0.0), (-0.3, 0.4), (3.0, 0.9)] {
        let p = params(a, b, 1.0);
        let h = p.harmonic(2000);
        let g = |i: f64| libm::tgamma(i - b) / libm::tgamma(i + a);
        for k in [1usize, 2, 7, 40, 150] {
            // (α + β) H_k = g_1 − g_{k+1}, g_i = Γ(i − β)/Γ(i + α).
            let closed = (g(1.0) - g(k as f64 + 1.0)) / (a + b);
            assert!((h[k] - closed).abs() < 1e-12 * closed, "{a} {b} {k}");
        }
        // Large k, from log-gamma values.
        let gl = |i: f64| (crate::math::ln_gamma(i - b) - crate::math::ln_gamma(i + a)).exp();
        let closed = (gl(1.0) - gl(2001.0)) / (a + b);
        assert!((h[2000] - closed).abs() < 1e-11 * closed);
    }
    // α + β = 0: w_i = 1/(i − β), H_k = ψ(k + 1 − β) − ψ(1 − β), where the closed form above
    // would divide 0 by 0.
    let p = params(-0.25, 0.25, 1.0);
    let h = p.harmonic(100);
    let want: f64 = (1..=100).map(|i| 1.0 / (i as f64 - 0.25)).sum();
    assert!((h[100] - want).abs() < 1e-13 * want);
    let near = params(-0.25 + 1e-12, 0.25, 1.0).harmonic(100);
    assert!((near[100] - want).abs() < 1e-9 * want);
}

#[test]
fn the_structure_factor_keeps_its_digits_for_large_branches() {
    // Γ(n₁−β)Γ(n₂−β)/(Γ(m+α)Γ(1−β)) from ln Γ values at moderate sizes, where that is accurate.
    let (a, b) = (0.7, 0.3);
    let p = params(a, b, 1.0);
    let lg = crate::math::ln_gamma;
    for counts in [vec![3usize, 5], vec![40, 1, 7], vec![200, 300, 1, 1]] {
        let m: usize = counts.iter().sum();
        let k = counts.len();
        let mut want: f64 = counts.iter().map(|&n| lg(n as f64 - b)).sum::<f64>()
            - lg(m as f64 + a)
            - (k - 1) as f64 * lg(1.0 - b);
        for kk in 3..=k {
            want += (a + (kk - 1) as f64 * b).ln();
        }
        let got = p.ln_structure(&counts);
        assert!(
            (got - want).abs() < 1e-12 * want.abs(),
            "{counts:?}: {got} vs {want}"
        );
    }
    // n₁ = 10¹², n₂ = 1: Γ(n₁ − β)/Γ(n₁ + 1 + α) ≈ n₁^{−(1+α+β)}, whose log the difference of
    // two ln Γ values near 2.6·10¹³ would get only to about 10⁻³.
    let n1 = 1_000_000_000_000usize;
    let got = p.ln_structure(&[n1, 1]);
    let want = -(1.0 + a + b) * (n1 as f64).ln();
    assert!((got - want).abs() < 1e-9, "{got} vs {want}");
}

pub(super) use crate::test_util::{covariance_log_likelihood, lca_covariance};

#[test]
fn the_likelihood_is_the_covariance_form() {
    let mut r = rng(3);
    let mut trees = small_trees();
    for n in [1, 2, 5, 9, 14] {
        trees.push(sample_tree(n, &params(1.0, 0.3, 1.0), &mut r).unwrap());
    }
    trees.push(tree(1, vec![], &[]));
    for t in &trees {
        for (d, sigma2) in [(1, 1.0), (3, 0.4), (2, 2.5)] {
            let x = Array2::from_shape_fn((t.n_leaves(), d), |(i, j)| {
                ((i * 7 + j * 3) as f64 * 0.37).sin() * 1.5
            });
            let got = log_likelihood(x.view(), t, sigma2).unwrap();
            let want = covariance_log_likelihood(&x, t, sigma2);
            assert!(
                (got - want).abs() < 1e-10 * (1.0 + want.abs()),
                "{}: {got} vs {want}",
                t.to_newick(None)
            );
        }
    }
}

#[test]
fn sampled_locations_have_the_covariance_of_the_tree() {
    let t = tree(4, vec![vec![1, 3], vec![4, 0, 2]], &[0.75, 0.35]);
    let sigma2 = 2.0;
    let draws = 40_000;
    let mut r = rng(8);
    let mut sum = DMatrix::<f64>::zeros(4, 4);
    for _ in 0..draws {
        let x = sample_locations(&t, 2, sigma2, &mut r).unwrap();
        for col in x.columns() {
            let v = DVector::from_iterator(4, col.iter().copied());
            sum += &v * v.transpose();
        }
    }
    let emp = sum / (2 * draws) as f64;
    let h = t.heights().unwrap();
    // C: leaves 1, 3 meet at 0.75, the rest at the root, 0.35.
    let c = |i: usize, j: usize| match (i.min(j), i.max(j)) {
        _ if i == j => 1.0,
        (1, 3) => h[4],
        _ => h[5],
    };
    for i in 0..4 {
        for j in 0..4 {
            let want = sigma2 * c(i, j);
            let se = sigma2 * ((c(i, i) * c(j, j) + c(i, j).powi(2)) / (2 * draws) as f64).sqrt();
            assert!(
                (emp[(i, j)] - want).abs() < 5.0 * se,
                "({i},{j}): {} vs {want}",
                emp[(i, j)]
            );
        }
    }
}

#[test]
fn the_sampler_draws_three_point_shapes_and_first_times_as_the_density_says() {
    let draws = 100_000;
    for (a, b, c, seed) in [
        (0.5, 0.2, 2.0, 1),
        (1.5, 0.0, 1.5, 2),
        (-0.2, 0.3, 2.5, 3),
        (0.0, 0.0, 1.0, 4),
    ] {
        let p = params(a, b, c);
        let mut r = rng(seed);
        let (mut stars, mut t_sum) = (0usize, 0.0);
        for _ in 0..draws {
            let t = sample_tree(3, &p, &mut r).unwrap();
            assert!(log_prior(&t, &p).unwrap().is_finite());
            if t.node(t.root()).children.len() == 3 {
                stars += 1;
            }
            t_sum += t.heights().unwrap()[t.root()];
        }
        // P(star) in closed form; it is checked against the integrated density above.
        let q = star_of_three(a, b);
        let freq = stars as f64 / draws as f64;
        let se = (q * (1.0 - q) / draws as f64).sqrt();
        assert!((freq - q).abs() <= 5.0 * se, "α={a} β={b}: {freq} vs {q}");
        // t_root ~ Beta(1, c H₂).
        let k = c * (rate(1, a, b) + rate(2, a, b));
        let mean = 1.0 / (1.0 + k);
        let sd = (k / ((1.0 + k).powi(2) * (2.0 + k))).sqrt();
        let got = t_sum / draws as f64;
        assert!(
            (got - mean).abs() < 5.0 * sd / (draws as f64).sqrt(),
            "{got} vs {mean}"
        );
    }
}

#[test]
fn the_sampler_draws_four_point_shapes_as_the_integrated_density_says() {
    let draws = 100_000;
    let (a, b, c) = (0.5, 0.2, 2.0);
    let p = params(a, b, c);
    let names: Vec<String> = shapes(4)
        .iter()
        .map(|(s, _)| shape_of(&tree(4, s.clone(), &vec![0.5; s.len()]), 4 + s.len() - 1))
        .collect();
    let probs: Vec<f64> = shapes(4)
        .iter()
        .map(|(s, k)| *k as f64 * integrate_shape(4, s, &p, 1.0 / 8.0, &|_| 1.0))
        .collect();
    let mut counts = vec![0usize; names.len()];
    let mut r = rng(17);
    for _ in 0..draws {
        let t = sample_tree(4, &p, &mut r).unwrap();
        let name = shape_of(&t, t.root());
        counts[names.iter().position(|s| *s == name).unwrap()] += 1;
    }
    // Pearson's χ² with 4 degrees of freedom; P(χ²₄ > 25) ≈ 5·10⁻⁵.
    let chi2: f64 = counts
        .iter()
        .zip(&probs)
        .map(|(&o, &q)| (o as f64 - draws as f64 * q).powi(2) / (draws as f64 * q))
        .sum();
    assert!(chi2 < 25.0, "χ² = {chi2}: {counts:?} vs {probs:?}");
}

#[test]
fn the_sampler_follows_the_process_constraints() {
    let mut r = rng(5);
    // The DDT and α = −2β never branch three ways.
    for p in [params(0.0, 0.0, 1.0), params(-0.8, 0.4, 1.0)] {
        for _ in 0..2000 {
            let t = sample_tree(12, &p, &mut r).unwrap();
            assert!(t.topology().is_binary());
        }
    }
    // The first divergence of ten points is Beta(1, c H₉).
    let (a, b, c) = (1.0, 0.4, 1.5);
    let p = params(a, b, c);
    let k = c * (1..10).map(|m| rate(m, a, b)).sum::<f64>();
    let draws = 50_000;
    let mut sum = 0.0;
    for _ in 0..draws {
        let t = sample_tree(10, &p, &mut r).unwrap();
        check_diffusion_tree(&t).unwrap();
        sum += t.heights().unwrap()[t.root()];
    }
    let sd = (k / ((1.0 + k).powi(2) * (2.0 + k))).sqrt();
    assert!((sum / draws as f64 - 1.0 / (1.0 + k)).abs() < 5.0 * sd / (draws as f64).sqrt());
}

#[test]
fn samples_are_reproducible_from_a_seed() {
    let p = params(1.0, 0.2, 1.0);
    let (x, t) = sample(30, 3, &p, 0.5, 42).unwrap();
    let (x2, t2) = sample(30, 3, &p, 0.5, 42).unwrap();
    assert_eq!(x, x2);
    assert_eq!(t, t2);
    let (x3, _) = sample(30, 3, &p, 0.5, 43).unwrap();
    assert_ne!(x, x3);
    // The tree does not depend on the dimension or the variance.
    let (_, t4) = sample(30, 1, &p, 2.0, 42).unwrap();
    assert_eq!(t, t4);
    assert_eq!(x.dim(), (30, 3));
    assert!(log_prior(&t, &p).unwrap().is_finite());
    assert!(log_likelihood(x.view(), &t, 0.5).unwrap().is_finite());
}

#[test]
fn times_beyond_double_precision_are_reported() {
    // c = 10⁻³ puts the divergences of leaf branches at τ ≈ 10³ E: 1 − t underflows.
    let p = params(0.0, 0.0, 1e-3);
    match sample_tree(50, &p, &mut rng(1)) {
        Err(RoseTreeError::Numerical(why)) => {
            assert!(why.contains("double precision"), "{why}");
        }
        other => panic!("expected a numerical error, got {other:?}"),
    }
}

#[test]
fn bad_parameters_are_named() {
    let name = |r: Result<PydtParams>| match r {
        Err(RoseTreeError::InvalidParameter { name, .. }) => name,
        other => panic!("expected an invalid parameter, got {other:?}"),
    };
    assert_eq!(name(PydtParams::new(0.5, -0.1, 1.0)), "beta");
    assert_eq!(name(PydtParams::new(0.5, 1.0, 1.0)), "beta");
    assert_eq!(name(PydtParams::new(0.5, f64::NAN, 1.0)), "beta");
    assert_eq!(name(PydtParams::new(-0.5, 0.2, 1.0)), "alpha");
    assert_eq!(name(PydtParams::new(f64::INFINITY, 0.2, 1.0)), "alpha");
    assert_eq!(name(PydtParams::new(0.5, 0.2, 0.0)), "c");
    assert_eq!(name(PydtParams::new(0.5, 0.2, f64::NAN)), "c");
    assert_eq!(name(PydtParams::ddt(-1.0)), "c");
    let t = tree(2, vec![vec![0, 1]], &[0.5]);
    let x = Array2::zeros((2, 1));
    for s in [0.0, -1.0, f64::INFINITY, f64::NAN] {
        match log_likelihood(x.view(), &t, s) {
            Err(RoseTreeError::InvalidParameter { name, .. }) => assert_eq!(name, "sigma2"),
            other => panic!("{other:?}"),
        }
    }
    let p = params(0.5, 0.2, 1.0);
    let param_name = |e: RoseTreeError| match e {
        RoseTreeError::InvalidParameter { name, .. } => name,
        other => panic!("{other:?}"),
    };
    assert_eq!(param_name(sample(0, 2, &p, 1.0, 0).unwrap_err()), "n");
    assert_eq!(param_name(sample(5, 0, &p, 1.0, 0).unwrap_err()), "d");
    assert_eq!(param_name(sample(5, 2, &p, -1.0, 0).unwrap_err()), "sigma2");
}

#[test]
fn trees_that_are_not_diffusion_trees_are_rejected() {
    let p = params(0.5, 0.2, 1.0);
    let shape = Topology::new(3, vec![vec![0, 1], vec![3, 2]]).unwrap();
    let invalid = |h: Option<Vec<f64>>, want: &str| {
        let t = Tree::new(&shape, h).unwrap();
        match log_prior(&t, &p) {
            Err(RoseTreeError::InvalidTree(why)) => assert!(why.contains(want), "{why}"),
            other => panic!("expected an invalid tree ({want}), got {other:?}"),
        }
        let x = Array2::zeros((3, 1));
        assert!(matches!(
            log_likelihood(x.view(), &t, 1.0),
            Err(RoseTreeError::InvalidTree(_))
        ));
    };
    invalid(None, "divergence times");
    invalid(Some(vec![0.0, 0.0, 0.0, -1.0, -2.0]), "t = 1");
    invalid(Some(vec![1.0, 1.0, 1.0, 0.5, 0.0]), "(0, 1)");
    invalid(Some(vec![1.0, 1.0, 1.0, 0.5, 0.5]), "strictly before");
    invalid(Some(vec![2.0, 2.0, 2.0, 1.5, 1.0]), "t = 1");
    // A likelihood with the wrong number of rows.
    let t = Tree::new(&shape, Some(vec![1.0, 1.0, 1.0, 0.6, 0.3])).unwrap();
    assert!(matches!(
        log_likelihood(Array2::zeros((4, 1)).view(), &t, 1.0),
        Err(RoseTreeError::InvalidTree(_))
    ));
}
