//! The SMTP mailer against a real SMTP server on loopback: Python's `aiosmtpd`, run by a small
//! inline script that stores every message it receives, its envelope and the message as
//! Python's `email` package parses it (an independent parser of what Gatehouse sends).
//!
//! Needs `python3` with `aiosmtpd` (`pip install aiosmtpd`); the interpreter can be changed
//! with `GATEHOUSE_TEST_PYTHON`. These tests fail, rather than skip, when it is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use gatehouse_domain::model::Email;
use gatehouse_domain::ports::{Mail, Mailer};
use gatehouse_mail::SmtpMailer;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

const FROM: &str = "Gatehouse <no-reply@gatehouse.test>";

const INSTALL_HINT: &str = "These tests need Python 3 with the aiosmtpd package, the test SMTP \
     server. Install it with:\n    pip install aiosmtpd\n(or point GATEHOUSE_TEST_PYTHON at a \
     Python 3 that has it).";

/// The SMTP server: listens on a free loopback port (the kernel picks it, so there is no race
/// between choosing and binding), prints `READY <port>` once listening, and writes each message
/// as `<n>.json` (written to a temporary name, then renamed) into the directory it is given.
const SERVER_SCRIPT: &str = r#"
import asyncio, email, email.policy, json, os, sys
from aiosmtpd.smtp import SMTP

out_dir = sys.argv[1]
count = 0

class Store:
    async def handle_DATA(self, server, session, envelope):
        global count
        count += 1
        raw = envelope.original_content or envelope.content
        message = email.message_from_bytes(raw, policy=email.policy.default)
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "raw": raw.decode("utf-8", "replace"),
            "headers": {k.lower(): str(v) for k, v in message.items()},
            "content_type": message.get_content_type(),
            "charset": message.get_content_charset(),
            "body": message.get_content(),
        }
        path = os.path.join(out_dir, "%d.json" % count)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)
        return "250 Message accepted for delivery"

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(Store()), host="127.0.0.1", port=0)
    print("READY %d" % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"#;

fn python() -> String {
    std::env::var("GATEHOUSE_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Fails the test, naming what to install, when Python or aiosmtpd is missing.
async fn require_aiosmtpd() {
    let python = python();
    let checked = Command::new(&python)
        .args(["-c", "import aiosmtpd"])
        .stdin(Stdio::null())
        .output()
        .await;
    match checked {
        Err(error) => panic!("cannot run `{python}` ({error}).\n{INSTALL_HINT}"),
        Ok(output) if !output.status.success() => panic!(
            "`{python} -c 'import aiosmtpd'` failed:\n{}\n{INSTALL_HINT}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
        Ok(_) => {}
    }
}

/// A running SMTP server; killed when dropped.
struct SmtpServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        // Reap it, so that no zombie is left behind; it is already dying.
        for _ in 0..50 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl SmtpServer {
    async fn start() -> Self {
        require_aiosmtpd().await;
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(python())
            .arg("-c")
            .arg(SERVER_SCRIPT)
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| {
                panic!("cannot start `{}` ({error}).\n{INSTALL_HINT}", python())
            });

        let stdout = child.stdout.take().unwrap();
        let mut first_line = String::new();
        let ready = tokio::time::timeout(
            Duration::from_secs(30),
            BufReader::new(stdout).read_line(&mut first_line),
        )
        .await;
        let port = first_line
            .trim()
            .strip_prefix("READY ")
            .and_then(|port| port.parse::<u16>().ok());
        let Some(port) = port else {
            let _ = child.start_kill();
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), pipe.read_to_string(&mut stderr))
                        .await;
            }
            panic!(
                "the aiosmtpd test server did not start (stdout {first_line:?}, {ready:?}):\n\
                 {stderr}\n{INSTALL_HINT}"
            );
        };

        // It prints READY once listening; check that the port accepts all the same.
        tokio::time::timeout(
            Duration::from_secs(10),
            tokio::net::TcpStream::connect(("127.0.0.1", port)),
        )
        .await
        .expect("the SMTP server's port does not accept connections")
        .expect("the SMTP server's port refused the connection");

        Self { child, port, dir }
    }

    fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// The messages received so far, in order.
    fn received(&self) -> Vec<serde_json::Value> {
        received_in(self.dir.path())
    }
}

fn received_in(dir: &Path) -> Vec<serde_json::Value> {
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let n = path
                .file_name()?
                .to_str()?
                .strip_suffix(".json")?
                .parse()
                .ok()?;
            Some((n, path))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, path)| serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap())
        .collect()
}

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
