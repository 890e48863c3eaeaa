//! Brute-force protection over HTTP: five failed sign-ins for an account lock it for a minute,
//! from whatever address they come, a right password included; an email that names no account
//! gets exactly the same answers; the API, the hosted login page and password changes count
//! together; and with Redis, every replica shares the count (and the lockout doubles). Under
//! concurrency too: a burst of wrong passwords, on one replica or spread over two, is only as
//! many checks as may fail before the lockout, the rest refused unchecked (issue 49).

use reqwest::{header, Response};
use serde_json::{json, Value};

use crate::helpers::{
    detail_of, hidden, json_of, loc, locs_of, on_both_backends, Backend, Browser, Options, TestApp,
    PASSWORD,
};

/// Logs in from the address `ip` (believed: the test server trusts 127.0.0.1 as its proxy).
async fn login_from(app: &TestApp, ip: &str, email: &str, password: &str) -> Response {
    app.client
        .post(app.url("/api/v1/auth/login"))
        .header("X-Forwarded-For", ip)
        .json(&json!({ "email": email, "password": password }))
        .send()
        .await
        .unwrap()
}

/// `Retry-After` of a 429, in seconds.
fn retry_after(response: &Response) -> i64 {
    assert_eq!(response.status(), 429);
    response.headers()[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn behind_a_proxy(backend: Backend) -> TestApp {
    TestApp::spawn_with(
        backend,
        Options {
            trusted_proxies: Some("127.0.0.1/32"),
            ..Options::default()
        },
    )
    .await
}

/// What the server answered, with the digits taken out of the words (the seconds left move).
async fn answer(response: Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let retry = response
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_owned());
    let body: Value = response.json().await.unwrap();
    let words = body["detail"]
        .as_str()
        .unwrap_or_default()
        .replace(|c: char| c.is_ascii_digit(), "#");
    (status, retry.map(|_| "set".to_owned()), json!(words))
}

/// What a burst of sign-ins sent at once was answered: `wrong` wrong passwords and, with
/// `right`, the right one among them, spread over `apps` in turn, each from the address `ip`.
struct Burst {
    /// `401`s: passwords checked and wrong.
    checked_wrong: usize,
    /// `429`s: refused unchecked.
    refused: usize,
    /// What the right password got, if it was sent.
    right: Option<u16>,
}

async fn burst(apps: &[&TestApp], ip: &str, email: &str, wrong: usize, right: bool) -> Burst {
    let sends: Vec<_> = (0..=wrong)
        .filter(|n| *n < wrong || right)
        .map(|n| {
            let app = apps[n % apps.len()];
            let request = app
                .client
                .post(app.url("/api/v1/auth/login"))
                .header("X-Forwarded-For", ip)
                .json(&json!({
                    "email": email,
                    "password": if n < wrong { "a wrong guess" } else { PASSWORD },
                }));
            tokio::spawn(async move { (n, request.send().await.unwrap().status().as_u16()) })
        })
        .collect();
    let mut answers = Burst {
        checked_wrong: 0,
        refused: 0,
        right: None,
    };
    for send in sends {
        let (n, status) = send.await.unwrap();
        if n == wrong {
            answers.right = Some(status);
            continue;
        }
        match status {
            401 => answers.checked_wrong += 1,
            429 => answers.refused += 1,
            other => panic!("a wrong password got {other}"),
        }
    }
    answers
}

/// Thirty wrong passwords at once: five checked (as many as may fail before the lockout), the
/// other twenty-five refused unchecked; the account is then locked, the right password too.
async fn thirty_wrong_passwords_at_once(apps: &[&TestApp], ip: &str, email: &str) {
    let answers = burst(apps, ip, email, 30, false).await;
    assert_eq!(
        (answers.checked_wrong, answers.refused),
        (5, 25),
        "five checked, the rest refused"
    );
    for app in apps {
        let wait = retry_after(&login_from(app, ip, email, PASSWORD).await);
        assert!((55..=60).contains(&wait), "locked for a minute: {wait}");
    }
}

/// The right password in a burst of wrong ones is checked only if it is one of the five: it
/// gets `200` then (and a right password ends the run, so at most five more are checked after
/// it), else `429` like the others, and the account ends locked.
async fn the_right_password_in_a_burst(apps: &[&TestApp], ip: &str, email: &str) {
    let answers = burst(apps, ip, email, 30, true).await;
    match answers.right {
        Some(200) => assert!(
            answers.checked_wrong <= 4 + 5,
            "{} checked",
            answers.checked_wrong
        ),
        Some(429) => {
            assert!(
                answers.checked_wrong <= 5,
                "{} checked",
                answers.checked_wrong
            );
            assert_eq!(login_from(apps[0], ip, email, PASSWORD).await.status(), 429);
        }
        other => panic!("the right password got {other:?}"),
    }
    assert_eq!(answers.checked_wrong + answers.refused, 30);
}

mod on_each_backend {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn five_failed_sign_ins_lock_the_account_from_every_address_sqlite() {
        five_failed_sign_ins_lock_the_account_from_every_address(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn five_failed_sign_ins_lock_the_account_from_every_address_postgres() {
        five_failed_sign_ins_lock_the_account_from_every_address(Backend::Postgres).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_email_gets_exactly_the_answers_a_known_one_gets_sqlite() {
        an_unknown_email_gets_exactly_the_answers_a_known_one_gets(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unknown_email_gets_exactly_the_answers_a_known_one_gets_postgres() {
        an_unknown_email_gets_exactly_the_answers_a_known_one_gets(Backend::Postgres).await;
    }
}

async fn five_failed_sign_ins_lock_the_account_from_every_address(backend: Backend) {
    let app = behind_a_proxy(backend).await;
    let ada = app.logged_in("ada@example.com").await;
    for n in 1..=5 {
        let ip = format!("203.0.113.{n}");
        let refused = login_from(&app, &ip, "ada@example.com", "not the password").await;
        assert_eq!(refused.status(), 401, "failure {n} is still a plain 401");
    }
    // A sixth attempt, from yet another address and with the right password: locked.
    let locked = login_from(&app, "198.51.100.7", "ada@example.com", PASSWORD).await;
    let wait = retry_after(&locked);
    assert!(
        (55..=60).contains(&wait),
        "the first lockout is a minute: {wait}"
    );
    let detail = detail_of(locked, 429).await;
    assert!(detail.contains("too many failed sign-ins"), "{detail}");
    // Other accounts are not touched, and tokens already issued keep working.
    let bob = app.logged_in("bob@example.com").await;
    json_of(app.me(&bob.access_token).await, 200).await;
    json_of(app.me(&ada.access_token).await, 200).await;
    // The email is matched as the account is: case and spaces do not make another count.
    let shouted = login_from(&app, "198.51.100.8", " ADA@example.com ", PASSWORD).await;
    assert_eq!(shouted.status(), 429);
}

async fn an_unknown_email_gets_exactly_the_answers_a_known_one_gets(backend: Backend) {
    let app = behind_a_proxy(backend).await;
    app.logged_in("ada@example.com").await;
    let mut known = Vec::new();
    let mut unknown = Vec::new();
    for n in 1..=7 {
        let ip = format!("203.0.113.{n}");
        known.push(answer(login_from(&app, &ip, "ada@example.com", "guess").await).await);
        unknown.push(answer(login_from(&app, &ip, "nobody@example.com", "guess").await).await);
    }
    assert_eq!(known, unknown);
    let statuses: Vec<u16> = known.iter().map(|(status, _, _)| *status).collect();
    assert_eq!(statuses, [401, 401, 401, 401, 401, 429, 429]);
}

#[on_both_backends]
async fn thirty_wrong_passwords_at_once_are_five_checks_then_the_lockout(app: TestApp) {
    app.logged_in("burst@example.com").await;
    thirty_wrong_passwords_at_once(&[&app], "127.0.0.1", "burst@example.com").await;
}

#[on_both_backends]
async fn the_right_password_in_a_burst_of_wrong_ones_is_checked_only_among_five(app: TestApp) {
    app.logged_in("burst@example.com").await;
    the_right_password_in_a_burst(&[&app], "127.0.0.1", "burst@example.com").await;
}

#[on_both_backends]
async fn the_api_and_the_hosted_login_page_count_together(app: TestApp) {
    app.logged_in("owen@example.com").await;
    for _ in 0..3 {
        let refused = app.login("owen@example.com", "wrong password").await;
        assert_eq!(refused.status(), 401);
    }
    let mut browser = Browser::new();
    for _ in 0..2 {
        let page = browser.get(&app.url("/login")).await.text().await.unwrap();
        let refused = browser
            .post_form(
                &app.url("/login"),
                &[
                    ("email", "owen@example.com"),
                    ("password", "wrong password"),
                    ("csrf_token", &hidden(&page, "csrf_token")),
                ],
            )
            .await;
        assert_eq!(refused.status(), 401);
    }
    // Locked on the API ...
    let locked = app.login("owen@example.com", PASSWORD).await;
    assert!(retry_after(&locked) > 0);
    // ... and on the page, which says so in words and in Retry-After.
    let page = browser.get(&app.url("/login")).await.text().await.unwrap();
    let locked = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "owen@example.com"),
                ("password", PASSWORD),
                ("csrf_token", &hidden(&page, "csrf_token")),
            ],
        )
        .await;
    assert!(retry_after(&locked) > 0);
    assert!(locked
        .headers()
        .get(header::SET_COOKIE)
        .is_none_or(|c| !c.to_str().unwrap().starts_with("gatehouse_session=")));
    let page = locked.text().await.unwrap();
    assert!(
        page.contains("Too many failed sign-ins for this account"),
        "{page}"
    );
    assert!(page.contains("role=\"alert\""));
}

#[on_both_backends]
async fn a_right_password_before_the_lockout_starts_the_count_again(app: TestApp) {
    app.logged_in("ada@example.com").await;
    for _ in 0..4 {
        assert_eq!(app.login("ada@example.com", "wrong").await.status(), 401);
    }
    json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
    for _ in 0..4 {
        assert_eq!(app.login("ada@example.com", "wrong").await.status(), 401);
    }
    json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
}

#[on_both_backends]
async fn wrong_current_passwords_on_a_password_change_count_too(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    for _ in 0..5 {
        let refused = app
            .change_password(
                &ada.access_token,
                "not my password",
                "a brand new passphrase",
            )
            .await;
        assert_eq!(refused.status(), 422);
    }
    let locked = app
        .change_password(&ada.access_token, PASSWORD, "a brand new passphrase")
        .await;
    assert!(retry_after(&locked) > 0);
    let locked = app.login("ada@example.com", PASSWORD).await;
    assert_eq!(locked.status(), 429);
    // Renewing by email and password is a sign-in like any other.
    let renew = app
        .post_json(
            "/api/v1/auth/password/renew",
            &json!({
                "email": "ada@example.com",
                "current_password": PASSWORD,
                "new_password": "a brand new passphrase",
            }),
        )
        .await;
    assert_eq!(renew.status(), 429);
}

#[on_both_backends]
async fn common_passwords_are_refused_on_register_change_and_renew(app: TestApp) {
    for common in ["password123", "P@ssw0rd", "iloveyou", "qwertyuiop"] {
        let refused = app.register("ada@example.com", common, "Ada").await;
        assert_eq!(
            locs_of(refused).await,
            vec![loc(&["body", "password"])],
            "{common}"
        );
    }
    let ada = app.logged_in("ada@example.com").await;
    let refused = app
        .change_password(&ada.access_token, PASSWORD, "sunshine")
        .await;
    let body = json_of(refused, 422).await;
    assert_eq!(body["detail"][0]["loc"], json!(["body", "new_password"]));
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("too easy to guess"),
        "{body}"
    );
    let refused = app
        .post_json(
            "/api/v1/auth/password/renew",
            &json!({
                "email": "ada@example.com",
                "current_password": PASSWORD,
                "new_password": "football",
            }),
        )
        .await;
    assert_eq!(locs_of(refused).await, vec![loc(&["body", "new_password"])]);
    // The password still works: nothing was changed.
    json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
}

/// Failed sign-ins are one count across replicas when Redis holds it; a lockout that has ended
/// is followed, at the next failure, by one twice as long. Every request comes from an address
/// of its own (through the trusted proxy), so that the per-address rate limit it meets in Redis
/// is no other test's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_redis_share_failed_sign_ins_and_the_lockout_doubles() {
    let options = Options {
        redis_url: Some(crate::rate_limits::redis_url()),
        trusted_proxies: Some("127.0.0.1/32"),
        ..Options::default()
    };
    let first = TestApp::spawn_with(Backend::Sqlite, options).await;
    let second = first.replica().await;
    // An email and an address no other run of this test used: Redis outlives test runs.
    let run = uuid::Uuid::now_v7();
    let email = format!("locked-{run}@example.com");
    let bits = run.as_u128();
    let ip = format!(
        "fd00::{:x}:{:x}:{:x}",
        (bits >> 32) & 0xffff,
        (bits >> 16) & 0xffff,
        bits & 0xffff
    );
    let registered = first
        .client
        .post(first.url("/api/v1/auth/register"))
        .header("X-Forwarded-For", &ip)
        .json(&json!({ "email": email, "password": PASSWORD, "full_name": "Locked" }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    for app in [&first, &second, &first, &second, &first] {
        assert_eq!(
            login_from(app, &ip, &email, "wrong password")
                .await
                .status(),
            401
        );
    }
    for app in [&first, &second] {
        let wait = retry_after(&login_from(app, &ip, &email, PASSWORD).await);
        assert!((55..=60).contains(&wait), "a minute first: {wait}");
    }

    // The minute passes (in Redis: the lockout ends now); the run goes on.
    let key = gatehouse_ratelimit::RedisSignInAttempts::redis_key(
        &gatehouse_domain::model::AccountKey::for_email(&email),
    );
    let now_ms = (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000).to_string();
    redis_command(&["HSET", &key, "locked_until", &now_ms]).await;
    assert_eq!(
        login_from(&second, &ip, &email, "wrong again")
            .await
            .status(),
        401
    );
    let wait = retry_after(&login_from(&first, &ip, &email, PASSWORD).await);
    assert!((115..=120).contains(&wait), "then two minutes: {wait}");
}

/// The burst spread over two replicas on one Redis: the check slots are one count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_wrong_passwords_at_once_over_two_replicas_are_five_checks_then_the_lockout() {
    let options = Options {
        redis_url: Some(crate::rate_limits::redis_url()),
        trusted_proxies: Some("127.0.0.1/32"),
        ..Options::default()
    };
    let first = TestApp::spawn_with(Backend::Postgres, options).await;
    let second = first.replica().await;
    // An email and an address no other run of this test used: Redis outlives test runs.
    let run = uuid::Uuid::now_v7();
    let bits = run.as_u128();
    let ip = format!("fd01::{:x}:{:x}", (bits >> 16) & 0xffff, bits & 0xffff);
    for (n, check) in ["wrong", "right"].into_iter().enumerate() {
        let email = format!("burst-{n}-{run}@example.com");
        let registered = first
            .client
            .post(first.url("/api/v1/auth/register"))
            .header("X-Forwarded-For", &ip)
            .json(&json!({ "email": email, "password": PASSWORD, "full_name": "Burst" }))
            .send()
            .await
            .unwrap();
        assert_eq!(registered.status(), 201);
        match check {
            "wrong" => thirty_wrong_passwords_at_once(&[&first, &second], &ip, &email).await,
            _ => the_right_password_in_a_burst(&[&first, &second], &ip, &email).await,
        }
    }
}

/// Sends one command to the test Redis in its wire format (RESP) and reads the one-line reply:
/// all this test needs, without a Redis client crate in the server's dependencies.
async fn redis_command(args: &[&str]) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let url = url::Url::parse(&crate::rate_limits::redis_url()).unwrap();
    let address = (
        url.host_str().unwrap_or("127.0.0.1").to_owned(),
        url.port().unwrap_or(6379),
    );
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let mut command = format!("*{}\r\n", args.len());
    for arg in args {
        command.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(command.as_bytes()).await.unwrap();
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).await.unwrap();
    assert!(!reply.starts_with('-'), "Redis refused {args:?}: {reply}");
}
