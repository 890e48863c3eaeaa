//! A product behind Gatehouse, against the real `gatehouse` binary on both databases: the
//! example product service (examples/product-service, on gatehouse-verify) takes Gatehouse's
//! tokens, refuses forged ones, picks up a rotated key without a restart and takes Gatehouse's
//! own signed webhook deliveries but not tampered ones; and the snippets of docs/integrating.md (PyJWT, jose) verify a real token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

#[path = "support/product.rs"]
#[macro_use]
mod product;

use std::{path::Path, process::Command, time::Duration};

use actix_web::{test, App};
use gatehouse_delivery::test_receiver::TestReceiver;
use gatehouse_example_product::configure;
use gatehouse_verify::testing::TestKey;
use product::{bearer, unverified, Gatehouse, ISSUER};
use serde_json::{json, Value};

on_both_databases!(the_example_trusts_gatehouse_and_nothing_else);

async fn the_example_trusts_gatehouse_and_nothing_else(backend: &str) {
    // Gatehouse's deliveries go to an HTTPS receiver, which hands them to the example.
    let receiver = TestReceiver::start().await;
    let ca_file = receiver.ca_pem_path().to_str().unwrap().to_owned();
    let mut gatehouse = Gatehouse::start_with(
        backend,
        &[
            ("GATEHOUSE_WEBHOOK_CA_FILE", ca_file.as_str()),
            ("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true"),
            ("GATEHOUSE_WEBHOOK_TIMEOUT_SECS", "2"),
        ],
    )
    .await;
    let (_, personal) = gatehouse.register("ada@example.com").await;
    let projects = format!("/organizations/{personal}/projects");
    let token = gatehouse.access_token("ada@example.com", None).await;
    let team = gatehouse.create_team(&token, "Ada's").await;
    let (status, endpoint) = gatehouse
        .post_in(
            "/api/v1/webhooks/endpoints",
            Some(&token),
            Some(&team),
            json!({ "url": receiver.url("/webhooks/gatehouse"), "events": ["application.deleted"] }),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let state = gatehouse.example(endpoint["signing_secret"].as_str().unwrap());
    let app = test::init_service(App::new().configure(|app| configure(app, state))).await;

    // A token without an organization is verified, and refused for want of one.
    let (status, body) = call!(&app, bearer(false, &projects, &token));
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["detail"],
        "this needs a token scoped to an organization"
    );
    // Scoped to her personal organization, where she is the owner, it passes.
    let scoped = gatehouse
        .access_token("ada@example.com", Some(&personal))
        .await;
    let (status, body) = call!(&app, bearer(true, &projects, &scoped));
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["organization_id"], personal.as_str());

    // The same claims under the same kid, signed with another key.
    let header = unverified(&token, 0);
    let kid = header["kid"].as_str().unwrap();
    let forged = TestKey::generate(kid).sign(&unverified(&token, 1));
    let (status, body) = call!(&app, bearer(false, &projects, &forged));
    assert_eq!(status, 401, "{body}");
    let (status, _) = call!(&app, test::TestRequest::get().uri(&projects));
    assert_eq!(status, 401);

    // Gatehouse's own delivery (a ping of the endpoint) is taken; tampered, it is not.
    let ping = format!(
        "/api/v1/webhooks/endpoints/{}/test",
        endpoint["id"].as_str().unwrap()
    );
    let (status, pinged) = gatehouse
        .post_in(&ping, Some(&token), Some(&team), json!({}))
        .await;
    assert_eq!(status, 200, "{pinged}");
    let delivered = receiver.requests().pop().unwrap();
    let forward = |body: Vec<u8>| {
        let mut request = test::TestRequest::post().uri("/webhooks/gatehouse");
        for name in ["X-Service-Timestamp", "X-Service-Signature"] {
            request = request.insert_header((name, delivered.header(name).unwrap().to_owned()));
        }
        request.set_payload(body)
    };
    let (status, body) = call!(&app, forward(delivered.body.clone()));
    assert_eq!(status, 204, "{body}");
    let mut tampered = delivered.body.clone();
    tampered.push(b' ');
    let (status, refused) = call!(&app, forward(tampered));
    assert_eq!(status, 401);
    assert_eq!(refused["detail"], "the signature does not match");

    // A rotated key: the next sign-in's token names it, and the example, still running, fetches
    // it; the old key still verifies the tokens it signed.
    let new_kid = gatehouse.rotate_key();
    assert_ne!(new_kid, kid);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let rotated = gatehouse
        .access_token("ada@example.com", Some(&personal))
        .await;
    assert_eq!(unverified(&rotated, 0)["kid"], new_kid.as_str());
    for token in [&rotated, &scoped] {
        let (status, body) = call!(&app, bearer(false, &projects, token));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["role"], "owner");
    }
}

/// Runs a documented snippet (docs/examples) on a token; its exit status and what it printed.
fn snippet(
    program: &str,
    script: &Path,
    gatehouse: &Gatehouse,
    token: &str,
) -> (bool, Value, String) {
    let output = Command::new(program)
        .arg(script)
        .arg(token)
        .env("GATEHOUSE_URL", ISSUER)
        .env("GATEHOUSE_JWKS_URL", gatehouse.jwks_url())
        .output()
        .unwrap_or_else(|e| panic!("{program} is needed for this test: {e}"));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let printed = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.success(), printed, stderr)
}

#[actix_web::test]
async fn the_documented_snippets_verify_a_real_token() {
    let gatehouse = Gatehouse::start("sqlite").await;
    let (user, personal) = gatehouse.register("grace@example.com").await;
    let token = gatehouse
        .access_token("grace@example.com", Some(&personal))
        .await;
    let forged = TestKey::generate(unverified(&token, 0)["kid"].as_str().unwrap())
        .sign(&unverified(&token, 1));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let guide = std::fs::read_to_string(Path::new(root).join("docs/integrating.md")).unwrap();
    for quoted in ["verify_token.py", "verify-token.mjs"] {
        let file =
            std::fs::read_to_string(Path::new(root).join("docs/examples").join(quoted)).unwrap();
        assert!(
            guide.contains(&file),
            "docs/integrating.md quotes docs/examples/{quoted} as it is"
        );
    }

    // Python: PyJWT, from the project's virtual environment.
    let python = std::env::var("GATEHOUSE_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let script = Path::new(root).join("docs/examples/verify_token.py");
    let (verified, printed, stderr) = snippet(&python, &script, &gatehouse, &token);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "PyJWT is needed: run scripts/test, which installs scripts/test-requirements.txt into .venv, or pip install 'pyjwt[crypto]'\n{stderr}"
    );
    assert!(verified, "{stderr}");
    assert_eq!(printed["sub"], user.as_str());
    assert_eq!(printed["claims"]["aud"], "gatehouse");
    assert_eq!(printed["org_id"], personal.as_str());
    assert_eq!(printed["org_role"], "owner");
    assert_eq!(printed["can_read_members"], true);
    let (verified, _, stderr) = snippet(&python, &script, &gatehouse, &forged);
    assert!(!verified && stderr.contains("refused"), "{stderr}");

    // Node: jose, installed beside the browser tests' playwright-core. The snippet runs from a
    // folder of its own whose node_modules is theirs.
    let modules = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/node_modules");
    assert!(
        modules.join("jose").is_dir(),
        "jose is needed: npm ci --prefix crates/server/tests/browser (scripts/test runs it)"
    );
    let folder = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&modules, folder.path().join("node_modules")).unwrap();
    let script = folder.path().join("verify-token.mjs");
    std::fs::copy(
        Path::new(root).join("docs/examples/verify-token.mjs"),
        &script,
    )
    .unwrap();
    let (verified, printed, stderr) = snippet("node", &script, &gatehouse, &token);
    assert!(verified, "{stderr}");
    assert_eq!(printed["sub"], user.as_str());
    assert_eq!(printed["org_id"], personal.as_str());
    assert_eq!(printed["org_role"], "owner");
    assert_eq!(printed["can_read_members"], true);
    let (verified, _, stderr) = snippet("node", &script, &gatehouse, &forged);
    assert!(!verified && stderr.contains("refused"), "{stderr}");
}
