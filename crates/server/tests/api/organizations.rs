//! Organizations: create, list, read, change, delete.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp};

#[on_both_backends]
async fn an_organization_from_creation_to_deletion(app: TestApp) {
    let owner = app.logged_in("olga@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme Research").await;
    assert_eq!(team["slug"], "acme-research");
    assert_eq!(team["type"], "team");
    assert_eq!(team["plan"], "free");
    assert_eq!(team["is_active"], true);
    assert_eq!(team["member_count"], 1);
    let id = team["id"].as_str().unwrap();

    // A second one with the same name gets the next slug; an explicit taken slug is a 409.
    let second = app.create_team(&owner.access_token, "Acme Research").await;
    assert_eq!(second["slug"], "acme-research-2");
    let taken = app
        .send_as(
            Method::POST,
            &owner.access_token,
            "/api/v1/organizations",
            Some(json!({ "name": "Other", "slug": "acme-research" })),
        )
        .await;
    detail_of(taken, 409).await;

    let detail = json_of(
        app.get_as(&owner.access_token, &format!("/api/v1/organizations/{id}"))
            .await,
        200,
    )
    .await;
    assert_eq!(detail["settings"]["default_role"], "member");
    assert_eq!(detail["settings"]["allow_member_invite"], false);
    assert_eq!(detail["application_count"], 0);

    let patched = json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            Some(json!({ "settings": { "default_role": "viewer" } })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["name"], "Acme Research");
    assert_eq!(patched["settings"]["default_role"], "viewer");
    let renamed = json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            Some(json!({ "name": "Acme Labs", "slug": "acme-labs" })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(renamed["slug"], "acme-labs");
    assert_eq!(renamed["settings"]["default_role"], "viewer");

    let deleted = json_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(deleted["id"], id);
    assert_eq!(deleted["is_active"], false);
    assert!(deleted["deleted_at"].is_string());
    detail_of(
        app.get_as(&owner.access_token, &format!("/api/v1/organizations/{id}"))
            .await,
        404,
    )
    .await;
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            None,
        )
        .await,
        404,
    )
    .await;
    let listed = json_of(
        app.get_as(&owner.access_token, "/api/v1/organizations")
            .await,
        200,
    )
    .await;
    assert!(listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|o| o["id"] != id));
}

#[on_both_backends]
async fn the_list_pages_filters_and_searches(app: TestApp) {
    let owner = app.logged_in("paula@example.com").await;
    for name in ["Alpha Team", "Beta Team", "Gamma Squad"] {
        app.create_team(&owner.access_token, name).await;
    }
    let all = json_of(
        app.get_as(&owner.access_token, "/api/v1/organizations")
            .await,
        200,
    )
    .await;
    assert_eq!(all["total"], 4, "three teams and the personal workspace");
    let page = json_of(
        app.get_as(
            &owner.access_token,
            "/api/v1/organizations?page=2&page_size=3",
        )
        .await,
        200,
    )
    .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_prev"], true);
    assert_eq!(page["has_next"], false);
    let teams = json_of(
        app.get_as(&owner.access_token, "/api/v1/organizations?type=team")
            .await,
        200,
    )
    .await;
    assert_eq!(teams["total"], 3);
    let found = json_of(
        app.get_as(&owner.access_token, "/api/v1/organizations?search=TEAM")
            .await,
        200,
    )
    .await;
    assert_eq!(found["total"], 2);
    let past_end = json_of(
        app.get_as(&owner.access_token, "/api/v1/organizations?page=9")
            .await,
        200,
    )
    .await;
    assert_eq!(past_end["items"], json!([]));
    assert_eq!(past_end["total"], 4);

    assert_eq!(
        locs_of(
            app.get_as(&owner.access_token, "/api/v1/organizations?page=0")
                .await
        )
        .await,
        vec![loc(&["query", "page"])]
    );
    assert_eq!(
        locs_of(
            app.get_as(&owner.access_token, "/api/v1/organizations?page_size=101")
                .await
        )
        .await,
        vec![loc(&["query", "page_size"])]
    );
    assert_eq!(
        locs_of(
            app.get_as(&owner.access_token, "/api/v1/organizations?page=x")
                .await
        )
        .await,
        vec![loc(&["query", "page"])]
    );
    assert_eq!(
        locs_of(
            app.get_as(&owner.access_token, "/api/v1/organizations?type=club")
                .await
        )
        .await,
        vec![loc(&["query", "type"])]
    );
}

#[on_both_backends]
async fn bad_organization_fields_are_named(app: TestApp) {
    let owner = app.logged_in("quinn@example.com").await;
    let locs = locs_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            "/api/v1/organizations",
            Some(json!({ "name": "A", "slug": "Not A Slug", "type": "club" })),
        )
        .await,
    )
    .await;
    assert_eq!(
        locs,
        vec![
            loc(&["body", "name"]),
            loc(&["body", "slug"]),
            loc(&["body", "type"])
        ]
    );
    let team = app.create_team(&owner.access_token, "Quinn Co").await;
    let id = team["id"].as_str().unwrap();
    let locs = locs_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            Some(json!({ "settings": { "default_role": "admin" } })),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "settings", "default_role"])]);
    let locs = locs_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            Some(json!({ "settings": { "allow_member_invite": "yes" } })),
        )
        .await,
    )
    .await;
    assert_eq!(
        locs,
        vec![loc(&["body", "settings", "allow_member_invite"])]
    );
}

#[on_both_backends]
async fn a_personal_workspace_cannot_be_deleted_or_joined(app: TestApp) {
    let owner = app.logged_in("rita@example.com").await;
    let personal = &owner.organization_id;
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{personal}"),
            None,
        )
        .await,
        422,
    )
    .await;
    detail_of(
        app.invite(
            &owner.access_token,
            personal,
            "friend@example.com",
            "member",
        )
        .await,
        422,
    )
    .await;
}

#[on_both_backends]
async fn deleting_an_organization_stops_its_api_keys(app: TestApp) {
    let owner = app.logged_in("sam@example.com").await;
    let team = app.create_team(&owner.access_token, "Sam Team").await;
    let id = team["id"].as_str().unwrap();
    let key = json_of(app.create_api_key(&owner.access_token, "ci", id).await, 201).await;
    let key = key["key"].as_str().unwrap();
    json_of(app.health_with_key(key, id).await, 200).await;
    json_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    detail_of(app.health_with_key(key, id).await, 401).await;
}
