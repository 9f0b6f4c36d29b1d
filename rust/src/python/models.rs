//! Cluster-model specifications from Python (typed values built by `rosetree.config`) and
//! the models they describe for given data.

use ndarray::ArrayView2;
use pyo3::prelude::*;

use crate::error::RoseTreeError;
use crate::models::{
    BetaBernoulli, ColumnMoments, DEFAULT_KAPPA0, DirichletMultinomial, NormalGamma,
    NormalInverseWishart,
};

/// The built-in conjugate families, listed once: the variant of [`AnyModel`] (and of a
/// fit's predictor), the Rust model type and the family's name. Calls `$callback!` with the
/// bracketed `$args` followed by the list; adding a family is one line here, its
/// specification constructor and its arms in [`build_model`] and `resolved_model`.
macro_rules! conjugate_families {
    ($callback:ident, $($args:tt)*) => {
        $callback! { [$($args)*]
            Bernoulli: $crate::models::BetaBernoulli = "bernoulli";
            Gaussian: $crate::models::NormalInverseWishart = "normal_inverse_wishart";
            Counts: $crate::models::DirichletMultinomial = "dirichlet_multinomial";
            NormalGamma: $crate::models::NormalGamma = "normal_gamma";
        }
    };
}
pub(crate) use conjugate_families;

macro_rules! any_model {
    ([] $($variant:ident: $model:ty = $name:literal;)*) => {
        /// The cluster models the bindings can build.
        pub(crate) enum AnyModel {
            $($variant($model),)*
            Callback(super::callback::CallbackModel),
        }
    };
}
conjugate_families!(any_model,);

macro_rules! with_model_arms {
    ([$model:expr, $m:ident, $body:expr] $($variant:ident: $t:ty = $name:literal;)*) => {
        match $model {
            $($crate::python::models::AnyModel::$variant(mut $m) => $body,)*
            $crate::python::models::AnyModel::Callback(mut $m) => $body,
        }
    };
}
pub(crate) use with_model_arms;

/// Runs `$body` with `$m` bound to the concrete model, so generic engine code is
/// monomorphised once per family (callers import `with_model_arms` too).
macro_rules! with_model {
    ($model:expr, $m:ident => $body:expr) => {
        $crate::python::models::conjugate_families!(with_model_arms, $model, $m, $body)
    };
}
pub(crate) use with_model;

/// A cluster model's hyperparameters as Python gives them (`None` where the model's
/// data-driven default applies). Built once by the `ModelSpec` constructors; the data it is
/// applied to resolves the defaults and checks the lengths ([`build_model`]).
#[derive(Debug)]
pub(crate) enum ModelSpec {
    BetaBernoulli {
        alpha: Option<Vec<f64>>,
        beta: Option<Vec<f64>>,
    },
    NormalInverseWishart {
        mu0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        nu0: Option<f64>,
        psi0: Option<Psi0>,
    },
    NormalGamma {
        m0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        a0: Option<f64>,
        b0: Option<Vec<f64>>,
    },
    DirichletMultinomial {
        alpha: Vec<f64>,
        coefficient: bool,
    },
    Callback(Py<PyAny>),
}

/// The scale matrix of a Normal–inverse-Wishart prior: a full matrix (row-major) or its
/// diagonal.
#[derive(Debug, Clone)]
pub(crate) enum Psi0 {
    Full(Vec<f64>),
    Diagonal(Vec<f64>),
}

/// A typed cluster-model specification crossing from Python: each `rosetree` model
/// configuration class builds one with the constructor of its family.
#[pyclass(frozen, module = "rosetree._core", name = "ModelSpec")]
pub(crate) struct PyModelSpec {
    pub(crate) spec: ModelSpec,
}

impl From<ModelSpec> for PyModelSpec {
    fn from(spec: ModelSpec) -> Self {
        Self { spec }
    }
}

#[pymethods]
impl PyModelSpec {
    /// Independent beta–Bernoulli features.
    #[staticmethod]
    #[pyo3(signature = (alpha=None, beta=None))]
    fn beta_bernoulli(alpha: Option<Vec<f64>>, beta: Option<Vec<f64>>) -> Self {
        ModelSpec::BetaBernoulli { alpha, beta }.into()
    }

    /// Gaussian clusters under a Normal–inverse-Wishart prior; `psi0` row-major, or
    /// `psi0_diagonal` for a diagonal scale.
    #[staticmethod]
    #[pyo3(signature = (mu0=None, kappa0=None, nu0=None, psi0=None, psi0_diagonal=None))]
    fn normal_inverse_wishart(
        mu0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        nu0: Option<f64>,
        psi0: Option<Vec<f64>>,
        psi0_diagonal: Option<Vec<f64>>,
    ) -> PyResult<Self> {
        let psi0 = match (psi0, psi0_diagonal) {
            (Some(_), Some(_)) => {
                return Err(RoseTreeError::param(
                    "psi0",
                    "give a full matrix or a diagonal, not both",
                )
                .into());
            }
            (Some(full), None) => Some(Psi0::Full(full)),
            (None, Some(diagonal)) => Some(Psi0::Diagonal(diagonal)),
            (None, None) => None,
        };
        Ok(ModelSpec::NormalInverseWishart {
            mu0,
            kappa0,
            nu0,
            psi0,
        }
        .into())
    }

    /// Independent Normal–Gamma features.
    #[staticmethod]
    #[pyo3(signature = (m0=None, kappa0=None, a0=None, b0=None))]
    fn normal_gamma(
        m0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        a0: Option<f64>,
        b0: Option<Vec<f64>>,
    ) -> Self {
        ModelSpec::NormalGamma { m0, kappa0, a0, b0 }.into()
    }

    /// Dirichlet–multinomial rows of counts.
    #[staticmethod]
    #[pyo3(signature = (alpha, multinomial_coefficient=false))]
    fn dirichlet_multinomial(alpha: Vec<f64>, multinomial_coefficient: bool) -> Self {
        ModelSpec::DirichletMultinomial {
            alpha,
            coefficient: multinomial_coefficient,
        }
        .into()
    }

    /// A model implemented in Python: `object.log_marginal(X)` for every cluster.
    #[staticmethod]
    fn callback(object: Py<PyAny>) -> Self {
        ModelSpec::Callback(object).into()
    }

    fn __repr__(&self) -> String {
        match &self.spec {
            ModelSpec::Callback(_) => "ModelSpec.callback(...)".into(),
            spec => format!("{spec:?}"),
        }
    }
}

/// Builds the model described by `spec` for data `x` (whose shape fixes the dimension, and
/// whose values give the data-driven defaults of the Normal–inverse-Wishart prior).
pub(crate) fn build_model(spec: &ModelSpec, x: ArrayView2<'_, f64>) -> PyResult<AnyModel> {
    let d = x.ncols();
    Ok(match spec {
        ModelSpec::BetaBernoulli { alpha, beta } => {
            bernoulli(alpha, beta, d, || ColumnMoments::dense(x))?
        }
        ModelSpec::DirichletMultinomial { alpha, coefficient } => {
            AnyModel::Counts(DirichletMultinomial::new(alpha, d, *coefficient)?)
        }
        ModelSpec::NormalInverseWishart {
            mu0,
            kappa0,
            nu0,
            psi0,
        } => {
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
            let model = match psi0 {
                None => match mu0 {
                    Some(mu0) => defaults()?.with_mu0(mu0.clone())?,
                    None => defaults()?,
                },
                Some(psi0) => {
                    let mu0 = match mu0 {
                        Some(mu0) => mu0.clone(),
                        None => defaults()?.mu0().to_vec(),
                    };
                    match psi0 {
                        Psi0::Diagonal(diag) => {
                            NormalInverseWishart::new_diagonal(mu0, kappa0, nu0, diag.clone())?
                        }
                        Psi0::Full(full) => {
                            NormalInverseWishart::new(mu0, kappa0, nu0, full.clone())?
                        }
                    }
                }
            };
            AnyModel::Gaussian(model)
        }
        ModelSpec::NormalGamma { m0, kappa0, a0, b0 } => {
            normal_gamma(m0, *kappa0, *a0, b0, d, || ColumnMoments::dense(x))?
        }
        ModelSpec::Callback(object) => AnyModel::Callback(super::callback::CallbackModel::new(
            Python::attach(|py| object.clone_ref(py)),
            x.to_owned(),
        )),
    })
}

/// The beta–Bernoulli model of `spec` for `d` features; `moments` (of the data) is computed
/// only when `alpha` or `beta` is left to its data-driven default.
fn bernoulli(
    alpha: &Option<Vec<f64>>,
    beta: &Option<Vec<f64>>,
    d: usize,
    moments: impl FnOnce() -> crate::Result<ColumnMoments>,
) -> PyResult<AnyModel> {
    let model = match (alpha, beta) {
        (Some(alpha), Some(beta)) => BetaBernoulli::new(alpha, beta, d)?,
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
    m0: &Option<Vec<f64>>,
    kappa0: Option<f64>,
    a0: Option<f64>,
    b0: &Option<Vec<f64>>,
    d: usize,
    moments: impl FnOnce() -> crate::Result<ColumnMoments>,
) -> PyResult<AnyModel> {
    let model = match (m0, b0) {
        (Some(m0), Some(b0)) => {
            let kappa0 = kappa0.unwrap_or(NormalGamma::DEFAULT_KAPPA0);
            NormalGamma::new(m0, kappa0, a0.unwrap_or(NormalGamma::DEFAULT_A0), b0, d)?
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
            NormalGamma::with_defaults(&moments, m0.clone(), kappa0, a0, b0.clone())?
        }
    };
    Ok(AnyModel::NormalGamma(model))
}

/// As [`build_model`] for data given as a CSR matrix with `n_cols` columns: the moments
/// behind data-driven defaults are read from the sparse entries, without a dense copy.
pub(crate) fn build_model_csr(
    spec: &ModelSpec,
    indptr: &[i64],
    indices: &[i64],
    data: &[f64],
    n_cols: usize,
) -> PyResult<AnyModel> {
    let moments = || ColumnMoments::csr(indptr, indices, data, n_cols);
    match spec {
        ModelSpec::BetaBernoulli { alpha, beta } => bernoulli(alpha, beta, n_cols, moments),
        ModelSpec::NormalGamma { m0, kappa0, a0, b0 } => {
            normal_gamma(m0, *kappa0, *a0, b0, n_cols, moments)
        }
        // The other models' defaults do not look at the data, only at its shape.
        spec => build_model(spec, ndarray::Array2::<f64>::zeros((0, n_cols)).view()),
    }
}
