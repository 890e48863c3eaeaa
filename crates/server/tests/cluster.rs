//! Gatehouse as a cluster: replicas of the real binary on one PostgreSQL database, as an
//! operator runs them (`scripts/cluster`, `docs/deployment.md`). The per-endpoint bound is
//! measured at the receiver; replicas start together on an empty database; a change on one
//! replica is delivered by another without waiting for a poll; a replica killed under a burst
//! loses nothing acknowledged and sends nothing twice at once; a replica told to stop finishes
//! what it accepted and what it leased; and a rolling restart behind nginx fails no request.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/nginx.rs"]
mod nginx;
#[path = "support/served.rs"]
mod served;

use std::{
    collections::BTreeSet,
    process::Command,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use gatehouse_delivery::test_receiver::TestReceiver;
use gatehouse_testkit::TestDatabase;
use nginx::Nginx;
use serde_json::{json, Value};
use served::{gatehouse, Served};

const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const PASSWORD: &str = "a cluster of replicas";

/// The settings every replica of a test shares, and `extra`.
fn replica(
    dir: &tempfile::TempDir,
    database: &TestDatabase,
    receiver: &TestReceiver,
    extra: &[(&str, &str)],
) -> Command {
    let mut command = gatehouse(dir);
    command
        .env("GATEHOUSE_DATABASE_URL", database.url())
        .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
        .env("GATEHOUSE_WEBHOOK_CA_FILE", receiver.ca_pem_path())
        .env("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true")
        .env("GATEHOUSE_RATE_LIMITS", "free=1000000")
        .env("GATEHOUSE_MAX_CONNECTIONS_PER_IP", "100000")
        .env("GATEHOUSE_PASSWORD_HASH_CONCURRENCY", "2")
        // Quiet, but for the lines the tests read.
        .env(
            "GATEHOUSE_LOG",
            "warn,gatehouse_server::app=info,gatehouse_server=info",
        );
    for (name, value) in extra {
        command.env(name, value);
    }
    command
}

/// Starts `n` replicas at once (each command made by `make`).
fn start_together(n: usize, make: impl Fn(usize) -> Command) -> Vec<Served> {
    let commands: Vec<Command> = (0..n).map(make).collect();
    let threads: Vec<_> = commands
        .into_iter()
        .map(|command| std::thread::spawn(move || Served::start_with(command)))
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// A user of its own organization, signed in on `base`, with an endpoint at `receiver` for
/// `user.updated`: its access token, organization and endpoint.
struct Subscriber {
    token: String,
    organization: String,
    endpoint: String,
}

async fn subscriber(
    client: &reqwest::Client,
    base: &str,
    email: &str,
    receiver: &TestReceiver,
) -> Subscriber {
    let registered: Value = client
        .post(format!("{base}/api/v1/auth/register"))
        .json(&json!({ "email": email, "password": PASSWORD, "full_name": "Cluster" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let organization = registered["organization_id"].as_str().unwrap().to_owned();
    let token = login(client, base, email).await;
    let created = client
        .post(format!("{base}/api/v1/webhooks/endpoints"))
        .bearer_auth(&token)
        .header("X-Organization-ID", &organization)
        .json(&json!({ "url": receiver.url("/cluster"), "events": ["user.updated"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let endpoint: Value = created.json().await.unwrap();
    Subscriber {
        token,
        organization,
        endpoint: endpoint["id"].as_str().unwrap().to_owned(),
    }
}

async fn login(client: &reqwest::Client, base: &str, email: &str) -> String {
    let tokens: Value = client
        .post(format!("{base}/api/v1/auth/login"))
        .json(&json!({ "email": email, "password": PASSWORD }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    tokens["access_token"].as_str().unwrap().to_owned()
}

/// Changes the user's name on `base` (a `user.updated` event): whether it was acknowledged.
async fn rename(client: &reqwest::Client, base: &str, token: &str, name: &str) -> bool {
    client
        .patch(format!("{base}/api/v1/users/me"))
        .bearer_auth(token)
        .json(&json!({ "full_name": name }))
        .send()
        .await
        .is_ok_and(|response| response.status() == 200)
}

/// The names the receiver's deliveries carry.
fn names_received(receiver: &TestReceiver) -> BTreeSet<String> {
    receiver
        .requests()
        .iter()
        .filter_map(|request| {
            let payload: Value = serde_json::from_slice(&request.body).ok()?;
            payload["data"]["full_name"].as_str().map(str::to_owned)
        })
        .collect()
}

/// Waits until every name in `wanted` has reached the receiver, or panics after `timeout`.
async fn wait_for_names(receiver: &TestReceiver, wanted: &BTreeSet<String>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let received = names_received(receiver);
        if wanted.is_subset(&received) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} acknowledged changes never arrived",
            wanted.difference(&received).count(),
            wanted.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_started_together_on_an_empty_database_all_come_up() {
    let database = TestDatabase::create().await;
    let receiver = TestReceiver::start().await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // The three run their migrations at once: one applies them under the lock, the others
    // wait and find nothing left to do.
    let replicas = start_together(3, |i| replica(&dirs[i], &database, &receiver, &[]));
    let client = reqwest::Client::new();
    for served in &replicas {
        let ready = client
            .get(format!("{}/readyz", served.base))
            .send()
            .await
            .unwrap();
        assert_eq!(ready.status(), 200, "{:?}", served.logs());
    }
    // And they serve one service: an account made on one signs in on the others.
    let organization = subscriber(
        &client,
        &replicas[0].base,
        "together@example.com",
        &receiver,
    )
    .await
    .organization;
    for served in &replicas[1..] {
        let token = login(&client, &served.base, "together@example.com").await;
        let me = client
            .get(format!(
                "{}/api/v1/organizations/{organization}",
                served.base
            ))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(me.status(), 200);
    }
    for served in replicas {
        served.stop();
    }
}

/// How long the slow receiver takes to answer each delivery.
const SLOW: Duration = Duration::from_millis(700);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_keep_the_per_endpoint_bound_at_the_receiver() {
    let database = TestDatabase::create().await;
    let receiver = TestReceiver::start().await;
    receiver.delay(SLOW);
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let replicas = start_together(3, |i| {
        replica(
            &dirs[i],
            &database,
            &receiver,
            &[("GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY", "4")],
        )
    });
    let client = reqwest::Client::new();
    let token = subscriber(&client, &replicas[0].base, "bound@example.com", &receiver)
        .await
        .token;

    // A burst of changes, spread over the replicas: each dispatches and delivers its share,
    // and every one of them has room for 4 at the endpoint by its own count.
    let mut wanted = BTreeSet::new();
    for i in 0..36 {
        let name = format!("Bound {i}");
        assert!(rename(&client, &replicas[i % 3].base, &token, &name).await);
        wanted.insert(name);
    }
    wait_for_names(&receiver, &wanted, Duration::from_secs(120)).await;

    let most = receiver.most_in_flight();
    eprintln!("most attempts in flight at the receiver: {most} (bound 4, 3 replicas)");
    assert!(
        most <= 4,
        "the receiver saw {most} attempts at once from three replicas; the bound is 4"
    );
    assert!(most >= 2, "the burst never overlapped: {most}");
    assert!(receiver.repeated_at_once().is_empty());
    for served in replicas {
        served.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_one_replica_is_delivered_by_another_without_waiting_for_a_poll() {
    let database = TestDatabase::create().await;
    let receiver = TestReceiver::start().await;
    let (front_dir, back_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The front replica delivers nothing; the back one polls once a minute. Only the
    // notification from the change's transaction can bring the delivery in time.
    let front = Served::start_with(replica(
        &front_dir,
        &database,
        &receiver,
        &[("GATEHOUSE_WORKER", "false")],
    ));
    let back = Served::start_with(replica(
        &back_dir,
        &database,
        &receiver,
        &[("GATEHOUSE_WEBHOOK_POLL_MS", "60000")],
    ));
    let client = reqwest::Client::new();
    let token = subscriber(&client, &front.base, "across@example.com", &receiver)
        .await
        .token;
    // The back replica's workers have looked once at start-up and now wait their minute.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut took = Vec::new();
    for i in 0..5 {
        let name = format!("Across {i}");
        let sent = Instant::now();
        assert!(rename(&client, &front.base, &token, &name).await);
        wait_for_names(&receiver, &BTreeSet::from([name]), Duration::from_secs(10)).await;
        took.push(sent.elapsed());
    }
    eprintln!("from the front replica's answer to the receiver, via the back replica: {took:?}");
    front.stop();
    back.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_under_a_burst_loses_nothing_and_sends_nothing_twice_at_once() {
    let database = TestDatabase::create().await;
    let receiver = TestReceiver::start().await;
    receiver.delay(Duration::from_millis(200));
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // A short send timeout: the leases the killed replica held expire 31 s after they began.
    let settings = [("GATEHOUSE_WEBHOOK_TIMEOUT_SECS", "1")];
    let mut replicas = start_together(3, |i| replica(&dirs[i], &database, &receiver, &settings));
    let client = reqwest::Client::new();
    let token = subscriber(&client, &replicas[0].base, "burst@example.com", &receiver)
        .await
        .token;

    // One writer per replica keeps changing the name; each keeps what was acknowledged.
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let writers: Vec<_> = replicas
        .iter()
        .enumerate()
        .map(|(r, served)| {
            let (client, base, token) = (client.clone(), served.base.clone(), token.clone());
            let acknowledged = acknowledged.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let mut i = 0;
                while started.elapsed() < Duration::from_secs(4) {
                    let name = format!("Burst {r}-{i}");
                    if rename(&client, &base, &token, &name).await {
                        acknowledged.lock().unwrap().insert(name);
                    } else {
                        // The killed replica refuses: its writer waits out the burst.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    i += 1;
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Killed with deliveries in flight: its leases are held until they expire.
    replicas.remove(0).kill_hard();
    for writer in writers {
        writer.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(
        acknowledged.len() >= 20,
        "too few changes: {}",
        acknowledged.len()
    );

    wait_for_names(&receiver, &acknowledged, Duration::from_secs(120)).await;
    let repeated = receiver.repeated_at_once();
    assert!(
        repeated.is_empty(),
        "deliveries sent twice at once: {repeated:?}"
    );
    eprintln!(
        "{} acknowledged changes, all delivered; {} requests at the receiver",
        acknowledged.len(),
        receiver.requests().len()
    );
    for served in replicas {
        served.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_told_to_stop_finishes_what_it_accepted_and_what_it_leased() {
    let database = TestDatabase::create().await;
    let receiver = TestReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let settings = [("GATEHOUSE_DRAIN_SECS", "2")];
    let served = Served::start_with(replica(&dir, &database, &receiver, &settings));
    let base = served.base.clone();
    let client = reqwest::Client::new();
    let Subscriber {
        token,
        organization,
        endpoint,
    } = subscriber(&client, &base, "drain@example.com", &receiver).await;

    // A delivery in flight when the signal comes: the receiver holds it for 3 s.
    receiver.delay(Duration::from_secs(3));
    assert!(rename(&client, &base, &token, "Drained Delivery").await);
    receiver.wait_for(1, Duration::from_secs(10)).await;

    // Requests in flight too: sign-ins, each an argon2id hash, two at a time (four: fewer than
    // the checks one account may have under way at once, `LockoutRule::admit`).
    let requests: Vec<_> = (0..4)
        .map(|_| {
            let (client, base) = (client.clone(), base.clone());
            tokio::spawn(async move {
                client
                    .post(format!("{base}/api/v1/auth/login"))
                    .json(&json!({ "email": "drain@example.com", "password": PASSWORD }))
                    .send()
                    .await
                    .map(|response| response.status().as_u16())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    served.terminate();

    // While it drains, it says it is not ready, and still serves.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready = client.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.unwrap();
    assert!(body["detail"].as_str().unwrap().contains("stopping"));
    let live = client.get(format!("{base}/livez")).send().await.unwrap();
    assert_eq!(live.status(), 200);

    for request in requests {
        assert_eq!(
            request.await.unwrap().unwrap(),
            200,
            "a request accepted before the stop was cut off"
        );
    }
    let (status, logs) = served.wait_exit(Duration::from_secs(30));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "it exits cleanly: {logs:?}"
    );
    assert!(
        logs.iter()
            .any(|line| line.contains("webhook workers stopped")
                && line.contains("\"given_back\":0")),
        "the delivery in flight was recorded, not given back: {logs:?}"
    );

    // The attempt it was making was recorded: another replica finds it delivered, and sends
    // it no second time.
    receiver.delay(Duration::ZERO);
    let next_dir = tempfile::tempdir().unwrap();
    let next = Served::start_with(replica(&next_dir, &database, &receiver, &[]));
    let deliveries: Value = client
        .get(format!(
            "{}/api/v1/webhooks/endpoints/{endpoint}/deliveries",
            next.base
        ))
        .bearer_auth(login(&client, &next.base, "drain@example.com").await)
        .header("X-Organization-ID", &organization)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let delivery = &deliveries["items"][0];
    assert_eq!(delivery["status"], "success", "{deliveries}");
    assert_eq!(delivery["attempt"], 1);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(receiver.requests().len(), 1);
    drop(token);
    next.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_behind_nginx_fails_no_request() {
    let database = TestDatabase::create().await;
    let receiver = TestReceiver::start().await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let settings = [("GATEHOUSE_TRUSTED_PROXIES", "127.0.0.1")];
    let mut replicas: Vec<Option<Served>> =
        start_together(3, |i| replica(&dirs[i], &database, &receiver, &settings))
            .into_iter()
            .map(Some)
            .collect();
    let ports: Vec<u16> = replicas.iter().flatten().map(Served::port).collect();
    let nginx = Nginx::start(&ports.iter().map(|p| (*p, true)).collect::<Vec<_>>());
    let front = nginx.url();
    // Each request on a connection of its own, as curl makes them: a kept-alive connection
    // to nginx is nginx's to close when it reloads, whichever replica is behind it.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let Subscriber {
        token,
        organization,
        ..
    } = subscriber(&client, &front, "rolling@example.com", &receiver).await;

    // Load through nginx for the whole restart: reads, sign-ins and changes.
    let done = Arc::new(AtomicBool::new(false));
    let (answered, failed) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::new())),
    );
    let load: Vec<_> = (0..4)
        .map(|n| {
            let (client, front, token, organization) = (
                client.clone(),
                front.clone(),
                token.clone(),
                organization.clone(),
            );
            let (done, answered, failed) = (done.clone(), answered.clone(), failed.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while !done.load(Ordering::Relaxed) {
                    let request = match (n + i) % 4 {
                        0 => client
                            .post(format!("{front}/api/v1/auth/login"))
                            .json(&json!({ "email": "rolling@example.com", "password": PASSWORD })),
                        1 => client
                            .patch(format!("{front}/api/v1/users/me"))
                            .bearer_auth(&token)
                            .json(&json!({ "full_name": format!("Rolling {n}-{i}") })),
                        2 => client
                            .get(format!("{front}/api/v1/organizations/{organization}"))
                            .bearer_auth(&token),
                        _ => client.get(format!("{front}/readyz")),
                    };
                    match request.send().await {
                        Ok(response) if response.status().is_success() => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(response) => failed.lock().unwrap().push(format!(
                            "{} {}",
                            response.status(),
                            response.url()
                        )),
                        Err(error) => failed.lock().unwrap().push(error.to_string()),
                    }
                    i += 1;
                }
            })
        })
        .collect();

    // The rolling restart, as `scripts/cluster restart` does it: out of nginx, stopped
    // (drained), started again on its port, back in.
    for i in 0..3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let upstreams = |out: Option<usize>| -> Vec<(u16, bool)> {
            ports
                .iter()
                .enumerate()
                .map(|(j, port)| (*port, Some(j) != out))
                .collect()
        };
        nginx.reload(&upstreams(Some(i)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let old = replicas[i].take().unwrap();
        old.terminate();
        let (status, logs) = old.wait_exit(Duration::from_secs(30));
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{logs:?}");
        let mut command = replica(&dirs[i], &database, &receiver, &settings);
        command.env("GATEHOUSE_BIND", format!("127.0.0.1:{}", ports[i]));
        replicas[i] = Some(Served::start_with(command));
        nginx.reload(&upstreams(None));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    done.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let failed = failed.lock().unwrap().clone();
    let answered = answered.load(Ordering::Relaxed);
    eprintln!(
        "rolling restart: {answered} requests answered, {} failed",
        failed.len()
    );
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert!(answered >= 100, "too little load: {answered}");
    for served in replicas.into_iter().flatten() {
        served.stop();
    }
}
