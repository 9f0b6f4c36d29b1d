//! One-dimensional maximisation shared by the families: `argmin`'s golden-section search
//! and Brent's method on the negated objective, with values outside double precision
//! (NaN) ranked last.

use argmin::core::{CostFunction, Executor, State as _};
use argmin::solver::brent::BrentOpt;
use argmin::solver::goldensectionsearch::GoldenSectionSearch;

/// `−f`, NaN as `+∞`: what the minimisers see of an objective to maximise.
struct Negated<F: Fn(f64) -> f64>(F);

impl<F: Fn(f64) -> f64> CostFunction for Negated<F> {
    type Param = f64;
    type Output = f64;

    fn cost(&self, u: &f64) -> std::result::Result<f64, argmin::core::Error> {
        let value = (self.0)(*u);
        Ok(if value.is_nan() {
            f64::INFINITY
        } else {
            -value
        })
    }
}

/// The maximiser of a unimodal `f` on `[lo, hi]` by golden-section search started at
/// `start` (clamped to the interval), until the bracket is narrower than `tolerance` times
/// the magnitude of its inner points (`argmin`'s rule) or after 200 steps; `None` when the
/// search fails (an empty interval).
pub fn golden_max(
    f: impl Fn(f64) -> f64,
    lo: f64,
    hi: f64,
    start: f64,
    tolerance: f64,
) -> Option<f64> {
    let solver = GoldenSectionSearch::new(lo, hi)
        .ok()?
        .with_tolerance(tolerance)
        .ok()?;
    let res = Executor::new(Negated(f), solver)
        .configure(|st| st.param(start.clamp(lo, hi)).max_iters(200))
        .run()
        .ok()?;
    res.state().get_best_param().copied()
}

/// A local maximiser of `f` on `[lo, hi]` by Brent's method, to a tolerance of `10⁻⁹` of
/// the interval; `None` if the solver fails or ends at a non-finite point.
pub fn brent_max(f: impl Fn(f64) -> f64, lo: f64, hi: f64) -> Option<f64> {
    let solver = BrentOpt::new(lo, hi).set_tolerance(f64::EPSILON.sqrt(), 1e-9 * (hi - lo));
    let result = Executor::new(Negated(f), solver)
        .configure(|state| state.max_iters(200))
        .run()
        .ok()?;
    result
        .state()
        .get_best_param()
        .copied()
        .filter(|t| t.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_find_the_maximum_of_a_smooth_unimodal_function() {
        let f = |x: f64| -(x - 1.3).powi(2) + 0.1 * (x - 1.3).powi(3);
        let g = golden_max(f, -4.0, 3.0, 0.0, 1e-9).unwrap();
        let b = brent_max(f, -4.0, 3.0).unwrap();
        assert!((g - 1.3).abs() < 1e-6, "{g}");
        assert!((b - 1.3).abs() < 1e-6, "{b}");
        // NaN away from the maximum ranks last.
        let holes = |x: f64| if x < -1.0 { f64::NAN } else { f(x) };
        assert!((golden_max(holes, -4.0, 3.0, 0.0, 1e-9).unwrap() - 1.3).abs() < 1e-6);
        assert!(golden_max(f, 2.0, 1.0, 0.0, 1e-9).is_none());
    }
}
