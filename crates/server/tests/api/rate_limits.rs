//! Per-plan rate limits: headers on every response, 429 with Retry-After past the budget (at
//! most a sixth of the minute's budget at once), and one budget shared by replicas through
//! Redis.
//!
//! The budgets here are small and spread (a budget of 30 a minute admits 5 at once, then one
//! every 2 seconds): each test sends its requests well within one interval.

use reqwest::Method;

use crate::helpers::{detail_of, json_of, Backend, Options, TestApp};

/// An anonymous request to a path that does not exist: counted like any other.
async fn nothing_here(app: &TestApp) -> reqwest::Response {
    app.client
        .get(app.url("/api/v1/nothing-here"))
        .send()
        .await
        .unwrap()
}

fn header(response: &reqwest::Response, name: &str) -> Option<i64> {
    response.headers().get(name)?.to_str().ok()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_a_sixth_of_the_plan_gets_429_with_retry_after() {
    let app = TestApp::spawn_with(
        Backend::Sqlite,
        Options {
            rate_limits: Some("free=30"),
            ..Options::default()
        },
    )
    .await;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let response = nothing_here(&app).await;
        // The limit is the minute's budget; the reset, when the burst is whole again (on a
        // 429: when the next request is admitted), at most 10 seconds on.
        assert_eq!(header(&response, "x-ratelimit-limit"), Some(30));
        let reset = header(&response, "x-ratelimit-reset").unwrap();
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        assert!(now <= reset && reset <= now + 11, "{reset} at {now}");
        statuses.push((
            response.status().as_u16(),
            header(&response, "x-ratelimit-remaining"),
        ));
        if response.status() == 429 {
            let retry_after = header(&response, "retry-after").expect("Retry-After");
            // One request's interval (2 s), to the whole second of X-RateLimit-Reset.
            assert!((1..=3).contains(&retry_after), "{retry_after}");
            let detail = detail_of(response, 429).await;
            assert!(detail.contains("rate limit"), "{detail}");
        }
    }
    assert_eq!(
        statuses,
        vec![
            (404, Some(4)),
            (404, Some(3)),
            (404, Some(2)),
            (404, Some(1)),
            (404, Some(0)),
            (429, Some(0))
        ]
    );
    // The probes are never limited.
    json_of(app.client.get(app.url("/livez")).send().await.unwrap(), 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_has_its_own_budget_sized_by_its_plan() {
    let app = TestApp::spawn_with(
        Backend::Sqlite,
        Options {
            // Four at once.
            rate_limits: Some("free=24"),
            ..Options::default()
        },
    )
    .await;
    // Registration and login spend the anonymous budget of this address...
    let user = app.logged_in("budget@example.com").await;
    // ...while the user's requests count against the user.
    let response = app.me(&user.access_token).await;
    assert_eq!(header(&response, "x-ratelimit-remaining"), Some(3));
    for _ in 0..3 {
        json_of(app.me(&user.access_token).await, 200).await;
    }
    detail_of(app.me(&user.access_token).await, 429).await;
}

pub(crate) fn redis_url() -> String {
    std::env::var("GATEHOUSE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_redis_share_one_budget() {
    let options = Options {
        // Six at once.
        rate_limits: Some("free=36"),
        redis_url: Some(redis_url()),
        ..Options::default()
    };
    let first = TestApp::spawn_with(Backend::Postgres, options).await;
    let second = first.replica().await;
    let user = first
        .logged_in(&format!("shared-{}@example.com", uuid::Uuid::now_v7()))
        .await;
    for app in [&first, &second, &first, &second, &first, &second] {
        json_of(app.me(&user.access_token).await, 200).await;
    }
    detail_of(first.me(&user.access_token).await, 429).await;
    detail_of(second.me(&user.access_token).await, 429).await;
}

/// "Every response carries the headers": with Redis gone, the limiter counts in process, so
/// the budget holds and every answer still says where it stands.
async fn redis_going_away_keeps_the_count_and_the_headers(backend: Backend) {
    let relay = gatehouse_testkit::RedisRelay::start(&redis_url()).await;
    let app = TestApp::spawn_with(
        backend,
        Options {
            // Five at once.
            rate_limits: Some("free=30"),
            redis_url: Some(relay.url.clone()),
            ..Options::default()
        },
    )
    .await;
    let first = nothing_here(&app).await;
    assert_eq!(header(&first, "x-ratelimit-limit"), Some(30));
    assert!(header(&first, "x-ratelimit-remaining").is_some());

    relay.cut();
    let mut refused = None;
    for n in 0..12 {
        let response = nothing_here(&app).await;
        assert_eq!(
            header(&response, "x-ratelimit-limit"),
            Some(30),
            "request {n} after the cut"
        );
        assert!(
            header(&response, "x-ratelimit-remaining").is_some(),
            "request {n}"
        );
        assert!(
            header(&response, "x-ratelimit-reset").is_some(),
            "request {n}"
        );
        if response.status() == 429 {
            assert!(header(&response, "retry-after").is_some());
            refused = Some(n);
            break;
        }
        assert_eq!(response.status(), 404);
    }
    // Counted from scratch in the process (an interval passing may admit one or two more).
    let refused = refused.expect("the budget still holds without Redis");
    assert!(
        (5..=11).contains(&refused),
        "refused after {refused} requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_limiter_counts_in_process_and_keeps_the_headers_sqlite() {
    redis_going_away_keeps_the_count_and_the_headers(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_redis_the_limiter_counts_in_process_and_keeps_the_headers_postgres() {
    redis_going_away_keeps_the_count_and_the_headers(Backend::Postgres).await;
}

/// A request made with an API key.
async fn me_with_key(app: &TestApp, key: &str, organization: &str) -> reqwest::Response {
    app.client
        .get(app.url("/api/v1/users/me"))
        .header("X-API-Key", key)
        .header("X-Organization-ID", organization)
        .send()
        .await
        .unwrap()
}

/// More keys buy no more requests: a user's access token and every key they made count against
/// one budget.
async fn one_persons_tokens_and_keys_share_one_budget(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            // Six at once.
            rate_limits: Some("free=36"),
            ..Options::default()
        },
    )
    .await;
    let user = app.logged_in("many-keys@example.com").await;
    let org = &user.organization_id;
    let mut keys = Vec::new();
    for name in ["one", "two"] {
        let created = json_of(app.create_api_key(&user.access_token, name, org).await, 201).await;
        keys.push(created["key"].as_str().unwrap().to_owned());
    }
    // Two creations spent two of six; four left, whichever credential asks.
    let mut remaining = Vec::new();
    for round in 0..4 {
        let response = match round % 3 {
            2 => app.me(&user.access_token).await,
            n => me_with_key(&app, &keys[n], org).await,
        };
        assert_eq!(response.status(), 200);
        remaining.push(header(&response, "x-ratelimit-remaining").unwrap());
    }
    assert_eq!(remaining, vec![3, 2, 1, 0]);
    for key in &keys {
        detail_of(me_with_key(&app, key, org).await, 429).await;
    }
    detail_of(app.me(&user.access_token).await, 429).await;

    // Another person has a budget of their own.
    let other = app.logged_in("someone-else@example.com").await;
    json_of(app.me(&other.access_token).await, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_persons_tokens_and_keys_share_one_budget_sqlite() {
    one_persons_tokens_and_keys_share_one_budget(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_persons_tokens_and_keys_share_one_budget_postgres() {
    one_persons_tokens_and_keys_share_one_budget(Backend::Postgres).await;
}

/// Password guesses at the public ways in are counted against the client's address, whatever
/// credential rides along: a valid key or token buys none.
async fn the_public_ways_in_count_against_the_address(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            // Four at once.
            rate_limits: Some("free=24"),
            ..Options::default()
        },
    )
    .await;
    // Registration and login: two of the address's four.
    let user = app.logged_in("guesser@example.com").await;
    let created = json_of(
        app.create_api_key(&user.access_token, "rider", &user.organization_id)
            .await,
        201,
    )
    .await;
    let key = created["key"].as_str().unwrap().to_owned();
    let guess = |credential: usize| {
        let request = app.client.post(app.url("/api/v1/auth/login")).json(
            &serde_json::json!({ "email": "guesser@example.com", "password": "a wrong guess" }),
        );
        match credential {
            0 => request
                .header("X-API-Key", key.as_str())
                .header("X-Organization-ID", user.organization_id.as_str()),
            _ => request.bearer_auth(&user.access_token),
        }
        .send()
    };
    let mut statuses = Vec::new();
    for n in 0..4 {
        statuses.push(guess(n % 2).await.unwrap().status().as_u16());
    }
    assert_eq!(
        statuses,
        vec![401, 401, 429, 429],
        "two left of the address's budget"
    );
    // The person's own budget was not touched by the guesses (the key's creation spent one).
    let me = app.me(&user.access_token).await;
    assert_eq!(me.status(), 200);
    assert_eq!(header(&me, "x-ratelimit-remaining"), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_ways_in_count_against_the_address_sqlite() {
    the_public_ways_in_count_against_the_address(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_ways_in_count_against_the_address_postgres() {
    the_public_ways_in_count_against_the_address(Backend::Postgres).await;
}

/// Requests that reach no route (an unknown path, a method the route does not serve) spend the
/// client's address's budget even with a valid token: nothing serves them, so no store round
/// trip is spent on the token, and the person's own budget is untouched.
async fn requests_that_reach_no_route_count_against_the_address(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            // Four at once.
            rate_limits: Some("free=24"),
            ..Options::default()
        },
    )
    .await;
    // Registration and login: two of the address's four.
    let user = app.logged_in("wanderer@example.com").await;
    let mut statuses = Vec::new();
    for (method, path) in [
        (Method::GET, "/api/v1/nothing-here"),
        (Method::DELETE, "/api/v1/auth/login"),
        (Method::GET, "/api/v1/users/nothing-here"),
    ] {
        let answer = app.send_as(method, &user.access_token, path, None).await;
        statuses.push(answer.status().as_u16());
    }
    assert_eq!(
        statuses,
        vec![404, 405, 429],
        "two left of the address's budget"
    );
    // The person's own budget was not touched.
    let me = app.me(&user.access_token).await;
    assert_eq!(me.status(), 200);
    assert_eq!(header(&me, "x-ratelimit-remaining"), Some(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_reach_no_route_count_against_the_address_sqlite() {
    requests_that_reach_no_route_count_against_the_address(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_reach_no_route_count_against_the_address_postgres() {
    requests_that_reach_no_route_count_against_the_address(Backend::Postgres).await;
}

/// Requests refused before routing, for a path or headers too long, spend the address's budget.
async fn oversized_requests_spend_the_address_budget(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            // Three at once.
            rate_limits: Some("free=18"),
            ..Options::default()
        },
    )
    .await;
    let long = format!("/api/v1/{}", "a".repeat(9 * 1024));
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            app.client
                .get(app.url(&long))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, vec![414, 414, 414, 429]);
    detail_of(nothing_here(&app).await, 429).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_spend_the_address_budget_sqlite() {
    oversized_requests_spend_the_address_budget(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_requests_spend_the_address_budget_postgres() {
    oversized_requests_spend_the_address_budget(Backend::Postgres).await;
}
