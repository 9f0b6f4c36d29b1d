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
use rosetree::models::messages::MultinomialMutation;
use rosetree::parallel::Threads;
use rosetree::pydt::mcmc::{
    self, BetaPrior, GammaPrior, Hyperpriors, Learn, Likelihood, McmcConfig, Start, SubtreeMove,
    insert,
};
use rosetree::pydt::predict::{MessagePredictor, Predictor};
use rosetree::pydt::probit::{self, EpConfig};
use rosetree::pydt::summary;
use rosetree::pydt::{self, PydtParams};

/// The hyperparameters a chain or a search learns, by name: any of `"alpha"`, `"beta"`,
/// `"c"` and `"sigma2"`.
pub(super) fn learn_flags(names: Vec<String>) -> rosetree::Result<Learn> {
    let mut learn = Learn {
        alpha: false,
        beta: false,
        c: false,
        sigma2: false,
    };
    for name in names {
        match name.as_str() {
            "alpha" => learn.alpha = true,
            "beta" => learn.beta = true,
            "c" => learn.c = true,
            "sigma2" => learn.sigma2 = true,
            other => {
                return Err(RoseTreeError::param(
                    "learn",
                    format!("unknown hyperparameter {other:?}; available: alpha, beta, c, sigma2"),
                ));
            }
        }
    }
    Ok(learn)
}

/// The hyperpriors, read from a mapping of name to pair: `"alpha"`, `"c"` and `"precision"`
/// (of `1/sigma2`) to the shape and rate of a gamma prior, `"beta"` to `(a, b)` of a beta
/// prior.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(super) struct PriorsArg {
    alpha: (f64, f64),
    beta: (f64, f64),
    c: (f64, f64),
    precision: (f64, f64),
}

impl From<PriorsArg> for Hyperpriors {
    fn from(p: PriorsArg) -> Self {
        let gamma = |(shape, rate): (f64, f64)| GammaPrior { shape, rate };
        Hyperpriors {
            alpha: gamma(p.alpha),
            beta: BetaPrior {
                a: p.beta.0,
                b: p.beta.1,
            },
            c: gamma(p.c),
            precision: gamma(p.precision),
        }
    }
}

/// One state of a diffusion tree: the tree with its divergence times, the hyperparameters
/// and the log joint `ln p(X, T, t | α, β, c, σ²)`.
#[pyclass(frozen, get_all, module = "rosetree._core", name = "PydtState")]
pub(crate) struct PyPydtState {
    tree: Py<PyTree>,
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
    log_joint: f64,
}

/// A state of the core as a Python object.
pub(super) fn py_state(
    py: Python<'_>,
    tree: rosetree::Tree,
    params: &PydtParams,
    sigma2: f64,
    log_joint: f64,
) -> PyResult<PyPydtState> {
    Ok(PyPydtState {
        tree: Py::new(py, PyTree::from(tree))?,
        alpha: params.alpha(),
        beta: params.beta(),
        c: params.c(),
        sigma2,
        log_joint,
    })
}

#[pymethods]
impl PyPydtState {
    /// The same state with another log joint (the probit likelihood's fits rescore their
    /// states).
    fn with_log_joint(&self, py: Python<'_>, log_joint: f64) -> Self {
        Self {
            tree: self.tree.clone_ref(py),
            alpha: self.alpha,
            beta: self.beta,
            c: self.c,
            sigma2: self.sigma2,
            log_joint,
        }
    }
}

/// The hyperparameters of a diffusion tree, checked once (`rosetree._core.PydtParams`): the
/// Pitman–Yor `α`, `β` and divergence `c` ([`PydtParams`]) and the Brownian variance `σ²`
/// per unit time.
#[pyclass(frozen, get_all, module = "rosetree._core", name = "PydtParams")]
pub(crate) struct PyPydtParams {
    alpha: f64,
    beta: f64,
    c: f64,
    sigma2: f64,
}

impl PyPydtParams {
    /// The core's process parameters (checked when `self` was made).
    fn process(&self) -> PydtParams {
        PydtParams::new(self.alpha, self.beta, self.c).expect("checked at construction")
    }

    /// The process parameters and `σ²`.
    pub(super) fn parts(&self) -> (PydtParams, f64) {
        (self.process(), self.sigma2)
    }
}

#[pymethods]
impl PyPydtParams {
    #[new]
    #[pyo3(signature = (*, alpha, beta, c, sigma2=1.0))]
    fn new(alpha: f64, beta: f64, c: f64, sigma2: f64) -> PyResult<Self> {
        PydtParams::new(alpha, beta, c)?;
        pydt::check_sigma2(sigma2)?;
        Ok(Self {
            alpha,
            beta,
            c,
            sigma2,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "PydtParams(alpha={}, beta={}, c={}, sigma2={})",
            self.alpha, self.beta, self.c, self.sigma2
        )
    }
}

/// The options of a Markov chain, checked once (`rosetree._core.PydtMcmcParams`;
/// [`McmcConfig`]): `n_iter` sweeps of which the first `burn_in` are dropped and every
/// `thin`-th kept, the hyperparameters to `learn` ([`learn_flags`]) under `priors`
/// ([`PriorsArg`]), the `likelihood` (`"gaussian"`: rows are locations; `"probit"`: rows
/// are binary, 0/1 with NaN missing, `σ²` fixed; `"multinomial"`: rows are categories,
/// mutating at the fixed rate `σ²`) and the `subtree_move` (`"gibbs"`,
/// `"prior"` or `"auto"`).
#[pyclass(frozen, module = "rosetree._core", name = "PydtMcmcParams")]
pub(crate) struct PyPydtMcmcParams {
    config: McmcConfig,
    /// `likelihood="multinomial"`: the message chain of multinomial mutation.
    multinomial: bool,
}

#[pymethods]
impl PyPydtMcmcParams {
    #[new]
    #[pyo3(signature = (*, n_iter, burn_in, thin=1, learn, priors, likelihood="gaussian", subtree_move="auto"))]
    fn new(
        n_iter: usize,
        burn_in: usize,
        thin: usize,
        learn: Vec<String>,
        priors: PriorsArg,
        likelihood: &str,
        subtree_move: &str,
    ) -> PyResult<Self> {
        let (likelihood, multinomial) = chain_likelihood(likelihood)?;
        Ok(Self {
            config: McmcConfig {
                n_iter,
                burn_in,
                thin,
                learn: learn_flags(learn)?,
                priors: priors.into(),
                likelihood,
                subtree_move: subtree_move.parse::<SubtreeMove>()?,
            },
            multinomial,
        })
    }

    fn __repr__(&self) -> String {
        format!("PydtMcmcParams({:?})", self.config)
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

/// The tree of the mean divergence times of `samples` (`rosetree::pydt::summary`): average
/// linkage on one minus each pair's parting time, averaged over the samples.
#[pyfunction]
fn pydt_mean_tree(py: Python<'_>, samples: Vec<PyRef<'_, PyTree>>) -> PyResult<PyTree> {
    let trees: Vec<&rosetree::tree::Tree> = samples.iter().map(|s| &*s.inner).collect();
    let summary = py.detach(|| summary::mean_divergence_tree(&trees))?;
    Ok(summary.into())
}

/// `(X, tree)`: `n` points in `d` dimensions and their tree, drawn from the seed.
#[pyfunction]
#[pyo3(signature = (n, d, params, *, seed))]
fn sample_pydt<'py>(
    py: Python<'py>,
    n: usize,
    d: usize,
    params: &PyPydtParams,
    seed: u64,
) -> PyResult<(Bound<'py, PyArray2<f64>>, PyTree)> {
    let (process, sigma2) = params.parts();
    let (x, tree) = py.detach(|| pydt::sample(n, d, &process, sigma2, seed))?;
    Ok((x.into_pyarray(py), tree.into()))
}

fn py_sample(py: Python<'_>, s: mcmc::Sample) -> PyResult<PyPydtState> {
    py_state(py, s.tree, &s.params, s.sigma2, s.log_joint)
}

/// Runs the MCMC sampler of `rosetree::pydt::mcmc` from `tree` (or a prior draw) with the
/// hyperparameters `params` and the chain's options `chain`, and returns
/// `(samples, trace, last, proposals, accepted)`: the kept states, one trace row per sweep
/// `[log_joint, log_likelihood, alpha, beta, c, sigma2, acceptance]`, and the last state.
/// Under the probit likelihood the trace's log likelihood is that of the latent values,
/// `ln p(z | T, t)`. With `verbose`, a line per second of progress goes to Python's
/// `sys.stderr`. Interruptible with Ctrl-C.
#[pyfunction]
#[pyo3(signature = (x, tree, params, chain, *, seed, verbose=false))]
#[allow(clippy::type_complexity)]
fn pydt_mcmc<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    tree: Option<&Bound<'_, PyTree>>,
    params: &PyPydtParams,
    chain: &PyPydtMcmcParams,
    seed: u64,
    verbose: bool,
) -> PyResult<(
    Vec<PyPydtState>,
    Bound<'py, PyArray2<f64>>,
    PyPydtState,
    usize,
    usize,
)> {
    let (process, sigma2) = params.parts();
    let config = chain.config;
    let multinomial = chain.multinomial;
    let n_iter = config.n_iter;
    let x = x.as_array().to_owned();
    let mutation = if multinomial {
        Some(mutation_model(x.view(), sigma2)?)
    } else {
        None
    };
    let init = tree.map(|t| t.get().inner.clone());
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
        match mutation {
            Some(model) => mcmc::run_model(
                model,
                x.view(),
                init.as_ref(),
                process,
                &config,
                seed,
                interrupt,
                &mut progress,
            )
            .map(|result| with_rate(result, sigma2)),
            None => {
                let start = Start {
                    tree: init.as_ref(),
                    params: process,
                    sigma2,
                };
                mcmc::run(x.view(), start, &config, seed, interrupt, &mut progress)
            }
        }
    })?;
    Ok((
        result
            .samples
            .into_iter()
            .map(|s| py_sample(py, s))
            .collect::<PyResult<_>>()?,
        trace_array(&result.trace).into_pyarray(py),
        py_sample(py, result.last)?,
        result.proposals,
        result.accepted,
    ))
}

/// The chain's likelihood named by `likelihood`: `"gaussian"`, `"probit"` or
/// `"multinomial"` (the message chain of multinomial mutation: `(Gaussian, true)`).
fn chain_likelihood(likelihood: &str) -> rosetree::Result<(Likelihood, bool)> {
    match likelihood {
        "multinomial" => Ok((Likelihood::Gaussian, true)),
        "gaussian" | "probit" => Ok((likelihood.parse()?, false)),
        other => Err(RoseTreeError::param(
            "likelihood",
            format!("must be 'gaussian', 'probit' or 'multinomial', got {other:?}"),
        )),
    }
}

/// Multinomial mutation for the categories of `x` (whole numbers `0, 1, …`, NaN missing),
/// as the coalescent's bindings build it: `K_d` states per column, the equilibrium the
/// smoothed frequencies of the codes, every feature mutating at `rate` per unit time.
fn mutation_model(
    x: ndarray::ArrayView2<'_, f64>,
    rate: f64,
) -> rosetree::Result<MultinomialMutation> {
    let k = super::coalescent::n_states(x)?;
    MultinomialMutation::from_data(x, &k, &[rate]).map_err(|e| match e {
        RoseTreeError::InvalidParameter { name, reason } if name == "rates" => {
            RoseTreeError::param("sigma2", reason)
        }
        other => other,
    })
}

/// A message chain's result with the mutation rate in place of its states' and rows'
/// `sigma2` (`NaN` in the core: the rate is the model's, fixed).
fn with_rate(mut result: mcmc::McmcResult, rate: f64) -> mcmc::McmcResult {
    for s in result
        .samples
        .iter_mut()
        .chain(std::iter::once(&mut result.last))
    {
        s.sigma2 = rate;
    }
    for row in &mut result.trace {
        row.sigma2 = rate;
    }
    result
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
/// its conditional posterior, then `chain`'s `n_iter` sweeps restricted to the new leaves'
/// paths (none are kept: its `burn_in` and `thin` are not read). Returns
/// `(trace, last, proposals, accepted)` as [`pydt_mcmc`]. Interruptible with Ctrl-C.
#[pyfunction]
#[pyo3(signature = (x, x_new, tree, params, chain, *, seed))]
#[allow(clippy::type_complexity)]
fn pydt_partial_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'_, f64>,
    x_new: PyReadonlyArray2<'_, f64>,
    tree: &Bound<'_, PyTree>,
    params: &PyPydtParams,
    chain: &PyPydtMcmcParams,
    seed: u64,
) -> PyResult<(Bound<'py, PyArray2<f64>>, PyPydtState, usize, usize)> {
    let (process, sigma2) = params.parts();
    let config = McmcConfig {
        burn_in: chain.config.n_iter,
        thin: 1,
        ..chain.config
    };
    let (x, x_new) = (x.as_array().to_owned(), x_new.as_array().to_owned());
    let tree = tree.get().inner.clone();
    let result = run_interruptible(py, move |interrupt| {
        let start = Start {
            tree: Some(&tree),
            params: process,
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
        py_sample(py, result.last)?,
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
    inner: Arc<AnyPredictor>,
}

/// The predictive mixture of the Gaussian likelihood or of multinomial mutation.
enum AnyPredictor {
    Gaussian(Predictor),
    Multinomial(MessagePredictor<MultinomialMutation>),
}

impl AnyPredictor {
    fn log_density_row(
        &self,
        y: ndarray::ArrayView1<'_, f64>,
        index: usize,
    ) -> rosetree::Result<f64> {
        match self {
            Self::Gaussian(p) => p.log_density_row(y, index),
            Self::Multinomial(p) => p.log_density_row(y, index),
        }
    }
}

#[pymethods]
impl PyPydtPredictor {
    /// `(log_weights, means, variances, positions)`: the mixture's components, and where
    /// each component's point diverges (node, time).
    #[allow(clippy::type_complexity)]
    fn components<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray2<f64>>,
        Bound<'py, PyArray1<f64>>,
        Bound<'py, PyArray2<f64>>,
    )> {
        let AnyPredictor::Gaussian(p) = &*self.inner else {
            return Err(RoseTreeError::param(
                "likelihood",
                "the mixture's Gaussian components belong to the Gaussian likelihood",
            )
            .into());
        };
        let mut positions = ndarray::Array2::zeros((p.positions().len(), 2));
        for (i, &(u, t)) in p.positions().iter().enumerate() {
            positions[[i, 0]] = u as f64;
            positions[[i, 1]] = t;
        }
        Ok((
            p.log_weights().to_vec().into_pyarray(py),
            p.means().to_owned().into_pyarray(py),
            p.variances().to_vec().into_pyarray(py),
            positions.into_pyarray(py),
        ))
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

/// The predictive mixture of `tree` over the rows of `x` (§5.3) under `params`, each
/// branch's divergence time represented by `n_points` times: Gaussian (`sigma2` the
/// variance per unit time), or with `likelihood="multinomial"` multinomial mutation of the
/// categories of `x` at rate `sigma2` (the model of [`pydt_mcmc`]).
#[pyfunction]
#[pyo3(signature = (x, tree, params, *, n_points, likelihood="gaussian"))]
fn pydt_predictor(
    x: PyReadonlyArray2<'_, f64>,
    tree: &Bound<'_, PyTree>,
    params: &PyPydtParams,
    n_points: usize,
    likelihood: &str,
) -> PyResult<PyPydtPredictor> {
    let (process, sigma2) = params.parts();
    let (x, tree) = (x.as_array(), &tree.get().inner);
    let inner = match chain_likelihood(likelihood)? {
        (_, true) => AnyPredictor::Multinomial(MessagePredictor::new(
            mutation_model(x, sigma2)?,
            x,
            tree,
            &process,
            n_points,
        )?),
        (Likelihood::Gaussian, false) => {
            AnyPredictor::Gaussian(Predictor::new(x, tree, &process, sigma2, n_points)?)
        }
        (Likelihood::Probit, false) => {
            return Err(RoseTreeError::param(
                "likelihood",
                "binary rows have no predictive density under the probit likelihood",
            )
            .into());
        }
    };
    Ok(PyPydtPredictor {
        inner: Arc::new(inner),
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPydtPredictor>()?;
    m.add_class::<PyPydtState>()?;
    m.add_class::<PyPydtParams>()?;
    m.add_class::<PyPydtMcmcParams>()?;
    m.add_function(wrap_pyfunction!(pydt_predictor, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_log_prior, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_log_likelihood, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_mean_tree, m)?)?;
    m.add("PYDT_MEAN_SUMMARY_MAX_ROWS", summary::MAX_ROWS)?;
    m.add_function(wrap_pyfunction!(sample_pydt, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_mcmc, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_partial_fit, m)?)?;
    m.add_function(wrap_pyfunction!(pydt_probit_ep, m)?)?;
    Ok(())
}
