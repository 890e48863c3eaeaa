//! Runs the `gatehouse` binary as an operator would, and reads its JSON logs.
// Each test binary that includes this uses part of it.
#![allow(dead_code)]

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use gatehouse_testkit::TestDatabase;
use serde_json::Value;

pub const BINARY: &str = env!("CARGO_BIN_EXE_gatehouse");

pub fn gatehouse(dir: &tempfile::TempDir) -> Command {
    let mut command = Command::new(BINARY);
    command
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GATEHOUSE_BIND", "127.0.0.1:0")
        .env("GATEHOUSE_LOG_FORMAT", "json")
        .env("GATEHOUSE_LOG", "debug")
        // Fixed, so that tokens issued before a restart on another port keep their issuer.
        .env("GATEHOUSE_PUBLIC_URL", "http://gatehouse.test");
    // The mark of this run of `scripts/test`, which fails if a process carrying it outlives
    // the run (`scripts/outlived`).
    if let Some(mark) = std::env::var_os("GATEHOUSE_TEST_RUN") {
        command.env("GATEHOUSE_TEST_RUN", mark);
    }
    command
}

/// A served binary, its address, and every log line it wrote.
pub struct Served {
    child: Child,
    pub base: String,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Served {
    pub fn start(dir: &tempfile::TempDir) -> Self {
        Self::start_with(gatehouse(dir))
    }

    /// Starts the command (made with [`gatehouse`], plus settings).
    pub fn start_with(mut command: Command) -> Self {
        let mut child = command
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (address_tx, address_rx) = std::sync::mpsc::channel();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(entry) = serde_json::from_str::<Value>(&line) {
                    if let Some(address) = entry["fields"]["address"].as_str() {
                        let _ = address_tx.send(address.to_owned());
                    }
                }
                sink.lock().unwrap().push(line);
            }
        });
        let address = address_rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the server did not start: {:?}", logs.lock().unwrap()));
        Self {
            child,
            base: format!("http://{address}"),
            logs,
        }
    }

    pub fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(100));
        self.logs.lock().unwrap().clone()
    }
}

impl Served {
    /// Tells the process to stop (SIGTERM), as an orchestrator does; it drains, then exits.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM failed");
    }

    /// Waits up to `timeout` for the process to exit by itself; its exit status, or `None`
    /// (then it is killed).
    pub fn wait_exit(
        mut self,
        timeout: Duration,
    ) -> (Option<std::process::ExitStatus>, Vec<String>) {
        let deadline = std::time::Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break Some(status);
            }
            if std::time::Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(100));
        (status, self.logs.lock().unwrap().clone())
    }

    /// The log lines written so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Kills the process at once (SIGKILL): no draining, no clean-up.
    pub fn kill_hard(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// However a test ends (a panic, a `Served` dropped without [`Served::stop`], or one held by a
/// fixture that is dropped), the process is killed and reaped with it: never left running,
/// orphaned, holding a port and a PostgreSQL pool.
impl Drop for Served {
    fn drop(&mut self) {
        // Already ended (stop, wait_exit, kill_hard): the kill fails and the wait returns the
        // status it had.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A database for one server: a SQLite file in `dir`, or a fresh PostgreSQL database.
pub enum Database {
    Sqlite,
    Postgres(TestDatabase),
}

/// `#[on_both_backends]`'s fixture: a test taking a `Database` runs on each.
impl Database {
    pub async fn sqlite() -> Self {
        Self::Sqlite
    }

    pub async fn postgres() -> Self {
        Self::Postgres(TestDatabase::create().await)
    }

    /// The database of the backend named `"postgres"` or `"sqlite"`.
    pub async fn of(backend: &str) -> Self {
        match backend {
            "postgres" => Self::postgres().await,
            _ => Self::sqlite().await,
        }
    }

    pub fn url(&self, dir: &tempfile::TempDir) -> String {
        match self {
            Self::Sqlite => gatehouse_testkit::sqlite_url(dir),
            Self::Postgres(database) => database.url().to_owned(),
        }
    }
}
