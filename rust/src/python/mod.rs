//! The `rosetree._core` extension module. Each function converts its arguments, computes
//! the leaf statistics while attached (NumPy memory is only read then), detaches for the
//! search, and converts the result back.

mod callback;
mod errors;
mod learn;
mod models;
mod predict;
mod tree;

use ndarray::ArrayView2;
use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::brt::{self, ApproxParams, BrtParams, MergeRule, Mixing, ValidBrtParams};
use crate::error::RoseTreeError;
use crate::models::ClusterModel;
use crate::tree::Topology;
use models::{build_model, with_model};
use tree::{PyRoseTree, PyTree};

pub(crate) fn parse_mixing(mixing: &str, gamma: f64, dp_alpha: f64) -> PyResult<Mixing> {
    let m = match mixing {
        "brt" => Mixing::Brt { gamma },
        "gamma" => Mixing::Gamma { gamma },
        "dp" => Mixing::Dp { alpha: dp_alpha },
        other => {
            return Err(RoseTreeError::param(
                "mixing",
                format!("must be \"brt\", \"gamma\" or \"dp\", got {other:?}"),
            )
            .into());
        }
    };
    m.check()?;
    Ok(m)
}

fn parse_merge_rule(rule: &str) -> PyResult<MergeRule> {
    match rule {
        "likelihood_ratio" => Ok(MergeRule::LikelihoodRatio),
        "posterior" => Ok(MergeRule::Posterior),
        other => Err(RoseTreeError::param(
            "merge_rule",
            format!("must be \"likelihood_ratio\" or \"posterior\", got {other:?}"),
        )
        .into()),
    }
}

/// The greedy search's options; `approx` is `(exact_below, sample, seed)` of the
/// approximate search, `None` for the exact one.
#[allow(clippy::too_many_arguments)]
fn search_params(
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
    binary: bool,
    merge_rule: &str,
    contract: bool,
    n_jobs: Option<usize>,
    approx: Option<(usize, usize, u64)>,
) -> PyResult<ValidBrtParams> {
    let approx = approx.map(|(exact_below, sample, seed)| ApproxParams {
        exact_below,
        sample,
        seed,
    });
    let params = BrtParams {
        mixing: parse_mixing(mixing, gamma, dp_alpha)?,
        binary,
        merge_rule: parse_merge_rule(merge_rule)?,
        contract,
        n_threads: n_jobs,
        approx,
    };
    Ok(params.check()?)
}

/// Readies `m` for the rows of `x` and returns their statistics.
fn prepared_leaves<M: ClusterModel>(
    m: &mut M,
    x: ArrayView2<'_, f64>,
) -> crate::Result<Vec<M::Stats>> {
    m.prepare(x.nrows());
    m.leaf_stats_all(x)
}

/// Polls Python's signal handlers (Ctrl-C) from a detached thread.
fn interrupted() -> bool {
    Python::attach(|py| py.check_signals().is_err())
}

/// Greedy Bayesian rose tree (or BHC with `binary`) of the rows of `x`.
#[pyfunction]
#[pyo3(signature = (x, model, *, mixing, gamma, dp_alpha, binary, contract, merge_rule="likelihood_ratio", n_jobs=None, approx=None))]
#[allow(clippy::too_many_arguments)]
fn fit_brt(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    model: &Bound<'_, PyDict>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
    binary: bool,
    contract: bool,
    merge_rule: &str,
    n_jobs: Option<usize>,
    approx: Option<(usize, usize, u64)>,
) -> PyResult<PyRoseTree> {
    let params = search_params(
        mixing, gamma, dp_alpha, binary, merge_rule, contract, n_jobs, approx,
    )?;
    let x = x.as_array();
    let model = build_model(model, x)?;
    with_model!(model, m => {
        let leaves = prepared_leaves(&mut m, x)?;
        let tree = py.detach(|| brt::fit_stats(&m, &params, leaves, &interrupted))?;
        Ok(tree.into())
    })
}

/// Greedy Bayesian rose tree of the rows of a CSR matrix (`indptr`, `indices`, `data`,
/// `n_cols` columns), whose leaf statistics are built without a dense copy of the data.
#[pyfunction]
#[pyo3(signature = (indptr, indices, data, n_cols, model, *, mixing, gamma, dp_alpha, binary, contract, merge_rule="likelihood_ratio", n_jobs=None, approx=None))]
#[allow(clippy::too_many_arguments)]
fn fit_brt_csr(
    py: Python<'_>,
    indptr: PyReadonlyArray1<'_, i64>,
    indices: PyReadonlyArray1<'_, i64>,
    data: PyReadonlyArray1<'_, f64>,
    n_cols: usize,
    model: &Bound<'_, PyDict>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
    binary: bool,
    contract: bool,
    merge_rule: &str,
    n_jobs: Option<usize>,
    approx: Option<(usize, usize, u64)>,
) -> PyResult<PyRoseTree> {
    let params = search_params(
        mixing, gamma, dp_alpha, binary, merge_rule, contract, n_jobs, approx,
    )?;
    let (indptr, indices, data) = (indptr.as_slice()?, indices.as_slice()?, data.as_slice()?);
    let n = indptr.len().saturating_sub(1);
    let bad = |what: &str| RoseTreeError::param("X", format!("malformed CSR matrix: {what}"));
    if indptr.first() != Some(&0) || indices.len() != data.len() {
        return Err(bad("indptr must start at 0 and indices match data in length").into());
    }
    let mut rows = Vec::with_capacity(n);
    for r in 0..n {
        let (lo, hi) = (indptr[r], indptr[r + 1]);
        if lo > hi || hi as usize > indices.len() {
            return Err(bad("indptr must be non-decreasing and within the data").into());
        }
        let cols: Vec<usize> = indices[lo as usize..hi as usize]
            .iter()
            .map(|&c| usize::try_from(c).ok().filter(|&c| c < n_cols))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("column index out of range"))?;
        rows.push((cols, lo as usize..hi as usize));
    }
    let model = models::build_model_csr(model, indptr, indices, data, n_cols)?;
    with_model!(model, m => {
        m.prepare(n);
        let leaves = rows
            .iter()
            .enumerate()
            .map(|(r, (cols, span))| m.leaf_stats_sparse(cols, &data[span.clone()], r))
            .collect::<crate::Result<Vec<_>>>()?;
        let tree = py.detach(|| brt::fit_stats(&m, &params, leaves, &interrupted))?;
        Ok(tree.into())
    })
}

/// `ln p(D | T)` and the per-node quantities of a given tree, described by the child lists
/// of its internal nodes (ids as in `rosetree.RoseTree`).
#[pyfunction]
#[pyo3(signature = (x, model, internal, *, mixing, gamma, dp_alpha))]
fn evaluate_tree(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    model: &Bound<'_, PyDict>,
    internal: Vec<Vec<usize>>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
) -> PyResult<PyRoseTree> {
    let mixing = parse_mixing(mixing, gamma, dp_alpha)?;
    let x = x.as_array();
    let topology = Topology::new(x.nrows(), internal)?;
    let model = build_model(model, x)?;
    with_model!(model, m => {
        let leaves = prepared_leaves(&mut m, x)?;
        let tree = py.detach(|| brt::evaluate(&m, &mixing, &topology, &leaves))?;
        Ok(tree.into())
    })
}

/// The maximum-likelihood rose tree by exhaustive search.
#[pyfunction]
#[pyo3(signature = (x, model, *, mixing, gamma, dp_alpha, binary))]
fn optimal_tree(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    model: &Bound<'_, PyDict>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
    binary: bool,
) -> PyResult<PyRoseTree> {
    let mixing = parse_mixing(mixing, gamma, dp_alpha)?;
    let x = x.as_array();
    let model = build_model(model, x)?;
    with_model!(model, m => {
        let leaves = prepared_leaves(&mut m, x)?;
        let tree = py.detach(|| brt::optimal_tree(&m, &mixing, binary, &leaves))?;
        Ok(tree.into())
    })
}

/// `ln f(D)` of all rows of `x` as one cluster.
#[pyfunction]
#[allow(unused_mut)] // `with_model!` binds the model mutably; this one is only read.
fn log_marginal(x: PyReadonlyArray2<'_, f64>, model: &Bound<'_, PyDict>) -> PyResult<f64> {
    let x = x.as_array();
    let model = build_model(model, x)?;
    with_model!(model, m => {
        // One evaluation: no tables of ln Γ (`prepare`), which would cost more than they
        // save, and the direct evaluation is the most accurate.
        let leaves = m.leaf_stats_all(x)?;
        let mut it = leaves.into_iter();
        let first = it.next().ok_or_else(|| RoseTreeError::param("X", "needs at least one row"))?;
        let all = it.fold(first, |acc, s| m.merge(&acc, &s));
        Ok(m.log_marginal(&all)?)
    })
}

/// The compiled core of rosetree.
#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRoseTree>()?;
    m.add_class::<PyTree>()?;
    m.add_function(wrap_pyfunction!(fit_brt, m)?)?;
    m.add_function(wrap_pyfunction!(fit_brt_csr, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate_tree, m)?)?;
    m.add_function(wrap_pyfunction!(optimal_tree, m)?)?;
    m.add_function(wrap_pyfunction!(log_marginal, m)?)?;
    m.add_function(wrap_pyfunction!(learn::evidence_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(learn::resolved_model, m)?)?;
    predict::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
