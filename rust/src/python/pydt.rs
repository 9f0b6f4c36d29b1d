//! The Pitman–Yor diffusion tree from Python: the density of a timed tree, its Gaussian
//! likelihood, and draws from the generative process.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use super::tree::PyTree;
use crate::pydt::{self, PydtParams};

/// `ln p(T, t)` of a diffusion tree (leaves at 1, divergence times in `(0, 1)`).
#[pyfunction]
#[pyo3(signature = (tree, *, alpha, beta, c))]
fn pydt_log_prior(tree: &Bound<'_, PyTree>, alpha: f64, beta: f64, c: f64) -> PyResult<f64> {
    let params = PydtParams::new(alpha, beta, c)?;
    Ok(pydt::log_prior(&tree.get().inner, &params)?)
}

/// `ln p(X | T, t)` under Brownian motion with variance `sigma2` per unit time from the
/// origin, internal locations integrated out.
#[pyfunction]
#[pyo3(signature = (x, tree, *, sigma2))]
fn pydt_log_likelihood(
    x: PyReadonlyArray2<'_, f64>,
    tree: &Bound<'_, PyTree>,
    sigma2: f64,
) -> PyResult<f64> {
    Ok(pydt::log_likelihood(
        x.as_array(),
        &tree.get().inner,
        sigma2,
    )?)
}

/// `(X, tree)`: `n` points in `d` dimensions and their tree, drawn from the seed.
#[pyfunction]
#[pyo3(signature = (n, d, *, alpha, beta, c, sigma2, seed))]
#[allow(clippy::too_many_arguments)]
fn sample_pydt<'py>(
    py: Python<'py>,
    n: usize,
    d: usize,
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
    seed: u64,
) -> PyResult<(Bound<'py, PyArray2<f64>>, PyTree)> {
    let params = PydtParams::new(alpha, beta, c)?;
    let (x, tree) = py.detach(|| pydt::sample(n, d, &params, sigma2, seed))?;
    Ok((x.into_pyarray(py), tree.into()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pydt_log_prior, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_log_likelihood, m)?)?;
    m.add_function(wrap_pyfunction!(sample_pydt, m)?)?;
    Ok(())
}
