//! Kingman's coalescent from Python: the message model named by `likelihood` and `Lambda`,
//! the greedy searches on a worker thread (Ctrl-C works), and `ln p(x, π)` of a given
//! timed tree.

use ndarray::{ArrayView2, Ix1, Ix2};
use std::sync::Arc;

use ndarray::{Array2, Array3};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArray3, PyArrayDyn, PyReadonlyArray2, PyReadonlyArrayDyn,
};
use pyo3::prelude::*;

use crate::errors::PyResult;

use super::tree::PyTree;
use super::{Watch, progress_line, run_interruptible, run_watched};
use rosetree::coalescent::learn::{
    Lambda, LambdaPrior, LearnOptions, LearnableRate, SearchResult, learn,
};
use rosetree::coalescent::predict::Predictor;
use rosetree::coalescent::smc::{self, DurationPosterior, Proposal, SmcParams};
use rosetree::coalescent::stitch::{Part, PartSummary, part_evidence, part_summary, stitch};
use rosetree::coalescent::{self, ApproxParams, CoalescentParams, Inference, Router};
use rosetree::error::{Result, RoseTreeError};
use rosetree::models::messages::{
    BrownianDiffusion, MaskedBrownian, MessageCodec, MessageModel, MultinomialMutation, Root,
    subtree_log_evidence_from_leaves,
};
use rosetree::parallel::Threads;
use rosetree::tree::Tree;
use std::time::{Duration, Instant};

/// The message models the bindings can build.
#[derive(Clone)]
enum AnyMessageModel {
    Brownian(BrownianDiffusion),
    /// Brownian diffusion for data with missing (NaN) entries.
    Masked(MaskedBrownian),
    Mutation(MultinomialMutation),
}

/// Evaluates `$body` with `$m` bound to the concrete model of an [`AnyMessageModel`].
macro_rules! with_model {
    ($model:expr, $m:ident => $body:expr) => {
        match $model {
            AnyMessageModel::Brownian($m) => $body,
            AnyMessageModel::Masked($m) => $body,
            AnyMessageModel::Mutation($m) => $body,
        }
    };
}

/// The core's name for `Λ` (and the mutation rates) is `lambda`; Python's is `Lambda`.
fn as_lambda(err: RoseTreeError) -> RoseTreeError {
    match err {
        RoseTreeError::InvalidParameter { name, reason } if name == "lambda" || name == "rates" => {
            RoseTreeError::param("Lambda", reason)
        }
        other => other,
    }
}

/// `K_d = max(2, 1 + the largest code in column d)`, checking that every entry is NaN or a
/// whole number `≥ 0`.
pub(crate) fn n_states(x: ArrayView2<'_, f64>) -> Result<Vec<usize>> {
    let mut k = vec![2usize; x.ncols()];
    for (i, row) in x.rows().into_iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            if v.is_nan() {
                continue;
            }
            if !(v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < 1e6) {
                return Err(RoseTreeError::data(
                    i,
                    Some(c),
                    format!(
                        "value {v} is not a category: the multinomial likelihood needs whole \
                         numbers 0, 1, 2, … (NaN for missing)"
                    ),
                ));
            }
            k[c] = k[c].max(v as usize + 1);
        }
    }
    Ok(k)
}

fn build_model(
    likelihood: &str,
    lambda: &PyReadonlyArrayDyn<'_, f64>,
    root: Option<f64>,
    noise: f64,
    x: ArrayView2<'_, f64>,
) -> Result<AnyMessageModel> {
    let d = x.ncols();
    let lambda = lambda.as_array();
    match likelihood {
        "brownian" => brownian_model(lambda, root, noise, d, x.iter().any(|v| v.is_nan())),
        "multinomial" => {
            check_multinomial(noise, root)?;
            let rates = rates_of(lambda, d)?;
            let k = n_states(x)?;
            Ok(AnyMessageModel::Mutation(
                MultinomialMutation::from_data(x, &k, &rates).map_err(as_lambda)?,
            ))
        }
        other => Err(unknown_likelihood(other)),
    }
}

fn unknown_likelihood(other: &str) -> RoseTreeError {
    RoseTreeError::param(
        "likelihood",
        format!("must be \"brownian\" or \"multinomial\", got {other:?}"),
    )
}

fn wrong_lambda_shape(allowed: &str, d: usize, shape: &[usize]) -> RoseTreeError {
    RoseTreeError::param(
        "Lambda",
        format!("must be {allowed} for {d} features, got shape {shape:?}"),
    )
}

/// The multinomial's rates from `Lambda` (one, or one per feature).
fn rates_of(lambda: ndarray::ArrayViewD<'_, f64>, d: usize) -> Result<Vec<f64>> {
    match lambda.ndim() {
        0 | 1 => Ok(lambda.iter().copied().collect()),
        _ => Err(wrong_lambda_shape(
            "a scalar or (d,) rates",
            d,
            lambda.shape(),
        )),
    }
}

/// What the multinomial likelihood does not have: observation noise and a root other than
/// its equilibrium.
fn check_multinomial(noise: f64, root: Option<f64>) -> Result<()> {
    if noise != 0.0 {
        return Err(RoseTreeError::param(
            "noise",
            "observation noise is a parameter of the Brownian likelihood only",
        ));
    }
    if root.is_some() {
        return Err(RoseTreeError::param(
            "root",
            "the multinomial likelihood's root is its equilibrium: use root=\"flat\"",
        ));
    }
    Ok(())
}

/// Brownian diffusion in `d` dimensions; `masked` for data with missing entries.
fn brownian_model(
    lambda: ndarray::ArrayViewD<'_, f64>,
    root: Option<f64>,
    noise: f64,
    d: usize,
    masked: bool,
) -> Result<AnyMessageModel> {
    let shape = lambda.shape().to_vec();
    let model = match lambda.ndim() {
        0 => BrownianDiffusion::isotropic(lambda.iter().copied().next().unwrap_or(f64::NAN), d),
        1 if shape[0] == d => {
            let v = lambda.into_dimensionality::<Ix1>().expect("1-D").to_vec();
            BrownianDiffusion::diagonal(&v, d)
        }
        2 if shape == [d, d] => {
            BrownianDiffusion::full(lambda.into_dimensionality::<Ix2>().expect("2-D"))
        }
        _ => return Err(wrong_lambda_shape("a scalar, (d,) or (d, d)", d, &shape)),
    }
    .map_err(as_lambda)?;
    let root = match root {
        None => Root::Flat,
        Some(s0) => Root::Gaussian { s0 },
    };
    let model = model.with_root(root)?.with_noise(noise)?;
    if masked {
        return Ok(AnyMessageModel::Masked(
            MaskedBrownian::new(model).map_err(as_lambda)?,
        ));
    }
    Ok(AnyMessageModel::Brownian(model))
}

/// The options of a greedy search named `inference`.
fn greedy_params(
    inference: &str,
    n_jobs: Option<usize>,
    approx: Option<(usize, usize, u64)>,
) -> Result<coalescent::ValidCoalescentParams> {
    let inference = match inference {
        "greedy-rate1" => Inference::GreedyRate1,
        "greedy-maxprob" => Inference::GreedyMaxProb,
        "greedy-minduration" => Inference::GreedyMinDuration,
        other => {
            return Err(RoseTreeError::param(
                "inference",
                format!(
                    "{other:?} is unknown; available: \"greedy-rate1\", \"greedy-maxprob\", \
                     \"greedy-minduration\""
                ),
            ));
        }
    };
    CoalescentParams::new()
        .inference(inference)
        .n_threads(n_jobs)
        .approx(approx.map(|(exact_below, sample, seed)| ApproxParams {
            exact_below,
            sample,
            seed,
        }))
        .check()
}

fn fit_with<M: MessageModel + Clone + Send + 'static>(
    py: Python<'_>,
    model: M,
    x: ArrayView2<'_, f64>,
    params: coalescent::ValidCoalescentParams,
    label: Option<Watch<'_>>,
) -> PyResult<(PyTree, f64)>
where
    M::Message: 'static,
{
    let leaves = model.leaf_messages(x)?;
    let fit = run_watched(py, label, move |interrupt| {
        coalescent::fit_leaves(&model, &params, leaves, interrupt)
    })?;
    Ok((fit.tree.into(), fit.log_joint))
}

/// What an SMC fit returns to Python: the particle trees, their normalised log weights, the
/// estimate of `ln p(x)`, the effective sample size per step, and the index and `ln p(x, π)`
/// of the heaviest particle.
type SmcOutput = (Vec<PyTree>, Vec<f64>, f64, Vec<f64>, usize, f64);

/// An SMC run and its heaviest particle.
struct SmcRun {
    trees: Vec<Tree>,
    log_weights: Vec<f64>,
    log_marginal: f64,
    ess: Vec<f64>,
    best: usize,
    log_joint: f64,
}

impl From<SmcRun> for SmcOutput {
    fn from(run: SmcRun) -> Self {
        (
            run.trees.into_iter().map(PyTree::from).collect(),
            run.log_weights,
            run.log_marginal,
            run.ess,
            run.best,
            run.log_joint,
        )
    }
}

fn smc_run<M: DurationPosterior>(
    model: &M,
    leaves: &[(M::Message, f64)],
    x: ArrayView2<'_, f64>,
    params: &SmcParams,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<SmcRun> {
    let result = smc::run_from_leaves(model, leaves, params, threads, interrupt)?;
    // The heaviest particle, the first on a tie.
    let best = (0..result.trees.len())
        .max_by(|&a, &b| {
            result.log_weights[a]
                .total_cmp(&result.log_weights[b])
                .then(b.cmp(&a))
        })
        .expect("at least one particle");
    let log_joint = coalescent::log_joint(model, x, &result.trees[best])?;
    Ok(SmcRun {
        trees: result.trees,
        log_weights: result.log_weights,
        log_marginal: result.log_marginal,
        ess: result.ess,
        best,
        log_joint,
    })
}

fn smc_with<M: DurationPosterior + Send + 'static>(
    py: Python<'_>,
    model: M,
    x: ArrayView2<'_, f64>,
    params: SmcParams,
    threads: Threads,
    label: Option<Watch<'_>>,
) -> PyResult<SmcOutput>
where
    M::Message: 'static,
{
    let leaves = model.leaf_messages(x)?;
    let x = x.to_owned();
    run_watched(py, label, move |interrupt| {
        smc_run(&model, &leaves, x.view(), &params, &threads, interrupt).map(SmcOutput::from)
    })
}

/// The options of SMC with `proposal` (`"priorprior"`, `"priorpost"` or `"postpost"`).
fn smc_params(proposal: &str, n_particles: usize, seed: u64) -> Result<SmcParams> {
    let proposal = match proposal {
        "priorprior" => Proposal::PriorPrior,
        "priorpost" => Proposal::PriorPost,
        "postpost" => Proposal::PostPost,
        other => {
            return Err(RoseTreeError::param(
                "inference",
                format!("unknown SMC proposal {other:?}"),
            ));
        }
    };
    if n_particles == 0 {
        return Err(RoseTreeError::param("n_particles", "must be at least 1"));
    }
    Ok(SmcParams::new(proposal, n_particles, seed))
}

/// A grown tree, its `ln p(x, π)`, and each added row's join: `(node, time)`.
type Grown = (PyTree, f64, Vec<(usize, f64)>);

/// `Λ` from the array given for it: a number, one per feature or a matrix.
fn lambda_of(array: ndarray::ArrayViewD<'_, f64>, what: &str) -> Result<Lambda> {
    match array.ndim() {
        0 => Ok(Lambda::Shared(
            array.iter().copied().next().unwrap_or(f64::NAN),
        )),
        1 => Ok(Lambda::PerFeature(array.iter().copied().collect())),
        2 => Ok(Lambda::Full(
            array.into_dimensionality::<Ix2>().expect("2-D").to_owned(),
        )),
        _ => Err(RoseTreeError::param(
            what,
            format!("must have 0, 1 or 2 dimensions, got {}", array.ndim()),
        )),
    }
}

/// `Λ` back as an array of its own shape.
fn lambda_array<'py>(py: Python<'py>, lambda: &Lambda) -> Bound<'py, PyArrayDyn<f64>> {
    ndarray::ArrayD::from_shape_vec(lambda.shape(), lambda.values())
        .expect("values fit the shape")
        .into_pyarray(py)
}

/// A prior given as `(nu, Psi)` or `(shape, rate)`, or `None` for the default, checked
/// for `lambda` under the model `model`.
fn lambda_prior<M: LearnableRate>(
    prior: Option<&(f64, PyReadonlyArrayDyn<'_, f64>)>,
    lambda: &Lambda,
    d: usize,
    gamma: bool,
) -> Result<LambdaPrior> {
    let Some((a, b)) = prior else {
        return Ok(M::default_prior(lambda, d));
    };
    let b = lambda_of(b.as_array(), "Lambda_prior")?;
    if gamma {
        LambdaPrior::gamma(*a, &b, lambda, d)
    } else {
        LambdaPrior::inverse_wishart(*a, b, lambda, d)
    }
}

fn no_learning_with_missing() -> RoseTreeError {
    RoseTreeError::param(
        "learn_hyperparameters",
        "Lambda cannot be learnt from data with missing entries under Brownian diffusion",
    )
}

/// What one run of an inference gives: a greedy tree, or SMC's weighted particles.
enum Run {
    Greedy(coalescent::CoalescentFit),
    Smc(SmcRun),
}

impl SearchResult for Run {
    fn tree(&self) -> &Tree {
        match self {
            Run::Greedy(f) => &f.tree,
            Run::Smc(s) => &s.trees[s.best],
        }
    }
    fn log_joint(&self) -> f64 {
        match self {
            Run::Greedy(f) => f.log_joint,
            Run::Smc(s) => s.log_joint,
        }
    }
    fn set_log_joint(&mut self, value: f64) {
        match self {
            Run::Greedy(f) => f.log_joint = value,
            Run::Smc(s) => s.log_joint = value,
        }
    }
}

/// A greedy fit or an SMC fit, as `CoalescentModel.fit` returns it.
#[derive(IntoPyObject)]
enum RunOutput {
    Greedy((PyTree, f64)),
    Smc(SmcOutput),
}

impl From<Run> for RunOutput {
    fn from(run: Run) -> Self {
        match run {
            Run::Greedy(f) => RunOutput::Greedy((f.tree.into(), f.log_joint)),
            Run::Smc(s) => RunOutput::Smc(s.into()),
        }
    }
}

/// The inference of a fit, which a learning run repeats: a greedy search or SMC.
#[derive(Clone)]
enum Search {
    Greedy(coalescent::ValidCoalescentParams),
    Smc(SmcParams),
}

impl Search {
    fn run<M: DurationPosterior + Clone>(
        &self,
        model: &M,
        x: ArrayView2<'_, f64>,
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Run> {
        let leaves = model.leaf_messages(x)?;
        match self {
            Search::Greedy(params) => Ok(Run::Greedy(coalescent::fit_leaves(
                model, params, leaves, interrupt,
            )?)),
            Search::Smc(params) => Ok(Run::Smc(smc_run(
                model, &leaves, x, params, threads, interrupt,
            )?)),
        }
    }
}

/// How a learning run goes: its inference, the most rounds, the threads and when progress
/// starts (seconds).
struct Schedule {
    search: Search,
    rounds: usize,
    threads: Threads,
    verbose: Option<f64>,
}

fn learn_with<M: LearnableRate + DurationPosterior + Send + 'static>(
    py: Python<'_>,
    model: M,
    lambda: Lambda,
    prior: LambdaPrior,
    x: ArrayView2<'_, f64>,
    schedule: Schedule,
) -> PyResult<(RunOutput, Lambda, Vec<f64>)>
where
    M::Message: 'static,
{
    let Schedule {
        search,
        rounds,
        threads,
        verbose,
    } = schedule;
    let x = x.to_owned();
    let label = Watch::after(verbose, "coalescent")?;
    let started = Instant::now();
    let after = verbose.map(Duration::from_secs_f64);
    let resample = matches!(search, Search::Smc(..));
    let learned = run_watched(py, label, move |interrupt| {
        let first = search.run(&model, x.view(), &threads, interrupt)?;
        let mut on_round = |round: usize, objective: f64| {
            if after.is_some_and(|a| started.elapsed() >= a) {
                progress_line(&format!(
                    "learning Lambda: round {}/{rounds}, ln p(x, tree) + ln p(Lambda) = {:.3}",
                    round + 1,
                    objective
                ));
            }
        };
        learn(
            &model,
            lambda,
            &prior,
            x.view(),
            first,
            &mut |m| search.run(m, x.view(), &threads, interrupt),
            LearnOptions { rounds, resample },
            &threads,
            interrupt,
            &mut on_round,
        )
    })?;
    Ok((learned.fit.into(), learned.lambda, learned.trace))
}

/// A fitted tree's messages for prediction ([`Predictor`]).
enum AnyPredictor {
    Brownian(Predictor<BrownianDiffusion>),
    Masked(Predictor<MaskedBrownian>),
    Mutation(Predictor<MultinomialMutation>),
}

/// Predictions from a coalescent tree and its training rows: predictive densities of new
/// rows, where they would join the tree, and posterior marginals at the leaves.
#[pyclass(frozen, module = "rosetree._core", name = "CoalescentPredictor")]
pub(crate) struct PyCoalescentPredictor {
    inner: Arc<AnyPredictor>,
}

fn log_density_with<M: MessageModel + Send + 'static>(
    py: Python<'_>,
    predictor: Arc<AnyPredictor>,
    pick: fn(&AnyPredictor) -> &Predictor<M>,
    x: Array2<f64>,
    threads: Threads,
) -> PyResult<(Vec<f64>, Array2<f64>)>
where
    M::Message: 'static,
{
    run_interruptible(py, move |interrupt| {
        let p = pick(&predictor);
        if x.ncols() != p.model().n_features() {
            return Err(RoseTreeError::ShapeMismatch {
                what: "X".into(),
                expected: format!("{} columns", p.model().n_features()),
                found: format!("{} columns", x.ncols()),
            });
        }
        let rows: Vec<usize> = (0..x.nrows()).collect();
        let mut results = Vec::with_capacity(rows.len());
        // Chunks in parallel, the interrupt polled between them.
        for chunk in rows.chunks(16) {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            results.extend(threads.try_map(chunk, 2, |&i| p.log_density_by_branch(x.row(i), i))?);
        }
        let n_nodes = p.tree().nodes().len();
        let mut attach = Array2::zeros((x.nrows(), n_nodes));
        let mut total = Vec::with_capacity(x.nrows());
        for (i, (log_p, by_branch)) in results.into_iter().enumerate() {
            for (v, lb) in by_branch.into_iter().enumerate() {
                attach[[i, v]] = (lb - log_p).exp();
            }
            total.push(log_p);
        }
        Ok((total, attach))
    })
}

#[pymethods]
impl PyCoalescentPredictor {
    /// `ln p(y | x, π)` of every row of `x`, and the probability that each row joins the
    /// branch above each node.
    #[pyo3(signature = (x, *, n_jobs))]
    fn log_density<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'_, f64>,
        n_jobs: Option<usize>,
    ) -> PyResult<(Vec<f64>, Bound<'py, PyArray2<f64>>)> {
        let threads = Threads::new(n_jobs)?;
        let x = x.as_array().to_owned();
        let predictor = Arc::clone(&self.inner);
        let (total, attach) = match &*self.inner {
            AnyPredictor::Brownian(_) => log_density_with(
                py,
                predictor,
                |p| match p {
                    AnyPredictor::Brownian(b) => b,
                    _ => unreachable!(),
                },
                x,
                threads,
            )?,
            AnyPredictor::Masked(_) => log_density_with(
                py,
                predictor,
                |p| match p {
                    AnyPredictor::Masked(b) => b,
                    _ => unreachable!(),
                },
                x,
                threads,
            )?,
            AnyPredictor::Mutation(_) => log_density_with(
                py,
                predictor,
                |p| match p {
                    AnyPredictor::Mutation(m) => m,
                    _ => unreachable!(),
                },
                x,
                threads,
            )?,
        };
        Ok((total, attach.into_pyarray(py)))
    }

    /// The posterior at every leaf: for the multinomial likelihood the probabilities of
    /// each state of each feature, shape `(n, d, K_max)` (zeros beyond `K_d`); for Brownian
    /// diffusion each feature's posterior mean and variance, shape `(n, d, 2)`.
    fn leaf_posteriors<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray3<f64>> {
        let out = match &*self.inner {
            AnyPredictor::Brownian(p) => {
                gaussian_leaf_posteriors(p, |model, msg| (model.mean(msg), model.variances(msg)))
            }
            AnyPredictor::Masked(p) => {
                gaussian_leaf_posteriors(p, |model, msg| (model.mean(msg), model.variances(msg)))
            }
            AnyPredictor::Mutation(p) => {
                let model = p.model();
                let n = p.tree().n_leaves();
                let d = model.n_features();
                let k_max = (0..d).map(|j| model.n_states(j)).max().unwrap_or(1);
                let mut out = Array3::zeros((n, d, k_max));
                for i in 0..n {
                    let post = p.posterior_at_node(i);
                    for j in 0..d {
                        let q = model.equilibrium(j);
                        let block = model.feature(&post, j);
                        let total: f64 = q.iter().zip(block).map(|(a, b)| a * b).sum();
                        for (k, (a, b)) in q.iter().zip(block).enumerate() {
                            out[[i, j, k]] = a * b / total;
                        }
                    }
                }
                out
            }
        };
        out.into_pyarray(py)
    }
}

/// Each leaf's posterior mean and variance per feature, shape `(n, d, 2)`, from
/// `moments(model, posterior message)`.
fn gaussian_leaf_posteriors<M: MessageModel>(
    p: &Predictor<M>,
    moments: impl Fn(&M, &M::Message) -> (Vec<f64>, Vec<f64>),
) -> Array3<f64> {
    let n = p.tree().n_leaves();
    let mut out = Array3::zeros((n, p.model().n_features(), 2));
    for i in 0..n {
        let (mean, var) = moments(p.model(), &p.posterior_at_node(i));
        for (j, (m, v)) in mean.into_iter().zip(var).enumerate() {
            out[[i, j, 0]] = m;
            out[[i, j, 1]] = v;
        }
    }
    out
}

// ------------------------------------------------------------------ fitting in parts

/// The message model shared by every part of a fit on other machines, built from what was
/// reduced over all the data rather than from the rows at hand: `masked` (whether any
/// entry is missing, Brownian) and `counts` (the multinomial's smoothed state counts per
/// column, `c_dk + 1`), for rows of `d` columns.
#[allow(clippy::too_many_arguments)]
fn shared_model(
    likelihood: &str,
    lambda: &PyReadonlyArrayDyn<'_, f64>,
    root: Option<f64>,
    noise: f64,
    d: usize,
    masked: bool,
    counts: Option<Vec<Vec<f64>>>,
) -> Result<AnyMessageModel> {
    let lambda = lambda.as_array();
    match likelihood {
        "brownian" => brownian_model(lambda, root, noise, d, masked),
        "multinomial" => {
            check_multinomial(noise, root)?;
            let rates = rates_of(lambda, d)?;
            let counts = counts.ok_or_else(|| {
                RoseTreeError::param("counts", "the multinomial likelihood needs state counts")
            })?;
            if counts.len() != d {
                return Err(RoseTreeError::param(
                    "counts",
                    format!("needs one list per column ({d}), got {}", counts.len()),
                ));
            }
            Ok(AnyMessageModel::Mutation(
                MultinomialMutation::from_counts(&counts, &rates).map_err(as_lambda)?,
            ))
        }
        other => Err(unknown_likelihood(other)),
    }
}

/// A part's tree (`None` for one row), its root message (encoded), `Σ ln Z` below its
/// root, and the evidence of each of its nodes, leaves first.
type PartFit = (Option<PyTree>, Vec<f64>, f64, Vec<f64>);

fn fit_part_with<M: MessageCodec + Clone + Send + 'static>(
    py: Python<'_>,
    model: M,
    x: ArrayView2<'_, f64>,
    params: coalescent::ValidCoalescentParams,
) -> PyResult<PartFit>
where
    M::Message: 'static,
{
    let leaves = model.leaf_messages(x)?;
    run_interruptible(py, move |interrupt| {
        let tree = if leaves.len() > 1 {
            Some(coalescent::fit_leaves(&model, &params, leaves.clone(), interrupt)?.tree)
        } else {
            None
        };
        let summary = part_summary(&model, &leaves, tree.as_ref())?;
        let evidence = part_evidence(&model, &leaves, tree.as_ref())?;
        Ok((
            tree.map(PyTree::from),
            model.encode_message(&summary.message),
            summary.log_z,
            evidence,
        ))
    })
}

/// A part as Python passes it to the stitch: its tree (`None` for one row), the data row
/// of each leaf, its encoded root message and `Σ ln Z` below its root.
type PyCoalescentPart<'py> = (Option<Bound<'py, PyTree>>, Vec<usize>, Vec<f64>, f64);

/// The stitched tree, its `ln p(x, π)`, the nodes of each part's internal nodes and of the
/// top nodes in it, and the top nodes' evidence ([`stitch`]).
type StitchOutput = (PyTree, f64, Vec<Vec<usize>>, Vec<usize>, Vec<f64>);

fn stitch_with<M: MessageCodec>(
    model: &M,
    n_rows: usize,
    parts: Vec<PyCoalescentPart<'_>>,
    top: &[[usize; 2]],
) -> PyResult<StitchOutput> {
    let parts = parts
        .into_iter()
        .map(|(tree, rows, message, log_z)| {
            Ok(Part {
                tree: tree.map(|t| t.get().inner.clone()),
                rows,
                summary: PartSummary {
                    message: model.decode_message(&message)?,
                    log_z,
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let s = stitch(model, n_rows, &parts, top)?;
    Ok((
        s.tree.into(),
        s.log_joint,
        s.part_nodes,
        s.top_nodes,
        s.top_evidence,
    ))
}

// ------------------------------------------------------------------ the Python classes

/// A coalescent's likelihood, checked once: the message model named by `likelihood`,
/// `Lambda`, `root` and `noise`, for rows of one width (`rosetree._core.CoalescentModel`).
/// Every computation on data or trees is a method of it, so the model's options cross from
/// Python once.
#[pyclass(frozen, module = "rosetree._core", name = "CoalescentModel")]
pub(crate) struct PyCoalescentModel {
    model: AnyMessageModel,
    /// `Λ` as given (its shape is the one learning keeps).
    lambda: Lambda,
}

/// The inference of a fit, checked once (`rosetree._core.CoalescentParams`): a greedy
/// search (`"greedy-rate1"`, `"greedy-maxprob"`, `"greedy-minduration"`; Greedy-Rate1 may be
/// approximate) or SMC (`"smc-priorprior"`, `"smc-priorpost"`, `"smc-postpost"`).
#[pyclass(frozen, module = "rosetree._core", name = "CoalescentParams")]
pub(crate) struct PyCoalescentParams {
    search: Search,
    n_jobs: Option<usize>,
}

#[pymethods]
impl PyCoalescentParams {
    /// `approx` is `(exact_below, sample, seed)` of the approximate Greedy-Rate1 search,
    /// `None` for the exact one; `n_particles` and `seed` are SMC's.
    #[new]
    #[pyo3(signature = (*, inference="greedy-rate1", n_jobs=None, approx=None, n_particles=1, seed=0))]
    fn new(
        inference: &str,
        n_jobs: Option<usize>,
        approx: Option<(usize, usize, u64)>,
        n_particles: usize,
        seed: u64,
    ) -> PyResult<Self> {
        let search = match inference.strip_prefix("smc-") {
            Some(proposal) => {
                if approx.is_some() {
                    return Err(RoseTreeError::param(
                        "approx",
                        "SMC has no approximate mode; use inference=\"greedy-rate1\"",
                    )
                    .into());
                }
                Search::Smc(smc_params(proposal, n_particles, seed)?)
            }
            None => Search::Greedy(greedy_params(inference, n_jobs, approx)?),
        };
        // Checked here, not at the first fit.
        Threads::new(n_jobs)?;
        Ok(Self { search, n_jobs })
    }

    fn __repr__(&self) -> String {
        match &self.search {
            Search::Greedy(p) => format!("CoalescentParams({:?})", **p),
            Search::Smc(p) => format!("CoalescentParams({p:?}, n_jobs={:?})", self.n_jobs),
        }
    }
}

impl PyCoalescentParams {
    /// The greedy search's options; an error naming `inference` for SMC, where only a
    /// greedy search is meant.
    fn greedy(&self) -> Result<coalescent::ValidCoalescentParams> {
        match &self.search {
            Search::Greedy(p) => Ok(*p),
            Search::Smc(_) => Err(RoseTreeError::param(
                "inference",
                "this step is a greedy search; SMC is not available here",
            )),
        }
    }
}

#[pymethods]
impl PyCoalescentModel {
    /// The model for the rows of `x`: Brownian diffusion (masked where an entry is NaN), or
    /// the multinomial mutation model with each column's categories and equilibrium read
    /// from `x`.
    #[new]
    #[pyo3(signature = (x, *, likelihood, lambda_, root=None, noise=0.0))]
    fn new(
        x: PyReadonlyArray2<'_, f64>,
        likelihood: &str,
        lambda_: PyReadonlyArrayDyn<'_, f64>,
        root: Option<f64>,
        noise: f64,
    ) -> PyResult<Self> {
        Ok(Self {
            model: build_model(likelihood, &lambda_, root, noise, x.as_array())?,
            lambda: lambda_of(lambda_.as_array(), "Lambda")?,
        })
    }

    /// The model shared by every part of a fit on other machines, built from what was
    /// reduced over all the data rather than from the rows at hand: `masked` (whether any
    /// entry is missing, Brownian) and `counts` (the multinomial's smoothed state counts per
    /// column, `c_dk + 1`), for rows of `n_features` columns.
    #[staticmethod]
    #[pyo3(signature = (n_features, *, likelihood, lambda_, root=None, noise=0.0, masked=false, counts=None))]
    fn shared(
        n_features: usize,
        likelihood: &str,
        lambda_: PyReadonlyArrayDyn<'_, f64>,
        root: Option<f64>,
        noise: f64,
        masked: bool,
        counts: Option<Vec<Vec<f64>>>,
    ) -> PyResult<Self> {
        Ok(Self {
            model: shared_model(
                likelihood, &lambda_, root, noise, n_features, masked, counts,
            )?,
            lambda: lambda_of(lambda_.as_array(), "Lambda")?,
        })
    }

    /// `"brownian"` or `"multinomial"`.
    #[getter]
    fn likelihood(&self) -> &'static str {
        match self.model {
            AnyMessageModel::Brownian(_) | AnyMessageModel::Masked(_) => "brownian",
            AnyMessageModel::Mutation(_) => "multinomial",
        }
    }

    /// The width of the rows the model takes.
    #[getter]
    fn n_features(&self) -> usize {
        with_model!(&self.model, m => m.n_features())
    }

    fn __repr__(&self) -> String {
        format!(
            "CoalescentModel(likelihood={:?}, n_features={})",
            self.likelihood(),
            self.n_features()
        )
    }

    /// Fits a tree to the rows of `x` by the inference of `params`: a greedy fit as
    /// `(tree, ln p(x, π))`, an SMC fit as `(trees, normalised log weights, estimate of
    /// ln p(x), effective sample size per step, index of the heaviest particle, its
    /// ln p(x, π))`. With `verbose` (seconds; `None`: never), a line of progress goes to
    /// `sys.stderr` about once a second once the fit has run that long.
    #[pyo3(signature = (x, params, *, verbose=None))]
    fn fit(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        params: &PyCoalescentParams,
        verbose: Option<f64>,
    ) -> PyResult<RunOutput> {
        let x = x.as_array();
        match &params.search {
            Search::Greedy(p) => {
                let label = Watch::after(verbose, "coalescent")?;
                let fit = with_model!(self.model.clone(), m => fit_with(py, m, x, *p, label))?;
                Ok(RunOutput::Greedy(fit))
            }
            Search::Smc(p) => {
                let threads = Threads::new(params.n_jobs)?;
                let label = Watch::after(verbose, "coalescent SMC")?;
                // PostPost where the model has it ([`DurationPosterior::check_post_post`]).
                let run = with_model!(
                    self.model.clone(),
                    m => smc_with(py, m, x, *p, threads, label)
                )?;
                Ok(RunOutput::Smc(run))
            }
        }
    }

    /// Fits a tree and learns `Λ` with it (Teh et al. §4.4, [`coalescent::learn::learn`]):
    /// the inference of `params` under this model's `Λ`, then at most `rounds` rounds of
    /// coordinate ascent under `prior` (as for [`PyCoalescentModel::lambda_map`]). Returns
    /// the fit as [`PyCoalescentModel::fit`] gives it, the learnt `Λ` and the trace of
    /// `ln p(x, π) + ln p(Λ)`. With `verbose` (seconds), lines of progress and one per
    /// round once the run has taken that long.
    #[pyo3(signature = (x, params, *, rounds, prior=None, verbose=None))]
    fn learn<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'_, f64>,
        params: &PyCoalescentParams,
        rounds: usize,
        prior: Option<(f64, PyReadonlyArrayDyn<'_, f64>)>,
        verbose: Option<f64>,
    ) -> PyResult<(RunOutput, Bound<'py, PyArrayDyn<f64>>, Vec<f64>)> {
        let x = x.as_array();
        let d = x.ncols();
        let lambda = self.lambda.clone();
        let schedule = Schedule {
            search: params.search.clone(),
            rounds,
            threads: Threads::new(params.n_jobs)?,
            verbose,
        };
        let (run, lambda, trace) = match self.model.clone() {
            AnyMessageModel::Brownian(m) => {
                let prior = lambda_prior::<BrownianDiffusion>(prior.as_ref(), &lambda, d, false)?;
                learn_with(py, m, lambda, prior, x, schedule)?
            }
            AnyMessageModel::Mutation(m) => {
                let prior = lambda_prior::<MultinomialMutation>(prior.as_ref(), &lambda, d, true)?;
                learn_with(py, m, lambda, prior, x, schedule)?
            }
            AnyMessageModel::Masked(_) => return Err(no_learning_with_missing().into()),
        };
        Ok((run, lambda_array(py, &lambda), trace))
    }

    /// `ln p(x, π)` (Teh et al. eq 7) of the rows of `x` and a timed binary tree.
    fn log_joint(&self, x: PyReadonlyArray2<'_, f64>, tree: &Bound<'_, PyTree>) -> PyResult<f64> {
        let x = x.as_array();
        let tree = &tree.get().inner;
        Ok(with_model!(&self.model, m => coalescent::log_joint(m, x, tree)?))
    }

    /// `E(v) = ln p(x_v | π_v)` of every subtree of a timed tree, indexed by node id (see
    /// [`subtree_log_evidence_from_leaves`]).
    fn subtree_evidence(
        &self,
        x: PyReadonlyArray2<'_, f64>,
        tree: &Bound<'_, PyTree>,
    ) -> PyResult<Vec<f64>> {
        let x = x.as_array();
        let tree = &tree.get().inner;
        coalescent::check_timed_tree(tree)?;
        Ok(with_model!(
            &self.model,
            m => subtree_log_evidence_from_leaves(m, &m.leaf_messages(x)?, tree)?
        ))
    }

    /// The predictor of a timed tree fitted to the rows of `x`.
    fn predictor(
        &self,
        x: PyReadonlyArray2<'_, f64>,
        tree: &Bound<'_, PyTree>,
    ) -> PyResult<PyCoalescentPredictor> {
        let x = x.as_array();
        let tree = tree.get().inner.clone();
        let inner = match self.model.clone() {
            AnyMessageModel::Brownian(m) => AnyPredictor::Brownian(Predictor::new(m, x, tree)?),
            AnyMessageModel::Masked(m) => AnyPredictor::Masked(Predictor::new(m, x, tree)?),
            AnyMessageModel::Mutation(m) => AnyPredictor::Mutation(Predictor::new(m, x, tree)?),
        };
        Ok(PyCoalescentPredictor {
            inner: Arc::new(inner),
        })
    }

    /// The posterior mode of `Λ` given a timed tree of the rows of `x`
    /// ([`coalescent::learn::LearnableRate::lambda_map`]), in the shape of this model's
    /// `Λ`, under `prior` (`(nu, Psi)` for Brownian diffusion, `(shape, rate)` for the
    /// mutation model; `None`: the default whose mode is this model's `Λ`).
    #[pyo3(signature = (x, tree, *, prior=None, n_jobs=None))]
    fn lambda_map<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'_, f64>,
        tree: &Bound<'_, PyTree>,
        prior: Option<(f64, PyReadonlyArrayDyn<'_, f64>)>,
        n_jobs: Option<usize>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f64>>> {
        let x = x.as_array();
        let d = x.ncols();
        let lambda = self.lambda.clone();
        let tree = tree.get().inner.clone();
        let threads = Threads::new(n_jobs)?;
        let found = match self.model.clone() {
            AnyMessageModel::Brownian(m) => {
                let prior = lambda_prior::<BrownianDiffusion>(prior.as_ref(), &lambda, d, false)?;
                m.lambda_map(x, &tree, &lambda, &prior, &threads)?
            }
            AnyMessageModel::Mutation(m) => {
                let prior = lambda_prior::<MultinomialMutation>(prior.as_ref(), &lambda, d, true)?;
                let x = x.to_owned();
                run_interruptible(py, move |_| {
                    m.lambda_map(x.view(), &tree, &lambda, &prior, &threads)
                })?
            }
            AnyMessageModel::Masked(_) => return Err(no_learning_with_missing().into()),
        };
        Ok(lambda_array(py, &found))
    }

    /// Adds rows to a fitted timed tree ([`coalescent::insert_rows_with`]): the first
    /// `tree.n_leaves` rows of `x` are the tree's, the rest are added one at a time in
    /// order. `join_rule` is `"density"` (the MAP join point, the default) or `"mass"` (the
    /// most probable branch); `balance`, `repair`, `retime` and `rotate` are
    /// [`coalescent::Growth`]'s. Returns the grown tree, its `ln p(x, π)`, and for each
    /// added row the node on whose branch it joined (see [`coalescent::Join`] for its ids)
    /// and the join time.
    #[pyo3(signature = (x, tree, *, join_rule="density", balance=true, repair=false, retime=false, rotate=false))]
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        tree: &Bound<'_, PyTree>,
        join_rule: &str,
        balance: bool,
        repair: bool,
        retime: bool,
        rotate: bool,
    ) -> PyResult<Grown> {
        let rule = match join_rule {
            "density" => coalescent::JoinRule::MaxDensity,
            "mass" => coalescent::JoinRule::BranchMass,
            other => {
                return Err(RoseTreeError::param(
                    "join_rule",
                    format!("must be 'density' or 'mass', got {other:?}"),
                )
                .into());
            }
        };
        let x = x.as_array();
        let tree = tree.get().inner.clone();
        let n0 = tree.n_leaves();
        if x.nrows() < n0 {
            return Err(RoseTreeError::InvalidTree(format!(
                "the tree has {n0} leaves but X has {} rows",
                x.nrows()
            ))
            .into());
        }
        let growth = coalescent::Growth {
            rule,
            balance,
            repair,
            retime,
            rotate,
        };
        with_model!(self.model.clone(), m => {
            let mut leaves = m.leaf_messages(x)?;
            let rows = leaves.split_off(n0);
            let (fit, joins) = run_interruptible(py, move |interrupt| {
                coalescent::insert_rows_with(&m, &tree, leaves, rows, growth, interrupt)
            })?;
            let joins = joins.into_iter().map(|j| (j.node, j.time)).collect();
            Ok((fit.tree.into(), fit.log_joint, joins))
        })
    }

    /// The Greedy-Rate1 fit of a part's rows `x` (the greedy search of `params`), and what
    /// stitching and `split_llr_` need of it.
    fn fit_part(
        &self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        params: &PyCoalescentParams,
    ) -> PyResult<PartFit> {
        let params = params.greedy()?;
        with_model!(self.model.clone(), m => fit_part_with(py, m, x.as_array(), params))
    }

    /// The groups of a sample tree (fitted to the rows `x`) under which rows are sent, the
    /// time `τ` at which they are told apart, and each group's posterior there (encoded):
    /// [`Router`].
    #[pyo3(signature = (x, tree, *, max_leaves))]
    fn router(
        &self,
        x: PyReadonlyArray2<'_, f64>,
        tree: &Bound<'_, PyTree>,
        max_leaves: usize,
    ) -> PyResult<(Vec<usize>, f64, Vec<Vec<f64>>)> {
        let x = x.as_array();
        let tree = &tree.get().inner;
        with_model!(&self.model, m => {
            let sample = m.leaf_messages(x)?.into_iter().map(|(msg, _)| msg).collect();
            let router = Router::new(m, sample, tree, max_leaves)?;
            let posteriors = router.posteriors.iter().map(|p| m.encode_message(p)).collect();
            Ok((router.groups, router.tau, posteriors))
        })
    }

    /// The group of each row of `x` ([`Router::route`]) given the groups' encoded
    /// posteriors at `tau`.
    fn route<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        posteriors: Vec<Vec<f64>>,
        tau: f64,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let x = x.as_array();
        with_model!(&self.model, m => {
            let router = Router {
                groups: (0..posteriors.len()).collect(),
                tau,
                posteriors: posteriors
                    .iter()
                    .map(|p| m.decode_message(p))
                    .collect::<Result<Vec<_>>>()?,
            };
            let leaves = m.leaf_messages(x)?;
            let labels: Vec<i64> = leaves
                .iter()
                .map(|(leaf, _)| router.route(m, leaf) as i64)
                .collect();
            Ok(labels.into_pyarray(py))
        })
    }

    /// The coalescent tree over rows `0..n_rows` joined from `parts` by the binary top
    /// nodes `top`, with its exact `ln p(x, π)` from the parts' summaries ([`stitch`]).
    fn stitch(
        &self,
        n_rows: usize,
        parts: Vec<PyCoalescentPart<'_>>,
        top: Vec<[usize; 2]>,
    ) -> PyResult<StitchOutput> {
        with_model!(&self.model, m => stitch_with(m, n_rows, parts, &top))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCoalescentModel>()?;
    m.add_class::<PyCoalescentParams>()?;
    m.add_class::<PyCoalescentPredictor>()?;
    Ok(())
}
