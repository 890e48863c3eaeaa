//! Brute-force protection: failed sign-ins are counted per account, whatever the address they
//! come from, and a run of them locks the account out for a while.
//!
//! The rule ([`LockoutRule::DEFAULT`]): after 5 failed password checks for one account within
//! 15 minutes, the account is locked for 1 minute; every further failure of the same run locks
//! it again for twice as long as the last time (2, 4, 8, ... minutes), never longer than an hour.
//! A run ends 15 minutes after its last lockout ended (or, without one, 15 minutes after it
//! began), or with a correct password. While the account is locked, every attempt is refused
//! without checking the password, a correct one included, and is not counted.
//!
//! The count holds under concurrency (issue 49): a sign-in takes a *check slot* before its
//! password is checked ([`LockoutRule::admit`]), and only as many checks may be under way at
//! once as may still fail before the lockout (at least one): with four failures so far, one; with
//! none, five. A failure keeps its slot as a failure, a right password ends the run, a check
//! without a verdict gives its slot back. So thirty wrong passwords sent at once are five checks
//! and twenty-five refusals, on one replica or many, and the right password in the same burst is
//! checked only if it is one of the five. A slot not given back (a replica that stopped
//! mid-check) lapses [`LockoutRule::CHECK_SLOT_TTL`] after the latest slot was taken.

use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

/// The key an account's failed sign-ins are counted under: the SHA-256 of the email as typed,
/// trimmed and lowercased. An email that belongs to no account gets a key like any other, so
/// the answers never tell the two apart; and the counter store never sees an address.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AccountKey(String);

impl AccountKey {
    /// The key of the account an email (valid or not) names.
    pub fn for_email(email: &str) -> Self {
        let normalised = email.trim().to_lowercase();
        Self(hex::encode(Sha256::digest(normalised.as_bytes())))
    }

    /// The key as stored: 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A hash of an email is still a way to recognise one: not for logs.
        f.write_str("AccountKey(<redacted>)")
    }
}

/// Whether a sign-in may check the password it was given (see [`LockoutRule::admit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckAdmission {
    /// A check slot is taken: check the password, then count the failure (the slot is kept as
    /// one), end the run (a right password) or give the slot back (no verdict).
    Admitted,
    /// Not checked, a right password neither: the account is locked, or every check it may
    /// have under way is. Try again after this long.
    Refused(Duration),
}

/// One account's run of failed sign-ins as the counter store keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailedSignIns {
    /// Failures in the current run (0: no run).
    pub failures: u32,
    /// When the lockout in force ends; `None` when the account is not locked.
    pub locked_until: Option<OffsetDateTime>,
}

impl FailedSignIns {
    /// How long until the account may try again, while it is locked at `now`.
    pub fn retry_after(&self, now: OffsetDateTime) -> Option<Duration> {
        self.locked_until
            .filter(|until| *until > now)
            .map(|until| until - now)
    }
}

/// How many failures lock an account, for how long, and for how long a run is remembered.
///
/// Its fields are private: [`LockoutRule::DEFAULT`] is the one Gatehouse uses, and
/// [`LockoutRule::new`] refuses a rule that would lock before any failure or for no time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockoutRule {
    /// The failure that first locks the account (the 5th); at least 1.
    threshold: u32,
    /// How long a run lasts without a lockout, and how long it outlives its last lockout.
    window: Duration,
    /// The first lockout; positive.
    first: Duration,
    /// The longest lockout; at least `first`.
    longest: Duration,
}

/// A lockout rule that cannot hold: a threshold of 0, a duration that is not positive, or a
/// longest lockout shorter than the first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a lockout rule needs a threshold of at least 1, positive durations, and longest >= first")]
pub struct InvalidLockoutRule;

impl LockoutRule {
    /// How long the check slots taken for an account outlive the latest one taken, should they
    /// not be given back (a replica stopped mid-check): longer than any password check takes.
    pub const CHECK_SLOT_TTL: Duration = Duration::seconds(30);

    /// How long a sign-in refused because every check slot is taken is told to wait: the checks
    /// under way are over in about that time.
    pub const BUSY_WAIT: Duration = Duration::seconds(1);

    /// 5 failures within 15 minutes; 1 minute, doubling, at most an hour.
    pub const DEFAULT: Self = Self {
        threshold: 5,
        window: Duration::minutes(15),
        first: Duration::minutes(1),
        longest: Duration::hours(1),
    };

    /// A rule: the `threshold`th failure within `window` locks for `first`, each further one
    /// doubles it up to `longest`.
    pub fn new(
        threshold: u32,
        window: Duration,
        first: Duration,
        longest: Duration,
    ) -> Result<Self, InvalidLockoutRule> {
        let positive = |d: Duration| d.is_positive();
        (threshold >= 1 && positive(window) && positive(first) && longest >= first)
            .then_some(Self {
                threshold,
                window,
                first,
                longest,
            })
            .ok_or(InvalidLockoutRule)
    }

    /// The failure that first locks the account.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// How long a run lasts without a lockout, and how long it outlives its last lockout.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// The lockout that the `failures`th failure of a run earns: none below the threshold,
    /// then the first lockout, doubled by each failure after it, at most the longest.
    pub fn lockout_after(&self, failures: u32) -> Option<Duration> {
        let beyond = failures.checked_sub(self.threshold)?;
        let doubled = (0..beyond).try_fold(self.first, |lockout, _| {
            (lockout < self.longest).then(|| lockout * 2)
        });
        Some(doubled.unwrap_or(self.longest).min(self.longest))
    }

    /// How many password checks may be under way at once for a run of `failures` failures that
    /// is not locked: as many as may still fail before the lockout (so that, should they all
    /// fail, the lockout comes with the last of them), and at least one (after a lockout has
    /// ended, the run goes on one check at a time).
    pub fn checks_at_once(&self, failures: u32) -> u32 {
        self.threshold.saturating_sub(failures).max(1)
    }

    /// Whether a sign-in may check a password at `now`, for an account whose run stands at
    /// `run` with `checks` checks under way: refused while it is locked (for what is left of the
    /// lockout) or while [`Self::checks_at_once`] are under way (for [`Self::BUSY_WAIT`]). The
    /// counter stores take the slot in the same atomic step.
    pub fn admit(&self, run: &FailedSignIns, checks: u32, now: OffsetDateTime) -> CheckAdmission {
        if let Some(wait) = run.retry_after(now) {
            CheckAdmission::Refused(wait)
        } else if checks >= self.checks_at_once(run.failures) {
            CheckAdmission::Refused(Self::BUSY_WAIT)
        } else {
            CheckAdmission::Admitted
        }
    }

    /// When a run that began at `started` is forgotten: `window` after its latest lockout
    /// ends (`locked_until`), or `window` after it began when it locked nothing.
    pub fn run_ends(
        &self,
        started: OffsetDateTime,
        locked_until: Option<OffsetDateTime>,
    ) -> OffsetDateTime {
        match locked_until {
            Some(until) => until + self.window,
            None => started + self.window,
        }
    }
}

impl Default for LockoutRule {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_that_would_lock_before_any_failure_or_for_no_time_is_refused() {
        let (m1, h1) = (Duration::minutes(1), Duration::hours(1));
        assert_eq!(
            LockoutRule::new(5, Duration::minutes(15), m1, h1),
            Ok(LockoutRule::DEFAULT)
        );
        assert_eq!(LockoutRule::new(0, m1, m1, h1), Err(InvalidLockoutRule));
        assert_eq!(
            LockoutRule::new(5, Duration::ZERO, m1, h1),
            Err(InvalidLockoutRule)
        );
        assert_eq!(LockoutRule::new(5, m1, -m1, h1), Err(InvalidLockoutRule));
        assert_eq!(LockoutRule::new(5, m1, h1, m1), Err(InvalidLockoutRule));
    }

    #[test]
    fn the_fifth_failure_locks_for_a_minute_and_each_further_one_doubles_it_up_to_an_hour() {
        let rule = LockoutRule::DEFAULT;
        let minutes = |n| Some(Duration::minutes(n));
        assert_eq!(rule.lockout_after(0), None);
        assert_eq!(rule.lockout_after(4), None);
        assert_eq!(rule.lockout_after(5), minutes(1));
        assert_eq!(rule.lockout_after(6), minutes(2));
        assert_eq!(rule.lockout_after(7), minutes(4));
        assert_eq!(rule.lockout_after(8), minutes(8));
        assert_eq!(rule.lockout_after(9), minutes(16));
        assert_eq!(rule.lockout_after(10), minutes(32));
        assert_eq!(rule.lockout_after(11), minutes(60));
        assert_eq!(rule.lockout_after(12), minutes(60));
        assert_eq!(rule.lockout_after(u32::MAX), minutes(60));
    }

    #[test]
    fn a_run_is_remembered_for_the_window_after_its_lockout() {
        let rule = LockoutRule::DEFAULT;
        let start = OffsetDateTime::UNIX_EPOCH;
        assert_eq!(rule.run_ends(start, None), start + Duration::minutes(15));
        let until = start + Duration::minutes(3);
        assert_eq!(
            rule.run_ends(start, Some(until)),
            until + Duration::minutes(15)
        );
    }

    #[test]
    fn account_keys_ignore_case_and_spaces_and_hide_the_email() {
        let key = AccountKey::for_email(" Ada@Example.com ");
        assert_eq!(key, AccountKey::for_email("ada@example.com"));
        assert_ne!(key, AccountKey::for_email("bob@example.com"));
        assert_eq!(key.as_str().len(), 64);
        assert!(!format!("{key:?}").contains("ada"));
        // Not an email at all: still a key, like any other.
        assert_eq!(AccountKey::for_email("not an email").as_str().len(), 64);
    }

    #[test]
    fn retry_after_counts_down_to_the_end_of_the_lockout() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let locked = FailedSignIns {
            failures: 5,
            locked_until: Some(now + Duration::seconds(60)),
        };
        assert_eq!(locked.retry_after(now), Some(Duration::seconds(60)));
        assert_eq!(locked.retry_after(now + Duration::seconds(60)), None);
        assert_eq!(FailedSignIns::default().retry_after(now), None);
    }

    #[test]
    fn only_as_many_checks_at_once_as_may_fail_before_the_lockout() {
        let rule = LockoutRule::DEFAULT;
        assert_eq!(rule.checks_at_once(0), 5);
        assert_eq!(rule.checks_at_once(3), 2);
        assert_eq!(rule.checks_at_once(4), 1);
        // A lockout that has ended: the run goes on, one check at a time.
        assert_eq!(rule.checks_at_once(5), 1);
        assert_eq!(rule.checks_at_once(u32::MAX), 1);

        let now = OffsetDateTime::UNIX_EPOCH;
        let busy = CheckAdmission::Refused(LockoutRule::BUSY_WAIT);
        // (failures so far, checks under way, the answer)
        for (failures, under_way, admission) in [
            (0, 4, CheckAdmission::Admitted),
            (0, 5, busy),
            (3, 1, CheckAdmission::Admitted),
            (3, 2, busy),
        ] {
            let record = FailedSignIns {
                failures,
                locked_until: None,
            };
            assert_eq!(rule.admit(&record, under_way, now), admission);
        }
        // Locked: refused for what is left of it, however few checks are under way.
        let locked = FailedSignIns {
            failures: 5,
            locked_until: Some(now + Duration::seconds(40)),
        };
        assert_eq!(
            rule.admit(&locked, 0, now),
            CheckAdmission::Refused(Duration::seconds(40))
        );
        assert_eq!(
            rule.admit(&locked, 0, now + Duration::seconds(40)),
            CheckAdmission::Admitted
        );
        assert_eq!(
            rule.admit(&locked, 1, now + Duration::seconds(40)),
            CheckAdmission::Refused(LockoutRule::BUSY_WAIT)
        );
    }
}
