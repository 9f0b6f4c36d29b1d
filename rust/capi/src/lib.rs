//! # rosetree's C interface
//!
//! The three families of the `rosetree` crate — Bayesian rose trees (and their binary case,
//! Bayesian hierarchical clustering), Kingman's coalescent and the Pitman–Yor diffusion tree
//! — for C, C++ and any language with a C foreign-function interface. The declarations are
//! in `include/rosetree.h`, generated from this crate by cbindgen.
//!
//! Conventions, the same for every function:
//!
//! - Every function returns an `rt_status`; `RT_STATUS_OK` (0) is success. On failure,
//!   `rt_last_error` gives a message naming the parameter, row or column at fault; it
//!   belongs to the calling thread and stays valid until that thread's next failing call.
//! - Objects are opaque handles made by a `*_new` or fit function and released by the
//!   matching `*_free`. A null handle returns `RT_STATUS_NULL_HANDLE`; a handle already
//!   freed, or of the wrong kind, returns `RT_STATUS_INVALID_HANDLE`. Neither is ever
//!   dereferenced. A handle may be read from several threads at once, but must not be freed
//!   while another thread uses it.
//! - Results are written into buffers the caller owns, with their lengths given; a buffer
//!   of the wrong length returns `RT_STATUS_BUFFER_SIZE` and writes nothing (text is written
//!   snprintf-style: the needed size, terminator included, is always reported).
//! - No Rust panic crosses the interface: one becomes `RT_STATUS_INTERNAL`.
//!
//! Matrices are row-major `double` arrays, one row per data item; node ids follow the
//! crate's [`rosetree::Tree`]: leaves are `0..n_leaves` in data-row order and every internal
//! node comes after its children, the root last.

// The interface is raw pointers by nature; every dereference is in `handle.rs` (handles,
// after a registry check) or in `buffer.rs` (caller buffers, after null and length checks).
#![allow(unsafe_code)]

mod buffer;
mod data;
mod error;
mod fit;
mod handle;
mod interrupt;
mod models;
mod params;

pub use data::*;
pub use error::*;
pub use fit::*;
pub use interrupt::*;
pub use models::*;
pub use params::*;
