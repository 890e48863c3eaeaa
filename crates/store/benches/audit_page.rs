//! `just bench-audit`: is a filtered page of the audit log fast at a million records?
//!
//! ```text
//! cargo bench -p gatehouse-store --bench audit_page -- [--backend sqlite|postgres|both]
//!     [--records N] [--runs N] [--page-size N] [--deep-page N] [--without-pair-indexes]
//! ```
//!
//! For each backend: a fresh database (a temporary SQLite file, or a throwaway PostgreSQL
//! database from `gatehouse-testkit`, dropped at the end), migrated by the store's own
//! migrations, then loaded with `--records` audit records (1,000,000 by default) in multi-row
//! `INSERT`s of 1,000 rows, 20,000 rows a transaction. The records are generated here, the same
//! on both backends (a fixed seed), the way the service writes them (UUIDv7 ids, the store's
//! text forms), in time order over a year:
//!
//! - 1,000 organizations: one with 10 % of the records, one 4 %, one 2 %, seven 1 %, the other
//!   990 sharing 72 % (from about 3,000 records down to about 275 each at a million);
//! - 5 % outside any organization: sign-ins and account changes (`auth.login`,
//!   `auth.login_failed` with an unknown user among them, ...);
//! - 9,000 users and 1,000 API keys acting; an organization's records are by its members (up to
//!   150) and keys, the operator and the system;
//! - every action of `AuditAction::ALL`, organization actions on a 1/rank (Zipf) scale.
//!
//! Then every filter is read back through the store's port, `AuditStore::audit_log` (what
//! `GET /api/v1/organizations/{id}/audit-log` and `GET /control/audit` call), and compared with
//! the records generated, page 1 and the deep page, before anything is timed. Each filter's
//! first page and deep page (`--deep-page`, 50 by default, or the last page when there are
//! fewer) of `--page-size` records (100, the API's most; its default is 20) are then timed
//! through the port, `--runs` times (20) after 3 warm-up calls, and the p50 and p99 printed, one
//! table per backend. Last come the plans of the statements the port runs for each filter (the
//! total's `COUNT(*)`, page 1, the deep page):
//!
//! - SQLite: `EXPLAIN QUERY PLAN` with the values bound, as the store binds them. The service
//!   never runs `ANALYZE`, and neither does the bench: the planner has no statistics.
//! - PostgreSQL: `EXPLAIN (ANALYZE, BUFFERS)` of the sixth `EXECUTE` of the statement prepared
//!   with the store's parameter types (`LIMIT` and `OFFSET` included), after `VACUUM (ANALYZE)`
//!   (which autovacuum would have done). The store's connections prepare each statement once
//!   and run it again and again, and from the sixth run the plan cache may settle on a generic
//!   plan (its conditions show `$n`): the plan shown is the one the timed calls ran.
//!
//! `--without-pair-indexes` drops the indexes of [`PAIR_INDEXES`] (migration 20) from the
//! bench's own database before loading it: the figures as they were before that migration.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    fmt::Write as _,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::Arc,
    time::{Duration, Instant},
};

use diesel::{sql_types::Text, sqlite::SqliteConnection, QueryableByName};
use diesel_async::{
    sync_connection_wrapper::SyncConnectionWrapper, AsyncConnection, AsyncPgConnection,
    RunQueryDsl, SimpleAsyncConnection,
};
use gatehouse_domain::model::{
    ApiKeyId, AuditAction, AuditActor, AuditFilter, AuditOutcome, AuditRecord, AuditTarget,
    OrganizationId, Origin, PageRequest, TargetKind, UserId,
};
use gatehouse_store::{Backend, Store, StoreOptions};
use time::{
    macros::{datetime, format_description},
    OffsetDateTime, UtcOffset,
};
use uuid::Uuid;

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/support/mod.rs"]
mod support;

const DEFAULT_RECORDS: u64 = 1_000_000;
const ORGANIZATIONS: usize = 1_000;
const USERS: usize = 9_000;
const API_KEYS: usize = 1_000;
/// The share of the records that belong to an organization; the rest are sign-ins.
const IN_ORGANIZATIONS: f64 = 0.95;
const ROWS_PER_INSERT: u64 = 1_000;
const ROWS_PER_TRANSACTION: u64 = 20_000;
const WARM_UP: usize = 3;
/// The log covers the year up to the bench's date.
const START: OffsetDateTime = datetime!(2025-11-25 00:00:00 UTC);
const SPAN_MICROS: i64 = 365 * 24 * 3600 * 1_000_000;
const SEED: u64 = 0x6761_7465_686f_7573;

/// The indexes of an organization's log by action and by actor (migration 20), dropped by
/// `--without-pair-indexes`.
const PAIR_INDEXES: &[&str] = &[
    "audit_log_organization_action_idx",
    "audit_log_organization_actor_idx",
];

const COLUMNS: &str = "id, occurred_at, actor_type, actor_id, organization_id, action, \
                       target_type, target_id, ip, user_agent, request_id, outcome";

const USER_AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) \
     Chrome/131.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7_1) AppleWebKit/605.1.15 (KHTML, like Gecko) \
     Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like \
     Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
    "curl/8.5.0",
    "terraform-provider-gatehouse/1.4.2 (+https://registry.terraform.io)",
    "python-requests/2.32.3",
];

/// Actions outside any organization, with their weights.
const SIGN_IN_ACTIONS: &[(&str, u32)] = &[
    ("auth.login", 600),
    ("auth.login_failed", 150),
    ("auth.logout", 100),
    ("auth.mfa_required", 80),
    ("user.updated", 30),
    ("auth.password_changed", 20),
    ("user.registered", 10),
    ("auth.session_revoked", 5),
    ("user.deleted", 5),
];

/// Organization actions, most frequent first (weights 1/rank); actions not named here (new
/// ones) come last.
const ORGANIZATION_ACTIONS: &[&str] = &[
    "webhook_endpoint.updated",
    "member.invited",
    "member.joined",
    "api_key.created",
    "member.role_changed",
    "api_key.revoked",
    "organization.updated",
    "webhook.delivery_retried",
    "webhook.tested",
    "application.updated",
    "member.removed",
    "invitation.revoked",
    "webhook_endpoint.created",
    "application.secret_rotated",
    "organization.policies_changed",
    "organization.branding_changed",
    "application.created",
    "webhook_endpoint.deleted",
    "sso.configured",
    "application.deleted",
    "organization.plan_changed",
    "webhook.dead_letters_replayed",
    "organization.created",
    "organization.deleted",
];

struct Options {
    backends: Vec<Backend>,
    records: u64,
    runs: usize,
    page_size: u32,
    deep_page: u32,
    without_pair_indexes: bool,
}

fn main() {
    let options = parse_args();
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let model = Arc::new(Model::new(options.records));
    let cases = Arc::new(model.cases());
    print!("{}", header(&options, &model));
    for &backend in &options.backends {
        let section = runtime.block_on(run_backend(backend, &options, &model, &cases));
        print!("{section}");
    }
    println!(
        "\nTotal wall time: {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

fn parse_args() -> Options {
    let usage = "usage: audit_page [--backend sqlite|postgres|both] [--records N] [--runs N] \
                 [--page-size N] [--deep-page N] [--without-pair-indexes]";
    let mut options = Options {
        backends: vec![Backend::Sqlite, Backend::Postgres],
        records: DEFAULT_RECORDS,
        runs: 20,
        page_size: PageRequest::MAX_SIZE,
        deep_page: 50,
        without_pair_indexes: false,
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
        let number = |text: String, what: &str| -> u64 {
            text.replace('_', "")
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .unwrap_or_else(|| {
                    eprintln!("{what} takes a whole number above 0\n{usage}");
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
            "--records" => options.records = number(value(), "--records"),
            "--runs" => options.runs = number(value(), "--runs") as usize,
            "--page-size" => {
                options.page_size = u32::try_from(number(value(), "--page-size"))
                    .ok()
                    .filter(|size| *size <= PageRequest::MAX_SIZE)
                    .unwrap_or_else(|| {
                        eprintln!("--page-size is at most {}\n{usage}", PageRequest::MAX_SIZE);
                        std::process::exit(2)
                    });
            }
            "--deep-page" => {
                options.deep_page =
                    u32::try_from(number(value(), "--deep-page")).unwrap_or(u32::MAX);
            }
            "--without-pair-indexes" => options.without_pair_indexes = true,
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

fn header(options: &Options, model: &Model) -> String {
    let backends: Vec<_> = options.backends.iter().map(|b| b.as_str()).collect();
    let mut out = format!(
        "# Audit log: a filtered page at {} records\n\n\
         - date: {}\n\
         - machine: {} cores\n\
         - backends: {}\n\
         - page size {}, deep page {} (or the last page when there are fewer); {} timed calls \
         after {WARM_UP} warm-up calls, through AuditStore::audit_log\n\
         - data: {} organizations, {} users and {} API keys acting, {} actions, {:.0} % of the \
         records outside any organization, over the year from {}\n",
        thousands(options.records),
        OffsetDateTime::now_utc()
            .format(format_description!(
                "[year]-[month]-[day] [hour]:[minute]:[second] UTC"
            ))
            .expect("now formats"),
        std::thread::available_parallelism().map_or(1, usize::from),
        backends.join(", "),
        options.page_size,
        options.deep_page,
        options.runs,
        thousands(ORGANIZATIONS as u64),
        thousands(USERS as u64),
        thousands(API_KEYS as u64),
        AuditAction::ALL.len(),
        (1.0 - IN_ORGANIZATIONS) * 100.0,
        START.date(),
    );
    let _ = writeln!(
        out,
        "- the biggest organizations: {}",
        (0..3)
            .map(|o| format!("{} records", thousands(model.expected_records(o))))
            .collect::<Vec<_>>()
            .join(", ")
    );
    out
}

// ------------------------------------------------------------------------------------------
// The records.

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// splitmix64: small, fast and the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(mix(seed ^ SEED))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1_u64 << 53) as f64
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut bytes = [0; N];
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
        bytes
    }

    fn uuid(&mut self) -> Uuid {
        uuid::Builder::from_random_bytes(self.bytes()).into_uuid()
    }
}

/// Picks from cumulative weights.
fn pick<T: Copy>(rng: &mut Rng, items: &[(T, f64)]) -> T {
    let total = items.last().map_or(0.0, |(_, c)| *c);
    let at = rng.unit() * total;
    let i = items.partition_point(|(_, c)| *c <= at);
    items[i.min(items.len() - 1)].0
}

fn cumulative<T: Copy>(weighted: impl IntoIterator<Item = (T, f64)>) -> Vec<(T, f64)> {
    let mut sum = 0.0;
    weighted
        .into_iter()
        .map(|(item, weight)| {
            sum += weight;
            (item, sum)
        })
        .collect()
}

/// Who and what the generated log is about; every record is a pure function of its index.
struct Model {
    records: u64,
    organizations: Vec<OrganizationId>,
    /// Each organization's share of all records, summed.
    organization_cumulative: Vec<f64>,
    /// Per organization: the users (indices into `users`) who act in it.
    members: Vec<Vec<usize>>,
    /// Per organization: its API keys (indices into `api_keys`).
    keys: Vec<Vec<usize>>,
    users: Vec<UserId>,
    api_keys: Vec<ApiKeyId>,
    sign_in_actions: Vec<(AuditAction, f64)>,
    organization_actions: Vec<(AuditAction, f64)>,
}

impl Model {
    fn new(records: u64) -> Self {
        let mut shares = vec![0.10, 0.04, 0.02];
        shares.extend([0.01; 7]);
        let tail: Vec<f64> = (0..ORGANIZATIONS - shares.len())
            .map(|j| 1.0 / (1.0 + j as f64 / 100.0))
            .collect();
        let tail_share = IN_ORGANIZATIONS - shares.iter().sum::<f64>();
        let tail_sum: f64 = tail.iter().sum();
        shares.extend(tail.iter().map(|w| w / tail_sum * tail_share));
        let organization_cumulative = cumulative(shares.iter().map(|s| ((), *s)))
            .into_iter()
            .map(|(_, c)| c)
            .collect();

        let mut rng = Rng::new(u64::MAX);
        let organizations = (0..ORGANIZATIONS).map(|_| rng.uuid().into()).collect();
        let users = (0..USERS).map(|_| UserId::from_uuid(rng.uuid())).collect();
        let api_keys = (0..API_KEYS).map(|_| rng.uuid().into()).collect();
        let members = shares
            .iter()
            .map(|share| {
                let expected = share * records as f64;
                let count = ((expected / 600.0) as usize).clamp(3, 150);
                (0..count).map(|_| rng.index(USERS)).collect()
            })
            .collect();
        let keys = (0..ORGANIZATIONS)
            .map(|o| (0..=o % 4).map(|_| rng.index(API_KEYS)).collect())
            .collect();

        let action = |name: &str| {
            name.parse::<AuditAction>()
                .unwrap_or_else(|()| panic!("{name} is not an audit action any more"))
        };
        let mut sign_in: Vec<(AuditAction, f64)> = SIGN_IN_ACTIONS
            .iter()
            .map(|(name, weight)| (action(name), f64::from(*weight)))
            .collect();
        let mut ordered: Vec<AuditAction> =
            ORGANIZATION_ACTIONS.iter().map(|n| action(n)).collect();
        // Actions named in neither list (newer ones): a user's own are sign-in side, with a
        // small weight; the others rarest in organizations.
        for &action in AuditAction::ALL {
            if ordered.contains(&action) || sign_in.iter().any(|(a, _)| *a == action) {
                continue;
            }
            if ["auth.", "user.", "mfa."]
                .iter()
                .any(|prefix| action.as_str().starts_with(prefix))
            {
                sign_in.push((action, 5.0));
            } else {
                ordered.push(action);
            }
        }
        let sign_in_actions = cumulative(sign_in);
        let organization_actions = cumulative(
            ordered
                .into_iter()
                .enumerate()
                .map(|(rank, action)| (action, 1.0 / (rank + 1) as f64)),
        );
        Self {
            records,
            organizations,
            organization_cumulative,
            members,
            keys,
            users,
            api_keys,
            sign_in_actions,
            organization_actions,
        }
    }

    /// About how many records organization `o` gets.
    fn expected_records(&self, o: usize) -> u64 {
        let below = if o == 0 {
            0.0
        } else {
            self.organization_cumulative[o - 1]
        };
        ((self.organization_cumulative[o] - below) * self.records as f64).round() as u64
    }

    /// Record `i` of the log, oldest first.
    fn record(&self, i: u64) -> AuditRecord {
        let mut rng = Rng::new(i);
        let step = SPAN_MICROS / self.records as i64;
        let base = (i128::from(i) * i128::from(SPAN_MICROS) / i128::from(self.records)) as i64;
        // Jitter within half a step keeps the log strictly in time order.
        let jitter = rng.below((step / 2).max(1) as u64) as i64;
        let occurred_at = START + time::Duration::microseconds(base + jitter);
        let millis = (occurred_at.unix_timestamp_nanos() / 1_000_000) as u64;
        let id = uuid::Builder::from_unix_timestamp_millis(millis, &rng.bytes()).into_uuid();

        let at = rng.unit();
        let organization = (at < IN_ORGANIZATIONS).then(|| {
            self.organization_cumulative
                .partition_point(|c| *c <= at)
                .min(ORGANIZATIONS - 1)
        });
        let (actor, action) = match organization {
            None => {
                let action = pick(&mut rng, &self.sign_in_actions);
                let user = self.users[rng.index(USERS)];
                let actor = if action == AuditAction::LoginFailed && rng.percent(30) {
                    AuditActor::UnknownUser
                } else {
                    AuditActor::User(user)
                };
                (actor, action)
            }
            Some(o) => {
                let roll = rng.below(100);
                let actor = if roll < 85 {
                    let members = &self.members[o];
                    AuditActor::User(self.users[members[rng.index(members.len())]])
                } else if roll < 95 {
                    let keys = &self.keys[o];
                    AuditActor::ApiKey(self.api_keys[keys[rng.index(keys.len())]])
                } else if roll < 98 {
                    AuditActor::Operator
                } else {
                    AuditActor::System
                };
                (actor, pick(&mut rng, &self.organization_actions))
            }
        };
        let target = target_of(
            &mut rng,
            action,
            actor,
            organization.map(|o| self.organizations[o]),
        );
        let origin = if actor == AuditActor::System {
            Origin::system()
        } else {
            let ip = if rng.percent(90) {
                IpAddr::V4(Ipv4Addr::from(rng.next() as u32))
            } else {
                IpAddr::V6(Ipv6Addr::from(u128::from_le_bytes(rng.bytes())))
            };
            let user_agent = (!rng.percent(5)).then(|| USER_AGENTS[rng.index(USER_AGENTS.len())]);
            let request_id = rng.uuid().simple().to_string();
            Origin::new(ip, user_agent, Some(&request_id))
        };
        let failed = action == AuditAction::LoginFailed || rng.percent(2);
        AuditRecord {
            id,
            occurred_at,
            actor,
            organization_id: organization.map(|o| self.organizations[o]),
            action,
            target,
            origin,
            outcome: if failed {
                AuditOutcome::Failure
            } else {
                AuditOutcome::Success
            },
        }
    }

    /// The filters timed, each with what it asks.
    fn cases(&self) -> Vec<Case> {
        let big = Some(self.organizations[0]);
        let small = ORGANIZATIONS - 1;
        let common = self.organization_actions[0].0;
        // The rarest of the named ones (newer actions may come after it).
        let rare = self.organization_actions[ORGANIZATION_ACTIONS.len() - 1].0;
        let actor = Some(self.users[self.members[0][0]].to_string());
        let since = START + time::Duration::days(180);
        let until = since + time::Duration::days(30);
        let case = |name: String, filter: AuditFilter| Case { name, filter };
        vec![
            case(
                "organization (the biggest, 10 %)".into(),
                AuditFilter {
                    organization_id: big,
                    ..AuditFilter::default()
                },
            ),
            case(
                format!(
                    "organization (a small one, ~{} records)",
                    self.expected_records(small)
                ),
                AuditFilter {
                    organization_id: Some(self.organizations[small]),
                    ..AuditFilter::default()
                },
            ),
            case(
                format!("organization (biggest) + action (common: {common})"),
                AuditFilter {
                    organization_id: big,
                    action: Some(common),
                    ..AuditFilter::default()
                },
            ),
            case(
                format!("organization (biggest) + action (rare: {rare})"),
                AuditFilter {
                    organization_id: big,
                    action: Some(rare),
                    ..AuditFilter::default()
                },
            ),
            case(
                "organization (biggest) + actor (one of its members)".into(),
                AuditFilter {
                    organization_id: big,
                    actor_id: actor.clone(),
                    ..AuditFilter::default()
                },
            ),
            case(
                "organization (biggest) + since/until (30 days)".into(),
                AuditFilter {
                    organization_id: big,
                    since: Some(since),
                    until: Some(until),
                    ..AuditFilter::default()
                },
            ),
            case(
                "actor only (the same member)".into(),
                AuditFilter {
                    actor_id: actor,
                    ..AuditFilter::default()
                },
            ),
            case(
                format!("action only ({common})"),
                AuditFilter {
                    action: Some(common),
                    ..AuditFilter::default()
                },
            ),
            case(
                format!("action only ({})", AuditAction::LoginSucceeded),
                AuditFilter {
                    action: Some(AuditAction::LoginSucceeded),
                    ..AuditFilter::default()
                },
            ),
            case(
                "no filter (the operator's whole log)".into(),
                AuditFilter::default(),
            ),
        ]
    }
}

/// What the action was done to, as the service would record it.
fn target_of(
    rng: &mut Rng,
    action: AuditAction,
    actor: AuditActor,
    organization: Option<OrganizationId>,
) -> Option<AuditTarget> {
    let name = action.as_str();
    let (kind, id) = if name.starts_with("auth.") || name.starts_with("user.") {
        match actor {
            AuditActor::User(user) => (TargetKind::User, user.to_string()),
            _ => return None,
        }
    } else if name.starts_with("organization.") || name.starts_with("sso.") {
        (TargetKind::Organization, organization?.to_string())
    } else if name == "member.invited" || name.starts_with("invitation.") {
        (TargetKind::Invitation, rng.uuid().to_string())
    } else if name.starts_with("member.") {
        (TargetKind::Member, rng.uuid().to_string())
    } else if name.starts_with("application.") {
        (TargetKind::Application, rng.uuid().to_string())
    } else if name.starts_with("api_key.") {
        (TargetKind::ApiKey, rng.uuid().to_string())
    } else if name == "webhook.delivery_retried" {
        (TargetKind::Delivery, rng.uuid().to_string())
    } else if name.starts_with("webhook_endpoint.") || name == "webhook.tested" {
        (TargetKind::WebhookEndpoint, rng.uuid().to_string())
    } else {
        return None;
    };
    Some(AuditTarget { kind, id })
}

/// One filter of the table.
struct Case {
    name: String,
    filter: AuditFilter,
}

/// Whether the store's filter (`queries/audit.rs`, `matching`) keeps the record.
fn matches(filter: &AuditFilter, record: &AuditRecord, actor_id: Option<&str>) -> bool {
    filter
        .organization_id
        .is_none_or(|o| record.organization_id == Some(o))
        && filter
            .actor_id
            .as_deref()
            .is_none_or(|a| actor_id == Some(a))
        && filter.action.is_none_or(|a| record.action == a)
        && filter.since.is_none_or(|s| record.occurred_at >= s)
        && filter.until.is_none_or(|u| record.occurred_at < u)
}

/// The store's text form of a moment on SQLite (diesel's, for `TimestamptzSqlite`): compared as
/// text there, so it must be exactly the same. PostgreSQL reads it as a `timestamptz`.
fn moment(at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    let formatted = if at.nanosecond() == 0 {
        at.format(format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second][offset_hour sign:mandatory]:[offset_minute]"
        ))
    } else {
        at.format(format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second].[subsecond][offset_hour sign:mandatory]:[offset_minute]"
        ))
    };
    formatted.expect("a moment formats")
}

fn push_text(sql: &mut String, text: &str) {
    sql.push('\'');
    for c in text.chars() {
        if c == '\'' {
            sql.push('\'');
        }
        sql.push(c);
    }
    sql.push('\'');
}

fn push_optional(sql: &mut String, text: Option<&str>) {
    match text {
        Some(text) => push_text(sql, text),
        None => sql.push_str("NULL"),
    }
}

/// The record as a row of a multi-row `INSERT`, in the store's column forms (`AuditRow::of`).
fn push_row(sql: &mut String, record: &AuditRecord, actor_id: Option<&str>) {
    sql.push('(');
    push_text(sql, &record.id.to_string());
    sql.push(',');
    push_text(sql, &moment(record.occurred_at));
    sql.push(',');
    push_text(sql, record.actor.kind());
    sql.push(',');
    push_optional(sql, actor_id);
    sql.push(',');
    push_optional(
        sql,
        record
            .organization_id
            .map(|o| o.as_uuid().to_string())
            .as_deref(),
    );
    sql.push(',');
    push_text(sql, record.action.as_str());
    sql.push(',');
    push_optional(sql, record.target.as_ref().map(|t| t.kind.as_str()));
    sql.push(',');
    push_optional(sql, record.target.as_ref().map(|t| t.id.as_str()));
    sql.push(',');
    push_optional(sql, record.origin.ip.map(|ip| ip.to_string()).as_deref());
    sql.push(',');
    push_optional(sql, record.origin.user_agent.as_deref());
    sql.push(',');
    push_optional(sql, record.origin.request_id.as_deref());
    sql.push(',');
    push_text(sql, record.outcome.as_str());
    sql.push(')');
}

/// Generates every record into transactions of multi-row `INSERT`s, sent to `chunks`, and
/// returns, for each case, the indices of the records it matches (oldest first).
fn generate(
    model: &Model,
    cases: &[Case],
    chunks: &tokio::sync::mpsc::Sender<String>,
) -> Vec<Vec<u32>> {
    let mut hits = vec![Vec::new(); cases.len()];
    let mut sql = String::new();
    for i in 0..model.records {
        if i.is_multiple_of(ROWS_PER_TRANSACTION) {
            sql.push_str("BEGIN;\n");
        }
        if i.is_multiple_of(ROWS_PER_INSERT) {
            let _ = writeln!(sql, "INSERT INTO audit_log ({COLUMNS}) VALUES");
        } else {
            sql.push_str(",\n");
        }
        let record = model.record(i);
        let actor_id = record.actor.id();
        push_row(&mut sql, &record, actor_id.as_deref());
        for (case, hits) in cases.iter().zip(&mut hits) {
            if matches(&case.filter, &record, actor_id.as_deref()) {
                hits.push(u32::try_from(i).expect("fewer than 2^32 records"));
            }
        }
        let last = i + 1 == model.records;
        if (i + 1).is_multiple_of(ROWS_PER_INSERT) || last {
            sql.push_str(";\n");
        }
        if (i + 1).is_multiple_of(ROWS_PER_TRANSACTION) || last {
            sql.push_str("COMMIT;\n");
            if chunks.blocking_send(std::mem::take(&mut sql)).is_err() {
                break;
            }
        }
    }
    hits
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

// ------------------------------------------------------------------------------------------
// The database, raw: loading, explaining.

/// A connection of the bench's own, next to the store's pools.
enum Raw {
    Postgres(Box<AsyncPgConnection>),
    Sqlite(SyncConnectionWrapper<SqliteConnection>),
}

#[derive(QueryableByName)]
struct Line {
    #[diesel(sql_type = Text)]
    line: String,
}

#[derive(QueryableByName)]
struct SqlitePlanLine {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    id: i32,
    #[diesel(sql_type = diesel::sql_types::Integer)]
    parent: i32,
    #[diesel(sql_type = Text)]
    detail: String,
}

#[derive(QueryableByName)]
struct PostgresPlanLine {
    #[diesel(sql_type = Text, column_name = "QUERY PLAN")]
    line: String,
}

impl Raw {
    async fn open(backend: Backend, url: &str) -> Self {
        match backend {
            Backend::Postgres => {
                Self::Postgres(Box::new(AsyncPgConnection::establish(url).await.unwrap()))
            }
            Backend::Sqlite => {
                let path = url.strip_prefix("sqlite://").unwrap_or(url);
                Self::Sqlite(SyncConnectionWrapper::establish(path).await.unwrap())
            }
        }
    }

    async fn run_sql(&mut self, sql: &str) {
        let done = match self {
            Self::Postgres(conn) => conn.batch_execute(sql).await,
            Self::Sqlite(conn) => conn.batch_execute(sql).await,
        };
        if let Err(e) = done {
            let start: String = sql.chars().take(300).collect();
            panic!("{e}: {start}");
        }
    }

    /// The `line` column of each row.
    async fn lines(&mut self, sql: &str) -> Vec<String> {
        let rows: Vec<Line> = match self {
            Self::Postgres(conn) => diesel::sql_query(sql).load(&mut **conn).await,
            Self::Sqlite(conn) => diesel::sql_query(sql).load(conn).await,
        }
        .unwrap_or_else(|e| panic!("{e}: {sql}"));
        rows.into_iter().map(|row| row.line).collect()
    }

    /// The plan of the statement: on PostgreSQL, prepared and executed five times first, as the
    /// store's connections do (they prepare each statement once), so that the plan shown is the
    /// one the plan cache settles on from the sixth run (a generic plan shows `$n`).
    async fn plan(&mut self, statement: &Statement) -> Vec<String> {
        let Statement { sql, params } = statement;
        match self {
            Self::Postgres(conn) => {
                let types: Vec<&str> = params.iter().map(|(kind, _)| *kind).collect();
                let values: Vec<String> = params
                    .iter()
                    .map(|(_, value)| {
                        let mut literal = String::new();
                        push_text(&mut literal, value);
                        literal
                    })
                    .collect();
                let (types, values) = if params.is_empty() {
                    (String::new(), String::new())
                } else {
                    (
                        format!("({})", types.join(", ")),
                        format!("({})", values.join(", ")),
                    )
                };
                conn.batch_execute(&format!("PREPARE audit_plan{types} AS {sql}"))
                    .await
                    .unwrap_or_else(|e| panic!("{e}: {sql}"));
                for _ in 0..5 {
                    conn.batch_execute(&format!("EXECUTE audit_plan{values}"))
                        .await
                        .unwrap_or_else(|e| panic!("{e}: {sql}"));
                }
                let rows: Vec<PostgresPlanLine> = diesel::sql_query(format!(
                    "EXPLAIN (ANALYZE, BUFFERS) EXECUTE audit_plan{values}"
                ))
                .load(&mut **conn)
                .await
                .unwrap_or_else(|e| panic!("{e}: {sql}"));
                conn.batch_execute("DEALLOCATE audit_plan")
                    .await
                    .unwrap_or_else(|e| panic!("{e}: {sql}"));
                rows.into_iter().map(|row| row.line).collect()
            }
            Self::Sqlite(conn) => {
                let mut query = diesel::sql_query(format!("EXPLAIN QUERY PLAN {sql}"))
                    .into_boxed::<diesel::sqlite::Sqlite>();
                for (_, param) in params {
                    query = query.bind::<Text, _>(param.clone());
                }
                let rows: Vec<SqlitePlanLine> = query
                    .load(conn)
                    .await
                    .unwrap_or_else(|e| panic!("{e}: {sql}"));
                // Indent each line under its parent, as the sqlite3 shell does.
                let mut depth: Vec<(i32, usize)> = Vec::new();
                rows.into_iter()
                    .map(|row| {
                        let level = depth
                            .iter()
                            .find(|(id, _)| *id == row.parent)
                            .map_or(0, |(_, level)| level + 1);
                        depth.push((row.id, level));
                        format!("{}{}", "  ".repeat(level), row.detail)
                    })
                    .collect()
            }
        }
    }
}

/// A statement of `audit_log`'s, as SQL with its parameters: `$n` and their PostgreSQL types on
/// PostgreSQL, `?` on SQLite (whose plan does not depend on `LIMIT` and `OFFSET`: literals).
struct Statement {
    sql: String,
    params: Vec<(&'static str, String)>,
}

/// The two statements `audit_log` runs for a filter: the total and the page.
fn statements(backend: Backend, filter: &AuditFilter, page: PageRequest) -> [Statement; 2] {
    let mut conditions = Vec::new();
    if let Some(o) = filter.organization_id {
        conditions.push(("organization_id =", "uuid", o.as_uuid().to_string()));
    }
    if let Some(actor) = &filter.actor_id {
        conditions.push(("actor_id =", "text", actor.clone()));
    }
    if let Some(action) = filter.action {
        conditions.push(("action =", "text", action.as_str().to_owned()));
    }
    if let Some(since) = filter.since {
        conditions.push(("occurred_at >=", "timestamptz", moment(since)));
    }
    if let Some(until) = filter.until {
        conditions.push(("occurred_at <", "timestamptz", moment(until)));
    }
    let mut params = Vec::new();
    let mut placeholder = |kind: &'static str, value: String| {
        params.push((kind, value));
        match backend {
            Backend::Postgres => format!("${}", params.len()),
            Backend::Sqlite => "?".to_owned(),
        }
    };
    let clauses: Vec<String> = conditions
        .into_iter()
        .map(|(column, kind, value)| format!("{column} {}", placeholder(kind, value)))
        .collect();
    let filtered = if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    };
    let (limit, offset) = match backend {
        Backend::Postgres => (
            placeholder("int8", page.limit().to_string()),
            placeholder("int8", page.offset().to_string()),
        ),
        Backend::Sqlite => (page.limit().to_string(), page.offset().to_string()),
    };
    let count_params = params.len() - usize::from(backend == Backend::Postgres) * 2;
    [
        Statement {
            sql: format!("SELECT COUNT(*) FROM audit_log{filtered}"),
            params: params[..count_params].to_vec(),
        },
        Statement {
            sql: format!(
                "SELECT {COLUMNS} FROM audit_log{filtered} ORDER BY occurred_at DESC, id DESC \
                 LIMIT {limit} OFFSET {offset}"
            ),
            params,
        },
    ]
}

// ------------------------------------------------------------------------------------------
// A backend's run.

struct Stats {
    p50: Duration,
    p99: Duration,
}

/// Nearest rank.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2}")
    } else if ms < 100.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.0}")
    }
}

/// The page requests of a case: the first and the deep one.
fn pages(total: usize, options: &Options) -> [PageRequest; 2] {
    let size = options.page_size as usize;
    let last = total.div_ceil(size).max(1);
    let deep = (options.deep_page as usize).min(last);
    let request = |page: usize| {
        PageRequest::new(Some(page as i64), Some(i64::from(options.page_size)))
            .expect("a valid page")
    };
    [request(1), request(deep)]
}

async fn run_backend(
    backend: Backend,
    options: &Options,
    model: &Arc<Model>,
    cases: &Arc<Vec<Case>>,
) -> String {
    let mut out = format!("\n## {}\n\n", backend.as_str());
    // A throwaway database, dropped with `empty`: the store tests' own.
    let empty = support::EmptyDatabase::new(backend).await;
    let url = empty.url.clone();
    gatehouse_store::migrate(&url).await.unwrap();
    let mut raw = Raw::open(backend, &url).await;
    if options.without_pair_indexes {
        for index in PAIR_INDEXES {
            raw.run_sql(&format!("DROP INDEX {index}")).await;
        }
        let _ = writeln!(out, "- without the indexes {}", PAIR_INDEXES.join(", "));
    }

    // Load.
    if backend == Backend::Sqlite {
        raw.run_sql(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
             PRAGMA cache_size = -262144",
        )
        .await;
    }
    let started = Instant::now();
    let (sender, mut chunks) = tokio::sync::mpsc::channel::<String>(2);
    let generator = {
        let (model, cases) = (Arc::clone(model), Arc::clone(cases));
        std::thread::spawn(move || generate(&model, &cases, &sender))
    };
    while let Some(chunk) = chunks.recv().await {
        raw.run_sql(&chunk).await;
    }
    let hits = generator.join().expect("the generator finished");
    let loaded = started.elapsed();
    let started = Instant::now();
    let settle = match backend {
        Backend::Postgres => "VACUUM (ANALYZE) audit_log",
        Backend::Sqlite => "PRAGMA wal_checkpoint(TRUNCATE)",
    };
    raw.run_sql(settle).await;
    let settled = started.elapsed();
    let size = match backend {
        Backend::Postgres => raw
            .lines(
                "SELECT format('table %s, indexes %s', \
                 pg_size_pretty(pg_table_size('audit_log')), \
                 pg_size_pretty(pg_indexes_size('audit_log'))) AS line",
            )
            .await
            .join(""),
        Backend::Sqlite => raw
            .lines(
                "SELECT printf('database file %.0f MiB', \
                 page_count * page_size / 1048576.0) AS line \
                 FROM pragma_page_count, pragma_page_size",
            )
            .await
            .join(""),
    };
    let _ = writeln!(
        out,
        "- load: {} records in {:.1} s ({} records/s; multi-row INSERTs of {}, {} a \
         transaction), then `{settle}` in {:.1} s; {size}",
        thousands(options.records),
        loaded.as_secs_f64(),
        thousands((options.records as f64 / loaded.as_secs_f64()) as u64),
        thousands(ROWS_PER_INSERT),
        thousands(ROWS_PER_TRANSACTION),
        settled.as_secs_f64(),
    );

    let store = gatehouse_store::open(&url, &StoreOptions::default())
        .await
        .unwrap();
    same_forms_as_the_store(&mut raw, &*store, model).await;
    let verified = verify(&*store, model, cases, &hits, options).await;
    let _ = writeln!(
        out,
        "- read back through `AuditStore::audit_log`: {verified} pages of {} filters, equal to \
         the records generated",
        cases.len()
    );
    out.push_str(&table(&*store, cases, &hits, options).await);
    out.push_str(&plans(&mut raw, backend, cases, &hits, options).await);

    drop(store);
    drop(raw);
    drop(empty);
    out
}

/// Writes one record through the port and checks that the bulk load's text forms of its id,
/// moment and organization are the store's: SQLite compares them as text.
async fn same_forms_as_the_store(raw: &mut Raw, store: &dyn Store, model: &Model) {
    let probe = AuditRecord {
        occurred_at: START - time::Duration::days(1) + time::Duration::milliseconds(120),
        ..model.record(0)
    };
    let probe = AuditRecord {
        id: Uuid::now_v7(),
        organization_id: Some(Uuid::now_v7().into()),
        ..probe
    };
    store.record_audit(probe.clone()).await.unwrap();
    let mut condition = String::from("id = ");
    push_text(&mut condition, &probe.id.to_string());
    condition.push_str(" AND occurred_at = ");
    push_text(&mut condition, &moment(probe.occurred_at));
    condition.push_str(" AND organization_id = ");
    push_text(
        &mut condition,
        &probe
            .organization_id
            .map(|o| o.as_uuid().to_string())
            .unwrap_or_default(),
    );
    let found = raw
        .lines(&format!(
            "SELECT CAST(COUNT(*) AS TEXT) AS line FROM audit_log WHERE {condition}"
        ))
        .await;
    assert_eq!(
        found,
        ["1"],
        "the bulk load's forms differ from the store's ({condition})"
    );
    raw.run_sql(&format!("DELETE FROM audit_log WHERE {condition}"))
        .await;
}

/// Reads every case's first and deep page through the port and compares them with the records
/// generated. Returns how many pages it compared.
async fn verify(
    store: &dyn Store,
    model: &Model,
    cases: &[Case],
    hits: &[Vec<u32>],
    options: &Options,
) -> usize {
    let mut compared = 0;
    for (case, hits) in cases.iter().zip(hits) {
        for request in pages(hits.len(), options) {
            let page = store
                .audit_log(case.filter.clone(), request)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
            let expected: Vec<AuditRecord> = hits
                .iter()
                .rev()
                .skip(request.offset() as usize)
                .take(request.limit() as usize)
                .map(|&i| model.record(u64::from(i)))
                .collect();
            assert_eq!(
                page.total(),
                hits.len() as u64,
                "{}: the total differs",
                case.name
            );
            assert!(
                page.items() == expected,
                "{}, page {}: the records read back differ from those generated",
                case.name,
                request.page()
            );
            compared += 1;
        }
    }
    compared
}

async fn time_page(
    store: &dyn Store,
    filter: &AuditFilter,
    request: PageRequest,
    runs: usize,
) -> Stats {
    for _ in 0..WARM_UP {
        std::hint::black_box(store.audit_log(filter.clone(), request).await.unwrap());
    }
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let page = store.audit_log(filter.clone(), request).await.unwrap();
        samples.push(started.elapsed());
        std::hint::black_box(page);
    }
    samples.sort();
    Stats {
        p50: percentile(&samples, 0.50),
        p99: percentile(&samples, 0.99),
    }
}

async fn table(store: &dyn Store, cases: &[Case], hits: &[Vec<u32>], options: &Options) -> String {
    let mut out = String::from(
        "\n| filter | matching | page 1 p50 ms | page 1 p99 ms | deep page | p50 ms | p99 ms |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (case, hits) in cases.iter().zip(hits) {
        let [first, deep] = pages(hits.len(), options);
        let first_stats = time_page(store, &case.filter, first, options.runs).await;
        let deep_stats = time_page(store, &case.filter, deep, options.runs).await;
        let line = format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            case.name,
            thousands(hits.len() as u64),
            ms(first_stats.p50),
            ms(first_stats.p99),
            deep.page(),
            ms(deep_stats.p50),
            ms(deep_stats.p99),
        );
        // Row by row, to follow a long run.
        eprint!("{} {line}", store.backend().as_str());
        out.push_str(&line);
    }
    out
}

async fn plans(
    raw: &mut Raw,
    backend: Backend,
    cases: &[Case],
    hits: &[Vec<u32>],
    options: &Options,
) -> String {
    let mut out = format!(
        "\n<details><summary>{} plans: the total, page 1, the deep page</summary>\n\n",
        backend.as_str()
    );
    for (case, hits) in cases.iter().zip(hits) {
        let [first, deep] = pages(hits.len(), options);
        let [count, first_page] = statements(backend, &case.filter, first);
        let [_, deep_page] = statements(backend, &case.filter, deep);
        let _ = writeln!(out, "**{}**\n\n```text", case.name);
        for statement in [count, first_page, deep_page] {
            let values: Vec<&str> = statement.params.iter().map(|(_, v)| v.as_str()).collect();
            let _ = writeln!(out, "{}\n  -- {}", statement.sql, values.join(", "));
            for line in raw.plan(&statement).await {
                let _ = writeln!(out, "    {line}");
            }
        }
        out.push_str("```\n\n");
    }
    out.push_str("</details>\n");
    out
}
