//! Multi-factor authentication over HTTP, with pyotp (Python's TOTP library) as the
//! authenticator app: enrolment, the second step of a login, codes that work once, recovery
//! codes, removal with the password, and the hosted login page's second step; both backends.

use reqwest::{header, Method, Response};
use serde_json::{json, Value};

use crate::helpers::{
    artifacts, detail_of, hidden, in_browser, json_of, loc, locs_of, on_both_backends, python,
    Backend, Browser, LoggedIn, Options, TestApp, PASSWORD,
};

/// The code pyotp computes for the secret, `steps` steps from now.
pub(crate) fn code(secret: &str, steps: i32) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/totp.py");
    let output = std::process::Command::new(python())
        .args([script, secret, &steps.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("Python with pyotp is needed (pip install pyotp): {e}"));
    assert!(
        output.status.success(),
        "pyotp: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Ada with an authenticator app confirmed: (the secret, her recovery codes).
pub(crate) async fn with_totp(app: &TestApp, ada: &LoggedIn) -> (String, Vec<String>) {
    let enrolment = json_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/mfa/totp",
            None,
        )
        .await,
        201,
    )
    .await;
    let secret = enrolment["secret"].as_str().unwrap().to_owned();
    let id = enrolment["id"].as_str().unwrap();
    // The previous window's code is good (one step of skew).
    let confirmed = json_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            &format!("/api/v1/auth/mfa/totp/{id}/confirm"),
            Some(json!({ "code": code(&secret, -1) })),
        )
        .await,
        200,
    )
    .await;
    let codes = confirmed["recovery_codes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    (secret, codes)
}

/// Logs in with the password: the second step's token.
async fn first_step(app: &TestApp, email: &str) -> String {
    let answer = json_of(app.login(email, PASSWORD).await, 200).await;
    assert_eq!(answer["mfa_required"], true, "{answer}");
    assert!(
        answer.get("access_token").is_none(),
        "no tokens before the second factor"
    );
    answer["mfa_token"].as_str().unwrap().to_owned()
}

async fn verify(app: &TestApp, body: Value) -> Response {
    app.post_json("/api/v1/auth/mfa/verify", &body).await
}

fn claims(access: &str) -> Value {
    use base64::Engine as _;
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap()
}

#[on_both_backends]
async fn an_authenticator_app_turns_mfa_on_and_each_code_works_once(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let enrolment = json_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/mfa/totp",
            None,
        )
        .await,
        201,
    )
    .await;
    let secret = enrolment["secret"].as_str().unwrap().to_owned();
    let uri = enrolment["otpauth_uri"].as_str().unwrap();
    assert!(
        uri.starts_with("otpauth://totp/Gatehouse:ada%40example.com?"),
        "{uri}"
    );
    assert!(
        uri.contains(&format!("secret={secret}")) && uri.contains("issuer=Gatehouse"),
        "{uri}"
    );
    let id = enrolment["id"].as_str().unwrap();
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    assert_eq!(
        overview,
        json!({ "methods": [], "recovery_codes_left": 0 }),
        "pending is not on"
    );

    // A wrong code confirms nothing; two windows back is too old.
    let confirm = format!("/api/v1/auth/mfa/totp/{id}/confirm");
    let wrong = app
        .send_as(
            Method::POST,
            &ada.access_token,
            &confirm,
            Some(json!({ "code": "000000" })),
        )
        .await;
    assert_eq!(locs_of(wrong).await, [loc(&["body", "code"])]);
    let old = app
        .send_as(
            Method::POST,
            &ada.access_token,
            &confirm,
            Some(json!({ "code": code(&secret, -2) })),
        )
        .await;
    assert_eq!(old.status(), 422);
    // The previous window's code confirms it: ten recovery codes, once.
    let confirmed = json_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            &confirm,
            Some(json!({ "code": code(&secret, -1) })),
        )
        .await,
        200,
    )
    .await;
    let codes = confirmed["recovery_codes"].as_array().unwrap();
    assert_eq!(codes.len(), 10);
    let distinct: std::collections::HashSet<_> = codes.iter().collect();
    assert_eq!(distinct.len(), 10);
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    assert_eq!(overview["recovery_codes_left"], 10);
    assert_eq!(overview["methods"][0]["type"], "totp");
    assert_eq!(overview["methods"][0]["id"], id);
    detail_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            &confirm,
            Some(json!({ "code": code(&secret, 0) })),
        )
        .await,
        409,
    )
    .await;

    // The login asks for the second factor.
    let answer = json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
    assert_eq!(answer["methods"], json!(["totp"]));
    let token = answer["mfa_token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("ghm_"));
    // Two windows back: refused.
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": token, "code": code(&secret, -2) }),
        )
        .await,
        401,
    )
    .await;
    // The current code: tokens, which say how she signed in.
    let now = code(&secret, 0);
    let tokens = json_of(
        verify(&app, json!({ "mfa_token": token, "code": now })).await,
        200,
    )
    .await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(claims(access)["amr"], json!(["pwd", "otp"]));
    json_of(app.get_as(access, "/api/v1/users/me").await, 200).await;
    json_of(
        app.refresh(tokens["refresh_token"].as_str().unwrap()).await,
        200,
    )
    .await;
    // The token works once, and the code works once.
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": token, "code": code(&secret, 0) }),
        )
        .await,
        401,
    )
    .await;
    let again = first_step(&app, "ada@example.com").await;
    detail_of(
        verify(&app, json!({ "mfa_token": again, "code": now })).await,
        401,
    )
    .await;
}

#[on_both_backends]
async fn a_recovery_code_signs_in_once(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let (_, codes) = with_totp(&app, &ada).await;
    let token = first_step(&app, "ada@example.com").await;
    // Typed loosely: upper case, spaces around.
    let typed = format!("  {}  ", codes[3].to_uppercase());
    let tokens = json_of(
        verify(&app, json!({ "mfa_token": token, "recovery_code": typed })).await,
        200,
    )
    .await;
    assert_eq!(
        claims(tokens["access_token"].as_str().unwrap())["amr"],
        json!(["pwd", "otp"])
    );
    let token = first_step(&app, "ada@example.com").await;
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": token, "recovery_code": codes[3] }),
        )
        .await,
        401,
    )
    .await;
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    assert_eq!(overview["recovery_codes_left"], 9);

    // New codes with the password; the old ones stop working.
    let wrong = app
        .send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/mfa/recovery-codes",
            Some(json!({ "password": "not it at all" })),
        )
        .await;
    assert_eq!(locs_of(wrong).await, [loc(&["body", "password"])]);
    let fresh = json_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/mfa/recovery-codes",
            Some(json!({ "password": PASSWORD })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(fresh["recovery_codes"].as_array().unwrap().len(), 10);
    let token = first_step(&app, "ada@example.com").await;
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": token, "recovery_code": codes[0] }),
        )
        .await,
        401,
    )
    .await;
    let token = first_step(&app, "ada@example.com").await;
    json_of(
        verify(
            &app,
            json!({ "mfa_token": token, "recovery_code": fresh["recovery_codes"][0] }),
        )
        .await,
        200,
    )
    .await;
    // Once on record (the wrong password replaced nothing), and no code in it.
    let records = app
        .audit_records("?action=mfa.recovery_codes_regenerated")
        .await;
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        records[0]["actor"],
        json!({ "type": "user", "id": ada.user_id })
    );
    let all = app.audit_records("?page_size=100").await;
    let text = serde_json::to_string(&all).unwrap();
    for code in codes
        .iter()
        .chain([&fresh["recovery_codes"][1].as_str().unwrap().to_owned()])
    {
        assert!(
            !text.contains(code.as_str()),
            "a recovery code in the audit log"
        );
    }
}

#[on_both_backends]
async fn a_password_change_between_the_steps_ends_the_sign_in(app: TestApp) {
    // Ada's first step checked her password; before her second, it changes (a reset
    // would do the same): the mfa_token opens nothing, whatever the factor.
    let ada = app.logged_in("ada@example.com").await;
    let (_, codes) = with_totp(&app, &ada).await;
    let token = first_step(&app, "ada@example.com").await;
    let changed = app
        .change_password(
            &ada.access_token,
            PASSWORD,
            "a new passphrase, longer still",
        )
        .await;
    assert!(changed.status().is_success(), "{}", changed.status());
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": token, "recovery_code": codes[0] }),
        )
        .await,
        401,
    )
    .await;
    // Nothing was spent: the code still signs her in after a first step with the new password.
    let answer = json_of(
        app.login("ada@example.com", "a new passphrase, longer still")
            .await,
        200,
    )
    .await;
    let token = answer["mfa_token"].as_str().unwrap();
    json_of(
        verify(
            &app,
            json!({ "mfa_token": token, "recovery_code": codes[0] }),
        )
        .await,
        200,
    )
    .await;
}

#[on_both_backends]
async fn wrong_factors_end_the_token_and_lock_the_account(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let (secret, _) = with_totp(&app, &ada).await;
    let token = first_step(&app, "ada@example.com").await;
    for _ in 0..5 {
        detail_of(
            verify(&app, json!({ "mfa_token": token, "code": "000000" })).await,
            401,
        )
        .await;
    }
    // Five failures end the token, a right code after them included...
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": token, "code": code(&secret, 0) }),
        )
        .await,
        401,
    )
    .await;
    // ... and lock the account, the right password included.
    let locked = app.login("ada@example.com", PASSWORD).await;
    assert_eq!(locked.status(), 429);
    assert!(locked.headers().get(header::RETRY_AFTER).is_some());
}

#[on_both_backends]
async fn security_keys_need_a_public_url_with_a_domain_name(app: TestApp) {
    // The test server's public URL is http://127.0.0.1:PORT: no relying party id.
    let ada = app.logged_in("ada@example.com").await;
    let response = app
        .send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/mfa/webauthn/register",
            Some(json!({})),
        )
        .await;
    let detail = detail_of(response, 503).await;
    assert!(
        detail.contains("public URL whose host is a domain name"),
        "{detail}"
    );
}

#[on_both_backends]
async fn the_second_step_takes_one_proof_and_a_real_token(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let (secret, codes) = with_totp(&app, &ada).await;
    let token = first_step(&app, "ada@example.com").await;
    for body in [
        json!({ "mfa_token": token }),
        json!({ "mfa_token": token, "code": code(&secret, 0), "recovery_code": codes[0] }),
        json!({ "code": code(&secret, 0) }),
    ] {
        assert_eq!(verify(&app, body.clone()).await.status(), 422, "{body}");
    }
    detail_of(
        verify(
            &app,
            json!({ "mfa_token": "ghm_made-up", "code": code(&secret, 0) }),
        )
        .await,
        401,
    )
    .await;
    // Someone without MFA logs in as before.
    let bob = app.logged_in("bob@example.com").await;
    assert!(claims(&bob.access_token)["amr"] == json!(["pwd"]));
}

#[on_both_backends]
async fn removing_the_factor_needs_the_password_and_turns_mfa_off(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    with_totp(&app, &ada).await;
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    let id = overview["methods"][0]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/auth/mfa/{id}");
    let wrong = app
        .send_as(
            Method::DELETE,
            &ada.access_token,
            &path,
            Some(json!({ "password": "not it at all" })),
        )
        .await;
    assert_eq!(locs_of(wrong).await, [loc(&["body", "password"])]);
    detail_of(
        app.send_as(
            Method::DELETE,
            &ada.access_token,
            "/api/v1/auth/mfa/0192f0c1-0000-7000-8000-000000000000",
            Some(json!({ "password": PASSWORD })),
        )
        .await,
        404,
    )
    .await;
    assert!(
        app.audit_records("?action=mfa.factor_removed")
            .await
            .is_empty(),
        "a refusal removes nothing"
    );
    assert_eq!(
        app.send_as(
            Method::DELETE,
            &ada.access_token,
            &path,
            Some(json!({ "password": PASSWORD }))
        )
        .await
        .status(),
        204
    );
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    assert_eq!(overview, json!({ "methods": [], "recovery_codes_left": 0 }));
    // On record: the factor added, then removed, both Ada's.
    for action in ["mfa.factor_added", "mfa.factor_removed"] {
        let records = app.audit_records(&format!("?action={action}")).await;
        assert_eq!(records.len(), 1, "{action}: {records:?}");
        assert_eq!(
            records[0]["actor"],
            json!({ "type": "user", "id": ada.user_id })
        );
        assert_eq!(
            records[0]["target"],
            json!({ "type": "mfa_factor", "id": id })
        );
        assert_eq!(records[0]["organization_id"], Value::Null);
    }
    let tokens = json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
    assert!(
        tokens["access_token"].is_string(),
        "no second step any more"
    );
    detail_of(
        app.send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/mfa/recovery-codes",
            Some(json!({ "password": PASSWORD })),
        )
        .await,
        409,
    )
    .await;
}

#[on_both_backends]
async fn the_last_factor_stays_while_an_organization_requires_mfa(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    with_totp(&app, &ada).await;
    let team = app.create_team(&ada.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    let policies = json!({
        "password_policy": { "min_length": 8, "require_uppercase": false, "require_lowercase": false,
            "require_numbers": false, "require_special_chars": false, "max_age_days": 0, "prevent_reuse_count": 0 },
        "mfa_policy": { "required": true, "allowed_methods": ["totp", "webauthn"], "grace_period_hours": 72 },
        "session_policy": { "max_session_duration_hours": 720, "idle_timeout_minutes": 1440, "max_concurrent_sessions": 100 },
        "ip_allowlist": { "enabled": false, "allowed_ips": [] },
    });
    json_of(
        app.send_as(
            Method::PUT,
            &ada.access_token,
            &format!("/api/v1/organizations/{org}/policies"),
            Some(policies),
        )
        .await,
        200,
    )
    .await;
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    let id = overview["methods"][0]["id"].as_str().unwrap().to_owned();
    let refused = detail_of(
        app.send_as(
            Method::DELETE,
            &ada.access_token,
            &format!("/api/v1/auth/mfa/{id}"),
            Some(json!({ "password": PASSWORD })),
        )
        .await,
        409,
    )
    .await;
    assert!(
        refused.contains("requires multi-factor authentication"),
        "{refused}"
    );
}

#[on_both_backends]
async fn the_hosted_login_page_asks_for_the_second_factor(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let (secret, _) = with_totp(&app, &ada).await;
    let mut browser = Browser::new();
    let page = browser.get(&app.url("/login")).await.text().await.unwrap();
    let response = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "ada@example.com"),
                ("password", PASSWORD),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", "/login/done"),
            ],
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .all(|c| !c.to_str().unwrap().starts_with("gatehouse_session")));
    let page = response.text().await.unwrap();
    assert!(page.contains("<h1>Two-step verification</h1>"), "{page}");
    assert!(page.contains("autocomplete=\"one-time-code\""));
    let token = hidden(&page, "mfa_token");
    let wrong = browser
        .post_form(
            &app.url("/login/mfa"),
            &[
                ("mfa_token", &token),
                ("code", "000000"),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", "/login/done"),
            ],
        )
        .await;
    assert_eq!(wrong.status(), 401);
    let page = wrong.text().await.unwrap();
    assert!(
        page.contains("role=\"alert\">That code is not valid."),
        "{page}"
    );
    let right = browser
        .post_form(
            &app.url("/login/mfa"),
            &[
                ("mfa_token", &hidden(&page, "mfa_token")),
                ("code", &code(&secret, 0)),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", "/login/done"),
            ],
        )
        .await;
    assert_eq!(right.status(), 303);
    assert_eq!(right.headers()[header::LOCATION], "/login/done");
    assert_eq!(
        browser.get(&app.url("/login/done")).await.status(),
        200,
        "signed in"
    );
}

#[on_both_backends]
async fn an_organization_requiring_mfa_turns_members_away_after_the_grace_period(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let team = app.create_team(&ada.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    let bob = app
        .member_of(&ada.access_token, &org, "bob@example.com", "member")
        .await;
    let key = json_of(app.create_api_key(&ada.access_token, "ci", &org).await, 201).await;
    let policies_path = format!("/api/v1/organizations/{org}/policies");
    json_of(
        app.send_as(
            Method::PUT,
            &ada.access_token,
            &policies_path,
            Some(requiring_mfa(&["totp"])),
        )
        .await,
        200,
    )
    .await;
    let team_path = format!("/api/v1/organizations/{org}");
    // Inside the grace period: admitted.
    json_of(app.get_as(&bob.access_token, &team_path).await, 200).await;
    // 73 hours later (the policy and the memberships both older than the 72 hours).
    app.rewind(
        "organization_policies",
        "mfa_required_since",
        time::Duration::hours(73),
    )
    .await;
    app.rewind("memberships", "created_at", time::Duration::hours(73))
        .await;
    let refused = detail_of(app.get_as(&bob.access_token, &team_path).await, 403).await;
    assert_eq!(refused, "organization requires multi-factor authentication");
    detail_of(app.get_as(&ada.access_token, &team_path).await, 403).await;
    // API keys act for servers, and are not asked.
    assert_eq!(
        app.health_with_key(key["key"].as_str().unwrap(), &org)
            .await
            .status(),
        200
    );
    // His own account is not the organization's: he enrols, signs in again with the code.
    let (secret, _) = with_totp(&app, &bob).await;
    let token = first_step(&app, "bob@example.com").await;
    let tokens = json_of(
        verify(
            &app,
            json!({ "mfa_token": token, "code": code(&secret, 0) }),
        )
        .await,
        200,
    )
    .await;
    let bob_otp = tokens["access_token"].as_str().unwrap().to_owned();
    json_of(app.get_as(&bob_otp, &team_path).await, 200).await;
    // A method the organization does not allow does not count.
    let (ada_secret, _) = with_totp(&app, &ada).await;
    let token = first_step(&app, "ada@example.com").await;
    let tokens = json_of(
        verify(
            &app,
            json!({ "mfa_token": token, "code": code(&ada_secret, 0) }),
        )
        .await,
        200,
    )
    .await;
    let ada_otp = tokens["access_token"].as_str().unwrap().to_owned();
    json_of(
        app.send_as(
            Method::PUT,
            &ada_otp,
            &policies_path,
            Some(requiring_mfa(&["webauthn"])),
        )
        .await,
        200,
    )
    .await;
    detail_of(app.get_as(&bob_otp, &team_path).await, 403).await;
}

/// Policies that require MFA with these methods and 72 hours of grace (the rest permissive).
pub(crate) fn requiring_mfa(methods: &[&str]) -> Value {
    json!({
        "password_policy": { "min_length": 8, "require_uppercase": false, "require_lowercase": false,
            "require_numbers": false, "require_special_chars": false, "max_age_days": 0, "prevent_reuse_count": 0 },
        "mfa_policy": { "required": true, "allowed_methods": methods, "grace_period_hours": 72 },
        "session_policy": { "max_session_duration_hours": 720, "idle_timeout_minutes": 1440, "max_concurrent_sessions": 100 },
        "ip_allowlist": { "enabled": false, "allowed_ips": [] },
    })
}

/// A security key registered and used on the hosted login page, in headless Chromium with its
/// virtual authenticator; the server names itself `http://localhost:PORT` (WebAuthn's relying
/// party id must be a domain name).
async fn a_security_key_signs_in_on_the_hosted_page(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            localhost: true,
            ..Options::default()
        },
    )
    .await;
    assert!(
        app.public_url.starts_with("http://localhost:"),
        "{}",
        app.public_url
    );
    let ada = app.logged_in("ada@example.com").await;
    let screenshot = artifacts().join(format!("mfa-security-key-{}.png", ada.user_id));
    let seen = in_browser(
        "webauthn_flow.mjs",
        [
            app.public_url.as_str(),
            ada.access_token.as_str(),
            "ada@example.com",
            PASSWORD,
        ],
        &screenshot,
    )
    .await;
    assert_eq!(seen["registered"]["status"], 201, "{seen}");
    assert_eq!(
        seen["registered"]["body"]["recovery_codes"]
            .as_array()
            .unwrap()
            .len(),
        10,
        "the first factor"
    );
    assert_eq!(seen["secondStep"], "Two-step verification");
    assert_eq!(seen["landed"], "You are signed in");
    let overview = json_of(app.get_as(&ada.access_token, "/api/v1/auth/mfa").await, 200).await;
    assert_eq!(overview["methods"][0]["type"], "webauthn");
    assert!(
        overview["methods"][0]["last_used_at"].is_string(),
        "the key signed in"
    );
    // The API's login now offers the key's request options.
    let answer = json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
    assert_eq!(answer["methods"], json!(["webauthn"]));
    assert_eq!(answer["webauthn_options"]["publicKey"]["rpId"], "localhost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_security_key_signs_in_on_the_hosted_page_sqlite() {
    a_security_key_signs_in_on_the_hosted_page(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_security_key_signs_in_on_the_hosted_page_postgres() {
    a_security_key_signs_in_on_the_hosted_page(Backend::Postgres).await;
}
