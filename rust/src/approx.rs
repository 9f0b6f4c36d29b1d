//! Options of the approximate, linear-time searches for data sets too large for an exact,
//! quadratic one: the rose tree's ([`crate::brt::approximate`]) and Greedy-Rate1's
//! ([`crate::coalescent::greedy_rate1_approx`]). Both sample a part's rows, fit the sample,
//! send every row to one of the sample tree's top clusters and treat each cluster's rows the
//! same way until a part has at most `exact_below` rows.

use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::error::{Result, RoseTreeError};
use crate::parallel::Threads;

/// Options of the approximate search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApproxParams {
    /// Parts with at most this many rows are built by the exact greedy search.
    pub exact_below: usize,
    /// Rows sampled to find the top-level clusters of a larger part.
    pub sample: usize,
    /// Seed of the sampling.
    pub seed: u64,
}

impl Default for ApproxParams {
    fn default() -> Self {
        Self {
            exact_below: 4000,
            sample: 1000,
            seed: 0,
        }
    }
}

impl ApproxParams {
    /// Checks the options.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `exact_below` below 2 or `sample` below 2.
    pub fn check(&self) -> Result<()> {
        if self.exact_below < 2 {
            return Err(RoseTreeError::param("exact_below", "must be at least 2"));
        }
        if self.sample < 2 || self.sample > self.exact_below {
            return Err(RoseTreeError::param(
                "approx_sample",
                format!("must lie between 2 and exact_below = {}", self.exact_below),
            ));
        }
        Ok(())
    }
}

/// Each part's result (`None` for an empty part) from `build(part, seed)`, in parallel on
/// `threads`. The seeds are drawn from `rng` before any part is built, in part order, so the
/// results do not depend on scheduling or on the number of threads.
///
/// # Errors
/// The first error of `build` in part order.
pub(crate) fn build_parts<S: Send>(
    threads: &Threads,
    parts: Vec<Vec<usize>>,
    rng: &mut Xoshiro256PlusPlus,
    build: impl Fn(Vec<usize>, u64) -> Result<S> + Sync + Send,
) -> Result<Vec<Option<S>>> {
    let seeded: Vec<(Vec<usize>, u64)> = parts.into_iter().map(|p| (p, rng.random())).collect();
    threads.try_map_owned(seeded, 2, |(part, seed)| {
        if part.is_empty() {
            Ok(None)
        } else {
            build(part, seed).map(Some)
        }
    })
}

/// The top of a sample tree (nodes `0..n_nodes`, root `root`, `children(v)`) above the
/// `cut` nodes (increasing), with each cut node replaced by the shape built for its part
/// (`built`, in `cut` order; `None` for an empty part) and each other node by `join` of its
/// children's shapes. Nodes left with one child are dropped; `None` if nothing is left.
/// Post-order without recursion: the top of a sample tree may be a long chain.
pub(crate) fn assemble<'t, S>(
    n_nodes: usize,
    root: usize,
    children: impl Fn(usize) -> &'t [usize],
    cut: &[usize],
    mut built: Vec<Option<S>>,
    join: impl Fn(Vec<S>) -> S,
) -> Option<S> {
    let mut done: Vec<Option<S>> = (0..n_nodes).map(|_| None).collect();
    let mut stack = vec![(root, false)];
    while let Some((v, expanded)) = stack.pop() {
        if let Ok(k) = cut.binary_search(&v) {
            done[v] = built[k].take();
        } else if expanded {
            let mut kids: Vec<S> = children(v).iter().filter_map(|&c| done[c].take()).collect();
            done[v] = match kids.len() {
                0 => None,
                1 => kids.pop(),
                _ => Some(join(kids)),
            };
        } else {
            stack.push((v, true));
            stack.extend(children(v).iter().map(|&c| (c, false)));
        }
    }
    done[root].take()
}

/// The shapes as the leaves of a balanced binary tree made by `join2`, in their order (one
/// shape: itself).
///
/// # Panics
/// If `shapes` is empty.
pub(crate) fn balanced<S>(mut shapes: Vec<S>, join2: &impl Fn(S, S) -> S) -> S {
    if shapes.len() == 1 {
        return shapes.pop().expect("one shape");
    }
    let right = shapes.split_off(shapes.len() / 2);
    join2(balanced(shapes, join2), balanced(right, join2))
}
