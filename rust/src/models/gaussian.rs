//! Multivariate Gaussian clusters with a conjugate Normal–inverse-Wishart prior.

use nalgebra::DMatrix;
use ndarray::{ArrayView1, ArrayView2};

use super::ClusterModel;
use crate::error::{Result, RoseTreeError};
use crate::math::ln_multigamma;

/// Default `κ0` of [`NormalInverseWishart::from_data`]: a vague prior on cluster locations.
pub const DEFAULT_KAPPA0: f64 = 0.01;

/// `Σ ~ IW(Ψ0, ν0)`, `μ | Σ ~ N(μ0, Σ/κ0)`, `x ~ N(μ, Σ)`; `κ0` is the BRT paper's `r`, and its
/// Wishart scale `S` on the precision is `Ψ0⁻¹`. The cluster marginal likelihood is
///
/// `ln f = −(nd/2) ln π + ln Γ_d(ν_n/2) − ln Γ_d(ν0/2) + (ν0/2) ln|Ψ0| − (ν_n/2) ln|Ψ_n|
///        + (d/2)(ln κ0 − ln κ_n)`
///
/// with `κ_n = κ0 + n`, `ν_n = ν0 + n`, `Ψ_n = Ψ0 + M2 + (κ0 n/κ_n)(x̄ − μ0)(x̄ − μ0)ᵀ`, `M2` the
/// scatter about the cluster mean. Missing values are not supported.
#[derive(Debug, Clone)]
pub struct NormalInverseWishart {
    mu0: Vec<f64>,
    kappa0: f64,
    nu0: f64,
    psi0: Vec<f64>,
    /// `ln Γ_d(ν0/2) − (ν0/2) ln|Ψ0| − (d/2) ln κ0`, the prior's share of `ln f`.
    prior_const: f64,
}

/// Sufficient statistics of a Gaussian cluster: count, mean and scatter about the mean
/// (row-major `d × d`), merged with the parallel formula of Chan et al. for stability.
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

    /// Cluster mean.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }
}

fn ln_det_spd(m: DMatrix<f64>) -> Option<f64> {
    let chol = m.cholesky()?;
    Some(
        2.0 * chol
            .l_dirty()
            .diagonal()
            .iter()
            .map(|v| v.ln())
            .sum::<f64>(),
    )
}

/// The terms of `ln f(A ∪ {x})` for a cluster `A` and any single row `x`. By the matrix
/// determinant lemma, `|Ψ_A + c v vᵀ| = |Ψ_A| (1 + c vᵀ Ψ_A⁻¹ v)` with `v = x − μ_A` and
/// `c = κ_A / (κ_A + 1)`, so with the Cholesky factor of `A`'s posterior scale `Ψ_A` at hand
/// scoring a row costs one triangular solve, `O(d²)`, instead of a factorisation.
#[derive(Debug, Clone)]
pub struct GaussianQuery {
    /// Lower Cholesky factor of `Ψ_A`, row-major.
    chol: Vec<f64>,
    /// Posterior mean `μ_A`.
    mean: Vec<f64>,
    c: f64,
    /// `ν_{A∪x} / 2`.
    half_nu: f64,
    /// Every term of `ln f(A ∪ {x})` except `−(ν/2) ln(1 + c vᵀ Ψ_A⁻¹ v)`.
    base: f64,
}

impl NormalInverseWishart {
    /// Posterior `(κ_n, ν_n, μ_n, Ψ_n)` of a cluster.
    fn posterior(&self, s: &GaussianStats) -> (f64, f64, Vec<f64>, DMatrix<f64>) {
        let d = self.mu0.len();
        let (kn, nun) = (self.kappa0 + s.n, self.nu0 + s.n);
        let w = self.kappa0 * s.n / kn;
        let dev: Vec<f64> = s.mean.iter().zip(&self.mu0).map(|(m, m0)| m - m0).collect();
        let psi_n = DMatrix::from_fn(d, d, |i, j| {
            self.psi0[i * d + j] + s.scatter[i * d + j] + w * dev[i] * dev[j]
        });
        let mean = s
            .mean
            .iter()
            .zip(&self.mu0)
            .map(|(m, m0)| (self.kappa0 * m0 + s.n * m) / kn)
            .collect();
        (kn, nun, mean, psi_n)
    }

    /// `ln f` of a cluster of `n` rows with posterior `κ_n`, `ν_n` and `ln|Ψ_n|`.
    fn log_f_from(&self, n: f64, kn: f64, nun: f64, ln_det: f64) -> f64 {
        let d = self.mu0.len() as f64;
        -(n * d / 2.0) * std::f64::consts::PI.ln() + ln_multigamma(nun / 2.0, self.mu0.len())
            - nun / 2.0 * ln_det
            - d / 2.0 * kn.ln()
            - self.prior_const
    }

    /// A prior with mean `mu0`, pseudo-count `kappa0`, degrees of freedom `nu0` and scale
    /// `psi0` (row-major `d × d`, symmetric positive definite); `d = mu0.len()`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `mu0`, `kappa0`, `nu0` or `psi0`.
    pub fn new(mu0: Vec<f64>, kappa0: f64, nu0: f64, psi0: Vec<f64>) -> Result<Self> {
        let d = mu0.len();
        if d == 0 {
            return Err(RoseTreeError::param(
                "mu0",
                "needs at least one value (one per feature)",
            ));
        }
        if mu0.iter().any(|v| !v.is_finite()) {
            return Err(RoseTreeError::param("mu0", "must be finite"));
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
                format!("must exceed n_features - 1 = {}, got {nu0}", d as f64 - 1.0),
            ));
        }
        if psi0.len() != d * d {
            return Err(RoseTreeError::param(
                "psi0",
                format!(
                    "expected a {d} x {d} matrix ({} values), got {} values",
                    d * d,
                    psi0.len()
                ),
            ));
        }
        if psi0.iter().any(|v| !v.is_finite()) {
            return Err(RoseTreeError::param("psi0", "must be finite"));
        }
        for i in 0..d {
            for j in 0..i {
                let (a, b) = (psi0[i * d + j], psi0[j * d + i]);
                if (a - b).abs() > 1e-10 * a.abs().max(b.abs()).max(1e-300) {
                    return Err(RoseTreeError::param("psi0", "must be symmetric"));
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
        })
    }

    /// The data-driven prior used when none is given: `μ0` the column means, `κ0` (default
    /// [`DEFAULT_KAPPA0`]), `ν0` (default `d + 2`), and `Ψ0 = (ν0 − d − 1)·C` with `C` the
    /// sample covariance plus a ridge of `10⁻⁶` times its mean variance (the identity if every
    /// column is constant), so that the prior mean of `Σ` is the data covariance whenever
    /// `ν0 > d + 1` (otherwise `Ψ0 = C`).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `X` for fewer than two rows, and
    /// [`RoseTreeError::InvalidData`] for a non-finite value; those of [`Self::new`].
    pub fn from_data(
        x: ArrayView2<'_, f64>,
        kappa0: Option<f64>,
        nu0: Option<f64>,
    ) -> Result<Self> {
        let (n, d) = x.dim();
        if n < 2 {
            return Err(RoseTreeError::param(
                "X",
                "needs at least two rows to derive the default Normal-inverse-Wishart prior",
            ));
        }
        if let Some((i, j)) = x
            .indexed_iter()
            .find(|(_, v)| !v.is_finite())
            .map(|(ij, _)| ij)
        {
            return Err(nonfinite(i, j));
        }
        let mean: Vec<f64> = (0..d).map(|j| x.column(j).sum() / n as f64).collect();
        let mut cov = vec![0.0; d * d];
        for row in x.rows() {
            for a in 0..d {
                for b in 0..d {
                    cov[a * d + b] += (row[a] - mean[a]) * (row[b] - mean[b]) / (n as f64 - 1.0);
                }
            }
        }
        let mean_var = (0..d).map(|a| cov[a * d + a]).sum::<f64>() / d as f64;
        if mean_var > 0.0 {
            for a in 0..d {
                cov[a * d + a] += 1e-6 * mean_var;
            }
        } else {
            cov.iter_mut()
                .enumerate()
                .for_each(|(k, c)| *c = f64::from(u8::from(k % (d + 1) == 0)));
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

    /// Scale matrix `Ψ0`, row-major.
    pub fn psi0(&self) -> &[f64] {
        &self.psi0
    }
}

fn nonfinite(row: usize, col: usize) -> RoseTreeError {
    RoseTreeError::data(
        row,
        Some(col),
        "the Normal-inverse-Wishart model needs finite values (missing values are not supported)",
    )
}

impl ClusterModel for NormalInverseWishart {
    type Stats = GaussianStats;
    type Query = Option<GaussianQuery>;

    fn n_features(&self) -> usize {
        self.mu0.len()
    }

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

    fn merge(&self, a: &GaussianStats, b: &GaussianStats) -> GaussianStats {
        let d = a.mean.len();
        let n = a.n + b.n;
        let delta: Vec<f64> = a.mean.iter().zip(&b.mean).map(|(x, y)| y - x).collect();
        let mean = a
            .mean
            .iter()
            .zip(&delta)
            .map(|(m, dl)| m + dl * b.n / n)
            .collect();
        let w = a.n * b.n / n;
        let mut scatter = Vec::with_capacity(d * d);
        for i in 0..d {
            for j in 0..d {
                scatter.push(a.scatter[i * d + j] + b.scatter[i * d + j] + w * delta[i] * delta[j]);
            }
        }
        GaussianStats { n, mean, scatter }
    }

    fn log_marginal(&self, s: &GaussianStats) -> Result<f64> {
        let (kn, nun, _, psi_n) = self.posterior(s);
        let ln_det = ln_det_spd(psi_n).ok_or_else(|| {
            RoseTreeError::Numerical(format!(
                "the posterior scale matrix of a {}-row cluster is not positive definite",
                s.n
            ))
        })?;
        Ok(self.log_f_from(s.n, kn, nun, ln_det))
    }

    fn query(&self, a: &GaussianStats) -> Option<GaussianQuery> {
        let d = self.mu0.len();
        let (kn, nun, mean, psi_n) = self.posterior(a);
        let chol = psi_n.cholesky()?;
        let l = chol.l();
        let ln_det = 2.0 * l.diagonal().iter().map(|v| v.ln()).sum::<f64>();
        let base = self.log_f_from(a.n + 1.0, kn + 1.0, nun + 1.0, ln_det);
        let chol = (0..d * d).map(|k| l[(k / d, k % d)]).collect();
        Some(GaussianQuery {
            chol,
            mean,
            c: kn / (kn + 1.0),
            half_nu: (nun + 1.0) / 2.0,
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
            z[i] = (b.mean[i] - q.mean[i] - dot) / q.chol[i * d + i];
            norm2 += z[i] * z[i];
        }
        Ok(q.base - q.half_nu * (q.c * norm2).ln_1p())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// ln of a multivariate Student-t density (location `mu`, scale matrix `shape`, `df`).
    fn ln_student_t(x: &[f64], mu: &[f64], shape: &DMatrix<f64>, df: f64) -> f64 {
        let d = x.len() as f64;
        let chol = shape.clone().cholesky().unwrap();
        let dev = nalgebra::DVector::from_iterator(x.len(), x.iter().zip(mu).map(|(a, b)| a - b));
        let z = chol.solve(&dev);
        let maha = dev.dot(&z);
        let ln_det = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
        crate::math::ln_gamma((df + d) / 2.0)
            - crate::math::ln_gamma(df / 2.0)
            - d / 2.0 * (df * std::f64::consts::PI).ln()
            - 0.5 * ln_det
            - (df + d) / 2.0 * (1.0 + maha / df).ln()
    }

    #[test]
    fn matches_sequential_student_t_predictives() {
        let x = array![
            [0.3, -1.0, 2.0],
            [1.1, 0.4, 0.2],
            [-0.7, 0.9, 1.5],
            [0.2, 0.1, -0.3],
            [2.0, -0.5, 0.8]
        ];
        let psi0 = vec![2.0, 0.3, 0.1, 0.3, 1.5, -0.2, 0.1, -0.2, 1.0];
        for d in 1..=3 {
            let sub = x.slice(ndarray::s![.., ..d]).to_owned();
            let psi: Vec<f64> = (0..d * d).map(|k| psi0[(k / d) * 3 + k % d]).collect();
            let model =
                NormalInverseWishart::new(vec![0.2; d], 0.5, d as f64 + 0.7, psi.clone()).unwrap();
            let leaves = model.leaf_stats_all(sub.view()).unwrap();
            let all = leaves[1..]
                .iter()
                .fold(leaves[0].clone(), |a, s| model.merge(&a, s));
            let (mut mu, mut kappa, mut nu) = (vec![0.2; d], 0.5, d as f64 + 0.7);
            let mut scale = DMatrix::from_row_slice(d, d, &psi);
            let mut expected = 0.0;
            for row in sub.rows() {
                let df = nu - d as f64 + 1.0;
                let shape = &scale * ((kappa + 1.0) / (kappa * df));
                expected += ln_student_t(row.as_slice().unwrap(), &mu, &shape, df);
                let dev: Vec<f64> = row.iter().zip(&mu).map(|(a, b)| a - b).collect();
                scale += DMatrix::from_fn(d, d, |i, j| kappa / (kappa + 1.0) * dev[i] * dev[j]);
                mu = mu
                    .iter()
                    .zip(row.iter())
                    .map(|(m, v)| (kappa * m + v) / (kappa + 1.0))
                    .collect();
                kappa += 1.0;
                nu += 1.0;
            }
            let got = model.log_marginal(&all).unwrap();
            assert!(
                (got - expected).abs() < 1e-10 * expected.abs(),
                "d={d}: {got} vs {expected}"
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
        let x = array![[0.3, -1.0], [1.1, 0.4], [-0.7, 0.9], [0.2, 0.1]];
        let model = NormalInverseWishart::from_data(x.view(), None, None).unwrap();
        let l = model.leaf_stats_all(x.view()).unwrap();
        let a = model.merge(&model.merge(&model.merge(&l[0], &l[1]), &l[2]), &l[3]);
        let b = model.merge(&model.merge(&l[3], &l[1]), &model.merge(&l[2], &l[0]));
        let (fa, fb) = (
            model.log_marginal(&a).unwrap(),
            model.log_marginal(&b).unwrap(),
        );
        assert!((fa - fb).abs() < 1e-12 * fa.abs());
    }

    #[test]
    fn invalid_priors_and_data_are_named() {
        let name = |r: Result<NormalInverseWishart>| match r {
            Err(RoseTreeError::InvalidParameter { name, .. }) => name,
            other => panic!("{other:?}"),
        };
        let eye = vec![1.0, 0.0, 0.0, 1.0];
        assert_eq!(
            name(NormalInverseWishart::new(
                vec![0.0; 2],
                1.0,
                3.0,
                vec![1.0, 2.0, 2.0, 1.0]
            )),
            "psi0"
        );
        assert_eq!(
            name(NormalInverseWishart::new(
                vec![0.0; 2],
                1.0,
                3.0,
                vec![1.0, 0.5, 0.0, 1.0]
            )),
            "psi0"
        );
        assert_eq!(
            name(NormalInverseWishart::new(
                vec![0.0; 2],
                1.0,
                0.5,
                eye.clone()
            )),
            "nu0"
        );
        assert_eq!(
            name(NormalInverseWishart::new(
                vec![0.0; 2],
                0.0,
                3.0,
                eye.clone()
            )),
            "kappa0"
        );
        assert_eq!(
            name(NormalInverseWishart::new(vec![0.0; 3], 1.0, 3.0, eye)),
            "psi0"
        );
        let model =
            NormalInverseWishart::from_data(array![[0.0, 1.0], [1.0, 0.0]].view(), None, None)
                .unwrap();
        let err = model
            .leaf_stats(array![1.0, f64::NAN].view(), 4)
            .unwrap_err();
        assert!(matches!(
            err,
            RoseTreeError::InvalidData {
                row: 4,
                column: Some(1),
                ..
            }
        ));
        // Constant data still give a positive-definite default scale.
        assert!(
            NormalInverseWishart::from_data(array![[1.0, 1.0], [1.0, 1.0]].view(), None, None)
                .is_ok()
        );
    }
}
