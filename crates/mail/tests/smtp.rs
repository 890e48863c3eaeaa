//! The SMTP mailer against a real SMTP server on loopback: Python's `aiosmtpd`, run by a small
//! inline script that stores every message it receives, its envelope and the message as
//! Python's `email` package parses it (an independent parser of what Gatehouse sends).
//!
//! Needs `python3` with `aiosmtpd` (`pip install aiosmtpd`); the interpreter can be changed
//! with `GATEHOUSE_TEST_PYTHON`. These tests fail, rather than skip, when it is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use gatehouse_domain::model::Email;
use gatehouse_domain::ports::{Mail, Mailer};
use gatehouse_mail::SmtpMailer;
use gatehouse_testkit::smtp::SmtpServer;

const FROM: &str = "Gatehouse <no-reply@gatehouse.test>";

/// The decoded body with LF line ends and without trailing white space: lettre always ends the
/// DATA with CRLF.CRLF, so a body that ends with a line end arrives with one empty line more.
fn body_text(message: &serde_json::Value) -> String {
    message["body"]
        .as_str()
        .unwrap()
        .replace("\r\n", "\n")
        .trim_end()
        .to_owned()
}

fn mail(to: &str, subject: &str, text: &str) -> Mail {
    Mail::new(
        Email::parse(to).unwrap(),
        subject.to_owned(),
        text.to_owned(),
    )
}

#[tokio::test]
async fn the_server_receives_the_mail() {
    let server = SmtpServer::start().await;
    let mailer = SmtpMailer::from_url(&server.url(), FROM).unwrap();
    let link = "https://gatehouse.test/invitations/accept?token=ghi_0123456789abcdef";
    // A line that starts with a dot must survive SMTP's dot-stuffing.
    let text = format!(
        "Hallo Zoë,\n\ndu wurdest zu „Straße & Söhne“ eingeladen:\n{link}\n.\n.gatehouse\n"
    );

    mailer
        .send(mail("Zoe@Example.com", "Einladung für Zoë", &text))
        .await
        .expect("sending over SMTP failed");

    let received = server.received();
    assert_eq!(received.len(), 1, "{received:#?}");
    let message = &received[0];
    assert_eq!(message["mail_from"], "no-reply@gatehouse.test");
    assert_eq!(message["rcpt_tos"], serde_json::json!(["zoe@example.com"]));
    let headers = &message["headers"];
    assert_eq!(headers["to"], "zoe@example.com");
    assert_eq!(headers["from"], "Gatehouse <no-reply@gatehouse.test>");
    assert_eq!(headers["subject"], "Einladung für Zoë");
    assert!(headers["date"].as_str().is_some(), "{message:#}");
    let message_id = headers["message-id"].as_str().unwrap();
    assert!(
        message_id.starts_with('<') && message_id.ends_with("@gatehouse.test>"),
        "{message_id}"
    );
    assert_eq!(message["content_type"], "text/plain");
    assert_eq!(message["charset"], "utf-8");
    assert_eq!(body_text(message), text.trim_end());
    // The link survives transfer encoding intact, so it can be clicked.
    assert!(message["raw"].as_str().unwrap().is_ascii(), "{message:#}");
}

#[tokio::test]
async fn one_mailer_sends_many_mails_in_turn_and_at_once() {
    let server = SmtpServer::start().await;
    let mailer = SmtpMailer::from_url(&server.url(), FROM).unwrap();

    for n in 0..3 {
        mailer
            .send(mail(
                &format!("user{n}@example.com"),
                &format!("mail {n}"),
                &format!("body {n}\n"),
            ))
            .await
            .expect("sending over SMTP failed");
    }
    // Concurrent sends too.
    let sends = (3..6).map(|n| {
        let mailer = mailer.clone();
        tokio::spawn(async move {
            mailer
                .send(mail(
                    &format!("user{n}@example.com"),
                    &format!("mail {n}"),
                    &format!("body {n}\n"),
                ))
                .await
        })
    });
    for send in futures_join(sends).await {
        send.expect("sending over SMTP failed");
    }

    let mut subjects: Vec<String> = server
        .received()
        .iter()
        .map(|message| {
            let n = message["headers"]["subject"]
                .as_str()
                .unwrap()
                .strip_prefix("mail ")
                .unwrap()
                .to_owned();
            assert_eq!(
                message["rcpt_tos"],
                serde_json::json!([format!("user{n}@example.com")])
            );
            assert_eq!(body_text(message), format!("body {n}"));
            n
        })
        .collect();
    subjects.sort();
    assert_eq!(subjects, ["0", "1", "2", "3", "4", "5"]);
}

/// Awaits spawned sends in order.
async fn futures_join<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test]
async fn a_server_that_is_gone_fails_the_send() {
    let server = SmtpServer::start().await;
    let url = server.url();
    drop(server);
    // Give the killed server a moment to release its port.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mailer = SmtpMailer::from_url(&url, FROM).unwrap();
    let sent = tokio::time::timeout(
        Duration::from_secs(30),
        mailer.send(mail("zoe@example.com", "lost", "text")),
    )
    .await
    .expect("a refused connection must fail quickly, not hang");
    // The cause is the refused connection, not anything about the mail.
    let error = sent.unwrap_err();
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    let mut refused = false;
    while let Some(current) = cause {
        refused |= current
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
        cause = current.source();
    }
    assert!(refused, "{error:?}");
}
