//! Webhooks end to end: endpoints, signed deliveries to a real HTTPS receiver, retries on
//! schedule, deactivation after five failures, the delivery log, manual retries.

use std::time::Duration;

use gatehouse_delivery::test_receiver::{ReceivedRequest, TestReceiver};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::helpers::{
    detail_of, json_of, loc, locs_of, on_both_backends, Backend, Options, TestApp,
};

/// The receiver's check, written from the spec: HMAC-SHA256 over "{timestamp}.{body}", hex,
/// `sha256=` prefix, and a timestamp within 300 s.
pub(crate) fn verify_signature(request: &ReceivedRequest, secret: &str) {
    let timestamp = request
        .header("x-service-timestamp")
        .expect("X-Service-Timestamp");
    let signature = request
        .header("x-service-signature")
        .expect("X-Service-Signature");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(&request.body);
    let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(signature, expected, "the signature does not verify");
    let age = time::OffsetDateTime::now_utc().unix_timestamp() - timestamp.parse::<i64>().unwrap();
    assert!(age.abs() <= 300, "timestamp {age} s off");
}

pub(crate) async fn app_with_receiver(backend: Backend) -> (TestApp, TestReceiver) {
    let receiver = TestReceiver::start().await;
    let app = TestApp::spawn_with(
        backend,
        Options {
            retry_schedule: Some("1,1,1,1"),
            webhook_ca_file: Some(receiver.ca_pem_path().to_owned()),
            ..Options::default()
        },
    )
    .await;
    (app, receiver)
}

pub(crate) async fn create_endpoint(
    app: &TestApp,
    token: &str,
    org: &str,
    url: &str,
    events: Value,
) -> Value {
    json_of(
        app.in_org(
            Method::POST,
            token,
            org,
            "/api/v1/webhooks/endpoints",
            Some(json!({ "url": url, "events": events, "description": "test receiver" })),
        )
        .await,
        201,
    )
    .await
}

pub(crate) async fn wait_until<F: Fn(&Value) -> bool>(
    app: &TestApp,
    token: &str,
    org: &str,
    path: &str,
    done: F,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let body = json_of(app.in_org(Method::GET, token, org, path, None).await, 200).await;
        if done(&body) {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "gave up waiting: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Changes the user's full name (`PATCH /api/v1/users/me`): a `user.updated` event for each
/// of their organizations.
pub(crate) async fn change_name(app: &TestApp, token: &str, name: &str) {
    json_of(
        app.send_as(
            Method::PATCH,
            token,
            "/api/v1/users/me",
            Some(json!({ "full_name": name })),
        )
        .await,
        200,
    )
    .await;
}

/// The `sid` claim of an access token (read, not verified: the server issued it).
fn session_of(token: &str) -> Value {
    use base64::Engine;
    let claims = token.split('.').nth(1).unwrap();
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims)
        .unwrap();
    serde_json::from_slice::<Value>(&claims).unwrap()["sid"].clone()
}

/// A server and the HTTPS receiver it trusts (retries one second apart): the fixture of the
/// delivery tests, on either backend.
pub(crate) struct Hooked {
    app: TestApp,
    receiver: TestReceiver,
}

impl Hooked {
    async fn postgres() -> Self {
        let (app, receiver) = app_with_receiver(Backend::Postgres).await;
        Self { app, receiver }
    }

    async fn sqlite() -> Self {
        let (app, receiver) = app_with_receiver(Backend::Sqlite).await;
        Self { app, receiver }
    }
}

#[on_both_backends]
async fn endpoints_are_checked_and_managed(app: TestApp) {
    let owner = app.logged_in("hooks@example.com").await;
    let org = owner.organization_id.clone();
    let token = owner.access_token.clone();
    let path = "/api/v1/webhooks/endpoints";
    detail_of(
        app.in_org(
            Method::POST,
            &token,
            &org,
            path,
            Some(json!({ "url": "http://hooks.example.com/in", "events": ["user.created"] })),
        )
        .await,
        400,
    )
    .await;
    let locs = locs_of(
            app.in_org(Method::POST, &token, &org, path,
                Some(json!({ "url": "https://hooks.example.com/in", "events": ["user.created", "user.exploded"] }))).await,
        )
        .await;
    assert_eq!(
        locs,
        vec![vec!["body".to_owned(), "events".to_owned(), "1".to_owned()]]
    );
    let locs = locs_of(
        app.in_org(Method::POST, &token, &org, path, Some(json!({})))
            .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "url"]), loc(&["body", "events"])]);

    let created = create_endpoint(
        &app,
        &token,
        &org,
        "https://hooks.example.com/in",
        json!(["member.joined", "user.updated"]),
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ep_"));
    let secret = created["signing_secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(created["is_active"], true);

    let detail = json_of(
        app.in_org(Method::GET, &token, &org, &format!("{path}/{id}"), None)
            .await,
        200,
    )
    .await;
    assert!(detail.get("signing_secret").is_none() && !detail.to_string().contains(&secret));
    assert_eq!(
        detail["delivery_stats"],
        json!({ "total": 0, "successful": 0, "failed": 0 })
    );
    assert_eq!(detail["last_delivery_at"], Value::Null);

    let listed = json_of(
        app.in_org(
            Method::GET,
            &token,
            &org,
            &format!("{path}?is_active=true"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 1);
    assert!(!listed.to_string().contains(&secret));

    let patched = json_of(
            app.in_org(Method::PATCH, &token, &org, &format!("{path}/{id}"),
                Some(json!({ "events": ["member.removed"], "is_active": false, "secret": "a-custom-secret-of-enough-length" }))).await,
            200,
        )
        .await;
    assert_eq!(patched["events"], json!(["member.removed"]));
    assert_eq!(patched["is_active"], false);
    assert!(!patched.to_string().contains("a-custom-secret"));

    // The description: a note for people, trimmed, on several lines if need be; no other
    // control character (PostgreSQL refuses a NUL in any text), at most 500 characters.
    let described = json_of(
        app.in_org(
            Method::PATCH,
            &token,
            &org,
            &format!("{path}/{id}"),
            Some(json!({ "description": "  CRM sync\nowned by the sales team  " })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        described["description"],
        "CRM sync\nowned by the sales team"
    );
    let locs = locs_of(
        app.in_org(
            Method::POST,
            &token,
            &org,
            path,
            Some(json!({ "url": "https://hooks.example.com/in\u{0}", "events": ["user.created"] })),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "url"])]);
    for bad in ["a\u{0}b", "tab\tbed", "x".repeat(501).as_str()] {
        let response = app
            .in_org(
                Method::PATCH,
                &token,
                &org,
                &format!("{path}/{id}"),
                Some(json!({ "description": bad })),
            )
            .await;
        assert_eq!(locs_of(response).await, vec![loc(&["body", "description"])]);
        let body = json!({ "url": "https://hooks.example.com/in", "events": ["user.created"], "description": bad });
        assert_eq!(
            locs_of(
                app.in_org(Method::POST, &token, &org, path, Some(body))
                    .await
            )
            .await,
            vec![loc(&["body", "description"])]
        );
    }
    let detail = json_of(
        app.in_org(Method::GET, &token, &org, &format!("{path}/{id}"), None)
            .await,
        200,
    )
    .await;
    assert_eq!(detail["description"], "CRM sync\nowned by the sales team");

    let catalog = json_of(
        app.in_org(Method::GET, &token, &org, "/api/v1/webhooks/events", None)
            .await,
        200,
    )
    .await;
    let catalog = catalog.as_array().unwrap();
    assert_eq!(catalog.len(), 29);
    assert!(catalog
        .iter()
        .any(|e| e["type"] == "member.joined" && e["category"] == "member"));
    // Honest about who emits what: Gatehouse, or the billing system (through
    // POST /control/events). Every billing type comes from billing, and only those.
    for entry in catalog {
        let billing = entry["type"].as_str().unwrap().starts_with("billing.");
        assert_eq!(
            entry["source"],
            if billing { "billing" } else { "gatehouse" },
            "{entry}"
        );
    }
    assert_eq!(
        catalog.iter().filter(|e| e["source"] == "billing").count(),
        5
    );
    assert!(catalog
        .iter()
        .any(|e| e["type"] == "auth.mfa_enabled" && e["source"] == "gatehouse"));
    // The test ping is sent on request only: not in the catalog, not subscribed to.
    assert!(!catalog.iter().any(|e| e["type"] == "webhook.test"));
    let locs = locs_of(
        app.in_org(
            Method::POST,
            &token,
            &org,
            path,
            Some(json!({ "url": "https://hooks.example.com/in", "events": ["webhook.test"] })),
        )
        .await,
    )
    .await;
    assert_eq!(
        locs,
        vec![vec!["body".to_owned(), "events".to_owned(), "0".to_owned()]]
    );

    // Another organization's member cannot see it.
    let stranger = app.logged_in("stranger-hooks@example.com").await;
    detail_of(
        app.in_org(
            Method::GET,
            &stranger.access_token,
            &stranger.organization_id,
            &format!("{path}/{id}"),
            None,
        )
        .await,
        404,
    )
    .await;

    assert_eq!(
        app.in_org(Method::DELETE, &token, &org, &format!("{path}/{id}"), None)
            .await
            .status(),
        204
    );
    detail_of(
        app.in_org(Method::DELETE, &token, &org, &format!("{path}/{id}"), None)
            .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn only_owners_and_admins_manage_webhooks(app: TestApp) {
    let owner = app.logged_in("hookowner@example.com").await;
    let team = app.create_team(&owner.access_token, "Hook Team").await;
    let org = team["id"].as_str().unwrap();
    let member = app
        .member_of(&owner.access_token, org, "hookmember@example.com", "member")
        .await;
    let detail = detail_of(
        app.in_org(
            Method::POST,
            &member.access_token,
            org,
            "/api/v1/webhooks/endpoints",
            Some(json!({ "url": "https://hooks.example.com/x", "events": ["user.created"] })),
        )
        .await,
        403,
    )
    .await;
    assert!(detail.contains("webhooks.manage"), "{detail}");
    json_of(
        app.in_org(
            Method::GET,
            &member.access_token,
            org,
            "/api/v1/webhooks/events",
            None,
        )
        .await,
        200,
    )
    .await;
}

#[on_both_backends]
async fn the_event_catalogue_needs_credentials_but_no_organization(app: TestApp) {
    let ada = app.logged_in("catalogue-reader@example.com").await;
    // A signed-in user without X-Organization-ID reads the same bare array as with one.
    let without = json_of(
        app.get_as(&ada.access_token, "/api/v1/webhooks/events")
            .await,
        200,
    )
    .await;
    let with = json_of(
        app.in_org(
            Method::GET,
            &ada.access_token,
            &ada.organization_id,
            "/api/v1/webhooks/events",
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(without, with);
    assert_eq!(without.as_array().map(Vec::len), Some(29), "{without}");
    // Still no anonymous reading: 401 with a detail.
    detail_of(
        app.client
            .get(app.url("/api/v1/webhooks/events"))
            .send()
            .await
            .unwrap(),
        401,
    )
    .await;
    detail_of(
        app.get_as("not-a-token", "/api/v1/webhooks/events").await,
        401,
    )
    .await;
}

#[on_both_backends]
async fn a_change_arrives_signed(hooked: Hooked) {
    let Hooked { app, receiver } = hooked;
    let owner = app.logged_in("signed@example.com").await;
    let team = app.create_team(&owner.access_token, "Signed Team").await;
    let org = team["id"].as_str().unwrap();
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        org,
        &receiver.url("/hooks"),
        json!(["member.invited"]),
    )
    .await;
    let secret = endpoint["signing_secret"].as_str().unwrap();
    json_of(
        app.invite(&owner.access_token, org, "newbie@example.com", "viewer")
            .await,
        201,
    )
    .await;

    let requests = receiver.wait_for(1, Duration::from_secs(15)).await;
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/hooks");
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("user-agent"), Some("Service-Webhooks/1.0"));
    assert_eq!(request.header("x-service-event"), Some("member.invited"));
    verify_signature(request, secret);
    let payload: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(payload["event"], "member.invited");
    assert_eq!(payload["webhook_id"], endpoint["id"]);
    assert_eq!(
        payload["delivery_id"],
        request.header("x-service-delivery-id").unwrap()
    );
    assert_eq!(payload["data"]["email"], "newbie@example.com");
    assert_eq!(payload["data"]["organization_id"], org);
    assert!(payload["timestamp"].is_string());

    let id = endpoint["id"].as_str().unwrap();
    let log = wait_until(
        &app,
        &owner.access_token,
        org,
        &format!("/api/v1/webhooks/endpoints/{id}/deliveries"),
        |log| log["items"][0]["status"] == "success",
    )
    .await;
    let delivery = &log["items"][0];
    assert_eq!(delivery["http_status"], 200);
    assert_eq!(delivery["attempt"], 1);
    assert_eq!(delivery["max_attempts"], 5);
    assert_eq!(delivery["event"], "member.invited");
    assert_eq!(delivery["request_body"], payload);
    assert!(delivery["delivered_at"].is_string());
    let detail = json_of(
        app.in_org(
            Method::GET,
            &owner.access_token,
            org,
            &format!("/api/v1/webhooks/endpoints/{id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(detail["delivery_stats"]["successful"], 1);
    assert!(detail["last_delivery_at"].is_string());
    // Not subscribed, not sent.
    assert_eq!(
        receiver
            .requests()
            .iter()
            .filter(|r| r.header("x-service-event") != Some("member.invited"))
            .count(),
        0
    );
}

#[on_both_backends]
async fn failures_retry_on_schedule_then_disable_the_endpoint_and_tell_the_owner(hooked: Hooked) {
    let Hooked { app, receiver } = hooked;
    let owner = app.logged_in("failing@example.com").await;
    let org = owner.organization_id.clone();
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &receiver.url("/down"),
        json!(["user.updated"]),
    )
    .await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    receiver.respond_with(500);
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            "/api/v1/users/me",
            Some(json!({ "full_name": "Failing Fiona" })),
        )
        .await,
        200,
    )
    .await;

    receiver.wait_for(1, Duration::from_secs(15)).await;
    let first_seen = std::time::Instant::now();
    let requests = receiver.wait_for(5, Duration::from_secs(30)).await;
    let took = first_seen.elapsed();
    assert_eq!(requests.len(), 5);
    let ids: Vec<_> = requests
        .iter()
        .map(|r| r.header("x-service-delivery-id").unwrap().to_owned())
        .collect();
    assert!(
        ids.iter().all(|d| d == &ids[0]),
        "one delivery, five attempts: {ids:?}"
    );
    // The schedule is one second between attempts: four gaps.
    assert!(
        took >= Duration::from_millis(3500) && took < Duration::from_secs(15),
        "{took:?}"
    );

    let log = wait_until(
        &app,
        &owner.access_token,
        &org,
        &format!("/api/v1/webhooks/endpoints/{id}/deliveries"),
        |log| {
            log["items"][0]["attempt"] == 5
                && log["items"][0]["next_retry_at"].is_null()
                && log["items"][0]["status"] == "failed"
        },
    )
    .await;
    let delivery = &log["items"][0];
    assert_eq!(delivery["http_status"], 500);
    let delivery_id = delivery["id"].as_str().unwrap().to_owned();

    let detail = wait_until(
        &app,
        &owner.access_token,
        &org,
        &format!("/api/v1/webhooks/endpoints/{id}"),
        |d| d["is_active"] == false,
    )
    .await;
    assert_eq!(detail["delivery_stats"]["failed"], 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !app
        .mails()
        .await
        .iter()
        .any(|m| m.contains("failing@example.com") && m.contains(&id))
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the owner was not told: {:?}",
            app.mails().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Back on, the receiver fixed: a manual retry goes out at once as attempt 6.
    receiver.respond_with(200);
    json_of(
        app.in_org(
            Method::PATCH,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}"),
            Some(json!({ "is_active": true })),
        )
        .await,
        200,
    )
    .await;
    let retry_path = format!("/api/v1/webhooks/deliveries/{delivery_id}/retry");
    let retried = json_of(
        app.in_org(Method::POST, &owner.access_token, &org, &retry_path, None)
            .await,
        200,
    )
    .await;
    assert_eq!(retried["status"], "pending");
    assert_eq!(retried["attempt"], 6);
    assert_eq!(retried["max_attempts"], 5);
    assert_eq!(retried["next_retry_at"], Value::Null);
    assert!(retried["queued_at"].is_string());
    let second = app
        .in_org(Method::POST, &owner.access_token, &org, &retry_path, None)
        .await;
    detail_of(second, 409).await;
    let requests = receiver.wait_for(6, Duration::from_secs(10)).await;
    assert_eq!(
        requests[5].header("x-service-delivery-id").unwrap(),
        delivery_id
    );
    wait_until(
        &app,
        &owner.access_token,
        &org,
        &format!("/api/v1/webhooks/endpoints/{id}/deliveries?status=success"),
        |log| log["total"] == 1,
    )
    .await;
    // Delivered now: a manual retry is for a failed delivery, so it is refused.
    let delivered = app
        .in_org(Method::POST, &owner.access_token, &org, &retry_path, None)
        .await;
    assert!(detail_of(delivered, 409).await.contains("succeeded"));

    // Another organization cannot retry it.
    let stranger = app.logged_in("not-failing@example.com").await;
    detail_of(
        app.in_org(
            Method::POST,
            &stranger.access_token,
            &stranger.organization_id,
            &retry_path,
            None,
        )
        .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn a_users_events_reach_every_organization_they_belong_to(hooked: Hooked) {
    let Hooked { app, receiver } = hooked;
    let owner = app.logged_in("fanout-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Fanout Team").await;
    let team_id = team["id"].as_str().unwrap();
    let member = app
        .member_of(&owner.access_token, team_id, "fanout@example.com", "member")
        .await;
    create_endpoint(
        &app,
        &owner.access_token,
        team_id,
        &receiver.url("/team"),
        json!(["auth.login"]),
    )
    .await;
    create_endpoint(
        &app,
        &member.access_token,
        &member.organization_id,
        &receiver.url("/personal"),
        json!(["auth.login"]),
    )
    .await;
    let tokens = json_of(
        app.login("fanout@example.com", crate::helpers::PASSWORD)
            .await,
        200,
    )
    .await;
    let session = session_of(tokens["access_token"].as_str().unwrap());
    // This login reaches both organizations (earlier ones may arrive too: they were
    // recorded before the endpoints existed and dispatched after).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let mut paths: Vec<String> = receiver
            .requests()
            .iter()
            .filter(|r| {
                serde_json::from_slice::<Value>(&r.body).unwrap()["data"]["session_id"] == session
            })
            .map(|r| r.path.clone())
            .collect();
        paths.sort();
        if paths == ["/personal", "/team"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the login reached {paths:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[on_both_backends]
async fn a_ping_is_signed_logged_and_never_retried(hooked: Hooked) {
    let Hooked { app, receiver } = hooked;
    let owner = app.logged_in("ping@example.com").await;
    let team = app.create_team(&owner.access_token, "Ping Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &receiver.url("/ping"),
        json!(["application.deleted"]),
    )
    .await;
    let id = endpoint["id"].as_str().unwrap();
    let secret = endpoint["signing_secret"].as_str().unwrap();
    let test_path = format!("/api/v1/webhooks/endpoints/{id}/test");

    let pinged = json_of(
        app.in_org(Method::POST, &owner.access_token, &org, &test_path, None)
            .await,
        200,
    )
    .await;
    assert_eq!(pinged["success"], true);
    assert_eq!(pinged["status_code"], 200);
    assert_eq!(pinged["error"], Value::Null);
    assert!(pinged["duration_ms"].is_u64());
    let delivery_id = pinged["delivery_id"].as_str().unwrap().to_owned();
    // Sent before the answer: the receiver has it already.
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.path, "/ping");
    assert_eq!(request.header("x-service-event"), Some("webhook.test"));
    assert_eq!(
        request.header("x-service-delivery-id"),
        Some(delivery_id.as_str())
    );
    verify_signature(request, secret);
    let payload: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(payload["event"], "webhook.test");
    assert_eq!(payload["webhook_id"], id);
    assert_eq!(payload["delivery_id"], delivery_id);

    // In the delivery log, as any delivery is.
    let log = json_of(
        app.in_org(
            Method::GET,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}/deliveries?event=webhook.test"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(log["total"], 1);
    let logged = &log["items"][0];
    assert_eq!(logged["id"], delivery_id);
    assert_eq!(logged["status"], "success");
    assert_eq!(logged["attempt"], 1);
    assert_eq!(logged["http_status"], 200);
    assert_eq!(logged["request_body"], payload);
    // Not retried on request either: another test is another ping.
    let retry = app
        .in_org(
            Method::POST,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/deliveries/{delivery_id}/retry"),
            None,
        )
        .await;
    assert!(detail_of(retry, 409).await.contains("test"));

    // A refusing receiver: reported, logged as failed with no retry due, and not retried
    // (the schedule here is one second).
    receiver.respond_with(500);
    let refused = json_of(
        app.in_org(Method::POST, &owner.access_token, &org, &test_path, None)
            .await,
        200,
    )
    .await;
    assert_eq!(refused["success"], false);
    assert_eq!(refused["status_code"], 500);
    assert!(
        refused["error"].as_str().unwrap().contains("500"),
        "{refused}"
    );
    // Nothing left to send: the failed ping has no retry to come.
    app.deliveries_drained().await;
    assert_eq!(
        receiver.requests().len(),
        2,
        "a failed ping is never retried"
    );
    let log = json_of(
        app.in_org(
            Method::GET,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}/deliveries?status=failed"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(log["total"], 1);
    assert_eq!(log["items"][0]["id"], refused["delivery_id"]);
    assert_eq!(log["items"][0]["next_retry_at"], Value::Null);
    // A ping probes; it does not count towards turning the endpoint off.
    let detail = json_of(
        app.in_org(
            Method::GET,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(detail["is_active"], true);
    assert_eq!(detail["delivery_stats"]["total"], 2);

    // Nobody listening: the failure says why.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!(
        "https://127.0.0.1:{}/gone",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    let dead = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &dead_url,
        json!(["application.deleted"]),
    )
    .await;
    let dead_id = dead["id"].as_str().unwrap();
    let failed = json_of(
        app.in_org(
            Method::POST,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{dead_id}/test"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(failed["success"], false);
    assert_eq!(failed["status_code"], Value::Null);
    assert!(!failed["error"].as_str().unwrap().is_empty(), "{failed}");

    // Only those who manage webhooks, only their organization's endpoints.
    let viewer = app
        .member_of(
            &owner.access_token,
            &org,
            "ping-viewer@example.com",
            "viewer",
        )
        .await;
    detail_of(
        app.in_org(Method::POST, &viewer.access_token, &org, &test_path, None)
            .await,
        403,
    )
    .await;
    let stranger = app.logged_in("ping-stranger@example.com").await;
    detail_of(
        app.in_org(
            Method::POST,
            &stranger.access_token,
            &stranger.organization_id,
            &test_path,
            None,
        )
        .await,
        404,
    )
    .await;
    assert_eq!(receiver.requests().len(), 2);
}

#[on_both_backends]
async fn deleting_an_endpoint_cancels_what_is_pending(hooked: Hooked) {
    let Hooked { app, receiver } = hooked;
    let owner = app.logged_in("cancel@example.com").await;
    let org = owner.organization_id.clone();
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &receiver.url("/cancel"),
        json!(["user.updated"]),
    )
    .await;
    let id = endpoint["id"].as_str().unwrap();
    receiver.respond_with(503);
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            "/api/v1/users/me",
            Some(json!({ "full_name": "Cancel Me" })),
        )
        .await,
        200,
    )
    .await;
    receiver.wait_for(1, Duration::from_secs(15)).await;
    assert_eq!(
        app.in_org(
            Method::DELETE,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}"),
            None
        )
        .await
        .status(),
        204
    );
    app.deliveries_drained().await;
    assert_eq!(
        receiver.requests().len(),
        1,
        "nothing is sent after the endpoint is deleted"
    );
}

/// Two replicas on one PostgreSQL share the work of a burst: every delivery goes out once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_send_each_delivery_once() {
    let (first, receiver) = app_with_receiver(Backend::Postgres).await;
    let second = first.replica().await;
    let owner = first.logged_in("burst@example.com").await;
    let org = owner.organization_id.clone();
    create_endpoint(
        &first,
        &owner.access_token,
        &org,
        &receiver.url("/burst"),
        json!(["user.updated"]),
    )
    .await;
    for i in 0..60 {
        let app = if i % 2 == 0 { &first } else { &second };
        change_name(app, &owner.access_token, &format!("Burst {i}")).await;
    }
    receiver.wait_for(60, Duration::from_secs(30)).await;
    // Every delivery recorded: a second send of one would have come by now.
    first.deliveries_drained().await;
    let requests = receiver.requests();
    let mut ids: Vec<_> = requests
        .iter()
        .map(|r| r.header("x-service-delivery-id").unwrap().to_owned())
        .collect();
    ids.sort();
    let total = ids.len();
    ids.dedup();
    assert_eq!(total, 60, "every delivery once, none twice");
    assert_eq!(ids.len(), 60);
}

/// Saving policies, branding and SSO announces `organization.updated` naming what changed.
async fn business_configuration_changes_are_announced(backend: Backend) {
    let (app, receiver) = app_with_receiver(backend).await;
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap();
    app.set_plan(org, "business").await;
    create_endpoint(
        &app,
        &owner.access_token,
        org,
        &receiver.url("/business"),
        json!(["organization.updated"]),
    )
    .await;

    let path = format!("/api/v1/organizations/{org}/branding");
    let body = json!({ "primary_color": "#123456", "custom_login": { "title": "Acme" } });
    let response = app
        .send_as(Method::PUT, &owner.access_token, &path, Some(body))
        .await;
    json_of(response, 200).await;
    let requests = receiver.wait_for(1, Duration::from_secs(15)).await;
    let event: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(event["event"], "organization.updated");
    assert_eq!(event["data"]["id"], org);
    assert_eq!(
        event["data"]["changed"],
        json!(["branding.primary_color", "branding.custom_login.title"])
    );
    // Saving the same again changes nothing and announces nothing.
    let body = json!({ "primary_color": "#123456" });
    let response = app
        .send_as(Method::PUT, &owner.access_token, &path, Some(body))
        .await;
    json_of(response, 200).await;
    // No event is recorded for it (the operator's view of the outbox), so none can be sent.
    let events = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/events?organization_id={org}&type=organization.updated"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(events["total"], 1, "{events}");
    app.deliveries_drained().await;
    assert_eq!(receiver.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_configuration_changes_are_announced_sqlite() {
    business_configuration_changes_are_announced(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn business_configuration_changes_are_announced_postgres() {
    business_configuration_changes_are_announced(Backend::Postgres).await
}

/// Registering, changing and deleting an application are announced, never with the secret.
async fn application_changes_are_announced(backend: Backend) {
    let (app, receiver) = app_with_receiver(backend).await;
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap();
    create_endpoint(
        &app,
        &owner.access_token,
        org,
        &receiver.url("/apps"),
        json!([
            "application.created",
            "application.updated",
            "application.deleted"
        ]),
    )
    .await;

    let path = format!("/api/v1/organizations/{org}/applications");
    let body = json!({ "name": "Billing", "redirect_uris": ["https://billing.example.com/cb"] });
    let created = json_of(
        app.send_as(Method::POST, &owner.access_token, &path, Some(body))
            .await,
        201,
    )
    .await;
    let one = format!("{path}/{}", created["id"].as_str().unwrap());
    let rename = json!({ "name": "Invoices" });
    json_of(
        app.send_as(Method::PATCH, &owner.access_token, &one, Some(rename))
            .await,
        200,
    )
    .await;
    let rotated = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("{one}/secret"),
            None,
        )
        .await,
        200,
    )
    .await;
    let deleted = app
        .send_as(Method::DELETE, &owner.access_token, &one, None)
        .await;
    assert_eq!(deleted.status(), 204);

    let requests = receiver.wait_for(4, Duration::from_secs(15)).await;
    let mut events: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    events.sort_by_key(|e| {
        gatehouse_domain::model::timestamp::parse(e["timestamp"].as_str().unwrap()).unwrap()
    });
    let kinds: Vec<_> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "application.created",
            "application.updated",
            "application.updated",
            "application.deleted"
        ]
    );
    assert_eq!(events[0]["data"]["client_id"], created["client_id"]);
    assert_eq!(events[1]["data"]["changed"], json!(["name"]));
    assert_eq!(events[2]["data"]["changed"], json!(["client_secret"]));
    assert_eq!(events[3]["data"]["name"], "Invoices");
    for (event, request) in events.iter().zip(&requests) {
        // Checked on every request, whatever the order.
        let body = String::from_utf8_lossy(&request.body);
        assert!(!body.contains(created["client_secret"].as_str().unwrap()));
        assert!(!body.contains(rotated["client_secret"].as_str().unwrap()));
        assert_eq!(event["data"]["organization_id"], org);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_changes_are_announced_sqlite() {
    application_changes_are_announced(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn application_changes_are_announced_postgres() {
    application_changes_are_announced(Backend::Postgres).await
}

#[on_both_backends]
async fn endpoints_per_organization_are_bounded_by_plan(app: TestApp) {
    let owner = app.logged_in("bounded@example.com").await;
    let team = app.create_team(&owner.access_token, "Bounded Team").await;
    let org = team["id"].as_str().unwrap();
    let path = "/api/v1/webhooks/endpoints";
    for i in 0..5 {
        create_endpoint(
            &app,
            &owner.access_token,
            org,
            &format!("https://hooks.example.com/{i}"),
            json!(["user.updated"]),
        )
        .await;
    }
    let sixth = || json!({ "url": "https://hooks.example.com/6", "events": ["user.updated"] });
    let detail = detail_of(
        app.in_org(Method::POST, &owner.access_token, org, path, Some(sixth()))
            .await,
        422,
    )
    .await;
    assert_eq!(
        detail,
        "at most 5 webhook endpoints on the free plan: delete one first"
    );
    let listed = json_of(
        app.in_org(Method::GET, &owner.access_token, org, path, None)
            .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 5, "nothing was created: {listed}");
    // Another organization of the same person has its own bound.
    create_endpoint(
        &app,
        &owner.access_token,
        &owner.organization_id,
        "https://hooks.example.com/mine",
        json!(["user.updated"]),
    )
    .await;

    // A deleted endpoint frees its place; a higher plan has more.
    let first = listed["items"][0]["id"].as_str().unwrap();
    assert_eq!(
        app.in_org(
            Method::DELETE,
            &owner.access_token,
            org,
            &format!("{path}/{first}"),
            None
        )
        .await
        .status(),
        204
    );
    json_of(
        app.in_org(Method::POST, &owner.access_token, org, path, Some(sixth()))
            .await,
        201,
    )
    .await;
    detail_of(
        app.in_org(Method::POST, &owner.access_token, org, path, Some(sixth()))
            .await,
        422,
    )
    .await;
    app.set_plan(org, "starter").await;
    for _ in 5..10 {
        json_of(
            app.in_org(Method::POST, &owner.access_token, org, path, Some(sixth()))
                .await,
            201,
        )
        .await;
    }
    let detail = detail_of(
        app.in_org(Method::POST, &owner.access_token, org, path, Some(sixth()))
            .await,
        422,
    )
    .await;
    assert!(
        detail.contains("at most 10") && detail.contains("starter"),
        "{detail}"
    );
}

/// How long the noisy organization's receiver takes to answer (successfully: its endpoints are
/// never turned off). Long, so that a busy machine has time to see the first 48 arrive and send
/// the quiet delivery before any noisy slot frees; the test does not wait for the answers.
const SLOW_ANSWER: Duration = Duration::from_secs(25);

/// One organization's slow endpoints and their backlog do not hold up another organization's
/// fresh delivery: alone with work, the noisy one takes the free slots but a share's worth (48
/// of 64 by default: beyond its share of 16), and the lease takes the quiet one's delivery at
/// once, into a slot kept free, before the rest of the noisy backlog.
async fn a_noisy_organization_leaves_slots_to_the_others(backend: Backend) {
    let (slow, fast) = (TestReceiver::start().await, TestReceiver::start().await);
    let cas = tempfile::tempdir().unwrap();
    let ca_file = cas.path().join("both.pem");
    std::fs::write(&ca_file, format!("{}\n{}", slow.ca_pem(), fast.ca_pem())).unwrap();
    let app = TestApp::spawn_with(
        backend,
        Options {
            webhook_ca_file: Some(ca_file),
            env: vec![
                // The slow receiver answers within the timeout, and five endpoints could take
                // all 64 slots (16 attempts each in flight) but for the share's worth kept free.
                ("GATEHOUSE_WEBHOOK_TIMEOUT_SECS", "60".to_owned()),
                ("GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY", "16".to_owned()),
            ],
            ..Options::default()
        },
    )
    .await;
    slow.delay(SLOW_ANSWER);

    let noisy = app.logged_in("noisy@example.com").await;
    for i in 0..5 {
        create_endpoint(
            &app,
            &noisy.access_token,
            &noisy.organization_id,
            &slow.url(&format!("/slow/{i}")),
            json!(["user.updated"]),
        )
        .await;
    }
    let quiet = app.logged_in("quiet@example.com").await;
    create_endpoint(
        &app,
        &quiet.access_token,
        &quiet.organization_id,
        &fast.url("/fast"),
        json!(["user.updated"]),
    )
    .await;

    // A backlog of 80 deliveries of the noisy organization, more than all the slots.
    const CHANGES: usize = 16;
    for n in 0..CHANGES {
        change_name(&app, &noisy.access_token, &format!("Noisy {n}")).await;
    }
    slow.wait_for(48, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        slow.requests().len(),
        48,
        "alone, the noisy organization holds every slot but a share's worth, no more"
    );

    change_name(&app, &quiet.access_token, "Quiet Quentin").await;
    let arrived = fast.wait_for(1, SLOW_ANSWER * 4).await;
    let noisy_seen = slow.requests();
    assert!(
        noisy_seen.len() < CHANGES * 5,
        "the quiet delivery came only after the noisy backlog drained ({} of {})",
        noisy_seen.len(),
        CHANGES * 5
    );
    // It took a free slot: every noisy attempt past the 48 in flight came after it.
    assert!(
        noisy_seen[48..]
            .iter()
            .all(|noisy| arrived[0].received_at < noisy.received_at),
        "the quiet delivery waited for a noisy slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_organization_leaves_slots_to_the_others_on_sqlite() {
    a_noisy_organization_leaves_slots_to_the_others(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_organization_leaves_slots_to_the_others_on_postgres() {
    a_noisy_organization_leaves_slots_to_the_others(Backend::Postgres).await;
}
