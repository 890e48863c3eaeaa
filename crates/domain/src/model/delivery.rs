//! The delivery state machine, and the rule that turns an endpoint off after a run of failures.
//!
//! A delivery is one event sent to one endpoint. It is created pending (attempt 1 due at once),
//! and only its transitions change it:
//!
//! ```text
//!             new(at)
//!                │
//!                ▼        attempted: 2xx
//!   ┌──────► Pending ────────────────────► Succeeded
//!   │            │                              │
//!   │            │ attempted: anything else     │
//!   │            ▼                              │
//!   │         Failed ──── retry due: attempted ─┘ (or Failed again; the last one has no retry)
//!   │            │
//!   └────────────┴── retried (manual, from Failed or Succeeded) : Pending, next attempt, due now
//! ```
//!
//! A test ping is made by [`DeliveryState::sent_once`]: it starts where its one attempt left it,
//! `Succeeded` or `Failed` with no retry due, and is never retried automatically.
//!
//! The store keeps a state as three columns (`status`, `attempt`, `next_attempt_at`), reads it
//! back with [`DeliveryState::restore`] and writes what a transition returned; it decides
//! nothing itself.

use time::OffsetDateTime;

use super::{DeliveryStatus, RetrySchedule};

/// Where one delivery stands. Its fields are private: a state comes from [`Self::new`], from a
/// transition, or from [`Self::restore`], which refuses combinations no transition makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryState(State);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Attempt `attempt` is due at `due_at`: the first one, or one a manual retry queued.
    Pending {
        attempt: u32,
        due_at: OffsetDateTime,
    },
    /// Attempt `attempt` failed; attempt `attempt + 1` is due at `retry_at`, or never after the
    /// last automatic attempt.
    Failed {
        attempt: u32,
        retry_at: Option<OffsetDateTime>,
    },
    /// Attempt `attempt` was answered with a 2xx.
    Succeeded { attempt: u32 },
}

/// A stored delivery state that no transition can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a {status} delivery cannot be at attempt {attempt} with next attempt {next:?}")]
pub struct InvalidDeliveryState {
    /// The stored status.
    pub status: &'static str,
    /// The stored attempt number.
    pub attempt: u32,
    /// The stored due time.
    pub next: Option<OffsetDateTime>,
}

/// Why a transition was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// An attempt was recorded for a delivery with no attempt due (it succeeded, or failed for
    /// the last time).
    #[error("no attempt of this delivery is due")]
    NothingDue,
    /// A manual retry of a delivery whose next attempt is already queued.
    #[error("the delivery is already pending")]
    AlreadyPending,
    /// A manual retry of a delivery that succeeded: only a failed delivery is retried.
    #[error("the delivery succeeded")]
    AlreadySucceeded,
}

impl DeliveryState {
    /// A new delivery: attempt 1, due at `at`.
    pub fn new(at: OffsetDateTime) -> Self {
        Self(State::Pending {
            attempt: 1,
            due_at: at,
        })
    }

    /// A delivery sent once, at once, and never retried automatically (a test ping): its one
    /// attempt succeeded (a 2xx) or failed with no retry due.
    pub fn sent_once(succeeded: bool) -> Self {
        Self(if succeeded {
            State::Succeeded { attempt: 1 }
        } else {
            State::Failed {
                attempt: 1,
                retry_at: None,
            }
        })
    }

    /// A state as the store keeps it. Refuses attempt 0, a pending delivery with no due time
    /// and a successful one with a next attempt.
    pub fn restore(
        status: DeliveryStatus,
        attempt: u32,
        next_attempt_at: Option<OffsetDateTime>,
    ) -> Result<Self, InvalidDeliveryState> {
        let state = match (status, next_attempt_at) {
            _ if attempt == 0 => None,
            (DeliveryStatus::Pending, Some(due_at)) => Some(State::Pending { attempt, due_at }),
            (DeliveryStatus::Failed, retry_at) => Some(State::Failed { attempt, retry_at }),
            (DeliveryStatus::Success, None) => Some(State::Succeeded { attempt }),
            (DeliveryStatus::Pending, None) | (DeliveryStatus::Success, Some(_)) => None,
        };
        state.map(Self).ok_or(InvalidDeliveryState {
            status: status.as_str(),
            attempt,
            next: next_attempt_at,
        })
    }

    /// The status the API shows: `pending`, `failed` or `success`.
    pub fn status(&self) -> DeliveryStatus {
        match self.0 {
            State::Pending { .. } => DeliveryStatus::Pending,
            State::Failed { .. } => DeliveryStatus::Failed,
            State::Succeeded { .. } => DeliveryStatus::Success,
        }
    }

    /// The attempt the status is about: the one due while pending, else the last one made.
    pub fn attempt(&self) -> u32 {
        match self.0 {
            State::Pending { attempt, .. }
            | State::Failed { attempt, .. }
            | State::Succeeded { attempt } => attempt,
        }
    }

    /// When the next attempt is due, if one is: what the store indexes to lease due deliveries.
    pub fn next_attempt_at(&self) -> Option<OffsetDateTime> {
        match self.0 {
            State::Pending { due_at, .. } => Some(due_at),
            State::Failed { retry_at, .. } => retry_at,
            State::Succeeded { .. } => None,
        }
    }

    /// When a failed delivery is retried automatically: the API's `next_retry_at` (`None` for a
    /// pending delivery, which is due now, and after the last attempt).
    pub fn next_retry_at(&self) -> Option<OffsetDateTime> {
        match self.0 {
            State::Failed { retry_at, .. } => retry_at,
            State::Pending { .. } | State::Succeeded { .. } => None,
        }
    }

    /// The number of the attempt to make next, if one is due at some time.
    pub fn attempt_due(&self) -> Option<u32> {
        match self.0 {
            State::Pending { attempt, .. } => Some(attempt),
            State::Failed {
                attempt,
                retry_at: Some(_),
            } => Some(attempt.saturating_add(1)),
            State::Failed { retry_at: None, .. } | State::Succeeded { .. } => None,
        }
    }

    /// The state after the due attempt, answered (`succeeded`: a 2xx) or not at `at`: a failure
    /// schedules the next attempt by `schedule`, or none after the last.
    pub fn attempted(
        &self,
        succeeded: bool,
        at: OffsetDateTime,
        schedule: &RetrySchedule,
    ) -> Result<Self, TransitionError> {
        let attempt = self.attempt_due().ok_or(TransitionError::NothingDue)?;
        Ok(Self(if succeeded {
            State::Succeeded { attempt }
        } else {
            State::Failed {
                attempt,
                retry_at: schedule.next_after(attempt, at),
            }
        }))
    }

    /// A manual retry at `at`: one more attempt, due at once. Only a failed delivery is
    /// retried (the spec: "for a failed delivery"); one waiting for its automatic retry is
    /// retried now instead. Refused while an attempt is pending, and for a delivery that
    /// succeeded.
    pub fn retried(&self, at: OffsetDateTime) -> Result<Self, TransitionError> {
        match self.0 {
            State::Pending { .. } => Err(TransitionError::AlreadyPending),
            State::Succeeded { .. } => Err(TransitionError::AlreadySucceeded),
            State::Failed { attempt, .. } => Ok(Self(State::Pending {
                attempt: attempt.saturating_add(1),
                due_at: at,
            })),
        }
    }
}

/// An endpoint's run of consecutive failed attempts, and the rule that ends it: a success
/// resets the run; the failure that makes it `disable_after` long turns the endpoint off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailureRun {
    failures: u32,
}

impl FailureRun {
    /// A run of `failures` consecutive failures, as stored.
    pub fn of(failures: u32) -> Self {
        Self { failures }
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The run after one more attempt.
    pub fn after(self, succeeded: bool) -> Self {
        Self {
            failures: if succeeded {
                0
            } else {
                self.failures.saturating_add(1)
            },
        }
    }

    /// Whether an endpoint with this run is turned off: it has reached `disable_after`
    /// failures in a row.
    pub fn disables(&self, disable_after: u32) -> bool {
        self.failures >= disable_after
    }
}

#[cfg(test)]
mod tests {
    use time::{macros::datetime, Duration};

    use super::*;

    fn t0() -> OffsetDateTime {
        datetime!(2026-11-25 10:00 UTC)
    }

    /// `60s, 5m, 30m, 2h`: five attempts.
    fn schedule() -> RetrySchedule {
        RetrySchedule::default()
    }

    #[test]
    fn a_new_delivery_is_pending_attempt_one_due_at_once() {
        let state = DeliveryState::new(t0());
        assert_eq!(state.status(), DeliveryStatus::Pending);
        assert_eq!(state.attempt(), 1);
        assert_eq!(state.next_attempt_at(), Some(t0()));
        assert_eq!(state.next_retry_at(), None);
        assert_eq!(state.attempt_due(), Some(1));
    }

    #[test]
    fn a_2xx_succeeds_and_nothing_more_is_due() {
        let done = DeliveryState::new(t0())
            .attempted(true, t0(), &schedule())
            .unwrap();
        assert_eq!(done.status(), DeliveryStatus::Success);
        assert_eq!(done.attempt(), 1);
        assert_eq!(done.next_attempt_at(), None);
        assert_eq!(
            done.attempted(true, t0(), &schedule()),
            Err(TransitionError::NothingDue)
        );
    }

    #[test]
    fn failures_follow_the_schedule_until_the_last_attempt() {
        let schedule = schedule();
        let first = DeliveryState::new(t0())
            .attempted(false, t0(), &schedule)
            .unwrap();
        assert_eq!(first.status(), DeliveryStatus::Failed);
        assert_eq!(first.next_retry_at(), Some(t0() + Duration::seconds(60)));
        assert_eq!(first.attempt_due(), Some(2));
        let mut state = first;
        let mut at = t0();
        while let Some(attempt) = state.attempt_due() {
            at = state.next_attempt_at().unwrap();
            state = state.attempted(false, at, &schedule).unwrap();
            assert_eq!(state.attempt(), attempt);
        }
        assert_eq!(state.attempt(), RetrySchedule::MAX_ATTEMPTS);
        assert_eq!(state.next_attempt_at(), None);
        assert_eq!(
            state.attempted(false, at, &schedule),
            Err(TransitionError::NothingDue)
        );
    }

    #[test]
    fn a_manual_retry_queues_one_more_attempt_of_a_failed_delivery_only() {
        let failed = DeliveryState::new(t0())
            .attempted(false, t0(), &schedule())
            .unwrap();
        let later = t0() + Duration::seconds(5);
        let queued = failed.retried(later).unwrap();
        assert_eq!(queued.status(), DeliveryStatus::Pending);
        assert_eq!(queued.attempt(), 2);
        assert_eq!(queued.next_attempt_at(), Some(later));
        assert_eq!(queued.retried(later), Err(TransitionError::AlreadyPending));

        let succeeded = queued.attempted(true, later, &schedule()).unwrap();
        assert_eq!(
            succeeded.retried(later),
            Err(TransitionError::AlreadySucceeded)
        );
        assert_eq!(
            DeliveryState::sent_once(true).retried(later),
            Err(TransitionError::AlreadySucceeded)
        );
    }

    #[test]
    fn a_delivery_sent_once_has_nothing_more_due_whatever_came_of_it() {
        let delivered = DeliveryState::sent_once(true);
        assert_eq!(delivered.status(), DeliveryStatus::Success);
        assert_eq!(delivered.attempt(), 1);
        let failed = DeliveryState::sent_once(false);
        assert_eq!(failed.status(), DeliveryStatus::Failed);
        assert_eq!(failed.attempt(), 1);
        for state in [delivered, failed] {
            assert_eq!(state.attempt_due(), None);
            assert_eq!(state.next_attempt_at(), None);
            assert_eq!(state.next_retry_at(), None);
        }
    }

    #[test]
    fn restore_accepts_what_transitions_make_and_nothing_else() {
        let states = [
            DeliveryState::new(t0()),
            DeliveryState::sent_once(false),
            DeliveryState::new(t0())
                .attempted(false, t0(), &schedule())
                .unwrap(),
            DeliveryState::new(t0())
                .attempted(true, t0(), &schedule())
                .unwrap(),
        ];
        for state in states {
            let stored = (state.status(), state.attempt(), state.next_attempt_at());
            assert_eq!(
                DeliveryState::restore(stored.0, stored.1, stored.2),
                Ok(state)
            );
        }
        assert!(DeliveryState::restore(DeliveryStatus::Pending, 1, None).is_err());
        assert!(DeliveryState::restore(DeliveryStatus::Success, 1, Some(t0())).is_err());
        assert!(DeliveryState::restore(DeliveryStatus::Failed, 0, None).is_err());
    }

    #[test]
    fn the_failure_that_completes_the_run_disables_and_a_success_resets_it() {
        let mut run = FailureRun::of(0);
        for _ in 0..4 {
            run = run.after(false);
            assert!(!run.disables(5));
        }
        assert!(run.after(false).disables(5));
        assert_eq!(run.after(true), FailureRun::of(0));
    }
}
