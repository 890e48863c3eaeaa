use chrono::{DateTime, SubsecRound, Utc};
use gatehouse_domain::ports::Clock;

/// The system's wall clock, to the microsecond: what both databases store, so a time read
/// back equals the time written.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_time() {
        let before = Utc::now().trunc_subsecs(6);
        let now = SystemClock.now();
        assert!(now >= before && now <= Utc::now());
    }
}
