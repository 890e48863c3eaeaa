//! Test support for Gatehouse: a real PostgreSQL database per test, SQLite URLs, and a relay to
//! Redis that a test breaks ([`RedisRelay`]).
//!
//! # Finding a PostgreSQL server
//!
//! [`postgres_admin_url`] decides, once per test process, which PostgreSQL server the
//! tests use:
//!
//! 1. It reads `GATEHOUSE_TEST_DATABASE_URL` (default
//!    `postgres://postgres@127.0.0.1:5432/postgres`) and tries to connect there (3 s
//!    connect timeout). The URL must name a role that may `CREATE DATABASE`. If the
//!    connection succeeds, that URL is used.
//! 2. If a server answers but refuses the connection (bad password, unknown role, …)
//!    and the URL came from `GATEHOUSE_TEST_DATABASE_URL`, the test panics with the
//!    server's error: an explicitly configured server is never silently replaced.
//! 3. If nothing answers (or the *default* URL is refused), the kit uses a throwaway
//!    cluster of its own: it first looks for one that is already running in
//!    `$TMPDIR/gatehouse-test-pg-*` (left behind by an earlier run) and reuses it;
//!    otherwise it restarts a stopped one found there, or creates a new one with
//!    `initdb --auth=trust -U postgres` and starts it with `pg_ctl` on a free port of
//!    127.0.0.1. `initdb` and `pg_ctl` are looked up on `PATH`, then under
//!    `/usr/lib/postgresql/<version>/bin` (highest version first). PostgreSQL refuses to
//!    run as root, so when the tests run as root the cluster belongs to the `postgres`
//!    user and the binaries run through `runuser -u postgres --` (or `su postgres`).
//!    Processes that start clusters at the same time coordinate through the lock file
//!    `$TMPDIR/gatehouse-test-pg.lock`, so normally only one cluster is created.
//! 4. If no PostgreSQL binaries are found, the test panics with instructions (install
//!    PostgreSQL, e.g. `apt-get install postgresql`, or set
//!    `GATEHOUSE_TEST_DATABASE_URL`). Tests are never skipped silently.
//!
//! The throwaway cluster is **left running** when the tests end (the test process cannot
//! reliably stop it on exit) so that later runs start quickly by reusing it. It runs with
//! `fsync=off`, so it is only fit for tests. To get rid of it:
//!
//! ```text
//! pg_ctl -D /tmp/gatehouse-test-pg-XXXXXX/data stop -m immediate   # as its owner
//! rm -rf /tmp/gatehouse-test-pg-XXXXXX
//! ```
//!
//! Its server log is `/tmp/gatehouse-test-pg-XXXXXX/postgres.log`.
//!
//! # A database per test
//!
//! [`TestDatabase::create`] creates a fresh, empty database named
//! `gatehouse_test_<uuid>` on that server; [`TestDatabase::url`] is a URL for it (the
//! admin URL with the database name replaced). Dropping the [`TestDatabase`] drops the
//! database with `DROP DATABASE … WITH (FORCE)` (PostgreSQL 13 or later), which also ends
//! connections still open to it. Dropping blocks briefly on a helper thread, so it works
//! both inside and outside a Tokio runtime.
//!
//! ```no_run
//! # async fn demo() {
//! let db = gatehouse_testkit::TestDatabase::create().await;
//! let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
//!     .await
//!     .unwrap();
//! tokio::spawn(connection);
//! client.batch_execute("CREATE TABLE t (id int)").await.unwrap();
//! # }
//! ```
//!
//! # SQLite
//!
//! [`sqlite_url`] gives the `sqlite:///abs/path/gatehouse.db` URL of a database file in a
//! temporary directory.

use std::time::Duration;

use tokio::sync::OnceCell;
use tokio_postgres::{Client, NoTls};

mod cluster;
mod redis_relay;
pub mod saml_idp;
pub mod smtp;

pub use redis_relay::RedisRelay;

/// Environment variable naming the PostgreSQL server the tests use.
pub const DATABASE_URL_ENV: &str = "GATEHOUSE_TEST_DATABASE_URL";

/// The server tried when [`DATABASE_URL_ENV`] is not set.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// How long a connection attempt may take before the server counts as not answering.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

static ADMIN_URL: OnceCell<String> = OnceCell::const_new();

/// The URL of the PostgreSQL server the tests use, as a role allowed to create
/// databases.
///
/// Decided once per process; see the [crate documentation](crate) for how. Panics with
/// an explanation if no server can be found or started.
pub async fn postgres_admin_url() -> String {
    ADMIN_URL.get_or_init(resolve_admin_url).await.clone()
}

async fn resolve_admin_url() -> String {
    let (url, explicit) = match std::env::var(DATABASE_URL_ENV) {
        Ok(url) if !url.trim().is_empty() => (url.trim().to_owned(), true),
        _ => (DEFAULT_DATABASE_URL.to_owned(), false),
    };
    match probe(&url).await {
        Probe::Connected => url,
        Probe::Refused(error) if explicit => panic!(
            "gatehouse-testkit: the PostgreSQL server at {url} (from {DATABASE_URL_ENV}) \
             refused the connection: {error}\n\
             Fix {DATABASE_URL_ENV} so that it names a role that can log in and \
             CREATE DATABASE, or unset it (to use {DEFAULT_DATABASE_URL}, or failing \
             that a throwaway local cluster)."
        ),
        Probe::Refused(error) => {
            let reason = format!("the server there refused the connection: {error}");
            cluster::throwaway_cluster_url(&url, &reason).await
        }
        Probe::NoAnswer(error) => {
            let reason = format!("nothing answered: {error}");
            cluster::throwaway_cluster_url(&url, &reason).await
        }
    }
}

/// Outcome of trying to connect to a server.
pub(crate) enum Probe {
    Connected,
    /// The server answered, with an error (authentication, unknown database, …).
    Refused(String),
    /// Nothing answered (refused TCP connection, timeout, no such socket, …).
    NoAnswer(String),
}

pub(crate) async fn probe(url: &str) -> Probe {
    let mut config: tokio_postgres::Config = url.parse().unwrap_or_else(|e| {
        panic!("gatehouse-testkit: {url} is not a valid PostgreSQL connection string: {e}")
    });
    config.connect_timeout(CONNECT_TIMEOUT);
    match tokio::time::timeout(CONNECT_TIMEOUT * 2, config.connect(NoTls)).await {
        Ok(Ok((client, connection))) => {
            // Dropping the client makes the connection say goodbye and finish.
            drop(client);
            let _ = connection.await;
            Probe::Connected
        }
        Ok(Err(e)) if e.as_db_error().is_some() => Probe::Refused(error_chain(&e)),
        Ok(Err(e)) => Probe::NoAnswer(error_chain(&e)),
        Err(_elapsed) => Probe::NoAnswer(format!("no answer within {:?}", CONNECT_TIMEOUT * 2)),
    }
}

/// `error` and its sources, as one line (tokio-postgres' own message is often just
/// "error connecting to server").
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_message = cause.to_string();
        if !message.ends_with(&cause_message) {
            message.push_str(": ");
            message.push_str(&cause_message);
        }
        source = cause.source();
    }
    message
}

/// Connects, driving the connection on a spawned Tokio task.
async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    config.connect_timeout(CONNECT_TIMEOUT);
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A fresh PostgreSQL database that is dropped again when this value is dropped.
///
/// See the [crate documentation](crate).
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    name: String,
    admin_url: String,
}

impl TestDatabase {
    /// Creates a new, empty database `gatehouse_test_<uuid>` on the server of
    /// [`postgres_admin_url`].
    ///
    /// Must be called within a Tokio runtime. Panics with a clear message if the database
    /// cannot be created.
    pub async fn create() -> TestDatabase {
        let admin_url = postgres_admin_url().await;
        let name = format!("gatehouse_test_{}", uuid::Uuid::new_v4().simple());
        let client = connect(&admin_url).await.unwrap_or_else(|e| {
            panic!(
                "gatehouse-testkit: cannot connect to the test server {admin_url}: {}",
                error_chain(&e)
            )
        });
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "gatehouse-testkit: CREATE DATABASE {name} on {admin_url} failed: {}",
                    error_chain(&e)
                )
            });
        TestDatabase {
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        }
    }

    /// A connection URL for this database: the admin URL's host, port, user, password
    /// and parameters, with this database's name.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name, `gatehouse_test_<uuid>`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of the server's maintenance database, as used to create this one.
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop may run inside a runtime (where blocking on another future is not
        // allowed), so do the async work on a thread of its own.
        let spawned = std::thread::Builder::new()
            .name("gatehouse-testkit-drop-db".to_owned())
            .spawn(move || drop_database(&admin_url, &name));
        let outcome = match spawned {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err("the helper thread panicked".to_owned())),
            Err(e) => Err(format!("cannot start a helper thread: {e}")),
        };
        if let Err(e) = outcome {
            eprintln!(
                "gatehouse-testkit: warning: could not drop test database {}: {e}",
                self.name
            );
        }
    }
}

fn drop_database(admin_url: &str, name: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot build a Tokio runtime: {e}"))?;
    runtime.block_on(async {
        let work = async {
            let client = connect(admin_url).await?;
            client
                .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                .await
        };
        match tokio::time::timeout(Duration::from_secs(30), work).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(error_chain(&e)),
            Err(_elapsed) => Err("timed out".to_owned()),
        }
    })
}

/// `url` with its database name replaced by `database`.
///
/// Handles both URL (`postgres://user:pw@host:port/db?param=value`, where a `dbname`
/// parameter would override the path and is therefore removed) and `key=value`
/// connection strings (where a later `dbname` overrides an earlier one). The URL is split
/// the way `tokio-postgres` splits it.
fn with_database(url: &str, database: &str) -> String {
    let Some((scheme, rest)) = ["postgres://", "postgresql://"]
        .iter()
        .find_map(|prefix| url.strip_prefix(prefix).map(|rest| (*prefix, rest)))
    else {
        return format!("{url} dbname={database}");
    };
    let (credentials, rest) = match rest.find('@') {
        Some(at) => rest.split_at(at + 1),
        None => ("", rest),
    };
    let (host, rest) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let params: Vec<&str> = match rest.split_once('?') {
        Some((_path, query)) => query
            .split('&')
            .filter(|param| !param.is_empty())
            .filter(|param| param.split('=').next() != Some("dbname"))
            .collect(),
        None => Vec::new(),
    };
    let mut rebuilt = format!("{scheme}{credentials}{host}/{database}");
    if !params.is_empty() {
        rebuilt.push('?');
        rebuilt.push_str(&params.join("&"));
    }
    rebuilt
}

/// The URL of a SQLite database file `gatehouse.db` in `dir`, in the project's
/// convention: `sqlite:///abs/path/gatehouse.db` (three slashes: `sqlite://` and the
/// absolute path).
pub fn sqlite_url(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("gatehouse.db");
    let path = std::path::absolute(&path).unwrap_or(path);
    format!("sqlite://{}", path.display())
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_the_path() {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:5432/postgres", "x"),
            "postgres://postgres@127.0.0.1:5432/x"
        );
        assert_eq!(
            with_database("postgresql://u:p%40ss@db.example:6543/", "x"),
            "postgresql://u:p%40ss@db.example:6543/x"
        );
    }

    #[test]
    fn adds_a_missing_path() {
        assert_eq!(
            with_database("postgres://localhost", "x"),
            "postgres://localhost/x"
        );
        assert_eq!(
            with_database("postgres://u@h1:1,h2:2?sslmode=disable", "x"),
            "postgres://u@h1:1,h2:2/x?sslmode=disable"
        );
    }

    #[test]
    fn keeps_parameters_but_drops_dbname() {
        assert_eq!(
            with_database(
                "postgres://u@localhost:5432/postgres?sslmode=disable&dbname=other&application_name=a",
                "x"
            ),
            "postgres://u@localhost:5432/x?sslmode=disable&application_name=a"
        );
        assert_eq!(
            with_database("postgres://u@localhost/postgres?dbname=other", "x"),
            "postgres://u@localhost/x"
        );
        assert_eq!(
            with_database(
                "postgres://%2Fvar%2Frun%2Fpostgresql/postgres?user=postgres",
                "x"
            ),
            "postgres://%2Fvar%2Frun%2Fpostgresql/x?user=postgres"
        );
    }

    #[test]
    fn key_value_strings_get_a_later_dbname() {
        assert_eq!(
            with_database("host=localhost user=postgres dbname=postgres", "x"),
            "host=localhost user=postgres dbname=postgres dbname=x"
        );
        let config: tokio_postgres::Config = with_database("host=localhost dbname=postgres", "x")
            .parse()
            .unwrap();
        assert_eq!(config.get_dbname(), Some("x"));
    }

    #[test]
    fn rebuilt_urls_parse_to_the_same_server() {
        let admin = "postgres://u:secret@localhost:5433/postgres?application_name=t";
        let original: tokio_postgres::Config = admin.parse().unwrap();
        let rebuilt: tokio_postgres::Config = with_database(admin, "x").parse().unwrap();
        assert_eq!(rebuilt.get_dbname(), Some("x"));
        assert_eq!(rebuilt.get_user(), original.get_user());
        assert_eq!(rebuilt.get_password(), original.get_password());
        assert_eq!(rebuilt.get_hosts(), original.get_hosts());
        assert_eq!(rebuilt.get_ports(), original.get_ports());
        assert_eq!(rebuilt.get_application_name(), Some("t"));
    }
}
