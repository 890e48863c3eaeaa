//! OpenID Connect over HTTP: discovery, the ID token and userinfo (with authlib's OpenID Connect
//! client, a library written by others), revocation, introspection, machine tokens
//! (`client_credentials`), and the API scopes that narrow what a token may do.

use base64::Engine as _;
use reqwest::{header, Method, Response};
use serde_json::{json, Value};

use crate::helpers::{
    detail_of, hidden, json_of, oauth_client, on_both_backends, Browser, LoggedIn, TestApp,
    PASSWORD,
};
use crate::oauth::{
    exchanged, form_at, location, oauth_error, past_consent, query_param, token_form, CALLBACK,
    CHALLENGE,
};

const NONCE: &str = "n-0S6_WzA2Mj";

/// An enterprise team of Owen's with an application: (Owen, the team's id, client id, secret).
async fn enterprise_client(app: &TestApp) -> (LoggedIn, String, String, String) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "enterprise").await;
    let (client_id, secret) = application(app, &owner, &org, "Billing").await;
    (owner, org, client_id, secret)
}

/// Registers an application in the organization: (client id, secret).
async fn application(app: &TestApp, owner: &LoggedIn, org: &str, name: &str) -> (String, String) {
    let created = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
            Some(json!({ "name": name, "redirect_uris": [CALLBACK] })),
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

fn encoded(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Owen signs in on the hosted page through the authorization endpoint (with `scope` and a
/// nonce) and the client exchanges the code: the token response.
async fn signed_in(app: &TestApp, client_id: &str, secret: &str, scope: &str) -> Value {
    let mut browser = Browser::new();
    let authorize = format!(
        "{}?response_type=code&client_id={client_id}&redirect_uri={}&scope={}&state=s&nonce={NONCE}&code_challenge={CHALLENGE}&code_challenge_method=S256",
        app.url("/oauth/authorize"), encoded(CALLBACK), encoded(scope),
    );
    let login = location(&browser.get(&authorize).await);
    let page = browser.get(&app.url(&login)).await.text().await.unwrap();
    let form = [
        ("email", "owen@example.com"),
        ("password", PASSWORD),
        ("csrf_token", &hidden(&page, "csrf_token")),
        ("return_to", &hidden(&page, "return_to")),
    ];
    let response = browser.post_form(&app.url("/login"), &form).await;
    assert_eq!(response.status(), 303);
    let response = browser.get(&app.url(&location(&response))).await;
    let response = past_consent(app, &mut browser, response).await;
    let code = query_param(&location(&response), "code").unwrap();
    exchanged(app, &code, (client_id, secret)).await
}

fn payload(jwt: &str) -> Value {
    let part = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .unwrap(),
    )
    .unwrap()
}

async fn introspect(app: &TestApp, token: &str, client: (&str, &str)) -> Value {
    json_of(
        form_at(app, "/oauth/introspect", &[("token", token)], Some(client)).await,
        200,
    )
    .await
}

async fn revoke(app: &TestApp, token: &str, client: (&str, &str)) -> Response {
    form_at(app, "/oauth/revoke", &[("token", token)], Some(client)).await
}

async fn machine_token(app: &TestApp, client: (&str, &str), scope: &str) -> Response {
    token_form(
        app,
        &[("grant_type", "client_credentials"), ("scope", scope)],
        Some(client),
    )
    .await
}

#[on_both_backends]
async fn discovery_names_every_endpoint_under_the_public_url(app: TestApp) {
    let response = app
        .client
        .get(app.url("/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap();
    let document = json_of(response, 200).await;
    let issuer = app.public_url.as_str();
    assert_eq!(document["issuer"], issuer);
    for (field, path) in [
        ("authorization_endpoint", "/oauth/authorize"),
        ("token_endpoint", "/oauth/token"),
        ("userinfo_endpoint", "/oauth/userinfo"),
        ("revocation_endpoint", "/oauth/revoke"),
        ("introspection_endpoint", "/oauth/introspect"),
        ("jwks_uri", "/.well-known/jwks.json"),
    ] {
        assert_eq!(document[field], format!("{issuer}{path}"), "{field}");
    }
    let scopes = document["scopes_supported"].as_array().unwrap();
    for scope in [
        "openid",
        "profile",
        "email",
        "org:read",
        "org:write",
        "members:read",
        "members:write",
        "webhooks:read",
        "webhooks:write",
    ] {
        assert!(scopes.contains(&json!(scope)), "{scope}");
    }
    assert_eq!(
        document["grant_types_supported"],
        json!(["authorization_code", "refresh_token", "client_credentials"])
    );
    assert_eq!(
        document["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(
        document["id_token_signing_alg_values_supported"],
        json!(["RS256"])
    );
    assert_eq!(document["response_types_supported"], json!(["code"]));
    // Every endpoint it names answers (the JWKS with keys, the others as they should
    // without credentials).
    let jwks = json_of(
        app.client
            .get(document["jwks_uri"].as_str().unwrap())
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(!jwks["keys"].as_array().unwrap().is_empty());
    let userinfo = app
        .client
        .get(document["userinfo_endpoint"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(oauth_error(userinfo, 401).await.0, "invalid_token");
}

#[on_both_backends]
async fn authlib_signs_in_with_nothing_but_the_issuer_and_validates_the_id_token(app: TestApp) {
    let (owner, org, client_id, secret) = enterprise_client(&app).await;
    let (other_client, _) = application(&app, &owner, &org, "Another").await;
    let seen = oauth_client(
        "authlib_oidc.py",
        &[
            &app.public_url,
            &client_id,
            &secret,
            CALLBACK,
            "owen@example.com",
            PASSWORD,
            &other_client,
        ],
    )
    .await;
    assert_eq!(seen["sub"], owner.user_id.as_str());
    assert_eq!(seen["aud"], client_id.as_str());
    assert_eq!(seen["email"], "owen@example.com");
    assert_eq!(seen["email_verified"], false);
    assert_eq!(seen["name"], "Test User");
    assert_eq!(seen["amr"], json!(["pwd"]));
    assert!(seen["auth_time"].as_i64().unwrap() <= seen["iat"].as_i64().unwrap());
    assert_eq!(seen["scope"], "openid email profile");
    assert_eq!(
        seen["userinfo"],
        json!({ "sub": owner.user_id, "email": "owen@example.com", "email_verified": false, "name": "Test User" })
    );
    // What authlib itself refused: another nonce, a token meant for another client, an
    // access token the at_hash is not of.
    assert_eq!(
        seen["refused"],
        json!({ "nonce": "nonce", "audience": "aud", "at_hash": "at_hash" })
    );
}

#[on_both_backends]
async fn the_id_token_and_userinfo_carry_what_the_scope_allows(app: TestApp) {
    let (owner, _, client_id, secret) = enterprise_client(&app).await;
    // openid alone: who, not their email or name.
    let tokens = signed_in(&app, &client_id, &secret, "openid").await;
    let id_token = payload(tokens["id_token"].as_str().unwrap());
    assert_eq!(id_token["aud"], client_id.as_str());
    assert_eq!(id_token["azp"], client_id.as_str());
    assert_eq!(id_token["iss"], app.public_url.as_str());
    assert_eq!(id_token["sub"], owner.user_id.as_str());
    assert_eq!(id_token["nonce"], NONCE);
    assert_eq!(id_token["amr"], json!(["pwd"]));
    assert!(
        id_token["at_hash"].as_str().unwrap().len() == 22,
        "16 bytes, base64url"
    );
    assert!(
        id_token.get("email").is_none() && id_token.get("name").is_none(),
        "{id_token}"
    );
    let access = tokens["access_token"].as_str().unwrap();
    let info = json_of(app.get_as(access, "/oauth/userinfo").await, 200).await;
    assert_eq!(info, json!({ "sub": owner.user_id }));
    // POST works too (OpenID Connect Core §5.3.1).
    let posted = app
        .client
        .post(app.url("/oauth/userinfo"))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(posted, 200).await, info);

    // The ID token is no Bearer token: its audience is the client.
    assert_eq!(
        app.get_as(tokens["id_token"].as_str().unwrap(), "/api/v1/users/me")
            .await
            .status(),
        401
    );
    // A refresh gives a new access token, no new ID token.
    let refreshed = json_of(
        token_form(
            &app,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", tokens["refresh_token"].as_str().unwrap()),
            ],
            Some((&client_id, &secret)),
        )
        .await,
        200,
    )
    .await;
    assert!(refreshed.get("id_token").is_none(), "{refreshed}");

    // Without openid: no ID token, and userinfo refuses the token (insufficient_scope),
    // as it refuses a sign-in's own token; a made-up token is invalid_token.
    let plain = signed_in(&app, &client_id, &secret, "read:user").await;
    assert!(plain.get("id_token").is_none(), "{plain}");
    for token in [
        plain["access_token"].as_str().unwrap(),
        owner.access_token.as_str(),
    ] {
        let response = app.get_as(token, "/oauth/userinfo").await;
        assert_eq!(
            response.headers()[header::WWW_AUTHENTICATE],
            "Bearer realm=\"gatehouse\", error=\"insufficient_scope\""
        );
        assert_eq!(oauth_error(response, 403).await.0, "insufficient_scope");
    }
    let response = app.get_as("made.up.token", "/oauth/userinfo").await;
    assert_eq!(
        response.headers()[header::WWW_AUTHENTICATE],
        "Bearer realm=\"gatehouse\", error=\"invalid_token\""
    );
    assert_eq!(oauth_error(response, 401).await.0, "invalid_token");
}

#[on_both_backends]
async fn revoking_a_refresh_token_ends_its_grant_and_introspection_says_so(app: TestApp) {
    let (owner, org, client_id, secret) = enterprise_client(&app).await;
    let (other_id, other_secret) = application(&app, &owner, &org, "Another").await;
    let client = (client_id.as_str(), secret.as_str());
    let tokens = signed_in(&app, &client_id, &secret, "openid email").await;
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();

    // Introspection needs the client's authentication.
    let anonymous = form_at(&app, "/oauth/introspect", &[("token", access)], None).await;
    assert_eq!(
        anonymous.headers()[header::WWW_AUTHENTICATE],
        "Basic realm=\"gatehouse\""
    );
    assert_eq!(oauth_error(anonymous, 401).await.0, "invalid_client");
    let wrong = form_at(
        &app,
        "/oauth/introspect",
        &[("token", access)],
        Some((&client_id, "ghcs_wrong")),
    )
    .await;
    assert_eq!(oauth_error(wrong, 401).await.0, "invalid_client");
    let missing = form_at(&app, "/oauth/introspect", &[], Some(client)).await;
    assert_eq!(
        oauth_error(missing, 400).await,
        ("invalid_request".into(), "token is required".into())
    );

    // The client's own tokens are active; to another client, and for anything else, the
    // answer is only that they are not.
    let seen = introspect(&app, access, client).await;
    assert_eq!(seen["active"], true);
    assert_eq!(seen["token_type"], "Bearer");
    assert_eq!(seen["client_id"], client_id.as_str());
    assert_eq!(seen["scope"], "openid email");
    assert_eq!(seen["sub"], owner.user_id.as_str());
    assert_eq!(seen["username"], "owen@example.com");
    assert_eq!(seen["iss"], app.public_url.as_str());
    assert!(seen["exp"].as_i64().unwrap() > seen["iat"].as_i64().unwrap());
    let seen = introspect(&app, refresh, client).await;
    assert_eq!(
        (seen["active"].clone(), seen["token_type"].clone()),
        (json!(true), json!("refresh_token"))
    );
    for token in [
        access,
        refresh,
        owner.access_token.as_str(),
        owner.refresh_token.as_str(),
    ] {
        assert_eq!(
            introspect(&app, token, (&other_id, &other_secret)).await,
            json!({ "active": false })
        );
    }
    for token in [
        owner.access_token.as_str(),
        owner.refresh_token.as_str(),
        "ghr_made-up",
        "a.b.c",
        tokens["id_token"].as_str().unwrap(),
    ] {
        assert_eq!(
            introspect(&app, token, client).await,
            json!({ "active": false }),
            "{token}"
        );
    }

    // Another client's revocation of it changes nothing (and says nothing).
    assert_eq!(
        revoke(&app, refresh, (&other_id, &other_secret))
            .await
            .status(),
        200
    );
    assert_eq!(introspect(&app, refresh, client).await["active"], true);

    // The client revokes its refresh token: the grant's session ends.
    let response = revoke(&app, refresh, client).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    let refused = token_form(
        &app,
        &[("grant_type", "refresh_token"), ("refresh_token", refresh)],
        Some(client),
    )
    .await;
    assert_eq!(oauth_error(refused, 400).await.0, "invalid_grant");
    assert_eq!(
        introspect(&app, refresh, client).await,
        json!({ "active": false })
    );
    assert_eq!(
        introspect(&app, access, client).await,
        json!({ "active": false }),
        "the access tokens of its grant"
    );
    assert_eq!(app.get_as(access, "/api/v1/users/me").await.status(), 401);
    assert_eq!(app.get_as(access, "/oauth/userinfo").await.status(), 401);
    // Revoked twice: the same answer.
    assert_eq!(revoke(&app, refresh, client).await.status(), 200);
    // The owner's own sign-in is untouched.
    assert_eq!(
        app.get_as(&owner.access_token, "/api/v1/users/me")
            .await
            .status(),
        200
    );

    // Revoking an access token ends its session too.
    let second = signed_in(&app, &client_id, &secret, "openid").await;
    assert_eq!(
        revoke(&app, second["access_token"].as_str().unwrap(), client)
            .await
            .status(),
        200
    );
    assert_eq!(
        app.get_as(second["access_token"].as_str().unwrap(), "/api/v1/users/me")
            .await
            .status(),
        401
    );
    assert_eq!(
        introspect(&app, second["refresh_token"].as_str().unwrap(), client).await["active"],
        false
    );

    // On record, in the organization: the two revocations, by the application.
    let revoked = app.audit_records("?action=oauth.token_revoked").await;
    assert_eq!(revoked.len(), 2, "{revoked:?}");
    for record in &revoked {
        assert_eq!(record["actor"]["type"], "application");
        assert_eq!(
            record["target"],
            json!({ "type": "user", "id": owner.user_id })
        );
        assert_eq!(record["organization_id"], org.as_str());
    }
    assert!(
        !serde_json::to_string(&revoked).unwrap().contains(refresh),
        "no token on record"
    );
}

#[on_both_backends]
async fn a_backend_service_gets_a_machine_token_and_reads_its_organization(app: TestApp) {
    let (owner, org, client_id, secret) = enterprise_client(&app).await;
    let client = (client_id.as_str(), secret.as_str());
    let response = machine_token(&app, client, "org:read members:read").await;
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    let issued = json_of(response, 200).await;
    assert_eq!(issued["token_type"], "Bearer");
    assert_eq!(issued["scope"], "org:read members:read");
    assert!(
        issued.get("refresh_token").is_none() && issued.get("id_token").is_none(),
        "{issued}"
    );
    let expires_in = issued["expires_in"].as_i64().unwrap();
    assert!(expires_in > 0 && expires_in <= 900, "{expires_in}");
    let token = issued["access_token"].as_str().unwrap();
    let claims = payload(token);
    assert_eq!(claims["sub"], client_id.as_str());
    assert_eq!(claims["client_id"], client_id.as_str());
    assert_eq!(claims["org_id"], org.as_str());
    assert!(
        claims.get("sid").is_none() && claims.get("email").is_none(),
        "{claims}"
    );

    // It reads its organization and its members: what its scopes grant.
    let organization = json_of(
        app.get_as(token, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(organization["name"], "Acme");
    let members = json_of(
        app.get_as(token, &format!("/api/v1/organizations/{org}/members"))
            .await,
        200,
    )
    .await;
    assert_eq!(members["items"][0]["email"], "owen@example.com");
    json_of(
        app.in_org(Method::GET, token, &org, "/api/v1/health", None)
            .await,
        200,
    )
    .await;

    // Outside its scopes: 403, naming the permission.
    let detail = detail_of(
        app.send_as(
            Method::PATCH,
            token,
            &format!("/api/v1/organizations/{org}"),
            Some(json!({ "name": "Renamed" })),
        )
        .await,
        403,
    )
    .await;
    assert!(detail.contains("organization.update"), "{detail}");
    let detail = detail_of(
        app.in_org(Method::GET, token, &org, "/api/v1/webhooks/endpoints", None)
            .await,
        403,
    )
    .await;
    assert!(detail.contains("webhooks.read"), "{detail}");
    detail_of(
        app.send_as(
            Method::DELETE,
            token,
            &format!("/api/v1/organizations/{org}"),
            None,
        )
        .await,
        403,
    )
    .await;
    // Outside its organization: another one is not found, a route of a person's refused.
    let elsewhere = app.create_team(&owner.access_token, "Globex").await;
    detail_of(
        app.get_as(
            token,
            &format!(
                "/api/v1/organizations/{}",
                elsewhere["id"].as_str().unwrap()
            ),
        )
        .await,
        404,
    )
    .await;
    let detail = detail_of(app.get_as(token, "/api/v1/users/me").await, 403).await;
    assert!(detail.contains("machine token"), "{detail}");
    detail_of(
        app.send_as(
            Method::POST,
            token,
            "/api/v1/api-keys",
            Some(json!({ "name": "k", "organization_id": org })),
        )
        .await,
        403,
    )
    .await;

    // With members:write it changes members, but invites nobody: an invitation names a person.
    let member = app
        .member_of(&owner.access_token, &org, "mia@example.com", "member")
        .await;
    let writer = json_of(
        machine_token(&app, client, "members:read members:write").await,
        200,
    )
    .await;
    let writer = writer["access_token"].as_str().unwrap();
    json_of(
        app.send_as(
            Method::PATCH,
            writer,
            &format!("/api/v1/organizations/{org}/members/{}", member.user_id),
            Some(json!({ "role": "viewer" })),
        )
        .await,
        200,
    )
    .await;
    let detail = detail_of(
        app.send_as(
            Method::POST,
            writer,
            &format!("/api/v1/organizations/{org}/members"),
            Some(json!({ "email": "new@example.com", "role": "member" })),
        )
        .await,
        403,
    )
    .await;
    assert!(detail.contains("machine token"), "{detail}");

    // Introspection tells the application what its token is; revocation cannot end it.
    let seen = introspect(&app, token, client).await;
    assert_eq!(
        (
            seen["active"].clone(),
            seen["sub"].clone(),
            seen["org_id"].clone()
        ),
        (json!(true), json!(client_id), json!(org))
    );
    assert!(seen.get("username").is_none(), "{seen}");
    assert_eq!(
        oauth_error(revoke(&app, token, client).await, 400).await.0,
        "unsupported_token_type"
    );

    // On record: the two tokens issued, and the role change by the application.
    let issued = app
        .audit_records("?action=oauth.client_credentials_issued")
        .await;
    assert_eq!(issued.len(), 2);
    assert_eq!(issued[0]["actor"]["type"], "application");
    assert_eq!(issued[0]["organization_id"], org.as_str());
    let changed = app.audit_records("?action=member.role_changed").await;
    assert_eq!(changed[0]["actor"], issued[0]["actor"]);

    // Deactivating the application stops its machine tokens at once.
    let apps = json_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
        )
        .await,
        200,
    )
    .await;
    let id = apps["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["client_id"] == client_id.as_str())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications/{id}"),
            Some(json!({ "is_active": false })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        app.get_as(token, &format!("/api/v1/organizations/{org}"))
            .await
            .status(),
        401
    );
}

#[on_both_backends]
async fn client_credentials_are_refused_below_enterprise_and_outside_the_api_scopes(app: TestApp) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let (client_id, secret) = application(&app, &owner, &org, "Billing").await;
    let client = (client_id.as_str(), secret.as_str());

    let (error, description) =
        oauth_error(machine_token(&app, client, "org:read").await, 400).await;
    assert_eq!(error, "unauthorized_client");
    assert!(description.contains("enterprise"), "{description}");

    app.set_plan(&org, "enterprise").await;
    for scope in ["", "openid", "org:read email", "org:delete"] {
        let (error, _) = oauth_error(machine_token(&app, client, scope).await, 400).await;
        assert_eq!(error, "invalid_scope", "{scope:?}");
    }
    let unauthenticated = token_form(
        &app,
        &[("grant_type", "client_credentials"), ("scope", "org:read")],
        None,
    )
    .await;
    assert_eq!(oauth_error(unauthenticated, 401).await.0, "invalid_client");
    json_of(machine_token(&app, client, "org:read").await, 200).await;

    // Each refusal of the application is on record.
    let refused = app.audit_records("?action=oauth.token_refused").await;
    assert_eq!(refused.len(), 5, "{refused:?}");
}

#[on_both_backends]
async fn api_scopes_narrow_what_an_oauth_token_may_do(app: TestApp) {
    let (_, org, client_id, secret) = enterprise_client(&app).await;
    let path = format!("/api/v1/organizations/{org}");
    let rename = || Some(json!({ "name": "Acme Corp" }));

    // org:read: the owner's token reads the organization, changes nothing.
    let narrowed = signed_in(&app, &client_id, &secret, "openid org:read").await;
    let token = narrowed["access_token"].as_str().unwrap();
    json_of(app.get_as(token, &path).await, 200).await;
    let detail = detail_of(
        app.send_as(Method::PATCH, token, &path, rename()).await,
        403,
    )
    .await;
    assert!(detail.contains("organization.update"), "{detail}");
    detail_of(app.get_as(token, &format!("{path}/members")).await, 403).await;
    // Outside the application's organization it does nothing: the user's account is not
    // the application's (no profile, no new organization, no API key).
    let detail = detail_of(app.get_as(token, "/api/v1/users/me").await, 403).await;
    assert!(detail.contains("/oauth/userinfo"), "{detail}");
    detail_of(
        app.send_as(
            Method::POST,
            token,
            "/api/v1/organizations",
            Some(json!({ "name": "Mine" })),
        )
        .await,
        403,
    )
    .await;

    // org:write: the owner's role, narrowed to it: renames, but lists no members.
    let writer = signed_in(&app, &client_id, &secret, "org:write").await;
    let writer = writer["access_token"].as_str().unwrap();
    json_of(
        app.send_as(Method::PATCH, writer, &path, rename()).await,
        200,
    )
    .await;

    // No API scope: nothing of the API but userinfo (free-form scopes are echoed, not read).
    let none = signed_in(&app, &client_id, &secret, "openid read:user").await;
    assert_eq!(none["scope"], "openid read:user");
    let none = none["access_token"].as_str().unwrap();
    let detail = detail_of(
        app.send_as(
            Method::PATCH,
            none,
            &path,
            Some(json!({ "name": "Acme Inc" })),
        )
        .await,
        403,
    )
    .await;
    assert!(detail.contains("no API scope"), "{detail}");
    detail_of(app.get_as(none, &format!("{path}/members")).await, 403).await;
    json_of(app.get_as(none, "/oauth/userinfo").await, 200).await;
}
