//! The audit log, as an organization's admin and the operator read it: who changed a member's
//! role, the actor of an API key, sign-ins that failed, the client's address through a trusted
//! proxy, tenancy, filters and pages, and no secret anywhere.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    detail_of, json_of, locs_of, on_both_backends, Backend, Options, TestApp, CONTROL_TOKEN,
    PASSWORD,
};

fn items(page: &Value) -> &Vec<Value> {
    page["items"].as_array().unwrap()
}

async fn organization_log(app: &TestApp, token: &str, org: &str, query: &str) -> Value {
    json_of(
        app.get_as(
            token,
            &format!("/api/v1/organizations/{org}/audit-log{query}"),
        )
        .await,
        200,
    )
    .await
}

#[on_both_backends]
async fn an_admin_reads_who_changed_a_members_role(app: TestApp) {
    let owner = app.logged_in("audit-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Audited Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let admin = app
        .member_of(
            &owner.access_token,
            &org,
            "audit-admin@example.com",
            "admin",
        )
        .await;
    let carla = app
        .member_of(
            &owner.access_token,
            &org,
            "audit-carla@example.com",
            "member",
        )
        .await;

    // The owner makes Carla a viewer, with a request id and a user agent of their own.
    let path = format!("/api/v1/organizations/{org}/members/{}", carla.user_id);
    let changed = app
        .client
        .patch(app.url(&path))
        .bearer_auth(&owner.access_token)
        .header("X-Request-ID", "req-role-change-1")
        .header("User-Agent", "audit-test/1.0")
        .json(&json!({ "role": "viewer" }))
        .send()
        .await
        .unwrap();
    json_of(changed, 200).await;

    // The admin reads it: actor, target, where from, outcome.
    let log = organization_log(
        &app,
        &admin.access_token,
        &org,
        "?action=member.role_changed",
    )
    .await;
    assert_eq!(log["total"], 1, "{log}");
    let record = &items(&log)[0];
    assert_eq!(record["action"], "member.role_changed");
    assert_eq!(
        record["actor"],
        json!({ "type": "user", "id": owner.user_id })
    );
    assert_eq!(
        record["target"],
        json!({ "type": "member", "id": carla.user_id })
    );
    assert_eq!(record["organization_id"], org.as_str());
    assert_eq!(record["ip"], "127.0.0.1");
    assert_eq!(record["user_agent"], "audit-test/1.0");
    assert_eq!(record["request_id"], "req-role-change-1");
    assert_eq!(record["outcome"], "success");
    assert!(record["occurred_at"].is_string() && record["id"].is_string());

    // A change that did not happen leaves no record: the owner's role cannot change, and
    // there is no such member.
    let owner_path = format!("/api/v1/organizations/{org}/members/{}", owner.user_id);
    detail_of(
        app.send_as(
            Method::PATCH,
            &admin.access_token,
            &owner_path,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        422,
    )
    .await;
    let nobody = format!(
        "/api/v1/organizations/{org}/members/{}",
        uuid::Uuid::new_v4()
    );
    detail_of(
        app.send_as(
            Method::PATCH,
            &admin.access_token,
            &nobody,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        404,
    )
    .await;
    let log = organization_log(
        &app,
        &admin.access_token,
        &org,
        "?action=member.role_changed",
    )
    .await;
    assert_eq!(log["total"], 1);

    // Removing a member is audited too, as the admin's.
    let path = format!("/api/v1/organizations/{org}/members/{}", carla.user_id);
    json_of(
        app.send_as(Method::DELETE, &admin.access_token, &path, None)
            .await,
        200,
    )
    .await;
    let log = organization_log(
        &app,
        &owner.access_token,
        &org,
        &format!("?actor_id={}", admin.user_id),
    )
    .await;
    let actions: Vec<&str> = items(&log)
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["member.removed", "member.joined"],
        "the admin's own, newest first"
    );
    assert_eq!(items(&log)[0]["target"]["id"], carla.user_id.as_str());
    assert_eq!(
        items(&log)[1]["target"],
        json!({ "type": "member", "id": admin.user_id })
    );
}

#[on_both_backends]
async fn an_api_keys_changes_are_its_own(app: TestApp) {
    let owner = app.logged_in("audit-keys@example.com").await;
    let team = app.create_team(&owner.access_token, "Key Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let bob = app
        .member_of(&owner.access_token, &org, "audit-bob@example.com", "member")
        .await;
    let created = json_of(
        app.create_api_key(&owner.access_token, "automation", &org)
            .await,
        201,
    )
    .await;
    let key = created["key"].as_str().unwrap().to_owned();
    let key_id = created["id"].as_str().unwrap().to_owned();

    let path = format!("/api/v1/organizations/{org}/members/{}", bob.user_id);
    let changed = app
        .client
        .patch(app.url(&path))
        .header("X-API-Key", &key)
        .header("X-Organization-ID", &org)
        .json(&json!({ "role": "admin" }))
        .send()
        .await
        .unwrap();
    json_of(changed, 200).await;

    let log = organization_log(&app, &owner.access_token, &org, "").await;
    let actions: Vec<&str> = items(&log)
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "member.role_changed",
            "api_key.created",
            "member.joined",
            "member.invited",
            "organization.created"
        ],
        "newest first"
    );
    assert_eq!(
        items(&log)[0]["actor"],
        json!({ "type": "api_key", "id": key_id })
    );
    assert_eq!(
        items(&log)[1]["actor"],
        json!({ "type": "user", "id": owner.user_id })
    );
    assert_eq!(
        items(&log)[1]["target"],
        json!({ "type": "api_key", "id": key_id })
    );

    // Revoking it is recorded in the key's organization; a second revoke changes nothing.
    let revoke = format!("/api/v1/api-keys/{key_id}");
    assert_eq!(
        app.send_as(Method::DELETE, &owner.access_token, &revoke, None)
            .await
            .status(),
        204
    );
    detail_of(
        app.send_as(Method::DELETE, &owner.access_token, &revoke, None)
            .await,
        404,
    )
    .await;
    let log = organization_log(&app, &owner.access_token, &org, "?action=api_key.revoked").await;
    assert_eq!(log["total"], 1);

    // No secret in any record: not the key, not a token, not the password.
    let all = json_of(
        app.as_operator(Method::GET, "/control/audit?page_size=100", None)
            .await,
        200,
    )
    .await;
    let text = all.to_string();
    for secret in [
        key.as_str(),
        owner.access_token.as_str(),
        owner.refresh_token.as_str(),
        PASSWORD,
        CONTROL_TOKEN,
    ] {
        assert!(!text.contains(secret), "a secret in the audit log");
    }
}

#[on_both_backends]
async fn only_owners_and_admins_read_their_own_organizations_log(app: TestApp) {
    let owner = app.logged_in("tenancy-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Tenant A").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let member = app
        .member_of(
            &owner.access_token,
            &org,
            "tenancy-member@example.com",
            "member",
        )
        .await;
    let other = app.logged_in("tenancy-other@example.com").await;
    let other_team = app.create_team(&other.access_token, "Tenant B").await;
    let other_org = other_team["id"].as_str().unwrap().to_owned();
    json_of(
        app.create_api_key(&other.access_token, "theirs", &other_org)
            .await,
        201,
    )
    .await;
    json_of(
        app.create_api_key(&owner.access_token, "ours", &org).await,
        201,
    )
    .await;

    let path = format!("/api/v1/organizations/{org}/audit-log");
    assert_eq!(
        detail_of(app.get_as(&member.access_token, &path).await, 403).await,
        "missing permission audit.read"
    );
    detail_of(app.get_as(&other.access_token, &path).await, 404).await;

    // Naming another organization in the filter reads one's own all the same.
    let log = organization_log(
        &app,
        &owner.access_token,
        &org,
        &format!("?organization_id={other_org}"),
    )
    .await;
    assert!(
        items(&log)
            .iter()
            .all(|r| r["organization_id"] == org.as_str()),
        "{log}"
    );
    let actions: Vec<&str> = items(&log)
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "api_key.created",
            "member.joined",
            "member.invited",
            "organization.created"
        ]
    );
    // The operator reads both.
    let both = json_of(
        app.as_operator(Method::GET, "/control/audit?action=api_key.created", None)
            .await,
        200,
    )
    .await;
    assert_eq!(both["total"], 2);
    let theirs = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/audit?organization_id={other_org}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        theirs["total"], 2,
        "organization.created and api_key.created"
    );
}

#[on_both_backends]
async fn the_log_is_filtered_and_paged(app: TestApp) {
    let owner = app.logged_in("paged@example.com").await;
    let org = owner.organization_id.clone();
    for n in 0..3 {
        json_of(
            app.create_api_key(&owner.access_token, &format!("key {n}"), &org)
                .await,
            201,
        )
        .await;
    }
    let first = organization_log(&app, &owner.access_token, &org, "?page_size=2").await;
    assert_eq!(first["total"], 3);
    assert_eq!(items(&first).len(), 2);
    let second = organization_log(&app, &owner.access_token, &org, "?page_size=2&page=2").await;
    assert_eq!(items(&second).len(), 1);
    let ids: Vec<&Value> = items(&first)
        .iter()
        .chain(items(&second))
        .map(|r| &r["target"]["id"])
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);

    let later = organization_log(
        &app,
        &owner.access_token,
        &org,
        "?since=2999-01-01T00:00:00Z",
    )
    .await;
    assert_eq!(later["total"], 0);
    let earlier = organization_log(
        &app,
        &owner.access_token,
        &org,
        "?until=2000-01-01T00:00:00Z",
    )
    .await;
    assert_eq!(earlier["total"], 0);
    let path = format!("/api/v1/organizations/{org}/audit-log");
    for (query, name) in [
        ("action=member.exploded", "action"),
        ("since=yesterday", "since"),
        ("actor_id=ada", "actor_id"),
        ("page_size=1000", "page_size"),
    ] {
        let locs = locs_of(
            app.get_as(&owner.access_token, &format!("{path}?{query}"))
                .await,
        )
        .await;
        assert_eq!(locs, vec![vec!["query".to_owned(), name.to_owned()]]);
    }
}

#[on_both_backends]
async fn the_operators_replay_is_audited(app: TestApp) {
    let replay = app
        .client
        .post(app.url("/control/dead-letters/replay"))
        .bearer_auth(CONTROL_TOKEN)
        .header("X-Request-ID", "req-replay-1")
        .json(&json!({ "delivery_ids": ["dlv_00000000000000000000000000000001"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(replay, 202).await["replayed"], 0);
    let log = json_of(
        app.as_operator(
            Method::GET,
            "/control/audit?action=webhook.dead_letters_replayed",
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(log["total"], 1);
    let record = &items(&log)[0];
    assert_eq!(record["actor"], json!({ "type": "operator", "id": null }));
    assert_eq!(record["request_id"], "req-replay-1");
    assert_eq!(record["organization_id"], Value::Null);
}

/// Every password sign-in attempt is recorded, a refused one too, with the client's address as
/// the trusted proxy reports it.
async fn sign_ins_are_audited_through_a_trusted_proxy(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            trusted_proxies: Some("127.0.0.1"),
            ..Options::default()
        },
    )
    .await;
    let ada = app.logged_in("signin-audit@example.com").await;
    for (email, password) in [
        (ada.email.as_str(), "not the password"),
        ("nobody-here@example.com", "whatever it is"),
        (ada.email.as_str(), PASSWORD),
    ] {
        app.client
            .post(app.url("/api/v1/auth/login"))
            .header("X-Forwarded-For", "203.0.113.9")
            .header("User-Agent", "proxy-client/2")
            .json(&json!({ "email": email, "password": password }))
            .send()
            .await
            .unwrap();
    }
    let failed = json_of(
        app.as_operator(Method::GET, "/control/audit?action=auth.login_failed", None)
            .await,
        200,
    )
    .await;
    assert_eq!(failed["total"], 2, "{failed}");
    let unknown = &items(&failed)[0];
    assert_eq!(unknown["actor"], json!({ "type": "user", "id": null }));
    assert_eq!(unknown["outcome"], "failure");
    assert_eq!(unknown["ip"], "203.0.113.9");
    assert_eq!(unknown["user_agent"], "proxy-client/2");
    let wrong = &items(&failed)[1];
    assert_eq!(wrong["actor"], json!({ "type": "user", "id": ada.user_id }));
    assert_eq!(
        wrong["target"],
        json!({ "type": "user", "id": ada.user_id })
    );
    assert_eq!(wrong["ip"], "203.0.113.9");

    let succeeded = json_of(
        app.as_operator(
            Method::GET,
            &format!("/control/audit?action=auth.login&actor_id={}", ada.user_id),
            None,
        )
        .await,
        200,
    )
    .await;
    // The sign-in of `logged_in` (from the test's own address) and the proxied one.
    assert_eq!(succeeded["total"], 2, "{succeeded}");
    assert_eq!(items(&succeeded)[0]["ip"], "203.0.113.9");
    assert_eq!(items(&succeeded)[0]["outcome"], "success");
    let text = succeeded.to_string() + &failed.to_string();
    assert!(!text.contains(PASSWORD) && !text.contains("not the password"));
}

#[tokio::test]
async fn sign_ins_are_audited_through_a_trusted_proxy_sqlite() {
    sign_ins_are_audited_through_a_trusted_proxy(Backend::Sqlite).await;
}

#[tokio::test]
async fn sign_ins_are_audited_through_a_trusted_proxy_postgres() {
    sign_ins_are_audited_through_a_trusted_proxy(Backend::Postgres).await;
}

/// Every audited route, one change at a time: each writes exactly the records named, newest
/// first, and a request that changes nothing writes none.
async fn each_change_writes_its_record(backend: Backend) {
    let (app, receiver) = crate::webhooks::app_with_receiver(backend).await;
    let mut seen = total(&app).await;
    let owner = app.logged_in("table-owner@example.com").await;
    seen = expect(&app, seen, &["auth.login", "user.registered"]).await;
    let token = owner.access_token.clone();

    let team = app.create_team(&token, "Table Team").await;
    let org = team["id"].as_str().unwrap().to_owned();
    seen = expect(&app, seen, &["organization.created"]).await;

    let org_path = format!("/api/v1/organizations/{org}");
    json_of(
        app.send_as(
            Method::PATCH,
            &token,
            &org_path,
            Some(json!({ "name": "Renamed Team" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["organization.updated"]).await;
    // The same name again changes nothing, and writes nothing.
    json_of(
        app.send_as(
            Method::PATCH,
            &token,
            &org_path,
            Some(json!({ "name": "Renamed Team" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &[]).await;

    let invited = json_of(
        app.invite(&token, &org, "table-xena@example.com", "member")
            .await,
        201,
    )
    .await;
    seen = expect(&app, seen, &["member.invited"]).await;
    let invitation = invited["invitation_id"].as_str().unwrap();
    let revoke = format!("{org_path}/invitations/{invitation}");
    assert_eq!(
        app.send_as(Method::DELETE, &token, &revoke, None)
            .await
            .status(),
        204
    );
    seen = expect(&app, seen, &["invitation.revoked"]).await;
    detail_of(
        app.send_as(Method::DELETE, &token, &revoke, None).await,
        404,
    )
    .await;
    seen = expect(&app, seen, &[]).await;

    // Registering and signing in writes the sign-in; the invitation and its acceptance follow.
    let bob = app
        .member_of(&token, &org, "table-bob@example.com", "member")
        .await;
    seen = expect(
        &app,
        seen,
        &[
            "member.joined",
            "member.invited",
            "auth.login",
            "user.registered",
        ],
    )
    .await;
    let bob_path = format!("{org_path}/members/{}", bob.user_id);
    json_of(
        app.send_as(
            Method::PATCH,
            &token,
            &bob_path,
            Some(json!({ "role": "admin" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["member.role_changed"]).await;
    json_of(
        app.send_as(Method::DELETE, &token, &bob_path, None).await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["member.removed"]).await;

    let key = json_of(app.create_api_key(&token, "table key", &org).await, 201).await;
    seen = expect(&app, seen, &["api_key.created"]).await;
    let key_path = format!("/api/v1/api-keys/{}", key["id"].as_str().unwrap());
    assert_eq!(
        app.send_as(Method::DELETE, &token, &key_path, None)
            .await
            .status(),
        204
    );
    seen = expect(&app, seen, &["api_key.revoked"]).await;

    let endpoint = crate::webhooks::create_endpoint(
        &app,
        &token,
        &org,
        &receiver.url("/table"),
        json!(["member.joined"]),
    )
    .await;
    seen = expect(&app, seen, &["webhook_endpoint.created"]).await;
    let endpoint_path = format!(
        "/api/v1/webhooks/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    json_of(
        app.in_org(
            Method::PATCH,
            &token,
            &org,
            &endpoint_path,
            Some(json!({ "description": "audited" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["webhook_endpoint.updated"]).await;
    json_of(
        app.in_org(
            Method::POST,
            &token,
            &org,
            &format!("{endpoint_path}/test"),
            None,
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["webhook.tested"]).await;
    assert_eq!(
        app.in_org(Method::DELETE, &token, &org, &endpoint_path, None)
            .await
            .status(),
        204
    );
    seen = expect(&app, seen, &["webhook_endpoint.deleted"]).await;

    let apps = format!("{org_path}/applications");
    let created = json_of(
        app.send_as(
            Method::POST,
            &token,
            &apps,
            Some(json!({ "name": "Table App", "redirect_uris": ["https://table.example.com/cb"] })),
        )
        .await,
        201,
    )
    .await;
    seen = expect(&app, seen, &["application.created"]).await;
    let app_path = format!("{apps}/{}", created["id"].as_str().unwrap());
    json_of(
        app.send_as(
            Method::PATCH,
            &token,
            &app_path,
            Some(json!({ "name": "Table App 2" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["application.updated"]).await;
    json_of(
        app.send_as(Method::POST, &token, &format!("{app_path}/secret"), None)
            .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["application.secret_rotated"]).await;
    assert_eq!(
        app.send_as(Method::DELETE, &token, &app_path, None)
            .await
            .status(),
        204
    );
    seen = expect(&app, seen, &["application.deleted"]).await;

    app.set_plan(&org, "enterprise").await;
    seen = expect(&app, seen, &["organization.plan_changed"]).await;
    let policies = crate::policies::policies(|p| p["password_policy"]["min_length"] = json!(12));
    json_of(
        app.send_as(
            Method::PUT,
            &token,
            &format!("{org_path}/policies"),
            Some(policies),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["organization.policies_changed"]).await;
    json_of(
        app.send_as(
            Method::PUT,
            &token,
            &format!("{org_path}/branding"),
            Some(json!({ "primary_color": "#112233" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["organization.branding_changed"]).await;
    json_of(
        app.send_as(Method::POST, &token, "/api/v1/sso/configurations", Some(json!({
            "organization_id": org, "provider": "saml", "idp_entity_id": "https://idp.example.com",
            "idp_sso_url": "https://idp.example.com/sso", "idp_certificate": crate::policies::valid_certificate(),
        }))).await,
        201,
    )
    .await;
    seen = expect(&app, seen, &["sso.configured"]).await;

    assert_eq!(
        app.send_as(Method::DELETE, &token, &org_path, None)
            .await
            .status(),
        200
    );
    seen = expect(&app, seen, &["organization.deleted"]).await;

    // The account's own changes: a second session signed in and out, the profile, the password,
    // the account itself.
    let second = json_of(app.login(&owner.email, PASSWORD).await, 200).await;
    seen = expect(&app, seen, &["auth.login"]).await;
    let second = second["access_token"].as_str().unwrap();
    assert_eq!(app.logout(second).await.status(), 204);
    seen = expect(&app, seen, &["auth.logout"]).await;
    json_of(
        app.send_as(
            Method::PATCH,
            &token,
            "/api/v1/users/me",
            Some(json!({ "full_name": "Table Owner" })),
        )
        .await,
        200,
    )
    .await;
    seen = expect(&app, seen, &["user.updated"]).await;
    let changed = app
        .change_password(&token, PASSWORD, "a brand new passphrase")
        .await;
    assert_eq!(changed.status(), 204);
    seen = expect(&app, seen, &["auth.password_changed"]).await;
    assert_eq!(
        app.send_as(Method::DELETE, &token, "/api/v1/users/me", None)
            .await
            .status(),
        204
    );
    expect(&app, seen, &["user.deleted"]).await;
}

/// How many records the operator sees.
async fn total(app: &TestApp) -> u64 {
    let log = json_of(
        app.as_operator(Method::GET, "/control/audit?page_size=1", None)
            .await,
        200,
    )
    .await;
    log["total"].as_u64().unwrap()
}

/// Asserts that exactly `actions` (newest first) were written since `before` records; returns
/// the count now.
async fn expect(app: &TestApp, before: u64, actions: &[&str]) -> u64 {
    let log = json_of(
        app.as_operator(Method::GET, "/control/audit?page_size=100", None)
            .await,
        200,
    )
    .await;
    let now = log["total"].as_u64().unwrap();
    let newest: Vec<&str> = items(&log)
        .iter()
        .take(usize::try_from(now - before).unwrap())
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(newest, actions, "the records written by the last change");
    now
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_writes_its_record_sqlite() {
    each_change_writes_its_record(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_writes_its_record_postgres() {
    each_change_writes_its_record(Backend::Postgres).await;
}
