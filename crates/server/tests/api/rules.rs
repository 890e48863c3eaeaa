//! The smaller rules of the third wave (`docs/decisions.md`, "Smaller rules"): each one as a
//! client meets it.

use std::sync::Arc;

use base64::Engine as _;
use gatehouse_crypto::{KeyRing, SystemClock};
use gatehouse_domain::ports::{AccessClaims, TokenSigner};
use reqwest::Method;
use serde_json::json;

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, Backend, TestApp};

/// A copy of `access_token` whose `exp` is `ended_secs_ago` in the past, signed with the
/// server's own key (read from its store with its secret key, as a replica would).
async fn ended_copy_of(app: &TestApp, access_token: &str, ended_secs_ago: i64) -> String {
    let payload = access_token.split('.').nth(1).unwrap();
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    let mut claims: AccessClaims = serde_json::from_slice(&payload).unwrap();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    claims.iat = now - 600;
    claims.nbf = now - 600;
    claims.exp = now - ended_secs_ago;
    claims.jti = uuid::Uuid::now_v7();
    let config = app.config();
    let store = gatehouse_server::app::open_store(&config).await.unwrap();
    let secret = gatehouse_server::secret_key::resolve(&config).unwrap();
    let ring = KeyRing::load_or_create(
        store,
        secret.secret_box(),
        Arc::new(SystemClock),
        app.public_url.clone(),
        time::Duration::minutes(15),
    )
    .await
    .unwrap();
    ring.sign(&claims).await.unwrap()
}

/// The `msg` of the one field error of a `422`, which must be at `loc`.
async fn message_at(response: reqwest::Response, at: &[&str]) -> String {
    let body = json_of(response, 422).await;
    let errors = body["detail"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{body}");
    assert_eq!(errors[0]["loc"], json!(at), "{body}");
    errors[0]["msg"].as_str().unwrap().to_owned()
}

#[on_both_backends]
async fn an_access_token_gets_at_most_five_seconds_of_leeway(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    // Ended a moment ago: within the leeway, still good.
    let just_ended = ended_copy_of(&app, &ada.access_token, 1).await;
    json_of(app.me(&just_ended).await, 200).await;
    // Ended ten seconds ago: past the 5 s of leeway (it was 30 s).
    let ended = ended_copy_of(&app, &ada.access_token, 10).await;
    detail_of(app.me(&ended).await, 401).await;
}

#[on_both_backends]
async fn a_webhook_url_on_a_literal_private_address_is_refused_at_creation_and_update(
    app: TestApp,
) {
    let owner = app.logged_in("owner@example.com").await;
    let org = owner.organization_id.clone();
    let endpoint = |url: &str| json!({ "url": url, "events": ["member.joined"] });
    for url in [
        "https://127.0.0.1/hook",
        "https://10.0.0.8/hook",
        "https://192.168.1.20:8443/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[fe80::1]/hook",
        "https://2130706433/hook",
    ] {
        let response = app
            .in_org(
                Method::POST,
                &owner.access_token,
                &org,
                "/api/v1/webhooks/endpoints",
                Some(endpoint(url)),
            )
            .await;
        assert_eq!(
            locs_of(response).await,
            vec![loc(&["body", "url"])],
            "{url}"
        );
    }
    let created = json_of(
        app.in_org(
            Method::POST,
            &owner.access_token,
            &org,
            "/api/v1/webhooks/endpoints",
            Some(endpoint("https://hooks.example.com/in")),
        )
        .await,
        201,
    )
    .await;
    let id = created["id"].as_str().unwrap();
    let path = format!("/api/v1/webhooks/endpoints/{id}");
    let moved = app
        .in_org(
            Method::PATCH,
            &owner.access_token,
            &org,
            &path,
            Some(json!({ "url": "https://169.254.169.254/" })),
        )
        .await;
    assert_eq!(locs_of(moved).await, vec![loc(&["body", "url"])]);
    let kept = json_of(
        app.in_org(Method::GET, &owner.access_token, &org, &path, None)
            .await,
        200,
    )
    .await;
    assert_eq!(kept["url"], "https://hooks.example.com/in");
}

#[on_both_backends]
async fn ten_concurrent_creates_with_the_same_name_all_get_a_slug(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let creates: Vec<_> = (0..10)
        .map(|_| {
            let request = app
                .client
                .post(app.url("/api/v1/organizations"))
                .bearer_auth(&ada.access_token)
                .json(&json!({ "name": "Acme Corp" }));
            tokio::spawn(async move { request.send().await.unwrap() })
        })
        .collect();
    let mut slugs = Vec::new();
    for create in creates {
        let created = json_of(create.await.unwrap(), 201).await;
        slugs.push(created["slug"].as_str().unwrap().to_owned());
    }
    slugs.sort_by_key(|slug| {
        slug.rsplit_once('-')
            .and_then(|(_, n)| n.parse::<u32>().ok())
            .unwrap_or(1)
    });
    let expected: Vec<String> = std::iter::once("acme-corp".to_owned())
        .chain((2..=10).map(|n| format!("acme-corp-{n}")))
        .collect();
    assert_eq!(slugs, expected);
    // A slug the caller chose stays theirs to choose: taken is 409.
    let taken = app
        .send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/organizations",
            Some(json!({ "name": "Other", "slug": "acme-corp-3" })),
        )
        .await;
    detail_of(taken, 409).await;
}

#[on_both_backends]
async fn names_and_emails_refuse_bidirectional_and_zero_width_controls(app: TestApp) {
    for (email, full_name, bad) in [
        ("ada@example.com", "Ada\u{202E}ecalevol", "full_name"),
        ("ada@example.com", "\u{2066}Ada\u{2069}", "full_name"),
        ("a\u{200B}da@example.com", "Ada", "email"),
        ("ada@example.com\u{FEFF}", "Ada", "email"),
    ] {
        let response = app
            .register(email, crate::helpers::PASSWORD, full_name)
            .await;
        assert_eq!(
            locs_of(response).await,
            vec![loc(&["body", bad])],
            "{email:?} {full_name:?}"
        );
    }
    let ada = app.logged_in("ada@example.com").await;
    for name in ["Acme\u{202E}", "Ac\u{200B}me", "\u{FEFF}Acme"] {
        let response = app
            .send_as(
                Method::POST,
                &ada.access_token,
                "/api/v1/organizations",
                Some(json!({ "name": name })),
            )
            .await;
        assert_eq!(
            locs_of(response).await,
            vec![loc(&["body", "name"])],
            "{name:?}"
        );
    }
    let response = app
        .send_as(
            Method::PATCH,
            &ada.access_token,
            "/api/v1/users/me",
            Some(json!({ "full_name": "Ada\u{200D}Lovelace" })),
        )
        .await;
    assert_eq!(locs_of(response).await, vec![loc(&["body", "full_name"])]);
}

#[on_both_backends]
async fn names_are_nfc_and_an_emails_domain_is_stored_in_idna_ascii(app: TestApp) {
    // "José" typed with a combining accent; the domain in capitals with an umlaut.
    let registered = json_of(
        app.register(
            "Jose\u{301}@B\u{dc}CHER.de",
            crate::helpers::PASSWORD,
            "Jose\u{301} Nun\u{303}ez",
        )
        .await,
        201,
    )
    .await;
    assert!(registered["user_id"].is_string(), "{registered}");
    // The same address, composed and in ASCII, signs in: it is one account.
    let tokens = json_of(
        app.login("jos\u{e9}@xn--bcher-kva.de", crate::helpers::PASSWORD)
            .await,
        200,
    )
    .await;
    let me = json_of(app.me(tokens["access_token"].as_str().unwrap()).await, 200).await;
    assert_eq!(me["email"], "jos\u{e9}@xn--bcher-kva.de");
    assert_eq!(me["full_name"], "Jos\u{e9} Nu\u{f1}ez");
    let team = json_of(
        app.send_as(
            Method::POST,
            tokens["access_token"].as_str().unwrap(),
            "/api/v1/organizations",
            Some(json!({ "name": "Cafe\u{301}" })),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(team["name"], "Caf\u{e9}");
}

#[on_both_backends]
async fn a_json_operation_refuses_a_body_that_is_not_sent_as_json(app: TestApp) {
    let body =
        r#"{"email": "ada@example.com", "password": "correct horse battery", "full_name": "Ada"}"#;
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/json",
        "application/jsonx",
    ] {
        let response = app
            .client
            .post(app.url("/api/v1/auth/register"))
            .header("Content-Type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        detail_of(response, 415).await;
    }
    // No Content-Type at all on a body: not declared JSON either.
    let response = app
        .client
        .post(app.url("/api/v1/auth/register"))
        .body(body)
        .send()
        .await
        .unwrap();
    detail_of(response, 415).await;
    // Nothing was registered by any of them.
    detail_of(
        app.login("ada@example.com", crate::helpers::PASSWORD).await,
        401,
    )
    .await;
    // JSON as JSON, with a charset, or a +json type: taken.
    let response = app
        .client
        .post(app.url("/api/v1/auth/register"))
        .header("Content-Type", "application/json; charset=utf-8")
        .body(body)
        .send()
        .await
        .unwrap();
    json_of(response, 201).await;
    let ada = json_of(
        app.login("ada@example.com", "correct horse battery").await,
        200,
    )
    .await;
    let token = ada["access_token"].as_str().unwrap();
    let response = app
        .client
        .post(app.url("/api/v1/organizations"))
        .bearer_auth(token)
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"name": "Acme"}"#)
        .send()
        .await
        .unwrap();
    json_of(response, 201).await;
    let response = app
        .client
        .post(app.url("/api/v1/organizations"))
        .bearer_auth(token)
        .header("Content-Type", "text/plain")
        .body(r#"{"name": "Acme"}"#)
        .send()
        .await
        .unwrap();
    detail_of(response, 415).await;
    // The form-posted endpoints stay forms: the token endpoint answers its own error.
    let response = app
        .client
        .post(app.url("/oauth/token"))
        .form(&[("grant_type", "authorization_code"), ("code", "made-up")])
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 415);
}

#[on_both_backends]
async fn credentials_are_checked_before_the_body_is_parsed(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let org = ada.organization_id.clone();
    // A token whose session ended: a valid signature, refused only by the store.
    app.logout(&ada.access_token).await;
    let revoked = &ada.access_token;
    let send = |method: Method, path: &str, content_type: &str, body: &'static str| {
        app.client
            .request(method, app.url(path))
            .bearer_auth(revoked)
            .header("X-Organization-ID", &org)
            .header("Content-Type", content_type)
            .body(body)
    };
    let org_path = format!("/api/v1/organizations/{org}");
    for _ in 0..5 {
        for (method, path) in [
            (Method::POST, "/api/v1/organizations"),
            (Method::PATCH, org_path.as_str()),
            (Method::POST, "/api/v1/webhooks/endpoints"),
            (Method::PATCH, "/api/v1/users/me"),
        ] {
            for (content_type, body) in [
                ("application/json", "[1, 2]"),
                ("application/json", "{\"name\": "),
                (
                    "application/json",
                    "{\"name\": 42, \"url\": 7, \"full_name\": []}",
                ),
                ("text/plain", "{}"),
            ] {
                let response = send(method.clone(), path, content_type, body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    response.status(),
                    401,
                    "{method} {path} {content_type} {body}"
                );
            }
        }
    }
    // The control plane too: a wrong operator token with a bad body is 401.
    let response = app
        .client
        .post(app.url("/control/events"))
        .bearer_auth("not-the-operator")
        .header("Content-Type", "text/plain")
        .body("nope")
        .send()
        .await
        .unwrap();
    detail_of(response, 401).await;
}

#[on_both_backends]
async fn common_and_personal_passwords_are_refused_with_the_reason(app: TestApp) {
    for weak in ["Password1!", "Summer2024!", "iloveyou1234"] {
        let msg = message_at(
            app.register("ada@example.com", weak, "Ada Lovelace").await,
            &["body", "password"],
        )
        .await;
        assert!(
            msg.contains("too easy to guess") && msg.contains("common"),
            "{weak}: {msg}"
        );
    }
    // Built from the person's own name and address: guessed first by anyone who knows them.
    let msg = message_at(
        app.register(
            "ottoline.vandersteen@example.com",
            "vandersteen1815",
            "Ottoline Vandersteen",
        )
        .await,
        &["body", "password"],
    )
    .await;
    assert!(msg.contains("too easy to guess"), "{msg}");
    json_of(
        app.register("grace@example.com", "vandersteen1815", "Grace Hopper")
            .await,
        201,
    )
    .await;

    // A password change and a reset are judged the same way.
    let otto = json_of(
        app.register(
            "ottoline.vandersteen@example.com",
            crate::helpers::PASSWORD,
            "Ottoline Vandersteen",
        )
        .await,
        201,
    )
    .await;
    assert!(otto["user_id"].is_string());
    let tokens = json_of(
        app.login("ottoline.vandersteen@example.com", crate::helpers::PASSWORD)
            .await,
        200,
    )
    .await;
    let token = tokens["access_token"].as_str().unwrap();
    for weak in ["Summer2024!", "Ottoline.Vandersteen"] {
        let msg = message_at(
            app.change_password(token, crate::helpers::PASSWORD, weak)
                .await,
            &["body", "new_password"],
        )
        .await;
        assert!(msg.contains("too easy to guess"), "{weak}: {msg}");
    }
    app.post_json(
        "/api/v1/auth/password/forgot",
        &json!({ "email": "ottoline.vandersteen@example.com" }),
    )
    .await;
    let link = app
        .mailed_token("ottoline.vandersteen@example.com", "/reset-password/")
        .await;
    let reset = app
        .post_json(
            "/api/v1/auth/password/reset",
            &json!({ "token": link, "new_password": "iloveyou1234" }),
        )
        .await;
    let msg = message_at(reset, &["body", "new_password"]).await;
    assert!(msg.contains("too easy to guess"), "{msg}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_database_and_its_wal_and_shm_are_the_owners_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let app = TestApp::spawn(Backend::Sqlite).await;
    // A write, so that the WAL holds something.
    app.logged_in("ada@example.com").await;
    let url = app.config().database_url;
    let path = url.strip_prefix("sqlite://").unwrap().to_owned();
    for file in [path.clone(), format!("{path}-wal"), format!("{path}-shm")] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file} is {mode:o}");
    }
}
