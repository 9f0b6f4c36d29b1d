//! The `rosetree._core` extension module, built by maturin over the core crate `rosetree`:
//! typed model specifications and options, fitted state, trees. Each function converts its
//! arguments, computes
//! the leaf statistics while attached (NumPy memory is only read then), detaches for the
//! search, and converts the result back.

mod callback;
mod coalescent;
mod distributed;
mod errors;
mod fit;
mod learn;
mod models;
mod pydt;
mod pydt_em;
mod testing;
mod tree;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use ndarray::ArrayView2;
use numpy::PyReadonlyArray2;
use pyo3::prelude::*;

use crate::errors::PyResult;

use models::{AnyModel, PyModelSpec, build_model, with_model, with_model_arms};
use rosetree::brt::{self, ApproxParams, BrtParams, MergeRule, Mixing, RoseTree, ValidBrtParams};
use rosetree::error::RoseTreeError;
use rosetree::models::{ClusterModel, RowQueries};
use rosetree::progress::{self, Progress};
use rosetree::tree::Topology;
use tree::{PyRoseTree, PyTree};

pub(crate) fn parse_mixing(mixing: &str, gamma: f64, dp_alpha: f64) -> PyResult<Mixing> {
    let m = match mixing {
        "brt" => Mixing::Brt { gamma },
        "gamma" => Mixing::Gamma { gamma },
        "dp" => Mixing::Dp { alpha: dp_alpha },
        other => {
            return Err(RoseTreeError::param(
                "mixing",
                format!("must be \"brt\", \"gamma\" or \"dp\", got {other:?}"),
            )
            .into());
        }
    };
    m.check()?;
    Ok(m)
}

fn parse_merge_rule(rule: &str) -> PyResult<MergeRule> {
    match rule {
        "likelihood_ratio" => Ok(MergeRule::LikelihoodRatio),
        "posterior" => Ok(MergeRule::Posterior),
        other => Err(RoseTreeError::param(
            "merge_rule",
            format!("must be \"likelihood_ratio\" or \"posterior\", got {other:?}"),
        )
        .into()),
    }
}

/// The greedy search's options, checked once when Python builds them
/// (`rosetree._core.BrtParams`); the fit functions take them as they are.
#[pyclass(frozen, module = "rosetree._core", name = "BrtParams")]
struct PyBrtParams {
    params: ValidBrtParams,
}

#[pymethods]
impl PyBrtParams {
    /// `approx` is `(exact_below, sample, seed)` of the approximate search, `None` for the
    /// exact one.
    #[new]
    #[pyo3(signature = (*, mixing, gamma, dp_alpha, binary=false, contract=false, merge_rule="likelihood_ratio", n_jobs=None, approx=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        mixing: &str,
        gamma: f64,
        dp_alpha: f64,
        binary: bool,
        contract: bool,
        merge_rule: &str,
        n_jobs: Option<usize>,
        approx: Option<(usize, usize, u64)>,
    ) -> PyResult<Self> {
        let approx = approx.map(|(exact_below, sample, seed)| ApproxParams {
            exact_below,
            sample,
            seed,
        });
        let params = BrtParams {
            mixing: parse_mixing(mixing, gamma, dp_alpha)?,
            binary,
            merge_rule: parse_merge_rule(merge_rule)?,
            contract,
            n_threads: n_jobs,
            approx,
        };
        Ok(Self {
            params: params.check()?,
        })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", *self.params)
    }
}

/// Readies `m` for the rows of `x` and returns their statistics.
fn prepared_leaves<M: ClusterModel>(
    m: &mut M,
    x: ArrayView2<'_, f64>,
) -> rosetree::Result<Vec<M::Stats>> {
    m.prepare(x.nrows());
    m.leaf_stats_all(x)
}

/// How often the waiting thread looks for Ctrl-C while a worker computes.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Writes a line of progress to Python's `sys.stderr` (so that it shows in notebooks too),
/// from any thread: it takes the interpreter while writing. Progress is best effort, so a
/// failed write is ignored, except a `KeyboardInterrupt`: Ctrl-C pressed while the line was
/// written is raised by Python's handler inside the write, and is reported by returning
/// `true` so that it is not lost.
pub(crate) fn progress_line(line: &str) -> bool {
    Python::attach(|py| {
        let Ok(stderr) = py.import("sys").and_then(|sys| sys.getattr("stderr")) else {
            return false;
        };
        let interrupted = |r: pyo3::PyResult<Bound<'_, PyAny>>| {
            r.is_err_and(|e| e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py))
        };
        let wrote = interrupted(stderr.call_method1("write", (format!("{line}\n"),)));
        wrote | interrupted(stderr.call_method0("flush"))
    })
}

/// Runs `work` on a thread of its own while the calling thread waits, detached, and checks
/// for Ctrl-C every 50 ms. On Ctrl-C the work is told to stop (its `interrupt` returns
/// `true`, which every engine polls between steps) and the call raises `KeyboardInterrupt`
/// at once: a single step can be long (one Normal–inverse-Wishart pair score over
/// thousands of dimensions takes seconds to minutes), and the worker, which owns its data,
/// ends at its next poll without anyone waiting for it.
///
/// # Errors
/// The work's error; `KeyboardInterrupt` on Ctrl-C; a panic of the worker as an error.
fn run_interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce(&dyn Fn() -> bool) -> rosetree::Result<T> + Send + 'static,
) -> PyResult<T> {
    run_watched(py, None, work)
}

/// Who watches a computation's progress: lines labelled `label`, the first once the work has
/// run for `after` (zero: as soon as the engine reports).
#[derive(Clone, Copy)]
pub(crate) struct Watch<'a> {
    label: &'a str,
    after: Duration,
}

impl<'a> Watch<'a> {
    /// Lines from the first second on when `verbose` holds, none otherwise.
    pub(crate) fn when(verbose: bool, label: &'a str) -> Option<Self> {
        verbose.then_some(Self {
            label,
            after: Duration::ZERO,
        })
    }

    /// Lines once the work has run `after` seconds (`None`: never).
    ///
    /// # Errors
    /// `InvalidParameterError` naming `verbose` for a negative or non-finite delay.
    pub(crate) fn after(after: Option<f64>, label: &'a str) -> PyResult<Option<Self>> {
        after
            .map(|secs| {
                Duration::try_from_secs_f64(secs)
                    .map(|after| Self { label, after })
                    .map_err(|_| {
                        RoseTreeError::param("verbose", "the delay must be finite and >= 0").into()
                    })
            })
            .transpose()
    }
}

/// [`run_interruptible`], and with a [`Watch`], a line of progress to `sys.stderr` about
/// once a second (the engine's latest [`progress::report`]) from `watch.after` on, and one
/// when work that showed progress is done.
///
/// # Errors
/// As [`run_interruptible`].
fn run_watched<T: Send + 'static>(
    py: Python<'_>,
    watch: Option<Watch<'_>>,
    work: impl FnOnce(&dyn Fn() -> bool) -> rosetree::Result<T> + Send + 'static,
) -> PyResult<T> {
    let label = watch.map(|w| w.label);
    let quiet_for = watch.map_or(Duration::ZERO, |w| w.after);
    let cancel = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::channel();
    let flag = Arc::clone(&cancel);
    let seen = Arc::new(Progress::default());
    let watched = label.map(|_| Arc::clone(&seen));
    let ctrl_c_at = testing::take_ctrl_c_at_poll();
    std::thread::Builder::new()
        .name("rosetree-worker".into())
        .spawn(move || {
            let polls = std::cell::Cell::new(0usize);
            let interrupt = || {
                polls.set(polls.get() + 1);
                if polls.get() == ctrl_c_at {
                    testing::press_ctrl_c(&flag);
                }
                flag.load(Ordering::Relaxed)
            };
            let run = || work(&interrupt);
            let result = match &watched {
                Some(progress) => progress::watch(progress, run),
                None => run(),
            };
            // The receiver is gone only after an interrupt; nobody needs the result then.
            let _ = sender.send(result);
        })
        .map_err(|e| RoseTreeError::Numerical(format!("cannot start a worker thread: {e}")))?;
    let started = Instant::now();
    let mut shown = Duration::ZERO;
    let mut receiver = receiver;
    loop {
        // The receiver travels into the detached closure and back (it is `Send`, not `Sync`).
        let (back, received) = py.detach(move || {
            let received = receiver.recv_timeout(SIGNAL_POLL);
            (receiver, received)
        });
        receiver = back;
        match received {
            Ok(result) => {
                // A closing line after progress lines; quick work stays silent.
                if let (Some(label), Ok(_), true) = (label, &result, shown > Duration::ZERO) {
                    let secs = started.elapsed().as_secs_f64();
                    // The work is done: Ctrl-C now is too late to stop it.
                    let _ = progress_line(&format!("{label}: done in {secs:.1} s"));
                }
                return Ok(result?);
            }
            Err(RecvTimeoutError::Timeout) => {
                if py.check_signals().is_err() {
                    cancel.store(true, Ordering::Relaxed);
                    return Err(RoseTreeError::Interrupted.into());
                }
                let elapsed = started.elapsed();
                if let (Some(label), Some((phase, done, total))) = (label, seen.latest()) {
                    if elapsed >= quiet_for && elapsed >= shown + testing::progress_every() {
                        shown = elapsed;
                        let secs = elapsed.as_secs_f64();
                        let line = format!("{label}: {phase} {done}/{total} ({secs:.0} s)");
                        if progress_line(&line) {
                            cancel.store(true, Ordering::Relaxed);
                            return Err(RoseTreeError::Interrupted.into());
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(pyo3::panic::PanicException::new_err(
                    "the rosetree worker thread panicked",
                )
                .into());
            }
        }
    }
}

/// Greedy Bayesian rose tree (or BHC with `binary`) of the rows of `train` (a dense array,
/// or a CSR matrix as `(indptr, indices, data, n_cols)`, whose leaf statistics are built
/// without a dense copy), kept with its model and statistics for prediction.
/// With `verbose`, a line of progress goes to `sys.stderr` about once a second.
#[pyfunction]
#[pyo3(signature = (train, model, params, *, verbose=false))]
fn fit_brt(
    py: Python<'_>,
    train: fit::Training<'_>,
    model: &Bound<'_, PyModelSpec>,
    params: &Bound<'_, PyBrtParams>,
    verbose: bool,
) -> PyResult<fit::PyBrtFit> {
    let params = params.get().params;
    let label = Watch::when(verbose, "rose tree");
    let training = train.to_owned_data()?;
    let model = training.model(&model.get().spec)?;
    macro_rules! run {
        ([] $($variant:ident: $t:ty = $name:literal;)*) => {
            match model {
                $(AnyModel::$variant(m) => {
                    let (m, tree) = search_brt(py, label, &training, m, params)?;
                    fit::PyBrtFit::new(AnyModel::$variant(m), Arc::new(tree), training)
                })*
                AnyModel::Callback(m) => {
                    let (m, tree) = search_brt(py, label, &training, m, params)?;
                    fit::PyBrtFit::new(AnyModel::Callback(m), Arc::new(tree), training)
                }
            }
        };
    }
    models::conjugate_families!(run,)
}

/// The greedy search over the rows of `training` under `m`, on a watched worker thread;
/// the model comes back with the tree. The search uses up the leaf statistics it is given:
/// the fitted object's predictor makes its own afresh (one pass over the rows), so that no
/// second copy lives during the search.
fn search_brt<M: RowQueries + Send + 'static>(
    py: Python<'_>,
    label: Option<Watch<'_>>,
    training: &fit::TrainingData,
    mut m: M,
    params: ValidBrtParams,
) -> PyResult<(M, RoseTree)> {
    let leaves = training.leaves(&mut m)?;
    run_watched(py, label, move |interrupt| {
        let tree = brt::fit_stats(&m, &params, leaves, interrupt)?;
        Ok((m, tree))
    })
}

/// `ln p(D | T)` and the per-node quantities of a given tree, described by the child lists
/// of its internal nodes (ids as in `rosetree.RoseTree`).
#[pyfunction]
#[pyo3(signature = (x, model, internal, *, mixing, gamma, dp_alpha))]
fn evaluate_tree(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    model: &Bound<'_, PyModelSpec>,
    internal: Vec<Vec<usize>>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
) -> PyResult<PyRoseTree> {
    let mixing = parse_mixing(mixing, gamma, dp_alpha)?;
    let x = x.as_array();
    let topology = Topology::new(x.nrows(), internal)?;
    let model = build_model(&model.get().spec, x)?;
    with_model!(model, m => {
        let leaves = prepared_leaves(&mut m, x)?;
        let tree = py.detach(|| brt::evaluate(&m, &mixing, &topology, &leaves))?;
        Ok(tree.into())
    })
}

/// The maximum-likelihood rose tree by exhaustive search.
#[pyfunction]
#[pyo3(signature = (x, model, *, mixing, gamma, dp_alpha, binary))]
fn optimal_tree(
    py: Python<'_>,
    x: PyReadonlyArray2<'_, f64>,
    model: &Bound<'_, PyModelSpec>,
    mixing: &str,
    gamma: f64,
    dp_alpha: f64,
    binary: bool,
) -> PyResult<PyRoseTree> {
    let mixing = parse_mixing(mixing, gamma, dp_alpha)?;
    let x = x.as_array();
    let model = build_model(&model.get().spec, x)?;
    with_model!(model, m => {
        let leaves = prepared_leaves(&mut m, x)?;
        let tree = py.detach(|| brt::optimal_tree(&m, &mixing, binary, &leaves))?;
        Ok(tree.into())
    })
}

/// `ln f(D)` of all rows of `x` as one cluster.
#[pyfunction]
#[allow(unused_mut)] // `with_model!` binds the model mutably; this one is only read.
fn log_marginal(x: PyReadonlyArray2<'_, f64>, model: &Bound<'_, PyModelSpec>) -> PyResult<f64> {
    let x = x.as_array();
    let model = build_model(&model.get().spec, x)?;
    with_model!(model, m => {
        // One evaluation: no tables of ln Γ (`prepare`), which would cost more than they
        // save, and the direct evaluation is the most accurate.
        let leaves = m.leaf_stats_all(x)?;
        let mut it = leaves.into_iter();
        let first = it.next().ok_or_else(|| RoseTreeError::param("X", "needs at least one row"))?;
        let all = it.fold(first, |acc, s| m.merge(&acc, &s));
        Ok(m.log_marginal(&all)?)
    })
}

/// `Δ_l` of BRT eq 1.31 from the log evidences of optimal and found trees of data sets
/// with `l` items each.
#[pyfunction]
fn excess_bits(optimal: Vec<f64>, found: Vec<f64>, l: usize) -> f64 {
    let pairs: Vec<(f64, f64)> = optimal.into_iter().zip(found).collect();
    brt::excess_bits(&pairs, l)
}

/// The compiled core of rosetree.
#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> pyo3::PyResult<()> {
    m.add_class::<PyRoseTree>()?;
    m.add_class::<PyTree>()?;
    m.add_class::<PyModelSpec>()?;
    m.add_class::<PyBrtParams>()?;
    m.add_function(wrap_pyfunction!(fit_brt, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate_tree, m)?)?;
    m.add_function(wrap_pyfunction!(optimal_tree, m)?)?;
    m.add_function(wrap_pyfunction!(log_marginal, m)?)?;
    m.add_function(wrap_pyfunction!(excess_bits, m)?)?;
    m.add_function(wrap_pyfunction!(learn::evidence_gradient, m)?)?;
    m.add_function(wrap_pyfunction!(learn::resolved_model, m)?)?;
    m.add_function(wrap_pyfunction!(learn::learn_brt, m)?)?;
    fit::register(m)?;
    distributed::register(m)?;
    coalescent::register(m)?;
    pydt::register(m)?;
    pydt_em::register(m)?;
    testing::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
