//! The fitted tree as seen from Python: a frozen handle with array getters.

use ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::prelude::*;

use crate::tree::{RoseTree, Topology};

/// A Bayesian rose tree computed in Rust. `rosetree.RoseTree` wraps it.
#[pyclass(frozen, module = "rosetree._core", name = "RoseTree")]
pub struct PyRoseTree {
    pub(crate) inner: RoseTree,
}

impl From<RoseTree> for PyRoseTree {
    fn from(inner: RoseTree) -> Self {
        Self { inner }
    }
}

impl PyRoseTree {
    fn column<'py>(
        &self,
        py: Python<'py>,
        f: impl Fn(&crate::Node) -> f64,
    ) -> Bound<'py, PyArray1<f64>> {
        self.inner
            .nodes()
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
        let nodes = self.inner.nodes();
        let col = |f: fn(&crate::Node) -> f64| nodes.iter().map(f).collect::<Vec<_>>();
        (
            self.inner.n_leaves(),
            self.inner.topology().internal().to_vec(),
            col(|n| n.log_f),
            col(|n| n.log_p),
            col(|n| n.log_pi),
            col(|n| n.log_1m_pi),
        )
    }

    /// Number of leaves (data rows).
    #[getter]
    fn n_leaves(&self) -> usize {
        self.inner.n_leaves()
    }

    /// `ln p(D | T)` of the whole tree.
    #[getter]
    fn log_evidence(&self) -> f64 {
        self.inner.log_evidence()
    }

    /// Child ids of every node (empty lists for leaves).
    fn children(&self) -> Vec<Vec<usize>> {
        self.inner
            .nodes()
            .iter()
            .map(|n| n.children.clone())
            .collect()
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

    /// `ln f` of every node.
    fn log_f<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |n| n.log_f)
    }

    /// `ln p(leaves(T) | T)` of every node.
    fn log_p<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |n| n.log_p)
    }

    /// `ln π_T` of every node (0 at leaves).
    fn log_pi<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |n| n.log_pi)
    }

    /// `ln(1 − π_T)` of every node (−inf at leaves).
    fn log_1m_pi<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.column(py, |n| n.log_1m_pi)
    }

    /// `log10` of the number of tree-consistent partitions.
    fn n_partitions_log10(&self) -> f64 {
        self.inner.n_partitions_log10()
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

    /// Newick string, leaves named by `labels` or by row index; with `lengths`, branch
    /// lengths from the heights.
    #[pyo3(signature = (labels=None, lengths=false))]
    fn to_newick(&self, labels: Option<Vec<String>>, lengths: bool) -> String {
        if lengths {
            self.inner.to_newick_with_lengths(labels.as_deref())
        } else {
            self.inner.to_newick(labels.as_deref())
        }
    }

    /// `h_v = −max ln r` over the path from the root to every node.
    fn heights<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.heights().into_pyarray(py)
    }

    /// `ln w_S` of every node (eq 1.25).
    fn log_cluster_weights<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        crate::brt::log_cluster_weights(&self.inner).into_pyarray(py)
    }

    /// Cluster nodes of the top-down cut `r ≥ threshold`.
    fn cut(&self, threshold: f64) -> PyResult<Vec<usize>> {
        Ok(self.inner.cut(threshold)?)
    }

    /// Cluster nodes of the maximal nodes with height at most `t`.
    fn clusters_at_height(&self, t: f64) -> Vec<usize> {
        self.inner.clusters_at_height(t)
    }

    /// Cluster nodes of the most probable tree-consistent partition.
    fn map_partition(&self) -> Vec<usize> {
        self.inner.map_partition()
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
    fn to_linkage<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        let rows = self.inner.to_linkage();
        let flat: Vec<f64> = rows.iter().flatten().copied().collect();
        Array2::from_shape_vec((rows.len(), 4), flat)
            .expect("four numbers per row")
            .into_pyarray(py)
    }
}
