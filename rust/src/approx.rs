//! Options of the approximate, linear-time searches for data sets too large for an exact,
//! quadratic one: the rose tree's ([`crate::brt::approximate`]) and Greedy-Rate1's
//! ([`crate::coalescent::greedy_rate1_approx`]). Both sample a part's rows, fit the sample,
//! send every row to one of the sample tree's top clusters and treat each cluster's rows the
//! same way until a part has at most `exact_below` rows.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::{Result, RoseTreeError};
use crate::parallel::Threads;

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

/// Each part's result (`None` for an empty part) from `build(part, seed)`, in parallel on
/// `threads`. The seeds are drawn from `rng` before any part is built, in part order, so the
/// results do not depend on scheduling or on the number of threads.
///
/// # Errors
/// The first error of `build` in part order.
pub(crate) fn build_parts<S: Send>(
    threads: &Threads,
    parts: Vec<Vec<usize>>,
    rng: &mut Xoshiro256PlusPlus,
    build: impl Fn(Vec<usize>, u64) -> Result<S> + Sync + Send,
) -> Result<Vec<Option<S>>> {
    let seeded: Vec<(Vec<usize>, u64)> = parts.into_iter().map(|p| (p, rng.random())).collect();
    threads.try_map_owned(seeded, 2, |(part, seed)| {
        if part.is_empty() {
            Ok(None)
        } else {
            build(part, seed).map(Some)
        }
    })
}
