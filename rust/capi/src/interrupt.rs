//! Interrupt callbacks: a native tool's way to stop a long fit (on Ctrl-C, a deadline or a
//! user's cancel button).

use std::ffi::c_void;

use crate::error::{RtStatus, guard};
use crate::handle;
use crate::params::{RtBrtParams, RtCoalescentParams, RtPydtParams};

/// A function the fits call now and then (about every 50 ms of work, from the thread that
/// called the fit) with the `context` it was set with; a nonzero return stops the fit with
/// `RT_STATUS_INTERRUPTED`.
pub type RtInterruptFn = Option<extern "C" fn(context: *mut c_void) -> bool>;

/// A callback and its context, as set on an options handle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Interrupt {
    callback: extern "C" fn(*mut c_void) -> bool,
    context: *mut c_void,
}

// SAFETY: the context is only ever passed back to the caller's callback, from the thread
// that calls the fit; what it points to is the caller's to synchronise.
unsafe impl Send for Interrupt {}
// SAFETY: as above; the library never dereferences the context.
unsafe impl Sync for Interrupt {}

impl Interrupt {
    fn new(callback: RtInterruptFn, context: *mut c_void) -> Option<Self> {
        callback.map(|callback| Self { callback, context })
    }

    /// Whether the fit should stop now.
    pub(crate) fn poll(this: Option<Self>) -> bool {
        this.is_some_and(|Self { callback, context }| callback(context))
    }
}

/// Sets (or, with a null `callback`, clears) the interrupt callback of rose-tree fits.
#[unsafe(no_mangle)]
pub extern "C" fn rt_brt_params_set_interrupt(
    params: *mut RtBrtParams,
    callback: RtInterruptFn,
    context: *mut c_void,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.interrupt = Interrupt::new(callback, context);
        Ok(())
    })
}

/// Sets (or, with a null `callback`, clears) the interrupt callback of coalescent fits.
#[unsafe(no_mangle)]
pub extern "C" fn rt_coalescent_params_set_interrupt(
    params: *mut RtCoalescentParams,
    callback: RtInterruptFn,
    context: *mut c_void,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.interrupt = Interrupt::new(callback, context);
        Ok(())
    })
}

/// Sets (or, with a null `callback`, clears) the interrupt callback of diffusion-tree
/// fits, polled between MCMC moves.
#[unsafe(no_mangle)]
pub extern "C" fn rt_pydt_params_set_interrupt(
    params: *mut RtPydtParams,
    callback: RtInterruptFn,
    context: *mut c_void,
) -> RtStatus {
    guard(|| {
        handle::get_mut(params, "params")?.interrupt = Interrupt::new(callback, context);
        Ok(())
    })
}
