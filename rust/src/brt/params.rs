//! Options of the greedy rose-tree search, checked once ([`BrtParams::check`]) into a
//! [`ValidBrtParams`] that the search trusts.

use std::ops::Deref;

use super::{ApproxParams, MergeRule, Mixing};
use crate::error::{Result, RoseTreeError};

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
    /// Use the approximate search ([`super::approximate`]) with these options.
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

    /// Checks every option once and returns the options as a type that the search trusts.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming the option at fault.
    pub fn check(self) -> Result<ValidBrtParams> {
        self.mixing.check()?;
        if self.n_threads == Some(0) {
            return Err(RoseTreeError::param("n_jobs", "must be at least 1"));
        }
        if let Some(approx) = &self.approx {
            approx.check()?;
        }
        Ok(ValidBrtParams(self))
    }
}

/// [`BrtParams`] that have passed [`BrtParams::check`]: the only way to get one, so code
/// that receives it need not check again (the `ParamGuard` pattern of linfa).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidBrtParams(BrtParams);

impl ValidBrtParams {
    /// The same options with another mixing rule, one that is valid by construction (the
    /// hyperparameter learner's, whose coordinates keep it in its domain).
    pub(crate) fn with_mixing(self, mixing: Mixing) -> Self {
        debug_assert!(mixing.check().is_ok(), "{mixing:?}");
        Self(BrtParams { mixing, ..self.0 })
    }
}

impl Deref for ValidBrtParams {
    type Target = BrtParams;

    fn deref(&self) -> &BrtParams {
        &self.0
    }
}
