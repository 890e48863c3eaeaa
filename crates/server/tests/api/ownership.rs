//! Ownership transfer, as an owner who wants to leave would try it: only the owner, signed in,
//! with their password, to an active member; then the old owner is an admin who may leave or
//! delete their account. Two `member.role_changed` deliveries and one audit record.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, loc, locs_of, Backend, TestApp, PASSWORD};
use crate::webhooks::{app_with_receiver, create_endpoint, wait_until};

fn transfer(org: &str) -> String {
    format!("/api/v1/organizations/{org}/transfer-ownership")
}

async fn roles(app: &TestApp, token: &str, org: &str) -> Vec<(String, String)> {
    let members = json_of(
        app.get_as(token, &format!("/api/v1/organizations/{org}/members"))
            .await,
        200,
    )
    .await;
    let mut roles: Vec<(String, String)> = members["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["email"].as_str().unwrap().to_owned(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    roles.sort();
    roles
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(e, r)| ((*e).to_owned(), (*r).to_owned()))
        .collect()
}

async fn the_owner_hands_the_organization_over_and_can_then_leave(backend: Backend) {
    let (app, receiver) = app_with_receiver(backend).await;
    let owner = app.logged_in("own-olga@example.com").await;
    let team = app.create_team(&owner.access_token, "Olga Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let ana = app
        .member_of(&owner.access_token, &org, "own-ana@example.com", "member")
        .await;
    let bob = app
        .member_of(&owner.access_token, &org, "own-bob@example.com", "admin")
        .await;
    let endpoint = create_endpoint(
        &app,
        &owner.access_token,
        &org,
        &receiver.url("/roles"),
        json!(["member.role_changed"]),
    )
    .await;
    let to_ana = |password: &str| json!({ "user_id": ana.user_id, "password": password });
    let before = pairs(&[
        ("own-ana@example.com", "member"),
        ("own-bob@example.com", "admin"),
        ("own-olga@example.com", "owner"),
    ]);

    // An admin is not the owner.
    let detail = detail_of(
        app.send_as(
            Method::POST,
            &bob.access_token,
            &transfer(&org),
            Some(json!({ "user_id": bob.user_id, "password": PASSWORD })),
        )
        .await,
        403,
    )
    .await;
    assert!(
        detail.contains("organization.transfer_ownership"),
        "{detail}"
    );
    // The owner's API key acts as the owner, but ownership is a person's decision.
    let key = json_of(
        app.create_api_key(&owner.access_token, "olga key", &org)
            .await,
        201,
    )
    .await;
    let by_key = app
        .client
        .post(app.url(&transfer(&org)))
        .header("X-API-Key", key["key"].as_str().unwrap())
        .header("X-Organization-ID", &org)
        .json(&to_ana(PASSWORD))
        .send()
        .await
        .unwrap();
    detail_of(by_key, 403).await;
    // A wrong password moves nothing, and says which field.
    let wrong = app
        .send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&org),
            Some(to_ana("not the password")),
        )
        .await;
    assert_eq!(locs_of(wrong).await, vec![loc(&["body", "password"])]);
    // Missing fields are named.
    let empty = app
        .send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&org),
            Some(json!({ "user_id": "nope" })),
        )
        .await;
    assert_eq!(
        locs_of(empty).await,
        vec![loc(&["body", "user_id"]), loc(&["body", "password"])]
    );
    // Only an active member: an outsider (or a pending invitee, who has no account here) is
    // not found; oneself is refused.
    let outsider = app.logged_in("own-out@example.com").await;
    detail_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&org),
            Some(json!({ "user_id": outsider.user_id, "password": PASSWORD })),
        )
        .await,
        404,
    )
    .await;
    detail_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&org),
            Some(json!({ "user_id": owner.user_id, "password": PASSWORD })),
        )
        .await,
        422,
    )
    .await;
    // A personal workspace lives with its user.
    detail_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&owner.organization_id),
            Some(to_ana(PASSWORD)),
        )
        .await,
        422,
    )
    .await;
    assert_eq!(roles(&app, &owner.access_token, &org).await, before);
    // The owner cannot leave yet.
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/members/{}", owner.user_id),
            None,
        )
        .await,
        422,
    )
    .await;

    let moved = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&org),
            Some(to_ana(PASSWORD)),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(moved["owner"]["user_id"], json!(ana.user_id));
    assert_eq!(moved["owner"]["role"], "owner");
    assert_eq!(moved["previous_owner"]["user_id"], json!(owner.user_id));
    assert_eq!(moved["previous_owner"]["role"], "admin");
    assert!(moved["transferred_at"].is_string());
    assert_eq!(
        roles(&app, &ana.access_token, &org).await,
        pairs(&[
            ("own-ana@example.com", "owner"),
            ("own-bob@example.com", "admin"),
            ("own-olga@example.com", "admin"),
        ])
    );
    // The old owner is an admin now: no second transfer, no deleting the organization.
    detail_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &transfer(&org),
            Some(json!({ "user_id": bob.user_id, "password": PASSWORD })),
        )
        .await,
        403,
    )
    .await;
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}"),
            None,
        )
        .await,
        403,
    )
    .await;

    // Two role changes went out, each with the role it had.
    let id = endpoint["id"].as_str().unwrap();
    let log = wait_until(
        &app,
        &ana.access_token,
        &org,
        &format!("/api/v1/webhooks/endpoints/{id}/deliveries"),
        |log| {
            log["items"].as_array().is_some_and(|items| {
                items.len() == 2 && items.iter().all(|d| d["status"] == "success")
            })
        },
    )
    .await;
    let mut changes: Vec<(Value, Value, Value)> = log["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let data = &d["request_body"]["data"];
            (
                data["user_id"].clone(),
                data["role"].clone(),
                data["previous_role"].clone(),
            )
        })
        .collect();
    changes.sort_by_key(|(_, role, _)| role.to_string());
    assert_eq!(
        changes,
        vec![
            (json!(owner.user_id), json!("admin"), json!("owner")),
            (json!(ana.user_id), json!("owner"), json!("member")),
        ]
    );
    // One audit record, by the old owner, on the new one.
    let records = app
        .audit_records("?action=organization.ownership_transferred")
        .await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        records[0]["actor"],
        json!({ "type": "user", "id": owner.user_id })
    );
    assert_eq!(
        records[0]["target"],
        json!({ "type": "member", "id": ana.user_id })
    );
    assert_eq!(records[0]["organization_id"], json!(org));

    // Now the old owner may leave, and delete their account.
    json_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/members/{}", owner.user_id),
            None,
        )
        .await,
        200,
    )
    .await;
    detail_of(
        app.get_as(&owner.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        404,
    )
    .await;
    let gone = app
        .send_as(
            Method::DELETE,
            &owner.access_token,
            "/api/v1/users/me",
            None,
        )
        .await;
    assert_eq!(gone.status(), 204);
    // The organization lives on under its new owner.
    let team = json_of(
        app.get_as(&ana.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(team["name"], "Olga Team");
}

#[tokio::test]
async fn the_owner_hands_the_organization_over_and_can_then_leave_sqlite() {
    the_owner_hands_the_organization_over_and_can_then_leave(Backend::Sqlite).await;
}

#[tokio::test]
async fn the_owner_hands_the_organization_over_and_can_then_leave_postgres() {
    the_owner_hands_the_organization_over_and_can_then_leave(Backend::Postgres).await;
}
