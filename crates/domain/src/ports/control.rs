//! What the control plane reads and changes across every organization: the outbox's events,
//! the deliveries that failed for good (dead letters) and their replay, the delivery backlog.

use std::time::Duration;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::model::{
    AuditRecord, Delivery, DeliveryId, EndpointId, EventId, EventType, NewEvent, OrganizationId,
    Page, PageRequest, UserId,
};

/// An event as the outbox keeps it.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredEvent {
    /// The event's id.
    pub id: EventId,
    /// What happened.
    pub event_type: EventType,
    /// The organization it went to; `None` for a user's event from before they belonged to any.
    pub organization_id: Option<OrganizationId>,
    /// The user who made the change or whom it is about.
    pub user_id: Option<UserId>,
    /// Its payload, as delivered in the body's `data`.
    pub data: serde_json::Value,
    /// When the change happened.
    pub occurred_at: OffsetDateTime,
    /// When the dispatcher turned it into deliveries; `None` while it waits.
    pub dispatched_at: Option<OffsetDateTime>,
}

/// Filters of the stored events; `None` matches anything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventFilter {
    /// Only this organization's events.
    pub organization_id: Option<OrganizationId>,
    /// Only events of this type.
    pub event_type: Option<EventType>,
    /// Only events that happened at or after this time.
    pub since: Option<OffsetDateTime>,
}

/// Filters of the dead letters; `None` matches anything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeadLetterFilter {
    /// Only this organization's.
    pub organization_id: Option<OrganizationId>,
    /// Only those of this endpoint.
    pub endpoint_id: Option<EndpointId>,
}

/// Which dead letters a replay sends again.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplaySelection {
    /// These deliveries, those of them that are dead letters.
    Deliveries(Vec<DeliveryId>),
    /// The endpoint's dead letters, those created at or after `since` when it is given.
    Endpoint {
        /// The endpoint.
        endpoint_id: EndpointId,
        /// The earliest delivery to replay, by when it was created.
        since: Option<OffsetDateTime>,
    },
}

/// The control plane's store: every organization's records, for operators only.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait OperationsStore: Send + Sync + 'static {
    /// Records an event of the billing system in the outbox of its organization, with the
    /// operator's audit record, in one transaction. `false` (and nothing written) when no
    /// active organization has the event's `organization_id`.
    async fn record_billing_event(
        &self,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Stored events, newest first.
    async fn events(
        &self,
        filter: EventFilter,
        page: PageRequest,
    ) -> Result<Page<StoredEvent>, StoreError>;

    /// Dead letters: deliveries that failed for good (`failed` with no retry due), newest
    /// first. Test pings, which are never sent again, are not among them.
    async fn dead_letters(
        &self,
        filter: DeadLetterFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>, StoreError>;

    /// Re-queues up to `limit` of the selected dead letters in one transaction, each by
    /// [`DeliveryState::retried`](crate::model::DeliveryState::retried): one more attempt
    /// with the same `delivery_id` and body, due in the order the deliveries were created (the
    /// `n`th at `at + n` microseconds, so that workers lease them in that order, under each
    /// endpoint's concurrency bound). Selected deliveries that are not dead letters are left
    /// alone. The operator's audit record is written in the same transaction. Returns how many
    /// were re-queued.
    async fn replay(
        &self,
        selection: ReplaySelection,
        at: OffsetDateTime,
        limit: u32,
        audit: AuditRecord,
    ) -> Result<u64, StoreError>;

    /// Deliveries with an attempt still to come: queued now, or waiting for a retry.
    async fn pending_deliveries(&self) -> Result<u64, StoreError>;

    /// Mails in the outbox: queued now, or waiting for a retry.
    async fn queued_mail(&self) -> Result<u64, StoreError>;

    /// Deletes, in one transaction, at most `limit` rows: the finished deliveries created
    /// before `before` (delivered, and failed for good: dead letters and test pings included),
    /// oldest first, and, when fewer than `limit` of those were left, as many of the rest of
    /// the `limit` of the events that occurred before `before`, were dispatched, and have no
    /// delivery left. A delivery with an attempt still to come, leased
    /// or not, is never deleted, nor its event. A purge is a run of such slices
    /// ([`PURGE_SLICE`]), so that no transaction holds the store for long.
    async fn purge_webhook_history(
        &self,
        before: OffsetDateTime,
        limit: u32,
    ) -> Result<PurgedHistory, StoreError>;

    /// Claims this round of a periodic `task` for the caller, once for every process on the
    /// store: `true` when the task last ran at or before `due_before` (or never), and its last
    /// run is now `at`; `false` when another process claimed a round since. The claim is one
    /// atomic write, so that of replicas that look at once, exactly one runs the task.
    async fn claim_periodic(
        &self,
        task: PeriodicTask,
        due_before: OffsetDateTime,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError>;
}

/// Work that runs every so often, once per cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeriodicTask {
    /// The hourly purges: deleted organizations, audit records and webhook history past their
    /// retention.
    Purges,
}

impl PeriodicTask {
    /// Its name in the store.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Purges => "purges",
        }
    }
}

/// The most rows one transaction of a retention purge deletes. A purge runs as
/// slices of at most this many rows, and the store is free for other writes between two
/// slices: with a million rows past retention, a write waits at most for one slice, not for
/// the whole purge.
pub const PURGE_SLICE: u32 = 1_000;

/// How many rows the next slice of a purge deletes: sized by how long the last
/// slice took, so that no slice holds the store for much longer than [`PurgePace::TARGET`],
/// whatever the machine and the rows (a write queued behind a slice waits for it). A purge
/// starts at [`PurgePace::FIRST`]; a slice that took more than the target halves the next, one
/// that took under half of it doubles the next, between [`PurgePace::FEWEST`] and
/// [`PURGE_SLICE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PurgePace(u32);

impl PurgePace {
    /// How long a slice should hold the store at most.
    pub const TARGET: Duration = Duration::from_millis(20);
    /// The first slice of a purge.
    pub const FIRST: Self = Self(100);
    /// The fewest rows of a slice: a purge always moves on.
    pub const FEWEST: u32 = 10;

    /// The rows this slice deletes at most.
    pub const fn rows(self) -> u32 {
        self.0
    }

    /// The pace of the next slice, after this one took `took`.
    #[must_use]
    pub fn after(self, took: Duration) -> Self {
        if took > Self::TARGET {
            Self((self.0 / 2).max(Self::FEWEST))
        } else if took < Self::TARGET / 2 {
            Self(self.0.saturating_mul(2).min(PURGE_SLICE))
        } else {
            self
        }
    }
}

/// What a purge of webhook history deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgedHistory {
    /// Stored events.
    pub events: u64,
    /// Finished deliveries.
    pub deliveries: u64,
}

impl PurgedHistory {
    /// Whether a slice of at most `limit` rows deleted as many as it could: more may be left
    /// to purge.
    pub fn filled(&self, limit: u32) -> bool {
        self.events + self.deliveries >= u64::from(limit)
    }
}
