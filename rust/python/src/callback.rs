//! A cluster model implemented in Python: `rosetree.ClusterModel` subclasses that define
//! `log_marginal(X)` plug into the same greedy search through this adapter.

use ndarray::{Array2, ArrayView1, Axis};
use numpy::IntoPyArray;
use pyo3::prelude::*;

use rosetree::error::{Result, RoseTreeError};
use rosetree::models::{ClusterModel, RowQueries};

/// Calls `object.log_marginal(X[rows])` for every cluster. The statistics of a cluster are
/// its sorted row indices; the data are copied once, so no NumPy memory is read while the
/// search runs detached.
pub(crate) struct CallbackModel {
    object: Py<PyAny>,
    data: Array2<f64>,
}

impl CallbackModel {
    pub(crate) fn new(object: Py<PyAny>, data: Array2<f64>) -> Self {
        Self { object, data }
    }

    /// The Python object, without the data.
    pub(crate) fn into_object(self) -> Py<PyAny> {
        self.object
    }
}

impl ClusterModel for CallbackModel {
    type Stats = Vec<u32>;

    fn n_features(&self) -> usize {
        self.data.ncols()
    }

    fn leaf_stats(&self, _row: ArrayView1<'_, f64>, index: usize) -> Result<Vec<u32>> {
        let index = u32::try_from(index).map_err(|_| RoseTreeError::param("X", "too many rows"))?;
        Ok(vec![index])
    }

    fn merge(&self, a: &Vec<u32>, b: &Vec<u32>) -> Vec<u32> {
        let mut rows = Vec::with_capacity(a.len() + b.len());
        rows.extend_from_slice(a);
        rows.extend_from_slice(b);
        rows.sort_unstable();
        rows
    }

    fn log_marginal(&self, rows: &Vec<u32>) -> Result<f64> {
        let indices: Vec<usize> = rows.iter().map(|&r| r as usize).collect();
        let cluster = self.data.select(Axis(0), &indices);
        Python::attach(|py| {
            // The model's own exception passes through unchanged; a value that is not a
            // real number is the model's fault, named as such.
            let returned = self
                .object
                .call_method1(py, "log_marginal", (cluster.into_pyarray(py),))
                .map_err(|e| RoseTreeError::Callback(Box::new(e)))?;
            let value = returned.extract::<f64>(py).map_err(|_| {
                let kind = returned
                    .bind(py)
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_string(), |n| n.to_string());
                RoseTreeError::param(
                    "model",
                    format!("log_marginal must return a real number, got a {kind}"),
                )
            })?;
            if value.is_nan() || value == f64::INFINITY {
                return Err(RoseTreeError::Numerical(format!(
                    "the cluster model's log_marginal returned {value} for a cluster of {} rows",
                    rows.len()
                )));
            }
            Ok(value)
        })
    }
}

impl RowQueries for CallbackModel {
    type Query = ();

    fn query(&self, _: &Vec<u32>) {}
}
