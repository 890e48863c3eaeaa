//! The domain's `HeavyLanes` in process: a semaphore of [`HEAVY_REQUESTS_AT_ONCE`] permits per
//! organization, made when one of its heavy requests arrives and dropped when its last one
//! ends, so that the map holds only the organizations with heavy work under way.
//!
//! The bound is per process, not per cluster, on purpose: what it protects is this process's
//! threads and pooled connections, which a request elsewhere does not take.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use async_trait::async_trait;
use gatehouse_domain::{
    model::OrganizationId,
    ports::{HeavyLane, HeavyLanes, HEAVY_REQUESTS_AT_ONCE, HEAVY_REQUEST_WAIT},
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

type Lanes = Arc<Mutex<HashMap<OrganizationId, Arc<Semaphore>>>>;

/// Each organization's lanes for heavy requests, in this process.
#[derive(Clone)]
pub struct MemoryHeavyLanes {
    lanes: Lanes,
    at_once: usize,
    wait: Duration,
}

impl Default for MemoryHeavyLanes {
    fn default() -> Self {
        Self::new(HEAVY_REQUESTS_AT_ONCE, HEAVY_REQUEST_WAIT)
    }
}

impl MemoryHeavyLanes {
    /// `at_once` lanes per organization; a request waits up to `wait` for one.
    pub fn new(at_once: usize, wait: Duration) -> Self {
        Self {
            lanes: Lanes::default(),
            at_once,
            wait,
        }
    }

    /// The organizations with a heavy request under way or waiting.
    pub fn busy_organizations(&self) -> usize {
        self.lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A lane taken: gives the permit back, and forgets the organization's semaphore when no other
/// request holds or awaits it.
struct Taken {
    permit: Option<OwnedSemaphorePermit>,
    organization: OrganizationId,
    lanes: Lanes,
}

impl Drop for Taken {
    fn drop(&mut self) {
        drop(self.permit.take());
        forget_if_idle(&self.lanes, self.organization);
    }
}

/// Drops the organization's semaphore when the map holds the only handle on it: nobody holds a
/// permit of it or waits for one (each of those holds a handle too).
fn forget_if_idle(lanes: &Lanes, organization: OrganizationId) {
    let mut lanes = lanes.lock().unwrap_or_else(PoisonError::into_inner);
    if lanes
        .get(&organization)
        .is_some_and(|semaphore| Arc::strong_count(semaphore) == 1)
    {
        lanes.remove(&organization);
    }
}

#[async_trait]
impl HeavyLanes for MemoryHeavyLanes {
    async fn enter(&self, organization: OrganizationId) -> Option<HeavyLane> {
        let semaphore = Arc::clone(
            self.lanes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(organization)
                .or_insert_with(|| Arc::new(Semaphore::new(self.at_once))),
        );
        let permit = tokio::time::timeout(self.wait, semaphore.acquire_owned()).await;
        match permit {
            Ok(Ok(permit)) => Some(HeavyLane::new(Taken {
                permit: Some(permit),
                organization,
                lanes: Arc::clone(&self.lanes),
            })),
            // Waited too long (or the semaphore closed, which never happens): refused.
            Ok(Err(_)) | Err(_) => {
                forget_if_idle(&self.lanes, organization);
                None
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn org(n: u128) -> OrganizationId {
        OrganizationId::from_uuid(Uuid::from_u128(n))
    }

    const WAIT: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn an_organization_runs_two_heavy_requests_at_once_and_the_third_waits_then_is_refused() {
        let lanes = MemoryHeavyLanes::new(HEAVY_REQUESTS_AT_ONCE, WAIT);
        let first = lanes.enter(org(1)).await.unwrap();
        let _second = lanes.enter(org(1)).await.unwrap();
        // Another organization's lanes are its own.
        let theirs = lanes.enter(org(2)).await.unwrap();
        // The third waits for a lane, then is refused.
        let started = std::time::Instant::now();
        assert!(lanes.enter(org(1)).await.is_none());
        assert!(started.elapsed() >= WAIT);
        // One that waits while a lane frees takes it.
        let waiting = tokio::spawn({
            let lanes = lanes.clone();
            async move { lanes.enter(org(1)).await.is_some() }
        });
        tokio::time::sleep(WAIT / 3).await;
        drop(first);
        assert!(waiting.await.unwrap());
        drop(theirs);
        assert_eq!(lanes.busy_organizations(), 1);
    }

    #[tokio::test]
    async fn an_organization_without_heavy_requests_is_forgotten() {
        let lanes = MemoryHeavyLanes::new(HEAVY_REQUESTS_AT_ONCE, WAIT);
        let lane = lanes.enter(org(1)).await.unwrap();
        assert_eq!(lanes.busy_organizations(), 1);
        drop(lane);
        assert_eq!(lanes.busy_organizations(), 0);
        let (_a, _b) = (
            lanes.enter(org(1)).await.unwrap(),
            lanes.enter(org(1)).await.unwrap(),
        );
        assert!(lanes.enter(org(1)).await.is_none());
        assert_eq!(lanes.busy_organizations(), 1);
    }
}
