//! Gatehouse's store: diesel + diesel-async adapters of the domain's store ports, for
//! PostgreSQL (production, many replicas) and SQLite (the embedded default).
//!
//! Each query is written once, in [`queries`](self) (a module compiled twice: into [`pg`] and
//! into [`sqlite`], each against its own `schema`). Only what must differ, differs: the schema's
//! column types, connection set-up, how a write transaction begins (`BEGIN IMMEDIATE` on
//! SQLite, so that concurrent writers queue on `busy_timeout` instead of failing), and how due
//! webhook deliveries are picked for a lease (`FOR UPDATE SKIP LOCKED` on PostgreSQL). Which
//! deliveries are due is the domain's `DueRule`, translated once (`due`); which endpoints an
//! event goes to is the domain's `Subscription`.
//!
//! [`open`] picks the backend from the URL, runs the embedded migrations and returns one
//! [`Store`] that implements every store port.
#![warn(missing_docs)]
#![expect(
    clippy::duplicate_mod,
    reason = "the shared queries module is compiled once per backend, on purpose"
)]

use std::sync::Arc;

use gatehouse_domain::ports::{
    AccountStore, AccountTokenStore, ApiKeyStore, ApplicationStore, AuditStore,
    AuthorizationCodeStore, BoxError, BrandingStore, DeliveryQueue, DirectoryStore, DomainStore,
    HealthStore, MailQueue, MemberStore, MembershipStore, MfaStore, OperationsStore,
    OrganizationStore, PolicyStore, RoleStore, SamlStore, ServiceAccountStore, SessionStore,
    SigningKeyStore, SsoStore, StoreError, WebhookStore,
};

mod dialect;
mod due;
mod kept;
mod listing;
/// Runs the body, `async |conn: &mut Conn| -> Result<T, diesel::result::Error>`, in one write
/// transaction (the backend's `write_tx!`) on a connection of the store's `writer` pool, on the
/// store's runtime (see [`runtime`]), and maps the error to the port's.
macro_rules! in_write_tx {
    ($store:expr, $body:expr) => {{
        let pool = $store.writer.clone();
        $store
            .runtime
            .run(async move {
                let mut conn = pool.get().await.map_err($crate::pool_error)?;
                write_tx!(&mut *conn, $body).await.map_err($crate::db_error)
            })
            .await
    }};
}

/// Runs the body, `async |conn: &mut Conn| -> Result<T, StoreError>`, on a connection of the
/// store's read pool, on the store's runtime (see [`runtime`]). Whatever the body borrows must
/// be its own: the operation outlives a caller that gives up on it. `in_read!(self, long,
/// body)` is for a read whose cost grows with what it looks through (a search, a filtered
/// count): on SQLite it runs off the caller's thread (an HTTP worker's), on Tokio's blocking
/// pool, so that it holds up no other request; on PostgreSQL, as every operation, on the
/// store's runtime.
macro_rules! in_read {
    ($store:expr, $body:expr) => {
        in_read!($store, run, $body)
    };
    ($store:expr, long, $body:expr) => {
        in_read!($store, run_long, $body)
    };
    ($store:expr, $run:ident, $body:expr) => {{
        let pool = $store.pool.clone();
        $store
            .runtime
            .$run(async move {
                let mut conn = pool.get().await.map_err($crate::pool_error)?;
                ($body)(&mut *conn).await
            })
            .await
    }};
}

mod outbox;
mod pg;
mod runtime;
mod sqlite;
mod types;

/// Every store port, implemented by both backends.
pub trait Store:
    AccountStore
    + AccountTokenStore
    + SessionStore
    + ApiKeyStore
    + MembershipStore
    + ServiceAccountStore
    + RoleStore
    + OrganizationStore
    + MemberStore
    + PolicyStore
    + BrandingStore
    + SsoStore
    + DomainStore
    + DirectoryStore
    + SamlStore
    + MfaStore
    + ApplicationStore
    + AuthorizationCodeStore
    + SigningKeyStore
    + HealthStore
    + WebhookStore
    + DeliveryQueue
    + MailQueue
    + OperationsStore
    + AuditStore
{
    /// The backend's name, for logs: `postgres` or `sqlite`.
    fn backend(&self) -> Backend;

    /// Notified each time an operation of this store committed outbox events (a permit is kept
    /// when nobody waits): the dispatcher waits on it between its polls, so that a change's
    /// deliveries are made as soon as it commits. Events another process committed are found
    /// by the poll.
    fn outbox_committed(&self) -> Arc<tokio::sync::Notify>;

    /// Notified each time an operation of this store queued mail (a permit is kept when nobody
    /// waits): the mail courier waits on it between its polls.
    fn mail_queued(&self) -> Arc<tokio::sync::Notify>;
}

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL (`postgres://` or `postgresql://`): production, one database for many
    /// replicas.
    Postgres,
    /// SQLite (`sqlite://`): the embedded default, one process on one file.
    Sqlite,
}

impl Backend {
    /// The backend's name, as logs and metrics write it: `postgres` or `sqlite`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Sqlite => "sqlite",
        }
    }
}

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL names no backend Gatehouse has; it is kept with its password redacted.
    #[error("unsupported database URL {0:?}: use postgres://... or sqlite://path.db")]
    UnsupportedUrl(String),
    /// The database could not be reached, or its file, pool or runtime not set up.
    #[error("cannot connect to the database")]
    Connect(#[source] BoxError),
    /// A migration failed, or could not be run.
    #[error("running migrations failed")]
    Migrate(#[source] BoxError),
}

/// Pool and start-up options.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The most connections the pool opens (on SQLite, the read pool's: writes have one
    /// connection of their own).
    pub max_connections: usize,
    /// Run pending migrations when opening (what `gatehouse serve` does).
    pub migrate: bool,
    /// PostgreSQL: the longest one statement of a pooled connection may run before the server
    /// cancels it (`statement_timeout`), so that no request holds a connection for longer;
    /// `None` for no limit. Migrations run without it. SQLite ignores it.
    pub statement_timeout: Option<std::time::Duration>,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 16,
            migrate: true,
            statement_timeout: Some(std::time::Duration::from_secs(5)),
        }
    }
}

/// Opens the database the URL names: `postgres://...` / `postgresql://...`, or `sqlite://file.db`
/// (relative) / `sqlite:///abs/path.db`. Runs pending migrations when `options.migrate`.
pub async fn open(url: &str, options: &StoreOptions) -> Result<Arc<dyn Store>, OpenError> {
    match backend_of(url)? {
        Backend::Postgres => Ok(Arc::new(pg::DbStore::open(url, options).await?)),
        Backend::Sqlite => Ok(Arc::new(sqlite::DbStore::open(url, options).await?)),
    }
}

/// Runs every pending migration and returns their names.
pub async fn migrate(url: &str) -> Result<Vec<String>, OpenError> {
    match backend_of(url)? {
        Backend::Postgres => pg::DbStore::run_migrations(url).await,
        Backend::Sqlite => sqlite::DbStore::run_migrations(url).await,
    }
}

/// Reverts every migration (for the migration round-trip test and for operators).
pub async fn revert_all(url: &str) -> Result<Vec<String>, OpenError> {
    match backend_of(url)? {
        Backend::Postgres => pg::DbStore::revert_migrations(url).await,
        Backend::Sqlite => sqlite::DbStore::revert_migrations(url).await,
    }
}

/// Which way migrations go.
#[derive(Clone, Copy)]
pub(crate) enum Direction {
    Up,
    DownAll,
}

/// Runs the embedded migrations over an async connection, with diesel's sync harness on a
/// blocking thread (it blocks on the connection). Returns the versions applied or reverted.
pub(crate) async fn migrate_with<C>(
    conn: C,
    migrations: diesel_migrations::EmbeddedMigrations,
    direction: Direction,
) -> Result<Vec<String>, OpenError>
where
    C: diesel_async::AsyncConnection + Send + 'static,
    diesel_async::async_connection_wrapper::AsyncConnectionWrapper<C>:
        diesel_migrations::MigrationHarness<C::Backend> + Send,
{
    use diesel_migrations::MigrationHarness;
    let mut wrapper =
        diesel_async::async_connection_wrapper::AsyncConnectionWrapper::<C>::from(conn);
    tokio::task::spawn_blocking(move || {
        let done = match direction {
            Direction::Up => wrapper.run_pending_migrations(migrations),
            Direction::DownAll => wrapper.revert_all_migrations(migrations),
        };
        done.map(|versions| versions.iter().map(ToString::to_string).collect())
            .map_err(OpenError::Migrate)
    })
    .await
    .map_err(|e| OpenError::Migrate(Box::new(e)))?
}

/// The backend a database URL names: `postgres://` or `postgresql://`, or `sqlite://`; any
/// other URL is [`OpenError::UnsupportedUrl`].
pub fn backend_of(url: &str) -> Result<Backend, OpenError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite://") {
        Ok(Backend::Sqlite)
    } else {
        Err(OpenError::UnsupportedUrl(redact_url(url)))
    }
}

/// The URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Setting a password only fails on URLs that cannot have one.
            let _ = parsed.set_password(Some("****"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// Maps a diesel error to the port's error.
pub(crate) fn db_error(error: diesel::result::Error) -> StoreError {
    use diesel::result::{DatabaseErrorKind, Error};
    match error {
        Error::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => StoreError::Conflict,
        // The row a new one names was deleted meanwhile (a race with its deletion).
        Error::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => StoreError::Gone,
        Error::DatabaseError(DatabaseErrorKind::ClosedConnection, _) => {
            StoreError::Unavailable(Box::new(error))
        }
        Error::DatabaseError(DatabaseErrorKind::Unknown, ref info)
            if ran_out_of_time(info.message()) =>
        {
            StoreError::Unavailable(Box::new(error))
        }
        other => StoreError::Failed(Box::new(other)),
    }
}

/// Whether PostgreSQL cancelled the statement at `statement_timeout`
/// (`GATEHOUSE_STATEMENT_TIMEOUT_MS`): a request that took too long is answered `503` with
/// `Retry-After`, as a store that did not answer, not `500`. diesel-async reports SQLSTATE
/// 57014 (`query_canceled`) as an unknown error and keeps only the server's message, so the
/// message is what there is to tell it by: PostgreSQL's own text, in the server's default
/// `lc_messages` (English, which is what every supported deployment of Gatehouse runs; a
/// server set to another language answers `500` instead, and `docs/operations.md` says so).
fn ran_out_of_time(message: &str) -> bool {
    message == "canceling statement due to statement timeout"
}

/// An error for a transaction to roll back with, that [`db_error`] reports as `kind` says
/// (`UniqueViolation`: [`StoreError::Conflict`]; `ForeignKeyViolation`: [`StoreError::Gone`]):
/// for a rule the transaction checked itself, with why.
pub(crate) fn refused(
    kind: diesel::result::DatabaseErrorKind,
    why: &'static str,
) -> diesel::result::Error {
    diesel::result::Error::DatabaseError(kind, Box::new(why.to_owned()))
}

/// Whether the error violates the named unique constraint (PostgreSQL reports the name;
/// SQLite serialises writers, so the races this tells apart cannot happen there).
pub(crate) fn violates(error: &diesel::result::Error, constraint: &str) -> bool {
    matches!(
        error,
        diesel::result::Error::DatabaseError(diesel::result::DatabaseErrorKind::UniqueViolation, info)
            if info.constraint_name() == Some(constraint)
    )
}

/// A deadpool pool's use now, as the metrics report it.
pub(crate) fn pool_use<M: deadpool::managed::Manager>(
    name: &'static str,
    pool: &deadpool::managed::Pool<M>,
) -> gatehouse_domain::ports::PoolUse {
    let status = pool.status();
    let count = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    gatehouse_domain::ports::PoolUse {
        pool: name,
        max: count(status.max_size),
        in_use: count(status.size.saturating_sub(status.available)),
        waiting: count(status.waiting),
    }
}

pub(crate) fn pool_error<E: std::error::Error + Send + Sync + 'static>(error: E) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

pub(crate) fn corrupt(what: &'static str) -> StoreError {
    StoreError::Failed(format!("corrupt row: {what}").into())
}
