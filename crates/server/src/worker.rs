//! The background workers: the dispatcher turns outbox events into deliveries; the delivery
//! loop leases due deliveries and attempts them, with bounded concurrency in all and per
//! endpoint, so that one slow or dead endpoint never holds up the others.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use gatehouse_domain::{
    model::EndpointId,
    service::{AttemptOutcome, DeliveryEngine},
};
use tokio::{sync::Semaphore, task::JoinHandle};

/// How the workers run.
#[derive(Clone, Debug)]
pub struct WorkerSettings {
    /// Attempts in flight at once in this process.
    pub concurrency: usize,
    /// Attempts in flight at once to one endpoint from this process.
    pub per_endpoint: usize,
    /// How often an idle worker looks for work.
    pub poll_interval: Duration,
    /// How long a lease holds: the send timeout and a margin. A worker that dies leaves its
    /// leases to expire, and the deliveries are taken again.
    pub lease: Duration,
    /// Events dispatched per round.
    pub dispatch_batch: i64,
}

impl WorkerSettings {
    pub fn for_timeout(timeout: Duration) -> Self {
        Self {
            concurrency: 64,
            per_endpoint: 4,
            poll_interval: Duration::from_millis(100),
            lease: timeout + Duration::from_secs(30),
            dispatch_batch: 500,
        }
    }
}

/// Starts the dispatcher and the delivery loop.
pub fn spawn(engine: DeliveryEngine, settings: WorkerSettings) -> Vec<JoinHandle<()>> {
    let dispatcher = tokio::spawn(dispatch_loop(engine.clone(), settings.clone()));
    let deliverer = tokio::spawn(delivery_loop(engine, settings));
    vec![dispatcher, deliverer]
}

async fn dispatch_loop(engine: DeliveryEngine, settings: WorkerSettings) {
    loop {
        match engine.dispatch(settings.dispatch_batch).await {
            Ok(0) => tokio::time::sleep(settings.poll_interval).await,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "dispatching events failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Attempts in flight per endpoint.
#[derive(Default)]
struct InFlight(Mutex<HashMap<EndpointId, usize>>);

impl InFlight {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<EndpointId, usize>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, endpoint: EndpointId) -> usize {
        self.map().get(&endpoint).copied().unwrap_or(0)
    }

    fn busy(&self, limit: usize) -> Vec<EndpointId> {
        self.map()
            .iter()
            .filter(|(_, n)| **n >= limit)
            .map(|(id, _)| *id)
            .collect()
    }

    fn start(&self, endpoint: EndpointId) {
        *self.map().entry(endpoint).or_insert(0) += 1;
    }

    fn finish(&self, endpoint: EndpointId) {
        let mut map = self.map();
        if let Some(n) = map.get_mut(&endpoint) {
            *n -= 1;
            if *n == 0 {
                map.remove(&endpoint);
            }
        }
    }
}

async fn delivery_loop(engine: DeliveryEngine, settings: WorkerSettings) {
    let permits = Arc::new(Semaphore::new(settings.concurrency));
    let in_flight = Arc::new(InFlight::default());
    loop {
        let available = permits.available_permits();
        if available == 0 {
            // Wait for one attempt to finish.
            if let Ok(permit) = permits.clone().acquire_owned().await {
                drop(permit);
            }
            continue;
        }
        let ports = engine.ports();
        let now = ports.clock.now();
        let lease_until = now
            + chrono::Duration::from_std(settings.lease).unwrap_or(chrono::Duration::seconds(60));
        let leased = match ports
            .webhooks
            .lease_deliveries(
                now,
                lease_until,
                available as i64,
                in_flight.busy(settings.per_endpoint),
            )
            .await
        {
            Ok(leased) => leased,
            Err(error) => {
                tracing::warn!(%error, "leasing deliveries failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if leased.is_empty() {
            tokio::time::sleep(settings.poll_interval).await;
            continue;
        }
        let mut give_back = Vec::new();
        for delivery in leased {
            let endpoint = delivery.endpoint_id;
            if in_flight.count(endpoint) >= settings.per_endpoint {
                give_back.push((delivery.id, delivery.lease));
                continue;
            }
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                give_back.push((delivery.id, delivery.lease));
                continue;
            };
            in_flight.start(endpoint);
            let engine = engine.clone();
            let in_flight = in_flight.clone();
            tokio::spawn(async move {
                let id = delivery.id;
                match engine.attempt(delivery).await {
                    Ok(AttemptOutcome::Delivered) => {
                        tracing::debug!(delivery.id = %id, "delivered");
                    }
                    Ok(AttemptOutcome::Failed { retry_at }) => {
                        tracing::info!(delivery.id = %id, ?retry_at, "delivery attempt failed");
                    }
                    Ok(AttemptOutcome::Abandoned) => {
                        tracing::info!(delivery.id = %id, "delivery lease lost; not recorded");
                    }
                    Err(error) => {
                        tracing::warn!(delivery.id = %id, %error, "recording a delivery attempt failed; it will be retried when its lease expires");
                    }
                }
                in_flight.finish(endpoint);
                drop(permit);
            });
        }
        if !give_back.is_empty() {
            if let Err(error) = ports.webhooks.release_deliveries(give_back).await {
                tracing::warn!(%error, "giving back leases failed; they expire by themselves");
            }
        }
    }
}
