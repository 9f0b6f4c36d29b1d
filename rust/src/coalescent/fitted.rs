//! A fitted coalescent: what a search found, with what prediction needs.

use std::sync::OnceLock;

use ndarray::{Array2, ArrayView2};

use super::learn::{Lambda, LambdaPrior, LearnOptions, LearnableRate, Learned, learn};
use super::predict::Predictor;
use super::{CoalescentFit, ValidCoalescentParams, fit_leaves};
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::parallel::Threads;
use crate::tree::Tree;

/// A coalescent tree fitted to the rows of `x` under a message model: the model, the
/// training rows, the tree and its `ln p(x, π)`, and the two-way messages of prediction
/// ([`Predictor`], Teh et al. §4.4), built at the first prediction and kept (their
/// quadrature grows with the events alive across each branch, which a fit that is never
/// asked to predict should not pay for).
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::coalescent::{CoalescentParams, Fitted};
/// use rosetree::models::messages::BrownianDiffusion;
/// use rosetree::parallel::Threads;
///
/// let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0]];
/// let model = BrownianDiffusion::isotropic(1.0, 2)?;
/// let fitted = Fitted::fit(model, &CoalescentParams::new().check()?, x.view(), &|| false)?;
/// let near = fitted.log_density(array![[0.05, 0.05]].view(), &Threads::new(Some(1))?)?;
/// let far = fitted.log_density(array![[9.0, -9.0]].view(), &Threads::new(Some(1))?)?;
/// assert!(near[0] > far[0]);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub struct Fitted<M: MessageModel> {
    model: M,
    x: Array2<f64>,
    fit: CoalescentFit,
    predictor: OnceLock<Predictor<M>>,
}

impl<M: MessageModel + std::fmt::Debug> std::fmt::Debug for Fitted<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fitted")
            .field("model", &self.model)
            .field("n_rows", &self.x.nrows())
            .field("log_joint", &self.fit.log_joint)
            .field("predictor_built", &self.predictor.get().is_some())
            .finish_non_exhaustive()
    }
}

impl<M: MessageModel + Clone> Fitted<M> {
    /// Fits a tree to the rows of `x` by the inference `params` names ([`super::fit`]);
    /// `interrupt` is polled as there.
    ///
    /// # Errors
    /// As [`super::fit_leaves`].
    pub fn fit(
        model: M,
        params: &ValidCoalescentParams,
        x: ArrayView2<'_, f64>,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Self> {
        let fit = fit_leaves(&model, params, model.leaf_messages(x)?, interrupt)?;
        Self::from_fit(model, x, fit)
    }

    /// A tree found elsewhere (a search, a file) for the rows of `x` under `model`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree's leaves are not the rows of `x`.
    pub fn from_fit(model: M, x: ArrayView2<'_, f64>, fit: CoalescentFit) -> Result<Self> {
        if fit.tree.n_leaves() != x.nrows() {
            return Err(RoseTreeError::InvalidTree(format!(
                "the tree has {} leaves but X has {} rows",
                fit.tree.n_leaves(),
                x.nrows()
            )));
        }
        Ok(Self {
            model,
            x: x.to_owned(),
            fit,
            predictor: OnceLock::new(),
        })
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The training rows (row `i` is leaf `i`).
    pub fn x(&self) -> ArrayView2<'_, f64> {
        self.x.view()
    }

    /// The timed tree: leaves at time 0, coalescence times `≤ 0`.
    pub fn tree(&self) -> &Tree {
        &self.fit.tree
    }

    /// `ln p(x, π)` of the tree (eq 7).
    pub fn log_joint(&self) -> f64 {
        self.fit.log_joint
    }

    /// The tree and its log joint.
    pub fn search_result(&self) -> &CoalescentFit {
        &self.fit
    }

    /// The messages of the training rows on the tree, built at the first call.
    ///
    /// # Errors
    /// As [`Predictor::new`].
    pub fn predictor(&self) -> Result<&Predictor<M>> {
        if let Some(p) = self.predictor.get() {
            return Ok(p);
        }
        let built = Predictor::new(self.model.clone(), self.x.view(), self.fit.tree.clone())?;
        // Two threads may build it at once; both results are the same.
        Ok(self.predictor.get_or_init(|| built))
    }

    /// `ln p(y | x, π)` of each row `y` of `rows`: a new leaf joining the tree (§4.4), rows
    /// on `threads`.
    ///
    /// # Errors
    /// As [`Predictor::new`], and whatever [`MessageModel::leaf_message`] reports for a
    /// row (the first at fault, in row order).
    pub fn log_density(&self, rows: ArrayView2<'_, f64>, threads: &Threads) -> Result<Vec<f64>> {
        let predictor = self.predictor()?;
        let index: Vec<usize> = (0..rows.nrows()).collect();
        threads.try_map(&index, 2, |&i| {
            Ok(predictor.log_density_by_branch(rows.row(i), i)?.0)
        })
    }
}

impl<M: LearnableRate> Fitted<M> {
    /// Learns `Λ` with the tree ([`learn`]): coordinate ascent from this fit, with the model
    /// under `lambda` and the inference of `params` for every new tree; at most `rounds`
    /// rounds. The result holds the fit under the learnt `Λ` (its tree the last one that
    /// raised `ln p(x, π) + ln p(Λ)`), `Λ` itself and the objective's trace.
    ///
    /// # Errors
    /// As [`learn`]; [`RoseTreeError::InvalidParameter`] for a `lambda` the model cannot take.
    pub fn learn(
        self,
        lambda: Lambda,
        prior: &LambdaPrior,
        params: &ValidCoalescentParams,
        rounds: usize,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Learned<Self>> {
        let model = self.model.with_lambda(&lambda)?;
        let x = self.x;
        let first = self.fit;
        let threads = Threads::new(params.n_threads)?;
        let learned = learn(
            &model,
            lambda,
            prior,
            x.view(),
            first,
            &mut |m| fit_leaves(m, params, m.leaf_messages(x.view())?, interrupt),
            LearnOptions {
                rounds,
                resample: false,
            },
            &threads,
            interrupt,
            &mut |_, _| {},
        )?;
        Ok(Learned {
            fit: Self::from_fit(model.with_lambda(&learned.lambda)?, x.view(), learned.fit)?,
            lambda: learned.lambda,
            trace: learned.trace,
        })
    }
}

#[cfg(test)]
mod tests {
    use ndarray::array;

    use super::*;
    use crate::coalescent::CoalescentParams;
    use crate::models::messages::BrownianDiffusion;

    #[test]
    fn predictions_are_the_predictors_for_any_thread_count() {
        let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0], [1.5, 1.4]];
        let model = BrownianDiffusion::isotropic(0.7, 2)
            .unwrap()
            .with_noise(0.1)
            .unwrap();
        let params = CoalescentParams::new().check().unwrap();
        let fitted = Fitted::fit(model.clone(), &params, x.view(), &|| false).unwrap();
        let again = crate::coalescent::fit(&model, &params, x.view()).unwrap();
        assert_eq!(fitted.log_joint(), again.log_joint);
        let rows = array![[0.05, 0.05], [2.0, 2.0], [-4.0, 9.0]];
        let one = fitted.log_density(rows.view(), &Threads::new(Some(1)).unwrap());
        let two = fitted.log_density(rows.view(), &Threads::new(Some(2)).unwrap());
        let direct = Predictor::new(model, x.view(), again.tree).unwrap();
        for (i, (a, b)) in one.unwrap().iter().zip(two.unwrap()).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits());
            let want = direct.log_density_by_branch(rows.row(i), i).unwrap().0;
            assert_eq!(a.to_bits(), want.to_bits());
        }
        let bad = array![[f64::INFINITY, 0.0]];
        assert!(matches!(
            fitted.log_density(bad.view(), &Threads::new(Some(1)).unwrap()),
            Err(RoseTreeError::InvalidData { row: 0, .. })
        ));
    }

    #[test]
    fn learning_from_a_fit_keeps_the_model_the_tree_and_the_rows_together() {
        use crate::coalescent::learn::{Lambda, LearnableRate};
        let x = array![[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0], [1.5, 1.4]];
        let model = BrownianDiffusion::isotropic(1.0, 2)
            .unwrap()
            .with_noise(0.1)
            .unwrap();
        let params = CoalescentParams::new().check().unwrap();
        let fitted = Fitted::fit(model.clone(), &params, x.view(), &|| false).unwrap();
        let start = Lambda::Shared(1.0);
        let prior = BrownianDiffusion::default_prior(&start, 2);
        let learned = fitted.learn(start, &prior, &params, 5, &|| false).unwrap();
        let Lambda::Shared(l) = learned.lambda else {
            panic!("the shape is kept")
        };
        assert!(l != 1.0);
        // The fit's model is the learnt one: its log joint is the tree's under that Λ.
        let under = model.with_lambda(&learned.lambda).unwrap();
        let want = crate::coalescent::log_joint(&under, x.view(), learned.fit.tree()).unwrap();
        assert_eq!(learned.fit.log_joint(), want);
        assert!(learned.trace.windows(2).all(|w| w[1] >= w[0]));
    }

    #[test]
    fn a_tree_over_other_rows_is_refused() {
        let x = array![[0.0], [1.0], [2.0]];
        let model = BrownianDiffusion::isotropic(1.0, 1).unwrap();
        let params = CoalescentParams::new().check().unwrap();
        let fit = crate::coalescent::fit(&model, &params, x.view()).unwrap();
        let fewer = array![[0.0], [1.0]];
        assert!(matches!(
            Fitted::from_fit(model, fewer.view(), fit),
            Err(RoseTreeError::InvalidTree(_))
        ));
    }
}
