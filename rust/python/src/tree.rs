//! Trees as seen from Python: frozen handles with array getters. `Tree` is the shared
//! structure with optional heights (every family's output); `RoseTree` adds the rose-tree
//! mixture's quantities and hands out its structure as a `Tree`.

use ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::PyResult;

use std::ops::Deref;
use std::sync::Arc;

use rosetree::brt::{NodeValues, RoseTree};
use rosetree::tree::{Topology, Tree};

/// A tree with optional heights, shared by every model family. `rosetree.Tree` wraps it.
#[pyclass(frozen, module = "rosetree._core", name = "Tree")]
pub struct PyTree {
    pub(crate) inner: TreeRef,
}

/// A tree of its own, or the structure of a rose tree held elsewhere (a fitted model's),
/// which is then not copied.
pub(crate) enum TreeRef {
    Own(Tree),
    Rose(Arc<RoseTree>),
}

impl Deref for TreeRef {
    type Target = Tree;

    fn deref(&self) -> &Tree {
        match self {
            Self::Own(tree) => tree,
            Self::Rose(rose) => rose.tree(),
        }
    }
}

impl From<Tree> for PyTree {
    fn from(inner: Tree) -> Self {
        Self {
            inner: TreeRef::Own(inner),
        }
    }
}

#[pymethods]
impl PyTree {
    /// A tree from its shape (children of each internal node, in topological order) and
    /// optional heights, one per node; also what pickling uses.
    #[new]
    #[pyo3(signature = (n_leaves, internal, heights=None))]
    fn new(
        n_leaves: usize,
        internal: Vec<Vec<usize>>,
        heights: Option<Vec<f64>>,
    ) -> PyResult<Self> {
        let topology = Topology::new(n_leaves, internal)?;
        Ok(Tree::new(&topology, heights)?.into())
    }

    fn __getnewargs__(&self) -> (usize, Vec<Vec<usize>>, Option<Vec<f64>>) {
        (
            self.inner.n_leaves(),
            self.inner.topology().internal().to_vec(),
            self.inner.heights().map(<[f64]>::to_vec),
        )
    }

    /// Number of leaves (data rows).
    #[getter]
    fn n_leaves(&self) -> usize {
        self.inner.n_leaves()
    }

    /// Child ids of every node (empty lists for leaves).
    fn children(&self) -> Vec<Vec<usize>> {
        self.inner
            .nodes()
            .iter()
            .map(|n| n.children.clone())
            .collect()
    }

    /// Child ids of every node as a tuple of tuples (the leaves' is the empty tuple), so
    /// that Python need not copy the lists of [`children`](Self::children).
    fn children_tuples<'py>(&self, py: Python<'py>) -> pyo3::PyResult<Bound<'py, PyTuple>> {
        let empty = PyTuple::empty(py);
        let tuples = self
            .inner
            .nodes()
            .iter()
            .map(|n| {
                if n.children.is_empty() {
                    Ok(empty.clone())
                } else {
                    PyTuple::new(py, &n.children)
                }
            })
            .collect::<pyo3::PyResult<Vec<_>>>()?;
        PyTuple::new(py, tuples)
    }

    /// Leaves below every node.
    fn sizes<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<usize>> {
        self.inner
            .nodes()
            .iter()
            .map(|n| n.n_leaves)
            .collect::<Vec<_>>()
            .into_pyarray(py)
    }

    /// The height of every node, or `None`.
    fn heights<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<f64>>> {
        self.inner.heights().map(|h| h.to_vec().into_pyarray(py))
    }

    /// `log10` of the number of tree-consistent partitions.
    fn n_partitions_log10(&self) -> f64 {
        self.inner.n_partitions_log10()
    }

    /// Every node's distance from the leaves' height, or `None` without heights.
    fn distances<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<f64>>> {
        self.inner.distances().ok().map(|d| d.into_pyarray(py))
    }

    /// The number of tree-consistent partitions, exactly.
    fn n_partitions(&self) -> num_bigint::BigUint {
        self.inner.n_partitions_exact()
    }

    /// The parent of every node, `-1` at the root.
    fn parents<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.inner
            .nodes()
            .iter()
            .map(|n| n.parent.map_or(-1, |p| p as i64))
            .collect::<Vec<_>>()
            .into_pyarray(py)
    }

    /// The data rows below `node`, in increasing order.
    fn leaves_of(&self, node: usize) -> PyResult<Vec<usize>> {
        if node >= self.inner.nodes().len() {
            return Err(rosetree::RoseTreeError::param(
                "node",
                format!(
                    "node {node} is not in the tree (0 .. {})",
                    self.inner.nodes().len() - 1
                ),
            )
            .into());
        }
        Ok(self.inner.leaves_of(node))
    }

    /// The number of edges on the longest root-to-leaf path.
    fn depth(&self) -> usize {
        self.inner.depth()
    }

    /// Newick string, leaves named by `labels` or by row index; with `lengths`, branch
    /// lengths from the heights.
    #[pyo3(signature = (labels=None, lengths=false))]
    fn to_newick(&self, labels: Option<Vec<String>>, lengths: bool) -> PyResult<String> {
        Ok(if lengths {
            self.inner.to_newick_with_lengths(labels.as_deref())?
        } else {
            self.inner.to_newick(labels.as_deref())
        })
    }

    /// Cluster nodes of the maximal nodes at distance at most `t` from the leaves.
    fn clusters_at_height(&self, t: f64) -> PyResult<Vec<usize>> {
        Ok(self.inner.clusters_at_height(t)?)
    }

    /// Cluster nodes of the lowest cut with at most `k` clusters.
    fn max_clusters(&self, k: usize) -> PyResult<Vec<usize>> {
        Ok(self.inner.max_clusters(k)?)
    }

    /// Label of every row, given cluster nodes that partition the data.
    fn labels<'py>(
        &self,
        py: Python<'py>,
        clusters: Vec<usize>,
    ) -> PyResult<Bound<'py, PyArray1<usize>>> {
        Ok(self.inner.labels(&clusters)?.into_pyarray(py))
    }

    /// SciPy linkage matrix, `(n_leaves − 1) × 4`.
    fn to_linkage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let rows = self.inner.to_linkage()?;
        let flat: Vec<f64> = rows.iter().flatten().copied().collect();
        Ok(Array2::from_shape_vec((rows.len(), 4), flat)
            .expect("four numbers per row")
            .into_pyarray(py))
    }
}

/// A Bayesian rose tree computed in Rust. `rosetree.RoseTree` wraps it.
#[pyclass(frozen, module = "rosetree._core", name = "RoseTree")]
pub struct PyRoseTree {
    // Shared with the fitted model it came from, if any.
    pub(crate) inner: Arc<RoseTree>,
}

impl From<RoseTree> for PyRoseTree {
    fn from(inner: RoseTree) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }
}

impl From<Arc<RoseTree>> for PyRoseTree {
    fn from(inner: Arc<RoseTree>) -> Self {
        Self { inner }
    }
}

impl PyRoseTree {
    fn column<'py>(
        &self,
        py: Python<'py>,
        f: impl Fn(&NodeValues) -> f64,
    ) -> Bound<'py, PyArray1<f64>> {
        self.inner
            .values()
            .iter()
            .map(f)
            .collect::<Vec<_>>()
            .into_pyarray(py)
    }
}

#[pymethods]
impl PyRoseTree {
    /// Rebuilds a tree from the values `__getnewargs__` gives (this is what pickling uses).
    #[new]
    fn new(
        n_leaves: usize,
        internal: Vec<Vec<usize>>,
        log_f: Vec<f64>,
        log_p: Vec<f64>,
        log_pi: Vec<f64>,
        log_1m_pi: Vec<f64>,
    ) -> PyResult<Self> {
        let topology = Topology::new(n_leaves, internal)?;
        Ok(RoseTree::from_parts(&topology, &log_f, &log_p, &log_pi, &log_1m_pi)?.into())
    }

    #[allow(clippy::type_complexity)]
    fn __getnewargs__(
        &self,
    ) -> (
        usize,
        Vec<Vec<usize>>,
        Vec<f64>,
        Vec<f64>,
        Vec<f64>,
        Vec<f64>,
    ) {
        let values = self.inner.values();
        let col = |f: fn(&NodeValues) -> f64| values.iter().map(f).collect::<Vec<_>>();
        (
            self.inner.n_leaves(),
            self.inner.topology().internal().to_vec(),
            col(|v| v.log_f),
            col(|v| v.log_p),
            col(|v| v.log_pi),
            col(|v| v.log_1m_pi),
        )
    }

    /// The structure and heights (`h_v = −max ln r` on the root path), as the shared tree.
    fn tree(&self) -> PyTree {
        PyTree {
            inner: TreeRef::Rose(Arc::clone(&self.inner)),
        }
    }

    /// `ln p(D | T)` of the whole tree.
    #[getter]
    fn log_evidence(&self) -> f64 {
        self.inner.log_evidence()
    }

    /// `ln f` of every node.
    fn log_f<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |v| v.log_f)
    }

    /// `ln p(leaves(T) | T)` of every node.
    fn log_p<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |v| v.log_p)
    }

    /// `ln π_T` of every node (0 at leaves).
    fn log_pi<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |v| v.log_pi)
    }

    /// `ln r_T` of every node (eq 1.26; 0 at leaves).
    fn log_r<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, NodeValues::log_r)
    }

    /// `ln(1 − π_T)` of every node (−inf at leaves).
    fn log_1m_pi<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |v| v.log_1m_pi)
    }

    /// Every tree-consistent partition as `(node ids, ln m(φ|T))`.
    fn partitions(&self, limit: usize) -> PyResult<Vec<(Vec<usize>, f64)>> {
        Ok(self
            .inner
            .partitions(limit)?
            .into_iter()
            .map(|p| (p.clusters, p.log_weight))
            .collect())
    }

    /// `ln w_S` of every node (eq 1.25).
    fn log_cluster_weights<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        rosetree::brt::log_cluster_weights(&self.inner).into_pyarray(py)
    }

    /// Cluster nodes of the top-down cut `r ≥ threshold`.
    fn cut(&self, threshold: f64) -> PyResult<Vec<usize>> {
        Ok(self.inner.cut(threshold)?)
    }

    /// The same tree with its mixture quantities recomputed under another mixing rule.
    fn remix(&self, mixing: &str, gamma: f64, dp_alpha: f64) -> PyResult<Self> {
        let mixing = super::parse_mixing(mixing, gamma, dp_alpha)?;
        Ok(rosetree::brt::remix(&self.inner, &mixing).into())
    }

    /// The most probable coarsening of the tree under `"brt"` or `"gamma"` mixing.
    fn coarsen(&self, mixing: &str, gamma: f64, dp_alpha: f64) -> PyResult<Self> {
        let mixing = super::parse_mixing(mixing, gamma, dp_alpha)?;
        Ok(rosetree::brt::coarsen(&self.inner, &mixing)?.into())
    }

    /// Cluster nodes of `remix(mixing, gamma, dp_alpha).cut(threshold)`, without the
    /// remixed tree.
    fn cut_remixed(
        &self,
        mixing: &str,
        gamma: f64,
        dp_alpha: f64,
        threshold: f64,
    ) -> PyResult<Vec<usize>> {
        let mixing = super::parse_mixing(mixing, gamma, dp_alpha)?;
        Ok(rosetree::brt::cut_remixed(&self.inner, &mixing, threshold)?)
    }

    /// Cluster nodes of the most probable tree-consistent partition.
    fn map_partition(&self) -> Vec<usize> {
        self.inner.map_partition()
    }
}
