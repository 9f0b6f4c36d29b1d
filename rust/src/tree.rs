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

    /// Every tree-consistent partition with its mixing proportion `ln m(φ | T)` (eq 1.6).
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `limit` when the tree has more than `limit`
    /// partitions (the count grows exponentially with the number of leaves).
    pub fn partitions(&self, limit: usize) -> Result<Vec<Partition>> {
        match self.n_partitions() {
            Some(n) if n <= limit as u128 => {}
            _ => {
                return Err(RoseTreeError::param(
                    "limit",
                    format!(
                        "the tree has about 10^{:.1} partitions, more than the limit {limit}",
                        self.n_partitions_log10()
                    ),
                ));
            }
        }
        Ok(self.partitions_below(self.root()))
    }

    fn partitions_below(&self, id: usize) -> Vec<Partition> {
        let node = &self.nodes[id];
        let whole = Partition {
            clusters: vec![id],
            log_weight: node.log_pi,
        };
        if node.is_leaf() {
            return vec![whole];
        }
        let mut combos = vec![Partition {
            clusters: Vec::new(),
            log_weight: node.log_1m_pi,
        }];
        for &c in &node.children {
            let below = self.partitions_below(c);
            combos = combos
                .iter()
                .flat_map(|p| {
                    below.iter().map(move |q| Partition {
                        clusters: p.clusters.iter().chain(&q.clusters).copied().collect(),
                        log_weight: p.log_weight + q.log_weight,
                    })
                })
                .collect();
        }
        combos.insert(0, whole);
        combos
    }

    /// The tree in Newick format. Leaves are named by `labels[i]` (or their row index);
    /// internal nodes carry no names or branch lengths.
    pub fn to_newick(&self, labels: Option<&[String]>) -> String {
        let mut out = String::new();
        self.write_newick(self.root(), labels, &mut out);
        out.push(';');
        out
    }

    fn write_newick(&self, id: usize, labels: Option<&[String]>, out: &mut String) {
        let node = &self.nodes[id];
        if node.is_leaf() {
            match labels.and_then(|l| l.get(id)) {
                Some(name) => out.push_str(&newick_quote(name)),
                None => out.push_str(&id.to_string()),
            }
            return;
        }
        out.push('(');
        for (k, &c) in node.children.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            self.write_newick(c, labels, out);
        }
        out.push(')');
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
