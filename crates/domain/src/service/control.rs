//! The control plane's use cases, for operators: every organization's stored events, the
//! deliveries that failed for good, their replay, and the gauges a metrics scrape reads.

use crate::{
    model::{Delivery, Operator, Page, PageRequest},
    ports::{
        service_ports, DeadLetterFilter, EventFilter, Gauges, ReplaySelection, StoreError,
        StoredEvent,
    },
};

/// The most deliveries one replay re-queues; a larger backlog takes more calls.
pub const MAX_REPLAY: u32 = 1_000;

service_ports! {
    /// The ports [`ControlService`] uses.
    pub struct ControlPorts { operations: OperationsStore, health: HealthStore, clock: Clock }
}

/// The operator's use cases.
#[derive(Clone)]
pub struct ControlService {
    ports: ControlPorts,
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
    /// more attempt with its `delivery_id` and body (at most [`MAX_REPLAY`] per call). Returns
    /// how many were re-queued.
    pub async fn replay(
        &self,
        _operator: &Operator,
        selection: ReplaySelection,
    ) -> Result<u64, ReplayError> {
        if let ReplaySelection::Deliveries(ids) = &selection {
            if ids.is_empty() {
                return Err(ReplayError::NothingSelected);
            }
            if ids.len() > MAX_REPLAY as usize {
                return Err(ReplayError::TooMany);
            }
        }
        Ok(self
            .ports
            .operations
            .replay(selection, self.ports.clock.now(), MAX_REPLAY)
            .await?)
    }

    /// What a metrics scrape reads at that moment: the deliveries with an attempt still to
    /// come, and the store's pools. Asks no proof: the caller is the operator's own metrics
    /// listener, or a handler that checked the token.
    pub async fn gauges(&self) -> Result<Gauges, StoreError> {
        Ok(Gauges {
            pending_deliveries: self.ports.operations.pending_deliveries().await?,
            pools: self.ports.health.pools(),
        })
    }
}
