//! The tree shared by every engine: structure (compact node ids, parents and children, leaf
//! sets) and an optional height per node. Each model family keeps its own per-node
//! quantities beside it (the rose-tree mixture's in [`crate::brt::RoseTree`]); the
//! [`arena`] module holds the mutable tree that MCMC moves edit.
//!
//! Node ids are dense: leaves are `0..n_leaves` (leaf `i` is data row `i`), internal nodes
//! follow in topological order (every child before its parent), and the root is the last
//! node.
//!
//! Heights are in each family's own units and direction: a rose tree's `−max ln r` grows
//! from 0 at the leaves, a coalescent's merge times fall from 0 at the leaves, a diffusion
//! tree's divergence times fall from 1 at the leaves. What every family shares is that all
//! leaves have one height and that heights move away from it monotonically towards the root;
//! [`Tree::distances`] turns them into the distances from the leaves that SciPy's linkage
//! matrices and Newick branch lengths use.

use crate::error::{Result, RoseTreeError};
use crate::math::log_add_exp;

pub mod arena;
pub use arena::Arena;

/// One node of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Child node ids; empty for a leaf.
    pub children: Vec<usize>,
    /// Parent node id; `None` for the root.
    pub parent: Option<usize>,
    /// Number of data items (leaves) below this node.
    pub n_leaves: usize,
}

impl Node {
    /// Whether this node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// The shape of a rose tree without any numbers: `n_leaves` leaves and a list of internal
/// nodes, each a list of child ids, in topological order (the root last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    n_leaves: usize,
    internal: Vec<Vec<usize>>,
}

impl Topology {
    /// Checks and wraps a tree shape. Internal node `k` of `internal` gets id `n_leaves + k`;
    /// its children must have smaller ids.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] unless every node except the last has exactly one
    /// parent, every internal node has at least two children, and child ids come before
    /// their parents.
    pub fn new(n_leaves: usize, internal: Vec<Vec<usize>>) -> Result<Self> {
        if n_leaves == 0 {
            return Err(RoseTreeError::InvalidTree(
                "a tree needs at least one leaf".into(),
            ));
        }
        if n_leaves == 1 && !internal.is_empty() || n_leaves > 1 && internal.is_empty() {
            return Err(RoseTreeError::InvalidTree(format!(
                "{n_leaves} leaves cannot be joined by {} internal nodes",
                internal.len()
            )));
        }
        let total = n_leaves + internal.len();
        let mut has_parent = vec![false; total];
        for (k, children) in internal.iter().enumerate() {
            let id = n_leaves + k;
            if children.len() < 2 {
                return Err(RoseTreeError::InvalidTree(format!(
                    "internal node {id} has {} child(ren); rose tree nodes need at least two",
                    children.len()
                )));
            }
            for &c in children {
                if c >= id {
                    return Err(RoseTreeError::InvalidTree(format!(
                        "node {id} lists child {c}, which is not an earlier node"
                    )));
                }
                if std::mem::replace(&mut has_parent[c], true) {
                    return Err(RoseTreeError::InvalidTree(format!(
                        "node {c} appears more than once in the tree"
                    )));
                }
            }
        }
        if let Some(orphan) = has_parent[..total - 1].iter().position(|&p| !p) {
            return Err(RoseTreeError::InvalidTree(format!(
                "node {orphan} is not attached below the root"
            )));
        }
        Ok(Self { n_leaves, internal })
    }

    /// Number of leaves.
    pub fn n_leaves(&self) -> usize {
        self.n_leaves
    }

    /// Children of each internal node, in id order.
    pub fn internal(&self) -> &[Vec<usize>] {
        &self.internal
    }

    /// Whether every internal node has exactly two children.
    pub fn is_binary(&self) -> bool {
        self.internal.iter().all(|c| c.len() == 2)
    }
}

/// A tree over `n_leaves` data items with an optional height per node (see the module
/// docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    nodes: Vec<Node>,
    n_leaves: usize,
    heights: Option<Vec<f64>>,
}

impl Tree {
    /// The tree of a checked shape, with heights or without.
    ///
    /// # Examples
    /// ```
    /// use rosetree::tree::{Topology, Tree};
    ///
    /// // ((0, 1), 2) with coalescence times: leaves at 0, merges at −1 and −2.5.
    /// let shape = Topology::new(3, vec![vec![0, 1], vec![3, 2]])?;
    /// let tree = Tree::new(&shape, Some(vec![0.0, 0.0, 0.0, -1.0, -2.5]))?;
    /// assert_eq!(tree.to_newick_with_lengths(None)?, "((0:1,1:1):1.5,2:2.5);");
    /// assert_eq!(tree.to_linkage()?[1], [2.0, 3.0, 2.5, 3.0]);
    /// # Ok::<(), rosetree::RoseTreeError>(())
    /// ```
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] for heights of the wrong length, NaN, different at two
    /// leaves or infinite at a leaf, or not moving monotonically away from the leaves' height.
    pub fn new(topology: &Topology, heights: Option<Vec<f64>>) -> Result<Self> {
        let n = topology.n_leaves();
        let mut nodes: Vec<Node> = (0..n)
            .map(|_| Node {
                children: Vec::new(),
                parent: None,
                n_leaves: 1,
            })
            .collect();
        for children in topology.internal() {
            let n_leaves = children.iter().map(|&c| nodes[c].n_leaves).sum();
            nodes.push(Node {
                children: children.clone(),
                parent: None,
                n_leaves,
            });
        }
        let tree = Self::from_nodes(n, nodes);
        match heights {
            Some(h) => tree.with_heights(h),
            None => Ok(tree),
        }
    }

    /// Assembles a tree from nodes in the id order of the module docs; parents are filled in
    /// here.
    pub(crate) fn from_nodes(n_leaves: usize, mut nodes: Vec<Node>) -> Self {
        for id in 0..nodes.len() {
            for k in 0..nodes[id].children.len() {
                let c = nodes[id].children[k];
                nodes[c].parent = Some(id);
            }
        }
        Self {
            nodes,
            n_leaves,
            heights: None,
        }
    }

    /// The same tree with `heights` (one per node, leaves first).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_heights(mut self, heights: Vec<f64>) -> Result<Self> {
        let bad = |why: String| Err(RoseTreeError::InvalidTree(why));
        if heights.len() != self.nodes.len() {
            return bad(format!(
                "expected {} heights (one per node), got {}",
                self.nodes.len(),
                heights.len()
            ));
        }
        if let Some(v) = heights.iter().position(|h| h.is_nan()) {
            return bad(format!("the height of node {v} is NaN"));
        }
        let leaf = heights[0];
        if !leaf.is_finite() {
            return bad(format!("the leaves' height is {leaf}"));
        }
        if let Some(v) = (1..self.n_leaves).find(|&v| heights[v] != leaf) {
            return bad(format!(
                "leaves must share one height: leaf 0 is at {leaf}, leaf {v} at {}",
                heights[v]
            ));
        }
        let sign = direction(leaf, heights[self.nodes.len() - 1]);
        for (v, node) in self.nodes.iter().enumerate() {
            if let Some(p) = node.parent {
                if sign * (heights[p] - heights[v]) < 0.0 {
                    return bad(format!(
                        "node {p} (height {}) is nearer the leaves' height {leaf} than its \
                         child {v} (height {})",
                        heights[p], heights[v]
                    ));
                }
            }
        }
        self.heights = Some(heights);
        Ok(self)
    }

    /// Sets heights that the caller guarantees to be monotone (see the module docs).
    pub(crate) fn set_heights_unchecked(&mut self, heights: Vec<f64>) {
        debug_assert_eq!(heights.len(), self.nodes.len());
        self.heights = Some(heights);
    }

    /// Number of leaves (data items).
    pub fn n_leaves(&self) -> usize {
        self.n_leaves
    }

    /// All nodes, leaves first, the root last.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node with id `id`.
    pub fn node(&self, id: usize) -> &Node {
        &self.nodes[id]
    }

    /// The root's id.
    pub fn root(&self) -> usize {
        self.nodes.len() - 1
    }

    /// The height of every node, if the tree has heights.
    pub fn heights(&self) -> Option<&[f64]> {
        self.heights.as_deref()
    }

    /// The distance of every node from the leaves' height, `|h_v − h_leaf|`: 0 at the
    /// leaves and never smaller at a parent than at its children. These are the heights of
    /// [`to_linkage`](Self::to_linkage) and the branch lengths of
    /// [`to_newick_with_lengths`](Self::to_newick_with_lengths).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree has no heights.
    pub fn distances(&self) -> Result<Vec<f64>> {
        let h = self
            .heights
            .as_deref()
            .ok_or_else(|| RoseTreeError::InvalidTree("the tree has no heights".into()))?;
        let leaf = h[0];
        let sign = direction(leaf, h[h.len() - 1]);
        // 0.0 + …, so that leaves get +0.0.
        Ok(h.iter().map(|&x| 0.0 + sign * (x - leaf)).collect())
    }

    /// The shape of this tree.
    pub fn topology(&self) -> Topology {
        Topology {
            n_leaves: self.n_leaves,
            internal: self.nodes[self.n_leaves..]
                .iter()
                .map(|n| n.children.clone())
                .collect(),
        }
    }

    /// The data rows below node `id`, in increasing order.
    pub fn leaves_of(&self, id: usize) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.nodes[id].n_leaves);
        let mut stack = vec![id];
        while let Some(v) = stack.pop() {
            if self.nodes[v].is_leaf() {
                out.push(v);
            } else {
                stack.extend(&self.nodes[v].children);
            }
        }
        out.sort_unstable();
        out
    }

    /// `log10 |Φ(T)|`, the number of tree-consistent partitions (eq 1.3):
    /// `|Φ(leaf)| = 1`, `|Φ(T)| = 1 + Π_children |Φ(T_i)|`. Finite for any size.
    pub fn n_partitions_log10(&self) -> f64 {
        let mut ln_count = vec![0.0_f64; self.nodes.len()];
        for (id, node) in self.nodes.iter().enumerate().skip(self.n_leaves) {
            let ln_prod: f64 = node.children.iter().map(|&c| ln_count[c]).sum();
            ln_count[id] = log_add_exp(0.0, ln_prod);
        }
        ln_count[self.root()] / std::f64::consts::LN_10
    }

    /// `|Φ(T)|` exactly, however large.
    pub fn n_partitions_exact(&self) -> num_bigint::BigUint {
        let mut count: Vec<num_bigint::BigUint> = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let below: num_bigint::BigUint = node.children.iter().map(|&c| &count[c]).product();
            count.push(if node.is_leaf() {
                1_u32.into()
            } else {
                below + 1_u32
            });
        }
        count.pop().expect("a tree has a root")
    }

    /// The number of edges on the longest path from the root to a leaf.
    pub fn depth(&self) -> usize {
        let mut depth = vec![0_usize; self.nodes.len()];
        for (v, node) in self.nodes.iter().enumerate() {
            depth[v] = node
                .children
                .iter()
                .map(|&c| depth[c] + 1)
                .max()
                .unwrap_or(0);
        }
        depth[self.root()]
    }

    /// `|Φ(T)|` exactly, or `None` if it does not fit in a `u128`.
    pub fn n_partitions(&self) -> Option<u128> {
        let mut count = vec![1_u128; self.nodes.len()];
        for (id, node) in self.nodes.iter().enumerate().skip(self.n_leaves) {
            let mut prod = 1_u128;
            for &c in &node.children {
                prod = prod.checked_mul(count[c])?;
            }
            count[id] = prod.checked_add(1)?;
        }
        Some(count[self.root()])
    }

    /// The maximal nodes whose distance from the leaves ([`distances`](Self::distances)) is
    /// at most `t`, in increasing id order; leaves are always taken. These are the flat
    /// clusters that SciPy's `fcluster(Z, t, "distance")` finds in
    /// [`to_linkage`](Self::to_linkage).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree has no heights.
    pub fn clusters_at_height(&self, t: f64) -> Result<Vec<usize>> {
        Ok(self.clusters_below(&self.distances()?, t))
    }

    fn clusters_below(&self, heights: &[f64], t: f64) -> Vec<usize> {
        self.top_down(|v| self.nodes[v].is_leaf() || heights[v] <= t)
    }

    /// The nodes where a descent from the root stops (`stop(v)` is true; it must be at every
    /// leaf), in increasing id order.
    pub(crate) fn top_down(&self, stop: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut clusters = Vec::new();
        let mut stack = vec![self.root()];
        while let Some(v) = stack.pop() {
            if stop(v) {
                clusters.push(v);
            } else {
                stack.extend(&self.nodes[v].children);
            }
        }
        clusters.sort_unstable();
        clusters
    }

    /// The flat clustering with at most `k` clusters that the heights give, as SciPy's
    /// `fcluster(Z, k, "maxclust")` on [`to_linkage`](Self::to_linkage): the clusters of
    /// [`clusters_at_height`](Self::clusters_at_height)`(t)` for the smallest `t` that gives
    /// at most `k` (with `k ≥ n_leaves`, every leaf alone). The number of clusters only
    /// changes where `t` passes the height of an internal node, and a node with `m` children
    /// (or several nodes at one height) splits into all of them at once, so a tree can leave
    /// no way to get exactly `k`; then this gives the largest number below `k` (never a part
    /// of a multi-way node, which would not be a cluster of the tree).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `n_clusters` when `k` is 0;
    /// [`RoseTreeError::InvalidTree`] if the tree has no heights.
    pub fn max_clusters(&self, k: usize) -> Result<Vec<usize>> {
        if k == 0 {
            return Err(RoseTreeError::param("n_clusters", "must be at least 1"));
        }
        let n = self.n_leaves;
        if k >= n {
            return Ok((0..n).collect());
        }
        let heights = self.distances()?;
        let mut order: Vec<usize> = (n..self.nodes.len()).collect();
        order.sort_by(|&a, &b| heights[a].total_cmp(&heights[b]));
        // Clusters at threshold t: n − Σ_{h_v ≤ t} (children(v) − 1), since the nodes at or
        // below t are closed under taking children.
        let mut count = n;
        let mut i = 0;
        while i < order.len() {
            let t = heights[order[i]];
            while i < order.len() && heights[order[i]].total_cmp(&t).is_eq() {
                count -= self.nodes[order[i]].children.len() - 1;
                i += 1;
            }
            if count <= k {
                return Ok(self.clusters_below(&heights, t));
            }
        }
        Ok(vec![self.root()])
    }

    /// The cluster label of every data row given flat clusters as node ids: labels
    /// `0..K` numbered by the first row of each cluster (so the result does not depend on the
    /// order of `clusters`).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `clusters` unless the nodes' leaf sets partition
    /// the data (every id in range, none below another, every row covered).
    pub fn labels(&self, clusters: &[usize]) -> Result<Vec<usize>> {
        let bad = |reason: String| RoseTreeError::param("clusters", reason);
        let total = self.nodes.len();
        let mut is_cluster = vec![false; total];
        for &c in clusters {
            if c >= total {
                return Err(bad(format!(
                    "node {c} is not in the tree (0 .. {})",
                    total - 1
                )));
            }
            if std::mem::replace(&mut is_cluster[c], true) {
                return Err(bad(format!("node {c} is listed twice")));
            }
        }
        // The cluster above or at each node, parents before children.
        let mut owner: Vec<Option<usize>> = vec![None; total];
        for v in (0..total).rev() {
            let above = self.nodes[v].parent.and_then(|p| owner[p]);
            owner[v] = match (above, is_cluster[v]) {
                (Some(a), true) => {
                    return Err(bad(format!(
                        "node {v} lies below node {a}; both are listed"
                    )));
                }
                (None, true) => Some(v),
                (above, false) => above,
            };
        }
        let mut label_of = vec![usize::MAX; total];
        let mut next = 0;
        let mut labels = Vec::with_capacity(self.n_leaves);
        for (row, own) in owner[..self.n_leaves].iter().enumerate() {
            let c = own.ok_or_else(|| bad(format!("row {row} is in none of the clusters")))?;
            if label_of[c] == usize::MAX {
                label_of[c] = next;
                next += 1;
            }
            labels.push(label_of[c]);
        }
        Ok(labels)
    }

    /// The tree as SciPy's linkage matrix `Z`: `n_leaves − 1` rows `[a, b, height, size]`,
    /// cluster `n_leaves + i` formed by row `i`. Heights are [`distances`](Self::distances); a node
    /// with `m` children becomes a chain of `m − 1` binary merges at the node's height
    /// (zero-length branches), its children taken in increasing (height, id). Rows are in
    /// increasing height (ties: children before parents), so `Z` is monotonic, and
    /// `fcluster(Z, t, "distance")` gives [`clusters_at_height`](Self::clusters_at_height)`(t)`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree has no heights.
    pub fn to_linkage(&self) -> Result<Vec<[f64; 4]>> {
        let heights = self.distances()?;
        let n = self.n_leaves;
        let mut order: Vec<usize> = (n..self.nodes.len()).collect();
        // A stable sort of a topological order: on equal heights, children stay first.
        order.sort_by(|&a, &b| heights[a].total_cmp(&heights[b]));
        let mut linkage_id: Vec<usize> = (0..self.nodes.len()).collect();
        let mut size = vec![1_usize; n];
        let mut rows = Vec::with_capacity(n.saturating_sub(1));
        for v in order {
            let mut kids = self.nodes[v].children.clone();
            kids.sort_by(|&a, &b| heights[a].total_cmp(&heights[b]).then(a.cmp(&b)));
            let mut cur = linkage_id[kids[0]];
            for &c in &kids[1..] {
                let other = linkage_id[c];
                let merged = size[cur] + size[other];
                rows.push([
                    cur.min(other) as f64,
                    cur.max(other) as f64,
                    heights[v],
                    merged as f64,
                ]);
                size.push(merged);
                cur = n + rows.len() - 1;
            }
            linkage_id[v] = cur;
        }
        Ok(rows)
    }

    /// The tree in Newick format. Leaves are named by `labels[i]` (or their row index);
    /// internal nodes carry no names or branch lengths.
    pub fn to_newick(&self, labels: Option<&[String]>) -> String {
        self.write_newick(labels, None)
    }

    /// The tree in Newick format with branch lengths `|h_parent − h_child|` from the heights,
    /// so that every leaf is at distance `|h_root − h_leaf|` from the root (an ultrametric
    /// tree). Leaves are named as in [`to_newick`](Self::to_newick).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] if the tree has no heights.
    pub fn to_newick_with_lengths(&self, labels: Option<&[String]>) -> Result<String> {
        Ok(self.write_newick(labels, Some(&self.distances()?)))
    }

    /// Writes the Newick string with an explicit stack, so that a chain of any depth fits.
    fn write_newick(&self, labels: Option<&[String]>, heights: Option<&[f64]>) -> String {
        enum Step {
            Open(usize),
            Close(usize),
            Comma,
        }
        let length = |out: &mut String, v: usize| {
            if let (Some(h), Some(p)) = (heights, self.nodes[v].parent) {
                out.push(':');
                out.push_str(&newick_number(h[p] - h[v]));
            }
        };
        let mut out = String::new();
        let mut stack = vec![Step::Open(self.root())];
        while let Some(step) = stack.pop() {
            match step {
                Step::Comma => out.push(','),
                Step::Close(v) => {
                    out.push(')');
                    length(&mut out, v);
                }
                Step::Open(v) if self.nodes[v].is_leaf() => {
                    match labels.and_then(|l| l.get(v)) {
                        Some(name) => out.push_str(&newick_quote(name)),
                        None => out.push_str(&v.to_string()),
                    }
                    length(&mut out, v);
                }
                Step::Open(v) => {
                    out.push('(');
                    stack.push(Step::Close(v));
                    for (k, &c) in self.nodes[v].children.iter().enumerate().rev() {
                        stack.push(Step::Open(c));
                        if k > 0 {
                            stack.push(Step::Comma);
                        }
                    }
                }
            }
        }
        out.push(';');
        out
    }
}

/// `+1` when heights grow from the leaves' height `leaf` towards the root's `root`, `−1`
/// when they fall (`+1` for a tree of one height).
fn direction(leaf: f64, root: f64) -> f64 {
    if root < leaf { -1.0 } else { 1.0 }
}

/// A branch length for Newick: the shortest decimal that reads back as the same `f64`, in
/// scientific notation when plain notation would be long.
fn newick_number(x: f64) -> String {
    if x == 0.0 || (1e-4..1e15).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Quotes a Newick label when it contains characters with a meaning in the format (an
/// unquoted `_` reads as a space, so it is quoted too), white space or control characters
/// (which readers skip), or is empty.
fn newick_quote(name: &str) -> String {
    let special = |c: char| "()[]':;,_".contains(c) || c.is_whitespace() || c.is_control();
    if name.is_empty() || name.chars().any(special) {
        format!("'{}'", name.replace('\'', "''"))
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests;
