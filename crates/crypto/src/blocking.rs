//! CPU-heavy work off the async workers, a bounded number at a time: the one way this crate's
//! adapters run argon2, zxcvbn and RSA key generation.

use std::sync::Arc;

use tokio::sync::{AcquireError, Semaphore};
use tokio::task::JoinError;

/// Why bounded work did not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    /// The semaphore was closed (never done by this crate): no permit will come.
    #[error("no permit for the work: {0}")]
    Closed(#[from] AcquireError),
    /// The work panicked, or the runtime shut down under it.
    #[error("the work did not finish: {0}")]
    Aborted(#[from] JoinError),
}

/// Runs `work` on tokio's blocking pool once one of `permits` is free.
///
/// The permit is acquired first, so that queued work waits as a future, holding no thread of
/// the blocking pool; it then moves into the closure and is released when the work ends. A
/// caller that gives up (its future dropped while the work runs) therefore frees its permit
/// when the work finishes, never leaks it, and the work it abandoned still counts against the
/// bound while it runs.
pub async fn bounded<T, F>(permits: &Arc<Semaphore>, work: F) -> Result<T, BlockingError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let permit = Arc::clone(permits).acquire_owned().await?;
    let done = tokio::task::spawn_blocking(move || {
        let result = work();
        drop(permit);
        result
    })
    .await?;
    Ok(done)
}

/// One per core the process may run on (at least 1): the default bound of work that is pure CPU
/// and holds little memory.
pub fn one_per_core() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// How many of the works run at once now, and the most that ever did.
    #[derive(Default)]
    pub(crate) struct Overlap {
        now: AtomicUsize,
        most: AtomicUsize,
    }

    impl Overlap {
        /// Counts a work in for as long as `work` runs.
        pub(crate) fn during<T>(&self, work: impl FnOnce() -> T) -> T {
            let running = self.now.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(running, Ordering::SeqCst);
            let result = work();
            self.now.fetch_sub(1, Ordering::SeqCst);
            result
        }

        pub(crate) fn most(&self) -> usize {
            self.most.load(Ordering::SeqCst)
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_one_permit_no_two_works_overlap() {
        let permits = Arc::new(Semaphore::new(1));
        let overlap = Arc::new(Overlap::default());
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let (permits, overlap) = (permits.clone(), overlap.clone());
                tokio::spawn(async move {
                    bounded(&permits, move || {
                        overlap.during(|| std::thread::sleep(Duration::from_millis(5)));
                        i
                    })
                    .await
                    .unwrap()
                })
            })
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.unwrap(), i);
        }
        assert_eq!(overlap.most(), 1);
        assert_eq!(permits.available_permits(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn queued_work_waits_for_a_permit_and_the_runtime_stays_free() {
        let permits = Arc::new(Semaphore::new(1));
        let held = permits.clone().acquire_owned().await.unwrap();
        let queued = tokio::spawn({
            let permits = permits.clone();
            async move { bounded(&permits, || "done").await.unwrap() }
        });
        // The one runtime thread is free: this task runs while the other waits.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!queued.is_finished(), "ran without a permit");
        drop(held);
        assert_eq!(queued.await.unwrap(), "done");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_caller_that_gives_up_leaks_no_permit() {
        let permits = Arc::new(Semaphore::new(1));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let abandoned = tokio::spawn({
            let permits = permits.clone();
            async move {
                bounded(&permits, move || {
                    started_tx.send(()).unwrap();
                    let _ = release_rx.recv();
                })
                .await
            }
        });
        // Wait (off the runtime thread) until the work runs, then give up on it.
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        abandoned.abort();
        assert!(abandoned.await.unwrap_err().is_cancelled());
        assert_eq!(permits.available_permits(), 0, "the work still runs");
        release_tx.send(()).unwrap();
        // The permit comes back when the abandoned work ends.
        let next = tokio::time::timeout(Duration::from_secs(60), bounded(&permits, || "after"))
            .await
            .expect("the permit leaked");
        assert_eq!(next.unwrap(), "after");
        assert_eq!(permits.available_permits(), 1);
    }
}
