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

// ---------------------------------------------------------------------------------------------
// Differences of ln Γ and ψ without cancellation.
//
// The conjugate models need `ln Γ(a + n) − ln Γ(a)` (the log rising factorial) and
// `ψ(a + n) − ψ(a)`. Formed as differences of `ln_gamma` / `digamma` values they lose every
// digit once `ln Γ(a)` is large next to the difference (for `a = 10¹⁵`, `ln Γ(a) ≈ 3·10¹⁶`,
// whose spacing of doubles is 4). No crate we could use provides these differences (`statrs`,
// `special`, `puruspe` and `libm` stop at `ln Γ` and `ψ`; GSL's `lnpoch` needs the C library),
// so they are written out here, from three ingredients that carry no cancellation:
// - for `x ≥ 10`, Stirling's series for `ln Γ` and `ψ`, differenced term by term:
//   `x⁻ʲ − (x+n)⁻ʲ = n/(x(x+n)) · Σ_{i<j} x^{−(j−1−i)} (x+n)^{−i}`, a sum of positive terms;
// - `ln(1 + u) − u` from the atanh series, and `ln(1 + u)` from `ln_1p`;
// - for `x < 10`, direct products and sums, or a shift of `x` by whole steps to `x + m ≥ 10`.
// ---------------------------------------------------------------------------------------------

/// Arguments at or above this use Stirling's series; eight terms of it are then accurate to
/// `2·10⁻¹⁸` absolute.
const STIRLING_MIN: f64 = 10.0;

/// `B₂ₖ / (2k(2k − 1))`, the coefficients of `x^{−(2k−1)}` in
/// `ln Γ(x) − (x − ½) ln x + x − ½ ln 2π` (Abramowitz & Stegun 6.1.40).
const LN_GAMMA_SERIES: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 360.0,
    1.0 / 1260.0,
    -1.0 / 1680.0,
    1.0 / 1188.0,
    -691.0 / 360_360.0,
    1.0 / 156.0,
    -3617.0 / 122_400.0,
];

/// `B₂ₖ / (2k)`, the coefficients of `x^{−2k}` in `ln x − 1/(2x) − ψ(x)` (A&S 6.3.18).
const DIGAMMA_SERIES: [f64; 8] = [
    1.0 / 12.0,
    -1.0 / 120.0,
    1.0 / 252.0,
    -1.0 / 240.0,
    1.0 / 132.0,
    -691.0 / 32760.0,
    1.0 / 12.0,
    -3617.0 / 8160.0,
];

/// `Σ_k coef[k] · P_{2k+first}(s, t)` with `P_j(s, t) = (sʲ − tʲ)/(s − t) = Σ_{i<j} sⁱ t^{j−1−i}`,
/// so that `Σ_k coef[k] (s^{2k+first} − t^{2k+first}) = (s − t) · result` without forming
/// the differences (`first` is 1 for the `ln Γ` series, 2 for the `ψ` series).
fn power_difference_series(s: f64, t: f64, coef: &[f64; 8], first: usize) -> f64 {
    // P₁ = 1 and P_{j+1} = s P_j + tʲ.
    let (mut p, mut tj, mut acc) = (1.0, t, 0.0);
    for j in 1..=(2 * coef.len() + first - 2) {
        if j >= first && (j - first).is_multiple_of(2) {
            acc += coef[(j - first) / 2] * p;
        }
        p = s * p + tj;
        tj *= t;
    }
    acc
}

/// `S(x + n) − S(x)` for `x ≥ 10`, with `S(x) = Σ_k B₂ₖ/(2k(2k−1) x^{2k−1})` the remainder of
/// Stirling's series for `ln Γ`; always `≤ 0`.
fn stirling_remainder_difference(x: f64, n: f64) -> f64 {
    let (t, s) = (1.0 / x, 1.0 / (x + n));
    // s − t = −n/(x(x+n)), formed without overflow for huge x.
    let s_minus_t = -(n / (x + n)) * t;
    s_minus_t * power_difference_series(s, t, &LN_GAMMA_SERIES, 1)
}

/// `S(y) = Σ_k B₂ₖ/(2k(2k−1) y^{2k−1})` for `y ≥ 10`.
fn stirling_remainder(y: f64) -> f64 {
    let (t, t2) = (1.0 / y, 1.0 / (y * y));
    LN_GAMMA_SERIES
        .iter()
        .rev()
        .fold(0.0, |acc, &c| acc * t2 + c)
        * t
}

/// `ln(1 + u) − u` for `0 ≤ u ≤ 1`, accurate to a few ulp also for tiny `u` (where it is
/// `−u²/2`): with `z = u/(2 + u)`, `ln(1 + u) = 2 atanh z`, so
/// `ln(1 + u) − u = −u z + 2 Σ_{k≥1} z^{2k+1}/(2k + 1)`.
fn log1pmx_small(u: f64) -> f64 {
    debug_assert!((0.0..=1.0).contains(&u));
    let z = u / (2.0 + u);
    let z2 = z * z;
    // Σ_{k≥1} z^{2k−2}/(2k + 1) with z² ≤ 1/9: 17 terms reach 10⁻¹⁷.
    let mut series = 0.0;
    for k in (1..=17).rev() {
        series = series * z2 + 1.0 / f64::from(2 * k + 1);
    }
    -u * z + 2.0 * z * z2 * series
}

/// `ln(num/den)` for positive `num`, `den`, given `diff = num − den` exactly or to a few ulp:
/// `ln_1p(diff/den)` when the ratio is near one (where `ln` of a rounded ratio would lose
/// digits), the ratio itself otherwise, and the difference of logarithms when the ratio is out
/// of range.
fn ln_ratio(num: f64, den: f64, diff: f64) -> f64 {
    if diff.abs() <= 0.5 * den {
        return (diff / den).ln_1p();
    }
    let q = num / den;
    if q.is_finite() && q >= f64::MIN_POSITIVE {
        q.ln()
    } else {
        num.ln() - den.ln()
    }
}

/// `ln Γ(x + n) − ln Γ(x) − n ln(x + n)`, the log rising factorial less its leading term, as
/// `(count, rest)` with value `rest − count`: for a count that is large next to `x`, the `−n`
/// of Stirling's formula is kept apart, so that a sum of such pieces over counts that add up
/// (as in a beta or Dirichlet function) cancels it exactly.
fn ln_rising_tail(x: f64, n: f64) -> (f64, f64) {
    if n == 0.0 {
        return (0.0, 0.0);
    }
    if x >= STIRLING_MIN {
        let u = n / x;
        let remainder = stirling_remainder_difference(x, n);
        if u >= 1.0 {
            // ln Γ(x+n) − ln Γ(x) = n ln(x+n) − n + (x − ½) ln(1 + u) + ΔS.
            return (n, (x - 0.5) * u.ln_1p() + remainder);
        }
        // x·(ln(1 + u) − u) − ½ ln(1 + u) + ΔS: every term ≤ 0.
        return (0.0, x * log1pmx_small(u) - 0.5 * u.ln_1p() + remainder);
    }
    if n >= STIRLING_MIN {
        // Stirling at x + n ≥ 10, ln Γ(x) directly (x < 10).
        let y = x + n;
        let rest = (x - 0.5) * y.ln() - x
            + 0.5 * (2.0 * std::f64::consts::PI).ln()
            + stirling_remainder(y)
            - ln_gamma(x);
        return (n, rest);
    }
    (0.0, ln_gamma_ratio_small(x, n) - n * (x + n).ln())
}

/// `ln Γ(x + n) − ln Γ(x)` for `x < 10`, `0 < n < 10`.
fn ln_gamma_ratio_small(x: f64, n: f64) -> f64 {
    if n.fract() == 0.0 {
        // A product of at most nine factors below 19: no overflow, one rounding each.
        let mut p = 1.0;
        let mut j = 0.0;
        while j < n {
            p *= x + j;
            j += 1.0;
        }
        return p.ln();
    }
    // Γ(x + n)/Γ(x) = Γ(y + n)/Γ(y) · Π_{j<m} (x + j)/(x + n + j), y = x + m ≥ 10.
    let m = (STIRLING_MIN - x).ceil();
    let y = x + m;
    let (count, rest) = ln_rising_tail(y, n);
    let mut s = n * (y + n).ln() - count + rest;
    let mut j = 0.0;
    while j < m {
        let den = x + j;
        s -= ln_ratio(den + n, den, n);
        j += 1.0;
    }
    s
}

/// `ln Γ(x + n) − ln Γ(x) = ln(x (x+1) ⋯ (x+n−1))`, the log of the rising factorial
/// (Pochhammer symbol) `(x)ₙ`, for `x > 0` and `n ≥ 0` (whole or fractional).
///
/// Accurate to a few ulp relative wherever the value is not close to zero, for every `x` from
/// the smallest subnormal to `f64::MAX` and every `n`: it never forms `ln Γ(x + n) − ln Γ(x)`
/// where that would cancel. Where the value crosses zero (for example near
/// `x(x + 1) = 1`, or for tiny `x` where `ln Γ(x + n) ≈ −ln x`), the error is instead a few
/// ulp of the terms `ln x`, `ln Γ(x + n)`, which is what rounding `x` itself would cause.
/// Returns `+∞` when the value exceeds `f64::MAX`.
///
/// # Examples
/// ```
/// use rosetree::math::{ln_gamma, ln_gamma_ratio};
///
/// assert!((ln_gamma_ratio(3.5, 2.0) - (3.5f64 * 4.5).ln()).abs() < 1e-15);
/// // ln Γ(10¹⁵ + 3) − ln Γ(10¹⁵) ≈ 3 ln 10¹⁵; the plain difference has no digit left.
/// let a = 1e15;
/// assert!((ln_gamma_ratio(a, 3.0) - 3.0 * a.ln()).abs() < 1e-13);
/// assert!((ln_gamma(a + 3.0) - ln_gamma(a) - 3.0 * a.ln()).abs() > 1.0);
/// ```
pub fn ln_gamma_ratio(x: f64, n: f64) -> f64 {
    if n == 0.0 {
        return 0.0;
    }
    if x >= STIRLING_MIN || n >= STIRLING_MIN {
        let (count, rest) = ln_rising_tail(x, n);
        // n ln(x + n) − n with ln(x + n) ≥ ln 10: no cancellation.
        return n * ((x + n).ln() - if count == 0.0 { 0.0 } else { 1.0 }) + rest;
    }
    ln_gamma_ratio_small(x, n)
}

/// `ψ(x + n) − ψ(x)` for `x > 0`, `n ≥ 0`, to a few ulp relative everywhere (every term
/// summed is positive), where `ψ(x + n) − ψ(x)` from [`digamma`] values loses all digits for
/// large `x` (for `x = 10¹⁵` and `n = 1` the true value is `10⁻¹⁵`). For whole `n` it is
/// `Σ_{j<n} 1/(x + j)`.
///
/// # Examples
/// ```
/// use rosetree::math::digamma_diff;
///
/// assert!((digamma_diff(0.5, 2.0) - (1.0 / 0.5 + 1.0 / 1.5)).abs() < 1e-15);
/// assert!((digamma_diff(1e15, 1.0) / 1e-15 - 1.0).abs() < 1e-14);
/// ```
pub fn digamma_diff(x: f64, n: f64) -> f64 {
    if n == 0.0 {
        return 0.0;
    }
    if x >= STIRLING_MIN {
        // ψ(x) = ln x − 1/(2x) − Σ_k d_k x^{−2k}: the difference is
        // ln(1 + n/x) + n/(x(x+n)) · [½ + Σ_k d_k P_{2k}], all positive.
        let (t, s) = (1.0 / x, 1.0 / (x + n));
        let w = n / (x + n);
        return (n / x).ln_1p() + w * t * (0.5 + power_difference_series(s, t, &DIGAMMA_SERIES, 2));
    }
    if n.fract() == 0.0 && n <= 16.0 {
        let mut acc = 0.0;
        let mut j = n - 1.0;
        while j >= 0.0 {
            acc += 1.0 / (x + j);
            j -= 1.0;
        }
        return acc;
    }
    // ψ(x + n) − ψ(x) = [ψ(y + n) − ψ(y)] + Σ_{j<m} n / ((x + j)(x + j + n)), y = x + m ≥ 10.
    let m = (STIRLING_MIN - x).ceil();
    let mut acc = digamma_diff(x + m, n);
    let mut j = m - 1.0;
    while j >= 0.0 {
        acc += (n / (x + j + n)) / (x + j);
        j -= 1.0;
    }
    acc
}

/// `ln[(x + δ)ₙ / (x)ₙ] = ln Γ(x+δ+n) − ln Γ(x+δ) − ln Γ(x+n) + ln Γ(x)`, the change of the
/// log rising factorial [`ln_gamma_ratio`]`(x, n)` when `x` grows by `δ`; symmetric in `δ`
/// and `n`, and `≥ 0`. For `x, δ > 0`, `n ≥ 0` (or the roles of `δ` and `n` swapped).
///
/// It is the building block of [`ln_beta_ratio`] and of the Dirichlet–multinomial marginal:
/// drawing the categories one after the other, `ln f = −Σ_k ln_rising_shift(α_k, …, c_k)`, a
/// sum of terms of one sign. It is accurate to a few ulp relative: with `p = min(δ, n)` and
/// `q = max(δ, n)`, a whole `p ≤ 32` gives `Σ_{j<p} ln(1 + q/(x + j))`, and otherwise
/// `p ln((x+p+q)/(x+p))` plus a difference of two Stirling tails that is smaller than it.
///
/// # Examples
/// ```
/// use rosetree::math::{ln_gamma_ratio, ln_rising_shift};
///
/// // (4.5)₂ / (3)₂ = (4.5 · 5.5) / (3 · 4)
/// let want = (4.5f64 * 5.5 / 12.0).ln();
/// assert!((ln_rising_shift(3.0, 1.5, 2.0) - want).abs() < 1e-15);
/// assert!((ln_rising_shift(3.0, 2.0, 1.5) - want).abs() < 1e-15);
/// // ≈ δ (ψ(2·10¹⁰) − ψ(10¹⁰)) ≈ δ ln 2, far below the spacing of doubles near
/// // ln_gamma_ratio(10¹⁰, 10¹⁰) ≈ 2.8·10¹¹, so the difference of those would be noise.
/// let tiny = ln_rising_shift(1e10, 1e-3, 1e10);
/// assert!((tiny / (1e-3 * 2f64.ln()) - 1.0).abs() < 1e-9);
/// ```
pub fn ln_rising_shift(x: f64, delta: f64, n: f64) -> f64 {
    let (p, q) = if delta <= n { (delta, n) } else { (n, delta) };
    if p == 0.0 {
        return 0.0;
    }
    if p.fract() == 0.0 && p <= 32.0 {
        // (x + q)_p / (x)_p = Π_{j<p} (x + j + q)/(x + j): terms of one sign.
        let mut acc = 0.0;
        let mut j = 0.0;
        while j < p {
            let y = x + j;
            acc += ln_ratio(y + q, y, q);
            j += 1.0;
        }
        return acc;
    }
    // With ln_gamma_ratio(y, p) = p ln(y + p) + H(y, p) (see `ln_rising_tail`):
    // p ln((x+q+p)/(x+p)) + H(x+q, p) − H(x, p), both parts ≥ 0.
    let (c1, r1) = ln_rising_tail(x + q, p);
    let (c0, r0) = ln_rising_tail(x, p);
    p * ln_ratio(x + p + q, x + p, q) + ((r1 - r0) - (c1 - c0))
}

/// `ln Γ(x + n) − ln Γ(x) − n ln s` for `s = x + r > 0` (`r`, which may be negative down to
/// `−x`, is the part of `s` beyond `x`): the log rising factorial measured against a fixed
/// reference, as tabulated by the beta–Bernoulli model.
pub(crate) fn ln_rising_against(x: f64, n: f64, r: f64) -> f64 {
    if n == 0.0 {
        return 0.0;
    }
    let (count, rest) = ln_rising_tail(x, n);
    let y = x + n;
    // n ln((x + n)/s), with (x + n) − s = n − r.
    rest - count + n * ln_ratio(y, x + r, n - r)
}

/// `ln B(a + k, b + m) − ln B(a, b)`, the log of `E[θᵏ (1 − θ)ᵐ]` under `θ ~ Beta(a, b)`: the
/// beta–Bernoulli marginal likelihood of `k` ones and `m` zeros (BRT eq 1.19), for `a, b > 0`,
/// `k, m ≥ 0` and `a + b + k + m` finite.
///
/// It is `ln Γ(a+k) − ln Γ(a) + ln Γ(b+m) − ln Γ(b) − ln Γ(a+b+k+m) + ln Γ(a+b)`, evaluated
/// as the log probability of drawing the `k` ones and then the `m` zeros,
/// `−ln[(a+b)ₖ/(a)ₖ] − ln[(a+b+k)ₘ/(b)ₘ]`: two terms of one sign, each from
/// [`ln_rising_shift`], so it keeps its digits at every scale of `a` and `b`: for
/// `a = b = 10³⁰⁰` and `k = m = 1` it is `2 ln ½` to a few ulp, where the six `ln Γ` values
/// are near `7·10³⁰²`. (The sums `a + b`, `a + k` are rounded once; where `a ≪ b` that moves
/// the result by up to an ulp of the terms `k ln(1 + b/a)`, not more.)
///
/// # Examples
/// ```
/// use rosetree::math::ln_beta_ratio;
///
/// // Uniform prior: P(one 1, then one 0) = 1/6.
/// assert!((ln_beta_ratio(1.0, 1.0, 1.0, 1.0) - (1.0f64 / 6.0).ln()).abs() < 1e-15);
/// // A prior pinned at ½: three ones and three zeros have probability 2⁻⁶.
/// assert!((ln_beta_ratio(1e300, 1e300, 3.0, 3.0) - 6.0 * 0.5f64.ln()).abs() < 1e-14);
/// ```
pub fn ln_beta_ratio(a: f64, b: f64, k: f64, m: f64) -> f64 {
    if k == 0.0 && m == 0.0 {
        return 0.0;
    }
    -ln_rising_shift(a, b, k) - ln_rising_shift(b, a + k, m)
}

#[cfg(test)]
// Reference values are pasted with all the digits mpmath printed (one is ln 2 itself).
#[allow(clippy::excessive_precision, clippy::approx_constant)]
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

    /// `|got − want| ≤ tol · |want|`, with a message naming the case.
    fn assert_relative(got: f64, want: f64, tol: f64, case: &str) {
        assert!(
            (got - want).abs() <= tol * want.abs(),
            "{case}: got {got:e}, want {want:e}, relative error {:e}",
            ((got - want) / want).abs()
        );
    }

    // Reference values below: mpmath with `mp.mp.dps = 800` (so that `mpf(x) + n` is exact
    // even for x = 10³⁰⁰, n = 10⁻³⁰⁰), each produced by the one-line expression in its comment
    // and printed to 20 digits; `mpf(x)` of a double is exact.

    #[test]
    fn ln_gamma_ratio_matches_mpmath() {
        let cases: [(f64, f64, f64); 12] = [
            // mp.loggamma(mpf(1000000000000000.0) + 3.0) - mp.loggamma(mpf(1000000000000000.0))
            (1000000000000000.0, 3.0, 103.61632918473205878),
            // mp.loggamma(mpf(1e300) + 2.5) - mp.loggamma(mpf(1e300))
            (1e300, 2.5, 1726.9388197455342631),
            // mp.loggamma(mpf(1e-300) + 1.0) - mp.loggamma(mpf(1e-300))
            (1e-300, 1.0, -690.77552789821370518),
            // mp.loggamma(mpf(0.3) + 1e-10) - mp.loggamma(mpf(0.3))
            (0.3, 1e-10, -3.5025242215878650253e-10),
            // mp.loggamma(mpf(2.0) + 1000000000000000.0) - mp.loggamma(mpf(2.0))
            (2.0, 1000000000000000.0, 33538776394910737.987),
            // mp.loggamma(mpf(5e-324) + 0.5) - mp.loggamma(mpf(5e-324))
            (5e-324, 0.5, -743.86770697845656223),
            // mp.loggamma(mpf(7.5) + 9.5) - mp.loggamma(mpf(7.5))
            (7.5, 9.5, 23.137495869321939849),
            // mp.loggamma(mpf(1.7e308) + 1000000000.0) - mp.loggamma(mpf(1.7e308))
            (1.7e308, 1000000000.0, 709726836893.22824104),
            // mp.loggamma(mpf(10.0) + 1e300) - mp.loggamma(mpf(10.0))
            (10.0, 1e300, 6.8977552789821374147e302),
            // mp.loggamma(mpf(0.5) + 0.0) - mp.loggamma(mpf(0.5))
            (0.5, 0.0, 0.0),
            // mp.loggamma(mpf(4.25) + 7.0) - mp.loggamma(mpf(4.25))
            (4.25, 7.0, 13.580844449610092005),
            // mp.loggamma(mpf(1e-08) + 3.5) - mp.loggamma(mpf(1e-08))
            (1e-08, 3.5, -17.219707124801568237),
        ];
        for (x, n, want) in cases {
            let got = ln_gamma_ratio(x, n);
            if want == 0.0 {
                assert_eq!(got, 0.0);
            } else {
                assert_relative(got, want, 1e-14, &format!("ln_gamma_ratio({x:e}, {n:e})"));
            }
        }
        // The plain difference of `ln_gamma` loses everything at this scale.
        let naive = ln_gamma(1e15 + 3.0) - ln_gamma(1e15);
        assert!((naive - cases[0].2).abs() > 1.0);
    }

    #[test]
    fn digamma_diff_matches_mpmath() {
        let cases: [(f64, f64, f64); 7] = [
            // mp.digamma(mpf(1000000000000000.0) + 1.0) - mp.digamma(mpf(1000000000000000.0))
            (1000000000000000.0, 1.0, 1.0e-15),
            // mp.digamma(mpf(1e300) + 1000000000000000.0) - mp.digamma(mpf(1e300))
            (1e300, 1000000000000000.0, 9.999999999999999475e-286),
            // mp.digamma(mpf(0.3) + 0.7) - mp.digamma(mpf(0.3))
            (0.3, 0.7, 2.925308557298600173),
            // mp.digamma(mpf(1e-300) + 2.0) - mp.digamma(mpf(1e-300))
            (1e-300, 2.0, 9.9999999999999997494e299),
            // mp.digamma(mpf(12.0) + 1e-10) - mp.digamma(mpf(12.0))
            (12.0, 1e-10, 8.6901872871391033648e-12),
            // mp.digamma(mpf(3.0) + 1e300) - mp.digamma(mpf(3.0))
            (3.0, 1e300, 689.85274356311523812),
            // mp.digamma(mpf(1.5) + 40.0) - mp.digamma(mpf(1.5))
            (1.5, 40.0, 3.6771068769793484219),
        ];
        for (x, n, want) in cases {
            let got = digamma_diff(x, n);
            assert_relative(got, want, 1e-14, &format!("digamma_diff({x:e}, {n:e})"));
        }
        assert_eq!(digamma_diff(2.0, 0.0), 0.0);
        // ψ(10¹⁵ + 1) − ψ(10¹⁵) from `digamma` values is pure rounding noise.
        let naive = digamma(1e15 + 1.0) - digamma(1e15);
        assert!((naive - 1e-15).abs() > 1e-16);
    }

    #[test]
    fn ln_beta_ratio_matches_mpmath() {
        let cases: [(f64, f64, f64, f64, f64); 8] = [
            // mp.log(mp.beta(mpf(1000000000000000.0) + 3.0, mpf(1000000000000000.0) + 3.0)) - mp.log(mp.beta(mpf(1000000000000000.0), mpf(1000000000000000.0)))
            (
                1000000000000000.0,
                1000000000000000.0,
                3.0,
                3.0,
                -4.1588830833596733565,
            ),
            // mp.log(mp.beta(mpf(1e300) + 1.0, mpf(1e300) + 1.0)) - mp.log(mp.beta(mpf(1e300), mpf(1e300)))
            (1e300, 1e300, 1.0, 1.0, -1.3862943611198906188),
            // mp.log(mp.beta(mpf(1e-300) + 2.0, mpf(1e-300) + 1.0)) - mp.log(mp.beta(mpf(1e-300), mpf(1e-300)))
            (1e-300, 1e-300, 2.0, 1.0, -692.1618222593335958),
            // mp.log(mp.beta(mpf(0.5) + 30.0, mpf(2.5) + 4.0)) - mp.log(mp.beta(mpf(0.5), mpf(2.5)))
            (0.5, 2.5, 30.0, 4.0, -17.26756193095432657),
            // mp.log(mp.beta(mpf(1.0) + 0.0, mpf(10000.0) + 10000.0)) - mp.log(mp.beta(mpf(1.0), mpf(10000.0)))
            (1.0, 10000.0, 0.0, 10000.0, -0.69314718055994530942),
            // mp.log(mp.beta(mpf(1000000000000000.0) + 1000000000.0, mpf(1.0) + 2.0)) - mp.log(mp.beta(mpf(1000000000000000.0), mpf(1.0)))
            (
                1000000000000000.0,
                1.0,
                1000000000.0,
                2.0,
                -68.384408609259928212,
            ),
            // mp.log(mp.beta(mpf(3.0) + 0.0, mpf(7.0) + 0.0)) - mp.log(mp.beta(mpf(3.0), mpf(7.0)))
            (3.0, 7.0, 0.0, 0.0, 0.0),
            // mp.log(mp.beta(mpf(0.001) + 5.0, mpf(1000.0) + 50.0)) - mp.log(mp.beta(mpf(0.001), mpf(1000.0)))
            (0.001, 1000.0, 5.0, 50.0, -38.519909842091236895),
        ];
        for (a, b, k, m, want) in cases {
            let got = ln_beta_ratio(a, b, k, m);
            let case = format!("ln_beta_ratio({a:e}, {b:e}, {k:e}, {m:e})");
            if want == 0.0 {
                assert_eq!(got, 0.0, "{case}");
            } else {
                assert_relative(got, want, 1e-13, &case);
            }
        }
    }

    #[test]
    fn differences_agree_with_ln_gamma_where_that_is_exact() {
        // Moderate arguments, where `ln_gamma` differences lose at most a digit: a check of
        // every branch (small whole n, fractional n by shifting, Stirling) against libm.
        for &x in &[0.02, 0.7, 1.0, 3.3, 9.9, 10.0, 17.5, 250.0] {
            for &n in &[0.25, 1.0, 2.0, 5.0, 9.75, 12.0, 40.0, 333.5] {
                let direct = ln_gamma(x + n) - ln_gamma(x);
                let tol = 1e-14 * (ln_gamma(x + n).abs() + ln_gamma(x).abs());
                assert!((ln_gamma_ratio(x, n) - direct).abs() <= tol, "x={x} n={n}");
                let direct = digamma(x + n) - digamma(x);
                let tol = 1e-13 * (digamma(x + n).abs() + digamma(x).abs());
                assert!((digamma_diff(x, n) - direct).abs() <= tol, "x={x} n={n}");
                for &m in &[0.0, 3.0, 11.0] {
                    let direct = ln_beta(x + n, 1.5 + m) - ln_beta(x, 1.5);
                    let tol = 1e-13 * (ln_beta(x + n, 1.5 + m).abs() + ln_beta(x, 1.5).abs());
                    assert!(
                        (ln_beta_ratio(x, 1.5, n, m) - direct).abs() <= tol,
                        "x={x} n={n} m={m}"
                    );
                }
            }
        }
    }

    #[test]
    fn differences_are_finite_at_the_ends_of_the_range() {
        for &x in &[f64::MIN_POSITIVE / 8.0, 1e-300, 1.0, 1e300, f64::MAX] {
            for &n in &[0.0, 1e-300, 1.0, 1e15] {
                assert!(ln_gamma_ratio(x, n).is_finite(), "x={x:e} n={n:e}");
                assert!(digamma_diff(x, n) >= 0.0, "x={x:e} n={n:e}");
            }
        }
        // The true value exceeds f64::MAX: +∞, not NaN.
        assert_eq!(ln_gamma_ratio(1e300, 1e308), f64::INFINITY);
        let half = ln_beta_ratio(f64::MAX / 4.0, f64::MAX / 4.0, 2.0, 3.0);
        assert_relative(
            half,
            5.0 * 0.5f64.ln(),
            1e-15,
            "ln_beta_ratio near f64::MAX",
        );
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
