//! Hyperparameter learning: the gradient of `ln p(D | T)` (BRT eqs 1.27–1.28) and the
//! explicit hyperparameters of a model whose defaults depend on the data.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::PyResult;
use pyo3::types::PyDict;

use super::models::{AnyModel, PyModelSpec, build_model, conjugate_families};
use super::{parse_mixing, prepared_leaves};
use rosetree::brt;
use rosetree::error::RoseTreeError;
use rosetree::models::Differentiable;
use rosetree::tree::Topology;

fn not_differentiable() -> crate::errors::Error {
    RoseTreeError::param(
        "model",
        "hyperparameter learning needs a built-in model (BetaBernoulli, NormalInverseWishart, \
         NormalGamma or DirichletMultinomial); a Python model has no gradient",
    )
    .into()
}

fn gradient_of<M: Differentiable>(
    py: Python<'_>,
    mut m: M,
    x: ndarray::ArrayView2<'_, f64>,
    mixing: &brt::Mixing,
    topology: &Topology,
) -> PyResult<brt::EvidenceGradient> {
    let leaves = prepared_leaves(&mut m, x)?;
    Ok(py.detach(|| brt::evidence_gradient(&m, mixing, topology, &leaves))?)
}

/// `(ln p(D | T), ∂/∂η, ∂/∂θ)` for the tree with internal child lists `internal`: the
/// model's hyperparameters η in the order of `resolved_model`'s `"hyperparameters"` and the
/// mixing parameter θ (`gamma`, or `dp_alpha` for the DP rule).
#[pyfunction]
#[pyo3(signature = (x, model, internal, *, mixing, gamma, dp_alpha))]
#[allow(clippy::type_complexity)]
pub(crate) fn evidence_gradient<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    model: &Bound<'py, PyModelSpec>,
    internal: Vec<Vec<usize>>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
) -> PyResult<(f64, Bound<'py, PyArray1<f64>>, f64)> {
    let mixing = parse_mixing(mixing, gamma, dp_alpha)?;
    let x = x.as_array();
    let topology = Topology::new(x.nrows(), internal)?;
    let model = build_model(&model.get().spec, x)?;
    macro_rules! gradient {
        ([] $($variant:ident: $t:ty = $name:literal;)*) => {
            match model {
                $(AnyModel::$variant(m) => gradient_of(py, m, x, &mixing, &topology)?,)*
                AnyModel::Callback(_) => return Err(not_differentiable()),
            }
        };
    }
    let g = conjugate_families!(gradient,);
    Ok((g.log_evidence, g.model.into_pyarray(py), g.mixing))
}

/// The model for data `x` with every default filled in, as a dict of its hyperparameters
/// (per feature where the model has them per feature), plus `"hyperparameters"`: the
/// vector the gradient refers to.
#[pyfunction]
pub(crate) fn resolved_model<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    model: &Bound<'py, PyModelSpec>,
) -> PyResult<Bound<'py, PyDict>> {
    let x = x.as_array();
    let out = PyDict::new(py);
    let eta = match build_model(&model.get().spec, x)? {
        AnyModel::Bernoulli(m) => {
            out.set_item("alpha", m.alpha().to_vec())?;
            out.set_item("beta", m.beta().to_vec())?;
            m.hyperparameters()
        }
        AnyModel::Gaussian(m) => {
            out.set_item("mu0", m.mu0().to_vec())?;
            out.set_item("kappa0", m.kappa0())?;
            out.set_item("nu0", m.nu0())?;
            out.set_item("psi0", m.psi0().to_vec())?;
            m.hyperparameters()
        }
        AnyModel::Counts(m) => {
            out.set_item("alpha", m.alpha().to_vec())?;
            m.hyperparameters()
        }
        AnyModel::NormalGamma(m) => {
            out.set_item("m0", m.m0().to_vec())?;
            out.set_item("kappa0", m.kappa0())?;
            out.set_item("a0", m.a0())?;
            out.set_item("b0", m.b0().to_vec())?;
            m.hyperparameters()
        }
        AnyModel::Callback(_) => return Err(not_differentiable()),
    };
    out.set_item("hyperparameters", eta)?;

    Ok(out)
}
