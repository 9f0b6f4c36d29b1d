//! The crate's one error type. It knows nothing about Python; the bindings map each variant
//! to one exception class.

use std::error::Error as StdError;

/// Everything that can go wrong in rosetree, with enough structure for a caller to point at
/// the offending parameter or row.
#[derive(Debug, thiserror::Error)]
pub enum RoseTreeError {
    /// A hyperparameter or option is out of its domain.
    #[error("invalid parameter `{name}`: {reason}")]
    InvalidParameter {
        /// The parameter's name as the user spells it.
        name: String,
        /// Why the value is rejected.
        reason: String,
    },
    /// An input array has the wrong shape.
    #[error("shape mismatch for `{what}`: expected {expected}, found {found}")]
    ShapeMismatch {
        /// What was being checked (`"X"`, `"alpha"`, …).
        what: String,
        /// The shape that was expected.
        expected: String,
        /// The shape that was found.
        found: String,
    },
    /// A data value is not allowed by the cluster model.
    #[error("invalid data in row {row}{}: {reason}", column.map(|c| format!(", column {c}")).unwrap_or_default())]
    InvalidData {
        /// Zero-based row index.
        row: usize,
        /// Zero-based column index, if one column is at fault.
        column: Option<usize>,
        /// Why the value is rejected.
        reason: String,
    },
    /// A tree given by the caller is not a valid rose tree over the data.
    #[error("invalid tree: {0}")]
    InvalidTree(String),
    /// A computation produced a non-finite or otherwise unusable number.
    #[error("numerical failure: {0}")]
    Numerical(String),
    /// The caller asked for the computation to stop (for example Ctrl-C in Python).
    #[error("interrupted")]
    Interrupted,
    /// An error raised by a user-supplied cluster model, passed through unchanged.
    #[error("cluster model callback failed: {0}")]
    Callback(Box<dyn StdError + Send + Sync>),
}

/// Shorthand for `Result<T, RoseTreeError>`.
pub type Result<T, E = RoseTreeError> = std::result::Result<T, E>;

impl RoseTreeError {
    /// An [`RoseTreeError::InvalidParameter`] for `name`.
    pub fn param(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::InvalidParameter {
            name: name.into(),
            reason: reason.into(),
        }
    }

    /// An [`RoseTreeError::InvalidData`] for one entry.
    pub fn data(row: usize, column: Option<usize>, reason: impl Into<String>) -> Self {
        Self::InvalidData {
            row,
            column,
            reason: reason.into(),
        }
    }
}
