//! The Redis rate limiter and failed-sign-in counter against a real Redis server: one budget
//! shared by replicas, spread over the minute, counters that expire, and check slots that hold
//! under concurrency.
//!
//! Needs Redis at `redis://127.0.0.1:6379`, or wherever `GATEHOUSE_TEST_REDIS_URL` points.
//! These tests fail, rather than skip, when it cannot be reached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gatehouse_domain::{
    model::{AccountKey, CheckAdmission, LockoutRule, Quota},
    ports::{RateDecision, RateLimiter, SignInAttempts},
};
use gatehouse_ratelimit::{RedisRateLimiter, RedisSignInAttempts};
use time::{Duration, OffsetDateTime};

const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";

fn redis_url() -> String {
    std::env::var("GATEHOUSE_TEST_REDIS_URL").unwrap_or_else(|_| DEFAULT_REDIS_URL.to_owned())
}

/// One replica's limiter.
async fn replica() -> RedisRateLimiter {
    let url = redis_url();
    match RedisRateLimiter::connect(&url).await {
        Ok(limiter) => limiter,
        Err(error) => {
            let cause = std::error::Error::source(&error)
                .map(|source| format!(": {source}"))
                .unwrap_or_default();
            panic!(
                "cannot connect to Redis at {shown} ({error}{cause}).\n\
                 These tests need a running Redis server. Install and start one, e.g.\n    \
                 apt-get install redis-server && redis-server --daemonize yes\n\
                 or point GATEHOUSE_TEST_REDIS_URL at one.",
                shown = without_password(&url),
            )
        }
    }
}

fn without_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("REDACTED"));
            }
            parsed.into()
        }
        Err(_) => "(an invalid URL)".to_owned(),
    }
}

/// A key no other test or run uses.
fn unique_key(name: &str) -> String {
    format!("test:{name}:{}", uuid::Uuid::new_v4())
}

/// Now, to the microsecond, as the limiter counts.
fn now() -> OffsetDateTime {
    let micros = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000;
    OffsetDateTime::from_unix_timestamp_nanos(micros * 1_000).unwrap()
}

async fn hit(
    limiter: &RedisRateLimiter,
    key: &str,
    quota: Quota,
    now: OffsetDateTime,
) -> RateDecision {
    limiter
        .hit(key, quota, now)
        .await
        .expect("the Redis limiter failed")
}

#[tokio::test]
async fn replicas_share_one_budget() {
    let (a, b) = (replica().await, replica().await);
    let key = unique_key("shared");
    let now = now();
    let quota = Quota::new(5, 5);

    let mut decisions = Vec::new();
    for _ in 0..3 {
        decisions.push(hit(&a, &key, quota, now).await);
    }
    for _ in 0..3 {
        decisions.push(hit(&b, &key, quota, now).await);
    }

    let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed).collect();
    assert_eq!(allowed, [true, true, true, true, true, false]);
    let remaining: Vec<u32> = decisions.iter().map(|d| d.remaining).collect();
    assert_eq!(remaining, [4, 3, 2, 1, 0, 0]);
    assert!(decisions.iter().all(|d| d.limit == 5));

    // Still refused on either replica.
    assert!(!hit(&a, &key, quota, now).await.allowed);
}

#[tokio::test]
async fn a_whole_minute_sent_at_once_gets_a_sixth_through_on_every_replica_together() {
    let (a, b) = (replica().await, replica().await);
    let key = unique_key("burst");
    let now = now();
    let quota = Quota::spread(60);
    let hits = (0..60).map(|n| {
        let limiter = if n % 2 == 0 { a.clone() } else { b.clone() };
        let key = key.clone();
        tokio::spawn(async move { hit(&limiter, &key, quota, now).await })
    });
    let mut admitted = 0;
    for handle in hits.collect::<Vec<_>>() {
        admitted += u32::from(handle.await.unwrap().allowed);
    }
    assert_eq!(
        admitted, 10,
        "a sixth of 60, sent at once from two replicas"
    );
}

#[tokio::test]
async fn a_minute_spread_evenly_gets_through_whole() {
    let limiter = replica().await;
    let key = unique_key("even");
    let start = now();
    for second in 0..60 {
        let decision = hit(
            &limiter,
            &key,
            Quota::spread(60),
            start + Duration::seconds(second),
        )
        .await;
        assert!(decision.allowed, "at second {second}");
        assert_eq!(decision.remaining, 9);
    }
}

#[tokio::test]
async fn a_refusal_costs_nothing_and_says_when_to_come_back() {
    let limiter = replica().await;
    let key = unique_key("refused");
    let now = now();
    let quota = Quota::spread(6);
    assert!(hit(&limiter, &key, quota, now).await.allowed);
    for later in [1, 5, 9] {
        let refused = hit(&limiter, &key, quota, now + Duration::seconds(later)).await;
        assert!(!refused.allowed);
        assert!(refused.reset_at >= now + Duration::seconds(10));
        assert!(refused.reset_at <= now + Duration::seconds(11));
    }
    assert!(
        hit(&limiter, &key, quota, now + Duration::seconds(10))
            .await
            .allowed
    );
}

#[tokio::test]
async fn keys_are_counted_apart() {
    let limiter = replica().await;
    let (first, second) = (unique_key("first"), unique_key("second"));
    let now = now();
    let quota = Quota::new(1, 1);

    assert!(hit(&limiter, &first, quota, now).await.allowed);
    assert!(!hit(&limiter, &first, quota, now).await.allowed);
    assert!(hit(&limiter, &second, quota, now).await.allowed);
}

#[tokio::test]
async fn a_key_expires_when_it_is_paid_off() {
    let limiter = replica().await;
    let key = unique_key("ttl");
    let now = now();
    hit(&limiter, &key, Quota::spread(6), now).await;

    let redis_key = RedisRateLimiter::redis_key(&key);
    assert_eq!(redis_key, format!("gatehouse:gcra:{key}"));

    let client = redis::Client::open(redis_url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let paid_until: i64 = redis::cmd("GET")
        .arg(&redis_key)
        .query_async(&mut connection)
        .await
        .unwrap();
    let now_micros = i64::try_from(now.unix_timestamp_nanos() / 1_000).unwrap();
    assert_eq!(paid_until, now_micros + 10_000_000);
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&redis_key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 10_001, "PTTL of {redis_key} is {ttl}");
}

#[tokio::test]
async fn debug_hides_the_password() {
    let limiter = replica().await;
    let shown = format!("{limiter:?}");
    assert!(shown.starts_with("RedisRateLimiter"), "{shown}");
    if let Some(password) = url::Url::parse(&redis_url())
        .unwrap()
        .password()
        .filter(|p| !p.is_empty())
    {
        assert!(!shown.contains(password), "{shown}");
    }
}

/// One replica's failed-sign-in counter.
async fn sign_in_replica() -> std::sync::Arc<RedisSignInAttempts> {
    std::sync::Arc::new(
        RedisSignInAttempts::connect(&redis_url())
            .await
            .expect("cannot connect to Redis (see `replica` above)"),
    )
}

/// An account no other test or run uses.
fn unique_account() -> AccountKey {
    AccountKey::for_email(&format!("{}@example.com", uuid::Uuid::new_v4()))
}

async fn begin(
    store: &RedisSignInAttempts,
    account: &AccountKey,
    now: OffsetDateTime,
) -> CheckAdmission {
    store
        .begin_check(account, now, &LockoutRule::DEFAULT)
        .await
        .expect("the Redis counter failed")
}

async fn fail(store: &RedisSignInAttempts, account: &AccountKey, now: OffsetDateTime) {
    store
        .record_failure(account, now, &LockoutRule::DEFAULT)
        .await
        .expect("the Redis counter failed");
}

#[tokio::test]
async fn thirty_checks_at_once_on_two_replicas_admit_five_and_their_failures_lock() {
    let (a, b) = (sign_in_replica().await, sign_in_replica().await);
    let ada = unique_account();
    let now = now_ms(now());
    let tries: Vec<_> = (0..30)
        .map(|n| {
            let store = if n % 2 == 0 { a.clone() } else { b.clone() };
            let ada = ada.clone();
            tokio::spawn(async move { begin(&store, &ada, now).await })
        })
        .collect();
    let mut admitted = 0;
    for attempt in tries {
        match attempt.await.unwrap() {
            CheckAdmission::Admitted => admitted += 1,
            CheckAdmission::Refused(wait) => assert_eq!(wait, LockoutRule::BUSY_WAIT),
        }
    }
    assert_eq!(admitted, 5, "as many checks as may fail before the lockout");
    for n in 1..=5 {
        let store = if n % 2 == 0 { &a } else { &b };
        fail(store, &ada, now + Duration::seconds(n)).await;
    }
    assert_eq!(
        begin(&a, &ada, now + Duration::seconds(6)).await,
        CheckAdmission::Refused(Duration::seconds(59))
    );
    let seen = b
        .failed_sign_ins(&ada, now + Duration::seconds(6))
        .await
        .unwrap();
    assert_eq!(seen.failures, 5);
    assert_eq!(seen.locked_until, Some(now + Duration::seconds(65)));
}

#[tokio::test]
async fn a_failure_keeps_its_slot_and_a_check_without_a_verdict_gives_it_back_in_redis() {
    let store = sign_in_replica().await;
    let ada = unique_account();
    let now = now_ms(now());
    let at = |seconds| now + Duration::seconds(seconds);
    for n in 0..4 {
        fail(&store, &ada, at(n)).await;
    }
    let busy = CheckAdmission::Refused(LockoutRule::BUSY_WAIT);
    assert_eq!(begin(&store, &ada, at(5)).await, CheckAdmission::Admitted);
    assert_eq!(begin(&store, &ada, at(5)).await, busy);
    store.release(&ada).await.unwrap();
    assert_eq!(begin(&store, &ada, at(6)).await, CheckAdmission::Admitted);
    // A slot not given back lapses.
    assert_eq!(begin(&store, &ada, at(35)).await, busy);
    assert_eq!(begin(&store, &ada, at(36)).await, CheckAdmission::Admitted);
    // The fifth failure locks; the sixth, after the lockout, locks twice as long.
    fail(&store, &ada, at(37)).await;
    assert_eq!(
        begin(&store, &ada, at(38)).await,
        CheckAdmission::Refused(Duration::seconds(59))
    );
    assert_eq!(begin(&store, &ada, at(97)).await, CheckAdmission::Admitted);
    assert_eq!(begin(&store, &ada, at(97)).await, busy);
    fail(&store, &ada, at(98)).await;
    assert_eq!(
        begin(&store, &ada, at(98)).await,
        CheckAdmission::Refused(Duration::minutes(2))
    );
    // A right password ends the run and its slots.
    store.clear(&ada).await.unwrap();
    for _ in 0..5 {
        assert_eq!(begin(&store, &ada, at(99)).await, CheckAdmission::Admitted);
    }
    assert_eq!(begin(&store, &ada, at(99)).await, busy);
}

/// `at` to the millisecond, as the sign-in counter keeps moments.
fn now_ms(at: OffsetDateTime) -> OffsetDateTime {
    let millis = at.unix_timestamp_nanos() / 1_000_000;
    OffsetDateTime::from_unix_timestamp_nanos(millis * 1_000_000).unwrap()
}

/// How long `call` took.
async fn timed<T>(call: impl std::future::Future<Output = T>) -> (T, std::time::Duration) {
    let start = std::time::Instant::now();
    let answer = call.await;
    (answer, start.elapsed())
}

#[tokio::test]
async fn an_unreachable_redis_costs_one_slow_call_per_pause_not_every_call() {
    let relay = gatehouse_testkit::RedisRelay::start(&redis_url()).await;
    let limiter = RedisRateLimiter::connect(&relay.url).await.unwrap();
    let attempts = RedisSignInAttempts::connect(&relay.url).await.unwrap();
    let (key, ada) = (unique_key("outage"), unique_account());
    let now = now_ms(now());
    assert!(hit(&limiter, &key, Quota::spread(60), now).await.allowed);
    assert_eq!(begin(&attempts, &ada, now).await, CheckAdmission::Admitted);

    relay.silence();
    // The first call after the outage finds Redis gone and counts in process; the next ones,
    // within the pause, do not ask Redis at all (asked, a silent Redis would hold each of them
    // for its timeout, a second or more).
    hit(&limiter, &key, Quota::spread(60), now).await;
    begin(&attempts, &ada, now).await;
    assert!(gatehouse_ratelimit::REDIS_PAUSE >= std::time::Duration::from_secs(5));
    for n in 0..5 {
        let (decision, took) = timed(hit(&limiter, &key, Quota::spread(60), now)).await;
        assert_eq!(decision.limit, 60, "call {n}");
        assert!(
            took < std::time::Duration::from_millis(100),
            "call {n} took {took:?}"
        );
        let (_, took) = timed(async {
            begin(&attempts, &ada, now).await;
            fail(&attempts, &ada, now).await;
            attempts.clear(&ada).await.unwrap();
        })
        .await;
        assert!(
            took < std::time::Duration::from_millis(100),
            "sign-in {n} took {took:?}"
        );
    }
}
