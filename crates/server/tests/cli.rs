//! The `gatehouse` binary as an operator runs it: serve, migrate, openapi, keys rotate; and
//! what its logs never contain.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

use serde_json::{json, Value};
use served::{gatehouse, Served};

async fn post(client: &reqwest::Client, url: String, body: Value) -> Value {
    let response = client.post(url).json(&body).send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_logs_never_contain_a_password_or_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&dir);
    let client = reqwest::Client::new();
    let password = "hunter2-very-secret";
    post(
        &client,
        format!("{}/api/v1/auth/register", served.base),
        json!({ "email": "log@example.com", "password": password, "full_name": "Log" }),
    )
    .await;
    let tokens = post(
        &client,
        format!("{}/api/v1/auth/login", served.base),
        json!({ "email": "log@example.com", "password": password }),
    )
    .await;
    let access = tokens["access_token"].as_str().unwrap();
    let refresh = tokens["refresh_token"].as_str().unwrap();
    // A failed login logs too; the attempted password must not show.
    let failed = client
        .post(format!("{}/api/v1/auth/login", served.base))
        .json(&json!({ "email": "log@example.com", "password": "wrong-guess-secret" }))
        .send()
        .await
        .unwrap();
    assert_eq!(failed.status(), 401);
    let logs = served.stop().join("\n");
    assert!(logs.contains("request finished"), "no access log: {logs}");
    for secret in [password, "wrong-guess-secret", access, refresh] {
        assert!(!logs.contains(secret), "a secret leaked into the logs");
    }
    let key_file = std::fs::read_to_string(dir.path().join("gatehouse.db.key")).unwrap();
    assert!(!logs.contains(key_file.trim()));
}

#[tokio::test]
async fn rotated_keys_sign_new_tokens_and_old_tokens_still_verify() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&dir);
    let client = reqwest::Client::new();
    post(
        &client,
        format!("{}/api/v1/auth/register", served.base),
        json!({ "email": "rot@example.com", "password": "rotate me please", "full_name": "Rot" }),
    )
    .await;
    let before = post(
        &client,
        format!("{}/api/v1/auth/login", served.base),
        json!({ "email": "rot@example.com", "password": "rotate me please" }),
    )
    .await;
    served.stop();

    let output = gatehouse(&dir).args(["keys", "rotate"]).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let new_kid = stdout
        .trim()
        .strip_prefix("new signing key: ")
        .unwrap()
        .to_owned();

    let served = Served::start(&dir);
    let jwks: Value = client
        .get(format!("{}/.well-known/jwks.json", served.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kids: Vec<&str> = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kid"].as_str().unwrap())
        .collect();
    assert_eq!(kids.len(), 2, "{jwks}");
    assert!(kids.contains(&new_kid.as_str()));

    let old_access = before["access_token"].as_str().unwrap();
    let me = client
        .get(format!("{}/api/v1/users/me", served.base))
        .bearer_auth(old_access)
        .send()
        .await
        .unwrap();
    let status = me.status();
    assert_eq!(status, 200, "{}", me.text().await.unwrap());
    let after = post(
        &client,
        format!("{}/api/v1/auth/login", served.base),
        json!({ "email": "rot@example.com", "password": "rotate me please" }),
    )
    .await;
    assert_eq!(kid_of(after["access_token"].as_str().unwrap()), new_kid);
    served.stop();
}

/// The `kid` in a JWT's header (read, not verified: the API tests verify tokens with PyJWT).
fn kid_of(token: &str) -> String {
    use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
    let header = token.split('.').next().unwrap();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).unwrap()).unwrap();
    header["kid"].as_str().unwrap().to_owned()
}

#[test]
fn openapi_prints_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let output = gatehouse(&dir).arg("openapi").output().unwrap();
    assert!(output.status.success());
    let document: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(document["paths"]["/api/v1/auth/login"].is_object());
}

#[test]
fn migrate_prepares_a_fresh_database_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..2 {
        let output = gatehouse(&dir).arg("migrate").output().unwrap();
        assert!(output.status.success(), "{output:?}");
    }
    assert!(dir.path().join("gatehouse.db").exists());
}

#[test]
fn a_bad_setting_is_named_and_the_exit_code_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let output = gatehouse(&dir)
        .env("GATEHOUSE_BIND", "not-an-address")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("GATEHOUSE_BIND"));
    let output = gatehouse(&dir)
        .env("GATEHOUSE_DATABASE_URL", "postgres://127.0.0.1:1/none")
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("GATEHOUSE_SECRET_KEY"));
}

#[tokio::test]
async fn set_plan_moves_an_organization_to_another_plan() {
    let dir = tempfile::tempdir().unwrap();
    let served = Served::start(&dir);
    let client = reqwest::Client::new();
    post(
        &client,
        format!("{}/api/v1/auth/register", served.base),
        json!({ "email": "plan@example.com", "password": "plans are sold elsewhere", "full_name": "Plan" }),
    )
    .await;
    let tokens = post(
        &client,
        format!("{}/api/v1/auth/login", served.base),
        json!({ "email": "plan@example.com", "password": "plans are sold elsewhere" }),
    )
    .await;
    let access = tokens["access_token"].as_str().unwrap();
    let team: Value = client
        .post(format!("{}/api/v1/organizations", served.base))
        .bearer_auth(access)
        .json(&json!({ "name": "Upgraders" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = team["id"].as_str().unwrap();

    let output = gatehouse(&dir)
        .args(["orgs", "set-plan", id, "business"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("business"));
    let detail: Value = client
        .get(format!("{}/api/v1/organizations/{id}", served.base))
        .bearer_auth(access)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["plan"], "business");
    // The business budget now sizes requests about this organization.
    let response = client
        .get(format!("{}/api/v1/organizations/{id}", served.base))
        .bearer_auth(access)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-ratelimit-limit"], "1000");

    let bad_plan = gatehouse(&dir)
        .args(["orgs", "set-plan", id, "platinum"])
        .output()
        .unwrap();
    assert!(!bad_plan.status.success());
    assert!(String::from_utf8_lossy(&bad_plan.stderr).contains("platinum"));
    let unknown = gatehouse(&dir)
        .args(["orgs", "set-plan", &uuid::Uuid::now_v7().to_string(), "pro"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("not found"));
    served.stop();
}
