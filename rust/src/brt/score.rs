//! Merge scores held precisely enough to rank merges as exact arithmetic would.
//!
//! A merge's log likelihood ratio (eq 1.23) is `ln L = logaddexp(U, V)` with `U` the
//! "one cluster" term and `V` the "keep the parts apart" term, both relative to the parts'
//! evidence. When the merged cluster is implausible, `U` lies tens of nats below `V` and a
//! double rounds `ln L` to `V`: every hopeless join then scores exactly `ln(1 − π)`, and the
//! order of the merges at the top of a tree would be decided by rounding and tree ids
//! instead of by the data. In exact arithmetic `ln L = V + ln(1 + e^{U−V})` still depends on
//! `U`, so a [`Score`] keeps the part that a double would round away.
//!
//! A [`Score`] is `hi + lo`, two doubles (16 bytes, so that candidate lists and the heap stay
//! small). Small parts are computed as [`SignedLog`]s, the logarithm of their magnitude, so
//! that `e^{−5000}` is as distinct from `e^{−5001}` as `1` is from `e^{−1}`; `lo` holds the
//! value where it is a normal double and otherwise a subnormal that ranks as the value does
//! (see `encode`). Scores are *normalised* — `lo` is at most half an ulp of `hi` — so
//! comparing `hi` first and `lo` second is the comparison of the exact sums. The only
//! rounding left is that of the double inputs and of the transcendental functions (relative
//! `~1e-16` of each term), and below `2^−1022` a resolution of about `1e-12 · ln|lo|²` in
//! `ln|lo|`: not the wholesale loss of a term.

use std::cmp::Ordering;

/// A signed real `sign · e^{log_abs}`: zero has `sign == 0`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedLog {
    sign: i8,
    log_abs: f64,
}

impl SignedLog {
    /// Zero.
    pub const ZERO: Self = Self {
        sign: 0,
        log_abs: f64::NEG_INFINITY,
    };

    /// `e^{log_abs}` (zero for `log_abs = −∞`).
    #[inline]
    pub fn exp(log_abs: f64) -> Self {
        if log_abs == f64::NEG_INFINITY {
            Self::ZERO
        } else {
            Self { sign: 1, log_abs }
        }
    }

    /// The double `x` (zero for `0.0`).
    #[inline]
    pub fn from_f64(x: f64) -> Self {
        if x == 0.0 {
            Self::ZERO
        } else {
            Self {
                sign: if x > 0.0 { 1 } else { -1 },
                log_abs: x.abs().ln(),
            }
        }
    }

    /// The value rounded to a double (`0` when it underflows).
    #[inline]
    pub fn to_f64(self) -> f64 {
        f64::from(self.sign) * self.log_abs.exp()
    }
}

impl std::ops::Neg for SignedLog {
    type Output = Self;

    /// `−self`.
    #[inline]
    fn neg(self) -> Self {
        Self {
            sign: -self.sign,
            log_abs: self.log_abs,
        }
    }
}

impl std::ops::Add for SignedLog {
    type Output = Self;

    /// `self + other`, accurate to a relative `~1e-16` of the larger magnitude (a sum that
    /// cancels keeps the error of its inputs, as any floating-point difference does).
    fn add(self, other: Self) -> Self {
        if other.sign == 0 {
            return self;
        }
        if self.sign == 0 {
            return other;
        }
        let (big, small) = if self.log_abs >= other.log_abs {
            (self, other)
        } else {
            (other, self)
        };
        let ratio = (small.log_abs - big.log_abs).exp();
        if big.sign == small.sign {
            Self {
                sign: big.sign,
                log_abs: big.log_abs + ratio.ln_1p(),
            }
        } else if ratio == 1.0 {
            Self::ZERO
        } else {
            Self {
                sign: big.sign,
                log_abs: big.log_abs + (-ratio).ln_1p(),
            }
        }
    }
}

/// `ln` of the smallest positive normal double, `2^−1022`.
const LN_MIN_POSITIVE: f64 = -708.396_418_532_264_1;

/// The small part of a [`Score`] as one double that orders as the exact value does: the value
/// itself where it is a normal double, and for magnitudes below the smallest normal double
/// (`e^{−5000}`, say) the subnormal `sign · 2^−1022 · w`, `w = 1 / (1 + ln 2^−1022 − ln|v|)`,
/// which grows with the magnitude. Such a subnormal is not the value, only its rank; its
/// resolution in `ln|v|` is about `1e-12 · ln|v|²`.
#[inline]
fn encode(t: SignedLog) -> f64 {
    if t.sign == 0 {
        return 0.0;
    }
    if t.log_abs >= LN_MIN_POSITIVE {
        let v = t.log_abs.exp();
        if v >= f64::MIN_POSITIVE {
            return f64::from(t.sign) * v;
        }
    }
    let w = 1.0 / (1.0 + (LN_MIN_POSITIVE - t.log_abs));
    f64::from(t.sign) * f64::MIN_POSITIVE * w
}

/// A real number `hi + lo` ranked exactly (see the module documentation); 16 bytes, compared
/// as two doubles.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    hi: f64,
    lo: f64,
}

impl Score {
    /// The lowest score, below every finite one.
    pub const NEG_INFINITY: Self = Self {
        hi: f64::NEG_INFINITY,
        lo: 0.0,
    };

    /// The double `x` held exactly.
    #[inline]
    pub fn from_f64(x: f64) -> Self {
        Self { hi: x, lo: 0.0 }
    }

    /// `base + td` for a double `td`, normalised (Knuth's TwoSum: exact).
    #[inline]
    pub fn from_sum(base: f64, td: f64) -> Self {
        let s = base + td;
        if !s.is_finite() {
            return Self::from_f64(s);
        }
        let e = if s == base {
            td
        } else {
            let bb = s - base;
            (base - (s - bb)) + (td - bb)
        };
        // A subnormal remainder is re-encoded, so that it ranks with the encoded small parts.
        let lo = if e != 0.0 && e.abs() < f64::MIN_POSITIVE {
            encode(SignedLog::from_f64(e))
        } else {
            e
        };
        Self { hi: s, lo }
    }

    /// `base + t`, normalised so that the small part is at most half an ulp of the large.
    #[inline]
    pub fn new(base: f64, t: SignedLog) -> Self {
        if t.sign == 0 || !base.is_finite() {
            return Self::from_f64(base);
        }
        // |t| below a quarter ulp of |base| leaves base unchanged when added: skip the exp.
        // The binade's exponent comes from the bits; subnormal and zero bases take the exp.
        let biased = ((base.to_bits() >> 52) & 0x7ff) as i32;
        if biased > 1 && t.log_abs < f64::from(biased - 1023 - 54) * std::f64::consts::LN_2 {
            return Self {
                hi: base,
                lo: encode(t),
            };
        }
        let td = t.to_f64();
        if base + td == base {
            return Self {
                hi: base,
                lo: encode(t),
            };
        }
        Self::from_sum(base, td)
    }

    /// The bits of both parts, for tests that require two paths to agree exactly.
    #[cfg(test)]
    pub(crate) fn to_bits(self) -> (u64, u64) {
        (self.hi.to_bits(), self.lo.to_bits())
    }

    /// The value rounded to a double.
    #[inline]
    pub fn value(self) -> f64 {
        self.hi + self.lo
    }

    /// Whether the value is NaN.
    #[inline]
    pub fn is_nan(self) -> bool {
        self.hi.is_nan() || self.lo.is_nan()
    }

    /// The largest `x_c` (less a margin) such that every score worth `r + ln(1 + e^x)` with
    /// `x < x_c` ranks strictly below `self`, also after the rounding of computing it: the
    /// `log_add_exp_pair` of `u = r + x` and `r`, or any score at most that in exact
    /// arithmetic and computed to a relative `~1e-15` of its terms. `−∞` where no such `x`
    /// is known: `self` at or below `r`, or not finite.
    ///
    /// With `g` the part of `self` above `r`, `x_c = ln(e^g − 1)`, the inverse of
    /// `ln(1 + eˣ)`; a `g` that a double holding `r` would round away is read from the small
    /// part, decoding the subnormal that ranks a part below `2^−1022` (`encode`). The
    /// margin, a relative `1e-9` of `x_c` plus `1e-12 x_c²` (beyond the resolution of the
    /// encoding), covers the rounding of the exponential and the logarithm on both sides.
    pub fn softplus_cutoff(self, r: f64) -> f64 {
        if !(self.hi.is_finite() && self.lo.is_finite() && r.is_finite()) {
            return f64::NEG_INFINITY;
        }
        let x = if self.hi > r {
            // `self.hi − r` is exact near `r` (Sterbenz) and rounded by a relative 1e-16
            // beyond; the small part is at most half an ulp of `hi`.
            let g = (self.hi - r) + self.lo;
            if g.is_nan() || g <= 0.0 {
                return f64::NEG_INFINITY;
            }
            if g > 36.0 {
                // ln(e^g − 1) = g + ln(1 − e^{−g}).
                g + (-(-g).exp()).ln_1p()
            } else {
                g.exp_m1().ln()
            }
        } else if self.hi == r && self.lo > 0.0 {
            if self.lo >= f64::MIN_POSITIVE {
                self.lo.ln()
            } else {
                // encode: lo = 2^−1022 · w, w = 1 / (1 + ln 2^−1022 − ln|v|).
                let w = self.lo / f64::MIN_POSITIVE;
                LN_MIN_POSITIVE + 1.0 - 1.0 / w
            }
        } else {
            return f64::NEG_INFINITY;
        };
        x - (1e-9 * (1.0 + x.abs()) + 1e-12 * x * x)
    }

    /// The total order of the exact values (NaN above `+∞`, as `f64::total_cmp` has it).
    #[inline]
    pub fn total_cmp(&self, other: &Self) -> Ordering {
        // Most comparisons are settled by distinct, ordered `hi`.
        if self.hi < other.hi {
            return Ordering::Less;
        }
        if self.hi > other.hi {
            return Ordering::Greater;
        }
        // `==` before `total_cmp`, so that −0 and +0 are equal.
        let lo = if self.lo == other.lo {
            Ordering::Equal
        } else {
            self.lo.total_cmp(&other.lo)
        };
        self.hi.total_cmp(&other.hi).then(lo)
    }
}

/// `ln ln(1 + eˣ)`, the logarithm of the softplus function, accurate for every `x` (for
/// `x < −37` it is `x` to within half an ulp).
#[inline]
pub fn ln_softplus(x: f64) -> f64 {
    if x < -37.0 {
        x
    } else if x <= 0.0 {
        x.exp().ln_1p().ln()
    } else if x < 37.0 {
        (x + (-x).exp().ln_1p()).ln()
    } else {
        x.ln()
    }
}

/// `base + ln(1 + eˣ)` for `x ≤ 0`: the correction as a double where it changes `base`
/// (two transcendental calls, as a plain `logaddexp`), in log form (`≈ eˣ`) where it is
/// far below an ulp of `base` (none).
#[inline(always)]
fn big_plus_softplus(base: f64, x: f64) -> Score {
    if x > -37.0 {
        Score::from_sum(base, x.exp().ln_1p())
    } else {
        Score::new(base, SignedLog::exp(x))
    }
}

/// `logaddexp(u, r)` as a [`Score`]: [`log_add_exp_score`] without excess terms, the join of
/// the `"brt"` and `"gamma"` rules, inlined into the pair-scoring loop.
#[inline(always)]
pub fn log_add_exp_pair(u: f64, r: f64) -> Score {
    if u >= r {
        big_plus_softplus(u, r - u)
    } else {
        big_plus_softplus(r, u - r)
    }
}

/// `logaddexp(u, r − E)` as a [`Score`], where `E = Σ e^{le}` over `log_excess` is a sum of
/// positive terms that may be far too small to change `r` in a double (the excess of a
/// dissolved root over its split term, see [`super::merge`]).
#[inline]
pub fn log_add_exp_score(u: f64, r: f64, log_excess: &[f64]) -> Score {
    let present = || log_excess.iter().filter(|&&le| le > f64::NEG_INFINITY);
    if log_excess.is_empty() || present().next().is_none() {
        return log_add_exp_pair(u, r);
    }
    let e: f64 = present().map(|&le| le.exp()).sum();
    let v = r - e;
    if u >= v {
        big_plus_softplus(u, v - u)
    } else {
        // r − E + ln(1 + e^{u−v})
        let t = present().fold(SignedLog::exp(ln_softplus(u - v)), |acc, &le| {
            acc + -SignedLog::exp(le)
        });
        Score::new(r, t)
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;

    fn lt(a: Score, b: Score) -> bool {
        a.total_cmp(&b) == Ordering::Less
    }

    #[test]
    fn signed_log_arithmetic() {
        let a = SignedLog::from_f64(3.0);
        let b = SignedLog::from_f64(-1.25);
        assert!(((a + b).to_f64() - 1.75).abs() < 1e-15);
        assert!(((b + a).to_f64() - 1.75).abs() < 1e-15);
        assert_eq!(a + -a, SignedLog::ZERO);
        assert!(((b + b).to_f64() + 2.5).abs() < 1e-15);
        // Far below any double, sums keep their relative precision.
        let tiny = SignedLog::exp(-5000.0) + SignedLog::exp(-5000.0);
        assert!((tiny.log_abs - (-5000.0 + 2f64.ln())).abs() < 1e-12);
        let diff = SignedLog::exp(-5000.0) + -SignedLog::exp(-5001.0);
        assert!((diff.log_abs - (-5000.0 + (-(-1f64).exp()).ln_1p())).abs() < 1e-12);
    }

    #[test]
    fn normalisation_keeps_exact_order() {
        // Both round to the same double; the small parts decide.
        let base = -std::f64::consts::LN_2;
        let a = Score::new(base, SignedLog::exp(-50.0));
        let b = Score::new(base, SignedLog::exp(-60.0));
        let c = Score::new(base, SignedLog::exp(-6000.0));
        assert!(lt(c, b) && lt(b, a));
        assert_eq!(a.hi, base);
        // A small part that is representable is folded in exactly: 1 + 2^-60 vs 1 + 2^-61.
        let x = Score::new(1.0, SignedLog::from_f64(2f64.powi(-60)));
        let y = Score::new(1.0, SignedLog::from_f64(2f64.powi(-61)));
        assert!(lt(y, x));
        // A large part moves hi and leaves the exact remainder.
        let t = SignedLog::from_f64(0.1);
        let td = t.to_f64();
        let z = Score::new(1.0, t);
        assert_eq!(z.hi, 1.0 + td);
        // 1 − hi is exact (Sterbenz), and so is adding td to it.
        let remainder = (1.0 - z.hi) + td;
        assert_eq!(z.lo, remainder);
        // hi decides first, whatever the small parts.
        let w = Score::new(base.next_up(), -SignedLog::exp(-6000.0));
        assert!(lt(a, w));
        // Zero and subnormal bases.
        assert!(lt(
            Score::new(0.0, -SignedLog::exp(-6000.0)),
            Score::new(0.0, -SignedLog::exp(-7000.0))
        ));
        assert!(lt(
            Score::new(0.0, SignedLog::exp(-800.0)),
            Score::from_f64(5e-324)
        ));
        assert!(lt(Score::NEG_INFINITY, Score::from_f64(-1e308)));
    }

    #[test]
    fn encoded_small_parts_order_as_their_values() {
        // Across the normal/subnormal boundary and far below it, both signs.
        let logs = [
            -5.0, -700.0, -708.0, -708.5, -709.0, -745.2, -800.0, -5000.0, -5000.001,
        ];
        // Order by the true value: positive ones grow with ln|v|, negative ones shrink.
        let key = |la: f64, sign: f64| if sign > 0.0 { -1.0 / la } else { 1.0 / la };
        let mut by_value: Vec<(f64, f64)> = logs
            .iter()
            .flat_map(|&la| {
                [1.0, -1.0].map(|sign| {
                    let t = if sign > 0.0 {
                        SignedLog::exp(la)
                    } else {
                        -SignedLog::exp(la)
                    };
                    (key(la, sign), encode(t))
                })
            })
            .collect();
        by_value.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(by_value.windows(2).all(|w| w[0].1 < w[1].1), "{by_value:?}");
        assert_eq!(encode(SignedLog::ZERO), 0.0);
        assert_eq!(encode(SignedLog::exp(-5.0)), (-5.0f64).exp());
    }

    #[test]
    fn ln_softplus_against_direct_evaluation() {
        for x in [
            -700.0_f64, -40.0, -37.0, -36.9, -5.0, -1e-3, 0.0, 1e-3, 2.0, 36.9, 37.0, 500.0,
        ] {
            let direct = x.exp().ln_1p().ln();
            let got = ln_softplus(x);
            if x < 30.0 {
                assert!((got - direct).abs() <= 1e-15 * direct.abs().max(1.0), "{x}");
            } else {
                // ln(x + ln(1 + e^{-x}))
                assert!((got - x.ln()).abs() < 1e-15 * x.ln(), "{x}");
            }
        }
    }

    #[test]
    fn hopeless_merges_are_ranked_by_their_cluster_term() {
        // logaddexp(u, r) with u far below r: exact value r + ln(1 + e^{u−r}).
        let r = (1.0f64 - 0.5).ln();
        let scores: Vec<Score> = [-100.0, -60.0, -900.0, -45.0, -5000.0]
            .iter()
            .map(|&u| log_add_exp_score(u, r, &[]))
            .collect();
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&i, &j| scores[j].total_cmp(&scores[i]));
        assert_eq!(order, vec![3, 1, 0, 2, 4]);
        for s in &scores {
            assert_eq!(s.value(), r);
        }
        // Near the crossover the value is the ordinary logaddexp.
        let s = log_add_exp_score(-0.2, r, &[]);
        assert!((s.value() - ((-0.2f64).exp() + 0.5).ln()).abs() < 1e-15);
    }

    /// A floor: the join score of a gain exponent `x_f` from every regime (plausible,
    /// rounded away, subnormal, far below any double), or a merge that dissolves a root
    /// with excess `e^{le}`.
    fn random_floor(rng: &mut Xoshiro256PlusPlus, r: f64) -> Score {
        let x_f = match rng.random_range(0..6) {
            0 => rng.random_range(-60.0..60.0),
            1 => rng.random_range(-800.0..-30.0),
            2 => -(10f64.powf(rng.random_range(2.0..7.0))),
            3 => [-37.0, -36.5, -708.4, -745.2, 36.0, 37.0][rng.random_range(0..6)],
            4 => rng.random_range(40.0..1e6),
            _ => rng.random_range(-1e-6..1e-6),
        };
        if rng.random_bool(0.8) {
            log_add_exp_pair(r + x_f, r)
        } else {
            log_add_exp_score(r + x_f, r, &[rng.random_range(-300.0..3.0)])
        }
    }

    /// Every join whose gain exponent `u − r` lies below [`Score::softplus_cutoff`] ranks
    /// strictly below the floor (checked on the scores themselves, at the cutoff and below
    /// it); and where the floor lies above `r`, the cutoff is within its margin of the
    /// crossing that bisection on the scores finds.
    #[test]
    fn softplus_cutoff_separates_joins_from_the_floor() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(31);
        let (mut sound, mut tight) = (0, 0);
        for _ in 0..20_000 {
            let r = [0.5_f64, 0.05, 0.95, 1e-9][rng.random_range(0..4)];
            let r = (-r).ln_1p();
            let floor = random_floor(&mut rng, r);
            let cut = floor.softplus_cutoff(r);
            let join = |x: f64| log_add_exp_pair(r + x, r);
            if cut == f64::NEG_INFINITY {
                // Only a floor at or below r has none: some join ranks at or above it.
                assert!(
                    floor.value() <= r || !floor.value().is_finite(),
                    "{floor:?}"
                );
                assert!(!lt(join(-1e4), floor));
                continue;
            }
            let scale = 1.0 + cut.abs();
            for x in [
                cut,
                cut.next_down(),
                cut - 1e-12 * scale,
                cut - rng.random_range(0.0..1e-6) * scale,
                cut - rng.random_range(0.0..100.0),
            ] {
                // The score sees x as (r + x) − r.
                if (r + x) - r < cut {
                    assert!(lt(join(x), floor), "{floor:?} {cut} {x}");
                    sound += 1;
                }
            }
            // Bisection for the largest x whose join ranks below the floor.
            let (mut lo, mut hi) = (cut, cut + 1.0);
            while lt(join(hi), floor) {
                hi += 2.0 * (hi - cut);
            }
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if lt(join(mid), floor) {
                    lo = mid
                } else {
                    hi = mid
                }
            }
            let margin = 1e-9 * (1.0 + lo.abs()) + 1e-12 * lo * lo;
            assert!(
                cut >= lo - 2.0 * margin - 4.0 * f64::EPSILON * r.abs(),
                "{floor:?} {cut} {lo}"
            );
            tight += 1;
        }
        assert!(sound > 50_000 && tight > 15_000, "{sound} {tight}");
    }

    #[test]
    fn excess_terms_lower_the_split_term() {
        // r − e^{-50} + ln(1 + e^{u−r}) with u − r = −60: the excess dominates the gain.
        let r = -0.3;
        let s = log_add_exp_score(r - 60.0, r, &[-50.0]);
        let t = log_add_exp_score(r - 60.0, r, &[]);
        let j = log_add_exp_score(r - 70.0, r, &[]);
        assert!(lt(s, Score::from_f64(r)));
        assert!(lt(s, j) && lt(j, t));
        // A large excess is an ordinary difference.
        let big = log_add_exp_score(-100.0, r, &[2.0f64.ln()]);
        assert!((big.value() - (r - 2.0)).abs() < 1e-15);
    }
}
