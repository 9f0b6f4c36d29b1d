//! What a [`Chain`] needs of the likelihood: a message cached at every node, built from the
//! messages of its children propagated along their branches, and the log likelihood of the
//! whole tree from the root's message. Two implementations:
//!
//! - [`Isotropic`], the default: Brownian motion with covariance `σ²I` per unit time from
//!   the origin, its messages in units of `σ²` ([`UnitMessage`]) so that a new `σ²` costs
//!   `O(1)`. Only this likelihood has the Gibbs re-attachment move
//!   ([`SubtreeMove::Gibbs`](super::SubtreeMove::Gibbs)), the Gibbs update of `σ²` and
//!   the probit observation model.
//! - [`Messages<M>`], any [`MessageModel`] of the message layer (the coalescent's models):
//!   the node's message is [`combine`](MessageModel::combine) of its children's messages
//!   [`propagate`](MessageModel::propagate)d along their branches, the duration of a branch
//!   being its length on the diffusion tree's clock (`t_child − t_parent`, the root at
//!   `t = 0` and the leaves at `t = 1`), and the root term is
//!   [`root_log_z`](MessageModel::root_log_z) of the root node's message propagated along
//!   the branch from the origin, of length `t_root`. The model's root is the law of the
//!   process at the origin: for the diffusion tree's Brownian motion,
//!   [`BrownianDiffusion`](crate::models::messages::BrownianDiffusion) with
//!   [`Root::Gaussian`](crate::models::messages::Root) `{ s0: 0 }`, the point mass at 0
//!   (then `ln p(X | T, t)` is eq 10 with `Λ = σ²I`, `σ²` the model's rate); for
//!   [`MultinomialMutation`](crate::models::messages::MultinomialMutation), its
//!   equilibrium. Its rates are fixed; a sweep moves subtrees by the exact prior-proposal
//!   Metropolis–Hastings move, which needs only likelihood ratios.

use std::fmt;

use ndarray::{Array2, ArrayView1, ArrayView2};

use super::{Chain, Sample};
use crate::error::{Result, RoseTreeError};
use crate::models::messages::{MessageModel, UnitMessage};
use crate::pydt::predict::{MessagePredictor, Predictor};

/// The likelihood of a diffusion-tree [`Chain`] (see the [module docs](self)).
pub trait ChainLikelihood: Clone + fmt::Debug + Send + Sync + Sized {
    /// What a node caches: the message from the data below it, with whatever the
    /// normalisers of the merges in its subtree contribute to the likelihood.
    type Message: Clone + fmt::Debug + Default + Send + Sync + 'static;

    /// Checks the data of a chain (row `i` of `x` at leaf `i`).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] naming the row and column of a value the likelihood
    /// cannot take, [`RoseTreeError::ShapeMismatch`] for the wrong number of columns.
    fn check_data(&self, x: &Array2<f64>) -> Result<()>;

    /// The message of leaf `index` whose data row is `row` (checked by
    /// [`check_data`](ChainLikelihood::check_data)).
    fn leaf(&self, row: ArrayView1<'_, f64>, index: usize) -> Self::Message;

    /// The message of a node from its children's messages, each with the length of its
    /// branch (`t_child − t_node > 0`); `n_features` is the number of data columns.
    fn node<'a>(
        &self,
        n_features: usize,
        children: impl Iterator<Item = (&'a Self::Message, f64)>,
    ) -> Self::Message;

    /// `ln p(X | T, t)` from the root node's message, the root node at `t_root` (the branch
    /// from the origin has length `t_root`).
    fn log_likelihood(&self, root: &Self::Message, t_root: f64, n_features: usize) -> f64;

    /// The Brownian variance per unit time that the chain learns; `NaN` for a likelihood
    /// whose rates are fixed in its model.
    fn sigma2(&self) -> f64 {
        f64::NAN
    }

    /// The predictive density of new rows under one kept state.
    type Predictor: fmt::Debug + Send + Sync;

    /// The predictive mixture of a new row under the kept state `sample` for the training
    /// rows `x` of its tree, each branch's divergence time represented by `n_points` times
    /// (Knowles & Ghahramani §5.3).
    ///
    /// # Errors
    /// Those of the predictor's constructor.
    fn predictor(
        &self,
        x: ArrayView2<'_, f64>,
        sample: &Sample,
        n_points: usize,
    ) -> Result<Self::Predictor>;

    /// `ln p(y | X, T)` of the new row `y` (`index` names it in errors) under `predictor`.
    ///
    /// # Errors
    /// A row the likelihood cannot take, naming `index`.
    fn log_density_row(
        predictor: &Self::Predictor,
        y: ArrayView1<'_, f64>,
        index: usize,
    ) -> Result<f64>;

    /// The chain as one of [`Isotropic`] likelihood, for the moves only it has (the Gibbs
    /// re-attachment move, `σ²`, probit data); `None` (the default) for any other.
    fn isotropic(chain: &mut Chain<Self>) -> Option<&mut Chain<Isotropic>> {
        let _ = chain;
        None
    }
}

/// Isotropic Brownian motion with covariance `σ²I` per unit time from the origin, messages
/// in units of `σ²` (see the [module docs](self) and those of [`super`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Isotropic {
    /// `σ²`, the variance per unit time.
    pub(crate) sigma2: f64,
}

impl Isotropic {
    /// The likelihood of variance `sigma2` per unit time.
    #[must_use]
    pub fn new(sigma2: f64) -> Self {
        Self { sigma2 }
    }
}

impl ChainLikelihood for Isotropic {
    type Message = UnitMessage;
    type Predictor = Predictor;

    /// The sample's own `σ²` (the chain may learn it).
    fn predictor(
        &self,
        x: ArrayView2<'_, f64>,
        sample: &Sample,
        n_points: usize,
    ) -> Result<Predictor> {
        sample.predictor(x, n_points)
    }

    fn log_density_row(predictor: &Predictor, y: ArrayView1<'_, f64>, index: usize) -> Result<f64> {
        predictor.log_density_row(y, index)
    }

    fn check_data(&self, x: &Array2<f64>) -> Result<()> {
        if let Some(((i, j), v)) = x.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(RoseTreeError::data(
                i,
                Some(j),
                format!("must be finite, got {v}"),
            ));
        }
        Ok(())
    }

    fn leaf(&self, row: ArrayView1<'_, f64>, _index: usize) -> UnitMessage {
        UnitMessage::point(row.to_vec())
    }

    fn node<'a>(
        &self,
        n_features: usize,
        children: impl Iterator<Item = (&'a UnitMessage, f64)>,
    ) -> UnitMessage {
        let mut msg = UnitMessage::uninformative(n_features);
        for (child, branch) in children {
            msg.absorb(child, branch);
        }
        msg
    }

    fn log_likelihood(&self, root: &UnitMessage, t_root: f64, n_features: usize) -> f64 {
        root.against_origin(t_root).log_z(n_features, self.sigma2)
    }

    fn sigma2(&self) -> f64 {
        self.sigma2
    }

    fn isotropic(chain: &mut Chain<Self>) -> Option<&mut Chain<Isotropic>> {
        Some(chain)
    }
}

/// Any [`MessageModel`] as the likelihood of a chain (see the [module docs](self)).
#[derive(Debug, Clone)]
pub struct Messages<M> {
    model: M,
}

impl<M> Messages<M> {
    /// The likelihood of `model`, whose root is the law at the origin (see the
    /// [module docs](self)).
    pub fn new(model: M) -> Self {
        Self { model }
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }
}

/// A node's cache under [`Messages`]: its message (`None` only before the first refresh)
/// and the sum of `ln Z` over the leaves and merges of its subtree.
#[derive(Clone)]
pub struct Cached<T> {
    msg: Option<T>,
    log_z: f64,
}

impl<T> Default for Cached<T> {
    fn default() -> Self {
        Self {
            msg: None,
            log_z: 0.0,
        }
    }
}

impl<T> fmt::Debug for Cached<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cached")
            .field("set", &self.msg.is_some())
            .field("log_z", &self.log_z)
            .finish()
    }
}

impl<T> Cached<T> {
    /// The message.
    ///
    /// # Panics
    /// Before the node's cache was first computed (never on a chain between moves).
    pub fn message(&self) -> &T {
        self.msg.as_ref().expect("a computed cache")
    }

    /// `Σ ln Z` over the leaves and merges of the node's subtree.
    pub fn log_z(&self) -> f64 {
        self.log_z
    }
}

impl<M> ChainLikelihood for Messages<M>
where
    M: MessageModel + Clone + fmt::Debug + Send,
    M::Message: fmt::Debug + 'static,
{
    type Message = Cached<M::Message>;
    type Predictor = MessagePredictor<M>;

    fn predictor(
        &self,
        x: ArrayView2<'_, f64>,
        sample: &Sample,
        n_points: usize,
    ) -> Result<MessagePredictor<M>> {
        MessagePredictor::new(
            self.model.clone(),
            x,
            &sample.tree,
            &sample.params,
            n_points,
        )
    }

    fn log_density_row(
        predictor: &MessagePredictor<M>,
        y: ArrayView1<'_, f64>,
        index: usize,
    ) -> Result<f64> {
        predictor.log_density_row(y, index)
    }

    fn check_data(&self, x: &Array2<f64>) -> Result<()> {
        self.model.leaf_messages(x.view()).map(|_| ())
    }

    fn leaf(&self, row: ArrayView1<'_, f64>, index: usize) -> Self::Message {
        let (msg, log_z) = self
            .model
            .leaf_message(row, index)
            .expect("the rows were checked when the chain was made");
        Cached {
            msg: Some(msg),
            log_z,
        }
    }

    fn node<'a>(
        &self,
        _n_features: usize,
        children: impl Iterator<Item = (&'a Self::Message, f64)>,
    ) -> Self::Message {
        let mut below = 0.0;
        let incoming: Vec<M::Message> = children
            .map(|(child, branch)| {
                below += child.log_z;
                self.model.propagate(child.message(), branch)
            })
            .collect();
        let (msg, log_z) = self.model.combine(&incoming);
        Cached {
            msg: Some(msg),
            log_z: below + log_z,
        }
    }

    fn log_likelihood(&self, root: &Self::Message, t_root: f64, _n_features: usize) -> f64 {
        root.log_z
            + self
                .model
                .root_log_z(&self.model.propagate(root.message(), t_root))
    }
}
