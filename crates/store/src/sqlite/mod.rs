//! The SQLite backend: diesel's `SqliteConnection` (bundled SQLite) behind diesel-async's
//! interface, pooled by deadpool, its calls run at once in the caller's task (`inline.rs`).
//! WAL, `busy_timeout`, foreign keys on, and every write transaction `BEGIN IMMEDIATE`: a
//! deferred transaction that later wants to write fails with "database is locked" under
//! concurrency instead of waiting its turn.

use diesel::{prelude::*, ConnectionError};
use diesel_async::{
    pooled_connection::{
        deadpool::Pool, AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
    },
    AsyncConnection, RunQueryDsl,
};
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use futures_util::FutureExt;
use time::OffsetDateTime;

use diesel::sql_types::{BigInt, Text, TimestamptzSqlite};
use gatehouse_domain::ports::AttemptRecord;

use crate::{
    dialect::Dialect, due, kept::kept, migrate_with, types::DbUuid, Backend, Direction, OpenError,
    StoreOptions,
};

mod checkpoint;
mod inline;

pub(crate) use inline::immediate_transaction;
pub(crate) use inline::Conn;
use inline::InCaller;

#[path = "../schema.rs"]
pub(crate) mod schema;

/// The SQL types of the columns whose type differs between the backends (see `schema.rs`).
mod column_types {
    pub(crate) type Id = diesel::sql_types::Text;
    pub(crate) type Moment = diesel::sql_types::TimestamptzSqlite;
    pub(crate) type Json = diesel::sql_types::Json;
    pub(crate) type Strings = diesel::sql_types::Text;
}

pub(crate) type Db = diesel::sqlite::Sqlite;
type DbPool = Pool<Conn>;

const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations/sqlite");
pub(crate) const BACKEND: Backend = Backend::Sqlite;

/// Runs the body in a `BEGIN IMMEDIATE` transaction: it takes the write lock up front.
macro_rules! write_tx {
    ($conn:expr, $body:expr) => {
        $crate::sqlite::immediate_transaction($conn, $body)
    };
}

#[path = "../queries/mod.rs"]
mod queries;

/// This backend's [`Dialect`]: the statements the shared queries leave to it.
pub(crate) struct Sql;

impl Dialect for Sql {
    type Conn = Conn;
    type NewDelivery<'a> = queries::NewDeliveryRow<'a>;
    type NewEvent = queries::NewEventRow;

    /// The users the FTS5 trigram index `users_search` finds (migration
    /// `2026-12-02-000051_search_by_trigrams`), by rowid. Written as a list of user ids, SQLite
    /// looks each of them up in the organization's memberships (its primary key), so a search
    /// reads as many memberships as the index finds users; as a join on `users.rowid`, it read
    /// every membership of the organization and checked each against the list.
    const USER_SEARCH: Option<(&'static str, &'static str)> = Some((
        "memberships.user_id IN (SELECT id FROM users WHERE rowid IN \
         (SELECT rowid FROM users_search WHERE users_search MATCH ",
        "))",
    ));

    /// The candidates of a lease, in their turn (see [`Dialect::lease_candidates`]). The query
    /// names its index, `webhook_deliveries_endpoint_due_idx`, which holds every column the
    /// query filters on or returns: left to itself, SQLite's planner answered `endpoint_id IN
    /// (active endpoints)` from the (endpoint, created) index, visiting every delivery the
    /// endpoints ever had.
    async fn lease_candidates(
        conn: &mut Conn,
        now: OffsetDateTime,
        per_endpoint: i64,
        limit: i64,
        busy: &[DbUuid],
    ) -> QueryResult<Vec<(DbUuid, DbUuid, DbUuid)>> {
        let sql = due::lease_candidates::<Self>(busy.len());
        let mut query = diesel::sql_query(sql)
            .into_boxed::<Db>()
            .bind::<TimestamptzSqlite, _>(now);
        for endpoint in busy {
            query = query.bind::<Text, _>(*endpoint);
        }
        let candidates: Vec<Candidate> = kept(
            query
                .bind::<BigInt, _>(per_endpoint)
                .bind::<BigInt, _>(limit),
        )
        .load(conn)
        .await?;
        Ok(candidates
            .into_iter()
            .map(|c| (c.id, c.endpoint_id, c.organization_id))
            .collect())
    }

    /// Leases the picked deliveries as they are: the caller's `BEGIN IMMEDIATE` transaction
    /// holds the database's write lock, so no other leaser has read, let alone taken, any of
    /// them since the candidates were read, and they are still due.
    async fn lease_picked(
        conn: &mut Conn,
        ids: &[DbUuid],
        _now: OffsetDateTime,
        lease: DbUuid,
        until: OffsetDateTime,
    ) -> QueryResult<Vec<DbUuid>> {
        use schema::webhook_deliveries as d;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        diesel::update(d::table.filter(d::id.eq_any(ids)))
            .set((d::lease.eq(Some(lease)), d::leased_until.eq(Some(until))))
            .execute(conn)
            .await?;
        Ok(ids.to_vec())
    }

    /// Nothing to relax: in WAL mode with `synchronous = NORMAL` no commit waits for the disk.
    async fn bookkeeping(_conn: &mut Conn) -> QueryResult<()> {
        Ok(())
    }

    /// Nothing: SQLite's planner takes these statements' indexes as they are.
    async fn by_index(_conn: &mut Conn) -> QueryResult<()> {
        Ok(())
    }

    /// Nothing: a write transaction begins `IMMEDIATE`, and holds the database's one write lock;
    /// and no commit waits for the disk ([`Dialect::bookkeeping`]).
    async fn begin_lease(_conn: &mut Conn) -> QueryResult<()> {
        Ok(())
    }

    /// Nothing: one process uses the file, and the store's own signal wakes its dispatcher.
    async fn announce_outbox(_conn: &mut Conn) -> QueryResult<()> {
        Ok(())
    }

    /// A statement a row: no round trip to save, and diesel's SQLite connection inserts a batch
    /// row by row anyway.
    async fn insert_events(conn: &mut Conn, rows: Vec<Self::NewEvent>) -> QueryResult<()> {
        for row in rows {
            diesel::insert_into(schema::events::table)
                .values(row)
                .execute(conn)
                .await?;
        }
        Ok(())
    }

    /// Inserts new deliveries, skipping (event, endpoint) pairs that exist: a statement each, as
    /// diesel has no multi-row `INSERT ... ON CONFLICT` for SQLite (and no round trip to save).
    async fn insert_deliveries(
        conn: &mut Conn,
        rows: Vec<Self::NewDelivery<'_>>,
    ) -> QueryResult<()> {
        use schema::webhook_deliveries as d;
        for row in rows {
            diesel::insert_into(d::table)
                .values(row)
                .on_conflict((d::event_id, d::endpoint_id))
                .do_nothing()
                .execute(conn)
                .await?;
        }
        Ok(())
    }

    /// A statement each (no round trip to save; the write transaction holds every row), kept
    /// prepared: its rows are loaded (`RETURNING`), since on SQLite only a loaded statement is
    /// kept (see `kept`).
    async fn end_runs_of_failures(
        conn: &mut Conn,
        endpoints: &[(DbUuid, OffsetDateTime)],
        ended: i32,
    ) -> QueryResult<()> {
        use schema::webhook_endpoints as e;
        for (endpoint, at) in endpoints {
            let _: Vec<DbUuid> = kept(
                diesel::update(e::table.find(*endpoint))
                    .set((
                        e::consecutive_failures.eq(ended),
                        e::last_delivery_at.eq(Some(*at)),
                    ))
                    .returning(e::id),
            )
            .load(conn)
            .await?;
        }
        Ok(())
    }

    /// Records attempts on their deliveries if their leases hold: the endpoint of each, or `None`.
    /// A statement each (no round trip to save).
    async fn record_deliveries(
        conn: &mut Conn,
        records: &[AttemptRecord],
    ) -> QueryResult<Vec<Option<DbUuid>>> {
        let mut endpoints = Vec::with_capacity(records.len());
        for record in records {
            endpoints.push(record_delivery(conn, record).await?);
        }
        Ok(endpoints)
    }
}

/// Numbered parameters (`now` is bound once and read twice); a list left out is a
/// parameter for each value. The query names its index (see [`Dialect::lease_candidates`]).
impl due::CandidatesSql for Sql {
    const DELIVERIES: &'static str =
        "webhook_deliveries AS d INDEXED BY webhook_deliveries_endpoint_due_idx";

    /// `+?n`: the parameter, behind a unary plus that hides its value from SQLite's planner.
    /// A bare `?n` in a `LIMIT` or in a range on an index column (once `PRAGMA optimize` has
    /// gathered the index's samples) makes the planner read the bound value and mark the
    /// statement to be planned again whenever that value changes: `now` changes at every
    /// lease, so the kept statement was parsed and planned again at every lease, a quarter of
    /// the lease's CPU in the fan-out's profile (`docs/benchmarks.md`, "Cost bounded by the
    /// request, fifth pass"). The plan does not depend on the values: the query names its index.
    fn param(n: usize) -> String {
        format!("+?{n}")
    }

    fn not_among(column: &str, first: usize, count: usize) -> (String, usize) {
        let params: Vec<String> = (first..first + count).map(Self::param).collect();
        (format!("{column} NOT IN ({})", params.join(", ")), count)
    }

    /// SQLite has no lateral join: each endpoint's first due deliveries are a list of ids,
    /// run for each endpoint with the endpoint index, and the deliveries are looked up by them.
    fn first_due_of_each(rest: &str) -> String {
        format!("JOIN webhook_deliveries AS d ON d.id IN (SELECT d.id {rest})")
    }
}

/// A delivery that may be leased, its endpoint and its organization.
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(sql_type = Text)]
    id: DbUuid,
    #[diesel(sql_type = Text)]
    endpoint_id: DbUuid,
    #[diesel(sql_type = Text)]
    organization_id: DbUuid,
}

/// Records an attempt on its delivery if the lease holds (see `record_attempts`): the
/// delivery's endpoint, or `None` when the lease was lost or the endpoint (and with it the
/// delivery) deleted. PostgreSQL's `record_deliveries` makes the same update for a whole batch
/// in one statement: keep the two alike.
async fn record_delivery(conn: &mut Conn, record: &AttemptRecord) -> QueryResult<Option<DbUuid>> {
    use schema::webhook_deliveries as d;
    let held = d::table
        .filter(d::id.eq(DbUuid(record.delivery_id.as_uuid())))
        .filter(d::lease.eq(Some(DbUuid(record.lease))));
    // The state the attempt left the delivery in, as the domain's state machine decided.
    let state = record.state;
    let at = record.attempted_at;
    // Kept: diesel prepares every `UPDATE` afresh (see `kept`), and this one runs for every
    // attempt; its text is one (every value is bound, none left out).
    kept(
        diesel::update(held)
            .set((
                d::status.eq(state.status().as_str()),
                d::attempt.eq(i32::try_from(state.attempt()).unwrap_or(i32::MAX)),
                d::http_status.eq(record.http_status.map(i32::from)),
                d::response_body.eq(record.response_body.as_deref()),
                d::duration_ms.eq(Some(i64::try_from(record.duration_ms).unwrap_or(i64::MAX))),
                d::delivered_at.eq(Some(at)),
                d::next_attempt_at.eq(state.next_attempt_at()),
                d::lease.eq(None::<DbUuid>),
                d::leased_until.eq(None::<OffsetDateTime>),
            ))
            .returning(d::endpoint_id),
    )
    .get_result(conn)
    .await
    .optional()
}

/// Pragmas set on every new connection.
///
/// `wal_autocheckpoint`: the commit that takes the write-ahead log past this many pages (4 KiB
/// each: 128 MiB) copies the log's pages into the database file, on the one writer connection,
/// while every other write waits. The store's own thread checkpoints the log long before that
/// (`checkpoint.rs`); this is for when it cannot (SQLite's default, 1,000 pages, made a
/// checkpoint every few hundred attempts in a webhook fan-out: `docs/benchmarks.md`, "Cost
/// bounded by the request, fifth pass"). The log file is reused from its start after each
/// checkpoint that every reader has passed.
const CONNECTION_PRAGMAS: &[&str] = &[
    "PRAGMA busy_timeout = 5000",
    "PRAGMA foreign_keys = ON",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA wal_autocheckpoint = 32000",
];

/// The SQLite store.
#[derive(Clone)]
pub(crate) struct DbStore {
    /// Reads: WAL readers run concurrently with each other and with the writer.
    pool: DbPool,
    /// Write transactions: one connection. SQLite runs one writer at a time; with a pool of
    /// writers, the losers of each race sleep in SQLite's busy handler (backing off up to
    /// 100 ms a try, in no order) and under load some outwait `busy_timeout`. Here they queue
    /// for the one connection instead, in order and without a thread asleep.
    writer: DbPool,
    /// Where every operation runs: in its caller's task (`inline.rs`).
    runtime: InCaller,
    /// The thread that checkpoints the write-ahead log (`checkpoint.rs`), for as long as the
    /// store lives.
    _checkpoints: checkpoint::Checkpoints,
}

/// `sqlite://gatehouse.db` -> `gatehouse.db`; `sqlite:///var/lib/g.db` -> `/var/lib/g.db`.
pub(crate) fn path_of(url: &str) -> &str {
    url.strip_prefix("sqlite://").unwrap_or(url)
}

async fn establish(url: &str) -> Result<Conn, ConnectionError> {
    let mut conn = Conn::establish(path_of(url)).await?;
    for pragma in CONNECTION_PRAGMAS {
        diesel::sql_query(*pragma)
            .execute(&mut conn)
            .await
            .map_err(|e| ConnectionError::BadConnection(e.to_string()))?;
    }
    Ok(conn)
}

/// Creates the database file, when there is none yet, readable and writable by its owner only
/// (`0600`), before SQLite opens it: it holds password hashes, sealed secrets and personal data.
/// SQLite gives the `-wal` and `-shm` files it makes beside it the database file's own mode, so
/// they are `0600` too. A file that exists keeps the mode its operator gave it; an in-memory
/// database has no file.
fn create_owner_only(path: &std::path::Path) -> std::io::Result<()> {
    let name = path.as_os_str().to_string_lossy();
    if name.is_empty() || name == ":memory:" || name.starts_with("file:") {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

impl DbStore {
    pub(crate) async fn open(url: &str, options: &StoreOptions) -> Result<Self, OpenError> {
        let path = std::path::Path::new(path_of(url));
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| OpenError::Connect(Box::new(e)))?;
        }
        create_owner_only(path).map_err(|e| OpenError::Connect(Box::new(e)))?;
        {
            // WAL is a property of the database file: set it once, before the pool opens.
            let mut conn = establish(url)
                .await
                .map_err(|e| OpenError::Connect(Box::new(e)))?;
            diesel::sql_query("PRAGMA journal_mode = WAL")
                .execute(&mut conn)
                .await
                .map_err(|e| OpenError::Connect(Box::new(e)))?;
        }
        if options.migrate {
            Self::run_migrations(url).await?;
        }
        Ok(Self {
            pool: Self::pool(url, options.max_connections).await?,
            writer: Self::pool(url, 1).await?,
            runtime: InCaller::default(),
            _checkpoints: checkpoint::Checkpoints::start(path_of(url)),
        })
    }

    /// Notified when an operation of this store committed outbox events.
    pub(crate) fn outbox_committed(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.runtime.outbox.notify()
    }

    /// Notified when an operation of this store queued mail.
    pub(crate) fn mail_queued(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.runtime.outbox.mail()
    }

    /// Nothing to do: SQLite changes a row in place, and a delivery leaves no dead entries in
    /// its indexes for later leases to read past (the PostgreSQL store vacuums after a burst).
    pub(crate) fn deliveries_recorded(&self, _n: usize) {}

    /// The read pool's use and the one writer's.
    pub(crate) fn pool_use(&self) -> Vec<gatehouse_domain::ports::PoolUse> {
        vec![
            crate::pool_use("read", &self.pool),
            crate::pool_use("write", &self.writer),
        ]
    }

    async fn pool(url: &str, size: usize) -> Result<DbPool, OpenError> {
        let mut config = ManagerConfig::default();
        config.custom_setup = Box::new(|url| establish(url).boxed());
        // No check query on every checkout (see the PostgreSQL backend).
        config.recycling_method = RecyclingMethod::Fast;
        let manager = AsyncDieselConnectionManager::<Conn>::new_with_config(url, config);
        let pool = Pool::builder(manager)
            .max_size(size)
            .build()
            .map_err(|e| OpenError::Connect(Box::new(e)))?;
        drop(
            pool.get()
                .await
                .map_err(|e| OpenError::Connect(Box::new(e)))?,
        );
        Ok(pool)
    }

    pub(crate) async fn run_migrations(url: &str) -> Result<Vec<String>, OpenError> {
        migrate_with(
            establish(url)
                .await
                .map_err(|e| OpenError::Connect(Box::new(e)))?,
            MIGRATIONS,
            Direction::Up,
        )
        .await
    }

    pub(crate) async fn revert_migrations(url: &str) -> Result<Vec<String>, OpenError> {
        migrate_with(
            establish(url)
                .await
                .map_err(|e| OpenError::Connect(Box::new(e)))?,
            MIGRATIONS,
            Direction::DownAll,
        )
        .await
    }
}
