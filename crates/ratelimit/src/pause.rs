//! How an adapter leaves an unreachable Redis alone for a while: after a failure, Redis is not
//! asked again for [`REDIS_PAUSE`], and the adapter counts in its own memory meanwhile, so an
//! outage costs one slow request (and one warning) per pause, not one per request.

use std::{
    future::Future,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// After Redis failed, how long an adapter counts in process before it tries Redis again.
pub const REDIS_PAUSE: Duration = Duration::from_secs(5);

/// When Redis last failed for one adapter, while that is less than [`REDIS_PAUSE`] ago.
#[derive(Debug, Default)]
pub(crate) struct Pause {
    failed_at: Mutex<Option<Instant>>,
}

impl Pause {
    fn failed_at(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        // Never held across an await; a poisoned lock still holds a moment or none.
        self.failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether Redis failed less than [`REDIS_PAUSE`] ago (then it is not asked).
    fn pausing(&self) -> bool {
        self.failed_at()
            .is_some_and(|at| at.elapsed() < REDIS_PAUSE)
    }

    /// What Redis answers to `call`, unless it failed less than [`REDIS_PAUSE`] ago (then
    /// `call` is not even started): `None` when it was not asked or failed, and the caller
    /// counts in process. A failure is logged (with `warning`) and starts a pause.
    pub(crate) async fn ask<T>(
        &self,
        warning: &'static str,
        call: impl Future<Output = Result<T, redis::RedisError>>,
    ) -> Option<T> {
        if self.pausing() {
            return None;
        }
        match call.await {
            Ok(answer) => {
                *self.failed_at() = None;
                Some(answer)
            }
            Err(error) => {
                tracing::warn!(%error, "{warning}");
                *self.failed_at() = Some(Instant::now());
                None
            }
        }
    }
}
