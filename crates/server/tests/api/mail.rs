//! Mail through the outbox, as an invitee and an IT admin meet it: an invitation is answered at
//! once while the mail relay refuses, its mail waits in the outbox sealed (no link readable in
//! the database), and is sent when its retry comes and the relay takes it; the link then works.
//! The relay is a real SMTP server (Python's `aiosmtpd`, `gatehouse_testkit::smtp`) that
//! refuses its first message with `451`, as a relay that is busy or greylisting does.

use std::time::Duration;

use gatehouse_testkit::smtp::SmtpServer;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{json_of, Backend, Options, TestApp};

/// Waits until `taken` holds.
async fn until(what: &str, mut taken: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while !taken() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_refused_mail_waits_sealed_and_is_sent_at_its_retry(backend: Backend) {
    let relay = SmtpServer::refusing(1).await;
    let app = TestApp::spawn_with(
        backend,
        Options {
            env: vec![("GATEHOUSE_SMTP_URL", relay.url())],
            ..Options::default()
        },
    )
    .await;
    let ada = app.logged_in("ada@example.com").await;
    let team = app.create_team(&ada.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap();

    // The invitation is answered at once; the relay refuses its mail.
    json_of(
        app.invite(&ada.access_token, org, "grace@example.com", "member")
            .await,
        201,
    )
    .await;
    until("the relay was never asked", || relay.refused() == 1).await;

    // Meanwhile the mail waits in the outbox, sealed: no link is readable in the database.
    let rows = app.outbox_rows().await;
    assert_eq!(rows.len(), 1, "one mail queued");
    let sealed = String::from_utf8_lossy(&rows[0]).into_owned();
    for readable in ["/invitations/", "ghi_", "grace@example.com", "Acme"] {
        assert!(
            !sealed.contains(readable),
            "{readable} readable in the outbox"
        );
    }

    // Its retry comes (ten seconds later: moved into the past here), and the relay takes it.
    app.rewind("mail_outbox", "next_attempt_at", time::Duration::hours(1))
        .await;
    until("the relay never took the mail", || {
        relay.received().len() == 1
    })
    .await;
    let mail = relay.received()[0]["body"].as_str().unwrap().to_owned();
    assert_eq!(
        relay.received()[0]["rcpt_tos"],
        json!(["grace@example.com"])
    );
    let start = mail.find("/invitations/").expect("a link") + "/invitations/".len();
    let token: String = mail[start..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    assert!(
        !sealed.contains(&token),
        "the token was never readable at rest"
    );
    app.mail_drained().await;
    assert!(
        app.outbox_rows().await.is_empty(),
        "a sent mail is forgotten"
    );

    // The link the invitee got works.
    let grace = app.logged_in("grace@example.com").await;
    let joined = json_of(
        app.send_as(
            Method::POST,
            &grace.access_token,
            "/api/v1/invitations/accept",
            Some(json!({ "token": token })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(joined["status"], "active");
    assert_eq!(joined["user_id"], grace.user_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_mail_waits_sealed_and_is_sent_at_its_retry_sqlite() {
    a_refused_mail_waits_sealed_and_is_sent_at_its_retry(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_mail_waits_sealed_and_is_sent_at_its_retry_postgres() {
    a_refused_mail_waits_sealed_and_is_sent_at_its_retry(Backend::Postgres).await;
}
