//! API keys: created once, shown once, acting inside their organization.

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp};

#[on_both_backends]
async fn an_api_key_authenticates_with_its_organization(app: TestApp) {
    let user = app.logged_in("kim@example.com").await;
    let created = json_of(
        app.create_api_key(&user.access_token, "deploys", &user.organization_id)
            .await,
        201,
    )
    .await;
    let key = created["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("ghk_"));
    assert_eq!(created["prefix"], &key[..12]);
    assert_eq!(created["organization_id"], user.organization_id.as_str());

    let health = json_of(app.health_with_key(&key, &user.organization_id).await, 200).await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["organization_id"], user.organization_id.as_str());

    // The key acts as its creator.
    let me = app
        .client
        .get(app.url("/api/v1/users/me"))
        .header("X-API-Key", &key)
        .header("X-Organization-ID", &user.organization_id)
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(me, 200).await["email"], "kim@example.com");

    // Listed without the secret.
    let listed = json_of(
        app.client
            .get(app.url("/api/v1/api-keys"))
            .bearer_auth(&user.access_token)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(listed["total"], 1);
    assert!(!listed.to_string().contains(&key));

    let id = created["id"].as_str().unwrap();
    let deleted = app
        .client
        .delete(app.url(&format!("/api/v1/api-keys/{id}")))
        .bearer_auth(&user.access_token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    detail_of(app.health_with_key(&key, &user.organization_id).await, 401).await;
}

#[on_both_backends]
async fn an_api_key_is_refused_outside_its_organization(app: TestApp) {
    let owner = app.logged_in("lee@example.com").await;
    let other = app.logged_in("max@example.com").await;
    let created = json_of(
        app.create_api_key(&owner.access_token, "ci", &owner.organization_id)
            .await,
        201,
    )
    .await;
    let key = created["key"].as_str().unwrap();
    detail_of(app.health_with_key(key, &other.organization_id).await, 401).await;
    detail_of(
        app.health_with_key("ghk_unknown", &owner.organization_id)
            .await,
        401,
    )
    .await;
    // A key sent without its organization is no credential: 401 with a detail, as the spec
    // has it, on every route that takes one (one inside an organization, one outside, the
    // event catalogue that needs no organization).
    for path in [
        "/api/v1/health",
        "/api/v1/users/me",
        "/api/v1/webhooks/events",
    ] {
        let without_org = app
            .client
            .get(app.url(path))
            .header("X-API-Key", key)
            .send()
            .await
            .unwrap();
        let detail = detail_of(without_org, 401).await;
        assert!(detail.contains("X-Organization-ID"), "{path}: {detail}");
    }
    // An organization that is not a UUID is still a malformed header.
    let malformed = app
        .client
        .get(app.url("/api/v1/health"))
        .header("X-API-Key", key)
        .header("X-Organization-ID", "acme")
        .send()
        .await
        .unwrap();
    assert_eq!(
        locs_of(malformed).await,
        vec![loc(&["header", "X-Organization-ID"])]
    );
    detail_of(
        app.client
            .get(app.url("/api/v1/health"))
            .send()
            .await
            .unwrap(),
        401,
    )
    .await;
}

#[on_both_backends]
async fn keys_are_only_made_for_ones_own_organizations(app: TestApp) {
    let owner = app.logged_in("ann@example.com").await;
    let stranger = app.logged_in("bob@example.com").await;
    detail_of(
        app.create_api_key(&stranger.access_token, "sneaky", &owner.organization_id)
            .await,
        404,
    )
    .await;
    let locs = locs_of(
        app.create_api_key(&owner.access_token, "", "not-a-uuid")
            .await,
    )
    .await;
    assert_eq!(
        locs,
        vec![loc(&["body", "name"]), loc(&["body", "organization_id"])]
    );
    // Someone else's key cannot be deleted, and does not exist for them.
    let created = json_of(
        app.create_api_key(&owner.access_token, "mine", &owner.organization_id)
            .await,
        201,
    )
    .await;
    let id = created["id"].as_str().unwrap();
    let response = app
        .client
        .delete(app.url(&format!("/api/v1/api-keys/{id}")))
        .bearer_auth(&stranger.access_token)
        .send()
        .await
        .unwrap();
    detail_of(response, 404).await;
}

#[on_both_backends]
async fn a_user_holds_at_most_fifty_keys_in_one_organization(app: TestApp) {
    let owner = app.logged_in("collector@example.com").await;
    let team = app.create_team(&owner.access_token, "Key Hoarders").await;
    let team = team["id"].as_str().unwrap().to_owned();
    let mut first = String::new();
    for n in 0..50 {
        let created = json_of(
            app.create_api_key(&owner.access_token, &format!("key {n}"), &team)
                .await,
            201,
        )
        .await;
        if n == 0 {
            first = created["id"].as_str().unwrap().to_owned();
        }
    }
    let refused = detail_of(
        app.create_api_key(&owner.access_token, "one more", &team)
            .await,
        422,
    )
    .await;
    assert!(refused.contains("50 API keys"), "{refused}");

    // Counted per organization: the personal workspace has room, and so does a colleague.
    json_of(
        app.create_api_key(&owner.access_token, "elsewhere", &owner.organization_id)
            .await,
        201,
    )
    .await;
    let colleague = app
        .member_of(
            &owner.access_token,
            &team,
            "colleague@example.com",
            "member",
        )
        .await;
    json_of(
        app.create_api_key(&colleague.access_token, "theirs", &team)
            .await,
        201,
    )
    .await;

    // A key deleted makes room for one.
    let deleted = app
        .client
        .delete(app.url(&format!("/api/v1/api-keys/{first}")))
        .bearer_auth(&owner.access_token)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    json_of(
        app.create_api_key(&owner.access_token, "replacement", &team)
            .await,
        201,
    )
    .await;
    detail_of(
        app.create_api_key(&owner.access_token, "and another", &team)
            .await,
        422,
    )
    .await;
}
