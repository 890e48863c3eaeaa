//! The PostgreSQL backend: `AsyncPgConnection` pooled by deadpool.

use diesel::{prelude::*, ConnectionError};
use diesel_async::SimpleAsyncConnection;
use diesel_async::{
    pooled_connection::{
        deadpool::Pool, AsyncDieselConnectionManager, ManagerConfig, RecyclingMethod,
    },
    AsyncConnection, AsyncPgConnection, RunQueryDsl,
};
use diesel_migrations::{embed_migrations, EmbeddedMigrations};
use futures_util::FutureExt;
use time::OffsetDateTime;

use diesel::sql_types;
use gatehouse_domain::ports::AttemptRecord;

use crate::{
    dialect::Dialect,
    due,
    kept::kept,
    migrate_with,
    outbox::OutboxSignal,
    runtime::{self, StoreRuntime},
    types::DbUuid,
    Backend, Direction, OpenError, StoreOptions,
};

#[path = "../schema.rs"]
pub(crate) mod schema;

/// The SQL types of the columns whose type differs between the backends (see `schema.rs`).
mod column_types {
    pub(crate) type Id = diesel::sql_types::Uuid;
    pub(crate) type Moment = diesel::sql_types::Timestamptz;
    pub(crate) type Json = diesel::sql_types::Jsonb;
    pub(crate) type Strings = diesel::sql_types::Array<diesel::sql_types::Text>;
}

pub(crate) type Db = diesel::pg::Pg;
pub(crate) type Conn = AsyncPgConnection;
type DbPool = Pool<Conn>;

/// The advisory lock under which migrations run (an arbitrary key of Gatehouse's own: "gh" and
/// "migrate" in ASCII).
const MIGRATION_LOCK: i64 = 0x6768_6d69_6772_6174;
/// The advisory lock a lease holds for its transaction, so that leases in every replica count
/// the attempts in flight at an endpoint one after another (see `Dialect::begin_lease`).
const LEASE_LOCK: i64 = 0x6768_6c65_6173_6573;

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
mod tidy;

/// This backend's [`Dialect`]: the statements the shared queries leave to it.
pub(crate) struct Sql;

/// Outbox rows inserted in one statement at most ([`Dialect::insert_events`]).
const EVENTS_A_STATEMENT: usize = 8;

impl Dialect for Sql {
    type Conn = Conn;
    type NewDelivery<'a> = queries::NewDeliveryRow<'a>;
    type NewEvent = queries::NewEventRow;

    /// The trigram indexes (`users_email_trgm_idx`, `users_full_name_trgm_idx`) answer the
    /// `LIKE` conditions themselves.
    const USER_SEARCH: Option<(&'static str, &'static str)> = None;

    /// The candidates of a lease, in their turn (see [`Dialect::lease_candidates`]), read
    /// without locking them: a lease reads several times the rows it takes (to find deliveries
    /// of endpoints with room behind those of endpoints without), and `FOR UPDATE` on them all
    /// made every leased delivery cost ten row locks, each a heap write (`docs/benchmarks.md`).
    /// Each endpoint's first due deliveries are read, not every due delivery
    /// (`due::lease_candidates`).
    async fn lease_candidates(
        conn: &mut Conn,
        now: OffsetDateTime,
        per_endpoint: i64,
        limit: i64,
        busy: &[DbUuid],
    ) -> QueryResult<Vec<(DbUuid, DbUuid, DbUuid)>> {
        let sql = due::lease_candidates::<Self>(busy.len());
        let candidates: Vec<Candidate> = kept(
            diesel::sql_query(sql)
                .bind::<sql_types::Timestamptz, _>(now)
                .bind::<sql_types::Array<sql_types::Uuid>, _>(busy)
                .bind::<sql_types::BigInt, _>(per_endpoint)
                .bind::<sql_types::BigInt, _>(limit),
        )
        .load(conn)
        .await?;
        Ok(candidates
            .into_iter()
            .map(|c| (c.id, c.endpoint_id, c.organization_id))
            .collect())
    }

    /// Locks and leases the picked deliveries that are still due and unleased, in one
    /// statement (`due::lease_picked`); rows another transaction has locked are skipped, not
    /// waited for. Under read committed, a row changed since the candidates were read is
    /// checked again in its newest version (leased or recorded meanwhile by another process:
    /// left out).
    async fn lease_picked(
        conn: &mut Conn,
        ids: &[DbUuid],
        now: OffsetDateTime,
        lease: DbUuid,
        until: OffsetDateTime,
    ) -> QueryResult<Vec<DbUuid>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let leased: Vec<Leased> = kept(
            diesel::sql_query(due::lease_picked())
                .bind::<sql_types::Timestamptz, _>(now)
                .bind::<sql_types::Uuid, _>(lease)
                .bind::<sql_types::Timestamptz, _>(until)
                .bind::<sql_types::Array<sql_types::Uuid>, _>(ids),
        )
        .load(conn)
        .await?;
        Ok(leased.into_iter().map(|row| row.id).collect())
    }

    /// `synchronous_commit = off` for this transaction: a commit returns before its WAL is
    /// flushed (the flush, an fdatasync, took as long as the rest of a lease), and a database
    /// crash loses at most the last few hundred milliseconds of such commits, never a change.
    async fn bookkeeping(conn: &mut Conn) -> QueryResult<()> {
        kept(diesel::sql_query("SET LOCAL synchronous_commit = off"))
            .execute(conn)
            .await
            .map(drop)
    }

    /// No sequential or bitmap scan, no hash or merge join, no sort, no parallel workers, for
    /// this transaction ([`Dialect::by_index`]), in one statement.
    async fn by_index(conn: &mut Conn) -> QueryResult<()> {
        kept(diesel::sql_query(
            "SELECT set_config('enable_seqscan', 'off', true), \
                set_config('enable_bitmapscan', 'off', true), \
                set_config('enable_hashjoin', 'off', true), \
                set_config('enable_mergejoin', 'off', true), \
                set_config('enable_sort', 'off', true), \
                set_config('max_parallel_workers_per_gather', '0', true)",
        ))
        .execute(conn)
        .await
        .map(drop)
    }

    /// Waits for [`LEASE_LOCK`], held until the transaction ends (a lease's transaction is a
    /// few milliseconds), and sets the transaction's settings, in one statement:
    /// `synchronous_commit = off` ([`Dialect::bookkeeping`]), and no bitmap or sequential scan.
    /// The due deliveries are read from the endpoint index (`endpoint_id, next_attempt_at, id`,
    /// holding every other column the query reads) and not from the table: planned on the statistics of a
    /// table that was small when last analyzed (a burst after a quiet hour, or any fresh
    /// database), PostgreSQL preferred a bitmap scan and a lookup of each row, a fifth of the
    /// database's time in a fan-out (`docs/benchmarks.md`).
    async fn begin_lease(conn: &mut Conn) -> QueryResult<()> {
        kept(
            diesel::sql_query(
                "SELECT pg_advisory_xact_lock($1), \
                    set_config('synchronous_commit', 'off', true), \
                    set_config('enable_bitmapscan', 'off', true), \
                    set_config('enable_seqscan', 'off', true)",
            )
            .bind::<sql_types::BigInt, _>(LEASE_LOCK),
        )
        .execute(conn)
        .await
        .map(drop)
    }

    /// The notice carries the store's tag, so that its own listener passes it over: its own
    /// dispatcher has its store's signal already.
    async fn announce_outbox(conn: &mut Conn) -> QueryResult<()> {
        kept(
            diesel::sql_query("SELECT pg_notify($1, $2)")
                .bind::<sql_types::Text, _>(OUTBOX_CHANNEL)
                .bind::<sql_types::Text, _>(&*crate::outbox::sender()),
        )
        .execute(conn)
        .await
        .map(drop)
    }

    /// At most [`EVENTS_A_STATEMENT`] rows a statement, kept prepared: one round trip for a
    /// user's event fanned out to a few organizations, instead of one a row, and a handful of
    /// texts (one for each count of rows) in a connection's cache.
    async fn insert_events(conn: &mut Conn, rows: Vec<Self::NewEvent>) -> QueryResult<()> {
        for chunk in rows.chunks(EVENTS_A_STATEMENT) {
            kept(diesel::insert_into(schema::events::table).values(chunk))
                .execute(conn)
                .await?;
        }
        Ok(())
    }

    /// Inserts new deliveries in one statement, skipping (event, endpoint) pairs that exist.
    async fn insert_deliveries(
        conn: &mut Conn,
        rows: Vec<Self::NewDelivery<'_>>,
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

    /// One statement for every endpoint, its rows locked in the order of their ids first (a
    /// materialized, ordered `FOR UPDATE`: an update joined to the ids alone would lock them in
    /// the join's order, and two recorders could wait on each other).
    async fn end_runs_of_failures(
        conn: &mut Conn,
        endpoints: &[(DbUuid, OffsetDateTime)],
        ended: i32,
    ) -> QueryResult<()> {
        use sql_types::{Array, Timestamptz, Uuid};
        if endpoints.is_empty() {
            return Ok(());
        }
        let (ids, ats): (Vec<DbUuid>, Vec<OffsetDateTime>) = endpoints.iter().copied().unzip();
        kept(
            diesel::sql_query(
                "WITH locked AS MATERIALIZED ( \
                SELECT id FROM webhook_endpoints WHERE id = ANY($1) ORDER BY id FOR UPDATE) \
             UPDATE webhook_endpoints AS e \
             SET consecutive_failures = $3, last_delivery_at = v.at \
             FROM locked, unnest($1, $2) AS v(id, at) \
             WHERE e.id = locked.id AND v.id = locked.id",
            )
            .bind::<Array<Uuid>, _>(ids)
            .bind::<Array<Timestamptz>, _>(ats)
            .bind::<sql_types::Integer, _>(ended),
        )
        .execute(conn)
        .await
        .map(drop)
    }

    /// Records attempts on their deliveries if their leases hold, in one statement: the endpoint
    /// of each, or `None` (the lease was lost or the endpoint deleted). The same update as the
    /// shared `record_delivery`, set-based: a recorder's batch costs one round trip, not one each.
    async fn record_deliveries(
        conn: &mut Conn,
        records: &[AttemptRecord],
    ) -> QueryResult<Vec<Option<DbUuid>>> {
        use sql_types::{Array, BigInt, Integer, Nullable, Text, Timestamptz, Uuid};
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = records.iter().map(|r| r.delivery_id.as_uuid()).collect();
        let leases: Vec<uuid::Uuid> = records.iter().map(|r| r.lease).collect();
        // The state each attempt left its delivery in, as the domain's state machine decided.
        let statuses: Vec<&str> = records.iter().map(|r| r.state.status().as_str()).collect();
        let attempts: Vec<i32> = records
            .iter()
            .map(|r| i32::try_from(r.state.attempt()).unwrap_or(i32::MAX))
            .collect();
        let http_statuses: Vec<Option<i32>> = records
            .iter()
            .map(|r| r.http_status.map(i32::from))
            .collect();
        let bodies: Vec<Option<&str>> =
            records.iter().map(|r| r.response_body.as_deref()).collect();
        let durations: Vec<i64> = records
            .iter()
            .map(|r| i64::try_from(r.duration_ms).unwrap_or(i64::MAX))
            .collect();
        let attempted: Vec<OffsetDateTime> = records.iter().map(|r| r.attempted_at).collect();
        let next: Vec<Option<OffsetDateTime>> =
            records.iter().map(|r| r.state.next_attempt_at()).collect();
        let recorded: Vec<Recorded> = kept(
            diesel::sql_query(
                "UPDATE webhook_deliveries AS d SET \
                status = v.status, attempt = v.attempt, http_status = v.http_status, \
                response_body = v.response_body, duration_ms = v.duration_ms, \
                delivered_at = v.attempted_at, next_attempt_at = v.next_attempt_at, \
                lease = NULL, leased_until = NULL \
             FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9) \
                AS v(id, lease, status, attempt, http_status, response_body, duration_ms, \
                     attempted_at, next_attempt_at) \
             WHERE d.id = v.id AND d.lease = v.lease \
             RETURNING d.id, d.endpoint_id",
            )
            .bind::<Array<Uuid>, _>(ids)
            .bind::<Array<Uuid>, _>(leases)
            .bind::<Array<Text>, _>(statuses)
            .bind::<Array<Integer>, _>(attempts)
            .bind::<Array<Nullable<Integer>>, _>(http_statuses)
            .bind::<Array<Nullable<Text>>, _>(bodies)
            .bind::<Array<BigInt>, _>(durations)
            .bind::<Array<Timestamptz>, _>(attempted)
            .bind::<Array<Nullable<Timestamptz>>, _>(next),
        )
        .load(conn)
        .await?;
        let by_id: std::collections::HashMap<uuid::Uuid, DbUuid> = recorded
            .into_iter()
            .map(|r| (r.id.0, r.endpoint_id))
            .collect();
        Ok(records
            .iter()
            .map(|r| by_id.get(&r.delivery_id.as_uuid()).copied())
            .collect())
    }
}

/// `$n` parameters; a list left out is one array parameter (`<> ALL`), whatever its length.
impl due::CandidatesSql for Sql {
    const DELIVERIES: &'static str = "webhook_deliveries AS d";

    fn param(n: usize) -> String {
        format!("${n}")
    }

    fn not_among(column: &str, first: usize, _count: usize) -> (String, usize) {
        (format!("{column} <> ALL(${first})"), 1)
    }

    /// A lateral subquery, run for each endpoint with the endpoint index.
    fn first_due_of_each(rest: &str) -> String {
        format!(
            "CROSS JOIN LATERAL (SELECT d.id, d.endpoint_id, d.organization_id, \
             d.next_attempt_at {rest}) AS d"
        )
    }
}

/// A delivery a lease took.
#[derive(QueryableByName)]
struct Leased {
    #[diesel(sql_type = sql_types::Uuid)]
    id: DbUuid,
}

/// A recorded delivery and its endpoint.
#[derive(QueryableByName)]
struct Recorded {
    #[diesel(sql_type = sql_types::Uuid)]
    id: DbUuid,
    #[diesel(sql_type = sql_types::Uuid)]
    endpoint_id: DbUuid,
}

/// Connections go back into use without a check query: the default (`Verified`) sends
/// `SELECT 1` on every checkout, a second round trip for each query a request makes. A
/// connection that broke is found out by the query that uses it (`503`, then replaced); see
/// `docs/benchmarks.md` for what this changed.
/// The pool's connections: recycled without a check query, and each with the statement
/// timeout (`SET statement_timeout`, the session's setting for as long as the connection
/// lives) when there is one.
fn pool_config(statement_timeout: Option<std::time::Duration>) -> ManagerConfig<Conn> {
    let mut config = ManagerConfig::default();
    config.recycling_method = RecyclingMethod::Fast;
    if let Some(set) = statement_timeout.map(set_statement_timeout) {
        config.custom_setup = Box::new(move |url| {
            let (url, set) = (url.to_owned(), set.clone());
            async move {
                let mut conn = Conn::establish(&url).await?;
                conn.batch_execute(&set)
                    .await
                    .map_err(|e| ConnectionError::BadConnection(e.to_string()))?;
                Ok(conn)
            }
            .boxed()
        });
    }
    config
}

/// `SET statement_timeout = <ms>`: `0` is PostgreSQL's "no limit".
pub(crate) fn set_statement_timeout(timeout: std::time::Duration) -> String {
    format!("SET statement_timeout = {}", timeout.as_millis())
}

/// The PostgreSQL store.
#[derive(Clone)]
pub(crate) struct DbStore {
    pool: DbPool,
    /// Write transactions: the same pool (PostgreSQL runs writers concurrently).
    writer: DbPool,
    /// Where every operation runs, and every connection lives.
    runtime: StoreRuntime,
    /// Notified by `runtime` when an operation recorded outbox events.
    outbox: OutboxSignal,
    /// The vacuum of the deliveries that a burst of them calls for (`tidy`).
    tidy: std::sync::Arc<tidy::DeliveryTidy>,
}

impl DbStore {
    pub(crate) async fn open(url: &str, options: &StoreOptions) -> Result<Self, OpenError> {
        let outbox = OutboxSignal::default();
        let runtime =
            StoreRuntime::new("gatehouse-store", runtime::worker_threads(), outbox.clone())
                .map_err(|e| OpenError::Connect(Box::new(e)))?;
        let statement_timeout = options.statement_timeout;
        let (url, options) = (url.to_owned(), options.clone());
        let url_for_listener = url.clone();
        let pool = runtime
            .complete(async move {
                if options.migrate {
                    Self::run_migrations(&url).await?;
                }
                let manager = AsyncDieselConnectionManager::<Conn>::new_with_config(
                    url,
                    pool_config(options.statement_timeout),
                );
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
                Ok::<_, OpenError>(pool)
            })
            .await
            .map_err(|e| OpenError::Connect(Box::new(e)))??;
        runtime.spawn_background(listen_for_outbox(url_for_listener, outbox.clone()));
        Ok(Self {
            writer: pool.clone(),
            pool,
            runtime,
            outbox,
            tidy: std::sync::Arc::new(tidy::DeliveryTidy::new(statement_timeout)),
        })
    }

    /// Counts `n` deliveries recorded (their attempts written), and asks for a vacuum of the
    /// deliveries table when enough of them were made since the last one (`tidy`).
    pub(crate) fn deliveries_recorded(&self, n: usize) {
        self.tidy.recorded(n, &self.writer, &self.runtime);
    }

    /// Notified when an operation of this store committed outbox events.
    pub(crate) fn outbox_committed(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.outbox.notify()
    }

    /// Notified when an operation of this store queued mail.
    pub(crate) fn mail_queued(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.outbox.mail()
    }

    /// The one pool's use (reads and writes share it).
    pub(crate) fn pool_use(&self) -> Vec<gatehouse_domain::ports::PoolUse> {
        vec![crate::pool_use("primary", &self.pool)]
    }

    async fn connect(url: &str) -> Result<Conn, OpenError> {
        Conn::establish(url)
            .await
            .map_err(|e| OpenError::Connect(Box::new(e)))
    }

    /// Runs the pending migrations under [`MIGRATION_LOCK`], so that replicas started together
    /// on an empty database run them one at a time: the first applies them, the others wait,
    /// then find nothing pending. The lock is the connection's: it goes with the connection,
    /// should this process die holding it.
    pub(crate) async fn run_migrations(url: &str) -> Result<Vec<String>, OpenError> {
        migrate_with(Self::locked(url).await?, MIGRATIONS, Direction::Up).await
    }

    pub(crate) async fn revert_migrations(url: &str) -> Result<Vec<String>, OpenError> {
        migrate_with(Self::locked(url).await?, MIGRATIONS, Direction::DownAll).await
    }

    /// A connection that holds [`MIGRATION_LOCK`] (waiting for it as long as another holds it).
    async fn locked(url: &str) -> Result<Conn, OpenError> {
        let mut conn = Self::connect(url).await?;
        diesel::sql_query("SELECT pg_advisory_lock($1)")
            .bind::<sql_types::BigInt, _>(MIGRATION_LOCK)
            .execute(&mut conn)
            .await
            .map_err(|e| OpenError::Migrate(Box::new(e)))?;
        Ok(conn)
    }
}

/// The channel on which a transaction that wrote outbox events tells every replica
/// (`Dialect::announce_outbox`).
const OUTBOX_CHANNEL: &str = "gatehouse_outbox";

/// How long the listener waits before it connects again after losing its connection.
const LISTEN_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Wakes this process's dispatcher whenever any process on the database commits outbox events
/// (`LISTEN gatehouse_outbox`), on a connection of its own, outside the pool: a replica then
/// turns another's events into deliveries as soon as they commit, not at its next poll. A lost
/// connection is made again; meanwhile (and always) the dispatcher's poll finds the events.
async fn listen_for_outbox(url: String, outbox: OutboxSignal) {
    loop {
        match listen_once(&url, &outbox).await {
            Ok(()) => tracing::warn!("the connection listening for outbox events closed"),
            Err(error) => tracing::warn!(
                %error,
                "listening for other replicas' outbox events failed; polling until it connects again"
            ),
        }
        // Events may have been committed while nobody listened: look once.
        outbox.wake();
        tokio::time::sleep(LISTEN_RETRY).await;
    }
}

async fn listen_once(url: &str, outbox: &OutboxSignal) -> QueryResult<()> {
    use futures_util::StreamExt as _;
    let mut conn = Conn::establish(url)
        .await
        .map_err(|e| diesel::result::Error::QueryBuilderError(Box::new(e)))?;
    diesel::sql_query(format!("LISTEN {OUTBOX_CHANNEL}"))
        .execute(&mut conn)
        .await?;
    tracing::debug!("listening for outbox events on {OUTBOX_CHANNEL}");
    let mut notifications = std::pin::pin!(conn.notifications_stream());
    while let Some(notification) = notifications.next().await {
        // Another replica's events; this store's own woke its dispatcher when they committed.
        if notification?.payload != outbox.tag() {
            outbox.wake();
        }
    }
    Ok(())
}

/// A delivery that may be leased, its endpoint and its organization.
#[derive(QueryableByName)]
struct Candidate {
    #[diesel(sql_type = sql_types::Uuid)]
    id: DbUuid,
    #[diesel(sql_type = sql_types::Uuid)]
    endpoint_id: DbUuid,
    #[diesel(sql_type = sql_types::Uuid)]
    organization_id: DbUuid,
}
