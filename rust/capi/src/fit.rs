//! Fitting the three families, and the fitted model they share: a tree over the data rows
//! with its score, read into caller buffers.

use std::ffi::c_char;

use ndarray::ArrayView2;
use rosetree::brt::{self, BrtParams, LearnParams, Learnable, Mixing, Predictor};
use rosetree::coalescent::learn::{Lambda, LearnableRate};
use rosetree::coalescent::{self, CoalescentFit};
use rosetree::models::messages::{BrownianDiffusion, MaskedBrownian};
use rosetree::models::{ClusterModel, RowQueries};
use rosetree::parallel::Threads;
use rosetree::pydt::{
    self,
    mcmc::{self, McmcConfig, Start},
};
use rosetree::{RoseTree, Tree};

use crate::buffer;
use crate::data::RtData;
use crate::error::{Error, Result, RtStatus, guard};
use crate::handle::{self, Handle};
use crate::interrupt::Interrupt;
use crate::models::RtModel;
use crate::params::{RtBrtParams, RtCoalescentParams, RtPydtParams};

macro_rules! brt_fit {
    ([] $($variant:ident: $model:ty = $name:literal;)*) => {
        /// A fitted rose tree with what prediction needs: the model and every node's
        /// statistics (no data rows).
        pub(crate) enum BrtFit {
            $($variant(Predictor<$model>),)*
        }

        impl BrtFit {
            fn new(model: rosetree::models::Conjugate, options: &RtBrtParams, x: ArrayView2<'_, f64>) -> Result<Self> {
                let params = options.params.check()?;
                let interrupt = || Interrupt::poll(options.interrupt);
                Ok(match model {
                    $(rosetree::models::Conjugate::$variant(mut m) => {
                        if let Some((tie, n_restarts, seed)) = options.learn {
                            let learned = learn(m, options, tie, n_restarts, seed, x, &interrupt)?;
                            let mut m = learned.model;
                            m.prepare(x.nrows() + 1);
                            let leaves = m.leaf_stats_all(x)?;
                            return Ok(Self::$variant(Predictor::new(m, learned.tree, leaves)?));
                        }
                        m.prepare(x.nrows() + 1);
                        let leaves = m.leaf_stats_all(x)?;
                        let tree = brt::fit_stats(&m, &params, leaves.clone(), &interrupt)?;
                        Self::$variant(Predictor::new(m, tree, leaves)?)
                    })*
                })
            }

            fn tree(&self) -> &RoseTree {
                match self {
                    $(Self::$variant(p) => p.tree(),)*
                }
            }

            fn n_features(&self) -> usize {
                match self {
                    $(Self::$variant(p) => p.model().n_features(),)*
                }
            }

            fn log_predictive(&self, x: ArrayView2<'_, f64>) -> Result<Vec<f64>> {
                let threads = Threads::new(None)?;
                Ok(match self {
                    $(Self::$variant(p) => {
                        let rows = p.model().leaf_stats_all(x)?;
                        p.log_predictive(&rows, &threads, &|| false)?
                    })*
                })
            }
        }
    };
}
rosetree::conjugate_families!(brt_fit,);

/// The hyperparameters of `model` and the mixing value of `options` learnt with the tree
/// ([`brt::learn_with`]), every search readied as `rt_brt_fit`'s own (and the Python
/// estimator's), so that the three give the same trees.
fn learn<M: Learnable + RowQueries>(
    model: M,
    options: &RtBrtParams,
    tie: bool,
    n_restarts: usize,
    seed: u64,
    x: ArrayView2<'_, f64>,
    interrupt: &dyn Fn() -> bool,
) -> Result<brt::Learned<M>> {
    let learn = LearnParams::new(options.params)
        .tie(tie)
        .n_restarts(n_restarts)
        .seed(seed)
        .check()?;
    let mut search = |m: &M, mixing: &Mixing| {
        let mut m = m.clone();
        m.prepare(x.nrows() + 1);
        let leaves = m.leaf_stats_all(x)?;
        let params = BrtParams {
            mixing: *mixing,
            ..options.params
        }
        .check()?;
        brt::fit_stats(&m, &params, leaves, interrupt)
    };
    Ok(brt::learn_with(
        &model,
        &learn,
        x,
        &mut search,
        interrupt,
        &mut |_| {},
    )?)
}

/// A fitted model of one of the three families.
pub struct RtFit(Fitted);

enum Fitted {
    /// Bayesian rose tree (or BHC).
    Brt(Box<BrtFit>),
    /// Kingman's coalescent, with its messages for prediction.
    Coalescent(Box<CoalescentFitted>),
    /// A diffusion-tree chain's kept states and the state the fit reports.
    Pydt(Box<PydtFit>),
}

/// A diffusion-tree chain's kept states, and the state the fit reports: the tree of their
/// mean divergence times ([`pydt::Fitted::mean_summary`]), or the best state where there is
/// no summary (one kept state, or more rows than the summary takes).
pub(crate) struct PydtFit {
    chain: pydt::Fitted,
    summary: Option<mcmc::Sample>,
}

impl PydtFit {
    fn reported(&self) -> &mcmc::Sample {
        self.summary.as_ref().unwrap_or_else(|| self.chain.best())
    }
}

/// A fitted coalescent under the model the fit used (missing entries: the masked model).
enum CoalescentFitted {
    Complete(coalescent::Fitted<BrownianDiffusion>),
    Missing(coalescent::Fitted<MaskedBrownian>),
}

impl CoalescentFitted {
    fn search_result(&self) -> &CoalescentFit {
        match self {
            Self::Complete(f) => f.search_result(),
            Self::Missing(f) => f.search_result(),
        }
    }

    fn n_features(&self) -> usize {
        match self {
            Self::Complete(f) => f.x().ncols(),
            Self::Missing(f) => f.x().ncols(),
        }
    }

    /// `ln p(y | x, π)` of each row of `x` (the messages built at the first call).
    fn log_density(&self, x: ArrayView2<'_, f64>) -> Result<Vec<f64>> {
        let threads = Threads::new(None)?;
        Ok(match self {
            Self::Complete(f) => f.log_density(x, &threads)?,
            Self::Missing(f) => f.log_density(x, &threads)?,
        })
    }
}

/// Divergence times per branch in the diffusion tree's predictive mixture (the Python
/// estimator's default `n_predictive_points`).
const PYDT_PREDICTIVE_POINTS: usize = 3;

impl Handle for RtFit {
    const NAME: &'static str = "rt_fit";
}

impl RtFit {
    fn tree(&self) -> &Tree {
        match &self.0 {
            Fitted::Brt(fit) => fit.tree().tree(),
            Fitted::Coalescent(c) => &c.search_result().tree,
            Fitted::Pydt(fit) => &fit.reported().tree,
        }
    }

    fn rose_tree(&self, what: &str) -> Result<&BrtFit> {
        match &self.0 {
            Fitted::Brt(fit) => Ok(fit),
            _ => Err(Error::new(
                RtStatus::InvalidHandle,
                format!("{what} needs a rose tree (a fit of rt_brt_fit)"),
            )),
        }
    }
}

/// Fits a Bayesian rose tree (or, with binary options, Bayesian hierarchical clustering)
/// to `data` under `model` by the greedy search (BRT §4), into a new fit in `*out`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_fit(
    model: *const RtModel,
    params: *const RtBrtParams,
    data: *const RtData,
    out: *mut *mut RtFit,
) -> RtStatus {
    guard(|| {
        let spec = &handle::get(model, "model")?.spec;
        let params = handle::get(params, "params")?;
        let x = handle::get(data, "data")?.x.view();
        let fit = BrtFit::new(spec.build(x)?, params, x)?;
        handle::emit(out, "out", RtFit(Fitted::Brt(Box::new(fit))))
    })
}

/// Fits a coalescent tree to `data` under Brownian diffusion (Teh, Daumé & Roy 2007) by
/// the greedy search of `params`, into a new fit in `*out`. NaN entries are missing values,
/// integrated out.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_fit(
    params: *const RtCoalescentParams,
    data: *const RtData,
    out: *mut *mut RtFit,
) -> RtStatus {
    guard(|| {
        let params = handle::get(params, "params")?;
        let x = handle::get(data, "data")?.x.view();
        let model =
            BrownianDiffusion::isotropic(params.lambda, x.ncols())?.with_noise(params.noise)?;
        let valid = params.params.check()?;
        let interrupt = || Interrupt::poll(params.interrupt);
        let fitted = if x.iter().any(|v| v.is_nan()) {
            if params.learn_rounds > 0 {
                return Err(Error::param(
                    "params",
                    "the rate cannot be learnt from data with missing entries \
                     (rt_coalescent_params_set_learning)",
                ));
            }
            let masked = MaskedBrownian::new(model)?;
            let fit = coalescent::Fitted::fit(masked, &valid, x, &interrupt)?;
            refuse_infinite(fit.search_result())?;
            CoalescentFitted::Missing(fit)
        } else {
            let mut fit = coalescent::Fitted::fit(model, &valid, x, &interrupt)?;
            refuse_infinite(fit.search_result())?;
            if params.learn_rounds > 0 {
                let start = Lambda::Shared(params.lambda);
                let prior = BrownianDiffusion::default_prior(&start, x.ncols());
                fit = fit
                    .learn(start, &prior, &valid, params.learn_rounds, &interrupt)?
                    .fit;
                refuse_infinite(fit.search_result())?;
            }
            CoalescentFitted::Complete(fit)
        };
        handle::emit(out, "out", RtFit(Fitted::Coalescent(Box::new(fitted))))
    })
}

/// A coalescent fit whose log joint is not finite: without observation noise, rows equal
/// on the columns observed in both merge at the leaves' time with infinite density.
fn refuse_infinite(fit: &CoalescentFit) -> Result<()> {
    if fit.log_joint.is_finite() {
        return Ok(());
    }
    let tree = &fit.tree;
    let heights = tree.heights().unwrap_or_default();
    let at_zero = (tree.n_leaves()..tree.nodes().len()).find(|&v| heights.get(v) == Some(&0.0));
    match at_zero {
        Some(v) if fit.log_joint == f64::INFINITY => {
            let mut rows = tree.leaves_of(v);
            rows.sort_unstable();
            Err(Error::new(
                RtStatus::InvalidData,
                format!(
                    "invalid data in row {}: rows {} and {} are equal (on the columns observed \
                     in both), which have infinite density under Brownian diffusion without \
                     observation noise; give the model noise (rt_coalescent_params_set_noise)",
                    rows[1], rows[0], rows[1]
                ),
            ))
        }
        _ => Err(Error::new(
            RtStatus::Numerical,
            format!("the tree's log joint is {}", fit.log_joint),
        )),
    }
}

/// Samples Pitman–Yor diffusion trees for `data` by MCMC from a draw of the prior, with
/// the random seed `seed`. The fit's tree is the tree of the kept states' (after the
/// burn-in) mean divergence times: average linkage on one minus each pair's parting time,
/// averaged over the states, each merge a branch point at one minus its distance, as
/// `PitmanYorDiffusionTree(summary="mean")`; its score is that tree's log joint under the
/// hyperparameters of the kept state with the highest log joint. With one kept state, or
/// more than 4,000 rows, the tree and score are those of that best state. The predictive
/// density is the mean over every kept state.
#[unsafe(no_mangle)]
pub extern "C" fn rt_pydt_fit(
    params: *const RtPydtParams,
    data: *const RtData,
    seed: u64,
    out: *mut *mut RtFit,
) -> RtStatus {
    guard(|| {
        let params = handle::get(params, "params")?;
        let x = handle::get(data, "data")?.x.view();
        let start = Start {
            tree: None,
            params: params.pydt()?,
            sigma2: params.sigma2,
        };
        let config = McmcConfig {
            n_iter: params.n_iter,
            burn_in: params.burn_in,
            ..McmcConfig::default()
        };
        let interrupt = || Interrupt::poll(params.interrupt);
        let result = mcmc::run(x, start, &config, seed, &interrupt, &mut |_, _| {})?;
        let chain = pydt::Fitted::new(x, result, PYDT_PREDICTIVE_POINTS)?;
        let summary = chain.mean_summary()?;
        let fit = PydtFit { chain, summary };
        handle::emit(out, "out", RtFit(Fitted::Pydt(Box::new(fit))))
    })
}

/// The number of leaves (data rows) and of nodes of the fitted tree.
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_size(
    fit: *const RtFit,
    n_leaves: *mut usize,
    n_nodes: *mut usize,
) -> RtStatus {
    guard(|| {
        let tree = handle::get(fit, "fit")?.tree();
        buffer::scalar(tree.n_leaves(), n_leaves, "n_leaves")?;
        buffer::scalar(tree.nodes().len(), n_nodes, "n_nodes")
    })
}

/// The fit's score: for a rose tree the log evidence `ln p(D | T)` (BRT eq 1.5); for the
/// coalescent `ln p(x, π)` (eq 7 of Teh et al.); for the diffusion tree
/// `ln p(X, T, t | α, β, c, σ²)` of the fit's tree (see `rt_pydt_fit`).
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_score(fit: *const RtFit, score: *mut f64) -> RtStatus {
    guard(|| {
        let value = match &handle::get(fit, "fit")?.0 {
            Fitted::Brt(fit) => fit.tree().log_evidence(),
            Fitted::Coalescent(c) => c.search_result().log_joint,
            Fitted::Pydt(fit) => fit.reported().log_joint,
        };
        buffer::scalar(value, score, "score")
    })
}

/// Each node's parent id into `parents` (`n_nodes` values; −1 at the root).
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_parents(fit: *const RtFit, parents: *mut i64, len: usize) -> RtStatus {
    guard(|| {
        let tree = handle::get(fit, "fit")?.tree();
        let ids: Vec<i64> = tree
            .nodes()
            .iter()
            .map(|node| node.parent.map_or(-1, |p| p as i64))
            .collect();
        buffer::output(&ids, parents, len, "parents")
    })
}

/// Each node's height into `heights` (`n_nodes` values): for a rose tree
/// `−max ln r` along the path from the root (the heights of its SciPy linkage); for the
/// coalescent the coalescence times (≤ 0, leaves at 0); for the diffusion tree the
/// divergence times (in `[0, 1]`, leaves at 1).
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_heights(fit: *const RtFit, heights: *mut f64, len: usize) -> RtStatus {
    guard(|| {
        let tree = handle::get(fit, "fit")?.tree();
        let values = tree
            .heights()
            .ok_or_else(|| Error::new(RtStatus::Internal, "the fitted tree has no heights"))?;
        buffer::output(values, heights, len, "heights")
    })
}

/// The tree in Newick format, leaves named by row index, into `buf` of `len` bytes
/// (snprintf-style: `*needed`, when not null, receives the size with the terminator;
/// `buf` may be null with `len` 0 to ask for it).
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_newick(
    fit: *const RtFit,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> RtStatus {
    guard(|| {
        let newick = handle::get(fit, "fit")?.tree().to_newick(None);
        buffer::text(&newick, buf, len, needed)
    })
}

/// Flat clusters of a rose tree by Heller & Ghahramani's top-down cut: descending from the
/// root, a node whose posterior merge probability `r_T ≥ threshold` (BRT eq 1.26) is one
/// cluster. Writes each row's label (`0..K−1`, numbered by first row) into `labels`
/// (`n_leaves` values) and `K` into `*n_clusters` when it is not null.
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_cut(
    fit: *const RtFit,
    threshold: f64,
    labels: *mut i64,
    len: usize,
    n_clusters: *mut usize,
) -> RtStatus {
    guard(|| {
        let rose = handle::get(fit, "fit")?.rose_tree("rt_fit_cut")?.tree();
        write_cut(rose, threshold, labels, len, n_clusters)
    })
}

/// The flat clusters the Python estimators report as `labels_` by default: the fitted tree
/// re-weighted under the Dirichlet-process mixing rule with concentration `dp_alpha`, then
/// cut top-down at `r_T ≥ threshold` (as `rt_fit_cut`). With `dp_alpha = 1` and
/// `threshold = 0.5` these are `BayesianRoseTree().labels_`. Writes each row's label
/// (`0..K−1`, numbered by first row) into `labels` (`n_leaves` values) and `K` into
/// `*n_clusters` when it is not null.
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_labels(
    fit: *const RtFit,
    dp_alpha: f64,
    threshold: f64,
    labels: *mut i64,
    len: usize,
    n_clusters: *mut usize,
) -> RtStatus {
    guard(|| {
        let rose = handle::get(fit, "fit")?.rose_tree("rt_fit_labels")?.tree();
        let mixing = Mixing::Dp { alpha: dp_alpha };
        mixing.check()?;
        let remixed = brt::remix(rose, &mixing);
        write_cut(&remixed, threshold, labels, len, n_clusters)
    })
}

/// The labels of the cut `r_T ≥ threshold` of `rose` into the caller's buffers.
fn write_cut(
    rose: &RoseTree,
    threshold: f64,
    labels: *mut i64,
    len: usize,
    n_clusters: *mut usize,
) -> Result<()> {
    let nodes = rose.cut(threshold)?;
    let values: Vec<i64> = rose
        .tree()
        .labels(&nodes)?
        .into_iter()
        .map(|l| l as i64)
        .collect();
    buffer::output(&values, labels, len, "labels")?;
    if !n_clusters.is_null() {
        buffer::scalar(nodes.len(), n_clusters, "n_clusters")?;
    }
    Ok(())
}

/// The log predictive density `ln p(x | D, T)` of each row of `data`, into `out` (one value
/// per row): under a fitted rose tree, BRT eq 1.25; under a diffusion tree, the mixture of
/// Knowles & Ghahramani §5.3 averaged over the chain's kept states, each branch's divergence
/// time represented by 3 times (the Python estimator's `score_samples`);
/// under a coalescent tree, the density of a new leaf joining it (Teh et al. §4.4, as
/// `KingmanCoalescent.score_samples`).
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_score_samples(
    fit: *const RtFit,
    data: *const RtData,
    out: *mut f64,
    len: usize,
) -> RtStatus {
    guard(|| {
        let fit = handle::get(fit, "fit")?;
        let x = handle::get(data, "data")?.x.view();
        // Before the work: wrong data or a wrong buffer fail at once.
        let check = |fitted_columns: usize| -> Result<()> {
            if x.ncols() != fitted_columns {
                return Err(Error::new(
                    RtStatus::ShapeMismatch,
                    format!(
                        "`data` has {} columns; the tree was fitted to {fitted_columns}",
                        x.ncols()
                    ),
                ));
            }
            buffer::check_len(x.nrows(), len, "out")
        };
        let values = match &fit.0 {
            Fitted::Brt(rose) => {
                check(rose.n_features())?;
                rose.log_predictive(x)?
            }
            Fitted::Pydt(pydt) => {
                check(pydt.chain.x().ncols())?;
                pydt.chain.log_density(x, &Threads::new(None)?)?
            }
            Fitted::Coalescent(c) => {
                check(c.n_features())?;
                c.log_density(x)?
            }
        };
        buffer::output(&values, out, len, "out")
    })
}

/// Releases `fit`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_fit_free(fit: *mut RtFit) -> RtStatus {
    guard(|| handle::release(fit, "fit"))
}
