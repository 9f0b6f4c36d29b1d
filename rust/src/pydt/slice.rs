//! Univariate slice sampling (Neal 2003, "Slice sampling", §4): the stepping-out procedure
//! to find an interval around the current point and the shrinkage procedure to sample from
//! it. The update leaves the density `exp(f)` invariant for any initial width.
//!
//! Written here because no maintained crate offers a slice sampler over a caller's closure;
//! it is the textbook procedure (Neal's Figures 3 and 5), twenty lines long.

use rand::Rng;
use rand_distr::Exp1;

/// How many widths the stepping-out procedure extends the interval on each side at most
/// (Neal's `m`): the interval is at most `(1 + 2·MAX_STEPS)` widths long.
pub const MAX_STEPS: usize = 32;

/// One slice-sampling update of `x0` for the log density `f` (up to a constant), restricted
/// to the open interval `(lo, hi)` (either end may be infinite): returns the new point.
///
/// `fx0` is `f(x0)` (which must be finite, and is known to the caller, which saves one
/// evaluation); `width` is the initial interval width. With finite bounds and a width of at
/// least `hi − lo`, the interval starts as the whole of `(lo, hi)` and only shrinks. `f` is
/// never called at or outside a bound: those points count as outside the slice.
pub fn slice_sample<R: Rng + ?Sized>(
    x0: f64,
    fx0: f64,
    mut f: impl FnMut(f64) -> f64,
    width: f64,
    (lo, hi): (f64, f64),
    rng: &mut R,
) -> f64 {
    // A start outside the bounds or with a density that is not finite (hyperparameters at
    // the edge of double precision) admits no valid slice: the point stays.
    if !(lo < x0 && x0 < hi && fx0.is_finite() && width > 0.0 && width.is_finite()) {
        return x0;
    }
    let e: f64 = rng.sample(Exp1);
    let y = fx0 - e;
    let inside = |x: f64, f: &mut dyn FnMut(f64) -> f64| lo < x && x < hi && f(x) > y;
    let mut left = x0 - width * rng.random::<f64>();
    let mut right = left + width;
    // Stepping out (Neal's Figure 3 with the step budget split at random).
    let mut j = rng.random_range(0..MAX_STEPS);
    let mut k = MAX_STEPS - 1 - j;
    while j > 0 && left > lo && inside(left, &mut f) {
        left -= width;
        j -= 1;
    }
    while k > 0 && right < hi && inside(right, &mut f) {
        right += width;
        k -= 1;
    }
    left = left.max(lo);
    right = right.min(hi);
    // Shrinkage (Neal's Figure 5). `x0` is inside the slice, so this ends: once the
    // interval is a few ulp wide, the draw is `x0` itself. The bound on the steps only
    // guards against a density that rounding makes inconsistent (f(x0) > y but f(x) ≤ y
    // arbitrarily close to x0): each step halves the interval on average.
    for _ in 0..MAX_SHRINKS {
        let x1 = left + rng.random::<f64>() * (right - left);
        if x1 == x0 || inside(x1, &mut f) {
            return x1;
        }
        if x1 < x0 {
            left = x1;
        } else {
            right = x1;
        }
    }
    x0
}

/// Shrinkage steps before the update gives up and keeps `x0` (far more than the ~1,100
/// halvings that take any interval of doubles down to one point).
const MAX_SHRINKS: usize = 10_000;

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::slice_sample;

    /// A start outside the bounds (a learnt `ln alpha` of `ln 5e-324` below the sampler's
    /// lower bound) or with a non-finite density used to loop for ever in the shrinkage;
    /// the point now stays where it is.
    #[test]
    fn a_start_without_a_slice_stays() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let f = |x: f64| -x * x;
        assert_eq!(
            slice_sample(-744.4, f(-744.4), f, 1.0, (-708.0, 708.0), &mut rng),
            -744.4
        );
        assert_eq!(
            slice_sample(0.5, f64::NAN, f, 1.0, (0.0, 1.0), &mut rng),
            0.5
        );
        assert_eq!(
            slice_sample(0.5, f64::INFINITY, f, 1.0, (0.0, 1.0), &mut rng),
            0.5
        );
    }

    /// The chain's draws of a Gamma(3, 2) density on `(0, ∞)` and of a Beta(2, 5) density on
    /// `(0, 1)` have the right means and variances (closed forms), within five standard
    /// errors (the draws are thinned by 5 to be nearly independent).
    #[test]
    fn slice_sampling_targets_the_density() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        // (log density, bounds, start, mean, variance)
        type Case = (Box<dyn Fn(f64) -> f64>, (f64, f64), f64, f64, f64);
        let cases: [Case; 2] = [
            (
                Box::new(|x: f64| 2.0 * x.ln() - 2.0 * x),
                (0.0, f64::INFINITY),
                1.0,
                1.5,
                0.75,
            ),
            (
                Box::new(|x: f64| x.ln() + 4.0 * (1.0 - x).ln()),
                (0.0, 1.0),
                0.3,
                2.0 / 7.0,
                10.0 / (49.0 * 8.0),
            ),
        ];
        for (f, bounds, x_start, mean, var) in cases {
            let mut x = x_start;
            let (mut sum, mut sum2, n) = (0.0, 0.0, 20_000);
            for i in 0..5 * n {
                x = slice_sample(x, f(x), &f, 0.5, bounds, &mut rng);
                if i % 5 == 0 {
                    sum += x;
                    sum2 += x * x;
                }
            }
            let m = sum / n as f64;
            let v = sum2 / n as f64 - m * m;
            let se = (var / n as f64).sqrt();
            assert!((m - mean).abs() < 5.0 * se, "mean {m} vs {mean}");
            assert!((v - var).abs() < 0.05 * var, "variance {v} vs {var}");
        }
    }
}
