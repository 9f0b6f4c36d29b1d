//! One Python exception class per error variant; the classes live in `rosetree.exceptions`.
//!
//! The bindings' functions return [`PyResult`], whose error converts from both the core's
//! [`RoseTreeError`] and PyO3's `PyErr`, so `?` works on either (the orphan rule forbids
//! `From<RoseTreeError> for PyErr` outside the core crate).

use pyo3::PyErr;
use pyo3::exceptions::PyKeyboardInterrupt;

use rosetree::error::RoseTreeError;

/// A Python exception on its way out of a binding.
#[derive(Debug)]
pub(crate) struct Error(PyErr);

/// What the bindings return; PyO3 raises the error as its exception.
pub(crate) type PyResult<T> = Result<T, Error>;

impl From<PyErr> for Error {
    fn from(err: PyErr) -> Self {
        Self(err)
    }
}

impl From<Error> for PyErr {
    fn from(err: Error) -> Self {
        err.0
    }
}

impl From<pyo3::CastError<'_, '_>> for Error {
    fn from(err: pyo3::CastError<'_, '_>) -> Self {
        Self(err.into())
    }
}

impl From<numpy::AsSliceError> for Error {
    fn from(err: numpy::AsSliceError) -> Self {
        Self(err.into())
    }
}

impl From<RoseTreeError> for Error {
    fn from(err: RoseTreeError) -> Self {
        Self(to_py_err(err))
    }
}

pyo3::import_exception!(rosetree.exceptions, InvalidParameterError);
pyo3::import_exception!(rosetree.exceptions, InvalidDataError);
pyo3::import_exception!(rosetree.exceptions, InvalidTreeError);
pyo3::import_exception!(rosetree.exceptions, NumericalError);

/// The exception of `rosetree.exceptions` for `err`.
pub(crate) fn to_py_err(err: RoseTreeError) -> PyErr {
    {
        let message = err.to_string();
        match err {
            RoseTreeError::InvalidParameter { name, .. } => {
                InvalidParameterError::new_err((message, name))
            }
            RoseTreeError::ShapeMismatch { .. } => {
                InvalidDataError::new_err((message, None::<usize>, None::<usize>))
            }
            RoseTreeError::InvalidData { row, column, .. } => {
                InvalidDataError::new_err((message, Some(row), column))
            }
            RoseTreeError::InvalidTree(_) => InvalidTreeError::new_err(message),
            RoseTreeError::Numerical(_) => NumericalError::new_err(message),
            RoseTreeError::Interrupted => PyKeyboardInterrupt::new_err("interrupted"),
            RoseTreeError::Callback(inner) => match inner.downcast::<PyErr>() {
                Ok(py_err) => *py_err,
                Err(other) => NumericalError::new_err(other.to_string()),
            },
        }
    }
}
