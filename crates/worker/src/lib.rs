//! The background workers: the dispatcher turns outbox events into deliveries; the delivery
//! loop leases due deliveries and attempts them, with bounded concurrency in all, per endpoint
//! and per organization, so that one slow or dead endpoint never holds up the others, and one
//! organization's endpoints never hold every slot. The store hands out due deliveries in their
//! turn (each organization's oldest before anyone's second), so that one organization's backlog
//! never delays another's fresh delivery by more than a turn.
//!
//! Neither loop sleeps while there is work. The dispatcher wakes as soon as a change commits its
//! events, in this process or (on PostgreSQL, by `NOTIFY`) in any replica: the store's outbox
//! signal; the delivery loop as soon as the dispatcher has made deliveries or an attempt has
//! freed a slot. The poll interval is only the longest either waits for work that a retry
//! schedule made due, or that another replica's dispatcher made.
//!
//! The mail loop sends the mail outbox: it wakes as soon as a change that queued mail commits
//! in this process (the store's mail signal), or at its poll for retries and other replicas'
//! mail, and sends each batch it leases at once.
//!
//! The per-endpoint bound holds for the cluster: the store counts every replica's held leases
//! when it leases. [`Workers::stop`] stops both loops, waits for the attempts in flight to be
//! sent and recorded, and gives back the leases of any still unsent when its time is up, so
//! that another replica takes them at once instead of when they expire.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use gatehouse_domain::{
    model::{DeliveryId, EndpointId, LeaseRoom, OrganizationId},
    ports::{AttemptRecord, DeliveryOutcome, LeasedDelivery, Metrics, StoreError},
    service::{AttemptOutcome, DeliveryEngine, MailCourier},
};
use tokio::{
    sync::{mpsc, Notify, OwnedSemaphorePermit, Semaphore},
    task::JoinHandle,
};

/// How the workers run.
#[derive(Clone, Debug)]
pub struct WorkerSettings {
    /// Attempts in flight at once in this process.
    pub concurrency: usize,
    /// Attempts in flight at once to one endpoint, from every replica on the store together.
    pub per_endpoint: usize,
    /// An organization's share of this process's attempts in flight (a quarter of
    /// `concurrency` by default): while other organizations' deliveries are due, no more go to
    /// its endpoints, so that an organization with slow receivers always leaves slots to
    /// everyone else; alone with work, it may use the free slots but a share's worth.
    pub per_organization: usize,
    /// How often an idle worker looks for work.
    pub poll_interval: Duration,
    /// How long a lease holds: the send timeout and a margin. A worker that dies leaves its
    /// leases to expire, and the deliveries are taken again.
    pub lease: Duration,
    /// Events dispatched per round.
    pub dispatch_batch: i64,
}

impl WorkerSettings {
    /// The settings for a send timeout and a per-endpoint limit: a lease lasts the timeout and
    /// 30 s more; 64 slots, at most 16 of them to one organization.
    pub fn new(timeout: Duration, per_endpoint: usize) -> Self {
        let concurrency = 64;
        Self {
            concurrency,
            per_endpoint: per_endpoint.max(1),
            per_organization: (concurrency / 4).max(1),
            poll_interval: Duration::from_millis(100),
            lease: timeout + Duration::from_secs(30),
            dispatch_batch: 100,
        }
    }

    /// The same settings with at most `attempts` in flight to one organization's endpoints
    /// (`GATEHOUSE_WEBHOOK_SLOTS_PER_ORGANIZATION`).
    #[must_use]
    pub fn per_organization(mut self, attempts: usize) -> Self {
        self.per_organization = attempts.max(1);
        self
    }

    /// The same settings with idle workers looking for work every `interval`
    /// (`GATEHOUSE_WEBHOOK_POLL_MS`).
    #[must_use]
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }
}

/// The running workers.
pub struct Workers {
    stop: CancellationToken,
    dispatcher: JoinHandle<()>,
    deliverer: JoinHandle<()>,
    mailer: JoinHandle<()>,
    in_flight: Arc<InFlight>,
    engine: DeliveryEngine,
}

/// What [`Workers::stop`] came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// Attempts still unsent when time was up, whose leases were given back.
    pub given_back: usize,
}

impl Workers {
    /// Stops leasing and dispatching, then waits up to `timeout` for the attempts in flight to
    /// be sent and recorded. The leases of attempts still under way then are given back (their
    /// deliveries are due again at once, for another replica; should such an attempt have
    /// reached its receiver, it is sent again: at least once, as ever).
    pub async fn stop(self, timeout: Duration) -> Stopped {
        self.stop.cancel();
        self.dispatcher.abort();
        let (delivered, mailed) = tokio::join!(
            tokio::time::timeout(timeout, self.deliverer),
            tokio::time::timeout(timeout, self.mailer)
        );
        if mailed.is_err() {
            tracing::warn!("mails were still being sent at the shutdown timeout; they are sent again when their lease ends");
        }
        let finished = delivered.is_ok();
        let unsent = self.in_flight.leases();
        let given_back = if finished { 0 } else { unsent.len() };
        if !finished && !unsent.is_empty() {
            match self
                .engine
                .ports()
                .delivery_queue
                .release_deliveries(unsent)
                .await
            {
                Ok(()) => tracing::info!(given_back, "gave back the leases of unsent deliveries"),
                Err(error) => {
                    tracing::warn!(%error, "giving back leases failed; they expire by themselves");
                }
            }
        }
        Stopped { given_back }
    }
}

/// Starts the dispatcher, which wakes on `events_committed` (the store's outbox signal) or its
/// poll, the delivery loop, which counts each recorded attempt in `metrics`, and the mail
/// loop, which wakes on `mail_queued` (the store's mail signal) or its poll.
pub fn spawn(
    engine: DeliveryEngine,
    courier: MailCourier,
    settings: WorkerSettings,
    metrics: Arc<dyn Metrics>,
    events_committed: Arc<Notify>,
    mail_queued: Arc<Notify>,
) -> Workers {
    let work = Arc::new(Notify::new());
    let stop = CancellationToken::new();
    let in_flight = Arc::new(InFlight::default());
    let dispatcher = tokio::spawn(dispatch_loop(
        engine.clone(),
        settings.clone(),
        events_committed,
        work.clone(),
    ));
    let deliverer = tokio::spawn(delivery_loop(
        engine.clone(),
        settings,
        work,
        metrics,
        in_flight.clone(),
        stop.clone(),
    ));
    let mailer = tokio::spawn(mail_loop(courier, mail_queued, stop.clone()));
    Workers {
        stop,
        dispatcher,
        deliverer,
        mailer,
        in_flight,
        engine,
    }
}

/// Dispatches while there are events, then waits for `events_committed` or the poll interval;
/// `work` is told whenever deliveries may have become due in this process.
async fn dispatch_loop(
    engine: DeliveryEngine,
    settings: WorkerSettings,
    events_committed: Arc<Notify>,
    work: Arc<Notify>,
) {
    loop {
        match engine.dispatch(settings.dispatch_batch).await {
            Ok(0) => idle(&events_committed, &settings).await,
            Ok(_) => work.notify_one(),
            Err(error) => {
                tracing::warn!(%error, "dispatching events failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Mails leased and sent at once, at most.
const MAIL_BATCH: u32 = 16;

/// How long the mail loop waits, idle, before it looks for mail due again (a retry, another
/// replica's mail) when no change in this process queued any.
const MAIL_POLL: Duration = Duration::from_secs(1);

/// Sends the mail outbox until `stop`: leases a batch of due mails, sends them all at once and
/// records each outcome, then leases again while batches come full, else waits for
/// `mail_queued` or [`MAIL_POLL`].
async fn mail_loop(courier: MailCourier, mail_queued: Arc<Notify>, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let leased = match courier.lease(MAIL_BATCH).await {
            Ok(leased) => leased,
            Err(error) => {
                tracing::warn!(%error, "leasing mail failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(MAIL_POLL) => {}
                    () = stop.cancelled() => {}
                }
                continue;
            }
        };
        let full = leased.len() == MAIL_BATCH as usize;
        let mut sending = tokio::task::JoinSet::new();
        for mail in leased {
            let courier = courier.clone();
            sending.spawn(async move { courier.deliver(mail).await });
        }
        while let Some(outcome) = sending.join_next().await {
            match outcome {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "a mail's outcome was not recorded; it is taken again when its lease ends")
                }
                Err(error) => {
                    tracing::error!(%error, "sending a mail failed unexpectedly; it is taken again when its lease ends")
                }
            }
        }
        if !full {
            tokio::select! {
                _ = tokio::time::timeout(MAIL_POLL, mail_queued.notified()) => {}
                () = stop.cancelled() => {}
            }
        }
    }
}

/// Attempts in flight per endpoint and per organization.
#[derive(Default)]
struct InFlight(Mutex<Counts>);

/// The counts of [`InFlight`]: none at zero; and the lease of each attempt in flight.
#[derive(Default)]
struct Counts {
    endpoints: HashMap<EndpointId, usize>,
    organizations: HashMap<OrganizationId, usize>,
    leases: HashMap<DeliveryId, Uuid>,
}

impl InFlight {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// In flight at `endpoint`, and to the endpoints of `organization`.
    fn count(&self, endpoint: EndpointId, organization: OrganizationId) -> (usize, usize) {
        let counts = self.counts();
        (
            counts.endpoints.get(&endpoint).copied().unwrap_or(0),
            counts
                .organizations
                .get(&organization)
                .copied()
                .unwrap_or(0),
        )
    }

    /// What a lease can take on now, with `total` free slots.
    fn room(&self, total: usize, settings: &WorkerSettings) -> LeaseRoom {
        let counts = self.counts();
        let room = LeaseRoom::new(total, settings.per_endpoint)
            .per_organization(settings.per_organization);
        let room = counts
            .endpoints
            .iter()
            .fold(room, |room, (id, n)| room.with_in_flight(*id, *n));
        counts
            .organizations
            .iter()
            .fold(room, |room, (id, n)| room.with_in_flight_of(*id, *n))
    }

    fn start(&self, attempt: Attempt) {
        let mut counts = self.counts();
        *counts.endpoints.entry(attempt.endpoint).or_insert(0) += 1;
        *counts
            .organizations
            .entry(attempt.organization)
            .or_insert(0) += 1;
        counts.leases.insert(attempt.delivery, attempt.lease);
    }

    fn finish(&self, attempt: Attempt) {
        let mut counts = self.counts();
        decrement(&mut counts.endpoints, attempt.endpoint);
        decrement(&mut counts.organizations, attempt.organization);
        counts.leases.remove(&attempt.delivery);
    }

    /// The deliveries in flight and their leases.
    fn leases(&self) -> Vec<(DeliveryId, Uuid)> {
        self.counts()
            .leases
            .iter()
            .map(|(id, lease)| (*id, *lease))
            .collect()
    }
}

/// One fewer at `key`; the entry goes at zero.
fn decrement<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: K) {
    if let Some(n) = map.get_mut(&key) {
        *n -= 1;
        if *n == 0 {
            map.remove(&key);
        }
    }
}

/// An attempt in flight: its delivery and lease, where it goes and whose it is.
#[derive(Clone, Copy)]
struct Attempt {
    delivery: DeliveryId,
    lease: Uuid,
    endpoint: EndpointId,
    organization: OrganizationId,
}

impl Attempt {
    fn of(delivery: &LeasedDelivery) -> Self {
        Self {
            delivery: delivery.id,
            lease: delivery.lease,
            endpoint: delivery.endpoint_id,
            organization: delivery.organization_id,
        }
    }
}

/// One attempt's place in the worker: a concurrency permit and a count at its endpoint and its
/// organization, all given back, and the delivery loop woken, when it is dropped (after the
/// attempt is recorded, or if it could not be).
struct Slot {
    attempt: Attempt,
    in_flight: Arc<InFlight>,
    work: Arc<Notify>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.in_flight.finish(self.attempt);
        self.work.notify_one();
    }
}

/// A sent attempt on its way to be recorded.
struct Sent {
    delivery: LeasedDelivery,
    record: AttemptRecord,
    slot: Slot,
}

/// Waits for `work` (new events or deliveries, or a freed slot) or the poll interval, whichever
/// first.
async fn idle(work: &Notify, settings: &WorkerSettings) {
    let _ = tokio::time::timeout(settings.poll_interval, work.notified()).await;
}

/// Attempts recorded in one transaction at most.
const RECORD_BATCH: usize = 64;

/// Leases and sends until `stop`, then returns once every attempt in flight has been sent and
/// recorded.
async fn delivery_loop(
    engine: DeliveryEngine,
    settings: WorkerSettings,
    work: Arc<Notify>,
    metrics: Arc<dyn Metrics>,
    in_flight: Arc<InFlight>,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(settings.concurrency));
    let (sent, to_record) = mpsc::channel::<Sent>(settings.concurrency.max(1));
    let recorder = tokio::spawn(record_loop(engine.clone(), to_record, metrics));
    // Told to stop, the loop leases no more; a lease under way is not cut short (what it took
    // is sent), so the check is between leases.
    while !stop.is_cancelled() {
        let available = permits.available_permits();
        if available == 0 {
            // Every slot is taken: an attempt that is recorded tells `work`.
            tokio::select! {
                () = work.notified() => {}
                () = stop.cancelled() => {}
            }
            continue;
        }
        let ports = engine.ports();
        let now = ports.clock.now();
        let lease_until =
            now + time::Duration::try_from(settings.lease).unwrap_or(time::Duration::seconds(60));
        let room = in_flight.room(available, &settings);
        let wanted = room.total();
        let leased = match ports
            .delivery_queue
            .lease_deliveries(now, lease_until, room, ports.random.uuid())
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
            // Nothing due, or only at endpoints or organizations already at their limit.
            idle_until_stopped(&work, &settings, &stop).await;
            continue;
        }
        // A lease that took less than it had room for took what fits now (all of it, unless
        // more than its scan of candidates belonged to endpoints near their limit): another
        // before a slot frees, the dispatcher makes deliveries or the poll interval passes
        // would find nothing (on PostgreSQL, a third of all leases in a fan-out before this
        // wait; docs/benchmarks.md).
        let took_all_that_fits = leased.len() < wanted;
        // The lease took only what fits; this guards the endpoint's limit should that ever
        // change. (An organization's share binds only while others wait, which the lease
        // alone knows: it is not checked again here.)
        let mut give_back = Vec::new();
        for delivery in leased {
            let attempt = Attempt::of(&delivery);
            let (at_endpoint, _) = in_flight.count(attempt.endpoint, attempt.organization);
            if at_endpoint >= settings.per_endpoint {
                give_back.push((delivery.id, delivery.lease));
                continue;
            }
            let Ok(permit) = permits.clone().try_acquire_owned() else {
                give_back.push((delivery.id, delivery.lease));
                continue;
            };
            in_flight.start(attempt);
            let slot = Slot {
                attempt,
                in_flight: in_flight.clone(),
                work: work.clone(),
                _permit: permit,
            };
            let engine = engine.clone();
            let sent = sent.clone();
            tokio::spawn(async move {
                let record = engine.send(&delivery).await;
                // Should the recorder be gone, the slot is freed here and the lease expires.
                let _ = sent
                    .send(Sent {
                        delivery,
                        record,
                        slot,
                    })
                    .await;
            });
        }
        if !give_back.is_empty() {
            if let Err(error) = ports.delivery_queue.release_deliveries(give_back).await {
                tracing::warn!(%error, "giving back leases failed; they expire by themselves");
            }
        }
        if took_all_that_fits {
            idle_until_stopped(&work, &settings, &stop).await;
        }
    }
    // The attempts in flight hold the other senders: the recorder ends once they are recorded.
    drop(sent);
    let _ = recorder.await;
}

/// [`idle`], or until `stop`.
async fn idle_until_stopped(work: &Notify, settings: &WorkerSettings, stop: &CancellationToken) {
    tokio::select! {
        () = idle(work, settings) => {}
        () = stop.cancelled() => {}
    }
}

/// Records sent attempts, as many as are waiting (up to [`RECORD_BATCH`]) in one transaction:
/// the store's write per attempt is the fan-out's bottleneck otherwise (`docs/benchmarks.md`).
async fn record_loop(
    engine: DeliveryEngine,
    mut to_record: mpsc::Receiver<Sent>,
    metrics: Arc<dyn Metrics>,
) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while to_record.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        let (attempts, slots): (Vec<_>, Vec<_>) = batch
            .drain(..)
            .map(|sent| ((sent.delivery, sent.record), sent.slot))
            .unzip();
        match engine.record(attempts.clone()).await {
            Ok(outcomes) => report(&attempts, outcomes, metrics.as_ref()),
            Err(error) if attempts.len() > 1 => {
                // Record them one by one, so that one bad record costs only its own attempt.
                tracing::warn!(%error, attempts = attempts.len(), "recording a batch of attempts failed; recording them one by one");
                for attempt in attempts {
                    let one = [attempt];
                    match engine.record(one.to_vec()).await {
                        Ok(outcomes) => report(&one, outcomes, metrics.as_ref()),
                        Err(error) => log_unrecorded(one[0].0.id, &error),
                    }
                }
            }
            Err(error) => attempts
                .iter()
                .for_each(|(delivery, _)| log_unrecorded(delivery.id, &error)),
        }
        drop(slots);
    }
}

/// Logs and counts what the recorded attempts came to.
fn report(
    attempts: &[(LeasedDelivery, AttemptRecord)],
    outcomes: Vec<AttemptOutcome>,
    metrics: &dyn Metrics,
) {
    for ((delivery, record), outcome) in attempts.iter().zip(outcomes) {
        let id = delivery.id;
        match outcome {
            AttemptOutcome::Delivered => {
                tracing::debug!(delivery.id = %id, "delivered");
                // From the change's commit to the receiver's answer.
                let received = record.attempted_at + Duration::from_millis(record.duration_ms);
                let latency = (received - delivery.created_at)
                    .try_into()
                    .unwrap_or(Duration::ZERO);
                metrics.delivery(DeliveryOutcome::Delivered, Some(latency));
            }
            AttemptOutcome::Failed { retry_at } => {
                tracing::info!(delivery.id = %id, ?retry_at, "delivery attempt failed");
                let outcome = match retry_at {
                    Some(_) => DeliveryOutcome::Retrying,
                    None => DeliveryOutcome::Dead,
                };
                metrics.delivery(outcome, None);
            }
            AttemptOutcome::Abandoned => {
                tracing::info!(delivery.id = %id, "delivery lease lost; not recorded");
                metrics.delivery(DeliveryOutcome::Abandoned, None);
            }
        }
    }
}

fn log_unrecorded(id: DeliveryId, error: &StoreError) {
    tracing::warn!(delivery.id = %id, %error, "recording a delivery attempt failed; it will be retried when its lease expires");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_organizations_attempts_in_flight_bound_what_the_next_lease_may_take() {
        let settings = WorkerSettings::new(Duration::from_secs(10), 4).per_organization(2);
        let [a, b] = [1, 2].map(|n| EndpointId::from_uuid(uuid_of(n)));
        let [noisy, quiet] = [7, 8].map(|n| OrganizationId::from_uuid(uuid_of(n)));
        let in_flight = InFlight::default();
        let attempt = |n: u128, endpoint, organization| Attempt {
            delivery: DeliveryId::from_uuid(uuid_of(n)),
            lease: uuid_of(100),
            endpoint,
            organization,
        };
        let (first, second) = (attempt(11, a, noisy), attempt(12, b, noisy));
        in_flight.start(first);
        in_flight.start(second);
        assert_eq!(in_flight.leases().len(), 2);
        assert_eq!(in_flight.count(a, noisy), (1, 2));
        // One slot free: noisy is at its share and quiet waits, so quiet's.
        let candidates = [(1, a, noisy), (2, b, quiet)];
        assert_eq!(in_flight.room(1, &settings).pick(candidates), [2]);

        in_flight.finish(first);
        assert_eq!(in_flight.count(a, noisy), (0, 1));
        assert_eq!(
            in_flight.room(1, &settings).pick(candidates),
            [1],
            "noisy has room in its share again: its oldest first"
        );
        in_flight.finish(second);
        assert_eq!(in_flight.count(b, noisy), (0, 0));
        assert!(
            in_flight.counts().organizations.is_empty(),
            "none kept at zero"
        );
        assert!(in_flight.leases().is_empty());
    }

    fn uuid_of(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }
}
