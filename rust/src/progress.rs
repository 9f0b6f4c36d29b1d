//! Progress of long computations, for whoever watches the thread that runs them.
//!
//! An engine's main loop calls [`report`] with its phase and how far it has come; the call
//! costs a thread-local lookup and does nothing unless the loop runs inside [`watch`]. The
//! watcher (the Python bindings' waiting thread, for example) reads the latest report from
//! its [`Progress`] whenever it likes, so the engines need no callback parameter and never
//! wait for the reader. Reports come from the thread that called [`watch`] only: the
//! engines' sequential loops, not the parallel sections inside them.
//!
//! ```
//! use std::sync::Arc;
//! use rosetree::progress::{self, Progress};
//!
//! let seen = Arc::new(Progress::default());
//! progress::watch(&seen, || {
//!     for k in 0..10 {
//!         progress::report("merging", k + 1, 10);
//!     }
//! });
//! assert_eq!(seen.latest(), Some(("merging", 10, 10)));
//! progress::report("merging", 3, 10); // unwatched: ignored
//! assert_eq!(seen.latest(), Some(("merging", 10, 10)));
//! ```

use std::cell::RefCell;
use std::sync::{Arc, Mutex, PoisonError};

/// The latest report of a watched computation: its phase, steps done and steps in all.
#[derive(Debug, Default)]
pub struct Progress {
    latest: Mutex<Option<(&'static str, usize, usize)>>,
}

impl Progress {
    /// The last `(phase, done, total)` reported, if any.
    #[must_use]
    pub fn latest(&self) -> Option<(&'static str, usize, usize)> {
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

thread_local! {
    static WATCHER: RefCell<Option<Arc<Progress>>> = const { RefCell::new(None) };
}

/// Runs `work` on this thread with its [`report`]s going to `progress`; the previous
/// watcher, if any, is restored afterwards.
pub fn watch<T>(progress: &Arc<Progress>, work: impl FnOnce() -> T) -> T {
    watch_with(Some(Arc::clone(progress)), work)
}

/// The watcher of this thread, for a thread that works on its behalf
/// ([`watch_with`]).
#[must_use]
pub fn current() -> Option<Arc<Progress>> {
    WATCHER.with(|w| w.borrow().clone())
}

/// [`watch`] with an optional watcher: `None` runs `work` unwatched (its reports are
/// dropped), whatever watches this thread.
pub fn watch_with<T>(progress: Option<Arc<Progress>>, work: impl FnOnce() -> T) -> T {
    struct Restore(Option<Arc<Progress>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            WATCHER.with(|w| *w.borrow_mut() = previous);
        }
    }
    let previous = WATCHER.with(|w| std::mem::replace(&mut *w.borrow_mut(), progress));
    let _restore = Restore(previous);
    work()
}

/// Reports that `done` of `total` steps of `phase` are done, to this thread's watcher.
pub fn report(phase: &'static str, done: usize, total: usize) {
    WATCHER.with(|w| {
        if let Some(progress) = &*w.borrow() {
            *progress
                .latest
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((phase, done, total));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchers_nest_and_are_restored() {
        let outer = Arc::new(Progress::default());
        let inner = Arc::new(Progress::default());
        watch(&outer, || {
            report("a", 1, 2);
            watch(&inner, || report("b", 1, 3));
            report("a", 2, 2);
        });
        assert_eq!(outer.latest(), Some(("a", 2, 2)));
        assert_eq!(inner.latest(), Some(("b", 1, 3)));
    }

    #[test]
    fn a_watcher_can_be_handed_to_another_thread_or_muted() {
        let seen = Arc::new(Progress::default());
        watch(&seen, || {
            let mine = current();
            std::thread::scope(|s| {
                s.spawn(|| watch_with(mine, || report("elsewhere", 1, 2)));
            });
            watch_with(None, || report("muted", 2, 2));
        });
        assert_eq!(seen.latest(), Some(("elsewhere", 1, 2)));
        assert!(current().is_none());
    }

    #[test]
    fn other_threads_report_to_their_own_watcher() {
        let seen = Arc::new(Progress::default());
        watch(&seen, || {
            std::thread::spawn(|| report("elsewhere", 1, 1))
                .join()
                .unwrap();
        });
        assert_eq!(seen.latest(), None);
    }
}
