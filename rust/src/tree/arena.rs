//! A mutable tree with stable node ids, for Markov chain Monte Carlo over tree structures.
//!
//! The Pitman–Yor diffusion tree sampler (Knowles & Ghahramani, §5.1) proposes a new tree by
//! detaching a subtree chosen at random and re-attaching it where a new point would diverge
//! from the rest of the tree: on a segment (a new branch point is created there) or at an
//! existing branch point (the subtree becomes one more child of a multi-way node). The greedy
//! search of §5.2 makes the same moves. Such a sampler edits an [`Arena`], never the immutable
//! output tree ([`Tree`]); [`Arena::to_topology`] and [`Arena::to_tree`] export the current
//! state.
//!
//! # Ids
//! A node keeps its [`NodeId`] for as long as it exists. Leaves are `0..n_leaves` and are never
//! freed. An internal node left with a single child by [`Arena::detach`] is spliced out and its
//! slot goes on a free list; the next internal node created takes the most recently freed slot
//! (the list is a stack), so a detach followed by [`Arena::reattach`] restores every id.
//!
//! # Times
//! Every node carries a time, and **times increase from the root to the leaves**: a child's
//! time is strictly greater than its parent's. For the PYDT this is the divergence time, with
//! the root's branch starting at 0 and leaves at 1; the arena itself accepts any finite values
//! (a coalescent, whose times grow towards the root, can store negated times).
//!
//! # Caches and dirty flags
//! Each node holds a cache `C` (for example a belief-propagation message) that the caller
//! computes from the subtree below the node: its shape and its times, the node's own time
//! included. A node is *dirty* when that subtree has changed since the last
//! [`Arena::clear_dirty`]: every operation marks exactly the nodes whose subtree it changed
//! (and new nodes), which are always whole paths up to a root. [`Arena::dirty_post_order`]
//! lists them children first, so that a caller recomputes only the stale caches, and
//! [`Arena::refresh_dirty`] does both steps.

use std::fmt;

use super::{Topology, Tree};
use crate::error::{Result, RoseTreeError};

/// The id of a node in an [`Arena`]: leaves are `0..n_leaves`, internal nodes follow. An id
/// stays valid while its node exists; the slot of a freed internal node is reused later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One node (or free slot) of an [`Arena`], read through [`Arena::node`].
#[derive(Debug, Clone)]
pub struct ArenaNode<C> {
    parent: Option<NodeId>,
    children: Vec<NodeId>,
    time: f64,
    n_leaves: usize,
    cache: C,
    dirty: bool,
    free: bool,
}

impl<C> ArenaNode<C> {
    /// The parent; `None` for the root and for the root of a detached subtree.
    pub fn parent(&self) -> Option<NodeId> {
        self.parent
    }

    /// The children, in order: none for a leaf, at least two for an internal node.
    pub fn children(&self) -> &[NodeId] {
        &self.children
    }

    /// Whether this node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// The node's time (greater than its parent's).
    pub fn time(&self) -> f64 {
        self.time
    }

    /// The number of leaves below (or at) this node.
    pub fn n_leaves(&self) -> usize {
        self.n_leaves
    }

    /// The caller's cached value for this node.
    pub fn cache(&self) -> &C {
        &self.cache
    }

    /// Whether the subtree below this node changed since the last [`Arena::clear_dirty`].
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }
}

/// Where a subtree is attached: see [`Arena::attach`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Attachment {
    /// A new internal node at `time` on the branch above `below` (above the root when `below`
    /// is the root), with `below` and the subtree as its two children.
    Branch {
        /// The node whose parent branch is split.
        below: NodeId,
        /// The new node's time, between those of `below`'s parent and `below`.
        time: f64,
    },
    /// One more child of an existing internal node (a multi-way branch point).
    Node(NodeId),
}

/// A subtree removed by [`Arena::detach`]. Its nodes keep their ids and caches, outside the
/// tree, until the handle is passed to one of the attach methods. The handle also records
/// where the subtree was, for [`Arena::reattach`] (a rejected Metropolis–Hastings move).
#[derive(Debug, Clone, PartialEq)]
#[must_use = "a detached subtree stays out of the tree until it is attached again"]
pub struct Detached {
    root: NodeId,
    origin: Attachment,
    // The subtree root's position among its old parent's children, so that `reattach`
    // restores the children's order exactly.
    slot: usize,
}

impl Detached {
    /// The root of the detached subtree.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// Where the subtree was attached before [`Arena::detach`]: on the branch above its
    /// remaining sibling at the spliced-out parent's time, when the parent had two children;
    /// at the parent, when the parent kept two or more.
    pub fn origin(&self) -> Attachment {
        self.origin
    }
}

/// A rooted tree with any number of children per internal node, stable [`NodeId`]s, a time
/// per node and a per-node cache `C` with dirty flags; see the [module docs](self).
///
/// Besides the tree under [`root`](Self::root), the arena holds the subtrees detached and not
/// yet attached again ([`detached_roots`](Self::detached_roots)).
///
/// # Examples
/// ```
/// use rosetree::tree::Arena;
/// use rosetree::tree::arena::{Attachment, NodeId};
///
/// // ((0, 1), 2, 3): node 4 joins leaves 0 and 1 at time 0.5; the root 5 is at time 0.2.
/// let times = [1.0, 1.0, 1.0, 1.0, 0.5, 0.2];
/// let mut arena: Arena<usize> =
///     Arena::from_children(4, vec![vec![0, 1], vec![4, 2, 3]], &times, |_| 0)?;
/// // Each cache counts the leaves below its node, from the children's caches.
/// let count = |a: &Arena<usize>, v: NodeId| match a.children(v).unwrap() {
///     [] => 1,
///     kids => kids.iter().map(|&c| *a.cache(c).unwrap()).sum(),
/// };
/// arena.refresh_dirty(count); // every node starts dirty
///
/// // Move leaf 2 onto the branch above leaf 0, at time 0.7.
/// let moved = arena.detach(NodeId(2))?;
/// let new = arena.attach_on_branch(&moved, NodeId(0), 0.7)?;
/// assert_eq!(arena.children(new)?, &[NodeId(0), NodeId(2)]);
/// assert_eq!(arena.lca(NodeId(0), NodeId(2))?, new);
/// // Only the new node and its ancestors are stale; they are recomputed children first.
/// assert_eq!(arena.dirty_post_order(), vec![new, NodeId(4), NodeId(5)]);
/// arena.refresh_dirty(count);
/// assert_eq!((*arena.cache(new)?, *arena.cache(NodeId(4))?), (2, 3));
///
/// // Reject the move: detach the subtree again and put it back where it came from.
/// let undo = arena.detach(NodeId(2))?;
/// assert_eq!(undo.origin(), Attachment::Branch { below: NodeId(0), time: 0.7 });
/// assert_eq!(moved.origin(), Attachment::Node(NodeId(5)));
/// arena.reattach(&moved)?;
/// arena.check_invariants()?;
/// let (topology, times) = arena.to_topology()?;
/// assert_eq!(topology.internal(), &[vec![0, 1], vec![4, 2, 3]]);
/// assert_eq!(times, [1.0, 1.0, 1.0, 1.0, 0.5, 0.2]);
/// # Ok::<(), rosetree::RoseTreeError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Arena<C> {
    nodes: Vec<ArenaNode<C>>,
    n_leaves: usize,
    root: NodeId,
    /// Freed internal slots; the last one is reused first.
    free: Vec<NodeId>,
    /// Roots of the detached subtrees.
    detached: Vec<NodeId>,
}

/// An [`RoseTreeError::InvalidParameter`] for the argument `name`.
fn bad(name: &str, reason: String) -> RoseTreeError {
    RoseTreeError::param(name, reason)
}

impl<C> Arena<C> {
    /// Builds an arena from a tree shape and one time per node (leaves first, in the ids of
    /// `topology`, which the arena keeps); `init(id)` gives each node's initial cache. Every
    /// node starts dirty, so that a first [`refresh_dirty`](Self::refresh_dirty) computes
    /// all caches.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `times` when it does not have one finite value
    /// per node or a child's time is not greater than its parent's;
    /// [`RoseTreeError::InvalidTree`] when the tree has more nodes than a `u32` can number.
    pub fn from_topology(
        topology: &Topology,
        times: &[f64],
        mut init: impl FnMut(NodeId) -> C,
    ) -> Result<Self> {
        let n = topology.n_leaves();
        let total = n + topology.internal().len();
        if times.len() != total {
            return Err(bad(
                "times",
                format!("expected one time per node ({total}), got {}", times.len()),
            ));
        }
        if u32::try_from(total).is_err() {
            return Err(RoseTreeError::InvalidTree(format!(
                "{total} nodes do not fit in 32-bit node ids"
            )));
        }
        if let Some(v) = times.iter().position(|t| !t.is_finite()) {
            return Err(bad("times", format!("node {v} has time {}", times[v])));
        }
        let mut nodes: Vec<ArenaNode<C>> = Vec::with_capacity(total);
        for id in 0..total {
            let (children, n_leaves) = if id < n {
                (Vec::new(), 1)
            } else {
                let kids = &topology.internal()[id - n];
                let count = kids.iter().map(|&c| nodes[c].n_leaves).sum();
                (kids.iter().map(|&c| NodeId(c as u32)).collect(), count)
            };
            for &c in &children {
                if times[c.index()] <= times[id] {
                    return Err(bad(
                        "times",
                        format!(
                            "node {c} at time {} is not after its parent {id} at time {}",
                            times[c.index()],
                            times[id]
                        ),
                    ));
                }
                nodes[c.index()].parent = Some(NodeId(id as u32));
            }
            nodes.push(ArenaNode {
                parent: None,
                children,
                time: times[id],
                n_leaves,
                cache: init(NodeId(id as u32)),
                dirty: true,
                free: false,
            });
        }
        Ok(Self {
            nodes,
            n_leaves: n,
            root: NodeId(total as u32 - 1),
            free: Vec::new(),
            detached: Vec::new(),
        })
    }

    /// Builds an arena from children lists as [`Topology::new`] takes them (internal node `k`
    /// gets id `n_leaves + k`, children before parents, the root last) and one time per node;
    /// see [`from_topology`](Self::from_topology).
    ///
    /// # Errors
    /// Those of [`Topology::new`] and [`from_topology`](Self::from_topology).
    pub fn from_children(
        n_leaves: usize,
        internal: Vec<Vec<usize>>,
        times: &[f64],
        init: impl FnMut(NodeId) -> C,
    ) -> Result<Self> {
        Self::from_topology(&Topology::new(n_leaves, internal)?, times, init)
    }

    /// The number of leaves, detached ones included.
    pub fn n_leaves(&self) -> usize {
        self.n_leaves
    }

    /// The root of the tree (not counting detached subtrees).
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// The roots of the subtrees detached and not yet attached again.
    pub fn detached_roots(&self) -> &[NodeId] {
        &self.detached
    }

    /// The number of nodes, detached ones included.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// The number of slots, free ones included: every id is below this.
    pub fn n_slots(&self) -> usize {
        self.nodes.len()
    }

    /// The node `v`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when `v` is out of range or a freed slot.
    pub fn node(&self, v: NodeId) -> Result<&ArenaNode<C>> {
        self.live(v, "node")
    }

    /// The parent of `v` (`None` for a root).
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn parent(&self, v: NodeId) -> Result<Option<NodeId>> {
        Ok(self.node(v)?.parent)
    }

    /// The children of `v`.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn children(&self, v: NodeId) -> Result<&[NodeId]> {
        Ok(&self.node(v)?.children)
    }

    /// The time of `v`.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn time(&self, v: NodeId) -> Result<f64> {
        Ok(self.node(v)?.time)
    }

    /// The cache of `v`.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn cache(&self, v: NodeId) -> Result<&C> {
        Ok(&self.node(v)?.cache)
    }

    /// The cache of `v`, to write. Writing does not change any dirty flag.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn cache_mut(&mut self, v: NodeId) -> Result<&mut C> {
        self.live(v, "node")?;
        Ok(&mut self.nodes[v.index()].cache)
    }

    fn live(&self, v: NodeId, name: &str) -> Result<&ArenaNode<C>> {
        match self.nodes.get(v.index()) {
            Some(node) if !node.free => Ok(node),
            Some(_) => Err(bad(name, format!("node {v} has been freed"))),
            None => Err(bad(
                name,
                format!("node {v} is out of range (0 .. {})", self.nodes.len()),
            )),
        }
    }

    /// The root above `v`: the tree's root, or the root of a detached subtree.
    fn top(&self, mut v: NodeId) -> NodeId {
        while let Some(p) = self.nodes[v.index()].parent {
            v = p;
        }
        v
    }

    /// Checks that `v` is a node of the tree under the root (not of a detached subtree).
    fn in_tree(&self, v: NodeId, name: &str) -> Result<&ArenaNode<C>> {
        let node = self.live(v, name)?;
        let top = self.top(v);
        if top != self.root {
            return Err(bad(
                name,
                format!("node {v} lies in the detached subtree under {top}"),
            ));
        }
        Ok(node)
    }

    /// The ancestors of `v`, from its parent up to its root (`v` excluded).
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn ancestors(&self, v: NodeId) -> Result<Ancestors<'_, C>> {
        Ok(Ancestors {
            arena: self,
            next: self.node(v)?.parent,
        })
    }

    /// The lowest common ancestor of `a` and `b` (one of them when it lies above the other).
    /// Since times strictly increase downwards, the node with the later time cannot be the
    /// answer and steps up; this takes `O(depth)` steps and no memory.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when an id is invalid, or when one of the nodes is
    /// in a detached subtree and the other is not in the same one.
    pub fn lca(&self, a: NodeId, b: NodeId) -> Result<NodeId> {
        self.live(a, "a")?;
        self.live(b, "b")?;
        let (mut x, mut y) = (a, b);
        while x != y {
            let (tx, ty) = (self.nodes[x.index()].time, self.nodes[y.index()].time);
            let up = |v: NodeId| {
                self.nodes[v.index()]
                    .parent
                    .ok_or_else(|| bad("b", format!("nodes {a} and {b} lie in different trees")))
            };
            if tx >= ty {
                x = up(x)?;
            }
            if ty >= tx {
                y = up(y)?;
            }
        }
        Ok(x)
    }

    /// The leaves below (or at) `v`, in increasing id order.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn leaves_under(&self, v: NodeId) -> Result<Vec<NodeId>> {
        let mut out = Vec::with_capacity(self.node(v)?.n_leaves);
        out.extend(
            self.pre_order(v)?
                .filter(|&u| self.nodes[u.index()].is_leaf()),
        );
        out.sort_unstable();
        Ok(out)
    }

    /// The subtree under `v` in pre-order (each node before its children, children in order),
    /// with an explicit stack, so that any depth works.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn pre_order(&self, v: NodeId) -> Result<PreOrder<'_, C>> {
        self.node(v)?;
        Ok(PreOrder {
            arena: self,
            stack: vec![v],
        })
    }

    /// The subtree under `v` in post-order (each node after its children, children in order),
    /// with an explicit stack, so that any depth works.
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn post_order(&self, v: NodeId) -> Result<PostOrder<'_, C>> {
        self.node(v)?;
        Ok(PostOrder {
            arena: self,
            stack: vec![(v, 0)],
        })
    }

    /// Marks `v` and its ancestors dirty, for a change the arena cannot see (for example new
    /// data at a leaf).
    ///
    /// # Errors
    /// As [`node`](Self::node).
    pub fn mark_dirty(&mut self, v: NodeId) -> Result<()> {
        self.node(v)?;
        self.update_path(Some(v), |_| {});
        Ok(())
    }

    /// Walks from `start` up to its root, marking every node dirty and applying `f`.
    fn update_path(&mut self, start: Option<NodeId>, mut f: impl FnMut(&mut ArenaNode<C>)) {
        let mut next = start;
        while let Some(u) = next {
            let node = &mut self.nodes[u.index()];
            node.dirty = true;
            f(node);
            next = node.parent;
        }
    }

    /// Moves `v` to time `t` (a time-slice move), marking `v` and its ancestors dirty.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when `v` is invalid, or on `time` unless it is
    /// finite and strictly between the time of `v`'s parent and those of its children.
    pub fn set_time(&mut self, v: NodeId, t: f64) -> Result<()> {
        let node = self.node(v)?;
        let lo = node
            .parent
            .map_or(f64::NEG_INFINITY, |p| self.nodes[p.index()].time);
        let hi = node
            .children
            .iter()
            .map(|c| self.nodes[c.index()].time)
            .fold(f64::INFINITY, f64::min);
        if !(t.is_finite() && lo < t && t < hi) {
            return Err(bad(
                "time",
                format!("node {v} must stay strictly between times {lo} and {hi}, got {t}"),
            ));
        }
        self.nodes[v.index()].time = t;
        self.update_path(Some(v), |_| {});
        Ok(())
    }

    /// Removes the subtree under `v` from the tree and returns a handle to attach it again.
    ///
    /// Let `p` be `v`'s parent. If `p` keeps two or more children, `p` and its ancestors
    /// become dirty. If `p` is left with one child `w`, `p` is spliced out and its slot
    /// freed: `w` takes `p`'s place among the children of `p`'s parent `g` (which, with its
    /// ancestors, becomes dirty), or, when `p` was the root, `w` becomes the root (and
    /// nothing is dirty). The nodes of the subtree keep their ids, caches and flags.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when `v` is invalid, the root, or not in the tree
    /// (inside a detached subtree).
    pub fn detach(&mut self, v: NodeId) -> Result<Detached> {
        let p = self.in_tree(v, "node")?.parent.ok_or_else(|| {
            bad(
                "node",
                format!("node {v} is the root, which cannot be detached"),
            )
        })?;
        let moved = self.nodes[v.index()].n_leaves;
        let parent = &mut self.nodes[p.index()];
        let slot = parent
            .children
            .iter()
            .position(|&c| c == v)
            .expect("a parent lists its child");
        parent.children.remove(slot);
        self.nodes[v.index()].parent = None;
        self.detached.push(v);
        let parent = &mut self.nodes[p.index()];
        if parent.children.len() >= 2 {
            self.update_path(Some(p), |node| node.n_leaves -= moved);
            return Ok(Detached {
                root: v,
                origin: Attachment::Node(p),
                slot,
            });
        }
        // Splice out `p`: its only remaining child takes its place.
        let w = parent.children[0];
        let (g, time) = (parent.parent, parent.time);
        self.free_slot(p);
        self.nodes[w.index()].parent = g;
        match g {
            None => self.root = w,
            Some(g) => {
                let kids = &mut self.nodes[g.index()].children;
                let at = kids.iter().position(|&c| c == p).expect("listed child");
                kids[at] = w;
                self.update_path(Some(g), |node| node.n_leaves -= moved);
            }
        }
        Ok(Detached {
            root: v,
            origin: Attachment::Branch { below: w, time },
            slot,
        })
    }

    fn free_slot(&mut self, p: NodeId) {
        let node = &mut self.nodes[p.index()];
        node.parent = None;
        node.children.clear();
        node.n_leaves = 0;
        node.dirty = false;
        node.free = true;
        self.free.push(p);
    }

    /// Adds a leaf, detached: a new data point to be attached by [`attach`](Self::attach).
    ///
    /// Leaves keep the ids `0..n_leaves`, so the new leaf takes id `n_leaves` (returned in the
    /// handle) and every internal node's id grows by one (caches, times and dirty flags kept):
    /// `O(slots)`. The leaf (cache `cache`, dirty) is listed among the
    /// [`detached_roots`](Self::detached_roots). The handle has no origin to go back to:
    /// its [`origin`](Detached::origin) names the leaf itself, which
    /// [`reattach`](Self::reattach) refuses.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `time` unless it is finite;
    /// [`RoseTreeError::InvalidTree`] while another subtree is detached (the renumbering
    /// would invalidate its handle) or when the ids run out of 32 bits.
    pub fn add_leaf(&mut self, time: f64, cache: C) -> Result<Detached> {
        if !time.is_finite() {
            return Err(bad(
                "time",
                format!("a leaf's time must be finite, got {time}"),
            ));
        }
        if !self.detached.is_empty() {
            return Err(RoseTreeError::InvalidTree(format!(
                "{} subtree(s) are detached; attach them before adding a leaf",
                self.detached.len()
            )));
        }
        if u32::try_from(self.nodes.len() + 1).is_err() {
            return Err(RoseTreeError::InvalidTree(
                "the arena ran out of 32-bit node ids".into(),
            ));
        }
        let n = self.n_leaves as u32;
        let shift = |v: NodeId| if v.0 >= n { NodeId(v.0 + 1) } else { v };
        for node in &mut self.nodes {
            node.parent = node.parent.map(shift);
            for c in &mut node.children {
                *c = shift(*c);
            }
        }
        self.root = shift(self.root);
        for f in &mut self.free {
            *f = shift(*f);
        }
        let leaf = NodeId(n);
        self.nodes.insert(
            self.n_leaves,
            ArenaNode {
                parent: None,
                children: Vec::new(),
                time,
                n_leaves: 1,
                cache,
                dirty: true,
                free: false,
            },
        );
        self.n_leaves += 1;
        self.detached.push(leaf);
        Ok(Detached {
            root: leaf,
            origin: Attachment::Node(leaf),
            slot: 0,
        })
    }

    /// Checks that `d` is detached from this arena; returns its position in the list.
    fn detached_index(&self, d: &Detached) -> Result<usize> {
        self.detached
            .iter()
            .position(|&r| r == d.root)
            .ok_or_else(|| {
                bad(
                    "detached",
                    format!("the subtree under {} is not detached", d.root),
                )
            })
    }

    /// The post-order of the dirty nodes (children before parents), over the tree and the
    /// detached subtrees: the nodes whose caches are stale. Since every dirty node's
    /// ancestors are dirty, this visits only dirty nodes and their children.
    pub fn dirty_post_order(&self) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut stack = Vec::new();
        for &top in std::iter::once(&self.root).chain(&self.detached) {
            if !self.nodes[top.index()].dirty {
                continue;
            }
            stack.push((top, 0));
            while let Some((v, i)) = stack.last_mut() {
                let node = &self.nodes[v.index()];
                match node.children.get(*i) {
                    Some(&c) => {
                        *i += 1;
                        if self.nodes[c.index()].dirty {
                            stack.push((c, 0));
                        }
                    }
                    None => {
                        out.push(*v);
                        stack.pop();
                    }
                }
            }
        }
        out
    }

    /// Marks every node clean.
    pub fn clear_dirty(&mut self) {
        for v in self.dirty_post_order() {
            self.nodes[v.index()].dirty = false;
        }
    }

    /// Recomputes the cache of every dirty node, children first, as `f(arena, v)` (which sees
    /// the children's new caches), then marks every node clean.
    pub fn refresh_dirty(&mut self, mut f: impl FnMut(&Self, NodeId) -> C) {
        for v in self.dirty_post_order() {
            let cache = f(self, v);
            let node = &mut self.nodes[v.index()];
            node.cache = cache;
            node.dirty = false;
        }
    }

    /// The nodes of the tree in the dense order of [`Topology`]: leaves `0..n_leaves` first,
    /// then the internal nodes in post-order (children in order), the root last. Entry `k` is
    /// the arena id of compact node `k`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] while a subtree is detached.
    pub fn compact_ids(&self) -> Result<Vec<NodeId>> {
        if !self.detached.is_empty() {
            return Err(RoseTreeError::InvalidTree(format!(
                "{} subtree(s) are detached; attach them before exporting the tree",
                self.detached.len()
            )));
        }
        let mut ids: Vec<NodeId> = (0..self.n_leaves as u32).map(NodeId).collect();
        ids.extend(
            self.post_order(self.root)?
                .filter(|v| !self.nodes[v.index()].is_leaf()),
        );
        Ok(ids)
    }

    /// The tree as an immutable [`Topology`] with compact ids ([`compact_ids`](Self::compact_ids))
    /// and the time of each compact node.
    ///
    /// # Errors
    /// As [`compact_ids`](Self::compact_ids).
    pub fn to_topology(&self) -> Result<(Topology, Vec<f64>)> {
        let ids = self.compact_ids()?;
        let mut compact = vec![usize::MAX; self.nodes.len()];
        for (k, v) in ids.iter().enumerate() {
            compact[v.index()] = k;
        }
        let internal = ids[self.n_leaves..]
            .iter()
            .map(|v| {
                self.nodes[v.index()]
                    .children
                    .iter()
                    .map(|c| compact[c.index()])
                    .collect()
            })
            .collect();
        let times = ids.iter().map(|v| self.nodes[v.index()].time).collect();
        Ok((Topology::new(self.n_leaves, internal)?, times))
    }

    /// The tree as the immutable output [`Tree`], with the node times as its heights and the
    /// compact ids of [`compact_ids`](Self::compact_ids). For the PYDT these are divergence
    /// times, 1 at the leaves and falling towards the root.
    ///
    /// # Errors
    /// As [`compact_ids`](Self::compact_ids), and [`RoseTreeError::InvalidTree`] from
    /// [`Tree::new`] when the leaves do not all have one time.
    pub fn to_tree(&self) -> Result<Tree> {
        let (topology, times) = self.to_topology()?;
        Tree::new(&topology, Some(times))
    }

    /// Checks every structural invariant: the free list holds exactly the freed slots, each
    /// once, none of them a leaf; every child lists its parent and every non-root node is
    /// listed by its parent exactly once; the roots are the tree's root and the detached
    /// roots; every node is reached exactly once from them (so there is no cycle) and every
    /// leaf `0..n_leaves` is reached; leaves have no children and internal nodes at least two;
    /// leaf counts are right; times are finite and strictly increase from parent to child;
    /// the parent of a dirty node is dirty.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] naming the first violation found.
    pub fn check_invariants(&self) -> Result<()> {
        let fail = |msg: String| Err(RoseTreeError::InvalidTree(msg));
        let total = self.nodes.len();
        if self.n_leaves == 0 || self.n_leaves > total {
            return fail(format!("{} leaves in {total} slots", self.n_leaves));
        }
        let mut listed_free = vec![false; total];
        for &f in &self.free {
            match self.nodes.get(f.index()) {
                Some(node) if node.free && f.index() >= self.n_leaves => {
                    if std::mem::replace(&mut listed_free[f.index()], true) {
                        return fail(format!("slot {f} is on the free list twice"));
                    }
                }
                _ => return fail(format!("free list entry {f} is not a freed internal slot")),
            }
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.free && !listed_free[i] {
                return fail(format!("freed slot {i} is not on the free list"));
            }
            if node.free && (node.dirty || node.parent.is_some() || !node.children.is_empty()) {
                return fail(format!("freed slot {i} still has links or a dirty flag"));
            }
        }
        let live = |v: NodeId| self.nodes.get(v.index()).filter(|n| !n.free);
        // Parent and child links agree.
        for (i, node) in self.nodes.iter().enumerate().filter(|(_, n)| !n.free) {
            let is_leaf_id = i < self.n_leaves;
            if is_leaf_id != node.children.is_empty() || node.children.len() == 1 {
                return fail(format!(
                    "node {i} has {} children; leaves (ids below {}) need none and internal \
                     nodes at least two",
                    node.children.len(),
                    self.n_leaves
                ));
            }
            if !node.time.is_finite() {
                return fail(format!("node {i} has time {}", node.time));
            }
            for &c in &node.children {
                let Some(child) = live(c) else {
                    return fail(format!("node {i} lists child {c}, which is not a node"));
                };
                if child.parent != Some(NodeId(i as u32)) {
                    return fail(format!(
                        "node {i} lists child {c}, whose parent is {:?}",
                        child.parent
                    ));
                }
                if child.time <= node.time {
                    return fail(format!(
                        "child {c} at time {} is not after its parent {i} at time {}",
                        child.time, node.time
                    ));
                }
                if child.dirty && !node.dirty {
                    return fail(format!("node {c} is dirty but its parent {i} is not"));
                }
            }
            if let Some(p) = node.parent {
                let listed = live(p).map_or(0, |pn| {
                    pn.children.iter().filter(|&&c| c.index() == i).count()
                });
                if listed != 1 {
                    return fail(format!(
                        "node {i} has parent {p}, which lists it {listed} time(s)"
                    ));
                }
            }
        }
        // The parentless nodes are exactly the root and the detached roots.
        let mut tops = vec![self.root];
        tops.extend(&self.detached);
        let mut is_top = vec![false; total];
        for &t in &tops {
            if live(t).is_none_or(|n| n.parent.is_some()) {
                return fail(format!("root {t} is not a parentless node"));
            }
            if std::mem::replace(&mut is_top[t.index()], true) {
                return fail(format!("root {t} is listed twice"));
            }
        }
        if let Some(i) = (0..total)
            .find(|&i| !self.nodes[i].free && self.nodes[i].parent.is_none() && !is_top[i])
        {
            return fail(format!("node {i} has no parent and is not a root"));
        }
        // Every node is reached exactly once from the roots, and the leaf counts add up.
        let mut seen = vec![false; total];
        let mut n_seen = 0;
        for &t in &tops {
            let mut stack = vec![(t, 0)];
            seen[t.index()] = true;
            n_seen += 1;
            while let Some((v, i)) = stack.last_mut() {
                let node = &self.nodes[v.index()];
                if let Some(&c) = node.children.get(*i) {
                    *i += 1;
                    if std::mem::replace(&mut seen[c.index()], true) {
                        return fail(format!("node {c} is reached twice (a cycle)"));
                    }
                    n_seen += 1;
                    stack.push((c, 0));
                    continue;
                }
                let count = if node.is_leaf() {
                    1
                } else {
                    node.children
                        .iter()
                        .map(|c| self.nodes[c.index()].n_leaves)
                        .sum()
                };
                if node.n_leaves != count {
                    return fail(format!(
                        "node {v} records {} leaves but has {count}",
                        node.n_leaves
                    ));
                }
                stack.pop();
            }
        }
        if n_seen != self.n_nodes() {
            return fail(format!(
                "{} nodes, but only {n_seen} are reached from the roots (a cycle)",
                self.n_nodes()
            ));
        }
        Ok(())
    }
}

impl<C: Default> Arena<C> {
    /// Attaches the detached subtree on the branch above `below`: a new internal node at
    /// `time` takes `below`'s place and has children `[below, subtree]`. When `below` is the
    /// root, the new node becomes the root. The new node (cache `C::default()`) and its
    /// ancestors become dirty. Returns the new node's id, which is the most recently freed
    /// slot if there is one.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when `detached` is not detached here, `below` is
    /// invalid or not in the tree, or `time` is not finite and strictly after the time of
    /// `below`'s parent (if any) and strictly before the times of `below` and of the subtree's
    /// root.
    pub fn attach_on_branch(
        &mut self,
        detached: &Detached,
        below: NodeId,
        time: f64,
    ) -> Result<NodeId> {
        self.attach_on_branch_at(detached, below, time, 1)
    }

    /// [`attach_on_branch`](Self::attach_on_branch) with the subtree at position `slot` (0 or
    /// 1) among the new node's two children.
    fn attach_on_branch_at(
        &mut self,
        detached: &Detached,
        below: NodeId,
        time: f64,
        slot: usize,
    ) -> Result<NodeId> {
        let index = self.detached_index(detached)?;
        let s = detached.root;
        let parent = self.in_tree(below, "below")?.parent;
        let lo = parent.map_or(f64::NEG_INFINITY, |p| self.nodes[p.index()].time);
        let hi = self.nodes[below.index()]
            .time
            .min(self.nodes[s.index()].time);
        if !(time.is_finite() && lo < time && time < hi) {
            return Err(bad(
                "time",
                format!(
                    "a node on the branch above {below} carrying subtree {s} must lie strictly \
                     between times {lo} and {hi}, got {time}"
                ),
            ));
        }
        let mut children = vec![below];
        children.insert(slot.min(1), s);
        let n_leaves = self.nodes[below.index()].n_leaves + self.nodes[s.index()].n_leaves;
        let node = ArenaNode {
            parent,
            children,
            time,
            n_leaves,
            cache: C::default(),
            dirty: true,
            free: false,
        };
        let q = match self.free.pop() {
            Some(q) => {
                self.nodes[q.index()] = node;
                q
            }
            None => {
                let q = u32::try_from(self.nodes.len()).map_err(|_| {
                    RoseTreeError::InvalidTree("the arena ran out of 32-bit node ids".into())
                })?;
                self.nodes.push(node);
                NodeId(q)
            }
        };
        self.detached.swap_remove(index);
        self.nodes[below.index()].parent = Some(q);
        self.nodes[s.index()].parent = Some(q);
        match parent {
            None => self.root = q,
            Some(p) => {
                let kids = &mut self.nodes[p.index()].children;
                let at = kids.iter().position(|&c| c == below).expect("listed child");
                kids[at] = q;
                let moved = self.nodes[s.index()].n_leaves;
                self.update_path(Some(p), |node| node.n_leaves += moved);
            }
        }
        Ok(q)
    }

    /// Attaches the detached subtree as one more (last) child of the internal node `node`,
    /// making it a multi-way branch point. `node` and its ancestors become dirty.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] when `detached` is not detached here, or `node` is
    /// invalid, not in the tree, a leaf, or not strictly before the subtree root's time.
    pub fn attach_to_node(&mut self, detached: &Detached, node: NodeId) -> Result<()> {
        self.attach_to_node_at(detached, node, usize::MAX)
    }

    /// [`attach_to_node`](Self::attach_to_node) with the subtree at position `slot` (at most
    /// the number of children) among the node's children.
    fn attach_to_node_at(&mut self, detached: &Detached, node: NodeId, slot: usize) -> Result<()> {
        let index = self.detached_index(detached)?;
        let s = detached.root;
        let target = self.in_tree(node, "node")?;
        if target.is_leaf() {
            return Err(bad(
                "node",
                format!("node {node} is a leaf; a subtree can only join an internal node"),
            ));
        }
        let s_time = self.nodes[s.index()].time;
        if target.time >= s_time {
            return Err(bad(
                "node",
                format!(
                    "node {node} at time {} is not before the subtree root {s} at time {s_time}",
                    target.time
                ),
            ));
        }
        self.detached.swap_remove(index);
        let kids = &mut self.nodes[node.index()].children;
        kids.insert(slot.min(kids.len()), s);
        self.nodes[s.index()].parent = Some(node);
        let moved = self.nodes[s.index()].n_leaves;
        self.update_path(Some(node), |n| n.n_leaves += moved);
        Ok(())
    }

    /// Attaches the detached subtree at `at`: on a branch with
    /// [`attach_on_branch`](Self::attach_on_branch) or at a node with
    /// [`attach_to_node`](Self::attach_to_node). Returns the subtree's new parent.
    ///
    /// # Errors
    /// Those of the method called.
    pub fn attach(&mut self, detached: &Detached, at: Attachment) -> Result<NodeId> {
        match at {
            Attachment::Branch { below, time } => self.attach_on_branch(detached, below, time),
            Attachment::Node(node) => self.attach_to_node(detached, node).map(|()| node),
        }
    }

    /// Puts the detached subtree back where the [`detach`](Self::detach) that returned
    /// `detached` took it from, at the same position among its parent's children. A handle
    /// works whenever its subtree is detached, so a rejected move is undone by detaching the
    /// subtree again and reattaching the first handle. If the tree is as it was right after
    /// that detach, this restores it exactly, ids included (the free list is a stack).
    /// Returns the subtree's parent.
    ///
    /// # Errors
    /// Those of [`attach`](Self::attach) when the origin is no longer a valid position.
    pub fn reattach(&mut self, detached: &Detached) -> Result<NodeId> {
        match detached.origin {
            Attachment::Branch { below, time } => {
                self.attach_on_branch_at(detached, below, time, detached.slot)
            }
            Attachment::Node(node) => self
                .attach_to_node_at(detached, node, detached.slot)
                .map(|()| node),
        }
    }
}

/// The ancestors of a node, nearest first: see [`Arena::ancestors`].
#[derive(Debug, Clone)]
pub struct Ancestors<'a, C> {
    arena: &'a Arena<C>,
    next: Option<NodeId>,
}

impl<C> Iterator for Ancestors<'_, C> {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        let v = self.next?;
        self.next = self.arena.nodes[v.index()].parent;
        Some(v)
    }
}

/// A pre-order walk: see [`Arena::pre_order`].
#[derive(Debug, Clone)]
pub struct PreOrder<'a, C> {
    arena: &'a Arena<C>,
    stack: Vec<NodeId>,
}

impl<C> Iterator for PreOrder<'_, C> {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        let v = self.stack.pop()?;
        self.stack
            .extend(self.arena.nodes[v.index()].children.iter().rev());
        Some(v)
    }
}

/// A post-order walk: see [`Arena::post_order`].
#[derive(Debug, Clone)]
pub struct PostOrder<'a, C> {
    arena: &'a Arena<C>,
    /// The path from the start node, with the index of the next child to visit at each level.
    stack: Vec<(NodeId, usize)>,
}

impl<C> Iterator for PostOrder<'_, C> {
    type Item = NodeId;

    fn next(&mut self) -> Option<NodeId> {
        loop {
            let (v, i) = self.stack.last_mut()?;
            match self.arena.nodes[v.index()].children.get(*i) {
                Some(&c) => {
                    *i += 1;
                    self.stack.push((c, 0));
                }
                None => {
                    let v = *v;
                    self.stack.pop();
                    return Some(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
