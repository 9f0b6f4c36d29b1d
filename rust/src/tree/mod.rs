//! The rose tree shared by every engine: an arena of nodes annotated with the quantities of
//! the Bayesian rose tree mixture (BRT eqs 1.3–1.7, 1.26).
//!
//! Node ids are dense: leaves are `0..n_leaves` (leaf `i` is data row `i`), internal nodes
//! follow in topological order (every child before its parent), and the root is the last
//! node.

use crate::error::{Result, RoseTreeError};
use crate::math::log_add_exp;

/// One node of a [`RoseTree`].
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Child node ids; empty for a leaf.
    pub children: Vec<usize>,
    /// Parent node id; `None` for the root.
    pub parent: Option<usize>,
    /// Number of data items (leaves) below this node.
    pub n_leaves: usize,
    /// `ln f(leaves(T))`, the cluster's log marginal likelihood (eq 1.1).
    pub log_f: f64,
    /// `ln p(leaves(T) | T)`, the subtree's log evidence (eq 1.5).
    pub log_p: f64,
    /// `ln π_T`, the log mixing proportion of keeping the leaves together; `0` for a leaf.
    pub log_pi: f64,
    /// `ln(1 − π_T)`, kept separately so that it is accurate when `π_T` is close to one;
    /// `−∞` for a leaf.
    pub log_1m_pi: f64,
}

impl Node {
    /// Whether this node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }

    /// `ln r_T = ln π_T + ln f − ln p` (eq 1.26): the log posterior probability that the
    /// leaves of `T` form one cluster, given that the mixture reaches `T`.
    pub fn log_r(&self) -> f64 {
        (self.log_pi + self.log_f - self.log_p).min(0.0)
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

/// A tree-consistent partition (eq 1.3) with its mixing proportion (eq 1.6).
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// The node ids whose leaf sets are the clusters.
    pub clusters: Vec<usize>,
    /// `ln m(φ | T)`.
    pub log_weight: f64,
}

/// A rose tree whose nodes carry `ln f`, `ln p` and `ln π` (see [`Node`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RoseTree {
    nodes: Vec<Node>,
    n_leaves: usize,
}

impl RoseTree {
    /// Assembles a tree from annotated nodes in the id order described in the module docs;
    /// parents are filled in here.
    pub(crate) fn from_nodes(n_leaves: usize, mut nodes: Vec<Node>) -> Self {
        for id in 0..nodes.len() {
            for k in 0..nodes[id].children.len() {
                let c = nodes[id].children[k];
                nodes[c].parent = Some(id);
            }
        }
        Self { nodes, n_leaves }
    }

    /// Reassembles a tree from its shape and per-node values (as stored by
    /// [`RoseTree::topology`] and the node fields), for example after serialisation. Each
    /// slice has one value per node, leaves first.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] for an invalid shape or slices of the wrong length.
    pub fn from_parts(
        topology: &Topology,
        log_f: &[f64],
        log_p: &[f64],
        log_pi: &[f64],
        log_1m_pi: &[f64],
    ) -> Result<Self> {
        let n = topology.n_leaves();
        let total = n + topology.internal().len();
        if [log_f.len(), log_p.len(), log_pi.len(), log_1m_pi.len()]
            .iter()
            .any(|&l| l != total)
        {
            return Err(RoseTreeError::InvalidTree(format!(
                "expected {total} values per node quantity"
            )));
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(total);
        for id in 0..total {
            let children = if id < n {
                Vec::new()
            } else {
                topology.internal()[id - n].clone()
            };
            let n_leaves = if id < n {
                1
            } else {
                children.iter().map(|&c| nodes[c].n_leaves).sum()
            };
            nodes.push(Node {
                children,
                parent: None,
                n_leaves,
                log_f: log_f[id],
                log_p: log_p[id],
                log_pi: log_pi[id],
                log_1m_pi: log_1m_pi[id],
            });
        }
        Ok(Self::from_nodes(n, nodes))
    }

    /// Assembles a tree from nodes with gaps: `nodes[k]` is `None` for an id that does not
    /// survive (a root dissolved by an absorb or collapse, a contracted edge). The surviving
    /// nodes keep their relative order and are renumbered densely; the last one is the root.
    pub(crate) fn from_sparse_nodes(nodes: Vec<Option<Node>>) -> Self {
        let mut new_id = vec![usize::MAX; nodes.len()];
        let mut next = 0;
        for (old, node) in nodes.iter().enumerate() {
            if node.is_some() {
                new_id[old] = next;
                next += 1;
            }
        }
        let dense: Vec<Node> = nodes
            .into_iter()
            .flatten()
            .map(|mut node| {
                for c in &mut node.children {
                    *c = new_id[*c];
                }
                node
            })
            .collect();
        let n_leaves = dense.iter().filter(|n| n.is_leaf()).count();
        Self::from_nodes(n_leaves, dense)
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

    /// `ln p(D | T)` of the whole tree (eq 1.5).
    pub fn log_evidence(&self) -> f64 {
        self.nodes[self.root()].log_p
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

    /// Every tree-consistent partition with its mixing proportion `ln m(φ | T)` (eq 1.6), in
    /// the order of the recursion: at each node the whole cluster first, then every
    /// combination of its children's partitions, the first child varying slowest.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `limit` when the tree has more than `limit`
    /// partitions (the count grows exponentially with the number of leaves), or when
    /// partitions × leaves exceeds [`MAX_PARTITION_ROWS`]: every partition covers all the
    /// data, so a chain of `n` leaves, with only `n` partitions, already lists `n²/2`
    /// clusters.
    pub fn partitions(&self, limit: usize) -> Result<Vec<Partition>> {
        let too_many = |what: &str| {
            RoseTreeError::param(
                "limit",
                format!(
                    "the tree has about 10^{:.1} partitions, {what}",
                    self.n_partitions_log10()
                ),
            )
        };
        match self.n_partitions() {
            Some(n) if n <= limit as u128 => {
                if n.saturating_mul(self.n_leaves as u128) > MAX_PARTITION_ROWS {
                    return Err(too_many(&format!(
                        "which over {} leaves exceed {MAX_PARTITION_ROWS} rows in all",
                        self.n_leaves
                    )));
                }
            }
            _ => return Err(too_many(&format!("more than the limit {limit}"))),
        }
        // Bottom-up over the ids (children before parents), so that no walk recurses; each
        // node's list is taken by its parent once.
        let mut below: Vec<Vec<Partition>> = Vec::with_capacity(self.nodes.len());
        for (id, node) in self.nodes.iter().enumerate() {
            let whole = Partition {
                clusters: vec![id],
                log_weight: node.log_pi,
            };
            let mut combos = vec![Partition {
                clusters: Vec::new(),
                log_weight: node.log_1m_pi,
            }];
            if node.is_leaf() {
                below.push(vec![whole]);
                continue;
            }
            for &c in &node.children {
                let child = std::mem::take(&mut below[c]);
                combos = combos
                    .iter()
                    .flat_map(|p| {
                        child.iter().map(move |q| Partition {
                            clusters: p.clusters.iter().chain(&q.clusters).copied().collect(),
                            log_weight: p.log_weight + q.log_weight,
                        })
                    })
                    .collect();
            }
            combos.insert(0, whole);
            below.push(combos);
        }
        Ok(below.pop().expect("a tree has a root"))
    }

    /// The height of every node: `h_v = −max_{A ∈ path(root → v)} ln r_A`, with `r_A` the
    /// posterior merge probability of eq 1.26 and the path including `v` itself.
    ///
    /// Leaves are at 0 (`r = 1`), a parent is never below its children, and the maximal
    /// nodes with `h_v ≤ −ln t` are exactly the clusters of Heller & Ghahramani's top-down cut
    /// `r ≥ t` ([`cut`](Self::cut)): descending from the root, the first node with
    /// `ln r_A ≥ ln t` is the first whose height is at most `−ln t`. These are the heights of
    /// [`to_linkage`](Self::to_linkage).
    pub fn heights(&self) -> Vec<f64> {
        let mut best = vec![f64::NEG_INFINITY; self.nodes.len()];
        for v in (0..self.nodes.len()).rev() {
            let above = self.nodes[v].parent.map_or(f64::NEG_INFINITY, |p| best[p]);
            best[v] = above.max(self.nodes[v].log_r());
        }
        // 0.0 − m rather than −m, so that leaves get +0.0.
        best.into_iter().map(|m| 0.0 - m).collect()
    }

    /// The maximal nodes whose height ([`heights`](Self::heights)) is at most `t`, in
    /// increasing id order; leaves are always taken. These are the flat clusters that SciPy's
    /// `fcluster(Z, t, "distance")` finds in [`to_linkage`](Self::to_linkage).
    pub fn clusters_at_height(&self, t: f64) -> Vec<usize> {
        self.clusters_below(&self.heights(), t)
    }

    fn clusters_below(&self, heights: &[f64], t: f64) -> Vec<usize> {
        self.top_down(|v| self.nodes[v].is_leaf() || heights[v] <= t)
    }

    /// The nodes where a descent from the root stops (`stop(v)` is true; it must be at every
    /// leaf), in increasing id order.
    fn top_down(&self, stop: impl Fn(usize) -> bool) -> Vec<usize> {
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

    /// Heller & Ghahramani's flat clustering: descending from the root, a node whose
    /// posterior `r_T ≥ threshold` (eq 1.26) becomes one cluster; otherwise its children are
    /// visited. Returns the cluster nodes in increasing id order; equal to
    /// [`clusters_at_height`](Self::clusters_at_height)`(−ln threshold)`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] unless `0 ≤ threshold ≤ 1`.
    pub fn cut(&self, threshold: f64) -> Result<Vec<usize>> {
        if !(0.0..=1.0).contains(&threshold) {
            return Err(RoseTreeError::param(
                "threshold",
                format!("must lie in [0, 1], got {threshold}"),
            ));
        }
        // −ln is exact negation of ln, so h_v ≤ −ln t ⇔ max ln r ≥ ln t exactly.
        Ok(self.clusters_at_height(-threshold.ln()))
    }

    /// The most probable tree-consistent partition: the maximiser of `m(φ | T) Π_c f(D_c)`
    /// over `φ ∈ Φ(T)` (the numerator of the partition posterior, eqs 1.4 and 1.6), found by
    /// dynamic programming: `best(T) = max(π_T f(D_T), (1 − π_T) Π_i best(T_i))`, keeping the
    /// whole cluster on a tie. Returns the cluster nodes in increasing id order.
    pub fn map_partition(&self) -> Vec<usize> {
        let mut best = Vec::with_capacity(self.nodes.len());
        let mut keep = vec![true; self.nodes.len()];
        for (id, node) in self.nodes.iter().enumerate() {
            if node.is_leaf() {
                best.push(node.log_f);
                continue;
            }
            let whole = node.log_pi + node.log_f;
            let split = node.log_1m_pi + node.children.iter().map(|&c| best[c]).sum::<f64>();
            keep[id] = whole >= split;
            best.push(whole.max(split));
        }
        self.top_down(|v| keep[v])
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
    /// [`RoseTreeError::InvalidParameter`] on `n_clusters` when `k` is 0.
    pub fn max_clusters(&self, k: usize) -> Result<Vec<usize>> {
        if k == 0 {
            return Err(RoseTreeError::param("n_clusters", "must be at least 1"));
        }
        let n = self.n_leaves;
        if k >= n {
            return Ok((0..n).collect());
        }
        let heights = self.heights();
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
    /// cluster `n_leaves + i` formed by row `i`. Heights are [`heights`](Self::heights); a node
    /// with `m` children becomes a chain of `m − 1` binary merges at the node's height
    /// (zero-length branches), its children taken in increasing (height, id). Rows are in
    /// increasing height (ties: children before parents), so `Z` is monotonic, and
    /// `fcluster(Z, t, "distance")` gives [`clusters_at_height`](Self::clusters_at_height)`(t)`.
    pub fn to_linkage(&self) -> Vec<[f64; 4]> {
        let heights = self.heights();
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
        rows
    }

    /// The tree in Newick format. Leaves are named by `labels[i]` (or their row index);
    /// internal nodes carry no names or branch lengths.
    pub fn to_newick(&self, labels: Option<&[String]>) -> String {
        self.write_newick(labels, None)
    }

    /// The tree in Newick format with branch lengths `h_parent − h_child` from
    /// [`heights`](Self::heights), so that every leaf is at distance `h_root` from the root
    /// (an ultrametric tree). Leaves are named as in [`to_newick`](Self::to_newick).
    pub fn to_newick_with_lengths(&self, labels: Option<&[String]>) -> String {
        self.write_newick(labels, Some(&self.heights()))
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

/// Partitions × leaves above which [`RoseTree::partitions`] refuses to list partitions
/// (2²⁸, a few GiB of cluster ids).
pub const MAX_PARTITION_ROWS: u128 = 1 << 28;

/// A branch length for Newick: the shortest decimal that reads back as the same `f64`, in
/// scientific notation when plain notation would be long.
fn newick_number(x: f64) -> String {
    if x == 0.0 || (1e-4..1e15).contains(&x.abs()) {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}

/// Quotes a Newick label when it contains characters with a meaning in the format.
fn newick_quote(name: &str) -> String {
    if name.chars().any(|c| "()[]':;, \t\n".contains(c)) {
        format!("'{}'", name.replace('\'', "''"))
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests;
