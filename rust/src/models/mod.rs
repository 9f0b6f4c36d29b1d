//! Conjugate cluster models `f(D)` (BRT eq 1.1), kept as sufficient statistics.
//!
//! A cluster model only has to say three things: the statistics of a single row, how two
//! clusters' statistics combine, and the log marginal likelihood of a cluster from its
//! statistics. The agglomeration engines are generic over [`ClusterModel`] (with the
//! shortcuts of [`RowQueries`]), so a new family is one file, and a model implemented
//! elsewhere (for example in Python, behind a callback) plugs into the same search.

use ndarray::{ArrayView1, ArrayView2};

use crate::error::{Result, RoseTreeError};

mod bernoulli;
mod gaussian;
mod multinomial;
mod normal_gamma;
mod spec;

pub mod messages;

pub use bernoulli::{BernoulliQuery, BernoulliStats, BetaBernoulli, DEFAULT_PRIOR_STRENGTH};
pub use gaussian::{DEFAULT_KAPPA0, GaussianQuery, GaussianStats, NormalInverseWishart};
pub use multinomial::{CountQuery, CountStats, DirichletMultinomial};
pub use normal_gamma::{ColumnMoments, NormalGamma, NormalGammaQuery, NormalGammaStats};
pub use spec::{Conjugate, ModelSpec, Psi0};

/// A cluster model with sufficient statistics: the only code that knows a distribution.
///
/// Implementations must make [`merge`](ClusterModel::merge) associative and commutative up to
/// rounding, so that the statistics of a cluster do not depend on the order in which its rows
/// were merged.
pub trait ClusterModel: Sync {
    /// Sufficient statistics of a cluster of rows.
    type Stats: Clone + Send + Sync;

    /// The number of columns a data row must have.
    fn n_features(&self) -> usize;

    /// Gets ready for data sets of up to `n_rows` rows, for example by tabulating `ln Γ` at
    /// the integer counts that can occur. Optional: results are the same without it.
    fn prepare(&mut self, n_rows: usize) {
        let _ = n_rows;
    }

    /// Statistics of the single row `row`, which is row `index` of the data (for errors).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] when a value is outside the model's support.
    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<Self::Stats>;

    /// Statistics of the union of two disjoint clusters.
    fn merge(&self, a: &Self::Stats, b: &Self::Stats) -> Self::Stats;

    /// `ln f(D)`, the log marginal likelihood of the cluster with statistics `s` (eq 1.1).
    ///
    /// # Errors
    /// Only models backed by user code fail here; the conjugate models never do.
    fn log_marginal(&self, s: &Self::Stats) -> Result<f64>;

    /// `ln f(A ∪ B)` from the statistics of `A` and `B`. The default merges and evaluates;
    /// models override it to skip building the merged statistics in the pair-scoring loop.
    ///
    /// # Errors
    /// As [`log_marginal`](ClusterModel::log_marginal).
    fn log_marginal_merged(&self, a: &Self::Stats, b: &Self::Stats) -> Result<f64> {
        self.log_marginal(&self.merge(a, b))
    }

    /// The statistics of `A \ B` for a cluster `a` and a sub-cluster `b` of it, where the
    /// model can take them exactly: equal to what merging the rows of `A` that are not in
    /// `B` gives, in any order (integer counts). `None` (the default) where it cannot, for
    /// example where statistics are rounded sums.
    fn split_off(&self, a: &Self::Stats, b: &Self::Stats) -> Option<Self::Stats> {
        let _ = (a, b);
        None
    }

    /// Writes into `terms` what [`log_marginal_joined`](ClusterModel::log_marginal_joined)
    /// needs to give `ln f(A ∪ {x})` of the cluster `a` and any single row `x` cheaply, for
    /// a cluster scored against many rows in turn (the descent of
    /// [`GrowingTree::insert`](crate::brt::GrowingTree::insert)). Returns `false`, leaving
    /// `terms` unspecified, where the model has no such terms for `a` (the default).
    fn join_terms(&self, a: &Self::Stats, terms: &mut Vec<f64>) -> bool {
        let _ = (a, terms);
        false
    }

    /// Turns the [`join_terms`](ClusterModel::join_terms) of a cluster `A` into those of
    /// `a = A ∪ {x}`, the cluster after the single row `x` joined it, more cheaply than
    /// building them again. Returns `false` where it cannot (the default); `terms` must then
    /// be dropped.
    fn update_join_terms(&self, terms: &mut [f64], a: &Self::Stats, x: &Self::Stats) -> bool {
        let _ = (terms, a, x);
        false
    }

    /// `ln f(A ∪ {x})` from the [`join_terms`](ClusterModel::join_terms) of `A`, equal bit
    /// for bit to [`log_marginal_merged`](ClusterModel::log_marginal_merged)`(a, x)`; `None`
    /// where `x` is not a row that the terms serve (the default: never).
    fn log_marginal_joined(&self, terms: &[f64], x: &Self::Stats) -> Option<f64> {
        let _ = (terms, x);
        None
    }

    /// The number of words of a single row packed by [`pack_row`](ClusterModel::pack_row);
    /// `0` (the default) where the model packs none.
    fn packed_row_words(&self) -> usize {
        0
    }

    /// Writes the single row with statistics `a` into `out`
    /// ([`packed_row_words`](ClusterModel::packed_row_words) words), a compact copy for
    /// scanning many rows against one new row with
    /// [`log_marginal_packed`](ClusterModel::log_marginal_packed). Returns `false` where `a`
    /// has no packed form (the default: never).
    fn pack_row(&self, a: &Self::Stats, out: &mut [u64]) -> bool {
        let _ = (a, out);
        false
    }

    /// `ln f(A ∪ {x})` of the single row packed as `a` and the row `x`, equal bit for bit to
    /// [`log_marginal_merged`](ClusterModel::log_marginal_merged) of their statistics;
    /// `None` where `x` has no packed form (the default: never).
    fn log_marginal_packed(&self, a: &[u64], x: &Self::Stats) -> Option<f64> {
        let _ = (a, x);
        None
    }

    /// Statistics of one row given sparsely: value `values[k]` in column `columns[k]`, zero
    /// elsewhere. The default fills a dense row; models may build their statistics directly.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] for a column out of range, and as
    /// [`leaf_stats`](ClusterModel::leaf_stats).
    fn leaf_stats_sparse(
        &self,
        columns: &[usize],
        values: &[f64],
        index: usize,
    ) -> Result<Self::Stats> {
        let mut row = ndarray::Array1::zeros(self.n_features());
        for (&c, &v) in columns.iter().zip(values) {
            let slot = row.get_mut(c).ok_or_else(|| {
                RoseTreeError::data(index, Some(c), format!("column {c} is out of range"))
            })?;
            *slot = v;
        }
        self.leaf_stats(row.view(), index)
    }

    /// Statistics of every row of `x`, checking the number of columns first.
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] for a wrong number of columns, and whatever
    /// [`leaf_stats`](ClusterModel::leaf_stats) reports for a row.
    fn leaf_stats_all(&self, x: ArrayView2<'_, f64>) -> Result<Vec<Self::Stats>> {
        map_rows(x, self.n_features(), |row, i| self.leaf_stats(row, i))
    }
}

/// Fast paths for scoring one cluster against many single rows: the pair-scoring loop of
/// the greedy search and prediction. A model without a shortcut implements it in three
/// lines, with `type Query = ()`, an empty `query` and the provided methods (which merge
/// and evaluate); the conjugate models precompute what a row's predictive needs.
pub trait RowQueries: ClusterModel {
    /// Precomputed terms of one cluster for [`log_marginal_query`](RowQueries::log_marginal_query).
    type Query: Send + Sync;

    /// Whatever makes scoring the cluster `a` against many single-row partners cheap (the
    /// pair-scoring loop of the greedy search). Models without such a shortcut use `()`.
    fn query(&self, a: &Self::Stats) -> Self::Query;

    /// `ln f(A ∪ B)` given `q = query(a)`. Must agree with
    /// [`log_marginal_merged`](ClusterModel::log_marginal_merged) up to rounding; the search
    /// calls it with a single-row `b` whenever one of the pair is a single row, so that is the
    /// case worth a shortcut.
    ///
    /// # Errors
    /// As [`log_marginal`](ClusterModel::log_marginal).
    fn log_marginal_query(&self, q: &Self::Query, a: &Self::Stats, b: &Self::Stats) -> Result<f64> {
        let _ = q;
        self.log_marginal_merged(a, b)
    }

    /// An upper bound on what [`log_marginal_query`](RowQueries::log_marginal_query)`(q, a,
    /// b)` returns, its rounding included, by a route much cheaper than computing it, or
    /// `None` (the default) where the model has none: `b` is a single row packed by
    /// [`pack_row`](ClusterModel::pack_row) as `b_row`, and `a_row` is the packed row of `a`
    /// where `a` is one. The search calls it to prove that a pair ranks too low to matter
    /// before it computes the pair's `ln f` as it always does; a loose bound costs time,
    /// never a different result.
    fn log_marginal_upper_packed(
        &self,
        q: &Self::Query,
        a_row: Option<&[u64]>,
        b_row: &[u64],
    ) -> Option<f64> {
        let _ = (q, a_row, b_row);
        None
    }

    /// `ln f(B | A) = ln f(A ∪ B) − ln f(A)`, the posterior predictive of `B` given `A`, with
    /// `q = query(a)` and `log_f_a = ln f(A)`. The default takes the difference of
    /// [`log_marginal_query`](RowQueries::log_marginal_query) and `log_f_a`; the conjugate
    /// models override it to compute the predictive directly, which keeps its digits when
    /// `ln f(A)` is large (many rows, or large counts).
    ///
    /// # Errors
    /// As [`log_marginal`](ClusterModel::log_marginal).
    fn log_predictive_query(
        &self,
        q: &Self::Query,
        a: &Self::Stats,
        log_f_a: f64,
        b: &Self::Stats,
    ) -> Result<f64> {
        Ok(self.log_marginal_query(q, a, b)? - log_f_a)
    }
}

/// Statistics as a flat vector of doubles and back, so that a cluster summarised on one
/// machine can be merged on another: the parts of a data set are fitted where they are
/// stored and the top of the tree is scored from their roots' statistics alone (statistics
/// add up, so `ln f` of a union of parts is exact from them).
pub trait StatsCodec: ClusterModel {
    /// The statistics `s` as doubles (counts are whole numbers, exact below 2⁵³).
    fn encode_stats(&self, s: &Self::Stats) -> Vec<f64>;

    /// The statistics that [`encode_stats`](StatsCodec::encode_stats) wrote as `v`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `stats` when `v` does not have the length or
    /// the values that this model's statistics can have.
    fn decode_stats(&self, v: &[f64]) -> Result<Self::Stats>;
}

/// `v` as a count (a whole number `≥ 0` that fits a `u32`), for [`StatsCodec::decode_stats`].
pub(crate) fn decode_count(v: f64) -> Result<u32> {
    if v >= 0.0 && v <= f64::from(u32::MAX) && v.fract() == 0.0 {
        Ok(v as u32)
    } else {
        Err(RoseTreeError::param(
            "stats",
            format!("expected a count, got {v}"),
        ))
    }
}

/// Checks that an encoded statistics vector has `expected` entries.
pub(crate) fn check_stats_len(v: &[f64], expected: usize) -> Result<()> {
    if v.len() == expected {
        Ok(())
    } else {
        Err(RoseTreeError::param(
            "stats",
            format!("expected {expected} values for this model, got {}", v.len()),
        ))
    }
}

/// A cluster model whose `ln f(D)` can be differentiated with respect to its
/// hyperparameters η, for hyperparameter learning (BRT eq 1.27).
pub trait Differentiable: ClusterModel {
    /// The number of hyperparameters, the length of a gradient. Each model documents the
    /// order of its entries.
    fn n_hyperparameters(&self) -> usize;

    /// The current hyperparameters, in the order of the gradient.
    fn hyperparameters(&self) -> Vec<f64>;

    /// The same model family with hyperparameters `eta` (in the order of the gradient).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] for a wrong length or a value outside the domain.
    fn with_hyperparameters(&self, eta: &[f64]) -> Result<Self>
    where
        Self: Sized;

    /// Adds `weight · ∂ ln f(D) / ∂η` for the cluster with statistics `s` to `grad`.
    ///
    /// # Errors
    /// [`RoseTreeError::Numerical`] where `ln f` itself cannot be computed.
    fn add_gradient(&self, s: &Self::Stats, weight: f64, grad: &mut [f64]) -> Result<()>;
}

/// `f(row, i)` for every row `i` of `x`, after checking that `x` has `n_features` columns.
///
/// # Errors
/// [`RoseTreeError::ShapeMismatch`] for a wrong number of columns; the first error of `f`.
pub(crate) fn map_rows<T>(
    x: ArrayView2<'_, f64>,
    n_features: usize,
    f: impl Fn(ArrayView1<'_, f64>, usize) -> Result<T>,
) -> Result<Vec<T>> {
    if x.ncols() != n_features {
        return Err(RoseTreeError::ShapeMismatch {
            what: "X".into(),
            expected: format!("{n_features} columns"),
            found: format!("{} columns", x.ncols()),
        });
    }
    x.rows()
        .into_iter()
        .enumerate()
        .map(|(i, row)| f(row, i))
        .collect()
}

/// Checks that a hyperparameter vector has the model's length.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `hyperparameters` otherwise.
pub(crate) fn check_hyperparameter_count(eta: &[f64], expected: usize) -> Result<()> {
    if eta.len() == expected {
        Ok(())
    } else {
        Err(RoseTreeError::param(
            "hyperparameters",
            format!("expected {expected} values, got {}", eta.len()),
        ))
    }
}

/// Expands a scalar or per-feature hyperparameter to one value per feature, checking that
/// each value is finite and positive.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] naming `name` for a wrong length or a value `≤ 0`.
pub fn per_feature(name: &str, values: &[f64], d: usize) -> Result<Vec<f64>> {
    let out = match values.len() {
        1 => vec![values[0]; d],
        n if n == d => values.to_vec(),
        n => {
            return Err(RoseTreeError::param(
                name,
                format!("expected a scalar or {d} values (one per feature), got {n}"),
            ));
        }
    };
    if let Some(v) = out.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
        return Err(RoseTreeError::param(
            name,
            format!("must be finite and > 0, got {v}"),
        ));
    }
    Ok(out)
}
