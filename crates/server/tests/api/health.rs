//! Liveness, readiness, request ids, the OpenAPI document.

use crate::helpers::{json_of, on_both_backends, TestApp};

#[on_both_backends]
async fn the_probes_answer(app: TestApp) {
    json_of(app.client.get(app.url("/livez")).send().await.unwrap(), 200).await;
    json_of(
        app.client.get(app.url("/readyz")).send().await.unwrap(),
        200,
    )
    .await;
}

#[on_both_backends]
async fn every_response_carries_a_request_id(app: TestApp) {
    let generated = app.client.get(app.url("/livez")).send().await.unwrap();
    assert!(generated.headers().contains_key("x-request-id"));
    let echoed = app
        .client
        .get(app.url("/api/v1/nothing"))
        .header("X-Request-ID", "trace-123")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "trace-123");
}

#[on_both_backends]
async fn the_openapi_document_covers_every_route(app: TestApp) {
    let document = app.openapi_document().await;
    assert!(document["openapi"].as_str().unwrap().starts_with("3."));
    for path in [
        "/api/v1/auth/register",
        "/api/v1/auth/login",
        "/api/v1/auth/refresh",
        "/api/v1/auth/logout",
        "/api/v1/auth/password",
        "/.well-known/jwks.json",
        "/api/v1/users/me",
        "/api/v1/api-keys",
        "/api/v1/api-keys/{id}",
        "/api/v1/health",
        "/api/v1/organizations/{id}/applications",
        "/api/v1/organizations/{id}/applications/{app_id}",
        "/api/v1/organizations/{id}/applications/{app_id}/secret",
        "/oauth/authorize",
        "/oauth/token",
        "/oauth/revoke",
        "/oauth/introspect",
        "/.well-known/openid-configuration",
        "/livez",
        "/readyz",
    ] {
        assert!(
            document["paths"].get(path).is_some(),
            "{path} is not documented"
        );
    }
    let userinfo = &document["paths"]["/oauth/userinfo"];
    assert!(
        userinfo["get"].is_object() && userinfo["post"].is_object(),
        "{userinfo}"
    );
    // Every operation has an id of its own.
    let mut ids: Vec<&str> = document["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| item.as_object().unwrap().values())
        .filter_map(|operation| operation["operationId"].as_str())
        .collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "operation ids repeat");
}

#[on_both_backends]
async fn the_openapi_document_declares_the_rate_limit_headers_on_every_operation(app: TestApp) {
    let document = app.openapi_document().await;
    let mut operations = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            let responses = operation["responses"].as_object().unwrap();
            assert!(!responses.is_empty(), "{method} {path}");
            for (status, response) in responses {
                for header in [
                    "X-RateLimit-Limit",
                    "X-RateLimit-Remaining",
                    "X-RateLimit-Reset",
                ] {
                    let declared = &response["headers"][header];
                    assert_eq!(
                        declared["schema"]["type"], "integer",
                        "{method} {path} {status}: {header}"
                    );
                }
            }
            if path != "/livez" && path != "/readyz" {
                let spent = &responses["429"];
                assert_eq!(
                    spent["headers"]["Retry-After"]["schema"]["type"], "integer",
                    "{method} {path}"
                );
            }
            operations += 1;
        }
    }
    assert!(operations > 100, "{operations} operations");
}

#[on_both_backends]
async fn the_openapi_document_gives_every_list_the_spec_envelope(app: TestApp) {
    let document = app.openapi_document().await;
    let schema_of = |path: &str| {
        let operation = &document["paths"][path]["get"];
        let reference = operation["responses"]["200"]["content"]["application/json"]["schema"]
            ["$ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}: no schema reference: {operation}"));
        let name = reference.trim_start_matches("#/components/schemas/");
        let parameters: Vec<&str> = operation["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(
            parameters.contains(&"page") && parameters.contains(&"page_size"),
            "{path}: {parameters:?}"
        );
        document["components"]["schemas"][name].clone()
    };
    for path in [
        "/api/v1/organizations",
        "/api/v1/organizations/{id}/members",
        "/api/v1/organizations/{id}/domains",
        "/api/v1/organizations/{id}/service-accounts",
        "/api/v1/organizations/{id}/roles",
        "/api/v1/organizations/{id}/api-keys",
        "/api/v1/organizations/{id}/scim-tokens",
        "/api/v1/api-keys",
        "/api/v1/invitations",
        "/api/v1/users/me/consents",
        "/api/v1/iam/permissions",
    ] {
        let schema = schema_of(path);
        let mut properties: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("{path}: {schema}"))
            .keys()
            .map(String::as_str)
            .collect();
        properties.sort_unstable();
        assert_eq!(
            properties,
            [
                "has_next",
                "has_prev",
                "items",
                "page",
                "page_size",
                "total"
            ],
            "{path}"
        );
    }
    // The event catalogue is the spec's bare array, and needs no organization with a token.
    let catalogue = &document["paths"]["/api/v1/webhooks/events"]["get"];
    assert_eq!(
        catalogue["responses"]["200"]["content"]["application/json"]["schema"]["type"],
        "array"
    );
    assert!(
        catalogue["security"].as_array().unwrap().iter().any(|r| r
            .as_object()
            .unwrap()
            .keys()
            .eq(["bearer"])),
        "{catalogue}"
    );
}

/// A store that cannot be reached is a 503 with `Retry-After`, never a 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_store_is_a_503() {
    let app = TestApp::spawn(crate::helpers::Backend::Postgres).await;
    let user = app.logged_in("outage@example.com").await;
    json_of(
        app.client.get(app.url("/readyz")).send().await.unwrap(),
        200,
    )
    .await;
    app.lose_the_database().await;
    for response in [
        app.client.get(app.url("/readyz")).send().await.unwrap(),
        app.login("outage@example.com", crate::helpers::PASSWORD)
            .await,
        app.me(&user.access_token).await,
    ] {
        assert!(response.headers().contains_key("retry-after"));
        let body = json_of(response, 503).await;
        assert!(body["detail"].is_string());
    }
    // Liveness does not depend on the store.
    json_of(app.client.get(app.url("/livez")).send().await.unwrap(), 200).await;
}
