//! `just bench`: each hot path of the real `gatehouse` binary, measured next to its physical
//! limit on the same machine in the same run.
//!
//! ```text
//! cargo bench -p gatehouse-server --bench load -- [--backend sqlite|postgres|both]
//!                                                 [--duration SECS] [--out FILE]
//!                                                 [--only reads,logins,refreshes,org-refreshes,
//!                                                         fanout,steady,client-credentials,
//!                                                         introspect,userinfo,code-exchange]
//!                                                 [--binary PATH] [--server-cpus LIST]
//!                                                 [--client-cpus LIST] [--read-connections N]
//!                                                 [--env NAME=VALUE]...
//! ```
//!
//! `--binary` runs another build of `gatehouse` (the commit before a change, say) under the same
//! load; `--server-cpus 0` (or `0-3`, `0,2`) pins the server to those CPUs with `taskset` and
//! `wrk` to the others (one `wrk` thread each), to see how a row grows with cores;
//! `--client-cpus 12-15` gives `wrk` those CPUs instead (leaving the rest to a database), and
//! `--read-connections 256` keeps more requests in flight on many cores.
//!
//! `--only` runs some of the phases (all by default), to iterate on one row or to profile it.
//!
//! For each backend a fresh server runs on 127.0.0.1 (a temporary SQLite file, or a fresh
//! PostgreSQL database from `gatehouse-testkit`). The service is loaded by `wrk` only; the limits
//! are computed in this process:
//!
//! 1. password logins/s against argon2id hashes/s (m=19456, t=2, p=1) on 2 × cores threads;
//! 2. refreshes/s against RS256 (2048-bit) signatures/s on `cores` threads, plain and of a
//!    session scoped to an `enterprise` team (issue 31: every such refresh admits the user to
//!    the organization again, membership, IP allowlist, MFA and SSO, before it signs);
//! 3. authenticated reads against `GET /readyz` of the same server;
//! 4. webhook fan-out (10 endpoints × 1,000 changes) into a local HTTPS receiver, against what
//!    a plain hyper client gets from the same kind of receiver;
//! 5. resident memory and time to ready, against the targets;
//! 6. the OAuth endpoints (issue 36), for an application of an `enterprise` team:
//!    - `client_credentials` grants/s (each signs a machine token) against RS256 signatures/s;
//!    - introspections/s of the code flow's access token (the client authenticated by
//!      `client_secret_post`) and userinfo/s with that token (scope `openid email profile`),
//!      which verify and read but sign nothing, against `GET /readyz`;
//!    - authorization-code exchanges/s: a loop in this process (a code is single-use, so `wrk`
//!      cannot replay one) that asks `/oauth/authorize` for a code with the signed-in person's
//!      cookie and exchanges it (then, untimed, revokes the grant, so that the user stays under
//!      100 concurrent sessions); each exchange signs an access and an ID token, so its limit is
//!      half the RS256 signatures/s.
//!
//! The phases run in the order 3, 1, 2, 6, 4 (so that row 3's memory peak is not what row 1's
//! hashes left behind); the notes under each table give the resident memory after every phase,
//! deliveries that arrived twice, and whatever the server logged at WARN or above.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/receipts.rs"]
mod receipts;
#[path = "support/server.rs"]
mod server;
#[path = "support/wrk.rs"]
mod wrk;

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant, SystemTime},
};

use gatehouse_delivery::test_receiver::{ReceivedRequest, TestReceiver};
use gatehouse_testkit::TestDatabase;
use receipts::{commit_to_receipt_ms, first_arrivals};
use serde_json::{json, Value};
use server::{
    cores, find_on_path, group, mb, meminfo_kb, ms, percentile, post_json, rename,
    server_log_notes, RssSampler, Server,
};
use time::OffsetDateTime;
use tokio::runtime::Runtime;
use wrk::{parse_wrk, WrkResult};

const BINARY: &str = env!("CARGO_BIN_EXE_gatehouse");
const EMAIL: &str = "bench@example.com";
/// The user the login row signs in, over and over. Each login opens a session, and past 100 a
/// user's oldest sessions end: were it the bench user, the login row would end the session
/// every later row's tokens and hosted sign-in belong to.
const LOGIN_EMAIL: &str = "logins@example.com";
const PASSWORD: &str = "correct horse battery staple";
const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
/// So high that the limiter never refuses.
const RATE_LIMITS: &str =
    "free=100000000,starter=100000000,pro=100000000,business=100000000,enterprise=100000000";
/// How long each in-process limit is measured.
const LIMIT_SECS: f64 = 3.0;
/// Connections for the read row unless `--read-connections` says otherwise.
const READ_CONNECTIONS: usize = 64;
const ENDPOINTS: usize = 10;
const CHANGES: usize = 1_000;
/// Concurrent `PATCH /users/me` while seeding the fan-out (not the measured load).
const PATCH_CONCURRENCY: usize = 16;
/// Changes a second offered by the steady fan-out row (× `ENDPOINTS` deliveries).
const STEADY_CHANGES_PER_SEC: usize = 200;
const FANOUT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the server is left alone before its idle memory is read: password hashing gives
/// its working areas back 3 to 4 s after their last use.
const SETTLE: Duration = Duration::from_secs(5);
/// Issue 50's goal for the memory after the phases (it was 60 MB before).
const RSS_TARGET: &str = "< 40 MB";
const READY_TARGET: &str = "< 300 ms";
/// The OAuth rows' application sends its users back here (nothing listens: the code is read
/// from the redirect).
const CALLBACK: &str = "https://app.example.com/callback";
/// The code flow's scope: an ID token and userinfo, no API scope (so no consent to give).
const OAUTH_SCOPE: &str = "openid email profile";
/// The machine tokens' scope.
const MACHINE_SCOPE: &str = "org:read";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

/// The measured phases, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reads,
    Logins,
    Refreshes,
    OrgRefreshes,
    ClientCredentials,
    Introspect,
    Userinfo,
    CodeExchange,
    Steady,
    Fanout,
}

impl Phase {
    const ALL: [Self; 10] = [
        Self::Reads,
        Self::Logins,
        Self::Refreshes,
        Self::OrgRefreshes,
        Self::ClientCredentials,
        Self::Introspect,
        Self::Userinfo,
        Self::CodeExchange,
        Self::Steady,
        Self::Fanout,
    ];

    fn name(self) -> &'static str {
        match self {
            Self::Reads => "reads",
            Self::Logins => "logins",
            Self::Refreshes => "refreshes",
            Self::OrgRefreshes => "org-refreshes",
            Self::ClientCredentials => "client-credentials",
            Self::Introspect => "introspect",
            Self::Userinfo => "userinfo",
            Self::CodeExchange => "code-exchange",
            Self::Steady => "steady",
            Self::Fanout => "fanout",
        }
    }
}

struct Options {
    backends: Vec<Backend>,
    duration: u64,
    out: Option<PathBuf>,
    phases: Vec<Phase>,
    /// The server binary: this build's `gatehouse` unless `--binary` names another (an older
    /// build, to measure before and after in one sitting).
    binary: PathBuf,
    /// `--server-cpus 0` or `0-3`: the server runs under `taskset -c` on these CPUs, and `wrk` on
    /// the others when there are any (a scaling row: the same load on 1, 2, ... cores).
    server_cpus: Option<String>,
    /// `--env NAME=VALUE`, repeatable: more settings for the server (an experiment with
    /// `GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY`, say); the bench's own come first.
    extra_env: Vec<(String, String)>,
    /// `--client-cpus LIST`: `wrk`'s CPUs instead of all those the server does not have (to
    /// leave some to a database on the same machine).
    client_cpus: Option<String>,
    /// `--read-connections N`: `wrk`'s connections for the read row and its `/readyz`
    /// (64 by default; more to keep many cores busy).
    read_connections: usize,
}

/// One line of a table.
struct Row {
    name: String,
    measured: String,
    limit: String,
    ratio: String,
}

impl Row {
    fn new(
        name: impl Into<String>,
        measured: impl Into<String>,
        limit: impl Into<String>,
        ratio: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            measured: measured.into(),
            limit: limit.into(),
            ratio: ratio.into(),
        }
    }
}

fn main() {
    let options = parse_args();
    if find_on_path("wrk").is_none() {
        eprintln!("install wrk: apt-get install wrk");
        std::process::exit(1);
    }
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut report = header(&options);
    print!("{report}");
    for &backend in &options.backends {
        let section = run_backend(&runtime, backend, &options);
        print!("{section}");
        report.push_str(&section);
    }
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
    let usage = "usage: load [--backend sqlite|postgres|both] [--duration SECS] [--out FILE] \
                 [--only reads,logins,refreshes,org-refreshes,fanout,steady,\
                 client-credentials,introspect,userinfo,code-exchange] [--binary PATH] \
                 [--server-cpus LIST] [--client-cpus LIST] [--read-connections N] \
                 [--env NAME=VALUE]...";
    let mut options = Options {
        backends: vec![Backend::Sqlite, Backend::Postgres],
        duration: 10,
        out: None,
        phases: Phase::ALL.to_vec(),
        binary: PathBuf::from(BINARY),
        server_cpus: None,
        extra_env: Vec::new(),
        read_connections: READ_CONNECTIONS,
        client_cpus: None,
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
        match flag.as_str() {
            // `cargo bench` passes this to every bench binary.
            "--bench" => {}
            "--backend" => {
                options.backends = match value().as_str() {
                    "sqlite" => vec![Backend::Sqlite],
                    "postgres" => vec![Backend::Postgres],
                    "both" => vec![Backend::Sqlite, Backend::Postgres],
                    other => {
                        eprintln!("unknown backend {other:?}\n{usage}");
                        std::process::exit(2)
                    }
                }
            }
            "--duration" => {
                options.duration = value()
                    .parse()
                    .ok()
                    .filter(|secs| *secs > 0)
                    .unwrap_or_else(|| {
                        eprintln!("--duration takes a whole number of seconds\n{usage}");
                        std::process::exit(2)
                    });
            }
            "--out" => options.out = Some(PathBuf::from(value())),
            "--binary" => options.binary = PathBuf::from(value()),
            "--env" => {
                let setting = value();
                let Some((name, value)) = setting.split_once('=') else {
                    eprintln!("--env takes NAME=VALUE\n{usage}");
                    std::process::exit(2)
                };
                options.extra_env.push((name.to_owned(), value.to_owned()));
            }
            "--client-cpus" => options.client_cpus = Some(cpus_arg(&flag, value(), usage)),
            "--read-connections" => {
                options.read_connections =
                    value().parse().ok().filter(|n| *n > 0).unwrap_or_else(|| {
                        eprintln!("--read-connections takes a whole number\n{usage}");
                        std::process::exit(2)
                    });
            }
            "--server-cpus" => options.server_cpus = Some(cpus_arg(&flag, value(), usage)),
            "--only" => {
                let wanted = value();
                let mut phases = Vec::new();
                for name in wanted.split(',').map(str::trim) {
                    let Some(phase) = Phase::ALL.into_iter().find(|p| p.name() == name) else {
                        eprintln!("unknown phase {name:?}\n{usage}");
                        std::process::exit(2)
                    };
                    phases.push(phase);
                }
                // Always in the documented order.
                options.phases = Phase::ALL
                    .into_iter()
                    .filter(|p| phases.contains(p))
                    .collect();
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

/// A `--…-cpus` flag's value, which must be a CPU list; exits with the usage otherwise.
fn cpus_arg(flag: &str, cpus: String, usage: &str) -> String {
    if cpu_list(&cpus).is_none() {
        eprintln!("{flag} takes a CPU list such as 0 or 0-3\n{usage}");
        std::process::exit(2)
    }
    cpus
}

/// The CPUs a `taskset -c` list names (`0`, `0-3`, `0,2-3`); `None` when it does not parse.
fn cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim) {
        match part.split_once('-') {
            Some((first, last)) => cpus.extend(first.parse::<usize>().ok()?..=last.parse().ok()?),
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

impl Options {
    /// How many cores the server runs on: those of `--server-cpus`, else all.
    fn server_cores(&self) -> usize {
        self.server_cpus
            .as_deref()
            .and_then(cpu_list)
            .map_or_else(cores, |cpus| cpus.len())
    }

    /// The CPUs left to `wrk` when the server is pinned: those of `--client-cpus`, else every
    /// other one, if any.
    fn client_cpus(&self) -> Option<String> {
        if let Some(cpus) = &self.client_cpus {
            return Some(cpus.clone());
        }
        let server = cpu_list(self.server_cpus.as_deref()?)?;
        let others: Vec<String> = (0..cores())
            .filter(|cpu| !server.contains(cpu))
            .map(|cpu| cpu.to_string())
            .collect();
        (!others.is_empty()).then(|| others.join(","))
    }
}

fn header(options: &Options) -> String {
    let memory = meminfo_kb("MemTotal").map_or_else(
        || "unknown".to_owned(),
        |kb| format!("{:.1} GiB", kb as f64 / 1024.0 / 1024.0),
    );
    let backends: Vec<_> = options.backends.iter().map(|b| b.name()).collect();
    format!(
        "# Gatehouse load benchmark\n\n\
         - date: {} UTC\n\
         - machine: {} cores, {memory} RAM\n\
         - backend: {}\n\
         - wrk: {} s per row; in-process limits: {LIMIT_SECS:.0} s each, on the server's cores\n\
         - server: {}{}\n\
         - everything (server, wrk, database, receiver, limits) shares this machine\n",
        OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second]"
            ))
            .unwrap_or_default(),
        cores(),
        backends.join(", "),
        options.duration,
        match &options.server_cpus {
            Some(cpus) => format!(
                "pinned to CPU {cpus} ({} cores), wrk to {}",
                options.server_cores(),
                options.client_cpus().unwrap_or_else(|| "the same".into())
            ),
            None => format!("all {} cores, shared with wrk", cores()),
        },
        options
            .extra_env
            .iter()
            .map(|(k, v)| format!("; {k}={v}"))
            .collect::<String>(),
    )
}

// ---------------------------------------------------------------------------------------------
// One backend
// ---------------------------------------------------------------------------------------------

fn run_backend(runtime: &Runtime, backend: Backend, options: &Options) -> String {
    let name = backend.name();
    eprintln!("\n[{name}] preparing");
    let work = tempfile::tempdir().unwrap();
    // The receiver must exist before the server starts: the server trusts its CA.
    let receiver = runtime.block_on(TestReceiver::start());
    // PostgreSQL's database is dropped after the server; SQLite's file goes with `work`.
    let (database, url) = match backend {
        Backend::Sqlite => (None, gatehouse_testkit::sqlite_url(&work)),
        Backend::Postgres => {
            let db = runtime.block_on(TestDatabase::create());
            let url = db.url().to_owned();
            (Some(db), url)
        }
    };
    let env = server_env(&url, work.path(), receiver.ca_pem_path());

    let mut rows = Vec::new();
    let mut notes = Vec::new();

    // Row 5 (start-up): on the fresh database (migrations, first signing key), then again on
    // the database as it was left.
    let (first, fresh_ms) = start_server(options, &env, &work.path().join("server-first.log"));
    drop(first);
    let (server, existing_ms) = start_server(options, &env, &work.path().join("server.log"));
    eprintln!(
        "[{name}] ready in {fresh_ms:.0} ms (fresh) / {existing_ms:.0} ms (existing); pid {} \
         (to profile: perf record -g -p {})",
        server.pid, server.pid
    );

    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let set_plan = |team: &str, plan: &str| {
        let status = Command::new(&options.binary)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v)))
            .args(["orgs", "set-plan", team, plan])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "gatehouse orgs set-plan {team} {plan}: {status}"
        );
    };
    let seed = runtime.block_on(seed_data(&client, &server.base, &receiver, &set_plan));
    std::thread::sleep(SETTLE);
    let idle_kb = server.rss_kb();

    let bench = Bench {
        base: server.base.clone(),
        client_cpus: options.client_cpus(),
        server_cpus: options.server_cpus.clone(),
        cores: options.server_cores(),
        read_connections: options.read_connections,
        scripts: work.path().to_owned(),
        duration: options.duration,
        name,
    };
    // Row 3 runs first, so that its memory peak is the read path's own and not what the
    // argon2id hashes of row 1 leave behind (the memory note shows both).
    let mut after = Vec::new();
    let mut peaks = Vec::new();
    let mut reads_peak_kb = None;
    let mut fanout_notes = Vec::new();
    for &phase in &options.phases {
        let sampler = RssSampler::start(server.pid);
        let row = match phase {
            Phase::Reads => row_reads(&bench, &seed),
            Phase::Logins => row_logins(&bench),
            Phase::Refreshes => row_refreshes(&bench, &seed),
            Phase::OrgRefreshes => row_org_refreshes(&bench, &seed),
            Phase::ClientCredentials => row_client_credentials(&bench, &seed.oauth),
            Phase::Introspect => row_introspect(&bench, &seed.oauth),
            Phase::Userinfo => row_userinfo(&bench, &seed.oauth),
            Phase::CodeExchange => row_code_exchanges(runtime, &bench, &seed.oauth),
            Phase::Steady => {
                let (row, notes) = row_steady(runtime, &client, &bench, &seed, &receiver);
                fanout_notes.extend(notes);
                row
            }
            Phase::Fanout => {
                let (row, notes) = row_fanout(runtime, &client, &server.base, &seed, &receiver);
                fanout_notes.extend(notes);
                row
            }
        };
        let peak = sampler.stop();
        if phase == Phase::Reads {
            reads_peak_kb = Some(peak);
        }
        peaks.push(format!("{} {}", phase.name(), mb(peak)));
        after.push(format!("{} {}", phase.name(), mb(server.rss_kb())));
        rows.push((phase, row));
    }
    std::thread::sleep(SETTLE);
    let settled_kb = server.rss_kb();
    // Printed in the order of the issue's rows: 1 logins, 2 refreshes (plain, then
    // organization-scoped), 3 reads, 4 fan-out, then issue 36's OAuth rows.
    let order = [
        Phase::Logins,
        Phase::Refreshes,
        Phase::OrgRefreshes,
        Phase::Reads,
        Phase::Fanout,
        Phase::Steady,
        Phase::ClientCredentials,
        Phase::Introspect,
        Phase::Userinfo,
        Phase::CodeExchange,
    ];
    rows.sort_by_key(|(phase, _)| order.iter().position(|p| p == phase));
    let mut rows: Vec<Row> = rows.into_iter().map(|(_, row)| row).collect();
    rows.push(Row::new(
        format!(
            "Resident memory, idle ({} s after seeding)",
            SETTLE.as_secs()
        ),
        mb(idle_kb),
        RSS_TARGET,
        "—",
    ));
    rows.push(Row::new(
        format!(
            "Resident memory, idle ({} s after the last phase)",
            SETTLE.as_secs()
        ),
        mb(settled_kb),
        RSS_TARGET,
        "—",
    ));
    if let Some(kb) = reads_peak_kb {
        rows.push(Row::new(
            "Resident memory, peak during row 3 (100 ms samples)",
            mb(kb),
            RSS_TARGET,
            "—",
        ));
    }
    rows.push(Row::new(
        "Start → /readyz 200, fresh database (migrations, first key)",
        format!("{fresh_ms:.0} ms"),
        READY_TARGET,
        "—",
    ));
    rows.push(Row::new(
        "Start → /readyz 200, existing database",
        format!("{existing_ms:.0} ms"),
        READY_TARGET,
        "—",
    ));
    notes.extend(fanout_notes);
    let names: Vec<_> = options.phases.iter().map(|p| p.name()).collect();
    notes.push(format!(
        "phases ran in the order {}; resident memory after each: {}; peak during each: {}",
        names.join(", "),
        after.join(", "),
        peaks.join(", "),
    ));
    notes.extend(server_log_notes(&work.path().join("server.log")));

    drop(server);
    drop(database);
    render(name, &rows, &notes)
}

fn server_env(database_url: &str, work: &Path, ca_file: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("GATEHOUSE_DATABASE_URL", database_url.to_owned()),
        ("GATEHOUSE_SECRET_KEY", SECRET_KEY.to_owned()),
        ("GATEHOUSE_RATE_LIMITS", RATE_LIMITS.to_owned()),
        ("GATEHOUSE_WEBHOOK_CA_FILE", ca_file.display().to_string()),
        ("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
        ("GATEHOUSE_MAIL_DIR", work.display().to_string()),
        ("GATEHOUSE_LOG", "warn".to_owned()),
        ("GATEHOUSE_LOG_FORMAT", "json".to_owned()),
        // Every wrk connection comes from one address: lift the per-address bound above them.
        ("GATEHOUSE_MAX_CONNECTIONS_PER_IP", "100000".to_owned()),
        // One organization makes the whole fan-out: every slot is its share.
        ("GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION", "64".to_owned()),
    ]
}

/// The server of `options` (its binary, its CPUs, its `--env` after `env`).
fn start_server(options: &Options, env: &[(&'static str, String)], log: &Path) -> (Server, f64) {
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(
            options
                .extra_env
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .collect();
    Server::start(&options.binary, options.server_cpus.as_deref(), &env, log)
}

fn render(backend: &str, rows: &[Row], notes: &[String]) -> String {
    let mut out = format!(
        "\n## {backend}\n\n| row | measured | limit (same run) | ratio |\n|---|---|---|---|\n"
    );
    for row in rows {
        writeln!(
            out,
            "| {} | {} | {} | {} |",
            row.name, row.measured, row.limit, row.ratio
        )
        .unwrap();
    }
    if !notes.is_empty() {
        out.push('\n');
        for note in notes {
            writeln!(out, "- {note}").unwrap();
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// Seeding
// ---------------------------------------------------------------------------------------------

/// What the rows need: one user with a session, a team with webhook endpoints, and an
/// application of another team for the OAuth rows.
struct Seed {
    access_token: String,
    refresh_token: String,
    /// The refresh token of another session of the bench user, scoped at its login
    /// (`organization_id`) to the OAuth rows' `enterprise` team: its refreshes keep the
    /// organization and admit the user to it again.
    org_refresh_token: String,
    team_id: String,
    oauth: OAuthSeed,
}

async fn seed_data(
    client: &reqwest::Client,
    base: &str,
    receiver: &TestReceiver,
    set_plan: &dyn Fn(&str, &str),
) -> Seed {
    let registered = post_json(
        client,
        &format!("{base}/api/v1/auth/register"),
        None,
        &json!({ "email": EMAIL, "password": PASSWORD, "full_name": "Bench User" }),
        201,
    )
    .await;
    assert!(registered["user_id"].is_string(), "{registered}");
    let logs_in = post_json(
        client,
        &format!("{base}/api/v1/auth/register"),
        None,
        &json!({ "email": LOGIN_EMAIL, "password": PASSWORD, "full_name": "Bench Logins" }),
        201,
    )
    .await;
    assert!(logs_in["user_id"].is_string(), "{logs_in}");
    let tokens = post_json(
        client,
        &format!("{base}/api/v1/auth/login"),
        None,
        &json!({ "email": EMAIL, "password": PASSWORD }),
        200,
    )
    .await;
    let access_token = tokens["access_token"].as_str().unwrap().to_owned();
    let refresh_token = tokens["refresh_token"].as_str().unwrap().to_owned();
    let team = post_json(
        client,
        &format!("{base}/api/v1/organizations"),
        Some((&access_token, None)),
        &json!({ "name": "Bench Team" }),
        201,
    )
    .await;
    let team_id = team["id"].as_str().unwrap().to_owned();
    // Ten endpoints: more than the free plan's five.
    set_plan(&team_id, "starter");
    for i in 0..ENDPOINTS {
        post_json(
            client,
            &format!("{base}/api/v1/webhooks/endpoints"),
            Some((&access_token, Some(&team_id))),
            &json!({ "url": receiver.url(&format!("/hook/{i}")), "events": ["user.updated"] }),
            201,
        )
        .await;
    }
    let oauth = seed_oauth(base, &access_token, set_plan).await;
    let org_refresh_token = org_scoped_session(client, base, &oauth.team_id).await;
    Seed {
        access_token,
        refresh_token,
        org_refresh_token,
        team_id,
        oauth,
    }
}

/// Signs the bench user in again, scoped to the team `team_id`, refreshes that session once to
/// check that a refresh without `organization_id` keeps the organization (its access token
/// says `org_id` and the owner's role), and returns the session's refresh token.
async fn org_scoped_session(client: &reqwest::Client, base: &str, team_id: &str) -> String {
    let tokens = post_json(
        client,
        &format!("{base}/api/v1/auth/login"),
        None,
        &json!({ "email": EMAIL, "password": PASSWORD, "organization_id": team_id }),
        200,
    )
    .await;
    let refresh_token = tokens["refresh_token"].as_str().unwrap().to_owned();
    let refreshed = post_json(
        client,
        &format!("{base}/api/v1/auth/refresh"),
        None,
        &json!({ "refresh_token": refresh_token }),
        200,
    )
    .await;
    let access_token = refreshed["access_token"].as_str().unwrap();
    let payload = access_token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, payload)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["org_id"], team_id, "{claims}");
    assert_eq!(claims["org_role"], "owner", "{claims}");
    refresh_token
}

/// What the OAuth rows need: an application of an `enterprise` team, its person signed in on
/// the hosted pages, and an access token of the code flow.
#[derive(Clone)]
struct OAuthSeed {
    /// The application's team (`enterprise`: its admission reads the organization's policies).
    team_id: String,
    client_id: String,
    client_secret: String,
    /// `/oauth/authorize?…` (path and query) for a code with `OAUTH_SCOPE`.
    authorize: String,
    /// The hosted pages' cookies of the signed-in person, as a `Cookie` header.
    cookies: String,
    /// An access token of the code flow (`OAUTH_SCOPE`).
    access_token: String,
}

/// Registers an application in a new `enterprise` team of the bench user, signs the user in
/// through `/oauth/authorize` and the hosted login page, and exchanges the first code.
async fn seed_oauth(base: &str, access_token: &str, set_plan: &dyn Fn(&str, &str)) -> OAuthSeed {
    let client = no_redirects();
    let team = post_json(
        &client,
        &format!("{base}/api/v1/organizations"),
        Some((access_token, None)),
        &json!({ "name": "Bench Apps" }),
        201,
    )
    .await;
    let team_id = team["id"].as_str().unwrap().to_owned();
    // OAuth, client credentials included, is an enterprise feature.
    set_plan(&team_id, "enterprise");
    let application = post_json(
        &client,
        &format!("{base}/api/v1/organizations/{team_id}/applications"),
        Some((access_token, None)),
        &json!({ "name": "Bench App", "redirect_uris": [CALLBACK] }),
        201,
    )
    .await;
    let client_id = application["client_id"].as_str().unwrap().to_owned();
    let client_secret = application["client_secret"].as_str().unwrap().to_owned();
    let authorize = format!(
        "/oauth/authorize?response_type=code&client_id={client_id}&redirect_uri={}&scope={}\
         &state=bench",
        form_encoded(CALLBACK),
        form_encoded(OAUTH_SCOPE)
    );

    // Nobody is signed in: the hosted login page, whose form must come back with its cookie.
    let mut cookies = Vec::new();
    let response = client
        .get(format!("{base}{authorize}"))
        .send()
        .await
        .unwrap();
    let login = location(&response).expect("a redirect to the login page");
    let page = client.get(format!("{base}{login}")).send().await.unwrap();
    keep_cookies(&mut cookies, &page);
    let page = page.text().await.unwrap();
    let form = [
        ("email", EMAIL),
        ("password", PASSWORD),
        ("csrf_token", &hidden(&page, "csrf_token")),
        ("return_to", &hidden(&page, "return_to")),
    ];
    let signed_in = client
        .post(format!("{base}/login"))
        .header("Cookie", cookie_header(&cookies))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303, "hosted sign-in");
    keep_cookies(&mut cookies, &signed_in);
    let mut seed = OAuthSeed {
        team_id,
        client_id,
        client_secret,
        authorize,
        cookies: cookie_header(&cookies),
        access_token: String::new(),
    };
    let tokens = code_flow(&client, base, &seed).await.unwrap();
    seed.access_token = tokens["access_token"].as_str().unwrap().to_owned();
    // An inactive token is answered 200 as well: the introspection row must describe a live one.
    let form = [
        ("token", seed.access_token.as_str()),
        ("client_id", &seed.client_id),
        ("client_secret", &seed.client_secret),
    ];
    let response = client.post(format!("{base}/oauth/introspect")).form(&form);
    let described: Value = response.send().await.unwrap().json().await.unwrap();
    assert_eq!(described["active"], true, "introspection: {described}");
    seed
}

/// A client that shows redirects instead of following them (the code is in one).
fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Asks `/oauth/authorize` for a fresh code with the signed-in person's cookie, and the client
/// exchanges it (authenticated by `client_secret_post`): the token response, or what failed.
async fn code_flow(
    client: &reqwest::Client,
    base: &str,
    oauth: &OAuthSeed,
) -> Result<Value, String> {
    let response = client
        .get(format!("{base}{}", oauth.authorize))
        .header("Cookie", &oauth.cookies)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let redirect = location(&response)
        .ok_or_else(|| format!("/oauth/authorize answered {}", response.status()))?;
    let code = reqwest::Url::parse(&redirect)
        .ok()
        .and_then(|url| {
            url.query_pairs()
                .find_map(|(name, value)| (name == "code").then(|| value.into_owned()))
        })
        .ok_or_else(|| format!("no code in {redirect}"))?;
    let form = [
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", CALLBACK),
        ("client_id", &oauth.client_id),
        ("client_secret", &oauth.client_secret),
    ];
    let response = client
        .post(format!("{base}/oauth/token"))
        .form(&form)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let text = response.text().await.map_err(|e| e.to_string())?;
    if status != 200 {
        return Err(format!("the code exchange answered {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

fn location(response: &reqwest::Response) -> Option<String> {
    let location = response.headers().get("Location")?;
    Some(location.to_str().ok()?.to_owned())
}

/// Keeps the cookies a response sets (name and value; a cleared one is dropped).
fn keep_cookies(cookies: &mut Vec<(String, String)>, response: &reqwest::Response) {
    for set in response.headers().get_all("Set-Cookie") {
        let set = set.to_str().unwrap();
        let pair = set.split(';').next().unwrap_or_default();
        let (name, value) = pair.split_once('=').unwrap();
        cookies.retain(|(n, _)| n != name);
        if !value.is_empty() {
            cookies.push((name.to_owned(), value.to_owned()));
        }
    }
}

fn cookie_header(cookies: &[(String, String)]) -> String {
    let pairs: Vec<_> = cookies.iter().map(|(n, v)| format!("{n}={v}")).collect();
    pairs.join("; ")
}

/// The value of a hidden field of a page's form.
fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {page}"))
        + marker.len();
    let end = start + page[start..].find('"').unwrap();
    page[start..end].replace("&amp;", "&")
}

/// `application/x-www-form-urlencoded` for one value.
fn form_encoded(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                char::from(byte).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// wrk
// ---------------------------------------------------------------------------------------------

/// What the service rows need to run `wrk`.
struct Bench {
    base: String,
    /// The server's cores: the limits are measured on as many threads.
    cores: usize,
    /// CPUs for `wrk` (`taskset -c`), when the server is pinned to others.
    client_cpus: Option<String>,
    /// The server's CPUs when it is pinned: the limits are measured on them too.
    server_cpus: Option<String>,
    /// Where the Lua scripts go.
    scripts: PathBuf,
    duration: u64,
    name: &'static str,
    /// `wrk`'s connections for the read row.
    read_connections: usize,
}

impl WrkResult {
    /// `1,234/s · p50 1.2 ms · p99 3.4 ms`, and any errors.
    fn summary(&self) -> String {
        let mut text = format!(
            "{}/s · p50 {} · p99 {}",
            group(self.requests_per_sec),
            ms(self.p50_ms),
            ms(self.p99_ms)
        );
        if !self.errors.is_empty() {
            write!(text, " (**{}**)", self.errors.join(", ")).unwrap();
        }
        text
    }
}

/// The body of a `wrk` request.
enum Body<'a> {
    Json(Value),
    /// `application/x-www-form-urlencoded`, as the OAuth endpoints take.
    Form(&'a [(&'a str, &'a str)]),
}

/// A Lua script for `wrk`: the method, headers and body of every request.
fn lua_script(
    dir: &Path,
    name: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: Option<Body<'_>>,
) -> PathBuf {
    let mut lua = format!("wrk.method = \"{method}\"\n");
    for (header, value) in headers {
        writeln!(lua, "wrk.headers[\"{header}\"] = [==[{value}]==]").unwrap();
    }
    let (content_type, body) = match body {
        None => (None, String::new()),
        Some(Body::Json(json)) => (Some("application/json"), json.to_string()),
        Some(Body::Form(fields)) => {
            let pairs: Vec<_> = fields
                .iter()
                .map(|(name, value)| format!("{name}={}", form_encoded(value)))
                .collect();
            (Some("application/x-www-form-urlencoded"), pairs.join("&"))
        }
    };
    if let Some(content_type) = content_type {
        writeln!(lua, "wrk.headers[\"Content-Type\"] = \"{content_type}\"").unwrap();
        writeln!(lua, "wrk.body = [==[{body}]==]").unwrap();
    }
    let path = dir.join(format!("{name}.lua"));
    fs::write(&path, lua).unwrap();
    path
}

fn wrk(bench: &Bench, path: &str, script: &Path, connections: usize) -> WrkResult {
    // As many threads as `wrk` has CPUs: its own when it is pinned apart, else the server's.
    let wrk_cores = bench
        .client_cpus
        .as_deref()
        .and_then(cpu_list)
        .map_or(bench.cores, |cpus| cpus.len());
    let threads = wrk_cores.min(connections);
    let url = format!("{}{path}", bench.base);
    eprintln!(
        "[{}] wrk -t{threads} -c{connections} -d{}s {url}",
        bench.name, bench.duration
    );
    let mut command = match &bench.client_cpus {
        Some(cpus) => {
            let mut taskset = Command::new("taskset");
            taskset.arg("-c").arg(cpus).arg("wrk");
            taskset
        }
        None => Command::new("wrk"),
    };
    let output = command
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{}s", bench.duration))
        .arg("--latency")
        .arg("-s")
        .arg(script)
        .arg(&url)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse_wrk(&text).unwrap_or_else(|| panic!("cannot read wrk's output:\n{text}"))
}

// ---------------------------------------------------------------------------------------------
// Rows 1–3: the service under wrk, against limits measured here
// ---------------------------------------------------------------------------------------------

/// Runs `limit` on a thread pinned to the server's CPUs when the server is pinned (its threads
/// inherit that), so that a limit measured on more threads than the server has cores (argon2's,
/// at twice the cores) gets the server's cores and not the whole machine's.
fn on_server_cpus<T: Send + 'static>(
    bench: &Bench,
    limit: impl FnOnce() -> T + Send + 'static,
) -> T {
    let cpus = bench.server_cpus.clone();
    std::thread::spawn(move || {
        if let Some(cpus) = cpus {
            // This thread's id: /proc/thread-self links to `<pid>/task/<tid>`.
            let link = fs::read_link("/proc/thread-self").unwrap();
            let tid = link.file_name().unwrap().to_string_lossy().into_owned();
            let status = Command::new("taskset")
                .args(["-pc", &cpus, &tid])
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "taskset -pc {cpus} {tid} failed");
        }
        limit()
    })
    .join()
    .unwrap()
}

fn row_logins(bench: &Bench) -> Row {
    let connections = 2 * bench.cores;
    eprintln!(
        "[{}] argon2id limit: {connections} threads, {LIMIT_SECS:.0} s",
        bench.name
    );
    let hashes = on_server_cpus(bench, move || {
        gatehouse_crypto::limits::argon2_hashes_per_sec(connections, LIMIT_SECS)
    })
    .unwrap();
    let script = lua_script(
        &bench.scripts,
        "login",
        "POST",
        &[],
        Some(Body::Json(
            json!({ "email": LOGIN_EMAIL, "password": PASSWORD }),
        )),
    );
    let logins = wrk(bench, "/api/v1/auth/login", &script, connections);
    Row::new(
        format!("Password logins/s ({connections} conns, one user of its own)"),
        logins.summary(),
        format!(
            "{}/s argon2id hashes (m=19456 t=2 p=1, {connections} threads)",
            group(hashes)
        ),
        ratio(logins.requests_per_sec, hashes),
    )
}

/// RS256 (2048-bit) signatures/s on the server's cores, measured here.
fn rs256_limit(bench: &Bench) -> f64 {
    eprintln!(
        "[{}] RS256 limit: {} threads, {LIMIT_SECS:.0} s",
        bench.name, bench.cores
    );
    let cores = bench.cores;
    on_server_cpus(bench, move || {
        gatehouse_crypto::limits::rs256_signatures_per_sec(cores, LIMIT_SECS)
    })
    .unwrap()
}

/// The row of a path that reads and signs nothing, against `GET /readyz` of the same server
/// under as many connections.
fn against_readyz(bench: &Bench, name: String, measured: &WrkResult, connections: usize) -> Row {
    let ready = lua_script(&bench.scripts, "readyz", "GET", &[], None);
    let readyz = wrk(bench, "/readyz", &ready, connections);
    Row::new(
        name,
        measured.summary(),
        format!("GET /readyz: {}", readyz.summary()),
        ratio(measured.requests_per_sec, readyz.requests_per_sec),
    )
}

/// The row of a path that signs one RS256 token a request: RS256 signatures/s measured first,
/// then `load` under `wrk`.
fn against_rs256(bench: &Bench, name: String, load: impl FnOnce() -> WrkResult) -> Row {
    let signatures = rs256_limit(bench);
    let measured = load();
    Row::new(
        name,
        measured.summary(),
        format!(
            "{}/s RS256-2048 signatures ({} threads)",
            group(signatures),
            bench.cores
        ),
        ratio(measured.requests_per_sec, signatures),
    )
}

fn row_refreshes(bench: &Bench, seed: &Seed) -> Row {
    refresh_row(bench, "Refreshes/s", "refresh", &seed.refresh_token)
}

/// Refreshes of a session scoped to an `enterprise` team: each admits the user to the
/// organization again (membership, IP allowlist, MFA policy, on what the refresh's one read of
/// the session brought, and the organization's single sign-on for the user's email domain)
/// before it signs.
fn row_org_refreshes(bench: &Bench, seed: &Seed) -> Row {
    let name = "Organization-scoped refreshes/s";
    refresh_row(bench, name, "org-refresh", &seed.org_refresh_token)
}

/// `POST /auth/refresh {refresh_token}` under `wrk` (its script named `script`), 2 × cores
/// connections, against RS256 signatures/s.
fn refresh_row(bench: &Bench, name: &str, script: &str, refresh_token: &str) -> Row {
    let connections = 2 * bench.cores;
    let body = Body::Json(json!({ "refresh_token": refresh_token }));
    let script = lua_script(&bench.scripts, script, "POST", &[], Some(body));
    against_rs256(
        bench,
        format!("{name} ({connections} conns, one refresh token)"),
        || wrk(bench, "/api/v1/auth/refresh", &script, connections),
    )
}

/// `wrk` GETting `path` with a bearer token (its script named `name`).
fn wrk_bearer_get(bench: &Bench, name: &str, path: &str, token: &str) -> WrkResult {
    let bearer = format!("Bearer {token}");
    let script = lua_script(
        &bench.scripts,
        name,
        "GET",
        &[("Authorization", &bearer)],
        None,
    );
    wrk(bench, path, &script, bench.read_connections)
}

fn row_reads(bench: &Bench, seed: &Seed) -> Row {
    let path = format!("/api/v1/organizations/{}", seed.team_id);
    let connections = bench.read_connections;
    let reads = wrk_bearer_get(bench, "read", &path, &seed.access_token);
    against_readyz(
        bench,
        format!("Authenticated reads, GET /organizations/{{id}} ({connections} conns)"),
        &reads,
        connections,
    )
}

// ---------------------------------------------------------------------------------------------
// Row 6: the OAuth endpoints (issue 36)
// ---------------------------------------------------------------------------------------------

/// `wrk` POSTing a form to an OAuth endpoint, the client authenticated by `client_secret_post`.
fn wrk_client_form(
    bench: &Bench,
    oauth: &OAuthSeed,
    path: &str,
    fields: &[(&str, &str)],
    connections: usize,
) -> WrkResult {
    let mut form = fields.to_vec();
    form.extend([
        ("client_id", oauth.client_id.as_str()),
        ("client_secret", oauth.client_secret.as_str()),
    ]);
    let name = path.trim_start_matches("/oauth/");
    let script = lua_script(&bench.scripts, name, "POST", &[], Some(Body::Form(&form)));
    wrk(bench, path, &script, connections)
}

fn row_client_credentials(bench: &Bench, oauth: &OAuthSeed) -> Row {
    let connections = 2 * bench.cores;
    let form = [
        ("grant_type", "client_credentials"),
        ("scope", MACHINE_SCOPE),
    ];
    against_rs256(
        bench,
        format!("OAuth client_credentials grants/s ({connections} conns, one application)"),
        || wrk_client_form(bench, oauth, "/oauth/token", &form, connections),
    )
}

fn row_introspect(bench: &Bench, oauth: &OAuthSeed) -> Row {
    let connections = bench.read_connections;
    let form = [("token", oauth.access_token.as_str())];
    let introspections = wrk_client_form(bench, oauth, "/oauth/introspect", &form, connections);
    against_readyz(
        bench,
        format!("OAuth introspections/s of an access token ({connections} conns)"),
        &introspections,
        connections,
    )
}

fn row_userinfo(bench: &Bench, oauth: &OAuthSeed) -> Row {
    let connections = bench.read_connections;
    let userinfo = wrk_bearer_get(bench, "userinfo", "/oauth/userinfo", &oauth.access_token);
    against_readyz(
        bench,
        format!("OAuth userinfo/s, GET /oauth/userinfo ({connections} conns)"),
        &userinfo,
        connections,
    )
}

/// Authorization-code exchanges: `2 × cores` loops in this process, each asking
/// `/oauth/authorize` for a fresh code (a code is single-use: `wrk` cannot replay one) and
/// exchanging it, for the row duration. Latency of the pair.
fn row_code_exchanges(runtime: &Runtime, bench: &Bench, oauth: &OAuthSeed) -> Row {
    let signatures = rs256_limit(bench);
    let loops = 2 * bench.cores;
    eprintln!(
        "[{}] code exchanges: {loops} loops for {} s",
        bench.name, bench.duration
    );
    let client = no_redirects();
    let duration = Duration::from_secs(bench.duration);
    let (mut latencies, failures, first_failure) = runtime.block_on(async {
        let started = Instant::now();
        let loops: Vec<_> = (0..loops)
            .map(|_| {
                let (client, base) = (client.clone(), bench.base.clone());
                let oauth = oauth.clone();
                tokio::spawn(async move {
                    let (mut latencies, mut failures, mut first_failure) = (Vec::new(), 0, None);
                    while started.elapsed() < duration {
                        let sent = Instant::now();
                        match code_flow(&client, &base, &oauth).await {
                            Ok(tokens) => {
                                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                                // Untimed: the grant's session ends, so that the user stays
                                // under the 100 concurrent sessions whose oldest (the hosted
                                // sign-in, the other rows' sessions) a new one would end.
                                let refresh = tokens["refresh_token"].as_str().unwrap_or_default();
                                let form = [
                                    ("token", refresh),
                                    ("client_id", &oauth.client_id),
                                    ("client_secret", &oauth.client_secret),
                                ];
                                let revoke = client.post(format!("{base}/oauth/revoke"));
                                let revoked = revoke.form(&form).send().await;
                                if !matches!(&revoked, Ok(r) if r.status() == 200) {
                                    failures += 1;
                                    first_failure.get_or_insert("a revocation failed".to_owned());
                                }
                            }
                            Err(error) => {
                                failures += 1;
                                first_failure.get_or_insert(error);
                            }
                        }
                    }
                    (latencies, failures, first_failure)
                })
            })
            .collect();
        let mut all = (Vec::new(), 0, None);
        for each in loops {
            let (latencies, failures, first_failure) = each.await.unwrap();
            all.0.extend(latencies);
            all.1 += failures;
            all.2 = all.2.or(first_failure);
        }
        all
    });
    let per_sec = latencies.len() as f64 / duration.as_secs_f64();
    let mut measured = format!(
        "{}/s · p50 {} · p99 {}",
        group(per_sec),
        ms(percentile(&mut latencies, 0.50)),
        ms(percentile(&mut latencies, 0.99))
    );
    if let Some(error) = first_failure {
        write!(measured, " (**{failures} failed**, first: {error})").unwrap();
    }
    // Each exchange signs two tokens: the access token and the ID token.
    let limit = signatures / 2.0;
    Row::new(
        format!(
            "OAuth authorization-code exchanges/s ({loops} loops; latency: authorize + exchange)"
        ),
        measured,
        format!(
            "{}/s: RS256-2048 signatures ({}/s, {} threads) ÷ 2 (access + ID token)",
            group(limit),
            group(signatures),
            bench.cores
        ),
        ratio(per_sec, limit),
    )
}

// ---------------------------------------------------------------------------------------------
// Row 4: webhook fan-out, against a plain hyper client into the same kind of receiver
// ---------------------------------------------------------------------------------------------

/// Deliveries per second and latency percentiles (ms).
struct Throughput {
    per_sec: f64,
    p50_ms: f64,
    p99_ms: f64,
}

impl Throughput {
    fn summary(&self, unit: &str) -> String {
        format!(
            "{}{unit}/s · p50 {} · p99 {}",
            group(self.per_sec),
            ms(self.p50_ms),
            ms(self.p99_ms)
        )
    }
}

fn row_fanout(
    runtime: &Runtime,
    client: &reqwest::Client,
    base: &str,
    seed: &Seed,
    receiver: &TestReceiver,
) -> (Row, Vec<String>) {
    let expected = ENDPOINTS * CHANGES;
    // What earlier phases delivered is not this row's.
    let before = receiver.requests().len();
    let mut notes = Vec::new();
    eprintln!("[fan-out] {CHANGES} changes × {ENDPOINTS} endpoints");
    let (service, sample) = runtime.block_on(async {
        let (first_sent, patches_took, failed) =
            make_changes(client, base, &seed.access_token).await;
        notes.push(format!(
            "the {} `PATCH /users/me` ({PATCH_CONCURRENCY} at a time) took {:.1} s ({}/s){}",
            group(CHANGES as f64),
            patches_took.as_secs_f64(),
            group(CHANGES as f64 / patches_took.as_secs_f64()),
            if failed > 0 {
                format!(", **{failed} failed**")
            } else {
                String::new()
            }
        ));
        let requests = arrivals(receiver, before, expected).await;
        let firsts = first_arrivals(&requests);
        if firsts.len() != expected {
            notes.push(format!(
                "**the receiver got {} of {expected} deliveries** (waited up to {FANOUT_TIMEOUT:?})",
                firsts.len()
            ));
        }
        if requests.len() > firsts.len() {
            notes.push(format!(
                "**{} deliveries arrived more than once** (same `X-Service-Delivery-Id`); \
                 counted once, at their first arrival",
                requests.len() - firsts.len()
            ));
        }
        let service = service_throughput(&firsts, first_sent);
        let sample = requests.first().cloned();
        (service, sample)
    });
    let Some(sample) = sample else {
        let row = Row::new(
            format!(
                "Webhook fan-out, {ENDPOINTS} endpoints × {} changes",
                group(CHANGES as f64)
            ),
            "**no delivery arrived**",
            "—",
            "—",
        );
        return (row, notes);
    };

    eprintln!("[fan-out] baseline: plain hyper client, {ENDPOINTS} streams");
    let baseline = runtime.block_on(async {
        let receiver = TestReceiver::start().await;
        plain_client_throughput(&receiver, &sample, expected, ENDPOINTS).await
    });
    let row = Row::new(
        format!(
            "Webhook fan-out, {ENDPOINTS} endpoints × {} changes (latency: commit → received)",
            group(CHANGES as f64)
        ),
        service.summary(" deliveries"),
        format!(
            "plain hyper client, {ENDPOINTS} streams, same receiver: {} (request latency)",
            baseline.summary(" POSTs")
        ),
        ratio(service.per_sec, baseline.per_sec),
    );
    (row, notes)
}

/// Row 4b: the same fan-out at a steady rate below capacity (`STEADY_CHANGES_PER_SEC` changes
/// a second to `ENDPOINTS` endpoints, for the row duration), offered open-loop: a change is sent
/// on its tick whether or not the ones before have been answered. Latency from each change's
/// commit to its arrival at the receiver.
fn row_steady(
    runtime: &Runtime,
    client: &reqwest::Client,
    bench: &Bench,
    seed: &Seed,
    receiver: &TestReceiver,
) -> (Row, Vec<String>) {
    let changes = STEADY_CHANGES_PER_SEC * bench.duration as usize;
    let expected = changes * ENDPOINTS;
    let offered = (STEADY_CHANGES_PER_SEC * ENDPOINTS) as f64;
    eprintln!(
        "[{}] steady fan-out: {STEADY_CHANGES_PER_SEC} changes/s × {ENDPOINTS} endpoints for {} s",
        bench.name, bench.duration
    );
    let before = receiver.requests().len();
    let mut notes = Vec::new();
    let (throughput, late) = runtime.block_on(async {
        let failed = Arc::new(AtomicUsize::new(0));
        let url = format!("{}/api/v1/users/me", bench.base);
        let mut every =
            tokio::time::interval(Duration::from_secs_f64(1.0 / STEADY_CHANGES_PER_SEC as f64));
        let first_sent = SystemTime::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..changes {
            every.tick().await;
            let (client, url, token) = (client.clone(), url.clone(), seed.access_token.clone());
            let failed = failed.clone();
            tasks.spawn(async move {
                if !rename(&client, &url, &token, &format!("Steady User {i}")).await {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined.unwrap();
        }
        let failed = failed.load(Ordering::Relaxed);
        if failed > 0 {
            notes.push(format!("steady fan-out: **{failed} changes failed**"));
        }
        let requests = arrivals(receiver, before, expected).await;
        let firsts = first_arrivals(&requests);
        let late = expected.saturating_sub(firsts.len());
        (service_throughput(&firsts, first_sent), late)
    });
    if late > 0 {
        notes.push(format!(
            "steady fan-out: **{late} of {expected} deliveries did not arrive** within {FANOUT_TIMEOUT:?}"
        ));
    }
    let row = Row::new(
        format!(
            "Webhook fan-out at a steady {} deliveries/s for {} s (latency: commit → received)",
            group(offered),
            bench.duration
        ),
        throughput.summary(" deliveries"),
        format!(
            "offered {}/s ({STEADY_CHANGES_PER_SEC} changes/s × {ENDPOINTS} endpoints); goal p99 < 50 ms",
            group(offered)
        ),
        ratio(throughput.per_sec, offered),
    );
    (row, notes)
}

/// `CHANGES` renames of the user, `PATCH_CONCURRENCY` at a time. Returns when the first was
/// sent, how long they all took, and how many did not answer 200.
async fn make_changes(
    client: &reqwest::Client,
    base: &str,
    access_token: &str,
) -> (SystemTime, Duration, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let url = format!("{base}/api/v1/users/me");
    let first_sent = SystemTime::now();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..PATCH_CONCURRENCY {
        let (client, url, token) = (client.clone(), url.clone(), access_token.to_owned());
        let (next, failed) = (next.clone(), failed.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= CHANGES {
                    break;
                }
                // Every name differs from the one before: each PATCH is a change.
                if !rename(&client, &url, &token, &format!("Bench User {i}")).await {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined.unwrap();
    }
    (
        first_sent,
        started.elapsed(),
        failed.load(Ordering::Relaxed),
    )
}

/// What the receiver got after its first `before` requests, once `expected` more have arrived
/// (or `FANOUT_TIMEOUT` has passed) and then nothing for two seconds.
async fn arrivals(receiver: &TestReceiver, before: usize, expected: usize) -> Vec<ReceivedRequest> {
    let arrived = tokio::time::timeout(
        FANOUT_TIMEOUT,
        receiver.wait_for(before + expected, Duration::from_secs(24 * 3600)),
    )
    .await;
    if arrived.is_ok() {
        settle(receiver).await;
    }
    receiver.requests().split_off(before)
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

/// Deliveries/s from the first change sent to the last delivery received, and the latency of
/// each delivery from its event's commit (the payload's `timestamp`) to its arrival.
fn service_throughput(deliveries: &[&ReceivedRequest], first_sent: SystemTime) -> Throughput {
    let last = deliveries
        .iter()
        .map(|r| r.received_at)
        .max()
        .unwrap_or(first_sent);
    let span = last
        .duration_since(first_sent)
        .unwrap_or_default()
        .as_secs_f64();
    let mut latencies: Vec<f64> = deliveries
        .iter()
        .filter_map(|request| commit_to_receipt_ms(request))
        .collect();
    Throughput {
        per_sec: if span > 0.0 {
            deliveries.len() as f64 / span
        } else {
            0.0
        },
        p50_ms: percentile(&mut latencies, 0.50),
        p99_ms: percentile(&mut latencies, 0.99),
    }
}

/// `total` POSTs of `sample` (its body and `x-service-*`/content-type headers) into `receiver`
/// over HTTPS with hyper and rustls, `streams` at a time: what the receiver can take.
async fn plain_client_throughput(
    receiver: &TestReceiver,
    sample: &ReceivedRequest,
    total: usize,
    streams: usize,
) -> Throughput {
    use http_body_util::{BodyExt as _, Full};
    use hyper::body::Bytes;
    use hyper_util::{client::legacy::Client, rt::TokioExecutor};
    use rustls::pki_types::{pem::PemObject as _, CertificateDer};

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(receiver.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);

    let body = Bytes::from(sample.body.clone());
    let headers: Vec<(String, String)> = sample
        .headers
        .iter()
        .filter(|(name, _)| name.starts_with("x-service-") || name == "content-type")
        .cloned()
        .collect();
    let uri: hyper::Uri = receiver.url("/baseline").parse().unwrap();

    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for stream in 0..streams {
        let count = total / streams + usize::from(stream < total % streams);
        let (client, body, headers, uri) =
            (client.clone(), body.clone(), headers.clone(), uri.clone());
        tasks.spawn(async move {
            let mut latencies = Vec::with_capacity(count);
            for _ in 0..count {
                let mut request = hyper::Request::post(uri.clone());
                for (name, value) in &headers {
                    request = request.header(name, value);
                }
                let request = request.body(Full::new(body.clone())).unwrap();
                let sent = Instant::now();
                let response = client.request(request).await.unwrap();
                assert_eq!(response.status(), 200);
                response.into_body().collect().await.unwrap();
                latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
            latencies
        });
    }
    let mut latencies = Vec::with_capacity(total);
    while let Some(joined) = tasks.join_next().await {
        latencies.extend(joined.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();
    Throughput {
        per_sec: total as f64 / elapsed,
        p50_ms: percentile(&mut latencies, 0.50),
        p99_ms: percentile(&mut latencies, 0.99),
    }
}

// ---------------------------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------------------------

/// measured ÷ limit, to two significant digits below 0.1.
fn ratio(measured: f64, limit: f64) -> String {
    if limit <= 0.0 {
        return "—".to_owned();
    }
    let ratio = measured / limit;
    if ratio >= 0.095 {
        format!("{ratio:.2}")
    } else if ratio >= 0.0095 {
        format!("{ratio:.3}")
    } else {
        format!("{ratio:.4}")
    }
}
