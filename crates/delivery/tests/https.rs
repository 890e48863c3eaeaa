#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The HTTPS sender against a real HTTPS receiver (rustls + hyper on loopback, with a CA made
//! for the test).

use std::{
    collections::BTreeSet,
    path::PathBuf,
    time::{Duration, Instant},
};

use gatehouse_delivery::{test_receiver::TestReceiver, HttpsSender, SenderConfig, SenderError};
use gatehouse_domain::{
    model::WebhookUrl,
    ports::{WebhookRequest, WebhookResponse, WebhookSender},
};

const WAIT: Duration = Duration::from_secs(5);

/// A sender that trusts the receiver's CA and may reach loopback.
fn sender_for(receiver: &TestReceiver) -> HttpsSender {
    sender_with(receiver, |_| {})
}

fn sender_with(receiver: &TestReceiver, change: impl FnOnce(&mut SenderConfig)) -> HttpsSender {
    let mut config = SenderConfig {
        ca_file: Some(receiver.ca_pem_path().to_owned()),
        allow_private_targets: true,
        ..SenderConfig::default()
    };
    change(&mut config);
    HttpsSender::new(config).unwrap()
}

fn request(url: &str, body: &str) -> WebhookRequest {
    WebhookRequest {
        url: WebhookUrl::parse(url).unwrap(),
        headers: vec![("Content-Type", "application/json".to_owned())],
        body: body.as_bytes().to_vec(),
    }
}

fn answered(response: WebhookResponse) -> (u16, String, u64) {
    match response {
        WebhookResponse::Answered {
            status,
            body,
            duration_ms,
        } => (status, body, duration_ms),
        WebhookResponse::Failed { error, .. } => panic!("expected an answer, got: {error}"),
    }
}

fn failed(response: WebhookResponse) -> (String, u64) {
    match response {
        WebhookResponse::Failed { error, duration_ms } => (error, duration_ms),
        WebhookResponse::Answered { status, .. } => panic!("expected a failure, got {status}"),
    }
}

#[tokio::test]
async fn headers_and_body_arrive_exactly() {
    let receiver = TestReceiver::start().await;
    receiver.respond_with_body(200, "thanks");
    let sender = sender_for(&receiver);
    let body = r#"{"id":"evt_1","type":"user.created","data":{"name":"Zoë"}}"#;

    let response = sender
        .send(WebhookRequest {
            url: WebhookUrl::parse(&receiver.url("/hooks/in?source=gatehouse")).unwrap(),
            headers: vec![
                ("Content-Type", "application/json".to_owned()),
                ("X-Service-Event", "user.created".to_owned()),
                ("X-Service-Delivery", "dlv_0123456789abcdef".to_owned()),
                ("X-Service-Timestamp", "1700000000".to_owned()),
                ("X-Service-Signature", "sha256=abc123".to_owned()),
            ],
            body: body.as_bytes().to_vec(),
        })
        .await;

    let (status, answer, _) = answered(response);
    assert_eq!((status, answer.as_str()), (200, "thanks"));
    let received = receiver.wait_for(1, WAIT).await;
    assert_eq!(received.len(), 1);
    let got = &received[0];
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, "/hooks/in?source=gatehouse");
    assert_eq!(got.body, body.as_bytes());
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.header("user-agent"), Some("Service-Webhooks/1.0"));
    let length = body.len().to_string();
    assert_eq!(got.header("content-length"), Some(length.as_str()));
    assert_eq!(got.header("x-service-event"), Some("user.created"));
    assert_eq!(
        got.header("x-service-delivery"),
        Some("dlv_0123456789abcdef")
    );
    assert_eq!(got.header("x-service-timestamp"), Some("1700000000"));
    assert_eq!(got.header("x-service-signature"), Some("sha256=abc123"));
    let host = format!("127.0.0.1:{}", receiver.port());
    assert_eq!(got.header("host"), Some(host.as_str()));
    for name in [
        "content-type",
        "user-agent",
        "content-length",
        "x-service-signature",
    ] {
        assert_eq!(got.header_values(name).len(), 1, "one {name}");
    }
    assert_eq!(got.header("transfer-encoding"), None);
}

#[tokio::test]
async fn the_configured_user_agent_is_sent_unless_the_request_has_one() {
    let receiver = TestReceiver::start().await;
    let sender = sender_with(&receiver, |c| c.user_agent = "Gatehouse-Test/2".to_owned());
    answered(sender.send(request(&receiver.url("/a"), "{}")).await);
    let mut own = request(&receiver.url("/b"), "{}");
    own.headers.push(("User-Agent", "Custom/3".to_owned()));
    answered(sender.send(own).await);

    let received = receiver.wait_for(2, WAIT).await;
    assert_eq!(
        received[0].header_values("user-agent"),
        ["Gatehouse-Test/2"]
    );
    assert_eq!(received[1].header_values("user-agent"), ["Custom/3"]);
}

#[tokio::test]
async fn every_status_is_an_answer() {
    let receiver = TestReceiver::start().await;
    let sender = sender_for(&receiver);
    for status in [200, 201, 202, 400, 401, 404, 410, 429, 500, 502, 503] {
        receiver.respond_with_body(status, format!("answer {status}"));
        let (got, body, _) = answered(sender.send(request(&receiver.url("/"), "{}")).await);
        assert_eq!((got, body), (status, format!("answer {status}")));
    }
    receiver.respond_with(204);
    let (got, body, _) = answered(sender.send(request(&receiver.url("/"), "{}")).await);
    assert_eq!((got, body.as_str()), (204, ""));
    assert_eq!(receiver.requests().len(), 12);
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let receiver = TestReceiver::start().await;
    let sender = sender_for(&receiver);
    for status in [301, 302, 303, 307, 308] {
        receiver.redirect_to(status, &receiver.url("/elsewhere"));
        let (got, _, _) = answered(sender.send(request(&receiver.url("/hook"), "{}")).await);
        assert_eq!(got, status);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let paths: Vec<String> = receiver.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths, vec!["/hook"; 5]);
}

#[tokio::test]
async fn a_slow_receiver_times_out_at_the_configured_limit() {
    let receiver = TestReceiver::start().await;
    receiver.delay(Duration::from_secs(3));
    let sender = sender_with(&receiver, |c| c.timeout = Duration::from_millis(300));

    let start = Instant::now();
    let (error, duration_ms) = failed(sender.send(request(&receiver.url("/slow"), "{}")).await);
    let elapsed = start.elapsed();

    assert_eq!(error, "timed out after 300 ms");
    assert!((300..1000).contains(&duration_ms), "{duration_ms} ms");
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    // It did get the request: the time went in waiting for the answer.
    assert_eq!(receiver.requests().len(), 1);

    // The next attempt, answered at once, is unaffected.
    receiver.delay(Duration::ZERO);
    answered(sender.send(request(&receiver.url("/fast"), "{}")).await);
}

#[tokio::test]
async fn the_duration_covers_the_whole_exchange() {
    let receiver = TestReceiver::start().await;
    receiver.delay(Duration::from_millis(250));
    let sender = sender_for(&receiver);
    let (_, _, duration_ms) = answered(sender.send(request(&receiver.url("/"), "{}")).await);
    assert!((250..5000).contains(&duration_ms), "{duration_ms} ms");
}

#[tokio::test]
async fn private_targets_are_refused_before_connecting() {
    let receiver = TestReceiver::start().await;
    let port = receiver.port();
    // Trusts the receiver's CA, so only the address rule can stop it.
    let sender = HttpsSender::new(SenderConfig {
        ca_file: Some(receiver.ca_pem_path().to_owned()),
        ..SenderConfig::default()
    })
    .unwrap();

    let refused = |ip: &str| format!("target address {ip} is not allowed (private or loopback)");
    for (url, ip) in [
        (format!("https://127.0.0.1:{port}/hook"), "127.0.0.1"),
        // Other spellings of loopback, normalised before the check.
        (format!("https://0x7f.1:{port}/hook"), "127.0.0.1"),
        (format!("https://2130706433:{port}/hook"), "127.0.0.1"),
        (format!("https://[::1]:{port}/hook"), "::1"),
        (
            format!("https://[::ffff:127.0.0.1]:{port}/hook"),
            "::ffff:127.0.0.1",
        ),
        // Never reached, so never slow: refused before any connection attempt.
        ("https://10.0.0.1/hook".to_owned(), "10.0.0.1"),
        (
            "https://169.254.169.254/latest/meta-data".to_owned(),
            "169.254.169.254",
        ),
        ("https://192.168.1.1:8443/".to_owned(), "192.168.1.1"),
        ("https://100.64.0.1/".to_owned(), "100.64.0.1"),
        ("https://[fd00::1]/".to_owned(), "fd00::1"),
        ("https://[fe80::1]/".to_owned(), "fe80::1"),
    ] {
        let start = Instant::now();
        let (error, _) = failed(sender.send(request(&url, "{}")).await);
        assert_eq!(error, refused(ip), "{url}");
        assert!(start.elapsed() < Duration::from_secs(1), "{url} was slow");
    }

    // A name that resolves to loopback: checked on the resolved addresses.
    let (error, _) = failed(
        sender
            .send(request(&format!("https://localhost:{port}/hook"), "{}"))
            .await,
    );
    assert!(
        error == refused("127.0.0.1") || error == refused("::1"),
        "{error}"
    );

    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(receiver.connections(), 0, "no connection may reach it");
    assert!(receiver.requests().is_empty());
}

#[tokio::test]
async fn allowing_private_targets_reaches_localhost_by_name() {
    let receiver = TestReceiver::start().await;
    let sender = sender_for(&receiver);
    let url = format!("https://localhost:{}/by-name", receiver.port());
    let (status, _, _) = answered(sender.send(request(&url, "{}")).await);
    assert_eq!(status, 200);
    assert_eq!(receiver.requests()[0].path, "/by-name");
}

#[tokio::test]
async fn an_untrusted_certificate_fails_the_handshake() {
    let receiver = TestReceiver::start().await;
    // Only the compiled-in public roots: the receiver's CA is unknown.
    let sender = HttpsSender::new(SenderConfig {
        allow_private_targets: true,
        ..SenderConfig::default()
    })
    .unwrap();

    let (error, _) = failed(sender.send(request(&receiver.url("/"), "{}")).await);
    assert!(error.starts_with("connection failed: "), "{error}");
    assert!(error.contains("invalid peer certificate"), "{error}");
    assert!(error.contains("UnknownIssuer"), "{error}");
    assert!(receiver.requests().is_empty());
}

#[tokio::test]
async fn long_answers_are_cut_at_the_cap() {
    let receiver = TestReceiver::start().await;
    receiver.respond_with_body(500, "x".repeat(100_000));
    let sender = sender_for(&receiver);
    let (status, body, _) = answered(sender.send(request(&receiver.url("/"), "{}")).await);
    assert_eq!((status, body.len()), (500, 4096));
    assert!(body.bytes().all(|b| b == b'x'));

    let small = sender_with(&receiver, |c| c.max_response_bytes = 10);
    receiver.respond_with_body(200, "0123456789abcdef");
    let (_, body, _) = answered(small.send(request(&receiver.url("/"), "{}")).await);
    assert_eq!(body, "0123456789");

    // A character cut in two by the cap is dropped, not garbled.
    receiver.respond_with_body(200, "123456789é");
    let (_, body, _) = answered(small.send(request(&receiver.url("/"), "{}")).await);
    assert_eq!(body, "123456789");

    // Invalid UTF-8 is decoded lossily.
    receiver.respond_with_body(200, b"ok \xff\xfe".to_vec());
    let (_, body, _) = answered(small.send(request(&receiver.url("/"), "{}")).await);
    assert_eq!(body, "ok \u{fffd}\u{fffd}");

    let nothing = sender_with(&receiver, |c| c.max_response_bytes = 0);
    let (status, body, _) = answered(nothing.send(request(&receiver.url("/"), "{}")).await);
    assert_eq!((status, body.as_str()), (200, ""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_all_arrive_over_pooled_connections() {
    let receiver = TestReceiver::start().await;
    receiver.respond_with_body(202, "queued");
    let sender = sender_for(&receiver);

    let mut sends = tokio::task::JoinSet::new();
    for i in 0..20 {
        let sender = sender.clone();
        let url = receiver.url(&format!("/hook/{i}"));
        sends.spawn(async move { sender.send(request(&url, &format!("{{\"n\":{i}}}"))).await });
    }
    while let Some(response) = sends.join_next().await {
        let (status, body, _) = answered(response.unwrap());
        assert_eq!((status, body.as_str()), (202, "queued"));
    }
    let received = receiver.wait_for(20, WAIT).await;
    let paths: BTreeSet<String> = received.iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, (0..20).map(|i| format!("/hook/{i}")).collect());
    for r in &received {
        let n = r.path.trim_start_matches("/hook/");
        assert_eq!(r.body_text(), format!("{{\"n\":{n}}}"));
    }
    let opened = receiver.connections();
    assert!((1..=20).contains(&opened), "{opened} connections");

    // One after another, the kept-alive connections are reused: no new one is opened.
    for i in 0..10 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let url = receiver.url(&format!("/again/{i}"));
        answered(sender.send(request(&url, "{}")).await);
    }
    assert_eq!(
        receiver.connections(),
        opened,
        "pooled connections are reused"
    );
}

#[tokio::test]
async fn sequential_sends_share_one_connection() {
    let receiver = TestReceiver::start().await;
    let sender = sender_for(&receiver);
    for _ in 0..5 {
        answered(sender.send(request(&receiver.url("/"), "{}")).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let connections: Vec<usize> = receiver.requests().iter().map(|r| r.connection).collect();
    assert_eq!(connections, [1, 1, 1, 1, 1]);
    assert_eq!(receiver.connections(), 1);
}

#[test]
fn a_missing_ca_file_fails_construction() {
    let path = PathBuf::from("/nonexistent/gatehouse/ca.pem");
    let error = HttpsSender::new(SenderConfig {
        ca_file: Some(path.clone()),
        ..SenderConfig::default()
    })
    .unwrap_err();
    assert!(matches!(&error, SenderError::CaFile { path: p, .. } if *p == path));
    let message = error.to_string();
    assert!(
        message.contains("/nonexistent/gatehouse/ca.pem"),
        "{message}"
    );
    assert!(message.contains("No such file"), "{message}");
}

#[test]
fn a_ca_file_without_certificates_fails_construction() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let error = HttpsSender::new(SenderConfig {
        ca_file: Some(empty.clone()),
        ..SenderConfig::default()
    })
    .unwrap_err();
    let message = error.to_string();
    assert!(message.contains(&*empty.to_string_lossy()), "{message}");
    assert!(message.contains("no PEM certificate"), "{message}");

    let garbage = dir.path().join("garbage.pem");
    std::fs::write(
        &garbage,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let error = HttpsSender::new(SenderConfig {
        ca_file: Some(garbage.clone()),
        ..SenderConfig::default()
    })
    .unwrap_err();
    assert!(
        error.to_string().contains(&*garbage.to_string_lossy()),
        "{error}"
    );
}

#[tokio::test]
async fn the_debug_output_shows_the_config() {
    let receiver = TestReceiver::start().await;
    let sender = sender_for(&receiver);
    let debug = format!("{sender:?}");
    assert!(
        debug.starts_with("HttpsSender { config: SenderConfig {"),
        "{debug}"
    );
    assert!(debug.contains("timeout: 10s"), "{debug}");
    assert!(debug.contains("Service-Webhooks/1.0"), "{debug}");
    assert!(debug.contains("allow_private_targets: true"), "{debug}");
    assert!(!debug.contains("BEGIN CERTIFICATE"), "{debug}");
}
