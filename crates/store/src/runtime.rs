//! Where every PostgreSQL operation runs: a small multi-threaded Tokio runtime that the store
//! owns. (SQLite's run in their caller's task instead, without ever yielding halfway:
//! `sqlite/inline.rs`.)
//!
//! A store call may be abandoned at any await: the client hangs up and actix-web drops the
//! handler, a timeout fires, a `select!` takes the other branch. A PostgreSQL operation awaits
//! the network between its statements, so run in the caller's task an abandoned call would be
//! dropped wherever it was: between two statements of a transaction, say. And a connection
//! keeps the runtime it was opened on (it runs its I/O task there): opened on a worker's
//! runtime, it breaks when that worker stops.
//!
//! So no PostgreSQL operation runs in its caller's task. [`StoreRuntime::run`] spawns it onto
//! the store's own runtime, where it runs to the end whatever happens to the caller: a started
//! transaction commits or rolls back, and a pooled connection always goes back to its pool. The
//! caller only waits for the answer, and dropping that wait is harmless. Connections are opened
//! there too, so they live exactly as long as the store.
//!
//! When the last handle to the store goes, operations still under way are allowed to finish
//! (on a thread of their own, for at most [`SHUTDOWN_GRACE`]) before the runtime stops.

use std::{future::Future, sync::Arc, time::Duration};

use gatehouse_domain::ports::StoreError;
use tokio::runtime::{Handle, Runtime};
use tokio_util::task::TaskTracker;

use crate::outbox::OutboxSignal;

/// How long operations under way when the store is dropped may take to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The store's runtime; clones share it.
#[derive(Clone)]
pub(crate) struct StoreRuntime(Arc<Inner>);

struct Inner {
    handle: Handle,
    tasks: TaskTracker,
    runtime: Option<Stopping>,
    outbox: OutboxSignal,
}

/// A runtime that stops without blocking when dropped: `Runtime`'s own drop waits for its
/// workers, which is forbidden inside another runtime (and the store may be dropped anywhere).
struct Stopping(Option<Runtime>);

impl Drop for Stopping {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl StoreRuntime {
    /// Starts the runtime: `workers` threads for the store's tasks (PostgreSQL's connection
    /// I/O, pool bookkeeping), plus Tokio's blocking pool, where SQLite's calls run.
    pub(crate) fn new(
        name: &'static str,
        workers: usize,
        outbox: OutboxSignal,
    ) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name(name)
            .enable_all()
            .build()?;
        Ok(Self(Arc::new(Inner {
            handle: runtime.handle().clone(),
            tasks: TaskTracker::new(),
            runtime: Some(Stopping(Some(runtime))),
            outbox,
        })))
    }

    /// Runs the operation to completion on the store's runtime and returns its result. Dropping
    /// the returned future stops the waiting, never the operation (nor the outbox signal of one
    /// that recorded events).
    pub(crate) async fn run<T, F>(&self, operation: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let outbox = self.0.outbox.clone();
        self.complete(async move { outbox.watch(operation).await })
            .await
            .map_err(|e| StoreError::Failed(Box::new(e)))?
    }

    /// [`run`](Self::run): every PostgreSQL operation runs on the store's runtime already, off
    /// the caller's threads, however long it takes.
    pub(crate) async fn run_long<T, F>(&self, operation: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        self.run(operation).await
    }

    /// Runs the future to completion on the store's runtime; `Err` only when it panicked.
    pub(crate) async fn complete<R>(
        &self,
        future: impl Future<Output = R> + Send + 'static,
    ) -> Result<R, tokio::task::JoinError>
    where
        R: Send + 'static,
    {
        self.0.tasks.spawn_on(future, &self.0.handle).await
    }
}

impl StoreRuntime {
    /// Runs a task for as long as the store lives (a listener): it is not waited for when the
    /// store goes, but stopped with the runtime.
    pub(crate) fn spawn_background(&self, task: impl Future<Output = ()> + Send + 'static) {
        drop(self.0.handle.spawn(task));
    }
}

/// Worker threads for the store's runtime: its tasks mostly wait on the network, so a few
/// suffice.
pub(crate) fn worker_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4))
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.tasks.close();
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        if self.tasks.is_empty() {
            return; // `Stopping` shuts it down.
        }
        let tasks = self.tasks.clone();
        let finishing = std::thread::Builder::new()
            .name("gatehouse-store-stop".into())
            .spawn(move || {
                if let Some(rt) = &runtime.0 {
                    rt.block_on(async {
                        if tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait())
                            .await
                            .is_err()
                        {
                            tracing::warn!(
                                remaining = tasks.len(),
                                "store operations still running at shutdown were stopped"
                            );
                        }
                    });
                }
                drop(runtime);
            });
        if let Err(error) = finishing {
            // The closure, and with it the runtime, is dropped here: `Stopping` stops it
            // without blocking, ending what was under way (each transaction rolls back).
            tracing::warn!(%error, "could not wait for store operations under way at shutdown");
        }
    }
}
