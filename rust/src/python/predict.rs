//! Prediction with a fitted tree (BRT §1.4.1): predictive scores and cluster
//! responsibilities of new rows (eq 1.25), eq 1.24 for filled-in training data, and
//! beta–Bernoulli missing-entry probabilities. Each call rebuilds the model and the training
//! rows' statistics from the data the estimator kept, then detaches.

use ndarray::{Array2, ArrayView2, Axis, concatenate};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::callback::CallbackModel;
use super::interrupted;
use super::models::{AnyModel, build_model, build_model_csr, with_model};
use super::tree::PyRoseTree;
use crate::brt::Predictor;
use crate::error::RoseTreeError;
use crate::models::ClusterModel;
use crate::parallel::Threads;

/// Training data as the estimator keeps it: a dense array, or a CSR matrix as
/// `(indptr, indices, data, n_cols)`.
#[derive(FromPyObject)]
enum Training<'py> {
    Dense(PyReadonlyArray2<'py, f64>),
    Csr(
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, f64>,
        usize,
    ),
}

impl Training<'_> {
    fn n_cols(&self) -> usize {
        match self {
            Self::Dense(x) => x.as_array().ncols(),
            Self::Csr(.., n_cols) => *n_cols,
        }
    }

    fn n_rows(&self) -> usize {
        match self {
            Self::Dense(x) => x.as_array().nrows(),
            Self::Csr(indptr, ..) => indptr.as_array().len().saturating_sub(1),
        }
    }

    /// The statistics of every training row, after readying `m` for `n_rows + 1` rows (a
    /// cluster and one more row).
    fn leaves<M: ClusterModel>(&self, m: &mut M) -> PyResult<Vec<M::Stats>> {
        m.prepare(self.n_rows() + 1);
        match self {
            Self::Dense(x) => Ok(m.leaf_stats_all(x.as_array())?),
            Self::Csr(indptr, indices, data, n_cols) => {
                let (indptr, indices, data) =
                    (indptr.as_slice()?, indices.as_slice()?, data.as_slice()?);
                let bad = || RoseTreeError::param("X", "malformed CSR matrix");
                if indptr.first() != Some(&0) || indices.len() != data.len() {
                    return Err(bad().into());
                }
                let mut out = Vec::with_capacity(self.n_rows());
                for (r, span) in indptr.windows(2).enumerate() {
                    let (lo, hi) = (usize::try_from(span[0]), usize::try_from(span[1]));
                    let (Ok(lo), Ok(hi)) = (lo, hi) else {
                        return Err(bad().into());
                    };
                    if lo > hi || hi > data.len() {
                        return Err(bad().into());
                    }
                    let cols: Vec<usize> = indices[lo..hi]
                        .iter()
                        .map(|&c| usize::try_from(c).ok().filter(|&c| c < *n_cols))
                        .collect::<Option<_>>()
                        .ok_or_else(bad)?;
                    out.push(m.leaf_stats_sparse(&cols, &data[lo..hi], r)?);
                }
                Ok(out)
            }
        }
    }
}

/// The model of `spec` for the training data, and the offset to add to the index of an
/// `extra` row to get its statistics. A Python model's statistics are row indices into its
/// own copy of the data, so `extra` rows are appended to that copy (offset `n_rows`); the
/// other models ignore the index except in error messages (offset 0).
fn model_for(
    spec: &Bound<'_, PyDict>,
    train: &Training<'_>,
    extra: ArrayView2<'_, f64>,
) -> PyResult<(AnyModel, usize)> {
    if extra.ncols() != train.n_cols() {
        return Err(RoseTreeError::ShapeMismatch {
            what: "X".into(),
            expected: format!("{} columns", train.n_cols()),
            found: format!("{} columns", extra.ncols()),
        }
        .into());
    }
    let model = match train {
        Training::Dense(x) => build_model(spec, x.as_array())?,
        Training::Csr(indptr, indices, data, n_cols) => build_model_csr(
            spec,
            indptr.as_slice()?,
            indices.as_slice()?,
            data.as_slice()?,
            *n_cols,
        )?,
    };
    match (model, train) {
        (AnyModel::Callback(_), Training::Dense(x)) => {
            let object = spec
                .get_item("object")?
                .ok_or_else(|| RoseTreeError::param("object", "missing from the model"))?;
            let data = concatenate![Axis(0), x.as_array(), extra];
            let model = CallbackModel::new(object.unbind(), data);
            Ok((AnyModel::Callback(model), train.n_rows()))
        }
        (AnyModel::Callback(_), Training::Csr(..)) => Err(RoseTreeError::param(
            "model",
            "a Python cluster model needs dense training data",
        )
        .into()),
        (model, _) => Ok((model, 0)),
    }
}

/// `ln p(x | D, T)` of eq 1.25 for every row of `x`, and with `responsibilities` the
/// `n_rows × n_nodes` posterior over the tree's clusters; with `clusters` (node ids of a flat
/// clustering), `ln Σ_c (n_c / n) f(x | D_c)` and the `n_rows × K` posterior over them.
#[pyfunction]
#[pyo3(signature = (train, model, tree, x, *, responsibilities=false, clusters=None, n_jobs=None))]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn brt_predict<'py>(
    py: Python<'py>,
    train: Training<'py>,
    model: &Bound<'py, PyDict>,
    tree: &Bound<'py, PyRoseTree>,
    x: PyReadonlyArray2<'py, f64>,
    responsibilities: bool,
    clusters: Option<Vec<usize>>,
    n_jobs: Option<usize>,
) -> PyResult<(Bound<'py, PyArray1<f64>>, Option<Bound<'py, PyArray2<f64>>>)> {
    let threads = Threads::new(n_jobs)?;
    let x = x.as_array();
    let tree = &tree.get().inner;
    let (model, offset) = model_for(model, &train, x)?;
    with_model!(model, m => {
        let leaves = train.leaves(&mut m)?;
        let rows = x
            .rows()
            .into_iter()
            .enumerate()
            .map(|(r, row)| m.leaf_stats(row, offset + r))
            .collect::<crate::Result<Vec<_>>>()?;
        let m = &m;
        let (log_p, resp) = py.detach(|| -> crate::Result<_> {
            let predictor = Predictor::new(m, tree, leaves)?;
            if let Some(clusters) = &clusters {
                let (log_p, resp) =
                    predictor.flat_responsibilities(clusters, &rows, &threads, &interrupted)?;
                Ok((log_p, Some(resp)))
            } else if responsibilities {
                let (log_p, resp) = predictor.responsibilities(&rows, &threads, &interrupted)?;
                Ok((log_p, Some(resp)))
            } else {
                Ok((predictor.log_predictive(&rows, &threads, &interrupted)?, None))
            }
        })?;
        Ok((log_p.into_pyarray(py), resp.map(|r| r.into_pyarray(py))))
    })
}

/// `ln p(D_full | T) − ln p(D_obs | T)` (eq 1.24), with training rows `rows` replaced by
/// the rows of `filled`.
#[pyfunction]
#[pyo3(signature = (train, model, tree, rows, filled, *, n_jobs=None))]
fn brt_log_predictive_missing<'py>(
    py: Python<'py>,
    train: Training<'py>,
    model: &Bound<'py, PyDict>,
    tree: &Bound<'py, PyRoseTree>,
    rows: Vec<usize>,
    filled: PyReadonlyArray2<'py, f64>,
    n_jobs: Option<usize>,
) -> PyResult<f64> {
    let threads = Threads::new(n_jobs)?;
    let filled = filled.as_array();
    if filled.nrows() != rows.len() {
        return Err(RoseTreeError::ShapeMismatch {
            what: "filled".into(),
            expected: format!("{} rows (one per row index)", rows.len()),
            found: format!("{} rows", filled.nrows()),
        }
        .into());
    }
    let tree = &tree.get().inner;
    let (model, offset) = model_for(model, &train, filled)?;
    with_model!(model, m => {
        let leaves = train.leaves(&mut m)?;
        let filled = rows
            .iter()
            .zip(filled.rows())
            .enumerate()
            .map(|(k, (&r, row))| {
                let index = if offset > 0 { offset + k } else { r };
                Ok((r, m.leaf_stats(row, index)?))
            })
            .collect::<crate::Result<Vec<_>>>()?;
        let m = &m;
        Ok(py.detach(|| {
            Predictor::new(m, tree, leaves)?
                .log_predictive_missing(&filled, &threads, &interrupted)
        })?)
    })
}

/// `(rows, columns, P(x_ij = 1 | D_obs, T))` of every missing training entry, row-major;
/// beta–Bernoulli models only.
#[pyfunction]
#[pyo3(signature = (train, model, tree, *, n_jobs=None))]
#[allow(clippy::type_complexity)]
fn brt_missing_probabilities<'py>(
    py: Python<'py>,
    train: Training<'py>,
    model: &Bound<'py, PyDict>,
    tree: &Bound<'py, PyRoseTree>,
    n_jobs: Option<usize>,
) -> PyResult<(
    Bound<'py, PyArray1<usize>>,
    Bound<'py, PyArray1<usize>>,
    Bound<'py, PyArray1<f64>>,
)> {
    let threads = Threads::new(n_jobs)?;
    let tree = &tree.get().inner;
    let empty = Array2::<f64>::zeros((0, train.n_cols()));
    let AnyModel::Bernoulli(mut m) = model_for(model, &train, empty.view())?.0 else {
        return Err(RoseTreeError::param(
            "model",
            "missing-entry probabilities need the beta-Bernoulli model",
        )
        .into());
    };
    let leaves = train.leaves(&mut m)?;
    let m = &m;
    let found = py.detach(|| {
        Predictor::new(m, tree, leaves)?.missing_probabilities(&threads, &interrupted)
    })?;
    let rows: Vec<usize> = found.iter().map(|e| e.row).collect();
    let cols: Vec<usize> = found.iter().map(|e| e.column).collect();
    let probs: Vec<f64> = found.iter().map(|e| e.p_one).collect();
    Ok((
        rows.into_pyarray(py),
        cols.into_pyarray(py),
        probs.into_pyarray(py),
    ))
}

/// Adds the prediction functions to the extension module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(brt_predict, m)?)?;
    m.add_function(wrap_pyfunction!(brt_log_predictive_missing, m)?)?;
    m.add_function(wrap_pyfunction!(brt_missing_probabilities, m)?)?;
    Ok(())
}
