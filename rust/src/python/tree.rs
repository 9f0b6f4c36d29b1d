//! The fitted tree as seen from Python: a frozen handle with array getters.

use numpy::{IntoPyArray, PyArray1};
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

    /// Newick string, leaves named by `labels` or by row index.
    #[pyo3(signature = (labels=None))]
    fn to_newick(&self, labels: Option<Vec<String>>) -> String {
        self.inner.to_newick(labels.as_deref())
    }
}
