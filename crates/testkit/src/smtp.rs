//! A real SMTP server on loopback for tests: Python's `aiosmtpd`, run by a small inline script
//! that stores every message it takes, its envelope and the message as Python's `email`
//! package parses it (an independent parser of what Gatehouse sends), and that may refuse the
//! first messages as a busy relay does.
//!
//! Needs `python3` with `aiosmtpd` (`pip install aiosmtpd`; `scripts/test` installs it); the
//! interpreter can be changed with `GATEHOUSE_TEST_PYTHON`. A test fails, rather than skips,
//! when it is missing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

const INSTALL_HINT: &str = "These tests need Python 3 with the aiosmtpd package, the test SMTP \
     server. Install it with:\n    pip install aiosmtpd\n(or point GATEHOUSE_TEST_PYTHON at a \
     Python 3 that has it).";

/// The SMTP server: listens on a free loopback port (the kernel picks it, so there is no race
/// between choosing and binding), prints `READY <port>` once listening, refuses the first
/// `refusals` messages with `451` (as a busy or greylisting relay does), and writes each other
/// message as `<n>.json` (written to a temporary name, then renamed) into the directory it is
/// given.
const SERVER_SCRIPT: &str = r#"
import asyncio, email, email.policy, json, os, sys
from aiosmtpd.smtp import SMTP

out_dir = sys.argv[1]
refusals = int(sys.argv[2])
count = 0

class Store:
    async def handle_DATA(self, server, session, envelope):
        global count
        count += 1
        if count <= refusals:
            open(os.path.join(out_dir, "refused-%d" % count), "w").close()
            return "451 4.3.0 try again later"
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

/// The Python that runs the server: `GATEHOUSE_TEST_PYTHON`, else `python3`.
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

/// A running SMTP server; killed and reaped when dropped, however the test ends.
pub struct SmtpServer {
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
    /// A server that takes every message.
    pub async fn start() -> Self {
        Self::refusing(0).await
    }

    /// A server that refuses the first `refusals` messages with `451 try again later`, then
    /// takes every message.
    pub async fn refusing(refusals: usize) -> Self {
        require_aiosmtpd().await;
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(python())
            .arg("-c")
            .arg(SERVER_SCRIPT)
            .arg(dir.path())
            .arg(refusals.to_string())
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

    /// `smtp://127.0.0.1:PORT`, for `GATEHOUSE_SMTP_URL`.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// The messages taken so far, in order: each as `mail_from`, `rcpt_tos`, `raw` (the
    /// message as sent), `headers` (lower-case names), `content_type`, `charset` and `body`
    /// (decoded), as Python's `email` package parses it.
    pub fn received(&self) -> Vec<serde_json::Value> {
        received_in(self.dir.path())
    }

    /// How many messages it has refused so far.
    pub fn refused(&self) -> usize {
        std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter(|entry| {
                entry
                    .as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("refused-"))
            })
            .count()
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
