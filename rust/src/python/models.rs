//! Cluster-model specifications from Python (plain dicts built by `rosetree.config`).

use ndarray::ArrayView2;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::error::RoseTreeError;
use crate::models::{
    BetaBernoulli, ColumnMoments, DEFAULT_KAPPA0, DirichletMultinomial, NormalGamma,
    NormalInverseWishart,
};

/// The cluster models the bindings can build.
pub(crate) enum AnyModel {
    Bernoulli(BetaBernoulli),
    Gaussian(NormalInverseWishart),
    Counts(DirichletMultinomial),
    NormalGamma(NormalGamma),
    Callback(super::callback::CallbackModel),
}

/// Runs `$body` with `$m` bound to the concrete model, so generic engine code is
/// monomorphised once per family.
macro_rules! with_model {
    ($model:expr, $m:ident => $body:expr) => {
        match $model {
            $crate::python::models::AnyModel::Bernoulli(mut $m) => $body,
            $crate::python::models::AnyModel::Gaussian(mut $m) => $body,
            $crate::python::models::AnyModel::Counts(mut $m) => $body,
            $crate::python::models::AnyModel::NormalGamma(mut $m) => $body,
            $crate::python::models::AnyModel::Callback(mut $m) => $body,
        }
    };
}
pub(crate) use with_model;

fn get<'py, T: FromPyObjectOwned<'py>>(spec: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    match spec.get_item(key)? {
        Some(v) => v.extract().map_err(Into::into),
        None => Err(RoseTreeError::param(key, "missing from the model specification").into()),
    }
}

use pyo3::conversion::FromPyObjectOwned;

/// Builds the model described by `spec` for data `x` (whose shape fixes the dimension, and
/// whose values give the data-driven defaults of the Normal–inverse-Wishart prior).
pub(crate) fn build_model(spec: &Bound<'_, PyDict>, x: ArrayView2<'_, f64>) -> PyResult<AnyModel> {
    let d = x.ncols();
    let family: String = get(spec, "family")?;
    Ok(match family.as_str() {
        "bernoulli" => bernoulli(spec, d, || ColumnMoments::dense(x))?,
        "dirichlet_multinomial" => {
            let alpha: Vec<f64> = get(spec, "alpha")?;
            let coefficient: bool = get(spec, "multinomial_coefficient")?;
            AnyModel::Counts(DirichletMultinomial::new(&alpha, d, coefficient)?)
        }
        "normal_inverse_wishart" => {
            let mu0: Option<Vec<f64>> = get(spec, "mu0")?;
            let kappa0: Option<f64> = get(spec, "kappa0")?;
            let nu0: Option<f64> = get(spec, "nu0")?;
            let psi0: Option<Vec<f64>> = get(spec, "psi0")?;
            let psi0_diagonal: Option<Vec<f64>> = match spec.get_item("psi0_diagonal")? {
                Some(v) => v.extract()?,
                None => None,
            };
            let kappa0 = kappa0.unwrap_or(DEFAULT_KAPPA0);
            let nu0 = nu0.unwrap_or(d as f64 + 2.0);
            if let Some(mu0) = mu0.as_ref().filter(|m| m.len() != d) {
                return Err(RoseTreeError::param(
                    "mu0",
                    format!("expected {d} values (one per feature), got {}", mu0.len()),
                )
                .into());
            }
            // Only the data-driven parts of the default prior need the data.
            let defaults = || NormalInverseWishart::from_data(x, Some(kappa0), Some(nu0));
            let model = match (psi0, psi0_diagonal) {
                (None, None) => match mu0 {
                    Some(mu0) => defaults()?.with_mu0(mu0)?,
                    None => defaults()?,
                },
                (psi0, diagonal) => {
                    let mu0 = match mu0 {
                        Some(mu0) => mu0,
                        None => defaults()?.mu0().to_vec(),
                    };
                    match (psi0, diagonal) {
                        (_, Some(diag)) => {
                            NormalInverseWishart::new_diagonal(mu0, kappa0, nu0, diag)?
                        }
                        (psi0, None) => {
                            NormalInverseWishart::new(mu0, kappa0, nu0, psi0.unwrap_or_default())?
                        }
                    }
                }
            };
            AnyModel::Gaussian(model)
        }
        "normal_gamma" => normal_gamma(spec, d, || ColumnMoments::dense(x))?,
        "callback" => {
            let object: Py<PyAny> = get(spec, "object")?;
            AnyModel::Callback(super::callback::CallbackModel::new(object, x.to_owned()))
        }
        other => {
            return Err(
                RoseTreeError::param("model", format!("unknown model family {other:?}")).into(),
            );
        }
    })
}

/// The beta–Bernoulli model of `spec` for `d` features; `moments` (of the data) is computed
/// only when `alpha` or `beta` is left to its data-driven default.
fn bernoulli(
    spec: &Bound<'_, PyDict>,
    d: usize,
    moments: impl FnOnce() -> crate::Result<ColumnMoments>,
) -> PyResult<AnyModel> {
    let alpha: Option<Vec<f64>> = get(spec, "alpha")?;
    let beta: Option<Vec<f64>> = get(spec, "beta")?;
    let model = match (alpha, beta) {
        (Some(alpha), Some(beta)) => BetaBernoulli::new(&alpha, &beta, d)?,
        (alpha, beta) => {
            let moments = moments()?;
            if moments.count.len() != d {
                return Err(RoseTreeError::param("X", format!("expected {d} columns")).into());
            }
            BetaBernoulli::from_frequencies(&moments, alpha.as_deref(), beta.as_deref())?
        }
    };
    Ok(AnyModel::Bernoulli(model))
}

/// The Normal–Gamma model of `spec` for `d` features; `moments` (of the data) is computed
/// only when `m0` or `b0` is left to its data-driven default.
fn normal_gamma(
    spec: &Bound<'_, PyDict>,
    d: usize,
    moments: impl FnOnce() -> crate::Result<ColumnMoments>,
) -> PyResult<AnyModel> {
    let m0: Option<Vec<f64>> = get(spec, "m0")?;
    let kappa0: Option<f64> = get(spec, "kappa0")?;
    let a0: Option<f64> = get(spec, "a0")?;
    let b0: Option<Vec<f64>> = get(spec, "b0")?;
    let model = match (m0, b0) {
        (Some(m0), Some(b0)) => {
            let kappa0 = kappa0.unwrap_or(NormalGamma::DEFAULT_KAPPA0);
            NormalGamma::new(&m0, kappa0, a0.unwrap_or(NormalGamma::DEFAULT_A0), &b0, d)?
        }
        (m0, b0) => {
            let moments = moments()?;
            if !moments.count.is_empty() && moments.count.iter().all(|&c| c == 0) {
                return Err(RoseTreeError::param(
                    "X",
                    "needs observed values to derive the default Normal-Gamma prior (give m0 and b0)",
                )
                .into());
            }
            NormalGamma::with_defaults(&moments, m0, kappa0, a0, b0)?
        }
    };
    Ok(AnyModel::NormalGamma(model))
}

/// As [`build_model`] for data given as a CSR matrix with `n_cols` columns: the moments
/// behind data-driven defaults are read from the sparse entries, without a dense copy.
pub(crate) fn build_model_csr(
    spec: &Bound<'_, PyDict>,
    indptr: &[i64],
    indices: &[i64],
    data: &[f64],
    n_cols: usize,
) -> PyResult<AnyModel> {
    let family: String = get(spec, "family")?;
    if family == "bernoulli" {
        return bernoulli(spec, n_cols, || {
            ColumnMoments::csr(indptr, indices, data, n_cols)
        });
    }
    if family == "normal_gamma" {
        return normal_gamma(spec, n_cols, || {
            ColumnMoments::csr(indptr, indices, data, n_cols)
        });
    }
    // The other models' defaults do not look at the data, only at its shape.
    build_model(spec, ndarray::Array2::<f64>::zeros((0, n_cols)).view())
}
