//! Mail through the outbox, as an invitee and an IT admin meet it: an invitation is answered at
//! once while the mail relay refuses, its mail waits in the outbox sealed (no link readable in
//! the database), and is sent when its retry comes and the relay takes it; the link then works.
//! The relay is a real SMTP server (Python's `aiosmtpd`) that refuses its first message with
//! `451`, as a relay that is busy or greylisting does.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use reqwest::Method;
use serde_json::json;
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::helpers::{json_of, python, Backend, Options, TestApp};

/// Listens on a free loopback port, prints `READY <port>`, refuses the first message with
/// `451` (writing `refused-<n>`), and writes each later one as `<n>.eml`.
const RELAY: &str = r#"
import asyncio, os, sys
from aiosmtpd.smtp import SMTP

out_dir = sys.argv[1]
count = 0

class Relay:
    async def handle_DATA(self, server, session, envelope):
        global count
        count += 1
        if count == 1:
            open(os.path.join(out_dir, "refused-%d" % count), "w").close()
            return "451 4.3.0 try again later"
        path = os.path.join(out_dir, "%d.eml" % count)
        with open(path + ".tmp", "wb") as f:
            f.write(envelope.original_content or envelope.content)
        os.replace(path + ".tmp", path)
        return "250 accepted"

async def main():
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(Relay()), host="127.0.0.1", port=0)
    print("READY %d" % server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"#;

/// The relay; killed and reaped when dropped, however the test ends.
struct Relay {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        for _ in 0..50 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Relay {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(python())
            .arg("-c")
            .arg(RELAY)
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("python3 with aiosmtpd is needed: run scripts/test ({e})"));
        let mut line = String::new();
        tokio::time::timeout(
            Duration::from_secs(30),
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut line),
        )
        .await
        .expect("the SMTP relay did not start")
        .unwrap();
        let port = line
            .trim()
            .strip_prefix("READY ")
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| {
                panic!("the SMTP relay did not start ({line:?}): run scripts/test for aiosmtpd")
            });
        Self { child, port, dir }
    }

    fn files(&self, part: &str) -> Vec<PathBuf> {
        files_in(self.dir.path(), part)
    }

    /// Waits until the relay holds a file whose name has `part` in it.
    async fn waits_for(&self, part: &str) -> PathBuf {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(path) = self.files(part).pop() {
                return path;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the relay got no {part}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn files_in(dir: &Path, part: &str) -> Vec<PathBuf> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.contains(part) && !name.ends_with(".tmp")
        })
        .collect();
    paths.sort();
    paths
}

async fn a_refused_mail_waits_sealed_and_is_sent_at_its_retry(backend: Backend) {
    let relay = Relay::start().await;
    let app = TestApp::spawn_with(
        backend,
        Options {
            env: vec![(
                "GATEHOUSE_SMTP_URL",
                format!("smtp://127.0.0.1:{}", relay.port),
            )],
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
    relay.waits_for("refused-").await;

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
    let mail = std::fs::read_to_string(relay.waits_for(".eml").await).unwrap();
    let mail = mail.replace("=\r\n", "").replace("=3D", "=");
    assert!(mail.contains("grace@example.com"), "{mail}");
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
