//! Register, log in, verify the token offline, refresh, log out; password change; profile.

use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, on_both_backends, python, TestApp, PASSWORD};

/// Verifies an access token the way a relying party would: against the published key set,
/// with a JWT library written by others (PyJWT), which checks the signature, `iss`, `aud`
/// (`gatehouse`), `exp` and `nbf`. Returns the claims.
pub(crate) async fn verify_offline(app: &TestApp, token: &str) -> Value {
    verify_offline_for(app, token, "gatehouse").await
}

/// [`verify_offline`] for a relying party of another audience: an application's product,
/// whose audience is its client id.
pub(crate) async fn verify_offline_for(app: &TestApp, token: &str, audience: &str) -> Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/verify_jwt.py");
    let output = tokio::process::Command::new(python())
        .args([script, app.base.as_str(), token, audience])
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!("python3 is needed for this test (scripts/test sets it up): {e}")
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "PyJWT is needed: run scripts/test, which installs it, or pip install 'PyJWT[crypto]'\n{stderr}"
    );
    assert!(
        output.status.success(),
        "PyJWT refused the token:\n{stderr}"
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(seen["header"]["alg"], "RS256");
    let kid = seen["header"]["kid"]
        .as_str()
        .expect("access tokens carry a kid");
    let jwks = json_of(
        app.client
            .get(app.url("/.well-known/jwks.json"))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    let jwk = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == kid)
        .expect("the token's kid is in the key set");
    assert_eq!(jwk["kty"], "RSA");
    assert_eq!(jwk["alg"], "RS256");
    assert_eq!(jwk["use"], "sig");
    seen["claims"].clone()
}

#[on_both_backends]
async fn the_whole_account_life(app: TestApp) {
    let registered = json_of(
        app.register(" Ada@Example.COM ", PASSWORD, "Ada Lovelace")
            .await,
        201,
    )
    .await;
    assert_eq!(registered["email"], "ada@example.com");
    let user_id = registered["user_id"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&user_id).is_ok());
    assert!(uuid::Uuid::parse_str(registered["organization_id"].as_str().unwrap()).is_ok());

    let tokens = json_of(app.login("ADA@example.com", PASSWORD).await, 200).await;
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();

    let claims = verify_offline(&app, access).await;
    assert_eq!(claims["sub"], user_id.as_str());
    assert_eq!(claims["email"], "ada@example.com");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        3600
    );
    for claim in ["nbf", "jti", "sid"] {
        assert!(!claims[claim].is_null(), "{claim} missing");
    }
    assert_eq!(claims["amr"], json!(["pwd"]), "signed in with a password");

    let me = json_of(app.me(access).await, 200).await;
    assert_eq!(me["id"], user_id.as_str());
    assert_eq!(me["full_name"], "Ada Lovelace");

    let refreshed = json_of(app.refresh(refresh).await, 200).await;
    assert!(refreshed.get("refresh_token").is_none());
    let new_access = refreshed["access_token"].as_str().unwrap();
    let refreshed_claims = verify_offline(&app, new_access).await;
    assert_eq!(refreshed_claims["sid"], claims["sid"]);
    assert_eq!(refreshed_claims["amr"], json!(["pwd"]));

    assert_eq!(app.logout(new_access).await.status(), 204);
    // Both tokens of the session stop working at once, and the first access token too.
    detail_of(app.me(access).await, 401).await;
    detail_of(app.me(new_access).await, 401).await;
    detail_of(app.refresh(refresh).await, 401).await;
}

#[on_both_backends]
async fn an_email_registers_once_whatever_its_case(app: TestApp) {
    json_of(
        app.register("grace@example.com", PASSWORD, "Grace").await,
        201,
    )
    .await;
    let detail = detail_of(
        app.register("GRACE@example.com", PASSWORD, "Grace").await,
        409,
    )
    .await;
    assert!(detail.contains("already exists"), "{detail}");
}

#[on_both_backends]
async fn a_wrong_password_and_an_unknown_email_look_the_same(app: TestApp) {
    json_of(
        app.register("alan@example.com", PASSWORD, "Alan").await,
        201,
    )
    .await;
    let wrong = detail_of(app.login("alan@example.com", "not the password").await, 401).await;
    let unknown = detail_of(app.login("nobody@example.com", PASSWORD).await, 401).await;
    assert_eq!(wrong, unknown);
}

#[on_both_backends]
async fn a_password_change_ends_the_other_sessions(app: TestApp) {
    let user = app.logged_in("barbara@example.com").await;
    let other = json_of(app.login(&user.email, PASSWORD).await, 200).await;
    let other_access = other["access_token"].as_str().unwrap();

    let locs = crate::helpers::locs_of(
        app.change_password(&user.access_token, "wrong current", "a brand new secret")
            .await,
    )
    .await;
    assert_eq!(
        locs,
        vec![crate::helpers::loc(&["body", "current_password"])]
    );

    let response = app
        .change_password(&user.access_token, PASSWORD, "a brand new secret")
        .await;
    assert_eq!(response.status(), 204);
    json_of(app.me(&user.access_token).await, 200).await;
    detail_of(app.me(other_access).await, 401).await;
    detail_of(
        app.refresh(other["refresh_token"].as_str().unwrap()).await,
        401,
    )
    .await;
    detail_of(app.login(&user.email, PASSWORD).await, 401).await;
    json_of(app.login(&user.email, "a brand new secret").await, 200).await;
}

#[on_both_backends]
async fn the_profile_changes_only_what_is_sent(app: TestApp) {
    let user = app.logged_in("edsger@example.com").await;
    let patch = |body: Value| {
        app.client
            .patch(app.url("/api/v1/users/me"))
            .bearer_auth(&user.access_token)
            .json(&body)
            .send()
    };
    let changed = json_of(
        patch(json!({ "full_name": "  Edsger Dijkstra " }))
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(changed["full_name"], "Edsger Dijkstra");
    assert_eq!(changed["email"], "edsger@example.com");
    let unchanged = json_of(patch(json!({})).await.unwrap(), 200).await;
    assert_eq!(unchanged["full_name"], "Edsger Dijkstra");
    let locs = crate::helpers::locs_of(patch(json!({ "full_name": "" })).await.unwrap()).await;
    assert_eq!(locs, vec![crate::helpers::loc(&["body", "full_name"])]);
}
