//! Data matrices.

use ndarray::Array2;

use crate::buffer;
use crate::error::{Error, RtStatus, guard};
use crate::handle::{self, Handle};

/// A data matrix: `n_rows` items × `n_cols` features, copied from the caller.
pub struct RtData {
    pub(crate) x: Array2<f64>,
}

impl Handle for RtData {
    const NAME: &'static str = "rt_data";
}

/// Copies `n_rows × n_cols` values, row-major, from `values` into a new data handle in
/// `*out`. Missing values are NaN where a model allows them; the fits check the values.
#[unsafe(no_mangle)]
pub extern "C" fn rt_data_new(
    values: *const f64,
    n_rows: usize,
    n_cols: usize,
    out: *mut *mut RtData,
) -> RtStatus {
    guard(|| {
        let len = n_rows.checked_mul(n_cols).ok_or_else(|| {
            Error::new(
                RtStatus::ShapeMismatch,
                format!("{n_rows} rows × {n_cols} columns overflow the address space"),
            )
        })?;
        let values = buffer::input(values, len, "values")?;
        let x = Array2::from_shape_vec((n_rows, n_cols), values.to_vec())
            .map_err(|e| Error::new(RtStatus::ShapeMismatch, e.to_string()))?;
        handle::emit(out, "out", RtData { x })
    })
}

/// The shape of `data`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_data_shape(
    data: *const RtData,
    n_rows: *mut usize,
    n_cols: *mut usize,
) -> RtStatus {
    guard(|| {
        let x = &handle::get(data, "data")?.x;
        buffer::scalar(x.nrows(), n_rows, "n_rows")?;
        buffer::scalar(x.ncols(), n_cols, "n_cols")
    })
}

/// Releases `data`.
#[unsafe(no_mangle)]
pub extern "C" fn rt_data_free(data: *mut RtData) -> RtStatus {
    guard(|| handle::release(data, "data"))
}
