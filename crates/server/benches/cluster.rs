//! `just bench-cluster`: Gatehouse scaled out as `scripts/cluster` lays it out
//! (`docs/deployment.md`): replicas of the release binary on one PostgreSQL database behind nginx
//! (`deploy/nginx/gatehouse.conf.template`), three replicas against one, all load through nginx.
//!
//! ```text
//! cargo bench -p gatehouse-server --bench cluster -- [--seconds N] [--connections N]
//!                                                    [--endpoints K] [--changes M]
//!                                                    [--wakeups W] [--replicas 1,3]
//!                                                    [--binary PATH] [--out FILE]
//!                                                    [--env NAME=VALUE]...
//! ```
//!
//! Each layout gets a fresh PostgreSQL database (`gatehouse-testkit`, as the tests find it), a
//! fresh HTTPS receiver that answers 200 at once, nginx, and its replicas, started together with
//! the same settings. Through nginx, it measures:
//!
//! 1. **reads**: `wrk` on `GET /api/v1/organizations/{id}` with a Bearer token, `--connections`
//!    (64) for `--seconds` (10): requests/s, p50 and p99, and which replica answered how many
//!    (from nginx's access log);
//! 2. **webhook fan-out**: `--changes` (200) `PATCH /api/v1/users/me`, 16 at a time, to
//!    `--endpoints` (10) endpoints: deliveries/s from the first change sent to the last delivery
//!    received, and the latency from each change's answer to the receipt of each of its
//!    deliveries (matched by the name the change sets, unique to it), and how many each replica
//!    delivered (its `GATEHOUSE_METRICS_BIND` metrics);
//! 3. **wake-ups**: `--wakeups` (50) changes, one at a time, after the replicas are restarted
//!    so that one replica delivers and polls once a minute (`GATEHOUSE_WEBHOOK_POLL_MS=60000`)
//!    and nginx sends the changes to the others, which deliver nothing (`GATEHOUSE_WORKER=false`):
//!    only PostgreSQL's `NOTIFY` wakes the delivering replica in time. The latency from each
//!    change's answer to its first delivery and to its last one. With one replica, that replica
//!    answers and delivers (same poll): the figure without a hop between processes.
//!
//! During 1 and 2 the CPU time of each part (the replicas, nginx, PostgreSQL, this process with
//! its receiver and `wrk`, everything else) is read from `/proc`, with the machine's context
//! switches. `--env NAME=VALUE` gives every replica one more setting (`GATEHOUSE_DB_POOL_SIZE=5`,
//! say). Results and what they mean: `docs/benchmarks.md`, "Scale-out".
//!
//! The binary is the release build: `--binary`, else `GATEHOUSE_BINARY`, else the one `cargo
//! bench` builds (`$CARGO_TARGET_DIR/release/gatehouse`). Needs `wrk` and nginx.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/support/nginx.rs"]
mod nginx;
#[path = "support/wrk.rs"]
mod wrk;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt::Write as _,
    fs,
    io::{Read as _, Seek as _, SeekFrom, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant, SystemTime},
};

use gatehouse_delivery::test_receiver::{ReceivedRequest, TestReceiver};
use gatehouse_testkit::TestDatabase;
use nginx::Nginx;
use serde_json::{json, Value};
use time::OffsetDateTime;
use tokio::runtime::Runtime;
use wrk::{parse_wrk, WrkResult};

const EMAIL: &str = "cluster-bench@example.com";
const PASSWORD: &str = "three replicas and a balancer";
const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// So high that the limiter never refuses.
const RATE_LIMITS: &str =
    "free=100000000,starter=100000000,pro=100000000,business=100000000,enterprise=100000000";
/// Concurrent `PATCH /users/me` of the fan-out.
const PATCH_CONCURRENCY: usize = 16;
/// The cluster-wide bound of attempts in flight to one endpoint (the default).
const PER_ENDPOINT: usize = 4;
/// The plan of the organization with the endpoints: 200 endpoints.
const PLAN: &str = "enterprise";
const MAX_ENDPOINTS: usize = 200;
const FANOUT_TIMEOUT: Duration = Duration::from_secs(120);
const WAKEUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Changes made and waited for before the wake-ups are measured (connections, first queries).
const WAKEUP_WARMUP: usize = 3;
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Linux's `USER_HZ`: the unit of the CPU times in `/proc`.
const TICKS_PER_SEC: f64 = 100.0;

struct Options {
    seconds: u64,
    connections: usize,
    endpoints: usize,
    changes: usize,
    wakeups: usize,
    layouts: Vec<usize>,
    binary: Option<PathBuf>,
    out: Option<PathBuf>,
    /// `--env NAME=VALUE`, repeatable: more settings for every replica (an experiment with
    /// `GATEHOUSE_DB_POOL_SIZE`, say); the bench's own come first.
    extra_env: Vec<(String, String)>,
}

fn main() {
    let options = parse_args();
    let binary = release_binary(options.binary.as_deref()).unwrap_or_else(|message| {
        eprintln!("{message}");
        std::process::exit(1)
    });
    if find_on_path("wrk").is_none() {
        eprintln!("`just bench-cluster` needs wrk: apt-get install wrk");
        std::process::exit(1);
    }
    if Nginx::find().is_none() {
        eprintln!(
            "`just bench-cluster` needs nginx, the cluster's load balancer: apt-get install nginx"
        );
        std::process::exit(1);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("cannot start a Tokio runtime: {e}");
            std::process::exit(1)
        });
    let started = Instant::now();
    let mut report = header(&options, &binary);
    print!("{report}");
    let results: Vec<Layout> = options
        .layouts
        .iter()
        .map(|&replicas| run_layout(&runtime, &options, &binary, replicas))
        .collect();
    let tables = render(&options, &results);
    print!("{tables}");
    report.push_str(&tables);
    let footer = format!(
        "\nTotal wall time: {:.0} s\n",
        started.elapsed().as_secs_f64()
    );
    print!("{footer}");
    report.push_str(&footer);
    if let Some(out) = &options.out {
        fs::write(out, &report).unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
        eprintln!("wrote {}", out.display());
    }
}

fn parse_args() -> Options {
    let usage = "usage: cluster [--seconds N] [--connections N] [--endpoints K] [--changes M] \
                 [--wakeups W] [--replicas 1,3] [--binary PATH] [--out FILE] \
                 [--env NAME=VALUE]...";
    let mut options = Options {
        seconds: 10,
        connections: 64,
        endpoints: 10,
        changes: 200,
        wakeups: 50,
        layouts: vec![1, 3],
        binary: None,
        out: None,
        extra_env: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
            None => (arg.clone(), None),
        };
        let mut value = || {
            inline.clone().or_else(|| args.next()).unwrap_or_else(|| {
                eprintln!("{flag} needs a value\n{usage}");
                std::process::exit(2)
            })
        };
        let mut number = |max: usize| -> usize {
            value()
                .parse()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .unwrap_or_else(|| {
                    eprintln!("{flag} takes a whole number from 1 to {max}\n{usage}");
                    std::process::exit(2)
                })
        };
        match flag.as_str() {
            // `cargo bench` passes this to every bench binary.
            "--bench" => {}
            "--seconds" => options.seconds = number(3600) as u64,
            "--connections" => options.connections = number(10_000),
            "--endpoints" => options.endpoints = number(MAX_ENDPOINTS),
            "--changes" => options.changes = number(1_000_000),
            "--wakeups" => options.wakeups = number(100_000),
            "--replicas" => {
                let list = value();
                let layouts: Option<Vec<usize>> = list
                    .split(',')
                    .map(|n| n.trim().parse().ok().filter(|n| (1..=16).contains(n)))
                    .collect();
                options.layouts = layouts.unwrap_or_else(|| {
                    eprintln!("--replicas takes a list of counts from 1 to 16 (1,3)\n{usage}");
                    std::process::exit(2)
                });
            }
            "--binary" => options.binary = Some(PathBuf::from(value())),
            "--out" => options.out = Some(PathBuf::from(value())),
            "--env" => {
                let setting = value();
                let Some((name, value)) = setting.split_once('=') else {
                    eprintln!("--env takes NAME=VALUE\n{usage}");
                    std::process::exit(2)
                };
                options.extra_env.push((name.to_owned(), value.to_owned()));
            }
            "-h" | "--help" => {
                println!("{usage}");
                std::process::exit(0)
            }
            other => {
                eprintln!("unknown argument {other:?}\n{usage}");
                std::process::exit(2)
            }
        }
    }
    options
}

/// The release `gatehouse` to run: `--binary`, `GATEHOUSE_BINARY`, or the release build in the
/// target directory; a message saying how to make one when there is none.
fn release_binary(flag: Option<&Path>) -> Result<PathBuf, String> {
    let named = flag.map(|path| (path.to_owned(), "--binary")).or_else(|| {
        std::env::var_os("GATEHOUSE_BINARY")
            .filter(|value| !value.is_empty())
            .map(|value| (PathBuf::from(value), "GATEHOUSE_BINARY"))
    });
    if let Some((path, from)) = named {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{from} names {}, which is no file", path.display()))
        };
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut candidates = Vec::new();
    // What `cargo bench` built beside this bench: the release binary, in the bench profile.
    let built = PathBuf::from(env!("CARGO_BIN_EXE_gatehouse"));
    if built.parent().and_then(Path::file_name) == Some("release".as_ref()) {
        candidates.push(built);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .filter(|value| !value.is_empty())
        .map_or_else(|| manifest.join("../../target"), PathBuf::from);
    let target = if target.is_relative() {
        manifest.join("../..").join(target)
    } else {
        target
    };
    candidates.push(target.join("release/gatehouse"));
    if let Some(found) = candidates.iter().find(|path| path.is_file()) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(format!(
        "no release build of gatehouse (looked at {}): build it with \
         `cargo build --release --bin gatehouse` (with the same CARGO_TARGET_DIR), or name one \
         with GATEHOUSE_BINARY=PATH or --binary PATH",
        looked.join(", ")
    ))
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn header(options: &Options, binary: &Path) -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown", |(_, model)| model.trim())
        .to_owned();
    let memory = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .map_or_else(
            || "unknown".to_owned(),
            |kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0),
        );
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let nginx_version = Nginx::find()
        .and_then(|nginx| Command::new(nginx).arg("-v").output().ok())
        .map(|out| String::from_utf8_lossy(&out.stderr).trim().to_owned())
        .unwrap_or_default();
    let layouts: Vec<String> = options.layouts.iter().map(usize::to_string).collect();
    format!(
        "# Gatehouse cluster benchmark\n\n\
         - date: {} UTC\n\
         - machine: {} cores ({model}), {memory} RAM; load average at the start {}\n\
         - binary: `{}` ({})\n\
         - layouts: {} replica(s) of `gatehouse serve` on one fresh PostgreSQL database each, \
         behind nginx (`deploy/nginx/gatehouse.conf.template`, {nginx_version})\n\
         - reads: wrk, {} connections, {} s; fan-out: {} changes × {} endpoints, \
         {PATCH_CONCURRENCY} changes at a time; wake-ups: {} changes one at a time\n\
         - everything (replicas, nginx, PostgreSQL, receiver, wrk) shares this machine\n",
        OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second]"
            ))
            .unwrap_or_default(),
        cores(),
        load.join(" "),
        binary.display(),
        git_description(),
        layouts.join(" and "),
        options.connections,
        options.seconds,
        options.changes,
        options.endpoints,
        options.wakeups,
    )
}

/// The commit checked out here, and whether the tree differs from it.
fn git_description() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(commit) if git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty()) => {
            format!("tree of {commit} with uncommitted changes")
        }
        Some(commit) => format!("commit {commit}"),
        None => "commit unknown".to_owned(),
    }
}

// ---------------------------------------------------------------------------------------------
// One layout
// ---------------------------------------------------------------------------------------------

/// What one layout measured.
struct Layout {
    replicas: usize,
    reads: WrkResult,
    /// Reads answered by each replica, in the order of their ports.
    reads_spread: Vec<usize>,
    reads_cpu: Cpu,
    fanout: Fanout,
    /// Deliveries recorded by each replica during the fan-out (its metrics).
    fanout_spread: Vec<Option<u64>>,
    wakeup: Wakeup,
    notes: Vec<String>,
}

fn run_layout(runtime: &Runtime, options: &Options, binary: &Path, replicas: usize) -> Layout {
    eprintln!("\n[{replicas} replica(s)] preparing");
    let work = tempfile::tempdir().unwrap_or_else(|e| panic!("cannot make a temp directory: {e}"));
    // The receiver must exist before the replicas start: they trust its CA.
    let receiver = runtime.block_on(TestReceiver::start());
    let database = runtime.block_on(TestDatabase::create());
    let ports: Vec<u16> = (0..replicas).map(|_| free_port()).collect();
    let nginx = Nginx::start(&ports.iter().map(|p| (*p, true)).collect::<Vec<_>>());
    let front = nginx.url();
    // The same on every replica; `localhost`, not nginx's 127.0.0.1, for a WebAuthn relying
    // party (an IP address would make each replica warn at start).
    let public_url = front.replace("127.0.0.1", "localhost");
    let mut env = replica_env(
        database.url(),
        &public_url,
        work.path(),
        receiver.ca_pem_path(),
    );
    env.extend(options.extra_env.iter().cloned());
    let mut logs = Vec::new();
    let running = start_together(binary, &env, &ports, work.path(), "serve", &|_| Vec::new());
    logs.extend(running.iter().map(|r| r.log.clone()));
    eprintln!(
        "[{replicas} replica(s)] nginx on {front}, replicas on ports {ports:?} (pids {:?})",
        running.iter().map(|r| r.child.id()).collect::<Vec<_>>()
    );

    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_else(|e| panic!("cannot make an HTTP client: {e}"));
    let seed = runtime.block_on(seed(&client, &front, binary, &env, &receiver, options));
    let mut notes = Vec::new();

    // 1. Reads.
    std::thread::sleep(Duration::from_secs(1));
    let access_log = nginx.access_log();
    let log_from = fs::metadata(&access_log).map_or(0, |m| m.len());
    let pids = Pids::of(&running, &nginx, database.name());
    let cpu_before = CpuSample::take(&pids);
    let reads = reads(options, &work, &front, &seed);
    let reads_cpu = CpuSample::take(&pids).since(&cpu_before);
    let spread = upstream_counts(&access_log, log_from);
    let reads_spread: Vec<usize> = ports
        .iter()
        .map(|port| {
            spread
                .get(&format!("127.0.0.1:{port}"))
                .copied()
                .unwrap_or(0)
        })
        .collect();
    let elsewhere: usize = spread
        .iter()
        .filter(|(upstream, _)| !ports.iter().any(|p| **upstream == format!("127.0.0.1:{p}")))
        .map(|(_, n)| n)
        .sum();
    if elsewhere > 0 {
        notes.push(format!(
            "{elsewhere} reads were logged by nginx with more than one upstream or none (a retry \
             on another replica, or no replica answered): {spread:?}"
        ));
    }

    // 2. Fan-out.
    std::thread::sleep(Duration::from_secs(1));
    let recorded_before: Vec<Option<u64>> =
        running.iter().map(Replica::deliveries_recorded).collect();
    let fanout = runtime.block_on(fanout(options, &client, &front, &seed, &receiver, &pids));
    let fanout_spread: Vec<Option<u64>> = running
        .iter()
        .zip(&recorded_before)
        .map(|(replica, before)| Some(replica.deliveries_recorded()? - (*before)?))
        .collect();
    notes.extend(fanout.notes.iter().cloned());

    // 3. Wake-ups: replica 0 alone delivers, polling once a minute; the others serve only,
    // and nginx sends the changes to them.
    eprintln!("[{replicas} replica(s)] restarting for the wake-ups");
    drop(running);
    let wakeup_replicas = start_together(binary, &env, &ports, work.path(), "wakeup", &|i| {
        if i == 0 {
            vec![("GATEHOUSE_WEBHOOK_POLL_MS", "60000")]
        } else {
            vec![("GATEHOUSE_WORKER", "false")]
        }
    });
    logs.extend(wakeup_replicas.iter().map(|r| r.log.clone()));
    // Fresh nginx workers, with no kept-alive connection to the replicas just stopped.
    let upstreams: Vec<(u16, bool)> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| (*port, replicas == 1 || i > 0))
        .collect();
    nginx.reload(&upstreams);
    std::thread::sleep(Duration::from_secs(1));
    let log_from = fs::metadata(&access_log).map_or(0, |m| m.len());
    let wakeup = runtime.block_on(wakeups(options, &front, &seed, &receiver));
    notes.extend(wakeup.notes.iter().cloned());
    // Who answered the changes (nginx's log) and who delivered them (the replicas' metrics).
    let answered = upstream_counts(&access_log, log_from);
    let by_replica: Vec<String> = ports
        .iter()
        .zip(&wakeup_replicas)
        .enumerate()
        .map(|(i, (port, replica))| {
            let changes = answered
                .get(&format!("127.0.0.1:{port}"))
                .copied()
                .unwrap_or(0);
            let delivered = replica
                .deliveries_recorded()
                .map_or_else(|| "?".to_owned(), |n| n.to_string());
            format!("replica {i} answered {changes} changes and delivered {delivered}")
        })
        .collect();
    notes.push(format!("wake-ups: {}", by_replica.join("; ")));

    drop(wakeup_replicas);
    notes.extend(log_notes(&logs));
    let nginx_errors = nginx.error_log();
    let nginx_errors: Vec<&str> = nginx_errors
        .lines()
        .filter(|line| !line.contains("[notice]"))
        .collect();
    if !nginx_errors.is_empty() {
        notes.push(format!(
            "nginx logged {} errors or warnings, the last: `{}`",
            nginx_errors.len(),
            nginx_errors.last().copied().unwrap_or_default()
        ));
    }
    drop(nginx);
    drop(database);
    Layout {
        replicas,
        reads,
        reads_spread,
        reads_cpu,
        fanout,
        fanout_spread,
        wakeup,
        notes,
    }
}

/// The settings every replica shares.
fn replica_env(
    database_url: &str,
    public_url: &str,
    work: &Path,
    ca_file: &Path,
) -> Vec<(String, String)> {
    [
        ("GATEHOUSE_DATABASE_URL", database_url.to_owned()),
        ("GATEHOUSE_SECRET_KEY", SECRET_KEY.to_owned()),
        // The address clients use, the same on every replica: a token issued by one is valid
        // on the others.
        ("GATEHOUSE_PUBLIC_URL", public_url.to_owned()),
        ("GATEHOUSE_RATE_LIMITS", RATE_LIMITS.to_owned()),
        ("GATEHOUSE_TRUSTED_PROXIES", "127.0.0.1".to_owned()),
        // Every connection comes from one address (nginx's): lift the bound above them.
        ("GATEHOUSE_MAX_CONNECTIONS_PER_IP", "100000".to_owned()),
        ("GATEHOUSE_WEBHOOK_CA_FILE", ca_file.display().to_string()),
        ("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        // One organization makes the whole fan-out: as `just bench`, every slot of a replica
        // may be its share, so that the bound is the cluster-wide one per endpoint in both
        // layouts (the default, 16 a replica, would hold one replica below it).
        ("GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION", "64".to_owned()),
        (
            "GATEHOUSE_MAIL_DIR",
            work.join("mail").display().to_string(),
        ),
        ("GATEHOUSE_LOG", "warn".to_owned()),
        ("GATEHOUSE_LOG_FORMAT", "json".to_owned()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect()
}

/// A port nobody listens on: bound, read, released.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("cannot find a free port on 127.0.0.1: {e}"))
}

/// A running replica; killed when dropped (panics included).
struct Replica {
    child: Child,
    log: PathBuf,
    /// Where it serves `GET /metrics` (`GATEHOUSE_METRICS_BIND`).
    metrics: SocketAddr,
}

impl Replica {
    /// Starts the binary on `port` and waits until `/readyz` answers 200.
    fn start(
        binary: &Path,
        env: &[(String, String)],
        extra: &[(&str, &str)],
        port: u16,
        dir: &Path,
        log: PathBuf,
    ) -> Result<Self, String> {
        let log_file =
            fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let child = Command::new(binary)
            .arg("serve")
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GATEHOUSE_BIND", format!("127.0.0.1:{port}"))
            .env("GATEHOUSE_METRICS_BIND", metrics.to_string())
            .envs(env.iter().map(|(k, v)| (k, v)))
            .envs(extra.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
        let mut replica = Self {
            child,
            log,
            metrics,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let spawned = Instant::now();
        loop {
            if readyz_ok(addr) {
                return Ok(replica);
            }
            if let Ok(Some(status)) = replica.child.try_wait() {
                return Err(format!(
                    "gatehouse on port {port} exited ({status}) before it was ready:\n{}",
                    tail(&replica.log)
                ));
            }
            if spawned.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "gatehouse on port {port} was not ready within {READY_TIMEOUT:?}:\n{}",
                    tail(&replica.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Replica {
    /// The delivery attempts it has recorded so far (`gatehouse_webhook_deliveries_total`, every
    /// outcome), from its metrics; `None` when they cannot be read.
    fn deliveries_recorded(&self) -> Option<u64> {
        let mut stream = TcpStream::connect_timeout(&self.metrics, Duration::from_secs(2)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        stream.read_to_string(&mut text).ok()?;
        let samples: Vec<f64> = text
            .lines()
            .filter(|line| line.starts_with("gatehouse_webhook_deliveries_total{"))
            .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
            .collect();
        (!samples.is_empty()).then(|| samples.iter().sum::<f64>() as u64)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a replica on each port at once (migrations and all, as `scripts/cluster up` does),
/// each with the shared settings and `extra(i)`.
fn start_together(
    binary: &Path,
    env: &[(String, String)],
    ports: &[u16],
    dir: &Path,
    name: &str,
    extra: &(dyn Fn(usize) -> Vec<(&'static str, &'static str)> + Sync),
) -> Vec<Replica> {
    let started: Vec<Result<Replica, String>> = std::thread::scope(|scope| {
        let threads: Vec<_> = ports
            .iter()
            .enumerate()
            .map(|(i, &port)| {
                let log = dir.join(format!("replica-{i}-{name}.log"));
                scope.spawn(move || Replica::start(binary, env, &extra(i), port, dir, log))
            })
            .collect();
        threads
            .into_iter()
            .map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|_| Err("a replica's start panicked".to_owned()))
            })
            .collect()
    });
    let mut replicas = Vec::new();
    let mut failures = Vec::new();
    for result in started {
        match result {
            Ok(replica) => replicas.push(replica),
            Err(message) => failures.push(message),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    replicas
}

/// One plain `GET /readyz` over a fresh connection: did it answer 200?
fn readyz_ok(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request).is_err() {
        return false;
    }
    let mut head = [0_u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<_> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// What the replicas logged at WARN or above: each message once, with a count.
fn log_notes(logs: &[PathBuf]) -> Vec<String> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for log in logs {
        let text = fs::read_to_string(log).unwrap_or_default();
        for line in text.lines() {
            let entry: Value = serde_json::from_str(line)
                .unwrap_or_else(|_| json!({ "level": "?", "fields": { "message": line } }));
            let level = entry["level"].as_str().unwrap_or("?");
            if !matches!(level, "WARN" | "ERROR" | "?") {
                continue;
            }
            let fields = &entry["fields"];
            let mut message = format!("{level} {}", fields["message"].as_str().unwrap_or(""));
            if let Some(error) = fields["error"].as_str() {
                write!(message, " (error: {error})").unwrap();
            }
            match seen.iter_mut().find(|(m, _)| *m == message) {
                Some((_, count)) => *count += 1,
                None => seen.push((message, 1)),
            }
        }
    }
    seen.into_iter()
        .map(|(message, count)| format!("replica logs, {count}×: `{message}`"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Seeding, through nginx
// ---------------------------------------------------------------------------------------------

/// A user with a session, and an organization of theirs with the endpoints.
struct Seed {
    access_token: String,
    team_id: String,
}

async fn seed(
    client: &reqwest::Client,
    front: &str,
    binary: &Path,
    env: &[(String, String)],
    receiver: &TestReceiver,
    options: &Options,
) -> Seed {
    post_json(
        client,
        &format!("{front}/api/v1/auth/register"),
        None,
        &json!({ "email": EMAIL, "password": PASSWORD, "full_name": "Cluster Bench" }),
        201,
    )
    .await;
    let tokens = post_json(
        client,
        &format!("{front}/api/v1/auth/login"),
        None,
        &json!({ "email": EMAIL, "password": PASSWORD }),
        200,
    )
    .await;
    let access_token = tokens["access_token"].as_str().unwrap().to_owned();
    let team = post_json(
        client,
        &format!("{front}/api/v1/organizations"),
        Some((&access_token, None)),
        &json!({ "name": "Cluster Bench Team" }),
        201,
    )
    .await;
    let team_id = team["id"].as_str().unwrap().to_owned();
    // More endpoints than the free plan's five, as an operator allows them.
    let status = Command::new(binary)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(["orgs", "set-plan", &team_id, PLAN])
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", binary.display()));
    assert!(
        status.success(),
        "gatehouse orgs set-plan {team_id} {PLAN}: {status}"
    );
    for i in 0..options.endpoints {
        post_json(
            client,
            &format!("{front}/api/v1/webhooks/endpoints"),
            Some((&access_token, Some(&team_id))),
            &json!({ "url": receiver.url(&format!("/hook/{i}")), "events": ["user.updated"] }),
            201,
        )
        .await;
    }
    Seed {
        access_token,
        team_id,
    }
}

/// POSTs JSON (as a bearer, in an organization) and returns the JSON answer, which must have
/// `status`.
async fn post_json(
    client: &reqwest::Client,
    url: &str,
    auth: Option<(&str, Option<&str>)>,
    body: &Value,
    status: u16,
) -> Value {
    let mut request = client.post(url).json(body);
    if let Some((token, organization)) = auth {
        request = request.bearer_auth(token);
        if let Some(organization) = organization {
            request = request.header("X-Organization-ID", organization);
        }
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let actual = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    assert_eq!(actual, status, "POST {url}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("POST {url}: {e}: {text}"))
}

/// One change: `PATCH /users/me` with a new name. Whether it answered 200.
async fn rename(client: &reqwest::Client, url: &str, token: &str, name: &str) -> bool {
    let response = client
        .patch(url)
        .bearer_auth(token)
        .json(&json!({ "full_name": name }))
        .send()
        .await;
    matches!(&response, Ok(r) if r.status() == 200)
}

/// The name a delivery's event carries (`data.full_name`), unique to the change that made it.
fn delivered_name(request: &ReceivedRequest) -> Option<String> {
    let payload: Value = serde_json::from_slice(&request.body).ok()?;
    payload["data"]["full_name"].as_str().map(str::to_owned)
}

/// `later - earlier` in milliseconds, negative when `later` is earlier.
fn ms_between(earlier: SystemTime, later: SystemTime) -> f64 {
    match later.duration_since(earlier) {
        Ok(after) => after.as_secs_f64() * 1000.0,
        Err(before) => -before.duration().as_secs_f64() * 1000.0,
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Reads, with wrk
// ---------------------------------------------------------------------------------------------

fn reads(options: &Options, work: &tempfile::TempDir, front: &str, seed: &Seed) -> WrkResult {
    let script = work.path().join("read.lua");
    let lua = format!(
        "wrk.method = \"GET\"\nwrk.headers[\"Authorization\"] = [==[Bearer {}]==]\n",
        seed.access_token
    );
    fs::write(&script, lua).unwrap_or_else(|e| panic!("cannot write {}: {e}", script.display()));
    let url = format!("{front}/api/v1/organizations/{}", seed.team_id);
    let threads = cores().min(options.connections);
    eprintln!(
        "wrk -t{threads} -c{} -d{}s {url}",
        options.connections, options.seconds
    );
    let output = Command::new("wrk")
        .arg(format!("-t{threads}"))
        .arg(format!("-c{}", options.connections))
        .arg(format!("-d{}s", options.seconds))
        .arg("--latency")
        .arg("-s")
        .arg(&script)
        .arg(&url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run wrk (apt-get install wrk): {e}"));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_wrk(&text).unwrap_or_else(|| panic!("cannot read wrk's output:\n{text}"))
}

/// Requests in nginx's access log after byte `from`, by the upstream that answered them
/// (`upstream=127.0.0.1:PORT`; a retried request names each one it tried).
fn upstream_counts(log: &Path, from: u64) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    let Ok(mut file) = fs::File::open(log) else {
        return counts;
    };
    let mut text = String::new();
    if file.seek(SeekFrom::Start(from)).is_err() || file.read_to_string(&mut text).is_err() {
        return counts;
    }
    for line in text.lines() {
        let upstream = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("upstream="))
            .unwrap_or("-");
        *counts.entry(upstream.to_owned()).or_insert(0) += 1;
    }
    counts
}

// ---------------------------------------------------------------------------------------------
// 2. Webhook fan-out
// ---------------------------------------------------------------------------------------------

struct Fanout {
    /// CPU from the first change sent to the last delivery received.
    cpu: Cpu,
    /// Changes answered 200, and how long all the changes took.
    acknowledged: usize,
    changes_took: Duration,
    expected: usize,
    /// Distinct deliveries received (by `X-Service-Delivery-Id`).
    delivered: usize,
    per_sec: f64,
    /// From each change's answer to the receipt of each of its deliveries.
    p50_ms: f64,
    p99_ms: f64,
    notes: Vec<String>,
}

async fn fanout(
    options: &Options,
    client: &reqwest::Client,
    front: &str,
    seed: &Seed,
    receiver: &TestReceiver,
    pids: &Pids,
) -> Fanout {
    let before = receiver.requests().len();
    let cpu_before = CpuSample::take(pids);
    let url = format!("{front}/api/v1/users/me");
    let answered: Arc<Mutex<HashMap<String, SystemTime>>> = Arc::default();
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    eprintln!(
        "fan-out: {} changes × {} endpoints through {front}",
        options.changes, options.endpoints
    );
    let first_sent = SystemTime::now();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..PATCH_CONCURRENCY {
        let (client, url, token) = (client.clone(), url.clone(), seed.access_token.clone());
        let (next, failed, answered) = (next.clone(), failed.clone(), answered.clone());
        let changes = options.changes;
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= changes {
                    break;
                }
                let name = format!("Fan-out {i}");
                if rename(&client, &url, &token, &name).await {
                    answered.lock().unwrap().insert(name, SystemTime::now());
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }
    let changes_took = started.elapsed();
    let answered = answered.lock().unwrap().clone();
    let expected = answered.len() * options.endpoints;
    let arrived = tokio::time::timeout(
        FANOUT_TIMEOUT,
        receiver.wait_for(before + expected, Duration::from_secs(24 * 3600)),
    )
    .await;
    let cpu = CpuSample::take(pids).since(&cpu_before);
    if arrived.is_ok() {
        settle(receiver).await;
    }
    let requests = receiver.requests().split_off(before);
    let mut seen = HashSet::new();
    let firsts: Vec<&ReceivedRequest> = requests
        .iter()
        .filter(|request| seen.insert(request.header("x-service-delivery-id").map(str::to_owned)))
        .collect();
    let last = firsts.iter().map(|r| r.received_at).max();
    let span = last.map_or(0.0, |last| ms_between(first_sent, last) / 1000.0);
    let mut latencies: Vec<f64> = firsts
        .iter()
        .filter_map(|request| {
            let answered = answered.get(&delivered_name(request)?)?;
            Some(ms_between(*answered, request.received_at))
        })
        .collect();
    let mut notes = Vec::new();
    let failed = failed.load(Ordering::Relaxed);
    if failed > 0 {
        notes.push(format!(
            "fan-out: **{failed} changes were not answered 200**"
        ));
    }
    if firsts.len() < expected {
        notes.push(format!(
            "fan-out: **the receiver got {} of {expected} deliveries** (waited up to \
             {FANOUT_TIMEOUT:?})",
            firsts.len()
        ));
    }
    if requests.len() > firsts.len() {
        notes.push(format!(
            "fan-out: **{} deliveries arrived more than once** (same `X-Service-Delivery-Id`)",
            requests.len() - firsts.len()
        ));
    }
    let repeated = receiver.repeated_at_once();
    if !repeated.is_empty() {
        notes.push(format!(
            "fan-out: **{} deliveries were sent twice at once**",
            repeated.len()
        ));
    }
    let early = latencies.iter().filter(|ms| **ms < 0.0).count();
    if early > 0 {
        notes.push(format!(
            "fan-out: {early} of {} deliveries reached the receiver before their change's answer \
             reached the client (negative latencies, counted as they are)",
            latencies.len()
        ));
    }
    notes.push(format!(
        "fan-out: at most {} deliveries were at the receiver at once (it answers at once; \
         the per-endpoint bound, {PER_ENDPOINT} in all replicas together, is checked with a slow \
         receiver by `tests/cluster.rs`)",
        receiver.most_in_flight()
    ));
    Fanout {
        cpu,
        acknowledged: answered.len(),
        changes_took,
        expected,
        delivered: firsts.len(),
        per_sec: if span > 0.0 {
            firsts.len() as f64 / span
        } else {
            0.0
        },
        p50_ms: percentile(&mut latencies, 0.50),
        p99_ms: percentile(&mut latencies, 0.99),
        notes,
    }
}

/// Waits until nothing more has arrived for two seconds (late duplicates, stray events).
async fn settle(receiver: &TestReceiver) {
    loop {
        let count = receiver.requests().len();
        let more = tokio::time::timeout(
            Duration::from_secs(2),
            receiver.wait_for(count + 1, Duration::from_secs(24 * 3600)),
        )
        .await;
        if more.is_err() {
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Wake-ups
// ---------------------------------------------------------------------------------------------

struct Wakeup {
    /// From each change's answer to its first delivery, and to its last.
    first_ms: Vec<f64>,
    all_ms: Vec<f64>,
    notes: Vec<String>,
}

async fn wakeups(options: &Options, front: &str, seed: &Seed, receiver: &TestReceiver) -> Wakeup {
    // A client of its own: nginx has just reloaded, and closes the old connections.
    let client = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_else(|e| panic!("cannot make an HTTP client: {e}"));
    let url = format!("{front}/api/v1/users/me");
    let (mut first_ms, mut all_ms) = (Vec::new(), Vec::new());
    let (mut failed, mut missed) = (0, 0);
    eprintln!(
        "wake-ups: {} changes one at a time ({WAKEUP_WARMUP} more first, not counted)",
        options.wakeups
    );
    for i in 0..WAKEUP_WARMUP + options.wakeups {
        let counted = i >= WAKEUP_WARMUP;
        let before = receiver.requests().len();
        let name = format!("Wake-up {i}");
        if !rename(&client, &url, &seed.access_token, &name).await {
            failed += 1;
            continue;
        }
        let answered = SystemTime::now();
        let all_there = tokio::time::timeout(
            WAKEUP_TIMEOUT,
            receiver.wait_for(before + options.endpoints, Duration::from_secs(24 * 3600)),
        )
        .await
        .is_ok();
        let received: Vec<SystemTime> = receiver.requests()[before..]
            .iter()
            .filter(|request| delivered_name(request).as_deref() == Some(name.as_str()))
            .map(|request| request.received_at)
            .collect();
        if !counted {
            continue;
        }
        if !all_there || received.len() < options.endpoints {
            missed += 1;
        }
        if let (Some(first), Some(last)) = (received.iter().min(), received.iter().max()) {
            first_ms.push(ms_between(answered, *first));
            all_ms.push(ms_between(answered, *last));
        }
        // The delivering replica goes back to waiting.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut notes = Vec::new();
    if failed > 0 {
        notes.push(format!(
            "wake-ups: **{failed} changes were not answered 200**"
        ));
    }
    if missed > 0 {
        notes.push(format!(
            "wake-ups: **{missed} changes did not have all their deliveries within \
             {WAKEUP_TIMEOUT:?}**"
        ));
    }
    Wakeup {
        first_ms,
        all_ms,
        notes,
    }
}

// ---------------------------------------------------------------------------------------------
// CPU, from /proc
// ---------------------------------------------------------------------------------------------

/// The processes of a layout.
struct Pids {
    replicas: Vec<u32>,
    nginx: u32,
    /// This layout's database: its backends name it in their command line.
    database: String,
}

impl Pids {
    fn of(replicas: &[Replica], nginx: &Nginx, database: &str) -> Self {
        Self {
            replicas: replicas.iter().map(|r| r.child.id()).collect(),
            nginx: nginx.pid(),
            database: database.to_owned(),
        }
    }
}

/// CPU time so far, in ticks, by part.
#[derive(Default)]
struct CpuSample {
    at: Option<Instant>,
    replicas: u64,
    nginx: u64,
    postgres: u64,
    /// This process (the receiver, the client) and its children that ended (`wrk`).
    bench: u64,
    /// Every CPU's busy time (`/proc/stat`).
    machine: u64,
    /// Context switches on every CPU (`/proc/stat`'s `ctxt`).
    switches: u64,
}

/// CPU used over an interval, in cores (CPU-seconds a second).
struct Cpu {
    secs: f64,
    replicas: f64,
    nginx: f64,
    postgres: f64,
    bench: f64,
    other: f64,
    /// Context switches a second, the whole machine.
    switches: f64,
}

impl CpuSample {
    fn take(pids: &Pids) -> Self {
        let mut sample = Self {
            at: Some(Instant::now()),
            ..Self::default()
        };
        let own = std::process::id();
        let Ok(entries) = fs::read_dir("/proc") else {
            return sample;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(stat) = ProcStat::read(pid) else {
                continue;
            };
            if pid == own {
                sample.bench += stat.ticks + stat.children_ticks;
            } else if pids.replicas.contains(&pid) {
                sample.replicas += stat.ticks;
            } else if pid == pids.nginx || stat.parent == pids.nginx {
                sample.nginx += stat.ticks;
            } else if stat.command == "postgres" {
                // This database's backends, and the server's own processes; not the backends
                // of other databases (another program's tests).
                let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline);
                if cmdline.contains(&pids.database) || !cmdline.contains("gatehouse_test_") {
                    sample.postgres += stat.ticks;
                }
            }
        }
        let (machine, switches) = machine_ticks_and_switches().unwrap_or_default();
        sample.machine = machine;
        sample.switches = switches;
        sample
    }

    fn since(&self, before: &Self) -> Cpu {
        let secs = match (self.at, before.at) {
            (Some(now), Some(then)) => now.duration_since(then).as_secs_f64(),
            _ => 0.0,
        };
        let cores = |now: u64, then: u64| {
            if secs > 0.0 {
                now.saturating_sub(then) as f64 / TICKS_PER_SEC / secs
            } else {
                0.0
            }
        };
        let replicas = cores(self.replicas, before.replicas);
        let nginx = cores(self.nginx, before.nginx);
        let postgres = cores(self.postgres, before.postgres);
        let bench = cores(self.bench, before.bench);
        let machine = cores(self.machine, before.machine);
        let switches = self.switches.saturating_sub(before.switches) as f64 / secs.max(1e-9);
        Cpu {
            secs,
            switches,
            replicas,
            nginx,
            postgres,
            bench,
            other: (machine - replicas - nginx - postgres - bench).max(0.0),
        }
    }
}

struct ProcStat {
    command: String,
    parent: u32,
    /// User and system time.
    ticks: u64,
    /// Of the children it waited for.
    children_ticks: u64,
}

impl ProcStat {
    fn read(pid: u32) -> Option<Self> {
        let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let command = text.get(open + 1..close)?.to_owned();
        // Fields from the 3rd (state) on.
        let fields: Vec<&str> = text.get(close + 2..)?.split_whitespace().collect();
        let field = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
        Some(Self {
            command,
            parent: u32::try_from(field(4)?).ok()?,
            ticks: field(14)? + field(15)?,
            children_ticks: field(16)? + field(17)?,
        })
    }
}

/// All CPUs' busy time so far (`/proc/stat`'s first line less idle and iowait), in ticks, and
/// the context switches so far.
fn machine_ticks_and_switches() -> Option<(u64, u64)> {
    let text = fs::read_to_string("/proc/stat").ok()?;
    let switches = text
        .lines()
        .find_map(|line| line.strip_prefix("ctxt "))?
        .trim()
        .parse()
        .ok()?;
    let line = text.lines().next()?.strip_prefix("cpu ")?;
    let values: Vec<u64> = line
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is within user).
    let total: u64 = values.iter().take(8).sum();
    Some((total - values.get(3)? - values.get(4)?, switches))
}

// ---------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------

fn render(options: &Options, layouts: &[Layout]) -> String {
    let name = |n: usize| {
        if n == 1 {
            "1 replica".to_owned()
        } else {
            format!("{n} replicas")
        }
    };
    let mut out = String::from("\n## Through nginx\n\n|  |");
    for layout in layouts {
        write!(out, " {} |", name(layout.replicas)).unwrap();
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(layouts.len()));
    out.push('\n');
    let mut row = |label: String, cell: &dyn Fn(&Layout) -> String| {
        write!(out, "| {label} |").unwrap();
        for layout in layouts {
            write!(out, " {} |", cell(layout)).unwrap();
        }
        out.push('\n');
    };
    row(
        format!(
            "Reads, `GET /organizations/{{id}}` ({} conns, {} s)",
            options.connections, options.seconds
        ),
        &|l| {
            let mut text = format!(
                "{}/s · p50 {} · p99 {}",
                group(l.reads.requests_per_sec),
                ms(l.reads.p50_ms),
                ms(l.reads.p99_ms)
            );
            if !l.reads.errors.is_empty() {
                write!(text, " (**{}**)", l.reads.errors.join(", ")).unwrap();
            }
            text
        },
    );
    row("Reads answered by each replica".to_owned(), &|l| {
        let total: usize = l.reads_spread.iter().sum();
        let shares: Vec<String> = l
            .reads_spread
            .iter()
            .map(|n| format!("{:.0} %", *n as f64 * 100.0 / total.max(1) as f64))
            .collect();
        shares.join(" · ")
    });
    row(
        "CPU during the reads, cores: replicas · nginx · PostgreSQL · bench and wrk · other"
            .to_owned(),
        &|l| l.reads_cpu.summary(),
    );
    row(
        "… per read: CPU of the replicas · nginx · PostgreSQL; context switches (machine)"
            .to_owned(),
        &|l| l.reads_cpu.per(l.reads.requests_per_sec * l.reads_cpu.secs),
    );
    row(
        format!(
            "{} changes (`PATCH /users/me`, {PATCH_CONCURRENCY} at a time)",
            options.changes
        ),
        &|l| {
            format!(
                "{}/s",
                group(l.fanout.acknowledged as f64 / l.fanout.changes_took.as_secs_f64())
            )
        },
    );
    row(
        format!(
            "Fan-out, {} endpoints × {} changes: deliveries/s, first change → last receipt",
            options.endpoints, options.changes
        ),
        &|l| {
            let mut text = format!("{}/s", group(l.fanout.per_sec));
            if l.fanout.delivered < l.fanout.expected {
                write!(
                    text,
                    " (**{} of {}**)",
                    l.fanout.delivered, l.fanout.expected
                )
                .unwrap();
            }
            text
        },
    );
    row(
        "Fan-out latency, change answered → delivery received".to_owned(),
        &|l| format!("p50 {} · p99 {}", ms(l.fanout.p50_ms), ms(l.fanout.p99_ms)),
    );
    row("Deliveries made by each replica".to_owned(), &|l| {
        let total: u64 = l.fanout_spread.iter().flatten().sum();
        let shares: Vec<String> = l
            .fanout_spread
            .iter()
            .map(|n| match n {
                Some(n) => format!("{:.0} %", *n as f64 * 100.0 / total.max(1) as f64),
                None => "?".to_owned(),
            })
            .collect();
        shares.join(" · ")
    });
    row(
        "CPU during the fan-out, cores: replicas · nginx · PostgreSQL · bench · other".to_owned(),
        &|l| l.fanout.cpu.summary(),
    );
    row(
        "… per delivery: CPU of the replicas · nginx · PostgreSQL; context switches (machine)"
            .to_owned(),
        &|l| l.fanout.cpu.per(l.fanout.delivered as f64),
    );
    row(
        format!(
            "One change at a time ({}): answered → first delivery, p50 · p99 · max",
            options.wakeups
        ),
        &|l| spread(&l.wakeup.first_ms),
    );
    row(
        format!("… → all {} deliveries, p50 · p99 · max", options.endpoints),
        &|l| spread(&l.wakeup.all_ms),
    );
    row(
        "… who answers the change, who delivers it".to_owned(),
        &|l| {
            if l.replicas == 1 {
                "the one replica (polls once a minute)".to_owned()
            } else {
                format!(
                    "{} replicas with `GATEHOUSE_WORKER=false`; replica 0, polling once a \
                     minute, woken by `NOTIFY`",
                    l.replicas - 1
                )
            }
        },
    );
    for layout in layouts {
        if layout.notes.is_empty() {
            continue;
        }
        write!(out, "\n{}:\n\n", name(layout.replicas)).unwrap();
        for note in &layout.notes {
            writeln!(out, "- {note}").unwrap();
        }
    }
    out
}

impl Cpu {
    fn summary(&self) -> String {
        format!(
            "{:.2} · {:.2} · {:.2} · {:.2} · {:.2}",
            self.replicas, self.nginx, self.postgres, self.bench, self.other
        )
    }

    /// CPU time per unit of work (`units` over the interval), in µs: the replicas, nginx and
    /// PostgreSQL; and context switches per unit.
    fn per(&self, units: f64) -> String {
        if units <= 0.0 || self.secs <= 0.0 {
            return "n/a".to_owned();
        }
        let us = |cores: f64| cores * self.secs * 1e6 / units;
        format!(
            "{:.0} · {:.0} · {:.0} µs; {:.1} switches",
            us(self.replicas),
            us(self.nginx),
            us(self.postgres),
            self.switches * self.secs / units
        )
    }
}

/// `p50 · p99 · max` of latencies in ms.
fn spread(values: &[f64]) -> String {
    let mut values = values.to_vec();
    let max = values.iter().copied().fold(f64::NAN, f64::max);
    format!(
        "{} · {} · {}",
        ms(percentile(&mut values, 0.50)),
        ms(percentile(&mut values, 0.99)),
        ms(max)
    )
}

/// The nearest-rank percentile (`p` in 0..=1); NaN for no values.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = (p * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

/// A rate with thousands separators: `12,345`; one decimal below 100.
fn group(value: f64) -> String {
    if value < 100.0 {
        return format!("{value:.1}");
    }
    let digits = format!("{value:.0}");
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds, with precision that suits their size (negative ones too).
fn ms(value: f64) -> String {
    if value.is_nan() {
        "n/a".to_owned()
    } else if value.abs() < 10.0 {
        format!("{value:.2} ms")
    } else if value.abs() < 100.0 {
        format!("{value:.1} ms")
    } else {
        format!("{value:.0} ms")
    }
}
