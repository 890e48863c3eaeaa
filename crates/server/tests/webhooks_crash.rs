//! Nothing acknowledged is lost: while a client keeps changing state, the server is killed
//! with SIGKILL and started again; every change it acknowledged reaches the receiver.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

use std::{
    collections::{BTreeSet, HashMap},
    sync::{Arc, Mutex},
    time::Duration,
};

use gatehouse_delivery::test_receiver::TestReceiver;
use gatehouse_testkit::TestDatabase;
use serde_json::{json, Value};
use served::{gatehouse, Served};

const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

fn command(
    dir: &tempfile::TempDir,
    database_url: &str,
    receiver: &TestReceiver,
) -> std::process::Command {
    let mut command = gatehouse(dir);
    command
        .env("GATEHOUSE_DATABASE_URL", database_url)
        .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
        .env("GATEHOUSE_WEBHOOK_CA_FILE", receiver.ca_pem_path())
        .env("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
        .env("GATEHOUSE_WEBHOOK_RETRY_SCHEDULE", "1,1,1,1")
        .env("GATEHOUSE_RATE_LIMITS", "free=100000")
        // Quiet, but for the line that says where it listens.
        .env("GATEHOUSE_LOG", "warn,gatehouse_server::app=info");
    command
}

async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    body: Value,
) -> reqwest::Result<reqwest::Response> {
    let mut request = client.request(method, url).json(&body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await
}

async fn acknowledged_changes_survive_a_kill(database_url: String) {
    let dir = tempfile::tempdir().unwrap();
    let receiver = TestReceiver::start().await;
    let client = reqwest::Client::new();
    let served = Served::start_with(command(&dir, &database_url, &receiver));
    let base = served.base.clone();
    let registered: Value = call(&client, reqwest::Method::POST, format!("{base}/api/v1/auth/register"), None,
        json!({ "email": "crash@example.com", "password": "survive the crash", "full_name": "Crash" }))
        .await.unwrap().json().await.unwrap();
    let org = registered["organization_id"].as_str().unwrap().to_owned();
    let tokens: Value = call(
        &client,
        reqwest::Method::POST,
        format!("{base}/api/v1/auth/login"),
        None,
        json!({ "email": "crash@example.com", "password": "survive the crash" }),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let token = tokens["access_token"].as_str().unwrap().to_owned();
    let created = client
        .post(format!("{base}/api/v1/webhooks/endpoints"))
        .bearer_auth(&token)
        .header("X-Organization-ID", &org)
        .json(&json!({ "url": receiver.url("/crash"), "events": ["user.updated"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    // A client changes the name over and over; it keeps the names the server acknowledged.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let writer = {
        let acknowledged = acknowledged.clone();
        let client = client.clone();
        let token = token.clone();
        let base = base.clone();
        tokio::spawn(async move {
            for i in 0..10_000 {
                let name = format!("Crash {i}");
                match call(
                    &client,
                    reqwest::Method::PATCH,
                    format!("{base}/api/v1/users/me"),
                    Some(&token),
                    json!({ "full_name": name }),
                )
                .await
                {
                    Ok(response) if response.status() == 200 => {
                        acknowledged.lock().unwrap().insert(name);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    served.kill_hard();
    writer.await.unwrap();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 5,
        "too few changes before the kill: {}",
        acknowledged.len()
    );

    let restarted = Served::start_with(command(&dir, &database_url, &receiver));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let requests = receiver.requests();
        let mut payload_of: HashMap<String, Vec<u8>> = HashMap::new();
        let mut names = BTreeSet::new();
        for request in &requests {
            let id = request.header("x-service-delivery-id").unwrap().to_owned();
            // A repeat carries the same delivery id and the same payload.
            if let Some(previous) = payload_of.insert(id, request.body.clone()) {
                assert_eq!(previous, request.body);
            }
            let payload: Value = serde_json::from_slice(&request.body).unwrap();
            names.insert(payload["data"]["full_name"].as_str().unwrap().to_owned());
        }
        if acknowledged.is_subset(&names) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "lost {} acknowledged changes",
            acknowledged.difference(&names).count()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    restarted.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_changes_survive_a_kill_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    acknowledged_changes_survive_a_kill(gatehouse_testkit::sqlite_url(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_changes_survive_a_kill_on_postgres() {
    let database = TestDatabase::create().await;
    acknowledged_changes_survive_a_kill(database.url().to_owned()).await;
}
