//! A fitted diffusion tree: the kept states of a chain with the rows they describe.

use std::sync::OnceLock;

use ndarray::{Array2, ArrayView2};

use super::mcmc::{ChainLikelihood, Isotropic, McmcResult, Sample};
use crate::error::{Result, RoseTreeError};
use crate::math::log_sum_exp;
use crate::parallel::Threads;
use crate::tree::Tree;

/// The kept states of a diffusion-tree chain with its training rows: the best state (the
/// highest log joint, the first of equals) as the fit's tree, and the predictive density of
/// new rows averaged over every kept state (§5.3, uniform weights), as the Python
/// estimator's `score_samples` gives it. The states' predictive mixtures are built at the
/// first prediction and kept.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::parallel::Threads;
/// use rosetree::pydt::{Fitted, PydtParams};
/// use rosetree::pydt::mcmc::{self, McmcConfig, Start};
///
/// let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0]];
/// let start = Start { tree: None, params: PydtParams::new(1.0, 0.2, 1.0)?, sigma2: 1.0 };
/// let chain = mcmc::run(x.view(), start, &McmcConfig::default(), 1, &|| false, &mut |_, _| {})?;
/// let fitted = Fitted::new(x.view(), chain, 3)?;
/// assert_eq!(fitted.samples().len(), 50); // the default keeps the second half of 100 sweeps
/// let near = fitted.log_density(array![[0.0, 0.0]].view(), &Threads::new(Some(1))?)?;
/// let far = fitted.log_density(array![[9.0, -9.0]].view(), &Threads::new(Some(1))?)?;
/// assert!(near[0] > far[0]);
/// // One tree for the chain: its states' mean divergence times, scored under the best
/// // state's hyperparameters.
/// let summary = fitted.mean_summary()?.expect("50 kept states");
/// let best = fitted.best();
/// let log_joint = rosetree::pydt::log_prior(&summary.tree, &best.params)?
///     + rosetree::pydt::log_likelihood(x.view(), &summary.tree, best.sigma2)?;
/// assert_eq!(summary.log_joint, log_joint);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// A chain under another likelihood ([`mcmc::run_model`](super::mcmc::run_model)) is fitted
/// by [`Fitted::with_likelihood`] with the same likelihood.
#[derive(Debug)]
pub struct Fitted<L: ChainLikelihood = Isotropic> {
    lik: L,
    x: Array2<f64>,
    samples: Vec<Sample>,
    best: usize,
    n_points: usize,
    predictors: OnceLock<Vec<L::Predictor>>,
}

impl Fitted<Isotropic> {
    /// The kept states of `chain` (of isotropic Brownian motion, [`mcmc::run`](super::mcmc::run))
    /// for its training rows `x` (its last state when it kept none, as a chain stopped
    /// during its burn-in), each branch's divergence time represented by `n_points` times
    /// in prediction.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `n_points` for 0;
    /// [`RoseTreeError::InvalidTree`] if the states' trees are not over the rows of `x`.
    pub fn new(x: ArrayView2<'_, f64>, chain: McmcResult, n_points: usize) -> Result<Self> {
        // Each state predicts with its own σ².
        let lik = Isotropic::new(chain.last.sigma2);
        Self::with_likelihood(lik, x, chain, n_points)
    }

    /// The tree of the kept states' mean divergence times
    /// ([`mean_divergence_tree`](super::summary::mean_divergence_tree)) as a state with the
    /// best state's hyperparameters and its own log joint under them: what the Python
    /// estimator's `summary="mean"` reports. `None` with fewer than two kept states or more
    /// than [`MAX_ROWS`](super::summary::MAX_ROWS) rows.
    ///
    /// # Errors
    /// As [`mean_divergence_tree`](super::summary::mean_divergence_tree),
    /// [`log_prior`](super::log_prior) and [`log_likelihood`](super::log_likelihood).
    pub fn mean_summary(&self) -> Result<Option<Sample>> {
        if self.samples.len() < 2 || self.x.nrows() > super::summary::MAX_ROWS {
            return Ok(None);
        }
        let trees: Vec<&Tree> = self.samples.iter().map(|s| &s.tree).collect();
        let tree = super::summary::mean_divergence_tree(&trees)?;
        let best = self.best();
        let log_joint = super::log_prior(&tree, &best.params)?
            + super::log_likelihood(self.x.view(), &tree, best.sigma2)?;
        Ok(Some(Sample {
            tree,
            params: best.params,
            sigma2: best.sigma2,
            log_joint,
        }))
    }
}

impl<L: ChainLikelihood> Fitted<L> {
    /// [`Fitted::new`] for a chain under the likelihood `lik`.
    ///
    /// # Errors
    /// As [`Fitted::new`].
    pub fn with_likelihood(
        lik: L,
        x: ArrayView2<'_, f64>,
        chain: McmcResult,
        n_points: usize,
    ) -> Result<Self> {
        if n_points == 0 {
            return Err(RoseTreeError::param(
                "n_points",
                "must be at least 1, got 0",
            ));
        }
        let samples = if chain.samples.is_empty() {
            vec![chain.last]
        } else {
            chain.samples
        };
        if let Some(s) = samples.iter().find(|s| s.tree.n_leaves() != x.nrows()) {
            return Err(RoseTreeError::InvalidTree(format!(
                "a kept tree has {} leaves but X has {} rows",
                s.tree.n_leaves(),
                x.nrows()
            )));
        }
        let mut best = 0;
        for (i, s) in samples.iter().enumerate() {
            if s.log_joint > samples[best].log_joint {
                best = i;
            }
        }
        Ok(Self {
            lik,
            x: x.to_owned(),
            samples,
            best,
            n_points,
            predictors: OnceLock::new(),
        })
    }

    /// The training rows (row `i` is leaf `i`).
    pub fn x(&self) -> ArrayView2<'_, f64> {
        self.x.view()
    }

    /// The kept states, in the chain's order.
    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    /// The state with the highest log joint (the first of equals).
    pub fn best(&self) -> &Sample {
        &self.samples[self.best]
    }

    /// Each kept state's predictive mixture, built at the first call.
    ///
    /// # Errors
    /// As [`ChainLikelihood::predictor`]: for isotropic Brownian motion, as
    /// [`Predictor::new`](super::predict::Predictor::new).
    pub fn predictors(&self) -> Result<&[L::Predictor]> {
        if let Some(p) = self.predictors.get() {
            return Ok(p);
        }
        let built = self
            .samples
            .iter()
            .map(|s| self.lik.predictor(self.x.view(), s, self.n_points))
            .collect::<Result<Vec<_>>>()?;
        // Two threads may build them at once; both results are the same.
        Ok(self.predictors.get_or_init(|| built))
    }

    /// `ln p(y | X)` of each row `y` of `rows`: the log of the mean over the kept states of
    /// their predictive densities, rows on `threads`.
    ///
    /// # Errors
    /// As [`ChainLikelihood::log_density_row`], for the first row at fault.
    pub fn log_density(&self, rows: ArrayView2<'_, f64>, threads: &Threads) -> Result<Vec<f64>> {
        let predictors = self.predictors()?;
        let ln_k = (predictors.len() as f64).ln();
        let index: Vec<usize> = (0..rows.nrows()).collect();
        threads.try_map(&index, 2, |&i| {
            let terms = predictors
                .iter()
                .map(|p| L::log_density_row(p, rows.row(i), i))
                .collect::<Result<Vec<f64>>>()?;
            Ok(log_sum_exp(&terms) - ln_k)
        })
    }
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::pydt::PydtParams;
    use crate::pydt::mcmc::{self, McmcConfig, Start};

    #[test]
    fn the_density_is_the_mean_of_the_states_densities() {
        let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0], [1.0, 2.0]];
        let start = Start {
            tree: None,
            params: PydtParams::new(1.0, 0.2, 1.0).unwrap(),
            sigma2: 1.0,
        };
        let config = McmcConfig {
            n_iter: 20,
            burn_in: 10,
            thin: 2,
            ..McmcConfig::default()
        };
        let chain = mcmc::run(x.view(), start, &config, 3, &|| false, &mut |_, _| {}).unwrap();
        let fitted = Fitted::new(x.view(), chain.clone(), 2).unwrap();
        assert_eq!(fitted.samples().len(), 5);
        let best = chain
            .samples
            .iter()
            .map(|s| s.log_joint)
            .fold(f64::NEG_INFINITY, f64::max);
        assert_eq!(fitted.best().log_joint, best);
        let rows = array![[0.0, 0.0], [2.0, -1.0]];
        let got = fitted
            .log_density(rows.view(), &Threads::new(Some(2)).unwrap())
            .unwrap();
        for (i, value) in got.iter().enumerate() {
            // The mean of the densities, in plain (not log) space.
            let mean: f64 = chain
                .samples
                .iter()
                .map(|s| {
                    let p = s.predictor(x.view(), 2).unwrap();
                    p.log_density(rows.slice(ndarray::s![i..=i, ..])).unwrap()[0].exp()
                })
                .sum::<f64>()
                / 5.0;
            assert!(
                (value - mean.ln()).abs() < 1e-12,
                "row {i}: {value} vs {}",
                mean.ln()
            );
        }
        let other = array![[0.0], [1.0]];
        assert!(matches!(
            Fitted::new(other.view(), chain.clone(), 2),
            Err(RoseTreeError::InvalidTree(_))
        ));
        assert!(matches!(
            Fitted::new(x.view(), chain, 0),
            Err(RoseTreeError::InvalidParameter { .. })
        ));
    }
}
