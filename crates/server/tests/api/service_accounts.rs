//! Service accounts and the organization's keys, as a team that runs integrations would try
//! them: a key that keeps working after its creator leaves and stops the moment its account is
//! deleted, a role that binds it, audit records that name it, and admins who see and revoke
//! every key of their organization, never another organization's.

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp};

/// A request with a key (`X-API-Key`) in the organization of `X-Organization-ID`.
async fn with_key(
    app: &TestApp,
    key: &str,
    organization: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Response {
    let mut request = app
        .client
        .request(method, app.url(path))
        .header("X-API-Key", key)
        .header("X-Organization-ID", organization);
    if let Some(body) = body {
        request = request.json(&body);
    }
    request.send().await.unwrap()
}

#[on_both_backends]
async fn a_service_accounts_key_outlives_its_creator_and_stops_with_the_account(app: TestApp) {
    let owner = app.logged_in("sa-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Robots Inc").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let org_path = format!("/api/v1/organizations/{org}");
    let accounts = format!("{org_path}/service-accounts");
    let bob = app
        .member_of(&owner.access_token, &org, "sa-bob@example.com", "admin")
        .await;
    let mia = app
        .member_of(&owner.access_token, &org, "sa-mia@example.com", "member")
        .await;

    // Bob, an admin, makes an account for the deploy pipeline, and a key for it.
    let account = json_of(
        app.send_as(
            Method::POST,
            &bob.access_token,
            &accounts,
            Some(json!({ "name": "CI deploys", "role": "member" })),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(account["name"], "CI deploys");
    assert_eq!(account["role"], "member");
    assert_eq!(account["organization_id"], org.as_str());
    assert_eq!(account["created_by"], json!(bob.user_id));
    let account_path = format!("{accounts}/{}", account["id"].as_str().unwrap());
    let created = json_of(
        app.send_as(
            Method::POST,
            &bob.access_token,
            &format!("{account_path}/keys"),
            Some(json!({ "name": "pipeline" })),
        )
        .await,
        201,
    )
    .await;
    let key = created["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("ghk_"), "{created}");
    assert!(key.starts_with(created["prefix"].as_str().unwrap()));

    // It acts as the account, with the account's role: reads, but does not manage.
    json_of(
        with_key(&app, &key, &org, Method::GET, &org_path, None).await,
        200,
    )
    .await;
    json_of(
        with_key(
            &app,
            &key,
            &org,
            Method::GET,
            &format!("{org_path}/members"),
            None,
        )
        .await,
        200,
    )
    .await;
    let refused = detail_of(
        with_key(
            &app,
            &key,
            &org,
            Method::PATCH,
            &org_path,
            Some(json!({ "name": "Hijacked" })),
        )
        .await,
        403,
    )
    .await;
    assert!(refused.contains("organization.update"), "{refused}");
    // Not outside its organization, and not on a person's own routes.
    detail_of(
        with_key(
            &app,
            &key,
            &owner.organization_id,
            Method::GET,
            &format!("/api/v1/organizations/{}", owner.organization_id),
            None,
        )
        .await,
        401,
    )
    .await;
    let own_header = app
        .client
        .get(app.url(&format!("/api/v1/organizations/{}", owner.organization_id)))
        .header("X-API-Key", &key)
        .header("X-Organization-ID", &org)
        .send()
        .await
        .unwrap();
    detail_of(own_header, 404).await;
    detail_of(
        with_key(&app, &key, &org, Method::GET, "/api/v1/users/me", None).await,
        403,
    )
    .await;
    detail_of(
        with_key(&app, &key, &org, Method::GET, "/api/v1/api-keys", None).await,
        403,
    )
    .await;

    // Bob leaves the organization: the integration he built keeps working.
    json_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("{org_path}/members/{}", bob.user_id),
            None,
        )
        .await,
        200,
    )
    .await;
    json_of(
        with_key(&app, &key, &org, Method::GET, &org_path, None).await,
        200,
    )
    .await;

    // A new role reaches the key at its next request, and what it does is audited as the
    // account's.
    let promoted = json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &account_path,
            Some(json!({ "role": "admin", "name": "CI deploys (prod)" })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(promoted["role"], "admin");
    assert_eq!(promoted["name"], "CI deploys (prod)");
    json_of(
        with_key(
            &app,
            &key,
            &org,
            Method::PATCH,
            &org_path,
            Some(json!({ "name": "Robots Ltd" })),
        )
        .await,
        200,
    )
    .await;
    let records = app.audit_records("?action=organization.updated").await;
    assert_eq!(
        records[0]["actor"],
        json!({ "type": "service_account", "id": account["id"] }),
        "{records:?}"
    );
    // An account names the member who made it: its own key makes none.
    detail_of(
        with_key(
            &app,
            &key,
            &org,
            Method::POST,
            &accounts,
            Some(json!({ "name": "Sneaky", "role": "viewer" })),
        )
        .await,
        403,
    )
    .await;
    // Nor spare keys of itself, admin as it is: a leaked key cannot outlive its revocation.
    let refused = detail_of(
        with_key(
            &app,
            &key,
            &org,
            Method::POST,
            &format!("{account_path}/keys"),
            Some(json!({ "name": "spare" })),
        )
        .await,
        403,
    )
    .await;
    assert!(refused.contains("not an API key"), "{refused}");

    // Reading and listing.
    let listed = json_of(app.get_as(&owner.access_token, &accounts).await, 200).await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["items"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["items"][0]["id"], account["id"]);
    json_of(app.get_as(&owner.access_token, &account_path).await, 200).await;

    // Deleting the account stops its key at once.
    let deleted = app
        .send_as(Method::DELETE, &owner.access_token, &account_path, None)
        .await;
    assert_eq!(deleted.status(), 204);
    detail_of(
        with_key(&app, &key, &org, Method::GET, &org_path, None).await,
        401,
    )
    .await;
    detail_of(app.get_as(&owner.access_token, &account_path).await, 404).await;
    for action in [
        "service_account.created",
        "service_account.updated",
        "service_account.deleted",
    ] {
        let records = app.audit_records(&format!("?action={action}")).await;
        assert_eq!(records.len(), 1, "{action}: {records:?}");
        assert_eq!(records[0]["target"]["type"], "service_account");
    }
    // Members do not manage service accounts.
    let refused = detail_of(
        app.send_as(
            Method::POST,
            &mia.access_token,
            &accounts,
            Some(json!({ "name": "Mine", "role": "viewer" })),
        )
        .await,
        403,
    )
    .await;
    assert!(refused.contains("service_accounts.manage"), "{refused}");
    // The catalog lists the new events.
    let catalog = json_of(
        app.in_org(
            Method::GET,
            &owner.access_token,
            &org,
            "/api/v1/webhooks/events",
            None,
        )
        .await,
        200,
    )
    .await;
    for event in [
        "service_account.created",
        "service_account.updated",
        "service_account.deleted",
    ] {
        assert!(
            catalog.to_string().contains(event),
            "{event} missing from {catalog}"
        );
    }
}

#[on_both_backends]
async fn a_service_account_gets_no_role_above_its_makers(app: TestApp) {
    let owner = app.logged_in("sa-rank-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Rank Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let accounts = format!("/api/v1/organizations/{org}/service-accounts");
    let admin = app
        .member_of(
            &owner.access_token,
            &org,
            "sa-rank-admin@example.com",
            "admin",
        )
        .await;

    let owner_role = app
        .send_as(
            Method::POST,
            &owner.access_token,
            &accounts,
            Some(json!({ "name": "Boss bot", "role": "owner" })),
        )
        .await;
    assert_eq!(locs_of(owner_role).await, vec![loc(&["body", "role"])]);
    let nonsense = app
        .send_as(
            Method::POST,
            &owner.access_token,
            &accounts,
            Some(json!({ "name": " ", "role": "Super User!" })),
        )
        .await;
    assert_eq!(
        locs_of(nonsense).await,
        vec![loc(&["body", "name"]), loc(&["body", "role"])]
    );
    // An admin gives admin at most.
    json_of(
        app.send_as(
            Method::POST,
            &admin.access_token,
            &accounts,
            Some(json!({ "name": "Admin bot", "role": "admin" })),
        )
        .await,
        201,
    )
    .await;
    // An OAuth-scoped or personal route cannot reach it; an unknown id is not found.
    detail_of(
        app.get_as(
            &owner.access_token,
            &format!("{accounts}/{}", uuid::Uuid::now_v7()),
        )
        .await,
        404,
    )
    .await;
    detail_of(
        app.get_as(&owner.access_token, &format!("{accounts}/not-a-uuid"))
            .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn admins_see_and_revoke_every_key_of_their_organization_and_no_other(app: TestApp) {
    let owner = app.logged_in("keys-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Keyring").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let org_path = format!("/api/v1/organizations/{org}");
    let admin = app
        .member_of(&owner.access_token, &org, "keys-admin@example.com", "admin")
        .await;
    let member = app
        .member_of(
            &owner.access_token,
            &org,
            "keys-member@example.com",
            "member",
        )
        .await;
    let viewer = app
        .member_of(
            &owner.access_token,
            &org,
            "keys-viewer@example.com",
            "viewer",
        )
        .await;
    let member_key = json_of(
        app.create_api_key(&member.access_token, "member laptop", &org)
            .await,
        201,
    )
    .await;
    let account = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("{org_path}/service-accounts"),
            Some(json!({ "name": "Exporter", "role": "viewer" })),
        )
        .await,
        201,
    )
    .await;
    let account_key = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!(
                "{org_path}/service-accounts/{}/keys",
                account["id"].as_str().unwrap()
            ),
            Some(json!({ "name": "nightly" })),
        )
        .await,
        201,
    )
    .await;
    // Another organization's key, which this organization's admins must not see or touch.
    let stranger = app.logged_in("keys-stranger@example.com").await;
    let stranger_key = json_of(
        app.create_api_key(&stranger.access_token, "theirs", &stranger.organization_id)
            .await,
        201,
    )
    .await;

    let listed = json_of(
        app.get_as(&admin.access_token, &format!("{org_path}/api-keys"))
            .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 2, "{listed}");
    let items = listed["items"].as_array().unwrap();
    // Newest first: the account's key, then the member's.
    assert_eq!(items[0]["id"], account_key["id"]);
    assert_eq!(items[0]["service_account_id"], account["id"]);
    assert_eq!(items[0]["user_id"], Value::Null);
    assert_eq!(items[1]["id"], member_key["id"]);
    assert_eq!(items[1]["user_id"], json!(member.user_id));
    assert_eq!(items[1]["service_account_id"], Value::Null);
    for item in items {
        assert!(item.get("key").is_none(), "a secret in the list: {item}");
    }
    let text = listed.to_string();
    assert!(
        !text.contains(member_key["key"].as_str().unwrap())
            && !text.contains(account_key["key"].as_str().unwrap())
    );
    // Pages.
    let second = json_of(
        app.get_as(
            &admin.access_token,
            &format!("{org_path}/api-keys?page=2&page_size=1"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(second["items"][0]["id"], member_key["id"]);
    assert_eq!(second["has_prev"], true);
    // Members and viewers do not see the organization's keys.
    for token in [&member.access_token, &viewer.access_token] {
        let refused = detail_of(
            app.get_as(token, &format!("{org_path}/api-keys")).await,
            403,
        )
        .await;
        assert!(refused.contains("api_keys.manage"), "{refused}");
    }

    // The admin revokes the member's key: it stops at once, audited as the admin's.
    let revoke = |id: &Value| format!("{org_path}/api-keys/{}", id.as_str().unwrap());
    assert_eq!(
        app.send_as(
            Method::DELETE,
            &admin.access_token,
            &revoke(&member_key["id"]),
            None
        )
        .await
        .status(),
        204
    );
    detail_of(
        app.health_with_key(member_key["key"].as_str().unwrap(), &org)
            .await,
        401,
    )
    .await;
    let records = app.audit_records("?action=api_key.revoked").await;
    assert_eq!(
        records[0]["actor"],
        json!({ "type": "user", "id": admin.user_id })
    );
    assert_eq!(
        records[0]["target"],
        json!({ "type": "api_key", "id": member_key["id"] })
    );
    // Another organization's key is not found here, and keeps working.
    detail_of(
        app.send_as(
            Method::DELETE,
            &admin.access_token,
            &revoke(&stranger_key["id"]),
            None,
        )
        .await,
        404,
    )
    .await;
    json_of(
        app.health_with_key(
            stranger_key["key"].as_str().unwrap(),
            &stranger.organization_id,
        )
        .await,
        200,
    )
    .await;
    // A viewer cannot revoke; the account's key still works.
    detail_of(
        app.send_as(
            Method::DELETE,
            &viewer.access_token,
            &revoke(&account_key["id"]),
            None,
        )
        .await,
        403,
    )
    .await;
    json_of(
        with_key(
            &app,
            account_key["key"].as_str().unwrap(),
            &org,
            Method::GET,
            &org_path,
            None,
        )
        .await,
        200,
    )
    .await;
    // Revoking it stops it too.
    assert_eq!(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &revoke(&account_key["id"]),
            None
        )
        .await
        .status(),
        204
    );
    detail_of(
        with_key(
            &app,
            account_key["key"].as_str().unwrap(),
            &org,
            Method::GET,
            &org_path,
            None,
        )
        .await,
        401,
    )
    .await;
    let listed = json_of(
        app.get_as(&owner.access_token, &format!("{org_path}/api-keys"))
            .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 0, "{listed}");
}

#[on_both_backends]
async fn another_organizations_admin_reaches_none_of_its_service_accounts(app: TestApp) {
    let owner = app.logged_in("sa-victim@example.com").await;
    let team = app.create_team(&owner.access_token, "Victim Co").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let account = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/service-accounts"),
            Some(json!({ "name": "Payroll", "role": "admin" })),
        )
        .await,
        201,
    )
    .await;
    let id = account["id"].as_str().unwrap();
    let attacker = app.logged_in("sa-attacker@example.com").await;
    let theirs = &attacker.organization_id;
    // Through the attacker's own organization, with the victim's account id.
    let via_own = format!("/api/v1/organizations/{theirs}/service-accounts/{id}");
    detail_of(app.get_as(&attacker.access_token, &via_own).await, 404).await;
    detail_of(
        app.send_as(
            Method::PATCH,
            &attacker.access_token,
            &via_own,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        404,
    )
    .await;
    detail_of(
        app.send_as(
            Method::POST,
            &attacker.access_token,
            &format!("{via_own}/keys"),
            Some(json!({ "name": "x" })),
        )
        .await,
        404,
    )
    .await;
    detail_of(
        app.send_as(Method::DELETE, &attacker.access_token, &via_own, None)
            .await,
        404,
    )
    .await;
    // Through the victim's organization: not a member.
    let direct = format!("/api/v1/organizations/{org}/service-accounts/{id}");
    detail_of(app.get_as(&attacker.access_token, &direct).await, 404).await;
    detail_of(
        app.get_as(
            &attacker.access_token,
            &format!("/api/v1/organizations/{org}/api-keys"),
        )
        .await,
        404,
    )
    .await;
    // Untouched.
    let still = json_of(app.get_as(&owner.access_token, &direct).await, 200).await;
    assert_eq!(still["role"], "admin");
    assert_eq!(still["name"], "Payroll");
}
