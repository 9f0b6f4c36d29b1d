//! Greedy-MaxProb and Greedy-MinDuration (Teh, Daumé & Roy 2007, §4.2): the greedy
//! searches that use the true coalescence rate and so rescore every live pair at every step.
//!
//! # The `i`-th term of eq 7
//! Before the `i`-th merge there are `m = n − i + 1` live clusters and the current time
//! `now = t_{i−1}` is the last merge time (0 at the start); every live cluster `c` formed at
//! its own time `t_c ≥ now`. If clusters `l` and `r` merge after a further duration `δ ≥ 0`,
//! at `t = now − δ`, their branches have lengths `t_l − t` and `t_r − t`, summing to
//! `L₀ + 2δ` with the base length `L₀ = (t_l − now) + (t_r − now) ≥ 0`. The `i`-th factor of
//! eq 7 is then `exp(−C(m, 2)·δ) · Z(L₀ + 2δ)`, with `Z` the merge's normaliser (eq 4;
//! [`MessageModel::pair_log_z`]); its logarithm is the pair's objective
//!
//! `g_{lr}(δ) = −C(m, 2)·δ + ln Z_{lr}(L₀ + 2δ)`.
//!
//! Each pair's optimal duration `δ*_{lr} = argmax_{δ ≥ 0} g_{lr}(δ)` comes from
//! [`MessageModel::optimal_duration`] with the true rate `C(m, 2)` (eq 12 for Brownian
//! diffusion; for the multinomial a Newton solve, or with several rates the best of the
//! local maxima).
//!
//! - **Greedy-MaxProb** merges the pair with the largest `g_{lr}(δ*_{lr})`, the largest
//!   `i`-th term of eq 7 at its own optimum. The prior's pair-choice factor `1/C(m, 2)`
//!   and the rate `C(m, 2)` of the waiting-time density cancel in eq 2 and are common to
//!   every pair anyway, so they play no part. Ties (equal values): the lower ids `(l, r)`.
//! - **Greedy-MinDuration** merges the pair with the smallest `δ*_{lr}`, the pair that
//!   coalesces soonest. Several pairs can have `δ* = 0` exactly (a pair whose best time is
//!   already past, clamped at `now`); they are tied by the rule, and the tie goes to the
//!   largest `g_{lr}(0)`, then to the lower ids.
//!
//! Both merge the chosen pair at `now − δ*`.
//!
//! # Cost
//! The rate `C(m, 2)` and the base lengths change at every step, so every live pair is
//! rescored at every step, as the paper says: `Σ_m C(m, 2) ≈ n³/6` pair scores, each a
//! [`MessageModel::pair`] (`O(d)`) and an optimal duration (`O(1)` for Brownian diffusion,
//! `O(d)` per Newton step for the multinomial): `O(n³ d)` time overall against
//! Greedy-Rate1's `O(n² d)`. Memory is `O(n d)`: the live messages and no per-pair state.
//! Caching each live pair's [`MessageModel::Pair`] would save the `O(d)` of `pair()` but
//! costs `O(n²)` pairs: for `n = 2000` that is 2·10⁶ pairs, 32 MB for Brownian pairs but
//! about 370 MB for multinomial pairs with `d = 20` (one overlap per feature), whose
//! optimal duration costs as much as `pair()` anyway; recomputing keeps memory linear.
//!
//! # Threads and interrupts
//! The scan of a step is split by rows (the pairs `(l, r)` with `r` after `l` among the live
//! ids), each row scanned in order, rows in blocks of about 2¹⁵ pairs run on `threads`; the
//! best of each row and then of all rows is taken in one total order (the rule's key, then
//! the ids), so the tree is the same for any number of threads. `interrupt` is polled before
//! every block.

use super::kingman::pair_rate;
use super::merges::CoalescentFit;
use super::merges::Merges;
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::parallel::Threads;
use crate::progress;

/// Pairs scored between two polls of `interrupt`: a few ms to a few tens of ms on one core.
const PAIRS_PER_POLL: usize = 1 << 15;

/// Steps with fewer live clusters scan their pairs on the calling thread.
const MIN_PARALLEL_LIVE: usize = 64;

/// Which pair a step of the exact greedy search merges (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    MaxProb,
    MinDuration,
}

/// A scored pair `l < r` with its optimal duration `δ*` and `g(δ*)`.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    delta: f64,
    value: f64,
    l: u32,
    r: u32,
}

impl Rule {
    /// Whether `a` ranks strictly before `b`: one total order, whatever the threads.
    fn before(self, a: &Candidate, b: &Candidate) -> bool {
        let by_value = b.value.total_cmp(&a.value);
        let key = match self {
            Rule::MaxProb => by_value,
            Rule::MinDuration => a.delta.total_cmp(&b.delta).then(by_value),
        };
        key.then((a.l, a.r).cmp(&(b.l, b.r))).is_lt()
    }
}

/// Builds a tree by Greedy-MaxProb (Teh et al. §4.2): at every step, the live pair whose
/// `i`-th term of eq 7, `−C(m, 2)·δ + ln Z(L₀ + 2δ)`, is largest at its optimal duration
/// merges after that duration (see the [module docs](self)). Returns the tree and its
/// `ln p(x, π)` (eq 7). `O(n³)` pair scores, `O(n)` messages.
///
/// The leaves are the messages of the data rows (as [`MessageModel::leaf_messages`] returns
/// them). Pair scans run on `threads`; `interrupt` is polled every few ms and stops the
/// search with [`RoseTreeError::Interrupted`] when it returns `true`.
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] on `X` for no rows; [`RoseTreeError::Numerical`]
/// for a NaN duration or term; [`RoseTreeError::Interrupted`].
pub fn greedy_maxprob<M: MessageModel>(
    model: &M,
    leaves: Vec<(M::Message, f64)>,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<CoalescentFit> {
    exact_greedy(model, leaves, Rule::MaxProb, threads, interrupt)
}

/// Builds a tree by Greedy-MinDuration (Teh et al. §4.2): at every step, the live pair
/// whose optimal duration under the true rate `C(m, 2)` is the smallest merges after that
/// duration; pairs at duration 0 are ranked by their term of eq 7 (see the
/// [module docs](self)). Returns the tree and its `ln p(x, π)` (eq 7). `O(n³)` pair
/// scores, `O(n)` messages.
///
/// The leaves, `threads` and `interrupt` are as for [`greedy_maxprob`].
///
/// # Errors
/// As [`greedy_maxprob`].
pub fn greedy_minduration<M: MessageModel>(
    model: &M,
    leaves: Vec<(M::Message, f64)>,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<CoalescentFit> {
    exact_greedy(model, leaves, Rule::MinDuration, threads, interrupt)
}

fn exact_greedy<M: MessageModel>(
    model: &M,
    leaves: Vec<(M::Message, f64)>,
    rule: Rule,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<CoalescentFit> {
    let mut merges = Merges::new(model, leaves)?;
    let n = merges.n_leaves() as u32;
    // Live ids in increasing order: a merge removes two and appends the new, largest, id.
    let mut live: Vec<u32> = (0..n).collect();
    while live.len() > 1 {
        let best = best_pair(&merges, &live, rule, threads, interrupt)?;
        let t = merges.now() - best.delta;
        let merged = merges.merge(best.l, best.r, t);
        live.retain(|&c| c != best.l && c != best.r);
        live.push(merged);
        progress::report("merging", (n as usize) - live.len(), n as usize - 1);
    }
    merges.finish()
}

/// The pair that the rule merges next among the `live` clusters (at least two).
fn best_pair<M: MessageModel>(
    merges: &Merges<'_, M>,
    live: &[u32],
    rule: Rule,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<Candidate> {
    let m = live.len();
    let rows: Vec<usize> = (0..m - 1).collect();
    let min_parallel = if m >= MIN_PARALLEL_LIVE {
        2
    } else {
        usize::MAX
    };
    let mut best: Option<Candidate> = None;
    for block in rows.chunks((PAIRS_PER_POLL / m).max(1)) {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        let found = threads.try_map(block, min_parallel, |&a| {
            best_in_row(merges, live[a], &live[a + 1..], rule)
        })?;
        for cand in found.into_iter().flatten() {
            if best.is_none_or(|b| rule.before(&cand, &b)) {
                best = Some(cand);
            }
        }
    }
    Ok(best.expect("at least one pair"))
}

/// The best pair `(l, r)` for `r` in `right` (all live and after `l`), by the rule.
fn best_in_row<M: MessageModel>(
    merges: &Merges<'_, M>,
    l: u32,
    right: &[u32],
    rule: Rule,
) -> Result<Option<Candidate>> {
    let model = merges.model;
    let now = merges.now();
    let rate = pair_rate(merges.n_live());
    let (left, base_l) = (merges.message(l), merges.time(l) - now);
    let mut best: Option<Candidate> = None;
    for &r in right {
        let pair = model.pair(left, merges.message(r));
        let base = base_l + (merges.time(r) - now);
        let delta = model.optimal_duration(&pair, base, rate)?;
        if rule == Rule::MinDuration && best.is_some_and(|b| delta > b.delta) {
            // Cannot win: skip the term's value.
            continue;
        }
        let value = -rate * delta + model.pair_log_z(&pair, base + 2.0 * delta);
        if delta.is_nan() || value.is_nan() {
            return Err(RoseTreeError::Numerical(format!(
                "the optimal duration of clusters {l} and {r} or its term of eq 7 is NaN"
            )));
        }
        let cand = Candidate { delta, value, l, r };
        if best.is_none_or(|b| rule.before(&cand, &b)) {
            best = Some(cand);
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests;
