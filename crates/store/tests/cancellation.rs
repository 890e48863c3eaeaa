//! Any store call may be abandoned: a client hangs up, a timeout fires, a `select!` takes the
//! other branch, a `try_join!` loses a sibling. Nothing may break when that happens: no panic, no
//! connection lost from the pool, no half-written change, no wedged writer queue.
//!
//! actix-web runs every request on a worker's *current-thread* runtime, and the store is opened
//! on another runtime (the server's main one). The tests below do the same: each backend's store
//! is opened on a multi-threaded runtime and called, then abandoned, from current-thread
//! runtimes of their own; one of those is even shut down with operations in flight, as a worker
//! that dies takes its tasks with it. A panic in any of it fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code, unused_macros, unused_imports)]
mod support;

use std::{future::Future, sync::Arc, time::Duration};

use gatehouse_domain::{model::Email, ports::StoreError};
use gatehouse_store::{Backend, Store, StoreOptions};
use gatehouse_test_macros::on_both_backends;
use support::{account, EmptyDatabase};
use tokio::runtime::Runtime;

/// How long a store that works answers in, at the most, in these tests.
const ANSWERS_WITHIN: Duration = Duration::from_secs(20);

/// A database and a store with a deliberately small pool (two connections), so that a single
/// connection lost to an abandoned call shows.
struct Fixture {
    store: Arc<dyn Store>,
    database: EmptyDatabase,
    /// Where the store was opened, as the server's main runtime.
    main: Runtime,
}

impl Fixture {
    fn postgres() -> Self {
        Self::new(Backend::Postgres)
    }

    fn sqlite() -> Self {
        Self::new(Backend::Sqlite)
    }

    fn new(backend: Backend) -> Self {
        let main = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (store, database) = main.block_on(async {
            let database = EmptyDatabase::new(backend).await;
            let options = StoreOptions {
                max_connections: 2,
                migrate: true,
                ..StoreOptions::default()
            };
            let store = gatehouse_store::open(&database.url, &options)
                .await
                .unwrap();
            (store, database)
        });
        Self {
            store,
            database,
            main,
        }
    }

    /// Runs the future on a fresh current-thread runtime, as an actix-web worker would.
    fn on_worker<T>(&self, future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(future)
    }

    /// The store still answers: `rounds` times as many calls as the pool has connections,
    /// each within [`ANSWERS_WITHIN`], reads and a write among them.
    fn still_serves(&self, rounds: usize) {
        let store = self.store.clone();
        self.main.block_on(async move {
            for round in 0..rounds {
                let email = format!("after-{round}-{}@example.com", uuid::Uuid::new_v4());
                let written = tokio::time::timeout(
                    ANSWERS_WITHIN,
                    store.create_account(account(&email, "After"), support::signed_in()),
                )
                .await;
                assert!(matches!(written, Ok(Ok(()))), "a write after: {written:?}");
                for _ in 0..4 {
                    let read = tokio::time::timeout(
                        ANSWERS_WITHIN,
                        store.credentials_by_email(&Email::parse(&email).unwrap()),
                    )
                    .await;
                    assert!(
                        matches!(read, Ok(Ok(Some(_)))),
                        "a read after: {}",
                        describe(&read)
                    );
                }
            }
        });
    }

    /// Waits until every account the emails name is either whole (the user, the workspace and
    /// both events) or absent, and returns how many are whole.
    fn whole_or_absent(&self, emails: &[String]) -> usize {
        let mut whole = 0;
        for email in emails {
            let users = self.main.block_on(self.database.count(&format!(
                "SELECT COUNT(*) AS n FROM users WHERE email = '{email}'"
            )));
            let workspaces = self.main.block_on(self.database.count(&format!(
                "SELECT COUNT(*) AS n FROM organizations AS o \
                 JOIN memberships AS m ON m.organization_id = o.id \
                 JOIN users AS u ON u.id = m.user_id WHERE u.email = '{email}'"
            )));
            let events = self.main.block_on(self.database.count(&format!(
                "SELECT COUNT(*) AS n FROM events AS e JOIN users AS u \
                 ON u.id = e.user_id WHERE u.email = '{email}'"
            )));
            assert!(
                (users, workspaces, events) == (0, 0, 0) || (users, workspaces, events) == (1, 1, 2),
                "{email}: {users} user(s), {workspaces} workspace(s), {events} event(s): half written"
            );
            whole += usize::try_from(users).unwrap();
        }
        whole
    }
}

fn describe<T, E: std::fmt::Debug>(
    result: &Result<Result<T, E>, tokio::time::error::Elapsed>,
) -> String {
    match result {
        Ok(Ok(_)) => "answered".into(),
        Ok(Err(error)) => format!("failed: {error:?}"),
        Err(_) => format!("no answer within {ANSWERS_WITHIN:?}"),
    }
}

/// Drops the future after `after` (polling it at least once), as a hung-up client does.
async fn abandon<T>(future: impl Future<Output = T>, after: Duration) {
    let _ = tokio::time::timeout(after, future).await;
}

/// The delays after which calls are abandoned: from "at the first await" to well into the
/// query, so that every point of a call's life is hit.
fn delays(count: u32) -> impl Iterator<Item = Duration> {
    (0..count).map(|i| Duration::from_micros(u64::from(i % 40) * 25))
}

#[on_both_backends]
fn reads_abandoned_mid_flight_on_a_worker_runtime(fixture: Fixture) {
    let email = "reader@example.com";
    fixture
        .main
        .block_on(
            fixture
                .store
                .create_account(account(email, "Reader"), support::signed_in()),
        )
        .unwrap();
    let parsed = Email::parse(email).unwrap();
    fixture.on_worker(async {
        for delay in delays(400) {
            abandon(fixture.store.credentials_by_email(&parsed), delay).await;
        }
        // Many at once, abandoned together (a `try_join!` whose sibling failed).
        for _ in 0..20 {
            let calls = (0..8).map(|_| fixture.store.credentials_by_email(&parsed));
            abandon(futures::future::join_all(calls), Duration::from_micros(300)).await;
        }
    });
    fixture.still_serves(4);
}

#[on_both_backends]
fn writes_abandoned_mid_flight_are_whole_or_absent(fixture: Fixture) {
    let emails: Vec<String> = (0..120)
        .map(|i| format!("writer-{i}@example.com"))
        .collect();
    fixture.on_worker(async {
        for (email, delay) in emails.iter().zip(delays(120)) {
            abandon(
                fixture
                    .store
                    .create_account(account(email, "Writer"), support::signed_in()),
                delay,
            )
            .await;
        }
    });
    // Whatever was started finishes or never happened; give the finished ones their time.
    fixture.still_serves(2);
    fixture.whole_or_absent(&emails);
}

#[on_both_backends]
fn the_writer_queue_survives_abandoned_waiters(fixture: Fixture) {
    // Forty writers queue for the one writer connection (SQLite) or the small pool; all
    // of them are abandoned while queued or running.
    let emails: Vec<String> = (0..40).map(|i| format!("queued-{i}@example.com")).collect();
    fixture.on_worker(async {
        let writes = emails.iter().map(|email| {
            fixture
                .store
                .create_account(account(email, "Queued"), support::signed_in())
        });
        abandon(futures::future::join_all(writes), Duration::from_millis(5)).await;
    });
    fixture.still_serves(4);
    fixture.whole_or_absent(&emails);
}

#[on_both_backends]
fn a_worker_runtime_that_dies_mid_flight_leaves_the_store_working(fixture: Fixture) {
    // The calls run as tasks of a worker runtime that is shut down under them: its tasks
    // are dropped wherever they are, and the connections they opened must stay usable.
    let emails: Vec<String> = (0..30).map(|i| format!("dying-{i}@example.com")).collect();
    let worker = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    worker.block_on(async {
        for email in &emails {
            let store = fixture.store.clone();
            let new = account(email, "Dying");
            tokio::spawn(async move { store.create_account(new, support::signed_in()).await });
            let store = fixture.store.clone();
            let parsed = Email::parse(email).unwrap();
            tokio::spawn(async move { store.credentials_by_email(&parsed).await });
        }
        tokio::task::yield_now().await;
    });
    worker.shutdown_timeout(Duration::from_millis(1));
    fixture.still_serves(4);
    fixture.whole_or_absent(&emails);
}

#[on_both_backends]
fn an_abandoned_call_never_leaks_a_pooled_connection(fixture: Fixture) {
    // Far more abandoned calls than connections, then as many sequential calls as there
    // were abandoned ones: each would wait forever on a lost connection.
    fixture.on_worker(async {
        for delay in delays(200) {
            let _: Result<Result<_, StoreError>, _> =
                tokio::time::timeout(delay, fixture.store.ping()).await;
        }
    });
    let store = fixture.store.clone();
    fixture.main.block_on(async move {
        for _ in 0..200 {
            let answered = tokio::time::timeout(ANSWERS_WITHIN, store.ping()).await;
            assert!(matches!(answered, Ok(Ok(()))), "{}", describe(&answered));
        }
    });
}

/// On SQLite an operation runs in its caller's task and, once it holds a connection, never
/// yields until it has committed or rolled back (`src/sqlite/inline.rs`): with a connection
/// free, a single poll finishes a write transaction and a read. That is why abandoning one
/// there can never stop it halfway.
#[test]
fn sqlite_operations_finish_within_the_poll_that_starts_them() {
    let fixture = Fixture::new(Backend::Sqlite);
    let email = "once@example.com";
    let parsed = Email::parse(email).unwrap();
    fixture.on_worker(async {
        let write = fixture
            .store
            .create_account(account(email, "Once"), support::signed_in());
        assert!(
            matches!(
                futures::poll!(Box::pin(write)),
                std::task::Poll::Ready(Ok(()))
            ),
            "the write took more than one poll"
        );
        let read = fixture.store.credentials_by_email(&parsed);
        match futures::poll!(Box::pin(read)) {
            std::task::Poll::Ready(Ok(Some(found))) => {
                assert_eq!(found.user.email.as_ref(), email);
            }
            other => panic!("the read took more than one poll, or failed: {other:?}"),
        }
    });
}
