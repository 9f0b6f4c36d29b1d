//! Maximisation shared by the families: `argmin`'s golden-section search and Brent's method
//! in one dimension, and `basin`'s L-BFGS-B in a box ([`lbfgsb_max`]), each on the negated
//! objective, with values outside double precision (NaN) ranked last.

use std::cell::{Cell, RefCell};

use argmin::core::{CostFunction, Executor, State as _};
use argmin::solver::brent::BrentOpt;
use argmin::solver::goldensectionsearch::GoldenSectionSearch;

use crate::error::{Result, RoseTreeError};

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

/// Stopping rules of [`lbfgsb_max`], named and set as SciPy's `minimize(method="L-BFGS-B")`
/// names and sets them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxOptions {
    /// Stop once a step raises the objective by at most `ftol · max(|f|, 1)` (SciPy's
    /// `ftol`, L-BFGS-B's `factr · ε`).
    pub ftol: f64,
    /// Stop once every entry of the projected gradient is at most this (SciPy's `gtol`).
    pub pgtol: f64,
    /// The most iterations.
    pub max_iter: u64,
    /// The number of correction pairs kept (SciPy's `maxcor`).
    pub memory: usize,
}

impl Default for BoxOptions {
    /// SciPy's defaults: `ftol = 2.2e-9`, `gtol = 1e-5`, 15 000 iterations, 10 pairs.
    fn default() -> Self {
        Self {
            ftol: 2.220_446_049_250_313e-9,
            pgtol: 1e-5,
            max_iter: 15_000,
            memory: 10,
        }
    }
}

/// Where [`lbfgsb_max`] ended: the best point it evaluated and the value there.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxMax {
    /// The point.
    pub x: Vec<f64>,
    /// The objective there.
    pub value: f64,
    /// How many times the objective was evaluated.
    pub evaluations: usize,
}

/// An objective of [`lbfgsb_max`]: its value and gradient at a point.
pub type Objective<'a> = dyn Fn(&[f64]) -> Result<(f64, Vec<f64>)> + 'a;

/// `−f` and `−∇f` for `basin`, the box `[lo, hi]ⁿ`, and the best point seen so far.
struct BoxProblem<'a> {
    f: &'a Objective<'a>,
    lower: Vec<f64>,
    upper: Vec<f64>,
    best: &'a RefCell<Option<BoxMax>>,
    evaluations: &'a Cell<usize>,
}

impl basin::Constraints for BoxProblem<'_> {
    type Set = basin::ConstraintSet<basin::BoxBounds<Vec<f64>>>;

    fn constraints(&self) -> <Self::Set as basin::ConstraintDescription>::Borrowed<'_> {
        basin::ConstraintSet::new()
            .with_bounds(basin::BoxBounds::new(Some(&self.lower), Some(&self.upper)))
    }
}

impl basin::CostFunction for BoxProblem<'_> {
    type Param = Vec<f64>;
    type Output = f64;
    type Error = RoseTreeError;

    fn cost(&self, x: &Vec<f64>) -> Result<f64> {
        basin::Gradient::cost_and_gradient(self, x).map(|(value, _)| value)
    }
}

impl basin::Gradient for BoxProblem<'_> {
    type Gradient = Vec<f64>;

    fn gradient(&self, x: &Vec<f64>) -> Result<Vec<f64>> {
        self.cost_and_gradient(x).map(|(_, gradient)| gradient)
    }

    fn cost_and_gradient(&self, x: &Vec<f64>) -> Result<(f64, Vec<f64>)> {
        self.evaluations.set(self.evaluations.get() + 1);
        let (value, gradient) = (self.f)(x)?;
        if value.is_nan() || gradient.iter().any(|g| !g.is_finite()) {
            // Outside double precision: the solver keeps its last finite point and
            // restarts from there, or stops.
            return Ok((f64::INFINITY, vec![f64::NAN; x.len()]));
        }
        let mut best = self.best.borrow_mut();
        if best.as_ref().is_none_or(|b| value > b.value) {
            *best = Some(BoxMax {
                x: x.clone(),
                value,
                evaluations: 0,
            });
        }
        Ok((-value, gradient.iter().map(|g| -g).collect()))
    }
}

/// A maximiser of `f` on the box `[lo, hi]ⁿ` by L-BFGS-B (Byrd, Lu, Nocedal & Zhu 1995;
/// `basin`'s port of Nocedal and Morales's version 3.0, the algorithm and line search that
/// SciPy runs), from `start` clamped into the box. `f(x)` gives the value and the gradient.
/// Returns the best point evaluated (never worse than the start), or `None` when no
/// evaluation gave a finite value and gradient.
///
/// A value of NaN or a non-finite gradient counts as `−∞` there: the search steps back.
/// An error of `f` ends the search at the best point so far, except
/// [`RoseTreeError::Interrupted`], which is returned.
///
/// # Errors
/// [`RoseTreeError::Interrupted`] from `f`; [`RoseTreeError::InvalidParameter`] naming
/// `bounds` for `lo > hi`, a non-finite bound or an empty `start`.
///
/// # Examples
/// ```
/// use rosetree::optimize::{BoxOptions, lbfgsb_max};
///
/// // −(x − 2)² − (y + 1)², whose maximum (2, −1) lies outside the box [−1, 1]²: at (1, −1).
/// let f = |x: &[f64]| {
///     let value = -(x[0] - 2.0).powi(2) - (x[1] + 1.0).powi(2);
///     Ok((value, vec![-2.0 * (x[0] - 2.0), -2.0 * (x[1] + 1.0)]))
/// };
/// let best = lbfgsb_max(&f, -1.0, 1.0, &[0.0, 0.0], &BoxOptions::default())?.unwrap();
/// assert!((best.x[0] - 1.0).abs() < 1e-9 && (best.x[1] + 1.0).abs() < 1e-6);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub fn lbfgsb_max(
    f: &Objective<'_>,
    lo: f64,
    hi: f64,
    start: &[f64],
    options: &BoxOptions,
) -> Result<Option<BoxMax>> {
    if !(lo.is_finite() && hi.is_finite() && lo <= hi) || start.is_empty() {
        return Err(RoseTreeError::param(
            "bounds",
            format!(
                "needs finite lo <= hi and a start, got [{lo}, {hi}] in {} dimensions",
                start.len()
            ),
        ));
    }
    let n = start.len();
    let (best, evaluations) = (RefCell::new(None), Cell::new(0));
    let problem = BoxProblem {
        f,
        lower: vec![lo; n],
        upper: vec![hi; n],
        best: &best,
        evaluations: &evaluations,
    };
    let x0: Vec<f64> = start.iter().map(|v| v.clamp(lo, hi)).collect();
    let solver = basin::Lbfgsb::new()
        .with_m_capacity(options.memory.max(1))
        .with_absolute_projected_gradient_tolerance(options.pgtol)
        .with_relative_cost_reduction_tolerance(options.ftol);
    let run = basin::Executor::new(problem, solver, basin::FirstOrderState::new(x0))
        .max_iter(options.max_iter)
        .run();
    // Any other failure ends the search where it got to.
    if let Err(basin::ConstraintSolveError::Evaluation(RoseTreeError::Interrupted)) = run {
        return Err(RoseTreeError::Interrupted);
    }
    let evaluations = evaluations.get();
    Ok(best.into_inner().map(|b| BoxMax { evaluations, ..b }))
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
