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
//! the pair whose own optimum is the most recent, then the lower ids.
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

use super::kingman::pair_rate;
use crate::agglomerate::{Linkage, agglomerate};
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::parallel::Threads;
use crate::tree::{Topology, Tree};

/// A tree found by a coalescent search, with its `ln p(x, π)` (Teh et al. eq 7).
#[derive(Debug, Clone)]
pub struct CoalescentFit {
    /// The timed binary tree: leaves at time 0, coalescence times `≤ 0` as heights.
    pub tree: Tree,
    /// `ln p(x, π)` of the tree with the true rates `C(n − i + 1, 2)` in the prior.
    pub log_joint: f64,
}

/// The search state, indexed by cluster id (leaves `0..n`, the `k`-th merge `n + k`).
struct Rate1<'a, M: MessageModel> {
    model: &'a M,
    /// Messages of live clusters at their own times; `None` once merged away.
    messages: Vec<Option<M::Message>>,
    /// Each cluster's time `t_c`.
    times: Vec<f64>,
    children: Vec<[usize; 2]>,
    /// The time of the last merge.
    now: f64,
    /// `Σ ln Z` so far: leaves and merges (eqs 4 and 6).
    log_likelihood: f64,
    /// `ln p(π)` of the merges so far (eq 2, true rates).
    log_prior: f64,
}

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
    let n = leaves.len();
    if n == 0 {
        return Err(RoseTreeError::param("X", "needs at least 1 row"));
    }
    let capacity = 2 * n - 1;
    let mut search = Rate1 {
        model,
        log_likelihood: leaves.iter().map(|(_, z)| z).sum(),
        messages: Vec::with_capacity(capacity),
        times: vec![0.0; n],
        children: Vec::with_capacity(n - 1),
        now: 0.0,
        log_prior: 0.0,
    };
    search
        .messages
        .extend(leaves.into_iter().map(|(m, _)| Some(m)));
    agglomerate(&mut search, n, threads, interrupt)?;
    let root = search.messages[capacity - 1]
        .take()
        .expect("the root is live");
    let log_joint = search.log_prior + search.log_likelihood + model.root_log_z(&root);
    let internal = search
        .children
        .iter()
        .map(|c| c.to_vec())
        .collect::<Vec<_>>();
    let tree = Tree::new(&Topology::new(n, internal)?, Some(search.times))?;
    Ok(CoalescentFit { tree, log_joint })
}

impl<M: MessageModel> Rate1<'_, M> {
    /// `t*`, the most probable merge time of clusters `i` and `j` under rate 1 given their
    /// own subtrees (module docs).
    fn best_time(&self, i: u32, j: u32) -> Result<f64> {
        let (ti, tj) = (self.times[i as usize], self.times[j as usize]);
        let pair = self.model.pair(self.message(i), self.message(j));
        let delta = self.model.optimal_duration(&pair, (ti - tj).abs(), 1.0)?;
        let t = ti.min(tj) - delta;
        if t.is_nan() {
            return Err(RoseTreeError::Numerical(format!(
                "the merge time of clusters {i} and {j} is NaN"
            )));
        }
        Ok(t)
    }

    fn message(&self, id: u32) -> &M::Message {
        self.messages[id as usize]
            .as_ref()
            .expect("live cluster has a message")
    }
}

impl<M: MessageModel> Linkage for Rate1<'_, M> {
    /// The pair's best merge time `t*`: the most recent ranks first.
    type Key = f64;
    type Probe = ();

    fn score(&self, i: u32, j: u32, _: Option<&()>) -> Result<f64> {
        self.best_time(i, j)
    }

    fn merge(&mut self, i: u32, j: u32, merged: u32) -> Result<()> {
        debug_assert_eq!(merged as usize, self.messages.len());
        let t = self.best_time(i, j)?.min(self.now);
        // Lineages alive during [t, now): every live cluster, `i` and `j` included.
        let live = self.times.len() - 2 * self.children.len();
        self.log_prior -= pair_rate(live) * (self.now - t);
        self.now = t;
        let incoming: Vec<M::Message> = [i, j]
            .iter()
            .map(|&c| {
                let msg = self.messages[c as usize].take().expect("live cluster");
                self.model.propagate(&msg, self.times[c as usize] - t)
            })
            .collect();
        let (msg, log_z) = self.model.combine(&incoming);
        self.log_likelihood += log_z;
        self.messages.push(Some(msg));
        self.times.push(t);
        self.children.push([i as usize, j as usize]);
        Ok(())
    }
}
