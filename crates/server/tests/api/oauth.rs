//! `POST /oauth/token` over HTTP: every way a request can be refused, in RFC 6749's shape. The
//! exchange of a code issued by the authorization endpoint is tested in the domain and the
//! store; over HTTP it comes with the hosted login page.

use reqwest::{header, Method, Response};
use serde_json::{json, Value};

use crate::helpers::{json_of, on_both_backends, TestApp};

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

async fn token_form(app: &TestApp, form: &[(&str, &str)], basic: Option<(&str, &str)>) -> Response {
    let mut request = app.client.post(app.url("/oauth/token")).form(form);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    request.send().await.unwrap()
}

/// The RFC 6749 error of a response with `status`, checked for its shape and headers.
async fn oauth_error(response: Response, status: u16) -> (String, String) {
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

on_both_backends! {
    async fn the_client_must_authenticate_one_way_with_its_current_secret(app: TestApp) {
        let (id, secret, _) = client(&app).await;
        let exchange = [("grant_type", "authorization_code"), ("code", "ghac_x"), ("redirect_uri", "https://billing.example.com/cb"), ("code_verifier", &"v".repeat(43))];

        let none = token_form(&app, &exchange, None).await;
        assert_eq!(none.headers()[header::WWW_AUTHENTICATE], "Basic realm=\"gatehouse\"");
        assert_eq!(oauth_error(none, 401).await.0, "invalid_client");
        let wrong = token_form(&app, &exchange, Some((&id, "ghcs_wrong"))).await;
        assert_eq!(oauth_error(wrong, 401).await.0, "invalid_client");
        let mut posted = exchange.to_vec();
        posted.extend([("client_id", id.as_str()), ("client_secret", "ghcs_wrong")]);
        assert_eq!(oauth_error(token_form(&app, &posted, None).await, 401).await.0, "invalid_client");
        let unknown = token_form(&app, &exchange, Some(("ghc_00000000000000000000000000000000", &secret))).await;
        assert_eq!(oauth_error(unknown, 401).await.0, "invalid_client");

        let mut both = exchange.to_vec();
        both.push(("client_secret", secret.as_str()));
        let (error, description) = oauth_error(token_form(&app, &both, Some((&id, &secret))).await, 400).await;
        assert_eq!(error, "invalid_request");
        assert!(description.contains("not both"), "{description}");

        // Authenticated, either way: the (made-up) code is what fails now.
        let basic = token_form(&app, &exchange, Some((&id, &secret))).await;
        assert_eq!(oauth_error(basic, 400).await.0, "invalid_grant");
        let mut post = exchange.to_vec();
        post.extend([("client_id", id.as_str()), ("client_secret", secret.as_str())]);
        assert_eq!(oauth_error(token_form(&app, &post, None).await, 400).await.0, "invalid_grant");
    }

    async fn malformed_requests_are_invalid_requests(app: TestApp) {
        let (id, secret, _) = client(&app).await;
        let auth = Some((id.as_str(), secret.as_str()));

        let json_body = app.client.post(app.url("/oauth/token")).basic_auth(&id, Some(&secret))
            .json(&json!({ "grant_type": "authorization_code" })).send().await.unwrap();
        let (error, description) = oauth_error(json_body, 400).await;
        assert_eq!(error, "invalid_request");
        assert!(description.contains("x-www-form-urlencoded"), "{description}");

        let missing_grant = token_form(&app, &[("code", "x")], auth).await;
        assert_eq!(oauth_error(missing_grant, 400).await, ("invalid_request".into(), "grant_type is required".into()));
        let missing_code = token_form(&app, &[("grant_type", "authorization_code")], auth).await;
        assert_eq!(oauth_error(missing_code, 400).await.1, "code is required");
        let twice = token_form(&app, &[("grant_type", "refresh_token"), ("refresh_token", "a"), ("refresh_token", "b")], auth).await;
        assert_eq!(oauth_error(twice, 400).await.0, "invalid_request");
        let password = token_form(&app, &[("grant_type", "password"), ("username", "u"), ("password", "p")], auth).await;
        assert_eq!(oauth_error(password, 400).await.0, "unsupported_grant_type");
        let short_verifier = token_form(&app, &[("grant_type", "authorization_code"), ("code", "ghac_x"), ("code_verifier", "short")], auth).await;
        assert_eq!(oauth_error(short_verifier, 400).await.0, "invalid_grant", "an unknown code fails first");
    }

    async fn a_refresh_token_from_a_password_login_is_not_an_oauth_grant(app: TestApp) {
        let (id, secret, owner_refresh) = client(&app).await;
        let response = token_form(&app, &[("grant_type", "refresh_token"), ("refresh_token", &owner_refresh)], Some((&id, &secret))).await;
        assert_eq!(oauth_error(response, 400).await.0, "invalid_grant");
        // ... and it still works where it belongs.
        let refreshed = app.refresh(&owner_refresh).await;
        assert_eq!(refreshed.status(), 200);
    }
}
