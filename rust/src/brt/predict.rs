//! Prediction with a fitted rose tree (BRT §1.4.1, eqs 1.24–1.26).
//!
//! Two kinds of prediction are possible:
//!
//! - **New data items** (eq 1.25): a new row `x` joins cluster `S` (any node of the tree,
//!   leaves included) with prior weight `w_S`, and is then drawn from that cluster's
//!   posterior predictive `f(x | D_S) = f(D_S ∪ {x}) / f(D_S)`:
//!
//!   `p(x | D, T) = Σ_S w_S f(D_S ∪ {x}) / f(D_S)`,
//!
//!   `w_S = r_S Π_{A ∈ ancestors(S)} (1 − r_A) n_{A→S} / |leaves(A)|`,
//!   `r_S = π_S f(D_S) / p(D_S | S)` (eq 1.26), where `n_{A→S}` is the size of the child of
//!   `A` on the way to `S`. The printed eq 1.25 divides by `|leaves(S)|`; the weights only sum
//!   to one with `|leaves(A)|` (as in Heller & Ghahramani 2005), which is what
//!   [`log_cluster_weights`] computes.
//! - **Missing entries of the training data** (eq 1.24): with the tree held fixed,
//!   `ln p(D^m | D_obs, T) = ln p(D_full | T) − ln p(D_obs | T)`.
//!
//! Eq 1.24 is computed relative to the fitted tree, in a form that never subtracts two large
//! log evidences. Filling in rows changes `ln f` only at their ancestors, and with
//! `δ_A = ln p'(D_A | A) − ln p(D_A | A)` the recursion of eq 1.5 becomes
//!
//! `δ_A = ln( r_A e^{Δf_A} + (1 − r_A) e^{Σ_c δ_c} )`, `Δf_A = ln f'(D_A) − ln f(D_A)`,
//!
//! which only involves the change of each quantity. For the beta–Bernoulli model, filling one
//! entry `x_ij` changes `ln f` of each ancestor of leaf `i` by the single-feature predictive
//! `ln P(x_ij | column j of the ancestor)`, so `P(x_ij = 1 | D_obs, T)` costs one walk from
//! the leaf to the root ([`Predictor::missing_probabilities`]).

use std::sync::Arc;

use ndarray::Array2;

use crate::brt::RoseTree;
use crate::error::{Result, RoseTreeError};
use crate::math::log_add_exp;
use crate::models::{BetaBernoulli, RowQueries};
use crate::parallel::Threads;

/// `ln w_S` of every node of `tree` (eq 1.25 with the weights normalised by `|leaves(A)|`,
/// see the module docs): the prior probability that a new data item belongs to cluster `S`.
/// The weights sum to one over all nodes, leaves included.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, BrtParams, Mixing, log_cluster_weights};
/// use rosetree::math::log_sum_exp;
/// use rosetree::models::BetaBernoulli;
///
/// let x = array![[1., 1., 0.], [1., 1., 0.], [0., 0., 1.], [0., 1., 1.]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 3)?;
/// let tree = brt::fit(&model, &BrtParams::new(Mixing::Brt { gamma: 0.5 }).check()?, x.view())?;
/// let log_w = log_cluster_weights(&tree);
/// assert_eq!(log_w.len(), tree.nodes().len());
/// assert!(log_sum_exp(&log_w).abs() < 1e-12);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn log_cluster_weights(tree: &RoseTree) -> Vec<f64> {
    let (log_r, log_1m_r) = log_r_pair(tree);
    let nodes = tree.nodes();
    // ln of the probability that the mixture reaches each node, parents before children.
    let mut reach = vec![0.0; nodes.len()];
    for v in (tree.n_leaves()..nodes.len()).rev() {
        let log_size = (nodes[v].n_leaves as f64).ln();
        for &c in &nodes[v].children {
            reach[c] = reach[v] + log_1m_r[v] + (nodes[c].n_leaves as f64).ln() - log_size;
        }
    }
    reach.iter().zip(&log_r).map(|(a, b)| a + b).collect()
}

/// `(ln r_T, ln(1 − r_T))` of every node (eq 1.26).
///
/// Both are normalised by the same sum: with `a = ln π_T + ln f(D_T)` and
/// `b = ln(1 − π_T) + Σ_c ln p(D_c | c)` (the two terms of eq 1.5),
/// `ln r_T = −ln(1 + e^{b − a})` and `ln(1 − r_T) = −ln(1 + e^{a − b})`, so that
/// `r_T + (1 − r_T) = 1` holds to rounding even where the stored `ln p` was rounded
/// differently (extreme data, evidences of very different sizes) and the weights of
/// [`log_cluster_weights`] sum to one. `ln(1 − r_T)` stays accurate when `r_T` is close to
/// one. At a leaf they are `(0, −∞)`. Where both terms are `−∞` (or both `+∞`) the ratio is
/// undefined and the prior's `(ln π_T, ln(1 − π_T))` is used, so the pair still sums to one.
fn log_r_pair(tree: &RoseTree) -> (Vec<f64>, Vec<f64>) {
    let values = tree.values();
    tree.nodes()
        .iter()
        .zip(values)
        .map(|(node, v)| {
            if node.is_leaf() {
                return (0.0, f64::NEG_INFINITY);
            }
            let children: f64 = node.children.iter().map(|&c| values[c].log_p).sum();
            let (a, b) = (v.log_pi + v.log_f, v.log_1m_pi + children);
            // r_T = 1 / (1 + e^{b − a}): through the difference, since with |a| ≈ 1e300
            // `a − ln(e^a + e^b)` rounds to 0 for both terms (GP experts on extreme data).
            // Infinite terms go through it too (r = 1 when only `a` is +∞, 0 when only `b`
            // is). Both −∞ (rows impossible either way) or both +∞ leave it undefined: the
            // data do not choose, so the prior's split (π, 1 − π) is kept.
            let d = a - b;
            if d.is_nan() {
                (v.log_pi, v.log_1m_pi)
            } else {
                (-log_add_exp(0.0, -d), -log_add_exp(0.0, d))
            }
        })
        .unzip()
}

/// One missing entry of the training data and the predicted probability that it is one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MissingEntry {
    /// Zero-based row (leaf) index.
    pub row: usize,
    /// Zero-based column index.
    pub column: usize,
    /// `P(x_ij = 1 | D_obs, T)`.
    pub p_one: f64,
}

/// Prediction with a fitted rose tree: the tree, the statistics of every node (merged from
/// the training rows' statistics), and the weights `w_S` of eq 1.25.
///
/// The tree's stored `ln π`, `ln f` and `ln p` are used for the weights and for the
/// responsibilities `r_T` (eq 1.26); the cluster predictives are computed from the node
/// statistics by the model.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, BrtParams, Mixing, Predictor};
/// use rosetree::models::{BetaBernoulli, ClusterModel};
/// use rosetree::parallel::Threads;
///
/// let x = array![[1., 1., 0.], [1., 1., 0.], [0., 0., 1.], [0., 1., 1.]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 3)?;
/// let tree = brt::fit(&model, &BrtParams::new(Mixing::Brt { gamma: 0.5 }).check()?, x.view())?;
/// let predictor = Predictor::new(model.clone(), tree, model.leaf_stats_all(x.view())?)?;
///
/// // The predictive probabilities of all 2³ binary rows sum to one.
/// let rows: Vec<_> = (0..8)
///     .map(|b| {
///         let row = array![f64::from(b & 1), f64::from((b >> 1) & 1), f64::from(b >> 2)];
///         model.leaf_stats(row.view(), 0)
///     })
///     .collect::<Result<_, _>>()?;
/// let log_p = predictor.log_predictive(&rows, &Threads::default(), &|| false)?;
/// assert!((log_p.iter().map(|l| l.exp()).sum::<f64>() - 1.0).abs() < 1e-12);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub struct Predictor<M: RowQueries> {
    model: M,
    tree: Arc<RoseTree>,
    /// Statistics of every node, leaves first.
    stats: Vec<M::Stats>,
    log_w: Vec<f64>,
    log_r: Vec<f64>,
    log_1m_r: Vec<f64>,
}

/// A node's query and `ln f(D_S)`, or `None` for a node of zero weight.
type Prepared<M> = Option<(<M as RowQueries>::Query, f64)>;

/// A running `ln Σ exp(tᵢ)`, added to one term at a time in a fixed order.
#[derive(Debug, Clone, Copy)]
struct LogSumExp {
    max: f64,
    sum: f64,
}

impl LogSumExp {
    const EMPTY: Self = Self {
        max: f64::NEG_INFINITY,
        sum: 0.0,
    };

    fn add(&mut self, t: f64) {
        if t == f64::NEG_INFINITY {
            return;
        }
        if t > self.max {
            self.sum = self.sum * (self.max - t).exp() + 1.0;
            self.max = t;
        } else {
            self.sum += (t - self.max).exp();
        }
    }

    fn value(self) -> f64 {
        self.max + self.sum.ln()
    }
}

impl<M: RowQueries> Predictor<M> {
    /// Gets ready to predict with `tree`, fitted to data whose rows have statistics `leaves`
    /// under `model` (one per leaf, in leaf order). The predictor owns what it predicts
    /// with, so a fitted model can be kept without its training data.
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] when `leaves` and the tree disagree on the number of
    /// data rows.
    pub fn new(model: M, tree: impl Into<Arc<RoseTree>>, leaves: Vec<M::Stats>) -> Result<Self> {
        let tree: Arc<RoseTree> = tree.into();
        let n = tree.n_leaves();
        if leaves.len() != n {
            return Err(RoseTreeError::ShapeMismatch {
                what: "tree".into(),
                expected: format!("{} leaves (one per data row)", leaves.len()),
                found: format!("{n} leaves"),
            });
        }
        let mut stats = leaves;
        stats.reserve(tree.nodes().len() - n);
        for node in &tree.nodes()[n..] {
            let mut merged = stats[node.children[0]].clone();
            for &c in &node.children[1..] {
                merged = model.merge(&merged, &stats[c]);
            }
            stats.push(merged);
        }
        let (log_r, log_1m_r) = log_r_pair(&tree);
        Ok(Self {
            log_w: log_cluster_weights(&tree),
            model,
            tree,
            stats,
            log_r,
            log_1m_r,
        })
    }

    /// The cluster model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The fitted tree.
    pub fn tree(&self) -> &RoseTree {
        &self.tree
    }

    /// The fitted tree, to be kept beside the predictor without a copy.
    pub fn shared_tree(&self) -> &Arc<RoseTree> {
        &self.tree
    }

    /// `ln w_S` of every node (see [`log_cluster_weights`]).
    pub fn log_weights(&self) -> &[f64] {
        &self.log_w
    }

    /// The statistics of every node, leaves first.
    pub fn node_stats(&self) -> &[M::Stats] {
        &self.stats
    }

    /// `ln p(x | D, T)` of eq 1.25 for each new row `x` with statistics in `rows`.
    ///
    /// Rows are scored in parallel on `threads`; `interrupt` is polled from the calling thread
    /// between blocks of work and stops the computation when it returns `true`. The result
    /// does not depend on the number of threads.
    ///
    /// # Errors
    /// [`RoseTreeError::Interrupted`]; errors of the model.
    pub fn log_predictive(
        &self,
        rows: &[M::Stats],
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Vec<f64>> {
        let mut acc = vec![LogSumExp::EMPTY; rows.len()];
        let all: Vec<usize> = (0..self.stats.len()).collect();
        self.sweep(
            &all,
            &self.log_w,
            rows,
            &mut acc,
            threads,
            interrupt,
            |acc, _, t| {
                acc.add(t);
            },
        )?;
        Ok(acc.into_iter().map(LogSumExp::value).collect())
    }

    /// `ln p(x | D, T)` of each new row (as [`log_predictive`](Self::log_predictive)) and the
    /// posterior probability of each cluster given the row,
    /// `P(S | x, D, T) = w_S f(x | D_S) / p(x | D, T)`: an `n_rows × n_nodes` matrix whose
    /// rows sum to one, with columns in node-id order.
    ///
    /// # Errors
    /// As [`log_predictive`](Self::log_predictive), and [`RoseTreeError::Numerical`] for a
    /// row whose predictive probability is zero (possible only with a model that returns
    /// `ln f = −∞`).
    pub fn responsibilities(
        &self,
        rows: &[M::Stats],
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<(Vec<f64>, Array2<f64>)> {
        let all: Vec<usize> = (0..self.stats.len()).collect();
        self.posterior(&all, &self.log_w, rows, threads, interrupt)
    }

    /// The posterior over flat clusters `clusters` (node ids whose leaf sets partition the
    /// data, e.g. [`RoseTree::cut`]) of each new row: `P(c | x) ∝ n_c f(D_c ∪ {x}) / f(D_c)`,
    /// with `n_c` the rows in cluster `c`. Returns `ln Σ_c (n_c / n) f(x | D_c)` of each row
    /// (its log predictive under the flat mixture) and the `n_rows × K` matrix of `P(c | x)`,
    /// columns in the order of `clusters`, rows summing to one.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when `clusters` does not partition the data; as
    /// [`responsibilities`](Self::responsibilities) otherwise.
    pub fn flat_responsibilities(
        &self,
        clusters: &[usize],
        rows: &[M::Stats],
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<(Vec<f64>, Array2<f64>)> {
        self.tree.labels(clusters)?;
        let log_n = (self.tree.n_leaves() as f64).ln();
        let nodes = self.tree.nodes();
        let log_w: Vec<f64> = clusters
            .iter()
            .map(|&c| (nodes[c].n_leaves as f64).ln() - log_n)
            .collect();
        self.posterior(clusters, &log_w, rows, threads, interrupt)
    }

    /// `ln Σ_k w_k f(x | D_{nodes[k]})` of each row and the posterior over `nodes`, for
    /// `ln w_k = log_w[k]`.
    fn posterior(
        &self,
        nodes: &[usize],
        log_w: &[f64],
        rows: &[M::Stats],
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<(Vec<f64>, Array2<f64>)> {
        let n_nodes = nodes.len();
        let mut out = Array2::from_elem((rows.len(), n_nodes), f64::NEG_INFINITY);
        let log_p = {
            let flat = out
                .as_slice_mut()
                .expect("a freshly allocated array is contiguous");
            let mut row_slices: Vec<&mut [f64]> = flat.chunks_mut(n_nodes.max(1)).collect();
            self.sweep(
                nodes,
                log_w,
                rows,
                &mut row_slices,
                threads,
                interrupt,
                |row, k, t| {
                    row[k] = t;
                },
            )?;
            let normalise = |row: &mut &mut [f64]| {
                let log_p = crate::math::log_sum_exp(row);
                if log_p.is_finite() {
                    row.iter_mut().for_each(|t| *t = (*t - log_p).exp());
                }
                log_p
            };
            let min_parallel = crate::parallel::PAR_THRESHOLD.div_ceil(n_nodes.max(1));
            threads.try_zip_mut(rows, &mut row_slices, min_parallel, |_, row| {
                Ok(normalise(row))
            })?
        };
        if let Some(r) = log_p.iter().position(|l| !l.is_finite()) {
            return Err(RoseTreeError::Numerical(format!(
                "row {r} has log predictive probability {}, so its responsibilities are \
                 undefined",
                log_p[r]
            )));
        }
        Ok((log_p, out))
    }

    /// Calls `visit(state_r, k, ln w_k + ln f(x_r | D_S))` for every row `r` and every node
    /// `S = nodes[k]` of non-zero weight `w_k = exp(log_w[k])`, in the order of `nodes` for
    /// each row. Nodes are taken in blocks, whose queries ([`ClusterModel::query`]) are
    /// computed once and then used for every row.
    #[allow(clippy::too_many_arguments)]
    fn sweep<S: Send>(
        &self,
        nodes: &[usize],
        log_w: &[f64],
        rows: &[M::Stats],
        states: &mut [S],
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
        visit: impl Fn(&mut S, usize, f64) + Sync,
    ) -> Result<()> {
        debug_assert_eq!(rows.len(), states.len());
        if rows.is_empty() {
            return Ok(());
        }
        let block = self.block_len();
        let d = self.model.n_features().max(1);
        for start in (0..nodes.len()).step_by(block) {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            let ks = start..(start + block).min(nodes.len());
            let prepared = self.prepare_block(&nodes[ks.clone()], &log_w[ks.clone()], threads)?;
            let score_row = |(x, state): (&M::Stats, &mut S)| -> Result<()> {
                for (k, prep) in ks.clone().zip(&prepared) {
                    if let Some((query, log_f)) = prep {
                        let s = nodes[k];
                        // The predictive itself, not `ln f(D_S ∪ {x}) − ln f(D_S)`: that
                        // difference of two large numbers loses digits for big clusters
                        // or large counts.
                        let predictive =
                            self.model
                                .log_predictive_query(query, &self.stats[s], *log_f, x)?;
                        visit(state, k, log_w[k] + predictive);
                    }
                }
                Ok(())
            };
            // Rows in chunks of about 2²⁴ feature-node terms, so that an interrupt is
            // noticed within a fraction of a second.
            let chunk = ((1_usize << 24) / (ks.len() * d)).max(64);
            for (rows, states) in rows.chunks(chunk).zip(states.chunks_mut(chunk)) {
                if interrupt() {
                    return Err(RoseTreeError::Interrupted);
                }
                threads.try_zip_mut(rows, states, 2, |x, state| score_row((x, state)))?;
            }
        }
        Ok(())
    }

    /// Query and `ln f(D_S)` of each node in `nodes`; `None` for nodes of zero weight
    /// (`log_w[k] = −∞` for `nodes[k]`).
    fn prepare_block(
        &self,
        nodes: &[usize],
        log_w: &[f64],
        threads: &Threads,
    ) -> Result<Vec<Prepared<M>>> {
        let prepare = |(&s, &w): (&usize, &f64)| -> Result<Prepared<M>> {
            if w == f64::NEG_INFINITY {
                return Ok(None);
            }
            let stats = &self.stats[s];
            Ok(Some((
                self.model.query(stats),
                self.model.log_marginal(stats)?,
            )))
        };
        let pairs: Vec<(&usize, &f64)> = nodes.iter().zip(log_w).collect();
        threads.try_map(&pairs, 2, |&pair| prepare(pair))
    }

    /// Nodes per block of [`sweep`](Self::sweep): enough to amortise the fork–join of the
    /// row loop, few enough that a block's queries (up to `d²` numbers each) stay small.
    fn block_len(&self) -> usize {
        let d = self.model.n_features().max(1);
        ((1_usize << 21) / d.saturating_mul(d)).clamp(64, 4096)
    }

    /// `ln p(D^m | D_obs, T) = ln p(D_full | T) − ln p(D_obs | T)` (eq 1.24) with the tree
    /// held fixed: `filled` lists `(row, statistics)` of the training rows whose missing
    /// entries are filled in (some or all of them; rows not listed keep their observed
    /// statistics). The tree's `π_T` are kept; `ln f` is recomputed at the ancestors of the
    /// filled rows only.
    ///
    /// The statistics in `filled` must describe the same observed values as the training
    /// rows they replace; only the caller can check that.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] for a row index out of range or listed twice;
    /// [`RoseTreeError::Interrupted`]; errors of the model.
    pub fn log_predictive_missing(
        &self,
        filled: &[(usize, M::Stats)],
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<f64> {
        let nodes = self.tree.nodes();
        let n = self.tree.n_leaves();
        let mut full: Vec<Option<M::Stats>> = vec![None; nodes.len()];
        for (row, stats) in filled {
            let slot = full.get_mut(*row).filter(|_| *row < n).ok_or_else(|| {
                RoseTreeError::data(*row, None, format!("the tree has only {n} rows"))
            })?;
            if slot.replace(stats.clone()).is_some() {
                return Err(RoseTreeError::data(*row, None, "row is filled in twice"));
            }
        }
        // Statistics of the filled-in data at every ancestor of a filled row.
        for v in n..nodes.len() {
            let children = &nodes[v].children;
            if children.iter().all(|&c| full[c].is_none()) {
                continue;
            }
            let of = |c: usize| full[c].as_ref().unwrap_or(&self.stats[c]);
            let mut merged = of(children[0]).clone();
            for &c in &children[1..] {
                merged = self.model.merge(&merged, of(c));
            }
            full[v] = Some(merged);
        }
        let changed: Vec<usize> = (0..nodes.len()).filter(|&v| full[v].is_some()).collect();
        let diff = |&v: &usize| -> Result<f64> {
            let new = full[v].as_ref().expect("changed nodes have statistics");
            Ok(self.model.log_marginal(new)? - self.model.log_marginal(&self.stats[v])?)
        };
        let delta_f =
            threads.try_map_chunked(&changed, crate::parallel::PAR_THRESHOLD, interrupt, diff)?;
        let mut delta = vec![0.0; nodes.len()];
        for (&v, &df) in changed.iter().zip(&delta_f) {
            let below: f64 = nodes[v].children.iter().map(|&c| delta[c]).sum();
            delta[v] = log_add_exp(self.log_r[v] + df, self.log_1m_r[v] + below);
        }
        Ok(delta[self.tree.root()])
    }
}

impl Predictor<BetaBernoulli> {
    /// `P(x_ij = 1 | D_obs, T)` for every missing entry of the training data, in row-major
    /// order (rows ascending, then columns ascending).
    ///
    /// Filling `x_ij` changes `ln f` of each ancestor `A` of leaf `i` (the leaf included) by
    /// `ln P(x_ij | A) = ln((α_j + k_Aj) / (α_j + β_j + N_Aj))` for a one, where `k_Aj` and
    /// `N_Aj` count the ones and the observed entries of column `j` below `A`. The ratio
    /// `p(D_obs, x_ij = 1 | T) / p(D_obs | T)` then follows from the recursion in the module
    /// docs along the path from the leaf to the root: `O(depth)` per entry. This equals
    /// `exp` of [`log_predictive_missing`](Self::log_predictive_missing) with that one entry
    /// filled with a one.
    ///
    /// # Errors
    /// [`RoseTreeError::Interrupted`].
    pub fn missing_probabilities(
        &self,
        threads: &Threads,
        interrupt: &dyn Fn() -> bool,
    ) -> Result<Vec<MissingEntry>> {
        let (alpha, beta) = (self.model.alpha(), self.model.beta());
        let nodes = self.tree.nodes();
        let of_row = |i: usize| -> Vec<MissingEntry> {
            let leaf = &self.stats[i];
            if leaf.is_complete() {
                return Vec::new();
            }
            let columns: Vec<usize> = (0..alpha.len())
                .filter(|&j| leaf.observed(j) == 0)
                .collect();
            let mut delta = vec![0.0; columns.len()];
            let mut v = Some(i);
            while let Some(a) = v {
                let s = &self.stats[a];
                for (dj, &j) in delta.iter_mut().zip(&columns) {
                    let p = (alpha[j] + f64::from(s.ones_in(j)))
                        / (alpha[j] + beta[j] + f64::from(s.observed(j)));
                    *dj = log_add_exp(self.log_r[a] + p.ln(), self.log_1m_r[a] + *dj);
                }
                v = nodes[a].parent;
            }
            columns
                .into_iter()
                .zip(delta)
                .map(|(column, d)| MissingEntry {
                    row: i,
                    column,
                    p_one: d.exp(),
                })
                .collect()
        };
        let rows: Vec<usize> = (0..self.tree.n_leaves()).collect();
        let found =
            threads.try_map_chunked(&rows, crate::parallel::PAR_THRESHOLD, interrupt, |&i| {
                Ok(of_row(i))
            })?;
        Ok(found.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests;
