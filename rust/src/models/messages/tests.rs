//! Shared tree generators for the message-model tests, and the checks of
//! [`tree_log_likelihood`]'s arguments.

use ndarray::{Array2, array};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::*;
use crate::tree::Topology;

/// A seeded generator.
pub(crate) fn rng(seed: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(seed)
}

/// A standard normal draw (Box–Muller).
pub(crate) fn normal(rng: &mut impl Rng) -> f64 {
    let (u, v): (f64, f64) = (1.0 - rng.random::<f64>(), rng.random());
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A random coalescent-style tree over `n` leaves at time 0: lineages merge two at a time,
/// or three at a time with probability `p_triple`, each merge `Exp(1)`-ish earlier than the
/// last (times negative, as in Teh et al.). Returns the tree.
pub(crate) fn random_tree(n: usize, p_triple: f64, rng: &mut impl Rng) -> Tree {
    let mut alive: Vec<usize> = (0..n).collect();
    let mut heights = vec![0.0; n];
    let mut internal = Vec::new();
    let mut t = 0.0;
    while alive.len() > 1 {
        let k = if alive.len() >= 3 && rng.random::<f64>() < p_triple {
            3
        } else {
            2
        };
        let mut children = Vec::new();
        for _ in 0..k {
            let i = rng.random_range(0..alive.len());
            children.push(alive.swap_remove(i));
        }
        t -= 0.05 + rng.random::<f64>();
        let id = n + internal.len();
        internal.push(children);
        heights.push(t);
        alive.push(id);
    }
    Tree::new(&Topology::new(n, internal).unwrap(), Some(heights)).unwrap()
}

/// A caterpillar over `n` leaves at time 0: leaf `k + 1` joins the subtree of leaves
/// `0..=k` at time `−(k + 1)·step`.
pub(crate) fn caterpillar(n: usize, step: f64) -> Tree {
    let internal: Vec<Vec<usize>> = (1..n)
        .map(|k| vec![if k == 1 { 0 } else { n + k - 2 }, k])
        .collect();
    let heights = (0..n)
        .map(|_| 0.0)
        .chain((1..n).map(|k| -(k as f64) * step))
        .collect();
    Tree::new(&Topology::new(n, internal).unwrap(), Some(heights)).unwrap()
}

/// `((0, 1), 2)` with leaves 0 and 1 merged at time 0, a branch of length zero: leaves 0
/// and 1 must then be equal.
pub(crate) fn cherry_at_zero() -> Tree {
    let shape = Topology::new(3, vec![vec![0, 1], vec![3, 2]]).unwrap();
    Tree::new(&shape, Some(vec![0.0, 0.0, 0.0, 0.0, -1.0])).unwrap()
}

/// `C[i][j] = |h(lca(i, j)) − h(root)|`: the length of the path that leaves `i` and `j`
/// share below the root node (`C[i][i]` is the root-to-leaf length). Computed from the
/// ancestor lists, independently of the message passing.
pub(crate) fn shared_lengths(tree: &Tree) -> Vec<Vec<f64>> {
    let h = tree.heights().unwrap();
    let ancestors = |mut v: usize| {
        let mut out = vec![v];
        while let Some(p) = tree.node(v).parent {
            out.push(p);
            v = p;
        }
        out
    };
    let n = tree.n_leaves();
    let paths: Vec<Vec<usize>> = (0..n).map(ancestors).collect();
    let root = h[tree.root()];
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    let lca = *paths[i].iter().find(|a| paths[j].contains(a)).unwrap();
                    (h[lca] - root).abs()
                })
                .collect()
        })
        .collect()
}

/// Asserts that `r` is an [`RoseTreeError::InvalidParameter`] naming `want`.
pub(crate) fn invalid_parameter<T: std::fmt::Debug>(r: Result<T>, want: &str) {
    match r {
        Err(RoseTreeError::InvalidParameter { name, .. }) => assert_eq!(name, want),
        other => panic!("expected InvalidParameter({want}), got {other:?}"),
    }
}

/// The maximiser of a unimodal `f` on `[lo, hi]` by golden-section search.
pub(crate) fn golden_max(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let g = 0.5 * (5f64.sqrt() - 1.0);
    let (mut a, mut b) = (hi - g * (hi - lo), lo + g * (hi - lo));
    let (mut fa, mut fb) = (f(a), f(b));
    while hi - lo > 1e-13 * (1.0 + hi.abs()) {
        if fa < fb {
            lo = a;
            a = b;
            fa = fb;
            b = lo + g * (hi - lo);
            fb = f(b);
        } else {
            hi = b;
            b = a;
            fb = fa;
            a = hi - g * (hi - lo);
            fa = f(a);
        }
    }
    0.5 * (lo + hi)
}

#[test]
fn arguments_are_checked() {
    let model = BrownianDiffusion::isotropic(1.0, 2).unwrap();
    let tree = caterpillar(3, 1.0);
    let x = array![[0.0, 1.0], [1.0, 2.0], [0.5, 0.5]];
    assert!(tree_log_likelihood(&model, x.view(), &tree, 0.0).is_ok());
    assert!(matches!(
        tree_log_likelihood(&model, x.slice(ndarray::s![..2, ..]), &tree, 0.0),
        Err(RoseTreeError::InvalidTree(_))
    ));
    assert!(matches!(
        tree_log_likelihood(&model, Array2::zeros((3, 3)).view(), &tree, 0.0),
        Err(RoseTreeError::ShapeMismatch { .. })
    ));
    for bad in [-1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            tree_log_likelihood(&model, x.view(), &tree, bad),
            Err(RoseTreeError::InvalidParameter { name, .. }) if name == "root_branch"
        ));
    }
    let bare = Tree::new(&tree.topology(), None).unwrap();
    assert!(matches!(
        tree_log_likelihood(&model, x.view(), &bare, 0.0),
        Err(RoseTreeError::InvalidTree(_))
    ));
    let mut with_nan = x.clone();
    with_nan[[2, 1]] = f64::NAN;
    assert!(matches!(
        tree_log_likelihood(&model, with_nan.view(), &tree, 0.0),
        Err(RoseTreeError::InvalidData {
            row: 2,
            column: Some(1),
            ..
        })
    ));
}

#[test]
fn a_single_leaf_is_its_own_root() {
    // One point under a Gaussian root N(0, s0Λ): its density, with the root branch added.
    let model = BrownianDiffusion::isotropic(2.0, 1)
        .unwrap()
        .with_root(Root::Gaussian { s0: 0.5 })
        .unwrap();
    let tree = Tree::new(&Topology::new(1, vec![]).unwrap(), Some(vec![0.0])).unwrap();
    let got = tree_log_likelihood(&model, array![[1.5]].view(), &tree, 0.25).unwrap();
    let var = 2.0 * (0.5 + 0.25);
    let want = -0.5 * (std::f64::consts::TAU * var).ln() - 1.5 * 1.5 / (2.0 * var);
    assert!((got - want).abs() < 1e-14, "{got} vs {want}");
}

#[test]
fn optimal_duration_arguments_are_checked() {
    let model = BrownianDiffusion::isotropic(1.0, 1).unwrap();
    let (a, _) = model.leaf_message(array![0.0].view(), 0).unwrap();
    let pair = model.pair(&a, &a);
    for (base, rate, name) in [
        (0.0, 0.0, "rate"),
        (0.0, -1.0, "rate"),
        (0.0, f64::NAN, "rate"),
        (-1.0, 1.0, "base_length"),
        (f64::INFINITY, 1.0, "base_length"),
    ] {
        assert!(matches!(
            model.optimal_duration(&pair, base, rate),
            Err(RoseTreeError::InvalidParameter { name: n, .. }) if n == name
        ));
    }
}

#[test]
fn subtree_evidence_is_each_subtree_on_its_own() {
    // Every node's evidence equals the likelihood of its rows under the subtree cut out and
    // evaluated as a tree of its own (root prior on the node); the root's is the whole tree's.
    let model = BrownianDiffusion::isotropic(0.7, 2)
        .unwrap()
        .with_root(Root::Gaussian { s0: 1.5 })
        .unwrap();
    let mut g = rng(11);
    let tree = random_tree(7, 0.3, &mut g);
    let x = Array2::from_shape_fn((7, 2), |_| normal(&mut g));
    let leaves = model.leaf_messages(x.view()).unwrap();
    let evidence = subtree_log_evidence_from_leaves(&model, &leaves, &tree).unwrap();
    let whole = tree_log_likelihood(&model, x.view(), &tree, 0.0).unwrap();
    assert!((evidence[tree.root()] - whole).abs() < 1e-12);
    let heights = tree.heights().unwrap();
    for (v, &got) in evidence.iter().enumerate().skip(tree.n_leaves()) {
        // The subtree below v, relabelled: its leaves in order, then its internal nodes.
        let rows = tree.leaves_of(v);
        let ids: Vec<usize> = (tree.n_leaves()..=v)
            .filter(|&u| tree.leaves_of(u).iter().all(|r| rows.contains(r)))
            .collect();
        let local = |u: usize| match rows.iter().position(|&r| r == u) {
            Some(i) => i,
            None => rows.len() + ids.iter().position(|&w| w == u).unwrap(),
        };
        let internal = ids
            .iter()
            .map(|&u| tree.nodes()[u].children.iter().map(|&c| local(c)).collect())
            .collect();
        let mut h = vec![0.0; rows.len()];
        h.extend(ids.iter().map(|&u| heights[u]));
        let sub = Tree::new(&Topology::new(rows.len(), internal).unwrap(), Some(h)).unwrap();
        let sub_x = x.select(ndarray::Axis(0), &rows);
        let want = tree_log_likelihood(&model, sub_x.view(), &sub, 0.0).unwrap();
        assert!((got - want).abs() < 1e-12, "node {v}");
    }
    for (i, (msg, log_z)) in leaves.iter().enumerate() {
        assert!((evidence[i] - (log_z + model.root_log_z(msg))).abs() < 1e-15);
    }
}

/// Brownian motion's `branch_join_log_z` (inner products once, then `O(1)` per time) against
/// its definition through `propagate` and `combine`, over random messages, branches and
/// times, including a point-mass leaf below the branch and times at the branch's ends.
#[test]
fn brownian_branch_join_is_its_definition() {
    let mut r = rng(11);
    let d = 4;
    let model = BrownianDiffusion::diagonal(&[0.5, 1.0, 2.0, 0.3], d).unwrap();
    let message = |r: &mut Xoshiro256PlusPlus, var: f64| {
        let row: Vec<f64> = (0..d).map(|_| 2.0 * normal(r)).collect();
        let (msg, _) = model
            .leaf_message(ndarray::ArrayView1::from(&row), 0)
            .unwrap();
        model.propagate(&msg, var)
    };
    for case in 0..200 {
        let (up_var, out_var): (f64, f64) = (r.random(), 3.0 * r.random::<f64>());
        let up = message(&mut r, if case % 4 == 0 { 0.0 } else { up_var });
        let out = message(&mut r, out_var);
        let leaf = message(&mut r, if case % 3 == 0 { 0.0 } else { 0.2 });
        let bottom = if case % 2 == 0 {
            0.0
        } else {
            -r.random::<f64>()
        };
        let top = bottom - 2.0 * r.random::<f64>() - 1e-3;
        let mut times: Vec<f64> = (0..6)
            .map(|_| top + (bottom - top) * r.random::<f64>())
            .collect();
        times.extend([top, bottom, bottom - 1e-9 * (bottom - top)]);
        let mut got = vec![0.0; times.len()];
        model.branch_join_log_z(&up, &out, top, bottom, &leaf, &times, &mut got);
        for (&t, &got) in times.iter().zip(&got) {
            let below = model.propagate(&up, bottom - t);
            let post = model.combine(&[below, model.propagate(&out, t - top)]).0;
            let want = model.combine(&[post, model.propagate(&leaf, -t)]).1;
            if want.is_finite() {
                assert!(
                    (got - want).abs() <= 1e-10 * want.abs().max(1.0),
                    "{got} vs {want}"
                );
            } else {
                assert_eq!(got, want);
            }
        }
    }
}
