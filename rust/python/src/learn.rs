//! Hyperparameter learning: the gradient of `ln p(D | T)` (BRT eqs 1.27–1.28) and the
//! explicit hyperparameters of a model whose defaults depend on the data; learning them with
//! the tree (BRT §1.4.2) in one call.

use std::sync::Arc;

use ndarray::{Array2, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::PyResult;
use pyo3::types::PyDict;

use super::fit::{Explicit, PyBrtFit, TrainingData};
use super::models::{AnyModel, PyModelSpec, build_model, conjugate_families};
use super::tree::PyRoseTree;
use super::{PyBrtParams, Watch, parse_mixing, prepared_leaves, progress_line, run_watched};
use rosetree::brt::{
    self, BrtParams, Iteration, LearnParams, Learnable, Mixing, RoseTree, ValidLearnParams,
};
use rosetree::error::RoseTreeError;
use rosetree::models::{Differentiable, RowQueries};
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

/// The tree search of a learning run: the core's search with the options of `params`
/// under the learner's mixing rule, or a Python callable `fit_tree(family, hyperparameters,
/// value)` that returns a `rosetree._core.RoseTree` (called holding the interpreter, which
/// is free otherwise; `value` is `γ`, or the DP concentration).
fn search_tree<M: Learnable + RowQueries + Explicit>(
    m: &M,
    mixing: &Mixing,
    x: ArrayView2<'_, f64>,
    params: &ValidLearnParams,
    fit_tree: Option<&Py<PyAny>>,
    interrupt: &dyn Fn() -> bool,
) -> rosetree::Result<RoseTree> {
    let Some(fit_tree) = fit_tree else {
        let mut m = m.clone();
        // As the estimator's own fit readies its model (for prediction, one row more).
        m.prepare(x.nrows() + 1);
        let leaves = m.leaf_stats_all(x)?;
        let search = BrtParams {
            mixing: *mixing,
            ..params.search
        }
        .check()?;
        return brt::fit_stats(&m, &search, leaves, interrupt);
    };
    let callback = |e: PyErr| RoseTreeError::Callback(Box::new(e));
    Python::attach(|py| {
        let hyperparameters = m
            .explicit(py)
            .map_err(|e| RoseTreeError::Callback(Box::new(PyErr::from(e))))?;
        let returned = fit_tree
            .call1(py, (M::FAMILY, hyperparameters, mixing_value(mixing)))
            .map_err(callback)?;
        let tree = returned
            .extract::<PyRef<'_, PyRoseTree>>(py)
            .map_err(|_| RoseTreeError::param("fit_tree", "must return a rosetree.RoseTree"))?;
        Ok((*tree.inner).clone())
    })
}

/// `γ`, or the DP concentration.
fn mixing_value(mixing: &Mixing) -> f64 {
    match *mixing {
        Mixing::Brt { gamma } | Mixing::Gamma { gamma } => gamma,
        Mixing::Dp { alpha } => alpha,
    }
}

/// What [`learn_brt`] returns: the fit of the learnt model and tree, the learnt mixing
/// value, the trace and each start's final evidence.
type LearntFit = (PyBrtFit, f64, Vec<f64>, Vec<f64>);

fn learn_model<M: Learnable + RowQueries + Explicit + Send + 'static>(
    py: Python<'_>,
    m: M,
    x: Array2<f64>,
    params: ValidLearnParams,
    fit_tree: Option<Py<PyAny>>,
    verbose: bool,
    wrap: fn(M) -> AnyModel,
) -> PyResult<LearntFit> {
    let label = Watch::when(verbose, "rose tree");
    let (learned, x) = run_watched(py, label, move |interrupt| {
        let mut search = |model: &M, mixing: &Mixing| {
            search_tree(
                model,
                mixing,
                x.view(),
                &params,
                fit_tree.as_ref(),
                interrupt,
            )
        };
        let mut on_iteration = |it: Iteration| {
            if verbose {
                // Ctrl-C is the waiting thread's to see.
                let _ = progress_line(&format!(
                    "learning: start {}/{}, iteration {}: ln p(D|T) = {:.3}",
                    it.start + 1,
                    it.n_starts,
                    it.iteration + 1,
                    it.log_evidence
                ));
            }
        };
        let learned = brt::learn_with(
            &m,
            &params,
            x.view(),
            &mut search,
            interrupt,
            &mut on_iteration,
        )?;
        Ok((learned, x))
    })?;
    let value = mixing_value(&learned.mixing);
    let fit = PyBrtFit::new(
        wrap(learned.model),
        Arc::new(learned.tree),
        TrainingData::Dense(x),
    )?;
    Ok((fit, value, learned.trace, learned.start_log_evidences))
}

/// Learns the hyperparameters with the tree (BRT §1.4.2, [`brt::learn_with`]) from the
/// model of `model` for the rows of `x` and the mixing rule of `params`, whose search
/// options every tree search uses unless `fit_tree` is given (see [`search_tree`]).
/// Returns the fit of the learnt model and tree, the learnt `γ` (or DP concentration), the
/// trace of `ln p(D | T)` and each start's final value. With `verbose`, lines of the
/// searches' progress and one per iteration go to `sys.stderr`.
#[pyfunction]
#[pyo3(signature = (x, model, params, *, tie, n_restarts, max_iter, tol, seed, fit_tree=None,
                    verbose=false))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn learn_brt(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    model: &Bound<'_, PyModelSpec>,
    params: &Bound<'_, PyBrtParams>,
    tie: bool,
    n_restarts: usize,
    max_iter: usize,
    tol: f64,
    seed: u64,
    fit_tree: Option<Py<PyAny>>,
    verbose: bool,
) -> PyResult<LearntFit> {
    let learn = LearnParams {
        search: *params.get().params,
        tie,
        n_restarts,
        max_iter,
        tol,
        seed,
    }
    .check()?;
    let x = x.as_array().to_owned();
    let model = build_model(&model.get().spec, x.view())?;
    macro_rules! learn {
        ([] $($variant:ident: $t:ty = $name:literal;)*) => {
            match model {
                $(AnyModel::$variant(m) => {
                    learn_model(py, m, x, learn, fit_tree, verbose, AnyModel::$variant)
                })*
                AnyModel::Callback(_) => Err(not_differentiable()),
            }
        };
    }
    conjugate_families!(learn,)
}
