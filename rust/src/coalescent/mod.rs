//! Hierarchical clustering with Kingman's coalescent (Teh, Daumé & Roy 2007).
//!
//! The tree is a draw from Kingman's n-coalescent ([`kingman`]: leaves at time 0,
//! coalescence times negative, eq 2), and the data are a Markov process run along its
//! branches and observed at the leaves, integrated out by message passing
//! ([`crate::models::messages`]: Brownian diffusion or independent-sites mutation).
//! [`log_joint`] evaluates `ln p(x, π)` (eq 7) for any timed binary tree; [`fit`] finds a
//! tree by Greedy-Rate1 ([`greedy_rate1`], §4.2, `O(n²)`) or by Greedy-MaxProb and
//! Greedy-MinDuration ([`greedy_maxprob`], [`greedy_minduration`], §4.2, `O(n³)`), or
//! approximately by Greedy-Rate1 on parts of the data ([`greedy_rate1_approx`], about
//! `O(n · exact_below)`); [`smc`] samples weighted trees by
//! sequential Monte Carlo (SMC-PriorPrior, -PriorPost, -PostPost, §4.1) with an unbiased
//! estimate of `p(x)`. [`Fitted`] keeps a search's tree with the model and the rows, and
//! predicts from them ([`predict`]).
//!
//! # Examples
//! ```
//! use ndarray::array;
//! use rosetree::coalescent::{self, CoalescentParams};
//! use rosetree::models::messages::BrownianDiffusion;
//!
//! let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0]];
//! let model = BrownianDiffusion::isotropic(1.0, 2)?;
//! let fit = coalescent::fit(&model, &CoalescentParams::new().check()?, x.view())?;
//! assert_eq!(fit.tree.leaves_of(4).len(), 2);
//! let again = coalescent::log_joint(&model, x.view(), &fit.tree)?;
//! assert!((fit.log_joint - again).abs() < 1e-12);
//! # Ok::<(), rosetree::RoseTreeError>(())
//! ```

pub mod approx;
pub mod exact_greedy;
mod fitted;
pub mod greedy;
pub mod hyper;
pub mod insert;
pub mod kingman;
pub mod learn;
mod merges;
pub mod params;
pub mod predict;
pub mod smc;
pub mod stitch;

pub use approx::{ApproxParams, Router, cut_groups, cut_time, greedy_rate1_approx};
pub use exact_greedy::{greedy_maxprob, greedy_minduration};
pub use fitted::Fitted;
pub use greedy::{CoalescentFit, greedy_rate1};
pub use insert::{Growth, Join, JoinRule, insert_leaf, insert_rows, insert_rows_with};
pub use kingman::{check_timed_tree, log_joint, log_joint_from_leaves, log_prior, pair_rate};
pub use params::{CoalescentParams, Inference, ValidCoalescentParams};

use ndarray::ArrayView2;

use crate::error::Result;
use crate::models::messages::MessageModel;
use crate::parallel::Threads;

/// A coalescent tree for the rows of `x` under `model`, by the inference `params` names.
///
/// # Errors
/// Whatever [`MessageModel::leaf_messages`] reports for the data, and the errors of the
/// inference ([`greedy_rate1`], [`greedy_maxprob`], [`greedy_minduration`]).
pub fn fit<M: MessageModel + Clone>(
    model: &M,
    params: &ValidCoalescentParams,
    x: ArrayView2<'_, f64>,
) -> Result<CoalescentFit> {
    fit_leaves(model, params, model.leaf_messages(x)?, &|| false)
}

/// [`fit`] from leaf messages already computed; `interrupt` is polled every 50 ms or so and
/// stops the search with [`crate::RoseTreeError::Interrupted`] when it returns `true`.
///
/// # Errors
/// As [`fit`], plus [`crate::RoseTreeError::Interrupted`].
pub fn fit_leaves<M: MessageModel + Clone>(
    model: &M,
    params: &ValidCoalescentParams,
    leaves: Vec<(M::Message, f64)>,
    interrupt: &dyn Fn() -> bool,
) -> Result<CoalescentFit> {
    let threads = Threads::new(params.n_threads)?;
    match params.inference {
        Inference::GreedyRate1 => match params.approx {
            Some(approx) => greedy_rate1_approx(model, leaves, approx, &threads, interrupt),
            None => greedy_rate1(model, leaves, &threads, interrupt),
        },
        Inference::GreedyMaxProb => greedy_maxprob(model, leaves, &threads, interrupt),
        Inference::GreedyMinDuration => greedy_minduration(model, leaves, &threads, interrupt),
    }
}

#[cfg(test)]
mod tests;
