use std::str::FromStr;

use time::OffsetDateTime;

use super::Plan;
use crate::ports::RateDecision;

/// Requests per minute for each plan (`GATEHOUSE_RATE_LIMITS`,
/// `free=60,starter=120,pro=300,business=1000,enterprise=5000` by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimits([u32; 5]);

impl RateLimits {
    /// The requests per minute allowed on `plan`; always at least 1.
    pub fn per_minute(&self, plan: Plan) -> u32 {
        self.0[plan as usize]
    }
}

impl Default for RateLimits {
    fn default() -> Self {
        Self([60, 120, 300, 1000, 5000])
    }
}

impl FromStr for RateLimits {
    type Err = String;

    /// `plan=n` pairs separated by commas; plans not named keep their default.
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let mut limits = Self::default();
        for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (plan, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("{pair:?} is not plan=requests"))?;
            let plan: Plan = plan.trim().parse().map_err(|e| format!("{plan:?}: {e}"))?;
            let value: u32 = value
                .trim()
                .parse()
                .ok()
                .filter(|v| *v > 0)
                .ok_or_else(|| format!("{value:?} is not a positive number of requests"))?;
            limits.0[plan as usize] = value;
        }
        Ok(limits)
    }
}

/// How many requests one key may make: `per_minute` on average, at most `burst` at once.
///
/// Counted by the generic cell rate algorithm (GCRA): each key keeps one moment, its
/// *theoretical arrival time* (when the requests it made so far are paid off, one every
/// `60 s / per_minute`). A request is admitted when, once paid for, that moment is at most
/// `burst` intervals ahead of now; a refused request changes nothing. So a quiet key may send
/// `burst` requests at once, then one per interval; over any minute, at most
/// `per_minute + burst - 1` get through, and never more than `burst` in one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    per_minute: u32,
    burst: u32,
}

/// What one request did to a key's count (see [`Quota::admit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    /// Whether the request is admitted.
    pub allowed: bool,
    /// The key's theoretical arrival time after it, in Unix microseconds: paid off until then
    /// (for a refused request, the time as it stands, never before now).
    pub paid_until: i64,
}

/// Microseconds in a minute.
const MINUTE_MICROS: i64 = 60_000_000;

impl Quota {
    /// A plan's budget: `per_minute` requests a minute, at most a sixth of them at once (at
    /// least one), so that a minute's budget cannot land in one second.
    pub fn spread(per_minute: u32) -> Self {
        Self::new(per_minute, per_minute / 6)
    }

    /// `per_minute` requests a minute, at most `burst` at once (at least one; at most the
    /// minute's budget).
    pub fn new(per_minute: u32, burst: u32) -> Self {
        Self {
            per_minute,
            burst: burst.clamp(1, per_minute.max(1)),
        }
    }

    /// The requests allowed a minute: `X-RateLimit-Limit`.
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// The requests allowed at once.
    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// The time one request costs, in microseconds (`60 s / per_minute`, at least 1 µs); a
    /// budget of 0 costs a whole minute per request more than the burst allows: nothing passes.
    pub fn interval_micros(&self) -> i64 {
        match self.per_minute {
            0 => MINUTE_MICROS,
            n => (MINUTE_MICROS / i64::from(n)).max(1),
        }
    }

    /// How far ahead of now a key may be paid and still be admitted, in microseconds:
    /// `burst` intervals (none when the budget is 0).
    pub fn tolerance_micros(&self) -> i64 {
        match self.per_minute {
            0 => 0,
            _ => self.interval_micros().saturating_mul(i64::from(self.burst)),
        }
    }

    /// One request at `now` (Unix microseconds) against a key paid until `paid_until` (`None`:
    /// a key never seen, or paid off long ago). The Redis adapter runs the same steps in Lua.
    pub fn admit(&self, paid_until: Option<i64>, now: i64) -> Admission {
        let from = paid_until.map_or(now, |at| at.max(now));
        let after = from.saturating_add(self.interval_micros());
        if after - now <= self.tolerance_micros() {
            Admission {
                allowed: true,
                paid_until: after,
            }
        } else {
            Admission {
                allowed: false,
                paid_until: from,
            }
        }
    }

    /// The answer to a request: `remaining` is how many more requests would be admitted at
    /// `now`; `reset_at` is, for an admitted request, when the key is paid off (the whole burst
    /// is available again), and for a refused one, when the next request will be admitted.
    /// Both moments are rounded up to the whole second, as the headers give them.
    pub fn decision(&self, admission: Admission, now: OffsetDateTime) -> RateDecision {
        let now_micros = unix_micros(now);
        let interval = self.interval_micros();
        let (remaining, reset_micros) = if admission.allowed {
            let slack = self.tolerance_micros() - (admission.paid_until - now_micros);
            let remaining = u32::try_from((slack / interval).max(0)).unwrap_or(u32::MAX);
            (remaining, admission.paid_until)
        } else {
            let next = admission.paid_until + interval - self.tolerance_micros();
            (0, next.max(now_micros))
        };
        RateDecision {
            allowed: admission.allowed,
            limit: self.per_minute,
            remaining: remaining.min(self.burst),
            reset_at: whole_second_after(reset_micros).unwrap_or(now),
        }
    }
}

/// `at` in Unix microseconds.
pub fn unix_micros(at: OffsetDateTime) -> i64 {
    i64::try_from(at.unix_timestamp_nanos() / 1_000).unwrap_or(i64::MAX)
}

/// The first whole second at or after `micros` Unix microseconds.
fn whole_second_after(micros: i64) -> Option<OffsetDateTime> {
    let seconds = micros.div_euclid(1_000_000) + i64::from(micros.rem_euclid(1_000_000) > 0);
    OffsetDateTime::from_unix_timestamp(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pairs_and_keeps_defaults() {
        let limits: RateLimits = "free=10, pro=20".parse().unwrap();
        assert_eq!(limits.per_minute(Plan::Free), 10);
        assert_eq!(limits.per_minute(Plan::Pro), 20);
        assert_eq!(limits.per_minute(Plan::Enterprise), 5000);
        assert_eq!(
            "free".parse::<RateLimits>(),
            Err(r#""free" is not plan=requests"#.to_owned())
        );
        assert_eq!(
            "gold=5".parse::<RateLimits>(),
            Err(r#""gold": must be one of: free, starter, pro, business, enterprise"#.to_owned())
        );
        assert_eq!(
            "free=0".parse::<RateLimits>(),
            Err(r#""0" is not a positive number of requests"#.to_owned())
        );
    }

    const T0: i64 = 1_740_830_430_000_000;

    fn at(micros: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1_000).unwrap()
    }

    /// Requests at the given moments against one key: which were admitted.
    fn run(quota: Quota, moments: impl IntoIterator<Item = i64>) -> Vec<RateDecision> {
        let mut paid_until = None;
        moments
            .into_iter()
            .map(|now| {
                let admission = quota.admit(paid_until, now);
                if admission.allowed {
                    paid_until = Some(admission.paid_until);
                }
                quota.decision(admission, at(now))
            })
            .collect()
    }

    #[test]
    fn a_plans_burst_is_a_sixth_of_its_minute_and_at_least_one() {
        assert_eq!(Quota::spread(60).burst(), 10);
        assert_eq!(Quota::spread(1000).burst(), 166);
        assert_eq!(Quota::spread(11).burst(), 1);
        assert_eq!(Quota::spread(1).burst(), 1);
        assert_eq!(Quota::new(3, 3).burst(), 3);
        assert_eq!(Quota::new(3, 9).burst(), 3);
    }

    #[test]
    fn a_whole_minute_sent_at_once_gets_a_sixth_through() {
        let decisions = run(Quota::spread(60), (0..60).map(|_| T0));
        let admitted = decisions.iter().filter(|d| d.allowed).count();
        assert_eq!(admitted, 10);
        let remaining: Vec<u32> = decisions.iter().take(11).map(|d| d.remaining).collect();
        assert_eq!(remaining, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
        assert!(decisions.iter().all(|d| d.limit == 60));
        // The tenth is paid off ten seconds on; the first refused may come back in a second.
        assert_eq!(decisions[9].reset_at, at(T0 + 10_000_000));
        assert_eq!(decisions[10].reset_at, at(T0 + 1_000_000));
    }

    #[test]
    fn a_minute_spread_evenly_gets_through_whole() {
        let decisions = run(Quota::spread(60), (0..60).map(|n| T0 + n * 1_000_000));
        assert!(decisions.iter().all(|d| d.allowed));
        // Paying as it goes, the key keeps nine in hand.
        assert!(decisions.iter().all(|d| d.remaining == 9));
        // A little faster than the budget, and the burst is eaten into, then refused.
        let decisions = run(Quota::spread(60), (0..60).map(|n| T0 + n * 800_000));
        let refused = decisions.iter().position(|d| !d.allowed);
        assert_eq!(refused, Some(46), "after {refused:?}");
    }

    #[test]
    fn no_more_than_the_budget_and_the_burst_in_any_minute() {
        // Everything sent, one request each 100 ms, for three minutes.
        let decisions = run(Quota::spread(60), (0..1800).map(|n| T0 + n * 100_000));
        // The budget, and the burst less the request that opens the minute.
        let most = 60 + (10 - 1);
        for start in 0..1200 {
            let in_minute = decisions[start..start + 600]
                .iter()
                .filter(|d| d.allowed)
                .count();
            assert!(in_minute <= most, "{in_minute} from {start}");
        }
    }

    #[test]
    fn a_refused_request_costs_nothing_and_says_when_to_come_back() {
        let quota = Quota::spread(6);
        let decisions = run(quota, [T0, T0 + 1, T0 + 9_999_999, T0 + 10_000_000]);
        let allowed: Vec<bool> = decisions.iter().map(|d| d.allowed).collect();
        assert_eq!(allowed, [true, false, false, true]);
        assert_eq!(decisions[1].reset_at, at(T0 + 10_000_000));
        assert_eq!(decisions[1].remaining, 0);
    }

    #[test]
    fn moments_round_up_to_the_whole_second() {
        let decisions = run(Quota::spread(60), [T0 + 200_000]);
        assert_eq!(decisions[0].reset_at, at(T0 + 2_000_000));
    }

    #[test]
    fn a_budget_of_zero_refuses_everything() {
        let decisions = run(Quota::spread(0), [T0, T0 + 60_000_000]);
        assert!(decisions.iter().all(|d| !d.allowed && d.remaining == 0));
    }
}
