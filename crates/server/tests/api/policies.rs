//! Business-plan features as their users meet them: policies that act, branding, SSO, and the
//! plan that gates them.

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::{
    detail_of, json_of, loc, locs_of, on_both_backends, Backend, Options, TestApp, PASSWORD,
};

/// A team owned by a fresh user, on the business plan: (owner's token, organization id).
async fn business_team(app: &TestApp, owner: &str) -> (String, String) {
    let owner = app.logged_in(owner).await;
    let team = app.create_team(&owner.access_token, "Acme Security").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    (owner.access_token, org)
}

/// The default policies with some fields changed.
pub(crate) fn policies(edit: impl FnOnce(&mut Value)) -> Value {
    let mut policies = json!({
        "password_policy": {
            "min_length": 8, "require_uppercase": false, "require_lowercase": false,
            "require_numbers": false, "require_special_chars": false,
            "max_age_days": 0, "prevent_reuse_count": 0,
        },
        "mfa_policy": { "required": false, "allowed_methods": ["totp", "webauthn"], "grace_period_hours": 72 },
        "session_policy": { "max_session_duration_hours": 720, "idle_timeout_minutes": 1440, "max_concurrent_sessions": 100 },
        "ip_allowlist": { "enabled": false, "allowed_ips": [] },
    });
    edit(&mut policies);
    policies
}

async fn put_policies(app: &TestApp, token: &str, org: &str, body: Value) -> Response {
    app.send_as(
        Method::PUT,
        token,
        &format!("/api/v1/organizations/{org}/policies"),
        Some(body),
    )
    .await
}

/// A request in the organization's context as if from `address`, through a trusted proxy.
async fn get_org_from(app: &TestApp, token: &str, org: &str, address: &str) -> Response {
    app.client
        .get(app.url(&format!("/api/v1/organizations/{org}")))
        .bearer_auth(token)
        .header("X-Forwarded-For", address)
        .send()
        .await
        .unwrap()
}

fn self_signed_certificate(not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> String {
    let mut params = rcgen::CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
    params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
    let key = rcgen::KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

pub(crate) fn valid_certificate() -> String {
    self_signed_certificate((2024, 1, 1), (2036, 1, 1))
}

#[on_both_backends]
async fn policies_branding_and_sso_name_the_plan_they_need(app: TestApp) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Small Team").await;
    let org = team["id"].as_str().unwrap();
    for path in ["policies", "branding"] {
        let detail = detail_of(
            app.get_as(
                &owner.access_token,
                &format!("/api/v1/organizations/{org}/{path}"),
            )
            .await,
            403,
        )
        .await;
        assert!(detail.contains("business or enterprise plan"), "{detail}");
        assert!(detail.contains("free plan"), "{detail}");
    }
    let detail = detail_of(
        put_policies(&app, &owner.access_token, org, policies(|_| {})).await,
        403,
    )
    .await;
    assert!(detail.contains("business"), "{detail}");
    let detail = detail_of(
            app.send_as(Method::POST, &owner.access_token, "/api/v1/sso/configurations", Some(json!({
                "organization_id": org, "provider": "saml", "idp_entity_id": "https://idp.example.com",
                "idp_sso_url": "https://idp.example.com/sso", "idp_certificate": valid_certificate(),
            }))).await,
            403,
        )
        .await;
    assert!(
        detail.contains("SSO need the business or enterprise plan"),
        "{detail}"
    );
    app.set_plan(org, "pro").await;
    detail_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/policies"),
        )
        .await,
        403,
    )
    .await;
}

#[on_both_backends]
async fn an_upgraded_team_has_default_policies_then_saves_its_own(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let path = format!("/api/v1/organizations/{org}/policies");

    let defaults = json_of(app.get_as(&token, &path).await, 200).await;
    assert_eq!(defaults["organization_id"], org.as_str());
    assert!(defaults["updated_at"].is_string());
    for (section, value) in policies(|_| {}).as_object().unwrap() {
        assert_eq!(&defaults[section], value, "{section}");
    }

    let wanted = policies(|p| {
        p["password_policy"] = json!({
            "min_length": 12, "require_uppercase": true, "require_lowercase": true,
            "require_numbers": true, "require_special_chars": false,
            "max_age_days": 90, "prevent_reuse_count": 5,
        });
        p["mfa_policy"] =
            json!({ "required": true, "allowed_methods": ["totp"], "grace_period_hours": 24 });
        p["session_policy"] = json!({ "max_session_duration_hours": 12, "idle_timeout_minutes": 30, "max_concurrent_sessions": 3 });
        p["ip_allowlist"] =
            json!({ "enabled": true, "allowed_ips": ["127.0.0.1", "10.0.0.0/8", "2001:db8::/32"] });
    });
    let saved = json_of(put_policies(&app, &token, &org, wanted.clone()).await, 200).await;
    let read = json_of(app.get_as(&token, &path).await, 200).await;
    for (section, value) in wanted.as_object().unwrap() {
        assert_eq!(&saved[section], value, "{section}");
        assert_eq!(&read[section], value, "{section}");
    }
    assert_ne!(read["updated_at"], defaults["updated_at"]);
}

#[on_both_backends]
async fn every_invalid_policy_field_is_rejected_at_its_path_and_nothing_is_saved(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let bad = policies(|p| {
        p["password_policy"]["min_length"] = json!(7);
        p["password_policy"]["prevent_reuse_count"] = json!(25);
        p["mfa_policy"]["allowed_methods"] = json!(["totp", "sms"]);
        p["session_policy"]["max_session_duration_hours"] = json!(721);
        p["session_policy"]["idle_timeout_minutes"] = json!(4);
        p["session_policy"]["max_concurrent_sessions"] = json!(0);
        p["ip_allowlist"]["allowed_ips"] = json!(["10.0.0.0/8", "not-an-ip", "10.0.0.0/33"]);
    });
    let locs = locs_of(put_policies(&app, &token, &org, bad).await).await;
    for expected in [
        loc(&["body", "password_policy", "min_length"]),
        loc(&["body", "password_policy", "prevent_reuse_count"]),
        loc(&["body", "mfa_policy", "allowed_methods", "1"]),
        loc(&["body", "session_policy", "max_session_duration_hours"]),
        loc(&["body", "session_policy", "idle_timeout_minutes"]),
        loc(&["body", "session_policy", "max_concurrent_sessions"]),
        loc(&["body", "ip_allowlist", "allowed_ips", "1"]),
        loc(&["body", "ip_allowlist", "allowed_ips", "2"]),
    ] {
        assert!(locs.contains(&expected), "{expected:?} not in {locs:?}");
    }
    assert_eq!(locs.len(), 8, "{locs:?}");

    // A section left out, and a field left out: PUT replaces everything, so both are required.
    let mut partial = policies(|_| {});
    partial.as_object_mut().unwrap().remove("ip_allowlist");
    partial["session_policy"]
        .as_object_mut()
        .unwrap()
        .remove("idle_timeout_minutes");
    let locs = locs_of(put_policies(&app, &token, &org, partial).await).await;
    assert_eq!(
        locs,
        vec![
            loc(&["body", "ip_allowlist"]),
            loc(&["body", "session_policy", "idle_timeout_minutes"])
        ]
    );

    // A wrong type is reported at its path too; MFA required with no method is refused.
    let locs = locs_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| p["password_policy"]["min_length"] = json!("twelve")),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "password_policy", "min_length"])]);
    let locs = locs_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| {
                p["mfa_policy"]["required"] = json!(true);
                p["mfa_policy"]["allowed_methods"] = json!([]);
            }),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "mfa_policy", "allowed_methods"])]);

    let read = json_of(
        app.get_as(&token, &format!("/api/v1/organizations/{org}/policies"))
            .await,
        200,
    )
    .await;
    assert_eq!(
        read["password_policy"]["min_length"], 8,
        "nothing was saved"
    );
}

#[on_both_backends]
async fn only_owners_and_admins_manage_policies_and_outsiders_see_nothing(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let admin = app
        .member_of(&token, &org, "ada@example.com", "admin")
        .await;
    let member = app
        .member_of(&token, &org, "max@example.com", "member")
        .await;
    let outsider = app.logged_in("eve@example.com").await;
    let path = format!("/api/v1/organizations/{org}/policies");

    json_of(app.get_as(&admin.access_token, &path).await, 200).await;
    json_of(
        put_policies(&app, &admin.access_token, &org, policies(|_| {})).await,
        200,
    )
    .await;
    let detail = detail_of(app.get_as(&member.access_token, &path).await, 403).await;
    assert!(detail.contains("policies.manage"), "{detail}");
    // The permission is checked before the body: a member learns nothing from a bad one.
    detail_of(
        put_policies(&app, &member.access_token, &org, json!({})).await,
        403,
    )
    .await;
    detail_of(app.get_as(&outsider.access_token, &path).await, 404).await;
    detail_of(
        app.get_as(
            &member.access_token,
            &format!("/api/v1/organizations/{org}/branding"),
        )
        .await,
        403,
    )
    .await;
}

#[on_both_backends]
async fn the_password_policy_refuses_weak_and_remembered_passwords(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    json_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| {
                p["password_policy"]["min_length"] = json!(14);
                p["password_policy"]["require_numbers"] = json!(true);
                p["password_policy"]["prevent_reuse_count"] = json!(2);
            }),
        )
        .await,
        200,
    )
    .await;

    // The owner's next password meets the policy.
    let response = app.change_password(&token, PASSWORD, "too short 1").await;
    assert_eq!(
        locs_of(response).await,
        vec![loc(&["body", "new_password"])]
    );
    let response = app
        .change_password(&token, PASSWORD, "long enough but no digit")
        .await;
    let detail = json_of(response, 422).await;
    assert!(
        detail["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("digit"),
        "{detail}"
    );
    assert_eq!(
        app.change_password(&token, PASSWORD, "first new passphrase 1")
            .await
            .status(),
        204
    );
    assert_eq!(
        app.change_password(&token, "first new passphrase 1", "second new passphrase 2")
            .await
            .status(),
        204
    );
    // The previous passwords are remembered.
    let response = app
        .change_password(&token, "second new passphrase 2", "first new passphrase 1")
        .await;
    let body = json_of(response, 422).await;
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("last 2 passwords"),
        "{body}"
    );

    // Someone invited into the team signs up under its policy.
    json_of(
        app.invite(&token, &org, "carla@example.com", "member")
            .await,
        201,
    )
    .await;
    let response = app
        .register("carla@example.com", "correct horse battery", "Carla")
        .await;
    assert_eq!(locs_of(response).await, vec![loc(&["body", "password"])]);
    assert_eq!(
        app.register("carla@example.com", "correct horse battery 42", "Carla")
            .await
            .status(),
        201
    );
    // Someone not invited is not bound by it (shorter than 14, and still not guessable).
    assert_eq!(
        app.register("dave@example.com", "Xk7#mQ2$vL9p", "Dave")
            .await
            .status(),
        201
    );
}

#[on_both_backends]
async fn an_expired_password_must_be_renewed_before_a_new_token(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let pair = json_of(app.login("owen@example.com", PASSWORD).await, 200).await;
    json_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| p["password_policy"]["max_age_days"] = json!(30)),
        )
        .await,
        200,
    )
    .await;
    app.rewind("users", "password_changed_at", time::Duration::days(31))
        .await;

    let detail = detail_of(app.login("owen@example.com", PASSWORD).await, 403).await;
    assert!(
        detail.contains("expired") && detail.contains("/api/v1/auth/password/renew"),
        "{detail}"
    );
    detail_of(
        app.refresh(pair["refresh_token"].as_str().unwrap()).await,
        403,
    )
    .await;
    // A wrong password still says only that the credentials are wrong.
    detail_of(app.login("owen@example.com", "not the password").await, 401).await;

    let app = &app;
    let renew = |current: &str, new: &str| {
        let body = json!({ "email": "owen@example.com", "current_password": current, "new_password": new });
        async move { app.post_json("/api/v1/auth/password/renew", &body).await }
    };
    detail_of(
        renew("not the password", "a brand new passphrase").await,
        401,
    )
    .await;
    assert_eq!(
        locs_of(renew(PASSWORD, PASSWORD).await).await,
        vec![loc(&["body", "new_password"])]
    );
    assert_eq!(
        renew(PASSWORD, "a brand new passphrase").await.status(),
        204
    );
    json_of(
        app.login("owen@example.com", "a brand new passphrase")
            .await,
        200,
    )
    .await;
    // Renewal ended the sessions opened before it.
    detail_of(
        app.refresh(pair["refresh_token"].as_str().unwrap()).await,
        401,
    )
    .await;
}

#[on_both_backends]
async fn a_session_is_cut_by_the_idle_timeout(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    json_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| p["session_policy"]["idle_timeout_minutes"] = json!(5)),
        )
        .await,
        200,
    )
    .await;

    let pair = json_of(app.login("owen@example.com", PASSWORD).await, 200).await;
    // The access token lasts no longer than the idle window.
    assert_eq!(pair["expires_in"], 300);
    let refresh_token = pair["refresh_token"].as_str().unwrap();
    // Refreshing within the window keeps the session going.
    app.rewind("sessions", "last_used_at", time::Duration::minutes(4))
        .await;
    let refreshed = json_of(app.refresh(refresh_token).await, 200).await;
    assert_eq!(refreshed["expires_in"], 300);
    // Idle past the window: the refresh fails.
    app.rewind("sessions", "last_used_at", time::Duration::minutes(6))
        .await;
    let detail = detail_of(app.refresh(refresh_token).await, 401).await;
    assert!(detail.contains("timed out after 5 minutes"), "{detail}");
}

#[on_both_backends]
async fn a_session_ends_at_the_maximum_duration(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let pair = json_of(app.login("owen@example.com", PASSWORD).await, 200).await;
    json_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| p["session_policy"]["max_session_duration_hours"] = json!(2)),
        )
        .await,
        200,
    )
    .await;
    app.rewind("sessions", "created_at", time::Duration::hours(3))
        .await;
    let detail = detail_of(
        app.refresh(pair["refresh_token"].as_str().unwrap()).await,
        401,
    )
    .await;
    assert!(detail.contains("maximum duration of 2 hours"), "{detail}");
}

#[on_both_backends]
async fn a_new_login_ends_the_oldest_session_past_the_concurrency_limit(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    json_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| p["session_policy"]["max_concurrent_sessions"] = json!(2)),
        )
        .await,
        200,
    )
    .await;
    // The owner's first session (the one that saved the policy) is the oldest.
    json_of(app.me(&token).await, 200).await;
    let second = json_of(app.login("owen@example.com", PASSWORD).await, 200).await;
    let third = json_of(app.login("owen@example.com", PASSWORD).await, 200).await;

    detail_of(app.me(&token).await, 401).await;
    for pair in [&second, &third] {
        json_of(app.me(pair["access_token"].as_str().unwrap()).await, 200).await;
        json_of(
            app.refresh(pair["refresh_token"].as_str().unwrap()).await,
            200,
        )
        .await;
    }
    let fourth = json_of(app.login("owen@example.com", PASSWORD).await, 200).await;
    detail_of(app.me(second["access_token"].as_str().unwrap()).await, 401).await;
    detail_of(
        app.refresh(second["refresh_token"].as_str().unwrap()).await,
        401,
    )
    .await;
    json_of(app.me(fourth["access_token"].as_str().unwrap()).await, 200).await;
}

#[on_both_backends]
async fn branding_is_saved_merged_removed_and_validated(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let path = format!("/api/v1/organizations/{org}/branding");
    let defaults = json_of(app.get_as(&token, &path).await, 200).await;
    assert_eq!(defaults["organization_id"], org.as_str());
    assert_eq!(defaults["logo_url"], Value::Null);
    assert_eq!(defaults["primary_color"], "#4F46E5");
    assert_eq!(defaults["custom_login"]["title"], "Sign in");
    assert_eq!(defaults["email_branding"]["reply_to"], Value::Null);

    let saved = json_of(app.send_as(Method::PUT, &token, &path, Some(json!({
            "logo_url": "https://cdn.acme.test/logo.svg",
            "favicon_url": "https://cdn.acme.test/favicon.ico",
            "primary_color": "#112233",
            "custom_login": { "title": "Welcome to Acme", "background_url": "https://cdn.acme.test/bg.jpg" },
            "email_branding": { "from_name": "Acme Security", "reply_to": "Help@Acme.test" },
        }))).await, 200).await;
    assert_eq!(saved["logo_url"], "https://cdn.acme.test/logo.svg");
    assert_eq!(saved["primary_color"], "#112233");
    assert_eq!(
        saved["accent_color"], defaults["accent_color"],
        "absent fields keep their value"
    );
    assert_eq!(saved["custom_login"]["title"], "Welcome to Acme");
    assert_eq!(
        saved["custom_login"]["subtitle"],
        defaults["custom_login"]["subtitle"]
    );
    assert_eq!(saved["email_branding"]["reply_to"], "help@acme.test");

    // null removes the background; the rest stays.
    let changed = json_of(
        app.send_as(
            Method::PUT,
            &token,
            &path,
            Some(json!({
                "custom_login": { "background_url": null },
            })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(changed["custom_login"]["background_url"], Value::Null);
    assert_eq!(changed["custom_login"]["title"], "Welcome to Acme");
    assert_eq!(json_of(app.get_as(&token, &path).await, 200).await, changed);

    let locs = locs_of(app.send_as(Method::PUT, &token, &path, Some(json!({
            "logo_url": "https://cdn.acme.test/logo.gif",
            "favicon_url": "http://cdn.acme.test/favicon.ico",
            "primary_color": "red",
            "accent_color": "#12345G",
            "custom_login": { "title": "", "subtitle": "x".repeat(201) },
            "email_branding": { "reply_to": "not an address", "from_name": "Acme\r\nBcc: all@example.com" },
        }))).await).await;
    for expected in [
        loc(&["body", "logo_url"]),
        loc(&["body", "favicon_url"]),
        loc(&["body", "primary_color"]),
        loc(&["body", "accent_color"]),
        loc(&["body", "custom_login", "title"]),
        loc(&["body", "custom_login", "subtitle"]),
        loc(&["body", "email_branding", "reply_to"]),
        loc(&["body", "email_branding", "from_name"]),
    ] {
        assert!(locs.contains(&expected), "{expected:?} not in {locs:?}");
    }
    assert_eq!(
        json_of(app.get_as(&token, &path).await, 200).await,
        changed,
        "nothing was saved"
    );

    // The team's invitation mails carry its email branding.
    json_of(
        app.send_as(
            Method::PUT,
            &token,
            &path,
            Some(json!({
                "email_branding": { "footer_text": "Acme Inc., 1 Main St." },
            })),
        )
        .await,
        200,
    )
    .await;
    json_of(
        app.invite(&token, &org, "carla@example.com", "member")
            .await,
        201,
    )
    .await;
    let mail = app
        .mails()
        .await
        .into_iter()
        .find(|m| m.contains("carla@example.com"))
        .expect("an invitation mail");
    assert!(
        mail.contains("From: \"Acme Security\" <no-reply@"),
        "{mail}"
    );
    assert!(mail.contains("Reply-To: help@acme.test"), "{mail}");
    assert!(mail.contains("Acme Inc., 1 Main St."), "{mail}");
}

#[on_both_backends]
async fn sso_is_configured_once_changed_and_never_shows_the_certificate(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let certificate = valid_certificate();
    let created = json_of(
        app.send_as(
            Method::POST,
            &token,
            "/api/v1/sso/configurations",
            Some(json!({
                "organization_id": org, "provider": "saml",
                "idp_entity_id": "https://idp.example.com/metadata",
                "idp_sso_url": "https://idp.example.com/sso/saml",
                "idp_certificate": certificate,
                "domain_whitelist": ["Acme.test", "acme.test", "corp.acme.test"],
            })),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(created["organization_id"], org.as_str());
    assert_eq!(created["provider"], "saml");
    assert_eq!(
        created["sp_entity_id"],
        format!("{}/sso/saml/{org}/metadata", app.base)
    );
    assert_eq!(
        created["sp_acs_url"],
        format!("{}/sso/saml/{org}/acs", app.base)
    );
    assert_eq!(
        created["domain_whitelist"],
        json!(["acme.test", "corp.acme.test"])
    );
    assert_eq!(created["auto_provision"], false);
    assert_eq!(created["default_role"], "member");
    assert_eq!(created["is_active"], true);
    assert!(created["created_at"].is_string());
    assert!(created.get("idp_certificate").is_none());
    assert!(!created.to_string().contains("BEGIN CERTIFICATE"));

    let again = detail_of(app.send_as(Method::POST, &token, "/api/v1/sso/configurations", Some(json!({
            "organization_id": org, "provider": "saml", "idp_entity_id": "x",
            "idp_sso_url": "https://idp.example.com/sso", "idp_certificate": valid_certificate(),
        }))).await, 409).await;
    assert!(again.contains("already"), "{again}");

    let path = format!("/api/v1/sso/configurations/{org}");
    let read = json_of(app.get_as(&token, &path).await, 200).await;
    assert_eq!(read, created);
    let changed = json_of(
        app.send_as(
            Method::PUT,
            &token,
            &path,
            Some(json!({
                "domain_whitelist": ["acme.test"], "auto_provision": true, "default_role": "viewer",
            })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(changed["domain_whitelist"], json!(["acme.test"]));
    assert_eq!(changed["auto_provision"], true);
    assert_eq!(changed["default_role"], "viewer");
    assert_eq!(
        changed["idp_certificate_fingerprint"],
        created["idp_certificate_fingerprint"]
    );
    assert_ne!(changed["updated_at"], created["updated_at"]);
    assert_eq!(json_of(app.get_as(&token, &path).await, 200).await, changed);

    let locs = locs_of(
        app.send_as(
            Method::PUT,
            &token,
            &path,
            Some(json!({
                "idp_sso_url": "http://idp.example.com/sso",
                "idp_certificate": self_signed_certificate((2019, 1, 1), (2021, 1, 1)),
                "domain_whitelist": ["acme.test", "not a domain"],
                "default_role": "owner",
                "provider": "oidc",
            })),
        )
        .await,
    )
    .await;
    for expected in [
        loc(&["body", "idp_sso_url"]),
        loc(&["body", "idp_certificate"]),
        loc(&["body", "domain_whitelist", "1"]),
        loc(&["body", "default_role"]),
        loc(&["body", "provider"]),
    ] {
        assert!(locs.contains(&expected), "{expected:?} not in {locs:?}");
    }
    let locs = locs_of(app.send_as(Method::PUT, &token, &path, Some(json!({
            "idp_certificate": "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
        }))).await).await;
    assert_eq!(locs, vec![loc(&["body", "idp_certificate"])]);
    assert_eq!(
        json_of(app.get_as(&token, &path).await, 200).await,
        changed,
        "nothing was saved"
    );

    // The identity provider imports the service provider's metadata from sp_entity_id,
    // without credentials.
    let metadata = app
        .client
        .get(created["sp_entity_id"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(metadata.status(), 200);
    assert_eq!(
        metadata.headers()["content-type"],
        "application/samlmetadata+xml"
    );
    let xml = metadata.text().await.unwrap();
    assert!(
        xml.contains(&format!(
            "entityID=\"{}\"",
            created["sp_entity_id"].as_str().unwrap()
        )),
        "{xml}"
    );
    assert!(
        xml.contains(&format!(
            "Location=\"{}\"",
            created["sp_acs_url"].as_str().unwrap()
        )),
        "{xml}"
    );
    assert!(!xml.contains("BEGIN CERTIFICATE"));
    // Switched off, or with the plan gone, there is nothing to import.
    json_of(
        app.send_as(
            Method::PUT,
            &token,
            &path,
            Some(json!({ "is_active": false })),
        )
        .await,
        200,
    )
    .await;
    let metadata = app
        .client
        .get(created["sp_entity_id"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(metadata.status(), 404);
    json_of(
        app.send_as(
            Method::PUT,
            &token,
            &path,
            Some(json!({ "is_active": true })),
        )
        .await,
        200,
    )
    .await;
    app.set_plan(&org, "pro").await;
    let metadata = app
        .client
        .get(created["sp_entity_id"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(metadata.status(), 404);
    let unknown = app
        .client
        .get(app.url("/sso/saml/not-a-uuid/metadata"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}

#[on_both_backends]
async fn sso_requests_are_checked_before_anything_is_stored(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let locs = locs_of(
        app.send_as(
            Method::POST,
            &token,
            "/api/v1/sso/configurations",
            Some(json!({
                "provider": "saml",
            })),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "organization_id"])]);
    let locs = locs_of(
        app.send_as(
            Method::POST,
            &token,
            "/api/v1/sso/configurations",
            Some(json!({
                "organization_id": org,
            })),
        )
        .await,
    )
    .await;
    assert_eq!(
        locs,
        vec![
            loc(&["body", "provider"]),
            loc(&["body", "idp_entity_id"]),
            loc(&["body", "idp_sso_url"]),
            loc(&["body", "idp_certificate"]),
        ]
    );
    let expired = locs_of(app.send_as(Method::POST, &token, "/api/v1/sso/configurations", Some(json!({
            "organization_id": org, "provider": "saml", "idp_entity_id": "https://idp.example.com",
            "idp_sso_url": "https://idp.example.com/sso",
            "idp_certificate": self_signed_certificate((2019, 1, 1), (2021, 1, 1)),
        }))).await).await;
    assert_eq!(expired, vec![loc(&["body", "idp_certificate"])]);
    let unknown = uuid::Uuid::now_v7().to_string();
    detail_of(
        app.send_as(
            Method::POST,
            &token,
            "/api/v1/sso/configurations",
            Some(json!({
                "organization_id": unknown, "provider": "saml",
            })),
        )
        .await,
        404,
    )
    .await;
    detail_of(
        app.get_as(&token, &format!("/api/v1/sso/configurations/{org}"))
            .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn a_downgraded_team_keeps_its_configuration_but_stops_serving_and_enforcing_it(
    app: TestApp,
) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let branding = format!("/api/v1/organizations/{org}/branding");
    let saved = json_of(
        app.send_as(
            Method::PUT,
            &token,
            &branding,
            Some(json!({ "primary_color": "#ABCDEF" })),
        )
        .await,
        200,
    )
    .await;
    json_of(
        put_policies(
            &app,
            &token,
            &org,
            policies(|p| p["session_policy"]["idle_timeout_minutes"] = json!(5)),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        json_of(app.login("owen@example.com", PASSWORD).await, 200).await["expires_in"],
        300
    );

    app.set_plan(&org, "pro").await;
    detail_of(app.get_as(&token, &branding).await, 403).await;
    // The session policy no longer binds.
    assert_eq!(
        json_of(app.login("owen@example.com", PASSWORD).await, 200).await["expires_in"],
        3600
    );

    app.set_plan(&org, "enterprise").await;
    assert_eq!(
        json_of(app.get_as(&token, &branding).await, 200).await,
        saved
    );
}

/// The allowlist needs a proxy to tell addresses apart on loopback: 127.0.0.1 is trusted to
/// report the client in `X-Forwarded-For`.
async fn behind_a_trusted_proxy(backend: Backend) -> TestApp {
    TestApp::spawn_with(
        backend,
        Options {
            trusted_proxies: Some("127.0.0.1"),
            ..Options::default()
        },
    )
    .await
}

async fn a_request_from_outside_the_allowlist_is_refused(app: TestApp) {
    let (token, org) = business_team(&app, "owen@example.com").await;
    let office = policies(|p| {
        p["ip_allowlist"] = json!({ "enabled": true, "allowed_ips": ["203.0.113.0/24"] })
    });
    // Saving from outside the list would lock the owner out.
    let response = app
        .client
        .put(app.url(&format!("/api/v1/organizations/{org}/policies")))
        .bearer_auth(&token)
        .header("X-Forwarded-For", "198.51.100.20")
        .json(&office)
        .send()
        .await
        .unwrap();
    let body = json_of(response, 422).await;
    assert_eq!(
        body["detail"][0]["loc"],
        json!(["body", "ip_allowlist", "allowed_ips"])
    );
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("198.51.100.20"),
        "{body}"
    );

    let response = app
        .client
        .put(app.url(&format!("/api/v1/organizations/{org}/policies")))
        .bearer_auth(&token)
        .header("X-Forwarded-For", "203.0.113.5")
        .json(&office)
        .send()
        .await
        .unwrap();
    json_of(response, 200).await;

    json_of(get_org_from(&app, &token, &org, "203.0.113.77").await, 200).await;
    let detail = detail_of(get_org_from(&app, &token, &org, "198.51.100.20").await, 403).await;
    assert!(
        detail.contains("198.51.100.20") && detail.contains("allowlist"),
        "{detail}"
    );
    // A client cannot smuggle an allowed address in front of its own: only the last hop counts.
    detail_of(
        get_org_from(&app, &token, &org, "203.0.113.5, 198.51.100.20").await,
        403,
    )
    .await;
    // The socket's own address (the proxy, 127.0.0.1) is outside the list too.
    detail_of(
        app.get_as(&token, &format!("/api/v1/organizations/{org}"))
            .await,
        403,
    )
    .await;
    // Outside the organization's context the allowlist does not apply.
    json_of(app.me(&token).await, 200).await;

    // A downgrade stops enforcing it.
    app.set_plan(&org, "pro").await;
    json_of(get_org_from(&app, &token, &org, "198.51.100.20").await, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_from_outside_the_allowlist_is_refused_sqlite() {
    a_request_from_outside_the_allowlist_is_refused(behind_a_trusted_proxy(Backend::Sqlite).await)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_from_outside_the_allowlist_is_refused_postgres() {
    a_request_from_outside_the_allowlist_is_refused(behind_a_trusted_proxy(Backend::Postgres).await)
        .await
}

/// Without `GATEHOUSE_TRUSTED_PROXIES`, `X-Forwarded-For` is the client's word and not believed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_from_an_untrusted_peer_is_ignored() {
    let app = TestApp::spawn(Backend::Sqlite).await;
    let (token, org) = business_team(&app, "owen@example.com").await;
    let response = app
        .client
        .put(app.url(&format!("/api/v1/organizations/{org}/policies")))
        .bearer_auth(&token)
        .header("X-Forwarded-For", "203.0.113.5")
        .json(&policies(|p| {
            p["ip_allowlist"] = json!({ "enabled": true, "allowed_ips": ["203.0.113.0/24"] })
        }))
        .send()
        .await
        .unwrap();
    // The server saw 127.0.0.1, which the list leaves out.
    let body = json_of(response, 422).await;
    assert!(
        body["detail"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("127.0.0.1"),
        "{body}"
    );
}
