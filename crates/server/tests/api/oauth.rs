//! `POST /oauth/token` over HTTP: every way a request can be refused, in RFC 6749's shape. The
//! exchange of a code issued by the authorization endpoint is tested in the domain and the
//! store; over HTTP it comes with the hosted login page.

use reqwest::{header, Method, Response};
use serde_json::{json, Value};

use crate::helpers::{
    artifacts, hidden, in_browser, json_of, oauth_client, on_both_backends, Browser, TestApp,
    PASSWORD,
};

/// An application of a fresh team: (client id, client secret, the owner's refresh token).
async fn client(app: &TestApp) -> (String, String, String) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap();
    let created = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
            Some(json!({ "name": "Billing", "redirect_uris": ["https://billing.example.com/cb"] })),
        )
        .await,
        201,
    )
    .await;
    (
        created["client_id"].as_str().unwrap().to_owned(),
        created["client_secret"].as_str().unwrap().to_owned(),
        owner.refresh_token,
    )
}

pub(crate) async fn token_form(
    app: &TestApp,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> Response {
    form_at(app, "/oauth/token", form, basic).await
}

/// The client exchanges a code it was redirected with (with the tests' PKCE verifier): the
/// token response.
pub(crate) async fn exchanged(
    app: &TestApp,
    code: &str,
    (client_id, secret): (&str, &str),
) -> Value {
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", CALLBACK),
        ("code_verifier", VERIFIER),
    ];
    json_of(
        token_form(app, &exchange, Some((client_id, secret))).await,
        200,
    )
    .await
}

/// The browser's answer to an authorization, past the consent page when it is one: the user
/// allows what the application asks for.
pub(crate) async fn past_consent(
    app: &TestApp,
    browser: &mut Browser,
    response: Response,
) -> Response {
    if response.status() != 200 {
        return response;
    }
    let page = response.text().await.unwrap();
    assert!(
        page.contains("action=\"/oauth/consent\""),
        "a consent page: {page}"
    );
    browser
        .post_form(
            &app.url("/oauth/consent"),
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", &hidden(&page, "return_to")),
                ("decision", "allow"),
            ],
        )
        .await
}

/// A form posted to an OAuth endpoint, the client authenticated by HTTP Basic when given.
pub(crate) async fn form_at(
    app: &TestApp,
    path: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
) -> Response {
    let mut request = app.client.post(app.url(path)).form(form);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    request.send().await.unwrap()
}

/// The RFC 6749 error of a response with `status`, checked for its shape and headers.
pub(crate) async fn oauth_error(response: Response, status: u16) -> (String, String) {
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    let body: Value = response.json().await.unwrap();
    assert!(
        body.get("detail").is_none(),
        "RFC 6749 shape, not {{detail}}: {body}"
    );
    (
        body["error"].as_str().unwrap().to_owned(),
        body["error_description"].as_str().unwrap().to_owned(),
    )
}

#[on_both_backends]
async fn the_client_must_authenticate_one_way_with_its_current_secret(app: TestApp) {
    let (id, secret, _) = client(&app).await;
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", "ghac_x"),
        ("redirect_uri", "https://billing.example.com/cb"),
        ("code_verifier", &"v".repeat(43)),
    ];

    let none = token_form(&app, &exchange, None).await;
    assert_eq!(
        none.headers()[header::WWW_AUTHENTICATE],
        "Basic realm=\"gatehouse\""
    );
    assert_eq!(oauth_error(none, 401).await.0, "invalid_client");
    let wrong = token_form(&app, &exchange, Some((&id, "ghcs_wrong"))).await;
    assert_eq!(oauth_error(wrong, 401).await.0, "invalid_client");
    let mut posted = exchange.to_vec();
    posted.extend([("client_id", id.as_str()), ("client_secret", "ghcs_wrong")]);
    assert_eq!(
        oauth_error(token_form(&app, &posted, None).await, 401)
            .await
            .0,
        "invalid_client"
    );
    let unknown = token_form(
        &app,
        &exchange,
        Some(("ghc_00000000000000000000000000000000", &secret)),
    )
    .await;
    assert_eq!(oauth_error(unknown, 401).await.0, "invalid_client");

    let mut both = exchange.to_vec();
    both.push(("client_secret", secret.as_str()));
    let (error, description) =
        oauth_error(token_form(&app, &both, Some((&id, &secret))).await, 400).await;
    assert_eq!(error, "invalid_request");
    assert!(description.contains("not both"), "{description}");

    // Authenticated, either way: the (made-up) code is what fails now.
    let basic = token_form(&app, &exchange, Some((&id, &secret))).await;
    assert_eq!(oauth_error(basic, 400).await.0, "invalid_grant");
    let mut post = exchange.to_vec();
    post.extend([
        ("client_id", id.as_str()),
        ("client_secret", secret.as_str()),
    ]);
    assert_eq!(
        oauth_error(token_form(&app, &post, None).await, 400)
            .await
            .0,
        "invalid_grant"
    );

    // On record, in the application's organization: the two wrong secrets and the two
    // made-up codes. No client id, an unknown one, or a request that is malformed names no
    // application: nothing to record.
    let refused = app.audit_records("?action=oauth.token_refused").await;
    assert_eq!(refused.len(), 4, "{refused:?}");
    let application = refused[0]["target"]["id"].as_str().unwrap().to_owned();
    for record in &refused {
        assert_eq!(
            record["actor"],
            json!({ "type": "application", "id": application })
        );
        assert_eq!(record["outcome"], "failure");
        assert!(record["organization_id"].is_string());
    }
    assert!(
        !serde_json::to_string(&refused).unwrap().contains(&secret),
        "no secret on record"
    );
}

#[on_both_backends]
async fn malformed_requests_are_invalid_requests(app: TestApp) {
    let (id, secret, _) = client(&app).await;
    let auth = Some((id.as_str(), secret.as_str()));

    let json_body = app
        .client
        .post(app.url("/oauth/token"))
        .basic_auth(&id, Some(&secret))
        .json(&json!({ "grant_type": "authorization_code" }))
        .send()
        .await
        .unwrap();
    let (error, description) = oauth_error(json_body, 400).await;
    assert_eq!(error, "invalid_request");
    assert!(
        description.contains("x-www-form-urlencoded"),
        "{description}"
    );

    let missing_grant = token_form(&app, &[("code", "x")], auth).await;
    assert_eq!(
        oauth_error(missing_grant, 400).await,
        ("invalid_request".into(), "grant_type is required".into())
    );
    let missing_code = token_form(&app, &[("grant_type", "authorization_code")], auth).await;
    assert_eq!(oauth_error(missing_code, 400).await.1, "code is required");
    let twice = token_form(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", "a"),
            ("refresh_token", "b"),
        ],
        auth,
    )
    .await;
    assert_eq!(oauth_error(twice, 400).await.0, "invalid_request");
    let password = token_form(
        &app,
        &[
            ("grant_type", "password"),
            ("username", "u"),
            ("password", "p"),
        ],
        auth,
    )
    .await;
    assert_eq!(oauth_error(password, 400).await.0, "unsupported_grant_type");
    let short_verifier = token_form(
        &app,
        &[
            ("grant_type", "authorization_code"),
            ("code", "ghac_x"),
            ("code_verifier", "short"),
        ],
        auth,
    )
    .await;
    assert_eq!(
        oauth_error(short_verifier, 400).await.0,
        "invalid_grant",
        "an unknown code fails first"
    );
}

#[on_both_backends]
async fn a_refresh_token_from_a_password_login_is_not_an_oauth_grant(app: TestApp) {
    let (id, secret, owner_refresh) = client(&app).await;
    let response = token_form(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", &owner_refresh),
        ],
        Some((&id, &secret)),
    )
    .await;
    assert_eq!(oauth_error(response, 400).await.0, "invalid_grant");
    // ... and it still works where it belongs.
    let refreshed = app.refresh(&owner_refresh).await;
    assert_eq!(refreshed.status(), 200);
}

// ---------------------------------------------------------------------------------------------
// The whole flow, as a browser and a client would go through it
// ---------------------------------------------------------------------------------------------

pub(crate) fn location(response: &Response) -> String {
    response.headers()[header::LOCATION]
        .to_str()
        .unwrap()
        .to_owned()
}

pub(crate) fn query_param(url: &str, name: &str) -> Option<String> {
    let url = url::Url::parse(url).unwrap();
    url.query_pairs()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.into_owned())
}

/// Asserts the client heard `error` at its callback, with its `state` and without a code.
pub(crate) fn assert_client_hears(response: &Response, error: &str, state: &str) {
    assert_eq!(response.status(), 302);
    let redirect = location(response);
    assert!(redirect.starts_with(CALLBACK), "{redirect}");
    assert_eq!(query_param(&redirect, "error").as_deref(), Some(error));
    assert_eq!(query_param(&redirect, "state").as_deref(), Some(state));
    assert_eq!(query_param(&redirect, "code"), None);
}

pub(crate) const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub(crate) const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
pub(crate) const CALLBACK: &str = "https://billing.example.com/cb";

#[on_both_backends]
async fn a_member_signs_in_on_the_branded_page_and_the_client_gets_tokens_that_verify(
    app: TestApp,
) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "enterprise").await;
    let branding = json!({ "primary_color": "#0F766E", "custom_login": { "title": "Acme sign-in", "subtitle": "Use your Acme account" } });
    json_of(
        app.send_as(
            Method::PUT,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/branding"),
            Some(branding),
        )
        .await,
        200,
    )
    .await;
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
    let client_id = created["client_id"].as_str().unwrap().to_owned();
    let client_secret = created["client_secret"].as_str().unwrap().to_owned();

    // 1. The client sends the browser to the authorization endpoint; nobody is signed in.
    let mut browser = Browser::new();
    let authorize = format!(
            "{}?response_type=code&client_id={client_id}&redirect_uri={}&scope=read%3Auser&state=s%2B1&code_challenge={CHALLENGE}&code_challenge_method=S256",
            app.url("/oauth/authorize"),
            url::form_urlencoded::byte_serialize(CALLBACK.as_bytes()).collect::<String>(),
        );
    let response = browser.get(&authorize).await;
    assert_eq!(response.status(), 302);
    let login = location(&response);
    assert!(login.starts_with("/login?return_to="), "{login}");

    // 2. The login page, in Acme's branding.
    let response = browser.get(&app.url(&login)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/html; charset=utf-8"
    );
    assert_eq!(response.headers()["x-frame-options"], "DENY");
    let page = response.text().await.unwrap();
    assert!(page.contains("<h1>Acme sign-in</h1>") && page.contains("Use your Acme account"));
    assert!(page.contains("--primary: #0F766E"));
    let csrf = hidden(&page, "csrf_token");
    let return_to = hidden(&page, "return_to");
    assert!(return_to.starts_with("/oauth/authorize?"));

    // A wrong password: the same page again, the email kept, the password not.
    let response = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "owen@example.com"),
                ("password", "wrong password"),
                ("csrf_token", &csrf),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(response.status(), 401);
    let page = response.text().await.unwrap();
    assert!(page.contains("The email or password is wrong."));
    assert!(page.contains("value=\"owen@example.com\""));
    assert!(!page.contains("wrong password"));
    let unknown = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "nobody@example.com"),
                ("password", "wrong password"),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(unknown.status(), 401);
    assert!(
        unknown
            .text()
            .await
            .unwrap()
            .contains("The email or password is wrong."),
        "no hint that the email is unknown"
    );

    // A forged form (no matching anti-forgery token) is refused.
    let forged = Browser::new()
        .post_form(
            &app.url("/login"),
            &[
                ("email", "owen@example.com"),
                ("password", PASSWORD),
                ("csrf_token", "csrf_made-up"),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(forged.status(), 403);

    // 3. The right password: a session cookie, and back to the authorization.
    let page = browser.get(&app.url(&login)).await.text().await.unwrap();
    let response = browser
        .post_form(
            &app.url("/login"),
            &[
                ("email", "owen@example.com"),
                ("password", PASSWORD),
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("return_to", &return_to),
            ],
        )
        .await;
    assert_eq!(response.status(), 303);
    let set_cookie: Vec<_> = response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let session_cookie = set_cookie
        .iter()
        .find(|c| c.starts_with("gatehouse_session="))
        .unwrap();
    assert!(
        session_cookie.contains("HttpOnly") && session_cookie.contains("SameSite=Lax"),
        "{session_cookie}"
    );
    assert!(!session_cookie.contains("Secure"), "the public URL is http");
    assert_eq!(location(&response), return_to);

    // 4. Signed in: back to the client with a code and the state.
    let response = browser.get(&app.url(&return_to)).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    assert!(redirect.starts_with(CALLBACK), "{redirect}");
    assert_eq!(query_param(&redirect, "state").as_deref(), Some("s+1"));
    let code = query_param(&redirect, "code").unwrap();

    // Signed in, but the client asks for a new sign-in (OpenID Connect's prompt=login, or a
    // max_age the sign-in is older than): the page again, and back without either, since
    // the sign-in about to happen is what they ask for.
    for demand in [
        "&prompt=login",
        "&max_age=0",
        "&prompt=consent%20login&max_age=3600",
    ] {
        let response = browser.get(&format!("{authorize}{demand}")).await;
        assert_eq!(response.status(), 302, "{demand}");
        let again = location(&response);
        let return_to = query_param(&format!("http://x{again}"), "return_to").unwrap();
        assert!(
            again.starts_with("/login?") && return_to.starts_with("/oauth/authorize?"),
            "{again}"
        );
        assert!(
            !return_to.contains("prompt") && !return_to.contains("max_age"),
            "{return_to}"
        );
        assert_eq!(
            query_param(&format!("http://x{return_to}"), "state").as_deref(),
            Some("s+1")
        );
    }

    // A nonce no store could keep (a NUL: PostgreSQL refuses it in any text) is the
    // client's invalid_request, with its state, not the server's failure.
    let response = browser.get(&format!("{authorize}&nonce=n%00")).await;
    assert_client_hears(&response, "invalid_request", "s+1");

    // 5. The client exchanges the code with its verifier.
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", CALLBACK),
        ("code_verifier", VERIFIER),
    ];
    let wrong_verifier = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", CALLBACK),
        ("code_verifier", &"x".repeat(43)),
    ];
    let response = token_form(&app, &wrong_verifier, Some((&client_id, &client_secret))).await;
    assert_eq!(
        oauth_error(response, 400).await.0,
        "invalid_grant",
        "PKCE mismatch"
    );
    let response = token_form(&app, &exchange, Some((&client_id, &client_secret))).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
    let tokens: Value = response.json().await.unwrap();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["scope"], "read:user");
    assert!(tokens["expires_in"].as_i64().unwrap() > 0);
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();

    // The access token carries the client and the scope; it reads nothing of the user's
    // account (the scope names no API scope, and outside organizations an application's
    // token reads /oauth/userinfo only).
    assert_eq!(app.get_as(access, "/api/v1/users/me").await.status(), 403);
    use base64::Engine as _;
    let claims: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["client_id"], client_id.as_str());
    assert_eq!(claims["scope"], "read:user");
    assert_eq!(
        claims["amr"],
        serde_json::json!(["pwd"]),
        "as the page's sign-in was"
    );

    // 6. Refresh through the token endpoint; not through /auth/refresh.
    let response = token_form(
        &app,
        &[("grant_type", "refresh_token"), ("refresh_token", refresh)],
        Some((&client_id, &client_secret)),
    )
    .await;
    let refreshed: Value = response.json().await.unwrap();
    assert!(refreshed["access_token"].as_str().is_some(), "{refreshed}");
    assert_eq!(refreshed["scope"], "read:user");
    assert_eq!(app.refresh(refresh).await.status(), 401);

    // 7. The code presented again fails, and what it issued stops working.
    let response = token_form(&app, &exchange, Some((&client_id, &client_secret))).await;
    assert_eq!(oauth_error(response, 400).await.0, "invalid_grant");
    assert_eq!(app.get_as(access, "/api/v1/users/me").await.status(), 401);
    let response = token_form(
        &app,
        &[("grant_type", "refresh_token"), ("refresh_token", refresh)],
        Some((&client_id, &client_secret)),
    )
    .await;
    assert_eq!(oauth_error(response, 400).await.0, "invalid_grant");

    // 8. Signing out ends the page's session: the next authorization asks to sign in again.
    let page = browser.get(&app.url(&login)).await.text().await.unwrap();
    let response = browser
        .post_form(
            &app.url("/logout"),
            &[("csrf_token", &hidden(&page, "csrf_token"))],
        )
        .await;
    assert_eq!(response.status(), 303);
    let response = browser.get(&authorize).await;
    assert!(location(&response).starts_with("/login?"));
    // With prompt=none the client hears at once that a sign-in is needed, with its state.
    let response = browser.get(&format!("{authorize}&prompt=none")).await;
    assert_client_hears(&response, "login_required", "s+1");

    // 9. The organization's admin reads it all: the code issued to Owen, the exchange, and
    // the three refusals (the wrong verifier, the code again, the refresh of what it issued).
    let application = created["id"].as_str().unwrap();
    let log = |action: &'static str| {
        let path = format!("/api/v1/organizations/{org}/audit-log?action={action}");
        let token = owner.access_token.clone();
        let app = &app;
        async move {
            json_of(app.get_as(&token, &path).await, 200).await["items"]
                .as_array()
                .unwrap()
                .clone()
        }
    };
    let authorized = log("oauth.authorized").await;
    assert_eq!(authorized.len(), 1);
    assert_eq!(
        authorized[0]["actor"],
        json!({ "type": "user", "id": owner.user_id })
    );
    assert_eq!(
        authorized[0]["target"],
        json!({ "type": "application", "id": application })
    );
    let issued = log("oauth.token_issued").await;
    assert_eq!(issued.len(), 1);
    assert_eq!(
        issued[0]["actor"],
        json!({ "type": "application", "id": application })
    );
    assert_eq!(
        issued[0]["target"],
        json!({ "type": "user", "id": owner.user_id })
    );
    assert_eq!(log("oauth.token_refused").await.len(), 3);
}

#[on_both_backends]
async fn the_authorization_endpoint_never_redirects_to_an_untrusted_uri(app: TestApp) {
    let (client_id, _, _) = client(&app).await;
    let mut browser = Browser::new();
    for query in [
            format!("client_id={client_id}&redirect_uri=https%3A%2F%2Fbilling.example.com%2Fcb%2F&response_type=code"),
            "client_id=ghc_00000000000000000000000000000000&response_type=code".to_owned(),
            "response_type=code".to_owned(),
        ] {
            let response = browser.get(&app.url(&format!("/oauth/authorize?{query}"))).await;
            assert_eq!(response.status(), 400, "{query}");
            assert!(response.headers().get(header::LOCATION).is_none());
            assert!(response.text().await.unwrap().contains("not valid"));
        }
    // Below the enterprise plan, the client hears access_denied, with its state.
    let response = browser.get(&app.url(&format!(
            "/oauth/authorize?client_id={client_id}&response_type=code&state=abc&code_challenge={CHALLENGE}&code_challenge_method=S256"
        ))).await;
    assert_eq!(response.status(), 302);
    let redirect = location(&response);
    assert_eq!(
        query_param(&redirect, "error").as_deref(),
        Some("access_denied")
    );
    assert_eq!(query_param(&redirect, "state").as_deref(), Some("abc"));
}

// ---------------------------------------------------------------------------------------------
// With an OAuth client library written by others
// ---------------------------------------------------------------------------------------------

#[on_both_backends]
async fn authlib_completes_the_flow_and_verifies_the_token_against_the_jwks(app: TestApp) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "enterprise").await;
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
    let seen = oauth_client(
        "authlib_flow.py",
        &[
            &app.url(""),
            created["client_id"].as_str().unwrap(),
            created["client_secret"].as_str().unwrap(),
            CALLBACK,
            "owen@example.com",
            PASSWORD,
        ],
    )
    .await;
    assert_eq!(seen["client_id"], created["client_id"]);
    assert_eq!(seen["scope"], "read:user read:resources");
    assert_eq!(seen["sub"], owner.user_id.as_str());
    assert_eq!(seen["refreshed"], true);
}

// ---------------------------------------------------------------------------------------------
// In a real browser
// ---------------------------------------------------------------------------------------------

#[on_both_backends]
async fn in_headless_chromium_the_branded_page_signs_in_and_lands_on_the_callback(app: TestApp) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "enterprise").await;
    let branding = json!({ "primary_color": "#0F766E", "accent_color": "#F59E0B",
            "custom_login": { "title": "Acme sign-in", "subtitle": "Use your Acme account" } });
    json_of(
        app.send_as(
            Method::PUT,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/branding"),
            Some(branding),
        )
        .await,
        200,
    )
    .await;
    let callback = "http://127.0.0.1:8765/callback";
    let created = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/applications"),
            Some(json!({ "name": "Billing", "redirect_uris": [callback] })),
        )
        .await,
        201,
    )
    .await;
    let authorize = format!(
            "{}?response_type=code&client_id={}&redirect_uri={}&state=browser&code_challenge={CHALLENGE}&code_challenge_method=S256",
            app.url("/oauth/authorize"),
            created["client_id"].as_str().unwrap(),
            url::form_urlencoded::byte_serialize(callback.as_bytes()).collect::<String>(),
        );
    let screenshot = artifacts().join(format!("login-page-{org}.png"));
    let seen = in_browser(
        "login_flow.mjs",
        [
            authorize.as_str(),
            callback,
            "owen@example.com",
            PASSWORD,
            "Acme sign-in",
        ],
        &screenshot,
    )
    .await;
    assert_eq!(seen["heading"], "Acme sign-in");
    assert_eq!(seen["emailLabel"], "Email");
    assert_eq!(seen["passwordLabel"], "Password");
    assert_eq!(
        seen["buttonColor"], "rgb(15, 118, 110)",
        "the brand's primary color"
    );
    assert_eq!(seen["focused"], "password");
    let landed = seen["callback"].as_str().unwrap();
    assert!(landed.starts_with(callback), "{landed}");
    assert_eq!(query_param(landed, "state").as_deref(), Some("browser"));
    assert!(query_param(landed, "code").unwrap().starts_with("ghac_"));
}
