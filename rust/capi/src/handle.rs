//! Opaque handles: boxed values whose addresses are kept in a registry of live handles, so a
//! null, freed or mistyped handle is reported instead of dereferenced.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, MutexGuard};

use crate::error::{Error, Result, RtStatus};

/// A type the interface hands out behind a pointer; `NAME` is its C name, for messages.
pub(crate) trait Handle: Send + Sync + 'static {
    const NAME: &'static str;
}

/// Address → type of every live handle.
static LIVE: LazyLock<Mutex<HashMap<usize, TypeId>>> = LazyLock::new(Default::default);

fn live() -> MutexGuard<'static, HashMap<usize, TypeId>> {
    // A panic while the lock is held cannot leave the map half-updated (each critical
    // section is one insert, lookup or removal), so a poisoned lock is still sound.
    LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Moves `value` to the heap, registers it and writes its address to `out`.
///
/// # Errors
/// [`RtStatus::NullHandle`] when `out` is null (the value is dropped).
pub(crate) fn emit<T: Handle>(out: *mut *mut T, name: &str, value: T) -> Result<()> {
    if out.is_null() {
        return Err(Error::new(
            RtStatus::NullHandle,
            format!("`{name}` is null: nowhere to write the new {}", T::NAME),
        ));
    }
    let ptr = Box::into_raw(Box::new(value));
    live().insert(ptr as usize, TypeId::of::<T>());
    // SAFETY: `out` is non-null; the caller provides a writable `T *` slot.
    unsafe { out.write(ptr) };
    Ok(())
}

fn check<T: Handle>(ptr: *const T, name: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::new(
            RtStatus::NullHandle,
            format!("`{name}` is a null {}", T::NAME),
        ));
    }
    match live().get(&(ptr as usize)) {
        Some(&kind) if kind == TypeId::of::<T>() => Ok(()),
        _ => Err(Error::new(
            RtStatus::InvalidHandle,
            format!(
                "`{name}` is not a live {} (freed already, or another kind of handle)",
                T::NAME
            ),
        )),
    }
}

/// The value behind a live handle.
///
/// # Errors
/// [`RtStatus::NullHandle`] or [`RtStatus::InvalidHandle`], naming the argument `name`.
pub(crate) fn get<'a, T: Handle>(ptr: *const T, name: &str) -> Result<&'a T> {
    check(ptr, name)?;
    // SAFETY: registered addresses come from `Box::into_raw` in `emit` and are removed
    // before the box is dropped in `release`, and the type id matches.
    Ok(unsafe { &*ptr })
}

/// As [`get`], mutably.
pub(crate) fn get_mut<'a, T: Handle>(ptr: *mut T, name: &str) -> Result<&'a mut T> {
    check(ptr, name)?;
    // SAFETY: as in `get`; the C contract forbids using a handle from two threads while
    // one of them changes it.
    Ok(unsafe { &mut *ptr })
}

/// Unregisters and drops the value behind a live handle.
///
/// # Errors
/// As [`get`]: freeing twice is reported, never done.
pub(crate) fn release<T: Handle>(ptr: *mut T, name: &str) -> Result<()> {
    let removed = {
        let mut live = live();
        match live.get(&(ptr as usize)) {
            Some(&kind) if kind == TypeId::of::<T>() && !ptr.is_null() => {
                live.remove(&(ptr as usize));
                true
            }
            _ => false,
        }
    };
    if !removed {
        return check(ptr, name);
    }
    // SAFETY: the address was registered by `emit` (from `Box::into_raw`) and has just been
    // unregistered under the lock, so it is dropped exactly once.
    drop(unsafe { Box::from_raw(ptr) });
    Ok(())
}
