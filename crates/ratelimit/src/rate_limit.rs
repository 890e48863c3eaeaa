//! Rate limiter adapters: fixed one-minute windows aligned to the minute, counted in process
//! ([`MemoryRateLimiter`]) or in Redis ([`RedisRateLimiter`]) so that every replica shares one
//! budget per key. When Redis cannot be reached, the Redis limiter counts in process meanwhile
//! and says so in the log: every request is still counted and answered with its headers.
//!
//! Each window is counted on its own: a refused request adds to the count of the window it was
//! made in and nothing else, so it neither extends that window nor carries over to the next.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration as StdDuration, Instant};

use async_trait::async_trait;
use gatehouse_domain::ports::{RateDecision, RateLimitError, RateLimiter};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use time::{Duration, OffsetDateTime};

/// The length of a window, in seconds.
const WINDOW_SECS: i64 = 60;

/// How long a window's counter outlives its last hit in Redis: long enough to cover the whole
/// window, short enough that past windows do not pile up.
const REDIS_KEY_TTL_SECS: i64 = 2 * WINDOW_SECS;

/// The prefix of every Redis key the limiter writes; the key is
/// `gatehouse:rl:{key}:{window_start_unix}`.
const REDIS_KEY_PREFIX: &str = "gatehouse:rl:";

/// After Redis failed, how long requests are counted in process before Redis is tried again:
/// an outage costs one slow request (and one warning) per pause, not one per request.
const REDIS_PAUSE: StdDuration = StdDuration::from_secs(5);

/// The one-minute window that contains a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    /// The window's start, in Unix seconds (a multiple of 60).
    start_unix: i64,
    /// The window's end, when the count starts again.
    reset_at: OffsetDateTime,
}

impl Window {
    fn containing(now: OffsetDateTime) -> Result<Self, RateLimitError> {
        let start_unix = now.unix_timestamp().div_euclid(WINDOW_SECS) * WINDOW_SECS;
        let reset_at = OffsetDateTime::from_unix_timestamp(start_unix)
            .ok()
            .and_then(|start| start.checked_add(Duration::seconds(WINDOW_SECS)))
            .ok_or_else(|| RateLimitError(format!("no rate-limit window contains {now}").into()))?;
        Ok(Self {
            start_unix,
            reset_at,
        })
    }

    /// The decision for the `count`th request of this window.
    fn decide(self, count: u32, limit: u32) -> RateDecision {
        RateDecision {
            allowed: count <= limit,
            limit,
            remaining: limit.saturating_sub(count),
            reset_at: self.reset_at,
        }
    }
}

/// Counters of one process, for a single replica (and for tests).
///
/// Only the windows from the newest one seen onwards are kept: when the minute rolls over, the
/// counters of earlier windows are dropped, so memory stays bounded by the keys seen in about a
/// minute.
#[derive(Default)]
pub struct MemoryRateLimiter {
    state: Mutex<MemoryState>,
}

#[derive(Default)]
struct MemoryState {
    /// The start of the newest window seen, in Unix seconds.
    newest_window: Option<i64>,
    /// Counts per window start, then per key.
    windows: HashMap<i64, HashMap<String, u32>>,
}

impl MemoryRateLimiter {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn count(&self, key: &str, window: Window) -> u32 {
        // Never held across an await: this function does not await. A panic while holding the
        // lock could at worst leave one count unincremented, so a poisoned lock is used as is.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state
            .newest_window
            .is_none_or(|newest| window.start_unix > newest)
        {
            state.newest_window = Some(window.start_unix);
            state.windows.retain(|&start, _| start >= window.start_unix);
        }
        let counts = state.windows.entry(window.start_unix).or_default();
        if let Some(count) = counts.get_mut(key) {
            *count = count.saturating_add(1);
            *count
        } else {
            counts.insert(key.to_owned(), 1);
            1
        }
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
        limit: u32,
        now: OffsetDateTime,
    ) -> Result<RateDecision, RateLimitError> {
        let window = Window::containing(now)?;
        Ok(window.decide(self.count(key, window), limit))
    }
}

/// Counters in Redis, shared by every replica that points at the same server.
///
/// Each hit is one round trip: `INCR` and `EXPIRE` of the window's key in one `MULTI`/`EXEC`
/// transaction. The connection is re-established by itself after Redis goes away; meanwhile
/// hits are counted in this process ([`MemoryRateLimiter`]), with a warning in the log each
/// time Redis is found unreachable (at most once per [`REDIS_PAUSE`], during which Redis is not
/// asked): the budget is per replica rather than shared, and never gone.
#[derive(Clone)]
pub struct RedisRateLimiter {
    connection: ConnectionManager,
    /// The server's URL without its password, for `Debug`.
    redacted_url: String,
    /// Where hits are counted while Redis cannot be reached.
    fallback: Arc<MemoryRateLimiter>,
    /// When Redis last failed, while that is less than [`REDIS_PAUSE`] ago.
    failed_at: Arc<Mutex<Option<Instant>>>,
}

impl RedisRateLimiter {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host[:port][/db]`).
    ///
    /// # Errors
    /// [`RateLimitError`] when the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, RateLimitError> {
        Ok(Self {
            connection: connect(url).await?,
            redacted_url: redact_url(url),
            fallback: Arc::default(),
            failed_at: Arc::default(),
        })
    }

    /// Whether Redis failed less than [`REDIS_PAUSE`] ago (then it is not asked).
    fn pausing(&self) -> bool {
        let failed_at = self
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        failed_at.is_some_and(|at| at.elapsed() < REDIS_PAUSE)
    }

    fn remember_failure(&self, failed: Option<Instant>) {
        *self
            .failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = failed;
    }

    /// One hit counted in Redis.
    async fn hit_redis(&self, key: &str, window: Window) -> Result<u32, redis::RedisError> {
        let redis_key = Self::redis_key(key, window.start_unix);
        let mut connection = self.connection.clone();
        let (count,): (i64,) = redis::pipe()
            .atomic()
            .incr(&redis_key, 1_i64)
            .expire(&redis_key, REDIS_KEY_TTL_SECS)
            .ignore()
            .query_async(&mut connection)
            .await?;
        // INCR only counts up from 1; anything else means someone else wrote the key.
        Ok(u32::try_from(count.max(1)).unwrap_or(u32::MAX))
    }

    /// The Redis key counting `key`'s hits in the window that starts at `window_start_unix`.
    #[must_use]
    pub fn redis_key(key: &str, window_start_unix: i64) -> String {
        format!("{REDIS_KEY_PREFIX}{key}:{window_start_unix}")
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
        limit: u32,
        now: OffsetDateTime,
    ) -> Result<RateDecision, RateLimitError> {
        let window = Window::containing(now)?;
        if !self.pausing() {
            match self.hit_redis(key, window).await {
                Ok(count) => {
                    self.remember_failure(None);
                    return Ok(window.decide(count, limit));
                }
                Err(error) => {
                    tracing::warn!(%error, "Redis unreachable: rate limits are counted in this process meanwhile");
                    self.remember_failure(Some(Instant::now()));
                }
            }
        }
        Ok(window.decide(self.fallback.count(key, window), limit))
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

    async fn hit(limiter: &MemoryRateLimiter, key: &str, limit: u32, now: &str) -> RateDecision {
        match limiter.hit(key, limit, at(now)).await {
            Ok(decision) => decision,
            Err(error) => panic!("the memory limiter failed: {error}"),
        }
    }

    #[tokio::test]
    async fn refuses_the_request_after_the_limit() {
        let limiter = MemoryRateLimiter::new();
        for n in 1..=3 {
            let decision = hit(&limiter, "k", 3, "2025-03-01T12:00:10Z").await;
            assert!(decision.allowed, "request {n}");
            assert_eq!(decision.limit, 3);
            assert_eq!(decision.remaining, 3 - n);
        }
        let refused = hit(&limiter, "k", 3, "2025-03-01T12:00:50Z").await;
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(refused.limit, 3);
        let refused_again = hit(&limiter, "k", 3, "2025-03-01T12:00:59.999Z").await;
        assert!(!refused_again.allowed);
        assert_eq!(refused_again.remaining, 0);
    }

    #[tokio::test]
    async fn the_next_window_starts_fresh() {
        let limiter = MemoryRateLimiter::new();
        for _ in 0..5 {
            hit(&limiter, "k", 2, "2025-03-01T12:00:30Z").await;
        }
        let next = hit(&limiter, "k", 2, "2025-03-01T12:01:00Z").await;
        assert!(next.allowed);
        assert_eq!(next.remaining, 1);
        assert_eq!(next.reset_at, at("2025-03-01T12:02:00Z"));
    }

    #[tokio::test]
    async fn keys_are_counted_apart() {
        let limiter = MemoryRateLimiter::new();
        assert!(hit(&limiter, "a", 1, "2025-03-01T12:00:00Z").await.allowed);
        assert!(!hit(&limiter, "a", 1, "2025-03-01T12:00:01Z").await.allowed);
        let other = hit(&limiter, "b", 1, "2025-03-01T12:00:02Z").await;
        assert!(other.allowed);
        assert_eq!(other.remaining, 0);
    }

    #[tokio::test]
    async fn resets_at_the_end_of_the_minute() {
        let limiter = MemoryRateLimiter::new();
        for now in [
            "2025-03-01T12:34:00Z",
            "2025-03-01T12:34:17.25Z",
            "2025-03-01T12:34:59.999999Z",
        ] {
            let decision = hit(&limiter, "k", 10, now).await;
            assert_eq!(decision.reset_at, at("2025-03-01T12:35:00Z"), "at {now}");
        }
        // Before the epoch too.
        let decision = hit(&limiter, "k", 10, "1969-12-31T23:59:30Z").await;
        assert_eq!(decision.reset_at, at("1970-01-01T00:00:00Z"));
    }

    #[tokio::test]
    async fn a_limit_of_zero_refuses_everything() {
        let limiter = MemoryRateLimiter::new();
        let decision = hit(&limiter, "k", 0, "2025-03-01T12:00:00Z").await;
        assert!(!decision.allowed);
        assert_eq!(decision.remaining, 0);
    }

    #[tokio::test]
    async fn past_windows_are_dropped() {
        let limiter = MemoryRateLimiter::new();
        for key in ["a", "b", "c"] {
            hit(&limiter, key, 5, "2025-03-01T12:00:00Z").await;
        }
        hit(&limiter, "a", 5, "2025-03-01T12:01:00Z").await;
        {
            let state = limiter.state.lock().unwrap_or_else(PoisonError::into_inner);
            assert_eq!(state.windows.len(), 1);
            let current = state
                .windows
                .get(&at("2025-03-01T12:01:00Z").unix_timestamp());
            assert_eq!(current.map(HashMap::len), Some(1));
        }
        // A straggler stamped in the dropped window counts from scratch there, and that
        // window goes again at the next rollover.
        let late = hit(&limiter, "a", 5, "2025-03-01T12:00:59Z").await;
        assert_eq!(late.remaining, 4);
        assert_eq!(late.reset_at, at("2025-03-01T12:01:00Z"));
        hit(&limiter, "a", 5, "2025-03-01T12:02:00Z").await;
        let state = limiter.state.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(state.windows.len(), 1);
    }

    #[test]
    fn redis_keys_name_the_key_and_the_window() {
        assert_eq!(
            RedisRateLimiter::redis_key("ip:10.0.0.1", 1_740_830_400),
            "gatehouse:rl:ip:10.0.0.1:1740830400"
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
