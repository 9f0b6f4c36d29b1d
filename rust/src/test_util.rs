//! Helpers shared by the unit tests.

use nalgebra::{DMatrix, DVector};
use ndarray::Array2;

use crate::models::RowQueries;
use crate::tree::{Topology, Tree};

/// `ln f` of all rows of `x` as one cluster, through every path a model offers: evaluated
/// from the merged statistics, merged from two parts (all rows but the last, and the last),
/// and through the query of the first part against the last row.
pub(crate) fn log_f_every_path<M: RowQueries>(model: &M, x: &Array2<f64>) -> [f64; 3] {
    let l = model.leaf_stats_all(x.view()).unwrap();
    let n = l.len();
    let head = l[1..n - 1]
        .iter()
        .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
    [
        model.log_marginal(&model.merge(&head, &l[n - 1])).unwrap(),
        model.log_marginal_merged(&head, &l[n - 1]).unwrap(),
        model
            .log_marginal_query(&model.query(&head), &head, &l[n - 1])
            .unwrap(),
    ]
}

/// Every vector of `k` whole counts summing to `n` (the compositions of `n` into `k` parts).
pub(crate) fn compositions(n: usize, k: usize) -> Vec<Vec<f64>> {
    if k == 1 {
        return vec![vec![n as f64]];
    }
    (0..=n)
        .flat_map(|first| {
            compositions(n - first, k - 1)
                .into_iter()
                .map(move |mut rest| {
                    rest.insert(0, first as f64);
                    rest
                })
        })
        .collect()
}

/// `scale · t_{lca(u, v)}` over every pair of nodes of `tree` (leaves first), the height of
/// the lowest common ancestor of `u` and `v` (a node's own height when one is above the
/// other, so a leaf's diagonal entry is its own height): for the diffusion tree with
/// `scale = σ²`, the covariance of the Brownian motion's locations at the nodes in one
/// dimension.
pub(crate) fn lca_covariance(tree: &Tree, scale: f64) -> DMatrix<f64> {
    let h = tree.heights().unwrap();
    let m = tree.nodes().len();
    let up: Vec<Vec<usize>> = (0..m)
        .map(|v| {
            let mut out = vec![v];
            while let Some(p) = tree.node(*out.last().unwrap()).parent {
                out.push(p);
            }
            out
        })
        .collect();
    DMatrix::from_fn(m, m, |u, v| {
        scale * h[*up[u].iter().find(|a| up[v].contains(a)).unwrap()]
    })
}

/// `ln N(x_col; 0, σ²C)` summed over the columns, `C_ij` the time of the lowest common
/// ancestor of leaves `i ≠ j` and `C_ii = 1`, by a dense Cholesky factorisation: the
/// diffusion tree's Gaussian likelihood (Knowles & Ghahramani eq 10) in covariance form.
pub(crate) fn covariance_log_likelihood(x: &Array2<f64>, tree: &Tree, sigma2: f64) -> f64 {
    let n = tree.n_leaves();
    let cov = lca_covariance(tree, sigma2)
        .view((0, 0), (n, n))
        .into_owned();
    let chol = cov.cholesky().unwrap();
    let log_det = 2.0 * chol.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    let ln_2pi = (2.0 * std::f64::consts::PI).ln();
    let mut total = 0.0;
    for col in x.columns() {
        let v = DVector::from_iterator(n, col.iter().copied());
        let quad = v.dot(&chol.solve(&v));
        total += -0.5 * (n as f64 * ln_2pi + log_det + quad);
    }
    total
}

/// Durations at which to test `duration_exceeds` around a pair's best duration `delta`: 0,
/// `delta` itself, three just below it, and one drawn below and one above it.
pub(crate) fn durations_around(delta: f64, r: &mut impl rand::Rng) -> [f64; 7] {
    [
        0.0,
        delta,
        delta.next_down(),
        delta * (1.0 - 1e-12),
        delta * (1.0 - 1e-7),
        delta * r.random::<f64>(),
        delta * (1.0 + r.random::<f64>()),
    ]
}

/// A random rose tree over `n` leaves: merge random groups of 2 to `max_children` trees
/// until one is left.
pub(crate) fn random_topology(n: usize, max_children: usize, rng: &mut impl rand::Rng) -> Topology {
    let mut roots: Vec<usize> = (0..n).collect();
    let mut internal = Vec::new();
    while roots.len() > 1 {
        let k = rng.random_range(2..=max_children.min(roots.len()));
        let mut children = Vec::new();
        for _ in 0..k {
            children.push(roots.swap_remove(rng.random_range(0..roots.len())));
        }
        roots.push(n + internal.len());
        internal.push(children);
    }
    Topology::new(n, internal).unwrap()
}
