//! Webhook endpoints, the outbox and deliveries, the cipher that seals signing secrets, and the sender.

use async_trait::async_trait;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{BoxError, StoreError};
use crate::model::{
    AuditRecord, Delivery, DeliveryId, DeliveryState, DeliveryStats, DeliveryStatus, EndpointId,
    EventId, EventType, LeaseRoom, OrganizationId, Page, PageRequest, Plan, WebhookEndpoint,
    WebhookUrl,
};

/// An organization at its plan's bound on webhook endpoints: it may have no more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointLimit {
    /// The organization's plan.
    pub plan: Plan,
    /// How many endpoints the plan allows ([`Plan::max_webhook_endpoints`]).
    pub max: usize,
}

impl EndpointLimit {
    /// The bound of `plan`.
    pub const fn of(plan: Plan) -> Self {
        Self {
            plan,
            max: plan.max_webhook_endpoints(),
        }
    }
}

/// A webhook endpoint about to be stored, with its signing secret sealed.
#[derive(Clone, PartialEq)]
pub struct NewEndpoint {
    /// The endpoint as it is to be stored, active.
    pub endpoint: WebhookEndpoint,
    /// The signing secret sealed by the [`SecretCipher`], bound to the endpoint's id as the
    /// context; only the delivery engine opens it.
    pub secret_sealed: Vec<u8>,
}

impl std::fmt::Debug for NewEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewEndpoint")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// A change to an endpoint: only the `Some` fields change.
#[derive(Clone, Default, PartialEq)]
pub struct EndpointChange {
    /// The new URL deliveries are sent to.
    pub url: Option<WebhookUrl>,
    /// The new free-text description.
    pub description: Option<String>,
    /// The new event types the endpoint subscribes to, each once, at least one.
    pub events: Option<Vec<EventType>>,
    /// A rotated signing secret, sealed.
    pub secret_sealed: Option<Vec<u8>>,
    /// `false` turns the endpoint off (nothing is delivered to it); `true` turns it back on.
    pub is_active: Option<bool>,
}

impl std::fmt::Debug for EndpointChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointChange")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("rotates_secret", &self.secret_sealed.is_some())
            .field("is_active", &self.is_active)
            .finish_non_exhaustive()
    }
}

/// An endpoint with what its detail view shows.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointDetail {
    /// The endpoint as stored.
    pub endpoint: WebhookEndpoint,
    /// When the latest attempt of a delivery to it was made, answered or not; `None` before
    /// the first.
    pub last_delivery_at: Option<OffsetDateTime>,
    /// How many of its deliveries there are, by outcome.
    pub stats: DeliveryStats,
}

/// Filters of the delivery log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeliveryFilter {
    /// Only deliveries in this status; `None`: any status.
    pub status: Option<DeliveryStatus>,
    /// Only deliveries of this event type; `None`: any type.
    pub event: Option<EventType>,
}

/// What a manual retry found.
#[derive(Clone, Debug, PartialEq)]
pub enum RetryOutcome {
    /// The organization has no such delivery.
    NotFound,
    /// An attempt of the delivery is already queued: nothing changed.
    AlreadyPending,
    /// The delivery succeeded: only a failed delivery is retried. Nothing changed.
    AlreadySucceeded,
    /// Re-queued for now; the delivery as it stands.
    Queued(Delivery),
    /// A test ping: never sent again (send another test instead). Nothing changed.
    NotRetryable,
}

/// Where an endpoint's deliveries go, and the secret that signs them: what a test ping needs.
#[derive(Clone, PartialEq)]
pub struct SendTarget {
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// Its URL as it stands now.
    pub url: WebhookUrl,
    /// Its signing secret as [`NewEndpoint::secret_sealed`] stored it.
    pub secret_sealed: Vec<u8>,
}

impl std::fmt::Debug for SendTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendTarget")
            .field("endpoint_id", &self.endpoint_id)
            .finish_non_exhaustive()
    }
}

/// A test ping already sent, to record: its event (`webhook.test`, dispatched as it is
/// stored), its delivery and the one attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct SentTest {
    /// The endpoint's organization.
    pub organization_id: OrganizationId,
    /// The `webhook.test` event's id.
    pub event_id: EventId,
    /// The event's payload (the body's `data`).
    pub data: serde_json::Value,
    /// The exact body sent.
    pub payload: String,
    /// The attempt, whose state is [`DeliveryState::sent_once`]; its lease is not used.
    pub record: AttemptRecord,
    /// The ping's audit record, written with it.
    pub audit: AuditRecord,
}

/// An event of the outbox not yet turned into deliveries.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingEvent {
    /// The event's id in the outbox.
    pub id: EventId,
    /// What happened: decides which endpoints are subscribed.
    pub event_type: EventType,
    /// The organization the event goes to (`None`: a user's event from before they belonged to
    /// any organization; it is kept, and delivered nowhere).
    pub organization_id: Option<OrganizationId>,
    /// The event's payload, sent as the body's `data`.
    pub data: serde_json::Value,
    /// When the change happened, sent as the body's `timestamp`.
    pub occurred_at: OffsetDateTime,
}

/// A delivery about to be created by the dispatcher.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    /// The new delivery's id, also in its payload as `delivery_id`.
    pub id: DeliveryId,
    /// The subscribed endpoint it goes to.
    pub endpoint_id: EndpointId,
    /// The exact JSON body every attempt sends and signs.
    pub payload: String,
}

/// A delivery leased by a worker for one attempt.
#[derive(Clone, PartialEq)]
pub struct LeasedDelivery {
    /// The delivery being attempted.
    pub id: DeliveryId,
    /// The endpoint it goes to.
    pub endpoint_id: EndpointId,
    /// The endpoint's organization.
    pub organization_id: OrganizationId,
    /// Where the attempt is sent: the endpoint's URL as it stands now.
    pub url: WebhookUrl,
    /// The endpoint's signing secret as [`NewEndpoint::secret_sealed`] stored it.
    pub secret_sealed: Vec<u8>,
    /// The event type, sent in the `X-Service-Event` header.
    pub event: EventType,
    /// The exact JSON body to send and sign.
    pub payload: String,
    /// Where the delivery stands: an attempt of it is due (the store leases only those).
    pub state: DeliveryState,
    /// Proves the lease when the attempt is recorded.
    pub lease: Uuid,
    /// When the delivery was made: the commit of the change it announces.
    pub created_at: OffsetDateTime,
}

impl LeasedDelivery {
    /// The number of the attempt being made (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.state
            .attempt_due()
            .unwrap_or_else(|| self.state.attempt())
    }
}

impl std::fmt::Debug for LeasedDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedDelivery")
            .field("id", &self.id)
            .field("endpoint_id", &self.endpoint_id)
            .field("event", &self.event)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// The result of one attempt, to record.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRecord {
    /// The delivery attempted.
    pub delivery_id: DeliveryId,
    /// Its endpoint, whose run of failures the attempt moves on.
    pub endpoint_id: EndpointId,
    /// The lease the attempt was made under; the record is dropped when it no longer holds.
    pub lease: Uuid,
    /// The delivery's state after this attempt, from [`DeliveryState::attempted`]: the store
    /// writes it as it is.
    pub state: DeliveryState,
    /// The receiver's HTTP status; `None` when it did not answer.
    pub http_status: Option<u16>,
    /// The start of the receiver's answer, or why there was none.
    pub response_body: Option<String>,
    /// How long the attempt took, in milliseconds.
    pub duration_ms: u64,
    /// When the attempt started.
    pub attempted_at: OffsetDateTime,
    /// Consecutive failures at which the endpoint is deactivated (see
    /// [`FailureRun`](crate::model::FailureRun)).
    pub disable_after_failures: u32,
}

impl AttemptRecord {
    /// Whether the endpoint answered with a 2xx.
    pub fn succeeded(&self) -> bool {
        self.state.status() == DeliveryStatus::Success
    }
}

/// What recording an attempt changed beyond the delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptEffects {
    /// This failure was the one that made the endpoint inactive.
    pub endpoint_disabled: bool,
}

/// An organization's webhooks as its admins manage them: endpoints, their delivery logs,
/// manual retries and test pings. Every read and write takes the organization id: tenancy is
/// in the query. The worker's side is [`DeliveryQueue`].
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait WebhookStore: Send + Sync + 'static {
    /// Stores a new endpoint with its sealed secret.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the endpoint id is taken (a collision of random ids).
    ///
    /// Nothing is written, and the answer is the organization's [`EndpointLimit`], when it
    /// already has as many endpoints as its plan allows
    /// ([`Plan::max_webhook_endpoints`](crate::model::Plan::max_webhook_endpoints)): counted in
    /// the insert's transaction, with the organization's row locked, so that concurrent
    /// creations never go past the bound together.
    async fn create_endpoint(
        &self,
        endpoint: NewEndpoint,
        audit: AuditRecord,
    ) -> Result<Result<(), EndpointLimit>, StoreError>;

    /// The organization's endpoints, newest first; with `is_active`, only those active (or
    /// inactive).
    async fn endpoints(
        &self,
        organization_id: OrganizationId,
        is_active: Option<bool>,
        page: PageRequest,
    ) -> Result<Page<WebhookEndpoint>, StoreError>;

    /// One of the organization's endpoints with its last attempt and delivery counts; `None`
    /// when the organization has no such endpoint.
    async fn endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
    ) -> Result<Option<EndpointDetail>, StoreError>;

    /// Changes the endpoint; turning it back on also clears its run of failures. `None` when
    /// the organization has no such endpoint.
    async fn update_endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
        change: EndpointChange,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// Removes the endpoint and its deliveries: nothing pending is sent any more. Returns false
    /// when the organization has no such endpoint.
    async fn delete_endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The endpoint's deliveries, newest first; `None` when there is no such endpoint.
    async fn deliveries(
        &self,
        organization_id: OrganizationId,
        endpoint_id: EndpointId,
        filter: DeliveryFilter,
        page: PageRequest,
    ) -> Result<Option<Page<Delivery>>, StoreError>;

    /// Re-queues one of the organization's deliveries by [`DeliveryState::retried`] at `at`: a
    /// new attempt due at once of a failed delivery, or [`RetryOutcome::AlreadyPending`] or
    /// [`RetryOutcome::AlreadySucceeded`] (nothing changed); a delivery of an event type
    /// that is not [`EventType::retryable`] is [`RetryOutcome::NotRetryable`]. Of concurrent retries of
    /// one delivery, one queues an attempt.
    async fn retry_delivery(
        &self,
        organization_id: OrganizationId,
        id: DeliveryId,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<RetryOutcome, StoreError>;

    /// Where the organization's endpoint sends, active or not; `None` when it has no such
    /// endpoint.
    async fn send_target(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
    ) -> Result<Option<SendTarget>, StoreError>;

    /// Records a test ping in one transaction: its event (dispatched), its delivery in the
    /// state the attempt left it, and the endpoint's `last_delivery_at`. A ping leaves the
    /// endpoint's [`FailureRun`](crate::model::FailureRun) alone: it probes the receiver, it
    /// is not traffic. `false` when the endpoint was deleted meanwhile: nothing is recorded.
    async fn record_test(&self, test: SentTest) -> Result<bool, StoreError>;
}

/// The delivery queue, the worker's side of webhooks: outbox events turned into deliveries,
/// leased, attempted and recorded. Nothing here is an organization's request: the delivery
/// engine drives it, in the background.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait DeliveryQueue: Send + Sync + 'static {
    /// Outbox events not yet dispatched, oldest first, at most `limit`.
    async fn pending_events(&self, limit: i64) -> Result<Vec<PendingEvent>, StoreError>;

    /// The organization's active endpoints subscribed to the event type.
    async fn subscribed_endpoints(
        &self,
        organization_id: OrganizationId,
        event: EventType,
    ) -> Result<Vec<EndpointId>, StoreError>;

    /// Creates each event's deliveries (due at `at`) and marks it dispatched, all in one
    /// transaction, in order. A delivery for an (event, endpoint) pair that exists already is
    /// skipped, so a dispatch repeated after a crash never doubles deliveries.
    async fn dispatch_events(
        &self,
        events: Vec<(EventId, Vec<NewDelivery>)>,
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;

    /// [`Self::dispatch_events`] of one event.
    async fn dispatch_event(
        &self,
        event_id: EventId,
        deliveries: Vec<NewDelivery>,
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.dispatch_events(vec![(event_id, deliveries)], at).await
    }

    /// Leases due deliveries of active endpoints, oldest due first, as many as fit in `room`
    /// (in all and at each endpoint), until `lease_until`, all under the one `lease` id. A
    /// lease is exclusive: no other worker in any process gets the same delivery until it
    /// expires or the attempt is recorded.
    async fn lease_deliveries(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        room: LeaseRoom,
        lease: Uuid,
    ) -> Result<Vec<LeasedDelivery>, StoreError>;

    /// Gives leases back unused (their deliveries are due again at once). Leases that no
    /// longer hold are ignored.
    async fn release_deliveries(&self, leases: Vec<(DeliveryId, Uuid)>) -> Result<(), StoreError>;

    /// Records attempts, in one transaction and in order: each if its lease still holds (`None`
    /// in its place otherwise: the attempt was taken over or the endpoint deleted), writing the
    /// record's [`DeliveryState`] and moving its endpoint's
    /// [`FailureRun`](crate::model::FailureRun) on by the attempt, which turns the endpoint off
    /// when the run reaches `disable_after_failures`. One answer per record, in the records'
    /// order.
    async fn record_attempts(
        &self,
        records: Vec<AttemptRecord>,
    ) -> Result<Vec<Option<AttemptEffects>>, StoreError>;

    /// [`Self::record_attempts`] of one record.
    async fn record_attempt(
        &self,
        record: AttemptRecord,
    ) -> Result<Option<AttemptEffects>, StoreError> {
        Ok(self.record_attempts(vec![record]).await?.pop().flatten())
    }
}

/// Seals and opens secrets at rest (AES-256-GCM under the server's secret key).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SecretCipher: Send + Sync + 'static {
    /// Encrypts `plaintext` under a fresh nonce, bound to `context` (authenticated, not
    /// stored): only [`Self::open`] with the same context gives it back.
    fn seal(&self, plaintext: &[u8], context: &[u8]) -> Result<Vec<u8>, CipherError>;
    /// Decrypts what [`Self::seal`] made under the same `context`.
    ///
    /// # Errors
    /// [`CipherError`] when the bytes were tampered with, sealed under another key or another
    /// context, or are not a sealed value at all.
    fn open(&self, sealed: &[u8], context: &[u8]) -> Result<Vec<u8>, CipherError>;
}

/// A secret could not be sealed or opened; the source says why, for the log.
#[derive(Debug, thiserror::Error)]
#[error("sealing or opening a secret failed")]
pub struct CipherError(#[source] pub BoxError);

/// A signed webhook request, ready to send.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    /// Where it is posted: the endpoint's URL.
    pub url: WebhookUrl,
    /// Header names and values, in order (the signature among them).
    pub headers: Vec<(&'static str, String)>,
    /// The exact bytes that were signed.
    pub body: Vec<u8>,
}

impl std::fmt::Debug for WebhookRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a token in its query; the signature header is a secret's output.
        f.debug_struct("WebhookRequest")
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What came of one attempt to send a webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookResponse {
    /// The receiver answered (any status; 2xx is a success).
    Answered {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body, at most a few KiB, lossily decoded.
        body: String,
        /// How long the attempt took, up to reading the body, in milliseconds.
        duration_ms: u64,
    },
    /// No answer: refused target, DNS failure, connection or TLS error, timeout.
    Failed {
        /// What went wrong, for the delivery log.
        error: String,
        /// How long the attempt took before it failed, in milliseconds.
        duration_ms: u64,
    },
}

/// Sends webhook requests over HTTPS: no redirects followed, a hard timeout, private and
/// loopback targets refused unless allowed.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait WebhookSender: Send + Sync + 'static {
    /// Posts the request once, without retrying, and says what came of it; a failure to reach
    /// the receiver is a [`WebhookResponse::Failed`], not an error.
    async fn send(&self, request: WebhookRequest) -> WebhookResponse;
}
