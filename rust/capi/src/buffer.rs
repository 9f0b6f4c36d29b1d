//! Caller-owned buffers: input arrays read as slices and output arrays written whole, each
//! after its pointer and length are checked.

use std::ffi::c_char;

use crate::error::{Error, Result, RtStatus};

/// `len` values from `ptr`; `None` when `ptr` is null and `len` is 0 (an optional argument
/// left out).
///
/// # Errors
/// [`RtStatus::BufferSize`] for a null pointer with a nonzero length.
pub(crate) fn optional<'a>(ptr: *const f64, len: usize, name: &str) -> Result<Option<&'a [f64]>> {
    if ptr.is_null() {
        return if len == 0 {
            Ok(None)
        } else {
            Err(Error::new(
                RtStatus::BufferSize,
                format!("`{name}` is null but its length is {len}"),
            ))
        };
    }
    // SAFETY: non-null; the caller promises `len` readable values.
    Ok(Some(unsafe { std::slice::from_raw_parts(ptr, len) }))
}

/// `len` values from `ptr`, which must not be null (unless `len` is 0).
pub(crate) fn input<'a>(ptr: *const f64, len: usize, name: &str) -> Result<&'a [f64]> {
    match optional(ptr, len, name)? {
        Some(values) => Ok(values),
        None => Ok(&[]),
    }
}

/// A caller's buffer `name` of `len` elements where `expected` are needed.
///
/// # Errors
/// [`RtStatus::BufferSize`] when they differ.
pub(crate) fn check_len(expected: usize, len: usize, name: &str) -> Result<()> {
    if len != expected {
        return Err(Error::new(
            RtStatus::BufferSize,
            format!("`{name}` must have {expected} elements, got a length of {len}"),
        ));
    }
    Ok(())
}

/// Writes `values` to the caller's buffer `ptr` of `len` elements.
///
/// # Errors
/// [`RtStatus::BufferSize`] when `ptr` is null or `len` differs from `values.len()`;
/// nothing is written then.
pub(crate) fn output<T: Copy>(values: &[T], ptr: *mut T, len: usize, name: &str) -> Result<()> {
    check_len(values.len(), len, name)?;
    if values.is_empty() {
        return Ok(());
    }
    if ptr.is_null() {
        return Err(Error::new(
            RtStatus::BufferSize,
            format!("`{name}` is null"),
        ));
    }
    // SAFETY: non-null, and the caller promises `len == values.len()` writable elements.
    unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), ptr, len) };
    Ok(())
}

/// Writes one value to `ptr`.
pub(crate) fn scalar<T>(value: T, ptr: *mut T, name: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::new(
            RtStatus::BufferSize,
            format!("`{name}` is null"),
        ));
    }
    // SAFETY: non-null; the caller provides a writable `T`.
    unsafe { ptr.write(value) };
    Ok(())
}

/// Writes `text` and a terminating NUL to `buf` of `len` bytes, snprintf-style: `needed`
/// (when not null) always receives the size the text needs, terminator included.
///
/// # Errors
/// [`RtStatus::BufferSize`] when the text does not fit (or `buf` is null with `len > 0`);
/// nothing is written to `buf` then. `buf` may be null with `len` 0 to ask for the size.
pub(crate) fn text(text: &str, buf: *mut c_char, len: usize, needed: *mut usize) -> Result<()> {
    let size = text.len() + 1;
    if !needed.is_null() {
        // SAFETY: non-null; the caller provides a writable `size_t`.
        unsafe { needed.write(size) };
    }
    if len < size || buf.is_null() {
        return Err(Error::new(
            RtStatus::BufferSize,
            format!("`buf` needs {size} bytes, got a length of {len}"),
        ));
    }
    // SAFETY: non-null, and at least `size` bytes long by the caller's `len`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, text.len());
        buf.add(text.len()).write(0);
    }
    Ok(())
}
