//! Rate limiter adapters: the domain's [`Quota`] (the generic cell rate algorithm: each key
//! keeps the moment its requests are paid off until) counted in process
//! ([`MemoryRateLimiter`]) or in Redis ([`RedisRateLimiter`], one Lua script per request, so
//! that every replica shares one budget per key). When Redis cannot be reached, the Redis
//! limiter counts in process meanwhile and says so in the log: every request is still counted
//! and answered with its headers.
//!
//! A refused request changes nothing: it neither costs the key anything nor delays it more.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration as StdDuration;

use async_trait::async_trait;
use gatehouse_domain::{
    model::{unix_micros, Admission, Quota},
    ports::{RateDecision, RateLimitError, RateLimiter},
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use time::OffsetDateTime;

use crate::pause::Pause;

/// The prefix of every Redis key the limiter writes; the key is `gatehouse:gcra:{key}`, its
/// value the Unix microsecond the key is paid off until, and it expires then.
const REDIS_KEY_PREFIX: &str = "gatehouse:gcra:";

/// [`Quota::admit`] in Redis, atomically. KEYS[1]: the key's paid-off moment; ARGV: now, the
/// interval and the tolerance (microseconds). Returns {admitted (1 or 0), paid off until}. The
/// numbers stay below 2^53, where Lua's are exact.
const ADMIT: &str = r"
local now = tonumber(ARGV[1])
local from = tonumber(redis.call('GET', KEYS[1]) or '0')
if from < now then from = now end
local after = from + tonumber(ARGV[2])
if after - now > tonumber(ARGV[3]) then
  return {0, from}
end
redis.call('SET', KEYS[1], string.format('%.0f', after), 'PX', math.floor((after - now) / 1000) + 1)
return {1, after}
";

/// Counters of one process, for a single replica (and for tests).
///
/// Memory stays bounded by the keys that are not paid off: those that are (and so count as
/// never seen) are dropped whenever the map has doubled since the last sweep.
pub struct MemoryRateLimiter {
    state: Mutex<MemoryState>,
}

struct MemoryState {
    /// When each key is paid off, in Unix microseconds.
    paid_until: HashMap<String, i64>,
    /// The size at which the next sweep happens.
    next_sweep: usize,
}

/// The smallest map that is swept.
const FIRST_SWEEP: usize = 1024;

impl Default for MemoryRateLimiter {
    fn default() -> Self {
        Self {
            state: Mutex::new(MemoryState {
                paid_until: HashMap::new(),
                next_sweep: FIRST_SWEEP,
            }),
        }
    }
}

impl MemoryRateLimiter {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn admit(&self, key: &str, quota: Quota, now: i64) -> Admission {
        // Never held across an await: this function does not await. A panic while holding the
        // lock could at worst leave one request uncounted, so a poisoned lock is used as is.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.paid_until.len() >= state.next_sweep {
            state.paid_until.retain(|_, paid| *paid > now);
            state.next_sweep = (state.paid_until.len() * 2).max(FIRST_SWEEP);
        }
        let admission = quota.admit(state.paid_until.get(key).copied(), now);
        if admission.allowed {
            state
                .paid_until
                .insert(key.to_owned(), admission.paid_until);
        }
        admission
    }
}

impl fmt::Debug for MemoryRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The keys are principals and client addresses: not for logs.
        f.debug_struct("MemoryRateLimiter").finish_non_exhaustive()
    }
}

#[async_trait]
impl RateLimiter for MemoryRateLimiter {
    async fn hit(
        &self,
        key: &str,
        quota: Quota,
        now: OffsetDateTime,
    ) -> Result<RateDecision, RateLimitError> {
        Ok(quota.decision(self.admit(key, quota, unix_micros(now)), now))
    }
}

/// Counters in Redis, shared by every replica that points at the same server.
///
/// Each hit is one round trip: the [`ADMIT`] script, which reads, decides and writes the key's
/// paid-off moment atomically. The connection is re-established by itself after Redis goes
/// away; meanwhile hits are counted in this process ([`MemoryRateLimiter`]), with a warning in
/// the log each time Redis is found unreachable (at most once per [`crate::REDIS_PAUSE`],
/// during which Redis is not asked): the budget is per replica rather than shared, and never
/// gone.
#[derive(Clone)]
pub struct RedisRateLimiter {
    connection: ConnectionManager,
    admit: Arc<redis::Script>,
    /// The server's URL without its password, for `Debug`.
    redacted_url: String,
    /// Where hits are counted while Redis cannot be reached.
    fallback: Arc<MemoryRateLimiter>,
    /// Whether Redis failed lately (then it is not asked).
    pause: Arc<Pause>,
}

impl RedisRateLimiter {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host[:port][/db]`).
    ///
    /// # Errors
    /// [`RateLimitError`] when the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, RateLimitError> {
        Ok(Self {
            connection: connect(url).await?,
            admit: Arc::new(redis::Script::new(ADMIT)),
            redacted_url: redact_url(url),
            fallback: Arc::default(),
            pause: Arc::default(),
        })
    }

    /// One hit counted in Redis.
    async fn hit_redis(
        &self,
        key: &str,
        quota: Quota,
        now: i64,
    ) -> Result<Admission, redis::RedisError> {
        let mut connection = self.connection.clone();
        let (allowed, paid_until): (i64, i64) = self
            .admit
            .key(Self::redis_key(key))
            .arg(now)
            .arg(quota.interval_micros())
            .arg(quota.tolerance_micros())
            .invoke_async(&mut connection)
            .await?;
        Ok(Admission {
            allowed: allowed == 1,
            paid_until,
        })
    }

    /// The Redis key that holds when `key` is paid off.
    #[must_use]
    pub fn redis_key(key: &str) -> String {
        format!("{REDIS_KEY_PREFIX}{key}")
    }
}

impl fmt::Debug for RedisRateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisRateLimiter")
            .field("url", &self.redacted_url)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    async fn hit(
        &self,
        key: &str,
        quota: Quota,
        now: OffsetDateTime,
    ) -> Result<RateDecision, RateLimitError> {
        let micros = unix_micros(now);
        let warning = "Redis unreachable: rate limits are counted in this process meanwhile";
        if let Some(admission) = self
            .pause
            .ask(warning, self.hit_redis(key, quota, micros))
            .await
        {
            return Ok(quota.decision(admission, now));
        }
        Ok(quota.decision(self.fallback.admit(key, quota, micros), now))
    }
}

/// A self-healing connection to the Redis server at `url` for counters on the path of a
/// request: it fails a command (and the caller counts in process) rather than stall behind an
/// unresponsive server, and reconnects by itself.
pub(super) async fn connect(url: &str) -> Result<ConnectionManager, RateLimitError> {
    let client = redis::Client::open(url).map_err(redis_error)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(StdDuration::from_secs(2)))
        .set_response_timeout(Some(StdDuration::from_secs(1)))
        .set_number_of_retries(3)
        .set_max_delay(StdDuration::from_secs(1));
    ConnectionManager::new_with_config(client, config)
        .await
        .map_err(redis_error)
}

pub(super) fn redis_error(error: redis::RedisError) -> RateLimitError {
    RateLimitError(Box::new(error))
}

/// `url` with its password (in the userinfo or a `pass`/`password` query parameter) replaced.
fn redact_url(url: &str) -> String {
    const REDACTED: &str = "REDACTED";
    let Ok(mut parsed) = url::Url::parse(url) else {
        return "<invalid URL>".to_owned();
    };
    if parsed.password().is_some() && parsed.set_password(Some(REDACTED)).is_err() {
        return "<invalid URL>".to_owned();
    }
    let has_secret_query = parsed.query_pairs().any(|(name, _)| is_secret_param(&name));
    if has_secret_query {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(name, value)| {
                let value = if is_secret_param(&name) {
                    REDACTED.to_owned()
                } else {
                    value.into_owned()
                };
                (name.into_owned(), value)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.into()
}

fn is_secret_param(name: &str) -> bool {
    name.eq_ignore_ascii_case("pass") || name.eq_ignore_ascii_case("password")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> OffsetDateTime {
        match gatehouse_domain::model::timestamp::parse(rfc3339) {
            Ok(time) => time,
            Err(error) => panic!("bad test time {rfc3339}: {error}"),
        }
    }

    async fn hit(limiter: &MemoryRateLimiter, key: &str, quota: Quota, now: &str) -> RateDecision {
        match limiter.hit(key, quota, at(now)).await {
            Ok(decision) => decision,
            Err(error) => panic!("the memory limiter failed: {error}"),
        }
    }

    #[tokio::test]
    async fn a_whole_minute_at_once_gets_a_sixth_through() {
        let limiter = MemoryRateLimiter::new();
        let mut admitted = 0;
        for _ in 0..60 {
            let decision = hit(&limiter, "k", Quota::spread(60), "2025-03-01T12:00:10Z").await;
            assert_eq!(decision.limit, 60);
            admitted += u32::from(decision.allowed);
        }
        assert_eq!(admitted, 10);
    }

    #[tokio::test]
    async fn a_minute_spread_evenly_gets_through_whole() {
        let limiter = MemoryRateLimiter::new();
        for second in 0..60 {
            let now = format!("2025-03-01T12:00:{second:02}Z");
            let decision = hit(&limiter, "k", Quota::spread(60), &now).await;
            assert!(decision.allowed, "at {now}");
        }
    }

    #[tokio::test]
    async fn refuses_past_the_burst_and_says_when_to_come_back() {
        let limiter = MemoryRateLimiter::new();
        let quota = Quota::new(3, 3);
        for n in 1..=3 {
            let decision = hit(&limiter, "k", quota, "2025-03-01T12:00:10Z").await;
            assert!(decision.allowed, "request {n}");
            assert_eq!(decision.remaining, 3 - n);
            assert_eq!(
                decision.reset_at,
                at("2025-03-01T12:00:10Z") + time::Duration::seconds(20 * i64::from(n))
            );
        }
        let refused = hit(&limiter, "k", quota, "2025-03-01T12:00:20Z").await;
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.reset_at, at("2025-03-01T12:00:30Z"));
        // A refusal cost nothing: the next one is admitted when it said.
        assert!(
            hit(&limiter, "k", quota, "2025-03-01T12:00:30Z")
                .await
                .allowed
        );
    }

    #[tokio::test]
    async fn keys_are_counted_apart() {
        let limiter = MemoryRateLimiter::new();
        let quota = Quota::new(1, 1);
        assert!(
            hit(&limiter, "a", quota, "2025-03-01T12:00:00Z")
                .await
                .allowed
        );
        assert!(
            !hit(&limiter, "a", quota, "2025-03-01T12:00:01Z")
                .await
                .allowed
        );
        let other = hit(&limiter, "b", quota, "2025-03-01T12:00:02Z").await;
        assert!(other.allowed);
        assert_eq!(other.remaining, 0);
    }

    #[tokio::test]
    async fn a_limit_of_zero_refuses_everything() {
        let limiter = MemoryRateLimiter::new();
        let decision = hit(&limiter, "k", Quota::spread(0), "2025-03-01T12:00:00Z").await;
        assert!(!decision.allowed);
        assert_eq!(decision.remaining, 0);
    }

    #[tokio::test]
    async fn keys_paid_off_are_swept_as_the_map_grows() {
        let limiter = MemoryRateLimiter::new();
        for n in 0..FIRST_SWEEP {
            hit(
                &limiter,
                &format!("k{n}"),
                Quota::spread(60),
                "2025-03-01T12:00:00Z",
            )
            .await;
        }
        // A minute later every one of those keys is paid off: the next hit sweeps them.
        hit(&limiter, "late", Quota::spread(60), "2025-03-01T12:01:00Z").await;
        let state = limiter.state.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(state.paid_until.len(), 1);
    }

    #[test]
    fn redis_keys_name_the_key() {
        assert_eq!(
            RedisRateLimiter::redis_key("ip:10.0.0.1"),
            "gatehouse:gcra:ip:10.0.0.1"
        );
    }

    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(
            redact_url("redis://user:hunter2@cache.internal:6380/2"),
            "redis://user:REDACTED@cache.internal:6380/2"
        );
        assert_eq!(
            redact_url("redis://:hunter2@127.0.0.1"),
            "redis://:REDACTED@127.0.0.1"
        );
        assert_eq!(
            redact_url("redis+unix:///run/redis.sock?db=1&pass=hunter2"),
            "redis+unix:///run/redis.sock?db=1&pass=REDACTED"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(redact_url("not a url :hunter2"), "<invalid URL>");
    }

    #[tokio::test]
    async fn a_bad_url_is_an_error() {
        let error = RedisRateLimiter::connect("http://:hunter2@127.0.0.1")
            .await
            .err()
            .map(|error| format!("{error} {error:?}"));
        let Some(error) = error else {
            panic!("connected to an http URL");
        };
        assert!(!error.contains("hunter2"), "{error}");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_an_error() {
        // Port 1 on the loopback address: nothing listens there.
        let result = tokio::time::timeout(
            StdDuration::from_secs(30),
            RedisRateLimiter::connect("redis://:hunter2@127.0.0.1:1"),
        )
        .await;
        match result {
            Ok(Ok(limiter)) => panic!("connected to {limiter:?}"),
            Ok(Err(error)) => {
                let error = format!("{error} {error:?}");
                assert!(!error.contains("hunter2"), "{error}");
            }
            Err(_) => panic!("connecting to an unreachable server did not give up"),
        }
    }
}
