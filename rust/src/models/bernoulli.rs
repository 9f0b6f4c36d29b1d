//! Beta–Bernoulli clusters for binary data (BRT eq 1.19).

use ndarray::ArrayView1;

use super::{ClusterModel, per_feature};
use crate::error::{Result, RoseTreeError};
use crate::math::{ln_beta, ln_gamma};

/// Tables of `ln Γ(base_i + k)` for small integer `k` must stay below this many entries;
/// beyond it the model evaluates `ln Γ` directly.
const MAX_TABLE: usize = 1 << 24;

/// `ln Γ(base_i + k)` for integer `k`, tabulated up to a length fixed by
/// [`ClusterModel::prepare`]. Counts in the pair-scoring loop are integers, so a lookup
/// replaces a `ln Γ` evaluation (the dominant cost of a merge score).
#[derive(Debug, Clone)]
struct ShiftedLnGamma {
    base: Vec<f64>,
    /// All bases equal: one row serves every feature.
    shared: bool,
    len: usize,
    table: Vec<f64>,
}

impl ShiftedLnGamma {
    fn new(base: Vec<f64>) -> Self {
        let shared = base.windows(2).all(|w| w[0] == w[1]);
        Self {
            base,
            shared,
            len: 0,
            table: Vec::new(),
        }
    }

    fn reserve(&mut self, len: usize) {
        let rows = if self.shared { 1 } else { self.base.len() };
        if len <= self.len || rows.saturating_mul(len) > MAX_TABLE {
            return;
        }
        self.table = (0..rows)
            .flat_map(|i| {
                let b = self.base[i];
                (0..len).map(move |k| ln_gamma(b + k as f64))
            })
            .collect();
        self.len = len;
    }

    #[inline]
    fn get(&self, i: usize, k: u32) -> f64 {
        let k = k as usize;
        if k < self.len {
            let row = if self.shared { 0 } else { i };
            self.table[row * self.len + k]
        } else {
            ln_gamma(self.base[i] + k as f64)
        }
    }
}

/// Independent beta–Bernoulli features:
/// `f(D) = Π_i B(α_i + k_i, β_i + N_i − k_i) / B(α_i, β_i)`, with `k_i` the ones and `N_i`
/// the observed entries of column `i` (eq 1.19). A NaN entry is missing: it drops out of both
/// counts, which is exactly marginalising it out.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::{BetaBernoulli, ClusterModel};
///
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 1)?;
/// let s = model.leaf_stats(array![1.0].view(), 0)?;
/// // One draw from a uniform-prior coin is heads with probability 1/2.
/// assert!((model.log_marginal(&s)? - 0.5f64.ln()).abs() < 1e-15);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BetaBernoulli {
    alpha: Vec<f64>,
    beta: Vec<f64>,
    /// `Σ_i ln B(α_i, β_i)`.
    log_prior_norm: f64,
    ones: ShiftedLnGamma,
    zeros: ShiftedLnGamma,
    total: ShiftedLnGamma,
}

/// Sufficient statistics of a beta–Bernoulli cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BernoulliStats {
    n: u32,
    ones: Vec<u32>,
    /// Observed entries per column; `None` when every entry is observed (then `N_i = n`).
    observed: Option<Vec<u32>>,
    /// For a single sparse row, the columns holding a one: scoring it against a cluster then
    /// costs `O(nonzeros)` instead of `O(d)`.
    support: Option<Vec<u32>>,
}

impl BernoulliStats {
    /// Number of rows in the cluster.
    pub fn n_rows(&self) -> u32 {
        self.n
    }

    /// Number of ones per column.
    pub fn ones(&self) -> &[u32] {
        &self.ones
    }

    /// Observed entries of column `i`.
    #[inline]
    pub fn observed(&self, i: usize) -> u32 {
        self.observed.as_ref().map_or(self.n, |o| o[i])
    }
}

/// The terms of `ln f(A ∪ {x})` for a fully observed cluster `A` and any fully observed row
/// `x`: `base + Σ_i delta_i x_i`, so scoring `A` against a row is one dot product.
#[derive(Debug, Clone)]
pub struct BernoulliQuery {
    base: f64,
    delta: Vec<f64>,
}

/// `Σ_i w_i c_i` with four accumulators, so the loop vectorises (the order is fixed, so the
/// result does not depend on anything but the inputs).
#[inline]
fn dot_counts(w: &[f64], c: &[u32]) -> f64 {
    let mut acc = [0.0_f64; 4];
    let (wc, cc) = (w.chunks_exact(4), c.chunks_exact(4));
    let (wr, cr) = (wc.remainder(), cc.remainder());
    for (w4, c4) in wc.zip(cc) {
        for k in 0..4 {
            acc[k] += w4[k] * f64::from(c4[k]);
        }
    }
    let tail: f64 = wr.iter().zip(cr).map(|(w, &c)| w * f64::from(c)).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

impl BetaBernoulli {
    /// A model for `d` features with pseudo-counts `alpha` (ones) and `beta` (zeros), each a
    /// scalar or one value per feature.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `alpha` / `beta` for a wrong length or a value
    /// that is not finite and positive, and on `n_features` for `d = 0`.
    pub fn new(alpha: &[f64], beta: &[f64], d: usize) -> Result<Self> {
        if d == 0 {
            return Err(RoseTreeError::param(
                "n_features",
                "the data need at least one column",
            ));
        }
        let alpha = per_feature("alpha", alpha, d)?;
        let beta = per_feature("beta", beta, d)?;
        let log_prior_norm = alpha.iter().zip(&beta).map(|(&a, &b)| ln_beta(a, b)).sum();
        let sum: Vec<f64> = alpha.iter().zip(&beta).map(|(a, b)| a + b).collect();
        Ok(Self {
            ones: ShiftedLnGamma::new(alpha.clone()),
            zeros: ShiftedLnGamma::new(beta.clone()),
            total: ShiftedLnGamma::new(sum),
            alpha,
            beta,
            log_prior_norm,
        })
    }

    /// Pseudo-counts of ones, one per feature.
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// Pseudo-counts of zeros, one per feature.
    pub fn beta(&self) -> &[f64] {
        &self.beta
    }

    #[inline]
    fn log_f(&self, ones: impl Fn(usize) -> u32, observed: impl Fn(usize) -> u32) -> f64 {
        let mut s = 0.0;
        for i in 0..self.alpha.len() {
            let (k, m) = (ones(i), observed(i));
            s += self.ones.get(i, k) + self.zeros.get(i, m - k) - self.total.get(i, m);
        }
        s - self.log_prior_norm
    }
}

impl ClusterModel for BetaBernoulli {
    type Stats = BernoulliStats;
    type Query = Option<BernoulliQuery>;

    fn query(&self, a: &BernoulliStats) -> Option<BernoulliQuery> {
        if a.observed.is_some() {
            return None;
        }
        let n = a.n + 1;
        let mut base = -self.log_prior_norm;
        let delta = (0..a.ones.len())
            .map(|i| {
                let k = a.ones[i];
                let zero = self.ones.get(i, k) + self.zeros.get(i, n - k);
                let one = self.ones.get(i, k + 1) + self.zeros.get(i, n - k - 1);
                base += zero - self.total.get(i, n);
                one - zero
            })
            .collect();
        Some(BernoulliQuery { base, delta })
    }

    fn log_marginal_query(
        &self,
        q: &Option<BernoulliQuery>,
        a: &BernoulliStats,
        b: &BernoulliStats,
    ) -> Result<f64> {
        match q {
            Some(q) if b.n == 1 && b.observed.is_none() => Ok(q.base
                + match &b.support {
                    Some(cols) => cols.iter().map(|&i| q.delta[i as usize]).sum::<f64>(),
                    None => dot_counts(&q.delta, &b.ones),
                }),
            _ => self.log_marginal_merged(a, b),
        }
    }

    fn n_features(&self) -> usize {
        self.alpha.len()
    }

    fn prepare(&mut self, n_rows: usize) {
        for t in [&mut self.ones, &mut self.zeros, &mut self.total] {
            t.reserve(n_rows + 1);
        }
    }

    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<BernoulliStats> {
        let mut ones = Vec::with_capacity(row.len());
        let mut observed: Option<Vec<u32>> = None;
        for (j, &v) in row.iter().enumerate() {
            if v == 1.0 {
                ones.push(1);
            } else if v == 0.0 {
                ones.push(0);
            } else if v.is_nan() {
                ones.push(0);
                observed.get_or_insert_with(|| vec![1; row.len()])[j] = 0;
            } else {
                return Err(RoseTreeError::data(
                    index,
                    Some(j),
                    format!("the beta-Bernoulli model takes 0, 1 or NaN (missing), got {v}"),
                ));
            }
        }
        // Index the ones of a sparse row: below a quarter of the columns, summing over them
        // beats the dense dot product.
        let nnz = ones.iter().filter(|&&o| o == 1).count();
        let support = (4 * nnz <= ones.len()).then(|| {
            (0..ones.len() as u32)
                .filter(|&i| ones[i as usize] == 1)
                .collect()
        });
        Ok(BernoulliStats {
            n: 1,
            ones,
            observed,
            support,
        })
    }

    fn merge(&self, a: &BernoulliStats, b: &BernoulliStats) -> BernoulliStats {
        let ones = a.ones.iter().zip(&b.ones).map(|(x, y)| x + y).collect();
        let observed = match (&a.observed, &b.observed) {
            (None, None) => None,
            _ => Some(
                (0..a.ones.len())
                    .map(|i| a.observed(i) + b.observed(i))
                    .collect(),
            ),
        };
        BernoulliStats {
            n: a.n + b.n,
            ones,
            observed,
            support: None,
        }
    }

    fn log_marginal(&self, s: &BernoulliStats) -> Result<f64> {
        Ok(self.log_f(|i| s.ones[i], |i| s.observed(i)))
    }

    fn log_marginal_merged(&self, a: &BernoulliStats, b: &BernoulliStats) -> Result<f64> {
        let n = a.n + b.n;
        if a.observed.is_none() && b.observed.is_none() {
            let (ao, bo) = (&a.ones[..], &b.ones[..]);
            let nu = n as usize;
            if self.ones.shared && self.zeros.shared && nu < self.ones.len.min(self.zeros.len) {
                // Fully observed with one prior for every feature: two table reads a feature,
                // and the `ln Γ(α + β + n)` term is common to all of them.
                let (ta, tb) = (&self.ones.table[..=nu], &self.zeros.table[..=nu]);
                let mut s = 0.0;
                for (&x, &y) in ao.iter().zip(bo) {
                    let k = (x + y) as usize;
                    s += ta[k] + tb[nu - k];
                }
                return Ok(s - ao.len() as f64 * self.total.get(0, n) - self.log_prior_norm);
            }
            return Ok(self.log_f(|i| ao[i] + bo[i], |_| n));
        }
        Ok(self.log_f(|i| a.ones[i] + b.ones[i], |i| a.observed(i) + b.observed(i)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array2, array};

    fn stats_of(model: &BetaBernoulli, x: &Array2<f64>) -> BernoulliStats {
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        leaves[1..]
            .iter()
            .fold(leaves[0].clone(), |acc, s| model.merge(&acc, s))
    }

    /// Π_t P(x_t | x_<t), P(x = 1 | ·) = (α + ones so far) / (α + β + observed so far).
    fn sequential(alpha: &[f64], beta: &[f64], x: &Array2<f64>) -> f64 {
        let mut total = 0.0;
        for j in 0..x.ncols() {
            let (mut ones, mut seen) = (0.0, 0.0);
            for i in 0..x.nrows() {
                let v = x[[i, j]];
                if v.is_nan() {
                    continue;
                }
                let p1 = (alpha[j] + ones) / (alpha[j] + beta[j] + seen);
                total += if v == 1.0 { p1.ln() } else { (1.0 - p1).ln() };
                ones += v;
                seen += 1.0;
            }
        }
        total
    }

    #[test]
    fn matches_sequential_predictive_product() {
        let x = array![
            [1., 0., f64::NAN, 1.],
            [1., 1., 0., 1.],
            [0., f64::NAN, 0., 1.],
            [1., 0., 1., f64::NAN],
            [1., 0., 0., 1.]
        ];
        let (alpha, beta) = (vec![0.5, 1.0, 2.0, 0.3], vec![1.5, 0.7, 2.0, 3.0]);
        for prepared in [false, true] {
            let mut model = BetaBernoulli::new(&alpha, &beta, 4).unwrap();
            if prepared {
                model.prepare(3); // shorter than the counts: exercises the fallback too
            }
            let got = model.log_marginal(&stats_of(&model, &x)).unwrap();
            assert!((got - sequential(&alpha, &beta, &x)).abs() < 1e-12);
        }
    }

    #[test]
    fn merged_shortcut_equals_merge_then_evaluate() {
        let x = array![[1., 0., 1.], [1., 1., 0.], [0., 0., 1.], [1., 1., 1.]];
        for (alpha, beta) in [(vec![1.0], vec![1.0]), (vec![0.2, 3.0, 1.0], vec![1.0])] {
            let mut model = BetaBernoulli::new(&alpha, &beta, 3).unwrap();
            model.prepare(4);
            let l = model.leaf_stats_all(x.view()).unwrap();
            let (a, b) = (model.merge(&l[0], &l[1]), model.merge(&l[2], &l[3]));
            let direct = model.log_marginal(&model.merge(&a, &b)).unwrap();
            assert!((model.log_marginal_merged(&a, &b).unwrap() - direct).abs() < 1e-12);
        }
    }

    #[test]
    fn query_shortcut_equals_merge_then_evaluate() {
        let x = array![
            [1., 0., 1., 1., 0.],
            [1., 1., 0., 0., 0.],
            [0., 0., 1., 1., 1.],
            [1., 1., 1., 0., 1.]
        ];
        let (alpha, beta) = (vec![0.2, 3.0, 1.0, 0.5, 0.9], vec![1.0, 0.4, 2.0, 1.0, 1.1]);
        for prepared in [false, true] {
            let mut model = BetaBernoulli::new(&alpha, &beta, 5).unwrap();
            if prepared {
                model.prepare(4);
            }
            let l = model.leaf_stats_all(x.view()).unwrap();
            let a = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
            for (cluster, row) in [(&a, &l[3]), (&l[0], &l[2])] {
                let q = model.query(cluster);
                let direct = model.log_marginal(&model.merge(cluster, row)).unwrap();
                let fast = model.log_marginal_query(&q, cluster, row).unwrap();
                assert!((fast - direct).abs() < 1e-12 * direct.abs());
            }
            // A sparse row (few ones) is scored through its column list.
            let sparse = model
                .leaf_stats(array![0., 0., 0., 0., 1.].view(), 0)
                .unwrap();
            let direct = model.log_marginal(&model.merge(&a, &sparse)).unwrap();
            let fast = model
                .log_marginal_query(&model.query(&a), &a, &sparse)
                .unwrap();
            assert!(sparse.support.is_some());
            assert!((fast - direct).abs() < 1e-12 * direct.abs());
            // A cluster partner takes the general path.
            let q = model.query(&l[3]);
            let direct = model.log_marginal(&model.merge(&l[3], &a)).unwrap();
            assert!(
                (model.log_marginal_query(&q, &l[3], &a).unwrap() - direct).abs()
                    < 1e-12 * direct.abs()
            );
        }
    }

    #[test]
    fn merge_order_does_not_matter() {
        let x = array![[1., 0.], [f64::NAN, 1.], [0., 0.], [1., 1.]];
        let model = BetaBernoulli::new(&[0.7], &[1.1], 2).unwrap();
        let l = model.leaf_stats_all(x.view()).unwrap();
        let left = model.merge(&model.merge(&model.merge(&l[0], &l[1]), &l[2]), &l[3]);
        let right = model.merge(&model.merge(&l[3], &l[1]), &model.merge(&l[2], &l[0]));
        assert_eq!(left, right);
    }

    #[test]
    fn rejects_non_binary_values_and_bad_priors() {
        let model = BetaBernoulli::new(&[1.0], &[1.0], 3).unwrap();
        for bad in [0.5, 2.0, -1.0, f64::INFINITY] {
            let err = model.leaf_stats(array![0., 1., bad].view(), 7).unwrap_err();
            assert!(matches!(
                err,
                RoseTreeError::InvalidData {
                    row: 7,
                    column: Some(2),
                    ..
                }
            ));
        }
        for (a, b, name) in [
            (0.0, 1.0, "alpha"),
            (1.0, -2.0, "beta"),
            (f64::NAN, 1.0, "alpha"),
        ] {
            let err = BetaBernoulli::new(&[a], &[b], 3).unwrap_err();
            assert!(
                matches!(err, RoseTreeError::InvalidParameter { name: ref n, .. } if n == name)
            );
        }
        assert!(BetaBernoulli::new(&[1.0, 2.0], &[1.0], 3).is_err());
    }
}
