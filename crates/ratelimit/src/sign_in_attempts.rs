//! Failed sign-ins per account (brute-force protection), counted in process
//! ([`MemorySignInAttempts`]) or in Redis ([`RedisSignInAttempts`]) so that every replica sees
//! the same count. The rule (how many failures lock, for how long) is the domain's
//! `LockoutRule`; these only keep each account's run of failures and its lockout, atomically.

use std::{
    collections::HashMap,
    fmt,
    sync::{Mutex, PoisonError},
};

use async_trait::async_trait;
use gatehouse_domain::{
    model::{AccountKey, FailedSignIns, LockoutRule},
    ports::{RateLimitError, SignInAttempts},
};
use redis::aio::ConnectionManager;
use time::OffsetDateTime;

/// One account's run, as the process keeps it.
#[derive(Clone, Copy, Debug)]
struct Run {
    failures: u32,
    started: OffsetDateTime,
    locked_until: Option<OffsetDateTime>,
    /// When the run is forgotten (see `LockoutRule::run_ends`).
    forget_at: OffsetDateTime,
}

impl Run {
    fn as_seen(&self) -> FailedSignIns {
        FailedSignIns {
            failures: self.failures,
            locked_until: self.locked_until,
        }
    }
}

/// Runs of one process, for a single replica (and the fallback of the Redis one).
///
/// Memory stays bounded by the accounts that failed recently: runs past their end are dropped
/// whenever the map has doubled since the last sweep.
pub struct MemorySignInAttempts {
    state: Mutex<MemoryState>,
}

struct MemoryState {
    runs: HashMap<AccountKey, Run>,
    /// The size at which the next sweep for forgotten runs happens.
    next_sweep: usize,
}

/// The smallest map that is swept.
const FIRST_SWEEP: usize = 1024;

impl Default for MemorySignInAttempts {
    fn default() -> Self {
        Self {
            state: Mutex::new(MemoryState {
                runs: HashMap::new(),
                next_sweep: FIRST_SWEEP,
            }),
        }
    }
}

impl MemorySignInAttempts {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemoryState> {
        // Never held across an await. A panic while holding it could at worst lose one count.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn current(&self, account: &AccountKey, now: OffsetDateTime) -> FailedSignIns {
        let mut state = self.state();
        match state.runs.get(account) {
            Some(run) if run.forget_at > now => run.as_seen(),
            Some(_) => {
                state.runs.remove(account);
                FailedSignIns::default()
            }
            None => FailedSignIns::default(),
        }
    }

    fn fail(&self, account: &AccountKey, now: OffsetDateTime, rule: &LockoutRule) -> FailedSignIns {
        let mut state = self.state();
        if state.runs.len() >= state.next_sweep {
            state.runs.retain(|_, run| run.forget_at > now);
            state.next_sweep = (state.runs.len() * 2).max(FIRST_SWEEP);
        }
        let fresh = Run {
            failures: 0,
            started: now,
            locked_until: None,
            forget_at: rule.run_ends(now, None),
        };
        let run = state.runs.entry(account.clone()).or_insert(fresh);
        if run.forget_at <= now {
            *run = fresh;
        }
        run.failures = run.failures.saturating_add(1);
        if let Some(lockout) = rule.lockout_after(run.failures) {
            let until = now + lockout;
            run.locked_until = Some(run.locked_until.map_or(until, |old| old.max(until)));
        }
        run.forget_at = rule.run_ends(run.started, run.locked_until);
        run.as_seen()
    }
}

impl fmt::Debug for MemorySignInAttempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemorySignInAttempts")
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl SignInAttempts for MemorySignInAttempts {
    async fn failed_sign_ins(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> Result<FailedSignIns, RateLimitError> {
        Ok(self.current(account, now))
    }

    async fn record_failure(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, RateLimitError> {
        Ok(self.fail(account, now, rule))
    }

    async fn clear(&self, account: &AccountKey) -> Result<(), RateLimitError> {
        self.state().runs.remove(account);
        Ok(())
    }
}

/// The prefix of every Redis key this writes; a run is the hash `gatehouse:signin:{key}` with
/// the fields `failures`, `started` and `locked_until` (Unix milliseconds), and expires when
/// the run is forgotten.
const REDIS_KEY_PREFIX: &str = "gatehouse:signin:";

/// Counts one failure: a new run (started now, expiring a window later) when there is none.
/// Returns the failures and the run's start.
const COUNT_FAILURE: &str = r"
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
if failures == 1 then
  redis.call('HSET', KEYS[1], 'started', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {failures, redis.call('HGET', KEYS[1], 'started') or ARGV[1]}
";

/// Locks the run until ARGV[1] unless it is locked longer already, and keeps it until ARGV[2]
/// at least (both Unix milliseconds; ARGV[3] is now). Returns the lockout in force.
const LOCK: &str = r"
local old = tonumber(redis.call('HGET', KEYS[1], 'locked_until') or '0')
if tonumber(ARGV[1]) > old then
  redis.call('HSET', KEYS[1], 'locked_until', ARGV[1])
end
local keep = tonumber(ARGV[2]) - tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < keep then
  redis.call('PEXPIRE', KEYS[1], keep)
end
return redis.call('HGET', KEYS[1], 'locked_until')
";

/// Runs in Redis, shared by every replica that points at the same server. When Redis cannot
/// be reached, it counts in process meanwhile (and says so in the log): protection per replica
/// rather than none.
pub struct RedisSignInAttempts {
    connection: ConnectionManager,
    count_failure: redis::Script,
    lock: redis::Script,
    fallback: MemorySignInAttempts,
}

impl RedisSignInAttempts {
    /// Connects to the Redis server at `url`.
    ///
    /// # Errors
    /// [`RateLimitError`] when the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, RateLimitError> {
        Ok(Self {
            connection: crate::rate_limit::connect(url).await?,
            count_failure: redis::Script::new(COUNT_FAILURE),
            lock: redis::Script::new(LOCK),
            fallback: MemorySignInAttempts::new(),
        })
    }

    /// The Redis key of an account's run.
    #[must_use]
    pub fn redis_key(account: &AccountKey) -> String {
        format!("{REDIS_KEY_PREFIX}{}", account.as_str())
    }

    async fn current(&self, account: &AccountKey) -> Result<FailedSignIns, redis::RedisError> {
        let mut connection = self.connection.clone();
        let (failures, locked_until): (Option<u32>, Option<i64>) = redis::cmd("HMGET")
            .arg(Self::redis_key(account))
            .arg("failures")
            .arg("locked_until")
            .query_async(&mut connection)
            .await?;
        Ok(FailedSignIns {
            failures: failures.unwrap_or(0),
            locked_until: locked_until.and_then(from_unix_millis),
        })
    }

    async fn fail(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, redis::RedisError> {
        let key = Self::redis_key(account);
        let mut connection = self.connection.clone();
        let (failures, started): (u32, i64) = self
            .count_failure
            .key(&key)
            .arg(unix_millis(now))
            .arg(
                i64::try_from(rule.window().whole_milliseconds())
                    .unwrap_or(i64::MAX)
                    .max(1),
            )
            .invoke_async(&mut connection)
            .await?;
        let Some(lockout) = rule.lockout_after(failures) else {
            return Ok(FailedSignIns {
                failures,
                locked_until: None,
            });
        };
        let started = from_unix_millis(started).unwrap_or(now);
        let until = now + lockout;
        let forget_at = rule.run_ends(started, Some(until));
        let locked_until: Option<i64> = self
            .lock
            .key(&key)
            .arg(unix_millis(until))
            .arg(unix_millis(forget_at))
            .arg(unix_millis(now))
            .invoke_async(&mut connection)
            .await?;
        Ok(FailedSignIns {
            failures,
            locked_until: locked_until.and_then(from_unix_millis),
        })
    }
}

impl fmt::Debug for RedisSignInAttempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSignInAttempts")
            .finish_non_exhaustive()
    }
}

fn falling_back(error: &redis::RedisError) {
    tracing::warn!(%error, "Redis unreachable: failed sign-ins are counted in this process meanwhile");
}

#[async_trait]
impl SignInAttempts for RedisSignInAttempts {
    async fn failed_sign_ins(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> Result<FailedSignIns, RateLimitError> {
        match self.current(account).await {
            Ok(run) => Ok(run),
            Err(error) => {
                falling_back(&error);
                self.fallback.failed_sign_ins(account, now).await
            }
        }
    }

    async fn record_failure(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, RateLimitError> {
        match self.fail(account, now, rule).await {
            Ok(run) => Ok(run),
            Err(error) => {
                falling_back(&error);
                self.fallback.record_failure(account, now, rule).await
            }
        }
    }

    async fn clear(&self, account: &AccountKey) -> Result<(), RateLimitError> {
        let mut connection = self.connection.clone();
        let cleared: Result<(), _> = redis::cmd("DEL")
            .arg(Self::redis_key(account))
            .query_async(&mut connection)
            .await;
        if let Err(error) = cleared {
            falling_back(&error);
        }
        self.fallback.clear(account).await
    }
}

/// `at` in Unix milliseconds, as the Lua scripts count.
fn unix_millis(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The moment `millis` Unix milliseconds name, if `time` can hold it.
fn from_unix_millis(millis: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use time::Duration;

    use super::*;

    fn at(minutes: i64, seconds: i64) -> OffsetDateTime {
        OffsetDateTime::UNIX_EPOCH
            + Duration::days(20_000)
            + Duration::minutes(minutes)
            + Duration::seconds(seconds)
    }

    async fn fail(
        store: &MemorySignInAttempts,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> FailedSignIns {
        match store
            .record_failure(account, now, &LockoutRule::DEFAULT)
            .await
        {
            Ok(run) => run,
            Err(error) => panic!("the memory store failed: {error}"),
        }
    }

    async fn seen(
        store: &MemorySignInAttempts,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> FailedSignIns {
        match store.failed_sign_ins(account, now).await {
            Ok(run) => run,
            Err(error) => panic!("the memory store failed: {error}"),
        }
    }

    #[tokio::test]
    async fn five_failures_lock_for_a_minute_and_the_next_one_after_it_for_two() {
        let store = MemorySignInAttempts::new();
        let ada = AccountKey::for_email("ada@example.com");
        for n in 1..=4 {
            let run = fail(&store, &ada, at(0, n)).await;
            assert_eq!((run.failures, run.locked_until), (n as u32, None));
        }
        let fifth = fail(&store, &ada, at(0, 5)).await;
        assert_eq!(fifth.locked_until, Some(at(1, 5)));
        assert_eq!(
            seen(&store, &ada, at(1, 4)).await.retry_after(at(1, 4)),
            Some(Duration::seconds(1))
        );
        // The lockout is over; the run is not: the next failure locks twice as long.
        assert_eq!(
            seen(&store, &ada, at(1, 5)).await.retry_after(at(1, 5)),
            None
        );
        let sixth = fail(&store, &ada, at(2, 0)).await;
        assert_eq!(sixth.failures, 6);
        assert_eq!(sixth.locked_until, Some(at(4, 0)));
    }

    #[tokio::test]
    async fn a_run_is_forgotten_a_window_after_it_began_or_after_its_lockout() {
        let store = MemorySignInAttempts::new();
        let ada = AccountKey::for_email("ada@example.com");
        for n in 0..4 {
            fail(&store, &ada, at(n, 0)).await;
        }
        assert_eq!(seen(&store, &ada, at(14, 59)).await.failures, 4);
        assert_eq!(
            seen(&store, &ada, at(15, 0)).await,
            FailedSignIns::default()
        );
        // Four more in a new window do not lock: the first four are forgotten.
        for n in 0..4 {
            assert_eq!(fail(&store, &ada, at(16 + n, 0)).await.locked_until, None);
        }
        let locked = fail(&store, &ada, at(20, 0)).await;
        assert_eq!(locked.locked_until, Some(at(21, 0)));
        // Locked until 21:00, remembered until 36:00.
        assert_eq!(seen(&store, &ada, at(35, 59)).await.failures, 5);
        assert_eq!(seen(&store, &ada, at(36, 0)).await.failures, 0);
    }

    #[tokio::test]
    async fn accounts_are_counted_apart_and_a_right_password_clears_the_run() {
        let store = MemorySignInAttempts::new();
        let (ada, bob) = (
            AccountKey::for_email("ada@example.com"),
            AccountKey::for_email("bob@example.com"),
        );
        fail(&store, &ada, at(0, 0)).await;
        fail(&store, &ada, at(0, 1)).await;
        fail(&store, &bob, at(0, 2)).await;
        assert_eq!(seen(&store, &ada, at(0, 3)).await.failures, 2);
        assert_eq!(seen(&store, &bob, at(0, 3)).await.failures, 1);
        assert!(store.clear(&ada).await.is_ok());
        assert_eq!(seen(&store, &ada, at(0, 4)).await.failures, 0);
        assert_eq!(seen(&store, &bob, at(0, 4)).await.failures, 1);
    }

    #[tokio::test]
    async fn forgotten_runs_are_swept_as_the_map_grows() {
        let store = MemorySignInAttempts::new();
        for n in 0..FIRST_SWEEP {
            fail(
                &store,
                &AccountKey::for_email(&format!("{n}@example.com")),
                at(0, 0),
            )
            .await;
        }
        // An hour later every one of those runs is over: the next failure sweeps them.
        fail(
            &store,
            &AccountKey::for_email("late@example.com"),
            at(60, 0),
        )
        .await;
        assert_eq!(store.state().runs.len(), 1);
    }

    #[test]
    fn redis_keys_hold_no_email() {
        let key = RedisSignInAttempts::redis_key(&AccountKey::for_email("ada@example.com"));
        assert!(key.starts_with("gatehouse:signin:"));
        assert!(!key.contains("ada"));
    }
}
