use gatehouse_domain::ports::Clock;
use time::OffsetDateTime;

/// The system's wall clock, to the microsecond: what both databases store, so a time read
/// back equals the time written.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        to_microseconds(OffsetDateTime::now_utc())
    }
}

/// `at` without its nanoseconds beyond the microsecond.
fn to_microseconds(at: OffsetDateTime) -> OffsetDateTime {
    at.replace_nanosecond(at.nanosecond() / 1_000 * 1_000)
        .unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_time() {
        let before = to_microseconds(OffsetDateTime::now_utc());
        let now = SystemClock.now();
        assert!(now >= before && now <= OffsetDateTime::now_utc());
        assert_eq!(now.nanosecond() % 1_000, 0);
    }
}
