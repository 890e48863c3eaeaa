//! `just bench-listings`: does a listing answer its deepest page of a 100,000-row collection
//! within 20 ms at p99 (docs/operations.md, "Listings")?
//!
//! ```text
//! cargo bench -p gatehouse-store --bench listing_page -- [--backend sqlite|postgres|both]
//!     [--rows N] [--runs N] [--without-listing-indexes]
//! ```
//!
//! For each backend: a fresh database (a SQLite file in a temporary directory, or a throwaway
//! PostgreSQL database from `gatehouse-testkit`, dropped at the end), migrated by the store's
//! own migrations; one team created through the store, then `--rows` users (100,000 by
//! default) made its members, and `--rows` audit records of the team, with a tenth as many of
//! another organization's beside them, loaded in multi-row `INSERT`s of 1,000 rows (a few
//! seconds). The rows are in the store's column forms: pages are read back through the store and
//! compared with what was generated before anything is timed.
//!
//! Then each case is timed through the store's port (`MemberStore::members`,
//! `AuditStore::audit_log`), `--runs` times (200; the search every member matches, 20)
//! after 5 warm-up calls, pages of 100 (the
//! API's most): page 1, the middle page (the one that walks furthest: a page in the second half
//! is read backward from the end), the deepest page (the last), and page 4294967295
//! (`u32::MAX`, past the end), printing p50 and p99. Last come the plans of the statements,
//! written here as the store writes them (literals for its bound values): SQLite's
//! `EXPLAIN QUERY PLAN`, PostgreSQL's `EXPLAIN (ANALYZE, BUFFERS)` after `VACUUM (ANALYZE)`.
//!
//! `--without-listing-indexes` runs migration 31's `down.sql` (the indexes of the listings) on
//! the bench's own database before loading it: the figures as they were before that migration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use diesel::{sql_types::Text, sqlite::SqliteConnection, QueryableByName};
use diesel_async::{
    sync_connection_wrapper::SyncConnectionWrapper, AsyncConnection, AsyncPgConnection,
    RunQueryDsl, SimpleAsyncConnection,
};
use gatehouse_domain::model::{
    AuditFilter, MemberFilter, OrganizationId, PageRequest, Plan, Role, SearchTerm,
};
use gatehouse_store::{Backend, Store};
use time::{
    macros::{datetime, format_description},
    OffsetDateTime, UtcOffset,
};
use uuid::Uuid;

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/support/mod.rs"]
mod support;

const DEFAULT_ROWS: u64 = 100_000;
const ROWS_PER_INSERT: u64 = 1_000;
const WARM_UP: usize = 5;
/// Timed calls of the search that every member matches (it counts them all).
const SEARCH_RUNS: usize = 20;
/// A term in every generated member's address.
const EVERY_MEMBER: &str = "example";
/// A term in one generated member's address alone.
const ONE_MEMBER: &str = "member4242@";
/// A term in no member's name or address (the issue's aggressor's).
const NO_MEMBER: &str = "zzqx";
const START: OffsetDateTime = datetime!(2025-11-26 00:00:00 UTC);
const SEED: u64 = 0x6c69_7374_696e_6773;

const POSTGRES_DOWN: &str =
    include_str!("../../../migrations/postgres/2026-11-26-000031_listing_indexes/down.sql");
const SQLITE_DOWN: &str =
    include_str!("../../../migrations/sqlite/2026-11-26-000031_listing_indexes/down.sql");

struct Options {
    backends: Vec<Backend>,
    rows: u64,
    runs: usize,
    without_listing_indexes: bool,
}

fn main() {
    let options = parse_args();
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "# Listings: the deepest page of {} rows\n\n- date: {}\n- machine: {} cores\n- pages \
         of {}; {} timed calls after {WARM_UP} warm-up calls, through the store's ports{}",
        thousands(options.rows),
        OffsetDateTime::now_utc()
            .format(format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
            ))
            .unwrap(),
        std::thread::available_parallelism().map_or(1, usize::from),
        PageRequest::MAX_SIZE,
        options.runs,
        if options.without_listing_indexes {
            "\n- WITHOUT migration 31's listing indexes"
        } else {
            ""
        },
    );
    for &backend in &options.backends {
        print!("{}", runtime.block_on(run_backend(backend, &options)));
    }
    println!(
        "\nTotal wall time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

fn parse_args() -> Options {
    let usage = "usage: listing_page [--backend sqlite|postgres|both] [--rows N] [--runs N] \
                 [--without-listing-indexes]";
    let mut options = Options {
        backends: vec![Backend::Sqlite, Backend::Postgres],
        rows: DEFAULT_ROWS,
        runs: 200,
        without_listing_indexes: false,
    };
    let mut args = std::env::args().skip(1);
    let fail = |message: String| -> ! {
        eprintln!("{message}\n{usage}");
        std::process::exit(2)
    };
    while let Some(arg) = args.next() {
        let mut number = |flag: &str| -> u64 {
            args.next()
                .and_then(|v| v.replace('_', "").parse().ok())
                .filter(|n: &u64| *n > 0)
                .unwrap_or_else(|| fail(format!("{flag} takes a whole number above 0")))
        };
        match arg.as_str() {
            // `cargo bench` passes this to every bench binary.
            "--bench" => {}
            "--backend" => {
                options.backends = match args.next().as_deref() {
                    Some("sqlite") => vec![Backend::Sqlite],
                    Some("postgres") => vec![Backend::Postgres],
                    Some("both") => vec![Backend::Sqlite, Backend::Postgres],
                    other => fail(format!("unknown backend {other:?}")),
                }
            }
            "--rows" => options.rows = number("--rows"),
            "--runs" => options.runs = usize::try_from(number("--runs")).unwrap_or(usize::MAX),
            "--without-listing-indexes" => options.without_listing_indexes = true,
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0)
            }
            other => fail(format!("unknown argument {other:?}")),
        }
    }
    options
}

// ------------------------------------------------------------------------------------------
// The rows.

/// splitmix64: small, fast and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uuid(&mut self) -> Uuid {
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&self.next().to_le_bytes());
        bytes[8..].copy_from_slice(&self.next().to_le_bytes());
        uuid::Builder::from_random_bytes(bytes).into_uuid()
    }
}

/// The store's text form of a moment on SQLite (diesel's, for `TimestamptzSqlite`), compared as
/// text there; PostgreSQL reads it as a `timestamptz`.
fn moment(at: OffsetDateTime) -> String {
    at.to_offset(UtcOffset::UTC)
        .format(format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
        ))
        .unwrap()
}

/// The `i`th generated member (`i` from 0): joined `i` seconds after `START`.
struct Generated {
    users: Vec<Uuid>,
    /// The team's audit records' ids, oldest first.
    records: Vec<Uuid>,
}

/// A member's role: mostly members, a tenth viewers, one in fifty admins.
fn role_of(i: u64) -> Role {
    if i.is_multiple_of(50) {
        Role::Admin
    } else if i.is_multiple_of(10) {
        Role::Viewer
    } else {
        Role::Member
    }
}

fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// Multi-row `INSERT`s of `rows` rows, `ROWS_PER_INSERT` a statement, in one transaction.
fn inserts(table_and_columns: &str, rows: impl Iterator<Item = String>) -> String {
    let mut sql = String::from("BEGIN;\n");
    for (i, row) in rows.enumerate() {
        if (i as u64).is_multiple_of(ROWS_PER_INSERT) {
            if i > 0 {
                sql.push_str(";\n");
            }
            let _ = write!(sql, "INSERT INTO {table_and_columns} VALUES\n{row}");
        } else {
            let _ = write!(sql, ",\n{row}");
        }
    }
    sql.push_str(";\nCOMMIT;\n");
    sql
}

async fn load(raw: &mut Raw, team: OrganizationId, owner: Uuid, rows: u64) -> Generated {
    let mut rng = Rng(SEED);
    let team = team.as_uuid().to_string();
    let other = rng.uuid().to_string();
    let users: Vec<Uuid> = (0..rows).map(|_| rng.uuid()).collect();
    let at = |seconds: u64| moment(START + Duration::from_secs(seconds));
    raw.run_sql(&inserts(
        "users (id, email, full_name, password_hash, password_changed_at, created_at, \
         updated_at)",
        users.iter().enumerate().map(|(i, id)| {
            format!(
                "({}, 'member{i}@example.com', 'Member {i}', '$argon2id$unused', {t}, {t}, {t})",
                quoted(&id.to_string()),
                t = quoted(&at(0)),
            )
        }),
    ))
    .await;
    raw.run_sql(&inserts(
        "memberships (organization_id, user_id, role, created_at, updated_at)",
        users.iter().enumerate().map(|(i, id)| {
            let i = i as u64;
            format!(
                "({}, {}, {}, {t}, {t})",
                quoted(&team),
                quoted(&id.to_string()),
                quoted(role_of(i).as_str()),
                t = quoted(&at(i)),
            )
        }),
    ))
    .await;
    // The team's records, one a second, and a tenth as many of another organization's, in
    // between.
    let records: Vec<Uuid> = (0..rows).map(|_| rng.uuid()).collect();
    let others: Vec<Uuid> = (0..rows / 10).map(|_| rng.uuid()).collect();
    let owner = owner.to_string();
    let record = |id: &Uuid, organization: &str, at: String| {
        format!(
            "({}, {}, 'user', {}, {}, 'member.invited', 'invitation', {}, '192.0.2.1', \
             'curl/8.5.0', NULL, 'success')",
            quoted(&id.to_string()),
            quoted(&at),
            quoted(&owner),
            quoted(organization),
            quoted(&id.to_string()),
        )
    };
    let columns = "audit_log (id, occurred_at, actor_type, actor_id, organization_id, action, \
                   target_type, target_id, ip, user_agent, request_id, outcome)";
    raw.run_sql(&inserts(
        columns,
        records
            .iter()
            .enumerate()
            .map(|(i, id)| record(id, &team, at(i as u64))),
    ))
    .await;
    raw.run_sql(&inserts(
        columns,
        others
            .iter()
            .enumerate()
            .map(|(i, id)| record(id, &other, at(i as u64 * 10 + 5))),
    ))
    .await;
    Generated { users, records }
}

// ------------------------------------------------------------------------------------------
// The cases.

#[derive(Clone, Copy)]
enum Listing {
    Members,
    MembersOfRole(Role),
    /// `search=` with the term: the issue-50 cases are a term no member has and one member's
    /// own address, beside a term every member has.
    MembersSearched(&'static str),
    AuditLog,
}

impl Listing {
    fn name(self) -> String {
        match self {
            Self::Members => "members".into(),
            Self::MembersOfRole(role) => format!("members, role={}", role.as_str()),
            Self::MembersSearched(term) => format!(
                "members, search={term} ({})",
                match term {
                    EVERY_MEMBER => "every one",
                    ONE_MEMBER => "one",
                    _ => "none",
                }
            ),
            Self::AuditLog => "audit log of the organization".into(),
        }
    }

    fn member_filter(self) -> MemberFilter {
        match self {
            Self::MembersOfRole(role) => MemberFilter {
                role: Some(gatehouse_domain::model::RoleRef::BuiltIn(role)),
                ..MemberFilter::default()
            },
            Self::MembersSearched(term) => MemberFilter {
                search: SearchTerm::parse(term).unwrap(),
                ..MemberFilter::default()
            },
            _ => MemberFilter::default(),
        }
    }

    /// The page's items' ids and the total.
    async fn page(
        self,
        store: &dyn Store,
        team: OrganizationId,
        request: PageRequest,
    ) -> (Vec<Uuid>, u64) {
        match self {
            Self::AuditLog => {
                let filter = AuditFilter {
                    organization_id: Some(team),
                    ..AuditFilter::default()
                };
                let page = store.audit_log(filter, request).await.unwrap();
                let ids = page.items().iter().map(|r| r.id).collect();
                (ids, page.total())
            }
            _ => {
                let now = OffsetDateTime::now_utc();
                let page = store
                    .members(team, self.member_filter(), request, now)
                    .await
                    .unwrap();
                let ids = page
                    .items()
                    .iter()
                    .map(|m| m.user_id.map(|u| u.as_uuid()).unwrap_or_default())
                    .collect();
                (ids, page.total())
            }
        }
    }
}

fn request(page: u64) -> PageRequest {
    PageRequest::new(
        Some(i64::try_from(page).unwrap()),
        Some(i64::from(PageRequest::MAX_SIZE)),
    )
    .unwrap()
}

fn last_page(total: u64) -> u64 {
    total.div_ceil(u64::from(PageRequest::MAX_SIZE)).max(1)
}

/// Nearest rank.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

async fn time(
    store: &dyn Store,
    listing: Listing,
    team: OrganizationId,
    page: PageRequest,
    runs: usize,
) -> (Duration, Duration) {
    for _ in 0..WARM_UP {
        std::hint::black_box(listing.page(store, team, page).await);
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        std::hint::black_box(listing.page(store, team, page).await);
        samples.push(started.elapsed());
    }
    samples.sort();
    (percentile(&samples, 0.50), percentile(&samples, 0.99))
}

/// Pages read back through the store (the first, the middle two, the last, one past the end),
/// compared with the rows generated: forward and backward reads alike.
async fn verify(store: &dyn Store, team: OrganizationId, owner: Uuid, generated: &Generated) {
    async fn check(store: &dyn Store, team: OrganizationId, listing: Listing, expected: &[Uuid]) {
        let size = PageRequest::MAX_SIZE as usize;
        let last = last_page(expected.len() as u64);
        let middle = last.div_ceil(2);
        for page in [1, middle, middle + 1, last, last + 1] {
            let (ids, total) = listing.page(store, team, request(page)).await;
            assert_eq!(
                total,
                expected.len() as u64,
                "{}: the total",
                listing.name()
            );
            let from = usize::try_from(page - 1).unwrap() * size;
            let want = &expected[from.min(expected.len())..(from + size).min(expected.len())];
            assert_eq!(ids, want, "{}: page {page}", listing.name());
        }
    }
    // Members, oldest first: the generated ones, then the owner (who joined today).
    let mut members = generated.users.clone();
    members.push(owner);
    check(store, team, Listing::Members, &members).await;
    // Viewers (every tenth but every fiftieth).
    let viewers: Vec<Uuid> = (0..generated.users.len())
        .filter(|i| role_of(*i as u64) == Role::Viewer)
        .map(|i| generated.users[i])
        .collect();
    check(store, team, Listing::MembersOfRole(Role::Viewer), &viewers).await;
    // The searches: every member (the owner is at example.com too), one, none.
    check(
        store,
        team,
        Listing::MembersSearched(EVERY_MEMBER),
        &members,
    )
    .await;
    if let Some(one) = generated.users.get(4242) {
        check(store, team, Listing::MembersSearched(ONE_MEMBER), &[*one]).await;
    }
    check(store, team, Listing::MembersSearched(NO_MEMBER), &[]).await;
    // The audit log, newest first.
    let newest_first: Vec<Uuid> = generated.records.iter().rev().copied().collect();
    check(store, team, Listing::AuditLog, &newest_first).await;
    let (ids, total) = Listing::AuditLog
        .page(store, team, request(u64::from(u32::MAX)))
        .await;
    assert!(
        ids.is_empty() && total == newest_first.len() as u64,
        "a page past the end"
    );
}

async fn run_backend(backend: Backend, options: &Options) -> String {
    let mut out = format!("\n## {}\n\n", backend.as_str());
    let db = support::Db::new(backend).await;
    let mut raw = Raw::open(backend, db.url()).await;
    if options.without_listing_indexes {
        raw.run_sql(match backend {
            Backend::Postgres => POSTGRES_DOWN,
            Backend::Sqlite => SQLITE_DOWN,
        })
        .await;
    }
    let owner = db.registered("owner@example.com").await;
    let team = db.team(owner, "the-team", Plan::Business).await;

    let started = Instant::now();
    let generated = load(&mut raw, team, owner.as_uuid(), options.rows).await;
    let settle = match backend {
        Backend::Postgres => "VACUUM (ANALYZE)",
        Backend::Sqlite => "PRAGMA wal_checkpoint(TRUNCATE)",
    };
    raw.run_sql(settle).await;
    let _ = writeln!(
        out,
        "- load: {} users made members, {} audit records of the organization and {} of another, \
         in {:.1} s (multi-row INSERTs of {}), then `{settle}`",
        thousands(options.rows),
        thousands(options.rows),
        thousands(options.rows / 10),
        started.elapsed().as_secs_f64(),
        thousands(ROWS_PER_INSERT),
    );
    verify(&*db.store, team, owner.as_uuid(), &generated).await;
    out.push_str(
        "- read back: page 1, the middle two, the last and the next of each listing (search \
         aside) equal the rows generated\n",
    );

    out.push_str(
        "\n| listing | total | page 1 | middle page | p50 / p99 ms | deepest page | \
         p50 / p99 ms | page 4294967295 |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let listings = [
        Listing::Members,
        Listing::MembersOfRole(Role::Viewer),
        Listing::MembersSearched(EVERY_MEMBER),
        Listing::MembersSearched(ONE_MEMBER),
        Listing::MembersSearched(NO_MEMBER),
        Listing::AuditLog,
    ];
    for listing in listings {
        let (_, total) = listing.page(&*db.store, team, request(1)).await;
        let deepest = last_page(total);
        let middle = deepest.div_ceil(2);
        let mut cells = Vec::new();
        for page in [1, middle, deepest, u64::from(u32::MAX)] {
            // A search reads every member: a few calls tell its cost.
            let runs = match listing {
                Listing::MembersSearched(EVERY_MEMBER) => options.runs.min(SEARCH_RUNS),
                _ => options.runs,
            };
            let (p50, p99) = time(&*db.store, listing, team, request(page), runs).await;
            cells.push(format!("{} / {}", ms(p50), ms(p99)));
        }
        let line = format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            listing.name(),
            thousands(total),
            cells[0],
            thousands(middle),
            cells[1],
            thousands(deepest),
            cells[2],
            cells[3],
        );
        eprint!("{} {line}", backend.as_str());
        out.push_str(&line);
    }

    let _ = writeln!(
        out,
        "\n<details><summary>{} plans: the count, the middle page's keys, its rows by key \
         (one key shown)</summary>\n\n```text",
        backend.as_str()
    );
    let team_text = quoted(&team.as_uuid().to_string());
    let size = u64::from(PageRequest::MAX_SIZE);
    // The middle page, the one that walks furthest: read forward from the start (a deeper
    // one is read backward from the end).
    let members_offset = (last_page(options.rows + 1).div_ceil(2) - 1) * size;
    let audit_offset = (last_page(options.rows).div_ceil(2) - 1) * size;
    let statements = [
        format!("SELECT COUNT(*) FROM memberships WHERE organization_id = {team_text}"),
        format!(
            "SELECT user_id FROM memberships WHERE organization_id = {team_text} \
             ORDER BY created_at, user_id LIMIT 100 OFFSET {members_offset}"
        ),
        format!(
            "SELECT m.organization_id, m.user_id, u.email, u.full_name, m.role, m.invited_by, \
             m.invited_at, m.created_at FROM memberships m INNER JOIN users u ON m.user_id = u.id \
             WHERE m.organization_id = {team_text} AND m.user_id IN ({})",
            quoted(&generated.users[0].to_string())
        ),
        format!(
            "SELECT COUNT(*) FROM memberships WHERE organization_id = {team_text} \
             AND role = 'viewer'"
        ),
        format!(
            "SELECT user_id FROM memberships WHERE organization_id = {team_text} \
             AND role = 'viewer' ORDER BY created_at DESC, user_id DESC LIMIT 100 OFFSET 0"
        ),
        format!("SELECT COUNT(*) FROM audit_log WHERE organization_id = {team_text}"),
        format!(
            "SELECT id FROM audit_log WHERE organization_id = {team_text} \
             ORDER BY occurred_at DESC, id DESC LIMIT 100 OFFSET {audit_offset}"
        ),
        format!(
            "SELECT * FROM audit_log WHERE id IN ({})",
            quoted(&generated.records[0].to_string())
        ),
    ];
    for sql in statements {
        let _ = writeln!(out, "{sql}");
        for line in raw.plan(&sql).await {
            let _ = writeln!(out, "    {line}");
        }
    }
    out.push_str("```\n\n</details>\n");
    drop(raw);
    drop(db);
    out
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ------------------------------------------------------------------------------------------
// The database, raw: loading, explaining.

/// A connection of the bench's own, next to the store's pools.
enum Raw {
    Postgres(Box<AsyncPgConnection>),
    Sqlite(SyncConnectionWrapper<SqliteConnection>),
}

#[derive(QueryableByName)]
struct SqlitePlanLine {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    id: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    parent: i32,
    #[diesel(sql_type = Text)]
    detail: String,
}

#[derive(QueryableByName)]
struct PostgresPlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

impl Raw {
    async fn open(backend: Backend, url: &str) -> Self {
        match backend {
            Backend::Postgres => {
                Self::Postgres(Box::new(AsyncPgConnection::establish(url).await.unwrap()))
            }
            Backend::Sqlite => {
                let path = url.strip_prefix("sqlite://").unwrap_or(url);
                let mut conn = SyncConnectionWrapper::establish(path).await.unwrap();
                conn.batch_execute("PRAGMA busy_timeout = 5000")
                    .await
                    .unwrap();
                Self::Sqlite(conn)
            }
        }
    }

    async fn run_sql(&mut self, sql: &str) {
        let done = match self {
            Self::Postgres(conn) => conn.batch_execute(sql).await,
            Self::Sqlite(conn) => conn.batch_execute(sql).await,
        };
        if let Err(e) = done {
            let start: String = sql.chars().take(300).collect();
            panic!("{e}: {start}");
        }
    }

    async fn plan(&mut self, sql: &str) -> Vec<String> {
        match self {
            Self::Postgres(conn) => {
                let rows: Vec<PostgresPlanLine> =
                    diesel::sql_query(format!("EXPLAIN (ANALYZE, BUFFERS) {sql}"))
                        .load(&mut **conn)
                        .await
                        .unwrap_or_else(|e| panic!("{e}: {sql}"));
                rows.into_iter().map(|row| row.line).collect()
            }
            Self::Sqlite(conn) => {
                let rows: Vec<SqlitePlanLine> =
                    diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
                        .load(conn)
                        .await
                        .unwrap_or_else(|e| panic!("{e}: {sql}"));
                // Indent each line under its parent, as the sqlite3 shell does.
                let mut depth: Vec<(i32, usize)> = Vec::new();
                rows.into_iter()
                    .map(|row| {
                        let level = depth
                            .iter()
                            .find(|(id, _)| *id == row.parent)
                            .map_or(0, |(_, level)| level + 1);
                        depth.push((row.id, level));
                        format!("{}{}", "  ".repeat(level), row.detail)
                    })
                    .collect()
            }
        }
    }
}
