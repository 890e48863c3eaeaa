//! The control plane's use cases, for operators: billing's events posted into the outbox, every
//! organization's stored events, the
//! deliveries that failed for good, their replay, and the gauges a metrics scrape reads.

use time::Duration;

use super::audit;
use crate::{
    model::{
        AuditAction, AuditActor, AuditFilter, AuditRecord, Delivery, EventSource, EventType,
        NewEvent, Operator, OrganizationId, Origin, Page, PageRequest, PostedEventData, TargetKind,
    },
    ports::{
        service_ports, DeadLetterFilter, EventFilter, Gauges, PeriodicTask, PurgePace,
        ReplaySelection, StoreError, StoredEvent,
    },
};

/// The most deliveries one replay re-queues; a larger backlog takes more calls.
pub const MAX_REPLAY: u32 = 1_000;

/// What one slice of a retention purge deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgeSlice {
    /// The rows it deleted.
    pub deleted: u64,
    /// Whether it was full: more may be left to purge.
    pub more: bool,
}

service_ports! {
    /// The ports [`ControlService`] uses.
    pub struct ControlPorts { operations: OperationsStore, health: HealthStore, audit: AuditStore, clock: Clock, random: Random }
}

/// The operator's use cases.
#[derive(Clone)]
pub struct ControlService {
    ports: ControlPorts,
}

/// Why a posted event was refused.
#[derive(Debug, thiserror::Error)]
pub enum PostEventError {
    /// The type is one Gatehouse emits itself: only billing's events are posted.
    #[error("only billing events (source \"billing\") are posted; Gatehouse emits {0} itself")]
    NotBilling(EventType),
    /// No active organization has that id.
    #[error("organization not found")]
    OrganizationNotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a replay was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// More deliveries named than one replay takes.
    #[error("at most {MAX_REPLAY} delivery ids at once")]
    TooMany,
    /// Neither deliveries nor an endpoint were named.
    #[error("name the deliveries (delivery_ids) or an endpoint (endpoint_id)")]
    NothingSelected,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ControlService {
    /// A service on these ports.
    pub fn new(ports: ControlPorts) -> Self {
        Self { ports }
    }

    /// Records an event the billing system posts (`POST /control/events`) in the outbox, with
    /// the operator's audit record in the same transaction: delivered, signed and retried like
    /// Gatehouse's own. Only types whose [`EventType::source`] is billing are taken. The
    /// payload's `data` is the billing system's, with `organization_id` set to the
    /// organization's, as every `billing.*` payload carries it.
    pub async fn post_billing_event(
        &self,
        _operator: &Operator,
        event_type: EventType,
        organization_id: OrganizationId,
        data: PostedEventData,
        origin: &Origin,
    ) -> Result<StoredEvent, PostEventError> {
        let mut data = data.into_map();
        if event_type.source() != EventSource::Billing {
            return Err(PostEventError::NotBilling(event_type));
        }
        let now = self.ports.clock.now();
        data.insert(
            "organization_id".to_owned(),
            serde_json::Value::String(organization_id.to_string()),
        );
        // The billing system's own data, as it posted it: no payload type of Gatehouse's.
        let posted = NewEvent {
            id: self.ports.random.uuid().into(),
            event_type,
            organization_id: Some(organization_id),
            user_id: None,
            data: serde_json::Value::Object(data),
            occurred_at: now,
        };
        let record = audit(
            self.ports.random.as_ref(),
            now,
            AuditActor::Operator,
            AuditAction::BillingEventPosted,
            origin,
        )
        .in_organization(organization_id)
        .on(TargetKind::Organization, organization_id);
        if !self
            .ports
            .operations
            .record_billing_event(posted.clone(), record)
            .await?
        {
            return Err(PostEventError::OrganizationNotFound);
        }
        Ok(StoredEvent {
            id: posted.id,
            event_type: posted.event_type,
            organization_id: posted.organization_id,
            user_id: posted.user_id,
            data: posted.data,
            occurred_at: posted.occurred_at,
            dispatched_at: None,
        })
    }

    /// Stored events of every organization, newest first.
    pub async fn events(
        &self,
        _operator: &Operator,
        filter: EventFilter,
        page: PageRequest,
    ) -> Result<Page<StoredEvent>, StoreError> {
        self.ports.operations.events(filter, page).await
    }

    /// Deliveries that failed for good, newest first.
    pub async fn dead_letters(
        &self,
        _operator: &Operator,
        filter: DeadLetterFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>, StoreError> {
        self.ports.operations.dead_letters(filter, page).await
    }

    /// Sends the selected dead letters again, now, in the order they were created: each one
    /// more attempt with its `delivery_id` and body (at most [`MAX_REPLAY`] per call), audited
    /// as the operator's in the same transaction. Returns how many were re-queued.
    pub async fn replay(
        &self,
        _operator: &Operator,
        selection: ReplaySelection,
        origin: &Origin,
    ) -> Result<u64, ReplayError> {
        if let ReplaySelection::Deliveries(ids) = &selection {
            if ids.is_empty() {
                return Err(ReplayError::NothingSelected);
            }
            if ids.len() > MAX_REPLAY as usize {
                return Err(ReplayError::TooMany);
            }
        }
        let now = self.ports.clock.now();
        let mut record = audit(
            self.ports.random.as_ref(),
            now,
            AuditActor::Operator,
            AuditAction::DeadLettersReplayed,
            origin,
        );
        if let ReplaySelection::Endpoint { endpoint_id, .. } = &selection {
            record = record.on(TargetKind::WebhookEndpoint, endpoint_id);
        }
        Ok(self
            .ports
            .operations
            .replay(selection, now, MAX_REPLAY, record)
            .await?)
    }

    /// The audit log of every organization, newest first.
    pub async fn audit_log(
        &self,
        _operator: &Operator,
        filter: AuditFilter,
        page: PageRequest,
    ) -> Result<Page<AuditRecord>, StoreError> {
        self.ports.audit.audit_log(filter, page).await
    }

    /// Deletes one slice (at most `pace`'s rows, [`PurgePace`]) of the audit records older
    /// than `retention_days` days, oldest first; more may be left when the slice is full. The
    /// server runs slices, with a pause between them, every hour.
    pub async fn purge_audit(
        &self,
        retention_days: u32,
        pace: PurgePace,
    ) -> Result<PurgeSlice, StoreError> {
        let retention = Duration::days(i64::from(retention_days));
        let deleted = self
            .ports
            .audit
            .purge_audit(self.ports.clock.now() - retention, pace.rows())
            .await?;
        Ok(PurgeSlice {
            deleted,
            more: deleted >= u64::from(pace.rows()),
        })
    }

    /// Deletes one slice (at most `pace`'s rows, [`PurgePace`]) of the stored events
    /// and finished deliveries older than `retention_days` days
    /// (`GATEHOUSE_EVENT_RETENTION_DAYS`); deliveries with an attempt still to come are kept.
    /// The server runs slices, with a pause between them, every hour.
    pub async fn purge_webhook_history(
        &self,
        retention_days: u32,
        pace: PurgePace,
    ) -> Result<PurgeSlice, StoreError> {
        let retention = Duration::days(i64::from(retention_days));
        let purged = self
            .ports
            .operations
            .purge_webhook_history(self.ports.clock.now() - retention, pace.rows())
            .await?;
        Ok(PurgeSlice {
            deleted: purged.events + purged.deliveries,
            more: purged.filled(pace.rows()),
        })
    }

    /// Whether this process runs this round of `task`, due every `every`: `true` for exactly
    /// one of the replicas that ask within an interval (see
    /// [`OperationsStore::claim_periodic`](crate::ports::OperationsStore::claim_periodic)).
    pub async fn claim_periodic(
        &self,
        task: PeriodicTask,
        every: std::time::Duration,
    ) -> Result<bool, StoreError> {
        let now = self.ports.clock.now();
        // A little early, so that a replica whose timer fires just before the hour is not put
        // off by a whole interval.
        let every = Duration::try_from(every).unwrap_or(Duration::HOUR) - Duration::seconds(1);
        self.ports
            .operations
            .claim_periodic(task, now - every, now)
            .await
    }

    /// What a metrics scrape reads at that moment: the deliveries with an attempt still to
    /// come, the mails not yet sent, and the store's pools. Asks no proof: the caller is the operator's own metrics
    /// listener, or a handler that checked the token.
    pub async fn gauges(&self) -> Result<Gauges, StoreError> {
        Ok(Gauges {
            pending_deliveries: self.ports.operations.pending_deliveries().await?,
            queued_mail: self.ports.operations.queued_mail().await?,
            pools: self.ports.health.pools(),
        })
    }
}
