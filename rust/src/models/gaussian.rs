//! Multivariate Gaussian clusters with a conjugate Normal–inverse-Wishart prior.
//!
//! Every cluster statistic is kept in *whitened* coordinates `z = L⁻¹(x − μ0)`, where
//! `Ψ0 = L Lᵀ`: there the prior scale is the identity, `ln|Ψ_n| = ln|Ψ0| + ln|I + S̃|` and
//! `S̃ = L⁻¹ (Ψ_n − Ψ0) L⁻ᵀ` is the whitened posterior update. `Ψ0` is factorised once, when
//! the model is built (no work at all for a diagonal `Ψ0`, the default).
//!
//! A cluster of `n` rows has a scatter of rank at most `n − 1`, so for small clusters in many
//! dimensions `S̃` is kept as a factor `F` with `FᵀF = S̃` (`n − 1` rows of length `d`, merged
//! by stacking: Chan, Golub & LeVeque's parallel update in factored form), and
//! `ln|I_d + UᵀU| = ln|I_k + UUᵀ|` (the matrix determinant lemma, Sylvester's identity) costs
//! `O(d k² + k³)` with `k ≤ n + 1` instead of `O(d³)`. Larger clusters keep the full `d × d`
//! scatter; a cost model picks the cheaper form for each score.

use std::borrow::Cow;

use nalgebra::DMatrix;
use ndarray::{ArrayView1, ArrayView2};

use super::{ClusterModel, Differentiable, RowQueries, check_hyperparameter_count};
use crate::error::{Result, RoseTreeError};
use crate::math::{ln_multigamma, multidigamma};

/// Default `κ0` of [`NormalInverseWishart::from_data`]: a vague prior on cluster locations.
pub const DEFAULT_KAPPA0: f64 = 0.01;

/// Relative tolerance of the symmetry check on `Ψ0`.
const SYMMETRY_TOL: f64 = 1e-10;

/// Ridge added to the data variances in [`NormalInverseWishart::from_data`], relative to the
/// mean variance, so that a constant column still gets a positive prior variance.
const RIDGE: f64 = 1e-6;

/// Count tables of [`ClusterModel::prepare`] stop at this many entries.
const MAX_TABLE: usize = 1 << 24;

/// Matrices up to this order are factorised in a stack buffer (no allocation).
const SMALL: usize = 16;

/// The prior scale matrix `Ψ0` and the square root that whitens data rows.
#[derive(Debug, Clone)]
enum Scale {
    /// `Ψ0 = diag(psi)`; whitening multiplies by `inv_sqrt = psi^(−1/2)`.
    Diagonal { psi: Vec<f64>, inv_sqrt: Vec<f64> },
    /// A full `Ψ0` (row-major) and its lower Cholesky factor `L` (row-major, zero above the
    /// diagonal); whitening solves `L z = x − μ0`.
    Dense { psi: Vec<f64>, chol: Vec<f64> },
}

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
/// Missing values are not supported: every entry must be finite. Cluster statistics
/// ([`GaussianStats`]) are in coordinates whitened by this model's `μ0` and `Ψ0`, so they
/// must only be used with the model that made them.
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
    psi0: Scale,
    /// `ln|Ψ0|`.
    ln_det_psi0: f64,
    /// `ln Γ_d(ν0/2) − (d/2) ln κ0`, the prior's share of `ln f` (with `ln|Ψ0|` folded into
    /// the count term, see [`Self::count_term_direct`]).
    prior_const: f64,
    /// `count_term(n)` for `n ∈ 0..count_terms.len()`, filled by `prepare`.
    count_terms: Vec<f64>,
    /// Which form statistics and scores take; only the tests change it.
    policy: Policy,
}

/// Overrides of the automatic choice between factor and full forms (for the tests, which
/// check both forms and the switch between them).
#[derive(Debug, Clone, Copy, Default)]
struct Policy {
    /// The most factor rows a cluster keeps; `None`: `d / 4`.
    max_factor_rows: Option<usize>,
    /// The form of every pair score (where both are factors); `None`: by cost.
    pair: Option<Form>,
}

/// Sufficient statistics of a Gaussian cluster, in the coordinates `z = L⁻¹(x − μ0)` whitened
/// by the model's prior (`Ψ0 = L Lᵀ`): the number of rows `n`, the mean `z̄` and the scatter
/// about the mean `S̃ = Σ_r (z_r − z̄)(z_r − z̄)ᵀ`, either as a factor (small clusters) or as
/// a full `d × d` matrix. [`NormalInverseWishart::mean_of`] and
/// [`NormalInverseWishart::scatter_of`] give them in data coordinates.
///
/// Clusters merge with the parallel formula of Chan, Golub & LeVeque (1979), which never forms
/// raw second moments and so keeps its accuracy when the mean is large against the spread.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianStats {
    n: f64,
    mean: Vec<f64>,
    scatter: Scatter,
}

/// The whitened scatter `S̃` of a cluster.
#[derive(Debug, Clone, PartialEq)]
enum Scatter {
    /// `S̃ = FᵀF` for the `m × d` row-major factor `rows`, with the Gram matrix `F Fᵀ`
    /// (`m × m`, row-major) kept beside it.
    Factor {
        m: usize,
        rows: Vec<f64>,
        gram: Vec<f64>,
    },
    /// `S̃` itself, `d × d` row-major and symmetric.
    Full(Vec<f64>),
}

impl GaussianStats {
    /// Number of rows.
    pub fn n_rows(&self) -> f64 {
        self.n
    }

    /// The number of rows of the scatter factor, or `None` when the full matrix is kept.
    pub fn factor_rank(&self) -> Option<usize> {
        match self.scatter {
            Scatter::Factor { m, .. } => Some(m),
            Scatter::Full(_) => None,
        }
    }
}

impl Scatter {
    /// `(m, rows, gram)` of a factor.
    fn as_factor(&self) -> Option<(usize, &[f64], &[f64])> {
        match self {
            Self::Factor { m, rows, gram } => Some((*m, rows, gram)),
            Self::Full(_) => None,
        }
    }
}

/// `Σ a_i b_i`.
#[inline]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `ln|A|` of a symmetric positive-definite `k × k` matrix whose lower triangle is in `a`
/// (row-major), by an in-place Cholesky factorisation that leaves the factor `L` in the lower
/// triangle; `None` when `A` is not (numerically) positive definite. This and the two
/// triangular solves below are the linear algebra written here rather than taken from
/// nalgebra: the pair-scoring loop factorises a small matrix per candidate, and nalgebra's
/// dynamically sized matrices cost a heap allocation each time (`ln_det_spd` is the
/// reference in the tests).
fn cholesky_in_place(a: &mut [f64], k: usize) -> Option<f64> {
    let mut ln_det = 0.0;
    for j in 0..k {
        let (head, tail) = a[..k * k].split_at_mut((j + 1) * k);
        let row_j = &mut head[j * k..];
        let diag = row_j[j] - dot(&row_j[..j], &row_j[..j]);
        if diag.is_nan() || diag <= 0.0 {
            return None;
        }
        let l_jj = diag.sqrt();
        row_j[j] = l_jj;
        ln_det += 2.0 * l_jj.ln();
        let inv = 1.0 / l_jj;
        let row_j = &head[j * k..j * k + j];
        for row_i in tail.chunks_exact_mut(k) {
            row_i[j] = (row_i[j] - dot(&row_i[..j], row_j)) * inv;
        }
    }
    Some(ln_det)
}

/// Solves `L y = b` in place for the lower-triangular `k × k` row-major `l`.
fn forward_solve(l: &[f64], k: usize, b: &mut [f64]) {
    for i in 0..k {
        let s = b[i] - dot(&l[i * k..i * k + i], &b[..i]);
        b[i] = s / l[i * k + i];
    }
}

/// `ln|m|` for a symmetric positive-definite `m`, of which only the lower triangle is read;
/// `None` when the Cholesky factorisation fails.
fn ln_det_spd(m: DMatrix<f64>) -> Option<f64> {
    m.cholesky().map(|c| c.ln_determinant())
}

/// Calls `f` with a zeroed scratch buffer of length `len`: on the stack up to `SMALL`, so that
/// scoring a row against a small cluster allocates nothing.
#[inline]
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f64]) -> R) -> R {
    if len <= SMALL {
        f(&mut [0.0_f64; SMALL][..len])
    } else {
        f(&mut vec![0.0; len])
    }
}

/// `ln(1 + c s² q)` for `c, q ≥ 0`, also where `s²` overflows (a row far from a cluster).
#[inline]
fn ln1p_scaled(c: f64, s: f64, q: f64) -> f64 {
    let t = c * q * s * s;
    if t.is_finite() {
        t.ln_1p()
    } else {
        // 1/t is below an ulp of ln t here.
        c.ln() + q.ln() + 2.0 * s.ln()
    }
}

/// The Gram matrix `G = U Uᵀ` (`k × k`, row-major, full) of the rows of `U`, stacked from
/// factors with known Gram matrices and extra rows. Only the cross blocks are computed.
fn stacked_gram(
    factors: &[(usize, &[f64], &[f64])],
    extra: &[&[f64]],
    d: usize,
) -> (usize, Vec<f64>) {
    let k = factors.iter().map(|f| f.0).sum::<usize>() + extra.len();
    let mut g = vec![0.0; k * k];
    // Row offsets of each factor.
    let mut offsets = Vec::with_capacity(factors.len());
    let mut off = 0;
    for f in factors {
        offsets.push(off);
        off += f.0;
    }
    for (a, &(ma, rows_a, gram_a)) in factors.iter().enumerate() {
        let oa = offsets[a];
        for i in 0..ma {
            g[(oa + i) * k + oa..(oa + i) * k + oa + ma]
                .copy_from_slice(&gram_a[i * ma..(i + 1) * ma]);
        }
        for (b, &(mb, rows_b, _)) in factors.iter().enumerate().skip(a + 1) {
            let ob = offsets[b];
            for i in 0..ma {
                let ri = &rows_a[i * d..(i + 1) * d];
                for j in 0..mb {
                    let v = dot(ri, &rows_b[j * d..(j + 1) * d]);
                    g[(oa + i) * k + ob + j] = v;
                    g[(ob + j) * k + oa + i] = v;
                }
            }
        }
        for (e, x) in extra.iter().enumerate() {
            let oe = off + e;
            for i in 0..ma {
                let v = dot(&rows_a[i * d..(i + 1) * d], x);
                g[(oa + i) * k + oe] = v;
                g[oe * k + oa + i] = v;
            }
        }
    }
    for (e, x) in extra.iter().enumerate() {
        for (f, y) in extra.iter().enumerate().take(e + 1) {
            let v = dot(x, y);
            g[(off + e) * k + off + f] = v;
            g[(off + f) * k + off + e] = v;
        }
    }
    (k, g)
}

/// The terms of `ln f(A ∪ {x})` for a cluster `A` and any single row `x`. By the matrix
/// determinant lemma, `|Ψ_A + c v vᵀ| = |Ψ_A| (1 + c vᵀ Ψ_A⁻¹ v)` with `v = x − μ_A` and
/// `c = κ_A / (κ_A + 1)`, so with a factorisation of `A`'s posterior scale `Ψ_A` at hand
/// scoring a row costs `O(d²)` (full form) or `O(k d)` (factor form) instead of a
/// factorisation. Everything is in whitened coordinates.
#[derive(Debug, Clone)]
pub struct GaussianQuery {
    form: QueryForm,
    /// Posterior mean `μ_A`.
    mean: Vec<f64>,
    c: f64,
    /// `ν_{A∪x} / 2`.
    half_nu: f64,
    /// Every term of `ln f(A ∪ {x})` except `−(ν/2) ln(1 + c vᵀ Ψ_A⁻¹ v)`.
    base: f64,
}

#[derive(Debug, Clone)]
enum QueryForm {
    /// `Ψ̃_A = L Lᵀ`: the lower factor (row-major) and `1 / L_ii`.
    Full { chol: Vec<f64>, inv_diag: Vec<f64> },
    /// `Ψ̃_A = I + UᵀU` with `U` (`k × d`), and the Cholesky factor of `I_k + U Uᵀ`, so that
    /// `vᵀ Ψ̃_A⁻¹ v = |v|² − |L_G⁻¹ U v|²` (Woodbury).
    Factor {
        k: usize,
        u: Vec<f64>,
        chol_g: Vec<f64>,
    },
}

/// Which form a pair's `ln|Ψ̃|` is computed in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    Factor,
    Full,
}

impl NormalInverseWishart {
    /// A prior with mean `mu0`, pseudo-count `kappa0`, degrees of freedom `nu0` and scale
    /// `psi0` (row-major `d × d`, symmetric positive definite); `d = mu0.len()`. A diagonal
    /// `psi0` is recognised (every off-diagonal entry zero) and costs `O(d)` to use, as with
    /// [`Self::new_diagonal`]; any other is factorised once, `O(d³)`.
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
    /// assert_eq!(model.psi0(), vec![1.0, 0.2, 0.2, 1.0]);
    /// // Not positive definite:
    /// assert!(NormalInverseWishart::new(vec![0.0; 2], 0.1, 4.0, vec![1.0, 2.0, 2.0, 1.0]).is_err());
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn new(mu0: Vec<f64>, kappa0: f64, nu0: f64, psi0: Vec<f64>) -> Result<Self> {
        let d = mu0.len();
        check_common(&mu0, kappa0, nu0)?;
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
        if (0..d * d).all(|k| k % (d + 1) == 0 || psi0[k] == 0.0) {
            let diag = (0..d).map(|i| psi0[i * d + i]).collect();
            return Self::new_diagonal(mu0, kappa0, nu0, diag);
        }
        let not_pd = || RoseTreeError::param("psi0", "must be positive definite");
        let chol = DMatrix::from_row_slice(d, d, &psi0)
            .cholesky()
            .ok_or_else(not_pd)?;
        let ln_det = chol.ln_determinant();
        if !ln_det.is_finite() {
            return Err(not_pd());
        }
        let l = chol.l();
        let chol = (0..d * d).map(|k| l[(k / d, k % d)]).collect();
        Ok(Self::assemble(
            mu0,
            kappa0,
            nu0,
            Scale::Dense { psi: psi0, chol },
            ln_det,
        ))
    }

    /// A prior with a diagonal scale matrix `Ψ0 = diag(psi0_diagonal)` (length `d`, every
    /// entry finite and `> 0`); otherwise as [`Self::new`]. Whitening a row then costs `O(d)`.
    ///
    /// # Errors
    /// As [`Self::new`]; `psi0` for a wrong length or an entry that is not finite and `> 0`.
    ///
    /// # Examples
    /// ```
    /// use rosetree::models::NormalInverseWishart;
    ///
    /// let model = NormalInverseWishart::new_diagonal(vec![0.0; 2], 0.1, 4.0, vec![2.0, 0.5])?;
    /// assert_eq!(model.psi0(), vec![2.0, 0.0, 0.0, 0.5]);
    /// assert_eq!(model.psi0_diagonal(), Some(&[2.0, 0.5][..]));
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    pub fn new_diagonal(
        mu0: Vec<f64>,
        kappa0: f64,
        nu0: f64,
        psi0_diagonal: Vec<f64>,
    ) -> Result<Self> {
        let d = mu0.len();
        check_common(&mu0, kappa0, nu0)?;
        if psi0_diagonal.len() != d {
            return Err(RoseTreeError::param(
                "psi0",
                format!("expected {d} diagonal values, got {}", psi0_diagonal.len()),
            ));
        }
        if let Some(v) = psi0_diagonal.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(RoseTreeError::param(
                "psi0",
                format!("must be positive definite: diagonal entry {v} is not finite and > 0"),
            ));
        }
        let ln_det: f64 = psi0_diagonal.iter().map(|v| v.ln()).sum();
        let inv_sqrt = psi0_diagonal.iter().map(|v| 1.0 / v.sqrt()).collect();
        let scale = Scale::Diagonal {
            psi: psi0_diagonal,
            inv_sqrt,
        };
        Ok(Self::assemble(mu0, kappa0, nu0, scale, ln_det))
    }

    fn assemble(mu0: Vec<f64>, kappa0: f64, nu0: f64, psi0: Scale, ln_det_psi0: f64) -> Self {
        let d = mu0.len();
        Self {
            prior_const: ln_multigamma(nu0 / 2.0, d) - d as f64 / 2.0 * kappa0.ln(),
            mu0,
            kappa0,
            nu0,
            psi0,
            ln_det_psi0,
            count_terms: Vec::new(),
            policy: Policy::default(),
        }
    }

    /// The data-driven prior used when none is given:
    ///
    /// - `μ0` = the column means of `x`;
    /// - `κ0` = `kappa0`, default [`DEFAULT_KAPPA0`] (a vague prior on cluster locations);
    /// - `ν0` = `nu0`, default `d + 2`, the smallest integer for which `E[Σ]` exists;
    /// - `Ψ0 = (ν0 − d − 1)·V`, diagonal, so that the prior mean of `Σ` is `V`, where `V` holds
    ///   the sample variances of the columns of `x` (divisor `n − 1`) plus a ridge of `10⁻⁶`
    ///   times their mean, which keeps constant columns positive. If every column is
    ///   constant, `V` is the identity. If `ν0 ≤ d + 1` (no prior mean), `Ψ0 = V`.
    ///
    /// Why the variances and not the full covariance: measured with
    /// `benchmarks/niw_defaults.py` (greedy BRT on MNIST PCA-20, optdigits and the BHC digits
    /// 0/2/4 as raw pixels, and Gaussian blobs), the diagonal prior's dendrogram purity
    /// averaged 0.63 over the four families against 0.49 for the full covariance, with
    /// cluster counts nearer the number of classes; the full covariance of raw pixels is
    /// nearly singular, and it is singular whenever `d ≥ n`, where the diagonal stays well
    /// defined. It also makes the prior `O(d)` to use. Smaller or larger multiples of `V`, a
    /// larger `ν0` and `κ0 ∈ {0.1, 1}` did no better on average.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `X` for fewer than two rows or no columns,
    /// [`RoseTreeError::InvalidData`] at the first non-finite value, and those of
    /// [`Self::new`] for a bad `kappa0` or `nu0` (or variances that overflow).
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
    /// assert!(model.psi0_diagonal().is_some());
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
        let mut var: Vec<f64> = (0..d)
            .map(|j| {
                x.column(j)
                    .iter()
                    .map(|v| (v - mean[j]).powi(2))
                    .sum::<f64>()
                    / (nf - 1.0)
            })
            .collect();
        // Values of magnitude beyond about 1e154 overflow the squares: name the column (the
        // user set no prior), not the derived `mu0` or `psi0`.
        if let Some(j) = (0..d).find(|&j| !(mean[j].is_finite() && var[j].is_finite())) {
            let i = (0..n)
                .max_by(|&a, &b| x[[a, j]].abs().total_cmp(&x[[b, j]].abs()))
                .unwrap_or(0);
            return Err(RoseTreeError::data(
                i,
                Some(j),
                format!(
                    "the column's mean or variance overflows (its largest magnitude is {:e}), so \
                     the default Normal-inverse-Wishart prior cannot be derived from it; \
                     rescale the data or set mu0 and psi0",
                    x[[i, j]].abs()
                ),
            ));
        }
        let mean_var = var.iter().sum::<f64>() / d as f64;
        if !mean_var.is_finite() {
            return Err(RoseTreeError::param(
                "X",
                "the columns' variances overflow when summed; rescale the data or set psi0",
            ));
        }
        if mean_var > 0.0 {
            var.iter_mut().for_each(|v| *v += RIDGE * mean_var);
        } else {
            var.iter_mut().for_each(|v| *v = 1.0);
        }
        let nu0 = nu0.unwrap_or(d as f64 + 2.0);
        let scale = if nu0 > d as f64 + 1.0 {
            nu0 - d as f64 - 1.0
        } else {
            1.0
        };
        var.iter_mut().for_each(|v| *v *= scale);
        Self::new_diagonal(mean, kappa0.unwrap_or(DEFAULT_KAPPA0), nu0, var)
    }

    /// The same prior with its mean replaced by `mu0`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `mu0` for a wrong length or a non-finite value.
    pub fn with_mu0(mut self, mu0: Vec<f64>) -> Result<Self> {
        if mu0.len() != self.mu0.len() {
            return Err(RoseTreeError::param(
                "mu0",
                format!(
                    "expected {} values (one per feature), got {}",
                    self.mu0.len(),
                    mu0.len()
                ),
            ));
        }
        check_common(&mu0, self.kappa0, self.nu0)?;
        self.mu0 = mu0;
        Ok(self)
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

    /// Scale matrix `Ψ0`, row-major `d × d` (built on each call).
    pub fn psi0(&self) -> Vec<f64> {
        match &self.psi0 {
            Scale::Dense { psi, .. } => psi.clone(),
            Scale::Diagonal { psi, .. } => {
                let d = psi.len();
                let mut out = vec![0.0; d * d];
                for (i, v) in psi.iter().enumerate() {
                    out[i * d + i] = *v;
                }
                out
            }
        }
    }

    /// The diagonal of `Ψ0` when `Ψ0` is diagonal.
    pub fn psi0_diagonal(&self) -> Option<&[f64]> {
        match &self.psi0 {
            Scale::Diagonal { psi, .. } => Some(psi),
            Scale::Dense { .. } => None,
        }
    }

    /// `z = L⁻¹ (x − μ0)`, the whitened coordinates of a data row.
    fn whiten(&self, x: impl Iterator<Item = f64>) -> Vec<f64> {
        let mut z: Vec<f64> = x.zip(&self.mu0).map(|(v, m)| v - m).collect();
        match &self.psi0 {
            Scale::Diagonal { inv_sqrt, .. } => {
                z.iter_mut().zip(inv_sqrt).for_each(|(v, s)| *v *= s);
            }
            Scale::Dense { chol, .. } => forward_solve(chol, z.len(), &mut z),
        }
        z
    }

    /// `L v`: back from whitened coordinates (without the shift by `μ0`).
    fn unwhiten(&self, v: &[f64]) -> Vec<f64> {
        match &self.psi0 {
            Scale::Diagonal { psi, .. } => v.iter().zip(psi).map(|(a, p)| a * p.sqrt()).collect(),
            Scale::Dense { chol, .. } => {
                let d = v.len();
                (0..d)
                    .map(|i| dot(&chol[i * d..i * d + i + 1], &v[..=i]))
                    .collect()
            }
        }
    }

    /// The cluster mean `x̄` in data coordinates.
    pub fn mean_of(&self, s: &GaussianStats) -> Vec<f64> {
        self.unwhiten(&s.mean)
            .iter()
            .zip(&self.mu0)
            .map(|(a, m)| a + m)
            .collect()
    }

    /// The cluster scatter `Σ_r (x_r − x̄)(x_r − x̄)ᵀ` in data coordinates, row-major
    /// `d × d` (`O(d³)`; for inspection and tests).
    pub fn scatter_of(&self, s: &GaussianStats) -> Vec<f64> {
        let d = self.mu0.len();
        let st = full_scatter(&s.scatter, d);
        // L S̃ Lᵀ, a column of S̃ at a time, then the rows.
        let mut half = vec![0.0; d * d];
        for j in 0..d {
            let col: Vec<f64> = (0..d).map(|i| st[i * d + j]).collect();
            for (i, v) in self.unwhiten(&col).into_iter().enumerate() {
                half[i * d + j] = v;
            }
        }
        let mut out = vec![0.0; d * d];
        for i in 0..d {
            for (j, v) in self
                .unwhiten(&half[i * d..(i + 1) * d])
                .into_iter()
                .enumerate()
            {
                out[i * d + j] = v;
            }
        }
        out
    }

    /// The part of `ln f` that depends on the cluster only through `n`:
    /// `−(nd/2) ln π − (n/2) ln|Ψ0| + ln Γ_d(ν_n/2) − (d/2) ln κ_n` less the prior's constant.
    /// With it, `ln f = count_term(n) − (ν_n/2) ln|Ψ̃_n|` for the whitened
    /// `Ψ̃_n = L⁻¹ Ψ_n L⁻ᵀ`, which never adds and subtracts the large `(ν/2) ln|Ψ0|` terms.
    fn count_term_direct(&self, n: f64) -> f64 {
        let d = self.mu0.len() as f64;
        -(n * d / 2.0) * std::f64::consts::PI.ln() - n / 2.0 * self.ln_det_psi0
            + ln_multigamma((self.nu0 + n) / 2.0, d as usize)
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

    /// `ln f` of a cluster of `n` rows from `ln|Ψ̃_n|` (`None`: not positive definite).
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

    /// `w = κ0 n / κ_n`, the weight of the mean's deviation from `μ0` in `Ψ_n`.
    fn mean_weight(&self, n: f64) -> f64 {
        self.kappa0 * n / (self.kappa0 + n)
    }

    /// Whether a pair of clusters with these scatters is scored in factor form: both are
    /// factors and `O(m_a m_b d + k d + k³)` (with `k = m_a + m_b + 2`) is below the full
    /// form's `O(d³)` factorisation and `O(m d²)` conversions.
    fn pair_form(&self, a: &Scatter, b: &Scatter) -> Form {
        let d = self.mu0.len() as f64;
        let (Scatter::Factor { m: ma, .. }, Scatter::Factor { m: mb, .. }) = (a, b) else {
            return Form::Full;
        };
        if let Some(form) = self.policy.pair {
            return form;
        }
        let (ma, mb) = (*ma as f64, *mb as f64);
        let k = ma + mb + 2.0;
        let factor = ma * mb * d + 2.0 * k * d + k * k * k / 3.0;
        let full = d * d * d / 6.0 + d * d * (1.0 + (ma + mb) / 2.0);
        if factor <= full {
            Form::Factor
        } else {
            Form::Full
        }
    }

    /// The most factor rows a cluster keeps before switching to the full scatter: a leaf
    /// scored against a cluster then costs `O(k d)` rather than the full form's `O(d²)`.
    fn max_factor_rows(&self) -> usize {
        self.policy.max_factor_rows.unwrap_or(self.mu0.len() / 4)
    }

    /// `ln|Ψ̃|` of the union of `a` and `b`, where `delta = z̄_b − z̄_a`, `w_ab = n_a n_b / n`,
    /// `zbar` is the union's mean and `w` its mean weight.
    fn pair_ln_det(
        &self,
        a: &GaussianStats,
        b: &GaussianStats,
        delta: &[f64],
        w_ab: f64,
        zbar: &[f64],
        w: f64,
    ) -> Option<f64> {
        let d = self.mu0.len();
        if self.pair_form(&a.scatter, &b.scatter) == Form::Factor {
            let (Some(fa), Some(fb)) = (a.scatter.as_factor(), b.scatter.as_factor()) else {
                unreachable!("the factor form needs two factors")
            };
            let u_delta: Vec<f64> = delta.iter().map(|v| v * w_ab.sqrt()).collect();
            let u_mean: Vec<f64> = zbar.iter().map(|v| v * w.sqrt()).collect();
            let (k, mut g) = stacked_gram(&[fa, fb], &[&u_delta, &u_mean], d);
            (0..k).for_each(|i| g[i * k + i] += 1.0);
            return cholesky_in_place(&mut g, k);
        }
        let fill = |buf: &mut [f64]| {
            for i in 0..d {
                for j in 0..=i {
                    buf[i * d + j] = f64::from(u8::from(i == j))
                        + w_ab * delta[i] * delta[j]
                        + w * zbar[i] * zbar[j];
                }
            }
            add_scatter_lower(buf, &a.scatter, d);
            add_scatter_lower(buf, &b.scatter, d);
        };
        if d > SMALL {
            let mut buf = vec![0.0; d * d];
            fill(&mut buf);
            return ln_det_spd(DMatrix::from_row_slice(d, d, &buf));
        }
        let mut buf = [0.0_f64; SMALL * SMALL];
        fill(&mut buf[..d * d]);
        cholesky_in_place(&mut buf[..d * d], d)
    }

    /// The rows `U` (`k × d`) with `Ψ̃_n = I + UᵀU` of a factor-form cluster: its factor and
    /// `√w z̄`.
    fn posterior_rows(&self, s: &GaussianStats) -> Option<(usize, Vec<f64>, Vec<f64>)> {
        let factor = s.scatter.as_factor()?;
        let d = self.mu0.len();
        let w = self.mean_weight(s.n);
        let u_mean: Vec<f64> = s.mean.iter().map(|v| v * w.sqrt()).collect();
        let (k, mut g) = stacked_gram(&[factor], &[&u_mean], d);
        (0..k).for_each(|i| g[i * k + i] += 1.0);
        let mut u = Vec::with_capacity(k * d);
        u.extend_from_slice(factor.1);
        u.extend_from_slice(&u_mean);
        Some((k, u, g))
    }

    /// The whitened `Ψ̃_n = I + S̃ + w z̄ z̄ᵀ` of a cluster as a full matrix (lower triangle).
    fn posterior_full(&self, s: &GaussianStats) -> DMatrix<f64> {
        let d = self.mu0.len();
        let st = full_scatter(&s.scatter, d);
        let w = self.mean_weight(s.n);
        DMatrix::from_fn(d, d, |i, j| {
            if j > i {
                return 0.0;
            }
            f64::from(u8::from(i == j)) + st[i * d + j] + w * s.mean[i] * s.mean[j]
        })
    }
}

/// Checks the hyperparameters other than `Ψ0`.
fn check_common(mu0: &[f64], kappa0: f64, nu0: f64) -> Result<()> {
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
    Ok(())
}

/// Adds the lower triangle of the scatter `s` to the row-major `d × d` `buf`.
fn add_scatter_lower(buf: &mut [f64], s: &Scatter, d: usize) {
    match s {
        Scatter::Full(full) => {
            for i in 0..d {
                let (dst, src) = (&mut buf[i * d..=i * d + i], &full[i * d..=i * d + i]);
                dst.iter_mut().zip(src).for_each(|(a, b)| *a += b);
            }
        }
        Scatter::Factor { m, rows, .. } => {
            for row in rows.chunks_exact(d).take(*m) {
                for i in 0..d {
                    let ri = row[i];
                    if ri != 0.0 {
                        let dst = &mut buf[i * d..=i * d + i];
                        dst.iter_mut()
                            .zip(&row[..=i])
                            .for_each(|(a, b)| *a += ri * b);
                    }
                }
            }
        }
    }
}

/// The full `d × d` scatter: borrowed when kept in full, `FᵀF` of a factor otherwise.
fn full_scatter(s: &Scatter, d: usize) -> Cow<'_, [f64]> {
    match s {
        Scatter::Full(m) => Cow::Borrowed(m),
        Scatter::Factor { .. } => {
            let mut out = vec![0.0; d * d];
            add_scatter_lower(&mut out, s, d);
            for i in 0..d {
                for j in 0..i {
                    out[j * d + i] = out[i * d + j];
                }
            }
            Cow::Owned(out)
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

/// `[n, z̄…, S̃…]` in the whitened coordinates, with the scatter as the full `d × d`
/// matrix (row-major) whichever form the cluster kept.
impl super::StatsCodec for NormalInverseWishart {
    fn encode_stats(&self, s: &GaussianStats) -> Vec<f64> {
        let d = s.mean.len();
        let mut v = vec![s.n];
        v.extend_from_slice(&s.mean);
        v.extend_from_slice(&full_scatter(&s.scatter, d));
        v
    }

    fn decode_stats(&self, v: &[f64]) -> Result<GaussianStats> {
        let d = self.n_features();
        super::check_stats_len(v, 1 + d + d * d)?;
        if !(v[0] >= 1.0 && v[0].fract() == 0.0) {
            return Err(RoseTreeError::param(
                "stats",
                format!("expected a positive count of rows, got {}", v[0]),
            ));
        }
        Ok(GaussianStats {
            n: v[0],
            mean: v[1..=d].to_vec(),
            scatter: Scatter::Full(v[1 + d..].to_vec()),
        })
    }
}

impl ClusterModel for NormalInverseWishart {
    type Stats = GaussianStats;

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

    /// The whitened row as the mean, with an empty scatter factor.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidData`] at the first non-finite entry (NaN is not read as a
    /// missing value by this model), or for a row so large that its whitened coordinates
    /// overflow.
    fn leaf_stats(&self, row: ArrayView1<'_, f64>, index: usize) -> Result<GaussianStats> {
        if let Some(j) = row.iter().position(|v| !v.is_finite()) {
            return Err(nonfinite(index, j));
        }
        let mean = self.whiten(row.iter().copied());
        if let Some(j) = mean.iter().position(|v| !v.is_finite()) {
            return Err(RoseTreeError::data(
                index,
                Some(j),
                "the value is too large for the Normal-inverse-Wishart prior's scale: \
                 (x - mu0) / sqrt(psi0) overflows",
            ));
        }
        Ok(GaussianStats {
            n: 1.0,
            mean,
            scatter: Scatter::Factor {
                m: 0,
                rows: Vec::new(),
                gram: Vec::new(),
            },
        })
    }

    /// Chan et al.: with `δ = z̄_b − z̄_a`, `n = n_a + n_b`,
    /// `z̄ = z̄_a + δ n_b/n` and `S̃ = S̃_a + S̃_b + δδᵀ n_a n_b/n`; in factor form the factor
    /// rows are stacked, `F = [F_a; F_b; √(n_a n_b/n) δ]`.
    fn merge(&self, a: &GaussianStats, b: &GaussianStats) -> GaussianStats {
        let d = a.mean.len();
        let n = a.n + b.n;
        let (fb, w) = (b.n / n, a.n * b.n / n);
        let delta: Vec<f64> = (0..d).map(|i| b.mean[i] - a.mean[i]).collect();
        let mean = (0..d).map(|i| a.mean[i] + delta[i] * fb).collect();
        let scatter = match (a.scatter.as_factor(), b.scatter.as_factor()) {
            (Some(fa), Some(fb)) if fa.0 + fb.0 < self.max_factor_rows() => {
                let u: Vec<f64> = delta.iter().map(|v| v * w.sqrt()).collect();
                let (m, gram) = stacked_gram(&[fa, fb], &[&u], d);
                let mut rows = Vec::with_capacity(m * d);
                rows.extend_from_slice(fa.1);
                rows.extend_from_slice(fb.1);
                rows.extend_from_slice(&u);
                Scatter::Factor { m, rows, gram }
            }
            _ => {
                let (sa, sb) = (full_scatter(&a.scatter, d), full_scatter(&b.scatter, d));
                let mut out = Vec::with_capacity(d * d);
                for i in 0..d {
                    for j in 0..d {
                        out.push(sa[i * d + j] + sb[i * d + j] + w * delta[i] * delta[j]);
                    }
                }
                Scatter::Full(out)
            }
        };
        GaussianStats { n, mean, scatter }
    }

    /// # Errors
    /// [`RoseTreeError::Numerical`] when `Ψ_n` is not a finite positive-definite matrix,
    /// which only happens when the data overflow (values near `10¹⁵⁴` or beyond).
    fn log_marginal(&self, s: &GaussianStats) -> Result<f64> {
        let ln_det = match self.posterior_rows(s) {
            Some((k, _, mut g)) => cholesky_in_place(&mut g, k),
            None => ln_det_spd(self.posterior_full(s)),
        };
        self.log_f_from_ln_det(s.n, ln_det)
    }

    /// `ln f(A ∪ B)` with `Ψ̃_n` assembled straight from both clusters' statistics (in factor
    /// form only the small Gram matrix `I + U Uᵀ`).
    fn log_marginal_merged(&self, a: &GaussianStats, b: &GaussianStats) -> Result<f64> {
        let d = self.mu0.len();
        let n = a.n + b.n;
        let (fb, w_ab) = (b.n / n, a.n * b.n / n);
        let delta: Vec<f64> = (0..d).map(|i| b.mean[i] - a.mean[i]).collect();
        let zbar: Vec<f64> = (0..d).map(|i| a.mean[i] + delta[i] * fb).collect();
        let ln_det = self.pair_ln_det(a, b, &delta, w_ab, &zbar, self.mean_weight(n));
        self.log_f_from_ln_det(n, ln_det)
    }
}

impl RowQueries for NormalInverseWishart {
    type Query = Option<GaussianQuery>;

    /// For `A`'s posterior `(κ_A, ν_A, μ_A, Ψ_A)`, adding a row `x` gives
    /// `Ψ_{A∪x} = Ψ_A + c v vᵀ` with `v = x − μ_A` and `c = κ_A/(κ_A + 1)`, so by the matrix
    /// determinant lemma `ln|Ψ_{A∪x}| = ln|Ψ_A| + ln(1 + c vᵀ Ψ_A⁻¹ v)`. The query keeps a
    /// factorisation of `Ψ_A` (the Cholesky factor of `Ψ̃_A`, or in factor form that of the
    /// small `I + U Uᵀ`); `None` (no shortcut) if it cannot be factorised, in which case
    /// scoring falls back to [`log_marginal_merged`](ClusterModel::log_marginal_merged) and
    /// reports the error there.
    fn query(&self, a: &GaussianStats) -> Option<GaussianQuery> {
        let d = self.mu0.len();
        let kn = self.kappa0 + a.n;
        let (form, ln_det) = match self.posterior_rows(a) {
            Some((k, u, mut g)) => {
                let ln_det = cholesky_in_place(&mut g, k)?;
                (QueryForm::Factor { k, u, chol_g: g }, ln_det)
            }
            None => {
                let chol = self.posterior_full(a).cholesky()?;
                let ln_det = chol.ln_determinant();
                // The strict upper triangle of `l_dirty` is garbage; only `j ≤ i` is read.
                let l = chol.l_dirty();
                let lower = (0..d * d)
                    .map(|k| {
                        if k % d <= k / d {
                            l[(k / d, k % d)]
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let inv_diag = (0..d).map(|i| 1.0 / l[(i, i)]).collect();
                (
                    QueryForm::Full {
                        chol: lower,
                        inv_diag,
                    },
                    ln_det,
                )
            }
        };
        if !ln_det.is_finite() {
            return None;
        }
        let n = a.n + 1.0;
        Some(GaussianQuery {
            form,
            mean: a.mean.iter().map(|v| a.n * v / kn).collect(),
            c: kn / (kn + 1.0),
            half_nu: (self.nu0 + n) / 2.0,
            base: self.count_term(n) - (self.nu0 + n) / 2.0 * ln_det,
        })
    }

    /// The row's deviation `v = x − μ_A` is scaled by its largest entry `s` before the
    /// quadratic form, and `ln(1 + c s² q)` is taken in log space, so rows far from every
    /// cluster (`10¹⁵⁰` away, say) still get a finite score.
    fn log_marginal_query(
        &self,
        q: &Option<GaussianQuery>,
        a: &GaussianStats,
        b: &GaussianStats,
    ) -> Result<f64> {
        let Some(q) = q.as_ref().filter(|_| b.n == 1.0) else {
            return self.log_marginal_merged(a, b);
        };
        let d = q.mean.len();
        let s = b
            .mean
            .iter()
            .zip(&q.mean)
            .fold(0.0_f64, |m, (x, mu)| m.max((x - mu).abs()));
        if s == 0.0 {
            return Ok(q.base);
        }
        let inv_s = 1.0 / s;
        let unit = |i: usize| (b.mean[i] - q.mean[i]) * inv_s;
        let quad = match &q.form {
            QueryForm::Full { chol, inv_diag } => {
                // z = L⁻¹ u by forward substitution; uᵀ Ψ̃_A⁻¹ u = |z|².
                with_scratch(d, |z| {
                    let mut norm2 = 0.0;
                    for i in 0..d {
                        let dot = dot(&chol[i * d..i * d + i], &z[..i]);
                        z[i] = (unit(i) - dot) * inv_diag[i];
                        norm2 += z[i] * z[i];
                    }
                    norm2
                })
            }
            QueryForm::Factor { k, u, chol_g } => {
                // uᵀ (I + UᵀU)⁻¹ u = |u|² − |L_G⁻¹ U u|².
                let k = *k;
                let norm2: f64 = (0..d).map(|i| unit(i) * unit(i)).sum();
                with_scratch(k, |p| {
                    for (r, pr) in p.iter_mut().enumerate() {
                        let row = &u[r * d..(r + 1) * d];
                        *pr = (0..d).map(|i| row[i] * unit(i)).sum::<f64>();
                    }
                    forward_solve(chol_g, k, p);
                    (norm2 - dot(p, p)).max(0.0)
                })
            }
        };
        Ok(q.base - q.half_nu * ln1p_scaled(q.c, s, quad))
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
/// In whitened coordinates `vᵀ Ψ_n⁻¹ v = z̄ᵀ Ψ̃_n⁻¹ z̄`, `ln|Ψ0| − ln|Ψ_n| = −ln|Ψ̃_n|` and
/// `tr(Ψ_n⁻¹ Ψ0) = tr(Ψ̃_n⁻¹)`; in factor form (`Ψ̃_n = I + UᵀU`, `G = I + U Uᵀ` of order
/// `k`) these are `|z̄|² − |L_G⁻¹ U z̄|²`, `−ln|G|` and `d − k + tr(G⁻¹)`.
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
        match &self.psi0 {
            Scale::Diagonal { psi, .. } => {
                let psi0 = psi.iter().map(|v| v * eta[2]).collect();
                Self::new_diagonal(self.mu0.clone(), eta[0], eta[1], psi0)
            }
            Scale::Dense { psi, .. } => {
                let psi0 = psi.iter().map(|v| v * eta[2]).collect();
                Self::new(self.mu0.clone(), eta[0], eta[1], psi0)
            }
        }
    }

    fn add_gradient(&self, s: &GaussianStats, weight: f64, grad: &mut [f64]) -> Result<()> {
        let d = self.mu0.len();
        let not_pd = || {
            RoseTreeError::Numerical(
                "a Normal-inverse-Wishart scale matrix is not positive definite".into(),
            )
        };
        let (ln_det, quad, trace) = match self.posterior_rows(s) {
            Some((k, u, mut g)) => {
                let ln_det = cholesky_in_place(&mut g, k).ok_or_else(not_pd)?;
                let mut p: Vec<f64> = (0..k)
                    .map(|r| dot(&u[r * d..(r + 1) * d], &s.mean))
                    .collect();
                forward_solve(&g, k, &mut p);
                let quad = dot(&s.mean, &s.mean) - dot(&p, &p);
                // tr(G⁻¹) = |L_G⁻¹|²_F, a column of L_G⁻¹ at a time.
                let mut trace_g = 0.0;
                let mut e = vec![0.0; k];
                for j in 0..k {
                    e.iter_mut()
                        .enumerate()
                        .for_each(|(i, v)| *v = f64::from(u8::from(i == j)));
                    forward_solve(&g, k, &mut e);
                    trace_g += dot(&e, &e);
                }
                (ln_det, quad, d as f64 - k as f64 + trace_g)
            }
            None => {
                let chol = self.posterior_full(s).cholesky().ok_or_else(not_pd)?;
                let v = nalgebra::DVector::from_column_slice(&s.mean);
                let quad = v.dot(&chol.solve(&v));
                (chol.ln_determinant(), quad, chol.inverse().trace())
            }
        };
        let (n, kn, nn) = (s.n, self.kappa0 + s.n, self.nu0 + s.n);
        let df = d as f64;
        grad[0] += weight
            * (df / 2.0 * (1.0 / self.kappa0 - 1.0 / kn) - nn / 2.0 * (n / kn).powi(2) * quad);
        grad[1] +=
            weight * 0.5 * (multidigamma(nn / 2.0, d) - multidigamma(self.nu0 / 2.0, d) - ln_det);
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
            let small = cholesky_in_place(&mut lower, d).unwrap();
            let reference = ln_det_spd(spd).unwrap();
            assert!(
                (small - reference).abs() < 1e-12 * reference.abs().max(1.0),
                "d={d}"
            );
        }
        let mut not_pd = vec![1.0, 0.0, 2.0, 1.0];
        assert!(cholesky_in_place(&mut not_pd, 2).is_none());
    }
    use crate::math::ln_gamma;
    use ndarray::{Array1, Array2, array, s};

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
        let (sl, sr) = (model.scatter_of(&left), model.scatter_of(&right));
        let spread = sl.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        assert_eq!(left.n_rows(), 6.0);
        assert!(close(&model.mean_of(&left), &model.mean_of(&right), 100.0));
        assert!(close(&sl, &sr, spread));
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
        for (got, want) in model.mean_of(&s).iter().zip(&mean) {
            assert!((got - want).abs() < 1e-13);
        }
        for (got, want) in model.scatter_of(&s).iter().zip(&scatter) {
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
        // Sample variances 2/3 and 10/3 (the covariance 2/3 is left out), a ridge of
        // 1e-6 · 2 (the mean variance), and ν0 − d − 1 = 1.
        let ridge = 2e-6;
        let want = [2.0 / 3.0 + ridge, 0.0, 0.0, 10.0 / 3.0 + ridge];
        assert_eq!(model.psi0_diagonal().map(<[f64]>::len), Some(2));
        for (got, want) in model.psi0().iter().zip(want) {
            assert!((got - want).abs() < 1e-15);
        }
        // ν0 = 6 scales Ψ0 by ν0 − d − 1 = 3, so that E[Σ] stays diag(variances).
        let model = NormalInverseWishart::from_data(x.view(), None, Some(6.0)).unwrap();
        assert!((model.psi0()[3] - 3.0 * want[3]).abs() < 1e-14);
        // Without a prior mean of Σ (ν0 ≤ d + 1) Ψ0 is diag(variances) itself.
        let model = NormalInverseWishart::from_data(x.view(), None, Some(2.5)).unwrap();
        assert!((model.psi0()[3] - want[3]).abs() < 1e-15);
        // More columns than rows: the covariance is singular, the default Ψ0 is not.
        let wide = Array2::from_shape_fn((3, 10), |(i, j)| ((i * 7 + j * 3) % 5) as f64);
        let model = NormalInverseWishart::from_data(wide.view(), None, None).unwrap();
        assert!(model.psi0_diagonal().unwrap().iter().all(|v| *v > 0.0));
        // A constant column gets the ridge only.
        let part = array![[1.0, 5.0], [3.0, 5.0]];
        let model = NormalInverseWishart::from_data(part.view(), None, None).unwrap();
        assert_eq!(model.psi0_diagonal(), Some(&[2.0 + 1e-6, 1e-6][..]));
        // Collinear and constant data still give a positive-definite Ψ0.
        let collinear = array![[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]];
        assert!(NormalInverseWishart::from_data(collinear.view(), None, None).is_ok());
        let constant = array![[1.0, 1.0], [1.0, 1.0]];
        let model = NormalInverseWishart::from_data(constant.view(), None, None).unwrap();
        assert_eq!(model.psi0(), vec![1.0, 0.0, 0.0, 1.0]);
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

    /// A random symmetric positive-definite `d × d` matrix (row-major), well conditioned.
    fn spd(rng: &mut Normals, d: usize) -> Vec<f64> {
        let b = DMatrix::from_fn(d, d, |_, _| rng.next());
        let m = &b * b.transpose() / d as f64 + DMatrix::identity(d, d) * 0.5;
        (0..d * d).map(|k| m[(k / d, k % d)]).collect()
    }

    /// The policies under test: every cluster in full form; every cluster and pair in factor
    /// form; the switch from factor to full after `switch` factor rows with pairs by cost;
    /// and the automatic choice.
    fn policies(switch: usize) -> [Policy; 4] {
        [
            Policy {
                max_factor_rows: Some(0),
                pair: Some(Form::Full),
            },
            Policy {
                max_factor_rows: Some(usize::MAX),
                pair: Some(Form::Factor),
            },
            Policy {
                max_factor_rows: Some(switch),
                pair: None,
            },
            Policy::default(),
        ]
    }

    /// Every way of scoring a cluster of rows — its merged statistics in several merge orders,
    /// the pair shortcut on each split, the single-row query — against the sequential
    /// Student-t predictives, for diagonal and full `Ψ0`, in each form and across the switch
    /// between forms.
    #[test]
    fn factor_and_full_forms_match_sequential_predictives() {
        let mut rng = Normals(0x5eed);
        for (d, n) in [(3, 6), (8, 9), (20, 11), (40, 7)] {
            let x = rng.matrix(n, d, 3.0, 2.0);
            let mu0: Vec<f64> = (0..d).map(|i| 0.1 * i as f64).collect();
            let dense = spd(&mut rng, d);
            let diag: Vec<f64> = (0..d).map(|i| 0.5 + 0.1 * i as f64).collect();
            let diag_full: Vec<f64> = (0..d * d)
                .map(|k| if k % (d + 1) == 0 { diag[k / d] } else { 0.0 })
                .collect();
            for (psi0, is_diag) in [(dense, false), (diag_full, true)] {
                let (kappa0, nu0) = (0.3, d as f64 + 1.5);
                let expected = sequential(&mu0, kappa0, nu0, &psi0, &x);
                let base = NormalInverseWishart::new(mu0.clone(), kappa0, nu0, psi0).unwrap();
                assert_eq!(base.psi0_diagonal().is_some(), is_diag);
                for policy in policies(3) {
                    let mut model = base.clone();
                    model.policy = policy;
                    let l = model.leaf_stats_all(x.view()).unwrap();
                    let fold = |ids: &[usize]| {
                        ids[1..]
                            .iter()
                            .fold(l[ids[0]].clone(), |acc, &i| model.merge(&acc, &l[i]))
                    };
                    let all: Vec<usize> = (0..n).collect();
                    let rev: Vec<usize> = (0..n).rev().collect();
                    let half = n / 2;
                    let (left, right) = (fold(&all[..half]), fold(&rev[..n - half]));
                    let balanced = model.merge(&left, &right);
                    let close = |got: f64, what: &str| {
                        assert!(
                            (got - expected).abs() < 1e-10 * expected.abs(),
                            "d={d} diag={is_diag} {policy:?} {what}: {got} vs {expected}"
                        );
                    };
                    close(model.log_marginal(&fold(&all)).unwrap(), "fold");
                    close(model.log_marginal(&fold(&rev)).unwrap(), "reverse fold");
                    close(model.log_marginal(&balanced).unwrap(), "balanced");
                    close(model.log_marginal_merged(&left, &right).unwrap(), "merged");
                    close(
                        model.log_marginal_merged(&right, &left).unwrap(),
                        "merged, swapped",
                    );
                    let rest = fold(&all[1..]);
                    let q = model.query(&rest);
                    assert!(q.is_some());
                    close(model.log_marginal_query(&q, &rest, &l[0]).unwrap(), "query");
                }
            }
        }
    }

    #[test]
    fn forms_switch_at_the_factor_limit() {
        let mut rng = Normals(99);
        let (n, d) = (12, 16);
        let x = rng.matrix(n, d, 0.0, 1.0);
        let mut model = NormalInverseWishart::from_data(x.view(), None, None).unwrap();
        assert_eq!(model.max_factor_rows(), 4);
        let l = model.leaf_stats_all(x.view()).unwrap();
        let fold = |model: &NormalInverseWishart, k: usize| {
            l[1..k]
                .iter()
                .fold(l[0].clone(), |acc, s| model.merge(&acc, s))
        };
        // A cluster of k rows has k − 1 factor rows while that is at most d/4.
        for k in 1..=n {
            let want = (k - 1 <= 4).then_some(k - 1);
            assert_eq!(fold(&model, k).factor_rank(), want, "{k} rows");
        }
        model.policy.max_factor_rows = Some(usize::MAX);
        assert_eq!(fold(&model, n).factor_rank(), Some(n - 1));
        // The cost model: two leaves in factor form, two big factors in full form.
        let leaf = &l[0].scatter;
        assert_eq!(model.pair_form(leaf, leaf), Form::Factor);
        let big = fold(&model, n);
        assert_eq!(model.pair_form(&big.scatter, &big.scatter), Form::Full);
        assert_eq!(
            model.pair_form(leaf, &Scatter::Full(vec![0.0; d * d])),
            Form::Full
        );
    }

    #[test]
    fn gradient_matches_finite_differences_in_both_forms() {
        let mut rng = Normals(17);
        let (n, d) = (7, 12);
        let x = rng.matrix(n, d, 1.0, 1.5);
        let dense = spd(&mut rng, d);
        let mu0 = vec![0.5; d];
        for psi0 in [
            dense,
            (0..d * d)
                .map(|k| f64::from(u8::from(k % (d + 1) == 0)))
                .collect(),
        ] {
            let base = NormalInverseWishart::new(mu0.clone(), 0.4, d as f64 + 2.5, psi0).unwrap();
            for policy in policies(3) {
                let log_f = |m: &NormalInverseWishart| {
                    let mut m = m.clone();
                    m.policy = policy;
                    let l = m.leaf_stats_all(x.view()).unwrap();
                    let s = l[1..].iter().fold(l[0].clone(), |acc, s| m.merge(&acc, s));
                    (m.log_marginal(&s).unwrap(), s, m)
                };
                let (_, s, model) = log_f(&base);
                let mut grad = vec![0.0; 3];
                model.add_gradient(&s, 2.0, &mut grad).unwrap();
                for (i, g) in grad.iter().enumerate() {
                    let h = 1e-5;
                    let mut up = base.hyperparameters();
                    let mut down = up.clone();
                    up[i] += h;
                    down[i] -= h;
                    let fd = (log_f(&base.with_hyperparameters(&up).unwrap()).0
                        - log_f(&base.with_hyperparameters(&down).unwrap()).0)
                        / (2.0 * h);
                    assert!(
                        (g / 2.0 - fd).abs() < 1e-6 * fd.abs().max(1.0),
                        "{policy:?} η_{i}: {} vs {fd}",
                        g / 2.0
                    );
                }
            }
        }
    }

    #[test]
    fn far_rows_get_finite_student_t_scores() {
        // 1-D: f({x} ∪ A) / f(A) is a Student t with ν = ν_A − d + 1 degrees of freedom,
        // location μ_A and squared scale ψ_A (κ_A + 1)/(κ_A ν); far out its log density is
        // −((ν + 1)/2) ln(c (x − μ_A)²/ψ_A) + constant up to a relative 1/(x − μ_A)².
        let model = NormalInverseWishart::new(vec![0.0], 1.0, 3.0, vec![2.0]).unwrap();
        let x = array![[0.5], [-0.3], [1.2]];
        let l = model.leaf_stats_all(x.view()).unwrap();
        let a = model.merge(&model.merge(&l[0], &l[1]), &l[2]);
        let q = model.query(&a);
        let log_fa = model.log_marginal(&a).unwrap();
        let (n, kappa, nu) = (3.0, 4.0, 6.0);
        let mean = 1.4 / kappa;
        let xbar = 1.4 / n;
        let scatter: f64 = [0.5, -0.3, 1.2]
            .iter()
            .map(|v: &f64| (v - xbar).powi(2))
            .sum();
        let psi = 2.0 + scatter + 1.0 * n / kappa * xbar * xbar;
        let c = kappa / (kappa + 1.0);
        for far in [1e10, 1e150, 1e300, -1e300] {
            let row = model.leaf_stats(array![far].view(), 0).unwrap();
            let got = model.log_marginal_query(&q, &a, &row).unwrap() - log_fa;
            assert!(got.is_finite(), "{far}");
            // ln p = lnΓ((ν+1)/2) − lnΓ(ν/2) − ½ ln π + ½ ln(c/ψ) − ((ν+1)/2) ln(1 + c v²/ψ)
            let v = far - mean;
            let ln_t = c.ln() - psi.ln() + 2.0 * v.abs().ln();
            let want =
                ln_gamma((nu + 1.0) / 2.0) - ln_gamma(nu / 2.0) - 0.5 * std::f64::consts::PI.ln()
                    + 0.5 * (c / psi).ln()
                    - (nu + 1.0) / 2.0 * (ln_t + (-ln_t).exp().ln_1p());
            assert!(
                (got - want).abs() < 1e-12 * want.abs(),
                "{far}: {got} vs {want}"
            );
        }
        // Far rows in many dimensions, in both query forms.
        let mut rng = Normals(4);
        let x = rng.matrix(6, 20, 0.0, 1.0);
        for policy in policies(2) {
            let mut model = NormalInverseWishart::from_data(x.view(), None, None).unwrap();
            model.policy = policy;
            let l = model.leaf_stats_all(x.view()).unwrap();
            let a = l[1..]
                .iter()
                .fold(l[0].clone(), |acc, s| model.merge(&acc, s));
            let q = model.query(&a);
            let score = |t: f64| {
                let row = model
                    .leaf_stats(Array1::from_elem(20, t).view(), 0)
                    .unwrap();
                model.log_marginal_query(&q, &a, &row).unwrap()
            };
            // Doubling the distance costs (ν/2) ln 4 far out.
            let (s1, s2) = (score(1e150), score(2e150));
            let half_nu = (model.nu0() + 7.0) / 2.0;
            assert!(
                ((s1 - s2) - half_nu * 4f64.ln()).abs() < 1e-9 * s1.abs(),
                "{policy:?}"
            );
        }
    }

    #[test]
    fn data_too_large_for_the_default_prior_name_the_column() {
        use ndarray::array;
        let x = array![[1.0, 2.0], [3.0, -1e160], [2.0, 5.0]];
        match NormalInverseWishart::from_data(x.view(), None, None) {
            Err(RoseTreeError::InvalidData { row, column, .. }) => {
                assert_eq!((row, column), (1, Some(1)));
            }
            other => panic!("{other:?}"),
        }
        // Large but representable variances still give a prior.
        let x = array![[1e150], [-1e150], [3.0]];
        assert!(NormalInverseWishart::from_data(x.view(), None, None).is_ok());
    }
}
