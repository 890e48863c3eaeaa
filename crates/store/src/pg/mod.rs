//! The PostgreSQL backend: `AsyncPgConnection` pooled by deadpool.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::{
    pooled_connection::{
        deadpool::Pool, AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
    },
    AsyncConnection, AsyncPgConnection, RunQueryDsl,
};
use diesel_migrations::{embed_migrations, EmbeddedMigrations};

use crate::{migrate_with, types::DbUuid, Backend, Direction, OpenError, StoreOptions};

pub(crate) mod schema;

pub(crate) type Db = diesel::pg::Pg;
pub(crate) type Conn = AsyncPgConnection;
type DbPool = Pool<Conn>;

const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/postgres");
pub(crate) const BACKEND: Backend = Backend::Postgres;

/// Runs the body in a read-committed transaction.
macro_rules! write_tx {
    ($conn:expr, $body:expr) => {
        diesel_async::AsyncConnection::transaction($conn, $body)
    };
}

#[path = "../queries/mod.rs"]
mod queries;

/// Picks the deliveries to lease (see `due_deliveries!`) and locks them for the caller's
/// transaction; rows another transaction has locked are skipped, not waited for, so that
/// concurrent leasers in any process never pick the same delivery.
pub(crate) async fn lease_ids(
    conn: &mut Conn,
    now: DateTime<Utc>,
    limit: i64,
    busy: &[DbUuid],
) -> QueryResult<Vec<(DbUuid, DbUuid)>> {
    due_deliveries!(now, limit, busy)
        .for_update()
        .skip_locked()
        .load(conn)
        .await
}

/// Inserts new deliveries in one statement, skipping (event, endpoint) pairs that exist.
pub(crate) async fn insert_deliveries(
    conn: &mut Conn,
    rows: Vec<queries::NewDeliveryRow<'_>>,
) -> QueryResult<()> {
    use schema::webhook_deliveries as d;
    if rows.is_empty() {
        return Ok(());
    }
    diesel::insert_into(d::table)
        .values(rows)
        .on_conflict((d::event_id, d::endpoint_id))
        .do_nothing()
        .execute(conn)
        .await
        .map(drop)
}

/// Connections go back into use without a check query: the default (`Verified`) sends
/// `SELECT 1` on every checkout, a second round trip for each query a request makes. A
/// connection that broke is found out by the query that uses it (`503`, then replaced); see
/// `docs/benchmarks.md` for what this changed.
fn fast_recycling() -> ManagerConfig<Conn> {
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    config
}

/// The PostgreSQL store.
#[derive(Clone)]
pub(crate) struct DbStore {
    pool: DbPool,
    /// Write transactions: the same pool (PostgreSQL runs writers concurrently).
    writer: DbPool,
}

impl DbStore {
    pub(crate) async fn open(url: &str, options: &StoreOptions) -> Result<Self, OpenError> {
        if options.migrate {
            Self::run_migrations(url).await?;
        }
        let manager = AsyncDieselConnectionManager::<Conn>::new_with_config(url, fast_recycling());
        let pool = Pool::builder(manager)
            .max_size(options.max_connections)
            .build()
            .map_err(|e| OpenError::Connect(Box::new(e)))?;
        // Fail at start-up, not at the first request, when the database is unreachable.
        drop(
            pool.get()
                .await
                .map_err(|e| OpenError::Connect(Box::new(e)))?,
        );
        Ok(Self {
            writer: pool.clone(),
            pool,
        })
    }

    async fn connect(url: &str) -> Result<Conn, OpenError> {
        Conn::establish(url)
            .await
            .map_err(|e| OpenError::Connect(Box::new(e)))
    }

    pub(crate) async fn run_migrations(url: &str) -> Result<Vec<String>, OpenError> {
        migrate_with(Self::connect(url).await?, MIGRATIONS, Direction::Up).await
    }

    pub(crate) async fn revert_migrations(url: &str) -> Result<Vec<String>, OpenError> {
        migrate_with(Self::connect(url).await?, MIGRATIONS, Direction::DownAll).await
    }
}
