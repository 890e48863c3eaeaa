//! The throwaway local PostgreSQL cluster used when no configured server answers.
//!
//! Clusters live in `$TMPDIR/gatehouse-test-pg-*/` (`data/` holds the cluster,
//! `postgres.log` its server log, and the directory itself its Unix socket). They are
//! left running for later test processes to reuse; see the crate documentation.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use crate::{probe, Probe, DATABASE_URL_ENV};

const DIR_PREFIX: &str = "gatehouse-test-pg-";
const LOCK_NAME: &str = "gatehouse-test-pg.lock";
const SUPERUSER: &str = "postgres";
/// How long to wait for another process that is starting a cluster.
const LOCK_WAIT: Duration = Duration::from_secs(300);
/// Start attempts per data directory (each on a new free port).
const START_ATTEMPTS: usize = 3;

/// Returns the URL of a running throwaway cluster, reusing or starting one.
///
/// `tried_url` and `reason` say why the configured server is not used; they end up in
/// messages. Panics if no cluster can be started.
pub(crate) async fn throwaway_cluster_url(tried_url: &str, reason: &str) -> String {
    let base = std::env::temp_dir();
    let lock = ClusterLock::acquire(&base).await;

    if let Some(url) = running_cluster(&base).await {
        eprintln!(
            "gatehouse-testkit: {tried_url}: {reason}; \
             reusing the throwaway PostgreSQL cluster at {url}"
        );
        return url;
    }

    let (blocking_base, blocking_tried, blocking_reason) =
        (base.clone(), tried_url.to_owned(), reason.to_owned());
    let (url, dir) = tokio::task::spawn_blocking(move || {
        start_cluster(&blocking_base, &blocking_tried, &blocking_reason)
    })
    .await
    .unwrap_or_else(|e| match e.try_into_panic() {
        Ok(payload) => std::panic::resume_unwind(payload),
        Err(e) => panic!("gatehouse-testkit: starting a throwaway PostgreSQL cluster failed: {e}"),
    });
    drop(lock);

    match probe(&url).await {
        Probe::Connected => {}
        Probe::Refused(e) | Probe::NoAnswer(e) => panic!(
            "gatehouse-testkit: started a throwaway PostgreSQL cluster in {} but cannot \
             connect to it at {url}: {e}",
            dir.display()
        ),
    }
    eprintln!(
        "gatehouse-testkit: {tried_url}: {reason}; started a throwaway PostgreSQL cluster \
         at {url} (data in {}; it is left running for later test runs)",
        dir.display()
    );
    url
}

fn local_url(port: u16) -> String {
    format!("postgres://{SUPERUSER}@127.0.0.1:{port}/postgres")
}

/// Directories of earlier throwaway clusters, oldest first.
fn cluster_dirs(base: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut dirs: Vec<(SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with(DIR_PREFIX))
        })
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| {
            let modified = entry
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            (modified, entry.path())
        })
        .collect();
    dirs.sort();
    dirs.into_iter().map(|(_, dir)| dir).collect()
}

/// The URL of an already running throwaway cluster, if one answers.
async fn running_cluster(base: &Path) -> Option<String> {
    for dir in cluster_dirs(base) {
        // Line 4 of postmaster.pid is the port the server listens on.
        let Ok(pid_file) = fs::read_to_string(dir.join("data").join("postmaster.pid")) else {
            continue;
        };
        let Some(Ok(port)) = pid_file
            .lines()
            .nth(3)
            .map(|line| line.trim().parse::<u16>())
        else {
            continue;
        };
        let url = local_url(port);
        if let Probe::Connected = probe(&url).await {
            return Some(url);
        }
    }
    None
}

/// Restarts a stopped throwaway cluster or creates a new one; returns its URL and
/// directory. Blocking.
fn start_cluster(base: &Path, tried_url: &str, reason: &str) -> (String, PathBuf) {
    let bin = find_bin_dir().unwrap_or_else(|| {
        panic!(
            "gatehouse-testkit: no PostgreSQL server for the tests. Tried {tried_url} \
             ({reason}), and found no `initdb` and `pg_ctl` on PATH or under \
             /usr/lib/postgresql/*/bin to start a throwaway cluster with.\n\
             Install PostgreSQL (e.g. `apt-get install postgresql`), or set \
             {DATABASE_URL_ENV} to the URL of a server where the role may CREATE DATABASE."
        )
    });
    let runner = Runner::detect();

    for dir in cluster_dirs(base) {
        if dir.join("data").join("PG_VERSION").is_file() {
            if let Ok(port) = start(&runner, &bin, &dir) {
                return (local_url(port), dir);
            }
        }
    }

    let dir = tempfile::Builder::new()
        .prefix(DIR_PREFIX)
        .tempdir_in(base)
        .unwrap_or_else(|e| {
            panic!(
                "gatehouse-testkit: cannot create a directory for a throwaway PostgreSQL \
                 cluster in {}: {e}",
                base.display()
            )
        })
        .keep();
    runner.hand_over(&dir);
    let data = dir.join("data");
    runner
        .run(
            &bin.join("initdb"),
            &[
                "-D".into(),
                path_arg(&data),
                "--auth=trust".into(),
                "-U".into(),
                SUPERUSER.into(),
                "--encoding=UTF8".into(),
                "--locale=C".into(),
                "--no-sync".into(),
            ],
            &dir,
        )
        .unwrap_or_else(|e| {
            panic!("gatehouse-testkit: creating a throwaway PostgreSQL cluster failed: {e}")
        });
    let port = start(&runner, &bin, &dir).unwrap_or_else(|e| {
        panic!(
            "gatehouse-testkit: starting the throwaway PostgreSQL cluster in {} failed: {e}",
            dir.display()
        )
    });
    (local_url(port), dir)
}

/// Starts the cluster in `dir` on a free port of 127.0.0.1 and waits until it accepts
/// connections.
fn start(runner: &Runner, bin: &Path, dir: &Path) -> Result<u16, String> {
    let log = dir.join("postgres.log");
    let mut last_error = String::new();
    for _ in 0..START_ATTEMPTS {
        let port = free_port().map_err(|e| format!("cannot find a free port: {e}"))?;
        let server_options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            shell_quote(&path_arg(dir))
        );
        let started = runner.run(
            &bin.join("pg_ctl"),
            &[
                "-D".into(),
                path_arg(&dir.join("data")),
                "-l".into(),
                path_arg(&log),
                "-w".into(),
                "-t".into(),
                "60".into(),
                "-o".into(),
                server_options,
                "start".into(),
            ],
            dir,
        );
        match started {
            Ok(()) => return Ok(port),
            Err(e) => last_error = format!("{e}\n{}", log_tail(&log)),
        }
    }
    Err(last_error)
}

fn log_tail(log: &Path) -> String {
    match fs::read_to_string(log) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(15)..].join("\n");
            format!("last lines of {}:\n{tail}", log.display())
        }
        Err(e) => format!("(cannot read {}: {e})", log.display()),
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The first directory on PATH holding both `initdb` and `pg_ctl`, else the
/// highest-versioned `/usr/lib/postgresql/<version>/bin` holding both.
fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(path) = std::env::var_os("PATH") {
        if let Some(dir) = std::env::split_paths(&path).find(|dir| has_both(dir)) {
            return Some(std::path::absolute(&dir).unwrap_or(dir));
        }
    }
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry
                .file_name()
                .to_str()?
                .split('.')
                .map(|part| part.parse().ok())
                .collect::<Option<Vec<u32>>>()?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// How the PostgreSQL binaries are run: directly, or, when running as root (which
/// PostgreSQL refuses), as the `postgres` user.
enum Runner {
    Direct,
    AsPostgres {
        uid: u32,
        gid: u32,
        runuser: Option<PathBuf>,
    },
}

impl Runner {
    fn detect() -> Runner {
        // The owner of a file we create is our effective user.
        let euid = tempfile::tempfile()
            .and_then(|file| file.metadata())
            .map(|metadata| metadata.uid())
            .unwrap_or_else(|e| panic!("gatehouse-testkit: cannot create a temporary file: {e}"));
        if euid != 0 {
            return Runner::Direct;
        }
        let id = |flag: &str| -> Option<u32> {
            let output = Command::new("id").args([flag, SUPERUSER]).output().ok()?;
            if !output.status.success() {
                return None;
            }
            String::from_utf8(output.stdout).ok()?.trim().parse().ok()
        };
        match (id("-u"), id("-g")) {
            (Some(uid), Some(gid)) => Runner::AsPostgres {
                uid,
                gid,
                runuser: find_on_path("runuser"),
            },
            _ => panic!(
                "gatehouse-testkit: the tests run as root, PostgreSQL refuses to run as root, \
                 and there is no `{SUPERUSER}` user to run a throwaway cluster as. Create \
                 that user (installing PostgreSQL does), run the tests as another user, or \
                 set {DATABASE_URL_ENV} to the URL of a running server."
            ),
        }
    }

    /// Gives `dir` to the user the binaries run as.
    fn hand_over(&self, dir: &Path) {
        if let Runner::AsPostgres { uid, gid, .. } = self {
            std::os::unix::fs::chown(dir, Some(*uid), Some(*gid)).unwrap_or_else(|e| {
                panic!(
                    "gatehouse-testkit: cannot give {} to the `{SUPERUSER}` user: {e}",
                    dir.display()
                )
            });
        }
    }

    /// Runs `program` with `args` in `cwd`, capturing its output for error messages.
    fn run(&self, program: &Path, args: &[String], cwd: &Path) -> Result<(), String> {
        let program_arg = path_arg(program);
        let mut command = match self {
            Runner::Direct => {
                let mut command = Command::new(program);
                command.args(args);
                command
            }
            Runner::AsPostgres {
                runuser: Some(runuser),
                ..
            } => {
                let mut command = Command::new(runuser);
                command
                    .args(["-u", SUPERUSER, "--", &program_arg])
                    .args(args);
                command
            }
            Runner::AsPostgres { runuser: None, .. } => {
                let script = std::iter::once(&program_arg)
                    .chain(args)
                    .map(|arg| shell_quote(arg))
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut command = Command::new("su");
                command.args([SUPERUSER, "-s", "/bin/sh", "-c", &script]);
                command
            }
        };
        command.current_dir(cwd);
        let described = format!("{command:?}");
        let output = command
            .output()
            .map_err(|e| format!("cannot run {described}: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{described} failed ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }
}

fn path_arg(path: &Path) -> String {
    path.to_str().map(str::to_owned).unwrap_or_else(|| {
        panic!(
            "gatehouse-testkit: the path {} is not valid UTF-8; set TMPDIR to a plain path",
            path.display()
        )
    })
}

/// Quotes `s` as one word for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A best-effort inter-process lock so that concurrent test processes do not all start
/// clusters at once. Removed on drop.
struct ClusterLock {
    path: Option<PathBuf>,
}

impl ClusterLock {
    async fn acquire(base: &Path) -> ClusterLock {
        let path = base.join(LOCK_NAME);
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let _ = writeln!(file, "{}", std::process::id());
                    return ClusterLock { path: Some(path) };
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    if lock_is_stale(&path) && fs::remove_file(&path).is_err() {
                        // Left behind by someone else whose file we may not remove
                        // (sticky /tmp): go ahead without the lock.
                        return ClusterLock { path: None };
                    }
                    if Instant::now() > deadline {
                        panic!(
                            "gatehouse-testkit: waited {LOCK_WAIT:?} for another process to \
                             start a throwaway PostgreSQL cluster; if no tests are running, \
                             delete {}",
                            path.display()
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => {
                    eprintln!(
                        "gatehouse-testkit: warning: cannot create the lock file {}: {e}; \
                         going ahead without it",
                        path.display()
                    );
                    return ClusterLock { path: None };
                }
            }
        }
    }
}

impl Drop for ClusterLock {
    fn drop(&mut self) {
        if let Some(path) = &self.path {
            let _ = fs::remove_file(path);
        }
    }
}

/// Whether the lock's holder is gone: its process has exited (checked through /proc
/// where available) or, failing that, the lock is older than anyone holds it.
fn lock_is_stale(path: &Path) -> bool {
    let age = fs::metadata(path)
        .and_then(|metadata| metadata.modified())
        .ok()
        .and_then(|modified| modified.elapsed().ok())
        .unwrap_or_default();
    let holder: Option<u32> = fs::read_to_string(path)
        .ok()
        .and_then(|text| text.trim().parse().ok());
    match holder {
        Some(pid) if Path::new("/proc/self").exists() => {
            !Path::new("/proc").join(pid.to_string()).exists()
        }
        Some(_) => age > LOCK_WAIT,
        // Not written yet (or garbage): stale unless just created.
        None => age > Duration::from_secs(10),
    }
}
