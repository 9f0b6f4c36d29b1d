//! Thread-pool selection and the size threshold below which loops stay sequential.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rayon::prelude::*;

use crate::error::{Result, RoseTreeError};
use crate::progress;

/// Loops shorter than this run sequentially: the fork–join overhead would cost more than the
/// work.
pub(crate) const PAR_THRESHOLD: usize = 1024;

/// Where parallel loops run: rayon's global pool (which respects `RAYON_NUM_THREADS`), a
/// dedicated pool of a given size, or the calling thread alone (one thread: no pool, so no
/// hand-over between threads at every step of a search). Interrupts are polled on the
/// caller's thread (Python delivers signals to the main thread only): either the driving
/// loop of a computation stays there and only its parallel sections enter the pool, or the
/// whole computation runs on the pool while the caller polls ([`Threads::run_polled`]).
/// Results never depend on the choice: every parallel reduction in the crate is over a
/// total order.
///
/// Every parallel section of the crate goes through these methods, so that one thread
/// really means one.
#[derive(Debug, Default)]
pub struct Threads {
    kind: Kind,
}

#[derive(Debug, Default)]
enum Kind {
    #[default]
    Global,
    Pool(rayon::ThreadPool),
    Sequential,
}

impl Threads {
    /// `None`: rayon's global pool; `Some(1)`: the calling thread; `Some(k)`: a pool of `k`
    /// threads.
    ///
    /// # Errors
    /// [`RoseTreeError::InvalidParameter`] on `n_jobs` for zero threads or a pool that cannot
    /// be built.
    pub fn new(n_threads: Option<usize>) -> Result<Self> {
        let kind = match n_threads {
            None => Kind::Global,
            Some(0) => return Err(RoseTreeError::param("n_jobs", "must be at least 1")),
            Some(1) => Kind::Sequential,
            Some(n) => Kind::Pool(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| RoseTreeError::param("n_jobs", e.to_string()))?,
            ),
        };
        Ok(Self { kind })
    }

    /// Whether every loop runs on the calling thread.
    pub(crate) fn sequential(&self) -> bool {
        matches!(self.kind, Kind::Sequential)
    }

    /// How many threads run the parallel sections.
    #[must_use]
    pub(crate) fn count(&self) -> usize {
        match &self.kind {
            Kind::Pool(pool) => pool.current_num_threads(),
            Kind::Global => rayon::current_num_threads(),
            Kind::Sequential => 1,
        }
    }

    /// Whether a job gains nothing from [`run_polled`](Self::run_polled): with one thread,
    /// or when the calling thread is already a pool's (a job inside another).
    #[must_use]
    pub fn runs_inline(&self) -> bool {
        self.sequential() || rayon::current_thread_index().is_some()
    }

    /// Runs `f` on a thread of these threads' pool (for one thread: right here), so that
    /// the parallel sections inside it start from the pool.
    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.kind {
            Kind::Pool(pool) => pool.install(f),
            // `join` called from outside the global pool runs inside it.
            Kind::Global if rayon::current_thread_index().is_none() => rayon::join(f, || ()).0,
            Kind::Global | Kind::Sequential => f(),
        }
    }

    /// Whether a loop over `len` items runs in parallel.
    fn parallel(&self, len: usize, min_parallel: usize) -> bool {
        !self.sequential() && len >= min_parallel.max(2)
    }

    /// Whether [`try_fold`](Self::try_fold) over `len` items is split between threads.
    #[must_use]
    pub(crate) fn folds_in_parallel(&self, len: usize) -> bool {
        self.parallel(len, PAR_THRESHOLD)
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
        if self.parallel(items.len(), min_parallel) {
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
    /// at least `PAR_THRESHOLD` (1024) items, in chunks of at least `FOLD_GRAIN` (256; about
    /// four a thread). `fold` updates an accumulator in place (a large one is not moved for
    /// every item); `reduce` must make the result independent of how the items were split
    /// (associative and commutative up to a total order).
    ///
    /// # Errors
    /// An error of `fold` (with several, not necessarily the first in item order).
    pub fn try_fold<T: Sync, A: Send>(
        &self,
        items: &[T],
        identity: impl Fn() -> A + Sync + Send,
        fold: impl Fn(&mut A, &T) -> Result<()> + Sync + Send,
        reduce: impl Fn(A, A) -> A + Sync + Send,
    ) -> Result<A> {
        let serial = |chunk: &[T]| {
            let mut acc = identity();
            for item in chunk {
                fold(&mut acc, item)?;
            }
            Ok(acc)
        };
        if self.parallel(items.len(), PAR_THRESHOLD) {
            self.install(|| {
                // About four chunks a thread: each chunk's accumulator starts empty.
                let grain = (items.len() / (4 * rayon::current_num_threads())).max(FOLD_GRAIN);
                items
                    .par_chunks(grain)
                    .map(serial)
                    .try_reduce(&identity, |a, b| Ok(reduce(a, b)))
            })
        } else {
            serial(items)
        }
    }
}

/// The fewest items per task of [`Threads::try_fold`].
const FOLD_GRAIN: usize = 256;

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
        if self.parallel(items.len(), min_parallel) {
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

/// How often [`Threads::run_polled`] polls the interrupt while its job runs.
const POLL: Duration = Duration::from_millis(20);

impl Threads {
    /// Runs a long `job` off the calling thread, on these threads (on a thread of its own
    /// for one thread), so that its parallel sections start from a thread of the pool and
    /// its steps never wait for a hand-over, while the calling thread polls `interrupt`
    /// about every 20 ms (a Python signal handler can only run there) and calls `on_poll`.
    /// When `interrupt` returns `true`, `stop` is set: the job should notice it and return.
    /// The job's progress reports go to the calling thread's watcher.
    ///
    /// Called from a thread of a rayon pool (a job inside another), `job` runs right there
    /// and `interrupt` is polled only before it starts: a job inside another should read
    /// the outer job's flag instead ([`Threads::runs_inline`]).
    ///
    /// # Panics
    /// A panic of `job` is resumed on the calling thread.
    pub fn run_polled<R: Send>(
        &self,
        interrupt: &dyn Fn() -> bool,
        on_poll: &dyn Fn(),
        job: impl FnOnce(&AtomicBool) -> R + Send,
    ) -> R {
        let stop = AtomicBool::new(false);
        if rayon::current_thread_index().is_some() {
            stop.store(interrupt(), Ordering::Relaxed);
            return job(&stop);
        }
        let watcher = progress::current();
        let stop = &stop;
        std::thread::scope(|scope| {
            let caller = std::thread::current();
            let worker = scope.spawn(move || {
                // Wakes the calling thread when the job ends, also by a panic.
                struct Wake(std::thread::Thread);
                impl Drop for Wake {
                    fn drop(&mut self) {
                        self.0.unpark();
                    }
                }
                let _wake = Wake(caller);
                self.install(|| progress::watch_with(watcher, || job(stop)))
            });
            while !worker.is_finished() {
                if interrupt() {
                    stop.store(true, Ordering::Relaxed);
                }
                on_poll();
                std::thread::park_timeout(POLL);
            }
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// [`try_map`](Self::try_map) over owned items.
    ///
    /// # Errors
    /// The first error of `f` in item order.
    pub fn try_map_owned<T: Send, R: Send>(
        &self,
        items: Vec<T>,
        min_parallel: usize,
        f: impl Fn(T) -> Result<R> + Sync + Send,
    ) -> Result<Vec<R>> {
        if self.parallel(items.len(), min_parallel) {
            let results: Vec<Result<R>> = self.install(|| items.into_par_iter().map(f).collect());
            results.into_iter().collect()
        } else {
            items.into_iter().map(f).collect()
        }
    }

    /// Calls `f(id, &mut states[id])` for each of the increasing, distinct `ids`, in parallel
    /// on these threads when there are at least `min_parallel` of them, and returns the
    /// `(id, r)` for which `f` returned `Some(r)`, in increasing id order. The states are
    /// split between threads at the ids, so that each thread owns the states it updates.
    ///
    /// # Errors
    /// The first error of `f` in id order (the states of later ids may have been updated).
    ///
    /// # Panics
    /// If `ids` is not increasing or an id is out of range of `states`.
    pub fn try_update_at<S: Send, R: Send>(
        &self,
        states: &mut [S],
        ids: &[u32],
        min_parallel: usize,
        f: impl Fn(u32, &mut S) -> Result<Option<R>> + Sync + Send,
    ) -> Result<Vec<(u32, R)>> {
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids must increase");
        if self.parallel(ids.len(), min_parallel) {
            self.install(|| update_split(states, 0, ids, &f))
        } else {
            update_serial(states, 0, ids, &f)
        }
    }
}

/// Ids per task of [`Threads::try_update_at`].
const UPDATE_GRAIN: usize = 256;

fn update_serial<S, R>(
    states: &mut [S],
    offset: u32,
    ids: &[u32],
    f: &(impl Fn(u32, &mut S) -> Result<Option<R>> + Sync),
) -> Result<Vec<(u32, R)>> {
    let mut out = Vec::new();
    for &id in ids {
        if let Some(r) = f(id, &mut states[(id - offset) as usize])? {
            out.push((id, r));
        }
    }
    Ok(out)
}

/// Halves `ids` and `states` (the states from the middle id on go to the second half) until
/// the pieces are small, and updates the pieces in parallel; `states[0]` is the state of id
/// `offset`.
fn update_split<S: Send, R: Send>(
    states: &mut [S],
    offset: u32,
    ids: &[u32],
    f: &(impl Fn(u32, &mut S) -> Result<Option<R>> + Sync),
) -> Result<Vec<(u32, R)>> {
    if ids.len() <= UPDATE_GRAIN {
        return update_serial(states, offset, ids, f);
    }
    let (low_ids, high_ids) = ids.split_at(ids.len() / 2);
    let middle = high_ids[0];
    let (low, high) = states.split_at_mut((middle - offset) as usize);
    let (a, b) = rayon::join(
        || update_split(low, offset, low_ids, f),
        || update_split(high, middle, high_ids, f),
    );
    // The first error in id order: the lower half's, if it has one.
    let mut a = a?;
    a.extend(b?);
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the pool, the updates land on the states of the given ids, the results come
    /// back in id order, and the error reported is that of the lowest failing id.
    #[test]
    fn updates_at_ids_in_order_with_the_first_error() {
        let ids: Vec<u32> = (0..5000).filter(|i| i % 3 != 1).collect();
        for threads in [
            Threads::new(Some(1)),
            Threads::new(Some(3)),
            Threads::new(None),
        ] {
            let threads = threads.unwrap();
            let mut states = vec![0_u64; 5000];
            let got = threads
                .try_update_at(&mut states, &ids, 2, |id, s| {
                    *s += u64::from(id) + 1;
                    Ok((id % 5 == 0).then_some(2 * id))
                })
                .unwrap();
            let expected: Vec<(u32, u32)> = ids
                .iter()
                .filter(|&&i| i % 5 == 0)
                .map(|&i| (i, 2 * i))
                .collect();
            assert_eq!(got, expected);
            for (i, &s) in states.iter().enumerate() {
                let want = if i % 3 == 1 { 0 } else { i as u64 + 1 };
                assert_eq!(s, want, "state {i}");
            }
            let err = threads
                .try_update_at(&mut states, &ids, 2, |id, _| {
                    if id >= 4000 || id == 1200 || id == 3003 {
                        Err(RoseTreeError::Numerical(format!("{id}")))
                    } else {
                        Ok(None::<()>)
                    }
                })
                .unwrap_err();
            assert!(
                matches!(err, RoseTreeError::Numerical(ref m) if m == "1200"),
                "{err}"
            );
        }
    }

    /// The job runs off the calling thread, sees `stop` once `interrupt` fires, reports
    /// progress to the caller's watcher, and a panic comes back to the caller; a job inside
    /// a job runs on the thread it was called from.
    #[test]
    fn polled_jobs_stop_report_and_panic_where_they_were_called() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicUsize;

        for threads in [
            Threads::new(Some(1)),
            Threads::new(Some(2)),
            Threads::new(None),
        ] {
            let threads = threads.unwrap();
            let caller = std::thread::current().id();
            let polls = AtomicUsize::new(0);
            let interrupt = || polls.fetch_add(1, Ordering::Relaxed) >= 3;
            let seen = Arc::new(progress::Progress::default());
            let steps = progress::watch(&seen, || {
                threads.run_polled(&interrupt, &|| {}, |stop| {
                    assert_ne!(std::thread::current().id(), caller);
                    let mut steps = 0;
                    while !stop.load(Ordering::Relaxed) {
                        steps += 1;
                        progress::report("waiting", steps, 0);
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // Inside the job, another one runs right here.
                    let here = std::thread::current().id();
                    let inner =
                        threads.run_polled(&|| false, &|| {}, |_| std::thread::current().id());
                    if !threads.sequential() {
                        assert_eq!(inner, here);
                    }
                    steps
                })
            });
            assert!(polls.load(Ordering::Relaxed) >= 4);
            assert_eq!(seen.latest(), Some(("waiting", steps, 0)));
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                threads.run_polled(&|| false, &|| {}, |_| panic!("in the job"))
            }));
            assert!(panicked.is_err());
        }
    }

    #[test]
    fn owned_maps_keep_order_and_the_first_error() {
        for threads in [Threads::new(Some(1)), Threads::new(Some(2))] {
            let threads = threads.unwrap();
            let items: Vec<u32> = (0..3000).collect();
            let got = threads
                .try_map_owned(items.clone(), 2, |x| Ok(x * 2))
                .unwrap();
            assert_eq!(got, items.iter().map(|x| x * 2).collect::<Vec<_>>());
            let err = threads
                .try_map_owned(items, 2, |x| {
                    if x % 1000 == 999 {
                        Err(RoseTreeError::Numerical(format!("{x}")))
                    } else {
                        Ok(x)
                    }
                })
                .unwrap_err();
            assert!(
                matches!(err, RoseTreeError::Numerical(ref m) if m == "999"),
                "{err}"
            );
        }
    }
}
