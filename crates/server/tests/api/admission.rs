//! The gate holds at every way in: what an organization decides (membership, its IP allowlist,
//! its MFA policy) admits or refuses a person the same way at its routes, at API-key creation
//! and at `/oauth/authorize`; and a token issued to an application carries only what the user
//! granted it. Each test is an attack that worked before, tried again over HTTP.

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::{
    detail_of, hidden, json_of, on_both_backends, Backend, Browser, LoggedIn, Options, TestApp,
    PASSWORD,
};
use crate::mfa::{code, requiring_mfa, with_totp};
use crate::oauth::{exchanged, location, past_consent, query_param, CALLBACK, CHALLENGE};

const MFA_REFUSAL: &str = "organization requires multi-factor authentication";

/// Ada's team on `plan`, with Bob as a member: (Ada, Bob, the organization's id).
pub(crate) async fn team_with_bob(app: &TestApp, plan: &str) -> (LoggedIn, LoggedIn, String) {
    let ada = app.logged_in("ada@example.com").await;
    let team = app.create_team(&ada.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, plan).await;
    let bob = app
        .member_of(&ada.access_token, &org, "bob@example.com", "member")
        .await;
    (ada, bob, org)
}

/// The organization requires MFA, and the grace period is over for everyone in it.
pub(crate) async fn requires_mfa_now(app: &TestApp, owner: &LoggedIn, org: &str) {
    json_of(
        app.send_as(
            Method::PUT,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/policies"),
            Some(requiring_mfa(&["totp", "webauthn"])),
        )
        .await,
        200,
    )
    .await;
    app.rewind(
        "organization_policies",
        "mfa_required_since",
        time::Duration::hours(73),
    )
    .await;
    app.rewind("memberships", "created_at", time::Duration::hours(73))
        .await;
}

async fn keys_of(app: &TestApp, token: &str) -> Vec<Value> {
    json_of(app.get_as(token, "/api/v1/api-keys").await, 200).await["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[on_both_backends]
async fn a_member_the_mfa_policy_turns_away_cannot_mint_an_api_key_instead(app: TestApp) {
    let (ada, bob, org) = team_with_bob(&app, "business").await;
    requires_mfa_now(&app, &ada, &org).await;
    let refused = detail_of(
        app.get_as(&bob.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        403,
    )
    .await;
    assert_eq!(refused, MFA_REFUSAL);

    // Before, this answered 201, and the key then read the audit log and turned MFA off.
    let refused = detail_of(
        app.create_api_key(&bob.access_token, "way around", &org)
            .await,
        403,
    )
    .await;
    assert_eq!(refused, MFA_REFUSAL);
    assert!(
        keys_of(&app, &bob.access_token).await.is_empty(),
        "no key was made"
    );

    // With the second factor the policy asks for, the same member is admitted, key and all.
    let (secret, _) = with_totp(&app, &bob).await;
    let step = json_of(app.login("bob@example.com", PASSWORD).await, 200).await;
    let tokens = json_of(
        app.post_json(
            "/api/v1/auth/mfa/verify",
            &json!({ "mfa_token": step["mfa_token"], "code": code(&secret, 0) }),
        )
        .await,
        200,
    )
    .await;
    let with_otp = tokens["access_token"].as_str().unwrap();
    json_of(app.create_api_key(with_otp, "ci", &org).await, 201).await;
}

/// Ada's business team behind a trusted proxy, with an IP allowlist of 203.0.113.0/24 saved
/// from inside it: (Ada, Bob, the organization's id).
async fn team_behind_an_allowlist(app: &TestApp, plan: &str) -> (LoggedIn, LoggedIn, String) {
    let (ada, bob, org) = team_with_bob(app, plan).await;
    allow_only_the_office(app, &ada, &org).await;
    (ada, bob, org)
}

/// The organization admits only 203.0.113.0/24, saved from inside it.
pub(crate) async fn allow_only_the_office(app: &TestApp, ada: &LoggedIn, org: &str) {
    let mut policies = requiring_mfa(&["totp"]);
    policies["mfa_policy"]["required"] = json!(false);
    policies["ip_allowlist"] = json!({ "enabled": true, "allowed_ips": ["203.0.113.0/24"] });
    let response = app
        .client
        .put(app.url(&format!("/api/v1/organizations/{org}/policies")))
        .bearer_auth(&ada.access_token)
        .header("X-Forwarded-For", "203.0.113.5")
        .json(&policies)
        .send()
        .await
        .unwrap();
    json_of(response, 200).await;
}

async fn create_key_from(app: &TestApp, token: &str, org: &str, address: &str) -> Response {
    app.client
        .post(app.url("/api/v1/api-keys"))
        .bearer_auth(token)
        .header("X-Forwarded-For", address)
        .json(&json!({ "name": "ci", "organization_id": org }))
        .send()
        .await
        .unwrap()
}

async fn outside_the_allowlist_no_api_key_is_minted(app: TestApp) {
    let (_, bob, org) = team_behind_an_allowlist(&app, "business").await;
    let refused = detail_of(
        create_key_from(&app, &bob.access_token, &org, "198.51.100.20").await,
        403,
    )
    .await;
    assert!(refused.contains("allowlist"), "{refused}");
    assert!(keys_of(&app, &bob.access_token).await.is_empty());
    json_of(
        create_key_from(&app, &bob.access_token, &org, "203.0.113.9").await,
        201,
    )
    .await;
}

pub(crate) fn behind_a_trusted_proxy() -> Options {
    Options {
        trusted_proxies: Some("127.0.0.1"),
        ..Options::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_allowlist_no_api_key_is_minted_sqlite() {
    outside_the_allowlist_no_api_key_is_minted(
        TestApp::spawn_with(Backend::Sqlite, behind_a_trusted_proxy()).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_the_allowlist_no_api_key_is_minted_postgres() {
    outside_the_allowlist_no_api_key_is_minted(
        TestApp::spawn_with(Backend::Postgres, behind_a_trusted_proxy()).await,
    )
    .await;
}

/// An application of the organization: (client id, client secret).
pub(crate) async fn billing_application(
    app: &TestApp,
    owner: &LoggedIn,
    org: &str,
) -> (String, String) {
    let created = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
            Some(json!({ "name": "Billing", "redirect_uris": [CALLBACK] })),
        )
        .await,
        201,
    )
    .await;
    (
        created["client_id"].as_str().unwrap().to_owned(),
        created["client_secret"].as_str().unwrap().to_owned(),
    )
}

pub(crate) fn authorize_url(app: &TestApp, client_id: &str, scope: &str) -> String {
    let encode =
        |raw: &str| url::form_urlencoded::byte_serialize(raw.as_bytes()).collect::<String>();
    format!(
        "{}?response_type=code&client_id={client_id}&redirect_uri={}&scope={}&state=s1&code_challenge={CHALLENGE}&code_challenge_method=S256",
        app.url("/oauth/authorize"),
        encode(CALLBACK),
        encode(scope),
    )
}

/// Signs the browser in on the hosted page with a password (and no second factor).
pub(crate) async fn sign_in_on_the_page(app: &TestApp, browser: &mut Browser, email: &str) {
    let page = browser.get(&app.url("/login")).await.text().await.unwrap();
    let response = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", email),
                ("password", PASSWORD),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", "/login/done"),
            ],
        )
        .await;
    assert_eq!(response.status(), 303, "signed in on the page");
}

#[on_both_backends]
async fn authorize_asks_for_the_second_factor_the_organization_requires(app: TestApp) {
    let (ada, bob, org) = team_with_bob(&app, "enterprise").await;
    let (client_id, client_secret) = billing_application(&app, &ada, &org).await;
    requires_mfa_now(&app, &ada, &org).await;
    let authorize = authorize_url(&app, &client_id, "openid");

    // Bob has no second factor: before, he got a code and tokens with amr ["pwd"]. Now a
    // page says why not, and nothing goes to the client.
    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "bob@example.com").await;
    let response = browser.get(&authorize).await;
    assert_eq!(response.status(), 403);
    let page = response.text().await.unwrap();
    assert!(
        page.contains("requires multi-factor authentication"),
        "{page}"
    );
    assert!(!page.contains(CALLBACK), "nothing for the client");
    // prompt=none: the client hears that the user must do something first.
    let response = browser.get(&format!("{authorize}&prompt=none")).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    assert!(redirect.starts_with(CALLBACK), "{redirect}");
    assert_eq!(
        query_param(&redirect, "error").as_deref(),
        Some("interaction_required")
    );
    assert_eq!(query_param(&redirect, "code"), None);

    // Once he has one, the page's password-only sign-in will not do: sign in again, with it.
    let (secret, _) = with_totp(&app, &bob).await;
    let response = browser.get(&authorize).await;
    assert_eq!(response.status(), 302);
    let login = location(&response);
    assert!(login.starts_with("/login?return_to="), "{login}");
    let page = browser.get(&app.url(&login)).await.text().await.unwrap();
    let return_to = hidden(&page, "return_to");
    let response = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "bob@example.com"),
                ("password", PASSWORD),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(response.status(), 200);
    let page = response.text().await.unwrap();
    assert!(page.contains("<h1>Two-step verification</h1>"), "{page}");
    let response = browser
        .post_form(
            &app.url("/login/mfa"),
            &[
                ("mfa_token", &hidden(&page, "mfa_token")),
                ("code", &code(&secret, 0)),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(response.status(), 303);
    let response = browser.get(&app.url(&location(&response))).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    let code = query_param(&redirect, "code").expect("a code, now");
    let tokens = exchanged(&app, &code, (&client_id, &client_secret)).await;
    let introspected = json_of(
        crate::oauth::form_at(
            &app,
            "/oauth/introspect",
            &[("token", tokens["access_token"].as_str().unwrap())],
            Some((&client_id, &client_secret)),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(introspected["active"], true);
}

async fn authorize_from_outside_the_allowlist_gets_no_code(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "enterprise").await;
    let (client_id, _) = billing_application(&app, &ada, &org).await;
    allow_only_the_office(&app, &ada, &org).await;
    let authorize = authorize_url(&app, &client_id, "openid");

    let mut outside = Browser::behind_proxy_as("198.51.100.20");
    sign_in_on_the_page(&app, &mut outside, "bob@example.com").await;
    let response = outside.get(&authorize).await;
    assert_eq!(response.status(), 403);
    let page = response.text().await.unwrap();
    assert!(page.contains("network address"), "{page}");

    let mut inside = Browser::behind_proxy_as("203.0.113.9");
    sign_in_on_the_page(&app, &mut inside, "bob@example.com").await;
    let response = inside.get(&authorize).await;
    assert_eq!(response.status(), 302);
    assert!(query_param(&location(&response), "code").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorize_from_outside_the_allowlist_gets_no_code_sqlite() {
    authorize_from_outside_the_allowlist_gets_no_code(
        TestApp::spawn_with(Backend::Sqlite, behind_a_trusted_proxy()).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorize_from_outside_the_allowlist_gets_no_code_postgres() {
    authorize_from_outside_the_allowlist_gets_no_code(
        TestApp::spawn_with(Backend::Postgres, behind_a_trusted_proxy()).await,
    )
    .await;
}

/// A code for `scope`, issued to the organization's Billing application for the user signed
/// in on `browser`, exchanged for tokens.
pub(crate) async fn tokens_for(
    app: &TestApp,
    browser: &mut Browser,
    (client_id, client_secret): (&str, &str),
    scope: &str,
) -> Value {
    let response = browser.get(&authorize_url(app, client_id, scope)).await;
    let response = past_consent(app, browser, response).await;
    assert_eq!(response.status(), 302);
    let code = query_param(&location(&response), "code").unwrap();
    exchanged(app, &code, (client_id, client_secret)).await
}

#[on_both_backends]
async fn an_openid_token_reads_userinfo_and_nothing_else_of_the_api(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "enterprise").await;
    let (client_id, client_secret) = billing_application(&app, &ada, &org).await;
    let viewer = app
        .member_of(&ada.access_token, &org, "vera@example.com", "viewer")
        .await;
    // Vera's own team, where she is the owner.
    let own = app.create_team(&viewer.access_token, "Vera's").await;
    let own = own["id"].as_str().unwrap();

    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "vera@example.com").await;
    let tokens = tokens_for(
        &app,
        &mut browser,
        (&client_id, &client_secret),
        "openid email",
    )
    .await;
    let access = tokens["access_token"].as_str().unwrap();

    let userinfo = json_of(app.get_as(access, "/oauth/userinfo").await, 200).await;
    assert_eq!(userinfo["email"], "vera@example.com");
    // Before, each of these worked with the user's whole power.
    let refusals = [
        (
            Method::PATCH,
            format!("/api/v1/organizations/{own}"),
            Some(json!({ "name": "Renamed" })),
        ),
        (Method::GET, format!("/api/v1/organizations/{own}"), None),
        (Method::GET, format!("/api/v1/organizations/{org}"), None),
        (
            Method::POST,
            "/api/v1/api-keys".to_owned(),
            Some(json!({ "name": "k", "organization_id": own })),
        ),
        (Method::POST, "/api/v1/auth/mfa/totp".to_owned(), None),
        (
            Method::PATCH,
            "/api/v1/users/me".to_owned(),
            Some(json!({ "full_name": "Mallory" })),
        ),
        (Method::GET, "/api/v1/users/me".to_owned(), None),
        (Method::GET, "/api/v1/organizations".to_owned(), None),
    ];
    for (method, path, body) in refusals {
        let response = app.send_as(method.clone(), access, &path, body).await;
        assert_eq!(response.status(), 403, "{method} {path}");
    }
    let team = json_of(
        app.get_as(
            &viewer.access_token,
            &format!("/api/v1/organizations/{own}"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(team["name"], "Vera's", "nothing was renamed");
    let me = json_of(app.me(&viewer.access_token).await, 200).await;
    assert_eq!(me["full_name"], "Test User");
    assert!(keys_of(&app, &viewer.access_token).await.is_empty());
}

#[on_both_backends]
async fn an_api_scope_acts_only_in_the_applications_organization(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "enterprise").await;
    let (client_id, client_secret) = billing_application(&app, &ada, &org).await;
    let other = app.create_team(&ada.access_token, "Globex").await;
    let other = other["id"].as_str().unwrap();

    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "ada@example.com").await;
    let tokens = tokens_for(&app, &mut browser, (&client_id, &client_secret), "org:read").await;
    let access = tokens["access_token"].as_str().unwrap();

    let team = json_of(
        app.get_as(access, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(team["name"], "Acme");
    // Narrowed to reading, in the application's organization only.
    let response = app
        .send_as(
            Method::PATCH,
            access,
            &format!("/api/v1/organizations/{org}"),
            Some(json!({ "name": "Renamed" })),
        )
        .await;
    assert_eq!(response.status(), 403);
    assert_eq!(
        app.get_as(access, &format!("/api/v1/organizations/{other}"))
            .await
            .status(),
        404
    );
    assert_eq!(
        app.get_as(
            access,
            &format!("/api/v1/organizations/{}", ada.organization_id)
        )
        .await
        .status(),
        404
    );
    assert_eq!(app.me(access).await.status(), 403);
}

/// The organization a route acts in is the one its route names (the path's `{id}`, or for the
/// routes outside the organizations' scope `X-Organization-ID`), whatever else the request
/// says. Mallory owns her own organization and tries to reach Ada's with what she holds there:
/// her own organization in the header beside Ada's in the path, her API key, and Ada's
/// organization in the header of a header route.
#[on_both_backends]
async fn a_request_acts_only_in_the_organization_its_route_names(app: TestApp) {
    let (ada, _bob, acme) = team_with_bob(&app, "free").await;
    let mallory = app.logged_in("mallory@example.com").await;
    let own = app.create_team(&mallory.access_token, "Mallory's").await;
    let own = own["id"].as_str().unwrap().to_owned();
    let key = json_of(
        app.create_api_key(&mallory.access_token, "ci", &own).await,
        201,
    )
    .await;
    let key = key["key"].as_str().unwrap().to_owned();
    let members = format!("/api/v1/organizations/{acme}/members");

    // Her token, her own organization in the header, Ada's in the path.
    let answer = app
        .in_org(Method::GET, &mallory.access_token, &own, &members, None)
        .await;
    detail_of(answer, 404).await;
    // Her API key, with its own organization, at Ada's path.
    let answer = app
        .client
        .get(app.url(&members))
        .header("X-API-Key", &key)
        .header("X-Organization-ID", &own)
        .send()
        .await
        .unwrap();
    detail_of(answer, 404).await;
    // A header route, Ada's organization in the header: not hers.
    let answer = app
        .in_org(
            Method::GET,
            &mallory.access_token,
            &acme,
            "/api/v1/webhooks/endpoints",
            None,
        )
        .await;
    detail_of(answer, 404).await;
    // Refused before the body is read: a write with a body that is not JSON is still 404.
    let answer = app
        .client
        .post(app.url(&members))
        .bearer_auth(&mallory.access_token)
        .header("Content-Type", "text/plain")
        .body("not json")
        .send()
        .await
        .unwrap();
    detail_of(answer, 404).await;
    // Ada, for whom the same requests are served.
    let listed = json_of(app.get_as(&ada.access_token, &members).await, 200).await;
    assert_eq!(listed["total"], 2, "{listed}");
}
