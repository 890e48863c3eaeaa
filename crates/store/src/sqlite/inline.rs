//! Where SQLite's work runs: on the thread that asks for it, in one go.
//!
//! diesel-async's `SyncConnectionWrapper` runs each SQLite call through a [`SpawnBlocking`]
//! strategy; its default sends every statement to tokio's blocking pool and awaits the answer,
//! and the store sent every operation to a runtime of its own before that (`runtime.rs`, still
//! what PostgreSQL does). A read was four thread hand-offs and as many wake-ups: the caller's
//! worker to the store's runtime, to a blocking thread per statement, and back. Those hand-offs
//! went through queues every core shares (the runtime's injection queue, the blocking pool's
//! lock), so reads on SQLite stopped growing with cores (`docs/benchmarks.md`, "The fourth
//! pass").
//!
//! [`Inline`] runs each call at once on the calling thread and returns a future that is already
//! complete. An operation on SQLite (take a pooled connection, then its statements) therefore
//! never yields once it holds its connection: it runs from the first statement to the commit or
//! rollback within a single poll of its caller. A caller that gives up can only do so before
//! the operation took a connection (while waiting for one, which deadpool undoes) or after it
//! finished: never halfway through a transaction, and never with a connection left
//! mid-statement. That is the cancellation safety the store's runtime gave, without the
//! hand-offs, so [`InCaller`] runs SQLite operations directly in the caller's task.
//!
//! The price: a statement blocks the thread that runs it for as long as it takes. Gatehouse's
//! SQLite statements are indexed lookups and small writes (tens of microseconds), the longest an
//! audit-log page's exact total (milliseconds at a million records); a write that waits for the
//! write lock waits asynchronously, for the one writer connection, not in SQLite's busy handler.
//! Only another process writing the same file (`gatehouse orgs set-plan` while the server runs)
//! can hold a statement in the busy handler, for at most `busy_timeout`.

use std::{error::Error, future::Future};

use diesel::{connection::AnsiTransactionManager, sqlite::SqliteConnection};
use diesel_async::{
    sync_connection_wrapper::{
        SpawnBlocking, SyncConnectionWrapper, SyncTransactionManagerWrapper,
    },
    TransactionManager,
};
use futures_util::{future::BoxFuture, FutureExt};
use gatehouse_domain::ports::StoreError;

use crate::outbox::OutboxSignal;

/// Runs each SQLite call at once, on the calling thread (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Inline;

impl SpawnBlocking for Inline {
    fn spawn_blocking<'a, R>(
        &mut self,
        task: impl FnOnce() -> R + Send + 'static,
    ) -> BoxFuture<'a, Result<R, Box<dyn Error + Send + Sync + 'static>>>
    where
        R: Send + 'static,
    {
        // Run now, not when first polled: the work is done whether or not anyone awaits it.
        futures_util::future::ready(Ok(task())).boxed()
    }

    fn get_runtime() -> Self {
        Self
    }
}

/// A SQLite connection whose calls run [`Inline`].
pub(crate) type Conn = SyncConnectionWrapper<SqliteConnection, Inline>;

/// SQLite operations run in their caller's task: the same interface as the store runtime that
/// PostgreSQL's operations are sent to, so that the shared queries (`in_read!`, `in_write_tx!`)
/// do not tell the backends apart.
#[derive(Clone, Default)]
pub(crate) struct InCaller {
    pub(crate) outbox: OutboxSignal,
}

impl InCaller {
    /// Runs the operation here. Once it holds a connection it does not yield (module docs), so
    /// dropping the returned future never stops it halfway.
    pub(crate) async fn run<T, F>(&self, operation: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        self.outbox.watch(operation).await
    }
}

/// What a transaction's body is: an async closure over the connection whose future is `Send`
/// (the shape of diesel-async's own, private, helper for `transaction`).
pub(crate) trait TransactionBody<T, R>:
    AsyncFnOnce(T) -> R + FnOnce(T) -> <Self as TransactionBody<T, R>>::Fut
{
    /// The body's future.
    type Fut: Future<Output = R>;
}

impl<F, T, Fut, R> TransactionBody<T, R> for F
where
    F: AsyncFnOnce(T) -> R + FnOnce(T) -> Fut,
    Fut: Future<Output = R>,
{
    type Fut = Fut;
}

/// Runs `body` in a `BEGIN IMMEDIATE` transaction (the write lock taken up front), committed
/// when it returns `Ok` and rolled back otherwise: diesel-async's `immediate_transaction`, which
/// it offers only for connections on its default tokio strategy.
pub(crate) async fn immediate_transaction<'a, R, E, F>(conn: &mut Conn, body: F) -> Result<R, E>
where
    for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
        + TransactionBody<&'r mut Conn, Result<R, E>, Fut: Send>
        + Send
        + 'a,
    E: From<diesel::result::Error> + Send + 'a,
    R: Send + 'a,
{
    type Manager = SyncTransactionManagerWrapper<AnsiTransactionManager>;
    conn.spawn_blocking(|conn| {
        AnsiTransactionManager::begin_transaction_sql(conn, "BEGIN IMMEDIATE")
    })
    .await?;
    match body(&mut *conn).await {
        Ok(value) => {
            Manager::commit_transaction(&mut *conn).await?;
            Ok(value)
        }
        Err(error) => {
            Manager::rollback_transaction(&mut *conn).await?;
            Err(error)
        }
    }
}
