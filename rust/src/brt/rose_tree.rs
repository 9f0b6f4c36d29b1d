//! A Bayesian rose tree: the shared [`Tree`] with the quantities of the rose-tree mixture
//! at every node (BRT eqs 1.3–1.7, 1.26) and heights derived from them.

use std::ops::Deref;

use crate::error::{Result, RoseTreeError};
use crate::tree::{Node, Topology, Tree};

/// The rose-tree mixture's quantities at one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeValues {
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

impl NodeValues {
    /// `ln r_T = ln π_T + ln f − ln p` (eq 1.26): the log posterior probability that the
    /// leaves of `T` form one cluster, given that the mixture reaches `T`.
    pub fn log_r(&self) -> f64 {
        (self.log_pi + self.log_f - self.log_p).min(0.0)
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

/// A rose tree: the shared [`Tree`] (which it dereferences to, for the structure) with
/// [`NodeValues`] at every node. Its heights are `h_v = −max ln r` over the path from the root
/// to `v` ([`RoseTree::heights`]).
#[derive(Debug, Clone, PartialEq)]
pub struct RoseTree {
    tree: Tree,
    values: Vec<NodeValues>,
}

impl Deref for RoseTree {
    type Target = Tree;

    fn deref(&self) -> &Tree {
        &self.tree
    }
}

impl RoseTree {
    /// Assembles a tree from children lists and values in the id order of the shared tree
    /// (leaves first, children before parents).
    pub(crate) fn from_nodes<I>(n_leaves: usize, nodes: I) -> Self
    where
        I: IntoIterator<Item = (Vec<usize>, NodeValues)>,
        I::IntoIter: ExactSizeIterator,
    {
        let nodes = nodes.into_iter();
        let mut structure: Vec<Node> = Vec::with_capacity(nodes.len());
        let mut values: Vec<NodeValues> = Vec::with_capacity(nodes.len());
        for (children, v) in nodes {
            values.push(v);
            let n_leaves = if children.is_empty() {
                1
            } else {
                children.iter().map(|&c| structure[c].n_leaves).sum()
            };
            structure.push(Node {
                children,
                parent: None,
                n_leaves,
            });
        }
        let mut tree = Tree::from_nodes(n_leaves, structure);
        // Path maxima are monotone by construction; a NaN value (which evaluation reports as
        // an error of its own) must not turn into a panic here.
        tree.set_heights_unchecked(path_heights(&tree, &values));
        Self { tree, values }
    }

    /// Reassembles a tree from its shape and per-node values (as stored by
    /// [`Tree::topology`] and the [`NodeValues`]), for example after serialisation. Each
    /// slice has one value per node, leaves first.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidTree`] for slices of the wrong length or a value that makes
    /// a height non-finite.
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
        let tree = Tree::new(topology, None)?;
        let values: Vec<NodeValues> = (0..total)
            .map(|id| NodeValues {
                log_f: log_f[id],
                log_p: log_p[id],
                log_pi: log_pi[id],
                log_1m_pi: log_1m_pi[id],
            })
            .collect();
        let heights = path_heights(&tree, &values);
        let tree = tree.with_heights(heights)?;
        Ok(Self { tree, values })
    }

    /// Assembles a tree from nodes with gaps: `nodes[k]` is `None` for an id that does not
    /// survive (a root dissolved by an absorb or collapse, a contracted edge). The surviving
    /// nodes keep their relative order and are renumbered densely; the last one is the root.
    pub(crate) fn from_sparse_nodes(nodes: Vec<Option<(Vec<usize>, NodeValues)>>) -> Self {
        let mut new_id = vec![usize::MAX; nodes.len()];
        let mut next = 0;
        for (old, node) in nodes.iter().enumerate() {
            if node.is_some() {
                new_id[old] = next;
                next += 1;
            }
        }
        let dense: Vec<(Vec<usize>, NodeValues)> = nodes
            .into_iter()
            .flatten()
            .map(|(mut children, values)| {
                for c in &mut children {
                    *c = new_id[*c];
                }
                (children, values)
            })
            .collect();
        let n_leaves = dense.iter().filter(|(c, _)| c.is_empty()).count();
        Self::from_nodes(n_leaves, dense)
    }

    /// The shared tree (structure and heights).
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The rose-tree quantities of every node, by node id.
    pub fn values(&self) -> &[NodeValues] {
        &self.values
    }

    /// The rose-tree quantities of node `id`.
    pub fn value(&self, id: usize) -> &NodeValues {
        &self.values[id]
    }

    /// `ln p(D | T)` of the whole tree (eq 1.5).
    pub fn log_evidence(&self) -> f64 {
        self.values[self.root()].log_p
    }

    /// The height of every node: `h_v = −max_{A ∈ path(root → v)} ln r_A`, with `r_A` the
    /// posterior merge probability of eq 1.26 and the path including `v` itself.
    ///
    /// Leaves are at 0 (`r = 1`), a parent is never below its children, and the maximal
    /// nodes with `h_v ≤ −ln t` are exactly the clusters of Heller & Ghahramani's top-down cut
    /// `r ≥ t` ([`cut`](Self::cut)): descending from the root, the first node with
    /// `ln r_A ≥ ln t` is the first whose height is at most `−ln t`. These are the heights of
    /// [`Tree::to_linkage`].
    pub fn heights(&self) -> &[f64] {
        self.tree.heights().expect("a rose tree has heights")
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
                if n.saturating_mul(self.n_leaves() as u128) > MAX_PARTITION_ROWS {
                    return Err(too_many(&format!(
                        "which over {} leaves exceed {MAX_PARTITION_ROWS} rows in all",
                        self.n_leaves()
                    )));
                }
            }
            _ => return Err(too_many(&format!("more than the limit {limit}"))),
        }
        // Bottom-up over the ids (children before parents), so that no walk recurses; each
        // node's list is taken by its parent once.
        let mut below: Vec<Vec<Partition>> = Vec::with_capacity(self.nodes().len());
        for (id, (node, values)) in self.nodes().iter().zip(&self.values).enumerate() {
            let whole = Partition {
                clusters: vec![id],
                log_weight: values.log_pi,
            };
            let mut combos = vec![Partition {
                clusters: Vec::new(),
                log_weight: values.log_1m_pi,
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

    /// Heller & Ghahramani's flat clustering: descending from the root, a node whose
    /// posterior `r_T ≥ threshold` (eq 1.26) becomes one cluster; otherwise its children are
    /// visited. Returns the cluster nodes in increasing id order; equal to
    /// [`clusters_at_height`](Tree::clusters_at_height)`(−ln threshold)`.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] unless `0 ≤ threshold ≤ 1`.
    pub fn cut(&self, threshold: f64) -> Result<Vec<usize>> {
        // −ln is exact negation of ln, so h_v ≤ −ln t ⇔ max ln r ≥ ln t exactly.
        self.tree
            .clusters_at_height(-Self::log_threshold(threshold)?)
    }

    /// `ln threshold` of a cut's threshold.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] unless `0 ≤ threshold ≤ 1`.
    pub(crate) fn log_threshold(threshold: f64) -> Result<f64> {
        if !(0.0..=1.0).contains(&threshold) {
            return Err(RoseTreeError::param(
                "threshold",
                format!("must lie in [0, 1], got {threshold}"),
            ));
        }
        Ok(threshold.ln())
    }

    /// The most probable tree-consistent partition: the maximiser of `m(φ | T) Π_c f(D_c)`
    /// over `φ ∈ Φ(T)` (the numerator of the partition posterior, eqs 1.4 and 1.6), found by
    /// dynamic programming: `best(T) = max(π_T f(D_T), (1 − π_T) Π_i best(T_i))`, keeping the
    /// whole cluster on a tie. Returns the cluster nodes in increasing id order.
    pub fn map_partition(&self) -> Vec<usize> {
        let n_nodes = self.nodes().len();
        let mut best = Vec::with_capacity(n_nodes);
        let mut keep = vec![true; n_nodes];
        for (id, (node, v)) in self.nodes().iter().zip(&self.values).enumerate() {
            if node.is_leaf() {
                best.push(v.log_f);
                continue;
            }
            let whole = v.log_pi + v.log_f;
            let split = v.log_1m_pi + node.children.iter().map(|&c| best[c]).sum::<f64>();
            keep[id] = whole >= split;
            best.push(whole.max(split));
        }
        self.top_down(|v| keep[v])
    }
}

/// `−max ln r` over the path from the root to every node (see [`RoseTree::heights`]).
fn path_heights(tree: &Tree, values: &[NodeValues]) -> Vec<f64> {
    let nodes = tree.nodes();
    let mut best = vec![f64::NEG_INFINITY; nodes.len()];
    for v in (0..nodes.len()).rev() {
        let above = nodes[v].parent.map_or(f64::NEG_INFINITY, |p| best[p]);
        best[v] = above.max(values[v].log_r());
    }
    // 0.0 − m rather than −m, so that leaves get +0.0.
    best.into_iter().map(|m| 0.0 - m).collect()
}

/// Partitions × leaves above which [`RoseTree::partitions`] refuses to list partitions
/// (2²⁸, a few GiB of cluster ids).
pub const MAX_PARTITION_ROWS: u128 = 1 << 28;

#[cfg(test)]
mod tests;
