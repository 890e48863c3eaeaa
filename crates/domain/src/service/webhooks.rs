//! Webhooks: the endpoint use cases behind the API (endpoints, delivery logs, manual retries,
//! test pings). The delivery engine the workers run is in `delivery.rs`.

use super::payloads::{self, Payload};
use std::sync::Arc;

use serde_json::json;
use time::OffsetDateTime;

use super::{Actor, Forbidden};
use crate::{
    model::{
        signature, timestamp, AuditAction, AuditRecord, Delivery, DeliveryId, DeliveryState,
        EndpointDescription, EndpointId, EventId, EventType, Origin, Page, PageRequest, Permission,
        TargetKind, TokenKind, WebhookEndpoint, WebhookUrl,
    },
    ports::{
        service_ports, AttemptRecord, CipherError, DeliveryFilter, EndpointChange, EndpointDetail,
        EndpointLimit, NewEndpoint, RetryOutcome, SecretCipher, SentTest, StoreError,
        WebhookRequest, WebhookResponse, WebhookSender,
    },
};

/// Consecutive failed attempts to one endpoint after which it is deactivated.
pub const DISABLE_AFTER_FAILURES: u32 = 5;

/// What the API says of a signing secret someone chose.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be 24 to 128 printable characters without spaces")]
pub struct SecretRuleError;

/// A signing secret: generated (`whsec_` and 256 random bits) or chosen by the customer.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(String);

impl SigningSecret {
    /// A customer-chosen secret: 24 to 128 printable ASCII characters without spaces.
    pub fn parse(raw: &str) -> Result<Self, SecretRuleError> {
        let ok =
            (24..=128).contains(&raw.chars().count()) && raw.chars().all(|c| c.is_ascii_graphic());
        ok.then(|| Self(raw.to_owned())).ok_or(SecretRuleError)
    }

    /// The secret itself, to seal it or sign with it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(<redacted>)")
    }
}

/// Why a webhook use case failed.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The caller's role lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such endpoint in the organization.
    #[error("webhook endpoint not found")]
    EndpointNotFound,
    /// No such delivery in the organization.
    #[error("delivery not found")]
    DeliveryNotFound,
    /// A manual retry of a delivery whose next attempt is already queued.
    #[error("the delivery is already pending")]
    AlreadyPending,
    /// A manual retry of a delivery that succeeded: only a failed delivery is retried.
    #[error("the delivery succeeded: only a failed delivery is retried")]
    AlreadySucceeded,
    /// A manual retry of a test ping: another test is another ping.
    #[error("a test delivery is not retried: send another test")]
    NotRetryable,
    /// An endpoint must subscribe to at least one event type.
    #[error("events must name at least one event type")]
    NoEvents,
    /// The URL's host is a literal private, loopback or link-local address (and the server
    /// does not allow private targets).
    #[error("url must not name a private, loopback or link-local address: webhooks go to the public internet")]
    PrivateTarget,
    /// The organization has as many endpoints as its plan allows.
    #[error("at most {} webhook endpoints on the {} plan: delete one first", .0.max, .0.plan.as_str())]
    TooManyEndpoints(EndpointLimit),
    /// The signing secret could not be sealed or opened.
    #[error(transparent)]
    Cipher(#[from] CipherError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An endpoint just created, with the secret shown this once.
#[derive(Clone, Debug, PartialEq)]
pub struct CreatedEndpoint {
    /// The endpoint as stored.
    pub endpoint: WebhookEndpoint,
    /// Its signing secret: shown in this response only, stored sealed.
    pub signing_secret: SigningSecret,
}

/// A new endpoint, as asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct NewEndpointRequest {
    /// Where deliveries go.
    pub url: WebhookUrl,
    /// The event types it subscribes to (at least one).
    pub events: Vec<EventType>,
    /// A note for people.
    pub description: EndpointDescription,
    /// A signing secret of the caller's; `None` makes one.
    pub secret: Option<SigningSecret>,
}

/// The fields of an endpoint update; `None` leaves a field.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndpointUpdate {
    /// A new URL; `None` keeps it.
    pub url: Option<WebhookUrl>,
    /// A new description; `None` keeps it.
    pub description: Option<EndpointDescription>,
    /// New event types to subscribe to; `None` keeps them.
    pub events: Option<Vec<EventType>>,
    /// A new signing secret; `None` keeps it.
    pub secret: Option<SigningSecret>,
    /// `false` stops deliveries; `true` turns the endpoint back on and clears its run of failures.
    pub is_active: Option<bool>,
}

service_ports! {
    /// The ports [`WebhookService`] uses.
    pub struct WebhookPorts { webhooks: WebhookStore, cipher: SecretCipher, sender: WebhookSender, clock: Clock, random: Random }
}

/// The endpoint use cases: reading endpoints and their delivery logs needs `webhooks.read`,
/// everything else `webhooks.manage`; each reaches only the actor's
/// organization.
#[derive(Clone)]
pub struct WebhookService {
    ports: WebhookPorts,
    /// `GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS`: endpoints may name private addresses.
    allow_private_targets: bool,
}

/// The context a sealed secret is bound to: its endpoint.
fn secret_context(id: EndpointId) -> [u8; 16] {
    *id.as_uuid().as_bytes()
}

impl WebhookService {
    /// A service on these ports.
    pub fn new(ports: WebhookPorts) -> Self {
        Self {
            ports,
            allow_private_targets: false,
        }
    }

    /// The same service, letting endpoints name private, loopback and link-local addresses
    /// when `allow` (`GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS`, for development and tests).
    pub fn allowing_private_targets(mut self, allow: bool) -> Self {
        self.allow_private_targets = allow;
        self
    }

    /// The target rule of an endpoint URL, at creation and at update (the sender checks every
    /// address again when it connects).
    fn check_target(&self, url: &WebhookUrl) -> Result<(), WebhookError> {
        if !self.allow_private_targets && url.names_private_address() {
            return Err(WebhookError::PrivateTarget);
        }
        Ok(())
    }

    fn seal(&self, id: EndpointId, secret: &SigningSecret) -> Result<Vec<u8>, CipherError> {
        self.ports
            .cipher
            .seal(secret.expose().as_bytes(), &secret_context(id))
    }

    /// The audit record of a webhook change in the actor's organization.
    fn record(
        &self,
        actor: &Actor,
        action: AuditAction,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        actor.audit(self.ports.random.as_ref(), now, action, origin)
    }

    /// Registers an endpoint; the answer holds its signing secret, shown once.
    pub async fn create(
        &self,
        actor: &Actor,
        endpoint: NewEndpointRequest,
        origin: &Origin,
    ) -> Result<CreatedEndpoint, WebhookError> {
        let NewEndpointRequest {
            url,
            events,
            description,
            secret,
        } = endpoint;
        actor.require(Permission::WebhooksManage)?;
        self.check_target(&url)?;
        let events = dedup(events).ok_or(WebhookError::NoEvents)?;
        let secret = secret.unwrap_or_else(|| {
            SigningSecret(
                self.ports
                    .random
                    .secret(TokenKind::WebhookSecret)
                    .expose()
                    .to_owned(),
            )
        });
        let now = self.ports.clock.now();
        let endpoint = WebhookEndpoint {
            id: EndpointId::from_uuid(self.ports.random.uuid()),
            organization_id: actor.organization_id(),
            url,
            description: description.into(),
            events,
            is_active: true,
            created_at: now,
            updated_at: now,
        };
        let secret_sealed = self.seal(endpoint.id, &secret)?;
        let record = self
            .record(actor, AuditAction::EndpointCreated, origin, now)
            .on(TargetKind::WebhookEndpoint, endpoint.id);
        self.ports
            .webhooks
            .create_endpoint(
                NewEndpoint {
                    endpoint: endpoint.clone(),
                    secret_sealed,
                },
                record,
            )
            .await?
            .map_err(WebhookError::TooManyEndpoints)?;
        Ok(CreatedEndpoint {
            endpoint,
            signing_secret: secret,
        })
    }

    /// The organization's endpoints, newest first, optionally only active or inactive ones.
    pub async fn list(
        &self,
        actor: &Actor,
        is_active: Option<bool>,
        page: PageRequest,
    ) -> Result<Page<WebhookEndpoint>, WebhookError> {
        actor.require(Permission::WebhooksRead)?;
        Ok(self
            .ports
            .webhooks
            .endpoints(actor.organization_id(), is_active, page)
            .await?)
    }

    /// One endpoint, with its delivery statistics.
    pub async fn get(&self, actor: &Actor, id: EndpointId) -> Result<EndpointDetail, WebhookError> {
        actor.require(Permission::WebhooksRead)?;
        self.ports
            .webhooks
            .endpoint(actor.organization_id(), id)
            .await?
            .ok_or(WebhookError::EndpointNotFound)
    }

    /// Changes an endpoint: only the fields the update names.
    pub async fn update(
        &self,
        actor: &Actor,
        id: EndpointId,
        update: EndpointUpdate,
        origin: &Origin,
    ) -> Result<WebhookEndpoint, WebhookError> {
        actor.require(Permission::WebhooksManage)?;
        if let Some(url) = &update.url {
            self.check_target(url)?;
        }
        let events = match update.events {
            Some(events) => Some(dedup(events).ok_or(WebhookError::NoEvents)?),
            None => None,
        };
        let secret_sealed = match &update.secret {
            Some(secret) => Some(self.seal(id, secret)?),
            None => None,
        };
        let change = EndpointChange {
            url: update.url,
            description: update.description.map(String::from),
            events,
            secret_sealed,
            is_active: update.is_active,
        };
        let now = self.ports.clock.now();
        let record = self
            .record(actor, AuditAction::EndpointUpdated, origin, now)
            .on(TargetKind::WebhookEndpoint, id);
        self.ports
            .webhooks
            .update_endpoint(actor.organization_id(), id, change, now, record)
            .await?
            .ok_or(WebhookError::EndpointNotFound)
    }

    /// Removes the endpoint; what was pending for it is never sent.
    pub async fn delete(
        &self,
        actor: &Actor,
        id: EndpointId,
        origin: &Origin,
    ) -> Result<(), WebhookError> {
        actor.require(Permission::WebhooksManage)?;
        let record = self
            .record(
                actor,
                AuditAction::EndpointDeleted,
                origin,
                self.ports.clock.now(),
            )
            .on(TargetKind::WebhookEndpoint, id);
        if self
            .ports
            .webhooks
            .delete_endpoint(actor.organization_id(), id, record)
            .await?
        {
            Ok(())
        } else {
            Err(WebhookError::EndpointNotFound)
        }
    }

    /// An endpoint's deliveries, newest first, filtered by status and event type.
    pub async fn deliveries(
        &self,
        actor: &Actor,
        endpoint: EndpointId,
        filter: DeliveryFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>, WebhookError> {
        actor.require(Permission::WebhooksRead)?;
        self.ports
            .webhooks
            .deliveries(actor.organization_id(), endpoint, filter, page)
            .await?
            .ok_or(WebhookError::EndpointNotFound)
    }

    /// Re-queues a failed (or delivered) delivery at once, as a new attempt.
    pub async fn retry(
        &self,
        actor: &Actor,
        id: DeliveryId,
        origin: &Origin,
    ) -> Result<Delivery, WebhookError> {
        actor.require(Permission::WebhooksManage)?;
        let now = self.ports.clock.now();
        let record = self
            .record(actor, AuditAction::DeliveryRetried, origin, now)
            .on(TargetKind::Delivery, id);
        match self
            .ports
            .webhooks
            .retry_delivery(actor.organization_id(), id, now, record)
            .await?
        {
            RetryOutcome::Queued(delivery) => Ok(delivery),
            RetryOutcome::AlreadyPending => Err(WebhookError::AlreadyPending),
            RetryOutcome::AlreadySucceeded => Err(WebhookError::AlreadySucceeded),
            RetryOutcome::NotRetryable => Err(WebhookError::NotRetryable),
            RetryOutcome::NotFound => Err(WebhookError::DeliveryNotFound),
        }
    }
}

impl WebhookService {
    /// Sends a signed `webhook.test` to the endpoint now (active or not), records it in the
    /// endpoint's delivery log as sent once, and says what came of it. It is never retried.
    pub async fn test(
        &self,
        actor: &Actor,
        id: EndpointId,
        origin: &Origin,
    ) -> Result<TestOutcome, WebhookError> {
        actor.require(Permission::WebhooksManage)?;
        let organization_id = actor.organization_id();
        let target = self
            .ports
            .webhooks
            .send_target(organization_id, id)
            .await?
            .ok_or(WebhookError::EndpointNotFound)?;
        let delivery_id = DeliveryId::from_uuid(self.ports.random.uuid());
        let event_id = EventId::from_uuid(self.ports.random.uuid());
        let started = self.ports.clock.now();
        let data = payloads::WebhookTest {
            message: payloads::TEST_MESSAGE,
            organization_id,
        }
        .into_data();
        let payload = delivery_payload(EventType::WebhookTest, started, &data, id, delivery_id);
        let sent = Sending {
            delivery_id,
            endpoint_id: id,
            url: &target.url,
            secret_sealed: &target.secret_sealed,
            event: EventType::WebhookTest,
            payload: &payload,
        };
        let answer = send_signed(&self.ports.cipher, &*self.ports.sender, &sent, started).await;
        let outcome = TestOutcome {
            delivery_id,
            success: answer.succeeded,
            status_code: answer.http_status,
            duration_ms: answer.duration_ms,
            error: answer.error(),
        };
        let recorded = self
            .ports
            .webhooks
            .record_test(SentTest {
                organization_id,
                event_id,
                data,
                payload,
                audit: self
                    .record(actor, AuditAction::WebhookTested, origin, started)
                    .on(TargetKind::WebhookEndpoint, id),
                record: AttemptRecord {
                    delivery_id,
                    endpoint_id: id,
                    lease: uuid::Uuid::nil(),
                    state: DeliveryState::sent_once(answer.succeeded),
                    http_status: answer.http_status,
                    response_body: answer.response_body,
                    duration_ms: answer.duration_ms,
                    attempted_at: started,
                    disable_after_failures: DISABLE_AFTER_FAILURES,
                },
            })
            .await?;
        if recorded {
            Ok(outcome)
        } else {
            Err(WebhookError::EndpointNotFound)
        }
    }
}

/// What a test ping came to, as the API answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestOutcome {
    /// The ping's delivery, in the endpoint's delivery log.
    pub delivery_id: DeliveryId,
    /// The receiver answered with a 2xx.
    pub success: bool,
    /// The receiver's HTTP status; `None` when it did not answer.
    pub status_code: Option<u16>,
    /// How long the attempt took, in milliseconds.
    pub duration_ms: u64,
    /// Why it failed: the error when the receiver did not answer, or its non-2xx status;
    /// `None` on success.
    pub error: Option<String>,
}

/// The body every attempt of a delivery sends and signs.
pub(super) fn delivery_payload(
    event: EventType,
    occurred_at: OffsetDateTime,
    data: &serde_json::Value,
    endpoint_id: EndpointId,
    delivery_id: DeliveryId,
) -> String {
    json!({
        "event": event,
        "timestamp": timestamp::format(occurred_at),
        "data": data,
        "webhook_id": endpoint_id,
        "delivery_id": delivery_id,
    })
    .to_string()
}

/// One delivery about to be sent: what is signed and where it goes.
pub(super) struct Sending<'a> {
    pub(super) delivery_id: DeliveryId,
    pub(super) endpoint_id: EndpointId,
    pub(super) url: &'a WebhookUrl,
    pub(super) secret_sealed: &'a [u8],
    pub(super) event: EventType,
    pub(super) payload: &'a str,
}

/// The signed request of an attempt made at `now`.
fn signed_request(
    cipher: &dyn SecretCipher,
    sending: &Sending<'_>,
    now: OffsetDateTime,
) -> Result<WebhookRequest, CipherError> {
    let secret = cipher.open(sending.secret_sealed, &secret_context(sending.endpoint_id))?;
    let timestamp = now.unix_timestamp();
    let body = sending.payload.as_bytes().to_vec();
    Ok(WebhookRequest {
        url: sending.url.clone(),
        headers: vec![
            ("Content-Type", "application/json".to_owned()),
            ("User-Agent", "Service-Webhooks/1.0".to_owned()),
            ("X-Service-Event", sending.event.as_str().to_owned()),
            ("X-Service-Delivery-ID", sending.delivery_id.to_string()),
            ("X-Service-Timestamp", timestamp.to_string()),
            ("X-Service-Signature", signature(&secret, timestamp, &body)),
        ],
        body,
    })
}

/// What one attempt came to, as the delivery log keeps it.
pub(super) struct ReceiverAnswer {
    pub(super) succeeded: bool,
    pub(super) http_status: Option<u16>,
    pub(super) response_body: Option<String>,
    pub(super) duration_ms: u64,
}

impl ReceiverAnswer {
    /// Why the attempt failed, for the test's answer; `None` when it succeeded.
    fn error(&self) -> Option<String> {
        match (self.succeeded, self.http_status) {
            (true, _) => None,
            (false, Some(status)) => Some(format!("the endpoint answered HTTP {status}")),
            (false, None) => Some(
                self.response_body
                    .clone()
                    .unwrap_or_else(|| "no answer".to_owned()),
            ),
        }
    }
}

/// Signs and sends one attempt at `started`; a secret that cannot be opened is a failed
/// attempt, as an unreachable receiver is.
pub(super) async fn send_signed(
    cipher: &Arc<dyn SecretCipher>,
    sender: &dyn WebhookSender,
    sending: &Sending<'_>,
    started: OffsetDateTime,
) -> ReceiverAnswer {
    let response = match signed_request(&**cipher, sending, started) {
        Ok(request) => sender.send(request).await,
        Err(error) => WebhookResponse::Failed {
            error: format!("the signing secret could not be opened: {error}"),
            duration_ms: 0,
        },
    };
    match response {
        WebhookResponse::Answered {
            status,
            body,
            duration_ms,
        } => ReceiverAnswer {
            succeeded: (200..300).contains(&status),
            http_status: Some(status),
            response_body: Some(body),
            duration_ms,
        },
        WebhookResponse::Failed { error, duration_ms } => ReceiverAnswer {
            succeeded: false,
            http_status: None,
            response_body: Some(error),
            duration_ms,
        },
    }
}

/// Event types in the order given, each once; `None` when empty.
fn dedup(events: Vec<EventType>) -> Option<Vec<EventType>> {
    let mut unique = Vec::with_capacity(events.len());
    for event in events {
        if !unique.contains(&event) {
            unique.push(event);
        }
    }
    (!unique.is_empty()).then_some(unique)
}
