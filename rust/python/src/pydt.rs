//! The Pitman–Yor diffusion tree from Python: the density of a timed tree, its Gaussian
//! likelihood, draws from the generative process, the MCMC sampler (Gaussian or probit
//! likelihood) and expectation propagation for binary data on one tree.

use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::PyResult;

use super::tree::PyTree;
use super::{progress_line, run_interruptible};
use rosetree::error::RoseTreeError;
use rosetree::parallel::Threads;
use rosetree::pydt::mcmc::{
    self, BetaPrior, GammaPrior, Hyperpriors, Learn, Likelihood, McmcConfig, Start, SubtreeMove,
    insert,
};
use rosetree::pydt::predict::Predictor;
use rosetree::pydt::probit::{self, EpConfig};
use rosetree::pydt::{self, PydtParams};

/// `learn` as `(alpha, beta, c, sigma2)` flags.
pub(super) fn learn_flags(learn: (bool, bool, bool, bool)) -> Learn {
    Learn {
        alpha: learn.0,
        beta: learn.1,
        c: learn.2,
        sigma2: learn.3,
    }
}

/// `priors` as the shape and rate (or `a`, `b`) of the priors of `alpha`, `beta`, `c` and
/// `1/sigma2`, in that order.
pub(super) fn hyperpriors(priors: [f64; 8]) -> Hyperpriors {
    let gamma = |i: usize| GammaPrior {
        shape: priors[i],
        rate: priors[i + 1],
    };
    Hyperpriors {
        alpha: gamma(0),
        beta: BetaPrior {
            a: priors[2],
            b: priors[3],
        },
        c: gamma(4),
        precision: gamma(6),
    }
}

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

/// One kept state: `(tree, alpha, beta, c, sigma2, log_joint)`.
type PySample = (PyTree, f64, f64, f64, f64, f64);

fn py_sample(s: mcmc::Sample) -> PySample {
    let p = s.params;
    (
        s.tree.into(),
        p.alpha(),
        p.beta(),
        p.c(),
        s.sigma2,
        s.log_joint,
    )
}

/// Runs the MCMC sampler of `rosetree::pydt::mcmc` from `tree` (or a prior draw) and returns
/// `(samples, trace, last, proposals, accepted)`: the kept states, one trace row per sweep
/// `[log_joint, log_likelihood, alpha, beta, c, sigma2, acceptance]`, and the last state.
/// `learn` is `(alpha, beta, c, sigma2)`; `priors` the shape and rate (or `a`, `b`) of the
/// priors of `alpha`, `beta`, `c` and `1/sigma2`, in that order. With `verbose`, a line per
/// second of progress goes to Python's `sys.stderr`. Interruptible with Ctrl-C. `likelihood`
/// is `"gaussian"` (rows are locations) or `"probit"` (rows are binary, 0/1 with NaN missing;
/// `sigma2` is then fixed and the trace's log likelihood is that of the latent values,
/// `ln p(z | T, t)`). `subtree_move` is `"gibbs"` (the re-attachment move over every
/// position), `"prior"` (a position from the generative process, Metropolis–Hastings) or
/// `"auto"` (the first up to 250 rows, the second beyond).
#[pyfunction]
#[pyo3(signature = (x, tree, *, alpha, beta, c, sigma2, n_iter, burn_in, thin, learn, priors,
                    seed, verbose, likelihood="gaussian", subtree_move="auto"))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn pydt_mcmc<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    tree: Option<&Bound<'_, PyTree>>,
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
    n_iter: usize,
    burn_in: usize,
    thin: usize,
    learn: (bool, bool, bool, bool),
    priors: [f64; 8],
    seed: u64,
    verbose: bool,
    likelihood: &str,
    subtree_move: &str,
) -> PyResult<(
    Vec<PySample>,
    Bound<'py, PyArray2<f64>>,
    PySample,
    usize,
    usize,
)> {
    let params = PydtParams::new(alpha, beta, c)?;
    let likelihood: Likelihood = likelihood.parse()?;
    let subtree_move: SubtreeMove = subtree_move.parse()?;
    let x = x.as_array().to_owned();
    let init = tree.map(|t| t.get().inner.clone());
    let config = McmcConfig {
        n_iter,
        burn_in,
        thin,
        learn: learn_flags(learn),
        priors: hyperpriors(priors),
        likelihood,
        subtree_move,
    };
    let result = run_interruptible(py, move |interrupt| {
        let started = std::time::Instant::now();
        let mut shown = 0u64;
        let mut progress = |it: usize, row: &mcmc::TraceRow| {
            let secs = started.elapsed().as_secs();
            if verbose && (secs > shown || it + 1 == n_iter) {
                shown = secs;
                progress_line(&format!(
                    "pydt mcmc: sweep {}/{n_iter}, log joint {:.3}, acceptance {:.2}, \
                     alpha {:.3}, beta {:.3}, c {:.3}, sigma2 {:.4}",
                    it + 1,
                    row.log_joint,
                    row.acceptance,
                    row.alpha,
                    row.beta,
                    row.c,
                    row.sigma2
                ));
            }
        };
        let start = Start {
            tree: init.as_ref(),
            params,
            sigma2,
        };
        mcmc::run(x.view(), start, &config, seed, interrupt, &mut progress)
    })?;
    Ok((
        result.samples.into_iter().map(py_sample).collect(),
        trace_array(&result.trace).into_pyarray(py),
        py_sample(result.last),
        result.proposals,
        result.accepted,
    ))
}

/// One row per sweep: `[log_joint, log_likelihood, alpha, beta, c, sigma2, acceptance]`.
fn trace_array(trace: &[mcmc::TraceRow]) -> ndarray::Array2<f64> {
    ndarray::Array2::from_shape_fn((trace.len(), 7), |(i, j)| {
        let r = &trace[i];
        [
            r.log_joint,
            r.log_likelihood,
            r.alpha,
            r.beta,
            r.c,
            r.sigma2,
            r.acceptance,
        ][j]
    })
}

/// Adds the rows of `x_new` to `tree` (the tree of the rows of `x`) by
/// `rosetree::pydt::mcmc::insert::partial_fit`: each row a leaf at a position drawn from
/// its conditional posterior, then `n_iter` sweeps restricted to the new leaves' paths.
/// Returns `(trace, last, proposals, accepted)` as [`pydt_mcmc`] (no kept samples).
/// Interruptible with Ctrl-C.
#[pyfunction]
#[pyo3(signature = (x, x_new, tree, *, alpha, beta, c, sigma2, n_iter, learn, priors, seed,
                    likelihood="gaussian", subtree_move="auto"))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
fn pydt_partial_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    x_new: PyReadonlyArray2<'_, f64>,
    tree: &Bound<'_, PyTree>,
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
    n_iter: usize,
    learn: (bool, bool, bool, bool),
    priors: [f64; 8],
    seed: u64,
    likelihood: &str,
    subtree_move: &str,
) -> PyResult<(Bound<'py, PyArray2<f64>>, PySample, usize, usize)> {
    let params = PydtParams::new(alpha, beta, c)?;
    let config = McmcConfig {
        n_iter,
        burn_in: n_iter,
        thin: 1,
        learn: learn_flags(learn),
        priors: hyperpriors(priors),
        likelihood: likelihood.parse()?,
        subtree_move: subtree_move.parse()?,
    };
    let (x, x_new) = (x.as_array().to_owned(), x_new.as_array().to_owned());
    let tree = tree.get().inner.clone();
    let result = run_interruptible(py, move |interrupt| {
        let start = Start {
            tree: Some(&tree),
            params,
            sigma2,
        };
        insert::partial_fit(
            x.view(),
            x_new.view(),
            start,
            &config,
            seed,
            interrupt,
            &mut |_, _| {},
        )
    })?;
    Ok((
        trace_array(&result.trace).into_pyarray(py),
        py_sample(result.last),
        result.proposals,
        result.accepted,
    ))
}

/// Expectation propagation for binary `x` (0/1, NaN missing) on a fixed diffusion tree:
/// `(site_means, site_precisions, log_marginal)`, the Gaussian sites (pseudo-observations
/// with noise variance `1/site_precisions`; 0 where missing) and the approximation of
/// `ln p(x | tree)`. Raises when the sweeps have not converged within `max_iter`.
#[pyfunction]
#[pyo3(signature = (x, tree, *, sigma2=1.0, max_iter=200, tol=1e-10))]
#[allow(clippy::type_complexity)]
fn pydt_probit_ep<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    tree: &Bound<'_, PyTree>,
    sigma2: f64,
    max_iter: usize,
    tol: f64,
) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, f64)> {
    let x = x.as_array().to_owned();
    let tree = tree.get().inner.clone();
    let config = EpConfig { max_iter, tol };
    let ep = py.detach(|| probit::expectation_propagation(x.view(), &tree, sigma2, &config))?;
    if !ep.converged {
        return Err(RoseTreeError::Numerical(format!(
            "expectation propagation did not converge in max_iter = {max_iter} sweeps to tol \
             = {tol}"
        ))
        .into());
    }
    Ok((
        ep.site_means.into_pyarray(py),
        ep.site_precisions.into_pyarray(py),
        ep.log_marginal,
    ))
}

/// The predictive mixture of one diffusion tree (`rosetree::pydt::predict`), built once and
/// kept by the fitted estimator.
#[pyclass(frozen, module = "rosetree._core", name = "PydtPredictor")]
pub(crate) struct PyPydtPredictor {
    inner: Arc<Predictor>,
}

#[pymethods]
impl PyPydtPredictor {
    /// `(log_weights, means, variances, positions)`: the mixture's components, and where
    /// each component's point diverges (node, time).
    #[allow(clippy::type_complexity)]
    fn components<'py>(
        &self,
        py: Python<'py>,
    ) -> (
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray2<f64>>,
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray2<f64>>,
    ) {
        let p = &self.inner;
        let mut positions = ndarray::Array2::zeros((p.positions().len(), 2));
        for (i, &(u, t)) in p.positions().iter().enumerate() {
            positions[[i, 0]] = u as f64;
            positions[[i, 1]] = t;
        }
        (
            p.log_weights().to_vec().into_pyarray(py),
            p.means().to_owned().into_pyarray(py),
            p.variances().to_vec().into_pyarray(py),
            positions.into_pyarray(py),
        )
    }

    /// `ln p(y | X, T)` of every row of `x`, rows in parallel on `n_jobs` threads.
    #[pyo3(signature = (x, *, n_jobs = None))]
    fn log_density<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'_, f64>,
        n_jobs: Option<usize>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let threads = Threads::new(n_jobs)?;
        let x = x.as_array().to_owned();
        let predictor = Arc::clone(&self.inner);
        let out = run_interruptible(py, move |interrupt| {
            let rows: Vec<usize> = (0..x.nrows()).collect();
            threads.try_map_chunked(&rows, 256, interrupt, |&i| {
                predictor.log_density_row(x.row(i), i)
            })
        })?;
        Ok(out.into_pyarray(py))
    }
}

/// The predictive mixture of `tree` over the rows of `x` (§5.3), each branch's divergence
/// time represented by `n_points` times.
#[pyfunction]
#[pyo3(signature = (x, tree, *, alpha, beta, c, sigma2, n_points))]
fn pydt_predictor(
    x: PyReadonlyArray2<'_, f64>,
    tree: &Bound<'_, PyTree>,
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
    n_points: usize,
) -> PyResult<PyPydtPredictor> {
    let params = PydtParams::new(alpha, beta, c)?;
    let inner = Predictor::new(x.as_array(), &tree.get().inner, &params, sigma2, n_points)?;
    Ok(PyPydtPredictor {
        inner: Arc::new(inner),
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPydtPredictor>()?;
    m.add_function(wrap_pyfunction!(pydt_predictor, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_log_prior, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_log_likelihood, m)?)?;
    m.add_function(wrap_pyfunction!(sample_pydt, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_mcmc, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_partial_fit, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_probit_ep, m)?)?;
    Ok(())
}
