//! Bayesian rose trees (Blundell, Teh & Heller) and their binary special case, Bayesian
//! hierarchical clustering (Heller & Ghahramani): greedy construction, evaluation of a given
//! tree, exhaustive search for small data sets, and the optional edge-contraction pass.
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
mod contract;
mod evaluate;
mod exhaustive;
mod gradient;
mod greedy;
mod merge;
mod mixing;
mod predict;
mod rose_tree;
mod score;

pub use approx::{ApproxParams, approximate};
pub use contract::contract_edges;
pub use evaluate::{evaluate, node_stats, remix};
pub use exhaustive::{MAX_EXHAUSTIVE, MAX_EXHAUSTIVE_DP, optimal_tree};
pub use gradient::{EvidenceGradient, evidence_gradient};
pub use greedy::greedy;
pub use merge::{MergeOp, MergeRule, Summary, best_merge, merged_summary};
pub use mixing::{Mixing, NodePrior, node_log_p};
pub use predict::{MissingEntry, Predictor, log_cluster_weights};
pub use rose_tree::{MAX_PARTITION_ROWS, NodeValues, Partition, RoseTree};
pub use score::{Score, SignedLog};

use ndarray::ArrayView2;

use crate::error::Result;
use crate::models::ClusterModel;
use crate::parallel::Threads;

/// Options of the greedy search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrtParams {
    /// The mixing-proportion rule.
    pub mixing: Mixing,
    /// Join only (Bayesian hierarchical clustering).
    pub binary: bool,
    /// How candidate merges are ranked.
    pub merge_rule: MergeRule,
    /// Run the edge-contraction pass after the greedy search.
    pub contract: bool,
    /// Worker threads for pair scoring; `None` uses rayon's global pool.
    pub n_threads: Option<usize>,
    /// Use the approximate search ([`approximate`]) with these options.
    pub approx: Option<ApproxParams>,
}

impl BrtParams {
    /// Rose-tree search with `mixing`, no contraction pass, rayon's global pool.
    pub fn new(mixing: Mixing) -> Self {
        Self {
            mixing,
            binary: false,
            merge_rule: MergeRule::LikelihoodRatio,
            contract: false,
            n_threads: None,
            approx: None,
        }
    }

    /// Join only: Bayesian hierarchical clustering.
    #[must_use]
    pub fn binary(mut self, binary: bool) -> Self {
        self.binary = binary;
        self
    }

    /// How candidate merges are ranked.
    #[must_use]
    pub fn merge_rule(mut self, merge_rule: MergeRule) -> Self {
        self.merge_rule = merge_rule;
        self
    }

    /// Whether to contract edges after the greedy search.
    #[must_use]
    pub fn contract(mut self, contract: bool) -> Self {
        self.contract = contract;
        self
    }

    /// The number of worker threads (`None`: rayon's global pool).
    #[must_use]
    pub fn n_threads(mut self, n_threads: Option<usize>) -> Self {
        self.n_threads = n_threads;
        self
    }

    /// Use the approximate search for large data (`None`: the exact greedy search).
    #[must_use]
    pub fn approx(mut self, approx: Option<ApproxParams>) -> Self {
        self.approx = approx;
        self
    }

    /// Checks every option.
    ///
    /// # Errors
    /// [`crate::RoseTreeError::InvalidParameter`] naming the option at fault.
    pub fn check(&self) -> Result<()> {
        self.mixing.check()?;
        if self.n_threads == Some(0) {
            return Err(crate::RoseTreeError::param("n_jobs", "must be at least 1"));
        }
        self.approx.as_ref().map_or(Ok(()), ApproxParams::check)
    }
}

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
/// let tree = brt::fit(&model, &BrtParams::new(Mixing::Brt { gamma: 0.5 }), x.view())?;
/// assert_eq!(tree.n_leaves(), 4);
/// assert!(tree.log_evidence() < 0.0);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// Invalid options, data outside the model's support, fewer than two rows.
pub fn fit<M: ClusterModel>(
    model: &M,
    params: &BrtParams,
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
pub fn fit_stats<M: ClusterModel>(
    model: &M,
    params: &BrtParams,
    leaves: Vec<M::Stats>,
    interrupt: &dyn Fn() -> bool,
) -> Result<RoseTree> {
    params.check()?;
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
