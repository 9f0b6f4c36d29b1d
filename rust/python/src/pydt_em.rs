//! Greedy Bayesian EM for the Pitman–Yor diffusion tree from Python.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::PyResult;

use super::pydt::{PriorsArg, PyPydtParams, PyPydtState, learn_flags, py_state};
use super::tree::PyTree;
use super::{Watch, progress_line, run_watched};
use rosetree::pydt::em::{self, EmConfig};
use rosetree::pydt::mcmc::Likelihood;

/// The options of the greedy EM search, checked once (`rosetree._core.PydtEmParams`;
/// [`EmConfig`]): at most `max_iter` passes keeping the `k_best` best distinct trees, the
/// hyperparameters to `learn` under `priors` (as for `PydtMcmcParams`), the `likelihood`
/// (`"gaussian"` or `"probit"`: binary rows, `NaN` for missing; EP in the E-step, `σ²`
/// fixed), and [`EmConfig::em_steps`] and [`EmConfig::n_candidates`].
#[pyclass(frozen, module = "rosetree._core", name = "PydtEmParams")]
pub(crate) struct PyPydtEmParams {
    config: EmConfig,
}

#[pymethods]
impl PyPydtEmParams {
    #[new]
    #[pyo3(signature = (*, max_iter, k_best=10, learn, priors, likelihood="gaussian", em_steps=10, n_candidates=3))]
    fn new(
        max_iter: usize,
        k_best: usize,
        learn: Vec<String>,
        priors: PriorsArg,
        likelihood: &str,
        em_steps: usize,
        n_candidates: usize,
    ) -> PyResult<Self> {
        Ok(Self {
            config: EmConfig {
                max_iter,
                k_best,
                learn: learn_flags(learn)?,
                priors: priors.into(),
                likelihood: likelihood.parse::<Likelihood>()?,
                em_steps,
                n_candidates,
                ..EmConfig::default()
            },
        })
    }

    fn __repr__(&self) -> String {
        format!("PydtEmParams({:?})", self.config)
    }
}

/// Runs the greedy Bayesian EM search of `rosetree::pydt::em` from `tree` (or a tree built by
/// sequential attachment) from the hyperparameters `params` with the options `search`, and
/// returns `(best, trace)`: the `k_best` best distinct trees, best first, as `PydtState`s
/// (`log_joint` is exactly `pydt_log_prior + pydt_log_likelihood`; under the probit
/// likelihood with EP's approximation of `ln p(x | T, t)`), and the objective after the
/// initial tree's EM and after each pass. With `verbose`, a line per pass goes to Python's
/// `sys.stderr`. Interruptible with Ctrl-C.
#[pyfunction]
#[pyo3(signature = (x, tree, params, search, *, seed, verbose=false))]
fn pydt_greedy_em<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    tree: Option<&Bound<'_, PyTree>>,
    params: &PyPydtParams,
    search: &PyPydtEmParams,
    seed: u64,
    verbose: bool,
) -> PyResult<(Vec<PyPydtState>, Bound<'py, PyArray1<f64>>)> {
    let (process, sigma2) = params.parts();
    let config = search.config;
    let max_iter = config.max_iter;
    let x = x.as_array().to_owned();
    let init = tree.map(|t| t.get().inner.clone());
    // With `verbose`, a line about once a second within passes (a pass over thousands of rows
    // takes minutes), and one at the end of each pass.
    let label = Watch::when(verbose, "pydt greedy EM");
    let result = run_watched(py, label, move |interrupt| {
        let mut progress = |pass: usize, row: &em::PassRow| {
            if verbose {
                progress_line(&format!(
                    "pydt greedy EM: pass {}/{max_iter}, objective {:.3}, log joint {:.3}, \
                     {} moves, alpha {:.3}, beta {:.3}, c {:.3}, sigma2 {:.4}",
                    pass + 1,
                    row.objective,
                    row.log_joint,
                    row.accepted,
                    row.params.alpha(),
                    row.params.beta(),
                    row.params.c(),
                    row.sigma2
                ));
            }
        };
        em::greedy_em(
            x.view(),
            init.as_ref(),
            process,
            sigma2,
            &config,
            seed,
            interrupt,
            &mut progress,
        )
    })?;
    let best = result
        .best
        .into_iter()
        .map(|b| py_state(py, b.tree, &b.params, b.sigma2, b.log_joint))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((best, result.trace.into_pyarray(py)))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPydtEmParams>()?;
    m.add_function(wrap_pyfunction!(pydt_greedy_em, m)?)?;
    Ok(())
}
