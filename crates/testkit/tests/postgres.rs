//! Needs a PostgreSQL server: the one at `GATEHOUSE_TEST_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`) or a throwaway local cluster.

use gatehouse_testkit::{postgres_admin_url, sqlite_url, TestDatabase};
use tokio_postgres::{Client, NoTls};

async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

async fn database_exists(name: &str) -> bool {
    let admin = connect(&postgres_admin_url().await).await;
    let row = admin
        .query_one(
            "SELECT count(*) FROM pg_database WHERE datname = $1",
            &[&name],
        )
        .await
        .unwrap_or_else(|e| panic!("querying pg_database failed: {e}"));
    row.get::<_, i64>(0) == 1
}

async fn current_database(url: &str) -> String {
    connect(url)
        .await
        .query_one("SELECT current_database()", &[])
        .await
        .unwrap_or_else(|e| panic!("SELECT current_database() on {url} failed: {e}"))
        .get(0)
}

#[tokio::test]
async fn admin_url_is_decided_once() {
    let first = postgres_admin_url().await;
    assert_eq!(first, postgres_admin_url().await);
    assert!(first.starts_with("postgres"), "{first}");
}

#[tokio::test]
async fn databases_are_distinct_connectable_and_dropped() {
    let one = TestDatabase::create().await;
    let two = TestDatabase::create().await;
    assert_ne!(one.name(), two.name());
    assert_ne!(one.url(), two.url());
    assert!(one.name().starts_with("gatehouse_test_"));

    assert_eq!(current_database(one.url()).await, one.name());
    assert_eq!(current_database(two.url()).await, two.name());

    // What happens in one database is not visible in the other.
    let client_one = connect(one.url()).await;
    client_one
        .batch_execute("CREATE TABLE only_here (id int); INSERT INTO only_here VALUES (1)")
        .await
        .unwrap();
    let client_two = connect(two.url()).await;
    let visible: i64 = client_two
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_here'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(visible, 0);

    let (name_one, name_two) = (one.name().to_owned(), two.name().to_owned());
    assert!(database_exists(&name_one).await);
    assert!(database_exists(&name_two).await);

    // Dropping works even though connections to the database are still open.
    drop(one);
    assert!(!database_exists(&name_one).await);
    assert!(database_exists(&name_two).await);
    // The server ended the connection (its FATAL goes to the connection task, which stops), so
    // the client finds it closed.
    let ended = client_one.simple_query("SELECT 1").await.unwrap_err();
    assert!(ended.is_closed(), "{ended:?}");

    drop(client_two);
    drop(two);
    assert!(!database_exists(&name_two).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_on_a_multi_threaded_runtime() {
    let db = TestDatabase::create().await;
    let name = db.name().to_owned();
    assert_eq!(current_database(db.url()).await, name);
    drop(db);
    assert!(!database_exists(&name).await);
}

#[test]
fn dropping_outside_a_runtime_works() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = runtime.block_on(TestDatabase::create());
    let name = db.name().to_owned();
    drop(db);
    assert!(!runtime.block_on(database_exists(&name)));
}

#[test]
fn sqlite_url_is_absolute() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    assert!(url.starts_with("sqlite:///"), "{url}");
    assert!(url.ends_with("/gatehouse.db"), "{url}");
    assert_eq!(
        std::path::Path::new(url.strip_prefix("sqlite://").unwrap()),
        dir.path().join("gatehouse.db")
    );
}
