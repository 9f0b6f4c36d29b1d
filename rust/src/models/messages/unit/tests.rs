//! The unit-rate Brownian messages against the covariance form of the same Gaussian: on a
//! timed tree rooted at the origin (a point mass at 0 at `t = 0`), the values at all nodes
//! are jointly normal with `Cov(x_u, x_v) = σ² t_{lca(u, v)}` in each dimension. Dense
//! Cholesky factors of that matrix give the marginal likelihood of the leaves at every `σ²`,
//! the posterior marginals of the internal nodes, the law of a node given the data outside
//! a subtree (the outside messages) and the predictive density of a new leaf joining a
//! branch, independently of the message passing.

use nalgebra::{DMatrix, DVector};

use super::*;
use crate::test_util::lca_covariance;
use crate::tree::{Topology, Tree};

/// `((0, 1) at 0.7, (2, 3, 4) at 0.5) at 0.2`, with a three-way branch point; a
/// caterpillar-like `(((0, 1) at 0.8, 2) at 0.45, 3) at 0.1`; and `(0, (1, 2, 3, 4) at
/// 0.5001) at 0.5`, where the four-way node's message outweighs everything else at the root
/// (precision about 8 against 4), so that its outside message is summed directly.
fn trees() -> Vec<Tree> {
    vec![
        Tree::new(
            &Topology::new(5, vec![vec![1, 2, 3, 4], vec![0, 5]]).unwrap(),
            Some(vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.5001, 0.5]),
        )
        .unwrap(),
        Tree::new(
            &Topology::new(5, vec![vec![0, 1], vec![2, 3, 4], vec![5, 6]]).unwrap(),
            Some(vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.7, 0.5, 0.2]),
        )
        .unwrap(),
        Tree::new(
            &Topology::new(4, vec![vec![0, 1], vec![4, 2], vec![5, 3]]).unwrap(),
            Some(vec![1.0, 1.0, 1.0, 1.0, 0.8, 0.45, 0.1]),
        )
        .unwrap(),
    ]
}

fn sub(c: &DMatrix<f64>, rows: &[usize], cols: &[usize]) -> DMatrix<f64> {
    DMatrix::from_fn(rows.len(), cols.len(), |i, j| c[(rows[i], cols[j])])
}

/// The mean and covariance of the nodes `target` given the values `x` at the nodes `obs`,
/// for a zero-mean Gaussian with covariance `c` plus `noise` on the diagonal of `obs`.
fn conditional(
    c: &DMatrix<f64>,
    obs: &[usize],
    noise: &[f64],
    x: &[f64],
    target: &[usize],
) -> (DVector<f64>, DMatrix<f64>) {
    let mut k = sub(c, obs, obs);
    for (i, e) in noise.iter().enumerate() {
        k[(i, i)] += e;
    }
    let chol = k.cholesky().unwrap();
    let cross = sub(c, target, obs);
    let mean = &cross * chol.solve(&DVector::from_column_slice(x));
    let cov = sub(c, target, target) - &cross * chol.solve(&cross.transpose());
    (mean, cov)
}

/// `ln N(x; 0, c)` by a dense Cholesky factor.
fn log_density(x: &[f64], c: &DMatrix<f64>) -> f64 {
    let chol = c.clone().cholesky().unwrap();
    let v = DVector::from_column_slice(x);
    let log_det = 2.0 * chol.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    -0.5 * (x.len() as f64 * (2.0 * PI).ln() + log_det + v.dot(&chol.solve(&v)))
}

/// Data: `d` columns over the leaves, with leaf `i`'s noise variance factor `noise[i]`.
fn data(n: usize, d: usize) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| {
            (0..d)
                .map(|j| ((i * 5 + j * 3 + 1) as f64 * 0.71).sin() * 1.3)
                .collect()
        })
        .collect()
}

/// The upward messages of every node (leaf `i` observed with noise `noise[i]`, `∞`:
/// unobserved).
fn upward(tree: &Tree, x: &[Vec<f64>], noise: &[f64]) -> Vec<UnitMessage> {
    let h = tree.heights().unwrap();
    let d = x[0].len();
    let mut up: Vec<UnitMessage> = x
        .iter()
        .zip(noise)
        .map(|(row, &e)| UnitMessage::observed(row.clone(), e))
        .collect();
    for v in tree.n_leaves()..tree.nodes().len() {
        let mut msg = UnitMessage::uninformative(d);
        for &k in &tree.node(v).children {
            msg.absorb(&up[k], h[k] - h[v]);
        }
        up.push(msg);
    }
    up
}

#[test]
fn the_split_normalisers_are_the_covariance_form_at_every_rate() {
    for tree in trees() {
        let n = tree.n_leaves();
        let h = tree.heights().unwrap();
        let c = lca_covariance(&tree, 1.0);
        let leaves: Vec<usize> = (0..n).collect();
        let d = 3;
        let x = data(n, d);
        for noise in [
            vec![0.0; n],
            (0..n).map(|i| 0.05 * (i + 1) as f64).collect(),
        ] {
            let up = upward(&tree, &x, &noise);
            let root = tree.root();
            let split = up[root].against_origin(h[root]);
            assert_eq!(split.factors, n);
            for sigma2 in [0.3, 1.0, 4.0] {
                let mut cov = sub(&c, &leaves, &leaves) * sigma2;
                for (i, e) in noise.iter().enumerate() {
                    cov[(i, i)] += sigma2 * e;
                }
                let want: f64 = (0..d)
                    .map(|j| log_density(&x.iter().map(|r| r[j]).collect::<Vec<_>>(), &cov))
                    .sum();
                let got = split.log_z(d, sigma2);
                assert!((got - want).abs() < 1e-11, "{got} vs {want}");
            }
        }
    }
}

#[test]
fn unobserved_leaves_drop_out() {
    let tree = &trees()[0];
    let h = tree.heights().unwrap();
    let c = lca_covariance(tree, 1.0);
    let x = data(5, 2);
    // Leaves 2 and 3 unobserved: the three-way node keeps one informative child.
    let noise = [0.0, 0.1, f64::INFINITY, f64::INFINITY, 0.2];
    let up = upward(tree, &x, &noise);
    let split = up[tree.root()].against_origin(h[tree.root()]);
    assert_eq!(split.factors, 3);
    let seen = [0, 1, 4];
    let mut cov = sub(&c, &seen, &seen) * 0.7;
    cov[(1, 1)] += 0.7 * 0.1;
    cov[(2, 2)] += 0.7 * 0.2;
    let want: f64 = (0..2)
        .map(|j| log_density(&seen.map(|i| x[i][j]), &cov))
        .sum();
    assert!((split.log_z(2, 0.7) - want).abs() < 1e-12);
    // No observation at all: no normaliser.
    let none = upward(tree, &x, &[f64::INFINITY; 5]);
    let z = none[tree.root()].against_origin(h[tree.root()]);
    assert_eq!((z.factors, z.log_z(2, 0.7)), (0, 0.0));
}

#[test]
fn posterior_marginals_and_branch_statistics_are_the_conditional_gaussian() {
    let sigma2 = 0.6;
    for tree in trees() {
        let n = tree.n_leaves();
        let m = tree.nodes().len();
        let h = tree.heights().unwrap();
        let c = lca_covariance(&tree, 1.0) * sigma2;
        let d = 2;
        let x = data(n, d);
        let noise: Vec<f64> = (0..n).map(|i| 0.03 * i as f64).collect();
        let up = upward(&tree, &x, &noise);
        // Top-down from the origin, parents (higher ids) first.
        let mut mean = vec![vec![0.0; d]; m];
        let mut var = vec![0.0; m];
        let mut stat = vec![0.0; m];
        for v in (0..m).rev() {
            let parent = tree.node(v).parent;
            let branch = h[v] - parent.map_or(0.0, |p| h[p]);
            let (pm, pv) = match parent {
                Some(p) => (Some(mean[p].clone()), var[p]),
                None => (None, 0.0),
            };
            let mut out = vec![0.0; d];
            (var[v], stat[v]) =
                up[v].posterior_below(branch, (pm.as_deref(), pv), sigma2, &mut out);
            mean[v] = out;
        }
        // Dense: every node (the origin appended as a node at t = 0 is x = 0) given the
        // noisy leaves.
        let leaves: Vec<usize> = (0..n).collect();
        let noise_abs: Vec<f64> = noise.iter().map(|e| sigma2 * e).collect();
        let all: Vec<usize> = (0..m).collect();
        for j in 0..d {
            let col: Vec<f64> = x.iter().map(|r| r[j]).collect();
            let (mu, cov) = conditional(&c, &leaves, &noise_abs, &col, &all);
            for v in 0..m {
                assert!((mean[v][j] - mu[v]).abs() < 1e-12, "node {v}");
                assert!((sigma2 * var[v] - cov[(v, v)]).abs() < 1e-12, "node {v}");
            }
        }
        for v in 0..m {
            // E‖x_v − x_a‖² summed over the columns, from the joint conditional of v and a.
            let want: f64 = (0..d)
                .map(|j| {
                    let col: Vec<f64> = x.iter().map(|r| r[j]).collect();
                    let (mu, cov) = conditional(&c, &leaves, &noise_abs, &col, &all);
                    match tree.node(v).parent {
                        Some(a) => {
                            (mu[v] - mu[a]).powi(2) + cov[(v, v)] + cov[(a, a)] - 2.0 * cov[(v, a)]
                        }
                        None => mu[v].powi(2) + cov[(v, v)],
                    }
                })
                .sum();
            assert!(
                (stat[v] - want).abs() < 1e-11,
                "node {v}: {} vs {want}",
                stat[v]
            );
        }
    }
}

/// Each child's outside message at every branch point, by [`Outside`] from the origin
/// down: `(mean per column, variance factor)` by node.
fn outside_messages(tree: &Tree, up: &[UnitMessage]) -> Vec<(Vec<f64>, f64)> {
    let h = tree.heights().unwrap();
    let d = up[0].mean().len();
    let m = tree.nodes().len();
    // The root's message from above is the origin's, N(0, 0), at the root's parent (t = 0).
    let (mut means, mut vars) = (vec![0.0; m * d], vec![0.0; m]);
    let mut buf = Outside::default();
    for b in (tree.n_leaves()..m).rev() {
        let top = tree.node(b).parent.map_or(0.0, |p| h[p]);
        let msgs: Vec<(usize, &[f64], f64)> = tree
            .node(b)
            .children
            .iter()
            .map(|&k| (k, up[k].mean(), up[k].var() + (h[k] - h[b])))
            .collect();
        let above_var = vars[b] + (h[b] - top);
        buf.compute(&mut means, &mut vars, (b, above_var), &msgs);
    }
    (0..m)
        .map(|v| (means[v * d..(v + 1) * d].to_vec(), vars[v]))
        .collect()
}

/// The leaves of the subtree under `v`.
fn leaves_under(tree: &Tree, v: usize) -> Vec<usize> {
    let mut l = tree.leaves_of(v);
    l.sort_unstable();
    l
}

#[test]
fn outside_messages_are_the_law_given_the_data_outside_the_subtree() {
    let sigma2 = 1.7;
    for tree in trees() {
        let n = tree.n_leaves();
        let c = lca_covariance(&tree, 1.0) * sigma2;
        let d = 2;
        let x = data(n, d);
        let up = upward(&tree, &x, &vec![0.0; n]);
        let out = outside_messages(&tree, &up);
        for (k, (out_mean, out_var)) in out.iter().enumerate() {
            let Some(p) = tree.node(k).parent else {
                continue;
            };
            // O_k is the law of x_p given the leaves outside k's subtree.
            let inside = leaves_under(&tree, k);
            let outside: Vec<usize> = (0..n).filter(|i| !inside.contains(i)).collect();
            for (j, got) in out_mean.iter().enumerate() {
                let col: Vec<f64> = outside.iter().map(|&i| x[i][j]).collect();
                let (mu, cov) = conditional(&c, &outside, &vec![0.0; outside.len()], &col, &[p]);
                assert!((got - mu[0]).abs() < 1e-12, "node {k}");
                assert!((sigma2 * out_var - cov[(0, 0)]).abs() < 1e-12, "node {k}");
            }
        }
    }
}

#[test]
fn a_branch_join_is_the_predictive_density_of_a_new_leaf() {
    // A new leaf joins the branch above `u` at time t and runs to t = 1: its value is
    // N(m(t), σ²(s(t) + 1 − t)) given the data, m and s the posterior on the branch.
    let sigma2 = 0.8;
    for tree in trees() {
        let n = tree.n_leaves();
        let h = tree.heights().unwrap();
        let d = 3;
        let x = data(n, d);
        let y: Vec<f64> = (0..d).map(|j| 0.4 - 0.3 * j as f64).collect();
        let up = upward(&tree, &x, &vec![0.0; n]);
        let out = outside_messages(&tree, &up);
        for u in 0..tree.nodes().len() {
            let (top, above) = match tree.node(u).parent {
                Some(p) => (h[p], out[u].clone()),
                None => (0.0, (vec![0.0; d], 0.0)),
            };
            let join = BranchJoin::new(up[u].mean(), &above.0, &y);
            for frac in [0.02, 0.3, 0.5, 0.77, 0.98] {
                let t = top + frac * (h[u] - top);
                let at = join.at(up[u].var() + (h[u] - t), above.1 + (t - top));
                let got = SplitLogZ::normal(at.sq_dist, at.var + (1.0 - t)).log_z(d, sigma2);
                // Dense: the tree with the new node w at t on the branch and leaf n below.
                let cov = dense_from_parents(&tree_with_join(&tree, u, t), sigma2);
                let leaves: Vec<usize> = (0..n).collect();
                let want: f64 = (0..d)
                    .map(|j| {
                        let col: Vec<f64> = x.iter().map(|r| r[j]).collect();
                        let (mu, var) = conditional(&cov, &leaves, &vec![0.0; n], &col, &[n]);
                        -0.5 * ((2.0 * PI * var[(0, 0)]).ln()
                            + (y[j] - mu[0]).powi(2) / var[(0, 0)])
                    })
                    .sum();
                assert!((got - want).abs() < 1e-10, "u {u}, t {t}: {got} vs {want}");
                // The posterior mean weighs the message from above by w.
                assert!(at.weight > 0.0 && at.weight < 1.0);
            }
        }
    }
}

/// A timed tree given by its nodes' parents.
struct Timed {
    parent: Vec<Option<usize>>,
    time: Vec<f64>,
}

/// The tree with a new leaf `n` below a new node `w` at time `t` on the branch above `u`:
/// old nodes keep their ids shifted by one from `n` on, `w` comes last.
fn tree_with_join(tree: &Tree, u: usize, t: f64) -> Timed {
    let n = tree.n_leaves();
    let h = tree.heights().unwrap();
    let m = tree.nodes().len();
    let id = |v: usize| if v < n { v } else { v + 1 };
    let w = m + 1;
    let mut parent = vec![None; m + 2];
    let mut time = vec![0.0; m + 2];
    for v in 0..m {
        parent[id(v)] = tree.node(v).parent.map(id);
        time[id(v)] = h[v];
    }
    parent[w] = parent[id(u)];
    parent[id(u)] = Some(w);
    parent[n] = Some(w);
    time[n] = 1.0;
    time[w] = t;
    Timed { parent, time }
}

/// `σ² C` over the nodes of a tree given by parents and times, rooted at the origin.
fn dense_from_parents(timed: &Timed, sigma2: f64) -> DMatrix<f64> {
    let m = timed.parent.len();
    let up: Vec<Vec<usize>> = (0..m)
        .map(|v| {
            let mut out = vec![v];
            while let Some(p) = timed.parent[*out.last().unwrap()] {
                out.push(p);
            }
            out
        })
        .collect();
    DMatrix::from_fn(m, m, |a, b| {
        sigma2 * timed.time[*up[a].iter().find(|v| up[b].contains(v)).unwrap()]
    })
}

#[test]
fn the_bridge_is_the_product_of_the_branch_and_the_message() {
    // N(x; x_a, σ²ℓ) · N(x; μ, σ²u) ∝ N(x; k x_a + (1 − k) μ, σ² ℓu/(ℓ + u)).
    let msg = UnitMessage::observed(vec![2.0], 0.5);
    let b = msg.given_parent(1.5);
    let (xa, prec) = (-1.0, 1.0 / 1.5 + 1.0 / 0.5);
    let mean = (xa / 1.5 + 2.0 / 0.5) / prec;
    assert!((b.parent * xa + b.own * 2.0 - mean).abs() < 1e-15);
    assert!((b.var - 1.0 / prec).abs() < 1e-15);
    assert!((b.parent + b.own - 1.0).abs() < 1e-15);
    let leaf = UnitMessage::point(vec![2.0]).given_parent(1.5);
    assert_eq!((leaf.parent, leaf.own, leaf.var), (0.0, 1.0, 0.0));
}

#[test]
fn the_join_is_expanded_about_the_nearer_end() {
    // Far apart means and a joining point at the upper end: the expansion about the
    // lower end would cancel ‖y − μ_u‖² against the cross term; the nearer end keeps the
    // digits.
    let (below, above) = ([1e8], [0.0]);
    let y = [1e-3];
    let join = BranchJoin::new(&below, &above, &y);
    let at = join.at(1.0, 1e-12);
    // m = μ_u (1 − w) + w μ_o with 1 − w = 10⁻¹²/(1 + 10⁻¹²).
    let m = below[0] * (1e-12 / (1.0 + 1e-12));
    let want = (y[0] - m).powi(2);
    assert!(
        (at.sq_dist - want).abs() < 1e-9 * want,
        "{} vs {want}",
        at.sq_dist
    );
}

#[test]
fn a_join_with_the_sum_given_agrees_with_the_join() {
    // Along a branch the variance factors from below and above sum to a constant: the
    // reciprocal given once gives the same point up to rounding.
    let join = BranchJoin::new(&[0.3, -1.0], &[2.0, 0.5], &[1.1, 0.2]);
    let total = 2.5;
    for below in [0.01, 0.7, 1.25, 1.9, 2.49] {
        let (a, b) = (
            join.at(below, total - below),
            join.at_scaled(below, total - below, 1.0 / total),
        );
        assert!((a.var - b.var).abs() < 1e-15 && (a.weight - b.weight).abs() < 1e-15);
        assert!((a.sq_dist - b.sq_dist).abs() < 1e-14 * a.sq_dist.max(1.0));
        // Against the posterior mean written out.
        let w = below / total;
        let m = [0.3 + w * (2.0 - 0.3), -1.0 + w * (0.5 + 1.0)];
        let want = (1.1 - m[0]).powi(2) + (0.2 - m[1]).powi(2);
        assert!((a.sq_dist - want).abs() < 1e-14, "{} vs {want}", a.sq_dist);
    }
}
