//! An approximate Greedy-Rate1 search for data sets too large for the exact, quadratic one
//! ([`greedy_rate1`]), in the manner of the rose tree's ([`crate::brt::approximate`]).
//!
//! # The search
//! A part of more than `exact_below` rows draws a random sample of `sample` rows and fits
//! it by Greedy-Rate1. The sample tree is cut into groups ([`cut_groups`]): the lineages
//! alive below a time, found by undoing the sample tree's merges from the root, the oldest
//! first, while a group is expected to hold more than `exact_below` of the part's rows (at
//! most 64 groups). Every row of the part goes to the lineage it most probably joins at
//! `τ`, the oldest group's time (all groups are alive then): its leaf message propagated to `τ` against each lineage's posterior there given
//! the whole sample ([`Predictor::posterior_on_branch`]), which is the integrand of the
//! predictor's attachment density (Teh et al. §4.4) at `τ`, where the survival factor is
//! the same for every lineage. (Integrating over each group's subtree instead would cost
//! `O(sample²)` quadrature nodes per row where lineages overlap in time.) Each
//! group's rows are built the same way, recursively and in parallel, until a part has at
//! most `exact_below` rows and gets the exact Greedy-Rate1 search. A part whose rows all go
//! to one group (the sample does not split them) is cut into blocks of `sample` rows joined
//! by a balanced binary tree.
//!
//! # Times of the stitched tree
//! Each exact part keeps its own Greedy-Rate1 times (leaves at 0, so the parts share one
//! clock). The nodes that join parts (the sample tree's structure above its groups, and
//! the balanced joins of blocks) are **re-timed** from the bottom up by the Greedy-Rate1
//! rule itself: a join of subtrees `l` and `r` formed at `t_l` and `t_r` is placed at
//! `t*_{lr} = min(t_l, t_r) − δ*`, with `δ* ≥ 0` the most probable duration under rate 1
//! given the two subtrees' messages ([`MessageModel::optimal_duration`], eq 12 for Brownian
//! diffusion). So every parent is no later than its children, as in the exact search (where
//! `δ* = 0` gives equal times), and the joins sit where Greedy-Rate1 would have put the same
//! pair; the sample tree's own times, fitted on fewer rows, are not used.
//!
//! The returned tree is then evaluated exactly by [`log_joint_from_leaves`] (the same
//! evaluation as for any timed tree), so its `ln p(x, π)` is the true value of the tree
//! returned.
//!
//! # Regrouping
//! Rows of one cluster that the routing spread over several parts stay apart up to the
//! join of their parts: each fragment is a lineage of its own, which the prior charges for
//! while it lives. So the search ends by joining the assembled tree's `exact_below` oldest
//! lineages afresh: its `exact_below − 1` oldest merges are undone, and the subtrees then
//! alive, each with its message at its own time, are joined by Greedy-Rate1 (each pair's
//! best time given its own subtrees, [`greedy_rate1`]'s key), the joins timed by the rule
//! above. Of the assembled and the regrouped tree, the one with the larger `ln p(x, π)` is
//! returned. It costs one exact search over `exact_below` subtrees and two evaluations of
//! the tree; it repairs the fragments that the oldest `exact_below` lineages separate, not
//! those deeper down. (Regrouping every split instead, in the same way, cost 50–60 % more
//! time at 2·10⁴ and 10⁵ rows for little more evidence.) What is approximated is the search: rows routed to different groups never
//! merge below the group's join, and the parts' merges are chosen among fewer pairs. With
//! `n ≤ exact_below` this *is* [`greedy_rate1`].
//!
//! # Cost and determinism
//! Each level costs one sample fit (`O(sample²)`) and one predictive density per row (a
//! quadrature over the sample tree's branches), and the exact parts `O(exact_below)` pair
//! scores per row, so the total grows as `n · exact_below`, not `n²`. Parts are built in
//! parallel on the caller's [`Threads`], each with a seed drawn from its parent's generator
//! before any is built, so the tree depends on the seed only, not on the number of threads.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::greedy::{CoalescentFit, greedy_rate1, greedy_rate1_merges};
use super::kingman::log_joint_from_leaves;
use super::predict::Predictor;
use super::stitch::number_by_time;
pub use crate::approx::ApproxParams;
use crate::approx::{assemble, balanced, build_parts};
use crate::error::{Result, RoseTreeError};
use crate::models::messages::MessageModel;
use crate::parallel::Threads;
use crate::progress;
use crate::tree::Tree;

/// Levels of sample-and-split before the remaining parts are cut into exact blocks.
const MAX_DEPTH: usize = 32;

/// Most groups a split of the sample may have.
const MAX_GROUPS: usize = 64;

/// Rows routed in parallel from this many: a row's density costs a quadrature over the
/// sample tree's branches, so even a few are worth spreading.
const ROUTE_PARALLEL: usize = 2;

/// A tree over global row ids, built bottom-up before it is numbered and timed.
enum Shape {
    Leaf(usize),
    /// An exact Greedy-Rate1 tree over `rows` (its leaf `k` is row `rows[k]`), with times.
    Part {
        rows: Vec<usize>,
        tree: Tree,
    },
    /// A join of two shapes, to be timed by the Greedy-Rate1 rule.
    Join(Box<Shape>, Box<Shape>),
}

struct Approx<'a, M: MessageModel + Clone> {
    model: &'a M,
    leaves: &'a [(M::Message, f64)],
    threads: &'a Threads,
    /// Set by the calling thread when its interrupt fires; every part polls it.
    stop: &'a AtomicBool,
    /// Rows in finished exact parts, for progress reports.
    placed: &'a AtomicUsize,
    params: ApproxParams,
}

/// The approximate Greedy-Rate1 tree (see the [module docs](self)) of the leaf messages
/// `leaves` (as [`MessageModel::leaf_messages`] returns them), with its exact `ln p(x, π)`
/// (eq 7). With at most `params.exact_below` leaves this is [`greedy_rate1`].
///
/// Parts are built and rows routed on `threads`; `interrupt` is polled from the calling
/// thread every 20 ms and stops the search with [`RoseTreeError::Interrupted`], and progress
/// (rows placed in finished parts) goes to [`progress::report`].
///
/// # Errors
/// [`RoseTreeError::InvalidParameter`] for invalid `params` or no leaves; as
/// [`greedy_rate1`] otherwise.
pub fn greedy_rate1_approx<M: MessageModel + Clone>(
    model: &M,
    leaves: Vec<(M::Message, f64)>,
    params: ApproxParams,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<CoalescentFit> {
    params.check()?;
    let n = leaves.len();
    if n <= params.exact_below {
        return greedy_rate1(model, leaves, threads, interrupt);
    }
    let placed = AtomicUsize::new(0);
    // The parts are built on the pool; this thread polls the interrupt (which need not be
    // callable from other threads) and reports the rows placed, not the parts' own steps.
    let report = || {
        progress::report(
            "approximate coalescent: rows placed",
            placed.load(Ordering::Relaxed),
            n,
        );
    };
    let shape = threads.run_polled(interrupt, &report, |stop| {
        let search = Approx {
            model,
            leaves: &leaves,
            threads,
            stop,
            placed: &placed,
            params,
        };
        progress::watch_with(None, || search.build((0..n).collect(), 0, params.seed))
    })?;
    if interrupt() {
        return Err(RoseTreeError::Interrupted);
    }
    let tree = timed_tree(model, &leaves, shape)?;
    let log_joint = log_joint_from_leaves(model, &leaves, &tree)?;
    let assembled = CoalescentFit { tree, log_joint };
    let k = params.exact_below;
    let regrouped = regroup(model, &leaves, &assembled.tree, k, threads, interrupt)?;
    Ok(match regrouped {
        Some(fit) if fit.log_joint > assembled.log_joint => fit,
        _ => assembled,
    })
}

/// The tree `tree` with its `k` oldest lineages joined afresh (module docs, "Regrouping"):
/// the `k − 1` oldest merges undone, the subtrees then alive joined by Greedy-Rate1 from
/// their messages and times, each join timed by the Greedy-Rate1 rule; with its exact
/// `ln p(x, π)`. `None` where fewer than three lineages would be joined (nothing to
/// choose).
fn regroup<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    tree: &Tree,
    k: usize,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<Option<CoalescentFit>> {
    let n = leaves.len();
    let k = k.min(n);
    if k < 3 {
        return Ok(None);
    }
    let nodes = tree.nodes();
    let h = tree.heights().expect("a coalescent tree has times");
    // Internal nodes are numbered by time, the most recent first: the oldest k − 1 merges
    // are the last ids, and every ancestor of one of them is one of them.
    let first_old = nodes.len() - (k - 1);
    let mut waiting: Vec<Option<M::Message>> =
        leaves.iter().map(|(m, _)| Some(m.clone())).collect();
    waiting.resize(first_old, None);
    let mut internal = Vec::with_capacity(n - 1);
    for v in n..first_old {
        let kids = [nodes[v].children[0], nodes[v].children[1]];
        let incoming = kids.map(|c| {
            let msg = waiting[c].take().expect("each node has one parent");
            model.propagate(&msg, h[c] - h[v])
        });
        waiting[v] = Some(model.combine(&incoming).0);
        internal.push((kids, h[v]));
    }
    // What is still waiting is a lineage: a node whose parent was undone.
    let (lineages, clusters): (Vec<usize>, Vec<(M::Message, f64)>) = waiting
        .into_iter()
        .enumerate()
        .filter_map(|(v, m)| m.map(|m| (v, (m, h[v]))))
        .unzip();
    debug_assert_eq!(lineages.len(), k);
    let merges = greedy_rate1_merges(model, clusters.clone(), threads, interrupt)?;
    // The joins, timed from the bottom up as the assembled tree's are.
    let mut live: Vec<Option<(M::Message, f64)>> = clusters.into_iter().map(Some).collect();
    let id = |c: usize| {
        if c < k {
            lineages[c]
        } else {
            first_old + c - k
        }
    };
    for [a, b] in merges {
        let (ma, ta) = live[a].take().expect("a live cluster");
        let (mb, tb) = live[b].take().expect("a live cluster");
        let pair = model.pair(&ma, &mb);
        let t = ta.min(tb) - model.optimal_duration(&pair, (ta - tb).abs(), 1.0)?;
        if t.is_nan() {
            return Err(RoseTreeError::Numerical(
                "the time of a regrouped join is NaN".into(),
            ));
        }
        let incoming = [model.propagate(&ma, ta - t), model.propagate(&mb, tb - t)];
        live.push(Some((model.combine(&incoming).0, t)));
        internal.push(([id(a), id(b)], t));
    }
    let tree = number_by_time(n, &internal)?.0;
    let log_joint = log_joint_from_leaves(model, leaves, &tree)?;
    Ok(Some(CoalescentFit { tree, log_joint }))
}

/// The groups of a sample tree under which rows are sent (module docs): the lineages alive
/// just below a time `τ`, found by splitting the oldest group into its children, merge by
/// merge back from the root, while a group has more than `max_leaves` leaves and there are
/// fewer than 64 groups. Merges at the leaves' time (`t = 0`: with observation noise,
/// Greedy-Rate1 joins close rows after no time) are never split: their lineages cannot be
/// told apart at any time before the leaves, and a cut at `t = 0` would send every row to
/// its nearest sample point's group. Returned in increasing id order.
pub fn cut_groups(tree: &Tree, max_leaves: usize) -> Vec<usize> {
    let h = tree.heights().expect("a coalescent tree has times");
    let nodes = tree.nodes();
    let mut groups = vec![tree.root()];
    while groups.len() < MAX_GROUPS && groups.iter().any(|&g| nodes[g].n_leaves > max_leaves) {
        let oldest = groups
            .iter()
            .enumerate()
            .filter(|&(_, &g)| h[g] < 0.0)
            .min_by(|a, b| h[*a.1].total_cmp(&h[*b.1]).then(a.1.cmp(b.1)));
        let Some((k, &g)) = oldest else { break };
        groups.swap_remove(k);
        groups.extend_from_slice(&nodes[g].children);
    }
    groups.sort_unstable();
    groups
}

/// The time `τ` at which the [`cut_groups`] of a tree are told apart: the time of the
/// oldest group's node, when that is after the last split (the groups' parents) and before
/// the leaves; else halfway between the last split and the oldest group. At the last
/// split itself two sibling lineages would be one.
pub fn cut_time(tree: &Tree, cut: &[usize]) -> f64 {
    let h = tree.heights().expect("a coalescent tree has times");
    let split = cut
        .iter()
        .filter_map(|&g| tree.nodes()[g].parent)
        .map(|p| h[p])
        .fold(f64::NEG_INFINITY, f64::max);
    let oldest = cut.iter().map(|&g| h[g]).fold(0.0, f64::min);
    if oldest > split && oldest < 0.0 {
        oldest
    } else {
        0.5 * (split + oldest)
    }
}

/// Where the approximate search sends the rows of a part: the [`cut_groups`] of its sample
/// tree, told apart at the time `τ` of [`cut_time`], by each group's lineage posterior there
/// given the whole sample (see the [module docs](self)). It is all a worker needs to route
/// rows: a few messages, not the sample.
#[derive(Debug, Clone)]
pub struct Router<Msg> {
    /// The groups: nodes of the sample tree, in increasing id order.
    pub groups: Vec<usize>,
    /// The time at which the groups are told apart (`≤ 0`).
    pub tau: f64,
    /// Each group's posterior message at `tau` on its branch, given the whole sample.
    pub posteriors: Vec<Msg>,
}

impl<Msg: Clone> Router<Msg> {
    /// The router of the sample tree `tree` (leaf `i` has message `sample[i]`), cut into
    /// groups of at most `max_leaves` sample rows where 64 groups allow it.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if `tree` is not a timed binary coalescent tree over
    /// `sample`.
    pub fn new<M>(model: &M, sample: Vec<Msg>, tree: &Tree, max_leaves: usize) -> Result<Self>
    where
        M: MessageModel<Message = Msg> + Clone,
    {
        let groups = cut_groups(tree, max_leaves);
        let tau = cut_time(tree, &groups);
        let predictor = Predictor::from_leaves(model.clone(), sample, tree.clone())?;
        let posteriors = groups
            .iter()
            .map(|&g| predictor.posterior_on_branch(g, tau))
            .collect();
        Ok(Self {
            groups,
            tau,
            posteriors,
        })
    }

    /// The group (index into [`groups`](Self::groups)) whose lineage the row with leaf
    /// message `leaf` most probably joins at `tau`: the largest `ln Z` of the row's message
    /// propagated to `tau` against the group's posterior (the attachment density's integrand
    /// there; the survival factor is the same for every group). Ties go to the first group.
    pub fn route<M: MessageModel<Message = Msg>>(&self, model: &M, leaf: &Msg) -> usize {
        let leaf = model.propagate(leaf, -self.tau);
        let mut best = (f64::NEG_INFINITY, 0);
        for (g, post) in self.posteriors.iter().enumerate() {
            let lp = model.combine(&[post.clone(), leaf.clone()]).1;
            if lp > best.0 {
                best = (lp, g);
            }
        }
        best.1
    }
}

impl<M: MessageModel + Clone> Approx<'_, M> {
    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The Greedy-Rate1 fit of the rows `rows`.
    fn greedy(&self, rows: &[usize]) -> Result<CoalescentFit> {
        let interrupted = || self.interrupted();
        let leaves = rows.iter().map(|&r| self.leaves[r].clone()).collect();
        greedy_rate1(self.model, leaves, self.threads, &interrupted)
    }

    /// The exact Greedy-Rate1 tree of the rows `rows`.
    fn exact(&self, rows: Vec<usize>) -> Result<Shape> {
        if rows.len() == 1 {
            self.placed.fetch_add(1, Ordering::Relaxed);
            return Ok(Shape::Leaf(rows[0]));
        }
        let tree = self.greedy(&rows)?.tree;
        self.placed.fetch_add(rows.len(), Ordering::Relaxed);
        Ok(Shape::Part { rows, tree })
    }

    /// The tree of the rows `rows`, with the generator of this part seeded by `seed`.
    fn build(&self, rows: Vec<usize>, depth: usize, seed: u64) -> Result<Shape> {
        if self.interrupted() {
            return Err(RoseTreeError::Interrupted);
        }
        if rows.len() <= self.params.exact_below {
            return self.exact(rows);
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        if depth >= MAX_DEPTH {
            // Splits that keep peeling off a few rows: finish with exact blocks.
            return self.blocks(&rows, depth, &mut rng);
        }
        let sample_size = self.params.sample;
        let picked = rand::seq::index::sample(&mut rng, rows.len(), sample_size);
        let mut sample: Vec<usize> = picked.into_iter().map(|k| rows[k]).collect();
        sample.sort_unstable();
        let top = self.greedy(&sample)?.tree;
        // A group of `s` sample rows is expected to get `s · rows / sample` rows.
        let max_leaves = (sample_size * self.params.exact_below / rows.len()).max(1);
        let messages = sample.iter().map(|&r| self.leaves[r].0.clone()).collect();
        let router = Router::new(self.model, messages, &top, max_leaves)?;
        let cut = router.groups.clone();
        let route = |&r: &usize| -> Result<usize> {
            if self.interrupted() {
                return Err(RoseTreeError::Interrupted);
            }
            Ok(router.route(self.model, &self.leaves[r].0))
        };
        let labels = self.threads.try_map(&rows, ROUTE_PARALLEL, route)?;
        let mut parts = vec![Vec::new(); cut.len()];
        for (&r, &g) in rows.iter().zip(&labels) {
            parts[g].push(r);
        }
        if parts.iter().filter(|p| !p.is_empty()).count() < 2 {
            // The sample's split does not separate the rows: they look alike.
            return self.blocks(&rows, depth, &mut rng);
        }
        let built = self.build_all(parts, depth, &mut rng)?;
        let children = |v: usize| top.nodes()[v].children.as_slice();
        let shape = assemble(
            top.nodes().len(),
            top.root(),
            children,
            &cut,
            built,
            join_all,
        );
        Ok(shape.expect("at least two parts are not empty"))
    }

    /// Each part's tree (`None` for an empty part), built in parallel.
    fn build_all(
        &self,
        parts: Vec<Vec<usize>>,
        depth: usize,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<Vec<Option<Shape>>> {
        build_parts(self.threads, parts, rng, |part, seed| {
            self.build(part, depth + 1, seed)
        })
    }

    /// Rows that do not split: blocks of `sample` rows in the order given (random, as the
    /// rows of a part are not sorted by any feature), each built exactly and joined in a
    /// balanced binary tree.
    fn blocks(&self, rows: &[usize], depth: usize, rng: &mut Xoshiro256PlusPlus) -> Result<Shape> {
        let parts = rows
            .chunks(self.params.sample)
            .map(<[usize]>::to_vec)
            .collect();
        let children: Vec<Shape> = self
            .build_all(parts, depth, rng)?
            .into_iter()
            .flatten()
            .collect();
        Ok(balanced(children, &join))
    }
}

/// Two shapes joined, to be timed by the Greedy-Rate1 rule.
fn join(a: Shape, b: Shape) -> Shape {
    Shape::Join(Box::new(a), Box::new(b))
}

/// The children of a node of a (binary) sample tree, joined.
fn join_all(mut kids: Vec<Shape>) -> Shape {
    let right = kids.pop().expect("two children");
    let left = kids.pop().expect("two children");
    join(left, right)
}

/// Internal nodes over global ids, in post-order (children first): the two children and the
/// time, `None` for a join still to be timed.
struct Flat {
    n: usize,
    internal: Vec<([usize; 2], Option<f64>)>,
}

impl Flat {
    /// Appends `shape`'s internal nodes; returns the id of its root.
    fn push(&mut self, shape: Shape) -> usize {
        match shape {
            Shape::Leaf(r) => r,
            Shape::Part { rows, tree } => {
                let m = rows.len();
                let base = self.n + self.internal.len();
                let h = tree.heights().expect("a coalescent tree has times");
                let id = |c: usize| if c < m { rows[c] } else { base + c - m };
                for (v, node) in tree.nodes().iter().enumerate().skip(m) {
                    let kids = [id(node.children[0]), id(node.children[1])];
                    self.internal.push((kids, Some(h[v])));
                }
                base + m - 2
            }
            Shape::Join(left, right) => {
                let kids = [self.push(*left), self.push(*right)];
                self.internal.push((kids, None));
                self.n + self.internal.len() - 1
            }
        }
    }
}

/// The tree of `shape` with its joins timed by the Greedy-Rate1 rule (module docs), its
/// internal nodes numbered by time, the most recent first (the exact search's order).
fn timed_tree<M: MessageModel>(
    model: &M,
    leaves: &[(M::Message, f64)],
    shape: Shape,
) -> Result<Tree> {
    let n = leaves.len();
    let mut flat = Flat {
        n,
        internal: Vec::with_capacity(n - 1),
    };
    flat.push(shape);
    // One upward pass: each node's message at its own time, kept until its parent is done.
    let mut times: Vec<f64> = vec![0.0; n + flat.internal.len()];
    let mut waiting: Vec<Option<M::Message>> =
        leaves.iter().map(|(m, _)| Some(m.clone())).collect();
    waiting.resize(times.len(), None);
    for (k, &(kids, time)) in flat.internal.iter().enumerate() {
        let v = n + k;
        let [a, b] = kids.map(|c| waiting[c].take().expect("each node has one parent"));
        let (ta, tb) = (times[kids[0]], times[kids[1]]);
        let t = match time {
            Some(t) => t,
            None => {
                let pair = model.pair(&a, &b);
                let t = ta.min(tb) - model.optimal_duration(&pair, (ta - tb).abs(), 1.0)?;
                if t.is_nan() {
                    return Err(RoseTreeError::Numerical(
                        "the time of a join of two parts is NaN".into(),
                    ));
                }
                t
            }
        };
        times[v] = t;
        let incoming = [model.propagate(&a, ta - t), model.propagate(&b, tb - t)];
        waiting[v] = Some(model.combine(&incoming).0);
    }
    let internal: Vec<([usize; 2], f64)> = flat
        .internal
        .iter()
        .enumerate()
        .map(|(k, &(kids, _))| (kids, times[n + k]))
        .collect();
    Ok(number_by_time(n, &internal)?.0)
}

#[cfg(test)]
mod tests;
