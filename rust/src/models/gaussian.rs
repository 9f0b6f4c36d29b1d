//! Multivariate Gaussian clusters with a conjugate Normal–inverse-Wishart prior.
//!
//! A cluster keeps its size, mean and scatter about the mean; the marginal likelihood needs one
//! Cholesky factorisation of the posterior scale matrix `Ψ_n`.

use nalgebra::DMatrix;
use ndarray::{ArrayView1, ArrayView2};

use super::{ClusterModel, Differentiable, check_hyperparameter_count};
use crate::error::{Result, RoseTreeError};
use crate::math::{ln_multigamma, multidigamma};

/// Default `κ0` of [`NormalInverseWishart::from_data`]: a vague prior on cluster locations.
pub const DEFAULT_KAPPA0: f64 = 0.01;

/// Relative tolerance of the symmetry check on `Ψ0`.
const SYMMETRY_TOL: f64 = 1e-10;

/// Ridge added to the diagonal of the data covariance in [`NormalInverseWishart::from_data`],
/// relative to the mean variance, so that collinear data still give a positive-definite `Ψ0`.
const RIDGE: f64 = 1e-6;

/// Count tables of [`ClusterModel::prepare`] stop at this many entries.
const MAX_TABLE: usize = 1 << 24;

/// Gaussian clusters with unknown mean and covariance under the conjugate prior
///
/// `Σ ~ IW(Ψ0, ν0)`, `μ | Σ ~ N(μ0, Σ/κ0)`, `x ~ N(μ, Σ)`.
///
/// `κ0` is the BRT paper's `r`, and the paper's Wishart prior on the precision with scale `S`
/// is `Ψ0 = S⁻¹`. Integrating `μ` and `Σ` out, a cluster of `n` rows with mean `x̄` and scatter
/// `M2 = Σ_r (x_r − x̄)(x_r − x̄)ᵀ` has
///
/// `ln f = −(nd/2) ln π + ln Γ_d(ν_n/2) − ln Γ_d(ν0/2) + (ν0/2) ln|Ψ0| − (ν_n/2) ln|Ψ_n|
///        + (d/2)(ln κ0 − ln κ_n)`
///
/// with `κ_n = κ0 + n`, `ν_n = ν0 + n` and `Ψ_n = Ψ0 + M2 + (κ0 n/κ_n)(x̄ − μ0)(x̄ − μ0)ᵀ`
/// (Murphy 2007, "Conjugate Bayesian analysis of the Gaussian distribution", §9).
///
/// Missing values are not supported: every entry must be finite.
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::{ClusterModel, NormalInverseWishart};
///
/// // A standard 1-D prior: the predictive density of one point is a Student t.
/// let model = NormalInverseWishart::new(vec![0.0], 1.0, 3.0, vec![1.0])?;
/// let s = model.leaf_stats(array![0.5].view(), 0)?;
/// assert!(model.log_marginal(&s)?.is_finite());
///
/// // A data-driven prior.
/// let x = array![[0.1, 1.0], [0.3, 0.8], [2.1, -1.0], [2.4, -1.2]];
/// let model = NormalInverseWishart::from_data(x.view(), None, None)?;
/// assert_eq!(model.nu0(), 4.0);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct NormalInverseWishart {
    mu0: Vec<f64>,
    kappa0: f64,
    nu0: f64,
    psi0: Vec<f64>,
    /// `ln Γ_d(ν0/2) − (ν0/2) ln|Ψ0| − (d/2) ln κ0`, the prior's share of `ln f`.
    prior_const: f64,
    /// `count_term(n)` for `n ∈ 0..count_terms.len()`, filled by `prepare`.
    count_terms: Vec<f64>,
}

/// Sufficient statistics of a Gaussian cluster: the number of rows `n`, the mean `x̄` and the
/// scatter about the mean `M2 = Σ_r (x_r − x̄)(x_r − x̄)ᵀ` (row-major `d × d`).
///
/// Clusters merge with the parallel formula of Chan, Golub & LeVeque (1979), which never forms
/// raw second moments and so keeps its accuracy when the mean is large against the spread.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianStats {
    n: f64,
    mean: Vec<f64>,
    scatter: Vec<f64>,
}

impl GaussianStats {
    /// Number of rows.
    pub fn n_rows(&self) -> f64 {
        self.n
    }

    /// Cluster mean `x̄`.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Scatter about the mean, `Σ_r (x_r − x̄)(x_r − x̄)ᵀ`, row-major `d × d`.
    pub fn scatter(&self) -> &[f64] {
        &self.scatter
    }
}

/// `ln |m|` for a symmetric positive-definite `m`, of which only the lower triangle is read;
/// `None` when the Cholesky factorisation fails.
fn ln_det_spd(m: DMatrix<f64>) -> Option<f64> {
    m.cholesky().map(|c| c.ln_determinant())
}

/// Matrices up to this order are factorised on the stack by [`ln_det_spd_small`].
const SMALL: usize = 16;

/// `ln|A|` of a symmetric positive-definite `d × d` matrix whose lower triangle is in `a`
/// (row-major, `d ≤ SMALL`), by an in-place Cholesky factorisation. This is the one piece of
/// linear algebra written here rather than taken from nalgebra: the pair-scoring loop
/// factorises a small matrix per cluster–cluster candidate, and nalgebra's dynamically sized
/// matrices cost a heap allocation each time (`ln_det_spd` is the reference in the tests).
fn ln_det_spd_small(a: &mut [f64], d: usize) -> Option<f64> {
    let mut ln_det = 0.0;
    for j in 0..d {
        let mut diag = a[j * d + j];
        for k in 0..j {
            diag -= a[j * d + k] * a[j * d + k];
        }
        if diag.is_nan() || diag <= 0.0 {
            return None;
        }
        let l_jj = diag.sqrt();
        a[j * d + j] = l_jj;
        ln_det += 2.0 * l_jj.ln();
        let inv = 1.0 / l_jj;
        for i in j + 1..d {
            let mut v = a[i * d + j];
            for k in 0..j {
                v -= a[i * d + k] * a[j * d + k];
            }
            a[i * d + j] = v * inv;
        }
    }
    Some(ln_det)
}

/// The terms of `ln f(A ∪ {x})` for a cluster `A` and any single row `x`. By the matrix
/// determinant lemma, `|Ψ_A + c v vᵀ| = |Ψ_A| (1 + c vᵀ Ψ_A⁻¹ v)` with `v = x − μ_A` and
/// `c = κ_A / (κ_A + 1)`, so with the Cholesky factor of `A`'s posterior scale `Ψ_A` at hand
/// scoring a row costs one triangular solve, `O(d²)`, instead of a factorisation.
#[derive(Debug, Clone)]
pub struct GaussianQuery {
    /// Lower Cholesky factor of `Ψ_A`, row-major.
    chol: Vec<f64>,
    /// `1 / L_ii`, so the solve multiplies instead of dividing.
    inv_diag: Vec<f64>,
    /// Posterior mean `μ_A`.
    mean: Vec<f64>,
    c: f64,
    /// `ν_{A∪x} / 2`.
    half_nu: f64,
    /// Every term of `ln f(A ∪ {x})` except `−(ν/2) ln(1 + c vᵀ Ψ_A⁻¹ v)`.
    base: f64,
}

impl NormalInverseWishart {
    /// A prior with mean `mu0`, pseudo-count `kappa0`, degrees of freedom `nu0` and scale
    /// `psi0` (row-major `d × d`, symmetric positive definite); `d = mu0.len()`.
    ///
    /// The prior mean of `Σ` is `Ψ0 / (ν0 − d − 1)` when `ν0 > d + 1`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming
    /// - `mu0` when it is empty or not finite,
    /// - `kappa0` unless it is finite and `> 0`,
    /// - `nu0` unless it is finite and `> d − 1`,
    /// - `psi0` for a length other than `d²`, a non-finite entry, an asymmetric matrix
    ///   (relative tolerance `10⁻¹⁰`) or one that is not positive definite.
    ///
    /// # Examples
    /// ```
    /// use rosetree::models::NormalInverseWishart;
    ///
    /// let model = NormalInverseWishart::new(vec![0.0, 0.0], 0.1, 4.0, vec![1.0, 0.2, 0.2, 1.0])?;
    /// assert_eq!(model.psi0(), &[1.0, 0.2, 0.2, 1.0]);
    /// // Not positive definite:
    /// assert!(NormalInverseWishart::new(vec![0.0; 2], 0.1, 4.0, vec![1.0, 2.0, 2.0, 1.0]).is_err());
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn new(mu0: Vec<f64>, kappa0: f64, nu0: f64, psi0: Vec<f64>) -> Result<Self> {
        let d = mu0.len();
        if d == 0 {
            return Err(RoseTreeError::param(
                "mu0",
                "needs at least one value (one per feature)",
            ));
        }
        if let Some(v) = mu0.iter().find(|v| !v.is_finite()) {
            return Err(RoseTreeError::param(
                "mu0",
                format!("must be finite, got {v}"),
            ));
        }
        if !(kappa0.is_finite() && kappa0 > 0.0) {
            return Err(RoseTreeError::param(
                "kappa0",
                format!("must be finite and > 0, got {kappa0}"),
            ));
        }
        if !(nu0.is_finite() && nu0 > d as f64 - 1.0) {
            return Err(RoseTreeError::param(
                "nu0",
                format!("must be finite and > n_features - 1 = {}, got {nu0}", d - 1),
            ));
        }
        if psi0.len() != d * d {
            return Err(RoseTreeError::param(
                "psi0",
                format!(
                    "expected a {d} x {d} matrix ({} values, row-major), got {} values",
                    d * d,
                    psi0.len()
                ),
            ));
        }
        if let Some(v) = psi0.iter().find(|v| !v.is_finite()) {
            return Err(RoseTreeError::param(
                "psi0",
                format!("must be finite, got {v}"),
            ));
        }
        for i in 0..d {
            for j in 0..i {
                let (a, b) = (psi0[i * d + j], psi0[j * d + i]);
                if (a - b).abs() > SYMMETRY_TOL * a.abs().max(b.abs()) {
                    return Err(RoseTreeError::param(
                        "psi0",
                        format!(
                            "must be symmetric, but entry ({i}, {j}) is {a} and ({j}, {i}) is {b}"
                        ),
                    ));
                }
            }
        }
        let ln_det = ln_det_spd(DMatrix::from_row_slice(d, d, &psi0))
            .ok_or_else(|| RoseTreeError::param("psi0", "must be positive definite"))?;
        let prior_const =
            ln_multigamma(nu0 / 2.0, d) - nu0 / 2.0 * ln_det - d as f64 / 2.0 * kappa0.ln();
        Ok(Self {
            mu0,
            kappa0,
            nu0,
            psi0,
            prior_const,
            count_terms: Vec::new(),
        })
    }

    /// The data-driven prior used when none is given:
    ///
    /// - `μ0` = the column means of `x`;
    /// - `κ0` = `kappa0`, default [`DEFAULT_KAPPA0`] (a vague prior on cluster locations);
    /// - `ν0` = `nu0`, default `d + 2`, the smallest integer for which `E[Σ]` exists;
    /// - `Ψ0 = (ν0 − d − 1)·C`, so that the prior mean of `Σ` is `C`, where `C` is the sample
    ///   covariance of `x` (divisor `n − 1`) plus a ridge of `10⁻⁶` times the mean variance on
    ///   its diagonal, which keeps `Ψ0` positive definite for collinear data. If every column
    ///   is constant, `C` is the identity. If `ν0 ≤ d + 1` (no prior mean), `Ψ0 = C`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `X` for fewer than two rows or no columns,
    /// [`RoseTreeError::InvalidData`] at the first non-finite value, and those of
    /// [`Self::new`] for a bad `kappa0` or `nu0` (or a covariance that overflows).
    ///
    /// # Examples
    /// ```
    /// use ndarray::array;
    /// use rosetree::models::NormalInverseWishart;
    ///
    /// let x = array![[1.0, 2.0], [3.0, 2.0], [2.0, 5.0]];
    /// let model = NormalInverseWishart::from_data(x.view(), Some(0.5), None)?;
    /// assert_eq!(model.mu0(), &[2.0, 3.0]);
    /// assert_eq!((model.kappa0(), model.nu0()), (0.5, 4.0));
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn from_data(
        x: ArrayView2<'_, f64>,
        kappa0: Option<f64>,
        nu0: Option<f64>,
    ) -> Result<Self> {
        let (n, d) = x.dim();
        if n < 2 {
            return Err(RoseTreeError::param(
                "X",
                format!(
                    "needs at least two rows to derive the default Normal-inverse-Wishart \
                     prior, got {n}"
                ),
            ));
        }
        if d == 0 {
            return Err(RoseTreeError::param("X", "needs at least one column"));
        }
        if let Some(((i, j), _)) = x.indexed_iter().find(|(_, v)| !v.is_finite()) {
            return Err(nonfinite(i, j));
        }
        let nf = n as f64;
        let mean: Vec<f64> = (0..d).map(|j| x.column(j).sum() / nf).collect();
        let mut cov = vec![0.0; d * d];
        for row in x.rows() {
            for a in 0..d {
                let da = row[a] - mean[a];
                for b in 0..d {
                    cov[a * d + b] += da * (row[b] - mean[b]);
                }
            }
        }
        cov.iter_mut().for_each(|c| *c /= nf - 1.0);
        let mean_var = (0..d).map(|a| cov[a * d + a]).sum::<f64>() / d as f64;
        if mean_var > 0.0 {
            for a in 0..d {
                cov[a * d + a] += RIDGE * mean_var;
            }
        } else {
            for (k, c) in cov.iter_mut().enumerate() {
                *c = if k % (d + 1) == 0 { 1.0 } else { 0.0 };
            }
        }
        let nu0 = nu0.unwrap_or(d as f64 + 2.0);
        let scale = if nu0 > d as f64 + 1.0 {
            nu0 - d as f64 - 1.0
        } else {
            1.0
        };
        cov.iter_mut().for_each(|c| *c *= scale);
        Self::new(mean, kappa0.unwrap_or(DEFAULT_KAPPA0), nu0, cov)
    }

    /// Prior mean `μ0`.
    pub fn mu0(&self) -> &[f64] {
        &self.mu0
    }

    /// Prior pseudo-count `κ0`.
    pub fn kappa0(&self) -> f64 {
        self.kappa0
    }

    /// Degrees of freedom `ν0`.
    pub fn nu0(&self) -> f64 {
        self.nu0
    }

    /// Scale matrix `Ψ0`, row-major `d × d`.
    pub fn psi0(&self) -> &[f64] {
        &self.psi0
    }

    /// The part of `ln f` that depends on the cluster only through `n`:
    /// `−(nd/2) ln π + ln Γ_d(ν_n/2) − (d/2) ln κ_n` less the prior's constant.
    fn count_term_direct(&self, n: f64) -> f64 {
        let d = self.mu0.len() as f64;
        -(n * d / 2.0) * std::f64::consts::PI.ln() + ln_multigamma((self.nu0 + n) / 2.0, d as usize)
            - d / 2.0 * (self.kappa0 + n).ln()
            - self.prior_const
    }

    #[inline]
    fn count_term(&self, n: f64) -> f64 {
        // `n` is a whole number of rows, so the cast is exact whenever the table covers it.
        match self.count_terms.get(n as usize) {
            Some(&t) => t,
            None => self.count_term_direct(n),
        }
    }

    /// The posterior scale `Ψ_n = Ψ0 + M2 + (κ0 n/κ_n)(x̄ − μ0)(x̄ − μ0)ᵀ` of a cluster, lower
    /// triangle only (all the Cholesky factorisation reads).
    fn posterior_scale(&self, s: &GaussianStats) -> DMatrix<f64> {
        let d = self.mu0.len();
        let w = self.kappa0 * s.n / (self.kappa0 + s.n);
        let dev = |i: usize| s.mean[i] - self.mu0[i];
        DMatrix::from_fn(d, d, |i, j| {
            if j > i {
                return 0.0;
            }
            self.psi0[i * d + j] + s.scatter[i * d + j] + w * dev(i) * dev(j)
        })
    }

    /// `ln f` given `n` and `Ψ_n` (lower triangle filled).
    fn log_f(&self, n: f64, psi_n: DMatrix<f64>) -> Result<f64> {
        self.log_f_from_ln_det(n, ln_det_spd(psi_n))
    }

    /// `ln f` of a cluster of `n` rows from `ln|Ψ_n|` (`None`: not positive definite).
    fn log_f_from_ln_det(&self, n: f64, ln_det: Option<f64>) -> Result<f64> {
        match ln_det {
            Some(ln_det) if ln_det.is_finite() => {
                Ok(self.count_term(n) - (self.nu0 + n) / 2.0 * ln_det)
            }
            _ => Err(RoseTreeError::Numerical(format!(
                "the posterior scale matrix of a {n}-row Normal-inverse-Wishart cluster is not \
                 a finite positive-definite matrix (are the data badly scaled?)"
            ))),
        }
    }
}

fn nonfinite(row: usize, col: usize) -> RoseTreeError {
    RoseTreeError::data(
        row,
        Some(col),
        "the Normal-inverse-Wishart model needs finite values (missing values are not supported \
         by the Normal-inverse-Wishart model)",
    )
}

impl ClusterModel for NormalInverseWishart {
    type Stats = GaussianStats;
    type Query = Option<GaussianQuery>;

    fn n_features(&self) -> usize {
        self.mu0.len()
    }

    /// Tabulates the terms of `ln f` that depend only on the cluster size (`ln Γ_d(ν_n/2)`
    /// and `ln κ_n`) for `n ∈ 0..=n_rows`.
    fn prepare(&mut self, n_rows: usize) {
        let len = n_rows.saturating_add(1).min(MAX_TABLE);
        if len > self.count_terms.len() {
            self.count_terms = (0..len).map(|n| self.count_term_direct(n as f64)).collect();
        }
    }

    /// The row itself as the mean, with zero scatter.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] at the first non-finite entry (NaN is not read as a
    /// missing value by this model).
    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<GaussianStats> {
        if let Some(j) = row.iter().position(|v| !v.is_finite()) {
            return Err(nonfinite(index, j));
        }
        let d = row.len();
        Ok(GaussianStats {
            n: 1.0,
            mean: row.to_vec(),
            scatter: vec![0.0; d * d],
        })
    }

    /// Chan et al.: with `δ = x̄_b − x̄_a`, `n = n_a + n_b`,
    /// `x̄ = x̄_a + δ n_b/n` and `M2 = M2_a + M2_b + δδᵀ n_a n_b/n`.
    fn merge(&self, a: &GaussianStats, b: &GaussianStats) -> GaussianStats {
        let d = a.mean.len();
        let n = a.n + b.n;
        let (fb, w) = (b.n / n, a.n * b.n / n);
        let delta = |i: usize| b.mean[i] - a.mean[i];
        let mean = (0..d).map(|i| a.mean[i] + delta(i) * fb).collect();
        let mut scatter = Vec::with_capacity(d * d);
        for i in 0..d {
            let di = delta(i);
            for j in 0..d {
                scatter.push(a.scatter[i * d + j] + b.scatter[i * d + j] + w * di * delta(j));
            }
        }
        GaussianStats { n, mean, scatter }
    }

    /// # Errors
    /// [`RoseTreeError::Numerical`] when `Ψ_n` is not a finite positive-definite matrix,
    /// which only happens when the data overflow (values near `10¹⁵⁴` or beyond).
    fn log_marginal(&self, s: &GaussianStats) -> Result<f64> {
        self.log_f(s.n, self.posterior_scale(s))
    }

    /// For `A`'s posterior `(κ_A, ν_A, μ_A, Ψ_A)`, adding a row `x` gives
    /// `Ψ_{A∪x} = Ψ_A + c v vᵀ` with `v = x − μ_A` and `c = κ_A/(κ_A + 1)`, so by the matrix
    /// determinant lemma `ln|Ψ_{A∪x}| = ln|Ψ_A| + ln(1 + c vᵀ Ψ_A⁻¹ v)`. The query keeps the
    /// Cholesky factor of `Ψ_A`; `None` (no shortcut) if it cannot be factorised, in which case
    /// scoring falls back to [`log_marginal_merged`](ClusterModel::log_marginal_merged) and
    /// reports the error there.
    fn query(&self, a: &GaussianStats) -> Option<GaussianQuery> {
        let d = self.mu0.len();
        let kn = self.kappa0 + a.n;
        let chol = self.posterior_scale(a).cholesky()?;
        let ln_det = chol.ln_determinant();
        if !ln_det.is_finite() {
            return None;
        }
        let n = a.n + 1.0;
        let base = self.count_term(n) - (self.nu0 + n) / 2.0 * ln_det;
        // The strict upper triangle of `l_dirty` is garbage; only `j ≤ i` is read.
        let l = chol.l_dirty();
        let chol = (0..d * d)
            .map(|k| {
                if k % d <= k / d {
                    l[(k / d, k % d)]
                } else {
                    0.0
                }
            })
            .collect();
        let mean = (0..d)
            .map(|i| (self.kappa0 * self.mu0[i] + a.n * a.mean[i]) / kn)
            .collect();
        let inv_diag = (0..d).map(|i| 1.0 / l[(i, i)]).collect();
        Some(GaussianQuery {
            chol,
            inv_diag,
            mean,
            c: kn / (kn + 1.0),
            half_nu: (self.nu0 + n) / 2.0,
            base,
        })
    }

    fn log_marginal_query(
        &self,
        q: &Option<GaussianQuery>,
        a: &GaussianStats,
        b: &GaussianStats,
    ) -> Result<f64> {
        let Some(q) = q.as_ref().filter(|_| b.n == 1.0) else {
            return self.log_marginal_merged(a, b);
        };
        // z = L⁻¹ (x − μ_A) by forward substitution; vᵀ Ψ_A⁻¹ v = |z|².
        let d = q.mean.len();
        let mut z = [0.0_f64; 16];
        let mut heap_z = Vec::new();
        let z: &mut [f64] = if d <= z.len() {
            &mut z[..d]
        } else {
            heap_z.resize(d, 0.0);
            &mut heap_z
        };
        let mut norm2 = 0.0;
        for i in 0..d {
            let row = &q.chol[i * d..i * d + i];
            let dot: f64 = row.iter().zip(&z[..i]).map(|(l, z)| l * z).sum();
            z[i] = (b.mean[i] - q.mean[i] - dot) * q.inv_diag[i];
            norm2 += z[i] * z[i];
        }
        Ok(q.base - q.half_nu * (q.c * norm2).ln_1p())
    }

    /// `ln f(A ∪ B)` with `Ψ_n` assembled straight from both clusters' statistics, so the
    /// only allocation is the matrix handed to the Cholesky factorisation.
    fn log_marginal_merged(&self, a: &GaussianStats, b: &GaussianStats) -> Result<f64> {
        let d = self.mu0.len();
        let n = a.n + b.n;
        let (fb, w_ab) = (b.n / n, a.n * b.n / n);
        let w = self.kappa0 * n / (self.kappa0 + n);
        let delta = |i: usize| b.mean[i] - a.mean[i];
        let dev = |i: usize| a.mean[i] + delta(i) * fb - self.mu0[i];
        let entry = |i: usize, j: usize| {
            let k = i * d + j;
            let scatter = a.scatter[k] + b.scatter[k] + w_ab * delta(i) * delta(j);
            self.psi0[k] + scatter + w * dev(i) * dev(j)
        };
        if d > SMALL {
            let psi_n = DMatrix::from_fn(d, d, |i, j| if j > i { 0.0 } else { entry(i, j) });
            return self.log_f(n, psi_n);
        }
        let mut buf = [0.0_f64; SMALL * SMALL];
        for i in 0..d {
            for j in 0..=i {
                buf[i * d + j] = entry(i, j);
            }
        }
        self.log_f_from_ln_det(n, ln_det_spd_small(&mut buf[..d * d], d))
    }
}

/// Hyperparameters `η = (κ0, ν0, c)`, where `c` scales the prior scale matrix: the model
/// with `η` has `Ψ0' = c Ψ0`, so [`hyperparameters`](Differentiable::hyperparameters) reports
/// `c = 1` and learning `c` learns the overall size of clusters while keeping the shape of
/// `Ψ0`. With `v = x̄ − μ0`, `κ_n = κ0 + n`, `ν_n = ν0 + n`:
/// - `∂ ln f/∂κ0 = (d/2)(1/κ0 − 1/κ_n) − (ν_n/2)(n/κ_n)² vᵀ Ψ_n⁻¹ v`,
/// - `∂ ln f/∂ν0 = ½[ψ_d(ν_n/2) − ψ_d(ν0/2) + ln|Ψ0| − ln|Ψ_n|]`,
/// - `∂ ln f/∂c = ν0 d/2 − (ν_n/2) tr(Ψ_n⁻¹ Ψ0)` at `c = 1`.
///
/// `μ0` is not learned.
impl Differentiable for NormalInverseWishart {
    fn n_hyperparameters(&self) -> usize {
        3
    }

    fn hyperparameters(&self) -> Vec<f64> {
        vec![self.kappa0, self.nu0, 1.0]
    }

    fn with_hyperparameters(&self, eta: &[f64]) -> Result<Self> {
        check_hyperparameter_count(eta, 3)?;
        if !(eta[2].is_finite() && eta[2] > 0.0) {
            return Err(RoseTreeError::param(
                "psi0",
                format!("the scale factor must be finite and > 0, got {}", eta[2]),
            ));
        }
        let psi0 = self.psi0.iter().map(|v| v * eta[2]).collect();
        Self::new(self.mu0.clone(), eta[0], eta[1], psi0)
    }

    fn add_gradient(&self, s: &GaussianStats, weight: f64, grad: &mut [f64]) -> Result<()> {
        let d = self.mu0.len();
        let lower = self.posterior_scale(s);
        let psi_n = DMatrix::from_fn(d, d, |i, j| lower[(i.max(j), i.min(j))]);
        let psi0 = DMatrix::from_row_slice(d, d, &self.psi0);
        let (Some(chol_n), Some(chol_0)) = (psi_n.cholesky(), psi0.clone().cholesky()) else {
            return Err(RoseTreeError::Numerical(
                "a Normal-inverse-Wishart scale matrix is not positive definite".into(),
            ));
        };
        let (n, kn, nn) = (s.n, self.kappa0 + s.n, self.nu0 + s.n);
        let v = nalgebra::DVector::from_fn(d, |i, _| s.mean[i] - self.mu0[i]);
        let quad = v.dot(&chol_n.solve(&v));
        let trace = chol_n.solve(&psi0).trace();
        let df = d as f64;
        grad[0] += weight
            * (df / 2.0 * (1.0 / self.kappa0 - 1.0 / kn) - nn / 2.0 * (n / kn).powi(2) * quad);
        grad[1] += weight
            * 0.5
            * (multidigamma(nn / 2.0, d) - multidigamma(self.nu0 / 2.0, d)
                + chol_0.ln_determinant()
                - chol_n.ln_determinant());
        grad[2] += weight * (self.nu0 * df / 2.0 - nn / 2.0 * trace);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_cholesky_matches_nalgebra() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut unit = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for d in [1, 2, 5, 10, SMALL] {
            let b = DMatrix::from_fn(d, d, |_, _| unit());
            let spd = &b * b.transpose() + DMatrix::identity(d, d) * 0.1;
            let mut lower: Vec<f64> = (0..d * d)
                .map(|k| {
                    if k % d <= k / d {
                        spd[(k / d, k % d)]
                    } else {
                        0.0
                    }
                })
                .collect();
            let small = ln_det_spd_small(&mut lower, d).unwrap();
            let reference = ln_det_spd(spd).unwrap();
            assert!(
                (small - reference).abs() < 1e-12 * reference.abs().max(1.0),
                "d={d}"
            );
        }
        let mut not_pd = vec![1.0, 0.0, 2.0, 1.0];
        assert!(ln_det_spd_small(&mut not_pd, 2).is_none());
    }
    use crate::math::ln_gamma;
    use ndarray::{Array2, array, s};

    /// A small deterministic generator of standard normals (xorshift64* and Box–Muller), so
    /// the tests need no random-number crate.
    struct Normals(u64);

    impl Normals {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let bits = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
            (bits as f64 + 0.5) / (1u64 << 53) as f64
        }

        fn next(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }

        fn matrix(&mut self, n: usize, d: usize, loc: f64, scale: f64) -> Array2<f64> {
            Array2::from_shape_fn((n, d), |_| loc + scale * self.next())
        }
    }

    fn stats_of(model: &NormalInverseWishart, x: &Array2<f64>) -> GaussianStats {
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        leaves[1..]
            .iter()
            .fold(leaves[0].clone(), |acc, s| model.merge(&acc, s))
    }

    fn param_name(r: Result<NormalInverseWishart>) -> String {
        match r {
            Err(RoseTreeError::InvalidParameter { name, .. }) => name,
            other => panic!("expected InvalidParameter, got {other:?}"),
        }
    }

    /// ln of a multivariate Student-t density with location `mu`, scale matrix `shape` and
    /// `df` degrees of freedom.
    fn ln_student_t(x: &[f64], mu: &[f64], shape: &DMatrix<f64>, df: f64) -> f64 {
        let d = x.len() as f64;
        let chol = shape.clone().cholesky().unwrap();
        let dev = nalgebra::DVector::from_iterator(x.len(), x.iter().zip(mu).map(|(a, b)| a - b));
        let maha = dev.dot(&chol.solve(&dev));
        let ln_det = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
        ln_gamma((df + d) / 2.0)
            - ln_gamma(df / 2.0)
            - d / 2.0 * (df * std::f64::consts::PI).ln()
            - 0.5 * ln_det
            - (df + d) / 2.0 * (maha / df).ln_1p()
    }

    /// `Σ_t ln p(x_t | x_<t)`: each predictive is a Student t with `ν − d + 1` degrees of
    /// freedom, location `μ` and scale `Ψ (κ + 1)/(κ (ν − d + 1))`, and the posterior is
    /// updated one row at a time (the rank-one form of the conjugate update).
    fn sequential(mu0: &[f64], kappa0: f64, nu0: f64, psi0: &[f64], x: &Array2<f64>) -> f64 {
        let d = mu0.len();
        let (mut mu, mut kappa, mut nu) = (mu0.to_vec(), kappa0, nu0);
        let mut psi = DMatrix::from_row_slice(d, d, psi0);
        let mut total = 0.0;
        for row in x.rows() {
            let df = nu - d as f64 + 1.0;
            let shape = &psi * ((kappa + 1.0) / (kappa * df));
            total += ln_student_t(row.as_slice().unwrap(), &mu, &shape, df);
            let dev: Vec<f64> = row.iter().zip(&mu).map(|(a, b)| a - b).collect();
            psi += DMatrix::from_fn(d, d, |i, j| kappa / (kappa + 1.0) * dev[i] * dev[j]);
            for (m, v) in mu.iter_mut().zip(row) {
                *m = (kappa * *m + v) / (kappa + 1.0);
            }
            kappa += 1.0;
            nu += 1.0;
        }
        total
    }

    #[test]
    fn matches_sequential_student_t_predictives() {
        let mut rng = Normals(0x9e37_79b9_7f4a_7c15);
        let psi_full = [2.0, 0.3, 0.1, 0.3, 1.5, -0.2, 0.1, -0.2, 1.0];
        for d in 1..=3 {
            let psi0: Vec<f64> = (0..d * d).map(|k| psi_full[(k / d) * 3 + k % d]).collect();
            let mu0: Vec<f64> = (0..d).map(|i| 0.2 - 0.3 * i as f64).collect();
            for (kappa0, nu0, n) in [(0.5, d as f64 + 0.7, 9), (0.01, d as f64 - 0.5, 4)] {
                let x = rng.matrix(n, d, 1.0, 1.5);
                let mut model =
                    NormalInverseWishart::new(mu0.clone(), kappa0, nu0, psi0.clone()).unwrap();
                let expected = sequential(&mu0, kappa0, nu0, &psi0, &x);
                for prepared in [false, true] {
                    if prepared {
                        model.prepare(n / 2); // part of the sizes from the table
                    }
                    let got = model.log_marginal(&stats_of(&model, &x)).unwrap();
                    assert!(
                        (got - expected).abs() < 1e-10 * expected.abs().max(1.0),
                        "d={d} κ0={kappa0} ν0={nu0}: {got} vs {expected}"
                    );
                }
            }
        }
    }

    #[test]
    fn one_dimension_matches_normal_inverse_gamma() {
        // In 1-D, IW(ψ, ν) is the inverse-gamma(a = ν/2, b = ψ/2), and the marginal of the
        // normal-inverse-gamma model is
        // Γ(a_n)/Γ(a) · b^a / b_n^(a_n) · (κ0/κ_n)^(1/2) · (2π)^(−n/2),
        // a_n = a + n/2, b_n = b + ½ Σ(x − x̄)² + κ0 n (x̄ − μ0)² / (2κ_n).
        let mut rng = Normals(42);
        for (mu0, kappa0, nu0, psi0, n) in [
            (0.0, 1.0, 3.0, 1.0, 1),
            (0.5, 0.01, 3.0, 2.5, 7),
            (-2.0, 4.0, 0.5, 0.3, 20),
        ] {
            let x = rng.matrix(n, 1, 1.0, 2.0);
            let model = NormalInverseWishart::new(vec![mu0], kappa0, nu0, vec![psi0]).unwrap();
            let got = model.log_marginal(&stats_of(&model, &x)).unwrap();

            let nf = n as f64;
            let sum: f64 = x.iter().sum();
            let xbar = sum / nf;
            let ss: f64 = x.iter().map(|v| (v - xbar).powi(2)).sum();
            let (a, b) = (nu0 / 2.0, psi0 / 2.0);
            let kn = kappa0 + nf;
            let an = a + nf / 2.0;
            let bn = b + ss / 2.0 + kappa0 * nf * (xbar - mu0).powi(2) / (2.0 * kn);
            let expected = ln_gamma(an) - ln_gamma(a) + a * b.ln() - an * bn.ln()
                + 0.5 * (kappa0 / kn).ln()
                - nf / 2.0 * (2.0 * std::f64::consts::PI).ln();
            assert!(
                (got - expected).abs() < 1e-11 * expected.abs().max(1.0),
                "{got} vs {expected}"
            );
        }
    }

    #[test]
    fn query_shortcut_equals_merge_then_evaluate() {
        let x = array![
            [0.3, -1.0, 2.0],
            [1.1, 0.4, 0.2],
            [-0.7, 0.9, 1.5],
            [0.2, 0.1, -0.3]
        ];
        let model = NormalInverseWishart::from_data(x.view(), Some(0.3), None).unwrap();
        let l = model.leaf_stats_all(x.view()).unwrap();
        let cluster = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
        for (a, b) in [(&cluster, &l[3]), (&l[0], &l[3]), (&l[3], &cluster)] {
            let direct = model.log_marginal(&model.merge(a, b)).unwrap();
            let fast = model.log_marginal_query(&model.query(a), a, b).unwrap();
            assert!(
                (fast - direct).abs() < 1e-11 * direct.abs(),
                "{fast} vs {direct}"
            );
        }
    }

    #[test]
    fn merge_order_does_not_matter() {
        let mut rng = Normals(7);
        let x = rng.matrix(6, 3, 100.0, 0.5);
        let model = NormalInverseWishart::from_data(x.view(), None, None).unwrap();
        let l = model.leaf_stats_all(x.view()).unwrap();
        let left = l[1..]
            .iter()
            .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
        let right = model.merge(
            &model.merge(&l[5], &model.merge(&l[3], &l[1])),
            &model.merge(&model.merge(&l[2], &l[0]), &l[4]),
        );
        let close = |a: &[f64], b: &[f64], scale: f64| {
            a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-12 * scale)
        };
        let spread = left.scatter().iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        assert_eq!(left.n_rows(), 6.0);
        assert!(close(left.mean(), right.mean(), 100.0));
        assert!(close(left.scatter(), right.scatter(), spread));
        let (fa, fb) = (
            model.log_marginal(&left).unwrap(),
            model.log_marginal(&right).unwrap(),
        );
        assert!((fa - fb).abs() < 1e-12 * fa.abs());
    }

    #[test]
    fn scatter_matches_two_pass_formula() {
        let mut rng = Normals(11);
        let x = rng.matrix(8, 2, -3.0, 2.0);
        let model = NormalInverseWishart::from_data(x.view(), None, None).unwrap();
        let s = stats_of(&model, &x);
        let mean = x.mean_axis(ndarray::Axis(0)).unwrap();
        let centred = &x - &mean;
        let scatter = centred.t().dot(&centred);
        for (got, want) in s.mean().iter().zip(&mean) {
            assert!((got - want).abs() < 1e-13);
        }
        for (got, want) in s.scatter().iter().zip(&scatter) {
            assert!((got - want).abs() < 1e-12 * want.abs().max(1.0));
        }
    }

    #[test]
    fn merged_shortcut_equals_merge_then_evaluate() {
        let mut rng = Normals(3);
        let x = rng.matrix(7, 3, 0.5, 1.0);
        let mut model = NormalInverseWishart::from_data(x.view(), Some(0.3), Some(5.5)).unwrap();
        for prepared in [false, true] {
            if prepared {
                model.prepare(7);
            }
            let l = model.leaf_stats_all(x.view()).unwrap();
            let a = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
            let b = model.merge(&model.merge(&l[3], &l[4]), &l[5]);
            for (p, q) in [(&a, &b), (&b, &a), (&a, &l[6]), (&l[6], &l[0])] {
                let direct = model.log_marginal(&model.merge(p, q)).unwrap();
                let merged = model.log_marginal_merged(p, q).unwrap();
                let queried = model.log_marginal_query(&model.query(p), p, q).unwrap();
                assert!((merged - direct).abs() < 1e-12 * direct.abs());
                assert!((queried - direct).abs() < 1e-11 * direct.abs());
            }
        }
    }

    #[test]
    fn query_shortcut_with_many_features() {
        // More than 16 features: the triangular solve needs a heap buffer.
        let mut rng = Normals(5);
        let x = rng.matrix(30, 18, 0.0, 1.0);
        let mut model = NormalInverseWishart::from_data(x.view(), Some(0.2), None).unwrap();
        model.prepare(30);
        let l = model.leaf_stats_all(x.view()).unwrap();
        let cluster = l[1..29]
            .iter()
            .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
        let q = model.query(&cluster);
        assert!(q.is_some());
        let direct = model.log_marginal(&model.merge(&cluster, &l[29])).unwrap();
        let fast = model.log_marginal_query(&q, &cluster, &l[29]).unwrap();
        assert!(
            (fast - direct).abs() < 1e-11 * direct.abs(),
            "{fast} vs {direct}"
        );
    }

    #[test]
    fn from_data_defaults() {
        let x = array![[1.0, 2.0], [3.0, 4.0], [2.0, 5.0], [2.0, 1.0]];
        let model = NormalInverseWishart::from_data(x.view(), None, None).unwrap();
        assert_eq!(model.mu0(), &[2.0, 3.0]);
        assert_eq!((model.kappa0(), model.nu0()), (DEFAULT_KAPPA0, 4.0));
        assert_eq!(model.n_features(), 2);
        // Sample covariance [[2/3, 2/3], [2/3, 10/3]], ridge 1e-6 · 2 on the diagonal, and
        // ν0 − d − 1 = 1.
        let ridge = 2e-6;
        let want = [2.0 / 3.0 + ridge, 2.0 / 3.0, 2.0 / 3.0, 10.0 / 3.0 + ridge];
        for (got, want) in model.psi0().iter().zip(want) {
            assert!((got - want).abs() < 1e-15);
        }
        // ν0 = 6 scales Ψ0 by ν0 − d − 1 = 3, so that E[Σ] stays the sample covariance.
        let model = NormalInverseWishart::from_data(x.view(), None, Some(6.0)).unwrap();
        assert!((model.psi0()[3] - 3.0 * want[3]).abs() < 1e-14);
        // Without a prior mean of Σ (ν0 ≤ d + 1) Ψ0 is the covariance itself.
        let model = NormalInverseWishart::from_data(x.view(), None, Some(2.5)).unwrap();
        assert!((model.psi0()[3] - want[3]).abs() < 1e-15);
        // Collinear and constant data still give a positive-definite Ψ0.
        let collinear = array![[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]];
        assert!(NormalInverseWishart::from_data(collinear.view(), None, None).is_ok());
        let constant = array![[1.0, 1.0], [1.0, 1.0]];
        let model = NormalInverseWishart::from_data(constant.view(), None, None).unwrap();
        assert_eq!(model.psi0(), &[1.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn invalid_priors_are_named() {
        let eye = || vec![1.0, 0.0, 0.0, 1.0];
        let new = |mu0: Vec<f64>, kappa0, nu0, psi0| {
            param_name(NormalInverseWishart::new(mu0, kappa0, nu0, psi0))
        };
        let zero = || vec![0.0; 2];
        assert_eq!(new(vec![], 1.0, 3.0, vec![]), "mu0");
        assert_eq!(new(vec![0.0, f64::NAN], 1.0, 3.0, eye()), "mu0");
        assert_eq!(new(zero(), 0.0, 3.0, eye()), "kappa0");
        assert_eq!(new(zero(), -1.0, 3.0, eye()), "kappa0");
        assert_eq!(new(zero(), f64::INFINITY, 3.0, eye()), "kappa0");
        assert_eq!(new(zero(), 1.0, 1.0, eye()), "nu0"); // must exceed d − 1 = 1
        assert_eq!(new(zero(), 1.0, f64::NAN, eye()), "nu0");
        assert_eq!(new(zero(), 1.0, 3.0, vec![1.0, 0.0, 1.0]), "psi0");
        assert_eq!(new(vec![0.0; 3], 1.0, 3.0, eye()), "psi0");
        assert_eq!(
            new(zero(), 1.0, 3.0, vec![1.0, f64::NAN, f64::NAN, 1.0]),
            "psi0"
        );
        assert_eq!(new(zero(), 1.0, 3.0, vec![1.0, 0.5, 0.0, 1.0]), "psi0"); // asymmetric
        assert_eq!(new(zero(), 1.0, 3.0, vec![1.0, 2.0, 2.0, 1.0]), "psi0"); // indefinite
        assert_eq!(new(zero(), 1.0, 3.0, vec![0.0; 4]), "psi0"); // singular
        // Just inside the domain: ν0 slightly above d − 1, asymmetry within the tolerance.
        assert!(NormalInverseWishart::new(zero(), 1.0, 1.0 + 1e-9, eye()).is_ok());
        let nearly = vec![1.0, 0.5, 0.5 * (1.0 + 1e-12), 1.0];
        assert!(NormalInverseWishart::new(zero(), 1.0, 3.0, nearly).is_ok());
    }

    #[test]
    fn invalid_data_is_located() {
        let model =
            NormalInverseWishart::new(vec![0.0; 2], 1.0, 3.0, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let err = model.leaf_stats(array![1.0, bad].view(), 4).unwrap_err();
            assert!(matches!(
                err,
                RoseTreeError::InvalidData {
                    row: 4,
                    column: Some(1),
                    ..
                }
            ));
            assert!(err.to_string().contains("missing values are not supported"));
        }
        let x = array![[0.0, 1.0], [1.0, 0.0], [f64::NAN, 2.0]];
        let err = NormalInverseWishart::from_data(x.view(), None, None).unwrap_err();
        assert!(matches!(
            err,
            RoseTreeError::InvalidData {
                row: 2,
                column: Some(0),
                ..
            }
        ));
        for few in [
            x.slice(s![..1, ..]),
            x.slice(s![..0, ..]),
            x.slice(s![..2, ..0]),
        ] {
            assert_eq!(
                param_name(NormalInverseWishart::from_data(few, None, None)),
                "X"
            );
        }
        let two = x.slice(s![..2, ..]);
        assert_eq!(
            param_name(NormalInverseWishart::from_data(two, Some(0.0), None)),
            "kappa0"
        );
        assert_eq!(
            param_name(NormalInverseWishart::from_data(two, None, Some(0.5))),
            "nu0"
        );
    }

    #[test]
    fn overflow_is_a_numerical_error() {
        let model =
            NormalInverseWishart::new(vec![0.0; 2], 1.0, 3.0, vec![1.0, 0.0, 0.0, 1.0]).unwrap();
        let x = array![[1e200, 1e200], [-1e200, 1e200]];
        let l = model.leaf_stats_all(x.view()).unwrap();
        let merged = model.merge(&l[0], &l[1]);
        assert!(matches!(
            model.log_marginal(&merged),
            Err(RoseTreeError::Numerical(_))
        ));
        assert!(matches!(
            model.log_marginal_merged(&l[0], &l[1]),
            Err(RoseTreeError::Numerical(_))
        ));
    }
}
