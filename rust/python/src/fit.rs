//! A fitted rose tree kept in Rust (`rosetree._core.BrtFit`): the model, the tree, every
//! node's statistics and the training data, as the fit left them. Prediction (BRT §1.4.1:
//! new rows by eq 1.25, filled-in training data by eq 1.24, beta–Bernoulli missing entries)
//! reads them there; Python sends only the new rows.

use std::sync::Arc;

use ndarray::{Array2, ArrayView2, Axis, concatenate, s};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::PyResult;

use super::callback::CallbackModel;
use super::models::{
    AnyModel, ModelSpec, PyModelSpec, build_model, build_model_csr, conjugate_families,
};
use super::run_interruptible;
use super::tree::PyRoseTree;
use rosetree::brt::{self, GrowParams, Predictor, RoseTree};
use rosetree::error::RoseTreeError;
use rosetree::models::{
    BetaBernoulli, ClusterModel, DirichletMultinomial, NormalGamma, NormalInverseWishart,
    RowQueries,
};
use rosetree::parallel::Threads;

/// Training data as Python passes it: a dense array (`float64`, or binary data as `bool` or
/// `uint8`, or `float32`), or a CSR matrix as `(indptr, indices, data, n_cols)`.
#[derive(FromPyObject)]
pub(crate) enum Training<'py> {
    Dense(PyReadonlyArray2<'py, f64>),
    Bool(PyReadonlyArray2<'py, bool>),
    Bytes(PyReadonlyArray2<'py, u8>),
    Single(PyReadonlyArray2<'py, f32>),
    Csr(
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, i64>,
        PyReadonlyArray1<'py, f64>,
        usize,
    ),
}

/// The training data a fit keeps (a private copy).
pub(crate) enum TrainingData {
    Dense(Array2<f64>),
    /// `uint8` data, one byte an entry (an eighth of a `float64` copy).
    Bytes(Array2<u8>),
    /// `bool` data, one bit an entry: [`PackedBits`].
    Bits(PackedBits),
    Csr {
        indptr: Vec<i64>,
        indices: Vec<i64>,
        data: Vec<f64>,
        n_cols: usize,
    },
}

/// `bool` rows packed 64 to a word (`⌈n_cols / 64⌉` words a row): what a fit keeps of
/// `bool` training data, an eighth of a byte copy.
pub(crate) struct PackedBits {
    words: Vec<u64>,
    n_rows: usize,
    n_cols: usize,
}

impl PackedBits {
    fn new(x: ArrayView2<'_, bool>) -> Self {
        let per_row = x.ncols().div_ceil(64);
        let mut words = vec![0u64; x.nrows() * per_row];
        for (r, row) in x.rows().into_iter().enumerate() {
            for (j, &bit) in row.iter().enumerate() {
                words[r * per_row + j / 64] |= u64::from(bit) << (j % 64);
            }
        }
        Self {
            words,
            n_rows: x.nrows(),
            n_cols: x.ncols(),
        }
    }

    fn get(&self, r: usize, j: usize) -> bool {
        let per_row = self.n_cols.div_ceil(64);
        (self.words[r * per_row + j / 64] >> (j % 64)) & 1 == 1
    }

    /// Row `r` as doubles (0 or 1) in `row`.
    fn row_into(&self, r: usize, row: &mut ndarray::Array1<f64>) {
        for (j, v) in row.iter_mut().enumerate() {
            *v = f64::from(u8::from(self.get(r, j)));
        }
    }

    fn to_bool(&self) -> Array2<bool> {
        Array2::from_shape_fn((self.n_rows, self.n_cols), |(r, j)| self.get(r, j))
    }
}

impl Training<'_> {
    /// A private copy, checked for the shape of a CSR matrix.
    pub(crate) fn to_owned_data(&self) -> PyResult<TrainingData> {
        Ok(match self {
            Self::Dense(x) => TrainingData::Dense(x.as_array().to_owned()),
            Self::Bool(x) => TrainingData::Bits(PackedBits::new(x.as_array())),
            Self::Bytes(x) => TrainingData::Bytes(x.as_array().to_owned()),
            Self::Single(x) => TrainingData::Dense(x.as_array().mapv(f64::from)),
            Self::Csr(indptr, indices, data, n_cols) => {
                let data = TrainingData::Csr {
                    indptr: indptr.as_slice()?.to_vec(),
                    indices: indices.as_slice()?.to_vec(),
                    data: data.as_slice()?.to_vec(),
                    n_cols: *n_cols,
                };
                data.csr_rows()?;
                data
            }
        })
    }
}

impl TrainingData {
    fn n_rows(&self) -> usize {
        match self {
            Self::Dense(x) => x.nrows(),
            Self::Bytes(x) => x.nrows(),
            Self::Bits(b) => b.n_rows,
            Self::Csr { indptr, .. } => indptr.len().saturating_sub(1),
        }
    }

    fn n_cols(&self) -> usize {
        match self {
            Self::Dense(x) => x.ncols(),
            Self::Bytes(x) => x.ncols(),
            Self::Bits(b) => b.n_cols,
            Self::Csr { n_cols, .. } => *n_cols,
        }
    }

    /// The columns and the span in `data` of every row of a CSR matrix.
    pub(crate) fn csr_rows(&self) -> PyResult<Vec<(Vec<usize>, std::ops::Range<usize>)>> {
        let Self::Csr {
            indptr,
            indices,
            data,
            n_cols,
        } = self
        else {
            return Ok(Vec::new());
        };
        let bad = |what: &str| RoseTreeError::param("X", format!("malformed CSR matrix: {what}"));
        if indptr.first() != Some(&0) || indices.len() != data.len() {
            return Err(bad("indptr must start at 0 and indices match data in length").into());
        }
        let mut rows = Vec::with_capacity(indptr.len().saturating_sub(1));
        for span in indptr.windows(2) {
            let (Ok(lo), Ok(hi)) = (usize::try_from(span[0]), usize::try_from(span[1])) else {
                return Err(bad("indptr must be non-negative").into());
            };
            if lo > hi || hi > indices.len() {
                return Err(bad("indptr must be non-decreasing and within the data").into());
            }
            let cols: Vec<usize> = indices[lo..hi]
                .iter()
                .map(|&c| usize::try_from(c).ok().filter(|&c| c < *n_cols))
                .collect::<Option<_>>()
                .ok_or_else(|| bad("column index out of range"))?;
            rows.push((cols, lo..hi));
        }
        Ok(rows)
    }

    /// `bool` or `uint8` data as bytes (a copy for packed bits, made while the model is
    /// built).
    fn bytes(&self) -> std::borrow::Cow<'_, Array2<u8>> {
        match self {
            Self::Bytes(x) => std::borrow::Cow::Borrowed(x),
            Self::Bits(b) => {
                std::borrow::Cow::Owned(Array2::from_shape_fn((b.n_rows, b.n_cols), |(r, j)| {
                    u8::from(b.get(r, j))
                }))
            }
            _ => unreachable!("dense or sparse data are not bytes"),
        }
    }

    /// The model of `spec` for these data (data-driven defaults resolved from them).
    pub(crate) fn model(&self, spec: &ModelSpec) -> PyResult<AnyModel> {
        match self {
            Self::Dense(x) => build_model(spec, x.view()),
            Self::Bytes(_) | Self::Bits(_) => match spec {
                ModelSpec::Conjugate(spec) => Ok(spec.build_bytes(self.bytes().view())?.into()),
                ModelSpec::Callback(_) => Err(RoseTreeError::param(
                    "model",
                    "a Python cluster model needs float64 training data",
                )
                .into()),
            },
            Self::Csr {
                indptr,
                indices,
                data,
                n_cols,
            } => build_model_csr(spec, indptr, indices, data, *n_cols),
        }
    }

    /// The statistics of every row under `m`, after readying `m` for `n_rows + 1` rows (a
    /// cluster and one more row, which prediction needs).
    pub(crate) fn leaves<M: ClusterModel>(&self, m: &mut M) -> PyResult<Vec<M::Stats>> {
        m.prepare(self.n_rows() + 1);
        self.row_stats(m)
    }

    /// The statistics of every row under `m` (row `r` named as row `r` in errors).
    fn row_stats<M: ClusterModel>(&self, m: &M) -> PyResult<Vec<M::Stats>> {
        match self {
            Self::Dense(x) => Ok(m.leaf_stats_all(x.view())?),
            // One row at a time as doubles: no copy of the whole array.
            Self::Bytes(x) => {
                let mut row = ndarray::Array1::zeros(x.ncols());
                Ok(x.rows()
                    .into_iter()
                    .enumerate()
                    .map(|(r, bytes)| {
                        row.zip_mut_with(&bytes, |v, &b| *v = f64::from(b));
                        m.leaf_stats(row.view(), r)
                    })
                    .collect::<rosetree::Result<Vec<_>>>()?)
            }
            Self::Bits(b) => {
                let mut row = ndarray::Array1::zeros(b.n_cols);
                Ok((0..b.n_rows)
                    .map(|r| {
                        b.row_into(r, &mut row);
                        m.leaf_stats(row.view(), r)
                    })
                    .collect::<rosetree::Result<Vec<_>>>()?)
            }
            Self::Csr { data, .. } => Ok(self
                .csr_rows()?
                .iter()
                .enumerate()
                .map(|(r, (cols, span))| m.leaf_stats_sparse(cols, &data[span.clone()], r))
                .collect::<rosetree::Result<Vec<_>>>()?),
        }
    }

    /// These rows followed by the rows of `more` (which has as many columns), kept in this
    /// data's form: dense rows appended to CSR data are stored sparsely (NaN entries
    /// included), CSR rows appended to dense data are densified.
    fn append(&self, more: &TrainingData) -> TrainingData {
        match (self, more) {
            (Self::Dense(x), more) => {
                // One copy of the rows kept (a dense copy of them first would double it).
                let extra = more.dense_rows(0, more.n_rows());
                Self::Dense(concatenate![Axis(0), x.view(), extra.view()])
            }
            (Self::Bytes(_) | Self::Bits(_), more) => {
                let extra = more.dense_rows(0, more.n_rows());
                let x = self.dense_rows(0, self.n_rows());
                Self::Dense(concatenate![Axis(0), x.view(), extra.view()])
            }
            (
                Self::Csr {
                    indptr,
                    indices,
                    data,
                    n_cols,
                },
                more,
            ) => {
                let (mut indptr, mut indices, mut data) =
                    (indptr.clone(), indices.clone(), data.clone());
                let mut push = |cols: &mut dyn Iterator<Item = (usize, f64)>| {
                    for (c, v) in cols {
                        indices.push(c as i64);
                        data.push(v);
                    }
                    indptr.push(indices.len() as i64);
                };
                match more {
                    Self::Dense(_) | Self::Bytes(_) | Self::Bits(_) => {
                        let x = more.dense_rows(0, more.n_rows());
                        for row in x.rows() {
                            push(&mut row.iter().copied().enumerate().filter(|(_, v)| *v != 0.0));
                        }
                    }
                    Self::Csr {
                        indptr: p,
                        indices: i,
                        data: d,
                        ..
                    } => {
                        for span in p.windows(2) {
                            let (lo, hi) = (span[0] as usize, span[1] as usize);
                            push(&mut (lo..hi).map(|k| (i[k] as usize, d[k])));
                        }
                    }
                }
                Self::Csr {
                    indptr,
                    indices,
                    data,
                    n_cols: *n_cols,
                }
            }
        }
    }

    /// Rows `start..stop` as a dense array.
    fn dense_rows(&self, start: usize, stop: usize) -> Array2<f64> {
        match self {
            Self::Dense(x) => x.slice(s![start..stop, ..]).to_owned(),
            Self::Bytes(x) => x.slice(s![start..stop, ..]).mapv(f64::from),
            Self::Bits(b) => {
                let mut out = Array2::zeros((stop - start, b.n_cols));
                for (r, mut row) in (start..stop).zip(out.rows_mut()) {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = f64::from(u8::from(b.get(r, j)));
                    }
                }
                out
            }
            Self::Csr {
                indptr,
                indices,
                data,
                n_cols,
            } => {
                let mut out = Array2::zeros((stop - start, *n_cols));
                for r in start..stop {
                    for k in indptr[r] as usize..indptr[r + 1] as usize {
                        out[[r - start, indices[k] as usize]] = data[k];
                    }
                }
                out
            }
        }
    }
}

/// A built-in model's hyperparameters by name, every one given (`psi0_diagonal` for a
/// diagonal Normal–inverse-Wishart scale, `psi0` row-major otherwise): what
/// `rosetree._streaming.model_from_hyperparameters` turns back into a model.
pub(crate) trait Explicit {
    /// The family's name, as `BrtFit.family` gives it.
    const FAMILY: &'static str;

    /// The hyperparameters as a dict.
    fn explicit<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>>;
}

impl Explicit for BetaBernoulli {
    const FAMILY: &'static str = "bernoulli";

    fn explicit<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("alpha", self.alpha().to_vec())?;
        out.set_item("beta", self.beta().to_vec())?;
        Ok(out)
    }
}

impl Explicit for NormalInverseWishart {
    const FAMILY: &'static str = "normal_inverse_wishart";

    fn explicit<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("mu0", self.mu0().to_vec())?;
        out.set_item("kappa0", self.kappa0())?;
        out.set_item("nu0", self.nu0())?;
        match self.psi0_diagonal() {
            Some(diagonal) => out.set_item("psi0_diagonal", diagonal.to_vec())?,
            None => out.set_item("psi0", self.psi0())?,
        }
        Ok(out)
    }
}

impl Explicit for DirichletMultinomial {
    const FAMILY: &'static str = "dirichlet_multinomial";

    fn explicit<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("alpha", self.alpha().to_vec())?;
        out.set_item("multinomial_coefficient", self.multinomial_coefficient())?;
        Ok(out)
    }
}

impl Explicit for NormalGamma {
    const FAMILY: &'static str = "normal_gamma";

    fn explicit<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        out.set_item("m0", self.m0().to_vec())?;
        out.set_item("kappa0", self.kappa0())?;
        out.set_item("a0", self.a0())?;
        out.set_item("b0", self.b0().to_vec())?;
        out.set_item("shared_precision", self.shared_precision())?;
        Ok(out)
    }
}

macro_rules! fit_types {
    ([] $($variant:ident: $model:ty = $name:literal;)*) => {
        /// The fitted model and tree with every node's statistics, one variant per family.
        enum AnyPredictor {
            $($variant(Predictor<$model>),)*
            /// A Python model's statistics are row indices into its own copy of the data, so
            /// a predictor is made per call with the new rows appended to that copy.
            Callback(Py<PyAny>, Arc<RoseTree>),
        }

        impl AnyPredictor {
            /// The predictor of `model` and `tree` for `training`.
            fn new(
                model: AnyModel,
                tree: Arc<RoseTree>,
                training: &TrainingData,
            ) -> PyResult<Self> {
                Ok(match model {
                    $(AnyModel::$variant(mut m) => {
                        let leaves = training.leaves(&mut m)?;
                        Self::$variant(Predictor::new(m, tree, leaves)?)
                    })*
                    AnyModel::Callback(m) => {
                        if tree.n_leaves() != training.n_rows() {
                            return Err(RoseTreeError::ShapeMismatch {
                                what: "tree".into(),
                                expected: format!(
                                    "{} leaves (one per data row)",
                                    training.n_rows()
                                ),
                                found: format!("{} leaves", tree.n_leaves()),
                            }
                            .into());
                        }
                        Self::Callback(m.into_object(), tree)
                    }
                })
            }

            /// The model family's name.
            fn family(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)*
                    Self::Callback(..) => "callback",
                }
            }
        }
    };
}
conjugate_families!(fit_types,);

macro_rules! predictor_arms {
    ([$predictor:expr, $p:ident, $body:expr, $object:ident, $tree:ident, $callback:expr]
     $($variant:ident: $t:ty = $name:literal;)*) => {
        match $predictor {
            $(AnyPredictor::$variant($p) => $body,)*
            AnyPredictor::Callback($object, $tree) => $callback,
        }
    };
}

/// A fitted rose tree: `rosetree.BayesianRoseTree` keeps one after `fit`.
#[pyclass(frozen, module = "rosetree._core", name = "BrtFit")]
pub(crate) struct PyBrtFit {
    // Shared with the worker thread of a prediction (see `run_interruptible`).
    predictor: Arc<AnyPredictor>,
    training: Arc<TrainingData>,
}

/// Runs `$body` with `$p` bound to the predictor of a built-in model, or `$callback` for a
/// Python model.
macro_rules! with_predictor {
    ($predictor:expr, $p:ident => $body:expr, $object:ident, $tree:ident => $callback:expr) => {
        conjugate_families!(
            predictor_arms,
            $predictor,
            $p,
            $body,
            $object,
            $tree,
            $callback
        )
    };
}

impl PyBrtFit {
    /// The fit of `tree` to `training` under `model`.
    pub(crate) fn new(
        model: AnyModel,
        tree: Arc<RoseTree>,
        training: TrainingData,
    ) -> PyResult<Self> {
        Ok(Self {
            predictor: Arc::new(AnyPredictor::new(model, tree, &training)?),
            training: Arc::new(training),
        })
    }

    fn tree_ref(&self) -> &Arc<RoseTree> {
        with_predictor!(&*self.predictor, p => p.shared_tree(), _object, tree => tree)
    }

    /// Checks that new rows have the training data's columns.
    fn check_columns(&self, x: ArrayView2<'_, f64>, what: &str) -> PyResult<()> {
        if x.ncols() == self.training.n_cols() {
            return Ok(());
        }
        Err(RoseTreeError::ShapeMismatch {
            what: what.into(),
            expected: format!("{} columns", self.training.n_cols()),
            found: format!("{} columns", x.ncols()),
        }
        .into())
    }
}

/// A predictor for a Python model whose data are the training rows followed by `extra`,
/// and the index of the first extra row.
fn callback_predictor(
    training: &TrainingData,
    object: &Py<PyAny>,
    tree: &RoseTree,
    extra: ArrayView2<'_, f64>,
) -> rosetree::Result<(Predictor<CallbackModel>, usize)> {
    let TrainingData::Dense(train) = training else {
        unreachable!("a Python model is only fitted to dense data");
    };
    let data = concatenate![Axis(0), train.view(), extra];
    let model = CallbackModel::new(Python::attach(|py| object.clone_ref(py)), data);
    let leaves = (0..train.nrows())
        .map(|i| model.leaf_stats(train.row(i), i))
        .collect::<rosetree::Result<Vec<_>>>()?;
    Ok((Predictor::new(model, tree.clone(), leaves)?, train.nrows()))
}

/// `ln p(x | D, T)` of eq 1.25 for every row of `rows` (statistics under `p`'s model), and
/// with `responsibilities` the `n_rows × n_nodes` posterior over the tree's clusters; with
/// `clusters`, the mixture over those flat clusters and the `n_rows × K` posterior.
fn predict_with<M: RowQueries>(
    p: &Predictor<M>,
    rows: &[M::Stats],
    responsibilities: bool,
    clusters: Option<&[usize]>,
    threads: &Threads,
    interrupt: &dyn Fn() -> bool,
) -> rosetree::Result<(Vec<f64>, Option<Array2<f64>>)> {
    if let Some(clusters) = clusters {
        let (log_p, resp) = p.flat_responsibilities(clusters, rows, threads, interrupt)?;
        Ok((log_p, Some(resp)))
    } else if responsibilities {
        let (log_p, resp) = p.responsibilities(rows, threads, interrupt)?;
        Ok((log_p, Some(resp)))
    } else {
        Ok((p.log_predictive(rows, threads, interrupt)?, None))
    }
}

/// The statistics of new rows `x` under `m`; row `r` is data row `offset + r` (for errors,
/// and for a Python model, whose statistics are row indices).
fn row_stats<M: ClusterModel>(
    m: &M,
    x: ArrayView2<'_, f64>,
    offset: usize,
) -> rosetree::Result<Vec<M::Stats>> {
    x.rows()
        .into_iter()
        .enumerate()
        .map(|(r, row)| m.leaf_stats(row, offset + r))
        .collect()
}

#[pymethods]
impl PyBrtFit {
    /// The fitted tree.
    fn tree(&self) -> PyRoseTree {
        Arc::clone(self.tree_ref()).into()
    }

    /// The model family's name (`"bernoulli"`, `"normal_inverse_wishart"`,
    /// `"dirichlet_multinomial"`, `"normal_gamma"` or `"callback"`).
    #[getter]
    fn family(&self) -> &'static str {
        self.predictor.family()
    }

    /// `ln p(x | D, T)` of eq 1.25 for every row of `x`, and with `responsibilities` the
    /// `n_rows × n_nodes` posterior over the tree's clusters; with `clusters` (node ids of a
    /// flat clustering), `ln Σ_c (n_c / n) f(x | D_c)` and the `n_rows × K` posterior over
    /// them.
    #[pyo3(signature = (x, *, responsibilities=false, clusters=None, n_jobs=None))]
    #[allow(clippy::type_complexity)]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        responsibilities: bool,
        clusters: Option<Vec<usize>>,
        n_jobs: Option<usize>,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, Option<Bound<'py, PyArray2<f64>>>)> {
        let threads = Threads::new(n_jobs)?;
        let x = x.as_array();
        self.check_columns(x, "X")?;
        let x = x.to_owned();
        let (predictor, training) = (Arc::clone(&self.predictor), Arc::clone(&self.training));
        let (log_p, resp) = run_interruptible(py, move |interrupt| {
            let clusters = clusters.as_deref();
            with_predictor!(&*predictor, p => {
                let rows = row_stats(p.model(), x.view(), 0)?;
                predict_with(p, &rows, responsibilities, clusters, &threads, interrupt)
            }, object, tree => {
                let (p, offset) = callback_predictor(&training, object, tree, x.view())?;
                let rows = row_stats(p.model(), x.view(), offset)?;
                predict_with(&p, &rows, responsibilities, clusters, &threads, interrupt)
            })
        })?;
        Ok((log_p.into_pyarray(py), resp.map(|r| r.into_pyarray(py))))
    }

    /// `ln p(D_full | T) − ln p(D_obs | T)` (eq 1.24), with training rows `rows` replaced by
    /// the rows of `filled`.
    #[pyo3(signature = (rows, filled, *, n_jobs=None))]
    fn log_predictive_missing(
        &self,
        py: Python<'_>,
        rows: Vec<usize>,
        filled: PyReadonlyArray2<'_, f64>,
        n_jobs: Option<usize>,
    ) -> PyResult<f64> {
        let threads = Threads::new(n_jobs)?;
        let filled = filled.as_array();
        self.check_columns(filled, "filled")?;
        if filled.nrows() != rows.len() {
            return Err(RoseTreeError::ShapeMismatch {
                what: "filled".into(),
                expected: format!("{} rows (one per row index)", rows.len()),
                found: format!("{} rows", filled.nrows()),
            }
            .into());
        }
        let filled = filled.to_owned();
        let (predictor, training) = (Arc::clone(&self.predictor), Arc::clone(&self.training));
        run_interruptible(py, move |interrupt| {
            with_predictor!(&*predictor, p => {
                let filled = rows
                    .iter()
                    .zip(filled.rows())
                    .map(|(&r, row)| Ok((r, p.model().leaf_stats(row, r)?)))
                    .collect::<rosetree::Result<Vec<_>>>()?;
                p.log_predictive_missing(&filled, &threads, interrupt)
            }, object, tree => {
                let (p, offset) = callback_predictor(&training, object, tree, filled.view())?;
                let filled = rows
                    .iter()
                    .zip(filled.rows())
                    .enumerate()
                    .map(|(k, (&r, row))| Ok((r, p.model().leaf_stats(row, offset + k)?)))
                    .collect::<rosetree::Result<Vec<_>>>()?;
                p.log_predictive_missing(&filled, &threads, interrupt)
            })
        })
    }

    /// `(rows, columns, P(x_ij = 1 | D_obs, T))` of every missing training entry, row-major;
    /// beta–Bernoulli models only.
    #[pyo3(signature = (*, n_jobs=None))]
    #[allow(clippy::type_complexity)]
    fn missing_probabilities<'py>(
        &self,
        py: Python<'py>,
        n_jobs: Option<usize>,
    ) -> PyResult<(
        Bound<'py, PyArray1<usize>>,
        Bound<'py, PyArray1<usize>>,
        Bound<'py, PyArray1<f64>>,
    )> {
        let threads = Threads::new(n_jobs)?;
        if !matches!(*self.predictor, AnyPredictor::Bernoulli(_)) {
            return Err(RoseTreeError::param(
                "model",
                "missing-entry probabilities need the beta-Bernoulli model",
            )
            .into());
        }
        let predictor = Arc::clone(&self.predictor);
        let found = run_interruptible(py, move |interrupt| match &*predictor {
            AnyPredictor::Bernoulli(p) => p.missing_probabilities(&threads, interrupt),
            _ => unreachable!("checked above"),
        })?;
        let rows: Vec<usize> = found.iter().map(|e| e.row).collect();
        let cols: Vec<usize> = found.iter().map(|e| e.column).collect();
        let probs: Vec<f64> = found.iter().map(|e| e.p_one).collect();
        Ok((
            rows.into_pyarray(py),
            cols.into_pyarray(py),
            probs.into_pyarray(py),
        ))
    }

    /// The fit with the rows of `x` (dense or CSR, the training data's columns) added to the
    /// tree one at a time (`brt::GrowingTree`: descent to the best position, then local
    /// repairs), under the mixing rule `mixing` and, with `binary`, joins only. The model
    /// stays the fitted one (its data-driven defaults are not recomputed).
    #[pyo3(signature = (x, *, mixing, gamma, dp_alpha, binary=false))]
    fn partial_fit(
        &self,
        py: Python<'_>,
        x: Training<'_>,
        mixing: &str,
        gamma: f64,
        dp_alpha: f64,
        binary: bool,
    ) -> PyResult<PyBrtFit> {
        let params = GrowParams::new(super::parse_mixing(mixing, gamma, dp_alpha)?).binary(binary);
        let more = x.to_owned_data()?;
        if more.n_cols() != self.training.n_cols() {
            return Err(RoseTreeError::ShapeMismatch {
                what: "X".into(),
                expected: format!("{} columns", self.training.n_cols()),
                found: format!("{} columns", more.n_cols()),
            }
            .into());
        }
        macro_rules! grown_arms {
            ([$predictor:expr, $more:expr, $interrupt:expr] $($variant:ident: $t:ty = $name:literal;)*) => {
                match $predictor {
                    $(AnyPredictor::$variant(p) => {
                        let rows = $more.row_stats(p.model())?;
                        AnyPredictor::$variant(grown(p, params, rows, $interrupt)?)
                    })*
                    AnyPredictor::Callback(..) => {
                        return Err(RoseTreeError::param(
                            "model",
                            "partial_fit needs a built-in cluster model (BetaBernoulli, \
                             NormalInverseWishart, NormalGamma or DirichletMultinomial); a \
                             Python model has no statistics to update",
                        )
                        .into());
                    }
                }
            };
        }
        let (predictor, training) = (Arc::clone(&self.predictor), Arc::clone(&self.training));
        let (predictor, training) = run_interruptible(py, move |interrupt| {
            let predictor = (|| -> PyResult<AnyPredictor> {
                Ok(conjugate_families!(
                    grown_arms,
                    &*predictor,
                    more,
                    interrupt
                ))
            })()
            .map_err(py_to_core)?;
            Ok((predictor, training.append(&more)))
        })?;
        Ok(Self {
            predictor: Arc::new(predictor),
            training: Arc::new(training),
        })
    }

    /// The fitted model's hyperparameters with every data-driven default filled in, by
    /// name (`psi0_diagonal` for a diagonal Normal–inverse-Wishart scale, `psi0` row-major
    /// otherwise), so that the same model can be specified again whatever the data.
    fn resolved_model<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &*self.predictor {
            AnyPredictor::Bernoulli(p) => p.model().explicit(py),
            AnyPredictor::Gaussian(p) => p.model().explicit(py),
            AnyPredictor::Counts(p) => p.model().explicit(py),
            AnyPredictor::NormalGamma(p) => p.model().explicit(py),
            AnyPredictor::Callback(..) => Err(RoseTreeError::param(
                "model",
                "a Python cluster model has no hyperparameters to resolve",
            )
            .into()),
        }
    }

    /// Training rows `start..stop` as a dense array (NaN where missing).
    fn training_rows<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        stop: usize,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let n = self.training.n_rows();
        if start > stop || stop > n {
            return Err(RoseTreeError::param(
                "stop",
                format!("rows {start}..{stop} are not within 0..{n}"),
            )
            .into());
        }
        Ok(self.training.dense_rows(start, stop).into_pyarray(py))
    }

    /// The training data as given to the fit: a dense array (`bool` for `bool` input), or
    /// the CSR parts `(indptr, indices, data, n_cols)`.
    fn training<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match &*self.training {
            TrainingData::Dense(x) => x.clone().into_pyarray(py).into_any(),
            TrainingData::Bytes(x) => x.mapv(f64::from).into_pyarray(py).into_any(),
            TrainingData::Bits(b) => b.to_bool().into_pyarray(py).into_any(),
            TrainingData::Csr {
                indptr,
                indices,
                data,
                n_cols,
            } => (
                indptr.clone().into_pyarray(py),
                indices.clone().into_pyarray(py),
                data.clone().into_pyarray(py),
                *n_cols,
            )
                .into_pyobject(py)?
                .into_any(),
        })
    }
}

/// `p`'s tree with the rows of statistics `rows` added (see `PyBrtFit::partial_fit`), as a
/// predictor with the same model.
fn grown<M: RowQueries + Clone>(
    p: &Predictor<M>,
    params: GrowParams,
    rows: Vec<M::Stats>,
    interrupt: &dyn Fn() -> bool,
) -> rosetree::Result<Predictor<M>> {
    let n = p.tree().n_leaves();
    let leaves = p.node_stats()[..n].to_vec();
    let (tree, leaves) = brt::grow(p.model(), params, p.tree(), leaves, rows, interrupt)?;
    Predictor::new(p.model().clone(), tree, leaves)
}

/// A Python error raised while computing on a worker thread, carried as a core error.
fn py_to_core(err: crate::errors::Error) -> RoseTreeError {
    RoseTreeError::Callback(Box::new(PyErr::from(err)))
}

/// The fit of a given tree to training data (for a tree found by hyperparameter learning,
/// or an unpickled estimator): the model of `model` for the data, and every node's
/// statistics.
#[pyfunction]
pub(crate) fn brt_fit_for_tree(
    train: Training<'_>,
    model: &Bound<'_, PyModelSpec>,
    tree: &Bound<'_, PyRoseTree>,
) -> PyResult<PyBrtFit> {
    let training = train.to_owned_data()?;
    let model = training.model(&model.get().spec)?;
    PyBrtFit::new(model, Arc::clone(&tree.get().inner), training)
}

/// Adds the fit class and functions to the extension module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBrtFit>()?;
    m.add_function(wrap_pyfunction!(brt_fit_for_tree, m)?)?;
    Ok(())
}
