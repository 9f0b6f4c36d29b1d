//! Agglomerative sequential Monte Carlo for Kingman's coalescent (Teh, Daumé & Roy 2007,
//! §4.1): SMC-PriorPrior, SMC-PriorPost and SMC-PostPost.
//!
//! # The target
//! A tree `π` is built bottom-up as `n − 1` coalescent events. Before event `i` there are
//! `m = n − i + 1` lineages; event `i` waits a duration `δ_i` after the previous event (time
//! runs backwards: `t_i = t_{i−1} − δ_i`, `t_0 = 0`) and merges one unordered pair `(l, r)` of
//! the lineages. With `λ_i = C(m, 2)`, eq 7 factorises the joint density into one term per
//! event,
//!
//! ```text
//! p(x, π) = Π_leaves Z_leaf · Z_−∞(x, θ_{n−1}) · Π_i exp(−λ_i δ_i) Z_i(x, θ_i),
//! ```
//!
//! where `exp(−λ_i δ_i) = λ_i e^{−λ_i δ_i} · (1/λ_i)` is the prior density of the waiting time
//! times the uniform choice among the `λ_i` pairs (eq 2), and `Z_i` is the local likelihood of
//! the merge ([`MessageModel::merge_log_z`], eq 4). `p(x)` sums `p(x, π)` over the ranked
//! pair choices and integrates it over the durations.
//!
//! # Particles and weights (eq 8)
//! A particle extends its partial tree `θ_{i−1}` by a proposal `f_i(δ, l, r | θ_{i−1})` and
//! multiplies its weight by `w_i / w_{i−1} = exp(−λ_i δ) Z_i / f_i`. Writing
//! `L_lr(δ) = (t_l − t_{i−1}) + (t_r − t_{i−1}) + 2δ` for the total branch length between the
//! two messages (`t_l`, `t_r` the times the lineages were formed), `Z_i = Z_lr(L_lr(δ))`
//! ([`MessageModel::pair_log_z`]):
//!
//! - **PriorPrior**: `δ ~ Exp(λ_i)` and a uniform pair, `f_i = λ_i e^{−λ_i δ} / λ_i =
//!   e^{−λ_i δ}`; the increment is `Z_lr(L_lr(δ))`.
//! - **PriorPost** (eq 9): `δ ~ Exp(λ_i)`, then the pair with probability
//!   `Z_lr(L_lr(δ)) / Σ_{l′r′} Z_{l′r′}(L_{l′r′}(δ))`; the increment is
//!   `(1/λ_i) Σ_{l′r′} Z_{l′r′}`, the *mean* local likelihood over pairs. Eq 9 prints the
//!   sum; the factor `1/λ_i` is the same for every particle at step `i`, so it changes
//!   neither the normalised weights nor resampling, but without it `p̂(x)` would be
//!   `Π_i λ_i = n!(n−1)!/2^{n−1}` times too large.
//! - **PostPost** (eq 10): `(δ, l, r)` from `∝ e^{−λ_i δ} Z_lr(L_lr(δ))`; the increment is
//!   `Σ_{l′r′} I_{l′r′}` with `I_lr = ∫_0^∞ e^{−λ_i δ} Z_lr(L_lr(δ)) dδ`.
//!
//! After the last merge every particle's weight is multiplied by `Z_−∞` of its root
//! ([`MessageModel::root_log_z`], eq 5), and the leaf normalisers are a constant factor.
//!
//! # The PostPost integral for Brownian diffusion
//! With `S = ‖μ_l − μ_r‖²_Λ`, `w = v_l + v_r + (t_l − t_{i−1}) + (t_r − t_{i−1})` and
//! `u = w + 2δ`, eq 11 is `Z = c · u^{−D/2} e^{−S/(2u)}` with `c = (2π)^{−D/2}|Λ|^{−1/2}`, so
//!
//! ```text
//! I = (c/2) e^{λw/2} ∫_w^∞ u^{−D/2} exp(−λu/2 − S/(2u)) du
//!   = (c/2) ∫_{ln w}^∞ exp(χ(ρ)) dρ,   χ(ρ) = (1 − D/2)ρ − λ(e^ρ − w)/2 − S e^{−ρ}/2,
//! ```
//!
//! the normaliser of a generalised inverse Gaussian GIG(1 − D/2, λ, S) truncated to
//! `u ≥ w` (the paper's remark after eq 10). Without truncation (`w = 0`) it is
//! `2 (S/λ)^{(1−D/2)/2} K_{1−D/2}(√(λS))`; the truncated tail has no closed form, so it is
//! computed numerically in `ρ = ln u`, where `χ″(ρ) = −λe^ρ/2 − S e^{−ρ}/2 < 0`: the
//! integrand is log-concave, with its mode at the positive root `u*` of
//! `λu² + (D − 2)u − S = 0` (or at the boundary `ρ = ln w` when `u* ≤ w`).
//!
//! Evaluating a precise integral for each of the `C(m, 2)` pairs at each of the `n − 1`
//! steps would dominate the run time, so the pair is chosen with a Laplace approximation
//! `Î_lr` of each integral (one logarithm and at most one `erfc` per pair; see
//! [`DurationPosterior::approx_log_integral`]) and the importance weight corrects for it
//! exactly: the proposal is `f_i = (Î_lr / Σ Î) · e^{−λδ} Z_lr / I_lr`, with `δ` drawn exactly
//! from the pair's duration posterior, so the increment is `Σ Î · I_lr / Î_lr`, which needs
//! the precise `I_lr` of the chosen pair only. When `Î = I` this is eq 10 itself; otherwise
//! the estimate `p̂(x)` stays unbiased and only the weights' variance grows a little. The
//! precise integral is the trapezoidal rule after the substitution `ρ = ln w + e^s` (which
//! removes the endpoint, so the rule converges exponentially; Trefethen & Weideman 2014),
//! halving the step until two estimates agree to `1e-12`; the duration is drawn by
//! Devroye's (1984) rejection sampler for log-concave densities, which needs only the mode
//! and the normalised density there (at most 4 proposals per draw on average).
//!
//! With missing entries ([`MaskedBrownian`]) the features a pair both observe may have
//! different variance factors `w_j`, and the integrand `e^{−λδ} Π_g Z_g(w_g + 2δ)` is no
//! longer a GIG. The duration is then drawn from the exact posterior of a surrogate pair
//! whose features all have the largest of the `w_g` (a truncated GIG as above, with the
//! same `D` and `S`), and the chosen pair's `I_lr` in the increment is replaced by its
//! one-sample importance estimate `Ĩ_lr · Z_lr(δ)/Z̃_lr(δ)`, whose expectation is `I_lr`:
//! the estimate `p̂(x)` stays unbiased. Each feature's factor of the ratio `Z/Z̃` is at most
//! `√(u_max/u_g)` and tends to 1 as `δ` grows, so the weights stay well behaved;
//! with one group (the same missing pattern on both sides) it is 1 and this is eq 10.
//!
//! For the multinomial mutation model the duration posterior is not log-concave in general
//! (a feature whose two messages agree more than the equilibrium gives a convex factor), and
//! PostPost reports [`RoseTreeError::InvalidParameter`] as unavailable; PriorPrior and
//! PriorPost work for every [`MessageModel`].
//!
//! # Resampling
//! After each step the effective sample size `ESS = (Σ w)² / Σ w²` (the estimate cited by
//! the paper, Neal 1998) is recorded; when it falls below `S/2` the particles are resampled
//! (not after the last step, so the final trees keep their weights). The paper resamples "as
//! in Algorithm 5.1 of Fearnhead (1998)", which we could not consult; the scheme here is
//! systematic resampling (one uniform shared by `S` evenly spaced positions; Carpenter,
//! Clifford & Fearnhead 1999), the low-variance scheme from that line of work.
//!
//! `log p̂(x)` is the product of the mean weights over the stretches between resamplings:
//! at each resampling the mean of the unnormalised weights is folded into a running log
//! sum and the weights restart at one; at the end the mean of the remaining weights is
//! added. This is the standard unbiased SMC estimate of `p(x)` (`E[p̂] = p(x)`; the tests
//! check it against numerical integration).
//!
//! # Cost
//! PriorPrior costs `O(n·S·d)` plus `O(log)` per step; PriorPost and PostPost score every
//! pair at every step, `O(n³·S)` time in all (each score is `O(1)` from cached pair
//! summaries, [`MessageModel::pair`], refreshed in `O(m·d)` per merge) and `O(n²·S)` memory.
//! Görür & Teh (2008) give an `O(n²)`-per-particle SMC for the same model (not built here).
//!
//! # Determinism
//! Particle `s` at step `i` draws from its own Xoshiro256++ stream seeded from a hash of
//! `(seed, i, s)`, and resampling from a stream of `(seed, i)`, so results depend only on the
//! seed, never on the number of threads or their scheduling.

use ndarray::ArrayView2;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::{Result, RoseTreeError};
use crate::math::log_sum_exp;
use crate::models::messages::{
    BrownianDiffusion, GaussianPair, MaskedBrownian, MaskedPair, MessageModel, MultinomialMutation,
    MutationPair,
};
use crate::parallel::Threads;
use crate::progress;
use crate::tree::{Topology, Tree};

const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Terms of a sum or integrand this many nats below its maximum are dropped
/// (`e^{−40} ≈ 4e-18`, below half an ulp of the total).
const NEGLIGIBLE: f64 = 40.0;

/// The proposal distribution of the SMC (Teh et al. §4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proposal {
    /// Duration and pair from the local prior; weight × `Z_i` (eq 8).
    PriorPrior,
    /// Duration from the local prior, pair from the local posterior (eq 9).
    PriorPost,
    /// Duration and pair from the local posterior (eq 10).
    PostPost,
}

/// Settings of one SMC run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmcParams {
    /// The proposal.
    pub proposal: Proposal,
    /// The number of particles `S ≥ 1`.
    pub n_particles: usize,
    /// The seed of every random stream.
    pub seed: u64,
}

impl SmcParams {
    /// `n_particles` particles with `proposal`, seeded by `seed`.
    pub fn new(proposal: Proposal, n_particles: usize, seed: u64) -> Self {
        Self {
            proposal,
            n_particles,
            seed,
        }
    }
}

/// The result of an SMC run: `S` weighted trees and the estimate of `ln p(x)`.
#[derive(Debug, Clone)]
pub struct SmcResult {
    /// The particles' trees, leaves at height 0 and coalescence times `≤ 0`.
    pub trees: Vec<Tree>,
    /// The particles' normalised log weights (`log_sum_exp = 0`): the posterior
    /// `p(π | x) ≈ Σ_s exp(log_weights[s]) δ_{trees[s]}(π)`.
    pub log_weights: Vec<f64>,
    /// The SMC estimate of `ln p(x)` (see the [module docs](self)); `p̂(x)` itself is
    /// unbiased.
    pub log_marginal: f64,
    /// The effective sample size after each of the `n − 1` steps, before any resampling
    /// (`1 ≤ ESS ≤ S`).
    pub ess: Vec<f64>,
    /// Whether the particles were resampled after each step.
    pub resampled: Vec<bool>,
}

/// Message models whose SMC-PostPost duration integral (Teh et al. eq 10) is available.
///
/// For a pair with summary `pair` whose messages lie `base_length` apart at the current
/// time, and a coalescence rate `rate`, the integral is
/// `I = ∫_0^∞ e^{−rate·δ} Z(base_length + 2δ) dδ`.
pub trait DurationPosterior: MessageModel {
    /// `Ok` if the model supports PostPost.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `inference` where it does not.
    fn check_post_post(&self) -> Result<()>;

    /// A cheap approximation of `ln I`, used to choose the pair (any finite value where
    /// `I > 0` keeps the SMC exact; the closer to `ln I`, the smaller the weights' variance).
    ///
    /// # Errors
    /// As [`check_post_post`](Self::check_post_post); [`RoseTreeError::Numerical`] where
    /// the integral diverges.
    fn approx_log_integral(&self, pair: &Self::Pair, base_length: f64, rate: f64) -> Result<f64>;

    /// A draw of `δ` from a proposal density `q(δ)` on `δ ≥ 0`, and the log of the
    /// importance estimate `e^{−rate·δ} Z(base_length + 2δ) / q(δ)` of `I`, whose
    /// expectation under `q` is `I`. Where `q` is the duration posterior
    /// `e^{−rate·δ} Z / I` itself (Brownian diffusion), the estimate is `I` exactly.
    ///
    /// # Errors
    /// As [`approx_log_integral`](Self::approx_log_integral).
    fn sample_duration(
        &self,
        pair: &Self::Pair,
        base_length: f64,
        rate: f64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(f64, f64)>;
}

/// The truncated GIG integrand of the Brownian PostPost integral in `ρ = ln u` (see the
/// [module docs](self)): `χ(ρ) = (1 − D/2)ρ − λ(e^ρ − w)/2 − S e^{−ρ}/2` on `ρ ≥ ln w`.
#[derive(Debug, Clone, Copy)]
struct GigTail {
    /// `1 − D/2`.
    p: f64,
    /// `λ`, the coalescence rate.
    lambda: f64,
    /// `S = ‖μ_l − μ_r‖²_Λ`.
    s: f64,
    /// `w ≥ 0`, the lower end of `u`.
    w: f64,
    /// `ln w` (`−∞` for `w = 0`).
    a: f64,
}

impl GigTail {
    fn new(d: usize, pair: &GaussianPair, base_length: f64, rate: f64) -> Result<Self> {
        let w = pair.var + base_length;
        let p = 1.0 - 0.5 * d as f64;
        if w == 0.0 && pair.sq_dist == 0.0 && p <= 0.0 {
            return Err(RoseTreeError::Numerical(
                "two identical rows would merge at time 0: the SMC-PostPost integral \
                 (eq 10) diverges for D ≥ 2"
                    .into(),
            ));
        }
        Ok(Self {
            p,
            lambda: rate,
            s: pair.sq_dist,
            w,
            a: w.ln(),
        })
    }

    /// `χ(ρ)`; `e^ρ − w` is formed as `w·expm1(ρ − ln w)` so that no cancellation occurs
    /// near the boundary.
    fn chi(&self, rho: f64) -> f64 {
        let excess = if self.w > 0.0 {
            self.w * (rho - self.a).exp_m1()
        } else {
            rho.exp()
        };
        self.p * rho - 0.5 * self.lambda * excess - 0.5 * self.s * (-rho).exp()
    }

    /// `χ′(ρ)` and `−χ″(ρ) > 0`.
    fn slope_curvature(&self, rho: f64) -> (f64, f64) {
        let (u, inv) = (rho.exp(), (-rho).exp());
        (
            self.p - 0.5 * self.lambda * u + 0.5 * self.s * inv,
            0.5 * (self.lambda * u + self.s * inv),
        )
    }

    /// `ln u*`, the unconstrained mode: the positive root of `λu² − 2pu − S = 0`, in the
    /// form without cancellation (`−∞` when `S = 0` and `p ≤ 0`).
    fn log_free_mode(&self) -> f64 {
        let disc = (self.p * self.p + self.lambda * self.s).sqrt();
        if self.p > 0.0 {
            ((self.p + disc) / self.lambda).ln()
        } else {
            (self.s / (disc - self.p)).ln()
        }
    }

    /// The mode of `χ` on `ρ ≥ ln w`.
    fn mode(&self) -> f64 {
        self.log_free_mode().max(self.a)
    }

    /// The Laplace approximation of `ln ∫_{ln w}^∞ e^χ dρ`: a Gaussian at an interior mode
    /// (cut at `ln w`), or `e^{χ(a) − g y − κ y²/2}` on `y ≥ 0` at a boundary mode
    /// (`g = −χ′(a)`, `κ = −χ″(a)`), whose integral is `√(π/(2κ)) erfcx(g/√(2κ))`.
    fn approx_log_integral(&self) -> f64 {
        let free = self.log_free_mode();
        if free > self.a {
            let (_, kappa) = self.slope_curvature(free);
            let mut log_j = self.chi(free) + 0.5 * (std::f64::consts::TAU / kappa).ln();
            let z = (free - self.a) * kappa.sqrt();
            if z < 9.0 {
                // ln Φ(z) = ln(1 − erfc(z/√2)/2).
                log_j += (-0.5 * libm::erfc(z * std::f64::consts::FRAC_1_SQRT_2)).ln_1p();
            }
            log_j
        } else {
            let (slope, kappa) = self.slope_curvature(self.a);
            let z = -slope / (2.0 * kappa).sqrt();
            self.chi(self.a) + 0.5 * (std::f64::consts::PI / (2.0 * kappa)).ln() + ln_erfcx(z)
        }
    }

    /// `ln ∫_{ln w}^∞ e^χ dρ` by the trapezoidal rule in `s` with `ρ = ln w + e^s` (or in
    /// `ρ` itself when `w = 0`), halving the step until two estimates agree to `1e-12`.
    fn log_integral(&self) -> Result<f64> {
        let free = self.log_free_mode();
        let interior = free > self.a;
        let (_, kappa) = self.slope_curvature(self.mode());
        let sigma = kappa.sqrt().recip();
        let (centre, mut h) = if self.w == 0.0 {
            (free, 0.5 * sigma)
        } else if interior {
            let gap = free - self.a;
            (gap.ln(), (0.5 * sigma / gap).min(0.5))
        } else {
            let (slope, _) = self.slope_curvature(self.a);
            (-(kappa.sqrt() - slope).ln(), 0.5)
        };
        let integrand = |s: f64| {
            if self.w == 0.0 {
                self.chi(s)
            } else {
                let e = s.exp();
                self.chi(self.a + e) + s
            }
        };
        let mut previous = trapezoid(&integrand, centre, h)?;
        for _ in 0..20 {
            h *= 0.5;
            let next = trapezoid(&integrand, centre, h)?;
            if (next - previous).abs() <= 1e-12 {
                return Ok(next);
            }
            previous = next;
        }
        Err(RoseTreeError::Numerical(format!(
            "the SMC-PostPost duration integral did not converge (λ = {}, S = {}, w = {})",
            self.lambda, self.s, self.w
        )))
    }

    /// A draw of `ρ` from `e^{χ(ρ)} / J` on `ρ ≥ ln w` (`ln J = log_j`), by Devroye's (1984)
    /// rejection sampler: a log-concave density `f` with mode `m` satisfies
    /// `f(ρ) ≤ f(m) min(1, e^{1 − f(m)|ρ − m|})`, an envelope of total mass 4.
    fn sample(&self, log_j: f64, rng: &mut Xoshiro256PlusPlus) -> Result<f64> {
        let m = self.mode();
        let chi_m = self.chi(m);
        let f_m = (chi_m - log_j).exp();
        for _ in 0..100_000 {
            let (y, log_env) = if rng.random::<f64>() < 0.5 {
                (2.0 * rng.random::<f64>() - 1.0, 0.0)
            } else {
                let tail = 1.0 - (1.0 - rng.random::<f64>()).ln();
                let y = if rng.random::<bool>() { tail } else { -tail };
                (y, 1.0 - tail)
            };
            let rho = m + y / f_m;
            if rho < self.a || !rho.is_finite() {
                continue;
            }
            if (1.0 - rng.random::<f64>()).ln() <= self.chi(rho) - chi_m - log_env {
                return Ok(rho);
            }
        }
        Err(RoseTreeError::Numerical(
            "the SMC-PostPost duration sampler rejected every proposal".into(),
        ))
    }

    /// `δ = (e^ρ − w)/2`.
    fn duration(&self, rho: f64) -> f64 {
        if self.w > 0.0 {
            0.5 * self.w * (rho - self.a).exp_m1()
        } else {
            0.5 * rho.exp()
        }
    }
}

/// `ln Σ_k h·e^{g(c + k h)}` over all integers `k`, for a unimodal `g`: walks out from `c`
/// in both directions until the terms are decreasing and [`NEGLIGIBLE`] below the largest.
fn trapezoid(g: &dyn Fn(f64) -> f64, c: f64, h: f64) -> Result<f64> {
    let (mut max, mut sum) = (f64::NEG_INFINITY, 0.0_f64);
    for dir in [1.0, -1.0] {
        let mut prev = f64::INFINITY;
        let mut k = if dir > 0.0 { 0 } else { 1 };
        loop {
            let v = g(c + dir * k as f64 * h);
            if v.is_nan() {
                return Err(RoseTreeError::Numerical(
                    "NaN in the SMC-PostPost duration integrand".into(),
                ));
            }
            if v == f64::NEG_INFINITY {
                break;
            }
            // A running log-sum-exp: `Σ e^{v} = e^{max} · sum`.
            if v > max {
                sum = sum * (max - v).exp() + 1.0;
                max = v;
            } else {
                sum += (v - max).exp();
            }
            if v < max - NEGLIGIBLE && v <= prev {
                break;
            }
            prev = v;
            k += 1;
            if k > 1_000_000 {
                return Err(RoseTreeError::Numerical(
                    "the SMC-PostPost duration integrand does not decay".into(),
                ));
            }
        }
    }
    Ok(max + sum.ln() + h.ln())
}

/// `ln(e^{z²} erfc(z))` for `z ≥ 0` (erfc directly below 5; the asymptotic series
/// `1/(z√π) (1 − 1/(2z²) + 3/(4z⁴) − 15/(8z⁶))` above, relative error below `2e-5`).
fn ln_erfcx(z: f64) -> f64 {
    if z < 5.0 {
        z * z + libm::erfc(z).ln()
    } else {
        let q = 1.0 / (z * z);
        let series = 1.0 - 0.5 * q * (1.0 - 1.5 * q * (1.0 - 2.5 * q));
        series.ln() - z.ln() - 0.5 * std::f64::consts::PI.ln()
    }
}

impl DurationPosterior for BrownianDiffusion {
    fn check_post_post(&self) -> Result<()> {
        Ok(())
    }

    fn approx_log_integral(&self, pair: &GaussianPair, base_length: f64, rate: f64) -> Result<f64> {
        let gig = GigTail::new(self.n_features(), pair, base_length, rate)?;
        Ok(self.log_half_c() + gig.approx_log_integral())
    }

    fn sample_duration(
        &self,
        pair: &GaussianPair,
        base_length: f64,
        rate: f64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(f64, f64)> {
        let gig = GigTail::new(self.n_features(), pair, base_length, rate)?;
        let log_j = gig.log_integral()?;
        let rho = gig.sample(log_j, rng)?;
        Ok((gig.duration(rho), self.log_half_c() + log_j))
    }
}

impl BrownianDiffusion {
    /// `ln(c/2)` with `c = (2π)^{−D/2}|Λ|^{−1/2}`.
    fn log_half_c(&self) -> f64 {
        log_half_c(self.n_features() as f64, self.log_det())
    }

    /// `ln I`, the PostPost duration integral (see [`DurationPosterior`]), computed to
    /// about 12 digits.
    ///
    /// # Errors
    /// [`RoseTreeError::Numerical`] where the integral diverges or does not converge.
    pub fn log_integral(&self, pair: &GaussianPair, base_length: f64, rate: f64) -> Result<f64> {
        let gig = GigTail::new(self.n_features(), pair, base_length, rate)?;
        Ok(self.log_half_c() + gig.log_integral()?)
    }
}

/// `ln(c/2)` with `c = (2π)^{−D/2}|Λ|^{−1/2}`, `ln|Λ| = log_det`.
fn log_half_c(d: f64, log_det: f64) -> f64 {
    -0.5 * (d * LN_2PI + log_det) - std::f64::consts::LN_2
}

/// The surrogate of a [`MaskedPair`] whose duration posterior is a truncated GIG: the
/// features both messages observe pooled into one group with the largest `w` (see the
/// [module docs](self)); `None` when they share no feature.
fn masked_surrogate(pair: &MaskedPair) -> Option<(usize, GaussianPair, f64)> {
    let groups = pair.groups();
    if groups.is_empty() {
        return None;
    }
    let w = groups.iter().map(|g| g.0).fold(f64::NEG_INFINITY, f64::max);
    let d = pair.n_shared();
    let surrogate = GaussianPair {
        sq_dist: groups.iter().map(|g| g.2).sum(),
        var: w,
    };
    Some((d as usize, surrogate, log_half_c(d, pair.log_det())))
}

impl DurationPosterior for MaskedBrownian {
    fn check_post_post(&self) -> Result<()> {
        Ok(())
    }

    fn approx_log_integral(&self, pair: &MaskedPair, base_length: f64, rate: f64) -> Result<f64> {
        let Some((d, surrogate, log_half_c)) = masked_surrogate(pair) else {
            return Ok(-rate.ln());
        };
        let gig = GigTail::new(d, &surrogate, base_length, rate)?;
        Ok(log_half_c + gig.approx_log_integral())
    }

    /// `δ` from the duration posterior of the surrogate pair (exactly, as for
    /// [`BrownianDiffusion`]), weighted by `Ĩ · Z(δ)/Z̃(δ)`; with no shared feature,
    /// `δ ~ Exp(rate)` and `I = 1/rate`.
    fn sample_duration(
        &self,
        pair: &MaskedPair,
        base_length: f64,
        rate: f64,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(f64, f64)> {
        let Some((d, surrogate, log_half_c)) = masked_surrogate(pair) else {
            return Ok((exponential(rng, rate), -rate.ln()));
        };
        let gig = GigTail::new(d, &surrogate, base_length, rate)?;
        let log_j = gig.log_integral()?;
        let delta = gig.duration(gig.sample(log_j, rng)?);
        let length = base_length + 2.0 * delta;
        let u = surrogate.var + length;
        let log_z_surrogate =
            log_half_c + std::f64::consts::LN_2 - 0.5 * (d as f64 * u.ln() + surrogate.sq_dist / u);
        let correction = self.pair_log_z(pair, length) - log_z_surrogate;
        Ok((delta, log_half_c + log_j + correction))
    }
}

fn post_post_unavailable() -> RoseTreeError {
    RoseTreeError::param(
        "inference",
        "smc-postpost is unavailable for the multinomial mutation model: its duration \
         posterior is not log-concave and has no closed-form integral; use smc-priorpost",
    )
}

impl DurationPosterior for MultinomialMutation {
    fn check_post_post(&self) -> Result<()> {
        Err(post_post_unavailable())
    }

    fn approx_log_integral(&self, _: &MutationPair, _: f64, _: f64) -> Result<f64> {
        Err(post_post_unavailable())
    }

    fn sample_duration(
        &self,
        _: &MutationPair,
        _: f64,
        _: f64,
        _: &mut Xoshiro256PlusPlus,
    ) -> Result<(f64, f64)> {
        Err(post_post_unavailable())
    }
}

/// One lineage alive in a particle.
#[derive(Clone)]
struct Lineage<Msg> {
    /// Its node id in the final tree.
    node: usize,
    /// The time it was formed (0 for a leaf).
    time: f64,
    msg: Msg,
}

/// One particle: the lineages alive, the pair summaries between them (for PriorPost and
/// PostPost), the current time and the merges so far.
struct Particle<M: MessageModel> {
    lineages: Vec<Lineage<M::Message>>,
    /// `pairs[tri(i, j)]` for slots `i > j`; empty for PriorPrior.
    pairs: Vec<M::Pair>,
    time: f64,
    /// `(left node, right node, time)` of each merge; merge `k` is node `n + k`.
    merges: Vec<(usize, usize, f64)>,
}

// Not derived: a derive would require `M: Clone`.
impl<M: MessageModel> Clone for Particle<M> {
    fn clone(&self) -> Self {
        Self {
            lineages: self.lineages.clone(),
            pairs: self.pairs.clone(),
            time: self.time,
            merges: self.merges.clone(),
        }
    }
}

/// The index of the slot pair `(i, j)`, `i ≠ j`, in a lower-triangular array.
fn tri(i: usize, j: usize) -> usize {
    let (hi, lo) = if i > j { (i, j) } else { (j, i) };
    hi * (hi - 1) / 2 + lo
}

/// The slot pair `(i, j)`, `i > j`, of triangular index `k`.
fn untri(k: usize) -> (usize, usize) {
    // i = ⌊(1 + √(1 + 8k)) / 2⌋, corrected for rounding.
    let mut i = ((1.0 + (1.0 + 8.0 * k as f64).sqrt()) / 2.0) as usize;
    while i * (i - 1) / 2 > k {
        i -= 1;
    }
    while (i + 1) * i / 2 <= k {
        i += 1;
    }
    (i, k - i * (i - 1) / 2)
}

/// The splitmix64 finaliser, a bijective mix of 64 bits (Steele, Lea & Flood 2014).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The random stream of particle `index` at step `step` (or of resampling, `index = u64::MAX`).
fn stream(seed: u64, step: usize, index: u64) -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(mix(mix(mix(seed) ^ step as u64) ^ index))
}

/// A draw from `Exp(rate)`.
fn exponential(rng: &mut Xoshiro256PlusPlus, rate: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() / rate
}

/// Picks an index with probability `∝ exp(log_p[k])`; `log_sum_exp(log_p)` is `total`.
fn pick(log_p: &[f64], total: f64, rng: &mut Xoshiro256PlusPlus) -> usize {
    let mut u = rng.random::<f64>();
    let mut last = 0;
    for (k, &l) in log_p.iter().enumerate() {
        let p = (l - total).exp();
        if p > 0.0 {
            last = k;
            if u < p {
                return k;
            }
            u -= p;
        }
    }
    last
}

impl<M: DurationPosterior> Particle<M> {
    fn new(model: &M, leaves: &[(M::Message, f64)], with_pairs: bool) -> Self {
        let lineages: Vec<_> = leaves
            .iter()
            .enumerate()
            .map(|(i, (msg, _))| Lineage {
                node: i,
                time: 0.0,
                msg: msg.clone(),
            })
            .collect();
        let mut pairs = Vec::new();
        if with_pairs {
            for i in 1..lineages.len() {
                for j in 0..i {
                    pairs.push(model.pair(&lineages[i].msg, &lineages[j].msg));
                }
            }
        }
        Self {
            lineages,
            pairs,
            time: 0.0,
            merges: Vec::new(),
        }
    }

    /// Performs one coalescent event with the proposal and returns the log weight
    /// increment (see the [module docs](self)).
    fn advance(
        &mut self,
        model: &M,
        proposal: Proposal,
        n: usize,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<f64> {
        let m = self.lineages.len();
        let n_pairs = m * (m - 1) / 2;
        let rate = n_pairs as f64;
        let t = self.time;
        let base = |lin: &[Lineage<M::Message>], i: usize, j: usize, at: f64| {
            (lin[i].time - at) + (lin[j].time - at)
        };
        let (i, j, new_time, mut increment) = match proposal {
            Proposal::PriorPrior => {
                let new_time = t - exponential(rng, rate);
                let (i, j) = untri(rng.random_range(0..n_pairs));
                let (li, lj) = (&self.lineages[i], &self.lineages[j]);
                let log_z =
                    model.merge_log_z(&li.msg, &lj.msg, li.time - new_time, lj.time - new_time);
                (i, j, new_time, log_z)
            }
            Proposal::PriorPost => {
                let new_time = t - exponential(rng, rate);
                let mut log_z = Vec::with_capacity(n_pairs);
                for i in 1..m {
                    for j in 0..i {
                        let length = base(&self.lineages, i, j, new_time);
                        log_z.push(model.pair_log_z(&self.pairs[tri(i, j)], length));
                    }
                }
                let total = log_sum_exp(&log_z);
                let (i, j) = untri(pick(&log_z, total, rng));
                (i, j, new_time, total - rate.ln())
            }
            Proposal::PostPost => {
                let mut approx = Vec::with_capacity(n_pairs);
                for i in 1..m {
                    for j in 0..i {
                        let length = base(&self.lineages, i, j, t);
                        approx.push(model.approx_log_integral(
                            &self.pairs[tri(i, j)],
                            length,
                            rate,
                        )?);
                    }
                }
                let total = log_sum_exp(&approx);
                let k = pick(&approx, total, rng);
                let (i, j) = untri(k);
                let length = base(&self.lineages, i, j, t);
                let (delta, log_i) = model.sample_duration(&self.pairs[k], length, rate, rng)?;
                (i, j, t - delta, total + log_i - approx[k])
            }
        };
        // The merged lineage takes slot j (< i); slot i is refilled from the last slot.
        let (li, lj) = (&self.lineages[i], &self.lineages[j]);
        let (msg, _) = model.combine(&[
            model.propagate(&li.msg, li.time - new_time),
            model.propagate(&lj.msg, lj.time - new_time),
        ]);
        self.merges.push((lj.node, li.node, new_time));
        self.lineages[j] = Lineage {
            node: n + self.merges.len() - 1,
            time: new_time,
            msg,
        };
        self.time = new_time;
        let last = m - 1;
        if !self.pairs.is_empty() {
            if i != last {
                for k in 0..last {
                    if k != i {
                        self.pairs[tri(i, k)] = self.pairs[tri(last, k)].clone();
                    }
                }
            }
            self.pairs.truncate(last * (last - 1) / 2);
        }
        self.lineages.swap_remove(i);
        if !self.pairs.is_empty() {
            let merged = &self.lineages[j].msg;
            for k in 0..self.lineages.len() {
                if k != j {
                    self.pairs[tri(j, k)] = model.pair(merged, &self.lineages[k].msg);
                }
            }
        }
        if self.lineages.len() == 1 {
            increment += model.root_log_z(&self.lineages[0].msg);
        }
        Ok(increment)
    }

    fn tree(&self, n: usize) -> Result<Tree> {
        let internal = self.merges.iter().map(|&(l, r, _)| vec![l, r]).collect();
        let mut heights = vec![0.0; n];
        heights.extend(self.merges.iter().map(|&(_, _, t)| t));
        Tree::new(&Topology::new(n, internal)?, Some(heights))
    }
}

/// `ESS = (Σ w)² / Σ w²` of unnormalised log weights (Neal 1998).
fn effective_sample_size(log_w: &[f64]) -> f64 {
    let max = log_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (s1, s2) = log_w.iter().fold((0.0, 0.0), |(a, b), &l| {
        let w = (l - max).exp();
        (a + w, b + w * w)
    });
    s1 * s1 / s2
}

/// Systematic resampling: the ancestors of `S` evenly spaced positions `(k + U)/S` in the
/// cumulative normalised weights, one uniform `U` for all.
fn systematic(log_w: &[f64], total: f64, rng: &mut Xoshiro256PlusPlus) -> Vec<usize> {
    let s = log_w.len();
    let u = rng.random::<f64>();
    let mut out = Vec::with_capacity(s);
    let (mut cum, mut k) = (0.0, 0);
    for (idx, &l) in log_w.iter().enumerate() {
        cum += (l - total).exp();
        while k < s && (k as f64 + u) / (s as f64) < cum {
            out.push(idx);
            k += 1;
        }
    }
    // Rounding can leave the cumulative sum just below 1: the last positions take the
    // last particle of positive weight.
    let last = log_w
        .iter()
        .rposition(|&l| l > f64::NEG_INFINITY)
        .unwrap_or(s - 1);
    out.resize(s, last);
    out
}

/// Runs agglomerative SMC for Kingman's coalescent on the rows of `x` (Teh et al. §4.1; see
/// the [module docs](self) for the proposals, weights and resampling).
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::coalescent::smc::{self, Proposal, SmcParams};
/// use rosetree::models::messages::BrownianDiffusion;
/// use rosetree::parallel::Threads;
///
/// let x = array![[0.0, 0.1], [0.2, 0.0], [3.0, 3.1], [3.2, 2.9]];
/// let model = BrownianDiffusion::isotropic(1.0, 2)?;
/// let params = SmcParams::new(Proposal::PostPost, 20, 7);
/// let fit = smc::run(&model, x.view(), &params, &Threads::new(Some(1))?, &|| false)?;
/// assert_eq!(fit.trees.len(), 20);
/// assert!(fit.log_marginal.is_finite());
/// assert!(fit.ess.iter().all(|&e| (1.0..=20.0 + 1e-9).contains(&e)));
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `n_particles` for 0 or on `inference` for
/// PostPost with a model that lacks it; [`RoseTreeError::InvalidData`] for no rows or a
/// bad row; [`RoseTreeError::Numerical`] if every particle's weight vanishes or (PostPost)
/// two identical rows make the first merge's integral diverge;
/// [`RoseTreeError::Interrupted`] if `interrupt` returns true (it is polled before every
/// step).
pub fn run<M: DurationPosterior>(
    model: &M,
    x: ArrayView2<'_, f64>,
    params: &SmcParams,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<SmcResult> {
    if x.nrows() == 0 {
        return Err(RoseTreeError::data(
            0,
            None,
            "no rows: SMC needs at least one",
        ));
    }
    let leaves = model.leaf_messages(x)?;
    run_from_leaves(model, &leaves, params, threads, interrupt)
}

/// [`run`] from leaf messages already computed ([`MessageModel::leaf_messages`]).
///
/// # Errors
/// As [`run`].
pub fn run_from_leaves<M: DurationPosterior>(
    model: &M,
    leaves: &[(M::Message, f64)],
    params: &SmcParams,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<SmcResult> {
    let n = leaves.len();
    let s = params.n_particles;
    if s == 0 {
        return Err(RoseTreeError::param("n_particles", "must be at least 1"));
    }
    if n == 0 {
        return Err(RoseTreeError::data(
            0,
            None,
            "no rows: SMC needs at least one",
        ));
    }
    if params.proposal == Proposal::PostPost {
        model.check_post_post()?;
    }
    let with_pairs = params.proposal != Proposal::PriorPrior;
    let first = Particle::<M>::new(model, leaves, with_pairs);
    let mut particles = vec![first; s];
    let mut log_w = vec![0.0; s];
    let mut log_acc: f64 = leaves.iter().map(|(_, z)| z).sum();
    if n == 1 {
        log_acc += model.root_log_z(&leaves[0].0);
    }
    let mut ess = Vec::with_capacity(n.saturating_sub(1));
    let mut resampled = Vec::with_capacity(n.saturating_sub(1));
    let ids: Vec<usize> = (0..s).collect();
    for step in 1..n {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        progress::report("sampling merges", step - 1, n - 1);
        let increments = threads.try_zip_mut(&ids, &mut particles, 2, |&k, p| {
            p.advance(
                model,
                params.proposal,
                n,
                &mut stream(params.seed, step, k as u64),
            )
        })?;
        for (w, inc) in log_w.iter_mut().zip(increments) {
            *w += inc;
        }
        let total = log_sum_exp(&log_w);
        if !total.is_finite() {
            return Err(RoseTreeError::Numerical(format!(
                "the particles' total weight is {total} after step {step}"
            )));
        }
        let e = effective_sample_size(&log_w);
        ess.push(e);
        let resample = step < n - 1 && e < 0.5 * s as f64;
        resampled.push(resample);
        if resample {
            log_acc += total - (s as f64).ln();
            let ancestors = systematic(&log_w, total, &mut stream(params.seed, step, u64::MAX));
            particles = ancestors.iter().map(|&a| particles[a].clone()).collect();
            log_w.iter_mut().for_each(|w| *w = 0.0);
        }
    }
    let total = log_sum_exp(&log_w);
    let trees = particles
        .iter()
        .map(|p| p.tree(n))
        .collect::<Result<Vec<_>>>()?;
    Ok(SmcResult {
        trees,
        log_weights: log_w.iter().map(|w| w - total).collect(),
        log_marginal: log_acc + total - (s as f64).ln(),
        ess,
        resampled,
    })
}

#[cfg(test)]
mod tests;
