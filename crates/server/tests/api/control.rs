//! The control plane (`/control`), as an operator uses it: the token, stored events, dead
//! letters and their replay after a receiver outage.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::{
    helpers::{detail_of, json_of, locs_of, on_both_backends, Backend, Options, TestApp},
    webhooks::{app_with_receiver, create_endpoint, verify_signature, wait_until},
};

async fn control_plane_off(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            control_plane_off: true,
            ..Options::default()
        },
    )
    .await;
    let user = app.logged_in("no-control@example.com").await;
    // Nothing is there: the answer is the unknown path's, whatever the credentials.
    for (method, path) in [
        (Method::GET, "/control/events"),
        (Method::GET, "/control/dead-letters"),
        (Method::POST, "/control/dead-letters/replay"),
        (Method::DELETE, "/control/events"),
        (Method::GET, "/control/nothing"),
    ] {
        for token in [crate::helpers::CONTROL_TOKEN, user.access_token.as_str()] {
            let response = app
                .send_as(method.clone(), token, path, Some(json!({})))
                .await;
            assert_eq!(
                detail_of(response, 404).await,
                "no such route",
                "{method} {path}"
            );
        }
    }
}

#[tokio::test]
async fn without_a_token_configured_there_is_no_control_plane_sqlite() {
    control_plane_off(Backend::Sqlite).await;
}

#[tokio::test]
async fn without_a_token_configured_there_is_no_control_plane_postgres() {
    control_plane_off(Backend::Postgres).await;
}

#[on_both_backends]
async fn only_the_operator_token_opens_the_control_plane(app: TestApp) {
    let user = app.logged_in("not-an-operator@example.com").await;
    for token in [user.access_token.as_str(), "", "test-operator-token"] {
        let response = app
            .send_as(Method::GET, token, "/control/events", None)
            .await;
        assert_eq!(response.headers()["www-authenticate"], "Bearer");
        detail_of(response, 401).await;
    }
    let bare = reqwest::get(app.url("/control/dead-letters"))
        .await
        .unwrap();
    detail_of(bare, 401).await;
    json_of(
        app.as_operator(Method::GET, "/control/events", None).await,
        200,
    )
    .await;
    // Once on, an unknown method is the usual 405.
    detail_of(
        app.as_operator(Method::DELETE, "/control/events", None)
            .await,
        405,
    )
    .await;
}

#[on_both_backends]
async fn the_operator_reads_every_organizations_events_filtered(app: TestApp) {
    let ada = app.logged_in("events-ada@example.com").await;
    let team = app.create_team(&ada.access_token, "Events Team").await;
    let team_id = team["id"].as_str().unwrap();
    let grace = app.logged_in("events-grace@example.com").await;

    let path = format!("/control/events?organization_id={team_id}");
    let events = json_of(app.as_operator(Method::GET, &path, None).await, 200).await;
    assert_eq!(events["total"], 1, "{events}");
    let created = &events["items"][0];
    assert_eq!(created["type"], "organization.created");
    assert_eq!(created["organization_id"], team_id);
    assert_eq!(created["user_id"], ada.user_id);
    assert_eq!(created["data"]["name"], "Events Team");
    assert!(created["occurred_at"].is_string());

    // Every organization's, newest first; filtered by type.
    let all = json_of(
        app.as_operator(
            Method::GET,
            "/control/events?type=user.created&page_size=100",
            None,
        )
        .await,
        200,
    )
    .await;
    let users: Vec<&Value> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["user_id"])
        .collect();
    assert_eq!(users.first(), Some(&&json!(grace.user_id)));
    assert!(users.contains(&&json!(ada.user_id)));
    assert!(all["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["type"] == "user.created"));

    let later = json_of(
        app.as_operator(
            Method::GET,
            "/control/events?since=2999-01-01T00:00:00Z",
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(later["total"], 0);
    for (query, name) in [
        ("since=yesterday", "since"),
        ("type=user.exploded", "type"),
        ("organization_id=acme", "organization_id"),
    ] {
        let locs = locs_of(
            app.as_operator(Method::GET, &format!("/control/events?{query}"), None)
                .await,
        )
        .await;
        assert_eq!(locs, vec![vec!["query".to_owned(), name.to_owned()]]);
    }
}

/// A receiver down for the whole schedule (a second between attempts here) leaves dead
/// letters; once it is back, a replay sends each of them once more with its `delivery_id`.
async fn replay_after_an_outage(backend: Backend) {
    let (app, receiver) = app_with_receiver(backend).await;
    let owner = app.logged_in("outage@example.com").await;
    let org = owner.organization_id.clone();
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &receiver.url("/outage"),
        json!(["user.updated"]),
    )
    .await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    let secret = endpoint["signing_secret"].as_str().unwrap().to_owned();
    receiver.respond_with(503);

    // Two changes, each failing its five attempts (which turns the endpoint off; it is turned
    // back on between them).
    let mut dead = Vec::new();
    for (round, name) in ["Outage One", "Outage Two"].into_iter().enumerate() {
        json_of(
            app.send_as(
                Method::PATCH,
                &owner.access_token,
                "/api/v1/users/me",
                Some(json!({ "full_name": name })),
            )
            .await,
            200,
        )
        .await;
        let log = wait_until(
            &app,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}/deliveries?status=failed"),
            |log| {
                log["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|d| d["attempt"] == 5 && d["next_retry_at"].is_null())
                    .count()
                    == round + 1
            },
        )
        .await;
        dead.push(log["items"][0]["id"].as_str().unwrap().to_owned());
        wait_until(
            &app,
            &owner.access_token,
            &org,
            &format!("/api/v1/webhooks/endpoints/{id}"),
            |d| d["is_active"] == false,
        )
        .await;
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
    }
    assert_eq!(receiver.requests().len(), 10);

    // The operator sees both, newest first, by organization and by endpoint.
    let letters = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/dead-letters?endpoint_id={id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(letters["total"], 2);
    let listed: Vec<&str> = letters["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [dead[1].as_str(), dead[0].as_str()]);
    assert_eq!(letters["items"][0]["organization_id"], org.as_str());
    assert_eq!(letters["items"][0]["webhook_id"], id.as_str());
    assert_eq!(letters["items"][0]["status"], "failed");
    assert_eq!(letters["items"][0]["http_status"], 503);
    let theirs = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/dead-letters?organization_id={org}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(theirs["total"], 2);
    let stranger = app.logged_in("no-outage@example.com").await;
    let none = json_of(
        app.as_operator(
            Method::GET,
            &format!(
                "/control/dead-letters?organization_id={}",
                stranger.organization_id
            ),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(none["total"], 0);

    // The receiver is back: replay one by id, then the rest of the endpoint's.
    receiver.respond_with(200);
    let one = json_of(
        app.as_operator(
            Method::POST,
            "/control/dead-letters/replay",
            Some(json!({ "delivery_ids": [dead[0]] })),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(one["replayed"], 1);
    let rest = json_of(
        app.as_operator(
            Method::POST,
            "/control/dead-letters/replay",
            Some(json!({ "endpoint_id": id })),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(rest["replayed"], 1);
    let requests = receiver.wait_for(12, Duration::from_secs(15)).await;
    let mut replayed: Vec<&str> = requests[10..]
        .iter()
        .map(|r| r.header("x-service-delivery-id").unwrap())
        .collect();
    replayed.sort_unstable();
    let mut expected: Vec<&str> = dead.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(
        replayed, expected,
        "each dead letter once more, with its delivery_id"
    );
    for request in &requests[10..] {
        verify_signature(request, &secret);
        let original = requests[..10]
            .iter()
            .find(|r| r.header("x-service-delivery-id") == request.header("x-service-delivery-id"))
            .unwrap();
        assert_eq!(request.body, original.body, "the same body");
    }
    let log = wait_until(
        &app,
        &owner.access_token,
        &org,
        &format!("/api/v1/webhooks/endpoints/{id}/deliveries?status=success"),
        |log| log["total"] == 2,
    )
    .await;
    assert!(log["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|d| d["attempt"] == 6));
    let letters = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/dead-letters?endpoint_id={id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(letters["total"], 0);
    // Nothing is dead now: a replay finds nothing to send.
    let again = json_of(
        app.as_operator(
            Method::POST,
            "/control/dead-letters/replay",
            Some(json!({ "endpoint_id": id })),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(again["replayed"], 0);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(receiver.requests().len(), 12);

    // A replay names deliveries or an endpoint, not both and not neither.
    for body in [
        json!({}),
        json!({ "delivery_ids": [dead[0]], "endpoint_id": id }),
        json!({ "delivery_ids": [] }),
        json!({ "delivery_ids": ["nope"] }),
    ] {
        let locs = locs_of(
            app.as_operator(
                Method::POST,
                "/control/dead-letters/replay",
                Some(body.clone()),
            )
            .await,
        )
        .await;
        assert!(locs[0][1].starts_with("delivery_ids"), "{body}: {locs:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_replayed_after_an_outage_sqlite() {
    replay_after_an_outage(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_are_replayed_after_an_outage_postgres() {
    replay_after_an_outage(Backend::Postgres).await;
}

/// The billing system posts its events to the control plane: they go through the outbox to the
/// organization's subscribed endpoints, signed like Gatehouse's own.
async fn billing_posts_its_events(backend: Backend) {
    let (app, receiver) = app_with_receiver(backend).await;
    let owner = app.logged_in("billing-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Billing Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &receiver.url("/billing"),
        json!(["billing.invoice.paid"]),
    )
    .await;
    let secret = endpoint["signing_secret"].as_str().unwrap().to_owned();

    let posted = json_of(
        app.as_operator(
            Method::POST,
            "/control/events",
            Some(
                json!({ "type": "billing.invoice.paid", "organization_id": org,
                "data": { "invoice_id": "in_123", "amount_due": 4900, "currency": "eur" } }),
            ),
        )
        .await,
        202,
    )
    .await;
    assert_eq!(posted["type"], "billing.invoice.paid");
    assert_eq!(posted["organization_id"], org.as_str());
    assert_eq!(posted["data"]["invoice_id"], "in_123");
    assert_eq!(posted["data"]["organization_id"], org.as_str());

    let received = receiver.wait_for(1, Duration::from_secs(10)).await;
    verify_signature(&received[0], &secret);
    assert_eq!(
        received[0].header("x-service-event"),
        Some("billing.invoice.paid")
    );
    let body: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(body["event"], "billing.invoice.paid");
    assert_eq!(body["data"]["amount_due"], 4900);
    assert_eq!(body["data"]["organization_id"], org.as_str());
    assert_eq!(body["webhook_id"], endpoint["id"]);

    // It is in the stored events and the audit log, as the operator's.
    let stored = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/events?organization_id={org}&type=billing.invoice.paid"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(stored["total"], 1);
    let audit = app
        .audit_records(&format!(
            "?organization_id={org}&action=organization.billing_event_posted"
        ))
        .await;
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["actor"]["type"], "operator");

    // Gatehouse's own events are not posted from outside; nor to an organization that is not.
    let locs = locs_of(
        app.as_operator(
            Method::POST,
            "/control/events",
            Some(json!({ "type": "member.joined", "organization_id": org, "data": {} })),
        )
        .await,
    )
    .await;
    assert_eq!(locs, [crate::helpers::loc(&["body", "type"])]);
    for body in [
        json!({ "type": "billing.nope", "organization_id": org, "data": {} }),
        json!({ "organization_id": org, "data": {} }),
    ] {
        let locs = locs_of(
            app.as_operator(Method::POST, "/control/events", Some(body.clone()))
                .await,
        )
        .await;
        assert_eq!(locs, [crate::helpers::loc(&["body", "type"])], "{body}");
    }
    let locs = locs_of(app.as_operator(Method::POST, "/control/events",
        Some(json!({ "type": "billing.invoice.paid", "organization_id": "not-a-uuid", "data": [] }))).await).await;
    assert_eq!(
        locs,
        [
            crate::helpers::loc(&["body", "organization_id"]),
            crate::helpers::loc(&["body", "data"])
        ]
    );
    // No store can hold a NUL in JSON text (PostgreSQL's jsonb refuses it): named, not a 500.
    for data in [
        json!({ "note": "a\u{0}b" }),
        json!({ "a\u{0}": 1 }),
        json!({ "lines": [{ "x": "\u{0}" }] }),
    ] {
        let body = json!({ "type": "billing.invoice.paid", "organization_id": org, "data": data });
        let locs = locs_of(
            app.as_operator(Method::POST, "/control/events", Some(body.clone()))
                .await,
        )
        .await;
        assert_eq!(locs, [crate::helpers::loc(&["body", "data"])], "{body}");
    }
    let unknown = uuid::Uuid::now_v7();
    detail_of(
        app.as_operator(
            Method::POST,
            "/control/events",
            Some(json!({ "type": "billing.invoice.paid", "organization_id": unknown, "data": {} })),
        )
        .await,
        404,
    )
    .await;
    // Only the operator posts.
    let refused = app
        .send_as(
            Method::POST,
            &owner.access_token,
            "/control/events",
            Some(json!({ "type": "billing.invoice.paid", "organization_id": org, "data": {} })),
        )
        .await;
    detail_of(refused, 401).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        receiver.requests().len(),
        1,
        "nothing refused was delivered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn billing_events_posted_by_the_operator_are_delivered_signed_sqlite() {
    billing_posts_its_events(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn billing_events_posted_by_the_operator_are_delivered_signed_postgres() {
    billing_posts_its_events(Backend::Postgres).await;
}
