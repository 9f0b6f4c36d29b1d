//! Trees that grow: new data rows added to a fitted rose tree one at a time, without
//! refitting (`partial_fit`).
//!
//! Every node keeps its cluster's sufficient statistics and [`Summary`], so the effect of a
//! new row on `ln p(D | T)` (BRT eq 1.5) can be scored exactly wherever it goes. Adding row
//! `x` has two phases.
//!
//! **Descent.** From the root the row follows, at each node, the child under which it is
//! most probable as one more member of a single cluster (the largest cluster predictive
//! `ln f(c ∪ {x}) − ln f(c)`, the routing of the approximate search), down to a leaf. Every
//! node `w` on that path is a candidate position: the row joins it (a new node with
//! children `w` and `x`, so that `x` becomes `w`'s sibling) or, in rose-tree mode, is
//! absorbed by it (one more child of `w`), whichever the batch search's [`best_merge`]
//! prefers. The positions are ranked by `ln p(D ∪ {x} | T')` of the whole tree, which is the
//! likelihood ratio of eq 1.23 taken over the insertion (at the root it is exactly the
//! `ln L` of merging `x` with the tree): every ancestor of the position gains `x` in its
//! `ln f`, and the change is carried up the path. Positions within rounding of each other
//! go to the higher one. A greedy descent with one level of look-ahead cannot do this:
//! above the level of the clusters every candidate is a hopeless cluster, and stopping and
//! descending tie. The descent costs one `ln f(c ∪ {x})` per child of each node on the
//! path, `O(depth · branching · d)`, and `O(depth²)` additions to rank the positions.
//!
//! **Repairs.** Then, walking back up the path, each edge `(p, u)` is offered a bounded set
//! of local moves in the manner of PERCH's rotations (Kobren et al. 2017): swapping a child
//! of `u` with a sibling of `u` (a nearest-neighbour interchange, which includes PERCH's
//! rotation of a masked leaf with its aunt), and in rose-tree mode contracting the edge
//! (`u`'s children become `p`'s, undoing a join that should have been an absorb). A move
//! leaves the leaves of `p` unchanged, so it changes `ln p` only through `p` and is accepted
//! when it raises `ln p(D | T)` (checked on the whole tree under `"dp"`). At most one move
//! per edge, and at most [`GrowParams::max_moves`] per row.
//!
//! Nothing here is random: the tree after a sequence of rows depends only on the tree, the
//! rows and their order.

use super::merge::{MergeOp, MergeRule, best_merge, merged_summary};
use super::mixing::Mixing;
use super::mixing::Summary;
use super::score::Score;
use super::{NodeValues, RoseTree};
use crate::error::{Result, RoseTreeError};
use crate::models::ClusterModel;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Options of [`GrowingTree`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GrowParams {
    /// The mixing-proportion rule (as in the fit of the tree).
    pub mixing: Mixing,
    /// Joins only (Bayesian hierarchical clustering): the tree stays binary.
    pub binary: bool,
    /// Repair moves accepted per inserted row, at most.
    pub max_moves: usize,
}

impl GrowParams {
    /// Rose-tree insertion under `mixing` with the default bound on repairs.
    pub fn new(mixing: Mixing) -> Self {
        Self {
            mixing,
            binary: false,
            max_moves: DEFAULT_MAX_MOVES,
        }
    }

    /// Joins only.
    #[must_use]
    pub fn binary(mut self, binary: bool) -> Self {
        self.binary = binary;
        self
    }
}

/// Repair moves accepted per row by default.
pub const DEFAULT_MAX_MOVES: usize = 32;

/// Units a local rebuild starts from, at most.
const MAX_UNITS: usize = 32;

/// Local rebuilds tried per inserted row, at most (the lowest nodes on the path that are
/// not clusters).
const MAX_REBUILDS: usize = 3;

/// Swaps tried per edge at most (a child of `u` against a sibling of `u`).
const MAX_SWAPS: usize = 24;

/// Candidate positions whose `ln p` differ by less than this (relative to `|ln p|`) are a
/// tie, and the tie goes to the position higher in the tree. When a row fits none of a
/// node's children, stopping at the node and descending into a child differ only by how
/// much of each cluster term the row dilutes: in exact arithmetic stopping wins by
/// `e^{−(tens of nats)}`, far below what a double resolves, and without the tolerance the
/// rounding of the candidates' sums would decide, sending such rows deep into unrelated
/// clusters.
const TIE: f64 = 1e-10;

/// A gain must exceed this (relative to `|ln p(D | T)|`) for a move to be taken, so that
/// rounding never makes two equivalent trees alternate.
const MIN_GAIN: f64 = 1e-12;

/// One node of a [`GrowingTree`]: a slot whose id never changes while it is in use.
#[derive(Debug, Clone)]
struct Slot<S> {
    parent: Option<usize>,
    children: Vec<usize>,
    stats: S,
    summary: Summary,
    /// The data row of a leaf.
    row: Option<usize>,
    /// `false` once the node was removed by a contraction (its slot is then free).
    alive: bool,
    /// Unique to these statistics: a new stamp whenever a slot's statistics are written.
    stamp: u64,
}

/// What happened to one inserted row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insertion {
    /// The row's index in the data (its leaf id in [`GrowingTree::to_rose_tree`]).
    pub row: usize,
    /// How it joined the tree: [`MergeOp::Join`] (a new node with the node it stopped at)
    /// or [`MergeOp::Absorb`] (one more child of that node).
    pub op: MergeOp,
    /// Nodes passed on the way down, the root included.
    pub depth: usize,
    /// Repair moves accepted.
    pub moves: usize,
}

/// A rose tree that accepts new rows: every node's statistics and summary, with stable node
/// ids. Built from a fitted [`RoseTree`] ([`GrowingTree::new`]), grown by
/// [`GrowingTree::insert`], exported by [`GrowingTree::to_rose_tree`].
///
/// # Examples
/// ```
/// use ndarray::array;
/// use rosetree::brt::{self, BrtParams, GrowParams, GrowingTree, Mixing};
/// use rosetree::models::{BetaBernoulli, ClusterModel};
///
/// let x = array![[1., 1., 0.], [1., 1., 0.], [0., 0., 1.], [0., 1., 1.]];
/// let model = BetaBernoulli::new(&[1.0], &[1.0], 3)?;
/// let mixing = Mixing::Brt { gamma: 0.5 };
/// let tree = brt::fit(&model, &BrtParams::new(mixing).check()?, x.view())?;
/// let leaves = model.leaf_stats_all(x.view())?;
/// let mut growing = GrowingTree::new(&model, GrowParams::new(mixing), &tree, leaves)?;
/// growing.insert(model.leaf_stats(array![0., 0., 1.].view(), 4)?)?;
/// let grown = growing.to_rose_tree();
/// assert_eq!(grown.n_leaves(), 5);
/// // The new row sits with the rows it resembles.
/// let parent = grown.node(4).parent.unwrap();
/// assert!(grown.leaves_of(parent).contains(&2));
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
pub struct GrowingTree<'m, M: ClusterModel> {
    model: &'m M,
    params: GrowParams,
    slots: Vec<Slot<M::Stats>>,
    free: Vec<usize>,
    root: usize,
    /// The slot of each row's leaf.
    leaf_slot: Vec<usize>,
    /// The next [`Slot::stamp`].
    next_stamp: u64,
    /// `ln f` of the union of two subtrees that [`agglomerate`](Self::agglomerate) scored,
    /// and their merge's score, by the [`content key`](content_key)s of the two subtrees'
    /// statistics.
    pair_log_f: RefCell<PairCache>,
    /// The model's [`join terms`](ClusterModel::join_terms) of internal nodes, by slot: the
    /// descent scores every child of each node it passes against the new row, and most of
    /// those children are scored again by the rows that follow.
    join: Vec<JoinTerms>,
    /// The leaf children of internal nodes packed side by side, by slot: a node of a flat
    /// cluster has hundreds of leaves, and the descent scores each against the new row.
    blocks: Vec<ChildBlock>,
}

/// The children of a node as the descent last saw them, with each leaf child's row packed
/// by the model ([`ClusterModel::pack_row`]) and its `ln f`, so that scoring the leaves
/// against a new row reads one contiguous array instead of every leaf's slot and
/// statistics. Kept in step with the node's child list by comparing the two (a leaf's slot
/// and statistics never change; an entry whose slot is not a leaf is scored as usual).
#[derive(Debug, Clone, Default)]
struct ChildBlock {
    children: Vec<usize>,
    /// Per child, `ln f` of its row where it is a packed leaf, else `None`.
    leaf_log_f: Vec<Option<f64>>,
    /// Per child, its packed row (`packed_row_words` words; unused for other children).
    packed: Vec<u64>,
}

/// A node's [`join terms`](ClusterModel::join_terms) and the [`stamp`](Slot::stamp) of the
/// statistics they were made from (`None`: none kept).
#[derive(Debug, Clone, Default)]
struct JoinTerms {
    stamp: Option<u64>,
    terms: Vec<f64>,
}

#[cfg(test)]
thread_local! {
    /// Rebuilds checked against a rebuild without kept pair scores while some were kept
    /// (tests only: a check that never ran with a warm cache would prove nothing).
    static CHECKED_WITH_CACHE: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
thread_local! {
    /// Descent scores taken from join terms (tests only: each was checked against the
    /// statistics).
    static JOINED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
thread_local! {
    /// Descent scores of leaves taken from packed rows (tests only: each was checked
    /// against the statistics).
    static PACKED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Pair scores kept across rows, at most this many (then the cache starts again empty).
const MAX_CACHED_PAIRS: usize = 1 << 18;

/// What [`GrowingTree::agglomerate`] scored for two subtrees `A`, `B`, by the content keys
/// of their statistics (in the order merged).
type PairCache = HashMap<(u128, u128), KeptPair, BuildHasherDefault<KeyHasher>>;

/// `ln f(A ∪ B)`, which the statistics determine, and the [`best_merge`] of the pair for
/// the two summaries with key `summaries` (a summary can change while the statistics stay,
/// as when a rebuild below a node changes its `ln p`; then the merge is scored again).
#[derive(Debug, Clone, Copy)]
struct KeptPair {
    log_f: f64,
    summaries: u128,
    score: Score,
    op: MergeOp,
}

/// A 128-bit key of every value of a summary that [`best_merge`] reads (all of them).
fn summary_key(s: &Summary) -> u128 {
    let word = |a: f64, b: f64| (u128::from(a.to_bits()) << 64) | u128::from(b.to_bits());
    let counts = ((s.n_leaves as u128) << 64) | s.n_children as u128;
    let mut key = combine_keys(counts, word(s.log_f, s.log_p));
    key = combine_keys(key, word(s.log_pi, s.log_1m_pi));
    key = combine_keys(key, word(s.sum_log_p_children, s.log_d));
    combine_keys(key, word(s.sum_log_d_children, s.log_excess))
}

/// A hasher for content keys, which are already uniformly mixed: it folds their words
/// together (the default SipHash spent a third of a rebuild's time hashing them).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, k: u128) {
        self.0 = self.0.rotate_left(23) ^ (k as u64) ^ ((k >> 64) as u64);
    }
}

/// A way for a new row to stop at a node: the operation and the summary of the node it
/// makes.
#[derive(Clone, Copy)]
struct Stop {
    op: MergeOp,
    summary: Summary,
}

impl<'m, M: ClusterModel> GrowingTree<'m, M> {
    /// The growing form of `tree`, a tree fitted to rows with statistics `leaves` under
    /// `model` (one per leaf, in row order). Every node's statistics are merged from its
    /// children's, and its summary recomputed under `params.mixing` from them.
    ///
    /// # Errors
    /// [`RoseTreeError::ShapeMismatch`] when `leaves` does not hold one entry per leaf;
    /// errors of the model.
    pub fn new(
        model: &'m M,
        params: GrowParams,
        tree: &RoseTree,
        leaves: Vec<M::Stats>,
    ) -> Result<Self> {
        let n = tree.n_leaves();
        if leaves.len() != n {
            return Err(RoseTreeError::ShapeMismatch {
                what: "tree".into(),
                expected: format!("{} leaves (one per data row)", leaves.len()),
                found: format!("{n} leaves"),
            });
        }
        let nodes = tree.nodes();
        let mut slots: Vec<Slot<M::Stats>> = Vec::with_capacity(nodes.len());
        for (row, stats) in leaves.into_iter().enumerate() {
            let summary = Summary::leaf(model.log_marginal(&stats)?, &params.mixing);
            slots.push(Slot {
                parent: nodes[row].parent,
                children: Vec::new(),
                stats,
                summary,
                row: Some(row),
                alive: true,
                stamp: row as u64,
            });
        }
        for (id, node) in nodes.iter().enumerate().skip(n) {
            let mut stats = slots[node.children[0]].stats.clone();
            for &c in &node.children[1..] {
                stats = model.merge(&stats, &slots[c].stats);
            }
            let log_f = model.log_marginal(&stats)?;
            slots.push(Slot {
                parent: node.parent,
                children: node.children.clone(),
                stats,
                summary: Summary::leaf(log_f, &params.mixing),
                row: None,
                alive: true,
                stamp: id as u64,
            });
            let summary = summary_of(&params.mixing, &slots, id, log_f);
            slots[id].summary = summary;
        }
        Ok(Self {
            model,
            params,
            slots,
            free: Vec::new(),
            root: tree.root(),
            leaf_slot: (0..n).collect(),
            next_stamp: nodes.len() as u64,
            pair_log_f: RefCell::new(PairCache::default()),
            join: Vec::new(),
            blocks: Vec::new(),
        })
    }

    /// The number of rows (leaves).
    pub fn n_leaves(&self) -> usize {
        self.leaf_slot.len()
    }

    /// `ln p(D | T)` of the current tree (eq 1.5).
    pub fn log_evidence(&self) -> f64 {
        self.slots[self.root].summary.log_p
    }

    /// The number of nodes on the longest path from the root to a leaf, the root included.
    pub fn depth(&self) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(self.root, 1)];
        while let Some((v, d)) = stack.pop() {
            deepest = deepest.max(d);
            stack.extend(self.slots[v].children.iter().map(|&c| (c, d + 1)));
        }
        deepest
    }

    /// Adds the row with statistics `stats` as leaf [`n_leaves`](Self::n_leaves): finds its
    /// position, updates the statistics and summaries on its path, and repairs the
    /// path (see the module docs).
    ///
    /// # Errors
    /// Errors of the model; [`RoseTreeError::Numerical`] when the tree's `ln p` becomes NaN.
    pub fn insert(&mut self, stats: M::Stats) -> Result<Insertion> {
        let mixing = self.params.mixing;
        let leaf = Summary::leaf(self.model.log_marginal(&stats)?, &mixing);
        // Descent: `path` holds the nodes passed and `ln f` of each with the row. The path
        // follows the child under which the row is most probable as one cluster member.
        let mut path: Vec<(usize, f64)> = Vec::new();
        let mut v = self.root;
        let mut log_f_v = self.log_f_joined(v, &stats)?;
        loop {
            path.push((v, log_f_v));
            let mut best: Option<(f64, usize, f64)> = None;
            let words = self.sync_block(v);
            for k in 0..self.slots[v].children.len() {
                let c = self.slots[v].children[k];
                let block = &self.blocks[v];
                let packed = match block.leaf_log_f[k] {
                    Some(leaf_log_f) if words > 0 => self
                        .model
                        .log_marginal_packed(&block.packed[k * words..(k + 1) * words], &stats)
                        .map(|log_f| (log_f, leaf_log_f)),
                    _ => None,
                };
                #[cfg(test)]
                if let Some((log_f, leaf_log_f)) = packed {
                    let direct = self
                        .model
                        .log_marginal_merged(&self.slots[c].stats, &stats)?;
                    assert_eq!(log_f.to_bits(), direct.to_bits(), "packed leaf {c}");
                    assert_eq!(leaf_log_f.to_bits(), self.slots[c].summary.log_f.to_bits());
                    PACKED.with(|n| n.set(n.get() + 1));
                }
                let (log_f_c, child_log_f) = match packed {
                    Some(scores) => scores,
                    None => (self.log_f_joined(c, &stats)?, self.slots[c].summary.log_f),
                };
                let predictive = log_f_c - child_log_f;
                if best.is_none_or(|(p, ..)| predictive > p) {
                    best = Some((predictive, c, log_f_c));
                }
            }
            match best {
                Some((_, c, log_f_c)) => (v, log_f_v) = (c, log_f_c),
                None => break,
            }
        }
        // Every position on the path, ranked by ln p(D ∪ {x} | T') of the whole tree; a
        // position lower down must win by more than rounding (see TIE).
        let mut chosen: Option<(f64, usize, Stop)> = None;
        for (j, &(w, log_f_w)) in path.iter().enumerate() {
            let here = self.best_stop(w, &leaf, log_f_w);
            let value = self.root_log_p_after(&path[..j], w, here.summary);
            let better = match &chosen {
                None => true,
                Some((best, ..)) => value > best + TIE * best.abs().max(1.0),
            };
            if better {
                chosen = Some((value, j, here));
            }
        }
        let (_, j, stop) = chosen.expect("the path holds the root");
        path.truncate(j + 1);
        let row = self.leaf_slot.len();
        let x = self.alloc(Slot {
            parent: None,
            children: Vec::new(),
            stats: stats.clone(),
            summary: leaf,
            row: Some(row),
            alive: true,
            stamp: 0,
        });
        self.leaf_slot.push(x);
        let (at, log_f_at) = path.pop().expect("the descent passes the root");
        // The ancestors of the stop gain the row: statistics and ln f (computed on the way).
        for &(v, log_f) in &path {
            let merged = self.model.merge(&self.slots[v].stats, &stats);
            let stamp = self.new_stamp();
            self.update_join_terms(v, &merged, &stats, stamp);
            let slot = &mut self.slots[v];
            slot.stats = merged;
            slot.stamp = stamp;
            slot.summary.log_f = log_f;
        }
        let merged = self.model.merge(&self.slots[at].stats, &stats);
        if stop.op == MergeOp::Absorb {
            let stamp = self.new_stamp();
            self.update_join_terms(at, &merged, &stats, stamp);
            let slot = &mut self.slots[at];
            slot.stats = merged;
            slot.stamp = stamp;
            slot.summary.log_f = log_f_at;
            slot.children.push(x);
            self.slots[x].parent = Some(at);
            self.refresh(at);
        } else {
            // A new node [at, x] takes `at`'s place in its parent (or as the root).
            let parent = self.slots[at].parent;
            let m = self.alloc(Slot {
                parent,
                children: vec![at, x],
                stats: merged,
                summary: stop.summary,
                row: None,
                alive: true,
                stamp: 0,
            });
            self.slots[at].parent = Some(m);
            self.slots[x].parent = Some(m);
            match parent {
                Some(p) => self.replace_child(p, at, m),
                None => self.root = m,
            }
            self.refresh(m);
        }
        #[cfg(test)]
        self.debug_check("after the descent");
        let moves = self.repair(x)?;
        #[cfg(test)]
        self.debug_check("after the repairs");
        let root_log_p = self.log_evidence();
        if root_log_p.is_nan() {
            return Err(RoseTreeError::Numerical(format!(
                "ln p(D | T) is NaN after inserting row {row}: the cluster model's ln f is \
                 not finite there"
            )));
        }
        Ok(Insertion {
            row,
            op: stop.op,
            depth: path.len() + 1,
            moves,
        })
    }

    /// The best way for a row with summary `leaf` to stop at `v`, given
    /// `log_f = ln f(leaves(v) ∪ {x})`: join, or absorb (rose-tree mode, `v` internal), the
    /// join on a tie.
    fn best_stop(&self, v: usize, leaf: &Summary, log_f: f64) -> Stop {
        let mixing = &self.params.mixing;
        let node = &self.slots[v].summary;
        // The batch search's choice between join and absorb, ranked as exact arithmetic
        // would (a hopeless absorb and join differ by the dissolved root's excess only).
        let (_, op) = best_merge(
            mixing,
            self.params.binary,
            MergeRule::LikelihoodRatio,
            node,
            leaf,
            log_f,
        );
        Stop {
            op,
            summary: merged_summary(mixing, op, node, leaf, log_f),
        }
    }

    /// `ln f(c ∪ {x})` of node `c` and the single row with statistics `x`: from `c`'s join
    /// terms where the model has them (made on first use and kept while `c`'s statistics
    /// stay, or brought up to date when a row joins it), otherwise from the statistics. The
    /// terms give the value the statistics give, bit for bit (checked in tests).
    fn log_f_joined(&mut self, c: usize, x: &M::Stats) -> Result<f64> {
        let slot = &self.slots[c];
        if slot.row.is_none() {
            if self.join.len() <= c {
                self.join.resize_with(self.slots.len(), JoinTerms::default);
            }
            let entry = &mut self.join[c];
            if entry.stamp != Some(slot.stamp) {
                let made = self.model.join_terms(&slot.stats, &mut entry.terms);
                entry.stamp = made.then_some(slot.stamp);
            }
            if entry.stamp.is_some() {
                if let Some(log_f) = self.model.log_marginal_joined(&entry.terms, x) {
                    #[cfg(test)]
                    {
                        let direct = self.model.log_marginal_merged(&slot.stats, x)?;
                        assert_eq!(
                            log_f.to_bits(),
                            direct.to_bits(),
                            "ln f from the join terms of node {c}: {log_f} against {direct}"
                        );
                        JOINED.with(|n| n.set(n.get() + 1));
                    }
                    return Ok(log_f);
                }
            }
        }
        self.model.log_marginal_merged(&slot.stats, x)
    }

    /// Brings the join terms of node `v`, if it has current ones, to its statistics `merged`
    /// after the row `x` joined it (new stamp `stamp`); drops them where the model cannot.
    fn update_join_terms(&mut self, v: usize, merged: &M::Stats, x: &M::Stats, stamp: u64) {
        let old = self.slots[v].stamp;
        if let Some(entry) = self.join.get_mut(v) {
            if entry.stamp == Some(old) {
                let updated = self.model.update_join_terms(&mut entry.terms, merged, x);
                entry.stamp = updated.then_some(stamp);
            }
        }
    }

    /// Brings the [`ChildBlock`] of internal node `v` in step with its children: entries
    /// are rewritten where the child at a position changed, appended where children were
    /// added at the end, and all made again otherwise. Returns the words per packed row
    /// (`0`: the model packs no rows, and the block is empty).
    fn sync_block(&mut self, v: usize) -> usize {
        if self.blocks.len() <= v {
            self.blocks
                .resize_with(self.slots.len(), ChildBlock::default);
        }
        let words = self.model.packed_row_words();
        let block = &mut self.blocks[v];
        let current = &self.slots[v].children;
        let m = current.len();
        let kept = block.children.len();
        let from = if kept == m {
            0
        } else if kept < m && block.children[..] == current[..kept] {
            kept
        } else {
            block.children.clear();
            block.leaf_log_f.clear();
            block.packed.clear();
            0
        };
        block.children.resize(m, usize::MAX);
        block.leaf_log_f.resize(m, None);
        block.packed.resize(m * words, 0);
        for (k, &c) in current.iter().enumerate().skip(from) {
            if block.children[k] == c && k < kept {
                continue;
            }
            block.children[k] = c;
            let slot = &self.slots[c];
            let packed = words > 0
                && slot.row.is_some()
                && self
                    .model
                    .pack_row(&slot.stats, &mut block.packed[k * words..(k + 1) * words]);
            block.leaf_log_f[k] = packed.then_some(slot.summary.log_f);
        }
        words
    }

    /// A stamp no slot has had.
    fn new_stamp(&mut self) -> u64 {
        self.next_stamp += 1;
        self.next_stamp - 1
    }

    /// Puts `slot` in a free slot or a new one, with a new stamp; returns its id.
    fn alloc(&mut self, mut slot: Slot<M::Stats>) -> usize {
        slot.stamp = self.new_stamp();
        match self.free.pop() {
            Some(id) => {
                self.slots[id] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        }
    }

    /// Replaces child `old` of `p` by `new`, in place.
    fn replace_child(&mut self, p: usize, old: usize, new: usize) {
        let children = &mut self.slots[p].children;
        let k = children
            .iter()
            .position(|&c| c == old)
            .expect("a node is among its parent's children");
        children[k] = new;
    }

    /// Recomputes the summary of internal node `v` from its `ln f` and its children's
    /// summaries (in child order, as a from-scratch evaluation sums them).
    fn refresh(&mut self, v: usize) {
        let log_f = self.slots[v].summary.log_f;
        self.slots[v].summary = summary_of(&self.params.mixing, &self.slots, v, log_f);
    }

    /// The repair pass after inserting leaf `x`: walks from `x`'s parent to the root,
    /// refreshing each node's summary and offering the edge above it the local moves of the
    /// module docs. Returns the number of moves accepted.
    fn repair(&mut self, x: usize) -> Result<usize> {
        let mut moves = 0;
        let mut rebuilds = 0;
        // `u` is the node on the path whose summary is current; `p` its parent.
        let mut u = self.slots[x].parent.expect("an inserted leaf has a parent");
        moves += self.unmask(x, u, self.params.max_moves - moves)?;
        loop {
            if rebuilds < MAX_REBUILDS
                && moves < self.params.max_moves
                && self.slots[u].children.len() <= MAX_UNITS
            {
                match self.try_rebuild(u)? {
                    Rebuild::Skipped => {}
                    Rebuild::Rejected => rebuilds += 1,
                    Rebuild::Taken => {
                        rebuilds += 1;
                        moves += 1;
                        // The row may now sit in a cluster that the rebuild kept whole: walk
                        // again from its new parent (the nodes above are refreshed on the way).
                        let parent = self.slots[x].parent.expect("a leaf has a parent");
                        if parent != u {
                            self.refresh_up_to(parent, u);
                            u = parent;
                            moves += self.unmask(x, u, self.params.max_moves - moves)?;
                            continue;
                        }
                    }
                }
            }
            let Some(p) = self.slots[u].parent else {
                break;
            };
            self.refresh(p);
            if moves < self.params.max_moves && self.try_move(p, u)? {
                moves += 1;
            }
            u = p;
        }
        Ok(moves)
    }

    /// The best local move at edge `(p, u)` (`u` an internal child of `p`, both summaries
    /// current), applied if it raises `ln p(D | T)`. Returns whether one was applied.
    fn try_move(&mut self, p: usize, u: usize) -> Result<bool> {
        // An earlier move may have moved `u` below another child of `p`.
        if self.slots[u].row.is_some() || self.slots[u].parent != Some(p) {
            return Ok(false);
        }
        let old = self.slots[p].summary;
        let mut best: Option<(f64, Summary, Move)> = None;
        let mut consider = |p_summary: Summary, m: Move| {
            let gain = p_summary.log_p - old.log_p;
            if gain > 0.0 && best.as_ref().is_none_or(|(g, ..)| gain > *g) {
                best = Some((gain, p_summary, m));
            }
        };
        let u_children = self.slots[u].children.clone();
        let siblings: Vec<usize> = self.slots[p]
            .children
            .iter()
            .copied()
            .filter(|&w| w != u)
            .collect();
        // Swaps: child i of u against sibling w of u. The statistics of u's other children
        // are merged once per i (from prefix and suffix merges where several i are tried, so
        // a node of m children costs O(m) merges, not O(m) per child); each swap is then
        // scored without building its statistics (those of the move taken are built when it
        // is applied).
        // Where the model subtracts statistics exactly, u's statistics less child i's are
        // those merges (one subtraction each: a node of a flat cluster has a thousand
        // children, of which a few are tried).
        let mut tried = 0;
        let subtracts = !siblings.is_empty()
            && self
                .model
                .split_off(&self.slots[u].stats, &self.slots[u_children[0]].stats)
                .is_some();
        let mut others = OtherChildren::new(
            self,
            &u_children,
            if subtracts {
                0
            } else {
                MAX_SWAPS.div_ceil(siblings.len().max(1))
            },
        );
        'swaps: for (k, &i) in u_children.iter().enumerate() {
            if tried == MAX_SWAPS || siblings.is_empty() {
                break;
            }
            let split = if subtracts {
                self.model
                    .split_off(&self.slots[u].stats, &self.slots[i].stats)
            } else {
                None
            };
            let rest_stats = match split {
                Some(rest) => rest,
                None => others.without(self, k),
            };
            for &w in &siblings {
                if tried == MAX_SWAPS {
                    break 'swaps;
                }
                tried += 1;
                let log_f = self
                    .model
                    .log_marginal_merged(&rest_stats, &self.slots[w].stats)?;
                let u_summary = self.summary_over(&u_children, log_f, |c| {
                    self.slots[if c == i { w } else { c }].summary
                });
                let p_summary =
                    self.summary_over(&self.slots[p].children, old.log_f, |c| match c {
                        c if c == u => u_summary,
                        c if c == w => self.slots[i].summary,
                        c => self.slots[c].summary,
                    });
                consider(p_summary, Move::Swap { i, w, u_summary });
            }
        }
        if !self.params.binary {
            // Contract the edge: u's children become p's, in u's place.
            let contracted: Vec<Child> = self.slots[p]
                .children
                .iter()
                .flat_map(|&c| {
                    if c == u {
                        u_children.iter().map(|&g| Child::Node(g)).collect()
                    } else {
                        vec![Child::Node(c)]
                    }
                })
                .collect();
            let p_summary = self.summary_of_children(&contracted, old.log_f);
            consider(p_summary, Move::Contract);
        }
        let Some((mut gain, p_summary, m)) = best else {
            return Ok(false);
        };
        if let Mixing::Dp { .. } = self.params.mixing {
            // The ancestors' π depend on p's d: score the move on the whole tree.
            gain = self.root_log_p_with(p, p_summary) - self.root_log_p_with(p, old);
        }
        if !clears(gain, old.log_p) {
            return Ok(false);
        }
        self.apply(p, u, m);
        Ok(true)
    }

    /// The local rebuild of node `u` (at most [`MAX_UNITS`] children): its subtree is cut into units,
    /// expanding from `u`'s children every internal node that is not a cluster (`r < 1/2`)
    /// while there are at most [`MAX_UNITS`], and the batch greedy search (the same ranking,
    /// [`best_merge`]) builds the top of the subtree again from those units. Taken when it
    /// raises `ln p(D | T)`. Evidence that arrived after a node was made can show that it
    /// is not one cluster; this lets the tree reorganise below it as the batch search
    /// would with all the rows: a multi-way node made when few rows had arrived may hold two
    /// clusters, which its own `r` (one cluster against all children apart) cannot show.
    fn try_rebuild(&mut self, u: usize) -> Result<Rebuild> {
        // Units, in depth-first order; `expanded` are the internal nodes dissolved.
        let mut units: Vec<usize> = self.slots[u].children.clone();
        let mut expanded: Vec<usize> = Vec::new();
        loop {
            let next = units
                .iter()
                .enumerate()
                .filter(|&(_, &w)| {
                    let s = &self.slots[w].summary;
                    s.n_children > 0 && !is_cluster(s)
                })
                .max_by(|a, b| {
                    let (na, nb) = (
                        self.slots[*a.1].summary.n_leaves,
                        self.slots[*b.1].summary.n_leaves,
                    );
                    na.cmp(&nb).then(b.0.cmp(&a.0))
                })
                .map(|(k, &w)| (k, w));
            let Some((k, w)) = next else { break };
            let grow_by = self.slots[w].children.len() - 1;
            if units.len() + grow_by > MAX_UNITS {
                break;
            }
            units.splice(k..=k, self.slots[w].children.iter().copied());
            expanded.push(w);
        }
        if units.len() < 3 {
            return Ok(Rebuild::Skipped);
        }
        let plan = self.agglomerate(&units)?;
        #[cfg(test)]
        self.check_cached_plan(&units, &plan)?;
        let old = self.slots[u].summary;
        let new = plan.nodes.last().expect("a plan has a root").summary;
        let gain = match self.params.mixing {
            Mixing::Dp { .. } => self.root_log_p_with(u, new) - self.root_log_p_with(u, old),
            _ => new.log_p - old.log_p,
        };
        if !clears(gain, old.log_p) {
            return Ok(Rebuild::Rejected);
        }
        // Apply: the plan's root takes u's slot; its other nodes get slots of their own.
        for &w in expanded.iter().chain(&plan.dissolved) {
            self.slots[w].alive = false;
            self.slots[w].parent = None;
            self.slots[w].children.clear();
            self.free.push(w);
        }
        let last = plan.nodes.len() - 1;
        let mut slot_of: Vec<usize> = Vec::with_capacity(plan.nodes.len());
        for (k, node) in plan.nodes.into_iter().enumerate() {
            let children: Vec<usize> = node
                .children
                .iter()
                .map(|r| match *r {
                    Ref::Node(id) => id,
                    Ref::Plan(j) => slot_of[j],
                })
                .collect();
            let id = if k == last {
                let slot = &mut self.slots[u];
                slot.children = children.clone();
                slot.summary = node.summary;
                u
            } else {
                self.alloc(Slot {
                    parent: None,
                    children: children.clone(),
                    stats: node
                        .stats
                        .expect("plan nodes below the root carry statistics"),
                    summary: node.summary,
                    row: None,
                    alive: true,
                    stamp: 0,
                })
            };
            for c in children {
                self.slots[c].parent = Some(id);
            }
            slot_of.push(id);
        }
        #[cfg(test)]
        self.debug_check("after a rebuild");
        Ok(Rebuild::Taken)
    }

    /// The greedy agglomeration of `units` (existing nodes) into one tree, as the batch
    /// search builds it from leaves: repeatedly the pair with the highest [`best_merge`]
    /// score (ties to the lowest pair of positions), merged by its operation.
    ///
    /// The `ln f` of each pair is kept (by the pair's content keys) for the rebuilds of the
    /// rows that follow: the rows after this one pass the same node, and of its units only
    /// those on the new row's path have changed, so most pairs, and the trees the greedy
    /// search merges from them, are scored again with the same statistics. A kept value is
    /// the value the model gives for those statistics, so the plan is the same either way.
    /// The pair's [`best_merge`] is kept with it, for the two summaries it was scored with
    /// (by a 128-bit key of all their values), and reused while both are unchanged.
    fn agglomerate(&self, units: &[usize]) -> Result<Plan<M::Stats>> {
        let mixing = &self.params.mixing;
        let binary = self.params.binary;
        // The live trees: their reference, summary, statistics (borrowed or merged) and
        // content key.
        let mut live: Vec<Live<M::Stats>> = units
            .iter()
            .map(|&w| {
                let key = content_key(self.slots[w].stamp);
                (Ref::Node(w), self.slots[w].summary, None, key)
            })
            .collect();
        let mut plan = Plan {
            nodes: Vec::new(),
            dissolved: Vec::new(),
        };
        // Pair scores, recomputed for pairs involving a new tree.
        let mut score: Vec<Vec<Option<(Score, MergeOp, f64)>>> =
            vec![vec![None; live.len()]; live.len()];
        // The key of each live tree's summary.
        let mut summary_keys: Vec<u128> = live.iter().map(|t| summary_key(&t.1)).collect();
        let pair = |a: &Live<M::Stats>,
                    b: &Live<M::Stats>,
                    summaries: u128|
         -> Result<(Score, MergeOp, f64)> {
            let cached = self.pair_log_f.borrow().get(&(a.3, b.3)).copied();
            if let Some(kept) = cached {
                if kept.summaries == summaries {
                    return Ok((kept.score, kept.op, kept.log_f));
                }
            }
            let log_f = match cached {
                Some(kept) => kept.log_f,
                None => self
                    .model
                    .log_marginal_merged(live_stats(&self.slots, a), live_stats(&self.slots, b))?,
            };
            let (score, op) = best_merge(
                mixing,
                binary,
                MergeRule::LikelihoodRatio,
                &a.1,
                &b.1,
                log_f,
            );
            let mut cache = self.pair_log_f.borrow_mut();
            if cache.len() >= MAX_CACHED_PAIRS {
                cache.clear();
            }
            let kept = KeptPair {
                log_f,
                summaries,
                score,
                op,
            };
            cache.insert((a.3, b.3), kept);
            Ok((score, op, log_f))
        };
        for i in 0..live.len() {
            for j in i + 1..live.len() {
                let summaries = combine_keys(summary_keys[i], summary_keys[j]);
                score[i][j] = Some(pair(&live[i], &live[j], summaries)?);
            }
        }
        let mut alive: Vec<bool> = vec![true; live.len()];
        loop {
            let mut best: Option<(usize, usize, Score, MergeOp, f64)> = None;
            for i in 0..live.len() {
                if !alive[i] {
                    continue;
                }
                for j in i + 1..live.len() {
                    if !alive[j] {
                        continue;
                    }
                    let (s, op, lf) = score[i][j].expect("scored pair");
                    if best.as_ref().is_none_or(|b| s.total_cmp(&b.2).is_gt()) {
                        best = Some((i, j, s, op, lf));
                    }
                }
            }
            let Some((i, j, _, op, log_f)) = best else {
                break;
            };
            let stats = self.model.merge(
                live_stats(&self.slots, &live[i]),
                live_stats(&self.slots, &live[j]),
            );
            let (a, b) = (&live[i], &live[j]);
            let summary = merged_summary(mixing, op, &a.1, &b.1, log_f);
            // The merged statistics are `a`'s merged with `b`'s, which their keys determine.
            let key = combine_keys(a.3, b.3);
            let (a, b) = (a.0, b.0);
            let take = |t: Ref, plan: &mut Plan<M::Stats>| -> Vec<Ref> {
                match t {
                    Ref::Node(w) => {
                        plan.dissolved.push(w);
                        self.slots[w]
                            .children
                            .iter()
                            .map(|&c| Ref::Node(c))
                            .collect()
                    }
                    Ref::Plan(k) => std::mem::take(&mut plan.nodes[k].children),
                }
            };
            let children = match op {
                MergeOp::Join => vec![a, b],
                MergeOp::Absorb => {
                    let mut c = take(a, &mut plan);
                    c.push(b);
                    c
                }
                MergeOp::AbsorbReverse => {
                    let mut c = take(b, &mut plan);
                    c.push(a);
                    c
                }
                MergeOp::Collapse => {
                    let mut c = take(a, &mut plan);
                    c.extend(take(b, &mut plan));
                    c
                }
            };
            // The statistics stay with the live tree until the search ends.
            plan.nodes.push(PlanNode {
                children,
                stats: None,
                summary,
            });
            let new = (Ref::Plan(plan.nodes.len() - 1), summary, Some(stats), key);
            alive[i] = false;
            alive[j] = false;
            summary_keys.push(summary_key(&new.1));
            live.push(new);
            alive.push(true);
            let m = live.len() - 1;
            for row in &mut score {
                row.push(None);
            }
            score.push(vec![None; live.len()]);
            for k in 0..m {
                if alive[k] {
                    let summaries = combine_keys(summary_keys[k], summary_keys[m]);
                    score[k][m] = Some(pair(&live[k], &live[m], summaries)?);
                }
            }
        }
        for (r, _, stats, _) in live {
            if let Ref::Plan(k) = r {
                plan.nodes[k].stats = stats;
            }
        }
        // Dissolved plan nodes were emptied; drop them, renumbering references.
        let keep: Vec<bool> = plan.nodes.iter().map(|n| !n.children.is_empty()).collect();
        let mut new_index = vec![usize::MAX; plan.nodes.len()];
        let mut next = 0;
        for (k, &kept) in keep.iter().enumerate() {
            if kept {
                new_index[k] = next;
                next += 1;
            }
        }
        let nodes = plan
            .nodes
            .into_iter()
            .zip(keep)
            .filter(|(_, kept)| *kept)
            .map(|(mut node, _)| {
                for r in &mut node.children {
                    if let Ref::Plan(k) = r {
                        *k = new_index[*k];
                    }
                }
                node
            })
            .collect();
        Ok(Plan {
            nodes,
            dissolved: plan.dissolved,
        })
    }

    /// PERCH's masking check after row `x` arrives under `u`: a sibling of the row may hold a
    /// child that belongs with the row rather than with the rest of the sibling, which a
    /// swap at the sibling's edge puts right. Tries the first two internal siblings, taking
    /// at most `budget` moves; returns the number taken.
    fn unmask(&mut self, x: usize, u: usize, budget: usize) -> Result<usize> {
        #[cfg(test)]
        self.debug_check("before unmask");
        let siblings: Vec<usize> = self.slots[u]
            .children
            .iter()
            .copied()
            .filter(|&s| s != x && self.slots[s].row.is_none())
            .take(2)
            .collect();
        let mut moves = 0;
        for s in siblings {
            if moves < budget && self.try_move(u, s)? {
                moves += 1;
            }
        }
        Ok(moves)
    }

    /// Refreshes the summaries from `from` up to (not including) its ancestor `to`.
    fn refresh_up_to(&mut self, from: usize, to: usize) {
        let mut v = from;
        while v != to {
            self.refresh(v);
            v = self.slots[v].parent.expect("`to` is an ancestor");
        }
    }

    /// `ln p(D ∪ {x} | T')` if the row `x` stopped at `w`, giving it summary `summary`, with
    /// `above` the nodes from the root down to `w`'s parent and `ln f` of each with the row.
    /// Sums are updated by difference: this ranks positions, it sets no node's values.
    fn root_log_p_after(&self, above: &[(usize, f64)], w: usize, summary: Summary) -> f64 {
        let (mut child, mut current) = (w, summary);
        for &(a, log_f_a) in above.iter().rev() {
            let node = &self.slots[a].summary;
            let old = &self.slots[child].summary;
            current = Summary::internal(
                &self.params.mixing,
                node.n_leaves + 1,
                node.n_children,
                log_f_a,
                node.sum_log_p_children - old.log_p + current.log_p,
                node.sum_log_d_children - old.log_d + current.log_d,
            );
            child = a;
        }
        current.log_p
    }

    /// `ln p(D | T)` if node `v` had summary `summary`: recomputed up the path from `v`,
    /// each ancestor from its `ln f` (current: the path's were updated by the insertion) and
    /// its children's summaries.
    fn root_log_p_with(&self, v: usize, summary: Summary) -> f64 {
        let (mut node, mut current) = (v, summary);
        while let Some(a) = self.slots[node].parent {
            let children: Vec<Child> = self.slots[a]
                .children
                .iter()
                .map(|&c| {
                    if c == node {
                        Child::Summary(current)
                    } else {
                        Child::Node(c)
                    }
                })
                .collect();
            current = self.summary_of_children(&children, self.slots[a].summary.log_f);
            node = a;
        }
        current.log_p
    }

    /// Applies move `m` at edge `(p, u)` and refreshes `p`.
    fn apply(&mut self, p: usize, u: usize, m: Move) {
        match m {
            Move::Swap { i, w, u_summary } => {
                // u's statistics less i's and with w's, where the model subtracts exactly
                // (the same counts as the merge of u's new children).
                let swapped = self
                    .model
                    .split_off(&self.slots[u].stats, &self.slots[i].stats)
                    .map(|rest| self.model.merge(&rest, &self.slots[w].stats));
                self.replace_child(u, i, w);
                self.replace_child(p, w, i);
                self.slots[w].parent = Some(u);
                self.slots[i].parent = Some(p);
                self.slots[u].stats =
                    swapped.unwrap_or_else(|| self.merged_stats(&self.slots[u].children));
                self.slots[u].stamp = self.new_stamp();
                self.slots[u].summary = u_summary;
            }
            Move::Contract => {
                let grandchildren = std::mem::take(&mut self.slots[u].children);
                for &g in &grandchildren {
                    self.slots[g].parent = Some(p);
                }
                let k = self.slots[p]
                    .children
                    .iter()
                    .position(|&c| c == u)
                    .expect("a node is among its parent's children");
                self.slots[p].children.splice(k..=k, grandchildren);
                self.slots[u].alive = false;
                self.slots[u].parent = None;
                self.free.push(u);
            }
        }
        self.refresh(p);
        #[cfg(test)]
        self.debug_check("after a move");
    }

    /// The statistics of the union of `nodes`, merged in order.
    fn merged_stats(&self, nodes: &[usize]) -> M::Stats {
        let mut stats = self.slots[nodes[0]].stats.clone();
        for &c in &nodes[1..] {
            stats = self.model.merge(&stats, &self.slots[c].stats);
        }
        stats
    }

    /// The summary of a node with `ln f = log_f` and a child of summary `of(c)` for each
    /// `c` in `children`, summed in child order (as [`summary_of_children`]
    /// (Self::summary_of_children) sums them).
    fn summary_over(
        &self,
        children: &[usize],
        log_f: f64,
        of: impl Fn(usize) -> Summary,
    ) -> Summary {
        let (mut n_leaves, mut log_p, mut log_d) = (0, -0.0, -0.0);
        for &c in children {
            let s = of(c);
            n_leaves += s.n_leaves;
            log_p += s.log_p;
            log_d += s.log_d;
        }
        Summary::internal(
            &self.params.mixing,
            n_leaves,
            children.len(),
            log_f,
            log_p,
            log_d,
        )
    }

    /// The summary of a node with `children` (ids or given summaries) and `ln f = log_f`,
    /// summed in child order.
    fn summary_of_children(&self, children: &[Child], log_f: f64) -> Summary {
        let of = |c: &Child| match c {
            Child::Node(id) => self.slots[*id].summary,
            Child::Summary(s) => *s,
        };
        Summary::internal(
            &self.params.mixing,
            children.iter().map(|c| of(c).n_leaves).sum(),
            children.len(),
            log_f,
            children.iter().map(|c| of(c).log_p).sum(),
            children.iter().map(|c| of(c).log_d).sum(),
        )
    }

    /// The current tree as a [`RoseTree`]: leaf `i` is row `i`; internal nodes are numbered
    /// in post-order from the root (children before parents, in child order).
    pub fn to_rose_tree(&self) -> RoseTree {
        let n = self.n_leaves();
        let mut id = vec![usize::MAX; self.slots.len()];
        for (row, &slot) in self.leaf_slot.iter().enumerate() {
            id[slot] = row;
        }
        let mut order: Vec<usize> = Vec::new();
        // Iterative post-order: (node, next child to visit).
        let mut stack = vec![(self.root, 0usize)];
        while let Some((v, k)) = stack.pop() {
            let children = &self.slots[v].children;
            if k < children.len() {
                stack.push((v, k + 1));
                stack.push((children[k], 0));
            } else if self.slots[v].row.is_none() {
                id[v] = n + order.len();
                order.push(v);
            }
        }
        let leaf_values = self
            .leaf_slot
            .iter()
            .map(|&s| (Vec::new(), self.slots[s].summary.values()));
        let internal = order.iter().map(|&v| {
            let children = self.slots[v].children.iter().map(|&c| id[c]).collect();
            (children, self.slots[v].summary.values())
        });
        let nodes: Vec<(Vec<usize>, NodeValues)> = leaf_values.chain(internal).collect();
        RoseTree::from_nodes(n, nodes)
    }

    /// Checks the links, sizes and statistics of every live node (tests only).
    #[cfg(test)]
    fn debug_check(&self, what: &str) {
        let mut stack = vec![self.root];
        assert!(
            self.slots[self.root].parent.is_none(),
            "{what}: root has a parent"
        );
        while let Some(v) = stack.pop() {
            let slot = &self.slots[v];
            assert!(slot.alive, "{what}: dead node {v} in the tree");
            if slot.row.is_some() {
                continue;
            }
            assert!(
                slot.children.len() >= 2,
                "{what}: node {v} has {} children",
                slot.children.len()
            );
            for &c in &slot.children {
                assert_eq!(self.slots[c].parent, Some(v), "{what}: parent of {c}");
                stack.push(c);
            }
            let merged = self.merged_stats(&slot.children);
            let (a, b) = (
                self.model.log_marginal(&merged).unwrap(),
                self.model.log_marginal(&slot.stats).unwrap(),
            );
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                "{what}: stats of {v}: {a} vs {b}"
            );
        }
    }

    /// Checks that `plan`, made with the pair scores kept from earlier rows, is the plan
    /// made with none kept: the same nodes with the same summaries, bit for bit (tests only).
    #[cfg(test)]
    fn check_cached_plan(&self, units: &[usize], plan: &Plan<M::Stats>) -> Result<()> {
        let kept = self.pair_log_f.take();
        let fresh = self.agglomerate(units);
        let cached = kept.len();
        *self.pair_log_f.borrow_mut() = kept;
        let fresh = fresh?;
        let shape = |p: &Plan<M::Stats>| -> Vec<(String, [u64; 4])> {
            p.nodes
                .iter()
                .map(|n| {
                    let v = n.summary.values();
                    let bits = [v.log_f, v.log_p, v.log_pi, v.log_1m_pi].map(f64::to_bits);
                    (format!("{:?}", n.children), bits)
                })
                .collect()
        };
        assert_eq!(
            shape(plan),
            shape(&fresh),
            "a rebuild with {cached} kept pair scores differs from one without"
        );
        assert_eq!(plan.dissolved, fresh.dissolved);
        CHECKED_WITH_CACHE.with(|n| n.set(n.get() + usize::from(cached > 0)));
        Ok(())
    }

    /// The slots of the internal nodes in the id order of [`to_rose_tree`](Self::to_rose_tree).
    #[cfg(test)]
    fn internal_order(&self) -> Vec<usize> {
        let tree = self.to_rose_tree();
        // Internal ids follow the post-order, which `to_rose_tree` computes from the root.
        let mut order = Vec::new();
        let mut stack = vec![(self.root, 0usize)];
        while let Some((v, k)) = stack.pop() {
            let children = &self.slots[v].children;
            if k < children.len() {
                stack.push((v, k + 1));
                stack.push((children[k], 0));
            } else if self.slots[v].row.is_none() {
                order.push(v);
            }
        }
        assert_eq!(order.len(), tree.nodes().len() - tree.n_leaves());
        order
    }

    /// The statistics of every row's leaf, in row order.
    pub fn leaf_stats(&self) -> Vec<M::Stats> {
        self.leaf_slot
            .iter()
            .map(|&s| self.slots[s].stats.clone())
            .collect()
    }
}

/// Whether a move's `gain` in `ln p` is a real gain for a tree (or subtree) with
/// `ln p = log_p`: above [`MIN_GAIN`] relative to it (NaN never is).
fn clears(gain: f64, log_p: f64) -> bool {
    gain > MIN_GAIN * log_p.abs().max(1.0)
}

/// Whether a node's posterior merge probability `r = π f / p` (eq 1.26) is at least 1/2:
/// its leaves are more probably one cluster than split. Leaves are clusters.
fn is_cluster(s: &Summary) -> bool {
    s.n_children == 0 || s.log_pi + s.log_f - s.log_p >= -std::f64::consts::LN_2
}

/// The statistics of a node's children but one, for the first `tried` children in turn:
/// child `k`'s are the merge of the children before it (merged as `k` grows) and of those
/// after it (suffix merges, made once), where more than one child of more than two is tried.
struct OtherChildren<'c, S> {
    children: &'c [usize],
    /// `after[j]`: the children `j + 1..` merged (`j < m − 1`); empty when unused.
    after: Vec<S>,
    /// The children before the one asked for last, merged.
    before: Option<S>,
}

impl<'c, S: Clone> OtherChildren<'c, S> {
    fn new<M: ClusterModel<Stats = S>>(
        tree: &GrowingTree<'_, M>,
        children: &'c [usize],
        tried: usize,
    ) -> Self {
        let m = children.len();
        let mut after = Vec::new();
        if tried.min(m) > 1 && m > 2 {
            // Built from the last child back, then put in child order.
            after.push(tree.slots[children[m - 1]].stats.clone());
            for &c in children[1..m - 1].iter().rev() {
                let merged = tree
                    .model
                    .merge(&tree.slots[c].stats, after.last().expect("one"));
                after.push(merged);
            }
            after.reverse();
        }
        Self {
            children,
            after,
            before: None,
        }
    }

    /// The children other than child `k` merged; `k` runs 0, 1, 2, … in turn.
    fn without<M: ClusterModel<Stats = S>>(&mut self, tree: &GrowingTree<'_, M>, k: usize) -> S {
        let m = self.children.len();
        if self.after.is_empty() {
            let rest: Vec<usize> = (0..m)
                .filter(|&j| j != k)
                .map(|j| self.children[j])
                .collect();
            return tree.merged_stats(&rest);
        }
        if k > 0 {
            let last = &tree.slots[self.children[k - 1]].stats;
            self.before = Some(match self.before.take() {
                Some(b) => tree.model.merge(&b, last),
                None => last.clone(),
            });
        }
        match (&self.before, k + 1 < m) {
            (Some(b), true) => tree.model.merge(b, &self.after[k]),
            (Some(b), false) => b.clone(),
            (None, _) => self.after[k].clone(),
        }
    }
}

/// A live tree of [`GrowingTree::agglomerate`]: its reference, summary, statistics (`None`
/// for an existing node, whose slot has them) and content key.
type Live<S> = (Ref, Summary, Option<S>, u128);

/// The statistics of a live tree: its own, or its slot's.
fn live_stats<'a, S>(slots: &'a [Slot<S>], entry: &'a Live<S>) -> &'a S {
    match (&entry.2, entry.0) {
        (Some(s), _) => s,
        (None, Ref::Node(w)) => &slots[w].stats,
        (None, Ref::Plan(_)) => unreachable!("plan nodes carry statistics"),
    }
}

/// The content key of an existing node's statistics, from the slot's stamp.
fn content_key(stamp: u64) -> u128 {
    combine_keys(u128::from(stamp), u128::MAX)
}

/// The content key of the statistics merged from statistics with keys `a` and `b`, in that
/// order: a 128-bit mix of the two (distinct statistics share a key with probability
/// about 2⁻¹²⁸ per pair of keys).
fn combine_keys(a: u128, b: u128) -> u128 {
    /// SplitMix64's finaliser.
    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    let words = [a as u64, (a >> 64) as u64, b as u64, (b >> 64) as u64];
    let (mut h1, mut h2) = (0x9e37_79b9_7f4a_7c15_u64, 0x6a09_e667_f3bc_c909_u64);
    for w in words {
        h1 = mix(h1 ^ w).wrapping_add(h2.rotate_left(29));
        h2 = mix(h2.wrapping_add(w) ^ h1.rotate_left(17));
    }
    (u128::from(h1) << 64) | u128::from(h2)
}

/// The outcome of [`GrowingTree::try_rebuild`].
enum Rebuild {
    /// Fewer than three units: nothing to rebuild.
    Skipped,
    /// Rebuilt, but the result was no better.
    Rejected,
    /// Rebuilt and taken.
    Taken,
}

/// A node of a rebuilt subtree, or an existing node.
#[derive(Debug, Clone, Copy)]
enum Ref {
    Node(usize),
    Plan(usize),
}

/// A node built by [`GrowingTree::try_rebuild`].
struct PlanNode<S> {
    children: Vec<Ref>,
    stats: Option<S>,
    summary: Summary,
}

/// A rebuilt subtree: its nodes, children before parents (the root last), and the existing
/// nodes whose roots its merges dissolved.
struct Plan<S> {
    nodes: Vec<PlanNode<S>>,
    dissolved: Vec<usize>,
}

/// A child in a hypothetical child list: an existing node, or a node with a new summary.
#[derive(Clone, Copy)]
enum Child {
    Node(usize),
    Summary(Summary),
}

/// A repair move at an edge `(p, u)`.
enum Move {
    /// Child `i` of `u` and sibling `w` of `u` trade places; `u` then has summary
    /// `u_summary`.
    Swap {
        i: usize,
        w: usize,
        u_summary: Summary,
    },
    /// `u`'s children become `p`'s, in `u`'s place.
    Contract,
}

/// The summary of internal slot `v` with `ln f = log_f`, from its children's summaries.
fn summary_of<S>(mixing: &Mixing, slots: &[Slot<S>], v: usize, log_f: f64) -> Summary {
    let children = &slots[v].children;
    Summary::internal(
        mixing,
        children.iter().map(|&c| slots[c].summary.n_leaves).sum(),
        children.len(),
        log_f,
        children.iter().map(|&c| slots[c].summary.log_p).sum(),
        children.iter().map(|&c| slots[c].summary.log_d).sum(),
    )
}

/// Adds the rows with statistics `rows` to `tree` (fitted to rows with statistics `leaves`)
/// one at a time, in order, and returns the grown tree with the statistics of all its
/// leaves. `interrupt` is polled before each row.
///
/// # Errors
/// As [`GrowingTree::new`] and [`GrowingTree::insert`]; [`RoseTreeError::Interrupted`].
pub fn grow<M: ClusterModel>(
    model: &M,
    params: GrowParams,
    tree: &RoseTree,
    leaves: Vec<M::Stats>,
    rows: Vec<M::Stats>,
    interrupt: &dyn Fn() -> bool,
) -> Result<(RoseTree, Vec<M::Stats>)> {
    let mut growing = GrowingTree::new(model, params, tree, leaves)?;
    for stats in rows {
        if interrupt() {
            return Err(RoseTreeError::Interrupted);
        }
        growing.insert(stats)?;
    }
    Ok((growing.to_rose_tree(), growing.leaf_stats()))
}

#[cfg(test)]
mod tests;
