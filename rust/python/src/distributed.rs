//! What `rosetree.dask` needs to fit a rose tree in parts on other machines: cluster
//! statistics as arrays (so they travel), the predictive of rows under such clusters (to
//! route rows and to predict), the split of a sample tree into groups, and the tree joined
//! from the parts' trees and statistics, scored exactly (`brt::stitch`).

use ndarray::{Array2, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::PyResult;

use super::models::{AnyModel, PyModelSpec, build_model, conjugate_families};
use super::parse_mixing;
use super::tree::PyRoseTree;
use rosetree::brt::{self, Part};
use rosetree::error::RoseTreeError;
use rosetree::models::{ClusterModel, RowQueries, StatsCodec};

macro_rules! conjugate_arms {
    ([$model:expr, $m:ident, $body:expr] $($variant:ident: $t:ty = $name:literal;)*) => {
        match $model {
            $(AnyModel::$variant(mut $m) => $body,)*
            AnyModel::Callback(_) => Err(RoseTreeError::param(
                "model",
                "a Python cluster model's statistics are its rows; fitting in parts needs one \
                 of the conjugate models",
            )
            .into()),
        }
    };
}

/// Runs `$body` with `$m` bound to a conjugate model; a Python model is an error.
macro_rules! with_conjugate {
    ($model:expr, $m:ident => $body:expr) => {
        conjugate_families!(conjugate_arms, $model, $m, $body)
    };
}

/// The model of `spec`, whose hyperparameters must all be given (no data-driven default is
/// resolved: the parts of a fit must share one model), for rows of `n_features` columns.
fn explicit_model(spec: &Bound<'_, PyModelSpec>, n_features: usize) -> PyResult<AnyModel> {
    build_model(
        &spec.get().spec,
        Array2::<f64>::zeros((0, n_features)).view(),
    )
}

/// Statistics of the rows of `x` under `m`, checked, after readying `m` for them.
fn row_stats<M: ClusterModel>(
    m: &mut M,
    x: ArrayView2<'_, f64>,
) -> rosetree::Result<Vec<M::Stats>> {
    m.prepare(x.nrows() + 1);
    m.leaf_stats_all(x)
}

/// Statistics decoded from a Python array (copied: arrays that Dask sends between
/// processes may be views of a message's buffer, neither contiguous nor aligned).
fn decode<M: StatsCodec>(m: &M, stats: &PyReadonlyArray1<'_, f64>) -> rosetree::Result<M::Stats> {
    m.decode_stats(&stats.as_array().to_vec())
}

/// The encoded statistics of each node of `nodes` of `tree`, fitted to the rows of `x`
/// (leaf `i` is row `i`); without a tree, of all rows of `x` as one cluster.
#[pyfunction]
#[pyo3(signature = (x, model, tree, nodes))]
fn brt_node_stats<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    model: &Bound<'py, PyModelSpec>,
    tree: Option<&Bound<'py, PyRoseTree>>,
    nodes: Vec<usize>,
) -> PyResult<Vec<Bound<'py, PyArray1<f64>>>> {
    let x = x.as_array();
    let model = explicit_model(model, x.ncols())?;
    with_conjugate!(model, m => {
        let leaves = row_stats(&mut m, x)?;
        let groups: Vec<Vec<usize>> = match tree {
            None => vec![(0..leaves.len()).collect()],
            Some(tree) => {
                let tree = &tree.get().inner;
                if tree.n_leaves() != leaves.len() {
                    return Err(RoseTreeError::ShapeMismatch {
                        what: "tree".into(),
                        expected: format!("{} leaves (one per row)", leaves.len()),
                        found: format!("{} leaves", tree.n_leaves()),
                    }
                    .into());
                }
                let n_nodes = tree.nodes().len();
                if let Some(&v) = nodes.iter().find(|&&v| v >= n_nodes) {
                    return Err(RoseTreeError::param(
                        "nodes",
                        format!("node {v} is not in a tree of {n_nodes} nodes"),
                    )
                    .into());
                }
                nodes.iter().map(|&v| tree.leaves_of(v)).collect()
            }
        };
        if leaves.is_empty() {
            return Err(RoseTreeError::param("x", "a cluster needs at least one row").into());
        }
        Ok(groups
            .iter()
            .map(|rows| {
                let merged = rows[1..]
                    .iter()
                    .fold(leaves[rows[0]].clone(), |acc, &r| m.merge(&acc, &leaves[r]));
                m.encode_stats(&merged).into_pyarray(py)
            })
            .collect())
    })
}

/// `ln f(x | D_k) = ln f(D_k ∪ {x}) − ln f(D_k)`, the posterior predictive of each row `x` of
/// `x` under each cluster `k` with encoded statistics `stats[k]`: an `n_rows × K` array.
#[pyfunction]
fn brt_cluster_log_predictive<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    model: &Bound<'py, PyModelSpec>,
    stats: Vec<PyReadonlyArray1<'py, f64>>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let x = x.as_array();
    let model = explicit_model(model, x.ncols())?;
    with_conjugate!(model, m => {
        let clusters = stats
            .iter()
            .map(|s| decode(&m, s))
            .collect::<rosetree::Result<Vec<_>>>()?;
        let rows = row_stats(&mut m, x)?;
        let prepared = clusters
            .iter()
            .map(|c| Ok((m.query(c), m.log_marginal(c)?)))
            .collect::<rosetree::Result<Vec<_>>>()?;
        let mut out = Array2::zeros((rows.len(), clusters.len()));
        for (i, row) in rows.iter().enumerate() {
            for (k, (c, (q, log_f))) in clusters.iter().zip(&prepared).enumerate() {
                out[[i, k]] = m.log_predictive_query(q, c, *log_f, row)?;
            }
        }
        Ok(out.into_pyarray(py))
    })
}

/// The groups of a sample tree under which the approximate search sends rows
/// (`brt::top_clusters`), in increasing id order.
#[pyfunction]
fn brt_top_clusters(tree: &Bound<'_, PyRoseTree>) -> Vec<usize> {
    brt::top_clusters(&tree.get().inner)
}

/// A part as Python passes it: its tree (`None` for one row), the data row of each leaf, and
/// the encoded statistics of its rows.
type PyPart<'py> = (
    Option<Bound<'py, PyRoseTree>>,
    Vec<usize>,
    PyReadonlyArray1<'py, f64>,
);

/// The tree over rows `0..n_rows` joined from `parts` under the top nodes `top`, scored
/// exactly (`brt::stitch`), and the encoded statistics of the top nodes.
#[pyfunction]
#[pyo3(signature = (model, n_features, n_rows, parts, top, *, mixing, gamma, dp_alpha))]
#[allow(clippy::too_many_arguments)]
fn brt_stitch<'py>(
    py: Python<'py>,
    model: &Bound<'py, PyModelSpec>,
    n_features: usize,
    n_rows: usize,
    parts: Vec<PyPart<'py>>,
    top: Vec<Vec<usize>>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
) -> PyResult<(PyRoseTree, Vec<Bound<'py, PyArray1<f64>>>)> {
    let mixing = parse_mixing(mixing, gamma, dp_alpha)?;
    let model = explicit_model(model, n_features)?;
    with_conjugate!(model, m => {
        m.prepare(n_rows + 1);
        let parts = parts
            .into_iter()
            .map(|(tree, rows, stats)| {
                Ok(Part {
                    tree: tree.map(|t| brt::RoseTree::clone(&t.get().inner)),
                    rows,
                    stats: decode(&m, &stats)?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let stitched = brt::stitch(&m, &mixing, n_rows, &parts, &top)?;
        let top_stats = stitched
            .top_stats
            .iter()
            .map(|s| m.encode_stats(s).into_pyarray(py))
            .collect();
        Ok((PyRoseTree::from(stitched.tree), top_stats))
    })
}

/// Adds the functions of fitting in parts to the extension module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(brt_node_stats, m)?)?;
    m.add_function(wrap_pyfunction!(brt_cluster_log_predictive, m)?)?;
    m.add_function(wrap_pyfunction!(brt_top_clusters, m)?)?;
    m.add_function(wrap_pyfunction!(brt_stitch, m)?)?;
    Ok(())
}
