//! Typed configuration: defaults, then an optional TOML file (`--config`), then `GATEHOUSE_*`
//! environment variables. Validated when loaded; passed explicitly, never global.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};

use gatehouse_domain::model::{IpRange, OperatorToken, RateLimits, RetrySchedule};
use serde::Deserialize;

/// The configuration a server runs with.
#[derive(Clone, Debug)]
pub struct Config {
    /// `GATEHOUSE_BIND`: the address to listen on.
    pub bind: SocketAddr,
    /// `GATEHOUSE_DATABASE_URL`: `sqlite://file.db`, `sqlite:///abs/path.db` or `postgres://...`.
    pub database_url: String,
    /// `GATEHOUSE_PUBLIC_URL`: the service's `{base_url}`; `http://{bind}` when unset.
    pub public_url: Option<String>,
    /// `GATEHOUSE_SECRET_KEY`: 32 bytes, base64. Required with PostgreSQL; with SQLite, generated
    /// into a key file beside the database when unset.
    pub secret_key: Option<SecretKeySetting>,
    /// `GATEHOUSE_DB_POOL_SIZE`: connections in the pool.
    pub db_pool_size: usize,
    /// `GATEHOUSE_RATE_LIMITS`: requests per minute per plan.
    pub rate_limits: RateLimits,
    /// `GATEHOUSE_REDIS_URL`: share rate-limit counters between replicas through Redis.
    pub redis_url: Option<SecretUrl>,
    /// `GATEHOUSE_SMTP_URL`: send mail over SMTP (`smtp://user:pass@host:587?tls=required`).
    pub smtp_url: Option<SecretUrl>,
    /// `GATEHOUSE_MAIL_DIR`: write each mail as an `.eml` file here (development, tests).
    pub mail_dir: Option<PathBuf>,
    /// `GATEHOUSE_MAIL_FROM`: the sender of Gatehouse's mail.
    pub mail_from: String,
    /// `GATEHOUSE_WEBHOOK_RETRY_SCHEDULE`: seconds before each automatic retry.
    pub webhook_retry_schedule: RetrySchedule,
    /// `GATEHOUSE_WEBHOOK_TIMEOUT_SECS`: the limit on one delivery attempt.
    pub webhook_timeout: std::time::Duration,
    /// `GATEHOUSE_WEBHOOK_CA_FILE`: extra trusted root certificates (PEM) for deliveries.
    pub webhook_ca_file: Option<PathBuf>,
    /// `GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS`: allow loopback, private and link-local targets.
    pub webhook_allow_private_targets: bool,
    /// `GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY`: attempts in flight at once to one endpoint,
    /// from every replica on the database together (1 to 64; 4 by default).
    pub webhook_endpoint_concurrency: usize,
    /// `GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION`: attempts in flight at once to the endpoints
    /// of one organization from one process (1 to 64; 16, a quarter of the 64 slots, by
    /// default).
    pub webhook_slots_per_organization: usize,
    /// `GATEHOUSE_PASSWORD_HASH_CONCURRENCY`: argon2id hashes at once (1 to 256; one per core,
    /// at most 8, by default), each holding a 19 MiB working area.
    pub password_hash_concurrency: usize,
    /// `GATEHOUSE_PASSWORD_STRENGTH_CONCURRENCY`: new passwords judged by zxcvbn at once (1 to
    /// 256; one per core by default).
    pub password_strength_concurrency: usize,
    /// `GATEHOUSE_SAML_CONCURRENCY`: SAML responses verified at once (XML parsing and
    /// signatures; 1 to 256, one per core by default).
    pub saml_concurrency: usize,
    /// `GATEHOUSE_TRUSTED_PROXIES`: addresses or CIDR ranges whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<IpRange>,
    /// `GATEHOUSE_CONTROL_TOKEN`: the bearer token of the control plane (`/control`); unset, the
    /// control plane answers `404` everywhere.
    pub control_token: Option<OperatorToken>,
    /// `GATEHOUSE_METRICS_BIND`: where `GET /metrics` is served without a token; unset, the
    /// metrics are only at `/control/metrics`.
    pub metrics_bind: Option<SocketAddr>,
    /// `GATEHOUSE_AUDIT_RETENTION_DAYS`: how long audit records are kept (default 365).
    pub audit_retention_days: u32,
    /// `GATEHOUSE_EVENT_RETENTION_DAYS`: how long stored events and finished deliveries are
    /// kept (default 30).
    pub event_retention_days: u32,
    /// `GATEHOUSE_DNS_RESOLVER`: the DNS server (`ip:port`) asked for domains' TXT records;
    /// unset, the system's resolver (`/etc/resolv.conf`).
    pub dns_resolver: Option<SocketAddr>,
    /// `GATEHOUSE_BODY_TIMEOUT_SECS`: how long a request body may take to arrive (1 to 300; 10
    /// by default); later, `408` and the connection closes.
    pub body_timeout: std::time::Duration,
    /// `GATEHOUSE_STATEMENT_TIMEOUT_MS`: the longest a PostgreSQL statement may run (100 to
    /// 600,000; 5,000 by default), so that no request holds a pooled connection for longer.
    /// SQLite has none: its statements run on this process's threads.
    pub statement_timeout: std::time::Duration,
    /// `GATEHOUSE_MAX_CONNECTIONS_PER_IP`: open connections from one client address (1 to
    /// 1,000,000; 256 by default); more are closed as they are accepted.
    pub max_connections_per_ip: usize,
    /// `GATEHOUSE_WEBHOOK_POLL_MS`: how often an idle delivery worker looks for work no signal
    /// told it of (10 to 60,000 ms; 100 by default). Changes committed by any replica wake the
    /// workers at once (on PostgreSQL, by `NOTIFY`); the poll finds retries that came due.
    pub webhook_poll_interval: std::time::Duration,
    /// `GATEHOUSE_WORKER`: whether this replica runs the webhook dispatcher and delivery
    /// workers (`true` by default); `false` serves HTTP only.
    pub worker: bool,
    /// `GATEHOUSE_DRAIN_SECS`: on SIGTERM, how long `/readyz` answers `503` while the replica
    /// still serves, for a load balancer that polls readiness to take it out (0 to 300; 0 by
    /// default).
    pub drain: std::time::Duration,
    /// `GATEHOUSE_SHUTDOWN_TIMEOUT_SECS`: once a stopping replica no longer accepts, the most it
    /// waits for the requests it accepted and the deliveries it leased (1 to 600; 30 by
    /// default). Deliveries still unsent then are given back.
    pub shutdown_timeout: std::time::Duration,
}

/// A URL that may hold a password: `Debug` shows it without.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct SecretUrl(pub String);

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&gatehouse_store::redact_url(&self.0))
    }
}

/// A secret as configured (the secret key, still base64; the control token): `Debug` hides it.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct SecretKeySetting(pub String);

impl std::fmt::Debug for SecretKeySetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKeySetting(<redacted>)")
    }
}

/// One layer of settings: every field optional, later layers win.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layer {
    bind: Option<String>,
    database_url: Option<String>,
    public_url: Option<String>,
    secret_key: Option<SecretKeySetting>,
    db_pool_size: Option<String>,
    rate_limits: Option<String>,
    trusted_proxies: Option<String>,
    redis_url: Option<SecretUrl>,
    smtp_url: Option<SecretUrl>,
    mail_dir: Option<PathBuf>,
    mail_from: Option<String>,
    webhook_retry_schedule: Option<String>,
    webhook_timeout_secs: Option<String>,
    webhook_ca_file: Option<PathBuf>,
    webhook_allow_private_targets: Option<String>,
    webhook_endpoint_concurrency: Option<String>,
    webhook_slots_per_organization: Option<String>,
    password_hash_concurrency: Option<String>,
    password_strength_concurrency: Option<String>,
    saml_concurrency: Option<String>,
    control_token: Option<SecretKeySetting>,
    metrics_bind: Option<String>,
    audit_retention_days: Option<String>,
    event_retention_days: Option<String>,
    dns_resolver: Option<String>,
    body_timeout_secs: Option<String>,
    statement_timeout_ms: Option<String>,
    max_connections_per_ip: Option<String>,
    webhook_poll_ms: Option<String>,
    worker: Option<String>,
    drain_secs: Option<String>,
    shutdown_timeout_secs: Option<String>,
}

impl Layer {
    fn from_env(vars: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            bind: vars("GATEHOUSE_BIND"),
            database_url: vars("GATEHOUSE_DATABASE_URL"),
            public_url: vars("GATEHOUSE_PUBLIC_URL"),
            secret_key: vars("GATEHOUSE_SECRET_KEY").map(SecretKeySetting),
            db_pool_size: vars("GATEHOUSE_DB_POOL_SIZE"),
            rate_limits: vars("GATEHOUSE_RATE_LIMITS"),
            trusted_proxies: vars("GATEHOUSE_TRUSTED_PROXIES"),
            redis_url: vars("GATEHOUSE_REDIS_URL").map(SecretUrl),
            smtp_url: vars("GATEHOUSE_SMTP_URL").map(SecretUrl),
            mail_dir: vars("GATEHOUSE_MAIL_DIR").map(PathBuf::from),
            mail_from: vars("GATEHOUSE_MAIL_FROM"),
            webhook_retry_schedule: vars("GATEHOUSE_WEBHOOK_RETRY_SCHEDULE"),
            webhook_timeout_secs: vars("GATEHOUSE_WEBHOOK_TIMEOUT_SECS"),
            webhook_ca_file: vars("GATEHOUSE_WEBHOOK_CA_FILE").map(PathBuf::from),
            webhook_allow_private_targets: vars("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS"),
            webhook_endpoint_concurrency: vars("GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY"),
            webhook_slots_per_organization: vars("GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION"),
            password_hash_concurrency: vars("GATEHOUSE_PASSWORD_HASH_CONCURRENCY"),
            password_strength_concurrency: vars("GATEHOUSE_PASSWORD_STRENGTH_CONCURRENCY"),
            saml_concurrency: vars("GATEHOUSE_SAML_CONCURRENCY"),
            control_token: vars("GATEHOUSE_CONTROL_TOKEN").map(SecretKeySetting),
            metrics_bind: vars("GATEHOUSE_METRICS_BIND"),
            audit_retention_days: vars("GATEHOUSE_AUDIT_RETENTION_DAYS"),
            event_retention_days: vars("GATEHOUSE_EVENT_RETENTION_DAYS"),
            dns_resolver: vars("GATEHOUSE_DNS_RESOLVER"),
            body_timeout_secs: vars("GATEHOUSE_BODY_TIMEOUT_SECS"),
            statement_timeout_ms: vars("GATEHOUSE_STATEMENT_TIMEOUT_MS"),
            max_connections_per_ip: vars("GATEHOUSE_MAX_CONNECTIONS_PER_IP"),
            webhook_poll_ms: vars("GATEHOUSE_WEBHOOK_POLL_MS"),
            worker: vars("GATEHOUSE_WORKER"),
            drain_secs: vars("GATEHOUSE_DRAIN_SECS"),
            shutdown_timeout_secs: vars("GATEHOUSE_SHUTDOWN_TIMEOUT_SECS"),
        }
    }

    fn over(self, base: Layer) -> Layer {
        Layer {
            bind: self.bind.or(base.bind),
            database_url: self.database_url.or(base.database_url),
            public_url: self.public_url.or(base.public_url),
            secret_key: self.secret_key.or(base.secret_key),
            db_pool_size: self.db_pool_size.or(base.db_pool_size),
            rate_limits: self.rate_limits.or(base.rate_limits),
            trusted_proxies: self.trusted_proxies.or(base.trusted_proxies),
            redis_url: self.redis_url.or(base.redis_url),
            smtp_url: self.smtp_url.or(base.smtp_url),
            mail_dir: self.mail_dir.or(base.mail_dir),
            mail_from: self.mail_from.or(base.mail_from),
            webhook_retry_schedule: self.webhook_retry_schedule.or(base.webhook_retry_schedule),
            webhook_timeout_secs: self.webhook_timeout_secs.or(base.webhook_timeout_secs),
            webhook_ca_file: self.webhook_ca_file.or(base.webhook_ca_file),
            webhook_allow_private_targets: self
                .webhook_allow_private_targets
                .or(base.webhook_allow_private_targets),
            webhook_endpoint_concurrency: self
                .webhook_endpoint_concurrency
                .or(base.webhook_endpoint_concurrency),
            webhook_slots_per_organization: self
                .webhook_slots_per_organization
                .or(base.webhook_slots_per_organization),
            password_hash_concurrency: self
                .password_hash_concurrency
                .or(base.password_hash_concurrency),
            password_strength_concurrency: self
                .password_strength_concurrency
                .or(base.password_strength_concurrency),
            saml_concurrency: self.saml_concurrency.or(base.saml_concurrency),
            control_token: self.control_token.or(base.control_token),
            metrics_bind: self.metrics_bind.or(base.metrics_bind),
            audit_retention_days: self.audit_retention_days.or(base.audit_retention_days),
            event_retention_days: self.event_retention_days.or(base.event_retention_days),
            dns_resolver: self.dns_resolver.or(base.dns_resolver),
            body_timeout_secs: self.body_timeout_secs.or(base.body_timeout_secs),
            statement_timeout_ms: self.statement_timeout_ms.or(base.statement_timeout_ms),
            max_connections_per_ip: self.max_connections_per_ip.or(base.max_connections_per_ip),
            webhook_poll_ms: self.webhook_poll_ms.or(base.webhook_poll_ms),
            worker: self.worker.or(base.worker),
            drain_secs: self.drain_secs.or(base.drain_secs),
            shutdown_timeout_secs: self.shutdown_timeout_secs.or(base.shutdown_timeout_secs),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the configuration file {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("{name} is not valid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

pub const DEFAULT_BIND: &str = "127.0.0.1:8080";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://gatehouse.db";
pub const DEFAULT_AUDIT_RETENTION_DAYS: u32 = 365;
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 256;

/// How long stored events and finished deliveries are kept when
/// `GATEHOUSE_EVENT_RETENTION_DAYS` is not set.
pub const DEFAULT_EVENT_RETENTION_DAYS: u32 = 30;
pub const DEFAULT_MAIL_FROM: &str = "Gatehouse <no-reply@localhost>";

impl Config {
    /// Loads defaults, then the file (if any), then the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_from(file, |name| std::env::var(name).ok())
    }

    /// As [`Config::load`], with the environment given (for tests).
    pub fn load_from(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let file_layer = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                toml::from_str(&text).map_err(|source| ConfigError::Parse {
                    path: path.to_owned(),
                    source: Box::new(source),
                })?
            }
            None => Layer::default(),
        };
        Self::from_layer(Layer::from_env(env).over(file_layer))
    }

    fn from_layer(layer: Layer) -> Result<Self, ConfigError> {
        let bind_raw = layer.bind.unwrap_or_else(|| DEFAULT_BIND.to_owned());
        let bind = bind_raw
            .parse::<SocketAddr>()
            .map_err(|e| ConfigError::Invalid {
                name: "GATEHOUSE_BIND",
                reason: format!("{bind_raw:?}: {e} (expected host:port, such as 127.0.0.1:8080)"),
            })?;
        let database_url = layer
            .database_url
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
        gatehouse_store::backend_of(&database_url).map_err(|e| ConfigError::Invalid {
            name: "GATEHOUSE_DATABASE_URL",
            reason: e.to_string(),
        })?;
        let public_url = layer
            .public_url
            .map(|raw| {
                let trimmed = raw.trim_end_matches('/').to_owned();
                match url::Url::parse(&trimmed) {
                    Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(trimmed),
                    _ => Err(ConfigError::Invalid {
                        name: "GATEHOUSE_PUBLIC_URL",
                        reason: format!("{raw:?} is not an http(s) URL"),
                    }),
                }
            })
            .transpose()?;
        let db_pool_size = count(layer.db_pool_size, "GATEHOUSE_DB_POOL_SIZE", 1..=1000, 16)?;
        let rate_limits = match layer.rate_limits {
            None => RateLimits::default(),
            Some(raw) => raw.parse().map_err(|reason| ConfigError::Invalid {
                name: "GATEHOUSE_RATE_LIMITS",
                reason,
            })?,
        };
        let trusted_proxies = layer
            .trusted_proxies
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                IpRange::parse(entry).map_err(|e| ConfigError::Invalid {
                    name: "GATEHOUSE_TRUSTED_PROXIES",
                    reason: format!("{entry:?} {e}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let webhook_retry_schedule = match layer.webhook_retry_schedule {
            None => RetrySchedule::default(),
            Some(raw) => raw.parse().map_err(|reason| ConfigError::Invalid {
                name: "GATEHOUSE_WEBHOOK_RETRY_SCHEDULE",
                reason,
            })?,
        };
        let webhook_timeout = match layer.webhook_timeout_secs {
            None => std::time::Duration::from_secs(10),
            Some(raw) => raw
                .parse::<f64>()
                .ok()
                .filter(|s| *s > 0.0 && *s <= 300.0)
                .map(std::time::Duration::from_secs_f64)
                .ok_or_else(|| ConfigError::Invalid {
                    name: "GATEHOUSE_WEBHOOK_TIMEOUT_SECS",
                    reason: format!("{raw:?} is not a number of seconds from 0 to 300"),
                })?,
        };
        let webhook_allow_private_targets = flag(
            layer.webhook_allow_private_targets,
            "GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS",
            false,
        )?;
        let worker = flag(layer.worker, "GATEHOUSE_WORKER", true)?;
        let millis = |raw, name, range, default| {
            count(raw, name, range, default)
                .map(|n| std::time::Duration::from_millis(u64::try_from(n).unwrap_or(u64::MAX)))
        };
        let webhook_poll_interval = millis(
            layer.webhook_poll_ms,
            "GATEHOUSE_WEBHOOK_POLL_MS",
            10..=60_000,
            100,
        )?;
        let seconds = |raw, name, range, default| {
            count(raw, name, range, default)
                .map(|n| std::time::Duration::from_secs(u64::try_from(n).unwrap_or(u64::MAX)))
        };
        let drain = seconds(layer.drain_secs, "GATEHOUSE_DRAIN_SECS", 0..=300, 0)?;
        let shutdown_timeout = seconds(
            layer.shutdown_timeout_secs,
            "GATEHOUSE_SHUTDOWN_TIMEOUT_SECS",
            1..=600,
            30,
        )?;
        let webhook_endpoint_concurrency = count(
            layer.webhook_endpoint_concurrency,
            "GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY",
            1..=64,
            4,
        )?;
        let webhook_slots_per_organization = count(
            layer.webhook_slots_per_organization,
            "GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION",
            1..=64,
            16,
        )?;
        let password_hash_concurrency = count(
            layer.password_hash_concurrency,
            "GATEHOUSE_PASSWORD_HASH_CONCURRENCY",
            1..=256,
            gatehouse_crypto::Argon2Hasher::default_concurrency(),
        )?;
        let password_strength_concurrency = count(
            layer.password_strength_concurrency,
            "GATEHOUSE_PASSWORD_STRENGTH_CONCURRENCY",
            1..=256,
            gatehouse_crypto::ZxcvbnJudge::default_concurrency(),
        )?;
        let saml_concurrency = count(
            layer.saml_concurrency,
            "GATEHOUSE_SAML_CONCURRENCY",
            1..=256,
            gatehouse_saml::XmlSecSaml::default_concurrency(),
        )?;
        let control_token = layer
            .control_token
            .filter(|token| !token.0.is_empty())
            .map(|token| {
                OperatorToken::new(&token.0).map_err(|e| ConfigError::Invalid {
                    name: "GATEHOUSE_CONTROL_TOKEN",
                    reason: e.to_string(),
                })
            })
            .transpose()?;
        let metrics_bind = layer
            .metrics_bind
            .filter(|raw| !raw.is_empty())
            .map(|raw| {
                raw.parse::<SocketAddr>().map_err(|e| ConfigError::Invalid {
                    name: "GATEHOUSE_METRICS_BIND",
                    reason: format!("{raw:?}: {e} (expected host:port, such as 127.0.0.1:9464)"),
                })
            })
            .transpose()?;
        let audit_retention_days = retention_days(
            layer.audit_retention_days,
            "GATEHOUSE_AUDIT_RETENTION_DAYS",
            DEFAULT_AUDIT_RETENTION_DAYS,
        )?;
        let event_retention_days = retention_days(
            layer.event_retention_days,
            "GATEHOUSE_EVENT_RETENTION_DAYS",
            DEFAULT_EVENT_RETENTION_DAYS,
        )?;
        let dns_resolver = layer
            .dns_resolver
            .filter(|raw| !raw.is_empty())
            .map(|raw| {
                raw.parse::<SocketAddr>().map_err(|e| ConfigError::Invalid {
                    name: "GATEHOUSE_DNS_RESOLVER",
                    reason: format!("{raw:?}: {e} (expected ip:port, such as 127.0.0.53:53)"),
                })
            })
            .transpose()?;
        let body_timeout = std::time::Duration::from_secs(
            u64::try_from(count(
                layer.body_timeout_secs,
                "GATEHOUSE_BODY_TIMEOUT_SECS",
                1..=300,
                10,
            )?)
            .unwrap_or(10),
        );
        let statement_timeout = std::time::Duration::from_millis(
            u64::try_from(count(
                layer.statement_timeout_ms,
                "GATEHOUSE_STATEMENT_TIMEOUT_MS",
                100..=600_000,
                5_000,
            )?)
            .unwrap_or(5_000),
        );
        let max_connections_per_ip = count(
            layer.max_connections_per_ip,
            "GATEHOUSE_MAX_CONNECTIONS_PER_IP",
            1..=1_000_000,
            DEFAULT_MAX_CONNECTIONS_PER_IP,
        )?;
        Ok(Self {
            webhook_poll_interval,
            worker,
            drain,
            shutdown_timeout,
            body_timeout,
            statement_timeout,
            max_connections_per_ip,
            control_token,
            metrics_bind,
            dns_resolver,
            audit_retention_days,
            event_retention_days,
            trusted_proxies,
            webhook_retry_schedule,
            webhook_timeout,
            webhook_ca_file: layer.webhook_ca_file.filter(|p| !p.as_os_str().is_empty()),
            webhook_allow_private_targets,
            webhook_endpoint_concurrency,
            webhook_slots_per_organization,
            password_hash_concurrency,
            password_strength_concurrency,
            saml_concurrency,
            bind,
            database_url,
            public_url,
            secret_key: layer.secret_key,
            db_pool_size,
            rate_limits,
            redis_url: layer.redis_url.filter(|u| !u.0.is_empty()),
            smtp_url: layer.smtp_url.filter(|u| !u.0.is_empty()),
            mail_dir: layer.mail_dir.filter(|d| !d.as_os_str().is_empty()),
            mail_from: layer
                .mail_from
                .unwrap_or_else(|| DEFAULT_MAIL_FROM.to_owned()),
        })
    }

    /// The public URL, defaulting to `http://{address actually bound}`.
    pub fn public_url_for(&self, bound: SocketAddr) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"))
    }
}

/// A whole-number setting: `default` when unset, else a number in `range`.
fn count(
    raw: Option<String>,
    name: &'static str,
    range: std::ops::RangeInclusive<usize>,
    default: usize,
) -> Result<usize, ConfigError> {
    let Some(raw) = raw else {
        return Ok(default);
    };
    raw.parse::<usize>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| ConfigError::Invalid {
            name,
            reason: format!(
                "{raw:?} is not a number from {} to {}",
                range.start(),
                range.end()
            ),
        })
}

/// A yes-or-no setting: `true`/`1` or `false`/`0` (empty: `default`).
fn flag(raw: Option<String>, name: &'static str, default: bool) -> Result<bool, ConfigError> {
    match raw.as_deref() {
        None | Some("") => Ok(default),
        Some("true" | "1") => Ok(true),
        Some("false" | "0") => Ok(false),
        Some(other) => Err(ConfigError::Invalid {
            name,
            reason: format!("{other:?} is not true or false"),
        }),
    }
}

/// A number of days a purge keeps records for: 1 to 36500, `default` when unset or empty.
fn retention_days(
    raw: Option<String>,
    name: &'static str,
    default: u32,
) -> Result<u32, ConfigError> {
    match raw.as_deref() {
        None | Some("") => Ok(default),
        Some(raw) => raw
            .parse::<u32>()
            .ok()
            .filter(|days| (1..=36_500).contains(days))
            .ok_or_else(|| ConfigError::Invalid {
                name,
                reason: format!("{raw:?} is not a number of days from 1 to 36500"),
            }),
    }
}

#[cfg(test)]
mod tests {
    use std::{collections::HashMap, time::Duration};

    use gatehouse_domain::model::Plan;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn defaults_match_the_documented_ones() {
        let config = Config::load_from(None, env(&[])).unwrap();
        assert_eq!(config.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(config.database_url, "sqlite://gatehouse.db");
        assert_eq!(config.public_url_for(config.bind), "http://127.0.0.1:8080");
    }

    #[test]
    fn environment_wins_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gatehouse.toml");
        std::fs::write(
            &path,
            "bind = \"0.0.0.0:9000\"\npublic_url = \"https://id.example.com/\"\n",
        )
        .unwrap();
        let config =
            Config::load_from(Some(&path), env(&[("GATEHOUSE_BIND", "127.0.0.1:7000")])).unwrap();
        assert_eq!(config.bind.to_string(), "127.0.0.1:7000");
        assert_eq!(config.public_url.as_deref(), Some("https://id.example.com"));
    }

    #[test]
    fn trusted_proxies_are_a_comma_separated_list_of_ranges() {
        let config = Config::load_from(None, env(&[])).unwrap();
        assert!(config.trusted_proxies.is_empty());
        let config = Config::load_from(
            None,
            env(&[("GATEHOUSE_TRUSTED_PROXIES", "10.0.0.0/8, 127.0.0.1 ,")]),
        )
        .unwrap();
        let shown: Vec<String> = config
            .trusted_proxies
            .iter()
            .map(|r| r.to_string())
            .collect();
        assert_eq!(shown, ["10.0.0.0/8", "127.0.0.1"]);
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (name, value) in [
            ("GATEHOUSE_BIND", "nowhere"),
            ("GATEHOUSE_DATABASE_URL", "mysql://x"),
            ("GATEHOUSE_PUBLIC_URL", "ftp://x"),
            ("GATEHOUSE_DB_POOL_SIZE", "0"),
            ("GATEHOUSE_RATE_LIMITS", "free=lots"),
            ("GATEHOUSE_WEBHOOK_RETRY_SCHEDULE", "1,2"),
            ("GATEHOUSE_WEBHOOK_TIMEOUT_SECS", "forever"),
            ("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "maybe"),
            ("GATEHOUSE_WEBHOOK_ENDPOINT_CONCURRENCY", "0"),
            ("GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION", "65"),
            ("GATEHOUSE_PASSWORD_HASH_CONCURRENCY", "0"),
            ("GATEHOUSE_PASSWORD_STRENGTH_CONCURRENCY", "0"),
            ("GATEHOUSE_SAML_CONCURRENCY", "257"),
            ("GATEHOUSE_EVENT_RETENTION_DAYS", "0"),
            ("GATEHOUSE_EVENT_RETENTION_DAYS", "-3"),
            ("GATEHOUSE_EVENT_RETENTION_DAYS", "a month"),
            ("GATEHOUSE_TRUSTED_PROXIES", "10.0.0.0/8, proxy.internal"),
            ("GATEHOUSE_WEBHOOK_POLL_MS", "0"),
            ("GATEHOUSE_WORKER", "sometimes"),
            ("GATEHOUSE_DRAIN_SECS", "301"),
            ("GATEHOUSE_SHUTDOWN_TIMEOUT_SECS", "0"),
        ] {
            let error = Config::load_from(None, env(&[(name, value)])).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
    }

    #[test]
    fn cpu_bounds_default_to_one_per_core_and_can_be_set() {
        let config = Config::load_from(None, env(&[])).unwrap();
        assert_eq!(
            config.password_strength_concurrency,
            gatehouse_crypto::ZxcvbnJudge::default_concurrency()
        );
        assert_eq!(
            config.saml_concurrency,
            gatehouse_saml::XmlSecSaml::default_concurrency()
        );
        let config = Config::load_from(
            None,
            env(&[
                ("GATEHOUSE_PASSWORD_STRENGTH_CONCURRENCY", "3"),
                ("GATEHOUSE_SAML_CONCURRENCY", "2"),
            ]),
        )
        .unwrap();
        assert_eq!(config.password_strength_concurrency, 3);
        assert_eq!(config.saml_concurrency, 2);
    }

    #[test]
    fn webhook_bounds_default_to_the_documented_ones() {
        let config = Config::load_from(None, env(&[])).unwrap();
        assert_eq!(config.event_retention_days, 30);
        assert_eq!(config.webhook_slots_per_organization, 16);
        let config = Config::load_from(
            None,
            env(&[
                ("GATEHOUSE_EVENT_RETENTION_DAYS", "7"),
                ("GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION", "64"),
            ]),
        )
        .unwrap();
        assert_eq!(config.event_retention_days, 7);
        assert_eq!(config.webhook_slots_per_organization, 64);
    }

    #[test]
    fn replica_settings_default_to_the_documented_ones() {
        let config = Config::load_from(None, env(&[])).unwrap();
        assert_eq!(config.webhook_poll_interval, Duration::from_millis(100));
        assert!(config.worker);
        assert_eq!(config.drain, Duration::ZERO);
        assert_eq!(config.shutdown_timeout, Duration::from_secs(30));
        let config = Config::load_from(
            None,
            env(&[
                ("GATEHOUSE_WEBHOOK_POLL_MS", "60000"),
                ("GATEHOUSE_WORKER", "false"),
                ("GATEHOUSE_DRAIN_SECS", "5"),
                ("GATEHOUSE_SHUTDOWN_TIMEOUT_SECS", "90"),
            ]),
        )
        .unwrap();
        assert_eq!(config.webhook_poll_interval, Duration::from_secs(60));
        assert!(!config.worker);
        assert_eq!(config.drain, Duration::from_secs(5));
        assert_eq!(config.shutdown_timeout, Duration::from_secs(90));
    }

    #[test]
    fn rate_limits_default_to_the_documented_ones() {
        let config = Config::load_from(None, env(&[])).unwrap();
        assert_eq!(config.rate_limits.per_minute(Plan::Free), 60);
        assert_eq!(config.rate_limits.per_minute(Plan::Business), 1000);
        let config = Config::load_from(None, env(&[("GATEHOUSE_RATE_LIMITS", "free=5")])).unwrap();
        assert_eq!(config.rate_limits.per_minute(Plan::Free), 5);
    }

    #[test]
    fn urls_with_passwords_are_redacted_in_debug() {
        let config = Config::load_from(
            None,
            env(&[(
                "GATEHOUSE_SMTP_URL",
                "smtp://user:hunter2@mail.example.com:587",
            )]),
        )
        .unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gatehouse.toml");
        std::fs::write(&path, "bnid = \"x\"\n").unwrap();
        assert!(matches!(
            Config::load_from(Some(&path), env(&[])),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[test]
    fn the_secret_key_never_shows_in_debug() {
        let config = Config::load_from(None, env(&[("GATEHOUSE_SECRET_KEY", "c2VjcmV0")])).unwrap();
        assert!(!format!("{config:?}").contains("c2VjcmV0"));
    }
}
