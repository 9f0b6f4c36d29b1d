//! Thread-pool selection and the size threshold below which loops stay sequential.

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
