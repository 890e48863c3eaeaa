//! Where SQLite's work runs: on the thread that asks for it, in one go, through diesel's own
//! synchronous connection.
//!
//! The store's queries are written once, against diesel-async's `AsyncConnection`, for both
//! backends (`queries/`). For SQLite, [`Conn`] is that interface over diesel's synchronous
//! `SqliteConnection`: each call runs the statement at once, on the calling thread, and returns a
//! future that is already complete.
//!
//! Two earlier shapes, and what each cost (`docs/benchmarks.md`, "The fourth pass" and "The
//! ninth pass"):
//! - diesel-async's `SyncConnectionWrapper` on its default strategy sent every statement to
//!   tokio's blocking pool, and the store sent every operation to a runtime of its own before
//!   that: four thread hand-offs a read, through queues every core shares.
//! - The same wrapper with a strategy that ran each call inline took the hand-offs away, but the
//!   wrapper still turns every statement into SQL text and owned binds before the connection
//!   sees it (it is built to move a statement to another thread), and the connection then finds
//!   its prepared statement by that text: a sixth of a read's CPU. [`Conn`] hands diesel the
//!   statement itself, which finds a statement of a statically known shape by its type and
//!   renders SQL only the first time.
//!
//! An operation on SQLite (take a pooled connection, then its statements) therefore never yields
//! once it holds its connection: it runs from the first statement to the commit or rollback
//! within a single poll of its caller. A caller that gives up can only do so before the
//! operation took a connection (while waiting for one, which deadpool undoes) or after it
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

use std::{
    any::TypeId,
    future::{ready, Future, Ready},
};

use diesel::{
    connection::{
        AnsiTransactionManager, CacheSize, Connection, Instrumentation, LoadConnection,
        SimpleConnection, TransactionManager as SyncTransactionManager, TransactionManagerStatus,
    },
    query_builder::{AsQuery, AstPass, Query, QueryFragment, QueryId},
    row::IntoOwnedRow,
    sql_types::Untyped,
    sqlite::{Sqlite, SqliteConnection},
    ConnectionResult, QueryResult,
};
use diesel_async::{
    pooled_connection::PoolableConnection, AsyncConnection, AsyncConnectionCore,
    SimpleAsyncConnection, TransactionManager,
};
use futures_util::stream::{self, Iter};
use gatehouse_domain::ports::StoreError;

use crate::outbox::OutboxSignal;

/// A SQLite connection whose calls run at once, on the calling thread (see the module docs).
pub(crate) struct Conn(SqliteConnection);

impl Conn {
    /// Runs a statement and reads its rows into memory: a row of SQLite's borrows the statement
    /// it was read from, so the rows a future hands on must be owned.
    fn load_now<Q>(&mut self, query: Q) -> QueryResult<Vec<QueryResult<OwnedRow>>>
    where
        Q: QueryFragment<Sqlite> + QueryId,
    {
        let mut cache = RowCache::default();
        let cursor = LoadConnection::load(&mut self.0, AnyRows(query))?;
        let mut rows = Vec::with_capacity(cursor.size_hint().0);
        for row in cursor {
            rows.push(Ok(IntoOwnedRow::into_owned(row?, &mut cache)));
        }
        Ok(rows)
    }
}

/// A row of SQLite's, read from its statement.
type SqliteRow = <SqliteConnection as LoadConnection>::Row<'static, 'static>;
/// The same row, owning its values.
type OwnedRow = <SqliteRow as IntoOwnedRow<'static, Sqlite>>::OwnedRow;
/// What the rows of one statement share (their column names).
type RowCache = <SqliteRow as IntoOwnedRow<'static, Sqlite>>::Cache;

/// A statement whose rows are read by position: what diesel's synchronous connection takes from
/// any query, as diesel-async's own wrapper does with the SQL it renders (its `CollectedQuery`).
/// The statement keeps its own identity ([`QueryId`]), so its prepared form is found by type.
struct AnyRows<Q>(Q);

impl<Q: QueryFragment<Sqlite>> QueryFragment<Sqlite> for AnyRows<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, Sqlite>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn to_sql(
        &self,
        out: &mut <Sqlite as diesel::backend::Backend>::QueryBuilder,
        backend: &Sqlite,
    ) -> QueryResult<()> {
        self.0.to_sql(out, backend)
    }

    fn collect_binds<'b>(
        &'b self,
        out: &mut <Sqlite as diesel::backend::Backend>::BindCollector<'b>,
        metadata_lookup: &mut <Sqlite as diesel::sql_types::TypeMetadata>::MetadataLookup,
        backend: &'b Sqlite,
    ) -> QueryResult<()> {
        self.0.collect_binds(out, metadata_lookup, backend)
    }

    fn is_safe_to_cache_prepared(&self, backend: &Sqlite) -> QueryResult<bool> {
        self.0.is_safe_to_cache_prepared(backend)
    }

    fn is_noop(&self, backend: &Sqlite) -> QueryResult<bool> {
        self.0.is_noop(backend)
    }
}

impl<Q: QueryId> QueryId for AnyRows<Q> {
    type QueryId = Q::QueryId;
    const HAS_STATIC_QUERY_ID: bool = Q::HAS_STATIC_QUERY_ID;

    fn query_id() -> Option<TypeId> {
        Q::query_id()
    }
}

impl<Q> Query for AnyRows<Q> {
    type SqlType = Untyped;
}

impl SimpleAsyncConnection for Conn {
    fn batch_execute(&mut self, query: &str) -> impl Future<Output = QueryResult<()>> + Send {
        ready(self.0.batch_execute(query))
    }
}

impl AsyncConnectionCore for Conn {
    type ExecuteFuture<'conn, 'query> = Ready<QueryResult<usize>>;
    type LoadFuture<'conn, 'query> = Ready<QueryResult<Self::Stream<'conn, 'query>>>;
    type Stream<'conn, 'query> = Iter<std::vec::IntoIter<QueryResult<OwnedRow>>>;
    type Row<'conn, 'query> = OwnedRow;
    type Backend = Sqlite;

    fn load<'conn, 'query, T>(&'conn mut self, source: T) -> Self::LoadFuture<'conn, 'query>
    where
        T: AsQuery + 'query,
        T::Query: QueryFragment<Sqlite> + QueryId + 'query,
    {
        ready(self.load_now(source.as_query()).map(stream::iter))
    }

    fn execute_returning_count<'conn, 'query, T>(
        &'conn mut self,
        source: T,
    ) -> Self::ExecuteFuture<'conn, 'query>
    where
        T: QueryFragment<Sqlite> + QueryId + 'query,
    {
        ready(self.0.execute_returning_count(&source))
    }
}

impl AsyncConnection for Conn {
    type TransactionManager = Transactions;

    fn establish(database_url: &str) -> impl Future<Output = ConnectionResult<Self>> + Send {
        ready(SqliteConnection::establish(database_url).map(Self))
    }

    fn transaction_state(&mut self) -> &mut AnsiTransactionManager {
        self.0.transaction_state()
    }

    fn instrumentation(&mut self) -> &mut dyn Instrumentation {
        self.0.instrumentation()
    }

    fn set_instrumentation(&mut self, instrumentation: impl Instrumentation) {
        self.0.set_instrumentation(instrumentation);
    }

    fn set_prepared_statement_cache_size(&mut self, size: CacheSize) {
        self.0.set_prepared_statement_cache_size(size);
    }
}

/// Pooled as it is; a connection left in a broken transaction is dropped (the default check).
impl PoolableConnection for Conn {}

/// diesel's transactions on SQLite (`BEGIN`, savepoints, `COMMIT`), run at once.
pub(crate) struct Transactions;

impl TransactionManager<Conn> for Transactions {
    type TransactionStateData = AnsiTransactionManager;

    async fn begin_transaction(conn: &mut Conn) -> QueryResult<()> {
        AnsiTransactionManager::begin_transaction(&mut conn.0)
    }

    async fn rollback_transaction(conn: &mut Conn) -> QueryResult<()> {
        AnsiTransactionManager::rollback_transaction(&mut conn.0)
    }

    async fn commit_transaction(conn: &mut Conn) -> QueryResult<()> {
        AnsiTransactionManager::commit_transaction(&mut conn.0)
    }

    fn transaction_manager_status_mut(conn: &mut Conn) -> &mut TransactionManagerStatus {
        <AnsiTransactionManager as SyncTransactionManager<SqliteConnection>>::transaction_manager_status_mut(&mut conn.0)
    }
}

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

    /// Runs an operation whose cost grows with what it looks through (a search, the count of a
    /// filtered listing) on a thread of Tokio's blocking pool instead: however long its
    /// statements take, they hold up no thread that serves requests (the caller's is an HTTP
    /// worker). The hand-off costs a few microseconds, next to the milliseconds such a read may
    /// take. The operation runs to its end whatever happens to the caller, as [`run`](Self::run)
    /// guarantees too.
    pub(crate) async fn run_long<T, F>(&self, operation: F) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let outbox = self.outbox.clone();
        let handle = tokio::runtime::Handle::current();
        tokio::task::spawn_blocking(move || handle.block_on(outbox.watch(operation)))
            .await
            .map_err(|e| StoreError::Failed(Box::new(e)))?
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
/// when it returns `Ok` and rolled back otherwise.
pub(crate) async fn immediate_transaction<'a, R, E, F>(conn: &mut Conn, body: F) -> Result<R, E>
where
    for<'r> F: AsyncFnOnce(&'r mut Conn) -> Result<R, E>
        + TransactionBody<&'r mut Conn, Result<R, E>, Fut: Send>
        + Send
        + 'a,
    E: From<diesel::result::Error> + Send + 'a,
    R: Send + 'a,
{
    AnsiTransactionManager::begin_transaction_sql(&mut conn.0, "BEGIN IMMEDIATE")?;
    match body(&mut *conn).await {
        Ok(value) => {
            Transactions::commit_transaction(conn).await?;
            Ok(value)
        }
        Err(error) => {
            Transactions::rollback_transaction(conn).await?;
            Err(error)
        }
    }
}
