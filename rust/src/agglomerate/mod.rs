//! Greedy agglomeration, generic over how two clusters score and merge.
//!
//! An agglomerative search starts from `n` singleton clusters (ids `0..n`) and repeatedly
//! merges the best-scoring pair of live clusters; the `k`-th merge creates cluster `n + k`.
//! The engine ([`agglomerate`]) owns everything that does not depend on the model: the
//! indexed heap, per-cluster candidate lists, parallel pair scoring, deterministic ties and
//! interrupt polling. A client ([`Linkage`]) says what a cluster is, how a pair scores and
//! what merging does. The Bayesian rose-tree search (`brt`) is one client.
//!
//! The engine's one requirement is that a pair's key depends only on the two clusters (as
//! in Müllner's generic linkage algorithm): it is computed once, when the younger of the
//! two is created, and never revised while both live. Keys rank higher first; equal keys
//! rank the lower pair of ids first.

mod candidates;
mod engine;
mod heap;

pub use engine::agglomerate;
pub(crate) use heap::IndexedHeap;

use std::cmp::Ordering;

use crate::error::Result;

/// A key with a total order (NaN must have a place in it).
pub trait TotalOrder: Copy {
    /// Compares two keys; `Greater` ranks first.
    fn total_cmp(&self, other: &Self) -> Ordering;
}

impl TotalOrder for f64 {
    #[inline]
    fn total_cmp(&self, other: &Self) -> Ordering {
        f64::total_cmp(self, other)
    }
}

/// A client of [`agglomerate`]: the clusters, how a pair scores and what a merge does.
///
/// The engine calls [`score`](Linkage::score) from several threads at once, always with
/// `i < j` and both clusters live, and [`merge`](Linkage::merge) from the thread that drives the
/// search (a thread of the pool for a large search, see [`agglomerate`]).
pub trait Linkage: Send + Sync {
    /// The ranking key of a merge; higher ranks first.
    type Key: TotalOrder + Send + Sync;

    /// Whatever makes scoring one cluster against many partners cheaper (for example a
    /// cached query of a single row); computed once per scan by [`probe`](Linkage::probe).
    type Probe: Send + Sync;

    /// The probe of cluster `i` when it is about to be scored against every live cluster
    /// with a higher id, or `None`.
    fn probe(&self, i: u32) -> Option<Self::Probe> {
        let _ = i;
        None
    }

    /// The key of merging clusters `i < j`; `probe` is [`probe`](Linkage::probe)`(i)` when
    /// one was made. It must be a function of the two clusters alone.
    ///
    /// # Errors
    /// Whatever the client reports (a model error, a NaN score); the search stops with it.
    fn score(&self, i: u32, j: u32, probe: Option<&Self::Probe>) -> Result<Self::Key>;

    /// What [`score_above`](Linkage::score_above) needs to know of a key to tell, without
    /// computing a pair's key, that the pair ranks below it; `()` for a client without
    /// such a test.
    type Cutoff: Send + Sync;

    /// The cutoff of `key`, or `None` (the default) where the client has no test that could
    /// tell a pair below it.
    ///
    /// The engine keeps the cutoff of each candidate list's *floor* (see the engine's
    /// documentation): a partner that ranks below the floor changes nothing, so a cheap
    /// proof that it does spares computing its key.
    fn cutoff(&self, key: &Self::Key) -> Option<Self::Cutoff> {
        let _ = key;
        None
    }

    /// [`score`](Linkage::score) of `i < j`, or `None` where the pair's key would rank
    /// strictly below the key of which `cutoff` is the [`cutoff`](Linkage::cutoff). The test
    /// must be sound (`None` only for a key that [`score`](Linkage::score) would return
    /// lower); it may be incomplete. The default computes the key.
    ///
    /// # Errors
    /// As [`score`](Linkage::score).
    fn score_above(
        &self,
        i: u32,
        j: u32,
        probe: Option<&Self::Probe>,
        cutoff: &Self::Cutoff,
    ) -> Result<Option<Self::Key>> {
        let _ = cutoff;
        self.score(i, j, probe).map(Some)
    }

    /// Merges clusters `i < j` into the new cluster `merged`.
    ///
    /// # Errors
    /// Whatever the client reports; the search stops with it.
    fn merge(&mut self, i: u32, j: u32, merged: u32) -> Result<()>;
}
