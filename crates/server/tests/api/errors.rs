//! Bad input gets its status and a `detail`, never a 500.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp, PASSWORD};

#[on_both_backends]
async fn a_body_that_is_not_a_json_object_is_a_bad_request(app: TestApp) {
    for body in ["not json", "{\"email\": ", "[1, 2]", "\"text\"", ""] {
        let detail = detail_of(app.post_raw("/api/v1/auth/register", body).await, 400).await;
        assert!(!detail.is_empty());
    }
}

#[on_both_backends]
async fn missing_and_mistyped_fields_are_listed_with_their_location(app: TestApp) {
    let locs = locs_of(app.post_json("/api/v1/auth/register", &json!({})).await).await;
    assert_eq!(
        locs,
        vec![
            loc(&["body", "email"]),
            loc(&["body", "password"]),
            loc(&["body", "full_name"]),
        ]
    );
    let locs = locs_of(
        app.post_json(
            "/api/v1/auth/register",
            &json!({ "email": 42, "password": PASSWORD, "full_name": "X" }),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "email"])]);
    let locs = locs_of(app.register("not-an-email", PASSWORD, " ").await).await;
    assert_eq!(
        locs,
        vec![loc(&["body", "email"]), loc(&["body", "full_name"])]
    );
    let locs = locs_of(app.register("short@example.com", "short", "Shorty").await).await;
    assert_eq!(locs, vec![loc(&["body", "password"])]);
    let locs = locs_of(
        app.post_json("/api/v1/auth/login", &json!({ "email": "a@b.co" }))
            .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "password"])]);
    let locs = locs_of(
        app.post_json("/api/v1/auth/refresh", &json!({ "refresh_token": null }))
            .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "refresh_token"])]);
}

#[on_both_backends]
async fn credentials_are_checked_before_anything_else(app: TestApp) {
    detail_of(
        app.client
            .get(app.url("/api/v1/users/me"))
            .send()
            .await
            .unwrap(),
        401,
    )
    .await;
    detail_of(app.me("not-a-jwt").await, 401).await;
    let response = app
        .client
        .get(app.url("/api/v1/users/me"))
        .header("Authorization", "Basic dXNlcjpwYXNz")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap()),
        Some("Bearer")
    );
    detail_of(response, 401).await;
    detail_of(app.refresh("ghr_made_up").await, 401).await;
    // A token signed by someone else, shaped right.
    let forged = "eyJhbGciOiJSUzI1NiIsImtpZCI6Inh4eCIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0.c2ln";
    detail_of(app.me(forged).await, 401).await;
}

#[on_both_backends]
async fn unknown_routes_and_methods_answer_in_json(app: TestApp) {
    detail_of(
        app.client
            .get(app.url("/api/v1/nothing-here"))
            .send()
            .await
            .unwrap(),
        404,
    )
    .await;
    detail_of(
        app.client
            .get(app.url("/api/v1/auth/login"))
            .send()
            .await
            .unwrap(),
        405,
    )
    .await;
    // The same inside every scope of routes, nested ones included: an unknown path is the
    // JSON 404 and an unsupported method the JSON 405, never actix's empty answers.
    let org = "0b9d3a8e-0a9e-4a8e-9a6b-3c1f4f7e2d10";
    for path in [
        "/api/v1/auth/nothing-here".to_owned(),
        "/api/v1/users/nothing-here".to_owned(),
        "/api/v1/organizations/".to_owned(),
        format!("/api/v1/organizations/{org}/nothing-here"),
        format!("/api/v1/organizations/{org}/members/"),
        "/api/v1/webhooks/nothing-here".to_owned(),
        "/api/v1/sso/nothing-here".to_owned(),
        "/api/v1/iam/nothing-here".to_owned(),
        "/api/v1/invitations/nothing/here/either".to_owned(),
        "/api/v1/api-keys/a/b".to_owned(),
        format!("/sso/saml/{org}/nothing-here"),
        "/sso/saml".to_owned(),
        "/scim/v2".to_owned(),
    ] {
        let answer = app.client.get(app.url(&path)).send().await.unwrap();
        detail_of(answer, 404).await;
    }
    for (method, path) in [
        (Method::DELETE, "/api/v1/organizations".to_owned()),
        (Method::PUT, format!("/api/v1/organizations/{org}")),
        (Method::PUT, format!("/api/v1/organizations/{org}/members")),
        (
            Method::GET,
            format!("/api/v1/organizations/{org}/transfer-ownership"),
        ),
        (Method::PUT, "/api/v1/webhooks/endpoints".to_owned()),
        (Method::POST, format!("/sso/saml/{org}/metadata")),
    ] {
        let answer = app
            .client
            .request(method, app.url(&path))
            .send()
            .await
            .unwrap();
        detail_of(answer, 405).await;
    }
    detail_of(
        app.client
            .delete(app.url("/api/v1/api-keys/not-a-uuid"))
            .bearer_auth("x")
            .send()
            .await
            .unwrap(),
        401,
    )
    .await;
}

#[on_both_backends]
async fn an_oversized_body_is_refused_in_json(app: TestApp) {
    let huge = "x".repeat(200 * 1024);
    let response = app
        .post_json(
            "/api/v1/auth/register",
            &json!({ "email": "big@example.com", "password": huge, "full_name": "Big" }),
        )
        .await;
    detail_of(response, 413).await;
}

#[on_both_backends]
async fn an_overlong_password_is_refused_not_hashed(app: TestApp) {
    // Letters and digits in turn: long, and not guessable (a repeated letter would be).
    let long = |n: usize| -> String {
        ('a'..='z')
            .chain('A'..='Z')
            .chain('0'..='9')
            .cycle()
            .take(n)
            .collect()
    };
    let locs = locs_of(app.register("long@example.com", &long(129), "Long").await).await;
    assert_eq!(locs, vec![loc(&["body", "password"])]);
    json_of(
        app.register("long@example.com", &long(128), "Long").await,
        201,
    )
    .await;
}

/// Who may call each route is declared in the route table; the OpenAPI document says which
/// operations take credentials. They agree: every operation the document secures refuses a
/// request that sends none with `401`, before it reads a body that is not even JSON (a route
/// declared public by mistake would answer `415` or `400` here, or worse, serve it).
#[on_both_backends]
async fn every_operation_the_document_secures_refuses_a_request_without_credentials(app: TestApp) {
    let document = app.openapi_document().await;
    let any_id = "0b9d3a8e-0a9e-4a8e-9a6b-3c1f4f7e2d10";
    let mut checked = 0;
    for (template, operations) in document["paths"].as_object().unwrap() {
        let path: String = template
            .split('/')
            .map(|segment| match segment.starts_with('{') {
                true => any_id,
                false => segment,
            })
            .collect::<Vec<_>>()
            .join("/");
        for (method, operation) in operations.as_object().unwrap() {
            let secured = operation["security"]
                .as_array()
                .is_some_and(|requirements| !requirements.is_empty());
            if !secured {
                continue;
            }
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let response = app
                .client
                .request(method.clone(), app.url(&path))
                .header("Content-Type", "text/plain")
                .body("not json")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 401, "{method} {template}");
            checked += 1;
        }
    }
    assert!(
        checked > 80,
        "only {checked} secured operations in the document"
    );
}
