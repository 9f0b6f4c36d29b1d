//! Hooks for the Python test suite, so that tests of progress and Ctrl-C are driven by the
//! computation's own steps instead of by the clock: a test that waited a number of seconds
//! before pressing Ctrl-C, or for a line that comes once a second, would depend on how
//! fast and how loaded the machine is. Private (`_core._…`) and not part of the API.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::errors::PyResult;

use rosetree::error::RoseTreeError;

/// Milliseconds between two lines of progress (1 s unless a test asks for every poll).
static PROGRESS_EVERY_MS: AtomicU64 = AtomicU64::new(1000);

/// The interrupt poll of the next watched computation at which Ctrl-C is pressed (0: none).
static CTRL_C_AT_POLL: AtomicUsize = AtomicUsize::new(0);

/// How often [`super::run_watched`] writes a line of progress.
pub(crate) fn progress_every() -> Duration {
    Duration::from_millis(PROGRESS_EVERY_MS.load(Ordering::Relaxed))
}

/// Sets the interval between lines of progress to `seconds` (0: a line at every poll of the
/// waiting thread, about 20 a second) and returns the previous interval.
///
/// # Errors
/// `InvalidParameterError` for a negative or non-finite interval.
#[pyfunction]
fn _set_progress_interval(seconds: f64) -> PyResult<f64> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(RoseTreeError::param("seconds", "must be finite and >= 0").into());
    }
    // Whole milliseconds: the interval only matters to within a poll (50 ms).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = (seconds * 1000.0).round() as u64;
    let previous = PROGRESS_EVERY_MS.swap(ms, Ordering::Relaxed);
    #[allow(clippy::cast_precision_loss)]
    Ok(previous as f64 / 1000.0)
}

/// Arms Ctrl-C for the next interruptible computation: at the `k`-th time its engine asks
/// whether to stop (`k` >= 1), the worker raises SIGINT in this process, as a user's Ctrl-C
/// would, and waits until the calling thread has seen it, so the computation cannot end
/// first. `k = 0` disarms. One-shot: the computation that takes it disarms it.
#[pyfunction]
fn _ctrl_c_at_poll(k: usize) {
    CTRL_C_AT_POLL.store(k, Ordering::Relaxed);
}

/// The armed poll number for a computation that starts now (0: none), disarming it.
pub(crate) fn take_ctrl_c_at_poll() -> usize {
    CTRL_C_AT_POLL.swap(0, Ordering::Relaxed)
}

/// Raises SIGINT in this process from the worker thread and waits (a minute at most, in case
/// SIGINT is ignored) until `cancelled`: the waiting thread's next look for Ctrl-C sets it.
pub(crate) fn press_ctrl_c(cancelled: &AtomicBool) {
    let raised = Python::attach(|py| -> PyResult<()> {
        let signal = py.import("signal")?;
        signal.call_method1("raise_signal", (signal.getattr("SIGINT")?,))?;
        Ok(())
    });
    if raised.is_err() {
        return;
    }
    let until = Instant::now() + Duration::from_secs(60);
    while !cancelled.load(Ordering::Relaxed) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Adds the hooks to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_set_progress_interval, m)?)?;
    m.add_function(wrap_pyfunction!(_ctrl_c_at_poll, m)?)?;
    Ok(())
}
