//! Failed sign-ins per account (brute-force protection), counted in process
//! ([`MemorySignInAttempts`]) or in Redis ([`RedisSignInAttempts`]) so that every replica sees
//! the same count. The rule (how many failures lock, for how long, how many checks may be
//! under way at once) is the domain's `LockoutRule`; these only keep each account's run of
//! failures, its lockout and its check slots, atomically.

use std::{
    collections::HashMap,
    fmt,
    future::Future,
    sync::{Mutex, PoisonError},
};

use async_trait::async_trait;
use gatehouse_domain::{
    model::{AccountKey, CheckAdmission, FailedSignIns, LockoutRule},
    ports::{RateLimitError, SignInAttempts},
};
use redis::aio::ConnectionManager;
use time::OffsetDateTime;

use crate::pause::Pause;

/// One account's run, as the process keeps it.
#[derive(Clone, Copy, Debug)]
struct Run {
    failures: u32,
    started: OffsetDateTime,
    locked_until: Option<OffsetDateTime>,
    /// Check slots taken and not given back, while `checks_until` is ahead.
    checks: u32,
    /// When the slots lapse: [`LockoutRule::CHECK_SLOT_TTL`] after the latest was taken.
    checks_until: OffsetDateTime,
    /// When the run is forgotten (see `LockoutRule::run_ends`), or its slots lapse if later.
    forget_at: OffsetDateTime,
}

impl Run {
    fn fresh(now: OffsetDateTime, rule: &LockoutRule) -> Self {
        Self {
            failures: 0,
            started: now,
            locked_until: None,
            checks: 0,
            checks_until: now,
            forget_at: rule.run_ends(now, None),
        }
    }

    fn as_seen(&self) -> FailedSignIns {
        FailedSignIns {
            failures: self.failures,
            locked_until: self.locked_until,
        }
    }

    /// The slots under way at `now`.
    fn checks(&self, now: OffsetDateTime) -> u32 {
        if self.checks_until > now {
            self.checks
        } else {
            0
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

    /// The account's run as it stands at `now`, a fresh one when there is none or it is over.
    fn run_at<'a>(
        state: &'a mut MemoryState,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> &'a mut Run {
        if state.runs.len() >= state.next_sweep {
            state.runs.retain(|_, run| run.forget_at > now);
            state.next_sweep = (state.runs.len() * 2).max(FIRST_SWEEP);
        }
        let run = state
            .runs
            .entry(account.clone())
            .or_insert_with(|| Run::fresh(now, rule));
        if run.forget_at <= now {
            *run = Run::fresh(now, rule);
        }
        run
    }

    fn begin(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> CheckAdmission {
        let mut state = self.state();
        let run = Self::run_at(&mut state, account, now, rule);
        let admission = rule.admit(&run.as_seen(), run.checks(now), now);
        if admission == CheckAdmission::Admitted {
            run.checks = run.checks(now) + 1;
            run.checks_until = now + LockoutRule::CHECK_SLOT_TTL;
            run.forget_at = run.forget_at.max(run.checks_until);
        }
        admission
    }

    fn give_back(&self, account: &AccountKey) {
        if let Some(run) = self.state().runs.get_mut(account) {
            run.checks = run.checks.saturating_sub(1);
        }
    }

    fn fail(&self, account: &AccountKey, now: OffsetDateTime, rule: &LockoutRule) -> FailedSignIns {
        let mut state = self.state();
        let run = Self::run_at(&mut state, account, now, rule);
        run.checks = run.checks.saturating_sub(1);
        if run.failures == 0 {
            run.started = now;
        }
        run.failures = run.failures.saturating_add(1);
        if let Some(lockout) = rule.lockout_after(run.failures) {
            let until = now + lockout;
            run.locked_until = Some(run.locked_until.map_or(until, |old| old.max(until)));
        }
        run.forget_at = rule
            .run_ends(run.started, run.locked_until)
            .max(run.checks_until);
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

    async fn begin_check(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<CheckAdmission, RateLimitError> {
        Ok(self.begin(account, now, rule))
    }

    async fn release(&self, account: &AccountKey) -> Result<(), RateLimitError> {
        self.give_back(account);
        Ok(())
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
/// the fields `failures`, `started`, `locked_until`, `checks` and `checks_until` (moments in
/// Unix milliseconds), and expires when the run is forgotten.
const REDIS_KEY_PREFIX: &str = "gatehouse:signin:";

/// Takes a check slot if the rule admits it. ARGV[1]: now; ARGV[2]: the slots' lifetime;
/// ARGV[3..]: `LockoutRule::checks_at_once` for 0, 1, ... failures (the last for any more).
/// Returns {taken (1 or 0), failures, locked_until, checks under way before}.
const BEGIN_CHECK: &str = r"
local now = tonumber(ARGV[1])
local run = redis.call('HMGET', KEYS[1], 'failures', 'locked_until', 'checks', 'checks_until')
local failures = tonumber(run[1] or '0')
local locked = tonumber(run[2] or '0')
local checks = tonumber(run[3] or '0')
if tonumber(run[4] or '0') <= now then checks = 0 end
local open = tonumber(ARGV[3 + math.min(failures, #ARGV - 3)])
if locked > now or checks >= open then
  return {0, failures, locked, checks}
end
local ttl = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'checks', checks + 1, 'checks_until', now + ttl)
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {1, failures, locked, checks}
";

/// Gives back a check slot, if one is taken.
const RELEASE: &str = r"
local checks = tonumber(redis.call('HGET', KEYS[1], 'checks') or '0')
if checks > 0 then
  redis.call('HSET', KEYS[1], 'checks', checks - 1)
end
return checks
";

/// Counts one failure in place of a check slot, and locks as the rule says, in one step.
/// ARGV[1]: now; ARGV[2]: the rule's window; ARGV[3]: the failure that first locks; ARGV[4..]:
/// `LockoutRule::lockout_after` for that failure and each after it (the last for any more).
/// Returns {failures, locked_until (0: none)}.
const COUNT_FAILURE: &str = r"
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local threshold = tonumber(ARGV[3])
local checks = tonumber(redis.call('HGET', KEYS[1], 'checks') or '0')
if checks > 0 then
  redis.call('HSET', KEYS[1], 'checks', checks - 1)
end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
if failures == 1 then
  redis.call('HSET', KEYS[1], 'started', now)
end
local started = tonumber(redis.call('HGET', KEYS[1], 'started') or now)
local locked = tonumber(redis.call('HGET', KEYS[1], 'locked_until') or '0')
local forget = started + window
if failures >= threshold then
  local lockout = tonumber(ARGV[4 + math.min(failures - threshold, #ARGV - 4)])
  if now + lockout > locked then
    locked = now + lockout
    redis.call('HSET', KEYS[1], 'locked_until', locked)
  end
  forget = locked + window
end
local keep = forget - now
if redis.call('PTTL', KEYS[1]) < keep then
  redis.call('PEXPIRE', KEYS[1], keep)
end
return {failures, locked}
";

/// Runs in Redis, shared by every replica that points at the same server. When Redis cannot
/// be reached, it counts in process meanwhile (and says so in the log): protection per replica
/// rather than none. After a failure Redis is left alone for [`crate::REDIS_PAUSE`], so that an
/// outage costs one slow sign-in per pause, not every sign-in.
pub struct RedisSignInAttempts {
    connection: ConnectionManager,
    begin_check: redis::Script,
    release: redis::Script,
    count_failure: redis::Script,
    fallback: MemorySignInAttempts,
    pause: Pause,
}

impl RedisSignInAttempts {
    /// Connects to the Redis server at `url`.
    ///
    /// # Errors
    /// [`RateLimitError`] when the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, RateLimitError> {
        Ok(Self {
            connection: crate::rate_limit::connect(url).await?,
            begin_check: redis::Script::new(BEGIN_CHECK),
            release: redis::Script::new(RELEASE),
            count_failure: redis::Script::new(COUNT_FAILURE),
            fallback: MemorySignInAttempts::new(),
            pause: Pause::default(),
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

    async fn begin(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<CheckAdmission, redis::RedisError> {
        let mut connection = self.connection.clone();
        let mut script = self.begin_check.key(Self::redis_key(account));
        script
            .arg(unix_millis(now))
            .arg(millis(LockoutRule::CHECK_SLOT_TTL));
        for failures in 0..=rule.threshold() {
            script.arg(rule.checks_at_once(failures));
        }
        let (taken, failures, locked_until, checks): (i64, u32, i64, u32) =
            script.invoke_async(&mut connection).await?;
        if taken == 1 {
            return Ok(CheckAdmission::Admitted);
        }
        let run = FailedSignIns {
            failures,
            locked_until: from_unix_millis(locked_until).filter(|_| locked_until > 0),
        };
        // The script refused with the same rule: the rule says how long to wait.
        Ok(match rule.admit(&run, checks, now) {
            CheckAdmission::Admitted => CheckAdmission::Refused(LockoutRule::BUSY_WAIT),
            refused => refused,
        })
    }

    async fn give_back(&self, account: &AccountKey) -> Result<(), redis::RedisError> {
        let mut connection = self.connection.clone();
        let _: i64 = self
            .release
            .key(Self::redis_key(account))
            .invoke_async(&mut connection)
            .await?;
        Ok(())
    }

    async fn fail(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, redis::RedisError> {
        let mut connection = self.connection.clone();
        let mut script = self.count_failure.key(Self::redis_key(account));
        script
            .arg(unix_millis(now))
            .arg(millis(rule.window()).max(1))
            .arg(rule.threshold());
        // Each lockout from the first, doubling, up to the longest (which any more repeat).
        let mut failures = rule.threshold();
        while let Some(lockout) = rule.lockout_after(failures) {
            script.arg(millis(lockout));
            match failures.checked_add(1) {
                Some(next) if rule.lockout_after(next) != Some(lockout) => failures = next,
                _ => break,
            }
        }
        let (failures, locked_until): (u32, i64) = script.invoke_async(&mut connection).await?;
        Ok(FailedSignIns {
            failures,
            locked_until: from_unix_millis(locked_until).filter(|_| locked_until > 0),
        })
    }

    async fn forget(&self, account: &AccountKey) -> Result<(), redis::RedisError> {
        let mut connection = self.connection.clone();
        redis::cmd("DEL")
            .arg(Self::redis_key(account))
            .query_async(&mut connection)
            .await
    }
}

impl fmt::Debug for RedisSignInAttempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisSignInAttempts")
            .finish_non_exhaustive()
    }
}

/// What the log says when Redis fails.
const FALLING_BACK: &str =
    "Redis unreachable: failed sign-ins are counted in this process meanwhile";

impl RedisSignInAttempts {
    /// What Redis answers to `redis`, or, when Redis is unreachable or paused, what the
    /// process's own count answers to `fallback` (neither starts unless it is asked).
    async fn or_fallback<T>(
        &self,
        redis: impl Future<Output = Result<T, redis::RedisError>>,
        fallback: impl Future<Output = Result<T, RateLimitError>>,
    ) -> Result<T, RateLimitError> {
        match self.pause.ask(FALLING_BACK, redis).await {
            Some(answer) => Ok(answer),
            None => fallback.await,
        }
    }
}

#[async_trait]
impl SignInAttempts for RedisSignInAttempts {
    async fn failed_sign_ins(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> Result<FailedSignIns, RateLimitError> {
        self.or_fallback(
            self.current(account),
            self.fallback.failed_sign_ins(account, now),
        )
        .await
    }

    async fn begin_check(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<CheckAdmission, RateLimitError> {
        self.or_fallback(
            self.begin(account, now, rule),
            self.fallback.begin_check(account, now, rule),
        )
        .await
    }

    async fn release(&self, account: &AccountKey) -> Result<(), RateLimitError> {
        self.pause.ask(FALLING_BACK, self.give_back(account)).await;
        self.fallback.release(account).await
    }

    async fn record_failure(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, RateLimitError> {
        self.or_fallback(
            self.fail(account, now, rule),
            self.fallback.record_failure(account, now, rule),
        )
        .await
    }

    async fn clear(&self, account: &AccountKey) -> Result<(), RateLimitError> {
        self.pause.ask(FALLING_BACK, self.forget(account)).await;
        self.fallback.clear(account).await
    }
}

/// A duration in milliseconds, as the Lua scripts count.
fn millis(duration: time::Duration) -> i64 {
    i64::try_from(duration.whole_milliseconds()).unwrap_or(i64::MAX)
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

    async fn begin(
        store: &MemorySignInAttempts,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> CheckAdmission {
        match store.begin_check(account, now, &LockoutRule::DEFAULT).await {
            Ok(admission) => admission,
            Err(error) => panic!("the memory store failed: {error}"),
        }
    }

    #[tokio::test]
    async fn thirty_checks_at_once_admit_five_and_their_failures_lock() {
        let store = std::sync::Arc::new(MemorySignInAttempts::new());
        let ada = AccountKey::for_email("ada@example.com");
        let now = at(0, 0);
        let tries: Vec<_> = (0..30)
            .map(|_| {
                let (store, ada) = (store.clone(), ada.clone());
                tokio::spawn(async move { begin(&store, &ada, now).await })
            })
            .collect();
        let mut admitted = 0;
        for attempt in tries {
            match attempt.await {
                Ok(CheckAdmission::Admitted) => admitted += 1,
                Ok(CheckAdmission::Refused(wait)) => assert_eq!(wait, LockoutRule::BUSY_WAIT),
                Err(error) => panic!("{error}"),
            }
        }
        assert_eq!(admitted, 5);
        for n in 1..=5 {
            fail(&store, &ada, at(0, n)).await;
        }
        // Five failures: locked for a minute, the slots they held now failures.
        assert_eq!(
            begin(&store, &ada, at(0, 6)).await,
            CheckAdmission::Refused(Duration::seconds(59))
        );
    }

    #[tokio::test]
    async fn a_failure_keeps_its_slot_and_a_check_without_a_verdict_gives_it_back() {
        let store = MemorySignInAttempts::new();
        let ada = AccountKey::for_email("ada@example.com");
        for n in 0..4 {
            fail(&store, &ada, at(0, n)).await;
        }
        // Four failures: one check at a time.
        assert_eq!(
            begin(&store, &ada, at(0, 5)).await,
            CheckAdmission::Admitted
        );
        let busy = CheckAdmission::Refused(LockoutRule::BUSY_WAIT);
        assert_eq!(begin(&store, &ada, at(0, 5)).await, busy);
        assert!(store.release(&ada).await.is_ok());
        assert_eq!(
            begin(&store, &ada, at(0, 6)).await,
            CheckAdmission::Admitted
        );
        // A slot not given back lapses.
        assert_eq!(begin(&store, &ada, at(0, 35)).await, busy);
        assert_eq!(
            begin(&store, &ada, at(0, 36)).await,
            CheckAdmission::Admitted
        );
        // A right password ends the run and its slots.
        assert!(store.clear(&ada).await.is_ok());
        for _ in 0..5 {
            assert_eq!(
                begin(&store, &ada, at(0, 37)).await,
                CheckAdmission::Admitted
            );
        }
        assert_eq!(begin(&store, &ada, at(0, 37)).await, busy);
    }

    #[test]
    fn redis_keys_hold_no_email() {
        let key = RedisSignInAttempts::redis_key(&AccountKey::for_email("ada@example.com"));
        assert!(key.starts_with("gatehouse:signin:"));
        assert!(!key.contains("ada"));
    }
}
