//! Organization-scoped tokens: how the product behind Gatehouse learns the organization, the
//! member's role and what that role may do, from the token alone (verified offline with PyJWT,
//! as a product would), and how what the organization decides reaches the next token.

use reqwest::Method;
use serde_json::{json, Value};

use crate::accounts::{verify_offline, verify_offline_for};
use crate::admission::{
    allow_only_the_office, authorize_url, behind_a_trusted_proxy, billing_application,
    requires_mfa_now, sign_in_on_the_page, team_with_bob, tokens_for,
};
use crate::helpers::{detail_of, json_of, on_both_backends, Backend, Browser, TestApp, PASSWORD};
use crate::mfa::{code, with_totp};
use crate::oauth::{exchanged, location, past_consent, query_param, token_form};

const MEMBER_PERMISSIONS: [&str; 5] = [
    "organization.read",
    "organization.members.read",
    "organization.members.invite",
    "applications.read",
    "api_keys.create",
];

async fn login_into(app: &TestApp, email: &str, organization: &str) -> reqwest::Response {
    app.post_json(
        "/api/v1/auth/login",
        &json!({ "email": email, "password": PASSWORD, "organization_id": organization }),
    )
    .await
}

async fn refresh_with(app: &TestApp, refresh_token: &str, body: Value) -> reqwest::Response {
    let mut body = body;
    body["refresh_token"] = json!(refresh_token);
    app.post_json("/api/v1/auth/refresh", &body).await
}

/// The claims of the access token in `tokens`, as a product verifies them offline.
async fn claims_of(app: &TestApp, tokens: &Value) -> Value {
    verify_offline(app, tokens["access_token"].as_str().unwrap()).await
}

/// The claims of the access token in `tokens` issued to the application `client_id`, as its
/// product verifies them offline (its audience is its client id).
async fn app_claims_of(app: &TestApp, tokens: &Value, client_id: &str) -> Value {
    verify_offline_for(app, tokens["access_token"].as_str().unwrap(), client_id).await
}

#[on_both_backends]
async fn a_login_naming_an_organization_gets_a_token_that_speaks_for_it(app: TestApp) {
    let (_, _, org) = team_with_bob(&app, "free").await;

    let tokens = json_of(login_into(&app, "bob@example.com", &org).await, 200).await;
    let claims = claims_of(&app, &tokens).await;
    assert_eq!(claims["org_id"], org.as_str());
    assert_eq!(claims["org_role"], "member");
    assert_eq!(claims["org_permissions"], json!(MEMBER_PERMISSIONS));
    assert_eq!(claims["aud"], "gatehouse");

    // The session keeps the organization: the next token speaks for it too.
    let refreshed = json_of(
        refresh_with(&app, tokens["refresh_token"].as_str().unwrap(), json!({})).await,
        200,
    )
    .await;
    assert_eq!(claims_of(&app, &refreshed).await["org_id"], org.as_str());

    // Without one, a token speaks for no organization.
    let plain = json_of(app.login("bob@example.com", PASSWORD).await, 200).await;
    let claims = claims_of(&app, &plain).await;
    for absent in ["org_id", "org_role", "org_permissions"] {
        assert!(claims.get(absent).is_none(), "{claims}");
    }
}

#[on_both_backends]
async fn an_organization_that_does_not_have_the_user_gives_no_token(app: TestApp) {
    let (_, _, org) = team_with_bob(&app, "free").await;
    app.logged_in("mallory@example.com").await;

    let refused = detail_of(login_into(&app, "mallory@example.com", &org).await, 403).await;
    assert_eq!(refused, "you are not a member of this organization");
    let refused = detail_of(
        login_into(
            &app,
            "bob@example.com",
            "7d1d5b5e-0000-4000-8000-000000000000",
        )
        .await,
        403,
    )
    .await;
    assert_eq!(refused, "you are not a member of this organization");

    let bad = json_of(login_into(&app, "bob@example.com", "acme").await, 422).await;
    assert_eq!(bad["detail"][0]["loc"], json!(["body", "organization_id"]));
    let bad = json_of(
        app.post_json(
            "/api/v1/auth/refresh",
            &json!({ "refresh_token": "ghr_x", "organization_id": 7 }),
        )
        .await,
        422,
    )
    .await;
    assert!(bad["detail"].is_array(), "{bad}");
}

#[on_both_backends]
async fn a_role_change_and_a_removal_reach_the_next_refresh(app: TestApp) {
    let (ada, bob, org) = team_with_bob(&app, "free").await;
    let tokens = json_of(login_into(&app, "bob@example.com", &org).await, 200).await;
    let refresh_token = tokens["refresh_token"].as_str().unwrap();
    let bob_path = format!("/api/v1/organizations/{org}/members/{}", bob.user_id);

    json_of(
        app.send_as(
            Method::PATCH,
            &ada.access_token,
            &bob_path,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        200,
    )
    .await;
    let refreshed = json_of(refresh_with(&app, refresh_token, json!({})).await, 200).await;
    let claims = claims_of(&app, &refreshed).await;
    assert_eq!(claims["org_role"], "viewer");
    assert_eq!(
        claims["org_permissions"],
        json!([
            "organization.read",
            "organization.members.read",
            "applications.read"
        ])
    );

    json_of(
        app.send_as(Method::DELETE, &ada.access_token, &bob_path, None)
            .await,
        200,
    )
    .await;
    let refused = detail_of(refresh_with(&app, refresh_token, json!({})).await, 403).await;
    assert_eq!(refused, "you are not a member of this organization");

    // Naming no organization (null) clears it, for this refresh and the ones after.
    let cleared = json_of(
        refresh_with(&app, refresh_token, json!({ "organization_id": null })).await,
        200,
    )
    .await;
    assert!(claims_of(&app, &cleared).await.get("org_id").is_none());
    let after = json_of(refresh_with(&app, refresh_token, json!({})).await, 200).await;
    assert!(claims_of(&app, &after).await.get("org_id").is_none());
}

#[on_both_backends]
async fn a_policy_saved_since_and_a_deleted_organization_reach_the_next_refresh(app: TestApp) {
    // Bob's session speaks for Acme; then Acme requires a second factor he does not have.
    let (ada, _, org) = team_with_bob(&app, "business").await;
    let tokens = json_of(login_into(&app, "bob@example.com", &org).await, 200).await;
    let bob_refresh = tokens["refresh_token"].as_str().unwrap();
    requires_mfa_now(&app, &ada, &org).await;
    let refused = detail_of(refresh_with(&app, bob_refresh, json!({})).await, 403).await;
    assert_eq!(refused, "organization requires multi-factor authentication");

    // Carla's session speaks for Globex; then its owner deletes it.
    let globex = app.create_team(&ada.access_token, "Globex").await;
    let globex = globex["id"].as_str().unwrap();
    app.member_of(&ada.access_token, globex, "carla@example.com", "member")
        .await;
    let tokens = json_of(login_into(&app, "carla@example.com", globex).await, 200).await;
    let carla_refresh = tokens["refresh_token"].as_str().unwrap();
    let path = format!("/api/v1/organizations/{globex}");
    json_of(
        app.send_as(Method::DELETE, &ada.access_token, &path, None)
            .await,
        200,
    )
    .await;
    let refused = detail_of(refresh_with(&app, carla_refresh, json!({})).await, 403).await;
    assert_eq!(refused, "you are not a member of this organization");
}

#[on_both_backends]
async fn a_refresh_switches_to_another_organization_of_the_user(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "free").await;
    let other = app.create_team(&ada.access_token, "Globex").await;
    let other = other["id"].as_str().unwrap();
    let tokens = json_of(login_into(&app, "ada@example.com", &org).await, 200).await;
    let refresh_token = tokens["refresh_token"].as_str().unwrap();

    let switched = json_of(
        refresh_with(&app, refresh_token, json!({ "organization_id": other })).await,
        200,
    )
    .await;
    let claims = claims_of(&app, &switched).await;
    assert_eq!(claims["org_id"], other);
    assert_eq!(claims["org_role"], "owner");
    let kept = json_of(refresh_with(&app, refresh_token, json!({})).await, 200).await;
    assert_eq!(
        claims_of(&app, &kept).await["org_id"],
        other,
        "the switch is kept"
    );

    // A switch the organization refuses changes nothing.
    app.logged_in("mallory@example.com").await;
    let mallory = json_of(app.login("mallory@example.com", PASSWORD).await, 200).await;
    let refused = refresh_with(
        &app,
        mallory["refresh_token"].as_str().unwrap(),
        json!({ "organization_id": org }),
    )
    .await;
    detail_of(refused, 403).await;
    let still = json_of(
        refresh_with(&app, mallory["refresh_token"].as_str().unwrap(), json!({})).await,
        200,
    )
    .await;
    assert!(claims_of(&app, &still).await.get("org_id").is_none());
}

#[on_both_backends]
async fn the_mfa_policy_holds_for_organization_tokens_and_the_second_step_names_the_organization(
    app: TestApp,
) {
    let (ada, bob, org) = team_with_bob(&app, "business").await;
    let (secret, _) = with_totp(&app, &bob).await;
    app.member_of(&ada.access_token, &org, "carla@example.com", "member")
        .await;
    requires_mfa_now(&app, &ada, &org).await;

    // A member with a second factor names the organization again at the second step.
    let step = json_of(login_into(&app, "bob@example.com", &org).await, 200).await;
    assert_eq!(step["mfa_required"], true);
    let tokens = json_of(
            app.post_json(
                "/api/v1/auth/mfa/verify",
                &json!({ "mfa_token": step["mfa_token"], "code": code(&secret, 0), "organization_id": org }),
            )
            .await,
            200,
        )
        .await;
    let claims = claims_of(&app, &tokens).await;
    assert_eq!(claims["org_id"], org.as_str());
    assert_eq!(claims["amr"], json!(["pwd", "otp"]));

    // Carla, without a second factor, gets no token for it.
    let refused = detail_of(login_into(&app, "carla@example.com", &org).await, 403).await;
    assert_eq!(refused, "organization requires multi-factor authentication");
}

#[on_both_backends]
async fn a_sign_in_link_names_the_organization_too(app: TestApp) {
    let (_, _, org) = team_with_bob(&app, "free").await;
    let asked = app
        .post_json(
            "/api/v1/auth/magic-link",
            &json!({ "email": "bob@example.com" }),
        )
        .await;
    assert_eq!(asked.status(), 202);
    let token = app.mailed_token("bob@example.com", "/magic-link/").await;
    let tokens = json_of(
        app.post_json(
            "/api/v1/auth/magic-link/verify",
            &json!({ "token": token, "organization_id": org }),
        )
        .await,
        200,
    )
    .await;
    let claims = claims_of(&app, &tokens).await;
    assert_eq!(claims["org_id"], org.as_str());
    assert_eq!(claims["amr"], json!(["email"]));
}

#[on_both_backends]
async fn a_sign_in_link_refused_for_an_organization_is_not_spent(app: TestApp) {
    let (ada, _, _) = team_with_bob(&app, "free").await;
    // Bob names Ada's workspace, which he does not belong to: refused, and the link stays.
    let asked = app
        .post_json(
            "/api/v1/auth/magic-link",
            &json!({ "email": "bob@example.com" }),
        )
        .await;
    assert_eq!(asked.status(), 202);
    let token = app.mailed_token("bob@example.com", "/magic-link/").await;
    let refused = app
        .post_json(
            "/api/v1/auth/magic-link/verify",
            &json!({ "token": token, "organization_id": ada.organization_id }),
        )
        .await;
    assert_eq!(
        detail_of(refused, 403).await,
        "you are not a member of this organization"
    );
    // The same link signs him in without it, once.
    let tokens = json_of(
        app.post_json("/api/v1/auth/magic-link/verify", &json!({ "token": token }))
            .await,
        200,
    )
    .await;
    assert_eq!(claims_of(&app, &tokens).await["amr"], json!(["email"]));
    let again = app
        .post_json("/api/v1/auth/magic-link/verify", &json!({ "token": token }))
        .await;
    assert_eq!(again.status(), 422, "spent by the sign-in it opened");
}

/// Bob, in a team behind an IP allowlist, signs in naming it from outside and from inside;
/// his refresh from outside is refused too.
async fn the_allowlist_holds_for_organization_tokens(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "business").await;
    allow_only_the_office(&app, &ada, &org).await;
    let from = |address: &'static str, body: Value| {
        let app = &app;
        async move {
            app.client
                .post(app.url(match body.get("refresh_token") {
                    Some(_) => "/api/v1/auth/refresh",
                    None => "/api/v1/auth/login",
                }))
                .header("X-Forwarded-For", address)
                .json(&body)
                .send()
                .await
                .unwrap()
        }
    };
    let bob = json!({ "email": "bob@example.com", "password": PASSWORD, "organization_id": org });

    let refused = detail_of(from("198.51.100.20", bob.clone()).await, 403).await;
    assert!(refused.contains("allowlist"), "{refused}");
    let tokens = json_of(from("203.0.113.9", bob).await, 200).await;
    assert_eq!(claims_of(&app, &tokens).await["org_id"], org.as_str());

    let refresh = json!({ "refresh_token": tokens["refresh_token"] });
    let refused = detail_of(from("198.51.100.20", refresh.clone()).await, 403).await;
    assert!(refused.contains("allowlist"), "{refused}");
    json_of(from("203.0.113.9", refresh).await, 200).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allowlist_holds_for_organization_tokens_sqlite() {
    the_allowlist_holds_for_organization_tokens(
        TestApp::spawn_with(Backend::Sqlite, behind_a_trusted_proxy()).await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allowlist_holds_for_organization_tokens_postgres() {
    the_allowlist_holds_for_organization_tokens(
        TestApp::spawn_with(Backend::Postgres, behind_a_trusted_proxy()).await,
    )
    .await;
}

/// The claims of a JWT as sent, unverified (an ID token's audience is the client, which
/// authlib checks in the OpenID Connect tests).
fn payload_of(token: &str) -> Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).unwrap();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[on_both_backends]
async fn an_applications_tokens_speak_for_its_organization_and_name_it_in_their_audience(
    app: TestApp,
) {
    let (ada, _, org) = team_with_bob(&app, "enterprise").await;
    let (client_id, client_secret) = billing_application(&app, &ada, &org).await;
    let vera = app
        .member_of(&ada.access_token, &org, "vera@example.com", "viewer")
        .await;
    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "vera@example.com").await;

    // Naming another organization than the application's is refused at the client.
    let other = app.create_team(&vera.access_token, "Vera's").await;
    let asked = format!(
        "{}&organization_id={}",
        authorize_url(&app, &client_id, "openid"),
        other["id"].as_str().unwrap()
    );
    let response = browser.get(&asked).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    assert_eq!(
        query_param(&redirect, "error").as_deref(),
        Some("invalid_request"),
        "{redirect}"
    );
    assert_eq!(query_param(&redirect, "code"), None);

    let asked = format!(
        "{}&organization_id={org}",
        authorize_url(&app, &client_id, "openid")
    );
    let response = browser.get(&asked).await;
    let response = past_consent(&app, &mut browser, response).await;
    let code = query_param(&location(&response), "code").expect("a code");
    let tokens = exchanged(&app, &code, (&client_id, &client_secret)).await;

    let claims = app_claims_of(&app, &tokens, &client_id).await;
    assert_eq!(
        claims["aud"],
        json!([client_id]),
        "`openid` alone: the application's"
    );
    assert_eq!(claims["org_id"], org.as_str());
    assert_eq!(claims["org_role"], "viewer");
    let id_token = payload_of(tokens["id_token"].as_str().unwrap());
    assert_eq!(id_token["aud"], client_id.as_str());
    assert_eq!(
        (&id_token["org_id"], &id_token["org_role"]),
        (&json!(org), &json!("viewer"))
    );

    // A role change reaches the application's next refresh.
    let vera_path = format!("/api/v1/organizations/{org}/members/{}", vera.user_id);
    json_of(
        app.send_as(
            Method::PATCH,
            &ada.access_token,
            &vera_path,
            Some(json!({ "role": "member" })),
        )
        .await,
        200,
    )
    .await;
    let refresh = [
        ("grant_type", "refresh_token"),
        ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
    ];
    let refreshed = json_of(
        token_form(&app, &refresh, Some((&client_id, &client_secret))).await,
        200,
    )
    .await;
    assert_eq!(
        app_claims_of(&app, &refreshed, &client_id).await["org_role"],
        "member"
    );

    // Tokens of the flow made without naming it speak for it too: it is the only one.
    let tokens = tokens_for(&app, &mut browser, (&client_id, &client_secret), "openid").await;
    assert_eq!(
        app_claims_of(&app, &tokens, &client_id).await["org_id"],
        org.as_str()
    );
}

#[on_both_backends]
async fn an_application_token_carries_only_what_the_user_granted(app: TestApp) {
    let (ada, _, org) = team_with_bob(&app, "enterprise").await;
    let (client_id, client_secret) = billing_application(&app, &ada, &org).await;
    let mut browser = Browser::new();
    sign_in_on_the_page(&app, &mut browser, "ada@example.com").await;

    // `openid email`: meant for the application alone, with none of the owner's role.
    // Before, `aud` named `gatehouse` too and `org_permissions` listed the whole role, so a
    // product verifying first-party tokens (audience `gatehouse`) took it for one.
    let tokens = tokens_for(
        &app,
        &mut browser,
        (&client_id, &client_secret),
        "openid email",
    )
    .await;
    let claims = app_claims_of(&app, &tokens, &client_id).await;
    assert_eq!(claims["aud"], json!([client_id]));
    assert_eq!(
        (&claims["org_id"], &claims["org_role"]),
        (&json!(org), &json!("owner"))
    );
    assert!(claims.get("org_permissions").is_none(), "{claims}");
    let id_token = payload_of(tokens["id_token"].as_str().unwrap());
    assert!(id_token.get("org_permissions").is_none(), "{id_token}");
    let access = tokens["access_token"].as_str().unwrap();
    // Gatehouse itself: userinfo answers, the organization's routes refuse, as before.
    assert_eq!(
        json_of(app.get_as(access, "/oauth/userinfo").await, 200).await["email"],
        "ada@example.com"
    );
    assert_eq!(
        app.get_as(access, &format!("/api/v1/organizations/{org}"))
            .await
            .status(),
        403
    );
    // Refreshed, it stays the application's alone.
    let refresh = [
        ("grant_type", "refresh_token"),
        ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
    ];
    let refreshed = json_of(
        token_form(&app, &refresh, Some((&client_id, &client_secret))).await,
        200,
    )
    .await;
    let claims = app_claims_of(&app, &refreshed, &client_id).await;
    assert_eq!(claims["aud"], json!([client_id]));
    assert!(claims.get("org_permissions").is_none(), "{claims}");

    // `openid org:read`: Gatehouse's API is an audience too, and of the role only what
    // `org:read` covers (docs/oidc.md's table).
    let tokens = tokens_for(
        &app,
        &mut browser,
        (&client_id, &client_secret),
        "openid org:read",
    )
    .await;
    let reads = json!(["organization.read", "applications.read", "audit.read"]);
    let claims = app_claims_of(&app, &tokens, &client_id).await;
    assert_eq!(claims["aud"], json!(["gatehouse", client_id]));
    assert_eq!(claims["org_permissions"], reads);
    assert_eq!(
        payload_of(tokens["id_token"].as_str().unwrap())["org_permissions"],
        reads
    );
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(
        app.get_as(access, &format!("/api/v1/organizations/{org}"))
            .await
            .status(),
        200
    );
    assert_eq!(
        app.get_as(access, &format!("/api/v1/organizations/{org}/members"))
            .await
            .status(),
        403
    );

    // A first-party token (`/auth/*`) is unchanged: `gatehouse`, the whole role.
    let first_party = json_of(login_into(&app, "ada@example.com", &org).await, 200).await;
    let claims = claims_of(&app, &first_party).await;
    assert_eq!(claims["aud"], "gatehouse");
    assert!(claims["org_permissions"]
        .as_array()
        .unwrap()
        .contains(&json!("organization.members.update")));
}
