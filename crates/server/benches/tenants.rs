//! `just bench-tenants`: what one tenant's heavy use of its own data costs the others, measured
//! against the real `gatehouse` binary (issue 50's first table, each row as figures next to the
//! issue's goals).
//!
//! ```text
//! cargo bench -p gatehouse-server --bench tenants -- [--backend sqlite|postgres|both]
//!     [--only search,scim,purge,backlog] [--binary PATH] [--out FILE] [--env NAME=VALUE]...
//!     [--members N] [--searches N] [--scim-users N] [--scim-per-minute N] [--scim-seconds N]
//!     [--expired-deliveries N] [--expired-events N] [--backlog N] [--baseline N]
//!     [--disabled-due N] [--backlog-seconds N] [--changes-per-sec N] [--cpu-seconds N]
//!     [--idle-seconds N] [--probe-rate N] [--purge-timeout N]
//! ```
//!
//! Each scenario runs on a fresh database (a temporary SQLite file, or a fresh PostgreSQL
//! database from `gatehouse-testkit`): a first server, its rate limits lifted, makes the
//! tenants through the API (register, sign in, create the organization, `gatehouse orgs
//! set-plan`); it is stopped, the bulk of the data is written into its database with SQL
//! (seconds, where the API would take hours), and the server is started again at the default
//! rate limits for the measurement. A *victim*, another tenant on the `enterprise` plan, probes
//! the server `--probe-rate` times a second (open loop: a probe is sent on its tick whatever the
//! ones before are doing): `GET /readyz` and its own organization (`GET
//! /api/v1/organizations/{id}`), first with nothing else going on (`--idle-seconds`), then while
//! the aggressor works. Resident memory (`VmRSS`) is sampled every 100 ms.
//!
//! 1. `search`: a Free organization with `--members` members (100,000); its owner sends its
//!    whole minute's budget (`--searches`, the Free plan's 60) of `GET
//!    /api/v1/organizations/{id}/members?search=zzqx` at once, and sends each one refused with
//!    `429` again after its `Retry-After`, until all have been answered `200`. The searches'
//!    own latency, and the `429`s counted apart: the rate limiter's, and any other (the
//!    per-organization bound on heavy requests).
//! 2. `scim`: a Business organization with `--scim-users` directory users (50,001); its
//!    directory sends `GET /scim/v2/{id}/Users?filter=userName eq "..."` `--scim-per-minute`
//!    times a minute (80; its budget is 1,000) for `--scim-seconds`: the filter's latency.
//! 3. `purge`: `--expired-deliveries` finished deliveries (600,001) and `--expired-events`
//!    events (200,000), 40 days old (past the default 30 days of
//!    `GATEHOUSE_EVENT_RETENTION_DAYS`). The victim renames its organization on each probe (a
//!    small write), first on a server whose hourly purge has just run (idle), then from the
//!    start of a server whose purge is due, until the expired rows are gone (row counts polled
//!    each second) or `--purge-timeout`: the writes' latency, and when the rows went.
//! 4. `backlog`: a tenant with 4 endpoints on a local HTTPS receiver (answers `200` at once)
//!    has `--baseline` due deliveries (3,000), then, on another start, `--backlog` (100,000),
//!    while another tenant renames its user `--changes-per-sec` times a second (5) to an
//!    endpoint of its own: the first tenant's drain rate (deliveries received a second, from
//!    the server's start; the baseline until it is drained, the backlog over
//!    `--backlog-seconds`), the second's delivery latency (the event's commit to its receipt)
//!    and the server's CPU. Then, its backlog deleted, a disabled endpoint of a third tenant
//!    holds `--disabled-due` due deliveries (200,000) and nothing happens: the server's CPU
//!    over `--cpu-seconds` (utime + stime of `/proc/<pid>/stat`).
//!
//! Ends with one table per backend: each row's figures idle and meanwhile, the issue's goal and
//! whether it is met. `--binary` runs another build (the commit before a change, say);
//! `--env` passes more settings to the measured server.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "support/receipts.rs"]
mod receipts;
#[path = "support/server.rs"]
mod server;

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    future::Future,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant, SystemTime},
};

use gatehouse_delivery::test_receiver::{ReceivedRequest, TestReceiver};
use gatehouse_testkit::TestDatabase;
use receipts::{commit_to_receipt_ms, first_arrivals};
use serde_json::{json, Value};
use server::{
    cores, group, mb, meminfo_kb, ms, percentile, post_json, rename, server_log_notes, RssSampler,
    Server,
};
use time::OffsetDateTime;
use tokio::runtime::Runtime;

const BINARY: &str = env!("CARGO_BIN_EXE_gatehouse");
const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const PASSWORD: &str = "correct horse battery staple";
/// The set-up server's limits: so high that making the tenants is never refused.
const SETUP_RATE_LIMITS: &str =
    "free=100000000,starter=100000000,pro=100000000,business=100000000,enterprise=100000000";
/// How long the server is left alone before its memory "after" is read.
const SETTLE: Duration = Duration::from_secs(5);
/// A probe's or a request's longest wait before it counts as failed.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);
/// The issue's goals.
const LATENCY_GOAL_MS: f64 = 50.0;
const WRITE_GOAL_MS: f64 = 100.0;
const DELIVERY_GOAL_MS: f64 = 100.0;
const DRAIN_GOAL: f64 = 0.9;
const RSS_GOAL_KB: u64 = 100_000_000 / 1024;
/// The backlogged tenant's endpoints: its deliveries go to all of them in turn.
const BACKLOG_ENDPOINTS: usize = 4;
/// The longest the baseline backlog may take to drain.
const BASELINE_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest the aggressor's searches keep trying (the Free budget takes about 50 s).
const SEARCH_TIMEOUT: Duration = Duration::from_secs(180);
/// The ids of the backlogged tenant's seeded deliveries: the baseline's and the backlog's.
const BASELINE_PREFIX: &str = "a5000000";
const BACKLOG_PREFIX: &str = "a6000000";
/// Seeded rows are this old (days) in the purge row; the retention is 30 days.
const EXPIRED_DAYS: i64 = 40;

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Search,
    Scim,
    Purge,
    Backlog,
}

impl Scenario {
    const ALL: [Self; 4] = [Self::Search, Self::Scim, Self::Purge, Self::Backlog];

    fn name(self) -> &'static str {
        match self {
            Self::Search => "search",
            Self::Scim => "scim",
            Self::Purge => "purge",
            Self::Backlog => "backlog",
        }
    }
}

struct Options {
    backends: Vec<Backend>,
    scenarios: Vec<Scenario>,
    binary: PathBuf,
    out: Option<PathBuf>,
    extra_env: Vec<(String, String)>,
    members: usize,
    searches: usize,
    scim_users: usize,
    scim_per_minute: f64,
    scim_seconds: u64,
    expired_deliveries: usize,
    expired_events: usize,
    backlog: usize,
    baseline: usize,
    disabled_due: usize,
    backlog_seconds: u64,
    changes_per_sec: f64,
    cpu_seconds: u64,
    idle_seconds: u64,
    probe_rate: f64,
    purge_timeout: u64,
}

const USAGE: &str = "usage: tenants [--backend sqlite|postgres|both] \
     [--only search,scim,purge,backlog] [--binary PATH] [--out FILE] [--env NAME=VALUE]... \
     [--members N] [--searches N] [--scim-users N] [--scim-per-minute N] [--scim-seconds N] \
     [--expired-deliveries N] [--expired-events N] [--backlog N] [--baseline N] \
     [--disabled-due N] [--backlog-seconds N] [--changes-per-sec N] [--cpu-seconds N] \
     [--idle-seconds N] [--probe-rate N] [--purge-timeout N]";

fn fail(message: &str) -> ! {
    eprintln!("{message}\n{USAGE}");
    std::process::exit(2)
}

/// A flag's number (`100000`, `100_000` or `100,000`); exits with the usage otherwise.
fn number(flag: &str, text: String) -> f64 {
    text.replace(['_', ','], "")
        .parse::<f64>()
        .ok()
        .filter(|n| *n >= 0.0)
        .unwrap_or_else(|| fail(&format!("{flag} takes a number")))
}

fn parse_args() -> Options {
    let mut options = Options {
        backends: vec![Backend::Sqlite, Backend::Postgres],
        scenarios: Scenario::ALL.to_vec(),
        binary: PathBuf::from(BINARY),
        out: None,
        extra_env: Vec::new(),
        members: 100_000,
        searches: 60,
        scim_users: 50_001,
        scim_per_minute: 80.0,
        scim_seconds: 60,
        expired_deliveries: 600_001,
        expired_events: 200_000,
        backlog: 100_000,
        baseline: 3_000,
        disabled_due: 200_000,
        backlog_seconds: 30,
        changes_per_sec: 5.0,
        cpu_seconds: 10,
        idle_seconds: 5,
        probe_rate: 5.0,
        purge_timeout: 300,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_owned(), Some(value.to_owned()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .unwrap_or_else(|| fail(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            // `cargo bench` passes this to every bench binary.
            "--bench" => {}
            "--backend" => {
                options.backends = match value().as_str() {
                    "sqlite" => vec![Backend::Sqlite],
                    "postgres" => vec![Backend::Postgres],
                    "both" => vec![Backend::Sqlite, Backend::Postgres],
                    other => fail(&format!("unknown backend {other:?}")),
                }
            }
            "--only" => {
                let wanted = value();
                let named: Vec<Scenario> = wanted
                    .split(',')
                    .map(|name| {
                        Scenario::ALL
                            .into_iter()
                            .find(|s| s.name() == name.trim())
                            .unwrap_or_else(|| fail(&format!("unknown scenario {name:?}")))
                    })
                    .collect();
                options.scenarios = Scenario::ALL
                    .into_iter()
                    .filter(|s| named.contains(s))
                    .collect();
            }
            "--binary" => options.binary = PathBuf::from(value()),
            "--out" => options.out = Some(PathBuf::from(value())),
            "--env" => {
                let setting = value();
                let (name, value) = setting
                    .split_once('=')
                    .unwrap_or_else(|| fail("--env takes NAME=VALUE"));
                options.extra_env.push((name.to_owned(), value.to_owned()));
            }
            "--members" => options.members = number(&flag, value()) as usize,
            "--searches" => options.searches = number(&flag, value()) as usize,
            "--scim-users" => options.scim_users = number(&flag, value()) as usize,
            "--scim-per-minute" => options.scim_per_minute = number(&flag, value()),
            "--scim-seconds" => options.scim_seconds = number(&flag, value()) as u64,
            "--expired-deliveries" => options.expired_deliveries = number(&flag, value()) as usize,
            "--expired-events" => options.expired_events = number(&flag, value()) as usize,
            "--backlog" => options.backlog = number(&flag, value()) as usize,
            "--baseline" => options.baseline = number(&flag, value()) as usize,
            "--disabled-due" => options.disabled_due = number(&flag, value()) as usize,
            "--backlog-seconds" => options.backlog_seconds = number(&flag, value()) as u64,
            "--changes-per-sec" => options.changes_per_sec = number(&flag, value()),
            "--cpu-seconds" => options.cpu_seconds = number(&flag, value()) as u64,
            "--idle-seconds" => options.idle_seconds = number(&flag, value()) as u64,
            "--probe-rate" => options.probe_rate = number(&flag, value()),
            "--purge-timeout" => options.purge_timeout = number(&flag, value()) as u64,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    if options.probe_rate <= 0.0 || options.changes_per_sec <= 0.0 || options.scim_per_minute <= 0.0
    {
        fail("--probe-rate, --changes-per-sec and --scim-per-minute must be above 0");
    }
    if options.expired_events == 0 && options.expired_deliveries > 0 {
        fail("--expired-deliveries needs --expired-events above 0");
    }
    options
}

fn main() {
    let options = parse_args();
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut report = header(&options);
    print!("{report}");
    for &backend in &options.backends {
        let mut lines = Vec::new();
        let mut notes = Vec::new();
        for &scenario in &options.scenarios {
            eprintln!("\n[{}] {}", backend.name(), scenario.name());
            let stage = Stage::new(&runtime, backend, &options);
            let (scenario_lines, scenario_notes) = match scenario {
                Scenario::Search => search(&runtime, &stage, &options),
                Scenario::Scim => scim(&runtime, &stage, &options),
                Scenario::Purge => purge(&runtime, &stage, &options),
                Scenario::Backlog => backlog(&runtime, &stage, &options),
            };
            notes.extend(
                scenario_notes
                    .into_iter()
                    .map(|note| format!("{}: {note}", scenario.name())),
            );
            notes.extend(
                stage
                    .log_notes()
                    .into_iter()
                    .map(|note| format!("{}: {note}", scenario.name())),
            );
            lines.extend(scenario_lines);
            drop(stage);
        }
        let section = render(backend.name(), &lines, &notes);
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

fn header(options: &Options) -> String {
    let memory = meminfo_kb("MemTotal").map_or_else(
        || "unknown".to_owned(),
        |kb| format!("{:.1} GiB", kb as f64 / 1024.0 / 1024.0),
    );
    let backends: Vec<_> = options.backends.iter().map(|b| b.name()).collect();
    let scenarios: Vec<_> = options.scenarios.iter().map(|s| s.name()).collect();
    format!(
        "# Gatehouse tenants benchmark (issue 50)\n\n\
         - date: {} UTC\n\
         - machine: {} cores, {memory} RAM; server, database, clients and receiver share it\n\
         - binary: `{}`{}\n\
         - backend: {}; scenarios: {}\n\
         - sizes: {} members; {} searches; {} SCIM users, {}/min for {} s; {} expired \
           deliveries and {} expired events; a backlog of {} (baseline {}), {} s, the other \
           tenant's {} changes/s; {} due rows of a disabled endpoint, CPU over {} s\n\
         - victim probes: {}/s each (`/readyz`, its organization), {} s idle first\n",
        OffsetDateTime::now_utc()
            .format(time::macros::format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second]"
            ))
            .unwrap_or_default(),
        cores(),
        options.binary.display(),
        options
            .extra_env
            .iter()
            .map(|(k, v)| format!("; {k}={v}"))
            .collect::<String>(),
        backends.join(", "),
        scenarios.join(", "),
        group(options.members as f64),
        options.searches,
        group(options.scim_users as f64),
        options.scim_per_minute,
        options.scim_seconds,
        group(options.expired_deliveries as f64),
        group(options.expired_events as f64),
        group(options.backlog as f64),
        group(options.baseline as f64),
        options.backlog_seconds,
        options.changes_per_sec,
        group(options.disabled_due as f64),
        options.cpu_seconds,
        options.probe_rate,
        options.idle_seconds,
    )
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mark {
    Pass,
    Fail,
    /// A figure with no goal of its own.
    Info,
}

/// One line of a backend's table.
struct Line {
    row: String,
    aggressor: String,
    idle: String,
    meanwhile: String,
    goal: String,
    mark: Mark,
}

impl Line {
    fn new(
        row: impl Into<String>,
        aggressor: impl Into<String>,
        idle: impl Into<String>,
        meanwhile: impl Into<String>,
        goal: impl Into<String>,
        mark: Mark,
    ) -> Self {
        Self {
            row: row.into(),
            aggressor: aggressor.into(),
            idle: idle.into(),
            meanwhile: meanwhile.into(),
            goal: goal.into(),
            mark,
        }
    }
}

fn mark(pass: bool) -> Mark {
    if pass {
        Mark::Pass
    } else {
        Mark::Fail
    }
}

fn render(backend: &str, lines: &[Line], notes: &[String]) -> String {
    let mut out = format!(
        "\n## {backend}\n\n| row | what the aggressor does | victim idle | victim meanwhile | \
         the goal | met |\n|---|---|---|---|---|---|\n"
    );
    for line in lines {
        let mark = match line.mark {
            Mark::Pass => "pass",
            Mark::Fail => "**FAIL**",
            Mark::Info => "—",
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {mark} |",
            line.row, line.aggressor, line.idle, line.meanwhile, line.goal
        )
        .unwrap();
    }
    let (met, short) = lines
        .iter()
        .fold((0, 0), |(met, short), line| match line.mark {
            Mark::Pass => (met + 1, short),
            Mark::Fail => (met, short + 1),
            Mark::Info => (met, short),
        });
    writeln!(out, "\n{met} goals met, {short} short.").unwrap();
    if !notes.is_empty() {
        out.push('\n');
        for note in notes {
            writeln!(out, "- {note}").unwrap();
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------------

/// One request: how long it took and its status (`None`: no answer, and `error` says why).
#[derive(Clone, Copy, Debug)]
struct Sample {
    ms: f64,
    status: Option<u16>,
    error: Option<&'static str>,
}

/// Why a request got no answer, in a word.
fn error_kind(error: &reqwest::Error) -> &'static str {
    if error.is_timeout() {
        "timeout"
    } else if error.is_connect() {
        "no connection"
    } else if error.is_body() || error.is_decode() {
        "body cut"
    } else {
        "closed without an answer"
    }
}

impl Sample {
    fn ok(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Sends a request and reads the whole answer.
async fn timed(request: reqwest::RequestBuilder) -> (Sample, Option<reqwest::Response>) {
    let started = Instant::now();
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let sample = Sample {
                ms: started.elapsed().as_secs_f64() * 1000.0,
                status: Some(status),
                error: None,
            };
            (sample, Some(response))
        }
        Err(error) => (
            Sample {
                ms: started.elapsed().as_secs_f64() * 1000.0,
                status: None,
                error: Some(error_kind(&error)),
            },
            None,
        ),
    }
}

/// Sends a request, reads the whole answer and forgets it.
async fn timed_body(request: reqwest::RequestBuilder) -> Sample {
    let started = Instant::now();
    let (status, error) = match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            match response.bytes().await {
                Ok(_) => (Some(status), None),
                Err(error) => (None, Some(error_kind(&error))),
            }
        }
        Err(error) => (None, Some(error_kind(&error))),
    };
    Sample {
        ms: started.elapsed().as_secs_f64() * 1000.0,
        status,
        error,
    }
}

fn latencies(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| s.ms).collect()
}

/// `p50 · p99 · max`, and the answers that were not 2xx.
fn summary(samples: &[Sample]) -> String {
    if samples.is_empty() {
        return "no samples".to_owned();
    }
    let mut values = latencies(samples);
    let max = values.iter().copied().fold(0.0, f64::max);
    let mut text = format!(
        "p50 {} · p99 {} · max {}",
        ms(percentile(&mut values, 0.50)),
        ms(percentile(&mut values, 0.99)),
        ms(max)
    );
    let failed = failures(samples);
    if failed.is_empty() {
        write!(text, " ({} all 2xx)", samples.len()).unwrap();
    } else {
        write!(text, " (**{failed}** of {})", samples.len()).unwrap();
    }
    text
}

/// `2×408, 1×no answer`: the answers that were not 2xx, by status.
fn failures(samples: &[Sample]) -> String {
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for sample in samples.iter().filter(|s| !s.ok()) {
        let key = sample.status.map_or_else(
            || sample.error.unwrap_or("no answer").to_owned(),
            |s| s.to_string(),
        );
        *by_status.entry(key).or_default() += 1;
    }
    let parts: Vec<_> = by_status
        .into_iter()
        .map(|(status, count)| format!("{count}×{status}"))
        .collect();
    parts.join(", ")
}

/// p99 under `goal_ms` and every answer 2xx.
fn within(samples: &[Sample], goal_ms: f64) -> bool {
    let mut values = latencies(samples);
    !samples.is_empty() && percentile(&mut values, 0.99) < goal_ms && samples.iter().all(Sample::ok)
}

fn max_ms(samples: &[Sample]) -> f64 {
    samples.iter().map(|s| s.ms).fold(0.0, f64::max)
}

// ---------------------------------------------------------------------------------------------
// The victim
// ---------------------------------------------------------------------------------------------

/// A tenant made through the API: its owner, signed in, and its organization.
#[derive(Clone)]
struct Tenant {
    user_id: String,
    token: String,
    org_id: String,
}

/// What the victim's probes saw.
#[derive(Default)]
struct Victim {
    readyz: Vec<Sample>,
    read: Vec<Sample>,
    /// Renames of its organization (the purge row only).
    writes: Vec<Sample>,
}

#[derive(Clone, Copy)]
enum Probe {
    Readyz,
    Read,
    Write,
}

/// Runs `work` while the victim probes the server (`rate` times a second each, open loop), and
/// returns what `work` returned with what the probes saw.
async fn probed<T>(
    client: &reqwest::Client,
    base: &str,
    victim: &Tenant,
    rate: f64,
    writes: bool,
    work: impl Future<Output = T>,
) -> (T, Victim) {
    let stop = Arc::new(AtomicBool::new(false));
    let probes = tokio::spawn({
        let (client, stop) = (client.clone(), stop.clone());
        let readyz = format!("{base}/readyz");
        let organization = format!("{base}/api/v1/organizations/{}", victim.org_id);
        let token = victim.token.clone();
        async move {
            let mut every = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut tasks = tokio::task::JoinSet::new();
            let mut i = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                every.tick().await;
                let get = client.get(&readyz);
                tasks.spawn(async move { (Probe::Readyz, timed_body(get).await) });
                let read = client.get(&organization).bearer_auth(&token);
                tasks.spawn(async move { (Probe::Read, timed_body(read).await) });
                if writes {
                    let write = client
                        .patch(&organization)
                        .bearer_auth(&token)
                        .json(&json!({ "name": format!("Victim {i}") }));
                    tasks.spawn(async move { (Probe::Write, timed_body(write).await) });
                }
                i += 1;
            }
            let mut victim = Victim::default();
            while let Some(joined) = tasks.join_next().await {
                let (probe, sample) = joined.unwrap();
                match probe {
                    Probe::Readyz => victim.readyz.push(sample),
                    Probe::Read => victim.read.push(sample),
                    Probe::Write => victim.writes.push(sample),
                }
            }
            victim
        }
    });
    let out = work.await;
    stop.store(true, Ordering::Relaxed);
    (out, probes.await.unwrap())
}

/// The victim's probes alone for `seconds`.
async fn idle(
    client: &reqwest::Client,
    base: &str,
    victim: &Tenant,
    options: &Options,
    writes: bool,
) -> Victim {
    let pause = tokio::time::sleep(Duration::from_secs(options.idle_seconds));
    probed(client, base, victim, options.probe_rate, writes, pause)
        .await
        .1
}

/// The victim's rows of a scenario: `/readyz` and its read, idle and meanwhile.
fn victim_lines(row: &str, aggressor: &str, before: &Victim, during: &Victim) -> Vec<Line> {
    let goal = format!("p99 < {LATENCY_GOAL_MS:.0} ms, all 2xx");
    vec![
        Line::new(
            format!("{row}: victim `GET /readyz`"),
            aggressor,
            summary(&before.readyz),
            summary(&during.readyz),
            goal.clone(),
            mark(within(&during.readyz, LATENCY_GOAL_MS)),
        ),
        Line::new(
            format!("{row}: victim's read, `GET /api/v1/organizations/{{its id}}`"),
            aggressor,
            summary(&before.read),
            summary(&during.read),
            goal,
            mark(within(&during.read, LATENCY_GOAL_MS)),
        ),
    ]
}

/// The server's memory over a scenario.
fn rss_line(row: &str, aggressor: &str, idle_kb: u64, peak_kb: u64, after_kb: u64) -> Line {
    Line::new(
        format!("{row}: server RSS"),
        aggressor,
        mb(idle_kb),
        format!(
            "max {}, {} s after: {}",
            mb(peak_kb),
            SETTLE.as_secs(),
            mb(after_kb)
        ),
        "< 100 MB throughout",
        mark(peak_kb.max(after_kb).max(idle_kb) < RSS_GOAL_KB),
    )
}

// ---------------------------------------------------------------------------------------------
// One scenario's server and database
// ---------------------------------------------------------------------------------------------

/// A scenario's fresh database, its receiver, its logs, and how to start the server on them.
struct Stage<'a> {
    runtime: &'a Runtime,
    options: &'a Options,
    backend: Backend,
    work: tempfile::TempDir,
    receiver: TestReceiver,
    url: String,
    /// The same for every server of the stage: the issuer of its tokens, so that those of the
    /// set-up server are good on the measured one.
    public_url: String,
    db: Db,
    client: reqwest::Client,
    /// The logs of the servers started so far.
    logs: std::cell::RefCell<Vec<PathBuf>>,
    // Dropped last: the database outlives every server.
    _database: Option<TestDatabase>,
}

impl<'a> Stage<'a> {
    fn new(runtime: &'a Runtime, backend: Backend, options: &'a Options) -> Self {
        let work = tempfile::tempdir().unwrap();
        // The receiver must exist before the server starts: the server trusts its CA.
        let receiver = runtime.block_on(TestReceiver::start());
        let (database, url, db) = match backend {
            Backend::Sqlite => {
                let url = gatehouse_testkit::sqlite_url(&work);
                let path = PathBuf::from(url.trim_start_matches("sqlite://"));
                (None, url, Db::Sqlite(path))
            }
            Backend::Postgres => {
                let database = runtime.block_on(TestDatabase::create());
                let url = database.url().to_owned();
                (Some(database), url.clone(), Db::Postgres(url))
            }
        };
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(CLIENT_TIMEOUT)
            .build()
            .unwrap();
        Self {
            runtime,
            options,
            backend,
            work,
            receiver,
            url,
            public_url: format!("http://localhost:{}", server::free_address().port()),
            db,
            client,
            logs: std::cell::RefCell::new(Vec::new()),
            _database: database,
        }
    }

    fn env(&self, setup: bool) -> Vec<(String, String)> {
        let mut env = vec![
            ("GATEHOUSE_DATABASE_URL", self.url.clone()),
            ("GATEHOUSE_SECRET_KEY", SECRET_KEY.to_owned()),
            ("GATEHOUSE_PUBLIC_URL", self.public_url.clone()),
            (
                "GATEHOUSE_WEBHOOK_CA_FILE",
                self.receiver.ca_pem_path().display().to_string(),
            ),
            ("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true".to_owned()),
            ("GATEHOUSE_MAIL_DIR", self.work.path().display().to_string()),
            ("GATEHOUSE_LOG", "warn".to_owned()),
            ("GATEHOUSE_LOG_FORMAT", "json".to_owned()),
            // Every client comes from one address.
            ("GATEHOUSE_MAX_CONNECTIONS_PER_IP", "100000".to_owned()),
        ];
        if setup {
            env.push(("GATEHOUSE_RATE_LIMITS", SETUP_RATE_LIMITS.to_owned()));
        }
        let mut env: Vec<(String, String)> =
            env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        if !setup {
            env.extend(self.options.extra_env.iter().cloned());
        }
        env
    }

    /// Starts the server: the set-up one (rate limits lifted), or the measured one (the
    /// defaults, and `--env`).
    fn start(&self, name: &str, setup: bool) -> Server {
        let env = self.env(setup);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let log = self.work.path().join(format!("{name}.log"));
        self.logs.borrow_mut().push(log.clone());
        let (server, ready_ms) = Server::start(&self.options.binary, None, &env, &log);
        eprintln!(
            "[{}] {name}: ready in {ready_ms:.0} ms, pid {}",
            self.backend.name(),
            server.pid
        );
        server
    }

    /// `gatehouse orgs set-plan` against this stage's database.
    fn set_plan(&self, organization: &str, plan: &str) {
        let status = Command::new(&self.options.binary)
            .env_clear()
            .envs(self.env(true))
            .args(["orgs", "set-plan", organization, plan])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(
            status.success(),
            "gatehouse orgs set-plan {organization} {plan}: {status}"
        );
    }

    /// Registers `name@example.com`, signs them in, and makes their organization on `plan`.
    fn tenant(&self, base: &str, name: &str, plan: &str) -> Tenant {
        let client = &self.client;
        let tenant = self.runtime.block_on(async {
            let email = format!("{name}@example.com");
            let registered = post_json(
                client,
                &format!("{base}/api/v1/auth/register"),
                None,
                &json!({ "email": email, "password": PASSWORD, "full_name": name }),
                201,
            )
            .await;
            let tokens = post_json(
                client,
                &format!("{base}/api/v1/auth/login"),
                None,
                &json!({ "email": email, "password": PASSWORD }),
                200,
            )
            .await;
            let token = tokens["access_token"].as_str().unwrap().to_owned();
            let organization = post_json(
                client,
                &format!("{base}/api/v1/organizations"),
                Some((&token, None)),
                &json!({ "name": format!("{name} org") }),
                201,
            )
            .await;
            Tenant {
                user_id: registered["user_id"].as_str().unwrap().to_owned(),
                token,
                org_id: organization["id"].as_str().unwrap().to_owned(),
            }
        });
        self.set_plan(&tenant.org_id, plan);
        tenant
    }

    /// A webhook endpoint of `tenant` on this stage's receiver at `path`, for `user.updated`.
    fn endpoint(&self, base: &str, tenant: &Tenant, path: &str) -> String {
        let created = self.runtime.block_on(post_json(
            &self.client,
            &format!("{base}/api/v1/webhooks/endpoints"),
            Some((&tenant.token, Some(&tenant.org_id))),
            &json!({ "url": self.receiver.url(path), "events": ["user.updated"] }),
            201,
        ));
        created["id"].as_str().unwrap().to_owned()
    }

    fn seed(&self, what: &str, sql: &str) {
        let started = Instant::now();
        self.runtime.block_on(self.db.execute(sql));
        eprintln!(
            "[{}] seeded {what} in {:.1} s",
            self.backend.name(),
            started.elapsed().as_secs_f64()
        );
    }

    fn count(&self, sql: &str) -> i64 {
        self.runtime.block_on(self.db.count(sql))
    }

    fn log_notes(&self) -> Vec<String> {
        self.logs
            .borrow()
            .iter()
            .flat_map(|log| server_log_notes(log))
            .collect()
    }
}

/// The server's memory: idle before the work, peak during it, and after it settles.
struct Memory {
    idle_kb: u64,
    sampler: RssSampler,
}

impl Memory {
    fn start(server: &Server) -> Self {
        Self {
            idle_kb: server.rss_kb(),
            sampler: RssSampler::start(server.pid),
        }
    }

    /// (idle, peak, after), the last read `SETTLE` after the work.
    fn stop(self, server: &Server) -> (u64, u64, u64) {
        std::thread::sleep(SETTLE);
        let after = server.rss_kb();
        let peak = self.sampler.stop().max(after);
        (self.idle_kb, peak, after)
    }
}

// ---------------------------------------------------------------------------------------------
// SQL for both backends
// ---------------------------------------------------------------------------------------------

/// The database the server uses, written to directly to seed it.
enum Db {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Db {
    /// A row id from an 8-hex-digit `prefix` and the row's number (an SQL expression): a
    /// well-formed UUID either backend stores as its own.
    fn id(&self, prefix: &str, n: &str) -> String {
        match self {
            Self::Sqlite(_) => format!("('{prefix}-0000-4000-8000-' || printf('%012d', {n}))"),
            Self::Postgres(_) => {
                format!("('{prefix}-0000-4000-8000-' || lpad(({n})::text, 12, '0'))::uuid")
            }
        }
    }

    /// An id the API gave (`01a2…-…`, or `ep_01a2…` for an endpoint), as the database keeps it.
    fn uuid(&self, id: &str) -> String {
        let id = match id.split_once('_') {
            Some((_, hex)) => uuid::Uuid::parse_str(hex)
                .unwrap_or_else(|e| panic!("{id}: {e}"))
                .hyphenated()
                .to_string(),
            None => id.to_owned(),
        };
        match self {
            Self::Sqlite(_) => format!("'{id}'"),
            Self::Postgres(_) => format!("'{id}'::uuid"),
        }
    }

    /// The moment `seconds` ago, as the store writes moments.
    fn ago(&self, seconds: i64) -> String {
        match self {
            // diesel's `TimestamptzSqlite`: `2026-12-02 10:11:12.123+00:00`.
            Self::Sqlite(_) => {
                format!("strftime('%Y-%m-%d %H:%M:%f+00:00', 'now', '-{seconds} seconds')")
            }
            Self::Postgres(_) => format!("(now() - interval '{seconds} seconds')"),
        }
    }

    /// A JSON column's value from an SQL text literal.
    fn json(&self, literal: &str) -> String {
        match self {
            Self::Sqlite(_) => format!("'{literal}'"),
            Self::Postgres(_) => format!("'{literal}'::jsonb"),
        }
    }

    /// `FROM` this: `count` rows, `s.n` from 0 (`count` > 0).
    fn series(&self, count: usize) -> String {
        let last = count.saturating_sub(1);
        match self {
            Self::Sqlite(_) => format!(
                "(WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n < {last}) \
                 SELECT n FROM s) AS s"
            ),
            Self::Postgres(_) => format!("generate_series(0, {last}) AS s(n)"),
        }
    }

    /// One of `ids` by the row number expression `index` (0-based).
    fn pick(&self, ids: &[String], index: &str) -> String {
        let mut case = format!("(CASE {index}");
        for (i, id) in ids.iter().enumerate() {
            write!(case, " WHEN {i} THEN {}", self.uuid(id)).unwrap();
        }
        case.push_str(" END)");
        case
    }

    /// Runs statements, in one transaction. (Columns and tables the store keeps beside a row,
    /// such as `scim_users.display_name_key` and `scim_user_emails`, are written too: the seed
    /// must look like what the store writes, or its indexed filters miss the rows.)
    async fn execute(&self, sql: &str) {
        let sql = format!("BEGIN;\n{sql}\nCOMMIT;");
        match self {
            Self::Sqlite(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || {
                    use diesel::connection::SimpleConnection as _;
                    let mut conn = sqlite(&path);
                    conn.batch_execute(&sql)
                        .unwrap_or_else(|e| panic!("{e}:\n{sql}"));
                })
                .await
                .unwrap();
            }
            Self::Postgres(url) => {
                let client = postgres(url).await;
                client
                    .batch_execute(&sql)
                    .await
                    .unwrap_or_else(|e| panic!("{e:?}:\n{sql}"));
                // The statistics autovacuum gathers within a minute of a bulk load, at once: the
                // figures are a loaded database's, not those of the minute after an import (when
                // the planner, guessing, may walk an organization's 100,000 members). SQLite
                // keeps none: Gatehouse never runs ANALYZE there.
                client.batch_execute("ANALYZE").await.unwrap();
            }
        }
    }

    /// The number an SQL query of one `bigint` answers.
    async fn count(&self, sql: &str) -> i64 {
        let sql = sql.to_owned();
        match self {
            Self::Sqlite(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || {
                    use diesel::RunQueryDsl as _;
                    let mut conn = sqlite(&path);
                    diesel::select(diesel::dsl::sql::<diesel::sql_types::BigInt>(&format!(
                        "({sql})"
                    )))
                    .get_result::<i64>(&mut conn)
                    .unwrap_or_else(|e| panic!("{e}: {sql}"))
                })
                .await
                .unwrap()
            }
            Self::Postgres(url) => postgres(url)
                .await
                .query_one(&sql, &[])
                .await
                .unwrap_or_else(|e| panic!("{e:?}: {sql}"))
                .get(0),
        }
    }
}

fn sqlite(path: &Path) -> diesel::sqlite::SqliteConnection {
    use diesel::{connection::SimpleConnection as _, Connection as _};
    let mut conn = diesel::sqlite::SqliteConnection::establish(&path.display().to_string())
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()));
    conn.batch_execute("PRAGMA busy_timeout = 60000;").unwrap();
    conn
}

async fn postgres(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    tokio::spawn(connection);
    client
}

// ---------------------------------------------------------------------------------------------
// 1. search
// ---------------------------------------------------------------------------------------------

/// What the aggressor's searches got: every answer, and when the last was served.
struct Searches {
    served: Vec<Sample>,
    rate_limited: usize,
    bounded: Vec<Sample>,
    other: Vec<Sample>,
    took: Duration,
}

fn search(runtime: &Runtime, stage: &Stage<'_>, options: &Options) -> (Vec<Line>, Vec<String>) {
    let setup = stage.start("setup", true);
    let aggressor = stage.tenant(&setup.base, "aggressor", "free");
    let victim = stage.tenant(&setup.base, "victim", "enterprise");
    drop(setup);
    let db = &stage.db;
    if options.members > 0 {
        let now = db.ago(60);
        let user = db.id("a1000000", "s.n");
        stage.seed(
            &format!("{} members", group(options.members as f64)),
            &format!(
                "INSERT INTO users (id, email, full_name, password_hash, password_changed_at, \
                 created_at, updated_at, email_verified) \
                 SELECT {user}, 'member' || s.n || '@example.com', 'Member ' || s.n, \
                 (SELECT password_hash FROM users WHERE id = {owner}), {now}, {now}, {now}, false \
                 FROM {series};\n\
                 INSERT INTO memberships (organization_id, user_id, role, created_at, updated_at) \
                 SELECT {org}, {user}, 'member', {now}, {now} FROM {series};",
                owner = db.uuid(&aggressor.user_id),
                org = db.uuid(&aggressor.org_id),
                series = db.series(options.members),
            ),
        );
    }
    let server = stage.start("server", false);
    let client = &stage.client;
    let before = runtime.block_on(idle(client, &server.base, &victim, options, false));
    let memory = Memory::start(&server);
    eprintln!(
        "[{}] {} searches at once",
        stage.backend.name(),
        options.searches
    );
    let (searches, during) = runtime.block_on(probed(
        client,
        &server.base,
        &victim,
        options.probe_rate,
        false,
        searches(client, &server.base, &aggressor, options.searches),
    ));
    let (idle_kb, peak_kb, after_kb) = memory.stop(&server);
    drop(server);

    let aggressor_text = format!(
        "Free org, {} members: its whole budget, {} `GET …/members?search=zzqx` at once \
         (each `429` again after its `Retry-After`)",
        group(options.members as f64),
        options.searches
    );
    let mut lines = victim_lines("1 search", &aggressor_text, &before, &during);
    let mut served = searches.served.clone();
    let mut answered = format!(
        "{} served in {:.1} s: {}",
        served.len(),
        searches.took.as_secs_f64(),
        summary(&served)
    );
    write!(
        answered,
        "; `429` from the rate limit: {}, from the heavy-request bound: {}{}",
        searches.rate_limited,
        searches.bounded.len(),
        if searches.bounded.is_empty() {
            String::new()
        } else {
            format!(" ({})", summary(&searches.bounded))
        }
    )
    .unwrap();
    if !searches.other.is_empty() {
        write!(answered, "; other: **{}**", failures(&searches.other)).unwrap();
    }
    served.extend(searches.other.iter().copied());
    lines.push(Line::new(
        "1 search: the search itself",
        &aggressor_text,
        "—",
        answered,
        format!("p99 < {LATENCY_GOAL_MS:.0} ms (`429` of the bound allowed)"),
        mark(within(&served, LATENCY_GOAL_MS) && searches.served.len() == options.searches),
    ));
    lines.push(rss_line(
        "1 search",
        &aggressor_text,
        idle_kb,
        peak_kb,
        after_kb,
    ));
    (lines, Vec::new())
}

/// `count` searches that match nothing, at once; each refused with `429` is sent again after
/// its `Retry-After` until it is served (or answered otherwise).
async fn searches(
    client: &reqwest::Client,
    base: &str,
    aggressor: &Tenant,
    count: usize,
) -> Searches {
    let url = format!(
        "{base}/api/v1/organizations/{}/members?search=zzqx",
        aggressor.org_id
    );
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..count {
        let (client, url, token) = (client.clone(), url.clone(), aggressor.token.clone());
        tasks.spawn(async move {
            let mut answers = Vec::new();
            loop {
                let (sample, response) = timed(client.get(&url).bearer_auth(&token)).await;
                let Some(response) = response else {
                    answers.push((sample, false));
                    return answers;
                };
                let retry_after = response
                    .headers()
                    .get("Retry-After")
                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    .unwrap_or(1);
                let body = response.text().await.unwrap_or_default();
                if sample.status != Some(429) {
                    answers.push((sample, false));
                    return answers;
                }
                answers.push((sample, body.contains("rate limit exceeded")));
                if started.elapsed() > SEARCH_TIMEOUT {
                    return answers;
                }
                tokio::time::sleep(Duration::from_secs(retry_after)).await;
            }
        });
    }
    let mut searches = Searches {
        served: Vec::new(),
        rate_limited: 0,
        bounded: Vec::new(),
        other: Vec::new(),
        took: Duration::ZERO,
    };
    while let Some(joined) = tasks.join_next().await {
        for (sample, rate_limited) in joined.unwrap() {
            match sample.status {
                Some(200) => searches.served.push(sample),
                Some(429) if rate_limited => searches.rate_limited += 1,
                Some(429) => searches.bounded.push(sample),
                _ => searches.other.push(sample),
            }
        }
    }
    searches.took = started.elapsed();
    searches
}

// ---------------------------------------------------------------------------------------------
// 2. scim
// ---------------------------------------------------------------------------------------------

fn scim(runtime: &Runtime, stage: &Stage<'_>, options: &Options) -> (Vec<Line>, Vec<String>) {
    let setup = stage.start("setup", true);
    let aggressor = stage.tenant(&setup.base, "directory", "business");
    let victim = stage.tenant(&setup.base, "victim", "enterprise");
    let created = runtime.block_on(post_json(
        &stage.client,
        &format!(
            "{}/api/v1/organizations/{}/scim-tokens",
            setup.base, aggressor.org_id
        ),
        Some((&aggressor.token, None)),
        &json!({ "name": "bench directory" }),
        201,
    ));
    let scim_token = created["token_secret"].as_str().unwrap().to_owned();
    drop(setup);
    let db = &stage.db;
    if options.scim_users > 0 {
        let now = db.ago(60);
        stage.seed(
            &format!("{} SCIM users", group(options.scim_users as f64)),
            &format!(
                "INSERT INTO scim_users (id, organization_id, user_name, user_name_key, \
                 external_id, display_name, display_name_key, name_formatted, given_name, \
                 family_name, emails, active, created_at, updated_at) \
                 SELECT {id}, {org}, 'user' || s.n || '@example.com', \
                 'user' || s.n || '@example.com', 'ext-' || s.n, 'User ' || s.n, \
                 'user ' || s.n, 'User ' || s.n, 'User', 'Number ' || s.n, \
                 '[{{\"value\":\"user' || s.n || '@example.com\",\"type\":\"work\",\"primary\":true}}]', \
                 true, {now}, {now} FROM {series};\n\
                 INSERT INTO scim_user_emails (organization_id, user_id, value_key) \
                 SELECT {org}, {id}, 'user' || s.n || '@example.com' FROM {series};",
                id = db.id("a2000000", "s.n"),
                org = db.uuid(&aggressor.org_id),
                series = db.series(options.scim_users),
            ),
        );
    }
    let server = stage.start("server", false);
    let client = &stage.client;
    let before = runtime.block_on(idle(client, &server.base, &victim, options, false));
    let memory = Memory::start(&server);
    let users = options.scim_users.max(1);
    let total = (options.scim_per_minute * options.scim_seconds as f64 / 60.0).round() as usize;
    eprintln!(
        "[{}] {total} SCIM filters over {} s",
        stage.backend.name(),
        options.scim_seconds
    );
    let url = format!("{}/scim/v2/{}/Users", server.base, aggressor.org_id);
    let filters = async {
        let mut every =
            tokio::time::interval(Duration::from_secs_f64(60.0 / options.scim_per_minute));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..total {
            every.tick().await;
            // Users all over the directory, each one that exists.
            let user = (i * 7919 + 1) % users;
            let filter = format!("userName eq \"user{user}@example.com\"");
            let request = client
                .get(&url)
                .query(&[("filter", filter)])
                .bearer_auth(&scim_token);
            tasks.spawn(async move {
                let (sample, response) = timed(request).await;
                let found = match response {
                    Some(response) => response
                        .json::<Value>()
                        .await
                        .ok()
                        .and_then(|body| body["totalResults"].as_u64()),
                    None => None,
                };
                (sample, found)
            });
        }
        let mut samples = Vec::new();
        let mut found_one = 0;
        while let Some(joined) = tasks.join_next().await {
            let (sample, found) = joined.unwrap();
            found_one += usize::from(found == Some(1));
            samples.push(sample);
        }
        (samples, found_one)
    };
    let ((filters, found_one), during) = runtime.block_on(probed(
        client,
        &server.base,
        &victim,
        options.probe_rate,
        false,
        filters,
    ));
    let (idle_kb, peak_kb, after_kb) = memory.stop(&server);
    drop(server);

    let aggressor_text = format!(
        "Business org, {} SCIM users: `GET /scim/v2/{{org}}/Users?filter=userName eq \"…\"` \
         {}/min for {} s",
        group(options.scim_users as f64),
        options.scim_per_minute,
        options.scim_seconds
    );
    let mut notes = Vec::new();
    if options.scim_users > 0 && found_one < filters.iter().filter(|s| s.ok()).count() {
        notes.push(format!(
            "**only {found_one} of the filters answered 2xx found their one user**"
        ));
    }
    let mut lines = victim_lines("2 scim", &aggressor_text, &before, &during);
    lines.push(Line::new(
        "2 scim: the filter itself",
        &aggressor_text,
        "—",
        summary(&filters),
        format!("p99 < {LATENCY_GOAL_MS:.0} ms, all 2xx"),
        mark(within(&filters, LATENCY_GOAL_MS)),
    ));
    lines.push(rss_line(
        "2 scim",
        &aggressor_text,
        idle_kb,
        peak_kb,
        after_kb,
    ));
    (lines, notes)
}

// ---------------------------------------------------------------------------------------------
// 3. purge
// ---------------------------------------------------------------------------------------------

fn purge(runtime: &Runtime, stage: &Stage<'_>, options: &Options) -> (Vec<Line>, Vec<String>) {
    let db = &stage.db;
    let setup = stage.start("setup", true);
    let history = stage.tenant(&setup.base, "history", "enterprise");
    let victim = stage.tenant(&setup.base, "victim", "enterprise");
    // Each event had a delivery to each endpoint: as many endpoints as deliveries per event.
    let per_event = options
        .expired_deliveries
        .div_ceil(options.expired_events.max(1))
        .max(1);
    let endpoints: Vec<String> = (0..per_event)
        .map(|i| stage.endpoint(&setup.base, &history, &format!("/history/{i}")))
        .collect();
    drop(setup);

    let old = db.ago(EXPIRED_DAYS * 86_400);
    let event = |n: &str| db.id("a3000000", n);
    let mut sql = String::new();
    if options.expired_events > 0 {
        writeln!(
            sql,
            "INSERT INTO events (id, event_type, organization_id, user_id, data, occurred_at, \
             dispatched_at) \
             SELECT {id}, 'organization.updated', {org}, NULL, {data}, {old}, {old} FROM {series};",
            id = event("s.n"),
            org = db.uuid(&history.org_id),
            data = db.json(r#"{"organization_id":"bench","changes":["name"]}"#),
            series = db.series(options.expired_events),
        )
        .unwrap();
    }
    if options.expired_deliveries > 0 {
        // A finished delivery's payload, of the size a real one has.
        let payload = json!({
            "id": "00000000-0000-4000-8000-000000000000",
            "type": "organization.updated",
            "timestamp": "2026-10-01T00:00:00Z",
            "data": { "organization": { "id": history.org_id, "name": "History org",
                      "slug": "history-org", "plan": "enterprise" }, "changes": ["name"] },
        })
        .to_string();
        let events = options.expired_events;
        writeln!(
            sql,
            "INSERT INTO webhook_deliveries (id, endpoint_id, organization_id, event_id, \
             event_type, payload, status, attempt, next_attempt_at, http_status, response_body, \
             duration_ms, delivered_at, created_at) \
             SELECT {id}, {endpoint}, {org}, {event}, 'organization.updated', '{payload}', \
             'success', 1, NULL, 200, '', 12, {old}, {old} FROM {series};",
            id = db.id("a4000000", "s.n"),
            endpoint = db.pick(&endpoints, &format!("s.n / {events}")),
            org = db.uuid(&history.org_id),
            event = event(&format!("s.n % {events}")),
            series = db.series(options.expired_deliveries),
        )
        .unwrap();
    }
    // The hourly purges ran just now: the idle server does not purge.
    let ran_now = format!(
        "DELETE FROM periodic_runs;\n\
         INSERT INTO periodic_runs (task, last_run_at) VALUES ('purges', {});",
        db.ago(0)
    );
    sql.push_str(&ran_now);
    stage.seed(
        &format!(
            "{} expired deliveries and {} events",
            group(options.expired_deliveries as f64),
            group(options.expired_events as f64)
        ),
        &sql,
    );

    let client = &stage.client;
    let server = stage.start("idle", false);
    let before = runtime.block_on(idle(client, &server.base, &victim, options, true));
    drop(server);
    // Now the purges are due: the next server purges when its schedule says.
    stage.seed("a due purge", "DELETE FROM periodic_runs;");
    let expired_deliveries = "SELECT count(*) FROM webhook_deliveries".to_owned();
    let expired_events = format!(
        "SELECT count(*) FROM events WHERE occurred_at < {}",
        db.ago((EXPIRED_DAYS - 5) * 86_400)
    );
    let total_before = stage.count(&expired_deliveries) + stage.count(&expired_events);

    let server = stage.start("server", false);
    let started = Instant::now();
    let memory = Memory::start(&server);
    let timeout = Duration::from_secs(options.purge_timeout);
    eprintln!(
        "[{}] {total_before} expired rows; writes until they are gone (at most {timeout:?})",
        stage.backend.name()
    );
    let watch = async {
        let mut first_gone = None;
        let mut all_gone = None;
        let mut left = total_before;
        while started.elapsed() < timeout {
            tokio::time::sleep(Duration::from_secs(1)).await;
            left = db.count(&expired_deliveries).await + db.count(&expired_events).await;
            if left < total_before && first_gone.is_none() {
                first_gone = Some(started.elapsed());
            }
            if left == 0 {
                all_gone = Some(started.elapsed());
                // A few writes after it, too.
                tokio::time::sleep(Duration::from_secs(2)).await;
                break;
            }
        }
        (first_gone, all_gone, left)
    };
    let ((first_gone, all_gone, left), during) = runtime.block_on(probed(
        client,
        &server.base,
        &victim,
        options.probe_rate,
        true,
        watch,
    ));
    let (idle_kb, peak_kb, after_kb) = memory.stop(&server);
    drop(server);

    let aggressor_text = format!(
        "{} finished deliveries and {} events past retention ({} days old), purged",
        group(options.expired_deliveries as f64),
        group(options.expired_events as f64),
        EXPIRED_DAYS
    );
    let secs =
        |d: Option<Duration>| d.map_or("never".to_owned(), |d| format!("{:.0} s", d.as_secs_f64()));
    let purge_text = match all_gone {
        Some(_) => format!(
            "first rows gone {} after start, all gone {} after start",
            secs(first_gone),
            secs(all_gone)
        ),
        None => format!(
            "**{} of {} rows still there after {} s** (first gone: {})",
            group(left as f64),
            group(total_before as f64),
            options.purge_timeout,
            secs(first_gone)
        ),
    };
    let mut lines = victim_lines("3 purge", &aggressor_text, &before, &during);
    lines.push(Line::new(
        "3 purge: victim's write, `PATCH /api/v1/organizations/{its id}` (`name`)",
        &aggressor_text,
        summary(&before.writes),
        format!("{}; {purge_text}", summary(&during.writes)),
        format!("no write over {WRITE_GOAL_MS:.0} ms, all 2xx; the rows purged"),
        mark(
            all_gone.is_some()
                && !during.writes.is_empty()
                && max_ms(&during.writes) <= WRITE_GOAL_MS
                && during.writes.iter().all(Sample::ok),
        ),
    ));
    lines.push(rss_line(
        "3 purge",
        &aggressor_text,
        idle_kb,
        peak_kb,
        after_kb,
    ));
    let notes = vec![
        "idle: a server whose hourly purge had just run (the rows there); meanwhile: from the \
         start of a server whose purge was due until 2 s after the rows were gone"
            .to_owned(),
    ];
    (lines, notes)
}

// ---------------------------------------------------------------------------------------------
// 4. backlog
// ---------------------------------------------------------------------------------------------

/// One phase of the backlog row: the backlogged tenant's drain and the other's deliveries.
struct Drain {
    /// The backlogged tenant's deliveries received a second, from the server's start.
    per_sec: f64,
    received: usize,
    span: Duration,
    /// The other tenant's deliveries: commit → received.
    other: Vec<f64>,
    other_expected: usize,
    /// Cores the server used meanwhile.
    cores: f64,
    victim: Victim,
}

fn backlog(runtime: &Runtime, stage: &Stage<'_>, options: &Options) -> (Vec<Line>, Vec<String>) {
    let db = &stage.db;
    let setup = stage.start("setup", true);
    let backlogged = stage.tenant(&setup.base, "backlogged", "enterprise");
    let other = stage.tenant(&setup.base, "other", "enterprise");
    let idle_tenant = stage.tenant(&setup.base, "disabled", "enterprise");
    let endpoints: Vec<String> = (0..BACKLOG_ENDPOINTS)
        .map(|i| stage.endpoint(&setup.base, &backlogged, &format!("/backlog/{i}")))
        .collect();
    stage.endpoint(&setup.base, &other, "/other");
    let disabled = stage.endpoint(&setup.base, &idle_tenant, "/disabled");
    // One real delivery of the backlogged tenant: the payload its seeded ones copy.
    runtime.block_on(async {
        let url = format!("{}/api/v1/users/me", setup.base);
        assert!(rename(&stage.client, &url, &backlogged.token, "Backlogged Owner").await);
        stage
            .receiver
            .wait_for(BACKLOG_ENDPOINTS, Duration::from_secs(30))
            .await;
        // Their outcomes recorded before the server stops (else they are sent again later).
        tokio::time::sleep(Duration::from_secs(1)).await;
    });
    drop(setup);

    let due = |what: &str, prefix: &str, count: usize, tenant: &Tenant, ids: &[String]| {
        if count == 0 {
            return;
        }
        let now = db.ago(60);
        stage.seed(
            what,
            &format!(
                "INSERT INTO webhook_deliveries (id, endpoint_id, organization_id, event_id, \
                 event_type, payload, status, attempt, next_attempt_at, created_at) \
                 SELECT {id}, {endpoint}, {org}, {event}, 'user.updated', \
                 (SELECT payload FROM webhook_deliveries ORDER BY created_at LIMIT 1), \
                 'pending', 1, {now}, {now} FROM {series};",
                id = db.id(prefix, "s.n"),
                endpoint = db.pick(ids, &format!("s.n % {}", ids.len())),
                org = db.uuid(&tenant.org_id),
                event = db.id(&format!("{}1", &prefix[..7]), "s.n"),
                series = db.series(count),
            ),
        );
    };

    // Baseline: a small backlog, drained in full.
    due(
        &format!("a baseline of {} due deliveries", options.baseline),
        BASELINE_PREFIX,
        options.baseline,
        &backlogged,
        &endpoints,
    );
    let server = stage.start("baseline", false);
    let memory = Memory::start(&server);
    let baseline = drain(
        stage,
        &server,
        &other,
        options,
        DrainRun {
            due: options.baseline,
            prefix: BASELINE_PREFIX,
            window: None,
        },
    );
    let (_, baseline_peak, _) = memory.stop(&server);
    drop(server);

    // The backlog, over `--backlog-seconds`.
    due(
        &format!(
            "a backlog of {} due deliveries",
            group(options.backlog as f64)
        ),
        BACKLOG_PREFIX,
        options.backlog,
        &backlogged,
        &endpoints,
    );
    let server = stage.start("backlog", false);
    let memory = Memory::start(&server);
    let backlog = drain(
        stage,
        &server,
        &other,
        options,
        DrainRun {
            due: options.backlog,
            prefix: BACKLOG_PREFIX,
            window: Some(Duration::from_secs(options.backlog_seconds)),
        },
    );
    let (idle_kb, backlog_peak, after_kb) = memory.stop(&server);
    drop(server);

    // A disabled endpoint's due rows, and nothing else to do.
    stage.seed(
        "the backlog deleted",
        &format!(
            "DELETE FROM webhook_deliveries WHERE organization_id = {} \
             AND next_attempt_at IS NOT NULL;\n\
             UPDATE webhook_endpoints SET is_active = false WHERE id = {};",
            db.uuid(&backlogged.org_id),
            db.uuid(&disabled)
        ),
    );
    due(
        &format!(
            "{} due deliveries of a disabled endpoint",
            group(options.disabled_due as f64)
        ),
        "a7000000",
        options.disabled_due,
        &idle_tenant,
        std::slice::from_ref(&disabled),
    );
    let server = stage.start("disabled", false);
    std::thread::sleep(SETTLE);
    let cpu_before = server.cpu_secs();
    std::thread::sleep(Duration::from_secs(options.cpu_seconds));
    let idle_cores = (server.cpu_secs() - cpu_before) / options.cpu_seconds.max(1) as f64;
    let disabled_kb = server.rss_kb();
    drop(server);

    let aggressor_text = format!(
        "{} due deliveries of one tenant ({BACKLOG_ENDPOINTS} endpoints); another renames its \
         user {}/s",
        group(options.backlog as f64),
        options.changes_per_sec
    );
    let share = if baseline.per_sec > 0.0 {
        backlog.per_sec / baseline.per_sec
    } else {
        0.0
    };
    let mut lines = victim_lines(
        "4 backlog",
        &aggressor_text,
        &baseline.victim,
        &backlog.victim,
    );
    lines.push(Line::new(
        "4 backlog: the backlogged tenant's drain",
        &aggressor_text,
        format!(
            "{} due: {}/s ({} in {:.1} s), server {:.2} cores",
            group(options.baseline as f64),
            group(baseline.per_sec),
            group(baseline.received as f64),
            baseline.span.as_secs_f64(),
            baseline.cores
        ),
        format!(
            "{}/s ({} in {:.0} s; {:.0} % of the baseline), server {:.2} cores",
            group(backlog.per_sec),
            group(backlog.received as f64),
            backlog.span.as_secs_f64(),
            share * 100.0,
            backlog.cores
        ),
        format!(">= {:.0} % of its no-backlog rate", DRAIN_GOAL * 100.0),
        mark(share >= DRAIN_GOAL && baseline.received == options.baseline),
    ));
    lines.push(Line::new(
        "4 backlog: the other tenant's delivery (commit → received)",
        &aggressor_text,
        deliveries(&baseline),
        deliveries(&backlog),
        format!("p99 < {DELIVERY_GOAL_MS:.0} ms, every one delivered"),
        mark(delivered_within(&backlog, DELIVERY_GOAL_MS)),
    ));
    lines.push(Line::new(
        "4 backlog: a disabled endpoint's due rows, nothing else to do",
        format!(
            "{} due deliveries of a disabled endpoint",
            group(options.disabled_due as f64)
        ),
        "—",
        format!(
            "server {:.3} cores over {} s; RSS {}",
            idle_cores,
            options.cpu_seconds,
            mb(disabled_kb)
        ),
        "not scanned (no figure in the issue)",
        Mark::Info,
    ));
    lines.push(rss_line(
        "4 backlog",
        &aggressor_text,
        idle_kb,
        backlog_peak.max(baseline_peak),
        after_kb,
    ));
    let notes = vec![
        "victim idle: while the baseline drains; meanwhile: while the backlog drains; the drain \
         rate counts the backlogged tenant's deliveries received from the server's start"
            .to_owned(),
    ];
    (lines, notes)
}

/// What one drain waits for: `due` deliveries of the backlogged tenant, seeded with ids of
/// `prefix`; for `window`, or (the baseline: `None`) until they have all arrived.
struct DrainRun {
    due: usize,
    prefix: &'static str,
    window: Option<Duration>,
}

/// Starts the other tenant's changes and the victim's probes, and waits until the run's
/// deliveries of the backlogged tenant have arrived and `--backlog-seconds` have passed (the
/// baseline), or for the run's window.
fn drain(
    stage: &Stage<'_>,
    server: &Server,
    other: &Tenant,
    options: &Options,
    run: DrainRun,
) -> Drain {
    let DrainRun {
        due,
        prefix,
        window,
    } = run;
    let receiver = &stage.receiver;
    let client = &stage.client;
    let before = receiver.requests().len();
    let started = SystemTime::now();
    let cpu_before = server.cpu_secs();
    let clock = Instant::now();
    let url = format!("{}/api/v1/users/me", server.base);
    let least = Duration::from_secs(options.backlog_seconds);
    let phase = if window.is_some() {
        "backlog"
    } else {
        "baseline"
    };
    let work = async {
        let mut every =
            tokio::time::interval(Duration::from_secs_f64(1.0 / options.changes_per_sec));
        let mut tasks = tokio::task::JoinSet::new();
        let deadline = window.unwrap_or(BASELINE_TIMEOUT);
        let mut i = 0_u64;
        loop {
            every.tick().await;
            if clock.elapsed() >= deadline {
                break;
            }
            // The baseline runs until it is drained, and at least as long as the backlog's
            // window: the other tenant's changes are as many in both.
            if window.is_none() && clock.elapsed() >= least {
                let arrived = receiver.requests()[before..]
                    .iter()
                    .filter(|r| seeded(r, prefix))
                    .count();
                if arrived >= due {
                    break;
                }
            }
            let (client, url, token) = (client.clone(), url.clone(), other.token.clone());
            // A name of its own in each phase: every rename is a change.
            let name = format!("Other {phase} {i}");
            tasks.spawn(async move { rename(&client, &url, &token, &name).await });
            i += 1;
        }
        let mut changed = 0;
        while let Some(joined) = tasks.join_next().await {
            changed += usize::from(joined.unwrap());
        }
        // The other tenant's last deliveries.
        tokio::time::sleep(Duration::from_secs(2)).await;
        changed
    };
    let (changes, victim) = stage.runtime.block_on(probed(
        client,
        &server.base,
        other,
        options.probe_rate,
        false,
        work,
    ));
    let cores = (server.cpu_secs() - cpu_before) / clock.elapsed().as_secs_f64();
    let requests = receiver.requests().split_off(before);
    let end = match window {
        Some(window) => started + window,
        None => SystemTime::now(),
    };
    let backlogged: Vec<&ReceivedRequest> = first_arrivals(&requests)
        .into_iter()
        .filter(|r| seeded(r, prefix) && r.received_at <= end)
        .collect();
    // Until the last arrived when all did, else the window.
    let last = backlogged
        .iter()
        .map(|r| r.received_at)
        .max()
        .and_then(|last| last.duration_since(started).ok())
        .unwrap_or_default();
    let span = match window {
        Some(window) if backlogged.len() < due => window,
        _ => last,
    };
    let other_latencies = first_arrivals(&requests)
        .into_iter()
        .filter(|r| r.path == "/other")
        .filter_map(commit_to_receipt_ms)
        .collect();
    Drain {
        per_sec: if span.is_zero() {
            0.0
        } else {
            backlogged.len() as f64 / span.as_secs_f64()
        },
        received: backlogged.len(),
        span,
        other: other_latencies,
        other_expected: changes,
        cores,
        victim,
    }
}

/// Whether a request is a delivery seeded with ids of `prefix` (its `X-Service-Delivery-Id`
/// is the row's id, with or without a `xxx_` prefix and hyphens).
fn seeded(request: &ReceivedRequest, prefix: &str) -> bool {
    request
        .header("x-service-delivery-id")
        .map(|id| id.rsplit('_').next().unwrap_or(id).replace('-', ""))
        .is_some_and(|id| id.starts_with(prefix))
}

fn deliveries(drain: &Drain) -> String {
    let mut values = drain.other.clone();
    let max = values.iter().copied().fold(0.0, f64::max);
    format!(
        "p50 {} · p99 {} · max {} ({} of {} delivered)",
        ms(percentile(&mut values, 0.50)),
        ms(percentile(&mut values, 0.99)),
        ms(max),
        drain.other.len(),
        drain.other_expected
    )
}

fn delivered_within(drain: &Drain, goal_ms: f64) -> bool {
    let mut values = drain.other.clone();
    !values.is_empty()
        && drain.other.len() >= drain.other_expected
        && percentile(&mut values, 0.99) < goal_ms
}
