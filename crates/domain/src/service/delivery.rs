//! The delivery engine the workers run: outbox events turned into deliveries, each attempt
//! signed, sent and recorded, an endpoint turned off after a run of failures and its owner
//! told. The endpoint use cases behind the API are in `webhooks.rs`.

use std::{
    collections::{hash_map::Entry, HashMap},
    sync::Arc,
};

use time::OffsetDateTime;

use super::webhooks::{delivery_payload, send_signed, Sending, DISABLE_AFTER_FAILURES};
use crate::{
    model::{
        DeliveryId, EndpointId, EventType, MemberFilter, OrganizationId, PageRequest,
        RetrySchedule, Role, RoleRef,
    },
    ports::{service_ports, AttemptRecord, LeasedDelivery, Mail, NewDelivery, StoreError},
};

/// How the delivery engine behaves.
#[derive(Clone, Debug)]
pub struct DeliverySettings {
    /// When failed attempts are retried.
    pub schedule: RetrySchedule,
    /// Consecutive failed attempts, across deliveries, that turn an endpoint off.
    pub disable_after_failures: u32,
}

impl Default for DeliverySettings {
    fn default() -> Self {
        Self {
            schedule: RetrySchedule::default(),
            disable_after_failures: DISABLE_AFTER_FAILURES,
        }
    }
}

/// What one attempt came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The endpoint answered with a 2xx.
    Delivered,
    /// Failed; retried at the time given, or never again.
    Failed {
        /// When the next attempt is due; `None` after the last automatic one.
        retry_at: Option<OffsetDateTime>,
    },
    /// The lease was lost (another worker, or the endpoint is gone): nothing was recorded.
    Abandoned,
}

service_ports! {
    /// The ports [`DeliveryEngine`] uses.
    pub struct DeliveryPorts { delivery_queue: DeliveryQueue, cipher: SecretCipher, sender: WebhookSender, members: MemberStore, mail_queue: MailQueue, clock: Clock, random: Random }
}

/// Turns outbox events into deliveries and makes delivery attempts. The workers that drive it
/// (how many, how often) live in the server.
#[derive(Clone)]
pub struct DeliveryEngine {
    ports: DeliveryPorts,
    settings: Arc<DeliverySettings>,
}

impl DeliveryEngine {
    /// An engine on these ports, with these settings.
    pub fn new(ports: DeliveryPorts, settings: DeliverySettings) -> Self {
        Self {
            ports,
            settings: Arc::new(settings),
        }
    }

    /// The ports, for the workers that lease and release deliveries.
    pub fn ports(&self) -> &DeliveryPorts {
        &self.ports
    }

    /// Dispatches up to `limit` outbox events, in one store transaction: one delivery per
    /// active endpoint of the event's organization subscribed to its type. Returns how many
    /// events were dispatched.
    pub async fn dispatch(&self, limit: i64) -> Result<usize, StoreError> {
        let events = self.ports.delivery_queue.pending_events(limit).await?;
        let count = events.len();
        if count == 0 {
            return Ok(0);
        }
        // An organization's subscribers to a type are read once per batch.
        let mut subscribers: HashMap<(OrganizationId, EventType), Vec<EndpointId>> = HashMap::new();
        let mut dispatched = Vec::with_capacity(count);
        for event in events {
            let endpoints = match event.organization_id {
                Some(organization) => match subscribers.entry((organization, event.event_type)) {
                    Entry::Occupied(known) => known.get().clone(),
                    Entry::Vacant(unknown) => unknown
                        .insert(
                            self.ports
                                .delivery_queue
                                .subscribed_endpoints(organization, event.event_type)
                                .await?,
                        )
                        .clone(),
                },
                None => Vec::new(),
            };
            let deliveries = endpoints
                .into_iter()
                .map(|endpoint_id| {
                    let id = DeliveryId::from_uuid(self.ports.random.uuid());
                    NewDelivery {
                        id,
                        endpoint_id,
                        payload: delivery_payload(
                            event.event_type,
                            event.occurred_at,
                            &event.data,
                            endpoint_id,
                            id,
                        ),
                    }
                })
                .collect();
            dispatched.push((event.id, deliveries));
        }
        self.ports
            .delivery_queue
            .dispatch_events(dispatched, self.ports.clock.now())
            .await?;
        Ok(count)
    }

    /// Makes one attempt of a leased delivery and records it (see [`Self::send`] and
    /// [`Self::record`], which the workers call apart to record attempts in batches).
    pub async fn attempt(&self, delivery: LeasedDelivery) -> Result<AttemptOutcome, StoreError> {
        let record = self.send(&delivery).await;
        let outcomes = self.record(vec![(delivery, record)]).await?;
        Ok(outcomes
            .into_iter()
            .next()
            .unwrap_or(AttemptOutcome::Abandoned))
    }

    /// Sends one attempt of a leased delivery and says what is to be recorded of it: on
    /// failure when the next attempt is due, if there is one.
    pub async fn send(&self, delivery: &LeasedDelivery) -> AttemptRecord {
        let started = self.ports.clock.now();
        let sending = Sending {
            delivery_id: delivery.id,
            endpoint_id: delivery.endpoint_id,
            url: &delivery.url,
            secret_sealed: &delivery.secret_sealed,
            event: delivery.event,
            payload: &delivery.payload,
        };
        let answer = send_signed(&self.ports.cipher, &*self.ports.sender, &sending, started).await;
        let finished = self.ports.clock.now();
        // A leased delivery always has an attempt due; were it not so, recording the state
        // unchanged loses nothing.
        let state = delivery
            .state
            .attempted(answer.succeeded, finished, &self.settings.schedule)
            .unwrap_or(delivery.state);
        AttemptRecord {
            delivery_id: delivery.id,
            endpoint_id: delivery.endpoint_id,
            lease: delivery.lease,
            state,
            http_status: answer.http_status,
            response_body: answer.response_body,
            duration_ms: answer.duration_ms,
            attempted_at: started,
            disable_after_failures: self.settings.disable_after_failures,
        }
    }

    /// Records sent attempts in one transaction: a failure schedules the next attempt, or
    /// fails the delivery for good; five failures in a row deactivate the endpoint and its
    /// organization's owner is told by mail. One outcome per attempt, in order.
    pub async fn record(
        &self,
        attempts: Vec<(LeasedDelivery, AttemptRecord)>,
    ) -> Result<Vec<AttemptOutcome>, StoreError> {
        let records = attempts.iter().map(|(_, record)| record.clone()).collect();
        let effects = self.ports.delivery_queue.record_attempts(records).await?;
        let mut outcomes = Vec::with_capacity(attempts.len());
        for ((delivery, record), effects) in attempts.iter().zip(effects) {
            let Some(effects) = effects else {
                outcomes.push(AttemptOutcome::Abandoned);
                continue;
            };
            if effects.endpoint_disabled {
                self.tell_owner_endpoint_disabled(delivery).await;
            }
            outcomes.push(if record.succeeded() {
                AttemptOutcome::Delivered
            } else {
                AttemptOutcome::Failed {
                    retry_at: record.state.next_attempt_at(),
                }
            });
        }
        Ok(outcomes)
    }

    async fn tell_owner_endpoint_disabled(&self, delivery: &LeasedDelivery) {
        let owners = self
            .ports
            .members
            .members(
                delivery.organization_id,
                MemberFilter {
                    role: Some(RoleRef::BuiltIn(Role::Owner)),
                    search: None,
                    active_only: true,
                },
                PageRequest::default(),
                self.ports.clock.now(),
            )
            .await;
        let owner = match owners {
            Ok(page) => page.into_items().into_iter().next(),
            Err(error) => {
                tracing::warn!(%error, "cannot find the owner to tell of a disabled endpoint");
                None
            }
        };
        let Some(owner) = owner else { return };
        let mail = Mail::new(
            owner.email,
            "A webhook endpoint was disabled after repeated failures".to_owned(),
            format!(
                "The webhook endpoint {id} ({url}) failed {n} deliveries in a row and has been \
                 disabled: no events are sent to it now.\n\nFix the receiver, then turn the \
                 endpoint back on (PATCH /api/v1/webhooks/endpoints/{id} with \
                 {{\"is_active\": true}}) and retry the failed deliveries.\n",
                id = delivery.endpoint_id,
                url = delivery.url.as_ref(),
                n = self.settings.disable_after_failures,
            ),
        );
        let sealed = match super::mail::seal(
            self.ports.cipher.as_ref(),
            self.ports.random.as_ref(),
            &mail,
        ) {
            Ok(sealed) => sealed,
            Err(error) => {
                tracing::warn!(%error, endpoint.id = %delivery.endpoint_id, "the disabled-endpoint mail could not be sealed");
                return;
            }
        };
        let queued = self
            .ports
            .mail_queue
            .queue_mail(sealed, self.ports.clock.now())
            .await;
        if let Err(error) = queued {
            tracing::warn!(%error, endpoint.id = %delivery.endpoint_id, "the disabled-endpoint mail could not be queued");
        }
    }
}
