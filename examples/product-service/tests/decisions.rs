//! The example's decisions, with tokens of a test issuer: who may list and create projects, and
//! which webhook deliveries are taken.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use actix_web::{
    http::{header, StatusCode},
    test, App,
};
use gatehouse_example_product::{configure, State};
use gatehouse_verify::types::signature;
use gatehouse_verify::{
    testing::{TestIssuer, TestKey},
    Verifier, WebhookVerifier,
};
use serde_json::{json, Value};

const SECRET: &str = "whsec_example";
/// The organization of the test issuer's tokens.
const ORGANIZATION: &str = "0190a0a0-0000-7000-8000-0000000000cc";
const PROJECTS: &str = "/organizations/0190a0a0-0000-7000-8000-0000000000cc/projects";

async fn call(
    issuer: &TestIssuer,
    request: test::TestRequest,
) -> (StatusCode, Option<String>, Value) {
    let verifier = Verifier::builder(issuer.issuer())
        .jwks_url(issuer.jwks_url())
        .build()
        .unwrap();
    let state = State::with(verifier, WebhookVerifier::new(SECRET));
    let app = test::init_service(App::new().configure(|app| configure(app, state))).await;
    let response = test::call_service(&app, request.to_request()).await;
    let status = response.status();
    let challenge = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|value| value.to_str().unwrap().to_owned());
    let body = test::read_body(response).await;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    (status, challenge, body)
}

fn bearer(uri: &str, token: &str, post: bool) -> test::TestRequest {
    let request = if post {
        test::TestRequest::post()
    } else {
        test::TestRequest::get()
    };
    request
        .uri(uri)
        .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
}

fn viewer(issuer: &TestIssuer) -> Value {
    let mut claims = issuer.claims();
    claims["org_role"] = json!("viewer");
    claims["org_permissions"] = json!([
        "organization.read",
        "organization.members.read",
        "applications.read"
    ]);
    claims
}

#[actix_web::test]
async fn a_member_lists_and_creates_projects_a_viewer_only_lists() {
    let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
    let member = issuer.sign(&issuer.claims());
    let (status, _, body) = call(&issuer, bearer(PROJECTS, &member, false)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["role"], "member");
    assert_eq!(body["organization_id"], ORGANIZATION);
    let (status, _, body) = call(&issuer, bearer(PROJECTS, &member, true)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let capitals = format!("/organizations/{}/projects", ORGANIZATION.to_uppercase());
    let (status, _, body) = call(&issuer, bearer(&capitals, &member, false)).await;
    assert_eq!(status, StatusCode::OK, "the same id in capitals: {body}");

    let viewer = issuer.sign(&viewer(&issuer));
    let (status, _, _) = call(&issuer, bearer(PROJECTS, &viewer, false)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = call(&issuer, bearer(PROJECTS, &viewer, true)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["detail"], "this needs the permission api_keys.create");
}

#[actix_web::test]
async fn another_organizations_projects_are_not_found() {
    let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
    let member = issuer.sign(&issuer.claims());
    let elsewhere = "/organizations/0190a0a0-0000-7000-8000-0000000000ee/projects";
    for post in [false, true] {
        let (status, _, body) = call(&issuer, bearer(elsewhere, &member, post)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(body["detail"], "organization not found");
    }
}

#[actix_web::test]
async fn a_token_without_an_organization_is_forbidden() {
    let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
    let mut claims = issuer.claims();
    for name in ["org_id", "org_role", "org_permissions"] {
        claims.as_object_mut().unwrap().remove(name);
    }
    let (status, _, body) = call(&issuer, bearer(PROJECTS, &issuer.sign(&claims), false)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["detail"],
        "this needs a token scoped to an organization"
    );
}

#[actix_web::test]
async fn missing_expired_and_foreign_tokens_are_unauthorized() {
    let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
    let (status, challenge, body) = call(&issuer, test::TestRequest::get().uri(PROJECTS)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(challenge.as_deref(), Some("Bearer"));
    assert_eq!(body["detail"], "a bearer token is required");

    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut expired = issuer.claims();
    expired["exp"] = json!(now - 60);
    let foreign = TestKey::generate("k1").sign(&issuer.claims());
    for token in [issuer.sign(&expired), foreign, "not-a-token".to_owned()] {
        let (status, challenge, body) = call(&issuer, bearer(PROJECTS, &token, false)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
        assert_eq!(challenge.as_deref(), Some("Bearer error=\"invalid_token\""));
        assert!(body["detail"]
            .as_str()
            .unwrap()
            .starts_with("the bearer token is not valid"));
    }
}

fn delivery(timestamp: i64, signed_body: &str, sent_body: &str, secret: &str) -> test::TestRequest {
    test::TestRequest::post()
        .uri("/webhooks/gatehouse")
        .insert_header(("X-Service-Timestamp", timestamp.to_string()))
        .insert_header((
            "X-Service-Signature",
            signature(secret.as_bytes(), timestamp, signed_body.as_bytes()),
        ))
        .set_payload(sent_body.to_owned())
}

#[actix_web::test]
async fn only_signed_fresh_deliveries_are_taken() {
    let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let body = r#"{"type":"organization.member_added"}"#;
    let (status, _, _) = call(&issuer, delivery(now, body, body, SECRET)).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let tampered = r#"{"type":"organization.member_removed"}"#;
    for (request, detail) in [
        (
            delivery(now, body, tampered, SECRET),
            "the signature does not match",
        ),
        (
            delivery(now, body, body, "whsec_other"),
            "the signature does not match",
        ),
        (
            delivery(now - 600, body, body, SECRET),
            "the timestamp is more than five minutes from now",
        ),
        (
            test::TestRequest::post()
                .uri("/webhooks/gatehouse")
                .set_payload(body),
            "the X-Service-Timestamp header is missing",
        ),
    ] {
        let (status, _, refused) = call(&issuer, request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(refused["detail"], detail);
    }
}

#[actix_web::test]
async fn a_key_set_out_of_reach_is_a_503_not_a_401() {
    let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let unreachable = format!(
        "http://{}/.well-known/jwks.json",
        closed.local_addr().unwrap()
    );
    drop(closed);
    let verifier = Verifier::builder(issuer.issuer())
        .jwks_url(unreachable)
        .build()
        .unwrap();
    let state = State::with(verifier, WebhookVerifier::new(SECRET));
    let app = test::init_service(App::new().configure(|app| configure(app, state))).await;
    let token = issuer.sign(&issuer.claims());
    let response = test::call_service(&app, bearer(PROJECTS, &token, false).to_request()).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = serde_json::from_slice(&test::read_body(response).await).unwrap();
    assert_eq!(
        body["detail"],
        "the token cannot be verified now; try again later"
    );
}
