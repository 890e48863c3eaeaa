//! Clients that hang up mid-request break nothing. The `gatehouse` binary is sent requests that
//! reach the store, and the clients reset their connections while the store works on them:
//!
//! 1. While a test connection holds the database's write lock, requests authenticated with an
//!    API key wait in the store (the key's `last_used_at` update cannot get the lock), and
//!    their clients hang up then: the store calls are abandoned in the middle, every time.
//! 2. Then a storm of reads, writes and logins, each reset at its own moment.
//!
//! Afterwards `/readyz` answers, every worker serves, and the server's log holds no panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

use std::time::Duration;

use diesel::{connection::SimpleConnection, Connection, SqliteConnection};
use gatehouse_testkit::TestDatabase;
use serde_json::{json, Value};
use served::{gatehouse, Served};
use tokio::{io::AsyncWriteExt, net::TcpStream};

const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const PASSWORD: &str = "hang up on me";

/// Requests of each kind in the storm.
const ROUNDS: u32 = 100;

fn command(dir: &tempfile::TempDir, database_url: &str) -> std::process::Command {
    let mut command = gatehouse(dir);
    command
        .env("GATEHOUSE_DATABASE_URL", database_url)
        .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
        .env("GATEHOUSE_RATE_LIMITS", "free=1000000")
        // Few connections, so that one lost to an abandoned request would show.
        .env("GATEHOUSE_DB_POOL_SIZE", "2")
        .env("GATEHOUSE_LOG", "warn,gatehouse_server::app=info");
    command
}

/// The database's write lock, held by a connection of the test's own.
enum WriteLock {
    /// `BEGIN IMMEDIATE`: no other connection writes until it ends (readers go on, WAL).
    Sqlite(SqliteConnection),
    /// `LOCK TABLE api_keys IN EXCLUSIVE MODE`: reads go on, updates of API keys wait.
    Postgres(tokio_postgres::Client),
}

impl WriteLock {
    async fn take(database_url: &str) -> Self {
        if let Some(path) = database_url.strip_prefix("sqlite://") {
            let mut conn = SqliteConnection::establish(path).unwrap();
            conn.batch_execute("BEGIN IMMEDIATE").unwrap();
            Self::Sqlite(conn)
        } else {
            let (client, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            client
                .batch_execute("BEGIN; LOCK TABLE api_keys IN EXCLUSIVE MODE")
                .await
                .unwrap();
            Self::Postgres(client)
        }
    }

    async fn release(self) {
        match self {
            Self::Sqlite(mut conn) => conn.batch_execute("ROLLBACK").unwrap(),
            Self::Postgres(client) => client.batch_execute("ROLLBACK").await.unwrap(),
        }
    }
}

/// A request as it goes on the wire.
fn raw(method: &str, path: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Vec<u8> {
    let body = body.map(ToString::to_string).unwrap_or_default();
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    format!(
        "{method} {path} HTTP/1.1\r\nHost: gatehouse.test\r\n{headers}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends the request (or, when `partial`, only its first half), waits, then resets the
/// connection without reading a byte of the answer.
async fn hang_up(address: String, request: Vec<u8>, after: Duration, partial: bool) {
    let Ok(mut stream) = TcpStream::connect(&address).await else {
        return;
    };
    let sent = if partial {
        &request[..request.len() / 2]
    } else {
        &request[..]
    };
    let _ = stream.write_all(sent).await;
    tokio::time::sleep(after).await;
    // RST rather than FIN: the server's next read fails at once, and it drops the request.
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// The JSON body of a successful answer.
async fn answer(request: reqwest::RequestBuilder) -> Value {
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

async fn hang_ups_break_nothing(database_url: String) {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start_with(command(&dir, &database_url));
    let base = served.base.clone();
    let address = base.trim_start_matches("http://").to_owned();
    let client = reqwest::Client::new();

    let email = "hangup@example.com";
    let registered = client
        .post(format!("{base}/api/v1/auth/register"))
        .json(&json!({ "email": email, "password": PASSWORD, "full_name": "Hang Up" }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    let session = answer(
        client
            .post(format!("{base}/api/v1/auth/login"))
            .json(&json!({ "email": email, "password": PASSWORD })),
    )
    .await;
    let token = session["access_token"].as_str().unwrap().to_owned();
    let bearer = format!("Bearer {token}");
    let organizations = answer(
        client
            .get(format!("{base}/api/v1/organizations"))
            .bearer_auth(&token),
    )
    .await;
    let organization_id = organizations["items"][0]["id"].as_str().unwrap().to_owned();
    let created = answer(
        client
            .post(format!("{base}/api/v1/api-keys"))
            .bearer_auth(&token)
            .json(&json!({ "name": "hang-up", "organization_id": organization_id })),
    )
    .await;
    let api_key = created["key"].as_str().unwrap().to_owned();

    // 1. Requests stuck in the store, abandoned there.
    let lock = WriteLock::take(&database_url).await;
    let stuck = raw(
        "GET",
        "/api/v1/health",
        &[
            ("X-API-Key", &api_key),
            ("X-Organization-ID", &organization_id),
        ],
        None,
    );
    let abandoned: Vec<_> = (0..24)
        .map(|_| {
            tokio::spawn(hang_up(
                address.clone(),
                stuck.clone(),
                Duration::from_millis(300),
                false,
            ))
        })
        .collect();
    for task in abandoned {
        task.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    lock.release().await;

    // 2. A storm, each request reset at its own moment.
    let kinds = [
        raw(
            "GET",
            "/api/v1/users/me",
            &[("Authorization", &bearer)],
            None,
        ),
        raw(
            "GET",
            "/api/v1/organizations",
            &[("Authorization", &bearer)],
            None,
        ),
        raw(
            "POST",
            "/api/v1/organizations",
            &[("Authorization", &bearer)],
            Some(&json!({ "name": "Abandoned Team" })),
        ),
        raw(
            "POST",
            "/api/v1/auth/login",
            &[],
            Some(&json!({ "email": email, "password": PASSWORD })),
        ),
        raw("GET", "/readyz", &[], None),
    ];
    let mut abandoned = Vec::new();
    for round in 0..ROUNDS {
        for (i, request) in kinds.iter().enumerate() {
            let n = round * kinds.len() as u32 + i as u32;
            // Spread over 0 to 30 ms, in no particular order.
            let after = Duration::from_micros(u64::from(n.wrapping_mul(7919) % 300) * 100);
            abandoned.push(tokio::spawn(hang_up(
                address.clone(),
                request.clone(),
                after,
                n.is_multiple_of(11),
            )));
        }
    }
    for task in abandoned {
        task.await.unwrap();
    }

    // Ready, and every worker serves: more keep-alive connections than workers, each asked
    // several times, all answered in time, with the API key too.
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200, "{:?}", ready.text().await);
    let mut checks = Vec::new();
    for _ in 0..8 {
        let (base, token) = (base.clone(), token.clone());
        let (api_key, organization_id) = (api_key.clone(), organization_id.clone());
        checks.push(tokio::spawn(async move {
            // A client of its own: its own connection.
            let client = reqwest::Client::new();
            for _ in 0..5 {
                let me = client
                    .get(format!("{base}/api/v1/users/me"))
                    .bearer_auth(&token)
                    .timeout(Duration::from_secs(20))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(me.status(), 200);
                let health = client
                    .get(format!("{base}/api/v1/health"))
                    .header("X-API-Key", &api_key)
                    .header("X-Organization-ID", &organization_id)
                    .timeout(Duration::from_secs(20))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(health.status(), 200);
            }
        }));
    }
    for check in checks {
        check.await.unwrap();
    }

    let logs = served.stop();
    let panics: Vec<&String> = logs
        .iter()
        .filter(|line| line.contains("panicked"))
        .collect();
    assert!(panics.is_empty(), "the server panicked: {panics:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ups_break_nothing_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    hang_ups_break_nothing(gatehouse_testkit::sqlite_url(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_ups_break_nothing_on_postgres() {
    let database = TestDatabase::create().await;
    hang_ups_break_nothing(database.url().to_owned()).await;
}
