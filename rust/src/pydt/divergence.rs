//! The divergence function `a(t) = c/(1 − t)` and the Pitman–Yor weights of the diffusion
//! tree: the rate factor `w_m`, the harmonic-like sums `H_n` and `J`, and the structure factor
//! of one branch point (Knowles & Ghahramani, eqs 1–3, 7 with the erratum of
//! `CONVENTIONS.md`, 8–9, 12). The [module docs of `pydt`](super) derive them.

use crate::error::{Result, RoseTreeError};
use crate::math::ln_gamma_ratio;

/// The hyperparameters of a Pitman–Yor diffusion tree with divergence function
/// `a(t) = c/(1 − t)`: the concentration `α`, the discount `β` and the smoothness `c`,
/// checked once on construction (`0 ≤ β < 1`, `α ≥ −2β`, `c > 0`, all finite).
///
/// `α = β = 0` is Neal's Dirichlet diffusion tree ([`PydtParams::ddt`]).
///
/// # Examples
/// ```
/// use rosetree::math::ln_gamma;
/// use rosetree::pydt::PydtParams;
///
/// let p = PydtParams::new(0.5, 0.2, 1.0)?;
/// // w_1 = Γ(1 − β)/Γ(2 + α): the rate factor of a branch followed by one point.
/// let w1 = (ln_gamma(0.8) - ln_gamma(2.5)).exp();
/// assert!((p.ln_rate_factor(1).exp() - w1).abs() < 1e-15);
/// assert!(PydtParams::new(-0.5, 0.2, 1.0).is_err()); // α < −2β
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PydtParams {
    alpha: f64,
    beta: f64,
    c: f64,
}

impl PydtParams {
    /// Checks and wraps `(α, β, c)`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] naming `beta` unless `0 ≤ β < 1`, `alpha` unless
    /// it is finite and `α ≥ −2β`, `c` unless it is finite and `> 0`.
    pub fn new(alpha: f64, beta: f64, c: f64) -> Result<Self> {
        if !(beta.is_finite() && (0.0..1.0).contains(&beta)) {
            return Err(RoseTreeError::param(
                "beta",
                format!("must satisfy 0 ≤ beta < 1, got {beta}"),
            ));
        }
        if !(alpha.is_finite() && alpha >= -2.0 * beta) {
            return Err(RoseTreeError::param(
                "alpha",
                format!(
                    "must be finite and ≥ −2·beta = {}, got {alpha}",
                    -2.0 * beta
                ),
            ));
        }
        if !(c.is_finite() && c > 0.0) {
            return Err(RoseTreeError::param(
                "c",
                format!("must be finite and > 0, got {c}"),
            ));
        }
        Ok(Self { alpha, beta, c })
    }

    /// Neal's Dirichlet diffusion tree, `α = β = 0`, with smoothness `c`.
    ///
    /// # Errors
    /// As [`new`](Self::new) for `c`.
    pub fn ddt(c: f64) -> Result<Self> {
        Self::new(0.0, 0.0, c)
    }

    /// The concentration `α`.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The discount `β`.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// The smoothness `c` of `a(t) = c/(1 − t)`.
    pub fn c(&self) -> f64 {
        self.c
    }

    /// `ln w_m = ln Γ(m − β) − ln Γ(m + 1 + α)` for `m ≥ 1`: a point on a branch that `m`
    /// earlier points followed diverges in `[t, t + dt]` with probability `a(t) w_m dt`
    /// (eq 1).
    ///
    /// Evaluated as `−ln[Γ(x + s)/Γ(x)]` with `x = m − β`, `s = 1 + α + β > 0` by
    /// [`ln_gamma_ratio`], which keeps its digits where `ln Γ(m + 1 + α) − ln Γ(m − β)` would
    /// cancel (large `m`).
    ///
    /// # Panics
    /// If `m = 0` (no branch is followed by no point).
    pub fn ln_rate_factor(&self, m: usize) -> f64 {
        assert!(m >= 1, "the rate factor w_m needs m ≥ 1");
        -ln_gamma_ratio(m as f64 - self.beta, 1.0 + self.alpha + self.beta)
    }

    /// `H_0, H_1, …, H_n` with `H_k = Σ_{i=1}^{k} w_i` (eq 8; `H_0 = 0`).
    ///
    /// A sum of positive terms, each `exp` of [`ln_rate_factor`](Self::ln_rate_factor),
    /// accumulated in order: no cancellation anywhere. (The closed form
    /// `H_k = [Γ(1−β)/Γ(1+α) − Γ(k+1−β)/Γ(k+1+α)]/(α + β)`, from the telescoping
    /// `(α + β) w_i = g_i − g_{i+1}` with `g_i = Γ(i−β)/Γ(i+α)`, loses every digit as
    /// `α + β → 0`; it serves the tests as a check.)
    pub fn harmonic(&self, n: usize) -> Vec<f64> {
        let mut h = Vec::with_capacity(n + 1);
        let mut acc = 0.0;
        h.push(acc);
        for i in 1..=n {
            acc += self.ln_rate_factor(i).exp();
            h.push(acc);
        }
        h
    }

    /// `ln` of the structure factor of one branch point whose `K = counts.len() ≥ 2`
    /// branches lead to `n_1, …, n_K ≥ 1` leaves, `m = Σ n_l` (eq 7 with the erratum):
    ///
    /// ```text
    /// Π_{k=3}^{K} [α + (k−1)β] · Π_l Γ(n_l − β) / ( Γ(m + α) · Γ(1 − β)^{K−1} ).
    /// ```
    ///
    /// `−∞` when a factor `α + (k−1)β` is zero (`α = −2β` with `K ≥ 3`: the process never
    /// makes a third branch). Evaluated with the largest branch `n_1` as
    /// `Σ_k ln[α + (k−1)β] + Σ_{l≥2} ln[Γ(n_l − β)/Γ(1 − β)] − ln[Γ(m + α)/Γ(n_1 − β)]`,
    /// every ratio by [`ln_gamma_ratio`] (no difference of large `ln Γ` values).
    ///
    /// The divergence density `a(t)` of the branch point is not included.
    ///
    /// # Panics
    /// Unless there are at least two counts and each is at least 1.
    pub fn ln_structure(&self, counts: &[usize]) -> f64 {
        assert!(
            counts.len() >= 2 && counts.iter().all(|&n| n >= 1),
            "a branch point has at least two branches, each with at least one leaf"
        );
        let (alpha, beta) = (self.alpha, self.beta);
        let m: usize = counts.iter().sum();
        let big = counts
            .iter()
            .enumerate()
            .max_by_key(|&(_, &n)| n)
            .map_or(0, |(l, _)| l);
        let mut s = 0.0;
        for k in 3..=counts.len() {
            // α + (k−1)β ≥ α + 2β ≥ 0; ln 0 = −∞ is the right answer.
            s += (alpha + (k - 1) as f64 * beta).max(0.0).ln();
        }
        for (l, &n) in counts.iter().enumerate() {
            if l != big {
                s += ln_gamma_ratio(1.0 - beta, (n - 1) as f64);
            }
        }
        let n1 = counts[big];
        // (n₁ − β) + (m − n₁ + α + β) = m + α, and m − n₁ + α + β ≥ 1 + α + β > 0.
        s - ln_gamma_ratio(n1 as f64 - beta, (m - n1) as f64 + alpha + beta)
    }
}

/// `J = H_{m−1} − Σ_l H_{n_l − 1}` of a branch point with branches of `counts` leaves
/// (eq 12), from a table `h` of [`PydtParams::harmonic`] reaching `m − 1`. Its absolute
/// error is a few ulp of `H_{m−1}`; `J` may be negative (a branch point above large
/// subtrees), and only `c·J·ln(1 − t)` enters the density.
///
/// # Panics
/// If a count is 0 or `h` does not reach `m − 1`.
pub fn harmonic_gap(h: &[f64], counts: &[usize]) -> f64 {
    let m: usize = counts.iter().sum();
    assert!(
        counts.iter().all(|&n| n >= 1) && m <= h.len(),
        "counts must be ≥ 1 and the table must reach H_(m−1)"
    );
    h[m - 1] - counts.iter().map(|&n| h[n - 1]).sum::<f64>()
}
