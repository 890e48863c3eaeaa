//! What one client may cost the server, tried over raw sockets against the `gatehouse` binary on
//! both databases: bodies that never arrive, bodies sent where none is read, more connections
//! than an address may hold, paths meant to fill the log, and the open-file limit at start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/served.rs"]
mod served;

use std::time::Duration;

use gatehouse_test_macros::on_both_backends;
use serde_json::Value;
use served::{gatehouse, Database, Served};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// A served binary with these settings on `database`.
async fn serve(
    database: Database,
    settings: &[(&str, &str)],
) -> (Served, Database, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = gatehouse(&dir);
    command
        .env("GATEHOUSE_DATABASE_URL", database.url(&dir))
        .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
        .env("GATEHOUSE_LOG", "info");
    for (name, value) in settings {
        command.env(name, value);
    }
    (Served::start_with(command), database, dir)
}

fn address(served: &Served) -> String {
    served.base.trim_start_matches("http://").to_owned()
}

/// Everything the server sends until it closes the connection, or `None` if it is still open
/// after `within`.
async fn until_closed(stream: &mut TcpStream, within: Duration) -> Option<String> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buffer = [0_u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| String::from_utf8_lossy(&received).into_owned())
}

/// One HTTP/1.1 request's answer on a kept-alive connection: its status line and headers.
async fn answer_head(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buffer = [0_u8; 4096];
    while !received.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "the connection closed without an answer");
        received.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// The log lines (JSON) that say a request finished.
fn finished(logs: &[String]) -> Vec<Value> {
    logs.iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|entry| entry["fields"]["message"] == "request finished")
        .collect()
}

#[on_both_backends]
async fn a_body_that_does_not_arrive_in_time_is_answered_408(database: Database) {
    let (served, _database, _dir) = serve(database, &[("GATEHOUSE_BODY_TIMEOUT_SECS", "1")]).await;
    // Content-Length promises 200 bytes; ten come.
    let mut slow = TcpStream::connect(address(&served)).await.unwrap();
    slow.write_all(
        b"POST /api/v1/auth/login HTTP/1.1\r\nHost: gatehouse.test\r\n\
          Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"email\":",
    )
    .await
    .unwrap();
    let answer = until_closed(&mut slow, Duration::from_secs(10))
        .await
        .expect("answered and closed within the body timeout and some");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within 1 s"), "{answer}");

    // Chunked, one chunk and then nothing.
    let mut endless = TcpStream::connect(address(&served)).await.unwrap();
    endless
        .write_all(
            b"POST /api/v1/auth/register HTTP/1.1\r\nHost: gatehouse.test\r\n\
              Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"ema\r\n",
        )
        .await
        .unwrap();
    let answer = until_closed(&mut endless, Duration::from_secs(10))
        .await
        .expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

    // A body that arrives in time is read as ever.
    let client = reqwest::Client::new();
    let registered = client
        .post(format!("{}/api/v1/auth/register", served.base))
        .json(&serde_json::json!({
            "email": "on-time@example.com",
            "password": "a body that arrives in time",
            "full_name": "On Time",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201);
    served.stop();
}

#[on_both_backends]
async fn a_body_sent_where_none_is_read_is_not_waited_for(database: Database) {
    let (served, _database, _dir) = serve(database, &[]).await;
    // A probe with a chunked body that never ends: answered, and the connection closed at once
    // (not held open draining a body that never comes).
    let mut endless = TcpStream::connect(address(&served)).await.unwrap();
    endless
        .write_all(
            b"GET /livez HTTP/1.1\r\nHost: gatehouse.test\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .await
        .unwrap();
    let answer = until_closed(&mut endless, Duration::from_secs(5))
        .await
        .expect("closed after the answer, well before the body timeout");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );

    // The same with a Content-Length that is never met.
    let mut short = TcpStream::connect(address(&served)).await.unwrap();
    short
        .write_all(
            b"GET /readyz HTTP/1.1\r\nHost: gatehouse.test\r\nContent-Length: 1000\r\n\r\nabc",
        )
        .await
        .unwrap();
    let answer = until_closed(&mut short, Duration::from_secs(5))
        .await
        .expect("closed after the answer");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    // Without a body, a connection is kept alive for the next request.
    let mut kept = TcpStream::connect(address(&served)).await.unwrap();
    for _ in 0..2 {
        kept.write_all(b"GET /livez HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n")
            .await
            .unwrap();
        let head = answer_head(&mut kept).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    served.stop();
}

#[on_both_backends]
async fn one_address_holds_at_most_its_bound_of_connections(database: Database) {
    let (served, _database, _dir) =
        serve(database, &[("GATEHOUSE_MAX_CONNECTIONS_PER_IP", "4")]).await;
    let probe = b"GET /livez HTTP/1.1\r\nHost: gatehouse.test\r\n\r\n";
    // Four connections, each answered and kept alive.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(address(&served)).await.unwrap();
        stream.write_all(probe).await.unwrap();
        let head = answer_head(&mut stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        held.push(stream);
    }
    // A fifth is closed as it is accepted: no answer, the connection ends.
    let mut fifth = TcpStream::connect(address(&served)).await.unwrap();
    let _ = fifth.write_all(probe).await;
    let answer = until_closed(&mut fifth, Duration::from_secs(5))
        .await
        .expect("closed at once");
    assert_eq!(answer, "", "no answer past the bound");

    // One closed makes room for one.
    drop(held.pop());
    let mut admitted = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut stream = TcpStream::connect(address(&served)).await.unwrap();
        let _ = stream.write_all(probe).await;
        let mut first = [0_u8; 12];
        if let Ok(Ok(12)) =
            tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut first)).await
        {
            admitted = Some(String::from_utf8_lossy(&first).into_owned());
            break;
        }
    }
    assert_eq!(admitted.as_deref(), Some("HTTP/1.1 200"));
    // The held ones still serve.
    for stream in &mut held {
        stream.write_all(probe).await.unwrap();
        let head = answer_head(stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    served.stop();
}

#[on_both_backends]
async fn a_log_line_holds_a_bounded_path_and_no_mailed_token(database: Database) {
    let (served, _database, _dir) = serve(database, &[]).await;
    let client = reqwest::Client::new();
    let long = format!("/api/v1/{}?q={}", "p".repeat(6000), "q".repeat(1000));
    let response = client
        .get(format!("{}{long}", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let too_long = format!("/api/v1/{}", "x".repeat(20_000));
    let response = client
        .get(format!("{}{too_long}", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 414);
    let token = "ghm_a-mailed-token-that-must-not-be-logged";
    client
        .get(format!("{}/magic-link/{token}", served.base))
        .send()
        .await
        .unwrap();
    // Refused before routing (headers over 16 KiB): no route says which segment is the
    // secret, so only the path's first segment is logged.
    let response = client
        .get(format!("{}/magic-link/{token}", served.base))
        .header("X-Padding", "p".repeat(17 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 431);

    let logs = served.stop();
    assert!(
        logs.iter()
            .any(|line| line.contains("open-file limit raised to the hard limit")),
        "the start says what open-file limit it runs with"
    );
    assert!(
        logs.iter().all(|line| !line.contains(token)),
        "the token is not logged"
    );
    let finished = finished(&logs);
    let paths: Vec<&str> = finished
        .iter()
        .filter_map(|entry| entry["span"]["path"].as_str())
        .collect();
    assert!(paths.contains(&"/magic-link/{token}"), "{paths:?}");
    assert!(paths.contains(&"/magic-link/…"), "{paths:?}");
    let cut: Vec<&&str> = paths
        .iter()
        .filter(|p| p.starts_with("/api/v1/pppp"))
        .collect();
    assert_eq!(cut.len(), 1, "{paths:?}");
    assert_eq!(
        cut[0].chars().count(),
        257,
        "256 characters and an ellipsis"
    );
    assert!(cut[0].ends_with('…'));
    // No line of the log, whatever it says, carries the long paths whole.
    for line in &logs {
        assert!(line.len() < 4096, "a log line of {} bytes", line.len());
    }
}
