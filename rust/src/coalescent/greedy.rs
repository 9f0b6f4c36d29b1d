//! Greedy-Rate1 (Teh, Daumé & Roy 2007, §4.2) as a client of the agglomeration engine
//! ([`crate::agglomerate`]).
//!
//! # Which pair coalesces soonest
//! Each live cluster `c` is a subtree formed at its own time `t_c ≤ 0` (0 for a leaf) with
//! its message `M_c` there. At the current time `t_{i−1}` (the last merge, `≤` every live
//! `t_c`) the paper picks, for each pair `l, r`, the duration `δ ≥ 0` maximising its term
//! of eq 7 with the prior rate replaced by 1, `−δ + ln Z(t_l + t_r − 2(t_{i−1} − δ))`, and
//! merges the pair whose time `t_{i−1} − δ` is the most recent.
//!
//! As a function of the merge time `t = t_{i−1} − δ` this objective is
//! `t + ln Z(t_l + t_r − 2t) + const`: the current time only shifts it and bounds the
//! domain, `t ≤ t_{i−1}`. Let `t*_{lr}` be its maximiser over `t ≤ min(t_l, t_r)` (the
//! times at which the pair can merge at all), found once from the pair's own times by
//! [`MessageModel::optimal_duration`] with base length `|t_l − t_r|` and rate 1. When the
//! objective is unimodal in `t` the maximiser over `t ≤ t_{i−1}` is `min(t_{i−1}, t*_{lr})`,
//! so the pair merges at that time, and the pair the paper picks is the one with the
//! largest `t*_{lr}`. The key `t*_{lr}` depends on the two clusters alone and is fixed while
//! both live, as the engine requires. Where several pairs have `t*_{lr} ≥ t_{i−1}`, they all
//! merge at `t_{i−1}` (`δ = 0`) and the paper's rule ties; the key breaks the tie towards
//! the pair whose own optimum is the most recent, and among pairs whose optimum is clamped
//! at their own time (`t*_{lr} = min(t_l, t_r)`: rows closer than the observation noise,
//! all at `t = 0`) towards the one whose optimum *without* that bound
//! ([`MessageModel::unbounded_duration`]) is the most recent, the closest pair; only then
//! the lower ids. Without that second key the rows' order would decide which of the close
//! rows meet first.
//!
//! The objective is unimodal for Brownian diffusion (eq 11: `−v/2 − (D/2) ln v − S/(2v)`
//! in `v`, with one stationary point) and for the multinomial mutation model with one rate
//! for all features (see [`MultinomialMutation`](crate::models::messages::MultinomialMutation)'s
//! `optimal_duration`), so there the key reproduces the paper's choice exactly. With
//! different rates per feature the multinomial objective can have several local maxima;
//! then a pair whose best time `t*_{lr}` lies after `t_{i−1}` might, by the paper's
//! definition, prefer another local maximum before `t_{i−1}` instead of `t_{i−1}` itself.
//! This implementation keeps the fixed key (the pair's best time given its own subtrees)
//! and merges at `min(t_{i−1}, t*_{lr})`, which is what makes the search `O(n²)`.

pub use super::merges::CoalescentFit;
use super::merges::Merges;
use crate::agglomerate::{Linkage, TotalOrder, agglomerate};
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::parallel::Threads;
use std::cmp::Ordering;

/// The search state: the merges so far, seen by the engine through [`Linkage`].
struct Rate1<'a, M: MessageModel>(Merges<'a, M>);

/// Builds a tree by Greedy-Rate1 from the leaf messages of the data rows (as
/// [`MessageModel::leaf_messages`] returns them): each pair's merge time is its most
/// probable time under a pairwise coalescence rate of 1 (eq 12 for Brownian diffusion, a
/// Newton solve for the multinomial), and the pair that coalesces soonest merges first (see
/// the [module docs](self) for what that means exactly). Returns the tree and its
/// `ln p(x, π)` with the true rates (eq 7). `O(n²)` pair scores and `O(n)` messages.
///
/// Parallel sections run on `threads`; `interrupt` is polled every 50 ms or so and stops the
/// search with [`RoseTreeError::Interrupted`] when it returns `true`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `X` for no rows; [`RoseTreeError::Numerical`]
/// for a NaN merge time; [`RoseTreeError::Interrupted`].
pub fn greedy_rate1<M: MessageModel>(
    model: &M,
    leaves: Vec<(M::Message, f64)>,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<CoalescentFit> {
    let mut search = Rate1(Merges::new(model, leaves)?);
    let n = search.0.n_leaves();
    agglomerate(&mut search, n, threads, interrupt)?;
    search.0.finish()
}

/// The merges Greedy-Rate1 makes from clusters formed at their own times (each a message
/// at its time `t_c ≤ 0`: subtrees built elsewhere), in order: the `j`-th merges the pair
/// `merges[j]` into cluster `k + j` (the clusters are `0..k`). The keys are those of
/// [`greedy_rate1`] (each pair's best time given its own subtrees), which need nothing but
/// the clusters' messages and times.
///
/// # Errors
/// As [`greedy_rate1`].
pub(crate) fn greedy_rate1_merges<M: MessageModel>(
    model: &M,
    clusters: Vec<(M::Message, f64)>,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<Vec<[usize; 2]>> {
    let mut search = Rate1(Merges::from_clusters(model, clusters)?);
    let k = search.0.n_leaves();
    agglomerate(&mut search, k, threads, interrupt)?;
    Ok(search.0.into_merges())
}

/// A pair's rank: its best merge time `t*` given its own subtrees, then, among pairs whose
/// `t*` is their own time, the best time without that bound (module docs). The most recent
/// ranks first.
#[derive(Clone, Copy, Debug)]
struct MergeTime {
    time: f64,
    unbounded: f64,
}

impl TotalOrder for MergeTime {
    #[inline]
    fn total_cmp(&self, other: &Self) -> Ordering {
        self.time
            .total_cmp(&other.time)
            .then(self.unbounded.total_cmp(&other.unbounded))
    }
}

impl<M: MessageModel> Rate1<'_, M> {
    /// `t*`, the most probable merge time of clusters `i` and `j` under rate 1 given their
    /// own subtrees, with the tie-breaking time (module docs). Out of line, so that the
    /// test of [`score_above`](Linkage::score_above) stays small.
    #[inline(never)]
    fn best_time(&self, i: u32, j: u32) -> Result<MergeTime> {
        let s = &self.0;
        let (ti, tj) = (s.time(i), s.time(j));
        let pair = s.model.pair(s.message(i), s.message(j));
        // One solve gives both: the bounded duration is the unbounded one at least 0.
        let free = s.model.unbounded_duration(&pair, (ti - tj).abs(), 1.0)?;
        let newest = ti.min(tj);
        let (time, unbounded) = (newest - free.max(0.0), newest - free);
        if time.is_nan() || unbounded.is_nan() {
            return Err(RoseTreeError::Numerical(format!(
                "the merge time of clusters {i} and {j} is NaN"
            )));
        }
        Ok(MergeTime { time, unbounded })
    }
}

impl<M: MessageModel> Linkage for Rate1<'_, M> {
    /// The pair's best merge time `t*`, then its tie-breaking time: the most recent ranks
    /// first.
    type Key = MergeTime;
    type Probe = ();
    /// The floor's time.
    type Cutoff = f64;

    fn score(&self, i: u32, j: u32, _: Option<&()>) -> Result<MergeTime> {
        self.best_time(i, j)
    }

    /// The floor's time `t*` itself.
    fn cutoff(&self, key: &MergeTime) -> Option<f64> {
        (!key.time.is_nan()).then_some(key.time)
    }

    /// `None` where the pair provably merges before the floor's time `t_f`: `t* = min(t_i,
    /// t_j) − δ*` with `δ* ≥ 0`, so any pair formed from a cluster older than `t_f` does,
    /// and otherwise the model tells whether `δ*` exceeds `min(t_i, t_j) − t_f` (raised by
    /// `10⁻¹²` of the times, so that rounding `t*` cannot bring it back to `t_f`).
    #[inline(always)]
    fn score_above(
        &self,
        i: u32,
        j: u32,
        _: Option<&()>,
        cutoff: &f64,
    ) -> Result<Option<MergeTime>> {
        let s = &self.0;
        let (ti, tj) = (s.time(i), s.time(j));
        let newest = ti.min(tj);
        if newest < *cutoff {
            return Ok(None);
        }
        let h = (newest - cutoff) + 1e-12 * (newest.abs() + cutoff.abs());
        if s.model
            .duration_exceeds(s.message(i), s.message(j), (ti - tj).abs(), 1.0, h)
        {
            return Ok(None);
        }
        self.best_time(i, j).map(Some)
    }

    fn merge(&mut self, i: u32, j: u32, merged: u32) -> Result<()> {
        let t = self.best_time(i, j)?.time.min(self.0.now());
        let id = self.0.merge(i, j, t);
        debug_assert_eq!(id, merged);
        Ok(())
    }
}
