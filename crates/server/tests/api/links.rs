//! The mail-based account flows over HTTP, through the server's mail folder: sign-in links,
//! password resets and email verification; single use, expiry, the same answer for unknown
//! addresses, the rate limits, and the pages the links open; both backends.

use reqwest::{header, Method};
use serde_json::{json, Value};

use crate::helpers::{
    detail_of, hidden, json_of, loc, locs_of, on_both_backends, Browser, TestApp, PASSWORD,
};

const NEW_PASSWORD: &str = "a brand new passphrase";

fn claims(access: &str) -> Value {
    use base64::Engine as _;
    serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap()
}

#[on_both_backends]
async fn a_forgotten_password_is_reset_by_the_mailed_link_and_every_session_ends(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    let mails = app.mails().await.len();
    assert_eq!(
        app.post_json(
            "/api/v1/auth/password/forgot",
            &json!({ "email": "Ada@Example.com" })
        )
        .await
        .status(),
        202
    );
    assert_eq!(app.mails().await.len(), mails + 1);
    let token = app
        .mailed_token("ada@example.com", "/reset-password/")
        .await;
    assert!(token.starts_with("ghpr_"), "{token}");

    // A weak password is refused before the link is spent.
    let weak = app
        .post_json(
            "/api/v1/auth/password/reset",
            &json!({ "token": token, "new_password": "short" }),
        )
        .await;
    assert_eq!(locs_of(weak).await, [loc(&["body", "new_password"])]);
    assert_eq!(
        app.post_json(
            "/api/v1/auth/password/reset",
            &json!({ "token": token, "new_password": NEW_PASSWORD })
        )
        .await
        .status(),
        204
    );
    // Every session ended; the old password is gone, the new one works.
    detail_of(app.me(&ada.access_token).await, 401).await;
    detail_of(app.login("ada@example.com", PASSWORD).await, 401).await;
    json_of(app.login("ada@example.com", NEW_PASSWORD).await, 200).await;
    // The link worked once.
    let again = app
        .post_json(
            "/api/v1/auth/password/reset",
            &json!({ "token": token, "new_password": "yet another passphrase" }),
        )
        .await;
    assert_eq!(locs_of(again).await, [loc(&["body", "token"])]);

    // On record: the link mailed to Ada's account (whoever asked proved nothing: no actor
    // id), then her password changed by it.
    let mailed = app.audit_records("?action=auth.link_mailed").await;
    assert_eq!(mailed.len(), 1, "{mailed:?}");
    assert_eq!(mailed[0]["actor"], json!({ "type": "user", "id": null }));
    assert_eq!(
        mailed[0]["target"],
        json!({ "type": "user", "id": ada.user_id })
    );
    let changed = app
        .audit_records(&format!(
            "?action=auth.password_changed&actor_id={}",
            ada.user_id
        ))
        .await;
    assert_eq!(changed.len(), 1);
}

#[on_both_backends]
async fn an_unknown_address_gets_the_same_answer_and_no_mail(app: TestApp) {
    app.logged_in("ada@example.com").await;
    let mails = app.mails().await.len();
    for path in ["/api/v1/auth/password/forgot", "/api/v1/auth/magic-link"] {
        for email in ["nobody@example.com", "not an address"] {
            let answer = app.post_json(path, &json!({ "email": email })).await;
            assert_eq!(answer.status(), 202, "{path} {email}");
            assert!(answer.bytes().await.unwrap().is_empty());
        }
    }
    assert_eq!(
        app.mails().await.len(),
        mails,
        "no mail for an address without an account"
    );
    assert!(
        app.audit_records("?action=auth.link_mailed")
            .await
            .is_empty(),
        "and nothing on record"
    );
}

#[on_both_backends]
async fn a_sign_in_link_signs_in_once_and_proves_the_address(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    assert_eq!(
        json_of(app.me(&ada.access_token).await, 200).await["email_verified"],
        false
    );
    assert_eq!(
        app.post_json(
            "/api/v1/auth/magic-link",
            &json!({ "email": "ada@example.com" })
        )
        .await
        .status(),
        202
    );
    let token = app.mailed_token("ada@example.com", "/magic-link/").await;
    assert!(token.starts_with("ghml_"));
    let tokens = json_of(
        app.post_json("/api/v1/auth/magic-link/verify", &json!({ "token": token }))
            .await,
        200,
    )
    .await;
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(claims(access)["amr"], json!(["email"]));
    assert_eq!(
        json_of(app.me(access).await, 200).await["email_verified"],
        true
    );
    let again = app
        .post_json("/api/v1/auth/magic-link/verify", &json!({ "token": token }))
        .await;
    assert_eq!(locs_of(again).await, [loc(&["body", "token"])]);
}

#[on_both_backends]
async fn a_link_expires(app: TestApp) {
    app.logged_in("ada@example.com").await;
    app.post_json(
        "/api/v1/auth/magic-link",
        &json!({ "email": "ada@example.com" }),
    )
    .await;
    let token = app.mailed_token("ada@example.com", "/magic-link/").await;
    app.rewind("account_tokens", "expires_at", time::Duration::minutes(16))
        .await;
    let late = app
        .post_json("/api/v1/auth/magic-link/verify", &json!({ "token": token }))
        .await;
    assert_eq!(late.status(), 422);
}

#[on_both_backends]
async fn the_address_is_verified_by_the_mailed_link(app: TestApp) {
    let ada = app.logged_in("ada@example.com").await;
    assert_eq!(
        app.send_as(
            Method::POST,
            &ada.access_token,
            "/api/v1/auth/email/verify-request",
            None
        )
        .await
        .status(),
        202
    );
    let token = app.mailed_token("ada@example.com", "/verify-email/").await;
    assert!(token.starts_with("ghev_"));
    // A token for another purpose does not verify.
    app.post_json(
        "/api/v1/auth/magic-link",
        &json!({ "email": "ada@example.com" }),
    )
    .await;
    let sign_in = app.mailed_token("ada@example.com", "/magic-link/").await;
    assert_eq!(
        app.post_json("/api/v1/auth/email/verify", &json!({ "token": sign_in }))
            .await
            .status(),
        422
    );
    assert_eq!(
        app.post_json("/api/v1/auth/email/verify", &json!({ "token": token }))
            .await
            .status(),
        204
    );
    assert_eq!(
        json_of(app.me(&ada.access_token).await, 200).await["email_verified"],
        true
    );
    assert_eq!(
        app.post_json("/api/v1/auth/email/verify", &json!({ "token": token }))
            .await
            .status(),
        422
    );

    // On record: Ada asked for the link herself, then verified once (the refusals wrote
    // nothing).
    let mine = app
        .audit_records(&format!("?actor_id={}", ada.user_id))
        .await;
    let actions: Vec<&str> = mine.iter().map(|r| r["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        [
            "user.email_verified",
            "auth.link_mailed",
            "auth.login",
            "user.registered"
        ]
    );
    assert_eq!(
        mine[0]["target"],
        json!({ "type": "user", "id": ada.user_id })
    );
}

#[on_both_backends]
async fn asking_too_often_is_refused_per_address_and_per_client(app: TestApp) {
    app.logged_in("ada@example.com").await;
    // The counters' windows are whole minutes: start well inside one.
    let into_minute = time::OffsetDateTime::now_utc().second();
    if into_minute > 50 {
        tokio::time::sleep(std::time::Duration::from_secs(u64::from(61 - into_minute))).await;
    }
    for _ in 0..3 {
        assert_eq!(
            app.post_json(
                "/api/v1/auth/password/forgot",
                &json!({ "email": "ada@example.com" })
            )
            .await
            .status(),
            202
        );
    }
    let refused = app
        .post_json(
            "/api/v1/auth/password/forgot",
            &json!({ "email": "ada@example.com" }),
        )
        .await;
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get(header::RETRY_AFTER).is_some());
    // An unknown address is counted the same way: nothing tells them apart.
    for _ in 0..3 {
        assert_eq!(
            app.post_json(
                "/api/v1/auth/magic-link",
                &json!({ "email": "nobody@example.com" })
            )
            .await
            .status(),
            202
        );
    }
    assert_eq!(
        app.post_json(
            "/api/v1/auth/magic-link",
            &json!({ "email": "nobody@example.com" })
        )
        .await
        .status(),
        429
    );
    // Per client: ten in a window, whatever the addresses (six counted above).
    for i in 0..4 {
        assert_eq!(
            app.post_json(
                "/api/v1/auth/magic-link",
                &json!({ "email": format!("someone{i}@example.com") })
            )
            .await
            .status(),
            202
        );
    }
    assert_eq!(
        app.post_json(
            "/api/v1/auth/magic-link",
            &json!({ "email": "someone-else@example.com" })
        )
        .await
        .status(),
        429
    );
}

#[on_both_backends]
async fn the_pages_the_links_open_ask_before_spending_them(app: TestApp) {
    app.logged_in("ada@example.com").await;
    app.post_json(
        "/api/v1/auth/password/forgot",
        &json!({ "email": "ada@example.com" }),
    )
    .await;
    let token = app
        .mailed_token("ada@example.com", "/reset-password/")
        .await;
    let mut browser = Browser::new();
    // Opening the page (as a mail scanner would) spends nothing.
    let page = browser
        .get(&app.url(&format!("/reset-password/{token}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("<h1>Choose a new password</h1>")
            && page.contains("autocomplete=\"new-password\"")
    );
    let weak = browser
        .post_form(
            &app.url(&format!("/reset-password/{token}")),
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("new_password", "short"),
            ],
        )
        .await;
    assert_eq!(weak.status(), 422);
    let page = weak.text().await.unwrap();
    assert!(page.contains("role=\"alert\""), "{page}");
    let done = browser
        .post_form(
            &app.url(&format!("/reset-password/{token}")),
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("new_password", NEW_PASSWORD),
            ],
        )
        .await;
    assert_eq!(done.status(), 200);
    assert!(done
        .text()
        .await
        .unwrap()
        .contains("Your password was changed"));
    let spent = browser
        .post_form(
            &app.url(&format!("/reset-password/{token}")),
            &[
                ("csrf_token", &hidden(&page, "csrf_token")),
                ("new_password", "another new passphrase"),
            ],
        )
        .await;
    assert_eq!(spent.status(), 410);

    // The sign-in link's page signs the browser in.
    app.post_json(
        "/api/v1/auth/magic-link",
        &json!({ "email": "ada@example.com" }),
    )
    .await;
    let token = app.mailed_token("ada@example.com", "/magic-link/").await;
    let mut browser = Browser::new();
    let page = browser
        .get(&app.url(&format!("/magic-link/{token}")))
        .await
        .text()
        .await
        .unwrap();
    let signed_in = browser
        .post_form(
            &app.url(&format!("/magic-link/{token}")),
            &[("csrf_token", &hidden(&page, "csrf_token"))],
        )
        .await;
    assert_eq!(signed_in.status(), 303);
    assert_eq!(signed_in.headers()[header::LOCATION], "/login/done");
    assert_eq!(browser.get(&app.url("/login/done")).await.status(), 200);
    // A forged form spends nothing.
    app.post_json(
        "/api/v1/auth/magic-link",
        &json!({ "email": "ada@example.com" }),
    )
    .await;
    let token = app.mailed_token("ada@example.com", "/magic-link/").await;
    let forged = Browser::new()
        .post_form(
            &app.url(&format!("/magic-link/{token}")),
            &[("csrf_token", "made-up")],
        )
        .await;
    assert_eq!(forged.status(), 403);
    json_of(
        app.post_json("/api/v1/auth/magic-link/verify", &json!({ "token": token }))
            .await,
        200,
    )
    .await;
}
