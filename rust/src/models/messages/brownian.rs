//! Brownian diffusion (Teh, Daumé & Roy 2007, eqs 11–13; Knowles & Ghahramani eq 10).
//!
//! Along a branch of length `δ` the value moves by `N(0, δΛ)`. A message is a Gaussian
//! `M(y) = N(y; μ, vΛ)`: a mean and one scalar variance factor `v`, since every message is
//! a multiple of the same `Λ` (a leaf has `v = 0`, a branch adds its length, a product of
//! Gaussians with covariances `v_bΛ` has covariance `(Σ 1/v_b)⁻¹Λ`).
//!
//! Observation noise ([`BrownianDiffusion::with_noise`]) is a leaf observed as
//! `x_i ~ N(y_i, ηΛ)` around the process's value `y_i` at the leaf: the leaf's message is
//! `N(y_i; x_i, ηΛ)`, `v = η`, the same as running the diffusion a further time `η` below
//! every leaf. With noise measured in units of `Λ`, every message stays a multiple of `Λ`,
//! so pair scores stay `O(d)` and `Λ`'s posterior mode given a tree keeps its closed form
//! (the independent contrasts). For a timed tree the leaves' joint density is then, in each
//! whitened coordinate, `N(·; 0, C + ηI)` with `C` the tree's Brownian covariance (shared
//! branch lengths). `η = 0` is Teh, Daumé & Roy's model.
//!
//! `Λ` may be `λI`, a diagonal matrix or a full SPD matrix. The model whitens the data once,
//! `x̃ = L⁻¹x` with `Λ = LLᵀ` (a Cholesky factor, or `√λ_d` per feature), and keeps means in
//! whitened coordinates, where `‖x‖²_Λ = xᵀΛ⁻¹x = ‖x̃‖²`; only the constant `ln|Λ|` remains
//! of `Λ`. Scoring a pair then costs `O(d)` whatever the form of `Λ`.
//!
//! Missing values are not supported here: a NaN (or infinite) entry is rejected with
//! [`RoseTreeError::InvalidData`], because a partly observed row is no longer a message of
//! the form `N(μ, vΛ)`. [`MaskedBrownian`](super::MaskedBrownian) is the same process for
//! data with missing entries and a diagonal `Λ`, with one variance factor per feature.

use nalgebra::{DMatrix, DVector};
use ndarray::{ArrayView1, ArrayView2};

use super::{BranchJoin, MessageModel, check_duration_args, check_row};
use crate::error::{Result, RoseTreeError};
use crate::models::per_feature;

const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// The prior on the value at the root of the tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    /// The flat (improper) prior of Kingman's coalescent with Brownian motion started at
    /// `t = −∞`: `ln Z_−∞ = 0` (Teh et al. eq 5 with the messages normalised).
    Flat,
    /// `y_root ~ N(0, s0·Λ)` at the root node, `s0 ≥ 0`. With `s0 = 0` the root is pinned at
    /// the origin: the Pitman–Yor diffusion tree's convention, where the branch from the
    /// origin to the first branch point is the `root_branch` of
    /// [`tree_log_likelihood`](super::tree_log_likelihood).
    Gaussian {
        /// The prior variance factor at the root.
        s0: f64,
    },
}

/// How data are whitened: `x̃ = L⁻¹x` with `Λ = LLᵀ`.
#[derive(Debug, Clone)]
enum Whitening {
    /// `Λ` diagonal (or `λI`): `√λ_d` per feature.
    Scales(Vec<f64>),
    /// `Λ` full: its lower Cholesky factor `L`.
    Cholesky(DMatrix<f64>),
}

/// Brownian diffusion with covariance rate `Λ` per unit time (Teh et al. §4.3).
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::models::messages::{BrownianDiffusion, MessageModel, Root};
///
/// let model = BrownianDiffusion::full(array![[2.0, 0.5], [0.5, 1.0]].view())?
///     .with_root(Root::Gaussian { s0: 1.0 })?;
/// assert_eq!(model.n_features(), 2);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BrownianDiffusion {
    whitening: Whitening,
    /// `ln|Λ|`.
    log_det: f64,
    root: Root,
    /// `η ≥ 0`: leaves are observed with covariance `ηΛ` (module docs).
    noise: f64,
}

/// A Brownian message `N(y; μ, vΛ)`, with `μ` in whitened coordinates (see the module
/// docs). `v = 0` is a point mass (a leaf); `v = ∞` is the uninformative message.
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianMessage {
    mean: Vec<f64>,
    var: f64,
}

impl GaussianMessage {
    /// The mean `L⁻¹μ` in whitened coordinates; [`BrownianDiffusion::mean`] gives `μ`.
    pub fn whitened_mean(&self) -> &[f64] {
        &self.mean
    }

    /// The variance factor `v`: the message's covariance is `vΛ`.
    pub fn variance(&self) -> f64 {
        self.var
    }
}

/// The branch-length-free part of a pair's merge normaliser: `‖μ_l − μ_r‖²_Λ` and
/// `v_l + v_r`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GaussianPair {
    /// `‖μ_l − μ_r‖²_Λ`, the squared Mahalanobis distance of the two means.
    pub sq_dist: f64,
    /// `v_l + v_r`, the variance factor between the means at zero branch length.
    pub var: f64,
}

impl BrownianDiffusion {
    /// `Λ = λI` in `d` dimensions.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `lambda` unless it is finite and `> 0`, on
    /// `n_features` if `d = 0`.
    pub fn isotropic(lambda: f64, d: usize) -> Result<Self> {
        check_dims(d)?;
        Self::diagonal(&[lambda], d)
    }

    /// `Λ = diag(λ_1, …, λ_d)`; a single value broadcasts to every feature.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `lambda` for a wrong length or a value that
    /// is not finite and `> 0`, on `n_features` if `d = 0`.
    pub fn diagonal(lambda: &[f64], d: usize) -> Result<Self> {
        check_dims(d)?;
        let lambda = per_feature("lambda", lambda, d)?;
        Ok(Self {
            log_det: lambda.iter().map(|l| l.ln()).sum(),
            whitening: Whitening::Scales(lambda.iter().map(|l| l.sqrt()).collect()),
            root: Root::Flat,
            noise: 0.0,
        })
    }

    /// A full symmetric positive-definite `Λ`, whitened once with its Cholesky factor.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `lambda` if it is empty, not square, not
    /// finite, not symmetric (to a relative `1e-10` of its largest entry) or not positive
    /// definite.
    pub fn full(lambda: ArrayView2<'_, f64>) -> Result<Self> {
        let d = lambda.nrows();
        let bad = |reason: String| Err(RoseTreeError::param("lambda", reason));
        if d == 0 || lambda.ncols() != d {
            return bad(format!(
                "must be a non-empty square matrix, got {}×{}",
                d,
                lambda.ncols()
            ));
        }
        if lambda.iter().any(|v| !v.is_finite()) {
            return bad("has a non-finite entry".into());
        }
        let scale = lambda.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        for i in 0..d {
            for j in 0..i {
                if (lambda[[i, j]] - lambda[[j, i]]).abs() > 1e-10 * scale {
                    return bad(format!(
                        "is not symmetric: entry ({i}, {j}) is {} but ({j}, {i}) is {}",
                        lambda[[i, j]],
                        lambda[[j, i]]
                    ));
                }
            }
        }
        let sym = DMatrix::from_fn(d, d, |i, j| 0.5 * (lambda[[i, j]] + lambda[[j, i]]));
        let Some(chol) = sym.cholesky() else {
            return bad("is not positive definite".into());
        };
        let l = chol.unpack();
        let log_det = 2.0 * l.diagonal().iter().map(|v| v.ln()).sum::<f64>();
        if !log_det.is_finite() {
            return bad("is numerically singular".into());
        }
        Ok(Self {
            whitening: Whitening::Cholesky(l),
            log_det,
            root: Root::Flat,
            noise: 0.0,
        })
    }

    /// The same model with the root prior `root` (the default is [`Root::Flat`]).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `s0` unless it is finite and `≥ 0`.
    pub fn with_root(mut self, root: Root) -> Result<Self> {
        if let Root::Gaussian { s0 } = root {
            if !(s0.is_finite() && s0 >= 0.0) {
                return Err(RoseTreeError::param(
                    "s0",
                    format!("must be finite and ≥ 0, got {s0}"),
                ));
            }
        }
        self.root = root;
        Ok(self)
    }

    /// The root prior.
    pub fn root(&self) -> Root {
        self.root
    }

    /// The same model with observation noise `η`: each row is observed as `x_i ~ N(y_i, ηΛ)`
    /// around the diffusion's value `y_i` at its leaf (module docs). `η = 0`, the default,
    /// is Teh et al.'s noiseless model, under which equal rows have infinite density.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `noise` unless it is finite and `≥ 0`.
    pub fn with_noise(mut self, noise: f64) -> Result<Self> {
        if !(noise.is_finite() && noise >= 0.0) {
            return Err(RoseTreeError::param(
                "noise",
                format!("must be finite and ≥ 0, got {noise}"),
            ));
        }
        self.noise = noise;
        Ok(self)
    }

    /// The observation noise `η` (the leaves' variance factor).
    pub fn noise(&self) -> f64 {
        self.noise
    }

    /// `ln|Λ|`.
    pub fn log_det(&self) -> f64 {
        self.log_det
    }

    /// `√λ_d` per feature for a diagonal `Λ`; `None` for a full `Λ`.
    pub(super) fn scales(&self) -> Option<&[f64]> {
        match &self.whitening {
            Whitening::Scales(s) => Some(s),
            Whitening::Cholesky(_) => None,
        }
    }

    /// The mean of `msg` in data coordinates, `μ = L μ̃`.
    pub fn mean(&self, msg: &GaussianMessage) -> Vec<f64> {
        match &self.whitening {
            Whitening::Scales(s) => msg.mean.iter().zip(s).map(|(m, s)| m * s).collect(),
            Whitening::Cholesky(l) => (l * DVector::from_column_slice(&msg.mean))
                .iter()
                .copied()
                .collect(),
        }
    }

    /// The marginal variance of each feature under `msg`, `v·Λ_jj`.
    pub fn variances(&self, msg: &GaussianMessage) -> Vec<f64> {
        match &self.whitening {
            Whitening::Scales(s) => s.iter().map(|s| msg.var * s * s).collect(),
            Whitening::Cholesky(l) => l
                .row_iter()
                .map(|row| msg.var * row.norm_squared())
                .collect(),
        }
    }

    /// `ln N(μ; 0, vΛ)` for a whitened `μ` with `‖μ‖² = sq_dist`: the log density of a
    /// difference of means at variance factor `v` (eq 11). A point mass (`v = 0`) gives
    /// `+∞` at distance 0 and `−∞` elsewhere.
    fn log_normal(&self, sq_dist: f64, v: f64) -> f64 {
        if v == 0.0 {
            return if sq_dist == 0.0 {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            };
        }
        let d = self.n_features() as f64;
        -0.5 * (d * (LN_2PI + v.ln()) + self.log_det + sq_dist / v)
    }

    /// The uninformative message (`v = ∞`).
    fn flat(&self) -> GaussianMessage {
        GaussianMessage {
            mean: vec![0.0; self.n_features()],
            var: f64::INFINITY,
        }
    }
}

fn check_dims(d: usize) -> Result<()> {
    if d == 0 {
        return Err(RoseTreeError::param("n_features", "must be at least 1"));
    }
    Ok(())
}

fn sq_dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// [`sq_dist`] summed in four lanes, so that it vectorises: the same sum up to rounding (a
/// relative `d · 2⁻⁵²` of non-negative terms), for bounds only.
#[inline]
fn sq_dist_lanes(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0_f64; 4];
    let (ac, bc) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ac
        .remainder()
        .iter()
        .zip(bc.remainder())
        .map(|(x, y)| (x - y) * (x - y))
        .sum();
    for (x, y) in ac.zip(bc) {
        for k in 0..4 {
            acc[k] += (x[k] - y[k]) * (x[k] - y[k]);
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

impl MessageModel for BrownianDiffusion {
    type Message = GaussianMessage;
    type Pair = GaussianPair;

    fn n_features(&self) -> usize {
        match &self.whitening {
            Whitening::Scales(s) => s.len(),
            Whitening::Cholesky(l) => l.nrows(),
        }
    }

    /// `N(y; x̃, ηΛ)` at the whitened row, `v = η` (a point mass without noise), with
    /// `ln Z = 0`: with a flat or Gaussian root, `p(x | π)` is a density in `x` and the leaf
    /// contributes no factor.
    fn leaf_message(
        &self,
        row: ArrayView1<'_, f64>,
        index: usize,
    ) -> Result<(GaussianMessage, f64)> {
        let d = self.n_features();
        check_row(row, d, index)?;
        if let Some(c) = row.iter().position(|v| !v.is_finite()) {
            let reason = if row[c].is_nan() {
                "missing values (NaN) are not supported by Brownian diffusion".to_string()
            } else {
                format!("value {} is not finite", row[c])
            };
            return Err(RoseTreeError::data(index, Some(c), reason));
        }
        let mean = match &self.whitening {
            Whitening::Scales(s) => row.iter().zip(s).map(|(x, s)| x / s).collect(),
            Whitening::Cholesky(l) => {
                let x = DVector::from_iterator(d, row.iter().copied());
                l.solve_lower_triangular(&x)
                    .ok_or_else(|| RoseTreeError::Numerical("singular Cholesky factor".into()))?
                    .iter()
                    .copied()
                    .collect()
            }
        };
        Ok((
            GaussianMessage {
                mean,
                var: self.noise,
            },
            0.0,
        ))
    }

    /// `v ↦ v + duration`: the branch adds `duration·Λ` to the covariance.
    fn propagate(&self, msg: &GaussianMessage, duration: f64) -> GaussianMessage {
        GaussianMessage {
            mean: msg.mean.clone(),
            var: msg.var + duration,
        }
    }

    /// The product `Π_b N(y; μ_b, v_bΛ) = Z · N(y; μ̂, v̂Λ)` with `1/v̂ = Σ 1/v_b`,
    /// `μ̂ = v̂ Σ μ_b / v_b` (eq 13) and, for `k` messages in `D` dimensions,
    /// `ln Z = −(k−1)(D ln 2π + ln|Λ|)/2 − D(Σ ln v_b + ln Σ 1/v_b)/2 − Σ ‖μ_b − μ̂‖²_Λ / (2v_b)`.
    /// For two messages this is eq 11, `ln N(μ_l; μ_r, (v_l + v_r)Λ)`, which is how it is
    /// computed then. Uninformative messages (`v = ∞`) drop out. A point mass (`v = 0`)
    /// fixes the product at its location: `ln Z` is the sum of the other messages' log
    /// densities there; two point masses give `+∞` if they coincide and `−∞` if not
    /// (a disagreement anywhere wins).
    fn combine(&self, msgs: &[GaussianMessage]) -> (GaussianMessage, f64) {
        let finite: Vec<&GaussianMessage> = msgs.iter().filter(|m| m.var.is_finite()).collect();
        match finite.as_slice() {
            [] => return (self.flat(), 0.0),
            [one] => return ((*one).clone(), 0.0),
            _ => {}
        }
        if let Some(p) = finite.iter().position(|m| m.var == 0.0) {
            let at = &finite[p].mean;
            let (mut log_z, mut agree, mut disagree) = (0.0, false, false);
            for (j, m) in finite.iter().enumerate() {
                if j == p {
                    continue;
                }
                if m.var == 0.0 {
                    if m.mean == *at {
                        agree = true;
                    } else {
                        disagree = true;
                    }
                } else {
                    log_z += self.log_normal(sq_dist(at, &m.mean), m.var);
                }
            }
            if disagree {
                log_z = f64::NEG_INFINITY;
            } else if agree {
                log_z = f64::INFINITY;
            }
            return (
                GaussianMessage {
                    mean: at.clone(),
                    var: 0.0,
                },
                log_z,
            );
        }
        if let [l, r] = finite.as_slice() {
            let total = l.var + r.var;
            let mean = l
                .mean
                .iter()
                .zip(&r.mean)
                .map(|(a, b)| (a * r.var + b * l.var) / total)
                .collect();
            let msg = GaussianMessage {
                mean,
                var: l.var * r.var / total,
            };
            return (msg, self.log_normal(sq_dist(&l.mean, &r.mean), total));
        }
        let precision: f64 = finite.iter().map(|m| 1.0 / m.var).sum();
        let var = 1.0 / precision;
        let mut mean = vec![0.0; self.n_features()];
        for m in &finite {
            for (acc, x) in mean.iter_mut().zip(&m.mean) {
                *acc += x / m.var;
            }
        }
        mean.iter_mut().for_each(|x| *x *= var);
        let k = finite.len() as f64;
        let d = self.n_features() as f64;
        let spread: f64 = finite.iter().map(|m| sq_dist(&m.mean, &mean) / m.var).sum();
        let log_vars: f64 = finite.iter().map(|m| m.var.ln()).sum();
        let log_z = -0.5
            * ((k - 1.0) * (d * LN_2PI + self.log_det) + d * (log_vars + precision.ln()) + spread);
        (GaussianMessage { mean, var }, log_z)
    }

    /// Flat root: `0`. Gaussian root `N(0, s0Λ)`: `ln ∫ N(y; 0, s0Λ) N(y; μ, vΛ) dy =
    /// ln N(μ; 0, (s0 + v)Λ)`; `0` for the uninformative message.
    /// The uninformative message for the flat root, `N(0, s0Λ)` for a Gaussian root.
    fn root_message(&self) -> GaussianMessage {
        match self.root {
            Root::Flat => self.flat(),
            Root::Gaussian { s0 } => GaussianMessage {
                mean: vec![0.0; self.n_features()],
                var: s0,
            },
        }
    }

    /// Five inner products per call, then `O(1)` per time ([`BranchJoin`]): the posterior
    /// mean on the branch is `μ_u + w(μ_o − μ_u)` with `w = v_a / (v_a + v_b)` (`v_a`, `v_b`
    /// the variance factors of the messages from below and above at `t`), and the squared
    /// distance of the leaf from it a quadratic in `w`, expanded about the nearer end.
    /// Point masses and uninformative messages go the general way.
    fn branch_join_log_z(
        &self,
        up: &GaussianMessage,
        out: &GaussianMessage,
        top: f64,
        bottom: f64,
        leaf: &GaussianMessage,
        times: &[f64],
        log_z: &mut [f64],
    ) {
        let general = |t: f64| super::branch_join_at(self, up, out, (top, bottom), leaf, t);
        let join = BranchJoin::new(&up.mean, &out.mean, &leaf.mean);
        for (&t, z) in times.iter().zip(log_z) {
            let (va, vb, vl) = (up.var + (bottom - t), out.var + (t - top), leaf.var - t);
            if !(va > 0.0 && vb > 0.0 && vl > 0.0 && (va + vb + vl).is_finite()) {
                *z = general(t);
                continue;
            }
            let at = join.at(va, vb);
            *z = self.log_normal(at.sq_dist, at.var + vl);
        }
    }

    fn root_log_z(&self, msg: &GaussianMessage) -> f64 {
        match self.root {
            Root::Flat => 0.0,
            Root::Gaussian { .. } if msg.var.is_infinite() => 0.0,
            Root::Gaussian { s0 } => {
                let sq: f64 = msg.mean.iter().map(|m| m * m).sum();
                self.log_normal(sq, s0 + msg.var)
            }
        }
    }

    fn pair(&self, left: &GaussianMessage, right: &GaussianMessage) -> GaussianPair {
        GaussianPair {
            sq_dist: sq_dist(&left.mean, &right.mean),
            var: left.var + right.var,
        }
    }

    /// Eq 11: `ln N(μ_l − μ_r; 0, (v_l + v_r + length)Λ)`; `0` if either message is
    /// uninformative.
    fn pair_log_z(&self, pair: &GaussianPair, length: f64) -> f64 {
        let v = pair.var + length;
        if v.is_infinite() {
            return 0.0;
        }
        self.log_normal(pair.sq_dist, v)
    }

    /// Eq 12 with the coalescent rate replaced by `rate`. With `S = ‖μ_l − μ_r‖²_Λ` and
    /// `w = v_l + v_r + base_length`, the objective `−rate·δ + ln N(·; 0, (w + 2δ)Λ)` has
    /// derivative `−rate + (S − D·v̂)/v̂²` in `δ`, with `v̂ = w + 2δ`; its one positive root
    /// is `v̂* = (√(D² + 4·rate·S) − D) / (2·rate) = 2S / (√(D² + 4·rate·S) + D)` (the second
    /// form has no cancellation), so `δ* = max(0, (v̂* − w)/2)`.
    fn optimal_duration(&self, pair: &GaussianPair, base_length: f64, rate: f64) -> Result<f64> {
        Ok(self.unbounded_duration(pair, base_length, rate)?.max(0.0))
    }

    /// `(v̂* − w)/2` of [`optimal_duration`](MessageModel::optimal_duration), not clamped:
    /// the stationary point is the objective's only one on `v̂ > 0`, so it is its maximum
    /// over every `δ > −w/2`; 0 where a message is uninformative (`w` infinite).
    fn unbounded_duration(&self, pair: &GaussianPair, base_length: f64, rate: f64) -> Result<f64> {
        check_duration_args(base_length, rate)?;
        let w = pair.var + base_length;
        if w.is_infinite() {
            return Ok(0.0);
        }
        let d = self.n_features() as f64;
        let s = pair.sq_dist;
        Ok(half_stationary_variance(s, d, rate) - 0.5 * w)
    }

    /// `v̂*` grows with `S` and solves `rate·v̂² + D·v̂ = S`, so `δ* > h` exactly when
    /// `v̂* > V = 2h + w`, that is when `S > rate·V² + D·V`; this tests a lower bound on `S`
    /// (summed in four lanes, less a relative `10⁻¹²`) against that bound raised by a
    /// relative `10⁻⁹`, which leaves `δ*` above `h` by at least `2·10⁻¹⁰ V`, far beyond the
    /// rounding of either computation. No square root, no division.
    #[inline]
    fn duration_exceeds(
        &self,
        left: &GaussianMessage,
        right: &GaussianMessage,
        base_length: f64,
        rate: f64,
        h: f64,
    ) -> bool {
        let w = left.var + right.var + base_length;
        if !(w.is_finite() && h >= 0.0 && rate.is_finite() && rate > 0.0) {
            return false;
        }
        let d = self.n_features() as f64;
        let v = 2.0 * h + w;
        let s = sq_dist_lanes(&left.mean, &right.mean) * (1.0 - 1e-12);
        s > (rate * v * v + d * v) * (1.0 + 1e-9)
    }
}

/// Half the stationary variance `v̂*` of eq 12 with `D` features at rate `rate`: the
/// positive root of `rate·v̂² + D·v̂ = S`, halved, as `S / (√(D² + 4·rate·S) + D)` (no
/// cancellation). Brownian diffusion's and the masked model's one-group durations share it.
#[inline]
pub(super) fn half_stationary_variance(s: f64, d: f64, rate: f64) -> f64 {
    s / ((d * d + 4.0 * rate * s).sqrt() + d)
}

#[cfg(test)]
pub(super) mod tests;

impl super::MessageCodec for BrownianDiffusion {
    fn encode_message(&self, msg: &GaussianMessage) -> Vec<f64> {
        let mut out = msg.mean.clone();
        out.push(msg.var);
        out
    }

    fn decode_message(&self, values: &[f64]) -> Result<GaussianMessage> {
        let d = self.n_features();
        super::check_message_len(values, d + 1)?;
        let var = values[d];
        if values[..d].iter().any(|v| !v.is_finite()) || var.is_nan() || var < 0.0 {
            return Err(RoseTreeError::param(
                "message",
                "needs a finite mean and a variance factor >= 0",
            ));
        }
        Ok(GaussianMessage {
            mean: values[..d].to_vec(),
            var,
        })
    }
}
