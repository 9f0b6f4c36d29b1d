//! Bayesian rose trees (Blundell, Teh & Heller) and their binary special case, Bayesian
//! hierarchical clustering (Heller & Ghahramani): greedy construction, evaluation of a given
//! tree, exhaustive search for small data sets, the optional edge-contraction pass, the most
//! probable coarsening of a given tree ([`coarsen()`]), and
//! insertion of new rows into a fitted tree ([`GrowingTree`]).
//!
//! The five systems of the BRT chapter are parameter choices:
//!
//! | system | [`Mixing`] | `binary` |
//! |---|---|---|
//! | BRT    | `Brt { gamma }`   | `false` |
//! | BRT-γ  | `Gamma { gamma }` | `false` |
//! | BRT-DP | `Dp { alpha }`    | `false` |
//! | BHC-γ  | `Gamma { gamma }` (or `Brt`: identical on binary trees) | `true` |
//! | BHC-DP | `Dp { alpha }`    | `true` |

mod approx;
mod coarsen;
mod contract;
mod evaluate;
mod exhaustive;
mod gradient;
mod greedy;
mod insert;
pub mod learn;
mod merge;
mod mixing;
mod params;
mod predict;
mod rose_tree;
mod score;
mod stitch;

pub use approx::{ApproxParams, approximate, top_clusters};
pub use coarsen::{MAX_COARSEN_ENTRIES, MAX_COARSEN_SUMS, coarsen};
pub use contract::contract_edges;
pub use evaluate::{cut_remixed, evaluate, from_log_f, node_stats, remix};
pub use exhaustive::{MAX_EXHAUSTIVE, MAX_EXHAUSTIVE_DP, optimal_tree};
pub use gradient::{EvidenceGradient, evidence_gradient};
pub use greedy::greedy;
pub use insert::{DEFAULT_MAX_MOVES, GrowParams, GrowingTree, Insertion, grow};
pub use learn::{
    FTOL, Iteration, LOG_BOUND, LearnParams, Learnable, Learned, ValidLearnParams, learn,
    learn_with,
};
pub use merge::{MergeOp, MergeRule, best_merge, merged_summary};
pub use mixing::{Mixing, NodePrior, Summary, node_log_p};
pub use params::{BrtParams, ValidBrtParams};
pub use predict::{MissingEntry, Predictor, log_cluster_weights};
pub use rose_tree::{MAX_PARTITION_ROWS, NodeValues, Partition, RoseTree};
pub use score::{Score, SignedLog};
pub use stitch::{Part, Stitched, stitch};

use ndarray::ArrayView2;

use crate::error::Result;
use crate::models::RowQueries;
use crate::parallel::Threads;

/// Greedy Bayesian rose tree of the rows of `x`.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, BrtParams, Mixing};
/// use rosetree::models::BetaBernoulli;
///
/// let x = array![[1., 1., 0.], [1., 1., 0.], [0., 0., 1.], [0., 1., 1.]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 3)?;
/// let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check()?;
/// let tree = brt::fit(&model, &params, x.view())?;
/// assert_eq!(tree.n_leaves(), 4);
/// assert!(tree.log_evidence() < 0.0);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// Data outside the model's support, fewer than two rows.
pub fn fit<M: RowQueries>(
    model: &M,
    params: &ValidBrtParams,
    x: ArrayView2<'_, f64>,
) -> Result<RoseTree> {
    let leaves = model.leaf_stats_all(x)?;
    fit_stats(model, params, leaves, &|| false)
}

/// Greedy Bayesian rose tree from precomputed leaf statistics; `interrupt` is polled every
/// few merges and stops the search when it returns `true`.
///
/// # Errors
/// As [`fit`], plus [`crate::RoseTreeError::Interrupted`].
pub fn fit_stats<M: RowQueries>(
    model: &M,
    params: &ValidBrtParams,
    leaves: Vec<M::Stats>,
    interrupt: &dyn Fn() -> bool,
) -> Result<RoseTree> {
    let threads = Threads::new(params.n_threads)?;
    let (mixing, binary, rule) = (&params.mixing, params.binary, params.merge_rule);
    let tree = match params.approx {
        None => greedy(model, mixing, binary, rule, leaves, &threads, interrupt)?,
        Some(approx) => approximate(
            model, mixing, binary, rule, leaves, approx, &threads, interrupt,
        )?,
    };
    Ok(if params.contract {
        contract_edges(&tree, &params.mixing)
    } else {
        tree
    })
}

/// `Δ_l` of BRT eq 1.31: the mean excess code length, in bits per data item, of trees `T_i`
/// over the optimal trees `T*_i`, from pairs `(ln p(D_i | T*_i), ln p(D_i | T_i))` of data
/// sets with `l` items each.
pub fn excess_bits(log_evidence_pairs: &[(f64, f64)], l: usize) -> f64 {
    let total: f64 = log_evidence_pairs.iter().map(|(opt, got)| opt - got).sum();
    total / std::f64::consts::LN_2 / (l as f64 * log_evidence_pairs.len() as f64)
}

#[cfg(test)]
mod tests;
