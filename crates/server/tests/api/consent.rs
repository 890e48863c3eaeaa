//! API scopes need the user's consent: the hosted consent page, in the organization's branding,
//! remembered per user and application, listed and revocable in the user's account.

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::admission::{authorize_url, billing_application, sign_in_on_the_page, team_with_bob};
use crate::helpers::{
    artifacts, detail_of, hidden, in_browser, json_of, on_both_backends, Browser, TestApp, PASSWORD,
};
use crate::mfa::{code, with_totp};
use crate::oauth::{exchanged, location, query_param, CALLBACK};

fn consent_form(page: &str, decision: &'static str) -> Vec<(&'static str, String)> {
    vec![
        ("csrf_token", hidden(page, "csrf_token")),
        ("return_to", hidden(page, "return_to")),
        ("decision", decision.to_owned()),
    ]
}

async fn post_consent(
    app: &TestApp,
    browser: &mut Browser,
    form: &[(&'static str, String)],
) -> Response {
    let form: Vec<(&str, &str)> = form
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    browser.post_form(&app.url("/oauth/consent"), &form).await
}

#[on_both_backends]
async fn api_scopes_are_asked_for_once_then_remembered_until_revoked(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "enterprise").await;
    let client = billing_application(&app, &ada, &org).await;
    let branding = json!({ "primary_color": "#0F766E" });
    json_of(
        app.send_as(
            Method::PUT,
            &ada.access_token,
            &format!("/api/v1/organizations/{org}/branding"),
            Some(branding),
        )
        .await,
        200,
    )
    .await;
    let authorize = authorize_url(&app, &client.0, "openid org:read members:read");
    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "bob@example.com").await;

    // Before, the code came at once. Now the page asks, naming each API scope.
    let response = browser.get(&authorize).await;
    assert_eq!(response.status(), 200);
    let page = response.text().await.unwrap();
    assert!(
        page.contains("<h1>Allow Billing to act for you?</h1>"),
        "{page}"
    );
    assert!(
        page.contains("<code>org:read</code>") && page.contains("<code>members:read</code>"),
        "{page}"
    );
    assert!(
        !page.contains("<code>openid</code>"),
        "only API scopes need consent"
    );
    assert!(
        page.contains("--primary: #0F766E"),
        "in the organization's look"
    );

    // A form from elsewhere (no matching anti-forgery token) decides nothing.
    let forged = Browser::new()
        .post_form(
            &app.url("/oauth/consent"),
            &[
                ("csrf_token", "csrf_made-up"),
                ("return_to", &hidden(&page, "return_to")),
                ("decision", "allow"),
            ],
        )
        .await;
    assert_eq!(forged.status(), 403);

    // Deny: the client hears access_denied with its state, and nothing is remembered.
    let response = post_consent(&app, &mut browser, &consent_form(&page, "deny")).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    assert!(redirect.starts_with(CALLBACK), "{redirect}");
    assert_eq!(
        query_param(&redirect, "error").as_deref(),
        Some("access_denied")
    );
    assert_eq!(query_param(&redirect, "state").as_deref(), Some("s1"));
    assert_eq!(query_param(&redirect, "code"), None);
    let response = browser.get(&format!("{authorize}&prompt=none")).await;
    assert_eq!(
        query_param(&location(&response), "error").as_deref(),
        Some("consent_required")
    );

    // Allow: a code at once.
    let page = browser.get(&authorize).await.text().await.unwrap();
    let response = post_consent(&app, &mut browser, &consent_form(&page, "allow")).await;
    assert_eq!(response.status(), 302);
    let code_given = query_param(&location(&response), "code").expect("a code");
    let tokens = exchanged(&app, &code_given, (&client.0, &client.1)).await;
    let access = tokens["access_token"].as_str().unwrap().to_owned();
    json_of(
        app.get_as(&access, &format!("/api/v1/organizations/{org}/members"))
            .await,
        200,
    )
    .await;

    // Remembered: the next authorization asks nothing; asking for less asks nothing either.
    for scope in ["openid org:read members:read", "org:read"] {
        let response = browser.get(&authorize_url(&app, &client.0, scope)).await;
        assert_eq!(response.status(), 302, "{scope}");
        assert!(
            query_param(&location(&response), "code").is_some(),
            "{scope}"
        );
    }
    // Asking for more asks again.
    assert_eq!(
        browser
            .get(&authorize_url(&app, &client.0, "org:read webhooks:read"))
            .await
            .status(),
        200
    );

    // The account lists it; the application's token may not.
    let listed = json_of(
        app.get_as(&bob_token(&app).await, "/api/v1/users/me/consents")
            .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 1, "{listed}");
    let listed = &listed["items"];
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["client_id"], client.0.as_str());
    assert_eq!(listed[0]["application_name"], "Billing");
    assert_eq!(listed[0]["scope"], "org:read members:read");
    assert_eq!(
        app.get_as(&access, "/api/v1/users/me/consents")
            .await
            .status(),
        403
    );
    let audited = json_of(
        app.get_as(
            &ada.access_token,
            &format!("/api/v1/organizations/{org}/audit-log?action=oauth.consent_granted"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(audited["total"], 1);

    // Revoked: the application's session of Bob ends at once, and the page asks again.
    let bob = bob_token(&app).await;
    let path = format!("/api/v1/users/me/consents/{}", client.0);
    assert_eq!(
        app.send_as(Method::DELETE, &access, &path, None)
            .await
            .status(),
        403,
        "not by the application"
    );
    assert_eq!(
        app.send_as(Method::DELETE, &bob, &path, None)
            .await
            .status(),
        204
    );
    assert_eq!(
        app.get_as(&access, &format!("/api/v1/organizations/{org}/members"))
            .await
            .status(),
        401
    );
    let refreshed = crate::oauth::token_form(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
        ],
        Some((&client.0, &client.1)),
    )
    .await;
    assert_eq!(refreshed.status(), 400);
    assert_eq!(browser.get(&authorize).await.status(), 200, "asked again");
    detail_of(app.send_as(Method::DELETE, &bob, &path, None).await, 404).await;
    detail_of(
        app.send_as(
            Method::DELETE,
            &bob,
            "/api/v1/users/me/consents/ghc_nothing",
            None,
        )
        .await,
        404,
    )
    .await;
    let listed = json_of(app.get_as(&bob, "/api/v1/users/me/consents").await, 200).await;
    assert_eq!(
        (listed["items"].clone(), listed["total"].clone()),
        (json!([]), json!(0))
    );
}

async fn bob_token(app: &TestApp) -> String {
    let tokens: Value = json_of(app.login("bob@example.com", PASSWORD).await, 200).await;
    tokens["access_token"].as_str().unwrap().to_owned()
}

/// The hosted pages of an authorization in headless Chromium: the organization requires a
/// second factor, the member signs in with theirs, then allows the API scopes on the consent
/// page, all by keyboard, and lands on the client's redirect URI with a code.
async fn in_headless_chromium_the_second_factor_and_the_consent_lead_to_the_client(
    backend: crate::helpers::Backend,
) {
    let app = TestApp::spawn(backend).await;
    let (ada, bob, org) = team_with_bob(&app, "enterprise").await;
    let client = billing_application(&app, &ada, &org).await;
    let (secret, _) = with_totp(&app, &bob).await;
    let mut policies = crate::mfa::requiring_mfa(&["totp"]);
    policies["mfa_policy"]["grace_period_hours"] = json!(0);
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

    let authorize = authorize_url(&app, &client.0, "openid org:read");
    let totp = code(&secret, 0);
    let screenshot = artifacts().join(format!("consent-{backend:?}.png"));
    let seen = in_browser(
        "authorize_flow.mjs",
        [
            authorize.as_str(),
            CALLBACK,
            "bob@example.com",
            PASSWORD,
            totp.as_str(),
        ],
        &screenshot,
    )
    .await;
    assert_eq!(seen["mfaHeading"], "Two-step verification");
    assert_eq!(seen["consentHeading"], "Allow Billing to act for you?");
    assert_eq!(
        seen["scopes"],
        json!(["See the organization, its applications and its audit log org:read"])
    );
    let landed = seen["callback"].as_str().unwrap();
    assert!(landed.starts_with(CALLBACK), "{landed}");
    assert!(query_param(landed, "code").unwrap().starts_with("ghac_"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_headless_chromium_the_second_factor_and_the_consent_lead_to_the_client_sqlite() {
    in_headless_chromium_the_second_factor_and_the_consent_lead_to_the_client(
        crate::helpers::Backend::Sqlite,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_headless_chromium_the_second_factor_and_the_consent_lead_to_the_client_postgres() {
    in_headless_chromium_the_second_factor_and_the_consent_lead_to_the_client(
        crate::helpers::Backend::Postgres,
    )
    .await;
}
