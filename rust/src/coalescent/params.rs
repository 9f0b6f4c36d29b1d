//! Options of a coalescent fit, checked once ([`CoalescentParams::check`]) into a
//! [`ValidCoalescentParams`] that the inference trusts.

use std::ops::Deref;

use crate::approx::ApproxParams;
use crate::error::{Result, RoseTreeError};

/// How the tree is inferred (Teh et al. §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inference {
    /// Greedy-Rate1 (§4.2): `O(n²)` pair scores, each pair's time fixed under rate 1.
    GreedyRate1,
    /// Greedy-MaxProb (§4.2): at every step the pair with the largest term of eq 7 at its
    /// optimal duration under the true rate; `O(n³)` pair scores.
    GreedyMaxProb,
    /// Greedy-MinDuration (§4.2): at every step the pair with the shortest optimal duration
    /// under the true rate; `O(n³)` pair scores.
    GreedyMinDuration,
}

/// Options of a coalescent fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoalescentParams {
    /// The inference algorithm.
    pub inference: Inference,
    /// Worker threads for pair scoring; `None` uses rayon's global pool.
    pub n_threads: Option<usize>,
    /// The approximate, linear-time search ([`super::greedy_rate1_approx`]) with these
    /// options; `None`: the exact search. Greedy-Rate1 only.
    pub approx: Option<ApproxParams>,
}

impl Default for CoalescentParams {
    fn default() -> Self {
        Self::new()
    }
}

impl CoalescentParams {
    /// Greedy-Rate1 on rayon's global pool.
    pub fn new() -> Self {
        Self {
            inference: Inference::GreedyRate1,
            n_threads: None,
            approx: None,
        }
    }

    /// The approximate search with these options (`None`: exact). Greedy-Rate1 only.
    #[must_use]
    pub fn approx(mut self, approx: Option<ApproxParams>) -> Self {
        self.approx = approx;
        self
    }

    /// The inference algorithm.
    #[must_use]
    pub fn inference(mut self, inference: Inference) -> Self {
        self.inference = inference;
        self
    }

    /// The number of worker threads (`None`: rayon's global pool).
    #[must_use]
    pub fn n_threads(mut self, n_threads: Option<usize>) -> Self {
        self.n_threads = n_threads;
        self
    }

    /// Checks every option once and returns the options as a type that the inference trusts.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming the option at fault.
    pub fn check(self) -> Result<ValidCoalescentParams> {
        if self.n_threads == Some(0) {
            return Err(RoseTreeError::param("n_jobs", "must be at least 1"));
        }
        if let Some(approx) = self.approx {
            if self.inference != Inference::GreedyRate1 {
                return Err(RoseTreeError::param(
                    "approximate",
                    "the approximate search is a Greedy-Rate1 search: use \
                     inference=\"greedy-rate1\"",
                ));
            }
            approx.check()?;
        }
        Ok(ValidCoalescentParams(self))
    }
}

/// [`CoalescentParams`] that have passed [`CoalescentParams::check`]: the only way to get
/// one, so code that receives it need not check again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidCoalescentParams(CoalescentParams);

impl Deref for ValidCoalescentParams {
    type Target = CoalescentParams;

    fn deref(&self) -> &CoalescentParams {
        &self.0
    }
}
