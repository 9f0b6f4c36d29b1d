//! Thread-pool selection and the size threshold below which loops stay sequential.

use rayon::prelude::*;

use crate::error::{Result, RoseTreeError};

/// Loops shorter than this run sequentially: the fork–join overhead would cost more than the
/// work.
pub(crate) const PAR_THRESHOLD: usize = 1024;

/// Where parallel loops run: rayon's global pool (which respects `RAYON_NUM_THREADS`) or a
/// dedicated pool of a given size. Only the parallel sections enter the pool; the driving
/// loop stays on the caller's thread, so a caller can poll for interrupts there (Python
/// delivers signals to the main thread only). Results never depend on the choice: every
/// parallel reduction in the crate is over a total order.
#[derive(Debug, Default)]
pub struct Threads {
    pool: Option<rayon::ThreadPool>,
}

impl Threads {
    /// `None`: rayon's global pool; `Some(k)`: a pool of `k` threads.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `n_jobs` for zero threads or a pool that cannot
    /// be built.
    pub fn new(n_threads: Option<usize>) -> Result<Self> {
        let pool = match n_threads {
            None => None,
            Some(0) => return Err(RoseTreeError::param("n_jobs", "must be at least 1")),
            Some(n) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| RoseTreeError::param("n_jobs", e.to_string()))?,
            ),
        };
        Ok(Self { pool })
    }

    /// Runs `f` where its parallel iterators should run.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

impl Threads {
    /// Maps `f` over `items`, in parallel on these threads when there are at least
    /// `min_parallel` items. The error returned is that of the first failing item in item
    /// order, whatever the scheduling.
    ///
    /// # Errors
    /// The first error of `f`.
    pub fn try_map<T: Sync, R: Send>(
        &self,
        items: &[T],
        min_parallel: usize,
        f: impl Fn(&T) -> Result<R> + Sync + Send,
    ) -> Result<Vec<R>> {
        if items.len() >= min_parallel.max(2) {
            let results: Vec<Result<R>> = self.install(|| items.par_iter().map(f).collect());
            results.into_iter().collect()
        } else {
            items.iter().map(f).collect()
        }
    }

    /// [`try_map`](Self::try_map) over `items` in chunks of `chunk`, polling `interrupt`
    /// before each chunk.
    ///
    /// # Errors
    /// The first error of `f`; [`RoseTreeError::Interrupted`].
    pub fn try_map_chunked<T: Sync, R: Send>(
        &self,
        items: &[T],
        chunk: usize,
        interrupt: &dyn Fn() -> bool,
        f: impl Fn(&T) -> Result<R> + Sync + Send,
    ) -> Result<Vec<R>> {
        let mut out = Vec::with_capacity(items.len());
        for block in items.chunks(chunk.max(1)) {
            if interrupt() {
                return Err(RoseTreeError::Interrupted);
            }
            out.extend(self.try_map(block, 2, &f)?);
        }
        Ok(out)
    }

    /// Folds `items` into accumulators and reduces them, in parallel on these threads for
    /// at least `PAR_THRESHOLD` (1024) items. `reduce` must make the result independent of how
    /// the items were split (associative and commutative up to a total order).
    ///
    /// # Errors
    /// An error of `fold` (with several, not necessarily the first in item order).
    pub fn try_fold<T: Sync, A: Send>(
        &self,
        items: &[T],
        identity: impl Fn() -> A + Sync + Send,
        fold: impl Fn(A, &T) -> Result<A> + Sync + Send,
        reduce: impl Fn(A, A) -> A + Sync + Send,
    ) -> Result<A> {
        if items.len() >= PAR_THRESHOLD {
            self.install(|| {
                items
                    .par_iter()
                    .try_fold(&identity, &fold)
                    .try_reduce(&identity, |a, b| Ok(reduce(a, b)))
            })
        } else {
            items.iter().try_fold(identity(), fold)
        }
    }
}

impl Threads {
    /// Calls `f` on each pair of `items[k]` and `states[k]`, in parallel on these threads when
    /// there are at least `min_parallel` pairs; the error returned is the first in order.
    ///
    /// # Errors
    /// The first error of `f`.
    pub fn try_zip_mut<T: Sync, S: Send, R: Send>(
        &self,
        items: &[T],
        states: &mut [S],
        min_parallel: usize,
        f: impl Fn(&T, &mut S) -> Result<R> + Sync + Send,
    ) -> Result<Vec<R>> {
        assert_eq!(items.len(), states.len(), "one state per item");
        if items.len() >= min_parallel.max(2) {
            let results: Vec<Result<R>> = self.install(|| {
                items
                    .par_iter()
                    .zip(states.par_iter_mut())
                    .map(|(x, s)| f(x, s))
                    .collect()
            });
            results.into_iter().collect()
        } else {
            items
                .iter()
                .zip(states.iter_mut())
                .map(|(x, s)| f(x, s))
                .collect()
        }
    }
}
