//! Options of the approximate, linear-time searches for data sets too large for an exact,
//! quadratic one: the rose tree's ([`crate::brt::approximate`]) and Greedy-Rate1's
//! ([`crate::coalescent::greedy_rate1_approx`]). Both sample a part's rows, fit the sample,
//! send every row to one of the sample tree's top clusters and treat each cluster's rows the
//! same way until a part has at most `exact_below` rows.

use crate::error::{Result, RoseTreeError};

/// Options of the approximate search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApproxParams {
    /// Parts with at most this many rows are built by the exact greedy search.
    pub exact_below: usize,
    /// Rows sampled to find the top-level clusters of a larger part.
    pub sample: usize,
    /// Seed of the sampling.
    pub seed: u64,
}

impl Default for ApproxParams {
    fn default() -> Self {
        Self {
            exact_below: 4000,
            sample: 1000,
            seed: 0,
        }
    }
}

impl ApproxParams {
    /// Checks the options.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `exact_below` below 2 or `sample` below 2.
    pub fn check(&self) -> Result<()> {
        if self.exact_below < 2 {
            return Err(RoseTreeError::param("exact_below", "must be at least 2"));
        }
        if self.sample < 2 || self.sample > self.exact_below {
            return Err(RoseTreeError::param(
                "approx_sample",
                format!("must lie between 2 and exact_below = {}", self.exact_below),
            ));
        }
        Ok(())
    }
}
