//! An approximate greedy search for data sets too large for the exact, quadratic one.
//!
//! In the manner of Heller & Ghahramani's randomised BHC: the top of the tree is found on a
//! random sample (grown while its clusters are too small to have been seen, see
//! [`Approx::sample_tree`]), the sample is split into groups (the sample tree's nodes where
//! it becomes plausible that their rows form one cluster, see [`top_clusters`]), every row
//! is sent to the group holding the sample's cluster under which it is most likely (up to
//! 1,024 of them), the sample tree's structure above the groups is kept, and each part is
//! treated the same way until it is small enough for the exact greedy search
//! ([`super::greedy`]). Rows of a cluster that has no rows in the sample may be sent
//! to several parts; so at the end the parts' plausible clusters (at most `exact_below` of
//! them) are joined afresh by the greedy search, each as one cluster of its rows
//! ([`regroup`]). Where that raises the evidence by more than [`REBUILD_GAIN`] nats a row
//! (the parts split clusters), finer units are joined the same way (the parts' trees split
//! down to `exact_below` units and at least two rows a unit, the least plausible nodes
//! first), and, where there are at most [`REBUILD_ROWS_PER_UNIT`] rows a unit, that tree's
//! largest subtrees of at most `exact_below` rows are rebuilt by the exact search
//! ([`Approx::rebuild`]) and the rebuilt tree's finer units are joined afresh in turn: the
//! rebuild pairs rows across the old parts, and the joining gives them a new top (one
//! cluster of independent bits, n = 8,000: 0.65 % of the exact tree's evidence lost
//! without this last step, 0.29 % with it). Of the trees made, the one with the highest
//! evidence is returned. Trees are evaluated exactly, so the reported `ln p(D | T)` is the
//! true evidence of the tree returned. With `n ≤ exact_below` this *is* the exact search.
//!
//! Cost: a level scores each row against at most 1,024 clusters (one
//! [`ClusterModel::log_marginal_query`] each), and the parts at the bottom cost
//! `O(exact_below)` pair scores per row, so the total is about `n · exact_below` instead of
//! `n²` pair scores. A part whose rows the sample does not split (they look alike) is cut
//! into blocks of `sample` rows, each built exactly: `O(sample)` pair scores per row.
//! Regrouping costs one to three greedy searches over at most `exact_below` units; the
//! rebuild, where it runs, about as much again as the exact parts.
//!
//! The parts are independent: they are built in parallel, each with its own seed drawn
//! from its parent's generator before any is built, so the tree does not depend on the
//! number of threads or on the order in which parts finish.

use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use super::RoseTree;
use super::evaluate::{from_log_f, log_evidence_from_log_f, node_log_f};
use super::greedy::greedy;
use super::merge::MergeRule;
use super::mixing::Mixing;
pub use crate::approx::ApproxParams;
use crate::approx::{assemble, balanced, build_parts};
use crate::error::{Result, RoseTreeError};
use crate::models::RowQueries;
use crate::parallel::{PAR_THRESHOLD, Threads};
use crate::progress;
use crate::tree::Topology;

/// Levels of sample-and-split before the remaining parts are cut into exact blocks.
const MAX_DEPTH: usize = 32;

/// A tree over global row ids, built bottom-up before it is numbered.
enum Shape {
    Leaf(usize),
    Node(Vec<Shape>),
    /// A node of an exact part, with its `ln r` (eq 1.26): the final regrouping
    /// ([`regroup`]) takes these nodes, the least plausible split first, as its units.
    Exact(f64, Vec<Shape>),
}

struct Approx<'a, M: RowQueries> {
    model: &'a M,
    mixing: &'a Mixing,
    binary: bool,
    rule: MergeRule,
    leaves: &'a [M::Stats],
    threads: &'a Threads,
    /// Set by the calling thread when its interrupt fires; every part polls it.
    stop: &'a AtomicBool,
    /// Rows in finished exact parts, for progress reports.
    placed: &'a AtomicUsize,
    params: ApproxParams,
}

/// The approximate greedy rose tree (see the module documentation) of `leaves`.
///
/// # Errors
/// As [`greedy`], and [`RoseTreeError::InvalidParameter`] for invalid `params`.
#[allow(clippy::too_many_arguments)] // the greedy search's own options travel with it
pub fn approximate<M: RowQueries>(
    model: &M,
    mixing: &Mixing,
    binary: bool,
    rule: MergeRule,
    leaves: Vec<M::Stats>,
    params: ApproxParams,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<RoseTree> {
    params.check()?;
    let n = leaves.len();
    if n <= params.exact_below {
        return greedy(model, mixing, binary, rule, leaves, threads, interrupt);
    }
    let placed = AtomicUsize::new(0);
    // The parts are built on the pool; this thread polls the interrupt (which need not be
    // callable from other threads) and reports the rows placed, not the parts' own steps.
    let report = || {
        progress::report(
            "approximate search: rows placed",
            placed.load(Ordering::Relaxed),
            n,
        );
    };
    // The search's settings, with the stop flag of one polled run.
    macro_rules! search {
        ($stop:expr) => {
            Approx {
                model,
                mixing,
                binary,
                rule,
                leaves: &leaves,
                threads,
                stop: $stop,
                placed: &placed,
                params,
            }
        };
    }
    let shape = threads.run_polled(interrupt, &report, |stop| {
        progress::watch_with(None, || {
            search!(stop).build((0..n).collect(), 0, params.seed)
        })
    })?;
    // Every candidate is scored from its nodes' `ln f` alone, the better one kept as the
    // next is made; only the one returned is built.
    let score = |shape: &Shape| -> Result<Candidate> {
        let mut internal = Vec::new();
        number(shape, n, &mut internal);
        let topology = Topology::new(n, internal)?;
        let log_f = node_log_f(model, &topology, &leaves)?;
        let log_evidence = log_evidence_from_log_f(&topology, &log_f, mixing)?;
        Ok(Candidate {
            topology,
            log_f,
            log_evidence,
        })
    };
    let assembled = score(&shape)?;
    let gain_needed = assembled.log_evidence + REBUILD_GAIN * n as f64;
    let mut best = assembled;
    let join_units = |shape: Shape, units: Units| {
        regroup(
            model, mixing, binary, rule, &leaves, shape, units, threads, interrupt,
        )
    };
    // The parts' plausible clusters joined afresh.
    let plausible = Units {
        max: params.exact_below,
        max_log_r: 0.5f64.ln(),
    };
    let Some(regrouped) = join_units(shape, plausible)? else {
        drop(leaves);
        return from_log_f(&best.topology, &best.log_f, mixing);
    };
    best = best.or(score(&regrouped)?);
    // Regrouping that raised the evidence by more than `REBUILD_GAIN` nats a row met parts
    // that split clusters: finer units (at most `exact_below`, at least two rows a unit on
    // average) are joined, the parts drawn again from that tree and rebuilt, and the
    // rebuilt parts' finer units joined in turn.
    if best.log_evidence > gain_needed {
        let finest = Units {
            max: params.exact_below.min(n / 2),
            max_log_r: f64::INFINITY,
        };
        if let Some(finer) = join_units(regrouped, finest)? {
            best = best.or(score(&finer)?);
            if n <= REBUILD_ROWS_PER_UNIT * params.exact_below {
                let rebuilt =
                    threads.run_polled(interrupt, &|| {}, |stop| search!(stop).rebuild(finer))?;
                best = best.or(score(&rebuilt)?);
                if let Some(rejoined) = join_units(rebuilt, finest)? {
                    best = best.or(score(&rejoined)?);
                }
            }
        }
    }
    // The leaves' statistics are not needed to build the tree returned.
    drop(leaves);
    from_log_f(&best.topology, &best.log_f, mixing)
}

/// The gain in `ln p(D | T)` per row from regrouping the parts' plausible clusters above
/// which finer units are regrouped and the parts rebuilt. Smaller gains come from
/// rearranging the top (20 clusters of skewed sizes in 8,000 rows: 0.001 nats a row);
/// parts that split clusters lose more (1,000 clusters of 8 rows in 8,000: 0.13).
const REBUILD_GAIN: f64 = 0.01;

/// The most rows per unit, on average (`n / exact_below`), at which the parts are rebuilt.
/// With larger units the regrouping has joined whole clusters, and the rebuild, as costly
/// as the exact parts, gains little (1,000 clusters in 10⁵ rows: 0.008 nats a row for
/// twice the time).
const REBUILD_ROWS_PER_UNIT: usize = 8;

/// A candidate tree of [`approximate`], evaluated.
struct Candidate {
    topology: Topology,
    log_f: Vec<f64>,
    log_evidence: f64,
}

impl Candidate {
    /// The one with the higher evidence; `self` on a tie.
    fn or(self, other: Self) -> Self {
        if other.log_evidence > self.log_evidence {
            other
        } else {
            self
        }
    }
}

/// The assembled tree's units joined afresh by the greedy search, each unit taken as one
/// cluster of its rows, with the units' own subtrees below; `None` where there are fewer
/// than three units or more than `units.max` parts.
///
/// The units start as the exact parts' roots (and the rows outside them, and below a
/// regrouped tree its units); the least plausible one (lowest `ln r`, eq 1.26) over all
/// parts is replaced by its children while its `ln r` is below `units.max_log_r` and there
/// are at most `units.max` units, a unit whose split would pass `units.max` being kept
/// whole. So the units are the parts' most plausible clusters, as fine as the budget
/// allows.
///
/// The assembled tree keeps the sample tree's top: rows whose cluster has none in the
/// sample are sent to several parts and end up in several units that never meet (1,000
/// clusters of 8 rows in 8,000: 18.7 % of the exact tree's evidence lost). Joining the
/// units again over all parts lets them meet, at the cost of a greedy search over at most
/// `units.max` units.
#[allow(clippy::too_many_arguments)] // the greedy search's own options travel with it
fn regroup<M: RowQueries>(
    model: &M,
    mixing: &Mixing,
    binary: bool,
    rule: MergeRule,
    leaves: &[M::Stats],
    shape: Shape,
    units: Units,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> Result<Option<Shape>> {
    // The parts' roots, without recursion: the assembled tree may be deep.
    let mut roots = Vec::new();
    let mut stack = vec![shape];
    while let Some(s) = stack.pop() {
        match s {
            Shape::Node(children) => stack.extend(children),
            unit => roots.push(unit),
        }
    }
    if roots.len() > units.max {
        return Ok(None);
    }
    let units = split_units(roots, units);
    if units.len() < 3 {
        return Ok(None);
    }
    // Units in the order of their first row, so that the search's ties do not depend on
    // the order the parts were assembled in.
    let rows: Vec<Vec<usize>> = units.iter().map(rows_of).collect();
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_unstable_by_key(|&u| rows[u].iter().min().copied());
    let stats = threads.try_map(&order, PAR_THRESHOLD, |&u| {
        let (first, rest) = rows[u].split_first().expect("a unit has rows");
        Ok(rest.iter().fold(leaves[*first].clone(), |acc, &r| {
            model.merge(&acc, &leaves[r])
        }))
    })?;
    let top = greedy(model, mixing, binary, rule, stats, threads, interrupt)?;
    let mut units: Vec<Option<Shape>> = {
        let mut by_position: Vec<Option<Shape>> = units.into_iter().map(Some).collect();
        order.iter().map(|&u| by_position[u].take()).collect()
    };
    // The top over the units, in post-order without recursion.
    let mut done: Vec<Option<Shape>> = (0..top.nodes().len()).map(|_| None).collect();
    let mut stack = vec![(top.root(), false)];
    while let Some((v, expanded)) = stack.pop() {
        let node = top.node(v);
        if node.is_leaf() {
            done[v] = units[v].take();
        } else if expanded {
            let kids = node
                .children
                .iter()
                .map(|&c| done[c].take().expect("built"))
                .collect();
            done[v] = Some(Shape::Node(kids));
        } else {
            stack.push((v, true));
            stack.extend(node.children.iter().map(|&c| (c, false)));
        }
    }
    Ok(done[top.root()].take())
}

/// How far [`regroup`] splits the parts' trees into units.
#[derive(Debug, Clone, Copy)]
struct Units {
    /// The most units.
    max: usize,
    /// Nodes with `ln r` at least this are not split.
    max_log_r: f64,
}

/// `units` with the least plausible [`Shape::Exact`] (lowest `ln r`; ties: the earlier
/// unit) replaced by its children while its `ln r` is below `limits.max_log_r` and there
/// are at most `limits.max` units; a unit whose split would pass `limits.max` is kept
/// whole. The units left, the unsplit ones first, then the children of split ones in the
/// order of their splits.
fn split_units(units: Vec<Shape>, limits: Units) -> Vec<Shape> {
    /// A unit's place in the min-heap: `ln r`, then the unit's index.
    struct Key(f64, usize);
    impl PartialEq for Key {
        fn eq(&self, other: &Self) -> bool {
            self.cmp(other).is_eq()
        }
    }
    impl Eq for Key {}
    impl PartialOrd for Key {
        fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Key {
        // Reversed, for the lowest first.
        fn cmp(&self, other: &Self) -> std::cmp::Ordering {
            other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
        }
    }
    let mut count = units.len();
    let mut slots: Vec<Option<Shape>> = units.into_iter().map(Some).collect();
    let mut heap: BinaryHeap<Key> = slots
        .iter()
        .enumerate()
        .filter_map(|(k, u)| match u {
            Some(Shape::Exact(log_r, _)) => Some(Key(*log_r, k)),
            _ => None,
        })
        .collect();
    while let Some(Key(log_r, k)) = heap.pop() {
        if log_r >= limits.max_log_r {
            break;
        }
        let Some(Shape::Exact(_, children)) = &slots[k] else {
            unreachable!("only exact nodes are queued")
        };
        if count - 1 + children.len() > limits.max {
            continue;
        }
        count += children.len() - 1;
        let Some(Shape::Exact(_, children)) = slots[k].take() else {
            unreachable!("checked above")
        };
        for child in children {
            if let Shape::Exact(log_r, _) = &child {
                heap.push(Key(*log_r, slots.len()));
            }
            slots.push(Some(child));
        }
    }
    slots.into_iter().flatten().collect()
}

/// The rows below a shape.
fn rows_of(shape: &Shape) -> Vec<usize> {
    let mut rows = Vec::new();
    let mut stack = vec![shape];
    while let Some(s) = stack.pop() {
        match s {
            Shape::Leaf(r) => rows.push(*r),
            Shape::Node(children) | Shape::Exact(_, children) => stack.extend(children),
        }
    }
    rows
}

/// Most groups a split of the sample may have.
const MAX_GROUPS: usize = 64;

/// Most clusters of the sample that rows are scored against when they are routed (each
/// below one of the split's groups): scoring a row against its group alone, a mixture of
/// clusters taken as one, sends rows of one small cluster to different parts.
const MAX_ROUTING_CLUSTERS: usize = 1024;

/// The fewest rows a sample's plausible clusters should average (see
/// [`Approx::sample_tree`]).
const MIN_ROWS_PER_CLUSTER: usize = 16;

/// The nodes of a sample tree under which rows are sent: descending from the root, the most
/// implausible group (lowest `r`, eq 1.26) is replaced by its children while its `r` is
/// below one half and there are at most 64 groups. The root's children alone
/// would be a poor split when the top of the tree is a chain of unlikely merges: each side
/// is then a mixture of clusters scored as one cluster. Returned in increasing id order.
pub fn top_clusters(top: &RoseTree) -> Vec<usize> {
    clusters_at_most(top, MAX_GROUPS)
}

/// [`top_clusters`] with at most `max_groups` groups.
fn clusters_at_most(top: &RoseTree, max_groups: usize) -> Vec<usize> {
    let mut groups = vec![top.root()];
    loop {
        let worst = groups
            .iter()
            .enumerate()
            .filter(|&(_, &g)| !top.node(g).is_leaf())
            .min_by(|a, b| {
                let (ra, rb) = (top.value(*a.1).log_r(), top.value(*b.1).log_r());
                ra.total_cmp(&rb).then(a.1.cmp(b.1))
            });
        let Some((k, &g)) = worst else { break };
        let children = &top.node(g).children;
        if top.value(g).log_r() >= 0.5f64.ln() || groups.len() - 1 + children.len() > max_groups {
            break;
        }
        groups.swap_remove(k);
        groups.extend_from_slice(children);
    }
    groups.sort_unstable();
    groups
}

/// Post-order numbering: internal node `k` gets id `n + k`.
fn number(shape: &Shape, n: usize, internal: &mut Vec<Vec<usize>>) -> usize {
    match shape {
        Shape::Leaf(i) => *i,
        Shape::Node(children) | Shape::Exact(_, children) => {
            let ids = children.iter().map(|c| number(c, n, internal)).collect();
            internal.push(ids);
            n + internal.len() - 1
        }
    }
}

impl<M: RowQueries> Approx<'_, M> {
    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// The greedy tree of `stats` on this search's settings.
    fn greedy(&self, stats: Vec<M::Stats>) -> Result<RoseTree> {
        let interrupted = || self.interrupted();
        greedy(
            self.model,
            self.mixing,
            self.binary,
            self.rule,
            stats,
            self.threads,
            &interrupted,
        )
    }

    /// The exact greedy tree of the rows `rows`, as a shape over global ids.
    fn exact(&self, rows: &[usize]) -> Result<Shape> {
        if rows.len() == 1 {
            self.placed.fetch_add(1, Ordering::Relaxed);
            return Ok(Shape::Leaf(rows[0]));
        }
        let stats = rows.iter().map(|&r| self.leaves[r].clone()).collect();
        let tree = self.greedy(stats)?;
        self.placed.fetch_add(rows.len(), Ordering::Relaxed);
        fn shape(tree: &RoseTree, id: usize, rows: &[usize]) -> Shape {
            let node = tree.node(id);
            if node.is_leaf() {
                return Shape::Leaf(rows[id]);
            }
            let children = node
                .children
                .iter()
                .map(|&c| shape(tree, c, rows))
                .collect();
            Shape::Exact(tree.value(id).log_r(), children)
        }
        Ok(shape(&tree, tree.root(), rows))
    }

    /// `shape` with each of its largest subtrees of at most `exact_below` rows rebuilt by
    /// the exact search, in parallel; the structure above them is kept.
    fn rebuild(&self, shape: Shape) -> Result<Shape> {
        enum Cut {
            /// A subtree of at most `limit` rows, and its number of rows.
            Whole(Shape, usize),
            /// A subtree to rebuild: its index in `parts`.
            Part(usize),
            /// A node above the parts.
            Node(Vec<Cut>),
        }
        /// The cut, bottom-up: each node's rows are counted once, and collected only for
        /// the parts.
        fn cut(shape: Shape, limit: usize, parts: &mut Vec<Vec<usize>>) -> Cut {
            let (log_r, children) = match shape {
                Shape::Leaf(_) => return Cut::Whole(shape, 1),
                Shape::Node(children) => (None, children),
                Shape::Exact(log_r, children) => (Some(log_r), children),
            };
            let cuts: Vec<Cut> = children.into_iter().map(|c| cut(c, limit, parts)).collect();
            let rows = cuts.iter().try_fold(0, |acc, c| match c {
                Cut::Whole(_, rows) => Some(acc + rows),
                _ => None,
            });
            if let Some(rows) = rows.filter(|&rows| rows <= limit) {
                let children = cuts
                    .into_iter()
                    .map(|c| match c {
                        Cut::Whole(shape, _) => shape,
                        _ => unreachable!("all children are whole"),
                    })
                    .collect();
                let shape = match log_r {
                    Some(log_r) => Shape::Exact(log_r, children),
                    None => Shape::Node(children),
                };
                return Cut::Whole(shape, rows);
            }
            let children = cuts
                .into_iter()
                .map(|c| match c {
                    Cut::Whole(shape, _) => part(&shape, parts),
                    split => split,
                })
                .collect();
            Cut::Node(children)
        }
        fn part(shape: &Shape, parts: &mut Vec<Vec<usize>>) -> Cut {
            let mut rows = rows_of(shape);
            rows.sort_unstable();
            parts.push(rows);
            Cut::Part(parts.len() - 1)
        }
        fn paste(cut: Cut, built: &mut Vec<Option<Shape>>) -> Shape {
            match cut {
                Cut::Part(k) => built[k].take().expect("built once"),
                Cut::Node(children) => {
                    Shape::Node(children.into_iter().map(|c| paste(c, built)).collect())
                }
                Cut::Whole(..) => unreachable!("whole subtrees are parts"),
            }
        }
        let mut parts = Vec::new();
        let top = match cut(shape, self.params.exact_below, &mut parts) {
            Cut::Whole(shape, _) => part(&shape, &mut parts),
            top => top,
        };
        let mut built: Vec<Option<Shape>> = self
            .threads
            .try_map_owned(parts, 2, |rows| self.exact(&rows))?
            .into_iter()
            .map(Some)
            .collect();
        Ok(paste(top, &mut built))
    }

    /// The tree of the rows `rows`, with the generator of this part seeded by `seed`.
    fn build(&self, rows: Vec<usize>, depth: usize, seed: u64) -> Result<Shape> {
        if self.interrupted() {
            return Err(RoseTreeError::Interrupted);
        }
        if rows.len() <= self.params.exact_below {
            return self.exact(&rows);
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        if depth >= MAX_DEPTH {
            // Splits that keep peeling off a few rows: finish with exact blocks.
            return self.blocks(&rows, depth, &mut rng);
        }
        // The clusters of a random sample, and the sample tree's structure above them: the
        // parts are its top clusters; rows are scored against its finer clusters, each
        // below one part.
        let (stats, top) = self.sample_tree(&rows, &mut rng)?;
        let cut = top_clusters(&top);
        let fine = clusters_at_most(&top, MAX_ROUTING_CLUSTERS);
        let mut part_of_leaf = vec![0usize; stats.len()];
        for (g, &c) in cut.iter().enumerate() {
            for l in top.leaves_of(c) {
                part_of_leaf[l] = g;
            }
        }
        let part_of: Vec<usize> = fine
            .iter()
            .map(|&f| part_of_leaf[top.leaves_of(f)[0]])
            .collect();
        let groups: Vec<M::Stats> = fine
            .iter()
            .map(|&c| {
                let members = top.leaves_of(c);
                members[1..]
                    .iter()
                    .fold(stats[members[0]].clone(), |acc, &m| {
                        self.model.merge(&acc, &stats[m])
                    })
            })
            .collect();
        let queries: Vec<M::Query> = groups.iter().map(|g| self.model.query(g)).collect();
        let base: Vec<f64> = groups
            .iter()
            .map(|g| self.model.log_marginal(g))
            .collect::<Result<_>>()?;

        // Every row goes to the part of the cluster under which its predictive probability
        // is highest (ties: the first cluster).
        let assign = |&r: &usize| -> Result<usize> {
            let mut best = (f64::NEG_INFINITY, 0);
            for (g, (q, stats)) in queries.iter().zip(&groups).enumerate() {
                let gain = self.model.log_marginal_query(q, stats, &self.leaves[r])? - base[g];
                if gain > best.0 {
                    best = (gain, g);
                }
            }
            Ok(best.1)
        };
        let labels = self.threads.try_map(&rows, PAR_THRESHOLD, assign)?;
        let mut parts = vec![Vec::new(); cut.len()];
        for (&r, &g) in rows.iter().zip(&labels) {
            parts[part_of[g]].push(r);
        }
        if parts.iter().filter(|p| !p.is_empty()).count() < 2 {
            // The sample's split does not separate the rows: they look alike.
            return self.blocks(&rows, depth, &mut rng);
        }
        let built = self.build_all(parts, depth, &mut rng)?;
        let children = |v: usize| top.node(v).children.as_slice();
        let shape = assemble(
            top.nodes().len(),
            top.root(),
            children,
            &cut,
            built,
            Shape::Node,
        );
        Ok(shape.expect("at least two parts are not empty"))
    }

    /// The statistics of a random sample of `rows` and the sample's greedy tree. The sample
    /// starts at `params.sample` rows and doubles, up to `exact_below` and half the rows,
    /// while its plausible clusters (cut at `r ≥ ½`) average fewer than
    /// [`MIN_ROWS_PER_CLUSTER`] rows: such a sample has seen too few rows of the data's
    /// clusters to route the rest (many clusters of a few rows each, or no clusters).
    fn sample_tree(
        &self,
        rows: &[usize],
        rng: &mut Xoshiro256PlusPlus,
    ) -> Result<(Vec<M::Stats>, RoseTree)> {
        let limit = self.params.exact_below.min(rows.len() / 2);
        let mut size = self.params.sample.min(rows.len());
        loop {
            let picked = rand::seq::index::sample(rng, rows.len(), size);
            let mut sample: Vec<usize> = picked.into_iter().map(|k| rows[k]).collect();
            sample.sort_unstable();
            let stats: Vec<M::Stats> = sample.iter().map(|&r| self.leaves[r].clone()).collect();
            let top = self.greedy(stats.clone())?;
            if size >= limit || size >= MIN_ROWS_PER_CLUSTER * top.cut(0.5)?.len() {
                return Ok((stats, top));
            }
            size = (2 * size).min(limit);
        }
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

    /// Rows that do not split: children of one node, blocks of `sample` rows in the order
    /// given (random, as the rows of a part were not sorted by any feature), each built
    /// exactly. Blocks of `sample` rather than `exact_below` rows: rows that look alike gain
    /// little from larger exact blocks, and each costs `O(block)` pair scores. A binary
    /// search (`binary`) joins the blocks in a balanced binary tree instead, so that every
    /// node of its result has two children.
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
        Ok(if self.binary {
            balanced(children, &|a, b| Shape::Node(vec![a, b]))
        } else {
            Shape::Node(children)
        })
    }
}

#[cfg(test)]
mod tests {
    use ndarray::Array2;

    use super::*;
    use crate::brt::evaluate::evaluate;
    use crate::models::{BetaBernoulli, ClusterModel};

    /// A cluster whose rows the parts split in two: regrouping joins the halves below a
    /// node of their own, apart from the parts' other clusters.
    #[test]
    fn regrouping_joins_a_cluster_split_between_parts() {
        // Three prototypes on 24 bits, far apart; rows 0..8 are A, 8..12 B, 12..16 C.
        let proto = |k: usize, j: usize| (j / 8 == k) as u8 as f64;
        let x = Array2::from_shape_fn((16, 24), |(i, j)| {
            let k = if i < 8 {
                0
            } else if i < 12 {
                1
            } else {
                2
            };
            // One flipped bit per row, so the rows are not all equal.
            if j == (i * 5) % 24 {
                1.0 - proto(k, j)
            } else {
                proto(k, j)
            }
        });
        let model = BetaBernoulli::new(&[1.0], &[1.0], 24).unwrap();
        let leaves = model.leaf_stats_all(x.view()).unwrap();
        let cluster =
            |rows: std::ops::Range<usize>| Shape::Exact(0.0, rows.map(Shape::Leaf).collect());
        // The assembled tree: A's halves in different parts, each beside another cluster.
        let assembled = || {
            Shape::Node(vec![
                Shape::Node(vec![cluster(0..4), cluster(8..12)]),
                Shape::Node(vec![cluster(4..8), cluster(12..16)]),
            ])
        };
        // The parts' plausible clusters (ln r = 0 ≥ ln ½) are not split.
        let units = Units {
            max: 10,
            max_log_r: 0.5f64.ln(),
        };
        let threads = Threads::new(Some(1)).unwrap();
        for binary in [false, true] {
            let shape = assembled();
            let regrouped = regroup(
                &model,
                &Mixing::Brt { gamma: 0.5 },
                binary,
                MergeRule::LikelihoodRatio,
                &leaves,
                shape,
                units,
                &threads,
                &|| false,
            )
            .unwrap()
            .expect("four units");
            let mut internal = Vec::new();
            number(&regrouped, 16, &mut internal);
            let tree = evaluate(
                &model,
                &Mixing::Brt { gamma: 0.5 },
                &Topology::new(16, internal).unwrap(),
                &leaves,
            )
            .unwrap();
            let a: Vec<usize> = (0..8).collect();
            assert!(
                (0..tree.nodes().len()).any(|v| tree.leaves_of(v) == a),
                "no node holds exactly the rows of A"
            );
        }
        // More units than exact_below, or fewer than three: nothing to regroup.
        let few = Shape::Node(vec![Shape::Leaf(0), Shape::Leaf(1)]);
        let many = Shape::Node((0..16).map(Shape::Leaf).collect());
        for shape in [few, many] {
            let mixing = Mixing::Brt { gamma: 0.5 };
            let rule = MergeRule::LikelihoodRatio;
            let none = regroup(
                &model,
                &mixing,
                false,
                rule,
                &leaves,
                shape,
                units,
                &threads,
                &|| false,
            );
            assert!(none.unwrap().is_none());
        }
    }

    /// Units split the least plausible first, up to the budget and below `max_log_r`; a
    /// unit too wide for the budget stays whole while narrower ones are split.
    #[test]
    fn units_split_the_least_plausible_first_within_the_budget() {
        let leaves = |rows: std::ops::Range<usize>| rows.map(Shape::Leaf).collect::<Vec<_>>();
        // Part one: a root (ln r = -5) over a wide node (-3, 6 rows) and a pair (-1).
        // Part two: a node (-2) over a pair (-0.5) and a row.
        let parts = || {
            vec![
                Shape::Exact(
                    -5.0,
                    vec![
                        Shape::Exact(-3.0, leaves(0..6)),
                        Shape::Exact(-1.0, leaves(6..8)),
                    ],
                ),
                Shape::Exact(
                    -2.0,
                    vec![Shape::Exact(-0.5, leaves(8..10)), Shape::Leaf(10)],
                ),
            ]
        };
        let split = |max, max_log_r| {
            let mut rows: Vec<Vec<usize>> = split_units(parts(), Units { max, max_log_r })
                .iter()
                .map(|u| {
                    let mut r = rows_of(u);
                    r.sort_unstable();
                    r
                })
                .collect();
            rows.sort_unstable();
            rows
        };
        let r = |v: std::ops::Range<usize>| v.collect::<Vec<_>>();
        // Two units: nothing can be split without passing the budget.
        assert_eq!(split(2, f64::INFINITY), vec![r(0..8), r(8..11)]);
        // Three: the root of part one (-5) goes first.
        assert_eq!(split(3, f64::INFINITY), vec![r(0..6), r(6..8), r(8..11)]);
        // Five: then part one's wide node (-3) would make 8; part two's node (-2) is split,
        // then the pair (-1), then the pair of part two (-0.5) would make 6.
        assert_eq!(
            split(5, f64::INFINITY),
            vec![r(0..6), r(6..7), r(7..8), r(8..10), r(10..11)]
        );
        // Nothing at or above ln r = -2.5 is split.
        let mut want: Vec<Vec<usize>> = (0..6).map(|i| vec![i]).collect();
        want.extend([r(6..8), r(8..11)]);
        assert_eq!(split(100, -2.5), want);
        // Everything, with room for all rows.
        assert_eq!(
            split(11, f64::INFINITY),
            (0..11).map(|i| vec![i]).collect::<Vec<_>>()
        );
    }

    /// The sample stays at `params.sample` rows where its clusters are large, and grows to
    /// its limit (`exact_below`, at most half the rows) where they are small.
    #[test]
    fn the_sample_grows_while_its_clusters_are_small() {
        use rand::Rng;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        // `k` random prototypes on 64 bits, `n / k` rows each, 5 % of the bits flipped.
        let mut rows_of = |k: usize, n: usize| {
            let protos: Vec<Vec<bool>> = (0..k)
                .map(|_| (0..64).map(|_| rng.random::<bool>()).collect())
                .collect();
            Array2::from_shape_fn((n, 64), |(i, j)| {
                let bit = protos[i % k][j] ^ (rng.random::<f64>() < 0.05);
                f64::from(u8::from(bit))
            })
        };
        let model = BetaBernoulli::new(&[1.0], &[1.0], 64).unwrap();
        let threads = Threads::new(Some(1)).unwrap();
        let (stop, placed) = (AtomicBool::new(false), AtomicUsize::new(0));
        let params = ApproxParams {
            exact_below: 100,
            sample: 40,
            seed: 0,
        };
        let mixing = Mixing::Brt { gamma: 0.5 };
        // Two clusters of 200 rows: 40 rows average 20 a plausible cluster.
        // A hundred clusters of 4 rows: a sample of 40 sees about 35 clusters.
        for (k, want) in [(2, 40), (100, 100)] {
            let x = rows_of(k, 400);
            let leaves = model.leaf_stats_all(x.view()).unwrap();
            let search = Approx {
                model: &model,
                mixing: &mixing,
                binary: false,
                rule: MergeRule::LikelihoodRatio,
                leaves: &leaves,
                threads: &threads,
                stop: &stop,
                placed: &placed,
                params,
            };
            let rows: Vec<usize> = (0..400).collect();
            let mut seed = Xoshiro256PlusPlus::seed_from_u64(1);
            let (stats, top) = search.sample_tree(&rows, &mut seed).unwrap();
            assert_eq!(stats.len(), want, "{k} clusters");
            assert_eq!(top.n_leaves(), want);
        }
    }
}
