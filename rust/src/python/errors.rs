//! One Python exception class per error variant; the classes live in `rosetree.exceptions`.

use pyo3::PyErr;
use pyo3::exceptions::PyKeyboardInterrupt;

use crate::error::RoseTreeError;

pyo3::import_exception!(rosetree.exceptions, InvalidParameterError);
pyo3::import_exception!(rosetree.exceptions, InvalidDataError);
pyo3::import_exception!(rosetree.exceptions, InvalidTreeError);
pyo3::import_exception!(rosetree.exceptions, NumericalError);

impl From<RoseTreeError> for PyErr {
    fn from(err: RoseTreeError) -> Self {
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
