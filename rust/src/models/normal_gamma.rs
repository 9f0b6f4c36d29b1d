//! Real-valued clusters with independent Normal–Gamma features (a diagonal Gaussian model).
//!
//! Each feature `j` of a cluster has its own mean and precision,
//! `x_ij | μ_j, λ_j ~ N(μ_j, 1/λ_j)`, `μ_j | λ_j ~ N(m0_j, 1/(κ0 λ_j))`,
//! `λ_j ~ Gamma(a0, rate b0_j)`, and the features are independent, so `f(D)` is a product
//! over features of the Normal–Gamma marginal likelihood (Murphy 2007, "Conjugate Bayesian
//! analysis of the Gaussian distribution", eq 95). Unlike the Normal–inverse-Wishart model it
//! needs no matrix algebra, a missing entry simply drops out of its feature, and it does not
//! have to estimate `d(d+1)/2` covariances per cluster.
//!
//! A cluster keeps, per feature, the number of observed entries, their mean and their sum of
//! squared deviations, merged with the parallel formula of Chan, Golub & LeVeque (1979), so
//! no raw second moment `Σx²` is ever formed (it cancels catastrophically when the mean is
//! large against the spread).

use ndarray::{ArrayView1, ArrayView2};

use super::{ClusterModel, Differentiable, RowQueries, check_hyperparameter_count, per_feature};
use crate::error::{Result, RoseTreeError};
use crate::math::{digamma_diff, ln_gamma_ratio};

/// `ln(2π)`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Count tables of [`ClusterModel::prepare`] stop at this many entries.
const MAX_TABLE: usize = 1 << 24;

/// From this `a0` on, `a0 ln b0 − a_n ln b_n` is computed as
/// `−a0 ln(1 + r/b0) − (n/2) ln b_n` with `r = b_n − b0` formed directly: the two products
/// are then of order `a0 ln b0` and cancel, which would cost `a0 · 10⁻¹⁶` nats.
const PRECISE_A0: f64 = 32.0;

/// Ridge added to each feature's variance in the data-driven `b0`, relative to the mean
/// variance over features, so that a constant column still gets `b0 > 0`.
const RIDGE: f64 = 1e-6;

/// Per-feature moments of a data set's observed (non-NaN) entries, from which the
/// data-driven defaults of [`NormalGamma`] are set: the count, the mean and the variance
/// (divisor `count − 1`) of each column, by two passes over the data.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMoments {
    /// Observed entries per column.
    pub count: Vec<usize>,
    /// Mean of the observed entries (0 for a column without any).
    pub mean: Vec<f64>,
    /// Sample variance of the observed entries (0 for a column with fewer than two).
    pub variance: Vec<f64>,
}

impl ColumnMoments {
    /// Moments of a data set with `n_rows` rows whose stored entries are listed by
    /// `entries()` as `(column, value)` (each call must list the same entries); columns of
    /// a row that are not listed hold zeros, as in a sparse matrix. NaN entries are missing.
    fn from_entries<I: Iterator<Item = (usize, f64)>>(
        n_rows: usize,
        d: usize,
        entries: impl Fn() -> I,
    ) -> Self {
        let mut stored = vec![0_usize; d];
        let mut count = vec![0_usize; d];
        let mut sum = vec![0.0; d];
        for (j, v) in entries() {
            stored[j] += 1;
            if !v.is_nan() {
                count[j] += 1;
                sum[j] += v;
            }
        }
        // Entries that are not stored are zeros, and observed.
        let zeros: Vec<usize> = stored.iter().map(|s| n_rows - s).collect();
        for (c, z) in count.iter_mut().zip(&zeros) {
            *c += z;
        }
        let mean: Vec<f64> = (0..d)
            .map(|j| {
                if count[j] > 0 {
                    sum[j] / count[j] as f64
                } else {
                    0.0
                }
            })
            .collect();
        // Second pass: squared deviations about the mean, never `Σx² − n x̄²`.
        let mut m2: Vec<f64> = (0..d)
            .map(|j| zeros[j] as f64 * mean[j] * mean[j])
            .collect();
        for (j, v) in entries() {
            if !v.is_nan() {
                m2[j] += (v - mean[j]) * (v - mean[j]);
            }
        }
        let variance = (0..d)
            .map(|j| {
                if count[j] > 1 {
                    m2[j] / (count[j] - 1) as f64
                } else {
                    0.0
                }
            })
            .collect();
        Self {
            count,
            mean,
            variance,
        }
    }

    /// Moments of the columns of a dense array (NaN = missing).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] at the first infinite value.
    pub fn dense(x: ArrayView2<'_, f64>) -> Result<Self> {
        if let Some(((i, j), _)) = x.indexed_iter().find(|(_, v)| v.is_infinite()) {
            return Err(nonfinite(i, j));
        }
        Ok(Self::from_entries(x.nrows(), x.ncols(), || {
            x.indexed_iter().map(|((_, j), &v)| (j, v))
        }))
    }

    /// Moments of the columns of an array of small whole numbers (binary data given as
    /// `bool` or `uint8`), read in place.
    pub fn bytes(x: ArrayView2<'_, u8>) -> Self {
        Self::from_entries(x.nrows(), x.ncols(), || {
            x.indexed_iter()
                .filter(|(_, v)| **v != 0)
                .map(|((_, j), &v)| (j, f64::from(v)))
        })
    }

    /// Moments of the columns of a CSR matrix with `n_cols` columns (`indptr`, `indices`,
    /// `data` as in SciPy); unstored entries are zeros and stored NaN entries missing.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `X` for a malformed matrix, and
    /// [`RoseTreeError::InvalidData`] at the first infinite value.
    pub fn csr(indptr: &[i64], indices: &[i64], data: &[f64], n_cols: usize) -> Result<Self> {
        let bad = |what: &str| RoseTreeError::param("X", format!("malformed CSR matrix: {what}"));
        let n = indptr.len().saturating_sub(1);
        if indptr.first() != Some(&0) || indices.len() != data.len() {
            return Err(bad(
                "indptr must start at 0 and indices match data in length",
            ));
        }
        if indptr.windows(2).any(|w| w[0] > w[1]) || indptr[n] as usize > data.len() {
            return Err(bad("indptr must be non-decreasing and within the data"));
        }
        let data = &data[..indptr[n] as usize];
        let mut columns = Vec::with_capacity(data.len());
        for &c in &indices[..data.len()] {
            columns.push(
                usize::try_from(c)
                    .ok()
                    .filter(|&c| c < n_cols)
                    .ok_or_else(|| bad("column index out of range"))?,
            );
        }
        if let Some(k) = data.iter().position(|v| v.is_infinite()) {
            let row = indptr.partition_point(|&p| p as usize <= k) - 1;
            return Err(nonfinite(row, columns[k]));
        }
        Ok(Self::from_entries(n, n_cols, || {
            columns.iter().copied().zip(data.iter().copied())
        }))
    }
}

fn nonfinite(row: usize, col: usize) -> RoseTreeError {
    RoseTreeError::data(
        row,
        Some(col),
        "the Normal-Gamma model takes finite values or NaN (missing)",
    )
}

/// The mean variance of the columns with at least two observed entries (0 if none has).
fn mean_known_variance(moments: &ColumnMoments) -> f64 {
    let known: Vec<f64> = (0..moments.mean.len())
        .filter(|&j| moments.count[j] > 1)
        .map(|j| moments.variance[j])
        .collect();
    known.iter().sum::<f64>() / known.len().max(1) as f64
}

/// Independent Normal–Gamma features:
///
/// `ln f(D) = Σ_j [ln Γ(a_n) − ln Γ(a0) + a0 ln b0_j − a_n ln b_nj + ½ ln(κ0/κ_n)
///            − (n/2) ln 2π]`
///
/// (Murphy 2007, eq 95, for each feature), where for feature `j` the cluster has `n = n_j`
/// observed entries with mean `x̄_j` and squared deviations `M2_j = Σ (x − x̄_j)²`, and
/// `κ_n = κ0 + n`, `a_n = a0 + n/2`, `b_nj = b0_j + M2_j/2 + κ0 n (x̄_j − m0_j)² / (2κ_n)`.
///
/// The prior is `λ_j ~ Gamma(a0, rate b0_j)` on each feature's precision (prior mean
/// `a0/b0_j`) and `μ_j | λ_j ~ N(m0_j, 1/(κ0 λ_j))`. `m0` and `b0` are scalars or one value
/// per feature; `κ0` and `a0` are shared.
///
/// A NaN entry is missing: it drops out of its feature's count, mean and deviations, which
/// is exactly marginalising it out. Infinite values are rejected.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::{ClusterModel, NormalGamma};
///
/// let model = NormalGamma::new(&[0.0], 1.0, 2.0, &[1.0], 2)?;
/// let s = model.leaf_stats(array![0.5, f64::NAN].view(), 0)?;
/// // One observed entry: a Student t with 2·a0 = 4 degrees of freedom, scale² = b0(κ0+1)/(a0 κ0) = 1.
/// let t = statrs::distribution::StudentsT::new(0.0, 1.0, 4.0).unwrap();
/// use statrs::distribution::Continuous;
/// assert!((model.log_marginal(&s)? - t.ln_pdf(0.5)).abs() < 1e-14);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct NormalGamma {
    m0: Vec<f64>,
    kappa0: f64,
    a0: f64,
    b0: Vec<f64>,
    /// `Σ_j a0 ln b0_j`.
    sum_a0_ln_b0: f64,
    /// `a0 ln b0_j` per feature.
    a0_ln_b0: Vec<f64>,
    /// `count_term(n)` for `n ∈ 0..count_terms.len()`, filled by `prepare`.
    count_terms: Vec<f64>,
    /// `a0 ≥ PRECISE_A0`: the rate terms use the cancellation-free form (two logarithms per
    /// feature instead of one).
    precise: bool,
    /// One precision `λ` for every feature of a cluster (a spherical Gaussian) instead of
    /// one per feature; `b0` then holds one value `d` times.
    shared: bool,
}

/// Sufficient statistics of a Normal–Gamma cluster: the number of rows and, per feature,
/// the mean (measured from the model's prior mean `m0`) and the sum of squared deviations
/// `M2` of the observed entries, and their count. Measuring from `m0` keeps the spread of
/// data far from zero: `x − m0` is exact for `x` within a factor of two of `m0`, where
/// `x` itself would already have lost the digits below its spacing of doubles. Statistics
/// belong to the model that made them (or one with the same `m0`).
///
/// The observed counts are stored only once some row of the cluster had a missing entry;
/// until then every feature has `n_j = n` and no count vector is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalGammaStats {
    n: u32,
    /// Observed entries per feature; `None` when every entry is observed (then `n_j = n`).
    observed: Option<Vec<u32>>,
    mean: Vec<f64>,
    m2: Vec<f64>,
}

impl NormalGammaStats {
    /// Number of rows in the cluster.
    pub fn n_rows(&self) -> u32 {
        self.n
    }

    /// Observed (non-missing) entries of feature `j`, `n_j`.
    ///
    /// # Panics
    /// If `j` is not a feature index.
    #[inline]
    pub fn observed(&self, j: usize) -> u32 {
        self.observed.as_ref().map_or(self.n, |o| o[j])
    }

    /// Mean of the observed entries of each feature, minus the model's `m0` (0 where none
    /// is observed).
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Sum of squared deviations from the mean of each feature's observed entries.
    pub fn m2(&self) -> &[f64] {
        &self.m2
    }

    /// Whether every entry of the cluster is observed.
    pub fn is_complete(&self) -> bool {
        self.observed.is_none()
    }
}

/// The terms of `ln f(A ∪ {x})` for a cluster `A` and any single row `x`. Adding one
/// observation to feature `j` updates the posterior rate to
/// `b_j + κ_j (x_j − μ_j)² / (2(κ_j + 1))`, where `μ_j`, `κ_j`, `b_j` are `A`'s posterior
/// (Murphy 2007, eqs 86–89), so `ln f(A ∪ {x}) = base − Σ_j h_j ln(b_j + c_j (x_j − μ_j)²)`
/// over the observed `x_j`, plus `missing_j` for each missing one.
#[derive(Debug, Clone)]
pub struct NormalGammaQuery {
    /// `Σ_j [count_term(n_j + 1) + a0 ln b0_j]`.
    base: f64,
    /// Posterior mean `μ_j` of `A`, minus `m0_j`.
    mean: Vec<f64>,
    /// Posterior rate `b_j` of `A`.
    rate: Vec<f64>,
    /// `κ_j / (2(κ_j + 1))`.
    c: Vec<f64>,
    /// `a0 + (n_j + 1)/2`.
    shape: Vec<f64>,
    /// `A`'s own term of feature `j` minus its share of `base`: the change when `x_j` is
    /// missing.
    missing: Vec<f64>,
}

impl NormalGamma {
    /// Default `κ0` of [`NormalGamma::with_defaults`]: cluster means spread about as
    /// widely as the rows of one cluster.
    pub const DEFAULT_KAPPA0: f64 = 1.0;
    /// Default `a0` of [`NormalGamma::with_defaults`].
    pub const DEFAULT_A0: f64 = 5.0;
    /// Default `b0_j / (a0 · variance_j)` of [`NormalGamma::with_defaults`]: the prior mean
    /// precision of a cluster is five times that of the whole data.
    ///
    /// The three defaults gave the highest mean dendrogram purity of a grid of 90 rules on
    /// MNIST, optdigits and digits024 subsets (`experiments/normal_gamma_defaults.py`).
    pub const DEFAULT_B0_SCALE: f64 = 0.2;

    /// A model for `d` features with prior mean `m0`, pseudo-count `kappa0`, shape `a0` and
    /// rate `b0` (`m0` and `b0` each a scalar or one value per feature).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `n_features` for `d = 0`; `m0` for a wrong
    /// length or a value that is not finite; `kappa0`, `a0`, or `b0` (also for a wrong
    /// length) unless every value is finite and `> 0`.
    ///
    /// # Examples
    /// ```
    /// use rosetree::models::NormalGamma;
    ///
    /// let model = NormalGamma::new(&[0.0, 1.0], 0.1, 2.0, &[0.5], 2)?;
    /// assert_eq!(model.b0(), &[0.5, 0.5]);
    /// assert!(NormalGamma::new(&[0.0], 0.1, 0.0, &[1.0], 2).is_err());
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn new(m0: &[f64], kappa0: f64, a0: f64, b0: &[f64], d: usize) -> Result<Self> {
        if d == 0 {
            return Err(RoseTreeError::param(
                "n_features",
                "the data need at least one column",
            ));
        }
        let m0 = match m0.len() {
            1 => vec![m0[0]; d],
            n if n == d => m0.to_vec(),
            n => {
                return Err(RoseTreeError::param(
                    "m0",
                    format!("expected a scalar or {d} values (one per feature), got {n}"),
                ));
            }
        };
        if let Some(v) = m0.iter().find(|v| !v.is_finite()) {
            return Err(RoseTreeError::param(
                "m0",
                format!("must be finite, got {v}"),
            ));
        }
        let kappa0 = per_feature("kappa0", &[kappa0], 1)?[0];
        let a0 = per_feature("a0", &[a0], 1)?[0];
        let b0 = per_feature("b0", b0, d)?;
        let a0_ln_b0: Vec<f64> = b0.iter().map(|b| a0 * b.ln()).collect();
        Ok(Self {
            m0,
            kappa0,
            a0,
            sum_a0_ln_b0: a0_ln_b0.iter().sum(),
            a0_ln_b0,
            b0,
            count_terms: Vec::new(),
            precise: a0 >= PRECISE_A0,
            shared: false,
        })
    }

    /// The model with one precision shared by all features of a cluster (`shared`), or
    /// one per feature (the default of [`Self::new`]):
    ///
    /// `ln f(D) = Σ_j [½ ln(κ0/κ_nj) − (n_j/2) ln 2π] + ln Γ(a_N) − ln Γ(a0) + a0 ln b0
    ///            − a_N ln(b0 + Σ_j r_j)`
    ///
    /// with `a_N = a0 + N/2`, `N = Σ_j n_j` the observed entries of the cluster and
    /// `r_j = b_nj − b0` what feature `j` adds to the rate (as in the per-feature model).
    /// The prior is `λ ~ Gamma(a0, rate b0)` and `μ_j | λ ~ N(m0_j, 1/(κ0 λ))`: given `λ`,
    /// each feature is the per-feature model's, and integrating the one `λ` out gives the
    /// above. Within a cluster every feature has the same variance, so that a cluster is a
    /// ball, as in Ward's criterion: features of small variance weigh little, where the
    /// per-feature model measures each feature against its own spread.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `b0` when `shared` and `b0` holds
    /// different values.
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use rosetree::models::{ClusterModel, NormalGamma};
    ///
    /// // With one feature the shared precision is the feature's own.
    /// let diagonal = NormalGamma::new(&[0.0], 1.0, 2.0, &[1.5], 1)?;
    /// let shared = diagonal.clone().with_shared_precision(true)?;
    /// let s = diagonal.merge(
    ///     &diagonal.leaf_stats(array![0.3].view(), 0)?,
    ///     &diagonal.leaf_stats(array![-1.2].view(), 1)?,
    /// );
    /// assert!((shared.log_marginal(&s)? - diagonal.log_marginal(&s)?).abs() < 1e-14);
    /// assert!(NormalGamma::new(&[0.0], 1.0, 2.0, &[1.0, 2.0], 2)?
    ///     .with_shared_precision(true)
    ///     .is_err());
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn with_shared_precision(mut self, shared: bool) -> Result<Self> {
        if shared && self.b0.iter().any(|&b| b != self.b0[0]) {
            return Err(RoseTreeError::param(
                "b0",
                "with a shared precision b0 is one number (the rate of the one precision)",
            ));
        }
        self.shared = shared;
        Ok(self)
    }

    /// The shared-precision model ([`Self::with_shared_precision`]) with the data-driven
    /// defaults for whatever is `None`: `m0_j` = the mean of column `j`, `κ0` and `a0` as in
    /// [`Self::with_defaults`], and `b0 = DEFAULT_B0_SCALE · a0 · v̄`, `v̄` the mean variance
    /// of the columns with at least two observed entries (1 if there is none or it is 0),
    /// so that a cluster's prior mean variance is a fifth of the data's mean variance.
    ///
    /// # Errors
    /// As [`Self::new`].
    pub fn shared_with_defaults(
        moments: &ColumnMoments,
        m0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        a0: Option<f64>,
        b0: Option<f64>,
    ) -> Result<Self> {
        let d = moments.mean.len();
        let kappa0 = kappa0.unwrap_or(Self::DEFAULT_KAPPA0);
        let a0 = a0.unwrap_or(Self::DEFAULT_A0);
        let m0 = m0.unwrap_or_else(|| moments.mean.clone());
        let b0 = b0.unwrap_or_else(|| {
            let mean_var = mean_known_variance(moments);
            let unit = if mean_var > 0.0 && mean_var.is_finite() {
                mean_var
            } else {
                1.0
            };
            Self::DEFAULT_B0_SCALE * a0 * unit
        });
        Self::new(&m0, kappa0, a0, &[b0], d)?.with_shared_precision(true)
    }

    /// Whether one precision is shared by all features ([`Self::with_shared_precision`]).
    pub fn shared_precision(&self) -> bool {
        self.shared
    }

    /// `ln f` under the shared precision of a cluster whose features have `n_j` observed
    /// entries and rate increments `r_j` (`features` yields `(n_j, r_j)`).
    fn log_f_shared(&self, features: impl Iterator<Item = (u32, f64)>) -> f64 {
        let (mut own, mut total, mut rate) = (0.0, 0.0, 0.0);
        for (n, r) in features {
            if n == 0 {
                continue;
            }
            let nf = f64::from(n);
            own -= 0.5 * (nf / self.kappa0).ln_1p() + nf / 2.0 * LN_2PI;
            total += nf;
            rate += r;
        }
        if total == 0.0 {
            return 0.0;
        }
        let b0 = self.b0[0];
        // a0 ln b0 − a_N ln(b0 + R) = −a0 ln(1 + R/b0) − (N/2) ln(b0 + R): no cancellation.
        own + ln_gamma_ratio(self.a0, total / 2.0)
            - self.a0 * (rate / b0).ln_1p()
            - total / 2.0 * (b0 + rate).ln()
    }

    /// The model with the data-driven defaults for whatever is `None`:
    ///
    /// - `m0_j` = the mean of column `j`;
    /// - `κ0` = [`DEFAULT_KAPPA0`](Self::DEFAULT_KAPPA0), `a0` = [`DEFAULT_A0`](Self::DEFAULT_A0);
    /// - `b0_j = DEFAULT_B0_SCALE · a0 · v_j`, where `v_j` is the sample variance of column `j`
    ///   plus a ridge of `10⁻⁶` times the mean variance over columns (so that the prior mean
    ///   of the precision, `a0/b0_j`, is `5/v_j`: clusters are narrower than the data). A column with fewer than two
    ///   observed entries takes the mean variance; if every column is constant, `v_j = 1`.
    ///
    /// Moments count the observed (non-NaN) entries only.
    ///
    /// # Errors
    /// As [`Self::new`].
    pub fn with_defaults(
        moments: &ColumnMoments,
        m0: Option<Vec<f64>>,
        kappa0: Option<f64>,
        a0: Option<f64>,
        b0: Option<Vec<f64>>,
    ) -> Result<Self> {
        let d = moments.mean.len();
        let kappa0 = kappa0.unwrap_or(Self::DEFAULT_KAPPA0);
        let a0 = a0.unwrap_or(Self::DEFAULT_A0);
        let m0 = m0.unwrap_or_else(|| moments.mean.clone());
        let b0 = match b0 {
            Some(b0) => b0,
            None => {
                // The mean variance over the columns with at least two observed entries
                // stands in for the others' variance, and sets the ridge.
                let mean_var = mean_known_variance(moments);
                let scale = Self::DEFAULT_B0_SCALE * a0;
                if mean_var > 0.0 && mean_var.is_finite() {
                    (0..d)
                        .map(|j| {
                            let v = if moments.count[j] > 1 {
                                moments.variance[j]
                            } else {
                                mean_var
                            };
                            scale * (v + RIDGE * mean_var)
                        })
                        .collect()
                } else {
                    vec![scale; d]
                }
            }
        };
        Self::new(&m0, kappa0, a0, &b0, d)
    }

    /// Prior means `m0_j`.
    pub fn m0(&self) -> &[f64] {
        &self.m0
    }

    /// Prior pseudo-count `κ0` of the means.
    pub fn kappa0(&self) -> f64 {
        self.kappa0
    }

    /// Gamma shape `a0` of the precisions.
    pub fn a0(&self) -> f64 {
        self.a0
    }

    /// Gamma rates `b0_j` of the precisions.
    pub fn b0(&self) -> &[f64] {
        &self.b0
    }

    /// The part of one feature's `ln f` that depends only on its count `n`:
    /// `ln Γ(a0 + n/2) − ln Γ(a0) + ½ ln(κ0/(κ0 + n)) − (n/2) ln 2π`.
    fn count_term_direct(&self, n: u32) -> f64 {
        let n = f64::from(n);
        ln_gamma_ratio(self.a0, n / 2.0) - 0.5 * (n / self.kappa0).ln_1p() - n / 2.0 * LN_2PI
    }

    #[inline]
    fn count_term(&self, n: u32) -> f64 {
        match self.count_terms.get(n as usize) {
            Some(&t) => t,
            None => self.count_term_direct(n),
        }
    }

    /// `r = b_n − b0 = M2/2 + κ0 n (x̄ − m0)² / (2κ_n)` of a feature with `n` observed
    /// entries, mean `mean = x̄ − m0` (as the statistics hold it) and deviations `m2`: what
    /// the data add to the prior rate `b0`.
    #[inline]
    fn rate_increment(&self, n: f64, mean: f64, m2: f64) -> f64 {
        0.5 * m2 + 0.5 * self.kappa0 * n / (self.kappa0 + n) * mean * mean
    }

    /// `a0 ln b0_j − a_n ln b_nj` for `n` observed entries with `b_nj = b0_j + r`.
    #[inline]
    fn rate_term(&self, j: usize, n: f64, r: f64) -> f64 {
        let b_n = self.b0[j] + r;
        if self.precise {
            -self.a0 * (r / self.b0[j]).ln_1p() - n / 2.0 * b_n.ln()
        } else {
            self.a0_ln_b0[j] - (self.a0 + n / 2.0) * b_n.ln()
        }
    }

    /// Feature `j`'s share of `ln f` for `n` observed entries with mean `mean` and
    /// deviations `m2` (0 for `n = 0`).
    #[inline]
    fn feature_term(&self, j: usize, n: u32, mean: f64, m2: f64) -> f64 {
        if n == 0 {
            return 0.0;
        }
        let nf = f64::from(n);
        self.count_term(n) + self.rate_term(j, nf, self.rate_increment(nf, mean, m2))
    }

    /// `ln f` of a fully observed cluster of `n` rows whose feature `j` has rate increment
    /// `r(j)`: in the common (not `precise`) case one logarithm per feature and a shared
    /// count term.
    #[inline]
    fn log_f_complete(&self, n: u32, r: impl Fn(usize) -> f64) -> f64 {
        let (d, nf) = (self.m0.len(), f64::from(n));
        if self.precise {
            return (0..d)
                .map(|j| self.count_term(n) + self.rate_term(j, nf, r(j)))
                .sum();
        }
        let mut sum_ln_b = 0.0;
        for j in 0..d {
            sum_ln_b += (self.b0[j] + r(j)).ln();
        }
        d as f64 * self.count_term(n) + self.sum_a0_ln_b0 - (self.a0 + nf / 2.0) * sum_ln_b
    }

    /// Checks that `ln f` is finite: it is not only when the data overflow.
    fn finite(&self, log_f: f64, n: u32) -> Result<f64> {
        if log_f.is_finite() {
            Ok(log_f)
        } else {
            Err(RoseTreeError::Numerical(format!(
                "ln f of a {n}-row Normal-Gamma cluster is {log_f} (are the data badly scaled?)"
            )))
        }
    }

    /// Chan et al.'s merge of feature `j`: `(n_j, mean, M2)` of the union of two clusters.
    #[inline]
    fn merge_feature(a: &NormalGammaStats, b: &NormalGammaStats, j: usize) -> (u32, f64, f64) {
        let (na, ma, sa) = (a.observed(j), a.mean[j], a.m2[j]);
        let (nb, mb, sb) = (b.observed(j), b.mean[j], b.m2[j]);
        if nb == 0 {
            return (na, ma, sa);
        }
        if na == 0 {
            return (nb, mb, sb);
        }
        let n = na + nb;
        let (fa, fb, nf) = (f64::from(na), f64::from(nb), f64::from(n));
        let delta = mb - ma;
        (
            n,
            ma + delta * (fb / nf),
            sa + sb + delta * delta * (fa * fb / nf),
        )
    }
}

/// `[n, complete, mean…, m2…, observed…]`, with the observed counts only where some entry
/// is missing (`complete = 0`).
impl super::StatsCodec for NormalGamma {
    fn encode_stats(&self, s: &NormalGammaStats) -> Vec<f64> {
        let mut v = vec![f64::from(s.n), f64::from(u8::from(s.observed.is_none()))];
        v.extend_from_slice(&s.mean);
        v.extend_from_slice(&s.m2);
        v.extend(s.observed.iter().flatten().map(|&k| f64::from(k)));
        v
    }

    fn decode_stats(&self, v: &[f64]) -> Result<NormalGammaStats> {
        let d = self.n_features();
        let complete = v.get(1) == Some(&1.0);
        super::check_stats_len(v, if complete { 2 + 2 * d } else { 2 + 3 * d })?;
        let observed = if complete {
            None
        } else {
            Some(
                v[2 + 2 * d..]
                    .iter()
                    .map(|&k| super::decode_count(k))
                    .collect::<Result<Vec<_>>>()?,
            )
        };
        Ok(NormalGammaStats {
            n: super::decode_count(v[0])?,
            observed,
            mean: v[2..2 + d].to_vec(),
            m2: v[2 + d..2 + 2 * d].to_vec(),
        })
    }
}

impl ClusterModel for NormalGamma {
    type Stats = NormalGammaStats;

    fn n_features(&self) -> usize {
        self.m0.len()
    }

    /// Tabulates the per-feature terms of `ln f` that depend only on the count
    /// (`ln Γ(a0 + n/2) − ln Γ(a0)`, `ln κ_n`) for `n ∈ 0..=n_rows`.
    fn prepare(&mut self, n_rows: usize) {
        let len = n_rows.saturating_add(1).min(MAX_TABLE);
        if len > self.count_terms.len() {
            self.count_terms = (0..len as u32).map(|n| self.count_term_direct(n)).collect();
        }
    }

    /// The row itself as the mean, with zero deviations; NaN entries are missing.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] at the first infinite entry.
    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<NormalGammaStats> {
        let mut mean = Vec::with_capacity(row.len());
        let mut observed: Option<Vec<u32>> = None;
        for (j, &v) in row.iter().enumerate() {
            if v.is_nan() {
                observed.get_or_insert_with(|| vec![1; row.len()])[j] = 0;
                mean.push(0.0);
            } else if v.is_infinite() {
                return Err(nonfinite(index, j));
            } else {
                // Measured from m0: near m0 the difference is exact, so that data far from
                // zero keep their spread (at 10⁸ the spacing of doubles is 1.5·10⁻⁸).
                let centred = v - self.m0[j];
                if centred.is_infinite() {
                    return Err(RoseTreeError::Numerical(format!(
                        "row {index}, column {j}: {v} lies too far from the prior mean \
                         m0 = {} for double precision (are the data badly scaled?)",
                        self.m0[j]
                    )));
                }
                mean.push(centred);
            }
        }
        Ok(NormalGammaStats {
            n: 1,
            observed,
            m2: vec![0.0; mean.len()],
            mean,
        })
    }

    /// Chan et al., per feature: with `δ = x̄_b − x̄_a` and `n = n_a + n_b`,
    /// `x̄ = x̄_a + δ n_b/n` and `M2 = M2_a + M2_b + δ² n_a n_b/n`.
    fn merge(&self, a: &NormalGammaStats, b: &NormalGammaStats) -> NormalGammaStats {
        let d = a.mean.len();
        let mut mean = Vec::with_capacity(d);
        let mut m2 = Vec::with_capacity(d);
        let complete = a.observed.is_none() && b.observed.is_none();
        let mut observed = Vec::with_capacity(if complete { 0 } else { d });
        for j in 0..d {
            let (n, m, s) = Self::merge_feature(a, b, j);
            mean.push(m);
            m2.push(s);
            if !complete {
                observed.push(n);
            }
        }
        NormalGammaStats {
            n: a.n + b.n,
            observed: (!complete).then_some(observed),
            mean,
            m2,
        }
    }

    /// # Errors
    /// [`RoseTreeError::Numerical`] when `ln f` is not finite, which only happens when the
    /// data overflow (values near `10¹⁵⁴` or beyond).
    fn log_marginal(&self, s: &NormalGammaStats) -> Result<f64> {
        if self.shared {
            let log_f = self.log_f_shared((0..s.mean.len()).map(|j| {
                let n = s.observed(j);
                (n, self.rate_increment(f64::from(n), s.mean[j], s.m2[j]))
            }));
            return self.finite(log_f, s.n);
        }
        let log_f = match &s.observed {
            None => {
                let nf = f64::from(s.n);
                self.log_f_complete(s.n, |j| self.rate_increment(nf, s.mean[j], s.m2[j]))
            }
            Some(obs) => (0..s.mean.len())
                .map(|j| self.feature_term(j, obs[j], s.mean[j], s.m2[j]))
                .sum(),
        };
        self.finite(log_f, s.n)
    }

    /// `ln f(A ∪ B)` with each feature merged on the fly, without building the merged
    /// statistics.
    fn log_marginal_merged(&self, a: &NormalGammaStats, b: &NormalGammaStats) -> Result<f64> {
        let n = a.n + b.n;
        if self.shared {
            let log_f = self.log_f_shared((0..a.mean.len()).map(|j| {
                let (nj, m, s) = Self::merge_feature(a, b, j);
                (nj, self.rate_increment(f64::from(nj), m, s))
            }));
            return self.finite(log_f, n);
        }
        let log_f = if a.observed.is_none() && b.observed.is_none() {
            let (fa, fb, nf) = (f64::from(a.n), f64::from(b.n), f64::from(n));
            let (wb, wab) = (fb / nf, fa * fb / nf);
            self.log_f_complete(n, |j| {
                let delta = b.mean[j] - a.mean[j];
                let mean = a.mean[j] + delta * wb;
                let m2 = a.m2[j] + b.m2[j] + delta * delta * wab;
                self.rate_increment(nf, mean, m2)
            })
        } else {
            (0..a.mean.len())
                .map(|j| {
                    let (nj, m, s) = Self::merge_feature(a, b, j);
                    self.feature_term(j, nj, m, s)
                })
                .sum()
        };
        self.finite(log_f, n)
    }
}

impl RowQueries for NormalGamma {
    type Query = NormalGammaQuery;

    /// `A`'s posterior per feature: `κ_j = κ0 + n_j`, `μ_j = (κ0 m0_j + n_j x̄_j)/κ_j` (held as
    /// `μ_j − m0_j = n_j (x̄_j − m0_j)/κ_j`, like the statistics) and
    /// `b_j` (Murphy 2007, eqs 86–89), from which one more observation costs one logarithm
    /// per feature.
    fn query(&self, a: &NormalGammaStats) -> NormalGammaQuery {
        let d = a.mean.len();
        let mut q = NormalGammaQuery {
            base: 0.0,
            mean: Vec::with_capacity(d),
            rate: Vec::with_capacity(d),
            c: Vec::with_capacity(d),
            shape: Vec::with_capacity(d),
            missing: Vec::with_capacity(d),
        };
        for j in 0..d {
            let n = a.observed(j);
            let nf = f64::from(n);
            let kappa = self.kappa0 + nf;
            let share = self.count_term(n + 1) + self.a0_ln_b0[j];
            q.base += share;
            q.mean.push(nf * a.mean[j] / kappa);
            q.rate
                .push(self.b0[j] + self.rate_increment(nf, a.mean[j], a.m2[j]));
            q.c.push(kappa / (2.0 * (kappa + 1.0)));
            q.shape.push(self.a0 + (nf + 1.0) / 2.0);
            q.missing
                .push(self.feature_term(j, n, a.mean[j], a.m2[j]) - share);
        }
        q
    }

    fn log_marginal_query(
        &self,
        q: &NormalGammaQuery,
        a: &NormalGammaStats,
        b: &NormalGammaStats,
    ) -> Result<f64> {
        if b.n != 1 || self.precise || self.shared {
            return self.log_marginal_merged(a, b);
        }
        let mut log_f = q.base;
        for j in 0..q.mean.len() {
            if b.observed(j) == 0 {
                log_f += q.missing[j];
            } else {
                let dev = b.mean[j] - q.mean[j];
                log_f -= q.shape[j] * (q.rate[j] + q.c[j] * dev * dev).ln();
            }
        }
        self.finite(log_f, a.n + 1)
    }
}

/// Hyperparameters `η = (m0_1, …, m0_d, κ0, a0, b0_1, …, b0_d)`. For feature `j` with
/// `n` observed entries, `v = x̄_j − m0_j`, `κ_n = κ0 + n`, `a_n = a0 + n/2`:
/// - `∂ ln f/∂m0_j = a_n κ0 n v / (κ_n b_nj)`,
/// - `∂ ln f/∂κ0 = Σ_j [½(1/κ0 − 1/κ_n) − a_n n² v² / (2 κ_n² b_nj)]`,
/// - `∂ ln f/∂a0 = Σ_j [ψ(a_n) − ψ(a0) + ln b0_j − ln b_nj]`,
/// - `∂ ln f/∂b0_j = a0/b0_j − a_n/b_nj`,
///
/// each summed over the features with `n > 0` only.
impl Differentiable for NormalGamma {
    fn n_hyperparameters(&self) -> usize {
        2 * self.m0.len() + 2
    }

    fn hyperparameters(&self) -> Vec<f64> {
        let mut eta = self.m0.clone();
        eta.extend([self.kappa0, self.a0]);
        eta.extend_from_slice(&self.b0);
        eta
    }

    fn with_hyperparameters(&self, eta: &[f64]) -> Result<Self> {
        check_hyperparameter_count(eta, self.n_hyperparameters())?;
        let d = self.m0.len();
        Self::new(&eta[..d], eta[d], eta[d + 1], &eta[d + 2..], d)?
            .with_shared_precision(self.shared)
    }

    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `model` for the shared-precision model,
    /// whose gradient is not implemented; [`RoseTreeError::Numerical`] when a posterior rate
    /// is not finite.
    fn add_gradient(&self, s: &NormalGammaStats, weight: f64, grad: &mut [f64]) -> Result<()> {
        if self.shared {
            return Err(RoseTreeError::param(
                "model",
                "the Normal-Gamma model with a shared precision has no gradient: its \
                 hyperparameters cannot be learnt",
            ));
        }
        let d = self.m0.len();
        let (g_m0, rest) = grad.split_at_mut(d);
        let (g_shared, g_b0) = rest.split_at_mut(2);
        let (mut g_kappa, mut g_a) = (0.0, 0.0);
        for j in 0..d {
            let n = s.observed(j);
            if n == 0 {
                continue;
            }
            let nf = f64::from(n);
            let (kn, an) = (self.kappa0 + nf, self.a0 + nf / 2.0);
            let v = s.mean[j];
            let r = self.rate_increment(nf, s.mean[j], s.m2[j]);
            let b_n = self.b0[j] + r;
            if !(b_n.is_finite() && b_n > 0.0) {
                return Err(RoseTreeError::Numerical(format!(
                    "the posterior rate of a Normal-Gamma feature is {b_n}"
                )));
            }
            g_m0[j] += weight * an * self.kappa0 * nf * v / (kn * b_n);
            g_kappa += 0.5 * (nf / (self.kappa0 * kn)) - an * (nf * v / kn).powi(2) / (2.0 * b_n);
            g_a += digamma_diff(self.a0, nf / 2.0) - (r / self.b0[j]).ln_1p();
            g_b0[j] += weight * (self.a0 / self.b0[j] - an / b_n);
        }
        g_shared[0] += weight * g_kappa;
        g_shared[1] += weight * g_a;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
