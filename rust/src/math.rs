//! Log-space arithmetic and special functions.
//!
//! `ln_gamma` comes from the `libm` crate (a port of musl's `lgamma`, accurate to a few ulp),
//! `digamma` from `statrs`; the helpers here only combine them.

/// `ln Γ(x)` for `x > 0`.
#[inline]
pub fn ln_gamma(x: f64) -> f64 {
    libm::lgamma_r(x).0
}

/// `ψ(x) = d ln Γ(x) / dx` for `x > 0`.
#[inline]
pub fn digamma(x: f64) -> f64 {
    statrs::function::gamma::digamma(x)
}

/// `ψ_d(a) = d ln Γ_d(a) / da = Σ_{j=1}^{d} ψ(a + (1 − j)/2)`.
pub fn multidigamma(a: f64, d: usize) -> f64 {
    (1..=d).map(|j| digamma(a + (1.0 - j as f64) / 2.0)).sum()
}

/// `ln B(a, b) = ln Γ(a) + ln Γ(b) − ln Γ(a + b)`.
#[inline]
pub fn ln_beta(a: f64, b: f64) -> f64 {
    ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b)
}

/// The log of the multivariate gamma function,
/// `ln Γ_d(a) = d(d−1)/4 · ln π + Σ_{j=1}^{d} ln Γ(a + (1 − j)/2)`.
pub fn ln_multigamma(a: f64, d: usize) -> f64 {
    let df = d as f64;
    let mut s = df * (df - 1.0) / 4.0 * std::f64::consts::PI.ln();
    for j in 1..=d {
        s += ln_gamma(a + (1.0 - j as f64) / 2.0);
    }
    s
}

/// `ln(eᵃ + eᵇ)` without overflow; `-∞` is the identity.
#[inline]
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    // Past a gap of 40 the correction ln(1 + e^{lo−hi}) < 4.3e-18 is below half an ulp of any
    // |hi| ≥ 0.04, so skipping the exp and log changes nothing there (and at most 4.3e-18
    // absolute below). Most candidate merges in the greedy search are this lopsided.
    if hi - lo > 40.0 || lo == f64::NEG_INFINITY {
        return hi;
    }
    hi + (lo - hi).exp().ln_1p()
}

/// `ln Σ exp(xᵢ)`; `-∞` for an empty slice.
pub fn log_sum_exp(xs: &[f64]) -> f64 {
    let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY || m.is_nan() {
        return m;
    }
    m + xs.iter().map(|&x| (x - m).exp()).sum::<f64>().ln()
}

/// `ln(1 − eˣ)` for `x ≤ 0`, accurate near both ends (Mächler 2012).
#[inline]
pub fn log1m_exp(x: f64) -> f64 {
    if x > -std::f64::consts::LN_2 {
        (-x.exp_m1()).ln()
    } else {
        (-x.exp()).ln_1p()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_matches_factorials() {
        let mut fact = 1.0_f64;
        for n in 1..20 {
            assert!((ln_gamma(n as f64 + 1.0) - (fact * n as f64).ln()).abs() < 1e-12);
            fact *= n as f64;
        }
        // Γ(1/2) = √π
        assert!((ln_gamma(0.5) - 0.5 * std::f64::consts::PI.ln()).abs() < 1e-14);
    }

    #[test]
    fn multigamma_reduces_to_gamma_and_recursion() {
        assert!((ln_multigamma(3.7, 1) - ln_gamma(3.7)).abs() < 1e-14);
        // Γ_d(a) = π^{(d−1)/2} Γ(a) Γ_{d−1}(a − 1/2)
        let (a, d) = (4.3, 4);
        let rhs = (d as f64 - 1.0) / 2.0 * std::f64::consts::PI.ln()
            + ln_gamma(a)
            + ln_multigamma(a - 0.5, d - 1);
        assert!((ln_multigamma(a, d) - rhs).abs() < 1e-12);
    }

    #[test]
    fn digamma_is_the_derivative_of_ln_gamma() {
        for &x in &[0.3, 1.0, 2.5, 17.0] {
            let h = 1e-5;
            let fd = (ln_gamma(x + h) - ln_gamma(x - h)) / (2.0 * h);
            assert!((digamma(x) - fd).abs() < 1e-8, "x = {x}");
            let fd = (ln_multigamma(x + 3.0 + h, 3) - ln_multigamma(x + 3.0 - h, 3)) / (2.0 * h);
            assert!((multidigamma(x + 3.0, 3) - fd).abs() < 1e-8, "x = {x}");
        }
        // ψ(1) = −γ (Euler–Mascheroni)
        assert!((digamma(1.0) + 0.577_215_664_901_532_9).abs() < 1e-13);
    }

    #[test]
    fn log_add_exp_is_stable() {
        assert!((log_add_exp(1000.0, 1000.0) - (1000.0 + 2f64.ln())).abs() < 1e-12);
        assert_eq!(log_add_exp(f64::NEG_INFINITY, -3.0), -3.0);
        assert!((log_sum_exp(&[0.0, 0.0, 0.0]) - 3f64.ln()).abs() < 1e-15);
        // The shortcut for lopsided pairs agrees with the full formula to rounding.
        for (a, b) in [
            (-1000.0, -1040.5),
            (-0.05, -40.1),
            (3.0, -60.0),
            (-2.0, -41.0),
        ] {
            let full = f64::max(a, b) + (f64::min(a, b) - f64::max(a, b)).exp().ln_1p();
            assert!((log_add_exp(a, b) - full).abs() <= 5e-18 + f64::EPSILON * full.abs());
        }
        assert_eq!(log_sum_exp(&[]), f64::NEG_INFINITY);
    }

    #[test]
    fn log1m_exp_matches_direct_formula() {
        // Where 1 − eˣ is not close to 0 or 1 the direct formula is accurate.
        for &x in &[-0.1, -0.69, -0.7, -2.0, -5.0] {
            let direct = (1.0 - f64::exp(x)).ln();
            assert!((log1m_exp(x) - direct).abs() <= 1e-14 * direct.abs().max(1.0));
        }
        // Near 0: 1 − eˣ ≈ −x, so ln(1 − eˣ) ≈ ln(−x) + x/2.
        let x = -1e-10_f64;
        assert!((log1m_exp(x) - ((-x).ln() + x / 2.0)).abs() < 1e-15);
        // Far out: ln(1 − eˣ) ≈ −eˣ.
        assert!((log1m_exp(-40.0) + f64::exp(-40.0)).abs() < 1e-30);
    }
}
