//! Denial of service by input: every bound on what a request may carry, each met over HTTP.
//! (The body's size and the new password's length are in `errors`.)

use std::io::{Read, Write};

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp, PASSWORD};

/// `depth` arrays, one inside the other.
fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// Sends raw bytes and returns the status line and the rest, as the server wrote them.
fn raw_exchange(app: &TestApp, request: &[u8]) -> String {
    let address = app.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.write_all(request).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[on_both_backends]
async fn json_nested_deeper_than_32_levels_is_refused_before_it_is_parsed(app: TestApp) {
    let body = format!(
        r#"{{"email": "deep@example.com", "password": {}, "full_name": "Deep"}}"#,
        nested(32)
    );
    let detail = detail_of(app.post_raw("/api/v1/auth/register", body).await, 400).await;
    assert!(detail.contains("deeper than 32 levels"), "{detail}");
    // Ten thousand levels: the same answer, no stack overflow.
    let body = format!(r#"{{"a": {}}}"#, nested(10_000));
    detail_of(app.post_raw("/api/v1/auth/login", body).await, 400).await;
    // 32 levels in all pass the bound (the field is then the wrong type: a 422), and
    // brackets inside strings are not nesting.
    let body = format!(
        r#"{{"email": "deep@example.com", "password": {}, "full_name": "Deep"}}"#,
        nested(31)
    );
    assert_eq!(
        locs_of(app.post_raw("/api/v1/auth/register", body).await).await,
        vec![loc(&["body", "password"])]
    );
    let bracketed = format!("[[{}]] horse battery", "{".repeat(40));
    json_of(
        app.register("deep@example.com", &bracketed, "Deep").await,
        201,
    )
    .await;
}

#[on_both_backends]
async fn a_path_and_query_longer_than_8_kib_are_refused(app: TestApp) {
    let user = app.logged_in("ada@example.com").await;
    let long = "a".repeat(8 * 1024);
    let response = app
        .get_as(
            &user.access_token,
            &format!("/api/v1/organizations?search={long}"),
        )
        .await;
    let detail = detail_of(response, 414).await;
    assert!(detail.contains("8192 bytes"), "{detail}");
    // Just under: served (the search itself is cut to 100 characters).
    let fits = "a".repeat(8 * 1024 - "/api/v1/organizations".len() - "search=".len());
    json_of(
        app.get_as(
            &user.access_token,
            &format!("/api/v1/organizations?search={fits}"),
        )
        .await,
        200,
    )
    .await;
}

#[on_both_backends]
async fn a_search_with_a_control_character_is_refused_naming_it(app: TestApp) {
    // No name or email holds one, and PostgreSQL refuses a NUL in any text: a 422 on both
    // backends, never the store's error.
    let user = app.logged_in("ada@example.com").await;
    let team = app.create_team(&user.access_token, "Acme Team").await;
    let org = team["id"].as_str().unwrap();
    let members = format!("/api/v1/organizations/{org}/members");
    for list in ["/api/v1/organizations", members.as_str()] {
        for search in ["%00", "a%00b", "line%0Abreak", "%7F"] {
            let path = format!("{list}?search={search}");
            let response = app
                .in_org(Method::GET, &user.access_token, org, &path, None)
                .await;
            assert_eq!(
                locs_of(response).await,
                vec![loc(&["query", "search"])],
                "{path}"
            );
        }
        // Blank is no filter.
        let path = format!("{list}?search=%20%20");
        json_of(
            app.in_org(Method::GET, &user.access_token, org, &path, None)
                .await,
            200,
        )
        .await;
    }
    // Trimmed: the spaces after the name are not searched for.
    let path = format!("/api/v1/organizations?search=acme{}", "%20".repeat(200));
    let found = json_of(app.get_as(&user.access_token, &path).await, 200).await;
    assert_eq!(found["total"], 1, "{found}");
}

#[on_both_backends]
async fn every_operation_documents_the_head_bounds(app: TestApp) {
    let document = app.openapi_document().await;
    let mut operations = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for status in ["414", "431"] {
                let response = &operation["responses"][status];
                assert!(
                    response.is_object(),
                    "{method} {path} does not document {status}"
                );
                assert_eq!(
                    response["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody"
                );
            }
            operations += 1;
        }
    }
    assert!(operations > 50, "{operations} operations");
}

#[on_both_backends]
async fn headers_over_16_kib_or_96_of_them_are_refused(app: TestApp) {
    let response = app
        .client
        .get(app.url("/livez"))
        .header("X-Padding", "p".repeat(17 * 1024))
        .send()
        .await
        .unwrap();
    let detail = detail_of(response, 431).await;
    assert!(detail.contains("16384 bytes"), "{detail}");
    // Past actix-web's own bounds (96 headers; a 128 KiB head) it answers 431 itself.
    let many: String = (0..100).map(|i| format!("X-H{i}: 1\r\n")).collect();
    let answer = raw_exchange(
        &app,
        format!("GET /livez HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes(),
    );
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let huge = format!(
        "GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "b".repeat(200 * 1024)
    );
    let answer = raw_exchange(&app, huge.as_bytes());
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    // And the server serves on.
    json_of(app.client.get(app.url("/livez")).send().await.unwrap(), 200).await;
}

#[on_both_backends]
async fn every_list_field_has_a_most_items(app: TestApp) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "enterprise").await;
    let token = owner.access_token.as_str();

    // Webhook subscriptions: 64 event types at most, refused before any is looked at.
    let events: Vec<String> = (0..65).map(|i| format!("no.such.event.{i}")).collect();
    let response = app
        .in_org(
            Method::POST,
            token,
            &org,
            "/api/v1/webhooks/endpoints",
            Some(json!({ "url": "https://hooks.example.com/in", "events": events })),
        )
        .await;
    assert_eq!(locs_of(response).await, vec![loc(&["body", "events"])]);

    // OAuth redirect URIs: 10.
    let uris: Vec<String> = (0..11)
        .map(|i| format!("https://app.example.com/cb/{i}"))
        .collect();
    let response = app
        .send_as(
            Method::POST,
            token,
            &format!("/api/v1/organizations/{org}/applications"),
            Some(json!({ "name": "Many", "redirect_uris": uris })),
        )
        .await;
    assert_eq!(
        locs_of(response).await,
        vec![loc(&["body", "redirect_uris"])]
    );

    // An IP allowlist: 256 ranges; MFA methods: 8 entries.
    let ips: Vec<String> = (0..257)
        .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
        .collect();
    let policies = json!({
        "password_policy": { "min_length": 8, "require_uppercase": false, "require_lowercase": false,
            "require_numbers": false, "require_special_chars": false, "max_age_days": 0, "prevent_reuse_count": 0 },
        "mfa_policy": { "required": false, "allowed_methods": vec!["totp"; 9], "grace_period_hours": 0 },
        "session_policy": { "max_session_duration_hours": 24, "idle_timeout_minutes": 60, "max_concurrent_sessions": 5 },
        "ip_allowlist": { "enabled": false, "allowed_ips": ips },
    });
    let response = app
        .send_as(
            Method::PUT,
            token,
            &format!("/api/v1/organizations/{org}/policies"),
            Some(policies),
        )
        .await;
    let mut locs = locs_of(response).await;
    locs.sort();
    assert_eq!(
        locs,
        vec![
            loc(&["body", "ip_allowlist", "allowed_ips"]),
            loc(&["body", "mfa_policy", "allowed_methods"])
        ]
    );

    // SSO's domain whitelist: 100 domains; the 101st is named.
    let domains: Vec<String> = (0..101).map(|i| format!("d{i}.example.com")).collect();
    let response = app
            .send_as(Method::POST, token, "/api/v1/sso/configurations", Some(json!({
                "organization_id": org, "provider": "okta", "idp_entity_id": "https://idp.example.com",
                "idp_sso_url": "https://idp.example.com/sso", "idp_certificate": "not checked first",
                "domain_whitelist": domains,
            })))
            .await;
    let body: Value = json_of(response, 422).await;
    let named: Vec<&Value> = body["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["loc"])
        .collect();
    assert!(
        named.contains(&&json!(["body", "domain_whitelist", 100])),
        "{body}"
    );
}

#[on_both_backends]
async fn overlong_secrets_are_refused_without_the_work(app: TestApp) {
    let user = app.logged_in("ada@example.com").await;
    // A password longer than any that can be set is simply wrong: no hash is computed for
    // it (argon2 never sees it), and it counts as a failed sign-in like any wrong one.
    let long = "x".repeat(60_000);
    detail_of(app.login("ada@example.com", &long).await, 401).await;
    // An access token longer than 8 KiB is not decoded.
    let bloated = format!("{}{}", user.access_token, "A".repeat(8 * 1024));
    detail_of(app.me(&bloated).await, 401).await;
    json_of(app.me(&user.access_token).await, 200).await;
    json_of(app.login("ada@example.com", PASSWORD).await, 200).await;
}
