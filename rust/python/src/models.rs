//! Cluster-model specifications from Python (typed values built by `rosetree.config`) and
//! the models they describe for given data.

use ndarray::ArrayView2;
use pyo3::prelude::*;

use crate::errors::PyResult;

use rosetree::error::RoseTreeError;
use rosetree::models::{Conjugate, ModelSpec as CoreSpec, Psi0};

pub(crate) use rosetree::conjugate_families;

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
            $($crate::models::AnyModel::$variant(mut $m) => $body,)*
            $crate::models::AnyModel::Callback(mut $m) => $body,
        }
    };
}
pub(crate) use with_model_arms;

/// Runs `$body` with `$m` bound to the concrete model, so generic engine code is
/// monomorphised once per family (callers import `with_model_arms` too).
macro_rules! with_model {
    ($model:expr, $m:ident => $body:expr) => {
        $crate::models::conjugate_families!(with_model_arms, $model, $m, $body)
    };
}
pub(crate) use with_model;

/// A cluster model as Python gives it: a conjugate family's hyperparameters (`None` where
/// the model's data-driven default applies; the core's [`CoreSpec`]), or a model written in
/// Python. The data it is applied to resolves the defaults ([`build_model`]).
pub(crate) enum ModelSpec {
    Conjugate(CoreSpec),
    Callback(Py<PyAny>),
}

impl std::fmt::Debug for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Conjugate(spec) => spec.fmt(f),
            Self::Callback(_) => f.write_str("Callback(...)"),
        }
    }
}

impl From<CoreSpec> for PyModelSpec {
    fn from(spec: CoreSpec) -> Self {
        Self {
            spec: ModelSpec::Conjugate(spec),
        }
    }
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
        CoreSpec::BetaBernoulli { alpha, beta }.into()
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
        Ok(CoreSpec::NormalInverseWishart {
            mu0,
            kappa0,
            nu0,
            psi0,
        }
        .into())
    }

    /// Normal–Gamma features: independent, or with one precision shared by all of them.
    #[staticmethod]
    #[pyo3(signature = (m0=None, kappa0=None, a0=None, b0=None, shared_precision=false))]
    fn normal_gamma(
        m0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        a0: Option<f64>,
        b0: Option<Vec<f64>>,
        shared_precision: bool,
    ) -> Self {
        CoreSpec::NormalGamma {
            m0,
            kappa0,
            a0,
            b0,
            shared: shared_precision,
        }
        .into()
    }

    /// Dirichlet–multinomial rows of counts.
    #[staticmethod]
    #[pyo3(signature = (alpha, multinomial_coefficient=false))]
    fn dirichlet_multinomial(alpha: Vec<f64>, multinomial_coefficient: bool) -> Self {
        CoreSpec::DirichletMultinomial {
            alpha,
            coefficient: multinomial_coefficient,
        }
        .into()
    }

    /// A model implemented in Python: `object.log_marginal(X)` for every cluster.
    #[staticmethod]
    fn callback(object: Py<PyAny>) -> Self {
        Self {
            spec: ModelSpec::Callback(object),
        }
    }

    fn __repr__(&self) -> String {
        match &self.spec {
            ModelSpec::Callback(_) => "ModelSpec.callback(...)".into(),
            spec => format!("{spec:?}"),
        }
    }
}

impl From<Conjugate> for AnyModel {
    fn from(model: Conjugate) -> Self {
        macro_rules! arms {
            ([] $($variant:ident: $t:ty = $name:literal;)*) => {
                match model {
                    $(Conjugate::$variant(m) => Self::$variant(m),)*
                }
            };
        }
        conjugate_families!(arms,)
    }
}

/// Builds the model described by `spec` for data `x` (whose shape fixes the dimension, and
/// whose values give the data-driven defaults).
pub(crate) fn build_model(spec: &ModelSpec, x: ArrayView2<'_, f64>) -> PyResult<AnyModel> {
    Ok(match spec {
        ModelSpec::Conjugate(spec) => spec.build(x)?.into(),
        ModelSpec::Callback(object) => AnyModel::Callback(super::callback::CallbackModel::new(
            Python::attach(|py| object.clone_ref(py)),
            x.to_owned(),
        )),
    })
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
    match spec {
        ModelSpec::Conjugate(spec) => Ok(spec.build_csr(indptr, indices, data, n_cols)?.into()),
        ModelSpec::Callback(_) => Err(RoseTreeError::param(
            "model",
            "a Python cluster model needs dense training data",
        )
        .into()),
    }
}
