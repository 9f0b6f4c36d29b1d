//! # rosetree
//!
//! Bayesian hierarchical clustering with non-binary trees: Bayesian rose trees (Blundell, Teh
//! & Heller 2010) and their binary special case, Bayesian hierarchical clustering (Heller &
//! Ghahramani 2005), over conjugate cluster models kept as sufficient statistics.
//!
//! The crate is a plain Rust library with no Python in it. The Python package's extension
//! module is the crate `rosetree-python` (`rust/python`) and the C interface the crate
//! `rosetree-capi` (`rust/capi`), both thin layers over this one.
//!
//! How it is put together:
//!
//! - [`models`]: conjugate cluster models `f(D)` behind [`models::ClusterModel`] (one file
//!   per family), with the optional shortcuts of [`models::RowQueries`]; and, in
//!   [`models::messages`], models whose clusters are messages propagated over time
//!   (Brownian diffusion, multinomial mutation) behind [`models::messages::MessageModel`].
//! - [`tree`]: the [`Tree`] every family returns (structure and optional heights), and the
//!   mutable [`tree::Arena`] that MCMC moves edit.
//! - [`agglomerate`]: the greedy engine, generic over a [`agglomerate::Linkage`] client.
//! - [`brt`]: Bayesian rose trees and BHC, a client of the engine; [`RoseTree`] is the
//!   shared tree with the rose-tree quantities beside it.
//! - [`pydt`]: the Pitman–Yor diffusion tree (and Neal's Dirichlet diffusion tree): the
//!   density of a tree, its Gaussian likelihood and the generative process.
//! - [`parallel`]: the thread pool and the one place where loops go parallel.
//!
//! ```
//! use ndarray::array;
//! use rosetree::brt::{self, BrtParams, Mixing};
//! use rosetree::models::BetaBernoulli;
//!
//! let x = array![
//!     [1., 1., 0., 0.], [1., 1., 0., 0.], [1., 1., 1., 0.],
//!     [0., 0., 1., 1.], [0., 0., 1., 1.],
//! ];
//! let model = BetaBernoulli::new(&[1.0], &[1.0], 4)?;
//! let params = BrtParams::new(Mixing::Brt { gamma: 0.5 }).check()?;
//! let tree = brt::fit(&model, &params, x.view())?;
//! println!("{}  ln p(D|T) = {:.3}", tree.to_newick(None), tree.log_evidence());
//! # Ok::<(), rosetree::RoseTreeError>(())
//! ```

pub mod agglomerate;
pub mod approx;
pub mod brt;
pub mod coalescent;
pub mod error;
pub mod math;
pub mod models;
pub mod optimize;
pub mod parallel;
pub mod progress;
pub mod pydt;
pub mod tree;

#[cfg(test)]
mod test_util;

pub use brt::{NodeValues, Partition, RoseTree};
pub use error::{Result, RoseTreeError};
pub use tree::{Node, Topology, Tree};
