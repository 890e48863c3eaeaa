//! The Redis rate limiter against a real Redis server: one budget shared by replicas, fresh
//! windows, and counters that expire.
//!
//! Needs Redis at `redis://127.0.0.1:6379`, or wherever `GATEHOUSE_TEST_REDIS_URL` points.
//! These tests fail, rather than skip, when it cannot be reached.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gatehouse_domain::ports::{RateDecision, RateLimiter};
use gatehouse_ratelimit::RedisRateLimiter;
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

/// A moment in the middle of the current minute, so that a test never straddles two windows.
fn mid_minute() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc().unix_timestamp();
    OffsetDateTime::from_unix_timestamp(now - now.rem_euclid(60) + 30).unwrap()
}

async fn hit(
    limiter: &RedisRateLimiter,
    key: &str,
    limit: u32,
    now: OffsetDateTime,
) -> RateDecision {
    limiter
        .hit(key, limit, now)
        .await
        .expect("the Redis limiter failed")
}

#[tokio::test]
async fn replicas_share_one_budget() {
    let (a, b) = (replica().await, replica().await);
    let key = unique_key("shared");
    let now = mid_minute();

    let mut decisions = Vec::new();
    for _ in 0..3 {
        decisions.push(hit(&a, &key, 5, now).await);
    }
    for _ in 0..3 {
        decisions.push(hit(&b, &key, 5, now).await);
    }

    let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed).collect();
    assert_eq!(allowed, [true, true, true, true, true, false]);
    let remaining: Vec<u32> = decisions.iter().map(|d| d.remaining).collect();
    assert_eq!(remaining, [4, 3, 2, 1, 0, 0]);
    let reset_at = now + Duration::seconds(30);
    assert!(decisions
        .iter()
        .all(|d| d.limit == 5 && d.reset_at == reset_at));

    // Still refused on either replica.
    assert!(!hit(&a, &key, 5, now).await.allowed);
}

#[tokio::test]
async fn the_next_window_starts_fresh() {
    let limiter = replica().await;
    let key = unique_key("window");
    let now = mid_minute();

    for _ in 0..3 {
        hit(&limiter, &key, 2, now).await;
    }
    assert!(!hit(&limiter, &key, 2, now).await.allowed);

    let later = now + Duration::minutes(1);
    let fresh = hit(&limiter, &key, 2, later).await;
    assert!(fresh.allowed);
    assert_eq!(fresh.remaining, 1);
    assert_eq!(fresh.reset_at, later + Duration::seconds(30));

    // The refused hits of the earlier window still count there, and only there.
    assert!(!hit(&limiter, &key, 2, now).await.allowed);
}

#[tokio::test]
async fn keys_are_counted_apart() {
    let limiter = replica().await;
    let (first, second) = (unique_key("first"), unique_key("second"));
    let now = mid_minute();

    assert!(hit(&limiter, &first, 1, now).await.allowed);
    assert!(!hit(&limiter, &first, 1, now).await.allowed);
    assert!(hit(&limiter, &second, 1, now).await.allowed);
}

#[tokio::test]
async fn counters_expire() {
    let limiter = replica().await;
    let key = unique_key("ttl");
    let now = mid_minute();
    hit(&limiter, &key, 10, now).await;

    let window_start = now.unix_timestamp() - 30;
    let redis_key = RedisRateLimiter::redis_key(&key, window_start);
    assert_eq!(redis_key, format!("gatehouse:rl:{key}:{window_start}"));

    let client = redis::Client::open(redis_url()).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let count: i64 = redis::cmd("GET")
        .arg(&redis_key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert_eq!(count, 1);
    let ttl: i64 = redis::cmd("TTL")
        .arg(&redis_key)
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 120, "TTL of {redis_key} is {ttl}");
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
