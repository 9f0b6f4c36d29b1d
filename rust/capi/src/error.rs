//! Return codes, the thread-local last-error message and the guard every entry point runs
//! its body in.

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use rosetree::RoseTreeError;

/// What a call returned. `RT_STATUS_OK` is 0; every other value is a failure, described by
/// `rt_last_error`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtStatus {
    /// Success.
    Ok = 0,
    /// A parameter is out of its domain (the message names it).
    InvalidParameter = 1,
    /// An input has the wrong shape, e.g. new rows with another number of columns.
    ShapeMismatch = 2,
    /// A data value is outside the model's support (the message names its row and column).
    InvalidData = 3,
    /// A computation produced an unusable number.
    Numerical = 4,
    /// A handle argument is null.
    NullHandle = 5,
    /// A handle argument was freed already, or is of another kind.
    InvalidHandle = 6,
    /// An output buffer is null or of the wrong length.
    BufferSize = 7,
    /// A failure inside the library (a bug: please report it with the message).
    Internal = 8,
    /// The fit's interrupt callback asked it to stop (`rt_interrupt_fn`).
    Interrupted = 9,
}

/// An error on its way out: the status and the message for `rt_last_error`.
#[derive(Debug)]
pub(crate) struct Error {
    pub(crate) status: RtStatus,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn new(status: RtStatus, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// An [`RtStatus::InvalidParameter`] naming `name`.
    pub(crate) fn param(name: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(
            RtStatus::InvalidParameter,
            format!("invalid parameter `{name}`: {reason}"),
        )
    }
}

impl From<RoseTreeError> for Error {
    fn from(err: RoseTreeError) -> Self {
        let status = match &err {
            RoseTreeError::InvalidParameter { .. } | RoseTreeError::InvalidTree(_) => {
                RtStatus::InvalidParameter
            }
            RoseTreeError::ShapeMismatch { .. } => RtStatus::ShapeMismatch,
            RoseTreeError::InvalidData { .. } => RtStatus::InvalidData,
            RoseTreeError::Numerical(_) => RtStatus::Numerical,
            RoseTreeError::Interrupted => RtStatus::Interrupted,
            // Cannot happen here: no model of the C interface calls back.
            RoseTreeError::Callback(_) => RtStatus::Internal,
        };
        Self::new(status, err.to_string())
    }
}

pub(crate) type Result<T, E = Error> = std::result::Result<T, E>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // A message never holds NUL bytes of its own; should one, it is cut there.
    let message = message.split('\0').next().unwrap_or_default();
    let message = CString::new(message).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = message);
}

/// Runs an entry point's body: its error, or a panic, becomes a status and the thread's
/// last-error message.
pub(crate) fn guard(body: impl FnOnce() -> Result<()>) -> RtStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => RtStatus::Ok,
        Ok(Err(err)) => {
            set_last_error(&err.message);
            err.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error: {what}"));
            RtStatus::Internal
        }
    }
}

/// The message of the calling thread's last failure (an empty string if none), valid until
/// that thread's next failing call. Never null.
#[unsafe(no_mangle)]
pub extern "C" fn rt_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}

/// The library's version, e.g. `"0.1.0"`: a static string, never null.
#[unsafe(no_mangle)]
pub extern "C" fn rt_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
