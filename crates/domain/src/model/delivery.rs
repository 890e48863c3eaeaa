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
//!
//! Which deliveries are due for an attempt, and in which order a lease takes them, is
//! [`DueRule`]: checked here in memory ([`DueRule::is_due`], [`DueRule::in_order`]), and
//! translated by the store, term by term, into its lease query.

use std::{cmp::Ordering, collections::HashMap};

use time::OffsetDateTime;

use super::{DeliveryId, DeliveryStatus, OrganizationId, RetrySchedule};

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

/// How a stored time stands against the moment a rule is applied at (`now`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeBound {
    /// The time is `now` or earlier (`time <= now`).
    AtOrBefore,
    /// The time is earlier than `now` (`time < now`).
    Before,
}

impl TimeBound {
    /// Whether `time` stands so against `now`.
    pub fn holds(self, time: OffsetDateTime, now: OffsetDateTime) -> bool {
        match self {
            Self::AtOrBefore => time <= now,
            Self::Before => time < now,
        }
    }
}

/// What due deliveries are put in order by, most significant first (see [`DueRule::ORDER`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DueKey {
    /// The delivery's turn in its organization: 1 for each organization's first due delivery,
    /// 2 for its second, and so on, first and second by the keys that follow this one.
    OrganizationTurn,
    /// When its attempt fell due, earliest first.
    NextAttemptAt,
    /// Its id, smallest first: the tie-break.
    Id,
}

/// What [`DueRule`] looks at in one delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueDelivery {
    /// The delivery.
    pub id: DeliveryId,
    /// Its endpoint's organization.
    pub organization_id: OrganizationId,
    /// Where it stands.
    pub state: DeliveryState,
    /// Until when a worker's lease on it holds; `None` when no worker holds it.
    pub leased_until: Option<OffsetDateTime>,
    /// Whether its endpoint is active.
    pub endpoint_active: bool,
}

/// Which deliveries are due for an attempt at a moment, and the order a lease takes them in:
/// the one place the rule is written. [`Self::is_due`] and [`Self::in_order`] apply it in
/// memory; the store builds its lease query from the constants, term by term.
///
/// A delivery is due at `now` when its status is one of [`Self::STATUSES`], its next attempt's
/// time has come ([`Self::ATTEMPT_TIME`]), no worker's lease on it holds (none, or one that
/// ran out: [`Self::LEASE_EXPIRED`]), and its endpoint is active
/// ([`Self::ACTIVE_ENDPOINTS_ONLY`]). Due deliveries are taken in [`Self::ORDER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueRule;

impl DueRule {
    /// The statuses of a delivery that may have an attempt due: pending (its first attempt, or
    /// one a manual retry queued), or failed with an automatic retry scheduled.
    pub const STATUSES: [DeliveryStatus; 2] = [DeliveryStatus::Pending, DeliveryStatus::Failed];

    /// How [`DeliveryState::next_attempt_at`] stands against `now` when the attempt's time has
    /// come: at that moment or after it. A delivery with no next attempt has nothing due.
    pub const ATTEMPT_TIME: TimeBound = TimeBound::AtOrBefore;

    /// How a lease's `leased_until` stands against `now` once the lease ran out (its worker
    /// died or stalled): strictly after it. Until then the lease holds and the delivery is its
    /// worker's.
    pub const LEASE_EXPIRED: TimeBound = TimeBound::Before;

    /// Only deliveries to active endpoints are due: those of an endpoint turned off wait until
    /// it is turned back on.
    pub const ACTIVE_ENDPOINTS_ONLY: bool = true;

    /// The order a lease takes due deliveries in: each organization's oldest due first, then
    /// each one's second, and so on, oldest due first within a turn, so that one
    /// organization's backlog never hides another's fresh delivery.
    pub const ORDER: [DueKey; 3] = [DueKey::OrganizationTurn, DueKey::NextAttemptAt, DueKey::Id];

    /// Whether a worker's lease that runs until `leased_until` still holds at `now`.
    pub fn lease_holds(leased_until: OffsetDateTime, now: OffsetDateTime) -> bool {
        !Self::LEASE_EXPIRED.holds(leased_until, now)
    }

    /// Whether `delivery` is due for an attempt at `now`.
    pub fn is_due(delivery: &DueDelivery, now: OffsetDateTime) -> bool {
        let status = Self::STATUSES.contains(&delivery.state.status());
        let time_has_come = delivery
            .state
            .next_attempt_at()
            .is_some_and(|at| Self::ATTEMPT_TIME.holds(at, now));
        let free = delivery
            .leased_until
            .is_none_or(|until| !Self::lease_holds(until, now));
        let endpoint = delivery.endpoint_active || !Self::ACTIVE_ENDPOINTS_ONLY;
        status && time_has_come && free && endpoint
    }

    /// The deliveries of `deliveries` due at `now`, in [`Self::ORDER`].
    pub fn in_order(
        deliveries: impl IntoIterator<Item = DueDelivery>,
        now: OffsetDateTime,
    ) -> Vec<DeliveryId> {
        let mut due: Vec<DueDelivery> = deliveries
            .into_iter()
            .filter(|delivery| Self::is_due(delivery, now))
            .collect();
        // Each delivery's turn in its organization, counted in the order of the keys after
        // the turn's.
        let after_turn = Self::ORDER
            .iter()
            .position(|key| *key == DueKey::OrganizationTurn)
            .map_or(&Self::ORDER[..0], |at| &Self::ORDER[at + 1..]);
        due.sort_by(|a, b| Self::compare(after_turn, a, b, &HashMap::new()));
        let mut counted: HashMap<OrganizationId, usize> = HashMap::new();
        let turns: HashMap<DeliveryId, usize> = due
            .iter()
            .map(|delivery| {
                let turn = counted.entry(delivery.organization_id).or_insert(0);
                *turn += 1;
                (delivery.id, *turn)
            })
            .collect();
        due.sort_by(|a, b| Self::compare(&Self::ORDER, a, b, &turns));
        due.into_iter().map(|delivery| delivery.id).collect()
    }

    /// `a` against `b` by `keys`, a turn read from `turns`.
    fn compare(
        keys: &[DueKey],
        a: &DueDelivery,
        b: &DueDelivery,
        turns: &HashMap<DeliveryId, usize>,
    ) -> Ordering {
        keys.iter()
            .map(|key| match key {
                DueKey::OrganizationTurn => turns.get(&a.id).cmp(&turns.get(&b.id)),
                DueKey::NextAttemptAt => a.state.next_attempt_at().cmp(&b.state.next_attempt_at()),
                DueKey::Id => a.id.cmp(&b.id),
            })
            .find(|order| order.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

#[cfg(test)]
mod tests {
    use time::{macros::datetime, Duration};
    use uuid::Uuid;

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
        assert_eq!(
            DeliveryState::restore(DeliveryStatus::Pending, 1, None),
            Err(InvalidDeliveryState {
                status: "pending",
                attempt: 1,
                next: None
            })
        );
        assert_eq!(
            DeliveryState::restore(DeliveryStatus::Success, 1, Some(t0())),
            Err(InvalidDeliveryState {
                status: "success",
                attempt: 1,
                next: Some(t0())
            })
        );
        assert_eq!(
            DeliveryState::restore(DeliveryStatus::Failed, 0, None),
            Err(InvalidDeliveryState {
                status: "failed",
                attempt: 0,
                next: None
            })
        );
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

    /// Delivery `n` of organization `org`, in `state`, unleased, to an active endpoint.
    fn delivery(n: u128, org: u128, state: DeliveryState) -> DueDelivery {
        DueDelivery {
            id: DeliveryId::from_uuid(Uuid::from_u128(n)),
            organization_id: OrganizationId::from_uuid(Uuid::from_u128(org)),
            state,
            leased_until: None,
            endpoint_active: true,
        }
    }

    fn id(n: u128) -> DeliveryId {
        DeliveryId::from_uuid(Uuid::from_u128(n))
    }

    #[test]
    fn a_pending_delivery_is_due_once_its_time_has_come() {
        let pending = delivery(1, 1, DeliveryState::new(t0()));
        assert!(!DueRule::is_due(&pending, t0() - Duration::seconds(1)));
        assert!(DueRule::is_due(&pending, t0()), "due at its very moment");
        assert!(DueRule::is_due(&pending, t0() + Duration::hours(1)));
    }

    #[test]
    fn a_failed_delivery_is_due_at_its_retry_and_never_after_its_last_attempt() {
        let failed = DeliveryState::new(t0())
            .attempted(false, t0(), &schedule())
            .unwrap();
        let retry_at = failed.next_retry_at().unwrap();
        assert!(!DueRule::is_due(
            &delivery(1, 1, failed),
            retry_at - Duration::seconds(1)
        ));
        assert!(DueRule::is_due(&delivery(1, 1, failed), retry_at));

        let given_up = DeliveryState::sent_once(false);
        assert!(!DueRule::is_due(
            &delivery(1, 1, given_up),
            t0() + Duration::days(365)
        ));
    }

    #[test]
    fn a_delivery_that_succeeded_is_never_due() {
        let succeeded = DeliveryState::new(t0())
            .attempted(true, t0(), &schedule())
            .unwrap();
        assert!(!DueRule::STATUSES.contains(&DeliveryStatus::Success));
        assert!(!DueRule::is_due(
            &delivery(1, 1, succeeded),
            t0() + Duration::days(365)
        ));
    }

    #[test]
    fn a_held_lease_keeps_a_delivery_from_others_until_it_runs_out() {
        let leased = DueDelivery {
            leased_until: Some(t0() + Duration::seconds(30)),
            ..delivery(1, 1, DeliveryState::new(t0()))
        };
        assert!(!DueRule::is_due(&leased, t0()));
        assert!(
            !DueRule::is_due(&leased, t0() + Duration::seconds(30)),
            "a lease holds up to its last moment"
        );
        assert!(DueRule::lease_holds(
            t0() + Duration::seconds(30),
            t0() + Duration::seconds(30)
        ));
        assert!(
            DueRule::is_due(&leased, t0() + Duration::seconds(31)),
            "a lease that ran out frees the delivery"
        );
        assert!(!DueRule::lease_holds(
            t0() + Duration::seconds(30),
            t0() + Duration::seconds(31)
        ));
    }

    #[test]
    fn deliveries_to_an_inactive_endpoint_wait() {
        let waiting = DueDelivery {
            endpoint_active: false,
            ..delivery(1, 1, DeliveryState::new(t0()))
        };
        assert!(!DueRule::is_due(&waiting, t0()));
        assert!(DueRule::is_due(
            &DueDelivery {
                endpoint_active: true,
                ..waiting
            },
            t0()
        ));
    }

    #[test]
    fn organizations_take_turns_each_oldest_due_first() {
        let at = |seconds: i64| DeliveryState::new(t0() + Duration::seconds(seconds));
        let (noisy, quiet, other) = (1, 2, 3);
        let deliveries = [
            delivery(10, noisy, at(0)),
            delivery(11, noisy, at(1)),
            delivery(12, noisy, at(2)),
            // Ties on time are broken by id.
            delivery(21, quiet, at(5)),
            delivery(20, quiet, at(5)),
            delivery(30, other, at(3)),
            // Not due yet: left out.
            delivery(31, other, at(60)),
        ];
        assert_eq!(
            DueRule::in_order(deliveries, t0() + Duration::seconds(10)),
            [
                // Every organization's first, oldest first.
                id(10),
                id(30),
                id(20),
                // Then each one's second.
                id(11),
                id(21),
                // Then the third.
                id(12),
            ]
        );
    }
}
